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

With ``grow`` (a dynamic TensorArray, TF's TensorListSetItem with
resize_if_index_out_of_bounds) an index past the end first grows the buffer to
``index + 1`` rows, zeros in between; only a negative index fails. Its gradient is the
plain op: the upstream gradient has the final rows, which every later write's index is
below, and the rows grown here are no part of the input (the buffer's maker, ZeroRows,
takes its own first rows of it: ops/zero_rows.py).
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
    if attrs.get("grow") and k >= rows:
        buf = np.concatenate([buf, np.zeros((k + 1 - rows,) + buf.shape[1:], buf.dtype)])
        rows = k + 1
    if not 0 <= k < rows:
        raise InvalidArgumentError(message("modify", k, rows))
    out = np.array(buf, copy=True)
    old = out[k].copy()
    out[k] = value
    return out, old


def _filled(g, t):
    """Whether ``g`` is missing: None, or the ZerosLike(t) gradients() fills it with."""
    return g is None or getattr(g, "op", None) is not None and g.op.type == "ZerosLike" and g.op.inputs[0] is t


def _grad(op, g, g_old):
    # out0 = buf with row k := value, out1 = buf[k]: d buf = g with row k := g_old, d value = g[k].
    # Nothing here reads op's outputs or its buffer: a loop's gradient step would then need the
    # buffer of every iteration (saved per iteration: memory quadratic in the trip count). A
    # missing g_old is zeros of the value's shape, not of the row read.
    buf, index, value = op.inputs
    if g is None:
        g = zeros_like(buf)
    g_old = zeros_like(value) if _filled(g_old, op.outputs[1]) else g_old
    d_buf, d_value = apply_op("SetRow", [g, index, g_old], {})
    return [d_buf, None, d_value]


register("SetRow", denormals="keep", infer=_infer, kernel=_kernel, grad=_grad, kind="other")


def set_row(buffer, index, value, name=None, grow=False):
    """``buffer`` with row ``index`` (an int32 scalar tensor) replaced by ``value``; with
    ``grow``, first grown to ``index + 1`` rows where it has fewer (zeros between)."""
    return apply_op("SetRow", [buffer, index, value], {"grow": True} if grow else {}, name=name or "SetRow")[0]
