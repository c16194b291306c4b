"""TF 1's versions of TF 2 functions, for ``tf.compat.v1``: the old argument spellings
(``keep_dims``, ``reduction_indices``, ``dimension``, ``dim``, ``squeeze_dims``, ...), TF 1's
argument orders, and the TF 1 semantics that differ (``where``'s row selection, ``div``'s
Python 2 division). Each maps its arguments and calls the TF 2 function.

As TF (``deprecation.deprecated_argument_lookup``), passing both an old spelling and its new one
is a ValueError: "Cannot specify both 'keep_dims' and 'keepdims'."

``TOP``, ``MATH``, ``NN`` and ``LINALG`` are the names these give ``tf.compat.v1``,
``tf.compat.v1.math``, ``tf.compat.v1.nn`` and ``tf.compat.v1.linalg``."""
import numpy as np

from . import context, dtypes, errors
from .assert_ops import Assert
from .convert import convert_all, convert_to_tensor, graph_of, is_tensorlike
from .ops import math_ops, reduction_ops, array_ops, nn_ops, linalg_ops, math_composites, mask_ops
from .ops import array_composites, gather_batched, counting_ops, string_ops, conv, nn_composites, scatter_nd


def deprecated_argument_lookup(new_name, new_value, old_name, old_value):
    """The value given under either spelling (TF's helper of the same name)."""
    if old_value is not None:
        if new_value is not None:
            raise ValueError(f"Cannot specify both '{old_name}' and '{new_name}'.")
        return old_value
    return new_value


# ---------------------------------------------------------------- where, div

def where(condition, x=None, y=None, name=None):
    """TF 1's ``tf.where`` (the Select op): x and y of one shape; the condition of that shape,
    a scalar, or a vector of length x.shape[0] that picks whole rows. No broadcasting otherwise
    (``tf.compat.v1.where_v2`` is TF 2's broadcasting where). With only the condition: the
    coordinates of its true elements."""
    if x is None and y is None:
        return math_ops.where(condition, name=name)
    if x is None or y is None:
        raise ValueError("x and y must both be non-None or both be None.")
    g = graph_of([condition, x, y])
    if is_tensorlike(condition):
        c = convert_to_tensor(condition, graph=g)
        if c.dtype != dtypes.bool_:
            if context.executing_eagerly():
                raise ValueError(f"Tensor conversion requested dtype bool for Tensor with dtype {c.dtype.name}")
            raise TypeError(f"Input 'condition' of 'Select' Op has type {c.dtype.name} that does not match "
                            "expected type of bool.")
    else:
        c = convert_to_tensor(condition, dtype=dtypes.bool_, graph=g)
    x, y = convert_all([x, y], graph=g)
    c_rank, x_rank = c.shape.rank, x.shape.rank
    if x_rank is not None and y.shape.rank is not None and not x.shape.is_compatible_with(y.shape):
        raise errors.shape_error(f"Inputs to operation Select of type Select must have the same size and shape. "
                                 f" Input 0: {x.shape.as_list()} != input 1: {y.shape.as_list()}")
    if c_rank is None or x_rank is None or c_rank == 0 or (c_rank == x_rank and c.shape.is_compatible_with(x.shape)):
        return math_ops.where(c, x, y, name=name or "Select")
    if c_rank != 1:
        raise errors.shape_error(f"Inputs to operation Select of type Select must have the same size and shape. "
                                 f" Input 0: {c.shape.as_list()} != input 1: {x.shape.as_list()}")
    if x_rank == 0:
        raise errors.shape_error("'then' must be at least a vector, but saw shape: []")
    n, rows = c.shape.as_list()[0], x.shape.as_list()[0]
    if n is not None and rows is not None and n != rows:
        raise errors.shape_error(f"Number of batches of 'then' must match size of 'cond', but saw: {rows} vs. {n}")
    # a vector condition picks rows: as a [n, 1, ..., 1] condition it broadcasts over each row
    rows_condition = array_ops.reshape(c, [-1] + [1] * (x_rank - 1))
    return math_ops.where(rows_condition, x, y, name=name or "Select")


def div(x, y, name=None):
    """TF 1's ``tf.div``: Python 2's division, floored for integers and true for floats
    (y takes x's dtype: ``div(int_tensor, 2.)`` is a TypeError)."""
    g = graph_of([x, y])
    x = convert_to_tensor(x, graph=g)
    y = convert_to_tensor(y, dtype=x.dtype, graph=g)
    if x.dtype.is_floating or x.dtype.is_complex:
        return math_ops.realdiv(x, y, name=name or "div")
    return math_ops.floordiv(x, y, name=name or "div")


