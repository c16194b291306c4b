"""tf.signal: the Fourier transforms (ops/fft_ops.py: interpreter ops on numpy's pocketfft, so
a compiled Session run holding one falls back and the fallback is counted) and the composites
of signal_composites.py (frame, overlap_and_add, windows, stft, mel, mfcc, dct).

Expected values come from numpy written here: np.fft in float64, frames / windows / DCTs
from TF's documented formulas by loops; gradients against central finite differences of
the same graph (check_op) in both Session modes, and a few values that match TF 2.21
(commented where used)."""
import numpy as np
import pytest

import jitgrad as tf
from jitgrad.errors import InvalidArgumentError

from _graph_testing import check_op

RNG = np.random.default_rng(5)


def _complex_fn(transform):
    """A real-in, real-out wrapper for check_op: (re, im) -> [real(y), imag(y)]."""
    def fn(re, im):
        y = transform(tf.complex(re, im))
        return tf.stack([tf.math.real(y), tf.math.imag(y)])
    return fn


def _ri(z):
    return np.stack([z.real, z.imag])


# ------------------------------------------------------------------- complex transforms
COMPLEX_CASES = [("fft", 1, (6,)), ("ifft", 1, (2, 7)), ("fft2d", 2, (2, 3, 4)), ("ifft2d", 2, (3, 5)),
                 ("fft3d", 3, (2, 3, 2)), ("ifft3d", 3, (1, 2, 3, 3))]


@pytest.mark.usefixtures("graph_mode")
@pytest.mark.parametrize("name,rank,shape", COMPLEX_CASES)
def test_complex_transforms_values_and_gradients(name, rank, shape):
    re, im = RNG.normal(size=shape), RNG.normal(size=shape)
    axes = tuple(range(-rank, 0))
    ref = (np.fft.ifftn if name.startswith("i") else np.fft.fftn)(re + 1j * im, axes=axes)
    check_op(_complex_fn(getattr(tf.signal, name)), re, im, expected=_ri(ref), value_rtol=1e-12,
             value_atol=1e-14, rtol=1e-6, atol=1e-8)


def test_complex_transforms_eager_and_function_match_numpy():
    z = (RNG.normal(size=(3, 16)) + 1j * RNG.normal(size=(3, 16))).astype(np.complex64)

    @tf.function
    def both(v):
        return tf.signal.fft(v), tf.signal.ifft2d(v)
    for fft, ifft2d in (both(tf.constant(z)), (tf.signal.fft(z), tf.signal.ifft2d(z))):
        assert fft.dtype == tf.complex64 and ifft2d.dtype == tf.complex64
        ref = np.fft.fft(z.astype(np.complex128))
        # complex64: pocketfft and TF's ducc both within ~3e-7 of the float64 result, relative to its largest
        np.testing.assert_allclose(fft.numpy(), ref, atol=3e-7 * np.abs(ref).max())
        ref2 = np.fft.ifft2(z.astype(np.complex128))
        np.testing.assert_allclose(ifft2d.numpy(), ref2, atol=3e-7 * np.abs(ref2).max())


def test_fft_gradient_matches_tf():
    x = tf.constant([1 + 2j, 3 - 1j, 0.5j, 2], tf.complex64)
    with tf.GradientTape() as g:
        g.watch(x)
        y = tf.reduce_sum(tf.abs(tf.signal.fft(x)) ** 2 * tf.constant([1., 2., 3., 4.]))
    # these values match TF 2.21
    np.testing.assert_allclose(g.gradient(y, x).numpy(), [4 + 46j, 54 - 34j, -28 + 2j, 18 - 2j], atol=2e-5)


def test_input_conversion_dtypes():
    assert tf.signal.fft([1., 2.]).dtype == tf.complex64          # Python floats: complex64 (as TF)
    assert tf.signal.fft([1 + 1j, 2]).dtype == tf.complex128      # Python complex numbers: complex128
    assert tf.signal.fft(np.array([1 + 1j, 2])).dtype == tf.complex128
    assert tf.signal.rfft(np.array([1., 2.])).dtype == tf.complex64   # TF's preferred float32
    assert tf.signal.rfft(tf.constant([1., 2.], tf.float64)).dtype == tf.complex128
    assert tf.signal.irfft([1 + 1j, 2]).dtype == tf.float32


