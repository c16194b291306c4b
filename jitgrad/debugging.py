"""``tf.debugging``: TF's assertions and numeric checks, with TF's messages.

Each check is static where the values are known (eagerly, or constants while a
graph is built) and raises at once; otherwise it is a ``tf.Assert`` op
(assert_ops.py), so it runs inside Session.run and compiled functions, and can
be used with ``tf.control_dependencies``. Eagerly a check returns None, in a
graph the op (a NoOp when the check passed statically, as TF's rank checks).

The ``*_v1`` functions take TF 1's arguments (``data`` before ``summarize``);
the plain names are TF 2's (``message`` first). Message texts follow TF's
check_ops.py: an eager failure lists the first ``summarize`` (3) differing
elements; a graph failure is the Assert's ``assertion failed: [...]`` text.
"""
import numpy as np

from . import context, dtypes
from .assert_ops import Assert, assert_op
from .convert import convert_to_tensor
from .errors import InvalidArgumentError
from .graph import Tensor
from .eager import EagerTensor
from .ops import array_ops as _a, math_ops as _m, reduction_ops as _r
from .ops.array_ops import get_static_value
from .variables import group, no_op


def _eager():
    return context.executing_eagerly()


def _no_op():
    if _eager():
        return None
    return no_op(name="static_checks_determined_all_ok")


def _prefix(message):
    return f"{message}.  " if message else ""


def _describe(x):
    """How TF names a tensor in a message: its shape and dtype eagerly, its name in a graph."""
    return f"shape={x.shape} dtype={x.dtype.name}" if _eager() else x.name


def _summary(summarize):
    """TF's default of 3 elements; a negative count means all of them."""
    if summarize is None:
        return 3
    return 10**9 if summarize < 0 else int(summarize)


def _pretty(item, summarize):
    """One line of an eager failure's message (TF's ``_pretty_print``)."""
    if not isinstance(item, (Tensor, EagerTensor)):
        return str(item)
    arr = item.numpy()
    if arr.ndim == 0:
        return str(arr)
    flat = arr.reshape(-1)
    texts = [str(v) for v in flat[:summarize]]
    if len(texts) < flat.size:
        texts.append("...")
    return str(texts)


def _differences(sym, x, y, ok, summarize):
    """The default eager message of a failed comparison: where x and y differ
    (when their shapes agree) and their first elements."""
    data = [f"Condition x {sym} y did not hold."]
    if summarize <= 0:
        return data
    xv, yv = np.asarray(x.numpy()), np.asarray(y.numpy())
    if xv.shape == yv.shape and xv.ndim > 0:
        bad = ~ok
        idx = np.argwhere(bad)
        n = min(summarize, idx.shape[0])
        data += [f"Indices of first {n} different values:", idx[:n],
                 "Corresponding x values:", xv[bad].reshape(-1)[:n],
                 "Corresponding y values:", yv[bad].reshape(-1)[:n]]
    xf, yf = xv.reshape(-1), yv.reshape(-1)
    nx, ny = min(xf.size, summarize), min(yf.size, summarize)
    return data + [f"First {nx} elements of x:", xf[:nx], f"First {ny} elements of y:", yf[:ny]]


def _binary_assert(sym, op, x, y, data, summarize, message, name):
    x = convert_to_tensor(x)
    y = convert_to_tensor(y, dtype=x.dtype) if not isinstance(y, (Tensor, EagerTensor)) else y
    holds = op(x, y)
    if _eager():
        ok = np.asarray(holds.numpy())
        if ok.all():
            return None
        summarize = _summary(summarize)
        if data is None:
            data = _differences(sym, x, y, ok, summarize)
        if message is not None:
            data = [message] + list(data)
        raise InvalidArgumentError("\n".join(_pretty(d, summarize) for d in data))
    if data is None:
        data = [f"Condition x {sym} y did not hold element-wise:", f"x ({x.name}) = ", x, f"y ({y.name}) = ", y]
    if message is not None:
        data = [message] + list(data)
    xs, ys = get_static_value(x), get_static_value(y)
    if xs is not None and ys is not None and not np.all(_NP_OPS[sym](xs, ys)):
        raise InvalidArgumentError("\n".join(_static_text(d) for d in data))
    return Assert(_r.reduce_all(holds), data, summarize=summarize, name=name or "Assert")


def _static_text(item):
    if not isinstance(item, (Tensor, EagerTensor)):
        return str(item)
    value = get_static_value(item)
    return str(item) if value is None else str(value)


_NP_OPS = {"==": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal, ">": np.greater,
           ">=": np.greater_equal}


