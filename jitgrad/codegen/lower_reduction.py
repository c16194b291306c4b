"""Reductions and scatter: MATERIALISE {op type: fn(kb, node, outs, dry)}.

Sum/Mean/Max/Min/Prod and Any/All (bool or/and) share emit_reduce;
ArgMax/ArgMin are a scalar scan along their axis per output element (TF's
rule: NaN never wins, see _arg_better).

Accumulation order is fixed at compile time (no threads), so results are
bit-identical run to run.  float32 sums (and means) accumulate in float64
lanes: for 1e7 elements the result is the correctly rounded sum in practice,
which agrees with numpy's pairwise float32 sum to its own error (~1e-7 rel).
When the innermost input dimension is reduced, VW lane accumulators run
along it and are combined by a fixed tree at the end; when it is kept, the
output row is vectorised and the reduced dimensions are walked outside it.
"""
from functools import partial

import numpy as np
from llvmlite import ir

from .. import dtypes
from ..shapes import normalize_axes
from .irutil import (ERR_GATHER_RANGE, I64, VW, Unsupported, c64, const, iadd, imul, load_buf, reg_type, splat,
                     store_buf, vec_type)


def acc_dtype(kind, dt):
    """The dtype a ``kind`` reduction of ``dt`` accumulates in (kernel.py's fused reductions and
    buffer_plan.py's partial sums use it too)."""
    if kind in ("sum", "mean") and dt is dtypes.float32:
        return dtypes.float64
    if kind == "mean" and dt is dtypes.int32:
        return dtypes.int64   # TF's Mean sums int32 in int64 (no wrap-around), then divides
    return dt


def acc_init(kind, dt):
    """The accumulator's starting value."""
    if kind in ("sum", "mean", "any"):
        return 0
    if kind in ("prod", "all"):
        return 1
    if dt.is_floating:
        return -np.inf if kind == "max" else np.inf
    info = np.iinfo(dt.np)
    return info.min if kind == "max" else info.max


def combine(kb, kind, dt, acc, x):
    """acc (+) x for a ``kind`` reduction (IR)."""
    b = kb.b
    f = dt.is_floating
    if kind in ("sum", "mean"):
        return b.fadd(acc, x) if f else b.add(acc, x)
    if kind == "prod":
        return b.fmul(acc, x) if f else b.mul(acc, x)
    # reduce_any / reduce_all on bool (i1): exact whatever the order
    if kind == "any":
        return b.or_(acc, x)
    if kind == "all":
        return b.and_(acc, x)
    op = ">" if kind == "max" else "<"
    if f:
        take = b.or_(b.fcmp_ordered(op, x, acc), b.fcmp_unordered("uno", x, x))
    else:
        take = b.icmp_signed(op, x, acc)
    return b.select(take, x, acc)


def widen(kb, x, src, dst, W):
    """x from its dtype to the accumulator's (IR)."""
    if src is dst:
        return x
    if dst is dtypes.int64:
        return kb.b.sext(x, vec_type(ir.IntType(64), W))
    return kb.b.fpext(x, vec_type(ir.DoubleType(), W))


