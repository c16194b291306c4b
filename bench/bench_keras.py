"""Keras-style training: ``model.fit`` of the W3 MLP (784 -> 512 relu -> 10, softmax
cross-entropy on one-hot labels, plain SGD) for one epoch of 64 batches of 256.

    PYTHONPATH=. /work/benchenv/bin/python bench/bench_keras.py [--repeat N]

Runs in one process: jitgrad's ``tf.keras`` fit, TensorFlow's Keras fit with
``jit_compile`` off and on, and JAX by hand (a jitted SGD step over the same
batches; optax is not needed). Each is warmed up with one epoch (tracing and
compiling), then timed over ``--repeat`` epochs; prints the median epoch time and
its ratio to jitgrad's. Backends that are not installed are skipped.
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import jitgrad as jg  # noqa: E402

BATCH, STEPS, LR = 256, 64, 0.1


def data():
    rng = np.random.default_rng(3)
    n = BATCH * STEPS
    x = rng.standard_normal((n, 784)).astype(np.float32)
    y = np.zeros((n, 10), np.float32)
    y[np.arange(n), rng.integers(0, 10, n)] = 1
    return x, y


def median_epoch(run_epoch, repeat):
    run_epoch()                       # warm-up: traces and compiles
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        run_epoch()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bench_jitgrad(x, y, repeat):
    keras = jg.keras
    jg.random.set_seed(0)
    model = keras.Sequential([keras.Input((784,)), keras.layers.Dense(512, activation="relu"),
                              keras.layers.Dense(10)])
    model.compile(optimizer=keras.optimizers.SGD(LR),
                  loss=keras.losses.CategoricalCrossentropy(from_logits=True))
    before = jg.cache_info()["compiles"]
    t = median_epoch(lambda: model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0), repeat)
    return t, f"train-step kernels compiled: {jg.cache_info()['compiles'] - before}"


def bench_tf(x, y, repeat, jit_compile):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
    try:
        import tensorflow as tf
    except ImportError:
        return None
    tf.random.set_seed(0)
    keras = tf.keras
    model = keras.Sequential([keras.Input((784,)), keras.layers.Dense(512, activation="relu"),
                              keras.layers.Dense(10)])
    model.compile(optimizer=keras.optimizers.SGD(LR), loss=keras.losses.CategoricalCrossentropy(from_logits=True),
                  jit_compile=jit_compile)
    return median_epoch(lambda: model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0), repeat), ""


def bench_jax(x, y, repeat):
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    rng = np.random.default_rng(0)
    lim1, lim2 = np.sqrt(6 / (784 + 512)), np.sqrt(6 / (512 + 10))
    params = [jnp.asarray(rng.uniform(-lim1, lim1, (784, 512)).astype(np.float32)), jnp.zeros(512, jnp.float32),
              jnp.asarray(rng.uniform(-lim2, lim2, (512, 10)).astype(np.float32)), jnp.zeros(10, jnp.float32)]

    def loss(p, xb, yb):
        w1, b1, w2, b2 = p
        logits = jnp.maximum(xb @ w1 + b1, 0) @ w2 + b2
        return -jnp.mean(jnp.sum(yb * jax.nn.log_softmax(logits), axis=1))

    @jax.jit
    def step(p, xb, yb):
        value, grads = jax.value_and_grad(loss)(p, xb, yb)
        return [w - LR * g for w, g in zip(p, grads)], value

    state = [params]

    def epoch():
        p = state[0]
        for i in range(STEPS):
            p, value = step(p, x[i * BATCH:(i + 1) * BATCH], y[i * BATCH:(i + 1) * BATCH])
        value.block_until_ready()
        state[0] = p
    return median_epoch(epoch, repeat), "jax.jit step, hand-written SGD"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    x, y = data()
    print(f"model.fit, W3 MLP 784-512-10, one epoch = {STEPS} batches of {BATCH}, SGD lr {LR}; "
          f"median of {args.repeat} epochs after a warm-up epoch")
    rows = [("jitgrad tf.keras fit", bench_jitgrad(x, y, args.repeat)),
            ("TF Keras fit, jit_compile=False", bench_tf(x, y, args.repeat, False)),
            ("TF Keras fit, jit_compile=True", bench_tf(x, y, args.repeat, True)),
            ("JAX by hand", bench_jax(x, y, args.repeat))]
    base = rows[0][1][0]
    for name, res in rows:
        if res is None:
            print(f"  {name:34s} (not installed)")
            continue
        t, note = res
        print(f"  {name:34s} {t * 1e3:9.1f} ms/epoch  {t / base:6.2f}x jitgrad  {note}")


if __name__ == "__main__":
    main()
