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
import sys

from .nested_setting import NestedSetting

GIL_TURN = 0.0002      # seconds


def _shorten():
    interval = sys.getswitchinterval()
    sys.setswitchinterval(min(GIL_TURN, interval))        # (never a longer interval)
    return interval, sys.getswitchinterval()               # (as CPython keeps it: whole microseconds)


def _restore(saved):
    interval, short_one = saved
    if sys.getswitchinterval() == short_one:   # else the program set one meanwhile: not ours to undo
        sys.setswitchinterval(interval)


# sys.setswitchinterval(GIL_TURN) inside ``with short():``.
short = NestedSetting(_shorten, _restore)
