"""TF's rejection samplers on Philox, vectorised over outputs: gamma (Marsaglia-Tsang,
kernels/stateless_random_gamma_op.cc / random_op.cc), Poisson (Knuth below rate 10,
Hormann's transformed rejection above: kernels/random_poisson_op.cc) and binomial
(inversion below n p = 10, Hormann's BTRS above: kernels/random_binomial_op.cc), value
for value.

Output ``i`` (parameter-major: i = param * samples_per_param + sample) draws from the
stream at call 256 * i on (binomial inversion: 42 * i), through TF's sample buffers: each
buffer holds one call's values (two float64 normals, or two float64 uniforms) and hands
them out last first. The numpy loops advance every unfinished output by one attempt per
pass; the libm calls are glibc's, as TF's (ops/libm_loops.py).
"""
import numpy as np

from . import libm_loops
from .philox import unit_float64, blocks, box_muller_double

RESERVED_CALLS = 256     # kReservedSamplesPerOutput: calls per output


def _normal_pair(w):
    return np.stack(box_muller_double(w[:, 0], w[:, 1], w[:, 2], w[:, 3]), axis=-1)


def _uniform_pair(w):
    return np.stack([unit_float64(w[:, 0], w[:, 1]), unit_float64(w[:, 2], w[:, 3])], axis=-1)


class _Streams:
    """Each output's own position in the stream (call 256 * i on)."""

    def __init__(self, stream, n):
        self.key, self.counter = stream
        self.next = np.arange(n, dtype=np.uint64) * np.uint64(RESERVED_CALLS)

    def calls(self, who):
        """The next call of each output in ``who`` (advancing them)."""
        w = blocks(self.key, self.counter, self.next[who])
        self.next[who] += np.uint64(1)
        return w


class _Buffer:
    """TF's SampleBuffer per output: refilled by one call when empty, read last first."""

    def __init__(self, streams, n, fill):
        self.streams, self.fill = streams, fill
        self.vals = np.zeros((n, 2))
        self.left = np.zeros(n, dtype=np.int64)

    def take(self, who):
        empty = who[self.left[who] == 0]
        if empty.size:
            self.vals[empty] = self.fill(self.streams.calls(empty))
            self.left[empty] = 2
        self.left[who] -= 1
        return self.vals[who, self.left[who]]

    def clear(self):
        self.left[:] = 0


def _param_major(values, n_params, per_param):
    """Outputs computed in generator order (param-major) laid out as TF stores them:
    [sample, param]."""
    return values.reshape(n_params, per_param).T.reshape(-1)


def gamma(stream, alpha, per_alpha):
    """float64 Gamma(alpha, 1) draws, ``per_alpha`` per element of ``alpha`` (float64,
    flat), laid out [sample, alpha]."""
    n_alpha = alpha.size
    n = n_alpha * per_alpha
    a = np.repeat(alpha, per_alpha)                 # generator order: alpha-major
    out = np.empty(n)
    streams = _Streams(stream, n)
    one = np.flatnonzero(a == 1.0)                  # exponential: -log1p(-u), u a call's second double
    if one.size:
        w = streams.calls(one)
        out[one] = -libm_loops.log1p(-unit_float64(w[:, 2], w[:, 3]))
    small = a < 1
    d = a + np.where(small, 2.0 / 3, -1.0 / 3)
    c = 1.0 / 3 / np.sqrt(d)
    normals, uniforms = _Buffer(streams, n, _normal_pair), _Buffer(streams, n, _uniform_pair)
    todo = np.flatnonzero(a != 1.0)
    with np.errstate(all="ignore"):
        while todo.size:
            x = normals.take(todo)
            v = 1 + c[todo] * x
            ok = v > 0                               # (else: the next normal, no uniform)
            who, x, v = todo[ok], x[ok], v[ok]
            v = v * v * v
            u = uniforms.take(who)
            accept = u < 1 - 0.0331 * (x * x) * (x * x)      # the squeeze
            rest = np.flatnonzero(~accept)
            if rest.size:
                xr, vr = x[rest], v[rest]
                accept[rest] = libm_loops.log_(u[rest]) < 0.5 * xr * xr + d[who[rest]] * (
                    1 - vr + libm_loops.log_(vr))
            done, res = who[accept], d[who[accept]] * v[accept]
            boost = np.flatnonzero(small[done])      # alpha < 1: times U^(1 / alpha)
            if boost.size:
                b = uniforms.take(done[boost])
                res[boost] *= libm_loops.pow_(b, 1 / a[done[boost]])
            out[done] = res
            finished = np.zeros(n, dtype=bool)
            finished[done] = True
            todo = todo[~finished[todo]]
    return _param_major(out, n_alpha, per_alpha)


