"""fusion_plan.PAR_MIN_FLOPS_AWAKE: a kernel whose largest GEMM is too small to pay for
waking a thread (W3's H @ W2 alone) is built parallel with ``wake`` False in its meta,
and runs on the threads only while they are awake from a parallel call that has just
ended (parallel.kernel_threads); otherwise on one thread.  Either way the result is
the same bits, and equal to numpy's."""
import numpy as np

import jitgrad as tf
from jitgrad import compiler
from jitgrad.codegen import parallel
from jitgrad.codegen.fusion_plan import (AWAKE_MIN_K, AWAKE_MIN_ROWS, PAR_MIN_FLOPS,
                                         PAR_MIN_FLOPS_AWAKE, plan_fusion)
from jitgrad.passes import ir
from jitgrad.passes.prune import prune


def _graph(M, N, K, dtype="float32", seed=0):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((M, K)).astype(dtype)
    B = rng.standard_normal((K, N)).astype(dtype)
    g = tf.Graph()
    with g.as_default():
        pa = tf.compat.v1.placeholder(dtype, A.shape)
        pb = tf.compat.v1.placeholder(dtype, B.shape)
        c = tf.matmul(pa, pb)
    a, b = A.astype(np.float64), B.astype(np.float64)
    bound = 2 * K * np.finfo(dtype).eps * (np.abs(a) @ np.abs(b))
    return g, c, {pa: A, pb: B}, (a @ b, bound)


def _plan(g, y, feeds):
    with g.as_default():
        fed = list(feeds.items())
        ops = prune([y], {id(t) for t, _ in fed})
        p = compiler.optimise(ir.from_graph(ops, [y], fed, None))
        return plan_fusion(p, allow_parallel=True)


def test_small_gemm_alone_is_parallel_without_waking():
    # W3's H @ W2: 2.6 MFLOP, 256 rows
    assert PAR_MIN_FLOPS > 2 * 256 * 10 * 512 >= PAR_MIN_FLOPS_AWAKE and AWAKE_MIN_ROWS <= 256
    plan = _plan(*_graph(256, 10, 512)[:3])
    assert plan.parallel and not plan.wake
    # fewer rows: serial (both threads awake lost there)
    plan = _plan(*_graph(AWAKE_MIN_ROWS // 2, 128, 128)[:3])
    assert not plan.parallel
    # below the flops: serial
    plan = _plan(*_graph(256, 4, 512)[:3])
    assert not plan.parallel
    # a short K (W3's dH, 256 x 512 x 10: writing C is most of it): serial
    assert AWAKE_MIN_K > 10 and 2 * 256 * 512 * 10 >= PAR_MIN_FLOPS_AWAKE
    plan = _plan(*_graph(256, 512, 10)[:3])
    assert not plan.parallel
    # a big GEMM: parallel, and it wakes the threads
    plan = _plan(*_graph(256, 512, 784)[:3])
    assert plan.parallel and plan.wake


def test_kernel_threads_of_a_kernel_that_does_not_wake():
    meta = {"parallel": True, "threads": 2, "wake": False}
    old = parallel._LAST_END[0]
    try:
        parallel.set_num_threads(2)
        parallel._LAST_END[0] = float("-inf")           # no parallel call lately: one thread
        assert parallel.kernel_threads(meta) == 1
        assert parallel.kernel_threads(dict(meta, wake=True)) == 2
        assert parallel.kernel_threads({"parallel": True, "threads": 2}) == 2   # meta of before
        parallel.call_done()                            # one just ended: its threads spin
        assert parallel.kernel_threads(meta) == 2
        parallel._LAST_END[0] -= 2 * parallel.AWAKE_WINDOW_S
        assert parallel.kernel_threads(meta) == 1
        parallel.set_num_threads(1)
        parallel.call_done()
        assert parallel.kernel_threads(meta) == 1
    finally:
        parallel.set_num_threads(None)
        parallel._LAST_END[0] = old


def test_awake_only_kernel_same_bits_serial_and_threaded(monkeypatch):
    calls = []
    real = compiler._call_parallel

    def counting(*args):
        calls.append(args[2])
        return real(*args)
    monkeypatch.setattr(compiler, "_call_parallel", counting)
    for dtype in ("float32", "float64"):
        for M, N, K in ((256, 10, 512), (999, 17, 300), (257, 33, 257)):
            g, c, feeds, (exact, bound) = _graph(M, N, K, dtype, seed=M)
            plan = _plan(g, c, feeds)
            assert plan.parallel and not plan.wake, (M, N, K)
            with tf.compat.v1.Session(graph=g) as s:
                try:
                    parallel.set_num_threads(2)
                    del calls[:]
                    parallel._LAST_END[0] = float("-inf")
                    serial = np.asarray(s.run(c, feeds))      # nothing awake: one thread
                    assert calls == []
                    # the next call within the window runs on the threads (the window
                    # widened here: the test must not depend on how fast Python is)
                    monkeypatch.setattr(parallel, "AWAKE_WINDOW_S", 3600.0)
                    threaded = np.asarray(s.run(c, feeds))
                    assert calls == [2]
                finally:
                    parallel.set_num_threads(None)
            assert serial.tobytes() == threaded.tobytes(), (M, N, K, dtype)
            assert (np.abs(serial - exact) <= bound).all(), (M, N, K, dtype)
