"""A tape inside tf.function / graph mode differentiates only through the ops it recorded,
as TF's tape does: a target computed after the ``with`` block, or from an intermediate made
before the tape started, contributes nothing through those ops (before: tf.gradients saw
the whole graph and counted them — 36 where TF gives 12)."""
import numpy as np

import jitgrad as tf


def _eager_and_traced(fn, *args):
    return fn(*args), tf.function(fn)(*args)


def test_target_computed_after_the_tape_adds_nothing():
    def f(x):
        with tf.GradientTape() as t:
            t.watch(x)
            _, y = tf.while_loop(lambda i, a: i < 2, lambda i, a: (i + 1, a * x), (0, x))
        return t.gradient([y, y * 2.0], x)

    # only y = x**3 is on the tape: 3 * x**2 = 12 at x = 2 (TF 2.21: 12 eagerly and traced)
    for g in _eager_and_traced(f, tf.constant(2.0)):
        assert g.numpy() == 12.0


def test_only_target_computed_after_the_tape_is_unconnected():
    def f(x):
        with tf.GradientTape() as t:
            t.watch(x)
        return t.gradient(x * 3.0, x)

    for g in _eager_and_traced(f, tf.constant(2.0)):
        assert g is None


def test_intermediate_made_before_the_tape_is_a_constant():
    def f(x):
        z = x * x                  # before the tape: not recorded
        with tf.GradientTape() as t:
            t.watch(x)
            y = z * x
        return t.gradient(y, x)

    # dy/dx through the recorded product only: z = x**2 = 9 at x = 3
    for g in _eager_and_traced(f, tf.constant(3.0)):
        assert g.numpy() == 9.0


def test_stop_recording_still_cuts_the_gradient():
    def f(x):
        with tf.GradientTape() as t:
            t.watch(x)
            with t.stop_recording():
                z = x * x
            y = z * x + x
        return t.gradient(y, x)

    for g in _eager_and_traced(f, tf.constant(3.0)):
        assert g.numpy() == 10.0          # z + 1 with z = 9


def test_graph_mode_tape_ignores_ops_after_it():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant([1.0, 2.0])
        with tf.GradientTape(persistent=True) as t:
            t.watch(x)
            y = tf.reduce_sum(x * x)
        # the sum is made after the tape: not on it, so no gradient (TF 2.21: None too)
        assert t.gradient(y + tf.reduce_sum(x) * 5.0, x) is None
        dy = t.gradient([y, tf.reduce_sum(x) * 5.0], x)
        with tf.compat.v1.Session(graph=g) as s:
            np.testing.assert_allclose(s.run(dy), [2.0, 4.0])


def test_jacobian_of_a_target_computed_after_the_tape_is_none():
    def f(x):
        with tf.GradientTape(persistent=True) as t:
            t.watch(x)
            y = x * x
        return t.jacobian(y * 2.0, x), t.jacobian(y, x)

    # TF 2.21: None for the unrecorded target, diag(2x) for the recorded one
    for unrecorded, recorded in _eager_and_traced(f, tf.constant([1.0, 2.0])):
        assert unrecorded is None
        np.testing.assert_allclose(recorded.numpy(), [[2.0, 0.0], [0.0, 4.0]])
