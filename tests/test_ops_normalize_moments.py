"""tf.nn.normalize_moments (ops/nn_ops.py): TF's composite, values and gradients hand-derived,
compiled and interpreted, and in eager mode under a GradientTape."""
import numpy as np
import pytest

import jitgrad as tf
from _graph_testing import numeric_grad, session

pytestmark = pytest.mark.usefixtures("graph_mode", "no_fallback")

X = np.array([[1.0, 2.0], [3.0, 6.0], [5.0, 1.0]])


def _stats(shift):
    """Sufficient statistics of X's columns (shifted by ``shift``): count, sum, sum of squares."""
    d = X - (0.0 if shift is None else shift)
    return 3.0, d.sum(0), (d * d).sum(0)


@pytest.mark.parametrize("shift", [None, np.array([1.0, -2.0])])
def test_mean_and_variance_from_sufficient_statistics(shift):
    count, s, ss = _stats(shift)
    g = tf.Graph()
    with g.as_default():
        ps = [tf.compat.v1.placeholder(tf.float64, [2]) for _ in range(2)]
        mean, var = tf.nn.normalize_moments(tf.constant(count, tf.float64), ps[0], ps[1],
                                            None if shift is None else tf.constant(shift))
        grads = tf.gradients(tf.reduce_sum(var * tf.constant([1.0, 2.0], tf.float64)), ps)
    sess = session(g)
    m, v, gs, gss = sess.run([mean, var] + grads, {ps[0]: s, ps[1]: ss})
    np.testing.assert_allclose(m, X.mean(0), rtol=1e-14)            # the shift comes back out
    np.testing.assert_allclose(v, X.var(0), rtol=1e-12)              # shift-invariant
    # d var / d s = -2 (s / n) / n, d var / d ss = 1 / n, weighted by [1, 2]
    np.testing.assert_allclose(gs, [1.0, 2.0] * (-2 * s / count / count), rtol=1e-14)
    np.testing.assert_allclose(gss, [1.0 / 3, 2.0 / 3], rtol=1e-14)
    num = numeric_grad(lambda v_: float(np.dot(sess.run(var, {ps[0]: v_, ps[1]: ss}), [1.0, 2.0])), s)
    np.testing.assert_allclose(gs, num, rtol=1e-6)


def test_eager_float32_and_tape():
    count, s, ss = _stats(None)
    c, s32, ss32 = tf.constant(np.float32(count)), tf.constant(s.astype(np.float32)), tf.constant(ss.astype(np.float32))
    with tf.GradientTape() as t:
        t.watch(s32)
        mean, var = tf.nn.normalize_moments(c, s32, ss32, None)
    assert mean.dtype == tf.float32
    np.testing.assert_allclose(mean.numpy(), X.mean(0), rtol=1e-6)
    np.testing.assert_allclose(var.numpy(), X.var(0), rtol=1e-5)
    np.testing.assert_allclose(t.gradient(var, s32).numpy(), -2 * s / 9.0, rtol=1e-6)
