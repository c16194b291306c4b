"""The compiled executor: Session.run -> (cached plan) -> one native call.

Two caches:
  * per Session, a *plan* cache keyed by (graph length, fetch ids, feed ids,
    feed shapes/dtypes): the pruned Program, its kernel, the argument layout
    and a preallocated pointer block.  Graphs are append-only, so a plan stays
    valid until the graph grows (its length is in the key) or a variable's
    shape/dtype changes (checked on every call).  LRU, PLAN_LIMIT per Session.
  * global, a *kernel* cache keyed by sha256(program signature after passes,
    toolchain + host fingerprint).  LRU of KERNEL_LIMIT kernels; a placeholder
    with unknown dims compiles once per concrete shape and old shapes age out.
    Constants are runtime arguments, so graphs that differ only in constant
    values share a kernel (the seeds' 40-step gradient descent compiles once).

A program with an op that has no lowering (or any failure inside the code
generator) runs in the reference interpreter instead; cache_info().fallbacks
counts such runs.
"""
import collections
import hashlib
import threading
import time

import numpy as np

from . import interpreter
from .errors import InvalidArgumentError
from .passes import ir as pir
from .passes.prune import prune

KERNEL_LIMIT = 512
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
    d["kernels"] = len(_kernels)
    return d


def clear_cache():
    """Drops every compiled kernel and resets the counters (plans held by
    Sessions keep their kernels alive until they are rebuilt)."""
    with _klock:
        _kernels.clear()
        _stats.clear()
    _epoch[0] += 1


_epoch = [0]


# ---------------------------------------------------------------- kernels
class Kernel:
    def __init__(self, key, obj, meta, ir_text=None, opt_ir=None, timings=None, report=None, source="compile"):
        from .codegen.backend import Loaded
        self.key, self.obj, self.meta = key, obj, meta
        self.ir_text, self.opt_ir = ir_text, opt_ir
        self.timings = timings or {}
        self.report = report or {}
        self.source = source
        self.loaded = Loaded(obj, meta["name"])
        self.cfunc = self.loaded.cfunc
        nb = int(meta["arena_bytes"])
        self._arena = np.empty(nb + 64, np.uint8)
        base = self._arena.__array_interface__["data"][0]
        self.arena_addr = base + (-base) % 64
        self.status = np.zeros(4, np.int32)
        self.status_addr = self.status.__array_interface__["data"][0]
        self.lock = threading.Lock()


def _run_passes(program):
    try:
        from .passes import pipeline
    except ImportError:
        return program
    try:
        return pipeline.run(program)
    except Exception as e:  # a pass bug must not break execution: use the unoptimised program
        program.stats.append(("pipeline-error", {"error": repr(e)}))
        return program


CODEGEN_VERSION = "codegen-1"


def kernel_key(program):
    """sha256 over the (post-pass) program signature, the code generator
    version and the toolchain/host fingerprint (jitgrad.cache.make_key adds
    jitgrad/llvmlite/LLVM versions, triple, CPU name and features)."""
    from .codegen.backend import fingerprint
    sig = program.signature() + "\0" + CODEGEN_VERSION + "\0" + fingerprint()
    try:
        from .cache import make_key
        return make_key(sig)
    except Exception:
        return hashlib.sha256(sig.encode()).hexdigest()


def _disk():
    try:
        from .cache import default_cache
        return default_cache()
    except Exception:
        return None


def compile_program(program, key):
    """Builds a Kernel for a (post-pass) Program; raises kernel.Unsupported."""
    from .codegen import backend
    from .codegen.kernel import KernelBuilder
    t0 = time.perf_counter()
    kb = KernelBuilder(program, "jg_" + key[:24], str(backend.target_machine().target_data),
                       backend.target_machine().triple)
    module = kb.build()
    ir_text = str(module)
    t1 = time.perf_counter()
    obj, opt_ir, timings = backend.optimise_to_object(ir_text)
    timings = dict(timings, emit_ir=t1 - t0)
    meta = dict(kb.meta)
    meta["timings"] = timings
    report = {"groups": kb.groups, "buffers": kb.buffer_report}
    k = Kernel(key, obj, meta, ir_text, opt_ir, timings, report, "compile")
    timings["load"] = time.perf_counter() - t0 - sum(timings.values())
    timings["total"] = time.perf_counter() - t0
    _stats["compiles"] += 1
    _stats["compile_seconds"] += timings["total"]
    d = _disk()
    if d is not None:
        try:
            d.store(key, obj, {k_: v for k_, v in meta.items()})
        except Exception:
            pass
    return k


