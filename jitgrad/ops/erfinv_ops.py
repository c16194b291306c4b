"""tf.math.erfinv and tf.math.ndtri (the standard normal quantile), written once over
ops/gamma_ops.py's arithmetic interface (numpy for the reference kernels, LLVM IR in
codegen/lower_gamma.py), in float64 (float32 widened, the result rounded once).

y with erf(y) = a (a = |x| <= 1/2) or erfc(y) = q (q = 1 - a, exact, below 1/2: no
cancellation near 1) from a first guess -- the Maclaurin series of erfinv (4 terms) or the
tail's asymptotic y^2 = t - log(pi t) / 2, t = -log q -- and three Halley steps
y -= r / (1 + y r), r = f(y) / f'(y) (f'' / f' = -2y for both; f taken relative to the target,
which a denormal residual would not survive in the flush-denormals mode). ndtri(p) = -sqrt(2) erfcinv(2p)
below 1/2 and sqrt(2) erfcinv(2 (1 - p)) above, both arguments exact.

Accuracy (tests/test_ops_erfinv.py, against 50-digit Decimal inverses of erf / erfc): float64
within 4 ulp (erfinv) / 6 ulp (ndtri, from p down to 1e-300), float32 within an ulp of the
correctly rounded value. TF 2.21 computes erfinv(x) as ndtri((x + 1) / 2) / sqrt(2), which
loses small x (its erfinv(1e-30) is 0; jitgrad's 8.86e-31) and, in float32, x near 1 (its
float32 erfinv(0.999999) is 3.4655, float64 3.4589; jitgrad's float32 3.4589).

Special values as TF 2.21: erfinv(+-1) = +-inf, erfinv(+-0) = +0, NaN beyond [-1, 1] and for
NaN; ndtri(0) = -inf, ndtri(1) = inf, ndtri(1/2) = +0, NaN outside [0, 1]. float16 / bfloat16:
TF has no CPU kernel (NotFoundError when run eagerly, InvalidArgumentError in a graph). Gradients: TF's _ErfinvGrad / _NdtriGrad,
g * sqrt(pi) / 2 * exp(erfinv(x)^2) and g * sqrt(2 pi) * exp(ndtri(x)^2 / 2)."""
import math

from ..convert import convert_all
from ._infer import FLOATS, unary
from .gamma_ops import float64_kernel
from .math_ops import exp, multiply, square
from .registry import apply_op, register

_TWO_OVER_SQRT_PI = 2 / math.sqrt(math.pi)
_SQRT_PI_OVER_2 = math.sqrt(math.pi) / 2
# erfinv(a) = sqrt(pi) / 2 (a + pi a^3 / 12 + 7 pi^2 a^5 / 480 + 127 pi^3 a^7 / 40320 + ...)
_SERIES = (1.0, math.pi / 12, 7 * math.pi ** 2 / 480, 127 * math.pi ** 3 / 40320)
HALLEY_STEPS = 3


def _inverse(m, a, q):
    """y >= 0 with erf(y) = a where a <= 1/2, else erfc(y) = q (a = 1 - q; each given exactly)."""
    small = m.le(a, m.c(0.5))
    z = m.mul(a, a)
    series = m.c(_SERIES[-1])
    for c in reversed(_SERIES[:-1]):
        series = m.add(m.mul(series, z), m.c(c))
    t = m.neg(m.log(q))
    tail = m.sqrt(m.where(m.gt(t, m.c(0.0)), m.sub(t, m.mul(m.c(0.5), m.log(m.mul(m.c(math.pi), t)))), m.c(0.0)))
    y = m.where(small, m.mul(m.c(_SQRT_PI_OVER_2), m.mul(a, series)), tail)
    # the residual relative to the target, erf(y) / a - 1 or 1 - erfc(y) / q, times target / erf'(y):
    # erf(y) - a itself would be a denormal for a tiny target (ndtri(1e-300)), flushed to 0 in
    # the flush-denormals mode, stopping the steps short
    target = m.where(small, a, q)
    for _ in range(HALLEY_STEPS):
        ratio = m.div(m.where(small, m.erf(y), m.erfc(y)), target)
        rel = m.where(small, m.sub(ratio, m.c(1.0)), m.sub(m.c(1.0), ratio))
        r = m.mul(rel, m.div(target, m.mul(m.c(_TWO_OVER_SQRT_PI), m.exp(m.neg(m.mul(y, y))))))
        y = m.sub(y, m.div(r, m.add(m.c(1.0), m.mul(y, r))))
    y = m.where(m.eq(a, m.c(0.0)), m.c(0.0), y)                          # (0 / 0 above)
    y = m.where(m.eq(q, m.c(0.0)), m.c(math.inf), y)                     # (erf(y) = 1)
    return m.where(m.or_(m.lt(q, m.c(0.0)), m.gt(q, m.c(1.0))), m.c(math.nan), y)


def erfinv_of(m, x):
    a = m.abs(x)
    y = _inverse(m, a, m.sub(m.c(1.0), a))
    out = m.where(m.lt(x, m.c(0.0)), m.neg(y), y)       # (-0 gives +0, as TF's)
    return m.where(m.isnan(x), x, out)


def ndtri_of(m, p):
    upper = m.gt(p, m.c(0.5))
    q = m.mul(m.c(2.0), m.where(upper, m.sub(m.c(1.0), p), p))
    y = m.mul(m.c(math.sqrt(2.0)), _inverse(m, m.sub(m.c(1.0), q), q))
    out = m.where(upper, y, m.neg(y))
    out = m.where(m.eq(p, m.c(0.5)), m.c(0.0), out)
    return m.where(m.isnan(p), p, out)


_HALVES = ("float16", "V")
register("Erfinv", infer=unary(FLOATS), kernel=float64_kernel(erfinv_of, "Erfinv", _HALVES),
         grad=lambda op, g: [multiply(g, multiply(_SQRT_PI_OVER_2, exp(square(op.outputs[0]))))],
         kind="elementwise", cost=60)
register("Ndtri", infer=unary(FLOATS), kernel=float64_kernel(ndtri_of, "Ndtri", _HALVES),
         grad=lambda op, g: [multiply(g, multiply(math.sqrt(2 * math.pi), exp(square(op.outputs[0]) / 2.0)))],
         kind="elementwise", cost=60)


def _unary(op_type, x, name):
    (x,) = convert_all([x])
    return apply_op(op_type, [x], name=name or op_type)


def erfinv(x, name=None):
    """``tf.math.erfinv``: the inverse of erf on [-1, 1]."""
    return _unary("Erfinv", x, name)


def ndtri(x, name=None):
    """``tf.math.ndtri``: the standard normal distribution's quantile function."""
    return _unary("Ndtri", x, name)
