"""tf.unique / tf.unique_with_counts (ops/unique.py). Expected values by a plain loop: first
occurrences in order, -0.0 equal to 0.0, each NaN distinct (TF's kernel, checked side by side
with TF 2.21 while writing it); graph runs in both Session modes (an interpreter op)."""
import math

import numpy as np
import pytest

import jitgrad as tf

pytestmark = pytest.mark.usefixtures("graph_mode")


def _reference(values):
    uniq, idx = [], []
    for v in values:
        hit = next((k for k, u in enumerate(uniq)
                    if not (isinstance(v, float) and math.isnan(v)) and u == v), None)
        if hit is None:
            uniq.append(v)
            hit = len(uniq) - 1
        idx.append(hit)
    return uniq, idx, [idx.count(k) for k in range(len(uniq))]


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float32, np.float64])
def test_generated_vectors(dtype):
    rng = np.random.default_rng(3)
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.as_dtype(dtype), [None])
        y, idx = tf.unique(x)
        y2, idx2, count = tf.unique_with_counts(x, out_idx=tf.int64)
    s = tf.compat.v1.Session(graph=g)
    for n in (0, 1, 7, 100):
        v = rng.integers(-4, 5, n).astype(dtype)
        if np.dtype(dtype).kind == "f" and n > 3:
            v[[1, 3]] = np.nan
            v[2] = -0.0
        got_y, got_idx, got_y2, got_idx2, got_count = s.run([y, idx, y2, idx2, count], {x: v})
        want_y, want_idx, want_count = _reference(v.tolist())
        np.testing.assert_array_equal(got_y, np.array(want_y, dtype))
        assert np.array_equal(np.signbit(got_y), np.signbit(np.array(want_y, dtype)))     # -0.0 kept
        assert got_idx.dtype == np.int32 and got_idx2.dtype == np.int64
        np.testing.assert_array_equal(got_idx, want_idx)
        np.testing.assert_array_equal(got_y2, got_y)
        np.testing.assert_array_equal(got_idx2, want_idx)
        np.testing.assert_array_equal(got_count, want_count)


def test_errors_and_no_gradient():
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.unique(tf.constant([[1, 2]]))
    with pytest.raises(TypeError):
        tf.unique(tf.constant([1]), out_idx=tf.float32)
    x = tf.constant([1.0, 2.0, 1.0])
    with tf.GradientTape() as t:
        t.watch(x)
        y = tf.unique(x)[0]
    with pytest.raises(LookupError):
        t.gradient(y, x)
    y, idx = tf.unique(tf.constant(["a", "b", "a"]))
    assert y.numpy().tolist() == [b"a", b"b"] and idx.numpy().tolist() == [0, 1, 0]
