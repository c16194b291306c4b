"""The flush-denormals mode in generated code (jitgrad/denormals.py says what the mode is).

MXCSR is per thread. In the mode a kernel's exported entries (``<name>`` and, for a
parallel kernel, ``<name>_mt``, which every worker thread calls) are wrappers:

    stmxcsr saved; ldmxcsr (saved | FTZ | DAZ); call <body>; ldmxcsr saved; ret

The body is the usual entry function under another name, kept out of line
(``noinline``): LLVM does not model MXCSR as a dependency of floating-point
instructions, but it does not move memory accesses across the intrinsics' calls, and
all of a kernel's arithmetic reads memory after the call into its body. The body has
one exit (a failing op writes the status word and the function runs on to its end),
so the wrapper's restore covers normal and error returns alike.

A host callback from inside the kernel (a region's random draw or tf.print: numpy
code) runs with FTZ and DAZ cleared, then they are set again (``around_host_call``).

Every function the mode's module text defines gets LLVM's ``denormal-fp-math``
attributes (``mark_text``), so that LLVM's constant folding flushes as the hardware
does. x86 only: elsewhere the mode applies to the numpy reference kernels alone.
"""
import re

from llvmlite import ir

from .irutil import I32, I8, intrinsic

FTZ = 1 << 15
DAZ = 1 << 6
ATTRS = ('"denormal-fp-math"="preserve-sign,preserve-sign" '
         '"denormal-fp-math-f32"="preserve-sign,preserve-sign"')
_DEFINE_LINE = re.compile(r"(?m)^(define [^\n]*)$")


def _stmxcsr(b, slot):
    intrinsic(b, "llvm.x86.sse.stmxcsr", ir.VoidType(), [b.bitcast(slot, I8.as_pointer())])


def _ldmxcsr(b, slot):
    intrinsic(b, "llvm.x86.sse.ldmxcsr", ir.VoidType(), [b.bitcast(slot, I8.as_pointer())])


def _set_bits(b, entry_b, set_mask, clear_mask):
    """Saves MXCSR in a stack slot, loads it with ``set_mask`` bits set and ``clear_mask``
    bits cleared; returns the saved slot (for ``_ldmxcsr``)."""
    saved, changed = entry_b.alloca(I32), entry_b.alloca(I32)
    _stmxcsr(b, saved)
    v = b.or_(b.load(saved), ir.Constant(I32, set_mask))
    b.store(b.and_(v, ir.Constant(I32, ~clear_mask & 0xFFFFFFFF)), changed)
    _ldmxcsr(b, changed)
    return saved


def wrap_entry(module, body, name):
    """Defines ``name`` (``body``'s signature) as the flushing wrapper around ``body``."""
    body.attributes.add("noinline")
    w = ir.Function(module, body.ftype, name=name)
    w.attributes.add("nounwind")
    b = ir.IRBuilder(w.append_basic_block("entry"))
    saved = _set_bits(b, b, FTZ | DAZ, 0)
    b.call(body, list(w.args))
    _ldmxcsr(b, saved)
    b.ret_void()
    return w


class around_host_call:
    """``with around_host_call(kb):`` clears FTZ / DAZ for the host call emitted inside
    and sets them again after it; nothing outside the mode."""

    def __init__(self, kb):
        self.kb = kb
        self.saved = None

    def __enter__(self):
        if self.kb.flush_denormals:
            self.saved = _set_bits(self.kb.b, self.kb.entry_b, 0, FTZ | DAZ)

    def __exit__(self, *exc):
        if self.saved is not None and exc[0] is None:
            _ldmxcsr(self.kb.b, self.saved)


def mark_text(ir_text):
    """The module text with the denormal-fp-math attributes on every function it defines."""
    return _DEFINE_LINE.sub(lambda m: m.group(1) + " " + ATTRS, ir_text)
