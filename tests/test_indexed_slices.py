"""tf.IndexedSlices: built by user code, made dense where a tensor is needed (repeated rows add)."""
import numpy as np
import pytest

import jitgrad as tf


def test_indexed_slices_densify_and_keep_their_parts():
    values = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], np.float32)
    s = tf.IndexedSlices(tf.constant(values), tf.constant([0, 2, 0]), tf.constant([3, 2]))
    want = np.zeros((3, 2), np.float32)
    np.add.at(want, [0, 2, 0], values)
    np.testing.assert_array_equal(tf.convert_to_tensor(s).numpy(), want)
    np.testing.assert_array_equal((tf.ones([3, 2]) + s).numpy(), want + 1)
    assert s.shape.as_list() == [3, 2] and s.dtype == tf.float32
    np.testing.assert_array_equal((-s).values.numpy(), -values)
    with pytest.raises(ValueError, match="without dense_shape"):
        tf.convert_to_tensor(tf.IndexedSlices(tf.ones([1, 2]), tf.constant([0])))
