"""The flush-denormals mode (jitgrad/denormals.py, codegen/mxcsr.py): TF's CPU numerics
(FTZ + DAZ) by default, numpy's when turned off (set_flush_denormals(False) or
JITGRAD_FLUSH_DENORMALS=0). Tests set the mode they check explicitly (the conftest and
the fixture below restore the one they found), so they hold in either starting mode.

Expected values are IEEE facts: 1e-39 is a float32 denormal (the smallest normal is
1.18e-38), so with the mode on 1e-39 * 1 is +0 and exp(-100) (3.7e-44) is 0; with it
off both keep numpy's denormal results. Compiled (Session), interpreted, eager and
inside a compiled while_loop; MXCSR is read back through a tiny native function.
"""
import ctypes
import threading

import numpy as np
import pytest
from llvmlite import ir

import jitgrad as tf
from jitgrad import cache, compiler, denormals
from jitgrad.cache.native import host_target_machine, llvm_binding, load
from jitgrad.codegen import parallel, thread_pool
from jitgrad.ops import logging_ops
from test_differential import check_close, run_both
from test_passes_random import _others, random_graph

F32_DENORMAL = np.float32(1e-39)
FTZ_DAZ = (1 << 15) | (1 << 6)
MODES = ("compiled", "interpret")


@pytest.fixture(autouse=True)
def _mode_restored_after():
    """(conftest's reset restores the mode too; this one also covers the cache switch.)"""
    cache.set_enabled(False)       # kernels compiled here, never one a previous run left on disk
    saved = denormals.enabled()
    yield
    tf.config.set_flush_denormals(saved)
    cache.set_enabled(None)


@pytest.fixture
def threads():
    yield parallel.set_num_threads
    parallel.set_num_threads(None)


_MXCSR = []


def read_mxcsr():
    """This thread's MXCSR, read by a native function (stmxcsr)."""
    if not _MXCSR:
        mod = ir.Module(name="mxcsr_probe")
        i32 = ir.IntType(32)
        fn = ir.Function(mod, ir.FunctionType(i32, []), name="read_mxcsr")
        st = ir.Function(mod, ir.FunctionType(ir.VoidType(), [ir.IntType(8).as_pointer()]),
                         name="llvm.x86.sse.stmxcsr")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        slot = b.alloca(i32)
        b.call(st, [b.bitcast(slot, ir.IntType(8).as_pointer())])
        b.ret(b.load(slot))
        m = llvm_binding().parse_assembly(str(mod))
        code = load(host_target_machine(opt=0).emit_object(m))
        _MXCSR.append((code, ctypes.CFUNCTYPE(ctypes.c_uint32)(code.address("read_mxcsr"))))
    return _MXCSR[0][1]()


def numpy_keeps_denormals():
    return float(np.float32(F32_DENORMAL) * np.float32(1.0)) == float(F32_DENORMAL)


def _session(g, mode):
    return tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto(jitgrad_mode=mode))


def _mul_graph(shape=(4,), dtype=tf.float32):
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(dtype, shape)
        w = tf.compat.v1.placeholder(dtype, shape)     # 1.0 fed, not folded away
        y = x * w
    return g, x, w, y


# ---------------------------------------------------------------- API
def test_api_and_namespaces():
    tf.config.set_flush_denormals(False)       # (the default, on, is checked in a fresh process below)
    assert tf.config.get_flush_denormals() is False
    tf.config.experimental.set_flush_denormals(True)
    assert tf.config.get_flush_denormals() and tf.config.experimental.get_flush_denormals()
    assert denormals.enabled()
    tf.config.set_flush_denormals(False)
    assert not denormals.enabled()
    with pytest.raises(TypeError):
        tf.config.set_flush_denormals("yes")


def _in_fresh_process(env_value, code="import jitgrad as tf; print(tf.config.get_flush_denormals())"):
    """What ``code`` prints just after import, with JITGRAD_FLUSH_DENORMALS set to
    ``env_value`` (None: unset)."""
    import os
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if k != denormals.ENV}
    if env_value is not None:
        env[denormals.ENV] = env_value
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env=env).stdout.strip()


