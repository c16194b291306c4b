"""Differences from TF 2.21 found by bench/tf_fuzz.py --new (bench/tf_fuzz_new.py: round 36's
ops), seeds from 360000. Expected values are derived independently (numpy transcriptions of
TF's kernels, written here); what TF 2.21 does (run with /work/benchenv) is said per test."""
import numpy as np
import pytest

import jitgrad as tf
from jitgrad.errors import InvalidArgumentError

graph_modes = pytest.mark.usefixtures("graph_mode", "no_fallback")


# ---------------------------------------------------------------- lrn's gradient stays in its window
# local_response_normalization's sum of squares is a matmul by the 0/1 band matrix (TF's CPU
# forward is too), and its gradient was that matmul's transpose: a NaN upstream gradient in
# one channel was multiplied by the zeros outside the band and made every channel's gradient
# NaN. TF's LRNGrad loops over each channel's depth window, so only the channels within
# depth_radius of the NaN get it (seed 360126: lrn, then xlogy of negatives).

def _lrn_grad_reference(x, dy, r, bias, alpha, beta):
    """TF's LRNGrad loop (lrn_op.cc), in float64: for each output channel j, over its window k:
    dx[k] += dy[j] * ([k == j] norm_j^-beta - 2 alpha beta x[k] out[j] / norm_j)."""
    x, dy = x.astype(np.float64).reshape(-1, x.shape[-1]), dy.astype(np.float64).reshape(-1, x.shape[-1])
    rows, c = x.shape
    dx = np.zeros_like(x)
    for i in range(rows):
        for j in range(c):
            lo, hi = max(0, j - r), min(c, j + r + 1)
            norm = bias + alpha * np.sum(x[i, lo:hi] ** 2)
            out_j = x[i, j] * norm ** -beta
            for k in range(lo, hi):
                d = -2 * alpha * beta * x[i, k] * out_j / norm + (norm ** -beta if k == j else 0.0)
                dx[i, k] += d * dy[i, j]
    return dx


X6 = np.array([0.5, -1.0, 2.0, 0.25, 1.5, -0.75], np.float32)
W6 = np.array([1.0, np.nan, 2.0, 3.0, 0.5, -1.0], np.float32)


@pytest.mark.parametrize("r,beta", [(1, 0.75), (2, 0.5), (0, 1.0), (7, 0.75)])
def test_lrn_gradient_of_a_nan_reaches_only_its_window_eager(r, beta):
    x = tf.constant(X6.reshape(1, 1, 1, 6))
    with tf.GradientTape() as t:
        t.watch(x)
        loss = tf.reduce_sum(tf.nn.lrn(x, r, 2.0, 0.3, beta) * W6.reshape(1, 1, 1, 6))
    got = t.gradient(loss, x).numpy().ravel()
    want = _lrn_grad_reference(X6.reshape(1, 6), W6.reshape(1, 6), r, 2.0, 0.3, beta).ravel()
    # NaN exactly on channels within r of channel 1 (TF 2.21: r=1 -> channels 0..2 NaN,
    # 3..5 finite [1.011305, 0.018639, -0.375819])
    np.testing.assert_array_equal(np.isnan(got), np.abs(np.arange(6) - 1) <= r)
    np.testing.assert_allclose(got[~np.isnan(got)], want[~np.isnan(want)], rtol=2e-6, atol=1e-7)


@graph_modes
def test_lrn_gradient_window_in_both_session_modes():
    rng = np.random.default_rng(36)
    x = rng.uniform(-2, 2, (2, 2, 3, 7)).astype(np.float32)
    dy = rng.uniform(-1, 1, x.shape).astype(np.float32)
    dy[0, 1, 2, 3] = np.nan
    dy[1, 0, 0, 6] = np.inf
    with tf.Graph().as_default():
        xp = tf.compat.v1.placeholder(tf.float32, x.shape)
        y = tf.nn.local_response_normalization(xp, depth_radius=2, bias=1.5, alpha=0.4, beta=0.6)
        (g,) = tf.gradients(y, xp, grad_ys=tf.constant(dy))
        got = tf.compat.v1.Session().run(g, {xp: x})
    want = _lrn_grad_reference(x, dy, 2, 1.5, 0.4, 0.6).reshape(x.shape)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert np.isnan(got[0, 1, 2, 1:6]).all() and not np.isnan(got[0, 1, 2, [0, 6]]).any()
    fin = np.isfinite(want)
    np.testing.assert_allclose(got[fin], want[fin], rtol=1e-5, atol=1e-6)


