"""Data-movement and source ops in graph mode: reshape, transpose, expand_dims,
squeeze, concat, stack/unstack, slicing, gather, tile, broadcast_to, fills.
Values against numpy, static shapes (including unknown dims), gradients
against finite differences."""
import numpy as np
import pytest

import jitgrad as tf
from _graph_testing import check_op, session

pytestmark = pytest.mark.usefixtures("graph_mode")

R = np.random.default_rng(11)
X234 = R.uniform(-1, 1, (2, 3, 4))

LAYOUT = [
    ("reshape", lambda x: tf.reshape(x, [4, 6]), lambda x: x.reshape(4, 6)),
    ("reshape_-1", lambda x: tf.reshape(x, [-1, 2]), lambda x: x.reshape(-1, 2)),
    ("reshape_tensor_shape", lambda x: tf.reshape(x, tf.constant([3, 8])), lambda x: x.reshape(3, 8)),
    ("transpose_default", tf.transpose, lambda x: x.T),
    ("transpose_perm", lambda x: tf.transpose(x, perm=[1, 2, 0]), lambda x: x.transpose(1, 2, 0)),
    ("transpose_neg_perm", lambda x: tf.transpose(x, [0, -1, 1]), lambda x: x.transpose(0, 2, 1)),
    ("expand_dims_0", lambda x: tf.expand_dims(x, 0), lambda x: x[None]),
    ("expand_dims_-1", lambda x: tf.expand_dims(x, -1), lambda x: x[..., None]),
    ("expand_dims_mid", lambda x: tf.expand_dims(x, 2), lambda x: x[:, :, None]),
    ("squeeze_axis", lambda x: tf.squeeze(tf.reshape(x, [2, 1, 3, 4, 1]), axis=[1, -1]), lambda x: x),
    ("squeeze_all", lambda x: tf.squeeze(tf.reshape(x, [1, 2, 1, 12])), lambda x: x.reshape(2, 12)),
    ("concat_0", lambda x: tf.concat([x, 2 * x], 0), lambda x: np.concatenate([x, 2 * x], 0)),
    ("concat_-1", lambda x: tf.concat([x, x[:, :, :1], x * x], axis=-1),
     lambda x: np.concatenate([x, x[:, :, :1], x * x], -1)),
    ("stack_0", lambda x: tf.stack([x, x * 3]), lambda x: np.stack([x, 3 * x])),
    ("stack_axis", lambda x: tf.stack([x, -x, x * x], axis=2), lambda x: np.stack([x, -x, x * x], 2)),
    ("stack_-1", lambda x: tf.stack([x, -x], axis=-1), lambda x: np.stack([x, -x], -1)),
    ("unstack", lambda x: tf.stack(tf.unstack(x, axis=1)[::-1], axis=0), lambda x: np.stack([x[:, 2], x[:, 1], x[:, 0]])),
    ("tile", lambda x: tf.tile(x, [2, 1, 3]), lambda x: np.tile(x, (2, 1, 3))),
    ("broadcast_to", lambda x: tf.broadcast_to(x[:, :1, :], [5, 2, 3, 4]),
     lambda x: np.broadcast_to(x[:, :1, :], (5, 2, 3, 4))),
    ("gather_0", lambda x: tf.gather(x, [1, 0, 1]), lambda x: x[[1, 0, 1]]),
    ("gather_axis", lambda x: tf.gather(x, [[3, 0], [3, 3]], axis=2), lambda x: x[:, :, [[3, 0], [3, 3]]]),
    ("gather_neg_axis", lambda x: tf.gather(x, tf.constant([2, 2, 0]), axis=-2), lambda x: x[:, [2, 2, 0], :]),
]

SLICES = [
    ("int", lambda x: x[1], lambda x: x[1]),
    ("neg_int", lambda x: x[-1, 2], lambda x: x[-1, 2]),
    ("slice", lambda x: x[:, 1:], lambda x: x[:, 1:]),
    ("step", lambda x: x[:, ::2, 1::2], lambda x: x[:, ::2, 1::2]),
    ("neg_step", lambda x: x[::-1, :, ::-2], lambda x: x[::-1, :, ::-2]),
    ("ellipsis", lambda x: x[..., 1], lambda x: x[..., 1]),
    ("ellipsis_mid", lambda x: x[0, ..., 1:3], lambda x: x[0, ..., 1:3]),
    ("newaxis", lambda x: x[:, tf.newaxis, 1, None], lambda x: x[:, None, 1, None]),
    ("empty", lambda x: x[:, 2:2], lambda x: x[:, 2:2]),
    ("tensor_index", lambda x: x[tf.constant(1), :, tf.constant(-1)], lambda x: x[1, :, -1]),
    ("clamped", lambda x: x[:, 1:100, -100:2], lambda x: x[:, 1:100, -100:2]),
]


