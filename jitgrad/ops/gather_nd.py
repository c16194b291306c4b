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
from .math_ops import add, cast, greater_equal, less, logical_and, multiply, negative, ones_like, where
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
    row = None
    valid = None
    for j in range(k):
        i_j = idx[..., j]
        size = dims[j] if not isinstance(dims[j], int) else cast(dims[j], idx.dtype)
        ok = logical_and(greater_equal(i_j, 0), less(i_j, size))
        valid = ok if valid is None else logical_and(valid, ok)
        row = i_j if row is None else add(multiply(row, size), i_j)
    if row is None:           # k == 0: every index vector names all of params (row 0 of [1, ...])
        row = reduce_sum(idx, -1)
    else:
        row = where(valid, row, negative(ones_like(row)))
    rows = dims[:k]
    n_rows = rows[0] if len(rows) == 1 else _product(rows, idx.dtype) if rows else 1
    flat = reshape(p, [n_rows] + dims[k:])
    return gather(flat, row, axis=0, name=name or "GatherNd")


def _product(sizes, dtype):
    if all(isinstance(s, int) for s in sizes):
        n = 1
        for s in sizes:
            n *= s
        return n
    n = None
    for s in sizes:
        s = cast(s, dtype) if isinstance(s, int) else s
        n = s if n is None else multiply(n, s)
    return n