@graph_modes
def test_lrn_second_derivative_matches_finite_differences():
    """d/dx of sum(sin(dL/dx)) through lrn's custom gradient, against central differences of the
    float64 reference gradient (lrn runs in float32 only: a loose bound)."""
    x = np.array([[[[0.3, -0.8, 1.1, 0.4]]]], np.float32)
    w = np.array([[[[1.0, -0.5, 2.0, 0.7]]]], np.float32)
    args = (1, 1.0, 0.5, 0.75)
    with tf.Graph().as_default():
        xp = tf.compat.v1.placeholder(tf.float32, x.shape)
        (g,) = tf.gradients(tf.reduce_sum(tf.nn.lrn(xp, *args) * w), xp)
        (h,) = tf.gradients(tf.reduce_sum(tf.sin(g)), xp)
        got = tf.compat.v1.Session().run(h, {xp: x}).ravel()

    def f(v):
        return np.sum(np.sin(_lrn_grad_reference(v.reshape(1, 4), w.reshape(1, 4), *args)))
    eps = 1e-6
    x64 = x.astype(np.float64).ravel()
    want = [(f(x64 + eps * e) - f(x64 - eps * e)) / (2 * eps) for e in np.eye(4)]
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)


# ---------------------------------------------------------------- conv dtype mismatch, eagerly
# Eager conv2d / depthwise / separable / conv2d_transpose / conv1d(_transpose) of a float64
# input and float32 filters: TF 2.21 raises InvalidArgumentError (the op's eager dtype check);
# a graph raises TypeError (op-def). jitgrad raised TypeError in both (seed 360187).

def test_eager_conv_dtype_mismatch_is_invalid_argument():
    x = tf.constant(np.ones((1, 3, 3, 2), np.float64))
    f = tf.constant(np.ones((2, 2, 2, 1), np.float32))
    x1, f1 = tf.constant(np.ones((1, 3, 2), np.float64)), tf.constant(np.ones((2, 2, 1), np.float32))
    calls = [lambda: tf.nn.conv2d(x, f, 1, "SAME"), lambda: tf.nn.depthwise_conv2d(x, f, [1, 1, 1, 1], "SAME"),
             lambda: tf.nn.separable_conv2d(x, f, tf.ones([1, 1, 2, 1]), [1, 1, 1, 1], "SAME"),
             lambda: tf.nn.conv2d_transpose(x[..., :1], f, [1, 3, 3, 2], 1, "SAME"),
             lambda: tf.nn.conv1d(x1, f1, 1, "SAME"),
             lambda: tf.nn.conv1d_transpose(x1[..., :1], f1, [1, 3, 2], 1, "SAME")]
    for call in calls:
        with pytest.raises(InvalidArgumentError):
            call()
    with tf.Graph().as_default():
        with pytest.raises(TypeError):
            tf.nn.conv2d(tf.ones([1, 3, 3, 2], tf.float64), tf.ones([2, 2, 2, 1]), 1, "SAME")


# ---------------------------------------------------------------- no half-type kernel: the error's class
# erfinv / ndtri of float16 or bfloat16, lgamma / digamma / truncatemod of bfloat16 (and
# truncatemod of float16): TF 2.21 has no CPU kernel. Eagerly it fails placing the op
# (NotFoundError); a graph's Session.run and tf.function fail with InvalidArgumentError ("No
# OpKernel was registered"). jitgrad raised NotFoundError in all three (seeds 360279, 360309).

