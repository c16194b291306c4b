"""Matmul and layout ops reading values whose leading dimension is known only at run
time (codegen/lower_rows.py, lower_rows_matmul.py): the all-states RNN, every state of
x_{t+1} = tanh(W x_t + 0.1) stacked from a dynamic TensorArray, then projected /
reshaped / sliced. Each program runs compiled (no fallback, one kernel for every trip
count T) and interpreted; values are checked against numpy on the same recurrence,
gradients against backpropagation through time written out by hand below."""
import numpy as np
import pytest

import jitgrad as tf
from test_differential import check_close, run_both

tf1 = tf.compat.v1
TRIPS = (0, 1, 3, 37)


def _weights(d, seed=0):
    return np.random.default_rng(seed).standard_normal((d, d)) * (0.8 / np.sqrt(d))


def _np_states(W, x0, trips):
    x, rows = np.asarray(x0, np.float64), []
    for _ in range(trips):
        x = np.tanh(W @ x + 0.1)
        rows.append(x)
    return np.array(rows).reshape(trips, len(x0))


def _np_bptt(W, states, g_states, x0):
    """d loss / d x0 given d loss / d states (each state_t = tanh(W state_{t-1} + 0.1))."""
    gx = np.zeros(len(x0))
    for t in reversed(range(len(states))):
        gx = W.T @ ((gx + g_states[t]) * (1.0 - states[t] ** 2))
    return gx


def _rnn(d, dt):
    """(graph, T, x0, W, stacked states [None, d])."""
    g = tf.Graph()
    with g.as_default():
        T = tf1.placeholder(tf.int32, [])
        x0 = tf1.placeholder(dt, [d])
        W = _weights(d)
        Wc = tf.constant(W.astype(dt.np))
        ta = tf.TensorArray(dt, size=0, dynamic_size=True)

        def body(i, x, ta):
            x = tf.tanh(tf.linalg.matvec(Wc, x) + 0.1)
            return i + 1, x, ta.write(i, x)
        _, _, ta = tf.while_loop(lambda i, x, ta: i < T, body, [0, x0, ta])
    return g, T, x0, W, ta.stack()


def _compiles(g, fetches, feed):
    with g.as_default():
        report = str(tf1.Session(graph=g).explain(fetches, feed))
    assert "FALLBACK" not in report, report


def _tol(dt):
    return dict(rtol=1e-12, atol=1e-12) if dt == tf.float64 else dict(rtol=2e-5, atol=2e-5)


def _run_all_trips(g, fetches, feeds, dt):
    """Compiled vs interpreter for every T; at most one compile for all of them."""
    compiles = tf.cache_info()["compiles"]
    out = {}
    for trips, feed in feeds.items():
        _compiles(g, fetches, feed)
        compiled, interpreted = run_both(g, fetches, feed)
        for k, (a, b) in enumerate(zip(interpreted, compiled)):
            check_close(a, b, np.dtype(dt.np).type, f"fetch {k} T={trips}")
        out[trips] = compiled
    assert tf.cache_info()["compiles"] - compiles <= 1
    return out


@pytest.mark.parametrize("dt", [tf.float32, tf.float64])
@pytest.mark.parametrize("d,n,transpose_b", [(4, 3, False), (20, 33, False), (5, 17, True)])
def test_projection_of_all_states_and_its_gradients(dt, d, n, transpose_b):
    """y = states @ Wo (or Wo^T): forward GEMM over run-time rows; d/dWo = states^T @ dy
    (the sum over run-time rows); d/dx0 = dy @ Wo^T, back through the loop."""
    g, T, x0, W, st = _rnn(d, dt)
    rng = np.random.default_rng(d + n)
    wo = rng.standard_normal((n, d) if transpose_b else (d, n))
    c = rng.standard_normal(n)
    with g.as_default():
        Wo = tf1.placeholder(dt, wo.shape)
        y = tf.matmul(st, Wo, transpose_b=transpose_b)
        loss = tf.reduce_sum(y * y * c)
        gwo, gx0 = tf.gradients(loss, [Wo, x0])
    x0v = np.linspace(-1, 1, d)
    feeds = {t: {T: t, x0: x0v.astype(dt.np), Wo: wo.astype(dt.np)} for t in TRIPS}
    out = _run_all_trips(g, [y, loss, gwo, gx0], feeds, dt)
    wproj = wo.T if transpose_b else wo
    for t, (yv, lv, gw, gx) in out.items():
        S = _np_states(W, x0v, t)
        Y = S @ wproj
        dY = 2 * Y * c
        assert yv.shape == (t, n) and yv.dtype == dt.np
        np.testing.assert_allclose(yv, Y, **_tol(dt))
        np.testing.assert_allclose(lv, np.sum(Y * Y * c), **_tol(dt))
        dW = S.T @ dY
        np.testing.assert_allclose(gw, dW.T if transpose_b else dW, **_tol(dt))
        np.testing.assert_allclose(gx, _np_bptt(W, S, dY @ wproj.T, x0v), **_tol(dt))


