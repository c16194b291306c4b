"""Training composites: tf.clip_by_norm / clip_by_global_norm / linalg.global_norm,
tf.nn.dropout (and compat.v1's keep_prob form), tf.nn.moments / batch_normalization,
tf.nn.embedding_lookup, tf.math.divide_no_nan / reduce_euclidean_norm / log_softmax,
tf.tensordot, tf.nn.selu / softsign / gelu (both forms), tf.is_tensor and tf.math.erf / erfc (ops:
their compiled forms are vecmath's erf / erfc, checked here against long-double references).

Values against independent numpy formulas in graph mode (both Session modes) and
eagerly, gradients against central finite differences (float64) or numpy
formulas, and TF's exception types for bad arguments (checked once against TF 2.21).
Dropout is random: statistics, exact scaling of the kept values, seeding, its
gradient (mask / (1 - rate)) and identical draws in the compiled and interpreted modes."""
import numpy as np
import pytest

import jitgrad as tf
from _graph_testing import check_op, session
from _jit_harness import LD, _erf_ref, _erfc_ref

R = np.random.default_rng(11)
graph_modes = pytest.mark.usefixtures("graph_mode")


def _tape_grads(fn, *arrays):
    vs = [tf.Variable(a) for a in arrays]
    with tf.GradientTape() as tape:
        y = fn(*vs)
        loss = tf.reduce_sum(y)
    return y.numpy(), [g.numpy() for g in tape.gradient(loss, vs)]


# ---------------------------------------------------------------- clip_by_norm
def _np_clip_by_norm(x, c, axes):
    n = np.sqrt(np.sum(x * x, axis=None if axes is None else tuple(axes), keepdims=True))
    return x * c / np.maximum(n, c)


@graph_modes
@pytest.mark.parametrize("clip,axes", [(1.5, None), (100.0, None), (1.0, [1]), (0.8, [0]), (1.2, [0, 1])])
def test_clip_by_norm(clip, axes):
    x = R.normal(size=(3, 4))
    check_op(lambda p: tf.clip_by_norm(p, clip, axes=axes), x, expected=_np_clip_by_norm(x, clip, axes))


@graph_modes
def test_clip_by_norm_tensor_clip_norm_gets_a_gradient():
    x, c = R.normal(size=(2, 5)), np.array(0.7)
    check_op(lambda p, q: tf.clip_by_norm(p, q, axes=[1]), x, c, expected=_np_clip_by_norm(x, 0.7, [1]))


def test_clip_by_norm_eager_and_zero_input():
    x = np.array([[3.0, 4.0], [0.3, 0.4]], np.float32)
    np.testing.assert_allclose(tf.clip_by_norm(x, 1.0, axes=[1]).numpy(), [[0.6, 0.8], [0.3, 0.4]], rtol=1e-6)
    assert tf.clip_by_norm(tf.constant(x), 1.0).dtype == tf.float32
    # all zeros: value 0 and (the double where keeps sqrt away from 0) gradient 1, not NaN
    y, (g,) = _tape_grads(lambda v: tf.clip_by_norm(v, 2.0), np.zeros((2, 2)))
    np.testing.assert_array_equal(y, np.zeros((2, 2)))
    np.testing.assert_array_equal(g, np.ones((2, 2)))
    y, (g,) = _tape_grads(lambda v: tf.clip_by_norm(v, 10.0), np.array([3.0, 4.0]))   # below the norm: identity
    np.testing.assert_array_equal(y, [3.0, 4.0])
    np.testing.assert_array_equal(g, [1.0, 1.0])


def test_clip_by_norm_bad_arguments():
    x = tf.constant(np.ones((2, 3), np.float32))
    with pytest.raises(ValueError):   # clip_norm must not broadcast t larger
        tf.clip_by_norm(x, tf.constant(np.ones((2, 2, 3), np.float32)))
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.clip_by_norm(x, tf.constant(np.ones((4,), np.float32)))
    with tf.Graph().as_default():
        with pytest.raises(ValueError):
            tf.clip_by_norm(tf.compat.v1.placeholder(tf.float32, [2, 3]), np.ones((4,), np.float32))


# ---------------------------------------------------------------- global_norm / clip_by_global_norm
def _np_global_norm(arrays):
    return np.sqrt(sum(np.sum(a * a) for a in arrays if a is not None))


@graph_modes
def test_global_norm():
    a, b = R.normal(size=(3, 2)), R.normal(size=(4,))
    check_op(lambda p, q: tf.linalg.global_norm([p, None, q]), a, b, expected=np.array(_np_global_norm([a, b])))
    assert tf.compat.v1.global_norm is tf.linalg.global_norm


@graph_modes
@pytest.mark.parametrize("clip", [0.5, 50.0])
def test_clip_by_global_norm(clip):
    a, b = R.normal(size=(3, 2)), R.normal(size=(4,))
    gn = _np_global_norm([a, b])
    want = [a * clip / max(gn, clip), b * clip / max(gn, clip)]
    check_op(lambda p, q: tf.concat([tf.reshape(t, [-1]) for t in tf.clip_by_global_norm([p, q], clip)[0]], 0),
             a, b, expected=np.concatenate([w.reshape(-1) for w in want]))
    check_op(lambda p, q: tf.clip_by_global_norm([p, q], clip)[1], a, b, expected=np.array(gn))


