"""jitgrad's explain: what the compiler does with one Session.run (pass stats,
cache-key components, fused loop nests, buffers, LLVM IR, assembly, compile
time, where the kernel came from), and why a run would recompile."""
import os

from .cache import deferred, key as cache_key
from .codegen.target import from_key
from .compiler import _disk, _kernels, _klock, build_pre_program, make_plan

class ExplainReport:
    def __init__(self, **kw):
        self.__dict__.update(kw)

    def __str__(self):
        out = ["== jitgrad explain =="]
        out.append(f"kernel source: {self.source}" + (f"  (key {self.key[:16]}..., loaded by {self.loader})"
                                                      if self.key else ""))
        if getattr(self, "target", None):
            out.append(f"target: {self.target}")
        if self.fallback:
            out.append(f"FALLBACK to the interpreter: {self.reason}")
        if getattr(self, "specialised", None):
            out.append("-- specialised on shape values (shape_specialise.py; in the key as the static ops' attrs)")
            out.append(self.specialised)
        if self.key_components:
            out.append("-- cache key components (jitgrad/cache/key.py)")
            out.append(self.key_components)
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
    from .codegen import backend   # llvmlite: only when explaining
    plan = make_plan(session, elements, fed, run_passes=True)
    specialised = ""
    if plan.specialiser is not None:   # shapes set by values: the kernel for this run's values
        values = plan.specialiser.values(session, fed)
        specialised = plan.specialiser.describe(values)
        plan = make_plan(session, elements, fed, run_passes=True, shape_values=values)
    p = plan.program
    common = dict(stats=list(p.stats) if p else [], n_nodes=len(p.nodes) if p else 0, n_args=len(p.args) if p else 0,
                  fallback=plan.fallback, reason=plan.reason,
                  key_components=plan.key.describe() if plan.key is not None else "", specialised=specialised)
    if plan.fallback:
        return ExplainReport(source="interpreter", key=None, loader=None, timings={}, groups=[], buffers=[],
                             arena_bytes=0, ir="", asm="", **common)
    k = plan.kernel
    tgt = from_key(k.meta.get("target"))
    if k.opt_ir is None or not k.report:  # loaded from disk: rebuild the texts (not cached)
        from .codegen.kernel import KernelBuilder
        kb = KernelBuilder(p, k.meta["name"], str(backend.target_machine().target_data),
                           backend.target_machine().triple, k.meta["flush_denormals"])
        ir_text = kb.build_text()
        _, k.opt_ir, _ = backend.optimise_to_object(ir_text, tgt)
        k.ir_text = ir_text
        k.report = {"groups": kb.groups, "buffers": kb.buffer_report}
    asm = backend.assembly(k.opt_ir, tgt)
    return ExplainReport(source=plan.source, key=k.key, loader=k.loaded.loader, timings=k.timings, target=tgt.describe(),
                         groups=k.report["groups"], buffers=k.report["buffers"], arena_bytes=k.meta["arena_bytes"],
                         ir=k.opt_ir, unoptimised_ir=k.ir_text, asm=asm, **common)


def explain_recompile(session, elements, fed):
    """Whether this run's kernel is compiled already and, if not, what differs from the
    closest kernel this process has used (jitgrad.explain_recompile)."""
    pre = build_pre_program(session, elements, fed)
    key = cache_key.pre_pass_key(pre)
    with _klock:
        in_memory = key.hex in _kernels
    if in_memory:
        head = f"kernel {key.hex[:16]} is in memory: this run does not compile"
    else:
        d = _disk()
        deferred.wait()   # an entry this process queued counts as on disk
        on_disk = d is not None and d.enabled and os.path.exists(d.path_for(key.hex))
        head = (f"kernel {key.hex[:16]} is on disk: this run loads it, it does not compile" if on_disk
                else cache_key.why_recompiled(key))
    return head + "\n" + key.describe()