def poisson(stream, rate, per_rate, highest):
    """float64 Poisson(rate) draws (integral values), ``per_rate`` per element of ``rate``
    (float64, flat), laid out [sample, rate]; ``highest`` is the output type's largest
    value (TF redraws beyond it)."""
    n_rate = rate.size
    n = n_rate * per_rate
    r = np.repeat(rate, per_rate)
    out = np.empty(n)
    streams = _Streams(stream, n)
    uniforms = _Buffer(streams, n, _uniform_pair)
    with np.errstate(all="ignore"):
        knuth = np.flatnonzero(r < 10)              # count uniforms until their product <= e^-rate
        if knuth.size:
            limit = libm_loops.exp(-r[knuth])
            prod, x = np.ones(knuth.size), np.zeros(knuth.size)
            todo = np.arange(knuth.size)
            while todo.size:
                prod[todo] = prod[todo] * uniforms.take(knuth[todo])
                stop = (prod[todo] <= limit[todo]) & (x[todo] <= highest)
                out[knuth[todo[stop]]] = x[todo[stop]]
                todo = todo[~stop]
                x[todo] += 1
        big = np.flatnonzero(~(r < 10))             # Hormann's transformed rejection
        if big.size:
            rb = r[big]
            log_rate = libm_loops.log_(rb)
            b = 0.931 + 2.53 * np.sqrt(rb)
            a = -0.059 + 0.02483 * b
            inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
            v_r = 0.9277 - 3.6224 / (b - 2)
            todo = np.arange(big.size)
            while todo.size:
                who = big[todo]
                u = uniforms.take(who) - 0.5
                v = uniforms.take(who)
                us = 0.5 - np.abs(u)
                k = np.floor((2 * a[todo] / us + b[todo]) * u + rb[todo] + 0.43)
                live = ~(k > highest)
                quick = live & (us >= 0.07) & (v <= v_r[todo])
                test = live & ~quick & ~((k < 0) | ((us < 0.013) & (v > us)))
                accept = quick.copy()
                t_idx = np.flatnonzero(test)
                if t_idx.size:
                    tt = todo[t_idx]
                    us_t = us[t_idx]
                    s = libm_loops.log_(v[t_idx] * inv_alpha[tt] / (a[tt] / (us_t * us_t) + b[tt]))
                    t = -rb[tt] + k[t_idx] * log_rate[tt] - libm_loops.lgamma(k[t_idx] + 1)
                    accept[t_idx] = s <= t
                out[big[todo[accept]]] = k[accept]
                todo = todo[~accept]
    return _param_major(out, n_rate, per_rate)


_STIRLING_TAIL = np.array([0.0810614667953272, 0.0413406959554092, 0.0276779256849983, 0.02079067210376509,
                           0.0166446911898211, 0.0138761288230707, 0.0118967099458917, 0.0104112652619720,
                           0.00925546218271273, 0.00833056343336287])


def _stirling_tail(k):
    """log k! minus Stirling's approximation of it: TF's table below 10, its series above."""
    kp1sq = (k + 1) * (k + 1)
    series = (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / kp1sq) / kp1sq) / (k + 1)
    table = _STIRLING_TAIL[np.clip(k, 0, 9).astype(np.int64)]
    return np.where(k <= 9, table, series)


def _binomial_inversion(uniforms, who, count, p):
    """Counts geometric(p) gaps until their sum passes ``count`` (TF's binomial_inversion)."""
    out = np.empty(who.size)
    step = libm_loops.log1p(-p)
    total, num = np.zeros(who.size), np.zeros(who.size)
    todo = np.arange(who.size)
    while todo.size:
        total[todo] += np.ceil(libm_loops.log_(uniforms.take(who[todo])) / step[todo])
        stop = total[todo] > count[todo]
        out[todo[stop]] = num[todo[stop]]
        todo = todo[~stop]
        num[todo] += 1
    return out


