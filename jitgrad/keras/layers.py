"""``tf.keras.layers``: the Layer base (build/call, add_weight, weights in
creation order, ``training`` passed down to sublayers) and the core layers
Dense, Conv2D, MaxPooling2D, AveragePooling2D, Flatten, Dropout, Activation, Embedding, plus ``Input`` for the
functional API. Plain Python over jitgrad ops and ``tf.Variable``."""
import inspect
import threading

import numpy as np

from .. import context, dtypes, nest
from ..convert import is_tensorlike, convert_to_tensor
from ..eager_variable import EagerVariable
from ..module import Module, camel_to_snake
from ..ops import array_ops, conv, linalg_ops, math_ops, nn_ops, pooling
from ..variables import Variable
from . import activations, initializers
from .functional import Input, KerasTensor, symbolic_call  # noqa: F401  (keras.layers.Input, as Keras exports it)
from .names import unique_name

_call_context = threading.local()


class KerasVariable(EagerVariable):
    """A layer weight: ``name`` is the short name ('kernel'), ``path`` the full one
    ('sequential/dense/kernel'), as in Keras 3."""

    @property
    def path(self):
        return self._name[:-2]

    @property
    def name(self):
        return self.path.rsplit("/", 1)[-1]

    def __repr__(self):
        return f"<KerasVariable shape={self.shape.as_list()}, dtype={self.dtype.name}, path={self.path}>"


def _training_from_context():
    stack = getattr(_call_context, "training", None)
    return stack[-1] if stack else None


