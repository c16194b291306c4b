"""tf.custom_gradient in eager, graph and function modes: the gradient is grad_fn's,
values by hand / numpy; variables; several inputs and outputs; higher order."""
import numpy as np
import pytest

import jitgrad as tf


@tf.custom_gradient
def log1pexp(x):
    e = tf.exp(x)

    def grad(upstream):
        return upstream * (1 - 1 / (1 + e))
    return tf.math.log(1 + e), grad


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


@tf.custom_gradient
def scaled_pair(x, y):
    # results (x*y, x+y); a deliberately "wrong" gradient so it cannot be the true one
    def grad(d_prod, d_sum):
        return 3.0 * d_prod + d_sum, -2.0 * d_prod
    return (x * y, x + y), grad


def test_eager_first_and_second_order():
    x = tf.constant([0.0, 2.0, -1.0])
    with tf.GradientTape() as t2:
        t2.watch(x)
        with tf.GradientTape() as t1:
            t1.watch(x)
            y = log1pexp(x)
        g = t1.gradient(y, x)
    gg = t2.gradient(g, x)
    xs = np.array([0.0, 2.0, -1.0])
    np.testing.assert_allclose(y.numpy(), np.log1p(np.exp(xs)), rtol=1e-6)
    np.testing.assert_allclose(g.numpy(), _sigmoid(xs), rtol=1e-6)
    np.testing.assert_allclose(gg.numpy(), _sigmoid(xs) * (1 - _sigmoid(xs)), rtol=1e-5)


def test_eager_stable_where_the_naive_gradient_is_nan():
    x = tf.constant(100.0)
    with tf.GradientTape() as t:
        t.watch(x)
        y = log1pexp(x)
    assert float(t.gradient(y, x)) == 1.0    # the naive e/(1+e) is inf/inf = nan


def test_several_inputs_and_outputs_all_modes(graph_mode):
    xv, yv = np.float32(2.0), np.float32(5.0)
    # d/dx of (2*prod + sum) through grad_fn: 3*2 + 1 = 7; d/dy: -2*2 = -4
    expect = [7.0, -4.0]

    x, y = tf.constant(xv), tf.constant(yv)
    with tf.GradientTape() as t:
        t.watch([x, y])
        p, s = scaled_pair(x, y)
        loss = 2.0 * p + s
    assert [float(g) for g in t.gradient(loss, [x, y])] == expect
    assert (float(p), float(s)) == (10.0, 7.0)

    @tf.function
    def fn(x, y):
        with tf.GradientTape() as t:
            t.watch([x, y])
            p, s = scaled_pair(x, y)
            loss = 2.0 * p + s
        return t.gradient(loss, [x, y])
    assert [float(g) for g in fn(x, y)] == expect

    g = tf.Graph()
    with g.as_default():
        gx, gy = tf.constant(xv), tf.constant(yv)
        p, s = scaled_pair(gx, gy)
        grads = tf.gradients(2.0 * p + s, [gx, gy])
        with tf.compat.v1.Session() as sess:
            assert [float(v) for v in sess.run(grads)] == expect
            assert sess.run([p, s]) == [10.0, 7.0]


def test_second_order_in_graph_and_function(graph_mode):
    xs = np.array([0.5, -2.0], np.float32)

    @tf.function
    def fn(x):
        y = log1pexp(x)
        g = tf.gradients(y, x)[0]
        return y, g, tf.gradients(g, x)[0]

    for y, g, gg in [fn(tf.constant(xs))]:
        np.testing.assert_allclose(g.numpy(), _sigmoid(xs.astype(np.float64)), rtol=1e-6)
        np.testing.assert_allclose(gg.numpy(), _sigmoid(xs) * (1 - _sigmoid(xs)), rtol=1e-5)
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2])
        y = log1pexp(x)
        g = tf.gradients(y, x)[0]
        gg = tf.gradients(g, x)[0]
        with tf.compat.v1.Session() as sess:
            out_g, out_gg = sess.run([g, gg], {x: xs})
    np.testing.assert_allclose(out_g, _sigmoid(xs.astype(np.float64)), rtol=1e-6)
    np.testing.assert_allclose(out_gg, _sigmoid(xs) * (1 - _sigmoid(xs)), rtol=1e-5)


def _linear_with_variable(v):
    @tf.custom_gradient
    def f(x):
        def grad(dy, variables=None):
            assert len(variables) == 1 and variables[0] is v
            return dy * 10.0, [dy * 100.0 * x]
        return x * v, grad
    return f


def test_variables_eager_and_function(graph_mode):
    v = tf.Variable(3.0)
    f = _linear_with_variable(v)
    x = tf.constant(2.0)
    with tf.GradientTape() as t:
        t.watch(x)
        y = f(x)
    assert float(y) == 6.0
    assert [float(g) for g in t.gradient(y, [x, v])] == [10.0, 200.0]

    @tf.function
    def fn(x):
        with tf.GradientTape() as t:
            t.watch(x)
            y = f(x)
        return t.gradient(y, [x, v])
    assert [float(g) for g in fn(x)] == [10.0, 200.0]


def test_variables_in_a_graph(graph_mode):
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable(3.0)
        f = _linear_with_variable(v)
        x = tf.constant(2.0)
        grads = tf.gradients(f(x), [x, v])
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            assert [float(r) for r in sess.run(grads)] == [10.0, 200.0]


def test_errors_as_tf():
    v = tf.Variable(1.0)

    @tf.custom_gradient
    def no_variables_kw(x):
        return x * v, lambda dy: dy
    with pytest.raises(TypeError, match="must accept keyword argument 'variables'"):
        no_variables_kw(tf.constant(1.0))

    @tf.custom_gradient
    def too_many(x):
        return x * 2.0, lambda dy: (dy, dy)
    x = tf.constant(1.0)
    with tf.GradientTape() as t:
        t.watch(x)
        y = too_many(x)
    with pytest.raises(ValueError, match="expected to return 1 gradients, but returned 2"):
        t.gradient(y, x)

    g = tf.Graph()
    with g.as_default():
        @tf.custom_gradient
        def kw(x, scale=1.0):
            return x * scale, lambda dy: dy
        with pytest.raises(ValueError, match="keywords arguments only when eager"):
            kw(tf.constant(1.0), scale=2.0)


def test_gradient_clipping_idiom_eager():
    @tf.custom_gradient
    def clip_gradient(x):
        def grad(dy):
            return tf.clip_by_norm(dy, 1.0)
        return tf.identity(x), grad

    x = tf.constant([3.0, 4.0])
    with tf.GradientTape() as t:
        t.watch(x)
        y = tf.reduce_sum(clip_gradient(x) * tf.constant([6.0, 8.0]))
    np.testing.assert_allclose(t.gradient(y, x).numpy(), [0.6, 0.8], rtol=1e-6)
