"""Hessian through a while_loop: the While batching rule (jitgrad/while_batching.py: one
loop over [B]-batched loop variables) against the old paths (the rule removed: B copies
of the loop up to LOOP_ROWS_AT rows, a while_loop over the rows beyond), side by side:

    x_{t+1} = tanh(W x_t + b),  t < T (T = 50),  W N x N, x and b N x 1 float32,
    tf.hessians(sum(x_T^2), b): N rows

    PYTHONPATH=. /work/benchenv/bin/python bench/bench_while_batching.py [--rows 16 64] [--steps 50] [--tf]
        [--case tanh trips]

--case trips: trip counts that differ per row (jitgrad/while_batching_pred.py): the same
recurrence in float64, then sum(f(x_T)) whose second-order gradient solves z^3 + a z = dy
(a = 1 + x_T^2) by Newton's method from z = dy until the row's residual is below 1e-12 -- a
loop whose condition reads each cotangent row of the Hessian (6 to 10 steps per row at N = 64,
7 to 10 at N = 16); batched rule against the old paths.

Compile = the first Session.run (a fresh cache dir: no disk hits), per call = median of
the following runs, timed in alternating turns. --tf adds TensorFlow's tf.hessians of the
same graph (graph mode, Session.run) when tensorflow is installed.
"""
import argparse
import os
import sys
import tempfile
import time

import numpy as np

if __name__ == "__main__" and "JITGRAD_CACHE_DIR" not in os.environ:
    os.environ["JITGRAD_CACHE_DIR"] = tempfile.mkdtemp(prefix="bench_while_batching_")

import jitgrad as tf   # noqa: E402
from jitgrad import batched_gradients as bg   # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import call_times   # noqa: E402


def build(rtf, W, T):
    """(graph, b placeholder, hessian) in the TF-like module ``rtf``."""
    v1 = rtf.compat.v1
    g = rtf.Graph()
    with g.as_default():
        b = v1.placeholder(rtf.float32, list(W.shape[:1]) + [1])
        _, xT = rtf.while_loop(lambda t, x: t < T, lambda t, x: (t + 1, rtf.tanh(rtf.matmul(W, x) + b)),
                               [0, rtf.zeros_like(b)])
        (h,) = rtf.hessians(rtf.reduce_sum(xT * xT), b)
    return g, b, h


def build_trips(rtf, W, T):
    """(graph, b placeholder, hessian) for --case trips (see the module docstring)."""
    v1 = rtf.compat.v1
    n = W.shape[0]
    w = np.linspace(0.05, 20.0, n).reshape(n, 1)
    g = rtf.Graph()
    with g.as_default():
        b = v1.placeholder(rtf.float64, [n, 1])

        def newton(dy, a):
            def resid(z):
                return z * z * z + a * z - dy
            return rtf.while_loop(lambda i, z: rtf.reduce_max(rtf.abs(resid(z))) > 1e-12,
                                  lambda i, z: (i + 1, z - resid(z) / (3.0 * z * z + a)), [0, dy],
                                  maximum_iterations=50)[1]

        @rtf.custom_gradient
        def solve(u):
            return rtf.identity(u), lambda dy: newton(dy, 1.0 + u * u)

        @rtf.custom_gradient
        def f(u):
            return rtf.reduce_sum(u), lambda dy: dy * w * solve(u)
        _, xT = rtf.while_loop(lambda t, x: t < T, lambda t, x: (t + 1, rtf.tanh(rtf.matmul(W, x) + b)),
                               [0, rtf.zeros_like(b)])
        (h,) = rtf.hessians(f(xT), b)
    return g, b, h


def session(rtf, g, b, h, bv):
    s = rtf.compat.v1.Session(graph=g)
    t0 = time.perf_counter()
    first = s.run(h, {b: bv})
    return s, time.perf_counter() - t0, first, lambda: s.run(h, {b: bv})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, nargs="+", default=[16, 64])
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--tf", action="store_true")
    ap.add_argument("--case", nargs="+", default=["tanh", "trips"], choices=["tanh", "trips"])
    args = ap.parse_args()
    rtf = None
    if args.tf:
        try:
            import tensorflow as rtf
            rtf.compat.v1.disable_eager_execution()
        except ImportError:
            print("tensorflow not installed: --tf skipped")
    # one-time costs (LLVM's initialisation, first imports) out of the first path's compile
    g, b, h = build(tf, np.eye(2, dtype=np.float32), 2)
    session(tf, g, b, h, np.zeros((2, 1), np.float32))[0].close()
    if "tanh" in args.case:
        bench_tanh(args, rtf)
    if "trips" in args.case:
        bench_trips(args)
    print(f"load after: {os.getloadavg()[0]:.2f}")


def compare(runs, repeat):
    """Per-call medians of ``runs`` ({name: (session, compile s, first result, call, While ops)}),
    timed in alternating turns (load changes hit every path alike), printed against the first."""
    times = {k: [] for k in runs}
    for _ in range(repeat):
        for k, r in runs.items():
            times[k] += call_times(r[3], 1, warm=False)
    first = next(iter(runs))
    ref, base = runs[first][2], np.median(times[first])
    for k, (s, compile_s, got, _, whiles) in runs.items():
        med = np.median(times[k])
        err = np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30)
        w = f", {whiles} While ops" if whiles is not None else ""
        print(f"  {k:14s} first run {compile_s:7.2f} s   per call {med * 1e3:8.3f} ms "
              f"({med / base:5.2f}x){w}, max rel diff {err:.1e}")
        s.close()


def rule_vs_old_path(builder, W, bv, steps):
    """{name: session timings + (While ops,)} of the graph ``builder`` makes, built with
    the While batching rule and without it (the old path)."""
    runs = {}
    for name, removed in (("batched While", ()), ("old path", ("While",))):
        with bg.rules_removed(*removed):
            g, b, h = builder(tf, W, steps)
        whiles = sum(op.type == "While" for op in g.get_operations())
        runs[name] = session(tf, g, b, h, bv) + (whiles,)
    return runs


def bench_trips(args):
    print(f"per-row trip counts (Newton until converged on each cotangent row) after the tanh recurrence "
          f"T={args.steps}, tf.hessians w.r.t. b, float64; load {os.getloadavg()[0]:.2f}")
    for n in args.rows:
        rng = np.random.RandomState(0)
        W = rng.randn(n, n) / np.sqrt(n)
        bv = rng.randn(n, 1) * 0.3
        runs = rule_vs_old_path(build_trips, W, bv, args.steps)
        print(f"N = {n} rows ({'copies' if n <= bg.LOOP_ROWS_AT else 'loop over rows'} on the old path):")
        compare(runs, args.repeat)


def bench_tanh(args, rtf):
    print(f"tanh recurrence T={args.steps}, tf.hessians w.r.t. b, float32; load {os.getloadavg()[0]:.2f}")
    for n in args.rows:
        rng = np.random.RandomState(0)
        W = (rng.randn(n, n) / np.sqrt(n)).astype(np.float32)
        bv = (rng.randn(n, 1) * 0.3).astype(np.float32)
        runs = rule_vs_old_path(build, W, bv, args.steps)
        if rtf is not None:
            g, b, h = build(rtf, W, args.steps)
            runs["TensorFlow"] = session(rtf, g, b, h, bv) + (None,)
        print(f"N = {n} rows ({'copies' if n <= bg.LOOP_ROWS_AT else 'loop over rows'} on the old path):")
        compare(runs, args.repeat)


if __name__ == "__main__":
    main()
