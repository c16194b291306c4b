"""Reductions (sum, mean, max, min, prod) and the shape-directed helpers
their gradients and broadcasting gradients use."""
import numpy as np

from ..convert import convert_all
from ..shapes import InputShapeError, broadcast_dims, normalize_axes, num_elements, require_shape
from .. import context, dtypes
from ..errors import InvalidArgumentError
from ..graph import Tensor
from ._infer import COMPLEX, FLOATS, NUMBERS, check_dtype
from .array_ops import _int_arg, get_static_value, reshape, reshape_like, transpose
from .complex_ops import conj, real
from .math_ops import (add, cast, divide, equal, exp, greater, less, log, multiply, divide_no_nan, negative,
                       sqrt, where)
from .registry import NOT_DIFFERENTIABLE, apply_op, register
from .math_ops import square, subtract, zeros_like
from .sums import add_reduce, reference_sum


def _reduced_shape(shape, axis, keepdims):
    if shape is None:
        # Reducing everything of an unknown-rank tensor still gives a scalar.
        return () if axis is None and not keepdims else None
    axes = normalize_axes(axis, len(shape), allow_duplicates=True)   # (_reduce_run_check rejects them)
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _reduce_infer(allowed):
    def infer(shapes, dts, attrs):
        check_dtype(infer.op_name, dts[0], allowed)
        return [(_reduced_shape(shapes[0], attrs["axis"], attrs["keepdims"]), dts[0])]
    infer.op_name = "?"
    return infer


def _reduce_run_check(shapes, attrs):
    """TF's shape function lets a repeated reduction axis through; its kernel raises."""
    if shapes[0] is not None:
        normalize_axes(attrs["axis"], len(shapes[0]))


def _np_axes(x, attrs):
    return normalize_axes(attrs["axis"], x.ndim)


def _check_nonempty(x, axes, what):
    if any(x.shape[a] == 0 for a in axes):
        raise ValueError(f"{what} of an empty dimension has no identity")


def _sum_grad(op, g):
    return [unreduce(g, op.inputs[0], op.get_attr("axis"), op.get_attr("keepdims"))]


def _mean_grad(op, g):
    x, y = op.inputs[0], op.outputs[0]
    xs, ys = x.shape, y.shape
    if xs.is_fully_defined() and ys.is_fully_defined():
        factor = max(xs.num_elements(), 1) // max(ys.num_elements(), 1)
        count = float(factor)
    else:
        count = cast(apply_op("SizeRatio", [x, y]), g.dtype)
    return [divide(_sum_grad(op, g)[0], count)]


def _minmax_grad(op, g):
    x, y = op.inputs[0], op.outputs[0]
    axis, keep = op.get_attr("axis"), op.get_attr("keepdims")
    y_full = unreduce(y, x, axis, keep)
    indicators = cast(equal(y_full, x), g.dtype)
    num_selected = unreduce(reduce_sum(indicators, axis, keepdims=keep), x, axis, keep)
    return [multiply(divide(indicators, num_selected), unreduce(g, x, axis, keep))]


def _prod_grad(op, g):
    x = op.inputs[0]
    axis, keep = op.get_attr("axis"), op.get_attr("keepdims")
    others = apply_op("ProdExcept", [x], {"axis": axis})
    if x.dtype in COMPLEX:   # TF's _ProdGrad: "the gradient is in the conjugate direction"
        others = conj(others)
    return [multiply(unreduce(g, x, axis, keep), others)]


def _sum_kernel(attrs, x):
    return reference_sum(x, _np_axes(x, attrs), attrs["keepdims"])


