"""Eager-mode overhead and a small MLP training step: eager vs jitgrad.function.

    python bench/bench_eager.py [--quick]

Prints medians (microseconds / milliseconds) and ratios: per-op overhead of
jitgrad eager next to numpy and TensorFlow eager, and the MLP step in jitgrad
eager, jitgrad.function and TF eager. TensorFlow lines are printed when it is
importable (e.g. run with /work/refenv/bin/python), otherwise skipped.
"""
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from timing import median_time  # noqa: E402
import jitgrad as tf  # noqa: E402


def _real_tf():
    """TensorFlow when importable (CPU only, quiet), else None."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
    try:
        import tensorflow as real_tf
    except ImportError:
        return None
    return real_tf


def per_op(quick, real_tf):
    print("Per-op eager overhead (median per call, small float32 tensors):")
    a_np = np.ones((4,), np.float32)
    m_np = np.ones((4, 4), np.float32)
    n = 200 if quick else 2000
    a, m = tf.constant(a_np), tf.constant(m_np)
    jit = {"add (4,)": lambda: a + a, "mul scalar": lambda: a * 2.0,
           "reduce_sum": lambda: tf.reduce_sum(a), "exp": lambda: tf.exp(a),
           "matmul 4x4": lambda: tf.matmul(m, m)}
    nump = {"add (4,)": lambda: a_np + a_np, "mul scalar": lambda: a_np * np.float32(2.0),
            "reduce_sum": lambda: a_np.sum(), "exp": lambda: np.exp(a_np),
            "matmul 4x4": lambda: m_np @ m_np}
    ref = {}
    if real_tf is not None:
        ta, tm = real_tf.constant(a_np), real_tf.constant(m_np)
        ref = {"add (4,)": lambda: ta + ta, "mul scalar": lambda: ta * 2.0,
               "reduce_sum": lambda: real_tf.reduce_sum(ta), "exp": lambda: real_tf.exp(ta),
               "matmul 4x4": lambda: real_tf.matmul(tm, tm)}
    print(f"  {'op':<12} {'jitgrad':>9} {'numpy':>8} {'TF eager':>9}   jitgrad/numpy  jitgrad/TF")
    for name in jit:
        tj = median_time(jit[name], 7, n)
        tn = median_time(nump[name], 7, n)
        line = f"  {name:<12} {tj * 1e6:7.2f}us {tn * 1e6:6.2f}us "
        if name in ref:
            tt = median_time(ref[name], 7, n)
            line += f"{tt * 1e6:7.2f}us   {tj / tn:11.1f}x  {tj / tt:9.2f}x"
        else:
            line += f"{'-':>9}   {tj / tn:11.1f}x  {'-':>9}"
        print(line)
    if real_tf is None:
        print("  TensorFlow: not importable, TF column skipped")

    def taped(mod, x):
        def f():
            with mod.GradientTape() as t:
                t.watch(x)
                y = x * x
            return t.gradient(y, x)
        return f
    line = f"  tape x*x + gradient: jitgrad {median_time(taped(tf, tf.constant(3.0)), 7, n // 4) * 1e6:.1f} us"
    if real_tf is not None:
        line += f"   TF eager {median_time(taped(real_tf, real_tf.constant(3.0)), 7, n // 4) * 1e6:.1f} us"
    print(line)


def mlp(quick, real_tf):
    print("MLP training step, batch 256, 784 -> 512 relu -> 10, softmax cross entropy, SGD:")
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((256, 784)).astype(np.float32)
    y_np = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 256)]
    w1 = (rng.standard_normal((784, 512)) * 0.05).astype(np.float32)
    w2 = (rng.standard_normal((512, 10)) * 0.05).astype(np.float32)

    def make(mod):
        return [mod.Variable(w1), mod.Variable(np.zeros(512, np.float32)), mod.Variable(w2),
                mod.Variable(np.zeros(10, np.float32))]

    def step(mod, params, x, y):
        W1, b1, W2, b2 = params
        with mod.GradientTape() as t:
            h = mod.nn.relu(mod.matmul(x, W1) + b1)
            logits = mod.matmul(h, W2) + b2
            loss = mod.reduce_mean(mod.nn.softmax_cross_entropy_with_logits(labels=y, logits=logits))
        grads = t.gradient(loss, params)
        for p, g in zip(params, grads):
            p.assign_sub(0.01 * g)
        return loss

    x, y = tf.constant(x_np), tf.constant(y_np)
    pe, pf = make(tf), make(tf)
    fstep = tf.function(lambda x, y: step(tf, pf, x, y))
    t0 = time.perf_counter()
    fstep(x, y)
    first = time.perf_counter() - t0
    reps = 5 if quick else 20
    te = median_time(lambda: step(tf, pe, x, y), reps)
    tfn = median_time(lambda: fstep(x, y), reps)
    print(f"  jitgrad eager          {te * 1e3:8.2f} ms")
    print(f"  jitgrad.function       {tfn * 1e3:8.2f} ms   (first call incl. trace+compile {first:.2f} s, "
          f"mode {tf.get_default_mode()})")
    print(f"  eager / function       {te / tfn:8.2f}x")
    if real_tf is None:
        print("  TensorFlow: not importable, skipped")
    else:
        rx, ry = real_tf.constant(x_np), real_tf.constant(y_np)
        pr = make(real_tf)
        tr = median_time(lambda: step(real_tf, pr, rx, ry), reps)
        print(f"  TF eager               {tr * 1e3:8.2f} ms   (jitgrad eager / TF eager {te / tr:.2f}x)")
        pt = make(real_tf)
        tf_fn = real_tf.function(lambda x, y: step(real_tf, pt, x, y))
        tf_fn(rx, ry)
        tt = median_time(lambda: tf_fn(rx, ry), reps)
        print(f"  TF tf.function         {tt * 1e3:8.2f} ms   (TF tf.function / jitgrad.function {tt / tfn:.2f}x)")
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        print("  JAX: not importable, skipped")
    else:
        def loss(params, x, y):
            W1, b1, W2, b2 = params
            logits = jax.nn.relu(x @ W1 + b1) @ W2 + b2
            return -jnp.mean(jnp.sum(y * jax.nn.log_softmax(logits), axis=1))

        @jax.jit
        def sgd(params, x, y):
            value, grads = jax.value_and_grad(loss)(params, x, y)
            return [p - 0.01 * g for p, g in zip(params, grads)], value

        state = {"p": [jnp.asarray(w1), jnp.zeros(512, jnp.float32), jnp.asarray(w2), jnp.zeros(10, jnp.float32)]}
        jx, jy = jnp.asarray(x_np), jnp.asarray(y_np)

        def jstep():
            state["p"], value = sgd(state["p"], jx, jy)
            value.block_until_ready()
        jstep()
        tj = median_time(jstep, reps)
        print(f"  jax.jit                {tj * 1e3:8.2f} ms   (jax.jit / jitgrad.function {tj / tfn:.2f}x)")


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
    real_tf = _real_tf()
    per_op(quick, real_tf)
    mlp(quick, real_tf)
    jac(quick)
