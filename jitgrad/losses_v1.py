"""``tf.compat.v1.losses``: TF 1's loss functions, in the operation order of TF's losses_impl.py.

Each casts its inputs to float32, computes the element losses, and reduces them with
``compute_weighted_loss``: the losses times the weights (a scalar, or a tensor of the losses'
rank whose dimensions are 1 or the losses'), then by default (``SUM_BY_NONZERO_WEIGHTS``) the sum
over the number of non-zero weights, broadcast to the losses' shape. The result is cast back to
the losses' dtype (a float64 loss passes through float32, as in TF). While building a graph the
loss is added to the ``loss_collection`` (``get_losses`` / ``get_total_loss`` read it); eagerly
it is not."""
from . import context, dtypes
from .convert import convert_to_tensor, graph_of
from .ops import math_ops, reduction_ops, array_ops, nn_ops

LOSSES = "losses"
REGULARIZATION_LOSSES = "regularization_losses"


class Reduction:
    """TF 1's loss reductions (``tf.compat.v1.losses.Reduction``)."""
    NONE = "none"
    SUM = "weighted_sum"
    SUM_OVER_BATCH_SIZE = "weighted_sum_over_batch_size"
    MEAN = "weighted_mean"
    SUM_BY_NONZERO_WEIGHTS = "weighted_sum_by_nonzero_weights"
    SUM_OVER_NONZERO_WEIGHTS = SUM_BY_NONZERO_WEIGHTS

    @classmethod
    def all(cls):
        return (cls.NONE, cls.SUM, cls.MEAN, cls.SUM_OVER_BATCH_SIZE, cls.SUM_OVER_NONZERO_WEIGHTS,
                cls.SUM_BY_NONZERO_WEIGHTS)

    @classmethod
    def validate(cls, key):
        if key not in cls.all():
            raise ValueError(f"Invalid Reduction Key {key}. Key should be one of {cls.all()}.")


# ---------------------------------------------------------------- the loss collections

def add_loss(loss, loss_collection=LOSSES):
    """Adds ``loss`` to the graph's collection (not when executing eagerly, as TF)."""
    if loss_collection and not context.executing_eagerly():
        loss.graph.add_to_collection(loss_collection, loss)


def _collection(key, scope):
    graph = context.get_default_graph()
    items = graph.get_collection(key)
    return [t for t in items if scope is None or t.name.startswith(scope)]


def get_losses(scope=None, loss_collection=LOSSES):
    return _collection(loss_collection, scope)


def get_regularization_losses(scope=None):
    return _collection(REGULARIZATION_LOSSES, scope)


def get_regularization_loss(scope=None, name="total_regularization_loss"):
    losses = get_regularization_losses(scope)
    return math_ops.add_n(losses, name=name) if losses else array_ops.constant(0.0)


def get_total_loss(add_regularization_losses=True, name="total_loss", scope=None):
    losses = get_losses(scope=scope)
    if add_regularization_losses:
        losses += get_regularization_losses(scope=scope)
    return math_ops.add_n(losses, name=name)


# ---------------------------------------------------------------- weighting and reduction

def _check_broadcastable(weights, values):
    """TF's weights_broadcast_ops.assert_broadcastable, on the static shapes."""
    w, v = weights.shape, values.shape
    if w.rank is None or v.rank is None or w.rank == 0:
        return
    received = f"values.shape={tuple(v.as_list())}. weights.shape={tuple(w.as_list())}."
    if w.rank != v.rank:
        raise ValueError(f"weights can not be broadcast to values. values.rank={v.rank}. weights.rank={w.rank}. "
                         + received)
    for i, (wd, vd) in enumerate(zip(w.as_list(), v.as_list())):
        if wd is not None and vd is not None and wd not in (1, vd):
            raise ValueError(f"weights can not be broadcast to values. Mismatch at dim {i}. " + received)


def _num_elements(losses):
    return math_ops.cast(array_ops.size(losses), losses.dtype)


def _num_present(losses, weights, weights_value):
    """The number of losses with a non-zero weight (weights broadcast to the losses' shape)."""
    if (isinstance(weights_value, float) and weights_value != 0.0) or (
            context.executing_eagerly() and weights.shape.rank == 0
            and bool(math_ops.not_equal(weights, 0.0).numpy())):
        return _num_elements(losses)
    present = math_ops.where(math_ops.equal(weights, 0.0), math_ops.zeros_like(weights),
                             math_ops.ones_like(weights))
    present = math_ops.multiply(present, math_ops.ones_like(losses))   # broadcast_weights
    return reduction_ops.reduce_sum(present)


