"""Turning Python values, numpy arrays, variables and tensors into tensors.

TensorFlow's inference rules: Python float -> float32, int -> int32 (int64 if
it does not fit), bool -> bool, numpy arrays and scalars keep their dtype,
and a (nested) list that contains tensors is packed with ``stack``.
"""
import numpy as np

from . import context, dispatch, dtypes
from .graph import Tensor
from .ops.registry import apply_op

_INT32 = np.iinfo(np.int32)


def is_tensorlike(v):
    return isinstance(v, (Tensor, dispatch.eager_tensor)) or hasattr(v, "_jitgrad_to_tensor")


def _contains_tensor(v):
    if isinstance(v, (list, tuple)):
        return any(_contains_tensor(x) for x in v)
    return is_tensorlike(v)


def _unconvertible(x):
    """TF's error for a value no tensor can hold: None is a ValueError; other objects
    are a ValueError when executing eagerly and a TypeError while building a graph
    (strings, which TF converts to string tensors, fail later with a TypeError)."""
    if x is None:
        return ValueError("None values not supported.")
    if context.executing_eagerly() and not isinstance(x, (str, bytes)):
        return ValueError(f"Attempt to convert a value ({x!r}) with an unsupported type ({type(x)}) to a Tensor.")
    return TypeError(f"Can't convert {type(x).__name__} ({x!r}) to a Tensor; "
                     "supported are bool, int, float and nested lists of them.")


def _first_leaf(value):
    while isinstance(value, (list, tuple)) and value:
        value = value[0]
    return value


def _is_empty_sequence(value):
    """A (rectangular) nested sequence with no element: [], (), [[]], [np.zeros((0, 3))]."""
    leaf = value
    while isinstance(leaf, (list, tuple)):
        if not leaf:
            return True
        leaf = leaf[0]
    return isinstance(leaf, np.ndarray) and leaf.size == 0 and isinstance(value, (list, tuple))


def _array_kinds(items):
    """The element kinds of a sequence of numeric ndarrays, read from their dtypes (and an
    integer array's range) instead of element by element -- a list of large arrays took
    seconds to walk; None when an item is not a bool/int/float/complex ndarray."""
    kinds = set()
    for a in items:
        if type(a) is not np.ndarray or a.dtype.kind not in "biufc":
            return None
        if not a.size:
            continue
        k = a.dtype.kind
        if k in "iu":
            kinds.add("i64" if int(a.min()) < _INT32.min or int(a.max()) > _INT32.max else "i")
        else:
            kinds.add({"b": "b", "f": "f", "c": "c"}[k])
    return kinds


def _infer_python_dtype(value):
    """TF's dtype for a Python scalar / nested list (no tensors inside).  As TF's sequence
    conversion, a sequence whose first element is a numpy float (scalar or array) keeps
    that float's dtype: [np.float64(1), 2.0] is float64, [2.0, np.float64(1)] float32."""
    kinds = _array_kinds(value) if isinstance(value, (list, tuple)) and value else None
    if kinds is not None:
        if len({a.shape for a in value}) != 1:
            raise _non_rectangular(value)
    else:
        kinds = _element_kinds(value)
    dtype = _dtype_of_kinds(kinds, value)
    first = _first_leaf(value) if isinstance(value, (list, tuple)) else None
    if dtype is dtypes.float32 and isinstance(first, (np.ndarray, np.floating)) and \
            first.dtype in (np.float16, np.float32, np.float64):
        return dtypes.as_dtype(first.dtype)
    return dtype


def _element_kinds(value):
    flat = np.asarray(value, dtype=object).ravel() if isinstance(value, (list, tuple)) else [value]
    kinds = set()
    for x in flat:
        if isinstance(x, (bool, np.bool_)):
            kinds.add("b")
        elif isinstance(x, (int, np.integer)):
            kinds.add("i64" if not (_INT32.min <= int(x) <= _INT32.max) else "i")
        elif isinstance(x, (float, np.floating)):
            kinds.add("f")
        elif isinstance(x, (complex, np.complexfloating)):
            kinds.add("c")
        elif isinstance(x, (str, bytes, np.str_, np.bytes_)):
            kinds.add("s")
        elif isinstance(x, (list, tuple)):
            raise _non_rectangular(value)     # (not _unconvertible's: a TypeError in a graph)
        else:
            raise _unconvertible(x)
    return kinds


