"""tf.cast of NaN, +-inf, out-of-range values and denormals, and the double rounding of casts
to float16 / bfloat16, as TF 2.21's Cast (jitgrad/ops/cast_kernel.py says why each rule).
Expected values are written from those rules by hand; the ones marked were checked against
TF 2.21 too. float32 / float64 graphs run interpreted and compiled; float16 / bfloat16 (no
compiled lowering) eagerly and interpreted."""
import ml_dtypes
import numpy as np
import pytest

import jitgrad as tf
from _graph_testing import run_graph

BF16 = np.dtype(ml_dtypes.bfloat16)
NAN, INF = np.nan, np.inf
# inputs, all exact in every float type (bfloat16 too): 300 and 65536 + 4096 + ... aside
X = [NAN, INF, -INF, 1e20, -1e20, 300.0, -300.0, -1.5, 2.5, -0.0, 2.0 ** 31, -(2.0 ** 31)]
I32_MIN, I64_MIN = -(2 ** 31), -(2 ** 63)
# TF 2.21's values (checked): INT_MIN for NaN, +-inf and out of range
WANT = {
    np.int32: [I32_MIN, I32_MIN, I32_MIN, I32_MIN, I32_MIN, 300, -300, -1, 2, 0, I32_MIN, I32_MIN],
    np.int64: [I64_MIN, I64_MIN, I64_MIN, I64_MIN, I64_MIN, 300, -300, -1, 2, 0, 2 ** 31, -(2 ** 31)],
    # [-2^63, 2^64) wraps modulo 2^64, the rest is 2^63
    np.uint64: [2 ** 63, 2 ** 63, 2 ** 63, 2 ** 63, 2 ** 63, 300, 2 ** 64 - 300, 2 ** 64 - 1, 2, 0, 2 ** 31,
                2 ** 64 - 2 ** 31],
    # [-2^31, 2^32) wraps modulo 2^32, the rest is 2^31
    np.uint32: [2 ** 31, 2 ** 31, 2 ** 31, 2 ** 31, 2 ** 31, 300, 2 ** 32 - 300, 2 ** 32 - 1, 2, 0, 2 ** 31, 2 ** 31],
    # the low bits of the int32 conversion (TF's for small tensors)
    np.int8: [0, 0, 0, 0, 0, 300 - 256, 256 - 300, -1, 2, 0, 0, 0],
    np.uint8: [0, 0, 0, 0, 0, 300 - 256, 512 - 300, 255, 2, 0, 0, 0],
    np.int16: [0, 0, 0, 0, 0, 300, -300, -1, 2, 0, 0, 0],
    np.uint16: [0, 0, 0, 0, 0, 300, 65536 - 300, 65535, 2, 0, 0, 0],
}


