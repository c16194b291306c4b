"""tf.image (jitgrad/ops/image_ops.py) against numpy written here: the geometry, dtype
conversion, colour adjustments and resize (a direct numpy transcription of TF's half-pixel
ResizeBilinear / ResizeNearestNeighbor formulas), graph runs in both Session modes, compiled
ones without interpreter fallback (except uint8, which has
no lowering yet); TF's static ValueErrors; the random functions structurally
(each output is one of the allowed results, a seed repeats)."""
import re

import numpy as np
import pytest

import jitgrad as tf
from _graph_testing import run_graph

pytestmark = pytest.mark.usefixtures("graph_mode")

RNG = np.random.default_rng(0)
F3 = RNG.uniform(0, 1, (5, 7, 3)).astype(np.float32)
F4 = RNG.uniform(0, 1, (2, 5, 6, 3)).astype(np.float32)
U4 = RNG.integers(0, 256, (2, 5, 6, 3)).astype(np.uint8)
I = tf.image


def _run(build, feeds, mode):
    """run_graph; uint8 has no compiled lowering yet, so a graph fed uint8 may fall back (the
    float graphs of each test stay strict)."""
    return run_graph(build, feeds, mode, fallback_ok=any(f.dtype == np.uint8 for f in feeds))


@pytest.mark.parametrize("x4", [F4, U4], ids=["float32", "uint8"])
def test_flips_rotations_transpose(graph_mode, x4):
    def build(p3, p4):
        return [I.flip_left_right(p3), I.flip_up_down(p3), I.flip_left_right(p4), I.flip_up_down(p4),
                I.rot90(p3), I.rot90(p3, 2), I.rot90(p4, 3), I.rot90(p4, -1), I.rot90(p4, 4),
                I.transpose(p3), I.transpose(p4)]
    got = _run(build, [F3, x4], graph_mode)
    want = [F3[:, ::-1], F3[::-1], x4[:, :, ::-1], x4[:, ::-1],
            np.rot90(F3, 1, (0, 1)), np.rot90(F3, 2, (0, 1)), np.rot90(x4, 3, (1, 2)), np.rot90(x4, 3, (1, 2)), x4,
            F3.transpose(1, 0, 2), x4.transpose(0, 2, 1, 3)]
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("x4", [F4, U4], ids=["float32", "uint8"])
def test_crop_pad_central_crop_resize_with_crop_or_pad(graph_mode, x4):
    def build(p3, p4):
        return [I.crop_to_bounding_box(p3, 1, 2, 3, 4), I.crop_to_bounding_box(p4, 0, 1, 5, 3),
                I.pad_to_bounding_box(p3, 1, 2, 8, 10), I.pad_to_bounding_box(p4, 0, 1, 6, 7),
                I.central_crop(p3, 0.5), I.central_crop(p4, 0.33),
                I.resize_with_crop_or_pad(p3, 8, 10), I.resize_with_crop_or_pad(p4, 2, 3),
                I.resize_with_crop_or_pad(p3, 2, 10)]
    got = _run(build, [F3, x4], graph_mode)
    pad = np.zeros((8, 10, 3), np.float32)
    pad[1:6, 2:9] = F3
    pad4 = np.zeros((2, 6, 7, 3), x4.dtype)
    pad4[:, 0:5, 1:7] = x4
    big = np.zeros((8, 10, 3), np.float32)
    big[1:6, 1:8] = F3            # (8 - 5) // 2 rows, (10 - 7) // 2 columns before
    mix = np.zeros((2, 10, 3), np.float32)
    mix[:, 1:8] = F3[1:3]         # rows cropped from (5 - 2) // 2
    want = [F3[1:4, 2:6], x4[:, 0:5, 1:4], pad, pad4,
            F3[1:4, 1:6],         # int((5 - 2.5) / 2) = 1, int((7 - 3.5) / 2) = 1
            x4[:, 1:4, 2:4],      # int((5 - 1.65) / 2) = 1, int((6 - 1.98) / 2) = 2
            big, x4[:, 1:3, 1:4], mix]
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("call, message", [
    (lambda: I.crop_to_bounding_box(F3, -1, 2, 3, 4), "offset_height must be >= 0."),
    (lambda: I.crop_to_bounding_box(F3, 1, 2, 5, 4), "height must be >= target + offset."),
    (lambda: I.crop_to_bounding_box(F3, 1, 4, 3, 4), "width must be >= target + offset."),
    (lambda: I.crop_to_bounding_box(F3, 1, 2, 0, 4), "target_height must be > 0."),
    (lambda: I.crop_to_bounding_box(F3[0], 0, 0, 1, 1), "must have either 3 or 4 dimensions"),
    (lambda: I.pad_to_bounding_box(F3, 1, -2, 8, 10), "offset_width must be >= 0"),
    (lambda: I.pad_to_bounding_box(F3, 1, 2, 5, 10), "height must be <= target - offset"),
    (lambda: I.central_crop(F3, 0.0), "central_fraction must be within (0, 1]"),
    (lambda: I.central_crop(F3, 1.5), "central_fraction must be within (0, 1]"),
    (lambda: I.resize_with_crop_or_pad(F3, 0, 10), "target_height must be > 0."),
    (lambda: I.flip_left_right(F3[0]), "must be at least three-dimensional"),
    (lambda: I.rot90(F4[None]), "must have either 3 or 4 dimensions"),
    (lambda: I.grayscale_to_rgb(F3), "Last dimension of a grayscale image should be size 1."),
    (lambda: I.adjust_gamma(F3, -1), "Gamma should be a non-negative real number."),
    (lambda: I.resize(F3, [3, 3, 3]), "'size' must be a 1-D Tensor of 2 elements"),
    (lambda: I.resize(F3, [3.0, 3.0]), "'size' must be a 1-D int32 Tensor"),
    (lambda: I.resize(F3, [3, 3], method="foo"), "Resize method is not implemented: foo"),
    (lambda: I.random_contrast(F3, 1.0, 0.5), "upper must be > lower."),
    (lambda: I.random_brightness(F3, -0.1), "max_delta must be non-negative."),
])
def test_static_errors(call, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        call()


def test_convert_image_dtype():
    u8 = np.array([[[0, 1, 127, 128, 255]]], np.uint8)
    i32 = np.array([[[0, 1, 2 ** 24, 2 ** 31 - 1]]], np.int32)
    f = np.array([[[0.0, 0.25, 0.5, 0.999, 1.0]]], np.float32)
    cases = [
        (u8, tf.float32, False, u8.astype(np.float32) * np.float32(1 / 255)),
        (u8, tf.int32, False, u8.astype(np.int32) * (2 ** 31 // 256)),
        (u8, tf.uint16, False, u8.astype(np.uint16) * 256),     # (65535 + 1) // (255 + 1)
        (i32, tf.uint8, False, (i32 // 2 ** 23).astype(np.uint8)),
        (i32, tf.float32, False, i32.astype(np.float32) * np.float32(1 / (2 ** 31 - 1))),
        (f, tf.uint8, False, (f * np.float32(255.5)).astype(np.uint8)),
        (f * 1.5 - 0.2, tf.uint8, True, np.clip((f * 1.5 - 0.2) * np.float32(255.5), 0, 255).astype(np.uint8)),
        (f, tf.float64, False, f.astype(np.float64)),
        (u8, tf.uint8, False, u8),
    ]
    for x, dtype, saturate, want in cases:
        got = I.convert_image_dtype(x, dtype, saturate=saturate).numpy()
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-6)
    with pytest.raises(AttributeError, match="dtype must be either floating point or integer"):
        I.convert_image_dtype(u8, tf.bool)


def test_colour_adjustments(graph_mode):
    def build(p3, p4, float_only):
        if float_only:
            return [I.per_image_standardization(p3), I.rgb_to_grayscale(p3), I.adjust_brightness(p3, 0.3),
                    I.adjust_contrast(p3, 1.7), I.adjust_gamma(p3, 2.2, 1.1)]
        return [I.per_image_standardization(p4), I.rgb_to_grayscale(p4), I.grayscale_to_rgb(I.rgb_to_grayscale(p4)),
                I.adjust_brightness(p4, -0.2), I.adjust_contrast(p4, 2.0), I.adjust_gamma(p4, 0.5)]
    got = (_run(lambda p3: build(p3, None, float_only=True), [F3], graph_mode)
           + _run(lambda p4: build(None, p4, float_only=False), [U4], graph_mode))

    def standardize(x, axes):
        x = x.astype(np.float64)
        n = np.prod([x.shape[a] for a in axes])
        return (x - x.mean(axes, keepdims=True)) / np.maximum(x.std(axes, keepdims=True), 1 / np.sqrt(n))
    uf = U4.astype(np.float64) / 255
    w = np.array([0.2989, 0.587, 0.114])
    gray4 = ((uf @ w)[..., None] * 255.5).astype(np.uint8)

    def to_u8(v):
        return np.clip(v * 255.5, 0, 255).astype(np.uint8)

    def contrast(x, f):
        m = x.mean((-3, -2), keepdims=True)
        return (x - m) * f + m
    want = [standardize(F3, (0, 1, 2)), F3 @ w, F3 + 0.3, contrast(F3.astype(np.float64), 1.7),
            1.1 * F3.astype(np.float64) ** 2.2,
            standardize(U4, (1, 2, 3)), gray4, np.repeat(gray4, 3, -1), to_u8(uf - 0.2), to_u8(contrast(uf, 2.0)),
            to_u8(uf ** 0.5)]
    dtypes = [np.float32] * 6 + [np.uint8] * 5
    for i, (g, wv, dt) in enumerate(zip(got, want, dtypes)):
        assert g.dtype == dt, i
        if dt == np.uint8:      # float32 vs float64 rounding may move a value across an integer
            assert np.abs(g.astype(int) - wv.astype(int)).max() <= 1, i
        else:
            np.testing.assert_allclose(g, wv.reshape(g.shape), rtol=2e-5, atol=2e-6, err_msg=str(i))


# ---------------------------------------------------------------- resize
def _interp_matrix(in_size, out_size, method):
    """The out_size x in_size matrix of TF's half-pixel formula, written out element by element."""
    m = np.zeros((out_size, in_size))
    scale = in_size / out_size
    for i in range(out_size):
        if method == "nearest":
            m[i, min(int(np.floor((i + 0.5) * scale)), in_size - 1)] = 1
        else:
            src = (i + 0.5) * scale - 0.5
            lo = int(np.floor(src))
            frac = src - lo
            m[i, min(max(lo, 0), in_size - 1)] += 1 - frac
            m[i, min(lo + 1, in_size - 1) if src > lo else min(max(lo, 0), in_size - 1)] += frac
    return m


def _resize_np(x, size, method):
    mh = _interp_matrix(x.shape[-3], size[0], method)
    mw = _interp_matrix(x.shape[-2], size[1], method)
    return np.einsum("ih,...hwc,jw->...ijc", mh, x.astype(np.float64), mw)


@pytest.mark.parametrize("size", [(3, 11), (10, 4), (5, 6), (1, 1), (13, 17)])
def test_resize_values(graph_mode, size):
    got = (_run(lambda pf: [I.resize(pf, size), I.resize(pf[0], size, method="nearest")], [F4], graph_mode)
           + _run(lambda pu: [I.resize(pu, size), I.resize(pu, size, method=tf.image.ResizeMethod.NEAREST_NEIGHBOR)],
                  [U4], graph_mode))
    want = [_resize_np(F4, size, "bilinear"), _resize_np(F4[0], size, "nearest"),
            _resize_np(U4, size, "bilinear"), _resize_np(U4, size, "nearest")]
    for g, w, dt in zip(got, want, [np.float32, np.float32, np.float32, np.uint8]):
        assert g.dtype == dt and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-4 if dt == np.uint8 else 1e-6)


def test_resize_preserve_aspect_ratio():
    assert I.resize(F3, [10, 10], preserve_aspect_ratio=True).shape == (7, 10, 3)   # 7 * 10/7 wide
    assert I.resize(U4, [20, 9], method="nearest", preserve_aspect_ratio=True).shape == (2, 8, 9, 3)
    assert I.resize(U4, [5, 6]).dtype == tf.float32      # (TF 2: bilinear always gives float32)


def test_resize_bilinear_gradient(graph_mode):
    size = (4, 9)
    w = RNG.uniform(-1, 1, (2,) + size + (3,)).astype(np.float32)

    def build(p):
        (g,) = tf.gradients(tf.reduce_sum(I.resize(p, size) * tf.constant(w)), [p])
        return [g]
    (got,) = _run(build, [F4], graph_mode)
    mh = _interp_matrix(5, size[0], "bilinear")
    mw = _interp_matrix(6, size[1], "bilinear")
    want = np.einsum("ih,nijc,jw->nhwc", mh, w.astype(np.float64), mw)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- random augmentation
def test_random_flips_are_per_image_and_repeat_with_a_seed():
    x = RNG.uniform(0, 1, (64, 3, 4, 2)).astype(np.float32)
    for fn, flip in [(I.random_flip_left_right, lambda v: v[:, ::-1]), (I.random_flip_up_down, lambda v: v[::-1])]:
        tf.random.set_seed(5)
        a = fn(x, seed=7).numpy()
        tf.random.set_seed(5)
        b = fn(x, seed=7).numpy()
        np.testing.assert_array_equal(a, b)
        flipped = [np.array_equal(a[i], flip(x[i])) for i in range(len(x))]
        kept = [np.array_equal(a[i], x[i]) for i in range(len(x))]
        assert all(f or k for f, k in zip(flipped, kept))
        assert 10 < sum(flipped) < 54         # each image flipped with probability 1/2
        one = fn(x[0], seed=3).numpy()
        assert np.array_equal(one, x[0]) or np.array_equal(one, flip(x[0]))


def test_random_brightness_contrast_crop(graph_mode):
    def build(p):
        return [I.random_brightness(p, 0.25, seed=1), I.random_contrast(p, 0.5, 1.5, seed=2),
                I.random_crop(p, [2, 3, 4, 3], seed=3)]
    for _ in range(3):
        bright, contrast, crop = _run(build, [F4], graph_mode)
        delta = bright - F4
        np.testing.assert_allclose(delta, delta.flat[0], atol=1e-6)
        assert -0.25 <= delta.flat[0] < 0.25
        mean = F4.mean((1, 2), keepdims=True)
        factor = ((contrast - mean) / (F4 - mean)).ravel()
        np.testing.assert_allclose(factor, factor[0], rtol=1e-3)
        assert 0.5 <= factor[0] < 1.5
        windows = [F4[:, i:i + 3, j:j + 4] for i in range(3) for j in range(3)]
        assert crop.shape == (2, 3, 4, 3) and any(np.array_equal(crop, wv) for wv in windows)
    with pytest.raises(ValueError, match="Need value.shape >= size"):
        I.random_crop(F3, [6, 2, 3])


def test_unknown_batch_dimension(graph_mode):
    """A Keras / tf.data style placeholder [None, H, W, C]: the functions only need H and W."""
    g = tf.Graph()
    with g.as_default():
        p = tf.compat.v1.placeholder(tf.float32, [None, 5, 6, 3])
        outs = [I.resize(p, [4, 4]), I.rgb_to_grayscale(p), I.central_crop(p, 0.5), I.flip_left_right(p)]
        assert [o.shape.as_list() for o in outs] == [[None, 4, 4, 3], [None, 5, 6, 1], [None, 3, 4, 3],
                                                    [None, 5, 6, 3]]
        with pytest.raises(NotImplementedError, match="batch need its size known"):
            I.random_flip_left_right(p)     # (jitgrad's random ops draw static shapes)
    with tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto(jitgrad_mode=graph_mode)) as s:
        rs, gray, crop, flip = s.run(outs, {p: F4})
    np.testing.assert_allclose(rs, _resize_np(F4, (4, 4), "bilinear"), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gray[..., 0], F4 @ np.array([0.2989, 0.587, 0.114]), rtol=1e-5)
    np.testing.assert_array_equal(crop, F4[:, 1:4, 1:5])
    np.testing.assert_array_equal(flip, F4[:, :, ::-1])


def _triangle_matrix(in_size, out_size):
    """ScaleAndTranslate's triangle kernel with antialias, in float64: output pixel i samples at
    s = (i + 0.5) * in / out; source j weighs max(0, 1 - |j + 0.5 - s| / k), k = max(in / out, 1),
    over the sources within k of s, normalised to sum to 1."""
    m = np.zeros((out_size, in_size))
    k = max(in_size / out_size, 1.0)
    for i in range(out_size):
        s = (i + 0.5) * in_size / out_size
        for j in range(in_size):
            m[i, j] = max(0.0, 1 - abs(j + 0.5 - s) / k)
        m[i] /= m[i].sum()
    return m


@pytest.mark.parametrize("size", [(3, 4), (2, 13), (18, 30)])
def test_resize_antialias(graph_mode, size):
    x = RNG.uniform(0, 1, (2, 9, 13, 3)).astype(np.float32)
    w = RNG.uniform(-1, 1, (2,) + size + (3,)).astype(np.float32)

    def build(p):
        y = I.resize(p, size, antialias=True)
        return [y] + tf.gradients(tf.reduce_sum(y * tf.constant(w)), [p])
    got, grad = _run(build, [x], graph_mode)
    mh, mw = _triangle_matrix(9, size[0]), _triangle_matrix(13, size[1])
    np.testing.assert_allclose(got, np.einsum("ih,nhwc,jw->nijc", mh, x.astype(np.float64), mw), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(grad, np.einsum("ih,nijc,jw->nhwc", mh, w.astype(np.float64), mw), rtol=1e-5,
                               atol=1e-6)
