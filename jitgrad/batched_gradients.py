"""Batched reverse mode in graph mode: one backward pass for many cotangents.

``batched_gradients(ys, xs, cotangents)`` computes, for a batch of B output
gradients (``cotangents[i]`` has shape ``[B] + ys[i].shape``), the B
vector-Jacobian products at once: the result for each x has shape
``[B] + x.shape`` and row b equals ``tf.gradients(ys, x, grad_ys=[c[b] ...])``.
Jacobians (``batched_jacobian``: identity rows as cotangents),
``tf.hessians`` and ``GradientTape.jacobian`` / ``batch_jacobian`` inside
``jitgrad.function`` are built on it, instead of one gradient graph per row.

How (jax.vmap of a vjp, done on the graph):

1. ``tf.gradients`` builds the ordinary gradient graph once, with a stand-in
   seed tensor per y as ``grad_ys`` (so aggregation order, stop_gradients,
   unconnected handling are exactly tf.gradients').
2. The ops that graph just added are replayed in order; every op that reads
   (a value derived from) a seed is rebuilt with a *batching rule* that gives
   its output a leading batch dimension; ops that do not depend on the seeds
   (forward-derived values such as ``cos(x)``) are shared, unbatched. Only ops
   on which the requested gradients depend are rebuilt; the per-row graph from
   step 1 stays in the graph unused (the compiler's DCE drops it; it is small).

Batching rules (``_RULES``): elementwise/broadcasting ops (a batched operand of
lower rank than the output gets unit dims after the batch dim, so trailing
broadcasting against unbatched operands lines up), AddN, reductions (axes + 1),
the gradient helpers SumToShape / Unreduce / BroadcastToShapeOf / ReshapeLike /
StridedSliceGrad / GatherGrad / TileGrad / SplitToShapesOf (their shape-only
reference input becomes a ``[B] + ref.shape`` stand-in, which DCE removes),
reshape / expand / squeeze / transpose (perm ``[0] + [p + 1]``), slicing,
concat / pack / unpack, gather, tile, ConvPatches / ConvPatchesGrad (the batch
folded into the images), broadcast_to, fill, MatMul (a batched operand times an
unbatched matrix is ONE 2-D matmul of the batch folded into rows) and BatchMatMulV2,
While (while_batching.py: one loop over batched loop
variables, its body rebuilt by these rules) and If (cond_batching.py: one If of batched
branches, or a per-row select of both where the predicate differs per row). Anything else falls back to a per-row loop
(unstack, apply the op per row, stack): correct, just not vectorised.

Jacobians (``batched_jacobian``) start from identity rows kept as one-hot
batches (``_OneHot``: per row one nonzero at a static position) through
elementwise scaling, AddN, reshapes, transposes, slice-gradients and matmuls,
where a [B, k] x [k, n] GEMM becomes a gather; other ops get the dense tensor.

Numerics: elementwise ops, AddN (same operand order), reductions and the
layout ops compute every element exactly as the per-row graph does, so results
are bit-identical to the per-row implementation. Matmuls whose batched operand
is folded into a bigger GEMM may sum in a different blocking order: results
then agree to float rounding (tests use rtol 1e-5 in float32, 1e-12 in float64).
NaN/inf: one-hot rows skip the entries where the per-row graph computes 0 * nan;
where a factor they scaled by is not finite the dense pass is used instead
(``_exact_where_not_finite``: constants are checked when the graph is built, the
others by a run-time cond), so NaN lands where TF's per-row loop puts it.
"""
import contextlib

import numpy as np

from . import dtypes
from .convert import convert_to_tensor
from .cond_batching import batch_if
from .control_flow import cond
from .gradients import as_list as _as_list, gradients, to_graph_tensor as _to_graph_tensor
from .graph import Tensor
from .ops.array_ops import _spec_index, get_static_value
from .ops.complex_ops import conj
from .ops.registry import REGISTRY, apply_op, shape_only_input
from .shapes import normalize_axes, static_dims
from .while_batching import batch_while
from .while_batching_pred import batch_while_pred


class Unsupported(Exception):
    """The batched pass cannot handle this graph (callers fall back to per-row gradients)."""


class LoopPerRow(Unsupported):
    """The batched pass would apply a While per row (one its batching rule does not take:
    while_batching.py) to more than LOOP_ROWS_AT rows: B
    copies of the loop (and of its own reverse loops) in the kernel, whose compile time
    grows faster than B (a 64-element hessian through a 64x64 tanh recurrence: 31 s).
    Callers take the while_loop over rows instead (loop_jacobians.py): one copy, about
    1 s to compile whatever B; each row re-runs the forward loop, so a call costs more
    (2-3x at B = 8..32, measured) -- why small B keep their copies."""


LOOP_ROWS_AT = 16   # B above which a While per row makes the whole pass a loop over rows


# ============================================================ helpers
def _static(shape):
    """A TensorShape as a list of ints, or raise Unsupported."""
    dims = static_dims(shape)
    if dims is None:
        raise Unsupported(f"shape {shape} is not fully defined")
    return dims


def _rank(t):
    r = t.shape.rank
    if r is None:
        raise Unsupported(f"rank of {t.name} is unknown")
    return r


def _const(value, graph):
    return convert_to_tensor(value, graph=graph)


def _reshape(x, shape):
    if x.shape.is_fully_defined() and x.shape.as_list() == list(shape):
        return x
    return apply_op("Reshape", [x], {"shape": tuple(int(d) for d in shape)})