class Layer(Module):
    def __init__(self, trainable=True, name=None, dtype=None, input_shape=None, input_dim=None, **kwargs):
        if kwargs.pop("batch_input_shape", None) is not None:
            raise ValueError("jitgrad's Keras layers take `input_shape`, not `batch_input_shape`.")
        kwargs.pop("autocast", None)
        if kwargs:
            raise TypeError(f"Unrecognized keyword arguments passed to {type(self).__name__}: {kwargs}")
        name = name or unique_name(camel_to_snake(type(self).__name__))
        super().__init__(name=name)
        self.built = False
        self.trainable = trainable
        self.dtype = dtypes.as_dtype(dtype or dtypes.float32)
        self._trainable_own, self._non_trainable_own, self._sublayers = [], [], []
        if input_dim is not None and input_shape is None:
            input_shape = (input_dim,)
        self._input_shape_arg = None if input_shape is None else tuple(input_shape)
        self._call_has_training = "training" in inspect.signature(self.call).parameters

    # ---------------------------------------------------------------- tracking
    def __setattr__(self, name, value):
        if not name.startswith("_") or name == "_layers":
            try:
                leaves = nest.flatten(value) if isinstance(value, (list, tuple, dict)) else [value]
            except TypeError:      # a dict with keys that do not sort: not searched for layers
                leaves = []
            for leaf in leaves:
                if isinstance(leaf, Layer) and leaf is not self and "_sublayers" in self.__dict__ \
                        and all(leaf is not s for s in self._sublayers):
                    self._sublayers.append(leaf)
        object.__setattr__(self, name, value)

    def add_weight(self, shape=None, initializer=None, dtype=None, trainable=True, name=None, regularizer=None,
                   constraint=None, **kwargs):
        """A weight of this layer, named inside its name scope, initialised by ``initializer``
        (default: glorot_uniform for floats, zeros otherwise)."""
        if regularizer is not None or constraint is not None:
            raise NotImplementedError("jitgrad's Keras layers have no weight regularizers or constraints.")
        dt = dtypes.as_dtype(dtype or self.dtype)
        init = initializers.get(initializer if initializer is not None else
                                ("glorot_uniform" if dt.is_floating else "zeros"))
        shape = tuple(shape or ())
        var = Variable(lambda: init(shape, dt), trainable=trainable, name=name or "variable", dtype=dt)
        if isinstance(var, EagerVariable):
            var.__class__ = KerasVariable
        (self._trainable_own if trainable else self._non_trainable_own).append(var)
        return var

    @property
    def weights(self):
        return self.trainable_weights + self.non_trainable_weights

    @property
    def trainable_weights(self):
        if not self.trainable:
            return []
        out = list(self._trainable_own)
        for layer in self._sublayers:
            out += [w for w in layer.trainable_weights if all(w is not o for o in out)]
        return out

    @property
    def non_trainable_weights(self):
        out = list(self._non_trainable_own) + ([] if self.trainable else list(self._trainable_own))
        for layer in self._sublayers:
            sub = layer.non_trainable_weights + ([] if self.trainable else layer.trainable_weights)
            out += [w for w in sub if all(w is not o for o in out)]
        return out

    trainable_variables = trainable_weights
    non_trainable_variables = non_trainable_weights
    variables = weights

    @property
    def layers(self):
        return list(self._sublayers)

    def get_weights(self):
        return [w.numpy() for w in self.weights]

    def set_weights(self, weights):
        if len(weights) != len(self.weights):
            raise ValueError(f"You called `set_weights(weights)` on layer '{self.name}' with a weight list of "
                             f"length {len(weights)}, but the layer was expecting {len(self.weights)} weights.")
        for w, v in zip(self.weights, weights):
            w.assign(np.asarray(v, w.dtype.np))

    def count_params(self):
        return int(sum(np.prod(w.shape.as_list(), dtype=np.int64) for w in self.weights))

    # ---------------------------------------------------------------- build / call
    def build(self, input_shape=None):
        self.built = True

    def call(self, inputs, *args, **kwargs):
        raise NotImplementedError(f"Layer {type(self).__name__} does not have a `call()` method implemented.")

    def compute_output_shape(self, input_shape):
        raise NotImplementedError

    def _maybe_build(self, inputs):
        self.build(nest.map_structure(lambda t: tuple(t.shape.as_list()), inputs))
        self.built = True

    def __call__(self, *args, **kwargs):
        if not args:
            raise TypeError(f"{type(self).__name__}.__call__() needs the layer's inputs.")
        inputs, rest = args[0], args[1:]
        if any(isinstance(t, KerasTensor) for t in nest.flatten(inputs)):
            return symbolic_call(self, inputs, rest, kwargs)
        inputs = nest.map_structure(self._convert_input, inputs)
        if self.built:
            return self._call(inputs, rest, kwargs)
        with context.name_scope(self.name):   # weights made now (also by sublayers) are named under it
            self._maybe_build(inputs)
            return self._call(inputs, rest, kwargs)

    def _call(self, inputs, rest, kwargs):
        training = kwargs.pop("training", None)
        if training is None:
            training = _training_from_context()
        if self._call_has_training:
            kwargs["training"] = training
        stack = getattr(_call_context, "training", None)
        if stack is None:
            stack = _call_context.training = []
        stack.append(training)
        try:
            out = _call_fn(self)(inputs, *rest, **kwargs)
        finally:
            stack.pop()
        shape = getattr(out, "shape", None)
        if shape is not None and shape.rank:     # what summary() shows: (None, ...)
            self._output_shape = (None,) + tuple(shape.as_list()[1:])
        return out

    def _convert_input(self, x):
        if x is None or isinstance(x, (str, bool)):
            return x
        if not is_tensorlike(x) or isinstance(x, Variable):
            x = convert_to_tensor(np.asarray(x) if not isinstance(x, (int, float)) else x)
        if x.dtype.is_floating and x.dtype != self.dtype:   # Keras casts float inputs to the layer dtype
            x = math_ops.cast(x, self.dtype)
        return x

    def __repr__(self):
        return f"<{type(self).__name__} name={self.name}, built={self.built}>"