def compute_weighted_loss(losses, weights=1.0, scope=None, loss_collection=LOSSES,
                          reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    Reduction.validate(reduction)
    with context.name_scope(scope or "weighted_loss") as scope:
        g = graph_of([losses, weights])
        losses = convert_to_tensor(losses, graph=g)
        weights_value = weights
        weights = convert_to_tensor(weights, graph=g)
        _check_broadcastable(weights, losses)
        input_dtype = losses.dtype
        losses = math_ops.cast(losses, dtypes.float32)
        weights = math_ops.cast(weights, dtypes.float32)
        weighted_losses = math_ops.multiply(losses, weights)
        if reduction == Reduction.NONE:
            loss = weighted_losses
        else:
            loss = reduction_ops.reduce_sum(weighted_losses)
            if reduction == Reduction.MEAN:
                count = reduction_ops.reduce_sum(math_ops.multiply(math_ops.ones_like(losses), weights))
                loss = math_ops.divide_no_nan(loss, count, name="value")
            elif reduction == Reduction.SUM_BY_NONZERO_WEIGHTS:
                loss = math_ops.divide_no_nan(loss, _num_present(losses, weights, weights_value), name="value")
            elif reduction == Reduction.SUM_OVER_BATCH_SIZE:
                loss = math_ops.divide_no_nan(loss, _num_elements(losses), name="value")
        loss = math_ops.cast(loss, input_dtype)
        add_loss(loss, loss_collection)
        return loss


def _float_pair(labels, predictions, labels_name, predictions_name):
    if labels is None:
        raise ValueError(f"Argument `{labels_name}` must not be None.")
    if predictions is None:
        raise ValueError(f"Argument `{predictions_name}` must not be None.")
    g = graph_of([labels, predictions])
    predictions = math_ops.cast(convert_to_tensor(predictions, graph=g), dtypes.float32)
    labels = math_ops.cast(convert_to_tensor(labels, graph=g), dtypes.float32)
    _assert_compatible(predictions, labels)
    return labels, predictions


def _assert_compatible(a, b):
    if not a.shape.is_compatible_with(b.shape):
        raise ValueError(f"Shapes {a.shape} and {b.shape} are incompatible")


# ---------------------------------------------------------------- the losses

def absolute_difference(labels, predictions, weights=1.0, scope=None, loss_collection=LOSSES,
                        reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    with context.name_scope(scope or "absolute_difference") as scope:
        labels, predictions = _float_pair(labels, predictions, "labels", "predictions")
        losses = math_ops.abs(math_ops.subtract(predictions, labels))
        return compute_weighted_loss(losses, weights, scope, loss_collection, reduction)


def mean_squared_error(labels, predictions, weights=1.0, scope=None, loss_collection=LOSSES,
                       reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    with context.name_scope(scope or "mean_squared_error") as scope:
        labels, predictions = _float_pair(labels, predictions, "labels", "predictions")
        losses = math_ops.squared_difference(predictions, labels)
        return compute_weighted_loss(losses, weights, scope, loss_collection, reduction)


def huber_loss(labels, predictions, weights=1.0, delta=1.0, scope=None, loss_collection=LOSSES,
               reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    with context.name_scope(scope or "huber_loss") as scope:
        labels, predictions = _float_pair(labels, predictions, "labels", "predictions")
        abs_error = math_ops.abs(math_ops.subtract(predictions, labels))
        quadratic = math_ops.minimum(abs_error, delta)
        linear = math_ops.subtract(abs_error, quadratic)
        losses = math_ops.add(math_ops.multiply(0.5, math_ops.multiply(quadratic, quadratic)),
                              math_ops.multiply(delta, linear))
        return compute_weighted_loss(losses, weights, scope, loss_collection, reduction)


def log_loss(labels, predictions, weights=1.0, epsilon=1e-7, scope=None, loss_collection=LOSSES,
             reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    with context.name_scope(scope or "log_loss") as scope:
        labels, predictions = _float_pair(labels, predictions, "labels", "predictions")
        losses = math_ops.subtract(
            math_ops.negative(math_ops.multiply(labels, math_ops.log(math_ops.add(predictions, epsilon)))),
            math_ops.multiply(math_ops.subtract(1., labels),
                              math_ops.log(math_ops.add(math_ops.subtract(1., predictions), epsilon))))
        return compute_weighted_loss(losses, weights, scope, loss_collection, reduction)


def hinge_loss(labels, logits, weights=1.0, scope=None, loss_collection=LOSSES,
               reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    with context.name_scope(scope or "hinge_loss") as scope:
        labels, logits = _float_pair(labels, logits, "labels", "logits")
        all_ones = math_ops.ones_like(labels)
        labels = math_ops.subtract(math_ops.multiply(2., labels), all_ones)
        losses = math_ops.relu(math_ops.subtract(all_ones, math_ops.multiply(labels, logits)))
        return compute_weighted_loss(losses, weights, scope, loss_collection, reduction)


def cosine_distance(labels, predictions, axis=None, weights=1.0, scope=None, loss_collection=LOSSES,
                    reduction=Reduction.SUM_BY_NONZERO_WEIGHTS, dim=None):
    if dim is not None:
        if axis is not None:
            raise ValueError("Cannot specify both 'dim' and 'axis'.")
        axis = dim
    if axis is None:
        raise ValueError("You must specify argument `axis`.")
    with context.name_scope(scope or "cosine_distance_loss") as scope:
        labels, predictions = _float_pair(labels, predictions, "labels", "predictions")
        radial_diffs = math_ops.multiply(predictions, labels)
        losses = math_ops.subtract(1., reduction_ops.reduce_sum(radial_diffs, axis=(axis,), keepdims=True))
        return compute_weighted_loss(losses, weights, scope, loss_collection, reduction)


def _labels_like(labels, logits, labels_name):
    if labels is None:
        raise ValueError(f"Argument `{labels_name}` must not be None.")
    if logits is None:
        raise ValueError("Argument `logits` must not be None.")
    g = graph_of([labels, logits])
    logits = convert_to_tensor(logits, graph=g)
    labels = math_ops.cast(convert_to_tensor(labels, graph=g), logits.dtype)
    _assert_compatible(logits, labels)
    return labels, logits


def sigmoid_cross_entropy(multi_class_labels, logits, weights=1.0, label_smoothing=0, scope=None,
                          loss_collection=LOSSES, reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    with context.name_scope(scope or "sigmoid_cross_entropy_loss") as scope:
        labels, logits = _labels_like(multi_class_labels, logits, "multi_class_labels")
        if label_smoothing > 0:
            labels = math_ops.add(math_ops.multiply(labels, 1 - label_smoothing), 0.5 * label_smoothing)
        losses = nn_ops.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits, name="xentropy")
        return compute_weighted_loss(losses, weights, scope, loss_collection, reduction)


def softmax_cross_entropy(onehot_labels, logits, weights=1.0, label_smoothing=0, scope=None,
                          loss_collection=LOSSES, reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    with context.name_scope(scope or "softmax_cross_entropy_loss") as scope:
        labels, logits = _labels_like(onehot_labels, logits, "onehot_labels")
        if label_smoothing > 0:
            num_classes = math_ops.cast(array_ops.shape(labels)[-1], logits.dtype)
            smooth_negatives = math_ops.divide(math_ops.cast(label_smoothing, logits.dtype), num_classes)
            labels = math_ops.add(math_ops.multiply(labels, 1.0 - label_smoothing), smooth_negatives)
        labels = math_ops.stop_gradient(labels, name="labels_stop_gradient")
        losses = nn_ops.softmax_cross_entropy_with_logits(labels=labels, logits=logits, name="xentropy")
        return compute_weighted_loss(losses, weights, scope, loss_collection, reduction)


def sparse_softmax_cross_entropy(labels, logits, weights=1.0, scope=None, loss_collection=LOSSES,
                                 reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    if labels is None:
        raise ValueError("Argument `labels` must not be None.")
    if logits is None:
        raise ValueError("Argument `logits` must not be None.")
    with context.name_scope(scope or "sparse_softmax_cross_entropy_loss") as scope:
        g = graph_of([labels, logits, weights])
        logits = convert_to_tensor(logits, graph=g)
        labels = convert_to_tensor(labels, graph=g)
        # TF's _remove_squeezable_dimensions (static ranks): labels of the logits' rank lose their
        # last (size-1) axis; weights one rank above the labels lose their last axis
        if labels.shape.rank is not None and logits.shape.rank is not None \
                and labels.shape.rank == logits.shape.rank and labels.shape.as_list()[-1] in (1, None):
            labels = array_ops.squeeze(labels, [-1])
        weights = convert_to_tensor(weights, graph=g) if not isinstance(weights, float) else weights
        w_rank = getattr(getattr(weights, "shape", None), "rank", 0)
        if labels.shape.rank is not None and w_rank is not None and w_rank - labels.shape.rank == 1:
            weights = array_ops.squeeze(weights, [-1])
        losses = nn_ops.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits, name="xentropy")
        return compute_weighted_loss(losses, weights, scope, loss_collection, reduction)


__all__ = ["Reduction", "add_loss", "get_losses", "get_regularization_losses", "get_regularization_loss",
           "get_total_loss", "compute_weighted_loss", "absolute_difference", "mean_squared_error", "huber_loss",
           "log_loss", "hinge_loss", "cosine_distance", "sigmoid_cross_entropy", "softmax_cross_entropy",
           "sparse_softmax_cross_entropy"]
