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

# kind -> (error code, whether a passes, TF's message of a and b). Codes 20-26: kept
# clear of codegen/irutil.py's ERR_* numbers.
KINDS = {
    "access": (20, lambda a, b: 0 <= a < b, "Trying to access element {a} in a list with {b} elements."),
    "modify": (21, lambda a, b: 0 <= a < b, "Trying to modify element {a} in a list with {b} elements."),
    "gather": (22, lambda a, b: 0 <= a < b, "Trying to gather element {a} in a list with {b} elements."),
    # a scatter past the end of a list of b elements (TF: a list of a + 1 elements was made)
    "scatter": (23, lambda a, b: 0 <= a < b, "Operation expected a list with {b} elements but got a list with "
                                            "{a1} elements."),
    "length": (24, lambda a, b: a == b, "Expected len(indices) == tensor.shape[0], but saw: {a} vs. {b}"),
    "unstack": (25, lambda a, b: a == b, "Operation expected a list with {b} elements but got a list with {a} "
                                         "elements."),
    # jitgrad's own: a dynamic TensorArray a while_loop writes in order is carried as appends
    # (autograph/staged_tensor_array.check_appends), which needs its first write at its end
    "append": (26, lambda a, b: a == b, "jitgrad compiles this while_loop's TensorArray writes as appends: the "
                                        "first writes at index {a}, but the array has {b} elements when the "
                                        "loop starts"),
}
CODES = {code: kind for kind, (code, _, _) in KINDS.items()}
RANGE_KINDS = ("access", "modify", "gather", "scatter")


def message(kind, a, b):
    a, b = int(a), int(b)
    if kind == "scatter" and a < 0:
        kind = "modify"
    return KINDS[kind][2].format(a=a, b=b, a1=a + 1)


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
    ok = KINDS[kind][1]
    for v in a.reshape(-1):
        if not ok(int(v), int(b)):
            raise InvalidArgumentError(message(kind, v, b))
    return a


register("ListCheck", infer=_infer, kernel=_kernel, grad=NOT_DIFFERENTIABLE, kind="other", pointwise=True)


def list_check(a, b, kind, name=None):
    """``a`` (int32) after TF's ``kind`` check against ``b`` (a scalar int32), made when it runs."""
    a, b = convert_all([a, b])
    return apply_op("ListCheck", [cast(a, dtypes.int32), cast(b, dtypes.int32)], {"kind": kind},
                    name=name or "ListCheck")
