"""tf.math.lgamma and tf.math.digamma, with digamma's derivatives polygamma(1, x) (trigamma)
and polygamma(2, x) (tetragamma) as ops of jitgrad's own so that both functions' first and
second derivatives are right.

Each function is written once, below, over a small arithmetic interface (``NumpyMath`` here;
codegen/lower_gamma.py's IR builder for compiled code), in float64 (float32 / float16 inputs
are widened and the result rounded once), from log, log1p, sin, cos and floor:

* lgamma: a = |x|. For a < 8 the Taylor series of lgamma(2 + e), |e| <= 1/2 (30 terms,
  (-1)^k (zeta(k) - 1) / k), with the recurrence taken to it: lgamma(1 + e) = lgamma(2 + e) -
  log1p(e), lgamma(a) = lgamma(1 + a) - log(a), lgamma(a) = log((a - 1) ... v) + lgamma(v)
  for v = a - n in [1.5, 2.5) (no cancellation; lgamma(1) = lgamma(2) = 0 exactly, small
  relative error near them); a >= 8: Stirling's series (8 terms). x < 0: the reflection formula
  lgamma(x) = log(pi) - log|sin(pi a)| - log(a) - lgamma(a), sin(pi a) taken of a's fraction.
* digamma: x < 0 by reflection, psi(x) = psi(1 - x) - pi cot(pi x); then the recurrence up to
  u >= 10 and the asymptotic series (7 terms). trigamma likewise, with
  psi1(x) = pi^2 / sin^2(pi x) - psi1(1 - x).

Accuracy (tests/test_ops_gamma.py, against 50-digit Decimal lgamma / digamma / trigamma):
float64 within 1e-14 of max(1, |result|) everywhere -- the cancellation near the negative
roots of lgamma (-2.457..., -2.747..., ...) and near digamma's roots (1.4616..., -0.504...,
...) costs relative accuracy there, as in TF's kernels -- and for x > 0 within 2e-15 relative
where |lgamma| > 0.1 / |digamma| > 0.5 and for trigamma (lgamma(1) = lgamma(2) = 0 exactly);
float32 (computed in float64) within an ulp of the correctly rounded value (TF 2.21's own
float32 digamma is a few ulp off it: digamma(1) -0.57721591 where -gamma rounds to
-0.57721567).

Special values as TF 2.21 (checked with real TF): lgamma is +inf at 0, -0, the negative
integers and +-inf, NaN for NaN; digamma is NaN at 0, -0, the negative integers, -inf and
NaN, +inf at +inf; trigamma (TF's polygamma(1, x)) +inf at the poles and -inf, 0 at +inf.
bfloat16: TF has no CPU kernel for these (NotFoundError when run eagerly, InvalidArgumentError
in a graph), nor does jitgrad.
TF 2.21 differentiates digamma any number of times (polygamma(n, x)); jitgrad stops at its
second derivative: differentiating tetragamma raises LookupError. (float32 tetragamma is
computed in float64 and rounded once: TF's float32 polygamma(2, -7.25) is 124.877, the value
124.00853.)"""
import math

import numpy as np

from .. import context, dtypes
from ..convert import convert_all
from ..errors import InvalidArgumentError, NoKernelError
from ._infer import FLOATS, unary
from .math_ops import multiply
from .registry import apply_op, register

# lgamma(2 + e) = sum_k LGAMMA2_TAYLOR[k - 1] e^k: (1 - Euler's gamma), then (-1)^k (zeta(k) - 1) / k
# for k = 2..30 (from 60-digit Decimal sums of n^-k with an Euler-Maclaurin tail).
LGAMMA2_TAYLOR = (
    0.42278433509846713, 0.3224670334241132, -0.0673523010531981, 0.020580808427784546, -0.007385551028673986,
    0.0028905103307415234, -0.001192753911703261, 0.0005096695247430425, -0.00022315475845357939,
    9.945751278180853e-05, -4.492623673813314e-05, 2.050721277567069e-05, -9.439488275268397e-06,
    4.374866789907488e-06, -2.039215753801366e-06, 9.55141213040742e-07, -4.492469198764566e-07,
    2.1207184805554665e-07, -1.0043224823968099e-07, 4.7698101693639804e-08, -2.2711094608943164e-08,
    1.0838659214896955e-08, -5.183475041970047e-09, 2.4836745438024785e-09, -1.1921401405860912e-09,
    5.731367241678862e-10, -2.7595228851242334e-10, 1.330476437424449e-10, -6.4229645638381e-11,
    3.1044247747322276e-11)