# ---------------------------------------------------------------- reductions

def _reduction(fn):
    def reduction(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None, keep_dims=None):
        axis = deprecated_argument_lookup("axis", axis, "reduction_indices", reduction_indices)
        keepdims = deprecated_argument_lookup("keepdims", keepdims, "keep_dims", keep_dims)
        return fn(input_tensor, axis, False if keepdims is None else bool(keepdims), name=name)
    reduction.__name__ = reduction.__qualname__ = fn.__name__
    reduction.__doc__ = f"TF 1's ``tf.compat.v1.{fn.__name__}``: also ``reduction_indices`` and ``keep_dims``."
    return reduction


reduce_sum = _reduction(reduction_ops.reduce_sum)
reduce_mean = _reduction(reduction_ops.reduce_mean)
reduce_max = _reduction(reduction_ops.reduce_max)
reduce_min = _reduction(reduction_ops.reduce_min)
reduce_prod = _reduction(reduction_ops.reduce_prod)
reduce_any = _reduction(reduction_ops.reduce_any)
reduce_all = _reduction(reduction_ops.reduce_all)
reduce_logsumexp = _reduction(nn_ops.reduce_logsumexp)


def reduce_join(inputs, axis=None, keep_dims=None, separator="", name=None, reduction_indices=None,
                keepdims=None):
    """TF 1's ``tf.compat.v1.reduce_join`` (tf.strings.reduce_join with the old spellings)."""
    axis = deprecated_argument_lookup("axis", axis, "reduction_indices", reduction_indices)
    keepdims = deprecated_argument_lookup("keepdims", keepdims, "keep_dims", keep_dims)
    return string_ops.reduce_join(inputs, axis, bool(keepdims), separator, name=name)


def norm(tensor, ord="euclidean", axis=None, keepdims=None, name=None, keep_dims=None):  # noqa: A002
    """TF 1's ``tf.compat.v1.norm``: also ``keep_dims``."""
    keepdims = deprecated_argument_lookup("keepdims", keepdims, "keep_dims", keep_dims)
    return linalg_ops.norm(tensor, ord, axis, keepdims, name=name)


def argmax(input, axis=None, name=None, dimension=None, output_type=dtypes.int64):  # noqa: A002
    """TF 1's ``tf.compat.v1.argmax``: ``dimension`` for axis, the name third; axis 0 by default."""
    axis = deprecated_argument_lookup("axis", axis, "dimension", dimension)
    return reduction_ops.argmax(input, 0 if axis is None else axis, output_type=output_type, name=name)


def argmin(input, axis=None, name=None, dimension=None, output_type=dtypes.int64):  # noqa: A002
    """TF 1's ``tf.compat.v1.argmin``: ``dimension`` for axis, the name third; axis 0 by default."""
    axis = deprecated_argument_lookup("axis", axis, "dimension", dimension)
    return reduction_ops.argmin(input, 0 if axis is None else axis, output_type=output_type, name=name)


def arg_max(input, dimension, output_type=dtypes.int64, name=None):  # noqa: A002
    """TF 1's ``tf.compat.v1.arg_max`` (the ArgMax op's own signature)."""
    return reduction_ops.argmax(input, dimension, output_type=output_type, name=name)


def arg_min(input, dimension, output_type=dtypes.int64, name=None):  # noqa: A002
    """TF 1's ``tf.compat.v1.arg_min``."""
    return reduction_ops.argmin(input, dimension, output_type=output_type, name=name)


# ---------------------------------------------------------------- shapes

def squeeze(input, axis=None, name=None, squeeze_dims=None):  # noqa: A002
    """TF 1's ``tf.compat.v1.squeeze``: also ``squeeze_dims``."""
    axis = deprecated_argument_lookup("axis", axis, "squeeze_dims", squeeze_dims)
    return array_ops.squeeze(input, axis, name=name)


def expand_dims(input, axis=None, name=None, dim=None):  # noqa: A002
    """TF 1's ``tf.compat.v1.expand_dims``: also ``dim``."""
    axis = deprecated_argument_lookup("axis", axis, "dim", dim)
    if axis is None:
        raise ValueError("Must specify an axis argument to tf.expand_dims()")
    return array_ops.expand_dims(input, axis, name=name)


def shape(input, name=None, out_type=None):  # noqa: A002
    """TF 1's ``tf.compat.v1.shape``: the name second; int32 by default."""
    return array_ops.shape(input, out_type=dtypes.int32 if out_type is None else out_type, name=name)