@pytest.mark.parametrize("dst", list(WANT), ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("src", [np.float16, BF16, np.float32, np.float64], ids=lambda d: np.dtype(d).name)
def test_float_to_int_special_values_eager(src, dst):
    n = len(X) - 2 if src is np.float16 else len(X)    # (+-2^31 is beyond float16; 1e20 is inf there)
    with np.errstate(over="ignore"):
        x = np.array(X[:n], np.float64).astype(src)
    got = tf.cast(tf.constant(x), tf.as_dtype(dst)).numpy()
    assert got.dtype == dst
    np.testing.assert_array_equal(got, np.array(WANT[dst][:n], dst))


@pytest.mark.parametrize("mode", ["interpret", "compiled"])
@pytest.mark.parametrize("dst", [np.int32, np.int64])
@pytest.mark.parametrize("src", [np.float32, np.float64])
def test_float_to_int_special_values_graph(src, dst, mode):
    x = np.array(X * 3, src)       # also a whole vector's worth, compiled
    (got,) = run_graph(lambda p: [tf.cast(p, tf.as_dtype(dst))], [x], mode)
    np.testing.assert_array_equal(got, np.array(WANT[dst] * 3, dst))


def test_bfloat16_nan_to_int32_is_int_min():
    # TF 2.21: -2147483648 (jitgrad gave 0: ml_dtypes' conversion)
    x = tf.constant([NAN, 1.5, -INF], tf.bfloat16)
    assert tf.cast(x, tf.int32).numpy().tolist() == [I32_MIN, 1, I32_MIN]


def _bits(a):
    return np.asarray(a).view(np.uint16).tolist()


def test_float64_and_ints_to_half_types_round_through_float32():
    # Eigen's half(T) / bfloat16(T) convert float(T): float64 1 + 2^-8 + 2^-30 is 1 + 2^-8 in
    # float32, a tie bfloat16 rounds to even (1.0; once it would be 1 + 2^-7); 65520 - 2^-20
    # is 65520 in float32, a tie float16 rounds to inf (TF 2.21: inf, 1.0 as here)
    x = tf.constant([1 + 2 ** -8 + 2 ** -30, -(1 + 2 ** -8 + 2 ** -30), 65520 - 2 ** -20, 2 ** -25 + 2 ** -50],
                    tf.float64)
    assert tf.cast(x, tf.bfloat16).numpy().astype(np.float64).tolist() == [1.0, -1.0, 65536.0, 2.0 ** -25]
    assert tf.cast(x, tf.float16).numpy().astype(np.float64).tolist() == [1 + 2 ** -8, -(1 + 2 ** -8), INF, 0.0]
    # int32 2^24 + 2^16 + 1 is 2^24 + 2^16 in float32 (a tie, to even), a bfloat16 tie: 2^24
    i = tf.constant([2 ** 24 + 2 ** 16 + 1, 2 ** 24 + 2 ** 17 + 2 ** 16], tf.int32)
    assert tf.cast(i, tf.bfloat16).numpy().astype(np.float64).tolist() == [2.0 ** 24, 2.0 ** 24 + 2 ** 18]


def test_float32_to_bfloat16_rounds_to_nearest_even():
    f = np.array([1 + 2 ** -8, 1 + 3 * 2 ** -8, 1 + 2 ** -8 + 2 ** -20, 3.3895314e38, 3.4e38, -3.4e38,
                  INF, -INF, -0.0], np.float32)
    # ties to even (0x3f80, 0x3f82), above the tie up, the largest finite, overflow to +-inf
    assert _bits(tf.cast(tf.constant(f), tf.bfloat16).numpy()) == [0x3f80, 0x3f82, 0x3f81, 0x7f7f, 0x7f80, 0xff80,
                                                                   0x7f80, 0xff80, 0x8000]
    nan = tf.cast(tf.constant([NAN], tf.float32), tf.bfloat16).numpy()
    assert np.isnan(nan.astype(np.float32)).all()


def test_float32_and_bfloat16_keep_denormals_other_casts_flush():
    # TF 2.21 converts float32 <-> bfloat16 with integer bit operations (denormals kept both
    # ways); every other cast runs on the FPU under FTZ + DAZ
    d = np.array([1e-40, -1e-40], np.float32)
    b = tf.cast(tf.constant(d), tf.bfloat16)
    assert _bits(b.numpy()) == [0x0001, 0x8001]                      # 2^-133, the nearest bfloat16
    assert tf.cast(b, tf.float32).numpy().tolist() == [2.0 ** -133, -(2.0 ** -133)]
    back = tf.cast(b, tf.float64).numpy()
    assert back.tolist() == [0.0, 0.0] and np.signbit(back).tolist() == [False, True]
    wide = tf.cast(tf.constant(d.astype(np.float64)), tf.bfloat16).numpy()   # a float32 denormal on the way
    assert _bits(wide) == [0x0000, 0x8000]
    assert tf.cast(tf.constant(d), tf.bool).numpy().tolist() == [False, False]
    assert tf.cast(tf.constant(d), tf.float64).numpy().tolist() == [0.0, 0.0]


def test_denormal_casts_without_the_flush_mode():
    tf.config.set_flush_denormals(False)
    d = np.array([1e-40], np.float32)
    assert tf.cast(tf.constant(d), tf.float64).numpy().tolist() == [float(d[0])]
    wide = tf.cast(tf.constant(d.astype(np.float64)), tf.bfloat16).numpy()
    assert _bits(wide) == [0x0001]
    assert tf.cast(tf.constant(d), tf.bool).numpy().tolist() == [True]
