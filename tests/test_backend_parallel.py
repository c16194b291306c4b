"""jitgrad/codegen/backend.py: each of a kernel's matmul functions is a unit of its
own, optimised and emitted on worker threads; the objects are bundled into one
payload.  The results must not depend on it: same numbers as the numpy reference,
and the same object bytes and outputs whatever the number of compile threads."""
import hashlib
import os
import re

import numpy as np
import pytest

import jitgrad as tf
from jitgrad import cache, compiler
from jitgrad.cache import native
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


def _defined(ir_text):
    return re.findall(r'^define [^@]*@"?([^"(]+_mm\d+(?:_pack)?)"?\(', ir_text, re.M)


def test_split_moves_each_matmul_function_to_a_unit_and_declares_it():
    g, fetches, feed, _ = _mlp()
    with tf.compat.v1.Session(graph=g) as s:
        ir_text = s.explain(fetches, feed).unoptimised_ir
    defined = _defined(ir_text)
    assert len(defined) >= 2
    main, units = backend.split_units(ir_text)
    assert [_defined(u) for u in units] == [[name] for name in defined]   # one each, in order
    for name in defined:
        assert re.search(r'^declare [^\n]*@"?%s"?\(' % re.escape(name), main, re.M), name
        assert not re.search(r'^define [^\n]*@"?%s"?\(' % re.escape(name), main, re.M), name
    assert backend.split_units("define void @f() {\n  ret void\n}") is None


def _kernel():
    (k,) = {id(k): k for k in compiler._kernels.values()}.values()
    return k


@pytest.mark.parametrize("threads", [("1", "2", "2"), ("3", "1")])
def test_object_bytes_and_outputs_independent_of_compile_threads(monkeypatch, no_disk_cache, threads):
    g, fetches, feed, want = _mlp()
    results, objects = [], set()
    for n in threads:
        monkeypatch.setenv("JITGRAD_COMPILE_THREADS", n)
        compiler.clear_cache()
        with tf.compat.v1.Session(graph=g) as s:
            got = s.run(fetches, feed)
            k = s.explain(fetches, feed)
        assert k.source == "memory"          # compiled by the run above, not again
        for w, v in zip(want, got):
            np.testing.assert_allclose(v, w, rtol=2e-4, atol=1e-6)
        results.append([np.asarray(v).tobytes() for v in got])
        objects.add(hashlib.sha256(_kernel().obj).hexdigest())
    assert all(r == results[0] for r in results)      # bit-identical outputs
    assert len(objects) == 1                          # the same object bytes for every thread count


def test_payload_bundles_one_object_per_unit_and_explain_links_their_ir(no_disk_cache):
    g, fetches, feed, _ = _mlp()
    compiler.clear_cache()
    with tf.compat.v1.Session(graph=g) as s:
        s.run(fetches, feed)
        report = s.explain(fetches, feed)
    k = _kernel()
    objects = native.unpack(k.obj)
    names = _defined(report.unoptimised_ir)
    assert len(objects) == 1 + len(names) == k.timings["units"]
    assert all(o[:4] == b"\x7fELF" for o in objects)
    for name in names + [k.meta["name"]]:            # one module's text, every function defined once
        assert len(re.findall(r'^define [^\n]*@"?%s"?\(' % re.escape(name), report.ir, re.M)) == 1, name
    assert "call" in report.asm and names[0] in report.asm


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
