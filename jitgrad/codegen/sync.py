"""The barriers of parallel kernels (threads: jitgrad/codegen/parallel.py).

Thread 0 starts a kernel call at once and runs every serial segment; the other
threads *join* it when they get going, which on a busy machine (or a thread just
woken) may be late, and may be descheduled anywhere once in.  Parallel segments
hand out fixed blocks dynamically (kernel.loop_grab / grab_rows), so a fast
thread takes what a slow one has not, and nothing is tied to a thread id: no
result depends on who computed a block.

What a barrier waits for is the *work*, not the threads.  Thread 0 passes
barrier site k once no thread is inside a grab loop (BUSY = 0): thread 0 itself
has left every grab loop before site k, so every block before it has been taken,
and none is still being computed.  A worker passes site k once thread 0 has
(PHASE >= k).  So thread 0 never waits for a worker that holds no block -- one
that has joined but sits descheduled, or asleep in a barrier, costs the call
nothing (it used to: a barrier waited for every joined thread to *arrive*, and
on a host with more runnable threads than cores 2 threads ran W3 slower than 1);
it waits only while a block it cannot take is being computed.  A worker that
comes late passes the sites thread 0 has passed and finds their blocks taken.

The team's state is one 32-bit word (status word 2, byte TEAM_OFFSET), changed by
atomic read-modify-writes only: bits 0-7 BUSY, threads inside a grab loop (each
counts itself in before its first grab, out after its last); bit 8 DONE (thread
0 has left the kernel: a worker that comes later is refused at the door and
returns at once, so it never runs a call that is over); 12-31 PHASE, barrier
sites thread 0 has passed in this call (sites are numbered in program order).
Thread 0 leaving a single-threaded call resets the word to 0; after a threaded
call the pool resets it (codegen/thread_pool.py: once every worker that took the
job has returned, so no late worker can see this call's counts in the next).

A waiter spins with ``pause`` for SPIN_LIMIT rounds (a barrier after a
balanced parallel segment is crossed within that), then sleeps in
futex(FUTEX_WAIT) on the team word, so it takes no core from the thread it
waits for.  Thread 0 advancing PHASE, and a worker leaving a grab loop last
(BUSY to 0), make the FUTEX_WAKE system call only when the sleepers word
(status word 1) says someone sleeps (sequentially consistent on both sides:
either the waker sees the sleeper, or the sleeper sees the new word, and futex
re-checks it in the kernel).  A sleeper woken by another change of the word
checks and sleeps again.

Why not sched_yield: on a machine with more runnable threads than cores, a
yielding waiter is rescheduled over and over and competes for the core its
partner needs; and in a VM a long ``pause`` loop makes the host deschedule the
virtual CPU.  Off Linux x86-64 (no futex number to call) waiters fall back to
sched_yield.

This module is KernelBuilder's own (kernel.py's barrier, grab loops, join and exit
call it), not a lowering: besides the lowering interface's ``b`` and ``alloca`` it
reads the builder's status word, thread id and count, barrier counter and ``x86`` /
``futex`` flags.
"""
from llvmlite import ir

from .irutil import I32, I64, c64 as _c64, intrinsic

SPIN_LIMIT = 2000            # pause rounds before a waiter sleeps
SYS_FUTEX = 202              # x86-64 Linux
FUTEX_WAIT_PRIVATE = 128
FUTEX_WAKE_PRIVATE = 129
_WAKE_ALL = 0x7FFFFFFF

BUSY, DONE, PHASE = 1, 1 << 8, 1 << 12   # the team word's fields (units)
BUSY_MASK = 0xFF
TEAM_OFFSET = 8              # byte offset of the team word in the kernel's status block


def _syscall(kb, args):
    fn = kb.b.module.globals.get("syscall")
    if fn is None:
        fn = ir.Function(kb.b.module, ir.FunctionType(I64, [I64], var_arg=True), name="syscall")
    return kb.b.call(fn, args)


def futex(kb, word, op, val):
    """futex(word, op, val) at kb.b's position (kb: anything with a builder .b)."""
    b = kb.b
    return _syscall(kb, [_c64(SYS_FUTEX), b.ptrtoint(word, I64), _c64(op), val, _c64(0)])


def _i32(v):
    return ir.Constant(I32, v)


def _words(kb):
    b = kb.b
    return b.gep(kb.status, [_i32(1)]), b.gep(kb.status, [_i32(2)])    # sleepers, team


def _wake_sleepers(kb):
    """FUTEX_WAKE on the team word, only if the sleepers word says someone sleeps."""
    if not kb.futex:
        return
    b = kb.b
    sleepers, team = _words(kb)
    with b.if_then(b.icmp_signed("!=", b.load_atomic(sleepers, "seq_cst", 4), _i32(0))):
        futex(kb, team, FUTEX_WAKE_PRIVATE, _c64(_WAKE_ALL))


