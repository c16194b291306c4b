"""LLVM side: target machine, optimisation, object code.

A compiled kernel's artefact is (object code bytes, JSON-able meta), so the
disk cache can store it and a later process can load it (jitgrad.cache.native)
without LLVM's optimiser or code generator.

Code is generated for `jitgrad.codegen.target.current()`: the host unless
JITGRAD_TARGET_CPU / a Session's jitgrad_target_cpu names another CPU.
"""
import concurrent.futures
import os
import re
import threading
import time

import llvmlite.binding as llvm
from llvmlite.binding import ffi

from . import target as _target
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


def run_o3(mod, tm, unlocked=False, unroll=True):
    """LLVM's O3 pipeline (loop and SLP vectorisers on) over `mod`, in place; every
    pass-manager object is closed afterwards.  `unlocked`: see _run_unlocked.
    `unroll=False` leaves out LLVM's loop unroller (see _optimise_side)."""
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
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


# ------------------------------------------------------------ parallel optimisation
# A kernel's matmul functions (``<kernel>_mm<k>``, ``..._pack``: self-contained, they
# call only intrinsics) are most of its IR.  They are always split off into side
# modules, optimised with the side pipeline (_optimise_side), and linked back (as
# bitcode) before one object is emitted.  The side modules go to worker threads (own
# LLVMContext and TargetMachine; llvmlite's ctypes calls release the GIL, and the
# workers run the pass pipeline outside llvmlite's global lock, `_run_unlocked`) while
# this thread optimises the rest and then one side module of its own.  How many
# threads there are changes only the wall time and the order of the functions in the
# object (the link order): every function gets the same pipeline, so the same code,
# for any JITGRAD_COMPILE_THREADS.
_SIDE_FN = re.compile(r"_mm\d+(_pack)?$")
_DEFINE = re.compile(r'^define [^@]*@"?([^"(]+)"?\(')
_pools = {}   # (pid, worker count) -> ThreadPoolExecutor
_worker_tms = threading.local()


def _workers():
    """The worker pool (None: optimise on this thread only).  JITGRAD_COMPILE_THREADS
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


def split_side_functions(ir_text, n_bins):
    """(main IR text, [side module IR texts]): every matmul function moved to one of
    up to `n_bins` side modules (declared in the main one), balanced by size; the first
    side module is the one this thread optimises after the main module, so the main
    module's own code counts as its load.  None when there is nothing to split."""
    lines = ir_text.split("\n")
    header = [ln for ln in lines if ln.startswith(("target triple", "target datalayout"))]
    decls = [ln for ln in lines if ln.startswith("declare ")]
    main, funcs, i = [], [], 0
    while i < len(lines):
        m = _DEFINE.match(lines[i])
        if m and _SIDE_FN.search(m.group(1)):
            j = lines.index("}", i)
            funcs.append(lines[i:j + 1])
            main.append(len(funcs) - 1)       # placeholder: the function's slot
            i = j + 1
            continue
        main.append(lines[i])
        i += 1
    if not funcs or any("!" in ln for f in funcs for ln in f if not ln.startswith("define")):
        return None
    loads = [sum(1 for ln in main if isinstance(ln, str))] + [0] * (n_bins - 1)
    where = {}
    for k in sorted(range(len(funcs)), key=lambda k: -len(funcs[k])):   # greedy by size
        b = min(range(n_bins), key=loads.__getitem__)
        where[k] = b
        loads[b] += len(funcs[k])
    out_main = []
    for ln in main:
        if isinstance(ln, int):
            out_main.append(re.sub(r"\s*\{$", "", "declare" + funcs[ln][0][len("define"):]))
        else:
            out_main.append(ln)
    sides = ["\n".join(header + decls + [ln for k in sorted(where) if where[k] == b for ln in funcs[k]])
             for b in range(n_bins) if b in where.values()]
    return "\n".join(out_main), sides


def run_side_pipeline(mod, tm, unlocked=False):
    """What a matmul function gets: O3 without LLVM's loop unroller.  The functions are
    explicit vector IR whose micro-kernel k loop is unrolled by hand; the unroller only
    multiplied the rest (it fully unrolled the pack loops).  Measured on the W3 MLP
    kernel (thread CPU time): the matmul functions' optimise + codegen fell from 0.64 s
    to 0.44 s and their code from 35 to 23 KB; bench/bench_matmul.py's GFLOP/s held
    (matmul.py says in the IR what the unroller used to find out: narrow C, fixed kc)."""
    run_o3(mod, tm, unlocked, unroll=False)


def _optimise_side(ir_text, target):
    """A side module in its own context and TargetMachine (per thread); returns bitcode."""
    tms = getattr(_worker_tms, "tms", None)
    if tms is None:
        tms = _worker_tms.tms = {}
    tm = tms.get(target.key())
    if tm is None:
        tm = tms[target.key()] = target.target_machine(opt=3)
    ctx = llvm.create_context()
    try:
        mod = llvm.parse_assembly(ir_text, context=ctx)
        try:
            mod.verify()
            run_side_pipeline(mod, tm, unlocked=True)
            return mod.as_bitcode()
        finally:
            mod.close()
    finally:
        ctx.close()


def optimise_to_object(ir_text, target=None):
    """Parses, verifies, optimises (O3) and emits object code for `target` (default:
    the current one).  Returns (object bytes, optimised IR text, {phase: seconds})."""
    target = target or _target.current()
    tm = target_machine(target)
    t0 = time.perf_counter()
    pool = _workers()
    split = split_side_functions(ir_text, 1 + (pool._max_workers if pool is not None else 0))
    sides, futures = [], []
    if split is not None:
        ir_text, sides = split
        futures = [pool.submit(_optimise_side, side, target) for side in sides[1:]]
    mod = llvm.parse_assembly(ir_text)
    try:
        mod.verify()
        t1 = time.perf_counter()
        run_o3(mod, tm)
        optimised = [_optimise_side(sides[0], target)] if sides else []
        for bitcode in optimised + [fut.result() for fut in futures]:
            mod.link_in(llvm.parse_bitcode(bitcode))         # takes the side module over
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
