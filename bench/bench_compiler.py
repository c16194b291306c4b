"""Compiled executor benchmarks (script): python bench/bench_compiler.py

1. hot path of a cached seed graph (z = x**2 + y**3, gradients wrt x and y,
   scalar feeds): Session.run compiled vs interpreter;
2. fused reduce_sum(tanh(x)*exp(-x*x) + sqrt(x*x+1)) and its gradient at 1e6
   and 1e7 float32 vs numpy;
3. float32 sum accuracy vs numpy at 1e7;
4. compile times.
"""
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import jitgrad as tf  # noqa: E402
from timing import median_time  # noqa: E402


def med(fn, reps, inner=1):
    """Median seconds per call, no warm-up call (the first sample may include a compile)."""
    return median_time(fn, reps, inner, warm=False)


def sess(g, mode):
    return tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto(jitgrad_mode=mode))


def main():
    from jitgrad.cache import set_enabled
    set_enabled(False)
    # 1. hot path
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, ())
        y = tf.compat.v1.placeholder(tf.float32, ())
        z = x ** 2 + y ** 3
        gr = tf.gradients(z, [x, y])
    res = {}
    for mode in ("compiled", "interpret"):
        s = sess(g, mode)
        s.run(gr, {x: 1.0, y: 2.0})
        res[mode] = med(lambda: s.run(gr, {x: 1.0, y: 2.0}), 15, 2000)
    print(f"hot path Session.run (seed graph, 2 grads): compiled {res['compiled'] * 1e6:.2f} us, "
          f"interpret {res['interpret'] * 1e6:.2f} us, ratio {res['interpret'] / res['compiled']:.1f}x")

    # 2. fused expression
    for n in (10 ** 6, 10 ** 7):
        v = np.random.default_rng(0).standard_normal(n).astype(np.float32)
        g = tf.Graph()
        with g.as_default():
            xp = tf.compat.v1.placeholder(tf.float32, (n,))
            f = tf.reduce_sum(tf.tanh(xp) * tf.exp(-xp * xp) + tf.sqrt(xp * xp + 1.0))
            df = tf.gradients(f, xp)[0]
        s = sess(g, "compiled")
        t0 = time.perf_counter()
        s.run(f, {xp: v})
        tc_f = time.perf_counter() - t0
        t0 = time.perf_counter()
        s.run([f, df], {xp: v})
        tc_g = time.perf_counter() - t0
        reps = 7 if n == 10 ** 6 else 3
        t_f = med(lambda: s.run(f, {xp: v}), reps)
        t_g = med(lambda: s.run([f, df], {xp: v}), reps)

        def np_f():
            return np.sum(np.tanh(v) * np.exp(-v * v) + np.sqrt(v * v + 1))

        def np_g():
            t, e, q = np.tanh(v), np.exp(-v * v), np.sqrt(v * v + 1)
            val = np.sum(t * e + q)
            return val, (1 - t * t) * e + t * e * (-2 * v) + v / q
        n_f, n_g = med(np_f, reps), med(np_g, reps)
        print(f"n={n:.0e} value: compiled {t_f * 1e3:.2f} ms, numpy {n_f * 1e3:.2f} ms, speedup {n_f / t_f:.2f}x"
              f" | value+grad: compiled {t_g * 1e3:.2f} ms, numpy {n_g * 1e3:.2f} ms, speedup {n_g / t_g:.2f}x"
              f" | first runs (incl. compile) {tc_f * 1e3:.0f} / {tc_g * 1e3:.0f} ms")
        # threads: 1 vs all, interleaved; effective bandwidth (read x, write grad) vs a copy
        from jitgrad.codegen import parallel
        tt = {1: [], parallel.num_threads(): []}
        for _ in range(reps):
            for k in tt:
                parallel.set_num_threads(k)
                tt[k].append(med(lambda: s.run([f, df], {xp: v}), 1))
        parallel.set_num_threads(None)
        y = np.empty_like(v)
        t_copy = med(lambda: np.copyto(y, v), reps)
        bw = 2 * v.nbytes / t_copy / 1e9
        print("    value+grad by threads: " + ", ".join(
            f"{k}: {np.median(t) * 1e3:.2f} ms ({2 * v.nbytes / np.median(t) / 1e9:.1f} GB/s, "
            f"{2 * v.nbytes / np.median(t) / 1e9 / bw * 100:.0f}% of copy {bw:.1f} GB/s)" for k, t in tt.items()))

    # 3. accuracy
    v = np.random.default_rng(1).random(10 ** 7, dtype=np.float32)
    g = tf.Graph()
    with g.as_default():
        xp = tf.compat.v1.placeholder(tf.float32, v.shape)
        sm = tf.reduce_sum(xp)
    s = sess(g, "compiled")
    got = s.run(sm, {xp: v})
    exact = v.astype(np.float64).sum()
    print(f"float32 sum 1e7: compiled rel err {abs(float(got) - exact) / exact:.2e}, "
          f"numpy rel err {abs(float(v.sum()) - exact) / exact:.2e}, "
          f"compiled vs numpy {abs(float(got) - float(v.sum())) / exact:.2e}; "
          f"time compiled {med(lambda: s.run(sm, {xp: v}), 5) * 1e3:.2f} ms, numpy {med(lambda: v.sum(), 5) * 1e3:.2f} ms")

    info = tf.cache_info()
    print(f"compiles {info['compiles']}, total compile time {info['compile_seconds']:.2f} s, "
          f"mean {info['compile_seconds'] / max(info['compiles'], 1) * 1e3:.0f} ms")


if __name__ == "__main__":
    main()
