"""Rows picked out of a value of run-time rows by indices known when the kernel runs
(lower_rows.py plans, this file emits):

* ``gather`` -- tf.gather(x, indices) along dim 0 of x [R, ...], indices of a static
  shape (fed or constant): a static result; every index is checked against R (TF's
  InvalidArgumentError, ERR_GATHER_RANGE) before its row is read, and a bad one reads a
  zero from the kernel's own memory instead (R may be 0: no row 0 to fall back on);
* ``row`` -- x[k], k a constant (negative: from the end), checked against R
  (ERR_ROW_INDEX); ``row_grad`` -- its gradient, zero rows but row k;
* ``rowslice`` -- x[a:b:s] (a, b, s constants or fed -- a DynamicStridedSlice kept
  unspecialised, its bounds read as the kernel runs; s == 0 is ERR_SLICE_STEP -- with
  Python's (and TF's strided-slice) clamping on the run-time R):
  rows of their own (a source of its own, lower_rows.py); ``rowslice_grad`` -- its
  gradient: zero rows, g's rows written to rows a, a+s, ... (g's rows checked to be
  the slice's count, ERR_ROWS_MISMATCH);
* ``gather_grad`` -- its gradient: zero rows [R, ...], then each index's slice of g
  added into its row in index order (duplicates sum in a fixed order), a bad index
  skipped after it set the error;
* ``gather_grad_inner`` -- the gradient of tf.gather(x, indices, axis > 0) (the gather
  itself moves data within a row: lower_rows_layout.py): per row, zeros, then g's row
  added in at each index of the axis in a fixed order, indices checked against the
  axis's static extent (ERR_GATHER_RANGE).

As TF's kernel, an empty gather (no elements to copy) checks nothing.
"""
from llvmlite import ir

from .. import dtypes
from ..shapes import num_elements
from .irutil import (ERR_GATHER_RANGE, ERR_ROW_INDEX, ERR_ROWS_MISMATCH, ERR_SLICE_STEP, I64, Buffer, Unsupported, c64,
                     const, load_buf, mem_type, scalarise, store_buf)


def _rows_only(kb, node, outs, dry):
    raise Unsupported(f"{node.op} with run-time bounds is compiled only on a value of run-time rows")


# x[a:b:s] with run-time bounds reaches the kernel only on a value of run-time rows
# (ops/array_ops_dynamic.slices_run_time_rows), which lower_rows.py plans: never this table's entry
MATERIALISE = {"DynamicStridedSlice": _rows_only, "DynamicStridedSliceGrad": _rows_only}


def how(program, n, dyn):
    """"gather" / "gather_grad" or None for node n (dyn: its operands of run-time rows)."""
    if n.op == "GatherV2" and n.attrs["axis"] % len(program.shape(n.inputs[0])) == 0 and \
            n.inputs[0] in dyn and n.inputs[1] not in dyn and None not in n.outputs[0][0]:
        return "gather"
    if n.op == "GatherGrad" and n.attrs["axis"] % len(n.outputs[0][0]) == 0 and n.inputs[0] not in dyn and \
            n.inputs[1] not in dyn and n.inputs[2] in dyn:
        return "gather_grad"
    if n.op == "GatherGrad" and n.attrs["axis"] % len(n.outputs[0][0]) != 0 and n.inputs[0] in dyn and \
            n.inputs[1] not in dyn and n.inputs[2] in dyn:
        return "gather_grad_inner"
    if _slice_spec(n.attrs.get("spec")) is not None:
        if n.op in ("StridedSlice", "DynamicStridedSlice") and n.inputs[0] in dyn:
            return "rowslice"
        if n.op in ("StridedSliceGrad", "DynamicStridedSliceGrad") and n.inputs[0] in dyn and n.inputs[1] in dyn:
            return "rowslice_grad"
    if _row_spec(n.attrs.get("spec")) is not None:
        if n.op == "StridedSlice" and n.inputs[0] in dyn:
            return "row"
        if n.op == "StridedSliceGrad" and n.inputs[0] not in dyn and n.inputs[1] in dyn:
            return "row_grad"
    return None


