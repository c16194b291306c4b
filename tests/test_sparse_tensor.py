"""tf.SparseTensor and tf.sparse (sparse_tensor.py, sparse_ops.py, sparse_embedding.py).

Expected values come from numpy written here: the dense array a sparse tensor stands for,
built by a loop over its entries, and the dense operation on it (row-major order by
sorting index tuples). Graph tests run in both Session modes (graph_mode); the outputs
were checked side by side with TF 2.21 while writing them (error types included)."""
import math

import numpy as np
import pytest

import jitgrad as tf
from jitgrad.errors import InvalidArgumentError


def _dense(indices, values, shape, default=0):
    out = np.full(shape, default, dtype=np.asarray(values).dtype if len(values) else np.float32)
    for idx, v in zip(np.asarray(indices).tolist(), np.asarray(values).tolist()):
        out[tuple(idx)] = v
    return out


def _random_sparse(rng, shape, nnz, shuffle=False):
    """(indices, values) of nnz distinct elements, row-major unless shuffled."""
    flat = np.sort(rng.choice(int(np.prod(shape)), nnz, replace=False))
    if shuffle:
        rng.shuffle(flat)
    indices = np.stack(np.unravel_index(flat, shape), axis=1).astype(np.int64)
    return indices, rng.standard_normal(nnz).astype(np.float32)


def _entries(sp):
    """(indices list, values list, dense_shape list) of an eager SparseTensor or a SparseTensorValue."""
    parts = (sp.indices, sp.values, sp.dense_shape)
    return [np.asarray(p.numpy() if hasattr(p, "numpy") else p).tolist() for p in parts]


def _row_major(indices):
    return [tuple(i) for i in indices] == sorted(tuple(i) for i in indices)


# ---------------------------------------------------------------- the class
def test_properties_and_dtypes():
    sp = tf.SparseTensor(indices=[[0, 0], [1, 2]], values=[1.0, 2.0], dense_shape=[3, 4])
    assert sp.indices.dtype == tf.int64 and sp.dense_shape.dtype == tf.int64
    assert sp.dtype == tf.float32 and sp.shape == tf.TensorShape([3, 4]) and sp.get_shape().as_list() == [3, 4]
    assert isinstance(sp.values.numpy(), np.ndarray)
    w = sp.with_values(tf.constant([5, 6]))
    assert w.dtype == tf.int32 and _entries(w) == [[[0, 0], [1, 2]], [5, 6], [3, 4]]
    assert "SparseTensor(indices=tf.Tensor(" in repr(sp)


def test_ops_take_a_sparse_tensor_value():
    value = tf.compat.v1.SparseTensorValue(np.array([[1, 0]]), np.array([2.0], np.float32), np.array([2, 2]))
    assert tf.sparse.to_dense(value).numpy().tolist() == [[0.0, 0.0], [2.0, 0.0]]
    with pytest.raises(TypeError):
        tf.sparse.to_dense(np.zeros((2, 2)))


def test_not_a_tensor():
    sp = tf.SparseTensor([[0]], [1.0], [2])
    with pytest.raises(ValueError, match="unsupported type"):      # TF 2.21: ValueError, not TypeError
        tf.convert_to_tensor(sp)


@pytest.mark.parametrize("args", [([0, 1], [1.0, 2.0], [3]),          # indices not a matrix
                                  ([[0], [1]], [1.0], [3]),           # two indices, one value
                                  ([[0, 1]], [1.0], [3])])            # index rank 2, dense rank 1
def test_constructor_shape_errors(args):
    with pytest.raises(ValueError):
        tf.SparseTensor(*args)


def test_operators_with_dense():
    sp = tf.SparseTensor([[0, 1], [1, 0], [2, 3]], [1.0, -2.0, 3.0], [3, 4])
    row = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    col = np.array([[2.0], [4.0], [8.0]], np.float32)
    assert (sp * row).values.numpy().tolist() == [2.0, -2.0, 12.0]
    assert (sp / col).values.numpy().tolist() == [0.5, -0.5, 0.375]


# ---------------------------------------------------------------- conversions
def test_to_dense_from_dense_round_trip():
    rng = np.random.default_rng(0)
    for shape, nnz in (((5, 7), 9), ((2, 3, 4), 6), ((6,), 2), ((4, 3), 0)):
        indices, values = _random_sparse(rng, shape, nnz)
        sp = tf.SparseTensor(indices, values, shape)
        want = _dense(indices, values, shape)
        np.testing.assert_array_equal(tf.sparse.to_dense(sp).numpy(), want)
        np.testing.assert_array_equal(tf.sparse.to_dense(sp, default_value=-1.5).numpy(),
                                      np.where(_dense(indices, np.ones(nnz, bool), shape).astype(bool), want, -1.5))
        back = tf.sparse.from_dense(want)
        assert back.indices.numpy().tolist() == indices.tolist() and back.shape.as_list() == list(shape)
        np.testing.assert_array_equal(back.values.numpy(), values)


def test_from_dense_bool_and_int():
    sp = tf.sparse.from_dense([[True, False], [False, True]])
    assert _entries(sp) == [[[0, 0], [1, 1]], [True, True], [2, 2]]
    sp = tf.sparse.from_dense(tf.constant([[0, 3], [4, 0]], tf.int64))
    assert _entries(sp) == [[[0, 1], [1, 0]], [3, 4], [2, 2]] and sp.dtype == tf.int64


def test_to_dense_validation_eager():
    unordered = tf.SparseTensor([[1, 0], [0, 1]], [1, 2], [2, 2])
    with pytest.raises(InvalidArgumentError, match=r"indices\[1\] = \[0,1\] is out of order"):
        tf.sparse.to_dense(unordered)
    # without validation the values land where they say
    assert tf.sparse.to_dense(unordered, validate_indices=False).numpy().tolist() == [[0, 2], [1, 0]]
    repeated = tf.SparseTensor([[0, 1], [0, 1]], [1.0, 2.0], [3, 4])
    with pytest.raises(InvalidArgumentError, match="is repeated"):
        tf.sparse.to_dense(repeated)
    # TF's SparseToDense assigns in order: the last of a repeated index wins
    assert tf.sparse.to_dense(repeated, validate_indices=False).numpy()[0, 1] == 2.0
    with pytest.raises(InvalidArgumentError, match="out of bounds"):
        tf.sparse.to_dense(tf.SparseTensor([[0, 5]], [1.0], [3, 4]), validate_indices=False)


