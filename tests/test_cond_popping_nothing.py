"""A tf.cond in a loop whose branches both pass a run-time-rows loop variable through
(its gradient's If pops 0 rows in both branches): the second derivative through the
first-order reverse loop saves an empty tail per iteration ([T, 0, 3]), not the whole
variable (a ragged [T, None, 3], quadratic in T; ops/control_flow_ops._popped_tails).
Expected values: the recurrence by hand in numpy, forward-mode derivatives written out
(comments), the second derivative by central differences of that hand gradient;
interpreter and compiled alike, one kernel for every trip count."""
import numpy as np
import pytest

import jitgrad as tf
from test_differential import run_both

tf1 = tf.compat.v1
W = np.array([0.5, -0.3, 0.8])
X0 = np.full([2, 3], 0.5)


def _graph():
    g = tf.Graph()
    with g.as_default():
        n = tf1.placeholder(tf.int32, [])
        w = tf1.placeholder(tf.float64, [3])

        def body(i, h, x):
            h = tf.tanh(h * w + 0.1)
            x = tf.cond(tf.equal(i % 2, 1), lambda: x, lambda: x)
            return i + 1, h, x
        _, h, x = tf.while_loop(lambda i, h, x: i < n, body, [0, tf.ones([3], tf.float64), tf.constant(X0)],
                                shape_invariants=[tf.TensorShape([]), tf.TensorShape([3]),
                                                  tf.TensorShape([None, 3])])
        loss = tf.reduce_sum(x * x * w) + tf.reduce_sum(h * h)
        (gw,) = tf.gradients(loss, w)
        (ggw,) = tf.gradients(tf.reduce_sum(gw * gw), w)
    return g, n, w, gw, ggw


def _np_grad(w, trips):
    """loss = sum_rows x0^2 . w + sum h_T^2, h_{t+1} = tanh(h_t w + 0.1): d/dw = sum_rows x0^2 +
    2 h_T dh_T, dh_{t+1} = (1 - h_{t+1}^2) (dh_t w + h_t) (all elementwise)."""
    h, dh = np.ones(3), np.zeros(3)
    for _ in range(trips):
        nh = np.tanh(h * w + 0.1)
        dh = (1 - nh * nh) * (dh * w + h)
        h = nh
    return np.sum(X0 * X0, axis=0) + 2 * h * dh


def _np_grad_of_grad(w, trips, eps=1e-6):
    # d sum(gw^2) / dw = 2 gw * d gw / dw (each component depends on its own w only)
    d = np.array([(_np_grad(w + eps * e, trips) - _np_grad(w - eps * e, trips))[k] / (2 * eps)
                  for k, e in enumerate(np.eye(3))])
    return 2 * _np_grad(w, trips) * d


def test_the_reverse_loop_saves_an_empty_tail():
    g, n, w, gw, ggw = _graph()
    rev = g.get_operation_by_name("gradients/while/While_grad/While_grad")
    a = rev.attrs
    assert a["saved_tails"] == (1,)
    saved = rev.outputs[a["n_vars"] + 1 + a["saved_at"] + 1]   # (the variable's saved value)
    assert saved.shape.as_list() == [None, 0, 3]
    for mode in ("interpret", "compiled"):
        with tf1.Session(graph=g, config=tf1.ConfigProto(jitgrad_mode=mode)) as s:
            assert s.run(saved, {n: 5, w: W}).shape == (5, 0, 3)


@pytest.mark.parametrize("trips", [0, 1, 6])
def test_first_and_second_gradients(trips):
    g, n, w, gw, ggw = _graph()
    interp, compiled = run_both(g, [gw, ggw], {n: trips, w: W})
    for got in (interp, compiled):
        np.testing.assert_allclose(got[0], _np_grad(W, trips), rtol=1e-13)
        np.testing.assert_allclose(got[1], _np_grad_of_grad(W, trips), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(compiled[1], interp[1], rtol=1e-13)


def test_one_kernel_for_every_trip_count():
    g, n, w, gw, ggw = _graph()
    with tf1.Session(graph=g, config=tf1.ConfigProto(jitgrad_mode="compiled")) as s:
        s.run([gw, ggw], {n: 2, w: W})
        info = tf.cache_info()
        before = info["compiles"] + info["disk_hits"]
        for trips in (0, 9, 40):
            np.testing.assert_allclose(s.run([gw, ggw], {n: trips, w: W})[1], _np_grad_of_grad(W, trips),
                                       rtol=1e-6, atol=1e-9)
        info = tf.cache_info()
        assert info["compiles"] + info["disk_hits"] == before
