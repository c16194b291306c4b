"""Broadcasting between values of different run-time rows (lower_rows.py plans, this
file emits), as TF and the interpreter do: rows R1 and R2 are compatible when equal or
when one is 1, the result has the other's rows; anything else is TF's "Incompatible
shapes" (ERR_ROWS_MISMATCH) and 0 rows.

* ``bcast`` -- an elementwise op whose operands come from different sources: its result
  is a source of its own (the broadcast count); an operand of 1 row is read at row 0
  for every row, the others at the row itself.
* ``bmm_bcast`` -- BatchMatMulV2 whose operands come from different sources: TF
  broadcasts the batch dim as above (lower_rows_matmul's per-row products, an operand
  of 1 row read at row 0).
* ``bcast_to`` -- BroadcastToShapeOf(x, ref), x and ref of different sources (the
  gradient of ``rowsum``: a second derivative): ref's rows; x's rows as they are where
  the counts agree, its row 0 for every row where it has 1; else TF's error.
* ``rowsum`` -- SumToShape(g, x) of the same shape, g and x of different sources (the
  gradient of such a broadcast; passes/simplify.py keeps it): x's rows; g's rows as they
  are where the counts agree, summed in row order into x's one row where x has 1.
* ``bcast_static`` -- an elementwise op of run-time rows and a static operand of T rows
  (``stack * w``, ``w`` of ``[T, 1]``): TF's shapes make the result static, T rows; each
  run-time row count must be T or 1 (else ERR_ROWS_MISMATCH, nothing computed). Its
  gradient, SumToShape(g of T rows, x of run-time rows), is ``rowsum`` with g's count
  static (a source given as an int).
"""
from .irutil import ERR_ROWS_MISMATCH, Buffer, bcast_idx, c64, const, load_buf, row_elems
from .lowering_tables import tables
from ..ops.registry import REGISTRY
from . import lower_rows_matmul as rows_matmul


def emit(kb, node, rn, alloc, live):
    """alloc(shape, dt, rows) -> the result's Rows; live(rows): 0 once an op has failed."""
    return {"bcast": _bcast, "rowsum": _rowsum, "bcast_to": _bcast_to}[rn.how](kb, node, rn, alloc, live)


def _rows(kb, src):
    """A source's run-time rows (an int source: a static count)."""
    return c64(src) if isinstance(src, int) else kb.buffers[src].rows


def _broadcast_rows(kb, sources):
    """The broadcast row count of ``sources`` (None: static, skipped), TF's error where
    two are neither equal nor 1."""
    b = kb.b
    srcs = [s for s in dict.fromkeys(sources) if s is not None]
    R = _rows(kb, srcs[0])
    for s in srcs[1:]:
        Ro = _rows(kb, s)
        ok = b.or_(b.icmp_signed("==", R, Ro), b.or_(b.icmp_signed("==", R, c64(1)), b.icmp_signed("==", Ro, c64(1))))
        kb.set_error(b.not_(ok), ERR_ROWS_MISMATCH)
        R = b.select(b.icmp_signed("==", R, c64(1)), Ro, R)
    return R


def emit_bmm(kb, node, rn, alloc, a, bv):
    """``bmm_bcast``; a, bv: the operands' buffers (Rows where of run-time rows)."""
    shape, dt = node.outputs[0]
    out = alloc(shape, dt, _broadcast_rows(kb, rn.check))
    one = tuple(False if s is None else kb.b.icmp_signed("==", _rows(kb, s), c64(1)) for s in rn.check)
    rows_matmul.bmm(kb, out, out.rows, a, bv, node.attrs["adj_x"], node.attrs["adj_y"], one)
    return [out]


def _bcast(kb, node, rn, alloc, live):
    b = kb.b
    shape, dt = node.outputs[0]
    out = alloc(shape, dt, _broadcast_rows(kb, rn.check))
    _emit_rows(kb, node, rn, out, out.rows)
    return [out]


