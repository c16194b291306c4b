"""tf.math.lgamma / tf.math.digamma and digamma's derivative (polygamma(1, x)): compiled
Sessions (codegen/lower_gamma.py, no interpreter fallback) and the reference interpreter
against independent references -- Python's math.lgamma, and digamma / trigamma evaluated in
50-digit Decimal arithmetic here (recurrence to x >= 40, the asymptotic series with Bernoulli
numbers computed here, reflection with a Decimal cot) -- with TF 2.21's special values,
dtypes and gradients (values taken from real TF)."""
import math
import os
import sys
from decimal import Decimal as D, localcontext
from fractions import Fraction

import numpy as np
import pytest

import jitgrad as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _graph_testing import check_op, dtype_id, run_graph  # noqa: E402

MODES = ["compiled", "interpret"]
PI = D("3.14159265358979323846264338327950288419716939937510582097494")


def _bernoulli(n):
    """B_0 .. B_n exactly (Akiyama-Tanigawa; B_1 = +1/2, unused)."""
    a, out = [Fraction(0)] * (n + 1), []
    for m in range(n + 1):
        a[m] = Fraction(1, m + 1)
        for j in range(m, 0, -1):
            a[j - 1] = j * (a[j - 1] - a[j])
        out.append(a[0])
    return out


B = [D(b.numerator) / D(b.denominator) for b in _bernoulli(26)]


def _sin_cos(t):
    s, c, term, k = D(0), D(0), D(1), 0
    while True:          # term = t^k / k!
        if k % 4 == 0:
            c += term
        elif k % 4 == 1:
            s += term
        elif k % 4 == 2:
            c -= term
        else:
            s -= term
        k += 1
        term = term * t / k
        if abs(term) < D(10) ** -60:
            return s, c


def _polygamma_decimal(x, order):
    """digamma (order 0) or trigamma (order 1) of the float x, to ~45 digits (NaN / inf at poles)."""
    with localcontext() as ctx:
        ctx.prec = 60
        x = D(x)
        if x <= 0 and x == x.to_integral_value():
            return math.nan if order == 0 else math.inf
        if x < 0:
            h = x - x.to_integral_value()           # x - round(x), exact, in [-1/2, 1/2]
            s, c = _sin_cos(PI * h)
            rest = _polygamma_decimal(1 - x, order)
            return float(D(rest) - PI * c / s) if order == 0 else float(PI * PI / (s * s) - D(rest))
        acc = D(0)
        while x < 40:
            acc += 1 / x if order == 0 else 1 / (x * x)
            x += 1
        if order == 0:
            v = x.ln() - 1 / (2 * x) - sum(B[2 * k] / (2 * k * x ** (2 * k)) for k in range(1, 13)) - acc
        else:
            v = 1 / x + 1 / (2 * x * x) + sum(B[2 * k] / x ** (2 * k + 1) for k in range(1, 13)) + acc
        return float(v)


def _lgamma_decimal(x):
    """log|Gamma(x)| of the float x to ~45 digits: the recurrence to x >= 40 and Stirling's
    series (Bernoulli numbers above); reflection for x < 0."""
    if x == -math.inf or (x <= 0 and x == math.floor(x)):
        return math.inf
    with localcontext() as ctx:
        ctx.prec = 60
        x = D(x)
        if x < 0:      # |Gamma(x)| = pi / (|sin(pi x)| |x| Gamma(|x|))
            s, _ = _sin_cos(PI * (x - x.to_integral_value()))
            return float(PI.ln() - abs(s).ln() - (-x).ln() - D(_lgamma_decimal(float(-x))))
        prod = D(1)
        while x < 40:
            prod *= x
            x += 1
        v = (x - D("0.5")) * x.ln() - x + (2 * PI).ln() / 2 + \
            sum(B[2 * k] / (2 * k * (2 * k - 1) * x ** (2 * k - 1)) for k in range(1, 13))
        return float(v - prod.ln())


def _lgamma_ref(v):
    """Python's math.lgamma (another implementation: CPython's Lanczos sum)."""
    if v == -math.inf or (v <= 0 and v == math.floor(v)):
        return math.inf
    return math.lgamma(v)


