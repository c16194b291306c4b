"""Sources (constants, placeholders, fills) and data-movement ops: reshape,
transpose, expand/squeeze, concat/stack, slicing, gather, tile, broadcast."""
import numpy as np

from .. import context, dispatch, dtypes
from ..convert import convert_all, convert_to_tensor, graph_of, to_numpy
from ..errors import InvalidArgumentError, ResourceExhaustedError, UnimplementedError, shape_error
from ..graph import Tensor
from ..shapes import (ADDRESS_SPACE_BYTES, INT64_MAX, TensorShape, as_shape, broadcast_dims, check_num_elements,
                      normalize_axes, oom_error, require_shape)
from ._infer import check_same
from .math_ops import (add, cast, equal, identity, less, multiply, reduce_to, stop_gradient, subtract, truediv,
                       where, zeros_like)
from .mask_ops import boolean_mask
from .mirror_pad import check_mirror_pads, mirror_pad_check
from .registry import NOT_DIFFERENTIABLE, apply_op, register
from .sums import accumulator, reference_sum
from ..eager import EagerTensor


def _same(shapes, dts, attrs):
    return [(shapes[0], dts[0])]


# ---------------------------------------------------------------- sources
def _placeholder_kernel(attrs):
    raise InvalidArgumentError(f"You must feed a value for placeholder tensor with dtype "
                               f"{attrs['dtype'].name} and shape {TensorShape(attrs['shape'])}")


register("Const", infer=lambda shapes, dts, attrs: [(attrs["value"].shape, attrs["dtype"])],
         kernel=lambda attrs: attrs["value"], kind="source", grad=NOT_DIFFERENTIABLE, lowering="argument")
register("Placeholder", infer=lambda shapes, dts, attrs: [(attrs["shape"], attrs["dtype"])],
         kernel=_placeholder_kernel, kind="source", grad=NOT_DIFFERENTIABLE, lowering="argument")


def _literal_infer(shapes, dts, attrs):
    v = attrs["value"]
    return [(tuple(v.shape), dtypes.as_dtype(v.dtype))]


# The compiler's constant baked into the code (passes/util.literal_attrs): its value IS
# in the kernel signature, unlike a Const that becomes a runtime argument.
# kind="source": no inputs; codegen lowers it to an inline constant.
register("Literal", infer=_literal_infer, kernel=lambda attrs: attrs["value"], kind="source", cheap=True,
         grad=NOT_DIFFERENTIABLE)


def constant(value, dtype=None, shape=None, name="Const"):
    """``tf.constant``: eager tensor now, or a Const node while building a graph."""
    if isinstance(value, (Tensor,)):
        raise TypeError("tf.constant does not accept a symbolic Tensor; use tf.identity.")
    if isinstance(value, EagerTensor):
        value = value._value
    if hasattr(value, "_jitgrad_to_tensor"):
        value = np.asarray(value.numpy())
    arr = to_numpy(value, dtype)
    if shape is not None:
        shape = tuple(int(d) for d in (shape if isinstance(shape, (list, tuple)) else [shape]))
        n = int(np.prod(shape))
        if arr.size == 1:
            arr = np.full(shape, arr.reshape(()), arr.dtype)
        elif arr.size == n:
            arr = arr.reshape(shape)
        else:
            raise TypeError(f"Eager execution of tf.constant with unsupported shape. Tensor {value!r} "
                            f"(converted from {value!r}) has {arr.size} elements, but got `shape` {shape} "
                            f"with {n} elements).")
    if context.executing_eagerly():
        return EagerTensor(np.asarray(arr, order="C"))
    return apply_op("Const", [], {"value": np.asarray(arr, order="C"), "dtype": dtypes.as_dtype(arr.dtype)},
                    name=name)


def placeholder(dtype, shape=None, name=None):
    if context.executing_eagerly():
        raise RuntimeError("tf.placeholder() is not compatible with eager execution.")
    dtype = dtypes.as_dtype(dtype)
    dims = as_shape(shape).dims
    if dims is not None:
        check_num_elements(dims)   # TF checks a placeholder's shape when it is made (ValueError)
    return apply_op("Placeholder", [], {"dtype": dtype, "shape": dims}, name=name or "Placeholder")


def placeholder_with_default(input, shape, name=None):  # noqa: A002
    (x,) = convert_all([input])
    if not as_shape(x.shape).is_compatible_with(shape):
        raise ValueError(f"Default value shape {x.shape} is not compatible with {as_shape(shape)}")
    return apply_op("PlaceholderWithDefault", [x], {"shape": as_shape(shape).dims},
                    name=name or "PlaceholderWithDefault")


def _with_default_infer(shapes, dts, attrs):
    require_shape(0, shapes[0], attrs["shape"])
    return [(attrs["shape"], dts[0])]


register("PlaceholderWithDefault", infer=_with_default_infer,
         kernel=lambda attrs, x: x, grad=lambda op, g: [g], kind="elementwise", pointwise=False, identity=True)


def _fill_infer(shapes, dts, attrs):
    if shapes[0] not in ((), None):
        raise ValueError(f"value must be a scalar, got shape {list(shapes[0])}")
    return [(attrs["dims"], dts[0])]


def _reduction(op_type, x, axis=None, keepdims=False, name=None):
    """reduction_ops.py's Sum / Prod, applied by name: that module builds on this one
    (its gradients reshape and transpose), so this one does not import it."""
    return apply_op(op_type, [x], {"axis": axis, "keepdims": keepdims}, name=name or op_type)


register("Fill", denormals="keep", infer=_fill_infer, kernel=lambda attrs, v: np.full(attrs["dims"], v, v.dtype),
         grad=lambda op, g: [_reduction("Sum", g)], kind="elementwise", pointwise=False)


def _static_shape_arg(shape, what="shape"):
    value = get_static_value(shape) if not isinstance(shape, (list, tuple, int, TensorShape)) else shape
    if value is None:
        raise ValueError("jitgrad needs shape arguments whose value is known when the graph is built.")
    if isinstance(value, TensorShape):
        value = value.as_list()
    value = np.asarray(value).reshape(-1).tolist() if not isinstance(value, (list, tuple)) else value
    # a list may hold scalar tensors whose value is known ([tf.constant(3), -1])
    value = [d[()] if isinstance(d, np.ndarray) and d.ndim == 0 else d for d in
             (get_static_value(d) if hasattr(d, "dtype") and not isinstance(d, (np.ndarray, np.generic)) else d
              for d in value)]
    return tuple(_int_arg(d, what) for d in value)


def _int_arg(value, what):
    """An integer argument known when the graph is built; TF's TypeError for a
    float, string or bool (its op takes an int32/int64 tensor there)."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        return int(value)
    dt = np.asarray(value).dtype
    name = "float32" if dt.kind == "f" else "string" if dt.kind in "USO" else dt.name
    raise TypeError(f"Value passed to parameter '{what}' has DataType {name} not in list of allowed values: "
                    "int32, int64")


def _runtime_shape(shape):
    """A shape argument known only at run time: a tensor (or a list holding one)."""
    if isinstance(shape, (int, TensorShape)) or (not isinstance(shape, (list, tuple)) and not hasattr(shape, "dtype")):
        return False
    if isinstance(shape, (list, tuple)):
        return any(hasattr(d, "dtype") and not isinstance(d, (np.ndarray, np.generic)) and get_static_value(d) is None
                   for d in shape)
    return not isinstance(shape, (np.ndarray, np.generic)) and get_static_value(shape) is None


def fill(dims, value, name=None):
    if _runtime_shape(dims):
        return _dyn.fill(dims, value, name=name)
    dims = _static_shape_arg(dims)
    (v,) = convert_all([value])
    return apply_op("Fill", [v], {"dims": dims}, name=name or "Fill")


def zeros(shape, dtype=dtypes.float32, name=None):
    dtype = dtypes.as_dtype(dtype)
    return fill(shape, convert_to_tensor(np.zeros((), dtype.np)), name=name or "zeros")


def ones(shape, dtype=dtypes.float32, name=None):
    dtype = dtypes.as_dtype(dtype)
    return fill(shape, convert_to_tensor(np.ones((), dtype.np)), name=name or "ones")



def _identity_n_kernel(attrs, *arrays):
    return tuple(arrays)


def _identity_n_grad(op, *grads):
    of_op = op.attrs.get("_grad_of_op")
    if of_op is not None:
        # fn(op, *grads): reads the tensors it needs from ``op``, so a copy of the op (a loop
        # body replayed for its gradient) differentiates its own inputs (cond_batching.py)
        return list(of_op(op, *grads))
    return list(op.attrs["_grad_fn"](*grads))


# tf.custom_gradient's op in graphs (custom_gradient.py): its gradient is the user's grad_fn.
# "_grad_fn" starts with "_": the compiler's signature leaves it out (cache/key.freeze).
register("IdentityN", infer=lambda shapes, dts, attrs: list(zip(shapes, dts)), kernel=_identity_n_kernel,
         grad=_identity_n_grad, kind="other", lowering="none", identity=True)

# ---------------------------------------------------------------- shapes
def _reshape_dims(src, target):
    target = list(target)
    bad = [i for i, d in enumerate(target) if d is not None and d < -1]
    if bad:
        raise ValueError(f"Size {bad[0]} must be non-negative, not {target[bad[0]]}")
    if src is None or any(d is None for d in src) or target.count(-1) > 1:
        # TF's shape function lets two -1s through (the dims unknown); its kernel raises as the
        # graph runs (_reshape_run_check)
        return tuple(None if d == -1 else d for d in target)
    n = int(np.prod(src, dtype=np.int64))
    known = int(np.prod([d for d in target if d != -1], dtype=np.int64))
    if -1 in target and known == 0 and n == 0 and 0 in target:
        # TF's Reshape kernel (reshape_op.h): with a 0 in the target, the -1 is the product of
        # the input's non-zero dims over the target's non-zero sizes ((0, 3) -> [0, -1] is (0, 3))
        rest = int(np.prod([d for d in target if d > 0], dtype=np.int64))
        target[target.index(-1)] = int(np.prod([d for d in src if d > 0], dtype=np.int64)) // rest
    elif -1 in target:
        if known == 0 or n % known:
            raise ValueError(f"Cannot reshape a tensor with {n} elements to shape {target}")
        target[target.index(-1)] = n // known
    elif known != n:
        raise ValueError(f"Cannot reshape a tensor with {n} elements to shape {target} "
                         f"({known} elements)")
    return tuple(target)


def _reshape_run_check(shapes, attrs):
    """TF's Reshape kernel rejects a target with two -1s (InvalidArgumentError as it runs)."""
    unknown = [i for i, d in enumerate(attrs["shape"]) if d == -1]
    if len(unknown) > 1:
        raise ValueError(f"Only one input size may be -1, not both {unknown[0]} and {unknown[1]}")


