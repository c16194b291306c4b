"""tf.nn functions that TF's Python composes from other ops, composed the same way here:
weighted_cross_entropy_with_logits, sufficient_statistics, weighted_moments,
compute_average_loss, scale_regularization_loss, log_poisson_loss, crelu,
space_to_depth / depth_to_space (NHWC), local_response_normalization. They compile and
differentiate as their parts do.

compute_average_loss and scale_regularization_loss divide by the number of replicas in
sync; jitgrad has no replica context (its strategies run the step per replica themselves),
so that number is 1, TF's default strategy's."""
import math

import numpy as np

from .. import dtypes
from ..convert import convert_all, convert_to_tensor
from ..eager import EagerTensor
from ..errors import InvalidArgumentError
from ..custom_gradient import custom_gradient
from .array_ops import concat, expand_dims, pad, reshape, shape as shape_of, squeeze, transpose
from .linalg_ops import matmul
from .math_ops import (abs as abs_, add, cast, divide_no_nan, exp, greater_equal, identity, less_equal, log,
                       log1p, logical_and, multiply, negative, ones_like, pow as pow_, reciprocal, relu, rsqrt,
                       square, squared_difference, subtract, truediv, where, zeros_like)
from .reduction_ops import reduce_sum


def _graph(t):
    return None if isinstance(t, EagerTensor) else t.graph


def _like(value, t):
    """A Python / numpy constant as a tensor of t's dtype, in t's graph."""
    return convert_to_tensor(np.asarray(value, t.dtype.np), graph=_graph(t))


def weighted_cross_entropy_with_logits(labels, logits, pos_weight, name=None):
    """``tf.nn.weighted_cross_entropy_with_logits``: sigmoid cross entropy with the positive
    term weighted, in TF's stable form (1 - z) x + (1 + (q - 1) z)(log1p(exp(-|x|)) + relu(-x))."""
    (x,) = convert_all([logits])
    (z,) = convert_all([labels], graph=_graph(x))
    if not z.shape.is_compatible_with(x.shape):
        raise ValueError(f"`logits` and `labels` must have the same shape, received ({x.shape} vs {z.shape}).")
    log_weight = add(_like(1, z), multiply(subtract(pos_weight, _like(1, z)), z))
    softplus_neg = add(log1p(exp(negative(abs_(x)))), relu(negative(x)))
    return add(multiply(subtract(_like(1, z), z), x), multiply(log_weight, softplus_neg), name=name)


def _axes(axes, rank):
    axes = [axes] if isinstance(axes, (int, np.integer)) else list(axes)
    return [int(a) + rank if int(a) < 0 else int(a) for a in axes]


def sufficient_statistics(x, axes, shift=None, keepdims=False, name=None):
    """``tf.nn.sufficient_statistics``: (count, sum of x - shift, sum of (x - shift)**2, shift)
    over ``axes``; the count is in x's dtype."""
    (x,) = convert_all([x])
    if x.shape.rank is None:
        raise NotImplementedError("sufficient_statistics needs x's rank known when the graph is built.")
    axes = _axes(axes, x.shape.rank)
    dims = [x.shape.dims[a] for a in axes]
    if None not in dims:
        counts = _like(int(np.prod(dims, dtype=np.int64)), x)
    else:
        counts = cast(_count(x, axes), x.dtype)
    if shift is not None:
        (shift,) = convert_all([shift], graph=_graph(x))
        m_ss, v_ss = subtract(x, shift), squared_difference(x, shift)
    else:
        m_ss, v_ss = x, square(x)
    return (counts, reduce_sum(m_ss, axes, keepdims=keepdims, name="mean_ss"),
            reduce_sum(v_ss, axes, keepdims=keepdims, name="var_ss"), shift)


def _count(x, axes):
    sizes = shape_of(x)
    n = None
    for a in axes:
        n = sizes[a] if n is None else multiply(n, sizes[a])
    return n


def sufficient_statistics_v1(x, axes, shift=None, keep_dims=None, name=None, keepdims=None):
    """TF 1's signature (``keep_dims``)."""
    return sufficient_statistics(x, axes, shift, bool(keepdims if keepdims is not None else keep_dims), name)


def weighted_moments(x, axes, frequency_weights, keepdims=False, name=None):
    """``tf.nn.weighted_moments``: the frequency-weighted mean and variance over ``axes``,
    as TF's two-pass nn_impl (div_no_nan: 0 where the weights sum to 0; float16 in float32)."""
    (x,) = convert_all([x])
    (w,) = convert_all([frequency_weights], graph=_graph(x))
    half = x.dtype == dtypes.float16
    if half:
        x = cast(x, dtypes.float32)
    if w.dtype != x.dtype:
        w = cast(w, x.dtype)
    axes = _axes(axes, x.shape.rank)
    total = reduce_sum(multiply(w, x), axes, keepdims=True)
    # (the weights broadcast against x: summing w + 0 * x counts each item's weight)
    weight_sum = reduce_sum(add(w, zeros_like(x)), axes, keepdims=True)
    mean = divide_no_nan(total, weight_sum)
    variance = divide_no_nan(reduce_sum(multiply(w, squared_difference(x, mean)), axes, keepdims=True), weight_sum)
    if not keepdims:
        mean, variance = squeeze(mean, axes), squeeze(variance, axes)
    if half:
        mean, variance = cast(mean, dtypes.float16), cast(variance, dtypes.float16)
    return mean, variance


