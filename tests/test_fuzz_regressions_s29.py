"""Differences from TF 2.21 found by bench/tf_fuzz.py in the round with seeds from 150000. Each
expected value is derived by hand or with numpy (said per test); where TF's behaviour is the
spec, what TF 2.21 does (run with /work/benchenv) is said too."""
import numpy as np
import pytest

import jitgrad as tf
from _graph_testing import run_default_graph as _run

graph_modes = pytest.mark.usefixtures("graph_mode", "no_fallback")


# ---------------------------------------------------------------- reduce_variance's second derivative
# tf_fuzz seed 150201 (eager, tape_nested): the Hessian of reduce_variance was wrong. jitgrad built
# the variance as mean(square(abs(x - mean))) for real inputs too; abs's gradient multiplies by
# sign(x - mean), whose own derivative is taken as 0, so the second derivative lost the diagonal
# term wherever x equals the mean (sign 0) and was NaN wherever the first derivative is NaN (0 * sign(nan)).
# TF 2.21's math_ops.reduce_variance squares x - mean directly (complex inputs: real(conj(d) * d)).
#
# By hand: var(x) = sum((x_i - m)^2) / n, so d2 var / dx_i dx_j = (2 / n) (delta_ij - 1 / n).
# For n = 3: diagonal 4/9, off-diagonal -2/9 (TF 2.21 gives these, eager and tf.hessians).
def _variance_hessian(n):
    return (2.0 / n) * (np.eye(n) - 1.0 / n)


@pytest.mark.parametrize("x", [[1.0, 2.0, 3.0], [0.5, 0.5, 0.5], [-1.0, 4.0, 2.0, 0.0, 3.0]])
def test_eager_hessian_of_reduce_variance(x):
    """[1, 2, 3]: the middle element is the mean; [0.5, 0.5, 0.5]: every element is."""
    xv = tf.Variable(np.array(x, np.float32))
    with tf.GradientTape() as outer:
        with tf.GradientTape() as inner:
            v = tf.math.reduce_variance(xv)
        g = inner.gradient(v, xv)
    np.testing.assert_allclose(outer.jacobian(g, xv).numpy(), _variance_hessian(len(x)), rtol=1e-6, atol=1e-7)


@graph_modes
def test_graph_hessians_of_reduce_variance_with_axis():
    """Rows of a [2, 3] input each a variance of 3 values, summed with weights 1 and 3: the Hessian
    is block-diagonal, w_r * (2/3)(I - 1/3) per row."""
    x = np.array([[1.0, 2.0, 3.0], [7.0, 7.0, 7.0]], np.float32)
    want = np.zeros((2, 3, 2, 3))
    for r, w in enumerate([1.0, 3.0]):
        want[r, :, r, :] = w * _variance_hessian(3)
    with tf.Graph().as_default():
        p = tf.compat.v1.placeholder(tf.float32, [2, 3])
        loss = tf.reduce_sum(tf.math.reduce_variance(p, axis=1) * [1.0, 3.0])
        (h,) = tf.hessians(loss, p)
        np.testing.assert_allclose(_run(h, {p: x}), want, rtol=1e-6, atol=1e-6)


def test_eager_second_derivative_of_reduce_variance_is_not_nan_where_the_gradient_is():
    """Seed 150201's program: x = [-1.25, 1e30, nan]. The gradient is NaN everywhere (the mean
    is NaN), but the sum of the gradient is structurally zero (sum_i (x_i - m) = 0 by backprop:
    the upstream ones minus their mean), so its derivative is 0 * (finite constants): TF 2.21
    gives [0, 0, 0]."""
    xv = tf.Variable(np.array([-1.25, 1e30, np.nan], np.float32))
    with tf.GradientTape() as outer:
        with tf.GradientTape() as inner:
            v = tf.math.reduce_variance(xv) * 0.7296205
        g = inner.gradient(v, xv)
        s = tf.reduce_sum(g)
    assert np.isnan(g.numpy()).all()
    np.testing.assert_array_equal(outer.gradient(s, xv).numpy(), [0.0, 0.0, 0.0])


def test_eager_hessian_of_reduce_std():
    """std = sqrt(var): d2 std = H_var / (2 std) - g_var g_var^T / (4 std^3), g_var = 2 (x - m) / n
    (numpy below, from the formula). TF 2.21 agrees (same composition)."""
    x = np.array([1.0, 2.0, 4.0])
    n, d = len(x), x - x.mean()
    std = np.sqrt((d * d).mean())
    gv = 2 * d / n
    want = _variance_hessian(n) / (2 * std) - np.outer(gv, gv) / (4 * std ** 3)
    xv = tf.Variable(x.astype(np.float32))
    with tf.GradientTape() as outer:
        with tf.GradientTape() as inner:
            s = tf.math.reduce_std(xv)
        g = inner.gradient(s, xv)
    np.testing.assert_allclose(outer.jacobian(g, xv).numpy(), want, rtol=1e-5, atol=1e-6)


def test_complex_reduce_variance_and_gradient():
    """Complex input: a real variance, mean(|z - m|^2). By hand for z = [1+1j, 2-1j, 0.5j]:
    m = (3 + 0.5j) / 3, the variance is 25/18; TF's gradient of a real loss is
    2 (z - m) / n (the conjugate convention: dL/dRe + i dL/dIm). TF 2.21 gives the same."""
    z = np.array([1 + 1j, 2 - 1j, 0.5j], np.complex64)
    zv = tf.Variable(z)
    with tf.GradientTape() as t:
        v = tf.math.reduce_variance(zv)
    assert v.dtype == tf.float32
    np.testing.assert_allclose(v.numpy(), 25.0 / 18.0, rtol=1e-6)
    m = z.astype(np.complex128).mean()
    np.testing.assert_allclose(t.gradient(v, zv).numpy(), 2 * (z - m) / 3, rtol=1e-6, atol=1e-7)
