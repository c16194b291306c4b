"""Third derivatives: tf.gradients of tf.hessians (the batched pass's output differentiated),
and a GradientTape jacobian over a tape jacobian inside jitgrad.function.

The batched pass feeds a batched cotangent ([B, n]) and an unbatched forward value ([n]) to
gradient ops such as SqrtGrad / RsqrtGrad / ReciprocalGrad / SigmoidGrad / EluGrad, which
broadcast; their own gradients (TF's _SqrtGradGrad & co.) must sum back to each input's
shape, or differentiating the Hessian fails ("Incompatible shapes ... SqrtGrad").

Expected values: for loss = sum(f(x)) the Hessian is diag(f''(x)), so
d/dx sum(H * H) = 2 f''(x) f'''(x) (hand-derived f'' and f''' below, checked against
central differences of f''); through a cond the taken branch's, through a loop of T steps
adding f(x) T times those of T f."""
import numpy as np
import pytest

import jitgrad as tf

tf1 = tf.compat.v1
MODES = ("compiled", "interpret")

# f, f'', f''' (numpy), on x in (0.2, 2)
_FUNCS = {
    "sqrt": (tf.sqrt, lambda x: -0.25 * x ** -1.5, lambda x: 0.375 * x ** -2.5),
    "rsqrt": (tf.math.rsqrt, lambda x: 0.75 * x ** -2.5, lambda x: -1.875 * x ** -3.5),
    "reciprocal": (tf.math.reciprocal, lambda x: 2 * x ** -3, lambda x: -6 * x ** -4),
    "sigmoid": (tf.sigmoid, lambda x: _s(x) * (1 - _s(x)) * (1 - 2 * _s(x)),
                lambda x: _s(x) * (1 - _s(x)) * (1 - 6 * _s(x) + 6 * _s(x) ** 2)),
    "elu_neg": (lambda x: tf.nn.elu(-x), lambda x: np.exp(-x), lambda x: -np.exp(-x)),
}
_X = np.array([0.3, 0.7, 1.1, 1.9])


def _s(x):
    return 1 / (1 + np.exp(-x))


def _run(g, fetch, feed, mode):
    with tf1.Session(graph=g, config=tf1.ConfigProto(jitgrad_mode=mode)) as s:
        return s.run(fetch, feed)


def _third(make_loss, n, feed_extra=None):
    """(graph, x, Hessian, d/dx sum(H * H)) for loss = make_loss(x, k) (k: a fed int32)."""
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float64, [n])
        k = tf1.placeholder(tf.int32, [])
        h = tf.hessians(make_loss(x, k), x)[0]
        t = tf.gradients(tf.reduce_sum(h * h), x)[0]
    return g, x, k, h, t


@pytest.mark.parametrize("name", sorted(_FUNCS))
def test_hand_derivatives_match_finite_differences(name):
    _, f2, f3 = _FUNCS[name]
    eps = 1e-6
    np.testing.assert_allclose(f3(_X), (f2(_X + eps) - f2(_X - eps)) / (2 * eps), rtol=1e-6)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(_FUNCS))
