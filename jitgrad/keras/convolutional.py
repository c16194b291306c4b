"""Keras's Conv1D and Conv2D (channels_last, groups=1) over tf.nn.conv1d / conv2d
(ops/conv.py): one base for the arguments, weights (kernel (*kernel_size, in, filters),
bias (filters,)), bias add and activation."""
from ..ops import array_ops, conv, math_ops
from . import activations, initializers
from .base_layer import Layer
from .conv_utils import normalize_padding, normalize_tuple, windowed_shape


class _Conv(Layer):
    rank = None

    def __init__(self, filters, kernel_size, strides=1, padding="valid", data_format=None, dilation_rate=1, groups=1,
                 activation=None, use_bias=True, kernel_initializer="glorot_uniform", bias_initializer="zeros",
                 kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None, kernel_constraint=None,
                 bias_constraint=None, **kwargs):
        super().__init__(activity_regularizer=activity_regularizer, **kwargs)
        self.kernel_regularizer, self.bias_regularizer = kernel_regularizer, bias_regularizer
        self.kernel_constraint, self.bias_constraint = kernel_constraint, bias_constraint
        if not isinstance(filters, int) or filters <= 0:
            raise ValueError(f"Invalid value for argument `filters`. Expected a strictly positive value. "
                             f"Received filters={filters}.")
        if data_format not in (None, "channels_last") or groups != 1:
            raise NotImplementedError(f"jitgrad's {type(self).__name__} supports data_format='channels_last' and "
                                      "groups=1 only.")
        causal = self.rank == 1 and str(padding).lower() == "causal"    # Conv1D only, as in Keras
        self.filters, self.use_bias = filters, use_bias
        self.padding = "CAUSAL" if causal else normalize_padding(padding)
        self.kernel_size = normalize_tuple(kernel_size, self.rank, "kernel_size")
        self.strides = normalize_tuple(strides, self.rank, "strides")
        self.dilation_rate = normalize_tuple(dilation_rate, self.rank, "dilation_rate")
        if max(self.strides) > 1 and max(self.dilation_rate) > 1:
            raise ValueError(f"`strides > 1` not supported in conjunction with `dilation_rate > 1`. Received: "
                             f"strides={self.strides} and dilation_rate={self.dilation_rate}")
        self.activation = activations.get(activation)
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.bias_initializer = initializers.get(bias_initializer)

    def build(self, input_shape):
        channels = input_shape[-1]
        if channels is None:
            raise ValueError(f"The channel dimension of the inputs to {type(self).__name__} should be defined. "
                             "Found None.")
        self.kernel = self.add_weight(shape=self.kernel_size + (channels, self.filters),
                                      initializer=self.kernel_initializer, name="kernel",
                                      regularizer=self.kernel_regularizer, constraint=self.kernel_constraint)
        self.bias = self.add_weight(shape=(self.filters,), initializer=self.bias_initializer, name="bias",
                                    regularizer=self.bias_regularizer, constraint=self.bias_constraint) \
            if self.use_bias else None
        self.built = True

    def call(self, inputs):
        x = self._convolve(inputs)
        if self.bias is not None:
            x = math_ops.add(x, self.bias)
        return self.activation(x)

    def compute_output_shape(self, input_shape):
        # causal: left-padded by the kernel's span - 1, then VALID -- the length of SAME at stride 1
        padding = "SAME" if self.padding == "CAUSAL" else self.padding
        if self.padding == "CAUSAL" and input_shape[1] is not None:
            span = (self.kernel_size[0] - 1) * self.dilation_rate[0]
            return windowed_shape((input_shape[0], input_shape[1] + span) + tuple(input_shape[2:]),
                                  self.kernel_size, self.strides, self.dilation_rate, "VALID", self.filters)
        return windowed_shape(input_shape, self.kernel_size, self.strides, self.dilation_rate, padding, self.filters)


class Conv1D(_Conv):
    """Inputs (batch, steps, channels); ``padding="causal"`` pads the start so output t sees
    inputs up to t only."""
    rank = 1

    def _convolve(self, inputs):
        padding = self.padding
        if padding == "CAUSAL":
            inputs = array_ops.pad(inputs, [[0, 0], [(self.kernel_size[0] - 1) * self.dilation_rate[0], 0], [0, 0]])
            padding = "VALID"
        return conv.conv1d(inputs, self.kernel, self.strides[0], padding, dilations=self.dilation_rate[0])


class Conv2D(_Conv):
    rank = 2

    def _convolve(self, inputs):
        return conv.conv2d(inputs, self.kernel, list(self.strides), self.padding, dilations=list(self.dilation_rate))