@pytest.mark.usefixtures("graph_mode")
def test_to_dense_validation_in_session():
    g = tf.Graph()
    with g.as_default():
        sp = tf.compat.v1.sparse_placeholder(tf.float32, shape=[3, 4])
        checked, unchecked = tf.sparse.to_dense(sp), tf.sparse.to_dense(sp, validate_indices=False)
        unknown = tf.compat.v1.sparse_placeholder(tf.float32)          # rank unknown when built
        with_default = tf.sparse.to_dense(unknown, default_value=-1.0)
    s = tf.compat.v1.Session(graph=g)
    bad = tf.compat.v1.SparseTensorValue(np.array([[2, 3], [0, 1]]), np.array([1.0, 2.0], np.float32),
                                         np.array([3, 4]))
    with pytest.raises(InvalidArgumentError):
        s.run(checked, {sp: bad})
    np.testing.assert_array_equal(s.run(unchecked, {sp: bad}), _dense(bad.indices, bad.values, (3, 4)))
    oob = (np.array([[0, 4]]), np.array([1.0], np.float32), np.array([3, 4]))
    with pytest.raises(InvalidArgumentError):
        s.run(unchecked, {sp: oob})
    fed = (np.array([[0, 1, 1], [1, 0, 2]]), np.array([5.0, 6.0], np.float32), np.array([2, 2, 3]))
    want = np.where(_dense(fed[0], [True, True], (2, 2, 3)), _dense(*fed[:2], (2, 2, 3)), -1.0)
    np.testing.assert_array_equal(s.run(with_default, {unknown: fed}), want)


def test_to_indicator():
    ids = tf.SparseTensor([[0, 0], [0, 1], [2, 0]], tf.constant([1, 3, 2], tf.int64), [3, 2])
    want = np.zeros((3, 4), bool)
    want[0, 1] = want[0, 3] = want[2, 2] = True
    np.testing.assert_array_equal(tf.sparse.to_indicator(ids, 4).numpy(), want)
    with pytest.raises(InvalidArgumentError):
        tf.sparse.to_indicator(ids, 3)       # id 3 is outside the vocabulary


# ---------------------------------------------------------------- structure
def test_reorder_and_transpose():
    rng = np.random.default_rng(1)
    indices, values = _random_sparse(rng, (4, 5, 3), 12, shuffle=True)
    sp = tf.SparseTensor(indices, values, [4, 5, 3])
    r = tf.sparse.reorder(sp)
    assert _row_major(r.indices.numpy())
    np.testing.assert_array_equal(tf.sparse.to_dense(r).numpy(), _dense(indices, values, (4, 5, 3)))
    t = tf.sparse.transpose(sp, [2, 0, 1])
    assert _row_major(t.indices.numpy()) and t.shape.as_list() == [3, 4, 5]
    np.testing.assert_array_equal(tf.sparse.to_dense(t).numpy(), _dense(indices, values, (4, 5, 3)).transpose(2, 0, 1))
    t2 = tf.sparse.transpose(tf.SparseTensor([[0, 1], [1, 0], [2, 3]], [1.0, -2.0, 3.0], [3, 4]))
    assert _entries(t2) == [[[0, 1], [1, 0], [3, 2]], [-2.0, 1.0, 3.0], [4, 3]]


def test_reshape():
    sp = tf.SparseTensor([[0, 1], [1, 0], [2, 3]], [1.0, -2.0, 3.0], [3, 4])
    dense = _dense([[0, 1], [1, 0], [2, 3]], [1.0, -2.0, 3.0], (3, 4))
    for shape in ([2, -1], [2, 3, 2], [12], [-1, 4, 1]):
        r = tf.sparse.reshape(sp, shape)
        np.testing.assert_array_equal(tf.sparse.to_dense(r).numpy(), dense.reshape(shape))
        assert r.values.numpy().tolist() == [1.0, -2.0, 3.0]        # the entries keep their order
    for shape in ([5, -1], [5, 2]):
        with pytest.raises(InvalidArgumentError):
            tf.sparse.reshape(sp, shape)


def test_orderings_of_dense_shapes_past_int64():
    """A dense shape of 4 * 2**62 elements: the row-major order and the merge of equal rows do
    not go through a linear index, which would wrap around (TF 2.21 gives the same entries)."""
    big = 2 ** 62
    a = tf.SparseTensor([[3, 5], [1, big - 1], [2, 0], [1, 7]], [1.0, 2.0, 3.0, 4.0], [4, big])
    b = tf.SparseTensor([[1, 7], [2, 0], [3, big - 2]], [10.0, 20.0, 30.0], [4, big])
    r = tf.sparse.reorder(a)
    assert _entries(r)[:2] == [[[1, 7], [1, big - 1], [2, 0], [3, 5]], [4.0, 2.0, 3.0, 1.0]]
    assert _entries(tf.sparse.add(r, b))[:2] == [[[1, 7], [1, big - 1], [2, 0], [3, 5], [3, big - 2]],
                                                 [14.0, 2.0, 23.0, 1.0, 30.0]]
    assert _entries(tf.sparse.maximum(r, b))[1] == [10.0, 2.0, 20.0, 1.0, 30.0]
    assert _entries(tf.sparse.transpose(a))[:2] == [[[0, 2], [5, 3], [7, 1], [big - 1, 1]], [3.0, 1.0, 4.0, 2.0]]
    # (TF's kernels raise on the overflow here; the results are these)
    assert _entries(tf.sparse.reduce_sum(r, 0, output_is_sparse=True)) == \
        [[[0], [5], [7], [big - 1]], [3.0, 1.0, 4.0, 2.0], [big]]
    c = tf.SparseTensor([[0, 1, 0], [0, 1, 2], [0, big, 1]], [3.0, 2.0, 1.0], [1, big + 1, 3])
    e = math.exp(-1.0)
    np.testing.assert_allclose(tf.sparse.softmax(c).values.numpy(), [1 / (1 + e), e / (1 + e), 1.0], rtol=1e-6)
    with pytest.raises(InvalidArgumentError):
        tf.sparse.reshape(a, [-1])


