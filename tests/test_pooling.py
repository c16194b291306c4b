"""tf.nn.max_pool2d / avg_pool2d (ops/pooling.py): a gather of every window and a reduction.

Expected values and gradients come from a numpy reference written with loops over TF's CPU
kernels' rules: max pooling's value is the largest non-NaN valid element, never below the
dtype's lowest finite value; its gradient goes to one element per window, the running
maximum that starts at the window's first valid element and moves only to a strictly
greater one (ties: the first; NaN never takes it, unless it is the first element). Average
pooling divides by the number of valid (unpadded) elements."""
import numpy as np
import pytest

import jitgrad as tf
from jitgrad.errors import InvalidArgumentError, UnimplementedError

pytestmark = pytest.mark.usefixtures("graph_mode")
ph = tf.compat.v1.placeholder


def _windows(h, w, kh, kw, sh, sw, padding):
    if padding == "VALID":
        oh, ow, ph_, pw = (h - kh) // sh + 1, (w - kw) // sw + 1, 0, 0
    else:
        oh, ow = -(-h // sh), -(-w // sw)
        ph_, pw = max((oh - 1) * sh + kh - h, 0) // 2, max((ow - 1) * sw + kw - w, 0) // 2
    for i in range(oh):
        for j in range(ow):
            yield i, j, [(i * sh - ph_ + a, j * sw - pw + b) for a in range(kh) for b in range(kw)
                         if 0 <= i * sh - ph_ + a < h and 0 <= j * sw - pw + b < w]


def _np_pool(kind, x, k, s, padding, g):
    n, h, w, c = x.shape
    wins = list(_windows(h, w, k[0], k[1], s[0], s[1], padding))
    oh, ow = (wins[-1][0] + 1, wins[-1][1] + 1) if wins else (0, 0)
    y = np.zeros((n, oh, ow, c), x.dtype)
    dx = np.zeros_like(x)
    lowest = np.finfo(x.dtype).min if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    for i, j, pos in wins:
        for b in range(n):
            for ch in range(c):
                vals = [x[b, r, q, ch] for r, q in pos]
                if kind == "max":
                    m, best = lowest, 0
                    for t, v in enumerate(vals):
                        m = v if v > m else m
                        best = t if vals[best] < v else best
                    y[b, i, j, ch] = m
                    dx[b, pos[best][0], pos[best][1], ch] += g[b, i, j, ch]
                else:
                    y[b, i, j, ch] = sum(vals) / len(vals)
                    for r, q in pos:
                        dx[b, r, q, ch] += g[b, i, j, ch] / len(vals)
    return y, dx


def _input(rng, shape, kind, dtype):
    if kind == "normal":
        return rng.standard_normal(shape).astype(dtype)
    x = rng.integers(0, 3, shape).astype(dtype)           # many ties
    if kind == "nonfinite":
        r = rng.random(shape)
        x[r < 0.25] = np.nan
        x[(r > 0.25) & (r < 0.5)] = -np.inf
        x[r > 0.92] = np.inf
    return x


@pytest.mark.parametrize("pool", ["max", "avg"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_generated_values_and_gradients(no_fallback, pool, dtype):
    rng = np.random.default_rng(5 if pool == "max" else 6)
    op = tf.nn.max_pool2d if pool == "max" else tf.nn.avg_pool2d
    for trial in range(8):
        h, w = (int(d) for d in rng.integers(1, 7, 2))
        k = [int(d) for d in rng.integers(1, 4, 2)]
        s = [int(d) for d in rng.integers(1, 4, 2)]
        padding = "SAME" if trial % 2 or k[0] > h or k[1] > w else "VALID"
        kind = ("normal", "ties", "nonfinite")[trial % 3] if pool == "max" else ("normal", "ties")[trial % 2]
        x = _input(rng, (2, h, w, 2), kind, dtype)
        g_shape = _np_pool(pool, x, k, s, padding, np.zeros((2, h, w, 2), dtype))[0].shape
        g = rng.integers(1, 5, g_shape).astype(dtype)
        want, want_dx = _np_pool(pool, x, k, s, padding, g)
        graph = tf.Graph()
        with graph.as_default():
            xp = ph(tf.as_dtype(dtype), [None, h, w, 2])
            y = op(xp, k, s, padding)
            dx = tf.gradients(tf.reduce_sum(y * g), xp)[0]
        got, got_dx = tf.compat.v1.Session(graph=graph).run([y, dx], {xp: x})
        assert y.shape.as_list() == [None] + list(want.shape[1:])
        if pool == "max":          # a selection: exact, NaN where the reference has NaN
            np.testing.assert_array_equal(got, want)
            np.testing.assert_array_equal(got_dx, want_dx)
        else:
            tol = 1e-6 if dtype == np.float32 else 1e-13      # (sums of mixed signs: an absolute bound too)
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
            np.testing.assert_allclose(got_dx, want_dx, rtol=tol, atol=tol)


# Values and gradients below printed by TF 2.21 (tensorflow-cpu, eager), gradient of
# reduce_sum(y * [1, 2, 3, ...]) (row-major weights over the output).
TF_CASES = [
    ("max", [[1, 3, 3], [3, 2, 3], [1, 1, 1]], 2, 1, "VALID",                  # ties: the first max
     [[3, 3], [3, 3]], [[0, 3, 0], [3, 0, 4], [0, 0, 0]]),
    ("max", [[1, np.nan, 3], [3, 2, np.nan], [1, 1, 1]], 2, 1, "VALID",        # a window starting with NaN
     [[3, 3], [3, 2]], [[0, 2, 0], [4, 4, 0], [0, 0, 0]]),
    ("max", [[np.nan, 1, 3], [3, 2, np.nan], [1, 1, 1]], 2, 1, "VALID",
     [[3, 3], [3, 2]], [[1, 0, 2], [3, 4, 0], [0, 0, 0]]),
    ("max", [[np.nan, np.nan], [np.nan, np.nan]], 2, 1, "VALID", [[-3.4028235e38]], [[1, 0], [0, 0]]),
    ("max", [[-np.inf, -np.inf], [-np.inf, -np.inf]], 2, 2, "SAME", [[-3.4028235e38]], [[1, 0], [0, 0]]),
    ("max", [[-np.inf, 1], [-np.inf, -np.inf]], 3, 1, "SAME", [[1, 1], [1, 1]], [[0, 10], [0, 0]]),
    ("avg", [[0, 1, 2], [3, 4, 5], [6, 7, 8]], 2, 1, "SAME",
     [[2, 3, 3.5], [5, 6, 6.5], [6.5, 7.5, 8]], [[0.25, 0.75, 2], [1.25, 3, 6.25], [4.5, 9.75, 17.25]]),
    ("avg", [[0, 1, 2], [3, 4, 5], [6, 7, 8]], 3, 2, "SAME",
     [[2, 3], [5, 6]], [[0.25, 0.75, 0.5], [1, 2.5, 1.5], [0.75, 1.75, 1]]),
]


@pytest.mark.parametrize("case", range(len(TF_CASES)))
def test_against_values_printed_by_tf(no_fallback, case):
    pool, x, k, s, padding, want, want_dx = TF_CASES[case]
    x = np.array(x, np.float32)[None, :, :, None]
    op = tf.nn.max_pool2d if pool == "max" else tf.nn.avg_pool2d
    graph = tf.Graph()
    with graph.as_default():
        xp = ph(tf.float32, x.shape)
        y = op(xp, k, s, padding)
        weights = np.arange(1, np.prod(y.shape.as_list()) + 1, dtype=np.float32).reshape(y.shape.as_list())
        dx = tf.gradients(tf.reduce_sum(y * weights), xp)[0]
    got, got_dx = tf.compat.v1.Session(graph=graph).run([y, dx], {xp: x})
    np.testing.assert_allclose(got[0, :, :, 0], np.array(want, np.float32), rtol=1e-6)
    np.testing.assert_allclose(got_dx[0, :, :, 0], np.array(want_dx, np.float32), rtol=1e-6)


def test_eager_gradients_dtypes_and_empty():
    x = tf.constant(np.array([[1, np.nan, 3], [3, 2, np.nan], [1, 1, 1]], np.float32)[None, :, :, None])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = tf.nn.max_pool(x, [1, 2, 2, 1], [1, 1, 1, 1], "VALID")
        loss = tf.reduce_sum(y * np.arange(1.0, 5.0, dtype=np.float32).reshape(1, 2, 2, 1))
    np.testing.assert_array_equal(tape.gradient(loss, x).numpy()[0, :, :, 0], [[0, 2, 0], [4, 4, 0], [0, 0, 0]])
    xi = np.arange(16, dtype=np.int32).reshape(1, 4, 4, 1)
    for dt in (np.int32, np.int64, np.uint8, np.int16):
        got = tf.nn.max_pool2d(xi.astype(dt), 2, 2, "VALID")
        assert got.dtype == tf.as_dtype(dt)
        np.testing.assert_array_equal(got.numpy().ravel(), [5, 7, 13, 15])
    np.testing.assert_array_equal(tf.nn.max_pool2d(np.full((1, 1, 1, 1), -np.inf, np.float16), 1, 1, "VALID"),
                                  np.full((1, 1, 1, 1), -65504.0, np.float16))      # (TF 2.21: -6.55e+04)
    h = np.arange(9, dtype=np.float16).reshape(1, 3, 3, 1)
    np.testing.assert_array_equal(tf.nn.avg_pool(h, 2, 1, "SAME").numpy()[0, :, :, 0],
                                  np.array([[2, 3, 3.5], [5, 6, 6.5], [6.5, 7.5, 8]], np.float16))
    np.testing.assert_array_equal(tf.compat.v1.nn.max_pool(value=xi.astype(np.float32), ksize=[1, 2, 2, 1],
                                                           strides=[1, 2, 2, 1], padding="VALID").numpy().ravel(),
                                  [5, 7, 13, 15])
    for shape in ([0, 4, 4, 2], [1, 0, 4, 2], [1, 4, 4, 0]):
        assert tf.nn.max_pool2d(np.zeros(shape, np.float32), 2, 1, "SAME").shape == shape
        assert tf.nn.avg_pool2d(np.zeros(shape, np.float32), 2, 1, "SAME").shape == shape


def test_errors():
    # types as TF 2.21's: eager (the op's) and graph (shape inference's)
    x = tf.zeros([1, 4, 4, 2])
    with pytest.raises(ValueError, match="ksize should be of length 1, 2 or 4"):
        tf.nn.max_pool2d(x, [2, 2, 2], 1, "VALID")
    with pytest.raises(UnimplementedError):
        tf.nn.avg_pool2d(x, [2, 2, 2, 1], 1, "VALID")
    for op in (tf.nn.max_pool2d, tf.nn.avg_pool2d):
        with pytest.raises(InvalidArgumentError):
            op(x, 0, 1, "VALID")
        with pytest.raises(InvalidArgumentError):
            op(x, 2, 0, "VALID")
        with pytest.raises(InvalidArgumentError):
            op(x, 2, 1, "same")
        with pytest.raises(InvalidArgumentError):
            op(x, 5, 1, "VALID")                 # (TF 2.21's eager kernel crashes here: SIGFPE)
        with pytest.raises(NotImplementedError):
            op(x, 2, 1, "VALID", data_format="NCHW")
    with pytest.raises(InvalidArgumentError):
        tf.nn.avg_pool2d(tf.zeros([1, 4, 4, 2], tf.int32), 2, 1, "VALID")
    with pytest.raises(TypeError):
        tf.nn.avg_pool2d(x, 2, 1, [[0, 0], [1, 1], [1, 1], [0, 0]])
    with pytest.raises(NotImplementedError):
        tf.nn.max_pool(tf.zeros([1, 4, 4, 4, 2]), 2, 1, "VALID")      # TF's max_pool3d: not in jitgrad
    with tf.Graph().as_default():
        for op in (tf.nn.max_pool2d, tf.nn.avg_pool2d):
            with pytest.raises(ValueError):
                op(tf.zeros([1, 4, 4, 2]), 2, 0, "VALID")
            with pytest.raises(ValueError):
                op(tf.zeros([1, 4, 4, 2]), 2, 1, "FOO")
            with pytest.raises(ValueError, match="Negative dimension size"):
                op(tf.zeros([1, 4, 4, 2]), 5, 1, "VALID")
            with pytest.raises(NotImplementedError):
                op(ph(tf.float32, [None, None, 4, 2]), 2, 1, "VALID")


# ---------------------------------------------------------------- 1-D pooling
# tf.nn.max_pool1d / avg_pool1d (and max_pool / avg_pool of a 3-D input) are TF's: the [N, W, C]
# input as a [N, 1, W, C] image, window and stride [1, 1, k, 1], the row squeezed away (they were
# AttributeError / NotImplementedError before; found by bench/tf_fuzz_new.py).

@pytest.mark.parametrize("pool", ["max", "avg"])
def test_pool1d_generated_values_and_gradients(no_fallback, pool):
    rng = np.random.default_rng(11 if pool == "max" else 12)
    for trial in range(6):
        w, k, s = int(rng.integers(1, 8)), int(rng.integers(1, 4)), int(rng.integers(1, 4))
        padding = "SAME" if trial % 2 or k > w else "VALID"
        x = _input(rng, (2, w, 3), ("normal", "ties", "nonfinite")[trial % 3] if pool == "max" else "normal",
                   np.float32)
        img = x[:, None]                                        # the 1 x W image of the reference
        g_shape = _np_pool(pool, img, [1, k], [1, s], padding, np.zeros_like(img))[0].shape
        g = rng.integers(1, 5, g_shape).astype(np.float32)
        want, want_dx = _np_pool(pool, img, [1, k], [1, s], padding, g)
        op = [tf.nn.max_pool1d, tf.nn.max_pool][trial % 2] if pool == "max" else \
            [tf.nn.avg_pool1d, tf.nn.avg_pool][trial % 2]
        graph = tf.Graph()
        with graph.as_default():
            xp = ph(tf.float32, [None, w, 3])
            y = op(xp, [k] if trial % 3 == 1 else k, s, padding)
            dx = tf.gradients(tf.reduce_sum(y * g[:, 0]), xp)[0]
        got, got_dx = tf.compat.v1.Session(graph=graph).run([y, dx], {xp: x})
        assert y.shape.as_list() == [None, want.shape[2], 3]
        np.testing.assert_allclose(got, want[:, 0], rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(got_dx, want_dx[:, 0], rtol=1e-6, atol=1e-6)


def test_pool1d_against_tf_and_its_errors():
    x = tf.constant(np.array([[[1., -2.], [3., np.nan], [0.5, 4.], [-1., -1.], [2., 2.]]], np.float32))
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = tf.nn.max_pool1d(x, 2, 1, "SAME")
    # printed by TF 2.21: NaN never the maximum, ties to the first, the last window padded
    np.testing.assert_array_equal(y.numpy()[0], [[3, -2], [3, 4], [0.5, 4], [2, 2], [2, 2]])
    np.testing.assert_array_equal(tape.gradient(y, x).numpy()[0], [[0, 1], [2, 1], [1, 1], [0, 0], [2, 2]])
    np.testing.assert_array_equal(tf.nn.avg_pool1d(x, [1, 3, 1], 2, "VALID").numpy()[0],
                                  np.array([[1.5, np.nan], [0.5, 5 / 3]], np.float32))
    with pytest.raises(ValueError, match="ksize should be of length 1, 1 or 3"):
        tf.nn.max_pool1d(x, [1, 2], 1, "SAME")                    # TF 2.21: the same ValueError
    with pytest.raises(InvalidArgumentError):
        tf.nn.avg_pool1d(x, 6, 1, "VALID")                        # (TF 2.21's eager kernel: SIGFPE)
