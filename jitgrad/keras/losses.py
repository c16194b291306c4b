"""``tf.keras.losses`` (Keras 3's formulas, TF backend): per-sample losses
reduced by "sum_over_batch_size" (sum / number of loss values) by default."""
import numpy as np

from .. import dtypes
from ..init_arguments import RecordsInitArguments
from ..convert import convert_to_tensor
from ..graph import Tensor
from ..ops import array_ops, math_ops, nn_ops, reduction_ops, softmax as softmax_ops
from . import activations
from .activations import logits_of
from .masking import get_keras_mask

EPSILON = 1e-7   # keras.config.epsilon()


def squeeze_or_expand_to_same_rank(x1, x2, expand_rank_1=True):
    """Keras's: when the ranks differ by one and the larger ends in 1, labels of shape (n,)
    meet predictions of shape (n, 1) as (n, 1) (else the size-1 axis is squeezed)."""
    r1, r2 = x1.shape.rank, x2.shape.rank
    if r1 is None or r2 is None or r1 == r2:
        return x1, x2
    if r1 == r2 + 1 and x1.shape.as_list()[-1] == 1:
        if r2 == 1 and expand_rank_1:
            return x1, array_ops.expand_dims(x2, -1)
        return array_ops.squeeze(x1, [-1]), x2
    if r2 == r1 + 1 and x2.shape.as_list()[-1] == 1:
        if r1 == 1 and expand_rank_1:
            return array_ops.expand_dims(x1, -1), x2
        return x1, array_ops.squeeze(x2, [-1])
    return x1, x2


def _tensors(y_true, y_pred):
    y_pred = convert_to_tensor(y_pred)
    if not y_pred.dtype.is_floating:
        y_pred = math_ops.cast(y_pred, dtypes.float32)
    y_true = convert_to_tensor(y_true)
    if y_true.dtype != y_pred.dtype:
        y_true = math_ops.cast(y_true, y_pred.dtype)
    return squeeze_or_expand_to_same_rank(y_true, y_pred)


def mean_squared_error(y_true, y_pred):
    y_true, y_pred = _tensors(y_true, y_pred)
    return reduction_ops.reduce_mean(math_ops.square(y_true - y_pred), axis=-1)


def mean_absolute_error(y_true, y_pred):
    y_true, y_pred = _tensors(y_true, y_pred)
    return reduction_ops.reduce_mean(math_ops.abs(y_true - y_pred), axis=-1)


def _logits_behind(output, op_type, from_logits):
    """Keras's TF backend (_get_logits): the output of Keras's sigmoid / softmax, or in a graph
    of any ``op_type`` op, is taken back to its logits, and the loss computes from them."""
    logits = logits_of(output)
    if logits is None and isinstance(output, Tensor) and output.op.type == op_type:
        logits = output.op.inputs[-1]        # Softmax's inputs: (value, logits)
    return (output, from_logits) if logits is None else (logits, True)


def _static_dims(t):
    return None if t.shape.rank is None else t.shape.as_list()


def check_same_shape(target, output):
    """Keras 3's TF backend (ops.binary_crossentropy / categorical_crossentropy): labels and
    predictions of other ranks or static sizes are a ValueError -- never broadcast (labels of
    shape (n, 1) against (n, 4) predictions would give a number)."""
    t, o = _static_dims(target), _static_dims(output)
    if t is None or o is None:
        return
    if len(t) != len(o):
        raise ValueError(f"Arguments `target` and `output` must have the same rank (ndim). Received: "
                         f"target.shape={tuple(t)}, output.shape={tuple(o)}")
    if any(a is not None and b is not None and a != b for a, b in zip(t, o)):
        raise ValueError(f"Arguments `target` and `output` must have the same shape. Received: "
                         f"target.shape={tuple(t)}, output.shape={tuple(o)}")


