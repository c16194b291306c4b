"""Elementwise math: unary and broadcasting binary ops, their public
functions, and their gradient rules (TensorFlow's formulas, operand order
kept so float32 results match TF bit for bit)."""
import math

import numpy as np

from .. import dispatch, dtypes
from ..convert import convert_all, convert_to_tensor, graph_of, is_tensorlike
from ..errors import InternalError, InvalidArgumentError, NoKernelError, UnimplementedError
from ..shapes import as_shape, broadcast_dims
from ._infer import ALL, ARITH, COMPLEX, FLOATS, NUMBERS, broadcasting, check_dtype, check_same, unary
from . import registry as _registry
from .cast_kernel import cast as cast_values
from .registry import NO_GRADIENT_RULE, NOT_DIFFERENTIABLE, apply_op, register

BOOL = (dtypes.bool_,)
SIGNED = NUMBERS


def _u(op_type, x, name):
    if x.__class__ in dispatch.eager_types and _registry.eager_now():
        return dispatch.eager_execute(_registry.REGISTRY[op_type], [x], {})
    (x,) = convert_all([x])
    return apply_op(op_type, [x], name=name or op_type)


def _b(op_type, x, y, name):
    et = dispatch.eager_types
    if x.__class__ in et and y.__class__ in et and _registry.eager_now():
        return dispatch.eager_execute(_registry.REGISTRY[op_type], [x, y], {})
    x, y = convert_all([x, y])
    return apply_op(op_type, [x, y], name=name or op_type)


# ---------------------------------------------------------------- gradient helpers
def reduce_to(grad, x):
    """Sums a broadcast gradient back down to x's shape (TF's BroadcastGradientArgs)."""
    if grad is None:
        return None
    gs, xs = grad.shape, x.shape
    if gs.is_fully_defined() and xs.is_fully_defined() and gs.dims == xs.dims:
        return grad
    return apply_op("SumToShape", [grad, x])


def _binary_grads(op, gx, gy):
    x, y = op.inputs
    return [reduce_to(gx, x), reduce_to(gy, y)]


# ---------------------------------------------------------------- registration
def _in_float32_if_narrow(kernel):
    """A float16 / bfloat16 value computed in float32 and rounded once, as TF's Eigen kernels for
    half types do (half(f(float(x)))): numpy evaluated sigmoid(-12) in float16 steps (1 + e^12
    overflows, giving 0 where TF gives 6.1e-6) and rsqrt as two roundings (tf_fuzz features
    seed 310013: bfloat16 sigmoid(2.25) 0.902 where TF's correctly rounded 0.906)."""
    def kernel_narrow(x):
        if x.dtype.itemsize == 2 and (x.dtype == np.float16 or x.dtype.kind == "V"):
            return np.asarray(kernel(x.astype(np.float32))).astype(x.dtype)
        return kernel(x)
    return kernel_narrow


def _unary_op(name, kernel, grad, allowed=FLOATS, infer_wrap=None, narrow_in_float32=True, **kw):
    """narrow_in_float32=False: the kernel is TF's formula of several Eigen operations, each
    rounded to the tensor's type (a float16 numpy array rounds each step as Eigen's half does)."""
    infer = unary(allowed)
    if narrow_in_float32 and any(d.is_floating for d in allowed):
        kernel = _in_float32_if_narrow(kernel)
    register(name, infer=infer_wrap(infer) if infer_wrap else infer, kernel=lambda attrs, x: kernel(x), grad=grad,
             kind="elementwise", **kw)


def _binary_op(name, kernel, grad, allowed=ALL, out_dtype=None, infer_wrap=None, **kw):
    infer = broadcasting(allowed, out_dtype)
    register(name, infer=infer_wrap(infer) if infer_wrap else infer, kernel=lambda attrs, x, y: kernel(x, y),
             grad=grad, kind="elementwise", **kw)


def _no_unsigned(infer):
    """TF 2.21's op defs of Abs / Neg / Sign / Pow list no unsigned integers: building one in a
    graph (or a function trace) is a TypeError, running one eagerly an InvalidArgumentError."""
    def checked(shapes, dts, attrs):
        if dts[0].is_unsigned:
            msg = (f"Value for attr 'T' of {dts[0].name} is not in the list of allowed values "
                   f"for {checked.op_name} (no unsigned integers); input 'x'.")
            raise InvalidArgumentError(msg) if _registry.eager_now() else TypeError(msg)
        infer.op_name = checked.op_name
        return infer(shapes, dts, attrs)
    checked.op_name = "?"
    return checked


def _int_div_check(y):
    if y.dtype.kind in "iu" and np.any(y == 0):
        raise InvalidArgumentError("Integer division by zero")


def _floordiv(x, y):
    _int_div_check(y)
    if x.dtype in dtypes.FLOAT_NP:
        return np.floor(x / y)
    with np.errstate(over="ignore"):    # MIN // -1 wraps to MIN, as TF's kernel and numpy give
        return np.floor_divide(x, y)


def _floormod(x, y):
    _int_div_check(y)
    if x.dtype not in dtypes.FLOAT_NP:      # bfloat16 is a float too (numpy kind "V")
        return np.mod(x, y)
    # TF's FloorMod for floats (Eigen google_floor_fmod): fmod, exact, moved into y's sign when
    # the signs differ. A zero keeps fmod's sign (x's): floormod(-0., 2.) is -0., where numpy's
    # mod gives the sign of y.
    with np.errstate(invalid="ignore"):
        r = np.fmod(x, y)
        return np.where((r != 0) & ((y < 0) != (r < 0)), r + y, r).astype(r.dtype, copy=False)


# TF 2.21's TruncateDiv / TruncateMod kernels report an integer division by zero as an
# InternalError with this message (eager, tf.function and Session alike; FloorDiv's is an
# InvalidArgumentError "Integer division by zero"). Checked with real TF.
TRUNCATE_DIV_ZERO_MESSAGE = "Unexpected error in binary operator (only integer div and mod should have errors)"


def _truncate_check(y):
    if y.dtype.kind in "iu" and np.any(y == 0):
        raise InternalError(None, None, TRUNCATE_DIV_ZERO_MESSAGE)


def _truncatediv(x, y):
    """C's x / y rounded toward zero. Integers: MIN / -1 wraps to MIN (as TF's kernel);
    floats: trunc of the quotient rounded to the type (float16 / bfloat16: the quotient
    computed in float32 and rounded to the type, then truncated, as Eigen's half does)."""
    _truncate_check(y)
    if x.dtype.kind == "u":
        return x // y
    if x.dtype.kind == "i":
        with np.errstate(over="ignore"):
            q = x // y
            return np.where((q < 0) & (q * y != x), q + 1, q).astype(q.dtype, copy=False)
    if x.dtype.itemsize == 2:
        return np.trunc((x.astype(np.float32) / y.astype(np.float32)).astype(x.dtype))
    return np.trunc(x / y)