def _broadcast_to(x, shape):
    if x.shape.is_fully_defined() and x.shape.as_list() == list(shape):
        return x
    return apply_op("BroadcastTo", [x], {"shape": tuple(int(d) for d in shape)})


def _pad_after_batch(xb, row_rank, rank):
    """[B] + s -> [B] + [1] * (rank - len(s)) + s, so that trailing broadcasting lines rows up."""
    for _ in range(rank - row_rank):
        xb = apply_op("ExpandDims", [xb], {"axis": 1})
    return xb


def _swap_last2(xb):
    """Transpose of the last two dims of a rank-3 [B, p, q] tensor (a reshape when p or q is 1)."""
    b, p, q = _static(xb.shape)
    if p == 1 or q == 1:
        return _reshape(xb, [b, q, p])
    return apply_op("Transpose", [xb], {"perm": (0, 2, 1)})


class _Ctx:
    def __init__(self, graph, B):
        self.graph = graph
        self.B = B
        self._refs = {}
        # Unbatched tensors the one-hot rules scaled by: the one-hot result equals the
        # per-row graph's only where these are finite (per row, 0 * inf or 0 * nan at the
        # positions a one-hot skips is NaN), see ``_exact_where_not_finite``.
        self.onehot_factors = []
        # id(stacked output of the per-row fallback) -> its rows: the next per-row op reads
        # them directly, not Unpack(Pack(rows)) (rows of unknown shape, e.g. the per-iteration
        # values a While stacks over a trip count known at run time, cannot be packed in a kernel);
        # a function making the rows where they are built only if read (``rows_of``)
        self.rows = {}
        self.loop_shaped = {}   # id(tensor) -> _loop_shaped's answer
        self.loop_rows = False   # some op went per row for its run-time dims (_run_time_dims)
        # id(batched stack of a batched While, [B, T, ...]) -> the loop's own [T, B, ...] stack,
        # which the next While slices (while_batching.py: [B, T] with T known only at run time
        # does not compile)
        self.time_major = {}

    def rows_of(self, t):
        """The rows recorded for ``t`` (a list; made now if recorded as a function), or None."""
        rows = self.rows.get(id(t))
        if callable(rows):
            rows = self.rows[id(t)] = rows()
        return rows

    def nested(self, graph):
        """A context for the batched body of a While being built in ``graph``."""
        return _Ctx(graph, self.B)

    def shape_ref(self, ref, lead=()):
        """A tensor of shape [B] + lead + ref.shape, read only for its shape (DCE drops it)."""
        dims = [self.B] + list(lead) + _static(ref.shape)
        key = (tuple(dims), ref.dtype.name)
        t = self._refs.get(key)
        if t is None:
            zero = _const(np.zeros((), ref.dtype.np), self.graph)
            t = self._refs[key] = apply_op("Fill", [zero], {"dims": tuple(dims)}, name="batch_shape")
        return t

    def batched_unbatched(self, t):
        """An unbatched tensor broadcast to [B] + its shape."""
        return _broadcast_to(apply_op("ExpandDims", [t], {"axis": 0}), [self.B] + _static(t.shape))


# ============================================================ batching rules
# A rule gets (ctx, op, ins, flags) where ins[j] is the batched version of
# op.inputs[j] when flags[j] (shape [B] + op.inputs[j].shape), else the
# original input; it returns one tensor per output of op (with the batch
# dim), or None to use the per-row fallback.

def _rule_elementwise(ctx, op, ins, flags):
    rank = _rank(op.outputs[0])
    args = [(_pad_after_batch(t, _rank(o), rank) if f else t) for t, f, o in zip(ins, flags, op.inputs)]
    return [apply_op(op.type, args, op.attrs)]


def _rule_addn(ctx, op, ins, flags):
    args = [t if f else ctx.batched_unbatched(t) for t, f in zip(ins, flags)]
    return [apply_op("AddN", args, op.attrs)]


def _rule_identity_like(ctx, op, ins, flags):
    return [ins[0]]


def _rule_fill(ctx, op, ins, flags):
    dims = list(op.attrs["dims"])
    v = _reshape(ins[0], [ctx.B] + [1] * len(dims))
    return [_broadcast_to(v, [ctx.B] + dims)]


def _rule_broadcast_to(ctx, op, ins, flags):
    target = _static(op.outputs[0].shape)
    return [_broadcast_to(_pad_after_batch(ins[0], _rank(op.inputs[0]), len(target)), [ctx.B] + target)]


def _rule_reduce(ctx, op, ins, flags):
    r = _rank(op.inputs[0])
    axes = normalize_axes(op.attrs["axis"], r)
    attrs = dict(op.attrs, axis=tuple(a + 1 for a in axes))
    return [apply_op(op.type, [ins[0]], attrs)]


def _rule_sum_to_shape(ctx, op, ins, flags):
    g, ref = ins[0], op.inputs[1]
    rg, rt = _rank(op.inputs[0]), _rank(ref)
    if rg < rt:
        return None
    # Unit dims for g's leading extra dims: SumToShape then sums exactly the axes it sums per row.
    out = apply_op("SumToShape", [g, ctx.shape_ref(ref, [1] * (rg - rt))])
    return [_reshape(out, [ctx.B] + _static(ref.shape))]


def _rule_unreduce(ctx, op, ins, flags):
    ref = _static(op.inputs[1].shape)
    g = ins[0]
    if not op.attrs["keepdims"]:
        axes = normalize_axes(op.attrs["axis"], len(ref))
        g = _reshape(g, [ctx.B] + [1 if i in axes else d for i, d in enumerate(ref)])
    return [_broadcast_to(g, [ctx.B] + ref)]