def _reshape_kernel(attrs, x):
    _reshape_run_check(None, attrs)
    return np.reshape(x, _reshape_dims(x.shape, attrs["shape"]))


register("Reshape", infer=lambda shapes, dts, attrs: [(_reshape_dims(shapes[0], attrs["shape"]), dts[0])],
         kernel=_reshape_kernel, run_check=_reshape_run_check,
         grad=lambda op, g: [reshape_like(g, op.inputs[0])], kind="layout", reshape=True)


def _reshape_like_infer(shapes, dts, attrs):
    x, ref = shapes
    if x is not None and ref is not None and None not in x and None not in ref:
        _reshape_dims(x, ref)   # raises unless the element counts agree
    return [(ref, dts[0])]


register("ReshapeLike", infer=_reshape_like_infer,
         kernel=lambda attrs, x, ref: np.reshape(x, ref.shape),
         grad=lambda op, g: [reshape_like(g, op.inputs[0]), None], kind="layout", shape_only=(1,), reshape=True)


def reshape_like(x, ref):
    if x.shape.is_fully_defined() and ref.shape.is_fully_defined() and x.shape == ref.shape:
        return x
    return apply_op("ReshapeLike", [x, ref])


def reshape(tensor, shape, name=None):
    (x,) = convert_all([tensor])
    if _runtime_shape(shape):
        return _dyn.reshape(x, shape, name=name)
    return apply_op("Reshape", [x], {"shape": _static_shape_arg(shape)}, name=name or "Reshape")


def _transpose_infer(shapes, dts, attrs):
    perm = attrs["perm"]
    s = shapes[0]
    if s is None:
        return [(None if perm is None else (None,) * len(perm), dts[0])]
    if perm is None:
        return [(tuple(reversed(s)), dts[0])]
    if len(perm) != len(s) or not all(0 <= p < len(s) for p in perm):
        check_perm(perm, len(s))      # raises TF's message
    return [(tuple(s[p] for p in perm), dts[0])]   # (a repeated dim passes, as in TF: _transpose_run_check)


def _transpose_run_check(shapes, attrs):
    perm = attrs["perm"]
    if perm is not None and shapes[0] is not None:
        check_perm(perm, len(shapes[0]))


def _transpose_grad(op, g):
    perm = op.get_attr("perm")
    if perm is None:
        return [transpose(g)]
    return [transpose(g, tuple(int(i) for i in np.argsort(perm)))]


register("Transpose", infer=_transpose_infer, run_check=_transpose_run_check,
         kernel=lambda attrs, x: np.asarray(np.transpose(x, attrs["perm"]), order="C"),
         grad=_transpose_grad, kind="layout", keeps_uniform=True)


def check_perm(perm, rank):
    """TF's Transpose kernel's checks of a perm value against the input's rank, in its order and
    with its InvalidArgumentError messages (raised here as ValueError); the perm with negative
    entries counted from the end."""
    perm = np.asarray(perm)
    if perm.ndim != 1:
        raise ValueError(f"perm must be rank 1, got shape [{','.join(map(str, perm.shape))}]")
    if perm.size != rank:
        raise ValueError(f"transpose expects a vector of size {rank}. But input(1) is a vector of size {perm.size}")
    out = []
    for d in perm.tolist():
        d = d + rank if d < 0 else d
        if not 0 <= d < rank:
            raise ValueError(f"{d} is out of range [0 .. {rank})")
        out.append(d)
    for i in range(rank):
        if i not in out:
            raise ValueError(f"{i} is missing from {{{','.join(map(str, perm.tolist()))}}}.")
    return tuple(out)


def transpose(a, perm=None, name="transpose", conjugate=False):
    (x,) = convert_all([a])
    if perm is not None and not isinstance(perm, (list, tuple, np.ndarray)) and get_static_value(perm) is None:
        out = _dyn.transpose(x, perm, name=name)     # a perm known only when it runs (a fed one)
        return apply_op("Conj", [out]) if conjugate and out.dtype.is_complex else out
    if perm is not None:
        perm = tuple(int(p) for p in (get_static_value(perm) if not isinstance(perm, (list, tuple)) else perm))
        if context.executing_eagerly() and x.shape.rank is not None:
            try:
                perm = check_perm(perm, x.shape.rank)     # TF's kernel's messages
            except ValueError as e:
                raise InvalidArgumentError(str(e)) from None
        if x.shape.rank is not None:
            perm = tuple(p + x.shape.rank if -x.shape.rank <= p < 0 else p for p in perm)   # (5 stays 5: an error)
    out = apply_op("Transpose", [x], {"perm": perm}, name=name)
    return apply_op("Conj", [out]) if conjugate and out.dtype.is_complex else out


def matrix_transpose(a, name="matrix_transpose", conjugate=False):
    """Swaps the last two dimensions (``tf.linalg.matrix_transpose``; ``adjoint`` conjugates too)."""
    (x,) = convert_all([a])
    rank = x.shape.rank
    if rank is None:
        raise NotImplementedError("jitgrad's matrix_transpose needs the input's rank known when the graph is built.")
    if rank < 2:
        raise ValueError(f"Argument `a` should be a (batch) matrix with rank >= 2.  Received `a` = {x} with shape: "
                         f"{x.shape}")
    return transpose(x, list(range(rank - 2)) + [rank - 1, rank - 2], name=name, conjugate=conjugate)


def _expand_infer(shapes, dts, attrs):
    s = shapes[0]
    if s is None:
        return [(None, dts[0])]
    a = attrs["axis"]
    if not -len(s) - 1 <= a <= len(s):     # (TF's eager message; its graph's: "dim 5 not in the interval")
        raise ValueError(f"Tried to expand dim index {a} for tensor with {len(s)} dimensions.")
    a = a % (len(s) + 1)
    return [(s[:a] + (1,) + s[a:], dts[0])]


register("ExpandDims", infer=_expand_infer, kernel=lambda attrs, x: np.expand_dims(x, attrs["axis"]),
         grad=lambda op, g: [reshape_like(g, op.inputs[0])], kind="layout", reshape=True)


def expand_ndim_check(axis, ndim):
    """TF's ExpandDims kernel's checks of an axis value (any one-element int tensor) against the
    input's rank, with its messages (raised here as ValueError); the axis as an int."""
    axis = np.asarray(axis)
    if axis.size != 1:
        raise ValueError("'dim' must be a tensor with a single value")
    a = int(axis.reshape(()))
    if not -ndim - 1 <= a <= ndim:
        raise ValueError(f"Tried to expand dim index {a} for tensor with {ndim} dimensions.")
    return a


