#!/usr/bin/env python
"""Native memory kept per compiled kernel: RSS growth over many distinct graphs.

Scenario 1 (Session): compiles N distinct small graphs (distinct shapes, so every one is a
fresh kernel; disk cache off) after WARM others, calls jitgrad.compiler.clear_cache() and
reports the RSS growth from the warm baseline (taken after the first WARM kernels and a
clear_cache) in total and per kernel.  Target (issue 16): <= 5 MB over 2,000 graphs.

Scenario 2 (jitgrad.function): one traced function called on F distinct input shapes after
WARM others; RSS after clear_cache with the function still alive (it keeps its traced graphs,
as tf.function does) and after the function is dropped.

Each figure is split into where the growth sits: Python's small-object allocator (pymalloc
arenas: 1 MiB each, returned to the system only when their last block is freed), glibc's
heap (bytes in use), and the rest of RSS.  A third figure isolates llvmlite: the same number
of runs of its O3 pass pipeline alone (fresh PassBuilder + PTO, everything closed) on a
module with one loop -- what compile_server.py keeps out of the parent.

The workloads run in helper functions, so that nothing of the bench's own (a loop counter)
is alive when RSS is read.

Usage: python bench/bench_rss.py [--graphs 2000] [--warm 50] [--function-shapes 600]
"""
import argparse
import ctypes
import gc
import os
import re
import sys
import tempfile
import time

os.environ["JITGRAD_CACHE"] = "0"
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402


def rss_mb():
    with open("/proc/self/statm", "rb") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]


def glibc_in_use_mb():
    """Bytes glibc's main arena has handed out (None when not glibc >= 2.33)."""
    try:
        f = ctypes.CDLL(None).mallinfo2
    except (AttributeError, OSError):
        return None
    f.restype = _Mallinfo2
    m = f()
    return (m.uordblks + m.hblkhd) / 1e6


def pymalloc_mb():
    """(MB in pymalloc arenas, MB in live blocks) from sys._debugmallocstats (None: not CPython)."""
    if not hasattr(sys, "_debugmallocstats"):
        return None, None
    saved = os.dup(2)
    with tempfile.TemporaryFile("w+b") as f:
        os.dup2(f.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        f.seek(0)
        text = f.read().decode()
    arenas = re.search(r"(\d+) arenas \* (\d+) bytes/arena", text)
    live = re.search(r"# bytes in allocated blocks\s+=\s+([\d,]+)", text)
    if not arenas or not live:
        return None, None
    return int(arenas.group(1)) * int(arenas.group(2)) / 1e6, int(live.group(1).replace(",", "")) / 1e6


def snapshot():
    gc.collect()
    arenas, live = pymalloc_mb()
    return {"rss": rss_mb(), "arenas": arenas, "live": live, "glibc": glibc_in_use_mb()}


def growth(before, after, n, what):
    d = {k: (after[k] - before[k]) if after[k] is not None and before[k] is not None else None
         for k in before}
    parts = ", ".join(f"{label} {d[k]:+.1f}" for k, label in
                      (("arenas", "pymalloc arenas"), ("live", "of which live blocks"),
                       ("glibc", "glibc in use")) if d[k] is not None)
    return (f"{what}: RSS {before['rss']:.1f} -> {after['rss']:.1f} MB: {d['rss']:+.1f} MB "
            f"({d['rss'] * 1e3 / n:.1f} KB per kernel) [{parts} MB]")


def _session_graph(i):
    import jitgrad as tf
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, (i % 97 + 1, i // 97 + 1))
        y = tf.reduce_sum(tf.exp(x) * 2.0 + x)
    with tf.compat.v1.Session(graph=g) as s:
        s.run(y, {x: np.ones((i % 97 + 1, i // 97 + 1), np.float32)})


def _session_graphs(lo, hi):
    for i in range(lo, hi):
        _session_graph(i)


def jitgrad_kernels(n, warm):
    from jitgrad import compiler
    _session_graphs(0, warm)
    compiler.clear_cache()
    base = snapshot()
    t0 = time.perf_counter()
    _session_graphs(warm, warm + n)
    secs = time.perf_counter() - t0
    compiler.clear_cache()
    return base, snapshot(), secs


def _function_shapes(f, lo, hi):
    for i in range(lo, hi):
        f(np.ones((i % 97 + 1, i // 97 + 1), np.float32))


def jitgrad_function(n, warm):
    import jitgrad as tf
    from jitgrad import compiler

    @tf.function
    def f(x):
        return tf.reduce_sum(tf.exp(x) * 2.0 + x)

    _function_shapes(f, 0, warm)
    compiler.clear_cache()
    base = snapshot()
    _function_shapes(f, warm, warm + n)
    compiler.clear_cache()
    alive = snapshot()
    del f
    compiler.clear_cache()
    return base, alive, snapshot()


def llvmlite_pipeline_only(n):
    import llvmlite.binding as llvm
    from jitgrad.codegen import backend, target
    tm = target.get().target_machine()
    # one counted loop: a straight-line function does not leak, a loop does
    ir = """define void @f(float* %p, i64 %n) {
entry:
  br label %l
l:
  %i = phi i64 [0, %entry], [%j, %l]
  %a = getelementptr float, float* %p, i64 %i
  %v = load float, float* %a
  %w = fmul float %v, %v
  store float %w, float* %a
  %j = add i64 %i, 1
  %c = icmp slt i64 %j, %n
  br i1 %c, label %l, label %e
e:
  ret void
}"""

    def one():
        mod = llvm.parse_assembly(ir)
        backend.run_o3(mod, tm)
        mod.close()

    for _ in range(50):
        one()
    base = rss_mb()
    for _ in range(n):
        one()
    return base, rss_mb()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--graphs", type=int, default=2000)
    ap.add_argument("--warm", type=int, default=50)
    ap.add_argument("--function-shapes", type=int, default=600)
    ap.add_argument("--skip-llvmlite", action="store_true")
    args = ap.parse_args()
    base, end, secs = jitgrad_kernels(args.graphs, args.warm)
    print(growth(base, end, args.graphs, f"Session: {args.graphs} distinct kernels ({secs:.0f} s) "
                 f"after {args.warm} warm, after clear_cache") + "; target <= 5 MB", flush=True)
    if args.function_shapes:
        base, alive, dropped = jitgrad_function(args.function_shapes, args.warm)
        n = args.function_shapes
        print(growth(base, alive, n, f"jitgrad.function: {n} shapes after {args.warm} warm, "
                     "after clear_cache, function alive"), flush=True)
        print(growth(base, dropped, n, "   ... and after the function is dropped"), flush=True)
    if not args.skip_llvmlite:
        b, e = llvmlite_pipeline_only(args.graphs)
        print(f"llvmlite O3 pipeline alone, {args.graphs} runs on a one-loop module: "
              f"+{e - b:.1f} MB ({(e - b) * 1e3 / args.graphs:.1f} KB/run)")


if __name__ == "__main__":
    main()
