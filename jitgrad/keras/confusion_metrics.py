"""Keras 3's confusion-matrix metrics: TruePositives / FalsePositives / TrueNegatives /
FalseNegatives, Precision and Recall. One counter per threshold, updated as Keras 3's
metrics_utils.update_confusion_matrix_variables does: a prediction is positive when it is
strictly above the threshold, a label when it is nonzero; ``top_k`` keeps each row's k largest
predictions (the others become -1e10), ``class_id`` keeps one column."""
import numpy as np

from ..convert import convert_to_tensor
from ..ops import array_ops, math_ops, reduction_ops, sort_ops
from . import losses
from .metric_base import Metric

NEG_INF = -1e10


def _thresholds(thresholds, default):
    """(list of floats, whether the result is one number) -- Keras's parse_init_thresholds."""
    if thresholds is None:
        return [default], True
    values = [thresholds] if np.isscalar(thresholds) else list(thresholds)
    for t in values:
        if not (isinstance(t, (int, float, np.floating, np.integer)) and 0 <= t <= 1 or t == NEG_INF):
            raise ValueError(f"Threshold values must be in [0, 1]. Received: {values}")
    return [float(t) for t in values], len(values) == 1


def _filter_top_k(x, k):
    _, idx = sort_ops.top_k(x, k)
    keep = reduction_ops.reduce_sum(array_ops.one_hot(idx, x.shape.as_list()[-1], dtype=x.dtype), axis=-2)
    return x * keep + NEG_INF * (1.0 - keep)


def confusion_counts(y_true, y_pred, thresholds, sample_weight, top_k, class_id, dtype):
    """The (tp, fp, tn, fn) counts of one batch, each of shape (len(thresholds),)."""
    y_true = math_ops.cast(convert_to_tensor(y_true), dtype)
    y_pred = math_ops.cast(convert_to_tensor(y_pred), dtype)
    y_pred, y_true = losses.squeeze_or_expand_to_same_rank(y_pred, y_true)
    if top_k is not None:
        y_pred = _filter_top_k(y_pred, top_k)
    if class_id is not None:
        y_true, y_pred = y_true[..., class_id:class_id + 1], y_pred[..., class_id:class_id + 1]
    weights = None
    if sample_weight is not None:
        weights = math_ops.cast(convert_to_tensor(sample_weight), dtype)
        while weights.shape.rank is not None and weights.shape.rank < y_pred.shape.rank:
            weights = array_ops.expand_dims(weights, -1)     # a weight per sample covers its row
        weights = array_ops.reshape(array_ops.broadcast_to(weights, array_ops.shape(y_pred)), [1, -1])
    preds = array_ops.reshape(y_pred, [1, -1])
    label_pos = array_ops.reshape(math_ops.not_equal(y_true, 0.0), [1, -1])
    pred_pos = math_ops.greater(preds, array_ops.reshape(convert_to_tensor(np.array(thresholds, dtype.np)),
                                                         [-1, 1]))
    label_pos = array_ops.broadcast_to(label_pos, array_ops.shape(pred_pos))      # one row per threshold
    label_neg, pred_neg = math_ops.logical_not(label_pos), math_ops.logical_not(pred_pos)

    def count(a, b):
        hits = math_ops.cast(math_ops.logical_and(a, b), dtype)
        if weights is not None:
            hits = hits * weights
        return reduction_ops.reduce_sum(hits, axis=1)
    return (count(label_pos, pred_pos), count(label_neg, pred_pos), count(label_neg, pred_neg),
            count(label_pos, pred_neg))


class _ConfusionMetric(Metric):
    _kinds = ()          # which of tp, fp, tn, fn the metric keeps

    def __init__(self, thresholds=None, top_k=None, class_id=None, name=None, dtype=None):
        super().__init__(name, dtype)
        self.init_thresholds, self.top_k, self.class_id = thresholds, top_k, class_id
        self.thresholds, self._scalar = _thresholds(thresholds, 0.5 if top_k is None else NEG_INF)
        self._counters = {k: self.add_variable(shape=(len(self.thresholds),), name=k) for k in self._kinds}

    def update_state(self, y_true, y_pred, sample_weight=None):
        counts = dict(zip(("true_positives", "false_positives", "true_negatives", "false_negatives"),
                          confusion_counts(y_true, y_pred, self.thresholds, sample_weight, self.top_k,
                                           self.class_id, self.dtype)))
        for kind, var in self._counters.items():
            var.assign_add(counts[kind])

    def _value(self):
        return math_ops.identity(self._counters[self._kinds[0]])

    def result(self):
        value = self._value()
        return value[0] if self._scalar else value


def _counter_class(class_name, kind, default_name):
    def __init__(self, thresholds=None, name=None, dtype=None):
        _ConfusionMetric.__init__(self, thresholds, name=name or default_name, dtype=dtype)
    return type(class_name, (_ConfusionMetric,), {"__init__": __init__, "_kinds": (kind,), "__module__": __name__})


TruePositives = _counter_class("TruePositives", "true_positives", "true_positives")
FalsePositives = _counter_class("FalsePositives", "false_positives", "false_positives")
TrueNegatives = _counter_class("TrueNegatives", "true_negatives", "true_negatives")
FalseNegatives = _counter_class("FalseNegatives", "false_negatives", "false_negatives")


class Precision(_ConfusionMetric):
    """tp / (tp + fp) per threshold (0 when nothing was predicted positive)."""
    _kinds = ("true_positives", "false_positives")

    def __init__(self, thresholds=None, top_k=None, class_id=None, name="precision", dtype=None):
        super().__init__(thresholds, top_k, class_id, name, dtype)

    def _value(self):
        tp, fp = self._counters["true_positives"], self._counters["false_positives"]
        return math_ops.divide_no_nan(tp, tp + fp)


class Recall(_ConfusionMetric):
    """tp / (tp + fn) per threshold (0 when there was no positive label)."""
    _kinds = ("true_positives", "false_negatives")

    def __init__(self, thresholds=None, top_k=None, class_id=None, name="recall", dtype=None):
        super().__init__(thresholds, top_k, class_id, name, dtype)

    def _value(self):
        tp, fn = self._counters["true_positives"], self._counters["false_negatives"]
        return math_ops.divide_no_nan(tp, tp + fn)


CLASSES = (TruePositives, FalsePositives, TrueNegatives, FalseNegatives, Precision, Recall)
