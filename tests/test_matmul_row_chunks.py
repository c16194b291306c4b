"""A parallel GEMM's rows are taken in matmul.row_chunks' chunks (a few large ones, then
small ones: lower_matmul.py computes each chunk's rows from its counter index).  Every
row of C must be computed exactly once whatever the thread count: the result equals
numpy's (float64 reference) and is bit-identical on 1, 2 and 3 threads, for shapes whose
chunks have large and small parts, a short last chunk, odd M, N from 1 to 33, K = 1 and
a large K.  The kernel-level test runs the chunks the planner chose, in shuffled order,
against one call of emit_matmul's kernel."""
import numpy as np
import pytest

import jitgrad as tf
from jitgrad.codegen import matmul as mm, parallel, target as tg
from jitgrad.codegen.fusion_plan import PAR_MIN_FLOPS, PAR_MIN_FLOPS_JOINED



def _operands(rng, M, N, K, ta, dtype):
    """A, B and (the exact product in float64, the rounding bound of a K-term float
    sum of products in ``dtype``: K eps |A| |B|, with a factor of 2 to spare)."""
    A = rng.standard_normal((K, M) if ta else (M, K)).astype(dtype)
    B = rng.standard_normal((K, N)).astype(dtype)
    a, b = (A.T if ta else A).astype(np.float64), B.astype(np.float64)
    bound = 2 * K * np.finfo(dtype).eps * (np.abs(a) @ np.abs(b))
    return A, B, (a @ b, bound)


def _check(got, want):
    exact, bound = want
    assert got.shape == exact.shape
    assert (np.abs(got - exact) <= bound).all(), np.max(np.abs(got - exact) - bound)


def _run_threads(g, fetch, feeds):
    got = {}
    with tf.compat.v1.Session(graph=g) as s:
        try:
            for t in (1, 2, 3):
                parallel.set_num_threads(t)
                out = s.run(fetch, feeds)
                got[t] = [np.asarray(o) for o in out] if isinstance(fetch, list) else np.asarray(out)
        finally:
            parallel.set_num_threads(None)
    return got


# (M, N, K, transpose_a): each above PAR_MIN_FLOPS alone, so its rows are split
_ALONE = [
    (784, 512, 256, True),     # W3's dW1: 3 chunks of 136 rows, then 64-row ones (AVX-512)
    (999, 33, 520, False),     # odd M, N one past a vector of float32 on AVX-512 (x2)
    (1001, 17, 1000, True),    # odd M, transposed A, large K (several K blocks)
    (517, 64, 509, False),     # odd K, M a few rows past a large chunk
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("M, N, K, ta", _ALONE)
def test_split_gemm_matches_numpy_on_any_thread_count(dtype, M, N, K, ta):
    assert 2 * M * N * K >= PAR_MIN_FLOPS
    rng = np.random.default_rng(M + N + K)
    A, B, want = _operands(rng, M, N, K, ta, dtype)
    g = tf.Graph()
    with g.as_default():
        pa = tf.compat.v1.placeholder(dtype, A.shape)
        pb = tf.compat.v1.placeholder(dtype, B.shape)
        c = tf.matmul(pa, pb, transpose_a=ta)
    got = _run_threads(g, c, {pa: A, pb: B})
    assert got[1].tobytes() == got[2].tobytes() == got[3].tobytes()
    _check(got[1], want)


# (M, N, K): small GEMMs split across the threads a big GEMM of the same kernel woke
_JOINED = [(1025, 1024, 1), (1023, 1, 1030), (513, 31, 67), (1027, 9, 130), (255, 33, 129)]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_small_split_gemms_next_to_a_big_one_match_numpy(dtype):
    rng = np.random.default_rng(3)
    X, W, big_want = _operands(rng, 256, 512, 784, False, dtype)
    g = tf.Graph()
    feeds, wants, outs = {}, [big_want], []
    with g.as_default():
        px = tf.compat.v1.placeholder(dtype, X.shape)
        pw = tf.compat.v1.placeholder(dtype, W.shape)
        feeds.update({px: X, pw: W})
        outs.append(tf.matmul(px, pw))
        for M, N, K in _JOINED:
            assert 2 * M * N * K >= PAR_MIN_FLOPS_JOINED or N == 1
            A, B, want = _operands(rng, M, N, K, False, dtype)
            pa = tf.compat.v1.placeholder(dtype, A.shape)
            pb = tf.compat.v1.placeholder(dtype, B.shape)
            feeds.update({pa: A, pb: B})
            outs.append(tf.matmul(pa, pb))
            wants.append(want)
    got = _run_threads(g, outs, feeds)
    for i, want in enumerate(wants):
        assert got[1][i].tobytes() == got[2][i].tobytes() == got[3][i].tobytes(), i
        _check(got[1][i], want)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("level", ["avx512", "avx2", "x86-64"])
def test_row_chunks_tile_the_rows(dtype, level):
    cfg = tg.Target("cpu", "", level, False).matmul_config(dtype)
    for M in (1, 7, 16, 33, 100, 257, 784, 999, 1001, 4097):
        rc = mm.row_chunks(dtype, M, 64, 64, False, config=cfg)
        bounds = mm.chunk_bounds(rc, M)
        rows = np.zeros(M, int)
        for lo, hi in bounds:
            assert 0 <= lo < hi <= M
            rows[lo:hi] += 1
        assert (rows == 1).all(), (M, rc)
        # the formula lower_matmul.py emits for chunk i's first row
        for i, (lo, _) in enumerate(bounds):
            r0 = i * rc.big if i < rc.nbig else rc.nbig * rc.big + (i - rc.nbig) * rc.small
            assert r0 == lo, (M, rc, i)
