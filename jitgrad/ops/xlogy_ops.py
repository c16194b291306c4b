"""tf.math.xlogy / xdivy / xlog1py: x * log(y), x / y, x * log1p(y), exactly 0 where x == 0
(even where y is 0, inf or NaN: the point of these ops is 0 * log(0) = 0 in entropies and KL
terms). NaN in x propagates as in x * log(y); NaN in y meets a zero x as 0 (TF's kernels).

TF's kernels (Eigen scalar_xlogy_op etc.) return +0 for x == 0 in their scalar form and x itself
(so -0 for x = -0) in their packet form, which TF runs on whole packets of 8 floats; jitgrad gives
+0 everywhere (README "Known differences"). The gradients are TF's _XLogyGrad, _XDivyGrad and
_XLog1pyGrad, written with these ops themselves, so second derivatives come for free.
"""
import numpy as np

from ..convert import convert_all
from ._infer import COMPLEX, FLOATS, broadcasting
from .math_ops import add, cast, multiply, negative, not_equal, reduce_to, square
from .registry import apply_op, register

_TYPES = FLOATS + COMPLEX


def _where_x_zero(x, value):
    """+0 where x == 0, else ``value`` (computed in x's dtype: float16 values in float32 and
    rounded once, as TF's Eigen half kernels do)."""
    return np.where(x == 0, np.zeros((), x.dtype), value).astype(x.dtype, copy=False)


def _narrow_in_float32(fn):
    def kernel(attrs, x, y):
        if x.dtype.itemsize == 2 and x.dtype.kind in "fV":       # float16 / bfloat16
            return fn(x.astype(np.float32), y.astype(np.float32)).astype(x.dtype)
        return fn(x, y)
    return kernel


def _xlogy(x, y):
    with np.errstate(all="ignore"):
        return _where_x_zero(x, x * np.log(y))


def _xdivy(x, y):
    with np.errstate(all="ignore"):
        return _where_x_zero(x, x / y)


def _xlog1py(x, y):
    with np.errstate(all="ignore"):
        return _where_x_zero(x, x * np.log1p(y))


def _nonzero(x):
    """TF's not_zero_x: 1 where x != 0 (NaN included), else 0, in x's dtype."""
    return cast(not_equal(x, apply_op("ZerosLike", [x])), x.dtype)


def _binary_grads(op, gx, gy):
    x, y = op.inputs
    return [reduce_to(gx, x), reduce_to(gy, y)]


def _xlogy_grad(op, g):
    x, y = op.inputs
    return _binary_grads(op, multiply(xlogy(_nonzero(x), y), g), multiply(xdivy(x, y), g))


def _xdivy_grad(op, g):
    x, y = op.inputs
    return _binary_grads(op, multiply(xdivy(_nonzero(x), y), g), multiply(xdivy(negative(x), square(y)), g))


def _xlog1py_grad(op, g):
    x, y = op.inputs
    return _binary_grads(op, multiply(xlog1py(_nonzero(x), y), g), multiply(xdivy(x, add(y, 1.0)), g))


for _name, _fn, _grad, _cost in [("Xlogy", _xlogy, _xlogy_grad, 12), ("Xdivy", _xdivy, _xdivy_grad, 4),
                                 ("Xlog1py", _xlog1py, _xlog1py_grad, 12)]:
    register(_name, infer=broadcasting(_TYPES), kernel=_narrow_in_float32(_fn), grad=_grad, kind="elementwise",
             cost=_cost)


def _binary(op_type, x, y, name):
    x, y = convert_all([x, y])       # (the op's shape rule raises TF's TypeError for bad dtypes)
    return apply_op(op_type, [x, y], name=name or op_type)


def xlogy(x, y, name=None):
    """``tf.math.xlogy``: 0 where x == 0, else x * log(y)."""
    return _binary("Xlogy", x, y, name)


def xdivy(x, y, name=None):
    """``tf.math.xdivy``: 0 where x == 0, else x / y."""
    return _binary("Xdivy", x, y, name)


def xlog1py(x, y, name=None):
    """``tf.math.xlog1py``: 0 where x == 0, else x * log1p(y)."""
    return _binary("Xlog1py", x, y, name)

