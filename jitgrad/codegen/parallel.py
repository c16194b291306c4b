"""Thread launch for parallel kernels.

A kernel built with parallel loop nests (kernel meta ``parallel``) exports
``<name>_mt(i8** slots, i64 tid, i64 n_threads)`` next to the usual
``<name>(slots)`` (== ``<name>_mt(slots, 0, 1)``).  Every thread runs the whole
function: each parallel nest hands out its fixed blocks dynamically (an atomic
counter), serial nests run on thread 0, and a barrier (jitgrad/codegen/sync.py:
spin, then futex sleep) stands wherever data passes into or out of a parallel
nest -- not between serial nests.  Thread 0 does not wait for the others to
start: a barrier waits for the threads that have joined the call, and one that
starts late skips what the others have finished.  Results do not depend on the thread count
(reductions combine fixed blocks in a fixed order).

``call_parallel(fn_addr, slots_addr, n_threads, status_addr)`` runs threads
1..n-1 on the process's pool of native workers (codegen/thread_pool.py: no
Python, no GIL on the way) and thread 0 on the caller; the pool resets the
kernel's team word after the call.  If the pool is busy (another Python thread
is running a parallel kernel), or the host has no native pool (not Linux
x86-64), the call runs single-threaded instead: same result.  A forked child
starts its own pool on its first parallel call; workers are stopped at exit.

Thread count: ``JITGRAD_NUM_THREADS`` (default ``os.cpu_count()``); 1 disables
threads.  ``set_num_threads(n)`` changes it at run time (tests, benchmarks).
"""
import _thread
import atexit
import ctypes
import os
import threading
import time

from .sync import TEAM_OFFSET
from .thread_pool import SPIN_US, NativePool, supported as _native_supported

_FNTYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)


def _env_threads():
    try:
        n = int(os.environ.get("JITGRAD_NUM_THREADS", "") or (os.cpu_count() or 1))
    except ValueError:
        n = os.cpu_count() or 1
    return max(1, n)


NUM_THREADS = [_env_threads()]
_NATIVE = _native_supported()


def num_threads():
    return NUM_THREADS[0]


def set_num_threads(n):
    """Sets the thread count for parallel kernels (None: back to the env default)."""
    NUM_THREADS[0] = _env_threads() if n is None else max(1, int(n))


def kernel_threads(meta):
    """Threads to use for a kernel with this meta (1: call the plain entry).  A kernel
    whose meta says ``wake`` False (fusion_plan.PAR_MIN_FLOPS_AWAKE: too small to pay
    for waking a thread) gets its threads only when a parallel kernel's call ended
    at most AWAKE_WINDOW_S ago (``call_done``): the workers are then still spinning
    (thread_pool.SPIN_US), or one call in a loop of them wakes them for the rest."""
    if not meta.get("parallel"):
        return 1
    n = max(1, min(int(meta.get("threads", 1)), NUM_THREADS[0]))
    if n > 1 and meta.get("wake") is False and time.perf_counter() - _LAST_END[0] > AWAKE_WINDOW_S:
        return 1
    return n


AWAKE_WINDOW_S = SPIN_US * 1e-6
_LAST_END = [float("-inf")]


def call_done():
    """A parallel kernel's call (on any number of threads) has just returned."""
    _LAST_END[0] = time.perf_counter()


def entry_mt_address(loaded, meta):
    """Address of ``<name>_mt`` in a loaded kernel (0 when not parallel)."""
    if not meta.get("parallel"):
        return 0
    return int(loaded.address(meta["name"] + "_mt"))


_pool = [None]           # the process's NativePool (None: not started yet, or not supported)
_pool_lock = threading.Lock()


def _get_pool():
    """The process's pool, started on first use -- and again in a forked child:
    the parent's workers do not exist there (fork copies only the calling thread)."""
    p = _pool[0]
    if p is None or p.pid != os.getpid():
        with _pool_lock:
            p = _pool[0]
            if p is None or p.pid != os.getpid():
                p = NativePool()
                p.pid, p.lock = os.getpid(), _thread.allocate_lock()
                _pool[0] = p
    return p


def prepare_pool():
    """Starts the process's pool now (compiling its code) if parallel calls will use it:
    compiler.py has a compile thread do it while a parallel kernel compiles, so the
    kernel's first call does not wait for it."""
    if _NATIVE and NUM_THREADS[0] > 1:
        _get_pool()


@atexit.register
def _stop_pool():
    """Workers stop and are joined before the interpreter frees the code they run
    (the kernels' and the pool's).  A call in flight on another thread finishes first."""
    p = _pool[0]
    if p is not None and p.pid == os.getpid() and p.lock.acquire(timeout=10):
        p.stop()                   # the lock stays held: a later call runs on one thread


def call_parallel(fn_addr, slots_addr, n_threads, status_addr):
    """Runs the kernel entry ``fn_addr`` (``<name>_mt``) on ``n_threads`` threads;
    ``status_addr``: the kernel's status block (its team word is reset after the call)."""
    if n_threads > 1 and _NATIVE:
        pool = _get_pool()
        if pool.lock.acquire(False):     # else another Python thread's call has the pool
            try:
                pool.run(fn_addr, slots_addr, n_threads, status_addr + TEAM_OFFSET)
                return
            finally:
                pool.lock.release()
    _FNTYPE(fn_addr)(slots_addr, 0, 1)      # one thread: same result