def compute_average_loss(per_example_loss, sample_weight=None, global_batch_size=None):
    """``tf.nn.compute_average_loss``: sum(loss * sample_weight) / global_batch_size (default:
    the loss's first dimension), 0 for a batch of 0."""
    (loss,) = convert_all([per_example_loss])
    dtype = loss.dtype
    if loss.shape.rank == 0:
        raise ValueError("Invalid value passed for `per_example_loss`. Expected a tensor with at least rank 1. "
                         f"Received per_example_loss={loss} with rank 0")
    if sample_weight is not None:
        (w,) = convert_all([sample_weight], graph=_graph(loss))
        # TF's scale_losses_by_sample_weight: in float32, the weight's rank fitted to the loss's
        loss, w = cast(loss, dtypes.float32), cast(w, dtypes.float32)
        rl, rw = loss.shape.rank, w.shape.rank
        if rl is not None and rw is not None:
            if rw - rl == 1 and w.shape.dims[-1] in (1, None):
                w = squeeze(w, [-1])
            elif rl - rw == 1:
                w = expand_dims(w, -1)
        loss = cast(multiply(loss, w), dtype)
    if global_batch_size is None:
        n = loss.shape.dims[0] if loss.shape.rank is not None else None
        global_batch_size = n if n is not None else shape_of(loss)[0]
    (batch,) = convert_all([global_batch_size], graph=_graph(loss))
    if batch.shape.rank not in (None, 0):
        raise ValueError(f"global_batch_size must be scalar. Tensor {batch} must have rank 0. "
                         f"Received rank {batch.shape.rank}.")
    if not batch.dtype.is_integer:
        raise TypeError(f"global_batch_size must be an integer. Expected Tensor {batch} to be of integer "
                        f"dtype, got {batch.dtype.name}.")
    if isinstance(batch, EagerTensor) and batch.numpy() < 0:
        raise InvalidArgumentError(f"global_batch_size must be non-negative. Received {batch.numpy()}")
    return divide_no_nan(reduce_sum(loss), cast(batch, dtype))


def scale_regularization_loss(regularization_loss):
    """``tf.nn.scale_regularization_loss``: the summed loss over the replicas in sync (one)."""
    (loss,) = convert_all([regularization_loss])
    return truediv(reduce_sum(loss), _like(1, loss))


def log_poisson_loss(targets, log_input, compute_full_loss=False, name=None):
    """``tf.nn.log_poisson_loss``: exp(log_input) - log_input * targets, plus Stirling's
    approximation of log(targets!) where targets > 1 when ``compute_full_loss``."""
    (c,) = convert_all([log_input])
    (z,) = convert_all([targets], graph=_graph(c))
    if not z.shape.is_compatible_with(c.shape):
        raise ValueError(f"`log_input` and `targets` must have the same shape, received ({c.shape} vs {z.shape}).")
    result = subtract(exp(c), multiply(c, z))
    if compute_full_loss:
        stirling = add(subtract(multiply(z, log(z)), z), multiply(_like(0.5, z), log(multiply(_like(2 * math.pi, z), z))))
        small = logical_and(greater_equal(z, zeros_like(z)), less_equal(z, ones_like(z)))
        result = add(result, where(small, zeros_like(z), stirling))
    return result if name is None else add(result, _like(0, result), name=name)


def crelu(features, name=None, axis=-1):
    """``tf.nn.crelu``: relu of [x, -x] concatenated along ``axis``."""
    (x,) = convert_all([features])
    return relu(concat([x, negative(x)], axis), name=name)


def _block_size(block_size, x, data_format):
    if data_format != "NHWC":
        raise (InvalidArgumentError if isinstance(x, EagerTensor) else ValueError)(
            f"Only NHWC data_format is supported, got {data_format!r}")
    if isinstance(block_size, bool) or not isinstance(block_size, (int, np.integer)):
        raise TypeError(f"Expected int for argument 'block_size' not {block_size!r}.")
    if block_size < 2:
        raise (InvalidArgumentError if isinstance(x, EagerTensor) else ValueError)(
            f"Value for attr 'block_size' of {block_size} must be at least minimum 2")
    if x.shape.rank != 4 or not x.shape.is_fully_defined():
        if x.shape.rank not in (None, 4):
            raise (InvalidArgumentError if isinstance(x, EagerTensor) else ValueError)(
                f"input rank should be 4 instead of {x.shape.rank}")
        raise NotImplementedError("space_to_depth / depth_to_space need the input's shape known when the graph "
                                  "is built.")
    return int(block_size)