def finalize(kb, kind, dt, acc_dt, acc, count, W):
    """The result from the accumulator: a mean divides, then back to ``dt`` (IR)."""
    b = kb.b
    if kind == "mean" and dt is dtypes.float32 and acc_dt is dtypes.float64:
        # TF's Mean divides a float32 sum: a sum that overflows float32 is inf, where dividing
        # the float64 sum first gave a finite mean (3e38 + 3e38 over 20 elements: 3e37, TF inf;
        # tf_fuzz features seed 120261). Otherwise the float64 sum is divided before rounding
        # once, which keeps the mean at least as accurate as numpy's (test_compiler).
        s32 = b.fpext(b.fptrunc(acc, vec_type(ir.FloatType(), W)), vec_type(ir.DoubleType(), W))
        over = b.or_(b.fcmp_ordered("==", s32, const(acc_dt, float("inf"), W)),
                     b.fcmp_ordered("==", s32, const(acc_dt, float("-inf"), W)))
        acc = b.select(over, s32, acc)
    if kind == "mean" and isinstance(count, ir.Value):   # a run-time count (lower_rows.py)
        if dt.is_floating:
            acc = b.fdiv(acc, splat(b, b.sitofp(count, reg_type(acc_dt)), W))
        else:
            n = b.select(b.icmp_signed("<", count, ir.Constant(I64, 1)), ir.Constant(I64, 1), count)
            acc = b.sdiv(acc, splat(b, n if acc_dt.size == 8 else b.trunc(n, reg_type(acc_dt)), W))
    elif kind == "mean":
        if dt.is_floating:
            acc = b.fdiv(acc, const(acc_dt, float(count), W))
        else:
            # C integer division, as TF's Mean: the quotient rounds toward zero
            acc = b.sdiv(acc, const(acc_dt, max(count, 1), W))
    if acc_dt is not dt:
        if dt.is_integer:
            acc = b.trunc(acc, vec_type(_reg(dt), W))
        else:
            acc = b.fptrunc(acc, vec_type(ir.FloatType(), W))
    return acc


def hreduce(kb, kind, acc_dt, v, W):
    """The ``W`` lanes of v combined pairwise into one value (IR)."""
    lanes = [kb.b.extract_element(v, ir.Constant(ir.IntType(32), i)) for i in range(W)]
    while len(lanes) > 1:
        lanes = [combine(kb, kind, acc_dt, lanes[i], lanes[i + 1]) for i in range(0, len(lanes), 2)]
    return lanes[0]


def _loops(kb, in_shape, dims, idx, body):
    if not dims:
        body(idx)
        return
    d = dims[0]
    if isinstance(in_shape[d], int) and in_shape[d] == 1:
        idx2 = dict(idx)
        idx2[d] = (c64(0), 0)
        _loops(kb, in_shape, dims[1:], idx2, body)
        return
    with kb.loop(in_shape[d]) as i:
        idx2 = dict(idx)
        idx2[d] = (i, 0)
        _loops(kb, in_shape, dims[1:], idx2, body)


def reduction_axes(axis, rank):
    """The dims a reduction's ``axis`` attribute reduces (None: all)."""
    return set(range(rank)) if axis is None else set(normalize_axes(axis, rank))


def _extent_product(b, dims):
    """The product of extents, an int or (with a run-time extent, lower_rows.py) an i64."""
    n = int(np.prod([d for d in dims if isinstance(d, int)], dtype=np.int64))
    for d in dims:
        if not isinstance(d, int):
            n = b.mul(d, ir.Constant(I64, n)) if isinstance(n, int) else b.mul(n, d)
    return n


