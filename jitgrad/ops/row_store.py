"""``SetRow(buffer, index, value)``: ``buffer`` with row ``index`` replaced by ``value``, and
the row it replaced (output 1),
TF's TensorListSetItem on a dense ``[rows, *element]`` array (a staged TensorArray's
write, autograph/staged_tensor_array.py).

One op so that the compiler can store the row in place, O(1) per write
(codegen/lower_row_store.py; a loop variable written only by it keeps one buffer,
lower_control.in_place_vars), where a select against ``range(rows) == index`` rewrites
every row. An index outside ``[0, rows)`` fails the run with TF's TensorList modify
error and stores nothing (the replaced row then reads as zeros). The gradient is the
same op on the output's gradient: it zeroes row ``index`` (the write replaced it) and
its output 1 reads that row back as the value's gradient, in one in-place op.
"""
import numpy as np

from .. import dtypes
from ..errors import InvalidArgumentError
from .array_ops import zeros_like
from .list_ops import message
from .registry import apply_op, register


def _infer(shapes, dts, attrs):
    buf, index, value = shapes
    if dts[1] != dtypes.int32:
        raise TypeError(f"SetRow takes an int32 index, got {dts[1].name}")
    if dts[0] != dts[2]:
        raise TypeError(f"SetRow's value is {dts[2].name}, its buffer {dts[0].name}")
    if index is not None and len(index) != 0:
        raise ValueError(f"SetRow's index must be a scalar, got shape {list(index)}")
    if buf is not None and (len(buf) == 0 or value is not None and (
            len(value) != len(buf) - 1 or any(a is not None and b is not None and a != b
                                              for a, b in zip(buf[1:], value)))):
        raise ValueError(f"SetRow's value of shape {value} is not a row of {buf}")
    row = None if buf is None else tuple(buf[1:])
    return [(buf, dts[0]), (row if row is not None else value, dts[0])]


def _kernel(attrs, buf, index, value):
    k, rows = int(index), buf.shape[0]
    if not 0 <= k < rows:
        raise InvalidArgumentError(message("modify", k, rows))
    out = np.array(buf, copy=True)
    old = out[k].copy()
    out[k] = value
    return out, old


def _grad(op, g, g_old):
    # out0 = buf with row k := value, out1 = buf[k]: d buf = g with row k := g_old, d value = g[k]
    _, index, value = op.inputs
    if g is None:
        g = zeros_like(op.outputs[0])
    d_buf, d_value = apply_op("SetRow", [g, index, zeros_like(value) if g_old is None else g_old], {})
    return [d_buf, None, d_value]


register("SetRow", infer=_infer, kernel=_kernel, grad=_grad, kind="other")


def set_row(buffer, index, value, name=None):
    """``buffer`` with row ``index`` (an int32 scalar tensor) replaced by ``value``."""
    return apply_op("SetRow", [buffer, index, value], {}, name=name or "SetRow")[0]