@graph_modes
def test_clip_by_global_norm_use_norm_and_none_entries():
    a = R.normal(size=(2, 3))
    g = tf.Graph()
    with g.as_default():
        p = tf.compat.v1.placeholder(tf.float64, [2, 3])
        n = tf.compat.v1.placeholder(tf.float64, [])
        clipped, norm = tf.clip_by_global_norm((p, None), 1.0, use_norm=n)
        assert clipped[1] is None and norm is n
    out = session(g).run(clipped[0], {p: a, n: 4.0})
    np.testing.assert_allclose(out, a / 4.0, rtol=1e-15)


def test_clip_by_global_norm_eager_zero_and_nonfinite_norms():
    a = np.array([3.0, 4.0], np.float32)
    (ca, cn), norm = tf.clip_by_global_norm([tf.constant(a), tf.constant([12.0])], 6.5)
    assert norm.numpy() == np.float32(13.0)
    np.testing.assert_allclose(ca.numpy(), a / 2, rtol=1e-6)
    np.testing.assert_allclose(cn.numpy(), [6.0], rtol=1e-6)
    # a zero norm: scale clip * min(1 / 0, 1 / clip) = 1, values unchanged
    with np.errstate(divide="ignore"):
        (z,), zn = tf.clip_by_global_norm([tf.zeros([3])], 1.0)
    assert zn.numpy() == 0.0 and np.array_equal(z.numpy(), np.zeros(3, np.float32))
    # an inf or NaN norm: (norm - norm) makes every value NaN, as TF
    for bad in (np.inf, np.nan):
        with np.errstate(invalid="ignore"):
            (u, v), n = tf.clip_by_global_norm([tf.constant([bad, 1.0]), tf.constant([2.0])], 1.0)
        assert np.all(np.isnan(u.numpy())) and np.all(np.isnan(v.numpy()))
    # gradient of the clipped values above the clip: d(x * c / ||x||)
    x = np.array([3.0, 4.0])
    _, (g,) = _tape_grads(lambda t: tf.clip_by_global_norm([t], 1.0)[0][0], x)
    nrm = np.linalg.norm(x)
    np.testing.assert_allclose(g, 1.0 / nrm - x * x.sum() / nrm ** 3, rtol=1e-12)


def test_global_norm_bad_arguments():
    x = tf.constant([1.0])
    for fn in (lambda: tf.clip_by_global_norm(x, 1.0), lambda: tf.clip_by_global_norm("ab", 1.0),
               lambda: tf.linalg.global_norm(x)):
        with pytest.raises(TypeError):
            fn()


# ---------------------------------------------------------------- dropout
N = 100_000


def _check_kept_fraction(y, rate):
    kept = np.asarray(y) != 0
    p = 1 - rate
    assert abs(kept.mean() - p) < 6 * np.sqrt(p * (1 - p) / kept.size), kept.mean()
    return kept


@pytest.mark.parametrize("rate", [0.1, 0.5, 0.9])
def test_dropout_eager_statistics_and_exact_scale(rate):
    x = R.uniform(0.5, 2.0, N).astype(np.float32)
    y = tf.nn.dropout(tf.constant(x), rate).numpy()
    assert y.dtype == np.float32 and y.shape == x.shape
    kept = _check_kept_fraction(y, rate)
    # TF scales by 1 / (1 - rate), computed in Python and converted to x's dtype
    np.testing.assert_array_equal(y[kept], x[kept] * np.float32(1 / (1 - rate)))


def test_dropout_eager_gradient_is_mask_over_keep_prob():
    x = R.uniform(0.5, 2.0, (50, 40))
    y, (g,) = _tape_grads(lambda v: tf.nn.dropout(v, 0.3), x)
    mask = y != 0
    np.testing.assert_array_equal(g, mask / (1 - 0.3))
    np.testing.assert_array_equal(y[mask], x[mask] * (1 / (1 - 0.3)))


@graph_modes
def test_dropout_graph_statistics_and_gradient():
    rate = 0.4
    x = R.uniform(0.5, 2.0, (200, 300))
    w = R.uniform(0.5, 1.5, x.shape)
    g = tf.Graph()
    with g.as_default():
        p = tf.compat.v1.placeholder(tf.float64, x.shape)
        y = tf.nn.dropout(p, rate)
        assert y.shape.as_list() == list(x.shape) and y.dtype == tf.float64
        (grad,) = tf.gradients(tf.reduce_sum(y * w), p)
    sess = session(g)
    yv, gv = sess.run([y, grad], {p: x})
    mask = _check_kept_fraction(yv, rate)
    np.testing.assert_array_equal(yv[mask], x[mask] * (1 / (1 - rate)))
    np.testing.assert_array_equal(gv, w * mask * (1 / (1 - rate)))
    y2 = sess.run(y, {p: x})   # a fresh mask each run
    assert not np.array_equal(y2 != 0, mask)


