"""Concatenation along the run-time rows (lower_rows.py plans, this file emits):

* ``rowcat`` -- tf.concat(xs, 0) where some xs have run-time rows (the others static):
  rows of its own, the sum of the parts' (a source of its own); each part's rows are
  copied after the previous parts'.
* ``rowsplit`` -- its gradient (SplitToShapesOf along dim 0): part k is g's rows
  [off_k, off_k + n_k), n_k a static dim 0, the rows of part k's source, or, for the
  "rest" part, what the others leave of g's rows; the parts must add up to g's rows
  (ERR_ROWS_MISMATCH otherwise, and nothing is read).

``parts``: per input (rowcat) or output (rowsplit), the source of its run-time rows
(a lower_rows.py source Value), or None where its dim 0 is static.
"""
from .irutil import ERR_ROWS_MISMATCH, Buffer, c64, row_elems


def how(program, n, dyn):
    if n.op == "ConcatV2" and any(v in dyn for v in n.inputs) and n.attrs["axis"] % len(n.outputs[0][0]) == 0:
        return "rowcat"
    if n.op == "SplitToShapesOf" and n.inputs[0] in dyn and n.attrs["axis"] % len(program.shape(n.inputs[0])) == 0:
        return "rowsplit"
    return None


def part_sources(n, i, key, value):
    """parts (see the module docstring) of node n (index i); value(i, k) makes a Value."""
    if n.op == "ConcatV2":
        return tuple(key.get(v) for v in n.inputs)
    refs = list(n.inputs[1:])
    rest = n.attrs.get("rest")
    if rest is not None:
        refs.insert(rest, None)
    return tuple(value(i, k) if ref is None else key.get(ref) for k, ref in enumerate(refs))


def _count(kb, src, static_rows, live):
    return live(kb.buffers[src].rows) if src is not None else c64(static_rows)


def rows_of_concat(kb, node, parts, live):
    b = kb.b
    total = c64(0)
    for v, src in zip(node.inputs, parts):
        total = b.add(total, _count(kb, src, kb.shape(v)[0], live))
    return total


def emit_concat(kb, node, out, parts, live):
    b = kb.b
    off = c64(0)
    for v, src in zip(node.inputs, parts):
        n = _count(kb, src, kb.shape(v)[0], live)
        with kb.loop(n) as r:
            row = Buffer(b.gep(out.ptr, [b.mul(b.add(off, r), c64(out.row_elems))]), out.shape[1:], out.dtype)
            kb.emit_nest(row, lambda idx, W: kb.gen(v, [(r, 0)] + idx, W))
        off = b.add(off, n)


def split_counts(kb, node, parts, g_rows, live):
    """Each part's row count (the rest's: g's rows less the others'), after checking
    they add up to g's rows."""
    b = kb.b
    counts, known = [], c64(0)
    for (shape, _), src in zip(node.outputs, parts):
        if src is None or src.node != kb.regions.node_pos:
            counts.append(_count(kb, src, shape[0], live))
            known = b.add(known, counts[-1])
        else:
            counts.append(None)
    rest = b.sub(g_rows, known)
    rest = b.select(b.icmp_signed("<", rest, c64(0)), c64(0), rest)
    counts = [rest if c is None else c for c in counts]
    total = c64(0)
    for c in counts:
        total = b.add(total, c)
    kb.set_error(b.icmp_signed("!=", total, g_rows), ERR_ROWS_MISMATCH)
    return counts


def emit_split(kb, node, outs, counts):
    b = kb.b
    g = node.inputs[0]
    off = c64(0)
    ok = kb.no_error_yet()   # (the parts do not add up to g's rows: nothing read)
    for out, n in zip(outs, counts):
        n = b.select(ok, n, c64(0))
        if out is not None:
            with kb.loop(n) as r:
                row = Buffer(b.gep(out.ptr, [b.mul(r, c64(row_elems(out.shape)))]), out.shape[1:], out.dtype)
                src = b.add(off, r)
                kb.emit_nest(row, lambda idx, W: kb.gen(g, [(src, 0)] + idx, W))
        off = b.add(off, n)

