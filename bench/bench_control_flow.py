"""W7: a while_loop recurrence with its gradient, per call.

    x_{t+1} = tanh(W x_t + b),  t < T (T = 1000 by default),  W 64x64, x a 64x1 column
    loss = sum(x_T);  one call = loss and d loss / d W

    PYTHONPATH=. /work/benchenv/bin/python bench/bench_control_flow.py [--quick] [--steps T]

Prints the median time per call of each system and its ratio to jitgrad's, all
measured in this one run:
  * jitgrad: graph + Session, tf.while_loop with the trip count fed at run time
    (one kernel for every T), tf.gradients, in its default flush-denormals mode (FTZ/DAZ,
    as TF's CPU kernels and XLA run); then the same opted out
    (jitgrad.config.set_flush_denormals(False): numpy's numerics): the gradient decays
    into float32 denormals over the last ~150 steps, which costs a microcode assist per
    operation on Intel CPUs unless they are flushed;
  * TensorFlow graph mode (tf.compat.v1 Session, tf.while_loop, tf.gradients);
  * TensorFlow tf.function(jit_compile=True) with a GradientTape;
  * JAX jax.jit(value_and_grad) with lax.fori_loop and with lax.scan;
  * PyTorch eager (a Python loop, autograd).
Then compile (first-call) time against the trip count: jitgrad compiles once
for any T (T is not in its cache key); for the others T is a static argument.
Systems that are not importable are skipped. Timings on a shared machine are
noisy: compare ratios from one run.
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from timing import call_times  # noqa: E402
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

N = 64


def median_time(fn, repeat):
    """(median, min) seconds per call; on a loaded machine the min is the steadier figure."""
    ts = call_times(fn, repeat)
    return statistics.median(ts), min(ts)


def data(seed=0):
    rng = np.random.default_rng(seed)
    W = (rng.standard_normal((N, N)) * (0.9 / np.sqrt(N))).astype(np.float32)
    b = (rng.standard_normal((N, 1)) * 0.1).astype(np.float32)
    x0 = rng.standard_normal((N, 1)).astype(np.float32)
    return W, b, x0


def reference(W, b, x0, steps):
    """loss and dloss/dW in float64 numpy (forward, then the reverse loop)."""
    W, b, x = W.astype(np.float64), b.astype(np.float64), x0.astype(np.float64)
    xs = [x]
    for _ in range(steps):
        x = np.tanh(W @ x + b)
        xs.append(x)
    g = np.ones_like(x)
    gW = np.zeros_like(W)
    for t in range(steps, 0, -1):
        gz = g * (1 - xs[t] ** 2)
        gW += gz @ xs[t - 1].T
        g = W.T @ gz
    return xs[-1].sum(), gW


# ---------------------------------------------------------------- systems
def _graph_mode(tfm, steps):
    """The W7 graph built with ``tfm`` (jitgrad or TensorFlow: the same API), run by a Session."""
    g = tfm.Graph()
    with g.as_default():
        W = tfm.compat.v1.placeholder(tfm.float32, [N, N])
        b = tfm.compat.v1.placeholder(tfm.float32, [N, 1])
        x0 = tfm.compat.v1.placeholder(tfm.float32, [N, 1])
        T = tfm.compat.v1.placeholder(tfm.int32, [])
        _, xT = tfm.while_loop(lambda t, x: t < T, lambda t, x: (t + 1, tfm.tanh(tfm.matmul(W, x) + b)), [0, x0])
        loss = tfm.reduce_sum(xT)
        (gW,) = tfm.gradients(loss, W)
    sess = tfm.compat.v1.Session(graph=g)
    Wv, bv, xv = data()
    feed = {W: Wv, b: bv, x0: xv, T: steps}
    fetches = [loss, gW]
    return lambda: sess.run(fetches, feed)


def jitgrad_graph(steps):
    import jitgrad
    return _graph_mode(jitgrad, steps)


def jitgrad_graph_kept(steps):
    """jitgrad opted out of its flush-denormals mode (numpy's numerics; README "Known
    differences"). The mode is global: main() turns it on again after this system's measurement."""
    import jitgrad
    jitgrad.config.set_flush_denormals(False)
    return _graph_mode(jitgrad, steps)


def _flush_mode_default():
    if "jitgrad" in sys.modules:
        sys.modules["jitgrad"].config.set_flush_denormals(True)


def tf_graph(steps):
    import tensorflow
    return _graph_mode(tensorflow, steps)


def tf_function_xla(steps):
    import tensorflow as rtf
    Wv, bv, xv = data()
    W, b, x0 = rtf.constant(Wv), rtf.constant(bv), rtf.constant(xv)

    @rtf.function(jit_compile=True)
    def f(W, b, x0):
        with rtf.GradientTape() as tape:
            tape.watch(W)
            _, xT = rtf.while_loop(lambda t, x: t < steps, lambda t, x: (t + 1, rtf.tanh(rtf.matmul(W, x) + b)),
                                   [0, x0], maximum_iterations=steps)
            loss = rtf.reduce_sum(xT)
        return loss, tape.gradient(loss, W)
    return lambda: [v.numpy() for v in f(W, b, x0)]


def _jax_loss(kind, steps):
    import jax
    import jax.numpy as jnp
    from jax import lax

    def loss(W, b, x0):
        step = lambda x: jnp.tanh(W @ x + b)  # noqa: E731
        if kind == "fori_loop":
            xT = lax.fori_loop(0, steps, lambda t, x: step(x), x0)
        else:
            xT, _ = lax.scan(lambda x, _: (step(x), None), x0, None, length=steps)
        return jnp.sum(xT)
    return jax.jit(jax.value_and_grad(loss))


def jax_fori(steps):
    return _jax_run("fori_loop", steps)


def jax_scan(steps):
    return _jax_run("scan", steps)


def _jax_run(kind, steps):
    import jax
    f = _jax_loss(kind, steps)
    Wv, bv, xv = (jax.device_put(a) for a in data())
    return lambda: [np.asarray(v) for v in f(Wv, bv, xv)]


def torch_eager(steps):
    import torch
    torch.set_num_threads(1)
    Wv, bv, xv = data()
    b, x0 = torch.from_numpy(bv), torch.from_numpy(xv)

    def run():
        W = torch.from_numpy(Wv).requires_grad_(True)
        x = x0
        for _ in range(steps):
            x = torch.tanh(W @ x + b)
        loss = x.sum()
        loss.backward()
        return [loss.detach().numpy(), W.grad.numpy()]
    return run


SYSTEMS = [("jitgrad (graph, T fed)", jitgrad_graph), ("jitgrad (keep denormals)", jitgrad_graph_kept),
           ("TF graph mode", tf_graph),
           ("TF function jit_compile", tf_function_xla), ("jax.jit fori_loop", jax_fori),
           ("jax.jit scan", jax_scan), ("PyTorch eager", torch_eager)]


def check(name, out, steps):
    Wv, bv, xv = data()
    loss, gW = reference(Wv, bv, xv, steps)
    ok = np.allclose(out[0], loss, rtol=1e-3, atol=1e-3) and np.allclose(out[1], gW, rtol=1e-2, atol=1e-3)
    if not ok:
        print(f"  !! {name}: result differs from the float64 reference "
              f"(loss {float(out[0]):.6g} vs {loss:.6g}, |dW err| {np.abs(out[1] - gW).max():.3g})")
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--steps", type=int, default=1000)
    args = ap.parse_args()
    steps, repeat = args.steps, (5 if args.quick else 30)
    print(f"W7: while_loop x <- tanh(W x + b), W {N}x{N}, {steps} steps, loss + dloss/dW per call "
          f"(median of {repeat})")
    times = {}
    for name, make in SYSTEMS:
        try:
            fn = make(steps)
            t0 = time.perf_counter()
            out = fn()
            first = time.perf_counter() - t0
        except ImportError as e:
            print(f"  {name:26s} skipped ({e.name} not importable)")
            continue
        check(name, out, steps)
        times[name] = median_time(fn, repeat)
        _flush_mode_default()
        med, low = times[name]
        print(f"  {name:26s} {med * 1e3:9.3f} ms median {low * 1e3:9.3f} ms min   (first call {first:.2f} s)")
    base = times.get(SYSTEMS[0][0])
    if base:
        print("ratios (time / jitgrad's; > 1: jitgrad is faster):      of medians   of minima")
        for name, (med, low) in times.items():
            print(f"  {name:26s} {med / base[0]:8.2f}x {low / base[1]:10.2f}x")
    print("compile (first call) time against the trip count:")
    compile_times(steps)


def compile_times(steps):
    import jitgrad as tf
    from jitgrad.cache import set_enabled
    set_enabled(False)
    for T in (10, 100, steps):
        tf.clear_cache()
        fn = jitgrad_graph(T)
        t0 = time.perf_counter()
        fn()
        c = tf.cache_info()
        print(f"  jitgrad  T={T:5d}: {time.perf_counter() - t0:.3f} s  (compiles {c['compiles']})")
    try:
        for T in (10, 100, steps):
            fn = jax_scan(T)
            t0 = time.perf_counter()
            fn()
            print(f"  jax scan T={T:5d}: {time.perf_counter() - t0:.3f} s")
    except ImportError:
        pass


if __name__ == "__main__":
    main()