def _dtype_of_kinds(kinds, value):
    if not kinds:
        return dtypes.float32
    if "s" in kinds:
        if len(kinds) > 1:
            raise ValueError(f"Can't convert Python sequence with mixed types to Tensor: {value!r}")
        return dtypes.string
    if "b" in kinds and len(kinds) > 1:
        # TF's sequence conversion takes its converter from the first element: a bool (or
        # any ndarray) first refuses the numbers, a number first converts the bools as 0 / 1
        if isinstance(_first_leaf(value), (bool, np.bool_, np.ndarray)):
            raise ValueError(f"Can't convert Python sequence with mixed types to Tensor: {value!r}")
        kinds = kinds - {"b"}
    if "c" in kinds:
        return dtypes.complex128
    if "f" in kinds:
        return dtypes.float32
    if "i64" in kinds:
        return dtypes.int64
    if "i" in kinds:
        return dtypes.int32
    return dtypes.bool_


def _as_bytes(x):
    if isinstance(x, (bytes, np.bytes_)):
        return bytes(x)
    if isinstance(x, (str, np.str_)):
        return str(x).encode("utf-8")
    raise TypeError(f"Can't convert {type(x).__name__} ({x!r}) to a string Tensor.")


def _non_rectangular(value):
    """TF's error for a nested sequence whose rows differ in length, at any depth: numpy's
    object array of it holds a list or tuple where rectangular data has an element."""
    return ValueError(f"Can't convert non-rectangular Python sequence to Tensor: {value!r}")


def string_array(value):
    """str / bytes (nested lists, numpy U/S/object arrays) as an object array of bytes (tf.string)."""
    arr = np.asarray(value, dtype=object)
    out = np.empty(arr.shape, object)
    for idx in np.ndindex(*arr.shape):
        if isinstance(arr[idx], (list, tuple)):
            raise _non_rectangular(value)
        out[idx] = _as_bytes(arr[idx])
    return out


def _infer_python_dtype_or_none(value):
    try:
        return _infer_python_dtype(value)
    except TypeError:
        return None


def to_numpy(value, dtype=None):
    """A constant value as a numpy array of a supported dtype (TF's rules)."""
    want = None if dtype is None else dtypes.as_dtype(dtype)
    is_array = isinstance(value, (np.ndarray, np.generic))
    # a Python value's dtype, inferred once (None: not inferable; inferred again below to raise why)
    inferred = None if is_array or (want is not None and want.is_string) else _infer_python_dtype_or_none(value)
    if (is_array and np.asarray(value).dtype.kind in "USO") or (want is not None and want.is_string) or \
            inferred is dtypes.string:
        if want is not None and not want.is_string:
            raise TypeError(f"Cannot convert {value!r} to EagerTensor of dtype {want.name}")
        return string_array(value)
    if is_array:
        arr = np.asarray(value)
        if arr.dtype.kind == "V":     # bfloat16 (ml_dtypes) or a structured dtype
            try:
                dtypes.as_dtype(arr.dtype)
            except TypeError:
                raise TypeError(f"Can't convert an array of dtype {arr.dtype} to a Tensor.") from None
        if want is None:
            return np.asarray(arr.astype(dtypes.as_dtype(arr.dtype).np, copy=False), order="C")
        if arr.size == 0:      # np.array([]) is float64: no element to disagree with the dtype (as [])
            return np.empty(arr.shape, want.np)
        if arr.dtype in dtypes.FLOAT_NP and want.is_integer and not np.all(np.mod(arr, 1) == 0):
            raise TypeError(f"Cannot convert {value!r} to a tensor of dtype {want.name}: it has fractions.")
        if arr.dtype.kind == "c" and not want.is_complex:
            raise TypeError(f"Cannot convert an array of dtype {arr.dtype} to a tensor of dtype {want.name}.")
        return np.asarray(arr.astype(want.np), order="C")
    if isinstance(value, (list, tuple)) and value and isinstance(value[0], (list, tuple)):
        lens = {len(v) if isinstance(v, (list, tuple)) else -1 for v in value}
        if len(lens) != 1:
            raise _non_rectangular(value)
    if inferred is None:
        inferred = _infer_python_dtype(value)
    if want is None:
        want = inferred
    elif _is_empty_sequence(value):
        pass    # no element to disagree with the dtype asked for: [], [[]], () take any (as TF)
    elif (inferred.is_floating and not (want.is_floating or want.is_complex)) or \
            (inferred.is_complex and not want.is_complex):
        raise TypeError(f"Cannot convert {value!r} to EagerTensor of dtype {want.name}")
    elif inferred.is_bool != want.is_bool and not (inferred.is_bool and want in _BOOL_CONVERTS_TO):
        raise TypeError(f"Cannot convert {value!r} to EagerTensor of dtype {want.name}")
    if want.is_integer and inferred.is_integer:
        return _python_ints(value, want)
    try:
        with np.errstate(over="ignore"):
            return np.array(value, dtype=want.np)
    except OverflowError:
        raise ValueError(_OUT_OF_RANGE) from None


