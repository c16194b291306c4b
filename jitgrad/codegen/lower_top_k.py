"""TopKV2 and its gradient pair (ops/sort_ops.py).

TopKV2 (MATERIALISE): per last-axis row, an insertion into the k-long output row: elements in
index order, each shifted up past the kept ones it beats (strictly: ties stay in index order,
TF's rule; NaN beats every number, jitgrad's rule). O(n) for a row already in order, O(n k) at
worst (a full sort of a reversed row is O(n^2)): the rows tf.sort sees in practice are short.
TopKGrad (MATERIALISE) scatters a gradient to its indices along the last axis; TakeAlongLastAxis
(LAYOUT) gathers there. Both check every index in the kernel (ERR_GATHER_RANGE) and clamp a bad
one to 0, so nothing outside a buffer is ever read or written.
"""
from .irutil import ERR_GATHER_RANGE, I64, c64, const, load_buf, scalarise, store_buf


def _beats(kb, dt, a, b_):
    """i1: a sorts before b_ (larger; NaN above every number)."""
    b = kb.b
    if dt.is_floating:
        a_nan = b.fcmp_unordered("uno", a, a)
        b_num = b.fcmp_ordered("ord", b_, b_)
        return b.or_(b.fcmp_ordered(">", a, b_), b.and_(a_nan, b_num))
    return b.icmp_unsigned(">", a, b_) if dt.is_unsigned else b.icmp_signed(">", a, b_)


def _outer(kb, dims, body):
    """body(idx) for every index of ``dims`` (nested loops)."""
    def rec(k, idx):
        if k == len(dims):
            body(idx)
            return
        with kb.loop(dims[k]) as i:
            rec(k + 1, idx + [(i, 0)])
    rec(0, [])


def _index_value(kb, v, out_dt):
    return kb.b.trunc(v, const(out_dt, 0).type) if out_dt.size < 8 else v


def _top_k(kb, node, outs, dry):
    if dry:
        return
    x = node.inputs[0]
    vals, inds = outs
    shape = kb.shape(x)
    n, k = shape[-1], node.attrs["k"]
    if k == 0 or any(d == 0 for d in shape):
        return
    dt, idt = kb.dtype(x), inds.dtype
    b = kb.b
    fn = b.function
    filled, pos = kb.alloca(I64), kb.alloca(I64)

    def row(oidx):
        b.store(c64(0), filled)
        with kb.loop(n, vectorise=False) as i:
            v = kb.gen(x, oidx + [(i, 0)], 1)
            c = b.load(filled)
            full = b.icmp_signed(">=", c, c64(k))
            last = load_buf(b, vals, oidx + [(c64(k - 1), 0)], 1)       # (read only when full)
            take = b.or_(b.not_(full), _beats(kb, dt, v, last))
            b.store(b.select(full, c, b.add(c, c64(1))), filled)
            with b.if_then(take):
                b.store(b.select(full, c64(k - 1), c), pos)
                head, check, shift, done = (fn.append_basic_block(f"topk.{s}") for s in ("head", "check", "shift",
                                                                                          "done"))
                b.branch(head)
                b.position_at_end(head)
                p = b.load(pos)
                b.cbranch(b.icmp_signed(">", p, c64(0)), check, done)
                b.position_at_end(check)
                q = b.sub(p, c64(1))
                prev = load_buf(b, vals, oidx + [(q, 0)], 1)
                b.cbranch(_beats(kb, dt, v, prev), shift, done)
                b.position_at_end(shift)
                store_buf(b, vals, oidx + [(p, 0)], prev, 1)
                store_buf(b, inds, oidx + [(p, 0)], load_buf(b, inds, oidx + [(q, 0)], 1), 1)
                b.store(q, pos)
                b.branch(head)
                b.position_at_end(done)
                p = b.load(pos)
                store_buf(b, vals, oidx + [(p, 0)], v, 1)
                store_buf(b, inds, oidx + [(p, 0)], _index_value(kb, i, idt), 1)
    _outer(kb, shape[:-1], row)


def _checked_index(kb, ind, idx, n):
    """The index at idx as i64, range-checked against n and clamped to 0 when bad."""
    b = kb.b
    ii = kb.gen(ind, idx, 1)
    if kb.dtype(ind).size < 8:
        ii = b.sext(ii, I64)
    bad = b.or_(b.icmp_signed("<", ii, c64(0)), b.icmp_signed(">=", ii, c64(n)))
    kb.set_error(bad, ERR_GATHER_RANGE)
    return b.select(bad, c64(0), ii)


def _top_k_grad(kb, node, outs, dry):
    if dry:
        return
    g, ind, _ = node.inputs
    out = outs[0]
    dt = out.dtype
    b = kb.b
    kb.emit_nest(out, lambda idx, W: const(dt, 0, W))
    gs = kb.shape(g)
    n = out.shape[-1]
    if any(d == 0 for d in gs):
        return

    def elem(idx):
        ii = _checked_index(kb, ind, idx, n)
        if n == 0:
            return
        oidx = idx[:-1] + [(ii, 0)]
        cur = load_buf(b, out, oidx, 1)
        v = kb.gen(g, idx, 1)
        store_buf(b, out, oidx, b.fadd(cur, v) if dt.is_floating else b.add(cur, v), 1)
    _outer(kb, gs, elem)


def _take_along_last_axis(kb, node, j, idx, W):
    p, ind = node.inputs
    n = kb.shape(p)[-1]
    dt = node.outputs[0][1]

    def f(ix, W_):
        ii = _checked_index(kb, ind, ix, n)
        if n == 0:
            return const(dt, 0, W_)
        return kb.gen(p, ix[:-1] + [(ii, 0)], W_)
    return scalarise(kb.b, f, idx, W)


MATERIALISE = {"TopKV2": _top_k, "TopKGrad": _top_k_grad}
LAYOUT = {"TakeAlongLastAxis": _take_along_last_axis}
NEEDS_BUFFER = {"TopKGrad": (1,), "TakeAlongLastAxis": (0, 1)}     # (as GatherGrad, GatherV2)
