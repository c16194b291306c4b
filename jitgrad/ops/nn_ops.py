"""Softmax family, written as compositions of primitive ops so the compiler
fuses them and their gradients come from the primitives' rules."""
from ..convert import convert_all
from .math_ops import exp, log, multiply, negative, stop_gradient, subtract, realdiv
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
