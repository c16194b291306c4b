"""Keras's pooling layers (channels_last): MaxPooling1D/2D and AveragePooling1D/2D over
ops/pooling.py (1-D as 2-D of height 1, as TF's pool1d does), and the global poolings
(a mean / max over the spatial axes, ``keepdims`` keeping them as size 1)."""
from ..ops import array_ops, math_ops, pooling, reduction_ops
from .base_layer import Layer
from .conv_utils import normalize_padding, normalize_tuple, windowed_shape


def _channels_last(data_format):
    if data_format not in (None, "channels_last"):
        raise NotImplementedError("jitgrad's pooling layers support data_format='channels_last' only.")


class _Pooling(Layer):
    """Keras 3 gives the max poolings a default pool_size (2) and the average ones none."""
    rank, _pool = None, None

    def __init__(self, pool_size, strides=None, padding="valid", data_format=None, **kwargs):
        super().__init__(**kwargs)
        _channels_last(data_format)
        self.pool_size = normalize_tuple(pool_size, self.rank, "pool_size")
        self.strides = self.pool_size if strides is None else normalize_tuple(strides, self.rank, "strides")
        self.padding = normalize_padding(padding)

    def call(self, inputs):
        if self.rank == 2:
            return type(self)._pool(inputs, list(self.pool_size), list(self.strides), self.padding)
        out = type(self)._pool(array_ops.expand_dims(inputs, 1), [1, self.pool_size[0]], [1, self.strides[0]],
                               self.padding)
        return array_ops.squeeze(out, [1])

    def compute_output_shape(self, input_shape):
        return windowed_shape(input_shape, self.pool_size, self.strides, (1,) * self.rank, self.padding,
                              input_shape[-1])


class MaxPooling1D(_Pooling):
    rank, _pool = 1, staticmethod(pooling.max_pool2d)

    def __init__(self, pool_size=2, strides=None, padding="valid", data_format=None, **kwargs):
        super().__init__(pool_size, strides, padding, data_format, **kwargs)


class AveragePooling1D(_Pooling):
    rank, _pool = 1, staticmethod(pooling.avg_pool2d)


class MaxPooling2D(_Pooling):
    rank, _pool = 2, staticmethod(pooling.max_pool2d)

    def __init__(self, pool_size=(2, 2), strides=None, padding="valid", data_format=None, **kwargs):
        super().__init__(pool_size, strides, padding, data_format, **kwargs)


class AveragePooling2D(_Pooling):
    rank, _pool = 2, staticmethod(pooling.avg_pool2d)


class _GlobalPooling(Layer):
    rank, _reduce = None, None

    def __init__(self, data_format=None, keepdims=False, **kwargs):
        super().__init__(**kwargs)
        _channels_last(data_format)
        self.keepdims = keepdims

    def call(self, inputs):
        return type(self)._reduce(inputs, axis=list(range(1, self.rank + 1)), keepdims=self.keepdims)

    def compute_output_shape(self, input_shape):
        if self.keepdims:
            return (input_shape[0],) + (1,) * self.rank + (input_shape[-1],)
        return (input_shape[0], input_shape[-1])


class GlobalAveragePooling1D(_GlobalPooling):
    """With a (batch, steps) mask, Keras 3's: the sum over the kept steps / their number (0 / 0 =
    nan for a sequence with none kept, as Keras's); the output has no mask."""
    rank, _reduce = 1, staticmethod(reduction_ops.reduce_mean)
    _supports_masking = True

    def call(self, inputs, mask=None):
        if mask is None:
            return super().call(inputs)
        keep = array_ops.expand_dims(math_ops.cast(mask, "bool"), 2)
        inputs = math_ops.where(keep, inputs, math_ops.zeros_like(inputs))
        count = reduction_ops.reduce_sum(math_ops.cast(keep, inputs.dtype), axis=1, keepdims=self.keepdims)
        return reduction_ops.reduce_sum(inputs, axis=1, keepdims=self.keepdims) / count

    def compute_mask(self, inputs, mask=None):
        return None


class GlobalMaxPooling1D(_GlobalPooling):
    rank, _reduce = 1, staticmethod(reduction_ops.reduce_max)


class GlobalAveragePooling2D(_GlobalPooling):
    rank, _reduce = 2, staticmethod(reduction_ops.reduce_mean)


class GlobalMaxPooling2D(_GlobalPooling):
    rank, _reduce = 2, staticmethod(reduction_ops.reduce_max)


# Keras's aliases
MaxPool1D, AvgPool1D, MaxPool2D, AvgPool2D = MaxPooling1D, AveragePooling1D, MaxPooling2D, AveragePooling2D
GlobalAvgPool1D, GlobalMaxPool1D = GlobalAveragePooling1D, GlobalMaxPooling1D
GlobalAvgPool2D, GlobalMaxPool2D = GlobalAveragePooling2D, GlobalMaxPooling2D
