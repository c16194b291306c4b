"""Code generation performance paths (issue 6): multi-output loop nests with
fused reductions (value + gradient of an elementwise loss in one pass),
merged contiguous dimensions, threads (bit-identical whatever the count),
float -> int casts of NaN / out-of-range values."""
import re
import warnings

import numpy as np
import pytest

import jitgrad as tf
from jitgrad import compiler
from jitgrad.codegen import parallel

import _jit_harness as H


def _sess(g):
    return tf.compat.v1.Session(graph=g)


def _w2(n):
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [n])
        f = tf.reduce_sum(tf.tanh(x) * tf.exp(-x * x) + tf.sqrt(x * x + 1))
        grad = tf.gradients(f, x)[0]
    v = np.random.default_rng(2).uniform(-3, 3, n).astype(np.float32)
    return g, x, f, grad, v


def _w2_numpy(x):
    t, e, s = np.tanh(x), np.exp(-x * x), np.sqrt(x * x + 1)
    return np.sum((t * e + s).astype(np.float64)), (1 - t * t) * e + t * e * (-2 * x) + x / s


@pytest.fixture
def threads():
    yield parallel.set_num_threads
    parallel.set_num_threads(None)


def _arrays(rep, n_bytes):
    return [b for b in rep.buffers if b[1] >= n_bytes]


def test_value_and_gradient_one_pass():
    n = 100_000
    g, x, f, grad, v = _w2(n)
    s = _sess(g)
    rep = s.explain([f, grad], {x: v})
    # one loop nest stores the gradient and accumulates the sum
    nests = [h for h, _ in rep.groups if h.startswith("nest")]
    assert len(nests) == 1 and "accumulates [node" in nests[0] and "Sum" in nests[0], rep.groups
    assert len(rep.groups) == 1, rep.groups
    # the only n-element buffer is the fetched gradient: x read once, grad written once
    big = _arrays(rep, n)
    assert len(big) == 1 and big[0][0].startswith("out1"), rep.buffers
    assert rep.arena_bytes < 4 * n
    # vectorised, no scalar libm calls
    H.assert_vectorised(rep.asm)
    calls = set(re.findall(r"call\w*\s+\*?(\S+)", rep.asm))
    assert not any(re.search(r"exp|tanh|sqrt|log", c) for c in calls), calls
    val, gr = s.run([f, grad], {x: v})
    rv, rg = _w2_numpy(v)
    assert abs(float(val) - rv) <= 1e-6 * abs(rv)
    np.testing.assert_allclose(gr, rg, rtol=2e-6, atol=2e-6)


def test_scalar_upstream_gradient_not_materialised():
    # d/dx sum(x*x) = 2x: the broadcast ones of the reduce_sum gradient stays a scalar
    n = 50_000
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [n])
        f = tf.reduce_sum(x * x)
        gr = tf.gradients(f, x)[0]
    s = _sess(g)
    v = np.linspace(-1, 1, n, dtype=np.float32)
    rep = s.explain([f, gr], {x: v})
    assert len(_arrays(rep, n)) == 1, rep.buffers
    val, gv = s.run([f, gr], {x: v})
    np.testing.assert_allclose(gv, 2 * v, rtol=1e-6)
    assert abs(float(val) - float(np.sum(v.astype(np.float64) ** 2))) < 1e-3


def test_reduction_result_used_elementwise_is_not_fused_into_its_own_nest():
    # x - mean(x) needs the finished mean: two nests, correct values
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [1000])
        y = x - tf.reduce_mean(x)
        z = tf.reduce_sum(y * y)
    v = np.random.default_rng(0).standard_normal(1000).astype(np.float32)
    s = _sess(g)
    got = s.run([y, z], {x: v})
    ref = v - v.mean(dtype=np.float64).astype(np.float32)
    np.testing.assert_allclose(got[0], ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1], np.sum(ref.astype(np.float64) ** 2), rtol=1e-5)


