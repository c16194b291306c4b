"""Matrix-vector products without packing (MatMul / BatchMatMulV2 with M or N = 1).

The packed GEMM (matmul.py) computes MR x NR register tiles; with N = 1 only
one of a tile's NR columns is real, so a 64x64 matvec did NR (32) times its
arithmetic and packed the vector into a zero-padded panel on every call -- the
main per-iteration cost of an RNN-style while_loop (W7).  A product with one
side a vector is instead ``y[j] = sum_k Mat(j, k) * v[k]`` (j < L), emitted in
one of two forms, by which way the matrix is contiguous:

  dot   Mat(j, k) at ``j*K + k`` (rows contiguous in k), e.g. W @ x:
        w rows at a time, one w-lane accumulator per row over the k chunks,
        then a transposing pairwise tree (``_row_sums``) turns the w
        accumulators into one vector of w row sums; the last K % w terms are
        added per row in k order.
  axpy  Mat(j, k) at ``k*L + j`` (rows of the K x L matrix contiguous in j),
        e.g. W^T g: blocks of (up to ``_AXPY_BLOCK``) vectors of outputs,
        y_block += v[k] * Mat[k, block], with S accumulator sets (set s takes
        k = s mod S) so that enough FMA chains are in flight; the sets are
        summed pairwise at the end.  The last L % VW outputs use the same
        order in scalar code.

``emit_matvec`` emits ``void name(T* Mat, T* v, T* y, i64 lo, i64 hi)``:
outputs [lo, hi) of every batch.  Each output's summation order depends only
on the shape and its own index, so any split of [lo, hi) across threads (at
multiples of the vector width) gives bit-identical results.
"""
from collections import namedtuple

from llvmlite import ir

from .irutil import SplatConst, c64, declare_vector_fma, for_range, gep_inbounds, smin, splat

__all__ = ["MatVec", "matvec_plan", "emit_matvec"]

_I32 = ir.IntType(32)
_AXPY_BLOCK = 8      # output vectors per axpy block (registers: block x sets <= 16 accumulators)
_MIN_CHAINS = 8      # independent FMA chains wanted in flight (2 FMA units x 4 cycles latency)

# form: "dot" | "axpy"; L outputs, K terms; mat/vec/batch strides in elements
MatVec = namedtuple("MatVec", "form L K batch mat_stride vec_stride")


def matvec_plan(M, N, K, ta, tb, batch, sa, sb):
    """The MatVec for C = op(A) @ op(B) (M x K times K x N) when one side is a
    vector (M == 1 or N == 1), else None.  The emitted function is then called
    as (A, B, C) for N == 1 and (B, A, C) for M == 1."""
    if N == 1:    # C[i] = sum_k op(A)[i, k] * B[k]; B's K elements are contiguous either way
        return MatVec("axpy" if ta else "dot", M, K, batch, sa, sb)
    if M == 1:    # C[j] = sum_k A[k] * op(B)[k, j]
        return MatVec("dot" if tb else "axpy", N, K, batch, sb, sa)
    return None


def _pow2_floor(n):
    p = 1
    while p * 2 <= n:
        p *= 2
    return p


class Emit:
    """Builder, element type and width ``w`` (1: scalar code, same structure)."""

    def __init__(self, module, b, entry, T, w):
        self.b, self.entry, self.T, self.w = b, entry, T, w
        self.esz = 4 if isinstance(T, ir.FloatType) else 8
        suffix = "f32" if self.esz == 4 else "f64"
        if w == 1:
            self.V, self.vzero = T, ir.Constant(T, 0.0)
            name = "llvm.fmuladd." + suffix
            self.fma = module.globals.get(name) or ir.Function(module, ir.FunctionType(T, [T, T, T]), name)
        else:
            self.V = ir.VectorType(T, w)
            self.vzero = SplatConst(self.V, 0.0)
            self.fma = declare_vector_fma(module, self.V, w, "float32" if self.esz == 4 else "float64")

    def alloca(self):
        """An accumulator slot in the entry block (mem2reg keeps it in a register)."""
        return self.entry.alloca(self.V)

    def vload(self, ptr):
        return self.b.load(self.b.bitcast(ptr, self.V.as_pointer()), align=self.esz)

    def vstore(self, val, ptr):
        self.b.store(val, self.b.bitcast(ptr, self.V.as_pointer()), align=self.esz)

    def splat(self, x):
        return splat(self.b, x, self.w)