NO_HALF_KERNEL = [(tf.math.erfinv, tf.float16), (tf.math.ndtri, tf.bfloat16), (tf.math.lgamma, tf.bfloat16),
                  (tf.math.digamma, tf.bfloat16), (lambda x: tf.truncatemod(x, x), tf.float16)]


@pytest.mark.parametrize("case", range(len(NO_HALF_KERNEL)))
def test_no_half_kernel_is_not_found_eagerly_and_invalid_argument_in_graphs(case):
    fn, dt = NO_HALF_KERNEL[case]
    x = tf.cast(tf.constant([0.5, 0.25]), dt)
    with pytest.raises(tf.errors.NotFoundError):
        fn(x)
    with pytest.raises(tf.errors.InvalidArgumentError, match="No OpKernel"):
        tf.function(fn)(x)
    for mode in ("interpret", "compiled"):
        with tf.Graph().as_default():
            p = tf.compat.v1.placeholder(dt, [2])
            y = fn(p)
            with tf.compat.v1.Session(config=tf.compat.v1.ConfigProto(jitgrad_mode=mode)) as s:
                with pytest.raises(tf.errors.InvalidArgumentError, match="No OpKernel"):
                    s.run(y, {p: np.array([0.5, 0.25], dt.as_numpy_dtype)})
    # float16 lgamma has a kernel in TF: lgamma(1/2) = log(sqrt(pi)), by hand
    np.testing.assert_allclose(tf.math.lgamma(tf.constant([0.5], tf.float16)).numpy(), [0.5 * np.log(np.pi)],
                               rtol=1e-3)


# ---------------------------------------------------------------- trigamma at -inf
# digamma's gradient is g * polygamma(1, x); TF 2.21's polygamma(1, -inf) is +inf (its zeta(2, x)
# calls every x <= 0 with x == floor(x) a pole, and floor(-inf) == -inf), in eager and graph
# runs. jitgrad gave NaN there (eager sweep of bench/tf_fuzz_new.py's "special", seed 2307).

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_digamma_gradient_at_minus_inf_is_a_pole_eager(dtype):
    x = tf.constant(np.array([-np.inf, -3.0, np.nan, 1.0], dtype))
    with tf.GradientTape() as t:
        t.watch(x)
        y = tf.reduce_sum(tf.math.digamma(x))
    g = t.gradient(y, x).numpy()
    np.testing.assert_array_equal(g[:2], [np.inf, np.inf])
    assert np.isnan(g[2])
    np.testing.assert_allclose(g[3], np.pi ** 2 / 6, rtol=1e-6)       # trigamma(1) = zeta(2)


@graph_modes
def test_digamma_gradient_at_minus_inf_is_a_pole_in_graphs():
    with tf.Graph().as_default():
        p = tf.compat.v1.placeholder(tf.float64, [3])
        (g,) = tf.gradients(tf.reduce_sum(tf.math.digamma(p)), p)
        got = tf.compat.v1.Session().run(g, {p: np.array([-np.inf, -1e300, 2.0])})
    # -1e300 is a negative integer (a pole); trigamma(2) = pi^2 / 6 - 1
    np.testing.assert_array_equal(got[:2], [np.inf, np.inf])
    np.testing.assert_allclose(got[2], np.pi ** 2 / 6 - 1, rtol=1e-14)


# ---------------------------------------------------------------- tensor_scatter_nd_min / max of infinities
# TF folds the updates into the tensor's element with acc = (u < acc) ? u : acc (min), so
# min(inf, inf) stays inf. jitgrad took the updates' segment min, which starts at FLT_MAX (TF's
# segment identity): a row named only by +inf updates got FLT_MAX, which "beat" a +inf in the
# tensor (fuzz seed 360570: 3.4028235e38 where TF 2.21 keeps inf; max / -inf likewise).

INF = np.inf
MAX32 = float(np.finfo(np.float32).max)


def _scatter_extremes(t, idx, upd):
    return tf.tensor_scatter_nd_min(t, idx, upd), tf.tensor_scatter_nd_max(t, idx, upd)


