"""Load object code (from `TargetMachine.emit_object`) into the process, without LLVM's
optimiser or code generator.

    payload = host_target_machine().emit_object(llvm_module)      # compile side
    engine, addr = load_object(payload, "entry")                  # load side (any process)
    fn = ctypes.CFUNCTYPE(...)(addr)                              # keep `engine` alive!

MCJIT's RuntimeDyld relocates the object and resolves external symbols (libm `expf`,
libc `memcpy` emitted for `llvm.memcpy`, ...) against the running process at
`finalize_object()`.
"""
import threading

_INIT = False
_LOCK = threading.Lock()


def _llvm():
    global _INIT
    import llvmlite.binding as llvm
    if not _INIT:
        with _LOCK:
            if not _INIT:
                llvm.initialize_native_target()
                llvm.initialize_native_asmprinter()
                _INIT = True
    return llvm


_HOST = None


def _host():
    """(target, cpu name, features) of this host, looked up once per process."""
    global _HOST
    if _HOST is None:
        llvm = _llvm()
        try:
            features = llvm.get_host_cpu_features().flatten()
        except Exception:
            features = ""
        _HOST = (llvm.Target.from_triple(llvm.get_process_triple()), llvm.get_host_cpu_name(), features)
    return _HOST


def host_target_machine(opt=3, **kwargs):
    """A TargetMachine for this host (the one `make_key`'s fingerprint describes).
    A fresh one per call: `create_mcjit_compiler` takes ownership of the one it gets
    (and frees it with the engine), so a TargetMachine must never be shared."""
    target, cpu, features = _host()
    return target.create_target_machine(cpu=cpu, features=features, opt=opt, **kwargs)


def load_object(payload, symbol="entry"):
    """-> (engine, address of `symbol`).  The machine code lives as long as `engine` does.
    Raises KeyError if the object does not define `symbol`, RuntimeError if LLVM refuses it."""
    llvm = _llvm()
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), host_target_machine(opt=0))
    engine.add_object_file(llvm.ObjectFileRef.from_data(bytes(payload)))
    engine.finalize_object()
    address = engine.get_function_address(symbol)
    if not address:
        raise KeyError(f"symbol {symbol!r} not found in the cached object")
    return engine, address
