"""Second derivatives through a broadcast between the values two loops grow (rows known
only at run time, from two sources): the first gradient sums the broadcast rows back
(SumToShape, "rowsum"), its gradient broadcasts them out again (BroadcastToShapeOf
between the two sources, "bcast_to" in codegen/lower_rows_broadcast.py), as TF does:
one row against R, equal counts row by row, anything else TF's "Incompatible shapes".
Expected values: the program in numpy, its gradient by hand (comments), second
derivatives and Hessians by central differences of that gradient; interpreter and
compiled alike (run_both: no fallback)."""
import numpy as np
import pytest

import jitgrad as tf
from test_differential import run_both

tf1 = tf.compat.v1
W = np.array([0.3, -0.5, 0.9])
U = np.array([0.7, 0.2, -0.4])


def _grown(n, v):
    """Rows sin(v * (i + 1)), i < n, appended by a loop."""
    def body(i, x):
        return i + 1, tf.concat([x, [tf.sin(v * tf.cast(i + 1, tf.float64))]], 0)
    _, x = tf.while_loop(lambda i, x: i < n, body, [0, tf.zeros([0, 3], tf.float64)],
                         shape_invariants=[tf.TensorShape([]), tf.TensorShape([None, 3])])
    return x


def _graph():
    g = tf.Graph()
    with g.as_default():
        n1, n2 = tf1.placeholder(tf.int32, []), tf1.placeholder(tf.int32, [])
        w, u = tf1.placeholder(tf.float64, [3]), tf1.placeholder(tf.float64, [3])
        loss = tf.reduce_sum(tf.sin(_grown(n1, w) * _grown(n2, u)))
        gw, gu = tf.gradients(loss, [w, u])
        ggw, ggu = tf.gradients(tf.reduce_sum(gu * gu), [w, u])
        (hu,) = tf.hessians(loss, u)
    return g, (n1, n2, w, u), [gw, gu, ggw, ggu, hu]


def _np_grads(w, u, n1, n2):
    """(d loss/dw, d loss/du): P = A * B broadcast, dL/dP = cos P; dL/dA, dL/dB = cos(P) B,
    cos(P) A summed back over the rows each was broadcast along; d row_i / dv = (i + 1) cos(v (i + 1))."""
    k1, k2 = np.arange(1, n1 + 1)[:, None], np.arange(1, n2 + 1)[:, None]
    A, B = np.sin(w * k1), np.sin(u * k2)
    c = np.cos(A * B)
    dA, dB = c * B, c * A
    if n1 == 1 and n2 != 1:
        dA = dA.sum(0, keepdims=True)
    if n2 == 1 and n1 != 1:
        dB = dB.sum(0, keepdims=True)
    return np.sum(dA * k1 * np.cos(w * k1), 0), np.sum(dB * k2 * np.cos(u * k2), 0)


def _fd(f, v, eps=1e-6):
    return np.stack([(f(v + eps * e) - f(v - eps * e)) / (2 * eps) for e in np.eye(3)], 1)


@pytest.mark.parametrize("n1,n2", [(4, 1), (1, 4), (3, 3), (1, 1), (0, 1)])
def test_second_derivatives_broadcast_between_two_loops(n1, n2):
    g, (p1, p2, w, u), fetches = _graph()
    interp, compiled = run_both(g, fetches, {p1: n1, p2: n2, w: W, u: U})
    gw0, gu0 = _np_grads(W, U, n1, n2)
    # d sum(gu^2) / dv = 2 (d gu / dv)^T gu
    jw = _fd(lambda v: _np_grads(v, U, n1, n2)[1], W)
    ju = _fd(lambda v: _np_grads(W, v, n1, n2)[1], U)
    for got in (interp, compiled):
        gw, gu, ggw, ggu, hu = got
        np.testing.assert_allclose(gw, gw0, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(gu, gu0, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(ggw, 2 * jw.T @ gu0, rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(ggu, 2 * ju.T @ gu0, rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(hu, ju, rtol=1e-6, atol=1e-8)
    for a, b in zip(interp, compiled):
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("mode", ["interpret", "compiled"])
def test_rows_neither_equal_nor_one_are_tfs_error(mode):
    g, (p1, p2, w, u), fetches = _graph()
    with tf1.Session(graph=g, config=tf1.ConfigProto(jitgrad_mode=mode)) as s:
        with pytest.raises(tf.errors.InvalidArgumentError, match="Incompatible shapes"):
            s.run(fetches[2:4], {p1: 3, p2: 2, w: W, u: U})
