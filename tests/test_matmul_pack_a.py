"""Packing a row-major A (matmul._emit_pack_a): whole MR-row panels are copied VW k's
at a time through an in-register transpose (_emit_pack_a_rows_vec), the rest (the
last K % VW k's, the bottom panel of fewer than MR rows) element by element.

Packing only moves values, so a GEMM with A packed must give the bits of the same
GEMM reading A in place (config pack_a=False: same micro-kernel, same sums), for
every target level's blocking; also within the float64 reference's bound, and any
row split gives the same bits.  Shapes: whole panels with and without a bottom
edge, K below / at / past the vector width and across several K blocks, N wide
enough that A is packed by default (W3's X @ W1 among them).
"""
import numpy as np
import pytest

from jitgrad.codegen import matmul as mm
from test_matmul_kernel import TARGETS, Case, check, compile_cases

SHAPES = [(256, 512, 784), (41, 300, 50), (84, 200, 16), (30, 200, 15), (13, 140, 33), (5, 150, 40)]


@pytest.mark.parametrize("level", sorted(TARGETS) + ["host"])
def test_packed_a_matches_in_place_a(level):
    """(the host: its own blocking, e.g. icelake-server's 12-row tile, fewer rows than lanes)"""
    from jitgrad.codegen import target as tg
    t = tg.get() if level == "host" else tg.get(TARGETS[level])
    rng = np.random.default_rng(17)
    pairs = []
    for dt in ("float32", "float64"):
        cfg = t.matmul_config(dt)
        for M, N, K in SHAPES:
            packed = Case(dt, 1, M, N, K, False, False, False, False, rng, config=dict(cfg, pack_a=True))
            inplace = Case(dt, 1, M, N, K, False, False, False, False, rng, config=dict(cfg, pack_a=False))
            inplace.A, inplace.B = packed.A, packed.B
            pairs.append((packed, inplace))
    # the default plan packs A for these shapes (the path under test is the one W3 takes)
    cfg = t.matmul_config("float32")
    assert mm._plan("float32", 256, 512, 784, False, cfg).pack_a
    engine = compile_cases([c for p in pairs for c in p], t)
    if t.missing_on_host():
        return      # compiled, not run: the host cannot execute this target's code
    for packed, inplace in pairs:
        got = packed.run()
        check(packed, got)
        assert got.tobytes() == inplace.run().tobytes(), f"{packed!r}: not the in-place bits"
        assert packed.run_in_pieces([(packed.M // 3) or 1]).tobytes() == got.tobytes(), packed
    del engine
