"""tf.truncatediv / tf.truncatemod (TF 2.21: top level and tf.compat.v1, not tf.math): C's
division toward zero and its remainder (x's sign), compiled (no interpreter fallback) and
interpreted Sessions and eager against Python's exact integer / Fraction arithmetic, the
dtypes, errors and gradients real TF 2.21 has (checked side by side)."""
import math
import os
import sys
from fractions import Fraction

import numpy as np
import pytest

import jitgrad as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _graph_testing import dtype_id, run_graph  # noqa: E402

MODES = ["compiled", "interpret"]


def _c_div(a, b):
    """C's integer quotient, exact (Python's // rounds toward -inf)."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def test_names_as_tf():
    assert tf.compat.v1.truncatediv is tf.truncatediv and tf.compat.v1.truncatemod is tf.truncatemod
    assert not hasattr(tf.math, "truncatediv") and not hasattr(tf.math, "truncatemod")   # (as TF 2.21)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", [np.int32, np.int64], ids=dtype_id)
def test_integers_against_c_division(dtype, mode):
    rng = np.random.default_rng(7)
    info = np.iinfo(dtype)
    x = np.concatenate([rng.integers(-50, 50, 301), rng.integers(info.min, info.max, 101, dtype=dtype),
                        [info.min, info.max, info.min, 0, -1, 1]]).astype(dtype)
    y = np.concatenate([rng.integers(1, 9, 301) * rng.choice([-1, 1], 301),
                        rng.integers(1, 1000, 101) * rng.choice([-1, 1], 101), [-1, -1, 1, 5, 7, -7]]).astype(dtype)
    q, r = run_graph(lambda a, b: [tf.truncatediv(a, b), tf.truncatemod(a, b)], [x, y], mode)
    assert q.dtype == dtype and r.dtype == dtype
    for a, b, qi, ri in zip(x.tolist(), y.tolist(), q.tolist(), r.tolist()):
        want = _c_div(a, b)
        if want > info.max:          # MIN / -1 wraps to MIN, as TF's kernel
            want = info.min
        assert qi == want, (a, b, qi)
        assert ri == a - _c_div(a, b) * b, (a, b, ri)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=dtype_id)
def test_floats(dtype, mode):
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.uniform(-100, 100, 257), [7.5, -7.5, 7.5, -7.5, 0.0, -0.0, 1e30, -3.0, 2.5]])
    y = np.concatenate([rng.uniform(-9, 9, 257), [2.0, 2.0, -2.0, -2.0, 3.0, 3.0, 3.0, 3.0, -1e-3]])
    x, y = x.astype(dtype), y.astype(dtype)
    q, r = run_graph(lambda a, b: [tf.truncatediv(a, b), tf.truncatemod(a, b)], [x, y], mode)
    for a, b, qi, ri in zip(x.tolist(), y.tolist(), q.tolist(), r.tolist()):
        quotient = dtype(a) / dtype(b)              # the quotient rounded to the type, then truncated
        assert qi == math.trunc(float(quotient)) and math.copysign(1, qi) == math.copysign(1, quotient), (a, b, qi)
        exact = Fraction(a) - math.trunc(Fraction(a) / Fraction(b)) * Fraction(b)   # fmod is exact
        assert ri == float(exact) and math.copysign(1, ri) == math.copysign(1, a), (a, b, ri)


@pytest.mark.parametrize("mode", MODES)
def test_float_special_values_as_tf(mode):
    """Values and signs printed by TF 2.21 for these pairs (eager, float32)."""
    inf, nan = np.inf, np.nan
    x = np.array([1.0, -1.0, inf, 5.0, nan, -0.0, 0.0, -inf], np.float32)
    y = np.array([0.0, 0.0, 2.0, inf, 1.0, 3.0, -3.0, -2.0], np.float32)
    q, r = run_graph(lambda a, b: [tf.truncatediv(a, b), tf.truncatemod(a, b)], [x, y], mode)
    np.testing.assert_array_equal(q, [inf, -inf, inf, 0.0, nan, -0.0, -0.0, inf])
    np.testing.assert_array_equal(np.signbit(q[[0, 1, 3, 5, 6]]), [False, True, False, True, True])
    np.testing.assert_array_equal(r, [nan, nan, nan, 5.0, nan, -0.0, 0.0, nan])
    np.testing.assert_array_equal(np.signbit(r[[3, 5, 6]]), [False, True, False])


def test_broadcast_and_eager_match_graph():
    x = np.array([[7], [-9], [-2147483648]], np.int32)
    y = np.array([2, -4, 5], np.int32)
    want_q = [[3, -1, 1], [-4, 2, -1], [-1073741824, 536870912, -429496729]]
    want_r = [[1, 3, 2], [-1, -1, -4], [0, 0, -3]]
    for mode in MODES:
        q, r = run_graph(lambda a, b: [tf.truncatediv(a, b), tf.truncatemod(a, b)], [x, y], mode)
        np.testing.assert_array_equal(q, want_q)
        np.testing.assert_array_equal(r, want_r)
    np.testing.assert_array_equal(tf.truncatediv(tf.constant(x), tf.constant(y)).numpy(), want_q)
    np.testing.assert_array_equal(tf.truncatemod(tf.constant(x), tf.constant(y)).numpy(), want_r)
    assert tf.truncatediv(tf.constant([7, -7]), 2).numpy().tolist() == [3, -3]


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint16, np.uint32, np.uint64], ids=dtype_id)
def test_narrow_and_unsigned_integers_divide_mod_does_not(dtype):
    """TF 2.21: TruncateDiv takes every integer type; TruncateMod only int32 / int64
    (InvalidArgumentError eagerly, TypeError while building a graph)."""
    signed = np.dtype(dtype).kind == "i"
    x = np.array([7, -7, 7, -7] if signed else [7, 8, 9, 250], dtype)
    y = np.array([2, 2, -2, -2] if signed else [2, 3, 4, 7], dtype)
    want = [3, -3, -3, 3] if signed else [3, 2, 2, 35]
    got = tf.truncatediv(tf.constant(x), tf.constant(y)).numpy()
    assert got.dtype == dtype and got.tolist() == want
    (got,) = run_graph(lambda a, b: [tf.truncatediv(a, b)], [x, y], "compiled", fallback_ok=True)
    assert got.tolist() == want
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.truncatemod(tf.constant(x), tf.constant(y))
    with tf.Graph().as_default(), pytest.raises(TypeError):
        tf.truncatemod(tf.compat.v1.placeholder(dtype, [4]), tf.compat.v1.placeholder(dtype, [4]))


def test_half_types():
    """float16 / bfloat16: TruncateDiv as TF (3, -3 ...); TF has no TruncateMod kernel for them."""
    for dt in (tf.float16, tf.bfloat16):
        x = tf.constant([7.0, -7.0, 7.0, -7.0, 0.0], dt)
        y = tf.constant([2.0, 2.0, -2.0, -2.0, 3.0], dt)
        assert tf.truncatediv(x, y).numpy().astype(np.float32).tolist() == [3, -3, -3, 3, 0]
        with pytest.raises(tf.errors.NotFoundError):
            tf.truncatemod(x, y)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", [np.int32, np.int64], ids=dtype_id)
def test_integer_division_by_zero_is_tfs_internal_error(dtype, mode):
    """TF 2.21 raises InternalError for both ops (eager, tf.function and Session), unlike
    FloorDiv's InvalidArgumentError."""
    x, y = np.array([1, 2, 3], dtype), np.array([1, 0, 1], dtype)
    for fn in (tf.truncatediv, tf.truncatemod):
        with pytest.raises(tf.errors.InternalError, match="only integer div and mod should have errors"):
            run_graph(lambda a, b: [fn(a, b)], [x, y], mode)
        with pytest.raises(tf.errors.InternalError):
            fn(tf.constant(x), tf.constant(y))


def test_gradients_as_tf():
    """TF 2.21: TruncateDiv is not differentiable (None), TruncateMod has no gradient (LookupError)."""
    x, y = tf.Variable([7.5, -3.25, 4.0]), tf.Variable([2.0, 1.5, -3.0])
    with tf.GradientTape() as t:
        z = tf.truncatediv(x, y)
    assert t.gradient(z, [x, y]) == [None, None]
    with tf.GradientTape() as t:
        z = tf.truncatemod(x, y)
    with pytest.raises(LookupError):
        t.gradient(z, [x, y])