def test_nest_value_read_through_transpose():
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [64, 64])
        y = tf.exp(x) * 2.0
        z = tf.transpose(y) + y
        w = y * 3.0
    v = np.random.default_rng(1).standard_normal((64, 64)).astype(np.float32)
    got = _sess(g).run([y, z, w], {x: v})
    ye = np.exp(v) * np.float32(2)
    np.testing.assert_allclose(got[0], ye, rtol=1e-6)
    np.testing.assert_allclose(got[1], ye.T + ye, rtol=1e-6)
    np.testing.assert_allclose(got[2], ye * 3, rtol=1e-6)


def _loops(rep):
    return [re.search(r"loops (\[[^\]]*\])", h).group(1) for h, _ in rep.groups if h.startswith("nest")]


@pytest.mark.parametrize("shape,other,loops", [
    ((1000, 3), (1000, 3), "[3000]"),
    ((4, 1, 5, 6), (4, 1, 5, 6), "[120]"),
    ((10, 20, 30), (30,), "[200, 30]"),
    ((10, 20, 30), (20, 1), "[10, 20, 30]"),
    ((7, 8, 9), (1, 1, 1), "[504]"),
])
def test_merged_dimensions(shape, other, loops):
    g = tf.Graph()
    with g.as_default():
        a = tf.compat.v1.placeholder(tf.float32, shape)
        b = tf.compat.v1.placeholder(tf.float32, other)
        y = tf.sin(a) * b + a
    rng = np.random.default_rng(3)
    va = rng.standard_normal(shape).astype(np.float32)
    vb = rng.standard_normal(other).astype(np.float32)
    s = _sess(g)
    rep = s.explain(y, {a: va, b: vb})
    assert _loops(rep) == [loops], rep.groups
    got = s.run(y, {a: va, b: vb})
    np.testing.assert_allclose(got, np.sin(va) * vb + va, rtol=2e-6, atol=2e-6)


def test_threads_bit_identical(threads):
    n = 300_000
    g, x, f, grad, v = _w2(n)
    with g.as_default():
        m = tf.reduce_max(tf.sin(x) * x)
        p = tf.reduce_mean(tf.exp(x * 0.1))
    s = _sess(g)
    plan = compiler.make_plan(s, [f, grad, m, p], [(x, v)])
    assert plan.kernel.meta["parallel"] and plan.kernel.meta["threads"] >= 2
    res = {}
    for t in (1, 2, 3):
        threads(t)
        res[t] = [np.asarray(r) for r in s.run([f, grad, m, p], {x: v})]
        res[t] += [np.asarray(r) for r in s.run([f, grad, m, p], {x: v})]
    for t in (2, 3):
        for a, b in zip(res[1], res[t]):
            assert a.tobytes() == b.tobytes()
    rv, rg = _w2_numpy(v)
    assert abs(float(res[1][0]) - rv) <= 1e-6 * abs(rv)
    np.testing.assert_allclose(res[1][1], rg, rtol=2e-6, atol=2e-6)
    assert float(res[1][2]) == float(np.max(np.sin(v) * v))


def test_sum_threads_accuracy(threads):
    v = np.random.default_rng(1).random(2_000_003, dtype=np.float32)
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, v.shape)
        s_ = tf.reduce_sum(x * 1.5 + 0.25)
    s = _sess(g)
    out = []
    for t in (1, 2):
        threads(t)
        out.append(float(s.run(s_, {x: v})))
    assert out[0] == out[1]
    exact = float(np.sum(v.astype(np.float64) * 1.5 + 0.25))
    assert abs(out[0] - exact) <= 1e-6 * exact


def test_small_graphs_stay_serial():
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [])
        y = tf.compat.v1.placeholder(tf.float32, [])
        gr = tf.gradients(x ** 2 + y ** 3, [x, y])
    s = _sess(g)
    plan = compiler.make_plan(s, gr, [(x, np.float32(1)), (y, np.float32(2))])
    assert not plan.kernel.meta["parallel"]
    assert s.run(gr, {x: 1.0, y: 2.0}) == [2.0, 12.0]


