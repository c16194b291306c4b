"""``tf.signal``'s Fourier transforms as reference-interpreter ops (numpy's pocketfft
kernels, no native lowering, like the linalg decompositions: a compiled program holding
one runs in the interpreter): FFT / IFFT / FFT2D / IFFT2D / FFT3D / IFFT3D on complex
tensors, RFFT / IRFFT / RFFT2D / IRFFT2D / RFFT3D / IRFFT3D between real and half
spectra, over the innermost 1, 2 or 3 axes; fftshift / ifftshift as rolls.

TF's kernels (ducc) and pocketfft round differently: the tolerance is in the README.
fft_length is an attr here (TF: an int32 input), so it must be known when the graph is
built. The kernels crop or zero-pad each transformed axis to fft_length (for IRFFT the
innermost one to fft_length // 2 + 1) as TF's wrappers and kernels together do; the
gradients are TF's (fft_ops.py), with the cropped or padded part mapped back to the
input's shape (TF's own rfft gradient fails with a shape error when the input was cropped).
The rank-3 real transforms have no gradient rule (as TF: a LookupError)."""
import numpy as np

from .. import dtypes
from ..convert import convert_to_tensor
from ..eager import EagerTensor
from ..errors import InvalidArgumentError
from ..graph import Tensor
from ._infer import COMPLEX
from .array_ops import gather, get_static_value, identity, matrix_transpose, pad, shape, slice_
from .complex_ops import real
from .math_composites import roll
from .math_ops import cast, floordiv, multiply, reciprocal
from .reduction_ops import reduce_prod
from .registry import NO_GRADIENT_RULE, apply_op, register

_REAL = (dtypes.float32, dtypes.float64)
_TO_COMPLEX = {dtypes.float32: dtypes.complex64, dtypes.float64: dtypes.complex128}
_TO_REAL = {dtypes.complex64: dtypes.float32, dtypes.complex128: dtypes.float64}


def _op_name(kind, rank):
    return kind + ("" if rank == 1 else f"{rank}D")


def _shape_error(x, message):
    """As TF: the op's InvalidArgumentError eagerly, shape inference's ValueError in a graph."""
    return (InvalidArgumentError if isinstance(x, EagerTensor) else ValueError)(message)


def _check_rank(op_name, s, rank):
    if s is not None and len(s) < rank:
        raise ValueError(f"Input must have rank of at least {rank} but got: {list(s)} for '{op_name}'")


def _check_tcomplex(op_name, dt, allowed, attr):
    if dt not in allowed:
        raise TypeError(f"Value for attr '{attr}' of {dt.name} is not in the list of allowed values: "
                        f"{', '.join(d.name for d in allowed)} for '{op_name}'")


def _axes(ndim, rank):
    return tuple(range(ndim - rank, ndim))


# ----------------------------------------------------------------------- complex <-> complex
def _complex_infer(op_name, rank):
    def infer(shapes, dts, attrs):
        _check_tcomplex(op_name, dts[0], COMPLEX, "Tcomplex")
        _check_rank(op_name, shapes[0], rank)
        return [(shapes[0], dts[0])]
    return infer


def _complex_kernel(rank, inverse):
    def kernel(attrs, x):
        if x.size == 0:
            return np.zeros(x.shape, x.dtype)
        fn = np.fft.ifftn if inverse else np.fft.fftn
        return fn(x, axes=_axes(x.ndim, rank)).astype(x.dtype, copy=False)
    return kernel


def _fft_scale(t, rank, inverse):
    """N or (inverse) 1 / N for N elements in t's innermost rank axes, in t's dtype (TF's
    _fft_size_for_grad and its reciprocal): a constant when they are known, else computed
    when it runs."""
    dims = t.shape.as_list()[-rank:] if t.shape.rank is not None else [None]
    if all(d is not None for d in dims):
        n = float(np.prod(dims, dtype=np.float64))
        return convert_to_tensor(np.array(1.0 / n if inverse else n, t.dtype.as_numpy_dtype))
    n = cast(reduce_prod(shape(t)[-rank:]), t.dtype)
    return reciprocal(n) if inverse else n