def _mean_kernel(attrs, x):
    axes = _np_axes(x, attrs)
    with np.errstate(all="ignore"):
        if x.dtype.kind in "iu":
            # TF's Mean kernel sums integers in int64 (int32 does not wrap) and
            # divides as C does: the quotient rounds toward zero (mean([-1, -2]) = -1).
            s = np.sum(x, axis=axes, keepdims=attrs["keepdims"], dtype=np.int64)
            n = max(num_elements([x.shape[a] for a in axes]), 1)
            q = s // n
            q = q + ((q * n != s) & (s < 0))   # floor -> toward zero
            return np.asarray(q).astype(x.dtype)
        if num_elements([x.shape[a] for a in axes]) == 0:
            # the mean of nothing is NaN, as TF gives it, without numpy's "Mean of empty slice"
            # warning (a RuntimeWarning TF never emits)
            nan = complex(np.nan, np.nan) if x.dtype.kind == "c" else np.nan
            return np.full(_reduced_shape(x.shape, attrs["axis"], attrs["keepdims"]), nan, x.dtype)
        s = add_reduce(x, axes, attrs["keepdims"])     # halves in float32, outer axes in blocks (sums.py)
        return np.true_divide(s, s.dtype.type(num_elements([x.shape[a] for a in axes]))).astype(x.dtype)


def _max_kernel(attrs, x):
    axes = _np_axes(x, attrs)
    if x.size == 0 or any(x.shape[a] == 0 for a in axes):
        fill = -np.inf if x.dtype in dtypes.FLOAT_NP else np.iinfo(x.dtype).min
        return np.full(_reduced_shape(x.shape, attrs["axis"], attrs["keepdims"]), fill, x.dtype)
    return np.max(x, axis=axes, keepdims=attrs["keepdims"])


def _min_kernel(attrs, x):
    axes = _np_axes(x, attrs)
    if x.size == 0 or any(x.shape[a] == 0 for a in axes):
        fill = np.inf if x.dtype in dtypes.FLOAT_NP else np.iinfo(x.dtype).max
        return np.full(_reduced_shape(x.shape, attrs["axis"], attrs["keepdims"]), fill, x.dtype)
    return np.min(x, axis=axes, keepdims=attrs["keepdims"])


register("Sum", run_check=_reduce_run_check, infer=_reduce_infer(NUMBERS + COMPLEX), kernel=_sum_kernel, grad=_sum_grad,
         kind="reduction", full_reduce="sum")
register("Mean", run_check=_reduce_run_check, infer=_reduce_infer(NUMBERS + COMPLEX), kernel=_mean_kernel, grad=_mean_grad,
         kind="reduction", full_reduce="mean")
register("Max", run_check=_reduce_run_check, infer=_reduce_infer(NUMBERS), kernel=_max_kernel, grad=_minmax_grad,
         kind="reduction", full_reduce="max")
register("Min", run_check=_reduce_run_check, infer=_reduce_infer(NUMBERS), kernel=_min_kernel, grad=_minmax_grad,
         kind="reduction", full_reduce="min")
register("Prod", run_check=_reduce_run_check, infer=_reduce_infer(NUMBERS + COMPLEX),
         kernel=lambda attrs, x: np.prod(x, axis=_np_axes(x, attrs), keepdims=attrs["keepdims"], dtype=x.dtype),
         grad=_prod_grad, kind="reduction", full_reduce="prod")


def _prod_except_kernel(attrs, x):
    """Product of all *other* elements along the reduced axes (zeros handled exactly)."""
    if x.size == 0:
        # nothing to compute (and the concatenations below would add an
        # element to an empty reduced slice)
        return np.ones(x.shape, x.dtype)
    axes = _np_axes(x, attrs)
    keep = [a for a in range(x.ndim) if a not in axes]
    perm = keep + list(axes)
    xt = np.transpose(x, perm)
    lead = xt.shape[:len(keep)]
    flat = xt.reshape(lead + (int(np.prod([x.shape[a] for a in axes], dtype=np.int64)),))
    ones = np.ones(lead + (1,), x.dtype)
    left = np.cumprod(np.concatenate([ones, flat[..., :-1]], axis=-1), axis=-1, dtype=x.dtype)
    right = np.cumprod(np.concatenate([ones, flat[..., :0:-1]], axis=-1), axis=-1, dtype=x.dtype)[..., ::-1]
    out = (left * right).reshape(xt.shape)
    return np.transpose(out, np.argsort(perm))


