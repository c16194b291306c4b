#!/usr/bin/env python
"""GFLOP/s of jitgrad's matmul vs numpy (OpenBLAS), per shape, at 1 or N threads.

Shapes are the MLP training-step matmuls (784-512-10, batch 256) and two
batched, attention-sized ones.  Ours is what a graph gets: a one-matmul graph
compiled for the host CPU (or --target) and run by a Session (the packed GEMM,
or the skinny / matrix-vector forms where lower_matmul picks them), output
allocation and call included; ``--kernel`` times the packed GEMM kernel alone,
called for the full row range from one thread (the raw kernel, for tuning its
blocking with --config / --sweep).  numpy runs in a subprocess whose environment
sets BLAS to the same thread count (OPENBLAS_NUM_THREADS=OMP_NUM_THREADS=
MKL_NUM_THREADS) and *unsets* OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE, which may be
set on this machine and make OpenBLAS pick a slower kernel; it multiplies into a
preallocated output.

Usage: python bench/bench_matmul.py [--dtype float32|float64] [--repeats N]
       [--target CPU] [--threads N] [--load N] [--openblas-coretype Haswell]
       [--kernel] [--config '{"mc": 144, "kc": 256}'] [--sweep]

With --threads N > 1 each side's timed sample follows a 0.2 s pause (OpenBLAS's
threads spin ~0.1 s after a call) and an untimed warm-up burst, alike on both sides.

``--load N`` runs N busy processes (a pure-Python spin loop each) for the whole
run, as bench_interleaved.py's: a host with more runnable threads than cores.
``--clock cpu`` times samples by process CPU time (every thread's, BLAS's spin
included) on both sides: on a host loaded far beyond its cores the wall time is
mostly time spent descheduled.  At 1 thread it is the kernels' own cost.
"""

import argparse
import ctypes
import importlib.util
import json
import os
import subprocess
import sys
import time

# Our kernel runs in this process; keep this process's BLAS (used only to
# check results) from leaving spinning threads on other cores.  Not in the
# numpy child: this file is also its script, and BLAS reads these variables
# once, when numpy is imported, so pinning here made the child single-threaded
# whatever --threads said (_NumpyServer sets the child's own count).
if "--numpy-child" not in sys.argv:
    for _k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[_k] = "1"

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from blas_info import blas_info, openblas_threads  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (label, M, N, K, trans_a, trans_b, batch)  -- C is [batch x] M x N, reduction over K.
# The W3 MLP's six matmuls, then two batched ones (attention-sized: Q K^T and P V).
SHAPES = [
    ("fwd X@W1      (256x784)@(784x512)", 256, 512, 784, False, False, 1),
    ("fwd H@W2      (256x512)@(512x10)", 256, 10, 512, False, False, 1),
    ("bwd dW1=X^T@dH (256x784)^T@(256x512)", 784, 512, 256, True, False, 1),
    ("bwd dX=dH@W1^T (256x512)@(784x512)^T", 256, 784, 512, False, True, 1),
    ("bwd dW2=H^T@dY (256x512)^T@(256x10)", 512, 10, 256, True, False, 1),
    ("bwd dH=dY@W2^T (256x10)@(512x10)^T", 256, 512, 10, False, True, 1),
    ("batched Q@K^T 16x(128x64)@(128x64)^T", 128, 128, 64, False, True, 16),
    ("batched P@V   16x(128x128)@(128x64)", 128, 64, 128, False, False, 16),
]


def _load_matmul():
    try:
        from jitgrad.codegen import matmul
        return matmul
    except ImportError:
        path = os.path.join(ROOT, "jitgrad", "codegen", "matmul.py")
        spec = importlib.util.spec_from_file_location("_jg_matmul", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod


def _operands(M, N, K, ta, tb, dtype, batch=1, seed=0):
    rng = np.random.default_rng(seed)
    lead = (batch,) if batch > 1 else ()
    A = rng.standard_normal(lead + ((K, M) if ta else (M, K))).astype(dtype)
    B = rng.standard_normal(lead + ((N, K) if tb else (K, N))).astype(dtype)
    return A, B


def _op(X, t):
    """op(X) of the last two axes."""
    return np.swapaxes(X, -1, -2) if t else X


def _calibrate(fn, min_time=0.05):
    """Calls per timed sample so that one sample lasts about min_time."""
    fn()
    t0 = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t0, 1e-7)
    return max(1, int(min_time / one))


