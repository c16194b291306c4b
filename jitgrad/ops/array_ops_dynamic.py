"""Ops whose output shape is a run-time value: ``tf.fill`` / ``tf.zeros`` /
``tf.ones`` with a fed shape, ``tf.reshape`` to a fed shape and ``x[i:j:k]``
with tensor bounds (tf.range with a run-time limit is ``Range``, in array_ops).

Each is the static op (Fill, Reshape, StridedSlice) with the values that set its
shape as extra, last inputs. The interpreter runs them as they are; a compiled
run evaluates those inputs on the host first and compiles the static op
specialised on their values (the OpDef's ``specialise`` fact,
shape_specialise.py), as XLA specialises on shape-determining values.
"""
import numpy as np

from .. import dtypes
from ..errors import InvalidArgumentError
from ..shapes import ADDRESS_SPACE_BYTES, check_num_elements, oom_error
from . import array_ops as _a
from .registry import NOT_DIFFERENTIABLE, REGISTRY, apply_op, register


def _dims(value, what="shape"):
    """A 1-D int32/int64 shape value -> tuple of ints (TF's checks on fill/reshape's shape)."""
    arr = np.asarray(value)
    if arr.ndim > 1:
        raise InvalidArgumentError(f"{what} must be a vector, got shape {list(arr.shape)}")
    return tuple(int(d) for d in arr.reshape(-1))


def _shape_input_rank(shape, dtype, what):
    """How many dims a shape tensor gives (its static length), checking TF's dtype rule."""
    if dtype not in (dtypes.int32, dtypes.int64):
        raise TypeError(f"Value passed to parameter '{what}' has DataType {dtype.name} not in list of allowed "
                        "values: int32, int64")
    if shape is None or len(shape) != 1 or shape[0] is None:
        return None
    return shape[0]


# ---------------------------------------------------------------- Fill with a run-time shape
def _fill_infer(shapes, dts, attrs):
    if shapes[0] is not None and len(shapes[0]) != 0:
        raise ValueError(f"Shape must be rank 0 but is rank {len(shapes[0])} for 'Fill' (value)")
    rank = _shape_input_rank(shapes[1], dts[1], "dims")
    return [(None if rank is None else attrs.get("known") or (None,) * rank, dts[0])]


def _fill_specialise(attrs, dims):
    d = _dims(dims, "dims")
    if any(n < 0 for n in d):
        raise InvalidArgumentError(f"Fill dims must be non-negative, got {list(d)}")
    return "Fill", {"dims": d}


def _fill_kernel(attrs, v, dims):
    d = _fill_specialise(attrs, dims)[1]["dims"]
    if check_num_elements(d) * v.dtype.itemsize > ADDRESS_SPACE_BYTES:    # (the compiled run: concrete_specs)
        raise oom_error(d, dtypes.as_dtype(v.dtype), "Fill")
    return np.full(d, v, v.dtype)


register("DynamicFill", denormals="keep", infer=_fill_infer,
         kernel=_fill_kernel,
         grad=lambda op, g: [_a._reduction("Sum", g), None], data_dependent_shape=True, shape_from=1, specialise=_fill_specialise,
         lowering="interpreter", kind="other")


def _known_dims(dims):
    """The dims of a shape list that are known when the graph is built (None where not)."""
    if not isinstance(dims, (list, tuple)):
        return None
    known = [d if isinstance(d, (int, np.integer)) else _a.get_static_value(d) for d in dims]
    return tuple(None if k is None or int(k) < 0 else int(k) for k in known)


def fill(dims, value, name=None):
    """dims: a shape tensor, or a list of ints and scalar tensors."""
    (v,) = _a.convert_all([value])
    (d,) = _a.convert_all([_a._dyn_shape(dims)])
    return apply_op("DynamicFill", [v, d], {"known": _known_dims(dims)}, name=name or "Fill")


# ---------------------------------------------------------------- Reshape to a run-time shape
def _reshape_infer(shapes, dts, attrs):
    rank = _shape_input_rank(shapes[1], dts[1], "shape")
    return [(None if rank is None else attrs.get("known") or (None,) * rank, dts[0])]


def _reshape_specialise(attrs, shape):
    return "Reshape", {"shape": _dims(shape)}


