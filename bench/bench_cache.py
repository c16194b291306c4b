#!/usr/bin/env python
"""Disk kernel cache: start-up and latency figures.

1. `import jitgrad` in a fresh process (median of N) vs `import numpy` (and
   tensorflow / jax where installed).
2. DiskCache store / load latency for several payload sizes, `make_key`, the
   environment fingerprint in a fresh process (imports llvmlite.binding), and
   `load_object` (object code -> callable, MCJIT relocation, no codegen).
3. Time from graph construction to the first result, cold vs warm disk cache, in
   fresh processes, for the seed graphs and the MLP gradient graph; where JAX is
   installed, the same functions under jax.jit with JAX's persistent compilation
   cache (cold vs warm) for comparison.

Usage: python bench/bench_cache.py [--repeats N] [--skip-graphs]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import timing  # noqa: E402  (bench/, the script's own folder, is on sys.path)


def fresh(code, env=None, timeout=300):
    e = dict(os.environ, PYTHONPATH=ROOT)
    e.update(env or {})
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=e, capture_output=True, text=True,
                       timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(r.stderr[-2000:])
    return json.loads(r.stdout.strip().splitlines()[-1])


def import_time(module, repeats):
    code = ("import json, time; t = time.perf_counter(); import %s; "
            "print(json.dumps(time.perf_counter() - t))" % module)
    try:
        fresh(code)       # warm the OS page cache / .pyc
    except RuntimeError:
        return None
    return statistics.median(fresh(code) for _ in range(repeats))


def ms(x):
    return "n/a" if x is None else f"{x * 1e3:8.2f} ms"


def median_time(fn, repeats):
    """Median seconds per call, no warm-up call."""
    return timing.median_time(fn, repeats, warm=False)


def section_imports(repeats):
    print(f"== import time in a fresh process (median of {repeats})")
    for mod in ("numpy", "jitgrad", "jitgrad.cache", "llvmlite.binding", "tensorflow", "jax"):
        t = import_time(mod, repeats)
        print(f"  import {mod:<18} {ms(t) if t is not None else 'not installed'}")
    fp = fresh("import json, time; import jitgrad.cache as c; t = time.perf_counter(); "
               "c.environment_fingerprint(); a = time.perf_counter() - t; t = time.perf_counter(); "
               "c.make_key('x' * 4000); print(json.dumps([a, time.perf_counter() - t]))")
    print(f"  environment_fingerprint() first call (LLVM's host facts from the disk cache): {ms(fp[0])}")
    print(f"  make_key(4 KB signature) after that:                                   {ms(fp[1])}")


def section_latency(repeats):
    from jitgrad.cache import DiskCache, make_key
    print(f"\n== DiskCache latency (median of {repeats}; page cache warm; store includes fsync)")
    with tempfile.TemporaryDirectory() as d:
        c = DiskCache(os.path.join(d, "c"))
        for size in (4 << 10, 64 << 10, 1 << 20):
            payload = os.urandom(size)
            meta = {"symbol": "entry", "args": [[256, 784], "float32"] * 8}
            keys = [make_key(f"bench-{size}-{i}") for i in range(repeats)]
            it = iter(keys)
            st = median_time(lambda: c.store(next(it), payload, meta), repeats)
            k = keys[0]
            ld = median_time(lambda: c.load(k), repeats)
            miss = median_time(lambda: c.load(make_key(f"absent-{size}")), repeats)
            print(f"  payload {size >> 10:5d} KiB: store {ms(st)}   load {ms(ld)}   miss {ms(miss)}")
    try:
        sys.path.insert(0, os.path.join(ROOT, "tests"))
        from test_disk_cache import _build_object
        from jitgrad.cache.elf import ElfImage
        from jitgrad.cache.native import load_object
        obj = _build_object()
        t = median_time(lambda: load_object(obj, "add2"), repeats)
        print(f"  MCJIT load_object ({len(obj)} B object, 4 functions): {ms(t)}")
        t = median_time(lambda: ElfImage(obj).address("add2"), repeats)
        print(f"  jitgrad ELF loader, same object:                 {ms(t)}")
    except Exception as e:  # pragma: no cover
        print(f"  load_object: skipped ({e})")


# ---- section 3 -------------------------------------------------------------------------------

GRAPH_RUN = r"""
import json, sys, time
t0 = time.perf_counter()
import jitgrad as tf
t_import = time.perf_counter() - t0
which = sys.argv[1] if len(sys.argv) > 1 else "seeds"
import numpy as np
out = {"import": t_import, "graphs": {}}
if which == "seeds":
    from jitgrad.seeds import graph_examples as G
    for name, fn, _expected in G.DOC_004:
        t = time.perf_counter(); fn(); out["graphs"][name] = time.perf_counter() - t
