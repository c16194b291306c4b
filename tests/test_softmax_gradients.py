"""tf.nn.softmax / log_softmax carry TF's gradients (ops/softmax.py), not their composites'
chain rule: Softmax (g - sum(g * y)) * y, LogSoftmax g - sum(g) * exp(y) (TF's nn_grad.py).

Expected values: TF's formula evaluated step by step in numpy on the run's own forward
value (the interpreter's reductions are numpy's, so bit for bit there; the compiled
kernels sum rows in their own order), TF 2.21's results for bfloat16 cases where the
composite's gradient differed, and central finite differences for Hessians."""
import numpy as np
import pytest

import jitgrad as tf
from jitgrad import batched_gradients as bg

from _graph_testing import numeric_grad, session

RNG = np.random.default_rng(160153)
FNS = {"softmax": tf.nn.softmax, "log_softmax": tf.nn.log_softmax}


def _tf_formula(name, y, g, axis):
    """TF's gradient in y's dtype, op by op as nn_grad.py writes it."""
    if name == "softmax":
        return (g - np.sum(g * y, axis=axis, keepdims=True)) * y
    return g - np.sum(g, axis=axis, keepdims=True) * np.exp(y)


def _value_and_grad(name, x, g, axis):
    gr = tf.Graph()
    with gr.as_default():
        p = tf.compat.v1.placeholder(tf.as_dtype(x.dtype), x.shape)
        y = FNS[name](p, axis=axis)
        (dx,) = tf.gradients(y, p, grad_ys=tf.constant(g))
    return session(gr).run([y, dx], {p: x})


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("name", sorted(FNS))
@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_float32_gradient_is_tfs_formula(graph_mode, name, axis):
    x = RNG.uniform(-3, 3, (3, 4, 5)).astype(np.float32)
    g = RNG.uniform(-2, 2, x.shape).astype(np.float32)
    y, dx = _value_and_grad(name, x, g, axis)
    want = _tf_formula(name, y, g, axis)
    assert dx.dtype == np.float32
    if graph_mode == "interpret":
        np.testing.assert_array_equal(dx, want)
    else:   # another summation order of a row of <= 5 terms: a few ulp of the row's terms
        np.testing.assert_allclose(dx, want, rtol=0, atol=4e-7 * np.abs(g).max())


def test_eager_and_function_gradient_is_tfs_formula():
    x = RNG.uniform(-3, 3, (4, 6)).astype(np.float32)
    g = RNG.uniform(-2, 2, x.shape).astype(np.float32)
    for name, fn in FNS.items():
        xt = tf.constant(x)
        with tf.GradientTape() as t:
            t.watch(xt)
            y = fn(xt, axis=0)
        np.testing.assert_array_equal(t.gradient(y, xt, output_gradients=tf.constant(g)).numpy(),
                                      _tf_formula(name, y.numpy(), g, 0))

        @tf.function
        def f(v, fn=fn):
            with tf.GradientTape() as t:
                t.watch(v)
                y = fn(v)
            return y, t.gradient(y, v, output_gradients=tf.constant(g))
        y, dx = f(xt)
        np.testing.assert_allclose(dx.numpy(), _tf_formula(name, y.numpy(), g, -1), rtol=0, atol=4e-7 * 2)


# TF 2.21's tf.gradients of tf.nn.softmax in bfloat16 (bit for bit, run with benchenv): the
# composite's chain rule gave [-0.2451, 0.0623, 0.1836] and [0.0188, -0.0280, 0.0078] (tf_fuzz
# seed 160153 saw such an 8 ulp difference, README "Known differences").
BF16_CASES = [
    ([1.265625, 0.19628906, 1.921875], [-1.1796875, 0.21484375, -0.06542969],
     [-0.24707031, 0.06225586, 0.18457031]),
    ([0.6953125, -1.1875, 1.609375], [-1.1328125, -1.8671875, -1.1953125],
     [0.01928711, -0.02770996, 0.00534058]),
]


@pytest.mark.parametrize("x, g, want", BF16_CASES)
def test_bfloat16_gradient_is_tfs(graph_mode, x, g, want):
    bf16 = tf.bfloat16.as_numpy_dtype
    x, g = np.array([x], np.float32).astype(bf16), np.array([g], np.float32).astype(bf16)
    want = np.array([want], np.float32).astype(bf16).astype(np.float32)   # (the nearest bfloat16s)
    _, dx = _value_and_grad("softmax", x, g, -1)
    assert dx.dtype == bf16
    np.testing.assert_array_equal(dx.astype(np.float32), want)
    xt = tf.constant(x)
    with tf.GradientTape() as t:
        t.watch(xt)
        y = tf.nn.softmax(xt)
    np.testing.assert_array_equal(t.gradient(y, xt, output_gradients=tf.constant(g)).numpy().astype(np.float32),
                                  want)


@pytest.mark.parametrize("name", sorted(FNS))
def test_float16_gradient_keeps_its_dtype_and_value(graph_mode, name):
    x = RNG.uniform(-2, 2, (3, 5)).astype(np.float16)
    g = RNG.uniform(-1, 1, x.shape).astype(np.float16)
    y, dx = _value_and_grad(name, x, g, -1)
    assert dx.dtype == np.float16
    y64 = y.astype(np.float64)
    np.testing.assert_allclose(dx, _tf_formula(name, y64, g.astype(np.float64), -1), rtol=0, atol=4e-3)


