"""The ``PrintV2`` op (``tf.print``, front end in jitgrad/print_ops.py): formats
tensors as TF's C++ kernel does (Tensor::SummarizeValue with print_v2:
``[1 2.5 0.333333343]``, ``...`` past ``summarize`` elements per dimension,
floats in the shortest of %.6g / %.9g that round-trips, doubles %.15g / %.17g,
bools 1/0) into the template the front end built.

The interpreter runs its kernel; the compiler turns it into one output per
printed tensor that the Session hands to a ``PrintTarget`` after the kernel
returns (passes/ir.from_graph), so compiled runs print too.
"""
import sys

import numpy as np

from .registry import NOT_DIFFERENTIABLE, register


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


def tensor_text(value, summarize=3):
    """TF's Tensor::SummarizeValue(summarize, print_v2=true) of an ndarray."""
    arr = np.asarray(value)
    kind = {"f": "f64" if arr.dtype == np.float64 else "f32", "b": "b"}.get(arr.dtype.kind, "i")
    if kind == "f32" and arr.dtype != np.float32:
        arr = arr.astype(np.float32)      # float16/bfloat16 print as float, as TF does
    n = arr.size
    limit = min(n if summarize is None or summarize < 0 else summarize, n)
    flat = arr.reshape(-1)
    if arr.ndim == 0:
        text = " ".join(_element_text(flat[i], kind) for i in range(limit))
        return text + ("..." if n > limit else "")
    out = []
    _print_dim(flat, arr.shape, 0, limit, 0, kind, out)
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


class PrintTarget:
    """One printed tensor of a compiled PrintV2: the Session's variable store hands
    it the value after the kernel ran (see passes/ir.from_graph); the last one
    of an op prints the line. Its repr (the compile signature) is structure only."""
    __slots__ = ("_attrs", "_index", "_values")

    def __init__(self, attrs, index, values):
        self._attrs, self._index, self._values = attrs, index, values

    @staticmethod
    def for_op(op):
        values = [None] * len(op.inputs)
        return [PrintTarget(op.attrs, i, values) for i in range(len(op.inputs))]

    def write(self, value):
        self._values[self._index] = value
        if self._index == len(self._values) - 1:
            _emit(self._attrs, list(self._values))

    def __repr__(self):
        return f"PrintV2[{self._index}/{len(self._values)}]"
