"""Softmax family, written as compositions of primitive ops so the compiler
fuses them and their gradients come from the primitives' rules."""
from ..convert import convert_all
from .math_ops import (abs as abs_, add, exp, identity, log, log1p, multiply, negative, realdiv, relu, sigmoid,
                       softplus, square, stop_gradient, subtract)
from .reduction_ops import reduce_max, reduce_sum


def _shifted(logits, axis):
    # Subtracting the max changes nothing mathematically, so it is a constant
    # for differentiation; stop_gradient keeps its (exactly zero) gradient out.
    return subtract(logits, stop_gradient(reduce_max(logits, axis, keepdims=True)))


def softmax(logits, axis=None, name=None):
    (x,) = convert_all([logits])
    axis = -1 if axis is None else axis
    e = exp(_shifted(x, axis))
    return realdiv(e, reduce_sum(e, axis, keepdims=True), name=name or "Softmax")


def log_softmax(logits, axis=None, name=None):
    (x,) = convert_all([logits])
    axis = -1 if axis is None else axis
    s = _shifted(x, axis)
    return subtract(s, log(reduce_sum(exp(s), axis, keepdims=True)), name=name or "LogSoftmax")


def softmax_cross_entropy_with_logits(labels=None, logits=None, axis=-1, name=None):
    if labels is None or logits is None:
        raise ValueError("Both labels and logits must be provided.")
    logits, labels = convert_all([logits, labels])
    if labels.shape.dims is not None and logits.shape.dims is not None and \
            not labels.shape.is_compatible_with(logits.shape):
        raise ValueError(f"labels and logits must have the same shape ({labels.shape} vs {logits.shape})")
    return negative(reduce_sum(multiply(labels, log_softmax(logits, axis)), axis),
                    name=name or "softmax_cross_entropy_with_logits")


def sparse_softmax_cross_entropy_with_logits(labels=None, logits=None, name=None):
    from .array_ops import one_hot
    (logits,) = convert_all([logits])
    n = logits.shape[-1] if logits.shape.rank else None
    if n is None:
        raise ValueError("sparse_softmax_cross_entropy_with_logits needs a known number of classes")
    onehot = one_hot(labels, n, dtype=logits.dtype)
    return softmax_cross_entropy_with_logits(labels=onehot, logits=logits, name=name)


def reduce_logsumexp(input_tensor, axis=None, keepdims=False, name=None):
    """log(sum(exp(x))) computed stably: the max shift is a constant for differentiation."""
    (x,) = convert_all([input_tensor])
    m = stop_gradient(reduce_max(x, axis, keepdims=True))
    out = add(log(reduce_sum(exp(subtract(x, m)), axis, keepdims=True)), m)
    if not keepdims:
        out = reduce_sum(out, axis, keepdims=False)  # drops the kept size-1 axes; values unchanged
    return identity(out, name=name or "ReduceLogSumExp")


def sigmoid_cross_entropy_with_logits(labels=None, logits=None, name=None):
    """TF's stable form: max(x, 0) - x * z + log(1 + exp(-|x|))."""
    if labels is None or logits is None:
        raise ValueError("Both labels and logits must be provided.")
    logits, labels = convert_all([logits, labels])
    if not labels.shape.is_compatible_with(logits.shape):
        raise ValueError(f"logits and labels must have the same shape ({logits.shape} vs {labels.shape})")
    return add(subtract(relu(logits), multiply(logits, labels)), log1p(exp(negative(abs_(logits)))),
               name=name or "logistic_loss")


def l2_loss(t, name=None):
    """sum(t ** 2) / 2"""
    (x,) = convert_all([t])
    return multiply(reduce_sum(square(x)), 0.5, name=name or "L2Loss")


def bias_add(value, bias, data_format=None, name=None):
    (v, b) = convert_all([value, bias])
    if b.shape.rank not in (None, 1):
        raise ValueError(f"bias must be 1-D, got shape {b.shape}")
    if data_format not in (None, "NHWC", "N...C"):
        raise ValueError("jitgrad's bias_add supports channels-last data only")
    if v.shape.rank is not None and v.shape.rank < 2:
        raise ValueError(f"value must have rank >= 2, got shape {v.shape}")
    return add(v, b, name=name or "BiasAdd")


def log_sigmoid(x, name=None):
    """-softplus(-x)"""
    return negative(softplus(negative(x)), name=name or "LogSigmoid")


def silu(features, beta=1.0, name=None):
    (x,) = convert_all([features])
    return multiply(x, sigmoid(multiply(x, beta) if beta != 1.0 else x), name=name or "silu")