_CLOCK = [time.perf_counter]     # --clock cpu: time.process_time


def _warm_calls(inner):
    """Untimed calls before a multi-threaded sample (a third of it): after the idle
    gap that keeps OpenBLAS's spinning threads away, the first calls of a burst ran
    slow on a 2-vCPU VM (znver4, 2 threads, float64 256x784x512: ours 54 GFLOP/s
    median without, 95 with; standalone back-to-back 90-95) -- both sides get it."""
    return max(1, inner // 3)


def _sample(fn, inner):
    """Seconds per call, averaged over ``inner`` back-to-back calls."""
    clock = _CLOCK[0]
    t0 = clock()
    for _ in range(inner):
        fn()
    return (clock() - t0) / inner


# ---------------------------------------------------------------- numpy side



def _numpy_child(dtype):
    """Server loop: read a shape index per line, answer seconds per call.

    Keeping one long-lived process lets the parent interleave numpy and our
    samples one by one, so load from other processes on this shared machine
    hits both sides alike.
    """
    calls = []
    for _, M, N, K, ta, tb, batch in SHAPES:
        A, B = _operands(M, N, K, ta, tb, dtype, batch)
        Aop, Bop = _op(A, ta), _op(B, tb)
        C = np.empty(A.shape[:-2] + (M, N), dtype)
        fn = (lambda Aop=Aop, Bop=Bop, C=C: np.matmul(Aop, Bop, out=C))
        calls.append((fn, _calibrate(fn)))
    print(json.dumps({"info": blas_info(), "blas_threads": openblas_threads()}), flush=True)
    for line in sys.stdin:
        i, _, warm = line.partition(" ")
        fn, inner = calls[int(i)]
        if warm.strip():
            _sample(fn, _warm_calls(inner))
        print(repr(_sample(fn, inner)), flush=True)


class _NumpyServer:
    """numpy in a subprocess with BLAS set to ``threads`` threads."""

    def __init__(self, dtype, threads=1, clock="wall", coretype=None):
        env = dict(os.environ)
        self.removed = [k for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
                        if env.pop(k, None) is not None]
        if coretype:
            env["OPENBLAS_CORETYPE"] = coretype
        for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
                  "MKL_NUM_THREADS"):
            env[k] = str(threads)
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--numpy-child",
             "--dtype", dtype, "--clock", clock],
            env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        hello = json.loads(self.proc.stdout.readline())
        self.info = hello["info"]
        got = hello.get("blas_threads")
        if got is not None and got != threads:
            self.close()
            raise SystemExit("numpy child runs OpenBLAS on %d thread(s), not the %d asked for: "
                             "the baseline would not be honest" % (got, threads))

    def sample(self, i, warm=False):
        self.proc.stdin.write("%d%s\n" % (i, " warm" if warm else ""))
        self.proc.stdin.flush()
        return float(self.proc.stdout.readline())

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


# ------------------------------------------------------------------ our side

def _jit(mm, dtype, M, N, K, ta, tb, config, target=None, batch=1):
    import llvmlite.binding as llvm
    from llvmlite import ir
    from jitgrad.codegen import backend, target as tg
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    tm = tg.get(target).target_machine(opt=3)
    module = ir.Module()
    module.triple = llvm.get_default_triple()
    module.data_layout = str(tm.target_data)
    strides = (M * K, K * N) if batch > 1 else (0, 0)
    mm.emit_matmul(module, "mm", dtype, batch, M, N, K, ta, tb, *strides,
                   **({"config": config} if config else {}))
    mod = llvm.parse_assembly(str(module))
    mod.verify()
    # the pipeline a compiled graph's matmul gets (plain O3 in a tree older than it:
    # PYTHONPATH=/other/tree times that tree's kernel)
    getattr(backend, "run_side_pipeline", backend.run_o3)(mod, tm)
    ee = llvm.create_mcjit_compiler(mod, tm)
    ee.finalize_object()
    ct = ctypes.c_float if dtype == "float32" else ctypes.c_double
    P = ctypes.POINTER(ct)
    fn = ctypes.CFUNCTYPE(None, P, P, P, P, ctypes.c_int64, ctypes.c_int64)(
        ee.get_function_address("mm"))
    return fn, (ee, mod), P


