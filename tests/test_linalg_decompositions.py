"""tf.linalg.qr / eigh / eigvalsh / svd (reference-interpreter ops: compiled Session runs
fall back) and TF's composites pinv / matrix_rank / lstsq (ops/linalg_decompositions.py).
Expected values from numpy's own decompositions and from reconstruction identities;
gradients against central finite differences (check_op). Eigenvectors and singular
vectors are unique only up to sign (TF's Eigen and numpy's LAPACK choose differently),
so what is checked of them is sign-invariant: squares, u diag(s) v^T, |v|^2 sums."""
import numpy as np
import pytest

import jitgrad as tf
from jitgrad.errors import InvalidArgumentError

from _graph_testing import check_op

pytestmark = pytest.mark.usefixtures("graph_mode")

RNG = np.random.default_rng(23)
SHAPES = [(4, 4), (5, 3), (3, 5), (2, 4, 3), (2, 3, 4)]


@pytest.mark.parametrize("shape", SHAPES)
def test_qr_values_and_gradient(shape):
    a = RNG.normal(size=shape)
    q, r = np.linalg.qr(a)          # (same Householder signs as TF's Eigen QR: checked against TF 2.21)
    check_op(lambda x: tf.linalg.qr(x)[0], a, expected=q, value_rtol=1e-10, value_atol=1e-12, rtol=1e-5, atol=1e-7)
    check_op(lambda x: tf.linalg.qr(x)[1], a, expected=r, value_rtol=1e-10, value_atol=1e-12, rtol=1e-5, atol=1e-7)
    check_op(lambda x: tf.matmul(*tf.linalg.qr(x)), a, expected=a, value_rtol=1e-10, value_atol=1e-12,
             rtol=1e-5, atol=1e-7)


def test_qr_full_matrices_and_float32():
    a = RNG.normal(size=(2, 5, 3))
    q, r = tf.linalg.qr(a, full_matrices=True)
    assert q.shape == (2, 5, 5) and r.shape == (2, 5, 3)
    np.testing.assert_allclose(q.numpy() @ r.numpy(), a, atol=1e-12)
    np.testing.assert_allclose(np.abs(q.numpy()), np.abs(np.linalg.qr(a, mode="complete")[0]), atol=1e-12)
    # TF: no gradient for tall matrices with full_matrices=True
    with pytest.raises(NotImplementedError, match="full_matrices is true"):
        x = tf.Variable(a)
        with tf.GradientTape() as t:
            y = tf.reduce_sum(tf.linalg.qr(x, full_matrices=True)[1])
        t.gradient(y, x)
    q32, r32 = tf.linalg.qr(a.astype(np.float32))
    assert q32.dtype == tf.float32 and r32.dtype == tf.float32
    np.testing.assert_allclose(q32.numpy() @ r32.numpy(), a, atol=1e-5)


@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 3)])
def test_eigh_values_and_gradient(shape):
    a = RNG.normal(size=shape)
    e, v = np.linalg.eigh(a, "L")   # the op reads the lower triangle, as TF's
    check_op(lambda x: tf.linalg.eigvalsh(x), a, expected=e, value_rtol=1e-10, rtol=1e-5, atol=1e-7)
    check_op(lambda x: tf.linalg.eigh(x)[0], a, expected=e, value_rtol=1e-10, rtol=1e-5, atol=1e-7)
    check_op(lambda x: tf.square(tf.linalg.eigh(x)[1]), a, expected=v ** 2, value_rtol=1e-9, value_atol=1e-12,
             rtol=1e-5, atol=1e-7)
    # v diag(e) v^T rebuilds the symmetric matrix
    sym = np.tril(a) + np.swapaxes(np.tril(a, -1), -1, -2)
    ev, vv = (t.numpy() for t in tf.linalg.eigh(a))
    np.testing.assert_allclose(vv @ (ev[..., :, None] * np.swapaxes(vv, -1, -2)), sym, atol=1e-12)