def test_scatter_min_max_keep_infinities_eager():
    t = tf.constant([INF, -INF, 1.0, INF, -INF])
    idx = tf.constant([[0], [1], [2], [3], [4], [3]])
    upd = tf.constant([INF, -INF, INF, MAX32, np.nan, np.nan])
    lo, hi = _scatter_extremes(t, idx, upd)
    # by hand, folding each element's updates in order: min(inf, inf) = inf, min(-inf, -inf) = -inf,
    # min(1, inf) = 1, min(inf, FLT_MAX, NaN) = FLT_MAX (NaN never wins), min(-inf, NaN) = -inf
    np.testing.assert_array_equal(lo.numpy(), [INF, -INF, 1.0, MAX32, -INF])
    np.testing.assert_array_equal(hi.numpy(), [INF, -INF, INF, INF, -INF])


@graph_modes
def test_scatter_min_max_keep_infinities_in_rows_both_session_modes():
    t = np.array([[INF, 2.0], [-INF, 0.5]], np.float32)
    upd = np.array([[INF, 3.0], [-INF, -INF], [INF, 1.0]], np.float32)
    with tf.Graph().as_default():
        tp = tf.compat.v1.placeholder(tf.float32, [2, 2])
        up = tf.compat.v1.placeholder(tf.float32, [3, 2])
        lo, hi = _scatter_extremes(tp, tf.constant([[0], [1], [0]]), up)
        got_lo, got_hi = tf.compat.v1.Session().run([lo, hi], {tp: t, up: upd})
    # row 0 takes updates 0 and 2, row 1 update 1 (by hand)
    np.testing.assert_array_equal(got_lo, [[INF, 1.0], [-INF, -INF]])
    np.testing.assert_array_equal(got_hi, [[INF, 3.0], [-INF, 0.5]])


# ---------------------------------------------------------------- unravel_index of no indices
# TF 2.21's UnravelIndex kernel refuses an empty indices tensor ("received empty tensor
# indices", InvalidArgumentError, eager and when a graph runs); jitgrad returned [[], []]
# (fuzz seed 360627, int programs).

def test_unravel_index_of_empty_indices_is_invalid_argument_eager():
    with pytest.raises(InvalidArgumentError, match="empty tensor indices"):
        tf.unravel_index(np.zeros([0], np.int32), [2, 3])
    np.testing.assert_array_equal(tf.unravel_index([1, 5], [2, 3]).numpy(), [[0, 1], [1, 2]])   # 5 = 1 * 3 + 2


@pytest.mark.usefixtures("graph_mode")
def test_unravel_index_of_empty_indices_is_invalid_argument_in_graphs():
    with tf.Graph().as_default():
        p = tf.compat.v1.placeholder(tf.int32, [None])
        y = tf.unravel_index(p, tf.constant([2, 3]))
        with tf.compat.v1.Session() as s:
            np.testing.assert_array_equal(s.run(y, {p: [4]}), [[1], [1]])      # 4 = 1 * 3 + 1
            with pytest.raises(InvalidArgumentError, match="empty tensor indices"):
                s.run(y, {p: np.zeros([0], np.int32)})


# ---------------------------------------------------------------- max pooling's second derivative
# TF's MaxPoolGrad takes the input, and _MaxPoolGradGrad gives it zeros: the Hessian of a
# max pool (piecewise linear) is 0. jitgrad's gradient reached x only through the argmax (an
# integer), so tf.hessians found no path and raised ValueError, a tape gave None (fuzz seed
# 360454: a chain ending in tf.nn.max_pool1d; TF 2.21 gives a zero Hessian).

