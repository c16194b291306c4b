"""``tf.image.resize`` (TF 2) for 'bilinear' and 'nearest' with half-pixel centers, and
bilinear's antialias=True (ScaleAndTranslate's triangle kernel): gathers and weighted sums
whose indices and weights numpy computes from the static sizes with TF's float32 formulas, so it
compiles and bilinear's gradient is the gathers' and products' gradients."""
import numpy as np

from .. import dtypes
from ..convert import convert_all, convert_to_tensor
from ..errors import InvalidArgumentError
from .array_ops import expand_dims, gather, pad, squeeze
from .image_ops import hw_static, static_value
from .math_ops import cast

__all__ = ["resize", "ResizeMethod"]


class ResizeMethod:
    BILINEAR = "bilinear"
    NEAREST_NEIGHBOR = "nearest"
    BICUBIC = "bicubic"
    AREA = "area"
    LANCZOS3 = "lanczos3"
    LANCZOS5 = "lanczos5"
    GAUSSIAN = "gaussian"
    MITCHELLCUBIC = "mitchellcubic"


def _nearest_indices(in_size, out_size):
    """ResizeNearestNeighbor, half_pixel_centers: min(floor((i + 0.5) * scale), in - 1) in float32."""
    scale = np.float32(in_size) / np.float32(out_size)
    src = np.floor((np.arange(out_size, dtype=np.float32) + np.float32(0.5)) * scale).astype(np.int64)
    return np.clip(src, 0, in_size - 1).astype(np.int32)


def _bilinear_weights(in_size, out_size):
    """ResizeBilinear, half_pixel_centers: in = (i + 0.5) * scale - 0.5 in float32; the lower and
    upper neighbours clamped to the image, lerp = in - floor(in)."""
    scale = np.float32(in_size) / np.float32(out_size)
    src = (np.arange(out_size, dtype=np.float32) + np.float32(0.5)) * scale - np.float32(0.5)
    lo = np.floor(src)
    lower = np.maximum(lo.astype(np.int64), 0).astype(np.int32)
    upper = np.minimum(np.ceil(src).astype(np.int64), in_size - 1).astype(np.int32)
    return lower, upper, (src - lo).astype(np.float32)


def _lerp_axis(x, in_size, out_size, axis):
    lower, upper, lerp = _bilinear_weights(in_size, out_size)
    a = gather(x, convert_to_tensor(lower), axis=axis)
    b = gather(x, convert_to_tensor(upper), axis=axis)
    shape = [1, 1, 1, 1]
    shape[axis] = out_size
    return a + (b - a) * convert_to_tensor(lerp.reshape(shape))


def _triangle_spans(in_size, out_size):
    """ScaleAndTranslate's spans for the triangle kernel with antialias (TF's ComputeSpansCore,
    in float32): per output pixel, span_size taps (start + k, weight k), the weights normalised by
    their sum. As TF's GatherRows / GatherColumns, a tap past the span's end still reads pixel
    start + k, with weight 0 (an inf there makes the output NaN, as in TF), and one past the
    image reads nothing: index in_size, the zero row _antialias_axis appends. An output outside
    the image (or with weights summing to ~0) reads from pixel 0 with weights 0."""
    f32 = np.float32
    scale = f32(out_size) / f32(in_size)
    inv_scale = f32(1.0 / np.float64(scale))
    kernel_scale = max(inv_scale, f32(1.0))
    span_size = min(2 * int(np.ceil(f32(1.0) * kernel_scale)) + 1, in_size)
    index = np.zeros((span_size, out_size), np.int32)
    weight = np.zeros((span_size, out_size), np.float32)
    for x in range(out_size):
        sample = f32(x + 0.5) * inv_scale
        start = 0
        if not (sample < 0 or sample > in_size):
            start = int(np.clip(np.ceil(sample - kernel_scale - f32(0.5)), 0, in_size - 1))
            end = int(np.clip(np.floor(sample + kernel_scale - f32(0.5)), 0, in_size - 1)) + 1
            ws = [max(f32(1.0) - abs((f32(src) + f32(0.5) - sample) / kernel_scale), f32(0.0))
                  for src in range(start, end)]
            total = f32(0.0)
            for w in ws:
                total = f32(total + w)
            if abs(total) >= 1000.0 * np.finfo(np.float32).tiny:
                inv = f32(f32(1.0) / total)
                for k, w in enumerate(ws):
                    weight[k, x] = f32(w * inv)
        index[:, x] = np.minimum(start + np.arange(span_size), in_size)
    return index, weight


