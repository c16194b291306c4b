"""``tf.keras.losses`` (Keras 3's formulas, TF backend): per-sample losses
reduced by "sum_over_batch_size" (sum / number of loss values) by default."""
import numpy as np

from .. import dtypes
from ..convert import convert_to_tensor
from ..ops import array_ops, math_ops, nn_ops, reduction_ops

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


def binary_crossentropy(y_true, y_pred, from_logits=False, label_smoothing=0.0, axis=-1):
    y_true, y_pred = _tensors(y_true, y_pred)
    if label_smoothing:
        y_true = y_true * (1.0 - label_smoothing) + 0.5 * label_smoothing
    if from_logits:
        bce = nn_ops.sigmoid_cross_entropy_with_logits(labels=y_true, logits=y_pred)
    else:
        p = math_ops.clip_by_value(y_pred, EPSILON, 1.0 - EPSILON)
        bce = -(y_true * math_ops.log(p) + (1.0 - y_true) * math_ops.log(1.0 - p))
    return reduction_ops.reduce_mean(bce, axis=axis)


def categorical_crossentropy(y_true, y_pred, from_logits=False, label_smoothing=0.0, axis=-1):
    y_true, y_pred = _tensors(y_true, y_pred)
    if label_smoothing:
        n = y_pred.shape.as_list()[axis]
        y_true = y_true * (1.0 - label_smoothing) + label_smoothing / n
    if from_logits:
        return nn_ops.softmax_cross_entropy_with_logits(labels=y_true, logits=y_pred, axis=axis)
    p = y_pred / reduction_ops.reduce_sum(y_pred, axis=axis, keepdims=True)
    p = math_ops.clip_by_value(p, EPSILON, 1.0 - EPSILON)
    return -reduction_ops.reduce_sum(y_true * math_ops.log(p), axis=axis)


def sparse_categorical_crossentropy(y_true, y_pred, from_logits=False, axis=-1):
    y_pred = convert_to_tensor(y_pred)
    y_true = convert_to_tensor(y_true)
    if y_true.shape.rank is not None and y_true.shape.rank == y_pred.shape.rank and y_true.shape.as_list()[-1] == 1:
        y_true = array_ops.squeeze(y_true, [-1])
    if not y_true.dtype.is_integer:
        y_true = math_ops.cast(y_true, dtypes.int32)
    logits = y_pred if from_logits else math_ops.log(math_ops.clip_by_value(y_pred, EPSILON, 1.0 - EPSILON))
    return nn_ops.sparse_softmax_cross_entropy_with_logits(labels=y_true, logits=logits)


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


mse = MSE = mean_squared_error
mae = MAE = mean_absolute_error
msle = MSLE = mean_squared_logarithmic_error
logcosh = log_cosh          # tf.keras.losses.logcosh (the name get() does not take, as Keras 3)


def reduce_values(values, reduction):
    if reduction in (None, "none"):
        return values
    total = reduction_ops.reduce_sum(values)
    if reduction == "sum":
        return total
    if reduction == "sum_over_batch_size":
        return total / math_ops.cast(array_ops.size(values), total.dtype)
    raise ValueError(f"Invalid value for argument `reduction`: {reduction}")


def _as_float32(x):
    t = convert_to_tensor(x)
    return t if t.dtype == dtypes.float32 else math_ops.cast(t, dtypes.float32)


class Loss:
    def __init__(self, name=None, reduction="sum_over_batch_size", dtype=None):
        if reduction not in (None, "none", "sum", "sum_over_batch_size"):
            raise ValueError(f"Invalid value for argument `reduction`. Expected one of 'sum', "
                             f"'sum_over_batch_size', None or 'none'. Received: reduction={reduction}")
        self.name = name or type(self).__name__
        self.reduction = reduction

    def call(self, y_true, y_pred):
        raise NotImplementedError

    def __call__(self, y_true, y_pred, sample_weight=None):
        # Keras converts both to the loss dtype (float32) first: float64 numpy inputs compute in float32
        y_true, y_pred = _as_float32(y_true), _as_float32(y_pred)
        values = self.call(y_true, y_pred)
        if sample_weight is not None:
            values = values * math_ops.cast(convert_to_tensor(sample_weight), values.dtype)
        return reduce_values(values, self.reduction)


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
    def __init__(self, from_logits=False, reduction="sum_over_batch_size", name="sparse_categorical_crossentropy"):
        super().__init__(sparse_categorical_crossentropy, name, reduction, from_logits=from_logits)
        self.from_logits = from_logits


_BY_NAME = {"mean_squared_error": MeanSquaredError, "mse": MeanSquaredError, "MSE": MeanSquaredError,
            "mean_absolute_error": MeanAbsoluteError, "mae": MeanAbsoluteError, "MAE": MeanAbsoluteError,
            "binary_crossentropy": BinaryCrossentropy, "categorical_crossentropy": CategoricalCrossentropy,
            "sparse_categorical_crossentropy": SparseCategoricalCrossentropy,
            # Keras 3's names ("logcosh" is not one: get raises ValueError for it)
            "mean_squared_logarithmic_error": MeanSquaredLogarithmicError, "msle": MeanSquaredLogarithmicError,
            "MSLE": MeanSquaredLogarithmicError, "MeanSquaredLogarithmicError": MeanSquaredLogarithmicError,
            "huber": Huber, "Huber": Huber, "log_cosh": LogCosh, "LogCosh": LogCosh}


def get(identifier):
    """A Loss for a name, a Loss instance, or a function (y_true, y_pred) -> per-sample losses."""
    if identifier is None or isinstance(identifier, Loss):
        return identifier
    if isinstance(identifier, str):
        cls = _BY_NAME.get(identifier)
        if cls is None:
            raise ValueError(f"Could not interpret loss identifier: {identifier}")
        return cls()
    if isinstance(identifier, type) and issubclass(identifier, Loss):
        return identifier()
    if callable(identifier):
        return LossFunctionWrapper(identifier, name=getattr(identifier, "__name__", None))
    raise ValueError(f"Could not interpret loss identifier: {identifier}")
