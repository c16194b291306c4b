"""Ops whose output length depends on the data: ``tf.boolean_mask`` and the
one-argument ``tf.where(condition)`` (the indices of true elements).

jitgrad's compiled kernels are specialised to static shapes, so these have
numpy reference kernels only: a compiled Session.run that contains one runs in
the interpreter and is counted in ``cache_info()['fallbacks']``. Eager mode
and gradients work as for any op.
"""
import numpy as np

from .. import dtypes
from ..convert import convert_all, graph_of
from .registry import NOT_DIFFERENTIABLE, apply_op, register


def _mask_index(axis, mask):
    return (slice(None),) * axis + (mask,)


def _check_mask(attrs, x, mask):
    axis, k = attrs["axis"], mask.ndim
    if x.shape[axis:axis + k] != mask.shape:
        raise ValueError(f"Shapes {list(x.shape[axis:axis + k])} and {list(mask.shape)} are incompatible "
                         f"(boolean_mask's mask must match the tensor's dimensions {axis}..{axis + k - 1}).")


def _boolean_mask_kernel(attrs, x, mask):
    _check_mask(attrs, x, mask)
    return np.ascontiguousarray(x[_mask_index(attrs["axis"], mask)])


def _boolean_mask_infer(shapes, dts, attrs):
    if dts[1] != dtypes.bool_:
        raise TypeError(f"boolean_mask's mask must be bool, got {dts[1].name}")
    s, m, axis = shapes[0], shapes[1], attrs["axis"]
    if s is None or m is None:
        return [(None, dts[0])]
    k = len(m)
    if k == 0:
        raise ValueError("mask cannot be scalar.")
    if axis + k > len(s):
        raise ValueError(f"mask of rank {k} does not fit a tensor of rank {len(s)} at axis {axis}")
    for a, b in zip(s[axis:axis + k], m):
        if a is not None and b is not None and a != b:
            raise ValueError(f"Shapes {list(s[axis:axis + k])} and {list(m)} are incompatible")
    return [(tuple(s[:axis]) + (None,) + tuple(s[axis + k:]), dts[0])]


def _boolean_mask_grad(op, g):
    x, mask = op.inputs
    return [apply_op("BooleanMaskGrad", [g, mask, x], dict(op.attrs)), None]


def _boolean_mask_grad_kernel(attrs, g, mask, ref):
    out = np.zeros(ref.shape, g.dtype)
    out[_mask_index(attrs["axis"], mask)] = g
    return out


register("BooleanMask", denormals="keep",
         infer=_boolean_mask_infer, kernel=_boolean_mask_kernel, grad=_boolean_mask_grad,
         data_dependent_shape=True, lowering="interpreter")
# The gradient scatters g back into zeros shaped like the input (TF's is an
# IndexedSlices of the same values; jitgrad gives slices only for gathers of variables).
# (denormals: TF's gradient is a scatter-add of the rows into zeros, which flushes)
register("BooleanMaskGrad", denormals="flush", infer=lambda shapes, dts, attrs: [(shapes[2], dts[0])],
         kernel=_boolean_mask_grad_kernel,
         grad=lambda op, g: [apply_op("BooleanMask", [g, op.inputs[1]], dict(op.attrs)), None, None],
         lowering="interpreter")


def boolean_mask(tensor, mask, axis=None, name="boolean_mask"):
    """``tf.boolean_mask``: the elements (or slices) of ``tensor`` where ``mask``
    is true; ``mask``'s rank must be known, its shape must match ``tensor``'s
    dimensions ``axis .. axis + rank(mask) - 1``."""
    g = graph_of([tensor, mask])
    (x,) = convert_all([tensor], graph=g)
    (m,) = convert_all([mask], dtype=dtypes.bool_, graph=g)
    if m.shape.rank is None:
        raise ValueError("Number of mask dimensions must be specified, even if some dimensions are None.")
    if m.shape.rank == 0:
        raise ValueError("mask cannot be scalar.")
    axis = 0 if axis is None else int(axis)
    if x.shape.rank is not None and axis < 0:
        axis += x.shape.rank
    if x.shape.rank is not None:   # TF checks the shapes in Python: a ValueError in eager mode too
        part = x.shape.dims[axis:axis + m.shape.rank]
        if len(part) != m.shape.rank or not m.shape.is_compatible_with(part):
            raise ValueError(f"Shapes {list(part)} and {m.shape.as_list()} are incompatible")
    return apply_op("BooleanMask", [x, m], {"axis": axis}, name=name)


def _where_kernel(attrs, c):
    return np.ascontiguousarray(np.argwhere(c).astype(np.int64))


register("Where", denormals="keep",
         infer=lambda shapes, dts, attrs: [((None, None if shapes[0] is None else len(shapes[0])),
                                                      dtypes.int64)],
         kernel=_where_kernel, data_dependent_shape=True, lowering="interpreter", grad=NOT_DIFFERENTIABLE)
