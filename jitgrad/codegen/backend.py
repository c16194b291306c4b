"""LLVM side: target machine, optimisation, object code.

A compiled kernel's artefact is (object code bytes, JSON-able meta), so the
disk cache can store it and a later process can load it (jitgrad.cache.native)
without LLVM's optimiser or code generator.

Code is generated for `jitgrad.codegen.target.current()`: the host unless
JITGRAD_TARGET_CPU / a Session's jitgrad_target_cpu names another CPU.
"""
import threading
import time

import llvmlite.binding as llvm

from . import target as _target

_lock = threading.Lock()
_tms = {}     # Target.key() -> TargetMachine used for optimising and emitting (never given to MCJIT)


def target_machine(target=None):
    """The TargetMachine for `target` (default: the current one).  For the host it is
    built from LLVM's own view of the host, which the disk cache's fingerprint must
    agree with (`confirm_host_facts`)."""
    target = target or _target.current()
    tm = _tms.get(target.key())
    if tm is None:
        with _lock:
            tm = _tms.get(target.key())
            if tm is None:
                if target.is_host:
                    from ..cache.disk import ask_llvm, confirm_host_facts
                    confirm_host_facts(ask_llvm())
                tm = _tms[target.key()] = target.target_machine(opt=3)
    return tm


def run_o3(mod, tm):
    """LLVM's O3 pipeline (loop and SLP vectorisers on) over `mod`, in place; every
    pass-manager object is closed afterwards."""
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pb = llvm.create_pass_builder(tm, pto)
    mpm = pb.getModulePassManager()
    mpm.run(mod, pb)
    mpm.close()
    pb.close()
    pto.close()


def optimise_to_object(ir_text, target=None):
    """Parses, verifies, optimises (O3) and emits object code for `target` (default:
    the current one).  Returns (object bytes, optimised IR text, {phase: seconds})."""
    tm = target_machine(target)
    t0 = time.perf_counter()
    mod = llvm.parse_assembly(ir_text)
    try:
        mod.verify()
        t1 = time.perf_counter()
        run_o3(mod, tm)
        t2 = time.perf_counter()
        obj = tm.emit_object(mod)
        t3 = time.perf_counter()
        opt_ir = str(mod)
    finally:
        mod.close()
    return obj, opt_ir, {"parse+verify": t1 - t0, "optimise": t2 - t1, "codegen": t3 - t2}


def assembly(opt_ir_text, target=None):
    mod = llvm.parse_assembly(opt_ir_text)
    try:
        return target_machine(target).emit_assembly(mod)
    finally:
        mod.close()
