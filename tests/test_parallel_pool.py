"""The native worker pool (codegen/thread_pool.py, codegen/parallel.py): the job
protocol on a hand-written kernel (every block done before a call returns, each
worker id used once, no worker running a job whose call has returned), and on
compiled kernels: after fork, from two Python threads at once, the thread-count
settings, interpreter exit.  Expected values: the single-thread run's bits and
numpy.  No timing is asserted; a hang fails through a timeout."""
import ctypes
import os
import re
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from llvmlite import ir

import jitgrad as tf
from jitgrad.cache.native import host_target_machine, llvm_binding, load
from jitgrad.codegen import parallel, thread_pool

pytestmark = pytest.mark.skipif(not thread_pool.supported(), reason="native pool: Linux x86-64 only")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
I64 = ir.IntType(64)


def _watched(fn, timeout=300):
    """Runs fn on a thread: a hang fails the test instead of the suite."""
    errors = []

    def run():
        try:
            fn()
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), "pool call hung"
    if errors:
        raise errors[0]


def _block_kernel():
    """k(slots, tid, n): slots = [counter*, out*, log*, params*] (i64 arrays),
    params = [blocks, call id, busy rounds].  log[tid] += 1; then blocks taken one
    at a time from the shared counter, each after a busy loop (so workers are
    still at it when thread 0 runs out): out[blk] = call id * 1000 + blk."""
    mod = ir.Module(name="pool_test")
    p64 = I64.as_pointer()
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [ir.IntType(8).as_pointer().as_pointer(), I64, I64]),
                     name="k")
    slots, tid, _ = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))

    def arr(k):
        return b.bitcast(b.load(b.gep(slots, [ir.Constant(I64, k)])), p64)
    counter, out, log, params = (arr(k) for k in range(4))
    b.atomic_rmw("add", b.gep(log, [tid]), ir.Constant(I64, 1), "seq_cst")
    blocks, call, rounds = (b.load(b.gep(params, [ir.Constant(I64, k)])) for k in range(3))
    busy = b.alloca(I64)
    grab, work, spin, write, done = (fn.append_basic_block(s) for s in ("grab", "work", "spin", "write", "done"))
    b.branch(grab)
    b.position_at_end(grab)
    blk = b.atomic_rmw("add", counter, ir.Constant(I64, 1), "seq_cst")
    b.cbranch(b.icmp_signed("<", blk, blocks), work, done)
    b.position_at_end(work)
    b.store(ir.Constant(I64, 0), busy)
    b.branch(spin)
    b.position_at_end(spin)
    k = b.add(b.load(busy, ), ir.Constant(I64, 1))
    b.store_atomic(k, busy, "monotonic", 8)       # atomic: the loop is not folded away
    b.cbranch(b.icmp_signed("<", k, rounds), spin, write)
    b.position_at_end(write)
    b.store_atomic(b.add(b.mul(call, ir.Constant(I64, 1000)), blk), b.gep(out, [blk]), "release", 8)
    b.branch(grab)
    b.position_at_end(done)
    b.ret_void()
    m = llvm_binding().parse_assembly(str(mod))
    m.verify()
    code = load(host_target_machine(opt=2).emit_object(m))
    return code, code.address("k")


@pytest.mark.parametrize("spin_us", [0, 100])
def test_every_block_done_and_no_stale_job(spin_us):
    # 3 threads on this 2-core host (oversubscribed), 600 calls, each with fresh
    # arrays, some of them over before a worker is awake.  When run() returns,
    # every block is written (a call that returned early fails the first check);
    # no thread id ran twice in a call (log <= 1);
    # and a worker that woke late never ran an old job: each call's log is the
    # same long after the call as when it returned (spin 0: every wake-up goes
    # through futex).
    code, k = _block_kernel()
    pool = thread_pool.NativePool(spin_us=spin_us)
    team = np.zeros(4, np.int32)
    team[0] = 77                                   # the pool resets the team word after a call

    def calls():
        kept, n = [], 3
        try:
            for call in range(600):
                # every third call is one short block: thread 0 is done before a worker wakes
                blocks, rounds = (1, 0) if call % 3 == 0 else (24, (call % 7) * 300)
                counter, out, log = np.zeros(1, np.int64), np.full(blocks, -1, np.int64), np.zeros(8, np.int64)
                params = np.array([blocks, call, rounds], np.int64)
                slots = (ctypes.c_void_p * 4)(*(a.ctypes.data for a in (counter, out, log, params)))
                pool.run(k, ctypes.addressof(slots), n, team.ctypes.data)
                np.testing.assert_array_equal(out, call * 1000 + np.arange(blocks))
                assert log[0] == 1 and log[n:].sum() == 0 and log.max() == 1, log
                assert team[0] == 0
                team[0] = 77
                kept.append((log, log.copy(), slots, counter, out, params))
            time.sleep(0.05)
            pool.run(k, ctypes.addressof(kept[-1][2]), n, team.ctypes.data)    # one more generation
            time.sleep(0.05)
            for log, snap, *_ in kept[:-1]:
                np.testing.assert_array_equal(log, snap)
            assert len(pool.threads) == n - 1
        finally:
            pool.stop()
        assert pool.threads == []

    _watched(calls)
    del code


