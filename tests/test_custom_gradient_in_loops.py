"""tf.custom_gradient inside a while_loop body / cond branch under plain tf.gradients.

The While gradient re-creates the body in its step (func_graph.replay); the custom
gradient's closure (the user's grad_fn) refers to the ORIGINAL body's tensors, which no graph
being built encloses ("Tensor ... is not from this graph"). TF (while_v2) runs such a
grad_fn on the forward body's intermediates; so do we, through the replay's copies.

Hand-derived: the body v -> exp(v) with the custom gradient dy * 2 exp(v) (read from the
closure) run twice from x gives v1 = exp(x), v2 = exp(v1) and d v2 / dx (custom) =
(2 v2)(2 v1) = 4 v1 v2; with the gradient dy * 3 v (the argument) it is (3 v1)(3 x) = 9 x v1."""
import numpy as np
import pytest

import jitgrad as tf

tf1 = tf.compat.v1
MODES = ("compiled", "interpret")
_X = np.array([0.5, -1.0, 0.25])


@tf.custom_gradient
def _exp_grad_from_result(v):
    e = tf.exp(v)

    def grad(dy):
        return dy * e * 2.0
    return e, grad


@tf.custom_gradient
def _exp_grad_from_argument(v):
    def grad(dy):
        return dy * v * 3.0
    return tf.exp(v), grad


def _run(g, fetch, feed, mode):
    with tf1.Session(graph=g, config=tf1.ConfigProto(jitgrad_mode=mode)) as s:
        return s.run(fetch, feed)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fn, want", [(_exp_grad_from_result, lambda x, v1, v2: 4 * v1 * v2),
                                      (_exp_grad_from_argument, lambda x, v1, v2: 9 * x * v1)])
def test_custom_gradient_in_while_body(fn, want, mode):
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float64, [3])
        out = tf.while_loop(lambda i, v: i < 2, lambda i, v: (i + 1, fn(v)), [0, x])[1]
        (gx,) = tf.gradients(tf.reduce_sum(out), x)
    ov, gv = _run(g, [out, gx], {x: _X}, mode)
    v1 = np.exp(_X)
    v2 = np.exp(v1)
    np.testing.assert_allclose(ov, v2, rtol=1e-14)
    np.testing.assert_allclose(gv, want(_X, v1, v2), rtol=1e-14)


@pytest.mark.parametrize("mode", MODES)
def test_custom_gradient_in_nested_loops_and_cond(mode):
    """The same body in an inner loop of one step inside a cond inside the outer loop."""
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float64, [3])
        p = tf1.placeholder(tf.bool, [])

        def body(i, v):
            inner = tf.while_loop(lambda j, u: j < 1, lambda j, u: (j + 1, _exp_grad_from_result(u)), [0, v])[1]
            return i + 1, tf.cond(p, lambda: inner, lambda: v * 2.0)
        out = tf.while_loop(lambda i, v: i < 2, body, [0, x])[1]
        (gx,) = tf.gradients(tf.reduce_sum(out), x)
    v1 = np.exp(_X)
    v2 = np.exp(v1)
    ov, gv = _run(g, [out, gx], {x: _X, p: True}, mode)
    np.testing.assert_allclose(ov, v2, rtol=1e-14)
    np.testing.assert_allclose(gv, 4 * v1 * v2, rtol=1e-14)
    ov, gv = _run(g, [out, gx], {x: _X, p: False}, mode)
    np.testing.assert_allclose(ov, 4 * _X, rtol=1e-14)
    np.testing.assert_allclose(gv, np.full(3, 4.0), rtol=1e-14)


@pytest.mark.parametrize("mode", MODES)
def test_hessian_through_custom_gradient_in_while_body(mode):
    """Body v -> exp(v / 2) with the custom gradient dy * 2 exp(v / 2), twice: v1 = exp(x / 2),
    v2 = exp(v1 / 2); the gradient is (v2)(v1) (each factor 2 e * 1/2); differentiating it,
    e2's own derivative reaches v1 through the custom gradient again (d v1 / dx = v1, as
    TF's), d e1 / dx = v1 / 2 through exp: H = diag(v1 v2 (1/2 + v1 / 2)) (TF's values)."""
    @tf.custom_gradient
    def half_exp(v):
        e = tf.exp(v * 0.5)

        def grad(dy):
            return dy * e
        return e, grad
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float64, [3])
        out = tf.while_loop(lambda i, v: i < 2, lambda i, v: (i + 1, half_exp(v)), [0, x])[1]
        h = tf.hessians(tf.reduce_sum(out), x)[0]
    v1 = np.exp(_X / 2)
    v2 = np.exp(v1 / 2)
    np.testing.assert_allclose(_run(g, h, {x: _X}, mode), np.diag(v1 * v2 * (0.5 + v1 / 2)), rtol=1e-13)