def test_reductions_reject_indices_out_of_bounds():
    with pytest.raises(InvalidArgumentError):
        tf.sparse.reduce_sum(tf.SparseTensor([[0, 5]], [1.0], [2, 3]), 1)
    with pytest.raises(InvalidArgumentError):
        tf.sparse.reduce_max(tf.SparseTensor([[2, 0]], [1.0], [2, 3]), 1)


def test_expand_dims_retain_slice():
    sp = tf.SparseTensor([[0, 1], [1, 0], [2, 3]], [1.0, -2.0, 3.0], [3, 4])
    assert _entries(tf.sparse.expand_dims(sp, 1)) == [[[0, 0, 1], [1, 0, 0], [2, 0, 3]], [1.0, -2.0, 3.0], [3, 1, 4]]
    assert tf.sparse.expand_dims(sp, -1).shape.as_list() == [3, 4, 1]
    with pytest.raises(InvalidArgumentError):
        tf.sparse.expand_dims(sp, 4)
    assert _entries(tf.sparse.retain(sp, [True, False, True])) == [[[0, 1], [2, 3]], [1.0, 3.0], [3, 4]]
    # TF's SparseSlice: [start, start + size) shifted by -start, dims clipped at the end
    assert _entries(tf.sparse.slice(sp, [0, 1], [2, 3])) == [[[0, 0]], [1.0], [2, 3]]
    assert _entries(tf.sparse.slice(sp, [1, 0], [5, 9])) == [[[0, 0], [1, 3]], [-2.0, 3.0], [2, 4]]
    assert _entries(tf.sparse.slice(sp, [4, 1], [5, 2])) == [[], [], [0, 2]]


def test_concat():
    a = tf.SparseTensor([[0, 1], [1, 0], [2, 3]], [1.0, -2.0, 3.0], [3, 4])
    b = tf.SparseTensor([[0, 1], [1, 2], [2, 3]], [4.0, 5.0, -3.0], [3, 4])
    da, db = tf.sparse.to_dense(a).numpy(), tf.sparse.to_dense(b).numpy()
    for axis in (0, 1, -1):
        c = tf.sparse.concat(axis, [a, b])
        assert _row_major(c.indices.numpy())
        np.testing.assert_array_equal(tf.sparse.to_dense(c).numpy(), np.concatenate([da, db], axis))
    wide = tf.SparseTensor([[4, 0]], [9.0], [5, 2])
    with pytest.raises(InvalidArgumentError):
        tf.sparse.concat(1, [a, wide])
    c = tf.sparse.concat(1, [a, wide], expand_nonconcat_dims=True)
    want = np.zeros((5, 6), np.float32)
    want[:3, :4] = da
    want[4, 4] = 9.0
    np.testing.assert_array_equal(tf.sparse.to_dense(c).numpy(), want)


def test_split():
    sp = tf.SparseTensor([[0, 0], [0, 4], [1, 2], [2, 6], [2, 1]], [1.0, 2.0, 3.0, 4.0, 5.0], [3, 7])
    dense = tf.sparse.to_dense(tf.sparse.reorder(sp)).numpy()
    for n, axis in ((3, 1), (2, 0), (7, 1), (1, 1), (3, -1)):
        pieces = tf.sparse.split(sp_input=sp, num_split=n, axis=axis)
        # TF's sizes: the first (dim % n) pieces one longer (np.array_split's)
        want = np.array_split(dense, n, axis=axis)
        assert len(pieces) == n
        for piece, w in zip(pieces, want):
            np.testing.assert_array_equal(tf.sparse.to_dense(tf.sparse.reorder(piece)).numpy(), w)
    assert tf.sparse.split(sp_input=sp, num_split=3, axis=1)[0].values.numpy().tolist() == [1.0, 3.0, 5.0]
    with pytest.raises(InvalidArgumentError):
        tf.sparse.split(sp_input=sp, num_split=4, axis=0)


def test_fill_empty_rows():
    sp = tf.SparseTensor([[0, 1], [0, 3], [2, 0], [4, 2]], [1.0, 2.0, 3.0, 4.0], [6, 4])
    out, empty = tf.sparse.fill_empty_rows(sp, -1.0)
    assert _entries(out) == [[[0, 1], [0, 3], [1, 0], [2, 0], [3, 0], [4, 2], [5, 0]],
                             [1.0, 2.0, -1.0, 3.0, -1.0, 4.0, -1.0], [6, 4]]
    assert empty.numpy().tolist() == [False, True, False, True, False, True]
    out, _ = tf.sparse.fill_empty_rows(tf.SparseTensor([[1, 0, 1]], [5], [3, 2, 2]), 7)
    assert _entries(out) == [[[0, 0, 0], [1, 0, 1], [2, 0, 0]], [7, 5, 7], [3, 2, 2]]


def test_map_values():
    sp = tf.SparseTensor([[0, 1], [2, 0]], [1.0, -4.0], [3, 2])
    assert _entries(tf.sparse.map_values(tf.abs, sp)) == [[[0, 1], [2, 0]], [1.0, 4.0], [3, 2]]
    assert tf.sparse.map_values(tf.add, sp, sp).values.numpy().tolist() == [2.0, -8.0]
    assert tf.sparse.map_values(tf.multiply, sp, 3.0).values.numpy().tolist() == [3.0, -12.0]
    with pytest.raises(ValueError):
        tf.sparse.map_values(tf.abs, tf.constant([1.0]))
    with pytest.raises(InvalidArgumentError):
        tf.sparse.map_values(tf.add, sp, tf.SparseTensor([[0, 0], [2, 0]], [1.0, 2.0], [3, 2]))


def test_eye():
    assert _entries(tf.sparse.eye(3, 2)) == [[[0, 0], [1, 1]], [1.0, 1.0], [3, 2]]
    e = tf.sparse.eye(2, dtype=tf.int32)
    assert e.dtype == tf.int32 and _entries(e) == [[[0, 0], [1, 1]], [1, 1], [2, 2]]