def _sweep(dtype, n, seed):
    rng = np.random.default_rng(seed)
    x = np.concatenate([rng.uniform(-25, 25, n), rng.uniform(0, 3, n // 2), rng.uniform(-3, 0, n // 4),
                        np.exp(rng.uniform(-60, 60, n // 4)), -np.exp(rng.uniform(-60, 3, n // 8)),
                        [0.5, 1.5, 2.5, 3.0, 7.999, 8.0, 9.5, 10.0, 1e-8, -1e-8, 1.4616321449683622]])
    return x.astype(dtype)


def test_names_as_tf():
    """TF 2.21: tf.math only (no top-level tf.lgamma / tf.digamma)."""
    assert callable(tf.math.lgamma) and callable(tf.math.digamma)
    assert not hasattr(tf, "lgamma") and not hasattr(tf, "digamma")


@pytest.mark.parametrize("mode", MODES)
def test_float64_against_independent_references(mode):
    """The docstring's bounds (ops/gamma_ops.py): within 1e-14 of max(1, |value|) everywhere
    (also of math.lgamma's); for x > 0 within 2e-15 relative where |lgamma| > 0.1, |digamma|
    > 0.5, and for trigamma; digamma within 2e-15 absolute on (1, 2), around its root."""
    x = _sweep(np.float64, 1200, 1)
    lg, dg, tg = run_graph(lambda p: [tf.math.lgamma(p), tf.math.digamma(p),
                                      tf.gradients(tf.reduce_sum(tf.math.digamma(p)), p)[0]], [x], mode)
    ref_lg = np.array([_lgamma_decimal(v) for v in x.tolist()])
    ref_dg = np.array([_polygamma_decimal(v, 0) for v in x.tolist()])
    ref_tg = np.array([_polygamma_decimal(v, 1) for v in x.tolist()])
    libm = np.array([_lgamma_ref(v) for v in x.tolist()])
    assert np.max(np.abs(lg - libm) / np.maximum(1, np.abs(libm))) <= 1e-14     # (math.lgamma: as close)
    for name, got, ref in (("lgamma", lg, ref_lg), ("digamma", dg, ref_dg), ("trigamma", tg, ref_tg)):
        assert got.dtype == np.float64
        err = np.abs(got - ref) / np.maximum(1, np.abs(ref))
        k = int(np.argmax(err))
        assert err[k] <= 1e-14, (name, x[k], got[k], ref[k])
    assert np.all(lg[np.isin(x, [1.0, 2.0])] == 0)
    pos = (x > 0) & (np.abs(ref_lg) > 0.1)
    assert np.max(np.abs(lg[pos] - ref_lg[pos]) / np.abs(ref_lg[pos])) <= 2e-15
    assert np.max(np.abs(dg - ref_dg)[(x > 1) & (x < 2)]) <= 2e-15   # (around its root: the recurrence cancels)
    pos = (x > 0) & (np.abs(ref_dg) > 0.5)
    assert np.max(np.abs(dg[pos] - ref_dg[pos]) / np.abs(ref_dg[pos])) <= 2e-15
    pos = x > 0
    assert np.max(np.abs(tg[pos] - ref_tg[pos]) / np.abs(ref_tg[pos])) <= 2e-15


@pytest.mark.parametrize("mode", MODES)
def test_float32_within_an_ulp_of_correctly_rounded(mode):
    x = _sweep(np.float32, 800, 2)
    lg, dg = run_graph(lambda p: [tf.math.lgamma(p), tf.math.digamma(p)], [x], mode)
    ref_lg = np.array([_lgamma_decimal(v) for v in x.astype(np.float64).tolist()])
    ref_dg = np.array([_polygamma_decimal(v, 0) for v in x.astype(np.float64).tolist()])
    for name, got, ref in (("lgamma", lg, ref_lg), ("digamma", dg, ref_dg)):
        assert got.dtype == np.float32
        fin = np.isfinite(ref) & (np.abs(ref) < 3e38)
        ulp = np.abs(got[fin].astype(np.float64) - ref[fin]) / np.spacing(np.abs(ref[fin]).astype(np.float32))
        assert ulp.max() <= 1.0, (name, x[fin][np.argmax(ulp)])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=dtype_id)
def test_special_values_as_tf(dtype, mode):
    """TF 2.21 (graph mode): lgamma +inf at 0, -0, negative integers (also past 2^52), +-inf;
    digamma NaN there and at -inf, +inf at +inf; polygamma(1, x) +inf at the poles and -inf."""
    inf, nan = np.inf, np.nan
    x = np.array([0.0, -0.0, -1.0, -2.0, -1e20, 1.0, 2.0, inf, -inf, nan, -2.5, 0.5, 1e-30, -1e-30], dtype)
    lg, dg, tg = run_graph(lambda p: [tf.math.lgamma(p), tf.math.digamma(p),
                                      tf.gradients(tf.reduce_sum(tf.math.digamma(p)), p)[0]], [x], mode)
    np.testing.assert_array_equal(lg[:10], [inf, inf, inf, inf, inf, 0, 0, inf, inf, nan])
    np.testing.assert_array_equal(dg[[0, 1, 2, 3, 4, 7, 8, 9]], [nan, nan, nan, nan, nan, inf, nan, nan])
    # -gamma and 1 - gamma (float64: TF's and ours 4 ulp from -gamma: the recurrence sum cancels)
    np.testing.assert_allclose(dg[[5, 6]], np.array([-0.5772156649015329, 0.42278433509846713], dtype), rtol=2e-15)
    # (-inf is a pole of TF's polygamma(1, x) too: +inf in TF 2.21, eager and graph)
    np.testing.assert_array_equal(tg[[0, 1, 2, 3, 4, 7, 8]], [inf, inf, inf, inf, inf, 0, inf])
    assert np.isnan(tg[9])
    # lgamma(-2.5) = log(8 sqrt(pi) / 15), lgamma(1/2) = log(sqrt(pi)); psi(1/2) = -gamma - 2 log 2
    np.testing.assert_allclose(lg[[10, 11]], [math.log(8 * math.sqrt(math.pi) / 15), 0.5 * math.log(math.pi)],
                               rtol=4 * np.finfo(dtype).eps)
    np.testing.assert_allclose(dg[11], -0.5772156649015329 - 2 * math.log(2), rtol=4 * np.finfo(dtype).eps)
    np.testing.assert_allclose(dg[12:], [-1e30, 1e30], rtol=2 * np.finfo(dtype).eps)   # -1/x - gamma...


def test_half_types_as_tf():
    x = tf.constant([0.0, -1.0, 1.0, 2.0, -2.5, -0.5, 0.5, np.inf, -np.inf], tf.float16)
    assert tf.math.lgamma(x).numpy().astype(np.float32).tolist() == \
        [np.inf, np.inf, 0.0, 0.0, -0.056243896484375, 1.265625, 0.572265625, np.inf, np.inf]
    d = tf.math.digamma(x).numpy().astype(np.float32)
    assert np.isnan(d[[0, 1, 8]]).all() and d[7] == np.inf
    assert d[2:7].tolist() == [-0.5771484375, 0.4228515625, 1.103515625, 0.0364990234375, -1.9638671875]
    for fn in (tf.math.lgamma, tf.math.digamma):     # (TF 2.21 has no CPU kernel for bfloat16)
        with pytest.raises(tf.errors.NotFoundError):
            fn(tf.constant([1.0], tf.bfloat16))
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.math.lgamma(tf.constant([1, 2]))


# TF 2.21 (GradientTape, eager, float64) at these x: d lgamma, d digamma, d^2 lgamma
GX = [0.5, 1.0, 2.5, -1.5, 10.0, -0.0, 0.0, -3.0]
TF_D_LGAMMA = [-1.9635100260214227, -0.5772156649015323, 0.7031566406452434, 0.7031566406452434,
               2.2517525890667214, np.nan, np.nan, np.nan]
TF_D_DIGAMMA = [4.93480220054468, 1.6449340668482266, 0.4903577561002349, 9.379246644989124,
                0.10516633568168576, np.inf, np.inf, np.inf]


@pytest.mark.parametrize("mode", MODES)
def test_gradients_as_tf(mode):
    """d lgamma = g * digamma (NaN at the poles), d digamma = g * polygamma(1, x) (+inf at the
    poles), and the second derivative of lgamma is the latter, as in TF."""
    x = np.array(GX)

    def build(p):
        (g1,) = tf.gradients(tf.reduce_sum(tf.math.lgamma(p)), p)
        return [g1, tf.gradients(tf.reduce_sum(tf.math.digamma(p)), p)[0], tf.gradients(tf.reduce_sum(g1), p)[0]]
    d_lg, d_dg, d2_lg = run_graph(build, [x], mode)
    np.testing.assert_allclose(d_lg, TF_D_LGAMMA, rtol=1e-15, atol=0)
    np.testing.assert_allclose(d_dg, TF_D_DIGAMMA, rtol=2e-15, atol=0)
    np.testing.assert_allclose(d2_lg, TF_D_DIGAMMA, rtol=2e-15, atol=0)


APERY = 1.2020569031595942853997   # zeta(3)


def test_third_derivatives_of_digamma_are_a_clear_error():
    """psi' (1/2) = pi^2 / 2, psi'(2) = pi^2 / 6 - 1; psi''(1/2) = -14 zeta(3), psi''(2) = 2 - 2 zeta(3)
    (psi''(x) = psi''(x + 1) - 2 / x^3 from psi''(1) = -2 zeta(3)); a third derivative raises."""
    v = tf.Variable([0.5, 2.0], dtype=tf.float64)
    with tf.GradientTape() as t3:
        with tf.GradientTape() as t2:
            with tf.GradientTape() as t1:
                y = tf.reduce_sum(tf.math.digamma(v))
            g = t1.gradient(y, v)
        h = t2.gradient(g, v)
    np.testing.assert_allclose(g.numpy(), [math.pi ** 2 / 2, math.pi ** 2 / 6 - 1], rtol=2e-15)
    np.testing.assert_allclose(h.numpy(), [-14 * APERY, 2 - 2 * APERY], rtol=4e-15)
    with pytest.raises(LookupError, match="differentiates tf.math.digamma twice"):
        t3.gradient(h, v)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=dtype_id)
def test_second_derivative_of_digamma(dtype, mode):
    """psi''(x) = TF's polygamma(2, x): exact values from zeta(3) and the recurrence, the
    reflection side (x < 0) against central differences of psi' (float64 finite differences of
    our own trigamma, checked above against Decimal), and TF 2.21's special values: NaN at the
    poles and -inf, -0 at +inf."""
    x = np.array([1.0, 0.5, 3.0, 12.5, -2.5, -0.3, -7.25, 0.0, -0.0, -3.0, -np.inf, np.inf, np.nan], dtype)

    def build(p):
        (g,) = tf.gradients(tf.reduce_sum(tf.math.digamma(p)), p)
        return [tf.gradients(tf.reduce_sum(g), p)[0]]
    (h,) = run_graph(build, [x], mode)
    rtol = 4e-15 if dtype == np.float64 else 1e-6
    np.testing.assert_allclose(h[:3], np.array([-2 * APERY, -14 * APERY, -2 * APERY + 2 + 2 / 8], dtype), rtol=rtol)
    # the others: psi''(x) as a central difference of psi'(x) computed in float64
    def trigamma64(v):
        return run_graph(lambda p: [tf.gradients(tf.reduce_sum(tf.math.digamma(p)), p)[0]], [v], "interpret")[0]
    eps = 1e-6
    x64 = x[3:7].astype(np.float64)
    central = (trigamma64(x64 + eps) - trigamma64(x64 - eps)) / (2 * eps)
    np.testing.assert_allclose(h[3:7], central, rtol=1e-6 if dtype == np.float64 else 2e-6)
    assert np.isnan(h[[7, 8, 9, 10, 12]]).all()
    assert h[11] == 0 and np.signbit(h[11])


def test_gradients_against_finite_differences():
    x = np.array([[0.3, 1.7, 4.2], [-0.6, -2.3, 12.5]])
    check_op(tf.math.lgamma, x, expected=np.array([[_lgamma_decimal(v) for v in r] for r in x.tolist()]),
             value_rtol=2e-15, rtol=1e-7, atol=1e-8)
    check_op(tf.math.digamma, x, expected=np.array([[_polygamma_decimal(v, 0) for v in r] for r in x.tolist()]),
             value_rtol=4e-15, rtol=1e-6, atol=1e-7)


def test_eager_matches_graph():
    x = _sweep(np.float32, 64, 3)
    for fn in (tf.math.lgamma, tf.math.digamma):
        (graph,) = run_graph(lambda p: [fn(p)], [x], "compiled")
        np.testing.assert_array_equal(fn(tf.constant(x)).numpy(), graph)
