"""tf.clip_by_norm, tf.clip_by_global_norm and tf.linalg.global_norm, composed
as TF's clip_ops.py composes them, so gradients, the interpreter and the
compiler need nothing new."""
import collections.abc

from .. import dispatch
from ..convert import convert_all, convert_to_tensor, graph_of
from .array_ops import stack
from .math_ops import (cast, greater, identity, maximum, minimum, multiply, ones_like, sqrt, subtract, truediv,
                       where, add)
from .reduction_ops import l2_loss, reduce_sum


def _is_slices(t):
    return isinstance(t, dispatch.indexed_slices)


def _same_rows(slices, values):
    """IndexedSlices ``slices`` with new ``values``: TF's clip ops act on a gradient's
    values (each occurrence of a repeated index on its own) and keep it sparse."""
    return dispatch.indexed_slices(values, slices.indices, slices.dense_shape)


def clip_by_norm(t, clip_norm, axes=None, name=None):
    """``tf.clip_by_norm``: t * clip_norm / max(l2norm(t, axes), clip_norm).
    As TF, the norm goes through a double where so that an all-zero t has a
    zero (not NaN) gradient, and clip_norm must not broadcast t larger.
    IndexedSlices: their values clipped by the values' norm, as TF."""
    if _is_slices(t):
        return _same_rows(t, clip_by_norm(t.values, clip_norm, axes, name))
    (values,) = convert_all([t])
    l2sum = reduce_sum(multiply(values, values), axes, keepdims=True)
    pred = greater(l2sum, 0.0)
    # Two-tap where: sqrt only ever sees positive sums, so its gradient stays finite.
    l2sum_safe = where(pred, l2sum, ones_like(l2sum))
    l2norm = where(pred, sqrt(l2sum_safe), l2sum)
    intermediate = multiply(values, clip_norm)
    if not values.shape.is_compatible_with(intermediate.shape):
        raise ValueError(f"Shapes {values.shape} and {intermediate.shape} are incompatible")
    return identity(truediv(intermediate, maximum(l2norm, clip_norm)), name=name or "clip_by_norm")


def _tensor_list(t_list):
    if not isinstance(t_list, collections.abc.Sequence) or isinstance(t_list, str):
        raise TypeError(f"`t_list` should be a sequence of tensors. Received {type(t_list)}.")
    return [None if t is None else t if _is_slices(t) else convert_all([t])[0] for t in t_list]


def global_norm(t_list, name=None):
    """``tf.linalg.global_norm``: sqrt(sum of 2 * l2_loss(t)) over the non-None
    tensors, as TF (so its gradient at an all-zero list is NaN, as TF's); IndexedSlices count
    by their values (a repeated index's rows each squared), as TF."""
    values = _tensor_list(t_list)
    half_squared_norms = [l2_loss(v.values if _is_slices(v) else v) for v in values if v is not None]
    half_squared_norm = reduce_sum(stack(half_squared_norms))      # all None: stack([]) sums to 0, as TF
    return sqrt(multiply(half_squared_norm, 2.0), name=name or "global_norm")


def clip_by_global_norm(t_list, clip_norm, use_norm=None, name=None):
    """``tf.clip_by_global_norm``: each t * clip_norm / max(global_norm, clip_norm);
    returns (clipped list, global_norm). None entries pass through. As TF, the
    scale is clip_norm * min(1 / norm, 1 / clip_norm) (so a zero norm scales by 1)
    plus (norm - norm), which makes every value NaN when the norm is inf or NaN."""
    values = _tensor_list(t_list)
    if use_norm is None:
        use_norm = global_norm(values)
    (use_norm,) = convert_all([use_norm])
    clip = convert_to_tensor(clip_norm, dtype=use_norm.dtype, graph=graph_of([use_norm, clip_norm]))
    scale_for_finite = multiply(clip, minimum(truediv(1.0, use_norm), truediv(1.0, clip)))
    scale = add(scale_for_finite, subtract(use_norm, use_norm))
    def scaled(v, i):
        return identity(multiply(v, cast(scale, v.dtype)), name=f"{name or 'clip_by_global_norm'}_{i}")
    clipped = [None if v is None else _same_rows(v, scaled(v.values, i)) if _is_slices(v) else scaled(v, i)
               for i, v in enumerate(values)]
    return clipped, use_norm
