"""MatMul / BatchMatMulV2 via matvec.emit_matvec when one side is a vector,
else matmul.emit_matmul (float types), plain loops for integers (or if the
GEMM generator refuses a shape)."""
import functools

import numpy as np

from . import matmul as mm
from .irutil import bcast_idx, c64, const, load_buf, nullctx as _null
from . import matmul_skinny as ms
from .matvec import emit_matvec, matvec_plan


def _batch_layout(kb, node, k, out_batch, mat_shape, dry, outs_needed):
    """(buffer, batch stride) for operand k, broadcasting its batch dims if needed."""
    v = node.inputs[k]
    shp = kb.shape(v)
    ob = tuple(out_batch)
    ab = (1,) * (len(ob) - len(shp[:-2])) + tuple(shp[:-2])
    msize = int(np.prod(mat_shape, dtype=np.int64))
    if ab == ob:
        return (None if dry else kb.buffers[v]), msize
    if int(np.prod(ab, dtype=np.int64)) == 1:
        return (None if dry else kb.buffers[v]), 0
    tmp = kb.scratch_buffer(ob + tuple(mat_shape), kb.dtype(v), "bcast")
    if not dry:
        src = kb.buffers[v]
        full = ob + tuple(mat_shape)
        par = kb.threads.active
        with kb.threads.on_thread0() if par else _null():   # written once, read by every thread
            kb.emit_nest(tmp, lambda idx, W: load_buf(kb.b, src, bcast_idx(idx, full, shp), W))
        if par:
            kb.threads.barrier()
    return tmp, msize


