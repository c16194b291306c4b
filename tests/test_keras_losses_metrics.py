"""tf.keras losses and metrics against numpy (Keras 3's formulas), eager and in a function."""
import numpy as np
import pytest

import jitgrad as tf

keras = tf.keras
EPS = 1e-7


def _softmax(z):
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


Z = np.array([[2.0, -1.0, 0.5], [0.1, 0.2, 3.0], [-1.0, -1.0, -1.0], [4.0, 0.0, -4.0]])
LABELS = np.array([0, 2, 1, 1])
ONE_HOT = np.eye(3)[LABELS]
P = _softmax(Z)


@pytest.mark.parametrize("loss, y_true, y_pred, expect", [
    (keras.losses.MeanSquaredError(), np.array([[1.0, 2.0], [0.0, -1.0]]), np.array([[1.5, 0.0], [0.0, 1.0]]),
     np.mean([(0.25 + 4) / 2, 4 / 2])),
    (keras.losses.MeanAbsoluteError(), np.array([[1.0, 2.0]]), np.array([[1.5, 0.0]]), 1.25),
    (keras.losses.CategoricalCrossentropy(from_logits=True), ONE_HOT, Z, -np.mean(np.log(P[range(4), LABELS]))),
    (keras.losses.CategoricalCrossentropy(), ONE_HOT, P, -np.mean(np.log(np.clip(P, EPS, 1 - EPS)[range(4), LABELS]))),
    (keras.losses.SparseCategoricalCrossentropy(from_logits=True), LABELS, Z, -np.mean(np.log(P[range(4), LABELS]))),
    (keras.losses.SparseCategoricalCrossentropy(), LABELS[:, None], P, -np.mean(np.log(P[range(4), LABELS]))),
    (keras.losses.BinaryCrossentropy(from_logits=True), np.array([[1.0], [0.0]]), np.array([[0.3], [-2.0]]),
     np.mean([np.log1p(np.exp(-0.3)), np.log1p(np.exp(-2.0))])),
    (keras.losses.BinaryCrossentropy(), np.array([[1.0, 0.0]]), np.array([[0.8, 0.0]]),
     np.mean([-np.log(0.8), -np.log(1 - EPS)])),
])
def test_losses_match_numpy(loss, y_true, y_pred, expect):
    out = loss(y_true.astype(np.float32) if y_true.dtype.kind == "f" else y_true, y_pred.astype(np.float32))
    assert out.shape == () and out.dtype == tf.float32
    np.testing.assert_allclose(float(out), expect, rtol=2e-6, atol=1e-7)


def test_loss_reductions_and_functions():
    y, p = np.array([[1.0], [3.0]], np.float32), np.array([[2.0], [1.0]], np.float32)
    np.testing.assert_allclose(keras.losses.MeanSquaredError(reduction="sum")(y, p).numpy(), 5.0)
    np.testing.assert_allclose(keras.losses.MeanSquaredError(reduction=None)(y, p).numpy(), [1.0, 4.0])
    np.testing.assert_allclose(keras.losses.mean_squared_error(y, p).numpy(), [1.0, 4.0])
    # Keras 3: a function's name gives the function (per-sample values), a class's name an instance
    np.testing.assert_allclose(keras.losses.get("mse")(y, p).numpy(), [1.0, 4.0])
    np.testing.assert_allclose(keras.losses.get("MeanSquaredError")(y, p, sample_weight=np.array([1.0, 0.5])).numpy(),
                               1.5)
    with pytest.raises(ValueError, match="Could not interpret loss"):
        keras.losses.get("nope")


