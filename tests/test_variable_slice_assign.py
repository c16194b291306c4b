"""``v[key].assign(value)``: TF's sliced assignment, eager, in tf.function and in graphs.
Expected values come from numpy's own slice assignment on a copy."""
import numpy as np
import pytest

import jitgrad as tf
from jitgrad.errors import InvalidArgumentError

INITIAL = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
KEYS = [np.s_[0], np.s_[1:], np.s_[:, ::2], np.s_[..., -1], np.s_[::-1, 1, 1:3], np.s_[:, None, 2],
        np.s_[1, 2, 3], np.s_[:, 5:], np.s_[..., ::-2], np.s_[-1, -2:]]


def _expected(key, value):
    want = INITIAL.copy()
    want[key] = value
    return want


def _value_for(key):
    shape = INITIAL[key].shape
    return np.arange(100, 100 + int(np.prod(shape)), dtype=np.float32).reshape(shape)


@pytest.mark.parametrize("key", KEYS, ids=str)
def test_eager_slice_assign_matches_numpy(key):
    v = tf.Variable(INITIAL)
    value = _value_for(key)
    out = v[key].assign(value)
    np.testing.assert_array_equal(v.numpy(), _expected(key, value))
    np.testing.assert_array_equal(out.numpy(), v.numpy())        # TF returns the variable


@pytest.mark.parametrize("key", KEYS, ids=str)
def test_graph_slice_assign_matches_numpy(key):
    value = _value_for(key)
    with tf.Graph().as_default():
        v = tf.Variable(INITIAL)
        write = v[key].assign(value)
        with tf.compat.v1.Session() as s:
            s.run(v.initializer)
            s.run(write)
            np.testing.assert_array_equal(s.run(v), _expected(key, value))


def test_slice_assign_in_function_broadcasts_and_reads_back():
    v = tf.Variable(INITIAL)

    @tf.function
    def f(x):
        v[:, 1].assign(x)               # a [4] row broadcast into the [2, 4] slice
        return v.read_value()

    row = np.array([-1, -2, -3, -4], np.float32)
    np.testing.assert_array_equal(f(tf.constant(row)).numpy(), _expected(np.s_[:, 1], row))


def test_slice_assign_keeps_nan_elsewhere_and_writes_inf():
    v = tf.Variable([np.nan, 1.0, 2.0], dtype=tf.float64)
    v[1:].assign([np.inf, -0.0])
    got = v.numpy()
    assert np.isnan(got[0]) and got[1] == np.inf and got[2] == 0.0 and np.signbit(got[2])


def test_unbroadcastable_value_raises_like_tf():
    v = tf.Variable(INITIAL)
    with pytest.raises((InvalidArgumentError, ValueError)):
        v[1:].assign(tf.zeros([2, 3, 4]))
    np.testing.assert_array_equal(v.numpy(), INITIAL)            # nothing written


def test_only_variable_slices_assign():
    x = tf.constant([1.0, 2.0])
    assert not hasattr(x[0], "assign")
    v = tf.Variable([1.0, 2.0])
    assert not hasattr(v[0] * 2.0, "assign")
    assert hasattr(v[0], "assign")


def test_slice_of_variable_is_still_differentiable():
    v = tf.Variable(INITIAL)
    with tf.GradientTape() as t:
        y = tf.reduce_sum(v[1:, ::2] * 3.0)
    want = np.zeros_like(INITIAL)
    want[1:, ::2] = 3.0
    np.testing.assert_array_equal(t.gradient(y, v).numpy(), want)


def test_compat_v1_spellings():
    """TF 1's names for TF 2 functions: to_float & co., arg_max, assign_add, tf.math at the top."""
    v1 = tf.compat.v1
    assert v1.to_float([1, 2]).dtype == tf.float32 and v1.to_int64([1.7]).dtype == tf.int64
    np.testing.assert_array_equal(v1.to_int32([1.7, -1.7]).numpy(), [1, -1])          # truncation, as cast
    np.testing.assert_array_equal(v1.arg_max([[1, 3], [4, 2]], 1).numpy(), [1, 0])
    np.testing.assert_array_equal(v1.segment_sum([1.0, 2.0, 3.0], [0, 0, 1]).numpy(), [3.0, 3.0])
    w = tf.Variable(1.0)
    v1.assign_add(w, 2.0)
    v1.assign_sub(w, 0.5)
    assert w.numpy() == 2.5
    v1.assign(w, 7.0)
    assert w.numpy() == 7.0
