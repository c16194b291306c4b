"""Elementwise lowerings: {op type: fn(kb, node, xs, W) -> value}.

``xs`` are the input values already loaded/generated at the (broadcast)
element index, as scalars (W == 1) or <W x T> vectors; None for shape-only
inputs.  Semantics follow the numpy reference kernels, including NaN/inf
propagation (no fast-math flags anywhere).
"""
from .. import dtypes
from ..ops.math_ops import SELU_SCALE, SELU_SCALE_ALPHA, TANH_ONE_FROM_FLOAT32
from . import vecmath
from .lower_list_checks import list_check
from .irutil import ERR_INT_DIV_ZERO, ERR_NEG_POW, ERR_TRUNCATE_DIV_ZERO, const, intrinsic, reg_type, ty_suffix, vec_type


def _dt(node, k=0):
    return node.outputs[k][1]


def _is_float(dt):
    return dt.is_floating


def _in_dt(kb, node, k):
    return kb.dtype(node.inputs[k])


def _vm(kb, name, args):
    return vecmath.emit(kb.b, name, args, fma=kb.target.has_fma, vector_bits=kb.target.vector_bits)


def _isnan(kb, x):
    return kb.b.fcmp_unordered("uno", x, x)


def _binary_arith(fop, iop):
    def f(kb, node, xs, W):
        x, y = xs
        if _is_float(_dt(node)):
            return getattr(kb.b, fop)(x, y)
        return getattr(kb.b, iop)(x, y)
    return f


def _safe_divisor(kb, y, W, dt, code=ERR_INT_DIV_ZERO):
    """y with 0 (error ``code``) and -1 (overflow INT_MIN / -1 is UB) replaced by 1."""
    b = kb.b
    zero, one, mone = const(dt, 0, W), const(dt, 1, W), const(dt, -1, W)
    is0 = b.icmp_signed("==", y, zero)
    kb.set_error(is0, code)
    bad = b.or_(is0, b.icmp_signed("==", y, mone))
    return b.select(bad, one, y), b.icmp_signed("==", y, mone)


def _floordiv(kb, node, xs, W):
    x, y = xs
    b = kb.b
    dt = _dt(node)
    if _is_float(dt):
        return vecmath.emit_rounding(b, "floor", b.fdiv(x, y), kb.target.has_round)
    ys, is_m1 = _safe_divisor(kb, y, W, dt)
    q = b.sdiv(x, ys)
    r = b.srem(x, ys)
    zero = const(dt, 0, W)
    adj = b.and_(b.icmp_signed("!=", r, zero), b.icmp_signed("<", b.xor(r, ys), zero))
    q = b.sub(q, b.zext(adj, q.type))
    return b.select(is_m1, b.sub(zero, x), q)


def _floormod(kb, node, xs, W):
    x, y = xs
    b = kb.b
    dt = _dt(node)
    if _is_float(dt):
        r = b.frem(x, y)
        zero = const(dt, 0, W)
        fix = b.and_(b.fcmp_ordered("!=", r, zero),
                     b.xor(b.fcmp_ordered("<", r, zero), b.fcmp_ordered("<", y, zero)))
        return b.select(fix, b.fadd(r, y), r)     # a zero keeps frem's sign (x's), as in TF
    ys, is_m1 = _safe_divisor(kb, y, W, dt)
    r = b.srem(x, ys)
    zero = const(dt, 0, W)
    adj = b.and_(b.icmp_signed("!=", r, zero), b.icmp_signed("<", b.xor(r, ys), zero))
    r = b.select(adj, b.add(r, ys), r)
    return b.select(is_m1, zero, r)


def _truncatediv(kb, node, xs, W):
    """C's division (toward zero); floats trunc(x / y); INT_MIN / -1 wraps to INT_MIN."""
    x, y = xs
    b = kb.b
    dt = _dt(node)
    if _is_float(dt):
        return vecmath.emit_rounding(b, "trunc", b.fdiv(x, y), kb.target.has_round)
    ys, is_m1 = _safe_divisor(kb, y, W, dt, ERR_TRUNCATE_DIV_ZERO)
    return b.select(is_m1, b.sub(const(dt, 0, W), x), b.sdiv(x, ys))


