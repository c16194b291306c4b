"""Flush-denormals mode: TF's CPU numerics for float32/float64 denormals, opt-in.

TF's CPU kernels and XLA run with FTZ (flush-to-zero: a denormal result becomes a
zero of its sign) and DAZ (denormals-are-zero: a denormal input counts as a zero of
its sign) set in MXCSR. jitgrad keeps denormals by default, as numpy does (README,
Known differences). With the mode on:

  * compiled kernels set FTZ + DAZ on entry (worker threads of parallel kernels too)
    and restore the caller's MXCSR on return (jitgrad/codegen/mxcsr.py); host
    callbacks from inside a kernel (region random draws, tf.print) run with them
    cleared, as numpy expects;
  * the numpy reference kernels (interpreter and eager mode, ops/registry.run_kernel)
    flush denormal float inputs and outputs of every op that computes (``flushes``):
    data movement (layout, identity, reshape), sources, state and sign-bit ops (neg,
    abs, select) keep them, as TF's kernels and the compiled code do; so do a variable's
    assign_add / assign_sub (``compute``), which update it outside those kernels;
  * the mode is part of every kernel's cache key (cache/key.py): a kernel compiled in
    one mode never runs in the other; switching the mode rebuilds Sessions' plans.

    jitgrad.config.set_flush_denormals(True)      # or tf.config.experimental.…
    JITGRAD_FLUSH_DENORMALS=1                      # read at import

Why: on Intel CPUs every operation on a denormal takes a microcode assist (~100
cycles); a recurrence whose gradient decays into them (W7) ran 2x slower than TF.
"""
import os

import numpy as np

ENV = "JITGRAD_FLUSH_DENORMALS"

_FALSE = ("", "0", "false", "off", "no")
FLUSH = [os.environ.get(ENV, "").strip().lower() not in _FALSE]
_listeners = []    # called after the mode changes (compiler.py: Sessions' plans are rebuilt)

# The smallest normal number per float dtype: |x| below it and x != 0 is a denormal.
_TINY = {np.dtype(np.float32): np.float32(np.finfo(np.float32).tiny),
         np.dtype(np.float64): np.float64(np.finfo(np.float64).tiny)}
# Op kinds (ops/registry.OpDef.kind) whose kernels only move, make or store values, and
# ops that only copy or flip a sign bit: TF's kernels, XLA's and jitgrad's compiled code
# (fneg, fabs, select) pass a denormal through them (measured with TF 2.21: neg, abs,
# where and identity of 1e-39 keep it; multiply and maximum flush it).
_MOVES = frozenset({"layout", "source", "state", "random"})
_SIGN_BIT_OPS = frozenset({"Neg", "Abs", "SelectV2"})
_flushes = {}      # OpDef -> bool


def enabled():
    return FLUSH[0]


def set_enabled(flag):
    """Sets the mode; a change rebuilds the plans (each run then keys its kernel by the mode)."""
    flag = bool(flag)
    if flag == FLUSH[0]:
        return
    FLUSH[0] = flag
    for fn in list(_listeners):
        fn()


def on_change(fn):
    """Registers ``fn()`` to run after every change of the mode."""
    _listeners.append(fn)
    return fn


def cache_tag():
    """What the kernel cache key adds for the mode ("" when off: default keys unchanged)."""
    return "+flush-denormals" if FLUSH[0] else ""


def flushes(opdef):
    """Whether ``opdef``'s reference kernel computes (its inputs and outputs are flushed)
    rather than moves values: layout, identity and reshape ops, sources, state and
    sign-bit ops keep denormals, as TF and compiled code do."""
    got = _flushes.get(opdef)
    if got is None:
        got = _flushes[opdef] = not (opdef.kind in _MOVES or opdef.name in _SIGN_BIT_OPS
                                     or getattr(opdef, "identity", False) or getattr(opdef, "reshape", False))
    return got


def flush(a):
    """``a`` with its float32/float64 denormals replaced by zeros of their sign; ``a``
    itself (no copy) when it has none or is not such an array."""
    tiny = _TINY.get(getattr(a, "dtype", None))
    if tiny is None:
        return a
    small = np.abs(a) < tiny              # (NaN compares False, without a warning)
    if not small.any():                   # the usual case: three numpy calls
        return a
    small &= a != 0
    if not small.any():                   # only zeros: the usual case after the first test
        return a
    return np.where(small, np.copysign(np.zeros((), a.dtype), a), a).astype(a.dtype, copy=False)


def flush_all(arrays):
    """``flush`` over a sequence of arrays (a list back)."""
    return [flush(a) for a in arrays]


def compute(fn, *arrays):
    """``fn(*arrays)``, in the mode with inputs and result flushed: for arithmetic outside
    the reference kernels (a variable's assign_add / assign_sub updates it in place)."""
    if not FLUSH[0]:
        return fn(*arrays)
    return flush(fn(*flush_all(arrays)))
