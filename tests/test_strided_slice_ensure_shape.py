"""tf.strided_slice (masks against the Python index written by hand), tf.ensure_shape (static
and run-time checks) and tf.vectorized_map."""
import numpy as np
import pytest

import jitgrad as tf

X = np.arange(60.0).reshape(3, 4, 5)
CASES = [
    (([0, 1, 1], [2, 3, 4], [1, 1, 2]), {}, np.s_[0:2, 1:3, 1:4:2]),
    (([1, 0], [3, 0], [1, 1]), {"end_mask": 2}, np.s_[1:3, 0:]),
    (([0, 0, 0], [0, 0, 0], [1, 1, 1]), {"begin_mask": 7, "end_mask": 7}, np.s_[:, :, :]),
    (([1, 0, 2], [2, 0, 3], [1, 1, 1]), {"shrink_axis_mask": 5, "end_mask": 2}, np.s_[1, 0:, 2]),
    (([0, 0], [0, 0], [1, 1]), {"ellipsis_mask": 1, "shrink_axis_mask": 2}, np.s_[..., 0]),
    (([0, 0, 0], [1, 0, 0], [1, 1, 1]), {"new_axis_mask": 2, "end_mask": 4}, np.s_[0:1, None, 0:]),
    (([-1, 0, 0], [-4, 4, 5], [-1, 2, 1]), {}, np.s_[-1:-4:-1, 0:4:2, 0:5]),
]


@pytest.mark.parametrize("bounds, masks, key", CASES, ids=[str(c[1]) or "plain" for c in CASES])
def test_strided_slice_masks_are_the_python_index(bounds, masks, key):
    got = tf.strided_slice(tf.constant(X), *bounds, **masks)
    np.testing.assert_array_equal(got.numpy(), X[key])
    if masks.get("shrink_axis_mask"):
        return     # a run-time index next to run-time bounds or an ellipsis: __getitem__'s NotImplementedError
    with tf.Graph().as_default():
        begin = tf.compat.v1.placeholder(tf.int32, [len(bounds[0])])
        y = tf.strided_slice(tf.constant(X), begin, *bounds[1:], **masks)      # a run-time begin
        with tf.compat.v1.Session() as s:
            np.testing.assert_array_equal(s.run(y, {begin: bounds[0]}), X[key])


def test_ensure_shape_checks_when_built_and_when_run():
    assert tf.ensure_shape(tf.ones([2, 3]), [2, None]).shape.as_list() == [2, 3]
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.ensure_shape(tf.ones([2, 3]), [3, 2])
    with tf.Graph().as_default():
        p = tf.compat.v1.placeholder(tf.float32, [None, 3])
        y = tf.ensure_shape(p, [2, 3])
        assert y.shape.as_list() == [2, 3]                   # the merged static shape
        with pytest.raises(ValueError):
            tf.ensure_shape(p, [2, 4])
        with tf.compat.v1.Session() as s:
            assert s.run(y, {p: np.ones((2, 3))}).shape == (2, 3)
            with pytest.raises(tf.errors.InvalidArgumentError):
                s.run(y, {p: np.ones((5, 3))})


def test_vectorized_map_takes_the_output_structure_of_fn():
    rows = np.array([[1.5, 2.0], [3.0, 4.0]], np.float32)
    total, first = tf.vectorized_map(lambda r: (tf.reduce_sum(r), tf.cast(r[0], tf.int32)), tf.constant(rows))
    np.testing.assert_array_equal(total.numpy(), rows.sum(1))
    assert first.dtype == tf.int32 and first.numpy().tolist() == [1, 3]


def test_bool_key_masks_and_stack_of_python_values_as_tf():
    x = tf.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    np.testing.assert_array_equal(x[tf.constant([True, False, True])].numpy(), [[1.0, 2.0], [5.0, 6.0]])
    np.testing.assert_array_equal(x[np.array([False, True, False])].numpy(), [[3.0, 4.0]])
    mixed = tf.stack([1, 2.5])                        # TF converts the whole list first: float32
    assert mixed.dtype == tf.float32 and mixed.numpy().tolist() == [1.0, 2.5]
    empty = tf.stack([])
    assert empty.dtype == tf.float32 and empty.shape.as_list() == [0]
    assert tf.stack([tf.constant(1.0), 2.0]).numpy().tolist() == [1.0, 2.0]
