"""The compiled executor: Session.run -> (cached plan) -> one native call.

Two caches:
  * per Session, a *plan* cache keyed by (graph length, fetch ids, feed ids,
    feed shapes/dtypes): the pruned Program, its kernel, the argument layout
    and a preallocated pointer block.  Graphs are append-only, so a plan stays
    valid until the graph grows (its length is in the key) or a variable's
    shape/dtype changes (checked on every call).  LRU, PLAN_LIMIT per Session.
  * global, a *kernel* cache keyed by sha256(canonical program signature
    *before* the passes, toolchain + host fingerprint): the passes are pure
    functions of everything that signature covers (structure, attrs incl.
    private ones such as AddN's _aggregation, shapes, dtypes, constants' value
    classes; never names), so a memory or disk hit needs no pass pipeline, no
    lowering tables and no code generator.  On a miss the passes run and the
    kernel is also filed under its post-pass key, so programs that only
    become equal after the passes still share one kernel in a process.  LRU of KERNEL_LIMIT kernels; a placeholder
    with unknown dims compiles once per concrete shape and old shapes age out.
    Constants are runtime arguments, so graphs that differ only in constant
    values share a kernel (the seeds' 40-step gradient descent compiles once).

A program with an op that has no lowering (or any failure inside the code
generator) runs in the reference interpreter instead; cache_info().fallbacks
counts such runs.

Beside this module: jitgrad/fast_runner.py (the generated per-plan function
Session.run calls once a plan has been hit) and jitgrad/kernel_explain.py
(Session.explain, jitgrad.explain_recompile).
"""
import collections
import ctypes
import gc
import os
import threading
import time

import numpy as np

from . import buffers as _buffers, denormals, dynamic_outputs as _dynamic_outputs, gc_pause, interpreter
from .dtypes import NATIVE as NATIVE_DTYPES
from .errors import InternalError, InvalidArgumentError
# (register ListCheck, SetRow, ZeroRows: a cached program may hold them)
from .ops import list_ops, row_store, zero_rows  # noqa: F401
from .ops.logging_ops import failed_assert_message, flush_region_prints
from .ops.random_ops import region_draws, region_sites
from .ops.registry import REGISTRY
from .passes import ir as pir
from .passes.prune import prune
from .cache import key as cache_key
from .cache import default_cache
from .cache.native import load as load_native
from .codegen import compile_server, parallel as _par
from .codegen.persistent import init_persistent
from .codegen.lowering_tables import unsupported_ops
from .codegen.target import current, foreign_code
from .shape_specialise import specialiser_for
from .codegen.parallel import call_parallel as _call_parallel, call_done as _par_done, kernel_threads as _par_threads  # [threads hook]

KERNEL_LIMIT = 512
# JITGRAD_STRICT_PASSES=1: an exception inside a pass propagates instead of falling back to the
# unoptimised program (the test suite sets it, so a pass bug fails the test that hits it).
STRICT_PASSES = os.environ.get("JITGRAD_STRICT_PASSES", "") not in ("", "0")
PLAN_LIMIT = 256

_stats = collections.Counter()
_kernels = collections.OrderedDict()
_klock = threading.Lock()


class CacheInfo(dict):
    """Counters: compiles, memory_hits, disk_hits, fallbacks, plan_hits,
    plan_misses, kernels (cached now), compile_seconds."""

    def __getattr__(self, k):
        try:
            return self[k]
        except KeyError:
            raise AttributeError(k) from None


def cache_info():
    d = CacheInfo(compiles=0, memory_hits=0, disk_hits=0, fallbacks=0, plan_hits=0, plan_misses=0,
                  compile_seconds=0.0)
    d.update(_stats)
    with _klock:
        d["kernels"] = len({id(k) for k in _kernels.values()})   # a kernel may be filed under 2 keys
    return d


def clear_cache():
    """Drops every compiled kernel and resets the counters (plans held by
    Sessions keep their kernels alive until they are rebuilt)."""
    with _klock:
        _kernels.clear()
        _stats.clear()
        if not _compiling:   # an emptied dict keeps its last table, which can pin a pymalloc arena
            _compiling.clear()
    cache_key.forget_all()
    _buffers.release()
    compile_server.stop()
    _epoch[0] += 1
    gc.collect()          # kernels in reference cycles unmap their code now
    _malloc_trim()


