"""The Cast op's reference kernel: TF 2.21's values where numpy's astype differs.

* float -> integer. TF's CPU kernel converts with x86's truncating instructions, whose
  answer for NaN, +-inf and a value out of range is the "integer indefinite" (MIN):
  int32 / int64 get INT_MIN there (bfloat16's NaN too: ml_dtypes gave 0). uint64 is a
  64-bit conversion of x or of x - 2^64, so a truncation in [-2^63, 2^64) wraps modulo
  2^64 and the rest is 2^63; uint32 likewise (in [-2^31, 2^32) wraps, else 2^31).
  int8 / int16 / uint8 / uint16 take the low bits of the int32 conversion (NaN, inf -> 0),
  as TF does for every element of a small tensor (a float64 / float16 / bfloat16 tensor of
  8 or more elements goes through packed saturating instructions for its first multiple of
  8 or 16 elements instead, which jitgrad does not copy).
* -> float16 / bfloat16 from anything but float32: through float32 first, rounding twice,
  as Eigen's half / bfloat16 constructors do (float64 1 + 2^-8 + 2^-30 is bfloat16 1.0 in
  TF, where rounding once gives 1.0078125).
* Denormals in the flush-denormals mode: every cast is an FPU operation under FTZ + DAZ
  (a denormal input is a zero of its sign, so is a denormal result) except float32 <->
  bfloat16, which TF does with integer bit operations: they keep a denormal both ways.
"""
import numpy as np

from .. import denormals, dtypes


def _is_float(dt):
    return dt.kind == "f" or dt.name == "bfloat16"     # (ml_dtypes' bfloat16 is of numpy kind "V")


def _float32_bfloat16_move(src, dst):
    return {src.name, dst.name} == {"float32", "bfloat16"}


def _wraps(t, lo, span, bad):
    """t (float64 integers) in [lo, lo + span) modulo 2^bits as int64 bit patterns, ``bad`` elsewhere."""
    ok = (t >= lo) & (t < lo + span)
    t = np.where(ok, t, 0.0)
    big = t >= 2.0 ** 63          # (uint64 only): beyond int64, taken down by 2^64 first
    low = np.where(big, t - 2.0 ** 64, t).astype(np.int64)
    return np.where(ok, low, np.int64(bad))


def float_to_int(x, dst):
    """TF's float -> integer Cast (module docstring); ``x`` any float array, ``dst`` a numpy integer dtype."""
    t = np.trunc(x.astype(np.float64))    # exact for every float type
    bits = dst.itemsize * 8
    with np.errstate(invalid="ignore"):
        if dst.kind == "i" and bits >= 32:
            ok = (t >= -2.0 ** (bits - 1)) & (t < 2.0 ** (bits - 1))
            return np.where(ok, np.where(ok, t, 0.0).astype(dst), np.iinfo(dst).min)
        if bits >= 32:      # uint32 / uint64
            half = 2.0 ** (bits - 1)
            return _wraps(t, -half, 3 * half, -(2 ** 63) if bits == 64 else 2 ** 31).astype(dst)
        return _wraps(t, -2.0 ** 31, 2.0 ** 32, -(2 ** 31)).astype(dst)


def cast(x, dst):
    """``x`` (a numpy array) as TF's Cast to the numpy dtype ``dst``."""
    flush = denormals.enabled() and not _float32_bfloat16_move(x.dtype, dst)
    src_float = _is_float(x.dtype)
    if flush:
        if src_float and x.dtype.itemsize == 2:
            x = x.astype(np.float32)     # exact; a bfloat16 denormal is a float32 one, and counts as 0
        x = denormals.flush(x)
    if src_float and dst.kind in "iu":
        return float_to_int(x, dst)
    if dst.itemsize == 2 and _is_float(dst) and x.dtype != np.float32 and x.dtype.kind != "b":
        x = x.astype(np.float32)         # Eigen's half(T) / bfloat16(T): float(T) first
        if flush:
            x = denormals.flush(x)
    with np.errstate(over="ignore", invalid="ignore"):
        y = x.astype(dst)
    return denormals.flush(y) if flush else y