@pytest.mark.parametrize("name, fn, ref", LAYOUT + SLICES, ids=[c[0] for c in LAYOUT + SLICES])
def test_layout_value_shape_and_gradient(name, fn, ref):
    check_op(fn, X234, expected=ref(X234), value_rtol=0)


def test_layout_ops_float32_int32_and_bool_keep_dtype():
    g = tf.Graph()
    with g.as_default():
        i = tf.constant(np.arange(24, dtype=np.int32).reshape(2, 3, 4))
        b = tf.constant(np.arange(6).reshape(2, 3) % 2 == 0)
        outs = [tf.reshape(i, [6, 4]), tf.transpose(b), i[:, 1], tf.concat([b, b], 1), tf.stack([i, i]),
                tf.gather(i, [1]), tf.tile(b, [2, 2]), tf.expand_dims(b, 0), tf.broadcast_to(b[0], [2, 3])]
        assert [o.dtype for o in outs] == [tf.int32, tf.bool, tf.int32, tf.bool, tf.int32, tf.int32, tf.bool,
                                           tf.bool, tf.bool]
    v = session(g).run(outs)
    ai = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    ab = np.arange(6).reshape(2, 3) % 2 == 0
    for got, ref in zip(v, [ai.reshape(6, 4), ab.T, ai[:, 1], np.concatenate([ab, ab], 1), np.stack([ai, ai]),
                            ai[[1]], np.tile(ab, (2, 2)), ab[None], np.broadcast_to(ab[0], (2, 3))]):
        np.testing.assert_array_equal(got, ref)
        assert got.dtype == ref.dtype


def test_static_shapes_with_unknown_dims():
    with tf.Graph().as_default():
        p = tf.compat.v1.placeholder(tf.float32, [None, 3, 4])
        u = tf.compat.v1.placeholder(tf.float32)
        assert p.shape.as_list() == [None, 3, 4] and u.shape.rank is None
        assert tf.reshape(p, [-1, 12]).shape.as_list() == [None, 12]
        assert tf.reshape(p, [2, 6, 4]).shape.as_list() == [2, 6, 4]
        assert tf.transpose(p, [2, 0, 1]).shape.as_list() == [4, None, 3]
        assert tf.transpose(p).shape.as_list() == [4, 3, None]
        assert tf.expand_dims(p, 1).shape.as_list() == [None, 1, 3, 4]
        assert tf.squeeze(tf.expand_dims(p, 1), [1]).shape.as_list() == [None, 3, 4]
        assert tf.concat([p, p], 0).shape.as_list() == [None, 3, 4]
        assert tf.concat([p, p], 1).shape.as_list() == [None, 6, 4]
        assert tf.stack([p, p], 1).shape.as_list() == [None, 2, 3, 4]
        assert p[:, 1].shape.as_list() == [None, 4]
        assert p[1:, :2, ::2].shape.as_list() == [None, 2, 2]
        assert tf.tile(p, [2, 1, 2]).shape.as_list() == [None, 3, 8]
        assert tf.gather(p, [0, 1, 1], axis=1).shape.as_list() == [None, 3, 4]
        assert tf.broadcast_to(p[:1], [5, 3, 4]).shape.as_list() == [5, 3, 4]
        assert (p + tf.zeros([3, 1])).shape.as_list() == [None, 3, 4]
        assert (p * u).shape.rank is None
        assert tf.reduce_sum(u).shape.as_list() == []
        assert tf.shape(p).shape.as_list() == [3]
        assert tf.zeros_like(p).shape.as_list() == [None, 3, 4]


def test_unknown_dims_run_with_several_batch_sizes_and_gradients():
    g = tf.Graph()
    with g.as_default():
        p = tf.compat.v1.placeholder(tf.float64, [None, 3])
        y = tf.concat([tf.reshape(p, [-1]), tf.reduce_mean(p, axis=0)], 0)
        loss = tf.reduce_sum(tf.square(y)) + tf.reduce_mean(p)
        (gp,) = tf.gradients(loss, p)
        assert gp.shape.as_list() == [None, 3]
    sess = session(g)
    for n in (1, 4):
        x = np.arange(3.0 * n).reshape(n, 3)
        yv, gv = sess.run([y, gp], {p: x})
        np.testing.assert_allclose(yv, np.concatenate([x.ravel(), x.mean(0)]))
        np.testing.assert_allclose(gv, 2 * x + 2 * x.mean(0) / n + 1 / x.size, rtol=1e-12)