# ---------------------------------------------------------------- comparisons (TF 1 arguments)
def _comparison(sym, op, name):
    def check(x, y, data=None, summarize=None, message=None, name=None):
        return _binary_assert(sym, op, x, y, data, summarize, message, name)
    check.__name__ = name
    return check


assert_equal_v1 = _comparison("==", _m.equal, "assert_equal_v1")
assert_none_equal_v1 = _comparison("!=", _m.not_equal, "assert_none_equal_v1")
assert_less_v1 = _comparison("<", _m.less, "assert_less_v1")
assert_less_equal_v1 = _comparison("<=", _m.less_equal, "assert_less_equal_v1")
assert_greater_v1 = _comparison(">", _m.greater, "assert_greater_v1")
assert_greater_equal_v1 = _comparison(">=", _m.greater_equal, "assert_greater_equal_v1")


def _sign_assert(compare, zero_first, text):
    """assert_positive & co: a comparison with zero whose message names x."""
    def check(x, data=None, summarize=None, message=None, name=None):
        x = convert_to_tensor(x)
        if data is None:
            data = [_prefix(message), f"Condition x {text} 0 did not hold element-wise:", f"x ({_describe(x)}) = ", x]
        zero = convert_to_tensor(np.zeros((), x.dtype.np), graph=None if _eager() else x.graph)
        a, b = (zero, x) if zero_first else (x, zero)
        return compare(a, b, data=data, summarize=summarize, name=name)
    return check


assert_positive_v1 = _sign_assert(assert_less_v1, True, ">")
assert_negative_v1 = _sign_assert(assert_less_v1, False, "<")
assert_non_negative_v1 = _sign_assert(assert_less_equal_v1, True, ">=")
assert_non_positive_v1 = _sign_assert(assert_less_equal_v1, False, "<=")


def assert_near_v1(x, y, rtol=None, atol=None, data=None, summarize=None, message=None, name=None):
    """|x - y| < atol + rtol * |y| everywhere; tolerances default to 10 eps of x's dtype."""
    x = convert_to_tensor(x)
    y = convert_to_tensor(y, dtype=x.dtype)
    real = x.dtype.real_dtype if x.dtype.is_complex else x.dtype
    eps = np.finfo(real.np).eps
    rtol = convert_to_tensor(10 * eps if rtol is None else rtol, dtype=real)
    atol = convert_to_tensor(10 * eps if atol is None else atol, dtype=real)
    if data is None:
        data = [_prefix(message), f"x and y not equal to tolerance rtol = {rtol!s}, atol = {atol!s}",
                f"x ({_describe(x)}) = ", x, f"y ({_describe(y)}) = ", y]
    close = _r.reduce_all(_m.less(_m.abs(x - y), atol + rtol * _m.abs(y)))
    return Assert(close, data, summarize=summarize, name=name or "assert_near")


# ---------------------------------------------------------------- ranks, shapes, dtypes
def _known_int(value, what):
    v = get_static_value(value)
    if v is None:
        raise NotImplementedError(f"{what} must be known when the graph is built")
    return int(np.asarray(v))


def _rank_check(x, holds_static, holds_tensor, what, wanted, data, summarize, message, name):
    """A rank check: at once when x's rank is known (TF's ValueError, or a NoOp / None),
    else an Assert on the size of x's shape."""
    x = convert_to_tensor(x)
    rank = x.shape.rank
    if rank is not None:
        if not holds_static(rank):
            who = "" if _eager() else x.name
            raise ValueError(f"{_prefix(message)}Tensor {who} must have rank {what} {wanted}.  "
                             f"Received rank {rank}, shape {x.shape}".replace("rank  ", "rank "))
        return _no_op()
    if data is None:
        data = [_prefix(message), f"Tensor {x.name} must have rank {what}".rstrip(), wanted, "Received shape: ",
                _a.shape(x)]
    return Assert(holds_tensor(_a.size(_a.shape(x))), data, summarize=summarize, name=name or "assert_rank")


def assert_rank_v1(x, rank, data=None, summarize=None, message=None, name=None):
    r = _known_int(rank, "rank")
    return _rank_check(x, lambda k: k == r, lambda k: _m.equal(k, r), "", r, data, summarize, message, name)


def assert_rank_at_least_v1(x, rank, data=None, summarize=None, message=None, name=None):
    r = _known_int(rank, "rank")
    return _rank_check(x, lambda k: k >= r, lambda k: _m.greater_equal(k, r), "at least", r, data, summarize,
                       message, name)


def assert_rank_in_v1(x, ranks, data=None, summarize=None, message=None, name=None):
    rs = tuple(_known_int(r, "ranks") for r in ranks)
    return _rank_check(x, lambda k: k in rs, lambda k: _r.reduce_any(_m.equal(k, list(rs))), "in", rs, data,
                       summarize, message, name)


