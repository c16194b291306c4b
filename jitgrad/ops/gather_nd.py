"""``tf.gather_nd`` as a composite: a gather of flattened rows.

An index vector [i_0, ..., i_{k-1}] into params [p_0, ..., p_{n-1}] names row
i_0 * (p_1 ... p_{k-1}) + ... + i_{k-1} of params reshaped to
[p_0 ... p_{k-1}, p_k, ..., p_{n-1}], so gather_nd is one GatherV2 of that reshape
(compiled, bounds-checked, with its gradient). A vector with any component outside
[0, p_j) becomes row -1, which the gather rejects with InvalidArgumentError, as TF's
CPU kernel rejects it -- the flat row alone could land inside params ([0, 5] in a
[2, 3] params is row 5).
"""
from .. import dtypes
from ..convert import convert_all
from ..errors import InvalidArgumentError
from ..eager import EagerTensor
from .array_ops import gather, reshape, shape as shape_of
from .math_ops import add, cast, greater_equal, less, logical_and, multiply, where
from .reduction_ops import reduce_sum


def gather_nd(params, indices, batch_dims=0, name=None):
    """``tf.gather_nd`` (batch_dims 0)."""
    if batch_dims != 0:
        raise NotImplementedError("gather_nd with batch_dims != 0 is not supported by jitgrad yet.")
    (p,) = convert_all([params])
    (idx,) = convert_all([indices], graph=None if isinstance(p, EagerTensor) else p.graph)
    if idx.dtype not in (dtypes.int32, dtypes.int64):
        raise TypeError(f"Value passed to parameter 'indices' has DataType {idx.dtype.name} not in list of "
                        "allowed values: int32, int64")
    rank_i, rank_p = idx.shape.rank, p.shape.rank
    if rank_i is None or idx.shape.dims[-1] is None:
        raise NotImplementedError("gather_nd needs the last dimension of indices known when the graph is built.")
    if rank_i < 1:
        raise ValueError(f"indices must be at least a vector, got shape {idx.shape}")
    k = idx.shape.dims[-1]
    if rank_p is None:
        raise NotImplementedError("gather_nd needs the rank of params known when the graph is built.")
    if k > rank_p:      # as TF: the op's error when it runs eagerly, shape inference's in a graph
        raise (InvalidArgumentError if isinstance(p, EagerTensor) else ValueError)(
            f"indices.shape[-1] must be <= params.rank, got {k} > {rank_p}")
    dims = [d if d is not None else shape_of(p, out_type=idx.dtype)[j] for j, d in enumerate(p.shape.dims)]
    flat = reshape(p, [size_product(dims[:k], idx.dtype)] + dims[k:])
    return gather(flat, flat_rows(idx, dims, -1), axis=0, name=name or "GatherNd")


def flat_rows(idx, dims, invalid):
    """The row each index vector of ``idx`` (its last dim, k, known) names in a tensor of
    dims ``dims`` (ints, or scalar tensors of idx's dtype) seen as [d_0 ... d_{k-1}, d_k, ...]:
    i_0 * (d_1 ... d_{k-1}) + ... + i_{k-1}. A vector with a component outside [0, d_j) names
    row ``invalid``, one the op reading the rows rejects. (k == 0: every vector names row 0.)"""
    row, valid = reduce_sum(idx, -1), None
    for j in range(idx.shape.dims[-1]):
        i_j = idx[..., j]
        ok = logical_and(greater_equal(i_j, 0), less(i_j, dims[j]))
        valid = ok if valid is None else logical_and(valid, ok)
        row = i_j if j == 0 else add(multiply(row, dims[j]), i_j)
    return row if valid is None else where(valid, row, cast(invalid, row.dtype))


def size_product(sizes, dtype):
    """The product of sizes that are ints (an int) or scalar tensors (a tensor of ``dtype``)."""
    out = 1
    for s in sizes:
        if isinstance(out, int) and isinstance(s, int):
            out *= s
        else:
            out = multiply(cast(out, dtype) if isinstance(out, int) else out, cast(s, dtype) if isinstance(s, int) else s)
    return out

