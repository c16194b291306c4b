"""Flush-denormals mode: TF's CPU numerics for float32/float64 denormals, the default.

TF's CPU kernels and XLA run with FTZ (flush-to-zero: a denormal result becomes a
zero of its sign) and DAZ (denormals-are-zero: a denormal input counts as a zero of
its sign) set in MXCSR, always. jitgrad does the same unless the mode is turned off,
which keeps denormals as numpy does (README, Known differences). With the mode on:

  * compiled kernels set FTZ + DAZ on entry (worker threads of parallel kernels too)
    and restore the caller's MXCSR on return (jitgrad/codegen/mxcsr.py); host
    callbacks from inside a kernel (region random draws, tf.print) run with them
    cleared, as numpy expects;
  * the numpy reference kernels (interpreter and eager mode, ops/registry.run_kernel)
    flush denormal float inputs and outputs of every op that computes new values, as
    each op registers (OpDef.denormals): ops that move, copy or store values (layout,
    gather, broadcast_to, identity, control flow: the ops in a loop or branch body flush
    on their own), sources, state and sign-bit ops (neg, abs, select) keep them, as TF's
    kernels and the compiled code do; so do a variable's assign_add / assign_sub
    (``compute``), which update it outside those kernels. Arithmetic and comparisons
    (SCOPED_OPS) instead run with FTZ + DAZ set in the thread's MXCSR, as TF's own
    kernels (ScopedFlushDenormal): the same results (one boundary aside: SCOPED_OPS),
    at ~1.1x the mode-off cost where flushing with numpy cost ~3x; ``flush`` tests an
    array in one native pass (denormal_scan.py) before numpy's three calls
    (bench/bench_flush_denormals.py);
  * the mode is part of every kernel's cache key (cache/key.py; the default mode's keys
    carry no tag): a kernel compiled in one mode never runs in the other; switching the
    mode rebuilds Sessions' plans.

Opting out (numpy's numerics: denormal inputs and results kept):

    jitgrad.config.set_flush_denormals(False)     # or tf.config.experimental.…
    JITGRAD_FLUSH_DENORMALS=0                      # read at import; also false / off / no

Why the default: "real TF behaviour is the spec" (issue 12), and on Intel CPUs every
operation on a denormal takes a microcode assist (~100 cycles): a recurrence whose
gradient decays into them (W7) ran several times slower than TF unflushed.
"""
import os

import numpy as np

ENV = "JITGRAD_FLUSH_DENORMALS"

_FALSE = ("0", "false", "off", "no")
_on = os.environ.get(ENV, "").strip().lower() not in _FALSE    # the mode (set_enabled changes it): on unless opted out
_listeners = []    # called after the mode changes (compiler.py: Sessions' plans are rebuilt)

# The smallest normal number per float dtype: |x| below it and x != 0 is a denormal.
_TINY = {np.dtype(np.float32): np.float32(np.finfo(np.float32).tiny),
         np.dtype(np.float64): np.float64(np.finfo(np.float64).tiny)}


def enabled():
    """The mode now. A compile reads it once and hands that value to both the kernel's
    cache key and its code generator (compiler.py), so a switch by another thread in
    between cannot file a kernel of one mode under the other's key."""
    return _on


def set_enabled(flag):
    """Sets the mode; a change rebuilds the plans (each run then keys its kernel by the mode)."""
    global _on
    flag = bool(flag)
    if flag == _on:
        return
    _on = flag
    for fn in list(_listeners):
        fn()


def on_change(fn):
    """Registers ``fn()`` to run after every change of the mode."""
    _listeners.append(fn)
    return fn


def cache_tag(flush):
    """What the kernel cache key adds for a kernel of mode ``flush`` ("" in the default
    mode, on: its keys are the plain ones; the opt-out's are suffixed)."""
    return "" if flush else "+keep-denormals"