def test_default_is_on_and_env_var_opts_out():
    """TF always flushes, so the mode is on unless the variable says a false value."""
    assert _in_fresh_process(None) == "True"
    on = [_in_fresh_process(v) for v in ("1", "true", "on", "yes", "")]
    off = [_in_fresh_process(v) for v in ("0", "false", "off", "no", " False ", "OFF")]
    assert on == ["True"] * 5 and off == ["False"] * 6


def test_default_flushes_and_opt_out_keeps_in_fresh_process():
    """Eager 1e-39 * 1 and a compiled Session's: 0 by default (TF), 1e-39 with
    JITGRAD_FLUSH_DENORMALS=0 (numpy)."""
    code = ("import numpy as np, jitgrad as tf\n"
            "a = np.float32([1e-39]); one = np.float32([1.0])\n"
            "eager = float((tf.constant(a) * tf.constant(one))[0])\n"
            "g = tf.Graph()\n"
            "with g.as_default():\n"
            "    x = tf.compat.v1.placeholder(tf.float32, [1]); w = tf.compat.v1.placeholder(tf.float32, [1])\n"
            "    y = x * w\n"
            "cfg = tf.compat.v1.ConfigProto(jitgrad_mode='compiled')\n"
            "compiled = float(tf.compat.v1.Session(graph=g, config=cfg).run(y, {x: a, w: one})[0])\n"
            "print(eager, compiled)")
    assert _in_fresh_process(None, code) == "0.0 0.0"
    kept = f"{float(F32_DENORMAL)} {float(F32_DENORMAL)}"
    assert _in_fresh_process("0", code) == kept


# ---------------------------------------------------------------- values
@pytest.mark.parametrize("mode", MODES)
def test_denormal_times_one(mode):
    g, x, w, y = _mul_graph()
    feed = {x: np.array([1e-39, -1e-39, 2e-38, 0.0], np.float32), w: np.ones(4, np.float32)}
    tf.config.set_flush_denormals(False)
    kept = _session(g, mode).run(y, feed)
    np.testing.assert_array_equal(kept, feed[x])            # opted out: numpy's numerics
    tf.config.set_flush_denormals(True)
    got = _session(g, mode).run(y, feed)
    np.testing.assert_array_equal(got, np.array([0.0, -0.0, 2e-38, 0.0], np.float32))
    assert np.signbit(got[1]) and not np.signbit(got[0])    # zeros keep the sign
    tf.config.set_flush_denormals(False)
    np.testing.assert_array_equal(_session(g, mode).run(y, feed), feed[x])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_exp_underflow_and_daz(mode, dt):
    denormal = dt(1e-39) if dt == np.float32 else dt(1e-310)
    tiny = np.finfo(dt).tiny
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(dt, [3])
        d = tf.compat.v1.placeholder(dt, [3])
        e = tf.exp(x)
        s = d + tiny                     # DAZ: the denormal input counts as 0
    feed = {x: np.array([-100.0, -800.0, 0.0], dt), d: np.full(3, denormal, dt)}
    want_exp_kept = np.exp(feed[x])
    tf.config.set_flush_denormals(True)
    ge, gs = _session(g, mode).run([e, s], feed)
    np.testing.assert_array_equal(ge, np.where(want_exp_kept < tiny, 0.0, want_exp_kept).astype(dt))
    np.testing.assert_array_equal(gs, np.full(3, tiny, dt))
    if dt == np.float32:
        assert ge[0] == 0.0
    tf.config.set_flush_denormals(False)
    ge, gs = _session(g, mode).run([e, s], feed)
    assert ge[0] == np.exp(dt(-100.0)) and (dt == np.float64 or ge[0] > 0)   # 3.7e-44 in float32
    assert gs[0] == np.float64(denormal) + tiny


