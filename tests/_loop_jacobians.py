"""Jacobians through a tf.while_loop in a tf.function, shared by the While batching rule's
tests (test_while_batching.py) and the per-row fallback's (test_hessian_loop_rows.py): the
same expected values, whichever path computes them.

The loop adds sin(b) T times: v = T sin(b), so d v_i / d b_k = delta_ik T cos(b_i).
"""
import numpy as np

import jitgrad as tf


def sin_loop(b, T, **kw):
    _, v = tf.while_loop(lambda i, v: i < T, lambda i, v: (i + 1, v + tf.sin(b)), [0, tf.zeros_like(b)], **kw)
    return v


def check_tape_jacobians(x):
    """tape.jacobian of the loop and of its reshape to [2, n / 2], without a fallback run."""
    n = len(x)

    @tf.function
    def jac(b, T):
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(b)
            v = sin_loop(b, T)
            v2 = tf.reshape(v, [2, n // 2])
        return tape.jacobian(v, b), tape.jacobian(v2, b)
    before = tf.cache_info()["fallbacks"]
    j, j2 = jac(tf.constant(x), tf.constant(5))
    np.testing.assert_allclose(j.numpy(), np.diag(5 * np.cos(x)), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(j2.numpy(), np.diag(5 * np.cos(x)).reshape(2, n // 2, n), rtol=1e-12, atol=1e-12)
    assert tf.cache_info()["fallbacks"] == before


def check_batch_jacobian(bb):
    """tape.batch_jacobian of the loop over examples ``bb`` ([E, n]), without a fallback run."""
    @tf.function
    def bj(b, T):
        with tf.GradientTape() as tape:
            tape.watch(b)
            v = sin_loop(b, T)
        return tape.batch_jacobian(v, b)
    before = tf.cache_info()["fallbacks"]
    got = bj(tf.constant(bb), tf.constant(4)).numpy()
    np.testing.assert_allclose(got, np.stack([np.diag(4 * np.cos(r)) for r in bb]), rtol=1e-12, atol=1e-12)
    assert tf.cache_info()["fallbacks"] == before