def flush(a):
    """``a`` with its float32/float64 denormals replaced by zeros of their sign; ``a``
    itself (no copy) when it has none or is not such an array."""
    tiny = _TINY.get(getattr(a, "dtype", None))
    if tiny is None:
        return a
    if type(a) is np.ndarray:             # one native pass (denormal_scan.py) where numpy needs three
        if not _native:
            _load_native()
        if _native[1] is not None and not _native[1][a.dtype](a):
            return a
    small = np.abs(a) < tiny              # (NaN compares False, without a warning)
    if not small.any():                   # the usual case: three numpy calls
        return a
    small &= a != 0
    if not small.any():                   # only zeros: the usual case after the first test
        return a
    return np.where(small, np.copysign(np.zeros((), a.dtype), a), a).astype(a.dtype, copy=False)


# The ops whose reference kernel, in the mode, runs with FTZ + DAZ set in this thread's
# MXCSR (mxcsr_host.py: TF's ScopedFlushDenormal) instead of flushing its inputs and
# outputs here: numpy's loops then flush as TF's kernels do, at ~0.2 us per op where
# ``flush`` costs three numpy calls per array (~5x a small eager op). Exact only where
# every output element is IEEE arithmetic (+ - * / sqrt) or a comparison of
# float32/float64 inputs, computed in numpy's own loops on this thread. Not here:
# selections and copies (maximum, relu: numpy blends the input itself through), libm's
# functions (float64 sin(x) returns a tiny x unchanged), reductions (a length-1 axis
# copies), casts (same dtype: no copy), matmul (OpenBLAS's threads keep their own MXCSR).
# tests/test_flush_denormals_scoped.py pins each against the explicit path. One
# difference, TF's and the compiled code's: a result that rounds up to the smallest
# normal from below (tiny * (1 - ulp)) is 0 with FTZ (the hardware flushes by the
# unrounded value), where ``flush`` keeps the rounded tiny.
SCOPED_OPS = frozenset({"AddV2", "Sub", "Mul", "RealDiv", "DivNoNan", "MulNoNan", "Square",
                        "SquaredDifference", "Sqrt", "Rsqrt", "Reciprocal", "Sign", "Equal",
                        "NotEqual", "Less", "LessEqual", "Greater", "GreaterEqual"})
_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)
_native = []    # [(flush_on, restore, read) or None, {dtype: has_denormal} or None] on first use


def scope(name, arrays):
    """``(flush_on, restore, read)`` (mxcsr_host.py) when op ``name``'s reference kernel may run
    with MXCSR's FTZ + DAZ on ``arrays`` instead of ``flush``: a SCOPED_OPS op whose
    inputs are all float32/float64 arrays, on a host with the native scope; else None."""
    if name not in SCOPED_OPS:
        return None
    for a in arrays:
        dt = getattr(a, "dtype", None)
        if dt is not _F32 and dt is not _F64 and dt not in _TINY:   # (identity first: hashing a dtype costs ~0.1 us)
            return None
    if not _native:
        _load_native()
    return _native[0]


def _load_native():
    """Builds (or loads from the disk cache) the native helpers, on first use in the mode:
    importing them loads the cache modules (and LLVM on a cache miss)."""
    from . import denormal_scan, mxcsr_host
    if not _native:
        _native.extend([mxcsr_host.get(), denormal_scan.get()])


def flush_all(arrays):
    """``flush`` over a sequence of arrays (a list back)."""
    return [flush(a) for a in arrays]


def pass_input(x, y):
    """``y`` (an op's flushed result) with ``x``'s denormal elements put back where ``y``
    has ``x``'s shape: ops registered denormals="pass_input" (expm1(x) is x for such x)."""
    tiny = _TINY.get(getattr(x, "dtype", None))
    if tiny is None or getattr(y, "dtype", None) != x.dtype or np.shape(y) != np.shape(x):
        return y
    small = (np.abs(x) < tiny) & (x != 0)
    if not small.any():
        return y
    return np.where(small, x, y).astype(x.dtype, copy=False)


def compute(fn, *arrays):
    """``fn(*arrays)``, in the mode with inputs and result flushed: for arithmetic outside
    the reference kernels (a variable's assign_add / assign_sub updates it in place)."""
    if not _on:
        return fn(*arrays)
    return flush(fn(*flush_all(arrays)))
