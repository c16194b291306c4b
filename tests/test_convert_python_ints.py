"""Python ints and bools converted to a tensor's dtype as TF 2.21's eager conversion does
(each value printed by real TF 2.21 side by side): an int int64 holds wraps into a narrower
integer dtype as a C cast (300 as int8 is 44, -1 as uint8 255, int32 + 2**40 adds 0); uint64
takes [2**63, 2**64) too (an OverflowError before); other ints beyond int64 are a ValueError;
a Python bool converts to int32 / int64 / uint64 / float16 / float32 / float64 / complex128 as
0 / 1 (float_tensor + True adds 1.0) and is refused (TypeError) by the other number types.
uint64 values of 2**63 or more then go through ops in eager, interpreted and compiled Sessions
(uint64 has no lowering yet: a compiled run computes it in the reference interpreter)."""
import numpy as np
import pytest

import jitgrad as tf

MODES = ["compiled", "interpret"]
BIG = [2 ** 64 - 1, 2 ** 63, 5, 2 ** 63 + 5]


def _wrap(v, dtype):
    info = np.iinfo(dtype)
    v %= 1 << info.bits
    return v - (1 << info.bits) if v > info.max else v


def test_uint64_constants_of_2_63_and_more():
    t = tf.constant(BIG, tf.uint64)
    assert t.dtype == tf.uint64 and t.numpy().tolist() == BIG
    assert tf.constant(2 ** 63, tf.uint64).numpy() == 2 ** 63
    assert tf.convert_to_tensor(2 ** 63, tf.uint64).numpy() == 2 ** 63
    assert tf.Variable([2 ** 63], dtype=tf.uint64).numpy().tolist() == [2 ** 63]
    assert (tf.ones([2], tf.uint64) * 2 ** 63).numpy().tolist() == [2 ** 63] * 2
    for bad in ([2 ** 64], -1, [2 ** 63, -1]):
        with pytest.raises(ValueError):
            tf.constant(bad, tf.uint64)
    for bad, dt in ((2 ** 63, tf.int64), ([2 ** 63, 1], None), (-2 ** 63 - 1, tf.int64), (2 ** 63, tf.int32)):
        with pytest.raises(ValueError, match="out-of-range integer"):
            tf.constant(bad, dt)


def _uint64_ops(a, b):
    return [a + b, a - b, a > b, tf.equal(a, 2 ** 63), a > 2 ** 63, tf.cast(a, tf.float32), tf.cast(a, tf.float64),
            tf.cast(a, tf.int64), a + 2 ** 63, tf.bitwise.right_shift(a, tf.constant(60, tf.uint64)), a ^ 2 ** 63]


def _check_uint64(outs, a, b):
    m = 1 << 64
    want = [[(x + y) % m for x, y in zip(a, b)], [(x - y) % m for x, y in zip(a, b)], [x > y for x, y in zip(a, b)],
            [x == 2 ** 63 for x in a], [x > 2 ** 63 for x in a], [float(np.float32(x)) for x in a],
            [float(x) for x in a], [_wrap(x, np.int64) for x in a], [(x + 2 ** 63) % m for x in a],
            [x >> 60 for x in a], [x ^ 2 ** 63 for x in a]]
    for got, w in zip(outs, want):
        assert np.asarray(got).tolist() == w


def test_uint64_big_values_through_ops_eager():
    b = [1, 2 ** 63, 7, 2 ** 63 + 6]
    _check_uint64(_uint64_ops(tf.constant(BIG, tf.uint64), tf.constant(b, tf.uint64)), BIG, b)
    # values TF 2.21 printed
    a = tf.constant([2 ** 64 - 1, 2 ** 63, 5], tf.uint64)
    assert tf.cast(a, tf.float32).numpy().tolist() == [1.8446744073709552e+19, 9.223372036854776e+18, 5.0]
    assert (a + 1).numpy().tolist() == [0, 2 ** 63 + 1, 6]
    assert tf.reduce_max(a).numpy() == 2 ** 64 - 1