def test_max_pool_second_derivative_is_zero_not_none_eager():
    x = tf.constant(np.array([[1., 3., np.inf, 2.], [0.5, -1., 4., np.nan]], np.float32).reshape(1, 2, 4, 1))
    with tf.GradientTape() as t2:
        t2.watch(x)
        with tf.GradientTape() as t1:
            t1.watch(x)
            w = np.array([1., 2., 3.], np.float32).reshape(1, 1, 3, 1)
            y = tf.reduce_sum(tf.nn.max_pool2d(x, 2, 1, "VALID") * w)
        g = t1.gradient(y, x)
    h = t2.gradient(g, x)
    # windows (by hand): [1, 3, .5, -1] -> 3 (w 1), [3, inf, -1, 4] -> inf (w 2), [inf, 2, 4, NaN] -> inf (w 3)
    np.testing.assert_array_equal(g.numpy().ravel(), [0, 1, 5, 0, 0, 0, 0, 0])
    assert h is not None
    np.testing.assert_array_equal(h.numpy(), np.zeros(x.shape, np.float32))


@graph_modes
def test_max_pool1d_hessian_is_zero_in_both_session_modes():
    x = np.array([0.3, -1.0, 2.5, 2.5, 0.0, 1.0], np.float32).reshape(1, 6, 1)
    with tf.Graph().as_default():
        p = tf.compat.v1.placeholder(tf.float32, x.shape)
        (h,) = tf.hessians(tf.reduce_sum(tf.nn.max_pool1d(p, 3, 2, "SAME")), p)
        got = tf.compat.v1.Session().run(h, {p: x})
    np.testing.assert_array_equal(got, np.zeros(x.shape * 2, np.float32))


# ---------------------------------------------------------------- antialiased resize: TF's zero-weight taps
# TF's ScaleAndTranslate (resize bilinear, antialias=True) sums span_size taps per output pixel,
# rows first: a tap past the span's end still reads pixel start + k with weight 0, so an inf there
# makes the output NaN; a tap past the image reads nothing. jitgrad read pixel 0 for those taps:
# NaN in other places (fuzz graph sweep seed 5454: 114 of 150 random images with infinities
# differed in where NaN lands; TF 2.21 and the reference below agree on all of them).

def _scale_and_translate_reference(x, out_h, out_w):
    """TF's ComputeSpansCore (triangle kernel, antialias) and GatherRows / GatherColumns, in
    float32 with loops: x [H, W, C] -> [out_h, out_w, C]."""
    f32 = np.float32

    def spans(in_size, out_size):
        inv_scale = f32(1.0 / np.float64(f32(out_size) / f32(in_size)))
        kscale = max(inv_scale, f32(1.0))
        size = min(2 * int(np.ceil(kscale)) + 1, in_size)
        starts, weights = [], []
        for o in range(out_size):
            sample = f32(o + 0.5) * inv_scale
            w = [f32(0.0)] * size
            start = 0
            if not (sample < 0 or sample > in_size):
                start = int(min(max(np.ceil(sample - kscale - f32(0.5)), 0), in_size - 1))
                end = int(min(max(np.floor(sample + kscale - f32(0.5)), 0), in_size - 1)) + 1
                raw = [max(f32(1.0) - abs((f32(s) + f32(0.5) - sample) / kscale), f32(0.0)) for s in range(start, end)]
                total = f32(0.0)
                for r in raw:
                    total = f32(total + r)
                if abs(total) >= 1000.0 * np.finfo(np.float32).tiny:
                    w[:len(raw)] = [f32(r * f32(f32(1.0) / total)) for r in raw]
            starts.append(start)
            weights.append(w)
        return starts, weights

    def gather(img, in_size, out_size, axis):       # img's `axis` resized
        starts, weights = spans(in_size, out_size)
        moved = np.moveaxis(img, axis, 0)
        out = np.zeros((out_size,) + moved.shape[1:], np.float32)
        with np.errstate(invalid="ignore"):
            for o in range(out_size):
                for k in range(min(starts[o] + len(weights[o]), in_size) - starts[o]):
                    out[o] = out[o] + weights[o][k] * moved[starts[o] + k]
        return np.moveaxis(out, 0, axis)

    return gather(gather(x, x.shape[0], out_h, 0), x.shape[1], out_w, 1)


