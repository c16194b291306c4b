"""``tf.strings`` basics: join, length, upper / lower, strip, substr,
regex_replace / regex_full_match, split / bytes_split of a scalar, format,
as_string, to_number, reduce_join.

String tensors are numpy object arrays of ``bytes`` (dtype ``tf.string``).
These ops have numpy kernels only and no gradients: a compiled Session.run
that fetches a string runs in the interpreter (dtypes other than the five
native ones are counted in ``cache_info()['fallbacks']``).
"""
import re

import numpy as np

from .. import dtypes
from ..convert import convert_all, graph_of
from ..shapes import broadcast_dims, normalize_axes
from ._infer import NUMBERS, check_dtype
from .registry import NOT_DIFFERENTIABLE, apply_op, register as _register_op


def _register(name, **facts):
    """String ops run in the interpreter only (a compiled run holding one is a counted fallback)
    and stop gradients, as documented in the README; they only format or parse numbers, so
    the flush-denormals mode leaves their inputs and outputs alone (denormals="keep")."""
    return _register_op(name, grad=NOT_DIFFERENTIABLE, lowering="interpreter", denormals="keep", **facts)

STRING = (dtypes.string,)


def _strings(op_name, dts):
    for d in dts:
        check_dtype(op_name, d, STRING, "input")


def _elementwise(fn, *arrays, otype=object):
    """fn applied to every element (bytes -> value) with broadcasting."""
    arrays = np.broadcast_arrays(*arrays)
    out = np.empty(arrays[0].shape, otype)
    for idx in np.ndindex(*out.shape):
        out[idx] = fn(*[a[idx] for a in arrays])
    return out


# ---------------------------------------------------------------- join / length / case
def _join_infer(shapes, dts, attrs):
    _strings("StringJoin", dts)
    shape = shapes[0]
    for s in shapes[1:]:
        shape = broadcast_dims(shape, s, "'StringJoin'")
    return [(shape, dtypes.string)]


_register("StringJoin", infer=_join_infer,
         kernel=lambda attrs, *xs: _elementwise(lambda *parts: attrs["separator"].join(parts), *xs))


def _unary_string_infer(op_name, out=dtypes.string):
    def infer(shapes, dts, attrs):
        _strings(op_name, dts)
        return [(shapes[0], out)]
    return infer


def _length(attrs, x):
    if attrs["unit"] == "UTF8_CHAR":
        return _elementwise(lambda b: len(b.decode("utf-8")), x, otype=np.int32)
    return _elementwise(len, x, otype=np.int32)


_register("StringLength", infer=_unary_string_infer("StringLength", dtypes.int32), kernel=_length)
# TF's StringUpper/Lower with encoding "" change ASCII letters only
_register("StringUpper", infer=_unary_string_infer("StringUpper"),
         kernel=lambda attrs, x: _elementwise(bytes.upper, x))
_register("StringLower", infer=_unary_string_infer("StringLower"),
         kernel=lambda attrs, x: _elementwise(bytes.lower, x))


def _string_args(values):
    """Each value as a tensor of its own dtype, in the inputs' graph."""
    g = graph_of(values)
    return [convert_all([v], graph=g)[0] for v in values]


def join(inputs, separator="", name=None):
    """``tf.strings.join``: elementwise concatenation (scalars broadcast)."""
    xs = _string_args(list(inputs))
    return apply_op("StringJoin", xs, {"separator": _bytes(separator)}, name=name or "StringJoin")


def length(input, unit="BYTE", name=None):  # noqa: A002
    if unit not in ("BYTE", "UTF8_CHAR"):
        raise ValueError(f"unit must be 'BYTE' or 'UTF8_CHAR', got {unit!r}")
    (x,) = _string_args([input])
    return apply_op("StringLength", [x], {"unit": unit}, name=name or "StringLength")


def upper(input, encoding="", name=None):  # noqa: A002
    (x,) = _string_args([input])
    return apply_op("StringUpper", [x], name=name or "StringUpper")