def expand_dims(input, axis, name=None):  # noqa: A002
    (x,) = convert_all([input])
    if hasattr(axis, "dtype") and not isinstance(axis, (int, np.integer, np.ndarray)) or \
            isinstance(axis, (list, tuple, np.ndarray)):
        # a tensor, an array or a list (TF's ExpandDims takes any one-element int32/int64 tensor)
        dt = dtypes.as_dtype(axis.dtype) if hasattr(axis, "dtype") else None
        if dt is not None and dt not in (dtypes.int32, dtypes.int64):
            _int_arg(np.zeros((), dt.np) if dt.np is not object else "", "dim")     # TF's TypeError
        value = get_static_value(axis)
        if value is None:
            return _dyn.expand_dims(x, axis, name=name)
        value = np.asarray(value)
        if value.dtype.kind not in "iu":
            _int_arg(value.reshape(-1)[:1], "dim")
        if value.size != 1:
            raise shape_error("'dim' must be a tensor with a single value")
        axis = int(value.reshape(()))
    return apply_op("ExpandDims", [x], {"axis": _int_arg(axis, "dim")}, name=name or "ExpandDims")


def _squeeze_axes(s, axis):
    if axis is None:
        return tuple(i for i, d in enumerate(s) if d == 1)
    axes = normalize_axes(axis, len(s), allow_duplicates=True)   # TF's Squeeze takes a dim twice
    for a in axes:
        if s[a] is not None and s[a] != 1:
            raise ValueError(f"Can not squeeze dim[{a}], expected a dimension of 1, got {s[a]}")
    return axes


def _squeeze_infer(shapes, dts, attrs):
    s = shapes[0]
    if s is None or (attrs["axis"] is None and any(d is None for d in s)):
        return [(None, dts[0])]
    axes = _squeeze_axes(s, attrs["axis"])
    return [(tuple(d for i, d in enumerate(s) if i not in axes), dts[0])]


register("Squeeze", infer=_squeeze_infer,
         kernel=lambda attrs, x: np.squeeze(x, _squeeze_axes(x.shape, attrs["axis"])),
         grad=lambda op, g: [reshape_like(g, op.inputs[0])], kind="layout", reshape=True)


def squeeze(input, axis=None, name=None):  # noqa: A002
    (x,) = convert_all([input])
    if axis is not None:
        axis = (int(axis),) if isinstance(axis, int) else tuple(int(a) for a in axis)
    return apply_op("Squeeze", [x], {"axis": axis}, name=name or "Squeeze")


# ---------------------------------------------------------------- concat / stack
def _concat_infer(shapes, dts, attrs):
    check_same("ConcatV2", dts)
    known = [s for s in shapes if s is not None]
    if not known:
        return [(None, dts[0])]
    rank = len(known[0])
    if rank == 0:
        raise ValueError("Can't concatenate scalars (use tf.stack instead)")
    axis = attrs["axis"]
    if not -rank <= axis < rank:
        raise ValueError(f"axis {axis} is out of bounds for concat of rank-{rank} tensors")
    axis %= rank
    out = list(known[0])
    total = 0
    for s in shapes:
        if s is None:
            total = None
            continue
        if len(s) != rank:
            raise ValueError(f"Shape must be rank {rank} but is rank {len(s)} for ConcatV2")
        for i in range(rank):
            if i == axis:
                continue
            if out[i] is None:
                out[i] = s[i]
            elif s[i] is not None and s[i] != out[i]:
                raise ValueError(f"Dimension {i} in both shapes must be equal: {list(known[0])} vs {list(s)}")
        total = None if total is None or s[axis] is None else total + s[axis]
    out[axis] = total
    return [(tuple(out), dts[0])]


def _concat_grad(op, g):
    ins, axis = list(op.inputs), op.get_attr("axis")
    # One input of unknown extent along the axis (a loop variable grown by rows): its part
    # is what the others leave ("rest"), so the gradient does not read it for its shape
    # (a while_loop's gradient would save it, growing, every iteration).
    unknown = [k for k, t in enumerate(ins) if t.shape.rank is None or t.shape.dims[axis % t.shape.rank] is None]
    if len(unknown) == 1 and len(ins) > 1 and all(t.shape.is_fully_defined() for t in ins if t is not ins[unknown[0]]):
        r = unknown[0]
        parts = apply_op("SplitToShapesOf", [g] + ins[:r] + ins[r + 1:], {"axis": axis, "rest": r})
    else:
        parts = apply_op("SplitToShapesOf", [g] + ins, {"axis": axis})
    return list(parts) if isinstance(parts, tuple) else [parts]


def split_extents(attrs, total, ref_extents):
    """The parts' extents along the axis: the refs', and with ``rest`` (the part at that
    position takes what the others leave of ``total``) that one too; None where unknown."""
    r = attrs.get("rest")
    if r is None:
        return list(ref_extents)
    known = None if total is None or None in ref_extents else total - sum(ref_extents)
    return list(ref_extents[:r]) + [known] + list(ref_extents[r:])


def _split_infer(shapes, dts, attrs):
    """The parts have the shapes of inputs 1..n, which input 0 must be the concat of;
    with ``rest``, one part (at that position) has input 0's shape less the others'."""
    if attrs.get("rest") is None:
        require_shape(0, shapes[0], _concat_infer(shapes[1:], dts[:1] * (len(shapes) - 1), attrs)[0][0])
        return [(s, dts[0]) for s in shapes[1:]]
    g = shapes[0]
    if g is None:
        return [(s, dts[0]) for s in shapes[1:attrs["rest"] + 1]] + [(None, dts[0])] + \
               [(s, dts[0]) for s in shapes[attrs["rest"] + 1:]]
    axis = attrs["axis"] % len(g)
    ext = split_extents(attrs, g[axis], [s[axis] for s in shapes[1:]])
    if ext[attrs["rest"]] is not None and ext[attrs["rest"]] < 0:
        raise ValueError(f"cannot split {list(g)} into parts of {[s[axis] for s in shapes[1:]]} and the rest")
    rest = tuple(ext[attrs["rest"]] if d == axis else g[d] for d in range(len(g)))
    refs = [(s, dts[0]) for s in shapes[1:]]
    return refs[:attrs["rest"]] + [(rest, dts[0])] + refs[attrs["rest"]:]


def _split_kernel(attrs, g, *refs):
    axis = attrs["axis"] % g.ndim
    ext = split_extents(attrs, g.shape[axis], [r.shape[axis] for r in refs])
    if min(ext) < 0 or sum(ext) != g.shape[axis]:
        raise ValueError(f"cannot split a gradient of shape {list(g.shape)} into the parts of its concat")
    bounds = np.cumsum(ext)[:-1]
    return tuple(np.asarray(p, order="C") for p in np.split(g, bounds, axis=axis))


def _split_grad(op, *grads):
    gs = [zeros_like(o) if g is None else g for g, o in zip(grads, op.outputs)]
    return [concat(gs, op.get_attr("axis"))] + [None] * (len(op.inputs) - 1)


register("ConcatV2", infer=_concat_infer,
         kernel=lambda attrs, *xs: np.concatenate(xs, axis=attrs["axis"]), grad=_concat_grad, kind="layout")
register("SplitToShapesOf", infer=_split_infer, kernel=_split_kernel, grad=_split_grad, kind="layout",
         shape_only="rest")


def concat(values, axis, name="concat"):
    if not isinstance(values, (list, tuple)) or not values:
        raise ValueError("concat expects a non-empty list of tensors")
    xs = convert_all(list(values))
    static = axis if isinstance(axis, (int, np.integer)) else get_static_value(axis)
    if static is None:
        raise NotImplementedError("jitgrad's tf.concat needs its axis known when the graph is built.")
    if np.ndim(static) != 0:
        raise ValueError(f"axis must be a scalar, got shape {list(np.shape(static))}")
    axis = _int_arg(np.asarray(static).item(), "axis")
    if len(xs) == 1:
        return identity(xs[0], name=name)
    return apply_op("ConcatV2", xs, {"axis": axis}, name=name)


def _pack_infer(shapes, dts, attrs):
    check_same("Pack", dts)
    s = None
    for t in shapes:
        if t is None:
            continue
        if s is None:
            s = t
        elif len(t) != len(s) or any(a is not None and b is not None and a != b for a, b in zip(s, t)):
            raise ValueError(f"Shapes of all inputs must match for stack: {[list(x) if x else x for x in shapes]}")
    if s is None:
        return [(None, dts[0])]
    axis = attrs["axis"]
    if not -len(s) - 1 <= axis <= len(s):
        raise ValueError(f"axis {axis} out of range for stack of rank-{len(s)} tensors")
    axis %= len(s) + 1
    return [(s[:axis] + (len(shapes),) + s[axis:], dts[0])]


register("Pack", infer=_pack_infer, kernel=lambda attrs, *xs: np.stack(xs, axis=attrs["axis"]),
         grad=lambda op, g: list(_as_tuple(unstack(g, num=len(op.inputs), axis=op.get_attr("axis")))),
         kind="layout")


def _as_tuple(x):
    return x if isinstance(x, (tuple, list)) else (x,)