def check_sparse_shapes(target, output):
    """Keras 3's TF backend (ops.sparse_categorical_crossentropy): the labels' shape is the
    predictions' without the class axis (a ValueError otherwise)."""
    t, o = _static_dims(target), _static_dims(output)
    if t is None or o is None:
        return
    if len(o) < 1:
        raise ValueError(f"Argument `output` must be at least rank 1. Received: output.shape={tuple(o)}")
    if len(t) != len(o) - 1:
        raise ValueError(f"Argument `output` must have rank (ndim) `target.ndim - 1`. Received: "
                         f"target.shape={tuple(t)}, output.shape={tuple(o)}")
    if any(a is not None and b is not None and a != b for a, b in zip(t, o[:-1])):
        raise ValueError(f"Arguments `target` and `output` must have the same shape up until the last dimension: "
                         f"target.shape={tuple(t)}, output.shape={tuple(o)}")


def _bce(y_true, y_pred, from_logits):
    """Keras 3's elementwise binary crossentropy (ops.binary_crossentropy)."""
    check_same_shape(y_true, y_pred)
    y_pred, from_logits = _logits_behind(y_pred, "Sigmoid", from_logits)
    if from_logits:
        return nn_ops.sigmoid_cross_entropy_with_logits(labels=y_true, logits=y_pred)
    p = math_ops.clip_by_value(y_pred, EPSILON, 1.0 - EPSILON)
    return -(y_true * math_ops.log(p) + (1.0 - y_true) * math_ops.log(1.0 - p))


def binary_crossentropy(y_true, y_pred, from_logits=False, label_smoothing=0.0, axis=-1):
    y_pred, from_logits = _logits_behind(y_pred, "Sigmoid", from_logits)
    y_true, y_pred = _tensors(y_true, y_pred)
    if label_smoothing:
        y_true = y_true * (1.0 - label_smoothing) + 0.5 * label_smoothing
    return reduction_ops.reduce_mean(_bce(y_true, y_pred, from_logits), axis=axis)


def categorical_crossentropy(y_true, y_pred, from_logits=False, label_smoothing=0.0, axis=-1):
    y_pred, from_logits = _logits_behind(y_pred, "Softmax", from_logits)
    y_true, y_pred = _tensors(y_true, y_pred)
    check_same_shape(y_true, y_pred)
    if label_smoothing:
        n = y_true.shape.as_list()[-1]          # Keras 3: the last axis's size, whatever `axis` is
        y_true = y_true * (1.0 - label_smoothing) + label_smoothing / n
    if from_logits:
        return nn_ops.softmax_cross_entropy_with_logits(labels=y_true, logits=y_pred, axis=axis)
    p = y_pred / reduction_ops.reduce_sum(y_pred, axis=axis, keepdims=True)
    p = math_ops.clip_by_value(p, EPSILON, 1.0 - EPSILON)
    return -reduction_ops.reduce_sum(y_true * math_ops.log(p), axis=axis)


def sparse_categorical_crossentropy(y_true, y_pred, from_logits=False, ignore_class=None, axis=-1):
    """Keras 3's; with ``ignore_class``, those labels' losses are 0 (their class read as 0)."""
    y_pred, from_logits = _logits_behind(convert_to_tensor(y_pred), "Softmax", from_logits)
    y_true = _sparse_labels(y_true, y_pred)
    check_sparse_shapes(y_true, y_pred)
    valid = None
    if ignore_class is not None:
        valid = math_ops.not_equal(y_true, math_ops.cast(ignore_class, y_true.dtype))
        y_true = math_ops.where(valid, y_true, array_ops.zeros_like(y_true))
    logits = y_pred if from_logits else math_ops.log(math_ops.clip_by_value(y_pred, EPSILON, 1.0 - EPSILON))
    values = nn_ops.sparse_softmax_cross_entropy_with_logits(labels=y_true, logits=logits)
    return values if valid is None else math_ops.where(valid, values, array_ops.zeros_like(values))


def _sparse_labels(y_true, y_pred):
    y_true = convert_to_tensor(y_true)
    if y_true.shape.rank is not None and y_true.shape.rank == y_pred.shape.rank and y_true.shape.as_list()[-1] == 1:
        y_true = array_ops.squeeze(y_true, [-1])
    return y_true if y_true.dtype.is_integer else math_ops.cast(y_true, dtypes.int32)


