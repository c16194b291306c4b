"""Differences from TF 2.21 found by bench/tf_fuzz.py (seeds 93000, 93010 and the elu second
derivative of this stop). Each expected value is TF 2.21's, run with /work/benchenv (said per
test), and derived by hand or with numpy as well."""
import numpy as np
import pytest

import jitgrad as tf
from _graph_testing import run_default_graph as _run

graph_modes = pytest.mark.usefixtures("graph_mode")
f32 = np.float32


@graph_modes
def test_rsqrt_gradient_cut_off_by_a_where_is_zero_not_nan():
    """tf_fuzz seed 93010: where(rsqrt(x) > c, rsqrt(x), 0) at x < 0 (rsqrt NaN, the where takes
    the 0): TF's RsqrtGrad kernel gives 0 where the upstream gradient is 0; jitgrad multiplied
    0 by NaN^3. TF 2.21 printed [0, -0.0625, 0]; by hand d/dx x^-1/2 = -0.5 x^-3/2 = -0.0625
    at x = 4, and the where passes no gradient at x = -0.536 and x = -1."""
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(tf.float32, [3])
        r = tf.math.rsqrt(x)
        w = tf.where(r > 0.25, r, tf.zeros_like(r))
        g = tf.gradients(w, x)[0]
        got = _run(g, {x: np.array([-0.5360737, 4.0, -1.0], f32)})
    np.testing.assert_array_equal(got, [0.0, -0.0625, 0.0])


@graph_modes
@pytest.mark.parametrize("fn,first,second", [
    # x = [4, 0, inf, -1, nan], upstream gradient [1, 0, 0, 2, 0]. TF 2.21 printed these;
    # by hand at x = 4: rsqrt' = -0.5 x^-1.5 = -0.0625, rsqrt'' = 0.75 x^-2.5 = 0.0234375;
    # reciprocal' = -1/x^2 = -0.0625 (-2 at x = -1 with g = 2), reciprocal'' = 2/x^3 = 0.03125
    # (-4 at x = -1, g = 2). Where g = 0 the first derivative is 0 (TF's kernels check it);
    # the second derivatives' NaNs are TF's too (0 * inf in _RsqrtGradGrad / _ReciprocalGradGrad).
    ("rsqrt", [-0.0625, 0, 0, np.nan, 0], [0.0234375, np.nan, 0, np.nan, np.nan]),
    ("reciprocal", [-0.0625, 0, 0, -2, 0], [0.03125, np.nan, 0, -4, np.nan]),
])
def test_rsqrt_and_reciprocal_first_and_second_derivatives(fn, first, second):
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(tf.float32, [5])
        y = getattr(tf.math, fn)(x)
        d = tf.gradients(y, x, grad_ys=tf.constant(np.array([1, 0, 0, 2, 0], f32)))[0]
        d2 = tf.gradients(d, x)[0]
        got = _run([d, d2], {x: np.array([4, 0, np.inf, -1, np.nan], f32)})
    np.testing.assert_array_equal(got[0], np.array(first, f32))
    np.testing.assert_array_equal(got[1], np.array(second, f32))


@graph_modes
def test_reciprocal_gradient_squares_y_first_as_tf_does():
    """TF's ReciprocalGrad is (-y * y) * dy: at y = 1/x = 3e20, y * y overflows and the gradient
    with dy = 1e-30 is -inf (TF 2.21 printed -inf), where jitgrad's (-dy * y) * y gave the finite
    -9e10. The order is TF's; the true value -dy / x^2 = -9e10 is not what TF computes."""
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(tf.float32, [1])
        d = tf.gradients(tf.math.reciprocal(x), x, grad_ys=tf.constant([1e-30]))[0]
        got = _run(d, {x: np.array([1 / 3e20], f32)})
    assert got[0] == -np.inf


@graph_modes
@pytest.mark.parametrize("fn", ["elu", "selu"])
def test_elu_second_derivative_with_a_nan_upstream_gradient(fn):
    """d/dx EluGrad(g, elu(x)) with g = [nan, 0, 1, 1, 1, inf, 1, 1] at
    x = [nan, inf, -inf, 0, -0, -1, 2, -100]: TF's _EluGradGrad gives where(y < 0, grad * g, 0)
    for the outputs, so where y >= 0 or y is NaN a NaN g does not reach the result; jitgrad
    differentiated g * (y + 1) and got 0 * NaN = NaN at x = nan. TF 2.21 printed
    [0, 0, 0, 0, 0, inf, 0, 0] for both. By hand: elu'(x) = e^x for x < 0, 1 for x >= 0 (selu:
    times scale, and alpha below 0), so the first derivative is g * elu'(x): NaN (g), 0 (g = 0),
    0 (e^-inf), 1, 1, inf (inf * e^-1), 1, and e^-100 rounded to float32, 0; the second
    derivative is g * e^x below 0: inf at x = -1 and 0 elsewhere."""
    xs = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, -1.0, 2.0, -100.0], f32)
    gs = np.array([np.nan, 0, 1, 1, 1, np.inf, 1, 1], f32)
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(tf.float32, [8])
        d = tf.gradients(getattr(tf.nn, fn)(x), x, grad_ys=tf.constant(gs))[0]
        d2 = tf.gradients(d, x)[0]
        got = _run([d, d2], {x: xs})
    scale = f32(1.0507009873554805) if fn == "selu" else f32(1.0)
    np.testing.assert_allclose(got[0], np.array([np.nan, 0, 0, 1, 1, np.inf, 1, 0], f32) * scale, rtol=1e-6)
    np.testing.assert_array_equal(got[1], np.array([0, 0, 0, 0, 0, np.inf, 0, 0], f32))


