"""The barrier protocol of parallel kernels (codegen/sync.py) on hand-built kernels:
thread 0 passes a barrier without waiting for a worker that holds no block (one
that has joined the call but stalls between barriers -- descheduled on a busy
host), and waits for one that is inside a grab loop.  A worker's stall is a
spin on a gate word the test opens; no timing is asserted, a hang fails through
a timeout."""
import ctypes
import threading
import time
from contextlib import contextmanager

import numpy as np
import pytest
from llvmlite import ir

from jitgrad.cache.native import host_target_machine, llvm_binding, load
from jitgrad.codegen import sync, thread_pool

pytestmark = pytest.mark.skipif(not thread_pool.supported(), reason="futex barriers: Linux x86-64 only")

I32, I64 = ir.IntType(32), ir.IntType(64)
STATUS, GATE, LOG = 0, 1, 2       # slots: status block (i32 x 16), gate (i64), log (i64 x 4)
T0_PASSED, W_IN, W_OUT = 0, 1, 2  # log entries


class _KB:
    """What sync's emitters read from KernelBuilder."""

    def __init__(self, fn, b):
        self.b, self.fn = b, fn
        self.tid, self.nthreads = fn.args[1], fn.args[2]
        self.barriers, self.futex, self.x86 = 0, True, True
        self._entry = ir.IRBuilder(fn.entry_basic_block)

    def alloca(self, ty):
        self._entry.position_at_start(self.fn.entry_basic_block)
        return self._entry.alloca(ty)

    @contextmanager
    def on_thread0(self):
        with self.b.if_then(self.b.icmp_signed("==", self.tid, ir.Constant(I64, 0))):
            yield


def _kernel(worker_busy):
    """k(slots, tid, n): barrier 1; a worker then writes log[W_IN], spins until the
    gate opens (inside a grab loop's busy count when worker_busy) and writes
    log[W_OUT]; thread 0 waits until log[W_IN] is set (the worker is stalled), then
    meets barrier 2 and writes log[T0_PASSED]."""
    mod = ir.Module(name="barrier_test")
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [ir.IntType(8).as_pointer().as_pointer(), I64, I64]),
                     name="k")
    fn.append_basic_block("entry")
    b = ir.IRBuilder(fn.append_basic_block("body"))
    ir.IRBuilder(fn.entry_basic_block).branch(fn.basic_blocks[1])
    kb = _KB(fn, b)

    def slot(k, ty):
        return b.bitcast(b.load(b.gep(fn.args[0], [ir.Constant(I64, k)])), ty.as_pointer())
    kb.status = slot(STATUS, I32)
    gate, log = slot(GATE, I64), slot(LOG, I64)

    def spin_until_set(ptr):
        loop, out = fn.append_basic_block("wait"), fn.append_basic_block("wait.out")
        b.branch(loop)
        b.position_at_end(loop)
        ready = b.icmp_signed("!=", b.load_atomic(ptr, "acquire", 8), ir.Constant(I64, 0))
        b.cbranch(ready, out, loop)
        b.position_at_end(out)

    def mark(k):
        b.store_atomic(ir.Constant(I64, 1), b.gep(log, [ir.Constant(I64, k)]), "release", 8)

    is_worker = b.icmp_signed("!=", kb.tid, ir.Constant(I64, 0))
    with b.if_then(is_worker):
        sync.emit_join(kb)
    sync.emit_barrier(kb)
    with b.if_else(is_worker) as (worker, lead):
        with worker:
            if worker_busy:
                sync.emit_busy(kb, True)
            mark(W_IN)
            spin_until_set(gate)
            mark(W_OUT)
            if worker_busy:
                sync.emit_busy(kb, False)
        with lead:
            spin_until_set(b.gep(log, [ir.Constant(I64, W_IN)]))
    sync.emit_barrier(kb)
    with kb.on_thread0():
        mark(T0_PASSED)
    sync.emit_exit(kb)
    b.ret_void()
    m = llvm_binding().parse_assembly(str(mod))
    m.verify()
    code = load(host_target_machine().emit_object(m))
    return code, ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)(code.address("k"))


def _call(worker_busy, check_while_stalled):
    """Worker (tid 1) and thread 0 of one 2-thread call on Python threads; while the
    worker is stalled, check_while_stalled(log, thread0) runs; then the gate opens."""
    code, k = _kernel(worker_busy)
    status = np.zeros(16, np.int32)
    gate = np.zeros(1, np.int64)
    log = np.zeros(4, np.int64)
    slots = (ctypes.c_void_p * 3)(status.ctypes.data, gate.ctypes.data, log.ctypes.data)
    worker = threading.Thread(target=k, args=(ctypes.addressof(slots), 1, 2), daemon=True)
    thread0 = threading.Thread(target=k, args=(ctypes.addressof(slots), 0, 2), daemon=True)
    worker.start()
    while status[1] == 0 and log[W_IN] == 0:   # the worker waits at barrier 1 (asleep: it has joined)
        time.sleep(0.001)
    thread0.start()
    try:
        check_while_stalled(log, thread0)
    finally:
        gate[0] = 1
        thread0.join(60)
        worker.join(60)
    assert not thread0.is_alive() and not worker.is_alive(), "barrier hung"
    assert list(log[:3]) == [1, 1, 1]
    assert status[2] & sync.DONE and status[2] & sync.BUSY_MASK == 0, hex(status[2])
    del code


def test_thread0_does_not_wait_for_a_stalled_worker_holding_no_block():
    # The worker has joined and passed barrier 1, then stalls: thread 0 passes
    # barrier 2 and returns while the gate is still closed (the barrier used to
    # wait for every joined thread to arrive: a descheduled one held up the call).
    def check(log, thread0):
        thread0.join(60)
        assert not thread0.is_alive(), "thread 0 waited for a worker that holds no block"
        assert log[T0_PASSED] == 1 and log[W_OUT] == 0
    _call(False, check)


def test_thread0_waits_for_a_worker_inside_a_grab_loop():
    # The stalled worker counts itself busy (a block it took is being computed):
    # thread 0 must not pass barrier 2 until it is out.
    def check(log, thread0):
        thread0.join(0.3)
        assert thread0.is_alive() and log[T0_PASSED] == 0, "thread 0 passed a barrier with a block in flight"
    _call(True, check)