def _matmul(kb, node, outs, dry):
    a, bv = node.inputs
    ash, bsh = kb.shape(a), kb.shape(bv)
    if node.op == "MatMul":
        ta, tb = node.attrs["transpose_a"], node.attrs["transpose_b"]
    else:
        ta, tb = node.attrs["adj_x"], node.attrs["adj_y"]
    out_shape, dt = node.outputs[0]
    M, N = out_shape[-2], out_shape[-1]
    K = ash[-2] if ta else ash[-1]
    out_batch = out_shape[:-2]
    batch = int(np.prod(out_batch, dtype=np.int64))
    if min(batch, M, N) == 0:
        return
    par = kb.threads.active   # this node's rows are split across the kernel's threads
    if K == 0:
        if not dry:
            with kb.threads.on_thread0():
                kb.emit_nest(outs[0], lambda idx, W: const(dt, 0, W))
        return
    A, sa = _batch_layout(kb, node, 0, out_batch, ash[-2:], dry, outs)
    B, sb = _batch_layout(kb, node, 1, out_batch, bsh[-2:], dry, outs)
    if _matvec(kb, dt, A, B, outs, dry, M, N, K, ta, tb, batch, sa, sb, par):
        return
    if _skinny(kb, dt, A, B, outs, dry, M, N, K, ta, tb, batch, par):
        return
    fn = None
    dyn = by_batch = False
    if dt.is_floating:
        try:
            cfg = kb.target.matmul_config(dt.name)
            # parallel: B packed once into a shared buffer, then threads take
            # row chunks from an atomic counter (dynamic schedule; every C
            # element's summation order is independent of the chunking)
            dyn = par and mm.prepack_supported(dt.name, batch, M, N, K, ta, cfg)
            # parallel, batched, B not broadcast (else the kernel packs it once for all
            # batches): each thread takes whole matrices of the batch
            # (a row split packed every batch's B once per thread; 16 x (128x128 @
            # 128x64) float64 ran slower on 2 threads than on 1)
            by_batch = par and not dyn and sb != 0 and batch >= 2 * kb.threads.count
            if dyn:
                bel = mm.packed_b_elems(dt.name, M, N, K, ta, cfg)
                wel = mm.compute_workspace_elems(dt.name, M, N, K, ta, cfg)
                bpk = kb.scratch_buffer((bel,), dt, "matmul packed B (shared)")
            else:
                wel = mm.workspace_elems(dt.name, 1 if by_batch else batch, M, N, K, ta, tb, cfg)
            work = kb.scratch_buffer((wel * (kb.threads.count if par else 1),), dt,
                                     "matmul workspace" + (f" x{kb.threads.count} threads" if par else ""))
            if not dry:
                # declared now, called below, defined when the kernel's text is made
                # (KernelBuilder.define_later: the rest of the kernel compiles meanwhile)
                name = kb.unique_name("mm")
                if dyn:
                    fn = mm.declare_matmul_prepacked(kb.b.module, name, dt.name)
                    kb.define_later(fn, functools.partial(mm.define_matmul_prepacked, fn, dt.name,
                                                          M, N, K, ta, tb, cfg))
                else:
                    nb, ab, bb = (1, 0, 0) if by_batch else (batch, sa, sb)
                    fn = mm.declare_matmul(kb.b.module, name, dt.name)
                    kb.define_later([fn], functools.partial(mm.define_matmul, fn, dt.name, nb, M, N, K,
                                                            ta, tb, ab, bb, cfg))
        except Exception:
            if dry:
                raise
            fn = None
    if dry:
        return
    C = outs[0]
    if fn is not None:
        if dyn:
            pack_fn, comp_fn = fn
            b = kb.b
            wp = b.gep(work.ptr, [b.mul(kb.threads.tid, c64(wel))])
            ntask = mm.pack_tasks(dt.name, M, N, K, ta, cfg)
            tchunk = max(1, -(-ntask // 16))
            with kb.threads.grab(kb.threads.counter, -(-ntask // tchunk)) as blk:
                t0 = b.mul(blk, c64(tchunk))
                b.call(pack_fn, [B.ptr, bpk.ptr, t0, b.add(t0, c64(tchunk))])
            kb.threads.barrier()     # B fully packed before any thread reads it
            rc = mm.row_chunks(dt.name, M, N, K, ta, cfg)
            with kb.threads.grab(kb.threads.counter + 64, rc.count) as blk:
                # nbig chunks of big rows, then small ones (comp_fn clamps the last to M)
                big = b.icmp_signed("<", blk, c64(rc.nbig))
                r0 = b.select(big, b.mul(blk, c64(rc.big)),
                              b.add(c64(rc.nbig * rc.big), b.mul(b.sub(blk, c64(rc.nbig)), c64(rc.small))))
                r1 = b.add(r0, b.select(big, c64(rc.big), c64(rc.small)))
                b.call(comp_fn, [A.ptr, bpk.ptr, C.ptr, wp, r0, r1])
        elif by_batch:
            # the same plan and k order per element as the batch loop inside fn: same bits
            b = kb.b
            wp = b.gep(work.ptr, [b.mul(kb.threads.tid, c64(wel))])
            with kb.threads.grab(kb.threads.counter, batch) as bi:
                b.call(fn, [b.gep(A.ptr, [b.mul(bi, c64(sa))]), b.gep(B.ptr, [b.mul(bi, c64(sb))]),
                            b.gep(C.ptr, [b.mul(bi, c64(M * N))]), wp, c64(0), c64(M)])
        elif par:
            wp = kb.b.gep(work.ptr, [kb.b.mul(kb.threads.tid, c64(wel))])
            # one chunk per thread slot, as the static split had: each call packs B again
            with kb.threads.grab_rows(M, chunks=kb.threads.count) as (r0, r1):
                kb.b.call(fn, [A.ptr, B.ptr, C.ptr, wp, r0, r1])
        else:
            kb.b.call(fn, [A.ptr, B.ptr, C.ptr, work.ptr, c64(0), c64(M)])
        return
    with kb.threads.on_thread0() if par else _null():
        _simple(kb, A.ptr, B.ptr, C.ptr, dt, batch, M, N, K, ta, tb, sa, sb)


def _matvec(kb, dt, A, B, outs, dry, M, N, K, ta, tb, batch, sa, sb, par):
    """One side a vector (float): codegen/matvec.py, no packing.  True if emitted."""
    plan = matvec_plan(M, N, K, ta, tb, batch, sa, sb) if dt.name in ("float32", "float64") else None
    if plan is None:
        return False
    if dry:
        return True
    vw = kb.target.matmul_config(dt.name)["vw"]
    fn = emit_matvec(kb.b.module, kb.unique_name("mv"), dt.name, plan, vw)
    fn.linkage = "internal"    # one call site: inlined into the kernel, no symbol left
    mat, vec = (A, B) if N == 1 else (B, A)
    if par:
        with kb.threads.grab_rows(plan.L, align=vw) as (lo, hi):
            kb.b.call(fn, [mat.ptr, vec.ptr, outs[0].ptr, lo, hi])
    else:
        kb.b.call(fn, [mat.ptr, vec.ptr, outs[0].ptr, c64(0), c64(plan.L)])
    return True


def _skinny(kb, dt, A, B, outs, dry, M, N, K, ta, tb, batch, par):
    """C = A^T B with narrow C (codegen/matmul_skinny.skinny_plan; no packing: the
    packed GEMM's bits, up to several times faster there).  True if emitted."""
    if not dt.is_floating:
        return False
    plan = ms.skinny_plan(dt.name, batch, M, N, K, ta, tb, kb.target.matmul_config(dt.name))
    if plan is None:
        return False
    if dry:
        return True
    fn = ms.declare_skinny(kb.b.module, kb.unique_name("mm"), dt.name)
    kb.define_later([fn], functools.partial(ms.define_skinny, fn, dt.name, plan))   # as the GEMMs below
    if par:
        # one chunk per thread slot: each call walks A's rows once, side by side
        with kb.threads.grab_rows(M, align=plan.vw * plan.nv, chunks=kb.threads.count) as (lo, hi):
            kb.b.call(fn, [A.ptr, B.ptr, outs[0].ptr, lo, hi])
    else:
        kb.b.call(fn, [A.ptr, B.ptr, outs[0].ptr, c64(0), c64(M)])
    return True


def _simple(kb, A, B, C, dt, batch, M, N, K, ta, tb, sa, sb):
    b = kb.b
    f = dt.is_floating
    with kb.loop(batch) as bi:
        with kb.loop(M) as i:
            with kb.loop(N) as j:
                acc = kb.alloca(A.type.pointee)
                b.store(const(dt, 0), acc)
                with kb.loop(K) as k:
                    ai = b.add(b.mul(bi, c64(sa)), b.add(b.mul(k, c64(M)), i) if ta else b.add(b.mul(i, c64(K)), k))
                    bj = b.add(b.mul(bi, c64(sb)), b.add(b.mul(j, c64(K)), k) if tb else b.add(b.mul(k, c64(N)), j))
                    x = b.load(b.gep(A, [ai]))
                    y = b.load(b.gep(B, [bj]))
                    cur = b.load(acc)
                    b.store(b.fadd(cur, b.fmul(x, y)) if f else b.add(cur, b.mul(x, y)), acc)
                ci = b.add(b.mul(bi, c64(M * N)), b.add(b.mul(i, c64(N)), j))
                b.store(b.load(acc), b.gep(C, [ci]))


MATERIALISE = {"MatMul": _matmul, "BatchMatMulV2": _matmul}
NEEDS_BUFFER = {"MatMul": "all", "BatchMatMulV2": "all"}