# Stirling: lgamma(u) = (u - 1/2) log u - u + log(2 pi) / 2 + sum_k B_2k / (2k (2k - 1) u^(2k - 1))
STIRLING = (1 / 12, -1 / 360, 1 / 1260, -1 / 1680, 1 / 1188, -691 / 360360, 1 / 156, -3617 / 122400)
# psi(u) = log u - 1 / (2u) - sum_k B_2k / (2k u^2k)
DIGAMMA_ASYMPTOTIC = (1 / 12, -1 / 120, 1 / 252, -1 / 240, 1 / 132, -691 / 32760, 1 / 12)
# psi1(u) = 1 / u + 1 / (2u^2) + sum_k B_2k / u^(2k + 1)
TRIGAMMA_ASYMPTOTIC = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510)
# psi2(u) = -1 / u^2 - 1 / u^3 - sum_k (2k + 1) B_2k / u^(2k + 2) (the derivative of psi1's series)
TETRAGAMMA_ASYMPTOTIC = (1 / 2, -1 / 6, 1 / 6, -3 / 10, 5 / 6, -691 / 210, 35 / 2, -3617 / 30)
HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)      # 0.9189385332046728
LOG_PI = math.log(math.pi)                      # 1.1447298858494002
LGAMMA_SHIFT, PSI_SHIFT = 8.0, 10.0   # Stirling's series from 8 on, psi's from 10


def _poly(m, coeffs, z):
    """sum_k coeffs[k] z^k (Horner, plain multiplies and adds)."""
    acc = m.c(coeffs[-1])
    for c in reversed(coeffs[:-1]):
        acc = m.add(m.mul(acc, z), m.c(c))
    return acc


def _frac_near_zero(m, a):
    """For a >= 0: (f, g): f = a - floor(a) and g = min(f, 1 - f), both exact."""
    f = m.sub(a, m.floor(a))
    return f, m.where(m.lt(f, m.c(0.5)), f, m.sub(m.c(1.0), f))


def _shifted(m, a, bound, step):
    """(u, acc) after moving a up by ones until a + n >= bound: acc = step(acc, a + k) over k < n."""
    u, acc = a, None
    for _ in range(int(bound)):
        below = m.lt(u, m.c(bound))
        acc = step(acc, u, below)
        u = m.where(below, m.add(u, m.c(1.0)), u)
    return u, acc


def lgamma_of(m, x):
    a = m.abs(x)
    # a < 8: the series of lgamma(2 + e), |e| <= 1/2, with the recurrence taken downward (no
    # cancellation: the terms added have one sign) -- a < 0.5: lgamma(1 + a) - log(a);
    # a < 1.5: lgamma(2 + e) - log1p(e), e = a - 1; a < 8: log((a - 1) ... v) + lgamma(v),
    # v = a - n in [1.5, 2.5) (each a - k exact)
    v, prod = a, m.c(1.0)
    for _ in range(6):
        down = m.ge(v, m.c(2.5))
        v = m.where(down, m.sub(v, m.c(1.0)), v)
        prod = m.where(down, m.mul(prod, v), prod)
    below_half, below_one_half = m.lt(a, m.c(0.5)), m.lt(a, m.c(1.5))
    e = m.where(below_half, a, m.where(below_one_half, m.sub(a, m.c(1.0)), m.sub(v, m.c(2.0))))
    series = m.mul(e, _poly(m, LGAMMA2_TAYLOR, e))
    small = m.sub(m.neg(m.log1p(e)), m.where(below_half, m.log(a), m.c(0.0)))
    series = m.add(series, m.where(below_one_half, small, m.log(prod)))
    # a >= 8: Stirling's series
    w = m.div(m.c(1.0), a)
    stirling = m.add(m.sub(m.mul(m.sub(a, m.c(0.5)), m.log(a)), a),
                     m.add(m.c(HALF_LOG_2PI), m.mul(w, _poly(m, STIRLING, m.mul(w, w)))))
    pos = m.where(m.lt(a, m.c(LGAMMA_SHIFT)), series, stirling)
    pos = m.where(m.eq(a, m.c(math.inf)), a, pos)
    # x < 0: reflection; a pole at the negative integers (also those beyond 2^52)
    f, g = _frac_near_zero(m, a)
    s = m.sin(m.mul(m.c(math.pi), g))
    neg = m.sub(m.sub(m.sub(m.c(LOG_PI), m.log(s)), m.log(a)), pos)
    neg = m.where(m.or_(m.eq(f, m.c(0.0)), m.eq(a, m.c(math.inf))), m.c(math.inf), neg)
    out = m.where(m.lt(x, m.c(0.0)), neg, pos)
    return m.where(m.isnan(x), x, out)


