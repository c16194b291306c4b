"""Python's cyclic garbage collector paused while a kernel is lowered and compiled.

Lowering builds tens of thousands of llvmlite IR objects (W3, the MLP with its
gradients: ~7000 instructions, ~40k tracked objects), and the collector runs over
them again and again while they are built; in a fresh process one of those runs is
a full (generation 2) collection: 28-35 ms, plus ~10 ms of younger ones, of W3's
~450 ms first result -- and they find nothing to free, the IR being live until the
compile ends.  Paused, the IR is collected once, as young garbage, by the first
collection after the compile (15-30 ms for W3).  Concurrent compiles are counted:
the last one out restores the collector's state (left off if it was off).
"""
import gc

from .nested_setting import NestedSetting


def _pause():
    was_enabled = gc.isenabled()
    gc.disable()
    return was_enabled


def _resume(was_enabled):
    if was_enabled:
        gc.enable()


# No cyclic collection inside ``with paused():`` (reference counting still frees).
paused = NestedSetting(_pause, _resume)
