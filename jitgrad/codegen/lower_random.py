"""Random ops inside compiled branches / loop bodies (``RegionRandom`` nodes).

The node's output buffer is filled by the host: the native code calls
``jitgrad_region_random(run, site, out)`` (ops/random_ops.py) each time the
node executes, so a loop draws once per iteration and a branch only when it is
taken, in execution order.  ``run`` is the kernel's random slot, a per-call
handle the executor opens around the call (``kb.regions.rng``: present in a kernel and
in its regions only where some region draws).  A hook that finds no draws for
the handle returns nonzero and the run fails with ERR_RANDOM.
"""
from llvmlite import ir

from ..ops.random_ops import HOOK_SYMBOL

from .irutil import ERR_RANDOM, I8, I32, I64, c64
from .mxcsr import around_host_call

I8P = I8.as_pointer()


def uses_random(program):
    """Whether a RegionRandom node is in ``program`` or in any region nested in it."""
    todo = [program]
    while todo:
        p = todo.pop()
        for n in p.nodes:
            if n.op == "RegionRandom":
                return True
            if n.op in ("If", "While"):
                todo.extend(n.attrs[k] for k in ("then_branch", "else_branch", "body", "cond")
                            if hasattr(n.attrs.get(k), "nodes"))
    return False


def lower_region_random(kb, node, outs, dry):
    if dry:
        return
    b = kb.b
    fn = kb.b.module.globals.get(HOOK_SYMBOL)
    if fn is None:
        fn = ir.Function(kb.b.module, ir.FunctionType(I32, [I8P, I64, I8P]), HOOK_SYMBOL)
    with b.if_then(kb.no_error_yet()):   # nothing runs after a failed op (and TF draws nothing)
        with around_host_call(kb):       # numpy draws: with MXCSR as numpy expects it
            rc = b.call(fn, [kb.regions.rng, c64(node.attrs["site"]), b.bitcast(outs[0].ptr, I8P)])
        kb.set_error(b.icmp_signed("!=", rc, ir.Constant(I32, 0)), ERR_RANDOM)


MATERIALISE = {"RegionRandom": lower_region_random}
NEEDS_BUFFER = {"RegionRandom": "all"}
