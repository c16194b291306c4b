"""Lgamma / Digamma / Trigamma / Tetragamma and Erfinv / Ndtri lowered: ops/gamma_ops.py's and
ops/erfinv_ops.py's functions (the reference kernels' own code) run over LLVM IR values instead
of numpy arrays, in double precision (float32 lanes widened, the result rounded once), with
vecmath's log / log1p / sin / cos / exp / sqrt / erf / erfc and floor."""
from .. import dtypes
from ..ops.erfinv_ops import erfinv_of, ndtri_of
from ..ops.gamma_ops import digamma_of, lgamma_of, tetragamma_of, trigamma_of
from . import vecmath
from .irutil import const, intrinsic, ty_suffix, vec_type


class _IRMath:
    """ops/gamma_ops.NumpyMath's interface over double (or <W x double>) IR values."""

    def __init__(self, kb, W):
        self.kb, self.b, self.W = kb, kb.b, W

    def c(self, v):
        return const(dtypes.float64, v, self.W)

    def add(self, x, y):
        return self.b.fadd(x, y)

    def sub(self, x, y):
        return self.b.fsub(x, y)

    def mul(self, x, y):
        return self.b.fmul(x, y)

    def div(self, x, y):
        return self.b.fdiv(x, y)

    def neg(self, x):
        return self.b.fneg(x)

    def abs(self, x):
        return intrinsic(self.b, f"llvm.fabs.{ty_suffix(x.type)}", x.type, [x])

    def floor(self, x):
        return vecmath.emit_rounding(self.b, "floor", x, self.kb.target.has_round)

    def _vm(self, name, x):
        return vecmath.emit(self.b, name, [x], fma=self.kb.target.has_fma, vector_bits=self.kb.target.vector_bits)

    def log(self, x):
        return self._vm("log", x)

    def log1p(self, x):
        return self._vm("log1p", x)

    def sin(self, x):
        return self._vm("sin", x)

    def cos(self, x):
        return self._vm("cos", x)

    def exp(self, x):
        return self._vm("exp", x)

    def sqrt(self, x):
        return self._vm("sqrt", x)

    def erf(self, x):
        return self._vm("erf", x)

    def erfc(self, x):
        return self._vm("erfc", x)

    def lt(self, x, y):
        return self.b.fcmp_ordered("<", x, y)

    def le(self, x, y):
        return self.b.fcmp_ordered("<=", x, y)

    def gt(self, x, y):
        return self.b.fcmp_ordered(">", x, y)

    def ge(self, x, y):
        return self.b.fcmp_ordered(">=", x, y)

    def eq(self, x, y):
        return self.b.fcmp_ordered("==", x, y)

    def and_(self, p, q):
        return self.b.and_(p, q)

    def or_(self, p, q):
        return self.b.or_(p, q)

    def isnan(self, x):
        return self.b.fcmp_unordered("uno", x, x)

    def where(self, cond, x, y):
        return self.b.select(cond, x, y)


def _in_double(fn):
    def lower(kb, node, xs, W):
        (x,) = xs
        dt = node.outputs[0][1]
        if dt is dtypes.float32:
            x = kb.b.fpext(x, vec_type(const(dtypes.float64, 0).type, W))
        out = fn(_IRMath(kb, W), x)
        return kb.b.fptrunc(out, vec_type(const(dtypes.float32, 0).type, W)) if dt is dtypes.float32 else out
    return lower


ELEMENTWISE = {"Lgamma": _in_double(lgamma_of), "Digamma": _in_double(digamma_of),
               "Trigamma": _in_double(trigamma_of), "Tetragamma": _in_double(tetragamma_of),
               "Erfinv": _in_double(erfinv_of), "Ndtri": _in_double(ndtri_of)}
