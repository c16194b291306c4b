"""Differences from TF 2.21 found by bench/tf_fuzz.py with seeds from 120000. Each expected value
is TF 2.21's, run with /work/benchenv (said per test), and derived by hand or with numpy as well."""
import numpy as np
import pytest

import jitgrad as tf
from _graph_testing import run_default_graph as _run

graph_modes = pytest.mark.usefixtures("graph_mode", "no_fallback")
f32 = np.float32


@graph_modes
def test_softsign_gradient_is_one_op_as_tfs_softsign_grad():
    """tf_fuzz seed 120030: the gradient of w * sum(softsign(x) / x) at x = 1e-30 is the sum of
    the division's two terms, +-w * 1e30, and the softsign term. TF's SoftsignGrad is one
    g / (1 + |x|)^2, so in float32 the terms cancel to 0; jitgrad composed softsign of RealDiv
    and Abs, whose extra -w * x / d^2 term was added after the cancellation: -w (the exact
    derivative, -sign(x) / (1 + |x|)^2 * w, but not TF's number). TF 2.21 printed
    [-0.11269309, 0, 0.11407194]; by hand at x = 1.0670848: -w / 2.0670848^2 = -0.1126931."""
    x0 = np.array([1.0670848, 1e-30, -1.0545537], f32)
    w = f32(0.4815195)
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(tf.float32, [3])
        y = tf.reduce_sum(tf.nn.softsign(x) / x) * w
        g = tf.gradients(y, x)[0]
        got = _run(g, {x: x0})
    np.testing.assert_allclose(got, [-0.11269309, 0.0, 0.11407194], rtol=1e-6)
    assert got[1] == 0.0


@graph_modes
def test_softsign_first_and_second_derivatives_by_hand():
    """softsign' = 1 / (1 + |x|)^2 (TF 2.21: [0.44444445, 0.11111111, 1]); softsign'' =
    -2 sign(x) / (1 + |x|)^3 (TF has no gradient for SoftsignGrad: LookupError; jitgrad's is the
    hand-derived one, also checked by central differences of the first derivative)."""
    x0 = np.array([0.5, -2.0, 0.0], f32)
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(tf.float32, [3])
        g = tf.gradients(tf.reduce_sum(tf.nn.softsign(x)), x)[0]
        h = tf.gradients(tf.reduce_sum(g), x)[0]
        got_g, got_h = _run([g, h], {x: x0})
    a = np.abs(x0.astype(np.float64))
    np.testing.assert_allclose(got_g, 1 / (1 + a) ** 2, rtol=1e-6)
    np.testing.assert_allclose(got_h, -2 * np.sign(x0) / (1 + a) ** 3, rtol=1e-6)
    eps = 1e-4
    x64 = x0.astype(np.float64)
    fd = (1 / (1 + np.abs(x64 + eps)) ** 2 - 1 / (1 + np.abs(x64 - eps)) ** 2) / (2 * eps)
    np.testing.assert_allclose(got_h[:2], fd[:2], rtol=1e-5)


@pytest.mark.usefixtures("graph_mode")      # half types are run by the interpreter in either mode
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_softsign_values_are_tfs_kernel_in_each_type(dtype):
    """x / (|x| + 1) with each step in the tensor's type, as Eigen's kernel; TF 2.21 printed
    float16 [0.23083496, -0.875, 0.99902344, 0.0029907227] and bfloat16 [0.23144531, -0.875, 1,
    0.0030059814] for x = [0.3, -7, 1000, 3e-3]; inf gives nan (inf / inf) as in TF."""
    dt = tf.as_dtype(dtype)
    v = np.array([0.3, -7.0, 1000.0, 3e-3, 0.0, -np.inf], np.float32).astype(dt.as_numpy_dtype)
    want = {"float16": [0.23083496, -0.875, 0.99902344, 0.0029907227],
            "bfloat16": [0.23144531, -0.875, 1.0, 0.0030059814]}.get(dtype)
    if want is None:
        vv = v[:4]
        want = vv / (np.abs(vv) + vv.dtype.type(1))     # numpy rounds each step in the type
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(dt, [6])
        got = _run(tf.nn.softsign(x), {x: v})
    assert got.dtype == v.dtype
    np.testing.assert_array_equal(got[:4].astype(np.float64), np.asarray(want, v.dtype).astype(np.float64))
    assert got[4] == 0.0 and np.isnan(got[5].astype(np.float32))