def test_reshape_with_two_minus_ones_builds_and_fails_as_it_runs():
    """TF 2.21: a Reshape target with two -1s passes its shape function (those dims unknown)
    and its kernel raises InvalidArgumentError ("Only one input size may be -1, not both 0
    and 1") when the graph runs -- also of an input of a known shape, in a tf.function, and
    eagerly."""
    g = tf.Graph()
    with g.as_default():
        known = tf.reshape(tf.zeros([2, 3]), [-1, -1])
        shape = tf.compat.v1.placeholder(tf.int32, [3])
        fed = tf.reshape(tf.zeros([2, 3]), shape)
        assert known.shape.as_list() == [None, None]
    s = session(g)
    with pytest.raises(tf.errors.InvalidArgumentError, match="Only one input size may be -1, not both 0 and 1"):
        s.run(known)
    with pytest.raises(tf.errors.InvalidArgumentError, match="not both 1 and 2"):
        s.run(fed, {shape: [2, -1, -1]})
    assert s.run(fed, {shape: [2, 3, -1]}).shape == (2, 3, 1)
    with pytest.raises(tf.errors.InvalidArgumentError, match="not both 0 and 1"):
        tf.function(lambda x: tf.reshape(x, [-1, -1, 3]))(tf.zeros([2, 3]))
    with pytest.raises(tf.errors.InvalidArgumentError, match="not both 0 and 1"):
        tf.reshape(tf.zeros([2, 3]), [-1, -1])


def test_shape_errors_at_graph_construction():
    with tf.Graph().as_default():
        x = tf.zeros([2, 3])
        with pytest.raises(ValueError):
            tf.reshape(x, [4, 2])
        with pytest.raises(ValueError):
            tf.transpose(x, [0, 2])       # (a repeated dim, [0, 0], is TF's run-time error)
        with pytest.raises(ValueError):
            tf.squeeze(x, [0])
        with pytest.raises(ValueError):
            tf.concat([x, tf.zeros([2, 4])], 0)
        with pytest.raises(ValueError):
            tf.stack([x, tf.zeros([3, 2])])
        with pytest.raises(ValueError):
            x + tf.zeros([3, 2])
        with pytest.raises(ValueError):
            tf.broadcast_to(x, [3, 3])
        with pytest.raises(ValueError):
            x[2]
        with pytest.raises(ValueError):
            x[0, 0, 0]
        with pytest.raises(TypeError):
            tf.gather(x, tf.constant([0.0]))


def test_gather_out_of_range_index_is_invalid_argument():
    g = tf.Graph()
    with g.as_default():
        i = tf.compat.v1.placeholder(tf.int32, [None])
        y = tf.gather(tf.constant([1.0, 2.0]), i)
    with pytest.raises(tf.errors.InvalidArgumentError):
        session(g).run(y, {i: [0, 2]})


def test_gather_gradient_accumulates_repeated_indices():
    x = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    g = tf.Graph()
    with g.as_default():
        p = tf.constant(x)
        y = tf.gather(p, [2, 0, 2, 2])
        (gp,) = tf.gradients(tf.reduce_sum(y), p)
        assert isinstance(gp, tf.IndexedSlices)     # (TF's: one row per index, summed when made dense)
        dense = tf.convert_to_tensor(gp)
    got, got_dense = session(g).run([gp, dense])
    assert got.indices.tolist() == [2, 0, 2, 2] and got.dense_shape.tolist() == [3, 2]
    np.testing.assert_array_equal(got.values, np.ones((4, 2)))
    np.testing.assert_array_equal(got_dense, [[1, 1], [0, 0], [3, 3]])


# ---------------------------------------------------------------- one_hot
def _np_one_hot(idx, depth, axis=-1, on=1, off=0, dtype=np.float32):
    idx = np.asarray(idx)
    out = np.full(idx.shape + (depth,), off, dtype)
    for pos in np.ndindex(*idx.shape):
        if 0 <= idx[pos] < depth:
            out[pos + (idx[pos],)] = on
    return np.moveaxis(out, -1, axis if axis != -1 else out.ndim - 1)


