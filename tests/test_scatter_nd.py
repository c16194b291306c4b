"""tf.scatter_nd and tf.tensor_scatter_nd_update / add / sub (ops/scatter_nd.py): composites
of segment ops. Expected values by numpy: np.add.at for the sums, a loop in order (the
last update of a repeated index wins, TF's CPU kernel) for updates; gradients by TF's
gradient functions' rules, by hand. Both Session modes, compiled runs without interpreter fallback."""
import numpy as np
import pytest

import jitgrad as tf
from jitgrad.errors import InvalidArgumentError

pytestmark = pytest.mark.usefixtures("graph_mode")
ph = tf.compat.v1.placeholder


def _case(rng, dims, k, count):
    idx = np.stack([rng.integers(0, dims[j], count) for j in range(k)], -1).astype(np.int32) if k else \
        np.zeros((count, 0), np.int32)
    upd = rng.standard_normal((count,) + tuple(dims[k:]))
    return idx, upd


def _np_scatter(dims, idx, upd):
    out = np.zeros(dims)
    for v, u in zip(idx, upd):
        out[tuple(v)] += u
    return out


def _np_update(t, idx, upd):
    out, last = t.copy(), {}
    for pos, (v, u) in enumerate(zip(idx, upd)):
        out[tuple(v)] = u
        last[tuple(v)] = pos
    return out, last


