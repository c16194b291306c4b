"""TF's counter-based random numbers in numpy: Philox-4x32-10 and the distributions TF's
CPU kernels build on it (tensorflow/core/lib/random/philox_random.h,
random_distributions.h, kernels/random_op_cpu.h), element for element, so the
stateless ops and tf.random.Generator give TF 2.21's values bit for bit.

A stream is (key, counter): a 64-bit key and a 128-bit counter (Python ints). Call k of
the stream is Philox(key, counter + k), four uint32 words. The kernels fill an output
from the stream's start in groups:
* uniform / normal / integers use fixed words per element, in order (float32 / float16 /
  bfloat16 / int32: one word; float64 / int64: two; normal pairs words through
  Box-Muller, float64 four words per pair);
* truncated normal rejects, so group g (4 elements, float64 2) starts at call
  g * 256 (float64 g * 128) and draws words from there until the group is full.
Box-Muller calls glibc's logf / sincosf (log / sincos for float64) as TF does
(ops/libm_loops.py): numpy's own log / sin / cos round differently.
"""
import numpy as np

from . import libm_loops, philox_native

_M0, _M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)   # kPhiloxM4x32A / B
_W0, _W1 = 0x9E3779B9, 0xBB67AE85                         # kPhiloxW32A / B (key bumps)
_LO32 = np.uint64(0xFFFFFFFF)
_S32 = np.uint64(32)
MASK64 = (1 << 64) - 1
MASK128 = (1 << 128) - 1
# A Generator's state advances by this many calls per element it draws (TF's
# UpdateMemWithPhiloxRandom: the kernels' kReservedSamplesPerOutput).
CALLS_PER_ELEMENT = 256


def blocks(key, counter, offsets):
    """Philox-4x32-10 of counter + each of ``offsets`` (uint64 array): (len, 4) uint32
    (the native loop of ops/philox_native.py; numpy's rounds where it cannot be built)."""
    out = philox_native.blocks(key, counter, offsets)
    return blocks_numpy(key, counter, offsets) if out is None else out


def blocks_numpy(key, counter, offsets):
    """``blocks`` in numpy (the reference the native loop is tested against)."""
    offsets = np.asarray(offsets, dtype=np.uint64)
    low = np.uint64(counter & MASK64) + offsets          # (wraps: a 128-bit add, carried below)
    high = np.uint64((counter >> 64) & MASK64) + (low < offsets).astype(np.uint64)
    c0, c1, c2, c3 = low & _LO32, low >> _S32, high & _LO32, high >> _S32
    k0, k1 = key & 0xFFFFFFFF, (key >> 32) & 0xFFFFFFFF
    for r in range(10):
        p0, p1 = _M0 * c0, _M1 * c2                       # exact: 32 x 32 bits
        kr0 = np.uint64((k0 + r * _W0) & 0xFFFFFFFF)
        kr1 = np.uint64((k1 + r * _W1) & 0xFFFFFFFF)
        c0, c1, c2, c3 = (p1 >> _S32) ^ c1 ^ kr0, p1 & _LO32, (p0 >> _S32) ^ c3 ^ kr1, p0 & _LO32
    return np.stack([c0, c1, c2, c3], axis=-1).astype(np.uint32)


