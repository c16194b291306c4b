"""Native code built once per process, on first use: ``Once(build, what).get()`` is
``build()``'s result, or None where it cannot work (not x86-64 CPython, or building failed:
logged at debug level as ``"<what> (<error>)"``), so the caller takes its numpy path. Kept
apart from the builders (native_builtins.py, ops/libm_loops.py, ops/philox_native.py) so a
module can hold one without importing the compiler at ``import jitgrad``."""
import logging
import platform
import sys
import threading

log = logging.getLogger("jitgrad")


class Once:
    """``build()``'s result, built on the first ``get()`` and kept for the process."""

    def __init__(self, build, what):
        self._build, self._what = build, what
        self._lock = threading.Lock()
        self._built = []     # [result or None] once built

    def get(self):
        if not self._built:
            with self._lock:
                if not self._built:
                    fns = None
                    if platform.machine() in ("x86_64", "AMD64") and sys.implementation.name == "cpython":
                        try:
                            fns = self._build()
                        except Exception as e:     # (no LLVM target, an odd loader, another numpy layout)
                            log.debug("%s (%s)", self._what, e)
                    self._built.append(fns)
        return self._built[0]