def _malloc_trim():
    """Hands the heap's free pages back to the system (glibc keeps them otherwise: after
    dropping hundreds of kernels RSS stayed ~40 KB per kernel higher with nothing live)."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (AttributeError, OSError):     # not glibc
        pass


_epoch = [0]


@denormals.on_change
def _new_epoch():
    """Sessions' plans hold kernels of one flush-denormals mode: a change rebuilds them."""
    _epoch[0] += 1


# The data pointer of an ndarray without building __array_interface__ or a
# ctypes object: it is the first field after PyObject_HEAD in numpy's
# PyArrayObject (public, stable layout).  Checked once; otherwise the slow way.
_DATA_OFF = ctypes.sizeof(ctypes.c_ssize_t) + ctypes.sizeof(ctypes.c_void_p)
_U64 = ctypes.c_uint64 if ctypes.sizeof(ctypes.c_void_p) == 8 else ctypes.c_uint32


def _addr_fast(a, _from=_U64.from_address, _off=_DATA_OFF, _id=id):
    return _from(_id(a) + _off).value


def _addr_slow(a):
    return a.__array_interface__["data"][0]


def _check_addr():
    for probe in (np.empty(3, np.float32), np.zeros((2, 5), np.float64)[:, 1:], np.empty((), np.int8)):
        if _addr_fast(probe) != probe.ctypes.data:
            return _addr_slow
    return _addr_fast


_addr = _check_addr()


# ---------------------------------------------------------------- kernels
_ENTRY = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class Kernel:
    def __init__(self, key, obj, meta, ir_text=None, opt_ir=None, timings=None, report=None, source="compile"):
        self.key, self.obj, self.meta = key, obj, meta
        self.ir_text, self._opt_ir = ir_text, opt_ir
        self.timings = timings or {}
        self.report = report or {}
        self.source = source
        foreign = foreign_code(meta)   # compiled for a CPU this host lacks: never mapped, calls raise
        if foreign is not None:
            self.loaded, self.cfunc, self.mt_addr = foreign, foreign, 0
        else:
            self.loaded = load_native(obj)
            self.cfunc = _ENTRY(self.loaded.address(meta["name"]))
            # [threads hook] parallel kernels also export <name>_mt(slots, tid, n) (codegen/parallel.py)
            self.mt_addr = _par.entry_mt_address(self.loaded, meta)
        nb = int(meta["arena_bytes"])
        self._arena = np.empty(nb + 64, np.uint8)
        base = _addr(self._arena)
        self.arena_addr = base + (-base) % 64
        self.status = np.zeros(8, np.int32)   # words 4-5: a failed ListCheck's values (ops/list_ops.py)
        self.status_addr = _addr(self.status)
        self.lock = threading.Lock()
        init_persistent(self)   # loop stacks' memory, kept from call to call and freed with the kernel

    @property
    def opt_ir(self):
        """The optimised IR as one text: its units (codegen/backend.py) are linked only
        when someone asks (explain), not on every compile."""
        if self._opt_ir is not None and not isinstance(self._opt_ir, str):   # backend.UnitIR
            self._opt_ir = self._opt_ir.text()
        return self._opt_ir

    @opt_ir.setter
    def opt_ir(self, value):
        self._opt_ir = value


def _raise_status(code, status=None):
    from .codegen.irutil import ERR_ASSERT, INTERNAL_CODES, VALUE_CODES, error_message
    flush_region_prints()
    if code in INTERNAL_CODES:
        raise InternalError(None, None, error_message(code))
    if code == ERR_ASSERT:
        raise InvalidArgumentError(None, None, failed_assert_message())
    if code in VALUE_CODES and status is not None:    # its values are in words 4 and 5
        raise InvalidArgumentError(None, None, error_message(code, status[4], status[5]))
    raise InvalidArgumentError(None, None, error_message(code))


