"""Element-level parity of tf.nn.softmax / log_softmax gradients with real TensorFlow
(run where TensorFlow is installed; benchenv):

    PYTHONPATH=. /work/benchenv/bin/python bench/tf_softmax_parity.py

For each float dtype, function and axis (-1, 0): random logits and grad_ys, the gradient
from tf.gradients (jitgrad compiled / interpreted, and GradientTape eagerly) against TF
2.21's; prints the share of bit-identical elements and the ulp distances of the rest.
The values (the fused kernels') differ from TF's in the last bit in about half the
elements, so the gradients, which read them, cannot all agree (README "Known differences").
TensorFlow is not a dependency of jitgrad: this is a tool.
"""
import os
import sys

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import tensorflow as real  # noqa: E402

import jitgrad as jg  # noqa: E402

DTYPES = {"bfloat16": 8, "float16": 11, "float32": 24, "float64": 53}   # significand bits
SHAPES = [(3, 7), (4, 5), (2, 3, 6)]


def gradient(tf, fn, x, w, dt, axis, mode):
    """d sum(fn(x) * w) / dx in dtype dt, as float64 (x and w are float32, cast to dt)."""
    if mode == "eager":
        xt = tf.cast(tf.constant(x), dt)
        with tf.GradientTape() as t:
            t.watch(xt)
            loss = tf.reduce_sum(fn(xt, axis=axis) * tf.cast(tf.constant(w), dt))
        return np.asarray(tf.cast(t.gradient(loss, xt), tf.float64))
    g = tf.Graph()
    with g.as_default():
        p = tf.compat.v1.placeholder(tf.float32, x.shape)
        xt = tf.cast(p, dt)
        loss = tf.reduce_sum(fn(xt, axis=axis) * tf.cast(tf.constant(w), dt))
        gr = tf.cast(tf.gradients(loss, xt)[0], tf.float64)
        kw = {} if tf is real else {"config": tf.compat.v1.ConfigProto(jitgrad_mode=mode)}
        return tf.compat.v1.Session(graph=g, **kw).run(gr, {p: x})


def main(trials=10):
    real.get_logger().setLevel("ERROR")
    rng = np.random.default_rng(5)
    for dtn, bits in DTYPES.items():
        for fname in ("softmax", "log_softmax"):
            for axis in (-1, 0):
                equal, total, ulps = {}, 0, {}
                for trial in range(trials):
                    x = rng.uniform(-3, 3, SHAPES[trial % 3]).astype(np.float32)
                    w = rng.uniform(-2, 2, x.shape).astype(np.float32)
                    ref = gradient(real, getattr(real.nn, fname), x, w, getattr(real, dtn), axis, "graph")
                    ulp = np.ldexp(1.0, np.frexp(np.maximum(np.abs(ref), 1e-30))[1] - bits)
                    total += ref.size
                    for mode in ("compiled", "interpret", "eager"):
                        got = gradient(jg, getattr(jg.nn, fname), x, w, getattr(jg, dtn), axis, mode)
                        equal[mode] = equal.get(mode, 0) + int((ref == got).sum())
                        ulps.setdefault(mode, []).extend((np.abs(ref - got) / ulp).ravel())
                for mode, u in ulps.items():
                    print("%-8s %-11s axis %2d %-9s bit-identical %5.1f%%, ulp median %.0f p90 %.0f max %.3g" % (
                        dtn, fname, axis, mode, 100 * equal[mode] / total, np.median(u), np.percentile(u, 90),
                        np.max(u)))


if __name__ == "__main__":
    main()
