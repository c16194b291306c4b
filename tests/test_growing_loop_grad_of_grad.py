"""Gradients through a while_loop whose accumulator grows inside a ``tf.cond`` in
the body (``acc = tf.cond(p, lambda: concat([acc, two rows]), lambda: concat([acc,
one row]))`` under a [None, k] invariant): the reverse loop hands the accumulator's
gradient to the gradient If, whose branches pop two or one rows of it
(passes/growing_vars.if_pops); compiled, that If pops the rows in place
(codegen/lower_growing.pop_capture) and one kernel serves every trip count.
Expected values: the same recurrence in numpy, differentiated by central finite
differences; compiled runs are also checked against the interpreter."""
import numpy as np
import pytest

import jitgrad as tf
from test_differential import check_close, run_both

tf1 = tf.compat.v1
W = np.array([0.5, -1.0, 2.0])
INVARIANTS = [tf.TensorShape([]), tf.TensorShape([3]), tf.TensorShape([None, 3])]


def _np_rows(w, n, data_pred=False, skip=False):
    """The accumulated rows: [h, h*h] on odd steps (or where h[1] > 0), [h * w] otherwise
    (or, ``skip``, none)."""
    h, rows = np.ones(3), [np.full(3, 0.5)]
    for i in range(n):
        h = np.tanh(h * w + 0.1)
        two = h[1] > 0 if data_pred else i % 2 == 1
        rows += [h, h * h] if two else [] if skip else [h * w]
    return np.array(rows)


def _np_loss(w, n, data_pred=False, skip=False):
    x = _np_rows(w, n, data_pred, skip)
    return float(np.sum(x * x * np.array([1.0, 2.0, 3.0])) + np.sum(np.sin(x)))


def _fd(f, w, eps=1e-6):
    g = np.zeros_like(w)
    for k in range(len(w)):
        d = np.zeros_like(w)
        d[k] = eps
        g[k] = (f(w + d) - f(w - d)) / (2 * eps)
    return g


def _graph(dt=tf.float64, data_pred=False, skip=False):
    g = tf.Graph()
    with g.as_default():
        n = tf1.placeholder(tf.int32, [])
        w = tf1.placeholder(dt, [3])

        def body(i, h, x):
            h = tf.tanh(h * w + 0.1)
            p = h[1] > 0 if data_pred else tf.equal(i % 2, 1)
            x = tf.cond(p, lambda: tf.concat([x, [h, h * h]], 0), (lambda: x) if skip else lambda: tf.concat([x, [h * w]], 0))
            return i + 1, h, x
        _, _, x = tf.while_loop(lambda i, h, x: i < n, body, [0, tf.ones([3], dt), tf.fill([1, 3], tf.cast(0.5, dt))],
                                shape_invariants=INVARIANTS)
        loss = tf.reduce_sum(x * x * tf.constant([1.0, 2.0, 3.0], dt)) + tf.reduce_sum(tf.sin(x))
        (gw,) = tf.gradients(loss, w)
    return g, n, w, x, loss, gw


def _kernels():
    info = tf.cache_info()
    return info["compiles"] + info["disk_hits"]


@pytest.mark.parametrize("data_pred, skip", [(False, False), (True, False), (True, True)])
def test_gradient_through_a_cond_appending_rows_compiles_once_and_is_right(data_pred, skip):
    """skip: the else branch appends nothing (``lambda: acc``)."""
    g, n, w, x, loss, gw = _graph(data_pred=data_pred, skip=skip)
    with tf1.Session(graph=g) as s:
        assert "FALLBACK" not in str(s.explain(gw, {n: 3, w: W}))
        before, kernels = tf.cache_info()["fallbacks"], _kernels()
        for trips in (0, 1, 50, 2, 7):
            got_loss, got = s.run([loss, gw], {n: trips, w: W})
            np.testing.assert_allclose(got_loss, _np_loss(W, trips, data_pred, skip), rtol=1e-12)
            np.testing.assert_allclose(got, _fd(lambda v: _np_loss(v, trips, data_pred, skip), W), rtol=1e-6,
                                       atol=1e-8)
        assert tf.cache_info()["fallbacks"] == before
        assert _kernels() - kernels <= 1   # (one kernel for every trip count; none if an earlier test made it)


@pytest.mark.parametrize("dt", [tf.float32, tf.float64])
def test_compiled_matches_interpreter_and_is_bit_identical(dt):
    g, n, w, x, loss, gw = _graph(dt, data_pred=True)
    for trips in (0, 1, 9):
        feed = {n: trips, w: W.astype(dt.np)}
        compiled, interpreted = run_both(g, [x, loss, gw], feed)   # (asserts no fallback)
        for a, b in zip(compiled, interpreted):
            check_close(a, b, np.dtype(dt.np).type)
    with tf1.Session(graph=g) as s:
        first = s.run(gw, {n: 33, w: W.astype(dt.np)})
        for _ in range(3):
            assert s.run(gw, {n: 33, w: W.astype(dt.np)}).tobytes() == first.tobytes()


