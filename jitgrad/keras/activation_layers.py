"""Keras 3's activation layers: ReLU, LeakyReLU, Softmax, ELU and PReLU (the one
with a weight, ``alpha``)."""
import warnings

from .. import dtypes
from ..ops import math_ops, nn_ops
from . import activations, initializers
from .base_layer import Layer


class _Elementwise(Layer):
    _supports_masking = True     # Keras 3: the input's mask passes to the output

    def compute_output_shape(self, input_shape):
        return input_shape


class ReLU(_Elementwise):
    def __init__(self, max_value=None, negative_slope=0.0, threshold=0.0, **kwargs):
        super().__init__(**kwargs)
        if max_value is not None and max_value < 0.0:
            raise ValueError(f"max_value of a ReLU layer cannot be a negative value. Received: max_value={max_value}")
        if negative_slope is None or negative_slope < 0.0:
            raise ValueError(f"negative_slope of a ReLU layer cannot be None or a negative value. Received: "
                             f"negative_slope={negative_slope}")
        if threshold is None or threshold < 0.0:
            raise ValueError(f"threshold of a ReLU layer cannot be None or a negative value. Received: "
                             f"threshold={threshold}")
        self.max_value, self.negative_slope, self.threshold = max_value, negative_slope, threshold

    def call(self, inputs):
        return activations.relu(inputs, negative_slope=self.negative_slope, max_value=self.max_value,
                                threshold=self.threshold)


class LeakyReLU(_Elementwise):
    """Keras 3 names the slope ``negative_slope`` (default 0.3; the activation function's is 0.2);
    the old ``alpha`` still works, with Keras's deprecation warning."""

    def __init__(self, negative_slope=0.3, **kwargs):
        if "alpha" in kwargs:
            negative_slope = kwargs.pop("alpha")
            warnings.warn("Argument `alpha` is deprecated. Use `negative_slope` instead.")
        super().__init__(**kwargs)
        if negative_slope is None or negative_slope < 0:
            raise ValueError(f"The negative_slope value of a Leaky ReLU layer cannot be None or negative value. "
                             f"Expected a float. Received: negative_slope={negative_slope}")
        self.negative_slope = negative_slope

    def call(self, inputs):
        return activations.leaky_relu(inputs, negative_slope=self.negative_slope)


class ELU(_Elementwise):
    def __init__(self, alpha=1.0, **kwargs):
        super().__init__(**kwargs)
        self.alpha = alpha

    def call(self, inputs):
        return activations.elu(inputs, alpha=self.alpha)


def _large_negative(dtype):
    # what Keras 3 puts at masked positions before the softmax (float16's range ends near 6.5e4)
    return -3e4 if dtype == dtypes.float16 else -1e9


class Softmax(_Elementwise):
    """Softmax over ``axis`` (an int or several); a ``mask`` (True / > 0.5 = keep) sends the
    masked positions to a large negative number first and zeroes them after, as Keras 3."""

    def __init__(self, axis=-1, **kwargs):
        super().__init__(**kwargs)
        self.axis = axis

    def call(self, inputs, mask=None):
        if mask is not None:
            mask = self._convert_input(mask)
            if not mask.dtype.is_bool:
                mask = math_ops.greater(mask, math_ops.cast(0.5, mask.dtype))
            inputs = math_ops.where(mask, inputs, math_ops.cast(_large_negative(inputs.dtype), inputs.dtype))
        if isinstance(self.axis, (tuple, list)) and len(self.axis) > 1:
            axis = list(self.axis)
            out = math_ops.exp(inputs - nn_ops.reduce_logsumexp(inputs, axis=axis, keepdims=True))
        else:
            axis = self.axis[0] if isinstance(self.axis, (tuple, list)) else self.axis
            out = activations.softmax(inputs, axis=axis)
        if mask is not None:
            out = math_ops.where(mask, out, math_ops.zeros_like(out))
        return out


class PReLU(_Elementwise):
    """``relu(x) - alpha * relu(-x)`` with a learned ``alpha`` per input position (per-sample
    shape), shared (size 1) along ``shared_axes``."""

    def __init__(self, alpha_initializer="Zeros", alpha_regularizer=None, alpha_constraint=None, shared_axes=None,
                 **kwargs):
        super().__init__(**kwargs)
        self.alpha_regularizer, self.alpha_constraint = alpha_regularizer, alpha_constraint
        self.alpha_initializer = initializers.get(alpha_initializer)
        self.shared_axes = None if shared_axes is None else \
            list(shared_axes) if isinstance(shared_axes, (list, tuple)) else [shared_axes]

    def build(self, input_shape):
        param_shape = list(input_shape[1:])
        for i in self.shared_axes or ():
            param_shape[i - 1] = 1
        self.alpha = self.add_weight(shape=param_shape, initializer=self.alpha_initializer, name="alpha",
                                     regularizer=self.alpha_regularizer, constraint=self.alpha_constraint)
        self.built = True

    def call(self, inputs):
        return math_ops.relu(inputs) + (-self.alpha * math_ops.relu(-inputs))
