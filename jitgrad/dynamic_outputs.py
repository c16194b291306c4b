"""Kernel outputs whose shape is known only when the kernel has run: a loop
variable that grew by rows inside a compiled while_loop, an If output whose
branches give different shapes (codegen/lower_growing.py).

For such an output the host passes a descriptor of DESC_WORDS int64 words
instead of an array; the kernel fills it: word 0 points to memory the kernel
keeps (freed with the kernel), the next words are the shape's unknown dims in
order. ``read`` then copies the value into a fresh array, under the kernel's
lock, before the next call can reuse that memory. An empty value never
dereferences the pointer.
"""
import ctypes

import numpy as np

from .codegen.lower_growing import DESC_WORDS


def is_dynamic(shape):
    return any(d is None for d in shape)


def descriptor():
    return np.zeros(DESC_WORDS, np.int64)


def read(desc, shape, dt):
    """The array a descriptor holds, of ``shape`` with its None dims filled in."""
    words = iter(int(w) for w in desc[1:])
    full = tuple(next(words) if d is None else d for d in shape)
    if any(d < 0 for d in full):
        raise RuntimeError(f"jitgrad: a kernel returned the impossible shape {list(full)}")
    out = np.empty(full, dt)
    if out.nbytes:
        ctypes.memmove(out.ctypes.data, int(desc[0]), out.nbytes)
    return out
