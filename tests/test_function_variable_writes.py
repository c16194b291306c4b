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


def test_assign_returns_the_variable_read_lazily_as_tf():
    """In a tf.function, assign / assign_add return the variable, read where it is used
    (TF's _UnreadVariable): a = w.assign_add(1); w.assign_add(1); return a gives 3, not the 2
    of the first write; a use before the second write sees 2. It works as a control input."""
    w = tf.Variable(1.0)

    @tf.function
    def later_use():
        a = w.assign_add(1.0)
        early = a * 2.0
        w.assign_add(1.0)
        return a, early

    @tf.function
    def as_control_input():
        op = w.assign_add(1.0)
        with tf.control_dependencies([op]):
            return tf.identity(w.read_value())

    a, early = later_use()
    assert (float(a), float(early)) == (3.0, 4.0)
    assert float(as_control_input()) == 4.0
    assert float(w.assign_add(1.0)) == 5.0                  # eagerly: the variable too


def test_eager_assign_add_does_not_broadcast():
    """TF's AssignAddVariableOp needs the value's shape: a scalar added to a [2] variable
    is an InvalidArgumentError (it was broadcast)."""
    v = tf.Variable([1.0, 2.0])
    for update in (v.assign_add, v.assign_sub):
        with pytest.raises(tf.errors.InvalidArgumentError, match="shapes must be equal"):
            update(1.0)
    np.testing.assert_array_equal(v.numpy(), [1.0, 2.0])
    np.testing.assert_array_equal(v.assign_add([1.0, 1.0]).numpy(), [2.0, 3.0])


def test_a_variable_created_on_every_call_fails_on_every_call():
    """As TF: the first call's second trace finds the new variable and raises; the first
    trace was kept, so later calls ran it silently (3.0, with a fresh variable each time)."""
    @tf.function
    def bad(x):
        v = tf.Variable(1.0)
        return v + x

    for _ in range(3):
        with pytest.raises(ValueError, match="singleton"):
            bad(tf.constant(2.0))