def emit_matvec(module, name, dtype, plan, vw):
    """Emit the function for ``plan`` (a MatVec); ``vw``: the target's lanes for dtype."""
    T = ir.FloatType() if dtype == "float32" else ir.DoubleType()
    Tp = T.as_pointer()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [Tp, Tp, Tp, c64(0).type, c64(0).type]), name=name)
    fn.attributes.add("nounwind")
    for arg, nm in zip(fn.args, ("mat", "vec", "out", "lo", "hi")):
        arg.name = nm
    for arg in fn.args[:3]:
        arg.add_attribute("noalias")
    entry = ir.IRBuilder(fn.append_basic_block("entry"))    # accumulator allocas only
    b = ir.IRBuilder(fn.append_basic_block("body"))
    mat, vec, out, lo, hi = fn.args
    hi = smin(b, hi, plan.L)
    with for_range(b, 0, plan.batch, name="batch") as bi:
        m = gep_inbounds(b, mat, b.mul(bi, c64(plan.mat_stride)))
        v = gep_inbounds(b, vec, b.mul(bi, c64(plan.vec_stride)))
        y = gep_inbounds(b, out, b.mul(bi, c64(plan.L)))
        if plan.form == "dot":
            _emit_dot(Emit(module, b, entry, T, min(vw, _pow2_floor(plan.K))), m, v, y, lo, hi, plan.L, plan.K)
        else:
            _emit_axpy(module, b, entry, T, m, v, y, lo, hi, plan.L, plan.K, vw)
    b.ret_void()
    entry.branch(fn.blocks[1])
    return fn


# ---------------------------------------------------------------- dot form
def _row_sums(e, accs):
    """w vectors of w lanes -> one vector whose lane r is the sum of accs[r]'s lanes.

    Level by level each vector holds twice as many rows in half as many lanes
    per row: two vectors u (rows 0..n-1) and v (rows n..2n-1), s lanes a row,
    become one with 2n rows of s/2 lanes (first half + second half of each
    row's segment).  A row's additions are the same whatever rows share its
    vectors."""
    b, w = e.b, e.w
    mask_ty = ir.VectorType(_I32, w)
    vs, s, n = list(accs), w, 1
    while s > 1:
        h = s // 2
        first = []
        for p in range(w):
            row, off = divmod(p, h)
            first.append((row % n) * s + off + (0 if row < n else w))
        m1 = ir.Constant(mask_ty, first)
        m2 = ir.Constant(mask_ty, [i + h for i in first])
        vs = [b.fadd(b.shuffle_vector(vs[i], vs[i + 1], m1), b.shuffle_vector(vs[i], vs[i + 1], m2))
              for i in range(0, len(vs), 2)]
        s, n = h, 2 * n
    return vs[0]


def _emit_dot(e, mat, vec, y, lo, hi, L, K):
    """y[j] = sum_k mat[j*K + k] * vec[k] for j in [lo, hi): blocks of w rows."""
    b, w = e.b, e.w
    kmain = K - K % w
    accs = [e.alloca() for _ in range(w)]
    with for_range(b, lo, hi, w, name="rb") as r0:
        valid = b.sub(hi, r0)
        # rows past the end of a short last block read the last valid row; their sums are not stored
        rows = [gep_inbounds(b, mat, b.mul(b.add(r0, smin(b, r, b.sub(valid, c64(1)))), c64(K))) for r in range(w)]
        for a in accs:
            b.store(e.vzero, a)
        with for_range(b, 0, kmain, w, name="k") as k0:
            x = e.vload(gep_inbounds(b, vec, k0))
            for r in range(w):
                b.store(b.call(e.fma, [e.vload(gep_inbounds(b, rows[r], k0)), x, b.load(accs[r])]), accs[r])
        sums = _row_sums(e, [b.load(a) for a in accs]) if w > 1 else b.load(accs[0])
        for k in range(kmain, K):     # the last K % w terms, in k order, all w rows at once
            col = ir.Constant(e.V, ir.Undefined)
            for r in range(w):
                col = b.insert_element(col, b.load(gep_inbounds(b, rows[r], k), align=e.esz), ir.Constant(_I32, r))
            sums = b.call(e.fma, [col, e.splat(b.load(gep_inbounds(b, vec, k), align=e.esz)), sums])
        dst = gep_inbounds(b, y, r0)
        if w == 1:
            e.vstore(sums, dst)
        else:
            with b.if_else(b.icmp_signed(">=", valid, c64(w))) as (full, part):
                with full:
                    e.vstore(sums, dst)
                with part:
                    with for_range(b, 0, valid, name="st") as t:
                        b.store(b.extract_element(sums, b.trunc(t, _I32)), gep_inbounds(b, dst, t), align=e.esz)