def _prod_except_grad(op, g):
    """ProdExcept(x) is TF's `left * right` in _ProdGrad (exclusive cumprods from either
    end of each reduced group, flattened); differentiating that product the way TF does
    (through Cumprod's gradient) gives reduce_prod its second derivatives, TF's values
    included where x has zeros (Cumprod's gradient divides with divide_no_nan there)."""
    x = op.inputs[0]
    rank = x.shape.rank
    axes = None if rank is None else normalize_axes(op.get_attr("axis"), rank)
    keep = None if rank is None else [a for a in range(rank) if a not in axes]
    if rank is not None and all(x.shape[a] is not None for a in axes):
        rows_cols = [-1, num_elements([x.shape[a] for a in axes])]       # one row per reduced group
    elif rank is not None and all(x.shape[a] is not None for a in keep):
        rows_cols = [num_elements([x.shape[a] for a in keep]), -1]
    else:
        raise NotImplementedError("the second derivative of reduce_prod needs the reduced or the kept "
                                  "dimensions known when the graph is built")
    if 0 in rows_cols:
        return [zeros_like(x)]
    perm = keep + list(axes)
    flat = reshape(transpose(x, perm), rows_cols)
    g_flat = reshape(transpose(g, perm), rows_cols)
    forward, backward = ({"axis": 1, "exclusive": True, "reverse": r} for r in (False, True))
    left, right = apply_op("Cumprod", [flat], forward), apply_op("Cumprod", [flat], backward)
    d_flat = _cumprod_vjp(flat, g_flat * right, forward) + _cumprod_vjp(flat, g_flat * left, backward)
    return [transpose(reshape_like(d_flat, transpose(x, perm)), [int(i) for i in np.argsort(perm)])]


register("ProdExcept", denormals="flush",
         infer=lambda shapes, dts, attrs: [(shapes[0], dts[0])], kernel=_prod_except_kernel,
         kind="other", grad=lambda op, g: _prod_except_grad(op, g))


# -- shape-directed helpers: second input is used only for its shape -----------
def _sum_to_shape(attrs, g, ref):
    target = ref.shape
    if g.shape == target:
        return g
    extra = g.ndim - len(target)
    axes = tuple(range(extra)) + tuple(i + extra for i, d in enumerate(target) if d == 1 and g.shape[i + extra] != 1)
    out = reference_sum(g, axes, keepdims=True) if axes else g
    return out.reshape(target)


def _unreduce_kernel(attrs, g, ref):
    axes = normalize_axes(attrs["axis"], ref.ndim)
    if not attrs["keepdims"]:
        g = np.reshape(g, [1 if i in axes else d for i, d in enumerate(ref.shape)])
    return np.asarray(np.broadcast_to(g, ref.shape), order="C")


def _sum_to_shape_infer(shapes, dts, attrs):
    """Input 0 summed down to input 1's shape: input 1 must broadcast to input 0."""
    g, ref = shapes
    _require_broadcasts(1, ref, g)
    return [(ref, dts[0])]


def _broadcast_to_shape_of_infer(shapes, dts, attrs):
    """Input 0 broadcast to input 1's shape: input 0 must broadcast to it."""
    _require_broadcasts(0, shapes[0], shapes[1])
    return [(shapes[1], dts[0])]


def _require_broadcasts(index, src, target):
    if src is None or target is None:
        return
    try:
        out = broadcast_dims(src, target)
    except ValueError:
        out = None
    if out is None or len(out) != len(target) or \
            any(o is not None and t is not None and o != t for o, t in zip(out, target)):
        raise InputShapeError(index, src, target)


def _unreduce_infer(shapes, dts, attrs):
    """A reduction's output gradient (input 0) broadcast back over its input (input 1)."""
    require_shape(0, shapes[0], _reduced_shape(shapes[1], attrs["axis"], attrs["keepdims"]))
    return [(shapes[1], dts[0])]