def size(input, name=None, out_type=None):  # noqa: A002
    """TF 1's ``tf.compat.v1.size``: the name second; int32 by default."""
    return array_ops.size(input, out_type=dtypes.int32 if out_type is None else out_type, name=name)


def gather(params, indices, validate_indices=None, name=None, axis=None, batch_dims=0):
    """TF 1's ``tf.compat.v1.gather``: the name fourth."""
    return gather_batched.gather(params, indices, validate_indices, axis=axis, batch_dims=batch_dims, name=name)


def boolean_mask(tensor, mask, name="boolean_mask", axis=None):
    """TF 1's ``tf.compat.v1.boolean_mask``: the name third."""
    return mask_ops.boolean_mask(tensor, mask, axis=axis, name=name)


def reverse_sequence(input, seq_lengths, seq_axis=None, batch_axis=None, name=None, seq_dim=None,  # noqa: A002
                     batch_dim=None):
    """TF 1's ``tf.compat.v1.reverse_sequence``: also ``seq_dim`` and ``batch_dim``."""
    seq_axis = deprecated_argument_lookup("seq_axis", seq_axis, "seq_dim", seq_dim)
    batch_axis = deprecated_argument_lookup("batch_axis", batch_axis, "batch_dim", batch_dim)
    return array_composites.reverse_sequence(input, seq_lengths, seq_axis, batch_axis, name=name)


# ---------------------------------------------------------------- tf.nn / tf.math

def softmax(logits, axis=None, name=None, dim=None):
    """TF 1's ``tf.compat.v1.nn.softmax``: also ``dim``."""
    axis = deprecated_argument_lookup("axis", axis, "dim", dim)
    return nn_ops.softmax(logits, -1 if axis is None else axis, name=name)


def log_softmax(logits, axis=None, name=None, dim=None):
    """TF 1's ``tf.compat.v1.nn.log_softmax``: also ``dim``."""
    axis = deprecated_argument_lookup("axis", axis, "dim", dim)
    return nn_ops.log_softmax(logits, -1 if axis is None else axis, name=name)


def l2_normalize(x, axis=None, epsilon=1e-12, name=None, dim=None):
    """TF 1's ``tf.compat.v1.nn.l2_normalize``: also ``dim``."""
    axis = deprecated_argument_lookup("axis", axis, "dim", dim)
    return nn_ops.l2_normalize(x, axis, epsilon, name=name)


def in_top_k(predictions, targets, k, name=None):
    """TF 1's ``tf.compat.v1.nn.in_top_k``: predictions first (TF 2's takes the targets first)."""
    return math_composites.in_top_k(targets, predictions, k, name=name)


def moments(x, axes, shift=None, name=None, keep_dims=None, keepdims=None):
    """TF 1's ``tf.compat.v1.nn.moments``: the name fourth, also ``keep_dims``."""
    keepdims = deprecated_argument_lookup("keepdims", keepdims, "keep_dims", keep_dims)
    return nn_ops.moments(x, axes, shift, False if keepdims is None else bool(keepdims), name=name)


def embedding_lookup(params, ids, partition_strategy="mod", name=None, validate_indices=True, max_norm=None):
    """TF 1's ``tf.compat.v1.nn.embedding_lookup`` (one params tensor: the partition strategy
    does not matter)."""
    return nn_ops.embedding_lookup(params, ids, max_norm=max_norm, name=name)


def conv2d(input, filter=None, strides=None, padding=None, use_cudnn_on_gpu=True,  # noqa: A002
           data_format="NHWC", dilations=(1, 1, 1, 1), name=None, filters=None):
    """TF 1's ``tf.compat.v1.nn.conv2d``: ``filter`` (or ``filters``)."""
    filter = deprecated_argument_lookup("filters", filters, "filter", filter)  # noqa: A001
    return conv.conv2d(input, filter, strides, padding, data_format=data_format, dilations=list(dilations),
                       name=name)


def weighted_moments(x, axes, frequency_weights, name=None, keep_dims=None, keepdims=None):
    """TF 1's ``tf.compat.v1.nn.weighted_moments``: the name fourth, also ``keep_dims``."""
    keepdims = deprecated_argument_lookup("keepdims", keepdims, "keep_dims", keep_dims)
    return nn_composites.weighted_moments(x, axes, frequency_weights, bool(keepdims), name=name)


# ---------------------------------------------------------------- TF 1 argument orders