def _rule_broadcast_to_shape_of(ctx, op, ins, flags):
    ref = _static(op.inputs[1].shape)
    x = _pad_after_batch(ins[0], _rank(op.inputs[0]), len(ref))
    return [_broadcast_to(x, [ctx.B] + ref)]


def _rule_reshape(ctx, op, ins, flags):
    out = op.outputs[0].shape
    if out.is_fully_defined():
        return [_reshape(ins[0], [ctx.B] + out.as_list())]
    if op.type == "Reshape":
        return [apply_op("Reshape", [ins[0]], {"shape": (ctx.B,) + tuple(op.attrs["shape"])})]
    return None


def _rule_expand_dims(ctx, op, ins, flags):
    r = _rank(op.inputs[0])
    return [apply_op("ExpandDims", [ins[0]], {"axis": op.attrs["axis"] % (r + 1) + 1})]


def _rule_squeeze(ctx, op, ins, flags):
    s = op.inputs[0].shape
    if op.attrs["axis"] is None:
        axes = tuple(i for i, d in enumerate(_static(s)) if d == 1)
    else:
        axes = normalize_axes(op.attrs["axis"], _rank(op.inputs[0]))
    return [apply_op("Squeeze", [ins[0]], {"axis": tuple(a + 1 for a in axes)})]


def _rule_transpose(ctx, op, ins, flags):
    r = _rank(op.inputs[0])
    perm = op.attrs["perm"]
    perm = tuple(range(r - 1, -1, -1)) if perm is None else tuple(int(p) for p in perm)
    return [apply_op("Transpose", [ins[0]], {"perm": (0,) + tuple(p + 1 for p in perm)})]


def _rule_matmul(ctx, op, ins, flags):
    ta, tb = op.attrs["transpose_a"], op.attrs["transpose_b"]
    B = ctx.B
    m, n = _static(op.outputs[0].shape)
    if flags[0] and flags[1]:   # BatchMatMulV2 takes adjoints: a transposed complex operand is conjugated first
        ins = [conj(t) if flag else t for t, flag in zip(ins, (ta, tb))]
        return [apply_op("BatchMatMulV2", ins, {"adj_x": ta, "adj_y": tb})]
    if flags[0]:
        # out[b] = op(a[b]) @ op(B): fold the batch into the rows of one matmul.
        a = ins[0] if not ta else _swap_last2(ins[0])          # [B, m, k]
        k = _static(a.shape)[2]
        out = apply_op("MatMul", [_reshape(a, [B * m, k]), ins[1]], {"transpose_a": False, "transpose_b": tb})
        return [_reshape(out, [B, m, n])]
    # out[b] = op(A) @ op(b[b]), i.e. out[b]^T = op(b[b])^T @ op(A)^T.
    bt = ins[1] if tb else _swap_last2(ins[1])                 # [B, n, k] = op(b[b])^T
    k = _static(bt.shape)[2]
    out = apply_op("MatMul", [_reshape(bt, [B * n, k]), ins[0]], {"transpose_a": False, "transpose_b": not ta})
    return [_swap_last2(_reshape(out, [B, n, m]))]


def _rule_batch_matmul(ctx, op, ins, flags):
    ro = _rank(op.outputs[0])
    args = [(_pad_after_batch(t, _rank(o), ro) if f else t) for t, f, o in zip(ins, flags, op.inputs)]
    return [apply_op("BatchMatMulV2", args, op.attrs)]


def _rule_strided_slice(ctx, op, ins, flags):
    spec = (("slice", None, None, None),) + tuple(op.attrs["spec"])
    return [apply_op("StridedSlice", [ins[0]], {"spec": spec})]


def _rule_strided_slice_grad(ctx, op, ins, flags):
    if flags[1]:
        return None
    spec = (("slice", None, None, None),) + tuple(op.attrs["spec"])
    return [apply_op("StridedSliceGrad", [ins[0], ctx.shape_ref(op.inputs[1])], {"spec": spec})]


def _rule_concat(ctx, op, ins, flags):
    r = _rank(op.outputs[0])
    args = [t if f else ctx.batched_unbatched(t) for t, f in zip(ins, flags)]
    return [apply_op("ConcatV2", args, {"axis": op.attrs["axis"] % r + 1})]


def _rule_split(ctx, op, ins, flags):
    if any(flags[1:]) or not flags[0]:
        return None
    r = _rank(op.inputs[0])
    refs = [ctx.shape_ref(t) for t in op.inputs[1:]]
    outs = apply_op("SplitToShapesOf", [ins[0]] + refs, dict(op.attrs, axis=op.attrs["axis"] % r + 1))
    return list(outs) if isinstance(outs, tuple) else [outs]


def _rule_pack(ctx, op, ins, flags):
    r = _rank(op.inputs[0])
    args = [t if f else ctx.batched_unbatched(t) for t, f in zip(ins, flags)]
    return [apply_op("Pack", args, {"axis": op.attrs["axis"] % (r + 1) + 1})]


def _rule_unpack(ctx, op, ins, flags):
    r = _rank(op.inputs[0])
    outs = apply_op("Unpack", [ins[0]], {"num": op.attrs["num"], "axis": op.attrs["axis"] % r + 1})
    return list(outs) if isinstance(outs, tuple) else [outs]


def _rule_gather(ctx, op, ins, flags):
    if flags[1]:
        return None
    r = _rank(op.inputs[0])
    return [apply_op("GatherV2", [ins[0], ins[1]], {"axis": op.attrs["axis"] % r + 1})]


