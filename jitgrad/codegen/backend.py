"""LLVM side: target machine, optimisation, object code.

A compiled kernel's artefact is (object code bytes, JSON-able meta), so the
disk cache can store it and a later process can load it (jitgrad.cache.native)
without LLVM's optimiser or code generator.

Code is generated for `jitgrad.codegen.target.current()`: the host unless
JITGRAD_TARGET_CPU / a Session's jitgrad_target_cpu names another CPU.
"""
import concurrent.futures
import ctypes
import os
import re
import threading
import time

import llvmlite.binding as llvm
from llvmlite.binding import ffi

from . import target as _target
from ..cache import native
from ..cache.disk import ask_llvm, confirm_host_facts

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
                                    confirm_host_facts(ask_llvm())
                tm = _tms[target.key()] = target.target_machine(opt=3)
    return tm


def _run_unlocked(mpm, mod, pb):
    """The pass-manager run without llvmlite's global LLVM lock (which serialises
    every LLVM call of the process), for a worker thread whose module, context,
    pass builder and TargetMachine are its own: LLVM itself allows concurrent
    compilation in separate contexts.  Falls back to the locked call."""
    fn = getattr(ffi.lib.LLVMPY_RunNewModulePassManager, "_cfn", None)
    if fn is None:
        mpm.run(mod, pb)
    else:
        fn(mpm, mod, pb)


def _run_pipeline(mod, tm, level, vectorise, unroll, unlocked):
    """LLVM's O<level> pipeline over `mod`, in place; every pass-manager object is
    closed afterwards.  `unlocked`: see _run_unlocked."""
    pto = llvm.create_pipeline_tuning_options(speed_level=level)
    pto.loop_vectorization = vectorise
    pto.slp_vectorization = vectorise
    pto.loop_unrolling = unroll
    pb = llvm.create_pass_builder(tm, pto)
    mpm = pb.getModulePassManager()
    if unlocked:
        _run_unlocked(mpm, mod, pb)
    else:
        mpm.run(mod, pb)
    mpm.close()
    pb.close()
    pto.close()


def run_o3(mod, tm, unlocked=False):
    """LLVM's O3 pipeline (loop and SLP vectorisers on): what a kernel's main unit gets."""
    _run_pipeline(mod, tm, 3, True, True, unlocked)


# ------------------------------------------------------------ units, compiled in parallel
# A kernel's matmul functions (``<kernel>_mm<k>``, ``..._pack``: self-contained, they
# call only intrinsics) are most of its IR.  Each is split off into a unit of its own
# (an LLVM module, declared in the main one); the rest is the main unit.  Every unit
# is parsed, optimised and emitted to an object on its own: in its own LLVMContext,
# with a TargetMachine of the thread's own, outside llvmlite's global lock (ctypes
# releases the GIL), so the units of one kernel compile on as many threads as
# JITGRAD_COMPILE_THREADS allows, code generation included.  The objects go into one
# payload, a bundle (jitgrad/cache/native.py) whose loader resolves the calls from
# the main unit into the matmul units.  A unit's object is a function of its IR and
# the target only, and the bundle keeps the units' order, so the bytes are the same
# for any number of threads.
_SIDE_FN = re.compile(r"_mm\d+(_pack)?$")
_DEFINE = re.compile(r'^define [^@]*@"?([^"(]+)"?\(')
_pools = {}   # (pid, worker count) -> ThreadPoolExecutor
_thread_tms = threading.local()


def _workers():
    """The worker pool (None: compile on this thread only).  JITGRAD_COMPILE_THREADS
    caps the threads used per compile (default: the cores, at most 4)."""
    try:
        n = int(os.environ.get("JITGRAD_COMPILE_THREADS", "") or min(4, os.cpu_count() or 1)) - 1
    except ValueError:
        n = min(4, os.cpu_count() or 1) - 1
    if n < 1:
        return None
    key = (os.getpid(), n)            # a forked child has none of its parent's threads
    pool = _pools.get(key)
    if pool is None:
        with _lock:
            pool = _pools.get(key)
            if pool is None:
                pool = _pools[key] = concurrent.futures.ThreadPoolExecutor(n, thread_name_prefix="jitgrad-llvm")
    return pool


def split_units(ir_text):
    """(main IR text, [matmul unit IR texts]): every matmul function moved to a module
    of its own, in the order they are defined, and declared in the main one.  None when
    there is nothing to split (or a matmul function uses metadata, which stays with the
    main module)."""
    lines = ir_text.split("\n")
    header = [ln for ln in lines if ln.startswith(("target triple", "target datalayout"))]
    decls = [ln for ln in lines if ln.startswith("declare ")]
    main, funcs, i = [], [], 0
    while i < len(lines):
        m = _DEFINE.match(lines[i])
        if m and _SIDE_FN.search(m.group(1)):
            j = lines.index("}", i)
            funcs.append(lines[i:j + 1])
            main.append(re.sub(r"\s*\{$", "", "declare" + lines[i][len("define"):]))
            i = j + 1
            continue
        main.append(lines[i])
        i += 1
    if not funcs or any("!" in ln for f in funcs for ln in f if not ln.startswith("define")):
        return None
    return "\n".join(main), ["\n".join(header + decls + f) for f in funcs]


# What a matmul unit gets instead of LLVM's O2: scalar replacement of the few allocas,
# instruction combining and CFG clean-up, nothing else.
SIDE_PASSES = ("sroa", "instruction_combine", "simplify_cfg")


