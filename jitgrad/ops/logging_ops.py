"""The ``PrintV2`` op (``tf.print``, front end in jitgrad/print_ops.py), the
``Assert`` op (``tf.Assert``, front end in jitgrad/assert_ops.py) and the
``RegionPrint`` node a tf.print inside a compiled branch / loop body becomes.
PrintV2 formats tensors as TF's C++ kernel does (Tensor::SummarizeValue with print_v2:
``[1 2.5 0.333333343]``, ``...`` past ``summarize`` elements per dimension,
floats in the shortest of %.6g / %.9g that round-trips, doubles %.15g / %.17g,
bools 1/0) into the template the front end built.

The interpreter runs their kernels; the compiler turns a top-level PrintV2 /
Assert into one output per input that the Session hands to a ``HostTarget``
after the kernel returns (passes/ir.from_graph), so compiled runs print and
check too (an Assert before the run's later variable writes).
"""
import ctypes
import sys
import threading

import numpy as np

from .. import dtypes
from ..errors import InvalidArgumentError
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


register("PrintV2", denormals="keep", infer=lambda shapes, dts, attrs: [], kernel=_print_kernel, kind="other",
         lowering="state", grad=NOT_DIFFERENTIABLE)   # passes/ir.from_graph makes it var-writes


# ---------------------------------------------------------------- the Assert op (tf.Assert, tf.case's checks)
def check(attrs, arrays):
    cond = np.asarray(arrays[0])
    if cond.shape != ():
        raise InvalidArgumentError(f"In[0] (the condition of Assert) must be a scalar, got shape {list(cond.shape)}")
    if bool(cond):
        return
    if attrs.get("numerics") is not None:   # check_numerics: the values are has-NaN, has-Inf
        has_nan, has_inf = bool(arrays[1]), bool(arrays[2])
        found = "Inf and NaN" if has_nan and has_inf else "NaN" if has_nan else "Inf"
        raise InvalidArgumentError(f"{attrs['numerics']} : Tensor had {found} values")
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


register("Assert", denormals="keep", infer=_assert_infer, kernel=_assert_kernel, kind="other", lowering="state",
         grad=NOT_DIFFERENTIABLE)   # passes/ir.from_graph makes it var-writes



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
    finish = _emit if op.type == "PrintV2" else check
    values = [None] * len(op.inputs)
    return [HostTarget(finish, op.type, op.attrs, i, values) for i in range(len(op.inputs))]


# ---------------------------------------------------------------- compiled prints inside control flow
# A tf.print in a compiled branch / loop body is a ``RegionPrint`` node: the native
# code calls ``jitgrad_region_print(tag, site, pointers to the printed tensors)``
# each time it runs (on whatever thread runs that code); the call copies the values
# into ``_PENDING`` (one log for the process: kernels printing in two Python threads
# at once may print each other's lines at their flush). After the kernel
# returns, the Session hands each region that prints its ``RegionEffects`` marker
# (passes/ir.from_graph) in program order with the top-level prints, which prints
# that region's lines: so lines come out in the order TF prints them.
HOOK_SYMBOL = "jitgrad_region_print"
_SITES = {}      # site id -> (op type, its attrs, [(shape, dtype)] of the tensors it prints / checks)
_PENDING = []    # (region tag, attrs, arrays), in the order the kernels printed them
_PENDING_LOCK = threading.Lock()
_HOOK = []       # the ctypes callback (kept alive for the process)
_FAILED_ASSERT = threading.local()   # .message: a compiled region's failed tf.Assert


