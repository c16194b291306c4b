"""``ZeroRows(entry, length)``: ``entry`` ([r, *element]) followed by zero rows, ``length``
rows in all (an int64 scalar known only when the run gets there).

The buffer a dynamic TensorArray written out of order in a tf.while_loop is carried in
(tensor_array_preallocated.py): its length is computed from the trip count before the
loop, and its shape stays ``[None, *element]`` in the graph and in the compiler, so one
kernel serves every trip count (the loop carries it as a variable of run-time rows,
written in place by SetRow: ops/row_store.py, codegen/lower_growing.FixedRowsVar).
Unwritten rows read as zeros, as TF's TensorList elements that were never set.

A length below ``r`` or past int32 (the largest TensorList index TF can address is
2**31 - 1; the length is computed in int64 so that an overflow is seen, not wrapped)
fails the run with InvalidArgumentError, and nothing is allocated.
"""
import numpy as np

from .. import dtypes
from ..errors import InvalidArgumentError
from .registry import apply_op, register

INT32_MAX = 2 ** 31 - 1


LENGTH_MESSAGE = (f"A dynamic TensorArray written in a while_loop would have a negative number of elements or "
                  f"more than {INT32_MAX} after the loop")


def _infer(shapes, dts, attrs):
    entry, length = shapes
    if dts[1] != dtypes.int64:
        raise TypeError(f"ZeroRows takes an int64 length, got {dts[1].name}")
    if length is not None and len(length) != 0:
        raise ValueError(f"ZeroRows' length must be a scalar, got shape {list(length)}")
    if entry is not None and len(entry) == 0:
        raise ValueError("ZeroRows' entry value must have rows (rank >= 1)")
    return [(None if entry is None else (None,) + tuple(entry[1:]), dts[0])]


def _kernel(attrs, entry, length):
    n, rows = int(length), entry.shape[0]
    if not rows <= n <= INT32_MAX:
        raise InvalidArgumentError(LENGTH_MESSAGE)
    out = np.zeros((n,) + entry.shape[1:], entry.dtype)
    out[:rows] = entry
    return out


def _grad(op, g):
    # the entry's rows are the output's first r rows: the concat gradient's split (rows of g
    # known at run time: codegen/lower_rows_concat.py's rowsplit)
    entry = op.inputs[0]
    return [apply_op("SplitToShapesOf", [g, entry], {"axis": 0, "rest": 1})[0], None]


register("ZeroRows", denormals="keep", infer=_infer, kernel=_kernel, grad=_grad, kind="other")


def zero_rows(entry, length, name=None):
    """``entry`` then zero rows, ``length`` (int64 scalar tensor) rows in all."""
    return apply_op("ZeroRows", [entry, length], {}, name=name or "ZeroRows")
