"""The barriers of parallel kernels (threads: jitgrad/codegen/parallel.py).

Thread 0 starts a kernel call at once; the other threads *join* it when they
get going, which on a busy machine (or a thread just woken) may be late.  A
barrier waits only for the threads that have joined: one that joins late
skips the barriers the team has already passed (the parallel segments before
them have had all their blocks taken) and takes what blocks are left -- so
thread 0 never waits for a thread that has not started, and no result
depends on who computed a block.  Serial segments run on thread 0; parallel
ones hand out blocks dynamically (kernel.loop_grab / grab_rows): nothing is
tied to a thread id.

The team's state is one 32-bit word (status word 2, byte TEAM_OFFSET), changed by
atomic read-modify-writes only, so a join, an arrival and a barrier's completion
are ordered: bits 0-3 workers joined (thread 0 always counts), 4-7 threads
arrived at the current barrier, bit 8 DONE (thread 0 has left the kernel: a
worker that comes later is refused at the door and returns at once, so it
never runs a call that is over), 12-31 barriers passed in this call (barrier
sites are numbered in program order: site k is passed when that count reaches
k).  Thread 0 leaving a single-threaded call resets the word to 0; after a
threaded call the pool resets it (codegen/thread_pool.py: once every worker
that took the job has returned, so no late worker can join the next call with
this one's counts).

A waiter spins with ``pause`` for SPIN_LIMIT rounds (a barrier after a
balanced parallel segment is crossed within that), then sleeps in
futex(FUTEX_WAIT) on the team word, so it takes no core from the thread it
waits for.  The thread completing a barrier makes the FUTEX_WAKE system call
only when the sleepers word (status word 1) says someone sleeps (sequentially
consistent on both sides: either the waker sees the sleeper, or the sleeper
sees the new word, and futex re-checks it in the kernel).  A sleeper woken by
another change of the word (a join, an arrival) checks and sleeps again.

Why not sched_yield: on a machine with more runnable threads than cores, a
yielding waiter is rescheduled over and over and competes for the core its
partner needs; and in a VM a long ``pause`` loop makes the host deschedule the
virtual CPU.  Off Linux x86-64 (no futex number to call) waiters fall back to
sched_yield.

This module is KernelBuilder's own (kernel.py's barrier, join and exit call it), not a
lowering: besides the lowering interface's ``b`` and ``alloca`` it reads the builder's
status word, started-thread count, barrier counter and ``x86`` / ``futex`` flags.
"""
from llvmlite import ir

from .irutil import I32, I64, c64 as _c64, intrinsic

SPIN_LIMIT = 2000            # pause rounds before a waiter sleeps
SYS_FUTEX = 202              # x86-64 Linux
FUTEX_WAIT_PRIVATE = 128
FUTEX_WAKE_PRIVATE = 129
_WAKE_ALL = 0x7FFFFFFF

JOINED, ARRIVED, DONE, PHASE = 1, 1 << 4, 1 << 8, 1 << 12   # the team word's fields (units)
FIELD = 0xF
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


def _field(b, w, unit):
    return b.and_(b.lshr(w, _i32(unit.bit_length() - 1)), _i32(FIELD))


def emit_join(kb):
    """A worker (tid != 0) joins the call at kernel entry -- unless thread 0 has
    already left it (DONE): then it returns at once, touching nothing more."""
    b, fn = kb.b, kb.b.function
    _, team = _words(kb)
    retry = fn.append_basic_block("join.try")
    refused = fn.append_basic_block("join.refused")
    swap = fn.append_basic_block("join.swap")
    joined = fn.append_basic_block("join.ok")
    b.branch(retry)
    b.position_at_end(retry)
    w = b.load_atomic(team, "acquire", 4)
    b.cbranch(b.icmp_unsigned("!=", b.and_(w, _i32(DONE)), _i32(0)), refused, swap)
    b.position_at_end(refused)
    b.ret_void()
    b.position_at_end(swap)
    res = b.cmpxchg(team, w, b.add(w, _i32(JOINED)), "seq_cst", "acquire")
    b.cbranch(b.extract_value(res, 1), joined, retry)
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


BARRIER_FN = "jitgrad.barrier"   # + ".futex" / ".x86": the module's barrier function