def _rule_gather_grad(ctx, op, ins, flags):
    if flags[1]:
        return None
    r = _rank(op.inputs[2])
    return [apply_op("GatherGrad", [ins[0], ins[1], ctx.shape_ref(op.inputs[2])],
                     {"axis": op.attrs["axis"] % r + 1})]


def _rule_conv_patches(ctx, op, ins, flags):
    """Images of every batch row are images: the batch folds into the images' dim."""
    shape = _static(op.inputs[0].shape)
    out = apply_op("ConvPatches", [_reshape(ins[0], [-1] + shape[1:])], op.attrs)
    return [_reshape(out, [ctx.B] + _static(op.outputs[0].shape))]


def _rule_conv_patches_grad(ctx, op, ins, flags):
    if flags[1]:
        return None
    g_shape, ref = _static(op.inputs[0].shape), _static(op.inputs[1].shape)
    ref_rows = _reshape(ctx.shape_ref(op.inputs[1]), [ctx.B * ref[0]] + ref[1:])
    out = apply_op("ConvPatchesGrad", [_reshape(ins[0], [-1] + g_shape[1:]), ref_rows], op.attrs)
    return [_reshape(out, [ctx.B] + ref)]


def _rule_tile(ctx, op, ins, flags):
    return [apply_op("Tile", [ins[0]], {"multiples": (1,) + tuple(op.attrs["multiples"])})]


def _rule_tile_grad(ctx, op, ins, flags):
    return [apply_op("TileGrad", [ins[0], ctx.shape_ref(op.inputs[1])],
                     {"multiples": (1,) + tuple(op.attrs["multiples"])})]


_RULES = {
    "AddN": _rule_addn,
    "Identity": _rule_identity_like, "PlaceholderWithDefault": _rule_identity_like,
    "Fill": _rule_fill, "BroadcastTo": _rule_broadcast_to,
    "Sum": _rule_reduce, "Mean": _rule_reduce, "Max": _rule_reduce, "Min": _rule_reduce, "Prod": _rule_reduce,
    "SumToShape": _rule_sum_to_shape, "Unreduce": _rule_unreduce,
    "BroadcastToShapeOf": _rule_broadcast_to_shape_of,
    "Reshape": _rule_reshape, "ReshapeLike": _rule_reshape, "ExpandDims": _rule_expand_dims,
    "Squeeze": _rule_squeeze, "Transpose": _rule_transpose,
    "MatMul": _rule_matmul, "BatchMatMulV2": _rule_batch_matmul,
    "StridedSlice": _rule_strided_slice, "StridedSliceGrad": _rule_strided_slice_grad,
    "ConcatV2": _rule_concat, "SplitToShapesOf": _rule_split, "Pack": _rule_pack, "Unpack": _rule_unpack,
    "GatherV2": _rule_gather, "GatherGrad": _rule_gather_grad, "Tile": _rule_tile, "TileGrad": _rule_tile_grad,
    "ConvPatches": _rule_conv_patches, "ConvPatchesGrad": _rule_conv_patches_grad,
    "While": lambda ctx, op, ins, flags: batch_while(ctx, op, ins, flags, _vectorize, batch_while_pred),
    "If": lambda ctx, op, ins, flags: batch_if(ctx, op, ins, flags, _vectorize),
    "MirrorPadCheck": _rule_elementwise,    # (it checks its input's trailing dims: each row's)
}


@contextlib.contextmanager
def rules_removed(*op_types):
    """Within: the batched pass has no rule for ``op_types``, so they take the per-row
    fallbacks -- what tests and benchmarks compare the rules (While, If) against."""
    saved = {t: _RULES.pop(t) for t in op_types}
    try:
        yield
    finally:
        _RULES.update(saved)


def _rule_per_row(ctx, op, ins, flags):
    """Fallback: unstack the batched inputs, apply the op to each row, stack the outputs."""
    B = ctx.B
    rows_in = [(ctx.rows_of(t) or apply_op("Unpack", [t], {"num": B, "axis": 0})) if f else None
               for t, f in zip(ins, flags)]
    rows_in = [(list(r) if isinstance(r, (tuple, list)) else [r]) if r is not None else None for r in rows_in]
    per_out = [[] for _ in op.outputs]
    for b in range(B):
        args = [r[b] if r is not None else t for r, t in zip(rows_in, ins)]
        outs = apply_op(op.type, args, op.attrs)
        outs = outs if isinstance(outs, tuple) else (outs,)
        for k, o in enumerate(outs):
            per_out[k].append(o)
    packed = [apply_op("Pack", lst, {"axis": 0}) for lst in per_out]
    for t, lst in zip(packed, per_out):
        ctx.rows[id(t)] = lst
    return packed


# ============================================================ one-hot batches (jacobians)
class _OneHot:
    """A batched tensor whose row b is zero except for the single element at flat position
    idx[b] (a static numpy array), which holds d[b] (``d``: a [B] tensor).

    Jacobians start from identity rows, and the linear chain of a backward pass keeps
    that structure through elementwise scaling, reshapes, slice-gradients and matmuls;
    a matmul then becomes a gather instead of a dense [B, k] x [k, n] GEMM (JAX's
    jacrev does the GEMM). Anything else gets the dense tensor (``_dense``). Values are
    the per-row graph's: the one nonzero is computed with the same operations, the
    other entries are zeros -- which the per-row graph also has as long as the factors
    the rules scaled by (``ctx.onehot_factors``) are finite; where one is not (0 * nan,
    0 * inf), the per-row graph has NaN at positions the one-hot never computes, and
    ``batched_gradients`` then takes the dense pass instead."""
    __slots__ = ("d", "idx", "shape")

    def __init__(self, d, idx, shape):
        self.d, self.idx, self.shape = d, np.asarray(idx, np.int64), list(shape)


