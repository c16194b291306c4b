"""tf.while_loop variables whose shape grows at run time under a ``None`` shape
invariant (``x = tf.concat([x, rows], 0)``): the compiled loop keeps them in a
growing buffer and the host reads their final rows (passes/growing_vars.py,
codegen/lower_growing.py, dynamic_outputs.py). Expected values are the same
recurrence in numpy; gradients (compiled: the reverse loop pops the rows the
forward appended, passes/growing_vars.popped_vars) are checked against central
finite differences."""
import numpy as np
import pytest

import jitgrad as tf
from test_differential import check_close, run_both

tf1 = tf.compat.v1
W = np.array([0.5, -1.0, 2.0])
INVARIANTS = [tf.TensorShape([]), tf.TensorShape([3]), tf.TensorShape([None, 3])]


def _np_rows(w, n, x0=None):
    h, rows = np.ones(3), [np.zeros(3)] if x0 is None else list(x0)
    for _ in range(n):
        h = np.tanh(h * w + 0.1)
        rows += [h, 2.0 * h]
    return np.array(rows)


def _grow(w, n, x0=None):
    """Appends two rows per iteration; the body never reads x otherwise."""
    x0 = tf.zeros([1, 3], w.dtype) if x0 is None else x0

    def body(i, h, x):
        h = tf.tanh(h * w + 0.1)
        return i + 1, h, tf.concat([x, [h], [h * 2.0]], 0)
    _, h, x = tf.while_loop(lambda i, h, x: i < n, body, [0, tf.ones([3], w.dtype), x0], shape_invariants=INVARIANTS)
    return h, x


def _graph(dt=tf.float64):
    g = tf.Graph()
    with g.as_default():
        n = tf1.placeholder(tf.int32, [])
        w = tf1.placeholder(dt, [3])
        h, x = _grow(w, n)
    return g, n, w, h, x


@pytest.mark.parametrize("dt", [tf.float32, tf.float64])
def test_compiled_growing_variable_matches_numpy_and_interpreter(dt):
    g, n, w, h, x = _graph(dt)
    for trips in (0, 1, 5, 40):
        feed = {n: trips, w: W.astype(dt.np)}
        compiled, interpreted = run_both(g, [x, h], feed)     # (asserts no fallback)
        for a, b in zip(compiled, interpreted):
            check_close(a, b, np.dtype(dt.np).type)
        assert compiled[0].shape == (1 + 2 * trips, 3)
        np.testing.assert_allclose(compiled[0], _np_rows(W, trips), rtol=1e-5 if dt == tf.float32 else 1e-13,
                                   atol=1e-6 if dt == tf.float32 else 1e-15)


def test_many_iterations_grow_past_every_capacity_and_are_bit_identical():
    g, n, w, h, x = _graph()
    with tf1.Session(graph=g) as s:
        before = tf.cache_info()["fallbacks"]
        first = s.run(x, {n: 5000, w: W})
        again = [s.run(x, {n: 5000, w: W}) for _ in range(2)]
        short = s.run(x, {n: 3, w: W})      # the kept memory is reused by a shorter run
        assert tf.cache_info()["fallbacks"] == before
    assert first.shape == (10001, 3)
    np.testing.assert_allclose(first, _np_rows(W, 5000), rtol=1e-13, atol=1e-15)
    for a in again:
        assert a.tobytes() == first.tobytes()
    np.testing.assert_allclose(short, _np_rows(W, 3), rtol=1e-13)


def test_entry_value_with_rows_and_one_dimensional_accumulator():
    """The brief's ``x = tf.concat([x, [v]], 0)`` with x entering with rows."""
    g = tf.Graph()
    with g.as_default():
        n = tf1.placeholder(tf.int32, [])
        _, x = tf.while_loop(lambda i, x: i < n, lambda i, x: (i + 1, tf.concat([x, [tf.cast(i * i, tf.float32)]], 0)),
                             [0, tf.constant([7.0, 8.0])], shape_invariants=[tf.TensorShape([]), tf.TensorShape([None])])
    for trips in (0, 4):
        compiled, _ = run_both(g, [x], {n: trips})
        np.testing.assert_array_equal(compiled[0], np.array([7.0, 8.0] + [i * i for i in range(trips)], np.float32))


def test_function_mode_compiles_and_eager_mode_agrees():
    @tf.function
    def f(w, n):
        return _grow(w, n)[1]

    w = tf.constant(W)
    for trips in (2, 6):
        before = tf.cache_info()["fallbacks"]
        got = f(w, tf.constant(trips)).numpy()
        assert tf.cache_info()["fallbacks"] == before
        np.testing.assert_allclose(got, _np_rows(W, trips), rtol=1e-13)
        np.testing.assert_allclose(_grow(w, trips)[1].numpy(), _np_rows(W, trips), rtol=1e-13)