def test_the_forward_value_alone_and_with_its_gradient_agree():
    g, n, w, x, loss, gw = _graph()
    with tf1.Session(graph=g) as s:
        before = tf.cache_info()["fallbacks"]
        got_x, got_g = s.run([x, gw], {n: 6, w: W})
        np.testing.assert_allclose(got_x, _np_rows(W, 6), rtol=1e-13)
        np.testing.assert_allclose(s.run(x, {n: 6, w: W}), got_x, rtol=0)
        np.testing.assert_allclose(got_g, _fd(lambda v: _np_loss(v, 6), W), rtol=1e-6, atol=1e-8)
        assert tf.cache_info()["fallbacks"] == before


def _regions(program):
    """Every (While / If node attrs) of a specialised Program, nested ones too."""
    out = []
    for nd in program.nodes:
        if nd.op in ("While", "If"):
            out.append((nd.op, nd.attrs))
            for key in ("body", "then_branch", "else_branch"):
                if hasattr(nd.attrs.get(key), "nodes"):
                    out += _regions(nd.attrs[key])
    return out


@pytest.mark.parametrize("optimised", [False, True])
def test_the_specialised_program_pops_per_branch_in_the_reference_kernels(optimised):
    """The Program the compiler lowers, run by the numpy kernels: the reverse loop's If
    pops (growing_vars.if_pops) two or one rows per iteration, as its branch says."""
    from jitgrad.compiler import optimise
    from jitgrad.passes import ir
    from jitgrad.passes.prune import prune
    g, n, w, x, loss, gw = _graph(data_pred=True)
    for trips in (0, 1, 6):
        fed = [(n, np.int32(trips)), (w, W)]
        p = ir.from_graph(prune([loss, gw], {id(n), id(w)}), [loss, gw], fed, None)
        if optimised:
            p = optimise(p)
        pops = [a["pop_caps"] for op, a in _regions(p) if op == "If" and a.get("pop_caps")]
        assert len(pops) == 1 and sorted(pops[0][0][2:]) == [1, 2]
        assert any(op == "While" and a.get("pop_vars") for op, a in _regions(p))
        # nothing the run reads stacks the accumulator per iteration (quadratic in T): the
        # gradient If does not take the forward value its branches never read
        assert not optimised or all(None not in s for op, a in _regions(p) if op == "While" for s, _ in a["y_specs"])
        args = [fed[a.key][1] if a.kind == "feed" else a.value for a in p.args]
        (got_loss, got), _ = ir.evaluate(p, args)
        np.testing.assert_allclose(got_loss, _np_loss(W, trips, True), rtol=1e-12)
        np.testing.assert_allclose(got, _fd(lambda v: _np_loss(v, trips, True), W), rtol=1e-6, atol=1e-8)


# ---------------------------------------------------------------- second order through the reverse loop
# The all-states RNN h_{t+1} = tanh(h_t * w + 0.1), every state appended to an accumulator
# (or written to a dynamic TensorArray) and loss = sum(states^2). Its gradient's reverse loop
# pops a state's gradient per iteration; the gradient of that gradient differentiates the
# popping loop: it saves only the rows each iteration popped (ops/control_flow_ops._popped_tails)
# and its own reverse loop appends their gradients (a growing variable entering with run-time rows).
def _np_states(w, n):
    hs = [np.ones(3)]
    for _ in range(n):
        hs.append(np.tanh(hs[-1] * w + 0.1))
    return hs


def _np_grad(w, n):
    """d sum(states^2) / dw, backpropagated by hand."""
    hs, gw, carry = _np_states(w, n), np.zeros(3), np.zeros(3)
    for t in range(n, 0, -1):
        da = (carry + 2.0 * hs[t]) * (1.0 - hs[t] ** 2)
        gw += da * hs[t - 1]
        carry = da * w
    return gw


