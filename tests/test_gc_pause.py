"""jitgrad/gc_pause.py: the cyclic collector is off while a kernel compiles, and its
state is restored afterwards (also after a failed compile, and with compiles on
several threads)."""
import gc
import threading

import numpy as np
import pytest

import jitgrad as tf
from jitgrad import compiler, gc_pause


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
