"""The rest of ``tf.signal``, composed as TF composes it (python/ops/signal/*.py) from public
ops and the Fourier transforms of fft_ops.py, so it runs compiled and differentiates
wherever those do: frame / overlap_and_add (gathers, pads and reshapes), the windows,
stft / inverse_stft / inverse_stft_window_fn, linear_to_mel_weight_matrix,
mfccs_from_log_mel_spectrograms, dct / idct (types 1-4) and mdct / inverse_mdct.

Lengths, steps and axes must be known when the graph is built (jitgrad specialises
kernels to static shapes); TF also accepts them as tensors computed at run time. The
windows are computed on the host in the window's dtype with TF's formulas and become
constants."""
import math

import numpy as np

from .. import dtypes
from ..convert import convert_to_tensor
from ..eager import EagerTensor
from ..errors import InvalidArgumentError
from ..graph import Tensor
from .array_ops import (concat, expand_dims, gather, get_static_value, linspace, pad, reshape, reverse,
                        split, tile, transpose)
from .complex_ops import complex as complex_, real
from .fft_ops import irfft, rfft
from .math_ops import cast, equal, log, maximum, minimum, where, zeros_like
from .reduction_ops import reduce_sum

__all__ = ["frame", "overlap_and_add", "hann_window", "hamming_window", "vorbis_window", "kaiser_window",
           "kaiser_bessel_derived_window", "stft", "inverse_stft", "inverse_stft_window_fn",
           "linear_to_mel_weight_matrix", "mfccs_from_log_mel_spectrograms", "dct", "idct", "mdct",
           "inverse_mdct"]


def _static_int(value, what, fn):
    """A Python int for a length / step argument (TF: a scalar tensor, maybe computed at run time)."""
    v = value.numpy() if isinstance(value, EagerTensor) else get_static_value(value)
    if v is None:
        raise NotImplementedError(f"tf.signal.{fn}: jitgrad needs {what} known when the graph is built.")
    v = np.asarray(v)
    if v.ndim != 0:
        raise ValueError(f"Shape must be rank 0 but is rank {v.ndim} for {what} of tf.signal.{fn}")
    if v.dtype.kind not in "iu":
        raise ValueError(f"{what} must be an integer. Got {v.dtype}")
    return int(v)


def _static_dim(x, axis, fn):
    d = x.shape.as_list()[axis]
    if d is None:
        raise NotImplementedError(f"tf.signal.{fn}: jitgrad needs the size of axis {axis} known when the "
                                  f"graph is built.")
    return d


def _const(value, dtype):
    return convert_to_tensor(np.asarray(value, dtype.as_numpy_dtype))