def run_side_pipeline(mod, tm, unlocked=False):
    """What a matmul unit gets: SIDE_PASSES, not a full O-level pipeline.  The functions
    are explicit vector IR whose micro-kernel k loop is unrolled by hand (matmul.py says
    in the IR what the unroller used to find out: narrow C, fixed kc); O2 (vectorisers
    and unroller off) spent 0.18 s CPU on the W3 MLP's five matmul units for code of the
    same speed, these three passes 0.025 s (the hoisting and value numbering O2 adds
    are what instruction selection and the register allocator do again anyway)."""
    pto = llvm.create_pipeline_tuning_options(speed_level=2)
    pb = llvm.create_pass_builder(tm, pto)
    mpm = llvm.create_new_module_pass_manager()
    for name in SIDE_PASSES:
        getattr(mpm, f"add_{name}_pass")()
    if unlocked:
        _run_unlocked(mpm, mod, pb)
    else:
        mpm.run(mod, pb)
    mpm.close()
    pb.close()
    pto.close()


def _emit_unlocked(tm, mod):
    """tm.emit_object(mod) without llvmlite's global lock (see _run_unlocked): the
    module's context and `tm` belong to this thread."""
    fn = getattr(ffi.lib.LLVMPY_TargetMachineEmitToMemory, "_cfn", None)
    if fn is None:
        return tm.emit_object(mod)
    with ffi.OutputString() as outerr:
        mb = fn(tm, mod, 1, outerr)
        if not mb:
            raise RuntimeError(str(outerr))
    try:
        return ctypes.string_at(ffi.lib.LLVMPY_GetBufferStart(mb), ffi.lib.LLVMPY_GetBufferSize(mb))
    finally:
        ffi.lib.LLVMPY_DisposeMemoryBuffer(mb)


def _thread_tm(target):
    """This thread's TargetMachine for `target` (a TargetMachine is not shared between
    threads that compile at once)."""
    tms = getattr(_thread_tms, "tms", None)
    if tms is None:
        tms = _thread_tms.tms = {}
    tm = tms.get(target.key())
    if tm is None:
        tm = tms[target.key()] = target.target_machine(opt=3)
    return tm


def _compile_unit(ir_text, target, side):
    """One unit in its own context: -> (object bytes, optimised IR text, {phase: CPU seconds
    of this thread})."""
    tm = _thread_tm(target)
    ctx = llvm.create_context()
    try:
        t0 = time.thread_time()
        mod = llvm.parse_assembly(ir_text, context=ctx)
        try:
            mod.verify()
            t1 = time.thread_time()
            if side:
                run_side_pipeline(mod, tm, unlocked=True)
            else:
                run_o3(mod, tm, unlocked=True)
            t2 = time.thread_time()
            obj = _emit_unlocked(tm, mod)
            t3 = time.thread_time()
            return obj, str(mod), {"parse+verify": t1 - t0, "optimise": t2 - t1, "codegen": t3 - t2}
        finally:
            mod.close()
    finally:
        ctx.close()


def optimise_to_object(ir_text, target=None):
    """Parses, verifies, optimises and emits object code for `target` (default: the
    current one), unit by unit (see above).  Returns (payload: an object or a bundle,
    (optimised IR text of each unit), {phase: seconds}); the phases are CPU time summed
    over the units, "wall" is the elapsed time.  `linked_ir` makes one IR
    text of the units (for explain)."""
    target = target or _target.current()
    target_machine(target)            # the host's: checks the disk cache's view of the host first
    t0 = time.perf_counter()
    split = split_units(ir_text)
    units = [(ir_text, False)] if split is None else [(split[0], False)] + [(u, True) for u in split[1]]
    results = [None] * len(units)
    todo = iter(sorted(range(len(units)), key=lambda k: -len(units[k][0])))   # largest first
    take = threading.Lock()

    def drain():
        while True:
            with take:
                k = next(todo, None)
            if k is None:
                return
            results[k] = _compile_unit(units[k][0], target, units[k][1])

    pool = _workers() if len(units) > 1 else None
    helpers = [pool.submit(drain) for _ in range(min(pool._max_workers, len(units) - 1))] if pool else []
    try:
        drain()
    finally:
        for fut in helpers:
            fut.result()
    timings = {phase: sum(r[2][phase] for r in results) for phase in results[0][2]}
    timings["units"] = len(units)
    timings["wall"] = time.perf_counter() - t0
    return native.pack([r[0] for r in results]), UnitIR(r[1] for r in results), timings


class UnitIR(tuple):
    """The optimised IR texts of a program's units; `text()` links them into one module's
    text (explain asks for it; a compile does not pay for it)."""

    def text(self):
        return linked_ir(self)


def linked_ir(unit_irs):
    """The optimised IR texts of a program's units as one module's text."""
    if isinstance(unit_irs, str):
        return unit_irs
    if len(unit_irs) == 1:
        return unit_irs[0]
    ctx = llvm.create_context()
    try:
        mod = llvm.parse_assembly(unit_irs[0], context=ctx)
        try:
            for text in unit_irs[1:]:
                mod.link_in(llvm.parse_assembly(text, context=ctx))    # takes the unit over
            return str(mod)
        finally:
            mod.close()
    finally:
        ctx.close()


def assembly(opt_ir_text, target=None):
    mod = llvm.parse_assembly(linked_ir(opt_ir_text))
    try:
        return target_machine(target).emit_assembly(mod)
    finally:
        mod.close()