def test_matmul_over_rows_is_bit_identical_run_to_run():
    g, T, x0, W, st = _rnn(20, tf.float32)
    with g.as_default():
        Wo = tf.constant(np.random.default_rng(1).standard_normal((20, 40)).astype(np.float32))
        y = tf.matmul(tf.tanh(st) * 2.0, Wo)
        (gw,) = tf.gradients(tf.reduce_sum(tf.sin(y)), [Wo])
    s = tf1.Session(graph=g)
    feed = {T: 300, x0: np.linspace(-1, 1, 20).astype(np.float32)}
    first = s.run([y, gw], feed)
    for _ in range(3):
        again = s.run([y, gw], feed)
        assert all(np.array_equal(a, b) for a, b in zip(first, again))


def test_weight_gradient_of_two_row_values_sums_over_the_rows():
    """A^T B with both operands of run-time rows (transpose_a): the sum over rows, vs numpy."""
    g, T, x0, W, st = _rnn(6, tf.float64)
    with g.as_default():
        z = tf.matmul(st, tf.exp(st) + 1.0, transpose_a=True)
    for t in TRIPS:
        feed = {T: t, x0: np.linspace(-1, 1, 6)}
        _compiles(g, [z], feed)
        compiled, interpreted = run_both(g, [z], feed)
        S = _np_states(W, np.linspace(-1, 1, 6), t)
        np.testing.assert_allclose(compiled[0], S.T @ (np.exp(S) + 1.0), rtol=1e-12, atol=1e-12)
        check_close(interpreted[0], compiled[0], np.float64)


def _rnn_batch1(d, dt):
    """The RNN of a batch of one: states [1, d], stacked [None, 1, d]."""
    g = tf.Graph()
    with g.as_default():
        T = tf1.placeholder(tf.int32, [])
        x0 = tf1.placeholder(dt, [1, d])
        W = _weights(d)
        Wc = tf.constant(W.T.astype(dt.np))   # x @ W^T: the same recurrence as W x
        ta = tf.TensorArray(dt, size=0, dynamic_size=True)

        def body(i, x, ta):
            x = tf.tanh(tf.matmul(x, Wc) + 0.1)
            return i + 1, x, ta.write(i, x)
        _, _, ta = tf.while_loop(lambda i, x, ta: i < T, body, [0, x0, ta])
    return g, T, x0, W, ta.stack()


@pytest.mark.parametrize("dt", [tf.float32, tf.float64])
def test_reshaped_stack_projected_the_users_rnn(dt):
    """matmul(reshape(ta.stack(), [-1, d]), W_out): the reshape keeps the rows (a view),
    its gradient reshapes back; the reshaped view fetched is copied out for the host."""
    d, n = 8, 5
    g, T, x0, W, st = _rnn_batch1(d, dt)
    wo = np.random.default_rng(7).standard_normal((d, n))
    with g.as_default():
        flat = tf.reshape(st, [-1, d])
        y = tf.matmul(flat, tf.constant(wo.astype(dt.np)))
        loss = tf.reduce_sum(tf.square(y))
        (gx0,) = tf.gradients(loss, [x0])
    x0v = np.linspace(-1, 1, d)
    feeds = {t: {T: t, x0: x0v[None].astype(dt.np)} for t in TRIPS}
    out = _run_all_trips(g, [flat, y, gx0], feeds, dt)
    for t, (fv, yv, gx) in out.items():
        S = _np_states(W, x0v, t)
        assert fv.shape == (t, d)
        np.testing.assert_allclose(fv, S, **_tol(dt))
        np.testing.assert_allclose(yv, S @ wo, **_tol(dt))
        np.testing.assert_allclose(gx, _np_bptt(W, S, 2 * (S @ wo) @ wo.T, x0v)[None], **_tol(dt))


