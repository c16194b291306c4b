"""Short GIL turns while this thread runs Python beside a compile thread.

backend.Units.finish has a compile thread optimise a kernel's main unit (its critical
path) while the calling thread builds the matmul functions in pure Python.  The compile
thread calls LLVM through ctypes ~25 times per unit, and each return from C must take
the GIL back from the thread running Python: CPython makes it wait the switch interval
(5 ms by default) before asking for it -- up to ~50 ms added to the main unit's compile
before its O3 run even starts (the calls that parse, verify and set up the pass
builder).  Inside the block the interval is GIL_TURN; concurrent blocks are counted,
the last one out restores the interval found by the first one in -- unless the program
set one of its own meanwhile, which stays.  A thread with no other thread waiting for
the GIL is not interrupted by a short interval.
"""
import contextlib
import sys
import threading

GIL_TURN = 0.0002      # seconds

_lock = threading.Lock()
_state = {"depth": 0, "interval": None, "short": None}


@contextlib.contextmanager
def short():
    """sys.setswitchinterval(GIL_TURN) inside the block (never a longer interval)."""
    with _lock:
        if _state["depth"] == 0:
            _state["interval"] = sys.getswitchinterval()
            sys.setswitchinterval(min(GIL_TURN, _state["interval"]))
            _state["short"] = sys.getswitchinterval()     # as CPython keeps it (whole microseconds)
        _state["depth"] += 1
    try:
        yield
    finally:
        with _lock:
            _state["depth"] -= 1
            # a different interval now is one the program set meanwhile: not ours to undo
            if _state["depth"] == 0 and sys.getswitchinterval() == _state["short"]:
                sys.setswitchinterval(_state["interval"])