def _reshape_kernel(attrs, x, shape):
    try:
        _a._reshape_run_check(None, {"shape": _dims(shape)})
        return np.reshape(x, _a._reshape_dims(x.shape, _dims(shape)))
    except ValueError as e:
        raise InvalidArgumentError(str(e)) from None


register("DynamicReshape", denormals="keep", infer=_reshape_infer, kernel=_reshape_kernel,
         grad=lambda op, g: [_a.reshape_like(g, op.inputs[0]), None], data_dependent_shape=True,
         shape_from=1, specialise=_reshape_specialise, lowering="interpreter", kind="other")


def reshape(x, shape, name=None):
    """shape: a shape tensor, or a list of ints and scalar tensors."""
    (s,) = _a.convert_all([_a._dyn_shape(shape)])
    return apply_op("DynamicReshape", [x, s], {"known": _known_dims(shape)}, name=name or "Reshape")


# ---------------------------------------------------------------- Tile / BroadcastTo by a run-time value
def _static_checked(op_type, x_shape, dt, attrs):
    """The static op's shape check on run-time values: TF's InvalidArgumentError when it runs."""
    try:
        REGISTRY[op_type].infer([x_shape], [dt], attrs)
    except ValueError as e:
        raise InvalidArgumentError(str(e)) from None
    return op_type, attrs


def _tile_infer(shapes, dts, attrs):
    _shape_input_rank(shapes[1], dts[1], "multiples")
    s, known = shapes[0], attrs.get("known")
    if s is None:
        return [(None if known is None else (None,) * len(known), dts[0])]
    if known is not None and len(known) != len(s):
        raise ValueError(f"Expected multiples argument to be a vector of length {len(s)} but got length "
                         f"{len(known)}")
    known = known or (None,) * len(s)
    return [(tuple(None if d is None or k is None else d * k for d, k in zip(s, known)), dts[0])]


def _non_negative(value, what):
    """A run-time multiples / shape value: negative entries raise before anything is sized
    by them (the compiled static op would be built with them)."""
    d = _dims(value, what)
    bad = [i for i, n in enumerate(d) if n < 0]
    if bad:
        raise InvalidArgumentError(f"Expected {what}[{bad[0]}] >= 0, but got {d[bad[0]]}")
    return d


def _tile_specialise_for(x_shape, dt, multiples):
    return _static_checked("Tile", x_shape, dt, {"multiples": _non_negative(multiples, "multiples")})


def _tile_grad(op, g):
    return [apply_op("DynamicTileGrad", [g, op.inputs[0], op.inputs[1]]), None]


register("DynamicTile", denormals="keep", infer=_tile_infer,
         kernel=lambda attrs, x, m: np.tile(x, _tile_specialise_for(x.shape, dtypes.as_dtype(x.dtype), m)[1]["multiples"]),
         grad=_tile_grad, data_dependent_shape=True, shape_from=1,
         specialise=lambda attrs, m: ("Tile", {"multiples": _non_negative(m, "multiples")}),
         lowering="interpreter", kind="other")
register("DynamicTileGrad", denormals="flush", infer=lambda shapes, dts, attrs: [(shapes[1], dts[0])],
         kernel=lambda attrs, g, ref, m: REGISTRY["TileGrad"].kernel({"multiples": _dims(m, "multiples")}, g, ref),
         grad=lambda op, g: [apply_op("DynamicTile", [g, op.inputs[2]]), None, None], data_dependent_shape=True,
         shape_from=2, specialise=lambda attrs, m: ("TileGrad", {"multiples": _non_negative(m, "multiples")}),
         lowering="interpreter", kind="other", shape_only=(1,))


def tile(x, multiples, name=None):
    """multiples: a tensor, or a list of ints and scalar tensors."""
    (m,) = _a.convert_all([_a._dyn_shape(multiples)])
    return apply_op("DynamicTile", [x, m], {"known": _known_dims(multiples)}, name=name or "Tile")


def _broadcast_to_infer(shapes, dts, attrs):
    rank = _shape_input_rank(shapes[1], dts[1], "shape")
    out = None if rank is None else attrs.get("known") or (None,) * rank
    if out is not None and shapes[0] is not None and len(shapes[0]) > len(out):
        raise ValueError(f"Unable to broadcast tensor of shape {list(shapes[0])} to rank {len(out)}")
    return [(out, dts[0])]


