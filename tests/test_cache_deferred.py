"""Disk-cache writes after the result (jitgrad/cache/deferred.py, DiskCache.store(later=True)):
the same complete entries, readable by this process at once and written before it exits."""
import os
import subprocess
import sys
import textwrap
import threading

from jitgrad.cache import deferred, disk
from jitgrad.cache.disk import DiskCache, make_key

FP = {"format": 1, "test": "deferred writes"}
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def key(i=0):
    return make_key(f"deferred-{i}", fingerprint=FP)


def cache(tmp_path):
    return DiskCache(str(tmp_path / "cache"), fingerprint=FP)


def _held_writer():
    """Blocks the writer thread until the returned event is set: what is queued after
    this is certainly not written yet."""
    go, started = threading.Event(), threading.Event()
    deferred.submit(lambda: (started.set(), go.wait(10)))
    assert started.wait(10)
    return go


def test_a_deferred_store_is_queued_then_written_completely(tmp_path):
    c = cache(tmp_path)
    go = _held_writer()
    try:
        assert c.store(key(), b"code" * 50, {"symbol": "f"}, later=True)
        assert not os.path.exists(c.path_for(key()))           # not written while the writer is held
        assert deferred.pending() == 2
    finally:
        go.set()
    deferred.wait()
    assert deferred.pending() == 0
    # the file is an ordinary entry: a fresh DiskCache (another process's view) reads it
    assert cache(tmp_path).load(key()) == (b"code" * 50, {"symbol": "f"})
    assert not [n for n in os.listdir(os.path.dirname(c.path_for(key()))) if n.endswith(".tmp")]


def test_this_process_reads_its_queued_store(tmp_path):
    """load waits for the queued writes: a store followed by a load never misses."""
    c = cache(tmp_path)
    go = _held_writer()
    threading.Timer(0.2, go.set).start()                        # load blocks until the writer runs on
    assert c.store(key(1), b"one", {"n": 1}, later=True)
    assert c.load(key(1)) == (b"one", {"n": 1})
    assert c.info()["entries"] == 1 and c.info()["stores"] == 1


def test_clear_after_a_queued_store_leaves_nothing(tmp_path):
    c = cache(tmp_path)
    go = _held_writer()
    threading.Timer(0.2, go.set).start()
    c.store(key(2), b"two", {}, later=True)
    assert c.clear() == 1                                        # the queued entry is written, then removed
    deferred.wait()
    assert c.load(key(2)) is None and c.info()["entries"] == 0


def test_bad_input_is_refused_at_the_call_not_on_the_writer(tmp_path):
    c = cache(tmp_path)
    for bad in [lambda: c.store(key(), "text", {}, later=True),
                lambda: c.store(key(), b"x", {"nan": float("nan")}, later=True)]:
        try:
            bad()
        except TypeError:
            pass
        else:
            raise AssertionError("no TypeError")
    assert deferred.pending() == 0


def test_a_failing_job_does_not_stop_the_writer(tmp_path):
    deferred.submit(lambda: 1 / 0)
    c = cache(tmp_path)
    assert c.store(key(3), b"three", {}, later=True)
    deferred.wait()
    assert cache(tmp_path).load(key(3)) == (b"three", {})


def test_the_queue_is_written_before_the_process_exits(tmp_path):
    """A process that stores later and exits at once leaves the complete entry (atexit)."""
    code = textwrap.dedent(f"""
        import sys, threading
        sys.path.insert(0, {ROOT!r})
        from jitgrad.cache import deferred
        from jitgrad.cache.disk import DiskCache, make_key
        fp = {FP!r}
        c = DiskCache({str(tmp_path / "cache")!r}, fingerprint=fp)
        go = threading.Event()
        deferred.submit(lambda: go.wait(0.3))     # the write is still queued at exit
        c.store(make_key("deferred-4", fingerprint=fp), b"four" * 1000, {{"k": 4}}, later=True)
    """)
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    assert cache(tmp_path).load(key(4)) == (b"four" * 1000, {"k": 4})


def test_the_compilers_store_is_deferred_and_complete(tmp_path, monkeypatch):
    """A compile in a fresh cache: the kernel entry is queued, and once written a second
    lookup (memory cleared) loads it from disk."""
    import numpy as np
    import jitgrad as tf
    from jitgrad import compiler
    monkeypatch.setenv("JITGRAD_CACHE_DIR", str(tmp_path / "kc"))
    disk.set_enabled(True)
    queued = []
    real = DiskCache.store
    monkeypatch.setattr(DiskCache, "store", lambda self, k, p, m, later=False:
                        queued.append(later) or real(self, k, p, m, later))
    try:
        g = tf.Graph()
        with g.as_default():
            x = tf.compat.v1.placeholder(tf.float32, [64])
            y = tf.reduce_sum(x * x + 3.0)
        xv = np.arange(64, dtype=np.float32) / 8
        compiler.clear_cache()
        with tf.compat.v1.Session(graph=g) as s:
            assert np.isclose(s.run(y, {x: xv}), float(np.sum(xv.astype(np.float64) ** 2 + 3)), rtol=1e-6)
        assert queued and all(queued)                   # every store of the compile was deferred
        compiler.clear_cache()
        with tf.compat.v1.Session(graph=g) as s:
            assert np.isclose(s.run(y, {x: xv}), float(np.sum(xv.astype(np.float64) ** 2 + 3)), rtol=1e-6)
        assert tf.cache_info().disk_hits == 1 and tf.cache_info().compiles == 0
    finally:
        disk.set_enabled(None)
        compiler.clear_cache()
