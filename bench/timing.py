"""Seconds per call, the one way the benchmark scripts time a function."""
import statistics
import time


def call_times(fn, repeat, number=1, warm=True):
    """Seconds per call of ``repeat`` samples of ``number`` calls each, after one
    warm-up call (``warm``) so first-call costs (tracing, compiling) stay out."""
    if warm:
        fn()
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        ts.append((time.perf_counter() - t0) / number)
    return ts


def median_time(fn, repeat, number=1, warm=True):
    return statistics.median(call_times(fn, repeat, number, warm))
