"""The typical RNN of issue 12: h_t = tanh(W h_{t-1} + U x_t) over the rows of a fed
sequence, its states stacked in a ``TensorArray(dynamic_size=True)`` written inside
tf.while_loop, and differentiated (first and second order). Expected values are the
recurrence and its backpropagation through time written again in numpy; second
derivatives are central differences of that numpy gradient.

Every write is at the loop counter, so it is an append and the array's loop variable
compiles as a growing buffer: the states alone are a compiled run. What reads them
after the loop has a leading dim known only at run time: the loss and its gradient
compile (codegen/lower_rows.py; the reverse loop pops rows, passes/growing_vars.py);
the second order does not: a Session in compiled mode runs it in the interpreter and
``explain`` says why. These tests pin the values in every mode and that reason."""
import numpy as np
import pytest

import jitgrad as tf
from test_differential import check_close, run_both

tf1 = tf.compat.v1
RNG = np.random.default_rng(12)
W0 = RNG.normal(size=(3, 3)) * 0.6
U0 = RNG.normal(size=(3, 2)) * 0.6
C = np.array([1.0, -0.5, 2.0])
V = RNG.normal(size=(3, 3))   # the direction of the Hessian-vector product


def _np_states(w, u, xs):
    h, out = np.zeros(3), []
    for x in xs:
        h = np.tanh(w @ h + u @ x)
        out.append(h)
    return np.array(out).reshape(len(xs), 3)


def _np_loss(w, u, xs):
    return float(np.sum(_np_states(w, u, xs) ** 2 * C))


def _np_grads(w, u, xs, final_only=False):
    """Backpropagation through time, by hand; final_only: of the loss on the last state alone."""
    hs = _np_states(w, u, xs)
    gw, gu, gh = np.zeros_like(w), np.zeros_like(u), np.zeros(3)
    for t in reversed(range(len(xs))):
        if t == len(xs) - 1 or not final_only:
            gh = gh + 2.0 * C * hs[t]
        ga = gh * (1.0 - hs[t] ** 2)
        gw += np.outer(ga, hs[t - 1] if t else np.zeros(3))
        gu += np.outer(ga, xs[t])
        gh = w.T @ ga
    return gw, gu


def _np_hvp(w, u, xs, final_only=False, eps=1e-6):
    """d/dW of sum(dloss/dW * V), by central differences of the hand-derived gradient."""
    out = np.zeros_like(w)
    for k in range(w.size):
        d = np.zeros_like(w)
        d.flat[k] = eps
        out.flat[k] = (np.sum(_np_grads(w + d, u, xs, final_only)[0] * V) -
                       np.sum(_np_grads(w - d, u, xs, final_only)[0] * V)) / (2 * eps)
    return out


def _rnn(w, u, xs, n=None):
    n = tf.shape(xs)[0] if n is None else n
    ta = tf.TensorArray(tf.float64, size=0, dynamic_size=True)

    def body(i, h, ta):
        h = tf.tanh(tf.linalg.matvec(w, h) + tf.linalg.matvec(u, xs[i]))
        return i + 1, h, ta.write(i, h)
    _, h, ta = tf.while_loop(lambda i, h, ta: i < n, body, [0, tf.zeros([3], tf.float64), ta])
    states = ta.stack()
    return states, tf.reduce_sum(states * states * C), tf.reduce_sum(h * h * C)


def _graph():
    g = tf.Graph()
    with g.as_default():
        xs = tf1.placeholder(tf.float64, [None, 2])
        w = tf1.placeholder(tf.float64, [3, 3])
        u = tf1.placeholder(tf.float64, [3, 2])
        states, loss, _ = _rnn(w, u, xs)
        gw, gu = tf.gradients(loss, [w, u])
        (hvp,) = tf.gradients(tf.reduce_sum(gw * V), w)
    return g, (xs, w, u), [states, loss, gw, gu, hvp]


