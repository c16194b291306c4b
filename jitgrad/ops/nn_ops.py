"""Softmax family, written as compositions of primitive ops so the compiler
fuses them and their gradients come from the primitives' rules (except
softmax_cross_entropy_with_logits, whose gradient is TF's: SoftmaxXentLoss)."""
import numpy as np

from ..convert import convert_all
from .array_ops import expand_dims
from .math_ops import (add, exp, greater_equal, identity, is_finite, log, log1p, maximum, multiply, negative, realdiv,
                       rsqrt, sigmoid, softplus, square, stop_gradient, subtract, where, zeros_like)
from .reduction_ops import _static_int, reduce_max, reduce_sum
from .registry import apply_op, register


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


def _xent_grad(op, g):
    """TF's gradient of its fused SoftmaxCrossEntropyWithLogits (nn_grad.py):
    d/dlogits = g[..., None] * (softmax(logits) - labels) -- the kernel's backprop
    output, which is not the exact sum(labels) * softmax - labels when the labels
    do not sum to 1 -- and d/dlabels = g[..., None] * -log_softmax(logits).
    Differentiating d/dlogits again, TF reaches logits only (through softmax;
    the labels are a constant there): hence stop_gradient(labels)."""
    _, logits, labels = op.inputs
    axis = op.get_attr("axis")
    rank = logits.shape.rank
    if rank is not None:
        axis %= rank
    ge = expand_dims(g, axis)
    return [None, multiply(ge, subtract(softmax(logits, axis), stop_gradient(labels))),
            multiply(ge, negative(log_softmax(logits, axis)))]


# Value: its first input (the loss, computed from logits and labels by the
# primitives), so at run time it is an identity (passes/stop_gradient.py removes
# it); the gradient is TF's (_xent_grad), never the primitives'.
register("SoftmaxXentLoss", infer=lambda shapes, dts, attrs: [(shapes[0], dts[0])],
         kernel=lambda attrs, loss, logits, labels: loss, grad=_xent_grad, kind="other")


def softmax_cross_entropy_with_logits(labels=None, logits=None, axis=-1, name=None):
    if labels is None or logits is None:
        raise ValueError("Both labels and logits must be provided.")
    logits, labels = convert_all([logits, labels])
    if labels.shape.dims is not None and logits.shape.dims is not None and \
            not labels.shape.is_compatible_with(logits.shape):
        raise ValueError(f"labels and logits must have the same shape ({labels.shape} vs {logits.shape})")
    loss = negative(reduce_sum(multiply(labels, log_softmax(logits, axis)), axis))
    return apply_op("SoftmaxXentLoss", [loss, logits, labels], {"axis": _static_int(axis, "the axis")},
                    name=name or "softmax_cross_entropy_with_logits")


def sparse_softmax_cross_entropy_with_logits(labels=None, logits=None, name=None):
    from .array_ops import gather
    from ..convert import convert_to_tensor, graph_of
    (logits,) = convert_all([logits])
    n = logits.shape[-1] if logits.shape.rank else None
    if n is None:
        raise ValueError("sparse_softmax_cross_entropy_with_logits needs a known number of classes")
    # One-hot rows gathered from an identity table (not tf.one_hot, whose
    # out-of-range rows are all zeros): a label outside [0, n) raises, as TF's
    # CPU kernel does ("Received a label value of 5 which is outside the valid range").
    g = graph_of([labels, logits])
    onehot = gather(convert_to_tensor(np.eye(n, dtype=logits.dtype.np), graph=g), labels, axis=0)
    return softmax_cross_entropy_with_logits(labels=onehot, logits=logits, name=name)


def reduce_logsumexp(input_tensor, axis=None, keepdims=False, name=None):
    """log(sum(exp(x))) computed stably: the max shift is a constant for differentiation.

    As TF's math_ops.reduce_logsumexp, a non-finite max (a row of -inf, or one
    holding +inf) shifts by 0 instead: such rows give -inf / +inf, not NaN."""
    (x,) = convert_all([input_tensor])
    raw_max = reduce_max(x, axis, keepdims=True)
    m = stop_gradient(where(is_finite(raw_max), raw_max, zeros_like(raw_max)))
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
    # Built with selects exactly as TF's nn_impl does (not relu/abs): at logits == 0
    # (+0 or -0) the cond branch is taken, so d/dlogits is 1 - z - 0.5, TF's value.
    cond = greater_equal(logits, zeros_like(logits))
    relu_logits = where(cond, logits, zeros_like(logits))
    neg_abs_logits = where(cond, negative(logits), logits)
    return add(subtract(relu_logits, multiply(logits, labels)), log1p(exp(neg_abs_logits)),
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


def l2_normalize(x, axis=None, epsilon=1e-12, name=None, dim=None):
    """``tf.math.l2_normalize`` / ``tf.nn.l2_normalize``, as TF's nn_impl:
    x * rsqrt(maximum(reduce_sum(square(x), axis, keepdims=True), epsilon)).
    ``dim`` is TF's deprecated alias of ``axis``."""
    if dim is not None:
        if axis is not None:
            raise ValueError("Cannot specify both 'axis' and 'dim'")
        axis = dim
    (x,) = convert_all([x])
    square_sum = reduce_sum(square(x), axis, keepdims=True)
    x_inv_norm = rsqrt(maximum(square_sum, epsilon))
    return multiply(x, x_inv_norm, name=name or "l2_normalize")
