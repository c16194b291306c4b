"""Kernel outputs whose first dimension is known only when the kernel has run:
a loop variable that grew by rows inside a compiled while_loop
(codegen/lower_growing.py).

For such an output the host passes a 3-word descriptor {data, rows, capacity}
instead of an array; the kernel fills it with memory it keeps (freed with the
kernel), and after the call ``read`` copies ``rows`` rows out into a fresh
array. The copy happens under the kernel's lock, before the next call can
reuse the memory; ``rows <= capacity`` always (the kernel never writes past
its capacity), and an empty result never dereferences the pointer.
"""
import ctypes

import numpy as np

DESC_WORDS = 3


def is_growing(shape):
    return any(d is None for d in shape)


def descriptor():
    return np.zeros(DESC_WORDS, np.int64)


def read(desc, shape, dt):
    """The array a descriptor holds: ``rows`` rows of ``shape[1:]``."""
    data, rows, cap = (int(w) for w in desc)
    if rows < 0 or (rows and rows > cap):
        raise RuntimeError(f"jitgrad: a growing output reports {rows} rows in a capacity of {cap}")
    row_shape = tuple(shape[1:])
    out = np.empty((rows,) + row_shape, dt)
    if out.nbytes:
        ctypes.memmove(out.ctypes.data, data, out.nbytes)
    return out