def test_mean_and_accuracy_metrics_accumulate():
    m = keras.metrics.Mean()
    m.update_state([1.0, 2.0, 3.0])
    m.update_state(10.0, sample_weight=2.0)          # a scalar weighted value counts its weight
    np.testing.assert_allclose(float(m.result()), (6.0 + 20.0) / 5.0, rtol=1e-7)
    m.reset_state()
    assert float(m.result()) == 0.0                  # divide_no_nan of an empty mean
    acc = keras.metrics.SparseCategoricalAccuracy()
    acc.update_state(LABELS, Z)
    acc.update_state([[2]], [[0.0, 0.0, 1.0]])
    hits = list(np.argmax(Z, -1) == LABELS) + [True]
    np.testing.assert_allclose(float(acc.result()), np.mean(hits), rtol=1e-7)
    cat = keras.metrics.CategoricalAccuracy()
    np.testing.assert_allclose(float(cat(ONE_HOT, P)), np.mean(np.argmax(P, -1) == LABELS))
    b = keras.metrics.BinaryAccuracy()
    np.testing.assert_allclose(float(b([[1.0], [0.0], [1.0]], [[0.7], [0.6], [0.2]])), 1 / 3, rtol=1e-6)
    a = keras.metrics.Accuracy()
    np.testing.assert_allclose(float(a([1, 2, 3, 4], [1, 2, 0, 4])), 0.75)
    assert keras.metrics.get("accuracy", (4,), (4, 3)).__class__ is keras.metrics.SparseCategoricalAccuracy
    assert keras.metrics.get("acc", (4, 3), (4, 3)).__class__ is keras.metrics.CategoricalAccuracy
    assert keras.metrics.get("accuracy", (4, 1), (4, 1)).__class__ is keras.metrics.BinaryAccuracy
    assert keras.metrics.get("accuracy", (4,), (4, 3)).name == "accuracy"


def test_metric_updates_inside_function(graph_mode):
    acc = keras.metrics.SparseCategoricalAccuracy()
    mean = keras.metrics.Mean(name="loss")

    @tf.function
    def step(y, z):
        acc.update_state(y, z)
        mean.update_state(keras.losses.sparse_categorical_crossentropy(y, z, from_logits=True))
        return acc.result()

    step(LABELS.astype(np.int32), Z.astype(np.float32))
    r = step(LABELS.astype(np.int32), Z.astype(np.float32))
    np.testing.assert_allclose(float(r), np.mean(np.argmax(Z, -1) == LABELS))
    np.testing.assert_allclose(float(mean.result()), -np.mean(np.log(P[range(4), LABELS])), rtol=1e-6)


def test_labels_of_rank_one_meet_single_unit_outputs():
    # Keras aligns y_true (n,) with y_pred (n, 1) instead of broadcasting to (n, n)
    y = np.array([1.0, 0.0, 1.0], np.float32)
    p = np.array([[0.9], [0.2], [0.4]], np.float32)
    np.testing.assert_allclose(float(keras.losses.MeanSquaredError()(y, p)), np.mean((y - p[:, 0]) ** 2), rtol=1e-6)
    bce = -np.mean(y * np.log(p[:, 0]) + (1 - y) * np.log(1 - p[:, 0]))
    np.testing.assert_allclose(float(keras.losses.BinaryCrossentropy()(y, p)), bce, rtol=1e-6)
    acc = keras.metrics.get("accuracy", (3,), (3, 1))
    np.testing.assert_allclose(float(acc(y, p)), 2 / 3, rtol=1e-6)
    np.testing.assert_allclose(float(keras.metrics.MeanSquaredError()(y, p)), np.mean((y - p[:, 0]) ** 2),
                               rtol=1e-6)


def test_losses_compute_in_float32_like_keras():
    # Keras converts y_true and y_pred to float32 first: float64 numpy inputs give a float32 loss
    out = keras.losses.SparseCategoricalCrossentropy(from_logits=True)(np.array([1, 2]), Z[:2])
    assert out.dtype == tf.float32
    z = Z[:2].astype(np.float32).astype(np.float64)
    expect = -np.mean(np.log(_softmax(z)[[0, 1], [1, 2]]))
    np.testing.assert_allclose(float(out), expect, rtol=1e-6)


# Huber / MSLE / LogCosh: Keras 3's documented formulas written in numpy (float64)
YT = np.array([[0.0, 1.0, -2.0], [3.0, 0.5, -1.0]])
YP = np.array([[0.6, 0.4, 1.5], [-4.0, 0.5, 30.0]])


def _np_huber(yt, yp, delta=1.0):
    e = np.abs(yp - yt)
    return np.mean(np.where(e <= delta, 0.5 * e ** 2, delta * e - 0.5 * delta ** 2), axis=-1)


def _np_msle(yt, yp):
    return np.mean((np.log1p(np.maximum(yp, EPS)) - np.log1p(np.maximum(yt, EPS))) ** 2, axis=-1)


def _np_logcosh(yt, yp):
    return np.mean(np.log(np.cosh(yp - yt)), axis=-1)


