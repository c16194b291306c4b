"""What compiling many distinct graphs leaves behind after clear_cache (issue 16: RSS growth
over 2,000 graphs, bench/bench_rss.py).  Not RSS thresholds: the causes, one by one.

After clear_cache the process's Python heap is what it was; RSS stayed higher only because
a few objects created while the kernel cache was full sat in pymalloc arenas that would
otherwise have been returned whole (an arena is unmapped only when its last block is freed).
The tests pin down each such object that was ours, and that no module-level table in jitgrad
grows with the number of graphs compiled."""
import collections
import gc
import subprocess
import sys
import tracemalloc
import types
import weakref

import numpy as np
import pytest

import jitgrad as tf
from jitgrad import compiler
from jitgrad.codegen import compile_server


def _graph_run(shape, scale=2.0):
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, shape)
        y = tf.reduce_sum(tf.exp(x) * scale + x)
    xv = np.full(shape, 0.25, np.float32)
    with tf.compat.v1.Session(graph=g) as s:
        got = s.run(y, {x: xv})
    want = np.sum(np.exp(xv.astype(np.float64)) * scale + xv)
    assert got == pytest.approx(want, rel=1e-5)


def test_reading_the_compile_childs_rss_keeps_nothing_alive():
    """Every compile past the first 32 reads the child's RSS.  A text-mode open() looked up
    its decoder through a fresh 'incrementaldecoder' string that CPython's type-attribute
    cache kept: one string per compile, spread over arenas that could not be freed."""
    child = compile_server._Child.__new__(compile_server._Child)
    child.proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                                  stdin=subprocess.PIPE)
    try:
        assert child.rss() > 0
        gc.collect()
        tracemalloc.start(4)
        try:
            before = tracemalloc.take_snapshot()
            for _ in range(300):
                child.rss()
            gc.collect()
            after = tracemalloc.take_snapshot()
        finally:
            tracemalloc.stop()
        left = [d for d in after.compare_to(before, "traceback")
                if d.count_diff > 0 and any(f.filename == compile_server.__file__ for f in d.traceback)]
        assert not left, [(d.count_diff, d.traceback.format()) for d in left]
    finally:
        child.close()


def test_clear_cache_releases_the_emptied_compile_lock_table(monkeypatch):
    """compiler._compiling gets an entry per compile and loses it at the end; an emptied dict
    keeps its last table, allocated wherever the heap was while the kernel cache was full."""
    monkeypatch.setenv("JITGRAD_COMPILE_PROCESS", "0")
    for n in range(6):
        _graph_run((n + 3, 7))
    assert not compiler._compiling
    compiler.clear_cache()
    assert sys.getsizeof(compiler._compiling) == sys.getsizeof({})


def _module_tables():
    """(module, name) -> entry count of every module-level container in jitgrad."""
    counts = {}
    kinds = (dict, list, set, collections.deque, weakref.WeakKeyDictionary, weakref.WeakValueDictionary)
    for name, mod in list(sys.modules.items()):
        if not isinstance(mod, types.ModuleType) or not (name == "jitgrad" or name.startswith("jitgrad.")):
            continue
        for attr, value in list(vars(mod).items()):
            if attr.startswith("__") or not isinstance(value, kinds):
                continue
            counts[(name, attr)] = len(value)
    return counts


def test_no_module_level_table_grows_with_the_graphs_compiled():
    """12 distinct small graphs and 2 large enough to run on several threads, after a warm-up
    of the same kinds: after clear_cache no module-level dict / list / set in jitgrad holds
    more entries than before (parallel.py kept a ctypes function per kernel address)."""
    def batch(start, n):
        for i in range(start, start + n):
            _graph_run((i % 5 + 1, i + 2))
        for i in range(start, start + 2):
            _graph_run((2048, 1024 + i))     # >= 2M elements: a multi-threaded kernel

    batch(0, 4)
    compile_server.start()        # the compile child: one per process, started by the 17th compile
    compiler.clear_cache()
    before = _module_tables()
    batch(100, 12)
    compiler.clear_cache()
    after = _module_tables()
    grown = {k: (before.get(k, 0), v) for k, v in after.items() if v > before.get(k, 0)}
    assert not grown, grown


def test_clear_cache_ends_the_compile_child_and_the_next_compile_starts_one(monkeypatch):
    """The child holds what LLVM kept (up to compile_server.RECYCLE_BYTES); clear_cache gives it
    back to the system, and the parent's objects for the child (made mid-run) go with it."""
    monkeypatch.setenv("JITGRAD_COMPILE_PROCESS", "1")
    compile_server.start()
    proc = compile_server._server[compile_server.os.getpid()].proc
    compiler.clear_cache()
    assert proc.wait(timeout=30) is not None
    assert compile_server.os.getpid() not in compile_server._server
    _graph_run((3, 11), scale=3.0)          # compiled by a new child, right numbers
    assert compile_server._server[compile_server.os.getpid()].proc.poll() is None


def test_the_compile_count_stops_at_the_switch_to_the_child(monkeypatch):
    """Counting every compile stored a new int object each time, the last one made while the
    kernel cache was full and alive after clear_cache; past the switch no count is needed."""
    monkeypatch.delenv("JITGRAD_COMPILE_PROCESS", raising=False)
    monkeypatch.setattr(compile_server, "_compiles", {})
    monkeypatch.setattr(compile_server, "start", lambda: None)
    decisions = [compile_server.use_child() for _ in range(compile_server.IN_PROCESS + 50)]
    assert decisions == [False] * compile_server.IN_PROCESS + [True] * 50
    assert compile_server._compiles == {compile_server.os.getpid(): compile_server.IN_PROCESS + 1}
