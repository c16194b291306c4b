"""tf.math.erfinv / tf.math.ndtri: compiled Sessions (codegen/lower_gamma.py, no interpreter
fallback) and the reference interpreter against inverses computed here in 60-digit Decimal
arithmetic (Newton's method on a Decimal erf: its Taylor series below 2.5, Laplace's continued
fraction for erfc above), TF 2.21's special values, dtypes and gradients (values from real TF)."""
import math
import os
import sys
from decimal import Decimal as D, localcontext

import numpy as np
import pytest

import jitgrad as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _graph_testing import check_op, dtype_id, run_graph  # noqa: E402

MODES = ["compiled", "interpret"]
PI = D("3.14159265358979323846264338327950288419716939937510582097494")


def _erf_erfc(y):
    """(erf(y), erfc(y)) of a Decimal y >= 0, each to ~60 digits."""
    if y < D("2.5"):
        s, term, n = D(0), y, 0
        while True:
            t = term / (2 * n + 1)
            s += t
            if abs(t) < D(10) ** -75:
                break
            n += 1
            term = -term * y * y / n
        e = 2 / PI.sqrt() * s
        return e, 1 - e
    acc = y
    for k in range(400, 0, -1):
        acc = y + D(k) / 2 / acc
    c = (-y * y).exp() / PI.sqrt() / acc
    return 1 - c, c


def _inverse(target, tail, start):
    """y with erf(y) = target (tail: erfc(y) = target), Newton from ``start``."""
    with localcontext() as ctx:
        ctx.prec = 90
        y, target = D(start), D(target)
        for _ in range(60):
            e, c = _erf_erfc(y)
            f = (target - c) if tail else (e - target)      # (over d/dy erf = 2 / sqrt(pi) exp(-y^2))
            step = f / (2 / PI.sqrt() * (-y * y).exp())
            y -= step
            if abs(step) <= abs(y) * D(10) ** -40:
                return y
        raise AssertionError("no convergence")


def erfinv_ref(x, start):
    if math.isnan(x) or abs(x) > 1:
        return math.nan
    if abs(x) == 1:
        return math.copysign(math.inf, x)
    with localcontext() as ctx:
        ctx.prec = 90            # (abs() and 1 - a round to the context: 28 digits by default)
        a = abs(D(x))
        y = _inverse(a, False, abs(start)) if a <= D("0.5") else _inverse(1 - a, True, abs(start))
    return float(y) if x > 0 else -float(y)


def ndtri_ref(p, start):
    if math.isnan(p) or not 0 <= p <= 1:
        return math.nan
    if p in (0.0, 1.0):
        return -math.inf if p == 0 else math.inf
    with localcontext() as ctx:
        ctx.prec = 90
        q = 2 * min(D(p), 1 - D(p))
        start = abs(start) / math.sqrt(2)
        y = _inverse(q, True, start) if q < D("0.5") else _inverse(1 - q, False, start)
        return float(D(2).sqrt() * y) * (1 if p > 0.5 else -1)