@pytest.mark.parametrize("name, cls, fn, expect", [
    ("huber", keras.losses.Huber, keras.losses.huber, _np_huber),
    ("msle", keras.losses.MeanSquaredLogarithmicError, keras.losses.msle, _np_msle),
    ("log_cosh", keras.losses.LogCosh, keras.losses.logcosh, _np_logcosh),
])
def test_huber_msle_logcosh_match_numpy(name, cls, fn, expect, graph_mode):
    per_sample = expect(YT, YP)
    np.testing.assert_allclose(fn(YT.astype(np.float32), YP.astype(np.float32)).numpy(), per_sample, rtol=1e-5)
    np.testing.assert_allclose(float(cls()(YT, YP)), per_sample.mean(), rtol=1e-5)
    np.testing.assert_allclose(keras.losses.get(name)(YT.astype(np.float32), YP.astype(np.float32)).numpy(), per_sample,
                               rtol=1e-5)
    np.testing.assert_allclose(float(keras.losses.get(cls.__name__)(YT, YP)), per_sample.mean(), rtol=1e-5)
    np.testing.assert_allclose(cls(reduction="sum")(YT, YP).numpy(), per_sample.sum(), rtol=1e-5)

    @tf.function
    def in_function(yt, yp):
        return cls()(yt, yp)
    np.testing.assert_allclose(float(in_function(YT.astype(np.float32), YP.astype(np.float32))),
                               per_sample.mean(), rtol=1e-5)


def test_huber_msle_logcosh_names_and_options_as_keras3():
    assert keras.losses.Huber().name == "huber_loss"
    assert keras.losses.LogCosh().name == "log_cosh"
    assert keras.losses.MeanSquaredLogarithmicError().name == "mean_squared_logarithmic_error"
    np.testing.assert_allclose(float(keras.losses.Huber(delta=0.3)(YT, YP)), _np_huber(YT, YP, 0.3).mean(), rtol=1e-5)
    assert isinstance(keras.losses.get("MeanSquaredLogarithmicError"), keras.losses.MeanSquaredLogarithmicError)
    for alias in ("MSLE", "msle", "mean_squared_logarithmic_error"):      # TF 2.21: the function
        assert keras.losses.get(alias) is keras.losses.mean_squared_logarithmic_error
    assert isinstance(keras.losses.get("Huber"), keras.losses.Huber)
    with pytest.raises(ValueError, match="Could not interpret loss"):
        keras.losses.get("logcosh")       # Keras 3 only knows log_cosh by name
    # log_cosh of a large error does not overflow cosh: |e| - log 2
    big = keras.losses.logcosh(np.float32([[0.0]]), np.float32([[200.0]])).numpy()
    np.testing.assert_allclose(big, [200.0 - np.log(2.0)], rtol=1e-6)


# Keras 3's formulas for the remaining losses, written in numpy (float64), eps = 1e-7
def _np_normalize(x, axis):
    return x * np.minimum(1.0 / np.sqrt(np.sum(x * x, axis=axis, keepdims=True)), 1e7)


def _np_hinge_labels(t):
    return 2.0 * t - 1.0 if np.all((t == 0) | (t == 1)) else t


def _np_binary_focal(t, p, apply_class_balancing=False, alpha=0.25, gamma=2.0, from_logits=False,
                     label_smoothing=0.0):
    t = t * (1.0 - label_smoothing) + 0.5 * label_smoothing
    p = 1.0 / (1.0 + np.exp(-p)) if from_logits else p
    c = np.clip(p, 1e-7, 1.0 - 1e-7)
    bce = -(t * np.log(c) + (1.0 - t) * np.log(1.0 - c))
    focal = (1.0 - (t * p + (1.0 - t) * (1.0 - p))) ** gamma * bce
    if apply_class_balancing:
        focal = (t * alpha + (1.0 - t) * (1.0 - alpha)) * focal
    return focal.mean(-1)


def _np_categorical_focal(t, p, alpha=0.25, gamma=2.0, from_logits=False, label_smoothing=0.0):
    t = t * (1.0 - label_smoothing) + label_smoothing / t.shape[-1]
    if from_logits:
        e = np.exp(p - p.max(-1, keepdims=True))
        p = e / e.sum(-1, keepdims=True)
    c = np.clip(p / p.sum(-1, keepdims=True), 1e-7, 1.0 - 1e-7)
    return np.sum(alpha * (1.0 - c) ** gamma * -t * np.log(c), axis=-1)


