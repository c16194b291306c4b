"""What a gradient through tf.cond / tf.while_loop reuses instead of drawing again.

A gradient never draws again (TF's cond_v2 / while_v2 gradients read the
forward pass's values): the forward If / While op saves what its branches' /
body's random ops drew as extra outputs (stacked per iteration for a While),
and the gradient replays the branch / body on those values (``replay_drawn``).

A random op in a region nested in the branch or body (a cond in a loop, a loop
in a cond, at any depth) is saved level by level: the nested op saves its
draws as its own outputs, and those outputs are draws of the enclosing branch
or body. The replay re-creates such a nested op as one that draws nothing
(``_redrawn``): its regions take the saved values as inputs (an If's as
captures, a While's as sliced inputs), and a While runs the forward's trip
count (a counted loop: a loop condition that draws is not drawn again either).

A nested loop whose trip count is known only at run time saves stacks of
unknown length: per iteration of an enclosing loop they form a ragged stack
(codegen/lower_control.py: a stack of the inner stacks' descriptors), and in a
cond's branch an If output of run-time length; both compile, and so does a
ragged stack of ragged stacks (draws three loops deep, or a loop in a loop in a
cond: rows of descriptors of stacks of descriptors, freed level by level).
"""
import numpy as np

from ..func_graph import Func, as_output, replay, trace
from ..graph import Tensor
from ..passes.prune import prune
from .math_ops import stop_gradient
from .registry import REGISTRY, apply_op

REGIONS = ("If", "While")
_REGION_ATTRS = ("then_branch", "else_branch", "body", "cond")


def draws(func):
    """What ``func``'s outputs need drawn, in graph order: the outputs of the
    random ops in its own graph and, for each If / While in it that holds a
    random op, that op's saved draws (``saved_draws_of``)."""
    out = []
    for op in prune(list(func.outputs), {id(ph) for ph in func.inputs}):
        if REGISTRY[op.type].kind == "random":
            out.append(op.outputs[0])
        elif op.type in REGIONS and draws_inside(op):
            out.extend(saved_draws_of(op))
    return out


def draws_inside(op):
    """Whether region op ``op`` holds a random op, in any of its regions at any depth."""
    for k in _REGION_ATTRS:
        f = op.attrs.get(k)
        if isinstance(f, Func) and any(REGISTRY[o.type].kind == "random" or (o.type in REGIONS and draws_inside(o))
                                       for o in f.graph._ops):
            return True
    return False


def saved_draws_of(op):
    """A region op's draws as its outputs (saving them first): an If's, what its
    branches drew; a While's, its trip count and what its body drew each iteration."""
    if op.type == "If":
        return ensure_if_draws_saved(op)
    return [op.outputs[op.attrs["n_vars"]]] + ensure_while_draws_saved(op)


# ---------------------------------------------------------------- saving
def _zeros_for(fg, t):
    """Zeros in ``fg`` standing for draw ``t`` of the other branch (no rows where
    their number is unknown: a loop's stack)."""
    if t.shape.dims is None:
        raise NotImplementedError(f"the gradient through a region drawing {t.name}, of unknown rank")
    dims = tuple(d or 0 for d in t.shape.dims)
    with fg.as_default():
        return apply_op("Const", [], {"value": np.zeros(dims, t.dtype.np), "dtype": t.dtype})


def ensure_if_draws_saved(op):
    """Gives forward If op ``op``, once, extra outputs: what each branch drew, the
    then branch's first (zeros from the branch that did not draw it). attrs
    draws_at: the first one's index; then_draws, n_draws: how many. Returns them."""
    a = op.attrs
    if "draws_at" not in a:
        then, els = a["then_branch"], a["else_branch"]
        dt_, de = draws(then), draws(els)
        first = len(op.outputs)
        specs = [(t.shape.dims, t.dtype) for t in dt_ + de]
        if specs:
            then = then.with_outputs(then.outputs + tuple(dt_) + tuple(_zeros_for(then.graph, t) for t in de))
            els = els.with_outputs(els.outputs + tuple(_zeros_for(els.graph, t) for t in dt_) + tuple(de))
        op.attrs = a = dict(a, then_branch=then, else_branch=els, out_specs=list(a["out_specs"]) + specs,
                            draws_at=first, then_draws=len(dt_), n_draws=len(specs))
        op.outputs = op.outputs + tuple(Tensor(op, first + k, dt, dims) for k, (dims, dt) in enumerate(specs))
    return list(op.outputs[a["draws_at"]:a["draws_at"] + a["n_draws"]])


def if_branch_draws(op, branch):
    """{id(a draw of If ``op``'s ``branch``, "then_branch" / "else_branch"): the
    output of ``op`` holding it} (``op``'s draws saved)."""
    a = op.attrs
    at, nt, nd = a["draws_at"], a["then_draws"], a["n_draws"]
    lo, hi = (at, at + nt) if branch == "then_branch" else (at + nt, at + nd)
    outs = a[branch].outputs
    return {id(outs[k]): op.outputs[k] for k in range(lo, hi)}


