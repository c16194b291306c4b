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

``call_parallel(fn_addr, slots_addr, n_threads)`` runs threads 1..n-1 on a
persistent pool of Python threads (ctypes releases the GIL during the call)
and thread 0 on the caller.  If the pool is busy (another Python thread is
running a parallel kernel) the call runs single-threaded instead: same result.

Thread count: ``JITGRAD_NUM_THREADS`` (default ``os.cpu_count()``); 1 disables
threads.  ``set_num_threads(n)`` changes it at run time (tests, benchmarks).
"""
import _thread
import ctypes
import os
import threading

_FNTYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)


def _env_threads():
    try:
        n = int(os.environ.get("JITGRAD_NUM_THREADS", "") or (os.cpu_count() or 1))
    except ValueError:
        n = os.cpu_count() or 1
    return max(1, n)


NUM_THREADS = [_env_threads()]


def num_threads():
    return NUM_THREADS[0]


def set_num_threads(n):
    """Sets the thread count for parallel kernels (None: back to the env default)."""
    NUM_THREADS[0] = _env_threads() if n is None else max(1, int(n))


def kernel_threads(meta):
    """Threads to use for a kernel with this meta (1: call the plain entry)."""
    if not meta.get("parallel"):
        return 1
    return max(1, min(int(meta.get("threads", 1)), NUM_THREADS[0]))


def entry_mt_address(loaded, meta):
    """Address of ``<name>_mt`` in a loaded kernel (0 when not parallel)."""
    if not meta.get("parallel"):
        return 0
    return int(loaded.address(meta["name"] + "_mt"))


class _Worker:
    __slots__ = ("go", "done", "task", "thread")

    def __init__(self):
        self.go = _thread.allocate_lock()
        self.go.acquire()
        self.done = _thread.allocate_lock()
        self.done.acquire()
        self.task = None
        self.thread = threading.Thread(target=self._loop, name="jitgrad-worker", daemon=True)
        self.thread.start()

    def _loop(self):
        while True:
            self.go.acquire()
            fn, slots, tid, n = self.task
            try:
                fn(slots, tid, n)
            finally:
                self.task = None
                self.done.release()


class _Pool:
    def __init__(self):
        self.pid = os.getpid()
        self.workers = []
        self.lock = _thread.allocate_lock()

    def ensure(self, k):
        while len(self.workers) < k:
            self.workers.append(_Worker())


_pool = [None]
_pool_lock = threading.Lock()


def _get_pool():
    p = _pool[0]
    if p is None or p.pid != os.getpid():   # first use, or after fork: threads do not survive it
        with _pool_lock:
            p = _pool[0]
            if p is None or p.pid != os.getpid():
                p = _pool[0] = _Pool()
    return p


def call_parallel(fn_addr, slots_addr, n_threads):
    """Runs the kernel entry ``fn_addr`` (``<name>_mt``) on ``n_threads`` threads."""
    fn = _FNTYPE(fn_addr)    # not cached by address: a table of them grew with every kernel run
    if n_threads <= 1:
        fn(slots_addr, 0, 1)
        return
    pool = _get_pool()
    if not pool.lock.acquire(False):
        fn(slots_addr, 0, 1)       # pool in use by another Python thread: run serially
        return
    try:
        pool.ensure(n_threads - 1)
        ws = pool.workers[:n_threads - 1]
        for t, w in enumerate(ws, 1):
            w.task = (fn, slots_addr, t, n_threads)
            w.go.release()
        fn(slots_addr, 0, n_threads)
        for w in ws:
            w.done.acquire()
    finally:
        pool.lock.release()
