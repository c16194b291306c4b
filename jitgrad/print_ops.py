"""``tf.print``: formats tensors as TF's C++ kernel does (Tensor::SummarizeValue
with print_v2: ``[1 2.5 0.333333343]``, ``...`` past ``summarize`` elements per
dimension, floats in the shortest of %.6g / %.9g that round-trips, doubles
%.15g / %.17g, bools 1/0) inside TF's template (Python values through
``pprint.pformat``, so dicts print sorted).

Eager: prints at once. In a graph the ``PrintV2`` op prints each time it runs;
inside ``jitgrad.function`` it always runs (TF's automatic control
dependencies), and inside a tf.cond branch / tf.while_loop body each time that
branch / iteration runs (func_graph.FuncGraph.side_effects). The interpreter runs its kernel; the compiler turns it into
one output per printed tensor that the Session hands to a ``HostTarget``
after the kernel returns (passes/ir.from_graph), so compiled runs print too.
"""
import collections
import os
import pprint
import sys

import numpy as np

from . import context, nest
from .convert import _is_tensorlike, convert_to_tensor
from .ops.registry import NOT_DIFFERENTIABLE, apply_op, register

_STREAMS = {"stdout", "stderr"}


# ---------------------------------------------------------------- tensor text (tensor.cc)
def _float_text(x, digits, more_digits, as_type):
    if np.isnan(x):
        return "-nan" if np.signbit(x) else "nan"
    s = "%.*g" % (digits, float(x))
    if as_type(float(s)) != x:
        s = "%.*g" % (more_digits, float(x))
    return s


def _element_text(x, kind):
    if kind == "f32":
        return _float_text(x, 6, 9, np.float32)
    if kind == "f64":
        return _float_text(x, 15, 17, np.float64)
    if kind == "b":
        return "1" if x else "0"
    return str(int(x))


def _dim_spacing(dim, ndims, out):
    if dim == ndims - 1:
        out.append(" ")
        return
    out.append("\n" * (ndims - dim - 1) + " " * (dim + 1))


def _print_dim(flat, shape, dim, at_ends, base, kind, out):
    if dim == len(shape):
        out.append(_element_text(flat[base], kind))
        return
    out.append("[")
    count = shape[dim]
    start_of_end = max(at_ends, count - at_ends)
    per = int(np.prod(shape[dim + 1:], dtype=np.int64))
    for i in range(min(at_ends, count)):
        if i > 0:
            _dim_spacing(dim, len(shape), out)
        _print_dim(flat, shape, dim + 1, at_ends, base + per * i, kind, out)
    if count > 2 * at_ends:
        _dim_spacing(dim, len(shape), out)
        out.append("...")
    for i in range(start_of_end, count):
        _dim_spacing(dim, len(shape), out)
        _print_dim(flat, shape, dim + 1, at_ends, base + per * i, kind, out)
    out.append("]")


def _kind(arr):
    kind = {"f": "f64" if arr.dtype == np.float64 else "f32", "b": "b"}.get(arr.dtype.kind, "i")
    if kind == "f32" and arr.dtype != np.float32:
        arr = arr.astype(np.float32)      # float16/bfloat16 print as float, as TF does
    return arr, kind


def _limit(n, summarize):
    return min(n if summarize is None or summarize < 0 else summarize, n)


def flat_tensor_text(value, summarize=3):
    """TF's Tensor::SummarizeValue without print_v2 (what tf.Assert shows, and
    print_v2 for a scalar): the first ``summarize`` elements in order, space
    separated, ``...`` if there are more."""
    arr, kind = _kind(np.asarray(value))
    flat = arr.reshape(-1)
    limit = _limit(flat.size, summarize)
    return " ".join(_element_text(flat[i], kind) for i in range(limit)) + ("..." if flat.size > limit else "")


def tensor_text(value, summarize=3):
    """TF's Tensor::SummarizeValue(summarize, print_v2=true) of an ndarray."""
    arr, kind = _kind(np.asarray(value))
    if arr.ndim == 0:
        return flat_tensor_text(arr, summarize)
    out = []
    _print_dim(arr.reshape(-1), arr.shape, 0, _limit(arr.size, summarize), 0, kind, out)
    return "".join(out)


# ---------------------------------------------------------------- the op
def _emit(attrs, arrays):
    parts = attrs["template"].split(attrs["placeholder"])
    texts = [tensor_text(a, attrs["summarize"]) for a in arrays[:len(parts) - 1]]
    line = parts[0] + "".join(t + p for t, p in zip(texts, parts[1:])) + attrs["end"]
    stream = attrs["output_stream"]
    if stream.startswith("file://"):
        with open(stream[len("file://"):], "a") as f:
            f.write(line)
    else:
        out = sys.stdout if stream == "stdout" else sys.stderr
        out.write(line)
        out.flush()


def _print_kernel(attrs, *arrays):
    _emit(attrs, arrays)
    return ()


register("PrintV2", infer=lambda shapes, dts, attrs: [], kernel=_print_kernel, kind="other",
         lowering="state", grad=NOT_DIFFERENTIABLE)   # passes/ir.from_graph makes it var-writes


class HostTarget:
    """One input of an op the Session completes after the kernel returns
    (tf.print prints, tf.Assert checks): the variable store hands it the value
    (see passes/ir.from_graph); the op's last one calls ``finish(attrs, values)``.
    Its repr (the compile signature) is structure only."""
    __slots__ = ("_finish", "_tag", "_attrs", "_index", "_values")

    def __init__(self, finish, tag, attrs, index, values):
        self._finish, self._tag, self._attrs, self._index, self._values = finish, tag, attrs, index, values

    def write(self, value):
        self._values[self._index] = value
        if self._index == len(self._values) - 1:
            self._finish(self._attrs, list(self._values))

    def __repr__(self):
        return f"{self._tag}[{self._index}/{len(self._values)}]"


def host_targets(op):
    """One HostTarget per input of a PrintV2 / Assert op."""
    if op.type == "PrintV2":
        finish = _emit
    else:
        from .assert_ops import check as finish
    values = [None] * len(op.inputs)
    return [HostTarget(finish, op.type, op.attrs, i, values) for i in range(len(op.inputs))]


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
    free = " ".join(pprint.pformat(nest.map_structure(lambda x: "" if _is_tensorlike(x) else x, x))
                    for x in inputs)
    placeholder = "{}"
    while placeholder in free:
        placeholder = "{" + placeholder + "}"
    templates, tensors = [], []
    for x in inputs:
        marks = []
        for leaf in nest.flatten(x):
            if _is_tensorlike(leaf):
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
    from .ops.control_flow_ops import register_stateful
    register_stateful(op)
    return op