def mean_squared_logarithmic_error(y_true, y_pred):
    """Keras 3's: mean(square(log(max(y_pred, eps) + 1) - log(max(y_true, eps) + 1)), axis=-1)."""
    y_true, y_pred = _tensors(y_true, y_pred)
    first_log = math_ops.log(math_ops.maximum(y_pred, EPSILON) + 1.0)
    second_log = math_ops.log(math_ops.maximum(y_true, EPSILON) + 1.0)
    return reduction_ops.reduce_mean(math_ops.square(first_log - second_log), axis=-1)


def huber(y_true, y_pred, delta=1.0):
    """Keras 3's: mean(where(|e| <= delta, 0.5 e^2, delta |e| - 0.5 delta^2), axis=-1), e = y_pred - y_true."""
    y_true, y_pred = _tensors(y_true, y_pred)
    delta = math_ops.cast(convert_to_tensor(delta), y_pred.dtype)
    error = y_pred - y_true
    abs_error = math_ops.abs(error)
    quadratic = 0.5 * math_ops.square(error)
    linear = delta * abs_error - 0.5 * math_ops.square(delta)
    return reduction_ops.reduce_mean(math_ops.where(abs_error <= delta, quadratic, linear), axis=-1)


def log_cosh(y_true, y_pred):
    """Keras 3's: mean(log(cosh(e)), axis=-1), computed as e + softplus(-2 e) - log(2) (no cosh overflow)."""
    y_true, y_pred = _tensors(y_true, y_pred)
    error = y_pred - y_true
    # Keras takes ops.log(2.0), a float32, and casts it: float64 losses see float32's log(2) too
    log2 = math_ops.cast(convert_to_tensor(np.float32(np.log(2.0))), y_pred.dtype)
    return reduction_ops.reduce_mean(error + math_ops.softplus(error * -2.0) - log2, axis=-1)


def mean_absolute_percentage_error(y_true, y_pred):
    """Keras 3's: 100 * mean(|(y_true - y_pred) / max(|y_true|, eps)|, axis=-1)."""
    y_true, y_pred = _tensors(y_true, y_pred)
    diff = math_ops.abs((y_true - y_pred) / math_ops.maximum(math_ops.abs(y_true), EPSILON))
    return 100.0 * reduction_ops.reduce_mean(diff, axis=-1)


def kl_divergence(y_true, y_pred):
    """Keras 3's: sum(t * log(t / p), axis=-1) with both clipped to [eps, 1]."""
    y_true, y_pred = _tensors(y_true, y_pred)
    y_true = math_ops.clip_by_value(y_true, EPSILON, 1.0)
    y_pred = math_ops.clip_by_value(y_pred, EPSILON, 1.0)
    return reduction_ops.reduce_sum(y_true * math_ops.log(y_true / y_pred), axis=-1)


def poisson(y_true, y_pred):
    """Keras 3's: mean(p - t * log(p + eps), axis=-1)."""
    y_true, y_pred = _tensors(y_true, y_pred)
    return reduction_ops.reduce_mean(y_pred - y_true * math_ops.log(y_pred + EPSILON), axis=-1)


def l2_normalize(x, axis, epsilon=EPSILON):
    # Keras 3's ops.normalize: x * min(rsqrt(sum(x^2)), 1 / eps), so a zero row stays zero
    inv_norm = math_ops.rsqrt(reduction_ops.reduce_sum(math_ops.square(x), axis=axis, keepdims=True))
    return x * math_ops.minimum(inv_norm, 1.0 / epsilon)


def cosine_similarity(y_true, y_pred, axis=-1):
    """Keras 3's: -sum(normalize(t) * normalize(p), axis)."""
    y_true, y_pred = _tensors(y_true, y_pred)
    return -reduction_ops.reduce_sum(l2_normalize(y_true, axis) * l2_normalize(y_pred, axis), axis=axis)