def test_eigh_errors_and_dtypes():
    with pytest.raises((ValueError, InvalidArgumentError)):
        tf.linalg.eigh(np.ones((2, 3)))
    with pytest.raises(InvalidArgumentError, match="not successful"):     # TF: eigh of NaN fails
        tf.linalg.eigh(np.array([[np.nan, 1.0], [1.0, 2.0]]))
    assert np.isnan(tf.linalg.eigvalsh(np.array([[np.inf, 1.0], [1.0, 2.0]])).numpy()).all()   # eigvalsh: NaN
    e = tf.linalg.eigvalsh(np.array([[2, 1j], [-1j, 3]]))
    assert e.dtype == tf.complex128      # (TF's op gives complex eigenvalues for complex input)
    np.testing.assert_allclose(e.numpy().real, np.linalg.eigvalsh(np.array([[2, 1j], [-1j, 3]])), atol=1e-12)
    assert tf.linalg.eigh(np.eye(3, dtype=np.float32))[1].dtype == tf.float32


@pytest.mark.parametrize("shape", SHAPES)
def test_svd_values_and_gradient(shape):
    a = RNG.normal(size=shape)
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    check_op(lambda x: tf.linalg.svd(x, compute_uv=False), a, expected=s, value_rtol=1e-10, rtol=1e-5, atol=1e-7)
    check_op(lambda x: tf.linalg.svd(x)[0], a, expected=s, value_rtol=1e-10, rtol=1e-5, atol=1e-7)
    check_op(lambda x: tf.square(tf.linalg.svd(x)[1]), a, expected=u ** 2, value_rtol=1e-9, value_atol=1e-12,
             rtol=1e-5, atol=1e-7)
    check_op(lambda x: tf.square(tf.linalg.svd(x)[2]), a, expected=np.swapaxes(vh, -1, -2) ** 2, value_rtol=1e-9,
             value_atol=1e-12, rtol=1e-5, atol=1e-7)

    def rebuild(x):
        s_, u_, v_ = tf.linalg.svd(x)
        return tf.matmul(u_ * tf.expand_dims(s_, -2), v_, adjoint_b=True)
    check_op(rebuild, a, expected=a, value_rtol=1e-9, value_atol=1e-12, rtol=1e-5, atol=1e-7)


def test_svd_full_matrices_shapes_and_gradient():
    a = RNG.normal(size=(2, 4, 3))
    s, u, v = tf.linalg.svd(a, full_matrices=True)
    assert (s.shape, u.shape, v.shape) == ((2, 3), (2, 4, 4), (2, 3, 3))
    np.testing.assert_allclose(np.abs(u.numpy()), np.abs(np.linalg.svd(a)[0]), atol=1e-12)
    check_op(lambda x: tf.square(tf.linalg.svd(x, full_matrices=True)[2]), a, rtol=1e-5, atol=1e-7)
    # TF: full_matrices gradients only when |m - n| <= 1
    b = tf.Variable(RNG.normal(size=(5, 3)))
    with pytest.raises(NotImplementedError, match="abs"):
        with tf.GradientTape() as t:
            y = tf.reduce_sum(tf.linalg.svd(b, full_matrices=True)[0])
        t.gradient(y, b)
    with pytest.raises((ValueError, InvalidArgumentError)):
        tf.linalg.svd(np.ones(3))
    assert tf.linalg.svd(np.ones((2, 2), np.float32), compute_uv=False).dtype == tf.float32


def test_decompositions_in_eager_and_function():
    a = RNG.normal(size=(3, 4))
    x = tf.Variable(a)

    def loss(p):
        s, u, v = tf.linalg.svd(p)
        q, r = tf.linalg.qr(p)
        return tf.reduce_sum(s) + tf.reduce_sum(tf.square(u)[0]) + tf.reduce_sum(q @ r)

    with tf.GradientTape() as t:
        y = loss(x)
    g_eager = t.gradient(y, x).numpy()

    @tf.function
    def f(p):
        with tf.GradientTape() as t2:
            t2.watch(p)
            yy = loss(p)
        return yy, t2.gradient(yy, p)
    y_fn, g_fn = f(tf.constant(a))
    np.testing.assert_allclose(y_fn.numpy(), y.numpy(), rtol=1e-12)
    np.testing.assert_allclose(g_fn.numpy(), g_eager, rtol=1e-10)
    eps, num = 1e-6, np.zeros_like(a)
    for idx in np.ndindex(*a.shape):
        d = np.zeros_like(a)
        d[idx] = eps
        num[idx] = (loss(tf.constant(a + d)).numpy() - loss(tf.constant(a - d)).numpy()) / (2 * eps)
    np.testing.assert_allclose(g_eager, num, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (2, 3, 4)])
