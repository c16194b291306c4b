"""tf.math.bincount (tf.compat.v1.bincount; TF 2.21 has no tf.bincount): counts / summed
weights against collections.Counter and Python sums, minlength / maxlength / dtype / axis=-1 /
binary_output, TF 2.21's errors and shapes (checked side by side). Its output length is the
data's, so a compiled Session runs the graph in the interpreter, counted as a fallback."""
import collections
import os
import sys

import numpy as np
import pytest

import jitgrad as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _graph_testing import run_graph  # noqa: E402

MODES = ["compiled", "interpret"]


def _counts(values, size, weights=None):
    out = [0] * size
    for i, v in enumerate(values):
        if v < size:
            out[v] += 1 if weights is None else weights[i]
    return out


def test_names_as_tf():
    assert tf.compat.v1.bincount is tf.math.bincount
    assert not hasattr(tf, "bincount")


def test_eager_against_counter():
    rng = np.random.default_rng(4)
    arr = rng.integers(0, 17, 200).astype(np.int32)
    c = collections.Counter(arr.tolist())
    got = tf.math.bincount(arr)
    assert got.dtype == tf.int32
    assert got.numpy().tolist() == [c[k] for k in range(max(c) + 1)]
    w = rng.uniform(-1, 1, 200)
    got = tf.math.bincount(arr, weights=w).numpy()
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, _counts(arr.tolist(), arr.max() + 1, w.tolist()), rtol=1e-13, atol=1e-13)
    assert tf.math.bincount(tf.constant(arr, tf.int64)).dtype == tf.int32    # (dtype, not arr's type)
    assert tf.math.bincount(arr, dtype=tf.float32).dtype == tf.float32


@pytest.mark.parametrize("mode", MODES)
def test_graph_lengths_weights_and_fallback(mode):
    arr = np.array([1, 1, 2, 3, 2, 4, 4, 5], np.int32)
    w = np.array([0.5, 1, 2, 3, 4, 5, 6, 7], np.float32)

    def build(a, b):
        outs = [tf.math.bincount(a), tf.math.bincount(a, minlength=8), tf.math.bincount(a, maxlength=3),
                tf.math.bincount(a, minlength=4, maxlength=4), tf.math.bincount(a, minlength=6, maxlength=3),
                tf.math.bincount(a, weights=b), tf.math.bincount(a, binary_output=True),
                tf.math.bincount(a, maxlength=0), tf.math.bincount(a, dtype=tf.int64) * 2]
        assert all(o.shape.as_list() == [None] for o in outs[:-1])     # (TF's static shapes, all unknown)
        return outs
    before = tf.cache_info()["fallbacks"]
    out = run_graph(build, [arr, w], mode, fallback_ok=True)
    if mode == "compiled":
        assert tf.cache_info()["fallbacks"] > before
    a = arr.tolist()
    assert [o.tolist() for o in out[:5]] == [_counts(a, 6), _counts(a, 8), _counts(a, 3), _counts(a, 4),
                                            _counts(a, 3)]
    assert out[5].dtype == np.float32 and out[5].tolist() == _counts(a, 6, w.tolist())
    assert out[6].tolist() == [min(c, 1) for c in _counts(a, 6)]
    assert out[7].tolist() == [] and out[8].dtype == np.int64 and out[8].tolist() == [2 * c for c in _counts(a, 6)]


def test_empty_multidimensional_and_per_row():
    assert tf.math.bincount(tf.constant([], tf.int32)).numpy().tolist() == []
    assert tf.math.bincount(tf.constant([], tf.int32), minlength=3).numpy().tolist() == [0, 0, 0]
    assert tf.math.bincount([[1, 2], [3, 1]]).numpy().tolist() == [0, 2, 1, 1]           # flattened
    assert tf.math.bincount([1.0, 2.0]).numpy().tolist() == [0, 1, 1]                    # cast to int32
    x = np.array([[1, 2, 2], [0, 0, 3]], np.int32)
    got = tf.math.bincount(x, axis=-1)
    assert got.numpy().tolist() == [_counts(r, 4) for r in x.tolist()]
    wt = np.array([[1.0, 2, 3], [4, 5, 6]], np.float32)
    got = tf.math.bincount(x, weights=wt, axis=-1).numpy()
    assert got.tolist() == [_counts(r, 4, wr) for r, wr in zip(x.tolist(), wt.tolist())]
    with tf.Graph().as_default():
        assert tf.math.bincount(tf.compat.v1.placeholder(tf.int32, [5, 3]), axis=-1).shape.as_list() == [5, None]


def test_errors_as_tf():
    with pytest.raises(tf.errors.InvalidArgumentError, match="must be non-negative"):
        tf.math.bincount([1, -1, 2], minlength=5)
    with pytest.raises(tf.errors.InvalidArgumentError, match="must be non-negative"):
        run_graph(lambda a: [tf.math.bincount(a)], [np.array([1, -7, 1], np.int32)], "compiled", fallback_ok=True)
    with pytest.raises(tf.errors.InvalidArgumentError, match="same shape as `arr`"):
        tf.math.bincount([1, 2, 3], weights=[1.0, 2.0])
    with pytest.raises(ValueError, match="mutually exclusive"):
        tf.math.bincount([1, 2], weights=[1.0, 2.0], binary_output=True)
    with pytest.raises(ValueError, match="Only 0 and -1"):
        tf.math.bincount([1, 2], axis=1)
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.math.bincount(tf.constant([1, 2], tf.uint8))
    v = tf.Variable([1.0, 2.0, 3.0])
    with tf.GradientTape() as t:
        y = tf.math.bincount([0, 1, 1], weights=v)
    with pytest.raises(LookupError):
        t.gradient(y, v)