def assert_scalar(tensor, message=None, name=None):
    x = convert_to_tensor(tensor)
    if x.shape.rank is None:
        return assert_rank_v1(x, 0, message=message, name=name)
    if x.shape.rank != 0:
        raise ValueError(f"{_prefix(message)}Expected scalar shape, saw shape: {x.shape}.")
    return None if _eager() else x


def assert_type(tensor, tf_type, message=None, name=None):
    x = convert_to_tensor(tensor)
    tf_type = dtypes.as_dtype(tf_type)
    if x.dtype != tf_type:
        who = "tensor" if _eager() else x.name
        raise TypeError(f"{_prefix(message)}{who} must be of type {tf_type!r}; got {x.dtype!r}")
    return _no_op()


def assert_integer(x, message=None, name=None):
    x = convert_to_tensor(x)
    if not x.dtype.is_integer:
        who = "tensor" if _eager() else x.name
        raise TypeError(f'{_prefix(message)}Expected "x" to be integer type.  Found: {who} of dtype {x.dtype}')
    return _no_op()


def _spec_dims(x, spec, message):
    """The (index in x's shape, wanted size or symbol) pairs of one assert_shapes entry."""
    if isinstance(spec, (str, bytes)) or not hasattr(spec, "__iter__"):
        raise ValueError(f"Tensor {_describe(x)}.  Specified shape must be an iterable.  An iterable has the "
                         f"attribute `__iter__` or `__getitem__`.  Received specified shape: {spec}")
    spec = list(spec)
    ellipsis = bool(spec) and spec[0] in ("...", "*")
    if ellipsis:
        spec = spec[1:]
        assert_rank_at_least_v1(x, len(spec), message=message)
    else:
        assert_rank_v1(x, len(spec), message=message)
    rank = x.shape.rank
    offset = rank - len(spec) if rank is not None else None
    if ellipsis and offset is None:
        raise NotImplementedError("assert_shapes with '...' needs the tensor's rank known")
    return [((offset or 0) + i, s) for i, s in enumerate(spec) if s not in (".", "*")]


def assert_shapes(shapes, data=None, summarize=None, message=None, name=None):
    """``tf.debugging.assert_shapes``: every tensor has its spec's rank, sizes given
    as ints match, and a symbol ('N') has one size across all tensors. Sizes known
    when the graph is built are checked at once (ValueError, TF's text); the others
    by an Assert op."""
    pairs = list(shapes.items()) if isinstance(shapes, dict) else list(shapes)
    seen = {}       # symbol -> (its static size or None, its size tensor, who set it)
    runtime = []
    for t, spec in pairs:
        x = convert_to_tensor(t)
        for dim, want in _spec_dims(x, spec, message):
            size = x.shape.as_list()[dim] if x.shape.rank is not None else None
            if isinstance(want, str):
                if want not in seen:
                    seen[want] = (size, lambda x=x, dim=dim: _a.shape(x)[dim], f"Specified by tensor {_describe(x)} "
                                                                               f"dimension {dim}")
                    continue
                want_size, want_tensor, origin = seen[want]
            else:
                want_size, want_tensor, origin = int(want), None, "Specified explicitly"
            if size is not None and want_size is not None:
                if size != want_size:
                    raise ValueError(f"{_prefix(message)}{origin}.  Tensor {_describe(x)} dimension {dim} must have "
                                     f"size {want_size}.  Received size {size}, shape {x.shape}")
                continue
            target = want_tensor() if want_tensor is not None else want_size
            runtime.append((_a.shape(x)[dim], target, x, dim, origin))
    if not runtime:
        return _no_op()
    checks = [assert_equal_v1(got, want, data=data if data is not None else [
        _prefix(message), f"{origin}.  Tensor {x.name} dimension {dim} must have size", want, "Received size",
        got], summarize=summarize) for got, want, x, dim, origin in runtime]
    if _eager():
        return None
    return group(*checks, name=name or "assert_shapes")


# ---------------------------------------------------------------- numbers
_NUMERIC = frozenset(d for d in dtypes.ALL if (d.is_floating or d.is_integer or d.is_complex))


def is_numeric_tensor(tensor):
    """True for a tensor (not a Python / numpy value) of a number dtype."""
    return isinstance(tensor, (Tensor, EagerTensor)) and tensor.dtype in _NUMERIC