def _check(got, xs):
    states, loss, gw, gu, hvp = got
    assert states.shape == (len(xs), 3)
    np.testing.assert_allclose(states, _np_states(W0, U0, xs), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(loss, _np_loss(W0, U0, xs), rtol=1e-12)
    want_w, want_u = _np_grads(W0, U0, xs)
    np.testing.assert_allclose(gw, want_w, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(gu, want_u, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(hvp, _np_hvp(W0, U0, xs), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("length", [0, 1, 7])
def test_graph_mode_values_first_and_second_gradients_in_both_modes(length):
    g, (xs, w, u), fetches = _graph()
    seq = RNG.normal(size=(length, 2))
    feed = {xs: seq, w: W0, u: U0}
    runs = {}
    for mode in ("interpret", "compiled"):
        with tf1.Session(graph=g, config=tf1.ConfigProto(jitgrad_mode=mode)) as s:
            runs[mode] = s.run(fetches, feed)
    for got in runs.values():
        _check(got, seq)
    for a, b in zip(runs["interpret"], runs["compiled"]):   # (the second order compiles too: a few ulp)
        check_close(np.asarray(a), np.asarray(b), np.float64)


def test_states_alone_compile_and_match_the_interpreter():
    g, (xs, w, u), fetches = _graph()
    for length in (0, 6):
        seq = RNG.normal(size=(length, 2))
        compiled, interpreted = run_both(g, [fetches[0]], {xs: seq, w: W0, u: U0})   # (asserts no fallback)
        check_close(interpreted[0], compiled[0], np.float64)   # (compiled tanh: a few ulp)
        np.testing.assert_allclose(compiled[0], _np_states(W0, U0, seq), rtol=1e-12, atol=1e-15)


def test_loss_on_the_last_state_compiles_with_its_gradients_while_the_states_grow():
    """The loss reads the final state only: the growing array gets no gradient, so the
    reverse loop does not carry it and the whole run (states, loss, first and second
    gradients) compiles, one kernel for any fed trip count."""
    g = tf.Graph()
    with g.as_default():
        xs = tf1.placeholder(tf.float64, [8, 2])
        n = tf1.placeholder(tf.int32, [])
        w = tf1.placeholder(tf.float64, [3, 3])
        u = tf1.placeholder(tf.float64, [3, 2])
        states, _, loss = _rnn(w, u, xs, n)
        gw, gu = tf.gradients(loss, [w, u])
        (hvp,) = tf.gradients(tf.reduce_sum(gw * V), w)
    seq = RNG.normal(size=(8, 2))
    kernels = []
    for length in (1, 6, 8):
        before = tf.cache_info()
        compiled, interpreted = run_both(g, [states, loss, gw, gu, hvp], {xs: seq, n: length, w: W0, u: U0})
        after = tf.cache_info()
        kernels.append(after["compiles"] + after["disk_hits"] - before["compiles"] - before["disk_hits"])
        for a, b in zip(interpreted, compiled):
            check_close(a, b, np.float64)
        states_v, loss_v, gw_v, gu_v, hvp_v = compiled
        np.testing.assert_allclose(states_v, _np_states(W0, U0, seq[:length]), rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(loss_v, np.sum(states_v[-1] ** 2 * C), rtol=1e-12)
        want_w, want_u = _np_grads(W0, U0, seq[:length], final_only=True)
        np.testing.assert_allclose(gw_v, want_w, rtol=1e-10, atol=1e-13)
        np.testing.assert_allclose(gu_v, want_u, rtol=1e-10, atol=1e-13)
        np.testing.assert_allclose(hvp_v, _np_hvp(W0, U0, seq[:length], final_only=True), rtol=1e-5, atol=1e-7)
    assert kernels[1:] == [0, 0]   # (the first run compiled it or found it on disk)


def test_loss_gradients_and_the_second_order_compile():
    """The loss reads the stack of run-time rows (codegen/lower_rows.py) and the gradient's
    reverse loop pops its rows (passes/growing_vars.popped_vars): both compile. The
    Hessian-vector product differentiates that reverse loop, which saves only the rows
    each iteration pops (ops/control_flow_ops._popped_tails): it compiles too."""
    g, (xs, w, u), fetches = _graph()
    feed = {xs: RNG.normal(size=(4, 2)), w: W0, u: U0}
    with tf1.Session(graph=g) as s:
        assert "FALLBACK" not in str(s.explain(fetches[:4], feed))
        assert "FALLBACK" not in str(s.explain(fetches[4], feed))


def test_eager_tape_and_function_agree():
    seq = RNG.normal(size=(5, 2))
    w, u = tf.constant(W0), tf.constant(U0)
    with tf.GradientTape() as tape:
        tape.watch([w, u])
        states, loss, _ = _rnn(w, u, tf.constant(seq))
    gw, gu = tape.gradient(loss, [w, u])
    np.testing.assert_allclose(states.numpy(), _np_states(W0, U0, seq), rtol=1e-12)
    want_w, want_u = _np_grads(W0, U0, seq)
    np.testing.assert_allclose(gw.numpy(), want_w, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(gu.numpy(), want_u, rtol=1e-10, atol=1e-13)

    @tf.function
    def f(w, u, xs):
        with tf.GradientTape() as t:
            t.watch(w)
            _, loss, _ = _rnn(w, u, xs)
        return loss, t.gradient(loss, w)
    for length in (2, 6):
        seq = RNG.normal(size=(length, 2))
        loss, gw = f(w, u, tf.constant(seq))
        np.testing.assert_allclose(loss.numpy(), _np_loss(W0, U0, seq), rtol=1e-12)
        np.testing.assert_allclose(gw.numpy(), _np_grads(W0, U0, seq)[0], rtol=1e-10, atol=1e-13)
