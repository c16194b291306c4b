"""The worker threads of parallel kernels: native loops, no Python, no GIL.

A parallel kernel's call (codegen/parallel.py) runs thread 0 on the caller and
threads 1..n-1 on this pool.  The pool used to be Python threads: waking one
meant a Python thread switch and the GIL, 11 ms median on a busy host (0.04 ms
idle), on every call.  Here, as in Eigen's and OpenMP's pools, each worker is
a pthread whose whole life is a small native loop (LLVM IR below, compiled
once per process): it spins on the job word for a bounded time after each job
(SPIN_US), then sleeps in futex; the caller publishes a job and runs thread 0
itself.  Linux x86-64 only (the futex system call number, ``pause``);
elsewhere kernels run on one thread (``supported()``).

The job block (CTX_BYTES, one cache line per writer):

  byte   0  gen       u32  job generation: the caller bumps it, workers wait on it (futex)
         4  sleepers  u32  workers asleep on gen (the caller calls FUTEX_WAKE only then)
         8  quit      u32  set by stop(): workers return
        16  spin      u64  bounded spin of a waiter, in cycles of the time-stamp counter
        64  claim     u64  gen << 32 | CLOSED | (n-1) << 8 | workers that took the job
        72  fn, slots, n   the job (written before claim, read after taking it)
       128  finished  u32  workers that took the job and have returned (the caller waits on it)
       132  waiting   u32  the caller sleeps on finished

A worker *takes* the job by a compare-and-swap on claim: only while claim is
tagged with the generation it saw, is not CLOSED and has a thread id left
(tid = 1 + takers before it).  When thread 0 has run the kernel, the caller
closes claim: a worker that wakes later takes nothing (it never sees a stale
job's slots), and the caller waits only for the workers that took the job --
they are inside the kernel, and the kernel itself (codegen/sync.py) lets one
that joins after thread 0 has left return at once.  Then the caller resets
finished and the kernel's team word, and returns.  The caller never waits for
a worker that has not started.
"""
import ctypes
import platform
import signal
import sys
import time

from llvmlite import ir

from ..cache.native import load as load_native
from . import target as _target
from .irutil import I8, I32, I64, c64, intrinsic
from .sync import FUTEX_WAIT_PRIVATE, FUTEX_WAKE_PRIVATE, futex

SPIN_US = 20                 # a waiter's spin before it sleeps (W3 at 2 threads, load 2: 24 ms at 20 us, 32 at 100, 28 at 0)
CTX_BYTES = 192
GEN, SLEEPERS, QUIT, SPIN = 0, 4, 8, 16
CLAIM, FN, SLOTS, NTHREADS = 64, 72, 80, 88
FINISHED, WAITING = 128, 132
CLOSED = 1 << 16
_WAKE_ALL = 0x7FFFFFFF

_I8P = I8.as_pointer()
_KERNEL = ir.FunctionType(ir.VoidType(), [_I8P.as_pointer(), I64, I64])


def _c32(v):
    return ir.Constant(I32, v)


