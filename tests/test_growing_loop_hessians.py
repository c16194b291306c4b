"""Hessians and jacobians of gradients through a while_loop whose loop variable grows
(a concat accumulator under a [None, k] invariant, a dynamic TensorArray stacked for
the loss). ``tf.hessians`` batches its rows (batched_gradients.py): an op reading or
giving a value of run-time rows is applied per row there (``_loop_shaped``), so no
``[n, None, k]`` value is built and the whole program compiles, ONE kernel for every
trip count. Expected values: the recurrence differentiated by hand in numpy
(test_growing_loop_grad_of_grad._np_grad), then by central finite differences; compiled
runs are also checked against the interpreter."""
import numpy as np
import pytest

import jitgrad as tf
from jitgrad.batched_gradients import batched_jacobian
from test_differential import check_close, run_both
from test_growing_loop_grad_of_grad import INVARIANTS, W, _fd, _graph, _kernels, _np_grad, _np_loss, _rnn_graph

tf1 = tf.compat.v1


def _np_hessian(w, n):
    """d^2 sum(states^2) / dw^2: finite differences of the hand-derived gradient."""
    return np.stack([_fd(lambda v: _np_grad(v, n)[i], w) for i in range(len(w))])


@pytest.mark.parametrize("kind", ["concat", "ta"])
def test_hessians_of_a_grown_loop_compile_once_for_every_trip_count(kind):
    g, n, w, gw, ggw, hess = _rnn_graph(kind)
    with tf1.Session(graph=g) as s:
        assert "FALLBACK" not in str(s.explain(hess, {n: 3, w: W}))
        before, kernels = tf.cache_info()["fallbacks"], _kernels()
        for trips in (0, 1, 50, 6):
            got = s.run(hess, {n: trips, w: W})
            np.testing.assert_allclose(got, _np_hessian(W, trips), rtol=1e-6, atol=1e-8)
            np.testing.assert_allclose(got, got.T, rtol=1e-12, atol=1e-14)
        assert tf.cache_info()["fallbacks"] == before
        assert _kernels() - kernels <= 1


@pytest.mark.parametrize("kind", ["concat", "ta"])
def test_hessians_compiled_match_the_interpreter_and_repeat_bit_for_bit(kind):
    g, n, w, gw, ggw, hess = _rnn_graph(kind)
    for trips in (0, 1, 7):
        compiled, interpreted = run_both(g, [hess, gw], {n: trips, w: W})
        for a, b in zip(compiled, interpreted):
            check_close(a, b, np.float64)
    with tf1.Session(graph=g) as s:
        first = s.run(hess, {n: 40, w: W})
        for _ in range(3):
            assert s.run(hess, {n: 40, w: W}).tobytes() == first.tobytes()


def _grown_loss(n, w, dt=tf.float64):
    """sum(states^2) of h_{t+1} = tanh(h_t * w + 0.1), the states in a concat accumulator."""
    def body(i, h, x):
        h = tf.tanh(h * w + 0.1)
        return i + 1, h, tf.concat([x, [h]], 0)
    _, _, st = tf.while_loop(lambda i, h, x: i < n, body, [0, tf.ones([3], dt), tf.zeros([0, 3], dt)],
                             shape_invariants=INVARIANTS)
    return tf.reduce_sum(st * st)


def test_tape_jacobian_of_a_gradient_inside_a_function_compiles_once():
    @tf.function
    def hessian(n, w):
        with tf.GradientTape() as outer:
            outer.watch(w)
            with tf.GradientTape() as inner:
                inner.watch(w)
                loss = _grown_loss(n, w)
            g = inner.gradient(loss, w)
        return outer.jacobian(g, w)

    before = tf.cache_info()
    for trips in (0, 1, 50, 5):
        got = np.asarray(hessian(tf.constant(trips), tf.constant(W)))
        np.testing.assert_allclose(got, _np_hessian(W, trips), rtol=1e-6, atol=1e-8)
    after = tf.cache_info()
    assert after["fallbacks"] == before["fallbacks"]
    assert after["compiles"] + after["disk_hits"] - before["compiles"] - before["disk_hits"] <= 1


