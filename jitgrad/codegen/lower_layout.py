"""Layout (data movement) lowerings as index maps.

LAYOUT: {op type: fn(kb, node, out_index, idx, W) -> value} maps an output
element index to input element(s).  Affine maps (transpose, slice, unstack,
split, unreduce) keep the vector lanes; non-affine ones (tile, gather,
concat, stack, strided-slice gradient) scalarise and read materialised inputs
(NEEDS_BUFFER) so that code size stays linear.
ALIAS: the ops marked reshape=True (ops/registry.py), free views of their
(materialised) input's buffer.
"""
import numpy as np
from llvmlite import ir

from ..ops.registry import ops_with
from ..shapes import normalize_axes
from .irutil import ERR_GATHER_RANGE, I64, bcast_idx, c64, const, iadd, imul, load_buf, mem_type, scalarise

ALIAS = ops_with("reshape")
# the extent slice_map assumes for a dim of run-time rows (codegen/lower_rows_layout.py
# lets through only slices taking all of it: start 0, step 1 whatever the extent)
RUN_TIME_ROWS = 1 << 40


def _in_shape(kb, node, k=0):
    return kb.shape(node.inputs[k])


def _transpose(kb, node, j, idx, W):
    perm = node.attrs["perm"]
    r = len(idx)
    if perm is None:
        perm = tuple(reversed(range(r)))
    in_idx = [None] * r
    for k, p in enumerate(perm):
        in_idx[p] = idx[k]
    return kb.gen(node.inputs[0], in_idx, W)


def slice_map(spec, shape):
    """Per input dim: ("fix", c) or ("map", out_dim, start, step)."""
    consumed = sum(1 for s in spec if s[0] in ("int", "slice"))
    res = []
    dim = 0
    out = 0
    for s in spec:
        if s[0] == "...":
            for _ in range(len(shape) - consumed):
                res.append(("map", out, 0, 1))
                out += 1
                dim += 1
        elif s[0] == "new":
            out += 1
        elif s[0] == "int":
            c = s[1] if s[1] >= 0 else s[1] + shape[dim]
            res.append(("fix", c))
            dim += 1
        else:
            start, stop, step = slice(s[1], s[2], s[3]).indices(RUN_TIME_ROWS if shape[dim] is None else shape[dim])
            res.append(("map", out, start, step))
            out += 1
            dim += 1
    while dim < len(shape):
        res.append(("map", out, 0, 1))
        out += 1
        dim += 1
    return res


def _strided_slice(kb, node, j, idx, W):
    m = slice_map(node.attrs["spec"], _in_shape(kb, node))
    in_idx = []
    for e in m:
        if e[0] == "fix":
            in_idx.append((c64(e[1]), 0))
        else:
            _, o, start, step = e
            base, coeff = idx[o]
            in_idx.append((iadd(kb.b, c64(start), imul(kb.b, base, step)), coeff * step))
    return kb.gen(node.inputs[0], in_idx, W)


def _strided_slice_grad(kb, node, j, idx, W):
    g = node.inputs[0]
    ref_shape = node.outputs[0][0]
    m = slice_map(node.attrs["spec"], ref_shape)
    g_shape = kb.shape(g)
    # which output dims of the slice (g dims) correspond to input dims
    dim_of = {e[1]: d for d, e in enumerate(m) if e[0] == "map"}
    dt = node.outputs[0][1]

    def scalar(ix, _W):
        b = kb.b
        ok = ir.Constant(ir.IntType(1), 1)
        gidx = [(c64(0), 0)] * len(g_shape)
        for d, e in enumerate(m):
            i = ix[d][0]
            if e[0] == "fix":
                ok = b.and_(ok, b.icmp_signed("==", i, c64(e[1])))
                continue
            _, o, start, step = e
            n = RUN_TIME_ROWS if g_shape[o] is None else g_shape[o]
            rel = b.sub(i, c64(start))
            q = b.sdiv(rel, c64(step))
            r = b.srem(rel, c64(step))
            ok = b.and_(ok, b.icmp_signed("==", r, c64(0)))
            ok = b.and_(ok, b.icmp_signed(">=", q, c64(0)))
            ok = b.and_(ok, b.icmp_signed("<", q, c64(n)))
            gidx[o] = (q, 0)
        gidx = [(b.select(ok, q, c64(0)), 0) for q, _ in gidx]
        if any(d == 0 for d in g_shape):
            return const(dt, 0)
        v = kb.gen(g, gidx, 1)
        return b.select(ok, v, const(dt, 0))
    del dim_of
    return scalarise(kb.b, scalar, idx, W)


