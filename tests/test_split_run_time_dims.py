"""tf.split along a dimension the graph does not know: an even split (``tf.split(x, n)``)
and sizes with a -1 are checked when the split runs, as TF's Split / SplitV kernels do
(InvalidArgumentError with TF's message), in the interpreter and compiled (no fallback).
Expected values are numpy's np.split of the fed array; the gradient of a weighted sum of
the pieces is each piece's weight broadcast over its rows (derived by hand)."""
import numpy as np
import pytest

import jitgrad as tf

tf1 = tf.compat.v1
pytestmark = pytest.mark.usefixtures("graph_mode", "no_fallback")

EVEN = "Number of ways to split should evenly divide the split dimension, but got split_dim {} " \
       "\\(size = {}\\) and num_split {}"
SIZES = "Determined shape must either match input shape along split_dim exactly if fully specified, " \
        "or be less than the size of the input along split_dim if not fully specified.  Got: {}"


def _feed(rows, cols=3):
    return np.arange(rows * cols, dtype=np.float32).reshape(rows, cols) * 0.5 - 1.0


def test_even_split_of_a_fed_dimension_matches_numpy_for_several_row_counts():
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [None, 3])
        parts = tf.split(x, 3)
        assert [p.shape.as_list() for p in parts] == [[None, 3]] * 3      # TF's static shapes
        with tf1.Session() as s:
            for rows in (0, 3, 6, 12):
                v = _feed(rows)
                for got, want in zip(s.run(parts, {x: v}), np.split(v, 3)):
                    np.testing.assert_array_equal(got, want)


def test_even_split_not_dividing_raises_at_run_time_with_tfs_message():
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [None, 3])
        parts = tf.split(x, 2, axis=-2)      # built without error: TF checks when it runs
        with tf1.Session() as s:
            with pytest.raises(tf.errors.InvalidArgumentError, match=EVEN.format(0, 5, 2)):
                s.run(parts, {x: _feed(5)})
            # the session still runs a good feed after a failed one
            np.testing.assert_array_equal(s.run(parts[1], {x: _feed(4)}), _feed(4)[2:])


def test_split_of_a_fed_inner_dimension_with_other_dims_unknown():
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [None, None])
        parts = tf.split(x, 2, axis=1)
        with tf1.Session() as s:
            v = np.arange(24, dtype=np.float32).reshape(3, 8)
            for got, want in zip(s.run(parts, {x: v}), np.split(v, 2, axis=1)):
                np.testing.assert_array_equal(got, want)
            with pytest.raises(tf.errors.InvalidArgumentError, match=EVEN.format(1, 7, 2)):
                s.run(parts, {x: np.ones((2, 7), np.float32)})


def test_sizes_with_minus_one_keep_known_static_sizes_and_fill_the_rest_at_run_time():
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [None, 3])
        parts = tf.split(x, [1, -1, 2])
        assert [p.shape.as_list() for p in parts] == [[1, 3], [None, 3], [2, 3]]
        with tf1.Session() as s:
            for rows in (3, 4, 9):
                v = _feed(rows)
                got = s.run(parts, {x: v})
                for a, b in zip(got, (v[:1], v[1:rows - 2], v[rows - 2:])):
                    np.testing.assert_array_equal(a, b)
            with pytest.raises(tf.errors.InvalidArgumentError, match=SIZES.format(3)):
                s.run(parts, {x: _feed(2)})


def test_fully_given_sizes_with_other_dims_unknown_are_checked_at_run_time():
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [None, None])
        parts = tf.split(x, [2, 1])
        with tf1.Session() as s:
            v = _feed(3, 2)
            for a, b in zip(s.run(parts, {x: v}), (v[:2], v[2:])):
                np.testing.assert_array_equal(a, b)
            with pytest.raises(tf.errors.InvalidArgumentError, match=SIZES.format(3)):
                s.run(parts, {x: _feed(4, 2)})


def test_gradient_through_a_run_time_split():
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [None, 3])
        a, b = tf.split(x, 2)
        c, d = tf.split(x, [-1, 1])
        loss = 2.0 * tf.reduce_sum(a) + 3.0 * tf.reduce_sum(b * b) + 5.0 * tf.reduce_sum(d)
        (gx,) = tf.gradients(loss, x)
        with tf1.Session() as s:
            v = _feed(4)
            want = np.zeros_like(v)
            want[:2] += 2.0
            want[2:] += 6.0 * v[2:]
            want[3:] += 5.0
            np.testing.assert_allclose(s.run(gx, {x: v}), want, rtol=1e-6)
            with pytest.raises(tf.errors.InvalidArgumentError, match=EVEN.format(0, 3, 2)):
                s.run(gx, {x: _feed(3)})


def test_bad_size_lists_are_rejected_when_the_graph_is_built_as_tf_does():
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [None, 3])
        with pytest.raises(ValueError, match="size_splits can only have one -1"):
            tf.split(x, [-1, -1])
        with pytest.raises(ValueError, match="Split size at index 1 must be >= 0. Got: -2"):
            tf.split(x, [2, -2])
        with pytest.raises(ValueError, match="num_split"):
            tf.split(x, 0)


def test_traced_function_with_a_none_dimension_checks_each_call():
    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)])
    def halves(v):
        a, b = tf.split(v, 2)
        return a - b

    np.testing.assert_array_equal(halves(np.array([5.0, 7.0, 1.0, 2.0], np.float32)).numpy(), [4.0, 5.0])
    with pytest.raises(tf.errors.InvalidArgumentError, match=EVEN.format(0, 3, 2)):
        halves(np.ones(3, np.float32))


def test_eager_split_errors_stay_invalid_argument():
    with pytest.raises(tf.errors.InvalidArgumentError, match=EVEN.format(0, 5, 2)):
        tf.split(tf.ones([5, 2]), 2)
    with pytest.raises(tf.errors.InvalidArgumentError, match=SIZES.format(6)):
        tf.split(tf.ones([5, 2]), [6, -1])