class Dense(Layer):
    def __init__(self, units, activation=None, use_bias=True, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", **kwargs):
        super().__init__(**kwargs)
        if not isinstance(units, int) or units <= 0:
            raise ValueError(f"Received an invalid value for `units`, expected a positive integer. Received: "
                             f"units={units}")
        self.units, self.use_bias = units, use_bias
        self.activation = activations.get(activation)
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.bias_initializer = initializers.get(bias_initializer)

    def build(self, input_shape):
        in_dim = input_shape[-1]
        if in_dim is None:
            raise ValueError("The last dimension of the inputs to a Dense layer should be defined. Found None.")
        self.kernel = self.add_weight(shape=(in_dim, self.units), initializer=self.kernel_initializer,
                                      name="kernel")
        self.bias = self.add_weight(shape=(self.units,), initializer=self.bias_initializer, name="bias") \
            if self.use_bias else None
        self.built = True

    def call(self, inputs):
        if inputs.shape.rank is not None and inputs.shape.rank > 2:
            x = linalg_ops.tensordot(inputs, self.kernel, [[inputs.shape.rank - 1], [0]])
        else:
            x = linalg_ops.matmul(inputs, self.kernel)
        if self.bias is not None:
            x = math_ops.add(x, self.bias)
        return self.activation(x)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.units,)


def _pair(v, what):
    vals = (v, v) if isinstance(v, int) else tuple(v)
    if len(vals) != 2 or not all(isinstance(a, int) and a > 0 for a in vals):
        raise ValueError(f"The `{what}` argument must be a tuple of 2 positive integers. Received: {v}")
    return vals