def _unpack_infer(shapes, dts, attrs):
    s = shapes[0]
    n = attrs["num"]
    if s is None:
        return [(None, dts[0])] * n
    axis = attrs["axis"] % len(s)
    if s[axis] is not None and s[axis] != n:
        raise ValueError(f"Dimension {axis} has size {s[axis]}, cannot unstack into {n} tensors")
    return [(s[:axis] + s[axis + 1:], dts[0])] * n


def _unpack_grad(op, *grads):
    gs = [zeros_like(o) if g is None else g for g, o in zip(grads, op.outputs)]
    return [stack(gs, axis=op.get_attr("axis"))]


register("Unpack", infer=_unpack_infer,
         kernel=lambda attrs, x: tuple(np.asarray(np.take(x, i, axis=attrs["axis"]), order="C")
                                       for i in range(attrs["num"])),
         grad=_unpack_grad, kind="layout")


def stack(values, axis=0, name="stack"):
    if not isinstance(values, (list, tuple)):
        raise ValueError("stack expects a non-empty list of tensors")
    if axis == 0 and not any(hasattr(v, "dtype") and not isinstance(v, np.ndarray) for v in values):
        # TF converts a list of Python / numpy values as one array first: [1, 2.5] is float32, [] too
        return convert_to_tensor(list(values) if values else np.zeros([0], np.float32), name=name)
    if not values:
        raise ValueError("stack expects a non-empty list of tensors")
    xs = convert_all(list(values))
    return apply_op("Pack", xs, {"axis": int(axis)}, name=name)


dispatch.stack = stack   # convert_to_tensor packs lists holding tensors with it


def unstack(value, num=None, axis=0, name="unstack"):
    (x,) = convert_all([value])
    axis = _int_arg(axis, "axis")
    rank = x.shape.rank
    if rank is not None and not -rank <= axis < rank:
        raise ValueError(f"Argument `axis` = {axis} not in range [{-rank}, {rank})")
    if num is None:
        if x.shape.rank is None or x.shape[axis] is None:
            raise ValueError(f"Cannot infer argument `num` from shape {x.shape}")
        num = x.shape[axis]
    out = apply_op("Unpack", [x], {"num": int(num), "axis": int(axis)}, name=name)
    return list(_as_tuple(out))


# ---------------------------------------------------------------- slicing
def _slice_spec(key):
    """A hashable description of a ``__getitem__`` key."""
    if not isinstance(key, tuple):
        key = (key,)
    spec = []
    for k in key:
        if k is Ellipsis:
            spec.append(("...",))
        elif k is None:
            spec.append(("new",))
        elif isinstance(k, slice):
            parts = []
            for v in (k.start, k.stop, k.step):
                if v is not None and not isinstance(v, (int, np.integer)):
                    v = get_static_value(v)
                    if v is None:
                        raise TypeError("jitgrad slicing needs Python int bounds (or constants).")
                parts.append(None if v is None else int(v))
            if parts[2] == 0:
                raise shape_error("slice step cannot be zero")
            spec.append(("slice", *parts))
        elif isinstance(k, (bool, np.bool_)):
            raise TypeError("Only integers, slices, ellipsis and tf.newaxis are valid indices, got bool")
        elif isinstance(k, (int, np.integer)) or (hasattr(k, "dtype") and get_static_value(k) is not None
                                                  and np.ndim(get_static_value(k)) == 0):
            spec.append(("int", int(k if isinstance(k, (int, np.integer)) else get_static_value(k))))
        else:
            raise TypeError(f"Only integers, slices (`:`), ellipsis (`...`), tf.newaxis (`None`) and scalar "
                            f"int32/int64 tensors are valid indices, got {k!r}")
    return tuple(spec)


def _spec_index(spec, shape):
    """The numpy index for ``spec`` on ``shape``, checking integer bounds."""
    consumed = sum(1 for s in spec if s[0] in ("int", "slice"))
    if consumed > len(shape):
        raise ValueError(f"Index out of range: too many indices ({consumed}) for a tensor of rank {len(shape)}")
    idx = []
    dim = 0
    for s in spec:
        if s[0] == "...":
            n = len(shape) - consumed
            idx.append(Ellipsis)
            dim += n
        elif s[0] == "new":
            idx.append(None)
        elif s[0] == "int":
            d = shape[dim]
            if d is not None and not -d <= s[1] < d:
                raise ValueError(f"slice index {s[1]} of dimension {dim} out of bounds.")
            idx.append(s[1])
            dim += 1
        else:
            idx.append(slice(s[1], s[2], s[3]))
            dim += 1
    return tuple(idx)


def _strided_infer(shapes, dts, attrs):
    s = shapes[0]
    spec = attrs["spec"]
    if s is None:
        return [(None, dts[0])]
    idx = _spec_index(spec, s)
    out = []
    dim = 0
    consumed = sum(1 for t in spec if t[0] in ("int", "slice"))
    for item, k in zip(spec, idx):
        if item[0] == "...":
            n = len(s) - consumed
            out.extend(s[dim:dim + n])
            dim += n
        elif item[0] == "new":
            out.append(1)
        elif item[0] == "int":
            dim += 1
        else:
            d = s[dim]
            out.append(None if d is None else len(range(*k.indices(d))))
            dim += 1
    out.extend(s[dim:])
    return [(tuple(out), dts[0])]


def _slice_bounds_error(begin, size, dims):
    """TF's Slice kernel check (slice_op.cc SharedSliceValidation) of begin / size against
    the input's dims (None: unknown, skipped); the message, or None when they fit."""
    for i, (b, s, d) in enumerate(zip(begin, size, dims)):
        if d is None:
            continue
        if d == 0:
            if b != 0 or s not in (0, -1):
                return (f"Expected begin[{i}] == 0 (got {b}) and size[{i}] == 0 (got {s}) when "
                        f"input.dim_size({i}) == 0")
            continue
        if not 0 <= b <= d:
            return f"Expected begin[{i}] in [0, {d}], but got {b}"
        if s == -1:
            s = d - b
        if not (0 <= s and b + s <= d):
            return f"Expected size[{i}] in [0, {d - b}], but got {s}"
    return None


def _strided_run_check(shapes, attrs):
    # tf.slice on dims unknown when the graph was built: checked on the run's shapes, as
    # TF's kernel does (StridedSlice itself clamps, as Python slicing does)
    bounds = attrs.get("slice_bounds")
    if bounds is not None and shapes[0] is not None:
        why = _slice_bounds_error(bounds[0], bounds[1], shapes[0])
        if why:
            raise ValueError(why)


register("StridedSlice", infer=_strided_infer, run_check=_strided_run_check,
         kernel=lambda attrs, x: np.asarray(x[_spec_index(attrs["spec"], x.shape)], order="C"),
         grad=lambda op, g: [apply_op("StridedSliceGrad", [g, op.inputs[0]], {"spec": op.get_attr("spec")})],
         kind="layout")


def _strided_grad_kernel(attrs, g, ref):
    out = np.zeros(ref.shape, g.dtype)
    out[_spec_index(attrs["spec"], ref.shape)] = g
    return out


def _strided_grad_infer(shapes, dts, attrs):
    """The gradient of x[spec], shaped as x (input 1): input 0 is shaped as x[spec]."""
    require_shape(0, shapes[0], _strided_infer(shapes[1:], dts[1:], attrs)[0][0])
    return [(shapes[1], dts[0])]


register("StridedSliceGrad", infer=_strided_grad_infer, kernel=_strided_grad_kernel,
         grad=lambda op, g: [apply_op("StridedSlice", [g], {"spec": op.get_attr("spec")}), None],
         kind="layout", shape_only=(1,))


def strided_slice_getitem(tensor, key):
    (x,) = convert_all([tensor])
    if _is_bool_mask(key):
        return boolean_mask(x, key)          # TF's __getitem__: a bool tensor / array key is a mask
    if _has_runtime_index(key):
        return _getitem_by_gathers(x, key if isinstance(key, tuple) else (key,))
    if _has_runtime_bound(key):
        return _dyn.strided_slice(x, key)
    return apply_op("StridedSlice", [x], {"spec": _slice_spec(key)}, name="strided_slice")


def strided_slice_update(x, key, value, name=None):
    """``x`` with ``x[key]`` replaced by ``value`` (broadcast to it): what TF's ``v[key].assign``
    writes. The slice is put in place by the slice's own gradient op and picked by a constant
    mask, so it compiles as those do; a strided slice never names an element twice."""
    (x,) = convert_all([x])
    value = convert_to_tensor(value, dtype=x.dtype, graph=graph_of([x]))
    if _has_runtime_index(key) or _has_runtime_bound(key):
        raise NotImplementedError("jitgrad assigns into slices with bounds known when the graph is built; for a "
                                  "run-time index use v.scatter_nd_update([[i]], [row]).")
    if not x.shape.is_fully_defined():
        raise NotImplementedError(f"jitgrad assigns into slices of fully known shapes, got {x.shape}.")
    spec = _slice_spec(key)
    dims = tuple(x.shape.as_list())
    (target, _), = _strided_infer([dims], [x.dtype], {"spec": spec})
    value = broadcast_to(value, target)
    placed = apply_op("StridedSliceGrad", [value, x], {"spec": spec})
    mask = np.zeros(dims, bool)
    mask[_spec_index(spec, dims)] = True
    return where(convert_to_tensor(mask, graph=graph_of([x])), placed, x, name=name)