def test_axis_not_last_is_the_transposed_last_axis(graph_mode):
    # TF computes softmax(x, axis=0) on the transpose's last axis: the same gradient
    x = RNG.uniform(-3, 3, (5, 3)).astype(np.float32)
    g = RNG.uniform(-2, 2, x.shape).astype(np.float32)
    for name in FNS:
        _, dx0 = _value_and_grad(name, x, g, 0)
        _, dxt = _value_and_grad(name, x.T.copy(), g.T.copy(), -1)
        np.testing.assert_allclose(dx0, dxt.T, rtol=0, atol=4e-7 * 2)


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("name", sorted(FNS))
@pytest.mark.parametrize("axis", [-1, 0])
def test_hessian_and_third_derivative_vs_finite_differences(graph_mode, name, axis):
    xv = RNG.uniform(-2, 2, (2, 3))
    wv = RNG.uniform(-1, 1, (2, 3))
    vv = RNG.uniform(-1, 1, (2, 3, 2, 3))
    gr = tf.Graph()
    with gr.as_default():
        x = tf.compat.v1.placeholder(tf.float64, xv.shape)
        loss = tf.reduce_sum(FNS[name](x, axis=axis) * tf.constant(wv))
        (grad,) = tf.gradients(loss, x)
        (h,) = tf.hessians(loss, x)
        hv = tf.reduce_sum(h * tf.constant(vv))
        (third,) = tf.gradients(hv, x)
        # the batched pass vectorises the softmax gradient's gradient: no per-row fallback
        stats = {}
        bg.batched_jacobian(grad, [x], _stats=stats)
        bg.batched_jacobian(grad, [x], structured=False, _stats=stats)
        assert not stats.get("per_row"), stats.get("per_row")
    sess = session(gr)
    hval, tval = sess.run([h, third], {x: xv})
    num_h = np.stack([numeric_grad(lambda a, i=i: sess.run(grad, {x: a}).ravel()[i], xv) for i in range(6)])
    np.testing.assert_allclose(hval.reshape(6, 6), num_h.reshape(6, 6), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(hval, np.swapaxes(hval.reshape(6, 6), 0, 1).reshape(hval.shape), atol=1e-14)
    np.testing.assert_allclose(tval, numeric_grad(lambda a: sess.run(hv, {x: a}), xv), rtol=1e-6, atol=1e-7)


def test_eager_second_derivative_matches_graph():
    xv = RNG.uniform(-2, 2, (2, 4))
    wv = RNG.uniform(-1, 1, (2, 4))
    for name, fn in FNS.items():
        x = tf.constant(xv)
        with tf.GradientTape() as outer:
            outer.watch(x)
            with tf.GradientTape() as inner:
                inner.watch(x)
                loss = tf.reduce_sum(fn(x, axis=0) * wv)
            d1 = inner.gradient(loss, x)
            s = tf.reduce_sum(d1 * wv)
        d2 = outer.gradient(s, x).numpy()
        gr = tf.Graph()
        with gr.as_default():
            p = tf.compat.v1.placeholder(tf.float64, xv.shape)
            (g1,) = tf.gradients(tf.reduce_sum(fn(p, axis=0) * wv), p)
            (g2,) = tf.gradients(tf.reduce_sum(g1 * wv), p)
        want = tf.compat.v1.Session(graph=gr, config=tf.compat.v1.ConfigProto(jitgrad_mode="interpret")).run(
            g2, {p: xv})
        np.testing.assert_array_equal(d2, want)
        np.testing.assert_allclose(d2, numeric_grad(
            lambda a: float(np.sum(_tf_formula(name, _np_fn(name, a, 0), wv, 0) * wv)), xv), rtol=1e-6, atol=1e-8)


def _np_fn(name, a, axis):
    s = a - a.max(axis, keepdims=True)
    ls = s - np.log(np.exp(s).sum(axis, keepdims=True))
    return np.exp(ls) if name == "softmax" else ls


def test_sparse_xent_with_masked_logits_is_finite(graph_mode):
    """A -inf logit of a class other than the label (a masked logit) leaves the loss finite:
    TF's kernel reads the label's class only.  The one-hot row times (lse - logits) gave
    0 * inf = NaN there.  Expected: log-sum-exp over the row minus the label's logit; the
    gradient softmax - onehot."""
    logits = np.array([[-np.inf, 0.0, 1.0], [2.0, -np.inf, -np.inf], [0.0, 0.0, -np.inf]], np.float32)
    labels = np.array([1, 0, 2], np.int32)
    with np.errstate(divide="ignore", invalid="ignore"):
        e = np.exp(logits.astype(np.float64) - logits.max(1, keepdims=True))
        want = np.log(e.sum(1)) + logits.max(1) - logits[np.arange(3), labels]
        want_grad = e / e.sum(1, keepdims=True) - np.eye(3)[labels]
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 3])
        lab = tf.compat.v1.placeholder(tf.int32, [None])
        loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=lab, logits=x)
        grad = tf.gradients(loss, x)[0]
    got, got_grad = session(g).run([loss, grad], {x: logits, lab: labels})
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert got[2] == np.inf                                  # the label's own logit is -inf: TF's inf
    np.testing.assert_allclose(got_grad, want_grad, rtol=1e-6, atol=1e-7)
