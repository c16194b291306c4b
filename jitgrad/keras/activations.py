"""``tf.keras.activations``: the functions (Keras 3's signatures and TF-backend formulas) and
``get(identifier)``."""
import weakref

from ..convert import convert_to_tensor
from ..ops import array_ops, math_ops, nn_ops

# Keras's TF backend keeps the logits on sigmoid / softmax outputs (`_keras_logits`), and its
# probability crossentropies compute from them (no clipping at eps): id(output) -> logits,
# dropped with the output.
_LOGITS_OF = {}


def _with_logits(output, logits):
    _LOGITS_OF[id(output)] = logits
    weakref.finalize(output, _LOGITS_OF.pop, id(output), None)
    return output


def logits_of(output):
    """The logits a Keras sigmoid / softmax output was computed from, else None."""
    return _LOGITS_OF.get(id(output))


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
    x = convert_to_tensor(x)
    return _with_logits(math_ops.sigmoid(x), x)


def tanh(x):
    return math_ops.tanh(x)


def softmax(x, axis=-1):
    x = convert_to_tensor(x)
    return _with_logits(nn_ops.softmax(x, axis=axis), x)


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


def celu(x, alpha=1.0):
    return math_ops.maximum(x, 0.0) + alpha * math_ops.expm1(math_ops.minimum(x, 0.0) / alpha)


def glu(x, axis=-1):
    x = convert_to_tensor(x)
    if x.shape.rank is not None and x.shape[axis] is not None and x.shape[axis] % 2:
        raise ValueError(f"axis size must be divisible by 2. Received: x.shape={x.shape} with axis={axis}")
    x1, x2 = array_ops.split(x, 2, axis=axis)
    return x1 * math_ops.sigmoid(x2)


def hard_sigmoid(x):
    return math_ops.relu6(convert_to_tensor(x) + 3.0) / 6.0


def hard_silu(x):
    return x * hard_sigmoid(x)


hard_swish = hard_silu


def hard_tanh(x):
    return math_ops.clip_by_value(x, -1.0, 1.0)


def hard_shrink(x, threshold=0.5):
    x = convert_to_tensor(x)
    return math_ops.where(math_ops.abs(x) > threshold, x, 0.0)


def soft_shrink(x, threshold=0.5):
    x = convert_to_tensor(x)
    return math_ops.where(x > threshold, x - threshold, math_ops.where(x < -threshold, x + threshold, 0.0))


def tanh_shrink(x):
    return x - math_ops.tanh(x)


def threshold(x, threshold, default_value):  # noqa: A002 - Keras's names
    x = convert_to_tensor(x)
    return math_ops.where(x > threshold, x, default_value)


def sparse_plus(x):
    x = convert_to_tensor(x)
    return math_ops.where(x <= -1.0, 0.0, math_ops.where(x < 1.0, 0.25 * math_ops.square(x + 1.0), x))


def sparse_sigmoid(x):
    x = convert_to_tensor(x)
    return math_ops.where(x <= -1.0, 0.0, math_ops.where(x >= 1.0, 1.0, 0.5 * (x + 1.0)))


def squareplus(x, b=4):
    x = convert_to_tensor(x)
    return (x + math_ops.sqrt(math_ops.square(x) + b)) / 2.0


def log_sigmoid(x):
    return nn_ops.log_sigmoid(x)


def mish(x):
    return x * math_ops.tanh(math_ops.softplus(x))


_BY_NAME = {f.__name__: f for f in (linear, relu, relu6, leaky_relu, elu, selu, sigmoid, tanh, softmax,
                                     log_softmax, softplus, softsign, silu, gelu, exponential, celu, glu,
                                     hard_sigmoid, hard_silu, hard_tanh, hard_shrink, soft_shrink, tanh_shrink,
                                     threshold, sparse_plus, sparse_sigmoid, squareplus, log_sigmoid, mish)}
_BY_NAME["swish"], _BY_NAME["hard_swish"] = swish, hard_swish


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
