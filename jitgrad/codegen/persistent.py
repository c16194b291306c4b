"""Memory a kernel keeps from call to call: the rows of its while_loops'
per-iteration stacks (codegen/lower_control.py). A kernel's arena ends with
``meta["persistent"] = [offset, words]``: pairs of words {malloc'd pointer,
capacity in rows}, zero when the kernel is loaded; a loop reuses (and grows
by realloc) that memory, so a run does not allocate and fault in fresh pages.
It is freed with the kernel. At most the largest stack a call needed is kept.
"""
import ctypes
import weakref

import numpy as np

_free = []


def _libc_free():
    if not _free:
        libc = ctypes.CDLL(None)
        f = libc.free
        f.argtypes = [ctypes.c_void_p]
        f.restype = None
        _free.append(f)
    return _free[0]


def _words(kernel):
    off, n = kernel.meta.get("persistent", (0, 0))
    if not n:
        return None
    start = kernel.arena_addr - _addr(kernel._arena)
    return kernel._arena[start + off:start + off + 8 * n].view(np.uint64)


def _addr(a):
    return a.__array_interface__["data"][0]


def init_persistent(kernel):
    """Zeroes the kernel's persistent words; their memory is freed with the kernel."""
    w = _words(kernel)
    if w is not None:
        w[:] = 0
        weakref.finalize(kernel, _free_words, w)


def _free_words(w):
    free = _libc_free()
    for k in range(0, len(w), 2):
        if w[k]:
            free(int(w[k]))
            w[k] = 0
