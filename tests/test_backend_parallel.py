"""jitgrad/codegen/backend.py: a kernel's matmul functions are optimised on worker
threads (split off into side modules, linked back before code generation).  The
results must not depend on it: same numbers as the single-threaded compile, and the
same object code run after run."""
import hashlib
import os
import re

import numpy as np
import pytest

import jitgrad as tf
from jitgrad import cache, compiler
from jitgrad.codegen import backend


def _mlp():
    rng = np.random.default_rng(3)
    feed_vals = [rng.standard_normal(s).astype(np.float32) * 0.1 for s in ((96, 70), (70, 40), (40, 10))]
    g = tf.Graph()
    with g.as_default():
        x, w1, w2 = (tf.compat.v1.placeholder(tf.float32, v.shape) for v in feed_vals)
        h = tf.nn.relu(tf.matmul(x, w1))
        loss = tf.reduce_mean(tf.square(tf.matmul(h, w2)))
        grads = tf.gradients(loss, [w1, w2])
    X, W1, W2 = (v.astype(np.float64) for v in feed_vals)
    H = np.maximum(X @ W1, 0)
    Z = H @ W2
    dZ = 2 * Z / Z.size
    want = [np.mean(Z ** 2), (X.T @ ((dZ @ W2.T) * (H > 0))), H.T @ dZ]
    return g, [loss] + grads, dict(zip((x, w1, w2), feed_vals)), want


@pytest.fixture
def no_disk_cache():
    cache.set_enabled(False)
    yield
    cache.set_enabled(None)


def test_split_moves_matmul_functions_and_declares_them():
    g, fetches, feed, _ = _mlp()
    with tf.compat.v1.Session(graph=g) as s:
        ir_text = s.explain(fetches, feed).unoptimised_ir
    defined = re.findall(r'^define [^@]*@"?([^"(]+_mm\d+(?:_pack)?)"?\(', ir_text, re.M)
    assert len(defined) >= 2
    for n_bins in (1, 3):     # 1: this thread optimises them all after the main module
        main, sides = backend.split_side_functions(ir_text, n_bins)
        assert 1 <= len(sides) <= n_bins
        moved = re.findall(r'^define [^@]*@"?([^"(]+_mm\d+(?:_pack)?)"?\(', "\n".join(sides), re.M)
        assert sorted(moved) == sorted(defined)       # every one moved, once: one pipeline for all
    for name in moved:
        assert re.search(r'^declare [^\n]*@"?%s"?\(' % re.escape(name), main, re.M), name
        assert not re.search(r'^define [^\n]*@"?%s"?\(' % re.escape(name), main, re.M), name
    assert backend.split_side_functions("define void @f() {\n  ret void\n}", 1) is None


def test_parallel_compile_same_numbers_and_deterministic(monkeypatch, no_disk_cache):
    g, fetches, feed, want = _mlp()
    results, objects = {}, {}
    for threads in ("1", "2", "2"):
        monkeypatch.setenv("JITGRAD_COMPILE_THREADS", threads)
        compiler.clear_cache()
        with tf.compat.v1.Session(graph=g) as s:
            got = s.run(fetches, feed)
            k = s.explain(fetches, feed)
        assert k.source == "memory"          # compiled by the run above, not again
        results.setdefault(threads, []).append([np.asarray(v).tobytes() for v in got])
        objects.setdefault(threads, set()).add(
            hashlib.sha256(next(iter(compiler._kernels.values())).obj).hexdigest())
    for w, v in zip(want, got):
        np.testing.assert_allclose(v, w, rtol=2e-4, atol=1e-6)
    assert results["1"][0] == results["2"][0] == results["2"][1]   # bit-identical outputs
    assert len(objects["2"]) == 1                                  # same object code each time


def test_compile_in_a_forked_child_after_the_parent_used_the_workers(monkeypatch, no_disk_cache):
    """The parent's worker threads do not survive fork: the child must not wait for them."""
    g, fetches, feed, want = _mlp()
    monkeypatch.setenv("JITGRAD_COMPILE_THREADS", "2")
    compiler.clear_cache()
    with tf.compat.v1.Session(graph=g) as s:
        s.run(fetches, feed)                     # the parent's pool exists now
    compiler.clear_cache()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:                                 # child: compile again, report, exit
        ok = b"0"
        try:
            with tf.compat.v1.Session(graph=g) as s:
                got = s.run(fetches, feed)
            ok = b"1" if np.allclose(got[0], want[0], rtol=2e-4) else b"0"
        finally:
            os.write(w, ok)
            os._exit(0)
    os.close(w)
    import select
    import signal
    ready, _, _ = select.select([r], [], [], 300)
    if not ready:                                # hung waiting for workers that do not exist
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    assert ready and os.read(r, 1) == b"1" and status == 0
