"""tf.TensorArray passed directly as a tf.while_loop loop variable (TF 2 flattens it
as a composite: the TF guide's and RNN programs' ``_, ta = tf.while_loop(c, lambda
i, ta: (i + 1, ta.write(i, ...)), [0, ta])``), in eager, graph (a Session with a fed
trip count) and jitgrad.function modes, and ``dynamic_size=True`` arrays written in a
staged loop. Expected values are numpy's (the recurrence written again in numpy);
gradients are checked against central finite differences of that numpy function.
A fixed-size array compiles (no interpreter fallback, and compiled == interpreter);
a dynamic one grows a loop variable, runs in the interpreter and says so."""
import numpy as np
import pytest

import jitgrad as tf
from test_differential import check_close, run_both

tf1 = tf.compat.v1
WEIGHTS = np.array([1.0, 2.0])


def _np_rows(x, n):
    """Rows h_k ** 2 of h_{k+1} = 1.5 sin(h_k), h_0 = x, k = 1..n."""
    rows, h = [], np.asarray(x, np.float64)
    for _ in range(n):
        h = np.sin(h) * 1.5
        rows.append(h * h)
    return np.array(rows).reshape(n, 2)


def _np_loss(x, n):
    return float(np.sum(_np_rows(x, n) * WEIGHTS))


def _fd_grad(x, n, eps=1e-6):
    g = np.zeros_like(x)
    for k in range(x.size):
        d = np.zeros_like(x)
        d[k] = eps
        g[k] = (_np_loss(x + d, n) - _np_loss(x - d, n)) / (2 * eps)
    return g


def _loop(x, n, size, dynamic=False, element_shape=None):
    ta = tf.TensorArray(tf.float64, size=size, dynamic_size=dynamic, element_shape=element_shape)

    def body(i, h, ta):
        h = tf.sin(h) * 1.5
        return i + 1, h, ta.write(i, h * h)
    _, _, ta = tf.while_loop(lambda i, h, ta: i < n, body, [0, x, ta])
    return ta


X0 = np.array([0.3, -0.7])


def test_eager_values_size_and_tape_gradient():
    x = tf.constant(X0)
    with tf.GradientTape() as tape:
        tape.watch(x)
        ta = _loop(x, 3, 3)
        st = ta.stack()
        loss = tf.reduce_sum(st * WEIGHTS)
    assert isinstance(ta, tf.TensorArray)
    np.testing.assert_allclose(st.numpy(), _np_rows(X0, 3), rtol=1e-12)
    assert int(ta.size().numpy()) == 3
    np.testing.assert_allclose(tape.gradient(loss, x).numpy(), _fd_grad(X0, 3), rtol=1e-6)


@pytest.mark.parametrize("element_shape", [None, [2]])
def test_graph_fed_trip_count_compiles_and_matches_interpreter(element_shape):
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float64, [2])
        n = tf1.placeholder(tf.int32, [])
        ta = _loop(x, n, 5, element_shape=element_shape)   # the element shape is learned when not given
        st = ta.stack()
        (gx,) = tf.gradients(tf.reduce_sum(st * WEIGHTS), x)
    for trips in (0, 2, 5):
        a, b = run_both(g, [st, gx], {x: X0, n: trips})
        for p, q in zip(a, b):
            check_close(p, q, np.float64)
        want = np.zeros((5, 2))
        want[:trips] = _np_rows(X0, trips)           # unwritten rows read as zeros, as TF's
        np.testing.assert_allclose(b[0], want, rtol=1e-12)
        np.testing.assert_allclose(b[1], _fd_grad(X0, trips), rtol=1e-6, atol=1e-9)


def test_graph_write_past_a_fixed_size_fails_at_run_time():
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float64, [2])
        n = tf1.placeholder(tf.int32, [])
        st = _loop(x, n, 2).stack()
        with tf1.Session() as s:
            with pytest.raises(tf.errors.InvalidArgumentError):
                s.run(st, {x: X0, n: 3})


def test_function_mode_compiles_once_for_any_trip_count():
    @tf.function
    def f(x, n):
        ta = _loop(x, n, 4)
        return ta.stack(), ta.read(n - 1)

    for trips in (1, 4):
        before = tf.cache_info()["fallbacks"]
        st, last = f(tf.constant(X0), tf.constant(trips))
        assert tf.cache_info()["fallbacks"] == before
        np.testing.assert_allclose(st.numpy()[:trips], _np_rows(X0, trips), rtol=1e-12)
        np.testing.assert_allclose(last.numpy(), _np_rows(X0, trips)[-1], rtol=1e-12)