@graph_modes
def test_floormod_of_floats_is_tfs_fmod_formula():
    """TF's FloorMod for floats: r = fmod(x, y), exact, plus y where r != 0 and the signs
    differ; a zero keeps fmod's sign (x's), where numpy's mod gives y's: TF 2.21 printed
    [-0, 0, 0, -0, 1, 6, 5, inf, -5]. The large ones by hand in integers: 3e38 in float32 is
    299999995880435962830515069718349135872, which is 1 mod 7 (and -3e38 is 6 mod 7)."""
    xs = np.array([-0.0, 0.0, 4.0, -4.0, 3e38, -3e38, 5.0, -5.0, -5.0], f32)
    ys = np.array([2.0, -2.0, -2.0, 2.0, 7.0, 7.0, np.inf, np.inf, -np.inf], f32)
    assert int(xs[4]) % 7 == 1 and int(xs[5]) % 7 == 6
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(tf.float32, [9])
        y = tf.compat.v1.placeholder(tf.float32, [9])
        got = _run(tf.math.floormod(x, y), {x: xs, y: ys})
    want = np.array([-0.0, 0.0, 0.0, -0.0, 1, 6, 5, np.inf, -5], f32)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def test_real_and_imag_of_a_complex_scalar_are_scalars():
    """tf_fuzz features seed 93000 (complex_program): tf.math.real of a 0-d complex tensor
    came out shape (1,) (np.ascontiguousarray makes a 0-d array 1-d); TF 2.21: shape ()."""
    z = tf.constant(np.complex64(1.25 - 0.5j))
    assert tf.math.real(z).shape == () and tf.math.real(z).numpy() == f32(1.25)
    assert tf.math.imag(z).shape == () and tf.math.imag(z).numpy() == f32(-0.5)
    c = tf.complex(tf.abs(z), tf.zeros_like(tf.math.real(z)))
    assert c.shape == ()


def test_numpy_function_returning_a_scalar_keeps_it_a_scalar():
    """The same np.ascontiguousarray in tf.numpy_function's outputs: TF 2.21 returns the scalar
    the function gave, shape ()."""
    out = tf.numpy_function(lambda v: np.float32(2) * v, [tf.constant(1.5)], tf.float32)
    assert out.shape == () and out.numpy() == f32(3.0)


@graph_modes
def test_split_by_sizes_along_a_dim_unknown_when_built():
    """tf_fuzz features seed 7071 (bad_input split_bad): tf.split(x, [2, 2]) of a [None]
    placeholder was a ValueError when the graph was built; TF builds it (pieces of static shape
    (2,)), splits a 4-element feed and fails a 5- or 3-element one with InvalidArgumentError
    (TF 2.21: "Determined shape must either match input shape along split_dim exactly ...").
    The pieces and the gradient (2 where the second piece is taken, 0 elsewhere) by hand."""
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None])
        parts = tf.split(x, [2, 2])
        y = tf.compat.v1.placeholder(tf.float32, [2, None, 3])
        q = tf.split(y, [1, 3], axis=1)
        grad = tf.gradients(q[1] * 2.0, y)[0]
        assert [p.shape.as_list() for p in parts] == [[2], [2]]
        assert [p.shape.as_list() for p in q] == [[2, 1, 3], [2, 3, 3]]
        with tf.compat.v1.Session() as s:
            got = s.run(parts, {x: np.arange(4, dtype=f32)})
            np.testing.assert_array_equal(got[0], [0, 1])
            np.testing.assert_array_equal(got[1], [2, 3])
            want = np.full((2, 4, 3), 2, f32)
            want[:, 0] = 0
            np.testing.assert_array_equal(s.run(grad, {y: np.ones((2, 4, 3), f32)}), want)
            for bad in (np.ones(5, f32), np.ones(3, f32)):
                with pytest.raises(tf.errors.InvalidArgumentError):
                    s.run(parts, {x: bad})


@graph_modes
def test_split_along_an_unknown_dim_that_a_reshape_could_not_check_is_checked_when_it_runs():
    """With another dim unknown too, x [None, None] split [1, 3] on axis 1 would be a reshape to
    [-1, 4], which a (2, 6) feed passes (12 elements) with wrong pieces. It was refused when built;
    TF builds it and its SplitV kernel rejects the (2, 6) feed: so does jitgrad's run-time split."""
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, None])
        parts = tf.split(x, [1, 3], axis=1)
        with tf.compat.v1.Session() as s:
            with pytest.raises(tf.errors.InvalidArgumentError, match="Determined shape must either match"):
                s.run(parts, {x: np.ones((2, 6), f32)})
            v = np.arange(8, dtype=f32).reshape(2, 4)
            got = s.run(parts, {x: v})
            np.testing.assert_array_equal(got[0], v[:, :1])
            np.testing.assert_array_equal(got[1], v[:, 1:])