def _run_passes(program):
    from .passes import pipeline   # not on a warm run: the disk cache is looked up by the pre-pass key
    try:
        return pipeline.run(program)
    except Exception as e:  # a pass bug must not break execution: use the unoptimised program
        if STRICT_PASSES:   # ... but must fail the test that found it (tests/conftest.py sets this)
            raise
        program.stats.append(("pipeline-error", {"error": repr(e)}))
        return program


def _disk():
    try:
        return default_cache()
    except Exception:
        return None


def compile_program(program, key, flush):
    """Builds a Kernel for a (post-pass) Program in flush-denormals mode ``flush`` (the one
    ``key`` was made with); raises kernel.Unsupported."""
    from .codegen import backend
    from .codegen.kernel import KernelBuilder
    t0 = time.perf_counter()
    kb = KernelBuilder(program, "jg_" + key[:24], str(backend.target_machine().target_data),
                       backend.target_machine().triple, flush)
    # LLVM's optimiser keeps memory: many compiles go to a child, given the whole text;
    # in this process the matmul units compile while the rest is lowered
    units = None if compile_server.use_child() else backend.Units()
    kb.unit_sink = units
    if units is not None:
        units.flush_denormals = kb.flush_denormals
    try:
        ir_text = kb.build_text()
    except BaseException:
        if units is not None:
            units.cancel()
        raise
    t1 = time.perf_counter()
    if units is None:
        obj, opt_ir, timings = compile_server.optimise_to_object(ir_text, current().key())
    else:
        if kb.parallel:
            units.alongside(_par.prepare_pool)
        obj, opt_ir, timings = units.finish(ir_text)
        ir_text = units.full_text(ir_text)
    timings = dict(timings, emit_ir=t1 - t0)
    meta = dict(kb.meta)
    meta["timings"] = timings
    report = {"groups": kb.groups, "buffers": kb.buffer_report}
    kb.release()
    t2 = time.perf_counter()
    k = Kernel(key, obj, meta, ir_text, opt_ir, timings, report, "compile")
    timings["load"] = time.perf_counter() - t2
    timings["total"] = time.perf_counter() - t0
    _stats["compiles"] += 1
    _stats["compile_seconds"] += timings["total"]
    _store(key, obj, meta)
    return k


def _store(key, obj, meta):
    d = _disk()
    if d is not None:
        try:
            d.store(key, obj, dict(meta), later=True)   # its fsyncs after the result (cache/deferred.py)
        except Exception:
            pass


def _remember(keys, k):
    with _klock:
        for key in keys:
            if key is not None:
                _kernels[key] = k
                _kernels.move_to_end(key)
        while len(_kernels) > KERNEL_LIMIT:
            _kernels.popitem(last=False)


def lookup_kernel(key):
    """(Kernel, 'memory' | 'disk') for a key, or (None, None)."""
    with _klock:
        k = _kernels.get(key)
        if k is not None:
            _kernels.move_to_end(key)
            _stats["memory_hits"] += 1
            return k, "memory"
    d = _disk()
    if d is None:
        return None, None
    try:
        got = d.load(key)
    except Exception:
        got = None
    if got is None:
        return None, None
    obj, meta = got
    try:
        k = Kernel(key, obj, dict(meta), source="disk")
    except Exception:
        return None, None
    _stats["disk_hits"] += 1
    _remember([key], k)
    return k, "disk"


def get_kernel(program, pre_key=None, flush=None):
    """(Kernel, source) for a post-pass Program: memory, disk or compile.
    With ``pre_key`` (the pre-pass key's hex, already looked up) the kernel is
    compiled and stored under it, and filed in memory under both keys. ``flush``: the
    flush-denormals mode ``pre_key`` was made with (read once: key and code agree)."""
    flush = denormals.enabled() if flush is None else flush
    key = cache_key.post_pass_key(program, flush=flush).hex
    if pre_key is None:
        k, src = lookup_kernel(key)
        if k is not None:
            return k, src
    else:
        with _klock:
            k = _kernels.get(key)
        if k is not None:
            _stats["memory_hits"] += 1
            _remember([key, pre_key], k)
            _store(pre_key, k.obj, k.meta)   # so that a later process finds it without the passes
            return k, "memory"
    return _compile_once(program, key, pre_key, flush)