@graph_modes
def test_dropout_tensor_rate_and_noise_shape():
    x = R.uniform(0.5, 2.0, (400, 50)).astype(np.float32)
    g = tf.Graph()
    with g.as_default():
        p = tf.compat.v1.placeholder(tf.float32, x.shape)
        r = tf.compat.v1.placeholder(tf.float32, [])
        y = tf.nn.dropout(p, r)                           # a tensor rate divides by (1 - rate)
        rows = tf.nn.dropout(p, 0.5, noise_shape=[None, 1])   # one draw per row
        assert rows.shape.as_list() == [400, 50]
    yv, rv = session(g).run([y, rows], {p: x, r: 0.25})
    mask = _check_kept_fraction(yv, 0.25)
    np.testing.assert_array_equal(yv[mask], x[mask] / (np.float32(1) - np.float32(0.25)))
    row_kept = rv[:, 0] != 0
    assert np.array_equal(rv != 0, np.repeat(row_kept[:, None], 50, axis=1))
    _check_kept_fraction(row_kept, 0.5)


def _dropout_graph_run(mode, seed):
    g = tf.Graph()
    with g.as_default():
        tf.random.set_seed(seed)    # the graph's seed (TF 2: an eager set_seed does not reach it)
        p = tf.compat.v1.placeholder(tf.float32, [64, 32])
        y = tf.nn.dropout(p, 0.5)
        z = tf.nn.dropout(p, 0.2, seed=3)
    sess = tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto(jitgrad_mode=mode))
    x = np.ones((64, 32), np.float32)
    return [sess.run([y, z], {p: x}) for _ in range(3)]


def test_dropout_compiled_and_interpreter_draw_the_same_masks():
    a, b = _dropout_graph_run("compiled", 5), _dropout_graph_run("interpret", 5)
    for (ya, za), (yb, zb) in zip(a, b):
        assert ya.tobytes() == yb.tobytes() and za.tobytes() == zb.tobytes()
    assert not np.array_equal(a[0][0], a[1][0])   # fresh draws per run
    c = _dropout_graph_run("interpret", 6)
    assert not np.array_equal(c[0][0], b[0][0])   # another graph seed, other masks


def test_dropout_seed_reproducibility_eager():
    x = tf.ones([1000])
    tf.random.set_seed(3)
    a, b = tf.nn.dropout(x, 0.5).numpy(), tf.nn.dropout(x, 0.5).numpy()
    tf.random.set_seed(3)
    a2, b2 = tf.nn.dropout(x, 0.5).numpy(), tf.nn.dropout(x, 0.5).numpy()
    assert np.array_equal(a, a2) and np.array_equal(b, b2) and not np.array_equal(a, b)
    tf.random.set_seed(3)
    s1 = tf.nn.dropout(x, 0.5, seed=9).numpy()
    tf.random.set_seed(3)
    assert np.array_equal(tf.nn.dropout(x, 0.5, seed=9).numpy(), s1)


def test_dropout_rate_zero_returns_x_and_keeps_the_seed_sequence():
    x = tf.constant([1.0, 2.0])
    assert tf.nn.dropout(x, 0.0) is x
    big = tf.ones([500])
    tf.random.set_seed(4)
    tf.random.uniform([1])
    after_uniform = tf.nn.dropout(big, 0.5).numpy()
    tf.random.set_seed(4)
    tf.nn.dropout(big, 0)          # like TF, takes an op seed although it draws nothing
    assert np.array_equal(tf.nn.dropout(big, 0.5).numpy(), after_uniform)


def test_compat_v1_dropout_keep_prob():
    x = R.uniform(0.5, 2.0, N).astype(np.float32)
    y = tf.compat.v1.nn.dropout(x, keep_prob=0.8).numpy()
    kept = _check_kept_fraction(y, 0.2)
    np.testing.assert_array_equal(y[kept], x[kept] * np.float32(1 / (1 - (1 - 0.8))))
    y = tf.compat.v1.nn.dropout(x, rate=0.3).numpy()
    _check_kept_fraction(y, 0.3)
    assert tf.compat.v1.nn.relu is tf.nn.relu


def test_dropout_bad_arguments():
    x = tf.constant(np.ones((2, 3), np.float32))
    for kw in ({"rate": 1.0}, {"rate": -0.1}, {"rate": [0.5]}, {"rate": tf.constant([0.5])},
               {"rate": tf.constant(1)}):
        with pytest.raises(ValueError):
            tf.nn.dropout(x, **kw)
    with pytest.raises(ValueError):   # x must be floating
        tf.nn.dropout(tf.constant([1, 2]), 0.5)
    with pytest.raises(tf.errors.InvalidArgumentError):   # noise_shape that does not broadcast
        tf.nn.dropout(x, 0.5, noise_shape=[3, 3])
    for kw in ({"keep_prob": 0.5, "rate": 0.5}, {"keep_prob": 0.0}, {"keep_prob": 2.0}, {}):
        with pytest.raises(ValueError):
            tf.compat.v1.nn.dropout(x, **kw)
    with tf.Graph().as_default():
        p = tf.compat.v1.placeholder(tf.float32, [None, 3])
        with pytest.raises(ValueError):
            tf.nn.dropout(tf.compat.v1.placeholder(tf.float32, [2, 3]), 0.5, noise_shape=[3, 3])
        with pytest.raises(NotImplementedError):   # jitgrad's random ops need static shapes
            tf.nn.dropout(p, 0.5)
        tf.nn.dropout(p, 0.5, noise_shape=[1, 3])   # a static noise_shape is enough


