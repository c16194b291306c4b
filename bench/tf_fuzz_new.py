"""The ops added in round 36 for bench/tf_fuzz.py (`--new`): convolutions (conv2d with strides,
SAME / VALID / explicit padding and dilations, depthwise, separable, conv2d_transpose, conv1d,
conv1d_transpose), 1-D / 2-D max and average pooling, tf.image (flips, rot90, crop / pad, resize
bilinear / nearest with antialias, brightness / contrast / gamma, per_image_standardization,
rgb_to_grayscale), cumulative_logsumexp, lgamma / digamma / erfinv / ndtri, repeat,
sequence_mask, searchsorted, reverse_sequence, strided_slice with every mask,
tensor_scatter_nd_update / max / min, space_to_depth, lrn, linalg.set_diag, count_nonzero,
meshgrid; and for integer programs tf.bitwise, the & | ^ ~ operators, truncatediv /
truncatemod, unravel_index, repeat, count_nonzero.

    PYTHONPATH=. /work/benchenv/bin/python bench/tf_fuzz.py --new [--programs 300] [--seed 360000]
        [--modes graph,eager,function,int]

(a copy of bench/ for long runs, as tf_fuzz.py says). tests/test_new_ops_differential.py draws
from the same catalogue for its compiled-vs-interpreted check.

What TF 2.21 does that the catalogue steps around (each said where it does): its Eigen CPU
conv backprops refuse dilations > 1 (dilated convs get no gradient here), it has no float16 /
float64 gradient of an antialiased resize and no float16 adjust_contrast kernel, its graph
rot90 and repeat have unknown static shapes (reshaped back), and its searchsorted / sort of a
sequence holding NaN are undefined (NaN zeroed first).

Kept apart from the base and wide catalogues (as tf_fuzz_wide.py explains) so that without
`--new` every earlier seed draws exactly the program it always drew.

The inputs of a program are small tensors of any of tf_fuzz.BASE_SHAPES; an op that wants an
image or a sequence refills one (`_fill`: x's values, tiled and scaled, in the shape it needs)
so that its gradient reaches the program's inputs. Binary builders take their filter / second
operand from b the same way. Each builder is (tf, x, p) -> float tensor (NEW_UNARY),
(tf, a, b, p) -> float tensor (NEW_BINARY), or the integer kinds (NEW_INT_UNARY / NEW_INT_BINARY),
p a random int for parameters.
"""
import numpy as np


def _rank(x):
    return len(x.shape)


def _size(x):
    """x's static size, None when TF's shape inference leaves a dimension unknown (repeat)."""
    if any(d is None for d in x.shape):
        return None
    return int(np.prod(x.shape)) if _rank(x) else 1


