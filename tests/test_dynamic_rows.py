"""Ops computing on values whose leading dimension is known only at run time
(codegen/lower_rows.py): a dynamic TensorArray's stack (a While variable grown by
rows) and a cond output whose branches differ in dim 0. Each program runs compiled
(asserting no fallback) and interpreted; expected values are the same recurrence in
numpy, gradients are checked against central finite differences."""
import warnings

import numpy as np
import pytest

import jitgrad as tf
from test_differential import check_close, run_both

tf1 = tf.compat.v1
W4 = (np.arange(16, dtype=np.float64).reshape(4, 4) - 7.5) / 10
X0 = np.array([0.3, -0.2, 0.5, 0.1])


def _np_states(x0, trips, w=W4):
    x, rows = np.asarray(x0, np.float64), []
    for _ in range(trips):
        x = np.tanh(w @ x + 0.1)
        rows.append(x)
    return np.array(rows).reshape(trips, 4)


def _all_states(T, x0, W, dt):
    """x_{t+1} = tanh(W x_t + 0.1) for T steps, every state stacked from a dynamic TensorArray."""
    ta = tf.TensorArray(dt, size=0, dynamic_size=True)

    def body(i, x, ta):
        x = tf.tanh(tf.linalg.matvec(W, x) + 0.1)
        return i + 1, x, ta.write(i, x)
    _, _, ta = tf.while_loop(lambda i, x, ta: i < T, body, [0, x0, ta])
    return ta.stack()


def _rnn(dt=tf.float64):
    """The all-states RNN: every state goes to a dynamic TensorArray; returns
    (graph, T, x0, w, stacked states)."""
    g = tf.Graph()
    with g.as_default():
        T = tf1.placeholder(tf.int32, [])
        x0 = tf1.placeholder(dt, [4])
        w = tf1.placeholder(dt, [4])   # a per-feature scale applied to the stack (its gradient needs no loop)
        W = tf.constant(W4.astype(dt.np))
        st = _all_states(T, x0, W, dt)
    return g, T, x0, w, st


def _explain(g, fetches, feed):
    with g.as_default():
        return str(tf1.Session(graph=g).explain(fetches, feed))


def _compiles(g, fetches, feed):
    report = _explain(g, fetches, feed)
    assert "FALLBACK" not in report, report


READERS = {
    "sum_all": (lambda st, w: tf.reduce_sum(st * st), lambda s, w: np.sum(s * s)),
    "sum_axis0": (lambda st, w: tf.reduce_sum(st, axis=0), lambda s, w: s.sum(0)),
    "sum_axis1": (lambda st, w: tf.reduce_sum(st, axis=1), lambda s, w: s.sum(1)),
    "sum_keepdims": (lambda st, w: tf.reduce_sum(st, axis=1, keepdims=True), lambda s, w: s.sum(1, keepdims=True)),
    "mean_all": (lambda st, w: tf.reduce_mean(st), lambda s, w: s.mean() if s.size else np.nan),
    "mean_axis0": (lambda st, w: tf.reduce_mean(st, axis=0),
                   lambda s, w: s.mean(0) if len(s) else np.full(4, np.nan)),
    "mean_axis1": (lambda st, w: tf.reduce_mean(st, axis=-1), lambda s, w: s.mean(1)),
    "max_all": (lambda st, w: tf.reduce_max(st), lambda s, w: s.max() if s.size else -np.inf),
    "max_axis0": (lambda st, w: tf.reduce_max(st, axis=0), lambda s, w: s.max(0) if len(s) else np.full(4, -np.inf)),
    "min_axis1": (lambda st, w: tf.reduce_min(st, axis=1), lambda s, w: s.min(1)),
    "prod_axis0": (lambda st, w: tf.reduce_prod(st + 1.0, axis=0), lambda s, w: np.prod(s + 1.0, 0)),
    "bcast_mul": (lambda st, w: st * w + 1.0, lambda s, w: s * w + 1.0),
    "bcast_row": (lambda st, w: tf.exp(st) - tf.reshape(w, [1, 4]), lambda s, w: np.exp(s) - w[None]),
    "chain": (lambda st, w: tf.reduce_sum(tf.square(st - w) * 0.5, axis=1), lambda s, w: (0.5 * (s - w) ** 2).sum(1)),
    "select": (lambda st, w: tf.where(st > 0.0, st, st * w), lambda s, w: np.where(s > 0, s, s * w)),
    "like_and_centred": (lambda st, w: tf.zeros_like(st) + (st - tf.reduce_mean(st, axis=0, keepdims=True)),
                         lambda s, w: s - s.mean(0, keepdims=True) if len(s) else s),
    "sum_of_weighted": (lambda st, w: tf.reduce_sum(st * w), lambda s, w: np.sum(s * w)),
}