def _tile(kb, node, j, idx, W):
    mult = node.attrs["multiples"]
    shp = _in_shape(kb, node)
    x = node.inputs[0]
    lane_nonaffine = any(mk > 1 and d > 1 and idx[k][1] != 0 for k, (mk, d) in enumerate(zip(mult, shp)))

    def f(ix, W_):
        in_idx = []
        for k, (mk, d) in enumerate(zip(mult, shp)):
            base, coeff = ix[k]
            if d == 1:
                in_idx.append((c64(0), 0))
            elif mk == 1:
                in_idx.append((base, coeff))
            else:
                in_idx.append((kb.b.urem(base, c64(d)), 0))
        return kb.gen(x, in_idx, W_)
    if lane_nonaffine:
        return scalarise(kb.b, f, idx, W)
    return f(idx, W)


def _concat(kb, node, j, idx, W):
    out_shape = node.outputs[0][0]
    axis = node.attrs["axis"] % len(out_shape)
    b = kb.b

    def f(ix, W_):
        i = ix[axis][0]
        off = 0
        val = None
        for inp in node.inputs:
            n = kb.shape(inp)[axis]
            if n == 0:
                continue
            rel = iadd(kb.b, i, -off) if off else i
            if not isinstance(rel, ir.Constant):
                rel = b.select(b.icmp_signed("<", rel, c64(0)), c64(0), rel)
                rel = b.select(b.icmp_signed(">", rel, c64(n - 1)), c64(n - 1), rel)
            else:
                rel = c64(min(max(rel.constant, 0), n - 1))
            sub = list(ix)
            sub[axis] = (rel, 0)
            v = kb.gen(inp, sub, W_)
            if val is None:
                val = v
            else:
                val = b.select(b.icmp_signed(">=", i, c64(off)), v, val)
            off += n
        if val is None:   # every input is empty along the axis: so is the output, never read
            val = const(node.outputs[0][1], 0, W_)
        return val
    if W > 1 and idx[axis][1] != 0:
        return scalarise(kb.b, f, idx, W)
    return f(idx, W)


def _pack(kb, node, j, idx, W):
    out_shape = node.outputs[0][0]
    axis = node.attrs["axis"] % len(out_shape)
    b = kb.b

    def f(ix, W_):
        k = ix[axis][0]
        sub = ix[:axis] + ix[axis + 1:]
        val = None
        for n, inp in enumerate(node.inputs):
            v = kb.gen(inp, sub, W_)
            val = v if val is None else b.select(b.icmp_signed("==", k, c64(n)), v, val)
        return val
    if W > 1 and idx[axis][1] != 0:
        return scalarise(kb.b, f, idx, W)
    return f(idx, W)


def _unpack(kb, node, j, idx, W):
    axis = node.attrs["axis"] % len(_in_shape(kb, node))
    return kb.gen(node.inputs[0], idx[:axis] + [(c64(j), 0)] + idx[axis:], W)


def _split(kb, node, j, idx, W):
    g_shape = _in_shape(kb, node)
    axis = node.attrs["axis"] % len(g_shape)
    off = sum(shape[axis] for shape, _ in node.outputs[:j])   # (the parts, "rest" included)
    sub = list(idx)
    sub[axis] = (iadd(kb.b, idx[axis][0], off), idx[axis][1])
    return kb.gen(node.inputs[0], sub, W)