def test_workers_take_part():
    # Not a timing claim: over many calls with long blocks, the workers do run
    # blocks (a pool whose workers never take a job would pass the test above).
    code, k = _block_kernel()
    pool = thread_pool.NativePool()
    team = np.zeros(4, np.int32)
    ran = 0
    try:
        for call in range(400):          # each a few ms: long enough for a worker to wake, even on a busy host
            counter, out, log = np.zeros(1, np.int64), np.full(64, -1, np.int64), np.zeros(8, np.int64)
            params = np.array([64, call, 50000], np.int64)
            slots = (ctypes.c_void_p * 4)(*(a.ctypes.data for a in (counter, out, log, params)))
            pool.run(k, ctypes.addressof(slots), 2, team.ctypes.data)
            ran += int(log[1])
            if ran >= 3:
                break
    finally:
        pool.stop()
    assert ran >= 3
    del code


def _big_graph(n=1 << 21):
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [n])
        y = tf.tanh(x) * 3.0 + x * x
        s = tf.reduce_sum(y)
    v = np.random.default_rng(7).uniform(-2, 2, n).astype(np.float32)
    return g, x, [y, s], v


def _bits(res):
    return [np.asarray(r).tobytes() for r in res]


@pytest.fixture
def threads():
    yield parallel.set_num_threads
    parallel.set_num_threads(None)


def _run_big(threads_n):
    g, x, fetches, v = _big_graph()
    s = tf.compat.v1.Session(graph=g)
    parallel.set_num_threads(threads_n)
    return s, x, fetches, v


def test_forked_child_runs_parallel_kernels(threads):
    # The parent's workers do not exist in a forked child: its first parallel
    # call starts a pool of its own (a child using the parent's would wait for
    # workers that never come, or run with none).  Same bits as one thread.
    s, x, fetches, v = _run_big(1)
    want = _bits(s.run(fetches, {x: v}))
    parallel.set_num_threads(2)
    assert _bits(s.run(fetches, {x: v})) == want
    parent_pool = parallel._pool[0]
    assert parent_pool is not None and len(parent_pool.threads) >= 1
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:       # child: report, never return into pytest
        ok = 0
        try:
            got = [_bits(s.run(fetches, {x: v})) for _ in range(5)]
            pool = parallel._pool[0]
            ok = int(all(gg == want for gg in got) and pool is not parent_pool
                     and pool.pid == os.getpid() and len(pool.threads) == 1)
        finally:
            os.write(w, bytes([ok]))
            os._exit(0)
    os.close(w)
    deadline = time.time() + 120
    while time.time() < deadline:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        pytest.fail("forked child hung in a parallel kernel")
    assert os.read(r, 1) == b"\x01"
    os.close(r)
    assert _bits(s.run(fetches, {x: v})) == want          # the parent's pool still works


def test_two_python_threads_call_kernels_at_once(threads):
    # Two Python threads run parallel kernels at the same time (one pool: the
    # second runs its call on one thread meanwhile), over two graphs and one
    # graph shared by both: every result has the single-thread bits.
    g1, x1, f1, v1 = _big_graph()
    g2, x2, f2, v2 = _big_graph(3 << 20)
    s1, s2 = tf.compat.v1.Session(graph=g1), tf.compat.v1.Session(graph=g2)
    parallel.set_num_threads(1)
    want1, want2 = _bits(s1.run(f1, {x1: v1})), _bits(s2.run(f2, {x2: v2}))
    v64 = v1.astype(np.float64)
    np.testing.assert_allclose(s1.run(f1, {x1: v1})[1], np.sum(np.tanh(v64) * 3 + v64 * v64), rtol=1e-4)
    parallel.set_num_threads(2)
    got, errors = {0: [], 1: [], 2: []}, []

    def calls(key, sess, fetches, feed):
        try:
            for _ in range(15):
                got[key].append(_bits(sess.run(fetches, feed)))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)
    ts = [threading.Thread(target=calls, args=a, daemon=True)
          for a in ((0, s1, f1, {x1: v1}), (1, s2, f2, {x2: v2}), (2, s1, f1, {x1: v1}))]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in ts), "a parallel kernel hung"
    assert not errors, errors
    assert all(r == want1 for r in got[0] + got[2]) and len(got[0]) == len(got[2]) == 15
    assert all(r == want2 for r in got[1]) and len(got[1]) == 15


