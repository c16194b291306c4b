"""A while_loop that grows a loop variable by one row per step (an accumulator
under a None shape invariant), value per call:

    h_{t+1} = tanh(h_t * w + 0.1),  x = concat([x, [h_{t+1}]], 0),  t < T,  h of 64 floats

    PYTHONPATH=. /work/benchenv/bin/python bench/bench_growing_loop.py [--steps T]

Prints the median time per call of each system and its ratio to jitgrad's:
  * jitgrad compiled (Session, T fed; the growing buffer is native);
  * jitgrad's reference interpreter (what such a loop ran in before);
  * TensorFlow graph mode (tf.compat.v1 Session, tf.while_loop with shape_invariants);
  * TensorFlow tf.function (jit_compile off; XLA cannot compile a growing shape).
Every system's result is checked against numpy first. Systems that are not
importable are skipped. Timings on a shared machine are noisy: compare ratios
from one run.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from timing import median_time  # noqa: E402
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

D = 64


def reference(w, steps):
    h, rows = np.ones(D, np.float64), []
    for _ in range(steps):
        h = np.tanh(h * w + 0.1)
        rows.append(h)
    return np.array(rows).reshape(steps, D)


def graph_program(tf, steps_ph, w_ph):
    def body(i, h, x):
        h = tf.tanh(h * w_ph + 0.1)
        return i + 1, h, tf.concat([x, [h]], 0)
    _, _, x = tf.while_loop(lambda i, h, x: i < steps_ph, body, [0, tf.ones([D]), tf.zeros([0, D])],
                            shape_invariants=[tf.TensorShape([]), tf.TensorShape([D]), tf.TensorShape([None, D])])
    return x


def jitgrad_runner(mode, w, steps):
    import jitgrad as tf
    g = tf.Graph()
    with g.as_default():
        n = tf.compat.v1.placeholder(tf.int32, [])
        wp = tf.compat.v1.placeholder(tf.float32, [D])
        x = graph_program(tf, n, wp)
    s = tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto(jitgrad_mode=mode))
    return lambda: s.run(x, {n: steps, wp: w})


def tf_graph_runner(w, steps):
    import tensorflow as tf
    g = tf.Graph()
    with g.as_default():
        n = tf.compat.v1.placeholder(tf.int32, [])
        wp = tf.compat.v1.placeholder(tf.float32, [D])
        x = graph_program(tf, n, wp)
    s = tf.compat.v1.Session(graph=g)
    return lambda: s.run(x, {n: steps, wp: w})


def tf_function_runner(w, steps):
    import tensorflow as tf

    @tf.function
    def f(wv, n):
        return graph_program(tf, n, wv)
    wt, nt = tf.constant(w), tf.constant(steps)
    return lambda: f(wt, nt).numpy()


def _fallbacks():
    import jitgrad
    return jitgrad.cache_info()["fallbacks"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args()
    w = np.linspace(-1.5, 1.5, D).astype(np.float32)
    want = reference(w.astype(np.float64), args.steps)
    systems = [("jitgrad compiled", lambda: jitgrad_runner("compiled", w, args.steps)),
               ("jitgrad interpreter", lambda: jitgrad_runner("interpret", w, args.steps)),
               ("TF graph mode", lambda: tf_graph_runner(w, args.steps)),
               ("TF tf.function", lambda: tf_function_runner(w, args.steps))]
    results = {}
    for name, make in systems:
        try:
            run = make()
        except ImportError as e:
            print(f"{name:22s} skipped ({e})")
            continue
        got = np.asarray(run())
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6, err_msg=name)
        fallbacks = _fallbacks()
        results[name] = median_time(run, args.repeat)
        if name == "jitgrad compiled":
            assert _fallbacks() == fallbacks, "the compiled loop ran in the interpreter"
    base = results.get("jitgrad compiled")
    print(f"growing while_loop, T = {args.steps}, rows of {D} float32 (median per call; noisy on a shared machine)")
    for name, t in results.items():
        ratio = f"{t / base:8.2f}x jitgrad" if base else ""
        print(f"{name:22s} {t * 1e6:12.1f} us  {ratio}")


if __name__ == "__main__":
    main()
