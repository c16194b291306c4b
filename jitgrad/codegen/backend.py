"""LLVM side: host target machine, optimisation, object code, loading.

A compiled kernel's artefact is (object code bytes, JSON-able meta), so the
disk cache can store it and a later process can load it with
``engine.add_object_file`` without running LLVM's optimiser again.
"""
import ctypes
import threading
import time

import llvmlite
import llvmlite.binding as llvm

_lock = threading.Lock()
_tm = [None]


def target_machine():
    if _tm[0] is None:
        with _lock:
            if _tm[0] is None:
                llvm.initialize_native_target()
                llvm.initialize_native_asmprinter()
                target = llvm.Target.from_default_triple()
                _tm[0] = target.create_target_machine(cpu=llvm.get_host_cpu_name(),
                                                      features=llvm.get_host_cpu_features().flatten(), opt=3)
    return _tm[0]


_fp = [None]


def fingerprint():
    """Everything about the toolchain and host that changes machine code."""
    if _fp[0] is None:
        # No TargetMachine needed: a warm start (kernel from disk) never creates one.
        from .. import __version__
        from ..cache.native import _host
        _target, cpu, features = _host()
        _fp[0] = repr(("jitgrad", __version__, "llvmlite", llvmlite.__version__, "llvm", llvm.llvm_version_info,
                       llvm.get_default_triple(), cpu, features))
    return _fp[0]


def optimise_to_object(ir_text):
    """Parses, verifies, optimises (O3, host CPU) and emits object code.
    Returns (object bytes, optimised IR text, {phase: seconds})."""
    tm = target_machine()
    t0 = time.perf_counter()
    mod = llvm.parse_assembly(ir_text)
    mod.verify()
    t1 = time.perf_counter()
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)
    t2 = time.perf_counter()
    obj = tm.emit_object(mod)
    t3 = time.perf_counter()
    return obj, str(mod), {"parse+verify": t1 - t0, "optimise": t2 - t1, "codegen": t3 - t2}


def assembly(opt_ir_text):
    return target_machine().emit_assembly(llvm.parse_assembly(opt_ir_text))


_EMPTY = None


class Loaded:
    """An object file loaded into its own MCJIT engine; ``address`` of the entry."""

    def __init__(self, obj, symbol):
        # create_mcjit_compiler takes ownership of the TargetMachine it is given,
        # so each engine gets a fresh one (jitgrad.cache.native.load_object).
        from ..cache.native import load_object
        with _lock:
            self.engine, self.address = load_object(obj, symbol)
        self.cfunc = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(self.address)