_R = np.random.default_rng(7)
_PROB_T, _PROB_P = _R.uniform(0, 1, (6, 5)), _R.uniform(0.01, 1, (6, 5))
_BIN, _LOGITS = (_R.uniform(0, 1, (6, 5)) > 0.5).astype(np.float64), _R.normal(size=(6, 5))
_ONE_HOT = np.eye(5)[[0, 3, 1, 4, 2, 2]]

NEW_LOSSES = [
    ("MeanAbsolutePercentageError", "mape", {}, _PROB_T, _LOGITS,
     lambda t, p: 100.0 * np.mean(np.abs((t - p) / np.maximum(np.abs(t), 1e-7)), -1)),
    ("KLDivergence", "kld", {}, _PROB_T, _PROB_P,
     lambda t, p: np.sum(np.clip(t, 1e-7, 1) * np.log(np.clip(t, 1e-7, 1) / np.clip(p, 1e-7, 1)), -1)),
    ("Poisson", "poisson", {}, _PROB_T, _PROB_P, lambda t, p: np.mean(p - t * np.log(p + 1e-7), -1)),
    ("CosineSimilarity", "cosine_similarity", {}, _PROB_T, _LOGITS,
     lambda t, p: -np.sum(_np_normalize(t, -1) * _np_normalize(p, -1), -1)),
    ("Hinge", "hinge", {}, _BIN, _LOGITS, lambda t, p: np.mean(np.maximum(1 - _np_hinge_labels(t) * p, 0), -1)),
    ("Hinge", "hinge", {}, _LOGITS, _PROB_P,        # labels not all 0 / 1: taken as they are
     lambda t, p: np.mean(np.maximum(1 - _np_hinge_labels(t) * p, 0), -1)),
    ("SquaredHinge", "squared_hinge", {}, _BIN, _LOGITS,
     lambda t, p: np.mean(np.maximum(1 - _np_hinge_labels(t) * p, 0) ** 2, -1)),
    ("CategoricalHinge", "categorical_hinge", {}, _ONE_HOT, _LOGITS,
     lambda t, p: np.maximum(np.max((1 - t) * p, -1) - np.sum(t * p, -1) + 1, 0)),
    ("BinaryFocalCrossentropy", "binary_focal_crossentropy", {}, _BIN, _PROB_P, _np_binary_focal),
    ("BinaryFocalCrossentropy", "binary_focal_crossentropy",
     {"from_logits": True, "apply_class_balancing": True, "gamma": 1.5, "label_smoothing": 0.1}, _BIN, _LOGITS,
     _np_binary_focal),
    ("CategoricalFocalCrossentropy", "categorical_focal_crossentropy", {}, _ONE_HOT, _PROB_P, _np_categorical_focal),
    ("CategoricalFocalCrossentropy", "categorical_focal_crossentropy",
     {"from_logits": True, "label_smoothing": 0.2, "alpha": 0.5}, _ONE_HOT, _LOGITS, _np_categorical_focal),
]


@pytest.mark.parametrize("cls_name, fn_name, options, yt, yp, expect", NEW_LOSSES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(NEW_LOSSES)])
def test_more_keras3_losses_match_numpy(cls_name, fn_name, options, yt, yp, expect):
    per_sample = expect(yt, yp, **options)
    yt32, yp32 = yt.astype(np.float32), yp.astype(np.float32)
    fn = getattr(keras.losses, fn_name)
    np.testing.assert_allclose(fn(yt32, yp32, **options).numpy(), per_sample, rtol=2e-5, atol=1e-6)
    assert keras.losses.get(fn_name) is fn
    cls = getattr(keras.losses, cls_name)
    np.testing.assert_allclose(float(cls(**options)(yt, yp)), per_sample.mean(), rtol=2e-5, atol=1e-6)
    assert isinstance(keras.losses.get(cls_name), cls)
    weights = np.linspace(0.0, 2.0, len(yt))
    np.testing.assert_allclose(float(cls(reduction="sum", **options)(yt, yp, sample_weight=weights)),
                               np.sum(per_sample * weights), rtol=2e-5, atol=1e-6)

    @tf.function
    def in_function(t, p):
        return cls(reduction="none", **options)(t, p)
    np.testing.assert_allclose(in_function(tf.constant(yt32), tf.constant(yp32)).numpy(), per_sample,
                               rtol=2e-5, atol=1e-6)


def test_cosine_similarity_of_a_zero_row_is_zero_and_its_gradient_finite():
    p = tf.Variable(np.ones((2, 3), np.float32))
    with tf.GradientTape() as t:
        loss = keras.losses.CosineSimilarity()(np.zeros((2, 3), np.float32), p)
    assert float(loss) == 0.0
    assert np.all(np.isfinite(t.gradient(loss, p).numpy()))


