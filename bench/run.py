"""jitgrad benchmark suite (issue 6): `python bench/run.py` or `python -m jitgrad bench`.

Runs workloads W1-W6 on every importable backend, checks that all backends
agree with a hand-written numpy reference before timing anything, and prints
medians (with min/max) and the ratio of each backend's median to jitgrad's.
Each thread setting runs in its own subprocess with thread counts set alike
for every backend before any of them is imported; the 1-thread run is also pinned
to one core (sched_setaffinity), since XLA:CPU keeps a thread pool regardless.

  --threads 1|all|both   (default both)    --quick   fewer sizes/repeats
  --only W1,W3           subset            --out DIR  JSON (+ PNG if matplotlib)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOL = {"W1": 1e-6, "W2": 2e-4, "W3": 2e-3, "W4": 1e-4, "W5": 1e-4}


def thread_env(threads):
    env = dict(os.environ)
    # These make older OpenBLAS builds safe on some CPUs but slow a current numpy;
    # unset for benchmarking only (never in tests or CI).
    env.pop("OPENBLAS_CORETYPE", None)
    env.pop("OPENBLAS_L2_SIZE", None)
    n = str(os.cpu_count() or 1) if threads == "all" else "1"
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "JITGRAD_NUM_THREADS",
                "TF_NUM_INTRAOP_THREADS"):
        env[var] = n
    env["TF_NUM_INTEROP_THREADS"] = "1"
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    if n == "1":
        env["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
        env["JITGRAD_BENCH_PIN"] = "1"
    return env, int(n)


def timeit(fn, budget=0.5, min_reps=5, max_reps=2000):
    fn()
    times = []
    start = time.perf_counter()
    while len(times) < max_reps and (len(times) < min_reps or time.perf_counter() - start < budget):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), min(times), max(times), len(times)


def agree(got, ref, tol):
    import numpy as np
    if len(got) != len(ref):
        return False
    for g, r in zip(got, ref):
        g, r = np.asarray(g, np.float64), np.asarray(r, np.float64)
        if g.shape != r.shape:
            return False
        scale = max(1.0, float(np.max(np.abs(r)))) if r.size else 1.0
        if not np.allclose(g, r, rtol=tol, atol=tol * scale):
            return False
    return True


def backends(name, kw):
    """(label, builder) pairs; builders may raise ImportError or return None."""
    import others
    import workloads as W
    jit = getattr(W, f"{name.lower()}_jitgrad")
    out = [("jitgrad", lambda: jit("compiled", **kw)),
           ("jitgrad-interp", lambda: jit("interpret", **kw)),
           ("numpy", lambda: _numpy_runner(name, kw))]
    out += [("tf-session", lambda: others.tf_session(name, **kw)),
            ("tf-function", lambda: others.tf_function(name, **kw)),
            ("tf-xla", lambda: others.tf_function(name, jit=True, **kw)),
            ("jax-jit", lambda: others.jax_jit(name, **kw)),
            ("torch-eager", lambda: others.torch_eager(name, **kw))]
    return out


def _numpy_runner(name, kw):
    import workloads as W
    if name == "W2":
        inp = W.w2_inputs(kw["n"])
    else:
        inp = getattr(W, f"{name.lower()}_inputs")()
    ref = getattr(W, f"{name.lower()}_numpy")
    return lambda: ref(**inp)


def cases(quick):
    sizes = [1000, 100_000, 1_000_000] + ([] if quick else [10_000_000])
    out = [("W1", {})] + [("W2", {"n": n}) for n in sizes] + [("W3", {}), ("W4", {}), ("W5", {})]
    return out


def run_child(args):
    sys.path.insert(0, HERE)
    sys.path.insert(0, os.path.dirname(HERE))  # a source checkout works without installing
    import numpy as np
    env_threads = int(os.environ.get("OMP_NUM_THREADS", "1"))
    extra = machine_facts(np, quick=args.quick, threads=env_threads)
    copy_bw = extra[COPY_BW]
    rows = []
    for name, kw in cases(args.quick):
        if args.only and name not in args.only:
            continue
        label = name + (f" n={kw['n']:.0e}" if "n" in kw else "")
        ref = _numpy_runner(name, kw)()
        base = None
        for backend, build in backends(name, kw):
            t0 = time.perf_counter()
            try:
                fn = build()
            except ImportError as e:
                rows.append({"case": label, "backend": backend, "skipped": f"not importable ({e.name})"})
                continue
            except Exception as e:  # a backend that cannot express the workload
                rows.append({"case": label, "backend": backend, "skipped": f"{type(e).__name__}: {e}"[:120]})
                continue
            if fn is None:
                rows.append({"case": label, "backend": backend, "skipped": "workload not expressible"})
                continue
            try:
                got = fn()
            except Exception as e:
                rows.append({"case": label, "backend": backend, "skipped": f"{type(e).__name__}: {e}"[:120]})
                continue
            first = time.perf_counter() - t0
            ok = agree(got, ref, TOL[name])
            if not ok:
                rows.append({"case": label, "backend": backend, "skipped": "DISAGREES with numpy reference"})
                continue
            budget = 0.2 if args.quick else 0.6
            # the previous backend's pool threads keep spinning ~0.1 s after its last call
            # (OpenBLAS, Eigen) and would share the cores with this one's first samples
            time.sleep(0.25)
            med, lo, hi, reps = timeit(fn, budget=budget)
            row = {"case": label, "backend": backend, "median_s": med, "min_s": lo, "max_s": hi,
                   "reps": reps, "first_call_s": first}
            if name == "W2":
                row["GB/s"] = 2 * 4 * kw["n"] / med / 1e9
                row["%copy"] = 100 * row["GB/s"] / copy_bw
            if name == "W3":
                flops = 3 * 2 * 256 * (784 * 512 + 512 * 10)
                row["GFLOP/s"] = flops / med / 1e9
            if backend == "jitgrad":
                base = med
            rows.append(row)
        for r in rows:
            if r["case"] == label and "median_s" in r and base:
                r["ratio_to_jitgrad"] = r["median_s"] / base
    return {"threads": env_threads, "rows": rows, "machine": extra}


COPY_BW = "memory_bandwidth_GBs(copy, this run's threads)"


def machine_facts(np, quick, threads):
    """Copy bandwidth with as many threads as the backends get (a one-core
    copy understates what two cores can stream), and numpy's W3 matmul rate."""
    from concurrent.futures import ThreadPoolExecutor
    a = np.ones(50_000_000 if not quick else 10_000_000, np.float32)
    b = np.empty_like(a)
    cuts = [i * a.size // threads for i in range(threads + 1)]
    parts = [(b[lo:hi], a[lo:hi]) for lo, hi in zip(cuts, cuts[1:])]
    with ThreadPoolExecutor(threads) as pool:  # np.copyto releases the GIL
        med, *_ = timeit(lambda: list(pool.map(lambda p: np.copyto(*p), parts)), budget=0.5)
    bw = 2 * a.nbytes / med / 1e9
    x = np.random.default_rng(0).standard_normal((256, 784)).astype(np.float32)
    w = np.random.default_rng(1).standard_normal((784, 512)).astype(np.float32)
    mm, *_ = timeit(lambda: x @ w, budget=0.3)
    facts = {COPY_BW: bw, "numpy_matmul_GFLOPs(256x784x512)": 2 * 256 * 784 * 512 / mm / 1e9}
    # a like-for-like comparison needs the same threads on every side: as each library reports it
    from blas_info import openblas_threads
    from jitgrad.codegen import parallel
    if openblas_threads() is not None:
        facts["numpy_OpenBLAS_threads"] = float(openblas_threads())
    facts["jitgrad_threads"] = float(parallel.num_threads())
    return facts


# Each child prints two numbers: seconds from process start to the first result, and to the
# end of the framework's import (so the report can also show first result minus import).
_W6_START = "import time; t0 = time.perf_counter(); import sys, os; sys.path[:0] = [{here!r}, {root!r}]; "
_W6_END = "f(); print(time.perf_counter() - t0, t_imp - t0)"
W6_CODE = {
    "jitgrad": _W6_START + ("import jitgrad; t_imp = time.perf_counter(); "
                            "import workloads as W; f = W.{wl}_jitgrad('compiled'); ") + _W6_END,
    # the same function under jax.jit with JAX's persistent compilation cache
    "jax.jit": _W6_START + ("import jax; t_imp = time.perf_counter(); "
                            "jax.config.update('jax_compilation_cache_dir', os.environ['JAX_CACHE_DIR']); "
                            "jax.config.update('jax_persistent_cache_min_compile_time_secs', 0); "
                            "jax.config.update('jax_persistent_cache_min_entry_size_bytes', -1); "
                            "import others; f = others.jax_jit({name!r}); ") + _W6_END,
    # TF keeps no compiled code across processes: its "warm" runs are cold again
    "tf.function": _W6_START + ("import tensorflow; t_imp = time.perf_counter(); "
                                "import others; f = others.tf_function({name!r}); ") + _W6_END,
}
_W6_MODULE = {"jitgrad": "jitgrad", "jax.jit": "jax", "tf.function": "tensorflow"}


def _w6_once(code, env):
    """(first result, first result minus import) in seconds for one fresh process; NaNs if it failed."""
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    if r.returncode != 0:
        return float("nan"), float("nan")
    total, imp = map(float, r.stdout.strip().splitlines()[-1].split())
    return total, total - imp


def compile_times(quick, reps=None):
    """W6: first result in a fresh process (imports included), cold vs warm disk cache:
    median of `reps` processes per backend, each cold one with an empty cache directory.
    The backends take turns within each repetition (ours, jax, TF, ours, ...), so load
    from other processes on a shared machine falls on all of them alike."""
    import compileall
    import importlib.util
    import tempfile
    reps = reps or (1 if quick else 3)
    out = []
    # jax and TF come with their bytecode compiled (pip compiles it at install), and so
    # does an installed jitgrad; a source tree run with PYTHONDONTWRITEBYTECODE=1 (as on
    # the shared benchmark hosts) would compile ~0.2 s of jitgrad's sources in every child.
    root = os.path.dirname(HERE)
    for d in (os.path.join(root, "jitgrad"), HERE):
        compileall.compile_dir(d, quiet=1)
    backends = []
    for backend, module in _W6_MODULE.items():
        if backend != "jitgrad" and importlib.util.find_spec(module) is None:  # ours: from this tree
            out.append({"case": "W6", "backend": backend, "skipped": f"{module} not installed"})
        else:
            backends.append(backend)
    for wl in ("w1", "w3"):
        times = {(b, label): [] for b in backends for label in ("cold", "warm")}
        for _ in range(reps):
            for backend in backends:
                code = W6_CODE[backend].format(here=HERE, root=root, wl=wl, name=wl.upper())
                with tempfile.TemporaryDirectory() as d:
                    env = dict(os.environ, JITGRAD_CACHE_DIR=d, JAX_CACHE_DIR=d, JAX_PLATFORMS="cpu",
                               TF_CPP_MIN_LOG_LEVEL="3")
                    for label in ("cold", "warm", "warm"):
                        times[(backend, label)].append(_w6_once(code, env))
        for (backend, label), ts in times.items():
            tot = [t for t, _ in ts]
            after = [a for _, a in ts]
            out.append({"case": f"W6 {wl.upper()} first result", "backend": f"{backend} {label} disk",
                        "median_s": statistics.median(tot), "min_s": min(tot), "max_s": max(tot),
                        "after_import_median_s": statistics.median(after)})
    return out


def fmt_time(s):
    return f"{s * 1e6:9.1f} us" if s < 1e-3 else (f"{s * 1e3:9.2f} ms" if s < 1 else f"{s:9.2f} s ")


def report(result):
    print(f"\n=== threads: {result['threads']} ===")
    for k, v in result["machine"].items():
        print(f"  {k}: {v:.1f}")
    print(f"  {'case':<14} {'backend':<16} {'median':>12} {'min':>12} {'max':>12} {'x jitgrad':>10}  extra")
    for r in result["rows"]:
        if "skipped" in r:
            print(f"  {r['case']:<14} {r['backend']:<16} skipped: {r['skipped']}")
            continue
        extra = "  ".join(f"{k}={r[k]:.1f}" for k in ("GB/s", "%copy", "GFLOP/s") if k in r)
        ratio = f"{r['ratio_to_jitgrad']:10.2f}" if "ratio_to_jitgrad" in r else " " * 10
        mn = fmt_time(r["min_s"]) if "min_s" in r else ""
        mx = fmt_time(r["max_s"]) if "max_s" in r else ""
        print(f"  {r['case']:<14} {r['backend']:<16} {fmt_time(r['median_s']):>12} {mn:>12} {mx:>12} {ratio}  {extra}")


def chart(results, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FuncFormatter, NullFormatter
    except ImportError:
        print("(matplotlib not installed: no PNG chart)")
        return
    n_rows = max((len(res["rows"]) for res in results), default=1)
    fig, axes = plt.subplots(1, len(results), figsize=(7 * len(results), 1.5 + 0.22 * n_rows), squeeze=False)
    for ax, res in zip(axes[0], results):
        rows = [r for r in res["rows"] if "ratio_to_jitgrad" in r and r["backend"] != "jitgrad"]
        labels = [f"{r['case']} {r['backend']}" for r in rows]
        ax.barh(labels, [r["ratio_to_jitgrad"] for r in rows])
        ax.axvline(1.0, color="k")
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}x"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.tick_params(axis="y", labelsize=7)
        ax.set_title(f"time / jitgrad time, >1: jitgrad faster ({res['threads']} thread(s))")
    fig.tight_layout()
    fig.savefig(path)
    print(f"chart: {path}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", default="both", choices=["1", "all", "both"])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--only", type=lambda s: set(s.split(",")), default=None)
    p.add_argument("--out", default=os.path.join(HERE, "results"))
    p.add_argument("--w6-reps", type=int, default=None, help="fresh processes per W6 backend (default 3)")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        if os.environ.get("JITGRAD_BENCH_PIN") and hasattr(os, "sched_setaffinity"):
            # Thread-count settings are not honoured alike by every backend (XLA:CPU's
            # thunk runtime keeps a multi-threaded pool whatever XLA_FLAGS say): in the
            # 1-thread run the whole process is pinned to one core, so none can cheat.
            os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
        json.dump(run_child(args), sys.stdout)
        return
    results = []
    for threads in (["1", "all"] if args.threads == "both" else [args.threads]):
        if args.only == {"W6"}:
            break
        env, n = thread_env(threads)
        cmd = [sys.executable, os.path.abspath(__file__), "--child"] + (["--quick"] if args.quick else [])
        if args.only:
            cmd += ["--only", ",".join(sorted(args.only))]
        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if r.returncode != 0:
            print(r.stderr[-3000:], file=sys.stderr)
            sys.exit(1)
        res = json.loads(r.stdout.strip().splitlines()[-1])
        results.append(res)
        report(res)
    if not args.only or "W6" in args.only:
        w6 = compile_times(args.quick, args.w6_reps)
        print("\n=== W6 compile: first result in a fresh process (includes the framework's import), backends in turns ===")
        for r in w6:
            if "skipped" in r:
                print(f"  {r['case']:<28} {r['backend']:<20} skipped: {r['skipped']}")
                continue
            print(f"  {r['case']:<28} {r['backend']:<22} {fmt_time(r['median_s'])}  "
                  f"(min {fmt_time(r['min_s']).strip()}, max {fmt_time(r['max_s']).strip()}; "
                  f"after import {fmt_time(r['after_import_median_s']).strip()})")
        results.append({"threads": "n/a", "rows": w6, "machine": {}})
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    print(f"\nJSON: {os.path.join(args.out, 'results.json')}")
    chart([r for r in results if r["threads"] != "n/a"], os.path.join(args.out, "chart.png"))


if __name__ == "__main__":
    main()