def test_eager():
    a, one = tf.constant(np.float32(1e-39)), tf.constant(np.float32(1.0))
    tf.config.set_flush_denormals(False)
    assert float(a * one) == float(F32_DENORMAL)
    tf.config.set_flush_denormals(True)
    r = a * one
    assert float(r) == 0.0 and r.dtype == tf.float32
    assert float(tf.exp(tf.constant(np.float32(-100.0)))) == 0.0
    assert float(tf.identity(a)) == float(F32_DENORMAL)     # a copy keeps it, as in TF
    tf.config.set_flush_denormals(False)
    assert float(a * one) == float(F32_DENORMAL)


@pytest.mark.parametrize("mode", MODES)
def test_variable_updates(mode):
    """assign_add computes (DAZ: 1e-39 + 0 is 0); assign copies (1e-39 stays)."""
    tf.config.set_flush_denormals(True)
    g = tf.Graph()
    with g.as_default():
        v = tf.compat.v1.Variable(np.float32([1e-39, 1.0]))
        d = tf.compat.v1.placeholder(tf.float32, [2])
        up, down, put = v.assign_add(d), v.assign_sub(d), v.assign(d)
        init = tf.compat.v1.global_variables_initializer()
    s = _session(g, mode)
    s.run(init)
    np.testing.assert_array_equal(s.run(up, {d: np.float32([0.0, 0.0])}), np.float32([0.0, 1.0]))
    np.testing.assert_array_equal(s.run(put, {d: np.float32([1e-39, 2.0])}), np.float32([1e-39, 2.0]))
    np.testing.assert_array_equal(s.run(down, {d: np.float32([-1e-39, 0.0])}), np.float32([0.0, 2.0]))


def test_eager_variable_updates():
    tf.config.set_flush_denormals(True)
    v = tf.Variable(np.float32([1e-39, 1.0]))
    v.assign_add(np.float32([0.0, 0.0]))
    np.testing.assert_array_equal(v.numpy(), np.float32([0.0, 1.0]))
    v.assign(np.float32([-1e-39, 1.0]))
    np.testing.assert_array_equal(v.numpy(), np.float32([-1e-39, 1.0]))
    v.assign_sub(np.float32([0.0, 0.0]))
    assert v.numpy()[0] == 0.0 and np.signbit(v.numpy()[0])


def test_tf_function():
    @tf.function
    def f(x, w):
        return x * w
    x, w = tf.constant(np.float32([1e-39, 2.0])), tf.constant(np.float32([1.0, 1.0]))
    tf.config.set_flush_denormals(False)
    np.testing.assert_array_equal(f(x, w).numpy(), np.float32([1e-39, 2.0]))
    tf.config.set_flush_denormals(True)
    np.testing.assert_array_equal(f(x, w).numpy(), np.float32([0.0, 2.0]))


def test_compiled_in_the_compile_process(monkeypatch):
    """A compile sent to the child process (codegen/compile_server.py) gets the marked text."""
    monkeypatch.setenv("JITGRAD_COMPILE_PROCESS", "1")
    tf.config.set_flush_denormals(True)
    g, x, w, y = _mul_graph()
    feed = {x: np.full(4, 1e-39, np.float32), w: np.ones(4, np.float32)}
    assert not _session(g, "compiled").run(y, feed).any()


@pytest.mark.parametrize("mode", MODES)
def test_inside_compiled_while_loop(mode):
    g = tf.Graph()
    with g.as_default():
        x0 = tf.compat.v1.placeholder(tf.float32, [])
        w = tf.compat.v1.placeholder(tf.float32, [])
        _, x = tf.while_loop(lambda i, x: i < 3, lambda i, x: (i + 1, x * w), [tf.constant(0), x0])
        gx = tf.gradients(x, x0)[0]      # w^3 = 1
    feed = {x0: np.float32(1e-39), w: np.float32(1.0)}
    tf.config.set_flush_denormals(False)
    assert _session(g, mode).run(x, feed) == F32_DENORMAL
    tf.config.set_flush_denormals(True)
    before = tf.cache_info()["fallbacks"]
    gotx, gotg = _session(g, mode).run([x, gx], feed)
    assert gotx == 0.0 and gotg == 1.0
    assert tf.cache_info()["fallbacks"] == before