def _emit_rows(kb, node, rn, out, rows):
    """out's ``rows`` rows: the op on its operands' rows (row r, or row 0 of one of 1 row)."""
    b = kb.b
    shape, dt = node.outputs[0]
    fn = tables()[0][node.op]
    opdef = REGISTRY[node.op]
    with kb.loop(rows) as r:
        row = Buffer(b.gep(out.ptr, [b.mul(r, c64(row_elems(shape)))]), shape[1:], dt)

        def gen(idx, W):
            full = [(r, 0)] + idx
            xs = []
            for k, (v, s) in enumerate(zip(node.inputs, rn.check)):
                if opdef.is_shape_only(k):
                    xs.append(None)
                    continue
                vi = bcast_idx(full, shape, kb.shape(v))
                if s is not None:   # its own row, or row 0 where it has one
                    vi[0] = (b.select(b.icmp_signed("==", _rows(kb, s), c64(1)), c64(0), r), 0)
                xs.append(kb.gen(v, vi, W))
            return fn(kb, node, xs, W)
        kb.emit_nest(row, gen)


def static_rows(program, n, dyn, elementwise):
    """Whether node ``n``, reading values of run-time rows ``dyn``, is ``bcast_static``: an
    elementwise op whose result TF's shapes make static (a static operand's rows)."""
    out = n.outputs[0][0] if len(n.outputs) == 1 else None
    if (n.op not in elementwise or n.op == "AddN" or out is None or not out or None in out
            or any(REGISTRY[n.op].is_shape_only(k) for k in range(len(n.inputs)))):
        return False
    return all(len(program.shape(v)) == len(out) for v in dyn)


def emit_static(kb, node, rn, outs, live):
    """``bcast_static``: each run-time row count checked against the result's T rows (or 1)."""
    b = kb.b
    shape, _ = node.outputs[0]
    T = c64(shape[0])
    for s in dict.fromkeys(rn.check):
        if s is not None:
            R = _rows(kb, s)
            kb.set_error(b.not_(b.or_(b.icmp_signed("==", R, T), b.icmp_signed("==", R, c64(1)))), ERR_ROWS_MISMATCH)
    _emit_rows(kb, node, rn, outs[0], live(T))   # (0 rows once a check failed: nothing read past a value)
    return outs


def _bcast_to(kb, node, rn, alloc, live):
    b = kb.b
    x = node.inputs[0]
    Rx, R = _rows(kb, rn.check[0]), _rows(kb, rn.src)
    one = b.icmp_signed("==", Rx, c64(1))
    kb.set_error(b.not_(b.or_(b.icmp_signed("==", Rx, R), one)), ERR_ROWS_MISMATCH)
    shape, dt = node.outputs[0]
    out = alloc(shape, dt, R)
    with kb.loop(out.rows) as r:
        row = Buffer(b.gep(out.ptr, [b.mul(r, c64(out.row_elems))]), shape[1:], dt)

        def gen(idx, W):
            vi = bcast_idx([(r, 0)] + idx, shape, kb.shape(x))
            vi[0] = (b.select(one, c64(0), r), 0)
            return kb.gen(x, vi, W)
        kb.emit_nest(row, gen)
    return [out]


def _rowsum(kb, node, rn, alloc, live):
    b = kb.b
    g = node.inputs[0]
    Rg, Rx = _rows(kb, rn.check[0]), _rows(kb, rn.src)
    same = b.icmp_signed("==", Rg, Rx)
    one = b.icmp_signed("==", Rx, c64(1))
    kb.set_error(b.not_(b.or_(same, one)), ERR_ROWS_MISMATCH)
    shape, dt = node.outputs[0]
    out = alloc(shape, dt, Rx)
    row_shape, n = shape[1:], out.row_elems

    def row(r):
        return Buffer(b.gep(out.ptr, [b.mul(r, c64(n))]), row_shape, dt)
    with kb.loop(b.select(same, out.rows, c64(0))) as r:   # as they are
        kb.emit_nest(row(r), lambda idx, W: kb.gen(g, [(r, 0)] + idx, W))
    summing = b.and_(b.not_(same), b.icmp_signed("==", out.rows, c64(1)))
    with kb.loop(b.select(summing, c64(1), c64(0))):
        kb.emit_nest(row(c64(0)), lambda idx, W: const(dt, 0, W))
    with kb.loop(b.select(summing, live(Rg), c64(0))) as r:   # g's rows into row 0, in order
        acc = row(c64(0))
        kb.emit_nest(acc, lambda idx, W: _add(b, dt, load_buf(b, acc, idx, W), kb.gen(g, [(r, 0)] + idx, W)))
    return [out]


def _add(b, dt, x, y):
    return b.fadd(x, y) if dt.is_floating else b.add(x, y)