def test_pinv(shape):
    a = RNG.normal(size=shape)
    check_op(lambda x: tf.linalg.pinv(x), a, expected=np.linalg.pinv(a), value_rtol=1e-9, value_atol=1e-12,
             rtol=1e-5, atol=1e-7)
    # small singular values are cut (rcond), giving the pseudo-inverse of the low-rank matrix
    low = a[..., :, :1] @ a[..., :1, :]
    np.testing.assert_allclose(tf.linalg.pinv(low).numpy(), np.linalg.pinv(low), atol=1e-10)
    assert tf.linalg.pinv(a.astype(np.float32)).dtype == tf.float32
    with pytest.raises(TypeError):
        tf.linalg.pinv(np.ones((2, 2), np.int32))


def test_matrix_rank():
    a = RNG.normal(size=(3, 4, 5))
    a[1] = a[1, :, :1] @ a[1, :1, :]
    a[2, 3] = a[2, 0] + a[2, 1]
    r = tf.linalg.matrix_rank(a)
    assert r.dtype == tf.int32          # (TF 2.21)
    assert r.numpy().tolist() == np.linalg.matrix_rank(a).tolist() == [4, 1, 3]
    assert tf.linalg.matrix_rank(np.eye(3), tol=1.5).numpy() == 0
    assert tf.linalg.matrix_rank(np.ones((2, 2), np.int32)).numpy() == 1     # (TF: numpy ints convert as float32)


@pytest.mark.parametrize("shape", [(5, 3), (4, 4), (3, 5), (2, 5, 3)])
@pytest.mark.parametrize("l2", [0.0, 0.5])
def test_lstsq(shape, l2):
    a = RNG.normal(size=shape)
    b = RNG.normal(size=shape[:-1] + (2,))
    n = shape[-1]
    if shape[-2] >= n:
        want = np.linalg.solve(np.swapaxes(a, -1, -2) @ a + l2 * np.eye(n), np.swapaxes(a, -1, -2) @ b)
    else:
        want = np.swapaxes(a, -1, -2) @ np.linalg.solve(a @ np.swapaxes(a, -1, -2) + l2 * np.eye(shape[-2]), b)
    if l2 == 0 and shape[-2] >= n and a.ndim == 2:     # (the least-squares solution itself)
        np.testing.assert_allclose(want, np.linalg.lstsq(a, b, rcond=None)[0], atol=1e-10)
    check_op(lambda x, y: tf.linalg.lstsq(x, y, l2_regularizer=l2), a, b, expected=want, value_rtol=1e-8,
             value_atol=1e-10, rtol=1e-5, atol=1e-7)
    # fast=False: the minimum-norm least-squares solution (TF ignores l2_regularizer there)
    check_op(lambda x, y: tf.linalg.lstsq(x, y, l2_regularizer=l2, fast=False), a, b,
             expected=np.stack([np.linalg.lstsq(m, r, rcond=None)[0] for m, r in
                                zip(a.reshape((-1,) + shape[-2:]), b.reshape((-1,) + b.shape[-2:]))]).reshape(
                 shape[:-2] + (n, 2)), value_rtol=1e-9, value_atol=1e-12, grad=False)


def test_lstsq_slow_rank_deficient_and_no_gradient():
    a = RNG.normal(size=(5, 3))
    low = a[:, :1] @ a[:1, :]
    b = RNG.normal(size=(5, 2))
    np.testing.assert_allclose(tf.linalg.lstsq(low, b, fast=False).numpy(), np.linalg.pinv(low) @ b, atol=1e-12)
    assert tf.linalg.lstsq(a.astype(np.float32), b.astype(np.float32), fast=False).dtype == tf.float32
    v = tf.Variable(a)
    with pytest.raises(ValueError, match="fast=False"):
        with tf.GradientTape() as t:
            y = tf.reduce_sum(tf.linalg.lstsq(v, b, fast=False))
        t.gradient(y, v)


