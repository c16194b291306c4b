"""TF math functions that are compositions of existing ops (as TF's own Python composes
most of them): saturate_cast, reciprocal_no_nan, in_top_k, roll, scalar_mul, polyval,
accumulate_n. They compile and differentiate as their parts do."""
import numpy as np

from .. import dtypes
from ..convert import convert_all
from ..errors import InvalidArgumentError
from ..eager import EagerTensor
from ..shapes import TensorShape
from .array_ops import expand_dims, gather, range_, reshape, shape as shape_of
from .complex_ops import real
from .math_ops import (add, add_n, cast, clip_by_value, divide_no_nan, floormod, greater, greater_equal, identity, is_finite, less,
                       logical_and, multiply, ones_like, subtract, where, zeros_like)
from .reduction_ops import reduce_all, reduce_sum


def saturate_cast(value, dtype, name=None):
    """``tf.dtypes.saturate_cast``: clamped to the target's range before the cast, with TF's
    limits (each nudged toward 0 when the input type cannot hold it exactly: float32 to
    int32 saturates at 2147483520); complex to real keeps the real part."""
    (x,) = convert_all([value])
    dtype = dtypes.as_dtype(dtype)
    if x.dtype.is_complex:
        if dtype.is_complex:
            return cast(x, dtype, name=name)     # (both complex types hold each other's range)
        x = real(x)
    out = dtype.real_dtype if dtype.is_complex else dtype
    if x.dtype.is_bool or out.is_bool:
        raise TypeError(f"saturate_cast needs numeric types, got {x.dtype.name} to {dtype.name}")
    np_in = x.dtype.np
    try:
        promoted = np.promote_types(np_in, out.np)
    except TypeError:          # bfloat16 (TF falls back to Python floats too)
        promoted = float
    lo = np_in.type(np.maximum(x.dtype.min, out.min))
    if np.array([lo, out.min], promoted)[0] < np.array(out.min, promoted):
        lo = np.nextafter(lo, np_in.type(0), dtype=np_in)
    hi = np_in.type(np.minimum(float(x.dtype.max), float(out.max)))
    if np.array([hi, out.max], promoted)[0] > np.array(out.max, promoted):
        hi = np.nextafter(hi, np_in.type(0), dtype=np_in)
    return cast(clip_by_value(x, lo, hi), dtype, name=name)


def reciprocal_no_nan(x, name=None):
    """``tf.math.reciprocal_no_nan``: 1 / x, 0 where x is 0 (TF: div_no_nan(1, x))."""
    (x,) = convert_all([x])
    return divide_no_nan(ones_like(x), x, name=name)


def in_top_k(targets, predictions, k, name=None):
    """``tf.math.in_top_k`` (TF 2's argument order): whether each row's target class has
    fewer than k predictions strictly above it. False for a target out of range or a
    non-finite target prediction (TF's CPU kernel)."""
    (pred,) = convert_all([predictions])
    (t,) = convert_all([targets], graph=None if isinstance(pred, EagerTensor) else pred.graph)
    if pred.shape.rank not in (None, 2):
        raise ValueError(f"predictions must be 2-dimensional, got shape {pred.shape}")
    dims = pred.shape.dims or (None, None)
    rows, width = (d if d is not None else cast(shape_of(pred)[i], t.dtype) for i, d in enumerate(dims))
    valid = logical_and(greater_equal(t, 0), less(t, width))
    column = where(valid, t, zeros_like(t))
    picked = gather(reshape(pred, [-1]), add(multiply(range_(rows, dtype=t.dtype), width), column))
    above = reduce_sum(cast(greater(pred, expand_dims(picked, 1)), dtypes.int32), 1)
    finite_row = reduce_all(is_finite(pred), 1)     # TF's kernel: any inf / NaN in the row says no
    return logical_and(logical_and(valid, finite_row), less(above, cast(k, dtypes.int32)), name=name)