# ---------------------------------------------------------------- MXCSR of the caller and the workers
@pytest.mark.skipif(not thread_pool.supported(), reason="x86-64 Linux")
def test_caller_mxcsr_restored_after_return_and_after_error():
    base = read_mxcsr()
    assert base & FTZ_DAZ == 0
    tf.config.set_flush_denormals(True)
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [4])
        i = tf.compat.v1.placeholder(tf.int32, [2])
        y = tf.gather(x * x, i)
    s = _session(g, "compiled")
    feed = {x: np.full(4, 1e-20, np.float32), i: np.array([0, 3], np.int32)}
    np.testing.assert_array_equal(s.run(y, feed), [0.0, 0.0])    # 1e-40 flushed
    assert read_mxcsr() == base and numpy_keeps_denormals()
    with pytest.raises(tf.errors.InvalidArgumentError):
        s.run(y, {x: feed[x], i: np.array([0, 9], np.int32)})    # index out of range: an error return
    assert read_mxcsr() == base and numpy_keeps_denormals()


@pytest.mark.skipif(not thread_pool.supported(), reason="native pool: Linux x86-64 only")
def test_parallel_kernel_flushes_in_worker_threads_and_restores_them(threads):
    """Workers enter a parallel kernel through ``<name>_mt`` (codegen/parallel.py). Whether
    a pool worker takes a block depends on scheduling (on a loaded host thread 0 may do
    them all), so the entry is also called by hand on a thread of its own: it must flush
    there and leave that thread's MXCSR as it found it."""
    n = 2_000_000
    g, x, w, y = _mul_graph((n,))
    with g.as_default():
        y = tf.sin(x) * w          # sin(x) = x here; costly enough to be split across threads
    xv = np.where(np.arange(n) % 2 == 0, np.float32(1e-39), np.float32(2.0)).astype(np.float32)
    feed = {x: xv, w: np.ones(n, np.float32)}
    want = np.where(np.arange(n) % 2 == 0, np.float32(0.0), np.sin(np.float32(2.0))).astype(np.float32)
    threads(2)
    tf.config.set_flush_denormals(True)
    s = _session(g, "compiled")
    plan = compiler.make_plan(s, [y], [(x, xv), (w, feed[w])])
    k = plan.kernel
    assert k.meta["parallel"] and k.meta["threads"] >= 2 and k.mt_addr
    for _ in range(3):         # through the pool: every block, whichever thread ran it, flushed
        np.testing.assert_allclose(s.run(y, feed), want, rtol=1e-6, atol=0)
    out = s.run(y, feed)       # the run's plan's slots now point at `out` and at the feeds
    (plan, _), = s._plans.values()
    assert plan.kernel is k
    out[:] = np.nan
    seen = []

    def worker():
        before = read_mxcsr()
        ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)(k.mt_addr)(plan.ptrs_addr, 0, 1)
        seen.append((before, read_mxcsr()))
    with k.lock:
        t = threading.Thread(target=worker)
        t.start()
        t.join(120)
    assert seen and seen[0][0] == seen[0][1] and seen[0][0] & FTZ_DAZ == 0
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=0)
    tf.config.set_flush_denormals(False)
    for _ in range(3):         # the pool's workers' MXCSR was restored: no block flushes now
        np.testing.assert_array_equal(_session(g, "compiled").run(y, feed)[::2], xv[::2])


