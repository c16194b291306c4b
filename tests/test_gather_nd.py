"""tf.gather_nd (ops/gather_nd.py): one gather of params' flattened leading dims.
Expected values by numpy indexing (params[tuple(index vector)]); gradients by scattering
the cotangent with np.add.at; out-of-range components raise even where the flat row
would land inside params."""
import numpy as np
import pytest

import jitgrad as tf
from jitgrad.errors import InvalidArgumentError

pytestmark = pytest.mark.usefixtures("graph_mode")
ph = tf.compat.v1.placeholder


def _np_gather_nd(p, idx):
    k = idx.shape[-1]
    flat = idx.reshape(int(np.prod(idx.shape[:-1])), k)
    rows = [p[tuple(v)] for v in flat]
    return np.array(rows, p.dtype).reshape(idx.shape[:-1] + p.shape[k:])


def _np_grad(p, idx, g):
    out = np.zeros_like(p)
    k = idx.shape[-1]
    for v, gv in zip(idx.reshape(int(np.prod(idx.shape[:-1])), k), g.reshape((-1,) + p.shape[k:])):
        out[tuple(v)] += gv
    return out


@pytest.mark.parametrize("known", [True, False])
def test_generated_indices_values_and_gradients(no_fallback, known):
    rng = np.random.default_rng(11)
    for trial in range(12):
        pshape = tuple(int(d) for d in rng.integers(1, 5, rng.integers(1, 4)))
        k = int(rng.integers(0, len(pshape) + 1))
        ishape = tuple(int(d) for d in rng.integers(0, 4, rng.integers(0, 3))) + (k,)
        idx = np.stack([rng.integers(0, pshape[j], ishape[:-1]) for j in range(k)], -1).astype(
            np.int32 if trial % 2 else np.int64) if k else np.zeros(ishape, np.int32)
        p = rng.standard_normal(pshape)
        want = _np_gather_nd(p, idx)
        w = rng.standard_normal(want.shape)
        g = tf.Graph()
        with g.as_default():
            pp = ph(tf.float64, pshape if known else [None] * len(pshape))
            ip = ph(tf.as_dtype(idx.dtype), idx.shape if known else [None] * (idx.ndim - 1) + [k])
            out = tf.gather_nd(pp, ip)
            grad = tf.gradients(tf.reduce_sum(out * w), pp)[0]
        got, got_grad = tf.compat.v1.Session(graph=g).run([out, grad], {pp: p, ip: idx})
        np.testing.assert_array_equal(got, want)
        np.testing.assert_allclose(got_grad, _np_grad(p, idx, w), rtol=1e-12, atol=1e-12)


def test_out_of_range_components_raise():
    p = np.arange(24.0, dtype=np.float32).reshape(2, 3, 4)
    g = tf.Graph()
    with g.as_default():
        ip = ph(tf.int32, [None, 2])
        out = tf.gather_nd(tf.constant(p), ip)
    s = tf.compat.v1.Session(graph=g)
    np.testing.assert_array_equal(s.run(out, {ip: [[1, 2], [0, 0]]}), p[[1, 0], [2, 0]])
    for bad in ([[0, 5]], [[0, -1]], [[2, 0]], [[0, 3]]):      # [0, 5] would be flat row 5: inside
        with pytest.raises(InvalidArgumentError):
            s.run(out, {ip: bad})


def test_eager_and_errors():
    p = tf.constant(np.arange(6.0, dtype=np.float32).reshape(2, 3))
    np.testing.assert_array_equal(tf.gather_nd(p, [[1, 0], [0, 2]]).numpy(), [3.0, 2.0])
    np.testing.assert_array_equal(tf.gather_nd(p, [[1]]).numpy(), [[3.0, 4.0, 5.0]])
    with pytest.raises(InvalidArgumentError):
        tf.gather_nd(p, [[0, 1, 2]])
    with pytest.raises(InvalidArgumentError):
        tf.gather_nd(p, [[0, 3]])
    with pytest.raises(TypeError):
        tf.gather_nd(p, tf.constant([[0.0, 1.0]]))
    with tf.Graph().as_default():
        with pytest.raises(ValueError):
            tf.gather_nd(tf.constant([[1.0]]), [[0, 0, 0]])


def _np_batched_gather(p, idx, axis, b):
    """TF's batched gather by loops: for each batch index, np.take along axis - b."""
    out = np.empty(p.shape[:b] + p.shape[b:axis] + idx.shape[b:] + p.shape[axis + 1:], p.dtype)
    for bi in np.ndindex(p.shape[:b]):
        out[bi] = np.take(p[bi], idx[bi], axis=axis - b)
    return out


@pytest.mark.parametrize("known", [True, False])
def test_gather_with_batch_dims(no_fallback, known):
    """tf.gather(..., batch_dims=b) (it raised NotImplementedError): values by per-batch
    np.take, gradients by the same scatter per batch; an index outside its batch's rows
    raises even where b * n + i would land in another batch."""
    rng = np.random.default_rng(4)
    p = rng.standard_normal((2, 3, 4, 5))
    for axis, b, ishape in ((1, 1, (2, 6)), (2, 1, (2, 2, 3)), (3, 1, (2, 1, 3)), (2, 2, (2, 3, 1)),
                            (3, 2, (2, 3)), (3, 2, (2, 3, 2, 2))):
        idx = rng.integers(0, p.shape[axis], ishape).astype(np.int32)
        want = _np_batched_gather(p, idx, axis, b)
        w = rng.standard_normal(want.shape)
        g = tf.Graph()
        with g.as_default():
            pp = ph(tf.float64, p.shape if known else [None] * p.ndim)
            ip = ph(tf.int32, idx.shape if known else [None] * idx.ndim)
            out = tf.gather(pp, ip, axis=axis, batch_dims=b)
            grad = tf.gradients(tf.reduce_sum(out * w), pp)[0]
        s = tf.compat.v1.Session(graph=g)
        got, got_grad = s.run([out, grad], {pp: p, ip: idx})
        np.testing.assert_array_equal(got, want)
        want_grad = np.zeros_like(p)
        for bi in np.ndindex(p.shape[:b]):
            moved = np.moveaxis(want_grad[bi], axis - b, 0)
            wb = np.moveaxis(w[bi], list(range(axis - b, axis - b + idx[bi].ndim)),
                             list(range(idx[bi].ndim))).reshape((idx[bi].size,) + moved.shape[1:])
            np.add.at(moved, idx[bi].reshape(-1), wb)
        np.testing.assert_allclose(got_grad, want_grad, rtol=1e-12, atol=1e-12)
        bad = idx.copy()
        bad.reshape(-1)[-1] = p.shape[axis]
        with pytest.raises(InvalidArgumentError):
            s.run(out, {pp: p, ip: bad})