def _is_bool_mask(key):
    return (isinstance(key, np.ndarray) and key.dtype == np.bool_) or \
        (hasattr(key, "dtype") and not isinstance(key, np.ndarray) and key.dtype == dtypes.bool_)


def _is_runtime_index(k):
    return (hasattr(k, "dtype") and getattr(k.dtype, "is_integer", False) and k.shape.rank == 0
            and get_static_value(k) is None)


def _has_runtime_bound(key):
    return any(isinstance(k, slice) and any(v is not None and not isinstance(v, (int, np.integer))
                                            and get_static_value(v) is None for v in (k.start, k.stop, k.step))
               for k in (key if isinstance(key, tuple) else (key,)))


def _has_runtime_index(key):
    return any(_is_runtime_index(k) for k in (key if isinstance(key, tuple) else (key,)))


def _getitem_by_gathers(x, key):
    """``x[i]`` / ``x[:, i, 2]`` with scalar integer tensors known only at run time (e.g. a
    staged loop's counter): one gather per indexed axis, negative indices counting from the
    end as TF's strided slice does; an index out of range fails at run time (gather's check)."""
    axis = 0
    for k in key:
        if isinstance(k, slice) and k == slice(None):
            axis += 1
            continue
        if not (isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_))) and \
                not _is_runtime_index(k) and not (hasattr(k, "dtype") and get_static_value(k) is not None
                                                  and np.ndim(get_static_value(k)) == 0):
            raise NotImplementedError("jitgrad indexes with a run-time scalar only together with other integers "
                                      f"and full slices (`:`), got {key!r}.")
        i = cast(convert_all([k])[0], dtypes.int32) if hasattr(k, "dtype") else int(k)
        dim = x.shape.dims[axis] if x.shape.rank is not None else None
        n = dim if dim is not None else shape(x)[axis]
        if hasattr(i, "dtype"):
            i = where(less(i, 0), add(i, n), i)
        elif i < 0:
            i += n
        x = gather(x, i, axis=axis)
    return x


def slice_(input_, begin, size, name=None):
    """``tf.slice``: ``size[i]`` elements from ``begin[i]`` along each axis
    (-1: to the end), as a strided slice. begin and size must be known when the
    graph is built."""
    (x,) = convert_all([input_])
    b = [int(v) for v in _static_value(begin, "the begin of tf.slice").reshape(-1)]
    s = [int(v) for v in _static_value(size, "the size of tf.slice").reshape(-1)]
    rank = x.shape.rank
    if len(b) != len(s) or (rank is not None and len(b) != rank):
        raise shape_error(f"Expected begin and size arguments to be 1-D tensors of size {rank}, but got "
                          f"shapes [{len(b)}] and [{len(s)}] instead.")
    dims = x.shape.as_list() if rank is not None else [None] * len(b)
    bad_size = next((i for i, v in enumerate(s) if v < -1), None)
    if bad_size is not None:     # TF's shape function rejects these: ValueError in a graph
        raise shape_error(f"Expected size[{bad_size}] in [0, ...) or -1, but got {s[bad_size]}")
    why = _slice_bounds_error(b, s, dims)
    if why and context.executing_eagerly():
        raise InvalidArgumentError(why)
    attrs = {"spec": _slice_spec(tuple(slice(bi, None if si == -1 else bi + si) for bi, si in zip(b, s)))}
    if None in dims or why:
        # checked when the run's shapes are known (_strided_run_check): TF's Slice kernel finds
        # bad bounds when it runs, an InvalidArgumentError from a graph too
        attrs["slice_bounds"] = (tuple(b), tuple(s))
    return apply_op("StridedSlice", [x], attrs, name=name or "Slice")


# ---------------------------------------------------------------- gather / tile / broadcast
def _gather_infer(shapes, dts, attrs):
    if not dts[1].is_integer:
        raise TypeError(f"indices must be int32 or int64, got {dts[1].name}")
    p, i = shapes
    if p is None or i is None:
        return [(None, dts[0])]
    axis = attrs["axis"]
    if not -len(p) <= axis < len(p):
        raise ValueError(f"axis {axis} out of range for gather from a rank-{len(p)} tensor")
    axis %= len(p)
    return [(p[:axis] + tuple(i) + p[axis + 1:], dts[0])]


def _check_indices(i, n, size):
    """TF's gather kernel checks indices only when it copies something: an
    empty output (size 0) takes any indices."""
    bad = (i < 0) | (i >= n)
    if size and np.any(bad):
        j = int(np.asarray(i)[bad].ravel()[0])
        raise InvalidArgumentError(f"indices = {j} is not in [0, {n})")


def _gather_kernel(attrs, p, i):
    axis = attrs["axis"] % p.ndim
    out = np.take(p, np.clip(i, 0, max(p.shape[axis] - 1, 0)), axis=axis) if p.shape[axis] else \
        np.zeros(p.shape[:axis] + i.shape + p.shape[axis + 1:], p.dtype)
    if not isinstance(out, np.ndarray):   # a scalar index into a string (object) vector gives the bytes
        out = np.array(out, dtype=p.dtype)
    _check_indices(i, p.shape[axis], out.size)
    return out


def _gather_grad_kernel(attrs, g, i, ref):
    axis = attrs["axis"] % ref.ndim
    # the forward gather checked its indices, unless its output was fed: never wrap -1
    _check_indices(i, ref.shape[axis], g.size)
    out = np.zeros(ref.shape, accumulator(g.dtype))      # halves added in float32, rounded once (sums.py)
    moved = np.moveaxis(out, axis, 0)
    gm = g.reshape(ref.shape[:axis] + (i.size,) + ref.shape[axis + 1:])
    np.add.at(moved, i.reshape(-1), np.moveaxis(gm, axis, 0))
    return out.astype(g.dtype, copy=False)


register("GatherV2", denormals="keep", infer=_gather_infer, kernel=_gather_kernel,
         grad=lambda op, g: [apply_op("GatherGrad", [g, op.inputs[1], op.inputs[0]], {"axis": op.get_attr("axis")}),
                             None], kind="other")
def _gather_grad_infer(shapes, dts, attrs):
    """The gradient of gather(params=input 2, indices=input 1), shaped as params:
    input 0 is shaped as the gather's output."""
    require_shape(0, shapes[0], _gather_infer([shapes[2], shapes[1]], [dts[0], dts[1]], attrs)[0][0])
    return [(shapes[2], dts[0])]


register("GatherGrad", denormals="flush", infer=_gather_grad_infer, kernel=_gather_grad_kernel,
         grad=lambda op, g: [gather(g, op.inputs[1], axis=op.get_attr("axis")), None, None], kind="other",
         shape_only=(2,))


def gather(params, indices, validate_indices=None, axis=None, batch_dims=0, name=None, user=False):
    """A GatherV2. ``user``: the user's tf.gather / embedding_lookup / Keras Embedding, whose
    gradient along axis 0 is IndexedSlices as TF's (sparse_gradients.py); jitgrad's own gathers
    (x[i] at a run-time i, a TensorArray's read...) stand for TF ops of dense gradients."""
    (p,) = convert_all([params])
    (i,) = convert_all([indices], graph=getattr(p, "graph", None) if not _eager(p) else None)
    if batch_dims != 0:     # tf.gather is ops/gather_batched.gather, which handles them
        raise NotImplementedError("array_ops.gather takes batch_dims=0 only (see ops/gather_batched.py).")
    attrs = {"axis": int(axis or 0)}
    if user:
        attrs["_row_slices"] = True     # ("_": not part of the compiled kernel's key)
    return apply_op("GatherV2", [p, i], attrs, name=name or "GatherV2")


def _eager(t):
    return isinstance(t, EagerTensor)


def _tile_infer(shapes, dts, attrs):
    s, m = shapes[0], attrs["multiples"]
    if s is None:
        return [((None,) * len(m), dts[0])]
    if len(m) != len(s):
        raise ValueError(f"Expected multiples argument to be a vector of length {len(s)} but got length {len(m)}")
    out = tuple(None if d is None else d * k for d, k in zip(s, m))
    if dts[0] == dtypes.uint16 and any(k != 1 for k in m) and 0 not in out:
        # TF 2.21 has no uint16 Tile kernel (only its identity and empty-output shortcuts run);
        # TF raises when the op runs, jitgrad when it is built (same class).
        raise UnimplementedError(f"The input data type is not supported, DataType : uint16, Dimension : {len(s)}")
    return [(out, dts[0])]