def lower(input, encoding="", name=None):  # noqa: A002
    (x,) = _string_args([input])
    return apply_op("StringLower", [x], name=name or "StringLower")


def _bytes(s):
    return s.encode("utf-8") if isinstance(s, str) else bytes(s)


# ---------------------------------------------------------------- format / as_string
def _float_text(v, is_double):
    """TF's StrCat of a float: the shortest of %.{6,15}g / %.{9,17}g that reads back."""
    digits, more = (15, 17) if is_double else (6, 9)
    text = "%.*g" % (digits, v)
    kind = np.float64 if is_double else np.float32
    if not np.isfinite(v) or kind(float(text)) == kind(v):
        return {"inf": "inf", "-inf": "-inf", "nan": "nan"}.get(text, text)
    return "%.*g" % (more, v)


def _scalar_text(v, dtype):
    if dtype.is_string:
        return '"' + v.decode("utf-8", "replace") + '"'
    if dtype.is_bool:
        return "1" if v else "0"
    if dtype.is_floating:
        return _float_text(float(v), dtype.size == 8)
    if dtype.is_complex:
        return f"({_float_text(v.real, dtype.size == 16)},{_float_text(v.imag, dtype.size == 16)})"
    return str(int(v))


def summarize(arr, dtype, summarize=3):
    """TF's tensor text in tf.strings.format / tf.print: nested brackets, elements
    separated by spaces, at most ``summarize`` at each end of a dimension."""
    def block(a, depth):
        if a.ndim == 0:
            return _scalar_text(a[()], dtype)
        n = a.shape[0]
        idx = list(range(n)) if summarize < 0 or n <= 2 * summarize else \
            list(range(summarize)) + [None] + list(range(n - summarize, n))
        parts = ["..." if i is None else block(a[i:i + 1].reshape(a.shape[1:]), depth + 1) for i in idx]
        if a.ndim == 1:
            return "[" + " ".join(parts) + "]"
        sep = "\n" * (a.ndim - 1) + " " * (depth + 1)
        return "[" + sep.join(parts) + "]"
    return block(np.asarray(arr), 0)


def _format_kernel(attrs, *xs):
    pieces = attrs["template"].split(attrs["placeholder"])
    texts = [summarize(x, dt, attrs["summarize"]) for x, dt in zip(xs, attrs["T"])]
    out = pieces[0]
    for text, piece in zip(texts, pieces[1:]):
        out += text + piece
    return np.array(out.encode("utf-8"), dtype=object)


_register("StringFormat", infer=lambda shapes, dts, attrs: [((), dtypes.string)], kernel=_format_kernel)


def format(template, inputs, placeholder="{}", summarize=3, name=None):  # noqa: A001
    """``tf.strings.format``: each ``placeholder`` in ``template`` replaced by one
    input's text as TF prints it (``[1.5 2 3]``, strings in quotes)."""
    inputs = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
    if template.count(placeholder) != len(inputs):
        raise ValueError(f"num placeholders in template and num inputs must match: {template.count(placeholder)} "
                         f"vs. {len(inputs)}")
    xs = _string_args(inputs)
    return apply_op("StringFormat", xs, {"template": template, "placeholder": placeholder,
                                         "summarize": int(summarize), "T": tuple(x.dtype for x in xs)},
                    name=name or "StringFormat")


def _as_string_text(v, attrs, dtype):
    if dtype.is_bool:
        return b"true" if v else b"false"
    if dtype.is_floating:
        prec = attrs["precision"]
        spec = "%" + ("e" if attrs["scientific"] else "g" if attrs["shortest"] else "f")
        text = (spec.replace("%", f"%.{prec}") if prec >= 0 else spec) % float(v)
        return text.encode()
    return str(int(v)).encode()


def _as_string_kernel(attrs, x):
    dtype = attrs["T"]
    return _elementwise(lambda v: _as_string_text(v, attrs, dtype), x)