def test_one_hot_out_of_range_axis_and_dtypes():
    # TF 2.21: indices -1 or >= depth give all-off rows (no error); the new axis goes at
    # `axis` (-1 or [0, rank]); dtype: `dtype`, else on/off_value's, else float32.
    idx = np.array([[0, 3, -1], [4, 2, 1]], np.int32)
    cases = [(dict(), dict(), np.float32),
             (dict(axis=0), dict(axis=0), np.float32),
             (dict(axis=1, on_value=7, off_value=-1), dict(axis=1, on=7, off=-1), np.int32),
             (dict(axis=2, dtype=tf.float64), dict(axis=2), np.float64),
             (dict(on_value=5), dict(on=5), np.int32),            # tf.one_hot([0,1], 3, on_value=5): int32
             (dict(off_value=2.0), dict(off=2.0), np.float32),
             (dict(on_value=3, dtype=tf.float32), dict(on=3), np.float32),
             (dict(on_value=True, off_value=False), dict(on=True, off=False), np.bool_)]
    g = tf.Graph()
    with g.as_default():
        i = tf.compat.v1.placeholder(tf.int32, idx.shape)
        i64 = tf.compat.v1.placeholder(tf.int64, None)
        ys = [tf.one_hot(i, 4, **kw) for kw, _, _ in cases]
        ys.append(tf.one_hot(i64, 3))
        ys.append(tf.one_hot(i, 0))
        for y, (_, _, dt) in zip(ys, cases):
            assert y.dtype == tf.as_dtype(dt)
        assert ys[1].shape.as_list() == [4, 2, 3] and ys[2].shape.as_list() == [2, 4, 3]
    vals = session(g).run(ys, {i: idx, i64: [[2, 5], [0, -7]]})
    for v, (_, ref, dt) in zip(vals, cases):
        np.testing.assert_array_equal(v, _np_one_hot(idx, 4, dtype=dt, **ref))
        assert v.dtype == dt
    np.testing.assert_array_equal(vals[-2], _np_one_hot(np.array([[2, 5], [0, -7]]), 3))
    assert vals[-1].shape == (2, 3, 0)
    # eager, scalar index
    np.testing.assert_array_equal(tf.one_hot([0, 1, -1, 3, 5], 3).numpy(), _np_one_hot([0, 1, -1, 3, 5], 3))
    np.testing.assert_array_equal(tf.one_hot(1, 3).numpy(), [0.0, 1.0, 0.0])


def test_one_hot_errors_and_no_gradient():
    # TF raises TypeError for on/off dtypes that disagree with each other or with `dtype`
    with pytest.raises(TypeError, match="of on_value does not match dtype"):
        tf.one_hot([0, 1], 3, on_value=5, off_value=0.0)
    with pytest.raises(TypeError, match="does not match dtype parameter"):
        tf.one_hot([0, 1], 3, on_value=3.0, dtype=tf.int32)
    with pytest.raises(TypeError):
        tf.one_hot([0, 1], 3, dtype=tf.bool)   # TF: Cannot convert 1 to EagerTensor of dtype bool
    with pytest.raises(TypeError):
        tf.one_hot(tf.constant([1.0]), 3)
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.one_hot([[0, 2]], 3, axis=3)      # TF: Expected axis to be -1 or between [0, 3)
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.one_hot([0], -1)
    with tf.Graph().as_default(), pytest.raises(ValueError):
        tf.one_hot(tf.constant([[0, 2]]), 3, axis=-2)
    on = tf.constant(2.0)
    with tf.GradientTape() as tape:   # TF: NotDifferentiable("OneHot")
        tape.watch(on)
        y = tf.reduce_sum(tf.one_hot([0, 1], 3, on_value=on))
    assert tape.gradient(y, on) is None


def test_sparse_softmax_cross_entropy_checks_label_range():
    # unlike one_hot, TF's sparse cross-entropy kernel rejects labels outside [0, classes)
    lo = np.array([[1.0, 2.0, 3.0], [1.0, 0.0, 0.0]])
    g = tf.Graph()
    with g.as_default():
        lab = tf.compat.v1.placeholder(tf.int32, [2])
        x = tf.constant(lo)
        y = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=lab, logits=x)
        (gx,) = tf.gradients(tf.reduce_sum(y), x)
    sess = session(g)
    e = np.exp(lo - lo.max(1, keepdims=True))
    sm = e / e.sum(1, keepdims=True)
    v, gv = sess.run([y, gx], {lab: [2, 0]})
    np.testing.assert_allclose(v, -np.log(sm[[0, 1], [2, 0]]), rtol=1e-12)
    np.testing.assert_allclose(gv, sm - np.eye(3)[[2, 0]], rtol=1e-12, atol=1e-15)
    for bad in ([3, 0], [-1, 0]):
        with pytest.raises(tf.errors.InvalidArgumentError):
            sess.run(y, {lab: bad})