register("SumToShape", infer=_sum_to_shape_infer, kernel=_sum_to_shape,
         grad=lambda op, g: [apply_op("BroadcastToShapeOf", [g, op.inputs[0]]), None],
         kind="reduction", shape_only=(1,), identity_if_same_shape=True, full_reduce="sum")
register("BroadcastToShapeOf", denormals="keep", infer=_broadcast_to_shape_of_infer,
         kernel=lambda attrs, x, ref: np.asarray(np.broadcast_to(x, ref.shape), order="C"),
         grad=lambda op, g: [apply_op("SumToShape", [g, op.inputs[0]]), None],
         kind="elementwise", shape_only=(1,), pointwise=False, identity_if_same_shape=True, keeps_uniform=True)
register("Unreduce", denormals="keep", infer=_unreduce_infer, kernel=_unreduce_kernel,
         grad=lambda op, g: [reduce_sum(g, op.get_attr("axis"), op.get_attr("keepdims")), None],
         kind="elementwise", shape_only=(1,), pointwise=False, identity_if_same_shape=True, keeps_uniform=True)
register("SizeRatio", infer=lambda shapes, dts, attrs: [((), dtypes.int32)],
         kernel=lambda attrs, x, y: np.array(max(x.size, 1) // max(y.size, 1), np.int32),
         kind="source", shape_only=(0, 1), cheap=True, grad=NOT_DIFFERENTIABLE)


def unreduce(g, x, axis, keepdims):
    """Broadcasts a reduction's output gradient back over x's shape."""
    return apply_op("Unreduce", [g, x], {"axis": axis, "keepdims": keepdims})


# ---------------------------------------------------------------- public
def _axis_attr(axis):
    if axis is None:
        return None
    if isinstance(axis, Tensor) or hasattr(axis, "numpy"):
        value = get_static_value(axis)
        if value is None:
            raise ValueError("jitgrad needs a reduction axis whose value is known when the graph is built.")
        axis = np.asarray(value)
    if isinstance(axis, np.ndarray):
        axis = axis.tolist()
    if isinstance(axis, (list, tuple)):
        return tuple(_int_arg(a, "reduction_indices") for a in axis)
    return (_int_arg(axis, "reduction_indices"),)


def _reduce(op_type, x, axis, keepdims, name, default_name):
    (x,) = convert_all([x])
    axis = _axis_attr(axis)
    if axis is not None and x.shape.rank is not None:
        normalize_axes(axis, x.shape.rank, allow_duplicates=True)  # validates the range now, as TF does
    return apply_op(op_type, [x], {"axis": axis, "keepdims": bool(keepdims)}, name=name or default_name)


def reduce_sum(input_tensor, axis=None, keepdims=False, name=None):
    return _reduce("Sum", input_tensor, axis, keepdims, name, "Sum")


def reduce_mean(input_tensor, axis=None, keepdims=False, name=None):
    return _reduce("Mean", input_tensor, axis, keepdims, name, "Mean")


def reduce_max(input_tensor, axis=None, keepdims=False, name=None):
    return _reduce("Max", input_tensor, axis, keepdims, name, "Max")


def reduce_min(input_tensor, axis=None, keepdims=False, name=None):
    return _reduce("Min", input_tensor, axis, keepdims, name, "Min")


def reduce_prod(input_tensor, axis=None, keepdims=False, name=None):
    return _reduce("Prod", input_tensor, axis, keepdims, name, "Prod")


# ---------------------------------------------------------------- argmax/argmin, any/all, cumsum
_ARG_DTYPES = NUMBERS + (dtypes.bool_,)


def static_int(value, what):
    if isinstance(value, (int, np.integer)):
        return int(value)
    v = get_static_value(value)
    if v is None or np.ndim(v) != 0:
        raise ValueError(f"jitgrad needs {what} as a scalar whose value is known when the graph is built.")
    return int(v)


def _arg_infer(shapes, dts, attrs):
    s = shapes[0]
    check_dtype("ArgMax/ArgMin", dts[0], _ARG_DTYPES, "input")
    if s is None:
        return [(None, attrs["output_type"])]
    axis = attrs["axis"]
    if not -len(s) <= axis < max(len(s), 1) or not s:
        raise ValueError(f"Expected dimension in the range [{-len(s)}, {len(s)}), but got {axis}")
    axis %= len(s)
    return [(tuple(d for i, d in enumerate(s) if i != axis), attrs["output_type"])]


def _arg_kernel(fn):
    """TF's CPU kernel (Eigen's ArgMax/ArgMinTupleReducer) scans in index order
    from (index 0, lowest()) -- for floats -FLT_MAX / -DBL_MAX, not -inf -- and
    takes an element only if it is strictly greater (argmin: smaller, from
    highest()). So ties keep the first index, NaN never wins, an all-NaN or
    all -inf row gives 0, and float32 [-inf, -FLT_MAX] gives 0. Clamping NaN and
    values beyond lowest() to lowest() makes numpy's first-max index that rule
    (for ints and bools it already is)."""
    def kernel(attrs, x):
        axis = attrs["axis"]
        if x.shape[axis] == 0:
            raise ValueError(f"Reduction axis {axis} is empty in shape {list(x.shape)}")
        if x.dtype in dtypes.FLOAT_NP:
            info = dtypes.as_dtype(x.dtype)
            x = np.where(x > info.min, x, info.min) if fn is np.argmax else np.where(x < info.max, x, info.max)
        return np.asarray(fn(x, axis=axis)).astype(attrs["output_type"].np)
    return kernel


register("ArgMax", denormals="flush",
         infer=_arg_infer, kernel=_arg_kernel(np.argmax), grad=NOT_DIFFERENTIABLE, kind="other")
register("ArgMin", denormals="flush",
         infer=_arg_infer, kernel=_arg_kernel(np.argmin), grad=NOT_DIFFERENTIABLE, kind="other")


def _arg(op_type, input, axis, output_type, name):  # noqa: A002
    output_type = dtypes.as_dtype(output_type)
    if output_type not in (dtypes.int32, dtypes.int64):
        raise TypeError(f"output_type must be int32 or int64, got {output_type.name}")
    (x,) = convert_all([input])
    axis = 0 if axis is None else static_int(axis, "the axis of argmax/argmin")
    return apply_op(op_type, [x], {"axis": axis, "output_type": output_type}, name=name or op_type)


def argmax(input, axis=None, output_type=dtypes.int64, name=None):  # noqa: A002
    """``tf.math.argmax``: axis None means 0; ties give the first index, NaN never wins."""
    return _arg("ArgMax", input, axis, output_type, name)


def argmin(input, axis=None, output_type=dtypes.int64, name=None):  # noqa: A002
    return _arg("ArgMin", input, axis, output_type, name)


register("Any", denormals="keep", run_check=_reduce_run_check, infer=_reduce_infer((dtypes.bool_,)),
         kernel=lambda attrs, x: np.any(x, axis=_np_axes(x, attrs), keepdims=attrs["keepdims"]),
         grad=NOT_DIFFERENTIABLE, kind="other")
register("All", denormals="keep", run_check=_reduce_run_check, infer=_reduce_infer((dtypes.bool_,)),
         kernel=lambda attrs, x: np.all(x, axis=_np_axes(x, attrs), keepdims=attrs["keepdims"]),
         grad=NOT_DIFFERENTIABLE, kind="other")


def _bool_reduce(op_type, x, axis, keepdims, name):
    (x,) = convert_all([x], dtype=dtypes.bool_)
    return _reduce(op_type, x, axis, keepdims, name, op_type)


def reduce_any(input_tensor, axis=None, keepdims=False, name=None):
    return _bool_reduce("Any", input_tensor, axis, keepdims, name)


def reduce_all(input_tensor, axis=None, keepdims=False, name=None):
    return _bool_reduce("All", input_tensor, axis, keepdims, name)


def _scan_infer(op_name, allowed=NUMBERS):
    def infer(shapes, dts, attrs):
        check_dtype(op_name, dts[0], allowed)
        return [(shapes[0], dts[0])]
    return infer


def _scan_axis_check(shapes, attrs):
    """TF's scan kernels check the axis when they run (its shape function does not): an
    InvalidArgumentError from a graph too."""
    s = shapes[0]
    if s is not None and not -len(s) <= attrs["axis"] < len(s):
        raise ValueError(f"Expected axis in the range [{-len(s)}, {len(s)}), but got {attrs['axis']}")


def _scan_kernel(np_scan, identity):
    """Cumsum / Cumprod: numpy's sequential scan in the input dtype (a sum from +0.0, as TF's);
    exclusive shifts it by one, starting with the identity (0 or 1)."""
    def kernel(attrs, x):
        axis = attrs["axis"]
        if not -x.ndim <= axis < x.ndim:
            raise ValueError(f"axis {axis} out of range for a tensor of rank {x.ndim}")
        if attrs["reverse"]:
            x = np.flip(x, axis)
        out = np_scan(x, axis=axis, dtype=x.dtype)
        if identity == 0 and x.dtype.kind in "fcV":
            out = out + x.dtype.type(0)     # TF's sums start at +0.0: a prefix of -0.0s sums to +0.0
        if attrs["exclusive"]:
            out = np.concatenate([np.full_like(np.take(out, [0], axis=axis), identity),
                                  np.take(out, np.arange(x.shape[axis] - 1), axis=axis)], axis=axis) \
                if x.shape[axis] else out
        if attrs["reverse"]:
            out = np.flip(out, axis)
        return np.ascontiguousarray(out)
    return kernel


def _scan_attrs(op, reverse):
    return {"axis": op.get_attr("axis"), "exclusive": op.get_attr("exclusive"), "reverse": reverse}


def _cumsum_grad(op, g):
    return [apply_op("Cumsum", [g], _scan_attrs(op, not op.get_attr("reverse")))]


def _cumprod_grad(op, g):
    """TF's _CumprodGrad: cumsum(cumprod(x) * g, the other way) / x, with
    divide_no_nan (so an element equal to 0 gets gradient 0, as in TF)."""
    return [_cumprod_vjp(op.inputs[0], g, _scan_attrs(op, op.get_attr("reverse")))]


def _cumprod_vjp(x, g, attrs):
    prod = apply_op("Cumprod", [x], attrs)
    out = apply_op("Cumsum", [prod * g], dict(attrs, reverse=not attrs["reverse"]))
    return divide_no_nan(out, x)


register("Cumsum", denormals="flush",
         infer=_scan_infer("Cumsum", NUMBERS + COMPLEX), kernel=_scan_kernel(np.cumsum, 0), grad=_cumsum_grad,
         kind="other", run_check=_scan_axis_check)
register("Cumprod", denormals="flush",
         infer=_scan_infer("Cumprod"), kernel=_scan_kernel(np.cumprod, 1), grad=_cumprod_grad,
         kind="other", run_check=_scan_axis_check)


def _logsumexp_pair(a, b):
    """TF's LogSumExp scan step (scan_ops.h), operations in its order, in the tensor's type
    (float16 / bfloat16 steps each rounded, as Eigen's half): with std::min / std::max's NaN
    rule (a NaN b gives a back), ma + log1p(exp(mi - ma)), or ma itself where ma is -inf (so
    -inf with -inf stays -inf; inf with inf is NaN)."""
    mi = np.where(b < a, b, a)
    ma = np.where(a < b, b, a)
    lse = np.log1p(np.exp(mi - ma)) + ma
    return np.where(ma == -np.inf, ma, lse).astype(a.dtype, copy=False)   # (ma < lowest: -inf)


def _cumulative_logsumexp_kernel(attrs, x):
    axis = attrs["axis"]
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"ScanOp: Expected scan axis in the range [{-x.ndim}, {x.ndim}), but got {axis}")
    xs = np.moveaxis(x, axis, 0)
    order = range(xs.shape[0] - 1, -1, -1) if attrs["reverse"] else range(xs.shape[0])
    out = np.empty_like(xs)
    acc = np.full(xs.shape[1:], -np.inf, x.dtype)     # TF's LogSumExpReducer starts at -inf
    for k in order:
        new = _logsumexp_pair(acc, xs[k])
        out[k] = acc if attrs["exclusive"] else new
        acc = new
    return np.ascontiguousarray(np.moveaxis(out, 0, axis))