def test_reshape_splitting_rows_and_expand_squeeze():
    """[R, 1, 4] -> [-1] (4R rows of one element), -> [-1, 2] (2R rows), ExpandDims /
    Squeeze on an inner axis; reductions and elementwise ops read them; fetched too."""
    g, T, x0, W, st = _rnn_batch1(4, tf.float64)
    with g.as_default():
        v = tf.reshape(st, [-1])
        pairs = tf.reshape(st * 2.0, [-1, 2])
        sq = tf.squeeze(st, axis=1)
        ex = tf.expand_dims(sq, 2)
        fetches = [v, tf.reduce_sum(v * v), pairs, tf.reduce_max(pairs, axis=1), sq, ex,
                   tf.reduce_sum(ex, axis=0)]
    for t in TRIPS:
        feed = {T: t, x0: np.linspace(-1, 1, 4)[None]}
        _compiles(g, fetches, feed)
        compiled, interpreted = run_both(g, fetches, feed)
        S = _np_states(W, np.linspace(-1, 1, 4), t)
        want = [S.reshape(-1), np.sum(S * S), (2 * S).reshape(-1, 2), (2 * S).reshape(-1, 2).max(1)
                if t else np.zeros(0), S, S[:, :, None], S[:, :, None].sum(0)]
        for k, (a, b, w) in enumerate(zip(compiled, interpreted, want)):
            assert a.shape == w.shape, (k, t)
            np.testing.assert_allclose(a, w, rtol=1e-12, atol=1e-12, err_msg=f"fetch {k} T={t}")
            check_close(b, a, np.float64, f"fetch {k} T={t}")


# layout ops moving data within each row (lower_rows_layout.py): (build, numpy) on the
# stacked states st [R, 1, 4] of the batch-of-one RNN
INNER = {
    "transpose": (lambda st: tf.transpose(st, [0, 2, 1]) * [[1.0], [2.0], [3.0], [4.0]],
                  lambda S: np.transpose(S, (0, 2, 1)) * np.array([1.0, 2, 3, 4])[:, None]),
    "concat_axis2": (lambda st: tf.concat([st, tf.tanh(st) * 3.0], axis=2),
                     lambda S: np.concatenate([S, np.tanh(S) * 3.0], axis=2)),
    "concat_axis1": (lambda st: tf.concat([st * 2.0, st], axis=-2), lambda S: np.concatenate([S * 2, S], axis=1)),
    "pack_axis1": (lambda st: tf.stack([st, st * st], axis=1), lambda S: np.stack([S, S * S], axis=1)),
    "slice_inner": (lambda st: st[:, :, 1:3] * 2.0, lambda S: S[:, :, 1:3] * 2.0),
    "tile": (lambda st: tf.tile(st, [1, 2, 3]) * 1.5, lambda S: np.tile(S, (1, 2, 3)) * 1.5),
    "slice_strided": (lambda st: st[..., ::-2], lambda S: S[..., ::-2]),
    "slice_int": (lambda st: st[:, 0, 2] + st[:, 0, 1], lambda S: S[:, 0, 2] + S[:, 0, 1]),
    "split": (lambda st: tf.split(st, [1, 3], axis=2)[1] - tf.split(st, 2, axis=2)[0][:, :, :1],
              lambda S: S[:, :, 1:] - S[:, :, :1]),
    "gather_axis2": (lambda st: tf.gather(st, [3, 0, 0, 2], axis=2), lambda S: S[:, :, [3, 0, 0, 2]]),
}