def _complex_grad(rank, inverse):
    """TF's _fft_grad / _ifft_grad: the adjoint transform, N * ifft and fft / N."""
    def grad(op, g):
        return [multiply(_complex_transform(rank, not inverse)(g), _fft_scale(g, rank, inverse))]
    return grad


for _rank in (1, 2, 3):
    for _inverse in (False, True):
        _name = _op_name("IFFT" if _inverse else "FFT", _rank)
        register(_name, denormals="flush", infer=_complex_infer(_name, _rank),
                 kernel=_complex_kernel(_rank, _inverse), grad=_complex_grad(_rank, _inverse),
                 lowering="interpreter")


def _as_complex_input(value):
    """TF's conversion for the complex ops' input: a complex value keeps its dtype (Python
    complex numbers: complex128), a Python or numpy real value becomes complex64; a real
    tensor stays real (and the op raises its dtype error)."""
    x = convert_to_tensor(value)
    if x.dtype in COMPLEX or isinstance(value, (Tensor, EagerTensor)):
        return x
    return convert_to_tensor(value, preferred_dtype=dtypes.complex64)


def _complex_transform(rank, inverse):
    op_name = _op_name("IFFT" if inverse else "FFT", rank)

    def transform(input, name=None):  # noqa: A002
        x = _as_complex_input(input)
        return apply_op(op_name, [x], {}, name=name or op_name)
    transform.__name__ = op_name.lower()
    transform.__doc__ = (f"``tf.signal.{op_name.lower()}``: the {'inverse ' if inverse else ''}discrete "
                         f"Fourier transform over the innermost {rank} axes of a complex tensor.")
    return transform


fft, ifft = _complex_transform(1, False), _complex_transform(1, True)
fft2d, ifft2d = _complex_transform(2, False), _complex_transform(2, True)
fft3d, ifft3d = _complex_transform(3, False), _complex_transform(3, True)