def test_loss_class_arguments_as_keras3():
    assert keras.losses.Hinge("sum").reduction == "sum"            # (reduction, name, dtype)
    assert keras.losses.BinaryFocalCrossentropy(True, 0.5).alpha == 0.5
    assert keras.losses.KLDivergence().name == "kl_divergence"
    with pytest.raises(TypeError):
        keras.losses.Poisson(delta=1.0)


def test_loss_sample_weight_meets_losses_per_sample_as_keras3():
    """A (batch, 1) weight scales each sample's loss (Keras's squeeze_or_expand_to_same_rank);
    it was broadcast against the (batch,) losses into a (batch, batch) product."""
    y, p = np.array([[0, 1], [1, 1]], np.float32), np.array([[0.5, 0.5], [0, 1]], np.float32)
    per_sample = np.mean((y - p) ** 2, axis=-1)                    # [0.25, 0.5]
    w = np.array([[1.0], [3.0]], np.float32)
    weighted = per_sample * w[:, 0]
    mse = keras.losses.MeanSquaredError
    np.testing.assert_allclose(float(mse()(y, p, sample_weight=w)), weighted.sum() / 2)
    none = mse(reduction="none")(y, p, sample_weight=w).numpy()
    assert none.shape == (2, 1)
    np.testing.assert_allclose(none[:, 0], weighted)
    np.testing.assert_allclose(float(mse(reduction="mean")(y, p, sample_weight=w)), weighted.sum() / 2)
    np.testing.assert_allclose(float(mse(reduction="mean_with_sample_weight")(y, p, sample_weight=w)),
                               weighted.sum() / w.sum())
    assert float(mse(reduction="mean_with_sample_weight")(y, p, sample_weight=np.zeros((2, 1)))) == 0.0
    with pytest.raises(ValueError, match="reduction"):
        mse(reduction="average")


def test_metric_sample_weights_reduce_per_sample_as_keras3():
    m = keras.metrics.Mean()
    m.update_state([1.0, 2.0, 3.0], sample_weight=[[1.0], [0.0], [2.0]])
    np.testing.assert_allclose(float(m.result()), (1 * 1 + 3 * 2) / 3, rtol=1e-6)
    s = keras.metrics.Sum()
    values = np.array([[1, 2], [3, 4], [5, 6]], np.float32)
    s.update_state(values, sample_weight=[1.0, 0.0, 2.0])         # per-sample sums [3, 7, 11], weighted
    np.testing.assert_allclose(float(s.result()), 3 * 1 + 11 * 2)
    m = keras.metrics.Mean()
    m.update_state(values, sample_weight=[[1, 2], [3, 4], [5, 6]])  # elementwise, then per-sample means
    want_total = np.mean(values * values, axis=1).sum()
    want_count = np.mean(values, axis=1).sum()
    np.testing.assert_allclose(float(m.result()), want_total / want_count, rtol=1e-6)


def _np_sigmoid_xent(y, z):
    return np.maximum(z, 0) - z * y + np.log1p(np.exp(-np.abs(z)))


def _np_softmax_xent(y, z):
    s = z - z.max(-1, keepdims=True)
    return -np.sum(y * (s - np.log(np.exp(s).sum(-1, keepdims=True))), axis=-1)


def test_probability_crossentropies_read_the_logits_of_sigmoid_and_softmax_outputs(graph_mode):
    """Keras 3 (TF backend) computes a probability crossentropy of a Keras sigmoid / softmax
    output (and in graphs of any Sigmoid / Softmax op) from its logits; clipping the saturated
    probabilities at eps gave 16.03 where TF gives 55 (and gradients 10x off)."""
    z = np.array([[-50.0], [60.0]], np.float32)
    y = np.array([[1.0], [0.0]], np.float32)
    want = _np_sigmoid_xent(y, z).mean()
    act = keras.layers.Activation("sigmoid")
    np.testing.assert_allclose(float(keras.losses.BinaryCrossentropy()(y, act(z))), want, rtol=1e-6)
    zs = np.array([[-40.0, 40.0, 0.0], [30.0, -50.0, 1.0]], np.float32)
    yo = np.eye(3, dtype=np.float32)[[0, 1]]
    want_cce = _np_softmax_xent(yo, zs).mean()
    p = keras.activations.softmax(zs)
    np.testing.assert_allclose(float(keras.losses.CategoricalCrossentropy()(yo, p)), want_cce, rtol=1e-6)
    np.testing.assert_allclose(float(keras.losses.SparseCategoricalCrossentropy()(np.array([0, 1]), p)), want_cce,
                               rtol=1e-6)
    v = tf.Variable(z)
    with tf.GradientTape() as t:
        loss = keras.losses.BinaryCrossentropy()(y, keras.activations.sigmoid(v))
    np.testing.assert_allclose(t.gradient(loss, v).numpy(), (1 / (1 + np.exp(-z)) - y) / 2, atol=1e-7)