@pytest.mark.parametrize("name", sorted(READERS))
def test_reader_of_a_grown_stack_compiles_and_matches_numpy_and_interpreter(name):
    build, ref = READERS[name]
    g, T, x0, w, st = _rnn()
    with g.as_default():
        y = build(st, w)
    wv = np.array([0.5, -1.0, 2.0, 0.25])
    for trips in (0, 1, 3, 37):
        feed = {T: trips, x0: X0, w: wv}
        _compiles(g, [y], feed)
        compiled, interpreted = run_both(g, [y], feed)
        check_close(compiled[0], interpreted[0], np.float64)
        np.testing.assert_allclose(compiled[0], ref(_np_states(X0, trips), wv), rtol=1e-12, atol=1e-13)


def test_the_mean_of_no_rows_is_nan_without_a_warning():
    """TF's reduce_mean of nothing is NaN (0 / 0) and warns of nothing: neither mode may
    let numpy's "Mean of empty slice" RuntimeWarning through."""
    g, T, x0, w, st = _rnn()
    with g.as_default():
        ys = [tf.reduce_mean(st), tf.reduce_mean(st, axis=0, keepdims=True), tf.reduce_mean(st, axis=1)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compiled, interpreted = run_both(g, ys, {T: 0, x0: X0, w: np.ones(4)})
    for a, b in zip(compiled, interpreted):
        check_close(a, b, np.float64)
    assert np.isnan(compiled[0]) and compiled[1].shape == (1, 4) and np.isnan(compiled[1]).all()
    assert compiled[2].shape == (0,)


def test_the_stack_and_its_reduction_fetched_together():
    g, T, x0, w, st = _rnn(tf.float32)
    with g.as_default():
        sq = st * st
        loss = tf.reduce_sum(sq)
    feed = {T: 9, x0: X0.astype(np.float32), w: np.ones(4, np.float32)}
    compiled, interpreted = run_both(g, [sq, loss, st], feed)
    for a, b in zip(compiled, interpreted):
        check_close(a, b, np.float32)
    assert compiled[0].shape == (9, 4)
    np.testing.assert_allclose(compiled[1], np.sum(_np_states(X0, 9) ** 2), rtol=1e-6)


def test_one_kernel_serves_every_trip_count():
    g, T, x0, w, st = _rnn(tf.float32)
    with g.as_default():
        loss = tf.reduce_sum(st * st)
        rows = tf.reduce_mean(st, axis=1)
        sess = tf1.Session(graph=g)
    before = tf.cache_info()["compiles"]
    fallbacks = tf.cache_info()["fallbacks"]
    for trips in (0, 1, 1000, 1, 0, 1000):
        lv, rv = sess.run([loss, rows], {T: trips, x0: X0.astype(np.float32), w: np.ones(4, np.float32)})
        s = _np_states(X0, trips)
        np.testing.assert_allclose(lv, np.sum(s * s), rtol=2e-5)
        np.testing.assert_allclose(rv, s.mean(1), rtol=2e-5, atol=1e-6)
        assert rv.shape == (trips,)
    assert tf.cache_info()["compiles"] - before <= 1
    assert tf.cache_info()["fallbacks"] == fallbacks


def test_results_are_bit_identical_run_to_run():
    g, T, x0, w, st = _rnn(tf.float32)
    with g.as_default():
        loss = tf.reduce_sum(st * st)
        col = tf.reduce_sum(st, axis=0)
        sess = tf1.Session(graph=g)
    feed = {T: 500, x0: X0.astype(np.float32), w: np.ones(4, np.float32)}
    first = sess.run([loss, col], feed)
    for _ in range(3):
        again = sess.run([loss, col], feed)
        assert all(np.array_equal(a, b) for a, b in zip(first, again))


def _fd(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for k in range(x.size):
        d = np.zeros_like(x)
        d.flat[k] = eps
        g.flat[k] = (f(x + d) - f(x - d)) / (2 * eps)
    return g


def test_gradient_through_a_reduction_of_the_stack_compiles():
    """d/dw of sum((st * w)^2) and of mean(max(st * w, axis=1)): the upstream gradient
    is broadcast over the run-time rows (Unreduce) and summed back over them."""
    g, T, x0, w, st = _rnn()
    with g.as_default():
        loss = tf.reduce_sum(tf.square(st * w)) + tf.reduce_mean(tf.reduce_max(st * w, axis=1))
        gw = tf.gradients(loss, w)[0]
        # second order: a Hessian-vector product of sum((st * w)^2), H = diag(2 * sum(st^2, 0))
        v = tf.constant([1.0, -2.0, 0.5, 3.0], tf.float64)
        hw = tf.gradients(tf.reduce_sum(tf.gradients(tf.reduce_sum(tf.square(st * w)), w)[0] * v), w)[0]
    wv = np.array([0.5, -1.0, 2.0, 0.25])

    def np_loss(wv_, trips):
        s = _np_states(X0, trips) * wv_
        return np.sum(s * s) + (s.max(1).mean() if trips else np.nan)
    for trips in (1, 2, 30):
        feed = {T: trips, x0: X0, w: wv}
        _compiles(g, [loss, gw, hw], feed)
        compiled, interpreted = run_both(g, [loss, gw, hw], feed)
        for a, b in zip(compiled, interpreted):
            check_close(a, b, np.float64)
        np.testing.assert_allclose(compiled[1], _fd(lambda v: np_loss(v, trips), wv), rtol=1e-6, atol=1e-7)
        s = _np_states(X0, trips)
        np.testing.assert_allclose(compiled[2], 2 * np.sum(s * s, 0) * [1.0, -2.0, 0.5, 3.0], rtol=1e-12)


def _branch_graph():
    """A cond whose branches give 2 or 5 rows; its output is read by ops."""
    g = tf.Graph()
    with g.as_default():
        p = tf1.placeholder(tf.bool, [])
        w = tf1.placeholder(tf.float64, [3])
        a = tf.reshape(tf.range(6, dtype=tf.float64), [2, 3])
        b = tf.reshape(tf.range(15, dtype=tf.float64), [5, 3]) / 7.0
        y = tf.cond(p, lambda: a * 2.0, lambda: tf.sin(b))
        out = tf.reduce_sum(y * w, axis=1)
        total = tf.reduce_sum(tf.square(y * w))
        gw = tf.gradients(total, w)[0]
    return g, p, w, y, out, total, gw


def test_a_branch_shaped_cond_output_consumed_by_ops():
    g, p, w, y, out, total, gw = _branch_graph()
    wv = np.array([1.5, -0.5, 0.25])
    for pv, yv in ((True, np.arange(6.0).reshape(2, 3) * 2), (False, np.sin(np.arange(15.0).reshape(5, 3) / 7))):
        feed = {p: pv, w: wv}
        _compiles(g, [out, total, gw], feed)
        compiled, interpreted = run_both(g, [out, total, gw], feed)
        for a, b in zip(compiled, interpreted):
            check_close(a, b, np.float64)
        np.testing.assert_allclose(compiled[0], (yv * wv).sum(1), rtol=1e-13)
        np.testing.assert_allclose(compiled[2], 2 * wv * (yv * yv).sum(0), rtol=1e-13)


def test_two_sources_of_run_time_rows_compile_with_a_rows_check():
    """An elementwise op on values of two sources: their rows are compared when it runs
    (lower_rows.RowsNode.same): TF's InvalidArgumentError when they differ."""
    g, T, x0, w, st = _rnn()
    with g.as_default():
        extra = tf1.placeholder(tf.int32, [])
        ta2 = tf.TensorArray(tf.float64, size=0, dynamic_size=True)
        _, ta2 = tf.while_loop(lambda i, ta: i < T + extra, lambda i, ta: (i + 1, ta.write(i, tf.ones([4], tf.float64))),
                               [0, ta2])
        y = st + ta2.stack()   # T and T + 1 rows: TF raises
    feed = {T: 3, x0: X0, w: np.ones(4), extra: 1}
    report = _explain(g, [y], feed)
    assert "FALLBACK" not in report, report
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf1.Session(graph=g).run(y, feed)
    fine = {**feed, extra: 0}
    np.testing.assert_array_equal(tf1.Session(graph=g).run(y, fine), tf1.Session(graph=g).run(st, fine) + 1.0)


def test_the_all_states_rnn_forward_no_longer_falls_back():
    g, T, x0, w, st = _rnn(tf.float32)
    with g.as_default():
        loss = tf.reduce_sum(st * st)
    report = _explain(g, [loss], {T: 5, x0: X0.astype(np.float32), w: np.ones(4, np.float32)})
    assert "FALLBACK" not in report and "over run-time rows" in report, report


def test_integer_and_bool_readers_are_exact():
    g = tf.Graph()
    with g.as_default():
        T = tf1.placeholder(tf.int32, [])
        ta = tf.TensorArray(tf.int32, size=0, dynamic_size=True)
        _, ta = tf.while_loop(lambda i, ta: i < T, lambda i, ta: (i + 1, ta.write(i, tf.stack([i, i * i - 7, 3]))),
                              [0, ta])
        st = ta.stack()
        ys = [tf.reduce_mean(st, axis=0), tf.reduce_sum(st), tf.reduce_any(st > 5, axis=1), tf.reduce_all(st > -10),
              st // 2, tf.cast(st, tf.float32) * 0.5, tf.reduce_max(st, 1), tf.reduce_min(st, 0)]
    for trips in (0, 1, 6, 100):
        s = np.array([[i, i * i - 7, 3] for i in range(trips)], np.int32).reshape(trips, 3)
        compiled, interpreted = run_both(g, ys, {T: trips})
        for a, b in zip(compiled, interpreted):
            assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
        np.testing.assert_array_equal(compiled[1], s.sum())
        np.testing.assert_array_equal(compiled[2], (s > 5).any(1))
        np.testing.assert_array_equal(compiled[4], s // 2)
        if trips:
            np.testing.assert_array_equal(compiled[0], np.trunc(s.astype(np.int64).sum(0) / trips).astype(np.int32))


def test_a_reader_inside_a_loop_body():
    """A nested loop's stack, reduced inside the outer loop's body (a region: its
    memory is freed when the body returns, every iteration)."""
    g = tf.Graph()
    with g.as_default():
        T = tf1.placeholder(tf.int32, [])
        x = tf1.placeholder(tf.float64, [3])

        def outer(j, acc):
            ta = tf.TensorArray(tf.float64, size=0, dynamic_size=True)
            _, ta = tf.while_loop(lambda i, ta: i < j, lambda i, ta: (i + 1, ta.write(i, x * tf.cast(i, tf.float64))),
                                  [0, ta])
            st = ta.stack()
            return j + 1, acc + tf.reduce_sum(st * st, axis=0)
        _, acc = tf.while_loop(lambda j, acc: j < T, outer, [0, tf.zeros([3], tf.float64)])
    xv = np.array([1.0, -2.0, 0.5])
    for trips in (0, 1, 6):
        compiled, interpreted = run_both(g, [acc], {T: trips, x: xv})
        want = sum(sum((xv * i) ** 2 for i in range(j)) for j in range(trips)) + np.zeros(3)
        np.testing.assert_allclose(compiled[0], want, rtol=1e-13)
        check_close(compiled[0], interpreted[0], np.float64)


def _np_bptt(W, x0, trips):
    """The all-states loss sum_t |x_t|^2 and its gradients by hand (backpropagation
    through time): (loss, d/dx0, d/dW)."""
    xs = [np.asarray(x0, np.float64)]
    for _ in range(trips):
        xs.append(np.tanh(W @ xs[-1] + 0.1))
    g, gW = np.zeros(4), np.zeros((4, 4))
    for t in range(trips, 0, -1):
        g = g + 2.0 * xs[t]
        ga = g * (1.0 - xs[t] ** 2)
        gW += np.outer(ga, xs[t - 1])
        g = W.T @ ga
    return sum(float(np.sum(x * x)) for x in xs[1:]), g, gW


def _rnn_loss_graph(dt):
    g = tf.Graph()
    with g.as_default():
        T = tf1.placeholder(tf.int32, [])
        x0 = tf1.placeholder(dt, [4])
        W = tf1.placeholder(dt, [4, 4])
        st = _all_states(T, x0, W, dt)
        loss = tf.reduce_sum(st * st)
        gx, gW = tf.gradients(loss, [x0, W])
    return g, T, x0, W, [loss, gx, gW]


def test_the_all_states_rnn_gradient_compiles_one_kernel_for_every_trip_count():
    """The gradient of ta.stack() feeds the reverse loop, which pops row t of the
    upstream gradient each iteration (passes/growing_vars.popped_vars): compiled, one
    kernel for T = 0, 1, 1000, equal to the interpreter and to BPTT by hand."""
    g, T, x0, W, fetches = _rnn_loss_graph(tf.float64)
    _compiles(g, fetches, {T: 3, x0: X0, W: W4})
    sess = tf1.Session(graph=g)
    before, fallbacks = tf.cache_info()["compiles"], tf.cache_info()["fallbacks"]
    for trips in (0, 1, 1000, 7):
        got = sess.run(fetches, {T: trips, x0: X0, W: W4})
        for a, b in zip(got, _np_bptt(W4, X0, trips)):
            np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-13)
    assert tf.cache_info()["compiles"] - before <= 1
    assert tf.cache_info()["fallbacks"] == fallbacks
    for trips in (0, 1, 20):
        compiled, interpreted = run_both(g, fetches, {T: trips, x0: X0, W: W4})
        for a, b in zip(compiled, interpreted):
            check_close(a, b, np.float64)


def test_the_all_states_rnn_gradient_against_finite_differences_float32():
    g, T, x0, W, fetches = _rnn_loss_graph(tf.float32)
    sess = tf1.Session(graph=g)
    w32, x32 = W4.astype(np.float32), X0.astype(np.float32)
    loss, gx, gW = sess.run(fetches, {T: 12, x0: x32, W: w32})
    np.testing.assert_allclose(gx, _fd(lambda v: _np_bptt(W4, v, 12)[0], X0), rtol=2e-4, atol=1e-5)
    np.testing.assert_allclose(gW, _fd(lambda v: _np_bptt(v, X0, 12)[0], W4), rtol=2e-4, atol=1e-5)
    compiled, interpreted = run_both(g, fetches, {T: 12, x0: x32, W: w32})
    for a, b in zip(compiled, interpreted):
        check_close(a, b, np.float32)


def test_a_gradient_weighting_each_state_differently():
    """loss = sum_t c_t . x_t with c read per row from a second reader of the stack
    (a reduction over its trailing axis): the upstream gradient row t differs per t."""
    g, T, x0, W, _ = _rnn_loss_graph(tf.float64)
    with g.as_default():
        st = [op for op in g.get_operations() if op.type == "While"][0].outputs[2]
        per_row = tf.reduce_sum(st, axis=1, keepdims=True)        # (T, 1)
        loss = tf.reduce_sum(tf.sin(st) * per_row) + tf.reduce_max(st)
        gx = tf.gradients(loss, x0)[0]

    def np_loss(v, trips=9):
        xs, x = [], v
        for _ in range(trips):
            x = np.tanh(W4 @ x + 0.1)
            xs.append(x)
        s = np.array(xs)
        return float(np.sum(np.sin(s) * s.sum(1, keepdims=True)) + s.max())
    feed = {T: 9, x0: X0, W: W4}
    _compiles(g, [loss, gx], feed)
    compiled, interpreted = run_both(g, [loss, gx], feed)
    for a, b in zip(compiled, interpreted):
        check_close(a, b, np.float64)
    np.testing.assert_allclose(compiled[0], np_loss(X0), rtol=1e-12)
    np.testing.assert_allclose(compiled[1], _fd(np_loss, X0), rtol=1e-6, atol=1e-8)


# A 100-op elementwise chain over the grown stack, every value read once: (tf op, numpy op)
# pairs cycled, static operands a per-feature row (4,), a (1, 4) row and scalars.
_CHAIN = [
    (lambda y, w: y * w, lambda y, w: y * w),
    (lambda y, w: tf.tanh(y), lambda y, w: np.tanh(y)),
    (lambda y, w: y + tf.reshape(w, [1, 4]), lambda y, w: y + w[None]),
    (lambda y, w: tf.sin(y), lambda y, w: np.sin(y)),
    (lambda y, w: tf.maximum(y, -0.25), lambda y, w: np.maximum(y, -0.25)),
]


def _chain_graph(ops=100, dt=tf.float64):
    g, T, x0, w, st = _rnn(dt)
    with g.as_default():
        y = st
        for k in range(ops):
            y = _CHAIN[k % len(_CHAIN)][0](y, w)
    return g, T, x0, w, y


def _np_chain(s, wv, ops=100):
    for k in range(ops):
        s = _CHAIN[k % len(_CHAIN)][1](s, wv)
    return s


def _row_loops(report):
    return [line for line in report.splitlines() if "over run-time rows" in line]


@pytest.mark.parametrize("fetch", ["chain", "sum", "sum_axis1"])
def test_a_100_op_chain_on_run_time_rows_is_one_row_loop(fetch):
    """The chain is fused into the one loop over the run-time rows of what is fetched
    (the chain's value, or a reduction reading it inline): one loop, no heap buffer for
    the 99 intermediates (each was its own loop and buffer: issue 12). Values against
    the same recurrence in numpy and the interpreter; one compile for every trip count."""
    g, T, x0, w, y = _chain_graph()
    with g.as_default():
        out = {"chain": y, "sum": tf.reduce_sum(y), "sum_axis1": tf.reduce_sum(y, axis=1)}[fetch]
    wv = np.array([0.5, -1.0, 2.0, 0.25])
    loops = _row_loops(_explain(g, [out], {T: 3, x0: X0, w: wv}))
    assert len(loops) == 1 and "FALLBACK" not in loops[0], loops
    sess = tf1.Session(graph=g)
    before, fallbacks = tf.cache_info()["compiles"], tf.cache_info()["fallbacks"]
    for trips in (0, 1, 5, 33):
        want = _np_chain(_np_states(X0, trips), wv)
        want = {"chain": want, "sum": want.sum(), "sum_axis1": want.sum(1)}[fetch]
        got = sess.run(out, {T: trips, x0: X0, w: wv})
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
        compiled, interpreted = run_both(g, [out], {T: trips, x0: X0, w: wv})
        check_close(compiled[0], interpreted[0], np.float64)
    assert tf.cache_info()["compiles"] - before <= 1 and tf.cache_info()["fallbacks"] == fallbacks


def test_a_chain_value_read_twice_gets_one_buffer_and_its_readers_fuse_the_rest():
    """y (read by two reductions) lives in memory; the 50 ops after it and the 50 before
    are computed inside the loops that read them: three row loops in all."""
    g, T, x0, w, y = _chain_graph(50)
    with g.as_default():
        z = y
        for k in range(50):
            z = _CHAIN[k % len(_CHAIN)][0](z, w)
        outs = [tf.reduce_max(z), tf.reduce_sum(y, axis=0)]
    wv = np.array([0.5, -1.0, 2.0, 0.25])
    feed = {T: 6, x0: X0, w: wv}
    assert len(_row_loops(_explain(g, outs, feed))) == 3
    yv = _np_chain(_np_states(X0, 6), wv, 50)
    compiled, interpreted = run_both(g, outs, feed)
    np.testing.assert_allclose(compiled[0], _np_chain(yv, wv, 50).max(), rtol=1e-12)
    np.testing.assert_allclose(compiled[1], yv.sum(0), rtol=1e-12)
    for a, b in zip(compiled, interpreted):
        check_close(a, b, np.float64)