ANTIALIAS_IMAGE = np.array([[[3e38, 1.0], [-1.5, -np.inf]], [[0.0, 2.0], [np.nan, 1.5]]], np.float32)


@pytest.mark.parametrize("size", [(7, 4), (1, 1), (3, 5), (2, 2)])
def test_antialias_resize_nan_and_inf_land_where_tfs_kernel_puts_them_eager(size):
    got = tf.image.resize(ANTIALIAS_IMAGE, size, antialias=True).numpy()
    want = _scale_and_translate_reference(ANTIALIAS_IMAGE, *size)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.where(np.isinf(got), got, 0), np.where(np.isinf(want), want, 0))
    fin = np.isfinite(want)
    np.testing.assert_allclose(got[fin], want[fin], rtol=1e-6)


def test_antialias_resize_of_the_fuzz_case_as_tf():
    # the -inf at pixel (1, 1): printed by TF 2.21 -- output rows 0 and 1 take row 1 as a
    # zero-weight tap (0 * -inf: NaN everywhere after the column pass), and column 0 takes
    # column 1 likewise; the rest weighs the -inf: -inf
    x = np.array([[[1.25], [-2.0]], [[-1.4], [-np.inf]]], np.float32)
    got = tf.image.resize(x, (7, 4), antialias=True).numpy()[..., 0]
    assert np.isnan(got[:2]).all() and np.isnan(got[:, 0]).all()
    np.testing.assert_array_equal(got[2:, 1:], np.full((5, 3), -np.inf, np.float32))