def pad(tensor, paddings, mode="CONSTANT", name=None, constant_values=0):
    """TF 1's ``tf.compat.v1.pad``: the name fourth."""
    return array_ops.pad(tensor, paddings, mode, constant_values, name=name)


def zeros_like(tensor, dtype=None, name=None, optimize=True):
    """TF 1's ``tf.compat.v1.zeros_like``: the argument is ``tensor``."""
    return math_ops.zeros_like(tensor, dtype, name=name)


def ones_like(tensor, dtype=None, name=None, optimize=True):
    """TF 1's ``tf.compat.v1.ones_like``: the argument is ``tensor``."""
    return math_ops.ones_like(tensor, dtype, name=name)


def constant(value, dtype=None, shape=None, name="Const", verify_shape=False):
    """TF 1's ``tf.compat.v1.constant``: ``verify_shape`` requires the value to have ``shape``."""
    if verify_shape and shape is not None and np.shape(value) != tuple(shape):
        raise TypeError(f"Expected Tensor's shape: {tuple(shape)}, but got {np.shape(value)}.")
    return array_ops.constant(value, dtype, shape, name)


def confusion_matrix(labels, predictions, num_classes=None, dtype=dtypes.int32, name=None, weights=None):
    """TF 1's ``tf.compat.v1.confusion_matrix``: dtype and name before weights."""
    return counting_ops.confusion_matrix(labels, predictions, num_classes, weights, dtype, name)


def depth_to_space(input, block_size, name=None, data_format="NHWC"):  # noqa: A002
    """TF 1's ``tf.compat.v1.depth_to_space``: the name third."""
    return nn_composites.depth_to_space(input, block_size, data_format, name=name)


def space_to_depth(input, block_size, name=None, data_format="NHWC"):  # noqa: A002
    """TF 1's ``tf.compat.v1.space_to_depth``: the name third."""
    return nn_composites.space_to_depth(input, block_size, data_format, name=name)


def sparse_to_dense(sparse_indices, output_shape, sparse_values, default_value=0, validate_indices=True,
                    name=None):
    """TF 1's ``tf.compat.v1.sparse_to_dense``: ``sparse_values`` (one per index, or one for all)
    at ``sparse_indices`` (a scalar, a vector for a 1-D output, or one row per value) and
    ``default_value`` elsewhere. With ``validate_indices`` the indices must be in lexicographic
    order without repeats (InvalidArgumentError otherwise, when the output shape is known)."""
    g = graph_of([sparse_indices, output_shape, sparse_values, default_value])
    indices = convert_to_tensor(sparse_indices, graph=g)
    values = convert_to_tensor(sparse_values, graph=g)
    if indices.shape.rank == 0:
        indices = array_ops.reshape(indices, [1, 1])
    elif indices.shape.rank == 1:
        indices = array_ops.expand_dims(indices, -1)
    checks = []
    shape_value = array_ops.get_static_value(output_shape)
    if validate_indices and shape_value is not None and indices.shape.as_list()[0] != 0:
        shape_value = np.asarray(shape_value, np.int64).reshape(-1)
        strides = np.concatenate([np.cumprod(shape_value[::-1])[::-1][1:], [1]]).astype(np.int64)
        linear = reduction_ops.reduce_sum(
            math_ops.multiply(math_ops.cast(indices, dtypes.int64), strides), axis=1)
        ordered = reduction_ops.reduce_all(math_ops.greater(linear[1:], linear[:-1]))
        checks.append(Assert(ordered, ["sparse_to_dense: indices are out of order or repeated"]))
    dense = array_ops.fill(output_shape, math_ops.cast(default_value, values.dtype))
    updates = array_ops.broadcast_to(values, array_ops.shape(indices)[:1])
    if context.executing_eagerly() or not [c for c in checks if c is not None]:
        return scatter_nd.tensor_scatter_nd_update(dense, indices, updates, name=name or "SparseToDense")
    with context.control_dependencies([c for c in checks if c is not None]):
        return scatter_nd.tensor_scatter_nd_update(dense, indices, updates, name=name or "SparseToDense")


# ---------------------------------------------------------------- collections

