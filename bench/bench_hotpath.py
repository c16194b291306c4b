#!/usr/bin/env python
"""Python-side cost of running compiled graphs.

1. Hot path of a cached ``Session.run`` on W1 (``z = x**2 + y**3``,
   ``tf.gradients(z, [x, y])``, scalars fed as np.float32 and as Python
   floats), ``Session.make_callable``, the reference interpreter, and --
   when importable -- TensorFlow's ``Session.run`` on the same graph and
   ``jax.jit(jax.grad(...))`` dispatch.  All backends are
   measured side by side in one process, interleaved round by round (a noisy
   machine slows them alike); medians over rounds of per-call times.
2. ``import`` time in fresh processes (numpy, jitgrad; tensorflow and jax when
   installed), interleaved, medians.
3. Warm start: first result in a fresh process with a warm disk cache, for the
   seed graphs and the MLP gradient graph (bench/bench_cache.py's script).

Usage: python bench/bench_hotpath.py [--rounds N] [--skip-import] [--skip-warm]
(run it in an environment with TensorFlow/JAX to get the comparisons).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.abspath(os.path.dirname(__file__)))
sys.path.insert(0, ROOT)


def us(x):
    return "n/a" if x is None else f"{x * 1e6:8.2f} us"


def ms(x):
    return "n/a" if x is None else f"{x * 1e3:8.1f} ms"


# ------------------------------------------------------------------ 1. hot path
def _jitgrad_w1(mode):
    import numpy as np
    import jitgrad as tf
    from workloads import w1_graph
    return (tf, np) + w1_graph(mode)


def builders():
    out = {}

    def np_scalars():
        tf, np, sess, x, y, grads = _jitgrad_w1("compiled")
        feed = {x: np.float32(1.0), y: np.float32(2.0)}
        return lambda: sess.run(grads, feed_dict=feed)

    def py_floats():
        tf, np, sess, x, y, grads = _jitgrad_w1("compiled")
        return lambda: sess.run(grads, feed_dict={x: 1.0, y: 2.0})

    def ndarrays():
        tf, np, sess, x, y, grads = _jitgrad_w1("compiled")
        feed = {x: np.array(1.0, np.float32), y: np.array(2.0, np.float32)}
        return lambda: sess.run(grads, feed_dict=feed)

    def callable_():
        tf, np, sess, x, y, grads = _jitgrad_w1("compiled")
        fn = sess.make_callable(grads, [x, y])
        return lambda: fn(1.0, 2.0)

    def interp():
        tf, np, sess, x, y, grads = _jitgrad_w1("interpret")
        feed = {x: np.float32(1.0), y: np.float32(2.0)}
        return lambda: sess.run(grads, feed_dict=feed)

    out["jitgrad run (np.float32 feeds)"] = np_scalars
    out["jitgrad run (python floats)"] = py_floats
    out["jitgrad run (0-d ndarrays)"] = ndarrays
    out["jitgrad make_callable"] = callable_
    out["jitgrad interpreter"] = interp

    def tf_session():
        import numpy as np
        import tensorflow as tf
        v1 = tf.compat.v1
        g = tf.Graph()
        with g.as_default():
            x, y = v1.placeholder(tf.float32, []), v1.placeholder(tf.float32, [])
            out_ = tf.gradients(x ** 2 + y ** 3, [x, y])
        sess = v1.Session(graph=g)
        feed = {x: np.float32(1.0), y: np.float32(2.0)}
        return lambda: sess.run(out_, feed_dict=feed)

    def jax_jit():
        import jax
        import jax.numpy as jnp
        f = jax.jit(jax.grad(lambda x, y: x ** 2 + y ** 3, argnums=(0, 1)))
        a, b = jnp.float32(1.0), jnp.float32(2.0)
        return lambda: f(a, b)

    def jax_jit_np():
        import jax
        import numpy as np
        f = jax.jit(jax.grad(lambda x, y: x ** 2 + y ** 3, argnums=(0, 1)))
        a, b = np.float32(1.0), np.float32(2.0)
        return lambda: [np.asarray(o) for o in f(a, b)]

    out["tf Session.run"] = tf_session
    out["jax.jit dispatch (jax arrays in)"] = jax_jit
    out["jax.jit (np in, np out)"] = jax_jit_np
    return out


def section_hotpath(rounds, calls):
    import numpy as np
    print(f"== W1 hot path: per-call median over {rounds} interleaved rounds of {calls} calls")
    fns = {}
    for name, b in builders().items():
        try:
            fn = b()
            r = fn()
            fn()
        except ImportError as e:
            print(f"  {name:<36} skipped (not importable: {e.name})")
            continue
        got = [float(np.asarray(v)) for v in (r if isinstance(r, (list, tuple)) else [r])]
        assert got == [2.0, 12.0], (name, got)
        fns[name] = fn
    times = {k: [] for k in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            times[name].append((time.perf_counter() - t0) / calls)
    med = {k: statistics.median(v) for k, v in times.items()}
    base = med["jitgrad run (np.float32 feeds)"]
    for k, v in med.items():
        print(f"  {k:<36} {us(v)}   x{v / base:7.2f} of jitgrad run")
    return med


# ------------------------------------------------------------------ 2. imports
def section_imports(repeats):
    code = ("import time, json; t = time.perf_counter(); import numpy; t1 = time.perf_counter(); import %s; "
            "t2 = time.perf_counter(); import sys; "
            "print(json.dumps([t1 - t, t2 - t1, 'llvmlite.binding' in sys.modules]))")
    env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3")
    mods = []
    for m in ("jitgrad", "tensorflow", "jax"):
        r = subprocess.run([sys.executable, "-c", code % m], env=env, capture_output=True, text=True)
        if r.returncode == 0:
            mods.append(m)
    res = {m: [] for m in mods}
    llvm = False
    for _ in range(repeats):
        for m in mods:
            r = subprocess.run([sys.executable, "-c", code % m], env=env, capture_output=True, text=True)
            a, b, ll = json.loads(r.stdout.strip().splitlines()[-1])
            res[m].append((a, b))
            llvm |= ll and m == "jitgrad"
    print(f"\n== import time in fresh processes (medians of {repeats}, interleaved; "
          f"PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')!r})")
    out = {}
    for m, v in res.items():
        npt = statistics.median(a for a, _ in v)
        t = statistics.median(b for _, b in v)
        out[m] = t
        print(f"  import {m:<12} {ms(t)} beyond numpy's own import ({ms(npt)})")
    print(f"  llvmlite.binding imported by `import jitgrad`: {llvm}")
    return out


# ------------------------------------------------------------------ 3. warm start
def section_warm(repeats):
    import bench_cache
    print(f"\n== first result in a fresh process, warm disk cache (medians of {repeats})")
    env0 = dict(os.environ, PYTHONPATH=ROOT)
    for which in ("seeds", "mlp"):
        code = bench_cache.GRAPH_RUN.replace("sys.argv[1] if len(sys.argv) > 1 else \"seeds\"", repr(which))
        with tempfile.TemporaryDirectory() as d:
            env = dict(env0, JITGRAD_CACHE_DIR=os.path.join(d, "cache"))

            def go():
                r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
                if r.returncode != 0:
                    raise RuntimeError(r.stderr[-2000:])
                return json.loads(r.stdout.strip().splitlines()[-1])
            cold = go()
            warms = [go() for _ in range(repeats)]
        print(f"  {which}: import jitgrad {ms(statistics.median(w['import'] for w in warms))}; "
              f"disk hits {warms[-1]['cache_info'].get('disk_hits')}, compiles {warms[-1]['cache_info'].get('compiles')}")
        for name in cold["graphs"]:
            w = statistics.median(x["graphs"][name] for x in warms)
            print(f"    {name:<28} cold {ms(cold['graphs'][name])}   warm {ms(w)}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--calls", type=int, default=400)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--skip-hot", action="store_true")
    p.add_argument("--skip-import", action="store_true")
    p.add_argument("--skip-warm", action="store_true")
    a = p.parse_args(argv)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    if not a.skip_hot:
        section_hotpath(a.rounds, a.calls)
    if not a.skip_import:
        section_imports(a.repeats)
    if not a.skip_warm:
        section_warm(a.repeats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
