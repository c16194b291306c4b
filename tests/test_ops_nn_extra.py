"""Composite nn/math functions added for TF users (logsumexp, sigmoid
cross-entropy, l2_loss, bias_add, log_sigmoid, silu, matvec): values against
independent numpy formulas and gradients against finite differences, in both
execution modes."""
import numpy as np
import pytest

import jitgrad as tf
from _graph_testing import check_op, session

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


def _run(fn, *inputs):
    g = tf.Graph()
    with g.as_default():
        xs = [tf.compat.v1.placeholder(tf.as_dtype(a.dtype), a.shape) for a in inputs]
        ys = fn(*xs)
    return session(g).run(ys, dict(zip(xs, inputs)))


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_reduce_logsumexp_of_infinite_rows(dt):
    # TF 2.21: reduce_logsumexp([[-inf]*3, [inf, 2, 3]], axis=1) = [-inf, inf]: a non-finite
    # row max shifts by 0 (where(is_finite(max), max, 0)) instead of giving inf - inf = NaN.
    # Gradients as TF's (the same construction): all -inf row -> 0 * inf = NaN everywhere;
    # row holding +inf -> [nan, 0, 0] (exp(inf) * (1 / inf)); -inf entries of a finite row -> 0.
    inf, nan = np.inf, np.nan
    x = np.array([[-inf, -inf, -inf], [inf, 2, 3], [1, 2, 3], [-inf, 0, 1], [inf, inf, 1]], dt)
    lse = np.log(np.sum(np.exp(x[2:4] - 3), 1)) + 3   # finite rows
    sm = np.exp(x[2:4] - lse[:, None])
    want_y = np.array([-inf, inf, lse[0], lse[1], inf], dt)
    want_g = np.array([[nan] * 3, [nan, 0, 0], sm[0], sm[1], [nan, nan, 0]], dt)

    def f(t):
        y = tf.reduce_logsumexp(t, axis=1)
        return [y, tf.gradients(y, t)[0], tf.reduce_logsumexp(t[:1]), tf.reduce_logsumexp(t[1:2], 1, keepdims=True)]
    y, gx, y_all, y_keep = _run(f, x)
    tol = dict(rtol=1e-6 if dt == np.float32 else 1e-12)
    np.testing.assert_allclose(y, want_y, **tol)
    np.testing.assert_allclose(gx, want_g, **tol)
    assert y_all == -inf and y_keep.shape == (1, 1) and y_keep[0, 0] == inf
    np.testing.assert_allclose(tf.reduce_logsumexp(tf.constant(x), axis=1).numpy(), want_y, **tol)   # eager


def test_sigmoid_cross_entropy_gradient_at_zero_logits():
    # TF 2.21: logits [0, 0, -0], labels [0, .3, 1] -> d(sum loss)/dlogits = [0.5, 0.2, -0.5]:
    # TF selects with cond = logits >= 0 (true for -0 too), so the gradient at 0 is
    # 1 - z - sigmoid(0) = sigmoid(0) - z, the derivative of the loss; relu/abs would give -z.
    x = np.array([0.0, 0.0, -0.0, 1.5, -2.0])
    z = np.array([0.0, 0.3, 1.0, 0.5, 0.2])
    gx, gz = _run(lambda lo, la: tf.gradients(tf.reduce_sum(
        tf.nn.sigmoid_cross_entropy_with_logits(labels=la, logits=lo)), [lo, la]), x, z)
    np.testing.assert_allclose(gx, 1 / (1 + np.exp(-x)) - z, rtol=1e-12)
    np.testing.assert_allclose(gx[:3], [0.5, 0.2, -0.5], rtol=1e-12)
    np.testing.assert_array_equal(gz, -x)


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


def test_silu_gradient_is_tfs_custom_gradient(graph_mode):
    # TF's nn_impl.swish: dy * s * (1 + beta x (1 - s)), s = sigmoid(beta x); d/dbeta the sum of
    # dy x^2 s (1 - s). At x = -1000, s = 0: 0 * (1 - 1000) = -0. (the product rule gave +0.)
    from _graph_testing import run_graph
    mode = graph_mode
    x = np.array([-1000.0, -1.0, -0.0, 0.5, 2.0])
    dy = np.array([1.0, 2.0, 3.0, 4.0, 5.0])

    def build(p, g):
        b = tf.constant(1.5, tf.float64)
        y = tf.nn.silu(p, b)
        return [y, *tf.gradients(y, [p, b], g), tf.gradients(tf.nn.silu(p), p, g)[0]]

    y, gx, gb, g1 = run_graph(build, [x, dy], mode)
    for beta, got in ((1.5, gx), (1.0, g1)):
        with np.errstate(over="ignore"):
            s = 1 / (1 + np.exp(-beta * x))
        np.testing.assert_allclose(got, dy * s * (1 + beta * x * (1 - s)), rtol=1e-14)
    with np.errstate(over="ignore"):
        s = 1 / (1 + np.exp(-1.5 * x))
    np.testing.assert_allclose(y, x * s, rtol=1e-14)
    np.testing.assert_allclose(gb, np.sum(dy * x * x * s * (1 - s)), rtol=1e-13)
    assert gx[0] == 0 and np.signbit(gx[0]) and np.signbit(g1[0])


def test_softmax_xent_broadcasts_labels_to_the_logits(graph_mode):
    # TF 2.21's kernel takes [n] or [1, n] labels for [b, n] logits: the loss of each row
    # sum(labels * (logsumexp(row) - row)); TF gives [0.513262, 0.526928] here
    from _graph_testing import run_graph
    logits = np.array([[1.0, 2.0], [3.0, 5.0]])
    for labels in (np.array([[0.2, 0.8]]), np.array([0.2, 0.8])):
        (got,) = run_graph(lambda a, b: [tf.nn.softmax_cross_entropy_with_logits(labels=a, logits=b)],
                           [labels, logits], graph_mode)
        lse = np.log(np.exp(logits).sum(axis=1, keepdims=True))
        np.testing.assert_allclose(got, (np.broadcast_to(labels, logits.shape) * (lse - logits)).sum(axis=1),
                                   rtol=1e-14)
