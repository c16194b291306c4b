"""Compiled tf.math.top_k / tf.sort (codegen/lower_top_k.py: rank counting for rows up to 128,
LSD radix beyond, a heap per row for a small k of a long row) against numpy's sort of the same
rows, medians of repeated Session.run calls:

    PYTHONPATH=. python bench/bench_top_k.py [--repeat 30]

Rows in random order and ascending (each new element ranks first: the selection's worst case)."""
import argparse
import time

import numpy as np

import jitgrad as tf


def _median_seconds(fn, repeat):
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    print(f"{'case':34s} {'jitgrad ms':>11s} {'numpy ms':>9s} {'ratio':>6s}")
    for rows, n, k in ((1000, 64, 5), (1000, 64, 64), (100, 1000, 10), (100, 1000, 1000)):
        for order in ("random", "ascending"):
            x = rng.normal(size=(rows, n)).astype(np.float32)
            if order == "ascending":
                x = np.sort(x, axis=-1)
            g = tf.Graph()
            with g.as_default():
                p = tf.compat.v1.placeholder(tf.float32, x.shape)
                out = tf.math.top_k(p, k).values
            s = tf.compat.v1.Session(graph=g)
            ours = _median_seconds(lambda: s.run(out, {p: x}), args.repeat)
            ref = _median_seconds(lambda: -np.sort(-x, axis=-1)[:, :k], args.repeat)
            print(f"top_k {rows}x{n} k={k} {order:8s}      {ours * 1e3:11.3f} {ref * 1e3:9.3f} {ours / ref:6.2f}")


if __name__ == "__main__":
    main()