def _tile_grad_kernel(attrs, g, ref):
    m = attrs["multiples"]
    inter = []
    for k, d in zip(m, ref.shape):
        inter += [k, d]
    return reference_sum(g.reshape(inter), tuple(range(0, 2 * len(m), 2)))


register("Tile", infer=_tile_infer, kernel=lambda attrs, x: np.tile(x, attrs["multiples"]),
         grad=lambda op, g: [apply_op("TileGrad", [g, op.inputs[0]], {"multiples": op.get_attr("multiples")})],
         kind="layout", identity_if_same_shape=True, keeps_uniform=True)


def _tile_grad_infer(shapes, dts, attrs):
    """The gradient of tile(input 1), shaped as input 1: input 0 is shaped as the tile."""
    require_shape(0, shapes[0], _tile_infer(shapes[1:], dts[1:], attrs)[0][0])
    return [(shapes[1], dts[0])]


register("TileGrad", infer=_tile_grad_infer, kernel=_tile_grad_kernel,
         grad=lambda op, g: [tile(g, op.get_attr("multiples")), None], kind="reduction", shape_only=(1,))


def tile(input, multiples, name=None):  # noqa: A002
    (x,) = convert_all([input])
    if _runtime_shape(multiples):
        return _dyn.tile(x, multiples, name=name)
    return apply_op("Tile", [x], {"multiples": _static_shape_arg(multiples, "multiples")}, name=name or "Tile")


def _broadcast_to_infer(shapes, dts, attrs):
    target = attrs["shape"]
    out = broadcast_dims(shapes[0], target, "'BroadcastTo'")
    if out is not None and tuple(out) != tuple(target):
        raise ValueError(f"Unable to broadcast tensor of shape {list(shapes[0])} to {list(target)}")
    return [(tuple(target), dts[0])]


register("BroadcastTo", denormals="keep", infer=_broadcast_to_infer,
         kernel=lambda attrs, x: np.asarray(np.broadcast_to(x, attrs["shape"]), order="C"),
         grad=lambda op, g: [reduce_to(g, op.inputs[0])], kind="elementwise", pointwise=False, identity_if_same_shape=True, keeps_uniform=True)


def broadcast_to(input, shape, name=None):  # noqa: A002
    (x,) = convert_all([input])
    if _runtime_shape(shape):
        return _dyn.broadcast_to(x, shape, name=name)
    return apply_op("BroadcastTo", [x], {"shape": _static_shape_arg(shape)}, name=name or "BroadcastTo")


# ---------------------------------------------------------------- shape queries
register("Shape", infer=lambda shapes, dts, attrs: [((None if shapes[0] is None else len(shapes[0]),), attrs["out_type"])],
         kernel=lambda attrs, x: np.array(x.shape, attrs["out_type"].np), kind="source", shape_only=(0,), cheap=True, grad=NOT_DIFFERENTIABLE)


def shape(input, out_type=dtypes.int32, name=None):  # noqa: A002
    (x,) = convert_all([input])
    out_type = dtypes.as_dtype(out_type)
    if x.shape.is_fully_defined():
        return convert_to_tensor(np.array(x.shape.as_list(), out_type.np), graph=getattr(x, "graph", None)
                                 if not _eager(x) else None)
    return apply_op("Shape", [x], {"out_type": out_type}, name=name or "Shape")


def size(input, out_type=dtypes.int32, name=None):  # noqa: A002
    return _reduction("Prod", shape(input, out_type), name=name or "Size")


def rank(input, name=None):  # noqa: A002
    (x,) = convert_all([input])
    if x.shape.rank is None:   # (a cond whose branches return different ranks): known when it runs
        return shape(shape(x), name=name or "Rank")[0]
    return convert_to_tensor(np.int32(x.shape.rank), graph=getattr(x, "graph", None) if not _eager(x) else None)


def get_static_value(tensor, partial=False):
    """``tf.get_static_value``: the value if known without running anything."""
    if isinstance(tensor, EagerTensor):
        return tensor.numpy()
    if not isinstance(tensor, Tensor):
        try:
            return np.asarray(tensor)
        except Exception:
            return None
    op = tensor.op
    if op.type == "Const":
        return op.attrs["value"]
    if op.type == "Shape" and op.inputs[0].shape.is_fully_defined():
        return np.array(op.inputs[0].shape.as_list(), op.attrs["out_type"].np)
    if op.type == "Pack":
        vals = [get_static_value(t) for t in op.inputs]
        if all(v is not None for v in vals):
            return np.stack(vals, axis=op.attrs["axis"])
    if op.type in ("Identity", "StopGradient"):
        return get_static_value(op.inputs[0])
    return None


def one_hot(indices, depth, on_value=None, off_value=None, axis=None, dtype=None, name=None):
    """``tf.one_hot`` as ``where(expand_dims(indices, axis) == range(depth), on, off)``.

    As TF's OneHot kernel: an index outside [0, depth) (-1 included) gives an
    all-off row; the new axis goes at ``axis`` (-1: last); the dtype is
    ``dtype``, else on_value's / off_value's, else float32, and on/off values of
    another dtype raise TypeError (array_ops.one_hot's rules, with its messages).
    Not differentiable (TF: NotDifferentiable("OneHot")): no gradient reaches
    on_value / off_value."""
    g = graph_of([indices, on_value, off_value])
    (i,) = convert_all([indices], graph=g)
    if i.dtype not in (dtypes.uint8, dtypes.int8, dtypes.int32, dtypes.int64):
        raise TypeError(f"Value passed to parameter 'indices' has DataType {i.dtype.name} not in list of "
                        "allowed values: uint8, int8, int32, int64")
    if i.dtype in (dtypes.uint8, dtypes.int8):
        i = cast(i, dtypes.int32)      # compared with range(depth), which may not fit in 8 bits
    dtype = None if dtype is None else dtypes.as_dtype(dtype)
    on = None if on_value is None else convert_to_tensor(on_value, preferred_dtype=dtype, graph=g)
    off = None if off_value is None else convert_to_tensor(off_value, preferred_dtype=dtype, graph=g)
    if on is not None or off is not None:
        if dtype is not None:
            for what, t in (("on_value", on), ("off_value", off)):
                if t is not None and t.dtype != dtype:
                    raise TypeError(f"dtype {t.dtype} of {what} does not match dtype parameter {dtype}")
        else:
            dtype = on.dtype if on is not None else off.dtype
        if on is not None and off is not None and on.dtype != off.dtype:
            raise TypeError(f"dtype {on.dtype} of on_value does not match dtype {off.dtype} of off_value")
    else:
        dtype = dtype or dtypes.float32
    if on is None:
        on = convert_to_tensor(1, dtype, graph=g)
    if off is None:
        off = convert_to_tensor(0, dtype, graph=g)
    for what, t in (("on_value", on), ("off_value", off)):
        if t.shape.rank not in (None, 0):
            raise shape_error(f"{what} must be a scalar, but got: {t.shape.as_list()}")
    d = depth if isinstance(depth, (int, np.integer)) else get_static_value(depth)
    if d is None:
        raise ValueError("jitgrad's tf.one_hot needs a depth known when the graph is built.")
    if np.asarray(d).dtype.kind not in "iu":
        raise TypeError(f"Cannot convert {depth!r} to EagerTensor of dtype int32")
    if np.ndim(d) != 0:
        raise shape_error(f"depth must be a scalar, but got: {list(np.shape(d))}")
    d = int(d)
    if d < 0:
        raise shape_error(f"depth must be non-negative, got: {d}")
    axis = -1 if axis is None else int(axis)
    rank = i.shape.rank
    if rank is None:
        if axis != -1:
            raise ValueError("jitgrad's tf.one_hot needs indices of known rank for an axis other than -1")
        pos = -1
    else:
        if not (axis == -1 or 0 <= axis <= rank):
            raise shape_error(f"Expected axis to be -1 or between [0, {rank + 1}).  But received: {axis}")
        pos = rank if axis == -1 else axis
        tail = rank - pos    # index dims after the new axis
    classes = np.arange(d, dtype=i.dtype.np)
    if rank is not None:
        classes = classes.reshape((d,) + (1,) * tail)
    hit = equal(expand_dims(i, pos), convert_to_tensor(classes, graph=g))
    return where(hit, stop_gradient(on), stop_gradient(off), name=name or "one_hot")


# ---------------------------------------------------------------- range / split
_RANGE_ORDER = (dtypes.int32, dtypes.int64, dtypes.float32, dtypes.float64)


