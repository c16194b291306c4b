"""``tf.print``: builds TF's print_v2 template (Python values through
``pprint.pformat``, so dicts print sorted) into which the ``PrintV2`` op
formats tensors as TF's C++ kernel does (ops/logging_ops.py).

Eager: prints at once. In a graph the ``PrintV2`` op (ops/logging_ops.py)
prints each time it runs; inside ``jitgrad.function`` it always runs (TF's
automatic control dependencies), and inside a tf.cond branch / tf.while_loop
body each time that branch / iteration runs (func_graph.FuncGraph.side_effects;
compiled: the RegionPrint node in ops/logging_ops.py).
"""
import collections
import os
import pprint
import sys

from . import context, nest
from .convert import is_tensorlike, convert_to_tensor
from .ops import logging_ops  # noqa: F401  (registers PrintV2)
from .ops.registry import apply_op
from .ops.control_flow_ops import register_stateful

_STREAMS = {"stdout", "stderr"}


# ---------------------------------------------------------------- tf.print
def _stream_name(output_stream):
    if output_stream is None or output_stream is sys.stderr or output_stream is sys.__stderr__:
        return "stderr"       # the default, looked up when called (as TF's kwargs.pop does)
    if output_stream is sys.stdout or output_stream is sys.__stdout__:
        return "stdout"
    if isinstance(output_stream, str) and (output_stream in _STREAMS or output_stream.startswith("file://")):
        return output_stream
    raise ValueError(f"Unsupported output stream, logging level, or file.{output_stream}. Supported streams "
                     "are sys.stdout, sys.stderr, and 'file://' paths.")


def _sorted_ordered_dicts(x):
    return collections.OrderedDict(sorted(x.items())) if isinstance(x, collections.OrderedDict) else x


def _template(inputs, sep):
    """TF's print_v2 template: (template, placeholder, tensors in order)."""
    inputs = [_sorted_ordered_dicts(x) for x in inputs]
    free = " ".join(pprint.pformat(nest.map_structure(lambda x: "" if is_tensorlike(x) else x, x))
                    for x in inputs)
    placeholder = "{}"
    while placeholder in free:
        placeholder = "{" + placeholder + "}"
    templates, tensors = [], []
    for x in inputs:
        marks = []
        for leaf in nest.flatten(x):
            if is_tensorlike(leaf):
                tensors.append(leaf)
                marks.append(placeholder)
            else:
                marks.append(leaf)
        templates.append(x if isinstance(x, str) else pprint.pformat(nest.pack_sequence_as(x, marks)))
    template = sep.join(templates).replace("'" + placeholder + "'", placeholder)
    return template, placeholder, tensors


def print_v2(*inputs, output_stream=None, summarize=3, sep=" ", end=os.linesep, name=None):
    """``tf.print``: returns None when executing eagerly, else the print op."""
    template, placeholder, tensors = _template(inputs, sep)
    attrs = {"template": template, "placeholder": placeholder, "summarize": -1 if summarize is None else
             int(summarize), "end": end, "output_stream": _stream_name(output_stream)}
    values = [convert_to_tensor(t) for t in tensors] or [convert_to_tensor(0)]   # an op needs an input
    op = apply_op("PrintV2", values, attrs, name=name or "PrintV2")
    if context.executing_eagerly():
        return None
    # runs whenever the branch / body it is in runs, or on every call of a jitgrad.function
    # (TF's automatic control dependencies)
    register_stateful(op)
    return op
