"""``tf.Assert``: the ``Assert`` op, which fails the run with TF's
InvalidArgumentError ("assertion failed: [message] [values]") when its
condition is false. tf.case(exclusive=True) and tf.case without a default use
it, as TF's do.

The op (shape rule, kernel, how compiled runs check it) is in
ops/logging_ops.py.
"""
from . import context
from .convert import convert_to_tensor
from .ops import logging_ops  # noqa: F401  (registers Assert)
from .ops.control_flow_ops import register_stateful
from .ops.registry import apply_op


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
    register_stateful(op)
    return op
