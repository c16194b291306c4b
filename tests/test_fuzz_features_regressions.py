"""Differences from TF 2.21 found by bench/tf_fuzz.py's features mode (bench/tf_fuzz_features.py).
Expected values and exception classes are TF 2.21's, run with /work/benchenv (said per test) and
checked by hand where a hand derivation is short."""
import numpy as np
import pytest

import jitgrad as tf
from jitgrad import errors

graph_modes = pytest.mark.usefixtures("graph_mode")

SLICES = [  # (begin, size, TF's message, or None for TF's value) on a 3-element input
    ([1], [4], "Expected size[0] in [0, 2], but got 4"),
    ([4], [-1], "Expected begin[0] in [0, 3], but got 4"),
    ([-1], [1], "Expected begin[0] in [0, 3], but got -1"),
    ([2], [2], "Expected size[0] in [0, 1], but got 2"),
    ([4], [0], "Expected begin[0] in [0, 3], but got 4"),
    ([3], [0], None),
    ([1], [-1], None),
]


@graph_modes
@pytest.mark.parametrize("begin,size,message", SLICES)
def test_slice_out_of_bounds_on_a_dim_unknown_when_built(begin, size, message):
    """tf.slice past the end of a dim the graph did not know returned the clamped part
    (x[1:5] of 3 values gave 2 values); TF's kernel raises InvalidArgumentError."""
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None])
        y = tf.slice(x, begin, size)
    value = np.arange(3, dtype=np.float32)
    with tf.compat.v1.Session(graph=g) as s:
        for _ in range(2):      # the second run is not let through by a cached kernel
            if message is None:
                np.testing.assert_array_equal(s.run(y, {x: value}), value[begin[0]:][:size[0] % 4])
            else:
                with pytest.raises(errors.InvalidArgumentError, match=message.replace("[", r"\[").replace("]", r"\]")):
                    s.run(y, {x: value})


@pytest.mark.parametrize("begin,size,message", SLICES)
def test_slice_out_of_bounds_eager_names_what_tf_names(begin, size, message):
    x = tf.constant(np.arange(3, dtype=np.float32))
    if message is None:
        np.testing.assert_array_equal(tf.slice(x, begin, size).numpy(), x.numpy()[begin[0]:][:size[0] % 4])
    else:
        with pytest.raises(errors.InvalidArgumentError, match=message.replace("[", r"\[").replace("]", r"\]")):
            tf.slice(x, begin, size)