def _hinge_labels(y_true):
    # Keras 3 maps {0, 1} labels to {-1, 1} when every label is 0 or 1, else keeps them
    is_binary = reduction_ops.reduce_all(math_ops.logical_or(math_ops.equal(y_true, 0.0),
                                                             math_ops.equal(y_true, 1.0)))
    return math_ops.where(is_binary, 2.0 * y_true - 1.0, y_true)


def hinge(y_true, y_pred):
    """Keras 3's: mean(max(1 - t * p, 0), axis=-1), {0, 1} labels taken as {-1, 1}."""
    y_true, y_pred = _tensors(y_true, y_pred)
    return reduction_ops.reduce_mean(math_ops.maximum(1.0 - _hinge_labels(y_true) * y_pred, 0.0), axis=-1)


def squared_hinge(y_true, y_pred):
    """Keras 3's: mean(max(1 - t * p, 0)^2, axis=-1), {0, 1} labels taken as {-1, 1}."""
    y_true, y_pred = _tensors(y_true, y_pred)
    margin = math_ops.maximum(1.0 - _hinge_labels(y_true) * y_pred, 0.0)
    return reduction_ops.reduce_mean(math_ops.square(margin), axis=-1)


def categorical_hinge(y_true, y_pred):
    """Keras 3's: max(max((1 - t) * p) - sum(t * p) + 1, 0) over the last axis."""
    y_true, y_pred = _tensors(y_true, y_pred)
    pos = reduction_ops.reduce_sum(y_true * y_pred, axis=-1)
    neg = reduction_ops.reduce_max((1.0 - y_true) * y_pred, axis=-1)
    return math_ops.maximum(neg - pos + 1.0, 0.0)


def binary_focal_crossentropy(y_true, y_pred, apply_class_balancing=False, alpha=0.25, gamma=2.0,
                              from_logits=False, label_smoothing=0.0, axis=-1):
    """Keras 3's: mean((1 - p_t)^gamma * bce, axis), bce from clipped probabilities (also for logits,
    which Keras passes through a sigmoid first)."""
    y_true, y_pred = _tensors(y_true, y_pred)
    if label_smoothing:
        y_true = y_true * (1.0 - label_smoothing) + 0.5 * label_smoothing
    if from_logits:
        y_pred = activations.sigmoid(y_pred)       # keeps the logits: the bce below reads them
    bce = _bce(y_true, y_pred, False)
    p_t = y_true * y_pred + (1.0 - y_true) * (1.0 - y_pred)
    focal_bce = math_ops.pow(1.0 - p_t, gamma) * bce
    if apply_class_balancing:
        focal_bce = (y_true * alpha + (1.0 - y_true) * (1.0 - alpha)) * focal_bce
    return reduction_ops.reduce_mean(focal_bce, axis=axis)


def categorical_focal_crossentropy(y_true, y_pred, alpha=0.25, gamma=2.0, from_logits=False, label_smoothing=0.0,
                                   axis=-1):
    """Keras 3's: sum(alpha * (1 - p)^gamma * -t * log(p), axis), p normalised and clipped."""
    y_true, y_pred = _tensors(y_true, y_pred)
    if label_smoothing:
        y_true = y_true * (1.0 - label_smoothing) + label_smoothing / y_pred.shape.as_list()[-1]
    if from_logits:
        y_pred = softmax_ops.softmax(y_pred, axis=axis)
    p = y_pred / reduction_ops.reduce_sum(y_pred, axis=axis, keepdims=True)
    p = math_ops.clip_by_value(p, EPSILON, 1.0 - EPSILON)
    focal = math_ops.pow(1.0 - p, gamma) * alpha * (-y_true * math_ops.log(p))
    return reduction_ops.reduce_sum(focal, axis=axis)


mse = MSE = mean_squared_error
mae = MAE = mean_absolute_error
msle = MSLE = mean_squared_logarithmic_error
mape = MAPE = mean_absolute_percentage_error
kld = KLD = kullback_leibler_divergence = kl_divergence
logcosh = log_cosh          # tf.keras.losses.logcosh (the name get() does not take, as Keras 3)


