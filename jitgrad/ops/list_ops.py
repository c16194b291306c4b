"""``ListCheck``: TF's run-time checks of a TensorList index or length (a TensorArray
read / write / gather / scatter at an index known only when the graph runs, the first
row tf.scan / tf.foldl / tf.foldr read when given no initializer), with TF's
InvalidArgumentError messages.

``ListCheck(a, b)`` (int32, broadcast together) is ``a`` where the check passes; where
it fails the run fails. The interpreter raises at once; compiled code
(codegen/lower_list_checks.py) writes the kind's error code and, for the first
failure of the run, ``a`` and ``b`` to status words 4 and 5, so the executor
(compiler._raise_status) formats the same message. A failing index is clamped to 0
in the output, so the read after it never leaves its buffer.
"""
import numpy as np

from .. import dtypes
from ..convert import convert_all
from ..errors import InvalidArgumentError
from .math_ops import cast
from .registry import NOT_DIFFERENTIABLE, apply_op, register

# kind -> whether a passes. Each kind's error code and TF's message are in
# codegen/irutil.py's one table (LIST_CHECK_CODES, ERROR_MESSAGES).
KINDS = {
    "access": lambda a, b: 0 <= a < b,
    "modify": lambda a, b: 0 <= a < b,
    "gather": lambda a, b: 0 <= a < b,
    "scatter": lambda a, b: 0 <= a < b,
    "length": lambda a, b: a == b,
    "unstack": lambda a, b: a == b,
    "append": lambda a, b: a == b,
}
RANGE_KINDS = ("access", "modify", "gather", "scatter")


def message(kind, a, b):
    from ..codegen.irutil import LIST_CHECK_CODES, error_message   # (llvmlite: only when a check fails)
    return error_message(LIST_CHECK_CODES[kind], a, b)


def _infer(shapes, dts, attrs):
    for d in dts:
        if d != dtypes.int32:
            raise TypeError(f"ListCheck takes int32 values, got {d.name}")
    if attrs["kind"] not in KINDS:
        raise ValueError(f"unknown ListCheck kind {attrs['kind']!r}")
    if shapes[1] is not None and len(shapes[1]) != 0:
        raise ValueError(f"ListCheck's bound must be a scalar, got shape {list(shapes[1])}")
    return [(shapes[0], dtypes.int32)]


def _kernel(attrs, a, b):
    kind = attrs["kind"]
    a = np.asarray(a, np.int32)
    ok = KINDS[kind]
    for v in a.reshape(-1):
        if not ok(int(v), int(b)):
            raise InvalidArgumentError(message(kind, v, b))
    return a


register("ListCheck", denormals="keep",
         infer=_infer, kernel=_kernel, grad=NOT_DIFFERENTIABLE, kind="other", pointwise=True)


def list_check(a, b, kind, name=None):
    """``a`` (int32) after TF's ``kind`` check against ``b`` (a scalar int32), made when it runs."""
    a, b = convert_all([a, b])
    return apply_op("ListCheck", [cast(a, dtypes.int32), cast(b, dtypes.int32)], {"kind": kind},
                    name=name or "ListCheck")


def split_offsets(rows, lengths):
    """TF's TensorListSplit checks of ``lengths`` against a value of ``rows`` rows, in its
    order and with its InvalidArgumentError messages; the blocks' offsets ``[0, l0, l0 + l1,
    ..., rows]`` (int32)."""
    rows, end, out = int(rows), 0, [0]
    for length in np.asarray(lengths).reshape(-1):
        length = int(length)
        if length < 0:
            raise InvalidArgumentError(f"Invalid value in lengths: {length}")
        start, end = end, end + length
        if end > rows:
            raise InvalidArgumentError(f"Attempting to slice [{start}, {end}] from tensor with length {rows}")
        out.append(end)
    if end != rows:
        raise InvalidArgumentError(f"Unused values in tensor. Length of tensor: {rows} Values used: {end}")
    return np.asarray(out, np.int32)


def _split_offsets_infer(shapes, dts, attrs):
    if shapes[1] is not None and len(shapes[1]) != 1:
        raise ValueError(f"Shape must be rank 1 but is rank {len(shapes[1])} for 'TensorListSplit'")
    n = None if shapes[1] is None else shapes[1][0]
    return [((None if n is None else n + 1,), dtypes.int32)]


# Evaluated on the host: the offsets are the bounds of the blocks' slices (tensor_array_split.py),
# which a compiled run takes as shape sources (shape_specialise.py), so TF's errors come when it runs.
register("TensorListSplitOffsets", denormals="keep", infer=_split_offsets_infer, kernel=lambda attrs, rows, lengths:
         split_offsets(rows, lengths), grad=NOT_DIFFERENTIABLE, lowering="interpreter", kind="other")
