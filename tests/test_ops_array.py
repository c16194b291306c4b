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


def test_shape_errors_at_graph_construction():
    with tf.Graph().as_default():
        x = tf.zeros([2, 3])
        with pytest.raises(ValueError):
            tf.reshape(x, [4, 2])
        with pytest.raises(ValueError):
            tf.transpose(x, [0, 0])
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
    np.testing.assert_array_equal(session(g).run(gp), [[1, 1], [0, 0], [3, 3]])


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