_compiling = {}   # compile key -> Lock held by the thread compiling it


def _compile_once(program, key, pre_key, flush):
    """Compiles under the key ``pre_key or key`` unless another thread already is:
    then waits for it and takes its kernel from memory (threads tracing one
    jitgrad.function compiled the same kernel each)."""
    ckey = pre_key or key
    while True:
        with _klock:
            k = _kernels.get(ckey)
            if k is not None:
                _stats["memory_hits"] += 1
                return k, "memory"
            busy = _compiling.get(ckey)
            if busy is None:
                busy = _compiling[ckey] = threading.Lock()
                busy.acquire()
                break
        with busy:    # wait for the compiling thread; then look again (it may have failed)
            pass
    try:
        with gc_pause.paused():   # the collector's runs over the IR being built free nothing
            k = compile_program(program, ckey, flush)
        _remember([key, pre_key], k)
        return k, "compile"
    finally:
        with _klock:
            del _compiling[ckey]
        busy.release()


# ---------------------------------------------------------------- plans
class Plan:
    __slots__ = ("fallback", "kernel", "source", "ptrs", "ptrs_addr", "feed_slots", "var_slots", "rand_slots",
                 "out_specs", "key",
                 "out_base", "elem_slots", "write_slots", "program", "n_out", "reason", "has_checks", "hits",
                 "runners", "specialiser", "rng_slot", "region_sites", "growing", "__weakref__")


def _var_reader(session):
    store = session._store
    return lambda attrs: store.read(attrs["var"], attrs.get("name", attrs["var"]))


def canonicalise(program):
    """Renumbers nodes (and args) in depth-first post-order from the outputs,
    so that graphs equal up to op *creation order* (the seeds' loop creates
    its new constant after the old learning-rate constant) get one signature."""
    nodes = program.nodes
    order, seen = [], set()
    roots = [v.node for v in program.outputs if v is not None] + [v.node for _, v in program.var_writes]
    for r in roots:
        if r in seen:
            continue
        stack = [(r, False)]
        while stack:
            i, done = stack.pop()
            if done:
                order.append(i)
                continue
            if i in seen:
                continue
            seen.add(i)
            stack.append((i, True))
            for v in reversed(nodes[i].inputs):
                if v.node not in seen:
                    stack.append((v.node, False))
    if order == list(range(len(nodes))):
        return program
    new_index = {old: k for k, old in enumerate(order)}
    args, arg_index, new_nodes = [], {}, []
    for old in order:
        n = nodes[old]
        attrs = n.attrs
        if n.op == "Arg":
            a = attrs["arg"]
            if a not in arg_index:
                arg_index[a] = len(args)
                args.append(program.args[a])
            attrs = {"arg": arg_index[a]}
        ins = tuple(pir.Value(new_index[v.node], v.index) for v in n.inputs)
        new_nodes.append(pir.Node(n.op, ins, attrs, n.outputs, n.name))

    def m(v):
        return None if v is None else pir.Value(new_index[v.node], v.index)
    return pir.Program(new_nodes, args, [m(v) for v in program.outputs],
                       [(k, m(v)) for k, v in program.var_writes], list(program.stats))


def build_pre_program(session, elements, fed, shape_values=None):
    """The canonical Program of a run, before the passes (specialised on
    ``shape_values``, see shape_specialise.py)."""
    ops = prune(elements, {id(t) for t, _ in fed})
    return canonicalise(pir.from_graph(ops, elements, fed, _var_reader(session), shape_values=shape_values))


def optimise(program):
    before = len(program.nodes)
    program = _run_passes(program)
    if not any(s[0] == "from_graph" for s in program.stats):
        program.stats.insert(0, ("from_graph", {"nodes": before}))
    return program


def _layout(program):
    """What a plan reads from its Program besides args (which passes never renumber)."""
    return ([v is None for v in program.outputs], [k for k, _ in program.var_writes], len(program.args))


