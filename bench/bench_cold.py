"""W6 after import, interleaved: a workload's first result in a fresh process with an
empty disk cache, timed from the end of the framework's import, wall clock and CPU time
(and from process start: wall since the parent spawned the child, CPU since exec).

bench/run.py's W6 gives wall-clock medians of 3 processes per backend, run one backend
after the other inside each repetition; on a shared 2-core host the wall clock of one
process is mostly other processes' load.  Here every repetition runs each backend once
in a rotating order, and each child reports both its wall time and its CPU time (every
thread's: the compile threads' work counts) after import, so a change to the compiler
can be judged by what it costs, not by when the neighbours were busy.

  python bench/bench_cold.py [--case w3] [--reps 7] [--backends jitgrad,jitgrad@/work/main,jax.jit]
        [--phases] [--warm]

``jitgrad@PATH`` runs the jitgrad of another source tree.  ``--phases`` prints jitgrad's
compile phases (the kernel's timings: lowering, per-phase LLVM CPU, wall) per run.
Run it with a Python that has jax for the jax.jit backend (e.g. /work/benchenv/bin/python).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

_CHILD = r"""
import time, sys, os, json
sys.path[:0] = [{here!r}, {root!r}]
import {module}
t0, c0 = time.perf_counter(), time.process_time()
{setup}
import workloads as W, others
f = {build}
f()
t1, c1 = time.perf_counter(), time.process_time()
phases = {{}}
if {module!r} == "jitgrad":
    from jitgrad import compiler
    for k in compiler._kernels.values():
        phases = {{p: v for p, v in k.timings.items()}}
# from process start: wall since the parent spawned it (JG_SPAWNED), CPU since exec
print(json.dumps({{"wall": t1 - t0, "cpu": c1 - c0, "phases": phases,
                  "start_wall": time.time() - float(os.environ["JG_SPAWNED"]), "start_cpu": c1}}))
"""
_JAX_SETUP = ("import jax; jax.config.update('jax_compilation_cache_dir', os.environ['JAX_CACHE_DIR']); "
              "jax.config.update('jax_persistent_cache_min_compile_time_secs', 0); "
              "jax.config.update('jax_persistent_cache_min_entry_size_bytes', -1)")


def child_code(backend, case):
    """The program one fresh process runs: import, then time the first result."""
    name, _, tree = backend.partition("@")
    root = tree or os.path.dirname(HERE)
    if name == "jitgrad":
        return _CHILD.format(here=HERE, root=root, module="jitgrad", setup="pass",
                             build=f"W.{case}_jitgrad('compiled')")
    if name == "jax.jit":
        return _CHILD.format(here=HERE, root=root, module="jax", setup=_JAX_SETUP,
                             build=f"others.jax_jit({case.upper()!r})")
    raise SystemExit(f"unknown backend {backend}")


def run_once(code, env, warm=False):
    """One fresh process with an empty cache directory (warm: a second process after it,
    with the cache the first one left, is the one timed)."""
    with tempfile.TemporaryDirectory() as d:
        env = dict(env, JITGRAD_CACHE_DIR=d, JAX_CACHE_DIR=d, JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3")
        for _ in range(2 if warm else 1):
            env["JG_SPAWNED"] = repr(time.time())
            r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
            if r.returncode != 0:
                raise SystemExit(r.stderr[-2000:])
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--case", default="w3")
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--backends", default="jitgrad,jax.jit")
    p.add_argument("--phases", action="store_true")
    p.add_argument("--warm", action="store_true", help="time a second process, with the disk cache the first left")
    args = p.parse_args()
    import compileall
    names = args.backends.split(",")
    # PYTHONDONTWRITEBYTECODE=1 would have every child compile jitgrad's bytecode again
    for k in names:
        tree = k.partition("@")[2] or os.path.dirname(HERE)
        if k.startswith("jitgrad"):
            compileall.compile_dir(os.path.join(tree, "jitgrad"), quiet=1)
    compileall.compile_dir(HERE, quiet=1)
    codes = {k: child_code(k, args.case) for k in names}
    res = {k: [] for k in names}
    loads = []
    order = list(names)
    for rep in range(args.reps):
        for k in order:
            loads.append(os.getloadavg()[0])
            r = run_once(codes[k], os.environ, args.warm)
            res[k].append(r)
            if args.phases and r["phases"]:
                ph = " ".join(f"{p}={v * 1e3:.0f}" if isinstance(v, float) else f"{p}={v}"
                              for p, v in r["phases"].items())
                print(f"  {k} rep {rep}: wall {r['wall'] * 1e3:.0f} ms cpu {r['cpu'] * 1e3:.0f} ms | {ph}")
        order = order[1:] + order[:1]
    print(f"W6 {args.case.upper()} first result after import, {'warm' if args.warm else 'empty'} disk cache, {args.reps} fresh processes per "
          f"backend in rotating turns; load average {min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} cores")
    base = names[0]
    cols = ("wall", "cpu", "start_wall", "start_cpu")
    med = {k: {c: statistics.median(r[c] for r in rs) for c in cols} for k, rs in res.items()}
    for k, rs in res.items():
        print(f"  {k:28s} wall median {med[k]['wall'] * 1e3:7.0f} ms (min {min(r['wall'] for r in rs) * 1e3:5.0f})"
              f"   cpu median {med[k]['cpu'] * 1e3:7.0f} ms (min {min(r['cpu'] for r in rs) * 1e3:5.0f})"
              f"   x {base}: wall {med[k]['wall'] / med[base]['wall']:.2f} cpu {med[k]['cpu'] / med[base]['cpu']:.2f}")
        print(f"  {'':28s} from process start: wall median {med[k]['start_wall'] * 1e3:7.0f} ms"
              f"   cpu median {med[k]['start_cpu'] * 1e3:7.0f} ms"
              f"   x {base}: wall {med[k]['start_wall'] / med[base]['start_wall']:.2f}"
              f" cpu {med[k]['start_cpu'] / med[base]['start_cpu']:.2f}")


if __name__ == "__main__":
    main()