def test_parallel_kernel_with_runtime_checks_is_serial():
    n = 2_000_000
    g = tf.Graph()
    with g.as_default():
        a = tf.compat.v1.placeholder(tf.int32, [n])
        b = tf.compat.v1.placeholder(tf.int32, [n])
        q = tf.math.floordiv(a * 3 + 1, b) + tf.math.floormod(a, b)
    s = _sess(g)
    va = np.arange(n, dtype=np.int32)
    vb = np.full(n, 7, np.int32)
    plan = compiler.make_plan(s, [q], [(a, va), (b, vb)])
    assert not plan.kernel.meta["parallel"]
    np.testing.assert_array_equal(s.run(q, {a: va, b: vb}), (va * 3 + 1) // vb + va % vb)
    vb[12345] = 0
    with pytest.raises(tf.errors.InvalidArgumentError):
        s.run(q, {a: va, b: vb})


@pytest.mark.parametrize("src", [np.float32, np.float64])
@pytest.mark.parametrize("dst", [np.int32, np.int64])
def test_float_to_int_cast_matches_numpy(src, dst):
    vals = np.array([np.nan, np.inf, -np.inf, 3e9, -3e9, 1e19, -1e19, 2.5, -2.5, -0.9, 2147483647.0,
                     -2147483648.5, 9.3e18, -9.3e18], dtype=src)
    vals = np.concatenate([vals, vals[::-1], vals])
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.as_dtype(src), [vals.size])
        y = tf.cast(x, tf.as_dtype(dst))
    got = _sess(g).run(y, {x: vals})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = vals.astype(dst)   # x86: INT_MIN for NaN and out-of-range values
    np.testing.assert_array_equal(got, ref)


def test_thread_count_setting(threads):
    threads(1)
    assert parallel.num_threads() == 1
    assert parallel.kernel_threads({"parallel": True, "threads": 4}) == 1
    threads(3)
    assert parallel.kernel_threads({"parallel": True, "threads": 2}) == 2
    assert parallel.kernel_threads({"parallel": False}) == 1


def _mlp(batch=256, din=784, dh=512, dout=10, seed=3):
    rng = np.random.default_rng(seed)
    inp = {"X": rng.standard_normal((batch, din)).astype(np.float32),
           "W1": (rng.standard_normal((din, dh)) * 0.05).astype(np.float32),
           "b1": np.zeros(dh, np.float32),
           "W2": (rng.standard_normal((dh, dout)) * 0.05).astype(np.float32)}
    g = tf.Graph()
    with g.as_default():
        ph = {k: tf.compat.v1.placeholder(tf.float32, v.shape) for k, v in inp.items()}
        h = tf.nn.relu(tf.matmul(ph["X"], ph["W1"]) + ph["b1"])
        loss = tf.reduce_sum(tf.square(tf.matmul(h, ph["W2"])))
        grads = tf.gradients(loss, [ph["W1"], ph["b1"], ph["W2"]])
    return g, [loss] + grads, {ph[k]: v for k, v in inp.items()}, inp


def test_matmul_threads_bit_identical(threads):
    # W3-size GEMMs run on all threads with a dynamic row schedule (B packed
    # once, row chunks taken from a counter): results must not depend on the
    # thread count, nor on which thread takes which chunk
    g, fetches, feed, inp = _mlp()
    s = _sess(g)
    plan = compiler.make_plan(s, fetches, list(feed.items()))
    assert plan.kernel.meta["parallel"]
    rep = s.explain(fetches, feed)
    assert any("MatMul" in h and "parallel" in h for h, _ in rep.groups), rep.groups
    assert any("packed B (shared)" in b[0] for b in rep.buffers), rep.buffers
    res = {}
    for t in (1, 2, 3, 5):
        threads(t)
        res[t] = [[np.asarray(r) for r in s.run(fetches, feed)] for _ in range(3)]
    ref = res[1][0]
    for t in res:
        for run in res[t]:
            for a, b in zip(ref, run):
                assert a.tobytes() == b.tobytes(), t
    X, W1, b1, W2 = (inp[k].astype(np.float64) for k in ("X", "W1", "b1", "W2"))
    hp = X @ W1 + b1
    h = np.maximum(hp, 0)
    dh = (2 * (h @ W2)) @ W2.T * (hp > 0)
    np.testing.assert_allclose(ref[1], X.T @ dh, rtol=2e-4, atol=2e-4 * np.abs(X.T @ dh).max())
    np.testing.assert_allclose(ref[3], h.T @ (2 * (h @ W2)), rtol=2e-4, atol=1e-3)


