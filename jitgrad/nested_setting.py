"""A process-wide setting changed while any thread is inside a block (gc_pause.py,
gil_turns.py): blocks nest and overlap across threads, the first one in changes the
setting and the last one out puts it back."""
import contextlib
import threading


class NestedSetting:
    """``begin()`` changes the setting and returns what ``end(saved)`` needs to restore it."""

    def __init__(self, begin, end):
        self._begin, self._end = begin, end
        self._lock = threading.Lock()
        self._depth = 0
        self._saved = None

    @contextlib.contextmanager
    def __call__(self):
        with self._lock:
            if self._depth == 0:
                self._saved = self._begin()
            self._depth += 1
        try:
            yield
        finally:
            with self._lock:
                self._depth -= 1
                if self._depth == 0:
                    self._end(self._saved)