def test_compat_v1_names():
    v1 = tf.compat.v1
    a = RNG.normal(size=(3, 3))
    assert v1.qr is tf.linalg.qr and v1.svd is tf.linalg.svd and v1.linalg.svd is tf.linalg.svd
    assert v1.self_adjoint_eig is tf.linalg.eigh and v1.self_adjoint_eigvals is tf.linalg.eigvalsh
    assert v1.matrix_solve_ls is tf.linalg.lstsq
    for name in ("eigh", "eigvalsh", "pinv", "lstsq", "matrix_rank"):
        assert getattr(v1.linalg, name) is getattr(tf.linalg, name)
    np.testing.assert_allclose(v1.svd(a, compute_uv=False).numpy(), np.linalg.svd(a, compute_uv=False))


def test_compiled_runs_fall_back_to_the_interpreter(graph_mode):
    """The decompositions have no native lowering: a compiled Session run of a graph holding
    one falls back to the interpreter, and the fallback is counted."""
    before = tf.cache_info()["fallbacks"]
    check_op(lambda x: tf.linalg.svd(x, compute_uv=False), np.diag([3.0, 2.0, 1.0]), expected=[3.0, 2.0, 1.0],
             grad=False)
    assert (tf.cache_info()["fallbacks"] > before) == (graph_mode == "compiled")


@pytest.mark.parametrize("which", ["qr", "qr_wide", "eigh", "eigvalsh", "svd", "svd_tall", "svd_s"])
def test_complex_gradients(which):
    """TF's complex corrections (QR's diagonal term, SVD's third term): TF's gradient of a real
    loss is dL/dRe + i dL/dIm, checked by finite differences of sign-invariant losses."""
    rng = np.random.default_rng(11)
    shape = {"qr_wide": (3, 4), "svd_tall": (4, 3), "svd_s": (3, 4)}.get(which, (3, 3))
    a = rng.normal(size=shape) + 1j * rng.normal(size=shape)
    fns = {
        "qr": lambda x: tf.abs(tf.linalg.qr(x)[1]),
        "qr_wide": lambda x: tf.abs(tf.linalg.qr(x)[0]) + tf.reduce_sum(tf.abs(tf.linalg.qr(x)[1])),
        "eigh": lambda x: tf.abs(tf.linalg.eigh(x)[1]) + tf.math.real(tf.linalg.eigh(x)[0])[..., None, :],
        "eigvalsh": lambda x: tf.math.real(tf.linalg.eigvalsh(x)),
        "svd": lambda x: tf.abs(tf.linalg.svd(x)[1]) + tf.abs(tf.linalg.svd(x)[2]),
        "svd_tall": lambda x: tf.reduce_sum(tf.abs(tf.linalg.svd(x)[1])) + tf.abs(tf.linalg.svd(x)[2]),
        "svd_s": lambda x: tf.linalg.svd(x, compute_uv=False),
    }

    def loss(x):
        y = fns[which](x)
        return tf.reduce_sum(y * np.random.default_rng(1).uniform(0.5, 1.5, y.shape.as_list()))

    v = tf.Variable(a)
    with tf.GradientTape() as t:
        y = loss(v)
    g = t.gradient(y, v).numpy()
    eps, num = 1e-6, np.zeros_like(a)
    for idx in np.ndindex(*a.shape):
        for unit in (1, 1j):
            d = np.zeros_like(a)
            d[idx] = eps * unit
            num[idx] += unit * (loss(tf.constant(a + d)).numpy() - loss(tf.constant(a - d)).numpy()) / (2 * eps)
    np.testing.assert_allclose(g, num, rtol=1e-5, atol=1e-6)


def test_complex_triangular_solve():
    rng = np.random.default_rng(4)
    a = np.tril(rng.normal(size=(3, 3)) + 1j * rng.normal(size=(3, 3))) + 3 * np.eye(3)
    b = rng.normal(size=(3, 2)) + 1j * rng.normal(size=(3, 2))
    np.testing.assert_allclose(tf.linalg.triangular_solve(a, b).numpy(), np.linalg.solve(a, b), rtol=1e-12)
    np.testing.assert_allclose(tf.linalg.triangular_solve(a, b, adjoint=True).numpy(),
                               np.linalg.solve(a.conj().T, b), rtol=1e-12)
