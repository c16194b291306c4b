"""Shapes set by run-time values at top level (shape_specialise.py, ops/array_ops_dynamic.py):
tf.range(n), tf.zeros([n]) / tf.fill / tf.ones, tf.reshape to a fed shape and x[i:j:k] with
tensor bounds, in graph mode (both Session modes), in jitgrad.function and eagerly.
Expected values come from numpy (np.arange, np.full, Python slicing, which clamps and
wraps negative bounds as TF's strided slice does); compiled runs must not fall back
to the interpreter (conftest's ``no_fallback``) and compile once per value set."""
import numpy as np
import pytest

import jitgrad as tf
from jitgrad.errors import InvalidArgumentError

pytestmark = pytest.mark.usefixtures("graph_mode")
ph = tf.compat.v1.placeholder


def test_range_with_a_fed_limit_compiles_once_per_length(no_fallback, graph_mode):
    g = tf.Graph()
    with g.as_default():
        n = ph(tf.int32, [])
        start = ph(tf.int32, [])
        r = tf.range(n) * 2
        stepped = tf.range(start, n, 3)
    assert r.shape.as_list() == [None]
    with tf.compat.v1.Session(graph=g) as s:
        before = tf.cache_info()["compiles"]
        np.testing.assert_array_equal(s.run(r, {n: 4}), np.arange(4) * 2)
        np.testing.assert_array_equal(s.run(r, {n: 7}), np.arange(7) * 2)
        np.testing.assert_array_equal(s.run(r, {n: 4}), np.arange(4) * 2)
        np.testing.assert_array_equal(s.run(r, {n: 0}), np.zeros(0))
        np.testing.assert_array_equal(s.run(stepped, {start: -2, n: 9}), np.arange(-2, 9, 3))
        if graph_mode == "compiled":
            assert tf.cache_info()["compiles"] - before <= 4    # lengths 4, 7, 0 and the stepped range
        with pytest.raises(InvalidArgumentError, match="Requires start <= limit when delta > 0"):
            s.run(stepped, {start: 5, n: 1})


def test_fill_zeros_ones_with_fed_dims(no_fallback):
    g = tf.Graph()
    with g.as_default():
        n = ph(tf.int32, [])
        dims = ph(tf.int32, [2])
        z = tf.zeros([n, 3])
        o = tf.ones(dims, tf.int32)
        f = tf.fill([2, n], 7.5) + 1.0
    assert z.shape.as_list() == [None, 3] and o.shape.as_list() == [None, None]
    with tf.compat.v1.Session(graph=g) as s:
        np.testing.assert_array_equal(s.run(z, {n: 2}), np.zeros([2, 3], np.float32))
        np.testing.assert_array_equal(s.run(o, {dims: [3, 1]}), np.ones([3, 1], np.int32))
        np.testing.assert_array_equal(s.run(f, {n: 3}), np.full([2, 3], 8.5, np.float32))
        with pytest.raises(InvalidArgumentError):
            s.run(z, {n: -1})


def test_reshape_to_a_fed_shape(no_fallback):
    g = tf.Graph()
    with g.as_default():
        x = ph(tf.float32, [6])
        k = ph(tf.int32, [])
        shape = ph(tf.int32, [2])
        y = tf.reshape(x, [k, -1]) * 10.0
        y2 = tf.reshape(x, shape)
        (gx,) = tf.gradients(tf.reduce_sum(y * y), [x])
    data = np.arange(6, dtype=np.float32)
    with tf.compat.v1.Session(graph=g) as s:
        np.testing.assert_array_equal(s.run(y, {x: data, k: 3}), data.reshape(3, 2) * 10)
        np.testing.assert_array_equal(s.run(y, {x: data, k: 2}), data.reshape(2, 3) * 10)
        np.testing.assert_array_equal(s.run(y2, {x: data, shape: [1, 6]}), data.reshape(1, 6))
        np.testing.assert_allclose(s.run(gx, {x: data, k: 3}), 200.0 * data)   # d/dx sum((10x)^2)
        with pytest.raises(InvalidArgumentError):
            s.run(y, {x: data, k: 4})