def test_gradient_of_hessian_of_elementwise(name, mode):
    f, f2, f3 = _FUNCS[name]
    g, x, k, h, t = _third(lambda x, k: tf.reduce_sum(f(x)), _X.size)
    hv, tv = _run(g, [h, t], {x: _X, k: 0}, mode)
    np.testing.assert_allclose(hv, np.diag(f2(_X)), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(tv, 2 * f2(_X) * f3(_X), rtol=1e-12)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("k", [0, 1])
def test_gradient_of_hessian_through_cond(k, mode):
    """x = 0 where the sqrt branch is not taken (its derivatives are inf there): the untaken
    branch's values must not leak into the taken one's."""
    xv = np.array([0.0, 0.7, 1.1, 1.9]) if k == 0 else _X

    def loss(x, k):
        return tf.cond(k > 0, lambda: tf.reduce_sum(tf.sqrt(x)),
                       lambda: tf.reduce_sum(tf.sigmoid(x) + 1.0 / (x + 1.0)))
    g, x, kk, h, t = _third(loss, 4)
    hv, tv = _run(g, [h, t], {x: xv, kk: k}, mode)
    if k == 0:
        s2, s3 = _FUNCS["sigmoid"][1:]
        e2, e3 = s2(xv) + 2 / (xv + 1) ** 3, s3(xv) - 6 / (xv + 1) ** 4
    else:
        e2, e3 = _FUNCS["sqrt"][1](xv), _FUNCS["sqrt"][2](xv)
    np.testing.assert_allclose(hv, np.diag(e2), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(tv, 2 * e2 * e3, rtol=1e-12)


@pytest.mark.parametrize("mode", MODES)
def test_gradient_of_hessian_through_while_loop_with_cond(mode):
    """T = 3 steps adding rsqrt(x) on steps i < k and reciprocal(x) on the others:
    loss = sum(m rsqrt(x) + (3 - m) / x), m = min(k, 3)."""
    def loss(x, k):
        def body(i, v):
            return i + 1, tf.cond(i < k, lambda: v + tf.math.rsqrt(x), lambda: v + tf.math.reciprocal(x))
        return tf.reduce_sum(tf.while_loop(lambda i, v: i < 3, body, [0, tf.zeros_like(x)])[1])
    g, x, kk, h, t = _third(loss, 4)
    r2, r3 = _FUNCS["rsqrt"][1:]
    q2, q3 = _FUNCS["reciprocal"][1:]
    for k in (0, 2):
        hv, tv = _run(g, [h, t], {x: _X, kk: k}, mode)
        e2, e3 = k * r2(_X) + (3 - k) * q2(_X), k * r3(_X) + (3 - k) * q3(_X)
        np.testing.assert_allclose(hv, np.diag(e2), rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(tv, 2 * e2 * e3, rtol=1e-12)


def _third_by_tapes(loss, x):
    """d^3 loss / dx^3 as a [n, n, n] tensor: a tape jacobian of a tape jacobian of a gradient."""
    with tf.GradientTape() as t3:
        t3.watch(x)
        with tf.GradientTape() as t2:
            t2.watch(x)
            with tf.GradientTape() as t1:
                t1.watch(x)
                y = loss(x)
            gr = t1.gradient(y, x)
        h = t2.jacobian(gr, x)
    return t3.jacobian(h, x)


def test_tape_jacobian_of_tape_jacobian_in_a_function():
    """d^3/dx^3 of sum(sqrt(x)) as a [n, n, n] tensor: f''' on the diagonal, 0 elsewhere."""
    @tf.function
    def third(x):
        return _third_by_tapes(lambda x: tf.reduce_sum(tf.sqrt(x)), x)
    got = third(tf.constant(_X)).numpy()
    want = np.zeros((4, 4, 4))
    want[np.arange(4), np.arange(4), np.arange(4)] = _FUNCS["sqrt"][2](_X)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("k", [0, 1])
def test_tape_third_derivative_through_cond_in_a_loop_in_a_function(k):
    """Two steps each adding cond(k > 0, sqrt(x), x^3): d^3 sum / dx^3 = diag(2 f''')."""
    @tf.function
    def third(x, k):
        def loss(x):
            v = tf.while_loop(lambda i, v: i < 2, lambda i, v: (i + 1, v + tf.cond(
                k > 0, lambda: tf.sqrt(x), lambda: x * x * x)), [0, tf.zeros_like(x)])[1]
            return tf.reduce_sum(v)
        return _third_by_tapes(loss, x)
    got = third(tf.constant(_X), tf.constant(k)).numpy()
    want = np.zeros((4, 4, 4))
    want[np.arange(4), np.arange(4), np.arange(4)] = 2 * (_FUNCS["sqrt"][2](_X) if k else 6.0)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