else:
    rng = np.random.default_rng(0)
    g = tf.Graph()
    t = time.perf_counter()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [256, 784])
        y = tf.compat.v1.placeholder(tf.float32, [256, 10])
        w1 = tf.constant(rng.standard_normal((784, 512)).astype("float32") * 0.05)
        w2 = tf.constant(rng.standard_normal((512, 10)).astype("float32") * 0.05)
        h = tf.nn.relu(tf.matmul(x, w1))
        loss = tf.reduce_mean(tf.square(tf.matmul(h, w2) - y))
        grads = tf.gradients(loss, [w1, w2])
    t_build = time.perf_counter() - t
    sess = tf.compat.v1.Session(graph=g)
    t = time.perf_counter()
    sess.run(grads, {x: rng.standard_normal((256, 784)).astype("float32"),
                     y: rng.standard_normal((256, 10)).astype("float32")})
    out["graphs"]["mlp_grad (build)"] = t_build
    out["graphs"]["mlp_grad (first run)"] = time.perf_counter() - t
info = getattr(tf, "cache_info", None)
out["cache_info"] = dict(info()) if info else {}
print(json.dumps(out))
"""


JAX_RUN = r"""
import json, os, sys, time
t0 = time.perf_counter()
import jax, jax.numpy as jnp
t_import = time.perf_counter() - t0
jax.config.update("jax_compilation_cache_dir", os.environ["JAX_CACHE_DIR"])
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
import numpy as np
which = WHICH
out = {"import": t_import, "graphs": {}}
if which == "seeds":
    t = time.perf_counter()
    g = jax.jit(jax.grad(lambda x, y: x ** 2 + y ** 3, argnums=(0, 1)))
    r = g(jnp.float32(1.0), jnp.float32(2.0)); jax.block_until_ready(r)
    out["graphs"]["z=x**2+y**3 grads"] = time.perf_counter() - t
    t = time.perf_counter()
    g = jax.jit(jax.grad(lambda x: 2 * (x - 2) ** 2 + 3))
    r = g(jnp.float32(0.0)); jax.block_until_ready(r)
    out["graphs"]["2*(x-2)**2+3 grad"] = time.perf_counter() - t
else:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 784)).astype("float32"); y = rng.standard_normal((256, 10)).astype("float32")
    w1 = rng.standard_normal((784, 512)).astype("float32") * 0.05
    w2 = rng.standard_normal((512, 10)).astype("float32") * 0.05
    t = time.perf_counter()
    def loss(w1, w2, x, y):
        h = jax.nn.relu(x @ w1)
        return jnp.mean(jnp.square(h @ w2 - y))
    g = jax.jit(jax.grad(loss, argnums=(0, 1)))
    r = g(w1, w2, x, y); jax.block_until_ready(r)
    out["graphs"]["mlp_grad (first run)"] = time.perf_counter() - t
print(json.dumps(out))
"""


def _cold_then_warm(code, env_for_dir, label):
    """Runs `code` twice in fresh processes sharing a new, empty cache directory."""
    with tempfile.TemporaryDirectory() as d:
        try:
            return fresh(code, env_for_dir(d)), fresh(code, env_for_dir(d))
        except RuntimeError as e:
            print(f"  {label}: failed: {e}")
            return None


def section_graphs():
    print("\n== graph construction -> first result, fresh processes, cold vs warm disk cache")
    for which in ("seeds", "mlp"):
        code = GRAPH_RUN.replace("sys.argv[1] if len(sys.argv) > 1 else \"seeds\"", repr(which))
        runs = _cold_then_warm(code, lambda d: {"JITGRAD_CACHE_DIR": os.path.join(d, "cache")}, which)
        if runs is None:
            continue
        cold, warm = runs
        assert warm["cache_info"]["compiles"] == 0 and warm["cache_info"]["disk_hits"] >= 1, warm
        print(f"  jitgrad {which}: import jitgrad cold {ms(cold['import'])} warm {ms(warm['import'])}")
        for name in cold["graphs"]:
            print(f"    {name:<28} cold {ms(cold['graphs'][name])}   warm {ms(warm['graphs'][name])}")
        print(f"    warm cache_info: {warm['cache_info']}")
        try:
            import jax  # noqa: F401
        except ImportError:
            print("  jax: not installed (skipped)")
            continue
        runs = _cold_then_warm(JAX_RUN.replace("WHICH", repr(which)),
                               lambda d: {"JAX_CACHE_DIR": os.path.join(d, "jax"), "JAX_PLATFORMS": "cpu"},
                               f"jax {which}")
        if runs is None:
            continue
        cold, warm = runs
        print(f"  jax.jit {which} (persistent compilation cache): import jax {ms(warm['import'])}")
        for name in cold["graphs"]:
            print(f"    {name:<28} cold {ms(cold['graphs'][name])}   warm {ms(warm['graphs'][name])}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--skip-graphs", action="store_true")
    a = p.parse_args(argv)
    section_imports(a.repeats)
    section_latency(max(a.repeats, 15))
    if not a.skip_graphs:
        section_graphs()
    return 0


if __name__ == "__main__":
    sys.exit(main())