def _psi_positive(m, y):
    """digamma(y) for y > 0 (the recurrence to u >= 10, then the asymptotic series)."""
    u, s = _shifted(m, y, PSI_SHIFT, lambda acc, v, below: m.where(below, m.div(m.c(1.0), v), m.c(0.0))
                    if acc is None else m.where(below, m.add(acc, m.div(m.c(1.0), v)), acc))
    w = m.div(m.c(1.0), u)
    w2 = m.mul(w, w)
    tail = m.mul(w2, _poly(m, DIGAMMA_ASYMPTOTIC, w2))
    return m.sub(m.sub(m.sub(m.log(u), m.mul(m.c(0.5), w)), tail), s)


def digamma_of(m, x):
    neg = m.lt(x, m.c(0.0))
    y = m.where(neg, m.sub(m.c(1.0), x), x)
    pos = _psi_positive(m, y)
    # pi cot(pi x) = pi cot(pi h), h = x - floor(x) or x - ceil(x), whichever is in [-1/2, 1/2]
    # (and exact: for a tiny x < 0, x - floor(x) rounds to 1, x - ceil(x) is x)
    xn = m.where(neg, x, m.c(0.5))
    below, above = m.sub(xn, m.floor(xn)), m.add(xn, m.floor(m.neg(xn)))
    h = m.where(m.le(below, m.c(0.5)), below, above)
    t = m.mul(m.c(math.pi), h)
    cot = m.div(m.mul(m.c(math.pi), m.cos(t)), m.sin(t))
    out = m.where(neg, m.sub(pos, cot), pos)
    pole = m.or_(m.eq(x, m.c(0.0)), m.and_(neg, m.eq(m.floor(x), x)))   # (-inf too: floor(-inf) is -inf)
    return m.where(pole, m.c(math.nan), out)


def trigamma_of(m, x):
    neg = m.lt(x, m.c(0.0))
    y = m.where(neg, m.sub(m.c(1.0), x), x)
    u, s = _shifted(m, y, PSI_SHIFT, lambda acc, v, below: m.where(below, m.div(m.c(1.0), m.mul(v, v)), m.c(0.0))
                    if acc is None else m.where(below, m.add(acc, m.div(m.c(1.0), m.mul(v, v))), acc))
    w = m.div(m.c(1.0), u)
    w2 = m.mul(w, w)
    pos = m.add(m.add(m.add(w, m.mul(m.c(0.5), w2)), m.mul(m.mul(w2, w), _poly(m, TRIGAMMA_ASYMPTOTIC, w2))), s)
    f, g = _frac_near_zero(m, m.where(neg, m.neg(x), m.c(0.5)))
    sn = m.sin(m.mul(m.c(math.pi), g))
    out = m.where(neg, m.sub(m.div(m.c(math.pi * math.pi), m.mul(sn, sn)), pos), pos)
    # the poles: 0 and the negative integers, -inf too (TF's zeta(2, x) calls every x <= 0 with
    # x == floor(x) a pole: polygamma(1, -inf) is +inf in TF 2.21, eager and graph)
    pole = m.or_(m.or_(m.eq(x, m.c(0.0)), m.and_(neg, m.eq(f, m.c(0.0)))), m.eq(x, m.c(-math.inf)))
    out = m.where(pole, m.c(math.inf), out)
    return m.where(m.isnan(x), x, out)


def tetragamma_of(m, x):
    """psi''(x), TF's polygamma(2, x) (digamma's second derivative): for y > 0 the recurrence
    psi''(y) = psi''(y + 1) - 2 / y^3 to u >= 10, then the series; below 0 the reflection
    psi''(x) = psi''(1 - x) - 2 pi^3 cos(pi x) / sin(pi x)^3 with x reduced as digamma_of does.
    NaN at the poles (0, the negative integers, -inf) and -0 at +inf, as TF 2.21's."""
    neg = m.lt(x, m.c(0.0))
    y = m.where(neg, m.sub(m.c(1.0), x), x)
    u, s = _shifted(m, y, PSI_SHIFT, lambda acc, v, below: m.where(below, m.div(m.c(1.0), m.mul(m.mul(v, v), v)),
                                                                      m.c(0.0))
                    if acc is None else m.where(below, m.add(acc, m.div(m.c(1.0), m.mul(m.mul(v, v), v))), acc))
    w = m.div(m.c(1.0), u)
    w2 = m.mul(w, w)
    series = m.add(m.add(w2, m.mul(w2, w)), m.mul(m.mul(w2, w2), _poly(m, TETRAGAMMA_ASYMPTOTIC, w2)))
    pos = m.sub(m.neg(series), m.mul(m.c(2.0), s))
    xn = m.where(neg, x, m.c(0.5))
    below, above = m.sub(xn, m.floor(xn)), m.add(xn, m.floor(m.neg(xn)))
    t = m.mul(m.c(math.pi), m.where(m.le(below, m.c(0.5)), below, above))
    sn = m.sin(t)
    refl = m.div(m.mul(m.c(2.0 * math.pi ** 3), m.cos(t)), m.mul(m.mul(sn, sn), sn))
    out = m.where(neg, m.sub(pos, refl), pos)
    pole = m.or_(m.eq(x, m.c(0.0)), m.and_(neg, m.eq(m.floor(x), x)))   # (-inf too: floor(-inf) is -inf)
    return m.where(m.or_(pole, m.isnan(x)), m.c(math.nan), out)


