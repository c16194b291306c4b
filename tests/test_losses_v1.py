"""tf.compat.v1.losses (jitgrad/losses_v1.py) against numpy: TF 1's element losses, the weights
(scalar, or of the losses' rank with dimensions 1 or the losses') and the reductions, the default
being the weighted sum over the number of non-zero weights; the loss collection in graphs."""
import numpy as np
import pytest

import jitgrad as tf

v1 = tf.compat.v1
L = v1.losses
R = L.Reduction
rng = np.random.default_rng(0)
LAB = rng.random((4, 3)).astype(np.float32)
PRED = rng.random((4, 3)).astype(np.float32)
LOGITS = rng.standard_normal((4, 3)).astype(np.float32)
CLASSES = np.array([0, 2, 1, 2])
W_COL = np.array([[1.], [0.], [2.], [0.5]], np.float32)
W_FULL = np.array([[1, 0, 1], [0, 0, 1], [1, 1, 1], [0, 1, 0]], np.float32)


@pytest.fixture(params=["eager", "graph"])
def run(request):
    if request.param == "eager":
        return lambda t: t.numpy()
    v1.disable_eager_execution()

    def run(t):
        with v1.Session() as s:
            return s.run(t)
    return run


def _reduce(elems, w, reduction):
    weighted = elems * w
    if reduction == R.NONE:
        return weighted
    total = weighted.sum()
    count = {R.SUM: 1., R.SUM_OVER_BATCH_SIZE: elems.size, R.MEAN: (np.ones_like(elems) * w).sum(),
             R.SUM_BY_NONZERO_WEIGHTS: (np.broadcast_to(np.asarray(w), elems.shape) != 0).sum()}[reduction]
    return total / count if count else 0.


def _log_softmax(x):
    m = x.max(-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(-1, keepdims=True))


def _sigmoid_xent(z, x):
    return np.maximum(x, 0) - x * z + np.log1p(np.exp(-np.abs(x)))


ELEMENT_LOSSES = {
    "mean_squared_error": (lambda **k: L.mean_squared_error(LAB, PRED, **k), (PRED - LAB) ** 2),
    "absolute_difference": (lambda **k: L.absolute_difference(LAB, PRED, **k), np.abs(PRED - LAB)),
    "huber_loss": (lambda **k: L.huber_loss(3 * LAB, PRED, delta=0.7, **k),
                   np.where(np.abs(PRED - 3 * LAB) <= 0.7, 0.5 * (PRED - 3 * LAB) ** 2,
                            0.5 * 0.49 + 0.7 * (np.abs(PRED - 3 * LAB) - 0.7))),
    "log_loss": (lambda **k: L.log_loss(LAB, PRED, **k),
                 -LAB * np.log(PRED + 1e-7) - (1 - LAB) * np.log(1 - PRED + 1e-7)),
    "hinge_loss": (lambda **k: L.hinge_loss((LAB > .5).astype(np.float32), LOGITS, **k),
                   np.maximum(0, 1 - (2 * (LAB > .5) - 1) * LOGITS)),
    "sigmoid_cross_entropy": (lambda **k: L.sigmoid_cross_entropy(LAB, LOGITS, **k), _sigmoid_xent(LAB, LOGITS)),
    "sigmoid_cross_entropy_smoothed": (lambda **k: L.sigmoid_cross_entropy(LAB, LOGITS, label_smoothing=0.2, **k),
                                       _sigmoid_xent(LAB * 0.8 + 0.1, LOGITS)),
}


@pytest.mark.parametrize("name", sorted(ELEMENT_LOSSES))
@pytest.mark.parametrize("reduction", [R.NONE, R.SUM, R.SUM_OVER_BATCH_SIZE, R.MEAN, R.SUM_BY_NONZERO_WEIGHTS])
def test_element_losses_and_reductions(run, name, reduction):
    fn, elems = ELEMENT_LOSSES[name]
    for w in (1.0, W_COL, W_FULL, 0.0):
        out = run(fn(weights=w, reduction=reduction))
        np.testing.assert_allclose(out, _reduce(elems, w, reduction), rtol=2e-6, atol=1e-7)


