"""``tf.nn.max_pool2d`` / ``avg_pool2d`` (and ``max_pool`` / ``avg_pool`` of 3-D or 4-D input,
``max_pool1d`` / ``avg_pool1d``: TF's, a [N, 1, W, C] image pooled and squeezed) as
composites: one gather of every window (an im2col with index arrays built in numpy when the
graph is built), then a reduction over the window axis.

Input [N, H, W, C] is reshaped to [N, H*W, C] and gathered along axis 1 with indices
[OH*OW*KH*KW], reshaped to windows [N, OH, OW, KH*KW, C]. H, W and C must be known when
the graph is built (N may not be). SAME padding is TF's: pad_total = max((ceil(in / stride)
- 1) * stride + k - in, 0), pad_before = pad_total // 2.

Max pooling follows TF's CPU kernels (Eigen; the same in eager and in a graph without
oneDNN -- TF's oneDNN rewrite of float32 graphs differs on windows holding NaN):

* the value is the largest non-NaN element of the window's valid (unpadded) elements, and
  never below the dtype's lowest finite value (a window of NaN or -inf gives -FLT_MAX);
* the gradient goes to ONE element per window: the running maximum of TF's MaxPoolGrad,
  which starts at the window's first valid element (row-major) and moves only to a strictly
  greater one. So ties send it to the first maximum, a NaN never takes it, and a window
  whose first element is NaN sends it there. This is not the value's element on such
  windows, so the gradient is a ``custom_gradient``: a segment sum of the output's gradient
  into the chosen elements (whose own gradient is a gather, as TF's MaxPoolGradGrad, and
  zero with respect to x: a Hessian of zeros, not None).

A padded window slot gathers the window's first valid element again: a copy of an element
changes neither the maximum nor which element the rule above chooses (a copy before the
first valid element is that element). Average pooling gathers a zero row instead and
divides by the number of valid elements, as TF's AvgPool does with SAME padding.
"""
import numpy as np

from .. import context, dtypes
from ..convert import convert_all
from ..custom_gradient import custom_gradient
from ..errors import InvalidArgumentError, UnimplementedError
from .array_ops import concat, constant, expand_dims, gather, range_, reshape, shape as shape_of, size, squeeze
from .math_ops import add, divide, is_nan, maximum, multiply, where, zeros_like
from .reduction_ops import argmax, reduce_max, reduce_sum
from .segment_ops import unsorted_segment_sum

_MAX_DTYPES = (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64, dtypes.int8, dtypes.int16,
               dtypes.int32, dtypes.int64, dtypes.uint8, dtypes.uint16)
_AVG_DTYPES = (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64)


def max_pool2d(input, ksize, strides, padding, data_format="NHWC", name=None):  # noqa: A002
    """``tf.nn.max_pool2d`` (NHWC; padding "SAME" or "VALID")."""
    return _pool("MaxPool", input, ksize, strides, padding, data_format, name)


def avg_pool2d(input, ksize, strides, padding, data_format="NHWC", name=None):  # noqa: A002
    """``tf.nn.avg_pool2d`` (NHWC; padding "SAME" or "VALID")."""
    return _pool("AvgPool", input, ksize, strides, padding, data_format, name)


def max_pool1d(input, ksize, strides, padding, data_format="NWC", name=None):  # noqa: A002
    """``tf.nn.max_pool1d`` (NWC; padding "SAME" or "VALID")."""
    return _pool1d("MaxPool", input, ksize, strides, padding, data_format, name)


def avg_pool1d(input, ksize, strides, padding, data_format="NWC", name=None):  # noqa: A002
    """``tf.nn.avg_pool1d`` (NWC; padding "SAME" or "VALID")."""
    return _pool1d("AvgPool", input, ksize, strides, padding, data_format, name)


def max_pool(input, ksize, strides, padding, data_format=None, name=None):  # noqa: A002
    """``tf.nn.max_pool``: 3-D (NWC) or 4-D (NHWC) input."""
    if _rank_of(input) == 3:
        return max_pool1d(input, ksize, strides, padding, data_format, name)
    return _pool("MaxPool", input, ksize, strides, padding, data_format, name, nd=True)


def avg_pool(input, ksize, strides, padding, data_format=None, name=None):  # noqa: A002
    """``tf.nn.avg_pool``: 3-D (NWC) or 4-D (NHWC) input."""
    if _rank_of(input) == 3:
        return avg_pool1d(input, ksize, strides, padding, data_format, name)
    return _pool("AvgPool", input, ksize, strides, padding, data_format, name, nd=True)


def _rank_of(value):
    (x,) = convert_all([value])
    return x.shape.rank