class NumpyMath:
    """The interface above for float64 numpy arrays (the reference interpreter's kernels;
    ops/erfinv_ops.py's too, which also use exp, sqrt, erf and erfc)."""
    c = staticmethod(np.float64)
    add, sub = staticmethod(np.add), staticmethod(np.subtract)
    mul, div = staticmethod(np.multiply), staticmethod(np.divide)
    neg, abs, floor = staticmethod(np.negative), staticmethod(np.abs), staticmethod(np.floor)
    log, log1p, sin, cos = staticmethod(np.log), staticmethod(np.log1p), staticmethod(np.sin), staticmethod(np.cos)
    lt, le, gt, ge, eq = (staticmethod(np.less), staticmethod(np.less_equal), staticmethod(np.greater),
                          staticmethod(np.greater_equal), staticmethod(np.equal))
    and_, or_, isnan = staticmethod(np.logical_and), staticmethod(np.logical_or), staticmethod(np.isnan)
    where = staticmethod(np.where)
    exp, sqrt = staticmethod(np.exp), staticmethod(np.sqrt)
    erf = staticmethod(np.vectorize(math.erf, otypes=[np.float64]))     # (libm's, as math_ops' Erf kernel)
    erfc = staticmethod(np.vectorize(math.erfc, otypes=[np.float64]))


def float64_kernel(fn, op_name, half_types=("V",)):
    """The reference kernel of ``fn(NumpyMath, x)``: x widened to float64, the result rounded
    to x's type; TF's error (NoKernelError) for the types it has no CPU kernel of (``half_types``:
    numpy kinds / names, bfloat16 "V")."""
    def kernel(attrs, x):
        if x.dtype.kind in half_types or x.dtype.name in half_types:
            raise NoKernelError(op_name, "float16" if x.dtype == np.float16 else "bfloat16")
        with np.errstate(all="ignore"):
            return np.asarray(fn(NumpyMath, x.astype(np.float64)), np.float64).astype(x.dtype)
    return kernel


def _tetragamma_grad(op, g):
    raise LookupError("jitgrad differentiates tf.math.digamma twice (its second derivative, polygamma(2, x), has "
                      "no gradient of its own here): higher derivatives of digamma / lgamma are not available")


def _polygamma(op_type, x):
    """Trigamma / Tetragamma of x: TF's Polygamma op, whose op def takes float32 and float64 only, so
    float16 digamma (and lgamma's second derivative) has no gradient in TF 2.21: eagerly the op
    fails (InvalidArgumentError), building a graph or tf.function raises TypeError (fuzz seed 370099)."""
    if x.dtype not in (dtypes.float32, dtypes.float64):
        if context.executing_eagerly():
            raise InvalidArgumentError(f"Value for attr 'T' of {'half' if x.dtype == dtypes.float16 else x.dtype.name} is not in the list of allowed "
                                       "values: float, double\n\t; NodeDef: {{node Polygamma}}")
        raise TypeError(f"Value passed to parameter 'a' has DataType {x.dtype.name} not in list of allowed "
                        "values: float32, float64")
    return apply_op(op_type, [x])


register("Lgamma", infer=unary(FLOATS), kernel=float64_kernel(lgamma_of, "Lgamma"),
         grad=lambda op, g: [multiply(g, digamma(op.inputs[0]))], kind="elementwise", cost=40)
register("Digamma", infer=unary(FLOATS), kernel=float64_kernel(digamma_of, "Digamma"),
         grad=lambda op, g: [multiply(g, _polygamma("Trigamma", op.inputs[0]))], kind="elementwise", cost=40)
register("Trigamma", infer=unary(FLOATS), kernel=float64_kernel(trigamma_of, "Polygamma"),
         grad=lambda op, g: [multiply(g, _polygamma("Tetragamma", op.inputs[0]))], kind="elementwise", cost=40)
register("Tetragamma", infer=unary(FLOATS), kernel=float64_kernel(tetragamma_of, "Polygamma"), grad=_tetragamma_grad,
         kind="elementwise", cost=40)


def _unary(op_type, x, name):
    (x,) = convert_all([x])
    return apply_op(op_type, [x], name=name or op_type)


def lgamma(x, name=None):
    """``tf.math.lgamma``: log |Gamma(x)|."""
    return _unary("Lgamma", x, name)


def digamma(x, name=None):
    """``tf.math.digamma``: d/dx lgamma(x)."""
    return _unary("Digamma", x, name)
