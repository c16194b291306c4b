"""C = A^T @ B with a narrow C (codegen/matmul_skinny.py: W3's dW2 = H^T dY).

Kernel level: for each target level's blocking, the skinny function and the packed
GEMM (emit_matmul, same shape and config) are compiled side by side; the skinny
results are bit-identical to the packed GEMM's (the sums it replaces), within the
float64 reference's dot-product bound, unchanged by any split of C's rows (and a
call writes only its rows), and NaN / inf propagate as in numpy.  Shapes cover
full column blocks, single-vector and scalar tails, chunks of C^T (JC columns),
K passes (KB) and several K blocks.
Graph level: tf.matmul(transpose_a=True) with a narrow output takes this path
(the kernel's IR calls it) and agrees with the interpreter.
"""
import ctypes

import numpy as np
import pytest

import jitgrad as tf
from jitgrad.codegen import matmul_skinny as ms
from test_differential import run_both, _no_disk  # noqa: F401
from test_matmul_kernel import TARGETS, Case as MatMulCase, compile_cases


class Case(MatMulCase):
    """The packed GEMM's case plus the skinny function for the same problem."""

    def __init__(self, dtype, M, N, K, rng, config):
        super().__init__(dtype, 1, M, N, K, True, False, False, False, rng, config=config)
        self.plan = ms.skinny_plan(dtype, 1, M, N, K, True, False, config)
        assert self.plan is not None, self

    def emit(self, module, name):
        super().emit(module, name)
        ms.emit_skinny(module, name + "_skinny", self.dtype, self.plan)

    def bind(self, engine):
        super().bind(engine)
        P = ctypes.c_void_p
        self.skinny = ctypes.CFUNCTYPE(None, P, P, P, ctypes.c_int64, ctypes.c_int64)(
            engine.get_function_address(self.name + "_skinny"))

    def run_skinny(self, C=None, lo=0, hi=None, A=None, B=None):
        C = self.new_out() if C is None else C
        A = self.A if A is None else A
        B = self.B if B is None else B
        self.skinny(A.ctypes.data, B.ctypes.data, C.ctypes.data, lo, self.M if hi is None else hi)
        return C


# (M, N, K): W3's dW2; full 2-vector blocks with vector and scalar tails; one vector
# and less (M < 2 VW); several JC chunks; K not a multiple of KB; several K blocks
# (K > KC: 300 = 2 x 150, 600 = 3 x 200); K = 1; N = 2 and N = the vector width; rows
# of C wider than a vector ending in a partial one (AVX2 float64's 5, 6, 9, 10; AVX-512
# float32's 20, 28), as many accumulators as registers allow (14 of 16, 30 of 32)
SHAPES = [(512, 10, 256), (37, 10, 19), (16, 3, 5), (20, 7, 33), (600, 5, 70), (97, 2, 300),
          (50, 9, 600), (40, 10, 1), (300, 16, 17), (33, 8, 257), (64, 4, 40), (9, 2, 7),
          (300, 20, 130), (70, 14, 300), (45, 30, 60), (128, 28, 9), (50, 6, 33)]


def _cases(t):
    rng = np.random.default_rng(21)
    out = []
    for dt in ("float32", "float64"):
        cfg = t.matmul_config(dt)
        for M, N, K in SHAPES:
            if ms.skinny_plan(dt, 1, M, N, K, True, False, cfg) is not None:
                out.append(Case(dt, M, N, K, rng, cfg))
    return out


@pytest.mark.parametrize("level", sorted(TARGETS) + ["host"])
def test_bit_identical_to_packed_gemm_and_within_bound(level):
    from jitgrad.codegen import target as tg
    from test_matmul_kernel import check
    t = tg.get() if level == "host" else tg.get(TARGETS[level])
    cases = _cases(t)
    assert len(cases) >= 4, "shapes up to the vector width take the skinny form"
    assert any(c.N > c.plan.vw for c in cases), "and rows wider than a vector ending in a partial one"
    engine = compile_cases(cases, t)
    if t.missing_on_host():
        return      # compiled, not run: the host cannot execute this target's code
    rng = np.random.default_rng(3)
    for c in cases:
        got = c.run_skinny()
        check(c, got)
        assert got.tobytes() == c.run().tobytes(), f"{c!r}: not the packed GEMM's bits"
        assert got.tobytes() == c.run_skinny().tobytes(), c
        # row splits: same bits, and each call writes only its rows
        parts = c.new_out()
        cuts = sorted({0, c.M} | {int(x) for x in rng.integers(1, c.M, size=3)})
        for lo, hi in zip(cuts, cuts[1:]):
            one = c.run_skinny(lo=lo, hi=hi)
            assert np.isnan(np.delete(one[0], np.s_[lo:hi], axis=0)).all(), f"{c!r} wrote outside [{lo}, {hi})"
            c.run_skinny(C=parts, lo=lo, hi=hi)
        assert parts.tobytes() == got.tobytes(), c
        assert np.isnan(c.run_skinny(lo=c.M, hi=c.M)).all()
        assert c.run_skinny(lo=0, hi=c.M + 50).tobytes() == got.tobytes()
    del engine


