#!/usr/bin/env python
"""Native memory kept per compiled kernel: RSS growth over many distinct graphs.

Compiles N distinct small graphs (distinct shapes, so every one is a fresh kernel;
disk cache off), calls jitgrad.compiler.clear_cache() and gc, and reports the RSS
growth from a warm baseline (after the first WARM kernels) in total and per kernel.
Target (issue 13): <= 5 MB growth over 2,000 graphs after clear_cache.  A second
figure isolates llvmlite: the same number of runs of its O3 pass pipeline alone
(fresh PassBuilder + PTO, everything closed) on a module with one loop.

Usage: python bench/bench_rss.py [--graphs 2000] [--warm 50]
"""
import argparse
import gc
import os
import sys
import time

os.environ["JITGRAD_CACHE"] = "0"
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402


def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def jitgrad_kernels(n, warm):
    import jitgrad as tf
    from jitgrad import compiler

    def one(i):
        g = tf.Graph()
        with g.as_default():
            x = tf.compat.v1.placeholder(tf.float32, (i % 97 + 1, i // 97 + 1))
            y = tf.reduce_sum(tf.exp(x) * 2.0 + x)
        with tf.compat.v1.Session(graph=g) as s:
            s.run(y, {x: np.ones((i % 97 + 1, i // 97 + 1), np.float32)})

    for i in range(warm):
        one(i)
    compiler.clear_cache()
    gc.collect()
    base = rss_mb()
    t0 = time.perf_counter()
    for i in range(warm, warm + n):
        one(i)
    compiler.clear_cache()
    gc.collect()
    return base, rss_mb(), time.perf_counter() - t0


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
    args = ap.parse_args()
    base, end, secs = jitgrad_kernels(args.graphs, args.warm)
    print(f"jitgrad: {args.graphs} distinct kernels in {secs:.1f} s, RSS after clear_cache "
          f"{base:.1f} -> {end:.1f} MB: +{end - base:.1f} MB ({(end - base) * 1e3 / args.graphs:.1f} KB/kernel; "
          f"target <= 5 MB total)")
    b, e = llvmlite_pipeline_only(args.graphs)
    print(f"llvmlite O3 pipeline alone, {args.graphs} runs on a one-loop module: "
          f"+{e - b:.1f} MB ({(e - b) * 1e3 / args.graphs:.1f} KB/run)")


if __name__ == "__main__":
    main()