def _unreduce(kb, node, j, idx, W):
    ref_shape = node.outputs[0][0]
    g_shape = _in_shape(kb, node)
    axes = normalize_axes(node.attrs["axis"], len(ref_shape))
    if node.attrs["keepdims"]:
        return kb.gen(node.inputs[0], bcast_idx(idx, ref_shape, g_shape), W)
    sub = [ix for k, ix in enumerate(idx) if k not in axes]
    kept = tuple(d for k, d in enumerate(ref_shape) if k not in axes)
    return kb.gen(node.inputs[0], bcast_idx(sub, kept, g_shape), W)


def _gather(kb, node, j, idx, W):
    p, ind = node.inputs
    p_shape, i_shape = kb.shape(p), kb.shape(ind)
    axis = node.attrs["axis"] % len(p_shape)
    ri = len(i_shape)
    n = p_shape[axis]
    dt = node.outputs[0][1]
    b = kb.b
    iidx = idx[axis:axis + ri]
    idt = kb.dtype(ind)

    def f(ix, W_):
        ii = kb.gen(ind, ix[axis:axis + ri], 1)
        if idt.size < 8:
            ii = b.sext(ii, I64)
        bad = b.or_(b.icmp_signed("<", ii, c64(0)), b.icmp_signed(">=", ii, c64(n)))
        kb.set_error(bad, ERR_GATHER_RANGE)
        if n == 0 or any(d == 0 for d in p_shape):
            return const(dt, 0, W_)
        ii = b.select(bad, c64(0), ii)
        pidx = ix[:axis] + [(ii, 0)] + ix[axis + ri:]
        return kb.gen(p, pidx, W_)
    if W > 1 and any(c != 0 for _, c in iidx):
        return scalarise(kb.b, f, idx, W)
    return f(idx, W)


def _in_window(b, pos, extent):
    return b.and_(b.icmp_signed(">=", pos, c64(0)), b.icmp_signed("<", pos, c64(extent)))


def _conv_patches(kb, node, j, idx, W):
    """[N, OH, OW, KH, KW, C]: the input pixel window (oh, ow)'s tap (i, j) reads, or a zero
    in the padding. Vector lanes along the channels share one pixel, one bounds check."""
    x = node.inputs[0]
    _, h, w, _ = kb.shape(x)
    (sh, sw), (dh, dw), (pt, pl) = node.attrs["strides"], node.attrs["dilations"], node.attrs["pads"]
    dt = node.outputs[0][1]
    b = kb.b

    def f(ix, W_):
        n, (oh, _), (ow, _), (i, _), (jj, _), c = ix
        row = iadd(b, iadd(b, imul(b, oh, sh), imul(b, i, dh)), -pt)
        col = iadd(b, iadd(b, imul(b, ow, sw), imul(b, jj, dw)), -pl)
        ok = b.and_(_in_window(b, row, h), _in_window(b, col, w))
        v = kb.gen(x, [n, (b.select(ok, row, c64(0)), 0), (b.select(ok, col, c64(0)), 0), c], W_)
        return b.select(ok, v, const(dt, 0, W_))
    if W > 1 and any(idx[d][1] for d in range(1, 5)):
        return scalarise(b, f, idx, W)
    return f(idx, W)


def _window_slot(b, pos, pad, k, dilation, stride, extent):
    """(i1, slot): whether the window tap k at dilation reads input position pos from a
    window, and that window's index."""
    rel = iadd(b, pos, pad - k * dilation)
    q = b.sdiv(rel, c64(stride)) if stride > 1 else rel
    ok = _in_window(b, q, extent)
    if stride > 1:
        ok = b.and_(ok, b.and_(b.icmp_signed(">=", rel, c64(0)), b.icmp_signed("==", b.srem(rel, c64(stride)), c64(0))))
    return ok, b.select(ok, q, c64(0))