# ---------------------------------------------------------------- arithmetic
def test_add_sparse_sparse_and_dense():
    rng = np.random.default_rng(2)
    ia, va = _random_sparse(rng, (4, 6), 10)
    ib, vb = _random_sparse(rng, (4, 6), 9)
    a, b = tf.SparseTensor(ia, va, [4, 6]), tf.SparseTensor(ib, vb, [4, 6])
    s = tf.sparse.add(a, b)
    union = sorted({tuple(i) for i in ia.tolist()} | {tuple(i) for i in ib.tolist()})
    assert [tuple(i) for i in s.indices.numpy().tolist()] == union
    np.testing.assert_allclose(tf.sparse.to_dense(s).numpy(), _dense(ia, va, (4, 6)) + _dense(ib, vb, (4, 6)),
                               rtol=1e-6)
    dense = rng.standard_normal((4, 6)).astype(np.float32)
    for out in (tf.sparse.add(a, dense), tf.sparse.add(dense, a)):
        np.testing.assert_allclose(out.numpy(), dense + _dense(ia, va, (4, 6)), rtol=1e-6)
    with pytest.raises(InvalidArgumentError):
        tf.sparse.add(a, tf.SparseTensor([[0, 0]], [1.0], [4, 5]))


def test_add_threshold_applies_to_shared_indices_only():
    a = tf.SparseTensor([[0, 1], [1, 0], [2, 3]], [1.0, -2.0, 3.0], [3, 4])
    b = tf.SparseTensor([[0, 1], [1, 2], [2, 3]], [4.0, 0.25, -3.0], [3, 4])
    # (2, 3) sums to 0 < 0.5 and goes; (1, 2) = 0.25 < 0.5 stays: it is in one operand only
    assert _entries(tf.sparse.add(a, b, threshold=0.5)) == [[[0, 1], [1, 0], [1, 2]], [5.0, -2.0, 0.25], [3, 4]]
    assert _entries(tf.sparse.add(a, b))[1] == [5.0, -2.0, 0.25, 0.0]


def test_maximum_minimum():
    a = tf.SparseTensor([[0, 1], [1, 0], [2, 3]], [1.0, -2.0, 3.0], [3, 4])
    b = tf.SparseTensor([[0, 1], [1, 2], [2, 3]], [4.0, 5.0, -3.0], [3, 4])
    da, db = tf.sparse.to_dense(a).numpy(), tf.sparse.to_dense(b).numpy()
    for fn, ref in ((tf.sparse.maximum, np.maximum), (tf.sparse.minimum, np.minimum)):
        out = fn(a, b)
        assert out.indices.numpy().tolist() == [[0, 1], [1, 0], [1, 2], [2, 3]]
        np.testing.assert_array_equal(tf.sparse.to_dense(out).numpy(), ref(da, db))


@pytest.mark.parametrize("adjoint_a", [False, True])
@pytest.mark.parametrize("adjoint_b", [False, True])
def test_sparse_dense_matmul_values(adjoint_a, adjoint_b):
    rng = np.random.default_rng(4)
    shape = (5, 3) if adjoint_a else (3, 5)
    indices, values = _random_sparse(rng, shape, 6)
    a = _dense(indices, values, shape)
    b = rng.standard_normal((2, 5) if adjoint_b else (5, 2)).astype(np.float32)
    want = (a.T if adjoint_a else a) @ (b.T if adjoint_b else b)
    got = tf.sparse.sparse_dense_matmul(tf.SparseTensor(indices, values, shape), b, adjoint_a, adjoint_b)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("adjoint_a", [False, True])
@pytest.mark.parametrize("adjoint_b", [False, True])
def test_complex_values(adjoint_a, adjoint_b):
    """Complex values: the adjoints conjugate, sums keep both parts (numpy reference)."""
    rng = np.random.default_rng(8)
    indices, re = _random_sparse(rng, (3, 3), 4)
    values = (re + 1j * rng.standard_normal(4)).astype(np.complex64)
    a = _dense(indices, values, (3, 3))
    b = (rng.standard_normal((3, 2)) + 1j * rng.standard_normal((3, 2))).astype(np.complex64)
    b = b.conj().T if adjoint_b else b
    sp = tf.SparseTensor(indices, values, [3, 3])
    want = (a.conj().T if adjoint_a else a) @ (b.conj().T if adjoint_b else b)
    np.testing.assert_allclose(tf.sparse.sparse_dense_matmul(sp, b, adjoint_a, adjoint_b).numpy(), want, rtol=1e-5)
    np.testing.assert_allclose(tf.sparse.reduce_sum(sp, 1).numpy(), a.sum(1), rtol=1e-6)
    np.testing.assert_allclose(tf.sparse.to_dense(tf.sparse.add(sp, sp)).numpy(), 2 * a, rtol=1e-6)


def test_dense_times_sparse_and_errors():
    sp = tf.SparseTensor([[0, 1], [1, 0], [2, 3]], [1.0, -2.0, 3.0], [3, 4])
    d = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(tf.sparse.sparse_dense_matmul(d, sp).numpy(), d @ tf.sparse.to_dense(sp).numpy())
    with pytest.raises(InvalidArgumentError):
        tf.sparse.sparse_dense_matmul(sp, tf.ones([3, 2]))                    # inner dims 4 vs 3
    with pytest.raises(InvalidArgumentError):
        tf.sparse.sparse_dense_matmul(tf.SparseTensor([[0, 7]], [1.0], [3, 4]), tf.ones([4, 2]))
    with pytest.raises(InvalidArgumentError):          # float64 values, a float32 operand
        tf.sparse.sparse_dense_matmul(tf.SparseTensor([[0, 1]], tf.constant([2.0], tf.float64), [2, 2]), tf.ones([2, 3]))


