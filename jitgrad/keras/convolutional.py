"""Keras's Conv1D and Conv2D (channels_last, groups=1) over tf.nn.conv1d / conv2d
(ops/conv.py): one base for the arguments, weights (kernel (*kernel_size, in, filters),
bias (filters,)), bias add and activation. DepthwiseConv2D, SeparableConv2D and
Conv2DTranspose over ops/conv.py's depthwise / transposed convolutions."""
from ..convert import convert_all
from ..ops import array_ops, conv, math_ops
from . import activations, initializers
from .base_layer import Layer
from .conv_utils import check_windowed_input, normalize_padding, normalize_tuple, windowed_shape


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

    def _kernel_shape(self, channels):
        return self.kernel_size + (channels, self.filters)

    def build(self, input_shape):
        channels = input_shape[-1]
        if channels is None:
            raise ValueError(f"The channel dimension of the inputs to {type(self).__name__} should be defined. "
                             "Found None.")
        self.kernel = self.add_weight(shape=self._kernel_shape(channels),
                                      initializer=self.kernel_initializer, name="kernel",
                                      regularizer=self.kernel_regularizer, constraint=self.kernel_constraint)
        self.bias = self.add_weight(shape=(self.filters,), initializer=self.bias_initializer, name="bias",
                                    regularizer=self.bias_regularizer, constraint=self.bias_constraint) \
            if self.use_bias else None
        self.built = True

    def call(self, inputs):
        inputs = convert_all([inputs])[0]
        check_windowed_input(self, inputs, self.rank, self.kernel.shape)
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


def _positive(value, what):
    if not isinstance(value, int) or value <= 0:
        raise ValueError(f"Invalid value for argument `{what}`. Expected a strictly positive value. Received "
                         f"{what}={value}.")


class _DepthwiseBase(Layer):
    """DepthwiseConv2D / SeparableConv2D: depthwise weights (kh, kw, in, depth_multiplier) over
    ops/conv.py's depthwise convolution (strides and dilation_rate both > 1 as Keras 3
    computes them: the dilated conv at stride 1, subsampled)."""

    def __init__(self, kernel_size, strides, padding, depth_multiplier, data_format, dilation_rate, activation,
                 use_bias, bias_initializer, bias_regularizer, activity_regularizer, bias_constraint, kwargs):
        super().__init__(activity_regularizer=activity_regularizer, **kwargs)
        _positive(depth_multiplier, "depth_multiplier")
        if data_format not in (None, "channels_last"):
            raise NotImplementedError(f"jitgrad's {type(self).__name__} supports data_format='channels_last' only.")
        self.depth_multiplier, self.use_bias = depth_multiplier, use_bias
        self.padding = normalize_padding(padding)
        self.kernel_size = normalize_tuple(kernel_size, 2, "kernel_size")
        self.strides = normalize_tuple(strides, 2, "strides")
        self.dilation_rate = normalize_tuple(dilation_rate, 2, "dilation_rate")
        self.activation = activations.get(activation)
        self.bias_initializer = initializers.get(bias_initializer)
        self.bias_regularizer, self.bias_constraint = bias_regularizer, bias_constraint

    def _channels(self, input_shape):
        channels = input_shape[-1]
        if channels is None:
            raise ValueError(f"The channel dimension of the inputs to {type(self).__name__} should be defined. "
                             "Found None.")
        return channels

    def _bias(self, size):
        return self.add_weight(shape=(size,), initializer=self.bias_initializer, name="bias",
                               regularizer=self.bias_regularizer, constraint=self.bias_constraint) \
            if self.use_bias else None

    def _depthwise(self, inputs, kernel):
        x, kernel = convert_all([inputs, kernel])
        check_windowed_input(self, x, 2, kernel.shape)
        if tuple(self.strides) == (1, 1) or tuple(self.dilation_rate) == (1, 1):
            return conv.depthwise_conv2d(x, kernel, (1,) + self.strides + (1,), self.padding,
                                         dilations=list(self.dilation_rate))
        return conv._depthwise(x, kernel, self.strides, self.padding, self.dilation_rate, ValueError)

    def _finish(self, x):
        if self.bias is not None:
            x = math_ops.add(x, self.bias)
        return self.activation(x)


class DepthwiseConv2D(_DepthwiseBase):
    """Weights kernel (kh, kw, in, depth_multiplier) and bias (in * depth_multiplier,), as Keras 3
    names them."""

    def __init__(self, kernel_size, strides=(1, 1), padding="valid", depth_multiplier=1, data_format=None,
                 dilation_rate=(1, 1), activation=None, use_bias=True, depthwise_initializer="glorot_uniform",
                 bias_initializer="zeros", depthwise_regularizer=None, bias_regularizer=None,
                 activity_regularizer=None, depthwise_constraint=None, bias_constraint=None, **kwargs):
        super().__init__(kernel_size, strides, padding, depth_multiplier, data_format, dilation_rate, activation,
                         use_bias, bias_initializer, bias_regularizer, activity_regularizer, bias_constraint, kwargs)
        self.depthwise_initializer = initializers.get(depthwise_initializer)
        self.depthwise_regularizer, self.depthwise_constraint = depthwise_regularizer, depthwise_constraint

    def build(self, input_shape):
        channels = self._channels(input_shape)
        self.kernel = self.add_weight(shape=self.kernel_size + (channels, self.depth_multiplier),
                                      initializer=self.depthwise_initializer, name="kernel",
                                      regularizer=self.depthwise_regularizer, constraint=self.depthwise_constraint)
        self.bias = self._bias(channels * self.depth_multiplier)
        self.built = True

    def call(self, inputs):
        return self._finish(self._depthwise(inputs, self.kernel))

    def compute_output_shape(self, input_shape):
        return windowed_shape(input_shape, self.kernel_size, self.strides, self.dilation_rate, self.padding,
                              None if input_shape[-1] is None else input_shape[-1] * self.depth_multiplier)


