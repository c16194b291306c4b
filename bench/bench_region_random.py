"""The per-iteration cost of a random op inside a compiled loop body.

    PYTHONPATH=. /work/benchenv/bin/python bench/bench_region_random.py [--quick]

A ``tf.while_loop`` with a fed trip count T whose body adds ``sum(u)`` to an
accumulator, u of K elements drawn each iteration:
  * random:   u = tf.random.uniform([K])  (the native code calls the host hook,
              ops/random_ops.py, which draws with numpy and copies K floats);
  * baseline: u = sin(x + i) on a fed K-vector (the same loop, no draw);
  * numpy:    rng.random(K) in a Python loop (what the draws alone cost);
  * interpreted: the random loop in jitgrad's reference interpreter (where such a
              graph ran before random ops compiled inside regions).
Prints median microseconds per iteration; (random - baseline) is the hook's
overhead per iteration.

Then the cost per Session.run of such a plan (one iteration, K = 1, so the
call itself is what is timed): through the generated fast runner
(jitgrad/fast_runner.py, which opens the call's random handle itself) and
through the general path (run_plan; what every region-random plan took before
the runner covered them), the two sessions timed alternately.
Timings on a shared machine are noisy.
"""
import argparse
import os
import statistics
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from timing import call_times, median_time  # noqa: E402


def per_iteration_us(fn, trips, repeat):
    return median_time(fn, repeat) / trips * 1e6


def loop_graph(tf, k, draw):
    g = tf.Graph()
    with g.as_default():
        n = tf.compat.v1.placeholder(tf.int32, [])
        x = tf.compat.v1.placeholder(tf.float32, [k])

        def body(i, s):
            u = tf.random.uniform([k]) if draw else tf.sin(x + tf.cast(i, tf.float32))
            return i + 1, s + tf.reduce_sum(u)
        s = tf.while_loop(lambda i, s: i < n, body, [0, 0.0])[1]
    return g, n, x, s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    import jitgrad as tf
    trips = 2000 if args.quick else 20000
    repeat = 5 if args.quick else 15
    print(f"{'K':>6} {'random':>10} {'baseline':>10} {'overhead':>10} {'numpy draw':>11} {'interpreted':>12}  (us/iteration)")
    for k in (1, 64, 4096):
        res = {}
        for name, draw, mode in (("random", True, "compiled"), ("baseline", False, "compiled"),
                                 ("interpreted", True, "interpret")):
            g, n, x, s = loop_graph(tf, k, draw)
            sess = tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto(jitgrad_mode=mode))
            t = trips if mode == "compiled" else max(trips // 20, 50)
            feed = {n: t, x: np.zeros(k, np.float32)}
            before = tf.cache_info()["fallbacks"]
            res[name] = per_iteration_us(lambda: sess.run(s, feed), t, repeat)
            if mode == "compiled":
                assert tf.cache_info()["fallbacks"] == before, "the loop fell back to the interpreter"
        rng = np.random.default_rng(0)
        res["numpy"] = per_iteration_us(lambda: [rng.random(k, dtype=np.float64).astype(np.float32)
                                                 for _ in range(trips)], trips, repeat)
        print(f"{k:>6} {res['random']:>10.2f} {res['baseline']:>10.2f} {res['random'] - res['baseline']:>10.2f} "
              f"{res['numpy']:>11.2f} {res['interpreted']:>12.1f}")
    per_run(tf, 200 if args.quick else 2000, 7 if args.quick else 21)


def per_run(tf, number, rounds):
    """us per Session.run of a one-iteration region-random loop: fast runner vs general path."""
    from jitgrad import dispatch, fast_runner
    runner_maker = fast_runner.runner_for   # (what dispatch.make_runner is once the compiler is loaded)

    sessions = {}
    for name in ("runner", "general"):
        g, n, x, s = loop_graph(tf, 1, True)
        sessions[name] = (tf.compat.v1.Session(graph=g), s, n)
    times = {name: [] for name in sessions}
    try:
        for r in range(rounds):   # alternating, so both see the same machine load
            for name, (sess, s, n) in sessions.items():
                dispatch.make_runner = None if name == "general" else runner_maker   # (None: none installed)
                ts = call_times(lambda: sess.run(s, {n: 1}), 1, number)
                assert bool(sess._fast) == (name == "runner"), (name, sess._fast)
                if r:   # (the first round warms up: compiles, installs the runner)
                    times[name] += ts
    finally:
        dispatch.make_runner = runner_maker
    med = {name: statistics.median(ts) * 1e6 for name, ts in times.items()}
    print(f"per Session.run (1 iteration, K=1): runner {med['runner']:.2f} us, general path {med['general']:.2f} us, "
          f"general/runner {med['general'] / med['runner']:.2f}x")


if __name__ == "__main__":
    main()
