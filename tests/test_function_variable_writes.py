"""A compiled jitgrad.function's variable writes: the variable takes over the
kernel's output array instead of copying it (fit must not copy every variable
each step), and that sharing never lets a caller change the variable."""
import numpy as np
import pytest

import jitgrad as tf


def test_assigns_accumulate_across_calls():
    v = tf.Variable(np.array([1., 2., 3.], np.float32))

    @tf.function
    def step(x):
        v.assign(v * 2. + x)
        return v.read_value()

    x = tf.constant(np.array([1., 0., -1.], np.float32))
    expected = np.array([1., 2., 3.])
    for _ in range(4):
        out = step(x)
        expected = expected * 2 + np.array([1., 0., -1.])
        np.testing.assert_array_equal(out.numpy(), expected)
        np.testing.assert_array_equal(v.numpy(), expected)


def test_returned_assign_result_cannot_change_the_variable():
    v = tf.Variable(np.zeros(4, np.float32))

    @tf.function
    def bump():
        return v.assign_add(tf.ones(4))

    out = bump()
    arr = np.asarray(out)              # may be the very array the variable holds
    try:
        arr += 100.
    except ValueError:                 # read-only: the variable's array is not the caller's to change
        pass
    np.testing.assert_array_equal(v.numpy(), np.ones(4))
    bump()
    np.testing.assert_array_equal(v.numpy(), np.full(4, 2.))


def test_variable_value_is_not_aliased_by_numpy():
    v = tf.Variable(np.zeros(3, np.float32))

    @tf.function
    def f():
        v.assign_add(tf.ones(3))

    f()
    got = v.numpy()
    got[0] = 42.                        # numpy() is a copy, as TF's
    np.testing.assert_array_equal(v.numpy(), np.ones(3))
