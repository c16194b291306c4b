"""TF's rejection samplers on Philox, vectorised over outputs: gamma (Marsaglia-Tsang,
kernels/stateless_random_gamma_op.cc / random_op.cc) and Poisson (Knuth below rate 10,
Hormann's transformed rejection above: kernels/random_poisson_op.cc), value for value.

Output ``i`` (parameter-major: i = param * samples_per_param + sample) draws from the
stream at call 256 * i on, through TF's sample buffers: each buffer holds one call's
values (two float64 normals, or two float64 uniforms) and hands them out last first. The
numpy loop below advances every unfinished output by one attempt per pass; the libm
calls are glibc's, as TF's (ops/libm_loops.py).
"""
import numpy as np

from . import libm_loops
from .philox import _unit_float64, blocks, box_muller_double

RESERVED_CALLS = 256     # kReservedSamplesPerOutput: calls per output


def _normal_pair(w):
    return np.stack(box_muller_double(w[:, 0], w[:, 1], w[:, 2], w[:, 3]), axis=-1)


def _uniform_pair(w):
    return np.stack([_unit_float64(w[:, 0], w[:, 1]), _unit_float64(w[:, 2], w[:, 3])], axis=-1)


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
        out[one] = -libm_loops.log1p(-_unit_float64(w[:, 2], w[:, 3]))
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