def make_plan(session, elements, fed, run_passes=False, shape_values=None):
    """A plan for one run.  A kernel found in memory or on disk under the
    pre-pass key is used as it is (no passes, no lowering tables, no code
    generator); otherwise the passes run and the kernel is compiled.
    run_passes=True always runs them (explain reports their stats)."""
    plan = Plan()
    plan.fallback = False
    plan.key = None
    plan.reason = None
    plan.hits = 0
    plan.runners = {}
    plan.specialiser = None
    plan.rng_slot = plan.region_sites = None
    plan.growing = []
    try:
        pre = build_pre_program(session, elements, fed, shape_values)
    except pir.DataDependentShape as e:
        plan.fallback, plan.reason, plan.program = True, str(e), None
        if shape_values is None:   # shapes set by values: compiled per value set instead
            plan.specialiser = specialiser_for(elements, fed, make_plan, run_plan, interpreter.run)
        return plan
    other = sorted({d.name for n in pre.nodes for _, d in n.outputs if d not in NATIVE_DTYPES})
    if other:   # float16, int8, complex64, ...: the numpy reference kernels compute them
        plan.fallback, plan.reason, plan.program = True, f"dtypes without a lowering: {', '.join(other)}", pre
        return plan
    flush = denormals.enabled()   # once per plan: its keys and its code (compile_program)
    pre_key = cache_key.pre_pass_key(pre, flush=flush)
    key = pre_key.hex
    kernel, source = lookup_kernel(key)
    program = pre
    if kernel is None or run_passes:
        program = optimise(pre)
    plan.program = program
    if kernel is None:
        from .codegen.irutil import Unsupported
        bad = unsupported_ops(program)
        if bad:
            plan.fallback, plan.reason = True, f"ops without a lowering: {', '.join(bad)}"
            return plan
        if _layout(program) != _layout(pre):   # cannot be served from the pre-pass key: file it by post key only
            key = None
        try:
            kernel, source = get_kernel(program, key, flush)
        except Unsupported as e:
            plan.fallback, plan.reason = True, f"unsupported: {e}"
            return plan
        except Exception as e:   # a code generator bug: the interpreter's answer, never an internal error ...
            if STRICT_PASSES:    # ... but the test that found it fails (tests/conftest.py sets this)
                raise
            plan.fallback, plan.reason = True, f"code generator error: {e!r}"
            return plan
        if source == "compile":
            cache_key.note_compile(pre_key)
    cache_key.remember(pre_key)
    plan.kernel, plan.source, plan.key = kernel, source, pre_key
    meta = kernel.meta
    n_args = meta["n_args"]
    ptrs = np.zeros(meta["n_slots"], np.uint64)
    plan.feed_slots, plan.var_slots, plan.rand_slots = [], [], []
    for i, a in enumerate(program.args):
        if a.kind == "feed":
            plan.feed_slots.append((i, a.key))
        elif a.kind == "rand":
            plan.rand_slots.append((i, _drawer(*a.key)))
        elif a.kind == "var":
            name = next((n.name for n in program.nodes if n.op == "Arg" and n.attrs["arg"] == i), a.key)
            plan.var_slots.append((i, a.key, name, tuple(a.shape), a.dtype.np))
        else:
            v = np.ascontiguousarray(a.value, dtype=a.dtype.np)
            a.value = v  # keep alive
            ptrs[i] = _addr(v)
    outs = meta["outputs"]
    plan.out_specs = [(tuple(s), np.dtype(d)) for s, d in outs]
    plan.growing = [j for j, (s, _) in enumerate(plan.out_specs) if _dynamic_outputs.is_dynamic(s)]
    plan.out_base = n_args
    plan.n_out = len(outs)
    ptrs[n_args + len(outs)] = kernel.arena_addr
    ptrs[n_args + len(outs) + 1] = kernel.status_addr
    plan.ptrs = ptrs
    plan.ptrs_addr = _addr(ptrs)
    slot = 0
    plan.elem_slots = []
    for v in program.outputs:
        if v is None:
            plan.elem_slots.append(None)
        else:
            plan.elem_slots.append(slot)
            slot += 1
    plan.write_slots = [(k, slot + j) for j, (k, _) in enumerate(program.var_writes)]
    plan.has_checks = bool(meta.get("has_checks"))
    # random ops inside regions draw through a handle opened around each call (ops/random_ops.py)
    plan.rng_slot = meta.get("rng_slot")
    plan.region_sites = region_sites(program) if plan.rng_slot is not None else None
    return plan