class SeparableConv2D(_DepthwiseBase):
    """Weights depthwise_kernel (kh, kw, in, depth_multiplier), pointwise_kernel
    (1, 1, in * depth_multiplier, filters) and bias (filters,)."""

    def __init__(self, filters, kernel_size, strides=(1, 1), padding="valid", data_format=None, dilation_rate=(1, 1),
                 depth_multiplier=1, activation=None, use_bias=True, depthwise_initializer="glorot_uniform",
                 pointwise_initializer="glorot_uniform", bias_initializer="zeros", depthwise_regularizer=None,
                 pointwise_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                 depthwise_constraint=None, pointwise_constraint=None, bias_constraint=None, **kwargs):
        super().__init__(kernel_size, strides, padding, depth_multiplier, data_format, dilation_rate, activation,
                         use_bias, bias_initializer, bias_regularizer, activity_regularizer, bias_constraint, kwargs)
        _positive(filters, "filters")
        self.filters = filters
        self.depthwise_initializer = initializers.get(depthwise_initializer)
        self.pointwise_initializer = initializers.get(pointwise_initializer)
        self.depthwise_regularizer, self.depthwise_constraint = depthwise_regularizer, depthwise_constraint
        self.pointwise_regularizer, self.pointwise_constraint = pointwise_regularizer, pointwise_constraint

    def build(self, input_shape):
        channels = self._channels(input_shape)
        self.depthwise_kernel = self.add_weight(
            shape=self.kernel_size + (channels, self.depth_multiplier), initializer=self.depthwise_initializer,
            name="depthwise_kernel", regularizer=self.depthwise_regularizer, constraint=self.depthwise_constraint)
        self.pointwise_kernel = self.add_weight(
            shape=(1, 1, channels * self.depth_multiplier, self.filters), initializer=self.pointwise_initializer,
            name="pointwise_kernel", regularizer=self.pointwise_regularizer, constraint=self.pointwise_constraint)
        self.bias = self._bias(self.filters)
        self.built = True

    def call(self, inputs):
        x = self._depthwise(inputs, self.depthwise_kernel)
        return self._finish(conv.conv2d(x, self.pointwise_kernel, 1, "VALID"))

    def compute_output_shape(self, input_shape):
        return windowed_shape(input_shape, self.kernel_size, self.strides, self.dilation_rate, self.padding,
                              self.filters)


def _transpose_size(n, k, s, padding, output_padding, d):
    """Keras 3's output size of a transposed conv along one axis (TF's SAME / VALID rule)."""
    if n is None:
        return None
    k = (k - 1) * d + 1
    if padding == "VALID":
        return (n - 1) * s + k + (max(k, s) - k if output_padding is None else output_padding)
    return n * s if output_padding is None else (n - 1) * s + k % 2 + output_padding


class Conv2DTranspose(_Conv):
    """Weights kernel (kh, kw, filters, in) and bias (filters,); the output
    tf.nn.conv2d_transpose of Keras 3's output size (output_padding extra rows / columns)."""
    rank = 2

    def __init__(self, filters, kernel_size, strides=(1, 1), padding="valid", output_padding=None, data_format=None,
                 dilation_rate=(1, 1), activation=None, use_bias=True, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                 kernel_constraint=None, bias_constraint=None, **kwargs):
        super().__init__(filters, kernel_size, strides=strides, padding=padding, data_format=data_format,
                         dilation_rate=dilation_rate, activation=activation, use_bias=use_bias,
                         kernel_initializer=kernel_initializer, bias_initializer=bias_initializer,
                         kernel_regularizer=kernel_regularizer, bias_regularizer=bias_regularizer,
                         activity_regularizer=activity_regularizer, kernel_constraint=kernel_constraint,
                         bias_constraint=bias_constraint, **kwargs)
        self.output_padding = None if output_padding is None else \
            tuple((output_padding,) * 2 if isinstance(output_padding, int) else output_padding)
        if self.output_padding is not None:
            for i, (op, s) in enumerate(zip(self.output_padding, self.strides)):
                if op >= s:
                    raise ValueError(f"`output_padding` must be strictly less than `strides` for all dimensions. "
                                     f"At dimension {i}, `output_padding` is {op} but `strides` is {s}. Received: "
                                     f"output_padding={self.output_padding}, strides={self.strides}")

    def _kernel_shape(self, channels):
        return self.kernel_size + (self.filters, channels)      # [kh, kw, out, in], as Keras 3's

    def _convolve(self, inputs):
        x = convert_all([inputs])[0]
        out = self.compute_output_shape(tuple(x.shape.dims))
        return conv.conv2d_transpose(x, self.kernel, out, list(self.strides),
                                     self.padding, dilations=list(self.dilation_rate))

    def compute_output_shape(self, input_shape):
        ops = self.output_padding or (None, None)     # a list, as Keras 3 returns it
        return [input_shape[0]] + list(
            _transpose_size(n, k, s, self.padding, op, d) for n, k, s, op, d in
            zip(input_shape[1:3], self.kernel_size, self.strides, ops, self.dilation_rate)) + [self.filters]