# ------------------------------------------------------------------------ real transforms
REAL_CASES = [  # (name, rank, input shape, fft_length or None)
    ("rfft", 1, (2, 6), None), ("rfft", 1, (7,), None), ("rfft", 1, (2, 5), [8]), ("rfft", 1, (2, 6), [3]),
    ("rfft2d", 2, (2, 3, 4), None), ("rfft2d", 2, (3, 5), [4, 7]), ("rfft2d", 2, (4, 6), [2, 4]),
    ("rfft3d", 3, (2, 3, 4), None)]


@pytest.mark.usefixtures("graph_mode")
@pytest.mark.parametrize("name,rank,shape,n", REAL_CASES)
def test_rfft_values_and_gradients(name, rank, shape, n):
    """The input is cropped or zero-padded to fft_length on each transformed axis; the gradient
    maps back through that (TF's own gradient raises a shape error when it crops)."""
    x = RNG.normal(size=shape)
    axes = tuple(range(-rank, 0))
    ref = np.fft.rfftn(x, s=n, axes=axes)
    def fn(v):
        y = getattr(tf.signal, name)(v, n)
        return tf.stack([tf.math.real(y), tf.math.imag(y)])
    check_op(fn, x, expected=_ri(ref), value_rtol=1e-12, value_atol=1e-13, rtol=1e-6, atol=1e-8,
             grad=rank < 3)   # (rank 3: no gradient rule, as TF)


IRFFT_CASES = [("irfft", 1, (2, 4), None), ("irfft", 1, (4,), [7]), ("irfft", 1, (2, 5), [6]),
               ("irfft", 1, (3,), [9]), ("irfft2d", 2, (3, 4), None), ("irfft2d", 2, (2, 3, 3), [4, 5]),
               ("irfft2d", 2, (5, 4), [3, 4]), ("irfft3d", 3, (2, 2, 3), None)]


@pytest.mark.usefixtures("graph_mode")
@pytest.mark.parametrize("name,rank,shape,n", IRFFT_CASES)
def test_irfft_values_and_gradients(name, rank, shape, n):
    """As numpy's irfftn: the imaginary parts of the DC (and even-length Nyquist) bins are
    ignored, so their gradient is zero, which finite differences see too."""
    re, im = RNG.normal(size=shape), RNG.normal(size=shape)
    axes = tuple(range(-rank, 0))
    ref = np.fft.irfftn(re + 1j * im, s=n, axes=axes)
    check_op(lambda a, b: getattr(tf.signal, name)(tf.complex(a, b), n), re, im, expected=ref,
             value_rtol=1e-12, value_atol=1e-14, rtol=1e-6, atol=1e-8, grad=rank < 3)


def test_real_transform_gradients_match_tf():
    xr = tf.constant([1., 2., -1., 0.5, 3.])
    got = {}
    for n in (None, [8]):
        with tf.GradientTape() as g:
            g.watch(xr)
            y = tf.signal.rfft(xr, n)
            k = np.arange(y.shape[0], dtype=np.float32)
            y = tf.reduce_sum(tf.math.real(y * tf.complex(tf.constant(k + 1), tf.constant(k * 0.5 - 1))))
        got[str(n)] = g.gradient(y, xr).numpy()
    # these values match TF 2.21
    np.testing.assert_allclose(got["None"], [6., -1.2845453, 0.01512438, 0.6029096, -0.33348882], atol=2e-6)
    np.testing.assert_allclose(got["[8]"], [15., -5.4142137, 2., -2.5857863, 3.], atol=2e-6)


def test_rfft3d_has_no_gradient_as_tf():
    x = tf.constant(np.ones((2, 2, 2), np.float32))
    with pytest.raises(LookupError):
        with tf.GradientTape() as g:
            g.watch(x)
            y = tf.reduce_sum(tf.abs(tf.signal.rfft3d(x)))
        g.gradient(y, x)