# ---------------------------------------------------------------- moments / batch_normalization
@graph_modes
@pytest.mark.parametrize("axes,keepdims", [([0], False), ([0, 1], True), ([1], False), ([-1], True)])
def test_moments(axes, keepdims):
    x = R.normal(size=(4, 3, 2))
    ax = tuple(axes)
    check_op(lambda p: tf.nn.moments(p, axes, keepdims=keepdims)[0], x,
             expected=np.mean(x, axis=ax, keepdims=keepdims), value_rtol=1e-12, value_atol=1e-15)
    check_op(lambda p: tf.nn.moments(p, axes, keepdims=keepdims)[1], x,
             expected=np.var(x, axis=ax, keepdims=keepdims), value_rtol=1e-12, value_atol=1e-15)


def test_moments_eager_and_gradient():
    x = R.normal(size=(5, 3))
    mean, var = tf.nn.moments(tf.constant(x), axes=[0])
    np.testing.assert_allclose(mean.numpy(), x.mean(0), rtol=1e-12)
    np.testing.assert_allclose(var.numpy(), x.var(0), rtol=1e-12)
    _, (g,) = _tape_grads(lambda v: tf.nn.moments(v, [0])[1], x)   # d var / dx = 2 (x - mean) / n
    np.testing.assert_allclose(g, 2 * (x - x.mean(0)) / 5, rtol=1e-10, atol=1e-15)
    m32, _ = tf.nn.moments(np.ones((2, 2), np.float32), [0, 1], shift=5.0)   # shift is unused, as in TF
    assert m32.dtype == tf.float32 and m32.numpy() == 1.0


def _np_batchnorm(x, m, v, o, s, eps):
    return (x - m) / np.sqrt(v + eps) * (1.0 if s is None else s) + (0.0 if o is None else o)


@graph_modes
def test_batch_normalization():
    x = R.normal(size=(6, 4))
    m, v = R.normal(size=(4,)), R.uniform(0.5, 2.0, (4,))
    o, s = R.normal(size=(4,)), R.normal(size=(4,))
    check_op(lambda *a: tf.nn.batch_normalization(*a, 1e-3), x, m, v, o, s,
             expected=_np_batchnorm(x, m, v, o, s, 1e-3), value_rtol=1e-12, value_atol=1e-14)
    check_op(lambda a, b, c: tf.nn.batch_normalization(a, b, c, None, None, 0.01), x, m, v,
             expected=_np_batchnorm(x, m, v, None, None, 0.01), value_rtol=1e-12, value_atol=1e-14)


def test_batch_normalization_eager_with_moments():
    x = R.normal(size=(8, 3)).astype(np.float32)
    mean, var = tf.nn.moments(x, [0])
    y = tf.nn.batch_normalization(x, mean, var, offset=0.5, scale=2.0, variance_epsilon=1e-5)
    assert y.dtype == tf.float32
    np.testing.assert_allclose(y.numpy(), _np_batchnorm(x.astype(np.float64), x.mean(0), x.var(0), 0.5, 2.0, 1e-5),
                               rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------- embedding_lookup
@graph_modes
def test_embedding_lookup():
    params = R.normal(size=(5, 3))
    ids = np.array([[4, 0], [2, 2]], np.int32)
    check_op(lambda p, i: tf.nn.embedding_lookup(p, i), params, ids, expected=params[ids])
    check_op(lambda p, i: tf.nn.embedding_lookup([p], i), params, ids[0], expected=params[ids[0]])


@graph_modes
def test_embedding_lookup_max_norm():
    params = R.normal(size=(5, 3)) * 2
    ids = np.array([1, 3, 1], np.int32)
    rows = params[ids]
    want = rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1.0)
    check_op(lambda p, i: tf.nn.embedding_lookup(p, i, max_norm=1.0), params, ids, expected=want)


def test_embedding_lookup_eager_and_bad_arguments():
    params = tf.Variable(np.arange(12.0).reshape(4, 3))
    with tf.GradientTape() as tape:
        y = tf.nn.embedding_lookup(params, [3, 1, 3])
    np.testing.assert_array_equal(y.numpy(), np.arange(12.0).reshape(4, 3)[[3, 1, 3]])
    g = tape.gradient(y, params)     # as TF: IndexedSlices, one row per id, made dense by summing
    assert isinstance(g, tf.IndexedSlices)
    np.testing.assert_array_equal(tf.convert_to_tensor(g).numpy(), np.array([0, 1, 0, 2])[:, None] * np.ones(3))
    with pytest.raises(ValueError):
        tf.nn.embedding_lookup([], [0])
    with pytest.raises(NotImplementedError):
        tf.nn.embedding_lookup([params, params], [0])


