"""The short last row tile of a large GEMM (matmul._edge_rows / _emit_tile_sums): M % MR
rows, at most a third of MR, run a micro-kernel of that many rows instead of the
full one on clamped rows.

Each C element is the same sum either way, so the GEMM with it must give the bits of
the same GEMM without it (the threshold lifted while emitting), for every target
level's blocking and the host's, packed and in-place A, transposed or not; also
within the float64 reference's bound, and row splits give the same bits (a split
puts short tiles inside the range too).  Small shapes get it by lowering the flop
threshold while emitting; W3's X @ W1 gets it by default.
"""
import numpy as np
import pytest

from jitgrad.codegen import matmul as mm
from test_matmul_kernel import TARGETS, Case, check, compile_cases


class Toggle(Case):
    """A Case emitted with the short-tile kernel forced on (any size) or off."""

    def __init__(self, on, *a, **k):
        super().__init__(*a, **k)
        self.on = on

    def emit(self, module, name):
        saved = mm._EDGE_MIN_FLOPS
        mm._EDGE_MIN_FLOPS = 0 if self.on else 1 << 62
        try:
            super().emit(module, name)
        finally:
            mm._EDGE_MIN_FLOPS = saved


# (M, N, K, trans_a, pack_a): M % MR small for MR = 12 (icelake), 8 (AVX-512), 6 (AVX2 / SSE2)
SHAPES = [(25, 70, 40, False, True), (49, 140, 33, True, True), (97, 40, 300, False, False),
          (13, 17, 9, True, False), (74, 150, 20, False, True), (121, 33, 64, True, True)]


@pytest.mark.parametrize("level", sorted(TARGETS) + ["host"])
def test_short_tile_kernel_gives_the_full_kernels_bits(level):
    from jitgrad.codegen import target as tg
    t = tg.get() if level == "host" else tg.get(TARGETS[level])
    rng = np.random.default_rng(29)
    pairs = []
    for dt in ("float32", "float64"):
        cfg = t.matmul_config(dt)
        for M, N, K, ta, pack_a in SHAPES:
            c = dict(cfg, pack_a=pack_a)
            if not (M % c["mr"] and M % c["mr"] <= c["mr"] // 3):
                continue      # no short last tile at this blocking
            on = Toggle(True, dt, 1, M, N, K, ta, False, False, False, rng, config=c)
            off = Toggle(False, dt, 1, M, N, K, ta, False, False, False, rng, config=c)
            off.A, off.B = on.A, on.B
            pairs.append((on, off))
    assert len(pairs) >= 4, "shapes with a short last tile at this blocking"
    engine = compile_cases([c for p in pairs for c in p], t)
    if t.missing_on_host():
        return      # compiled, not run: the host cannot execute this target's code
    for on, off in pairs:
        got = on.run()
        check(on, got)
        assert got.tobytes() == off.run().tobytes(), f"{on!r}: not the full kernel's bits"
        assert on.run_in_pieces([on.M // 2 + 1]).tobytes() == got.tobytes(), on
    del engine


def test_only_large_gemms_with_a_short_last_tile_get_it():
    from jitgrad.codegen import target as tg
    cfg = dict(tg.get("icelake-server").matmul_config("float32"))
    assert cfg["mr"] == 12
    plan = mm._plan("float32", 256, 512, 784, False, cfg)
    assert mm._edge_rows(plan, 256, 512, 784) == 4             # W3's X @ W1
    assert mm._edge_rows(mm._plan("float32", 784, 512, 256, True, cfg), 784, 512, 256) == 4
    assert mm._edge_rows(mm._plan("float32", 264, 512, 784, False, cfg), 264, 512, 784) == 0   # no short tile
    assert mm._edge_rows(mm._plan("float32", 262, 512, 784, False, cfg), 262, 512, 784) == 0   # 10 rows: not short
    assert mm._edge_rows(mm._plan("float32", 256, 10, 512, False, cfg), 256, 10, 512) == 0     # small GEMM
