"""LLVM side: target machine, optimisation, object code.

A compiled kernel's artefact is (object code bytes, JSON-able meta), so the
disk cache can store it and a later process can load it (jitgrad.cache.native)
without LLVM's optimiser or code generator.

Code is generated for `jitgrad.codegen.target.current()`: the host unless
JITGRAD_TARGET_CPU / a Session's jitgrad_target_cpu names another CPU.
"""
import collections
import concurrent.futures
import ctypes
import os
import re
import threading
import time

import llvmlite.binding as llvm
from llvmlite.binding import ffi

from . import mxcsr, target as _target
from .. import gil_turns
from .irutil import drop_body
from ..cache import native
from ..cache.disk import ask_llvm, confirm_host_facts

# (LLVM's loop strength reduction was ~40% of the code generator's time on W3's units;
# -disable-lsr is a process-wide LLVM option (it would change the code of every other
# llvmlite user in the process, numba), so LSR stays on and the matmul loops address
# their memory from laundered bases instead (irutil.loop_base): LSR sees few addresses.)

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
    _run_and_close(pb.getModulePassManager(), mod, pb, pto, unlocked)


def _run_and_close(mpm, mod, pb, pto, unlocked):
    """Run ``mpm`` over ``mod`` (unlocked: see _run_unlocked), then close the pass objects."""
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


def _define_lines(ir_text):
    """The module text's `define` lines, found by str.find (a line-anchored regex took
    ~3 ms over a 90 KB main unit)."""
    start = 0 if ir_text.startswith("define ") else ir_text.find("\ndefine ") + 1
    while start > 0 or (start == 0 and ir_text.startswith("define ")):
        end = ir_text.find("\n", start)
        if end == -1:
            yield ir_text[start:]
            return
        yield ir_text[start:end]
        nxt = ir_text.find("\ndefine ", end)
        if nxt == -1:
            return
        start = nxt + 1


def split_units(ir_text):
    """(main IR text, [matmul unit IR texts]): every matmul function moved to a module
    of its own, in the order they are defined, and declared in the main one.  None when
    there is nothing to split (or a matmul function uses metadata, which stays with the
    main module)."""
    if not any((m := _DEFINE.match(ln)) and _SIDE_FN.search(m.group(1)) for ln in _define_lines(ir_text)):
        return None                       # the usual case: Units took them all while lowering
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


# What a large matmul unit gets instead of LLVM's O2: scalar replacement of the few
# allocas, instruction combining and CFG clean-up, nothing else.  A unit of fewer than
# SIDE_O2_BELOW characters of IR still gets O2: it costs little there, and the narrow
# kernels (W3's dW2 = H^T dY, N = 10) are ~8% faster with it (LLVM's LICM, which
# llvmlite cannot add to a pass list by itself).
SIDE_PASSES = ("sroa", "instruction_combine", "simplify_cfg")
SIDE_O2_BELOW = 38 << 10   # 64 KiB before splat constants were printed short (irutil.SplatConst):
                           # W3's units shrank to 0.5-0.65x, this kept each one's pipeline; 40 KiB
                           # until codegen-30's edge-tile store loop shrank W3's H @ W2 unit
                           # (N = 10) from 45.5 to 40.1 KB: O2 there cost ~33 ms more optimise
                           # CPU than its ~6 ms codegen saving.  (Not 36: a unit's text is ~1 KB
                           # shorter when split from the whole module than when taken while
                           # lowering, and test_compile_pipeline's 37.9 / 36.8 KB unit straddled it.)


def run_side_pipeline(mod, tm, unlocked=False, small=False):
    """What a matmul unit gets: O2 without LLVM's loop and SLP vectorisers and unroller if
    `small`, else SIDE_PASSES.  The functions are explicit vector IR whose micro-kernel k
    loop is unrolled by hand (matmul.py says in the IR what the unroller used to find
    out: narrow C, fixed kc).  On the W3 MLP's matmul units O2 spent 0.18 s CPU, these
    three passes 0.025 s, for the same GFLOP/s on the large kernels (bench_matmul.py)."""
    if small:
        _run_pipeline(mod, tm, 2, False, False, unlocked)
        return
    pto = llvm.create_pipeline_tuning_options(speed_level=2)
    pb = llvm.create_pass_builder(tm, pto)
    mpm = llvm.create_new_module_pass_manager()
    for name in SIDE_PASSES:
        getattr(mpm, f"add_{name}_pass")()
    _run_and_close(mpm, mod, pb, pto, unlocked)


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


def _optimise_unit(mod, tm, ir_text, side):
    """The pipeline a unit gets (in place): see run_side_pipeline and run_o3."""
    if side:
        run_side_pipeline(mod, tm, unlocked=True, small=len(ir_text) < SIDE_O2_BELOW)
    else:
        run_o3(mod, tm, unlocked=True)