# ---------------------------------------------------------------- divide_no_nan
@graph_modes
def test_divide_no_nan():
    x = R.normal(size=(3, 4))
    y = R.uniform(0.5, 2.0, (3, 4)) * R.choice([-1.0, 1.0], (3, 4))
    check_op(tf.math.divide_no_nan, x, y, expected=x / y)
    y[0, 1] = y[2, 3] = 0.0
    # at y == 0 the value is 0 whatever x is, so the gradient wrt x is 0 there (finite differences agree)
    want = np.where(y == 0, 0.0, x / np.where(y == 0, 1, y))
    _, (gx,) = check_op(tf.math.divide_no_nan, x, y, wrt=[0], expected=want)
    assert gx[0, 1] == 0.0 and gx[2, 3] == 0.0
    x[2, 3] = np.inf   # even inf / 0 is 0
    check_op(tf.math.divide_no_nan, x, y, expected=np.where(y == 0, 0.0, x / np.where(y == 0, 1.0, y)), grad=False)


def test_divide_no_nan_eager_gradients_at_zero_and_dtypes():
    x, y = np.array([1.0, 2.0, np.inf]), np.array([0.0, 4.0, 0.0])
    with np.errstate(invalid="ignore"):   # the masked lanes of the gradient (0 * inf) are discarded
        out, (gx, gy) = _tape_grads(tf.math.divide_no_nan, x, y)
    np.testing.assert_array_equal(out, [0.0, 0.5, 0.0])
    np.testing.assert_array_equal(gx, [0.0, 0.25, 0.0])        # div_no_nan(1, y)
    np.testing.assert_array_equal(gy, [0.0, -2.0 / 16, 0.0])   # -x / y^2, 0 where y == 0
    r = tf.math.divide_no_nan(1, 2)   # integers divide as truediv: float64
    assert r.dtype == tf.float64 and r.numpy() == 0.5
    b = tf.math.divide_no_nan(tf.constant([3, 4]), tf.constant([0, 8]))
    assert b.dtype == tf.float64 and list(b.numpy()) == [0.0, 0.5]
    with pytest.raises(TypeError):
        tf.math.divide_no_nan(tf.constant(1), tf.constant(1.0))
    with pytest.raises(TypeError):
        tf.math.divide_no_nan(tf.constant(True), tf.constant(True))


# ---------------------------------------------------------------- reduce_euclidean_norm
@graph_modes
@pytest.mark.parametrize("axis,keepdims", [(None, False), (1, False), (0, True), ([0, 1], False)])
def test_reduce_euclidean_norm(axis, keepdims):
    x = R.normal(size=(3, 4))
    ax = tuple(axis) if isinstance(axis, list) else axis
    check_op(lambda p: tf.math.reduce_euclidean_norm(p, axis, keepdims=keepdims), x,
             expected=np.sqrt(np.sum(x * x, axis=ax, keepdims=keepdims)))


def test_reduce_euclidean_norm_eager_integers_and_zero():
    np.testing.assert_allclose(tf.math.reduce_euclidean_norm([[3.0, 4.0], [5.0, 12.0]], 1).numpy(), [5.0, 13.0])
    r = tf.math.reduce_euclidean_norm(tf.constant([[3, 4], [1, 1]]), 1)   # integers stay integers, truncated
    assert r.dtype == tf.int32 and list(r.numpy()) == [5, 1]
    z = tf.Variable([0.0, 0.0])
    with tf.GradientTape() as tape:
        y = tf.math.reduce_euclidean_norm(z)
    with np.errstate(invalid="ignore"):
        gz = tape.gradient(y, z).numpy()
    assert y.numpy() == 0.0 and np.all(np.isnan(gz))   # x / norm at 0, as TF's EuclideanNorm gradient
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.math.reduce_euclidean_norm(tf.constant([True]))
    with tf.Graph().as_default():
        with pytest.raises(TypeError):
            tf.math.reduce_euclidean_norm(tf.compat.v1.placeholder(tf.bool, [2]))


@graph_modes
def test_reduce_euclidean_norm_gradient_is_tfs_x_over_norm_over_grad():
    """TF's EuclideanNorm gradient is x / (norm / grad): a NaN norm gives NaN even where the
    upstream gradient is 0 (sqrt's own gradient would give 0 there). Found by bench/tf_fuzz.py
    (seed 7082); the values below are TF 2.21's (bench env, TF_ENABLE_ONEDNN_OPTS=0), and by
    hand: row 1 has norm 3 > 2, so minimum passes it 0 upstream and x / (3 / 0) = x / inf = 0."""
    x = np.array([[1.5, np.nan, 0.5], [0.0, 0.0, 3.0]], np.float32)
    g = tf.Graph()
    with g.as_default():
        p = tf.compat.v1.placeholder(tf.float32, [2, 3])
        n = tf.math.reduce_euclidean_norm(p, axis=1)
        grad = tf.gradients(tf.reduce_sum(tf.minimum(n, 2.0) * [0.5, 1.0]), p)[0]
    with np.errstate(invalid="ignore"):
        nv, gv = session(g).run([n, grad], {p: x})
    np.testing.assert_array_equal(nv, np.float32([np.nan, 3.0]))
    np.testing.assert_array_equal(gv, np.float32([[np.nan] * 3, [0.0, 0.0, 0.0]]))


