"""tf.nn.conv2d / conv1d (ops/conv.py: im2col gather + matmul). Expected values from a numpy
convolution written with loops over the output pixels; gradients by central finite
differences in float64; a few shapes compared with TF 2.21 side by side while writing it
(equal to float32 rounding). Both Session modes, compiled runs without fallback."""
import numpy as np
import pytest

import jitgrad as tf
from jitgrad.errors import InvalidArgumentError

pytestmark = pytest.mark.usefixtures("graph_mode")
ph = tf.compat.v1.placeholder


def _np_conv2d(x, w, strides, padding, dilations):
    n, h, wd, c = x.shape
    kh, kw, _, o = w.shape
    (sh, sw), (dh, dw) = strides, dilations
    span_h, span_w = (kh - 1) * dh + 1, (kw - 1) * dw + 1
    if padding == "SAME":
        oh, ow = -(-h // sh), -(-wd // sw)
        th, tw = max((oh - 1) * sh + span_h - h, 0), max((ow - 1) * sw + span_w - wd, 0)
        pads = ((th // 2, th - th // 2), (tw // 2, tw - tw // 2))
    elif padding == "VALID":
        pads = ((0, 0), (0, 0))
    else:
        pads = (tuple(padding[1]), tuple(padding[2]))
    xp = np.pad(x, ((0, 0), pads[0], pads[1], (0, 0)))
    oh = (xp.shape[1] - span_h) // sh + 1
    ow = (xp.shape[2] - span_w) // sw + 1
    out = np.zeros((n, oh, ow, o))
    for i in range(oh):
        for j in range(ow):
            win = xp[:, i * sh:i * sh + span_h:dh, j * sw:j * sw + span_w:dw, :]     # [n, kh, kw, c]
            out[:, i, j, :] = np.einsum("nabc,abco->no", win, w)
    return out


CASES = [((3, 3), (1, 1), "SAME", (1, 1)), ((3, 3), (2, 2), "SAME", (1, 1)), ((3, 2), (2, 1), "VALID", (1, 1)),
         ((1, 1), (1, 1), "VALID", (1, 1)), ((3, 3), (1, 1), "SAME", (2, 2)), ((5, 5), (3, 3), "SAME", (1, 1)),
         ((2, 2), (1, 1), [[0, 0], [1, 2], [0, 1], [0, 0]], (1, 1)), ((1, 1), (2, 2), "SAME", (1, 1)),
         ((2, 3), (2, 2), "VALID", (2, 1))]


@pytest.mark.parametrize("k,strides,padding,dilations", CASES)
def test_conv2d_matches_numpy_with_gradients(no_fallback, k, strides, padding, dilations):
    rng = np.random.default_rng(sum(k) + sum(strides))
    x = rng.standard_normal((2, 7, 6, 3))
    w = rng.standard_normal(k + (3, 4))
    want = _np_conv2d(x, w, strides, padding, dilations)
    g = tf.Graph()
    with g.as_default():
        xp, wp = ph(tf.float64, [None, 7, 6, 3]), ph(tf.float64, w.shape)
        y = tf.nn.conv2d(xp, wp, list(strides), padding, dilations=list(dilations))
        wt = rng.standard_normal(want.shape)
        grads = tf.gradients(tf.reduce_sum(y * wt), [xp, wp])
    got, (gx, gw) = tf.compat.v1.Session(graph=g).run([y, grads], {xp: x, wp: w})
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)

    def loss(a, b):
        return np.sum(_np_conv2d(a, b, strides, padding, dilations) * wt)
    for arr, grad, which in ((x, gx, 0), (w, gw, 1)):
        for idx in [tuple(rng.integers(0, d) for d in arr.shape) for _ in range(6)]:
            hi, lo = arr.copy(), arr.copy()
            hi[idx] += 1e-6
            lo[idx] -= 1e-6
            args_hi, args_lo = ((hi, w), (lo, w)) if which == 0 else ((x, hi), (x, lo))
            fd = (loss(*args_hi) - loss(*args_lo)) / 2e-6
            assert abs(grad[idx] - fd) < 1e-5 * max(1.0, abs(fd)), (which, idx, grad[idx], fd)


def test_conv1d_and_float32(no_fallback):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 9, 3)).astype(np.float32)
    w = rng.standard_normal((3, 3, 2)).astype(np.float32)
    g = tf.Graph()
    with g.as_default():
        same = tf.nn.conv1d(x, w, 2, "SAME")
        valid = tf.nn.conv1d(x, w, 1, "VALID", dilations=2)
    s = tf.compat.v1.Session(graph=g)
    want_same = _np_conv2d(x[:, None].astype(np.float64), w[None].astype(np.float64), (1, 2), "SAME", (1, 1))[:, 0]
    want_valid = _np_conv2d(x[:, None].astype(np.float64), w[None].astype(np.float64), (1, 1), "VALID", (1, 2))[:, 0]
    got_same, got_valid = s.run([same, valid])
    assert got_same.dtype == np.float32
    np.testing.assert_allclose(got_same, want_same, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got_valid, want_valid, rtol=1e-5, atol=1e-5)


def test_conv2d_errors():
    x = tf.constant(np.ones((1, 5, 5, 3), np.float32))
    with pytest.raises(InvalidArgumentError):            # eagerly: the op's errors
        tf.nn.conv2d(x, tf.ones([3, 3, 2, 4]), 1, "SAME")
    with pytest.raises(InvalidArgumentError):
        tf.nn.conv2d(x, tf.ones([9, 3, 3, 4]), 1, "VALID")
    with pytest.raises(ValueError):
        tf.nn.conv2d(x, tf.ones([3, 3, 3, 4]), 1, "FULL")
    with pytest.raises(NotImplementedError):
        tf.nn.conv2d(x, tf.ones([3, 3, 3, 4]), 1, "SAME", data_format="NCHW")