def _conv_patches_grad(kb, node, j, idx, W):
    """The input's gradient: the sum of the patches' slots that read each pixel, taps last
    to first (the scatter-add order of the gather this replaced; ops/conv.py)."""
    g = node.inputs[0]
    _, oh, ow, kh, kw, _ = kb.shape(g)
    (sh, sw), (dh, dw), (pt, pl) = node.attrs["strides"], node.attrs["dilations"], node.attrs["pads"]
    dt = node.outputs[0][1]
    b = kb.b

    def f(ix, W_):
        n, (row, _), (col, _), c = ix
        acc = const(dt, 0, W_)
        for i in reversed(range(kh)):
            ok_r, r = _window_slot(b, row, pt, i, dh, sh, oh)
            for jj in reversed(range(kw)):
                ok_c, q = _window_slot(b, col, pl, jj, dw, sw, ow)
                v = kb.gen(g, [n, (r, 0), (q, 0), (c64(i), 0), (c64(jj), 0), c], W_)
                v = b.select(b.and_(ok_r, ok_c), v, const(dt, 0, W_))
                acc = b.fadd(acc, v) if dt.is_floating else b.add(acc, v)
        return acc
    if W > 1 and any(idx[d][1] for d in (1, 2)):
        return scalarise(b, f, idx, W)
    return f(idx, W)


def _shape(kb, node, j, idx, W):
    dims = kb.shape(node.inputs[0])
    dt = node.outputs[0][1]

    def f(ix, W_):
        i = ix[0][0]
        val = const(dt, 0)
        for k, d in enumerate(dims):
            val = kb.b.select(kb.b.icmp_signed("==", i, c64(k)), const(dt, d), val)
        return val
    return scalarise(kb.b, f, idx, W)


def _size_ratio(kb, node, j, idx, W):
    x, y = (kb.shape(v) for v in node.inputs)
    r = max(int(np.prod(x, dtype=np.int64)), 1) // max(int(np.prod(y, dtype=np.int64)), 1)
    return const(node.outputs[0][1], r, W)


def _literal(kb, node, j, idx, W):
    """A constant baked in by the passes: an inline constant when uniform,
    otherwise a private global array."""
    val = node.attrs["value"]
    shape, dt = node.outputs[0]
    flat = np.asarray(val).reshape(-1)
    if flat.size == 0:
        return const(dt, 0, W)
    if np.all(flat.view(np.uint8).reshape(flat.size, -1) == flat[:1].view(np.uint8)):
        return const(dt, flat[0], W)

    def make_global(name):
        mt = mem_type(dt)
        aty = ir.ArrayType(mt, flat.size)
        items = [int(x) for x in flat.astype(np.int64)] if not dt.is_floating else [float(x) for x in flat]
        g = ir.GlobalVariable(kb.b.module, aty, name=name)
        g.global_constant = True
        g.linkage = "private"
        g.initializer = ir.Constant(aty, [ir.Constant(mt, x) for x in items])
        return g
    buf = kb.literal_buffer(id(node), shape, dt, make_global)
    return load_buf(kb.b, buf, idx, W)


LAYOUT = {
    "Literal": _literal,
    "Transpose": _transpose,
    "StridedSlice": _strided_slice,
    "StridedSliceGrad": _strided_slice_grad,
    "Tile": _tile,
    "ConcatV2": _concat,
    "Pack": _pack,
    "Unpack": _unpack,
    "SplitToShapesOf": _split,
    "Unreduce": _unreduce,
    "GatherV2": _gather,
    "ConvPatches": _conv_patches,
    "ConvPatchesGrad": _conv_patches_grad,
    "Shape": _shape,
    "SizeRatio": _size_ratio,
}

NEEDS_BUFFER = {
    "StridedSliceGrad": (0,),
    "Tile": (0,),
    "ConcatV2": "all",
    "Pack": "all",
    "GatherV2": (0, 1),
    "ConvPatches": (0,),         # each pixel is read by every window holding it: computed once
    "ConvPatchesGrad": (0,),
}