def check_numerics(tensor, message, name=None):
    """``tf.debugging.check_numerics``: the tensor, after checking it holds no NaN
    or infinity (InvalidArgumentError "<message> : Tensor had NaN values"). The
    check is an Assert (so it compiles), the result an Identity behind it;
    the gradient passes through unchanged."""
    x = convert_to_tensor(tensor)
    if not x.dtype.is_floating:
        raise TypeError(f"Value for attr 'T' of {x.dtype.name} is not in the list of allowed values: "
                        "bfloat16, half, float, double")
    has_nan = _r.reduce_any(_m.is_nan(x))
    has_inf = _r.reduce_any(_m.is_inf(x))
    ok = _m.logical_not(_m.logical_or(has_nan, has_inf))
    check = assert_op(ok, [has_nan, has_inf], {"summarize": 3, "numerics": str(message)}, name or "CheckNumerics")
    if _eager():
        return x
    with context.control_dependencies([check]):
        return _a.identity(x)


def assert_all_finite(x, message, name=None):
    return check_numerics(x, message, name=name or "VerifyFinite")


def verify_tensor_all_finite(t=None, msg=None, name=None, x=None, message=None):
    """TF 1's name, which takes (t, msg) or (x, message)."""
    return check_numerics(x if t is None else t, message if msg is None else msg, name=name or "VerifyFinite")


_LOG_DEVICE_PLACEMENT = [False]


def set_log_device_placement(enabled):
    """Recorded only: everything runs on the CPU, so there is no placement to log."""
    _LOG_DEVICE_PLACEMENT[0] = bool(enabled)


def get_log_device_placement():
    return _LOG_DEVICE_PLACEMENT[0]


# ---------------------------------------------------------------- TF 2 signatures
def _v2_binary(v1):
    def check(x, y, message=None, summarize=None, name=None):
        return v1(x, y, summarize=summarize, message=message, name=name)
    check.__name__ = v1.__name__[:-3]
    return check


def _v2_unary(v1):
    def check(x, message=None, summarize=None, name=None):
        return v1(x, summarize=summarize, message=message, name=name)
    check.__name__ = v1.__name__[:-3]
    return check


assert_equal, assert_none_equal = _v2_binary(assert_equal_v1), _v2_binary(assert_none_equal_v1)
assert_less, assert_less_equal = _v2_binary(assert_less_v1), _v2_binary(assert_less_equal_v1)
assert_greater, assert_greater_equal = _v2_binary(assert_greater_v1), _v2_binary(assert_greater_equal_v1)
assert_positive, assert_negative = _v2_unary(assert_positive_v1), _v2_unary(assert_negative_v1)
assert_non_negative, assert_non_positive = _v2_unary(assert_non_negative_v1), _v2_unary(assert_non_positive_v1)


def assert_near(x, y, rtol=None, atol=None, message=None, summarize=None, name=None):
    return assert_near_v1(x, y, rtol=rtol, atol=atol, summarize=summarize, message=message, name=name)


def assert_rank(x, rank, message=None, name=None):
    return assert_rank_v1(x, rank, message=message, name=name)


def assert_rank_at_least(x, rank, message=None, name=None):
    return assert_rank_at_least_v1(x, rank, message=message, name=name)


def assert_rank_in(x, ranks, message=None, name=None):
    return assert_rank_in_v1(x, ranks, message=message, name=name)


V2_NAMES = ("assert_equal", "assert_none_equal", "assert_less", "assert_less_equal", "assert_greater",
            "assert_greater_equal", "assert_positive", "assert_negative", "assert_non_negative",
            "assert_non_positive", "assert_near", "assert_rank", "assert_rank_at_least", "assert_rank_in",
            "assert_scalar", "assert_shapes", "assert_type", "assert_integer", "assert_all_finite",
            "check_numerics", "is_numeric_tensor", "set_log_device_placement", "get_log_device_placement")
V1_ONLY = {"verify_tensor_all_finite": verify_tensor_all_finite}


def modules(make_module):
    """(tf.debugging, tf.compat.v1.debugging, the tf.assert_* names of TF 2, those of tf.compat.v1)."""
    here = globals()
    v2 = {n: here[n] for n in V2_NAMES}
    v1 = {n: here.get(n + "_v1", here[n]) for n in V2_NAMES}
    v1.update(V1_ONLY)
    debugging = make_module("debugging", Assert=Assert, **v2)
    debugging_v1 = make_module("compat.v1.debugging", Assert=Assert, **v1)
    top = {n: v2[n] for n in ("assert_equal", "assert_greater", "assert_less", "assert_rank")}
    top_v1 = {n: v1[n] for n in V2_NAMES if n.startswith("assert_") and n not in ("assert_shapes", "assert_all_finite")}
    top_v1.update(check_numerics=check_numerics, is_numeric_tensor=is_numeric_tensor, **V1_ONLY)
    return debugging, debugging_v1, top, top_v1
