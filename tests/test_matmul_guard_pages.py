"""The GEMM and skinny kernels touch no memory outside their operands, C and workspace.

Each buffer is placed flush against an inaccessible (PROT_NONE) page -- ending at it,
or starting right after one -- so any read or write past either end faults instead of
silently reading a neighbour's bytes.  Shapes aim at the codegen-30 paths that compute
addresses near the ends: row-major A packed through the in-register transpose (VW-wide
loads per row), masked edge-tile stores through the edge buffer (vectors that start
before C's end and reach past it), the short-row-tile micro-kernel (M % MR rows, GEMMs
of >= 2^26 flops), transposed-B packs with K blocks shorter than a vector, short
constant K, and the skinny C = A^T B (scalar column tails, JC chunks).  Masked-off
lanes must not fault (AVX masked moves suppress faults there).  The results are also
the bits of the same call on ordinary numpy buffers, within the dot-product bound.
"""
import ctypes
import itertools
import mmap
import sys

import numpy as np
import pytest

from jitgrad.codegen import matmul_skinny as ms, target as tg
from test_matmul_kernel import TARGETS, Case, check, compile_cases
from test_matmul_skinny import Case as SkinnyCase

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mmap / mprotect guard pages")

_PAGE = mmap.PAGESIZE


class _Guarded:
    """Copies of arrays between two PROT_NONE pages, flush against one of them."""

    def __init__(self):
        self._maps = []
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)

    def copy(self, arr, at_end):
        pages = -(-arr.nbytes // _PAGE) or 1
        m = mmap.mmap(-1, (pages + 2) * _PAGE)
        self._maps.append(m)
        base = ctypes.addressof(ctypes.c_char.from_buffer(m))
        for page in (base, base + (pages + 1) * _PAGE):
            assert self._libc.mprotect(page, _PAGE, 0) == 0, ctypes.get_errno()
        off = _PAGE + (pages * _PAGE - arr.nbytes if at_end else 0)
        out = np.frombuffer(m, dtype=arr.dtype, count=arr.size, offset=off).reshape(arr.shape)
        out[...] = arr
        return out


def _cases(t):
    rng = np.random.default_rng(3)
    gemm, skinny = [], []
    for dt in ("float32", "float64"):
        cfg = t.matmul_config(dt)
        mr, vw, nr = cfg["mr"], cfg["vw"], cfg["nr"]
        # (M, N, K): edge tiles and short K; wide N (A packed, whole and partial panels,
        # K = 33 and 300: the transposing pack and its scalar tail); 257 x 784 x 512
        # (>= 2^26 flops, a short last row tile on 8- and 12-row kernels); N = 1
        for M, N, K in [(mr + 1, 10, 17), (2 * mr + mr // 3, 3, 5), (7, vw + 1, 33), (13, 1, 16),
                        (3, nr + 5, 2), (1, 1, 1), (3 * mr + 1, 9 * nr + 3, 33),
                        (5 * mr + 2, 5 * nr + 1, 300), (257, 784, 512), (9, 4 * nr + 1, vw + 3)]:
            # two of the four transpose forms per shape, each form on half the shapes
            # (compiling dominates this test's time)
            forms = list(itertools.product((False, True), repeat=2))
            for ta, tb in (forms[(M + N) % 4], forms[(M + N + 2) % 4]):
                gemm.append(Case(dt, 1, M, N, K, ta, tb, False, False, rng, config=cfg))
        gemm.append(Case(dt, 3, 13, 10, 17, False, True, False, True, rng, config=cfg))
        for M, N, K in [(37, 3, 19), (300, 7, 33), (2 * vw + 3, 2, 5), (784, 10, 257)]:
            if ms.skinny_plan(dt, 1, M, N, K, True, False, cfg) is not None:
                skinny.append(SkinnyCase(dt, M, N, K, rng, cfg))
    return gemm, skinny


@pytest.mark.parametrize("level", sorted(TARGETS) + ["host"])
def test_no_access_outside_the_buffers(level):
    t = tg.get() if level == "host" else tg.get(TARGETS[level])
    if t.missing_on_host():
        pytest.skip("the host cannot run this target's code")
    gemm, skinny = _cases(t)
    assert len(skinny) >= 3
    engine = compile_cases(gemm + skinny, t)
    guard = _Guarded()
    for at_end in (True, False):
        for c in gemm:
            ref = c.run()
            A, B = c.A, c.B
            c.A, c.B = guard.copy(A, at_end), guard.copy(B, at_end)
            got = c.run(C=guard.copy(c.new_out(), at_end), work=guard.copy(c.new_work(), at_end))
            c.A, c.B = A, B
            check(c, got)
            assert got.tobytes() == ref.tobytes(), c
        for c in skinny:
            ref = c.run_skinny()
            got = c.run_skinny(C=guard.copy(c.new_out(), at_end),
                               A=guard.copy(c.A, at_end), B=guard.copy(c.B, at_end))
            check(c, got)
            assert got.tobytes() == ref.tobytes(), c
    del engine