def _truncatemod(kb, node, xs, W):
    """C's fmod / % (x's sign); x % -1 is 0."""
    x, y = xs
    b = kb.b
    dt = _dt(node)
    if _is_float(dt):
        return b.frem(x, y)
    ys, is_m1 = _safe_divisor(kb, y, W, dt, ERR_TRUNCATE_DIV_ZERO)
    return b.select(is_m1, const(dt, 0, W), b.srem(x, ys))


def _pow(kb, node, xs, W):
    x, y = xs
    dt = _dt(node)
    if _is_float(dt):
        return _vm(kb, "pow", [x, y])
    b = kb.b
    zero, one = const(dt, 0, W), const(dt, 1, W)
    kb.set_error(b.icmp_signed("<", y, zero), ERR_NEG_POW)
    result = one
    base = x
    e = y
    for _ in range(dt.size * 8 - 1):
        bit = b.icmp_signed("!=", b.and_(e, one), zero)
        result = b.select(bit, b.mul(result, base), result)
        base = b.mul(base, base)
        e = b.ashr(e, one)
    return result


def _bitwise(op):
    """BitwiseAnd / BitwiseOr / BitwiseXor (integers only, as TF's op defs)."""
    def f(kb, node, xs, W):
        return getattr(kb.b, op)(xs[0], xs[1])
    return f


def _invert(kb, node, xs, W):
    return kb.b.xor(xs[0], const(_dt(node), -1, W))


def _shift_amount(kb, dt, y, W):
    """TF's shift functors' clamp of y to [0, bits - 1]: an LLVM shift by the bit width or
    more is poison, so the clamped amount is what is shifted by (no undefined behaviour)."""
    b = kb.b
    top = const(dt, dt.size * 8 - 1, W)
    cmp = b.icmp_unsigned if dt.is_unsigned else b.icmp_signed
    y = b.select(cmp(">", y, top), top, y)
    if not dt.is_unsigned:
        y = b.select(b.icmp_signed("<", y, const(dt, 0, W)), const(dt, 0, W), y)
    return y


def _left_shift(kb, node, xs, W):
    """x << clamp(y): LLVM's shl wraps (no nsw / nuw), as TF's shift of the unsigned type."""
    x, y = xs
    return kb.b.shl(x, _shift_amount(kb, _dt(node), y, W))


def _right_shift(kb, node, xs, W):
    """x >> clamp(y): arithmetic for signed types, logical for unsigned ones."""
    x, y = xs
    dt = _dt(node)
    sh = kb.b.lshr if dt.is_unsigned else kb.b.ashr
    return sh(x, _shift_amount(kb, dt, y, W))


def _atan2(kb, node, xs, W):
    """atan2(y, x) (floats only, as TF's op)."""
    return _vm(kb, "atan2", list(xs))


def _maximum(kb, node, xs, W):
    """x where x > y or x is NaN, else y: a tie (-0. vs 0.) gives the second operand, as TF's
    packed code (ops/math_ops.py)."""
    x, y = xs
    b = kb.b
    if _is_float(_dt(node)):
        return b.select(b.or_(b.fcmp_ordered(">", x, y), _isnan(kb, x)), x, y)
    return b.select(b.icmp_signed(">=", x, y), x, y)


def _minimum(kb, node, xs, W):
    x, y = xs
    b = kb.b
    if _is_float(_dt(node)):
        return b.select(b.or_(b.fcmp_ordered("<", x, y), _isnan(kb, x)), x, y)
    return b.select(b.icmp_signed("<=", x, y), x, y)


def _where_zero(kb, node, cond_val, val, W):
    zero = const(_dt(node), 0, W)
    return kb.b.select(cond_val, zero, val)


def _mul_no_nan(kb, node, xs, W):
    x, y = xs
    b = kb.b
    return _where_zero(kb, node, b.fcmp_ordered("==", y, const(_dt(node), 0, W)), b.fmul(x, y), W)


def _div_no_nan(kb, node, xs, W):
    """TF's DivNoNan: +0 where y == 0 (also -0), else x / y (the numpy kernel in ops/math_ops.py)."""
    x, y = xs
    b = kb.b
    return _where_zero(kb, node, b.fcmp_ordered("==", y, const(_dt(node), 0, W)), b.fdiv(x, y), W)