def _mlp_xent(batch=256, din=784, dh=512, dout=10, seed=4):
    """The W3 benchmark's graph: softmax cross-entropy loss and all gradients."""
    rng = np.random.default_rng(seed)
    inp = {"X": rng.standard_normal((batch, din)).astype(np.float32),
           "Y": np.eye(dout, dtype=np.float32)[rng.integers(0, dout, batch)],
           "W1": (rng.standard_normal((din, dh)) * 0.05).astype(np.float32),
           "b1": np.zeros(dh, np.float32),
           "W2": (rng.standard_normal((dh, dout)) * 0.05).astype(np.float32),
           "b2": np.zeros(dout, np.float32)}
    g = tf.Graph()
    with g.as_default():
        ph = {k: tf.compat.v1.placeholder(tf.float32, v.shape) for k, v in inp.items()}
        h = tf.nn.relu(tf.matmul(ph["X"], ph["W1"]) + ph["b1"])
        logits = tf.matmul(h, ph["W2"]) + ph["b2"]
        loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=ph["Y"], logits=logits))
        grads = tf.gradients(loss, [ph["W1"], ph["b1"], ph["W2"], ph["b2"]])
    return g, [loss] + grads, {ph[k]: v for k, v in inp.items()}, inp


def test_serial_segments_share_no_barriers(threads):
    # W3's kernel: parallel GEMMs and nests with a chain of small serial nests
    # (the softmax, its sums and maxima) between them.  Serial segments all run
    # on thread 0 in order, so barriers are needed only into and out of a
    # parallel segment (plus a parallel GEMM's "B is packed" one): at most 3
    # per parallel segment, however many serial segments there are.
    g, fetches, feed, inp = _mlp_xent()
    s = _sess(g)
    rep = s.explain(fetches, feed)
    # each barrier site is a call of the module's one barrier function (codegen/sync.py)
    n_barriers = len(re.findall(r"call void @\"?jitgrad\.barrier[\w.]*\"?\(", rep.unoptimised_ir))
    n_par = sum("parallel" in h for h, _ in rep.groups)
    n_serial = len(rep.groups) - n_par
    assert n_par >= 2 and n_serial >= 8, rep.groups
    assert 0 < n_barriers <= 3 * n_par and n_barriers < len(rep.groups), (n_barriers, rep.groups)
    # the results do not depend on the thread count, and are right
    res = []
    for t in (1, 2, 3):
        threads(t)
        res.append([np.asarray(r) for r in s.run(fetches, feed)])
    for r in res[1:]:
        assert [a.tobytes() for a in r] == [a.tobytes() for a in res[0]]
    X, Y, W1, b1, W2, b2 = (inp[k].astype(np.float64) for k in ("X", "Y", "W1", "b1", "W2", "b2"))
    hp = X @ W1 + b1
    h = np.maximum(hp, 0)
    z = h @ W2 + b2
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    dz = (p - Y) / len(X)
    dhp = dz @ W2.T * (hp > 0)
    want = [-np.mean(np.sum(Y * np.log(p), 1)), X.T @ dhp, dhp.sum(0), h.T @ dz, dz.sum(0)]
    for got, w in zip(res[0], want):
        np.testing.assert_allclose(got, w, rtol=1e-4, atol=1e-4 * np.abs(w).max())


def test_barrier_sleepers_are_woken(threads):
    # More threads than this host has cores, and serial stretches between the
    # parallel GEMMs: waiters outlast their spin and sleep in futex
    # (codegen/sync.py); every one must be woken, every run the same bits.
    g, fetches, feed, inp = _mlp()
    s = _sess(g)
    rep = s.explain(fetches, feed)
    assert re.search(r"declare.*@\"?syscall\"?\(", rep.unoptimised_ir) and "bar.futex" in rep.unoptimised_ir
    threads(1)
    want = [np.asarray(r).tobytes() for r in s.run(fetches, feed)]
    threads(5)
    got = _runs_watched(lambda: s.run(fetches, feed), 40)
    assert all(r == want for r in got)


