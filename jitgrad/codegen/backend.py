"""LLVM side: host target machine, optimisation, object code.

A compiled kernel's artefact is (object code bytes, JSON-able meta), so the
disk cache can store it and a later process can load it (jitgrad.cache.native)
without LLVM's optimiser or code generator.
"""
import threading
import time

import llvmlite.binding as llvm

_lock = threading.Lock()
_tm = [None]


def target_machine():
    """The host TargetMachine, from LLVM's own view of the host (which the disk cache's
    fingerprint must agree with: `confirm_host_facts`)."""
    if _tm[0] is None:
        with _lock:
            if _tm[0] is None:
                from ..cache.disk import ask_llvm, confirm_host_facts
                from ..cache.native import host_target_machine
                confirm_host_facts(ask_llvm())
                _tm[0] = host_target_machine(opt=3)
    return _tm[0]


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