def _dense(ctx, oh):
    size = int(np.prod(oh.shape, dtype=np.int64))
    pos = _const(oh.idx.astype(np.int32).reshape(-1, 1), ctx.graph)
    mask = apply_op("Equal", [pos, _const(np.arange(size, dtype=np.int32), ctx.graph)])
    # A select, not mask * d: a NaN/inf d stays in its own position as in the per-row graph.
    d = apply_op("ExpandDims", [oh.d], {"axis": 1})
    zero = _const(np.zeros((), oh.d.dtype.np), ctx.graph)
    return _reshape(apply_op("SelectV2", [mask, d, zero]), [ctx.B] + oh.shape)


def _take(ctx, v, shape, idx):
    """The [B] values of unbatched v (broadcast to ``shape``) at flat positions idx."""
    size = int(np.prod(shape, dtype=np.int64))
    flat = _reshape(_broadcast_to(v, shape), [size])
    return flat if _is_iota(idx, size) else _gather(ctx, flat, idx, 0)


def _is_iota(idx, size):
    return idx.size == size and np.array_equal(idx, np.arange(size))


def _gather(ctx, v, idx, axis):
    """v gathered at the static indices idx along axis (no op when idx is 0..n-1)."""
    if _is_iota(idx, _static(v.shape)[axis]):
        return v
    return apply_op("GatherV2", [v, _const(idx.astype(np.int32), ctx.graph)], {"axis": axis})


def _oh_scale(ctx, op, ins, flags):
    """Mul / RealDiv (numerator) / MulNoNan with one one-hot operand and one unbatched operand."""
    j = 0 if isinstance(ins[0], _OneHot) else 1
    oh, other = ins[j], ins[1 - j]
    if flags[1 - j] or _static(op.outputs[0].shape) != oh.shape:
        return None
    if op.type == "RealDiv" and j != 0:
        return None
    # The factor the skipped zeros are scaled by: a divisor scales by its reciprocal, so
    # 0 / 0 = nan (SqrtGrad's gradient g / sqrt(x) at x = 0) also needs the dense pass.
    ctx.onehot_factors.append(_reciprocal(other) if op.type == "RealDiv" else other)
    v = _take(ctx, other, oh.shape, oh.idx)
    args = [oh.d, v] if j == 0 else [v, oh.d]
    return [_OneHot(apply_op(op.type, args, op.attrs), oh.idx, oh.shape)]


def _reciprocal(t):
    """1 / t: a constant when t's value is known (checked when the graph is built), else an op."""
    v = get_static_value(t)
    if v is None:
        return apply_op("Reciprocal", [t])
    with np.errstate(divide="ignore", invalid="ignore"):
        return _const(np.reciprocal(np.asarray(v, t.dtype.np)), t.graph)


def _oh_unary(ctx, op, ins, flags):
    return [_OneHot(apply_op(op.type, [ins[0].d], op.attrs), ins[0].idx, _static(op.outputs[0].shape))]


def _oh_reshape(ctx, op, ins, flags):
    return [_OneHot(ins[0].d, ins[0].idx, _static(op.outputs[0].shape))]


def _oh_addn(ctx, op, ins, flags):
    if not all(isinstance(t, _OneHot) and np.array_equal(t.idx, ins[0].idx) for t in ins):
        return None
    return [_OneHot(apply_op("AddN", [t.d for t in ins], op.attrs), ins[0].idx, ins[0].shape)]


def _oh_transpose(ctx, op, ins, flags):
    src = _static(op.inputs[0].shape)
    perm = op.attrs["perm"]
    perm = tuple(range(len(src) - 1, -1, -1)) if perm is None else tuple(int(p) for p in perm)
    pos = np.transpose(np.arange(int(np.prod(src)), dtype=np.int64).reshape(src), perm).reshape(-1)
    inv = np.empty_like(pos)
    inv[pos] = np.arange(pos.size)
    return [_OneHot(ins[0].d, inv[ins[0].idx], _static(op.outputs[0].shape))]


def _oh_strided_slice_grad(ctx, op, ins, flags):
    ref = _static(op.inputs[1].shape)
    pos = np.arange(int(np.prod(ref)), dtype=np.int64).reshape(ref)[_spec_index(op.attrs["spec"], ref)]
    pos = np.asarray(pos).reshape(-1)
    return [_OneHot(ins[0].d, pos[ins[0].idx], ref)]


