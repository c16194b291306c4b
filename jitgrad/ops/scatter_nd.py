"""tf.scatter_nd, tf.tensor_scatter_nd_update / add / sub: composites of segment ops (max / min:
scatter_nd_extremes.py, which builds on scatter_rows and tensor_dims here).

An index vector [i_0, ..., i_{k-1}] into a shape [d_0, ..., d_{n-1}] names row
i_0 * (d_1 ... d_{k-1}) + ... + i_{k-1} of the tensor seen as [d_0 ... d_{k-1}, d_k, ...],
so a scatter is an unsorted segment sum of the update rows over those rows (duplicates
add up, as TF documents for scatter_nd). An update replaces its row instead: the last
update of each row wins (TF's CPU kernel applies them in order). A vector with a
component out of range names row d_0 ... d_{k-1}, which the segment op rejects
(InvalidArgumentError, as TF's CPU kernels) -- the flat row alone could land in range.
They compile and differentiate as their parts do.
"""
import numpy as np

from .. import dtypes
from ..convert import convert_all
from ..custom_gradient import custom_gradient
from ..eager import EagerTensor
from ..errors import InvalidArgumentError
from .array_ops import concat, gather, get_static_value, range_, reshape, shape as shape_of, zeros
from .gather_nd import flat_rows, gather_nd
from .math_ops import add, cast, greater_equal, subtract, where, zeros_like
from .segment_ops import unsorted_segment_max, unsorted_segment_sum


def scatter_nd(indices, updates, shape, name=None):
    """``tf.scatter_nd``: zeros of ``shape`` with the updates added at the indices."""
    (upd,) = convert_all([updates])
    (idx,) = convert_all([indices], graph=_graph(upd))
    dims = _static_dims(shape, "shape")
    return reshape(_scattered_sum(idx, upd, dims), dims, name=name)


def tensor_scatter_nd_add(tensor, indices, updates, name=None):
    t, upd = convert_all([tensor, updates])
    (idx,) = convert_all([indices], graph=_graph(t))
    dims = tensor_dims(t)
    return add(t, reshape(_scattered_sum(idx, upd, dims), dims), name=name)


def tensor_scatter_nd_sub(tensor, indices, updates, name=None):
    t, upd = convert_all([tensor, updates])
    (idx,) = convert_all([indices], graph=_graph(t))
    dims = tensor_dims(t)
    return subtract(t, reshape(_scattered_sum(idx, upd, dims), dims), name=name)


def tensor_scatter_nd_update(tensor, indices, updates, name=None):
    """``tf.tensor_scatter_nd_update``: ``tensor`` with the rows at the indices replaced,
    the last update of a repeated index winning. The gradient is TF's
    (_TensorScatterUpdateGrad): every update gets its row's gradient, also one that lost to a
    later update of the same index, and the replaced rows of the tensor get none."""
    t, upd = convert_all([tensor, updates])
    (idx,) = convert_all([indices], graph=_graph(t))
    dims = tensor_dims(t)

    @custom_gradient
    def updated(t, u):
        def grad(g):
            return [_with_rows_replaced(g, idx, zeros_like(u), dims), gather_nd(g, idx)]
        return _with_rows_replaced(t, idx, u, dims), grad
    out = updated(t, upd)
    return out if name is None else reshape(out, dims, name=name)


def _with_rows_replaced(t, idx, upd, dims):
    rows, n, k = scatter_rows(idx, upd, dims)
    rest = dims[k:]
    flat_upd = reshape(upd, [-1] + rest)
    count = shape_of(flat_upd)[0]
    last = unsorted_segment_max(range_(count), cast(rows, dtypes.int32), n)   # int32 min where none
    hit = greater_equal(last, 0)
    # (one row of zeros past the updates: a row no update names gathers it, even with none)
    padded = concat([flat_upd, zeros([1] + rest, t.dtype)], 0)
    picked = gather(padded, where(hit, last, count))
    mask = reshape(hit, [n] + [1] * len(rest))
    return reshape(where(mask, picked, reshape(t, [n] + rest)), dims)


def _scattered_sum(idx, upd, dims):
    rows, n, k = scatter_rows(idx, upd, dims)
    return unsorted_segment_sum(reshape(upd, [-1] + dims[k:]), rows, n)


def scatter_rows(idx, upd, dims):
    """(flat row per index vector, row count, index depth k), checking shapes as TF."""
    if idx.dtype not in (dtypes.int32, dtypes.int64):
        raise TypeError(f"Value passed to parameter 'indices' has DataType {idx.dtype.name} not in list of "
                        "allowed values: int32, int64")
    err = InvalidArgumentError if isinstance(upd, EagerTensor) else ValueError
    if idx.shape.rank is None or idx.shape.rank < 1 or idx.shape.dims[-1] is None:
        raise NotImplementedError("scatter_nd needs the last dimension of indices known when the graph is built.")
    k = idx.shape.dims[-1]
    if k > len(dims):
        raise err(f"Dimensions [0,{k}) of indices[shape={idx.shape}] = {k} must be <= the rank of shape "
                  f"{dims}")
    want = list(idx.shape.dims[:-1]) + dims[k:]
    if upd.shape.rank is not None and not upd.shape.is_compatible_with(want):
        raise err(f"updates must have shape indices.shape[:-1] + shape[{k}:] = {want}, got {upd.shape}")
    n = int(np.prod(dims[:k], dtype=np.int64))
    return reshape(flat_rows(idx, dims, n), [-1]), n, k


def _static_dims(shape, what):
    value = shape if isinstance(shape, (list, tuple, np.ndarray)) else get_static_value(shape)
    if value is None:
        raise NotImplementedError(f"scatter_nd needs its {what} known when the graph is built.")
    dims = [int(d) for d in np.asarray(value).reshape(-1)]
    if any(d < 0 for d in dims):
        raise ValueError(f"{what} must be non-negative, got {dims}")
    return dims


def tensor_dims(t):
    if not t.shape.is_fully_defined():
        raise NotImplementedError("tensor_scatter_nd_* needs the tensor's shape known when the graph is built.")
    return t.shape.as_list()


def _graph(t):
    return None if isinstance(t, EagerTensor) else t.graph
