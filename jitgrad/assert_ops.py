"""``tf.Assert``: the ``Assert`` op, which fails the run with TF's
InvalidArgumentError ("assertion failed: [message] [values]") when its
condition is false. tf.case(exclusive=True) and tf.case without a default use
it, as TF's do.

The interpreter runs its kernel. The compiler, as for tf.print, turns it into
one output per input that the Session hands to a ``print_ops.HostTarget``
after the kernel returns; the last one checks, so a failed
assertion stops the run's later variable writes.
"""
import numpy as np

from . import context
from .convert import convert_to_tensor
from .errors import InvalidArgumentError
from .ops.registry import NOT_DIFFERENTIABLE, apply_op, register


def check(attrs, arrays):
    cond = np.asarray(arrays[0])
    if cond.shape != ():
        raise InvalidArgumentError(f"In[0] (the condition of Assert) must be a scalar, got shape {list(cond.shape)}")
    if bool(cond):
        return
    from .print_ops import flat_tensor_text
    texts = iter([flat_tensor_text(a, attrs["summarize"]) for a in arrays[1:]])
    parts = [m if m is not None else next(texts) for m in attrs["data"]]
    raise InvalidArgumentError("assertion failed: " + " ".join(f"[{p}]" for p in parts))


def _assert_kernel(attrs, *arrays):
    check(attrs, arrays)
    return ()


def _assert_infer(shapes, dts, attrs):
    if dts[0].name != "bool":
        raise TypeError(f"The condition of Assert must be a bool tensor, got {dts[0].name}")
    if shapes[0] is not None and len(shapes[0]) != 0:
        raise ValueError(f"The condition of Assert must be a scalar, got shape {list(shapes[0])}")
    return []


register("Assert", infer=_assert_infer, kernel=_assert_kernel, kind="other", lowering="state",
         grad=NOT_DIFFERENTIABLE)   # passes/ir.from_graph makes it var-writes


def Assert(condition, data, summarize=None, name=None):   # noqa: N802 (TF's name)
    """``tf.debugging.Assert``: raises InvalidArgumentError with ``data`` when
    ``condition`` is false. Python strings in ``data`` are the message; tensors
    are printed as TF's Assert prints them (the first ``summarize`` elements, 3 by
    default). Eagerly it checks at once and returns None; in a graph it
    returns the op (run on every call inside jitgrad.function, and whenever
    the branch / loop body it is in runs)."""
    strings = [d if isinstance(d, str) else None for d in data]
    tensors = [convert_to_tensor(d) for d in data if not isinstance(d, str)]
    attrs = {"data": strings, "summarize": 3 if summarize is None else int(summarize)}
    op = apply_op("Assert", [convert_to_tensor(condition)] + tensors, attrs, name=name or "Assert")
    if context.executing_eagerly():
        return None
    from .ops.control_flow_ops import register_stateful
    register_stateful(op)
    return op
