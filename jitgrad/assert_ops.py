"""``tf.Assert``: the ``Assert`` op, which fails the run with TF's
InvalidArgumentError ("assertion failed: [message] [values]") when its
condition is false. tf.case(exclusive=True) and tf.case without a default use
it, as TF's do; so do tf.debugging's checks (debugging.py).

The op (shape rule, kernel, how compiled runs check it) is in
ops/logging_ops.py.
"""
import numpy as np

from . import context
from .convert import convert_to_tensor
from .errors import InvalidArgumentError
from .ops import logging_ops  # noqa: F401  (registers Assert)
from .ops.control_flow_ops import register_stateful
from .ops.registry import apply_op


def Assert(condition, data, summarize=None, name=None):   # noqa: N802 (TF's name)
    """``tf.debugging.Assert``: raises InvalidArgumentError with ``data`` when
    ``condition`` is false. Python strings in ``data`` are the message; tensors
    are printed as TF's Assert prints them (the first ``summarize`` elements, 3 by
    default). Eagerly it checks at once, with TF's eager message ("Expected
    '<condition>' to be true. Summarized data: ..."), and returns None; in a
    graph it returns the op (run on every call inside jitgrad.function, and
    whenever the branch / loop body it is in runs)."""
    if context.executing_eagerly():
        _check_eagerly(condition, data, summarize)
        return None
    return assert_op(condition, data, {"summarize": 3 if summarize is None else int(summarize)}, name or "Assert")


def assert_op(condition, data, attrs, name):
    """The Assert op of ``condition`` over ``data`` (strings go in its attrs);
    ``attrs`` may carry ``numerics`` (check_numerics's message: the data are then
    the has-NaN / has-Inf flags). Eagerly the op's kernel checks at once."""
    strings = [d if isinstance(d, str) else None for d in data]
    tensors = [convert_to_tensor(d) for d in data if not isinstance(d, str)]
    op = apply_op("Assert", [convert_to_tensor(condition)] + tensors, dict(attrs, data=strings), name=name)
    if context.executing_eagerly():
        return None
    register_stateful(op)
    return op


def _eager_summary(value, summarize):
    """One item of TF's eager Assert message (``_summarize_eager``): strings as
    bytes literals, tensors as their first ``summarize`` elements joined by ', '."""
    if isinstance(value, str):
        return repr(value.encode())
    arr = np.asarray(convert_to_tensor(value).numpy())
    n = arr.size if summarize is not None and summarize < 0 else (3 if summarize is None else int(summarize))
    if arr.ndim == 0:
        return str(arr) if n != 0 else ""
    flat = arr.reshape(-1)
    texts = [str(v) for v in flat[:n]]
    if len(texts) < flat.size:
        texts.append("...")
    return ", ".join(texts)


def _check_eagerly(condition, data, summarize):
    cond = condition.numpy() if hasattr(condition, "numpy") else np.asarray(condition)
    if np.shape(cond) != ():
        raise InvalidArgumentError(f"In[0] (the condition of Assert) must be a scalar, got shape {list(np.shape(cond))}")
    if bool(cond):
        return
    summary = "\n".join(_eager_summary(d, summarize) for d in data)
    raise InvalidArgumentError(f"Expected '{condition!s}' to be true. Summarized data: {summary}")