def _cumulative_logsumexp_grad(op, g):
    """TF's _CumulativeLogsumexpGrad: the upstream gradient split into its positive and
    negative parts, each carried in log space by a cumulative_logsumexp the other way."""
    x, out = op.inputs[0], op.outputs[0]
    attrs = _scan_attrs(op, not op.get_attr("reverse"))
    lowest = float(g.dtype.min)
    log_pos = where(greater(g, 0), log(g), lowest)
    log_neg = where(less(g, 0), log(negative(g)), lowest)
    pos = exp(add(apply_op("CumulativeLogsumexp", [subtract(log_pos, out)], attrs), x))
    neg = exp(add(apply_op("CumulativeLogsumexp", [subtract(log_neg, out)], attrs), x))
    return [subtract(pos, neg)]


register("CumulativeLogsumexp", denormals="flush",
         infer=_scan_infer("CumulativeLogsumexp", FLOATS), kernel=_cumulative_logsumexp_kernel,
         grad=_cumulative_logsumexp_grad, kind="other", cost=12, run_check=_scan_axis_check)


def _scan(op_type, x, axis, exclusive, reverse, name):
    (x,) = convert_all([x])
    v = axis if isinstance(axis, (int, np.integer)) else get_static_value(axis)
    if v is not None and np.asarray(v).dtype.kind not in "iu":     # TF's axis: int32 / int64 only
        msg = f"Value for attr 'Tidx' of {np.asarray(v).dtype.name} is not in the list of allowed values: int32, int64"
        raise InvalidArgumentError(msg) if context.executing_eagerly() else TypeError(msg)
    if v is not None and np.ndim(v) != 0:      # TF's kernel: at run time
        raise InvalidArgumentError(f"ScanOp: axis must be a scalar, not {np.shape(v)}")
    axis = static_int(axis, f"the axis of {op_type.lower()}")
    return apply_op(op_type, [x], {"axis": axis, "exclusive": bool(exclusive), "reverse": bool(reverse)},
                    name=name or op_type)


