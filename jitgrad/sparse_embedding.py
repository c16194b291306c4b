"""``tf.nn.embedding_lookup_sparse`` and ``tf.nn.safe_embedding_lookup_sparse``, composed as
TF 2.21's (ops/embedding_ops.py): the rows of ``params`` at the ids of each row of a
SparseTensor, combined by "sum", "mean" (weighted mean) or "sqrtn" (sum over the root of
the summed squared weights). As TF, embedding_lookup_sparse's result has max(row) + 1 rows
(segment_sum over the sorted row ids; an unsorted one is InvalidArgumentError), and the
safe variant drops ids < 0 (and, unless combining by sum, weights <= 0), gives empty rows
zeros (or default_id's row) and keeps all rows of the batch (and its leading dims).
A gather of a variable's rows gives it an IndexedSlices gradient, as TF."""
import math

import numpy as np

from . import dtypes
from .convert import convert_to_tensor
from .ops import array_ops, math_ops
from .ops.array_ops import gather
from .ops.nn_ops import embedding_lookup
from .ops.unique import unique
from .ops.segment_ops import segment_sum, unsorted_segment_sum
from .sparse_ops import fill_empty_rows, reshape_sparse, retain
from .sparse_tensor import SparseTensor, is_sparse, known_dims

_COMBINERS = ("mean", "sqrtn", "sum")


def _check_combiner(combiner):
    combiner = "mean" if combiner is None else combiner
    if combiner not in _COMBINERS:
        raise ValueError(f"combiner must be one of 'mean', 'sqrtn' or 'sum', got {combiner}")
    return combiner


def _sparse_segment(combiner, data, indices, segment_ids, num_segments, name):
    """TF's SparseSegment{Sum,Mean,SqrtN}: the rows of ``data`` at ``indices`` summed per
    segment (max id + 1 segments: the ids must be sorted; or ``num_segments``), the mean and
    sqrtn ones times 1 / n or 1 / sqrt(n) (0 for an empty segment), as TF's kernels scale."""
    data = convert_to_tensor(data)
    rows = gather(data, indices)
    if num_segments is None:
        reduce = segment_sum
    else:
        def reduce(x, ids):
            return unsorted_segment_sum(x, ids, num_segments)
    total = reduce(rows, segment_ids)
    if combiner == "sum":
        return total if name is None else math_ops.identity(total, name=name)
    count = reduce(math_ops.ones_like(convert_to_tensor(segment_ids), dtype=data.dtype), segment_ids)
    if combiner == "sqrtn":
        count = math_ops.sqrt(count)
    scale = math_ops.divide_no_nan(math_ops.ones_like(count), count)
    if data.shape.rank is None:
        raise NotImplementedError("jitgrad's sparse segment reductions need data of known rank.")
    return math_ops.multiply(total, array_ops.reshape(scale, [-1] + [1] * (data.shape.rank - 1)), name=name)


def sparse_segment_sum(data, indices, segment_ids, num_segments=None, name=None, sparse_gradient=False):
    """``tf.sparse.segment_sum``: segment_sum of gather(data, indices)."""
    return _sparse_segment("sum", data, indices, segment_ids, num_segments, name)


def sparse_segment_mean(data, indices, segment_ids, num_segments=None, name=None, sparse_gradient=False):
    """``tf.sparse.segment_mean``."""
    return _sparse_segment("mean", data, indices, segment_ids, num_segments, name)


def sparse_segment_sqrt_n(data, indices, segment_ids, num_segments=None, name=None, sparse_gradient=False):
    """``tf.sparse.segment_sqrt_n``."""
    return _sparse_segment("sqrtn", data, indices, segment_ids, num_segments, name)


