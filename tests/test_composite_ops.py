"""Composite ops (ops/math_composites.py, ops/linalg_composites.py): roll, saturate_cast,
reciprocal_no_nan, rint, in_top_k, linalg trace / logdet / band_part / cross. Expected
values from numpy (np.roll, np.trace, slogdet, np.cross, masks); in_top_k from TF's CPU
kernel's rules written out in numpy; saturate_cast's values were printed by TF 2.21.
Graph runs in both Session modes, compiled ones without interpreter fallback."""
import numpy as np
import pytest

import jitgrad as tf
from jitgrad.errors import InvalidArgumentError

pytestmark = pytest.mark.usefixtures("graph_mode")
ph = tf.compat.v1.placeholder


def _run(build, *arrays, dtype=tf.float32):
    """build(*placeholders) -> fetches, run on ``arrays``."""
    g = tf.Graph()
    with g.as_default():
        feeds = [ph(tf.as_dtype(a.dtype) if hasattr(a, "dtype") else dtype, np.shape(a)) for a in arrays]
        fetches = build(*feeds)
    return tf.compat.v1.Session(graph=g).run(fetches, dict(zip(feeds, arrays)))


def test_roll_values_and_gradient(no_fallback):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    w = rng.standard_normal(x.shape).astype(np.float32)
    for shift, axis in ((1, 0), (-7, 2), ([2, -1], [0, 1]), ([2, 3], [1, 1]), ([1, 1, 1], [0, -1, 2])):
        got, grad = _run(lambda a: [tf.roll(a, shift, axis), tf.gradients(tf.reduce_sum(tf.roll(a, shift, axis) * w),
                                                                         a)[0]], x)
        want = np.roll(x, shift, axis)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(grad, np.roll(w, np.negative(shift), axis))
    g = tf.Graph()
    with g.as_default():
        xs, s = ph(tf.float32, [3, 4, 5]), ph(tf.int32, [])
        fed = tf.roll(xs, s, 1)
    sess = tf.compat.v1.Session(graph=g)
    for k in (0, 3, -9, 40):
        np.testing.assert_array_equal(sess.run(fed, {xs: x, s: k}), np.roll(x, k, 1))


def test_roll_errors():
    x = tf.constant(np.ones((2, 3), np.float32))
    with pytest.raises(InvalidArgumentError):
        tf.roll(x, [1, 2], [0])
    with pytest.raises(InvalidArgumentError):
        tf.roll(x, 1, 2)


def test_saturate_cast_as_tf():
    cases = [  # (input, input dtype, target dtype, TF 2.21's output)
        ([3e9, -3e9, np.nan, 2.5, -2.5, np.inf], tf.float32, tf.int32,
         [2147483520, -2147483648, -2147483648, 2, -2, 2147483520]),
        ([300, -300, 5], tf.int32, tf.uint8, [255, 0, 5]),
        ([1e40, -1e40, 1.5], tf.float64, tf.float32, [3.4028234663852886e+38, -3.4028234663852886e+38, 1.5]),
        ([3e9, -3e9, 1.0], tf.float64, tf.int32, [2147483647, -2147483648, 1]),
        ([-5, 70000], tf.int32, tf.int16, [-5, 32767]),
        ([-5.0, 1e10], tf.float32, tf.uint32, [0, 4294967040]),
    ]
    for values, src, dst, want in cases:
        got = tf.saturate_cast(tf.constant(values, src), dst)
        assert got.dtype == dst
        np.testing.assert_array_equal(got.numpy(), np.array(want, dst.np))
    assert tf.dtypes.saturate_cast(tf.constant([1 + 2j]), tf.float32).numpy().tolist() == [1.0]
    with pytest.raises(TypeError):
        tf.saturate_cast(tf.constant([True]), tf.float32)


def test_reciprocal_no_nan_and_rint(no_fallback):
    x = np.array([0.0, 2.0, -0.0, np.inf, -4.0, 0.5], np.float32)
    got, grad = _run(lambda a: [tf.math.reciprocal_no_nan(a), tf.gradients(tf.math.reciprocal_no_nan(a), a)[0]], x)
    with np.errstate(divide="ignore"):
        np.testing.assert_array_equal(got, np.where(x == 0, 0, 1 / x))
        np.testing.assert_array_equal(grad, np.where(x == 0, 0, -1 / (x * x)))
    r = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 2.4, np.nan, -np.inf], np.float32)
    np.testing.assert_array_equal(_run(lambda a: tf.math.rint(a), r), np.rint(r))


