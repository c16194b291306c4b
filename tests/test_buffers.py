"""Recycled output memory (jitgrad/buffers.py): large results reuse pooled blocks, but
never one that a caller (or any view) still refers to."""
import threading

import numpy as np
import pytest

import jitgrad as tf
from jitgrad import buffers

N = buffers.RECYCLE_MIN_BYTES // 4 + 1000      # float32 elements: a recycled output


@pytest.fixture
def run():
    tf.clear_cache()
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [N])
        y = x * 2.0 + 1.0        # exact in float32 for the values used
    sess = tf.compat.v1.Session(graph=g)
    yield lambda v: sess.run(y, {x: np.full(N, v, np.float32)})
    sess.close()
    tf.clear_cache()


def test_kept_results_are_never_overwritten(run):
    r1 = run(0.0)
    r2 = run(1.0)
    r3 = run(2.0)
    assert not np.shares_memory(r1, r2) and not np.shares_memory(r2, r3) and not np.shares_memory(r1, r3)
    np.testing.assert_array_equal(r1, np.full(N, 1.0, np.float32))
    np.testing.assert_array_equal(r2, np.full(N, 3.0, np.float32))
    np.testing.assert_array_equal(r3, np.full(N, 5.0, np.float32))


def test_a_dropped_result_is_reused(run):
    r1 = run(0.0)
    addr = r1.ctypes.data
    del r1
    r2 = run(1.0)
    assert r2.ctypes.data == addr          # the pool handed the same block out again
    np.testing.assert_array_equal(r2, np.full(N, 3.0, np.float32))


def test_a_view_keeps_its_block(run):
    r1 = run(0.0)
    part = r1[5:10]
    col = r1.reshape(-1, 1)[:3]
    del r1
    r2 = run(1.0)
    assert not np.shares_memory(part, r2) and not np.shares_memory(col, r2)
    np.testing.assert_array_equal(part, [1.0] * 5)
    np.testing.assert_array_equal(col.ravel(), [1.0] * 3)


def test_concurrent_runs_get_their_own_blocks(run):
    results, errors = {}, []

    def worker(k):
        try:
            for i in range(20):
                v = float(k + i % 3)
                out = run(v)
                expected = np.float32(v * 2 + 1)
                if not np.all(out == expected):
                    errors.append((k, i))
            results[k] = out
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(results) == 3


def test_pool_is_bounded_and_cleared(run):
    kept = [run(float(i)) for i in range(buffers.MAX_BLOCKS_PER_SIZE + 3)]
    info = buffers.info()
    assert info["blocks"] <= buffers.MAX_BLOCKS_PER_SIZE and info["free"] == 0
    assert info["bytes"] <= buffers.MAX_POOLED_BYTES
    for i, r in enumerate(kept):                   # the ones beyond the cap are plain arrays
        assert r[0] == i * 2 + 1
    del kept
    assert buffers.info()["free"] == buffers.info()["blocks"] > 0
    tf.clear_cache()
    assert buffers.info() == {"blocks": 0, "free": 0, "bytes": 0}


def test_small_outputs_are_plain_arrays():
    a = buffers.empty((10,), np.float32)
    assert a.base is None and a.shape == (10,)
    b = buffers.empty((buffers.RECYCLE_MIN_BYTES // 8, 2), np.float64)
    assert b.shape == (buffers.RECYCLE_MIN_BYTES // 8, 2) and b.dtype == np.float64 and b.flags.c_contiguous
    buffers.release()