def _on_region_print(tag, site, ptrs):
    kind, attrs, specs = _SITES[site]
    arrays = []
    for k, (shape, dt) in enumerate(specs):
        n = int(np.prod(shape, dtype=np.int64))
        buf = (ctypes.c_char * max(n * dt.np.itemsize, 1)).from_address(ptrs[k])
        arrays.append(np.frombuffer(buf, dt.np, count=n).reshape(shape).copy())
    if kind == "Assert":
        # the native code calls only when the condition is false, then sets ERR_ASSERT;
        # the executor raises this message (same thread: control-flow kernels run on one)
        try:
            check(attrs, arrays)
        except InvalidArgumentError as e:
            _FAILED_ASSERT.message = e.message
        return
    with _PENDING_LOCK:
        _PENDING.append((tag, attrs, arrays))


def failed_assert_message():
    """The message of the tf.Assert a compiled region failed on this thread (once)."""
    msg = getattr(_FAILED_ASSERT, "message", None)
    _FAILED_ASSERT.message = None
    return msg or "assertion failed"


def _register_hook():
    if _HOOK:
        return
    hook = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_int64, ctypes.POINTER(ctypes.c_void_p))(_on_region_print)
    addr = ctypes.cast(hook, ctypes.c_void_p).value
    from ..cache import elf
    elf.EXTRA_SYMBOLS[HOOK_SYMBOL] = addr   # both loaders resolve it (cache/elf.py, cache/native.py)
    _HOOK.append(hook)


def region_site(op_type, attrs, shapes, dtypes):
    """The id of a tf.print / tf.Assert inside a compiled region: a digest of what it
    prints or checks and how (the same in every process, so a kernel from the disk
    cache finds it)."""
    import hashlib   # 3-4 ms (OpenSSL) that `import jitgrad` need not pay: only programs with tf.print do
    what = repr((op_type, sorted(attrs.items()), [tuple(s) for s in shapes], [d.name for d in dtypes]))
    site = int.from_bytes(hashlib.sha256(what.encode()).digest()[:7], "little")
    _SITES[site] = (op_type, dict(attrs), [(tuple(s), d) for s, d in zip(shapes, dtypes)])
    _register_hook()
    return site


class RegionEffects:
    """The var_write key that keeps a region which prints alive and, after the kernel
    ran, prints what region ``tag`` (-1: none, a nested region) logged."""
    __slots__ = ("tag",)

    def __init__(self, tag):
        self.tag = tag

    def write(self, value):
        if self.tag < 0 or not _PENDING:
            return
        with _PENDING_LOCK:
            mine = [e for e in _PENDING if e[0] == self.tag]
            _PENDING[:] = [e for e in _PENDING if e[0] != self.tag]
        for _, attrs, arrays in mine:
            _emit(attrs, arrays)

    def __repr__(self):
        return f"RegionEffects[{self.tag}]"


def flush_region_prints():
    """A kernel stopped with an error: print what its regions logged so far, as TF
    printed those lines live before the failing op, instead of leaving them for the
    next run's RegionEffects to print as if that run had made them."""
    if not _PENDING:
        return
    with _PENDING_LOCK:
        logged = list(_PENDING)
        _PENDING.clear()
    for _, attrs, arrays in logged:
        _emit(attrs, arrays)


def _region_print_kernel(attrs, *arrays):
    _emit(attrs, arrays)          # (ir.evaluate of a region: prints at once)
    return np.int32(0)


register("RegionPrint", infer=lambda shapes, dts, attrs: [((), dtypes.int32)], kernel=_region_print_kernel,
         kind="state", lowering="codegen", grad=NOT_DIFFERENTIABLE)   # never folded or merged (kind "state")


def _region_assert_kernel(attrs, *arrays):
    check(attrs, arrays)          # (ir.evaluate of a region: fails at once)
    return np.int32(0)


# A tf.Assert inside a compiled branch / loop body: the native code checks the
# condition and, where it is false, hands the values to the hook above (which keeps
# TF's message) and sets ERR_ASSERT, so the run raises it.
register("RegionAssert", infer=lambda shapes, dts, attrs: [((), dtypes.int32)], kernel=_region_assert_kernel,
         kind="state", lowering="codegen", grad=NOT_DIFFERENTIABLE)
