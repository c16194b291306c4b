"""tf.nn.conv2d / conv1d (NHWC / NWC) as im2col: every window's pixels (op ConvPatches),
then one matmul with the filters seen as a [KH * KW * C, O] matrix.

ConvPatches reads the input where each window tap lands, zero in the padding: the windows
depend only on shapes, strides, dilations and padding, so the compiled code computes them
(an index map, codegen/lower_layout.py) rather than reading a table of indices. A table
(the gather this replaced) is a run-time argument the kernel must range-check, and a kernel
with checks runs on one thread; its gradient was a serial scatter-add.

Gradients: the matmul's two GEMMs, and ConvPatchesGrad, which sums for each input pixel the
window slots that read it (in the order the scatter-add of the gather added them, so the
results are those of the gather formulation bit for bit). The two ops are each other's
gradient, so gradients of gradients are convolutions again. Sums run in a different order
from TF's kernels: float32 results agree to rounding, not bit for bit.
"""
import numpy as np

from ..convert import convert_all
from ..eager import EagerTensor
from ..errors import InvalidArgumentError
from ..shapes import require_shape
from .array_ops import expand_dims, reshape, squeeze
from .linalg_ops import matmul
from .registry import apply_op, register


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
    if (kh, kw, sh, sw, oh, ow, pt, pb, pl, pr) == (1, 1, 1, 1, h, wd, 0, 0, 0, 0):   # no windows
        cols = reshape(x, [-1, c])
    else:
        attrs = {"window": (kh, kw), "strides": (sh, sw), "dilations": (dh, dw), "pads": (pt, pl), "out": (oh, ow)}
        cols = reshape(apply_op("ConvPatches", [x], attrs), [-1, kh * kw * c])
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


def _taps(attrs):
    """Per filter tap (i, j): the slices of the padded input its window slots read."""
    (kh, kw), (sh, sw), (dh, dw), (oh, ow) = attrs["window"], attrs["strides"], attrs["dilations"], attrs["out"]
    return [(i, j, slice(i * dh, i * dh + (oh - 1) * sh + 1, sh), slice(j * dw, j * dw + (ow - 1) * sw + 1, sw))
            for i in range(kh) for j in range(kw)]


def _padded_input(attrs, shape, dtype):
    """Zeros shaped as the input padded enough for every window, and where the input starts."""
    (kh, kw), (sh, sw), (dh, dw), (pt, pl), (oh, ow) = (attrs[k] for k in ("window", "strides", "dilations",
                                                                         "pads", "out"))
    n, h, w, c = shape
    hp = max(pt + h, (oh - 1) * sh + (kh - 1) * dh + 1)
    wp = max(pl + w, (ow - 1) * sw + (kw - 1) * dw + 1)
    return np.zeros((n, hp, wp, c), dtype), (slice(None), slice(pt, pt + h), slice(pl, pl + w))


def _patches_kernel(attrs, x):
    xp, inner = _padded_input(attrs, x.shape, x.dtype)
    xp[inner] = x
    (kh, kw), (oh, ow) = attrs["window"], attrs["out"]
    out = np.empty((x.shape[0], oh, ow, kh, kw, x.shape[3]), x.dtype)
    for i, j, rows, cols in _taps(attrs):
        out[:, :, :, i, j] = xp[:, rows, cols]
    return out


def _patches_grad_kernel(attrs, g, ref):
    gp, inner = _padded_input(attrs, ref.shape, g.dtype)
    # taps last to first: a pixel's window slots in the order of their windows, as the
    # scatter-add of the im2col gather added them (codegen/lower_layout.py sums so too)
    for i, j, rows, cols in reversed(_taps(attrs)):
        gp[:, rows, cols] += g[:, :, :, i, j]
    return np.ascontiguousarray(gp[inner])


def _patches_infer(shapes, dts, attrs):
    n, h, w, c = shapes[0]
    return [((n,) + tuple(attrs["out"]) + tuple(attrs["window"]) + (c,), dts[0])]


def _patches_grad_infer(shapes, dts, attrs):
    """The gradient of ConvPatches(input 1), shaped as its input: input 0 is shaped as its output."""
    require_shape(0, shapes[0], _patches_infer(shapes[1:], dts[1:], attrs)[0][0])
    return [(shapes[1], dts[0])]


def _attrs(op):
    return {k: op.get_attr(k) for k in ("window", "strides", "dilations", "pads", "out")}


register("ConvPatches", infer=_patches_infer, kernel=_patches_kernel, kind="layout",
         grad=lambda op, g: [apply_op("ConvPatchesGrad", [g, op.inputs[0]], _attrs(op))])
register("ConvPatchesGrad", infer=_patches_grad_infer, kernel=_patches_grad_kernel, kind="other", denormals="flush",
         grad=lambda op, g: [apply_op("ConvPatches", [g], _attrs(op)), None], shape_only=(1,))