@graph_modes
def test_feeds_are_cast_as_tfs_session_casts_them():
    """tf_fuzz features seeds 310001 / 310017 / 310033 (bad_input feed_dtype): a float32 array
    fed to an int32 placeholder was a ValueError; TF's Session casts it with numpy
    (np.asarray(v).astype: truncation toward zero) and runs. TF 2.21 printed, for x + 1:
    [2, 3, -2] from [1.5, 2.5, -3.5]; [2, 1] for bools; and '3' as a string feeds 3.
    A Python int the dtype cannot hold (2**40 into int32) is TF's TypeError."""
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(tf.int32, [None])
        b = tf.compat.v1.placeholder(tf.bool, [2])
        y = x + 1
        with tf.compat.v1.Session() as s:
            for _ in range(2):        # the second run goes through the session's fast path
                np.testing.assert_array_equal(s.run(y, {x: np.array([1.5, 2.5, -3.5], f32)}), [2, 3, -2])
            np.testing.assert_array_equal(s.run(y, {x: [True, False]}), [2, 1])
            np.testing.assert_array_equal(s.run(y, {x: ["3"]}), [4])
            np.testing.assert_array_equal(s.run(b, {b: np.array([2.0, 0.0])}), [True, False])
            with pytest.raises(TypeError, match="Type of feed value"):
                s.run(y, {x: 2 ** 40})
            with pytest.raises(ValueError):
                s.run(y, {x: ["abc"]})


def test_half_precision_transcendentals_are_rounded_once_from_float32():
    """tf_fuzz features seed 310013 (bfloat16_program): numpy evaluated float16 / bfloat16
    kernels in 16-bit steps. TF 2.21 printed 6.139278e-06 for float16 sigmoid(-12) (jitgrad: 0,
    1 + e^12 overflowed float16) and 0.90625 for bfloat16 sigmoid(2.25) (jitgrad 0.902344).
    By hand: 1 / (1 + e^12) = 6.1442e-06 is 103.08 float16 denormal steps of 2^-24, so 103 * 2^-24;
    sigmoid(2.25) = 0.904651 is nearer 0.90625 than 0.902344 (bfloat16 step 2^-8)."""
    assert tf.sigmoid(tf.constant(np.float16(-12.0))).numpy() == np.float16(103 * 2.0 ** -24)
    bf16 = tf.bfloat16.as_numpy_dtype
    assert float(tf.sigmoid(tf.constant(np.array(2.25, bf16))).numpy()) == 0.90625
    # rsqrt once rounded: float16(0.0060005) = 0.0060005188 -> 12.9094, nearer 12.90625 than 12.914
    assert tf.math.rsqrt(tf.constant(np.float16(0.0060005))).numpy() == np.float16(12.90625)


@graph_modes
def test_elu_is_exp_minus_one_as_tfs_kernel_computes_it():
    """TF's Elu kernel computes exp(x) - 1, not expm1: TF 2.21 printed elu(-1e-5) = -1.001358e-05
    in float32 (jitgrad's expm1 gave -9.99995e-06, 1.4e-3 away) and 0 in float16
    (exp(-1e-5) rounds to 1 in float16). Expected: numpy's float32 exp(x) - 1."""
    xs = np.array([-1e-5, -0.5, 2.0], f32)
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(tf.float32, [3])
        got = _run(tf.nn.elu(x), {x: xs})
    want = np.where(xs < 0, np.exp(xs) - f32(1), xs)
    np.testing.assert_allclose(got, want, rtol=2e-7)
    assert got[0] == f32(-1.001358e-05)
    assert tf.nn.elu(tf.constant(np.float16(-1e-5))).numpy() == 0


def test_half_precision_softplus_and_selu_follow_tfs_kernels():
    """TF's Softplus kernel returns exp(x) below log(eps) + 2 with Eigen's epsilon of the type
    (bfloat16 2^-7: -2.86; float16 2^-13: -7.01) and x above its negative; TF 2.21 printed
    bfloat16 softplus(-3) = 0.0498046875 (= bfloat16(exp(-3)), where log1p(exp(-3)) = 0.04859
    would give 0.0485840) and float16 softplus(6) = 6.00390625 (log1p(e^6) = 6.00248, not 6).
    Selu is scale_alpha * (exp(x) - 1): TF printed -1.7578125 for bfloat16 selu(-12)
    (-1.7581 by hand; jitgrad's (elu * alpha) * scale gave -1.75)."""
    bf16 = tf.bfloat16.as_numpy_dtype
    assert float(tf.nn.softplus(tf.constant(np.array(-3.0, bf16))).numpy()) == 0.0498046875
    assert tf.nn.softplus(tf.constant(np.float16(6.0))).numpy() == np.float16(6.00390625)
    assert float(tf.nn.selu(tf.constant(np.array(-12.0, bf16))).numpy()) == -1.7578125
