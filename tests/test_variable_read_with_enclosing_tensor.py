"""An eager variable used in a tf.cond branch together with a tensor of the enclosing loop
body (``e * v``, ``e`` made in the body) inside tf.function: read once, through the branch's
own read, so the variable's gradient is counted once (it was doubled: 2 where TF gives 1)."""
import numpy as np

import jitgrad as tf


def _grad_in_function(loss, v):
    @tf.function
    def f():
        with tf.GradientTape() as t:
            y = loss()
        return y, t.gradient(y, v), tf.gradients(loss(), v)[0]
    return f()


def test_cond_in_while_body_with_a_body_tensor():
    v = tf.Variable(2.0)

    def body(i, s):
        e = tf.constant(-1.0)
        return i + 1, s + tf.cond(e > 0, lambda: e * v, lambda: v * 1.0)

    y, g_tape, g_graph = _grad_in_function(lambda: tf.while_loop(lambda i, s: i < 1, body, (0, 0.0))[1], v)
    assert y.numpy() == 2.0
    assert g_tape.numpy() == 1.0 and g_graph.numpy() == 1.0     # y = v (the false branch)


def test_map_fn_of_a_cond_reading_a_variable():
    v = tf.Variable(2.0)
    w = np.array([1.0, -1.0], np.float32)
    loss = lambda: tf.reduce_sum(tf.map_fn(lambda e: tf.cond(e > 0, lambda: e * v, lambda: -e * v * v),
                                           tf.constant(w)))
    y, g_tape, g_graph = _grad_in_function(loss, v)
    # y = 1 * v + 1 * v**2 = 6; dy/dv = 1 + 2 v = 5 (TF 2.21: 5)
    assert y.numpy() == 6.0
    assert g_tape.numpy() == 5.0 and g_graph.numpy() == 5.0


def test_scan_over_two_iterations():
    v = tf.Variable(3.0)
    loss = lambda: tf.reduce_sum(tf.scan(lambda a, e: tf.cond(e > 0, lambda: e * v, lambda: v * v),
                                         tf.constant([2.0, -1.0]), initializer=0.0))
    y, g_tape, g_graph = _grad_in_function(loss, v)
    assert y.numpy() == 2.0 * 3.0 + 9.0
    assert g_tape.numpy() == 2.0 + 6.0 and g_graph.numpy() == 8.0