@pytest.mark.skipif(not thread_pool.supported(), reason="x86-64 Linux")
def test_host_callback_runs_with_numpy_numerics(monkeypatch):
    """A failing tf.Assert inside a compiled loop calls Python from the kernel
    (ops/logging_ops.py, the hook tf.print uses too): FTZ / DAZ are cleared while it
    runs, and the caller's MXCSR is restored when the run fails."""
    seen = []
    real = logging_ops.check

    def spy(attrs, arrays):
        seen.append((read_mxcsr() & FTZ_DAZ, numpy_keeps_denormals()))
        return real(attrs, arrays)
    monkeypatch.setattr(logging_ops, "check", spy)
    g = tf.Graph()
    with g.as_default():
        x0 = tf.compat.v1.placeholder(tf.float32, [])

        def body(i, x):
            a = tf.debugging.Assert(x < 3.0, [x])
            with tf.control_dependencies([a]):
                return i + 1, x * 2.0
        _, x = tf.while_loop(lambda i, x: i < 3, body, [tf.constant(0), x0])
    base = read_mxcsr()
    tf.config.set_flush_denormals(True)
    s = _session(g, "compiled")
    before = tf.cache_info()["fallbacks"]
    assert s.run(x, {x0: np.float32(0.25)}) == 2.0
    assert seen == []
    with pytest.raises(tf.errors.InvalidArgumentError):
        s.run(x, {x0: np.float32(1.0)})
    assert tf.cache_info()["fallbacks"] == before
    assert seen == [(0, True)]
    assert read_mxcsr() == base


# ---------------------------------------------------------------- cache
def test_cache_key_differs_and_switching_recompiles():
    g, x, w, y = _mul_graph()
    feed = [(x, np.ones(4, np.float32)), (w, np.ones(4, np.float32))]
    s = _session(g, "compiled")
    tf.config.set_flush_denormals(False)
    k_off = compiler.make_plan(s, [y], feed).key
    tf.config.set_flush_denormals(True)
    k_on = compiler.make_plan(s, [y], feed).key
    assert k_on.hex != k_off.hex and k_on.changed_from(k_off) == ["target"]
    assert "keep-denormals" in k_off.summaries["target"]
    assert "denormals" not in k_on.summaries["target"]     # the default mode's key: the plain one
    tf.config.set_flush_denormals(False)
    compiler.clear_cache()
    fd = dict(feed)
    s.run(y, fd)
    c0 = tf.cache_info()["compiles"]
    tf.config.set_flush_denormals(True)
    s.run(y, fd)                          # the same Session: its plan is rebuilt, a new kernel compiled
    assert tf.cache_info()["compiles"] == c0 + 1
    tf.config.set_flush_denormals(False)
    s.run(y, fd)                          # back: the first kernel, from memory
    assert tf.cache_info()["compiles"] == c0 + 1


def test_mode_read_once_per_compile(monkeypatch, tmp_path):
    """Another thread switching the mode between the kernel's key and its code generation
    cannot file a kernel of one mode under the other's key (in memory or on disk): the
    compile builds in the mode its key was made with (compiler.make_plan reads it once)."""
    g, x, w, y = _mul_graph()
    feed = {x: np.full(4, F32_DENORMAL), w: np.ones(4, np.float32)}
    compile_program = compiler.compile_program

    def switched_meanwhile(program, key, flush):
        monkeypatch.setattr(denormals, "_on", True)     # (listeners skipped, as mid-compile)
        try:
            return compile_program(program, key, flush)
        finally:
            monkeypatch.setattr(denormals, "_on", False)
    tf.config.set_flush_denormals(False)
    monkeypatch.setattr(compiler, "compile_program", switched_meanwhile)
    monkeypatch.setenv("JITGRAD_CACHE_DIR", str(tmp_path))   # an empty disk cache, used
    cache.set_enabled(True)
    compiler.clear_cache()
    s = _session(g, "compiled")
    assert s.run(y, feed).tolist() == [float(F32_DENORMAL)] * 4     # built in the key's mode: off
    assert tf.cache_info()["compiles"] == 1
    monkeypatch.setattr(compiler, "compile_program", compile_program)
    compiler.clear_cache()                               # memory only: the next run loads from disk
    assert _session(g, "compiled").run(y, feed).tolist() == [float(F32_DENORMAL)] * 4
    tf.config.set_flush_denormals(True)
    assert _session(g, "compiled").run(y, feed).tolist() == [0.0] * 4