def test_nan_and_inf_propagate_as_numpy():
    from jitgrad.codegen import target as tg
    cases = _cases(tg.get())
    engine = compile_cases(cases)
    rng = np.random.default_rng(8)
    for c in cases:
        A, B = c.A.copy(), c.B.copy()
        for X in (A, B):
            flat = X.reshape(-1)
            for v in (np.nan, np.inf, -np.inf):
                flat[rng.integers(flat.size)] = v
        got = c.run_skinny(A=A, B=B)
        with np.errstate(invalid="ignore"):
            ref = A[0].astype(np.float64).T @ B[0].astype(np.float64)
        np.testing.assert_array_equal(np.isnan(got[0]), np.isnan(ref), err_msg=repr(c))
        inf = np.isinf(ref)
        np.testing.assert_array_equal(got[0][inf], ref[inf], err_msg=repr(c))
    del engine


def test_plan_applies_only_to_its_form():
    from jitgrad.codegen import target as tg
    cfg = tg.get().matmul_config("float32")
    vw = cfg["vw"]
    assert ms.skinny_plan("float32", 1, 512, 10, 256, True, False, cfg) is not None
    assert ms.skinny_plan("float32", 1, 512, 10, 256, False, False, cfg) is None      # A not transposed
    assert ms.skinny_plan("float32", 1, 512, 10, 256, True, True, cfg) is None        # B transposed
    assert ms.skinny_plan("float32", 2, 512, 10, 256, True, False, cfg) is None       # batched
    assert ms.skinny_plan("float32", 1, 512, vw + 1, 256, True, False, cfg) is not None   # a partial last vector
    assert ms.skinny_plan("float32", 1, 512, 2 * vw, 256, True, False, cfg) is None  # whole vectors: packed GEMM
    assert ms.skinny_plan("float32", 1, 512, cfg["regs"] - 1, 256, True, False, cfg) is None  # accumulators > registers
    assert ms.skinny_plan("float32", 1, 512, 1, 256, True, False, cfg) is None        # a matvec
    assert ms.skinny_plan("int32", 1, 512, 10, 256, True, False, cfg) is None


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("M,N,K", [(512, 10, 256), (45, 7, 130)])
def test_session_compiled_vs_interpreter(dt, M, N, K):
    rng = np.random.default_rng(M + N)
    g = tf.Graph()
    with g.as_default():
        a = tf.compat.v1.placeholder(dt, (K, M))
        b = tf.compat.v1.placeholder(dt, (K, N))
        c = tf.matmul(a, b, transpose_a=True)
    feed = {a: rng.standard_normal((K, M)).astype(dt), b: rng.standard_normal((K, N)).astype(dt)}
    (x,), (y,) = run_both(g, [c], feed)
    assert y.dtype == x.dtype == dt
    A, B = feed[a].T.astype(np.float64), feed[b].astype(np.float64)
    bound = 2 * (K + 1) * np.finfo(dt).eps * (np.abs(A) @ np.abs(B))
    assert (np.abs(y - A @ B) <= bound).all() and (np.abs(x - A @ B) <= bound).all()
    # the skinny form plans no GEMM workspace (the packed GEMM does): narrow C (skinny_plan)
    # the Session compiles for tg.current(): JITGRAD_TARGET_CPU's CPU when the suite runs for one
    from jitgrad.codegen import target as tg
    cfg = tg.current().matmul_config(np.dtype(dt).name)
    skinny = ms.skinny_plan(np.dtype(dt).name, 1, M, N, K, True, False, cfg)
    assert skinny is not None or N > cfg["vw"]
    text = str(tf.compat.v1.Session(graph=g).explain([c], feed))
    assert "-- buffers" in text and ("matmul workspace" not in text) == (skinny is not None)
