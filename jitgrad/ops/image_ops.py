"""``tf.image``: the functions data augmentation and preprocessing use most, composed of
existing ops as TF's image_ops_impl composes them (they compile and differentiate as their
parts do), for 3-D [H, W, C] and 4-D [N, H, W, C] images.

The geometry (offsets, target sizes, rot90's k, central_crop's fraction) must be known when
the graph is built: Python values, constants or eager tensors. TF's checks on them are then
its static ValueErrors, with TF's messages. resize is in image_resize.py.
The random_* functions draw with jitgrad's random streams (not TF's values); the
stateless_random_* ones draw as TF does (tf.random.stateless_uniform), so their values are
TF's for the same seed.
"""
import numpy as np

from .. import dtypes
from ..convert import convert_all, convert_to_tensor
from ..eager import EagerTensor
from .array_ops import (expand_dims, gather, get_static_value, pad, reshape, reverse, squeeze,
                        tile, transpose as transpose_)
from .math_composites import saturate_cast
from .math_ops import (add, cast, floordiv, floormod, less, maximum, multiply, round as round_, rsqrt,
                       where)
from .random_ops import uniform
from .stateless_random_ops import stateless_uniform
from .reduction_ops import reduce_mean, reduce_std, reduce_sum

__all__ = ["flip_left_right", "flip_up_down", "rot90", "transpose", "crop_to_bounding_box", "pad_to_bounding_box",
           "central_crop", "resize_with_crop_or_pad", "convert_image_dtype", "per_image_standardization",
           "rgb_to_grayscale", "grayscale_to_rgb", "adjust_brightness", "adjust_contrast", "adjust_gamma",
           "random_flip_left_right", "random_flip_up_down", "random_brightness", "random_contrast",
           "random_crop", "stateless_random_flip_left_right", "stateless_random_flip_up_down",
           "stateless_random_brightness", "stateless_random_contrast", "stateless_random_crop"]


def _image(image, name="image"):
    (x,) = convert_all([image])
    return x


def static_value(value, what):
    """A Python number for a geometry argument known when the graph is built."""
    if isinstance(value, EagerTensor):
        v = value.numpy()
    elif hasattr(value, "graph") and hasattr(value, "op"):
        v = get_static_value(value)
        if v is None:
            raise NotImplementedError(f"tf.image: {what} must be known when the graph is built in jitgrad")
    else:
        v = value
    v = np.asarray(v)
    return v.item() if v.ndim == 0 else v


def _rank_3_or_4(x):
    rank = x.shape.rank
    if rank is None:
        raise NotImplementedError("tf.image needs the image's rank known when the graph is built in jitgrad")
    if rank < 3:
        raise ValueError(f"'image' (shape {x.shape}) must be at least three-dimensional.")
    if any(d == 0 for d in x.shape.dims[-3:]):
        raise ValueError(f"inner 3 dims of 'image.shape' must be > 0: {x.shape}")
    return rank


def _not_3_or_4(x, sep=" "):
    return ValueError(f"'image' (shape {x.shape}){sep}must have either 3 or 4 dimensions.")


# ---------------------------------------------------------------- flips, rotations, transpose
def _flip(image, flip_index):
    x = _image(image)
    rank = _rank_3_or_4(x)
    if rank not in (3, 4):
        raise _not_3_or_4(x, sep="")     # (TF's message lacks the space)
    return reverse(x, [flip_index + rank - 3])


def flip_left_right(image):
    """``tf.image.flip_left_right``: the width axis reversed."""
    return _flip(image, 1)


def flip_up_down(image):
    """``tf.image.flip_up_down``: the height axis reversed."""
    return _flip(image, 0)


