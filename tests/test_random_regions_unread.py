"""A random op in a compiled branch / loop body draws even when nothing reads its value in
this run: the interpreter runs a branch or body whole (each draw advances the op's
generator), so the compiled code must too, or every later draw of that op differs
(a tf.nn.dropout mask in a tf.cond whose other output alone was fetched: the next run's
mask was the interpreter's previous one).

Expected masks from TF's Philox stream: graph seed 7 (set_seed inside the graph) + op seed 3
-> key 7, counter 3 << 64; draw k of the [2, 8] uniform starts at call 256 * 16 * k (TF's
stateful op reserves 256 calls per element), kept where the draw is >= rate."""
import numpy as np
import pytest

import jitgrad as tf
from jitgrad.ops import philox

tf1 = tf.compat.v1
_X = np.arange(1, 17, dtype=np.float32).reshape(2, 8)


def _masks(n):
    return [philox.uniform((7, (3 << 64) + 256 * 16 * k), 16, np.float32).reshape(2, 8) >= 0.5
            for k in range(n)]


def _build(kind):
    tf.random.set_seed(7)
    x = tf1.placeholder(tf.float32, [2, 8])
    p = tf1.placeholder(tf.bool, [])
    if kind == "cond":
        masked, other = tf.cond(p, lambda: (tf.nn.dropout(x, rate=0.5, seed=3), x * 2.0), lambda: (x, x))
    elif kind == "nested_cond":
        masked, other = tf.cond(p, lambda: tf.cond(p, lambda: (tf.nn.dropout(x, rate=0.5, seed=3), x * 2.0),
                                                   lambda: (x, x)), lambda: (x, x))
    else:   # one iteration of a loop that also doubles a second variable
        _, masked, other = tf.while_loop(lambda i, v, w: i < 1,
                                         lambda i, v, w: (i + 1, tf.nn.dropout(v, rate=0.5, seed=3), w * 2.0),
                                         [0, x, x])
    return x, p, masked, other


@pytest.mark.parametrize("mode", ["compiled", "interpret"])
@pytest.mark.parametrize("kind", ["cond", "nested_cond", "loop"])
def test_unread_draw_in_a_region_still_advances_the_generator(kind, mode):
    g = tf.Graph()
    with g.as_default():
        x, p, masked, other = _build(kind)
    want = _masks(4)
    with tf1.Session(graph=g, config=tf1.ConfigProto(jitgrad_mode=mode)) as s:
        np.testing.assert_array_equal(s.run(other, {x: _X, p: True}), 2 * _X)   # draws mask 0, unread
        got = s.run(masked, {x: _X, p: True})                                   # mask 1
        np.testing.assert_array_equal(got, np.where(want[1], 2 * _X, 0))
        s.run(other, {x: _X, p: False} if kind != "loop" else {x: _X, p: True})  # untaken: no draw (loop: mask 2)
        got = s.run(masked, {x: _X, p: True})
        np.testing.assert_array_equal(got, np.where(want[2 if kind != "loop" else 3], 2 * _X, 0))
