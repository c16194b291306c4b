"""tf.tensor_scatter_nd_max / tensor_scatter_nd_min: the tensor with each indexed row
replaced by its max (min) with the updates naming it, built from scatter_nd.py's rows and
segment reductions.

TF's CPU kernel folds the updates in order with acc = (acc < u) ? u : acc (for max), so a
NaN update never wins and a NaN already in the tensor stays; here NaN updates become -inf
(+inf) before the segment max (min), and an element is replaced only where an update that
can win (above -inf for max) names it and beats the tensor's value (the segment max of -inf
updates is -FLT_MAX, TF's segment identity, which must not replace a -inf). The gradient is
TF's (_TensorScatterMinOrMaxGrad): shared equally between the tensor and the updates that
equal the result, hence a custom gradient.
"""
import numpy as np

from ..convert import convert_all
from ..custom_gradient import custom_gradient
from ..eager import EagerTensor
from .array_ops import reshape
from .gather_nd import gather_nd
from .math_ops import (add, cast, divide, equal, greater, is_nan, less, logical_and, multiply, ones_like,
                       where)
from .scatter_nd import scatter_nd, scatter_rows, tensor_dims
from .segment_ops import unsorted_segment_max, unsorted_segment_min, unsorted_segment_sum


def tensor_scatter_nd_max(tensor, indices, updates, name=None):
    """``tf.tensor_scatter_nd_max``: max(tensor row, updates naming it)."""
    return _scatter_extreme(tensor, indices, updates, greater, unsorted_segment_max, -np.inf, name)


def tensor_scatter_nd_min(tensor, indices, updates, name=None):
    """``tf.tensor_scatter_nd_min``: min(tensor row, updates naming it)."""
    return _scatter_extreme(tensor, indices, updates, less, unsorted_segment_min, np.inf, name)


def _scatter_extreme(tensor, indices, updates, beats, segment_extreme, nan_as, name):
    t, upd = convert_all([tensor, updates])
    (idx,) = convert_all([indices], graph=None if isinstance(t, EagerTensor) else t.graph)
    dims = tensor_dims(t)
    rows, n, k = scatter_rows(idx, upd, dims)
    rest = dims[k:]

    @custom_gradient
    def scattered(t, u):
        flat = reshape(u, [-1] + rest)
        if flat.dtype.is_floating:
            flat = where(is_nan(flat), multiply(ones_like(flat), cast(nan_as, flat.dtype)), flat)
            # the updates that can win (max: above -inf): a segment max starts at -FLT_MAX, TF's
            # segment identity, so a row named only by -inf updates would get -FLT_MAX, which
            # beats a -inf in the tensor; TF's fold keeps the -inf
            winners = cast(beats(flat, cast(nan_as, flat.dtype)), rows.dtype)
            named = unsorted_segment_sum(winners, rows, n)
        else:
            named = reshape(unsorted_segment_sum(ones_like(rows), rows, n), [n] + [1] * len(rest))
        best = segment_extreme(flat, rows, n)
        base = reshape(t, [n] + rest)
        out = reshape(where(logical_and(greater(named, 0), beats(best, base)), best, base), dims)

        def grad(g):
            x_hits = cast(equal(t, out), g.dtype)
            y_hits = cast(equal(u, gather_nd(out, idx)), g.dtype)
            hits = add(x_hits, scatter_nd(idx, y_hits, dims))     # (each result >= 1 where it is not NaN)
            return [divide(multiply(g, x_hits), hits), multiply(gather_nd(divide(g, hits), idx), y_hits)]
        return out, grad
    out = scattered(t, upd)
    return out if name is None else reshape(out, dims, name=name)