def _wait_until(kb, ready):
    """Spins, then sleeps, until ready(team word) holds; leaves kb.b after the wait."""
    b, fn = kb.b, kb.b.function
    sleepers, team = _words(kb)
    ctr = kb.alloca(I64)
    b.store(_c64(0), ctr)
    loop, spin, slow, check, done = (fn.append_basic_block(f"bar.{s}")
                                     for s in ("loop", "spin", "sleep", "check", "done"))
    b.branch(loop)
    b.position_at_end(loop)
    b.cbranch(ready(b.load_atomic(team, "acquire", 4)), done, spin)
    b.position_at_end(spin)
    if kb.x86:
        intrinsic(b, "llvm.x86.sse2.pause", ir.VoidType(), [])
    k = b.add(b.load(ctr), _c64(1))
    b.store(k, ctr)
    b.cbranch(b.icmp_signed(">", k, _c64(SPIN_LIMIT)), slow, loop)
    b.position_at_end(slow)
    if kb.futex:
        b.atomic_rmw("add", sleepers, _i32(1), "seq_cst")
        g = b.load_atomic(team, "seq_cst", 4)
        sleep = fn.append_basic_block("bar.futex")
        woke = fn.append_basic_block("bar.woke")
        b.cbranch(ready(g), woke, sleep)
        b.position_at_end(sleep)
        futex(kb, team, FUTEX_WAIT_PRIVATE, b.zext(g, I64))
        b.branch(woke)
        b.position_at_end(woke)
        b.atomic_rmw("sub", sleepers, _i32(1), "seq_cst")
    else:
        intrinsic(b, "sched_yield", I32, [])
    b.branch(check)
    b.position_at_end(check)
    b.cbranch(ready(b.load_atomic(team, "acquire", 4)), done, slow)   # woken by another change: again
    b.position_at_end(done)


def emit_join(kb):
    """A worker (tid != 0) joins the call at kernel entry -- unless thread 0 has
    already left it (DONE): then it returns at once, touching nothing more."""
    b, fn = kb.b, kb.b.function
    _, team = _words(kb)
    refused = fn.append_basic_block("join.refused")
    joined = fn.append_basic_block("join.ok")
    w = b.load_atomic(team, "acquire", 4)
    b.cbranch(b.icmp_unsigned("!=", b.and_(w, _i32(DONE)), _i32(0)), refused, joined)
    b.position_at_end(refused)
    b.ret_void()
    b.position_at_end(joined)


def emit_exit(kb):
    """Thread 0 on its way out: a call on one thread resets the word; on several it
    marks the call DONE (the pool resets the word once every worker that took the
    job has returned).  Workers leave without a trace: the pool counts them out."""
    b = kb.b
    _, team = _words(kb)
    with kb.on_thread0():
        alone = b.icmp_signed("==", kb.nthreads, _c64(1))
        with b.if_else(alone) as (then, otherwise):
            with then:
                b.store_atomic(_i32(0), team, "seq_cst", 4)
            with otherwise:
                b.atomic_rmw("or", team, _i32(DONE), "seq_cst")


def emit_busy(kb, enter):
    """A thread entering a grab loop (enter=True, before its first grab) counts
    itself BUSY; leaving it (after the grab that found no block left) counts itself
    out, and a worker that leaves last wakes thread 0 should it sleep at a barrier."""
    b = kb.b
    _, team = _words(kb)
    if enter:
        b.atomic_rmw("add", team, _i32(BUSY), "seq_cst")
        return
    old = b.atomic_rmw("sub", team, _i32(BUSY), "seq_cst")
    last = b.icmp_unsigned("==", b.and_(old, _i32(BUSY_MASK)), _i32(BUSY))
    with b.if_then(b.and_(last, b.icmp_signed("!=", kb.tid, _c64(0)))):
        _wake_sleepers(kb)


def emit_barrier(kb):
    """Emit the next barrier site (numbered in program order) at kb.b's position:
    thread 0 waits for BUSY 0 and passes the site (bar.last), a worker waits until
    thread 0 has passed it (or left the kernel)."""
    b, fn = kb.b, kb.b.function
    kb.barriers += 1
    site = _i32(kb.barriers)
    _, team = _words(kb)
    lead, last, follow, out = (fn.append_basic_block(f"bar.{s}") for s in ("lead", "last", "follow", "out"))
    b.cbranch(b.icmp_signed("==", kb.tid, _c64(0)), lead, follow)

    b.position_at_end(lead)
    _wait_until(kb, lambda w: b.icmp_unsigned("==", b.and_(w, _i32(BUSY_MASK)), _i32(0)))
    b.branch(last)
    b.position_at_end(last)
    b.atomic_rmw("add", team, _i32(PHASE), "seq_cst")     # only thread 0 changes PHASE
    wake = fn.append_basic_block("bar.wake")       # (one bar.last per site: tests count them)
    b.branch(wake)
    b.position_at_end(wake)
    _wake_sleepers(kb)
    b.branch(out)

    b.position_at_end(follow)
    _wait_until(kb, lambda w: b.or_(b.icmp_unsigned(">=", b.lshr(w, _i32(12)), site),
                                    b.icmp_unsigned("!=", b.and_(w, _i32(DONE)), _i32(0))))
    b.branch(out)
    b.position_at_end(out)