def embedding_lookup_sparse(params, sp_ids, sp_weights, combiner=None, max_norm=None, name=None,
                            allow_fast_lookup=False):
    combiner = _check_combiner(combiner)
    if not is_sparse(sp_ids):
        raise TypeError(f"sp_ids must be SparseTensor, got {type(sp_ids)}")
    if sp_weights is not None and not is_sparse(sp_weights):
        raise TypeError(f"sp_weights must be either None or SparseTensor, got {type(sp_weights)}")
    segment_ids = math_ops.cast(sp_ids.indices[:, 0], dtypes.int32)
    # As TF: each distinct id looked up once, then spread to its occurrences, so a variable's
    # gradient is IndexedSlices of distinct ids (an optimizer squaring its rows sees each id's
    # summed gradient, as TF's does) and max_norm clips each row once.
    ids, occurrence = unique(sp_ids.values)
    if sp_weights is None:
        return _sparse_segment(combiner, embedding_lookup(params, ids, max_norm=max_norm), occurrence, segment_ids,
                               None, name)
    embeddings = gather(embedding_lookup(params, ids, max_norm=max_norm), occurrence)
    rank = embeddings.shape.rank
    if rank is None:
        raise NotImplementedError("jitgrad's embedding_lookup_sparse needs params of known rank.")
    column = [-1] + [1] * (rank - 1)        # (a weight per row, broadcast over the embedding's dims)
    weights = convert_to_tensor(sp_weights.values)
    if weights.dtype != embeddings.dtype:
        raise TypeError(f"The dtypes of params ({embeddings.dtype.name}) and sp_weights "
                        f"({weights.dtype.name}) must match")
    total = segment_sum(math_ops.multiply(embeddings, array_ops.reshape(weights, column)), segment_ids)
    if combiner == "sum":
        return total if name is None else math_ops.identity(total, name=name)
    if combiner == "mean":
        norm = segment_sum(weights, segment_ids)
    else:
        norm = math_ops.sqrt(segment_sum(math_ops.square(weights), segment_ids))
    return math_ops.divide_no_nan(total, array_ops.reshape(norm, column), name=name)


def safe_embedding_lookup_sparse(embedding_weights, sparse_ids, sparse_weights=None, combiner="mean",
                                 default_id=None, max_norm=None, name=None, allow_fast_lookup=False):
    combiner = _check_combiner(combiner)
    if not is_sparse(sparse_ids):
        raise TypeError(f"sparse_ids must be SparseTensor, got {type(sparse_ids)}")
    rank = sparse_ids.dense_shape.shape.dims[0] if sparse_ids.dense_shape.shape.rank == 1 else None
    if rank is None or rank < 2:
        raise ValueError("jitgrad's safe_embedding_lookup_sparse needs sparse_ids of known rank >= 2.")
    dims = known_dims(sparse_ids)
    if rank > 2:        # (ids of rank r: looked up as [d_0 ... d_{r-2}, d_{r-1}], then shaped back)
        if any(d is None for d in dims):
            raise NotImplementedError("jitgrad's safe_embedding_lookup_sparse needs the dense shape of sparse_ids of "
                                      "rank > 2 known when the graph is built.")
        ids = reshape_sparse(sparse_ids, [math.prod(dims[:-1]), dims[-1]])
    else:
        ids = sparse_ids
    weights = None
    if sparse_weights is not None:
        weights = SparseTensor(ids.indices, sparse_weights.values, ids.dense_shape)
    # prune ids < 0, then (unless summing) weights <= 0
    valid = math_ops.greater_equal(ids.values, 0)
    ids, weights = retain(ids, valid), None if weights is None else retain(weights, valid)
    if combiner != "sum" and weights is not None:
        positive = math_ops.greater(weights.values, 0)
        ids, weights = retain(ids, positive), retain(weights, positive)
    ids, empty = fill_empty_rows(ids, 0 if default_id is None else default_id)
    if weights is not None:
        weights, _ = fill_empty_rows(weights, 1.0)
    result = embedding_lookup_sparse(embedding_weights, ids, weights, combiner=combiner, max_norm=max_norm)
    if default_id is None:
        mask = array_ops.reshape(empty, [-1] + [1] * (result.shape.rank - 1))
        result = math_ops.where(mask, math_ops.zeros_like(result), result)
    if rank > 2:
        result = array_ops.reshape(result, array_ops.concat(
            [np.array(dims[:-1], np.int32), array_ops.shape(result)[1:]], 0))
    return result if name is None else math_ops.identity(result, name=name)