def _x_times(fn):
    """TF's Xlogy / Xdivy / Xlog1py: +0 where x == 0 (whatever y is, NaN too), else
    x * log(y), x / y, x * log1p(y) (the numpy kernels in ops/xlogy_ops.py)."""
    def f(kb, node, xs, W):
        x, y = xs
        b = kb.b
        v = b.fdiv(x, y) if fn == "div" else b.fmul(x, _vm(kb, fn, [y]))
        return _where_zero(kb, node, b.fcmp_ordered("==", x, const(_dt(node), 0, W)), v, W)
    return f


def _sigmoid_grad(kb, node, xs, W):
    """TF's SigmoidGrad, dy * (y * (1 - y)) (its packet form; ops/math_ops.py)."""
    y, dy = xs
    b = kb.b
    return b.fmul(dy, b.fmul(y, b.fsub(const(_dt(node), 1, W), y)))


def _sqrt_grad(kb, node, xs, W):
    y, dy = xs
    b = kb.b
    dt = _dt(node)
    v = b.fdiv(b.fmul(const(dt, 0.5, W), dy), y)
    return _where_zero(kb, node, b.fcmp_ordered("==", dy, const(dt, 0, W)), v, W)


def _rsqrt_grad(kb, node, xs, W):
    """TF's RsqrtGrad: 0 where dy == 0, else (-0.5 * (dy * y)) * (y * y) (ops/math_ops.py)."""
    y, dy = xs
    b = kb.b
    dt = _dt(node)
    v = b.fmul(b.fmul(const(dt, -0.5, W), b.fmul(dy, y)), b.fmul(y, y))
    return _where_zero(kb, node, b.fcmp_ordered("==", dy, const(dt, 0, W)), v, W)


def _reciprocal_grad(kb, node, xs, W):
    """TF's ReciprocalGrad: 0 where dy == 0, else (-y * y) * dy (ops/math_ops.py)."""
    y, dy = xs
    b = kb.b
    dt = _dt(node)
    v = b.fmul(b.fmul(b.fneg(y), y), dy)
    return _where_zero(kb, node, b.fcmp_ordered("==", dy, const(dt, 0, W)), v, W)


def _elu_grad(kb, node, xs, W):
    """TF's EluGrad(g, y): g * (y + 1) where y < 0, else g."""
    g, y = xs
    b = kb.b
    dt = _dt(node)
    return b.select(b.fcmp_ordered("<", y, const(dt, 0, W)), b.fmul(g, b.fadd(y, const(dt, 1, W))), g)


def _sqdiff(kb, node, xs, W):
    x, y = xs
    b = kb.b
    if _is_float(_dt(node)):
        d = b.fsub(x, y)
        return b.fmul(d, d)
    d = b.sub(x, y)
    return b.mul(d, d)


_FCMP = {"Less": "<", "LessEqual": "<=", "Greater": ">", "GreaterEqual": ">=", "Equal": "==",
         "NotEqual": "!="}


def _cmp(name):
    op = _FCMP[name]

    def f(kb, node, xs, W):
        x, y = xs
        dt = _in_dt(kb, node, 0)
        if _is_float(dt):
            if op == "!=":
                return kb.b.fcmp_unordered(op, x, y)
            return kb.b.fcmp_ordered(op, x, y)
        if dt is dtypes.bool_:
            return kb.b.icmp_unsigned(op, x, y)
        return kb.b.icmp_signed(op, x, y)
    return f


def _neg(kb, node, xs, W):
    (x,) = xs
    if _is_float(_dt(node)):
        return kb.b.fneg(x)
    return kb.b.sub(const(_dt(node), 0, W), x)


def _abs(kb, node, xs, W):
    (x,) = xs
    if _is_float(_dt(node)):
        return intrinsic(kb.b, f"llvm.fabs.{ty_suffix(x.type)}", x.type, [x])
    b = kb.b
    return b.select(b.icmp_signed("<", x, const(_dt(node), 0, W)), b.sub(const(_dt(node), 0, W), x), x)


