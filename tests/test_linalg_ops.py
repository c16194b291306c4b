"""tf.linalg.inv / det / slogdet / solve / cholesky: values against numpy,
gradients against central finite differences (float64), in eager, graph (both
Session modes) and function modes; singular input -> InvalidArgumentError."""
import numpy as np
import pytest

import jitgrad as tf

RNG = np.random.default_rng(7)
A = RNG.standard_normal((3, 3)) + 3 * np.eye(3)
SPD = A @ A.T + np.eye(3)
B = RNG.standard_normal((3, 2))


def _fd(f, x, eps=1e-6):
    """Central finite differences of sum(f(x) * W) for a fixed random weight W."""
    out = f(x)
    w = np.random.default_rng(1).standard_normal(np.shape(out))
    g = np.zeros_like(x)
    for idx in np.ndindex(*x.shape):
        xp, xm = x.copy(), x.copy()
        xp[idx] += eps
        xm[idx] -= eps
        g[idx] = (np.sum(f(xp) * w) - np.sum(f(xm) * w)) / (2 * eps)
    return w, g


def _sym(x):
    return (x + x.T) / 2


CASES = {
    "inv": (tf.linalg.inv, np.linalg.inv, A),
    "inv_adjoint": (lambda a: tf.linalg.inv(a, adjoint=True), lambda a: np.linalg.inv(a.T), A),
    "det": (tf.linalg.det, np.linalg.det, A),
    "slogdet": (lambda a: tf.linalg.slogdet(a)[1], lambda a: np.linalg.slogdet(a)[1], A),
    "solve": (lambda a: tf.linalg.solve(a, B), lambda a: np.linalg.solve(a, B), A),
    "solve_adjoint": (lambda a: tf.linalg.solve(a, B, adjoint=True), lambda a: np.linalg.solve(a.T, B), A),
    # cholesky reads one triangle: differentiate through a symmetric input, as TF's own tests do
    "cholesky": (lambda a: tf.linalg.cholesky((a + tf.transpose(a)) / 2),
                 lambda a: np.linalg.cholesky(_sym(a)), SPD),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_eager_value_and_gradient(name):
    f_tf, f_np, x0 = CASES[name]
    w, expected_grad = _fd(f_np, x0)
    x = tf.Variable(x0)
    with tf.GradientTape() as tape:
        y = f_tf(x)
        loss = tf.reduce_sum(y * w)
    np.testing.assert_allclose(y.numpy(), f_np(x0), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(tape.gradient(loss, x).numpy(), expected_grad, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("name", ["inv", "det", "solve", "cholesky"])
def test_graph_value_and_gradient(name, graph_mode):
    f_tf, f_np, x0 = CASES[name]
    w, expected_grad = _fd(f_np, x0)
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float64, [3, 3])
        y = f_tf(x)
        (gx,) = tf.gradients(tf.reduce_sum(y * w), [x])
    before = tf.cache_info()["fallbacks"] if graph_mode == "compiled" else None
    with tf.compat.v1.Session(graph=g) as sess:
        yv, gv = sess.run([y, gx], {x: x0})
    np.testing.assert_allclose(yv, f_np(x0), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(gv, expected_grad, rtol=1e-5, atol=1e-7)
    if graph_mode == "compiled":   # no native lowering: the run is a counted interpreter fallback
        assert tf.cache_info()["fallbacks"] == before + 1


def test_function_and_float32():
    @tf.function
    def f(a, b):
        return tf.linalg.solve(a, b), tf.linalg.det(a)
    x, d = f(tf.constant(A, tf.float32), tf.constant(B, tf.float32))
    assert x.dtype == tf.float32 and d.dtype == tf.float32
    np.testing.assert_allclose(x.numpy(), np.linalg.solve(A, B), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(d.numpy(), np.linalg.det(A), rtol=1e-5)


def test_second_order_det():
    # d/dx of det([[x, 1], [1, x]]) = 2x; second derivative 2
    x = tf.Variable(1.5, dtype=tf.float64)
    with tf.GradientTape() as t2:
        with tf.GradientTape() as t1:
            m = tf.stack([tf.stack([x, tf.constant(1.0, tf.float64)]), tf.stack([tf.constant(1.0, tf.float64), x])])
            d = tf.linalg.det(m)
        g1 = t1.gradient(d, x)
    g2 = t2.gradient(g1, x)
    assert abs(g1.numpy() - 3.0) < 1e-12 and abs(g2.numpy() - 2.0) < 1e-12


def test_batched():
    a = np.stack([A, SPD])
    np.testing.assert_allclose(tf.linalg.inv(a).numpy(), np.linalg.inv(a), rtol=1e-10)
    np.testing.assert_allclose(tf.linalg.det(a).numpy(), np.linalg.det(a), rtol=1e-10)
    assert tf.linalg.det(a).shape == (2,)


def test_errors():
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.linalg.inv(tf.constant([[1.0, 2.0], [2.0, 4.0]]))
    # not positive definite: TF's kernel fills the lower triangle with NaN (no error)
    bad = tf.linalg.cholesky(tf.constant([[[4.0, 2.0], [2.0, 3.0]], [[1.0, 2.0], [2.0, 1.0]]])).numpy()
    np.testing.assert_allclose(bad[0], np.linalg.cholesky([[4.0, 2.0], [2.0, 3.0]]), rtol=1e-6)
    assert np.isnan(bad[1][np.tril_indices(2)]).all()
    with pytest.raises(tf.errors.InvalidArgumentError):   # not square
        tf.linalg.det(tf.zeros([2, 3]))
    g = tf.Graph()
    with g.as_default():
        with pytest.raises(ValueError):
            tf.linalg.inv(tf.zeros([2, 3]))