def rot90(image, k=1, name=None):
    """``tf.image.rot90``: rotated counter-clockwise by k quarter turns (k known when the graph
    is built)."""
    x = _image(image)
    rank = _rank_3_or_4(x)
    kv = np.asarray(static_value(k, "rot90's k"))
    if kv.ndim != 0:
        raise ValueError(f"Shape must be rank 0 but is rank {kv.ndim}")
    if kv.dtype.kind not in "iu":
        raise TypeError(f"Cannot convert {kv.item()!r} to EagerTensor of dtype int32")
    if rank not in (3, 4):
        raise _not_3_or_4(x)
    k = int(kv) % 4
    h = rank - 3
    perm = list(range(h)) + [h + 1, h, h + 2]
    if k == 1:
        return transpose_(reverse(x, [h + 1]), perm)
    if k == 2:
        return reverse(x, [h, h + 1])
    if k == 3:
        return reverse(transpose_(x, perm), [h + 1])
    return x


def transpose(image, name=None):
    """``tf.image.transpose``: height and width swapped."""
    x = _image(image)
    rank = _rank_3_or_4(x)
    if rank not in (3, 4):
        raise _not_3_or_4(x)
    return transpose_(x, [1, 0, 2] if rank == 3 else [0, 2, 1, 3], name=name)


# ---------------------------------------------------------------- crops and pads
def _batched(x):
    rank = x.shape.rank
    if rank is None:
        raise NotImplementedError("tf.image needs the image's rank known when the graph is built in jitgrad")
    if rank not in (3, 4):
        raise _not_3_or_4(x)
    return (expand_dims(x, 0), False) if rank == 3 else (x, True)


def hw_static(x):
    _, h, w, _ = x.shape.dims
    if h is None or w is None:
        raise NotImplementedError("tf.image: the image's height and width must be known when the graph is built "
                                  "in jitgrad")
    return h, w


def _check(cond, msg):
    if not cond:
        raise ValueError(msg)


def crop_to_bounding_box(image, offset_height, offset_width, target_height, target_width):
    """``tf.image.crop_to_bounding_box``: the target_height x target_width window whose top-left
    corner is at (offset_height, offset_width)."""
    x, is_batch = _batched(_image(image))
    if any(d == 0 for d in x.shape.dims[-3:]):
        raise ValueError(f"inner 3 dims of 'image.shape' must be > 0: {x.shape}")
    oh, ow, th, tw = (int(static_value(v, "the bounding box")) for v in
                      (offset_height, offset_width, target_height, target_width))
    h, w = hw_static(x)
    _check(ow >= 0, "offset_width must be >= 0.")
    _check(oh >= 0, "offset_height must be >= 0.")
    _check(tw > 0, "target_width must be > 0.")
    _check(th > 0, "target_height must be > 0.")
    _check(w >= tw + ow, "width must be >= target + offset.")
    _check(h >= th + oh, "height must be >= target + offset.")
    out = x[:, oh:oh + th, ow:ow + tw, :]
    return out if is_batch else squeeze(out, axis=[0])


def pad_to_bounding_box(image, offset_height, offset_width, target_height, target_width):
    """``tf.image.pad_to_bounding_box``: zeros around the image to target_height x target_width,
    offset_height rows above and offset_width columns left of it."""
    x, is_batch = _batched(_image(image))
    oh, ow, th, tw = (int(static_value(v, "the bounding box")) for v in
                      (offset_height, offset_width, target_height, target_width))
    h, w = hw_static(x)
    if any(d == 0 for d in x.shape.dims[-3:]):
        raise ValueError(f"inner 3 dims of 'image.shape' must be > 0: {x.shape}")
    _check(oh >= 0, "offset_height must be >= 0")
    _check(ow >= 0, "offset_width must be >= 0")
    _check(tw - ow - w >= 0, "width must be <= target - offset")
    _check(th - oh - h >= 0, "height must be <= target - offset")
    out = pad(x, [[0, 0], [oh, th - oh - h], [ow, tw - ow - w], [0, 0]])
    return out if is_batch else squeeze(out, axis=[0])


def central_crop(image, central_fraction):
    """``tf.image.central_crop``: the central region holding central_fraction of each side."""
    x = _image(image)
    f = float(static_value(central_fraction, "central_fraction"))
    if f <= 0.0 or f > 1.0:
        raise ValueError("central_fraction must be within (0, 1]")
    if f == 1.0:
        return x
    rank = _rank_3_or_4(x)
    if rank not in (3, 4):
        raise ValueError(f"`image` should either be a Tensor with rank = 3 or rank = 4. Had rank = {rank}.")
    xb = x if rank == 4 else expand_dims(x, 0)
    h, w = hw_static(xb)
    hs, ws = int((float(h) - float(h) * f) / 2), int((float(w) - float(w) * f) / 2)
    out = xb[:, hs:h - hs, ws:w - ws, :]
    return out if rank == 4 else squeeze(out, axis=[0])


