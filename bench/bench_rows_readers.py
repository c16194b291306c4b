"""Readers of loop-grown rows (issue 12, codegen/lower_rows*.py): value + gradient per
Session.run of the stacked states of a 200-step RNN (d = 32) read by

  slice_n   st[n - 50 : n - 1], n = tf.shape(st)[0] (bounds computed from the rows)
  revslice  st[::-2]
  gather2   tf.gather(st, idx, axis=2) of st [T, 1, d] (its gradient)
  gather2w  the same with 512 indices (the inner-axis gather gradient's own cost shows)
  gather1   tf.gather(st as [T, 4, d / 4], 64 indices, axis=1): blocks of d / 4 added per index
  merge     tf.reshape(tf.reshape(st, [-1]) * 2, [-1, 2 * d])
  bmm       tf.matmul(st [T, 1, d], W [d, d]) (BatchMatMulV2)

for two jitgrad trees, each in its own process, in alternating rounds (the load hits
both alike); prints each tree's median per call and the ratio of medians.

  python bench/bench_rows_readers.py [--base /work/main] [--rounds 5] [--calls 20]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

CASES = ("slice_n", "revslice", "gather2", "gather2w", "gather1", "merge", "bmm")


def _child(case, calls):
    import time
    import numpy as np
    import jitgrad as tf
    tf1 = tf.compat.v1
    d, T = 32, 200
    g = tf.Graph()
    with g.as_default():
        x0 = tf1.placeholder(tf.float32, [1, d])
        n_steps = tf1.placeholder(tf.int32, [])
        W = tf.constant((np.random.default_rng(0).standard_normal((d, d)) * 0.2).astype(np.float32))
        ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True)

        def body(i, x, ta):
            x = tf.tanh(tf.matmul(x, W) + 0.1)
            return i + 1, x, ta.write(i, x)
        _, _, ta = tf.while_loop(lambda i, x, ta: i < n_steps, body, [0, x0, ta])
        st = ta.stack()                 # [T, 1, d]
        flat = tf.reshape(st, [-1, d])
        if case == "slice_n":
            n = tf.shape(flat)[0]
            y = flat[n - 50:n - 1]
        elif case == "revslice":
            y = flat[::-2]
        elif case == "gather2":
            y = tf.gather(st, [3, 0, 0, 7, 31], axis=2)
        elif case == "gather2w":
            y = tf.gather(st, np.random.default_rng(1).integers(0, d, 512), axis=2)
        elif case == "gather1":
            y = tf.gather(tf.reshape(st, [-1, 4, d // 4]), np.random.default_rng(1).integers(0, 4, 64), axis=1)
        elif case == "merge":
            y = tf.reshape(tf.reshape(flat, [-1]) * 2.0, [-1, 2 * d])
        else:
            y = tf.matmul(st, W)
        loss = tf.reduce_sum(tf.sin(y))
        (gx,) = tf.gradients(loss, [x0])
    s = tf1.Session(graph=g)
    feed = {x0: np.full((1, d), 0.1, np.float32), n_steps: T}
    for _ in range(3):
        s.run([loss, gx], feed)
    times = []
    for k in range(calls):   # (a new x0 each call: nothing can be served from a previous result)
        feed[x0] = np.full((1, d), 0.1 + 1e-3 * k, np.float32)
        t0 = time.perf_counter()
        s.run([loss, gx], feed)
        times.append(time.perf_counter() - t0)
    print(json.dumps(times))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", default="/work/main")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--child", nargs=2)
    ap.add_argument("--cases", default=",".join(CASES), help="comma-separated subset of " + ", ".join(CASES))
    a = ap.parse_args()
    if a.child:
        return _child(a.child[0], int(a.child[1]))
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    trees = {"this": here, "base": a.base}
    print(f"load average {os.getloadavg()[0]:.2f}")
    for case in a.cases.split(","):
        got = {k: [] for k in trees}
        for _ in range(a.rounds):
            for k, tree in trees.items():
                env = dict(os.environ, PYTHONPATH=tree)
                out = subprocess.run([sys.executable, __file__, "--child", case, str(a.calls)], env=env,
                                     capture_output=True, text=True, check=True).stdout
                got[k] += json.loads(out.strip().splitlines()[-1])
        med = {k: statistics.median(v) for k, v in got.items()}
        print(f"{case:9s} this {med['this'] * 1e3:8.3f} ms  base {med['base'] * 1e3:8.3f} ms  "
              f"base/this {med['base'] / med['this']:7.1f}x")
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