def test_sparse_dense_matmul_gradients_eager():
    """d/dvalues sum((A B) * W) = (W B^T) at each index; d/dB = A^T W (hand algebra), and
    central finite differences in float64."""
    rng = np.random.default_rng(5)
    indices, values = _random_sparse(rng, (4, 3), 5)
    values = values.astype(np.float64)
    b = rng.standard_normal((3, 2))
    w = rng.standard_normal((4, 2))
    v, bt = tf.constant(values), tf.constant(b)

    def loss(vals, bb):
        return tf.reduce_sum(tf.sparse.sparse_dense_matmul(tf.SparseTensor(indices, vals, [4, 3]), bb) * w)
    with tf.GradientTape() as tape:
        tape.watch([v, bt])
        y = loss(v, bt)
    gv, gb = tape.gradient(y, [v, bt])
    wbt = w @ b.T
    np.testing.assert_allclose(gv.numpy(), [wbt[i, j] for i, j in indices], rtol=1e-12)
    np.testing.assert_allclose(gb.numpy(), _dense(indices, values, (4, 3)).T @ w, rtol=1e-12)
    eps = 1e-6
    for k in range(len(values)):
        step = np.zeros_like(values)
        step[k] = eps
        fd = (loss(tf.constant(values + step), bt).numpy() - loss(tf.constant(values - step), bt).numpy()) / (2 * eps)
        assert abs(fd - gv.numpy()[k]) < 1e-6


def test_sparse_dense_matmul_gradients_match_tf():
    # TF 2.21 printed these for the same program
    b = tf.constant(np.arange(8, dtype=np.float32).reshape(4, 2))
    v = tf.Variable([1.0, 2.0, -1.0])
    with tf.GradientTape() as t:
        t.watch(b)
        y = tf.sparse.sparse_dense_matmul(tf.SparseTensor([[1, 1], [0, 1], [3, 0]], v, [4, 3]), b, adjoint_a=True)
        loss = tf.reduce_sum(y * y)
    gv, gb = t.gradient(loss, [v, b])
    assert gv.numpy().tolist() == [38.0, 10.0, -170.0]
    assert gb.numpy().tolist() == [[8.0, 20.0], [4.0, 10.0], [0.0, 0.0], [12.0, 14.0]]


# ---------------------------------------------------------------- reductions, softmax
def test_reduce_sum_and_max():
    rng = np.random.default_rng(6)
    indices, values = _random_sparse(rng, (3, 4, 5), 14)
    sp = tf.SparseTensor(indices, values, [3, 4, 5])
    dense = _dense(indices, values, (3, 4, 5))
    present = _dense(indices, np.ones(len(values), bool), (3, 4, 5)).astype(bool)
    for axis in (None, 0, 1, -1, [0, 2]):
        for keepdims in (False, True):
            np.testing.assert_allclose(tf.sparse.reduce_sum(sp, axis, keepdims).numpy(),
                                       dense.sum(axis=None if axis is None else tuple(np.atleast_1d(axis)),
                                                 keepdims=keepdims), rtol=1e-5, atol=1e-6)
            # TF's SparseReduceMax: the max of the entries present, 0 for a group without any
            ax = None if axis is None else tuple(np.atleast_1d(axis))
            masked = np.where(present, dense, -np.inf).max(axis=ax, keepdims=keepdims)
            want = np.where(np.isneginf(masked), 0.0, masked)
            np.testing.assert_array_equal(tf.sparse.reduce_max(sp, axis, keepdims).numpy(), want)


def test_reduce_output_is_sparse():
    sp = tf.SparseTensor([[0, 1], [0, 3], [2, 0]], [3.0, -1.0, 2.0], [3, 4])
    assert _entries(tf.sparse.reduce_sum(sp, 1, output_is_sparse=True)) == [[[0], [2]], [2.0, 2.0], [3]]
    assert _entries(tf.sparse.reduce_max(sp, 1, output_is_sparse=True)) == [[[0], [2]], [3.0, 2.0], [3]]
    assert _entries(tf.sparse.reduce_sum(sp, 1, keepdims=True, output_is_sparse=True)) == \
        [[[0, 0], [2, 0]], [2.0, 2.0], [3, 1]]
    assert _entries(tf.compat.v1.sparse_reduce_sum_sparse(sp, 0)) == [[[0], [1], [3]], [2.0, 3.0, -1.0], [4]]
    # every axis: one entry of rank 0 (TF 2.21 prints the same)
    assert _entries(tf.sparse.reduce_sum(sp, output_is_sparse=True)) == [[[]], [4.0], []]
    assert _entries(tf.sparse.reduce_max(tf.SparseTensor(np.zeros((0, 2), np.int64), [], [3, 4]),
                                         output_is_sparse=True)) == [[], [], []]


def test_softmax():
    sp = tf.SparseTensor([[0, 0, 1], [0, 0, 2], [1, 1, 0]], [1.0, 2.0, 5.0], [2, 2, 3])
    got = tf.sparse.softmax(sp)
    e = np.exp([1.0 - 2.0, 0.0])
    np.testing.assert_allclose(got.values.numpy(), [e[0] / e.sum(), e[1] / e.sum(), 1.0], rtol=1e-6)
    assert got.indices.numpy().tolist() == [[0, 0, 1], [0, 0, 2], [1, 1, 0]]


# ---------------------------------------------------------------- embedding lookups
def _lookup_reference(params, rows, ids, weights, combiner, n_rows):
    out = np.zeros((n_rows, params.shape[1]))
    for r in range(n_rows):
        sel = [k for k in range(len(ids)) if rows[k] == r]
        if not sel:
            continue
        w = np.array([weights[k] for k in sel])
        s = sum(w_k * params[ids[k]] for w_k, k in zip(w, sel))
        norm = {"sum": 1.0, "mean": w.sum(), "sqrtn": math.sqrt((w ** 2).sum())}[combiner]
        out[r] = s / norm
    return out


