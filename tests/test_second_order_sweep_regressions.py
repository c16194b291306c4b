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


def _run(build, *feeds, mode="compiled"):
    g = tf.Graph()
    with g.as_default():
        phs = [tf.compat.v1.placeholder(tf.float64, np.shape(f)) for f in feeds]
        out = build(*phs)
        with tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto(jitgrad_mode=mode)) as s:
            return s.run(out, dict(zip(phs, feeds)))


@pytest.mark.parametrize("mode", ["compiled", "interpret"])
def test_lu_with_a_later_nan_pivot_gives_nan_not_an_error(mode):
    # TF's check is Eigen's minCoeff over |pivots| (std::min from the first: a later NaN is
    # skipped) > 0. [[2, 1], [nan, 1]]: pivot 2, then l = nan / 2, u11 = 1 - nan = nan; the
    # check sees min(2, nan) = 2 > 0 and the inverse is all NaN. TF 2.x: [[nan, nan], [nan, nan]].
    got = _run(lambda a: tf.linalg.inv(a), np.array([[2.0, 1.0], [np.nan, 1.0]]), mode=mode)
    assert np.isnan(got).all()


@pytest.mark.parametrize("mode", ["compiled", "interpret"])
def test_inverse_of_a_matrix_with_inf_keeps_ieee_nans(mode):
    # By hand (partial pivoting, IEEE): pivot inf, l10 = -inf / inf = nan, so row 1 and every
    # later pivot are nan (min |pivot| = inf > 0: no error), the inverse is all NaN.
    # TF 2.x: all nan. LAPACK (OpenBLAS) gave [[0, -0, -0], [0, 0.6, -0.2], [0, -0.2, 0.4]].
    a = np.array([[np.inf, 1.0, 1.0], [-np.inf, 2.0, 1.0], [1.0, 1.0, 3.0]])
    assert np.isnan(_run(lambda x: tf.linalg.inv(x), a, mode=mode)).all()
    assert np.isnan(_run(lambda x: tf.linalg.solve(x, tf.ones([3, 1], tf.float64)), a, mode=mode)).all()


@pytest.mark.parametrize("mode", ["compiled", "interpret"])
def test_cholesky_of_inf_and_nan_is_ieee(mode):
    # By hand: L00 = sqrt(inf) = inf, L10 = nan / inf = nan, L11 = sqrt(1 - nan^2) = nan.
    # TF 2.x: [[inf, 0], [nan, nan]]; LAPACK (OpenBLAS) gave [[inf, 0], [0, 1]].
    got = _run(lambda x: tf.linalg.cholesky(x), np.array([[np.inf, np.nan], [np.nan, 1.0]]), mode=mode)
    np.testing.assert_array_equal(got, [[np.inf, 0.0], [np.nan, np.nan]])
    # ... and its gradient is NaN, not the "not invertible" error of an inverse of L.
    # TF 2.x: [[nan, nan], [nan, nan]] (L^-1 by a triangular solve, no pivot check).
    g = _run(lambda x: tf.gradients(tf.reduce_sum(tf.linalg.cholesky(x)), x)[0],
             np.array([[np.inf, np.nan], [np.nan, 1.0]]), mode=mode)
    assert np.isnan(g).all()


@pytest.mark.parametrize("lower,adjoint,a", [
    (True, False, [[2.0, 99.0], [1.0, 4.0]]),      # x0 = 2/2, x1 = (5 - 1*1)/4
    (False, False, [[2.0, 3.0], [99.0, 4.0]]),     # x1 = 4/4, x0 = (5 - 3*1)/2
    (True, True, [[2.0, 0.0], [3.0, 4.0]]),        # L^T x = b: as the upper case
])
def test_triangular_solve(lower, adjoint, a):
    # TF 2.x: [[1], [1]] for all three (the other triangle is not read).
    b = [[2.0], [5.0]] if lower and not adjoint else [[5.0], [4.0]]
    got = _run(lambda m, r: tf.linalg.triangular_solve(m, r, lower=lower, adjoint=adjoint), np.array(a),
               np.array(b))
    np.testing.assert_array_equal(got, [[1.0], [1.0]])