def resize_with_crop_or_pad(image, target_height, target_width):
    """``tf.image.resize_with_crop_or_pad``: centrally cropped and / or zero padded to the target."""
    x, is_batch = _batched(_image(image))
    if any(d == 0 for d in x.shape.dims[-3:]):
        raise ValueError(f"inner 3 dims of 'image.shape' must be > 0: {x.shape}")
    th, tw = (int(static_value(v, "the target size")) for v in (target_height, target_width))
    _check(tw > 0, "target_width must be > 0.")
    _check(th > 0, "target_height must be > 0.")
    h, w = hw_static(x)
    wd, hd = tw - w, th - h
    cropped = crop_to_bounding_box(x, max(-hd // 2, 0), max(-wd // 2, 0), min(th, h), min(tw, w))
    out = pad_to_bounding_box(cropped, max(hd // 2, 0), max(wd // 2, 0), th, tw)
    return out if is_batch else squeeze(out, axis=[0])


# ---------------------------------------------------------------- dtypes and colour
def convert_image_dtype(image, dtype, saturate=False, name=None):
    """``tf.image.convert_image_dtype``: floats are in [0, 1], integers in [0, MAX]; integer to
    integer shifts by the ratio of the (max + 1)s, float to integer scales by MAX + 0.5 and
    truncates (saturate: clamped first)."""
    x = _image(image)
    dtype = dtypes.as_dtype(dtype)
    if not dtype.is_floating and not dtype.is_integer:
        raise AttributeError("dtype must be either floating point or integer")
    if not x.dtype.is_floating and not x.dtype.is_integer:
        raise AttributeError("image dtype must be either floating point or integer")
    if dtype == x.dtype:
        return x
    if x.dtype.is_integer and dtype.is_integer:
        scale_in, scale_out = int(x.dtype.max), int(dtype.max)
        if scale_in > scale_out:
            scaled = floordiv(x, convert_to_tensor(np.asarray((scale_in + 1) // (scale_out + 1), x.dtype.np)))
            return saturate_cast(scaled, dtype) if saturate else cast(scaled, dtype)
        c = saturate_cast(x, dtype) if saturate else cast(x, dtype)
        return multiply(c, convert_to_tensor(np.asarray((scale_out + 1) // (scale_in + 1), dtype.np)))
    if x.dtype.is_floating and dtype.is_floating:
        return cast(x, dtype)
    if x.dtype.is_integer:
        return multiply(cast(x, dtype), convert_to_tensor(np.asarray(1.0 / x.dtype.max, dtype.np)))
    scaled = multiply(x, convert_to_tensor(np.asarray(dtype.max + 0.5, x.dtype.np)))
    return saturate_cast(scaled, dtype) if saturate else cast(scaled, dtype)


def per_image_standardization(image):
    """``tf.image.per_image_standardization``: (x - mean) / max(stddev, 1/sqrt(num_pixels)) over
    each image's H, W and C, in float32."""
    x = _image(image)
    _rank_3_or_4(x)
    x = cast(x, dtypes.float32)
    dims = x.shape.dims[-3:]
    if any(d is None for d in dims):
        raise NotImplementedError("per_image_standardization needs H, W and C known when the graph is built")
    num = int(np.prod(dims))
    mean = reduce_mean(x, axis=[-1, -2, -3], keepdims=True)
    std = reduce_std(x, axis=[-1, -2, -3], keepdims=True)
    adjusted = maximum(std, rsqrt(convert_to_tensor(np.float32(num))))
    return (x - mean) / adjusted


_RGB_WEIGHTS = np.array([0.2989, 0.587, 0.114], np.float32)


def rgb_to_grayscale(images, name=None):
    """``tf.image.rgb_to_grayscale``: 0.2989 R + 0.587 G + 0.114 B, the channel axis kept (size 1)."""
    x = _image(images)
    orig = x.dtype
    flt = convert_image_dtype(x, dtypes.float32)
    # (a product summed over the channels, not tensordot, which needs every dimension known)
    gray = reduce_sum(flt * convert_to_tensor(_RGB_WEIGHTS), axis=-1, keepdims=True)
    return convert_image_dtype(gray, orig)


def grayscale_to_rgb(images, name=None):
    """``tf.image.grayscale_to_rgb``: the single channel repeated three times."""
    x = _image(images)
    rank = x.shape.rank
    if rank is not None and rank < 2:
        raise ValueError(f"A grayscale image (shape {x.shape}) must be at least two-dimensional.")
    if rank is None:
        raise NotImplementedError("grayscale_to_rgb needs the image's rank known when the graph is built")
    if x.shape.dims[-1] is not None and x.shape.dims[-1] != 1:
        raise ValueError("Last dimension of a grayscale image should be size 1.")
    return tile(x, [1] * (rank - 1) + [3])


def _float_image(x):
    return x if x.dtype in (dtypes.float16, dtypes.float32) else convert_image_dtype(x, dtypes.float32)


def adjust_brightness(image, delta):
    """``tf.image.adjust_brightness``: delta added in float (an integer image is converted to
    float32 and back, saturating)."""
    x = _image(image)
    flt = _float_image(x)
    (d,) = convert_all([delta])
    adjusted = add(flt, cast(d, flt.dtype))
    return convert_image_dtype(adjusted, x.dtype, saturate=True)


def adjust_contrast(images, contrast_factor):
    """``tf.image.adjust_contrast``: (x - mean) * factor + mean with each channel's mean over the
    image's height and width (TF's AdjustContrastv2)."""
    x = _image(images)
    _rank_3_or_4(x)
    flt = _float_image(x)
    (f,) = convert_all([contrast_factor])
    if f.shape.rank not in (None, 0):
        raise ValueError(f"Shape must be rank 0 but is rank {f.shape.rank}")
    f = cast(f, flt.dtype)
    mean = reduce_mean(flt, axis=[-3, -2], keepdims=True)
    adjusted = (flt - mean) * f + mean
    return convert_image_dtype(adjusted, x.dtype, saturate=True)


def adjust_gamma(image, gamma=1, gain=1):
    """``tf.image.adjust_gamma``: gain * x ** gamma in float."""
    x = _image(image)
    flt = _float_image(x)
    if not hasattr(gamma, "op") and not isinstance(gamma, EagerTensor):
        if gamma < 0:
            raise ValueError("Gamma should be a non-negative real number.")
    elif isinstance(gamma, EagerTensor) and gamma.numpy() < 0:
        raise ValueError("Gamma should be a non-negative real number.")
    (g, k) = convert_all([gamma, gain])
    adjusted = cast(k, flt.dtype) * flt ** cast(g, flt.dtype)
    return convert_image_dtype(adjusted, x.dtype, saturate=True)


# ---------------------------------------------------------------- random augmentation
def _random_flip(image, flip_index, draw):
    """``draw(shape)``: uniform [0, 1) floats (tf.random.uniform's or a stateless one's)."""
    x = _image(image)
    rank = _rank_3_or_4(x)
    if rank not in (3, 4):
        raise _not_3_or_4(x)
    flipped = reverse(x, [flip_index + rank - 3])
    if rank == 3:
        return where(less(draw([]), 0.5), flipped, x)
    n = x.shape.dims[0]
    if n is None:
        raise NotImplementedError("random flips of a batch need its size known when the graph is built in "
                                  "jitgrad (its random ops draw static shapes)")
    u = draw([n])
    # TF: flips * flipped + (1 - flips) * image with flips = round(u); a select gives the same
    # values without 0 * inf
    flips = reshape(round_(u), [-1, 1, 1, 1])
    return where(flips > 0.5, flipped, x)


def _drawn(seed):
    return lambda shape: uniform(shape, 0, 1.0, seed=seed)


def _drawn_stateless(seed):
    return lambda shape: stateless_uniform(shape, seed, minval=0, maxval=1.0)


def random_flip_left_right(image, seed=None):
    """``tf.image.random_flip_left_right``: each image mirrored left-right with probability 1/2."""
    return _random_flip(image, 1, _drawn(seed))


def random_flip_up_down(image, seed=None):
    """``tf.image.random_flip_up_down``: each image mirrored up-down with probability 1/2."""
    return _random_flip(image, 0, _drawn(seed))


def stateless_random_flip_left_right(image, seed):
    """``tf.image.stateless_random_flip_left_right``: TF's flips for the same seed."""
    return _random_flip(image, 1, _drawn_stateless(seed))


def stateless_random_flip_up_down(image, seed):
    """``tf.image.stateless_random_flip_up_down``: TF's flips for the same seed."""
    return _random_flip(image, 0, _drawn_stateless(seed))


def _check_brightness(max_delta):
    if max_delta < 0:
        raise ValueError("max_delta must be non-negative.")


def _check_contrast(lower, upper):
    if upper <= lower:
        raise ValueError("upper must be > lower.")
    if lower < 0:
        raise ValueError("lower must be non-negative.")


def random_brightness(image, max_delta, seed=None):
    """``tf.image.random_brightness``: adjust_brightness by a delta uniform in [-max_delta, max_delta)."""
    _check_brightness(max_delta)
    return adjust_brightness(image, uniform([], -max_delta, max_delta, seed=seed))


def stateless_random_brightness(image, max_delta, seed):
    """``tf.image.stateless_random_brightness``: TF's delta for the same seed."""
    _check_brightness(max_delta)
    return adjust_brightness(image, stateless_uniform([], seed, minval=-max_delta, maxval=max_delta))


def random_contrast(image, lower, upper, seed=None):
    """``tf.image.random_contrast``: adjust_contrast by a factor uniform in [lower, upper)."""
    _check_contrast(lower, upper)
    return adjust_contrast(image, uniform([], lower, upper, seed=seed))


def stateless_random_contrast(image, lower, upper, seed):
    """``tf.image.stateless_random_contrast``: TF's factor for the same seed."""
    _check_contrast(lower, upper)
    return adjust_contrast(image, stateless_uniform([], seed, minval=lower, maxval=upper))


def _random_crop(value, size, offsets_in):
    """A window of ``size`` at offsets ``offsets_in(limit)`` (an int32 [rank] tensor in
    [0, limit)), taken by a gather of offset + range(size) along each axis."""
    x = _image(value)
    sz = np.asarray(static_value(size, "random_crop's size")).reshape(-1).astype(np.int64)
    dims = x.shape.dims
    if x.shape.rank is None or any(d is None for d in dims):
        raise NotImplementedError("random_crop needs the value's shape known when the graph is built")
    if len(sz) != len(dims):
        raise ValueError(f"Shapes must be equal rank, but are {len(dims)} and {len(sz)}")
    if any(s > d for s, d in zip(sz, dims)):
        raise ValueError(f"Need value.shape >= size, got {list(dims)} >= {sz.tolist()}")
    offsets = offsets_in(np.asarray(dims, np.int32) - sz.astype(np.int32) + 1)
    out = x
    for axis, s in enumerate(sz):
        if s == dims[axis]:
            continue
        picked = add(offsets[axis], convert_to_tensor(np.arange(s, dtype=np.int32)))
        out = gather(out, picked, axis=axis)
    return out


def random_crop(value, size, seed=None, name=None):
    """``tf.image.random_crop`` (tf.random_crop): a window of ``size`` at a uniformly random
    offset (uniform int32 bits modulo the room left, as TF)."""
    return _random_crop(value, size, lambda limit: floormod(
        uniform([len(limit)], 0, np.iinfo(np.int32).max, dtype=dtypes.int32, seed=seed), convert_to_tensor(limit)))


def stateless_random_crop(value, size, seed, name=None):
    """``tf.image.stateless_random_crop``: TF's window for the same seed."""
    return _random_crop(value, size, lambda limit: floormod(
        stateless_uniform([len(limit)], seed, minval=0, maxval=np.iinfo(np.int32).max, dtype=dtypes.int32),
        convert_to_tensor(limit)))