def space_to_depth(input, block_size, data_format="NHWC", name=None):  # noqa: A002
    """``tf.nn.space_to_depth`` (NHWC): each block_size x block_size block of pixels becomes
    one pixel of block_size**2 * C channels, in (row, column, channel) order."""
    (x,) = convert_all([input])
    bs = _block_size(block_size, x, data_format)
    b, h, w, c = x.shape.as_list()
    if h % bs or w % bs:
        raise (InvalidArgumentError if isinstance(x, EagerTensor) else ValueError)(
            f"Image width {w} and height {h} should be divisible by block_size: {bs}")
    blocks = transpose(reshape(x, [b, h // bs, bs, w // bs, bs, c]), [0, 1, 3, 2, 4, 5])
    return reshape(blocks, [b, h // bs, w // bs, bs * bs * c], name=name)


def depth_to_space(input, block_size, data_format="NHWC", name=None):  # noqa: A002
    """``tf.nn.depth_to_space`` (NHWC): space_to_depth's inverse."""
    (x,) = convert_all([input])
    bs = _block_size(block_size, x, data_format)
    b, h, w, c = x.shape.as_list()
    if c % (bs * bs):
        raise (InvalidArgumentError if isinstance(x, EagerTensor) else ValueError)(
            f"Input depth dimension {c} should be divisible by: {bs * bs}")
    pixels = transpose(reshape(x, [b, h, w, bs, bs, c // (bs * bs)]), [0, 1, 3, 2, 4, 5])
    return reshape(pixels, [b, h * bs, w * bs, c // (bs * bs)], name=name)


def local_response_normalization(input, depth_radius=5, bias=1.0, alpha=1.0, beta=0.5, name=None):  # noqa: A002
    """``tf.nn.local_response_normalization`` (lrn): x / (bias + alpha * s) ** beta, s the sum
    of squares over the channels within ``depth_radius``, computed as TF's CPU kernel does: a
    matmul by the 0/1 band matrix, then x * 1 / m, x * rsqrt(m) or x * exp(log(m) * -beta)."""
    (x,) = convert_all([input])
    if x.shape.rank not in (None, 4):
        raise (InvalidArgumentError if isinstance(x, EagerTensor) else ValueError)(
            f"input must be 4-dimensional, got shape {x.shape}")
    if x.dtype not in (dtypes.float32, dtypes.float16, dtypes.bfloat16):
        raise (InvalidArgumentError if isinstance(x, EagerTensor) else TypeError)(
            f"Value for attr 'T' of {x.dtype.name} is not in the list of allowed values: half, bfloat16, float")
    c = x.shape.dims[-1]
    if c is None:
        raise NotImplementedError("local_response_normalization needs the channel count known when the graph "
                                  "is built.")
    band = (np.abs(np.arange(c)[:, None] - np.arange(c)[None, :]) <= int(depth_radius)).astype(x.dtype.np)
    bias_t, alpha_t, radius = _like(bias, x), _like(alpha, x), int(depth_radius)

    @custom_gradient
    def lrn(x):
        squares = reshape(matmul(reshape(square(x), [-1, c]), convert_to_tensor(band, graph=_graph(x))), shape_of(x))
        m = add(bias_t, multiply(alpha_t, squares))
        factor = reciprocal(m) if beta == 1 else rsqrt(m) if beta == 0.5 else exp(multiply(log(m), _like(-beta, x)))
        out = multiply(x, factor)

        def grad(dy):
            # TF's LRNGrad loops over each channel j's depth window k, adding dy_j * ([k == j]
            # m_j^-beta - 2 alpha beta x_k out_j / m_j) to dx_k: an upstream NaN or inf reaches
            # only the channels whose window holds it, where the band matmul's transpose would
            # multiply it by the zeros outside the band and reach every channel. The same terms
            # here: the centre's two together (no inf - inf TF would not form), then the
            # neighbours' as shifted copies padded with zeros.
            x2, dy2, out2 = reshape(x, [-1, c]), reshape(dy, [-1, c]), reshape(out, [-1, c])
            m2 = add(bias_t, multiply(alpha_t, add(square(x2), _depth_neighbour_sum(square(x2), c, radius))))
            two_ab = _like(2.0 * alpha * beta, x)
            dx = multiply(subtract(pow_(m2, _like(-beta, x)), multiply(two_ab, truediv(multiply(x2, out2), m2))), dy2)
            if min(radius, c - 1) > 0:
                near = _depth_neighbour_sum(truediv(multiply(dy2, out2), m2), c, radius)
                dx = subtract(dx, multiply(multiply(two_ab, x2), near))
            return reshape(dx, shape_of(x))
        return out, grad

    return identity(lrn(x), name=name)


def _depth_neighbour_sum(t, c, radius):
    """t [rows, c] -> for each channel k the sum of t[:, j] over 0 < |j - k| <= radius: shifted
    copies of t padded with zeros, added (each sum holds only its window's elements); zeros
    when the window has no other channel."""
    r = min(radius, c - 1)
    if r <= 0:
        return zeros_like(t)
    padded = pad(t, [[0, 0], [r, r]])
    total = None
    for d in range(-r, r + 1):
        if d:
            part = padded[:, r + d:r + d + c]
            total = part if total is None else add(total, part)
    return total
