"""``tf.keras.metrics``: stateful metrics over non-trainable variables (so they
update inside a compiled train step): Mean, Sum, and the mean-of-values
metrics Accuracy, BinaryAccuracy, CategoricalAccuracy,
SparseCategoricalAccuracy, MeanSquaredError, MeanAbsoluteError, ...; Precision, Recall and
the confusion counts come from confusion_metrics.py, the Metric base from metric_base.py."""
from .. import dtypes
from ..convert import convert_to_tensor
from ..module import camel_to_snake
from ..ops import array_ops, math_composites, math_ops, reduction_ops
from . import losses
from .confusion_metrics import FalseNegatives, FalsePositives, Precision, Recall, TrueNegatives, TruePositives
from .masking import get_keras_mask
from .metric_base import Metric


def samplewise_values(values, sample_weight, reduce_fn, dtype):
    """Keras 3's reduce_to_samplewise_values: weights meet the values through
    squeeze_or_expand_to_same_rank, the values are reduced to the weights' rank, weighted, and
    then reduced to one per sample; the weights to one per sample too."""
    values = math_ops.cast(convert_to_tensor(values), dtype)
    if sample_weight is not None:
        sample_weight = math_ops.cast(convert_to_tensor(sample_weight), dtype)
        values, sample_weight = losses.squeeze_or_expand_to_same_rank(values, sample_weight)
        weight_ndim, values_ndim = sample_weight.shape.rank, values.shape.rank
        if values_ndim > weight_ndim:
            values = reduce_fn(values, axis=list(range(weight_ndim, values_ndim)))
        sample_weight = array_ops.broadcast_to(sample_weight, array_ops.shape(values))
        values = values * sample_weight
        if weight_ndim > 1:
            sample_weight = reduce_fn(sample_weight, axis=list(range(1, weight_ndim)))
    if values.shape.rank > 1:
        values = reduce_fn(values, axis=list(range(1, values.shape.rank)))
    return values, sample_weight


class Sum(Metric):
    def __init__(self, name="sum", dtype=None):
        super().__init__(name, dtype)
        self.total = self.add_variable(name="total")

    def update_state(self, values, sample_weight=None):
        values, _ = samplewise_values(values, sample_weight, reduction_ops.reduce_sum, self.dtype)
        self.total.assign_add(reduction_ops.reduce_sum(values))

    def result(self):
        return math_ops.identity(self.total)


class Mean(Metric):
    """Keras 3's Mean: total += sum of the per-sample (weighted) values, count += sum of the
    per-sample weights (else the number of samples); result = total / count (0 when empty)."""

    def __init__(self, name="mean", dtype=None):
        super().__init__(name, dtype)
        self.total = self.add_variable(name="total")
        self.count = self.add_variable(name="count")

    def update_state(self, values, sample_weight=None):
        values, sample_weight = samplewise_values(values, sample_weight, reduction_ops.reduce_mean, self.dtype)
        self.total.assign_add(reduction_ops.reduce_sum(values))
        if sample_weight is not None:
            count = reduction_ops.reduce_sum(sample_weight)
        elif values.shape.rank >= 1:
            count = array_ops.shape(values)[0]
        else:
            count = 1
        self.count.assign_add(math_ops.cast(count, self.dtype))

    def result(self):
        return math_ops.divide_no_nan(self.total, self.count)


class MeanMetricWrapper(Mean):
    def __init__(self, fn, name=None, dtype=None, **kwargs):
        super().__init__(name=name or getattr(fn, "__name__", "mean"), dtype=dtype)
        self._fn, self._fn_kwargs = fn, kwargs
        if _is_keras_loss(fn):     # as Keras 3: a wrapped loss is to be minimised
            self._direction = "down"

    def update_state(self, y_true, y_pred, sample_weight=None):
        # Keras 3: a prediction's mask joins the weights (0 / 1), so masked steps do not count
        mask = get_keras_mask(y_pred)
        values = self._fn(y_true, y_pred, **self._fn_kwargs)
        return super().update_state(values, losses.apply_mask(sample_weight, mask, self.dtype, "sum"))


def _is_keras_loss(fn):
    return (getattr(fn, "__module__", None) == losses.__name__ and callable(fn)) or isinstance(fn, losses.Loss)


def _aligned(y_true, y_pred):
    y_pred = convert_to_tensor(y_pred)
    y_true = math_ops.cast(convert_to_tensor(y_true), y_pred.dtype)
    return losses.squeeze_or_expand_to_same_rank(y_true, y_pred)


def accuracy(y_true, y_pred):
    y_true, y_pred = _aligned(y_true, y_pred)
    return math_ops.cast(math_ops.equal(y_true, y_pred), dtypes.float32)


def binary_accuracy(y_true, y_pred, threshold=0.5):
    y_true, y_pred = _aligned(y_true, y_pred)
    hit = math_ops.cast(math_ops.greater(y_pred, math_ops.cast(threshold, y_pred.dtype)), y_pred.dtype)
    # elementwise, as Keras 3's (the Mean of the metric reduces each sample)
    return math_ops.cast(math_ops.equal(y_true, hit), dtypes.float32)