@pytest.mark.parametrize("combiner", ["sum", "mean", "sqrtn"])
def test_embedding_lookup_sparse(combiner):
    params = np.arange(15, dtype=np.float32).reshape(5, 3) / 4
    indices = [[0, 0], [0, 1], [1, 0], [3, 0], [3, 1], [3, 2]]
    ids, weights = [1, 3, 2, 0, 4, 4], [2.0, 1.0, 0.5, 1.5, 0.25, 3.0]
    sp_ids = tf.SparseTensor(indices, tf.constant(ids, tf.int64), [5, 3])
    sp_w = tf.SparseTensor(indices, weights, [5, 3])
    rows = [i for i, _ in indices]
    # as TF: max(row) + 1 rows (4 here, not 5); row 2 has no ids: zeros
    got = tf.nn.embedding_lookup_sparse(params, sp_ids, sp_w, combiner=combiner).numpy()
    np.testing.assert_allclose(got, _lookup_reference(params, rows, ids, weights, combiner, 4), rtol=1e-6)
    got = tf.nn.embedding_lookup_sparse(params, sp_ids, None, combiner=combiner).numpy()
    np.testing.assert_allclose(got, _lookup_reference(params, rows, ids, [1.0] * 6, combiner, 4), rtol=1e-6)
    safe = tf.nn.safe_embedding_lookup_sparse(params, sp_ids, sp_w, combiner=combiner).numpy()
    np.testing.assert_allclose(safe, _lookup_reference(params, rows, ids, weights, combiner, 5), rtol=1e-6)


def test_embedding_lookup_sparse_unweighted_rounding_matches_tf():
    # TF 2.21's sparse_segment_mean / sqrt_n multiply by 1/n (1/sqrt(n)); these bits are TF's
    params = tf.constant([[1.0], [3.0], [6.0], [7.0]])
    ids = tf.SparseTensor([[0, 0], [0, 1], [0, 2], [1, 0], [1, 1]], tf.constant([0, 1, 2, 0, 3], tf.int64), [2, 3])
    mean = tf.nn.embedding_lookup_sparse(params, ids, None, combiner="mean").numpy().ravel()
    sqrtn = tf.nn.embedding_lookup_sparse(params, ids, None, combiner="sqrtn").numpy().ravel()
    assert [float(x).hex() for x in mean] == ["0x1.aaaaac0000000p+1", "0x1.0000000000000p+2"]
    assert [float(x).hex() for x in sqrtn] == ["0x1.7181100000000p+2", "0x1.6a09e60000000p+2"]


def test_safe_embedding_lookup_prunes_and_keeps_batch_dims():
    params = np.arange(12, dtype=np.float32).reshape(4, 3)
    # [2, 2, 2] ids: -1 is dropped, weight 0 is dropped (mean), batch [1, 0] ends empty
    sp_ids = tf.SparseTensor([[0, 0, 0], [0, 0, 1], [0, 1, 0], [1, 0, 0], [1, 1, 1]],
                             tf.constant([1, 2, -1, 3, 0], tf.int64), [2, 2, 2])
    sp_w = tf.SparseTensor(sp_ids.indices, [1.0, 3.0, 5.0, 0.0, 2.0], [2, 2, 2])
    got = tf.nn.safe_embedding_lookup_sparse(params, sp_ids, sp_w).numpy()
    want = np.zeros((2, 2, 3), np.float32)
    want[0, 0] = (params[1] + 3 * params[2]) / 4
    want[1, 1] = params[0]
    np.testing.assert_allclose(got, want, rtol=1e-6)
    with_default = tf.nn.safe_embedding_lookup_sparse(params, sp_ids, sp_w, default_id=2).numpy()
    want[0, 1] = want[1, 0] = params[2]
    np.testing.assert_allclose(with_default, want, rtol=1e-6)


def test_embedding_lookup_sparse_gradient_wrt_variable():
    params = tf.Variable(np.arange(12, dtype=np.float32).reshape(4, 3))
    sp_ids = tf.SparseTensor([[0, 0], [0, 1], [1, 0]], tf.constant([1, 3, 1], tf.int64), [2, 2])
    sp_w = tf.SparseTensor([[0, 0], [0, 1], [1, 0]], [2.0, 1.0, 0.5], [2, 2])
    with tf.GradientTape() as tape:
        y = tf.nn.embedding_lookup_sparse(params, sp_ids, sp_w, combiner="mean")
        loss = tf.reduce_sum(y * np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], np.float32))
    grad = tape.gradient(loss, params)
    # d/dparams[id] = sum over its occurrences of weight / row weight sum * upstream row
    want = np.zeros((4, 3), np.float32)
    want[1] += 2.0 / 3.0 * np.array([1.0, 2.0, 3.0]) + 1.0 * np.array([4.0, 5.0, 6.0])
    want[3] += 1.0 / 3.0 * np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(tf.convert_to_tensor(grad).numpy(), want, rtol=1e-6)
    # as TF's: IndexedSlices of the distinct ids (first occurrence order), each row summed once,
    # so an optimizer that squares the rows (Adam) sees what TF's sees
    assert isinstance(grad, tf.IndexedSlices) and grad.indices.numpy().tolist() == [1, 3]
    np.testing.assert_allclose(grad.values.numpy(), want[[1, 3]], rtol=1e-6)


def test_adam_training_through_safe_lookup_follows_tf():
    """Six Adam steps of a traced step through safe_embedding_lookup_sparse (pruned ids,
    weights, sqrtn). The losses and the table are TF 2.21's (to float32 rounding: jitgrad's
    matmul rounds 1.75 as 1.7500001); a gradient of one slice per occurrence drifted by 20%."""
    emb = tf.Variable(np.arange(20, dtype=np.float32).reshape(5, 4) / 10)
    w = tf.Variable(np.ones((4, 1), np.float32) / 4)
    opt = tf.keras.optimizers.Adam(0.1)

    @tf.function
    def step(ids, weights, y):
        with tf.GradientTape() as t:
            h = tf.nn.safe_embedding_lookup_sparse(emb, ids, weights, combiner="sqrtn")
            loss = tf.reduce_mean(tf.square(tf.matmul(h, w) - y))
        g = t.gradient(loss, [emb, w])
        opt.apply_gradients(zip(g, [emb, w]))
        return loss

    def batch(indices, ids, weights, y):
        return (tf.SparseTensor(indices, tf.constant(ids, tf.int64), [3, 2]),
                tf.SparseTensor(indices, weights, [3, 2]), tf.constant(y))
    batches = [batch([[0, 0], [0, 1], [2, 0]], [1, 3, 4], [1.0, 2.0, 0.5], [[1.0], [0.0], [2.0]]),
               batch([[0, 0], [1, 0], [1, 1], [2, 1]], [0, 2, 2, -1], [1.0, 1.0, 3.0, 1.0], [[0.5], [1.0], [0.0]])]
    losses = [float(step(*batches[i % 2])) for i in range(6)]
    np.testing.assert_allclose(losses, [0.08937055617570877, 0.08197751641273499, 0.12508149445056915,
                                        0.061817944049835205, 0.07162470370531082, 0.06178155913949013], rtol=2e-5)
    np.testing.assert_allclose(emb.numpy()[[0, 1, 4]], [[0.32746, 0.42768, 0.52782, 0.62792],
                                                        [0.05712, 0.15719, 0.25722, 0.35725],
                                                        [1.93222, 2.03178, 2.13146, 2.23123]], rtol=1e-4)


