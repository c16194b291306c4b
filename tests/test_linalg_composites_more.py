"""tf.linalg normalize, cholesky_solve, set_diag, tensor_diag, tensor_diag_part
(ops/linalg_composites.py). Expected values from numpy (np.linalg.norm / solve, index
loops); gradients against finite differences (check_op). Graph runs in both Session modes,
compiled ones without interpreter fallback
(cholesky_solve excepted)."""
import numpy as np
import pytest

import jitgrad as tf
from jitgrad.errors import InvalidArgumentError

from _graph_testing import check_op

pytestmark = pytest.mark.usefixtures("graph_mode")

RNG = np.random.default_rng(17)


def test_normalize(no_fallback):
    x = RNG.normal(size=(2, 3, 4))
    n = np.linalg.norm(x, axis=-1, keepdims=True)
    check_op(lambda p: tf.linalg.normalize(p, axis=-1)[0], x, expected=x / n, value_rtol=1e-12)
    check_op(lambda p: tf.linalg.normalize(p, axis=-1)[1], x, expected=n, value_rtol=1e-12)
    one = np.linalg.norm(x, ord=1, axis=(1, 2), keepdims=True)     # (a matrix norm: the largest column sum)
    check_op(lambda p: tf.linalg.normalize(p, ord=1, axis=[1, 2])[0], x, expected=x / one, value_rtol=1e-12)


def test_cholesky_solve():      # (MatrixTriangularSolve has no lowering yet: compiled runs fall back)
    a = RNG.normal(size=(2, 3, 3))
    spd = a @ a.transpose(0, 2, 1) + 3 * np.eye(3)
    chol = np.linalg.cholesky(spd)
    rhs = RNG.normal(size=(2, 3, 2))
    check_op(lambda b: tf.linalg.cholesky_solve(chol, b), rhs, expected=np.linalg.solve(spd, rhs), value_rtol=1e-10)
    check_op(lambda c: tf.linalg.cholesky_solve(c, rhs), chol, expected=np.linalg.solve(spd, rhs), value_rtol=1e-10,
             rtol=1e-5)


def test_set_diag(no_fallback):
    for shape in ((2, 3, 4), (2, 4, 3), (3, 3)):
        m = RNG.normal(size=shape)
        k = min(shape[-2:])
        d = RNG.normal(size=shape[:-2] + (k,))
        want = m.copy()
        want[..., np.arange(k), np.arange(k)] = d
        check_op(lambda a, b: tf.linalg.set_diag(a, b), m, d, expected=want)
    assert tf.compat.v1.matrix_set_diag(tf.zeros([2, 2], tf.int32), [7, 8]).numpy().tolist() == [[7, 0], [0, 8]]
    with pytest.raises(InvalidArgumentError):
        tf.linalg.set_diag(tf.zeros([2, 3, 4]), tf.zeros([2, 2]))


def test_tensor_diag_and_part(no_fallback):
    d = RNG.normal(size=(2, 3))
    want = np.zeros((2, 3, 2, 3))
    for i in range(2):
        for j in range(3):
            want[i, j, i, j] = d[i, j]
    check_op(lambda p: tf.linalg.tensor_diag(p), d, expected=want)
    x = RNG.normal(size=(2, 3, 2, 3))
    check_op(lambda p: tf.linalg.tensor_diag_part(p), x,
             expected=np.array([[x[i, j, i, j] for j in range(3)] for i in range(2)]))
    with pytest.raises(InvalidArgumentError):
        tf.linalg.tensor_diag_part(tf.zeros([2, 3, 2]))
    with pytest.raises(InvalidArgumentError):
        tf.linalg.tensor_diag_part(tf.zeros([2, 3]))
