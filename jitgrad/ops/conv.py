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
from .array_ops import expand_dims, get_static_value, reshape, squeeze, zeros
from .linalg_ops import matmul
from .math_ops import add, multiply
from .reduction_ops import reduce_sum
from .registry import apply_op, register


def _checked_nhwc(what, input_, filters, data_format, filter_name="filters"):
    """(x, w, error type) for an NHWC convolution: TF's argument checks shared by conv2d,
    depthwise_conv2d and conv2d_transpose; shapes known when the graph is built (jitgrad's)."""
    x, w = convert_all([input_, filters])
    err = InvalidArgumentError if isinstance(x, EagerTensor) else ValueError
    if data_format not in ("NHWC", None):
        raise NotImplementedError(f"jitgrad's {what} supports data_format='NHWC' only.")
    if x.dtype != w.dtype:      # TF: the op's eager dtype check, or its graph op-def TypeError
        raise (InvalidArgumentError if isinstance(x, EagerTensor) else TypeError)(
            f"{what}: input and {filter_name} must have the same dtype, got {x.dtype.name} and {w.dtype.name}")
    if x.shape.rank != 4 or w.shape.rank != 4:
        raise err(f"{what} needs a 4-D input and 4-D {filter_name}, got shapes {x.shape} and {w.shape}")
    if None in x.shape.dims[1:] or None in w.shape.dims:
        raise NotImplementedError(f"jitgrad's {what} needs the input's height, width and channels and the "
                                  f"{filter_name}' shape known when the graph is built.")
    return x, w, err


def conv2d(input, filters, strides, padding, data_format="NHWC", dilations=None, name=None):  # noqa: A002
    """``tf.nn.conv2d``: input [N, H, W, C], filters [KH, KW, C, O] -> [N, OH, OW, O]."""
    x, w, err = _checked_nhwc("conv2d", input, filters, data_format)
    _, h, wd, c = x.shape.dims
    kh, kw, ci, o = w.shape.dims
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


def depthwise_conv2d(input, filter, strides, padding, data_format=None, dilations=None, name=None):  # noqa: A002
    """``tf.nn.depthwise_conv2d``: input [N, H, W, C], filter [KH, KW, C, M] -> [N, OH, OW, C * M],
    channel c * M + m the window of channel c times filter[..., c, m]. Built of its parts (so
    compiled and differentiated as they are): the windows (ConvPatches) seen as
    [..., KH * KW, C, 1], times the filter [KH * KW, C, M], summed over the taps."""
    x, w, err = _checked_nhwc("depthwise_conv2d", input, filter, data_format, "filter")
    _, h, wd, c = x.shape.dims
    kh, kw, ci, m = w.shape.dims
    if ci != c:
        raise err(f"input and filter must have the same depth: {c} vs {ci}")
    vals = [int(a) for a in np.atleast_1d(strides)]
    if len(vals) != 4:          # TF's DepthwiseConv2dNative: 4 strides, equal in H and W
        raise err(f"Sliding window strides field must specify 4 dimensions, got {strides!r}")
    if vals[0] != 1 or vals[3] != 1:
        raise err("Current implementation does not yet support strides in the batch and depth dimensions.")
    if vals[1] != vals[2]:
        raise err("Current implementation only supports equal length strides in the row and column dimensions.")
    sh, sw = _spatial(vals, "strides", err)
    dh, dw = _spatial(1 if dilations is None else dilations, "dilations", err)
    if max(sh, sw) > 1 and max(dh, dw) > 1:
        # TF warns and computes windows that are no strided dilated convolution (a 7x6 image
        # gives 3x4 outputs); Keras layers decompose instead, as _depthwise does
        raise ValueError(f"When dilation rate is greater than 1, then all values of strides must be 1. Received: "
                         f"`dilation rate` {[dh, dw]} and `strides` {vals}")
    return _depthwise(x, w, (sh, sw), padding, (dh, dw), err, name)


def _depthwise(x, w, strides, padding, dilations, err, name=None):
    """depthwise_conv2d of checked arguments; strides and dilations both > 1 allowed (the
    windows of the dilated stride-1 conv, subsampled: Keras 3's layers)."""
    _, h, wd, c = x.shape.dims
    kh, kw, _, m = w.shape.dims
    (sh, sw), (dh, dw) = strides, dilations
    (pt, _), oh = _padded(h, kh, sh, dh, padding, 0, err)
    (pl, _), ow = _padded(wd, kw, sw, dw, padding, 1, err)
    attrs = {"window": (kh, kw), "strides": (sh, sw), "dilations": (dh, dw), "pads": (pt, pl), "out": (oh, ow)}
    taps = reshape(apply_op("ConvPatches", [x], attrs), [-1, oh, ow, kh * kw, c, 1])
    out = reduce_sum(multiply(taps, reshape(w, [kh * kw, c, m])), axis=3)
    return reshape(out, [-1, oh, ow, c * m], name=name)


def separable_conv2d(input, depthwise_filter, pointwise_filter, strides, padding, data_format=None,  # noqa: A002
                     dilations=None, name=None):
    """``tf.nn.separable_conv2d``: depthwise_conv2d, then a 1x1 conv2d with pointwise_filter
    [1, 1, C * M, O]."""
    pw = convert_all([pointwise_filter])[0]
    if pw.shape.rank == 4 and any(d not in (None, 1) for d in pw.shape.dims[:2]):
        raise ValueError(f"Dimensions {[d for d in pw.shape.dims[:2] if d != 1][0]} and 1 are not compatible "
                         f"(the pointwise filter must be 1x1, got shape {pw.shape})")
    y = depthwise_conv2d(input, depthwise_filter, strides, padding, data_format, dilations)
    return conv2d(y, pw, [1, 1, 1, 1], "VALID", name=name)