def categorical_accuracy(y_true, y_pred):
    return math_ops.cast(math_ops.equal(reduction_ops.argmax(y_true, -1), reduction_ops.argmax(y_pred, -1)),
                         dtypes.float32)


def sparse_categorical_accuracy(y_true, y_pred):
    y_pred = convert_to_tensor(y_pred)
    y_true = convert_to_tensor(y_true)
    if y_true.shape.rank is not None and y_true.shape.rank == y_pred.shape.rank and y_true.shape.as_list()[-1] == 1:
        y_true = array_ops.squeeze(y_true, [-1])
    pred = reduction_ops.argmax(y_pred, -1)
    return math_ops.cast(math_ops.equal(math_ops.cast(y_true, pred.dtype), pred), dtypes.float32)


class Accuracy(MeanMetricWrapper):
    def __init__(self, name="accuracy", dtype=None):
        super().__init__(accuracy, name, dtype)


class BinaryAccuracy(MeanMetricWrapper):
    def __init__(self, name="binary_accuracy", dtype=None, threshold=0.5):
        super().__init__(binary_accuracy, name, dtype, threshold=threshold)


class CategoricalAccuracy(MeanMetricWrapper):
    def __init__(self, name="categorical_accuracy", dtype=None):
        super().__init__(categorical_accuracy, name, dtype)


class SparseCategoricalAccuracy(MeanMetricWrapper):
    def __init__(self, name="sparse_categorical_accuracy", dtype=None):
        super().__init__(sparse_categorical_accuracy, name, dtype)


class MeanSquaredError(MeanMetricWrapper):
    def __init__(self, name="mean_squared_error", dtype=None):
        super().__init__(losses.mean_squared_error, name, dtype)


class MeanAbsoluteError(MeanMetricWrapper):
    def __init__(self, name="mean_absolute_error", dtype=None):
        super().__init__(losses.mean_absolute_error, name, dtype)


def top_k_categorical_accuracy(y_true, y_pred, k=5):
    """Keras 3's: 1 where the true class (argmax of y_true) is among y_pred's k largest."""
    y_pred = convert_to_tensor(y_pred)
    return _in_top_k(reduction_ops.argmax(math_ops.cast(convert_to_tensor(y_true), y_pred.dtype), -1), y_pred, k)


def sparse_top_k_categorical_accuracy(y_true, y_pred, k=5):
    """Keras 3's: 1 where the integer label is among y_pred's k largest."""
    y_pred = convert_to_tensor(y_pred)
    y_true = convert_to_tensor(y_true)
    if y_true.shape.rank is not None and y_true.shape.rank == y_pred.shape.rank and y_true.shape.as_list()[-1] == 1:
        y_true = array_ops.squeeze(y_true, [-1])
    return _in_top_k(y_true, y_pred, k)


def _in_top_k(labels, y_pred, k):
    # in_top_k takes [batch, classes]: higher ranks go through flat, as Keras reshapes them
    shape = array_ops.shape(labels)
    flat_pred = array_ops.reshape(y_pred, [-1, y_pred.shape.as_list()[-1]])
    hits = math_composites.in_top_k(math_ops.cast(array_ops.reshape(labels, [-1]), dtypes.int32), flat_pred, k)
    return array_ops.reshape(math_ops.cast(hits, dtypes.float32), shape)


def cosine_similarity(y_true, y_pred, axis=-1):
    """Keras 3's metric: sum(normalize(t) * normalize(p), axis) (the loss is its negative)."""
    return -losses.cosine_similarity(y_true, y_pred, axis=axis)


class RootMeanSquaredError(Mean):
    """sqrt of the (weighted) mean of the per-sample mean squared errors."""

    def __init__(self, name="root_mean_squared_error", dtype=None):
        super().__init__(name, dtype)

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_true, y_pred = _aligned(math_ops.cast(convert_to_tensor(y_true), self.dtype),
                                  math_ops.cast(convert_to_tensor(y_pred), self.dtype))
        return super().update_state(math_ops.square(y_pred - y_true), sample_weight)

    def result(self):
        return math_ops.sqrt(super().result())


def _wrapper_class(class_name, fn, default_name, **defaults):
    """A Keras 3 MeanMetricWrapper class over ``fn``: (options..., name, dtype) as Keras's order."""
    params = [*defaults, "name", "dtype"]

    def __init__(self, *args, **kwargs):
        options = {**defaults, "name": default_name, "dtype": None, **dict(zip(params, args)), **kwargs}
        name, dtype = options.pop("name"), options.pop("dtype")
        MeanMetricWrapper.__init__(self, fn, name, dtype, **options)
        for key, value in options.items():
            setattr(self, key, value)
    return type(class_name, (MeanMetricWrapper,), {"__init__": __init__, "__module__": __name__})


TopKCategoricalAccuracy = _wrapper_class("TopKCategoricalAccuracy", top_k_categorical_accuracy,
                                         "top_k_categorical_accuracy", k=5)
SparseTopKCategoricalAccuracy = _wrapper_class("SparseTopKCategoricalAccuracy", sparse_top_k_categorical_accuracy,
                                               "sparse_top_k_categorical_accuracy", k=5)
