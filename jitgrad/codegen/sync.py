"""The barrier of parallel kernels (threads: jitgrad/codegen/parallel.py).

Three words of the kernel's status block: [1] sleepers, [2] count, [3]
generation.  A thread arriving increments the count; the last one resets it
and bumps the generation, the others wait for the generation to change:
first spinning with ``pause`` for SPIN_LIMIT rounds (a barrier after a
balanced parallel segment is crossed within that), then asleep in
futex(FUTEX_WAIT) on the generation word, so a waiter takes no core from the
thread it waits for.  The last arriver makes the FUTEX_WAKE system call only
when the sleepers word says someone sleeps (sequentially consistent order on
both sides: either the waker sees the sleeper, or the sleeper sees the new
generation, and futex re-checks it in the kernel).

Why not sched_yield, as before: on a machine with more runnable threads than
cores, a yielding waiter is rescheduled over and over and competes for the
core its partner needs; and in a VM a long ``pause`` loop makes the host
deschedule the virtual CPU.  A sleeper that is woken late costs little: the
waker never waits for it, and parallel segments hand out their blocks
dynamically, so the late thread takes whatever blocks are left.

Off Linux x86-64 (no futex number to call) waiters fall back to sched_yield.
"""
from llvmlite import ir

from .irutil import I32, I64, c64 as _c64, intrinsic

SPIN_LIMIT = 2000            # pause rounds before a waiter sleeps
SYS_FUTEX = 202              # x86-64 Linux
FUTEX_WAIT_PRIVATE = 128
FUTEX_WAKE_PRIVATE = 129
_WAKE_ALL = 0x7FFFFFFF


def _syscall(kb, args):
    fn = kb.module.globals.get("syscall")
    if fn is None:
        fn = ir.Function(kb.module, ir.FunctionType(I64, [I64], var_arg=True), name="syscall")
    return kb.b.call(fn, args)


def _futex(kb, word, op, val):
    b = kb.b
    return _syscall(kb, [_c64(SYS_FUTEX), b.ptrtoint(word, I64), _c64(op), val, _c64(0)])


def emit_barrier(kb):
    """Emit a barrier over kb's runtime thread count at kb.b's position."""
    b, fn = kb.b, kb.fn
    futex = kb.x86 and "linux" in (kb._triple or "x86_64-unknown-linux-gnu")
    st = kb.status
    sleepers = b.gep(st, [ir.Constant(I32, 1)])
    cnt = b.gep(st, [ir.Constant(I32, 2)])
    genp = b.gep(st, [ir.Constant(I32, 3)])
    gen0 = b.load_atomic(genp, "acquire", 4)
    old = b.atomic_rmw("add", cnt, ir.Constant(I32, 1), "acq_rel")
    last = b.icmp_signed("==", b.sext(old, I64), b.sub(kb.nthreads, _c64(1)))
    lastb = fn.append_basic_block("bar.last")
    spin = fn.append_basic_block("bar.spin")
    done = fn.append_basic_block("bar.done")
    b.cbranch(last, lastb, spin)

    b.position_at_end(lastb)
    b.store_atomic(ir.Constant(I32, 0), cnt, "monotonic", 4)
    b.atomic_rmw("add", genp, ir.Constant(I32, 1), "seq_cst")
    if futex:
        wake = fn.append_basic_block("bar.wake")
        asleep = b.load_atomic(sleepers, "seq_cst", 4)
        b.cbranch(b.icmp_signed("!=", asleep, ir.Constant(I32, 0)), wake, done)
        b.position_at_end(wake)
        _futex(kb, genp, FUTEX_WAKE_PRIVATE, _c64(_WAKE_ALL))
    b.branch(done)

    b.position_at_end(spin)
    ctr = kb.alloca(I64)
    b.store(_c64(0), ctr)
    loop = fn.append_basic_block("bar.loop")
    chk = fn.append_basic_block("bar.check")
    slow = fn.append_basic_block("bar.sleep")
    b.branch(loop)
    b.position_at_end(loop)
    if kb.x86:
        intrinsic(kb.b, "llvm.x86.sse2.pause", ir.VoidType(), [])
    k = b.add(b.load(ctr), _c64(1))
    b.store(k, ctr)
    b.cbranch(b.icmp_signed(">", k, _c64(SPIN_LIMIT)), slow, chk)
    b.position_at_end(chk)
    g = b.load_atomic(genp, "acquire", 4)
    b.cbranch(b.icmp_signed("==", g, gen0), loop, done)

    b.position_at_end(slow)
    if futex:
        b.atomic_rmw("add", sleepers, ir.Constant(I32, 1), "seq_cst")
        g = b.load_atomic(genp, "seq_cst", 4)
        sleep = fn.append_basic_block("bar.futex")
        woke = fn.append_basic_block("bar.woke")
        b.cbranch(b.icmp_signed("==", g, gen0), sleep, woke)
        b.position_at_end(sleep)
        _futex(kb, genp, FUTEX_WAIT_PRIVATE, b.zext(gen0, I64))
        b.branch(woke)
        b.position_at_end(woke)
        b.atomic_rmw("sub", sleepers, ir.Constant(I32, 1), "seq_cst")
    else:
        intrinsic(kb.b, "sched_yield", I32, [])
    g = b.load_atomic(genp, "acquire", 4)
    b.cbranch(b.icmp_signed("==", g, gen0), slow, done)   # spurious wake-up: sleep again
    b.position_at_end(done)