def _runs_watched(run, n, first=None):
    """The results (bytes) of ``n`` calls of ``run`` made on a watched thread (the
    first n-1 inside the context ``first()`` when given): a hung parallel kernel
    fails the test instead of hanging the suite."""
    import contextlib
    import threading
    got, errors = [], []

    def runs():
        try:
            with (first or contextlib.nullcontext)():
                for _ in range(n - (first is not None)):
                    got.append([np.asarray(r).tobytes() for r in run()])
            if first is not None:
                got.append([np.asarray(r).tobytes() for r in run()])
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)
    t = threading.Thread(target=runs, daemon=True)
    t.start()
    t.join(timeout=300)
    assert not t.is_alive(), f"parallel kernel hung after {len(got)} runs"
    assert not errors, errors
    assert len(got) == n
    return got


def _late_schedules(delay_s):
    """call_parallel stand-ins (compiler._call_parallel) that start the workers late:
    'after': thread 0 runs the whole kernel before any worker starts (each is then
    refused at the kernel's door: thread 0 has left); 'delayed': workers start
    ``delay_s`` into thread 0's run (a callable: drawn per worker).  Like the pool,
    each resets the kernel's team word once every thread has returned."""
    import ctypes
    import threading
    import time
    from jitgrad.codegen.sync import TEAM_OFFSET
    fntype = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)

    def reset(status):
        ctypes.c_int32.from_address(status + TEAM_OFFSET).value = 0

    def after(fn_addr, slots, n, status):
        fn = fntype(fn_addr)
        fn(slots, 0, n)
        for t in range(1, n):
            fn(slots, t, n)
        reset(status)

    def delayed(fn_addr, slots, n, status):
        fn = fntype(fn_addr)

        def worker(t):
            time.sleep(delay_s() if callable(delay_s) else delay_s)
            fn(slots, t, n)
        ws = [threading.Thread(target=worker, args=(t,)) for t in range(1, n)]
        for w in ws:
            w.start()
        fn(slots, 0, n)
        for w in ws:
            w.join()
        reset(status)
    return {"after": after, "delayed": delayed}


@pytest.mark.parametrize("schedule", ["after", "delayed"])
def test_threads_that_join_late_are_not_waited_for(threads, monkeypatch, schedule):
    # codegen/sync.py: a barrier waits only for threads that have joined the call.
    # Thread 0 runs W3's kernel to the end before the other threads even start
    # ('after': the old barrier counted all n threads and hung here), or they start
    # part-way ('delayed'); they skip the barriers already passed and take what
    # blocks are left.  Same bits as one thread, and the next ordinary call works
    # (the caller resets the team word).
    import contextlib
    g, fetches, feed, inp = _mlp_xent()
    s = _sess(g)
    threads(1)
    want = [np.asarray(r).tobytes() for r in s.run(fetches, feed)]
    threads(3)
    late = _late_schedules(0.0005)[schedule]

    @contextlib.contextmanager
    def late_pool():
        with monkeypatch.context() as m:
            m.setattr(compiler, "_call_parallel", late)
            yield
    got = _runs_watched(lambda: s.run(fetches, feed), 11, first=late_pool)   # the 11th: the real pool
    assert all(r == want for r in got)


def test_threads_joining_at_random_points_give_the_same_bits(threads, monkeypatch):
    # The dynamic split (codegen/sync.py, kernel.loop_grab): workers join W3's kernel
    # at random points (before, inside or after a parallel GEMM, between its packing
    # and its row chunks, or after thread 0 has left) and take whatever blocks are
    # left.  Every call gives the single-thread bits, with 2 and 3 threads.
    g, fetches, feed, inp = _mlp_xent()
    s = _sess(g)
    threads(1)
    want = [np.asarray(r).tobytes() for r in s.run(fetches, feed)]
    rng = np.random.default_rng(11)
    late = _late_schedules(lambda: float(rng.uniform(0, 0.008)))["delayed"]
    monkeypatch.setattr(compiler, "_call_parallel", late)
    for t in (2, 3):
        threads(t)
        got = _runs_watched(lambda: s.run(fetches, feed), 25)
        assert all(r == want for r in got), t