def _child(code, **env):
    return subprocess.run([sys.executable, "-c", code], env=dict(os.environ, JITGRAD_CACHE="0", **env),
                          capture_output=True, text=True, timeout=300, cwd=ROOT)


_CHILD = """
import numpy as np, jitgrad as tf
from jitgrad.codegen import parallel
g = tf.Graph()
with g.as_default():
    x = tf.compat.v1.placeholder(tf.float32, [1 << 21])
    s = tf.reduce_sum(x * x)
v = np.ones(1 << 21, np.float32)
print(float(tf.compat.v1.Session(graph=g).run(s, {x: v})), parallel.num_threads(),
      len(parallel._pool[0].threads) if parallel._pool[0] else 0, flush=True)
"""


def test_env_thread_count_and_clean_exit():
    # JITGRAD_NUM_THREADS=3: two workers started, the right sum (2^21, exact in
    # float32), and the interpreter exits normally with the workers stopped and
    # joined at exit (a worker left running native code while the interpreter
    # tears down crashes or hangs the exit).
    r = _child(_CHILD, JITGRAD_NUM_THREADS="3")
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["2097152.0", "3", "2"], r.stdout
    r = _child(_CHILD, JITGRAD_NUM_THREADS="1")
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["2097152.0", "1", "0"], r.stdout


def test_set_num_threads_grows_the_pool(threads):
    # the graph's kernel is built for 8 threads (meta "threads"): the setting decides
    s, x, fetches, v = _run_big(1)
    want = _bits(s.run(fetches, {x: v}))
    for n in (2, 4, 3, 1):
        parallel.set_num_threads(n)
        assert _bits(s.run(fetches, {x: v})) == want
        if n > 1:
            assert len(parallel._pool[0].threads) >= n - 1


# Instructions beyond the SSE2 baseline: VEX/EVEX encodings (v...), BMI/BMI2, LZCNT,
# POPCNT, MOVBE -- what code built for the host may use but an x86-64 CPU may lack.
_BEYOND_BASELINE = re.compile(r"^\s+(v[a-z]\w*|shlx|shrx|sarx|rorx|andn|bzhi|pdep|pext|blsi|blsr|blsmsk"
                              r"|lzcnt|tzcnt|popcnt|movbe)\b|%[yz]mm", re.M)


def test_pool_is_compiled_for_the_baseline():
    """The pool's code is the SSE2 baseline's whatever the host or JITGRAD_TARGET_CPU:
    its target machine lowers a 256-bit add and a variable shift without AVX or BMI
    (a host machine here would use them), and the pool's own code has nothing beyond
    the baseline."""
    llvm = llvm_binding()
    probe = llvm.parse_assembly("""
define void @p(<8 x float>* %a, i64* %b, i64 %s) {
  %x = load <8 x float>, <8 x float>* %a
  %y = fadd <8 x float> %x, %x
  store <8 x float> %y, <8 x float>* %a
  %i = load i64, i64* %b
  %j = shl i64 %i, %s
  store i64 %j, i64* %b
  ret void
}""")
    asm = thread_pool.target_machine().emit_assembly(probe)
    assert re.search(r"addps\s+%xmm", asm) and not _BEYOND_BASELINE.search(asm), asm
    pool_asm = thread_pool.target_machine().emit_assembly(llvm.parse_assembly(str(thread_pool.build_module())))
    assert "pause" in pool_asm and "jitgrad_pool_worker" in pool_asm
    assert not _BEYOND_BASELINE.search(pool_asm), _BEYOND_BASELINE.findall(pool_asm)[:5]


