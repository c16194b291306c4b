"""SegmentReduction (ops/segment_ops.py): MATERIALISE {op type: fn(kb, node, outs, dry)}.

out[ids[i...], rest] (+)= data[i..., rest], walked in data order (so max / min keep TF's
order-dependent NaN rule and sums add in TF's order), the trailing data dims vectorised as
GatherGrad's scatter (lower_reduction.py) is. Sorted ids are checked to increase, and every id
is checked in the kernel: one at or past
num_segments (or a negative sorted one) sets ERR_SEGMENT_RANGE and is clamped to row 0, and a
negative unsorted id (TF drops it) rewrites row 0 with its own value, so nothing is ever read or
written outside ``out``.
"""
from ..ops.segment_ops import identity_value
from .irutil import ERR_SEGMENT_ORDER, ERR_SEGMENT_RANGE, I64, c64, const, load_buf, store_buf
from .lower_reduction import walk_vector_last


def _combine(kb, kind, dt, cur, v):
    b = kb.b
    f = dt.is_floating
    if kind == "sum":
        return b.fadd(cur, v) if f else b.add(cur, v)
    if kind == "prod":
        return b.fmul(cur, v) if f else b.mul(cur, v)
    op = ">" if kind == "max" else "<"
    keep = b.fcmp_ordered(op, cur, v) if f else b.icmp_signed(op, cur, v)   # (cur > v) ? cur : v
    return b.select(keep, cur, v)


def _segment_reduction(kb, node, outs, dry):
    if dry:
        return
    data, ind = node.inputs
    out = outs[0]
    kind, n, sorted_ = node.attrs["kind"], node.attrs["num_segments"], node.attrs["sorted"]
    dt = out.dtype
    ds, ishape = kb.shape(data), kb.shape(ind)
    ri = len(ishape)
    b = kb.b
    start = identity_value(kind, dt, False)
    if sorted_ and kind in ("max", "min"):
        start = 0           # an empty sorted segment is 0; the ones named are reset below
    kb.emit_nest(out, lambda idx, W: const(dt, start, W))

    def segment_row(idx):
        """(row index, i1 drop) of the data element at idx; the range check."""
        ii = kb.gen(ind, idx[:ri], 1)
        if kb.dtype(ind).size < 8:
            ii = b.sext(ii, I64)
        neg = b.icmp_signed("<", ii, c64(0))
        bad = b.icmp_signed(">=", ii, c64(n))
        kb.set_error(b.or_(bad, neg) if sorted_ else bad, ERR_SEGMENT_RANGE)
        drop = b.or_(bad, neg)
        return b.select(drop, c64(0), ii), drop

    if sorted_ and len(ishape) == 1 and ishape[0] > 1:
        # TF's "not increasing" comes first (the first error set wins): num_segments was taken
        # from the largest id, which is the last only when they are sorted
        with kb.loop(ishape[0], 1) as i:
            here, before = kb.gen(ind, [(i, 0)], 1), kb.gen(ind, [(b.sub(i, c64(1)), 0)], 1)
            kb.set_error(b.icmp_signed("<", here, before), ERR_SEGMENT_ORDER)
    if n == 0 or any(d == 0 for d in ds):
        if all(d > 0 for d in ishape):        # no data to combine, but the ids are still checked
            walk_vector_last(kb, ishape, ri + 1, lambda idx, W: segment_row(idx))
        return
    if sorted_ and kind in ("max", "min"):
        first = identity_value(kind, dt, True)     # NaN (ints: lowest / highest): the first element wins

        def reset(idx, W):
            ii, drop = segment_row(idx)
            oidx = [(ii, 0)] + idx[ri:]
            cur = load_buf(b, out, oidx, W)
            store_buf(b, out, oidx, b.select(drop, cur, const(dt, first, W)), W)
        walk_vector_last(kb, ds, ri, reset)

    def body(idx, W):
        ii, drop = segment_row(idx)
        oidx = [(ii, 0)] + idx[ri:]
        cur = load_buf(b, out, oidx, W)
        new = _combine(kb, kind, dt, cur, kb.gen(data, idx, W))
        store_buf(b, out, oidx, b.select(drop, cur, new), W)
    walk_vector_last(kb, ds, ri, body)


MATERIALISE = {"SegmentReduction": _segment_reduction}
NEEDS_BUFFER = {"SegmentReduction": (1,)}
