"""Eager-mode overhead and a small MLP training step: eager vs jitgrad.function.

    python bench/bench_eager.py [--quick]

Prints medians (microseconds / milliseconds) and ratios. TensorFlow / JAX
lines are printed when those packages are importable, otherwise skipped.
"""
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import jitgrad as tf  # noqa: E402


def median_time(fn, repeat, number=1):
    fn()
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        ts.append((time.perf_counter() - t0) / number)
    return statistics.median(ts)


def per_op(quick):
    print("Per-op eager overhead (median per call):")
    a_np = np.ones((4,), np.float32)
    a = tf.constant(a_np)
    n = 200 if quick else 2000
    rows = [
        ("add (4,)", lambda: a + a, lambda: a_np + a_np),
        ("mul scalar", lambda: a * 2.0, lambda: a_np * np.float32(2.0)),
        ("reduce_sum", lambda: tf.reduce_sum(a), lambda: a_np.sum()),
        ("exp", lambda: tf.exp(a), lambda: np.exp(a_np)),
    ]
    for name, f_jit, f_np in rows:
        tj = median_time(f_jit, 7, n)
        tn = median_time(f_np, 7, n)
        print(f"  {name:<12} jitgrad {tj * 1e6:7.2f} us   numpy {tn * 1e6:6.2f} us   ratio {tj / tn:6.1f}x")
    x = tf.constant(3.0)

    def taped():
        with tf.GradientTape() as t:
            t.watch(x)
            y = x * x
        return t.gradient(y, x)
    print(f"  tape x*x + gradient: {median_time(taped, 7, n // 4) * 1e6:.1f} us")


def mlp(quick):
    print("MLP training step, batch 256, 784 -> 512 relu -> 10, softmax cross entropy, SGD:")
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((256, 784)).astype(np.float32)
    y_np = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 256)]
    w1 = (rng.standard_normal((784, 512)) * 0.05).astype(np.float32)
    w2 = (rng.standard_normal((512, 10)) * 0.05).astype(np.float32)

    def make():
        return [tf.Variable(w1), tf.Variable(np.zeros(512, np.float32)), tf.Variable(w2),
                tf.Variable(np.zeros(10, np.float32))]

    def step(params, x, y):
        W1, b1, W2, b2 = params
        with tf.GradientTape() as t:
            h = tf.nn.relu(tf.matmul(x, W1) + b1)
            logits = tf.matmul(h, W2) + b2
            loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=y, logits=logits))
        grads = t.gradient(loss, params)
        for p, g in zip(params, grads):
            p.assign_sub(0.01 * g)
        return loss

    x, y = tf.constant(x_np), tf.constant(y_np)
    pe, pf = make(), make()
    fstep = tf.function(lambda x, y: step(pf, x, y))
    t0 = time.perf_counter()
    fstep(x, y)
    first = time.perf_counter() - t0
    reps = 5 if quick else 20
    te = median_time(lambda: step(pe, x, y), reps)
    tfn = median_time(lambda: fstep(x, y), reps)
    print(f"  jitgrad eager          {te * 1e3:8.2f} ms")
    print(f"  jitgrad.function       {tfn * 1e3:8.2f} ms   (first call incl. trace+compile {first:.2f} s, "
          f"mode {tf.get_default_mode()})")
    print(f"  eager / function       {te / tfn:8.2f}x")
    try:
        import tensorflow as real_tf  # noqa: F401
    except ImportError:
        print("  TensorFlow: not importable, skipped")
    else:
        print("  TensorFlow: importable; comparison not implemented in this bench")
    try:
        import jax  # noqa: F401
    except ImportError:
        print("  JAX: not importable, skipped")
    else:
        print("  JAX: importable; comparison not implemented in this bench")


def jac(quick):
    print("Jacobian of tanh(x @ W) (x: 64x32, W: 32x32) w.r.t. x (2048 rows):")
    rng = np.random.default_rng(0)
    x = tf.constant(rng.standard_normal((64, 32)).astype(np.float32))
    W = tf.constant(rng.standard_normal((32, 32)).astype(np.float32))
    with tf.GradientTape(persistent=True) as t:
        t.watch(x)
        y = tf.tanh(tf.matmul(x, W))
    tv = median_time(lambda: t.jacobian(y, x), 3)
    tl = median_time(lambda: t.jacobian(y, x, experimental_use_pfor=False), 1 if quick else 3)
    print(f"  vectorised {tv * 1e3:8.2f} ms   per-row {tl * 1e3:8.2f} ms   speedup {tl / tv:6.1f}x")


if __name__ == "__main__":
    quick = "--quick" in sys.argv
    per_op(quick)
    mlp(quick)
    jac(quick)
