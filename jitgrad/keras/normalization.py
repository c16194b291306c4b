"""Keras 3's BatchNormalization, LayerNormalization and UnitNormalization over tf.nn.moments and
tf.nn.batch_normalization (ops/nn_ops.py), in Keras 3's order of operations."""
from .. import dtypes
from ..ops import array_ops, math_ops, nn_ops
from . import initializers
from .base_layer import Layer
from .losses import l2_normalize


def _compute_dtype(x):
    # Keras 3 normalises in at least float32: half-precision statistics lose too much
    return dtypes.float32 if x.dtype in (dtypes.float16, dtypes.bfloat16) else x.dtype


def _broadcastable(v, shape, dtype):
    return None if v is None else array_ops.reshape(math_ops.cast(v, dtype), shape)


def _add_gamma_and_beta(layer, shape):
    """The scale (gamma) and offset (beta) weights both normalisations make when asked."""
    if layer.scale:
        layer.gamma = layer.add_weight(shape=shape, initializer=layer.gamma_initializer, name="gamma",
                                       regularizer=layer.gamma_regularizer, constraint=layer.gamma_constraint)
    if layer.center:
        layer.beta = layer.add_weight(shape=shape, initializer=layer.beta_initializer, name="beta",
                                      regularizer=layer.beta_regularizer, constraint=layer.beta_constraint)


class BatchNormalization(Layer):
    _supports_masking = True     # Keras 3: the input's mask passes to the output
    """Normalises with the batch's statistics when called with ``training=True`` on a trainable
    layer (and moves ``moving_* = moving_* * momentum + batch_stat * (1 - momentum)``), else with
    the moving statistics: as in Keras 3, a frozen layer (``trainable=False``) runs in inference."""

    def __init__(self, axis=-1, momentum=0.99, epsilon=1e-3, center=True, scale=True, beta_initializer="zeros",
                 gamma_initializer="ones", moving_mean_initializer="zeros", moving_variance_initializer="ones",
                 beta_regularizer=None, gamma_regularizer=None, beta_constraint=None, gamma_constraint=None,
                 renorm=False, synchronized=False, **kwargs):
        super().__init__(**kwargs)
        if renorm:
            raise NotImplementedError("jitgrad's BatchNormalization has no renorm.")
        self.beta_regularizer, self.gamma_regularizer = beta_regularizer, gamma_regularizer
        self.beta_constraint, self.gamma_constraint = beta_constraint, gamma_constraint
        self.axis = int(axis)
        self.synchronized = synchronized     # one replica: the local statistics are the global ones
        self.momentum, self.epsilon = float(momentum), float(epsilon)
        self.center, self.scale = center, scale
        self.beta_initializer = initializers.get(beta_initializer)
        self.gamma_initializer = initializers.get(gamma_initializer)
        self.moving_mean_initializer = initializers.get(moving_mean_initializer)
        self.moving_variance_initializer = initializers.get(moving_variance_initializer)
        self.gamma = self.beta = self.moving_mean = self.moving_variance = None

    def build(self, input_shape):
        rank = len(input_shape)
        shape = (input_shape[self.axis],)      # an axis out of range: IndexError, as Keras 3
        _add_gamma_and_beta(self, shape)
        self.moving_mean = self.add_weight(shape=shape, initializer=self.moving_mean_initializer,
                                           trainable=False, name="moving_mean")
        self.moving_variance = self.add_weight(shape=shape, initializer=self.moving_variance_initializer,
                                               trainable=False, name="moving_variance")
        self._reduction_axes = [a for a in range(rank) if a != self.axis % rank]
        self._stat_shape = [input_shape[a] if a == self.axis % rank else 1 for a in range(rank)]
        self.built = True

    def call(self, inputs, training=None):
        x = math_ops.cast(inputs, _compute_dtype(inputs))
        if training and self.trainable:
            mean, variance = nn_ops.moments(x, self._reduction_axes)
            m = self.momentum
            self.moving_mean.assign(math_ops.cast(self.moving_mean, x.dtype) * m + mean * (1.0 - m))
            self.moving_variance.assign(math_ops.cast(self.moving_variance, x.dtype) * m + variance * (1.0 - m))
        else:
            mean, variance = self.moving_mean, self.moving_variance
        shape = self._stat_shape
        out = nn_ops.batch_normalization(x, _broadcastable(mean, shape, x.dtype),
                                         _broadcastable(variance, shape, x.dtype),
                                         _broadcastable(self.beta, shape, x.dtype),
                                         _broadcastable(self.gamma, shape, x.dtype), self.epsilon)
        return math_ops.cast(out, self.dtype)

    def compute_output_shape(self, input_shape):
        if not -len(input_shape) <= self.axis < len(input_shape):
            raise ValueError(f"Axis {self.axis} is out of bounds for input shape {tuple(input_shape)}. "
                             f"Received: axis={self.axis}")
        return input_shape


