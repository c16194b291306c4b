"""How batched jacobians decide between the one-hot pass and the dense pass
(batched_gradients._exact_where_not_finite): factors known when the graph is built
(constants) are checked then, with no run-time cond; the others by one run-time test
over all of them, whatever their shapes and dtypes. Expected values: the per-row
chain rule in numpy, which has the same IEEE 0 * inf = nan as TF's per-row loop."""
import numpy as np
import pytest

import jitgrad as tf
from jitgrad.batched_gradients import batched_jacobian

pytestmark = pytest.mark.usefixtures("graph_mode")


def _op_types(graph):
    return {op.type for op in graph.get_operations()}


def _same(got, expected):
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=0, equal_nan=True)


@pytest.mark.parametrize("bad", [None, np.inf, np.nan])
def test_a_constant_factor_is_checked_when_the_graph_is_built(bad):
    """y = W @ x with W a constant: its only factor is W, so no cond is built; a finite
    W gives W (the one-hot pass), a non-finite one the per-row NaN pattern (the dense pass)."""
    W = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
    if bad is not None:
        W[1, 2] = bad
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [4])
        y = tf.linalg.matmul(tf.constant(W), tf.reshape(x, [4, 1]))[:, 0]
        (j,) = batched_jacobian(y, [x])
        assert "If" not in _op_types(g)
        with tf.compat.v1.Session(graph=g) as s:
            got = s.run(j, {x: np.ones(4, np.float32)})
    # Row i is e_i^T W computed as the gradient: sum over rows r of e_i[r] * W[r, :].
    with np.errstate(invalid="ignore"):
        expected = np.stack([(np.eye(3, dtype=np.float32)[i][:, None] * W).sum(0) for i in range(3)])
    if bad is not None:
        assert np.isnan(expected[[0, 2], 2]).all()
    _same(got, expected)


@pytest.mark.parametrize("which", ["none", "scalar", "vector", "both"])
def test_run_time_factors_of_several_shapes_are_all_tested(which):
    """y = (x * s) * v: factors s (a fed scalar) and v (fed, [3]). Row i of dy/dx is
    (e_i * v) * s: an inf in v puts NaN off the diagonal of its column, an inf s in
    every column; only the dense pass has them, so the run-time test must see both."""
    s0 = np.float32(np.inf if which in ("scalar", "both") else 2.0)
    v0 = np.array([1.0, np.inf if which in ("vector", "both") else -3.0, 0.5], np.float32)
    x0 = np.array([0.5, -1.0, 2.0], np.float32)
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [3])
        s = tf.compat.v1.placeholder(tf.float32, [])
        v = tf.compat.v1.placeholder(tf.float32, [3])
        y = (x * s) * v
        (j,) = batched_jacobian(y, [x])
        assert "If" in _op_types(g)
        with tf.compat.v1.Session(graph=g) as sess:
            got = sess.run(j, {x: x0, s: s0, v: v0})
    with np.errstate(invalid="ignore"):
        expected = np.eye(3, dtype=np.float32) * v0 * s0
    assert np.isnan(expected).any() == (which != "none")
    _same(got, expected)