def _sign(kb, node, xs, W):
    (x,) = xs
    b = kb.b
    dt = _dt(node)
    zero, one, mone = const(dt, 0, W), const(dt, 1, W), const(dt, -1, W)
    if _is_float(dt):
        # sign(+-0) is +0 (TF, numpy); NaN stays NaN
        rest = b.select(b.fcmp_unordered("uno", x, x), x, zero)
        return b.select(b.fcmp_ordered(">", x, zero), one, b.select(b.fcmp_ordered("<", x, zero), mone, rest))
    return b.select(b.icmp_signed(">", x, zero), one, b.select(b.icmp_signed("<", x, zero), mone, zero))


def _square(kb, node, xs, W):
    (x,) = xs
    return kb.b.fmul(x, x) if _is_float(_dt(node)) else kb.b.mul(x, x)


# Ops whose scalar form branches (trig: a call of the exact large-argument
# reduction sits behind a rare branch).  LLVM's loop vectoriser widens that call
# to a masked vector variant called once per vector (vecmath), which is still
# 2.5-3x slower than the explicit vector form: kernel.py vectorises a nest whose
# innermost run is too short for a vector across the run before it instead
# when these occur.
SCALAR_FORM_BRANCHES = frozenset({"Sin", "Cos", "Tan", "Lgamma", "Digamma", "Trigamma", "Tetragamma"})   # (the last: codegen/lower_gamma.py)


def _unary_vm(name):
    def f(kb, node, xs, W):
        return _vm(kb, name, xs)
    return f


def _tanh(kb, node, xs, W):
    """vecmath's tanh, +-1 from TF's float32 clamp on (ops/math_ops.py: TANH_ONE_FROM_FLOAT32)."""
    t = _vm(kb, "tanh", xs)
    if _dt(node) is not dtypes.float32:
        return t
    (x,) = xs
    b = kb.b
    a = intrinsic(b, f"llvm.fabs.{ty_suffix(x.type)}", x.type, [x])
    one = intrinsic(b, f"llvm.copysign.{ty_suffix(x.type)}", x.type, [const(dtypes.float32, 1, W), x])
    return b.select(b.fcmp_ordered(">=", a, const(dtypes.float32, TANH_ONE_FROM_FLOAT32, W)), one, t)


def _reciprocal(kb, node, xs, W):
    return kb.b.fdiv(const(_dt(node), 1, W), xs[0])


def _relu(kb, node, xs, W):
    """TF's Relu: x where x > 0 or NaN, else +0 (not max(x, 0): relu(-0.) is 0.)."""
    (x,) = xs
    b = kb.b
    zero = const(_dt(node), 0, W)
    if _is_float(_dt(node)):
        return b.select(b.fcmp_unordered(">", x, zero), x, zero)    # unordered: NaN passes
    return b.select(b.icmp_signed(">", x, zero), x, zero)


def _relu6(kb, node, xs, W):
    return _minimum(kb, node, [_relu(kb, node, xs, W), const(_dt(node), 6, W)], W)


def _elu(kb, node, xs, W):
    """exp(x) - 1 below 0, as TF's Elu kernel computes it (not expm1: ops/math_ops.py)."""
    (x,) = xs
    b = kb.b
    dt = _dt(node)
    return b.select(b.fcmp_ordered("<", x, const(dt, 0, W)), b.fsub(_vm(kb, "exp", [x]), const(dt, 1, W)), x)


def _selu(kb, node, xs, W):
    """TF's Selu kernel: scale_alpha * (exp(x) - 1) below 0, else scale * x (ops/math_ops.py)."""
    (x,) = xs
    b = kb.b
    dt = _dt(node)
    neg = b.fmul(const(dt, SELU_SCALE_ALPHA, W), b.fsub(_vm(kb, "exp", [x]), const(dt, 1, W)))
    return b.select(b.fcmp_ordered("<", x, const(dt, 0, W)), neg, b.fmul(x, const(dt, SELU_SCALE, W)))


