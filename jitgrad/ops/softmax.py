"""tf.nn.softmax and tf.nn.log_softmax: values from primitive ops (the compiler fuses
them into native loops), gradients from TF's fused ops' formulas (nn_grad.py):

    Softmax:    (g - reduce_sum(g * softmax, axis, keepdims=True)) * softmax
    LogSoftmax: g - reduce_sum(g, axis, keepdims=True) * exp(log_softmax)

The primitives' chain rule gives the same derivative with another cancellation (in
bfloat16 8 ulp off TF's result: tf_fuzz seed 160153). The value is carried by a
marker op ("Softmax" / "LogSoftmax", TF's op types) that is its first input at run
time (the stop_gradient pass removes it, as SoftmaxXentLoss in nn_ops.py) and whose
gradient is the formula, reading the softmax from the op's output as TF's does: so
higher derivatives differentiate the formula, through this gradient again, as TF.
TF moves a softmax axis other than the last one there by transposes, softmaxes the last
axis and moves it back; transposes are exact, so reducing over ``axis`` in place is the
same arithmetic."""
from ..convert import convert_all
from .math_ops import exp, log, multiply, realdiv, stop_gradient, subtract
from .reduction_ops import static_int, reduce_max, reduce_sum
from .registry import apply_op, register


def shifted(logits, axis):
    """logits - max(logits, axis): the max changes nothing mathematically, so it is a
    constant for differentiation; stop_gradient keeps its (exactly zero) gradient out."""
    return subtract(logits, stop_gradient(reduce_max(logits, axis, keepdims=True)))


def _axis(x, axis):
    axis = -1 if axis is None else static_int(axis, "the axis")
    rank = x.shape.rank
    return axis % rank if rank and -rank <= axis < rank else axis   # (out of range: the reductions raise)


def softmax(logits, axis=None, name=None):
    (x,) = convert_all([logits])
    axis = _axis(x, axis)
    e = exp(shifted(x, axis))
    value = realdiv(e, reduce_sum(e, axis, keepdims=True))
    return apply_op("Softmax", [value, x], {"axis": axis}, name=name or "Softmax")


def log_softmax(logits, axis=None, name=None):
    (x,) = convert_all([logits])
    axis = _axis(x, axis)
    s = shifted(x, axis)
    value = subtract(s, log(reduce_sum(exp(s), axis, keepdims=True)))
    return apply_op("LogSoftmax", [value, x], {"axis": axis}, name=name or "LogSoftmax")


def _softmax_grad(op, g):
    sm = op.outputs[0]
    sum_channels = reduce_sum(multiply(g, sm), op.attrs["axis"], keepdims=True)
    return [None, multiply(subtract(g, sum_channels), sm)]


def _log_softmax_grad(op, g):
    sm = exp(op.outputs[0])
    return [None, subtract(g, multiply(reduce_sum(g, op.attrs["axis"], keepdims=True), sm))]


def _value(attrs, value, logits):
    return value


# Inputs: the value (computed by the primitives: no gradient flows into them) and the
# logits (only the gradient reads them). identity=True: a copy of the value at run time.
for _type, _grad in (("Softmax", _softmax_grad), ("LogSoftmax", _log_softmax_grad)):
    register(_type, infer=lambda shapes, dts, attrs: [(shapes[0], dts[0])], kernel=_value, grad=_grad,
             kind="other", identity=True, lowering="none")
