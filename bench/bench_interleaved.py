"""One workload on several backends, each in its own process, timed in alternating turns.

bench/run.py times each backend for a fixed budget one after the other, so on a
shared machine whoever runs while the load peaks looks slow (one run saw numpy at
2 threads take 200 ms a call, then TF 6 ms).  Here the backends take turns of
``--turn`` seconds, round after round, so the load hits all of them alike;
medians, p10 (the least disturbed tenth) and p90 are reported with each backend's ratio
to the first backend's.

Why a process per backend, and a pause before each turn: thread pools keep their
threads spinning after a call -- OpenBLAS for about 2^28 cycles (~0.1 s) with
sched_yield, OpenMP pools for up to 200 ms -- so a backend timed right after another
one (or in the same process, alternating call by call) shares the cores with the
other's spinning threads.  Measured that way, W3 with jitgrad at 2 threads took
4.65 ms per call next to numpy and 3.39 ms alone (one process, same minute).  A
real program runs one of these libraries; so each backend runs alone, after a
pause that lets the others' pools go to sleep, and its first calls of a turn
(waking its own pool) are not counted.

``jitgrad@PATH`` runs the jitgrad of another source tree (e.g. ``jitgrad@/work/main``)
as one more backend: a change and its baseline measured side by side.  Thread
settings as in run.py (same environment variables; 1 thread also pinned to one core).

  python bench/bench_interleaved.py [--case W3] [--n N] [--threads 1|all]
        [--backends jitgrad,jitgrad@/work/main,jax-jit,numpy,torch-eager] [--seconds 20]
        [--turn 0.3] [--load N]

``--load N`` starts N busy processes (a pure-Python spin loop each, stopped at the
end) for the whole run: a host with more runnable threads than cores, where a
thread pool's wake-up latency and spinning decide what a parallel call costs.

``--clock cpu`` times each call by the process's CPU time (every thread's, spin
included) instead of the wall clock: on a host loaded far beyond its cores the wall
time is mostly time spent descheduled, and comparing the generated code of two trees
needs what the call itself costs.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PAUSE = 0.25      # s before a turn: longer than the thread pools' spin-waits above
SKIP = 2          # first calls of a turn not counted (they wake the backend's own pool)


def _child(case, n, backend, clock=time.perf_counter):
    """Builds one backend, checks it against numpy, then runs the parent's requests:
    a line "k" -> k calls, their times on one line."""
    tree = backend.partition("@")[2]
    sys.path.insert(0, HERE)
    sys.path.insert(0, tree or os.path.dirname(HERE))   # a source checkout works without installing
    import run as R
    kw = {"n": n} if n else {}
    build = dict(R.backends(case, kw)).get(backend.partition("@")[0])
    if build is None:
        print("skip unknown backend", flush=True)
        return
    try:
        fn = build()
    except ImportError as e:
        print(f"skip not importable ({e.name})", flush=True)
        return
    if fn is None or not R.agree(fn(), R._numpy_runner(case, kw)(), R.TOL[case]):
        print("skip not expressible, or disagrees with the numpy reference", flush=True)
        return
    fn()
    from blas_info import blas_info
    from jitgrad.codegen import parallel
    print(f"ok jitgrad threads={parallel.num_threads()}; numpy: {blas_info()}", flush=True)
    for line in sys.stdin:
        ts = []
        for _ in range(int(line)):
            t0 = clock()
            fn()
            ts.append(clock() - t0)
        print(" ".join(repr(t) for t in ts), flush=True)


def _turn(proc, seconds):
    """Calls in a turn of about ``seconds`` (one call timed first to size it)."""
    proc.stdin.write("1\n")
    proc.stdin.flush()
    one = float(proc.stdout.readline().split()[0])
    k = max(SKIP + 3, int(seconds / max(one, 1e-6)))
    proc.stdin.write(f"{k}\n")
    proc.stdin.flush()
    return [float(t) for t in proc.stdout.readline().split()][SKIP:]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--case", default="W3")
    p.add_argument("--n", type=int, default=None, help="W2's size")
    p.add_argument("--threads", default="all", choices=["1", "all"])
    p.add_argument("--backends", default="jitgrad,jax-jit,numpy,torch-eager")
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--turn", type=float, default=0.3, help="seconds per backend turn")
    p.add_argument("--load", type=int, default=0, help="busy background processes during the run")
    p.add_argument("--clock", default="wall", choices=["wall", "cpu"], help="what a call's time is (see above)")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        return _child(args.case, args.n, args.child, time.process_time if args.clock == "cpu" else time.perf_counter)
    sys.path.insert(0, HERE)
    import run as R
    env, n = R.thread_env(args.threads)
    load = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.load)]   # on any core
    if n == 1 and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})    # the children inherit it
    names = args.backends.split(",")
    if not any(k.partition("@")[0] == "jitgrad" for k in names):
        names.insert(0, "jitgrad")
    try:
        _measure(args, names, env, n)
    finally:
        for pr in load:
            pr.kill()
            pr.wait()


def _measure(args, names, env, n):
    procs, info = {}, {}
    for k in names:
        cmd = [sys.executable, os.path.abspath(__file__), "--child", k, "--case", args.case]
        cmd += ["--n", str(args.n)] if args.n else []
        cmd += ["--clock", args.clock]
        pr = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        status, _, msg = pr.stdout.readline().strip().partition(" ")
        if status != "ok":
            print(f"{k}: {msg or 'failed to start'}")
            pr.kill()
            continue
        procs[k], info[k] = pr, msg
    times = {k: [] for k in procs}
    order = list(procs)
    end = time.perf_counter() + args.seconds
    while time.perf_counter() < end:
        for k in order:
            time.sleep(PAUSE)
            times[k] += _turn(procs[k], args.turn)
        order = order[1:] + order[:1]      # no backend always follows the same one
    for pr in procs.values():
        pr.stdin.close()
        pr.wait()
    first = next(k for k in names if k in times)
    base = statistics.median(times[first])
    print(f"{args.case} threads={n} load={args.load} clock={args.clock}, {len(times[next(iter(times))])} calls per backend in turns of "
          f"{args.turn} s, one process each (load average {os.getloadavg()[0]:.1f}: noisy if above "
          f"the core count)")
    # the comparison is fair only if every backend had the same threads: say what they had
    print(f"  {info[next(iter(info))]}")
    for k, ts in times.items():
        ts = sorted(ts)
        m = statistics.median(ts)
        p10, p90 = ts[len(ts) // 10], ts[len(ts) * 9 // 10]
        print(f"  {k:20s} median {m * 1e3:8.3f} ms   p10 {p10 * 1e3:8.3f} ms   p90 {p90 * 1e3:8.3f} ms   "
              f"x {first} {m / base:5.2f}")


if __name__ == "__main__":
    main()