def _np_in_top_k(targets, pred, k):
    """TF's CPU kernel: no for a target out of range or a row holding inf / NaN; else
    whether fewer than k predictions are strictly above the target's."""
    out = []
    for t, row in zip(targets, pred):
        if not 0 <= t < len(row) or not np.isfinite(row).all():
            out.append(False)
        else:
            out.append(int((row > row[t]).sum()) < k)
    return np.array(out)


def test_in_top_k(no_fallback):
    rng = np.random.default_rng(2)
    pred = rng.integers(0, 4, (40, 6)).astype(np.float32)       # many ties
    pred[3, 2], pred[7, 0], pred[9, 5] = np.nan, np.inf, -np.inf
    targets = rng.integers(-1, 7, 40).astype(np.int32)
    for k in (0, 1, 3, 6):
        got = _run(lambda t, p: tf.math.in_top_k(t, p, k), targets, pred)
        np.testing.assert_array_equal(got, _np_in_top_k(targets, pred, k))
    assert tf.nn.in_top_k(tf.constant([1]), tf.constant([[0.1, 0.9]]), 1).numpy().tolist() == [True]


def test_trace_logdet_band_part_cross(no_fallback):
    rng = np.random.default_rng(9)
    a = rng.standard_normal((2, 4, 4))
    spd = a @ np.swapaxes(a, -1, -2) + 4 * np.eye(4)
    tr, g_tr = _run(lambda m: [tf.linalg.trace(m), tf.gradients(tf.linalg.trace(m), m)[0]], spd)
    np.testing.assert_allclose(tr, np.trace(spd, axis1=-2, axis2=-1), rtol=1e-12)
    np.testing.assert_array_equal(g_tr, np.broadcast_to(np.eye(4), spd.shape))

    m = np.arange(1.0, 31.0).reshape(2, 3, 5)
    rows, cols = np.arange(3)[:, None], np.arange(5)[None, :]
    for lo, up in ((0, 0), (1, 0), (0, -1), (-1, 1), (2, 2), (-1, -1)):
        keep = ((lo < 0) | (rows - cols <= lo)) & ((up < 0) | (cols - rows <= up))
        got, grad = _run(lambda x: [tf.linalg.band_part(x, lo, up),
                                    tf.gradients(tf.reduce_sum(tf.linalg.band_part(x, lo, up)), x)[0]], m)
        np.testing.assert_array_equal(got, np.where(keep, m, 0))
        np.testing.assert_array_equal(grad, np.broadcast_to(keep, m.shape).astype(np.float64))

    u, v = rng.standard_normal((2, 5, 3)), rng.standard_normal((2, 5, 3))
    w = rng.standard_normal((2, 5, 3))
    c, gu, gv = _run(lambda x, y: [tf.linalg.cross(x, y)] + tf.gradients(tf.reduce_sum(tf.linalg.cross(x, y) * w),
                                                                         [x, y]), u, v)
    np.testing.assert_allclose(c, np.cross(u, v), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gu, np.cross(v, w), rtol=1e-12, atol=1e-12)     # TF's: cross(v, g)
    np.testing.assert_allclose(gv, np.cross(w, u), rtol=1e-12, atol=1e-12)     # and cross(g, u)


def test_logdet():
    """(Cholesky has no compiled lowering: such graphs run in the interpreter.)"""
    a = np.random.default_rng(9).standard_normal((2, 4, 4))
    spd = a @ np.swapaxes(a, -1, -2) + 4 * np.eye(4)
    ld, g_ld = _run(lambda m: [tf.linalg.logdet(m), tf.gradients(tf.linalg.logdet(m), m)[0]], spd)
    np.testing.assert_allclose(ld, np.linalg.slogdet(spd)[1], rtol=1e-12)
    np.testing.assert_allclose(g_ld, np.linalg.inv(spd), rtol=1e-10, atol=1e-12)    # symmetric: inv(M)^T