def _broadcast_to_kernel(attrs, x, shape):
    _, static = _static_checked("BroadcastTo", x.shape, dtypes.as_dtype(x.dtype), {"shape": _non_negative(shape, "shape")})
    return np.asarray(np.broadcast_to(x, static["shape"]), order="C")


register("DynamicBroadcastTo", denormals="keep", infer=_broadcast_to_infer, kernel=_broadcast_to_kernel,
         grad=lambda op, g: [_a.reduce_to(g, op.inputs[0]), None], data_dependent_shape=True, shape_from=1,
         specialise=lambda attrs, shape: ("BroadcastTo", {"shape": _non_negative(shape, "shape")}),
         lowering="interpreter", kind="other")


def broadcast_to(x, shape, name=None):
    """shape: a shape tensor, or a list of ints and scalar tensors."""
    (s,) = _a.convert_all([_a._dyn_shape(shape)])
    return apply_op("DynamicBroadcastTo", [x, s], {"known": _known_dims(shape)}, name=name or "BroadcastTo")


# ---------------------------------------------------------------- expand_dims / transpose by a run-time value
def _int_input(dt, what):
    if dt not in (dtypes.int32, dtypes.int64):
        raise TypeError(f"Value passed to parameter '{what}' has DataType {dt.name} not in list of allowed "
                        "values: int32, int64")


def _expand_infer(shapes, dts, attrs):
    _int_input(dts[1], "dim")
    if shapes[1] is not None and None not in shapes[1] and int(np.prod(shapes[1])) != 1:
        raise ValueError("'dim' must be a tensor with a single value")
    return [(None if shapes[0] is None else (None,) * (len(shapes[0]) + 1), dts[0])]


def _checked(fn, *args):
    try:
        return fn(*args)
    except ValueError as e:
        raise InvalidArgumentError(str(e)) from None


def _expand_specialise(attrs, axis):
    # (the range is checked by ExpandDims's shape rule on the run's shapes)
    return "ExpandDims", {"axis": _checked(_a.expand_ndim_check, axis, 1 << 30)}


register("DynamicExpandDims", denormals="keep", infer=_expand_infer,
         kernel=lambda attrs, x, axis: np.expand_dims(x, _checked(_a.expand_ndim_check, axis, x.ndim)),
         grad=lambda op, g: [_a.reshape_like(g, op.inputs[0]), None], data_dependent_shape=True, shape_from=1,
         specialise=_expand_specialise, lowering="interpreter", kind="other")


def expand_dims(x, axis, name=None):
    """tf.expand_dims by an axis known only when it runs (a fed one-element tensor)."""
    (a,) = _a.convert_all([axis], graph=_a.graph_of([x]))
    return apply_op("DynamicExpandDims", [x, a], {}, name=name or "ExpandDims")


def _transpose_infer(shapes, dts, attrs):
    _int_input(dts[1], "perm")
    s, p = shapes[0], shapes[1]
    n = p[0] if p is not None and len(p) == 1 else None
    if s is not None and n is not None and n != len(s):    # (TF's graph: "Dimension must be 2 but is 3")
        raise ValueError(f"transpose expects a vector of size {len(s)}. But input(1) is a vector of size {n}")
    rank = len(s) if s is not None else n
    return [(None if rank is None else (None,) * rank, dts[0])]


def _perm(attrs, perm, rank):
    """The perm the op applies: ``perm`` checked (TF's messages), or its inverse for the gradient."""
    p = _checked(_a.check_perm, perm, rank)
    return tuple(int(i) for i in np.argsort(p)) if attrs["inverse"] else p


def _transpose_specialise(attrs, perm):
    # the perm's own length is the rank it is checked against here; Transpose's shape rule
    # then checks it against the run's input rank
    perm = np.asarray(perm)
    return "Transpose", {"perm": _perm(attrs, perm, perm.size if perm.ndim == 1 else -1)}


def _transpose_grad(op, g):
    return [apply_op("DynamicTranspose", [g, op.inputs[1]], {"inverse": not op.get_attr("inverse")},
                     name="transpose_grad"), None]


# (inverse: transposed by the inverse of the perm, the gradient's transpose)
register("DynamicTranspose", denormals="keep", infer=_transpose_infer,
         kernel=lambda attrs, x, perm: np.asarray(np.transpose(x, _perm(attrs, perm, x.ndim)), order="C"),
         grad=_transpose_grad, data_dependent_shape=True, shape_from=1, specialise=_transpose_specialise,
         lowering="interpreter", kind="other")