def apply_mask(sample_weight, mask, dtype, reduction):
    """Keras 3's (losses.loss.apply_mask): the mask merged into the sample weights. For a mean
    ("sum_over_batch_size" / "mean") the kept entries weigh total / kept, so the mean is over the
    kept entries only; for other reductions (and metrics, "sum") the mask is 0 / 1."""
    if mask is None:
        return sample_weight
    mask = convert_to_tensor(mask)
    if reduction in ("mean", "sum_over_batch_size"):
        total = math_ops.cast(array_ops.size(mask), dtype)
        valid = reduction_ops.reduce_sum(math_ops.cast(mask, dtype))
        # Keras's where(mask, total / kept, 0): the same numbers (the weight is finite)
        float_mask = math_ops.cast(mask, dtype) * math_ops.divide_no_nan(total, valid)
    else:
        float_mask = math_ops.cast(mask, dtype)
    if sample_weight is None:
        return float_mask
    sample_weight = math_ops.cast(convert_to_tensor(sample_weight), dtype)
    float_mask, sample_weight = squeeze_or_expand_to_same_rank(float_mask, sample_weight)
    return sample_weight * float_mask


_REDUCTIONS = ("sum_over_batch_size", "sum", None, "none", "mean", "mean_with_sample_weight")


def reduce_values(values, reduction, sample_weight=None):
    """Keras 3's: the sum, divided (divide_no_nan) by the number of values or, for
    "mean_with_sample_weight", by the weights' sum; a scalar or (0,) stays as it is."""
    if reduction in (None, "none") or values.shape.as_list() in ([], [0]):
        return values
    total = reduction_ops.reduce_sum(values)
    if reduction == "sum":
        return total
    if reduction == "mean_with_sample_weight" and sample_weight is not None:
        divisor = math_ops.cast(reduction_ops.reduce_sum(sample_weight), total.dtype)
    else:
        divisor = math_ops.cast(array_ops.size(values), total.dtype)
    return math_ops.divide_no_nan(total, divisor)


def reduce_weighted_values(values, sample_weight, reduction, mask=None):
    """Keras 3's: a mask joins the weights (apply_mask), weights meet the losses through
    squeeze_or_expand_to_same_rank (a (batch, 1) weight scales each sample, it does not
    broadcast against (batch,) losses), then reduce."""
    sample_weight = apply_mask(sample_weight, mask, values.dtype, reduction)
    if sample_weight is not None:
        sample_weight = math_ops.cast(convert_to_tensor(sample_weight), values.dtype)
        values, sample_weight = squeeze_or_expand_to_same_rank(values, sample_weight)
        values = values * sample_weight
    return reduce_values(values, reduction, sample_weight)


def _as_float32(x):
    t = convert_to_tensor(x)
    return t if t.dtype == dtypes.float32 else math_ops.cast(t, dtypes.float32)


class Loss(RecordsInitArguments):
    def __init__(self, name=None, reduction="sum_over_batch_size", dtype=None):
        if reduction not in _REDUCTIONS:
            raise ValueError(f"Invalid value for argument `reduction`. Expected one of {set(_REDUCTIONS)}. "
                             f"Received: reduction={reduction}")
        self.name = name or type(self).__name__
        self.reduction = reduction

    def call(self, y_true, y_pred):
        raise NotImplementedError

    def __call__(self, y_true, y_pred, sample_weight=None):
        in_mask = get_keras_mask(y_pred)      # a model output's mask: its masked steps are left out
        # Keras converts both to the loss dtype (float32) first: float64 numpy inputs compute in float32
        y_true, y_pred = _as_float32(y_true), _as_float32(y_pred)
        values = self.call(y_true, y_pred)
        return reduce_weighted_values(values, sample_weight, self.reduction,
                                      _both_masks(in_mask, get_keras_mask(values)))


def _both_masks(a, b):
    if a is None or b is None:
        return b if a is None else a
    return math_ops.logical_and(math_ops.cast(a, dtypes.bool_), math_ops.cast(b, dtypes.bool_))


