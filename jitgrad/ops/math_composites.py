"""TF math functions that are compositions of existing ops (as TF's own Python composes
most of them): saturate_cast, reciprocal_no_nan, in_top_k, roll. They compile and
differentiate as their parts do."""
import numpy as np

from .. import dtypes
from ..convert import convert_all
from ..errors import InvalidArgumentError
from ..eager import EagerTensor
from .array_ops import expand_dims, gather, range_, reshape, shape as shape_of
from .complex_ops import real
from .math_ops import (add, cast, clip_by_value, divide_no_nan, floormod, greater, greater_equal, identity, is_finite, less,
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