def test_one_pool_for_kernels_of_every_target(threads, monkeypatch):
    """Parallel kernels compiled for the host and for other CPUs (those this host can
    run) use the process's one pool, compiled once; each gives its single-thread bits
    on 2 threads, and numpy's values."""
    from jitgrad.codegen import target as tg
    monkeypatch.delenv(tg.ENV_CPU, raising=False)          # None below: the host
    monkeypatch.delenv(tg.ENV_FEATURES, raising=False)
    g, x, fetches, v = _big_graph()
    want_y = np.tanh(v.astype(np.float64)) * 3.0 + v.astype(np.float64) ** 2
    pools = set()
    for cpu in (None, "x86-64", "haswell", "skylake-avx512"):
        if cpu and tg.get(cpu).missing_on_host():
            continue
        with tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto(jitgrad_target_cpu=cpu)) as s:
            parallel.set_num_threads(1)
            one = _bits(s.run(fetches, {x: v}))
            parallel.set_num_threads(2)
            got = s.run(fetches, {x: v})
            assert _bits(got) == one, cpu
            assert s.explain(fetches, {x: v}).target.startswith("host" if cpu is None else f"cpu {cpu}")
        np.testing.assert_allclose(got[0], want_y, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got[1], want_y.sum(), rtol=1e-4)
        assert parallel._pool[0] is not None and len(parallel._pool[0].threads) >= 1, cpu
        pools.add(id(parallel._pool[0]))
    assert len(pools) == 1 and len(thread_pool._CODE) == 1


WARM_PARALLEL = r"""
import json, sys
import numpy as np
import jitgrad as tf
from jitgrad.codegen import thread_pool
rng = np.random.default_rng(5)
a = rng.standard_normal((512, 256)).astype(np.float32)      # 2*512*256*256 flops: a parallel kernel
b = rng.standard_normal((256, 256)).astype(np.float32)
g = tf.Graph()
with g.as_default():
    x = tf.compat.v1.placeholder(tf.float32, a.shape)
    w = tf.compat.v1.placeholder(tf.float32, b.shape)
    y = tf.tanh(tf.matmul(x, w))
with tf.compat.v1.Session(graph=g) as s:
    out = s.run(y, {x: a, w: b})
k = next(iter({id(k): k for k in __import__("jitgrad").compiler._kernels.values()}.values()))
print(json.dumps({"parallel": bool(k.meta.get("parallel")), "pool": bool(thread_pool._CODE),
                  "err": float(np.max(np.abs(out - np.tanh(a.astype(np.float64) @ b)))), "bits": out.tobytes().hex(),
                  "info": dict(tf.cache_info()), "llvm_loaded": "llvmlite.binding" in sys.modules}))
"""


def test_warm_process_running_a_parallel_kernel_loads_no_llvm(tmp_path):
    """The pool's object code is kept in the disk cache beside the host facts: a process
    whose parallel kernel comes from the disk cache starts the pool without LLVM (it
    compiled the pool's loops every time before), and computes the cold process's bits."""
    env = dict(os.environ, PYTHONPATH=ROOT, JITGRAD_CACHE_DIR=str(tmp_path / "c"), JITGRAD_NUM_THREADS="2",
               JITGRAD_COMPILE_PROCESS="0")
    for k in ("JITGRAD_LOADER", "JITGRAD_TARGET_CPU", "JITGRAD_TARGET_FEATURES", "JITGRAD_CACHE"):
        env.pop(k, None)
    runs = []
    for _ in range(2):
        r = subprocess.run([sys.executable, "-c", WARM_PARALLEL], env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        runs.append(__import__("json").loads(r.stdout.strip().splitlines()[-1]))
    cold, warm = runs
    assert cold["parallel"] and cold["pool"] and warm["pool"]
    assert cold["info"]["compiles"] == 1 and cold["llvm_loaded"]
    assert warm["info"]["compiles"] == 0 and warm["info"]["disk_hits"] == 1 and not warm["llvm_loaded"]
    assert cold["err"] < 1e-4 and warm["bits"] == cold["bits"]


def test_compiled_code_entries_are_keyed_by_source_and_respect_the_switch(tmp_path, monkeypatch):
    from jitgrad.cache import disk
    monkeypatch.setenv("JITGRAD_CACHE_DIR", str(tmp_path))
    disk.set_enabled(True)
    try:
        disk.store_compiled("pool-code", "digest-a", b"\x7fELF object a")
        assert disk.load_compiled("pool-code", "digest-a") == b"\x7fELF object a"
        assert disk.load_compiled("pool-code", "digest-b") is None       # other IR: compiled again
        assert disk.load_compiled("other-kind", "digest-a") is None
        disk.set_enabled(False)
        assert disk.load_compiled("pool-code", "digest-a") is None
    finally:
        disk.set_enabled(None)
