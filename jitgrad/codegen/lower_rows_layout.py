"""Which layout ops on values of run-time rows (lower_rows.py) move data only within a
row: output row r is made of input row r alone, so lower_layout.py's index maps (its
LAYOUT generators) compute them unchanged inside the row loop, dim 0 passed through.

* Transpose with perm[0] == 0; Tile with multiples[0] == 1;
* ConcatV2 / Pack along an axis other than 0, every input of the same run-time rows
  (a static input would have a fixed dim 0 of its own: never the case in a valid graph);
* SplitToShapesOf (the concat's gradient) and Unpack (the stack's) along an axis other than 0;
* GatherV2 on an inner axis with indices not of run-time rows (bounds-checked against
  the axis's static extent, as lower_layout.py does);
* StridedSlice / StridedSliceGrad whose spec takes all of dim 0 (``x[:, 1:3]``,
  ``x[..., 0]``): lower_layout.slice_map maps dim 0 to itself (start 0, step 1).

and TileGrad (the tile's gradient) with multiples[0] == 1: a sum over the tiles of each
row (``emit_tile_grad``).
"""
from .irutil import iadd, imul
from .lower_reduction import emit_reduce


def keeps_rows(program, n, dyn):
    """Whether node n is such a row-local layout op."""
    shape = lambda v: program.nodes[v.node].outputs[v.index][0]   # noqa: E731
    op, a = n.op, n.attrs
    data = n.inputs if op not in ("StridedSliceGrad", "SplitToShapesOf") else n.inputs[:1]
    if op in ("Transpose", "Tile", "StridedSlice", "GatherV2", "StridedSliceGrad", "SplitToShapesOf", "Unpack") and \
            data[0] not in dyn:
        return False
    if op == "Transpose":
        return a["perm"] is not None and a["perm"][0] == 0 or len(shape(n.inputs[0])) == 1
    if op == "Tile":
        return a["multiples"][0] == 1
    if op in ("ConcatV2", "Pack"):
        rank = len(n.outputs[0][0])
        return a["axis"] % rank != 0 and all(v in dyn for v in data)
    if op in ("SplitToShapesOf", "Unpack"):
        return a["axis"] % len(shape(n.inputs[0])) != 0
    if op == "GatherV2":
        return a["axis"] % len(shape(n.inputs[0])) != 0 and n.inputs[1] not in dyn and not a.get("batch_dims")
    if op in ("StridedSlice", "StridedSliceGrad"):
        ref = shape(n.inputs[0]) if op == "StridedSlice" else n.outputs[0][0]
        return _takes_all_rows(a["spec"], len(ref))
    return False


def _takes_all_rows(spec, rank):
    """The slice spec keeps dim 0 whole, at output dim 0."""
    consumed = sum(1 for s in spec if s[0] in ("int", "slice"))
    for s in spec:
        if s[0] == "...":
            return rank - consumed > 0
        if s[0] != "slice":   # an int drops dim 0, a new axis comes before it
            return False
        return s[1] in (None, 0) and s[2] is None and s[3] in (None, 1)
    return True   # an empty spec: everything


def is_tile_grad(program, n, dyn):
    """TileGrad of a tile within each row (multiples[0] == 1): a reduction per row."""
    return n.op == "TileGrad" and n.attrs["multiples"][0] == 1 and n.inputs[0] in dyn


def emit_tile_grad(kb, node, out, rows):
    """out[r, ...] = the sum over the tiles of g's row r (lower_reduction's fixed order):
    dims (rows, m1, d1, m2, d2, ...), the m's reduced (as lower_reduction._tile_grad,
    whose dim 0 pair is (1, rows) here: rows alone)."""
    g = node.inputs[0]
    mult, ref = node.attrs["multiples"], node.outputs[0][0]
    in_shape, red, out_map = [rows], set(), {0: 0}
    for k in range(1, len(ref)):
        red.add(len(in_shape))
        out_map[len(in_shape)] = None
        out_map[len(in_shape) + 1] = k
        in_shape += [mult[k], ref[k]]

    def gen_in(idx, W):
        gidx = [idx[0]]
        for k in range(1, len(ref)):
            (bm, cm), (bd, cd) = idx[2 * k - 1], idx[2 * k]
            gidx.append((iadd(kb.b, imul(kb.b, bm, ref[k]), bd), cm * ref[k] + cd))
        return kb.gen(g, gidx, W)
    emit_reduce(kb, out, tuple(in_shape), gen_in, red, out_map, "sum", kb.dtype(g))