def test_reduce_euclidean_norm_second_derivative_as_tf():
    """d/dx sum((x / |x|)^2) over rows: TF 2.21 gives [[-0, 0, 0], [nan] * 3] for these rows
    (bench env); by hand x / |x| has unit length, so the sum is constant (gradient 0), and the
    zero row's x / (0 / 1) is NaN."""
    xv = tf.Variable(np.array([[1.5, -2.0, 0.5], [0.0, 0.0, 0.0]], np.float32))
    with tf.GradientTape() as t2:
        with tf.GradientTape() as t1:
            n = tf.math.reduce_euclidean_norm(xv, axis=1)
        gg = t1.gradient(n, xv)
        s = tf.reduce_sum(gg * gg)
    with np.errstate(invalid="ignore"):
        h = t2.gradient(s, xv).numpy()
    np.testing.assert_allclose(gg.numpy()[0], np.float32([1.5, -2.0, 0.5]) / np.sqrt(6.5), rtol=1e-6)
    np.testing.assert_allclose(h[0], [0.0, 0.0, 0.0], atol=1e-6)
    assert np.all(np.isnan(gg.numpy()[1])) and np.all(np.isnan(h[1]))


# ---------------------------------------------------------------- tensordot
TENSORDOT_CASES = [((3, 4), (4, 5), 1), ((2, 3, 4), (3, 4, 2), 2), ((2, 3), (4,), 0),
                   ((3, 4), (4, 3), [[1, 0], [0, 1]]),
                   ((2, 3, 4), (5, 2), [[0], [1]]), ((2, 3, 4), (4, 3), ([-1, 1], [0, -1])), ((3,), (3,), 1),
                   ((3, 2), (3, 2), [0, 0])]


@graph_modes
@pytest.mark.parametrize("sa,sb,axes", TENSORDOT_CASES)
def test_tensordot(sa, sb, axes):
    a, b = R.normal(size=sa), R.normal(size=sb)
    np_axes = axes if isinstance(axes, int) else (list(np.atleast_1d(axes[0])), list(np.atleast_1d(axes[1])))
    check_op(lambda p, q: tf.tensordot(p, q, axes), a, b, expected=np.tensordot(a, b, np_axes))


def test_tensordot_eager_and_bad_arguments():
    a, b = R.normal(size=(2, 3)).astype(np.float32), R.normal(size=(3, 2)).astype(np.float32)
    np.testing.assert_allclose(tf.linalg.tensordot(a, b, 1).numpy(), a @ b, rtol=1e-6)
    np.testing.assert_allclose(tf.tensordot(tf.constant(a), b, axes=tf.constant([[1], [0]])).numpy(), a @ b,
                               rtol=1e-6)
    _, (ga, gb) = _tape_grads(lambda p, q: tf.tensordot(p, q, [[1], [0]]), a.astype(np.float64),
                              b.astype(np.float64))
    np.testing.assert_allclose(ga, np.ones((2, 2)) @ b.T, rtol=1e-6)
    np.testing.assert_allclose(gb, a.T @ np.ones((2, 2)), rtol=1e-6)
    x = tf.constant(np.ones((2, 3), np.float32))
    for axes in (-1, 3, [[0], [0, 1]], [[0]]):
        with pytest.raises(ValueError):
            tf.tensordot(x, x, axes)
    with pytest.raises(tf.errors.InvalidArgumentError):   # contracted sizes differ
        tf.tensordot(x, x, 1)
    with tf.Graph().as_default():
        p = tf.compat.v1.placeholder(tf.float32, [2, 3])
        with pytest.raises(ValueError):
            tf.tensordot(p, p, 1)
        with pytest.raises(NotImplementedError):
            tf.tensordot(tf.compat.v1.placeholder(tf.float32, [None, 3]), p, [[1], [1]])


# ---------------------------------------------------------------- selu / softsign / gelu / log_softmax
SELU_ALPHA, SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def away_from_zero(*shape):
    return R.uniform(0.1, 2.0, shape) * R.choice([-1.0, 1.0], shape)


@graph_modes
def test_selu_softsign_gelu():
    x = away_from_zero(3, 4)
    check_op(tf.nn.selu, x, expected=SELU_SCALE * np.where(x > 0, x, SELU_ALPHA * np.expm1(x)),
             value_rtol=1e-14)
    check_op(tf.nn.softsign, x, expected=x / (1 + np.abs(x)))
    check_op(tf.math.softsign, x, expected=x / (1 + np.abs(x)), grad=False)
    # TF's coefficient is cast(0.044715, dtype): float32's 0.044715, also for float64
    c = float(np.float32(0.044715))
    want = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + c * x ** 3)))
    check_op(lambda p: tf.nn.gelu(p, approximate=True), x, expected=want, value_rtol=1e-13)
    np.testing.assert_allclose(want, 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))),
                               rtol=1e-7)