# ---------------------------------------------------------------- axpy form
def _axpy_shape(L, vw):
    """(vectors per block, accumulator sets): functions of the shape only, so
    that every output column, vector or scalar, sums in the same order."""
    nb = min(max(L // vw, 1), _AXPY_BLOCK)
    return nb, max(1, min(4, _MIN_CHAINS // nb))


def _emit_axpy(module, b, entry, T, mat, vec, y, lo, hi, L, K, vw):
    """y[j] = sum_k vec[k] * mat[k*L + j] for j in [lo, hi)."""
    nb, S = _axpy_shape(L, vw)
    Lv = L - L % vw                      # vector columns; the rest are scalar
    vend = smin(b, hi, Lv)
    full = nb * vw
    # blocks of nb vectors (each row of mat read once per block), then single vectors, then scalar columns
    nblk = b.sdiv(b.sub(vend, smin(b, lo, vend)), c64(full))
    bend = b.add(lo, b.mul(nblk, c64(full)))
    e = Emit(module, b, entry, T, vw)
    with for_range(b, lo, bend, full, name="jb") as j0:
        _axpy_block(e, mat, vec, y, j0, L, K, nb, S)
    with for_range(b, smin(b, bend, vend), vend, vw, name="jv") as j0:
        _axpy_block(e, mat, vec, y, j0, L, K, 1, S)
    if Lv < L:
        s = Emit(module, b, entry, T, 1)
        start = b.select(b.icmp_signed(">", lo, c64(Lv)), lo, c64(Lv))
        with for_range(b, start, hi, name="js") as j:
            _axpy_block(s, mat, vec, y, j, L, K, 1, S)


def _axpy_block(e, mat, vec, y, j0, L, K, nv, S):
    """nv vectors (of e.w lanes) of outputs from column j0: S accumulator sets
    over k (set s takes k = s mod S, the last K % S k's go to sets 0, 1, ...),
    then ((s0 + s1) + (s2 + s3))."""
    b, w = e.b, e.w
    col = gep_inbounds(b, mat, j0)
    kmain = K - K % S

    def terms(k, acc):
        x = e.splat(b.load(gep_inbounds(b, vec, k), align=e.esz))
        row = gep_inbounds(b, col, b.mul(k, c64(L)))
        return [b.call(e.fma, [x, e.vload(gep_inbounds(b, row, v * w)), acc[v]]) for v in range(nv)]

    slots = [[e.alloca() for _ in range(nv)] for _ in range(S)]
    for st in slots:
        for a in st:
            b.store(e.vzero, a)
    with for_range(b, 0, kmain, S, name="kk") as k0:
        for s in range(S):
            new = terms(b.add(k0, c64(s)), [b.load(a) for a in slots[s]])
            for a, val in zip(slots[s], new):
                b.store(val, a)
    sets = [[b.load(a) for a in st] for st in slots]
    for s, k in enumerate(range(kmain, K)):
        sets[s] = terms(c64(k), sets[s])
    while len(sets) > 1:
        sets = [[b.fadd(p, q) for p, q in zip(sets[i], sets[i + 1])] for i in range(0, len(sets), 2)]
    for v in range(nv):
        e.vstore(sets[0][v], gep_inbounds(b, y, b.add(j0, c64(v * w))))
