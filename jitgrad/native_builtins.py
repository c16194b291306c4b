"""Python builtins whose C function is a few lines of LLVM IR: for the hottest helpers
of the numpy reference kernels (mxcsr_host.py, denormal_scan.py).

Why not ctypes: a ctypes call costs about as much as a small numpy call (~0.5 us); a
builtin made with ``PyCFunction_NewEx`` is called like ``len`` (~0.05 us). The IR names
the C-API functions it calls, which the loader resolves in this process, so its object
code is the same in every process and kept in the disk cache as the thread pool's is
(codegen/target.baseline_object_code): a warm process loads no LLVM for it.
"""
import ctypes

from .cache.native import load as load_native
from .codegen.target import baseline_object_code

METH_O = 0x0008
METH_NOARGS = 0x0004

_keep = []      # the loaded code and the method defs the builtins point into: never freed


class _MethodDef(ctypes.Structure):
    _fields_ = [("ml_name", ctypes.c_char_p), ("ml_meth", ctypes.c_void_p),
                ("ml_flags", ctypes.c_int), ("ml_doc", ctypes.c_char_p)]


def build(kind, ir_text, specs):
    """One builtin per ``(symbol, flags, doc, self)`` of ``specs``, compiled from
    ``ir_text`` (cached under ``kind``): its C function gets ``self`` as first argument."""
    code = load_native(baseline_object_code(kind, ir_text))
    new = ctypes.pythonapi.PyCFunction_NewEx
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.py_object, ctypes.c_void_p]
    defs = [_MethodDef(sym.encode(), code.address(sym), flags, doc.encode()) for sym, flags, doc, _ in specs]
    _keep.extend([code, defs, [s[3] for s in specs]])
    return tuple(new(ctypes.addressof(d), s[3], None) for d, s in zip(defs, specs))
