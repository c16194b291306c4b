"""What the flush-denormals mode costs the numpy reference kernels (eager ops and the
interpreter): the same calls with the mode off and on, interleaved round by round so a
busy host's drift hits both alike.

    python bench/bench_flush_denormals.py [--quick]

Prints per-call medians (microseconds) and ratios to the mode off, for the mode on as
it runs and as it ran before its native helpers ("before": every op flushes inputs and
outputs with three numpy calls per array). x * y and the interpreted graph's ops are
scoped (FTZ + DAZ set around the kernel, jitgrad/denormals.py SCOPED_OPS); exp and
reduce_sum flush explicitly, testing each array in one native pass (denormal_scan.py).
"""
import os
import statistics
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from timing import call_times  # noqa: E402
import jitgrad as tf  # noqa: E402
from jitgrad import denormals  # noqa: E402


def cases():
    x = tf.constant(np.linspace(1, 2, 100).astype(np.float32))
    y = tf.constant(np.linspace(2, 3, 100).astype(np.float32))
    g = tf.Graph()
    with g.as_default():
        a, b, c = (tf.compat.v1.placeholder(tf.float32, [100]) for _ in range(3))
        out = a * b - a / c + b * c
    sess = tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto(jitgrad_mode="interpret"))
    feed = {a: x.numpy(), b: y.numpy(), c: y.numpy()}
    return {"eager x*y f32[100]": (lambda: x * y, 1),
            "eager exp f32[100]": (lambda: tf.exp(x), 1),
            "eager reduce_sum": (lambda: tf.reduce_sum(x), 1),
            "interpret 5 ops f32[100]": (lambda: sess.run(out, feed), 5)}


def main(quick):
    rounds, number = (5, 200) if quick else (15, 2000)
    modes = ("off", "on", "before")
    fns = cases()
    got = {name: {m: [] for m in modes} for name in fns}
    denormals.scope("Mul", [])                 # (loads the native helpers)
    native = list(denormals._native)
    mode = denormals.enabled()                 # (on by default; restored after)
    for _ in range(rounds):
        for m in modes:
            denormals.set_enabled(m != "off")
            denormals._native[:] = native if m == "on" else [None, None]
            for name, (fn, _) in fns.items():
                got[name][m].extend(call_times(fn, 1, number))
    denormals.set_enabled(mode)
    denormals._native[:] = native
    # (the minimum too: on a shared host a median carries other processes' time)
    print(f"{'':<26} {'off':>9} {'on':>9} {'before':>9}   on/off  before/off   min: on/off  before/off"
          "   (median per call; per op interpreted)")
    for name, (fn, ops) in fns.items():
        off, on, ex = (statistics.median(got[name][m]) / ops * 1e6 for m in modes)
        moff, mon, mex = (min(got[name][m]) for m in modes)
        print(f"{name:<26} {off:7.2f}us {on:7.2f}us {ex:7.2f}us   {on / off:5.2f}x  {ex / off:8.2f}x"
              f"   {mon / moff:9.2f}x  {mex / moff:8.2f}x")
    print("load:", open("/proc/loadavg").read().split()[:3] if os.path.exists("/proc/loadavg") else "?")


if __name__ == "__main__":
    main("--quick" in sys.argv)