@pytest.mark.parametrize("fn,reverse,message", [
    ("scan", False, "index 0"), ("scan", True, "negative indices"),
    ("foldl", None, "index 0"), ("foldr", None, "negative indices")])
def test_eager_scan_and_folds_over_no_rows_without_initializer_are_out_of_range(fn, reverse, message):
    """tf_fuzz features seeds 120172, 120176, 120262: TF 2.21's eager scan / foldl / foldr read
    their first value from a TensorArray of the rows -- index 0, or n - 1 = -1 when reversed --
    and raise OutOfRangeError ('Tried to read from index 0 but array size is: 0', 'Reading from
    negative indices (index -1) is not allowed.'); jitgrad sliced row 0: InvalidArgumentError."""
    x = tf.constant(np.zeros((0, 3), f32))
    kw = {} if reverse is None else {"reverse": reverse}
    with pytest.raises(tf.errors.OutOfRangeError, match=message):
        getattr(tf, fn)(lambda a, v: a + v, x, **kw)


def test_eager_scan_over_no_rows_with_an_initializer_is_empty():
    """TF 2.21's eager scan of 0 rows from an initializer of shape (3,) returns shape (0, 3)
    (nothing stacked, of the initializer's shape); jitgrad raised ValueError."""
    x = tf.constant(np.zeros((0, 3), f32))
    out = tf.scan(lambda a, v: a + v, x, initializer=tf.zeros([3]))
    assert out.shape == (0, 3) and out.dtype == tf.float32
    nested = tf.scan(lambda a, v: (a[0] + v, a[1]), x, initializer=(tf.zeros([3]), tf.constant(1, tf.int32)))
    assert nested[0].shape == (0, 3) and nested[1].shape == (0,) and nested[1].dtype == tf.int32


@graph_modes
@pytest.mark.parametrize("axis", [None, 1])
def test_float32_mean_whose_sum_overflows_is_inf(axis):
    """tf_fuzz features seed 120261: TF's Mean sums float32 in float32 and divides the sum, so
    3e38 + 3e38 (+ small values) over 10 elements is inf (TF 2.21 printed inf; by hand 6e38 >
    float32's max 3.4e38). The compiled code divided its float64 sum first: a finite 6e37."""
    row = np.array([3e38, 0.5, 3e38, 1e30, -1.0, 0.25, 1e30, 2.0, -0.75, 1.0], f32)
    v = np.stack([row, row[::-1] * 0.5])
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2, 10])
        got = _run(tf.reduce_mean(x, axis=axis), {x: v})
    # the second row sums to 3e38 + 1e30 + ...: finite, its mean 3.0001e37 as numpy's float64 gives
    want = np.inf if axis is None else [np.inf, np.float32(np.sum(v[1].astype(np.float64)) / 10)]
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_softmax_cross_entropy_of_a_certain_class_is_plus_zero():
    """tf_fuzz features seed 122033: TF's kernel computes sum(labels * (log(sum(exp(shifted))) -
    shifted)), +0 for one class (TF 2.21 printed 0.0 with sign +, and rsqrt of it inf); jitgrad
    negated sum(labels * log_softmax): -0, so a following rsqrt gave -inf."""
    sparse = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=np.array(0, np.int32),
                                                            logits=tf.constant(np.array([-0.2869], f32)))
    dense = tf.nn.softmax_cross_entropy_with_logits(labels=[[1.0, 0.0]], logits=tf.constant([[3.0, -50.0]]))
    for v in (sparse, dense):
        assert np.all(v.numpy() == 0) and np.all(np.signbit(v.numpy()) == False)  # noqa: E712
    assert tf.math.rsqrt(sparse).numpy() == np.inf
