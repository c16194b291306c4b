"""Keras 3's reshaping layers: Reshape, Permute, RepeatVector, and the 2-D spatial
ones ZeroPadding2D, UpSampling2D (nearest), Cropping2D (channels_last)."""
import math

from ..ops import array_ops
from .base_layer import Layer


def _resolved_shape(input_shape, target_shape):
    """Keras 3's compute_reshape_output_shape: ``target_shape`` with its -1 worked out from the
    (per-sample) ``input_shape`` when that is known, else left None."""
    if None in input_shape:
        return tuple(None if d == -1 else d for d in target_shape)
    size = math.prod(input_shape)
    known = math.prod(d for d in target_shape if d != -1)
    if -1 not in target_shape:
        if size != known:
            raise ValueError(f"The total size of the tensor must be unchanged. Received: input_shape="
                             f"{tuple(input_shape)}, target_shape={target_shape}")
        return target_shape
    if known == 0 or size % known:
        raise ValueError(f"The total size of the tensor must be unchanged, however, the input size cannot by "
                         f"divided by the specified dimensions in target_shape. Received: input_shape="
                         f"{tuple(input_shape)}, target_shape={target_shape}")
    return tuple(size // known if d == -1 else d for d in target_shape)


class Reshape(Layer):
    def __init__(self, target_shape, **kwargs):
        super().__init__(**kwargs)
        target_shape = tuple(target_shape)
        if target_shape.count(-1) > 1 or any(d < -1 for d in target_shape):
            raise ValueError(f"There must be at most one unknown dimension (-1) in `target_shape`. Received: "
                             f"target_shape={target_shape}.")
        self.target_shape = target_shape

    def compute_output_shape(self, input_shape):
        return (input_shape[0],) + _resolved_shape(tuple(input_shape[1:]), self.target_shape)

    def call(self, inputs):
        shape = _resolved_shape(tuple(inputs.shape.as_list()[1:]), self.target_shape)
        return array_ops.reshape(inputs, [-1] + [-1 if d is None else d for d in shape])


class Permute(Layer):
    """Permutes the non-batch axes: ``dims`` counts them from 1, as Keras does."""

    def __init__(self, dims, **kwargs):
        super().__init__(**kwargs)
        self.dims = tuple(dims)
        if sorted(dims) != list(range(1, len(dims) + 1)):
            raise ValueError(f"Invalid permutation argument `dims` for Permute Layer. The set of indices in `dims` "
                             f"must be consecutive and start from 1. Received dims={dims}")

    def compute_output_shape(self, input_shape):
        return (input_shape[0],) + tuple(input_shape[d] for d in self.dims)

    def call(self, inputs):
        return array_ops.transpose(inputs, (0,) + self.dims)


def repeat(x, n, axis):
    """Each entry of ``x`` ``n`` times in a row along ``axis`` (numpy's repeat): a new axis
    after ``axis`` tiled n times, then merged into it."""
    dims = x.shape.as_list()
    tiled = array_ops.tile(array_ops.expand_dims(x, axis + 1), [1] * (axis + 1) + [n] + [1] * (len(dims) - axis - 1))
    new = [-1 if d is None else d for d in dims]
    new[axis] = -1 if dims[axis] is None else dims[axis] * n
    if new.count(-1) > 1:
        raise NotImplementedError("jitgrad's UpSampling2D needs every dimension but the batch one known.")
    return array_ops.reshape(tiled, new)


class RepeatVector(Layer):
    """(batch, features) -> (batch, n, features)."""

    def __init__(self, n, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(n, int):
            raise TypeError(f"Expected an integer value for `n`, got {type(n)}.")
        if n <= 0:
            raise ValueError(f"Argument `n` should be a positive integer. Received: n={n}")
        self.n = n

    def build(self, input_shape):
        if len(input_shape) != 2:
            raise ValueError(f"Input 0 of layer \"{self.name}\" is incompatible with the layer: expected ndim=2, "
                             f"found ndim={len(input_shape)}. Full shape received: {tuple(input_shape)}")
        self.built = True

    def compute_output_shape(self, input_shape):
        return (input_shape[0], self.n, input_shape[1])

    def call(self, inputs):
        return array_ops.tile(array_ops.expand_dims(inputs, 1), [1, self.n, 1])


def _two_pairs(value, what, allow_negative):
    """Keras's 2-D padding / cropping argument: an int, 2 ints (symmetric per dim) or 2 pairs."""
    error = ValueError(f"`{what}` should be either an int, a tuple of 2 ints (symmetric_height_{what[:4]}, "
                       f"symmetric_width_{what[:4]}), or a tuple of 2 tuples of 2 ints ((top_{what[:4]}, "
                       f"bottom_{what[:4]}), (left_{what[:4]}, right_{what[:4]})). Received: {what}={value}.")
    if isinstance(value, int):
        pairs = ((value, value), (value, value))
    elif isinstance(value, (list, tuple)):
        if len(value) != 2:
            raise ValueError(f"`{what}` should have two elements. Received: {what}={value}.")
        pairs = tuple((v, v) if isinstance(v, int) else tuple(v) for v in value)
        if any(len(p) != 2 or not all(isinstance(a, int) for a in p) for p in pairs):
            raise error
    else:
        raise error
    if not allow_negative and any(a < 0 for p in pairs for a in p):
        raise ValueError(f"`{what}` cannot be negative. Received: {what}={value}.")
    return pairs


def _channels_last(data_format, name):
    if data_format not in (None, "channels_last"):
        raise NotImplementedError(f"jitgrad's {name} supports data_format='channels_last' only.")


class ZeroPadding2D(Layer):
    def __init__(self, padding=(1, 1), data_format=None, **kwargs):
        super().__init__(**kwargs)
        _channels_last(data_format, "ZeroPadding2D")
        self.padding = _two_pairs(padding, "padding", allow_negative=False)

    def compute_output_shape(self, input_shape):
        (t, b), (left, r) = self.padding
        h, w = input_shape[1:3]
        return (input_shape[0], None if h is None else h + t + b, None if w is None else w + left + r,
                input_shape[3])

    def call(self, inputs):
        return array_ops.pad(inputs, [[0, 0], list(self.padding[0]), list(self.padding[1]), [0, 0]])


class Cropping2D(Layer):
    def __init__(self, cropping=((0, 0), (0, 0)), data_format=None, **kwargs):
        super().__init__(**kwargs)
        _channels_last(data_format, "Cropping2D")
        self.cropping = _two_pairs(cropping, "cropping", allow_negative=False)

    def compute_output_shape(self, input_shape):
        out = list(input_shape)
        for i, (a, b) in zip((1, 2), self.cropping):
            if input_shape[i] is not None:
                if a + b >= input_shape[i]:
                    raise ValueError(f"Values in `cropping` argument should be smaller than the corresponding "
                                     f"spatial dimension of the input. Received: input_shape={tuple(input_shape)}, "
                                     f"cropping={self.cropping}")
                out[i] = input_shape[i] - a - b
        return tuple(out)

    def build(self, input_shape):
        self.compute_output_shape(input_shape)
        self.built = True

    def call(self, inputs):
        (t, b), (left, r) = self.cropping
        return inputs[:, t:(-b or None), left:(-r or None), :]


class UpSampling2D(Layer):
    def __init__(self, size=(2, 2), data_format=None, interpolation="nearest", **kwargs):
        super().__init__(**kwargs)
        _channels_last(data_format, "UpSampling2D")
        methods = ("bilinear", "nearest", "lanczos3", "lanczos5", "bicubic", "area")
        if interpolation not in methods:     # Keras 3's ValueError (at the call; here at once)
            raise ValueError(f"Invalid value for argument `interpolation`. Expected of one {methods}. Received: "
                             f"interpolation={interpolation}")
        if interpolation != "nearest":
            raise NotImplementedError("jitgrad's UpSampling2D has interpolation='nearest' only.")
        self.size = (size, size) if isinstance(size, int) else tuple(size)
        self.interpolation = interpolation

    def compute_output_shape(self, input_shape):
        h, w = input_shape[1:3]
        return (input_shape[0], None if h is None else h * self.size[0], None if w is None else w * self.size[1],
                input_shape[3])

    def call(self, inputs):
        return repeat(repeat(inputs, self.size[0], 1), self.size[1], 2)


def _pair(value, what):
    """Keras 3's 1-D padding / cropping argument: an int (both ends) or (start, end), each >= 0."""
    pair = (value, value) if isinstance(value, int) else tuple(value) if isinstance(value, (list, tuple)) else None
    if pair is None or len(pair) != 2 or not all(isinstance(a, int) for a in pair):
        raise ValueError(f"The `{what}` argument must be a tuple of 2 integers. Received {what}={value}")
    if any(a < 0 for a in pair):
        raise ValueError(f"The `{what}` argument must be a tuple of 2 integers. Received {what}={value}, including "
                         f"values {{{', '.join(str(a) for a in sorted({a for a in pair if a < 0}))}}} that do not satisfy `value >= 0`")
    return pair


class ZeroPadding1D(Layer):
    """(batch, steps, features) -> (batch, left + steps + right, features), zeros at the ends."""

    def __init__(self, padding=1, data_format=None, **kwargs):
        super().__init__(**kwargs)
        _channels_last(data_format, "ZeroPadding1D")
        self.padding = _pair(padding, "padding")

    def compute_output_shape(self, input_shape):
        n = input_shape[1]
        return (input_shape[0], None if n is None else n + sum(self.padding), input_shape[2])

    def call(self, inputs):
        return array_ops.pad(inputs, [[0, 0], list(self.padding), [0, 0]])


class Cropping1D(Layer):
    """(batch, steps, features) without ``cropping`` steps at the start and at the end."""

    def __init__(self, cropping=(1, 1), **kwargs):
        super().__init__(**kwargs)
        self.cropping = _pair(cropping, "cropping")

    def compute_output_shape(self, input_shape):
        n = input_shape[1]
        if n is not None and sum(self.cropping) >= n:
            raise ValueError(f"`cropping` parameter of `Cropping1D` layer must be smaller than the input length. "
                             f"Received: input_shape={tuple(input_shape)}, cropping={self.cropping}")
        return (input_shape[0], None if n is None else n - sum(self.cropping), input_shape[2])

    def build(self, input_shape):
        self.compute_output_shape(input_shape)
        self.built = True

    def call(self, inputs):
        start, end = self.cropping
        return inputs[:, start:(-end or None), :]


class UpSampling1D(Layer):
    """Each step repeated ``size`` times along the time axis."""

    def __init__(self, size=2, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(size, int) or isinstance(size, bool) or size <= 0:
            raise ValueError(f"Argument `size` should be a positive integer. Received: size={size}")
        self.size = size

    def compute_output_shape(self, input_shape):
        n = input_shape[1]
        return (input_shape[0], None if n is None else n * self.size, input_shape[2])

    def call(self, inputs):
        return repeat(inputs, self.size, 1)
