"""One workload on several backends with their samples interleaved, for a loaded machine.

bench/run.py times each backend for a fixed budget one after the other, so on a
shared machine whoever runs while the load peaks looks slow (one run saw numpy at
2 threads take 200 ms a call, then TF 6 ms).  Here every round calls each backend
once, so the load hits all of them alike; medians and p10 (the least disturbed
tenth) are reported with each backend's ratio to jitgrad's.  Thread settings as in
run.py (same environment variables; 1 thread also pinned to one core).

  python bench/bench_interleaved.py [--case W3] [--n N] [--threads 1|all]
                                    [--backends jitgrad,jax-jit,numpy,torch-eager] [--seconds 20]
"""
import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--case", default="W3")
    p.add_argument("--n", type=int, default=None, help="W2's size")
    p.add_argument("--threads", default="all", choices=["1", "all"])
    p.add_argument("--backends", default="jitgrad,jax-jit,numpy,torch-eager")
    p.add_argument("--seconds", type=float, default=20.0)
    args = p.parse_args()
    sys.path.insert(0, HERE)
    sys.path.insert(0, os.path.dirname(HERE))   # a source checkout works without installing
    import run as R
    env, n = R.thread_env(args.threads)
    os.environ.update(env)    # before any backend is imported
    if n == 1 and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    kw = {"n": args.n} if args.n else {}
    names = args.backends.split(",")
    if "jitgrad" not in names:
        names.insert(0, "jitgrad")
    builders = dict(R.backends(args.case, kw))
    ref = R._numpy_runner(args.case, kw)()
    fns = {}
    for k in names:
        try:
            fn = builders[k]()
        except ImportError as e:
            print(f"{k}: not importable ({e.name})")
            continue
        if fn is None or not R.agree(fn(), ref, R.TOL[args.case]):
            print(f"{k}: skipped (not expressible, or disagrees with the numpy reference)")
            continue
        fn()
        fns[k] = fn
    times = {k: [] for k in fns}
    end = time.perf_counter() + args.seconds
    while time.perf_counter() < end:
        for k, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    base = statistics.median(times["jitgrad"])
    from blas_info import blas_info
    from jitgrad.codegen import parallel
    print(f"{args.case} threads={n}, {len(times['jitgrad'])} interleaved rounds "
          f"(load average {os.getloadavg()[0]:.1f}: noisy if above the core count)")
    # the comparison is fair only if every backend had the same threads: say what they had
    print(f"  jitgrad threads={parallel.num_threads()}; numpy: {blas_info()}")
    for k, ts in times.items():
        ts = sorted(ts)
        m = statistics.median(ts)
        print(f"  {k:14s} median {m * 1e3:8.3f} ms   p10 {ts[len(ts) // 10] * 1e3:8.3f} ms   "
              f"x jitgrad {m / base:5.2f}")


if __name__ == "__main__":
    main()
