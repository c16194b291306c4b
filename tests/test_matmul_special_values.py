"""NaN and +-inf operands through the matmul kernel's store paths (codegen-30 changed
them: masked edge tiles go through the edge buffer and a row loop, packed A panels are
stored under a constant lane mask, a short constant K keeps its k loop).  Shapes cover
full tiles, short rows and columns (N = 10: every tile an edge tile), packed and in-place
A, K in one block, a short constant K and K split into several blocks (first block
overwrites C, later ones add).  Expected values are numpy's float64 product: the same
NaN positions, the same infinities, finite values within the dot-product error bound,
and every row split gives the same bits."""
import numpy as np
import pytest

from jitgrad.codegen import matmul as mm
from jitgrad.codegen import target as tg
from test_matmul_kernel import Case, compile_cases

SHAPES = ((24, 64, 40, False, False), (29, 10, 10, False, False), (37, 45, 19, True, False),
          (13, 70, 300, False, True), (256, 10, 33, True, False), (40, 96, 7, False, False))


def _poison(case, rng):
    """A few NaN / +inf / -inf entries in A and B, and a zero row in B, so that some
    sums meet inf * 0 (NaN) and inf - inf (NaN), and others stay +-inf."""
    for X in (case.A, case.B):
        flat = X.reshape(-1)
        for v in (np.nan, np.inf, -np.inf, np.inf):
            flat[rng.integers(flat.size)] = v


@pytest.mark.parametrize("cpu", ["icelake-server", "haswell"])
@pytest.mark.parametrize("kc", [None, 16])
def test_nan_and_inf_propagate_as_numpy(cpu, kc):
    t = tg.get(cpu)
    cfg = dict(t.matmul_config("float32"))
    if kc:
        cfg["kc"] = kc            # several K blocks for K > 16
    rng = np.random.default_rng(29)
    cases = [Case("float32", 1, M, N, K, ta, tb, False, False, rng, config=cfg)
             for (M, N, K, ta, tb) in SHAPES]
    for c in cases:
        _poison(c, rng)
    engine = compile_cases(cases, t)
    if t.missing_on_host():
        del engine
        return
    for c in cases:
        A = c.A[0].astype(np.float64)
        B = c.B[0].astype(np.float64)
        A, B = (A.T if c.ta else A), (B.T if c.tb else B)
        with np.errstate(invalid="ignore", over="ignore"):
            ref = A @ B
            bound = (c.K + 1) * np.finfo(np.float32).eps * (np.abs(np.nan_to_num(A)) @ np.abs(np.nan_to_num(B)))
        got = c.run()[0]
        nan = np.isnan(ref)
        assert nan.any() and np.isinf(ref).any(), c        # the poison reached some sums
        np.testing.assert_array_equal(np.isnan(got), nan, err_msg=repr(c))
        inf = np.isinf(ref)
        np.testing.assert_array_equal(got[inf], ref[inf], err_msg=repr(c))
        fin = ~(nan | inf)
        assert (np.abs(got[fin] - ref[fin]) <= bound[fin]).all(), c
        assert np.array_equal(c.run_in_pieces([1, c.M // 2])[0], got, equal_nan=True), c
    del engine


def test_short_constant_k_runs_the_unrolled_loop():
    """K = 10 in one K block (W3's dH = dY @ W2^T): the micro-kernel keeps its unrolled
    k loop (uk) and does the last K % _UNROLL_K updates in line, rather than one block
    of all K updates."""
    from llvmlite import ir
    t = tg.get("icelake-server")
    module = ir.Module()
    fn = mm.emit_matmul(module, "mm", "float32", 1, 256, 512, 10, False, True, 0, 0,
                        config=t.matmul_config("float32"))
    names = [blk.name for blk in fn.blocks]
    assert any(n.startswith("uk.body") for n in names)
    assert not any(n.startswith("ukr") for n in names)    # the remainder is in line