def _compile_unit(ir_text, target, side):
    """One unit in its own context: -> (object bytes, {phase: CPU seconds of this thread}).
    The optimised IR is not printed: only explain wants it, and UnitIR.text() optimises
    the units again for it (printing every unit cost ~5% of a cold compile's CPU)."""
    tm = _thread_tm(target)
    ctx = llvm.create_context()
    try:
        t0 = time.thread_time()
        mod = llvm.parse_assembly(ir_text, context=ctx)
        try:
            mod.verify()
            t1 = time.thread_time()
            _optimise_unit(mod, tm, ir_text, side)
            t2 = time.thread_time()
            obj = _emit_unlocked(tm, mod)
            t3 = time.thread_time()
            return obj, {"parse+verify": t1 - t0, "optimise": t2 - t1, "codegen": t3 - t2}
        finally:
            mod.close()
    finally:
        ctx.close()


def _optimised_text(ir_text, target, side):
    """The optimised IR text of one unit: the same pipeline as _compile_unit, for explain."""
    ctx = llvm.create_context()
    try:
        mod = llvm.parse_assembly(ir_text, context=ctx)
        try:
            _optimise_unit(mod, _thread_tm(target), ir_text, side)
            return str(mod)
        finally:
            mod.close()
    finally:
        ctx.close()


def optimise_to_object(ir_text, target=None):
    """Parses, verifies, optimises and emits object code for `target` (default: the
    current one), unit by unit (see above).  Returns (payload: an object or a bundle,
    UnitIR: the optimised IR on demand, {phase: seconds}); the phases are CPU time summed
    over the units, "wall" is the elapsed time.  `linked_ir` makes one IR
    text of the units (for explain)."""
    return Units(target).finish(ir_text)


