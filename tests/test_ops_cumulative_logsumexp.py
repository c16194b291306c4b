"""tf.math.cumulative_logsumexp: TF's scan of log-add-exp steps, compiled (lower_scan.py, no
interpreter fallback) and interpreted against an independent reference (per prefix: its max
plus the log of math.fsum of the shifted exponentials, in float64), every axis / exclusive /
reverse, TF 2.21's special values, half types and gradients (checked side by side with TF)."""
import math
import os
import sys

import numpy as np
import pytest

import jitgrad as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _graph_testing import check_op, dtype_id, run_graph  # noqa: E402

MODES = ["compiled", "interpret"]
cle = tf.math.cumulative_logsumexp


def _prefix_logsumexp(row):
    """log(sum(exp(row[:k+1]))) for each k, exactly rounded sums of float64 terms."""
    out = []
    for k in range(len(row)):
        p = [float(v) for v in row[: k + 1]]
        m = max(p)
        out.append(m if m == -math.inf else m + math.log(math.fsum(math.exp(v - m) for v in p)))
    return out


def _reference(x, axis, exclusive, reverse):
    xs = np.moveaxis(np.asarray(x, np.float64), axis, -1)
    out = np.empty_like(xs)
    for idx in np.ndindex(xs.shape[:-1]):
        row = xs[idx][::-1] if reverse else xs[idx]
        r = _prefix_logsumexp(row)
        if exclusive:
            r = [-math.inf] + r[:-1]
        out[idx] = r[::-1] if reverse else r
    return np.moveaxis(out, -1, axis)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=dtype_id)
def test_against_independent_reference(dtype, mode):
    """Within 4 eps of max(1, |value|) per element over scans of up to 13 steps (each step's
    rounding adds at most about an eps of the running value)."""
    rng = np.random.default_rng(11)
    x = (rng.normal(0, 3, (5, 13, 6)) + rng.choice([0, 40, -40], (5, 13, 6))).astype(dtype)
    eps = np.finfo(dtype).eps
    cases = [(a, e, r) for a in (0, 1, -1) for e in (False, True) for r in (False, True)]
    outs = run_graph(lambda p: [cle(p, axis=a, exclusive=e, reverse=r) for a, e, r in cases], [x], mode)
    for (a, e, r), got in zip(cases, outs):
        assert got.dtype == dtype and got.shape == x.shape
        want = _reference(x, a, e, r)
        assert np.array_equal(np.isneginf(got), np.isneginf(want)), (a, e, r)
        fin = np.isfinite(want)
        err = np.abs(got[fin] - want[fin]) / (eps * np.maximum(1, np.abs(want[fin])))
        assert err.max() <= 4, (a, e, r, err.max())


@pytest.mark.parametrize("mode", MODES)
def test_numerically_stable(mode):
    """No overflow for large values, no underflow of small ones to -inf (log(cumsum(exp(x)))
    gives inf and -inf here)."""
    x = np.array([[-1000.0, 0.0, 1000.0, 1000.0], [-1e4, -1e4, -1e4 + 1, -2e4]])
    (got,) = run_graph(lambda p: [cle(p, axis=1)], [x], mode)
    want = [[-1000.0, 0.0, 1000.0, 1000.0 + math.log(2)],
            [-1e4, -1e4 + math.log(2), -1e4 + 1 + math.log1p(2 / math.e), -1e4 + 1 + math.log1p(2 / math.e)]]
    np.testing.assert_allclose(got, want, rtol=2e-16, atol=0)


@pytest.mark.parametrize("mode", MODES)
def test_special_values_as_tf(mode):
    """TF 2.21's outputs for these (its step: std::min / std::max keep the accumulator against
    a NaN, -inf with -inf stays -inf, inf with inf is NaN)."""
    inf, nan = np.inf, np.nan
    rows = [([inf, 1.0, nan, 2.0, -inf, inf], [inf, inf, nan, nan, nan, nan]),
            ([inf, inf, -inf], [inf, nan, nan]),
            ([1.0, nan, inf], [1.0, 1.0 + math.log(2), inf]),
            ([-inf, inf, 1.0], [-inf, inf, inf]),
            ([nan, 1.0, -inf], [-inf, 1.0, 1.0])]
    xs = [np.array(r, np.float32) for r, _ in rows]
    outs = run_graph(lambda *ps: [cle(p) for p in ps], xs, mode)
    for (_, want), got in zip(rows, outs):
        np.testing.assert_allclose(got, np.array(want, np.float32), rtol=1e-7, atol=0)