def _row_spec(spec):
    """k where the slice spec is x[k] (one int), else None."""
    return spec[0][1] if spec and len(spec) == 1 and spec[0][0] == "int" else None


def _slice_spec(spec):
    """(a, b, s) where the slice spec is x[a:b:s] on dim 0 alone (each None, an int, or
    ("in", k): a run-time bound of a DynamicStridedSlice), else None."""
    if not spec or len(spec) != 1 or spec[0][0] != "slice":
        return None
    _, a, b, s = spec[0]
    return (a, b, 1 if s is None else s)


# the input holding bound ("in", k) of a DynamicStridedSlice[Grad] spec (k counts from
# 1 after x; the gradient's inputs are g, x, then the bounds)
_BOUNDS_AT = {"StridedSlice": 0, "StridedSliceGrad": 1, "DynamicStridedSlice": 0, "DynamicStridedSliceGrad": 1}


def _slice_part(kb, node, p):
    """One part of a slice spec as an i64: None stays None, an int a constant, ("in", k)
    the run-time value of that input."""
    if p is None or isinstance(p, int):
        return p if p is None else c64(p)
    v = node.inputs[p[1] + _BOUNDS_AT[node.op]]
    x = kb.gen(v, [], 1)
    return kb.b.sext(x, I64) if kb.dtype(v).size < 8 else x


def slice_rows(kb, node, rows):
    """(first row, row count, step) of x[a:b:s] over ``rows`` rows, each an i64 (a, b, s
    constants or read when the kernel runs), clamped as Python slices and TF's strided
    slice: bounds into [0, rows] for s > 0, into [-1, rows - 1] for s < 0, a missing
    start / stop the first / past-the-last row in s's direction. s == 0 is TF's error
    (ERR_SLICE_STEP), counted as 0 rows."""
    b_ = kb.b
    a, b, s = (_slice_part(kb, node, p) for p in _slice_spec(node.attrs["spec"]))
    zero = b_.icmp_signed("==", s, c64(0))
    kb.set_error(zero, ERR_SLICE_STEP)
    s = b_.select(zero, c64(1), s)
    pos = b_.icmp_signed(">", s, c64(0))
    lo = b_.select(pos, c64(0), c64(-1))
    hi = b_.select(pos, rows, b_.sub(rows, c64(1)))

    def clamp(v, default):
        if v is None:
            return default
        v = b_.select(b_.icmp_signed("<", v, c64(0)), b_.add(rows, v), v)
        v = b_.select(b_.icmp_signed("<", v, lo), lo, v)
        return b_.select(b_.icmp_signed(">", v, hi), hi, v)
    start = clamp(a, b_.select(pos, c64(0), hi))
    stop = clamp(b, b_.select(pos, rows, lo))
    span = b_.select(pos, b_.sub(stop, start), b_.sub(start, stop))
    mag = b_.select(pos, s, b_.neg(s))
    # ceil(span / |s|) as (span - 1) / |s| + 1: span + |s| - 1 overflows for a fed step
    # near the i64 limits (0 rows instead of 1); -INT64_MIN wraps to itself, and a span
    # of at most R + 1 divided by it is 0 as it should be
    n = b_.add(b_.sdiv(b_.sub(span, c64(1)), mag), c64(1))
    n = b_.select(b_.or_(zero, b_.icmp_signed("<", span, c64(1))), c64(0), n)
    return start, n, s


def _row_index(kb, node, rows):
    """(i64 row, i1 bad) of x[k] over ``rows`` rows (the error set where bad)."""
    b = kb.b
    k = _row_spec(node.attrs["spec"])
    r = b.add(c64(k), rows) if k < 0 else c64(k)
    bad = b.or_(b.icmp_signed("<", r, c64(0)), b.icmp_signed(">=", r, rows))
    kb.set_error(bad, ERR_ROW_INDEX)
    return r, bad


def _index(kb, ind, idx, rows):
    """(i64 index, i1 bad) of indices[idx], bad where not in [0, rows) (the error set)."""
    b = kb.b
    ii = kb.gen(ind, idx, 1)
    if kb.dtype(ind).size < 8:
        ii = b.sext(ii, I64)
    bad = b.or_(b.icmp_signed("<", ii, c64(0)), b.icmp_signed(">=", ii, rows))
    kb.set_error(bad, ERR_GATHER_RANGE)
    return ii, bad