def transpose(x, perm, name=None):
    """tf.transpose by a perm known only when it runs (a fed int vector)."""
    (p,) = _a.convert_all([perm], graph=_a.graph_of([x]))
    return apply_op("DynamicTranspose", [x, p], {"inverse": False}, name=name or "transpose")


# ---------------------------------------------------------------- x[i:j:k] with tensor bounds
# The spec is StridedSlice's, with ("in", k) where a bound is the value of input k.
def _resolve(spec, values):
    out = []
    for item in spec:
        if item[0] != "slice":
            out.append(item)
            continue
        parts = [int(np.asarray(values[p[1] - 1])) if isinstance(p, tuple) else p for p in item[1:]]
        if parts[2] == 0:
            raise InvalidArgumentError("slice step cannot be zero")
        out.append(("slice", *parts))
    return tuple(out)


def _unknown_dims_shape(spec, shape):
    """x's shape with the dims that run-time bounds slice made unknown (so the
    static rule leaves them unknown in the result)."""
    if shape is None:
        return None
    out, dim = list(shape), 0
    consumed = sum(1 for t in spec if t[0] in ("int", "slice"))
    for item in spec:
        if item[0] == "...":
            dim += len(shape) - consumed
        elif item[0] == "int":
            dim += 1
        elif item[0] == "slice":
            if any(isinstance(p, tuple) for p in item[1:]) and dim < len(out):
                out[dim] = None
            dim += 1
    return tuple(out)


def _static_spec(spec):
    return tuple(("slice", *[None if isinstance(p, tuple) else p for p in t[1:]]) if t[0] == "slice" else t
                 for t in spec)


def _slice_infer(shapes, dts, attrs):
    for k, (s, d) in enumerate(zip(shapes[1:], dts[1:])):
        if d not in (dtypes.int32, dtypes.int64):
            raise TypeError(f"slice indices must be int32 or int64 tensors, got {d.name}")
        if s is not None and len(s) != 0:
            raise ValueError(f"slice index {k} must be a scalar, got shape {list(s)}")
    spec = attrs["spec"]
    return _a._strided_infer([_unknown_dims_shape(spec, shapes[0])], dts[:1], {"spec": _static_spec(spec)})


def _slice_specialise(attrs, *bounds):
    return "StridedSlice", {"spec": _resolve(attrs["spec"], bounds)}


def _slice_grad(op, g):
    return [apply_op("DynamicStridedSliceGrad", [g, op.inputs[0], *op.inputs[1:]], {"spec": op.get_attr("spec")})] \
        + [None] * (len(op.inputs) - 1)


register("DynamicStridedSlice", denormals="keep", infer=_slice_infer,
         kernel=lambda attrs, x, *b: np.asarray(x[_a._spec_index(_resolve(attrs["spec"], b), x.shape)], order="C"),
         grad=_slice_grad, data_dependent_shape=True, shape_from=1, specialise=_slice_specialise, kind="other")
# (lowered as it is only on a value of run-time rows: slices_run_time_rows below; elsewhere specialised)


def _slice_grad_specialise(attrs, *bounds):
    return "StridedSliceGrad", {"spec": _resolve(attrs["spec"], bounds)}


def _slice_grad_kernel(attrs, g, ref, *bounds):
    return _a._strided_grad_kernel({"spec": _resolve(attrs["spec"], bounds)}, g, ref)


# The gradient of x[i:j:k]: g scattered into zeros shaped as x (input 1). Its shape is
# x's; it is "data dependent" only in that the compiled form needs the bounds' values.
register("DynamicStridedSliceGrad", denormals="keep", infer=lambda shapes, dts, attrs: [(shapes[1], dts[0])],
         kernel=_slice_grad_kernel, data_dependent_shape=True, shape_from=2, specialise=_slice_grad_specialise,
         kind="other", shape_only=(1,),
         grad=lambda op, g: [apply_op("DynamicStridedSlice", [g, *op.inputs[2:]], {"spec": op.get_attr("spec")}),
                             None] + [None] * (len(op.inputs) - 2))