def _inputs(dtype, n, seed):
    rng = np.random.default_rng(seed)
    x = np.concatenate([rng.uniform(-1, 1, n), 1 - np.exp(rng.uniform(-36, 0, n // 2)),
                        -(1 - np.exp(rng.uniform(-36, 0, n // 4))), [1e-30, -1e-300, 0.5, -0.5]])
    p = np.concatenate([rng.uniform(0, 1, n), np.exp(rng.uniform(-690, 0, n // 2)),
                        1 - np.exp(rng.uniform(-36, 0, n // 4)), [0.5, 0.25, 0.75, 1e-300]])
    if dtype == np.float32:
        x, p = x[np.abs(x.astype(np.float32)) < 1], p[(p.astype(np.float32) > 1e-37) & (p.astype(np.float32) < 1)]
    return x.astype(dtype), p.astype(dtype)


def test_names_as_tf():
    assert callable(tf.math.erfinv) and callable(tf.math.ndtri)
    assert not hasattr(tf, "erfinv") and not hasattr(tf, "ndtri")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=dtype_id)
def test_against_decimal_inverses(dtype, mode):
    """float64 within 4 ulp (erfinv) / 6 ulp (ndtri), float32 within an ulp (computed in float64)."""
    x, p = _inputs(dtype, 150, 7 + (dtype == np.float64))
    ei, nd = run_graph(lambda a, b: [tf.math.erfinv(a), tf.math.ndtri(b)], [x, p], mode)
    assert ei.dtype == dtype and nd.dtype == dtype
    bound = {np.float32: (1.0, 1.0), np.float64: (4.0, 6.0)}[dtype]
    for name, got, inp, ref_fn, b in (("erfinv", ei, x, erfinv_ref, bound[0]), ("ndtri", nd, p, ndtri_ref, bound[1])):
        ref = np.array([ref_fn(float(v), float(g)) for v, g in zip(inp, got)])
        ulp = np.abs(got.astype(np.float64) - ref) / np.spacing(np.abs(ref).astype(dtype)).astype(np.float64)
        k = int(np.argmax(ulp))
        assert ulp[k] <= b, (name, inp[k], got[k], ref[k], ulp[k])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=dtype_id)
def test_special_values_as_tf(dtype, mode):
    inf, nan = np.inf, np.nan
    x = np.array([0.0, -0.0, 1.0, -1.0, 1.5, -2.0, inf, nan], dtype)
    p = np.array([0.0, -0.0, 1.0, -0.3, 1.5, inf, nan, 0.5], dtype)
    ei, nd = run_graph(lambda a, b: [tf.math.erfinv(a), tf.math.ndtri(b)], [x, p], mode)
    np.testing.assert_array_equal(ei, [0.0, 0.0, inf, -inf, nan, nan, nan, nan])
    assert not np.signbit(ei[:2]).any()                   # (TF: +0 for -0 too)
    np.testing.assert_array_equal(nd, [-inf, -inf, inf, nan, nan, nan, nan, 0.0])
    assert not np.signbit(nd[7])


def test_half_types_have_no_kernel_as_in_tf():
    for fn in (tf.math.erfinv, tf.math.ndtri):
        for dt in (tf.float16, tf.bfloat16):
            with pytest.raises(tf.errors.NotFoundError):
                fn(tf.constant([0.5], dt))
        with pytest.raises(tf.errors.InvalidArgumentError):
            fn(tf.constant([1, 2]))


# TF 2.21 (GradientTape, eager, float64) at GX: first and second derivatives
GX = [0.1, -0.5, 0.9, 0.3]
TF_GRADS = {
    "erfinv": ([0.8932517253051874, 1.1125848189719496, 3.4280428114518378, 0.9545203588405493],
               [0.14179614878847477, -1.1807463499933997, 27.335985073826976, 0.4964865260107431]),
    "ndtri": ([5.698059856117003, np.nan, 5.698059856117003, 2.876103659264292],
              [-41.60927029199775, np.nan, 41.60927029199775, -4.337826493638953]),
}


@pytest.mark.parametrize("mode", MODES)
def test_gradients_as_tf(mode):
    x = np.array(GX)

    def build(p):
        outs = []
        for name in ("erfinv", "ndtri"):
            (g1,) = tf.gradients(tf.reduce_sum(getattr(tf.math, name)(p)), p)
            outs += [g1, tf.gradients(tf.reduce_sum(g1), p)[0]]
        return outs
    out = run_graph(build, [x], mode)
    for k, name in enumerate(("erfinv", "ndtri")):
        np.testing.assert_allclose(out[2 * k], TF_GRADS[name][0], rtol=4e-15, err_msg=name)
        np.testing.assert_allclose(out[2 * k + 1], TF_GRADS[name][1], rtol=4e-15, err_msg=name)


def test_gradients_against_finite_differences():
    x = np.array([[0.1, -0.7, 0.95], [0.3, 0.6, -0.2]])
    check_op(tf.math.erfinv, x, rtol=1e-6, atol=1e-8)
    check_op(tf.math.ndtri, np.abs(x), rtol=1e-6, atol=1e-8)


def test_eager_matches_graph_and_inverts_erf():
    x, p = _inputs(np.float32, 40, 3)
    for fn, v in ((tf.math.erfinv, x), (tf.math.ndtri, p)):
        (graph,) = run_graph(lambda a: [fn(a)], [v], "compiled")
        np.testing.assert_array_equal(fn(tf.constant(v)).numpy(), graph)
    y = tf.math.erfinv(tf.constant(np.array([-0.9, -0.2, 0.4, 0.99])))
    np.testing.assert_allclose(tf.math.erf(y).numpy(), [-0.9, -0.2, 0.4, 0.99], rtol=2e-16)