def emit(kb, node, outs, rows, form, x):
    """x: the Rows of params (gather); rows: the live row count."""
    {"gather": _gather, "gather_grad": _gather_grad, "row": _row, "row_grad": _row_grad,
     "rowslice": _rowslice, "rowslice_grad": _rowslice_grad, "gather_grad_inner": _gather_grad_inner}[form](kb, node, outs[0], rows, x)


def _zero_rows(kb, out, rows):
    """out's ``rows`` rows set to zero (a gradient's rows no index or slice writes), a
    vectorised nest per row."""
    b = kb.b
    with kb.loop(rows) as r:
        row = Buffer(b.gep(out.ptr, [b.mul(r, c64(out.row_elems))]), out.shape[1:], out.dtype)
        kb.emit_nest(row, lambda idx, W: const(out.dtype, 0, W))


def _rowslice(kb, node, out, rows, x):
    """out (its rows already the slice's count, lower_rows.py) = x[a:b:s]."""
    b = kb.b
    start, _, step = slice_rows(kb, node, rows)
    with kb.loop(out.rows) as r:
        row = Buffer(b.gep(out.ptr, [b.mul(r, c64(out.row_elems))]), out.shape[1:], out.dtype)
        src = b.add(start, b.mul(r, step))
        kb.emit_nest(row, lambda idx, W: kb.gen(node.inputs[0], [(src, 0)] + idx, W))


def _rowslice_grad(kb, node, out, rows, g_rows):
    """out [rows, ...] = zeros but rows a, a+s, ... = g's rows (g_rows: how many g has)."""
    b = kb.b
    _zero_rows(kb, out, rows)
    start, n, step = slice_rows(kb, node, rows)
    kb.set_error(b.icmp_signed("!=", n, g_rows), ERR_ROWS_MISMATCH)
    n = b.select(kb.no_error_yet(), n, c64(0))
    with kb.loop(n) as q:
        at = b.add(start, b.mul(q, step))
        row = Buffer(b.gep(out.ptr, [b.mul(at, c64(out.row_elems))]), out.shape[1:], out.dtype)
        kb.emit_nest(row, lambda idx, W: kb.gen(node.inputs[0], [(q, 0)] + idx, W))


def _row(kb, node, out, rows, x):
    b = kb.b
    r, bad = _row_index(kb, node, rows)
    with b.if_then(b.not_(bad)):   # (else nothing is read: the error stops the result's use)
        kb.emit_nest(out, lambda idx, W: kb.gen(node.inputs[0], [(r, 0)] + idx, W))


def _row_grad(kb, node, out, rows, x):
    b = kb.b
    g = node.inputs[0]
    _zero_rows(kb, out, rows)
    r, bad = _row_index(kb, node, rows)
    with b.if_then(b.not_(bad)):
        dst = Buffer(b.gep(out.ptr, [b.mul(r, c64(out.row_elems))]), out.shape[1:], out.dtype)
        kb.emit_nest(dst, lambda idx, W: kb.gen(g, idx, W))


def _gather(kb, node, out, rows, x):
    b = kb.b
    ind = node.inputs[1]
    ri = len(kb.shape(ind))
    zero = kb.alloca(mem_type(out.dtype))   # what a bad index reads (then never published)
    b.store(ir.Constant(mem_type(out.dtype), 0), zero)

    def one(idx, _W):
        ii, bad = _index(kb, ind, idx[:ri], rows)
        at = b.mul(b.select(bad, c64(0), ii), c64(x.row_elems))
        for (base, _), s in zip(idx[ri:], x.strides[1:]):
            at = b.add(at, b.mul(base, c64(s)))
        v = b.load(b.select(bad, zero, b.gep(x.ptr, [at])))
        return b.icmp_unsigned("!=", v, ir.Constant(v.type, 0)) if out.dtype.name == "bool" else v
    kb.emit_nest(out, lambda idx, W: scalarise(b, one, idx, W))