def test_batch_jacobian_of_a_gradient_through_a_grown_loop():
    """Two independent recurrences (rows of w [2, 3]): batch_jacobian of d loss / d w is
    each row's own hessian, the two blocks of the full one."""
    g = tf.Graph()
    with g.as_default():
        n = tf1.placeholder(tf.int32, [])
        w = tf1.placeholder(tf.float64, [2, 3])
        with tf.GradientTape() as outer:
            outer.watch(w)
            with tf.GradientTape() as inner:
                inner.watch(w)

                def body(i, h, x):
                    h = tf.tanh(h * w + 0.1)
                    return i + 1, h, tf.concat([x, [h]], 0)
                _, _, st = tf.while_loop(lambda i, h, x: i < n, body,
                                         [0, tf.ones([2, 3], tf.float64), tf.zeros([0, 2, 3], tf.float64)],
                                         shape_invariants=[tf.TensorShape([]), tf.TensorShape([2, 3]),
                                                           tf.TensorShape([None, 2, 3])])
                loss = tf.reduce_sum(st * st)
            gw = inner.gradient(loss, w)
        bj = outer.batch_jacobian(gw, w)
    wv = np.stack([W, W[::-1] * 0.5])
    with tf1.Session(graph=g) as s:
        assert "FALLBACK" not in str(s.explain(bj, {n: 3, w: wv}))
        before, kernels = tf.cache_info()["fallbacks"], _kernels()
        for trips in (0, 1, 50, 4):
            got = s.run(bj, {n: trips, w: wv})
            assert got.shape == (2, 3, 3)
            for r in range(2):
                np.testing.assert_allclose(got[r], _np_hessian(wv[r], trips), rtol=1e-6, atol=1e-8)
        assert tf.cache_info()["fallbacks"] == before
        assert _kernels() - kernels <= 1
    compiled, interpreted = run_both(g, [bj], {n: 9, w: wv})
    check_close(compiled[0], interpreted[0], np.float64)


def test_hessians_of_a_loss_mixing_grown_rows_with_a_static_operand():
    """loss = sum(states * w) + sum(states^2) * sum(w): the batched pass meets a batched
    static value times a grown one (a [n, None, 3] value were it batched), and the grown
    values' gradient rows. Checked against finite differences of the numpy loss."""
    g = tf.Graph()
    with g.as_default():
        n = tf1.placeholder(tf.int32, [])
        w = tf1.placeholder(tf.float64, [3])

        def body(i, h, x):
            h = tf.tanh(h * w + 0.1)
            return i + 1, h, tf.concat([x, [h]], 0)
        _, _, st = tf.while_loop(lambda i, h, x: i < n, body, [0, tf.ones([3], tf.float64), tf.zeros([0, 3], tf.float64)],
                                 shape_invariants=INVARIANTS)
        loss = tf.reduce_sum(st * w) + tf.reduce_sum(st * st) * tf.reduce_sum(w)
        (hess,) = tf.hessians(loss, w)

    def np_loss(v, trips):
        h, total, sq = np.ones(3), 0.0, 0.0
        for _ in range(trips):
            h = np.tanh(h * v + 0.1)
            total += float(np.sum(h * v))
            sq += float(np.sum(h * h))
        return total + sq * float(np.sum(v))

    with tf1.Session(graph=g) as s:
        before, kernels = tf.cache_info()["fallbacks"], _kernels()
        for trips in (0, 1, 8):
            got = s.run(hess, {n: trips, w: W})
            grad = lambda v: _fd(lambda u: np_loss(u, trips), v, 1e-5)   # noqa: E731
            want = np.stack([_fd(lambda v: grad(v)[i], W, 1e-4) for i in range(3)])
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
        assert tf.cache_info()["fallbacks"] == before
        assert _kernels() - kernels <= 1
    compiled, interpreted = run_both(g, [hess], {n: 5, w: W})
    check_close(compiled[0], interpreted[0], np.float64)


def test_a_placeholder_of_unknown_rows_still_gets_the_vectorised_batching_rules():
    """Only dims set by a loop or a cond go per row: a fed placeholder's are specialised
    before the kernel compiles, so its hessian keeps the batched (one op for all rows) form."""
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float64, [None, 3])
        w = tf1.placeholder(tf.float64, [3])
        loss = tf.reduce_sum(tf.tanh(x * w) ** 2)
        stats = {}
        (gw,) = tf.gradients(loss, w)
        (hess,) = batched_jacobian(gw, [w], _stats=stats)
    # (the gradient helpers whose shape stand-in needs static shapes go per row, as they did
    # before loops were told apart; the elementwise chain stays batched)
    assert set(stats["per_row"]) <= {"BroadcastToShapeOf", "SumToShape"}
    xv = np.arange(12.0).reshape(4, 3) / 10

    def grad(v):
        t = np.tanh(xv * v)
        return np.sum(2 * t * (1 - t * t) * xv, axis=0)
    with tf1.Session(graph=g) as s:
        np.testing.assert_allclose(s.run(hess, {x: xv, w: W}), np.stack([_fd(lambda v: grad(v)[i], W) for i in range(3)]),
                                   rtol=1e-6, atol=1e-8)


