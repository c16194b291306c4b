#!/usr/bin/env python
"""Benchmark / accuracy report for jitgrad.codegen.vecmath.

    python bench/bench_vecmath.py            # timing vs numpy, float32, 1e6
    python bench/bench_vecmath.py --f64      # also float64
    python bench/bench_vecmath.py --ulp [N]  # worst-case ulp table (sweep size N)
    python bench/bench_vecmath.py --vector 16 --only sin,cos   # <16 x T> loop, two functions
    python bench/bench_vecmath.py --only sin,cos,tan --large    # |x| up to the largest finite value
    python bench/bench_vecmath.py --cold [--trees OLD,NEW] [--repeats R]   # cold compiles

--cold: compile time of sin/cos/tan kernels (float32/float64, [1003] and
[301, 3]) and of the workloads W1-W5, each in a fresh process with no disk
cache and the compile done in that process (JITGRAD_CACHE=0,
JITGRAD_COMPILE_PROCESS=0): jitgrad's compile seconds and the wall time of the
first run (graph built).  --trees runs the same cases from other source trees
(PYTHONPATH), alternating tree by tree within each repeat, and prints their
medians side by side with the ratio to the first tree.

Timing: median of repeats of the JIT-compiled loop vs the equivalent numpy
expression writing into a preallocated output.  The loop is a scalar IR loop
left to LLVM's loop vectoriser, or with --vector W works on <W x T> directly,
as the code generator's vectorised inner runs do (W: the target's lanes,
16 / 8 for float32 / float64 on AVX-512).
"""

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import _jit_harness as H  # noqa: E402

NUMPY = {
    "exp": lambda x, o: np.exp(x, out=o),
    "expm1": lambda x, o: np.expm1(x, out=o),
    "log": lambda x, o: np.log(x, out=o),
    "log1p": lambda x, o: np.log1p(x, out=o),
    "tanh": lambda x, o: np.tanh(x, out=o),
    "sigmoid": lambda x, o: np.divide(1, np.add(1, np.exp(np.negative(x, out=o), out=o), out=o), out=o),
    "softplus": lambda x, o: np.logaddexp(x, x.dtype.type(0), out=o),
    "sin": lambda x, o: np.sin(x, out=o),
    "cos": lambda x, o: np.cos(x, out=o),
    "tan": lambda x, o: np.tan(x, out=o),
    "sqrt": lambda x, o: np.sqrt(x, out=o),
    "rsqrt": lambda x, o: np.divide(1, np.sqrt(x, out=o), out=o),
    "erf": None,
    "erfc": None,
    "pow": lambda x, y, o: np.power(x, y, out=o),
    "atan": lambda x, o: np.arctan(x, out=o),
    "asin": lambda x, o: np.arcsin(x, out=o),
    "acos": lambda x, o: np.arccos(x, out=o),
    "atan2": lambda y, x, o: np.arctan2(y, x, out=o),
}

BENCH_RANGE = {
    "exp": (-80, 80), "expm1": (-5, 5), "log": (1e-3, 1e3), "log1p": (-0.9, 100),
    "tanh": (-5, 5), "sigmoid": (-20, 20), "softplus": (-20, 20),
    "sin": (-100, 100), "cos": (-100, 100), "tan": (-100, 100),
    "sqrt": (0, 100), "rsqrt": (1e-3, 100), "erf": (-4, 4),
    "erfc": (-4, 10), "atan": (-10, 10), "asin": (-1, 1), "acos": (-1, 1),
}


def timeit(fns, repeats):
    """Median time of each of fns, run interleaved so that load changes on a
    shared machine hit all of them alike."""
    for fn in fns:
        fn()
    ts = [[] for _ in fns]
    for _ in range(repeats):
        for fn, t in zip(fns, ts):
            t0 = time.perf_counter()
            fn()
            t.append(time.perf_counter() - t0)
    return [float(np.median(t)) for t in ts]


def bench(dtype, n, repeats, vector=None, only=None, large=False):
    rng = np.random.default_rng(0)
    if vector:
        n -= n % vector
    loop = f"<{vector} x T> loop" if vector else "scalar loop"
    print(f"\n{np.dtype(dtype).name}, n={n}, {loop}{', large arguments' if large else ''}, median of {repeats} (ms)")
    print(f"{'function':10s} {'jit':>8s} {'numpy':>8s} {'numpy/jit':>10s}")
    for name in only or H.vecmath.FUNCTIONS:
        k = H.compiled(name, dtype, vector=vector)
        out = np.empty(n, dtype)
        if name == "pow":
            args = (rng.uniform(0.1, 10, n).astype(dtype), rng.uniform(-5, 5, n).astype(dtype))
        elif name == "atan2":
            args = (rng.uniform(-10, 10, n).astype(dtype), rng.uniform(-10, 10, n).astype(dtype))
        elif large:   # every binade up to the largest finite value: sin/cos/tan's exact reduction
            top = np.finfo(dtype).maxexp
            args = (np.ldexp(rng.uniform(1, 2, n), rng.integers(0, top, n)).astype(dtype),)
        else:
            lo, hi = BENCH_RANGE[name]
            args = (rng.uniform(lo, hi, n).astype(dtype),)
        ref = NUMPY.get(name)
        fns = [lambda: k(*args, out=out)]
        if ref:
            out2 = np.empty(n, dtype)
            fns.append(lambda: ref(*args, out2))
        tj, tn = (timeit(fns, repeats) + [float("nan")])[:2]
        print(f"{name:10s} {tj * 1e3:8.3f} {tn * 1e3:8.3f} {tn / tj:10.2f}", flush=True)


