"""FTZ + DAZ in the calling thread's MXCSR, from Python: the flush-denormals mode's
cheap path for the numpy reference kernels (jitgrad/denormals.py says which ops).

    old = read()            # MXCSR now (an int), taken before anything changes
    try:
        flush_on()          # MXCSR |= FTZ | DAZ (also returns the previous MXCSR)
        ...numpy...
    finally: restore(old)   # MXCSR's FTZ, DAZ = old's

Why ``read`` and not ``old = flush_on()`` inside the try: Python runs pending signal
handlers right after a builtin call returns, before the result is stored, so a
KeyboardInterrupt there left FTZ + DAZ set in the thread for good (numpy then flushed
everywhere, the opt-out mode included) with ``old`` never bound.

TF's kernels get their numerics the same way (ScopedFlushDenormal). MXCSR is per
thread, so only this thread's numpy loops flush, and only until ``restore``.

Three tiny functions compiled from the LLVM IR below, made Python builtins
(native_builtins.py: ~0.05 us a call, where a ctypes call costs ~0.5 us; three per op).

``get()`` returns ``(flush_on, restore, read)``, or None where it cannot work (not
x86-64 CPython, or building failed): the caller then flushes explicitly.
"""
from . import native_builtins, native_once

FTZ = 1 << 15
DAZ = 1 << 6

# flush_on: a NULL from PyLong_FromUnsignedLong (MemoryError) restores MXCSR before it
# returns, so a failed call leaves nothing set. restore: only the FTZ and DAZ bits of its
# argument reach MXCSR (the thread's exception masks, rounding mode and flags stay as
# they are), so no value can unmask an FP exception (numpy's next invalid op would then
# kill the process with SIGFPE) or set a reserved bit (ldmxcsr faults); a value that is
# not an int in 0..2**64-1 returns NULL with the conversion's TypeError / OverflowError.
IR = r"""
declare void @llvm.x86.sse.stmxcsr(i8*)
declare void @llvm.x86.sse.ldmxcsr(i8*)
declare i8* @PyLong_FromUnsignedLong(i64)
declare i64 @PyLong_AsUnsignedLong(i8*)
declare i8* @PyErr_Occurred()

define i8* @jitgrad_mxcsr_flush_on(i8* %self, i8* %unused) nounwind {
entry:
  %old = alloca i32, align 4
  %new = alloca i32, align 4
  %oldp = bitcast i32* %old to i8*
  %newp = bitcast i32* %new to i8*
  call void @llvm.x86.sse.stmxcsr(i8* %oldp)
  %o = load i32, i32* %old
  %n = or i32 %o, 32832
  store i32 %n, i32* %new
  call void @llvm.x86.sse.ldmxcsr(i8* %newp)
  %o64 = zext i32 %o to i64
  %r = call i8* @PyLong_FromUnsignedLong(i64 %o64)
  %failed = icmp eq i8* %r, null
  br i1 %failed, label %undo, label %done
undo:
  call void @llvm.x86.sse.ldmxcsr(i8* %oldp)
  ret i8* null
done:
  ret i8* %r
}

define i8* @jitgrad_mxcsr_read(i8* %self, i8* %unused) nounwind {
entry:
  %cur = alloca i32, align 4
  %curp = bitcast i32* %cur to i8*
  call void @llvm.x86.sse.stmxcsr(i8* %curp)
  %c = load i32, i32* %cur
  %c64 = zext i32 %c to i64
  %r = call i8* @PyLong_FromUnsignedLong(i64 %c64)
  ret i8* %r
}

define i8* @jitgrad_mxcsr_restore(i8* %self, i8* %arg) nounwind {
entry:
  %slot = alloca i32, align 4
  %p = bitcast i32* %slot to i8*
  %v = call i64 @PyLong_AsUnsignedLong(i8* %arg)
  %maybe = icmp eq i64 %v, -1
  br i1 %maybe, label %check, label %ok
check:
  %err = call i8* @PyErr_Occurred()
  %failed = icmp ne i8* %err, null
  br i1 %failed, label %fail, label %ok
ok:
  call void @llvm.x86.sse.stmxcsr(i8* %p)
  %cur = load i32, i32* %slot
  %v32 = trunc i64 %v to i32
  %keep = and i32 %cur, -32833
  %take = and i32 %v32, 32832
  %new = or i32 %keep, %take
  store i32 %new, i32* %slot
  call void @llvm.x86.sse.ldmxcsr(i8* %p)
  %new64 = zext i32 %new to i64
  %r = call i8* @PyLong_FromUnsignedLong(i64 %new64)
  ret i8* %r
fail:
  ret i8* null
}
"""
assert FTZ | DAZ == 32832 and ~(FTZ | DAZ) == -32833


def _build():
    return native_builtins.build("mxcsr-code", IR, [
        ("jitgrad_mxcsr_flush_on", native_builtins.METH_NOARGS,
         "Sets FTZ and DAZ in this thread's MXCSR; returns the previous MXCSR.", None),
        ("jitgrad_mxcsr_restore", native_builtins.METH_O,
         "Sets FTZ and DAZ in this thread's MXCSR as in the value read (or flush_on) returned; returns MXCSR.", None),
        ("jitgrad_mxcsr_read", native_builtins.METH_NOARGS, "This thread's MXCSR, unchanged.", None)])


_once = native_once.Once(_build, "flush-denormals: no native MXCSR scope; flushing explicitly")


def get():
    """``(flush_on, restore, read)``, or None where this host cannot have them."""
    return _once.get()