def _oh_matmul(ctx, op, ins, flags):
    if flags[0] and flags[1]:
        return None
    B = ctx.B
    ta, tb = op.attrs["transpose_a"], op.attrs["transpose_b"]
    m, n = _static(op.outputs[0].shape)
    ctx.onehot_factors.append(ins[0] if isinstance(ins[1], _OneHot) else ins[1])
    zero = _const(np.zeros((), op.outputs[0].dtype.np), ctx.graph)
    if isinstance(ins[1], _OneHot):
        # op(b[b]) is one-hot at (i, j) of [k, n]: out[b] = d_b * op(A)[:, i] in column j.
        oh, A = ins[1], ins[0]
        r, c = np.divmod(oh.idx, oh.shape[1])
        i, j = (c, r) if tb else (r, c)
        col = _gather(ctx, A, i, 0) if ta else \
            apply_op("Transpose", [_gather(ctx, A, i, 1)], {"perm": (1, 0)})                # [B, m]
        vals = apply_op("Mul", [col, apply_op("ExpandDims", [oh.d], {"axis": 1})])
        if n == 1:
            return [_reshape(vals, [B, m, 1])]
        sel = (j.reshape(-1, 1) == np.arange(n)).reshape(B, 1, n)
        return [apply_op("SelectV2", [_const(sel, ctx.graph), apply_op("ExpandDims", [vals], {"axis": 2}), zero])]
    # op(a[b]) is one-hot at (i, j) of [m, k]: out[b] = d_b * op(B)[j, :] in row i.
    oh, Bm = ins[0], ins[1]
    r, c = np.divmod(oh.idx, oh.shape[1])
    i, j = (c, r) if ta else (r, c)
    row = apply_op("Transpose", [_gather(ctx, Bm, j, 1)], {"perm": (1, 0)}) if tb else \
        _gather(ctx, Bm, j, 0)                                                                  # [B, n]
    vals = apply_op("Mul", [apply_op("ExpandDims", [oh.d], {"axis": 1}), row])
    if m == 1:
        return [_reshape(vals, [B, 1, n])]
    sel = (i.reshape(-1, 1) == np.arange(m)).reshape(B, m, 1)
    return [apply_op("SelectV2", [_const(sel, ctx.graph), apply_op("ExpandDims", [vals], {"axis": 1}), zero])]


_ONEHOT_RULES = {
    "Mul": _oh_scale, "RealDiv": _oh_scale, "MulNoNan": _oh_scale,
    "Neg": _oh_unary, "Identity": _oh_unary,
    "Reshape": _oh_reshape, "ReshapeLike": _oh_reshape, "ExpandDims": _oh_reshape, "Squeeze": _oh_reshape,
    "Transpose": _oh_transpose, "StridedSliceGrad": _oh_strided_slice_grad, "AddN": _oh_addn,
    "MatMul": _oh_matmul,
}


def batching_rule(op_type):
    """The vectorised batching rule for ``op_type``, or None (per-row fallback)."""
    rule = _RULES.get(op_type)
    if rule is None:
        opdef = REGISTRY.get(op_type)
        if opdef is not None and opdef.pointwise:
            rule = _rule_elementwise
    return rule


# ============================================================ the batched pass
def _run_time_dims(ctx, op):
    """Whether an input or output of ``op`` has a dim known only when the kernel runs
    (``_loop_shaped``): such an op is applied per row (``_rule_per_row``), so no
    ``[B, None, ...]`` value is built. The compiler lowers run-time rows only as dim 0
    (codegen/lower_rows.py): B values of ``[None, ...]`` each compile, their stack would
    have run-time rows in dim 1."""
    return any(_loop_shaped(ctx, t) for t in op.inputs) or any(_loop_shaped(ctx, o) for o in op.outputs)


def _loop_shaped(ctx, t):
    """Whether ``t``'s shape has a dim set by a While or an If (a grown loop variable, the
    reverse loop's popped rows, a branch-shaped output): not specialised before the kernel
    compiles, as a fed placeholder's or a fed ``tf.zeros([n])``'s dims are (shape_specialise.py).
    Memoised in ``ctx.loop_shaped``; iterative (long chains)."""
    memo = ctx.loop_shaped
    todo = [t]
    while todo:
        u = todo[-1]
        if id(u) in memo:
            todo.pop()
            continue
        if u.shape.is_fully_defined():
            memo[id(u)] = False
            todo.pop()
            continue
        if u.op.type in ("While", "If"):
            memo[id(u)] = True
            todo.pop()
            continue
        pending = [v for v in u.op.inputs if id(v) not in memo]
        if pending:
            todo.extend(pending)
            continue
        memo[id(u)] = any(memo[id(v)] for v in u.op.inputs)
        todo.pop()
    return memo[id(t)]


