"""Recycled memory for large kernel outputs.

Every ``Session.run`` returns fresh arrays.  A fresh multi-megabyte numpy array is a
fresh ``mmap``: the OS zero-fills each page on first touch, which for a pure
elementwise kernel costs as much as the computation (W2 value+gradient at 1e7 floats:
~3 ms of a ~9 ms run on two cores).  Outputs of at least ``RECYCLE_MIN_BYTES`` are
therefore views of pooled blocks, and a block is handed out again only once nothing
refers to it any more: its reference count is back to what the pool alone holds.  A
result the caller keeps (or any view of it) is never overwritten.

Smaller outputs come from malloc's heap, which recycles them already.
"""
import sys
import threading

import numpy as np

RECYCLE_MIN_BYTES = 1 << 20
MAX_POOLED_BYTES = 256 << 20     # memory the pool may keep for reuse (jitgrad.clear_cache() drops it)
MAX_BLOCKS_PER_SIZE = 4

_lock = threading.Lock()
_blocks = {}          # nbytes -> [raw uint8 arrays]
_pooled = [0]         # bytes held by the pool


def _unreferenced(blocks, i):
    """True if only the pool refers to ``blocks[i]`` (no array views it any more)."""
    return sys.getrefcount(blocks[i]) <= _BASE


def _probe_base():
    # The reference count of a pooled, unused block seen from _unreferenced: measured,
    # not assumed, so it holds for whatever this interpreter counts.
    blocks = [np.empty(1, np.uint8)]
    return sys.getrefcount(blocks[0])


_BASE = _probe_base()


def _nbytes(shape, dtype):
    return int(np.prod(shape, dtype=np.int64)) * dtype.itemsize


def recycles(shape, dtype):
    """True if ``empty(shape, dtype)`` hands out pooled memory (else it is np.empty)."""
    return _nbytes(shape, np.dtype(dtype)) >= RECYCLE_MIN_BYTES


def empty(shape, dtype):
    """Like ``np.empty(shape, dtype)`` (C order)."""
    dtype = np.dtype(dtype)
    nbytes = _nbytes(shape, dtype)
    if nbytes < RECYCLE_MIN_BYTES:
        return np.empty(shape, dtype)
    with _lock:
        blocks = _blocks.setdefault(nbytes, [])
        for i in range(len(blocks)):
            if _unreferenced(blocks, i):
                # the view is made under the lock: no other thread can take the block
                return blocks[i].view(dtype).reshape(shape)
        raw = np.empty(nbytes, np.uint8)
        if _pooled[0] + nbytes <= MAX_POOLED_BYTES and len(blocks) < MAX_BLOCKS_PER_SIZE:
            blocks.append(raw)
            _pooled[0] += nbytes
        return raw.view(dtype).reshape(shape)


def release():
    """Drops every pooled block (arrays still in use keep theirs alive)."""
    with _lock:
        _blocks.clear()
        _pooled[0] = 0


def info():
    with _lock:
        n = sum(len(b) for b in _blocks.values())
        free = sum(_unreferenced(b, i) for b in _blocks.values() for i in range(len(b)))
        return {"blocks": n, "free": free, "bytes": _pooled[0]}
