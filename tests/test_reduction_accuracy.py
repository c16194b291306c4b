"""Accuracy of additive reductions (ops/sums.py): half types (float16, bfloat16) are summed in
float32 and rounded once, as TF's Eigen reductions do, along any axis; float32 / float64 sums
along an outer axis are summed in blocks, not row after row. Expected values come from exact
arithmetic (fills whose sums are exact) or math.fsum, not from the code under test; each case
runs eagerly, in a graph (both Session modes: halves have no lowering and run the reference
kernels in either) and in a tf.function."""
import importlib.util
import math

import numpy as np
import pytest

import jitgrad as tf
from jitgrad.ops import sums
from _graph_testing import run_graph

HALVES = [np.float16] + ([tf.bfloat16.as_numpy_dtype] if importlib.util.find_spec("ml_dtypes") else [])
ALL_MODES = ["eager", "interpret", "compiled", "function"]


def _half_ids(dt):
    return np.dtype(dt).name


def _run(build, feeds, mode):
    """build(*tensors) on the arrays ``feeds``: eagerly, in a Session of ``mode`` or a tf.function."""
    if mode == "eager":
        out = build(*[tf.constant(f) for f in feeds])
        return [np.asarray(o) for o in out]
    if mode == "function":
        out = tf.function(build)(*[tf.constant(f) for f in feeds])
        return [np.asarray(o) for o in out]
    return run_graph(build, feeds, mode, fallback_ok=True)


def _rounded(exact, dt):
    """The exact value rounded once to dt (through float64 -> float32 -> dt: both exact here)."""
    return np.asarray(np.float32(exact)).astype(dt)


@pytest.mark.parametrize("mode", ALL_MODES)
@pytest.mark.parametrize("dt", HALVES, ids=_half_ids)
def test_half_sums_along_outer_axes(dt, mode):
    # 5,000 halves of 0.5: exactly 2500 (float16: 2500; bfloat16: 2496 once rounded). Added in the
    # half type a sum stalls at 1024 (float16) / 128 (bfloat16).
    x2 = np.full([5000, 8], 0.5, dt)
    x3 = np.full([3, 5000, 4], 0.5, dt)
    ids = np.zeros([5000], np.int32)
    got = _run(lambda a, b, i: [tf.reduce_sum(a, axis=0), tf.reduce_sum(b, axis=1), tf.reduce_mean(a, axis=0),
                                tf.reduce_mean(b, axis=1), tf.math.segment_sum(a, i),
                                tf.math.unsorted_segment_sum(a, i, 2), tf.math.segment_mean(a, i),
                                tf.reduce_sum(b, axis=[0, 1])],
               [x2, x3, ids], mode)
    s = _rounded(2500, dt)
    want = [np.full([8], s), np.full([3, 4], s), np.full([8], 0.5, dt), np.full([3, 4], 0.5, dt),
            np.full([1, 8], s), np.array([[s] * 8, [0] * 8], dt), np.full([1, 8], 0.5, dt),
            np.full([4], _rounded(7500, dt))]
    for g, w in zip(got, want):
        assert g.dtype == np.dtype(dt)
        np.testing.assert_array_equal(g.astype(np.float32), w.astype(np.float32))


@pytest.mark.parametrize("mode", ALL_MODES)
@pytest.mark.parametrize("dt", HALVES, ids=_half_ids)
def test_half_logsumexp_and_softmax_along_axis_0(dt, mode):
    x = np.full([5000, 8], 0.5, dt)
    lse, sm = _run(lambda a: [tf.reduce_logsumexp(a, axis=0), tf.nn.softmax(a, axis=0)], [x], mode)
    # shifted by the max: 5,000 x exp(0) = 5000 exactly, then log, + 0.5, rounded (TF: float16 9.016)
    want_lse = 0.5 + math.log(5000)
    eps = float(np.finfo(np.float16).eps) if dt is np.float16 else 2.0 ** -7
    np.testing.assert_allclose(lse.astype(np.float64), want_lse, rtol=2 * eps)
    np.testing.assert_allclose(sm.astype(np.float64), 1 / 5000, rtol=2 * eps)