def _selu_grad(kb, node, xs, W):
    """TF's SeluGrad(g, y): g * (y + scale_alpha) where y < 0, else g * scale."""
    g, y = xs
    b = kb.b
    dt = _dt(node)
    return b.select(b.fcmp_ordered("<", y, const(dt, 0, W)), b.fmul(g, b.fadd(y, const(dt, SELU_SCALE_ALPHA, W))),
                    b.fmul(g, const(dt, SELU_SCALE, W)))


def _softsign(kb, node, xs, W):
    """TF's Softsign kernel: x / (|x| + 1)."""
    (x,) = xs
    b = kb.b
    a = intrinsic(b, f"llvm.fabs.{ty_suffix(x.type)}", x.type, [x])
    return b.fdiv(x, b.fadd(a, const(_dt(node), 1, W)))


def _leaky_relu(kb, node, xs, W):
    (x,) = xs
    b = kb.b
    dt = _dt(node)
    alpha = const(dt, dt.np.type(node.attrs["alpha"]), W)
    return b.select(b.fcmp_ordered(">", x, const(dt, 0, W)), x, b.fmul(x, alpha))


def _identity(kb, node, xs, W):
    return xs[0]


def _cast(kb, node, xs, W):
    (x,) = xs
    src, dst = _in_dt(kb, node, 0), _dt(node)
    b = kb.b
    if src is dst:
        return x
    ty = vec_type(reg_type(dst), W)
    if dst is dtypes.bool_:
        if _is_float(src):
            return b.fcmp_unordered("!=", x, const(src, 0, W))
        return b.icmp_unsigned("!=", x, const(src, 0, W))
    if src is dtypes.bool_:
        return b.uitofp(x, ty) if _is_float(dst) else b.zext(x, ty)
    if _is_float(src) and _is_float(dst):
        return b.fpext(x, ty) if dst.size > src.size else b.fptrunc(x, ty)
    if _is_float(src):
        return _fptosi_numpy(kb, x, src, dst, ty, W)
    if _is_float(dst):
        return b.sitofp(x, ty)
    return b.sext(x, ty) if dst.size > src.size else b.trunc(x, ty)


def _fptosi_numpy(kb, x, src, dst, ty, W):
    """float -> signed int without UB: plain fptosi is poison for NaN and
    out-of-range values, so use the saturating intrinsic, then give what
    numpy gives on x86 (cvttss2si/cvttsd2si): INT_MIN for NaN, +-inf and any
    value whose truncation does not fit (both directions)."""
    b = kb.b
    bits = dst.size * 8
    sat = intrinsic(kb.b, f"llvm.fptosi.sat.{ty_suffix(ty)}.{ty_suffix(x.type)}", ty, [x])
    hi = const(src, float(2 ** (bits - 1)), W)           # exact in float32/float64
    ok = b.fcmp_ordered("<", x, hi)                           # false for NaN and too large
    return b.select(ok, sat, const(dst, -(2 ** (bits - 1)), W))


def _select(kb, node, xs, W):
    c, x, y = xs
    return kb.b.select(c, x, y)


def _addn(kb, node, xs, W):
    acc = xs[0]
    f = _is_float(_dt(node))
    for x in xs[1:]:
        acc = kb.b.fadd(acc, x) if f else kb.b.add(acc, x)
    return acc


def _const_like(value):
    def f(kb, node, xs, W):
        return const(_dt(node), value, W)
    return f


def _logical(op):
    def f(kb, node, xs, W):
        if op == "not":
            return kb.b.xor(xs[0], const(dtypes.bool_, 1, W))
        return getattr(kb.b, op)(xs[0], xs[1])
    return f


def _realdiv(kb, node, xs, W):
    return kb.b.fdiv(xs[0], xs[1])


def _rounding(name):
    """floor / ceil / rint (round half to even, as TF's Round): SSE4.1's instruction,
    or inline code on the baseline (vecmath.emit_rounding); integer inputs (Round
    only) pass through."""
    def f(kb, node, xs, W):
        (x,) = xs
        if not _is_float(_dt(node)):
            return x
        return vecmath.emit_rounding(kb.b, name, x, kb.target.has_round)
    return f


def _isinf(kb, node, xs, W):
    (x,) = xs
    a = intrinsic(kb.b, f"llvm.fabs.{ty_suffix(x.type)}", x.type, [x])
    return kb.b.fcmp_ordered("==", a, const(_in_dt(kb, node, 0), float("inf"), W))