def get_kernel(program):
    """(Kernel, source) for a post-pass Program: memory, disk or compile."""
    key = kernel_key(program)
    with _klock:
        k = _kernels.get(key)
        if k is not None:
            _kernels.move_to_end(key)
            _stats["memory_hits"] += 1
            return k, "memory"
    src = "compile"
    k = None
    d = _disk()
    if d is not None:
        try:
            got = d.load(key)
        except Exception:
            got = None
        if got is not None:
            obj, meta = got
            try:
                k = Kernel(key, obj, dict(meta), source="disk")
                _stats["disk_hits"] += 1
                src = "disk"
            except Exception:
                k = None
    if k is None:
        k = compile_program(program, key)
    with _klock:
        _kernels[key] = k
        while len(_kernels) > KERNEL_LIMIT:
            _kernels.popitem(last=False)
    return k, src


# ---------------------------------------------------------------- plans
class Plan:
    __slots__ = ("fallback", "kernel", "source", "ptrs", "ptrs_addr", "feed_slots", "var_slots", "out_specs",
                 "out_base", "elem_slots", "write_slots", "program", "n_out", "reason", "has_checks")


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
                       [(k, m(v)) for k, v in program.var_writes], dict(program.aggregation), list(program.stats))


def build_program(session, elements, fed):
    ops = prune(elements, {id(t) for t, _ in fed})
    program = canonicalise(pir.from_graph(ops, elements, fed, _var_reader(session)))
    before = len(program.nodes)
    program = _run_passes(program)
    if not any(s[0] == "from_graph" for s in program.stats):
        program.stats.insert(0, ("from_graph", {"nodes": before}))
    return program


def make_plan(session, elements, fed):
    from .codegen.kernel import Unsupported, unsupported_ops
    program = build_program(session, elements, fed)
    plan = Plan()
    plan.program = program
    plan.fallback = False
    plan.reason = None
    bad = unsupported_ops(program)
    if bad:
        plan.fallback, plan.reason = True, f"ops without a lowering: {', '.join(bad)}"
        return plan
    try:
        kernel, source = get_kernel(program)
    except Unsupported as e:
        plan.fallback, plan.reason = True, f"unsupported: {e}"
        return plan
    plan.kernel, plan.source = kernel, source
    meta = kernel.meta
    n_args = meta["n_args"]
    ptrs = np.zeros(meta["n_slots"], np.uint64)
    plan.feed_slots, plan.var_slots = [], []
    for i, a in enumerate(program.args):
        if a.kind == "feed":
            plan.feed_slots.append((i, a.key))
        elif a.kind == "var":
            name = next((n.name for n in program.nodes if n.op == "Arg" and n.attrs["arg"] == i), a.key)
            plan.var_slots.append((i, a.key, name, tuple(a.shape), a.dtype.np))
        else:
            v = np.ascontiguousarray(a.value, dtype=a.dtype.np)
            a.value = v  # keep alive
            ptrs[i] = v.__array_interface__["data"][0]
    outs = meta["outputs"]
    plan.out_specs = [(tuple(s), np.dtype(d)) for s, d in outs]
    plan.out_base = n_args
    plan.n_out = len(outs)
    ptrs[n_args + len(outs)] = kernel.arena_addr
    ptrs[n_args + len(outs) + 1] = kernel.status_addr
    plan.ptrs = ptrs
    plan.ptrs_addr = ptrs.__array_interface__["data"][0]
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
    return plan


def _interpret(session, elements, fed):
    return interpreter.run(elements, {id(t): a for t, a in fed}, session._store)