def ensure_while_draws_saved(op):
    """Gives forward While op ``op``, once, extra stacked outputs: what its
    body's random ops drew in every iteration (ys from attrs draws_at on,
    n_draws of them). Returns them."""
    a = op.attrs
    if "draws_at" not in a:
        body = a["body"]
        d = draws(body)
        specs = [(t.shape.dims, t.dtype) for t in d]
        op.attrs = a = dict(a, body=body.with_outputs(body.outputs + tuple(d)), n_ys=a["n_ys"] + len(d),
                            y_specs=list(a["y_specs"]) + specs, draws_at=a["n_ys"], n_draws=len(d))
        count, first = a.get("static_count"), len(op.outputs)
        op.outputs = op.outputs + tuple(Tensor(op, first + k, dt, None if dims is None else (count,) + tuple(dims))
                                        for k, (dims, dt) in enumerate(specs))
    y0 = a["n_vars"] + 1 + a["draws_at"]
    return list(op.outputs[y0:y0 + a["n_draws"]])


def while_body_draws(op):
    """The body outputs of While ``op`` that its saved draws stack (draws saved)."""
    a = op.attrs
    at = a["n_vars"] + a["draws_at"]
    return list(a["body"].outputs[at:at + a["n_draws"]])


# ---------------------------------------------------------------- replaying
def replay_drawn(func, inputs, drawn):
    """replay(func, inputs) drawing nothing: ``drawn`` maps id(each of
    ``draws(func)``) to the value to use instead."""
    rebuild = {id(op): (lambda ins, op=op: _redrawn(op, ins, drawn))
               for op in func.graph._ops if op.type in REGIONS and draws_inside(op)}
    return replay(func, inputs, substitute=drawn, rebuild=rebuild)


def _redrawn(op, ins, drawn):
    """Region op ``op`` re-created on ``ins`` drawing nothing; one tensor per output of ``op``."""
    vals = [drawn[id(t)] for t in saved_draws_of(op)]
    return (_redrawn_if if op.type == "If" else _redrawn_while)(op, ins, vals)


def _drawing_nothing(func, outputs, own, specs):
    """A Func computing ``outputs`` of ``func`` that draws nothing: its inputs
    are ``func``'s and one per spec (the values drawn); own: {id(a draw of
    ``func``): the index of its value among those}."""
    n = len(func.inputs)

    def fn(*p):
        # the draws are not differentiable (as the random ops): a gradient stops at them
        drawn = {i: stop_gradient(p[n + k]) for i, k in own.items()}
        return replay_drawn(Func(func.graph, func.inputs, outputs), p[:n], drawn)
    fg, phs, outs = trace(func.graph.name + "_drawn", fn, [(t.shape.dims, t.dtype) for t in func.inputs] + specs)
    assert not fg.captures, "a replayed region captured a tensor"
    return Func(fg, phs, [as_output(fg, o) for o in outs])


def _op_of(result):
    return result.op if isinstance(result, Tensor) else result[0].op


def _redrawn_if(op, ins, vals):
    """An If whose branches take what ``op``'s drew as extra captures, then branch's first."""
    a = op.attrs
    at, nt, nd = a["draws_at"], a["then_draws"], a["n_draws"]
    specs = [(t.shape.dims, t.dtype) for t in op.outputs[at:at + nd]]
    branches = {}
    for name, lo, hi in (("then_branch", at, at + nt), ("else_branch", at + nt, at + nd)):
        f = a[name]
        branches[name] = _drawing_nothing(f, f.outputs[:at], {id(f.outputs[k]): k - at for k in range(lo, hi)}, specs)
    new = _op_of(apply_op("If", list(ins) + vals, dict(a, **branches, out_specs=list(a["out_specs"][:at]),
                                                        draws_at=at, then_draws=0, n_draws=0),
                          name=op.name.rsplit("/", 1)[-1]))
    return list(new.outputs) + vals


def _redrawn_while(op, ins, vals):
    """A counted While running ``op``'s trip count whose body takes what
    ``op``'s drew in each iteration as extra sliced inputs."""
    a = op.attrs
    n, c, nx, ny = a["n_vars"], a["n_caps"], a["n_xs"], a["n_ys"]
    da, nd = a["draws_at"], a["n_draws"]
    trips, stacks = vals[0], vals[1:]
    body = a["body"]
    d = while_body_draws(op)
    ys = [j for j in range(ny) if not da <= j < da + nd]
    new_body = _drawing_nothing(body, list(body.outputs[:n]) + [body.outputs[n + j] for j in ys],
                                {id(t): k for k, t in enumerate(d)}, list(a["y_specs"][da:da + nd]))
    attrs = {k: v for k, v in a.items() if k != "saved_at"}   # (its saved values: plain stacks here)
    attrs.update(cond=None, body=new_body, limit="count", n_xs=nx + nd, draw_xs=nd, n_ys=len(ys),
                 y_specs=[a["y_specs"][j] for j in ys], draws_at=len(ys), n_draws=0)
    new = _op_of(apply_op("While", list(ins[:n + c + nx]) + stacks + [trips], attrs,
                          name=op.name.rsplit("/", 1)[-1])).outputs
    at = {j: k for k, j in enumerate(ys)}
    return list(new[:n + 1]) + [new[n + 1 + at[j]] if j in at else stacks[j - da] for j in range(ny)]