def emit_barrier(kb):
    """Emit the next barrier site (numbered in program order) at kb.b's position: a
    call of the module's barrier function with the site's number.

    Why a call: inline, each site was ~80 instructions of atomics and loops (W3's
    kernel: 5 sites, ~16% of its main unit's IR), optimised and code-generated
    once per site on the cold compile's critical path; a call per barrier costs
    nothing measurable next to the wait.  The function is noinline, and on every
    path it may reach an external call (syscall / sched_yield) LLVM knows nothing
    about, so the optimiser treats each call as reading and writing any memory:
    no load or store of the kernel's buffers moves across a barrier."""
    kb.barriers += 1
    fn = _barrier_function(kb.b.module, kb.futex, kb.x86)
    kb.b.call(fn, [kb.status, _i32(kb.barriers)])


def _barrier_function(module, can_sleep, x86):
    """The module's ``void barrier(i32* status, i32 site)`` (created on first use)."""
    name = BARRIER_FN + (".futex" if can_sleep else "") + (".x86" if x86 else "")
    fn = module.globals.get(name)
    if fn is not None:
        return fn
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [I32.as_pointer(), I32]), name=name)
    fn.linkage = "internal"
    fn.attributes.add("noinline")
    fn.attributes.add("nounwind")
    entry = ir.IRBuilder(fn.append_basic_block("entry"))
    b = ir.IRBuilder(fn.append_basic_block("bar.start"))
    site_kb = _SiteBuilder(b, fn.args[0], can_sleep, x86, entry)
    _emit_barrier_body(site_kb, fn.args[1])
    b.ret_void()
    entry.branch(fn.blocks[1])
    return fn


class _SiteBuilder:
    """What the barrier's code reads of a KernelBuilder, inside the barrier function."""

    def __init__(self, b, status, futex_ok, x86, entry_b):
        self.b, self.status, self.futex, self.x86, self._entry = b, status, futex_ok, x86, entry_b

    def alloca(self, ty):
        return self._entry.alloca(ty)


def _emit_barrier_body(kb, site):
    """The barrier's code at kb.b's position: waits until barrier site ``site`` (i32)
    is passed; ends positioned after it."""
    b, fn = kb.b, kb.b.function
    can_sleep = kb.futex
    sleepers, team = _words(kb)

    def passed(w):
        return b.icmp_unsigned(">=", b.lshr(w, _i32(12)), site)

    def is_last(w):       # every joined thread but this one has arrived
        return b.icmp_unsigned("==", _field(b, w, ARRIVED), _field(b, w, JOINED))

    done = fn.append_basic_block("bar.done")
    retry = fn.append_basic_block("bar.try")
    b.branch(retry)
    b.position_at_end(retry)
    w = b.load_atomic(team, "acquire", 4)
    arrive = fn.append_basic_block("bar.arrive")
    b.cbranch(passed(w), done, arrive)     # a late joiner: the team is past this site

    b.position_at_end(arrive)
    last = is_last(w)
    nxt = b.select(last, b.add(b.sub(w, b.mul(_field(b, w, ARRIVED), _i32(ARRIVED))), _i32(PHASE)),
                   b.add(w, _i32(ARRIVED)))
    res = b.cmpxchg(team, w, nxt, "seq_cst", "acquire")
    swapped = fn.append_basic_block("bar.swapped")
    b.cbranch(b.extract_value(res, 1), swapped, retry)
    b.position_at_end(swapped)
    lastb = fn.append_basic_block("bar.last")
    spin = fn.append_basic_block("bar.spin")
    b.cbranch(last, lastb, spin)

    b.position_at_end(lastb)
    if can_sleep:
        wake = fn.append_basic_block("bar.wake")
        asleep = b.load_atomic(sleepers, "seq_cst", 4)
        b.cbranch(b.icmp_signed("!=", asleep, _i32(0)), wake, done)
        b.position_at_end(wake)
        futex(kb, team, FUTEX_WAKE_PRIVATE, _c64(_WAKE_ALL))
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
    b.cbranch(passed(b.load_atomic(team, "acquire", 4)), done, loop)

    b.position_at_end(slow)
    if can_sleep:
        b.atomic_rmw("add", sleepers, _i32(1), "seq_cst")
        g = b.load_atomic(team, "seq_cst", 4)
        sleep = fn.append_basic_block("bar.futex")
        woke = fn.append_basic_block("bar.woke")
        b.cbranch(passed(g), woke, sleep)
        b.position_at_end(sleep)
        futex(kb, team, FUTEX_WAIT_PRIVATE, b.zext(g, I64))
        b.branch(woke)
        b.position_at_end(woke)
        b.atomic_rmw("sub", sleepers, _i32(1), "seq_cst")
    else:
        intrinsic(kb.b, "sched_yield", I32, [])
    b.cbranch(passed(b.load_atomic(team, "acquire", 4)), done, slow)   # woken by another change: again
    b.position_at_end(done)