def test_second_order_gradient_of_rfft():
    """The gradient rules are written with the transforms themselves, so they differentiate
    again: d2/dx2 of sum |rfft(x)|^2 is (by Parseval, edge bins once) a constant matrix."""
    n = 6
    x = tf.constant(RNG.normal(size=n))
    with tf.GradientTape() as outer:
        outer.watch(x)
        with tf.GradientTape() as inner:
            inner.watch(x)
            y = tf.reduce_sum(tf.math.square(tf.abs(tf.signal.rfft(x))))
        gx = inner.gradient(y, x)
    hess = outer.jacobian(gx, x).numpy()
    f = np.exp(-2j * np.pi * np.outer(np.arange(n // 2 + 1), np.arange(n)) / n)   # the rfft matrix
    expected = 2 * np.real(f.conj().T @ f)
    np.testing.assert_allclose(hess, expected, atol=1e-10)


def test_empty_inputs():
    assert tf.signal.fft(tf.zeros([2, 0], tf.complex64)).shape == (2, 0)
    assert tf.signal.rfft(tf.zeros([2, 0])).shape == (2, 0)         # as TF: fft_length 0, no bins
    assert tf.signal.irfft(tf.zeros([2, 0], tf.complex64)).shape == (2, 0)
    out = tf.signal.rfft(tf.zeros([0, 8]))
    assert out.shape == (0, 5)


def test_errors():
    with pytest.raises(InvalidArgumentError, match="Tcomplex"):
        tf.signal.fft(tf.constant([1., 2.]))
    with pytest.raises(InvalidArgumentError, match="rank of at least 1"):
        tf.signal.fft(tf.constant(1 + 0j, tf.complex64))
    with pytest.raises(InvalidArgumentError, match="rank of at least 2"):
        tf.signal.fft2d(tf.constant([1 + 0j], tf.complex64))
    with pytest.raises(ValueError, match="RFFT requires"):
        tf.signal.rfft(tf.constant([1 + 0j], tf.complex64))
    with pytest.raises(ValueError, match="RFFT requires"):
        tf.signal.rfft(tf.constant([1., 2.], tf.float16))
    with pytest.raises(ValueError, match="IRFFT requires"):
        tf.signal.irfft(tf.constant([1., 2.]))
    with pytest.raises(ValueError, match="rank at least 1"):
        tf.signal.rfft(tf.constant(1.))
    with pytest.raises(InvalidArgumentError, match=r"fft_length must have shape \[1\]"):
        tf.signal.rfft(tf.constant([1., 2.]), [2, 3])
    with pytest.raises(InvalidArgumentError, match="must >= 0"):
        tf.signal.rfft(tf.constant([1., 2.]), [-1])
    # TF's ducc kernels abort the process on zero-length transforms; here an error
    with pytest.raises(InvalidArgumentError, match="positive"):
        tf.signal.rfft(tf.constant([1., 2.]), [0])
    with pytest.raises(InvalidArgumentError, match="positive"):
        tf.signal.irfft(tf.constant([1 + 1j], tf.complex64))
    g = tf.Graph()
    with g.as_default():
        with pytest.raises(TypeError, match="Tcomplex"):
            tf.signal.fft(tf.compat.v1.placeholder(tf.float32, [4]))
        with pytest.raises(ValueError, match="rank of at least 2"):
            tf.signal.ifft2d(tf.compat.v1.placeholder(tf.complex64, [4]))
        with pytest.raises(ValueError, match=r"fft_length must have shape \[2\]"):
            tf.signal.rfft2d(tf.compat.v1.placeholder(tf.float32, [4, 4]), [4])


def test_compiled_runs_fall_back_to_the_interpreter(graph_mode):
    before = tf.cache_info()["fallbacks"]
    x = RNG.normal(size=(2, 8))
    check_op(lambda v: tf.signal.irfft(tf.signal.rfft(v)), x, expected=x, value_atol=1e-14, grad=False)
    assert (tf.cache_info()["fallbacks"] > before) == (graph_mode == "compiled")


@pytest.mark.parametrize("axes", [None, 0, 1, -1, [1, 0], (-1,)])
def test_fftshift_and_ifftshift(axes):
    x = np.arange(15).reshape(3, 5)
    np.testing.assert_array_equal(tf.signal.fftshift(x, axes=axes).numpy(), np.fft.fftshift(x, axes=axes))
    np.testing.assert_array_equal(tf.signal.ifftshift(x, axes=axes).numpy(), np.fft.ifftshift(x, axes=axes))
    np.testing.assert_array_equal(tf.signal.ifftshift(tf.signal.fftshift(x, axes), axes).numpy(), x)


def test_aliases():
    assert tf.compat.v1.spectral.rfft is tf.signal.rfft and tf.compat.v1.spectral.ifft3d is tf.signal.ifft3d
    assert tf.compat.v1.signal.stft is tf.signal.stft


# ------------------------------------------------------------------------------- framing
def _np_frame(x, length, step, pad_end=False, pad_value=0):
    """Frames of the last axis by slicing, TF's frame counts."""
    n = x.shape[-1]
    if pad_end:
        frames = -(-n // step)
        need = max(0, length + step * (frames - 1) - n)
        x = np.concatenate([x, np.full(x.shape[:-1] + (need,), pad_value, x.dtype)], -1)
    else:
        frames = max(0, 1 + (n - length) // step)
    if not frames:
        return np.zeros(x.shape[:-1] + (0, length), x.dtype)
    return np.stack([x[..., f * step:f * step + length] for f in range(frames)], -2)


@pytest.mark.usefixtures("graph_mode", "no_fallback")     # gathers and pads: compiled natively
@pytest.mark.parametrize("length,step,pad_end", [(4, 2, False), (5, 3, True), (3, 3, False), (8, 5, True),
                                                 (20, 4, False)])
def test_frame_values_and_gradients(length, step, pad_end):
    x = RNG.normal(size=(2, 13))
    check_op(lambda v: tf.signal.frame(v, length, step, pad_end=pad_end, pad_value=0.5), x,
             expected=_np_frame(x, length, step, pad_end, 0.5), rtol=1e-6, atol=1e-8)


def test_frame_other_axis():
    x = RNG.normal(size=(11, 3)).astype(np.float32)
    got = tf.signal.frame(x, 4, 3, axis=0).numpy()
    expected = np.stack([x[f * 3:f * 3 + 4] for f in range(3)])      # [frames, frame_length, 3]
    np.testing.assert_array_equal(got, expected)


def _np_overlap_and_add(frames, step):
    f, length = frames.shape[-2:]
    out = np.zeros(frames.shape[:-2] + (length + step * (f - 1),), frames.dtype)
    for i in range(f):
        out[..., i * step:i * step + length] += frames[..., i, :]
    return out


@pytest.mark.usefixtures("graph_mode", "no_fallback")
@pytest.mark.parametrize("shape,step", [((3, 4), 2), ((2, 5, 6), 4), ((4, 3), 3), ((3, 4), 6), ((1, 7), 2)])
def test_overlap_and_add_values_and_gradients(shape, step):
    x = RNG.normal(size=shape)
    check_op(lambda v: tf.signal.overlap_and_add(v, step), x, expected=_np_overlap_and_add(x, step),
             value_rtol=1e-12, value_atol=1e-14, rtol=1e-6, atol=1e-8)


def test_framing_argument_errors():
    with pytest.raises(ValueError, match="frame_step must be an integer"):
        tf.signal.overlap_and_add(tf.ones([3, 4]), 2.)
    with pytest.raises(ValueError, match="rank at least 2"):
        tf.signal.overlap_and_add(tf.ones([4]), 2)
    with pytest.raises(ValueError, match="rank at least 1"):
        tf.signal.frame(tf.constant(1.), 2, 1)


# ------------------------------------------------------------------------------- windows
@pytest.mark.parametrize("n", [0, 1, 2, 5, 8])
@pytest.mark.parametrize("periodic", [True, False])
def test_raised_cosine_windows(n, periodic):
    denom = n if (periodic and n % 2 == 0) else n - 1   # TF: n + periodic * even - 1
    k = np.arange(n)
    for fn, a, b in ((tf.signal.hann_window, 0.5, 0.5), (tf.signal.hamming_window, 0.54, 0.46)):
        expected = np.ones(1) if n == 1 else a - b * np.cos(2 * np.pi * k / denom)
        got = fn(n, periodic=periodic, dtype=tf.float64)
        assert got.dtype == tf.float64
        np.testing.assert_allclose(got.numpy(), expected, atol=1e-15)
        np.testing.assert_allclose(fn(n, periodic=periodic).numpy(), expected, atol=3e-7)   # (float32 cos argument)
    with pytest.raises(ValueError, match="floating point"):
        tf.signal.hann_window(4, dtype=tf.int32)


def test_other_windows():
    n = 7
    k = np.arange(n)
    np.testing.assert_allclose(tf.signal.vorbis_window(n, dtype=tf.float64).numpy(),
                               np.sin(np.pi / 2 * np.sin(np.pi * (k + 0.5) / n) ** 2), atol=1e-15)
    beta = 5.0
    kaiser = np.i0(beta * np.sqrt(1 - (2 * k / (n - 1) - 1) ** 2)) / np.i0(beta)
    np.testing.assert_allclose(tf.signal.kaiser_window(n, beta, dtype=tf.float64).numpy(), kaiser, atol=1e-14)
    half = np.i0(beta * np.sqrt(1 - (2 * np.arange(4) / 3 - 1) ** 2))
    kbd = np.sqrt(np.cumsum(half)[:-1] / half.sum())
    np.testing.assert_allclose(tf.signal.kaiser_bessel_derived_window(6, beta, dtype=tf.float64).numpy(),
                               np.concatenate([kbd, kbd[::-1]]), atol=1e-14)


# ----------------------------------------------------------------------------------- STFT
def _np_hann(n):
    """The periodic Hann window of an even length n."""
    return 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n) / n)


@pytest.mark.usefixtures("graph_mode")
@pytest.mark.parametrize("length,step,n,pad_end", [(8, 4, None, False), (10, 3, None, True), (6, 2, 5, False)])
def test_stft_values_and_gradients(length, step, n, pad_end):
    x = RNG.normal(size=(2, 23))
    fft_length = n or 1 << (length - 1).bit_length()
    window = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(length) / (length if length % 2 == 0 else length - 1))
    ref = np.fft.rfft(_np_frame(x, length, step, pad_end) * window, fft_length)
    def fn(v):
        y = tf.signal.stft(v, length, step, fft_length=n, pad_end=pad_end)
        return tf.stack([tf.math.real(y), tf.math.imag(y)])
    check_op(fn, x, expected=_ri(ref), value_rtol=1e-12, value_atol=1e-13, rtol=1e-6, atol=1e-8)


def test_fft_length_default_is_tfs_enclosing_power_of_two():
    # 2 ** ceil(log2(frame_length)) (TF: log(v) / log(2.0) in float64, exact for these)
    assert tf.signal.stft(tf.zeros([32]), 8, 4).shape == (7, 5)
    assert tf.signal.stft(tf.zeros([32]), 5, 4).shape == (7, 5)
    assert tf.signal.stft(tf.zeros([32]), 9, 4).shape == (6, 9)


@pytest.mark.usefixtures("graph_mode")
def test_inverse_stft_reconstructs_and_differentiates():
    x = RNG.normal(size=(2, 64))
    length, step = 16, 4
    window_fn = tf.signal.inverse_stft_window_fn(step)
    rebuilt, _ = check_op(lambda v: tf.signal.inverse_stft(tf.signal.stft(v, length, step), length, step,
                                                            window_fn=window_fn), x, rtol=1e-6, atol=1e-8)
    # away from the ends every sample is covered by length / step frames: exact reconstruction
    np.testing.assert_allclose(rebuilt[:, length:-length], x[:, length:-length], atol=1e-12)


def test_inverse_stft_window_fn_values():
    forward = _np_hann(10)
    # sample j of every frame meets samples j mod 3 of the frames around it at a step of 3
    squares = np.concatenate([forward ** 2, np.zeros(2)])
    denom = np.array([sum(squares[i * 3 + j] for i in range(4)) for j in range(3)])
    expected = forward / denom[np.arange(10) % 3]
    got = tf.signal.inverse_stft_window_fn(3)(10, tf.float64).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_inverse_stft_crops_and_pads_frames():
    stfts = RNG.normal(size=(5, 5)) + 1j * RNG.normal(size=(5, 5))
    frames = np.fft.irfft(stfts, 8)
    padded = np.concatenate([frames, np.zeros((5, 2))], -1)           # frame_length 10 > fft_length 8
    np.testing.assert_allclose(tf.signal.inverse_stft(stfts, 10, 3, fft_length=8, window_fn=None).numpy(),
                               _np_overlap_and_add(padded, 3), atol=1e-12)
    np.testing.assert_allclose(tf.signal.inverse_stft(stfts, 6, 3, fft_length=8).numpy(),
                               _np_overlap_and_add(frames[:, :6] * _np_hann(6), 3), atol=1e-12)


# ----------------------------------------------------------------------------- mel / MFCC
def _np_mel_matrix(bins, spectrogram_bins, rate, lower, upper):
    mel = lambda f: 1127.0 * np.log(1.0 + f / 700.0)  # noqa: E731
    freqs = mel(np.linspace(0.0, rate / 2.0, spectrogram_bins))[1:, None]
    edges = np.linspace(mel(lower), mel(upper), bins + 2)
    lo, mid, hi = edges[:-2], edges[1:-1], edges[2:]
    w = np.maximum(0.0, np.minimum((freqs - lo) / (mid - lo), (hi - freqs) / (hi - mid)))
    return np.concatenate([np.zeros((1, bins)), w])


@pytest.mark.parametrize("args", [(20, 129, 8000, 125.0, 3800.0), (40, 257, 16000, 20.0, 8000.0)])
def test_linear_to_mel_weight_matrix(args):
    expected = _np_mel_matrix(*args)
    got = tf.signal.linear_to_mel_weight_matrix(*args, dtype=tf.float64)
    np.testing.assert_allclose(got.numpy(), expected, atol=1e-12)
    got32 = tf.signal.linear_to_mel_weight_matrix(*args)
    assert got32.dtype == tf.float32
    np.testing.assert_allclose(got32.numpy(), expected, atol=3e-5)   # float32 mel arithmetic (TF: same order)


def test_linear_to_mel_weight_matrix_errors():
    with pytest.raises(ValueError, match="Nyquist"):
        tf.signal.linear_to_mel_weight_matrix(10, 65, 8000, 0., 5000.)
    with pytest.raises(ValueError, match="num_mel_bins must be positive"):
        tf.signal.linear_to_mel_weight_matrix(0)
    with pytest.raises(ValueError, match=">= upper_edge_hertz"):
        tf.signal.linear_to_mel_weight_matrix(10, 65, 8000, 300., 200.)


def _np_dct2(x):
    n = x.shape[-1]
    k, m = np.arange(n)[:, None], np.arange(n)[None, :]
    return 2 * x @ np.cos(np.pi * k * (2 * m + 1) / (2 * n)).T


def test_mfccs_from_log_mel_spectrograms():
    x = RNG.normal(size=(3, 12))
    np.testing.assert_allclose(tf.signal.mfccs_from_log_mel_spectrograms(x).numpy(),
                               _np_dct2(x) / np.sqrt(2 * 12), atol=1e-12)


# ------------------------------------------------------------------------------------ DCT
def _np_dct(x, kind, norm=None):
    """The DCT definitions TF documents (scipy's), by matrices."""
    n = x.shape[-1]
    k, m = np.arange(n)[:, None], np.arange(n)[None, :]
    if kind == 1:
        mat = 2 * np.cos(np.pi * k * m / (n - 1))
        mat[:, 0] = 1
        mat[:, -1] = (-1.0) ** np.arange(n)
        return x @ mat.T
    if kind == 2:
        y = x @ (2 * np.cos(np.pi * k * (2 * m + 1) / (2 * n))).T
        if norm == "ortho":
            y = y * np.where(np.arange(n) == 0, np.sqrt(1 / (4 * n)), np.sqrt(1 / (2 * n)))
        return y
    if kind == 3:
        w = np.where(m == 0, 1.0, 2.0)
        if norm == "ortho":
            w = np.where(m == 0, 1.0 / np.sqrt(n), np.sqrt(2.0 / n))
        return x @ (w * np.cos(np.pi * m * (2 * k + 1) / (2 * n))).T
    y = x @ (2 * np.cos(np.pi * (2 * k + 1) * (2 * m + 1) / (4 * n))).T
    return y * np.sqrt(1 / (2 * n)) if norm == "ortho" else y


@pytest.mark.usefixtures("graph_mode")
@pytest.mark.parametrize("kind,norm", [(1, None), (2, None), (2, "ortho"), (3, None), (3, "ortho"), (4, None),
                                       (4, "ortho")])
def test_dct_values_and_gradients(kind, norm):
    x = RNG.normal(size=(2, 7))
    check_op(lambda v: tf.signal.dct(v, type=kind, norm=norm), x, expected=_np_dct(x, kind, norm),
             value_rtol=1e-11, value_atol=1e-12, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("kind", [2, 3, 4])
def test_idct_inverts_dct(kind):
    x = RNG.normal(size=(3, 8))
    np.testing.assert_allclose(tf.signal.idct(tf.signal.dct(x, type=kind, norm="ortho"), type=kind,
                                              norm="ortho").numpy(), x, atol=1e-12)
    # unnormalised: idct(dct(x)) is 2N x, as TF documents
    np.testing.assert_allclose(tf.signal.idct(tf.signal.dct(x, type=kind), type=kind).numpy(), 16 * x, atol=1e-11)
    x1 = RNG.normal(size=(2, 5))
    np.testing.assert_allclose(tf.signal.idct(tf.signal.dct(x1, type=1), type=1).numpy(), 8 * x1, atol=1e-11)


def test_dct_n_and_errors():
    x = RNG.normal(size=(2, 6))
    np.testing.assert_allclose(tf.signal.dct(x, n=4).numpy(), _np_dct2(x[:, :4]), atol=1e-12)
    np.testing.assert_allclose(tf.signal.dct(x, n=9).numpy(), _np_dct2(np.pad(x, [(0, 0), (0, 3)])), atol=1e-12)
    with pytest.raises(NotImplementedError, match="axis must be -1"):
        tf.signal.dct(x, axis=0)
    with pytest.raises(ValueError, match="Types I, II, III and IV"):
        tf.signal.dct(x, type=5)
    with pytest.raises(ValueError, match="Normalization is not supported for the Type-I"):
        tf.signal.dct(x, type=1, norm="ortho")
    with pytest.raises(ValueError, match="Unknown normalization"):
        tf.signal.dct(x, norm="forward")
    with pytest.raises(TypeError):        # TF: a TypeError from its 0.0 constant in the input's dtype
        tf.signal.dct(tf.constant([[1, 2]]))


def test_mdct_round_trip():
    """mdct then inverse_mdct (vorbis window, Princen-Bradley) rebuilds the signal away from
    the first and last half frame."""
    x = RNG.normal(size=(2, 64))
    for norm in (None, "ortho"):
        rebuilt = tf.signal.inverse_mdct(tf.signal.mdct(x, 16, norm=norm), norm=norm).numpy()
        np.testing.assert_allclose(rebuilt[:, 8:-8], x[:, 8:56], atol=1e-12)


def test_complex_transform_gradients_with_unknown_shapes():
    """N of the fft gradients is computed when the function runs if the traced shape has
    None dims (TF's _fft_size_for_grad): the gradient of sum real(ifft(x) * fft2d(x))."""
    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.complex128)])
    def grad(x):
        with tf.GradientTape() as g:
            g.watch(x)
            y = tf.reduce_sum(tf.math.real(tf.signal.ifft(x) * tf.signal.fft2d(x)))
        return g.gradient(y, x)
    z = RNG.normal(size=(3, 4)) + 1j * RNG.normal(size=(3, 4))
    # L = Re sum(A z * B z) for the linear maps A (ifft of rows), B (fft2d); TF's gradient of a real
    # loss is dL/dRe + i dL/dIm = conj(A^T (B z) + B^T (A z)), with A^T = A, B^T = B (symmetric DFTs)
    a, b = np.fft.ifft(z), np.fft.fft2(z)
    expected = np.conj(np.fft.ifft(b) + np.fft.fft2(a))
    np.testing.assert_allclose(grad(tf.constant(z)).numpy(), expected, atol=1e-12)


def test_half_windows_round_each_step_to_half():
    """TF computes a float16 window in float16 (each op rounded): 2 pi, k / n and the cosine
    each rounded to half, so hann(4)[1] is 0.5 - 2^-12 (as TF 2.21), not 0.5."""
    h = np.float16
    k = np.arange(4).astype(h)
    expected = h(0.5) - h(0.5) * np.cos(h(2 * np.pi) * k / h(4))
    got = tf.signal.hann_window(4, dtype=tf.float16)
    assert got.dtype == tf.float16
    np.testing.assert_array_equal(got.numpy(), expected)
    assert got.numpy()[1] == h(0.5) - h(2.0 ** -12)


def test_fftshift_with_sizes_unknown_when_traced():
    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32)])
    def shifts(x):
        return tf.signal.fftshift(x), tf.signal.ifftshift(x, axes=[-1])
    for shape in [(3, 5), (4, 2), (1, 7)]:
        x = np.arange(np.prod(shape), dtype=np.int32).reshape(shape)
        a, b = shifts(tf.constant(x))
        np.testing.assert_array_equal(a.numpy(), np.fft.fftshift(x))
        np.testing.assert_array_equal(b.numpy(), np.fft.ifftshift(x, axes=[-1]))
