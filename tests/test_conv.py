"""tf.nn.conv2d / conv1d (ops/conv.py: im2col gather + matmul). Expected values from a numpy
convolution written with loops over the output pixels; gradients by central finite
differences in float64; a few shapes compared with TF 2.21 side by side while writing it
(equal to float32 rounding). Both Session modes, compiled runs without fallback."""
import numpy as np
import pytest

import jitgrad as tf
from jitgrad.batched_gradients import rules_removed
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


def _gather_conv2d(x, w, strides, padding, dilations):
    """conv2d as it was built before ConvPatches: pad, a gather of a table of window pixel
    indices, one matmul; its gradients are autodiff's (the gather's a scatter-add)."""
    n, h, wd, c = x.shape.as_list()
    kh, kw, _, o = w.shape.as_list()
    (sh, sw), (dh, dw) = strides, dilations
    pads = [list(p) for p in padding[1:3]] if not isinstance(padding, str) else [
        _same_pads(size, k, s, d) if padding == "SAME" else [0, 0]
        for size, k, s, d in ((h, kh, sh, dh), (wd, kw, sw, dw))]
    hp, wp = h + sum(pads[0]), wd + sum(pads[1])
    oh, ow = (hp - (kh - 1) * dh - 1) // sh + 1, (wp - (kw - 1) * dw - 1) // sw + 1
    rows = (np.arange(oh) * sh)[:, None, None, None] + (np.arange(kh) * dh)[None, None, :, None]
    cols = (np.arange(ow) * sw)[None, :, None, None] + (np.arange(kw) * dw)[None, None, None, :]
    index = (rows * wp + cols).astype(np.int32).reshape(-1)
    xp = tf.reshape(tf.pad(x, [[0, 0]] + pads + [[0, 0]]), [-1, hp * wp, c])
    patches = tf.reshape(tf.gather(xp, index, axis=1), [-1, kh * kw * c])
    return tf.reshape(tf.matmul(patches, tf.reshape(w, [kh * kw * c, o])), [-1, oh, ow, o])


def _same_pads(size, k, s, d):
    total = max((-(-size // s) - 1) * s + (k - 1) * d + 1 - size, 0)
    return [total // 2, total - total // 2]


def _generated_cases(count, seed):
    """(input shape, filter shape, strides, padding, dilations): kernels of 1-4 taps a side,
    strides and dilations 1-3, SAME / VALID / explicit pads, images 1-9 pixels a side."""
    rng = np.random.default_rng(seed)
    cases = []
    while len(cases) < count:
        k, s, d = rng.integers(1, 5, 2), rng.integers(1, 4, 2), rng.integers(1, 4, 2)
        if rng.random() < 0.5:      # TF: strides and dilations both > 1 is an error
            d = np.ones(2, int)
        else:
            s = np.ones(2, int)
        size = rng.integers(1, 10, 2)
        padding = ["SAME", "VALID", None][rng.integers(3)]
        if padding is None:
            padding = [[0, 0]] + [list(map(int, rng.integers(0, 3, 2))) for _ in range(2)] + [[0, 0]]
        span = (k - 1) * d + 1
        room = size + (0 if isinstance(padding, str) else [sum(p) for p in padding[1:3]])
        if padding != "SAME" and np.any(room < span):
            continue
        c, o = (int(v) for v in rng.integers(1, 6, 2))
        cases.append(((int(rng.integers(1, 4)), *map(int, size), c), (*map(int, k), c, o),
                      tuple(map(int, s)), padding, tuple(map(int, d))))
    return cases


@pytest.mark.parametrize("case", _generated_cases(40, 7), ids=lambda c: f"{c[0]}*{c[1]}-s{c[2]}-d{c[4]}-{c[3]}")
def test_conv2d_and_gradients_bit_for_bit_those_of_the_gather(no_fallback, case):
    """Values, both gradients and the gradients of a gradient (d(dL/dx . v)/dw and /dx)
    equal those of the gather formulation exactly: ConvPatchesGrad sums a pixel's window
    slots in the scatter-add's order, every GEMM is the same."""
    xs, ws, strides, padding, dilations = case
    rng = np.random.default_rng(sum(xs) + sum(ws))
    x, w = rng.standard_normal(xs).astype(np.float32), rng.standard_normal(ws).astype(np.float32)
    fetched = []
    for conv in (lambda a, b: tf.nn.conv2d(a, b, list(strides), padding, dilations=list(dilations)),
                 lambda a, b: _gather_conv2d(a, b, strides, padding, dilations)):
        g = tf.Graph()
        with g.as_default():
            xp, wp = ph(tf.float32, xs), ph(tf.float32, ws)
            y = conv(xp, wp)
            up = tf.constant(np.random.default_rng(1).standard_normal(y.shape.as_list()).astype(np.float32))
            gx, gw = tf.gradients(tf.reduce_sum(y * up), [xp, wp])
            v = tf.constant(np.random.default_rng(2).standard_normal(xs).astype(np.float32))
            ggw, ggx = tf.gradients(tf.reduce_sum(gx * v) + tf.reduce_sum(gw * gw), [wp, xp])
        fetched.append(tf.compat.v1.Session(graph=g).run([y, gx, gw, ggw, ggx], {xp: x, wp: w}))
    new, old = fetched
    np.testing.assert_allclose(new[0], _np_conv2d(x.astype(np.float64), w.astype(np.float64), strides, padding,
                                                  dilations), rtol=1e-4, atol=1e-4)
    for name, a, b in zip(["y", "dx", "dw", "d2/dw", "d2/dx"], new, old):
        assert a.shape == b.shape and np.array_equal(a, b), (name, np.max(np.abs(a - b)))


def test_conv2d_hessian_batched_as_per_row():
    """tf.hessians of a conv loss: the batching rules of ConvPatches / ConvPatchesGrad (the
    batch folded into the images) give the per-row fallback's values."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 5, 4, 2))
    w = rng.standard_normal((2, 3, 2, 3))
    got = []
    for removed in ((), ("ConvPatches", "ConvPatchesGrad")):
        with rules_removed(*removed):
            g = tf.Graph()
            with g.as_default():
                xp, wp = ph(tf.float64, x.shape), ph(tf.float64, w.shape)
                y = tf.nn.conv2d(xp, wp, [1, 2], "SAME")
                loss = tf.reduce_sum(tf.sin(y)) + tf.reduce_sum(y * y * y)
                hs = tf.hessians(loss, [xp, wp])
            got.append(tf.compat.v1.Session(graph=g).run(hs, {xp: x, wp: w}))
    for a, b in zip(*got):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_conv2d_gradient_kernel_runs_on_every_thread():
    """No index table to range-check (a kernel holding a check runs on one thread): the
    patches, the GEMMs and the patches' gradient of a large layer are all split. (explain
    plans the compiled kernel in either Session mode.)"""
    g = tf.Graph()
    with g.as_default():
        x, w = ph(tf.float32, [32, 32, 32, 16]), ph(tf.float32, [3, 3, 16, 32])
        y = tf.nn.relu(tf.nn.conv2d(x, w, 1, "SAME"))
        fetch = tf.gradients(tf.reduce_sum(y * y), [x, w])
    feed = {x: np.ones((32, 32, 32, 16), np.float32), w: np.ones((3, 3, 16, 32), np.float32)}
    groups = tf.compat.v1.Session(graph=g).explain(fetch, feed).groups
    heavy = [head for head, ops in groups if {"ConvPatches", "ConvPatchesGrad", "MatMul"} & set(ops)]
    assert len(heavy) == 5 and all("parallel" in head for head in heavy), groups