MeanAbsolutePercentageError = _wrapper_class("MeanAbsolutePercentageError", losses.mean_absolute_percentage_error,
                                             "mean_absolute_percentage_error")
MeanSquaredLogarithmicError = _wrapper_class("MeanSquaredLogarithmicError", losses.mean_squared_logarithmic_error,
                                             "mean_squared_logarithmic_error")
LogCoshError = _wrapper_class("LogCoshError", losses.log_cosh, "logcosh")
CosineSimilarity = _wrapper_class("CosineSimilarity", cosine_similarity, "cosine_similarity", axis=-1)
KLDivergence = _wrapper_class("KLDivergence", losses.kl_divergence, "kl_divergence")
Poisson = _wrapper_class("Poisson", losses.poisson, "poisson")
Hinge = _wrapper_class("Hinge", losses.hinge, "hinge")
SquaredHinge = _wrapper_class("SquaredHinge", losses.squared_hinge, "squared_hinge")
CategoricalHinge = _wrapper_class("CategoricalHinge", losses.categorical_hinge, "categorical_hinge")
BinaryCrossentropy = _wrapper_class("BinaryCrossentropy", losses.binary_crossentropy, "binary_crossentropy",
                                    from_logits=False, label_smoothing=0.0)
CategoricalCrossentropy = _wrapper_class("CategoricalCrossentropy", losses.categorical_crossentropy,
                                         "categorical_crossentropy", from_logits=False, label_smoothing=0.0,
                                         axis=-1)
SparseCategoricalCrossentropy = _wrapper_class("SparseCategoricalCrossentropy",
                                               losses.sparse_categorical_crossentropy,
                                               "sparse_categorical_crossentropy", from_logits=False, axis=-1)


_CLASSES = (FalseNegatives, FalsePositives, Precision, Recall, TrueNegatives, TruePositives, Mean, Sum, Accuracy, BinaryAccuracy, CategoricalAccuracy, SparseCategoricalAccuracy, MeanSquaredError,
            MeanAbsoluteError, RootMeanSquaredError, TopKCategoricalAccuracy, SparseTopKCategoricalAccuracy,
            MeanAbsolutePercentageError, MeanSquaredLogarithmicError, LogCoshError, CosineSimilarity, KLDivergence,
            Poisson, Hinge, SquaredHinge, CategoricalHinge, BinaryCrossentropy, CategoricalCrossentropy,
            SparseCategoricalCrossentropy)
for _cls in (Accuracy, BinaryAccuracy, CategoricalAccuracy, SparseCategoricalAccuracy, TopKCategoricalAccuracy,
             SparseTopKCategoricalAccuracy, CosineSimilarity):
    _cls._direction = "up"
for _cls in (MeanSquaredError, MeanAbsoluteError, MeanAbsolutePercentageError, MeanSquaredLogarithmicError,
             RootMeanSquaredError, LogCoshError, BinaryCrossentropy, CategoricalCrossentropy,
             SparseCategoricalCrossentropy, Hinge, SquaredHinge, CategoricalHinge, KLDivergence, Poisson):
    _cls._direction = "down"

# Keras 3's names: each class by its name and its snake_case name, plus the short aliases
_BY_NAME = {**{cls.__name__: cls for cls in _CLASSES}, **{camel_to_snake(cls.__name__): cls for cls in _CLASSES},
            "acc": Accuracy, "bce": BinaryCrossentropy, "BCE": BinaryCrossentropy, "mse": MeanSquaredError,
            "MSE": MeanSquaredError, "mae": MeanAbsoluteError, "MAE": MeanAbsoluteError,
            "mape": MeanAbsolutePercentageError, "MAPE": MeanAbsolutePercentageError,
            "msle": MeanSquaredLogarithmicError, "MSLE": MeanSquaredLogarithmicError}


def get(identifier, y_true_shape=None, y_pred_shape=None):
    """A Metric for ``identifier``. "accuracy"/"acc" picks, as Keras does from the shapes,
    binary (one output unit), sparse categorical (labels one rank lower or last dim 1) or
    categorical accuracy, keeping the name given."""
    if isinstance(identifier, Metric):
        return identifier
    if isinstance(identifier, str):
        if identifier in ("accuracy", "acc") and y_pred_shape is not None:
            if y_pred_shape[-1] == 1:
                return BinaryAccuracy(name=identifier)
            if len(y_true_shape) == len(y_pred_shape) - 1 or y_true_shape[-1] == 1:
                return SparseCategoricalAccuracy(name=identifier)
            return CategoricalAccuracy(name=identifier)
        cls = _BY_NAME.get(identifier)
        if cls is None:
            raise ValueError(f"Could not interpret metric identifier: {identifier}")
        return cls(name=identifier) if identifier in ("mse", "mae") else cls()
    if isinstance(identifier, type) and issubclass(identifier, Metric):
        return identifier()
    if callable(identifier):
        return MeanMetricWrapper(identifier)
    raise ValueError(f"Could not interpret metric identifier: {identifier}")