def _antialias_axis(x, in_size, out_size, axis):
    index, weight = _triangle_spans(in_size, out_size)
    shape = [1, 1, 1, 1]
    shape[axis] = out_size
    paddings = [[0, 0]] * 4
    paddings[axis] = [0, 1]
    padded = pad(x, paddings) if (index == in_size).any() else x      # the zero pixel past the image
    out = None
    for k in range(index.shape[0]):
        term = gather(padded, convert_to_tensor(index[k]), axis=axis) * convert_to_tensor(weight[k].reshape(shape))
        out = term if out is None else out + term
    return out


def resize(images, size, method=ResizeMethod.BILINEAR, preserve_aspect_ratio=False, antialias=False, name=None):
    """``tf.image.resize`` (TF 2): 'bilinear' (float32 out) and 'nearest' (the input's dtype) with
    half-pixel centers; bilinear with antialias=True is TF's ScaleAndTranslate with the triangle
    kernel (widened by the scale when shrinking), as per-tap gathers and weighted sums."""
    (x,) = convert_all([images])
    if x.shape.rank is None:
        raise ValueError("'images' contains no shape.")
    is_batch = x.shape.rank == 4
    if x.shape.rank == 3:
        x = expand_dims(x, 0)
    elif x.shape.rank != 4:
        raise ValueError("'images' must have either 3 or 4 dimensions.")
    sz = np.asarray(static_value(size, "the size of tf.image.resize"))
    if sz.dtype.kind not in "iu":
        raise ValueError("'size' must be a 1-D int32 Tensor")
    if sz.shape != (2,):
        raise ValueError("'size' must be a 1-D Tensor of 2 elements: new_height, new_width")
    h, w = hw_static(x)
    nh, nw = int(sz[0]), int(sz[1])
    if preserve_aspect_ratio:
        f = min(np.float32(nh) / np.float32(h), np.float32(nw) / np.float32(w))
        nh = int(np.round(np.float32(f) * np.float32(h)))
        nw = int(np.round(np.float32(f) * np.float32(w)))
    if nh <= 0 or nw <= 0:
        raise InvalidArgumentError(None, None, "output dimensions must be positive")
    method = method.lower() if isinstance(method, str) else method
    if method == ResizeMethod.BILINEAR:
        out = cast(x, dtypes.float32) if x.dtype != dtypes.float32 else x
        if antialias:       # (TF: ScaleAndTranslate with the triangle kernel; rows first gives its values)
            out = _antialias_axis(out, h, nh, 1)
            out = _antialias_axis(out, w, nw, 2)
        else:
            out = _lerp_axis(out, w, nw, 2)     # (TF's kernel: along each row first, then between rows)
            out = _lerp_axis(out, h, nh, 1)
    elif method == ResizeMethod.NEAREST_NEIGHBOR:
        out = gather(x, convert_to_tensor(_nearest_indices(h, nh)), axis=1)
        out = gather(out, convert_to_tensor(_nearest_indices(w, nw)), axis=2)
    elif method in (ResizeMethod.BICUBIC, ResizeMethod.AREA, ResizeMethod.LANCZOS3, ResizeMethod.LANCZOS5,
                    ResizeMethod.GAUSSIAN, ResizeMethod.MITCHELLCUBIC):
        raise NotImplementedError(f"tf.image.resize method {method!r} is not implemented in jitgrad")
    else:
        raise ValueError(f"Resize method is not implemented: {method}")
    return out if is_batch else squeeze(out, axis=[0])