class LayerNormalization(Layer):
    _supports_masking = True     # Keras 3: the input's mask passes to the output
    """Normalises each sample over ``axis`` (an int or a list of ints) with its own mean and
    variance; gamma / beta have the shape of those axes (sorted, as Keras 3 sorts them)."""

    def __init__(self, axis=-1, epsilon=1e-3, center=True, scale=True, beta_initializer="zeros",
                 gamma_initializer="ones", beta_regularizer=None, gamma_regularizer=None, beta_constraint=None,
                 gamma_constraint=None, **kwargs):
        if kwargs.pop("rms_scaling", False):
            raise NotImplementedError("jitgrad's LayerNormalization has no rms_scaling (deprecated in Keras 3).")
        super().__init__(**kwargs)
        self.beta_regularizer, self.gamma_regularizer = beta_regularizer, gamma_regularizer
        self.beta_constraint, self.gamma_constraint = beta_constraint, gamma_constraint
        if isinstance(axis, (list, tuple)):
            self.axis = list(axis)
        elif isinstance(axis, int):
            self.axis = axis
        else:
            raise TypeError("Expected an int or a list/tuple of ints for the argument 'axis', but received: %r"
                            % axis)
        self.epsilon, self.center, self.scale = epsilon, center, scale
        self.beta_initializer = initializers.get(beta_initializer)
        self.gamma_initializer = initializers.get(gamma_initializer)
        self.gamma = self.beta = None

    def build(self, input_shape):
        self.axis = sorted(self.axis) if isinstance(self.axis, list) else [self.axis]
        shape = tuple(input_shape[a] for a in self.axis)
        _add_gamma_and_beta(self, shape)
        rank = len(input_shape)
        normalized = {a % rank for a in self.axis}
        self._param_shape = [input_shape[a] if a in normalized else 1 for a in range(rank)]
        self.built = True

    def call(self, inputs):
        x = math_ops.cast(inputs, _compute_dtype(inputs))
        mean, variance = nn_ops.moments(x, self.axis, keepdims=True)
        # x * inv + (beta - mean * inv), inv = rsqrt(variance + epsilon) * gamma: Keras 3's formula
        out = nn_ops.batch_normalization(x, mean, variance, _broadcastable(self.beta, self._param_shape, x.dtype),
                                         _broadcastable(self.gamma, self._param_shape, x.dtype), self.epsilon)
        return math_ops.cast(out, self.dtype)

    def compute_output_shape(self, input_shape):
        axes = self.axis if isinstance(self.axis, list) else [self.axis]
        for a in axes:
            if a >= len(input_shape) or a < -len(input_shape):
                raise ValueError(f"Axis {a} is out of bounds for input shape {input_shape}. "
                                 f"Received: axis={self.axis}")
        return input_shape


class UnitNormalization(Layer):
    """Keras 3's: ``inputs`` scaled to unit L2 norm along ``axis`` (ops.normalize with epsilon
    1e-12: x * min(rsqrt(sum(x^2)), 1e12), so a zero vector stays zero)."""
    _supports_masking = True

    def __init__(self, axis=-1, **kwargs):
        super().__init__(**kwargs)
        if isinstance(axis, (list, tuple)):
            self.axis = list(axis)
        elif isinstance(axis, int):
            self.axis = axis
        else:
            raise TypeError(f"Invalid value for `axis` argument: expected an int or a list/tuple of ints. Received: "
                            f"axis={axis}")

    def call(self, inputs):
        x = math_ops.cast(inputs, _compute_dtype(inputs))
        return math_ops.cast(l2_normalize(x, self.axis, 1e-12), self.dtype)

    def compute_output_shape(self, input_shape):
        return input_shape