class LossFunctionWrapper(Loss):
    def __init__(self, fn, name=None, reduction="sum_over_batch_size", **kwargs):
        super().__init__(name=name, reduction=reduction)
        self.fn, self.kwargs = fn, kwargs

    def call(self, y_true, y_pred):
        return self.fn(y_true, y_pred, **self.kwargs)


class MeanSquaredError(LossFunctionWrapper):
    def __init__(self, reduction="sum_over_batch_size", name="mean_squared_error"):
        super().__init__(mean_squared_error, name, reduction)


class MeanAbsoluteError(LossFunctionWrapper):
    def __init__(self, reduction="sum_over_batch_size", name="mean_absolute_error"):
        super().__init__(mean_absolute_error, name, reduction)


class MeanSquaredLogarithmicError(LossFunctionWrapper):
    def __init__(self, reduction="sum_over_batch_size", name="mean_squared_logarithmic_error"):
        super().__init__(mean_squared_logarithmic_error, name, reduction)


class Huber(LossFunctionWrapper):
    def __init__(self, delta=1.0, reduction="sum_over_batch_size", name="huber_loss"):
        super().__init__(huber, name, reduction, delta=delta)


class LogCosh(LossFunctionWrapper):
    def __init__(self, reduction="sum_over_batch_size", name="log_cosh"):
        super().__init__(log_cosh, name, reduction)


class BinaryCrossentropy(LossFunctionWrapper):
    def __init__(self, from_logits=False, label_smoothing=0.0, axis=-1, reduction="sum_over_batch_size",
                 name="binary_crossentropy"):
        super().__init__(binary_crossentropy, name, reduction, from_logits=from_logits,
                         label_smoothing=label_smoothing, axis=axis)
        self.from_logits = from_logits


class CategoricalCrossentropy(LossFunctionWrapper):
    def __init__(self, from_logits=False, label_smoothing=0.0, axis=-1, reduction="sum_over_batch_size",
                 name="categorical_crossentropy"):
        super().__init__(categorical_crossentropy, name, reduction, from_logits=from_logits,
                         label_smoothing=label_smoothing, axis=axis)
        self.from_logits = from_logits


class SparseCategoricalCrossentropy(LossFunctionWrapper):
    def __init__(self, from_logits=False, ignore_class=None, reduction="sum_over_batch_size",
                 name="sparse_categorical_crossentropy", dtype=None):
        super().__init__(sparse_categorical_crossentropy, name, reduction, from_logits=from_logits,
                         ignore_class=ignore_class)
        self.from_logits, self.ignore_class = from_logits, ignore_class

    def __call__(self, y_true, y_pred, sample_weight=None):
        if self.ignore_class is None:
            return super().__call__(y_true, y_pred, sample_weight)
        # Keras 3 masks the ignored labels out of the reduction (their losses carry that mask): a
        # mean is over the others
        in_mask = get_keras_mask(y_pred)
        y_true, y_pred = _as_float32(y_true), _as_float32(y_pred)
        values = self.call(y_true, y_pred)
        labels = _sparse_labels(y_true, y_pred)
        valid = math_ops.not_equal(labels, math_ops.cast(self.ignore_class, labels.dtype))
        return reduce_weighted_values(values, sample_weight, self.reduction, _both_masks(in_mask, valid))


def _loss_class(fn, default_name, **defaults):
    """A Loss class over ``fn`` whose constructor takes ``fn``'s options, as Keras 3's classes do."""
    params = [*defaults, "reduction", "name", "dtype"]

    def __init__(self, *args, **kwargs):
        if len(args) > len(params):
            raise TypeError(f"{type(self).__name__}() takes at most {len(params)} positional arguments")
        options = {**defaults, "reduction": "sum_over_batch_size", "name": default_name, "dtype": None,
                   **dict(zip(params, args))}
        for key, value in kwargs.items():
            if key not in options:
                raise TypeError(f"{type(self).__name__}() got an unexpected keyword argument '{key}'")
            options[key] = value
        reduction, name = options.pop("reduction"), options.pop("name")
        options.pop("dtype")
        LossFunctionWrapper.__init__(self, fn, name, reduction, **options)
        for key, value in options.items():
            setattr(self, key, value)
    return __init__