def test_selu_softsign_gelu_eager_gradients_at_zero():
    x = np.array([-1.0, 0.0, 2.0])
    y, (g,) = _tape_grads(tf.nn.selu, x)
    np.testing.assert_allclose(g, [SELU_SCALE * SELU_ALPHA * np.exp(-1.0), SELU_SCALE, SELU_SCALE], rtol=1e-15)
    _, (g,) = _tape_grads(tf.nn.softsign, x)
    np.testing.assert_allclose(g, 1 / (1 + np.abs(x)) ** 2, rtol=1e-15)
    y, (g,) = _tape_grads(lambda v: tf.nn.gelu(v, approximate=True), x)
    assert y[1] == 0.0 and g[1] == 0.5
    assert tf.nn.selu(tf.constant([1.0])).dtype == tf.float32


def test_gelu_bad_arguments():
    for approximate in (False, True):
        with pytest.raises(ValueError):
            tf.nn.gelu(tf.constant([1, 2]), approximate=approximate)


@graph_modes
def test_math_log_softmax():
    x = R.normal(size=(2, 5))
    want = x - x.max(1, keepdims=True) - np.log(np.sum(np.exp(x - x.max(1, keepdims=True)), 1, keepdims=True))
    check_op(tf.math.log_softmax, x, expected=want, value_rtol=1e-12, value_atol=1e-14)


# ---------------------------------------------------------------- is_tensor
def test_is_tensor():
    assert tf.is_tensor(tf.constant(1.0)) and tf.is_tensor(tf.Variable(1.0))
    for v in (1.0, [1.0], np.ones(2), np.float32(1.0), "a", None):
        assert not tf.is_tensor(v)
    with tf.Graph().as_default():
        p = tf.compat.v1.placeholder(tf.float32, [2])
        assert tf.is_tensor(p) and tf.is_tensor(p * 2) and tf.is_tensor(tf.Variable(1.0))


# ---------------------------------------------------------------- erf
def _erf_ld(x):
    return _erf_ref(np.asarray(x).astype(LD))


@graph_modes
@pytest.mark.parametrize("dt,rtol", [(np.float64, 4e-16), (np.float32, 2.5e-7)])
def test_erf_values_and_gradient(dt, rtol):
    # both sides of the |x| = 1 switch in vecmath's erf, the tails, and tiny values (erf(x) ~ 2x/sqrt(pi))
    x = np.concatenate([R.normal(scale=2.0, size=40), [0.999, 1.0, 1.001, -4.5, 5.9, 3e-8, -1e-20]]).astype(dt)
    want = _erf_ld(x)
    y, _ = check_op(tf.math.erf, x, grad=False)
    np.testing.assert_allclose(np.asarray(y, LD), want, rtol=rtol, atol=0)
    assert np.asarray(y).dtype == dt
    if dt == np.float64:    # gradient 2/sqrt(pi) exp(-x^2), by finite differences
        check_op(tf.math.erf, x[:20], value_rtol=1e-15)


@graph_modes
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_erf_special_values(dt):
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 40.0, -40.0], dt)
    y, _ = check_op(tf.math.erf, x, grad=False)
    y = np.asarray(y)
    np.testing.assert_array_equal(y, [0.0, -0.0, 1.0, -1.0, np.nan, 1.0, -1.0])
    assert np.signbit(y[1]) and not np.signbit(y[0])


def test_erf_eager_gradient_and_names():
    x = np.array([-1.5, 0.0, 0.3, 2.0])
    y, (g,) = _tape_grads(tf.math.erf, x)
    np.testing.assert_allclose(y, np.asarray(_erf_ld(x), np.float64), rtol=4e-16)
    np.testing.assert_allclose(g, 2 / np.sqrt(np.pi) * np.exp(-x * x), rtol=1e-15)
    assert tf.compat.v1.erf is tf.math.erf and not hasattr(tf, "erf")   # TF 2 has no top-level tf.erf
    with pytest.raises(tf.errors.InvalidArgumentError):    # as TF's eager erf of an int32 tensor
        tf.math.erf(tf.constant([1, 2]))


# ---------------------------------------------------------------- erfc / exact gelu
def _erfc_ld(x):
    return _erfc_ref(np.asarray(x).astype(LD))


# both sides of vecmath erfc's switches (|x| = 0.5, piece starts 1 / 1.75 / 2.75 / 4 / 5.75, the
# asymptotic form from 8), the negative side (2 - erfc(-x)), and the tail down to erfc ~ 1e-36 (float32,
# still normal) / 1e-295 (float64)
_ERFC_X = [0.4999, 0.5, 0.5001, 1.0, 1.75, 2.75, 4.0, 5.75, 7.999, 8.0, 9.0, -0.5, -0.7, -3.0, -6.0, 1e-9, -2e-17]


