"""LLVM's optimiser and code generator in a child process that is replaced now and then.

Why: every run of llvmlite's new-pass-manager pipeline keeps native memory that nothing
frees (about 40 KB for a function with one loop, ~300 KB per jitgrad kernel; measured
with every pass builder, PTO, module and context closed: bench/bench_rss.py). A process
that compiles thousands of distinct graphs grew by hundreds of MB.

A process's first IN_PROCESS compiles run in the process itself: starting the child costs
about 0.3 s, which a program with a handful of kernels should not pay on its first result.
From then on the parent keeps doing what does not leak (lowering to IR text, loading
objects); the child (started in the background halfway there) optimises and emits object
code, and is replaced once it has grown past RECYCLE_BYTES, which returns its memory to
the system. So a process keeps at most IN_PROCESS kernels' worth of LLVM's leak.

Protocol: pickled (ir_text, target key) -> ("ok", object bytes, optimised IR, timings)
or ("error", exception type name, message), each framed by an 8-byte length. The child
runs the same backend.optimise_to_object as the parent would: the same bytes come back.

JITGRAD_COMPILE_PROCESS=0 always compiles in this process, =1 always in the child.
"""
import os
import pickle
import struct
import subprocess
import sys
import threading

from .target import from_key

RECYCLE_BYTES = 512 << 20     # the child's RSS past which it is replaced
IN_PROCESS = 32               # compiles a process does itself before it hands them to the child
_HEADER = struct.Struct("<Q")
_lock = threading.Lock()
_server = {}   # pid -> _Child (a forked process starts its own)


_compiles = {}   # pid -> compiles this process has asked for
_unavailable = []   # set when a child could not be started: compile in this process from then on


def use_child():
    """Whether this compile goes to the child (counting it); starts the child early."""
    mode = os.environ.get("JITGRAD_COMPILE_PROCESS", "auto")
    if mode == "0" or _unavailable:
        return False
    pid = os.getpid()
    n = _compiles.get(pid, 0) + 1
    if n > IN_PROCESS + 1:
        return True     # no count kept past the switch: a fresh int per compile outlived clear_cache
    _compiles[pid] = n
    if mode == "1" or n > IN_PROCESS:
        return True
    if n > IN_PROCESS // 2:
        start()
    return False


def _write(stream, obj):
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)))
    stream.write(data)
    stream.flush()


def _read(stream):
    head = stream.read(_HEADER.size)
    if len(head) < _HEADER.size:
        return None
    (n,) = _HEADER.unpack(head)
    data = stream.read(n)
    if len(data) < n:
        return None
    return pickle.loads(data)


class CompileServerError(RuntimeError):
    """The compile process died or answered nonsense."""


class _Child:
    def __init__(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith("JITGRAD_TARGET_")}
        env["JITGRAD_COMPILE_PROCESS"] = "0"
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self.proc = subprocess.Popen([sys.executable, "-m", "jitgrad.codegen.compile_server"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)

    def rss(self):
        # Binary mode: a text-mode open() looks up its decoder through a fresh attribute-name
        # string, which CPython's type-attribute cache keeps alive; one such string per compile
        # pinned otherwise-empty pymalloc arenas after clear_cache (~1 MB each).
        try:
            with open(f"/proc/{self.proc.pid}/statm", "rb") as f:
                return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            return 0

    def close(self):
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=5)
        except Exception:
            self.proc.kill()


def start():
    """Starts this process's compile child in the background (it imports jitgrad and
    llvmlite while this process goes on compiling)."""
    with _lock:
        try:
            _child()
        except OSError as e:      # no usable Python executable (embedded interpreters, ...)
            _unavailable.append(repr(e))


def _child():
    child = _server.get(os.getpid())
    if child is None or child.proc.poll() is not None:
        child = _server[os.getpid()] = _Child()
    return child


def stop():
    """Ends this process's compile child (clear_cache: it returns the memory LLVM kept in the
    child, and the parent's objects for it, made while the kernel cache was full, go too).
    The next compile starts a new one."""
    with _lock:
        child = _server.pop(os.getpid(), None)
        if child is not None:
            child.close()


def optimise_to_object(ir_text, target_key):
    """backend.optimise_to_object(ir_text, target) done by the child (or here, when no child
    can be started: no usable Python executable)."""
    with _lock:
        try:
            child = _child()
        except OSError as e:
            _unavailable.append(repr(e))
            from . import backend
            return backend.optimise_to_object(ir_text, from_key(target_key))
        try:
            _write(child.proc.stdin, (ir_text, target_key))
            reply = _read(child.proc.stdout)
        except (OSError, ValueError):
            reply = None
        if reply is None:
            _server.pop(os.getpid(), None)
            child.close()
            raise CompileServerError("the jitgrad compile process ended while compiling a kernel "
                                     "(JITGRAD_COMPILE_PROCESS=0 compiles in this process)")
        if child.rss() > RECYCLE_BYTES:
            _server.pop(os.getpid(), None)
            child.close()
    if reply[0] == "ok":
        return reply[1], reply[2], reply[3]
    raise CompileServerError(f"{reply[1]}: {reply[2]}")


def _serve():
    from . import backend
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr            # nothing else may write into the reply stream
    while True:
        request = _read(stdin)
        if request is None:
            return
        ir_text, key = request
        try:
            obj, opt_ir, timings = backend.optimise_to_object(ir_text, from_key(key))
            reply = ("ok", obj, opt_ir, timings)
        except Exception as e:        # reported to the parent, which raises it
            reply = ("error", type(e).__name__, str(e))
        _write(stdout, reply)


if __name__ == "__main__":
    _serve()