def _parallel_gemm_result(threads, A, B, build):
    """y = build(a, b) for placeholders fed A and B: asserts the kernel is parallel and
    that 1, 2, 3 and again 1 threads give the same bits; -> (session, y, feed, result)."""
    g = tf.Graph()
    with g.as_default():
        a = tf.compat.v1.placeholder(tf.float32, A.shape)
        b = tf.compat.v1.placeholder(tf.float32, B.shape)
        y = build(a, b)
    s = _sess(g)
    feed = {a: A, b: B}
    plan = compiler.make_plan(s, [y], list(feed.items()))
    assert plan.kernel.meta["parallel"], plan.kernel.meta
    res = set()
    for t in (1, 2, 3, 1):
        threads(t)
        res.add(s.run(y, feed).tobytes())
    assert len(res) == 1
    return s, y, feed, np.frombuffer(res.pop(), np.float32).reshape(y.shape)


def test_wide_gemm_row_chunks_bit_identical_over_threads(threads):
    # A parallel GEMM the prepacked path does not take (N beyond one NC block of
    # B) hands out row chunks dynamically (kernel.grab_rows, one per thread slot):
    # any thread count gives the same bits, and numpy's values.
    from jitgrad.codegen import matmul as mm
    M, K, N = 70, 96, 4200
    assert not mm.prepack_supported("float32", 1, M, N, K, False)
    rng = np.random.default_rng(5)
    A = rng.standard_normal((M, K)).astype(np.float32)
    B = rng.standard_normal((K, N)).astype(np.float32)
    *_, got = _parallel_gemm_result(threads, A, B, lambda a, b: tf.matmul(a, b) + 1.0)
    np.testing.assert_allclose(got, A.astype(np.float64) @ B + 1.0, rtol=1e-4, atol=1e-3)


def test_batched_gemm_split_by_matrix_bit_identical_over_threads(threads):
    # A parallel batched GEMM with a B per matrix (attention's Q K^T) gives each thread
    # whole matrices of the batch (lower_matmul.py: by_batch): any thread count gives
    # the same bits, and numpy's values (float64 reference).
    rng = np.random.default_rng(6)
    Q = rng.standard_normal((16, 128, 64)).astype(np.float32)
    Kt = rng.standard_normal((16, 128, 64)).astype(np.float32)
    s, y, feed, got = _parallel_gemm_result(
        threads, Q, Kt, lambda q, k: tf.matmul(q, k, transpose_b=True) + 1.0)
    rep = s.explain(y, feed)
    assert any("BatchMatMul" in h and "parallel" in h for h, _ in rep.groups), rep.groups
    want = Q.astype(np.float64) @ np.swapaxes(Kt, 1, 2) + 1.0
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


@pytest.mark.parametrize("a_shape,b_shape", [
    ((16, 128, 128), (128, 72)),         # B shared by the batch: rows split, B packed once per thread
    ((4, 1, 128, 128), (1, 3, 128, 96)),  # batch dims broadcast on both sides: copied on thread 0
    ((3, 128, 160), (3, 160, 300)),      # too few matrices to hand out: rows split
])    # (each above fusion_plan.PAR_MIN_FLOPS, so the kernel is parallel)
def test_batched_gemm_broadcasts_bit_identical_over_threads(threads, a_shape, b_shape):
    rng = np.random.default_rng(8)
    A = rng.standard_normal(a_shape).astype(np.float32)
    B = rng.standard_normal(b_shape).astype(np.float32)
    *_, got = _parallel_gemm_result(threads, A, B, lambda a, b: tf.matmul(a, b) * 2.0)
    want = 2.0 * (A.astype(np.float64) @ B)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
