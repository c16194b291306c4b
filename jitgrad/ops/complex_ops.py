"""Complex numbers: tf.complex, tf.math.real / imag / conj and |z| (ComplexAbs), with
TF's gradient rules.

numpy reference kernels only (a compiled run that needs them is a counted
interpreter fallback). Gradients follow TF's convention: for a real loss L of a
complex z the gradient is dL/dRe(z) + i dL/dIm(z) (twice the Wirtinger derivative
dL/dconj(z)); a holomorphic op passes grad * conj(f'(z)) back.
"""
import numpy as np

from .. import dtypes
from ..convert import convert_all
from ._infer import COMPLEX, FLOATS, check_dtype, check_same
from ..shapes import broadcast_dims
from .math_ops import divide_no_nan, less, multiply, negative, ones_like, reciprocal, reduce_to, where, zeros_like
from .registry import apply_op, register as _register_op


def _register(name, grad, **facts):
    """Complex ops run in the interpreter only (a compiled run holding one is a counted fallback)."""
    return _register_op(name, grad=grad, lowering="interpreter", **facts)


_REAL_OF = {dtypes.complex64: dtypes.float32, dtypes.complex128: dtypes.float64}
_COMPLEX_OF = {dtypes.float32: dtypes.complex64, dtypes.float64: dtypes.complex128}


def _to_real_infer(op_name):
    def infer(shapes, dts, attrs):
        check_dtype(op_name, dts[0], COMPLEX + FLOATS, "input")
        return [(shapes[0], _REAL_OF.get(dts[0], dts[0]))]
    return infer


def _complex_infer(shapes, dts, attrs):
    check_same("Complex", dts)
    if dts[0] not in _COMPLEX_OF:
        raise TypeError(f"Value for attr 'T' of {dts[0].name} is not in the list of allowed values for Complex "
                        f"(float32, float64)")
    return [(broadcast_dims(shapes[0], shapes[1], "'Complex'"), _COMPLEX_OF[dts[0]])]


def _complex_abs_grad(op, g):
    """TF's: grad * z / |z|, 0 where z = 0 (div_no_nan)."""
    z, r = op.inputs[0], op.outputs[0]
    return [multiply(z, complex(divide_no_nan(g, r), zeros_like(g)))]


_register("Real", lambda op, g: [complex(g, zeros_like(g))], infer=_to_real_infer("Real"),
          kernel=lambda attrs, x: np.asarray(np.real(x), order="C"),   # (ascontiguousarray makes 0-d 1-d)
          denormals="keep")
_register("Imag", lambda op, g: [complex(zeros_like(g), g)], infer=_to_real_infer("Imag"),
          kernel=lambda attrs, x: np.asarray(np.imag(x), order="C"), denormals="keep")
_register("ComplexAbs", _complex_abs_grad, infer=_to_real_infer("ComplexAbs"), kernel=lambda attrs, x: np.abs(x),
          denormals="flush")


def _angle_grad(op, g):
    """TF's _AngleGrad: -complex(g, 0) / (Im(z) + i Re(z)), for angle(z) = atan2(Im z, Re z)."""
    z = op.inputs[0]
    return [multiply(negative(complex(g, zeros_like(g))), reciprocal(complex(imag(z), real(z))))]


_register("Angle", _angle_grad, infer=_to_real_infer("Angle"), kernel=lambda attrs, x: np.angle(x), denormals="flush")
_register("Conj", lambda op, g: [conj(g)], infer=lambda shapes, dts, attrs: [(shapes[0], dts[0])],
          kernel=lambda attrs, x: np.conj(x), denormals="keep")


def _complex_kernel(attrs, re, im):
    # parts set directly: re + 1j * im would turn an infinite im into nan + inf j
    re, im = np.broadcast_arrays(re, im)
    out = np.empty(re.shape, np.complex64 if re.dtype == np.float32 else np.complex128)
    out.real, out.imag = re, im
    return out


_register("Complex", lambda op, g: [reduce_to(real(g), op.inputs[0]), reduce_to(imag(g), op.inputs[1])],
          infer=_complex_infer, kernel=_complex_kernel, denormals="keep")


def real(input, name=None):  # noqa: A002
    """``tf.math.real``: the real part (a real tensor is returned as it is)."""
    (x,) = convert_all([input])
    return apply_op("Real", [x], name=name or "Real") if x.dtype in COMPLEX else x


def imag(input, name=None):  # noqa: A002
    """``tf.math.imag``: the imaginary part (zeros for a real tensor)."""
    (x,) = convert_all([input])
    if x.dtype in COMPLEX:
        return apply_op("Imag", [x], name=name or "Imag")
    return zeros_like(x)


def conj(x, name=None):
    """``tf.math.conj``: the complex conjugate (a real tensor is returned as it is)."""
    (x,) = convert_all([x])
    return apply_op("Conj", [x], name=name or "Conj") if x.dtype in COMPLEX else x


def complex(real, imag, name=None):  # noqa: A001
    """``tf.complex(real, imag)``: float32 parts -> complex64, float64 -> complex128."""
    re, im = convert_all([real, imag])
    if re.dtype != im.dtype:
        raise TypeError(f"The `real` and `imag` components have different types: {re.dtype.name} {im.dtype.name}")
    return apply_op("Complex", [re, im], name=name or "Complex")


def angle(input, name=None):  # noqa: A002
    """``tf.math.angle``: the argument of a complex number in (-pi, pi]; for a real tensor, as TF
    composes it, pi where x < 0 and 0 elsewhere (NaN included)."""
    (x,) = convert_all([input])
    if x.dtype in COMPLEX:
        return apply_op("Angle", [x], name=name or "Angle")
    return where(less(x, 0), multiply(ones_like(x), np.pi), zeros_like(x), name=name or "Angle")