def _range_kernel(attrs, s, l, d):
    """TF's Range kernel: value i is start + i * delta, computed in the output dtype."""
    dtype = attrs["Tidx"]
    t = dtype.np.type
    s, l, d = t(s), t(l), t(d)
    if d == 0:
        raise shape_error(f"Requires delta != 0: {d}")
    if d > 0 and not s <= l:       # (as TF's tests: a NaN fails them)
        raise shape_error(f"Requires start <= limit when delta > 0: {s}/{l}")
    if not d > 0 and not s >= l:
        raise shape_error(f"Requires start >= limit when delta < 0: {s}/{l}")
    if dtype.is_integer:
        size = (abs(int(l) - int(s)) + abs(int(d)) - 1) // abs(int(d))
    else:
        size = np.ceil(np.abs((l - s) / d))
        if not float(size) <= INT64_MAX:       # (inf, NaN too; float(): no half-precision INT64_MAX)
            raise shape_error(f"Requires ((limit - start) / delta) <= {INT64_MAX}")
        size = int(size)
    if size * np.dtype(dtype.np).itemsize > ADDRESS_SPACE_BYTES:    # (numpy's arange(2**63 - 1) is empty)
        raise oom_error([size], dtype, "range")
    return (s + np.arange(size).astype(dtype.np) * d).astype(dtype.np)


def _range_infer(shapes, dts, attrs):
    for sh in shapes:
        if sh is not None and len(sh) != 0:
            raise ValueError(f"Shape must be rank 0 but is rank {len(sh)} for 'Range'")
    return [((None,), attrs["Tidx"])]


# Only built when an argument is known only at run time (else tf.range is a
# constant). Its length depends on the values: no native lowering, a compiled
# run that needs one is a counted interpreter fallback. Not differentiable (TF).
def _range_run_kernel(attrs, start, limit, delta):
    """The Range op when it runs: bad arguments are TF's run-time InvalidArgumentError."""
    try:
        return _range_kernel(attrs, start, limit, delta)
    except ValueError as e:
        raise InvalidArgumentError(str(e)) from None
    except MemoryError as e:     # (a compiled run's specialisation calls it directly)
        raise ResourceExhaustedError(f"OOM when running Range: {e}") from None


def _range_specialise(attrs, start, limit, delta):
    return "Const", _range_run_kernel(attrs, start, limit, delta)   # (a compiled run: a constant of that length)


register("Range", denormals="flush",
         infer=_range_infer, kernel=_range_run_kernel, data_dependent_shape=True, lowering="interpreter",
         grad=NOT_DIFFERENTIABLE, specialise=_range_specialise)


def range_(start, limit=None, delta=1, dtype=None, name="range"):
    """``tf.range``. Dtypes are inferred as TF does: the widest of the
    arguments' (Python int -> int32, float -> float32), unless ``dtype`` is
    given. A constant when every argument is known when the graph is built,
    else a Range op (its length known only when it runs)."""
    if limit is None:
        start, limit = 0, start
    vals, dts = [], []
    for v in (start, limit, delta):
        if hasattr(v, "dtype") and not isinstance(v, (np.ndarray, np.generic)):
            (v,) = convert_all([v])          # a variable is read (in a graph: a read op)
            dts.append(v.dtype)
            sv = get_static_value(v)
            if sv is None:                   # known only at run time
                if v.shape.rank not in (0, None):
                    raise ValueError(f"range arguments must be scalars, got shape {v.shape}")
                vals.append(v)
                continue
            v = sv
        else:
            dts.append(dtypes.as_dtype(to_numpy(v, None).dtype))
        if np.ndim(v) != 0:
            raise ValueError(f"range arguments must be scalars, got shape {np.shape(v)}")
        vals.append(np.asarray(v).item())
    if dtype is None:
        for dt in dts:
            if dt not in _RANGE_ORDER:
                raise TypeError(f"Value for attr 'Tidx' of {dt.name} is not in the list of allowed values "
                                f"for Range")
        dtype = max(dts, key=_RANGE_ORDER.index)
    dtype = dtypes.as_dtype(dtype)
    if dtype not in _RANGE_ORDER + (dtypes.float16, dtypes.bfloat16):   # (half types: asked for, never inferred)
        raise TypeError(f"Value for attr 'Tidx' of {dtype.name} is not in the list of allowed values for Range")
    if any(hasattr(v, "op") for v in vals):
        g = next(v.graph for v in vals if hasattr(v, "op"))
        ins = [cast(v, dtype) if hasattr(v, "op") else convert_to_tensor(np.array(v, dtype.np), graph=g)
               for v in vals]
        return apply_op("Range", ins, {"Tidx": dtype}, name=name)
    return constant(_range_kernel({"Tidx": dtype}, *vals), dtype=dtype, name=name)


def split(value, num_or_size_splits, axis=0, num=None, name="split"):
    """``tf.split``, as slices of ``value`` (so its gradient is the slices' gradients)."""
    (x,) = convert_all([value])
    eager = context.executing_eagerly() and _eager(x)
    axis_v = axis if isinstance(axis, (int, np.integer)) else get_static_value(axis)
    if axis_v is None:
        raise ValueError("jitgrad's tf.split needs an axis known when the graph is built.")
    axis = int(axis_v)
    rank = x.shape.rank
    if rank is not None and not -rank <= axis < rank:
        raise ValueError(f"Dimension must be in range [{-rank}, {rank}), but is {axis}")
    dim = None
    if rank is not None:
        dim = x.shape.dims[axis]
    sizes = num_or_size_splits
    if not isinstance(sizes, (int, np.integer)):
        sv = get_static_value(sizes) if hasattr(sizes, "dtype") and not isinstance(sizes, np.ndarray) else sizes
        if sv is None:
            raise ValueError("jitgrad's tf.split needs num_or_size_splits known when the graph is built.")
        sizes = np.asarray(sv)
        if sizes.ndim == 0:
            sizes = int(sizes)
        else:
            sizes = [int(v) for v in sizes.reshape(-1)]
            if num is not None and num != len(sizes):
                raise ValueError(f"num={num} does not match the {len(sizes)} sizes given")
            bad = next((i for i, v in enumerate(sizes) if v < -1), None)
            why = ("size_splits can only have one -1" if sizes.count(-1) > 1 else   # (TF's shape function's)
                   None if bad is None else f"Split size at index {bad} must be >= 0. Got: {sizes[bad]}")
            if why:
                raise (InvalidArgumentError if eager else ValueError)(why)
    if dim is None and not isinstance(sizes, int) and -1 not in sizes:
        x, dim = _split_dim_fixed_at_run_time(x, axis, sizes)
    if dim is None:      # TF checks the sizes when the split runs (InvalidArgumentError), so do we
        if rank is None:
            raise ValueError(f"jitgrad's tf.split needs the rank of its input known when the graph is built "
                             f"to split along a dimension unknown then (shape {x.shape}).")
        return _dyn.split_run_time_dim(x, axis % rank, sizes)
    try:
        sizes = split_sizes(dim, axis, sizes)
    except InvalidArgumentError as e:
        if eager:
            raise
        raise ValueError(e.message) from None
    lead = (slice(None),) * (axis % rank)
    outs, begin = [], 0
    for sz in sizes:
        outs.append(strided_slice_getitem(x, lead + (slice(begin, begin + sz),)))
        begin += sz
    return outs