def ulp_table(n):
    print(f"\nworst-case ulp error (sweep size n={n})")
    print(f"{'function':10s} {'float32':>9s} {'float64':>9s}")
    for name in H.vecmath.FUNCTIONS:
        row = []
        for dtype in (np.float32, np.float64):
            k = H.compiled(name, dtype)
            if name in H.BINARY:
                xs = H.binary_sweep(name, dtype, n)
            else:
                xs = (H.sweep(name, dtype, n),)
            err = H.ulp_error(k(*xs), H.reference(name, *xs), dtype)
            row.append(err.max())
        print(f"{name:10s} {row[0]:9.3f} {row[1]:9.3f}", flush=True)


_COLD_CHILD = r"""
import json, sys, time
import numpy as np
case = sys.argv[1]
t0 = time.perf_counter()
import jitgrad as tf
if case.startswith("W"):
    sys.path.insert(0, sys.argv[2])
    import workloads
    w = case.lower()
    run = getattr(workloads, w + "_jitgrad")("compiled", 10 ** 6) if w == "w2" else \
        getattr(workloads, w + "_jitgrad")("compiled")
else:
    name, dt, shape = case.split(":")
    shape = tuple(int(d) for d in shape.split("x"))
    dtype = np.dtype(dt).type
    g = tf.Graph()
    with g.as_default():
        p = tf.compat.v1.placeholder(dtype, shape)
        y = getattr(tf, name)(p)
    sess = tf.compat.v1.Session(graph=g)
    x = np.random.default_rng(0).uniform(-10, 10, shape).astype(dtype)
    run = lambda: sess.run(y, {p: x})
t1 = time.perf_counter()
run()
t2 = time.perf_counter()
print(json.dumps({"first": t2 - t1, "compile": tf.cache_info()["compile_seconds"]}))
"""

COLD_CASES = ["%s:%s:%s" % (f, d, s) for f in ("sin", "cos", "tan") for d in ("float32", "float64")
              for s in ("1003", "301x3")] + ["W1", "W2", "W3", "W4", "W5"]


def cold(trees, repeats, only=None):
    import json
    import subprocess
    here = os.path.dirname(os.path.abspath(__file__))
    cases = [c for c in COLD_CASES if not only or c.split(":")[0] in only]
    env = dict(os.environ, JITGRAD_CACHE="0", JITGRAD_COMPILE_PROCESS="0")
    res = {(t, c): [] for t in trees for c in cases}
    for _ in range(repeats):
        for c in cases:
            for t in trees:
                # cwd=t: a -c child imports from its working directory before PYTHONPATH
                out = subprocess.run([sys.executable, "-c", _COLD_CHILD, c, here], env=dict(env, PYTHONPATH=t),
                                     cwd=t, capture_output=True, text=True, check=True).stdout
                res[t, c].append(json.loads(out.splitlines()[-1]))
    print(f"\ncold compile, fresh process each, median of {repeats} (ms): compile seconds / first run")
    labels = [t.rstrip("/")[-21:] for t in trees]
    print(f"{'case':24s}" + "".join(f"{label:>22s}" for label in labels)
          + ("  ratio (compile, first)" if len(trees) > 1 else ""))
    for c in cases:
        meds = [[float(np.median([r[k] for r in res[t, c]])) * 1e3 for k in ("compile", "first")] for t in trees]
        line = f"{c:24s}" + "".join(f"{m[0]:11.1f}{m[1]:11.1f}" for m in meds)
        if len(trees) > 1:
            line += "".join(f"  {m[0] / meds[0][0]:5.2f} {m[1] / meds[0][1]:5.2f}" for m in meds[1:])
        print(line, flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--f64", action="store_true")
    ap.add_argument("--ulp", type=int, nargs="?", const=1 << 22, default=None)
    ap.add_argument("--vector", type=int, default=None, help="time the <W x T> loop")
    ap.add_argument("--only", default=None, help="comma-separated functions")
    ap.add_argument("--large", action="store_true", help="arguments across every binade (trig's exact reduction)")
    ap.add_argument("--cold", action="store_true", help="cold compile times of trig kernels and W1-W5")
    ap.add_argument("--trees", default=None, help="--cold: comma-separated source trees to compare")
    a = ap.parse_args()
    only = a.only.split(",") if a.only else None
    if a.cold:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        cold(a.trees.split(",") if a.trees else [root], a.repeats, only)
        return
    if a.ulp:
        ulp_table(a.ulp)
        return
    bench(np.float32, a.n, a.repeats, a.vector, only, a.large)
    if a.f64:
        bench(np.float64, a.n, a.repeats, a.vector and a.vector // 2, only, a.large)


if __name__ == "__main__":
    main()
