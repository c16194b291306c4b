"""``tf.keras.activations``: the functions (Keras 3's signatures) and ``get(identifier)``."""
from ..convert import convert_to_tensor
from ..ops import math_ops, nn_ops


def linear(x):
    return x


def relu(x, negative_slope=0.0, max_value=None, threshold=0.0):
    """Keras 3's relu, composed as its static_call: x above ``threshold`` (else 0), clipped at
    ``max_value``, minus ``negative_slope * relu(threshold - x)``."""
    if negative_slope == 0.0 and max_value is None and threshold == 0:
        return math_ops.relu(x)
    if negative_slope != 0.0 and max_value is None and threshold == 0:
        return math_ops.leaky_relu(x, alpha=negative_slope)
    x = convert_to_tensor(x)
    if negative_slope != 0.0:
        negative_part = math_ops.relu(-x + threshold) if threshold != 0 else math_ops.relu(-x)
    if threshold != 0:
        x = math_ops.where(math_ops.greater(x, math_ops.cast(threshold, x.dtype)), x, math_ops.zeros_like(x))
    elif max_value == 6:
        x, max_value = math_ops.relu6(x), None
    else:
        x = math_ops.relu(x)
    if max_value is not None:
        x = math_ops.clip_by_value(x, math_ops.cast(0.0, x.dtype), math_ops.cast(max_value, x.dtype))
    if negative_slope != 0.0:
        x = x - negative_slope * negative_part
    return x


def relu6(x):
    return math_ops.relu6(x)


def leaky_relu(x, negative_slope=0.2):
    return math_ops.leaky_relu(x, alpha=negative_slope)


def elu(x, alpha=1.0):
    if alpha != 1.0:
        return math_ops.where(math_ops.greater(x, 0.0), math_ops.elu(x), alpha * math_ops.elu(x))
    return math_ops.elu(x)


def selu(x):
    return nn_ops.selu(x)


def sigmoid(x):
    return math_ops.sigmoid(x)


def tanh(x):
    return math_ops.tanh(x)


def softmax(x, axis=-1):
    return nn_ops.softmax(x, axis=axis)


def log_softmax(x, axis=-1):
    return nn_ops.log_softmax(x, axis=axis)


def softplus(x):
    return math_ops.softplus(x)


def softsign(x):
    return nn_ops.softsign(x)


def silu(x):
    return nn_ops.silu(x)


swish = silu


def gelu(x, approximate=False):
    return nn_ops.gelu(x, approximate=approximate)


def exponential(x):
    return math_ops.exp(x)


_BY_NAME = {f.__name__: f for f in (linear, relu, relu6, leaky_relu, elu, selu, sigmoid, tanh, softmax,
                                     log_softmax, softplus, softsign, silu, gelu, exponential)}
_BY_NAME["swish"] = swish


def get(identifier):
    """None -> linear; a name -> the function; a callable -> itself."""
    if identifier is None:
        return linear
    if callable(identifier):
        return identifier
    if isinstance(identifier, str) and identifier in _BY_NAME:
        return _BY_NAME[identifier]
    raise ValueError(f"Could not interpret activation function identifier: {identifier}")


def serialize(activation):
    return getattr(activation, "__name__", str(activation))