@pytest.mark.parametrize("num_segments", [None, 5])
def test_sparse_segment_reductions(num_segments):
    data = np.arange(12, dtype=np.float32).reshape(4, 3) / 3
    idx, ids = [0, 2, 3, 1, 1], [0, 0, 2, 2, 2]
    n = 3 if num_segments is None else num_segments          # max id + 1, or num_segments
    total = np.zeros((n, 3), np.float32)
    count = np.zeros(n, np.float32)
    for i, s in zip(idx, ids):
        total[s] += data[i]
        count[s] += 1
    inv = np.divide(1, count, out=np.zeros_like(count), where=count > 0).astype(np.float32)
    inv_sqrt = np.divide(1, np.sqrt(count), out=np.zeros_like(count), where=count > 0).astype(np.float32)
    np.testing.assert_allclose(tf.sparse.segment_sum(data, idx, ids, num_segments).numpy(), total, rtol=1e-6)
    np.testing.assert_allclose(tf.sparse.segment_mean(data, idx, ids, num_segments).numpy(), total * inv[:, None],
                               rtol=1e-6)
    np.testing.assert_allclose(tf.sparse.segment_sqrt_n(data, idx, ids, num_segments).numpy(),
                               total * inv_sqrt[:, None], rtol=1e-6)


def test_sparse_segment_errors_and_gradient():
    data = tf.constant(np.arange(12, dtype=np.float32).reshape(4, 3))
    with pytest.raises(InvalidArgumentError):
        tf.sparse.segment_sum(data, [0, 2, 3], [0, 2, 1])         # ids not sorted
    with pytest.raises(InvalidArgumentError):
        tf.sparse.segment_mean(data, [0, 9], [0, 0])              # index out of range
    v = tf.Variable(data)
    up = np.arange(9, dtype=np.float32).reshape(3, 3)
    with tf.GradientTape() as t:
        y = tf.reduce_sum(tf.sparse.segment_sqrt_n(v, [0, 2, 3, 1, 1], [0, 0, 2, 2, 2]) * up)
    want = np.zeros((4, 3), np.float32)
    for i, s, n in zip([0, 2, 3, 1, 1], [0, 0, 2, 2, 2], [2, 2, 3, 3, 3]):
        want[i] += up[s] / np.sqrt(n)
    np.testing.assert_allclose(tf.convert_to_tensor(t.gradient(y, v)).numpy(), want, rtol=1e-6)


# ---------------------------------------------------------------- Session and tf.function
@pytest.mark.usefixtures("graph_mode")
def test_session_feed_and_fetch():
    g = tf.Graph()
    with g.as_default():
        sp = tf.compat.v1.sparse_placeholder(tf.float32, shape=[3, 4])
        b = tf.compat.v1.placeholder(tf.float32, [4, 2])
        mm = tf.sparse.sparse_dense_matmul(sp, b)
        gv, gb = tf.compat.v1.gradients(tf.reduce_sum(mm * mm), [sp.values, b])
        reordered = tf.sparse.reorder(sp)
        summed = tf.sparse.reduce_sum(sp, 1)
    s = tf.compat.v1.Session(graph=g)
    val = tf.compat.v1.SparseTensorValue(np.array([[0, 1], [2, 3], [0, 3]]), np.array([1.0, 2.0, 3.0], np.float32),
                                         np.array([3, 4]))
    bv = np.arange(8, dtype=np.float32).reshape(4, 2)
    a = _dense(val.indices, val.values, (3, 4))
    got_mm, got_gv, got_gb = s.run([mm, gv, gb], {sp: val, b: bv})
    np.testing.assert_allclose(got_mm, a @ bv)
    up = 2 * (a @ bv)                                   # d sum(y^2) / dy
    np.testing.assert_allclose(got_gv, [(up @ bv.T)[i, j] for i, j in val.indices])
    np.testing.assert_allclose(got_gb, a.T @ up)
    fetched = s.run({"r": reordered, "s": summed}, {sp: tuple(val)})
    assert isinstance(fetched["r"], tf.compat.v1.SparseTensorValue)
    assert fetched["r"].indices.tolist() == [[0, 1], [0, 3], [2, 3]] and fetched["r"].values.tolist() == [1, 3, 2]
    np.testing.assert_allclose(fetched["s"], a.sum(1))


@pytest.mark.usefixtures("graph_mode")
def test_fed_dense_shape_overrides_the_placeholder_default():
    """A sparse_placeholder's shape is only the default of its dense_shape: ops take the fed
    one (TF 2.21 gives these shapes), while .shape stays the declared one."""
    g = tf.Graph()
    with g.as_default():
        sp = tf.compat.v1.sparse_placeholder(tf.float32, shape=[3, 4])
        dense = tf.sparse.to_dense(sp)
        summed = tf.sparse.reduce_sum(sp, 0)
        looked_up = tf.nn.safe_embedding_lookup_sparse(tf.ones([8, 2]), tf.sparse.map_values(
            lambda v: tf.cast(v, tf.int64), sp))
    assert sp.shape.as_list() == [3, 4]
    s = tf.compat.v1.Session(graph=g)
    feed = {sp: (np.array([[0, 1], [1, 4]]), np.array([1.0, 2.0], np.float32), np.array([2, 5]))}
    assert s.run(dense, feed).tolist() == _dense([[0, 1], [1, 4]], np.float32([1.0, 2.0]), (2, 5)).tolist()
    assert s.run(summed, feed).tolist() == [0.0, 1.0, 0.0, 0.0, 2.0]
    assert s.run(looked_up, feed).tolist() == [[1.0, 1.0], [1.0, 1.0]]
    # the default when the shape is not fed
    feed = {sp.indices: np.array([[2, 3]]), sp.values: np.array([5.0], np.float32)}
    assert s.run(dense, feed).tolist() == _dense([[2, 3]], np.float32([5.0]), (3, 4)).tolist()


