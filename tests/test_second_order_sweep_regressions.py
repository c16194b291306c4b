"""Regressions found by bench/tf_second_order_sweep.py (values, gradients and hessians of
every differentiable op at ties, zeros, x == mean, overflow, inf and NaN points, against
TF 2.x). Expected values are derived by hand or with numpy, not by running jitgrad; each
test says what TF gives."""
import numpy as np
import pytest

import jitgrad as tf

pytestmark = pytest.mark.usefixtures("graph_mode")


def _hessian(fn, x0, mode):
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float64, x0.shape)
        (h,) = tf.hessians(fn(x), x)
        with tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto(jitgrad_mode=mode)) as s:
            return s.run(h, {x: x0})


@pytest.mark.parametrize("mode", ["compiled", "interpret"])
def test_hessian_through_sqrt_at_zero_has_nan_in_the_whole_column(mode):
    # f(x) = sum(where(x > 0, sqrt(|x|), 0)). Row i of tf.hessians is the gradient of
    # g_i = df/dx_i; SqrtGrad's gradient is g / sqrt(x) (TF's _SqrtGradGrad: ga = grad / a),
    # so in EVERY row the zero cotangent entry at x_1 = 0 meets 0 / sqrt(0) = 0 / 0 = nan.
    # The batched one-hot pass never computed that entry (it only checked that the divisor
    # sqrt(x) was finite) and gave nan on the diagonal only.
    # By hand: diagonal d2/dx2 sqrt(x) = -x^(-3/2) / 4 for x > 0; column 1 nan; else 0.
    # TF 2.x: [[-0.70710678, nan, 0], [0, nan, 0], [0, nan, -0.08838835]].
    x0 = np.array([0.5, 0.0, 2.0])
    expected = np.diag(-0.25 * np.where(x0 > 0, x0, 1.0) ** -1.5)
    expected[:, 1] = np.nan
    got = _hessian(lambda x: tf.reduce_sum(tf.where(x > 0, tf.sqrt(tf.abs(x)), tf.zeros_like(x))), x0, mode)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=0, equal_nan=True)


_NAN_MATRIX = np.array([[np.nan, 1.0, 2.0], [3.0, 4.0, 5.0], [1.0, 0.0, 1.0]])


@pytest.mark.parametrize("mode", ["compiled", "interpret"])
@pytest.mark.parametrize("what", ["inv", "solve", "det_gradient", "slogdet_gradient"])
def test_lu_of_a_matrix_with_nan_is_not_invertible(what, mode):
    # TF's MatrixInverse / MatrixSolve kernels raise unless every LU pivot has |p| > 0; a NaN
    # entry always ends up in a pivot (NaN > 0 is false). TF 2.x: InvalidArgumentError "Input is
    # not invertible." (inv, and the gradients of det / slogdet, which invert the matrix) and
    # "Input matrix is not invertible." (solve). jitgrad's LAPACK kernels returned NaN.
    # (det / slogdet themselves give NaN in TF, no error: checked below.)
    g = tf.Graph()
    with g.as_default():
        a = tf.compat.v1.placeholder(tf.float64, [3, 3])
        if what == "inv":
            out = tf.linalg.inv(a)
        elif what == "solve":
            out = tf.linalg.solve(a, tf.ones([3, 2], tf.float64))
        elif what == "det_gradient":
            out = tf.gradients(tf.linalg.det(a), a)[0]
        else:
            out = tf.gradients(tf.linalg.slogdet(a)[1], a)[0]
        det = tf.linalg.det(a)
        with tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto(jitgrad_mode=mode)) as s:
            assert np.isnan(s.run(det, {a: _NAN_MATRIX}))
            with pytest.raises(tf.errors.InvalidArgumentError, match="not invertible"):
                s.run(out, {a: _NAN_MATRIX})


def test_eager_inv_of_a_matrix_with_nan_raises():
    # TF 2.x eager: InvalidArgumentError "Input is not invertible." [Op:MatrixInverse].
    assert tf.executing_eagerly()
    with pytest.raises(tf.errors.InvalidArgumentError, match="not invertible"):
        tf.linalg.inv(tf.constant(_NAN_MATRIX))
