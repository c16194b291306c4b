"""Packed, register-blocked GEMM code generator (BLIS/GotoBLAS style).

``emit_matmul`` emits one LLVM function that computes, for every batch ``b``
and for the rows ``[row_begin, row_end)`` of C[b]::

    C[b] = op(A[b]) @ op(B[b])          (C is overwritten)

All shapes are compile-time constants, so every trip count, stride and edge
width is baked into the IR.  Structure (outer to inner), following Goto/BLIS::

    for b in batch:                      (moved inside the pack when B is
                                          broadcast, so B is packed once)
      for jc in N step NC:               column blocks (usually just one)
        for pc in K step KC:             balanced K blocks
          pack B[pc:pc+kc, jc:jc+nc] into NR-wide panels   (L2/L3 resident)
          for ic in rows step MC:        this call's rows only
            [pack A[ic:ic+mc, pc:pc+kc] into MR-row panels] (unless N narrow)
            for jr over NR panels:       B micro-panel stays in L1
              for ir over MR panels:
                micro-kernel: MR x NR block of C held in vector registers,
                              rank-1 updates with broadcast(A) * B via FMA
                store (first K block) / accumulate the tile into C

A is packed when N spans enough B panels to amortise the pass; for narrow N
(e.g. N=10) op(A) is read in place by the micro-kernel instead.

The micro-kernel is emitted as explicit vector IR (``<VW x T>`` + ``llvm.fmuladd``)
instead of trusting the loop vectoriser; the rest are plain loops that LLVM
optimises well on its own.

Determinism: every element of C is summed in the same order (k blocks in
order, k ascending inside a block) regardless of the row range, so splitting
rows across threads gives bit-identical results.  Each call only writes its own
rows of C and its own ``work`` buffer, so disjoint row ranges with different
work buffers may run concurrently.  C must not overlap A or B.
"""

import copy
from collections import namedtuple
from contextlib import contextmanager

from llvmlite import ir

from .irutil import c64 as _c, declare_vector_fma as _declare_vector_fma, for_range as _for_range
from .irutil import gep_inbounds as _gep, loop_base as _loop_base, smin as _smin
from .irutil import splat as _splat, SplatConst as _SplatConst

__all__ = ["emit_matmul", "workspace_elems", "prepack_supported", "emit_matmul_prepacked",
           "declare_matmul", "define_matmul", "declare_matmul_prepacked", "define_matmul_prepacked",
           "packed_b_elems", "compute_workspace_elems", "pack_tasks", "row_chunks", "RowChunks",
           "chunk_bounds", "k_blocks"]

_I64 = ir.IntType(64)

# Default register blocking, for AVX2/FMA (16 ymm registers): MR*NR/VW
# accumulators (12) + NR/VW B vectors (2) + 1 broadcast register = 15 live ymm
# registers.  The code generator passes its target's blocking as ``config``
# (jitgrad/codegen/target.py: AVX-512, AVX2, SSE2 baseline).
# Cache blocking: A block MC*KC (~144 KiB) lives in the 512 KiB L2, a B
# micro-panel KC*NR (16 KiB) lives in the 32 KiB L1; values as in BLIS zen3.
_DEFAULTS = {
    "float32": dict(vw=8, mr=6, nr=16, kc=256, mc=144, nc=4080, pack_a=None, masked=False),
    "float64": dict(vw=4, mr=6, nr=8, kc=256, mc=72, nc=4080, pack_a=None, masked=False),
}

# Buffers carved out of ``work`` start on 64-byte boundaries, so packed
# vector loads can be declared aligned.
_ALIGN_BYTES = 64

_Plan = namedtuple("_Plan",
                   "vw mr nr kc nkb mc nc pack_a b_elems a_elems a_off masked")


