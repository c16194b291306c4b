"""glibc's logf / sincosf / log / sincos over whole arrays, for the Philox samplers
(ops/philox.py): TF's Box-Muller calls exactly these, and their results differ from
numpy's SIMD log / sin / cos (and from float64 math rounded to float32) in a few
elements per thousand, so only the same libm functions give TF's normals bit for bit.

Each is a loop of a few lines of LLVM IR calling the libm symbol (compiled once for the
SSE2 baseline and kept in the disk cache, as the thread pool's code is: codegen/target.
baseline_object_code); where that cannot be built, the same functions through ctypes, one
element at a time (slow, the same numbers)."""
import ctypes
import logging
import threading

import numpy as np

log = logging.getLogger("jitgrad")

_IR = r"""
declare float @logf(float)
declare double @log(double)
declare void @sincosf(float, float*, float*)
declare void @sincos(double, double*, double*)

define void @jitgrad_loop_logf(float* %x, float* %y, i64 %n) {
entry:
  %empty = icmp sle i64 %n, 0
  br i1 %empty, label %done, label %loop
loop:
  %i = phi i64 [0, %entry], [%next, %loop]
  %px = getelementptr float, float* %x, i64 %i
  %v = load float, float* %px
  %r = call float @logf(float %v)
  %py = getelementptr float, float* %y, i64 %i
  store float %r, float* %py
  %next = add i64 %i, 1
  %more = icmp slt i64 %next, %n
  br i1 %more, label %loop, label %done
done:
  ret void
}

define void @jitgrad_loop_log(double* %x, double* %y, i64 %n) {
entry:
  %empty = icmp sle i64 %n, 0
  br i1 %empty, label %done, label %loop
loop:
  %i = phi i64 [0, %entry], [%next, %loop]
  %px = getelementptr double, double* %x, i64 %i
  %v = load double, double* %px
  %r = call double @log(double %v)
  %py = getelementptr double, double* %y, i64 %i
  store double %r, double* %py
  %next = add i64 %i, 1
  %more = icmp slt i64 %next, %n
  br i1 %more, label %loop, label %done
done:
  ret void
}

define void @jitgrad_loop_sincosf(float* %x, float* %s, float* %c, i64 %n) {
entry:
  %empty = icmp sle i64 %n, 0
  br i1 %empty, label %done, label %loop
loop:
  %i = phi i64 [0, %entry], [%next, %loop]
  %px = getelementptr float, float* %x, i64 %i
  %v = load float, float* %px
  %ps = getelementptr float, float* %s, i64 %i
  %pc = getelementptr float, float* %c, i64 %i
  call void @sincosf(float %v, float* %ps, float* %pc)
  %next = add i64 %i, 1
  %more = icmp slt i64 %next, %n
  br i1 %more, label %loop, label %done
done:
  ret void
}

define void @jitgrad_loop_sincos(double* %x, double* %s, double* %c, i64 %n) {
entry:
  %empty = icmp sle i64 %n, 0
  br i1 %empty, label %done, label %loop
loop:
  %i = phi i64 [0, %entry], [%next, %loop]
  %px = getelementptr double, double* %x, i64 %i
  %v = load double, double* %px
  %ps = getelementptr double, double* %s, i64 %i
  %pc = getelementptr double, double* %c, i64 %i
  call void @sincos(double %v, double* %ps, double* %pc)
  %next = add i64 %i, 1
  %more = icmp slt i64 %next, %n
  br i1 %more, label %loop, label %done
done:
  ret void
}
"""

_lock = threading.Lock()
_loops = {}          # "native": {name: ctypes function} or None when it cannot be built


def _native():
    with _lock:
        if "native" not in _loops:
            fns = None
            try:
                from ..cache.native import load as load_native
                from ..codegen.target import baseline_object_code
                code = load_native(baseline_object_code("libm-loops", _IR))
                vp, n = ctypes.c_void_p, ctypes.c_int64
                fns = {"code": code}   # (kept alive with the functions)
                for name, args in (("logf", (vp, vp, n)), ("log", (vp, vp, n)),
                                   ("sincosf", (vp, vp, vp, n)), ("sincos", (vp, vp, vp, n))):
                    fns[name] = ctypes.CFUNCTYPE(None, *args)(code.address("jitgrad_loop_" + name))
            except Exception as e:     # (no LLVM target, an odd loader): ctypes, element by element
                log.debug("libm loops (%s)", e)
                fns = None
            _loops["native"] = fns
        return _loops["native"]


def _libm():
    lib = ctypes.CDLL("libm.so.6")
    for name, t in (("logf", ctypes.c_float), ("log", ctypes.c_double)):
        getattr(lib, name).restype = t
        getattr(lib, name).argtypes = [t]
    for name, t in (("sincosf", ctypes.c_float), ("sincos", ctypes.c_double)):
        getattr(lib, name).restype = None
        getattr(lib, name).argtypes = [t, ctypes.POINTER(t), ctypes.POINTER(t)]
    return lib


def _ptr(a):
    return a.ctypes.data


def log_(x):
    """libm's log of each element of a float32 (logf) or float64 (log) array."""
    x = np.ascontiguousarray(x)
    y = np.empty_like(x)
    name = "logf" if x.dtype == np.float32 else "log"
    fns = _native()
    if fns is not None:
        fns[name](_ptr(x), _ptr(y), x.size)
    else:
        f = getattr(_libm(), name)
        y.reshape(-1)[:] = [f(float(v)) for v in x.reshape(-1)]
    return y


def sincos(x):
    """(sin, cos) of each element of a float32 (sincosf) or float64 (sincos) array, libm's."""
    x = np.ascontiguousarray(x)
    s, c = np.empty_like(x), np.empty_like(x)
    name = "sincosf" if x.dtype == np.float32 else "sincos"
    fns = _native()
    if fns is not None:
        fns[name](_ptr(x), _ptr(s), _ptr(c), x.size)
    else:
        f = getattr(_libm(), name)
        ct = ctypes.c_float if x.dtype == np.float32 else ctypes.c_double
        a, b = ct(), ct()
        for i, v in enumerate(x.reshape(-1)):
            f(float(v), ctypes.byref(a), ctypes.byref(b))
            s.reshape(-1)[i], c.reshape(-1)[i] = a.value, b.value
    return s, c