def _pool1d(kind, input, ksize, strides, padding, data_format, name):  # noqa: A002
    """TF's max_pool1d / avg_pool1d: the window and stride [1, 1, k, 1] over [N, 1, W, C]."""
    (x,) = convert_all([input])
    data_format = data_format or "NWC"
    if data_format not in ("NWC", "NCW"):
        raise ValueError(f"data_format must be 'NWC' or 'NCW', got {data_format!r}.")   # TF: an op-def error
    y = _pool(kind, expand_dims(x, 1), [1] + _sequence1(ksize, "ksize"), [1] + _sequence1(strides, "strides"),
              padding, "NHWC" if data_format == "NWC" else "NCHW", name)
    return squeeze(y, [1])


def _sequence1(value, name):
    """TF's _get_sequence for 1 spatial dim, channel last: an int or 1 or 3 ints -> [1, k, 1]."""
    if hasattr(value, "numpy"):
        value = value.numpy()
    seq = [int(v) for v in np.asarray(value).reshape(-1)]
    if len(seq) == 3:
        return seq
    if len(seq) != 1:
        raise ValueError(f"{name} should be of length 1, 1 or 3. Received: {name}={list(seq)} of length {len(seq)}")
    return [1, seq[0], 1]


def max_pool_v1(value, ksize, strides, padding, data_format="NHWC", name=None, input=None):  # noqa: A002
    """``tf.compat.v1.nn.max_pool``."""
    return max_pool2d(value if input is None else input, ksize, strides, padding, data_format, name)


def avg_pool_v1(value, ksize, strides, padding, data_format="NHWC", name=None, input=None):  # noqa: A002
    """``tf.compat.v1.nn.avg_pool``."""
    return avg_pool2d(value if input is None else input, ksize, strides, padding, data_format, name)


def _sequence(value, name):
    """TF's _get_sequence for 2 spatial dims, channel last: an int or 1, 2 or 4 ints."""
    if hasattr(value, "numpy"):
        value = value.numpy()
    if isinstance(value, (int, np.integer)):
        return [int(value)] * 2
    try:
        seq = [int(v) for v in np.asarray(value).reshape(-1)] if np.ndim(value) else [int(value)] * 2
    except TypeError:
        raise TypeError(f"{name} must be an int or a list of ints, got {value!r}") from None
    if len(seq) == 1:
        return seq * 2
    if len(seq) == 2:
        return seq
    if len(seq) == 4:
        if seq[0] != 1 or seq[3] != 1:
            raise UnimplementedError(
                "Pooling is not yet supported on the batch dimension." if seq[0] != 1 else
                "Pooling across depth is not supported by jitgrad's pooling composites.")
        return seq[1:3]
    raise ValueError(f"{name} should be of length 1, 2 or 4. Received: {name}={list(seq)} of length {len(seq)}")


