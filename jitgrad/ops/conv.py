"""tf.nn.conv2d / conv1d (NHWC / NWC) as im2col: a gather of every window's pixels, then one
matmul with the filters seen as a [KH * KW * C, O] matrix.

The windows' pixel indices depend only on shapes, strides, dilations and padding, so they
are a constant of the graph: the gather and the matmul are existing ops (the matmul runs on
the packed GEMM), and the gradients are theirs -- the gather's is a scatter-add into the
padded input, the matmul's two GEMMs. Sums run in a different order from TF's kernels:
float32 results agree to rounding, not bit for bit.
"""
import numpy as np

from ..convert import convert_all
from ..eager import EagerTensor
from ..errors import InvalidArgumentError
from .array_ops import expand_dims, gather, pad, reshape, squeeze
from .linalg_ops import matmul


def conv2d(input, filters, strides, padding, data_format="NHWC", dilations=None, name=None):  # noqa: A002
    """``tf.nn.conv2d``: input [N, H, W, C], filters [KH, KW, C, O] -> [N, OH, OW, O]."""
    x, w = convert_all([input, filters])
    err = InvalidArgumentError if isinstance(x, EagerTensor) else ValueError
    if data_format not in ("NHWC", None):
        raise NotImplementedError("jitgrad's conv2d supports data_format='NHWC' only.")
    if x.dtype != w.dtype:
        raise TypeError(f"conv2d: input and filters must have the same dtype, got {x.dtype.name} and "
                        f"{w.dtype.name}")
    if x.shape.rank != 4 or w.shape.rank != 4:
        raise err(f"conv2d needs a 4-D input and 4-D filters, got shapes {x.shape} and {w.shape}")
    _, h, wd, c = x.shape.dims
    kh, kw, ci, o = w.shape.dims
    if None in (h, wd, c) or None in (kh, kw, ci, o):
        raise NotImplementedError("jitgrad's conv2d needs the input's height, width and channels and the "
                                  "filters' shape known when the graph is built.")
    if ci != c:
        raise err(f"input depth ({c}) must equal the filters' in_channels ({ci}) (grouped convolutions are "
                  "not supported)")
    sh, sw = _spatial(strides, "strides", err)
    dh, dw = _spatial(1 if dilations is None else dilations, "dilations", err)
    (pt, pb), oh = _padded(h, kh, sh, dh, padding, 0, err)
    (pl, pr), ow = _padded(wd, kw, sw, dw, padding, 1, err)
    if (pt, pb, pl, pr) != (0, 0, 0, 0):
        x = pad(x, [[0, 0], [pt, pb], [pl, pr], [0, 0]])
    hp, wp = h + pt + pb, wd + pl + pr
    if (kh, kw, sh, sw, oh, ow) == (1, 1, 1, 1, hp, wp):          # 1 x 1, stride 1: no windows
        cols = reshape(x, [-1, c])
    else:
        rows = (np.arange(oh) * sh)[:, None, None, None] + (np.arange(kh) * dh)[None, None, :, None]
        cols_ = (np.arange(ow) * sw)[None, :, None, None] + (np.arange(kw) * dw)[None, None, None, :]
        index = (rows * wp + cols_).astype(np.int32).reshape(-1)      # [OH, OW, KH, KW] flattened
        patches = gather(reshape(x, [-1, hp * wp, c]), index, axis=1)  # [N, OH*OW*KH*KW, C]
        cols = reshape(patches, [-1, kh * kw * c])
    out = matmul(cols, reshape(w, [kh * kw * c, o]))
    return reshape(out, [-1, oh, ow, o], name=name)


def conv1d(input, filters, stride, padding, data_format="NWC", dilations=None, name=None):  # noqa: A002
    """``tf.nn.conv1d``: input [N, W, C], filters [K, C, O] -> [N, OW, O] (conv2d of height 1)."""
    if data_format not in ("NWC", None):
        raise NotImplementedError("jitgrad's conv1d supports data_format='NWC' only.")
    x, w = convert_all([input, filters])
    s = _one(stride, "stride")
    d = 1 if dilations is None else _one(dilations, "dilations")
    if not isinstance(padding, str):
        padding = [[0, 0], [0, 0]] + [list(p) for p in list(padding)[1:2]] + [[0, 0]]
    y = conv2d(expand_dims(x, 1), expand_dims(w, 0), [1, 1, s, 1], padding, dilations=[1, 1, d, 1])
    return squeeze(y, [1], name=name)


def _one(v, what):
    vals = [int(a) for a in np.atleast_1d(v)]
    if len(vals) == 3:
        return vals[1]
    if len(vals) != 1:
        raise ValueError(f"{what} must be an int or a list of 1 or 3 ints, got {v!r}")
    return vals[0]


def _spatial(v, what, err):
    """TF's 1, 2 or 4 ints (N, H, W, C with 1 for N and C) -> (h, w)."""
    vals = [int(a) for a in np.atleast_1d(v)]
    if len(vals) == 1:
        vals = vals * 2
    elif len(vals) == 4:
        if vals[0] != 1 or vals[3] != 1:
            raise err(f"conv2d: {what} in the batch and depth dimensions must be 1, got {vals}")
        vals = vals[1:3]
    elif len(vals) != 2:
        raise ValueError(f"{what} must be an int or a list of 1, 2 or 4 ints, got {v!r}")
    if min(vals) < 1:
        raise err(f"conv2d: {what} must be positive, got {vals}")
    return vals


def _padded(size, k, stride, dilation, padding, axis, err):
    """((before, after), output size) of one spatial axis, as TF computes them."""
    span = (k - 1) * dilation + 1
    if isinstance(padding, str):
        mode = padding.upper()
        if mode == "VALID":
            out = (size - span) // stride + 1 if size >= span else 0
            before = after = 0
        elif mode == "SAME":
            out = -(-size // stride)
            total = max((out - 1) * stride + span - size, 0)
            before, after = total // 2, total - total // 2
        else:
            raise ValueError(f"padding must be 'SAME', 'VALID' or explicit pairs, got {padding!r}")
    else:
        pairs = [list(p) for p in padding]
        if len(pairs) != 4 or any(len(p) != 2 for p in pairs) or pairs[0] != [0, 0] or pairs[3] != [0, 0]:
            raise ValueError(f"explicit padding must be [[0, 0], [top, bottom], [left, right], [0, 0]], got "
                             f"{padding!r}")
        before, after = (int(v) for v in pairs[1 + axis])
        if before < 0 or after < 0:
            raise ValueError(f"explicit padding must be non-negative, got {padding!r}")
        full = size + before + after
        out = (full - span) // stride + 1 if full >= span else 0
    if out <= 0:
        raise err(f"conv2d: the filter (span {span}) does not fit the padded input ({size + before + after})")
    return (before, after), out
