#!/usr/bin/env python
"""Where a steady-state ``tf.function`` call's time goes (issue 13, W5).

W5 (bench/workloads.py: the jacobian of tanh(W @ x), W 256x256 float32) timed layer by
layer, interleaved round by round in one process (a noisy machine slows all alike),
medians of per-call times:

  bench       [np.asarray(jac(x))], as bench/run.py times it
  function    jac(x): Function.__call__ (trace lookup) and everything below
  concrete    ConcreteFunction._call_flat: Session runner call, EagerTensor wrapping
  runner      the Session's generated runner: feed checks, output allocation, kernel
  numpy       the hand-written numpy reference

Differences between rows are each layer's own cost.
Usage: python bench/bench_function_call.py [--rounds N] [--calls N]
"""
import argparse
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from timing import call_times  # noqa: E402
import workloads as W  # noqa: E402


def layers():
    """The W5 callables, outermost first, all warm (traced, compiled, runner installed)."""
    bench = W.w5_jitgrad("compiled")
    for _ in range(3):
        bench()
    cells = {type(c.cell_contents).__name__: c.cell_contents for c in bench.__closure__}
    jac, x = cells["Function"], cells["EagerTensor"]
    concrete = jac.get_concrete_function(x)
    runner = concrete._session._fast[concrete._run_key]
    xv = x._value
    inp = W.w5_inputs()
    return {"bench": bench, "function": lambda: jac(x), "concrete": lambda: concrete._call_flat([xv]),
            "runner": lambda: runner(xv), "numpy": lambda: W.w5_numpy(**inp)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--calls", type=int, default=200)
    args = ap.parse_args()
    cases = layers()
    times = {k: [] for k in cases}
    for _ in range(args.rounds):
        for k, fn in cases.items():
            times[k] += call_times(fn, 1, args.calls, warm=False)
    med = {k: statistics.median(v) * 1e6 for k, v in times.items()}
    for k, m in med.items():
        print(f"{k:9s} {m:8.2f} us   (min {min(times[k]) * 1e6:.2f})")
    print(f"numpy / bench: {med['numpy'] / med['bench']:.2f}   load: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
