"""glibc's logf / sincosf / log / sincos (and log1p / pow / exp / lgamma for the gamma and
Poisson samplers) over whole arrays, for the Philox samplers (ops/philox.py,
ops/philox_rejection.py): TF's kernels call exactly these, and their results differ from
numpy's SIMD log / sin / cos (and from float64 math rounded to float32) in a few
elements per thousand, so only the same libm functions give TF's normals bit for bit.

Each is a loop of a few lines of LLVM IR calling the libm symbol (compiled once for the
SSE2 baseline and kept in the disk cache, as the thread pool's code is: codegen/target.
baseline_object_code); where that cannot be built, the same functions through ctypes, one
element at a time (slow, the same numbers)."""
import ctypes

import numpy as np

from ..native_once import Once

# One loop per libm function: y[i] = f(x[i]) (f(x[i], z[i]) for binary ones); the
# sincos loops store both results.
_UNARY = {"logf": "float", "log": "double", "log1p": "double", "exp": "double", "lgamma": "double"}
_BINARY = {"pow": "double"}
_SINCOS = {"sincosf": "float", "sincos": "double"}

_LOOP = r"""
define void @jitgrad_loop_{name}({t}* %x, {t}* %z, {t}* %y, {t}* %y2, i64 %n) {{
entry:
  %empty = icmp sle i64 %n, 0
  br i1 %empty, label %done, label %loop
loop:
  %i = phi i64 [0, %entry], [%next, %loop]
  %px = getelementptr {t}, {t}* %x, i64 %i
  %v = load {t}, {t}* %px
  %pz = getelementptr {t}, {t}* %z, i64 %i
  %py = getelementptr {t}, {t}* %y, i64 %i
  %py2 = getelementptr {t}, {t}* %y2, i64 %i
{body}
  %next = add i64 %i, 1
  %more = icmp slt i64 %next, %n
  br i1 %more, label %loop, label %done
done:
  ret void
}}
"""
_BODY_UNARY = "  %r = call {t} @{name}({t} %v)\n  store {t} %r, {t}* %py"
_BODY_BINARY = "  %w = load {t}, {t}* %pz\n  %r = call {t} @{name}({t} %v, {t} %w)\n  store {t} %r, {t}* %py"
_BODY_SINCOS = "  call void @{name}({t} %v, {t}* %py, {t}* %py2)"


def _ir():
    parts = []
    for table, decl, body in ((_UNARY, "declare {t} @{name}({t})", _BODY_UNARY),
                              (_BINARY, "declare {t} @{name}({t}, {t})", _BODY_BINARY),
                              (_SINCOS, "declare void @{name}({t}, {t}*, {t}*)", _BODY_SINCOS)):
        for name, t in table.items():
            parts.append(decl.format(name=name, t=t))
            parts.append(_LOOP.format(name=name, t=t, body=body.format(name=name, t=t)))
    return "\n".join(parts)


def _build_loops():
    """{name: ctypes function} of the compiled loops (the code object kept alive with them)."""
    from ..cache.native import load as load_native
    from ..codegen.target import baseline_object_code
    code = load_native(baseline_object_code("libm-loops", _ir()))
    vp, n = ctypes.c_void_p, ctypes.c_int64
    fns = {"code": code}
    for name in (*_UNARY, *_BINARY, *_SINCOS):
        fns[name] = ctypes.CFUNCTYPE(None, vp, vp, vp, vp, n)(code.address("jitgrad_loop_" + name))
    return fns


# None where they cannot be built: ctypes, element by element
_native = Once(_build_loops, "libm loops").get


def _libm():
    lib = ctypes.CDLL("libm.so.6")
    ctype = {"float": ctypes.c_float, "double": ctypes.c_double}
    for name, t in _UNARY.items():
        getattr(lib, name).restype = ctype[t]
        getattr(lib, name).argtypes = [ctype[t]]
    for name, t in _BINARY.items():
        getattr(lib, name).restype = ctype[t]
        getattr(lib, name).argtypes = [ctype[t], ctype[t]]
    for name, t in (("sincosf", ctypes.c_float), ("sincos", ctypes.c_double)):
        getattr(lib, name).restype = None
        getattr(lib, name).argtypes = [t, ctypes.POINTER(t), ctypes.POINTER(t)]
    return lib


def _ptr(a):
    return a.ctypes.data


def _unary(name, x):
    y = np.empty_like(x)
    fns = _native()
    if fns is not None:
        fns[name](_ptr(x), 0, _ptr(y), 0, x.size)
    else:
        f = getattr(_libm(), name)
        y.reshape(-1)[:] = [f(float(v)) for v in x.reshape(-1)]
    return y


def log_(x):
    """libm's log of each element of a float32 (logf) or float64 (log) array."""
    x = np.ascontiguousarray(x)
    return _unary("logf" if x.dtype == np.float32 else "log", x)


def log1p(x):
    """libm's log1p of each element of a float64 array."""
    return _unary("log1p", np.ascontiguousarray(x, dtype=np.float64))


def exp(x):
    """libm's exp of each element of a float64 array."""
    return _unary("exp", np.ascontiguousarray(x, dtype=np.float64))


def lgamma(x):
    """libm's lgamma of each element of a float64 array."""
    return _unary("lgamma", np.ascontiguousarray(x, dtype=np.float64))


def pow_(x, z):
    """libm's pow(x, z) elementwise (float64, ``z`` broadcast to ``x``)."""
    x = np.ascontiguousarray(x, dtype=np.float64)
    z = np.ascontiguousarray(np.broadcast_to(np.asarray(z, dtype=np.float64), x.shape))
    y = np.empty_like(x)
    fns = _native()
    if fns is not None:
        fns["pow"](_ptr(x), _ptr(z), _ptr(y), 0, x.size)
    else:
        f = _libm().pow
        y.reshape(-1)[:] = [f(float(a), float(b)) for a, b in zip(x.reshape(-1), z.reshape(-1))]
    return y


def sincos(x):
    """(sin, cos) of each element of a float32 (sincosf) or float64 (sincos) array, libm's."""
    x = np.ascontiguousarray(x)
    s, c = np.empty_like(x), np.empty_like(x)
    name = "sincosf" if x.dtype == np.float32 else "sincos"
    fns = _native()
    if fns is not None:
        fns[name](_ptr(x), 0, _ptr(s), _ptr(c), x.size)
    else:
        f = getattr(_libm(), name)
        ct = ctypes.c_float if x.dtype == np.float32 else ctypes.c_double
        a, b = ct(), ct()
        for i, v in enumerate(x.reshape(-1)):
            f(float(v), ctypes.byref(a), ctypes.byref(b))
            s.reshape(-1)[i], c.reshape(-1)[i] = a.value, b.value
    return s, c