def test_function_takes_and_returns_sparse():
    traces = []

    @tf.function
    def f(sp, b):
        traces.append(sp.shape.as_list())
        return tf.sparse.sparse_dense_matmul(sp, b), tf.sparse.reorder(sp)

    b = np.arange(8, dtype=np.float32).reshape(4, 2)
    for indices, values in (([[2, 3], [0, 1]], [1.0, 2.0]), ([[1, 1], [0, 1], [2, 0]], [1.0, 2.0, -1.0])):
        y, r = f(tf.SparseTensor(indices, values, [3, 4]), tf.constant(b))
        np.testing.assert_allclose(y.numpy(), _dense(indices, np.float32(values), (3, 4)) @ b)
        assert isinstance(r, tf.SparseTensor) and _row_major(r.indices.numpy())
        assert sorted(zip(map(tuple, indices), values)) == list(zip(map(tuple, r.indices.numpy().tolist()),
                                                                    r.values.numpy().tolist()))
    assert traces == [[3, 4]]          # one trace for both entry counts (TF's SparseTensorSpec)


def test_function_relaxed_shapes_and_concrete_function():
    """A SparseTensor among relaxed (reduce_retracing) or TensorSpec arguments: the specs of
    the dense arguments stay theirs."""
    @tf.function(reduce_retracing=True)
    def f(x, sp, y):
        return x * 2 + tf.sparse.reduce_sum(sp) + y
    for n in (2, 3, 4):
        got = f(tf.ones([n]), tf.SparseTensor([[0, 1]], [5.0], [2, 2]), tf.ones([n]))
        assert got.numpy().tolist() == [8.0] * n
    c = tf.function(lambda x, sp: x + tf.sparse.reduce_sum(sp)).get_concrete_function(
        tf.TensorSpec([None], tf.float32), tf.SparseTensor([[0, 1]], [5.0], [2, 2]))
    assert c(tf.ones([3]), tf.SparseTensor([[0, 1], [1, 1]], [5.0, 1.0], [2, 2])).numpy().tolist() == [7.0] * 3


def test_function_compiled_matches_eager():
    rng = np.random.default_rng(7)
    indices, values = _random_sparse(rng, (6, 5), 11)
    b = rng.standard_normal((5, 3)).astype(np.float32)

    def body(v, bb):
        sp = tf.SparseTensor(indices, v, [6, 5])
        return (tf.sparse.sparse_dense_matmul(sp, bb, adjoint_b=False), tf.sparse.reduce_max(sp, 0),
                tf.sparse.softmax(sp).values, tf.sparse.to_dense(sp, default_value=2.0))
    compiled = tf.function(body)(tf.constant(values), tf.constant(b))
    eager = body(tf.constant(values), tf.constant(b))
    for c, e in zip(compiled, eager):
        np.testing.assert_allclose(c.numpy(), e.numpy(), rtol=1e-6, atol=1e-7)


# ---------------------------------------------------------------- bad input: TF 2.21's error types
@pytest.mark.parametrize("make", [
    lambda: tf.sparse.to_dense(tf.SparseTensor([[0, 1]], [1.0], [4, 2 ** 62])),        # too many elements
    lambda: tf.sparse.to_dense(tf.SparseTensor([[0, 0]], [1.0], [-1, 2])),
    lambda: tf.sparse.sparse_dense_matmul(tf.SparseTensor([[0, -1]], [1.0], [2, 3]), tf.ones([3, 2])),
    lambda: tf.sparse.sparse_dense_matmul(tf.SparseTensor([[-1, 0]], [1.0], [2, 3]), tf.ones([3, 2])),
    lambda: tf.sparse.fill_empty_rows(tf.SparseTensor([[5, 0]], [1.0], [2, 3]), 0.0),
    lambda: tf.sparse.fill_empty_rows(tf.SparseTensor([[-1, 0]], [1.0], [2, 3]), 0.0),
    lambda: tf.sparse.softmax(tf.SparseTensor([[0]], [1.0], [2])),                     # rank 1
    lambda: tf.sparse.to_indicator(tf.SparseTensor([[0, 0]], tf.constant([-1], tf.int64), [1, 1]), 3),
    lambda: tf.sparse.add(tf.SparseTensor([[0, 0]], [1.0], [1, 1]), tf.SparseTensor([[0, 0]], [1], [1, 1])),
    lambda: tf.nn.embedding_lookup_sparse(tf.ones([3, 2]), tf.SparseTensor([[0, 0]], tf.constant([5], tf.int64),
                                                                           [1, 1]), None),
    # segment_sum over the rows needs them sorted, as TF's
    lambda: tf.nn.embedding_lookup_sparse(
        tf.ones([3, 2]), tf.SparseTensor([[1, 0], [0, 0]], tf.constant([1, 2], tf.int64), [2, 1]), None),
])
def test_bad_input_is_invalid_argument(make):
    with pytest.raises(InvalidArgumentError):
        make()


@pytest.mark.usefixtures("graph_mode")
def test_bad_indices_in_session():
    g = tf.Graph()
    with g.as_default():
        sp = tf.compat.v1.sparse_placeholder(tf.float32, shape=[None, None])
        mm = tf.sparse.sparse_dense_matmul(sp, tf.ones([3, 2]))
        summed = tf.sparse.reduce_sum(sp, 1)
        filled = tf.sparse.fill_empty_rows(sp, 0.0)[0].values
    s = tf.compat.v1.Session(graph=g)
    shape = np.array([2, 3])
    for bad in ([[0, -1]], [[0, 3]], [[-1, 0]], [[2, 0]]):
        feed = {sp: (np.array(bad), np.array([1.0], np.float32), shape)}
        for fetch in (mm, summed, filled) if bad[0][0] in (-1, 2) else (mm, summed):
            with pytest.raises(InvalidArgumentError):
                s.run(fetch, feed)