def test_eager_tf_sigmoid_output_is_clipped_as_keras3():
    """Only Keras's activations carry logits in eager mode: tf.sigmoid's output is a probability."""
    z = np.array([[-50.0], [60.0]], np.float32)
    y = np.array([[1.0], [0.0]], np.float32)
    low, high = np.float32(1e-7), np.float32(1 - 1e-7)       # the clip bounds, in float32
    want = (-np.log(low) - np.log(1 - high)) / 2               # both samples saturated at a bound
    np.testing.assert_allclose(float(keras.losses.BinaryCrossentropy()(y, tf.sigmoid(z))), want, rtol=1e-5)


def test_categorical_label_smoothing_counts_the_last_axis():
    y = np.array([[1.0, 0, 0], [0, 1.0, 0]], np.float32)
    p = np.array([[0.2, 0.3, 0.5], [0.4, 0.4, 0.2]], np.float32)
    smoothed = y * 0.8 + 0.2 / 3                          # 3 classes: shape[-1], not shape[axis] = 2
    q = np.clip(p / p.sum(0, keepdims=True), 1e-7, 1 - 1e-7)
    want = -np.sum(smoothed * np.log(q), axis=0).mean()
    got = float(keras.losses.CategoricalCrossentropy(axis=0, label_smoothing=0.2)(y, p))
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_root_mean_squared_error_and_top_k_metrics_match_numpy():
    rng = np.random.default_rng(11)
    yt, yp = rng.uniform(0, 1, (6, 4)), rng.uniform(0, 1, (6, 4))
    w = np.array([1, 0, 2, 0.5, 1, 3])
    m = keras.metrics.RootMeanSquaredError()
    m.update_state(yt, yp, sample_weight=w)
    per_sample = np.mean((yp - yt) ** 2, axis=1)
    np.testing.assert_allclose(float(m.result()), np.sqrt(np.sum(per_sample * w) / w.sum()), rtol=1e-6)
    labels = np.array([0, 1, 2, 3, 1, 0])
    rank_of_label = np.array([np.sum(yp[i] > yp[i, labels[i]]) for i in range(6)])  # classes strictly above
    for k in (1, 2, 3):
        sparse = keras.metrics.SparseTopKCategoricalAccuracy(k=k)
        sparse.update_state(labels, yp)
        dense = keras.metrics.TopKCategoricalAccuracy(k=k)
        dense.update_state(np.eye(4)[labels], yp)
        np.testing.assert_allclose([float(sparse.result()), float(dense.result())], [np.mean(rank_of_label < k)] * 2)


def test_metric_wrappers_of_losses_and_names_as_keras3():
    yt, yp = np.array([[0.0, 1.0], [1.0, 1.0]]), np.array([[1.0, 0.0], [2.0, 2.0]])
    cos = keras.metrics.CosineSimilarity()
    cos.update_state(yt, yp)
    np.testing.assert_allclose(float(cos.result()), (0.0 + 1.0) / 2, rtol=1e-6)      # +similarity for a metric
    assert isinstance(keras.metrics.get("log_cosh_error"), keras.metrics.LogCoshError)
    assert keras.metrics.get("LogCoshError").name == "logcosh"
    assert isinstance(keras.metrics.get("bce"), keras.metrics.BinaryCrossentropy)
    bce = keras.metrics.BinaryCrossentropy(from_logits=True)
    bce.update_state([[1.0], [0.0]], [[2.0], [-1.0]])
    np.testing.assert_allclose(float(bce.result()), np.mean([np.log1p(np.exp(-2.0)), np.log1p(np.exp(-1.0))]),
                               rtol=1e-6)
    with pytest.raises(ValueError, match="Could not interpret metric"):
        keras.metrics.get("kld")                          # not a Keras 3 metric name


