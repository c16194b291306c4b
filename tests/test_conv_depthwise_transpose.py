"""tf.nn.depthwise_conv2d / separable_conv2d / conv2d_transpose / conv1d_transpose (ops/conv.py,
composed of ConvPatches / ConvPatchesGrad and a matmul or a product summed over the taps) and
the Keras layers over them. Expected values from numpy convolutions written here with loops
(the transpose as a scatter of every input pixel times the filter), gradients by central
finite differences in float64; shapes, weight paths, errors and a fit's losses as TF 2.21 /
Keras 3 printed them. Both Session modes, compiled runs without fallback."""
import re

import numpy as np
import pytest

import jitgrad as tf
from jitgrad.errors import InvalidArgumentError

pytestmark = pytest.mark.usefixtures("graph_mode")
ph = tf.compat.v1.placeholder
keras = tf.keras


def _pads(size, k, s, d, padding, axis):
    span = (k - 1) * d + 1
    if padding == "SAME":
        total = max((-(-size // s) - 1) * s + span - size, 0)
        return total // 2, total - total // 2
    if padding == "VALID":
        return 0, 0
    return tuple(padding[1 + axis])


def _np_depthwise(x, w, s, padding, d):
    n, h, wd, c = x.shape
    kh, kw, _, m = w.shape
    (pt, pb), (pl, pr) = _pads(h, kh, s, d, padding, 0), _pads(wd, kw, s, d, padding, 1)
    xp = np.pad(x, ((0, 0), (pt, pb), (pl, pr), (0, 0)))
    oh, ow = (xp.shape[1] - (kh - 1) * d - 1) // s + 1, (xp.shape[2] - (kw - 1) * d - 1) // s + 1
    out = np.zeros((n, oh, ow, c, m))
    for i in range(oh):
        for j in range(ow):
            for a in range(kh):
                for b in range(kw):
                    out[:, i, j] += xp[:, i * s + a * d, j * s + b * d, :, None] * w[a, b]
    return out.reshape(n, oh, ow, c * m)


def _np_transpose(x, w, out_hw, strides, padding):
    """Every input pixel times the filter added where conv2d's window for it would read."""
    n, h, wd, _ = x.shape
    kh, kw, o, _ = w.shape
    (sh, sw), (oh, ow) = strides, out_hw
    (pt, pb), (pl, pr) = _pads(oh, kh, sh, 1, padding, 0), _pads(ow, kw, sw, 1, padding, 1)
    big = np.zeros((n, max(oh + pt + pb, (h - 1) * sh + kh), max(ow + pl + pr, (wd - 1) * sw + kw), o))
    for i in range(h):
        for j in range(wd):
            big[:, i * sh:i * sh + kh, j * sw:j * sw + kw] += np.einsum("nc,aboc->nabo", x[:, i, j], w)
    return big[:, pt:pt + oh, pl:pl + ow]


def _check_grads(f, arrays, grads, wt, rng):
    def loss(*a):
        return np.sum(f(*a) * wt)
    for k, (arr, grad) in enumerate(zip(arrays, grads)):
        for idx in [tuple(rng.integers(0, dim) for dim in arr.shape) for _ in range(5)]:
            hi, lo = [a.copy() for a in arrays], [a.copy() for a in arrays]
            hi[k][idx] += 1e-6
            lo[k][idx] -= 1e-6
            fd = (loss(*hi) - loss(*lo)) / 2e-6
            assert abs(grad[idx] - fd) < 1e-5 * max(1.0, abs(fd)), (k, idx, grad[idx], fd)


DW_CASES = [((3, 3), 1, "SAME", 1, 2), ((3, 3), 2, "SAME", 1, 1), ((2, 3), 2, "VALID", 1, 3),
            ((3, 3), 1, "SAME", 2, 2), ((3, 2), 1, [[0, 0], [1, 2], [0, 1], [0, 0]], 1, 2), ((4, 4), 3, "SAME", 1, 1),
            ((1, 1), 1, "VALID", 1, 2)]


@pytest.mark.parametrize("k,s,padding,d,m", DW_CASES)
def test_depthwise_and_separable_match_numpy_with_gradients(no_fallback, k, s, padding, d, m):
    rng = np.random.default_rng(sum(k) + s + m)
    x, w = rng.standard_normal((2, 7, 6, 3)), rng.standard_normal(k + (3, m))
    pw = rng.standard_normal((1, 1, 3 * m, 2))
    want = _np_depthwise(x, w, s, padding, d)
    g = tf.Graph()
    with g.as_default():
        xp, wp, pp = ph(tf.float64, [None, 7, 6, 3]), ph(tf.float64, w.shape), ph(tf.float64, pw.shape)
        y = tf.nn.depthwise_conv2d(xp, wp, [1, s, s, 1], padding, dilations=[d, d])
        z = tf.nn.separable_conv2d(xp, wp, pp, [1, s, s, 1], padding, dilations=[d, d])
        wt = rng.standard_normal(want.shape)
        grads = tf.gradients(tf.reduce_sum(y * wt), [xp, wp])
    got, sep, (gx, gw) = tf.compat.v1.Session(graph=g).run([y, z, grads], {xp: x, wp: w, pp: pw})
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(sep, np.einsum("nhwc,co->nhwo", want, pw[0, 0]), rtol=1e-12, atol=1e-12)
    _check_grads(lambda a, b: _np_depthwise(a, b, s, padding, d), [x, w], [gx, gw], wt, rng)


TR_CASES = [((3, 3), (2, 2), "SAME", (14, 12)), ((3, 3), (2, 2), "SAME", (13, 11)), ((3, 3), (2, 2), "VALID", (15, 13)),
            ((3, 3), (2, 2), "VALID", (16, 14)), ((2, 2), (2, 2), "VALID", (14, 12)), ((3, 3), (1, 1), "SAME", (7, 6)),
            ((4, 3), (2, 1), "SAME", (14, 6)), ((5, 5), (3, 3), "SAME", (21, 18)),
            ((3, 3), (2, 2), [[0, 0], [1, 1], [0, 1], [0, 0]], (13, 12)), ((1, 1), (1, 1), "VALID", (7, 6))]


@pytest.mark.parametrize("k,strides,padding,out_hw", TR_CASES)
def test_conv2d_transpose_matches_numpy_with_gradients(no_fallback, k, strides, padding, out_hw):
    rng = np.random.default_rng(sum(k) + sum(out_hw))
    x, w = rng.standard_normal((2, 7, 6, 3)), rng.standard_normal(k + (4, 3))
    want = _np_transpose(x, w, out_hw, strides, padding)
    g = tf.Graph()
    with g.as_default():
        xp, wp = ph(tf.float64, [None, 7, 6, 3]), ph(tf.float64, w.shape)     # the batch from the input
        y = tf.nn.conv2d_transpose(xp, wp, [None, *out_hw, 4], list(strides), padding)
        wt = rng.standard_normal(want.shape)
        grads = tf.gradients(tf.reduce_sum(y * wt), [xp, wp])
    assert y.shape.as_list() == [None, *out_hw, 4]
    got, (gx, gw) = tf.compat.v1.Session(graph=g).run([y, grads], {xp: x, wp: w})
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    _check_grads(lambda a, b: _np_transpose(a, b, out_hw, strides, padding), [x, w], [gx, gw], wt, rng)


def test_conv2d_transpose_is_the_input_gradient_of_conv2d_and_conv1d_transpose():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 4, 5, 3)).astype(np.float32)
    w = rng.standard_normal((3, 3, 2, 3)).astype(np.float32)
    ref = tf.constant(np.zeros((2, 8, 9, 2), np.float32))
    with tf.GradientTape() as tape:
        tape.watch(ref)
        y = tf.nn.conv2d(ref, w, 2, "SAME")
    want = tape.gradient(y, ref, output_gradients=tf.constant(x)).numpy()
    got = tf.nn.conv2d_transpose(x, w, tf.constant([2, 8, 9, 2]), 2, "SAME").numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    w1 = rng.standard_normal((3, 4, 3))
    x1 = rng.standard_normal((2, 5, 3))
    got1 = tf.nn.conv1d_transpose(x1, w1, [2, 11, 4], 2, "VALID").numpy()
    np.testing.assert_allclose(got1, _np_transpose(x1[:, None], w1[None], (1, 11), (1, 2), "VALID")[:, 0],
                               rtol=1e-12, atol=1e-12)


def test_errors_as_tf():
    x = tf.constant(np.ones((1, 5, 5, 2), np.float32))
    w = tf.ones([3, 3, 2, 2])
    for bad in (lambda: tf.nn.depthwise_conv2d(x, w, [1, 2, 1, 1], "SAME"),    # TF: equal strides only
                lambda: tf.nn.depthwise_conv2d(x, w, [2, 2], "SAME"),          # 4 strides
                lambda: tf.nn.depthwise_conv2d(x, tf.ones([3, 3, 3, 2]), [1, 1, 1, 1], "SAME"),
                lambda: tf.nn.depthwise_conv2d(x, tf.ones([7, 7, 2, 2]), [1, 1, 1, 1], "VALID"),
                lambda: tf.nn.conv2d_transpose(x, tf.ones([3, 3, 4, 2]), [1, 8, 8, 4], 2, "SAME"),  # 8 -> 4 windows
                lambda: tf.nn.conv2d_transpose(x, tf.ones([3, 3, 4, 2]), [1, 10, 10, 5], 2, "SAME"),
                lambda: tf.nn.conv2d_transpose(x, tf.ones([3, 3, 4, 3]), [1, 10, 10, 4], 2, "SAME"),
                lambda: tf.nn.conv2d_transpose(x, tf.ones([3, 3, 4, 2]), [2, 10, 10, 4], 2, "SAME")):
        with pytest.raises(InvalidArgumentError):
            bad()
    with pytest.raises(ValueError):     # TF only warns, then computes no strided dilated conv
        tf.nn.depthwise_conv2d(x, w, [1, 2, 2, 1], "SAME", dilations=[2, 2])
    with pytest.raises(ValueError):
        tf.nn.separable_conv2d(x, w, tf.ones([2, 2, 4, 3]), [1, 1, 1, 1], "SAME")
    with pytest.raises(ValueError):
        tf.nn.conv2d_transpose(x, tf.ones([3, 3, 4, 2]), [10, 10, 4], 2, "SAME")
    assert tf.nn.conv2d_transpose(x, tf.ones([3, 3, 4, 2]), [1, 9, 9, 4], 2, "SAME").shape == (1, 9, 9, 4)


def test_keras_layers_weights_shapes_and_values():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 7, 6, 3)).astype(np.float32)
    L = keras.layers
    dw = L.DepthwiseConv2D(3, strides=2, padding="same", dilation_rate=2, depth_multiplier=2)
    sep = L.SeparableConv2D(4, 3, padding="same", depth_multiplier=2, use_bias=False)
    tr = L.Conv2DTranspose(4, 3, strides=2, output_padding=(1, 0))
    for layer in (dw, sep, tr):
        layer.build((None, 7, 6, 3))
        layer.set_weights([rng.standard_normal(tuple(w.shape)).astype(np.float32) for w in layer.weights])
    # Keras 3's paths (less the _N a second layer of a name gets)
    assert [(re.sub(r"_\d+/", "/", w.path), tuple(w.shape)) for w in dw.weights + sep.weights + tr.weights] == [
        ("depthwise_conv2d/kernel", (3, 3, 3, 2)), ("depthwise_conv2d/bias", (6,)),
        ("separable_conv2d/depthwise_kernel", (3, 3, 3, 2)), ("separable_conv2d/pointwise_kernel", (1, 1, 6, 4)),
        ("conv2d_transpose/kernel", (3, 3, 4, 3)), ("conv2d_transpose/bias", (4,))]
    assert dw.compute_output_shape((None, 7, 6, 3)) == (None, 4, 3, 6)
    assert tr.compute_output_shape((None, 7, 6, 3)) == [None, 16, 13, 4]
    x64 = x.astype(np.float64)
    k = dw.kernel.numpy().astype(np.float64)
    # Keras 3: stride and dilation together = the dilated SAME conv at stride 1, subsampled
    (pt, pb), (pl, pr) = _pads(7, 3, 2, 2, "SAME", 0), _pads(6, 3, 2, 2, "SAME", 1)
    xp = np.pad(x64, ((0, 0), (pt, pb), (pl, pr), (0, 0)))
    want = _np_depthwise(xp, k, 1, "VALID", 2)[:, ::2, ::2] + dw.bias.numpy()
    np.testing.assert_allclose(dw(x).numpy(), want, rtol=1e-5, atol=1e-5)
    want = np.einsum("nhwc,co->nhwo", _np_depthwise(x64, sep.depthwise_kernel.numpy().astype(np.float64), 1, "SAME",
                                                    1), sep.pointwise_kernel.numpy()[0, 0])
    np.testing.assert_allclose(sep(x).numpy(), want, rtol=1e-5, atol=1e-5)
    want = _np_transpose(x64, tr.kernel.numpy().astype(np.float64), (16, 13), (2, 2), "VALID") + tr.bias.numpy()
    np.testing.assert_allclose(tr(x).numpy(), want, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError):
        L.Conv2DTranspose(4, 3, strides=2, output_padding=2)
    with pytest.raises(ValueError):
        L.DepthwiseConv2D(3, depth_multiplier=0)


def test_keras_model_of_the_three_trains_as_tf():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 7, 6, 3)).astype(np.float32)
    L = keras.layers
    m = keras.Sequential([keras.Input((7, 6, 3)), L.SeparableConv2D(4, 3, padding="same", activation="relu"),
                          L.DepthwiseConv2D(2, strides=2), L.Conv2DTranspose(2, 3, strides=2, padding="same"),
                          L.Flatten(), L.Dense(3)])
    assert [tuple(w.shape) for w in m.weights] == [(3, 3, 3, 1), (1, 1, 3, 4), (4,), (2, 2, 4, 1), (4,), (3, 3, 2, 4),
                                                   (2,), (72, 3), (3,)]
    m.set_weights([rng.standard_normal(tuple(w.shape)).astype(np.float32) * 0.3 for w in m.weights])
    y = np.array([2, 0])
    m.compile(optimizer=keras.optimizers.SGD(0.05), loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    losses = m.fit(x, y, epochs=3, batch_size=2, verbose=0, shuffle=False).history["loss"]
    np.testing.assert_allclose(losses, [1.39186, 1.06454, 0.9114], atol=1e-4)     # TF 2.21's (Keras 3)
