"""Unstacking more rows than a fixed-size TensorArray holds: TF's eager TensorArray raises
ValueError (checked in Python), a graph's (tf.function, Session) InvalidArgumentError.
Fewer rows: TF's eager array becomes those rows (a smaller array)."""
import pytest

import jitgrad as tf


def _unstack_three_into_two():
    return tf.TensorArray(tf.float32, size=2).unstack([1.0, 2.0, 3.0]).stack()


def test_eager_raises_value_error():
    with pytest.raises(ValueError, match="Cannot unstack 3 tensors into a TensorArray of static size 2"):
        _unstack_three_into_two()


def test_graph_raises_invalid_argument():
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.function(_unstack_three_into_two)()
    g = tf.Graph()
    with g.as_default(), pytest.raises(tf.errors.InvalidArgumentError):
        with tf.compat.v1.Session(graph=g) as s:
            s.run(_unstack_three_into_two())


def test_eager_fewer_rows_make_a_smaller_array():
    ta = tf.TensorArray(tf.float32, size=3, element_shape=[]).unstack([1.0, 2.0])
    assert ta.size().numpy() == 2
    assert ta.stack().numpy().tolist() == [1.0, 2.0]      # TF 2.21: [1.0, 2.0]