def _fd(f, w, eps=1e-6):
    g = np.zeros_like(w)
    for k in range(w.size):
        d = np.zeros_like(w)
        d[k] = eps
        g[k] = (f(w + d) - f(w - d)) / (2 * eps)
    return g


def test_gradient_through_a_growing_loop_is_right_and_explained():
    g = tf.Graph()
    with g.as_default():
        n = tf1.placeholder(tf.int32, [])
        w = tf1.placeholder(tf.float64, [3])
        _, x = _grow(w, n)
        loss = tf.reduce_sum(x * x)
        (gw,) = tf.gradients(loss, w)
    with tf1.Session(graph=g) as s:
        # the loss reads the grown value (codegen/lower_rows.py) and the reverse loop pops its
        # two rows per iteration (passes/growing_vars.popped_vars): all of it compiles
        assert "FALLBACK" not in str(s.explain(gw, {n: 2, w: W}))
        before = tf.cache_info()["fallbacks"]
        for trips in (0, 1, 4):
            got = s.run(gw, {n: trips, w: W})
            np.testing.assert_allclose(got, _fd(lambda v: float(np.sum(_np_rows(v, trips) ** 2)), W), rtol=1e-6,
                                       atol=1e-9)
        assert tf.cache_info()["fallbacks"] == before
        compiled, interpreted = run_both(g, [loss, gw], {n: 3, w: W})
        for a, b in zip(compiled, interpreted):
            check_close(a, b, np.float64)
        # the forward value alone compiles too
        np.testing.assert_allclose(s.run(x, {n: 2, w: W}), _np_rows(W, 2), rtol=1e-13)
        assert tf.cache_info()["fallbacks"] == before


def test_a_growing_variable_read_elsewhere_in_the_body_falls_back_correctly():
    """The body also reads x (its sum): not an append, so the interpreter runs it."""
    g = tf.Graph()
    with g.as_default():
        n = tf1.placeholder(tf.int32, [])

        def body(i, x):
            return i + 1, tf.concat([x, [tf.reduce_sum(x)]], 0)
        _, x = tf.while_loop(lambda i, x: i < n, body, [0, tf.constant([1.0])],
                             shape_invariants=[tf.TensorShape([]), tf.TensorShape([None])])
    with tf1.Session(graph=g) as s:
        np.testing.assert_array_equal(s.run(x, {n: 4}), np.array([1.0, 1.0, 2.0, 4.0, 8.0], np.float32))
        assert "FALLBACK" in str(s.explain(x, {n: 4}))


def test_a_growing_value_read_by_another_op_falls_back_correctly():
    g, n, w, h, x = _graph()
    with g.as_default():
        total = tf.reduce_sum(x, 0)
    with tf1.Session(graph=g) as s:
        np.testing.assert_allclose(s.run(total, {n: 3, w: W}), _np_rows(W, 3).sum(0), rtol=1e-13)


def test_shape_change_without_an_invariant_is_tf_value_error():
    g = tf.Graph()
    with g.as_default():
        with pytest.raises(ValueError, match="shape_invariants"):
            tf.while_loop(lambda i, x: i < 3, lambda i, x: (i + 1, tf.concat([x, [1.0]], 0)), [0, tf.constant([1.0])])


def test_autograph_for_loop_accumulator_compiles():
    """A Python for loop over tf.range in a traced function growing a tensor
    (set_loop_options gives the None invariant, as TF requires)."""
    @tf.function
    def f(n):
        x = tf.zeros([0])
        for i in tf.range(n):
            tf.autograph.experimental.set_loop_options(shape_invariants=[(x, tf.TensorShape([None]))])
            x = tf.concat([x, [tf.cast(i, tf.float32) ** 2]], 0)
        return x

    for trips in (0, 5):
        before = tf.cache_info()["fallbacks"]
        got = f(tf.constant(trips)).numpy()
        assert tf.cache_info()["fallbacks"] == before
        np.testing.assert_array_equal(got, np.arange(trips, dtype=np.float32) ** 2)


def test_the_shape_of_a_grown_variable_compiles():
    """tf.shape of the grown value alone or beside it: entry rows + 2 rows per iteration."""
    g, n, w, h, x = _graph()
    with g.as_default():
        shape = tf.shape(x)
        rows = tf.shape(x)[0] * 10
    for trips in (0, 3, 1000):
        for fetches in ([shape, rows], [x, shape]):
            compiled, interpreted = run_both(g, fetches, {n: trips, w: W})   # (asserts no fallback)
            want = np.array([1 + 2 * trips, 3], np.int32)
            np.testing.assert_array_equal(compiled[fetches.index(shape)], want)
            np.testing.assert_array_equal(interpreted[fetches.index(shape)], want)
            if rows in fetches:
                assert int(compiled[1]) == int(interpreted[1]) == 10 * (1 + 2 * trips)
