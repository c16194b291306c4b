"""RSS over 10,000 calls of a compiled while_loop whose loop variable grows
(x = tf.concat([x, rows], 0) under a None shape invariant), with trip counts
that vary from call to call: the kernel's growing buffer is kept from call to
call and freed with the kernel, every output row is copied out, so RSS must
stay flat after warm-up. Not a test (no timing, no RSS bound asserted): prints
RSS at a few points and the growth between call 1,000 and call 10,000.

    PYTHONPATH=. python bench/bench_rss_growing_loop.py
"""
import numpy as np

import jitgrad as tf

tf1 = tf.compat.v1


def rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def main(calls=10_000):
    g = tf.Graph()
    with g.as_default():
        n = tf1.placeholder(tf.int32, [])
        w = tf1.placeholder(tf.float32, [16])

        def body(i, h, x):
            h = tf.tanh(h * w + 0.1)
            return i + 1, h, tf.concat([x, [h]], 0)
        _, _, x = tf.while_loop(lambda i, h, x: i < n, body, [0, tf.ones([16]), tf.zeros([0, 16])],
                                shape_invariants=[tf.TensorShape([]), tf.TensorShape([16]),
                                                  tf.TensorShape([None, 16])])
    wv = np.linspace(-1, 1, 16).astype(np.float32)
    rng = np.random.default_rng(0)
    marks = {}
    with tf1.Session(graph=g) as s:
        before = tf.cache_info()["fallbacks"]
        for k in range(1, calls + 1):
            trips = int(rng.integers(0, 2000))
            out = s.run(x, {n: trips, w: wv})
            assert out.shape == (trips, 16)
            if k in (1, 100, 1000, 5000, calls):
                marks[k] = rss_kib()
        assert tf.cache_info()["fallbacks"] == before, "the loop ran in the interpreter"
    for k, v in marks.items():
        print(f"call {k:6d}: RSS {v / 1024:8.1f} MiB")
    print(f"growth from call 1000 to call {calls}: {(marks[calls] - marks[1000]) / 1024:.2f} MiB")


if __name__ == "__main__":
    main()