def _ours_setup(dtype, config, target=None, shapes=None):
    """Compile every shape once; return (callable, calls per sample) pairs."""
    mm = _load_matmul()
    kw = {"config": config} if config else {}
    calls = []
    for _, M, N, K, ta, tb, batch in shapes or SHAPES:
        fn, keep, P = _jit(mm, dtype, M, N, K, ta, tb, config, target, batch)
        A, B = _operands(M, N, K, ta, tb, dtype, batch)
        C = np.empty(A.shape[:-2] + (M, N), dtype)
        ws = mm.workspace_elems(dtype, batch, M, N, K, ta, tb, **kw)
        raw = np.zeros(ws + 64, dtype)
        off = (-raw.ctypes.data % 64) // raw.itemsize
        work = raw[off:off + ws]
        args = [x.ctypes.data_as(P) for x in (A, B, C, work)]
        call = (lambda fn=fn, args=args, M=M: fn(*args, 0, M))
        call()
        err = np.abs(C - _op(A, ta).astype(np.float64) @ _op(B, tb).astype(np.float64)).max()
        assert err < 1e-2, "wrong result for %s: %g" % ((M, N, K), err)
        call.keep = (keep, A, B, C, raw)
        calls.append((call, _calibrate(call)))
    return calls


def _session_setup(dtype, threads, target=None):
    """Each shape as a one-matmul graph run by jitgrad's compiled Session on
    `threads` threads (what a user's graph gets: B packed once, dynamic row chunks)."""
    import jitgrad as tf
    from jitgrad.codegen import parallel
    parallel.set_num_threads(threads)
    calls = []
    for _, M, N, K, ta, tb, batch in SHAPES:
        A, B = _operands(M, N, K, ta, tb, dtype, batch)
        g = tf.Graph()
        with g.as_default():
            a = tf.compat.v1.placeholder(dtype, A.shape)
            b = tf.compat.v1.placeholder(dtype, B.shape)
            c = tf.matmul(a, b, transpose_a=ta, transpose_b=tb)
        cfg = tf.compat.v1.ConfigProto(jitgrad_target_cpu=target) if target else None
        sess = tf.compat.v1.Session(graph=g, config=cfg)
        run = sess.make_callable(c, [a, b])
        got = run(A, B)
        assert np.abs(got - _op(A, ta).astype(np.float64) @ _op(B, tb).astype(np.float64)).max() < 1e-2
        call = (lambda run=run, A=A, B=B: run(A, B))
        call.keep = sess
        calls.append((call, _calibrate(call)))
    return calls


def _sweep(dtype, target, repeats):
    """Register tiles MR x (K vectors) that fit the target's registers (MR K accumulators,
    K B vectors, one broadcast), KC 256 and 384."""
    from jitgrad.codegen import target as tg
    base = tg.get(target).matmul_config(dtype)
    vw, regs = base["vw"], base["regs"]
    cands = [dict(mr=mr, nr=k * vw, kc=kc)
             for mr, k in ((4, 2), (6, 2), (8, 2), (12, 2), (14, 2), (4, 3), (6, 3), (8, 3), (3, 4), (4, 4),
                           (8, 1), (12, 1))
             if mr * k + k + 1 <= regs for kc in (256, 384)]
    print("sweep %s %s: GFLOP/s (median of %d), shapes: %s" % (
        dtype, target or "host", repeats, [s[0].split()[1] for s in SHAPES]))
    for c in cands:
        cfg = dict(vw=vw, mc=max(c["mr"], 144 // c["mr"] * c["mr"]), nc=4080, **c)
        calls = _ours_setup(dtype, cfg, target)
        res = []
        for (label, M, N, K, ta, tb, batch), (call, inner) in zip(SHAPES, calls):
            t = np.median([_sample(call, inner) for _ in range(repeats)])
            res.append(2.0 * batch * M * N * K / 1e9 / t)
        print("mr=%2d nr=%2d kc=%d: %s  geo-mean %.1f" % (
            c["mr"], c["nr"], c["kc"], " ".join("%6.1f" % r for r in res),
            float(np.exp(np.mean(np.log(res))))), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--repeats", type=int, default=21,
                    help="interleaved ours/numpy samples per shape (median)")
    ap.add_argument("--config", default=None,
                    help="tile-size overrides (JSON)")
    ap.add_argument("--target", default=None,
                    help="LLVM CPU to compile for (default: the host); its blocking "
                         "(jitgrad/codegen/target.py) is the default config")
    ap.add_argument("--sweep", action="store_true",
                    help="ours only: GFLOP/s of candidate blockings for the target, per shape")
    ap.add_argument("--threads", type=int, default=1,
                    help="ours: a one-matmul graph run by jitgrad's compiled Session on N threads "
                         "(B packed once, row chunks); numpy with N BLAS threads")
    ap.add_argument("--kernel", action="store_true",
                    help="ours: the packed GEMM kernel alone (matmul.emit_matmul), called from "
                         "one thread -- not the skinny / matvec forms a graph may get; --config implies it")
    ap.add_argument("--load", type=int, default=0, help="busy background processes during the run")
    ap.add_argument("--clock", default="wall", choices=["wall", "cpu"], help="what a sample's time is (see above)")
    ap.add_argument("--openblas-coretype", default=None,
                    help="OPENBLAS_CORETYPE for numpy (e.g. Haswell: OpenBLAS's AVX2 kernels, "
                         "to compare with --target znver3 on an AVX-512 host)")
    ap.add_argument("--numpy-child", action="store_true")
    args = ap.parse_args()
    if args.clock == "cpu":
        _CLOCK[0] = time.process_time
    if args.numpy_child:
        _numpy_child(args.dtype)
        return
    load = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.load)]
    try:
        _main(args)
    finally:
        for pr in load:
            pr.kill()
            pr.wait()