def roll(input, shift, axis, name=None):  # noqa: A002
    """``tf.roll``: elements shifted along each axis (static), wrapping around; several
    shifts of one axis add up. A gather of (i - shift) mod n per axis, so a shift may be a
    tensor (a scalar, or a vector with one shift per axis)."""
    (x,) = convert_all([input])
    axes = [axis] if np.ndim(axis) == 0 else list(axis)
    if any(not isinstance(a, (int, np.integer)) or isinstance(a, (bool, np.bool_)) for a in axes):
        raise TypeError(f"tf.roll's axis must be integers known when the graph is built, got {axis!r}")
    axes = [int(a) for a in axes]
    if hasattr(shift, "dtype") and not isinstance(shift, (np.ndarray, np.generic)):
        shifts = [shift] if len(axes) == 1 and shift.shape.rank == 0 else [shift[i] for i in range(len(axes))]
    else:
        shifts = [int(v) for v in np.atleast_1d(shift)]
        if len(shifts) != len(axes):
            raise _shape_error(x, f"shift and axis must have the same size, got {len(shifts)} and {len(axes)}")
    rank = x.shape.rank
    if rank is None:
        raise NotImplementedError("tf.roll needs the input's rank known when the graph is built.")
    total = {}
    for s, a in zip(shifts, axes):
        if not -rank <= a < rank:
            raise _shape_error(x, f"axis {a} is out of range for a tensor of rank {rank}")
        a %= rank
        total[a] = add(total[a], s) if a in total else s
    out = x
    for a, s in sorted(total.items()):
        n = x.shape.dims[a] if x.shape.dims[a] is not None else shape_of(x)[a]
        if isinstance(n, int) and n == 0:
            continue
        s = s if isinstance(s, int) else cast(s, dtypes.int32)
        out = gather(out, floormod(subtract(range_(n), s), n), axis=a)
    return identity(out, name=name) if name else out


def _shape_error(x, message):
    """As TF: the op's InvalidArgumentError when it runs eagerly, shape inference's ValueError
    in a graph."""
    return (InvalidArgumentError if isinstance(x, EagerTensor) else ValueError)(message)


def scalar_mul(scalar, x, name=None):
    """``tf.math.scalar_mul``: the scalar (converted to x's dtype) times x."""
    (t,) = convert_all([x])
    (c,) = convert_all([scalar], dtype=t.dtype, graph=None if isinstance(t, EagerTensor) else t.graph)
    if c.shape.rank != 0:
        raise ValueError(f"The input scalar must be a 0-D value. Received shape {c.shape}.")
    return multiply(c, t, name=name)


def polyval(coeffs, x, name=None):
    """``tf.math.polyval``: coeffs[0] * x**(n-1) + ... + coeffs[n-1], by Horner's rule as TF."""
    if not isinstance(coeffs, list):
        raise ValueError(f"Argument coeffs must be list type. Received type {type(coeffs)}.")
    (t,) = convert_all([x])
    if not coeffs:
        return zeros_like(t, name=name)
    g = None if isinstance(t, EagerTensor) else t.graph
    cs = [convert_all([c], graph=g)[0] for c in coeffs]
    p = cs[0]
    for c in cs[1:]:
        p = add(c, multiply(p, t))
    return identity(p, name=name) if name else p


def accumulate_n(inputs, shape=None, tensor_dtype=None, name=None):
    """``tf.math.accumulate_n``: add_n after TF's checks (one dtype, compatible shapes)."""
    def input_error():
        return ValueError("inputs must be a list of at least one Tensor with the same dtype and shape")
    if not inputs or not isinstance(inputs, (list, tuple)):
        raise input_error()
    ts = [convert_all([v])[0] for v in inputs]
    if any(t.dtype != ts[0].dtype for t in ts):
        raise input_error()
    merged = TensorShape(shape) if shape is not None else TensorShape(None)
    for t in ts:
        merged = merged.merge_with(t.shape)
    if tensor_dtype is not None and dtypes.as_dtype(tensor_dtype) != ts[0].dtype:
        raise TypeError(f"The `tensor_dtype` argument is {tensor_dtype}, but `input` is of type {ts[0].dtype}. "
                        "These must be equal. Try casting the input to the desired type.")
    if len(ts) == 1:
        return ts[0] if name is None else identity(ts[0], name=name)
    return add_n(ts, name=name)