def _vectorize(ctx, new_ops, seeds, batched_seeds, results, stats=None):
    """Rebuilds, with a leading batch dim, the ops ``new_ops`` that lie between
    ``seeds`` and ``results``. Returns the batched results."""
    B = ctx.B
    env = {id(s): b for s, b in zip(seeds, batched_seeds)}
    # Ops that depend on a seed through a value (not shape-only) edge.
    dep = set(env)
    dep_ops = []
    for op in new_ops:
        if any(id(t) in dep and not shape_only_input(op, j) for j, t in enumerate(op.inputs)):
            dep_ops.append(op)
            for o in op.outputs:
                dep.add(id(o))
    # Only those the results need.
    producer = {}
    for op in dep_ops:
        for o in op.outputs:
            producer[id(o)] = op
    needed = set()
    stack = [r for r in results if r is not None]
    while stack:
        t = stack.pop()
        op = producer.get(id(t))
        if op is None or id(op) in needed:
            continue
        needed.add(id(op))
        stack.extend(t2 for j, t2 in enumerate(op.inputs) if id(t2) in dep and not shape_only_input(op, j))
    for op in dep_ops:
        if id(op) not in needed:
            continue
        flags = [id(t) in env and not shape_only_input(op, j) for j, t in enumerate(op.inputs)]
        ins = [env[id(t)] if f else t for t, f in zip(op.inputs, flags)]
        outs = None
        run_time = _run_time_dims(ctx, op)
        # (a While's rule slices its run-time-rows stacks time-major itself)
        per_row = run_time and op.type != "While"
        if run_time:
            ctx.loop_rows = True
            ins = [_dense(ctx, t) if isinstance(t, _OneHot) else t for t in ins]
        elif any(isinstance(t, _OneHot) for t in ins):
            oh_rule = _ONEHOT_RULES.get(op.type)
            try:
                outs = oh_rule(ctx, op, ins, flags) if oh_rule is not None else None
            except Unsupported:
                outs = None
            if outs is None:
                ins = [_dense(ctx, t) if isinstance(t, _OneHot) else t for t in ins]
        if outs is None and not per_row:
            rule = batching_rule(op.type)
            try:
                outs = rule(ctx, op, ins, flags) if rule is not None else None
            except LoopPerRow:
                # a loop in the body / branch of a While / If being batched would run per row:
                # the region per row would copy it B times too, so the caller loops over rows
                raise
            except Unsupported:  # e.g. a rule that needs static shapes
                outs = None
        if outs is None:
            if op.type == "While" and B > LOOP_ROWS_AT:
                raise LoopPerRow(f"{op.name} would run once per row")
            outs = _rule_per_row(ctx, op, ins, flags)
            if stats is not None:
                stats.setdefault("per_row", []).append(op.type)
        for o, b in zip(op.outputs, outs):
            if isinstance(b, _OneHot):
                env[id(o)] = b
                continue
            try:
                b.set_shape([B] + (o.shape.as_list() if o.shape.rank is not None else []))
            except ValueError:
                raise AssertionError(f"batching rule for {op.type} gave shape {b.shape}, expected "
                                     f"[{B}] + {o.shape}") from None
            env[id(o)] = b
    out = []
    for r in results:
        if r is None:
            out.append(None)
        elif id(r) in env:
            b = env[id(r)]
            out.append(_dense(ctx, b) if isinstance(b, _OneHot) else b)
        else:  # does not depend on the cotangent (e.g. zeros for an unconnected x)
            out.append(ctx.batched_unbatched(r))
    return out


def batched_gradients(ys, xs, cotangents, name="batched_gradients", stop_gradients=None,
                      aggregation_method=None, unconnected_gradients="none", _stats=None):
    """For each x, ``[B] + x.shape``: row b is ``tf.gradients(ys, x, grad_ys=[c[b] for c in cotangents])``.

    ``cotangents``: one tensor (or array) per y, of shape ``[B] + y.shape``, all with the same B.
    Raises ``Unsupported`` where shapes are not static enough to batch (B, the
    ys' and the cotangents' shapes must be fully defined).
    """
    ys = [_to_graph_tensor(y, "ys") for y in _as_list(ys)]
    xs = [_to_graph_tensor(x, "xs") for x in _as_list(xs)]
    cts = _as_list(cotangents)
    if len(cts) != len(ys):
        raise ValueError(f"{len(cts)} cotangent batches for {len(ys)} ys")
    graph = ys[0].graph
    with graph.as_default(), graph.name_scope(name):
        cts = [c if isinstance(c, (Tensor, _OneHot)) else
               convert_to_tensor(np.asarray(c, y.dtype.np), graph=graph) for c, y in zip(cts, ys)]
        B = None
        for c, y in zip(cts, ys):
            yshape = _static(y.shape)
            cshape = [int(c.idx.size)] + c.shape if isinstance(c, _OneHot) else _static(c.shape)
            if isinstance(c, _OneHot):
                c_dtype = c.d.dtype
            else:
                c_dtype = c.dtype
            if cshape[1:] != yshape or c_dtype != y.dtype:
                raise ValueError(f"cotangent batch {cshape} {c_dtype.name} does not match y {y.shape} "
                                 f"{y.dtype.name}")
            if B is not None and cshape[0] != B:
                raise ValueError("all cotangent batches must have the same batch size")
            B = cshape[0]
        if B == 0:
            # no rows: zeros, but None where x is unconnected, as with rows (TF traces its
            # jacobian / hessian loop body even for no rows: tf.hessians of a loss linear in
            # an empty x fails on the None as for any other x, tf_fuzz seed 130009)
            seeds = [apply_op("Fill", [_const(np.zeros((), y.dtype.np), graph)], {"dims": tuple(_static(y.shape))},
                              name="seed") for y in ys]
            rows = gradients(ys, xs, grad_ys=seeds, name="rowgrad", stop_gradients=stop_gradients,
                             aggregation_method=aggregation_method, unconnected_gradients=unconnected_gradients)
            return [apply_op("Fill", [_const(np.zeros((), x.dtype.np), graph)],
                             {"dims": tuple([0] + _static(x.shape))}) if x.dtype.is_floating and r is not None
                    else None for r, x in zip(rows, xs)]
        seeds = [apply_op("Fill", [_const(np.zeros((), y.dtype.np), graph)], {"dims": tuple(_static(y.shape))},
                          name="seed") for y in ys]
        start = len(graph._ops)
        rows = gradients(ys, xs, grad_ys=seeds, name="rowgrad", stop_gradients=stop_gradients,
                         aggregation_method=aggregation_method, unconnected_gradients=unconnected_gradients)
        row_ops = graph._ops[start:]
        ctx = _Ctx(graph, B)
        out = _vectorize(ctx, row_ops, seeds, cts, rows, _stats)
        if ctx.onehot_factors:
            out = _exact_where_not_finite(ctx, row_ops, seeds, cts, rows, out)
        return out