def _out_size(n, k, s, padding):
    """(output size, padding before) along one axis, as TF's GetWindowedOutputSize."""
    if padding == "VALID":
        return (n - k) // s + 1, 0
    out = -(-n // s)
    return out, max((out - 1) * s + k - n, 0) // 2


def _window_table(h, w, kh, kw, sh, sw, padding):
    """[OH, OW, KH*KW] spatial positions (row * w + col) of each window slot, or -1 for a
    padded slot; with the number of valid slots per window."""
    oh, ph = _out_size(h, kh, sh, padding)
    ow, pw = _out_size(w, kw, sw, padding)
    rows = np.arange(oh)[:, None] * sh - ph + np.arange(kh)[None, :]          # [OH, KH]
    cols = np.arange(ow)[:, None] * sw - pw + np.arange(kw)[None, :]          # [OW, KW]
    r = rows[:, None, :, None]
    c = cols[None, :, None, :]
    ok = (r >= 0) & (r < h) & (c >= 0) & (c < w)                               # [OH, OW, KH, KW]
    pos = np.where(ok, r * w + c, -1).reshape(oh, ow, kh * kw)
    return pos, ok.reshape(oh, ow, kh * kw).sum(-1)


def _pool(kind, input, ksize, strides, padding, data_format, name, nd=False):  # noqa: A002
    (x,) = convert_all([input])
    eager = context.executing_eagerly()
    err = InvalidArgumentError if eager else ValueError
    if data_format is None:
        data_format = "NHWC"
    rank = x.shape.rank
    if nd and rank is not None and rank != 4:
        raise NotImplementedError(f"jitgrad's {kind} composites pool 3-D or 4-D input only (got rank {rank}).")
    if data_format not in ("NHWC", "NCHW", "NCHW_VECT_C") or (kind == "AvgPool" and data_format == "NCHW_VECT_C"):
        raise err(f"Value for attr 'data_format' of \"{data_format}\" is not in the list of allowed values: "
                  "\"NHWC\", \"NCHW\"")
    if data_format != "NHWC":
        raise NotImplementedError(f"jitgrad's pooling supports data_format='NHWC' only, got {data_format!r}.")
    if not isinstance(padding, str):
        if kind == "AvgPool":
            raise TypeError(f"Expected string for argument 'padding' not {padding!r}.")
        raise NotImplementedError("jitgrad's max pooling supports padding 'SAME' or 'VALID', not explicit paddings.")
    if padding not in ("SAME", "VALID"):
        raise err(f"Value for attr 'padding' of \"{padding}\" is not in the list of allowed values: "
                  "\"SAME\", \"VALID\"")
    kh, kw = _sequence(ksize, "ksize")
    sh, sw = _sequence(strides, "strides")
    allowed = _MAX_DTYPES if kind == "MaxPool" else _AVG_DTYPES
    if x.dtype not in allowed:
        msg = (f"Value for attr 'T' of {x.dtype.name} is not in the list of allowed values: "
               + ", ".join(d.name for d in allowed))
        raise InvalidArgumentError(msg) if eager else TypeError(msg)
    if rank is not None and rank != 4:
        raise err(f"input must be 4-dimensional, got shape {x.shape}")
    if min(sh, sw) <= 0:
        raise err(f"Stride must be > 0, but got {[1, sh, sw, 1]}")
    if min(kh, kw) <= 0:      # TF's graph raises this when it runs
        raise InvalidArgumentError(f"Sliding window ksize must be positive, got {[1, kh, kw, 1]}")
    if rank is None or any(d is None for d in x.shape.dims[1:]):
        raise NotImplementedError(f"jitgrad's pooling needs the input's height, width and channels known when the "
                                  f"graph is built (got shape {x.shape}).")
    _, h, w, c = x.shape.dims
    if padding == "VALID" and (kh > h or kw > w):
        raise err(f"Negative dimension size caused by subtracting {kh if kh > h else kw} from "
                  f"{h if kh > h else w} in {kind} (VALID padding)")
    pos, counts = _window_table(h, w, kh, kw, sh, sw, padding)
    name = name or kind
    if kind == "AvgPool":
        return _avg(x, pos, counts, h * w, c, name)
    # a padded slot repeats the window's first valid element (every window has one)
    first = np.take_along_axis(pos, np.argmax(pos >= 0, axis=-1)[..., None], -1) if pos.size else pos
    pos = np.where(pos >= 0, pos, first)
    return _max(x, pos, h * w, c, name)


def _batch(x):
    """x's batch size: an int when known, else a tensor (a -1 in a reshape would be 0 when
    the input is empty)."""
    return x.shape.dims[0] if x.shape.dims[0] is not None else shape_of(x, out_type=dtypes.int32)[0]


def _windows(x, idx, hw, c, fill_zero=False):
    """x [N, H, W, C] gathered by idx (numpy [OH, OW, K] of positions row * W + col; hw, the
    zero row, where fill_zero) -> windows [N, OH, OW, K, C]."""
    oh, ow, k = idx.shape
    n = _batch(x)
    flat = reshape(x, [n, hw, c])
    if fill_zero:
        flat = concat([flat, zeros_like(flat[:, :1])], 1)
    win = gather(flat, constant(idx.reshape(-1).astype(np.int32)), axis=1)
    return reshape(win, [n, oh, ow, k, c])


def _avg(x, pos, counts, hw, c, name):
    oh, ow, k = pos.shape
    win = _windows(x, np.where(pos >= 0, pos, hw), hw, c, fill_zero=True)     # row hw: padded slots' zero
    total = reduce_sum(win, axis=3)
    n = constant(np.maximum(counts, 1).reshape(1, oh, ow, 1).astype(x.dtype.np))
    return divide(total, n, name=name)


def _max(x, pos, hw, c, name):
    oh, ow, k = pos.shape
    if not x.dtype.is_floating:           # no NaN, no gradient: the plain maximum
        return reduce_max(_windows(x, pos, hw, c), axis=3, name=name)

    @custom_gradient
    def max_pool(x):
        win = _windows(x, pos, hw, c)
        nan = is_nan(win)
        lowest = constant(x.dtype.min, dtype=x.dtype)
        out = maximum(reduce_max(where(nan, constant(-np.inf, dtype=x.dtype), win), axis=3), lowest)
        # the slot that takes the gradient: the first maximum, NaN never winning, unless the
        # window's first element is NaN
        slot = where(nan[:, :, :, 0], zeros_like(out, dtype=dtypes.int32), argmax(win, axis=3,
                                                                                  output_type=dtypes.int32))
        where_in = gather(constant(pos.reshape(-1).astype(np.int32)),
                          add(slot, constant((np.arange(oh * ow, dtype=np.int32) * k).reshape(1, oh, ow, 1))))
        batch = multiply(reshape(range_(_batch(x)), [-1, 1, 1, 1]), hw)
        target = add(multiply(add(where_in, batch), c), constant(np.arange(c, dtype=np.int32)))

        def grad(dy):
            dx = reshape(unsorted_segment_sum(reshape(dy, [-1]), reshape(target, [-1]), size(x)), shape_of(x))
            # TF's MaxPoolGrad takes x, and its gradient gives x zeros: the second derivative is 0,
            # not None (tf.hessians of a max pool raised ValueError). where(True, dx, x) is dx,
            # joined to x by a zero gradient (no arithmetic on x: an inf in x stays out of dx)
            return where(constant(True), dx, x)
        return out, grad

    return max_pool(x)