def cumsum(x, axis=0, exclusive=False, reverse=False, name=None):
    """``tf.math.cumsum``; the gradient is the cumsum of the gradient the other way."""
    return _scan("Cumsum", x, axis, exclusive, reverse, name)


def cumprod(x, axis=0, exclusive=False, reverse=False, name=None):
    """``tf.math.cumprod``."""
    return _scan("Cumprod", x, axis, exclusive, reverse, name)


def cumulative_logsumexp(x, axis=0, exclusive=False, reverse=False, name=None):
    """``tf.math.cumulative_logsumexp``: log(cumsum(exp(x))) along ``axis``, computed as TF's
    kernel does, one numerically stable log-add-exp step per element (no overflow for large x,
    no underflow to -inf for very negative ones); exclusive starts at -inf."""
    return _scan("CumulativeLogsumexp", x, axis, exclusive, reverse, name)


# ---------------------------------------------------------------- variance / std (composites)
def _moment_input(input_tensor, name):
    (x,) = convert_all([input_tensor])
    if x.dtype.is_integer:
        raise TypeError(f"Input must be either real or complex. Received integer type {x.dtype!r}.")
    if not (x.dtype.is_floating or x.dtype.is_complex):   # complex: a real variance, via |x - mean|
        raise TypeError(f"{name} needs a floating-point or complex input, got {x.dtype.name}")
    return x


