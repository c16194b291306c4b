"""``tf.keras.layers``: the core layers Dense, Flatten, Dropout, Activation and
Embedding, and the namespace that exports the other families (each in its own
module), the Layer base and ``Input``. Plain Python over jitgrad ops and
``tf.Variable``."""
import numpy as np

from .. import dtypes
from ..convert import is_tensorlike, convert_to_tensor
from ..ops import array_ops, linalg_ops, math_ops, nn_ops
from . import activations, initializers
from .base_layer import KerasVariable, Layer  # noqa: F401  (keras.layers.Layer)
from .functional import Input  # noqa: F401  (keras.layers.Input, as Keras exports it)
# the other layer families live in their own modules; keras.layers exports them all
from .activation_layers import ELU, LeakyReLU, PReLU, ReLU, Softmax  # noqa: F401
from .attention import Attention, MultiHeadAttention  # noqa: F401
from .convolutional import Conv1D, Conv2D, Conv2DTranspose, DepthwiseConv2D, SeparableConv2D  # noqa: F401
from .core_layers import Identity, InputLayer, Lambda, Masking  # noqa: F401
from .einsum_dense import EinsumDense  # noqa: F401
from .merging import (Add, Average, Concatenate, Dot, Maximum, Minimum, Multiply, Subtract, add,  # noqa: F401
                      average, concatenate, dot, maximum, minimum, multiply, subtract)
from .noise_layers import Dropout, GaussianDropout, GaussianNoise, SpatialDropout1D, SpatialDropout2D  # noqa: F401
from .normalization import BatchNormalization, LayerNormalization, UnitNormalization  # noqa: F401
from .pooling_layers import (AveragePooling1D, AveragePooling2D, AvgPool1D, AvgPool2D,  # noqa: F401
                             GlobalAveragePooling1D, GlobalAveragePooling2D, GlobalAvgPool1D, GlobalAvgPool2D,
                             GlobalMaxPool1D, GlobalMaxPool2D, GlobalMaxPooling1D, GlobalMaxPooling2D, MaxPool1D,
                             MaxPool2D, MaxPooling1D, MaxPooling2D)
from .recurrent import GRU, LSTM, RNN, GRUCell, LSTMCell, SimpleRNN, SimpleRNNCell  # noqa: F401
from .reshaping import (Cropping1D, Cropping2D, Permute, RepeatVector, Reshape, UpSampling1D,  # noqa: F401
                        UpSampling2D, ZeroPadding1D, ZeroPadding2D)
from .wrappers import Bidirectional, TimeDistributed  # noqa: F401


class Dense(Layer):
    _supports_masking = True     # Keras 3: the input's mask passes to the output

    def __init__(self, units, activation=None, use_bias=True, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                 kernel_constraint=None, bias_constraint=None, **kwargs):
        super().__init__(activity_regularizer=activity_regularizer, **kwargs)
        self.kernel_regularizer, self.bias_regularizer = kernel_regularizer, bias_regularizer
        self.kernel_constraint, self.bias_constraint = kernel_constraint, bias_constraint
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
                                      name="kernel", regularizer=self.kernel_regularizer,
                                      constraint=self.kernel_constraint)
        self.bias = self.add_weight(shape=(self.units,), initializer=self.bias_initializer, name="bias",
                                    regularizer=self.bias_regularizer, constraint=self.bias_constraint) \
            if self.use_bias else None
        self.built = True

    def call(self, inputs):
        inputs = convert_to_tensor(inputs)
        width = inputs.shape.dims[-1] if inputs.shape.rank else None
        if inputs.shape.rank is not None and (inputs.shape.rank < 2 or width not in (None, self.kernel.shape[0])):
            # Keras 3's InputSpec check (min_ndim 2, axes {-1: input_dim}), before any matmul error
            raise ValueError(f"Input 0 of layer '{self.name}' is incompatible with the layer: expected axis -1 of "
                             f"input shape to have value {self.kernel.shape[0]}, but received input with shape "
                             f"{tuple(inputs.shape.as_list())}")
        if not inputs.dtype.is_floating and not inputs.dtype.is_complex:
            inputs = math_ops.cast(inputs, self.kernel.dtype)      # Keras's ops promote ints to floats
        if inputs.shape.rank is not None and inputs.shape.rank > 2:
            x = linalg_ops.tensordot(inputs, self.kernel, [[inputs.shape.rank - 1], [0]])
        else:
            x = linalg_ops.matmul(inputs, self.kernel)
        if self.bias is not None:
            x = math_ops.add(x, self.bias)
        return self.activation(x)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.units,)


class Flatten(Layer):
    def call(self, inputs):
        dims = inputs.shape.as_list()
        rest = dims[1:]
        if any(d is None for d in rest):
            raise NotImplementedError("jitgrad's Flatten needs the non-batch dimensions known.")
        return array_ops.reshape(inputs, [-1, int(np.prod(rest, dtype=np.int64))])

    def compute_output_shape(self, input_shape):
        return (input_shape[0], int(np.prod(input_shape[1:], dtype=np.int64)))


class Activation(Layer):
    _supports_masking = True     # Keras 3: the input's mask passes to the output

    def __init__(self, activation, **kwargs):
        super().__init__(**kwargs)
        self.activation = activations.get(activation)

    def call(self, inputs):
        return self.activation(inputs)

    def compute_output_shape(self, input_shape):
        return input_shape


class Embedding(Layer):
    def __init__(self, input_dim, output_dim, embeddings_initializer="uniform", embeddings_regularizer=None,
                 embeddings_constraint=None, activity_regularizer=None, mask_zero=False, weights=None,
                 lora_rank=None, **kwargs):
        if weights is not None or lora_rank:
            raise NotImplementedError("jitgrad's Embedding has no initial weights or LoRA: build it and use "
                                      "set_weights.")
        super().__init__(activity_regularizer=activity_regularizer, **kwargs)
        for what, value in (("input_dim", input_dim), ("output_dim", output_dim)):
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"`{what}` must be a positive integer. Received: {what}={value} (of type "
                                 f"{type(value).__name__}).")
        self.input_dim, self.output_dim, self.mask_zero = input_dim, output_dim, mask_zero
        self.embeddings_regularizer, self.embeddings_constraint = embeddings_regularizer, embeddings_constraint
        self.embeddings_initializer = initializers.get(embeddings_initializer)

    def build(self, input_shape=None):
        self.embeddings = self.add_weight(shape=(self.input_dim, self.output_dim),
                                          initializer=self.embeddings_initializer, name="embeddings",
                                          regularizer=self.embeddings_regularizer,
                                          constraint=self.embeddings_constraint)
        self.built = True

    def _converted(self, x):
        if not is_tensorlike(x):
            x = convert_to_tensor(np.asarray(x))
        return x

    def call(self, inputs):
        if not inputs.dtype.is_integer:
            inputs = math_ops.cast(inputs, dtypes.int32)
        # Keras 3's ops.take: a negative id counts from the end (-1 is the last row), as numpy's
        rows = math_ops.cast(self.input_dim, inputs.dtype)
        inputs = math_ops.where(math_ops.less(inputs, 0), inputs + rows, inputs)
        return array_ops.gather(self.embeddings, inputs, user=True)

    def compute_mask(self, inputs, mask=None):
        """Keras 3's: with ``mask_zero``, id 0 is padding: the steps to use are the nonzero ids."""
        if not self.mask_zero:
            return None
        return math_ops.not_equal(inputs, math_ops.cast(0, inputs.dtype))

    def compute_output_shape(self, input_shape):
        return tuple(input_shape) + (self.output_dim,)