@pytest.mark.parametrize("mode", MODES)
def test_uint64_big_values_through_ops_in_sessions(mode):
    b = [1, 2 ** 63, 7, 2 ** 63 + 6]
    g = tf.Graph()
    with g.as_default():
        pa = tf.compat.v1.placeholder(tf.uint64, [4])
        outs = _uint64_ops(pa, tf.constant(b, tf.uint64))
    with tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto(jitgrad_mode=mode)) as s:
        got = s.run(outs, {pa: np.array(BIG, np.uint64)})
    _check_uint64(got, BIG, b)


def test_uint64_in_tf_function():
    f = tf.function(lambda x: x + tf.constant(2 ** 63, tf.uint64))
    assert f(tf.constant([2 ** 63, 1], tf.uint64)).numpy().tolist() == [0, 2 ** 63 + 1]


@pytest.mark.parametrize("dt", [np.int8, np.int16, np.int32, np.uint8, np.uint16, np.uint32, np.int64],
                         ids=lambda d: np.dtype(d).name)
def test_python_ints_wrap_into_the_dtype(dt):
    values = [300, -1, 2 ** 40, -129, 2 ** 31, 2 ** 63 - 1, -2 ** 63]
    want = [_wrap(v, dt) for v in values]
    assert tf.constant(values, tf.as_dtype(dt)).numpy().tolist() == want
    assert [tf.constant(v, tf.as_dtype(dt)).numpy() for v in values] == want
    one = tf.constant([1], tf.as_dtype(dt))
    assert [(one + v).numpy().tolist()[0] for v in values] == [_wrap(1 + w, dt) for w in want]


def test_values_tf_printed():
    assert (tf.constant([1], tf.int8) + 300).numpy().tolist() == [45]
    assert (tf.constant([1]) + 2 ** 40).numpy().tolist() == [1]
    assert (tf.constant([1], tf.uint8) + (-1)).numpy().tolist() == [0]
    assert tf.constant(-1, tf.uint8).numpy() == 255 and tf.constant(-1, tf.uint8).dtype == tf.uint8
    assert tf.constant([-1, 300], tf.uint8).numpy().tolist() == [255, 44]
    assert tf.constant(2 ** 31, tf.int32).numpy() == -2 ** 31
    assert tf.maximum(tf.constant([1], tf.int8), 300).numpy().tolist() == [44]
    assert tf.Variable(300, dtype=tf.int8).numpy() == 44
    with pytest.raises(ValueError):
        tf.constant([1], tf.int64) + 2 ** 63


@pytest.mark.parametrize("dt", ["int32", "int64", "uint64", "float16", "float32", "float64", "complex128"])
def test_python_bools_as_numbers(dt):
    want = getattr(tf, dt)
    t = tf.constant(True, want)
    assert t.dtype == want and t.numpy() == 1
    assert tf.constant([True, False], want).numpy().tolist() == [1, 0]
    assert tf.convert_to_tensor(True, want).numpy() == 1
    assert (tf.constant([1.5 if want.is_floating else 1], want) + True).numpy().tolist() == \
        [2.5 if want.is_floating else 2]
    assert (True + tf.constant([2], want)).numpy().tolist() == [3]


@pytest.mark.parametrize("dt", ["int8", "int16", "uint8", "uint16", "uint32", "bfloat16", "complex64"])
def test_python_bools_refused_as_tf_refuses_them(dt):
    with pytest.raises(TypeError):
        tf.constant(True, getattr(tf, dt))


def test_bool_and_number_arrays_cast_as_tf():
    assert tf.constant(np.bool_(True), tf.int32).numpy() == 1
    assert tf.constant(np.array([True, False]), tf.uint8).numpy().tolist() == [1, 0]
    assert tf.constant(np.array([1, 0]), tf.bool).numpy().tolist() == [True, False]
    with pytest.raises(TypeError):
        tf.constant(1, tf.bool)
    with pytest.raises(TypeError):
        tf.constant(1.5, tf.int32)
    assert (tf.constant([3]) & True).numpy().tolist() == [1]     # True as int32 1 (TF 2.21)