def _main(args):
    from jitgrad.codegen import target as tg
    config = tg.get(args.target).matmul_config(args.dtype)
    config.update(json.loads(args.config) if args.config else {})
    if args.sweep:
        _sweep(args.dtype, args.target, args.repeats)
        return
    kernel = args.kernel or bool(args.config)
    if kernel and args.threads > 1:
        raise SystemExit("--kernel / --config time the packed GEMM on one thread: drop --threads")
    if kernel:
        calls = _ours_setup(args.dtype, config, args.target)
    else:
        calls = _session_setup(args.dtype, args.threads, args.target)
    server = _NumpyServer(args.dtype, args.threads, args.clock, args.openblas_coretype)
    rows = []
    try:
        for i, (label, M, N, K, ta, tb, batch) in enumerate(SHAPES):
            call, inner = calls[i]
            ours, ref = [], []
            for _ in range(args.repeats):
                if args.threads > 1:
                    # OpenBLAS's threads in the numpy child spin ~0.1 s after its sample and
                    # would take the core our second thread needs (measured: ours 90 GFLOP/s
                    # interleaved, 183 alone, on 2 cores)
                    time.sleep(0.2)
                    _sample(call, _warm_calls(inner))
                ours.append(_sample(call, inner))
                ref.append(server.sample(i, warm=args.threads > 1))
            flop = 2.0 * batch * M * N * K / 1e9
            rows.append((label, flop / np.median(ours), flop / np.median(ref),
                         flop / min(ours), flop / min(ref)))
    finally:
        server.close()
    print("dtype=%s: GFLOP/s from the median of %d samples (~50 ms each), "
          "ours and numpy interleaved; %s; load=%d (load average %.1f), clock %s; target %s, config=%s" % (
              args.dtype, args.repeats,
              ("%d thread%s" % (args.threads, "s" if args.threads > 1 else ""))
              + (" (ours: the packed GEMM kernel)" if kernel else " (ours: Session.run)"),
              args.load, os.getloadavg()[0], args.clock, tg.get(args.target).describe(), config))
    print("numpy: %s" % server.info)
    print("numpy subprocess env: *_NUM_THREADS=%d; unset %s%s" % (args.threads,
        ", ".join(server.removed) if server.removed
        else "OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE (neither was set)",
        "; OPENBLAS_CORETYPE=%s" % args.openblas_coretype if args.openblas_coretype else ""))
    w = max(len(s[0]) for s in SHAPES)
    print("%-*s %8s %8s %7s %10s %10s" % (w, "shape", "ours", "numpy",
                                          "ratio", "ours best", "numpy best"))
    for label, o, r, ob, rb in rows:
        print("%-*s %8.1f %8.1f %6.0f%% %10.1f %10.1f" % (
            w, label, o, r, 100 * o / r, ob, rb))


if __name__ == "__main__":
    main()
