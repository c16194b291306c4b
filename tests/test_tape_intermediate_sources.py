"""A tape inside tf.function / graph mode differentiates with respect to an intermediate
tensor (``y = x * x`` of a watched ``x``): TF has it on the tape, so the gradient is a value,
not None.  An intermediate computed from nothing watched, or before the tape started, stays
unconnected (None), as in TF."""
import numpy as np

import jitgrad as tf


def _eager_and_traced(fn, *args):
    return fn(*args), tf.function(fn)(*args)


def test_gradient_with_respect_to_an_intermediate():
    def f(x):
        with tf.GradientTape(persistent=True) as t:
            t.watch(x)
            y = x * x
            z = y * x
        return t.gradient(z, y), t.gradient(z, [x, y])

    x = np.array([1.0, 2.0], np.float32)
    for dz_dy, (dz_dx, dz_dy2) in _eager_and_traced(f, tf.constant(x)):
        np.testing.assert_allclose(dz_dy.numpy(), x)          # z = y * x: dz/dy = x
        np.testing.assert_allclose(dz_dy2.numpy(), x)
        np.testing.assert_allclose(dz_dx.numpy(), 3 * x ** 2)  # z = x**3


def test_intermediate_of_a_watched_variable():
    v = tf.Variable([1.5, -2.0])

    def f():
        with tf.GradientTape() as t:
            y = tf.sin(v)
            z = tf.reduce_sum(y * y * 2.0)
        return t.gradient(z, y)

    for g in _eager_and_traced(f):
        np.testing.assert_allclose(g.numpy(), 4.0 * np.sin([1.5, -2.0]), rtol=1e-6)


def test_jacobian_with_respect_to_an_intermediate():
    def f(x):
        with tf.GradientTape() as t:
            t.watch(x)
            y = x * 2.0
            z = y * y
        return t.jacobian(z, y)

    x = np.array([1.0, -3.0], np.float32)
    for j in _eager_and_traced(f, tf.constant(x)):
        np.testing.assert_allclose(j.numpy(), np.diag(2 * (2 * x)))


def test_intermediate_not_from_a_watched_tensor_is_unconnected():
    def f(x):
        with tf.GradientTape() as t:
            y = x * x            # x not watched: y is not on the tape
            z = y * 3.0
        return t.gradient(z, y)

    for g in _eager_and_traced(f, tf.constant(2.0)):
        assert g is None


def test_intermediate_made_before_the_tape_is_unconnected():
    def f(x):
        y = x * x
        with tf.GradientTape() as t:
            t.watch(x)
            z = y * 3.0 + x
        return t.gradient(z, y)

    for g in _eager_and_traced(f, tf.constant(2.0)):
        assert g is None


def test_intermediate_made_under_stop_recording_is_unconnected():
    def f(x):
        with tf.GradientTape() as t:
            t.watch(x)
            with t.stop_recording():
                y = x * x
            z = y * 3.0
        return t.gradient(z, y)

    for g in _eager_and_traced(f, tf.constant(2.0)):
        assert g is None


def test_graph_mode_gradient_with_respect_to_an_intermediate():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant([1.0, 2.0])
        with tf.GradientTape() as t:
            t.watch(x)
            y = tf.exp(x)
            z = tf.reduce_sum(y * y)
        dy = t.gradient(z, y)
        with tf.compat.v1.Session(graph=g) as s:
            np.testing.assert_allclose(s.run(dy), 2 * np.exp([1.0, 2.0]), rtol=1e-6)