@pytest.mark.parametrize("name", sorted(INNER))
def test_layout_within_rows_and_its_gradient(name):
    """Values vs numpy, gradient wrt x0 (through the layout op's gradient and the reverse
    loop) vs the interpreter, for T = 0, 1, 3, 37 on one kernel."""
    build, ref = INNER[name]
    g, T, x0, W, st = _rnn_batch1(4, tf.float64)
    with g.as_default():
        y = build(st)
        loss = tf.reduce_sum(tf.sin(y))
        gx0 = tf.gradients(loss, [x0])[0]
    x0v = np.linspace(-1, 1, 4)
    out = _run_all_trips(g, [y, loss, gx0], {t: {T: t, x0: x0v[None]} for t in TRIPS}, tf.float64)
    for t, (yv, lv, _) in out.items():
        S = _np_states(W, x0v, t)[:, None, :]
        want = ref(S)
        assert yv.shape == want.shape, (yv.shape, want.shape)
        np.testing.assert_allclose(yv, want, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(lv, np.sum(np.sin(want)), rtol=1e-12, atol=1e-12)


def _two_loops(dt=tf.float64):
    """Two dynamic TensorArrays stacked by loops of trip counts T1, T2 (rows of different sources)."""
    g = tf.Graph()
    with g.as_default():
        T1 = tf1.placeholder(tf.int32, [])
        T2 = tf1.placeholder(tf.int32, [])
        x0 = tf1.placeholder(dt, [3])
        sts = []
        for T, scale in ((T1, 0.5), (T2, -0.7)):
            ta = tf.TensorArray(dt, size=0, dynamic_size=True)

            def body(i, x, ta, scale=scale):
                x = tf.tanh(x * scale + 0.1)
                return i + 1, x, ta.write(i, x)
            _, _, ta = tf.while_loop(lambda i, x, ta, T=T: i < T, body, [0, x0, ta])
            sts.append(ta.stack())
    return g, T1, T2, x0, sts


def _np_scaled(x0, scale, trips):
    x, rows = np.asarray(x0, np.float64), []
    for _ in range(trips):
        x = np.tanh(x * scale + 0.1)
        rows.append(x)
    return np.array(rows).reshape(trips, len(x0))


def test_rows_of_two_sources_checked_equal_at_run_time():
    """st1 * st2 + 1, A^T B and their gradient: compiled when the trip counts agree (vs
    numpy and the interpreter); InvalidArgumentError "Incompatible shapes" when they do
    not, in both modes, and the kernel is not recompiled for either."""
    g, T1, T2, x0, (s1, s2) = _two_loops()
    with g.as_default():
        y = s1 * s2 + 1.0
        z = tf.matmul(s1, s2, transpose_a=True)
        (gx,) = tf.gradients(tf.reduce_sum(y) + tf.reduce_sum(z), [x0])
    x0v = np.array([0.3, -0.2, 0.5])
    compiles = tf.cache_info()["compiles"]
    for t in (0, 1, 6):
        feed = {T1: t, T2: t, x0: x0v}
        _compiles(g, [y, z, gx], feed)
        compiled, interpreted = run_both(g, [y, z, gx], feed)
        S1, S2 = _np_scaled(x0v, 0.5, t), _np_scaled(x0v, -0.7, t)
        np.testing.assert_allclose(compiled[0], S1 * S2 + 1.0, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(compiled[1], S1.T @ S2, rtol=1e-12, atol=1e-12)
        for a, b in zip(interpreted, compiled):
            check_close(a, b, np.float64)
    # (4 rows times 1 row: TF broadcasts the product y, and so does the kernel
    # (test_dynamic_rows_ops2.py); the matmul and the gradient through it are errors)
    for t1, t2, fetches in ((3, 5, (y, z, gx)), (0, 2, (y, z, gx)), (4, 1, (z, gx))):
        for mode in ("compiled", "interpret"):
            s = tf1.Session(graph=g, config=tf1.ConfigProto(jitgrad_mode=mode))
            for fetch in fetches:
                with pytest.raises(tf.errors.InvalidArgumentError, match="Incompatible shapes|must be equal"):
                    s.run(fetch, {T1: t1, T2: t2, x0: x0v})
    assert tf.cache_info()["compiles"] - compiles <= 4   # one kernel per distinct fetch list


@pytest.mark.parametrize("dt", [tf.float32, tf.float64])
def test_gather_rows_by_run_time_indices_and_its_gradient(dt):
    """tf.gather(states, idx) along the run-time rows (idx fed, repeated indices) and the
    gradient scattered back into the rows, through the loop: vs numpy / BPTT; an index
    past the rows is TF's InvalidArgumentError in both modes, on the same kernel."""
    d = 5
    g, T, x0, W, st = _rnn(d, dt)
    with g.as_default():
        idx = tf1.placeholder(tf.int32, [4])
        picked = tf.gather(st, idx)
        loss = tf.reduce_sum(picked * picked * np.arange(1.0, d + 1).astype(dt.np))
        (gx,) = tf.gradients(loss, [x0])
    x0v = np.linspace(-1, 1, d)
    iv = np.array([2, 0, 2, 1], np.int32)
    compiles = tf.cache_info()["compiles"]
    for t in (3, 4, 37):
        feed = {T: t, x0: x0v.astype(dt.np), idx: iv}
        _compiles(g, [picked, gx], feed)
        compiled, interpreted = run_both(g, [picked, gx], feed)
        S = _np_states(W, x0v, t)
        np.testing.assert_allclose(compiled[0], S[iv], **_tol(dt))
        gS = np.zeros_like(S)
        np.add.at(gS, iv, 2 * S[iv] * np.arange(1.0, d + 1))
        np.testing.assert_allclose(compiled[1], _np_bptt(W, S, gS, x0v), **_tol(dt))
        for a, b in zip(interpreted, compiled):
            check_close(a, b, np.dtype(dt.np).type)
    for t, bad in ((2, [0, 1, 2, 0]), (0, [0, 0, 0, 0]), (5, [0, -1, 1, 1])):
        for mode in ("compiled", "interpret"):
            s = tf1.Session(graph=g, config=tf1.ConfigProto(jitgrad_mode=mode))
            for fetch in (picked, gx):
                with pytest.raises(tf.errors.InvalidArgumentError):
                    s.run(fetch, {T: t, x0: x0v.astype(dt.np), idx: np.array(bad, np.int32)})
    assert tf.cache_info()["compiles"] - compiles <= 3   # one kernel per fetch list


def _rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def test_rows_buffers_are_freed_or_handed_over():
    """Every intermediate of run-time rows (the projection, its gradient, a reshaped view
    fetched and copied out, a gathered gradient) is heap memory: freed when the kernel
    returns or handed to the host. 30 runs of ~4 MB rows each must not grow the process
    (a leak of one buffer per run would add > 100 MB)."""
    d = 64
    g, T, x0, W, st = _rnn_batch1(d, tf.float64)
    with g.as_default():
        flat = tf.reshape(st, [-1, d])
        y = tf.matmul(flat, tf.constant(np.eye(d) * 0.5))
        loss = tf.reduce_sum(y * y) + tf.reduce_sum(tf.gather(flat, [0, 3, 3]))
        (gx,) = tf.gradients(loss, [x0])
    s = tf1.Session(graph=g)
    feed = {T: 8000, x0: np.full((1, d), 0.1)}
    for _ in range(3):
        s.run([flat, gx], feed)
    before = _rss_bytes()
    for _ in range(30):
        out = s.run([flat, gx], feed)
    assert out[0].shape == (8000, d)
    assert _rss_bytes() - before < 60 * 2 ** 20


@pytest.mark.parametrize("k", [0, 2, -1, -3])
def test_one_row_of_run_time_rows_and_its_gradient(k):
    """x[k] (k from the end when negative: the last state is x[-1]) of the stacked states
    and of an expression of them, its gradient back into row k alone and through the
    loop; k outside [-T, T) is InvalidArgumentError in both modes."""
    g, T, x0, W, st = _rnn(4, tf.float64)
    with g.as_default():
        a = st[k]
        b = (tf.tanh(st) * 2.0)[k]
        loss = tf.reduce_sum(a * a) + tf.reduce_sum(b)
        (gx,) = tf.gradients(loss, [x0])
    x0v = np.linspace(-1, 1, 4)
    compiles = tf.cache_info()["compiles"]
    for t in (3, 4, 37):
        feed = {T: t, x0: x0v}
        _compiles(g, [a, b, gx], feed)
        compiled, interpreted = run_both(g, [a, b, gx], feed)
        S = _np_states(W, x0v, t)
        np.testing.assert_allclose(compiled[0], S[k], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(compiled[1], np.tanh(S[k]) * 2, rtol=1e-12, atol=1e-12)
        gS = np.zeros_like(S)
        gS[k] = 2 * S[k] + 2 * (1 - np.tanh(S[k]) ** 2)
        np.testing.assert_allclose(compiled[2], _np_bptt(W, S, gS, x0v), rtol=1e-12, atol=1e-12)
        for p, q in zip(interpreted, compiled):
            check_close(p, q, np.float64)
    assert tf.cache_info()["compiles"] - compiles <= 1
    too_few = 2 if k in (2, -3) else 0
    for mode in ("compiled", "interpret"):
        s = tf1.Session(graph=g, config=tf1.ConfigProto(jitgrad_mode=mode))
        for fetch in (a, gx):
            with pytest.raises(tf.errors.InvalidArgumentError):
                s.run(fetch, {T: too_few, x0: x0v})


@pytest.mark.parametrize("sl", [slice(1, None), slice(None, -1), slice(2, 7, 2), slice(-3, None), slice(5, 2)])
def test_row_slices_and_their_gradient(sl):
    """x[a:b:s] on the run-time rows (Python's clamping on T), fetched, reduced, combined
    elementwise, and its gradient through the loop; T = 0, 1, 3, 37 on one kernel."""
    g, T, x0, W, st = _rnn(4, tf.float64)
    with g.as_default():
        y = st[sl] * 2.0
        loss = tf.reduce_sum(tf.sin(y)) + tf.reduce_sum(st[sl] * st[sl])
        (gx,) = tf.gradients(loss, [x0])
    x0v = np.linspace(-1, 1, 4)
    out = _run_all_trips(g, [y, loss, gx], {t: {T: t, x0: x0v} for t in TRIPS}, tf.float64)
    for t, (yv, lv, gv) in out.items():
        S = _np_states(W, x0v, t)
        np.testing.assert_allclose(yv, S[sl] * 2.0, rtol=1e-12, atol=1e-12)
        assert yv.shape == S[sl].shape
        np.testing.assert_allclose(lv, np.sum(np.sin(2 * S[sl])) + np.sum(S[sl] ** 2), rtol=1e-12, atol=1e-12)
        gS = np.zeros_like(S)
        gS[sl] = 2 * np.cos(2 * S[sl]) + 2 * S[sl]
        np.testing.assert_allclose(gv, _np_bptt(W, S, gS, x0v), rtol=1e-12, atol=1e-12)


def test_concat_along_rows_and_its_gradient():
    """concat([x0 row, states], 0) (every state with the initial one: T + 1 rows), of two
    loops' stacks (T1 + T2 rows), fetched and reduced, with gradients through the loops
    (SplitToShapesOf along the rows, the static part and the rest)."""
    g, T1, T2, x0, (s1, s2) = _two_loops()
    with g.as_default():
        with_x0 = tf.concat([tf.reshape(x0, [1, 3]) * 1.0, s1], 0)
        both = tf.concat([s1, s2 * 3.0, tf.ones([2, 3], tf.float64)], axis=0)
        loss = tf.reduce_sum(tf.sin(with_x0)) + tf.reduce_sum(both * both)
        (gx,) = tf.gradients(loss, [x0])
    x0v = np.array([0.3, -0.2, 0.5])
    compiles = tf.cache_info()["compiles"]
    for t1, t2 in ((0, 0), (1, 4), (6, 2)):
        feed = {T1: t1, T2: t2, x0: x0v}
        _compiles(g, [with_x0, both, gx], feed)
        compiled, interpreted = run_both(g, [with_x0, both, gx], feed)
        S1, S2 = _np_scaled(x0v, 0.5, t1), _np_scaled(x0v, -0.7, t2)
        np.testing.assert_allclose(compiled[0], np.concatenate([x0v[None], S1]), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(compiled[1], np.concatenate([S1, 3 * S2, np.ones((2, 3))]), rtol=1e-12,
                                   atol=1e-12)
        for a, b in zip(interpreted, compiled):
            check_close(a, b, np.float64)
    assert tf.cache_info()["compiles"] - compiles <= 1
