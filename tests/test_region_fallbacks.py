"""Control flow that used to run in the reference interpreter and now compiles
(issue 12's smaller fallbacks): an int64 tf.shape of a grown loop variable,
... Each case: compiled == interpreted, values against numpy / hand
derivation, ``explain`` without FALLBACK, one kernel for every trip count."""
import numpy as np
import pytest

import jitgrad as tf
from jitgrad.cache import set_enabled
from test_differential import run_both

tf1 = tf.compat.v1


@pytest.fixture
def one_kernel():
    """Asserts the test compiled exactly one kernel (no disk cache: a compile is counted)."""
    set_enabled(False)
    tf.clear_cache()
    before = tf.cache_info()
    yield
    after = tf.cache_info()
    set_enabled(None)
    assert after["compiles"] - before["compiles"] == 1
    assert after["fallbacks"] == before["fallbacks"]


def _explain(g, fetches, feed):
    sess = tf1.Session(graph=g, config=tf1.ConfigProto(jitgrad_mode="compiled"))
    return str(sess.explain(fetches, feed))


# ---------------------------------------------------------------- 1. int64 shapes of grown values
def _growing(out_type):
    """A loop appending two rows per iteration to a [1, 3] accumulator; tf.shape of it as out_type."""
    g = tf.Graph()
    with g.as_default():
        n = tf1.placeholder(tf.int32, [])
        w = tf1.placeholder(tf.float64, [3])

        def body(i, h, x):
            h = tf.tanh(h * w)
            return i + 1, h, tf.concat([x, [h], [h * 2.0]], 0)
        _, _, x = tf.while_loop(lambda i, h, x: i < n, body, [0, tf.ones([3], tf.float64), tf.zeros([1, 3], tf.float64)],
                                shape_invariants=[tf.TensorShape([]), tf.TensorShape([3]), tf.TensorShape([None, 3])])
        shape = tf.shape(x, out_type=out_type)
        rows = tf.shape(x, out_type=out_type)[0] * 10
    return g, n, w, x, shape, rows


@pytest.mark.parametrize("out_type", [tf.int64, tf.int32])
def test_the_shape_of_a_grown_variable_in_either_int_type_compiles_to_one_kernel(out_type, one_kernel):
    g, n, w, x, shape, rows = _growing(out_type)
    for trips in (0, 3, 1000):
        feed = {n: trips, w: [0.5, -1.0, 2.0]}
        compiled, interpreted = run_both(g, [shape, rows], feed)   # (asserts no fallback)
        want = np.array([1 + 2 * trips, 3], out_type.np)
        for got in (compiled, interpreted):
            assert got[0].dtype == out_type.np and got[1].dtype == out_type.np
            np.testing.assert_array_equal(got[0], want)
            assert int(got[1]) == 10 * (1 + 2 * trips)
    assert "FALLBACK" not in _explain(g, [shape, rows], {n: 2, w: [1.0, 1.0, 1.0]})