def _btrs(uniforms, who, count, p):
    """Hormann's transformed rejection for n p >= 10 (TF's btrs, its constants and order)."""
    out = np.empty(who.size)
    stddev = np.sqrt(count * p * (1 - p))
    b = 1.15 + 2.53 * stddev
    a = -0.0873 + 0.0248 * b + 0.01 * p
    c = count * p + 0.5
    v_r = 0.92 - 4.2 / b
    r = p / (1 - p)
    alpha = (2.83 + 5.1 / b) * stddev
    m = np.floor((count + 1) * p)
    todo = np.arange(who.size)
    while todo.size:
        u = uniforms.take(who[todo]) - 0.5
        v = uniforms.take(who[todo])
        us = 0.5 - np.abs(u)
        k = np.floor((2 * a[todo] / us + b[todo]) * u + c[todo])
        quick = (us >= 0.07) & (v <= v_r[todo])
        test = ~quick & ~((k < 0) | (k > count[todo]))
        accept = quick.copy()
        t = np.flatnonzero(test)
        if t.size:
            i, kt, n, mt, rt = todo[t], k[t], count[todo[t]], m[todo[t]], r[todo[t]]
            lv = libm_loops.log_(v[t] * alpha[i] / (a[i] / (us[t] * us[t]) + b[i]))
            bound = ((mt + 0.5) * libm_loops.log_((mt + 1) / (rt * (n - mt + 1)))
                     + (n + 1) * libm_loops.log_((n - mt + 1) / (n - kt + 1))
                     + (kt + 0.5) * libm_loops.log_(rt * (n - kt + 1) / (kt + 1))
                     + _stirling_tail(mt) + _stirling_tail(n - mt) - _stirling_tail(kt) - _stirling_tail(n - kt))
            accept[t] = lv <= bound
        out[todo[accept]] = k[accept]
        todo = todo[~accept]
    return out


def binomial(stream, counts, probs, per_batch):
    """float64 Binomial(count, prob) draws (TF's RandomBinomialFunctor), ``per_batch`` per
    element of the broadcast ``counts`` / ``probs`` (flat, of their own dtype: TF's tests
    on them are made in it), laid out [sample, batch]. Inversion (n p < 10) reserves 42
    calls per output, the rejection 256; prob > 1/2 draws count - Binomial(count, 1 - prob)."""
    n_batch = counts.size
    n = n_batch * per_batch
    cnt, pr = np.repeat(counts, per_batch), np.repeat(probs, per_batch)      # (in their dtype)
    dcount = cnt.astype(np.float64)
    out = np.full(n, np.nan)
    streams = _Streams(stream, n)
    with np.errstate(all="ignore"):
        one = pr.dtype.type(1)
        out[(dcount <= 0) | (pr <= 0)] = 0.0
        full = ~((dcount <= 0) | (pr <= 0)) & (pr >= one)
        out[full] = dcount[full]
        low = ~((dcount <= 0) | (pr <= 0)) & ~(pr >= one) & (pr <= pr.dtype.type(0.5))
        high = ~((dcount <= 0) | (pr <= 0)) & ~(pr >= one) & (pr > pr.dtype.type(0.5))
        q = (one - pr).astype(pr.dtype)
        for side, p_t in ((low, pr), (high, q)):
            dp = p_t.astype(np.float64)
            big = side & ((cnt * p_t).astype(p_t.dtype) >= p_t.dtype.type(10))
            small = side & ~big
            draws = np.zeros(n)
            for sel, per_output, sampler in ((big, RESERVED_CALLS, _btrs), (small, 42, _binomial_inversion)):
                who = np.flatnonzero(sel)
                if who.size:
                    streams.next[who] = who.astype(np.uint64) * np.uint64(per_output)
                    draws[who] = sampler(_Buffer(streams, n, _uniform_pair), who, dcount[who], dp[who])
            out[side] = draws[side] if side is low else dcount[side] - draws[side]
    return _param_major(out, n_batch, per_batch)