class Units:
    """One program's units, compiled while the program is still being lowered.

    compiler.py hands the KernelBuilder a Units as its ``unit_sink``: each matmul
    function, once its node is lowered, is taken (`collect`, `take`: its text becomes a
    unit and it stays in the module as a declaration) and a worker thread starts optimising it while Python
    lowers the rest (the compile threads run outside llvmlite's lock and release the
    GIL).  A matmul function may instead be declared while lowering and its body
    emitted only at `finish` (`defer`).  `finish(main text)` compiles the main unit --
    on a compile thread, while this one emits the deferred functions, if any -- helps
    with what is still queued and bundles the objects: main unit first, then the
    others in the order they were taken -- the same bytes for any number of threads.

    Why defer: the main unit is the largest (O3) and can only start once the whole
    module is lowered, so it decided when a cold compile ended (W3: ~170 ms CPU after
    ~110 ms of Python lowering, of which ~70 ms built and printed the matmul
    functions, while the other core had finished their units and idled).  Deferred,
    the main unit starts before the matmul functions are built -- with short GIL turns
    meanwhile (jitgrad/gil_turns.py), or the compile thread's LLVM calls would each wait
    up to 5 ms for the GIL while this thread runs Python."""

    def __init__(self, target=None):
        self.target = target or _target.current()
        target_machine(self.target)       # the host's: checks the disk cache's view of the host first
        self._lock = threading.Lock()
        self._pool = _workers()
        self._helpers = []
        self._running = 0                 # helpers that have not returned
        self.flush_denormals = False      # units get mxcsr.ATTRS (the KernelBuilder's mode)
        self.reset()

    def reset(self):
        """Forgets every unit taken so far (the KernelBuilder starts its module again);
        a unit being compiled meanwhile is compiled for nothing."""
        with self._lock:
            self._units = [None]          # index 0: the main unit, known at finish
            self._results = [None]
            self._todo = collections.deque()
            self._taken = []              # (declaration text, definition text) per taken function
            self._seen = 0                # functions of the module `collect` has looked at
            self._deferred = []           # (module, functions, define) for finish (`defer`)
            self._later = []              # `alongside` functions waiting for finish to queue the main unit
            self._generation = getattr(self, "_generation", 0) + 1

    def collect(self, module):
        """Takes every matmul function (_SIDE_FN) `module` has defined since the last call:
        the KernelBuilder calls it after each node it lowered, so they are complete."""
        fns = module.functions
        new = [fn for fn in fns[self._seen:] if fn.blocks and _SIDE_FN.search(fn.name)]
        self._seen = len(fns)
        # A parallel GEMM's B-packing function goes into its compute function's unit:
        # a unit of its own cost ~15 ms CPU (O2 and code generation's fixed costs) for
        # a copy loop of a few dozen instructions.
        names = {fn.name for fn in new}
        for fn in new:
            if fn.name.endswith("_pack") and fn.name[:-5] in names:
                continue
            group = [fn]
            if fn.name + "_pack" in names:
                group.insert(0, next(f for f in new if f.name == fn.name + "_pack"))
            self.take(module, group)

    def defer(self, module, fns, define):
        """`fns`: functions declared in `module` (the main unit calls them); `define()`
        emits their bodies (no metadata: see take), which finish does once the main text
        is made, and takes them as one unit then (a pack function first, as `collect`)."""
        with self._lock:
            self._deferred.append((module, list(fns), define))

    def take(self, module, fns):
        """Makes the finished functions `fns` of `module` (one, or a list) a unit of their
        own (compiled from now on) and leaves declarations of them in `module`.  Functions
        that use metadata stay (module metadata is not copied into a unit): -> False."""
        fns = fns if isinstance(fns, list) else [fns]
        texts = [str(fn) for fn in fns]
        if any("!" in text[text.index("\n"):] for text in texts):
            return False
        decls = "".join(str(f) for f in module.functions if f.is_declaration)
        header = f'target triple = "{module.triple}"\ntarget datalayout = "{module.data_layout}"\n'
        if self.flush_denormals:          # the mode's attributes on their define lines (the only ones)
            texts = [mxcsr.mark_text(text) for text in texts]
        for fn, text in zip(fns, texts):
            drop_body(fn)                 # printed: it stays as a declaration
            # (explain's full_text shows what was compiled: the mode's attributes too)
            self._taken.append((str(fn), text))
        self._add(header + decls + "".join(texts), True)
        return True

    def full_text(self, main_text):
        """The module's text with the taken functions defined again (explain's unoptimised IR)."""
        for decl, text in self._taken:
            main_text = main_text.replace(decl, text, 1)
        return main_text

    def _add(self, text, side):
        with self._lock:
            self._units.append((text, side))
            self._results.append(None)
            self._todo.append(len(self._units) - 1)
            if self._pool is not None and self._running < self._pool._max_workers:
                self._running += 1
                self._helpers.append(self._pool.submit(self._drain, True))

    def _drain(self, helper=False):
        while True:
            with self._lock:
                if not self._todo:
                    if helper:
                        self._running -= 1
                    return
                k = self._todo.popleft()
                text, side = self._units[k]
                generation = self._generation
            try:
                result = _compile_unit(text, self.target, side)
            except BaseException:
                if helper:
                    with self._lock:
                        self._running -= 1
                raise
            with self._lock:
                if generation == self._generation:
                    self._results[k] = result

    def alongside(self, fn):
        """Runs `fn()` on a compile thread, after the units queued so far, not waited for
        (compiler.py: the native thread pool's code for a parallel kernel's first call).
        With functions deferred, after the main unit (finish queues it then)."""
        if self._pool is not None:
            if self._deferred:
                self._later.append(fn)
            else:
                self._pool.submit(fn)

    def cancel(self):
        """The program will not be finished (lowering failed): drops what is queued."""
        with self._lock:
            self._todo.clear()
            self._deferred = []
        for fut in self._helpers:
            fut.cancel()

    def finish(self, ir_text):
        """Compiles the main unit (`ir_text`, split further by split_units if it still
        defines matmul functions) -> (payload, UnitIR, {phase: seconds}) as
        optimise_to_object; "wall" is the time from here on."""
        t0 = time.perf_counter()
        split = split_units(ir_text)
        if split is not None:
            ir_text = split[0]
            for text in split[1]:
                self._add(text, True)
        with self._lock:
            self._units[0] = (ir_text, False)
            self._todo.appendleft(0)      # the largest: first
            deferred, self._deferred = self._deferred, []
            if deferred and self._pool is not None and self._running < self._pool._max_workers:
                self._running += 1        # a compile thread takes the main unit now
                self._helpers.append(self._pool.submit(self._drain, True))
        for fn in self._later:
            self._pool.submit(fn)
        self._later = []
        try:
            with gil_turns.short():       # the compile thread's LLVM calls get the GIL back at once
                for module, fns, define in deferred:
                    define()
                    if not self.take(module, fns):
                        raise RuntimeError(f"deferred functions {[f.name for f in fns]} use metadata")
            self._drain()
        finally:
            for fut in self._helpers:
                if not fut.cancel():      # one not started yet (the pool busy elsewhere) is not waited for
                    fut.result()
        results = self._results
        timings = {phase: sum(r[1][phase] for r in results) for phase in results[0][1]}
        timings["units"] = len(results)
        timings["wall"] = time.perf_counter() - t0
        return native.pack([r[0] for r in results]), UnitIR(self._units, self.target), timings


class UnitIR:
    """The optimised IR of a program's units, made on demand: holds the units as compiled
    ((IR text, side) each) and their target; item i optimises unit i again, the same way,
    and `text()` links them all into one module's text.  explain asks for it; a compile
    does not pay for printing what it optimised."""

    def __init__(self, units, target):
        self.units, self.target_key = tuple(units), target.key()
        self._texts = {}

    def __len__(self):
        return len(self.units)

    def __getitem__(self, i):
        if i not in self._texts:
            text, side = self.units[i]
            self._texts[i] = _optimised_text(text, _target.from_key(self.target_key), side)
        return self._texts[i]

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def text(self):
        return linked_ir(list(self))


def linked_ir(unit_irs):
    """The optimised IR texts of a program's units (or a UnitIR) as one module's text."""
    if isinstance(unit_irs, str):
        return unit_irs
    unit_irs = list(unit_irs)
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