class GraphKeys:
    """TF 1's standard collection names (``tf.compat.v1.GraphKeys``)."""
    GLOBAL_VARIABLES = VARIABLES = "variables"
    LOCAL_VARIABLES = "local_variables"
    METRIC_VARIABLES = "metric_variables"
    MODEL_VARIABLES = "model_variables"
    TRAINABLE_VARIABLES = "trainable_variables"
    SUMMARIES = "summaries"
    QUEUE_RUNNERS = "queue_runners"
    TABLE_INITIALIZERS = "table_initializer"
    ASSET_FILEPATHS = "asset_filepaths"
    MOVING_AVERAGE_VARIABLES = "moving_average_variables"
    REGULARIZATION_LOSSES = "regularization_losses"
    CONCATENATED_VARIABLES = "concatenated_variables"
    SAVERS = "savers"
    WEIGHTS = "weights"
    BIASES = "biases"
    ACTIVATIONS = "activations"
    UPDATE_OPS = "update_ops"
    LOSSES = "losses"
    SAVEABLE_OBJECTS = "saveable_objects"
    RESOURCES = "resources"
    LOCAL_RESOURCES = "local_resources"
    TRAINABLE_RESOURCE_VARIABLES = "trainable_resource_variables"
    INIT_OP = "init_op"
    LOCAL_INIT_OP = "local_init_op"
    READY_OP = "ready_op"
    READY_FOR_LOCAL_INIT_OP = "ready_for_local_init_op"
    SUMMARY_OP = "summary_op"
    GLOBAL_STEP = "global_step"
    EVAL_STEP = "eval_step"
    TRAIN_OP = "train_op"
    COND_CONTEXT = "cond_context"
    WHILE_CONTEXT = "while_context"


def get_collection(key, scope=None):
    """The default graph's collection ``key`` (a copy); with ``scope``, the items whose names match it."""
    return context.get_default_graph().get_collection(key, scope)


def get_collection_ref(key):
    return context.get_default_graph().get_collection_ref(key)


def add_to_collection(name, value):
    context.get_default_graph().add_to_collection(name, value)


def add_to_collections(names, value):
    for name in ([names] if isinstance(names, str) else dict.fromkeys(names)):
        add_to_collection(name, value)


def global_variables(scope=None):
    return get_collection(GraphKeys.GLOBAL_VARIABLES, scope)


def trainable_variables(scope=None):
    return get_collection(GraphKeys.TRAINABLE_VARIABLES, scope)


def local_variables(scope=None):
    return get_collection(GraphKeys.LOCAL_VARIABLES, scope)


def model_variables(scope=None):
    return get_collection(GraphKeys.MODEL_VARIABLES, scope)


TOP = dict(where=where, div=div, div_no_nan=math_ops.divide_no_nan, reduce_sum=reduce_sum,
           reduce_mean=reduce_mean, reduce_max=reduce_max, reduce_min=reduce_min, reduce_prod=reduce_prod,
           reduce_any=reduce_any, reduce_all=reduce_all, reduce_logsumexp=reduce_logsumexp,
           reduce_join=reduce_join, norm=norm, argmax=argmax, argmin=argmin, arg_max=arg_max, arg_min=arg_min,
           squeeze=squeeze, expand_dims=expand_dims, shape=shape, size=size, gather=gather,
           boolean_mask=boolean_mask, reverse_sequence=reverse_sequence, count_nonzero=counting_ops.count_nonzero_v1,
           pad=pad, zeros_like=zeros_like, ones_like=ones_like, constant=constant, confusion_matrix=confusion_matrix,
           depth_to_space=depth_to_space, space_to_depth=space_to_depth, sparse_to_dense=sparse_to_dense,
           GraphKeys=GraphKeys, get_collection=get_collection, get_collection_ref=get_collection_ref,
           add_to_collection=add_to_collection, add_to_collections=add_to_collections,
           global_variables=global_variables, trainable_variables=trainable_variables,
           local_variables=local_variables, model_variables=model_variables)
MATH = dict(reduce_sum=reduce_sum, reduce_mean=reduce_mean, reduce_max=reduce_max, reduce_min=reduce_min,
            reduce_prod=reduce_prod, reduce_any=reduce_any, reduce_all=reduce_all,
            reduce_logsumexp=reduce_logsumexp, argmax=argmax, argmin=argmin, softmax=softmax,
            log_softmax=log_softmax, l2_normalize=l2_normalize, in_top_k=in_top_k,
            count_nonzero=counting_ops.count_nonzero_v1, confusion_matrix=confusion_matrix)
NN = dict(softmax=softmax, log_softmax=log_softmax, l2_normalize=l2_normalize, in_top_k=in_top_k, moments=moments,
          embedding_lookup=embedding_lookup, conv2d=conv2d, weighted_moments=weighted_moments,
          depth_to_space=depth_to_space, space_to_depth=space_to_depth)
STRINGS = dict(reduce_join=reduce_join)
LINALG = dict(norm=norm, l2_normalize=l2_normalize)
