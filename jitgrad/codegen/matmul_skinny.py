"""C = A^T @ B for a narrow C (N up to a register file of accumulators), without packing: W3's dW2.

The packed GEMM (matmul.py) reads op(A) = A^T in place there: each k broadcasts MR
elements of one row of A, a row of A (M elements, 2 KiB in W3) away from the last
k's, so every rank-1 update waits for a new cache line (A comes from L3 there:
the dW1 GEMM before it streams 3 MB), and the one C vector per row has only N of
its lanes real.  W3's [512, 256]^T @ [256, 10] ran at ~25 GFLOP/s.  Here C is
computed transposed, as C^T = B^T A, in chunks of JC columns of C^T (rows of C)
whose sums stay in L1: a pass takes KB rows of A, and walks the chunk's columns in
blocks of NV vectors (N x NV accumulators in registers; per k, NV contiguous
loads of A's row k and N broadcasts of B's row k).  A pass so reads KB rows of A
front to back side by side: KB streams the prefetcher follows.  The chunk's sums
are then copied into C's rows.

Same bits as matmul.emit_matmul for the same shape and config: every C element is
summed with the same K blocks (matmul.k_blocks), within a block from zero
with k ascending by the same fused multiply-add (a*b is the same in either operand
order), and the blocks added to the running sum in order -- only which elements
share a vector differs.  Rows of C are independent, so any row split across
threads gives the same bits.

``emit_skinny`` emits ``void name(T* A, T* B, T* C, i64 lo, i64 hi)``: rows
[lo, hi) of C (M x N) from A (K x M) and B (K x N), both row-major.
"""
from collections import namedtuple

from llvmlite import ir

from .irutil import c64, for_range, gep_inbounds, loop_base, smin, splat
from .matmul import k_blocks
from .matvec import Emit

__all__ = ["Skinny", "skinny_plan", "emit_skinny", "declare_skinny", "define_skinny"]

# kc, nkb: the packed GEMM's K blocking (same bits); nv: vectors of C^T columns per block
Skinny = namedtuple("Skinny", "M N K kc nkb vw nv")


def skinny_plan(dtype, batch, M, N, K, ta, tb, config):
    """The Skinny for C = A^T B when this form applies (float, one matrix, A transposed,
    B not, M at least a vector, N from 2 to the vector width or a row of C ending in a
    partial vector, N accumulators fitting in registers), else None.

    Rows of whole vectors wider than one (N = 2 VW, 3 VW, ...) keep the packed GEMM,
    which uses all its lanes there.  Measured on znver4 (kernels alone, one thread,
    in-process alternation, M x K = 512 x 256 and 1024 x 1024; GFLOP/s packed ->
    skinny): partial last vectors gained everywhere -- AVX2 float64 N = 10: 15 -> 30,
    N = 6: 24 -> 30; AVX2 float32 N = 10: 56 -> 67; AVX-512 float32 N = 20: 48 -> 73,
    N = 24: 70 -> 87; AVX-512 float64 N = 10: 27 -> 40, N = 20: 21 -> 44 -- while
    whole rows of two vectors lost on AVX2 float64 (N = 8: 33 -> 24)."""
    if dtype not in ("float32", "float64") or batch != 1 or not ta or tb:
        return None
    vw, regs = config["vw"], config.get("regs", 16)
    if N < 2 or (N > vw and N % vw == 0) or M < vw or K < 1 or N + 2 > regs:
        return None
    # N accumulators, one A vector and one broadcast per C^T vector column; two columns
    # (JW = 2 VW) when they fit: two independent loads per k for N broadcasts
    nv = 2 if 2 * N + 3 <= regs and M >= 2 * vw else 1
    kc, nkb = k_blocks(dtype, M, N, K, True, config)
    return Skinny(M, N, K, kc, nkb, vw, nv)


def emit_skinny(module, name, dtype, plan):
    return define_skinny(declare_skinny(module, name, dtype), dtype, plan)


def declare_skinny(module, name, dtype):
    """emit_skinny's function, declared (no body yet; as matmul.declare_matmul)."""
    T = ir.FloatType() if dtype == "float32" else ir.DoubleType()
    Tp, I64 = T.as_pointer(), ir.IntType(64)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [Tp, Tp, Tp, I64, I64]), name=name)
    fn.attributes.add("nounwind")
    for arg, nm in zip(fn.args, ("A", "B", "C", "lo", "hi")):
        arg.name = nm
    for arg in fn.args[:3]:
        arg.add_attribute("noalias")
    return fn