def words(stream, n):
    """The first ``n`` uint32 words of ``stream`` (calls 0, 1, ... in order)."""
    key, counter = stream
    return blocks(key, counter, np.arange(-(-n // 4), dtype=np.uint64)).reshape(-1)[:n]


def stream_from_seed(seed0, seed1):
    """TF's stateless (key, counter) for a seed pair (GenerateKey /
    StatelessRandomGetKeyCounter): the seed, as a counter, hashed under a fixed key."""
    s0, s1 = int(seed0) & MASK64, int(seed1) & MASK64
    mix = blocks(0x02461E29 << 32 | 0x3EC8F720, s0 | s1 << 64, [0])[0].astype(object)
    return int(mix[0] | mix[1] << 32), int(mix[2] << 64 | mix[3] << 96)


def stream_from_state(state):
    """A Philox Generator's (key, counter): its int64 state [counter lo, counter hi, key]."""
    c0, c1, key = (int(v) & MASK64 for v in state)
    return key, c0 | c1 << 64


def skipped_state(state, elements):
    """The state after a draw of ``elements`` elements (RngReadAndSkip): the counter
    advanced by 256 calls per element, modulo 2^128; the key kept."""
    key, counter = stream_from_state(state)
    counter = (counter + CALLS_PER_ELEMENT * int(elements)) & MASK128
    return np.array([counter & MASK64, counter >> 64, key], dtype=np.uint64).view(np.int64)


# ---------------------------------------------------------------- words -> floats (bit tricks)
def _unit_float32(w):
    """[0, 1): 23 random mantissa bits under exponent 0, minus 1 (Uint32ToFloat)."""
    return ((w & np.uint32(0x7FFFFF)) | np.uint32(127 << 23)).view(np.float32) - np.float32(1)


def unit_float64(hi, lo):
    """[0, 1) from two words: 20 + 32 mantissa bits (Uint64ToDouble)."""
    man = ((hi.astype(np.uint64) & np.uint64(0xFFFFF)) << _S32) | lo.astype(np.uint64)
    return (man | np.uint64(1023 << 52)).view(np.float64) - 1.0


def _unit_float16(w):
    """[0, 1): the low 10 bits as a half's mantissa (Uint16ToHalf)."""
    return ((w & np.uint32(0x3FF)).astype(np.uint16) | np.uint16(15 << 10)).view(np.float16) - np.float16(1)


def _unit_bfloat16(w, bf16):
    """[0, 1): the low 7 bits as a bfloat16's mantissa (Uint16ToBfloat16)."""
    one_two = ((w & np.uint32(0x7F)).astype(np.uint16) | np.uint16(127 << 7)).view(bf16)
    return one_two - bf16(1)      # (exact: a multiple of 2^-7 in [0, 1))


def box_muller_float(x0, x1):
    """Two float32 normals per word pair (BoxMullerFloat)."""
    u1 = np.maximum(_unit_float32(x0), np.float32(1e-7))           # no log(0)
    v1 = (np.float64(2 * np.pi) * _unit_float32(x1).astype(np.float64)).astype(np.float32)  # (2.0f * M_PI: double)
    u2 = np.sqrt(np.float32(-2) * libm_loops.log_(u1))
    s, c = libm_loops.sincos(v1)
    return s * u2, c * u2


def box_muller_double(x0, x1, x2, x3):
    """Two float64 normals per four words (BoxMullerDouble)."""
    u1 = np.maximum(unit_float64(x0, x1), 1e-7)
    v1 = 2 * np.pi * unit_float64(x2, x3)
    u2 = np.sqrt(-2.0 * libm_loops.log_(u1))
    s, c = libm_loops.sincos(v1)
    return s * u2, c * u2


# ---------------------------------------------------------------- distributions
def uniform(stream, n, np_dtype, native=True):
    """n floats in [0, 1) (UniformDistribution)."""
    np_dtype = np.dtype(np_dtype)
    if native and np_dtype in (np.float32, np.float64):
        out = np.empty(n, np_dtype)
        done = philox_native.uniform_blocks(*stream, out)          # fused and vectorised
        if done is not None:
            if done < n:
                key, counter = stream
                per = 4 if np_dtype == np.float32 else 2
                out[done:] = uniform((key, (counter + done // per) & MASK128), n - done, np_dtype, native=False)
            return out
    if np_dtype == np.float64:
        w = words(stream, 2 * n)
        return unit_float64(w[0::2], w[1::2])
    w = words(stream, n)
    if np_dtype == np.float32:
        return _unit_float32(w)
    if np_dtype == np.float16:
        return _unit_float16(w)
    return _unit_bfloat16(w, np_dtype.type)


def normal(stream, n, np_dtype):
    """n standard normals (NormalDistribution: float16 / bfloat16 are float32's, rounded)."""
    np_dtype = np.dtype(np_dtype)
    if np_dtype == np.float64:
        w = words(stream, 4 * (-(-n // 2))).reshape(-1, 4)
        pair = box_muller_double(w[:, 0], w[:, 1], w[:, 2], w[:, 3])
    else:
        w = words(stream, 2 * (-(-n // 2))).reshape(-1, 2)
        pair = box_muller_float(w[:, 0], w[:, 1])
    return np.stack(pair, axis=-1).reshape(-1)[:n].astype(np_dtype)


def truncated_normal(stream, n, np_dtype):
    """n standard normals within (-2, 2) (TruncatedNormalDistribution): each group of
    outputs draws Box-Muller pairs from its own reserved region of the stream, keeping
    the values (in pair order) whose magnitude is below 2, until the group is full."""
    np_dtype = np.dtype(np_dtype)
    wide = np_dtype == np.float64
    group, calls_per_group, words_per_pair = (2, 128, 4) if wide else (4, 256, 2)
    key, counter = stream
    groups = -(-n // group)
    out = np.empty((groups, group), dtype=np.float64 if wide else np.float32)
    todo = np.arange(groups, dtype=np.uint64)
    pairs = 4                       # per group, first try: 8 candidates for 4 (2 for 2) outputs
    while todo.size:
        ncalls = -(-pairs * words_per_pair // 4)
        offsets = todo[:, None] * np.uint64(calls_per_group) + np.arange(ncalls, dtype=np.uint64)[None, :]
        w = blocks(key, counter, offsets.reshape(-1)).reshape(todo.size, -1)[:, :pairs * words_per_pair]
        w = w.reshape(todo.size, pairs, words_per_pair)
        if wide:
            f0, f1 = box_muller_double(w[..., 0], w[..., 1], w[..., 2], w[..., 3])
        else:
            f0, f1 = box_muller_float(w[..., 0], w[..., 1])
        cand = np.stack([f0, f1], axis=-1).reshape(todo.size, -1)     # in the order drawn
        ok = np.abs(cand) < 2
        rank = np.cumsum(ok, axis=1)
        full = rank[:, -1] >= group
        take = ok & (rank <= group) & full[:, None]
        out[todo[full].astype(np.int64)] = cand[take].reshape(-1, group)
        todo = todo[~full]
        pairs *= 4
    return out.reshape(-1)[:n].astype(np_dtype)


def uniform_int(stream, n, np_dtype, lo, hi):
    """n integers in [lo, hi): lo + (random bits mod (hi - lo)) (UniformDistribution<int>)."""
    np_dtype = np.dtype(np_dtype)
    span = (int(hi) - int(lo)) & MASK64
    if np_dtype.itemsize == 8:
        w = words(stream, 2 * n).astype(np.uint64)
        bits = w[0::2] | (w[1::2] << _S32)
        r = bits % np.uint64(span)
        return (np.uint64(int(lo) & MASK64) + r).view(np.int64).astype(np_dtype)
    r = words(stream, n) % np.uint32(span & 0xFFFFFFFF)
    return (np.uint32(int(lo) & 0xFFFFFFFF) + r).view(np.int32).astype(np_dtype)


def full_int(stream, n, np_dtype):
    """n integers over the whole range of the type (UniformFullIntDistribution)."""
    np_dtype = np.dtype(np_dtype)
    if np_dtype.itemsize == 8:
        w = words(stream, 2 * n).astype(np.uint64)
        return (w[0::2] | (w[1::2] << _S32)).view(np_dtype)
    return words(stream, n).view(np_dtype)