# ------------------------------------------------------------------------------------- framing
def frame(signal, frame_length, frame_step, pad_end=False, pad_value=0, axis=-1, name=None):
    """``tf.signal.frame``: windows of frame_length samples every frame_step samples along axis,
    [..., num_frames, frame_length, ...] (pad_end: the end padded with pad_value so every
    sample is in a frame). A gather of the frames' sample indices."""
    x = convert_to_tensor(signal)
    if x.shape.rank is None:
        raise NotImplementedError("tf.signal.frame: jitgrad needs the signal's rank known.")
    if x.shape.rank < 1:
        raise ValueError(f"Shape {x.shape} must have rank at least 1")
    length = _static_int(frame_length, "frame_length", "frame")
    step = _static_int(frame_step, "frame_step", "frame")
    axis = _static_int(axis, "axis", "frame")
    rank = x.shape.rank
    if not -rank <= axis < rank:
        raise ValueError(f"axis {axis} is out of range for a signal of rank {rank}")
    axis %= rank
    samples = _static_dim(x, axis, "frame")
    if step <= 0 or length < 0:
        raise InvalidArgumentError(f"tf.signal.frame: frame_step must be positive and frame_length "
                                   f"non-negative, got {step} and {length}")
    if pad_end:
        num_frames = -(-samples // step)
        extra = max(0, length + step * (num_frames - 1) - samples)
        if extra:
            paddings = [[0, 0]] * rank
            paddings[axis] = [0, extra]
            value = convert_to_tensor(pad_value, dtype=x.dtype)
            if value.shape.rank != 0:
                raise ValueError(f"Shape must be rank 0 but is rank {value.shape.rank} for pad_value")
            x = pad(x, paddings, constant_values=value)
    else:
        num_frames = max(0, 1 + (samples - length) // step)
    indices = (np.arange(num_frames)[:, None] * step + np.arange(length)[None, :]).astype(np.int32)
    return gather(x, convert_to_tensor(indices), axis=axis, name=name)


def overlap_and_add(signal, frame_step, name=None):
    """``tf.signal.overlap_and_add``: frames [..., frames, frame_length] added at offsets
    k * frame_step into [..., frame_length + frame_step * (frames - 1)] (TF's reshaping
    trick: the frames padded and skewed so the overlapping parts line up, then summed)."""
    x = convert_to_tensor(signal)
    if x.shape.rank is not None and x.shape.rank < 2:
        raise ValueError(f"Shape {x.shape} must have rank at least 2")
    step = _static_int(frame_step, "frame_step", "overlap_and_add")
    if x.shape.rank is None:
        raise NotImplementedError("tf.signal.overlap_and_add: jitgrad needs the signal's rank known.")
    frames, length = _static_dim(x, -2, "overlap_and_add"), _static_dim(x, -1, "overlap_and_add")
    outer = x.shape.as_list()[:-2]
    if any(d is None for d in outer):
        raise NotImplementedError("tf.signal.overlap_and_add: jitgrad needs the signal's shape known.")
    if step <= 0:
        raise InvalidArgumentError(f"tf.signal.overlap_and_add: frame_step must be positive, got {step}")
    output_length = length + step * (frames - 1)
    if step == length:
        return reshape(x, outer + [output_length], name=name)
    segments = -(-length // step)
    x = pad(x, [[0, 0]] * len(outer) + [[0, segments], [0, segments * step - length]])
    x = reshape(x, outer + [frames + segments, segments, step])
    r = len(outer)
    x = transpose(x, list(range(r)) + [r + 1, r, r + 2])
    x = reshape(x, outer + [(frames + segments) * segments, step])
    x = x[..., :(frames + segments - 1) * segments, :]
    x = reshape(x, outer + [segments, frames + segments - 1, step])
    x = reduce_sum(x, -3)
    x = reshape(x, outer + [(frames + segments - 1) * step])
    return x[..., :output_length]


# -------------------------------------------------------------------------------------- windows
def _window_dtype(dtype, what="dtype must be a floating point type. Found %s"):
    dt = dtypes.as_dtype(dtype)
    if not dt.is_floating:
        raise ValueError(what % dt)
    return dt


def _window(values, dt, compute):
    """A window computed on the host in numpy type `compute` as a constant of dtype dt."""
    return cast(convert_to_tensor(np.asarray(values, compute)), dt) if compute != dt.as_numpy_dtype \
        else convert_to_tensor(np.asarray(values, compute))


def _compute_type(dt):
    """The numpy type a window is computed in: its own (float16 too: numpy rounds each step to
    half as TF's Eigen half ops do), float32 for bfloat16."""
    return {dtypes.float64: np.float64, dtypes.float16: np.float16}.get(dt, np.float32)


def _raised_cosine_window(fn, window_length, periodic, dtype, a, b):
    dt = _window_dtype(dtype)
    n_samples = _static_int(convert_to_tensor(window_length, dtype=dtypes.int32), "window_length", fn)
    if n_samples == 1:
        return _window(np.ones(1), dt, _compute_type(dt))
    p = periodic.numpy() if isinstance(periodic, EagerTensor) else get_static_value(periodic)
    if p is None:
        raise NotImplementedError(f"tf.signal.{fn}: jitgrad needs periodic known when the graph is built.")
    ct = _compute_type(dt)
    even = 1 - n_samples % 2
    n = ct(n_samples + int(bool(p)) * even - 1)
    cos_arg = ct(2 * np.pi) * np.arange(n_samples).astype(ct) / n
    return _window(ct(a) - ct(b) * np.cos(cos_arg), dt, ct)


def hann_window(window_length, periodic=True, dtype=dtypes.float32, name=None):
    """``tf.signal.hann_window``: 0.5 - 0.5 cos(2 pi n / N), N = length (periodic, even
    length) or length - 1."""
    return _raised_cosine_window("hann_window", window_length, periodic, dtype, 0.5, 0.5)


def hamming_window(window_length, periodic=True, dtype=dtypes.float32, name=None):
    """``tf.signal.hamming_window``: 0.54 - 0.46 cos(2 pi n / N), N as hann_window's."""
    return _raised_cosine_window("hamming_window", window_length, periodic, dtype, 0.54, 0.46)


def vorbis_window(window_length, dtype=dtypes.float32, name=None):
    """``tf.signal.vorbis_window``: sin(pi / 2 sin(pi (n + 0.5) / N)^2)."""
    dt = _window_dtype(dtype)
    n = _static_int(convert_to_tensor(window_length, dtype=dtypes.int32), "window_length", "vorbis_window")
    ct = _compute_type(dt)
    arg = np.arange(n).astype(ct)
    if n == 0:
        return _window(np.zeros(0), dt, ct)
    return _window(np.sin(ct(np.pi / 2.0) * np.sin(ct(np.pi) / ct(n) * (arg + ct(0.5))) ** 2), dt, ct)


def _kaiser(n, beta, ct):
    if n == 1:
        return np.ones(1, ct)
    half = (n - 1) / 2.0
    arg = np.arange(n) - half
    num = beta * np.sqrt(np.maximum(0.0, 1.0 - (arg / half) ** 2))
    return (np.i0(num) / np.i0(beta)).astype(ct)


def kaiser_window(window_length, beta=12.0, dtype=dtypes.float32, name=None):
    """``tf.signal.kaiser_window``: I0(beta sqrt(1 - (2n / (N - 1) - 1)^2)) / I0(beta)
    (computed in float64, then rounded)."""
    dt = _window_dtype(dtype)
    n = _static_int(convert_to_tensor(window_length, dtype=dtypes.int32), "window_length", "kaiser_window")
    ct = _compute_type(dt)
    return _window(_kaiser(n, float(beta), np.float64).astype(ct), dt, ct)


def kaiser_bessel_derived_window(window_length, beta=12.0, dtype=dtypes.float32, name=None):
    """``tf.signal.kaiser_bessel_derived_window``: the square roots of the running sums of a
    Kaiser window of length N / 2 + 1, mirrored."""
    dt = _window_dtype(dtype)
    n = _static_int(convert_to_tensor(window_length, dtype=dtypes.int32), "window_length",
                    "kaiser_bessel_derived_window")
    ct = _compute_type(dt)
    csum = np.cumsum(_kaiser(n // 2 + 1, float(beta), np.float64))
    half = np.sqrt(csum[:-1] / csum[-1])
    return _window(np.concatenate([half, half[::-1]]).astype(ct), dt, ct)


# ----------------------------------------------------------------------------------------- STFT
def _enclosing_power_of_two(value):
    """TF's _enclosing_power_of_two, with its float arithmetic (log(v) / log(2), rounded up)."""
    return int(2 ** np.ceil(np.log(value) / np.log(2.0)))


def stft(signals, frame_length, frame_step, fft_length=None, window_fn=hann_window, pad_end=False,
         name=None):
    """``tf.signal.stft``: rfft of the windowed frames of signals, [..., frames, fft_length // 2 + 1]."""
    x = convert_to_tensor(signals)
    if x.shape.rank is not None and x.shape.rank < 1:
        raise ValueError(f"Shape {x.shape} must have rank at least 1")
    length = _static_int(frame_length, "frame_length", "stft")
    step = _static_int(frame_step, "frame_step", "stft")
    n = _enclosing_power_of_two(length) if fft_length is None else _static_int(fft_length, "fft_length", "stft")
    framed = frame(x, length, step, pad_end=pad_end)
    if window_fn is not None:
        framed = framed * window_fn(length, dtype=framed.dtype)
    return rfft(framed, [n], name=name)


def inverse_stft_window_fn(frame_step, forward_window_fn=hann_window, name=None):
    """``tf.signal.inverse_stft_window_fn``: a window_fn for inverse_stft that undoes
    forward_window_fn's weighting: the forward window divided by the overlap-added squares
    of itself (zero where that sum is zero)."""
    def inverse_stft_window_fn_inner(frame_length, dtype):
        step = _static_int(frame_step, "frame_step", "inverse_stft_window_fn")
        length = _static_int(frame_length, "frame_length", "inverse_stft_window_fn")
        forward = convert_to_tensor(forward_window_fn(length, dtype=dtype))
        overlaps = -(-length // step)
        denom = pad(forward * forward, [[0, overlaps * step - length]])
        denom = reduce_sum(reshape(denom, [overlaps, step]), 0, keepdims=True)
        denom = reshape(tile(denom, [overlaps, 1]), [overlaps * step])[:length]
        return where(equal(denom, _const(0.0, denom.dtype)), zeros_like(forward), forward / denom)
    return inverse_stft_window_fn_inner


def inverse_stft(stfts, frame_length, frame_step, fft_length=None, window_fn=hann_window, name=None):
    """``tf.signal.inverse_stft``: irfft of each frame, cropped or zero-padded to frame_length,
    windowed, overlap-added."""
    s = convert_to_tensor(stfts)
    if s.shape.rank is not None and s.shape.rank < 2:
        raise ValueError(f"Shape {s.shape} must have rank at least 2")
    length = _static_int(frame_length, "frame_length", "inverse_stft")
    step = _static_int(frame_step, "frame_step", "inverse_stft")
    n = (_enclosing_power_of_two(length) if fft_length is None
         else _static_int(fft_length, "fft_length", "inverse_stft"))
    frames = irfft(s, [n])
    if n > length:
        frames = frames[..., :length]
    elif n < length:
        frames = pad(frames, [[0, 0]] * (frames.shape.rank - 1) + [[0, length - n]])
    if window_fn is not None:
        frames = frames * window_fn(length, dtype=frames.dtype)
    return overlap_and_add(frames, step, name=name)


# ---------------------------------------------------------------------------------- mel / MFCC
_MEL_BREAK_FREQUENCY_HERTZ = 700.0
_MEL_HIGH_FREQUENCY_Q = 1127.0


def _hertz_to_mel(hz):
    one = _const(1.0, hz.dtype)
    return _const(_MEL_HIGH_FREQUENCY_Q, hz.dtype) * log(one + hz / _const(_MEL_BREAK_FREQUENCY_HERTZ, hz.dtype))


def linear_to_mel_weight_matrix(num_mel_bins=20, num_spectrogram_bins=129, sample_rate=8000,
                                lower_edge_hertz=125.0, upper_edge_hertz=3800.0, dtype=dtypes.float32,
                                name=None):
    """``tf.signal.linear_to_mel_weight_matrix``: [num_spectrogram_bins, num_mel_bins] triangular
    filters, evenly spaced on the mel scale between the edges (TF's formulas and checks; the
    DC bin's row is zero)."""
    if isinstance(sample_rate, (EagerTensor, Tensor)):
        value = sample_rate.numpy() if isinstance(sample_rate, EagerTensor) else get_static_value(sample_rate)
        if value is None:
            raise NotImplementedError("tf.signal.linear_to_mel_weight_matrix: jitgrad needs sample_rate "
                                      "known when the graph is built.")
        sample_rate = np.asarray(value).item()
    if num_mel_bins <= 0:
        raise ValueError("num_mel_bins must be positive. Got: %s" % num_mel_bins)
    if lower_edge_hertz < 0.0:
        raise ValueError("lower_edge_hertz must be non-negative. Got: %s" % lower_edge_hertz)
    if lower_edge_hertz >= upper_edge_hertz:
        raise ValueError("lower_edge_hertz %.1f >= upper_edge_hertz %.1f" % (lower_edge_hertz, upper_edge_hertz))
    if sample_rate <= 0.0:
        raise ValueError("sample_rate must be positive. Got: %s" % sample_rate)
    if upper_edge_hertz > sample_rate / 2:
        raise ValueError("upper_edge_hertz must not be larger than the Nyquist frequency (sample_rate / 2). "
                         "Got %s for sample_rate: %s" % (upper_edge_hertz, sample_rate))
    dt = _window_dtype(dtype, "dtype must be a floating point type. Got: %s")
    zero = _const(0.0, dt)
    nyquist = _const(sample_rate, dt) / _const(2.0, dt)
    linear = linspace(zero, nyquist, num_spectrogram_bins)[1:]
    bins_mel = expand_dims(_hertz_to_mel(linear), 1)
    edges = frame(linspace(_hertz_to_mel(_const(lower_edge_hertz, dt)), _hertz_to_mel(_const(upper_edge_hertz, dt)),
                           num_mel_bins + 2), 3, 1)
    lower, center, upper = (reshape(t, [1, num_mel_bins]) for t in split(edges, 3, axis=1))
    lower_slopes = (bins_mel - lower) / (center - lower)
    upper_slopes = (upper - bins_mel) / (upper - center)
    weights = maximum(zero, minimum(lower_slopes, upper_slopes))
    return pad(weights, [[1, 0], [0, 0]], name=name)


def mfccs_from_log_mel_spectrograms(log_mel_spectrograms, name=None):
    """``tf.signal.mfccs_from_log_mel_spectrograms``: the orthonormal-scaled DCT-II of the
    innermost axis, dct(x) / sqrt(2 * num_mel_bins)."""
    x = convert_to_tensor(log_mel_spectrograms)
    bins = _static_dim(x, -1, "mfccs_from_log_mel_spectrograms") if x.shape.rank else None
    if bins == 0:
        raise ValueError("num_mel_bins must be positive. Got: %s" % x)
    dct2 = dct(x, type=2)
    return dct2 * _const(1.0 / np.sqrt(bins * 2.0), dct2.dtype)


# ------------------------------------------------------------------------------------------ DCT
def _validate_dct_arguments(x, dct_type, n, axis, norm):
    if axis != -1:
        raise NotImplementedError("axis must be -1. Got: %s" % axis)
    if n is not None and n < 1:
        raise ValueError("n should be a positive integer or None")
    if dct_type not in (1, 2, 3, 4):
        raise ValueError("Types I, II, III and IV (I)DCT are supported.")
    if dct_type == 1:
        if norm == "ortho":
            raise ValueError("Normalization is not supported for the Type-I DCT.")
        if x.shape.rank and x.shape.as_list()[-1] is not None and x.shape.as_list()[-1] < 2:
            raise ValueError("Type-I DCT requires the dimension to be greater than one.")
    if norm not in (None, "ortho"):
        raise ValueError("Unknown normalization. Expected None or 'ortho', got: %s" % norm)


_COMPLEX = {dtypes.float32: dtypes.complex64, dtypes.float64: dtypes.complex128}


def _twiddles(dim, sign):
    """TF's 2 exp(sign i pi k / 2N), k < N (computed in float64, then rounded)."""
    return 2.0 * np.exp(sign * 1j * np.arange(dim) * np.pi * 0.5 / dim)


def _dct_internal(x, dct_type, n, norm):
    """TF's _dct_internal: DCTs through an rfft of length 2N (types 2, 3, 4) or of the
    signal mirrored (type 1)."""
    if not x.dtype.is_floating:      # (TF: its 0.0 constant cannot take the input's dtype)
        raise TypeError(f"Cannot convert 0.0 to EagerTensor of dtype {x.dtype.name}")
    if x.dtype not in (dtypes.float32, dtypes.float64):
        raise ValueError(f"RFFT requires tf.float32 or tf.float64 inputs, got: {x}")
    seq_len = _static_dim(x, -1, "dct")
    if n is not None:
        x = x[..., 0:n] if n <= seq_len else pad(x, [[0, 0]] * (x.shape.rank - 1) + [[0, n - seq_len]])
    dim = _static_dim(x, -1, "dct")
    np_dt = x.dtype.as_numpy_dtype
    if dct_type == 1:
        return real(rfft(concat([x, x[..., -2:0:-1]], axis=-1)))
    if dct_type == 2:
        scale = _const(_twiddles(dim, -1), _COMPLEX[x.dtype])
        dct2 = real(rfft(x, fft_length=[2 * dim])[..., :dim] * scale)
        if norm == "ortho":
            n1 = np_dt(0.5) / np.sqrt(np_dt(dim))
            weights = np.full(dim, n1 * np_dt(math.sqrt(2.0)), np_dt)
            weights[0] = n1
            dct2 = dct2 * _const(weights, x.dtype)
        return dct2
    if dct_type == 3:
        if norm == "ortho":
            n1 = np.sqrt(np_dt(dim))
            weights = np.full(dim, n1 * np_dt(math.sqrt(0.5)), np_dt)
            weights[0] = n1
            x = x * _const(weights, x.dtype)
        else:
            x = x * _const(dim, x.dtype)
        scale = _const(_twiddles(dim, 1), _COMPLEX[x.dtype])
        zero = zeros_like(x)
        return real(irfft(scale * complex_(x, zero), fft_length=[2 * dim]))[..., :dim]
    dct2 = _dct_internal(x, 2, 2 * dim, None)
    dct4 = dct2[..., 1::2]
    if norm == "ortho":
        dct4 = dct4 * _const(np_dt(math.sqrt(0.5)) / np.sqrt(np_dt(dim)), x.dtype)
    return dct4


def dct(input, type=2, n=None, axis=-1, norm=None, name=None):  # noqa: A002
    """``tf.signal.dct``: the type 1-4 discrete cosine transform of the innermost axis (n:
    the input cropped or zero-padded to n first; norm 'ortho' for types 2-4)."""
    x = convert_to_tensor(input)
    _validate_dct_arguments(x, type, n, axis, norm)
    return _dct_internal(x, type, n, norm)


def idct(input, type=2, n=None, axis=-1, norm=None, name=None):  # noqa: A002
    """``tf.signal.idct``: the inverse DCT (the DCT of the inverse type: 1 <-> 1, 2 <-> 3,
    4 <-> 4); unnormalised, idct(dct(x)) is 2N x (type 1: 2(N - 1) x)."""
    x = convert_to_tensor(input)
    _validate_dct_arguments(x, type, n, axis, norm)
    return _dct_internal(x, {1: 1, 2: 3, 3: 2, 4: 4}[type], n, norm)


def mdct(signals, frame_length, window_fn=vorbis_window, pad_end=False, norm=None, name=None):
    """``tf.signal.mdct``: the modified DCT of frames of frame_length (a multiple of 4) every
    frame_length / 2 samples."""
    x = convert_to_tensor(signals)
    length = _static_int(frame_length, "frame_length", "mdct")
    if length % 4 != 0:
        raise ValueError("The frame length must be a multiple of 4.")
    framed = frame(x, length, length // 2, pad_end=pad_end)
    if window_fn is not None:
        framed = framed * window_fn(length, dtype=framed.dtype)
    else:
        framed = framed * _const(1.0 / np.sqrt(2), framed.dtype)
    q = split(framed, 4, axis=-1)
    first = -reverse(q[2], [-1]) - q[3]
    second = q[0] - reverse(q[1], [-1])
    return dct(concat([first, second], axis=-1), type=4, norm=norm)


def inverse_mdct(mdcts, window_fn=vorbis_window, norm=None, name=None):
    """``tf.signal.inverse_mdct``: frames of the type-4 DCT unfolded, windowed, overlap-added."""
    m = convert_to_tensor(mdcts)
    if m.shape.rank is not None and m.shape.rank < 2:
        raise ValueError(f"Shape {m.shape} must have rank at least 2")
    half = _static_dim(m, -1, "inverse_mdct")
    if norm is None:
        result = _const(0.5 / half, m.dtype) * dct(m, type=4)
    elif norm == "ortho":
        result = dct(m, type=4, norm="ortho")
    else:
        raise ValueError("Unknown normalization. Expected None or 'ortho', got: %s" % norm)
    a, b = split(result, 2, axis=-1)
    frames = concat([b, -reverse(b, [-1]), -reverse(a, [-1]), -a], axis=-1)
    if window_fn is not None:
        frames = frames * window_fn(2 * half, dtype=m.dtype)
    else:
        frames = frames * _const(1.0 / np.sqrt(2), m.dtype)
    return overlap_and_add(frames, half, name=name)