def test_generated_scatters_values_and_gradients(no_fallback):
    rng = np.random.default_rng(8)
    for trial in range(10):
        dims = [int(d) for d in rng.integers(1, 5, rng.integers(1, 4))]
        k = int(rng.integers(0 if trial % 4 == 0 else 1, len(dims) + 1))
        idx, upd = _case(rng, dims, k, int(rng.integers(0, 7)))
        t = rng.standard_normal(dims)
        w = rng.standard_normal(dims)
        g = tf.Graph()
        with g.as_default():
            ip, up, tp = ph(tf.int32, idx.shape), ph(tf.float64, upd.shape), ph(tf.float64, dims)
            outs = [tf.scatter_nd(ip, up, dims), tf.tensor_scatter_nd_add(tp, ip, up),
                    tf.tensor_scatter_nd_sub(tp, ip, up), tf.tensor_scatter_nd_update(tp, ip, up)]
            grads = [tf.gradients(tf.reduce_sum(o * w), [tp, up]) for o in outs[1:]]
        s = tf.compat.v1.Session(graph=g)
        got, got_grads = s.run([outs, grads], {ip: idx, up: upd, tp: t})
        summed = _np_scatter(dims, idx, upd)
        updated, last = _np_update(t, idx, upd)
        np.testing.assert_allclose(got[0], summed, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(got[1], t + summed, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(got[2], t - summed, rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(got[3], updated)
        picked = np.array([w[tuple(v)] for v in idx]).reshape(upd.shape)
        np.testing.assert_allclose(got_grads[0][0], w)                  # add: d/dt = w, d/du = w[idx]
        np.testing.assert_allclose(got_grads[0][1], picked)
        np.testing.assert_allclose(got_grads[1][1], -picked)
        kept = np.ones(dims)
        for v in last:
            kept[v] = 0
        np.testing.assert_allclose(got_grads[2][0], w * kept)           # update: the replaced rows get none
        np.testing.assert_allclose(got_grads[2][1], picked)             # and every update its row's (TF's rule)


def test_out_of_range_indices_and_shape_errors():
    g = tf.Graph()
    with g.as_default():
        ip = ph(tf.int32, [None, 2])
        s_out = tf.scatter_nd(ip, tf.ones([1]), [2, 3])
        u_out = tf.tensor_scatter_nd_update(tf.zeros([2, 3]), ip, tf.ones([1]))
    s = tf.compat.v1.Session(graph=g)
    for bad in ([[0, 3]], [[0, -1]], [[2, 0]]):      # [0, 3] would be flat row 3: in range
        for out in (s_out, u_out):
            with pytest.raises(InvalidArgumentError):
                s.run(out, {ip: bad})
    with pytest.raises(InvalidArgumentError):
        tf.scatter_nd(tf.constant([[0]]), tf.constant([1.0, 2.0]), [3])    # eagerly: the op's error
    with pytest.raises(TypeError):
        tf.scatter_nd(tf.constant([[0.0]]), tf.constant([1.0]), [3])


def test_variable_scatter_methods():
    """Variable.scatter_nd_update / add / sub, sparse_read and gather_nd (AttributeError
    before): the value with the rows scattered in, assigned; eagerly and in a tf.function.
    Values as TF 2.21 prints them for the same calls."""
    v = tf.Variable([1.0, 2.0, 3.0])
    v.scatter_nd_update([[0], [2]], [10.0, 30.0])
    np.testing.assert_array_equal(v.numpy(), [10.0, 2.0, 30.0])
    v.scatter_nd_add([[1]], [5.0])
    v.scatter_nd_sub([[1], [1]], [1.0, 1.0])
    np.testing.assert_array_equal(v.numpy(), [10.0, 5.0, 30.0])
    np.testing.assert_array_equal(v.sparse_read([2, 0]).numpy(), [30.0, 10.0])
    np.testing.assert_array_equal(v.gather_nd([[1]]).numpy(), [5.0])

    @tf.function
    def step():
        v.scatter_nd_update([[1]], [-1.0])
        return v.read_value()
    np.testing.assert_array_equal(step().numpy(), [10.0, -1.0, 30.0])
    np.testing.assert_array_equal(v.numpy(), [10.0, -1.0, 30.0])


def _np_extreme(t, idx, upd, better):
    """TF's CPU kernel: the updates folded in order, acc = better(u, acc) ? u : acc (so a NaN
    update never wins and a NaN in the tensor stays)."""
    out = t.copy()
    for v, u in zip(idx, upd):
        out[tuple(v)] = np.where(better(u, out[tuple(v)]), u, out[tuple(v)])
    return out


def _np_extreme_grad(t, idx, upd, out, w):
    """TF's _TensorScatterMinOrMaxGrad: w shared equally by the tensor and the updates equal
    to the result."""
    x_hits = (t == out).astype(float)
    y_hits = np.array([(u == out[tuple(v)]) for v, u in zip(idx, upd)], float).reshape(upd.shape)
    hits = x_hits.copy()
    for v, h in zip(idx, y_hits):
        hits[tuple(v)] += h
    with np.errstate(invalid="ignore", divide="ignore"):      # (a NaN result: no hits, 0 / 0 as in TF)
        return w * x_hits / hits, np.array([(w / hits)[tuple(v)] for v in idx]).reshape(upd.shape) * y_hits


def test_scatter_max_min_values_and_gradients(no_fallback):
    rng = np.random.default_rng(11)
    for trial in range(6):
        dims = [int(d) for d in rng.integers(1, 4, rng.integers(1, 3))]
        k = int(rng.integers(1, len(dims) + 1))
        idx, _ = _case(rng, dims, k, int(rng.integers(1, 7)))
        upd = rng.integers(-2, 3, (len(idx),) + tuple(dims[k:])).astype(np.float64)     # ties
        t = rng.integers(-2, 3, dims).astype(np.float64)
        if trial == 0:
            upd.reshape(-1)[0], t.reshape(-1)[-1] = np.nan, np.nan
        w = rng.uniform(0.5, 1.5, dims)
        g = tf.Graph()
        with g.as_default():
            ip, up, tp = ph(tf.int32, idx.shape), ph(tf.float64, upd.shape), ph(tf.float64, dims)
            outs = [tf.tensor_scatter_nd_max(tp, ip, up), tf.tensor_scatter_nd_min(tp, ip, up)]
            grads = [tf.gradients(tf.reduce_sum(o * w), [tp, up]) for o in outs]
        got, got_grads = tf.compat.v1.Session(graph=g).run([outs, grads], {ip: idx, up: upd, tp: t})
        for out, grad, better in zip(got, got_grads, (np.greater, np.less)):
            want = _np_extreme(t, idx, upd, better)
            np.testing.assert_array_equal(out, want)
            for gv, wv in zip(grad, _np_extreme_grad(t, idx, upd, want, w)):
                np.testing.assert_allclose(gv, wv, rtol=1e-12)


def test_scatter_max_min_ints_and_errors():
    t = tf.constant([[1, 2], [3, 4]])
    assert tf.tensor_scatter_nd_max(t, [[1]], [[5, 0]]).numpy().tolist() == [[1, 2], [5, 4]]
    assert tf.tensor_scatter_nd_min(t, [[1], [1]], [[5, 0], [2, 7]]).numpy().tolist() == [[1, 2], [2, 0]]
    with pytest.raises(InvalidArgumentError):
        tf.tensor_scatter_nd_max(t, [[2]], [[5, 0]])
    with pytest.raises(InvalidArgumentError):
        tf.tensor_scatter_nd_min(t, [[1]], [[5, 0, 1]])


def test_scatter_update_gradient_reaches_every_duplicate_update_as_tf():
    """TF's _TensorScatterUpdateGrad: updates get gather_nd(g, indices) -- a repeated index's
    losing updates too -- and the tensor gets g with the updated rows zeroed. The composite's
    own derivative gave the losers 0 ([0, 1] where TF gives [1, 1])."""
    x, u = tf.constant([1.0, 2.0, 3.0]), tf.constant([10.0, 20.0])
    weights = np.array([1.0, 2.0, 3.0], np.float32)
    with tf.GradientTape(persistent=True) as t:
        t.watch([x, u])
        out = tf.tensor_scatter_nd_update(x, [[0], [0]], u)
        loss = tf.reduce_sum(out * weights)
    np.testing.assert_array_equal(out.numpy(), [20.0, 2.0, 3.0])
    np.testing.assert_array_equal(t.gradient(loss, u).numpy(), [weights[0], weights[0]])
    np.testing.assert_array_equal(t.gradient(loss, x).numpy(), [0.0, weights[1], weights[2]])