def run_plan(session, plan, fed, elements):
    """Runs a plan; returns one ndarray (or None) per element."""
    if plan.fallback:
        _stats["fallbacks"] += 1
        return _interpret(session, elements, fed)
    ptrs = plan.ptrs
    for slot, pos in plan.feed_slots:
        ptrs[slot] = fed[pos][1].__array_interface__["data"][0]
    if plan.var_slots:
        store = session._store
        for slot, key, name, shape, dt in plan.var_slots:
            v = store.read(key, name)
            if type(v) is not np.ndarray or v.dtype != dt or not v.flags.c_contiguous:
                v = np.ascontiguousarray(v, dtype=dt)
            if v.shape != shape:
                return None   # variable changed shape: caller rebuilds the plan
            ptrs[slot] = v.__array_interface__["data"][0]
    outs = []
    base = plan.out_base
    for j, (shape, dt) in enumerate(plan.out_specs):
        o = np.empty(shape, dt)
        outs.append(o)
        ptrs[base + j] = o.__array_interface__["data"][0]
    k = plan.kernel
    with k.lock:
        k.cfunc(plan.ptrs_addr)
        if plan.has_checks:
            code = int(k.status[0])
            if code:
                from .codegen.kernel import ERROR_MESSAGES
                raise InvalidArgumentError(None, None, ERROR_MESSAGES.get(code, f"kernel error {code}"))
    if plan.write_slots:
        store = session._store
        for key, s in plan.write_slots:
            store.write(key, outs[s])
    return [None if s is None else outs[s] for s in plan.elem_slots]


def execute(session, elements, fed):
    """Compiled execution of graph elements. fed: list of (tensor, ndarray)."""
    plans = session._plans
    key = (len(session.graph._ops), _epoch[0], tuple(id(e) for e in elements),
           tuple((id(t), a.shape, a.dtype.num) for t, a in fed))
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
    res = run_plan(session, plan, fed, elements)
    if res is None:   # a variable's shape changed under the plan
        plan = make_plan(session, elements, fed)
        plans[key] = (plan, elements)
        res = run_plan(session, plan, fed, elements)
        if res is None:
            return _interpret(session, elements, fed)
    return res


# ---------------------------------------------------------------- explain
class ExplainReport:
    def __init__(self, **kw):
        self.__dict__.update(kw)

    def __str__(self):
        out = ["== jitgrad explain =="]
        out.append(f"kernel source: {self.source}" + (f"  (key {self.key[:16]}...)" if self.key else ""))
        if self.fallback:
            out.append(f"FALLBACK to the interpreter: {self.reason}")
        out.append("-- passes (node counts)")
        for name, st in self.stats:
            out.append(f"  {name}: {st}")
        out.append(f"  final program: {self.n_nodes} nodes, {self.n_args} args")
        if self.timings:
            out.append("-- compile time: " + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in self.timings.items()))
        if self.groups:
            out.append("-- fused loop nests")
            for head, ops in self.groups:
                out.append(f"  {head}: fused [{', '.join(ops)}]")
        if self.buffers:
            out.append(f"-- buffers (scratch arena {self.arena_bytes} bytes)")
            for name, nbytes, where in self.buffers:
                out.append(f"  {name}: {nbytes} bytes at {where}")
        if self.ir:
            out.append("-- LLVM IR (optimised)")
            out.append(self.ir)
        if self.asm:
            out.append("-- assembly")
            out.append(self.asm)
        return "\n".join(out)

    __repr__ = __str__


def explain(session, elements, fed):
    from .codegen import backend
    plan = make_plan(session, elements, fed)
    p = plan.program
    common = dict(stats=list(p.stats), n_nodes=len(p.nodes), n_args=len(p.args), fallback=plan.fallback,
                  reason=plan.reason)
    if plan.fallback:
        return ExplainReport(source="interpreter", key=None, timings={}, groups=[], buffers=[], arena_bytes=0,
                             ir="", asm="", **common)
    k = plan.kernel
    if k.opt_ir is None or not k.report:  # loaded from disk: rebuild the texts (not cached)
        from .codegen.kernel import KernelBuilder
        kb = KernelBuilder(p, k.meta["name"], str(backend.target_machine().target_data),
                           backend.target_machine().triple)
        ir_text = str(kb.build())
        _, k.opt_ir, _ = backend.optimise_to_object(ir_text)
        k.ir_text = ir_text
        k.report = {"groups": kb.groups, "buffers": kb.buffer_report}
    asm = backend.assembly(k.opt_ir)
    return ExplainReport(source=plan.source, key=k.key, timings=k.timings, groups=k.report["groups"],
                         buffers=k.report["buffers"], arena_bytes=k.meta["arena_bytes"], ir=k.opt_ir,
                         unoptimised_ir=k.ir_text, asm=asm, **common)