_register("AsString", infer=lambda shapes, dts, attrs: [(shapes[0], dtypes.string)], kernel=_as_string_kernel)


def as_string(input, precision=-1, scientific=False, shortest=False, width=-1, fill="", name=None):  # noqa: A002
    """``tf.strings.as_string``: numbers as text (floats as C's %f by default)."""
    (x,) = _string_args([input])
    check_dtype("AsString", x.dtype, NUMBERS + (dtypes.bool_,), "input")
    return apply_op("AsString", [x], {"precision": int(precision), "scientific": bool(scientific),
                                      "shortest": bool(shortest), "T": x.dtype}, name=name or "AsString")


def _to_number(attrs, x):
    out_type = attrs["out_type"]

    def parse(b):
        text = b.decode("utf-8", "replace").strip()
        try:
            return out_type.np.type(int(text) if out_type.is_integer else float(text))
        except (ValueError, OverflowError):
            raise ValueError(f"StringToNumberOp could not correctly convert string: {text}") from None
    return _elementwise(parse, x, otype=out_type.np)


_register("StringToNumber", infer=lambda shapes, dts, attrs: [(shapes[0], attrs["out_type"])], kernel=_to_number)


def to_number(string_tensor, out_type=dtypes.float32, name=None):
    (x,) = _string_args([string_tensor])
    _strings("StringToNumber", [x.dtype])
    return apply_op("StringToNumber", [x], {"out_type": dtypes.as_dtype(out_type)}, name=name or "StringToNumber")


# ---------------------------------------------------------------- reduce_join
def _reduce_join_infer(shapes, dts, attrs):
    _strings("ReduceJoin", dts)
    s = shapes[0]
    if s is None:
        return [(None, dtypes.string)]
    axes = normalize_axes(attrs["axis"], len(s))
    keep = attrs["keepdims"]
    return [(tuple(1 if i in axes else d for i, d in enumerate(s)) if keep else
             tuple(d for i, d in enumerate(s) if i not in axes), dtypes.string)]


def _reduce_join_kernel(attrs, x):
    axes = normalize_axes(attrs["axis"], x.ndim)
    sep = attrs["separator"]
    kept = [d for d in range(x.ndim) if d not in axes]
    moved = np.transpose(x, kept + list(axes)).reshape([x.shape[d] for d in kept] + [-1])
    out = np.empty(moved.shape[:-1], object)
    for idx in np.ndindex(*out.shape):
        out[idx] = sep.join(moved[idx])
    if attrs["keepdims"]:
        out = out.reshape([1 if d in axes else x.shape[d] for d in range(x.ndim)])
    return out


_register("ReduceJoin", infer=_reduce_join_infer, kernel=_reduce_join_kernel)


def reduce_join(inputs, axis=None, keepdims=False, separator="", name=None):
    (x,) = _string_args([inputs])
    axis = None if axis is None else tuple(np.asarray(axis).reshape(-1).tolist())
    return apply_op("ReduceJoin", [x], {"axis": axis, "keepdims": bool(keepdims),
                                        "separator": _bytes(separator)}, name=name or "ReduceJoin")


# ---------------------------------------------------------------- strip / substr / regex
_register("StringStrip", infer=_unary_string_infer("StringStrip"),
         kernel=lambda attrs, x: _elementwise(bytes.strip, x))


def strip(input, name=None):  # noqa: A002
    """``tf.strings.strip``: leading and trailing whitespace removed."""
    (x,) = _string_args([input])
    return apply_op("StringStrip", [x], name=name or "StringStrip")


def _substr(attrs, x, pos, length):
    def one(b, p, n):
        if not -len(b) <= p <= len(b):
            raise ValueError(f"pos {p} out of range for string b'{b.decode('utf-8', 'replace')}' at index 0")
        p = p % len(b) if p < 0 else p
        return b[p:p + n]
    return _elementwise(one, x, pos, length)