def _isfinite(kb, node, xs, W):
    (x,) = xs
    a = intrinsic(kb.b, f"llvm.fabs.{ty_suffix(x.type)}", x.type, [x])
    return kb.b.fcmp_ordered("<", a, const(_in_dt(kb, node, 0), float("inf"), W))


ELEMENTWISE = {
    "ListCheck": list_check,    # (its error codes and message words: lower_list_checks.py)
    "AddV2": _binary_arith("fadd", "add"),
    "Sub": _binary_arith("fsub", "sub"),
    "Mul": _binary_arith("fmul", "mul"),
    "RealDiv": _realdiv,
    "FloorDiv": _floordiv,
    "FloorMod": _floormod,
    "TruncateDiv": _truncatediv,
    "TruncateMod": _truncatemod,
    "Pow": _pow,
    "BitwiseAnd": _bitwise("and_"),
    "BitwiseOr": _bitwise("or_"),
    "BitwiseXor": _bitwise("xor"),
    "Invert": _invert,
    "LeftShift": _left_shift,
    "RightShift": _right_shift,
    "Maximum": _maximum,
    "Minimum": _minimum,
    "MulNoNan": _mul_no_nan,
    "DivNoNan": _div_no_nan,
    "Xlogy": _x_times("log"),
    "Xdivy": _x_times("div"),
    "Xlog1py": _x_times("log1p"),
    "SigmoidGrad": _sigmoid_grad,
    "SqrtGrad": _sqrt_grad,
    "RsqrtGrad": _rsqrt_grad,
    "ReciprocalGrad": _reciprocal_grad,
    "EluGrad": _elu_grad,
    "SeluGrad": _selu_grad,
    "SquaredDifference": _sqdiff,
    "LogicalAnd": _logical("and_"),
    "LogicalOr": _logical("or_"),
    "LogicalNot": _logical("not"),
    "Neg": _neg,
    "Abs": _abs,
    "Sign": _sign,
    "Square": _square,
    "Sqrt": _unary_vm("sqrt"),
    "Rsqrt": _unary_vm("rsqrt"),
    "Reciprocal": _reciprocal,
    "Exp": _unary_vm("exp"),
    "Expm1": _unary_vm("expm1"),
    "Log": _unary_vm("log"),
    "Log1p": _unary_vm("log1p"),
    "Sin": _unary_vm("sin"),
    "Cos": _unary_vm("cos"),
    "Tan": _unary_vm("tan"),
    "Tanh": _tanh,
    "Sinh": _unary_vm("sinh"),
    "Cosh": _unary_vm("cosh"),
    "Asinh": _unary_vm("asinh"),
    "Acosh": _unary_vm("acosh"),
    "Atanh": _unary_vm("atanh"),
    "Asin": _unary_vm("asin"),
    "Acos": _unary_vm("acos"),
    "Atan": _unary_vm("atan"),
    "Atan2": _atan2,
    "Erf": _unary_vm("erf"),
    "Erfc": _unary_vm("erfc"),
    "Sigmoid": _unary_vm("sigmoid"),
    "Softplus": _unary_vm("softplus"),
    "Relu": _relu,
    "Relu6": _relu6,
    "Elu": _elu,
    "Selu": _selu,
    "Softsign": _softsign,
    "LeakyRelu": _leaky_relu,
    "Identity": _identity,
    "StopGradient": _identity,
    "PlaceholderWithDefault": _identity,
    "Cast": _cast,
    "SelectV2": _select,
    "AddN": _addn,
    "ZerosLike": _const_like(0),
    "OnesLike": _const_like(1),
    "Fill": _identity,
    "BroadcastTo": _identity,
    "BroadcastToShapeOf": _identity,
    "Floor": _rounding("floor"),
    "Ceil": _rounding("ceil"),
    "Round": _rounding("rint"),
    "IsNan": lambda kb, node, xs, W: _isnan(kb, xs[0]),
    "IsInf": _isinf,
    "IsFinite": _isfinite,
}
for _n in _FCMP:
    ELEMENTWISE[_n] = _cmp(_n)