# ---------------------------------------------------------------- differential
def _is_denormal(v):
    return np.asarray(v).dtype.kind == "f" and v != 0 and abs(v) < np.finfo(np.asarray(v).dtype).tiny


def _denormal_feed(rng, shape, dt):
    dn = np.finfo(dt).tiny
    # denormals whose sums are normal (0.5 + 0.6) and normals whose halves are denormal:
    # results straddle the boundary, where flushing early or late shows
    pool = np.array([dn * 0.5, -dn * 0.6, dn * 0.9, dn * 1.5, -dn * 3, 1.5, -0.75, 0.5, 2.0], dt)
    return pool[rng.integers(0, len(pool), shape)].astype(dt)


@pytest.mark.parametrize("seed", range(24))
def test_random_graphs_with_denormal_inputs_compiled_vs_interpreted(seed):
    """Random graphs (tests/test_passes_random.py) fed mostly denormals, in the mode.
    FTZ means no operation makes a denormal: every denormal a result holds is an input's,
    copied (or its sign flipped). Which copies keep one differs: compiled code also passes
    an input through min / max and the small-argument branches of sin / tanh (selects),
    and x * 1 is simplified to x (as XLA does), where the reference kernels compute and
    flush. So results are compared after flushing both, and checked for new denormals."""
    tf.config.set_flush_denormals(True)
    fetches, feeds = random_graph(seed, _others(seed))
    rng = np.random.default_rng(seed)
    feeds = {t: _denormal_feed(rng, v.shape, v.dtype) for t, v in feeds.items()}
    g = fetches[0].graph
    a, b = run_both(g, fetches, feeds)
    copies = {float(abs(v)) for f in feeds.values() for v in f.reshape(-1) if _is_denormal(v)}
    for i, (x, y) in enumerate(zip(a, b)):
        x, y = np.asarray(x), np.asarray(y)
        for r in (x, y):
            assert {float(abs(v)) for v in r.reshape(-1) if _is_denormal(v)} <= copies, f"seed {seed} fetch {i}"
        x, y = denormals.flush(x), denormals.flush(y)
        dt = x.dtype.type if x.dtype.kind == "f" else np.float32
        check_close(x, y, dt, f"seed {seed} fetch {i}")
        if x.dtype.kind == "f":    # near the denormal range the tolerance's atol says nothing: no atol there
            with np.errstate(invalid="ignore"):
                near = (np.abs(x) < 1e-30) & (np.abs(y) < 1e-30)
            np.testing.assert_allclose(y[near], x[near], rtol=2e-4 if dt == np.float32 else 1e-9, atol=0,
                                       err_msg=f"seed {seed} fetch {i}")


def test_explain_shows_the_flush_attributes_on_every_function(monkeypatch):
    """explain's unoptimised IR is what was compiled: in the mode every function defined,
    the matmul units compiled on the side included, carries denormal-fp-math."""
    monkeypatch.setenv("JITGRAD_COMPILE_PROCESS", "0")      # units compiled in this process
    tf.config.set_flush_denormals(True)
    g = tf.Graph()
    with g.as_default():
        a = tf.compat.v1.placeholder(tf.float32, [64, 64])
        y = tf.matmul(a, a)
    compiler.clear_cache()
    with _session(g, "compiled") as s:
        ir_text = s.explain(y, {a: np.ones((64, 64), np.float32)}).unoptimised_ir
    defines = [line for line in ir_text.splitlines() if line.startswith("define ")]
    assert any("_mm" in line for line in defines)          # (a matmul unit was taken)
    assert all("denormal-fp-math" in line for line in defines)
