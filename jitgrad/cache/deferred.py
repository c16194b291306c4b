"""Disk-cache writes done after the result they belong to, on one writer thread.

A fresh process's first W3 result used to wait for three entries to reach the disk
(the host facts, the thread pool's code, the kernel): each is written to a temporary
file, fsynced, renamed over the entry and its directory fsynced (disk.py's crash
safety), 5-15 ms of wall time apiece on this host.  `DiskCache.store(..., later=True)`
checks and encodes the entry on the caller's thread, then queues just that file write
here: the write is the same one, only its time moves.

What stays true:
- readers see no entry or a complete one (the atomic rename is unchanged); a process
  that dies before its queue is written loses those entries, never corrupts one;
- the process writes what it queued before it exits (`wait` is an atexit hook);
- this process reads its own writes: DiskCache's readers (load, the directory scans)
  call `wait` first.  The writer thread itself never waits (it would wait for itself).
A forked child starts with an empty queue: the parent writes what it queued.
"""
import atexit
import collections
import os
import threading

_cond = threading.Condition()
_queue = collections.deque()
_state = {"thread": None, "busy": 0}    # busy: jobs queued or running


def submit(fn, *args):
    """Runs fn(*args) on the writer thread, after the jobs queued before it.  Its
    exceptions are dropped (a store never raises into the compile)."""
    with _cond:
        _queue.append((fn, args))
        _state["busy"] += 1
        t = _state["thread"]
        if t is None or not t.is_alive():
            t = _state["thread"] = threading.Thread(target=_run, name="jitgrad-cache-writer", daemon=True)
            t.start()
        _cond.notify_all()


def _run():
    while True:
        with _cond:
            while not _queue:
                _cond.wait()
            fn, args = _queue.popleft()
        try:
            fn(*args)
        except Exception:
            pass
        finally:
            with _cond:
                _state["busy"] -= 1
                _cond.notify_all()


def wait():
    """Returns once every job queued so far has run (at once on the writer thread)."""
    if threading.current_thread() is _state["thread"]:
        return
    with _cond:
        while _state["busy"]:
            _cond.wait()


def pending():
    """Jobs queued or running (tests)."""
    return _state["busy"]


def _after_fork():
    global _cond
    _cond = threading.Condition()   # the parent's may have been held by one of its threads
    _queue.clear()
    _state.update(thread=None, busy=0)


atexit.register(wait)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)