def _variance(x, axis, keepdims, name):
    """TF's math_ops.reduce_variance: mean(square(x - mean(x, keepdims=True))), for complex x
    mean(real(conj(d) * d)). No abs for real x: abs's gradient (times sign(d), whose own
    derivative is 0) made the second derivative lose its diagonal where d == 0 and NaN where
    the first derivative is NaN (tf_fuzz seed 150201)."""
    means = reduce_mean(x, axis, keepdims=True)
    diff = subtract(x, means)
    if diff.dtype.is_complex:
        squared = real(multiply(conj(diff), diff))
    else:
        squared = square(diff)
    return reduce_mean(squared, axis, keepdims=keepdims, name=name)


def l2_loss(t, name=None):
    """``tf.nn.l2_loss``: sum(t ** 2) / 2 (here, not in nn_ops.py: clip_ops' global_norm uses it)."""
    (x,) = convert_all([t])
    if not x.dtype.is_floating:   # TF's L2Loss op: real floats only (complex gave sum(z^2) / 2)
        msg = (f"Value passed to parameter 't' has DataType {x.dtype.name} not in list of allowed values: "
               "float16, bfloat16, float32, float64")
        raise InvalidArgumentError(msg) if context.executing_eagerly() else TypeError(msg)
    return multiply(reduce_sum(square(x)), 0.5, name=name or "L2Loss")