def emit_reduce(kb, out, in_shape, gen_in, red, out_map, kind, dt):
    """out[...] = reduce over dims ``red`` of gen_in; out_map: in dim -> out dim or None.
    An extent of in_shape may be an i64 known at run time (lower_rows.py: dim 0 of a
    value of run-time rows, or the length of one flattened)."""
    if any(d == 0 for d in out.shape):
        return
    R = len(in_shape)
    kept = [d for d in range(R) if d not in red]
    redl = [d for d in range(R) if d in red]
    acc_dt = acc_dtype(kind, dt)
    b = kb.b
    count = _extent_product(b, [in_shape[d] for d in redl])
    last = R - 1
    run_time_last = R and not isinstance(in_shape[last], int)

    def full(idx):
        return [idx[d] for d in range(R)]

    def out_idx(idx):
        o = [(c64(0), 0)] * len(out.shape)
        for d in kept:
            if out_map[d] is not None:
                o[out_map[d]] = idx[d]
        return o

    def accumulate(acc_ptr, idx, W):
        x = widen(kb, gen_in(full(idx), W), dt, acc_dt, W)
        b.store(combine(kb, kind, acc_dt, b.load(acc_ptr), x), acc_ptr)

    # a sum over no dims is TF's copy of x: -0.0 + x is x for every x, -0.0 included (+0.0 + -0.0 is +0.0)
    init = -0.0 if not redl and kind in ("sum", "mean") and acc_dt.is_floating else acc_init(kind, dt)

    def new_acc(W):
        p = kb.alloca(vec_type(_reg(acc_dt), W))
        b.store(const(acc_dt, init, W), p)
        return p

    if R and last in red and (run_time_last or in_shape[last] >= VW):
        n = in_shape[last]
        nv = b.and_(n, ir.Constant(I64, -VW)) if run_time_last else n - n % VW

        def body_kept(idx):
            accv, accs = new_acc(VW), new_acc(1)

            def inner(idx2):
                with kb.loop(nv, 0, VW) as i:
                    i3 = dict(idx2)
                    i3[last] = (i, 1)
                    accumulate(accv, i3, VW)
                if run_time_last or nv < n:
                    with kb.loop(n, nv, vectorise=False) as i:    # < VW left over (irutil.not_vectorised)
                        i3 = dict(idx2)
                        i3[last] = (i, 0)
                        accumulate(accs, i3, 1)
            _loops(kb, in_shape, redl[:-1], idx, inner)
            r = combine(kb, kind, acc_dt, hreduce(kb, kind, acc_dt, b.load(accv), VW), b.load(accs))
            store_buf(kb.b, out, out_idx(idx), finalize(kb, kind, dt, acc_dt, r, count, 1), 1)
        _loops(kb, in_shape, kept, {}, body_kept)
    elif R and last not in red and not run_time_last and in_shape[last] >= VW:
        n = in_shape[last]
        nv = n - n % VW

        # G vectors of columns per walk over the reduced dims: whole cache lines per row
        # instead of VW elements (half a line for float32), G independent add chains, and
        # G times fewer walks.  Each column still sums its rows in the same order: the same
        # bits.  W3's db1 ([256, 512] -> [512], rows 2 KiB apart): one vector per walk read
        # every line twice, far apart, and was the largest serial loop left (perf).
        G = next(g for g in (8, 4, 2, 1) if (nv // VW) % g == 0)

        def chunk(idx, i, W, G=1):
            accs = [new_acc(W) for _ in range(G)]
            idx2 = dict(idx)
            cols = [(b.add(i, c64(k * W)) if k else i, 1 if W > 1 else 0) for k in range(G)]

            def step(i3):
                for acc, col in zip(accs, cols):
                    i4 = dict(i3)
                    i4[last] = col
                    accumulate(acc, i4, W)
            _loops(kb, in_shape, redl, idx2, step)
            for acc, col in zip(accs, cols):
                idx2[last] = col
                store_buf(kb.b, out, out_idx(idx2), finalize(kb, kind, dt, acc_dt, b.load(acc), count, W), W)

        def body_outer(idx):
            with kb.loop(nv, 0, VW * G) as i:
                chunk(idx, i, VW, G)
            if nv < n:
                with kb.loop(n, nv, vectorise=False) as i:
                    chunk(idx, i, 1)
        _loops(kb, in_shape, kept[:-1], {}, body_outer)
    else:
        def body(idx):
            acc = new_acc(1)
            _loops(kb, in_shape, redl, idx, lambda i3: accumulate(acc, i3, 1))
            store_buf(kb.b, out, out_idx(idx), finalize(kb, kind, dt, acc_dt, b.load(acc), count, 1), 1)
        _loops(kb, in_shape, kept, {}, body)


def _reg(dt):
    return reg_type(dt)


def _reduce_op(kind):
    def f(kb, node, outs, dry):
        if dry:
            return
        x = node.inputs[0]
        in_shape = kb.shape(x)
        R = len(in_shape)
        axes = reduction_axes(node.attrs["axis"], R)
        keep = node.attrs["keepdims"]
        out_map, j = {}, 0
        for d in range(R):
            if keep:
                out_map[d] = d
            elif d not in axes:
                out_map[d] = j
                j += 1
            else:
                out_map[d] = None
        emit_reduce(kb, outs[0], in_shape, partial(kb.gen, x), axes, out_map, kind, kb.dtype(x))
    return f


def _sum_to_shape(kb, node, outs, dry):
    if dry:
        return
    g = node.inputs[0]
    gs = kb.shape(g)
    target = node.outputs[0][0]
    extra = len(gs) - len(target)
    red, out_map = set(), {}
    for d in range(len(gs)):
        if d < extra or (target[d - extra] == 1 and gs[d] != 1):
            red.add(d)
            out_map[d] = None
        else:
            out_map[d] = d - extra
    emit_reduce(kb, outs[0], gs, partial(kb.gen, g), red, out_map, "sum", kb.dtype(g))


def _tile_grad(kb, node, outs, dry):
    if dry:
        return
    g = node.inputs[0]
    mult = node.attrs["multiples"]
    ref = node.outputs[0][0]
    in_shape, red, out_map = [], set(), {}
    for k, (m, d) in enumerate(zip(mult, ref)):
        in_shape += [m, d]
        red.add(2 * k)
        out_map[2 * k] = None
        out_map[2 * k + 1] = k

    def gen_in(idx, W):
        gidx = []
        for k, d in enumerate(ref):
            (bm, cm), (bd, cd) = idx[2 * k], idx[2 * k + 1]
            gidx.append((iadd(kb.b, imul(kb.b, bm, d), bd), cm * d + cd))
        return kb.gen(g, gidx, W)
    emit_reduce(kb, outs[0], tuple(in_shape), gen_in, red, out_map, "sum", kb.dtype(g))


def checked_index(kb, ind, idx, n):
    """The index at idx as i64, range-checked against n (ERR_GATHER_RANGE) and clamped to 0
    when bad, so a scatter or gather through it stays in bounds."""
    b = kb.b
    ii = kb.gen(ind, idx, 1)
    if kb.dtype(ind).size < 8:
        ii = b.sext(ii, I64)
    bad = b.or_(b.icmp_signed("<", ii, c64(0)), b.icmp_signed(">=", ii, c64(n)))
    kb.set_error(bad, ERR_GATHER_RANGE)
    return b.select(bad, c64(0), ii)


def walk_vector_last(kb, shape, vector_from, body):
    """body(idx, W) over ``shape``, the last dim in VW lanes when it is at or past
    ``vector_from`` and at least VW long (a scalar loop takes the remainder)."""
    R = len(shape)
    lastv = R - 1 >= vector_from and shape[-1] >= VW

    def rec(k, idx):
        d = shape[k]
        if k < R - 1:
            with kb.loop(d) as i:
                rec(k + 1, idx + [(i, 0)])
            return
        if lastv:
            nv = d - d % VW
            with kb.loop(nv, 0, VW) as i:
                body(idx + [(i, 1)], VW)
            if nv < d:
                with kb.loop(d, nv, vectorise=False) as i:
                    body(idx + [(i, 0)], 1)
        else:
            with kb.loop(d) as i:
                body(idx + [(i, 0)], 1)
    if R == 0:
        body([], 1)
    else:
        rec(0, [])


def _gather_grad(kb, node, outs, dry):
    if dry:
        return
    g, ind, _ = node.inputs
    out = outs[0]
    ref = out.shape
    dt = out.dtype
    axis = node.attrs["axis"] % len(ref)
    gs, ishape = kb.shape(g), kb.shape(ind)
    ri = len(ishape)
    n = ref[axis]
    b = kb.b
    kb.emit_nest(out, lambda idx, W: const(dt, 0, W))
    if any(d == 0 for d in gs):
        return

    def body(idx, W):
        ii = checked_index(kb, ind, idx[axis:axis + ri], n)
        if n == 0:
            return
        oidx = idx[:axis] + [(ii, 0)] + idx[axis + ri:]
        cur = load_buf(kb.b, out, oidx, W)
        v = kb.gen(g, idx, W)
        store_buf(kb.b, out, oidx, b.fadd(cur, v) if dt.is_floating else b.add(cur, v), W)
    walk_vector_last(kb, gs, axis + ri, body)


def _arg_lowest(dt, kind):
    """The best value an arg-reduction starts from, with index 0: TF's CPU kernel
    (Eigen's ArgMax/ArgMinTupleReducer) starts at NumTraits<T>::lowest() /
    highest(): -FLT_MAX / +FLT_MAX for float32 (not -inf / +inf), INT_MIN /
    INT_MAX, False / True for bool."""
    if dt.is_floating:
        info = np.finfo(dt.np)
        return float(info.min if kind == "max" else info.max)
    if dt is dtypes.bool_:
        return 0 if kind == "max" else 1
    info = np.iinfo(dt.np)
    return int(info.min if kind == "max" else info.max)


def _arg_better(kb, dt, kind, v, best):
    """i1: element v replaces the current best (argmax/argmin, TF's rule).

    Only a strictly greater (argmax) / smaller (argmin) element replaces the
    best, so ties keep the earlier index and NaN never wins (an ordered compare
    is false for NaN); -inf never beats the starting -FLT_MAX either."""
    b = kb.b
    op = ">" if kind == "max" else "<"
    if dt.is_floating:
        return b.fcmp_ordered(op, v, best)
    if dt is dtypes.bool_:
        return b.icmp_unsigned(op, v, best)   # i1: True (1) > False (0)
    return b.icmp_signed(op, v, best)


def _arg_op(kind):
    """ArgMax / ArgMin along one axis: a scalar scan per output element, in
    axis order from (index 0, _arg_lowest), TF's rule (so the result does not
    depend on any blocking or thread count)."""
    def f(kb, node, outs, dry):
        x = node.inputs[0]
        in_shape = kb.shape(x)
        R = len(in_shape)
        axis = node.attrs["axis"] % R
        n = in_shape[axis]
        if n == 0:
            # The reference kernel raises ValueError for an empty axis; the
            # interpreter reports it with the reference message.
            raise Unsupported("ArgMax/ArgMin over an empty axis")
        if dry:
            return
        out = outs[0]
        if any(d == 0 for d in out.shape):
            return
        dt = kb.dtype(x)
        b = kb.b
        kept = [d for d in range(R) if d != axis]

        def body(idx):
            def elem(k):
                return kb.gen(x, [idx[d] if d != axis else (k, 0) for d in range(R)], 1)
            best = kb.alloca(_reg(dt))
            best_i = kb.alloca(I64)
            b.store(const(dt, _arg_lowest(dt, kind)), best)
            b.store(c64(0), best_i)
            with kb.loop(n, 0) as k:
                v = elem(k)
                take = _arg_better(kb, dt, kind, v, b.load(best))
                b.store(b.select(take, v, b.load(best)), best)
                b.store(b.select(take, k, b.load(best_i)), best_i)
            r = b.load(best_i)
            if out.dtype.size < 8:
                r = b.trunc(r, _reg(out.dtype))
            store_buf(kb.b, out, [idx[d] for d in kept], r, 1)
        _loops(kb, in_shape, kept, {}, body)
    return f


MATERIALISE = {
    "Sum": _reduce_op("sum"),
    "Mean": _reduce_op("mean"),
    "Max": _reduce_op("max"),
    "Min": _reduce_op("min"),
    "Prod": _reduce_op("prod"),
    "Any": _reduce_op("any"),
    "All": _reduce_op("all"),
    "ArgMax": _arg_op("max"),
    "ArgMin": _arg_op("min"),
    "SumToShape": _sum_to_shape,
    "TileGrad": _tile_grad,
    "GatherGrad": _gather_grad,
}

NEEDS_BUFFER = {"GatherGrad": (1,)}