# TF 2.21's eager conversion of a Python bool (or a list of them) to a numeric dtype: these
# take it as 0 / 1 (tf.constant(True, tf.int32) is 1, float_tensor + True adds 1.0); int8,
# int16, uint8, uint16, uint32, bfloat16 and complex64 refuse it (TypeError). Checked with real TF.
_BOOL_CONVERTS_TO = frozenset((dtypes.int32, dtypes.int64, dtypes.uint64, dtypes.float16, dtypes.float32,
                               dtypes.float64, dtypes.complex128))
_OUT_OF_RANGE = "Can't convert Python sequence with out-of-range integer to Tensor."


def _python_ints(value, want):
    """Python ints as ``want`` by TF 2.21's eager rules: ints int64 holds wrap into the dtype,
    as a C cast (tf.constant(300, tf.int8) is 44, tf.constant(-1, tf.uint8) 255, int32 + 2**40
    adds 0); uint64 also takes [2**63, 2**64); anything else out of int64's range is
    TF's ValueError (so is a negative int for uint64: TF raises a SystemError there)."""
    try:
        wide = np.array(value, dtype=np.int64)
    except OverflowError:
        if want is not dtypes.uint64:
            raise ValueError(_OUT_OF_RANGE) from None
        try:
            return np.array(value, dtype=np.uint64)
        except OverflowError:
            raise ValueError(_OUT_OF_RANGE) from None
    if want is dtypes.uint64 and np.any(wide < 0):
        raise ValueError(_OUT_OF_RANGE)
    return wide.astype(want.np)


def convert_to_tensor(value, dtype=None, name=None, preferred_dtype=None, graph=None):
    """``tf.convert_to_tensor``: returns a graph Tensor or an EagerTensor."""
    EagerTensor = dispatch.eager_tensor   # eager.py imports this module
    want = None if dtype is None else dtypes.as_dtype(dtype)
    if isinstance(value, Tensor):
        if want is not None and value.dtype != want:
            raise ValueError(f"Tensor conversion requested dtype {want.name} for Tensor with "
                             f"dtype {value.dtype.name}: {value!r}")
        return value
    hook = getattr(value, "_jitgrad_to_tensor", None)
    if hook is not None:
        t = hook(graph)
        if want is not None and t.dtype != want:
            raise ValueError(f"Tensor conversion requested dtype {want.name} for variable with "
                             f"dtype {t.dtype.name}")
        return t
    building = graph is not None or not context.executing_eagerly()
    if isinstance(value, EagerTensor):
        if want is not None and value.dtype != want:
            raise ValueError(f"Tensor conversion requested dtype {want.name} for Tensor with "
                             f"dtype {value.dtype.name}: {value!r}")
        if not building:
            return value
        return eager_capture(value, graph or context.get_default_graph(), name)
    if _contains_tensor(value):
        items = [convert_to_tensor(v, dtype=want, graph=graph) for v in value]
        return dispatch.stack(items, name=name or "packed")
    if want is None and preferred_dtype is not None:
        try:
            arr = to_numpy(value, preferred_dtype)
        except (TypeError, ValueError):
            arr = to_numpy(value)
    else:
        arr = to_numpy(value, want)
    if building:
        return _graph_const(arr, graph, name or "Const")
    return EagerTensor(arr)


