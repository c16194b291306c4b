"""Gradients of a row gather as ``tf.IndexedSlices``, as TF returns them.

TF's gradient of ``tf.gather(params, ids)`` (axis 0, so ``tf.nn.embedding_lookup`` and Keras'
Embedding too; params a variable or any tensor) is ``IndexedSlices(values=upstream rows, indices=ids flattened,
dense_shape=shape(var))``: one row per occurrence of an id, repeated ids *not* summed.
Keras optimizers act on those values (squaring each occurrence, say) before scattering
them into their dense slots, so summing first gives different numbers.

The tape (eager and in a trace) and tf.gradients build one for every row gather;
contributions to one tensor are concatenated when all are slices (two gathers of it) and
summed densely otherwise (a gather plus any dense use), as TF's
AggregateIndexedSlicesGradients does. Slices reaching an op other than an Identity are made
dense for its gradient function (TF's ops convert them), so a gather of ``x * 2`` gives x a
dense gradient, as TF's. jitgrad's own gradient passes (loop and branch gradients,
jacobians) stay dense."""
from .convert import convert_to_tensor
from .indexed_slices import IndexedSlices
from .ops import array_ops, math_ops
from .ops.segment_ops import unsorted_segment_sum
from .ops.unique import unique


def is_row_gather(op_type, attrs):
    """A user's gather along axis 0 (the only kind whose gradient TF gives as slices; not one of
    jitgrad's own: ops/array_ops.gather's ``user``)."""
    return op_type == "GatherV2" and int(attrs.get("axis", 0) or 0) == 0 and not attrs.get("batch_dims", 0) \
        and bool(attrs.get("_row_slices"))


def gather_gradient_slices(grad, indices, params, dense=None):
    """The gradient of ``gather(params, indices)`` given ``grad`` (shaped as the gather's
    output): its rows with the flattened indices, shaped as params. ``dense``: a function
    giving the gather op's dense gradient, which the slices are made dense by (in the graph
    they were made in)."""
    # as TF's: the values are grad as [size(indices), *params.shape[1:]] (a grad of another
    # element count fails as the graph runs, InvalidArgumentError)
    params_shape = array_ops.shape(params)
    inner = params.shape.as_list()[1:] if params.shape.rank else None
    n = indices.shape.num_elements() if indices.shape.is_fully_defined() else None
    if n is not None and inner is not None and None not in inner:   # (static: the values' shape known)
        values = array_ops.reshape(grad, [n] + inner)
    else:
        rows = array_ops.reshape(math_ops.cast(array_ops.size(indices), params_shape.dtype), [1])
        values = array_ops.reshape(grad, array_ops.concat([rows, params_shape[1:]], 0))
    out = IndexedSlices(values, array_ops.reshape(indices, [-1]), params_shape)
    if dense is not None:
        out._dense = [dense, None]    # (the function, then what it gave)
    return out


def aggregate(grads, add_n):
    """Sums the contributions ``grads`` to one tensor: slices only -> their concatenation
    (in contribution order); any dense one -> ``add_n`` of all, slices made dense."""
    if len(grads) == 1:
        return grads[0]
    if not any(isinstance(g, IndexedSlices) for g in grads):
        return add_n(grads)
    if all(isinstance(g, IndexedSlices) for g in grads):
        return IndexedSlices(array_ops.concat([g.values for g in grads], 0),
                             array_ops.concat([math_ops.cast(g.indices, grads[0].indices.dtype) for g in grads], 0),
                             grads[0].dense_shape)
    return add_n([densify(g) for g in grads])


def deduplicated(slices):
    """TF's _deduplicate_indexed_slices: (values summed per index, the unique indices in order
    of first appearance)."""
    unique_indices, positions = unique(slices.indices)
    return unsorted_segment_sum(slices.values, positions, array_ops.shape(unique_indices)[0]), unique_indices


def densify(g):
    """``g`` as a dense tensor (repeated indices of slices summed)."""
    return convert_to_tensor(g) if isinstance(g, IndexedSlices) else g