def _substr_infer(shapes, dts, attrs):
    _strings("Substr", dts[:1])
    for d in dts[1:]:
        check_dtype("Substr", d, (dtypes.int32, dtypes.int64), "pos")
    shape = shapes[0]
    for sh in shapes[1:]:
        shape = broadcast_dims(shape, sh, "'Substr'")
    return [(shape, dtypes.string)]


_register("Substr", infer=_substr_infer, kernel=_substr)


def substr(input, pos, len, unit="BYTE", name=None):  # noqa: A002
    """``tf.strings.substr``: ``len`` bytes from ``pos`` (negative: from the end)."""
    if unit != "BYTE":
        raise NotImplementedError("jitgrad's tf.strings.substr counts bytes only (unit='BYTE').")
    xs = _string_args([input, pos, len])
    return apply_op("Substr", xs, name=name or "Substr")


def _regex(pattern):
    return re.compile(_bytes(pattern))


_register("RegexReplace", infer=_unary_string_infer("RegexReplace"),
         kernel=lambda attrs, x: _elementwise(
             lambda b: _regex(attrs["pattern"]).sub(attrs["rewrite"], b, count=0 if attrs["global"] else 1), x))
_register("RegexFullMatch", infer=_unary_string_infer("RegexFullMatch", dtypes.bool_),
         kernel=lambda attrs, x: _elementwise(lambda b: _regex(attrs["pattern"]).fullmatch(b) is not None, x,
                                              otype=bool))


def regex_replace(input, pattern, rewrite, replace_global=True, name=None):  # noqa: A002
    """``tf.strings.regex_replace`` (Python's ``re`` syntax, which agrees with TF's RE2 on common patterns)."""
    (x,) = _string_args([input])
    return apply_op("RegexReplace", [x], {"pattern": _bytes(pattern), "rewrite": _bytes(rewrite),
                                          "global": bool(replace_global)}, name=name or "RegexReplace")


def regex_full_match(input, pattern, name=None):  # noqa: A002
    (x,) = _string_args([input])
    return apply_op("RegexFullMatch", [x], {"pattern": _bytes(pattern)}, name=name or "RegexFullMatch")


# ---------------------------------------------------------------- split of a scalar
def _split_kernel(attrs, x):
    b = x[()]
    sep, maxsplit = attrs["sep"], attrs["maxsplit"]
    if attrs["bytes"]:
        parts = [b[i:i + 1] for i in range(len(b))]
    else:
        parts = b.split(sep, maxsplit) if sep is not None else b.split(None, maxsplit)
    out = np.empty(len(parts), object)
    out[:] = parts
    return out


_register("StringSplitScalar", infer=lambda shapes, dts, attrs: [((None,), dtypes.string)], kernel=_split_kernel,
         data_dependent_shape=True)


def _split(input, sep, maxsplit, as_bytes, name):
    (x,) = _string_args([input])
    _strings("StringSplit", [x.dtype])
    if x.shape.rank != 0:
        raise NotImplementedError("tf.strings.split of a tensor of rank >= 1 returns a RaggedTensor, which jitgrad "
                                  "does not have (a scalar gives a 1-D tensor).")
    return apply_op("StringSplitScalar", [x], {"sep": None if sep is None else _bytes(sep),
                                               "maxsplit": int(maxsplit), "bytes": as_bytes},
                    name=name or "StringSplit")


def split(input, sep=None, maxsplit=-1, name=None):  # noqa: A002
    """``tf.strings.split`` of a scalar: a 1-D string tensor (whitespace runs when sep is None)."""
    if sep == "":
        raise ValueError("sep must not be empty")
    return _split(input, sep, maxsplit, False, name)


def bytes_split(input, name=None):  # noqa: A002
    """``tf.strings.bytes_split`` of a scalar: its bytes, one per element."""
    return _split(input, None, -1, True, name)