def reduce_variance(input_tensor, axis=None, keepdims=False, name=None):
    """``tf.math.reduce_variance`` (population variance), composed as TF does."""
    x = _moment_input(input_tensor, "reduce_variance")
    return _variance(x, axis, keepdims, name or "reduce_variance")


def reduce_std(input_tensor, axis=None, keepdims=False, name=None):
    """``tf.math.reduce_std``: sqrt(reduce_variance(...)) (so its gradient is NaN
    where the variance is 0, as TF's)."""
    x = _moment_input(input_tensor, "reduce_std")
    return sqrt(_variance(x, axis, keepdims, None), name=name or "reduce_std")


# ---------------------------------------------------------------- euclidean norm (composite)
def reduce_euclidean_norm(input_tensor, axis=None, keepdims=False, name=None):
    """``tf.math.reduce_euclidean_norm``: sqrt(reduce_sum(x * x)) with TF's EuclideanNorm
    gradient x / (norm / grad) (NaN where the norm is 0 or NaN, also under a zero upstream
    gradient, where sqrt's own gradient would give 0). Integer inputs give integers, as TF's
    kernel: the float64 root truncated (no gradient)."""
    (x,) = convert_all([input_tensor])
    if x.dtype.is_integer:
        f = cast(x, dtypes.float64)
        return cast(sqrt(reduce_sum(multiply(f, f), axis, keepdims=keepdims)), x.dtype,
                    name=name or "EuclideanNorm")
    if not x.dtype.is_floating:   # TF: the EuclideanNorm op rejects its dtype attr
        msg = f"Value for attr 'T' of {x.dtype.name} is not in the list of allowed values for EuclideanNorm"
        raise InvalidArgumentError(msg) if context.executing_eagerly() else TypeError(msg)
    from ..custom_gradient import custom_gradient   # custom_gradient imports the op modules

    @custom_gradient
    def euclidean_norm(x):
        kept = sqrt(reduce_sum(multiply(x, x), axis, keepdims=True))
        # summing the kept size-1 axes drops them exactly as keepdims=False would
        out = kept if keepdims else reduce_sum(kept, axis, keepdims=False)
        return out, lambda g: divide(x, divide(kept, apply_op("ReshapeLike", [g, kept])))
    return euclidean_norm(x)