def _rnn_graph(kind):
    g = tf.Graph()
    with g.as_default():
        n = tf1.placeholder(tf.int32, [])
        w = tf1.placeholder(tf.float64, [3])
        if kind == "ta":
            def body(i, h, ta):
                h = tf.tanh(h * w + 0.1)
                return i + 1, h, ta.write(i, h)
            _, _, ta = tf.while_loop(lambda i, h, ta: i < n, body,
                                     [0, tf.ones([3], tf.float64), tf.TensorArray(tf.float64, size=0, dynamic_size=True)])
            st = ta.stack()
        else:
            def body(i, h, x):
                h = tf.tanh(h * w + 0.1)
                return i + 1, h, tf.concat([x, [h]], 0)
            _, _, st = tf.while_loop(lambda i, h, x: i < n, body, [0, tf.ones([3], tf.float64), tf.zeros([0, 3], tf.float64)],
                                     shape_invariants=INVARIANTS)
        loss = tf.reduce_sum(st * st)
        (gw,) = tf.gradients(loss, w)
        (ggw,) = tf.gradients(tf.reduce_sum(gw * gw), w)   # (a gradient penalty's derivative)
        (hess,) = tf.hessians(loss, w)
    return g, n, w, gw, ggw, hess


@pytest.mark.parametrize("kind", ["concat", "ta"])
def test_second_order_through_the_reverse_loop_compiles_once_and_is_right(kind):
    g, n, w, gw, ggw, hess = _rnn_graph(kind)
    with tf1.Session(graph=g) as s:
        assert "FALLBACK" not in str(s.explain([gw, ggw], {n: 3, w: W}))
        before, kernels = tf.cache_info()["fallbacks"], _kernels()
        for trips in (0, 1, 50, 4):
            got_g, got_gg = s.run([gw, ggw], {n: trips, w: W})
            np.testing.assert_allclose(got_g, _np_grad(W, trips), rtol=1e-12, atol=1e-14)
            want = _fd(lambda v: float(np.sum(_np_grad(v, trips) ** 2)), W)
            np.testing.assert_allclose(got_gg, want, rtol=1e-6, atol=1e-8)
        assert tf.cache_info()["fallbacks"] == before
        assert _kernels() - kernels <= 1


@pytest.mark.parametrize("kind", ["concat", "ta"])
def test_hessians_through_the_reverse_loop_match_finite_differences(kind):
    """(tf.hessians batches its three gradients, batched_gradients.py; the values of
    run-time rows go per row there, and the compiled run needs no interpreter:
    test_growing_loop_hessians.py.)"""
    g, n, w, gw, ggw, hess = _rnn_graph(kind)
    for mode in ("compiled", "interpret"):
        with tf1.Session(graph=g, config=tf1.ConfigProto(jitgrad_mode=mode)) as s:
            for trips in (0, 1, 6):
                got = s.run(hess, {n: trips, w: W})
                want = np.stack([_fd(lambda v: _np_grad(v, trips)[i], W) for i in range(3)])
                np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)
                np.testing.assert_allclose(got, got.T, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("kind", ["concat", "ta"])
def test_second_order_compiled_matches_interpreter_bit_identical_run_to_run(kind):
    g, n, w, gw, ggw, hess = _rnn_graph(kind)
    compiled, interpreted = run_both(g, [gw, ggw], {n: 7, w: W})
    for a, b in zip(compiled, interpreted):
        check_close(a, b, np.float64)
    with tf1.Session(graph=g) as s:
        first = s.run(ggw, {n: 40, w: W})
        for _ in range(3):
            assert s.run(ggw, {n: 40, w: W}).tobytes() == first.tobytes()


def test_values_grown_by_different_loops_combine_when_their_rows_agree():
    """An elementwise op on two grown values (the second derivative above multiplies its
    grown gradient by the forward's grown states): compiled when their rows agree at run
    time, TF's InvalidArgumentError when they do not (checked before any row is read)."""
    g = tf.Graph()
    with g.as_default():
        n1, n2 = tf1.placeholder(tf.int32, []), tf1.placeholder(tf.int32, [])

        def grow(n, c):
            _, x = tf.while_loop(lambda i, x: i < n, lambda i, x: (i + 1, tf.concat([x, [[c, c + 1.0]]], 0)),
                                 [0, tf.zeros([0, 2])], shape_invariants=[tf.TensorShape([]), tf.TensorShape([None, 2])])
            return x
        y = grow(n1, 1.0) * grow(n2, 2.0)
    for rows in (0, 1, 3):
        compiled, interpreted = run_both(g, [y], {n1: rows, n2: rows})
        np.testing.assert_array_equal(compiled[0], np.tile([[2.0, 6.0]], (rows, 1)).astype(np.float32))
        np.testing.assert_array_equal(compiled[0], interpreted[0])
    for mode in ("compiled", "interpret"):
        with tf1.Session(graph=g, config=tf1.ConfigProto(jitgrad_mode=mode)) as s:
            with pytest.raises(tf.errors.InvalidArgumentError, match="[Ii]ncompatible shapes"):
                s.run(y, {n1: 2, n2: 3})