def _unflatten(b, k, shape):
    """Flat index k (i64) of a row-major ``shape`` -> its index tuple (generator form)."""
    idx = []
    for d in reversed(shape):
        idx.append((b.srem(k, c64(d)), 0))
        k = b.sdiv(k, c64(d))
    return idx[::-1]


def _gather_grad(kb, node, out, rows, x):
    b = kb.b
    g, ind = node.inputs[0], node.inputs[1]
    ishape, row_shape = kb.shape(ind), out.shape[1:]
    n_idx = 1
    for d in ishape:
        n_idx *= d
    dt = out.dtype
    row = out.row_elems
    _zero_rows(kb, out, rows)
    if n_idx * row == 0:
        return
    with kb.loop(n_idx) as k:
        kidx = _unflatten(b, k, ishape)
        ii, bad = _index(kb, ind, kidx, rows)
        with b.if_then(b.not_(bad)):   # (g's slice added into the row by a vectorised nest)
            dst = Buffer(b.gep(out.ptr, [b.mul(ii, c64(row))]), row_shape, dt)
            kb.emit_nest(dst, lambda idx, W: _add(b, dt, load_buf(b, dst, idx, W), kb.gen(g, kidx + idx, W)))


def _gather_grad_inner(kb, node, out, rows, x):
    """out [rows, ...] = zeros, then each element of g's row r added into out's row r at
    its index along the axis, in g's element order (duplicates sum in a fixed order); a
    bad index sets the error and is skipped.

    The indices are the same for every row: checked once, before the rows, into a table
    (-1 where bad). Each row of g is computed into a scratch row by one vectorised nest
    (g is usually an inline chain: the gradient of what read the gather), then added in
    as blocks of the ``post`` elements after the axis, contiguous in both: vector adds
    where ``post`` is wide, one add per index where the axis is the last."""
    b = kb.b
    g, ind = node.inputs[0], node.inputs[1]
    axis = node.attrs["axis"] % len(out.shape)
    gs, ishape = kb.shape(g), kb.shape(ind)
    dt = out.dtype
    table, g_row = dry(kb, node)
    _zero_rows(kb, out, rows)
    pre, n_idx, post = num_elements(out.shape[1:axis]), num_elements(ishape), num_elements(out.shape[axis + 1:])
    if pre * n_idx * post == 0:
        return
    # (an empty row count reads no index: TF's empty gather checks nothing)
    with kb.loop(b.select(b.icmp_signed(">", rows, c64(0)), c64(n_idx), c64(0))) as k:
        ii, bad = _index(kb, ind, _unflatten(b, k, ishape), c64(out.shape[axis]))
        store_buf(b, table, [(k, 0)], b.select(bad, c64(-1), ii), 1)
    extent = out.shape[axis]
    with kb.loop(rows) as r:
        kb.emit_nest(g_row, lambda idx, W: kb.gen(g, [(r, 0)] + idx, W))
        base = b.mul(r, c64(out.row_elems))
        with kb.loop(pre) as p, kb.loop(n_idx) as k:
            ii = load_buf(b, table, [(k, 0)], 1)
            with b.if_then(b.icmp_signed(">=", ii, c64(0))):
                src = Buffer(b.gep(g_row.ptr, [b.mul(b.add(b.mul(p, c64(n_idx)), k), c64(post))]), (post,), dt)
                at = b.add(base, b.mul(b.add(b.mul(p, c64(extent)), ii), c64(post)))
                dst = Buffer(b.gep(out.ptr, [at]), (post,), dt)
                kb.emit_nest(dst, lambda idx, W: _add(b, dt, load_buf(b, dst, idx, W), load_buf(b, src, idx, W)))


def dry(kb, node):
    """The scratch gather_grad_inner asks for (also in the kernel's dry run): the index
    table and one row of g."""
    g, ind = node.inputs[0], node.inputs[1]
    return (kb.scratch_buffer((max(num_elements(kb.shape(ind)), 1),), dtypes.int64, "gather_grad_idx"),
            kb.scratch_buffer(tuple(kb.shape(g)[1:]), kb.dtype(g), "gather_grad_row"))


def _add(b, dt, x, y):
    return b.fadd(x, y) if dt.is_floating else b.add(x, y)
