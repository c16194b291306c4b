"""tf.recompute_grad: same values and gradients as calling f directly (TF recomputes the
forward pass in the backward one; the derivative is f's own), eagerly, in tf.function, in
graph mode and inside a while loop; variables f reads get their gradient too."""
import numpy as np

import jitgrad as tf


def _grad(f, x, variables=()):
    with tf.GradientTape() as t:
        t.watch(x)
        y = tf.reduce_sum(f(x))
    return [y] + t.gradient(y, [x] + list(variables))


def test_gradient_is_f_s_own():
    f = tf.recompute_grad(lambda a: tf.sin(a) * a)
    x = np.array([1.0, 2.0, 3.0])
    run = lambda: _grad(f, tf.constant(x))
    for y, g in (run(), tf.function(run)()):
        np.testing.assert_allclose(y.numpy(), np.sum(np.sin(x) * x), rtol=1e-6)
        np.testing.assert_allclose(g.numpy(), np.cos(x) * x + np.sin(x), rtol=1e-5)


def test_variable_read_by_f_gets_its_gradient():
    v = tf.Variable(2.0)
    f = tf.recompute_grad(lambda a: tf.sin(a) * v)
    x = np.array([1.0, 2.0, 3.0], np.float32)
    run = lambda: _grad(f, tf.constant(x), [v])
    for y, gx, gv in (run(), tf.function(run)()):
        np.testing.assert_allclose(y.numpy(), 2.0 * np.sum(np.sin(x)), rtol=1e-6)
        np.testing.assert_allclose(gx.numpy(), 2.0 * np.cos(x), rtol=1e-5)
        np.testing.assert_allclose(gv.numpy(), np.sum(np.sin(x)), rtol=1e-6)


def test_inside_a_while_loop():
    cube = tf.recompute_grad(lambda a: a ** 3)

    def run():
        x = tf.constant(2.0)
        with tf.GradientTape() as t:
            t.watch(x)
            y = tf.while_loop(lambda i, a: i < 2, lambda i, a: (i + 1, cube(a)), (0, x))[1]
        return y, t.gradient(y, x)

    # y = (x**3)**3 = x**9: 512 and 9 * x**8 = 2304 at x = 2 (TF 2.21 gives the same)
    for y, g in (run(), tf.function(run)()):
        assert y.numpy() == 512.0
        assert g.numpy() == 2304.0


def test_graph_mode_and_an_unused_argument():
    f = tf.recompute_grad(lambda a, b: a * a)
    g = tf.Graph()
    with g.as_default():
        a, b = tf.constant([1.0, -3.0]), tf.constant(5.0)
        da, db = tf.gradients(tf.reduce_sum(f(a, b)), [a, b])
        with tf.compat.v1.Session(graph=g) as s:
            da, db = s.run([da, db])
    np.testing.assert_allclose(da, [2.0, -6.0])
    assert db == 0.0          # unconnected argument: zeros, as TF's recompute_grad