# ---------------------------------------------------------------- second order through a cond's pops
# The accumulator a tf.cond appends to (test_growing_loop_grad_of_grad._graph): [h, h*h] on odd
# steps (or where h[1] > 0), [h * w] (or, ``skip``, nothing) otherwise. The first-order reverse
# loop's gradient If pops two or one rows; its own gradient saves only the rows each iteration
# popped (ops/control_flow_ops._if_popped_tail: [T, 2, 3], linear in T), and the second-order
# loop appends their gradients through its If.
def _np_cond_grad(w, n, data_pred=False, skip=False):
    """d loss / dw of test_growing_loop_grad_of_grad._np_loss, backpropagated by hand."""
    c = np.array([1.0, 2.0, 3.0])
    hs, two = [np.ones(3)], []
    for i in range(n):
        hs.append(np.tanh(hs[-1] * w + 0.1))
        two.append(bool(hs[-1][1] > 0) if data_pred else i % 2 == 1)
    d_row = lambda r: 2.0 * r * c + np.cos(r)   # noqa: E731  (d loss / d row)
    gw, carry = np.zeros(3), np.zeros(3)
    for t in range(n, 0, -1):
        h = hs[t]
        gh = carry.copy()
        if two[t - 1]:
            gh += d_row(h) + 2.0 * h * d_row(h * h)
        elif not skip:
            gh += d_row(h * w) * w
            gw += d_row(h * w) * h
        da = gh * (1.0 - h * h)
        gw += da * hs[t - 1]
        carry = da * w
    return gw


def _cond_graph(data_pred, skip):
    g, n, w, x, loss, gw = _graph(data_pred=data_pred, skip=skip)
    with g.as_default():
        (ggw,) = tf.gradients(tf.reduce_sum(gw * gw), w)
        (hess,) = tf.hessians(loss, w)
    return g, n, w, gw, ggw, hess


CASES = [(False, False), (True, False), (True, True)]


@pytest.mark.parametrize("data_pred, skip", CASES)
def test_the_hand_derived_gradient_matches_finite_differences(data_pred, skip):
    for trips in (0, 1, 6):
        np.testing.assert_allclose(_np_cond_grad(W, trips, data_pred, skip),
                                   _fd(lambda v: _np_loss(v, trips, data_pred, skip), W), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("data_pred, skip", CASES)
def test_second_order_through_a_cond_popping_rows_compiles_once_and_is_right(data_pred, skip):
    g, n, w, gw, ggw, hess = _cond_graph(data_pred, skip)
    with tf1.Session(graph=g) as s:
        assert "FALLBACK" not in str(s.explain([ggw, hess], {n: 3, w: W}))
        before, kernels = tf.cache_info()["fallbacks"], _kernels()
        for trips in (0, 1, 50, 7):
            got_g, got_gg, got_h = s.run([gw, ggw, hess], {n: trips, w: W})
            want_h = np.stack([_fd(lambda v: _np_cond_grad(v, trips, data_pred, skip)[i], W) for i in range(3)])
            np.testing.assert_allclose(got_g, _np_cond_grad(W, trips, data_pred, skip), rtol=1e-12, atol=1e-14)
            np.testing.assert_allclose(got_h, want_h, rtol=1e-6, atol=1e-8)
            np.testing.assert_allclose(got_gg, 2.0 * want_h @ got_g, rtol=1e-6, atol=1e-8)
        assert tf.cache_info()["fallbacks"] == before
        assert _kernels() - kernels <= 1


@pytest.mark.parametrize("data_pred, skip", CASES)
def test_second_order_through_a_cond_popping_rows_matches_the_interpreter(data_pred, skip):
    g, n, w, gw, ggw, hess = _cond_graph(data_pred, skip)
    for trips in (0, 1, 9):
        compiled, interpreted = run_both(g, [ggw, hess], {n: trips, w: W})
        for a, b in zip(compiled, interpreted):
            check_close(a, b, np.float64)
    with tf1.Session(graph=g) as s:
        first = s.run([ggw, hess], {n: 40, w: W})
        for _ in range(2):
            assert all(a.tobytes() == b.tobytes() for a, b in zip(s.run([ggw, hess], {n: 40, w: W}), first))


def test_the_first_order_reverse_loop_saves_only_the_popped_rows():
    """Its gradient reads [T, 2, 3] of saved rows (the larger branch's count), not the
    reverse loop's whole variable per iteration (a ragged [T, None, 3]: quadratic in T)."""
    g, n, w, gw, ggw, hess = _cond_graph(False, False)
    rev = g.get_operation_by_name("gradients/while/While_grad/While_grad")
    a = rev.attrs
    assert a["saved_tails"] == (1,)
    saved = rev.outputs[a["n_vars"] + 1 + a["saved_at"] + 1]   # (the variable's saved value)
    assert saved.shape.as_list() == [None, None, 3]
    with tf1.Session(graph=g) as s:
        assert s.run(saved, {n: 5, w: W}).shape == (5, 2, 3)


@pytest.mark.parametrize("kind", ["concat", "ta"])
def test_a_non_finite_weight_gives_the_interpreters_nan_pattern(kind):
    """The batched pass holding values of run-time rows takes its dense form (no run-time
    cond between one-hot and dense rows: a cond cannot capture them), where NaN lands as
    in TF's per-row loop."""
    g, n, w, gw, ggw, hess = _rnn_graph(kind)
    for wv in (np.array([0.5, np.nan, 2.0]), np.array([np.inf, -1.0, 2.0])):
        compiled, interpreted = run_both(g, [hess], {n: 4, w: wv})
        check_close(compiled[0], interpreted[0], np.float64)   # (NaN and inf where the interpreter has them)
        assert np.isnan(compiled[0]).any()