def slices_run_time_rows(op, in_shapes):
    """Whether ``op`` is x[a:b:s] (or its gradient) on dim 0 alone of an x whose dim 0 only
    the kernel knows (a loop's stacked rows): compiled as it is, its bounds read when the
    kernel runs (codegen/lower_rows_gather.py), not specialised on their values (which
    would evaluate the loop on the host and compile once per row count)."""
    if op.type not in ("DynamicStridedSlice", "DynamicStridedSliceGrad") or len(op.attrs["spec"]) != 1 or \
            op.attrs["spec"][0][0] != "slice":
        return False
    x = in_shapes[0 if op.type == "DynamicStridedSlice" else 1]
    return x is not None and len(x) >= 1 and x[0] is None and None not in x[1:] and \
        _kernel_computes(op.inputs[1 if op.type == "DynamicStridedSlice" else 2:])


def _kernel_computes(bounds):
    """Whether compiled code can compute these bounds: no op on their way runs only in the
    interpreter (tf.split's SplitOffsets: such a slice is specialised on its values)."""
    seen, todo = set(), [t.op for t in bounds]
    while todo:
        o = todo.pop()
        if id(o) in seen:
            continue
        seen.add(id(o))
        opdef = REGISTRY[o.type]
        if opdef.lowering == "interpreter" or opdef.data_dependent_shape:
            return False
        if opdef.kind != "control" and o.type != "Shape":   # (a loop compiles whole; Shape reads no values)
            todo.extend(t.op for t in o.inputs)
    return True


def strided_slice(x, key):
    """``x[key]`` where some slice bounds are scalar integer tensors known only at run time."""
    key = key if isinstance(key, tuple) else (key,)
    bounds, spec = [], []
    for k in key:
        if not isinstance(k, slice):
            spec.extend(_a._slice_spec((k,)))
            continue
        parts = []
        for v in (k.start, k.stop, k.step):
            if v is None or isinstance(v, (int, np.integer)) or _a.get_static_value(v) is not None:
                parts.append(None if v is None else int(v if isinstance(v, (int, np.integer))
                                                        else _a.get_static_value(v)))
            else:
                (t,) = _a.convert_all([v])
                bounds.append(t)
                parts.append(("in", len(bounds)))
        if parts[2] == 0:
            raise ValueError("slice step cannot be zero")
        spec.append(("slice", *parts))
    return apply_op("DynamicStridedSlice", [x, *bounds], {"spec": tuple(spec)}, name="strided_slice")



# ---------------------------------------------------------------- tf.split along a run-time dim
# TF's Split / SplitV check the sizes against the dimension when they run. Here the
# piece bounds are one SplitOffsets op of that dimension, which raises TF's
# InvalidArgumentError as it runs: in the interpreter, and before a compiled run,
# which evaluates it on the host as the shape source of the pieces' run-time slices.
def _split_offsets_kernel(attrs, dim):
    sizes = _a.split_sizes(int(np.asarray(dim)), attrs["axis"], attrs["sizes"])
    return np.cumsum([0] + sizes).astype(np.int32)


register("SplitOffsets", denormals="keep",
         infer=lambda shapes, dts, attrs: [((_num_pieces(attrs["sizes"]) + 1,), dtypes.int32)],
         kernel=_split_offsets_kernel, grad=NOT_DIFFERENTIABLE, lowering="interpreter", kind="other")


def _num_pieces(sizes):
    return sizes if isinstance(sizes, int) else len(sizes)


def split_run_time_dim(x, axis, sizes):
    """tf.split of ``x`` along ``axis``, whose length the graph does not know: ``sizes`` is
    a number of equal pieces, or sizes with one -1. Pieces of a known size keep it statically."""
    if isinstance(sizes, int) and sizes <= 0:
        raise ValueError(f"Attr 'num_split' of 'Split' Op passed {sizes} less than minimum 1.")
    dim = _a.shape(x)[axis]
    offsets = apply_op("SplitOffsets", [dim], {"axis": axis, "sizes": sizes}, name="split")
    lead = (slice(None),) * axis
    outs = []
    for k in range(_num_pieces(sizes)):
        piece = strided_slice(x, lead + (slice(offsets[k], offsets[k + 1]),))
        if not isinstance(sizes, int) and sizes[k] != -1:
            piece.set_shape([sizes[k] if i == axis else None for i in range(x.shape.rank)])
        outs.append(piece)
    return outs