# -------------------------------------------------------------------------- real <-> half spectrum
def _spectrum_dims(n):
    """The inner dims of RFFT's output for fft_length n (TF's: none for a zero length)."""
    return tuple(n[:-1]) + (n[-1] // 2 + 1 if n[-1] else 0,)


def _real_infer(op_name, rank, inverse):
    def infer(shapes, dts, attrs):
        if inverse:
            _check_tcomplex(op_name, dts[0], COMPLEX, "Tcomplex")
        else:
            _check_tcomplex(op_name, dts[0], _REAL, "Treal")
        s = shapes[0]
        _check_rank(op_name, s, rank)
        n = attrs["fft_length"]
        out_dt = _TO_REAL[dts[0]] if inverse else _TO_COMPLEX[dts[0]]
        if s is None:
            return [(None, out_dt)]
        inner = tuple(n) if inverse else _spectrum_dims(n)
        return [(tuple(s[:-rank]) + inner, out_dt)]
    return infer


def _real_kernel(rank, inverse):
    def kernel(attrs, x):
        n = attrs["fft_length"]
        out_dt = np.dtype(_TO_REAL[dtypes.as_dtype(x.dtype)].as_numpy_dtype if inverse
                          else _TO_COMPLEX[dtypes.as_dtype(x.dtype)].as_numpy_dtype)
        shape = x.shape[:-rank] + (tuple(n) if inverse else _spectrum_dims(n))
        if x.size == 0 or 0 in shape:
            return np.zeros(shape, out_dt)
        axes = _axes(x.ndim, rank)
        if inverse:
            return np.fft.irfftn(x, s=n, axes=axes).astype(out_dt, copy=False)
        return np.fft.rfftn(x, s=n, axes=axes).astype(out_dt, copy=False)
    return kernel


def _fit_to(t, dims, rank):
    """t's innermost rank axes cropped or zero-padded to dims (the gradient of a kernel's
    own pad / crop of its input to the transform's size)."""
    have = t.shape.as_list()[-rank:]
    lead = t.shape.rank - rank
    crop = [min(h, d) for h, d in zip(have, dims)]
    if crop != have:
        t = slice_(t, [0] * t.shape.rank, [-1] * lead + crop)
    extra = [d - c for c, d in zip(crop, dims)]
    if any(extra):
        t = pad(t, [[0, 0]] * lead + [[0, e] for e in extra])
    return t


def _input_dims(op, rank):
    s = op.inputs[0].shape
    dims = s.as_list()[-rank:] if s.rank is not None else [None]
    if any(d is None for d in dims):
        raise NotImplementedError("jitgrad's RFFT / IRFFT gradients need the input's transformed axes' "
                                  "sizes known when the graph is built.")
    return dims


def _alternating(n, dtype):
    """[1, -1, 1, -1, ...] of length n (TF's _ymask)."""
    return convert_to_tensor((1 - 2 * (np.arange(n) % 2)).astype(dtype.as_numpy_dtype))


def _rfft_grad(rank):
    """TF's _rfft_grad_helper: 0.5 * (N * irfft(g) + the real part of the edge bins' terms)."""
    def grad(op, g):
        n = list(op.get_attr("fft_length"))
        dims = _input_dims(op, rank)
        real_dt = _TO_REAL[g.dtype]
        size = convert_to_tensor(np.array(np.prod(n), real_dt.as_numpy_dtype))
        the_irfft = _real_transform(rank, True)(g, n)
        y0, ym = g[..., 0:1], g[..., -1:]
        if rank == 1:
            extra = real(y0)
            if n[-1] % 2 == 0:
                extra = extra + real(ym) * _alternating(n[-1], real_dt)
        else:
            extra = _column_term(y0, n[-2])
            if n[-1] % 2 == 0:
                extra = extra + _column_term(ym, n[-2]) * _alternating(n[-1], real_dt)
        half = convert_to_tensor(np.array(0.5, real_dt.as_numpy_dtype))
        return [_fit_to(half * (the_irfft * size + extra), dims, rank)]
    return grad


def _column_term(col, m):
    """TF's real(matmul(exp(-2 pi i a b / M), conj(col))) for a column col (..., M, 1) of
    the rank-2 gradient: the real part of M * ifft of col down axis -2."""
    scale = convert_to_tensor(np.array(m, col.dtype.as_numpy_dtype))
    return matrix_transpose(real(ifft(matrix_transpose(col)) * scale))


def _irfft_grad(rank):
    """TF's _irfft_grad_helper: rfft(g) / N, the inner bins doubled (they stand for their
    conjugates too); the DC bin and (fft_length even) the Nyquist bin once."""
    def grad(op, g):
        n = list(op.get_attr("fft_length"))
        dims = _input_dims(op, rank)
        real_dt = g.dtype
        bins = n[-1] // 2 + 1
        mask = np.full(bins, 2.0)
        mask[0] = 1.0
        if n[-1] % 2 == 0:
            mask[-1] = 1.0
        mask = (mask / np.prod(n)).astype(_TO_COMPLEX[real_dt].as_numpy_dtype)
        the_rfft = _real_transform(rank, False)(g, n)
        return [_fit_to(the_rfft * convert_to_tensor(mask), dims, rank)]
    return grad


for _rank in (1, 2, 3):
    for _inverse in (False, True):
        _name = _op_name("IRFFT" if _inverse else "RFFT", _rank)
        _grad = NO_GRADIENT_RULE if _rank == 3 else (_irfft_grad if _inverse else _rfft_grad)(_rank)
        register(_name, denormals="flush", infer=_real_infer(_name, _rank, _inverse),
                 kernel=_real_kernel(_rank, _inverse), grad=_grad, lowering="interpreter")


def _static_fft_length(fft_length, x, rank, op_name):
    value = get_static_value(fft_length) if not isinstance(fft_length, EagerTensor) else fft_length.numpy()
    if value is None:
        raise NotImplementedError(f"tf.signal.{op_name.lower()}: jitgrad needs fft_length known when "
                                  f"the graph is built.")
    value = np.asarray(value)
    if value.dtype.kind not in "iu":
        raise TypeError(f"fft_length must be int32, got {value.dtype}")
    if value.shape != (rank,):
        raise _shape_error(x, f"fft_length must have shape [{rank}]")
    for i, v in enumerate(value):
        if v < 0:
            raise _shape_error(x, f"fft_length[{i}] must >= 0, but got: {int(v)}")
    return tuple(int(v) for v in value)


def _real_transform(rank, inverse):
    op_name = _op_name("IRFFT" if inverse else "RFFT", rank)

    def transform(input_tensor, fft_length=None, name=None):
        if inverse:
            x = convert_to_tensor(input_tensor, preferred_dtype=dtypes.complex64)
            if x.shape.rank is not None and x.shape.rank < rank:
                raise ValueError(f"Shape {x.shape} must have rank at least {rank}")
            if x.dtype not in COMPLEX:
                raise ValueError(f"IRFFT requires tf.complex64 or tf.complex128 inputs, got: {x}")
        else:
            x = convert_to_tensor(input_tensor, preferred_dtype=dtypes.float32)
            if x.dtype not in _REAL:
                raise ValueError(f"RFFT requires tf.float32 or tf.float64 inputs, got: {x}")
            if x.shape.rank is not None and x.shape.rank < rank:
                raise ValueError(f"Shape {x.shape} must have rank at least {rank}")
        if fft_length is None:
            if x.shape.rank is None or any(d is None for d in x.shape.as_list()[-rank:]):
                raise NotImplementedError(f"tf.signal.{op_name.lower()}: jitgrad needs the innermost "
                                          f"{rank} dims known when fft_length is not given.")
            n = list(x.shape.as_list()[-rank:])
            if inverse:
                n[-1] = max(0, 2 * (n[-1] - 1))
            n = tuple(n)
        else:
            n = _static_fft_length(fft_length, x, rank, op_name)
        if 0 in n and not (x.shape.rank is not None and 0 in x.shape.as_list()):
            # TF's ducc kernel aborts the process on a zero-sized transform
            raise _shape_error(x, f"{op_name}: fft_length must be positive, got {list(n)}")
        return apply_op(op_name, [x], {"fft_length": n}, name=name or op_name)
    transform.__name__ = op_name.lower()
    transform.__doc__ = (f"``tf.signal.{op_name.lower()}``: the {rank}-D "
                         f"{'inverse of the real-input' if inverse else 'real-input'} discrete Fourier "
                         f"transform over the innermost {rank} axes (fft_length: their sizes).")
    return transform


rfft, irfft = _real_transform(1, False), _real_transform(1, True)
rfft2d, irfft2d = _real_transform(2, False), _real_transform(2, True)
rfft3d, irfft3d = _real_transform(3, False), _real_transform(3, True)


# ------------------------------------------------------------------------------------ shifts
def _shift(x, axes, sign, name, op_name):
    """x rolled by sign * (size // 2) along each axis in axes (all by default); sizes unknown
    when the graph is built are read when it runs (TF: shape(x) // 2)."""
    x = convert_to_tensor(x)
    rank = x.shape.rank
    if rank is None:
        raise NotImplementedError(f"tf.signal.{op_name}: jitgrad needs the input's rank known.")
    if axes is None:
        axes = list(range(rank))
    elif isinstance(axes, (int, np.integer)):
        axes = [int(axes)]
    else:
        value = axes if isinstance(axes, (list, tuple)) else get_static_value(axes)
        if value is None:
            raise NotImplementedError(f"tf.signal.{op_name}: jitgrad needs axes known when the graph is built.")
        axes = [int(a) for a in np.atleast_1d(value)]
    for a in axes:
        if not -rank <= a < rank:
            raise _shape_error(x, f"axis {a} is out of range for a tensor of rank {rank}")
    if not axes:
        return identity(x, name=name) if name else x
    dims = [x.shape.as_list()[a] for a in axes]
    if all(d is not None for d in dims):
        shifts = [sign * (d // 2) for d in dims]
    else:
        sizes = gather(shape(x), [a % rank for a in axes])
        shifts = floordiv(sizes, 2) * sign
    out = roll(x, shifts, axes)
    return identity(out, name=name) if name else out


def fftshift(x, axes=None, name=None):
    """``tf.signal.fftshift``: each axis in axes (default all) rolled by size // 2, moving the
    zero frequency to the centre (numpy.fft.fftshift)."""
    return _shift(x, axes, 1, name, "fftshift")


def ifftshift(x, axes=None, name=None):
    """``tf.signal.ifftshift``: fftshift's inverse, a roll by -(size // 2)."""
    return _shift(x, axes, -1, name, "ifftshift")


__all__ = ["fft", "ifft", "fft2d", "ifft2d", "fft3d", "ifft3d", "rfft", "irfft", "rfft2d", "irfft2d",
           "rfft3d", "irfft3d", "fftshift", "ifftshift"]
