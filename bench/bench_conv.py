"""A conv layer's loss and gradients: jitgrad's im2col conv2d (ops/conv.py) through
Session.run against TF's tf.function (oneDNN kernels) and a numpy im2col, medians of
interleaved samples (one call each per round, in rotating order).

  PYTHONPATH=/work/main /work/benchenv/bin/python bench/bench_conv.py [--rounds 31] [--threads 1]

Shape: MNIST-like, batch 64, 28 x 28 x 1 -> 3 x 3 x 32 SAME, relu, sum of squares;
gradients with respect to the input and the filters. ``--big`` a 32 x 32 x 16 -> 3 x 3 x 32 layer.
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("--rounds", type=int, default=31)
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--big", action="store_true")
args = ap.parse_args()
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ["OMP_NUM_THREADS"] = os.environ["OPENBLAS_NUM_THREADS"] = str(args.threads)
os.environ["JITGRAD_NUM_THREADS"] = str(args.threads)

N, H, C, O = (64, 28, 1, 32) if not args.big else (32, 32, 16, 32)
rng = np.random.default_rng(0)
X = rng.standard_normal((N, H, H, C)).astype(np.float32)
W = (rng.standard_normal((3, 3, C, O)) * 0.3).astype(np.float32)


def jitgrad_step():
    import jitgrad as jg
    g = jg.Graph()
    with g.as_default():
        x = jg.compat.v1.placeholder(jg.float32, X.shape)
        w = jg.compat.v1.placeholder(jg.float32, W.shape)
        y = jg.nn.relu(jg.nn.conv2d(x, w, 1, "SAME"))
        loss = jg.reduce_sum(y * y)
        grads = jg.gradients(loss, [x, w])
    s = jg.compat.v1.Session(graph=g)
    fetch = [loss] + grads
    return lambda: s.run(fetch, {x: X, w: W})


def tf_step():
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    xt, wt = tf.constant(X), tf.constant(W)

    @tf.function
    def f(x, w):
        with tf.GradientTape() as t:
            t.watch([x, w])
            y = tf.nn.relu(tf.nn.conv2d(x, w, 1, "SAME"))
            loss = tf.reduce_sum(y * y)
        return [loss] + t.gradient(loss, [x, w])
    return lambda: [v.numpy() for v in f(xt, wt)]


def numpy_step():
    rows = np.arange(H)[:, None, None, None] + np.arange(3)[None, None, :, None]
    cols = np.arange(H)[None, :, None, None] + np.arange(3)[None, None, None, :]
    index = (rows * (H + 2) + cols).reshape(-1)
    w2 = W.reshape(9 * C, O)

    def step():
        xp = np.pad(X, ((0, 0), (1, 1), (1, 1), (0, 0))).reshape(N, -1, C)
        cols_ = xp[:, index].reshape(N * H * H, 9 * C)
        z = cols_ @ w2
        y = np.maximum(z, 0)
        gz = 2 * y * (z > 0)
        gw = cols_.T @ gz
        gcols = (gz @ w2.T).reshape(N, H * H * 9, C)
        gxp = np.zeros_like(xp)
        np.add.at(gxp, (slice(None), index), gcols)
        gx = gxp.reshape(N, H + 2, H + 2, C)[:, 1:-1, 1:-1]
        return (y * y).sum(), gx, gw.reshape(W.shape)
    return step


steps = {"jitgrad": jitgrad_step(), "tf.function": tf_step(), "numpy": numpy_step()}
ref = steps["tf.function"]()
for name, fn in steps.items():
    out = fn()
    for a, b in zip(out, ref):
        np.testing.assert_allclose(np.asarray(a), b, rtol=2e-3, atol=2e-2 * np.abs(b).max())
    for _ in range(3):
        fn()
times = {k: [] for k in steps}
names = list(steps)
for r in range(args.rounds):
    for k in names[r % len(names):] + names[:r % len(names)]:
        t0 = time.perf_counter()
        steps[k]()
        times[k].append(time.perf_counter() - t0)
med = {k: statistics.median(v) for k, v in times.items()}
print(f"conv2d loss + grads, {N}x{H}x{H}x{C} -> 3x3x{C}x{O} SAME, {args.threads} thread(s), "
      f"median of {args.rounds} interleaved rounds")
for k in names:
    print(f"  {k:12s} {med[k] * 1e3:8.2f} ms   (jitgrad's time / this: {med['jitgrad'] / med[k]:.2f})")
sys.stdout.flush()
