"""More ops on values of run-time rows (the stacked states of test_dynamic_rows_ops's
RNN, [T, ...] with T fed): each compiles (no fallback, one kernel for every T) and
agrees with numpy and the interpreter; bad input is TF's InvalidArgumentError in both
modes, checked inside the kernel."""
import numpy as np
import pytest

import jitgrad as tf
from test_differential import check_close, run_both
from test_dynamic_rows_ops import (TRIPS, _compiles, _np_bptt, _np_scaled, _np_states, _rnn, _rnn_batch1, _run_all_trips,
                                   _two_loops)

tf1 = tf.compat.v1


def _both_modes_raise(g, fetches, feed):
    for mode in ("compiled", "interpret"):
        s = tf1.Session(graph=g, config=tf1.ConfigProto(jitgrad_mode=mode))
        for fetch in fetches:
            with pytest.raises(tf.errors.InvalidArgumentError):
                s.run(fetch, feed)


@pytest.mark.parametrize("dt", [tf.float32, tf.float64])
def test_gradient_of_gather_on_an_inner_axis(dt):
    """d/dst sum(c * gather(st, idx, axis=2)), idx fed with repeats: per row, c's columns
    added at their indices (numpy's add.at); an index past the axis is an error."""
    g, T, x0, W, st = _rnn_batch1(4, dt)
    c = np.arange(1.0, 6.0)
    with g.as_default():
        idx = tf1.placeholder(tf.int32, [5])
        y = tf.gather(st, idx, axis=2)
        (gst,) = tf.gradients(tf.reduce_sum(y * c.astype(dt.np)), [st])
        (gx,) = tf.gradients(tf.reduce_sum(tf.sin(y)), [x0])
    iv = np.array([3, 0, 0, 2, 3], np.int32)
    x0v = np.linspace(-1, 1, 4)[None].astype(dt.np)
    out = _run_all_trips(g, [y, gst, gx], {t: {T: t, x0: x0v, idx: iv} for t in TRIPS}, dt)
    for t, (yv, gv, _) in out.items():
        want = np.zeros((t, 1, 4))
        np.add.at(want, (slice(None), slice(None), iv), np.broadcast_to(c, (t, 1, 5)))
        np.testing.assert_array_equal(gv, want.astype(dt.np))
        np.testing.assert_allclose(yv, _np_states(W, x0v[0], t)[:, None, iv], rtol=2e-5, atol=2e-5)
    _both_modes_raise(g, [gst], {T: 3, x0: x0v, idx: np.array([0, 1, 4, 0, 0], np.int32)})
    _both_modes_raise(g, [gst], {T: 3, x0: x0v, idx: np.array([0, -1, 2, 0, 0], np.int32)})


# x[a:b:s] on the run-time rows with negative steps (Python's and TF's strided-slice
# clamping on T: bounds into [-1, T - 1], missing ones from the end backwards)
NEG_SLICES = [slice(None, None, -1), slice(5, 1, -2), slice(-2, None, -3), slice(None, -4, -1),
              slice(100, -100, -1), slice(1, None, -1), slice(0, 5, -1)]