def split_sizes(dim, axis, sizes):
    """The piece sizes of tf.split of a dimension ``dim`` long (``sizes``: a number of equal
    pieces, or sizes with at most one -1): TF's Split / SplitV kernel checks, raising its
    InvalidArgumentError and message."""
    if isinstance(sizes, (int, np.integer)):
        n = int(sizes)
        if n <= 0 or dim % n:
            raise InvalidArgumentError(f"Number of ways to split should evenly divide the split dimension, but got "
                                       f"split_dim {axis} (size = {dim}) and num_split {n}")
        return [dim // n] * n
    sizes = list(sizes)
    unknown = [i for i, v in enumerate(sizes) if v == -1]
    if len(unknown) > 1 or any(v < -1 for v in sizes):
        raise InvalidArgumentError(f"There can only be one -1 in the input (and no other negative size): {sizes}")
    known = sum(v for v in sizes if v != -1)
    if known > dim or (not unknown and known != dim):
        raise InvalidArgumentError(f"Determined shape must either match input shape along split_dim exactly if "
                                   f"fully specified, or be less than the size of the input along split_dim if not "
                                   f"fully specified.  Got: {known}")
    if unknown:
        sizes[unknown[0]] = dim - known
    return sizes


def _split_dim_fixed_at_run_time(x, axis, sizes):
    """tf.split of fully given sizes along a dim the graph does not know: x reshaped to that dim
    being their sum, so a run whose dim differs fails with InvalidArgumentError (TF's SplitV
    kernel raises it too, "Determined shape must either match input shape along split_dim
    exactly ...") and the slices after it have a static size. Returns (x, the dim); (x, None)
    when the other dims are unknown too (the run-time split of array_ops_dynamic checks it)."""
    dim = int(sum(sizes))
    dims = [dim if i == axis % x.shape.rank else d for i, d in enumerate(x.shape.as_list())]
    if None in dims:     # (a -1 in the reshape would let a wrong dim through when the sizes multiply out)
        return x, None
    return reshape(x, dims), dim


# ---------------------------------------------------------------- pad / reverse / linspace (composites)
def _static_value(v, what):
    if hasattr(v, "dtype") and not isinstance(v, (np.ndarray, np.generic)):
        sv = get_static_value(v)
        if sv is None:
            raise NotImplementedError(f"jitgrad needs {what} known when the graph is built.")
        return np.asarray(sv)
    return np.asarray(v)


def _axis_slice(axis, sl):
    return (slice(None),) * axis + (sl,)


def _constant_block(r, axis, n, value):
    """A block shaped like ``r`` but ``n`` long along ``axis``, filled with the scalar
    tensor ``value``: a Fill when r's other dimensions are known, else built from
    r's shape (a sum of zeros_like(r) along axis keeps that dimension at 1 even
    when it is 0) and tiled."""
    dims = r.shape.as_list()
    others = [d for i, d in enumerate(dims) if i != axis]
    if all(d is not None for d in others):
        dims[axis] = n
        return fill(dims, value)
    row = add(_reduction("Sum", zeros_like(r), (axis,), keepdims=True), value)
    multiples = [1] * len(dims)
    multiples[axis] = n
    return tile(row, multiples)


def pad(tensor, paddings, mode="CONSTANT", constant_values=0, name=None):
    """``tf.pad``, composed of concat (CONSTANT: with constant blocks; REFLECT /
    SYMMETRIC: with reversed slices of the input), so gradients, the interpreter
    and the compiler need nothing new. ``paddings`` must be known when the graph
    is built; no gradient reaches ``constant_values`` (TF's PadV2 gives None)."""
    mode = mode.upper() if isinstance(mode, str) else mode
    if mode not in ("CONSTANT", "REFLECT", "SYMMETRIC"):
        raise ValueError('Value of argument `mode` expected to be one of "CONSTANT", "REFLECT", or "SYMMETRIC". '
                         f"Received `mode` = {mode}")
    (x,) = convert_all([tensor])
    pads = _static_value(paddings, "the paddings of tf.pad")
    if pads.dtype.kind not in "iu":
        raise TypeError(f"paddings must be int32 or int64, got {pads.dtype}")
    rank = x.shape.rank
    if rank is None:
        raise NotImplementedError("jitgrad's tf.pad needs an input of known rank.")
    if pads.ndim != 2 or pads.shape[1] != 2:
        raise shape_error(f"paddings must be a matrix with 2 columns: {list(pads.shape)}")
    if pads.shape[0] != rank:
        raise shape_error(f"The first dimension of paddings must be the rank of inputs{list(pads.shape)} "
                          f"{x.shape}")
    if np.any(pads < 0):
        bad = pads[np.any(pads < 0, axis=1)][0]
        raise shape_error(f"Paddings must be non-negative: {bad[0]} {bad[1]}")
    if mode == "CONSTANT":
        g = graph_of([x, constant_values])
        value = convert_to_tensor(constant_values, dtype=x.dtype, graph=g)
        if value.shape.rank not in (None, 0):
            raise shape_error(f"constant_values must be a scalar. Found: {value.shape.as_list()}")
        value = stop_gradient(value)
    if mode != "CONSTANT":
        # (TF raises when the kernel runs; the sizes known now are checked now: README)
        check_mirror_pads(mode, x.shape.dims, pads.tolist())
        x = mirror_pad_check(x, mode, pads.tolist())
    result = x
    for axis, (before, after) in enumerate(pads.tolist()):
        if not before and not after:
            continue
        dim = x.shape.dims[axis]
        parts = []
        if mode == "CONSTANT":
            if before:
                parts.append(_constant_block(result, axis, before, value))
            parts.append(result)
            if after:
                parts.append(_constant_block(result, axis, after, value))
        else:
            if dim is None:
                raise NotImplementedError(f"jitgrad's tf.pad in {mode} mode needs the size of dimension {axis} "
                                          "known when the graph is built.")
            shift = 1 if mode == "REFLECT" else 0
            if before:   # REFLECT: x[before], ..., x[1]; SYMMETRIC: x[before-1], ..., x[0]
                stop = None if shift == 0 else 0
                parts.append(strided_slice_getitem(result, _axis_slice(axis,
                                                                       slice(before - 1 + shift, stop, -1))))
            parts.append(result)
            if after:    # REFLECT: x[d-2], ..., x[d-1-after]; SYMMETRIC: x[d-1], ..., x[d-after]
                start = dim - 1 - shift
                stop = start - after if start - after >= 0 else None
                parts.append(strided_slice_getitem(result, _axis_slice(axis, slice(start, stop, -1))))
        result = concat(parts, axis)
    return identity(result, name=name or "Pad")


def reverse(tensor, axis, name=None):
    """``tf.reverse``: a strided slice with step -1 along each axis in ``axis``
    (a list of ints, negative allowed)."""
    (x,) = convert_all([tensor])
    axes = _static_value(axis, "the axis of tf.reverse")
    if axes.ndim != 1:
        raise shape_error(f"'dims' must be 1-dimension, not {axes.ndim}")
    if axes.size and axes.dtype.kind not in "iu":
        raise TypeError(f"axis must be int32 or int64, got {axes.dtype}")
    rank = x.shape.rank
    if rank is None:
        raise NotImplementedError("jitgrad's tf.reverse needs an input of known rank.")
    seen = set()
    for i, a in enumerate(axes.tolist()):
        if not -rank <= a < rank:
            raise shape_error(f"'axis'[{i}] = {a} is out of valid range [0, {rank - 1}")
        if a % rank in seen:
            raise shape_error(f"axis {a % rank} specified more than once.")
        seen.add(a % rank)
    if not seen:
        return identity(x, name=name or "ReverseV2")
    key = tuple(slice(None, None, -1) if i in seen else slice(None) for i in range(rank))
    return identity(strided_slice_getitem(x, key), name=name or "ReverseV2")


def linspace(start, stop, num, name=None, axis=0):
    """``tf.linspace`` (TF's linspace_nd): ``num`` values from start to stop along
    a new axis ``axis``; value i is start + i * delta, delta = (stop - start) /
    max(num - 1, 1), and the last is stop exactly. An integer start gives
    float64 (TF divides with truediv). ``num`` must be known when the graph is
    built; start/stop may be tensors (differentiable), broadcast together."""
    g = graph_of([start, stop])
    s = convert_to_tensor(start, graph=g)
    e = convert_to_tensor(stop, dtype=s.dtype, graph=g)
    n = _static_value(num, "num of tf.linspace")
    if n.ndim != 0 or n.dtype.kind not in "iu":
        raise TypeError(f"Argument `tensor` (name: num) must be of type integer. Received `tensor` = {num}")
    n = int(n)
    if n < 0:
        raise shape_error("Requires start <= limit when delta > 0: 1/-1")
    if s.shape.rank is None or e.shape.rank is None:
        raise NotImplementedError("jitgrad's tf.linspace needs start and stop of known rank.")
    if s.shape != e.shape:
        dims = broadcast_dims(s.shape.dims, e.shape.dims, "linspace")
        if any(d is None for d in dims):
            raise NotImplementedError("jitgrad's tf.linspace needs start and stop of known shapes to broadcast.")
        s, e = broadcast_to(s, dims), broadcast_to(e, dims)
    rank = s.shape.rank + 1
    if not -rank <= axis < rank:
        raise shape_error(f"axis {axis} is out of range for linspace of rank-{rank - 1} start/stop")
    axis %= rank
    s, e = expand_dims(s, axis), expand_dims(e, axis)
    delta = truediv(subtract(e, s), convert_to_tensor(np.array(max(n - 1, 1), s.dtype.np), graph=g))
    s, e = cast(s, delta.dtype), cast(e, delta.dtype)
    parts = [s]
    if n > 2:   # no empty middle block
        shape_r = [1] * rank
        shape_r[axis] = n - 2
        steps = np.arange(1, n - 1, dtype=np.int64).astype(delta.dtype.np).reshape(shape_r)
        parts.append(add(s, multiply(delta, convert_to_tensor(steps, graph=g))))
    full = concat(parts + [e], axis)
    if n < 2:   # TF slices [start, stop] too (so stop gets a zero gradient, not None)
        full = strided_slice_getitem(full, _axis_slice(axis, slice(0, n)))
    return identity(full, name=name or "linspace")


def _dyn_shape(shape):
    """A run-time shape argument as one int tensor (a list mixing ints and scalar tensors is stacked)."""
    if isinstance(shape, (list, tuple)):
        parts = [convert_to_tensor(d) if hasattr(d, "dtype") else d for d in shape]
        dt = next((p.dtype for p in parts if hasattr(p, "dtype")), dtypes.int32)
        return stack([p if hasattr(p, "dtype") else convert_to_tensor(p, dtype=dt) for p in parts])
    return shape


from . import array_ops_dynamic as _dyn  # noqa: E402  (its ops build on the ones above)