def _fill(tf, x, shape):
    """A tensor of `shape` made of x's values (tiled, each copy scaled differently so that the
    windows of a convolution do not all see the same numbers); differentiable in x."""
    n = int(np.prod(shape))
    flat = tf.reshape(x, [-1])
    reps = -(-n // _size(x)) if _size(x) else n
    tiled = tf.tile(flat, [reps])[:n]
    scale = (1.0 + 0.25 * (np.arange(n) % 5) - 0.1 * (np.arange(n) // 7 % 3)).astype(np.float32)
    return tf.reshape(tiled * tf.cast(scale, x.dtype), shape)


def _pick(p, options, shift=0):
    return options[(p >> shift) % len(options)]


# ------------------------------------------------------------------ convolutions

def _padding(p, shift, rank2=True):
    kind = _pick(p, ["SAME", "VALID", "SAME", "VALID", "EXPLICIT"], shift)
    if kind != "EXPLICIT":
        return kind
    a, b, c, d = (p >> (shift + 3)) % 2, (p >> (shift + 4)) % 3, (p >> (shift + 5)) % 2, (p >> (shift + 6)) % 2
    return [[0, 0], [a, b], [c, d], [0, 0]] if rank2 else [[0, 0], [a, b], [0, 0]]


def _no_dilated_gradient(tf, d, x, f):
    """TF 2.21's Eigen CPU Conv2DBackpropInput / Filter (tf_fuzz.py turns oneDNN off) refuse
    dilations > 1 ("Current CPU implementations do not yet support dilation rates larger than
    1"): a dilated conv's gradient has nothing to compare with, so it gets none (its value is
    still compared; jitgrad's compiled and interpreted gradients by tests/test_new_ops_differential.py)."""
    return (tf.stop_gradient(x), tf.stop_gradient(f)) if d > 1 else (x, f)


def _conv2d(tf, a, b, p):
    h, w, c, o = _pick(p, [3, 4, 5]), _pick(p, [3, 4, 5], 2), _pick(p, [1, 2], 4), _pick(p, [1, 2], 5)
    kh, kw = _pick(p, [1, 2, 3], 6), _pick(p, [1, 2], 8)
    s, d = _pick(p, [1, 1, 2], 9), _pick(p, [1, 1, 2], 11)
    if s > 1 and d > 1:
        d = 1
    pad = _padding(p, 13)
    if pad not in ("SAME", "VALID"):
        d = 1       # TF 2.21's CPU Conv2DBackpropInput refuses explicit padding with dilations (jitgrad has it)
    if pad == "VALID" and ((kh - 1) * d + 1 > h or (kw - 1) * d + 1 > w):
        pad = "SAME"
    x = _fill(tf, a, [1 + (p >> 20) % 2, h, w, c])
    f = _fill(tf, tf.sin(b) * 0.5, [kh, kw, c, o])
    x, f = _no_dilated_gradient(tf, d, x, f)
    return tf.nn.conv2d(x, f, strides=[1, s, s, 1] if (p >> 21) % 2 else s, padding=pad, dilations=d)


def _depthwise(tf, a, b, p):
    h, w, c, m = _pick(p, [3, 4, 5]), _pick(p, [3, 4], 2), _pick(p, [1, 2], 4), _pick(p, [1, 2], 5)
    kh, kw = _pick(p, [1, 2, 3], 6), _pick(p, [1, 2], 8)
    s, d = _pick(p, [1, 1, 2], 9), _pick(p, [1, 1, 2], 11)
    if s > 1 and d > 1:
        d = 1
    pad = _pick(p, ["SAME", "VALID"], 13)
    if pad == "VALID" and ((kh - 1) * d + 1 > h or (kw - 1) * d + 1 > w):
        pad = "SAME"
    x = _fill(tf, a, [1, h, w, c])
    f = _fill(tf, tf.cos(b) * 0.5, [kh, kw, c, m])
    return tf.nn.depthwise_conv2d(x, f, strides=[1, s, s, 1], padding=pad, dilations=[d, d])


def _separable(tf, a, b, p):
    h, w, c, m, o = _pick(p, [3, 4]), _pick(p, [3, 4, 5], 1), _pick(p, [1, 2], 3), _pick(p, [1, 2], 4), \
        _pick(p, [1, 2, 3], 5)
    kh, kw = _pick(p, [1, 2, 3], 7), _pick(p, [1, 2], 9)
    s, d = _pick(p, [1, 1, 2], 10), _pick(p, [1, 1, 2], 12)
    if s > 1 and d > 1:
        d = 1
    pad = _pick(p, ["SAME", "VALID"], 14)
    if pad == "VALID" and ((kh - 1) * d + 1 > h or (kw - 1) * d + 1 > w):
        pad = "SAME"
    x = _fill(tf, a, [1, h, w, c])
    df = _fill(tf, tf.sin(b) * 0.5, [kh, kw, c, m])
    pf = _fill(tf, tf.cos(b) * 0.5, [1, 1, c * m, o])
    return tf.nn.separable_conv2d(x, df, pf, strides=[1, s, s, 1], padding=pad, dilations=[d, d])


def _conv2d_transpose(tf, a, b, p):
    h, w, c, o = _pick(p, [2, 3]), _pick(p, [2, 3, 4], 1), _pick(p, [1, 2], 3), _pick(p, [1, 2], 4)
    kh, kw = _pick(p, [1, 2, 3], 5), _pick(p, [1, 2, 3], 7)
    s = _pick(p, [1, 2, 2, 3], 9)
    pad = _pick(p, ["SAME", "VALID"], 11)
    d = 1       # TF 2.21's CPU Conv2DBackpropFilter (its gradient) refuses dilations > 1 here
    if pad == "SAME":
        oh, ow = h * s, w * s
    else:
        oh, ow = (h - 1) * s + (kh - 1) * d + 1, (w - 1) * s + (kw - 1) * d + 1
    # TF accepts any output size whose forward conv gives back (h, w): one more row sometimes
    if s > 1 and (p >> 14) % 2:
        oh += 1 if pad == "VALID" or (oh + 1 + s - 1) // s == h else 0
    x = _fill(tf, a, [1, h, w, o])
    f = _fill(tf, tf.sin(b) * 0.5, [kh, kw, c, o])
    return tf.nn.conv2d_transpose(x, f, [1, oh, ow, c], strides=s, padding=pad, dilations=d)


def _conv1d(tf, a, b, p):
    w, c, o, k = _pick(p, [3, 4, 5, 6]), _pick(p, [1, 2], 2), _pick(p, [1, 2], 3), _pick(p, [1, 2, 3], 4)
    s, d = _pick(p, [1, 1, 2], 6), _pick(p, [1, 1, 2], 8)
    if s > 1 and d > 1:
        d = 1
    pad = _pick(p, ["SAME", "VALID"], 10)
    if pad == "VALID" and (k - 1) * d + 1 > w:
        pad = "SAME"
    x = _fill(tf, a, [1 + (p >> 11) % 2, w, c])
    f = _fill(tf, tf.cos(b) * 0.5, [k, c, o])
    x, f = _no_dilated_gradient(tf, d, x, f)
    return tf.nn.conv1d(x, f, stride=s, padding=pad, dilations=d)


def _conv1d_transpose(tf, a, b, p):
    w, c, o, k = _pick(p, [2, 3, 4]), _pick(p, [1, 2], 2), _pick(p, [1, 2], 3), _pick(p, [1, 2, 3], 4)
    s = _pick(p, [1, 2, 3], 6)
    pad = _pick(p, ["SAME", "VALID"], 8)
    ow = w * s if pad == "SAME" else (w - 1) * s + k
    x = _fill(tf, a, [1, w, o])
    f = _fill(tf, tf.sin(b) * 0.5, [k, c, o])
    return tf.nn.conv1d_transpose(x, f, [1, ow, c], strides=s, padding=pad)


# ------------------------------------------------------------------ pooling

def _pool2d(tf, x, p):
    h, w, c = _pick(p, [2, 3, 4, 5]), _pick(p, [2, 3, 4], 2), _pick(p, [1, 2], 4)
    k = [_pick(p, [1, 2, 3], 5), _pick(p, [1, 2], 7)]
    s = [_pick(p, [1, 2, 3], 8), _pick(p, [1, 2], 10)]
    pad = _pick(p, ["SAME", "VALID"], 11)
    if pad == "VALID" and (k[0] > h or k[1] > w):
        pad = "SAME"
    t = _fill(tf, x, [1, h, w, c])
    fn = tf.nn.max_pool2d if (p >> 12) % 2 else tf.nn.avg_pool2d
    return fn(t, ksize=k, strides=s, padding=pad)


def _pool1d(tf, x, p):
    w, c = _pick(p, [2, 3, 4, 5, 6]), _pick(p, [1, 2], 3)
    k, s = _pick(p, [1, 2, 3], 4), _pick(p, [1, 2, 3], 6)
    pad = _pick(p, ["SAME", "VALID"], 8)
    if pad == "VALID" and k > w:
        pad = "SAME"
    t = _fill(tf, x, [1, w, c])
    fn = tf.nn.max_pool1d if (p >> 9) % 2 else tf.nn.avg_pool1d
    return fn(t, ksize=k, strides=s, padding=pad)


# ------------------------------------------------------------------ images

def _image(tf, x, p, c=None):
    h, w = _pick(p, [2, 3, 4]), _pick(p, [2, 3, 5], 2)
    c = c or _pick(p, [1, 3], 4)
    shape = [h, w, c] if (p >> 5) % 2 else [1 + (p >> 6) % 2, h, w, c]
    return _fill(tf, x, shape)


def _flip_rot(tf, x, p):
    img = _image(tf, x, p)
    k = (p >> 7) % 4
    if k == 2:     # TF's graph rot90 is a tf.case of the four turns: its static shape is unknown
        turns = (p >> 9) % 5
        shape = [int(d) for d in img.shape]
        if turns % 2:
            shape[-3], shape[-2] = shape[-2], shape[-3]
        return tf.reshape(tf.image.rot90(img, k=turns), shape)
    return [lambda: tf.image.flip_left_right(img), lambda: tf.image.flip_up_down(img), None,
            lambda: tf.image.transpose(img)][k]()


def _crop_pad(tf, x, p):
    img = _image(tf, x, p)
    h, w = int(img.shape[-3]), int(img.shape[-2])
    if (p >> 7) % 2:
        oh, ow = (p >> 8) % h, (p >> 10) % w
        return tf.image.crop_to_bounding_box(img, oh, ow, h - oh, w - ow)
    oh, ow = (p >> 8) % 2, (p >> 10) % 3
    return tf.image.pad_to_bounding_box(img, oh, ow, h + oh + (p >> 12) % 2, w + ow)


def _resize(tf, x, p):
    img = _image(tf, x, p)
    size = [_pick(p, [1, 2, 3, 5, 7], 7), _pick(p, [1, 2, 4, 6], 10)]
    method = _pick(p, ["bilinear", "nearest"], 12)
    # TF 2.21 has only a float32 gradient of an antialiased resize (ScaleAndTranslateGrad: TypeError)
    antialias = bool((p >> 13) % 2) and x.dtype == tf.float32
    return tf.image.resize(img, size, method=method, antialias=antialias)


def _adjust(tf, x, p):
    img = _image(tf, x, p)
    k = (p >> 7) % 5
    if k == 0:
        return tf.image.adjust_brightness(img, [-0.3, 0.25, 1.5][(p >> 9) % 3])
    if k == 1 and x.dtype != tf.float16:     # TF 2.21 has no eager float16 AdjustContrastv2 kernel
        return tf.image.adjust_contrast(img, [0.5, 2.0, -1.0][(p >> 9) % 3])
    if k == 2:
        return tf.image.adjust_gamma(tf.abs(img) + 0.1, gamma=[0.5, 1.0, 2.2][(p >> 9) % 3],
                                     gain=[1.0, 0.7][(p >> 11) % 2])
    if k == 3:
        return tf.image.per_image_standardization(img)
    return tf.image.rgb_to_grayscale(_image(tf, x, p, c=3))


# ------------------------------------------------------------------ special functions, scans

def _cumulative_logsumexp(tf, x, p):
    if not _rank(x):
        return x
    return tf.math.cumulative_logsumexp(x, axis=p % _rank(x) - (_rank(x) if (p >> 3) % 2 else 0),
                                        exclusive=bool((p >> 1) % 2), reverse=bool((p >> 2) % 2))


def _special(tf, x, p):
    k = p % 5
    if k == 0:
        return tf.math.lgamma(x)
    if k == 1:
        return tf.math.digamma(x)
    if k == 2:
        return tf.math.erfinv(tf.tanh(x) * 0.999)
    if k == 3:
        return tf.math.ndtri(tf.sigmoid(x))
    return tf.math.erfinv(x * 0.5)          # |x| > 2: outside [-1, 1], NaN; +-1: infinities


# ------------------------------------------------------------------ array ops

def _repeat(tf, x, p):
    """(Reshaped to the shape numpy's repeat gives: TF's graph leaves it unknown.)"""
    if not _rank(x) or (p >> 1) % 3 == 0:
        return tf.reshape(tf.repeat(x, 1 + p % 3), [_size(x) * (1 + p % 3)])     # axis None: flattened
    ax = p % _rank(x)
    d = int(x.shape[ax])
    reps = np.random.default_rng(p).integers(0, 3, size=d).astype(np.int32)
    shape = [int(v) for v in x.shape]
    shape[ax] = int(reps.sum())
    return tf.reshape(tf.repeat(x, reps, axis=ax), shape)


def _sequence_mask(tf, x, p):
    if not _rank(x):
        return x
    n = int(x.shape[-1])
    lens = np.random.default_rng(p).integers(0, n + 1, size=tuple(x.shape[:-1])).astype(np.int32)
    m = tf.sequence_mask(lens, n if p % 2 else None, dtype=x.dtype)
    if not p % 2:       # maxlen = max(lens): pad the mask to n
        m = tf.pad(m, [[0, 0]] * (_rank(x) - 1) + [[0, n - int(lens.max()) if lens.size else n]])
    return x * m


def _searchsorted(tf, a, b, p):
    if not _rank(a):
        a = tf.reshape(a, [1])
    # (a NaN in the sequence leaves it unsorted: TF's binary search and its sort of NaN are
    # undefined behaviour there, and jitgrad's differ -- README)
    flat = tf.reshape(a, [1, -1])
    seq = tf.sort(tf.where(tf.math.is_nan(flat), tf.zeros_like(flat), flat))
    vals = tf.reshape(b, [1, -1])
    side = _pick(p, ["left", "right"])
    idx = tf.searchsorted(seq, vals, side=side, out_type=_pick(p, [tf.int32, tf.int64], 1))
    return tf.cast(idx, a.dtype) + vals * 0.5


def _reverse_sequence(tf, x, p):
    if _rank(x) < 2:
        return x
    sa, ba = (1, 0) if p % 2 or _rank(x) == 2 else (2, 0)
    if (p >> 1) % 2 and _rank(x) > 2:
        sa, ba = 1, 2
    lens = np.random.default_rng(p).integers(0, int(x.shape[sa]) + 1, size=int(x.shape[ba])).astype(
        _pick(p, [np.int32, np.int64], 2))
    return tf.reverse_sequence(x, lens, seq_axis=sa, batch_axis=ba)


def _strided_slice(tf, x, p):
    if not _rank(x):
        return tf.strided_slice(x, [0], [1], new_axis_mask=1)
    rng = np.random.default_rng(p)
    r = _rank(x)
    n = r + int(rng.integers(0, 2))
    begin, end, strides = [], [], []
    for _ in range(n):
        st = int(rng.choice([1, 1, 2, -1, -2]))
        begin.append(int(rng.integers(-3, 4)))
        end.append(int(rng.integers(-3, 4)))
        strides.append(st)
    bm, em = int(rng.integers(0, 1 << n)), int(rng.integers(0, 1 << n))
    ell = (1 << int(rng.integers(0, n))) if rng.random() < 0.3 else 0
    na = (1 << int(rng.integers(0, n))) if rng.random() < 0.3 else 0
    na &= ~ell
    sh = 0
    if rng.random() < 0.4:      # shrink one axis: a valid index
        j = int(rng.integers(0, n))
        if not (ell | na) & (1 << j):
            sh = 1 << j
            real_axes = [k for k in range(n) if not (na | ell) & (1 << k)]
            pos = real_axes.index(j) if j in real_axes else 0
            dim = int(x.shape[pos]) if pos < r and not ell else 1
            begin[j] = int(rng.integers(-dim, dim))
            strides[j] = 1
    return tf.strided_slice(x, begin, end, strides, begin_mask=bm, end_mask=em, ellipsis_mask=ell,
                            new_axis_mask=na, shrink_axis_mask=sh)


def _scatter(tf, a, b, p):
    if not _rank(a):
        a = tf.reshape(a, [1])
    d = int(a.shape[0])
    rng = np.random.default_rng(p)
    n = int(rng.integers(1, 4))
    idx = rng.integers(0, d, size=(n, 1)).astype(np.int32)
    if (p >> 3) % 2:
        idx = np.arange(n).reshape(n, 1).astype(np.int32) % d       # sometimes no duplicates
    upd = _fill(tf, b * 1.5, [n] + [int(s) for s in a.shape[1:]])
    fn = _pick(p, [tf.tensor_scatter_nd_update, tf.tensor_scatter_nd_max, tf.tensor_scatter_nd_min])
    if fn is tf.tensor_scatter_nd_update:
        idx = np.unique(idx, axis=0)        # duplicates: TF picks one in an unspecified order
        upd = upd[:idx.shape[0]]
    return fn(a, idx, upd)


def _space_to_depth(tf, x, p):
    bs = _pick(p, [2, 2, 3])
    h, w = bs * _pick(p, [1, 2], 2), bs * _pick(p, [1, 2], 3)
    return tf.nn.space_to_depth(_fill(tf, x, [1, h, w, _pick(p, [1, 2], 4)]), bs)


def _lrn(tf, x, p):
    c = _pick(p, [1, 3, 5, 6])
    t = _fill(tf, x, [1, _pick(p, [1, 2], 2), 2, c])
    return tf.nn.local_response_normalization(t, depth_radius=_pick(p, [0, 1, 2, 5], 3),
                                              bias=_pick(p, [1.0, 0.5, 2.0], 5), alpha=_pick(p, [1.0, 0.3], 7),
                                              beta=_pick(p, [0.5, 0.75, 1.0], 8))


def _set_diag(tf, a, b, p):
    if _rank(a) < 2:
        a = _fill(tf, a, [2, 3])
    m, n = int(a.shape[-2]), int(a.shape[-1])
    diag = _fill(tf, b, [int(s) for s in a.shape[:-2]] + [min(m, n)])
    return tf.linalg.set_diag(a, diag)


def _count_nonzero(tf, x, p):
    axis = p % _rank(x) if _rank(x) and p % 3 else None
    c = tf.math.count_nonzero(tf.round(x), axis=axis, keepdims=bool((p >> 2) % 2),
                              dtype=_pick(p, [tf.int64, tf.int32, tf.float32], 3))
    return tf.cast(c, x.dtype)


def _meshgrid(tf, a, b, p):
    u, v = tf.reshape(a, [-1])[:3], tf.reshape(b, [-1])[:2]
    xx, yy = tf.meshgrid(u, v, indexing=_pick(p, ["xy", "ij"]))
    return xx * yy + xx


NEW_UNARY = {
    "pool2d": _pool2d, "pool1d": _pool1d, "flip_rot": _flip_rot, "crop_pad": _crop_pad, "resize": _resize,
    "adjust": _adjust, "cumulative_logsumexp": _cumulative_logsumexp, "special": _special, "repeat": _repeat,
    "sequence_mask": _sequence_mask, "reverse_sequence": _reverse_sequence, "strided_slice": _strided_slice,
    "space_to_depth": _space_to_depth, "lrn": _lrn, "count_nonzero": _count_nonzero,
}

NEW_BINARY = {
    "conv2d": _conv2d, "depthwise": _depthwise, "separable": _separable, "conv2d_transpose": _conv2d_transpose,
    "conv1d": _conv1d, "conv1d_transpose": _conv1d_transpose, "searchsorted": _searchsorted,
    "scatter": _scatter, "set_diag": _set_diag, "meshgrid": _meshgrid,
}


# ------------------------------------------------------------------ integers

def _shift_amount(tf, b, p):
    """Shift counts: in range (mod the width) mostly, sometimes the raw values (negative or too
    large: TF's kernel clamps them to [0, bits - 1])."""
    bits = b.dtype.size * 8
    return tf.math.floormod(b, tf.cast(bits, b.dtype)) if p % 4 else b


def _int_bitwise(tf, a, b, p):
    k = p % 10
    if k == 0:
        return a & b
    if k == 1:
        return a | b
    if k == 2:
        return a ^ b
    if k == 3:
        return tf.bitwise.bitwise_and(a, b) + tf.bitwise.bitwise_or(a, b)
    if k == 4:
        return tf.bitwise.bitwise_xor(a, b)
    if k == 5:      # (TF's tensors have no << / >>: a TypeError in TF and in jitgrad)
        return tf.bitwise.left_shift(a, b)
    if k == 6:
        return tf.bitwise.right_shift(a, b)
    if k == 7:
        return tf.bitwise.left_shift(a, _shift_amount(tf, b, p >> 4))
    if k == 8:
        return tf.bitwise.right_shift(a, _shift_amount(tf, b, p >> 4))
    return tf.truncatediv(a, b) if (p >> 4) % 2 else tf.truncatemod(a, b)


def _int_trunc_safe(tf, a, b, p):
    b = tf.where(tf.equal(b, 0), tf.ones_like(b) * (2 + p % 3), b)
    return tf.truncatediv(a, b) if p % 2 else tf.truncatemod(a, b)


def _int_unravel(tf, x, p):
    dims = np.array([_pick(p, [2, 3, 4]), _pick(p, [1, 3, 5], 2)], dtype=x.dtype.as_numpy_dtype)
    n = int(np.prod(dims))
    flat = tf.math.floormod(tf.reshape(x, [-1]), tf.cast(n, x.dtype))
    if x.dtype not in (tf.int32, tf.int64):
        flat, dims = tf.cast(flat, tf.int32), dims.astype(np.int32)
    out = tf.unravel_index(flat, dims)
    return tf.cast(tf.reduce_sum(out, axis=0), x.dtype)


def _int_count_nonzero(tf, x, p):
    axis = p % _rank(x) if _rank(x) and p % 3 else None
    return tf.cast(tf.math.count_nonzero(x, axis=axis, keepdims=bool((p >> 2) % 2)), x.dtype)


NEW_INT_UNARY = {
    "invert": lambda tf, x, p: ~x if p % 2 else tf.bitwise.invert(x),
    "unravel_index": _int_unravel, "count_nonzero": _int_count_nonzero,
    "repeat": lambda tf, x, p: tf.repeat(x, 1 + p % 2, axis=(p >> 1) % _rank(x)) if _rank(x) else tf.repeat(x, 2),
    "strided_slice": _strided_slice,
}

NEW_INT_BINARY = {"bitwise": _int_bitwise, "trunc_safe": _int_trunc_safe}