# ---------------------------------------------------------------- sources
def test_zeros_ones_fill_and_likes():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant([[1.5, 2.5, 3.5]])
        outs = {
            "zeros": tf.zeros([2, 3]), "ones": tf.ones((3,), tf.int32), "zeros64": tf.zeros([2], dtype=tf.float64),
            "fill": tf.fill([2, 2], 7.0), "fill_int": tf.fill([3], 4), "zeros_like": tf.zeros_like(x),
            "ones_like": tf.ones_like(x), "ones_like_int": tf.ones_like(x, dtype=tf.int32),
            "zeros_scalar": tf.zeros([]), "zeros_shape_tensor": tf.zeros(tf.shape(x)),
            "ones_bool": tf.ones([2], tf.bool), "zeros_like_bool": tf.zeros_like(tf.constant([True])),
        }
        dt = {k: v.dtype for k, v in outs.items()}
        sh = {k: v.shape.as_list() for k, v in outs.items()}
    v = session(g).run(outs)
    ref = {
        "zeros": np.zeros((2, 3), np.float32), "ones": np.ones(3, np.int32), "zeros64": np.zeros(2),
        "fill": np.full((2, 2), 7, np.float32), "fill_int": np.full(3, 4, np.int32),
        "zeros_like": np.zeros((1, 3), np.float32), "ones_like": np.ones((1, 3), np.float32),
        "ones_like_int": np.ones((1, 3), np.int32), "zeros_scalar": np.float32(0),
        "zeros_shape_tensor": np.zeros((1, 3), np.float32), "ones_bool": np.ones(2, bool),
        "zeros_like_bool": np.zeros(1, bool),
    }
    for k, r in ref.items():
        np.testing.assert_array_equal(v[k], r, err_msg=k)
        assert np.asarray(v[k]).dtype == r.dtype, k
        assert dt[k] == tf.as_dtype(r.dtype), k
        assert sh[k] == list(np.shape(r)), k


def test_fill_and_like_gradients():
    # Fill's gradient sums; zeros_like/ones_like have none.
    check_op(lambda v: tf.fill([2, 3], v), np.array(1.5), expected=np.full((2, 3), 1.5))
    g = tf.Graph()
    with g.as_default():
        x = tf.constant([1.0, 2.0])
        assert tf.gradients(tf.zeros_like(x) + tf.ones_like(x), x) == [None]
        assert tf.gradients(tf.zeros_like(x) * x, x)[0] is not None


def test_tile_of_uint16_is_unimplemented_as_tf():
    """TF 2.21 has no uint16 Tile kernel (UnimplementedError; checked in bench env, found by
    bench/tf_fuzz.py); its identity (all multiples 1), scalar and empty-output cases still run,
    and the other integer types tile."""
    v = np.array([[1, 2]], np.uint16)
    with pytest.raises(tf.errors.UnimplementedError):
        tf.tile(tf.constant(v), [2, 1])
    g = tf.Graph()
    with g.as_default(), pytest.raises(tf.errors.UnimplementedError):
        tf.tile(tf.compat.v1.placeholder(tf.uint16, [1, 2]), [1, 3])
    np.testing.assert_array_equal(tf.tile(tf.constant(v), [1, 1]).numpy(), v)
    assert tf.tile(tf.constant(np.zeros((0, 2), np.uint16)), [2, 1]).shape == (0, 2)
    for dt in (np.int8, np.uint8, np.int16, np.uint32, np.uint64):
        np.testing.assert_array_equal(tf.tile(tf.constant(v.astype(dt)), [2, 1]).numpy(), np.array([[1, 2], [1, 2]], dt))


def test_matrix_transpose_adjoint_and_conjugate_transpose():
    """tf.linalg.matrix_transpose swaps the last two dims; adjoint and transpose(conjugate=True)
    conjugate complex values (TF 2.21: transpose([[1+2j, 3j], [1, 2]], conjugate=True) is
    [[1-2j, 1], [-3j, 2]]); rank < 2 is TF's ValueError."""
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    c = np.array([[1 + 2j, 3j], [1, 2]], np.complex128)
    g = tf.Graph()
    with g.as_default():
        t = tf.linalg.matrix_transpose(tf.constant(x))
        ct = tf.transpose(tf.constant(c), conjugate=True)
        adj = tf.linalg.adjoint(tf.constant(c))
        plain = tf.transpose(tf.constant(c))
    got_t, got_ct, got_adj, got_plain = session(g).run([t, ct, adj, plain])
    np.testing.assert_array_equal(got_t, np.swapaxes(x, -1, -2))
    np.testing.assert_array_equal(got_ct, np.conj(c.T))
    np.testing.assert_array_equal(got_adj, np.conj(c.T))
    np.testing.assert_array_equal(got_plain, c.T)
    with pytest.raises(ValueError, match="rank >= 2"):
        tf.linalg.matrix_transpose(tf.ones([3]))