@pytest.mark.parametrize("mode", ALL_MODES)
@pytest.mark.parametrize("dt", HALVES, ids=_half_ids)
def test_half_broadcast_gradients(dt, mode):
    # the gradients of bias_add, a broadcast add, tile and gather sum 5,000 ones (exact: 5000)
    x = np.full([5000, 16], 0.5, dt)
    b = np.zeros([16], dt)
    v = np.full([1, 16], 0.5, dt)

    def build(x, b, v):
        with tf.GradientTape(persistent=True) as t:
            t.watch([b, v])
            y1 = tf.reduce_sum(tf.nn.bias_add(x, b))
            y2 = tf.reduce_sum(x + b)
            y3 = tf.reduce_sum(tf.tile(v, [5000, 1]))
            y4 = tf.reduce_sum(tf.gather(b, tf.zeros([5000], tf.int32)))
        return [t.gradient(y1, b), t.gradient(y2, b), t.gradient(y3, v), tf.convert_to_tensor(t.gradient(y4, b))]

    if mode in ("interpret", "compiled"):
        def build(x, b, v, _b=build):   # noqa: F811  (graph mode: tf.gradients)
            y = [tf.reduce_sum(tf.nn.bias_add(x, b)), tf.reduce_sum(x + b), tf.reduce_sum(tf.tile(v, [5000, 1])),
                 tf.reduce_sum(tf.gather(b, tf.zeros([5000], tf.int32)))]
            return [tf.gradients(y[0], b)[0], tf.gradients(y[1], b)[0], tf.gradients(y[2], v)[0],
                    tf.convert_to_tensor(tf.gradients(y[3], b)[0])]
    got = _run(build, [x, b, v], mode)
    s = _rounded(5000, dt).astype(np.float32)
    for k, g in enumerate(got):
        want = np.full(g.shape, s, np.float32)
        if k == 3:
            want[1:] = 0
        np.testing.assert_array_equal(g.astype(np.float32), want)


@pytest.mark.parametrize("mode", ALL_MODES)
def test_float16_random_column_sums(mode):
    # |randn| [4096, 64]: each column sum within one rounding of the exact one (half an ulp, 2^-11
    # relative, plus float32's share); added in float16 they were 10% low
    x = np.abs(np.random.default_rng(7).standard_normal([4096, 64])).astype(np.float16)
    exact = np.array([math.fsum(c) for c in x.astype(np.float64).T])
    (got,) = _run(lambda a: [tf.reduce_sum(a, axis=0)], [x], mode)
    np.testing.assert_allclose(got.astype(np.float64), exact, rtol=2.0 ** -11 + 1e-5)


@pytest.mark.parametrize("mode", ALL_MODES)
def test_float32_outer_axis_sums_are_blocked(mode):
    # 1e6 rows of float32 0.1 (exact sum 100000.0015): added row after row numpy gave 100958.34 (TF
    # 99759.85); the compiled code adds in float64 and gets 100000.0. Bias gradient over 200k rows:
    # 20000.0003 exact (old 19959.49, TF 19997.11). Middle axis of a 3-D tensor likewise.
    x = np.full([1_000_000, 8], 0.1, np.float32)
    y = np.ones([200_000, 8], np.float32)
    z = np.full([2, 300_000, 4], 0.1, np.float32)
    t = float(np.float32(0.1))

    def build(x, y, z):
        b = tf.zeros([8])
        if mode in ("interpret", "compiled"):
            g = tf.gradients(tf.reduce_sum(tf.nn.bias_add(y, b) * 0.1), b)[0]
        else:
            with tf.GradientTape() as tape:
                tape.watch(b)
                loss = tf.reduce_sum(tf.nn.bias_add(y, b) * 0.1)
            g = tape.gradient(loss, b)
        return [tf.reduce_sum(x, axis=0), g, tf.reduce_sum(z, axis=1), tf.reduce_mean(x, axis=0)]

    s0, g, s1, m = _run(build, [x, y, z], mode)
    np.testing.assert_allclose(s0.astype(np.float64), 1_000_000 * t, rtol=1e-5)
    np.testing.assert_allclose(g.astype(np.float64), 200_000 * t, rtol=1e-5)
    np.testing.assert_allclose(s1.astype(np.float64), 300_000 * t, rtol=1e-5)
    np.testing.assert_allclose(m.astype(np.float64), t, rtol=1e-5)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("shape, axes", [((3000, 5), (0,)), ((4, 2500, 3), (1,)), ((300, 7, 400), (0, 2)),
                                         ((130, 129, 3), (0, 1)), ((5, 1, 1000, 2), (2,)), ((257, 1), (0,)),
                                         ((0, 3), (0,)), ((40000,), (0,)), ((3, 4), ())])