@graph_modes
@pytest.mark.parametrize("dt,rtol", [(np.float64, 1e-15), (np.float32, 1.2e-7)])
def test_erfc_values_and_gradient(dt, rtol):
    # rtol: vecmath's erfc is within 1.5 / 0.75 ulp (tests/test_vecmath.py); the interpreter uses libm's
    # erfc in float64 (within ~1e-15 relative in glibc, rounded to float32 for float32)
    far = [15.0, 21.5, 26.0] if dt == np.float64 else []
    x = np.concatenate([R.normal(scale=3.0, size=40), _ERFC_X, far]).astype(dt)
    want = _erfc_ld(x)
    y, _ = check_op(tf.math.erfc, x, grad=False)
    np.testing.assert_allclose(np.asarray(y, LD), want, rtol=rtol, atol=0)
    assert np.asarray(y).dtype == dt
    if dt == np.float64:    # gradient -2/sqrt(pi) exp(-x^2), by finite differences
        check_op(tf.math.erfc, x[:20], value_rtol=1e-14)


@graph_modes
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_erfc_special_values(dt):
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 40.0, -40.0, 30.0, -12.0], dt)
    y, _ = check_op(tf.math.erfc, x, grad=False)
    np.testing.assert_array_equal(np.asarray(y), [1.0, 1.0, 0.0, 2.0, np.nan, 0.0, 2.0, 0.0, 2.0])


def test_erfc_eager_gradient_and_names():
    x = np.array([-1.5, 0.0, 0.3, 2.0, 9.0])
    y, (g,) = _tape_grads(tf.math.erfc, x)
    np.testing.assert_allclose(y, np.asarray(_erfc_ld(x), np.float64), rtol=1e-15)
    np.testing.assert_allclose(g, -2 / np.sqrt(np.pi) * np.exp(-x * x), rtol=1e-15)
    assert tf.compat.v1.erfc is tf.math.erfc and not hasattr(tf, "erfc")   # TF 2 has no top-level tf.erfc
    with pytest.raises(tf.errors.InvalidArgumentError):    # as TF's eager erfc of an int32 tensor
        tf.math.erfc(tf.constant([1, 2]))


# TF: 0.5 * x * erfc(-x * cast(0.7071067811865476, dtype)); the cast is of a float32 constant, so
# float64 multiplies by float32's 1/sqrt(2) too.
_GELU_C = float(np.float32(0.7071067811865476))


def _gelu_ld(x):
    """Exact gelu as TF composes it, in long double after the one rounding that matters: -x * c in
    x's type (erfc's argument; in float32 its rounding moves gelu(-5) by ~1e-6 relative)."""
    x = np.asarray(x)
    z = (-x * x.dtype.type(_GELU_C)).astype(LD)
    return LD(0.5) * x.astype(LD) * _erfc_ref(z)


@graph_modes
@pytest.mark.parametrize("dt,rtol", [(np.float64, 1.5e-15), (np.float32, 2.5e-7)])
def test_gelu_exact_values_and_gradient(dt, rtol):
    # incl. the negative tail, where 0.5 x (1 + erf(x / sqrt(2))) would cancel: gelu(-5) ~ -1.4e-6,
    # gelu(-12) ~ -1.07e-32 must be accurate relative to themselves
    x = np.concatenate([R.normal(scale=2.0, size=30), [-5.0, -8.0, -12.0, -0.3, 0.0, 1e-6, 3.0, 9.0]]).astype(dt)
    want = _gelu_ld(x)
    y, _ = check_op(tf.nn.gelu, x, grad=False)
    assert np.asarray(y).dtype == dt
    np.testing.assert_allclose(np.asarray(y, LD), want, rtol=rtol, atol=0)
    # independently of TF's composition: the true gelu(-5) = -5 Phi(-5) = -1.43326e-6
    np.testing.assert_allclose(np.asarray(y)[-8], -1.4332579e-06, rtol=2e-6)
    if dt == np.float64:    # gradients by finite differences
        check_op(tf.nn.gelu, x[:16], value_rtol=1e-14)
        check_op(lambda p: tf.nn.gelu(p, approximate=False), x[-8:], value_rtol=1e-14)


def test_gelu_exact_eager():
    x = np.array([-5.0, -1.2, 0.0, 0.7, 3.0])
    y, (g,) = _tape_grads(tf.nn.gelu, x)
    np.testing.assert_allclose(y, np.asarray(_gelu_ld(x), np.float64), rtol=1.5e-15)
    c = _GELU_C    # d/dx 0.5 x erfc(-c x) = 0.5 erfc(-c x) + x c exp(-(c x)^2) / sqrt(pi)
    want = 0.5 * np.asarray(_erfc_ld(-c * x), np.float64) + x * c * np.exp(-(c * x) ** 2) / np.sqrt(np.pi)
    np.testing.assert_allclose(g, want, rtol=1e-14)
    y32 = tf.nn.gelu(tf.constant([-5.0, 1.0])).numpy()
    assert y32.dtype == np.float32
    np.testing.assert_allclose(y32, np.asarray(_gelu_ld(np.float32([-5.0, 1.0])), np.float64), rtol=2.5e-7)
