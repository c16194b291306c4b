"""Batched hessians / jacobians with NaN and inf inputs give what TF's per-row loop of
tf.gradients gives: row i is the gradient of y_i, and its zero cotangent entries meet
non-finite factors as 0 * nan = nan, 0 * inf = nan. (The one-hot fast path never computes
those entries; batched_gradients then runs the dense pass.) Expected values are the
per-row chain rule written out in numpy, which has the same IEEE 0 * nan semantics."""
import numpy as np
import pytest

import jitgrad as tf

pytestmark = pytest.mark.usefixtures("graph_mode")


def _session_hessian(fn, x0):
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float64, x0.shape)
        (h,) = tf.hessians(fn(x), x)
        with tf.compat.v1.Session(graph=g) as s:
            return s.run(h, {x: x0})


def _function_jacobian(fn, x0):
    @tf.function
    def jac(x):
        with tf.GradientTape() as t:
            t.watch(x)
            y = fn(x)
        return t.jacobian(y, x)
    return jac(tf.constant(x0)).numpy()


def _function_hessian(fn, x0):
    @tf.function
    def hess(x):
        with tf.GradientTape() as t2:
            t2.watch(x)
            with tf.GradientTape() as t1:
                t1.watch(x)
                y = fn(x)
            g = t1.gradient(y, x)
        return t2.jacobian(g, x)
    return hess(tf.constant(x0)).numpy()


def _same(got, expected):
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=0, equal_nan=True)


def test_tanh_hessian_nan_goes_to_the_column():
    """g = TanhGrad(t, 1) = 1 - t^2; row i: e_i * (-2 t) (wrt t), times (1 - t^2) (wrt x):
    entry (i, k) = e_i[k] * -2 t_k * (1 - t_k^2), NaN in column 1 for every row."""
    x0 = np.array([0.5, np.nan, 1.0])
    t = np.tanh(x0)
    with np.errstate(invalid="ignore"):
        expected = (np.eye(3) * (-2.0 * t)) * (1.0 - t * t)
    assert np.isnan(expected[:, 1]).all() and not np.isnan(np.delete(expected, 1, axis=1)).any()
    fn = lambda x: tf.reduce_sum(tf.tanh(x))  # noqa: E731
    _same(_session_hessian(fn, x0), expected)
    _same(_function_hessian(fn, x0), expected)


def test_exp_hessian_inf_input():
    """d/dx exp = exp; row i of the hessian: e_i * exp(x): (i, 1) = 0 * inf = nan for i != 1."""
    x0 = np.array([0.0, np.inf, -1.0])
    with np.errstate(invalid="ignore"):
        expected = np.eye(3) * np.exp(x0)
    assert np.isnan(expected[0, 1]) and expected[1, 1] == np.inf and expected[0, 0] == 1.0
    fn = lambda x: tf.reduce_sum(tf.exp(x))  # noqa: E731
    _same(_session_hessian(fn, x0), expected)
    _same(_function_hessian(fn, x0), expected)


def test_jacobian_of_a_scaling_by_a_non_finite_constant():
    """y = x * c: row i of dy/dx is e_i * c, so column k is NaN (off the diagonal) where c_k is."""
    c = np.array([2.0, np.inf, np.nan, -3.0])
    x0 = np.array([1.0, 2.0, 3.0, 4.0])
    with np.errstate(invalid="ignore"):
        expected = np.eye(4) * c
    _same(_function_jacobian(lambda x: x * tf.constant(c), x0), expected)


def test_jacobian_through_a_matmul_with_a_nan_weight():
    """y = x @ W, x [1, 2]: dy_j/dx = W[:, j]^T, computed per row as e_j @ W^T, where
    e_j's zeros meet the NaN in W[0, 2]: every row's x_0 entry is NaN, as TF's loop gives."""
    W = np.array([[1.0, 2.0, np.nan], [3.0, 4.0, 5.0]])
    x0 = np.array([[0.5, -1.0]])
    e = np.eye(3).reshape(3, 1, 3)
    with np.errstate(invalid="ignore"):
        expected = np.stack([(e[j] @ W.T) for j in range(3)]).reshape(1, 3, 1, 2)
    assert np.isnan(expected[0, :, 0, 0]).all() and np.isfinite(expected[0, :2, 0, 1]).all()
    _same(_function_jacobian(lambda x: tf.matmul(x, tf.constant(W)), x0), expected)


def test_finite_inputs_still_match_the_hand_hessian():
    """The run-time choice keeps the one-hot path for finite inputs: sum(sin(x) x^2) has the
    diagonal hessian 2 sin x + 4 x cos x - x^2 sin x."""
    x0 = np.array([0.3, -1.2, 2.0])
    expected = np.diag(2 * np.sin(x0) + 4 * x0 * np.cos(x0) - x0 ** 2 * np.sin(x0))
    fn = lambda x: tf.reduce_sum(tf.sin(x) * x ** 2)  # noqa: E731
    np.testing.assert_allclose(_session_hessian(fn, x0), expected, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(_function_hessian(fn, x0), expected, rtol=1e-12, atol=1e-15)
