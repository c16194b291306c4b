"""Composite nn/math functions added for TF users (logsumexp, sigmoid
cross-entropy, l2_loss, bias_add, log_sigmoid, silu, matvec): values against
independent numpy formulas and gradients against finite differences, in both
execution modes."""
import numpy as np
import pytest

import jitgrad as tf
from _graph_testing import check_op

pytestmark = pytest.mark.usefixtures("graph_mode")
RNG = np.random.default_rng(42)


def _x(*shape):
    return RNG.uniform(-3, 3, shape)


@pytest.mark.parametrize("axis,keepdims", [(None, False), (1, False), (0, True), ((0, 1), False)])
def test_reduce_logsumexp(axis, keepdims):
    x = _x(3, 4)
    m = np.max(x, axis=axis, keepdims=True)
    expected = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    if not keepdims:
        expected = np.squeeze(expected, axis=axis) if axis is not None else expected.reshape(())
    check_op(lambda t: tf.reduce_logsumexp(t, axis=axis, keepdims=keepdims), x, expected=expected,
             value_rtol=1e-12)


def test_reduce_logsumexp_is_stable_for_large_inputs():
    check_op(lambda t: tf.math.reduce_logsumexp(t), np.array([1000.0, 1000.0]),
             expected=np.float64(1000.0 + np.log(2.0)))


def test_sigmoid_cross_entropy_with_logits():
    x, z = _x(5), RNG.uniform(0, 1, 5)
    expected = -(z * np.log(1 / (1 + np.exp(-x))) + (1 - z) * np.log(1 - 1 / (1 + np.exp(-x))))
    check_op(lambda lo, la: tf.nn.sigmoid_cross_entropy_with_logits(labels=la, logits=lo), x, z,
             expected=expected, value_rtol=1e-12)


def test_l2_loss_bias_add_log_sigmoid_silu():
    x, b = _x(4, 3), _x(3)
    check_op(tf.nn.l2_loss, x, expected=np.sum(x * x) / 2)
    check_op(tf.nn.bias_add, x, b, expected=x + b)
    check_op(tf.math.log_sigmoid, x, expected=-np.log1p(np.exp(-x)), value_rtol=1e-12)
    check_op(tf.nn.silu, x, expected=x / (1 + np.exp(-x)), value_rtol=1e-12)


def test_matvec():
    a, v = _x(3, 4), _x(4)
    check_op(tf.linalg.matvec, a, v, expected=a @ v)
    check_op(lambda m, w: tf.linalg.matvec(m, w, transpose_a=True), a, _x(3).copy(), wrt=[0, 1],
             expected=None)


def test_bias_add_rejects_a_matrix_bias():
    with tf.Graph().as_default():
        with pytest.raises(ValueError):
            tf.nn.bias_add(tf.constant(np.ones((2, 3))), tf.constant(np.ones((2, 3))))
