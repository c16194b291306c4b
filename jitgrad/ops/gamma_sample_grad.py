"""d sample / d alpha of a Gamma(alpha, 1) sample (TF's RandomGammaGrad): the implicit
reparameterisation gradient (Figurnov et al. 2018) that tf.random.gamma's and
stateless_gamma's gradients use. Holding the CDF P(alpha, x) fixed,

    dx/dalpha = -(dP/dalpha) / p(x),   p(x) = x^(alpha-1) e^-x / Gamma(alpha),

with dP/dalpha carried through the power series of P (x <= 1 or x < alpha) or the continued
fraction of Q = 1 - P (otherwise) by forward-mode derivatives, as Eigen's
gamma_sample_der_alpha computes it, in the dtype (float16 in float32), with glibc's log.
Vectorised: every element iterates until its own derivative term is below machine epsilon
(at most 2000 steps)."""
import numpy as np

from . import libm_loops
from .gamma_ops import NumpyMath, digamma_of

_STEPS = 2000


def _consts(dt):
    """cephes' MACHEP, BIG, BIGINV for ``dt`` (Eigen's cephes_helper)."""
    eps = dt.type(np.finfo(dt).eps / 2)
    return (eps, dt.type(1) / eps, eps) if dt == np.float32 else (eps, dt.type(4.503599627370496e15),
                                                                   dt.type(2.22044604925031308085e-16))


def _digamma(a):
    return digamma_of(NumpyMath, a.astype(np.float64)).astype(a.dtype)


def _log(x):
    return libm_loops.log_(x)


def _series(a, x):
    """-(dP/da) / p(x) from P = x^a e^-x / Gamma(a + 1) * sum_n x^n / ((a+1) ... (a+n))."""
    eps = _consts(a.dtype)[0]
    r, c, ans, dc, dans = a.copy(), np.ones_like(a), np.ones_like(a), np.zeros_like(a), np.zeros_like(a)
    live = np.ones(a.shape, dtype=bool)
    for _ in range(_STEPS):
        if not live.any():
            break
        r = np.where(live, r + 1, r)
        term = x / r
        dterm = -x / (r * r)
        dc_new = term * dc + dterm * c
        dc = np.where(live, dc_new, dc)
        dans = np.where(live, dans + dc, dans)
        c = np.where(live, c * term, c)
        ans = np.where(live, ans + c, ans)
        live &= ~(np.abs(dc) <= eps * np.abs(dans))
    dlog = _log(x) - _digamma(a + 1)
    return -(dans + ans * dlog) * x / a


def _continued_fraction(a, x):
    """-(dP/da) / p(x) = (dQ/da) / p(x) from Q's continued fraction (Q = x^a e^-x / Gamma(a) * ans)."""
    eps, big_, biginv = _consts(a.dtype)
    one = a.dtype.type(1)
    y = one - a
    z = x + y + one
    c = np.zeros_like(a)
    pkm2, qkm2, pkm1, qkm1 = np.ones_like(a), x.copy(), x + one, z * x
    ans = pkm1 / qkm1
    dpkm2, dqkm2, dpkm1, dqkm1 = np.zeros_like(a), np.zeros_like(a), np.zeros_like(a), -x
    dans = (dpkm1 - ans * dqkm1) / qkm1
    live = np.ones(a.shape, dtype=bool)
    for _ in range(_STEPS):
        if not live.any():
            break
        c, y, z = c + one, y + one, z + a.dtype.type(2)
        yc = y * c
        pk, qk = pkm1 * z - pkm2 * yc, qkm1 * z - qkm2 * yc
        dpk = dpkm1 * z - pkm1 - dpkm2 * yc + pkm2 * c
        dqk = dqkm1 * z - qkm1 - dqkm2 * yc + qkm2 * c
        step = live & (qk != 0)
        with np.errstate(all="ignore"):
            ans_new = np.where(step, pk / qk, ans)
            dans_new = np.where(step, (dpk - ans_new * dqk) / qk, dans)
        done = step & (np.abs(dans_new - dans) <= eps)
        ans, dans = np.where(live, ans_new, ans), np.where(live, dans_new, dans)
        pkm2, pkm1 = np.where(live, pkm1, pkm2), np.where(live, pk, pkm1)
        qkm2, qkm1 = np.where(live, qkm1, qkm2), np.where(live, qk, qkm1)
        dpkm2, dpkm1 = np.where(live, dpkm1, dpkm2), np.where(live, dpk, dpkm1)
        dqkm2, dqkm1 = np.where(live, dqkm1, dqkm2), np.where(live, dqk, dqkm1)
        big = live & (np.abs(pk) > big_)        # rescale (the ratios are what count)
        for arr in (pkm2, pkm1, qkm2, qkm1, dpkm2, dpkm1, dqkm2, dqkm1):
            arr[big] *= biginv
        live &= ~done
    dlog = _log(x) - _digamma(a)
    return (dans + ans * dlog) * x


def sample_der_alpha(alpha, sample):
    """dx/dalpha for Gamma(alpha, 1) samples x (arrays broadcast together), computed in
    their dtype as Eigen does (float32 in float32; float16 in float32)."""
    dt = np.result_type(alpha, sample)
    work = np.float64 if dt == np.float64 else np.float32
    a, x = np.broadcast_arrays(np.asarray(alpha, work), np.asarray(sample, work))
    a, x = a.reshape(-1).copy(), x.reshape(-1).copy()
    out = np.full(a.shape, np.nan, dtype=work)
    out[x == 0] = 0.0
    ok = (x > 0) & (a > 0) & np.isfinite(x)
    use_series = ok & ((x <= 1) | (x < a))
    use_cf = ok & ~use_series
    with np.errstate(all="ignore"):
        if use_series.any():
            out[use_series] = _series(a[use_series], x[use_series])
        if use_cf.any():
            out[use_cf] = _continued_fraction(a[use_cf], x[use_cf])
    return out.reshape(np.broadcast_shapes(np.shape(alpha), np.shape(sample))).astype(dt)