@pytest.mark.parametrize("i, j, k", [(1, 4, 1), (-3, 100, 1), (-100, 2, 1), (5, 1, -1), (None, -1, 2), (4, 2, 1),
                                     (0, None, -2)])
def test_slice_with_tensor_bounds_matches_python_slicing(no_fallback, i, j, k):
    g = tf.Graph()
    with g.as_default():
        x = ph(tf.float32, [6])
        ti, tj, tk = ph(tf.int32, []), ph(tf.int32, []), ph(tf.int32, [])
        sl = x[(ti if i is not None else None):(tj if j is not None else None):tk]
        w = ph(tf.float32, [None])
        (gx,) = tf.gradients(tf.reduce_sum(sl * w), [x])
    data = np.arange(6, dtype=np.float32) + 1
    want = data[i:j:k]
    feed = {x: data, tk: k}
    feed.update({ti: i} if i is not None else {})
    feed.update({tj: j} if j is not None else {})
    weights = np.arange(len(want), dtype=np.float32) + 1
    expected_grad = np.zeros(6, np.float32)
    expected_grad[np.arange(6)[i:j:k]] = weights
    with tf.compat.v1.Session(graph=g) as s:
        got, grad = s.run([sl, gx], {**feed, w: weights})
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(grad, expected_grad)


def test_slice_bounds_in_two_dims_and_a_zero_step(no_fallback):
    g = tf.Graph()
    with g.as_default():
        x = ph(tf.float32, [4, 5])
        a, b = ph(tf.int32, []), ph(tf.int64, [])
        y = x[a:, 1:b]
        zero = ph(tf.int32, [])
        bad = x[::zero]
    assert y.shape.as_list() == [None, None]
    data = np.arange(20, dtype=np.float32).reshape(4, 5)
    with tf.compat.v1.Session(graph=g) as s:
        np.testing.assert_array_equal(s.run(y, {x: data, a: 2, b: -1}), data[2:, 1:-1])
        with pytest.raises(InvalidArgumentError, match="slice step cannot be zero"):
            s.run(bad, {x: data, zero: 0})


def test_in_a_function_and_eagerly(no_fallback):
    @tf.function
    def window(x, i, j):
        return x[i:j] * 2.0

    @tf.function
    def counts(n):
        return tf.range(n) + tf.zeros([n], tf.int32)

    x = tf.constant([1.0, 2.0, 3.0, 4.0])
    np.testing.assert_array_equal(window(x, tf.constant(1), tf.constant(3)).numpy(), [4.0, 6.0])
    np.testing.assert_array_equal(window(x, tf.constant(-2), tf.constant(10)).numpy(), [6.0, 8.0])
    np.testing.assert_array_equal(counts(tf.constant(5)).numpy(), np.arange(5))
    np.testing.assert_array_equal(counts(tf.constant(2)).numpy(), np.arange(2))
    assert window.experimental_get_tracing_count() == 1 and counts.experimental_get_tracing_count() == 1
    # eagerly the bounds are values: the static ops, same numbers
    np.testing.assert_array_equal(x[tf.constant(1):tf.constant(3)].numpy(), [2.0, 3.0])
    np.testing.assert_array_equal(tf.range(tf.constant(3)).numpy(), np.arange(3))

    v = tf.Variable([1.0, 2.0, 3.0, 4.0])
    with tf.GradientTape() as tape:
        y = tf.reduce_sum(window(v, tf.constant(1), tf.constant(3)))
    np.testing.assert_array_equal(tape.gradient(y, v).numpy(), [0.0, 2.0, 2.0, 0.0])


