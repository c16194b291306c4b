"""``tf.bitwise``: BitwiseAnd / BitwiseOr / BitwiseXor / Invert / LeftShift / RightShift on
the eight integer dtypes (TF 2.21's op defs: no bool, no floats), broadcasting, not
differentiable (TF 2.21's GradientTape and tf.gradients give None through them).

Shifts follow TF's kernels (bitwise_ops functors): the shift amount is clamped to
[0, bits - 1] -- a negative amount shifts by 0, one of the bit width or more by bits - 1 --
and the left shift is done on the unsigned type, so it wraps (int8 5 << 7 is -128); the
right shift of a signed type is arithmetic (-5 >> 100 is -1). Checked against real TF."""
import numpy as np

from .. import dispatch, dtypes
from ..convert import convert_all
from ._infer import broadcasting, unary
from . import registry
from .registry import NOT_DIFFERENTIABLE, apply_op, register

INTEGERS = (dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64,
            dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64)


def _clamped_shift(x, y):
    """y clamped to [0, bits - 1], as TF's functors clamp it."""
    return np.clip(y, 0, x.dtype.itemsize * 8 - 1).astype(x.dtype, copy=False)


def _left_shift(x, y):
    x, y = np.asarray(x), np.asarray(y)
    u = np.dtype(f"u{x.dtype.itemsize}")     # shifted unsigned: bits shifted out are dropped, no overflow
    return np.left_shift(x.astype(u), _clamped_shift(x, y).astype(u)).astype(x.dtype)


def _right_shift(x, y):
    x, y = np.asarray(x), np.asarray(y)
    return np.right_shift(x, _clamped_shift(x, y))


def _binary(name, kernel):
    register(name, infer=broadcasting(INTEGERS), kernel=lambda attrs, x, y: kernel(x, y), grad=NOT_DIFFERENTIABLE,
             kind="elementwise")


_binary("BitwiseAnd", np.bitwise_and)
_binary("BitwiseOr", np.bitwise_or)
_binary("BitwiseXor", np.bitwise_xor)
_binary("LeftShift", _left_shift)
_binary("RightShift", _right_shift)
register("Invert", infer=unary(INTEGERS), kernel=lambda attrs, x: np.invert(x), grad=NOT_DIFFERENTIABLE,
         kind="elementwise")


def _apply(op_type, xs, name):
    if all(x.__class__ in dispatch.eager_types for x in xs) and registry.eager_now():
        return dispatch.eager_execute(registry.REGISTRY[op_type], xs, {})
    return apply_op(op_type, convert_all(xs), name=name or op_type)


def bitwise_and(x, y, name=None):
    """``tf.bitwise.bitwise_and``: x & y elementwise, integer dtypes."""
    return _apply("BitwiseAnd", [x, y], name)


def bitwise_or(x, y, name=None):
    """``tf.bitwise.bitwise_or``: x | y elementwise, integer dtypes."""
    return _apply("BitwiseOr", [x, y], name)


def bitwise_xor(x, y, name=None):
    """``tf.bitwise.bitwise_xor``: x ^ y elementwise, integer dtypes."""
    return _apply("BitwiseXor", [x, y], name)


def invert(x, name=None):
    """``tf.bitwise.invert``: ~x, integer dtypes (uint8 6 -> 249)."""
    return _apply("Invert", [x], name)


def left_shift(x, y, name=None):
    """``tf.bitwise.left_shift``: x << clamp(y, 0, bits - 1), wrapping as TF's kernel."""
    return _apply("LeftShift", [x, y], name)


def right_shift(x, y, name=None):
    """``tf.bitwise.right_shift``: x >> clamp(y, 0, bits - 1) (arithmetic for signed types)."""
    return _apply("RightShift", [x, y], name)


__all__ = ["bitwise_and", "bitwise_or", "bitwise_xor", "invert", "left_shift", "right_shift"]