def test_read_unstack_gather_scatter_concat_in_the_body():
    """An RNN reads its inputs from one array and writes its states to another;
    gather / concat / scatter / size work on the carried arrays too."""
    xs = np.arange(8.0).reshape(4, 2) * 0.1

    def program():
        inp = tf.TensorArray(tf.float64, size=4).unstack(tf.constant(xs))
        out = tf.TensorArray(tf.float64, size=4)

        def body(i, h, inp, out):
            h = tf.tanh(h + inp.read(i))
            return i + 1, h, inp, out.write(i, h)
        _, h, inp, out = tf.while_loop(lambda i, *_: i < inp.size(), body,
                                       [0, tf.zeros([2], tf.float64), inp, out])
        both = tf.TensorArray(tf.float64, size=4).scatter([3, 0], tf.stack([h, h * 2]))
        return out.stack(), out.gather([3, 1]), out.concat(), both.stack()

    h, states = np.zeros(2), []
    for r in xs:
        h = np.tanh(h + r)
        states.append(h)
    states = np.array(states)
    want = [states, states[[3, 1]], states.reshape(-1), np.array([2 * h, [0, 0], [0, 0], h])]
    eager = program()
    traced = tf.function(program)()
    g = tf.Graph()
    with g.as_default():
        fetches = program()
    compiled, interpreted = run_both(g, list(fetches), {})
    for got in (eager, traced, compiled, interpreted):
        for a, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(a), w, rtol=1e-12, atol=1e-15)


def test_body_replacing_the_array_by_a_tensor_is_an_error():
    g = tf.Graph()
    with g.as_default():
        ta = tf.TensorArray(tf.float32, size=2)
        with pytest.raises(TypeError):
            tf.while_loop(lambda i, ta: i < 2, lambda i, ta: (i + 1, tf.zeros([2])), [0, ta])
    with pytest.raises(TypeError):
        tf.while_loop(lambda i, ta: i < 2, lambda i, ta: (i + 1, tf.zeros([2])),
                      [0, tf.TensorArray(tf.float32, size=2)])


def test_body_returning_another_structure_is_a_value_error():
    g = tf.Graph()
    with g.as_default():
        ta = tf.TensorArray(tf.float32, size=2)
        with pytest.raises(ValueError, match="structure"):
            tf.while_loop(lambda i, ta: i < 2, lambda i, ta: (i + 1,), [0, ta])


def test_shape_change_without_invariant_is_still_tf_value_error():
    g = tf.Graph()
    with g.as_default():
        ta = tf.TensorArray(tf.float32, size=2)
        with pytest.raises(ValueError, match="shape_invariants"):
            tf.while_loop(lambda i, x, ta: i < 2, lambda i, x, ta: (i + 1, tf.concat([x, x], 0), ta.write(i, tf.reduce_sum(x))),
                          [0, tf.zeros([1]), ta])


# ---------------------------------------------------------------- dynamic_size=True
def test_dynamic_size_while_loop_values_and_gradient_in_graph_mode():
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float64, [2])
        n = tf1.placeholder(tf.int32, [])
        ta = _loop(x, n, 0, dynamic=True)
        st, size = ta.stack(), ta.size()
        (gx,) = tf.gradients(tf.reduce_sum(st * WEIGHTS), x)
        with tf1.Session() as s:
            for trips in (0, 1, 4):
                got_st, got_size, got_g = s.run([st, size, gx], {x: X0, n: trips})
                assert got_st.shape == (trips, 2) and int(got_size) == trips
                np.testing.assert_allclose(got_st, _np_rows(X0, trips), rtol=1e-12)
                np.testing.assert_allclose(got_g, _fd_grad(X0, trips), rtol=1e-6, atol=1e-9)
            # the gradient reads the grown array (codegen/lower_rows.py) and its reverse loop pops
            # the array's rows (passes/growing_vars.popped_vars): it compiles
            assert "FALLBACK" not in str(s.explain(gx, {x: X0, n: 2}))
    # the array alone: written at the counter, each write is an append, kept in a growing buffer
    # (its size, the Shape of the grown value, is its entry rows + the trip count)
    for trips in (0, 3):
        compiled, interpreted = run_both(g, [st, size, gx], {x: X0, n: trips})   # (asserts no fallback)
        check_close(interpreted[0], compiled[0], np.float64)
        check_close(interpreted[2], compiled[2], np.float64)
        np.testing.assert_allclose(compiled[0], _np_rows(X0, trips), rtol=1e-12)
        assert int(compiled[1]) == int(interpreted[1]) == trips