def eager_capture(value, g, name=None):
    """An eager tensor used in graph ``g`` (a function's closure, typically) is captured once,
    as TF captures it: one Const in the outermost graph being built that every use converts
    to -- cond branches and loop bodies capture that tensor -- so tf.gradients and tapes can
    differentiate with respect to it (a fresh Const per use was unconnected: None, or the
    uses inside a branch were lost)."""
    top = g
    while getattr(top, "outer_graph", None) is not None:
        top = top.outer_graph
    captured = top.__dict__.setdefault("_eager_captures", {})
    hit = captured.get(id(value))
    if hit is None or hit[0] is not value:
        with top.control_dependencies(None):
            hit = captured[id(value)] = (value, _graph_const(value._value, top, name or "Const"))
    return hit[1] if g is top else g.capture(hit[1])


def _graph_const(arr, graph, name):
    g = graph or context.get_default_graph()
    with _in_graph(g):
        return apply_op("Const", [], {"value": arr, "dtype": dtypes.as_dtype(arr.dtype)}, name=name)


class _in_graph:
    """Makes ``g`` the default graph unless it already is."""

    def __init__(self, g):
        self.g = g
        self.pushed = False

    def __enter__(self):
        if context._stack()[-1:] != [self.g]:
            context.push_graph(self.g)
            self.pushed = True

    def __exit__(self, *exc):
        if self.pushed:
            context.pop_graph(self.g)


def graph_of(values):
    """The graph that symbolic inputs live in, or None in pure eager use."""
    for v in values:
        if isinstance(v, Tensor):
            return v.graph
        g = getattr(v, "_graph_for_conversion", None)
        if g is not None:
            return g
    if not context.executing_eagerly():
        return context.get_default_graph()
    return None


_F32_MAX = float(np.finfo(np.float32).max)
_SCALAR_TYPES = (float, int, bool)


def _fast_scalar(v, want):
    """``to_numpy(v, want)`` for a Python scalar in the cases that cannot fail,
    warn or lose range (else None: the caller takes the general path)."""
    tv = v.__class__
    kind = want.np.kind
    if tv is float:
        if kind == "f" and (want is not dtypes.float32 or -_F32_MAX <= v <= _F32_MAX):
            return np.array(v, dtype=want.np)
    elif tv is int:
        if want.np.itemsize >= 4 and kind in "fi" and -2147483648 <= v <= 2147483647:   # (float16: may overflow)
            return np.array(v, dtype=want.np)
    elif tv is bool:
        if kind == "b":
            return np.array(v, dtype=want.np)
    return None


def _convert_all_eager(values):
    """convert_all's eager fast path: every value is an EagerTensor or a
    Python scalar, and at least one is a tensor. None when it does not apply."""
    et = dispatch.eager_types
    first = None
    for v in values:
        c = v.__class__
        if c in et:
            if first is None:
                first = v
        elif c not in _SCALAR_TYPES:
            return None
    if first is None:
        return None
    want = None
    out = []
    for v in values:
        if v.__class__ in et:
            out.append(v)
            continue
        if want is None:
            want = first.dtype
        arr = _fast_scalar(v, want)
        if arr is None:
            return None
        out.append(dispatch.eager_tensor(arr))
    return out


def convert_all(values, dtype=None, graph=None):
    """Converts the inputs of an op whose inputs share one dtype, by TF's rule
    (``args_to_matching_eager``): Python values adopt the dtype of the first
    tensor among them; with no tensor, the first value's own dtype is used for
    the rest (``tf.maximum(0., [1, -1])`` is float32, ``tf.maximum([1, -1], 0.)``
    a TypeError). All results live in the inputs' graph.

    TF's graph mode is stricter (it converts strictly left to right, so
    ``tf.maximum(0, x_float)`` is a TypeError there); jitgrad accepts it as
    TF's eager mode does (README, Known differences)."""
    if dtype is None and graph is None and context._eager_enabled[0] \
            and not getattr(context._state, "graphs", None):
        out = _convert_all_eager(values)
        if out is not None:
            return out
    g = graph or graph_of(values)
    if dtype is None:
        for v in values:
            if is_tensorlike(v) and not isinstance(v, (list, tuple)):
                dtype = getattr(v, "dtype", None)
                break
    out = []
    for v in values:
        if is_tensorlike(v):
            out.append(convert_to_tensor(v, graph=g))
        elif dtype is not None:
            out.append(convert_to_tensor(v, dtype=dtype, graph=g))
        else:
            t = convert_to_tensor(v, graph=g)
            dtype = t.dtype
            out.append(t)
    return out