def _exact_where_not_finite(ctx, row_ops, seeds, cts, rows, fast):
    """``fast`` (the one-hot pass) where every factor it scaled by is finite, else the
    dense pass. The per-row graph computes 0 * nan = nan at positions a one-hot row skips,
    e.g. the hessian of sum(tanh(x)) at x = [.5, nan, 1] has NaN in column 1 (as TF), not
    row 1. Factors whose value is known now (constants: a jacobian through a constant
    matrix) are checked here; the others by a cond at run time, unless the pass holds
    values of run-time rows (``ctx.loop_rows``): a cond capturing them would not compile
    (a region's inputs need static shapes), so the dense pass, exact everywhere, is taken."""
    keep = [k for k, r in enumerate(fast) if r is not None]
    factors = list({id(f): f for f in ctx.onehot_factors if f.dtype.is_floating}.values())
    known = [get_static_value(f) for f in factors]
    runtime = [f for f, v in zip(factors, known) if v is None]
    known_bad = any(v is not None and not np.isfinite(np.asarray(v).astype(np.float64)).all() for v in known)
    if not keep or not (known_bad or runtime):
        return fast

    def dense():
        dctx = _Ctx(ctx.graph, ctx.B)
        dense_cts = [_dense(dctx, c) if isinstance(c, _OneHot) else c for c in cts]
        out = _vectorize(dctx, row_ops, seeds, dense_cts, rows)
        return [out[k] for k in keep]

    def onehot():
        # Built again inside the branch (``fast`` outside is left to DCE), so the branch
        # writes its result straight into the cond's output instead of copying it there.
        out = _vectorize(_Ctx(ctx.graph, ctx.B), row_ops, seeds, cts, rows)
        return [out[k] for k in keep]

    if known_bad or (runtime and ctx.loop_rows):
        chosen = dense()
    else:
        chosen = cond(_all_finite(runtime), onehot, dense, name="onehot_or_dense")
    out = list(fast)
    for k, t in zip(keep, chosen):
        t.set_shape(fast[k].shape)
        out[k] = t
    return out


def _all_finite(factors):
    """A scalar bool: every element of every factor is finite. One sum of f * 0 per shape
    (nan exactly where f is inf or nan, else +-0, so the sum is finite iff all f are), which
    the compiler fuses into a single loop per shape instead of a reduction per factor.
    (The factors share the one-hot chain's dtype: no one-hot rule changes it.)"""
    by_shape = {}
    for f in factors:
        zero = _const(np.zeros((), f.dtype.np), f.graph)
        key = tuple(f.shape.as_list()) if f.shape.is_fully_defined() else id(f)   # None dims may differ
        by_shape.setdefault(key, []).append(apply_op("Mul", [f, zero]))
    sums = [apply_op("Sum", [z[0] if len(z) == 1 else apply_op("AddN", z)], {"axis": None, "keepdims": False})
            for z in by_shape.values()]
    return apply_op("IsFinite", [sums[0] if len(sums) == 1 else apply_op("AddN", sums)])


def identity_rows(n, shape, dtype, graph):
    """The [n] + shape tensor whose row i is the i-th one-hot (n = prod(shape)), built
    from an arange so it is a fused elementwise expression rather than an n*n constant."""
    iota = _const(np.arange(n, dtype=np.int32), graph)
    eye = apply_op("Equal", [apply_op("ExpandDims", [iota], {"axis": 1}), iota])
    eye = apply_op("Cast", [eye], {"DstT": dtypes.as_dtype(dtype)})
    return _reshape(eye, [n] + list(shape))


def batched_jacobian(y, xs, name="jacobian", structured=True, **kwargs):
    """For each x, d y / d x shaped ``[n] + x.shape`` (n = y's number of elements), from one
    batched backward pass with identity rows as cotangents (None where x is unconnected).
    ``structured``: propagate the identity rows as one-hot batches (``_OneHot``) where the
    ops allow it; False always uses dense [n] + y.shape cotangents."""
    y = _to_graph_tensor(y, "ys")
    yshape = _static(y.shape)
    n = int(np.prod(yshape, dtype=np.int64))
    graph = y.graph
    with graph.as_default():
        if not n:
            ct = _const(np.zeros([0] + yshape, y.dtype.np), graph)
        elif structured:
            ct = _OneHot(apply_op("Fill", [_const(np.ones((), y.dtype.np), graph)], {"dims": (n,)}),
                         np.arange(n), yshape)
        else:
            ct = identity_rows(n, yshape, y.dtype, graph)
    return batched_gradients([y], xs, [ct], name=name, **kwargs)


def batched_hessians(ys, xs, name="hessians", **kwargs):
    """``tf.hessians`` by one batched backward pass per x over the gradient graph."""
    xs = [_to_graph_tensor(x, "xs") for x in _as_list(xs)]
    for x in xs:
        _static(x.shape)
    agg = kwargs.get("aggregation_method")
    grads = gradients(ys, xs, aggregation_method=agg)
    out = []
    for g, x in zip(grads, xs):
        if g is None:
            # TF: ys does not depend on x -> its gradient loop fails on the None
            raise ValueError(f"Tried to convert 'tensor' to a tensor and failed. Error: None values not "
                             f"supported. (tf.hessians: the gradient with respect to {x.name} is None)")
        shape = _static(x.shape)
        (h,) = batched_jacobian(g, [x], name=name, aggregation_method=agg)
        if h is None:
            # TF: the gradient is constant in x (ys is linear in it) -> same failure
            raise ValueError(f"None values not supported. (tf.hessians: the gradient with respect to {x.name} "
                             f"does not depend on {x.name})")
        else:
            with x.graph.as_default():
                h = _reshape(h, shape + shape)
        out.append(h)
    return out
