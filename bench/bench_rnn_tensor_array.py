"""The RNN of issue 12: h_t = tanh(W h_{t-1} + U x_t) over T fed steps, its states
stacked in a ``TensorArray(dynamic_size=True)`` written inside tf.while_loop, with
the gradient wrt W and U; loss and gradients per call:

    PYTHONPATH=. /work/benchenv/bin/python bench/bench_rnn_tensor_array.py [--steps T] [--loss last|all]

--loss last: the loss reads the final state (the states are fetched as well);
--loss all: the loss reads every stacked state (jitgrad runs this in its interpreter:
the loss and the reverse loop read the grown array, whose row count is a run-time
value the compiler does not lower).

Prints the median time per call of jitgrad (Session, compiled mode: what it runs,
natively or by falling back, is printed), jitgrad's reference interpreter and
TensorFlow graph mode (tf.compat.v1 Session), each result first checked against
numpy, and the ratios to jitgrad compiled mode. --json prints the medians as JSON
(for side-by-side runs of two checkouts). Timings on a shared machine are noisy:
compare ratios from one run.
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from timing import median_time  # noqa: E402
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

H, X = 64, 32


def reference(w, u, xs, loss_on):
    """Loss and gradients wrt W, U by hand (backpropagation through time), float64."""
    hs, h = [], np.zeros(H)
    for x in xs:
        h = np.tanh(w @ h + u @ x)
        hs.append(h)
    gw, gu, gh = np.zeros_like(w), np.zeros_like(u), np.zeros(H)
    for t in reversed(range(len(xs))):
        if loss_on == "all" or t == len(xs) - 1:
            gh = gh + 2.0 * hs[t]
        ga = gh * (1.0 - hs[t] ** 2)
        gw += np.outer(ga, hs[t - 1] if t else np.zeros(H))
        gu += np.outer(ga, xs[t])
        gh = w.T @ ga
    loss = sum(float(h @ h) for h in hs) if loss_on == "all" else float(hs[-1] @ hs[-1])
    return loss, gw, gu


def graph_program(tf, w, u, xs, n, loss_on):
    ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True)

    def body(i, h, ta):
        h = tf.tanh(tf.linalg.matvec(w, h) + tf.linalg.matvec(u, xs[i]))
        return i + 1, h, ta.write(i, h)
    _, h, ta = tf.while_loop(lambda i, h, ta: i < n, body, [0, tf.zeros([H]), ta])
    states = ta.stack()
    loss = tf.reduce_sum(states * states) if loss_on == "all" else tf.reduce_sum(h * h)
    gw, gu = tf.gradients(loss, [w, u])
    return [loss, gw, gu, states]


def _session_runner(tf, config, feed_values, steps, loss_on):
    g = tf.Graph()
    with g.as_default():
        ph = [tf.compat.v1.placeholder(tf.float32, a.shape) for a in feed_values]
        n = tf.compat.v1.placeholder(tf.int32, [])
        fetches = graph_program(tf, *ph, n, loss_on)
    s = tf.compat.v1.Session(graph=g, config=config)
    feed = dict(zip(ph, feed_values))
    feed[n] = steps
    return lambda: s.run(fetches, feed)


def jitgrad_runner(mode, feed_values, steps, loss_on):
    import jitgrad as tf
    return _session_runner(tf, tf.compat.v1.ConfigProto(jitgrad_mode=mode), feed_values, steps, loss_on)


def tf_graph_runner(feed_values, steps, loss_on):
    import tensorflow as tf
    return _session_runner(tf, None, feed_values, steps, loss_on)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--loss", choices=["last", "all"], default="all")
    ap.add_argument("--only", default="", help="comma-separated subset: compiled,interpreter,tf")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((H, H)) / np.sqrt(H)).astype(np.float32)
    u = (rng.standard_normal((H, X)) / np.sqrt(X)).astype(np.float32)
    xs = rng.standard_normal((args.steps, X)).astype(np.float32)
    want = reference(w.astype(np.float64), u.astype(np.float64), xs.astype(np.float64), args.loss)
    systems = {"compiled": ("jitgrad compiled", lambda: jitgrad_runner("compiled", (w, u, xs), args.steps, args.loss)),
               "interpreter": ("jitgrad interpreter",
                               lambda: jitgrad_runner("interpret", (w, u, xs), args.steps, args.loss)),
               "tf": ("TF graph mode", lambda: tf_graph_runner((w, u, xs), args.steps, args.loss))}
    wanted = [k for k in args.only.split(",") if k] or list(systems)
    results, note = {}, ""
    for key in wanted:
        name, make = systems[key]
        try:
            run = make()
        except ImportError as e:
            print(f"{name:22s} skipped ({e})")
            continue
        got = run()
        for a, b in zip(got[:3], want):
            np.testing.assert_allclose(np.asarray(a), b, rtol=2e-3, atol=2e-4, err_msg=name)
        if key == "compiled":
            import jitgrad
            before = jitgrad.cache_info()["fallbacks"]
            run()
            note = "native" if jitgrad.cache_info()["fallbacks"] == before else "falls back to the interpreter"
        results[name] = median_time(run, args.repeat)
    if args.json:
        print(json.dumps({"steps": args.steps, "loss": args.loss, "compiled_runs": note, **results}))
        return
    base = results.get("jitgrad compiled")
    print(f"RNN with a dynamic TensorArray, loss on {args.loss} states, T = {args.steps}, H = {H}, X = {X}, "
          f"value + grad (median per call; jitgrad compiled mode: {note})")
    for name, t in results.items():
        ratio = f"{t / base:8.2f}x jitgrad compiled" if base else ""
        print(f"{name:22s} {t * 1e3:10.2f} ms  {ratio}")


if __name__ == "__main__":
    main()