def _windowed_shape(input_shape, window, strides, dilation, padding, channels):
    """The NHWC output shape of a 2-D window op (conv or pool): per spatial dim ceil(n / s)
    for SAME, (n - span) // s + 1 for VALID."""
    out = []
    for n, k, s, d in zip(input_shape[1:3], window, strides, dilation):
        out.append(None if n is None else -(-n // s) if padding == "SAME" else (n - ((k - 1) * d + 1)) // s + 1)
    return (input_shape[0],) + tuple(out) + (channels,)


class Conv2D(Layer):
    """Keras's Conv2D (channels_last, no groups) over tf.nn.conv2d (ops/conv.py)."""

    def __init__(self, filters, kernel_size, strides=(1, 1), padding="valid", data_format=None,
                 dilation_rate=(1, 1), groups=1, activation=None, use_bias=True, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", **kwargs):
        super().__init__(**kwargs)
        if not isinstance(filters, int) or filters <= 0:
            raise ValueError(f"Invalid value for argument `filters`. Expected a strictly positive value. "
                             f"Received filters={filters}.")
        if data_format not in (None, "channels_last") or groups != 1:
            raise NotImplementedError("jitgrad's Conv2D supports data_format='channels_last' and groups=1 only.")
        if str(padding).lower() not in ("valid", "same"):
            raise ValueError(f"The `padding` argument must be one of 'valid', 'same'. Received: {padding}")
        self.filters, self.use_bias, self.padding = filters, use_bias, padding.upper()
        self.kernel_size = _pair(kernel_size, "kernel_size")
        self.strides = _pair(strides, "strides")
        self.dilation_rate = _pair(dilation_rate, "dilation_rate")
        self.activation = activations.get(activation)
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.bias_initializer = initializers.get(bias_initializer)

    def build(self, input_shape):
        channels = input_shape[-1]
        if channels is None:
            raise ValueError("The channel dimension of the inputs to Conv2D should be defined. Found None.")
        self.kernel = self.add_weight(shape=self.kernel_size + (channels, self.filters),
                                      initializer=self.kernel_initializer, name="kernel")
        self.bias = self.add_weight(shape=(self.filters,), initializer=self.bias_initializer, name="bias") \
            if self.use_bias else None
        self.built = True

    def call(self, inputs):
        x = conv.conv2d(inputs, self.kernel, list(self.strides), self.padding, dilations=list(self.dilation_rate))
        if self.bias is not None:
            x = math_ops.add(x, self.bias)
        return self.activation(x)

    def compute_output_shape(self, input_shape):
        return _windowed_shape(input_shape, self.kernel_size, self.strides, self.dilation_rate, self.padding,
                               self.filters)


class _Pooling2D(Layer):
    """Keras's MaxPooling2D / AveragePooling2D (channels_last) over ops/pooling.py."""
    _pool = None

    def __init__(self, pool_size=(2, 2), strides=None, padding="valid", data_format=None, **kwargs):
        super().__init__(**kwargs)
        if data_format not in (None, "channels_last"):
            raise NotImplementedError("jitgrad's pooling layers support data_format='channels_last' only.")
        if str(padding).lower() not in ("valid", "same"):
            raise ValueError(f"The `padding` argument must be one of 'valid', 'same'. Received: {padding}")
        self.pool_size = _pair(pool_size, "pool_size")
        self.strides = self.pool_size if strides is None else _pair(strides, "strides")
        self.padding = padding.upper()

    def call(self, inputs):
        return type(self)._pool(inputs, list(self.pool_size), list(self.strides), self.padding)

    def compute_output_shape(self, input_shape):
        return _windowed_shape(input_shape, self.pool_size, self.strides, (1, 1), self.padding, input_shape[3])


class MaxPooling2D(_Pooling2D):
    _pool = staticmethod(pooling.max_pool2d)


class AveragePooling2D(_Pooling2D):
    _pool = staticmethod(pooling.avg_pool2d)


MaxPool2D, AvgPool2D = MaxPooling2D, AveragePooling2D


class Flatten(Layer):
    def call(self, inputs):
        dims = inputs.shape.as_list()
        rest = dims[1:]
        if any(d is None for d in rest):
            raise NotImplementedError("jitgrad's Flatten needs the non-batch dimensions known.")
        return array_ops.reshape(inputs, [-1, int(np.prod(rest, dtype=np.int64))])

    def compute_output_shape(self, input_shape):
        return (input_shape[0], int(np.prod(input_shape[1:], dtype=np.int64)))


class Dropout(Layer):
    def __init__(self, rate, noise_shape=None, seed=None, **kwargs):
        super().__init__(**kwargs)
        if not 0 <= rate <= 1:
            raise ValueError(f"Invalid value received for argument `rate`. Expected a float value between 0 "
                             f"and 1. Received: rate={rate}")
        self.rate, self.noise_shape, self.seed = rate, noise_shape, seed

    def call(self, inputs, training=False):
        if training and self.rate > 0:
            return nn_ops.dropout(inputs, self.rate, noise_shape=self.noise_shape, seed=self.seed)
        return inputs

    def compute_output_shape(self, input_shape):
        return input_shape


class Activation(Layer):
    def __init__(self, activation, **kwargs):
        super().__init__(**kwargs)
        self.activation = activations.get(activation)

    def call(self, inputs):
        return self.activation(inputs)

    def compute_output_shape(self, input_shape):
        return input_shape


class Embedding(Layer):
    def __init__(self, input_dim, output_dim, embeddings_initializer="uniform", **kwargs):
        super().__init__(**kwargs)
        self.input_dim, self.output_dim = input_dim, output_dim
        self.embeddings_initializer = initializers.get(embeddings_initializer)

    def build(self, input_shape=None):
        self.embeddings = self.add_weight(shape=(self.input_dim, self.output_dim),
                                          initializer=self.embeddings_initializer, name="embeddings")
        self.built = True

    def _convert_input(self, x):
        if not is_tensorlike(x):
            x = convert_to_tensor(np.asarray(x))
        return x

    def call(self, inputs):
        if not inputs.dtype.is_integer:
            inputs = math_ops.cast(inputs, dtypes.int32)
        return array_ops.gather(self.embeddings, inputs)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape) + (self.output_dim,)




def _call_fn(layer):
    """``layer.call``, converted by AutoGraph when it runs inside a traced function
    with autograph on (as Keras does), so Python control flow on tensors in a user's
    ``call`` works inside ``fit``'s compiled train step."""
    trace = context.current_trace()
    if trace is None or not trace.autograph:
        return layer.call
    from ..autograph import converted_call    # AutoGraph loads on first use (see jitgrad/__init__)
    return converted_call(layer.call)