def conv2d_transpose(input, filters, output_shape, strides, padding="SAME", data_format="NHWC",  # noqa: A002
                     dilations=None, name=None):
    """``tf.nn.conv2d_transpose``: input [N, H, W, I], filters [KH, KW, O, I] -> output_shape
    [N, OH, OW, O], the gradient with respect to its input of conv2d (output_shape-shaped input,
    the same filters, strides, padding) given ``input`` as the output's gradient: TF's
    conv2d_backprop_input. One matmul to every window's slots, then ConvPatchesGrad sums the
    slots onto the pixels they read; gradients are conv2d's pieces again. Unlike TF's CPU
    kernel, dilations > 1 are computed (as TF's GPU kernel does) rather than refused."""
    x, w, err = _checked_nhwc("conv2d_transpose", input, filters, data_format)
    n, h, wd, ci = x.shape.dims
    kh, kw, o, wi = w.shape.dims
    dims = _output_dims(output_shape)
    if len(dims) != 4:
        raise ValueError(f"output_shape must have shape (4,), got {output_shape!r}")
    on, oh, ow, oc = dims
    if None in (oh, ow, oc):
        raise NotImplementedError("jitgrad's conv2d_transpose needs output_shape's height, width and channels "
                                  "known when the graph is built (the batch may come from the input).")
    if wi != ci:
        raise err(f"Conv2DCustomBackpropInput: filter and out_backprop must have the same out_depth: {wi} vs {ci}")
    if oc != o:
        raise err(f"Conv2DCustomBackpropInput: input depth must be evenly divisible by filter depth: {oc} vs {o}")
    if on is not None and n is not None and on != n:
        raise err(f"Conv2DCustomBackpropInput: input and out_backprop must have the same batch size: {on} vs {n}")
    sh, sw = _spatial(strides, "strides", err)
    dh, dw = _spatial(1 if dilations is None else dilations, "dilations", err)
    (pt, _), fh = _padded(oh, kh, sh, dh, padding, 0, err)
    (pl, _), fw = _padded(ow, kw, sw, dw, padding, 1, err)
    if (fh, fw) != (h, wd):
        raise err(f"Conv2DCustomBackpropInput: Size of out_backprop doesn't match computed: actual = {(h, wd)}, "
                  f"computed = {(fh, fw)} (output_shape {[on, oh, ow, oc]}, filter {(kh, kw)}, strides "
                  f"{(sh, sw)}, dilations {(dh, dw)}, padding {padding!r})")
    slots = matmul(reshape(x, [-1, ci]), reshape(w, [kh * kw * o, ci]), transpose_b=True)
    slots = reshape(slots, [-1, h, wd, kh, kw, o])
    if on is None:
        on = n
    if on is not None:
        ref = zeros([on, oh, ow, o], x.dtype)
    else:       # the batch known when it runs: [N, 1, 1, 1] + [OH, OW, O] (only its shape is read)
        ref = add(zeros([oh, ow, o], x.dtype), multiply(x[:, :1, :1, :1], zeros([], x.dtype)))
    attrs = {"window": (kh, kw), "strides": (sh, sw), "dilations": (dh, dw), "pads": (pt, pl), "out": (h, wd)}
    out = apply_op("ConvPatchesGrad", [slots, ref], attrs)
    return reshape(out, [-1, oh, ow, o], name=name) if name else out


def conv1d_transpose(input, filters, output_shape, strides, padding="SAME", data_format="NWC",  # noqa: A002
                     dilations=None, name=None):
    """``tf.nn.conv1d_transpose``: input [N, W, I], filters [K, O, I] -> output_shape [N, OW, O]
    (conv2d_transpose of height 1)."""
    if data_format not in ("NWC", None):
        raise NotImplementedError("jitgrad's conv1d_transpose supports data_format='NWC' only.")
    x, w = convert_all([input, filters])
    dims = _output_dims(output_shape)
    if len(dims) != 3:
        raise ValueError(f"output_shape must have shape (3,), got {output_shape!r}")
    s = _one(strides, "strides")
    d = 1 if dilations is None else _one(dilations, "dilations")
    if not isinstance(padding, str):
        padding = [[0, 0], [0, 0]] + [list(p) for p in list(padding)[1:2]] + [[0, 0]]
    y = conv2d_transpose(expand_dims(x, 1), expand_dims(w, 0), [dims[0], 1] + dims[1:], [1, 1, s, 1], padding,
                         dilations=[1, 1, d, 1])
    return squeeze(y, [1], name=name)


def _output_dims(output_shape):
    """output_shape's entries, None where not known before running (a tensor entry: the batch)."""
    whole = get_static_value(output_shape) if not isinstance(output_shape, (list, tuple)) else None
    if whole is not None:
        return [int(v) for v in np.atleast_1d(whole)]
    if not isinstance(output_shape, (list, tuple)):
        raise NotImplementedError("jitgrad's conv transposes need output_shape known when the graph is built.")
    dims = []
    for v in output_shape:
        if v is None:
            dims.append(None)
            continue
        known = get_static_value(v)
        dims.append(None if known is None else int(known))
    return dims


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
