"""Hessians through tf.cond: the If batching rule (jitgrad/cond_batching.py: one If of
batched branches) against the per-row fallback (the rule removed: one If per row, inside
the batched loop body for the loop case), side by side:

    cond:  tf.hessians(cond(p, sum(tanh(W b)^2), sum(sin(b)^2 b)), b),  p fed True
    loop:  x_{t+1} = cond(t even, tanh(W x_t + b), x_t cos(b)),  t < T (T = 20),
           tf.hessians(sum(x_T^2), b)
    W N x N, b N x 1 float32: N rows.

    PYTHONPATH=. /work/benchenv/bin/python bench/bench_cond_batching.py [--rows 16 64] [--steps 20]

Compile = the first Session.run (a fresh cache dir: no disk hits), per call = median of
the following runs, timed in alternating turns.
"""
import argparse
import os
import sys
import tempfile
import time

import numpy as np

if __name__ == "__main__" and "JITGRAD_CACHE_DIR" not in os.environ:
    os.environ["JITGRAD_CACHE_DIR"] = tempfile.mkdtemp(prefix="bench_cond_batching_")

import jitgrad as tf   # noqa: E402
from jitgrad import batched_gradients as bg   # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import call_times   # noqa: E402

tf1 = tf.compat.v1


def plain_cond(W, b, p, T):
    return tf.cond(p, lambda: tf.reduce_sum(tf.tanh(tf.matmul(W, b)) ** 2),
                   lambda: tf.reduce_sum(tf.sin(b) ** 2 * b))


def loop_cond(W, b, p, T):
    def body(t, x):
        return t + 1, tf.cond(tf.equal(t % 2, 0), lambda: tf.tanh(tf.matmul(W, x) + b), lambda: x * tf.cos(b))
    _, xT = tf.while_loop(lambda t, x: t < T, body, [0, tf.zeros_like(b)])
    return tf.reduce_sum(xT * xT)


def build(loss, W, T):
    g = tf.Graph()
    with g.as_default():
        b = tf1.placeholder(tf.float32, [W.shape[0], 1])
        p = tf1.placeholder(tf.bool, [])
        (h,) = tf.hessians(loss(tf.constant(W), b, p, T), b)
    return g, b, p, h


def session(g, b, p, h, bv):
    s = tf1.Session(graph=g)
    t0 = time.perf_counter()
    first = s.run(h, {b: bv, p: True})
    return s, time.perf_counter() - t0, first, lambda: s.run(h, {b: bv, p: True})


def ifs(g):
    """If ops in the graph and in the bodies of its loops (one level down)."""
    n = 0
    for op in g.get_operations():
        n += op.type == "If"
        if op.type == "While":
            n += sum(o.type == "If" for o in op.get_attr("body").graph.get_operations())
    return n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, nargs="+", default=[16, 64])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args()
    g, b, p, h = build(plain_cond, np.eye(2, dtype=np.float32), 2)   # LLVM's one-time start-up
    session(g, b, p, h, np.zeros((2, 1), np.float32))[0].close()
    print(f"Hessians w.r.t. b through tf.cond, float32, loop T={args.steps}; load {os.getloadavg()[0]:.2f}")
    for case, loss in (("cond", plain_cond), ("loop", loop_cond)):
        for n in args.rows:
            rng = np.random.RandomState(0)
            W = (rng.randn(n, n) / np.sqrt(n)).astype(np.float32)
            bv = (rng.randn(n, 1) * 0.3).astype(np.float32)
            runs = {}
            for name, removed in (("If rule", ()), ("per row", ("If",))):
                with bg.rules_removed(*removed):
                    g, b, p, h = build(loss, W, args.steps)
                runs[name] = session(g, b, p, h, bv) + (ifs(g),)
            times = {k: [] for k in runs}
            for _ in range(args.repeat):   # alternating turns: load changes hit both paths alike
                for k, r in runs.items():
                    times[k] += call_times(r[3], 1, warm=False)
            ref = runs["If rule"][2]
            base = np.median(times["If rule"])
            print(f"{case}, N = {n} rows:")
            for k, (s, compile_s, first, _, n_ifs) in runs.items():
                med = np.median(times[k])
                err = np.abs(first - ref).max() / max(np.abs(ref).max(), 1e-30)
                print(f"  {k:8s} first run {compile_s:7.2f} s   per call {med * 1e3:8.3f} ms ({med / base:5.2f}x), "
                      f"{n_ifs} If ops, max rel diff {err:.1e}")
                s.close()
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