def test_add_reduce_against_fsum(dt, shape, axes):
    x = np.random.default_rng(3).standard_normal(shape).astype(dt)
    for keep in (False, True):
        got = sums.reference_sum(x, axes, keep)
        xm = np.moveaxis(x.astype(np.float64), axes, list(range(len(axes))))
        flat = xm.reshape((-1,) + xm.shape[len(axes):]) if axes else xm[None]
        want = np.zeros(flat.shape[1:])
        ab = np.zeros(flat.shape[1:])
        for idx in np.ndindex(*flat.shape[1:]):
            col = flat[(slice(None),) + idx]
            want[idx] = math.fsum(col)
            ab[idx] = np.abs(col).sum()
        want_shape = tuple(1 if d in axes else n for d, n in enumerate(shape) if keep or d not in axes)
        assert got.shape == want_shape and got.dtype == np.dtype(dt)
        eps = np.finfo(dt).eps
        err = np.abs(got.astype(np.float64).reshape(want.shape) - want)
        assert np.all(err <= eps * (np.abs(want) + 64 * ab)), (err.max(), shape, axes)
    # the same input through a transposed (non-contiguous) view: the same sums
    xt = np.ascontiguousarray(x.T).T
    np.testing.assert_array_equal(sums.reference_sum(xt, axes), sums.reference_sum(x, axes))


def test_add_reduce_deterministic_and_unchanged_for_short_axes():
    x = np.random.default_rng(5).standard_normal([100_000, 12]).astype(np.float32)
    a = sums.reference_sum(x, (0,))
    assert np.array_equal(a, sums.reference_sum(x.copy(), (0,)))
    # at most BLOCK rows, and inner axes: numpy's own order (the same bits as before)
    short = x[:sums.BLOCK]
    np.testing.assert_array_equal(sums.reference_sum(short, (0,)), np.sum(short, axis=0))
    np.testing.assert_array_equal(sums.reference_sum(x, (1,)), np.sum(x, axis=1))
    np.testing.assert_array_equal(sums.reference_sum(x, (0, 1)), np.sum(x.reshape(-1)))


def test_float32_outer_sums_reference_agrees_with_compiled():
    x = np.random.default_rng(11).standard_normal([50_000, 16]).astype(np.float32)
    y = np.random.default_rng(12).standard_normal([6, 40_000, 5]).astype(np.float32)

    def build(a, b):
        return [tf.reduce_sum(a, axis=0), tf.reduce_mean(b, axis=1), tf.reduce_sum(b, axis=[0, 1])]
    ref = run_graph(build, [x, y], "interpret")
    com = run_graph(build, [x, y], "compiled")
    for r, c, src, axes in zip(ref, com, [x, y, y], [(0,), (1,), (0, 1)]):
        ab = np.abs(src.astype(np.float64)).sum(axis=axes)
        if len(axes) == 1 and src is y:
            ab /= src.shape[1]
        np.testing.assert_array_less(np.abs(r.astype(np.float64) - c.astype(np.float64)), 1e-6 * ab + 1e-30)