def test_default_reduction_is_sum_by_nonzero_weights(run):
    fn, elems = ELEMENT_LOSSES["mean_squared_error"]
    np.testing.assert_allclose(run(fn(weights=W_COL)), (elems * W_COL).sum() / 9, rtol=1e-6)
    # a scalar tensor weight: every element counts (eagerly: TF's shortcut; in graphs: broadcast)
    np.testing.assert_allclose(run(fn(weights=tf.constant(2.))), 2 * elems.mean(), rtol=1e-6)


def test_softmax_cross_entropies(run):
    onehot = np.eye(3, dtype=np.float32)[CLASSES]
    elems = -(onehot * _log_softmax(LOGITS)).sum(-1)
    w_row = np.array([1., 0., 2., .5], np.float32)
    np.testing.assert_allclose(run(L.softmax_cross_entropy(onehot, LOGITS)), elems.mean(), rtol=1e-6)
    np.testing.assert_allclose(run(L.softmax_cross_entropy(onehot, LOGITS, w_row)), (elems * w_row).sum() / 3,
                               rtol=1e-6)
    smoothed = onehot * 0.9 + 0.1 / 3
    np.testing.assert_allclose(run(L.softmax_cross_entropy(onehot, LOGITS, label_smoothing=0.1)),
                               -(smoothed * _log_softmax(LOGITS)).sum(-1).mean(), rtol=1e-6)
    for labels in (CLASSES, CLASSES[:, None]):          # labels [batch] or [batch, 1]
        for w in (w_row, w_row[:, None]):               # weights likewise
            np.testing.assert_allclose(run(L.sparse_softmax_cross_entropy(labels, LOGITS, w)),
                                       (elems * w_row).sum() / 3, rtol=1e-6)


def test_cosine_distance(run):
    elems = 1 - (LAB * PRED).sum(1, keepdims=True)
    np.testing.assert_allclose(run(L.cosine_distance(LAB, PRED, axis=1, weights=W_COL)),
                               (elems * W_COL).sum() / 3, rtol=1e-6)
    np.testing.assert_allclose(run(L.cosine_distance(LAB, PRED, dim=0)),
                               (1 - (LAB * PRED).sum(0)).mean(), rtol=1e-5)
    with pytest.raises(ValueError, match="axis"):
        L.cosine_distance(LAB, PRED)


def test_float64_passes_through_float32_and_back(run):
    losses = LAB.astype(np.float64) / 3
    out = L.compute_weighted_loss(losses)
    assert out.dtype == tf.float64
    assert run(out) == np.float64(np.float32(losses.astype(np.float32).sum()) / np.float32(12))


def test_bad_arguments():
    with pytest.raises(ValueError, match="weights can not be broadcast"):
        L.mean_squared_error(LAB, PRED, np.ones(4, np.float32))       # [batch] weights on [batch, 3]
    with pytest.raises(ValueError, match="weights can not be broadcast"):
        L.cosine_distance(LAB, PRED, axis=1, weights=W_FULL)
    with pytest.raises(ValueError, match="incompatible"):
        L.mean_squared_error(LAB, PRED[:, :2])
    with pytest.raises(ValueError, match="Invalid Reduction Key"):
        L.mean_squared_error(LAB, PRED, reduction="mean")


def test_loss_collection_and_training():
    v1.disable_eager_execution()
    x = v1.placeholder(tf.float32, [None, 3])
    w = tf.Variable(np.zeros((3, 1), np.float32))
    target = LAB @ np.array([[1.], [-2.], [.5]], np.float32)
    loss = L.mean_squared_error(target, tf.matmul(x, w))
    L.absolute_difference(target, tf.matmul(x, w), loss_collection=None)   # not collected
    assert L.get_losses() == [loss] and loss.name == "mean_squared_error/value:0"
    total = L.get_total_loss()
    assert total.name == "total_loss:0"
    step = v1.train.GradientDescentOptimizer(0.5).minimize(total)
    with v1.Session() as s:
        s.run(v1.global_variables_initializer())
        first = s.run(total, {x: LAB})
        for _ in range(50):
            s.run(step, {x: LAB})
        assert s.run(total, {x: LAB}) < first / 10
        assert s.run(L.get_regularization_loss()) == 0.0