def _truncatemod(x, y):
    """C's fmod: the remainder of the truncated quotient, x's sign (floats: exact fmod, NaN
    for y == 0 or an infinite x). TF has no CPU kernel for float16 / bfloat16."""
    _truncate_check(y)
    if x.dtype.itemsize == 2 and x.dtype.kind in "fV":
        raise NoKernelError("TruncateMod", "float16" if x.dtype == np.float16 else "bfloat16")
    return np.fmod(x, y)


def _pow(x, y):
    if x.dtype.kind in "iu" and np.any(y < 0):
        raise InvalidArgumentError("Integers to negative integer powers are not allowed")
    if x.dtype.kind == "f":
        # numpy takes shortcuts for a scalar exponent (0.5 -> sqrt, -1 -> 1/x, 2 -> x*x) that
        # break C's pow special values, which TF's kernel (std::pow) and the compiled code
        # keep: pow(-0, .5) = +0, pow(-inf, .5) = +inf. A full exponent array takes no shortcut.
        # Narrower floats are evaluated in float64 and rounded once, as the compiled code does.
        shape = np.broadcast_shapes(x.shape, y.shape)
        wide = np.float64 if x.dtype.itemsize < 8 else x.dtype
        y = np.array(np.broadcast_to(y, shape), wide)
        return np.power(x.astype(wide), y).astype(x.dtype)
    return np.power(x, y)


def _mul_no_nan(x, y):
    return np.where(y == 0, np.zeros((), x.dtype), x * y)


def _sqrt_grad(y, dy):
    # TF's scalar_sqrt_gradient_op: 0 where dy is 0, else 0.5 dy / conj(y)
    with np.errstate(all="ignore"):
        return np.where(dy == 0, np.zeros((), y.dtype), (y.dtype.type(0.5) * dy) / np.conj(y))


# TF's RsqrtGrad / ReciprocalGrad kernels (Eigen scalar_rsqrt_gradient_op,
# scalar_inverse_gradient_op), products in their order: 0 where dy == 0, even where y is inf or
# NaN (a gradient cut off by a where upstream stays 0), else (-0.5 * (dy * y)) * (y * y) and
# (-y * y) * dy -- y * y first, so it overflows (or underflows) where TF's does.
def _rsqrt_grad(y, dy):
    with np.errstate(all="ignore"):
        return np.where(dy == 0, np.zeros((), y.dtype), (y.dtype.type(-0.5) * (dy * y)) * (y * y))


def _reciprocal_grad(y, dy):
    with np.errstate(all="ignore"):
        return np.where(dy == 0, np.zeros((), y.dtype), (-y * y) * dy)