def test_sparse_crossentropy_ignore_class_masks_the_mean():
    y = np.array([0, 2, 1, 2, 0])
    p = np.array([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8], [0.3, 0.4, 0.3], [0.2, 0.2, 0.6], [0.5, 0.25, 0.25]], np.float32)
    per_sample = -np.log(p[np.arange(5), y].astype(np.float64))
    kept = y != 2
    masked = np.where(kept, per_sample, 0.0)
    np.testing.assert_allclose(keras.losses.sparse_categorical_crossentropy(y, p, ignore_class=2).numpy(), masked,
                               rtol=1e-6)
    scce = keras.losses.SparseCategoricalCrossentropy
    np.testing.assert_allclose(float(scce(ignore_class=2)(y, p)), masked.sum() / kept.sum(), rtol=1e-6)
    np.testing.assert_allclose(float(scce(ignore_class=2, reduction="sum")(y, p)), masked.sum(), rtol=1e-6)
    w = np.array([1, 2, 0.5, 1, 3], np.float32)
    np.testing.assert_allclose(float(scce(ignore_class=2)(y, p, sample_weight=w)),
                               np.sum(masked * w) * 5 / kept.sum() / 5, rtol=1e-6)


@pytest.mark.parametrize("make, y_true, y_pred", [
    # labels of shape (n, 1) against (n, 4) predictions used to broadcast to a number
    (lambda: keras.losses.BinaryCrossentropy(), np.zeros((2, 1)), np.full((2, 4), 0.5)),
    (lambda: keras.losses.BinaryCrossentropy(from_logits=True), np.zeros((2, 1)), np.zeros((2, 4))),
    (lambda: keras.losses.BinaryCrossentropy(), np.zeros((2, 3)), np.full((2, 2, 3), 0.5)),
    (lambda: keras.losses.BinaryFocalCrossentropy(), np.zeros((2, 1)), np.full((2, 4), 0.5)),
    (lambda: keras.losses.CategoricalCrossentropy(), np.ones((2, 1)), np.full((2, 3), 0.3)),
    (lambda: keras.losses.CategoricalCrossentropy(), np.eye(3)[:2], np.full((2, 2), 0.5)),
    (lambda: keras.losses.CategoricalCrossentropy(from_logits=True), np.eye(3)[:1], np.zeros((2, 3))),
    (lambda: keras.losses.SparseCategoricalCrossentropy(), np.array([0, 1, 2]), np.full((2, 3), 0.3)),
    (lambda: keras.losses.SparseCategoricalCrossentropy(), np.array([[0, 1], [1, 2]]), np.full((2, 3), 0.3)),
    (lambda: keras.losses.SparseCategoricalCrossentropy(from_logits=True), np.array([0, 1]), np.zeros((2, 1, 3))),
])
def test_crossentropy_labels_of_another_shape_are_a_value_error(make, y_true, y_pred):
    # TF 2.21 (Keras 3's TF backend) raises ValueError for each of these, eagerly and in a function
    with pytest.raises(ValueError, match="target"):
        make()(y_true, y_pred)
    with pytest.raises(ValueError, match="target"):
        tf.function(lambda a, b: make()(a, b))(tf.constant(y_true, tf.float32), tf.constant(y_pred, tf.float32))


def test_crossentropy_labels_one_rank_short_still_meet_the_predictions():
    # (n,) labels and (n, 1) predictions are aligned by the loss wrapper before the shape check
    p = np.array([[0.2], [0.9]])
    expect = -np.mean([np.log(1 - 0.2), np.log(0.9)])
    np.testing.assert_allclose(keras.losses.BinaryCrossentropy()(np.array([0.0, 1.0]), p).numpy(), expect,
                               rtol=1e-6)
    expect = -np.mean(np.log([0.7, 0.5]))
    np.testing.assert_allclose(keras.losses.SparseCategoricalCrossentropy()(
        np.array([[0], [2]]), np.array([[0.7, 0.1, 0.2], [0.25, 0.25, 0.5]])).numpy(), expect, rtol=1e-6)


def _np_confusion(y, p, thresholds, w=None):
    """numpy: (tp, fp, tn, fn) per threshold; positive = strictly above the threshold."""
    y, p = np.asarray(y, np.float64).ravel() != 0, np.asarray(p, np.float64).ravel()
    w = np.ones_like(p) if w is None else np.asarray(w, np.float64).ravel()
    out = []
    for t in thresholds:
        pos = p > t
        out.append([np.sum(w * (y & pos)), np.sum(w * (~y & pos)), np.sum(w * (~y & ~pos)),
                    np.sum(w * (y & ~pos))])
    return np.array(out)


