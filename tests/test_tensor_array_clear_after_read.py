"""clear_after_read (default True) as TF 2.21: the eager array clears an element a read
returned, so a later stack has zeros there and a second read raises; gather does not
clear; a graph's array (tf.function, Session: TF's TensorList) keeps every element."""
import numpy as np
import pytest

import jitgrad as tf


def _written():
    return tf.TensorArray(tf.float32, size=2).write(0, 1.0).write(1, 2.0)


def test_eager_read_then_stack_has_zeros_where_read():
    ta = _written()
    assert ta.read(1).numpy() == 2.0
    np.testing.assert_array_equal(ta.stack().numpy(), [1.0, 0.0])       # TF 2.21: [1.0, 0.0]


def test_eager_second_read_raises():
    ta = _written()
    ta.read(0)
    with pytest.raises(tf.errors.InvalidArgumentError, match="Could not read index 0 twice"):
        ta.read(0)


def test_eager_rewrite_after_read_can_be_read_again():
    ta = _written()
    ta.read(0)
    ta = ta.write(0, 5.0)
    assert ta.read(0).numpy() == 5.0
    np.testing.assert_array_equal(ta.stack().numpy(), [0.0, 2.0])      # TF 2.21: [0.0, 2.0]


def test_eager_gather_and_clear_after_read_false_keep_elements():
    ta = _written()
    np.testing.assert_array_equal(ta.gather([1, 1, 0]).numpy(), [2.0, 2.0, 1.0])
    np.testing.assert_array_equal(ta.stack().numpy(), [1.0, 2.0])
    kept = tf.TensorArray(tf.float32, size=2, clear_after_read=False).write(0, 1.0).write(1, 2.0)
    assert kept.read(0).numpy() + kept.read(0).numpy() == 2.0
    np.testing.assert_array_equal(kept.stack().numpy(), [1.0, 2.0])


def test_graph_arrays_keep_what_was_read():
    def f():
        ta = _written()
        return ta.read(1) + ta.read(1), ta.stack()

    twice, stacked = tf.function(f)()
    assert twice.numpy() == 4.0
    np.testing.assert_array_equal(stacked.numpy(), [1.0, 2.0])
    g = tf.Graph()
    with g.as_default():
        out = f()
        with tf.compat.v1.Session(graph=g) as s:
            twice, stacked = s.run(out)
    assert twice == 4.0
    np.testing.assert_array_equal(stacked, [1.0, 2.0])


def test_eager_unstack_leaves_the_element_shape_unknown():
    # TF 2.21: a read element cleared after unstack has no element shape for its zeros
    ta = tf.TensorArray(tf.float32, size=3).unstack(tf.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]))
    ta.read(1)
    with pytest.raises(ValueError, match="partially known TensorShape"):
        ta.stack()