def test_dynamic_size_appends_compile_one_kernel_for_large_fed_trip_counts():
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float64, [2])
        n = tf1.placeholder(tf.int32, [])
        pre = tf.TensorArray(tf.float64, size=2, dynamic_size=True).write(0, x).write(1, x * 2.0)
        ta = tf.while_loop(lambda i, h, ta: i < n + 2,
                           lambda i, h, ta: (i + 1, tf.sin(h) * 1.5, ta.write(i, tf.sin(h) * 1.5)), [2, x, pre])[2]
        st = ta.stack()
    with tf1.Session(graph=g) as s:
        before = tf.cache_info()
        got = {trips: s.run(st, {x: X0, n: trips}) for trips in (20000, 3, 20000)}
        after = tf.cache_info()
        assert after["fallbacks"] == before["fallbacks"]
        assert after["compiles"] + after["disk_hits"] - before["compiles"] - before["disk_hits"] <= 1
    h, rows = X0.copy(), [X0, X0 * 2.0]
    for _ in range(20000):
        h = np.sin(h) * 1.5
        rows.append(h)
    want = np.array(rows)
    np.testing.assert_allclose(got[20000], want, rtol=1e-12)
    np.testing.assert_allclose(got[3], want[:5], rtol=1e-12)


@pytest.mark.parametrize("body", ["gap", "reads", "twice", "counter_from_one"])
def test_dynamic_size_writes_that_are_not_appends_keep_the_general_form(body):
    """A write past the end (rows in between are zeros), a body reading the array, two
    writes per iteration, a counter not starting at the array's size: not appends, so
    the array is carried in its general form, with TF's values: compiled, preallocated to
    its final length (tensor_array_preallocated.py), but for the body reading the array
    (the interpreter)."""
    def step(i, h, ta):
        h = tf.sin(h) * 1.5
        if body == "gap":
            return i + 1, h, ta.write(2 * i, h)
        if body == "reads":
            ta = ta.write(i, h)
            return i + 1, h + tf.cast(ta.size(), tf.float64), ta
        if body == "twice":
            return i + 1, h, ta.write(i, h).write(i, h * 3.0)
        return i + 1, h, ta.write(i, h)

    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float64, [2])
        start = 1 if body == "counter_from_one" else 0
        ta = tf.while_loop(lambda i, h, ta: i < 3 + start, step,
                           [start, x, tf.TensorArray(tf.float64, size=0, dynamic_size=True)])[2]
        st = ta.stack()
    h, want = X0.copy(), {0: [], 1: [np.zeros(2)]}.get(start)
    for i in range(3):
        h = np.sin(h) * 1.5
        if body == "gap":
            want += [np.zeros(2)] * (2 * i - len(want)) + [h]
        elif body == "reads":
            want.append(h)
            h = h + i + 1
        else:
            want.append(h * 3.0 if body == "twice" else h)
    with tf1.Session(graph=g) as s:
        np.testing.assert_allclose(s.run(st, {x: X0}), np.array(want), rtol=1e-12)
        assert ("FALLBACK" in str(s.explain(st, {x: X0}))) == (body == "reads")


def test_dynamic_size_while_loop_eager_grows_past_its_initial_size():
    ta = _loop(tf.constant(X0), 3, 1, dynamic=True)
    np.testing.assert_allclose(ta.stack().numpy(), _np_rows(X0, 3), rtol=1e-12)


def test_guide_dynamic_size_array_in_a_function_for_loop():
    """The tf.function guide's accumulation example, with size=0 and dynamic_size=True;
    a write past the end leaves zero rows in between."""
    @tf.function
    def f(x, n):
        ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
        for i in tf.range(n):
            ta = ta.write(2 * i, x * tf.cast(i + 1, tf.float32))
        return ta.stack(), ta.size()

    x = np.array([1.0, -2.0], np.float32)
    for trips in (0, 3):
        st, size = f(tf.constant(x), tf.constant(trips))
        want = np.zeros((max(2 * trips - 1, 0), 2), np.float32)
        want[::2] = x * np.arange(1, trips + 1, dtype=np.float32)[:, None]
        np.testing.assert_array_equal(st.numpy(), want)
        assert int(size.numpy()) == want.shape[0]