def define_skinny(fn, dtype, plan):
    """The body of declare_skinny's function ``fn``.  Returns ``fn``."""
    module = fn.module
    T = ir.FloatType() if dtype == "float32" else ir.DoubleType()
    Tp = T.as_pointer()
    entry = ir.IRBuilder(fn.append_basic_block("entry"))     # allocas only
    b = ir.IRBuilder(fn.append_basic_block("body"))
    A, B, C, lo, hi = fn.args
    hi = smin(b, hi, plan.M)
    lo = smin(b, lo, hi)
    e = Emit(module, b, entry, T, plan.vw)
    s = Emit(module, b, entry, T, 1)
    # a chunk's sums, C^T's layout [N][JC]: the current K block's (P) and the running ones (S)
    P = entry.bitcast(entry.alloca(ir.ArrayType(T, plan.N * _JC), name="ct_block"), Tp)
    S = P if plan.nkb == 1 else entry.bitcast(entry.alloca(ir.ArrayType(T, plan.N * _JC), name="ct"), Tp)
    with for_range(b, lo, hi, _JC, name="jc") as jc:
        jn = smin(b, _JC, b.sub(hi, jc))
        with for_range(b, 0, plan.nkb, name="kb") as kb:
            pc = b.mul(kb, c64(plan.kc))
            kend = smin(b, b.add(pc, c64(plan.kc)), plan.K)
            with for_range(b, pc, kend, _KB, name="kk") as kk:
                k1 = smin(b, b.add(kk, c64(_KB)), kend)
                _columns(e, s, plan, A, B, P, jc, jn, kk, k1, b.icmp_signed("==", kk, pc))
            if plan.nkb > 1:
                _combine(e, s, plan, P, S, jn, b.icmp_signed("==", kb, c64(0)))
        # C[jc + r, c] = S[c][r]
        Cj = gep_inbounds(b, C, b.mul(jc, c64(plan.N)))
        with for_range(b, 0, jn, name="cr") as r:
            dst = loop_base(b, gep_inbounds(b, Cj, b.mul(r, c64(plan.N))))
            for c in range(plan.N):
                x = b.load(gep_inbounds(b, S, b.add(r, c64(c * _JC))), align=e.esz)
                b.store(x, gep_inbounds(b, dst, c), align=e.esz)
    b.ret_void()
    entry.branch(fn.blocks[1])
    return fn


# columns of C^T per chunk (its sums stay in L1: N x JC elements) and k per pass over
# them (the rows of A a pass reads side by side, one prefetch stream each)
_JC = 256
_KB = 16


def _columns(e, s, plan, A, B, P, jc, jn, k0, k1, fresh):
    """Terms k in [k0, k1) of the chunk's columns [jc, jc + jn) of C^T into P (``fresh``:
    the K block's first pass, its sums start from zero): blocks of NV vectors, then
    single vectors, then single columns."""
    b, w = e.b, e.w
    full = plan.nv * w
    nfull = b.mul(b.sdiv(jn, c64(full)), c64(full))
    with for_range(b, 0, nfull, full, name="jb") as r0:
        _update(e, plan, A, B, P, jc, r0, plan.nv, k0, k1, fresh)
    rv = nfull
    if plan.nv > 1:
        rv = b.mul(b.sdiv(jn, c64(w)), c64(w))
        with for_range(b, nfull, rv, w, name="jv") as r0:
            _update(e, plan, A, B, P, jc, r0, 1, k0, k1, fresh)
    with for_range(b, rv, jn, name="js") as r0:
        _update(s, plan, A, B, P, jc, r0, 1, k0, k1, fresh)


def _update(e, plan, A, B, P, jc, r0, nv, k0, k1, fresh):
    """P[c][r0 : r0 + nv*w] (+)= sum_k A[k, jc + r0 + ...] * B[k, c], k ascending:
    the packed GEMM's fma(A(r, k), B(k, c), acc), operands swapped (same product)."""
    b, w, N, M = e.b, e.w, plan.N, plan.M
    accs = [[e.entry.alloca(e.V) for _ in range(nv)] for _ in range(N)]
    Pr = loop_base(b, gep_inbounds(b, P, r0))
    for c in range(N):
        for v in range(nv):
            old = e.vload(gep_inbounds(b, Pr, c * _JC + v * w))
            b.store(b.select(fresh, e.vzero, old), accs[c][v])
    Aj = gep_inbounds(b, A, b.add(jc, r0))
    with for_range(b, k0, k1, name="k") as k:
        arow = loop_base(b, gep_inbounds(b, Aj, b.mul(k, c64(M))))
        brow = loop_base(b, gep_inbounds(b, B, b.mul(k, c64(N))))
        av = [e.vload(gep_inbounds(b, arow, v * w)) for v in range(nv)]
        for c in range(N):
            bc = splat(b, b.load(gep_inbounds(b, brow, c), align=e.esz), w)
            for v in range(nv):
                b.store(b.call(e.fma, [av[v], bc, b.load(accs[c][v])]), accs[c][v])
    for c in range(N):
        for v in range(nv):
            e.vstore(b.load(accs[c][v]), gep_inbounds(b, Pr, c * _JC + v * w))


def _combine(e, s, plan, P, S, jn, first):
    """S = P on the first K block, else S + P (the packed GEMM adds each block's sums
    to C in block order)."""
    b, w = e.b, e.w
    for c in range(plan.N):
        Pc, Sc = gep_inbounds(b, P, c * _JC), gep_inbounds(b, S, c * _JC)
        nvec = b.mul(b.sdiv(jn, c64(w)), c64(w))
        for em, lo, hi, step in ((e, 0, nvec, w), (s, nvec, jn, 1)):
            with for_range(b, lo, hi, step, name="cb") as r:
                p, q = em.vload(gep_inbounds(b, Pc, r)), gep_inbounds(b, Sc, r)
                em.vstore(b.select(first, p, b.fadd(em.vload(q), p)), q)