def test_a_shape_from_a_random_op_is_not_specialised(graph_mode):
    # evaluating the shape source first would draw twice: such a run stays in the interpreter
    g = tf.Graph()
    with g.as_default():
        n = tf.cast(tf.random.uniform([], 3.0, 3.5), tf.int32)
        r = tf.range(n)
    with tf.compat.v1.Session(graph=g) as s:
        np.testing.assert_array_equal(s.run(r), np.arange(3))


def test_explain_shows_the_specialised_values(graph_mode):
    if graph_mode != "compiled":
        return
    g = tf.Graph()
    with g.as_default():
        n = ph(tf.int32, [], name="n")
        r = tf.zeros([n]) + 1.0
    with tf.compat.v1.Session(graph=g) as s:
        text = str(s.explain(r, {n: 3}))
    assert "specialised on shape values" in text and "stack:0 = [3]" in text   # the shape [n], stacked


def test_shape_lists_holding_known_scalar_tensors_stay_static():
    # eager scalars and graph constants in a shape list are values known now: the static ops
    np.testing.assert_array_equal(tf.zeros([tf.constant(3)]).numpy(), np.zeros(3, np.float32))
    np.testing.assert_array_equal(tf.reshape(tf.range(6), [tf.constant(2), -1]).numpy(),
                                  np.arange(6).reshape(2, 3))
    with tf.Graph().as_default():
        assert tf.zeros([tf.constant(3), 2]).shape.as_list() == [3, 2]
        with pytest.raises(TypeError):
            tf.zeros([ph(tf.float32, [])])


def test_tile_and_broadcast_to_with_fed_multiples_and_shapes(no_fallback):
    """tf.tile / tf.broadcast_to with a fed shape (a list holding a scalar tensor, or a
    tensor): TF runs them; jitgrad refused them ("DataType string").  Values from np.tile /
    np.broadcast_to; gradients by hand: d sum(tile(x)^2) / dx = 2 x * copies.  A negative
    multiple or size raises before anything is sized by it (it reached the compiled op)."""
    xv = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    vv = np.array([1.0, 2.0], np.float32)
    g = tf.Graph()
    with g.as_default():
        n = ph(tf.int32, [])
        m = ph(tf.int32, [None])
        x, v = tf.constant(xv), tf.constant(vv)
        rows = tf.tile(x, [n, 1])
        any_tile = tf.tile(x, m)
        bcast = tf.broadcast_to(v, [n, 2])
        any_bcast = tf.broadcast_to(v, m)
        g_rows = tf.gradients(tf.reduce_sum(rows * rows), x)[0]
        g_bcast = tf.gradients(tf.reduce_sum(bcast * bcast), v)[0]
        reshaped = tf.reshape(x, [n, -1])
    assert rows.shape.as_list() == [None, 2] and bcast.shape.as_list() == [None, 2]
    s = tf.compat.v1.Session(graph=g)
    for k in (3, 0, 2):
        np.testing.assert_array_equal(s.run(rows, {n: k}), np.tile(xv, [k, 1]))
        np.testing.assert_array_equal(s.run(bcast, {n: k}), np.broadcast_to(vv, [k, 2]))
        np.testing.assert_array_equal(s.run(g_rows, {n: k}), 2 * xv * k)
        np.testing.assert_array_equal(s.run(g_bcast, {n: k}), 2 * vv * k)
    np.testing.assert_array_equal(s.run(any_tile, {m: [1, 3]}), np.tile(xv, [1, 3]))
    np.testing.assert_array_equal(s.run(any_bcast, {m: [3, 1, 2]}), np.broadcast_to(vv, [3, 1, 2]))
    for fetch, feed in ((rows, {n: -1}), (bcast, {n: -1}), (g_rows, {n: -1}), (g_bcast, {n: -2}),
                        (any_tile, {m: [3]}), (any_bcast, {m: [3]}), (any_bcast, {m: [2, 1]})):
        with pytest.raises(InvalidArgumentError):
            s.run(fetch, feed)
    with pytest.raises(InvalidArgumentError, match="must be non-negative"):     # Reshape too
        s.run(reshaped, {n: -2})