def _drawer(op_type, attrs):
    """A function drawing the random op's next array (see ops/random_ops.py)."""
    kernel = REGISTRY[op_type].kernel
    return lambda: kernel(attrs)


def _interpret(session, elements, fed):
    return interpreter.run(elements, {id(t): a for t, a in fed}, session._store)


def _call(k, addr):
    if not k.mt_addr:            # a serial kernel: nothing more on its way (W1's call is ~2 us)
        k.cfunc(addr)
        return
    n = _par_threads(k.meta)     # [threads hook] codegen/parallel.py
    if n > 1:
        _call_parallel(k.mt_addr, addr, n, k.status_addr)
    else:
        k.cfunc(addr)
    _par_done()


def run_plan(session, plan, fed, elements):
    """Runs a plan; returns one ndarray (or None) per element."""
    if plan.fallback:
        if plan.specialiser is not None:
            return plan.specialiser.run(session, fed, elements)
        _stats["fallbacks"] += 1
        return _interpret(session, elements, fed)
    k = plan.kernel
    with k.lock:   # the plan's pointer block and the kernel's scratch/status are shared
        ptrs = plan.ptrs
        for slot, pos in plan.feed_slots:
            ptrs[slot] = _addr(fed[pos][1])
        held = []
        for slot, draw in plan.rand_slots:
            v = draw()
            held.append(v)
            ptrs[slot] = _addr(v)
        if plan.var_slots:
            store = session._store
            for slot, key, name, shape, dt in plan.var_slots:
                v = store.read(key, name)
                if type(v) is not np.ndarray or v.dtype != dt or not v.flags.c_contiguous:
                    v = np.ascontiguousarray(v, dtype=dt)
                if v.shape != shape:
                    return None   # variable changed shape: caller rebuilds the plan
                held.append(v)
                ptrs[slot] = _addr(v)
        outs = []
        base = plan.out_base
        for j, (shape, dt) in enumerate(plan.out_specs):
            o = _dynamic_outputs.descriptor() if j in plan.growing else _buffers.empty(shape, dt)
            outs.append(o)
            ptrs[base + j] = _addr(o)
        with region_draws(ptrs, plan.rng_slot, plan.region_sites):
            _call(k, plan.ptrs_addr)
        if plan.has_checks:
            code = int(k.status[0])
            if code:
                _raise_status(code, k.status)
        for j in plan.growing:   # shapes known as it ran: copied out before the next call reuses the memory
            outs[j] = _dynamic_outputs.read(outs[j], *plan.out_specs[j])
    if plan.write_slots:
        store = session._store
        for key, s in plan.write_slots:
            store.write(key, outs[s])
    return [None if s is None else outs[s] for s in plan.elem_slots]


def _plan_key(session, elements, fed):
    return (len(session.graph._ops), _epoch[0], tuple(id(e) for e in elements),
            tuple((id(t), a.shape, a.dtype.num) for t, a in fed))


def execute(session, elements, fed):
    """Compiled execution of graph elements. fed: list of (tensor, ndarray)."""
    plans = session._plans
    key = _plan_key(session, elements, fed)
    entry = plans.get(key)
    if entry is None:
        _stats["plan_misses"] += 1
        plan = make_plan(session, elements, fed)
        plans[key] = (plan, elements)
        if len(plans) > PLAN_LIMIT:
            plans.popitem(last=False)
    else:
        _stats["plan_hits"] += 1
        plan = entry[0]
        plan.hits += 1
    res = run_plan(session, plan, fed, elements)
    if res is None:   # a variable's shape changed under the plan
        plan = make_plan(session, elements, fed)
        plans[key] = (plan, elements)
        res = run_plan(session, plan, fed, elements)
        if res is None:
            return _interpret(session, elements, fed)
    return res