def _ceil_div(a, b):
    return -(-a // b)


def _round_up(a, b):
    return _ceil_div(a, b) * b


def _elem_bytes(dtype):
    if dtype == "float32":
        return 4
    if dtype == "float64":
        return 8
    raise ValueError("matmul: unsupported dtype %r" % (dtype,))


def _plan(dtype, M, N, K, trans_a, config=None):
    """Choose tile sizes and the workspace layout for one problem shape."""
    _elem_bytes(dtype)                          # validates dtype
    p = dict(_DEFAULTS[dtype])
    if config:
        p.update(config)
    vw, mr, nr = p["vw"], p["mr"], p["nr"]
    assert nr % vw == 0, "NR must be a multiple of the vector width"
    # C narrower than one panel (W3's 10-class layer): only the vectors that hold
    # columns of C.  The others' FMAs would be wasted; LLVM's loop unroller used to
    # find that out for us (it unrolled the edge store and dropped the dead
    # accumulators), with a leaner side pipeline the IR has to say it.
    nr = min(nr, _round_up(N, vw))
    # Balanced K blocks: K=784 with KC=256 becomes 4 blocks of 196 instead of
    # 3x256 + 16, so no block degenerates into a tiny, overhead-bound one.
    nkb = _ceil_div(K, p["kc"])
    kc = _ceil_div(K, nkb)
    pack_a = p["pack_a"]
    if pack_a is None:
        # Packing A pays off once it is reused across enough B panels
        # (measured: a few % for row-major A, more for transposed A, whose
        # in-place reads touch a new cache line per k).  For narrow N the
        # pack pass dominates, so there op(A) is read in place.
        pack_a = N > (1 if trans_a else 4) * nr
    pack_a = bool(pack_a)
    if trans_a and not pack_a and p.get("regs"):
        # op(A) = A^T read in place: each k takes MR adjacent elements of one row of A,
        # a row of A (M elements) away from the last k's.  With fewer than a cache line's
        # worth, every line is fetched by two row panels, far apart in time: W3's
        # dW2 = H^T dY (N = 10, one vector per row) ran at 78% of OpenBLAS with 8 rows
        # of float32 on AVX-512 and at 90% with 16 (bench/bench_matmul.py, Xeon).  Only
        # when the larger tile still fits in registers (accumulators + B vectors + A).
        nv = nr // vw
        line = _ALIGN_BYTES // _elem_bytes(dtype)
        if mr < line and line * nv + nv + 1 <= p["regs"]:
            mr = line
    mc = _round_up(min(p["mc"], _round_up(M, mr)), mr)
    nc = _round_up(min(p["nc"], _round_up(N, nr)), nr)
    per_align = _ALIGN_BYTES // _elem_bytes(dtype)
    b_elems = _round_up(kc * nc, per_align)
    a_elems = _round_up(kc * mc, per_align) if pack_a else 0
    return _Plan(vw, mr, nr, kc, nkb, mc, nc, pack_a, b_elems, a_elems,
                 b_elems, bool(p["masked"]))


def k_blocks(dtype, M, N, K, trans_a, config=None):
    """(kc, nkb): the K blocks every C element is summed in (matmul_skinny.py sums the same)."""
    plan = _plan(dtype, M, N, K, trans_a, config)
    return plan.kc, plan.nkb


def workspace_elems(dtype, batch, M, N, K, trans_a, trans_b, config=None):
    """Scratch elements (of ``dtype``) the emitted kernel needs in ``work``."""
    if batch * M * N * K == 0:
        _elem_bytes(dtype)
        return 0
    plan = _plan(dtype, M, N, K, trans_a, config)
    slack = _ALIGN_BYTES // _elem_bytes(dtype)  # see _align_work
    return plan.b_elems + plan.a_elems + slack


# --------------------------------------------------------------------------
# Pre-packed B (dynamic row scheduling across threads)
#
# For threads taking row chunks from a shared counter, packing B once per
# chunk (as emit_matmul does per call) would repeat the B pass for every
# chunk.  Instead B is packed once, cooperatively, into a shared buffer
# holding every K block (``pack`` function, tasks = (K block, NR panel)
# pairs), and then any number of row chunks run the ``compute`` function on
# it.  Each C element still sums its K blocks in order with k ascending
# inside a block (the same micro-kernel and block sizes as emit_matmul), so
# results are bit-identical to emit_matmul's whatever the chunking.
# --------------------------------------------------------------------------

def prepack_supported(dtype, batch, M, N, K, trans_a, config=None):
    """Whether emit_matmul_prepacked handles this shape (one batch, one NC block)."""
    if batch != 1 or min(M, N, K) <= 0:
        return False
    return N <= _plan(dtype, M, N, K, trans_a, config).nc


def packed_b_elems(dtype, M, N, K, trans_a, config=None):
    """Elements of the shared packed-B buffer (all K blocks, plus alignment slack)."""
    plan = _plan(dtype, M, N, K, trans_a, config)
    return plan.nkb * plan.b_elems + _ALIGN_BYTES // _elem_bytes(dtype)


def compute_workspace_elems(dtype, M, N, K, trans_a, config=None):
    """Per-thread workspace elements of the ``compute`` function (packed A)."""
    plan = _plan(dtype, M, N, K, trans_a, config)
    return plan.a_elems + _ALIGN_BYTES // _elem_bytes(dtype)


def pack_tasks(dtype, M, N, K, trans_a, config=None):
    """Number of pack tasks (K blocks x NR panels) of the ``pack`` function."""
    plan = _plan(dtype, M, N, K, trans_a, config)
    return plan.nkb * _ceil_div(N, plan.nr)


# A row chunk of a dynamically scheduled GEMM costs about this many rows more than its
# rows: each chunk (and each MC block inside one) streams all of packed B through L1
# once more, and packs its own A block.  Measured on znver4 (one thread, kernels
# called through ctypes, call overhead subtracted), W3's dW1 = X^T dH (784 rows,
# prepacked B, float32): 20 chunks of 40 rows cost 1.6% over 2 chunks of 392 rows,
# ~1.8 us a chunk, 0.7 rows' worth.
_CHUNK_COST_ROWS = 1


RowChunks = namedtuple("RowChunks", "big nbig small count")
RowChunks.__doc__ = """A dynamic GEMM's row chunks: ``nbig`` chunks of ``big`` rows, then
chunks of ``small`` rows (the last one short) up to M; ``count`` chunks in all."""


def row_chunks(dtype, M, N, K, trans_a, config=None, threads=(1, 2, 4)):
    """The RowChunks of a parallel GEMM's rows (emit_matmul_prepacked's compute calls,
    taken from an atomic counter: lower_matmul.py).  Large chunks first, then small
    ones, so that the threads finish together whatever their count: chosen by
    simulating the dynamic schedule on each of ``threads`` equal-speed threads with a
    chunk costing its rows plus _CHUNK_COST_ROWS per MC block, minimising the sum of
    the busiest thread's time over an even split.  Chunk sizes are multiples of MR
    (the last excepted), at most MC, at least 4 MR rows (or all of M).  W3's dW1
    (M = 784, float32 on AVX-512): 20 chunks of 40 rows (2 threads: 400 and 384 rows,
    10 chunks each) became 3 x 136, 5 x 64 and 56 rows, ending 2 threads at 392 rows
    each in 4 and 5 chunks (4 threads: 200 rows at most, as before)."""
    plan = _plan(dtype, M, N, K, trans_a, config)
    return _row_chunks(M, plan.mr, plan.mc, tuple(threads))


def _chunk_sizes(M, big, nbig, small):
    sizes = [big] * nbig
    rest = M - big * nbig
    sizes += [small] * (rest // small) + ([rest % small] if rest % small else [])
    return sizes


def _busiest(sizes, threads, mc):
    """Time of the busiest thread (in rows) when each chunk goes to the first free thread."""
    cost = [s + _CHUNK_COST_ROWS * _ceil_div(s, mc) for s in sizes]
    if threads == 1:
        return sum(cost)
    free = [0] * threads
    for c in cost:
        i = free.index(min(free))
        free[i] += c
    return max(free)


_ROW_CHUNKS = {}


def _row_chunks(M, mr, mc, threads):
    key = (M, mr, mc, threads)
    if key not in _ROW_CHUNKS:
        lo = min(mc, _round_up(min(M, 4 * mr), mr))
        top = max(threads)
        best = None
        # many rounds of chunks (large M): an MC chunk's short tail is a small part of
        # a thread's time, only the tail is chosen (keeps this fast: it runs per GEMM)
        bigs = [mc] if M > 4 * top * mc else range(lo, mc + 1, mr)
        for big in bigs:
            smalls = sorted({s for s in (4 * mr, 8 * mr, big) if s <= big})
            # only the last rounds' worth of large chunks are worth trying as small ones
            for nbig in range(max(0, M // big - 2 * top), M // big + 1):
                for small in (smalls if nbig else [big]):
                    sizes = _chunk_sizes(M, big, nbig, small)
                    cost = sum(_busiest(sizes, t, mc) * t / M for t in threads)
                    cand = (round(cost, 9), len(sizes), -big, RowChunks(big, nbig, small, len(sizes)))
                    if best is None or cand[:3] < best[:3]:
                        best = cand
        _ROW_CHUNKS[key] = best[3]
    return _ROW_CHUNKS[key]


def chunk_bounds(chunks, M):
    """[(r0, r1)] of RowChunks ``chunks`` over M rows, in counter order (tests, tools)."""
    sizes = _chunk_sizes(M, chunks.big, chunks.nbig, chunks.small)
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    return [(r0, r0 + s) for r0, s in zip(starts, sizes)]


def emit_matmul_prepacked(module, name, dtype, M, N, K, trans_a, trans_b,
                          config=None):
    """Emit ``void name_pack(T* B, T* Bpk, i64 lo, i64 hi)`` (packs tasks
    [lo, hi) of op(B) into Bpk) and ``void name(T* A, T* Bpk, T* C, T* work,
    i64 lo, i64 hi)`` (rows [lo, hi) of C = op(A) @ op(B) from the packed B;
    ``work``: compute_workspace_elems, per concurrent caller).  Requires
    prepack_supported.  Returns (pack_fn, compute_fn)."""
    assert prepack_supported(dtype, 1, M, N, K, trans_a, config)
    return define_matmul_prepacked(declare_matmul_prepacked(module, name, dtype),
                                   dtype, M, N, K, trans_a, trans_b, config)


def declare_matmul_prepacked(module, name, dtype):
    """emit_matmul_prepacked's two functions, declared (no bodies yet): (pack_fn,
    compute_fn).  A caller may call them now and have define_matmul_prepacked emit the
    bodies later (backend.Units.defer: after the calling module's own text is made)."""
    _elem_bytes(dtype)                          # validates dtype
    T = ir.FloatType() if dtype == "float32" else ir.DoubleType()
    Tp = T.as_pointer()
    pf = ir.Function(module, ir.FunctionType(ir.VoidType(), [Tp, Tp, _I64, _I64]), name=name + "_pack")
    pf.attributes.add("nounwind")
    for arg in pf.args[:2]:
        arg.add_attribute("noalias")
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [Tp, Tp, Tp, Tp, _I64, _I64]), name=name)
    fn.attributes.add("nounwind")
    for arg, nm in zip(fn.args, ("A", "Bpk", "C", "work", "row_begin", "row_end")):
        arg.name = nm
    for arg in fn.args[:4]:
        arg.add_attribute("noalias")
    return pf, fn


def define_matmul_prepacked(fns, dtype, M, N, K, trans_a, trans_b, config=None):
    """The bodies of declare_matmul_prepacked's functions ``fns`` (see
    emit_matmul_prepacked).  Returns ``fns``."""
    assert prepack_supported(dtype, 1, M, N, K, trans_a, config)
    pf, fn = fns
    module = fn.module
    plan = _plan(dtype, M, N, K, trans_a, config)
    # pack
    Bsrc, Bpk, lo, hi = pf.args
    b = ir.IRBuilder(pf.append_basic_block("entry"))
    g = _Gen(module, b, dtype, plan)
    Bp0 = _align_work(g, Bpk)
    nr = plan.nr
    npan = _ceil_div(N, nr)
    nfull, tail = divmod(N, nr)
    with _for_range(b, lo, _smin(b, hi, plan.nkb * npan), name="task") as t:
        kbi = b.sdiv(t, _c(npan))
        q = b.srem(t, _c(npan))
        pc = b.mul(kbi, _c(plan.kc))
        kc = _smin(b, plan.kc, b.sub(_c(K), pc))
        dst = _gep(b, Bp0, b.mul(kbi, _c(plan.b_elems)))
        if not trans_b:
            # Row-major B is packed row by row (_emit_pack_b_rows): task q of
            # a K block takes the q-th of npan equal row ranges, all panels.
            rows = _ceil_div(plan.kc, npan)
            k0 = _smin(b, b.mul(q, _c(rows)), kc)
            k1 = _smin(b, b.add(k0, _c(rows)), kc)
            _emit_pack_b_rows(g, Bsrc, dst, pc, kc, k0, k1, _c(0), N, N)
        elif tail and nfull:
            with b.if_else(b.icmp_signed("<", q, _c(nfull))) as (full, edge):
                with full:
                    _emit_pack_b_panel(g, Bsrc, dst, pc, kc, q, _c(0), nr, N, K, trans_b)
                with edge:
                    _emit_pack_b_panel(g, Bsrc, dst, pc, kc, q, _c(0), tail, N, K, trans_b)
        else:
            _emit_pack_b_panel(g, Bsrc, dst, pc, kc, q, _c(0), nr if nfull else tail, N, K, trans_b)
    b.ret_void()
    # compute
    _emit_gemm(fn, module, dtype, 1, M, N, K, trans_a, trans_b, 0, 0, plan, prepacked=True)
    return pf, fn


class _Gen:
    """Holds the builder, types and plan while emitting one kernel."""

    def __init__(self, module, builder, dtype, plan):
        self.b = builder
        self.plan = plan
        self.T = ir.FloatType() if dtype == "float32" else ir.DoubleType()
        self.esz = _elem_bytes(dtype)
        self.V = ir.VectorType(self.T, plan.vw)
        self.zero = ir.Constant(self.T, 0.0)
        self.vzero = _SplatConst(self.V, 0.0)
        self.fma = _declare_vector_fma(module, self.V, plan.vw, dtype)
        # alignment promised for "aligned" vector accesses: packed panels and the
        # edge tile are 64-byte aligned, their vectors sit at multiples of VW
        self.valign = min(32, plan.vw * self.esz)
        if plan.masked:
            self.masked_load, self.masked_store = _declare_masked(module, self.V, plan.vw, dtype)

    # -- memory access -----------------------------------------------------

    def vload(self, ptr, aligned=False):
        p = self.b.bitcast(ptr, self.V.as_pointer())
        # Explicit alignment: without it LLVM assumes the vector's ABI
        # alignment (32 B), which C rows in general do not have.
        return self.b.load(p, align=self.valign if aligned else self.esz)

    def vstore(self, val, ptr, aligned=False):
        p = self.b.bitcast(ptr, self.V.as_pointer())
        self.b.store(val, p, align=self.valign if aligned else self.esz)

    def opaque(self, ptr):
        """irutil.loop_base: a loop body's accesses at constant offsets from ``ptr`` are
        not each a use for LLVM's loop strength reduction (its cost in code generation)."""
        return _loop_base(self.b, ptr)

    def sload(self, ptr):
        return self.b.load(ptr, align=self.esz)

    def sstore(self, val, ptr):
        self.b.store(val, ptr, align=self.esz)

    def splat(self, scalar):
        return _splat(self.b, scalar, self.plan.vw)


def _declare_masked(module, vty, vw, dtype):
    """llvm.masked.load / llvm.masked.store of ``vty`` (declared once per module)."""
    t = "v%d%s" % (vw, "f32" if dtype == "float32" else "f64")
    mty = ir.VectorType(ir.IntType(1), vw)
    i32 = ir.IntType(32)
    out = []
    for name, fty in (("llvm.masked.load.%s.p0" % t, ir.FunctionType(vty, [vty.as_pointer(), i32, mty, vty])),
                      ("llvm.masked.store.%s.p0" % t,
                       ir.FunctionType(ir.VoidType(), [vty, vty.as_pointer(), i32, mty]))):
        out.append(module.globals.get(name) or ir.Function(module, fty, name=name))
    return out


# --------------------------------------------------------------------------
# Packing
# --------------------------------------------------------------------------

def _emit_pack_b(g, Bb, Bp, pc, kc, jc, nc, N, K, trans_b):
    """Pack op(B)[pc:pc+kc, jc:jc+nc] into NR-wide panels.

    Panel q occupies ``Bp[q*kc*NR : (q+1)*kc*NR]`` laid out [k][NR], so the
    micro-kernel streams it with unit stride and aligned vector loads.  Full
    panels are packed by a runtime loop (keeps code size independent of N);
    the narrower last panel (width known at emit time) is zero-padded.
    """
    b, nr = g.b, g.plan.nr
    nfull, tail = divmod(nc, nr)
    if not trans_b:
        _emit_pack_b_rows(g, Bb, Bp, pc, kc, _c(0), kc, jc, nc, N)
        return
    if nfull:
        with _for_range(b, 0, nfull, name="pbq") as q:
            _emit_pack_b_panel(g, Bb, Bp, pc, kc, q, jc, nr, N, K, trans_b)
    if tail:
        _emit_pack_b_panel(g, Bb, Bp, pc, kc, _c(nfull), jc, tail, N, K,
                           trans_b)


def _emit_pack_b_rows(g, Bb, Bp, pc, kc, k0, k1, jc, nc, N):
    """Rows [k0, k1) of every panel of a row-major B block (see _emit_pack_b).

    Row by row, so B is read front to back: panel by panel read each row's
    NR-wide piece with a stride of N elements, touching a new page every few
    rows (W3's W1: 2 KiB rows, 16 panels, each page visited 16 times).
    """
    b, nr = g.b, g.plan.nr
    nfull, tail = divmod(nc, nr)
    with _for_range(b, k0, k1, name="pbk") as k:
        src = _gep(b, Bb, b.add(b.mul(b.add(pc, k), _c(N)), jc))
        dst = _gep(b, Bp, b.mul(k, _c(nr)))
        pstride = b.mul(kc, _c(nr))
        if nfull:
            with _for_range(b, 0, nfull, name="pbq") as q:
                _emit_copy_row(g, _gep(b, src, b.mul(q, _c(nr))), 1,
                               _gep(b, dst, b.mul(q, pstride)), nr)
        if tail:
            _emit_copy_row(g, _gep(b, src, nfull * nr), 1,
                           _gep(b, dst, b.mul(_c(nfull), pstride)), tail)


def _emit_pack_b_panel(g, Bb, Bp, pc, kc, q, jc, width, N, K, trans_b):
    """Pack one NR-wide panel (``width`` <= NR real columns) of op(B)."""
    b, nr = g.b, g.plan.nr
    col0 = b.add(b.mul(q, _c(nr)), jc)
    dst_panel = _gep(b, Bp, b.mul(b.mul(q, _c(nr)), kc))
    if not trans_b:
        # Row k of the panel is B[pc+k, col0 : col0+width]: contiguous.
        src0 = _gep(b, Bb, b.add(b.mul(pc, _c(N)), col0))
        with _for_range(b, 0, kc, name="pbk") as k:
            _emit_copy_row(g, _gep(b, src0, b.mul(k, _c(N))), 1,
                           _gep(b, dst_panel, b.mul(k, _c(nr))), width)
    else:
        _emit_pack_bt_panel(g, Bb, dst_panel, pc, kc, col0, width, K)


def _emit_copy_row(g, src, stride, dst, width):
    """dst[0:NR] = src[j*stride] for j < width, zero after (dst aligned).

    Built from whole vectors so the loop vectoriser leaves the surrounding
    loop alone (it would otherwise bloat it with interleaving code).
    """
    b, nr, vw = g.b, g.plan.nr, g.plan.vw
    src, dst = g.opaque(src), g.opaque(dst)
    for v in range(nr // vw):
        lanes = max(0, min(vw, width - v * vw))
        if lanes == vw and stride == 1:
            val = g.vload(_gep(b, src, v * vw))
        else:
            val = g.vzero
            for l in range(lanes):
                x = g.sload(_gep(b, src, (v * vw + l) * stride))
                val = b.insert_element(val, x, ir.Constant(ir.IntType(32), l))
        g.vstore(val, _gep(b, dst, v * vw), aligned=True)


def _transpose(g, rows):
    """Transpose a VW x VW block held as VW vectors (log2(VW) shuffle stages).

    Stage h swaps the off-diagonal h x h sub-blocks of every 2h x 2h block;
    after h = VW/2, ..., 1 the whole block is transposed.
    """
    b, n = g.b, len(rows)
    rows = list(rows)
    mask_ty = ir.VectorType(ir.IntType(32), n)
    h = n // 2
    while h:
        lo = ir.Constant(mask_ty, [c if not c & h else n + c - h
                                   for c in range(n)])
        hi = ir.Constant(mask_ty, [c + h if not c & h else n + c
                                   for c in range(n)])
        for i in range(n):
            if i & h:
                continue
            x, y = rows[i], rows[i + h]
            rows[i] = b.shuffle_vector(x, y, lo)
            rows[i + h] = b.shuffle_vector(x, y, hi)
        h //= 2
    return rows


def _emit_pack_bt_panel(g, Bb, dst_panel, pc, kc, col0, width, K):
    """Pack a panel of op(B) = B^T where B is N x K (rows contiguous in k).

    VW x VW blocks are loaded as VW row vectors and transposed in registers,
    giving aligned full-vector stores into the [k][NR] panel.  The last
    kc % VW values of k are gathered element-wise.  Columns past ``width``
    are zero (their rows of B may not exist).
    """
    b, nr, vw = g.b, g.plan.nr, g.plan.vw
    src0 = _gep(b, Bb, b.add(b.mul(col0, _c(K)), pc))
    if g.plan.kc < vw:
        # No K block holds a whole VW x VW block (W3's dH = dY @ W2^T: K = 10, VW = 16):
        # the transposing loop would never run, and its IR (VW loads, VW log2 VW
        # shuffles per vector) was ~85% of the pack function's code generation time.
        kmain = _c(0)
    else:
        kmain = b.and_(kc, _c(-vw))
        _emit_pack_bt_blocks(g, src0, dst_panel, kmain, width, K)
    with _for_range(b, kmain, kc, name="pbtr") as k:
        _emit_copy_row(g, _gep(b, src0, k), K,
                       _gep(b, dst_panel, b.mul(k, _c(nr))), width)


def _emit_pack_bt_blocks(g, src0, dst_panel, kmain, width, K):
    """The whole VW x VW blocks [0, kmain) of _emit_pack_bt_panel, transposed in registers."""
    b, nr, vw = g.b, g.plan.nr, g.plan.vw
    with _for_range(b, 0, kmain, vw, name="pbt") as k0:
        src = g.opaque(_gep(b, src0, k0))
        dst = g.opaque(_gep(b, dst_panel, b.mul(k0, _c(nr))))
        for v in range(nr // vw):
            rows = [g.vload(_gep(b, src, (v * vw + t) * K))
                    if v * vw + t < width else g.vzero for t in range(vw)]
            for i, col in enumerate(_transpose(g, rows)):
                g.vstore(col, _gep(b, dst, i * nr + v * vw), aligned=True)


def _emit_pack_a(g, Ab, Ap, ic, mc, pc, kc, M, K, trans_a):
    """Pack op(A)[ic:ic+mc, pc:pc+kc] into MR-row panels laid out [k][MR].

    ``mc`` is a runtime value (the caller's row range decides it).  Rows past
    ``mc`` in the last panel are zero-filled; to keep the copy branch-free we
    load from a clamped (valid) row and select zero instead.
    """
    b, mr = g.b, g.plan.mr
    with _for_range(b, 0, mc, mr, name="pa") as ir0:
        valid = b.sub(mc, ir0)                        # rows left, may be > MR
        dst_panel = _gep(b, Ap, b.mul(ir0, kc))       # panel stride MR*kc
        row_ok = [b.icmp_signed("<", _c(r), valid) for r in range(mr)]
        rows = [b.add(ic, b.add(ir0, _smin(b, r, b.sub(valid, _c(1)))))
                for r in range(mr)]
        if not trans_a:
            # A is M x K: each of the MR rows is contiguous in k.
            # (row r's element k at A + pc + k + rows[r]*K: one base for the MR rows)
            offs = [b.mul(row, _c(K)) for row in rows]
            Apc = _gep(b, Ab, pc)
            k_scalar = _c(0)
            if mr <= g.plan.vw:
                # a whole panel VW k's at a time, transposed in registers (below)
                whole = b.icmp_signed(">=", valid, _c(mr))
                kvec = b.select(whole, b.and_(kc, _c(-g.plan.vw)), _c(0))
                _emit_pack_a_rows_vec(g, Apc, offs, dst_panel, kvec)
                k_scalar = kvec
            with _for_range(b, k_scalar, kc, name="pak") as k:
                dst = g.opaque(_gep(b, dst_panel, b.mul(k, _c(mr))))
                src = g.opaque(_gep(b, Apc, k))
                for r in range(mr):
                    val = g.sload(_gep(b, src, offs[r]))
                    if r:
                        val = b.select(row_ok[r], val, g.zero)
                    g.sstore(val, _gep(b, dst, r))
        else:
            # A is K x M: the MR rows of a panel are MR adjacent elements of
            # one source row, so each k copies a short contiguous run.
            full = b.icmp_signed(">=", valid, _c(mr))
            with b.if_else(full) as (whole, edge):
                with whole:
                    # One <MR x T> copy per k.  Written as a vector so LLVM
                    # does not vectorise this loop across k with gathers (it
                    # did, from the scalar selects below: 10% of W3's X^T @ dH).
                    VM = ir.VectorType(g.T, mr)
                    src0 = _gep(b, Ab, b.add(b.mul(pc, _c(M)), b.add(ic, ir0)))
                    with _for_range(b, 0, kc, name="pakv") as k:
                        src = b.bitcast(_gep(b, src0, b.mul(k, _c(M))), VM.as_pointer())
                        dst = b.bitcast(_gep(b, dst_panel, b.mul(k, _c(mr))), VM.as_pointer())
                        b.store(b.load(src, align=g.esz), dst, align=g.esz)
                with edge:
                    _emit_pack_at_edge(g, Ab, dst_panel, rows, row_ok, pc, kc, M)


def _emit_pack_a_rows_vec(g, Apc, offs, dst_panel, kvec):
    """k < kvec (a multiple of VW) of a whole panel of row-major A: per VW k's, the MR
    rows' VW-element runs (one vector load each, zero vectors up to VW rows) are
    transposed in registers (_transpose) into VW columns, whose first MR lanes are
    the panel's [k][MR] entries -- one MR-wide store per k.  The element-wise copy
    (a masked scalar load and a store per element) was ~9% of W3's X @ W1."""
    b, mr, vw = g.b, g.plan.mr, g.plan.vw
    VM = ir.VectorType(g.T, mr)
    first = ir.Constant(ir.VectorType(ir.IntType(32), mr), list(range(mr)))
    head = ir.Constant(ir.VectorType(ir.IntType(1), vw), [lane < mr for lane in range(vw)])
    align = ir.Constant(ir.IntType(32), g.esz)
    with _for_range(b, 0, kvec, vw, name="pav") as k0:
        src = g.opaque(_gep(b, Apc, k0))
        dst = g.opaque(_gep(b, dst_panel, b.mul(k0, _c(mr))))
        rows = [g.vload(_gep(b, src, offs[r])) for r in range(mr)] + [g.vzero] * (vw - mr)
        for i, col in enumerate(_transpose(g, rows)):
            p = _gep(b, dst, i * mr)
            if mr != vw and g.plan.masked:
                # the first MR lanes stored under a constant mask: a <MR x T> store
                # (MR = 12 on AVX-512) is an illegal vector type that LLVM splits,
                # ~10% of W3 X @ W1's unit codegen CPU; lanes past MR are not accessed
                b.call(g.masked_store, [col, b.bitcast(p, g.V.as_pointer()), align, head])
                continue
            val = col if mr == vw else b.shuffle_vector(col, col, first)
            b.store(val, b.bitcast(p, VM.as_pointer()), align=g.esz)


def _emit_pack_at_edge(g, Ab, dst_panel, rows, row_ok, pc, kc, M):
    """The bottom panel of a transposed A with fewer than MR rows: element-wise,
    rows past the edge read a clamped valid row and store zero."""
    b, mr = g.b, g.plan.mr
    with _for_range(b, 0, kc, name="pak") as k:
        src = g.opaque(_gep(b, Ab, b.mul(b.add(pc, k), _c(M))))
        dst = g.opaque(_gep(b, dst_panel, b.mul(k, _c(mr))))
        for r in range(mr):
            val = g.sload(_gep(b, src, rows[r]))
            if r:
                val = b.select(row_ok[r], val, g.zero)
            g.sstore(val, _gep(b, dst, r))


# --------------------------------------------------------------------------
# Micro-kernel and tile store
# --------------------------------------------------------------------------

_UNROLL_K = 4


def _emit_microkernel(g, accs, a_op, Bpan, kc, kc_const=None):
    """acc[r][v] = sum_k A(r, k) * B_panel[k][v*VW:(v+1)*VW]   (k < kc).

    A(r, k) lives at ``a_base + a_offs[r] + k*a_kstride`` (``a_op``, _a_operand): a
    packed panel (a_offs[r] = r, stride MR) or op(A) read in place.  ``accs`` are
    allocas of the MR x NR/VW accumulator vectors (promoted to registers by
    mem2reg).  The k loop is unrolled by hand by _UNROLL_K to amortise loop
    overhead; a remainder loop handles kc % _UNROLL_K, or, when every K block has
    the same length ``kc_const``, the kc_const % _UNROLL_K rank-1 updates in line.
    """
    b, mr, nr, vw = g.b, g.plan.mr, g.plan.nr, g.plan.vw
    nv = nr // vw
    a_base, a_offs, a_kstride = a_op

    # The accumulators are loaded once per straight-line run of rank-1 updates and
    # stored at its end (not around every FMA): the same IR once mem2reg has run, with
    # a third of the instructions for Python to build and print and LLVM to parse.
    def load_accs():
        return [[b.load(a) for a in row] for row in accs]

    def store_accs(vals):
        for row, vrow in zip(accs, vals):
            for a, v in zip(row, vrow):
                b.store(v, a)

    def run(k, us):
        """Rank-1 updates k + u for u in ``us``, in line.  The pointers are based at k
        once (g.opaque: LLVM's loop strength reduction sees the bases, not each access);
        u is a constant offset, which x86 addressing folds into displacements."""
        vals = load_accs()
        Bk = g.opaque(_gep(b, Bpan, b.mul(k, _c(nr))))
        koff = b.mul(k, _c(a_kstride))
        A0 = g.opaque(_gep(b, a_base, koff))     # one base for the MR rows
        Ak = [_gep(b, A0, off) for off in a_offs]
        for u in us:
            bvec = [g.vload(_gep(b, Bk, u * nr + v * vw), aligned=True) for v in range(nv)]
            for r in range(mr):
                a = g.splat(g.sload(_gep(b, Ak[r], u * a_kstride)))
                for v in range(nv):
                    vals[r][v] = b.call(g.fma, [a, bvec[v], vals[r][v]])
        store_accs(vals)

    store_accs([[g.vzero] * nv for _ in range(mr)])
    if kc_const is not None:
        # The unrolled loop runs even for a short K (W3's dH = dY @ W2^T: K = 10, two
        # trips and 2 updates in line): all 10 in line were one 773-instruction block,
        # and LLVM's instruction selection grows faster than linearly with a block's
        # size (mm3's codegen ~11% less CPU).  Same k order, same FMAs, same bits.
        kmain = kc_const - kc_const % _UNROLL_K
        if kmain:       # (no loop that never runs: its IR cost Python, LLVM's parser and passes)
            with _for_range(b, 0, kmain, _UNROLL_K, name="uk") as k0:
                run(k0, range(_UNROLL_K))
        if kmain < kc_const:
            run(_c(kmain), range(kc_const - kmain))
        return
    kmain = b.and_(kc, _c(-_UNROLL_K))
    with _for_range(b, 0, kmain, _UNROLL_K, name="uk") as k0:
        run(k0, range(_UNROLL_K))
    with _for_range(b, kmain, kc, name="ukr") as k:
        run(k, [0])


# A GEMM of at least this many flops whose last row tile is short (M % MR rows, at most
# a third of MR) gets a micro-kernel of that many rows for it: W3's X @ W1 and X^T dH
# (M = 256 and 784, MR = 12) ran the full 12-row kernel on 4 real rows, 1/22 and 1/66
# of their tiles.  Smaller GEMMs keep one micro-kernel (IR size, compile time).
_EDGE_MIN_FLOPS = 1 << 26


def _edge_rows(plan, M, N, K):
    """Rows of the short-tile micro-kernel (0: none)."""
    e = M % plan.mr
    return e if e and e <= plan.mr // 3 and 2 * M * N * K >= _EDGE_MIN_FLOPS else 0


def _emit_tile_sums(g, accs, a_op, Bpan, kc, kc_const, mr_rt, edge):
    """The micro-kernel for a tile of ``mr_rt`` rows: with ``edge`` rows or fewer (and
    ``edge`` set) one of ``edge`` rows, on the first rows of A's operand and of the
    accumulators (the others are not stored), else the full one.  Every C element is
    the same sum either way (same k order, same FMAs)."""
    if not edge:
        _emit_microkernel(g, accs, a_op, Bpan, kc, kc_const)
        return
    short = copy.copy(g)
    short.plan = g.plan._replace(mr=edge)
    with g.b.if_else(g.b.icmp_signed("<=", mr_rt, _c(edge))) as (few, whole):
        with few:
            _emit_microkernel(short, accs[:edge], (a_op[0], a_op[1][:edge], a_op[2]), Bpan, kc, kc_const)
        with whole:
            _emit_microkernel(g, accs, a_op, Bpan, kc, kc_const)


def _a_operand(g, Ab, Ap, ic, ir0, mr_rt, pc, kc, M, K, trans_a):
    """(base, row offsets, k stride) through which the micro-kernel reads A: A(r, k)
    is at base + offsets[r] + k*stride.

    Packed: panel ``ir0/MR`` of Ap, [k][MR] layout.  In place: rows of op(A)
    starting at column pc; rows past ``mr_rt`` (bottom edge) are clamped to
    the last valid row, so they read valid memory and their results are
    simply not stored.
    """
    b, mr = g.b, g.plan.mr
    if g.plan.pack_a:
        return _gep(b, Ap, b.mul(ir0, kc)), list(range(mr)), mr
    last = b.sub(mr_rt, _c(1))
    rows = [b.add(b.add(ic, ir0), _smin(b, r, last)) for r in range(mr)]
    if not trans_a:                       # A is M x K, row-major
        return _gep(b, Ab, pc), [b.mul(i, _c(K)) for i in rows], 1
    return _gep(b, Ab, b.mul(pc, _c(M))), rows, M   # A is K x M


def _emit_store_tile(g, accs, tmp, Ct, N, mr_rt, width, first, can_be_full):
    """Write the MR x NR accumulator tile to C at ``Ct`` (row stride N).

    Only the first ``mr_rt`` rows and ``width`` columns (both runtime) are
    valid.  On the first K block C is overwritten, afterwards the block's
    partial sum is added.  Interior tiles use full-width vector stores; edge
    tiles spill the accumulators to ``tmp`` (a stack MR x NR buffer) and copy
    the valid part with a scalar loop, which keeps the IR (and compile time)
    small and is rare enough not to matter for speed.
    """
    b, mr, nr, vw = g.b, g.plan.mr, g.plan.nr, g.plan.vw
    nv = nr // vw

    def store_full(accumulate):
        for r in range(mr):
            for v in range(nv):
                p = _gep(b, Ct, r * N + v * vw)
                acc = b.load(accs[r][v])
                if accumulate:
                    acc = b.fadd(g.vload(p), acc)
                g.vstore(acc, p)

    def store_edge_masked():
        # one masked vector access per vector of a valid row (AVX2 vmaskmov, AVX-512
        # {k} masks): W3's N = 10 makes every tile an edge tile, and a scalar copy cost
        # ~10% of those matmuls.  The accumulators go through tmp so that one loop body
        # serves every row: a straight-line copy per row (each behind its row test) was
        # ~12% of the matmul units' code generation CPU.  Masked-off lanes are not
        # accessed; the pointers are plain GEPs, as a vector past the last column may
        # start beyond C.
        spill_to_tmp()
        lane = ir.Constant(ir.VectorType(_I64, vw), list(range(vw)))
        masks = [b.icmp_signed("<", lane, _splat(b, b.sub(width, _c(v * vw)), vw))
                 for v in range(nv)]
        align = ir.Constant(ir.IntType(32), g.esz)
        with _for_range(b, 0, mr_rt, name="er") as r:
            src = _gep(b, tmp, b.mul(r, _c(nr)))
            dst = _gep(b, Ct, b.mul(r, _c(N)))
            for v in range(nv):
                p = b.bitcast(b.gep(dst, [_c(v * vw)]), g.V.as_pointer())
                acc = g.vload(_gep(b, src, v * vw), aligned=True)
                old = b.call(g.masked_load, [p, align, masks[v], g.vzero])
                # C is read on the first K block too (only its valid lanes): branch-free
                val = b.select(first, acc, b.fadd(old, acc))
                b.call(g.masked_store, [val, p, align, masks[v]])

    def spill_to_tmp():
        for r in range(mr):
            for v in range(nv):
                g.vstore(b.load(accs[r][v]), _gep(b, tmp, r * nr + v * vw),
                         aligned=True)

    def store_edge():
        if g.plan.masked:
            store_edge_masked()
            return
        spill_to_tmp()
        with _for_range(b, 0, mr_rt, name="er") as r:
            src = _gep(b, tmp, b.mul(r, _c(nr)))
            dst = _gep(b, Ct, b.mul(r, _c(N)))
            with _for_range(b, 0, width, name="ec") as c:
                val = g.sload(_gep(b, src, c))
                p = _gep(b, dst, c)
                # Loading C even when `first` is harmless (in bounds) and
                # keeps the loop branch-free; the select discards it.
                val = b.select(first, val, b.fadd(g.sload(p), val))
                g.sstore(val, p)

    if not can_be_full:
        store_edge()
        return
    full = b.and_(b.icmp_signed("==", mr_rt, _c(mr)),
                  b.icmp_signed("==", width, _c(nr)))
    with b.if_else(full) as (then, otherwise):
        with then:
            with b.if_else(first) as (overwrite, accumulate):
                with overwrite:
                    store_full(False)
                with accumulate:
                    store_full(True)
        with otherwise:
            store_edge()


# --------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------

def emit_matmul(module, name, dtype, batch, M, N, K, trans_a, trans_b,
                a_batch_stride, b_batch_stride, config=None):
    """Emit ``void name(T* A, T* B, T* C, T* work, i64 lo, i64 hi)``.

    Computes rows [lo, hi) of every C[b] = op(A[b]) @ op(B[b]).

    See the module docstring for semantics.  ``config`` optionally overrides
    tile sizes (keys vw, mr, nr, kc, mc, nc, pack_a) and is meant for tuning
    only; it must also be passed to ``workspace_elems``.  Empty shapes are
    allowed (K == 0 writes zeros).
    """
    if min(batch, M, N, K) < 0:
        raise ValueError("matmul: negative dimension "
                         "(batch=%d M=%d N=%d K=%d)" % (batch, M, N, K))
    return define_matmul(declare_matmul(module, name, dtype), dtype, batch, M, N, K,
                         trans_a, trans_b, a_batch_stride, b_batch_stride, config)


def declare_matmul(module, name, dtype):
    """emit_matmul's function, declared (no body yet): see declare_matmul_prepacked."""
    _elem_bytes(dtype)                          # validates dtype
    T = ir.FloatType() if dtype == "float32" else ir.DoubleType()
    Tp = T.as_pointer()
    fnty = ir.FunctionType(ir.VoidType(), [Tp, Tp, Tp, Tp, _I64, _I64])
    fn = ir.Function(module, fnty, name=name)
    fn.attributes.add("nounwind")
    for arg, nm in zip(fn.args, ("A", "B", "C", "work", "row_begin",
                                 "row_end")):
        arg.name = nm
    # A and B are only read, so they may alias each other (e.g. X^T @ X);
    # C and work must not overlap anything else.
    for arg in fn.args[:4]:
        arg.add_attribute("noalias")
    return fn


def define_matmul(fn, dtype, batch, M, N, K, trans_a, trans_b,
                  a_batch_stride, b_batch_stride, config=None):
    """The body of declare_matmul's function ``fn`` (see emit_matmul).  Returns ``fn``."""
    if min(batch, M, N, K) < 0:
        raise ValueError("matmul: negative dimension "
                         "(batch=%d M=%d N=%d K=%d)" % (batch, M, N, K))
    T = ir.FloatType() if dtype == "float32" else ir.DoubleType()
    if batch * M * N * K == 0:
        _emit_degenerate(fn, T, batch, M, N)
    else:
        _emit_gemm(fn, fn.module, dtype, batch, M, N, K, trans_a, trans_b,
                   a_batch_stride, b_batch_stride,
                   _plan(dtype, M, N, K, trans_a, config))
    return fn


def _emit_degenerate(fn, T, batch, M, N):
    """Empty output, or K == 0: C rows are zero (an empty sum)."""
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    C, row_begin, row_end = fn.args[2], fn.args[4], fn.args[5]
    if batch * M * N:
        row_end = _smin(b, row_end, M)
        with _for_range(b, 0, batch, name="batch") as bi, \
                _for_range(b, row_begin, row_end, name="row") as i, \
                _for_range(b, 0, N, name="col") as j:
            idx = b.add(b.mul(bi, _c(M * N)), b.add(b.mul(i, _c(N)), j))
            b.store(ir.Constant(T, 0.0), _gep(b, C, idx))
    b.ret_void()


def _align_work(g, work):
    """``work`` rounded up to the next 64-byte boundary.

    The caller promises 64-byte alignment, but the packed-panel loads are
    declared aligned (a fault if wrong), so the kernel re-aligns for free
    robustness; workspace_elems reserves the slack.  A GEP (not inttoptr)
    keeps the pointer's provenance visible to alias analysis.
    """
    b = g.b
    addr = b.ptrtoint(work, _I64)
    pad = b.and_(b.sub(_c(0), addr), _c(_ALIGN_BYTES - 1))
    return _gep(b, work, b.udiv(pad, _c(g.esz)))


def _emit_gemm(fn, module, dtype, batch, M, N, K, trans_a, trans_b,
               a_batch_stride, b_batch_stride, plan, prepacked=False):
    """Body of emit_matmul for non-empty shapes (see module docstring).
    ``prepacked``: B is emit_matmul_prepacked's packed buffer (batch 1, one
    column block) and ``work`` holds only the packed A block."""
    A, B, C, work, row_begin, row_end = fn.args

    entry = fn.append_basic_block("entry")
    b = ir.IRBuilder(entry)
    g = _Gen(module, b, dtype, plan)
    mr, nr = plan.mr, plan.nr
    nv = nr // plan.vw
    # Allocas first, in the entry block, so mem2reg can promote them.
    accs = [[b.alloca(g.V, name="acc%d_%d" % (r, v)) for v in range(nv)]
            for r in range(mr)]
    tmp = b.alloca(ir.ArrayType(g.T, mr * nr), name="edge_tile")
    tmp.align = 32
    tmp = b.bitcast(tmp, g.T.as_pointer())

    row_end = _smin(b, row_end, M)               # tolerate row_end > M
    # An empty row range does nothing (skips packing B as well).
    with b.if_then(b.icmp_signed(">=", row_begin, row_end)):
        b.ret_void()
    if prepacked:
        Bpk0 = _align_work(g, B)
        Ap = _align_work(g, work)
        Bp = None
    else:
        Bp = _align_work(g, work)
        Ap = _gep(b, Bp, plan.a_off)

    # With B broadcast over the batch (stride 0) each packed B block serves
    # every batch, so the batch loop moves inside the packing loop.  Either
    # way each C element still sees its K blocks in the same order.
    hoist_b = b_batch_stride == 0 and batch > 1

    @contextmanager
    def batch_loop(active, outer_bi=None):
        if active:
            with _for_range(b, 0, batch, name="batch") as bi:
                yield bi
        else:
            yield outer_bi

    def column_block(bi_out, jc, nc):
        """All work for columns [jc, jc+nc) of C (jc runtime, nc constant)."""
        nfull = nc // nr
        npanels = _ceil_div(nc, nr)
        # balanced K blocks are usually all kc long (784 = 4 x 196): then say so
        kc_const = plan.kc if plan.nkb * plan.kc == K else None
        with _for_range(b, 0, plan.nkb, name="kb") as kb:
            pc = b.mul(kb, _c(plan.kc))
            kc = _c(kc_const) if kc_const else _smin(b, plan.kc, b.sub(_c(K), pc))
            first = b.icmp_signed("==", kb, _c(0))
            if prepacked:
                Bk = _gep(b, Bpk0, b.mul(kb, _c(plan.b_elems)))
            else:
                Bk = Bp
                Bb = _gep(b, B, b.mul(bi_out, _c(b_batch_stride)))
                _emit_pack_b(g, Bb, Bp, pc, kc, jc, nc, N, K, trans_b)
            with batch_loop(hoist_b, bi_out) as bi, \
                    _for_range(b, row_begin, row_end, plan.mc,
                               name="ic") as ic:
                Ab = _gep(b, A, b.mul(bi, _c(a_batch_stride)))
                Cb = _gep(b, C, b.mul(bi, _c(M * N)))
                mc = _smin(b, plan.mc, b.sub(row_end, ic))
                if plan.pack_a:
                    _emit_pack_a(g, Ab, Ap, ic, mc, pc, kc, M, K, trans_a)
                # One runtime loop over all NR panels (the last may be
                # narrow): a single micro-kernel instance in the IR.
                with _for_range(b, 0, npanels, name="jr") as jr:
                    col = b.add(b.mul(jr, _c(nr)), jc)
                    width = _smin(b, nr, b.sub(b.add(jc, _c(nc)), col))
                    Bpan = _gep(b, Bk, b.mul(b.mul(jr, _c(nr)), kc))
                    with _for_range(b, 0, mc, mr, name="ir") as ir0:
                        mr_rt = _smin(b, mr, b.sub(mc, ir0))
                        a_op = _a_operand(
                            g, Ab, Ap, ic, ir0, mr_rt, pc, kc, M, K,
                            trans_a)
                        _emit_tile_sums(g, accs, a_op, Bpan, kc, kc_const, mr_rt, edge)
                        row = b.add(ic, ir0)
                        Ct = g.opaque(_gep(b, Cb, b.add(b.mul(row, _c(N)), col)))
                        _emit_store_tile(g, accs, tmp, Ct, N, mr_rt,
                                         width, first,
                                         can_be_full=(nfull > 0))

    edge = _edge_rows(plan, M, N, K)
    with batch_loop(not hoist_b, _c(0)) as bi_out:
        # NC blocking only matters for very wide C; the full blocks share one
        # runtime loop and the last, narrower block is emitted once more.
        n_full_blocks, nc_tail = divmod(N, plan.nc)
        if n_full_blocks:
            with _for_range(b, 0, n_full_blocks, name="jc") as jcb:
                column_block(bi_out, b.mul(jcb, _c(plan.nc)), plan.nc)
        if nc_tail:
            column_block(bi_out, _c(n_full_blocks * plan.nc), nc_tail)
    b.ret_void()
