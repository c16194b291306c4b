"""jitgrad/gc_pause.py: the cyclic collector is off while a kernel compiles, and its
state is restored afterwards (also after a failed compile, and with compiles on
several threads)."""
import gc
import threading

import numpy as np
import pytest

import jitgrad as tf
from jitgrad import cache, compiler, gc_pause


def test_paused_restores_the_state_it_found():
    assert gc.isenabled()
    with gc_pause.paused():
        assert not gc.isenabled()
        with gc_pause.paused():
            assert not gc.isenabled()
        assert not gc.isenabled()             # the outer span is still paused
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_pause.paused():
            pass
        assert not gc.isenabled()             # left off: it was off
    finally:
        gc.enable()


def test_restored_after_an_exception():
    with pytest.raises(ZeroDivisionError):
        with gc_pause.paused():
            1 / 0
    assert gc.isenabled()


def test_overlapping_spans_on_two_threads():
    """The collector comes back when the last of two overlapping spans ends."""
    inside, release = threading.Event(), threading.Event()

    def other():
        with gc_pause.paused():
            inside.set()
            release.wait(10)
    t = threading.Thread(target=other)
    with gc_pause.paused():
        t.start()
        assert inside.wait(10)
    assert not gc.isenabled()                 # the other thread's span is open
    release.set()
    t.join(10)
    assert gc.isenabled()


def test_a_compile_runs_with_the_collector_off_and_restores_it(monkeypatch):
    seen = []
    real = compiler.compile_program
    monkeypatch.setattr(compiler, "compile_program", lambda *a: seen.append(gc.isenabled()) or real(*a))
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [33])
        y = tf.reduce_sum(tf.tanh(x) * 2.0)
    xv = np.linspace(-2, 2, 33).astype(np.float32)
    compiler.clear_cache()
    with tf.compat.v1.Session(graph=g) as s:
        got = s.run(y, {x: xv})
    assert seen == [False] and gc.isenabled()
    assert np.isclose(got, np.sum(np.tanh(xv.astype(np.float64)) * 2), rtol=1e-5)


def _ir_garbage_after_a_matmul_compile():
    """llvmlite instructions left as cyclic garbage by compiling a kernel with a matmul
    (its function is printed and dropped by backend.Units.take)."""
    g = tf.Graph()
    with g.as_default():
        a = tf.compat.v1.placeholder(tf.float32, [40, 24])
        b = tf.compat.v1.placeholder(tf.float32, [24, 20])
        y = tf.reduce_sum(tf.nn.relu(tf.matmul(a, b)))
    av = np.linspace(-1, 1, 40 * 24, dtype=np.float32).reshape(40, 24)
    bv = np.linspace(1, -1, 24 * 20, dtype=np.float32).reshape(24, 20)
    compiler.clear_cache()
    gc.collect()
    cache.set_enabled(False)              # compiled here, not loaded from disk
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        with tf.compat.v1.Session(graph=g) as s:
            got = s.run(y, {a: av, b: bv})
        gc.collect()
        n = sum(1 for o in gc.garbage if type(o).__module__ == "llvmlite.ir.instructions")
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        cache.set_enabled(None)
    want = np.maximum(av.astype(np.float64) @ bv.astype(np.float64), 0).sum()
    assert np.isclose(got, want, rtol=1e-5)
    return n


def test_a_compile_frees_its_ir_by_reference_counting(monkeypatch):
    """KernelBuilder.release and irutil.drop_body cut the IR's cycles, so the collector
    (paused while compiling) is not left tens of thousands of objects to trace."""
    from jitgrad.codegen import backend, kernel
    assert _ir_garbage_after_a_matmul_compile() < 50
    monkeypatch.setattr(kernel.KernelBuilder, "release", lambda self: None)
    monkeypatch.setattr(backend, "drop_body", lambda fn: setattr(fn, "blocks", []))
    assert _ir_garbage_after_a_matmul_compile() > 500       # what the test would see without them