class MeanAbsolutePercentageError(LossFunctionWrapper):
    __init__ = _loss_class(mean_absolute_percentage_error, "mean_absolute_percentage_error")


class KLDivergence(LossFunctionWrapper):
    __init__ = _loss_class(kl_divergence, "kl_divergence")


class Poisson(LossFunctionWrapper):
    __init__ = _loss_class(poisson, "poisson")


class CosineSimilarity(LossFunctionWrapper):
    __init__ = _loss_class(cosine_similarity, "cosine_similarity", axis=-1)


class Hinge(LossFunctionWrapper):
    __init__ = _loss_class(hinge, "hinge")


class SquaredHinge(LossFunctionWrapper):
    __init__ = _loss_class(squared_hinge, "squared_hinge")


class CategoricalHinge(LossFunctionWrapper):
    __init__ = _loss_class(categorical_hinge, "categorical_hinge")


class BinaryFocalCrossentropy(LossFunctionWrapper):
    __init__ = _loss_class(binary_focal_crossentropy, "binary_focal_crossentropy", apply_class_balancing=False,
                           alpha=0.25, gamma=2.0, from_logits=False, label_smoothing=0.0, axis=-1)


class CategoricalFocalCrossentropy(LossFunctionWrapper):
    __init__ = _loss_class(categorical_focal_crossentropy, "categorical_focal_crossentropy", alpha=0.25, gamma=2.0,
                           from_logits=False, label_smoothing=0.0, axis=-1)


# Keras 3's names: each class and loss function by its own name, plus the short aliases.
# A class name gives an instance (which reduces), a function name the function (per-sample values).
_BY_NAME = {obj.__name__: obj for obj in (
    MeanSquaredError, MeanAbsoluteError, MeanAbsolutePercentageError, MeanSquaredLogarithmicError, Huber, LogCosh,
    BinaryCrossentropy, CategoricalCrossentropy, SparseCategoricalCrossentropy, KLDivergence, Poisson,
    CosineSimilarity, Hinge, SquaredHinge, CategoricalHinge, BinaryFocalCrossentropy, CategoricalFocalCrossentropy,
    mean_squared_error, mean_absolute_error, mean_absolute_percentage_error, mean_squared_logarithmic_error, huber,
    log_cosh, binary_crossentropy, categorical_crossentropy, sparse_categorical_crossentropy, kl_divergence, poisson,
    cosine_similarity, hinge, squared_hinge, categorical_hinge, binary_focal_crossentropy,
    categorical_focal_crossentropy)}
_BY_NAME.update({"bce": binary_crossentropy, "BCE": binary_crossentropy, "kld": kl_divergence, "KLD": kl_divergence,
                 "mae": mean_absolute_error, "MAE": mean_absolute_error, "mse": mean_squared_error,
                 "MSE": mean_squared_error, "mape": mean_absolute_percentage_error,
                 "MAPE": mean_absolute_percentage_error, "msle": mean_squared_logarithmic_error,
                 "MSLE": mean_squared_logarithmic_error})


def get(identifier):
    """Keras 3's ``losses.get``: a Loss instance for a class or its name, the function for a loss
    function's name, a callable as it is."""
    if identifier is None:
        return None
    loss = _BY_NAME.get(identifier) if isinstance(identifier, str) else identifier
    if not callable(loss):
        raise ValueError(f"Could not interpret loss identifier: {identifier}")
    return loss() if isinstance(loss, type) else loss


def for_compile(identifier):
    """The Loss ``Model.compile(loss=...)`` uses: a loss function reduces over the batch as its
    Loss wrapper does (Keras wraps it the same way)."""
    loss = get(identifier)
    if loss is None or isinstance(loss, Loss):
        return loss
    return LossFunctionWrapper(loss, name=getattr(loss, "__name__", None))