class _Emit:
    """IR helpers over one builder: fields of the job block, futex, pause, TSC."""

    def __init__(self, fn, ctx):
        self.fn, self.ctx = fn, ctx
        self.b = ir.IRBuilder(fn.append_basic_block("entry"))

    def block(self, name):
        return self.fn.append_basic_block(name)

    def field(self, offset, ty):
        return self.b.bitcast(self.b.gep(self.ctx, [c64(offset)]), ty.as_pointer())

    def load(self, offset, ty, order="seq_cst"):
        return self.b.load_atomic(self.field(offset, ty), order, ty.width // 8)

    def store(self, offset, value, order="seq_cst"):
        self.b.store_atomic(value, self.field(offset, value.type), order, value.type.width // 8)

    def rmw(self, op, offset, value):
        return self.b.atomic_rmw(op, self.field(offset, value.type), value, "seq_cst")

    def futex(self, offset, op, val):
        futex(self, self.field(offset, I32), op, val)     # sync.futex needs only .b

    def pause(self):
        intrinsic(self.b, "llvm.x86.sse2.pause", ir.VoidType(), [])

    def tsc(self):
        return intrinsic(self.b, "llvm.readcyclecounter", I64, [])

    def wait_while(self, offset, flag, busy, name):
        """Spins (``pause``, at most ctx.spin TSC cycles) while busy(the u32 at
        offset) holds, then sleeps in futex on that word with the u32 at ``flag``
        counting sleepers (raised before the last look: the waker either sees the
        flag or the sleeper sees the new word, and futex re-checks it).  Leaves b
        after the wait; returns the word's value that ended it."""
        b = self.b
        start = self.tsc()
        limit = self.load(SPIN, I64, "monotonic")
        check, spin, sleep, nap, up, done = (self.block(f"{name}.{s}") for s in
                                             ("check", "spin", "sleep", "nap", "up", "done"))
        b.branch(check)
        b.position_at_end(check)
        w = self.load(offset, I32, "acquire")
        b.cbranch(busy(w), spin, done)
        b.position_at_end(spin)
        self.pause()
        b.cbranch(b.icmp_unsigned("<", b.sub(self.tsc(), start), limit), check, sleep)
        b.position_at_end(sleep)
        self.rmw("add", flag, _c32(1))
        w2 = self.load(offset, I32)
        b.cbranch(busy(w2), nap, up)
        b.position_at_end(nap)
        self.futex(offset, FUTEX_WAIT_PRIVATE, b.zext(w2, I64))
        b.branch(up)
        b.position_at_end(up)
        self.rmw("sub", flag, _c32(1))
        b.branch(check)          # woken, spuriously or not: look again (and spin again)
        b.position_at_end(done)
        return w


def _function(mod, name, ret, args):
    fn = ir.Function(mod, ir.FunctionType(ret, args), name=name)
    fn.attributes.add("nounwind")
    return fn


def _worker(mod):
    """Waits for a new generation, takes the job if it can, runs it, counts
    itself out; for ever, until quit."""
    fn = _function(mod, "jitgrad_pool_worker", _I8P, [_I8P])
    e = _Emit(fn, fn.args[0])
    b = e.b
    seen = b.alloca(I32)
    b.store(e.load(GEN, I32, "acquire"), seen)
    top, wait, take, swap, run, leave = (e.block(s) for s in ("top", "wait", "take", "swap", "run", "leave"))
    b.branch(top)
    b.position_at_end(top)
    # quit is looked at after seen is read: stop() sets it before it bumps gen, so a
    # worker that starts after stop() sees it here, one that starts before wakes up
    b.cbranch(b.icmp_unsigned("!=", e.load(QUIT, I32), _c32(0)), leave, wait)
    b.position_at_end(leave)
    b.ret(ir.Constant(_I8P, None))
    b.position_at_end(wait)
    g = e.wait_while(GEN, SLEEPERS, lambda w: b.icmp_unsigned("==", w, b.load(seen)), "idle")
    b.store(g, seen)
    b.branch(take)
    b.position_at_end(take)
    c = e.load(CLAIM, I64, "acquire")
    taken = b.and_(c, c64(0xFF))
    ours = b.and_(b.icmp_unsigned("==", b.lshr(c, c64(32)), b.zext(g, I64)),
                  b.icmp_unsigned("==", b.and_(c, c64(CLOSED)), c64(0)))
    free = b.icmp_unsigned("<", taken, b.and_(b.lshr(c, c64(8)), c64(0xFF)))
    b.cbranch(b.and_(ours, free), swap, top)     # a job of another generation, closed, or full
    b.position_at_end(swap)
    res = b.cmpxchg(e.field(CLAIM, I64), c, b.add(c, c64(1)), "seq_cst", "acquire")
    b.cbranch(b.extract_value(res, 1), run, take)
    b.position_at_end(run)
    kernel = b.inttoptr(e.load(FN, I64, "monotonic"), _KERNEL.as_pointer())
    slots = b.inttoptr(e.load(SLOTS, I64, "monotonic"), _I8P.as_pointer())
    b.call(kernel, [slots, b.add(taken, c64(1)), e.load(NTHREADS, I64, "monotonic")])
    e.rmw("add", FINISHED, _c32(1))
    wake, after = e.block("wake"), e.block("after")
    b.cbranch(b.icmp_unsigned("!=", e.load(WAITING, I32), _c32(0)), wake, after)
    b.position_at_end(wake)
    e.futex(FINISHED, FUTEX_WAKE_PRIVATE, c64(_WAKE_ALL))
    b.branch(after)
    b.position_at_end(after)
    b.branch(top)


def _run(mod):
    """The caller's side: publish, run thread 0, close, wait for the takers, reset."""
    fn = _function(mod, "jitgrad_pool_run", ir.VoidType(), [_I8P, _I8P, _I8P, I64, _I8P])
    ctx, kfn, slots, n, team = fn.args
    e = _Emit(fn, ctx)
    b = e.b
    g = b.add(e.load(GEN, I32, "monotonic"), _c32(1))     # only a caller (holding the pool) writes gen
    e.store(FN, b.ptrtoint(kfn, I64), "monotonic")
    e.store(SLOTS, b.ptrtoint(slots, I64), "monotonic")
    e.store(NTHREADS, n, "monotonic")
    e.store(CLAIM, b.or_(b.shl(b.zext(g, I64), c64(32)), b.shl(b.sub(n, c64(1)), c64(8))), "release")
    e.store(GEN, g)
    wake, go = e.block("wake"), e.block("go")
    b.cbranch(b.icmp_unsigned("!=", e.load(SLEEPERS, I32), _c32(0)), wake, go)
    b.position_at_end(wake)
    e.futex(GEN, FUTEX_WAKE_PRIVATE, b.sub(n, c64(1)))
    b.branch(go)
    b.position_at_end(go)
    b.call(b.bitcast(kfn, _KERNEL.as_pointer()), [b.bitcast(slots, _I8P.as_pointer()), c64(0), n])
    taken = b.trunc(b.and_(e.rmw("or", CLAIM, c64(CLOSED)), c64(0xFF)), I32)
    e.wait_while(FINISHED, WAITING, lambda w: b.icmp_unsigned("!=", w, taken), "join")
    e.store(FINISHED, _c32(0), "monotonic")      # no worker can take this job any more
    b.store_atomic(_c32(0), b.bitcast(team, I32.as_pointer()), "seq_cst", 4)
    b.ret_void()


def _stop(mod):
    fn = _function(mod, "jitgrad_pool_stop", ir.VoidType(), [_I8P])
    e = _Emit(fn, fn.args[0])
    b = e.b
    e.store(QUIT, _c32(1))
    e.rmw("add", GEN, _c32(1))
    e.futex(GEN, FUTEX_WAKE_PRIVATE, c64(_WAKE_ALL))
    b.ret_void()


def build_module():
    """The pool's IR: ``jitgrad_pool_worker(ctx)`` (a pthread start routine),
    ``jitgrad_pool_run(ctx, fn, slots, n, team)`` (the caller's side of a call),
    ``jitgrad_pool_stop(ctx)``, ``jitgrad_pool_tsc()`` (the time-stamp counter)."""
    mod = ir.Module(name="jitgrad_pool")
    _worker(mod)
    _run(mod)
    _stop(mod)
    tsc = _function(mod, "jitgrad_pool_tsc", I64, [])
    b = ir.IRBuilder(tsc.append_basic_block("entry"))
    b.ret(intrinsic(b, "llvm.readcyclecounter", I64, []))
    return mod


def supported():
    """Native workers need Linux x86-64 (futex, pause) and pthread_create in the process."""
    return sys.platform.startswith("linux") and platform.machine() == "x86_64" \
        and hasattr(_libc(), "pthread_create")


_LIBC = []
_CODE = []     # the compiled pool: kept for the process's life (a forked child's copy works too)


def _libc():
    if not _LIBC:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.pthread_create.argtypes = [ctypes.c_void_p] * 4
        libc.pthread_join.argtypes = [ctypes.c_ulong, ctypes.c_void_p]
        _LIBC.append(libc)
    return _LIBC[0]


def target_machine():
    """The pool is compiled for the SSE2 baseline, not the host nor JITGRAD_TARGET_CPU:
    it is not hot (atomics, futex, pause), kernels compiled for every target share the
    process's one pool, and it never uses an instruction a lower target lacks."""
    return _target.baseline().target_machine(opt=2)


class _Code:
    """The pool's functions, compiled once per process (`target_machine`)."""

    def __init__(self):
        self.code = load_native(_target.baseline_object_code("pool-code", str(build_module())))
        vp = ctypes.c_void_p
        self.run = ctypes.CFUNCTYPE(None, vp, vp, vp, ctypes.c_int64, vp)(self.code.address("jitgrad_pool_run"))
        self.stop = ctypes.CFUNCTYPE(None, vp)(self.code.address("jitgrad_pool_stop"))
        self.worker = self.code.address("jitgrad_pool_worker")
        tsc = ctypes.CFUNCTYPE(ctypes.c_int64)(self.code.address("jitgrad_pool_tsc"))
        # TSC cycles per microsecond (a fixed rate on every x86-64 this runs on): spins are bounded in time
        t0, c0 = time.perf_counter(), tsc()
        time.sleep(0.002)
        t1, c1 = time.perf_counter(), tsc()
        self.tsc_per_us = max(1.0, (c1 - c0) / ((t1 - t0) * 1e6))


def _code():
    if not _CODE:
        _CODE.append(_Code())
    return _CODE[0]


class NativePool:
    """Worker pthreads running jitgrad_pool_worker on one job block.  One caller
    at a time (codegen/parallel.py holds a lock around run)."""

    def __init__(self, spin_us=SPIN_US):
        self.code = _code()
        self._mem = ctypes.create_string_buffer(CTX_BYTES + 64)
        base = ctypes.addressof(self._mem)
        self.ctx = base + (-base) % 64
        self.set_spin(spin_us)
        self.threads = []

    def set_spin(self, us):
        """A waiter's spin before it sleeps, in microseconds (0: sleep at once)."""
        ctypes.c_uint64.from_address(self.ctx + SPIN).value = int(us * self.code.tsc_per_us)

    def ensure(self, k):
        """At least k workers running, started with every signal blocked: signals
        go to Python's threads, never to a native loop."""
        if len(self.threads) >= k:
            return
        old = signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
        try:
            while len(self.threads) < k:
                t = ctypes.c_ulong()
                err = _libc().pthread_create(ctypes.byref(t), None, self.code.worker, self.ctx)
                if err:
                    raise OSError(err, "pthread_create failed")
                self.threads.append(t.value)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)

    def run(self, fn_addr, slots_addr, n_threads, team_addr):
        """One call of a kernel's ``_mt`` entry on n_threads threads (the caller is
        thread 0); returns when thread 0 and every worker that took part are done."""
        self.ensure(n_threads - 1)
        self.code.run(self.ctx, fn_addr, slots_addr, n_threads, team_addr)

    def stop(self):
        """Workers return (after the job they are in, if any) and are joined."""
        self.code.stop(self.ctx)
        for t in self.threads:
            _libc().pthread_join(t, None)
        self.threads = []
