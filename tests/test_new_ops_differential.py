"""Differential test of round 36's ops: seeded random graphs over bench/tf_fuzz_new.py's
catalogue (convolutions, pooling, tf.image, cumulative_logsumexp, special functions, repeat,
sequence_mask, searchsorted, reverse_sequence, strided_slice, tensor_scatter_nd_*,
space_to_depth, lrn, set_diag, count_nonzero, meshgrid; bitwise / truncatediv / unravel_index
on integers), each run by a Session compiled and interpreted: values, first derivatives and
(float graphs) the second derivative of the summed gradients must agree. The builders are the
fuzzer's (one catalogue for both: the fuzzer compares the same programs with TF 2.21).

Tolerances as tests/test_differential.py's: float32 rtol 2e-4 / atol 1e-5, float64 1e-9; NaN
and infinities at the same places; integers exactly.
"""
import os
import sys

import numpy as np
import pytest

import jitgrad as tf
from jitgrad.cache import set_enabled

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))
import tf_fuzz_new as cat  # noqa: E402

SHAPES = [(), (3,), (1, 3), (2, 1), (2, 3), (2, 2, 3)]
TOL = {np.float32: dict(rtol=2e-4, atol=1e-5), np.float64: dict(rtol=1e-9, atol=1e-12)}


@pytest.fixture(autouse=True)
def _no_disk():
    set_enabled(False)
    yield
    set_enabled(None)


def _run(build, feeds, mode):
    g = tf.Graph()
    with g.as_default():
        ps = [tf.compat.v1.placeholder(f.dtype, f.shape) for f in feeds]
        fetches = build(ps)
    before = tf.cache_info()["fallbacks"]
    with tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto(jitgrad_mode=mode)) as s:
        out = s.run(fetches, dict(zip(ps, feeds)))
    # a fallback would compare the interpreter with itself
    assert tf.cache_info()["fallbacks"] == before, "the compiled run fell back to the interpreter"
    return out


def _close(a, b, what):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype, what
    if a.dtype.kind != "f":
        np.testing.assert_array_equal(b, a, err_msg=what)
        return
    np.testing.assert_array_equal(np.isnan(b), np.isnan(a), err_msg=what)
    np.testing.assert_array_equal(np.where(np.isinf(b), b, 0), np.where(np.isinf(a), a, 0), err_msg=what)
    m = np.isfinite(a) & np.isfinite(b)
    np.testing.assert_allclose(b[m], a[m], err_msg=what, **TOL[a.dtype.type])


def _float_program(seed):
    rng = np.random.default_rng(seed)
    dtype = np.float64 if seed % 4 == 3 else np.float32
    feeds = []
    for _ in range(int(rng.integers(1, 3))):
        v = rng.uniform(-2.0, 2.0, SHAPES[int(rng.integers(0, len(SHAPES)))])
        if rng.random() < 0.3:
            v = np.round(v * 2) / 2      # ties: max pooling, scatter max / min, searchsorted
        feeds.append(np.asarray(v, dtype))
    steps = []
    for _ in range(int(rng.integers(1, 4))):
        p, i, j = (int(v) for v in rng.integers(0, 1 << 20, 3))
        if rng.random() < 0.5:
            steps.append((cat.NEW_UNARY[str(rng.choice(sorted(cat.NEW_UNARY)))], i, None, p))
        else:
            steps.append((cat.NEW_BINARY[str(rng.choice(sorted(cat.NEW_BINARY)))], i, j, p))
    return feeds, steps, bool(rng.random() < 0.5)


def _build_float(steps, second):
    def build(xs):
        pool = list(xs)
        for fn, i, j, p in steps:
            a = pool[i % len(pool)]
            pool.append(fn(tf, a, p) if j is None else fn(tf, a, pool[j % len(pool)], p))
        outs = pool[len(xs):]
        loss = tf.add_n([tf.reduce_sum(o * (0.5 + k)) for k, o in enumerate(outs)])
        grads = [g for g in tf.gradients(loss, xs) if g is not None]
        fetches = outs + grads
        if second and grads:
            fetches += [g for g in tf.gradients(tf.add_n([tf.reduce_sum(tf.sin(g)) for g in grads]), xs)
                        if g is not None]
        return fetches
    return build


@pytest.mark.parametrize("seed", range(30))
def test_float_graphs_compiled_equal_interpreted(seed):
    feeds, steps, second = _float_program(3600 + seed)
    build = _build_float(steps, second)
    ref = _run(build, feeds, "interpret")
    got = _run(build, feeds, "compiled")
    assert len(ref) == len(got)
    for k, (a, b) in enumerate(zip(ref, got)):
        _close(a, b, "seed %d fetch %d: %s" % (seed, k, [s[0].__name__ for s in steps]))


def _int_program(seed):
    rng = np.random.default_rng(seed)
    # (int8 / uint8 / int16 run in the interpreter by design, README: the fuzzer compares them with TF)
    dtype = ["int32", "int64"][seed % 2]
    info = np.iinfo(dtype)
    feeds = []
    for _ in range(int(rng.integers(1, 3))):
        shape = SHAPES[int(rng.integers(0, len(SHAPES)))]
        v = rng.integers(max(info.min, -40), min(info.max, 40) + 1, shape)
        if rng.random() < 0.3:       # the extremes: sign bits, INT_MIN / -1
            v = np.where(rng.random(shape) < 0.5, info.min, info.max)
        feeds.append(np.asarray(v, dtype))
    steps = []
    for _ in range(int(rng.integers(1, 4))):
        p, i, j = (int(v) for v in rng.integers(0, 1 << 20, 3))
        if rng.random() < 0.4:
            steps.append((cat.NEW_INT_UNARY[str(rng.choice(sorted(cat.NEW_INT_UNARY)))], i, None, p))
        else:
            steps.append((cat.NEW_INT_BINARY[str(rng.choice(sorted(cat.NEW_INT_BINARY)))], i, j, p))
    return feeds, steps


def _build_int(steps):
    def build(xs):
        pool = list(xs)
        for fn, i, j, p in steps:
            a = pool[i % len(pool)]
            if j is None:
                pool.append(fn(tf, a, p))
                continue
            b = pool[j % len(pool)]
            try:
                np.broadcast_shapes(tuple(a.shape), tuple(b.shape))
            except ValueError:
                b = tf.reduce_sum(b)
            pool.append(fn(tf, a, b, p))
        return pool[len(xs):]
    return build


def _outcome(build, feeds, mode):
    """The fetched values, or the exception's class (TF's, checked by the fuzzer): truncatediv by
    zero is TF's InternalError, truncatemod of int8 its TypeError."""
    try:
        return _run(build, feeds, mode)
    except (tf.errors.OpError, TypeError, ValueError) as e:
        return type(e)


@pytest.mark.parametrize("seed", range(12))
def test_integer_graphs_compiled_equal_interpreted(seed):
    feeds, steps = _int_program(3700 + seed)
    build = _build_int(steps)
    ref = _outcome(build, feeds, "interpret")
    got = _outcome(build, feeds, "compiled")
    if isinstance(ref, type):
        assert got is ref
        return
    for k, (a, b) in enumerate(zip(ref, got)):
        _close(a, b, "seed %d fetch %d: %s" % (seed, k, [s[0].__name__ for s in steps]))