def test_half_types_as_tf():
    """float16 / bfloat16 each step rounded to the type: TF 2.21's values exactly."""
    x = np.array([[-1000.0, 0.0, 3.0, -2.0], [1.0, 1.0, 1.0, 1.0], [-np.inf, -np.inf, 2.0, -np.inf]])
    want = {tf.float16: [[-1000.0, 0.0, 3.0, -2.0], [1.0, 1.3134765625, 3.126953125, 1.048828125],
                         [1.0, 1.3134765625, 3.408203125, 1.048828125]],
            tf.bfloat16: [[-1000.0, 0.0, 3.0, -2.0], [1.0, 1.3125, 3.125, 1.046875],
                          [1.0, 1.3125, 3.40625, 1.046875]]}
    for dt, w in want.items():
        got = cle(tf.constant(x, dt))
        assert got.dtype == dt
        assert got.numpy().astype(np.float32).tolist() == w


def test_errors_as_tf():
    with pytest.raises(tf.errors.InvalidArgumentError):
        cle(tf.constant([1, 2]))                      # integers: not in T's list
    with pytest.raises(tf.errors.InvalidArgumentError):
        cle(tf.constant(2.0))                          # a scalar has no axis 0
    with pytest.raises(tf.errors.InvalidArgumentError):
        cle(tf.constant([[1.0]]), axis=2)
    # TF 2.21's shape function lets a bad axis through; its kernel raises when it runs
    g = tf.Graph()
    with g.as_default():
        y = cle(tf.compat.v1.placeholder_with_default(tf.ones([2, 3]), [2, 3]), axis=-3)
    for mode in ("interpret", "compiled"):
        with tf.compat.v1.Session(graph=g, config={"jitgrad_mode": mode}) as s, \
                pytest.raises(tf.errors.InvalidArgumentError):
            s.run(y)
    assert cle(tf.zeros([0, 3]), axis=0).shape == (0, 3)


# TF 2.21's gradient (tf.function, GradientTape) of reduce_sum(cumulative_logsumexp(X, axis=1,
# exclusive, reverse) * W), float64
X = [[0.5, -1.0, 2.0, 0.25], [3.0, -2.0, 1.0, 0.0]]
W = [[1.0, -2.0, 0.5, 3.0], [0.0, 1.0, -1.0, 2.0]]
TF_GRADS = {
    (False, False): [[-0.08479928046478236, -0.24205143717900834, 2.46649610951923, 0.36035460812456044],
                     [1.7957555689376914, 0.01209970584681472, 0.10859958418479285, 0.08354514103070089]],
    (False, True): [[0.1542348252841622, -0.0469661648286693, -0.5173642368225999, 2.910095576367106],
                    [0.0, 0.03511902695933972, -0.02567406593176391, 1.9905550389724236]],
    (True, False): [[-1.0653415854830683, 0.2085504817152405, 2.356791103767827, 0.0],
                    [1.7578940410504602, 0.00510664987952071, 0.23699930907001918, 0.0]],
    (True, True): [[0.0, 0.04069030304739475, -0.8866190196624784, 0.3459287166150834],
                   [0.0, 0.0, 0.731058578630005, -0.7310585786300049]],
}


@pytest.mark.parametrize("mode", MODES)
def test_gradients_as_tf(mode):
    """TF's rule (positive and negative parts of the upstream gradient carried in log space);
    the compiled gradient graph does not fall back either. Within 1e-14 (TF's exp / log1p
    round differently; the rule subtracts the parts)."""
    cases = sorted(TF_GRADS)
    x, w = np.array(X), np.array(W)

    def build(p):
        return [tf.gradients(tf.reduce_sum(cle(p, axis=1, exclusive=e, reverse=r) * w), p)[0] for e, r in cases]
    for (e, r), got in zip(cases, run_graph(build, [x], mode)):
        np.testing.assert_allclose(got, TF_GRADS[e, r], rtol=1e-14, atol=1e-15, err_msg=str((e, r)))


@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
def test_gradient_against_finite_differences(exclusive, reverse):
    """(An exclusive scan's -inf end left out of the weighted sum.)"""
    x = np.random.default_rng(5).normal(0, 2, (3, 5))
    keep = slice(None) if not exclusive else (slice(None, -1) if reverse else slice(1, None))
    check_op(lambda p: cle(p, axis=1, exclusive=exclusive, reverse=reverse)[:, keep], x,
             expected=_reference(x, 1, exclusive, reverse)[:, keep], value_rtol=1e-14, rtol=1e-6, atol=1e-8)


def test_eager_and_tape_match_graph():
    x = np.random.default_rng(2).normal(0, 4, (4, 6)).astype(np.float32)
    (graph,) = run_graph(lambda p: [cle(p, axis=0, reverse=True)], [x], "compiled")
    v = tf.Variable(x)
    with tf.GradientTape() as t:
        y = cle(v, axis=0, reverse=True)
        s = tf.reduce_sum(y * y)
    np.testing.assert_allclose(y.numpy(), graph, rtol=4e-7, atol=4e-7)
    (g,) = run_graph(lambda p: tf.gradients(tf.reduce_sum(tf.square(cle(p, axis=0, reverse=True))), p), [x],
                     "compiled")
    np.testing.assert_allclose(t.gradient(s, v).numpy(), g, rtol=1e-5, atol=1e-5)