@graph_modes
def test_antialias_resize_with_infinities_in_both_session_modes():
    rng = np.random.default_rng(3636)
    for trial in range(4):
        h, w = (int(v) for v in rng.integers(1, 5, 2))
        x = rng.uniform(-2, 2, (1, h, w, 2)).astype(np.float32)
        m = rng.random(x.shape)
        x[m < 0.15] = np.inf
        x[m > 0.9] = -np.inf
        size = [int(v) for v in rng.integers(1, 8, 2)]
        with tf.Graph().as_default():
            p = tf.compat.v1.placeholder(tf.float32, x.shape)
            got = tf.compat.v1.Session().run(tf.image.resize(p, size, antialias=True), {p: x})[0]
        want = _scale_and_translate_reference(x[0], *size)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_array_equal(np.where(np.isinf(got), got, 0), np.where(np.isinf(want), want, 0))
        fin = np.isfinite(want)
        np.testing.assert_allclose(got[fin], want[fin], rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------- pow by +-0.5 is IEEE pow in every mode
# Seed 364385: pow(x, 0.5)'s gradient 0.5 * pow(x, -0.5) at x = -0 is +inf in jitgrad and TF 2.21
# eager, -inf in TF's Session and tf.function. TF's gradient rule is the same in all of them
# (math_grad._PowGrad); the graph difference is grappler's arithmetic optimizer (ConvertPow),
# which rewrites pow by a constant 0.5 / -0.5 into Sqrt / Rsqrt: rsqrt(-0) = -inf, sqrt(-inf) =
# NaN where pow gives +inf, 0. With tf.config.optimizer.set_experimental_options(
# {"arithmetic_optimization": False}) TF's graphs give pow's values too. jitgrad keeps pow's
# values everywhere (passes/simplify.py declines pow(x, .5) -> sqrt for this reason): these
# tests pin that, so no mode quietly turns into a sqrt / rsqrt.

POW_X = np.array([-0.0, -np.inf, 0.0, 4.0, np.inf], np.float32)
# C99 / IEEE pow: pow(+-0, y<0 not an odd integer) = +inf, pow(-inf, y<0 ...) = +0,
# pow(-inf, y>0 not an odd integer) = +inf, pow(+-0, y>0 ...) = +0; by hand for x = 4
POW_WANT = {0.5: ([0.0, np.inf, 0.0, 2.0, np.inf],             # x ** 0.5
                  [np.inf, 0.0, np.inf, 0.25, 0.0]),            # 0.5 * x ** -0.5
            -0.5: ([np.inf, 0.0, np.inf, 0.5, 0.0],             # x ** -0.5
                   [-np.inf, 0.0, -np.inf, -0.0625, 0.0])}      # -0.5 * x ** -1.5 (4 ** -1.5 = 1/8)


def _pow_and_grad(x, e):
    with tf.GradientTape() as t:
        t.watch(x)
        y = tf.pow(x, e)
    return y, t.gradient(y, x)


@pytest.mark.parametrize("e", [0.5, -0.5])
def test_pow_by_half_at_minus_zero_and_minus_inf_eager_and_function(e):
    want_y, want_g = POW_WANT[e]
    for f in (_pow_and_grad, tf.function(_pow_and_grad)):
        y, g = f(tf.constant(POW_X), e)
        # assert_array_equal treats -0 == +0: the signs of zero are not the point here
        np.testing.assert_array_equal(y.numpy(), np.array(want_y, np.float32))
        np.testing.assert_array_equal(g.numpy(), np.array(want_g, np.float32))


@graph_modes
@pytest.mark.parametrize("e", [0.5, -0.5])
def test_pow_by_half_at_minus_zero_and_minus_inf_in_both_session_modes(e):
    want_y, want_g = POW_WANT[e]
    with tf.Graph().as_default():
        p = tf.compat.v1.placeholder(tf.float32, [5])
        y = tf.pow(p, e)
        (g,) = tf.gradients(y, p)
        got_y, got_g = tf.compat.v1.Session().run([y, g], {p: POW_X})
    np.testing.assert_array_equal(got_y, np.array(want_y, np.float32))
    np.testing.assert_array_equal(got_g, np.array(want_g, np.float32))


# ---------------------------------------------------------------- floormod of a huge dividend is exact
# Seed 364440: floormod(1.61393e38, sigmoid(x)) -- the dividend a softmax cross-entropy of a
# 3e38 logit. TF's and jitgrad's sigmoid / cross-entropy differ by an ulp, and an ulp of the
# dividend (2e31) or of a divisor near 0.7 changes such a remainder completely: TF
# [0.0297, 0, 0.1923] vs jitgrad [0.0697, 0, 0.2009]. Both remainders are exact for their own
# inputs, which is what this pins: fmod of float32 values is exact, so numpy's float64 fmod
# of them, rounded to float32, is the answer; for a negative divisor floor-mod adds it (TF 2.21's
# floormod of these operands gives the same six values).

FM_X = np.float32(1.6139305e38)
FM_Y = np.array([0.12105253, 1.0, 0.7112157, -0.7112157, 0.7112156, -3.0], np.float32)


def _floormod_reference(x, y):
    r = np.fmod(np.float64(x), y.astype(np.float64))
    r = np.where((r != 0) & ((r < 0) != (y < 0)), r + y.astype(np.float64), r)
    return r.astype(np.float32)


def test_floormod_of_a_huge_dividend_is_exact_eager():
    want = _floormod_reference(FM_X, FM_Y)
    assert want[0] == np.float32(0.069737285) and want[2] == np.float32(0.20085901)  # the fuzz case's
    np.testing.assert_array_equal(tf.math.floormod(tf.constant(FM_X), tf.constant(FM_Y)).numpy(), want)


@graph_modes
def test_floormod_of_a_huge_dividend_is_exact_in_both_session_modes():
    with tf.Graph().as_default():
        a = tf.compat.v1.placeholder(tf.float32, [])
        b = tf.compat.v1.placeholder(tf.float32, [6])
        got = tf.compat.v1.Session().run(tf.math.floormod(a, b), {a: FM_X, b: FM_Y})
    np.testing.assert_array_equal(got, _floormod_reference(FM_X, FM_Y))


# ---------------------------------------------------------------- no float16 polygamma: digamma's gradient
# TF's digamma gradient is polygamma(1, x), an op defined for float32 / float64 only: float16
# digamma (and float16 lgamma's second derivative) has no gradient in TF 2.21 -- eagerly
# InvalidArgumentError ("Value for attr 'T' of half is not in the list of allowed values"), in a
# graph or tf.function TypeError. jitgrad computed one (fuzz seed 370099, eager hessian).

def test_float16_digamma_gradient_is_invalid_argument_eagerly_and_type_error_in_graphs():
    x = tf.constant(np.array([0.5, 2.0], np.float16))
    with tf.GradientTape() as t:
        t.watch(x)
        y = tf.math.digamma(x)
    with pytest.raises(InvalidArgumentError, match="of half is not in the list"):
        t.gradient(y, x)
    with pytest.raises(TypeError):
        tf.function(lambda v: tf.gradients(tf.math.digamma(v), v))(x)
    with tf.Graph().as_default():
        p = tf.compat.v1.placeholder(tf.float16, [2])
        with pytest.raises(TypeError):
            tf.gradients(tf.math.digamma(p), p)
        with pytest.raises(TypeError):
            tf.hessians(tf.reduce_sum(tf.math.lgamma(p)), p)
        assert tf.gradients(tf.reduce_sum(tf.math.lgamma(p)), p)[0] is not None   # its gradient, digamma: fine
    # float32 keeps its gradient: trigamma(1) = pi^2 / 6, by hand
    x32 = tf.constant([1.0])
    with tf.GradientTape() as t:
        t.watch(x32)
        y = tf.math.digamma(x32)
    np.testing.assert_allclose(t.gradient(y, x32).numpy(), [np.pi ** 2 / 6], rtol=1e-6)


# ---------------------------------------------------------------- complex division (seed 370142)
def _complex(pairs, dtype):
    return np.array([complex(a, b) for a, b in pairs], dtype)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_complex_division_special_values_as_tf(dtype):
    inf, nan = np.inf, np.nan
    x = _complex([(1, 0), (1, 1), (0, 0), (1, 0), (inf, 0), (0, 1)], dtype)
    y = _complex([(0, 0), (0, 0), (0, 0), (inf, 0), (1, 0), (0, 0)], dtype)
    # y scaled by max(|re|, |im|) first (Eigen's complex pdiv, TF 2.21's kernel): a zero divisor
    # scales by 0 / 0 = nan, an infinite one by inf / inf = nan; inf / 1 = inf * 1 + i (0 - inf * 0)
    want = [(nan, nan), (nan, nan), (nan, nan), (nan, nan), (inf, nan), (nan, nan)]
    for got in (tf.math.divide(x, y).numpy(), tf.function(lambda a, b: a / b)(tf.constant(x), tf.constant(y)).numpy()):
        np.testing.assert_array_equal(got.real, [w[0] for w in want])
        np.testing.assert_array_equal(got.imag, [w[1] for w in want])
    r = tf.math.reciprocal(y).numpy()
    zero_or_inf = [0, 1, 2, 3, 5]
    assert np.isnan(r.real[zero_or_inf]).all() and np.isnan(r.imag[zero_or_inf]).all() and r[4] == 1


def test_complex_division_scales_before_squaring():
    # |y|^2 = 1e-600 underflows; scaled by 1e-300 first the quotient is exact, as TF's
    got = tf.math.divide(tf.constant([2 + 3j]), tf.constant([1e-300 + 0j])).numpy()
    assert got[0] == complex(2 / 1e-300, 3 / 1e-300)   # (x / 1) / m per part


def test_complex_division_agrees_with_exact_quotients():
    rng = np.random.default_rng(370142)
    x = rng.standard_normal(64) + 1j * rng.standard_normal(64)
    y = rng.standard_normal(64) + 1j * rng.standard_normal(64)
    got = tf.math.divide(tf.constant(x), tf.constant(y)).numpy()
    want = x * np.conj(y) / (y.real ** 2 + y.imag ** 2)
    np.testing.assert_allclose(got, want, rtol=1e-14)
    np.testing.assert_allclose(tf.math.divide_no_nan(tf.constant(x), tf.constant(np.r_[y[:63], 0])).numpy(),
                               np.r_[want[:63], 0], rtol=1e-14)