def _sigmoid(x):
    """float32 in float64, rounded once; float64 as the compiled code (vecmath._sigmoid):
    t = sigmoid(-|x|), 1 - t for x >= 0 (the nearest value there, as TF's)."""
    if x.dtype == np.float32:
        return _sigmoid(x.astype(np.float64)).astype(np.float32)
    if x.dtype.kind == "c":     # |x| and x < 0 mean nothing for a complex x: TF's 1 / (1 + e^-x)
        with np.errstate(over="ignore", invalid="ignore"):
            return (1 / (1 + np.exp(-x))).astype(x.dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(-np.abs(x))
        t = e / (1 + e)
        return np.where(x < 0, t, 1 - t).astype(x.dtype)


def _sigmoid_narrow(x):
    """Eigen's generic scalar_logistic_op, which TF's float16 / bfloat16 Sigmoid runs: e / (1 + e)
    with e = exp(x), each step rounded to the type, 1 where e is inf. Matches TF 2.21 on all of
    20001 points of [-30, 30] in both types; rounding 1 / (1 + exp(-x)) once missed 1305 of them
    in bfloat16 (sigmoid_cross_entropy gradients then cancelled differently: tf_fuzz features
    seeds 120164, 130023)."""
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(x.astype(np.float32)).astype(x.dtype)
        s = (e / (x.dtype.type(1) + e)).astype(x.dtype)
    return np.where(np.isinf(e), x.dtype.type(1), s)


def _sigmoid_kernel(x):
    if x.dtype.itemsize == 2 and (x.dtype == np.float16 or x.dtype.kind == "V"):
        return _sigmoid_narrow(x)
    return _sigmoid(x)


_EPSILON_OF_NARROW = {"float16": 2.0 ** -13, "bfloat16": 2.0 ** -7}     # Eigen NumTraits<T>::epsilon()


def _softplus(x):
    if x.dtype.itemsize != 2:
        return np.logaddexp(x.dtype.type(0), x)
    # TF's Softplus kernel, in the tensor's type: x above -t, exp(x) below t, else log1p(exp(x)),
    # t = log(epsilon) + 2 with Eigen's epsilons (-7.01 for float16, -2.86 for bfloat16, whose
    # exp(x) there is 3% above softplus(x)); float32 / float64 agree with logaddexp to a few ulps.
    t = np.log(np.asarray(_EPSILON_OF_NARROW[x.dtype.name], x.dtype)) + x.dtype.type(2)
    with np.errstate(over="ignore"):
        e = np.exp(x)
        return np.where(x > -t, x, np.where(x < t, e, np.log1p(e)))


_binary_op("AddV2", np.add, lambda op, g: _binary_grads(op, g, g), ARITH + (dtypes.string,))   # strings concatenate
_binary_op("Sub", np.subtract, lambda op, g: _binary_grads(op, g, negative(g)), ARITH)
def _conj(x):
    """conj(x) for a complex tensor (ops/complex_ops.py's Conj), x itself for a real one: TF's
    gradients of complex products and quotients use the conjugated other operand."""
    return apply_op("Conj", [x]) if x.dtype in COMPLEX else x


_binary_op("Mul", np.multiply,
           lambda op, g: _binary_grads(op, multiply(g, _conj(op.inputs[1])), multiply(g, _conj(op.inputs[0]))),
           ARITH)
# TF's _MulNoNanGrad conjugates nothing, also for complex operands (unlike Mul's): kept as TF has it
_binary_op("MulNoNan", _mul_no_nan,
           lambda op, g: _binary_grads(op, mul_no_nan(g, op.inputs[1]), mul_no_nan(op.inputs[0], g)),
           FLOATS + COMPLEX)
def _divide(x, y):
    """x / y; a complex one as TF 2.21's kernels (Eigen's pdiv for complex packets): y scaled
    by m = max(|re y|, |im y|), x * conj(y / m) / |y / m|^2 / m. Numpy's Smith division gives
    1 / 0 = inf + nan j and 1 / inf = 0 where TF gives nan + nan j (fuzz seed 370142)."""
    if np.result_type(x, y).kind != "c":
        return np.divide(x, y)
    dtype = np.result_type(x, y)
    x, y = np.asarray(x, dtype), np.asarray(y, dtype)
    with np.errstate(all="ignore"):
        m = np.maximum(np.abs(y.real), np.abs(y.imag))
        yr, yi = y.real / m, y.imag / m
        d = yr * yr + yi * yi
        re = (x.real * yr + x.imag * yi) / d / m
        im = (x.imag * yr - x.real * yi) / d / m
    out = np.empty(np.broadcast(re, im).shape, dtype)
    out.real, out.imag = re, im
    return out


_binary_op("RealDiv", _divide,
           lambda op, g: _binary_grads(op, realdiv(g, _conj(op.inputs[1])),
                                       multiply(g, realdiv(realdiv(negative(_conj(op.inputs[0])),
                                                                   _conj(op.inputs[1])), _conj(op.inputs[1])))),
           FLOATS + COMPLEX, cost=4)


def _div_no_nan(x, y):
    """TF's DivNoNan kernel: y == 0 ? 0 : x / y (+0, even where x is inf or NaN)."""
    with np.errstate(all="ignore"):
        return np.where(y == 0, np.zeros((), x.dtype), _divide(x, y)).astype(np.result_type(x, y), copy=False)


def _div_no_nan_grad(op, g):
    """TF 2.21's _DivNoNanGrad, operations in its order: div_no_nan(g, conj y) for x and
    g * div_no_nan(div_no_nan(-conj x, conj y), conj y) for y. The plain multiply by g keeps
    an inf or NaN upstream gradient meeting y == 0 as NaN (inf * 0), as TF gives (fuzz seed
    122025), where a where(y == 0, 0, ...) composite gave 0."""
    x, y = _conj(op.inputs[0]), _conj(op.inputs[1])
    return _binary_grads(op, divide_no_nan(g, y), multiply(g, divide_no_nan(divide_no_nan(negative(x), y), y)))


_binary_op("DivNoNan", _div_no_nan, _div_no_nan_grad, FLOATS + COMPLEX, cost=4)
_binary_op("FloorDiv", _floordiv, NOT_DIFFERENTIABLE, NUMBERS, cost=4)
_binary_op("FloorMod", _floormod,
           lambda op, g: _binary_grads(op, g, multiply(g, negative(floordiv(op.inputs[0], op.inputs[1])))),
           NUMBERS, cost=4)


# TF's op defs: TruncateDiv takes every real type (complex builds, but has no CPU kernel: not
# taken here), TruncateMod int32 / int64 / floats. TF 2.21 registers TruncateDiv not
# differentiable (GradientTape gives None) and no gradient for TruncateMod (LookupError).
_binary_op("TruncateDiv", _truncatediv, NOT_DIFFERENTIABLE, NUMBERS, cost=4)
_binary_op("TruncateMod", _truncatemod, NO_GRADIENT_RULE, FLOATS + (dtypes.int32, dtypes.int64), cost=4)


def _pow_grad(op, g):
    x, y = op.inputs
    z = op.outputs[0]
    # TF 2.21's _PowGrad, products in its order: plain multiplies, so a zero upstream gradient
    # meeting pow(0, y - 1) = inf (x = 0, y <= 0) gives NaN, as in TF (not mul_no_nan's 0).
    gx = multiply(multiply(g, y), pow(x, subtract(y, 1)))
    mask = greater(x, 0)
    safe_x = where(mask, x, ones_like(x))
    log_x = where(mask, log(safe_x), zeros_like(x))
    gy = multiply(multiply(g, z), log_x)
    return _binary_grads(op, gx, gy)


_binary_op("Pow", _pow, _pow_grad, NUMBERS, infer_wrap=_no_unsigned, cost=12)


def _minmax_grad(op, g, cmp):
    x, y = op.inputs
    xmask = cmp(x, y)
    zeros = zeros_like(g)
    return _binary_grads(op, where(xmask, g, zeros), where(xmask, zeros, g))


def _tie_keeps_second(np_fn):
    """TF's Maximum / Minimum return the second operand when the two compare equal, which
    decides the sign of a zero (maximum(-0., 0.) is 0., maximum(0., -0.) -0.; the compiled code
    does the same): its packed code does, which computes all of a tensor's elements but the
    tail past its last multiple of 8 floats / 4 doubles (the scalar code there returns the
    first; README "Known differences"). NaN still propagates from either side."""
    def kernel(x, y):
        with np.errstate(invalid="ignore"):
            return np.where(x == y, y, np_fn(x, y)).astype(np.result_type(x, y), copy=False)
    return kernel


_maximum = _tie_keeps_second(np.maximum)
_minimum = _tie_keeps_second(np.minimum)
_binary_op("Maximum", _maximum, lambda op, g: _minmax_grad(op, g, greater_equal), NUMBERS)
_binary_op("Minimum", _minimum, lambda op, g: _minmax_grad(op, g, less_equal), NUMBERS)


def _sqdiff_grad(op, g):
    x, y = op.inputs
    d = multiply(multiply(2.0, g), subtract(x, y))
    return _binary_grads(op, d, negative(d))


def _squared_difference(x, y):
    d = x - y
    if d.dtype.kind != "c":
        return np.square(d)
    out = np.zeros_like(d)   # |x - y|^2 with an imaginary part of exactly 0, as TF's conj(d) * d gives
    out.real = np.square(d.real) + np.square(d.imag)
    return out


# TF registers SquaredDifference for floats, int32, int64 and complex (int8/uint8/... are type errors);
# its gradient, 2 g (x - y), is TF's for complex operands too
_binary_op("SquaredDifference", _squared_difference, _sqdiff_grad,
           FLOATS + (dtypes.int32, dtypes.int64) + COMPLEX)


def _sqrt_grad_grad(op, g):
    """TF's _SqrtGradGrad: with ga = g / a, (-conj(ga) * y, 0.5 * ga) -- y = 0.5 b / conj(a) is
    anti-holomorphic in a, hence the conj (the identity for real a)."""
    ga = realdiv(g, op.inputs[0])
    return _binary_grads(op, multiply(negative(_conj(ga)), op.outputs[0]), multiply(0.5, ga))


def _rsqrt_grad_grad(op, g):
    """TF's _RsqrtGradGrad: (-1.5 * g * b * a^2, RsqrtGrad(a, g)) for a = rsqrt(x), b its gradient."""
    a, b = op.inputs
    return _binary_grads(op, multiply(multiply(multiply(-1.5, g), b), square(a)), rsqrt_grad(a, g))


def _reciprocal_grad_grad(op, g):
    """TF's _ReciprocalGradGrad: (g * -2 * b * a, ReciprocalGrad(a, g)) for a = 1 / x, b its gradient."""
    a, b = op.inputs
    return _binary_grads(op, multiply(multiply(multiply(g, -2.0), b), a), reciprocal_grad(a, g))


_binary_op("SqrtGrad", _sqrt_grad, _sqrt_grad_grad, FLOATS + COMPLEX, cost=4)
_binary_op("RsqrtGrad", _rsqrt_grad, _rsqrt_grad_grad, FLOATS, cost=4)
_binary_op("ReciprocalGrad", _reciprocal_grad, _reciprocal_grad_grad, FLOATS, cost=4)

# TF orders real numbers only (complex, bool and string are type errors); equality takes all
for _name, _fn, _types in [("Less", np.less, NUMBERS), ("LessEqual", np.less_equal, NUMBERS),
                           ("Greater", np.greater, NUMBERS), ("GreaterEqual", np.greater_equal, NUMBERS),
                           ("Equal", np.equal, ALL), ("NotEqual", np.not_equal, ALL)]:
    _binary_op(_name, _fn, NOT_DIFFERENTIABLE, _types, out_dtype=dtypes.bool_)
_binary_op("LogicalAnd", np.logical_and, NOT_DIFFERENTIABLE, BOOL)
_binary_op("LogicalOr", np.logical_or, NOT_DIFFERENTIABLE, BOOL)
_unary_op("LogicalNot", np.logical_not, NOT_DIFFERENTIABLE, BOOL)


def _is_eager(t):
    return isinstance(t, dispatch.eager_tensor)


_unary_op("Neg", np.negative, lambda op, g: [negative(g)], ARITH, infer_wrap=_no_unsigned, denormals="keep")
_unary_op("Abs", np.abs, lambda op, g: [multiply(g, sign(op.inputs[0]))], NUMBERS, infer_wrap=_no_unsigned,
          denormals="keep")   # (a sign bit: TF and compiled code keep a denormal)
_unary_op("Sign", np.sign, lambda op, g: [zeros_like(op.inputs[0])], NUMBERS + COMPLEX,   # complex: z / |z|
          infer_wrap=_no_unsigned)
_unary_op("Square", np.square,   # TF's _SquareGrad: g * 2 conj(x) (for complex x, as for Mul)
          lambda op, g: [multiply(g, multiply(_conj(op.inputs[0]), 2.0))], ARITH)
_unary_op("Sqrt", np.sqrt, lambda op, g: [sqrt_grad(op.outputs[0], g)], FLOATS + COMPLEX, cost=4)


# Real operands: TF's RsqrtGrad / ReciprocalGrad ops (their kernels' evaluation order and dy == 0
# guard). Complex: TF's math_grad.py rules multiply the upstream gradient by the conjugate of the
# derivative, so y is conjugated first.
def _rsqrt_gradient(op, g):
    y = op.outputs[0]
    if y.dtype not in COMPLEX:
        return [rsqrt_grad(y, g)]
    return [multiply(multiply(-0.5, multiply(g, _conj(y))), multiply(_conj(y), _conj(y)))]


def _reciprocal_gradient(op, g):
    y = op.outputs[0]
    if y.dtype not in COMPLEX:
        return [reciprocal_grad(y, g)]
    return [multiply(multiply(negative(g), _conj(y)), _conj(y))]


_unary_op("Rsqrt", lambda x: 1 / np.sqrt(x), _rsqrt_gradient, FLOATS + COMPLEX, cost=4)
_unary_op("Reciprocal", lambda x: _divide(np.ones((), x.dtype), x), _reciprocal_gradient, FLOATS + COMPLEX, cost=4)
_unary_op("Exp", np.exp, lambda op, g: [multiply(g, _conj(op.outputs[0]))], FLOATS + COMPLEX, cost=12)
_unary_op("Expm1", np.expm1, lambda op, g: [multiply(g, exp(_conj(op.inputs[0])))], FLOATS + COMPLEX, cost=12,
          denormals="pass_input")   # (TF and compiled code: expm1(x) is x for a denormal x)
_unary_op("Log", np.log, lambda op, g: [multiply(g, reciprocal(_conj(op.inputs[0])))], FLOATS + COMPLEX, cost=12)
_unary_op("Log1p", np.log1p,
          lambda op, g: [multiply(g, reciprocal(add(1.0, _conj(op.inputs[0]))))], FLOATS + COMPLEX, cost=12)
_unary_op("Sin", np.sin, lambda op, g: [multiply(g, cos(_conj(op.inputs[0])))], FLOATS + COMPLEX, cost=12)
_unary_op("Cos", np.cos, lambda op, g: [multiply(negative(g), sin(_conj(op.inputs[0])))], FLOATS + COMPLEX, cost=12)
_unary_op("Tan", np.tan,
          lambda op, g: [multiply(square(reciprocal(cos(_conj(op.inputs[0])))), g)], FLOATS + COMPLEX, cost=12,
          denormals="pass_input")
# TF's float32 tanh (Eigen's ptanh_float, the non-FMA build TF 2.21 ships) clamps |x| to
# 7.90738964f, where its rational approximation is exactly 1: from there on it is +-1, where the
# correctly rounded tanh reaches 1 only at 9.0109 (1 - 2^-24 rounds up). float16 / bfloat16 are
# float32's value rounded. Below the clamp the value is the correctly rounded one (TF's is within
# a few ulp of it).
TANH_ONE_FROM_FLOAT32 = 7.90738964080810547


def _tanh(x):
    if x.dtype != np.float32:
        return np.tanh(x)
    t = np.tanh(x.astype(np.float64)).astype(np.float32)
    return np.where(np.abs(x) >= np.float32(TANH_ONE_FROM_FLOAT32), np.copysign(np.float32(1), x), t)


_unary_op("Tanh", _tanh,
          lambda op, g: [multiply(g, subtract(1.0, multiply(_conj(op.outputs[0]), _conj(op.outputs[0]))))],
          FLOATS + COMPLEX, cost=12)
# Hyperbolic functions and their inverses: TF's math_grad.py rules (_SinhGrad ... _AtanhGrad),
# operand order kept. Denormals as TF 2.21's graph kernels (FTZ + DAZ): sinh / asinh return a
# denormal x itself, atanh flushes it (cosh / acosh make no denormal from one).
_unary_op("Sinh", np.sinh, lambda op, g: [multiply(g, cosh(_conj(op.inputs[0])))], FLOATS + COMPLEX, cost=12,
          denormals="pass_input")
_unary_op("Cosh", np.cosh, lambda op, g: [multiply(g, sinh(_conj(op.inputs[0])))], FLOATS + COMPLEX, cost=12)
_unary_op("Asinh", np.arcsinh, lambda op, g: [realdiv(g, cosh(_conj(op.outputs[0])))], FLOATS + COMPLEX,
          cost=12, denormals="pass_input")
_unary_op("Acosh", np.arccosh, lambda op, g: [realdiv(g, sinh(_conj(op.outputs[0])))], FLOATS + COMPLEX,
          cost=12)


def _atanh_gradient(op, g):
    """TF's _AtanhGrad: grad * reciprocal(1 - square(conj(x)))."""
    return [multiply(g, reciprocal(subtract(1.0, square(_conj(op.inputs[0])))))]


_unary_op("Atanh", np.arctanh, _atanh_gradient, FLOATS + COMPLEX, cost=12)


# Inverse trigonometric functions: TF's math_grad.py rules (_AsinGrad, _AcosGrad, _AtanGrad,
# _Atan2Grad), operations in their order. Denormals as TF 2.21's graph kernels (FTZ + DAZ),
# checked with real TF: asin returns a denormal x itself; atan does in float32 (Eigen's own
# kernel) but flushes it in float64; acos makes no denormal from one; atan2 reads denormals as
# zeros (float32's TF kernel returns y itself for atan2(denormal y, x > 0), and NaN for two
# denormals: not followed, README).
def _asin_gradient(op, g):
    """TF's _AsinGrad: grad * reciprocal(sqrt(1 - square(conj x)))."""
    x2 = square(_conj(op.inputs[0]))
    return [multiply(g, reciprocal(sqrt(subtract(1.0, x2))))]


def _acos_gradient(op, g):
    """TF's _AcosGrad: -grad * reciprocal(sqrt(1 - square(conj x)))."""
    x2 = square(_conj(op.inputs[0]))
    return [multiply(negative(g), reciprocal(sqrt(subtract(1.0, x2))))]


def _atan_gradient(op, g):
    """TF's _AtanGrad: grad * reciprocal(1 + square(conj x))."""
    return [multiply(g, reciprocal(add(1.0, square(_conj(op.inputs[0])))))]


_unary_op("Asin", np.arcsin, _asin_gradient, FLOATS + COMPLEX, cost=12, denormals="pass_input")
_unary_op("Acos", np.arccos, _acos_gradient, FLOATS + COMPLEX, cost=12)
_unary_op("Atan", np.arctan, _atan_gradient, FLOATS + COMPLEX, cost=12, denormals="pass_input_float32")


def _atan2(y, x):
    """np.arctan2; float16 / bfloat16 computed in float32 and rounded once, as TF's kernels."""
    if y.dtype.itemsize == 2:
        return np.arctan2(y.astype(np.float32), x.astype(np.float32)).astype(y.dtype)
    return np.arctan2(y, x)


def _atan2_gradient(op, g):
    """TF's _Atan2Grad: with grad_inv = grad / (square(y) + square(x)), x * grad_inv for y and
    -y * grad_inv for x, each summed down to its operand's shape."""
    y, x = op.inputs
    grad_inv = realdiv(g, add(square(y), square(x)))
    return _binary_grads(op, multiply(x, grad_inv), multiply(negative(y), grad_inv))


_binary_op("Atan2", _atan2, _atan2_gradient, FLOATS, cost=12)


def _sigmoid_gradient(op, g):
    y = _conj(op.outputs[0])
    if y.dtype in (dtypes.float16, dtypes.bfloat16):
        return [apply_op("SigmoidGrad", [y, g])]      # TF's kernel, rounding as it does (below)
    return [multiply(multiply(g, y), subtract(1.0, y))]


_unary_op("Sigmoid", _sigmoid_kernel, _sigmoid_gradient, FLOATS + COMPLEX, narrow_in_float32=False, cost=12)


_EIGEN_HALF_PACKET = 8    # Packet8h / Packet8bf: TF's pip builds (AVX) on any x86-64 host


def _sigmoid_grad(y, dy):
    """TF's SigmoidGrad kernel (Eigen scalar_sigmoid_gradient_op). Its packet path computes
    dy * (y * (1 - y)) and its scalar path (dy * y) * (1 - y); TF runs whole packets of 8 over
    the flat tensor and the scalar path on the last size % 8 elements. In float16 / bfloat16,
    which round every step, the two differ: this split matched TF 2.21 on every size tried
    (1..39, 100, 1001, 4097, 100003) where either formula alone missed up to a third of the
    elements. float32 / float64 (not used by the gradient rule; the lowering's formula) take
    the packet form everywhere."""
    y, dy = np.broadcast_arrays(y, dy)     # (a batched jacobian's rows share one y)
    one = y.dtype.type(1)
    packet = dy * (y * (one - y))
    if y.dtype.itemsize != 2 or y.size < 1:
        return packet
    scalar = (dy * y) * (one - y)
    k = y.size // _EIGEN_HALF_PACKET * _EIGEN_HALF_PACKET
    out = packet.reshape(-1).copy()
    out[k:] = scalar.reshape(-1)[k:]
    return out.reshape(y.shape)


def _sigmoid_grad_grad(op, g):
    """TF's _SigmoidGradGrad: (g dy - 2 g dy y, SigmoidGrad(y, g))."""
    y, dy = _conj(op.inputs[0]), _conj(op.inputs[1])
    gb = multiply(g, dy)
    return _binary_grads(op, subtract(gb, multiply(multiply(2.0, gb), y)), apply_op("SigmoidGrad", [y, g]))


register("SigmoidGrad", infer=broadcasting(FLOATS + COMPLEX), kernel=lambda attrs, y, dy: _sigmoid_grad(y, dy),
         grad=_sigmoid_grad_grad, kind="elementwise", cost=4)
_unary_op("Softplus", _softplus, lambda op, g: [multiply(g, sigmoid(op.inputs[0]))], narrow_in_float32=False,
          cost=12)


def _libm_in_double(fn):
    """numpy has no erf/erfc: the reference kernel is libm's (math.*) in float64,
    rounded to the input's type."""
    elementwise = np.frompyfunc(fn, 1, 1)
    return lambda x: np.asarray(elementwise(x.astype(np.float64)), np.float64).astype(x.dtype)


def _erf_family_grad(sign):
    """TF's _ErfGrad / _ErfcGrad: grad * (+-2/sqrt(pi)) * exp(-square(x)), in that order."""
    c = sign * 2 / math.sqrt(math.pi)
    return lambda op, g: [multiply(multiply(g, c), exp(negative(square(op.inputs[0]))))]


_unary_op("Erf", _libm_in_double(math.erf), _erf_family_grad(1))
_unary_op("Erfc", _libm_in_double(math.erfc), _erf_family_grad(-1))
def _unit_mask(x, on):
    """1 where ``on`` (a condition implying x > 0), else 0, in x's dtype -- as sign(where(on, x, 0)),
    whose derivative wrt x is zeros, not None: TF's ReluGrad / Relu6Grad / LeakyReluGrad
    gradients give zeros_like(features), so second derivatives through relu are connected."""
    return sign(where(on, x, zeros_like(x)))


# TF's ReluGrad / Relu6Grad multiply by the mask (relu_op_functor.h: gradients *
# (features > 0).cast<T>()), so an inf or NaN gradient where the unit is off gives NaN.
def _relu(x):
    """TF's Relu (packed code): x where x > 0 or NaN, else +0 (relu(-0.) is 0.)."""
    return np.where((x > 0) | (x != x), x, x.dtype.type(0))


_unary_op("Relu", _relu,
          lambda op, g: [multiply(g, _unit_mask(op.inputs[0], greater(op.inputs[0], 0)))], NUMBERS)
_unary_op("Relu6", lambda x: _minimum(_relu(x), x.dtype.type(6)),
          lambda op, g: [multiply(g, _unit_mask(op.inputs[0], logical_and(greater(op.inputs[0], 0),
                                                                          less(op.inputs[0], 6))))], NUMBERS)
def _exp_rounded_once(x):
    """exp(x) computed wider and rounded once to x's type. numpy's own float32 exp is off by an
    ulp for about half of all tiny x (exp(-1e-7) is 1 - 2^-24 where the nearest float32, and
    TF's, is 1 - 2^-23), which exp(x) - 1 magnifies into a factor of 2 (elu(-1e-7))."""
    wide = np.longdouble if x.dtype == np.float64 else np.float64
    with np.errstate(over="ignore", under="ignore"):
        return np.exp(x.astype(wide)).astype(x.dtype)


# TF's Elu kernel computes exp(x) - 1, not expm1 (elu(-1e-5) is -1.001358e-05 in float32), each step
# in the tensor's type (elu(-1e-5) is 0 in float16).
def _elu(x):
    return np.where(x < 0, _exp_rounded_once(x) - x.dtype.type(1), x)


# TF's Selu and SeluGrad kernels (relu_op_functor.h), constants in the tensor's type:
# selu(x) = scale_alpha * (exp(x) - 1) where x < 0, else scale * x; its gradient branches on the
# OUTPUT, g * (y + scale_alpha) where y < 0, else g * scale. A tiny negative x whose exp(x) - 1
# rounds to 0 has gradient scale there (selu(-1e-30): 1.0507 in TF), where a composite
# differentiated through where(x < 0, ...) gives scale_alpha (1.7581).
SELU_SCALE = 1.0507009873554804934193349852946
SELU_SCALE_ALPHA = 1.7580993408473768599402175208123


def _selu(x):
    t = x.dtype.type
    return np.where(x < 0, t(SELU_SCALE_ALPHA) * (_exp_rounded_once(x) - t(1)), x * t(SELU_SCALE))


def _selu_grad_kernel(g, y):
    t = y.dtype.type
    return np.where(y < 0, g * (y + t(SELU_SCALE_ALPHA)), g * t(SELU_SCALE))


# TF's Softsign is one op, x / (|x| + 1) (each step in the tensor's type, as Eigen's half does),
# with gradient SoftsignGrad = g / (|x| + 1)^2. Composed of RealDiv / Abs, the chain rule split
# that gradient into g / d - sign(x) * g * x / d^2 whose terms a later sum can cancel differently:
# softsign(x) / x at x = 1e-30 had gradient -w (as exact arithmetic) where TF gives 0 (seed 120030).
def _softsign(x):
    return x / (np.abs(x) + x.dtype.type(1))


def _softsign_grad(op, g):
    x = op.inputs[0]
    return [realdiv(g, square(add(abs(x), 1.0)))]


_unary_op("Softsign", _softsign, _softsign_grad, narrow_in_float32=False, cost=4)
_unary_op("Elu", _elu, lambda op, g: [elu_grad(g, op.outputs[0])], narrow_in_float32=False, cost=12,
          denormals="pass_input")
# TF's EluGrad(gradients, outputs) and its gradient _EluGradGrad: the derivative wrt the outputs
# is where(y < 0, g * gradients, 0), so a NaN upstream gradient where y >= 0 (or y is NaN)
# gives 0, not the NaN of 0 * NaN that differentiating g * (y + 1) would give.
_binary_op("EluGrad", lambda g, y: np.where(y < 0, g * (y + 1), g),
           lambda op, g: _binary_grads(op, elu_grad(g, op.inputs[1]),
                                       where(less(op.inputs[1], 0), multiply(g, op.inputs[0]), zeros_like(g))),
           FLOATS)
_unary_op("Selu", _selu, lambda op, g: [selu_grad(g, op.outputs[0])], narrow_in_float32=False, cost=12,
          denormals="flush")
# TF's _SeluGradGrad: like EluGrad's, where(y < 0, g * gradients, 0) wrt the outputs.
_binary_op("SeluGrad", _selu_grad_kernel,
           lambda op, g: _binary_grads(op, selu_grad(g, op.inputs[1]),
                                       where(less(op.inputs[1], 0), multiply(g, op.inputs[0]), zeros_like(g))),
           FLOATS)


def _leaky_relu_grad(op, g):
    """TF's LeakyReluGrad selects g or g * alpha; g * (m + (1 - m) * alpha) with the 0/1 mask m
    is the same number (g * 1, g * alpha) and keeps the second derivative wrt x connected (zeros)."""
    x = op.inputs[0]
    m = _unit_mask(x, greater(x, 0))
    return multiply(g, add(m, multiply(subtract(1.0, m), op.get_attr("alpha"))))


register("LeakyRelu", infer=unary(FLOATS),
         kernel=lambda attrs, x: np.where(x > 0, x, x * x.dtype.type(attrs["alpha"])),
         grad=lambda op, g: [_leaky_relu_grad(op, g)],
         kind="elementwise")
_unary_op("Identity", lambda x: x, lambda op, g: [g], ALL, identity=True)
# No gradient flows through StopGradient: TF marks it not differentiable.
_unary_op("StopGradient", lambda x: x, NOT_DIFFERENTIABLE, ALL, identity=True)


def _cast_infer(shapes, dts, attrs):
    src, dst = dts[0], attrs["DstT"]
    if src != dst and (src.is_string or dst.is_string):   # numpy would print numbers as text
        raise UnimplementedError(f"Cast {src.name} to {dst.name} is not supported")
    return [(shapes[0], dst)]


def _cast_grad(op, g):
    """TF's: between floating and complex types the gradient is cast back (complex -> real keeps
    the real part), else there is none."""
    src, dst = op.inputs[0].dtype, op.outputs[0].dtype
    if (src.is_floating or src.is_complex) and (dst.is_floating or dst.is_complex):
        return [cast(g, src)]
    return [None]


def _cast_kernel(attrs, x):
    dst = attrs["DstT"]
    if x.dtype.kind == "c" and not dst.is_complex:   # TF keeps the real part (numpy would warn)
        x = x.real
    return cast_values(x, np.dtype(dst.np))


# denormals="keep": the kernel flushes as TF does itself (ops/cast_kernel.py: float32 <->
# bfloat16 keeps them, every other cast flushes)
register("Cast", infer=_cast_infer, kernel=_cast_kernel, grad=_cast_grad,
         kind="elementwise", denormals="keep")


def _select_infer(shapes, dts, attrs):
    if dts[0] != dtypes.bool_:
        raise TypeError(f"condition of where must be bool, got {dts[0].name}")
    if dts[1] != dts[2]:
        raise TypeError(f"Input 'e' of 'SelectV2' Op has type {dts[2].name} that does not match type "
                        f"{dts[1].name} of argument 't'.")
    s = broadcast_dims(broadcast_dims(shapes[0], shapes[1], "'SelectV2'"), shapes[2], "'SelectV2'")
    return [(s, dts[1])]


def _select_grad(op, g):
    c, x, y = op.inputs
    zeros = zeros_like(g)
    return [None, reduce_to(where(c, g, zeros), x), reduce_to(where(c, zeros, g), y)]


register("SelectV2", denormals="keep",
         infer=_select_infer, kernel=lambda attrs, c, x, y: np.where(c, x, y), grad=_select_grad,
         kind="elementwise")


def _addn_infer(shapes, dts, attrs):
    check_same("AddN", dts)
    check_dtype("AddN", dts[0], ARITH)
    s = as_shape(shapes[0])
    for o in shapes[1:]:
        if not s.is_compatible_with(o):
            raise ValueError(f"Shapes must be equal for AddN: {shapes}")
        s = s.merge_with(o)
    return [(s.dims, dts[0])]


def _addn_kernel(attrs, *xs):
    # Left to right, as TF's AddN kernel sums.
    out = xs[0].copy()
    for x in xs[1:]:
        out += x
    return out


register("AddN", infer=_addn_infer, kernel=_addn_kernel,
         grad=lambda op, g: [g] * len(op.inputs), kind="elementwise")


# ---------------------------------------------------------------- public functions
def add(x, y, name=None):
    try:
        return _b("AddV2", x, y, name)
    except TypeError:
        _raise_add_kernel_mismatch(x, y)
        raise


def _raise_add_kernel_mismatch(x, y):
    """TF's add converts a non-tensor y with x's dtype only as a hint (AddV2 adds strings too):
    eagerly, a y that is not of x's dtype ('a', 1.5 to an int32 x) then reaches the kernel,
    an InvalidArgumentError; in a graph the op's type check gives the TypeError."""
    if not (x.__class__ in dispatch.eager_types and _registry.eager_now()) or is_tensorlike(y):
        return
    try:
        yt = convert_to_tensor(y)
    except (TypeError, ValueError):
        return
    if yt.dtype != x.dtype:
        raise InvalidArgumentError(f"cannot compute AddV2 as input #1(zero-based) was expected to be a "
                                   f"{x.dtype.name} tensor but is a {yt.dtype.name} tensor [Op:AddV2]") from None


def subtract(x, y, name=None):
    return _b("Sub", x, y, name)


def multiply(x, y, name=None):
    return _b("Mul", x, y, name)


def mul_no_nan(x, y, name=None):
    return _b("MulNoNan", x, y, name)


def multiply_no_nan(x, y, name=None):
    """``tf.math.multiply_no_nan``: as TF's, y is converted to x's dtype first, so a tensor of
    another float type (float16 with float32) is a ValueError, not an op type error."""
    x = convert_to_tensor(x)
    return mul_no_nan(x, convert_to_tensor(y, dtype=x.dtype), name)


def realdiv(x, y, name=None):
    return _b("RealDiv", x, y, name)


def truediv(x, y, name=None):
    x, y = convert_all([x, y])
    if x.dtype != y.dtype:
        raise TypeError(f"x and y must have the same dtype, got {x.dtype!r} != {y.dtype!r}.")
    if x.dtype.is_integer:   # TF's _TRUEDIV_TABLE: 8/16-bit ints divide in float32, wider ones in float64
        to = dtypes.float32 if x.dtype.size <= 2 else dtypes.float64
        x, y = cast(x, to), cast(y, to)
    elif x.dtype.is_bool:
        raise TypeError("Invalid dtype bool in __truediv__")
    return apply_op("RealDiv", [x, y], name=name or "truediv")


divide = truediv


def floordiv(x, y, name=None):
    return _b("FloorDiv", x, y, name or "floordiv")


floor_div = floordiv


def floormod(x, y, name=None):
    return _b("FloorMod", x, y, name or "floormod")


mod = floormod


def truncatediv(x, y, name=None):
    """``tf.truncatediv``: x / y rounded toward zero (C's integer division)."""
    return _b("TruncateDiv", x, y, name)


def truncatemod(x, y, name=None):
    """``tf.truncatemod``: the remainder of truncatediv, with x's sign (C's fmod / %)."""
    return _b("TruncateMod", x, y, name)


def pow(x, y, name=None):  # noqa: A001 - TF's name
    return _b("Pow", x, y, name or "Pow")


def squared_difference(x, y, name=None):
    return _b("SquaredDifference", x, y, name)


def maximum(x, y, name=None):
    return _b("Maximum", x, y, name)


def minimum(x, y, name=None):
    return _b("Minimum", x, y, name)


def sqrt_grad(y, dy, name=None):
    return _b("SqrtGrad", y, dy, name)


def rsqrt_grad(y, dy, name=None):
    return _b("RsqrtGrad", y, dy, name)


def reciprocal_grad(y, dy, name=None):
    return _b("ReciprocalGrad", y, dy, name)


def equal(x, y, name=None):
    return _b("Equal", x, y, name)


def not_equal(x, y, name=None):
    return _b("NotEqual", x, y, name)


def less(x, y, name=None):
    return _b("Less", x, y, name)


def less_equal(x, y, name=None):
    return _b("LessEqual", x, y, name)


def greater(x, y, name=None):
    return _b("Greater", x, y, name)


def greater_equal(x, y, name=None):
    return _b("GreaterEqual", x, y, name)


def logical_and(x, y, name=None):
    return _b("LogicalAnd", x, y, name)


def logical_or(x, y, name=None):
    return _b("LogicalOr", x, y, name)


def logical_not(x, name=None):
    return _u("LogicalNot", x, name)


def logical_xor(x, y, name="LogicalXor"):
    return logical_and(logical_or(x, y), logical_not(logical_and(x, y)), name=name)


def negative(x, name=None):
    return _u("Neg", x, name)


def abs(x, name=None):  # noqa: A001
    if x.__class__ not in dispatch.eager_types:   # a list of complex numbers is complex too
        (x,) = convert_all([x])
    if x.dtype in COMPLEX:   # |z|, a real tensor (TF's ComplexAbs, in complex_ops.py)
        return apply_op("ComplexAbs", [x], name=name or "ComplexAbs")
    return _u("Abs", x, name)


def sign(x, name=None):
    return _u("Sign", x, name)


def square(x, name=None):
    return _u("Square", x, name)


def sqrt(x, name=None):
    return _u("Sqrt", x, name)


def rsqrt(x, name=None):
    return _u("Rsqrt", x, name)


def reciprocal(x, name=None):
    return _u("Reciprocal", x, name)


def exp(x, name=None):
    return _u("Exp", x, name)


def expm1(x, name=None):
    return _u("Expm1", x, name)


def log(x, name=None):
    return _u("Log", x, name)


def log1p(x, name=None):
    return _u("Log1p", x, name)


def sin(x, name=None):
    return _u("Sin", x, name)


def cos(x, name=None):
    return _u("Cos", x, name)


def tan(x, name=None):
    return _u("Tan", x, name)


def tanh(x, name=None):
    return _u("Tanh", x, name)


def sinh(x, name=None):
    return _u("Sinh", x, name)


def cosh(x, name=None):
    return _u("Cosh", x, name)


def asinh(x, name=None):
    return _u("Asinh", x, name)


def acosh(x, name=None):
    return _u("Acosh", x, name)


def atanh(x, name=None):
    return _u("Atanh", x, name)


def asin(x, name=None):
    return _u("Asin", x, name)


def acos(x, name=None):
    return _u("Acos", x, name)


def atan(x, name=None):
    return _u("Atan", x, name)


def atan2(y, x, name=None):
    return _b("Atan2", y, x, name)


def erf(x, name=None):
    return _u("Erf", x, name)


def erfc(x, name=None):
    return _u("Erfc", x, name)


def sigmoid(x, name=None):
    return _u("Sigmoid", x, name)


def softplus(features, name=None):
    return _u("Softplus", features, name)


def relu(features, name=None):
    return _u("Relu", features, name)


def relu6(features, name=None):
    return _u("Relu6", features, name)


def softsign(features, name=None):
    return _u("Softsign", features, name)


def elu(features, name=None):
    return _u("Elu", features, name)


def elu_grad(gradients, outputs, name=None):
    return _b("EluGrad", gradients, outputs, name)


def selu(features, name=None):
    return _u("Selu", features, name)


def selu_grad(gradients, outputs, name=None):
    return _b("SeluGrad", gradients, outputs, name)


def leaky_relu(features, alpha=0.2, name=None):
    (x,) = convert_all([features])
    if x.dtype.is_integer:      # as TF's nn_ops.leaky_relu
        x = cast(x, dtypes.float32)
    # TF's alpha is a float attr, float32: leaky_relu(-2.5) in float64 is -0.5000000074505806
    return apply_op("LeakyRelu", [x], {"alpha": float(np.float32(alpha))}, name=name or "LeakyRelu")


def identity(input, name=None):  # noqa: A002
    return _u("Identity", input, name)


def stop_gradient(input, name=None):  # noqa: A002
    return _u("StopGradient", input, name)


def cast(x, dtype, name=None):
    dtype = dtypes.as_dtype(dtype)
    (x,) = convert_all([x])
    if x.dtype == dtype:
        return x
    return apply_op("Cast", [x], {"DstT": dtype}, name=name or "Cast")


def where(condition, x=None, y=None, name=None):
    if x is None and y is None:   # int64 coordinates of the true (non-zero) elements (Where, in mask_ops.py)
        (c,) = convert_all([condition])
        return apply_op("Where", [c if c.dtype == dtypes.bool_ else not_equal(c, 0)], name=name or "Where")
    if x is None or y is None:
        raise ValueError("x and y must both be non-None or both be None.")
    g = graph_of([condition, x, y])
    (c,) = convert_all([condition], dtype=dtypes.bool_, graph=g)
    x, y = convert_all([x, y], graph=g)
    return apply_op("SelectV2", [c, x, y], name=name or "SelectV2")


def add_n(inputs, name=None):
    if not isinstance(inputs, (list, tuple)) or not inputs:
        raise ValueError("inputs must be a non-empty list of tensors with the same shape and dtype.")
    ts = convert_all(list(inputs))
    if len(ts) == 1:
        return identity(ts[0], name=name) if name else ts[0]
    return apply_op("AddN", ts, name=name or "AddN")


def clip_by_value(t, clip_value_min, clip_value_max, name=None):
    if isinstance(t, dispatch.indexed_slices):    # as TF: the values clipped, still slices
        return dispatch.indexed_slices(clip_by_value(t.values, clip_value_min, clip_value_max, name), t.indices,
                                       t.dense_shape)
    (t,) = convert_all([t])
    t_min = minimum(t, clip_value_max)
    # As TF: the bounds may broadcast against t but must not change its shape.
    if not t.shape.is_compatible_with(t_min.shape):
        raise ValueError(f"Shapes {t.shape} and {t_min.shape} are incompatible: clip_by_value's bounds "
                         "must not broadcast the clipped tensor to a larger shape.")
    t_max = maximum(t_min, clip_value_min, name=name or "clip_by_value")
    if not t.shape.is_compatible_with(t_max.shape):
        raise ValueError(f"Shapes {t.shape} and {t_max.shape} are incompatible: clip_by_value's bounds "
                         "must not broadcast the clipped tensor to a larger shape.")
    return t_max


def zeros_like(input, dtype=None, name=None):  # noqa: A002
    (x,) = convert_all([input])
    out = apply_op("ZerosLike", [x], name=name or "zeros_like")
    return out if dtype is None else cast(out, dtype)


def ones_like(input, dtype=None, name=None):  # noqa: A002
    (x,) = convert_all([input])
    out = apply_op("OnesLike", [x], name=name or "ones_like")
    return out if dtype is None else cast(out, dtype)


register("ZerosLike", denormals="keep", infer=unary(ALL),
         kernel=lambda attrs, x: np.full(x.shape, b"", object) if x.dtype == object else np.zeros_like(x),
         grad=lambda op, g: [None], kind="elementwise", shape_only=(0,), cheap=True)
register("OnesLike", denormals="keep",
         infer=unary(ALL), kernel=lambda attrs, x: np.ones_like(x), grad=lambda op, g: [None],
         kind="elementwise", shape_only=(0,), cheap=True)


# ---------------------------------------------------------------- rounding and float classification
# TF defines no gradient for these (tf.GradientTape gives None), nor for IsNan & co.
_unary_op("Floor", np.floor, NOT_DIFFERENTIABLE)
_unary_op("Ceil", np.ceil, NOT_DIFFERENTIABLE)
# TF's Round is round-half-to-even (banker's rounding), like np.rint; integers pass through.
_unary_op("Round", lambda x: np.rint(x) if x.dtype in dtypes.FLOAT_NP else x.copy(), NOT_DIFFERENTIABLE, NUMBERS)
for _name, _fn in [("IsNan", np.isnan), ("IsInf", np.isinf), ("IsFinite", np.isfinite)]:
    register(_name, infer=unary(FLOATS, out_dtype=dtypes.bool_), kernel=lambda attrs, x, _fn=_fn: _fn(x),
             grad=NOT_DIFFERENTIABLE, kind="elementwise")


def floor(x, name=None):
    return _u("Floor", x, name)


def ceil(x, name=None):
    return _u("Ceil", x, name)


def round(x, name=None):  # noqa: A001 - TF's name
    return _u("Round", x, name)


def is_nan(x, name=None):
    return _u("IsNan", x, name)


def is_inf(x, name=None):
    return _u("IsInf", x, name)


def is_finite(x, name=None):
    return _u("IsFinite", x, name)


# ---------------------------------------------------------------- divide_no_nan (DivNoNan, registered above)
def divide_no_nan(x, y, name=None):
    """``tf.math.divide_no_nan``: 0 where y == 0 (even if x is inf or NaN), else x / y.
    Integers are divided as truediv does (float32 or float64), then TF's DivNoNan op."""
    x, y = convert_all([x, y])
    if x.dtype != y.dtype:
        raise TypeError(f"x and y must have the same dtype, got {x.dtype!r} != {y.dtype!r}.")
    if x.dtype.is_integer:   # TF's _TRUEDIV_TABLE: 8/16-bit ints divide in float32, wider ones in float64
        to = dtypes.float32 if x.dtype.size <= 2 else dtypes.float64
        x, y = cast(x, to), cast(y, to)
    elif not (x.dtype.is_floating or x.dtype.is_complex):
        raise TypeError(f"Value passed to parameter 'x' has DataType {x.dtype.name} not in list of allowed values: "
                        "float16, float32, float64, complex64, complex128")
    return apply_op("DivNoNan", [x, y], name=name or "div_no_nan")