def test_precision_recall_and_counts_over_several_updates():
    rng = np.random.default_rng(3)
    batches = [(rng.integers(0, 2, (5, 3)), rng.uniform(0, 1, (5, 3)).round(2), rng.uniform(0, 2, 5))
               for _ in range(3)]
    thresholds = [0.2, 0.5, 0.9]
    metrics = {"p": keras.metrics.Precision(thresholds=thresholds), "r": keras.metrics.Recall(thresholds=thresholds),
               "tp": keras.metrics.TruePositives(thresholds=thresholds),
               "fp": keras.metrics.FalsePositives(thresholds=thresholds),
               "tn": keras.metrics.TrueNegatives(thresholds=thresholds),
               "fn": keras.metrics.FalseNegatives(thresholds=thresholds)}
    total = np.zeros((3, 4))
    for y, p, w in batches:
        for m in metrics.values():
            m.update_state(y, p, sample_weight=w)
        total += _np_confusion(y, p, thresholds, np.repeat(w[:, None], 3, axis=1))   # a weight per sample's row
        tp, fp, tn, fn = total.T
        np.testing.assert_allclose(metrics["p"].result().numpy(), tp / (tp + fp), rtol=1e-5)
        np.testing.assert_allclose(metrics["r"].result().numpy(), tp / (tp + fn), rtol=1e-5)
        for key, col in (("tp", tp), ("fp", fp), ("tn", tn), ("fn", fn)):
            np.testing.assert_allclose(metrics[key].result().numpy(), col, rtol=1e-5)
    metrics["p"].reset_state()
    assert metrics["p"].result().numpy().tolist() == [0.0, 0.0, 0.0]


def test_precision_top_k_class_id_and_scalar_results():
    y = np.array([[1, 0, 1, 0], [0, 1, 0, 0], [1, 1, 0, 1]])
    p = np.array([[0.9, 0.8, 0.1, 0.3], [0.2, 0.4, 0.7, 0.1], [0.5, 0.6, 0.4, 0.3]])
    # top_k=2: each row's two largest are predicted positive (any value), the rest negative
    top2 = np.zeros_like(p)
    for i, row in enumerate(p):
        top2[i, np.argsort(row)[-2:]] = 1
    m = keras.metrics.Precision(top_k=2)
    m.update_state(y, p)
    assert m.result().shape == ()
    np.testing.assert_allclose(m.result().numpy(), np.sum(top2 * y) / np.sum(top2), rtol=1e-6)
    m = keras.metrics.Recall(top_k=2, class_id=1)
    m.update_state(y, p)
    np.testing.assert_allclose(m.result().numpy(), np.sum(top2[:, 1] * y[:, 1]) / np.sum(y[:, 1]), rtol=1e-6)
    m = keras.metrics.Precision()          # threshold 0.5, strict: 0.5 itself is negative
    m.update_state(np.array([1, 0, 1]), np.array([0.5, 0.7, 0.51]))
    np.testing.assert_allclose(m.result().numpy(), 0.5)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        keras.metrics.Precision(thresholds=1.5)


def test_precision_recall_in_compile_and_in_a_function():
    m = keras.metrics.Recall(thresholds=0.4)
    step = tf.function(lambda a, b: m.update_state(a, b))
    y, p = np.array([[1.0], [1.0], [0.0], [1.0]]), np.array([[0.3], [0.45], [0.9], [0.8]])
    step(tf.constant(y), tf.constant(p))
    step(tf.constant(y), tf.constant(p))
    np.testing.assert_allclose(m.result().numpy(), 2 / 3, rtol=1e-6)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1, activation="sigmoid",
                                                                    kernel_initializer="ones")])
    model.compile("sgd", "binary_crossentropy", metrics=["precision", "recall"])
    x = np.array([[1.0, 1.0], [-1.0, -1.0], [2.0, 0.0], [-3.0, 1.0]])    # sigmoid(x1 + x2) > 0.5: rows 0, 2
    out = model.evaluate(x, np.array([[1.0], [1.0], [0.0], [0.0]]), verbose=0, return_dict=True)
    assert out["precision"] == pytest.approx(0.5) and out["recall"] == pytest.approx(0.5)