@pytest.mark.parametrize("sl", NEG_SLICES)
def test_row_slices_with_negative_steps_and_their_gradient(sl):
    g, T, x0, W, st = _rnn(4, tf.float64)
    with g.as_default():
        y = st[sl] * 2.0
        loss = tf.reduce_sum(tf.sin(y))
        gst, gx = tf.gradients(loss, [st, x0])
    x0v = np.linspace(-1, 1, 4)
    out = _run_all_trips(g, [y, gst, gx], {t: {T: t, x0: x0v} for t in TRIPS + (6,)}, tf.float64)
    for t, (yv, gv, gxv) in out.items():
        S = _np_states(W, x0v, t)
        assert yv.shape == S[sl].shape
        np.testing.assert_allclose(yv, S[sl] * 2.0, rtol=1e-12, atol=1e-12)
        gS = np.zeros_like(S)
        gS[sl] = 2 * np.cos(2 * S[sl])
        np.testing.assert_allclose(gv, gS, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(gxv, _np_bptt(W, S, gS, x0v), rtol=1e-12, atol=1e-12)


# (a, b, s) fed: every sign of bound and step, out-of-range bounds, empty results
FED_SLICES = [(1, 4, 1), (0, 100, 2), (-3, -1, 1), (-100, 2, 1), (4, 1, -1), (5, -100, -2), (-1, -6, -3),
              (2, 2, 1), (3, 0, 1), (0, 3, -1), (100, 0, -1), (-1, 0, -1)]


def test_row_slices_with_fed_bounds_compile_once():
    """st[a:b:s] with a, b, s placeholders: the bounds are read by the kernel (not
    specialised on), so every (a, b, s) and every T runs on one kernel; values and the
    gradient wrt st vs numpy, the gradient wrt x0 vs BPTT."""
    g, T, x0, W, st, (a, b, s), fetches = _fed_slice(tf.int32)
    x0v = np.linspace(-1, 1, 4)
    compiles = tf.cache_info()["compiles"]
    for t in (0, 1, 6):
        _check_fed_slices(g, fetches, {T: t, x0: x0v}, (a, b, s), _np_states(W, x0v, t), W, x0v, FED_SLICES)
    assert tf.cache_info()["compiles"] - compiles <= 1
    _both_modes_raise(g, [fetches[0], fetches[2]], {T: 3, x0: x0v, a: 0, b: 2, s: 0})   # TF: "slice step cannot be zero"


def _fed_slice(dt):
    """The RNN's states sliced st[a:b:s] by placeholders of type dt; fetches: the slice,
    the gradients of sum(3 sin(slice)) wrt st and x0."""
    g, T, x0, W, st = _rnn(4, tf.float64)
    with g.as_default():
        bounds = tuple(tf1.placeholder(dt, []) for _ in range(3))
        a, b, s = bounds
        y = st[a:b:s]
        gst, gx = tf.gradients(tf.reduce_sum(tf.sin(y) * 3.0), [st, x0])
    return g, T, x0, W, st, bounds, [y, gst, gx]


def _check_fed_slices(g, fetches, feed, bounds, S, W, x0v, slices):
    """Compiled (no fallback) vs numpy's S[a:b:s] and its gradients, and vs the interpreter."""
    for abs_ in slices:
        fd = {**feed, **dict(zip(bounds, abs_))}
        _compiles(g, fetches, fd)
        compiled, interpreted = run_both(g, fetches, fd)
        sl = slice(*(int(v) for v in abs_))
        assert compiled[0].shape == S[sl].shape, (len(S), sl)
        np.testing.assert_allclose(compiled[0], S[sl], rtol=1e-12, atol=1e-12)
        gS = np.zeros_like(S)
        gS[sl] = 3 * np.cos(S[sl])
        np.testing.assert_allclose(compiled[1], gS, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(compiled[2], _np_bptt(W, S, gS, x0v), rtol=1e-12, atol=1e-12)
        for p, q in zip(interpreted, compiled):
            check_close(p, q, np.float64, f"T={len(S)} {sl}")


I64_MAX, I64_MIN = np.iinfo(np.int64).max, np.iinfo(np.int64).min
# int64 bounds and steps at the limits: a step past every row takes the first one alone
# (the row count, ceil(span / |s|), must not overflow on the way: it gave 0 rows)
EXTREME_SLICES = [(0, 5, I64_MAX), (4, 0, I64_MIN), (0, I64_MAX, I64_MAX), (I64_MAX, I64_MIN, I64_MIN),
                  (I64_MIN, I64_MAX, I64_MAX - 1), (3, I64_MIN, I64_MIN + 1), (-1, I64_MIN, -2)]


def test_row_slices_with_int64_bounds_at_the_limits():
    g, T, x0, W, st, bounds, fetches = _fed_slice(tf.int64)
    x0v = np.linspace(-1, 1, 4)
    _check_fed_slices(g, fetches, {T: 6, x0: x0v}, bounds, _np_states(W, x0v, 6), W, x0v, EXTREME_SLICES)


def test_row_slice_bounds_computed_from_the_row_count():
    """st[n - 3 : n - 1] and st[n // 2] with n = tf.shape(st)[0]: the bounds come from the
    loop's own result, so a kernel specialised on them would compile once per T (and run
    the loop on the host first); here one kernel serves every T."""
    g, T, x0, W, st = _rnn(4, tf.float64)
    with g.as_default():
        n = tf.shape(st)[0]
        y = st[n - 3:n - 1]
        mid = st[n // 2]
        (gx,) = tf.gradients(tf.reduce_sum(y * y) + tf.reduce_sum(mid), [x0])
    x0v = np.linspace(-1, 1, 4)
    out = _run_all_trips(g, [y, mid, gx], {t: {T: t, x0: x0v} for t in (1, 3, 4, 37)}, tf.float64)
    for t, (yv, mv, gv) in out.items():
        S = _np_states(W, x0v, t)
        np.testing.assert_allclose(yv, S[t - 3:t - 1], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(mv, S[t // 2], rtol=1e-12, atol=1e-12)
        gS = np.zeros_like(S)
        gS[t - 3:t - 1] = 2 * S[t - 3:t - 1]
        gS[t // 2] += 1.0
        np.testing.assert_allclose(gv, _np_bptt(W, S, gS, x0v), rtol=1e-12, atol=1e-12)


def test_one_row_by_a_fed_index():
    """st[k] with k fed (negative from the end): one kernel for every k and T; k outside
    [-T, T) is TF's InvalidArgumentError in both modes."""
    g, T, x0, W, st = _rnn(4, tf.float64)
    with g.as_default():
        k = tf1.placeholder(tf.int32, [])
        y = st[k]
        (gx,) = tf.gradients(tf.reduce_sum(tf.sin(y)), [x0])
    x0v = np.linspace(-1, 1, 4)
    compiles = tf.cache_info()["compiles"]
    for t in (1, 5):
        S = _np_states(W, x0v, t)
        for kv in range(-t, t):
            feed = {T: t, x0: x0v, k: kv}
            _compiles(g, [y, gx], feed)
            compiled, interpreted = run_both(g, [y, gx], feed)
            np.testing.assert_allclose(compiled[0], S[kv], rtol=1e-12, atol=1e-12)
            gS = np.zeros_like(S)
            gS[kv] = np.cos(S[kv])
            np.testing.assert_allclose(compiled[1], _np_bptt(W, S, gS, x0v), rtol=1e-12, atol=1e-12)
    assert tf.cache_info()["compiles"] - compiles <= 1
    for t, kv in ((0, 0), (3, 3), (3, -4)):
        _both_modes_raise(g, [y, gx], {T: t, x0: x0v, k: kv})


# reshapes of the stacked states st [T, 4] that merge rows (-1 * width must be a multiple of
# the new row), split them, or flatten and restack: (new shape, T values whose elements fit)
RESHAPES = {
    "flat_then_rows": (lambda st: tf.reshape(tf.reshape(st, [-1]) * 2.0, [-1, 4]), (lambda S: 2 * S), TRIPS),
    "flat": (lambda st: tf.reshape(st, [-1]), (lambda S: S.reshape(-1)), TRIPS),
    "merge_pairs": (lambda st: tf.reshape(st, [-1, 8]), (lambda S: S.reshape(-1, 8)), (0, 2, 4, 38)),
    "merge_uneven": (lambda st: tf.reshape(st, [-1, 6]), (lambda S: S.reshape(-1, 6)), (0, 3, 6, 39)),
    "merge_3d": (lambda st: tf.reshape(st, [-1, 2, 6]), (lambda S: S.reshape(-1, 2, 6)), (0, 3, 36)),
    "split": (lambda st: tf.reshape(st, [-1, 2, 2]), (lambda S: S.reshape(-1, 2, 2)), TRIPS),
    "split_rows": (lambda st: tf.reshape(st, [-1, 2]), (lambda S: S.reshape(-1, 2)), TRIPS),
}


@pytest.mark.parametrize("name", sorted(RESHAPES))
def test_reshapes_merging_and_splitting_rows(name):
    """Values vs numpy's reshape, gradients (the reshape back, ReshapeLike) wrt st vs
    numpy and wrt x0 vs BPTT, one kernel for every T; a T whose elements make no whole
    rows of the new shape is TF's InvalidArgumentError in both modes."""
    build, ref, trips = RESHAPES[name]
    g, T, x0, W, st = _rnn(4, tf.float64)
    c = np.array([1.0, -2.0])
    with g.as_default():
        y = build(st)
        loss = tf.reduce_sum(tf.sin(y)) + tf.reduce_sum(tf.reshape(y, [-1, 2]) * c)
        gst, gx = tf.gradients(loss, [st, x0])
    x0v = np.linspace(-1, 1, 4)
    out = _run_all_trips(g, [y, gst, gx], {t: {T: t, x0: x0v} for t in trips}, tf.float64)
    for t, (yv, gv, gxv) in out.items():
        S = _np_states(W, x0v, t)
        want = ref(S)
        assert yv.shape == want.shape
        np.testing.assert_allclose(yv, want, rtol=1e-12, atol=1e-12)
        k = 2.0 if name == "flat_then_rows" else 1.0   # d y / d st
        gS = k * (np.cos(want).reshape(S.shape) + np.tile(c, S.size // 2).reshape(S.shape))
        np.testing.assert_allclose(gv, gS, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(gxv, _np_bptt(W, S, gS, x0v), rtol=1e-12, atol=1e-12)
    if trips != TRIPS:
        _both_modes_raise(g, [y, gx], {T: 1, x0: x0v})


_B = np.random.default_rng(3).standard_normal((4, 3))
_C = np.random.default_rng(4).standard_normal((1, 1, 3))
# tf.matmul of rank-3 operands over the run-time rows (BatchMatMulV2) of st [T, 1, 4]:
# (build, numpy on S [T, 1, 4])
BATCH_MATMULS = {
    "static_matrix": (lambda st: tf.matmul(st, tf.constant(_B, st.dtype)), lambda S: S @ _B),
    "static_adjoint": (lambda st: tf.matmul(st, tf.constant(_B.T, st.dtype), adjoint_b=True), lambda S: S @ _B),
    "both_rows": (lambda st: tf.matmul(tf.reshape(st, [-1, 2, 2]), tf.reshape(st, [-1, 2, 2]) * 0.5,
                                       adjoint_b=True),
                  lambda S: S.reshape(-1, 2, 2) @ np.swapaxes(S.reshape(-1, 2, 2) * 0.5, 1, 2)),
    "outer_per_row": (lambda st: tf.matmul(tf.transpose(st, [0, 2, 1]), tf.sin(st)),
                      lambda S: np.swapaxes(S, 1, 2) @ np.sin(S)),
    "adjoint_a_one_row_static": (lambda st: tf.matmul(st, tf.constant(_C, st.dtype), adjoint_a=True),
                                 lambda S: np.swapaxes(S, 1, 2) @ _C),
}


@pytest.mark.parametrize("dt", [tf.float32, tf.float64])
@pytest.mark.parametrize("name", sorted(BATCH_MATMULS))
def test_batch_matmul_over_rows_and_its_gradient(name, dt):
    build, ref = BATCH_MATMULS[name]
    g, T, x0, W, st = _rnn_batch1(4, dt)
    with g.as_default():
        y = build(st)
        loss = tf.reduce_sum(tf.sin(y))
        gst, gx = tf.gradients(loss, [st, x0])
    x0v = np.linspace(-1, 1, 4)[None]
    out = _run_all_trips(g, [y, gst, gx], {t: {T: t, x0: x0v.astype(dt.np)} for t in TRIPS}, dt)
    tol = dict(rtol=1e-12, atol=1e-12) if dt == tf.float64 else dict(rtol=1e-4, atol=1e-4)
    for t, (yv, gv, _) in out.items():
        S = _np_states(W, x0v[0], t)[:, None, :]
        want = ref(S)
        assert yv.shape == want.shape and yv.dtype == dt.np
        np.testing.assert_allclose(yv, want, **tol)
        if name == "static_matrix":   # by hand: d sum(sin(S @ B)) / dS = cos(S @ B) @ B^T
            np.testing.assert_allclose(gv, np.cos(want) @ _B.T, **tol)


@pytest.mark.parametrize("dt", [tf.int32, tf.int64])
def test_integer_matmul_over_rows(dt):
    """Integer MatMul and BatchMatMulV2 of run-time rows (the float GEMM does not take
    them): exact, vs numpy's integer matmul."""
    g, T, x0, W, st = _rnn_batch1(4, tf.float64)
    m = np.arange(-4, 4).reshape(4, 2)
    with g.as_default():
        q = tf.cast(tf.round(st * 100.0), dt)           # [T, 1, 4]
        flat = tf.reshape(q, [-1, 4])
        y = tf.matmul(flat, tf.constant(m.astype(dt.np)))
        yt = tf.matmul(flat, tf.constant(m.T.astype(dt.np)), transpose_b=True)
        z = tf.matmul(q, q, adjoint_a=True)               # [T, 4, 4]
        k = tf.matmul(flat, flat * 2, transpose_a=True)   # the sum over the rows
    x0v = np.linspace(-1, 1, 4)[None]
    out = _run_all_trips(g, [y, yt, z, k], {t: {T: t, x0: x0v} for t in TRIPS}, dt)
    for t, (yv, ytv, zv, kv) in out.items():
        Q = np.round(_np_states(W, x0v[0], t) * 100.0).astype(dt.np)
        np.testing.assert_array_equal(yv, Q @ m.astype(dt.np))
        np.testing.assert_array_equal(ytv, Q @ m.astype(dt.np))
        np.testing.assert_array_equal(zv, Q[:, :, None] @ Q[:, None, :])
        np.testing.assert_array_equal(kv, Q.T @ (2 * Q))
        assert yv.dtype == dt.np and zv.shape == (t, 4, 4)


def test_one_run_time_row_broadcasts_against_many():
    """s1 * s2 + 1 and tf.maximum(s1, s2 * w) for stacks of trip counts T1, T2: where one
    is 1, its row is broadcast over the other's rows as TF does (and the interpreter);
    the gradient wrt the one-row stack sums over those rows (numpy's broadcasting rules
    by hand below). Counts that are neither equal nor 1 are TF's InvalidArgumentError.
    One kernel for all of them."""
    g, T1, T2, x0, (s1, s2) = _two_loops()
    w = np.array([0.5, -1.0, 2.0])
    with g.as_default():
        y = s1 * s2 + 1.0
        m = tf.maximum(s1, s2 * w)
        loss = tf.reduce_sum(tf.sin(y)) + tf.reduce_sum(m * m)
        g1, g2, gx = tf.gradients(loss, [s1, s2, x0])
    x0v = np.array([0.3, -0.2, 0.5])

    def want(S1, S2):
        Y, M = S1 * S2 + 1.0, np.maximum(S1, S2 * w)
        dY, dM = np.cos(Y), 2 * M
        d1 = dY * S2 + dM * (S1 >= S2 * w)   # TF's Maximum gradient: ties go to x
        d2 = dY * S1 + dM * (S1 < S2 * w) * w
        return Y, M, d1, d2
    _check_broadcast_rows(g, (T1, T2, x0), x0v, [y, m, g1, g2, gx], want, ((3, 3), (1, 4), (4, 1), (1, 1), (1, 0),
                                                                             (0, 1), (0, 0)))
    for t1, t2 in ((2, 3), (0, 2), (5, 4)):
        _both_modes_raise(g, [y, m, g1, gx], {T1: t1, T2: t2, x0: x0v})


def _check_broadcast_rows(g, feeds, x0v, fetches, want, trips):
    """For each (t1, t2): compiled (no fallback) vs want(S1, S2) -> the first fetches'
    values with the gradients wrt s1, s2 last, unsummed (numpy's broadcasting: a one-row
    stack's gradient is summed over the other's rows here), and vs the interpreter; one
    kernel for all of them."""
    T1, T2, x0 = feeds
    compiles = tf.cache_info()["compiles"]
    for t1, t2 in trips:
        feed = {T1: t1, T2: t2, x0: x0v}
        _compiles(g, fetches, feed)
        compiled, interpreted = run_both(g, fetches, feed)
        *vals, d1, d2 = want(_np_scaled(x0v, 0.5, t1), _np_scaled(x0v, -0.7, t2))
        d1 = d1.sum(0, keepdims=True) if t1 == 1 and t2 != 1 else d1
        d2 = d2.sum(0, keepdims=True) if t2 == 1 and t1 != 1 else d2
        for got, w in zip(compiled, vals + [d1, d2]):
            assert got.shape == w.shape, (t1, t2, got.shape, w.shape)
            np.testing.assert_allclose(got, w, rtol=1e-12, atol=1e-12)
        for p, q in zip(interpreted, compiled):
            check_close(p, q, np.float64, f"T1={t1} T2={t2}")
    assert tf.cache_info()["compiles"] - compiles <= 1


def test_split_of_run_time_rows_still_compiles():
    """tf.split along the run-time rows slices by SplitOffsets, which only the host
    computes: those slices stay specialised on their bounds (compiled, no fallback),
    not read by the kernel; an uneven split is TF's InvalidArgumentError."""
    g, T, x0, W, st = _rnn(4, tf.float64)
    with g.as_default():
        a, b = tf.split(st, 2)
        c, d = tf.split(st, [-1, 1])
        (gx,) = tf.gradients(tf.reduce_sum(a * 2.0) + tf.reduce_sum(tf.sin(d)), [x0])
    x0v = np.linspace(-1, 1, 4)
    for t in (4, 6):   # (T = 2 falls back on main too: a fetched piece of unknown shape)
        feed = {T: t, x0: x0v}
        _compiles(g, [a, b, c, d, gx], feed)
        compiled, interpreted = run_both(g, [a, b, c, d, gx], feed)
        S = _np_states(W, x0v, t)
        for got, want in zip(compiled[:4], (S[:t // 2], S[t // 2:], S[:-1], S[-1:])):
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
        gS = np.zeros_like(S)
        gS[:t // 2] = 2.0
        gS[-1] += np.cos(S[-1])
        np.testing.assert_allclose(compiled[4], _np_bptt(W, S, gS, x0v), rtol=1e-12, atol=1e-12)
        for p, q in zip(interpreted, compiled):
            check_close(p, q, np.float64)
    _both_modes_raise(g, [a], {T: 3, x0: x0v})


def test_batch_matmul_broadcasts_one_run_time_row_against_many():
    """tf.matmul of per-row outer products s1[:, :, None] @ s2[:, None, :] for stacks of
    trip counts T1, T2: BatchMatMulV2 broadcasts its batch dim as TF does (one row
    against R; compiled code refused it); gradients by hand, the one-row operand's summed
    over the rows (numpy's broadcasting). Neither equal nor 1 is TF's error. One kernel."""
    g, T1, T2, x0, (s1, s2) = _two_loops()
    with g.as_default():
        y = tf.matmul(s1[:, :, None], s2[:, None, :])
        g1, g2, gx = tf.gradients(tf.reduce_sum(tf.sin(y)), [s1, s2, x0])
    x0v = np.array([0.3, -0.2, 0.5])

    def want(S1, S2):
        Y = S1[:, :, None] * S2[:, None, :]
        dY = np.cos(Y)
        return Y, (dY * S2[:, None, :]).sum(2), (dY * S1[:, :, None]).sum(1)
    _check_broadcast_rows(g, (T1, T2, x0), x0v, [y, g1, g2, gx], want, ((3, 3), (1, 4), (4, 1), (1, 1), (1, 0), (0, 1)))
    for t1, t2 in ((2, 3), (0, 2), (5, 4)):
        _both_modes_raise(g, [y, g1, gx], {T1: t1, T2: t2, x0: x0v})


def test_a_check_on_a_value_read_by_a_row_loop_runs_for_zero_rows():
    """st + 2 // n with n fed 0: TF's division error whatever T is. The quotient was
    computed inside the row loop over st, which runs 0 times for T = 0 (returning [])."""
    g, T, x0, W, st = _rnn(4, tf.float64)
    with g.as_default():
        n = tf1.placeholder(tf.int32, [])
        y = st + tf.cast(tf.math.floordiv(2, n), tf.float64)
    x0v = np.linspace(-1, 1, 4)
    for t in (0, 3):
        _both_modes_raise(g, [y], {T: t, x0: x0v, n: 0})
    out = _run_all_trips(g, [y], {t: {T: t, x0: x0v, n: 3} for t in (0, 3)}, tf.float64)
    for t, (yv,) in out.items():
        np.testing.assert_array_equal(yv, _np_states(W, x0v, t))
