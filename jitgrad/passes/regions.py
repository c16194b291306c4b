"""Control-flow regions in the compiler IR.

``region_node`` (called by ir.from_graph) specialises an If / While op of the
graph to the run's concrete shapes: each branch / cond / body Func becomes a
sub-Program (its inputs are the sub-Program's args, in order; constants inside
are baked in as Literals; its tf.prints / tf.Asserts are RegionPrint /
RegionAssert nodes, kept alive as var_writes, see ops/logging_ops.py; its random
ops are RegionRandom nodes, see ops/random_ops.py). A region that cannot have
static shapes (a loop variable whose shape changes between iterations, a branch
whose output shape depends on the branch taken) keeps its graph
Funcs: the interpreter runs it and the code generator declines it. One
kind of input of unknown shape is allowed: a stack of run-time length that
only the region's own loops slice (a loop body's sliced input whose rows are
such stacks: a nested loop's saved draws, per iteration of the enclosing loop;
an If's capture: a loop-in-a-cond's saved draws, for its gradient).

``regions`` is the pass that makes the pipeline understand them:
  * an If whose predicate is known at compile time is replaced by the taken
    branch, inlined;
  * every sub-Program is optimised by the whole pipeline (DCE, CSE, folding
    inside bodies; each iteration is one call of the body, so CSE never merges
    values across iterations);
  * the Shape of a loop variable that grows by rows is computed from the
    loop's trip count (entry rows + rows appended per iteration * count), so
    that read of the grown value (``ta.size()``) compiles too;
  * stacked per-iteration outputs of a While that nothing reads are dropped
    from its body (a forward loop whose gradient was built but is not fetched
    saves nothing), and so are If outputs nothing reads, from both branches
    (what a cond returns only for its gradient, e.g. a nested loop's saved
    draws); inputs a region no longer reads are dropped from it (so the stacks
    that fed them are unread in the next round).
"""
import numpy as np

from .. import dtypes
from .ir import Node, Program, Value, from_graph
from .dce import dce
from .util import Builder, clean, known_scalar, literal_attrs, reinfer
from ..errors import InvalidArgumentError
from ..func_graph import Func
from ..ops.control_flow_ops import _merge_dims
from ..ops.registry import REGISTRY
from .prune import prune
from .growing_vars import appended_vars, if_pops, popped_vars, row_stored_vars


class _Dynamic(Exception):
    """The region cannot be specialised to static shapes."""


def _stub(shape, dtype):
    return np.broadcast_to(np.zeros((), dtype.np), tuple(shape))


class _Ragged:
    """The stand-in for a loop body's input that is one row of a ragged stack (a
    nested loop's per-iteration stack, as long as that iteration's trip count):
    only its shape, ``(None, ..., None, *static)``, is read."""

    def __init__(self, shape):
        self.shape = tuple(shape)


def ragged_depth(shape):
    """How many leading dims of ``shape`` are run-time lengths of stacks nested in
    stacks, ``(None,) * depth + static``: 1 for a loop's stack of static rows, 2 for a
    stack of such stacks (a loop nested in a loop saves one per outer iteration: the
    draws three loops deep), ...; 0 for any other shape."""
    if shape is None:
        return 0
    depth = 0
    while depth < len(shape) and shape[depth] is None:
        depth += 1
    return depth if None not in shape[depth:] else 0


_PASS_THROUGH = ("StopGradient", "Identity", "ZerosLike")


def _only_sliced_by_loops(t):
    """Whether every read of tensor ``t`` (through StopGradient / Identity / ZerosLike:
    a gradient's zeros for it, in the branch that does not run the loop, which nothing
    reads once the regions pass drops the If outputs nobody reads; and through the
    branches of an If capturing it) is as a sliced input of a While op: the only reader the code generator gives a stack of run-time length
    (codegen/lower_control.py; any other reader left makes it decline the kernel)."""
    for op in t.consumers():
        if op.type in _PASS_THROUGH:
            if not _only_sliced_by_loops(op.outputs[0]):
                return False
            continue
        if op.type == "If":   # a capture: read by its branches' loops (at any depth)
            branches = [op.attrs["then_branch"], op.attrs["else_branch"]]
            if not all(isinstance(f, Func) for f in branches):
                return False
            for k, x in enumerate(op.inputs):
                if x is t and (k == 0 or not all(_only_sliced_by_loops(f.inputs[k - 1]) for f in branches)):
                    return False
            continue
        if op.type != "While":
            return False
        a = op.attrs
        first = a["n_vars"] + a["n_caps"]
        if not all(first <= k < first + a["n_xs"] for k, x in enumerate(op.inputs) if x is t):
            return False
    return True


def _func_deps(func):
    """Per output of graph Func ``func``: the input positions it depends on (through
    every op's inputs and control inputs)."""
    pos = {id(ph.op): k for k, ph in enumerate(func.inputs)}
    deps = {}
    for op in prune(list(func.outputs), set()):   # (creation order: topological)
        d = {pos[id(op)]} if id(op) in pos else set()
        for t in op.inputs:
            d |= deps[id(t.op)]
        for c in op.control_inputs:
            d |= deps[id(c)]
        deps[id(op)] = d
    return [deps[id(t.op)] for t in func.outputs]


def _draws_or_state(func):
    """Whether graph Func ``func`` (or a region nested in it) draws random numbers or
    reads / writes state."""
    for op in prune(list(func.outputs) + list(func.side_effects), set()):
        opdef = REGISTRY[op.type]
        if opdef.kind in ("random", "state") or opdef.stateful:
            return True
        if opdef.kind == "control" and any(isinstance(op.attrs.get(k), Func) and _draws_or_state(op.attrs[k])
                                           for k in ("then_branch", "else_branch", "cond", "body")):
            return True
    return False


def needed_loop_vars(op, is_read):
    """The loop variables of While ``op`` (its body a graph Func) that what the run reads
    of it needs: those whose output is read, and those a read output, a read stack or
    the condition depends on (transitively through the body); every one when the loop
    has side effects. A variable no one needs (a second derivative's gradient with
    respect to a constant the loop captures, say) may be carried unchanged: what only
    it reads (a stack of the buffers of every iteration of the loop that fed it) is
    then not read. is_read(tensor): whether the run reads that output."""
    a = op.attrs
    nv = a["n_vars"]
    body, cond = a["body"], a["cond"]
    funcs = [f for f in (body, cond) if f is not None]
    if (not all(isinstance(f, Func) for f in funcs) or any(f.side_effects for f in funcs)
            or a.get("var_writes") or any(_draws_or_state(f) for f in funcs)):
        return set(range(nv))   # (a draw skipped would renumber the draws after it: ops/random_ops.py)
    deps = _func_deps(body)
    need = {k for k in range(nv) if is_read(op.outputs[k])}
    for j in range(a["n_ys"]):
        if is_read(op.outputs[nv + 1 + j]):
            need |= {k for k in deps[nv + j] if k < nv}
    if cond is not None:
        need |= {k for k in _func_deps(cond)[0] if k < nv}
    todo = list(need)
    while todo:
        for d in deps[todo.pop()]:
            if d < nv and d not in need:
                need.add(d)
                todo.append(d)
    return need


def live_inputs(op, is_read):
    """The inputs of ``op`` what the run reads of it needs (positions): every one, but for
    a While whose variables are not all needed (``needed_loop_vars``): the variables and
    the captures and sliced inputs a needed output or the condition depends on."""
    if op.type != "While" or not isinstance(op.attrs["body"], Func):
        return range(len(op.inputs))
    a = op.attrs
    nv = a["n_vars"]
    need = needed_loop_vars(op, is_read)
    if len(need) == nv:
        return range(len(op.inputs))
    deps = _func_deps(op.attrs["body"])
    live = set(range(nv))
    for k in need:
        live |= deps[k]
    for j in range(a["n_ys"]):
        if is_read(op.outputs[nv + 1 + j]):
            live |= deps[nv + j]
    if a["cond"] is not None:
        live |= _func_deps(a["cond"])[0]
    return sorted(k for k in live if k < len(op.inputs))


def live_reads(ops, elements):
    """ids of the tensors that what the run fetches (``elements``) reads, ops (creation
    order, pruned for them) visited in reverse: an input of an op counts as read, but
    for a While, only those its needed loop variables read (``live_inputs``)."""
    live = {id(e) for e in elements}
    for op in reversed(ops):
        live.update(id(op.inputs[k]) for k in live_inputs(op, lambda t: id(t) in live))
    return live


# the body inputs (ids) of loop variables an If in the body pops (growing_vars.if_pops),
# while that body is specialised: such an If specialises each branch with its own rows
_if_popped = set()


def sub_program(func, shapes, ragged=(), popped=(), rows=()):
    """The Program of a graph Func for concrete input shapes. ``ragged``: the
    input positions that may be rows of a ragged stack, ``(None, ..., *static)``,
    when only loops nested in ``func`` slice them; ``popped``: the loop variables
    of run-time rows an If in ``func`` pops (growing_vars.popped_vars); ``rows``:
    those it stores rows of in place (growing_vars.row_stored_vars)."""
    if not isinstance(func, Func):
        raise _Dynamic("region already specialised")
    ops = prune(list(func.outputs) + list(func.side_effects), {id(ph) for ph in func.inputs})
    read = {id(t) for op in ops for t in op.inputs} | {id(t) for t in func.outputs}
    for k, s in enumerate(shapes):
        if (s is None or any(d is None for d in s)) and id(func.inputs[k]) in read:   # (one nothing reads: any shape)
            if not (k in popped or k in rows or k in ragged and ragged_depth(s) and
                    _only_sliced_by_loops(func.inputs[k])):
                raise _Dynamic(f"an input of the region has no static shape (input {k}: {None if s is None else list(s)})")
    if any(op.type not in ("PrintV2", "Assert", "If", "While") for op in func.side_effects):
        raise _Dynamic("a region with a side effect other than tf.print / tf.Assert")
    fed = [(ph, _Ragged(s or ()) if s is None or None in s else _stub(s, ph.dtype)) for ph, s in zip(func.inputs, shapes)]

    def no_vars(attrs):
        raise _Dynamic("a variable inside a region")
    marked = {id(func.inputs[k]) for k in popped} - _if_popped
    _if_popped.update(marked)
    try:
        prog = from_graph(ops, list(func.outputs), fed, no_vars, in_region=True)
    finally:
        _if_popped.difference_update(marked)
    n_in = len(func.inputs)
    nodes = []
    for n in prog.nodes:
        if n.op == "Arg" and n.attrs["arg"] >= n_in:
            a = prog.args[n.attrs["arg"]]
            if a.kind != "const":
                raise _Dynamic(f"a {a.kind} value inside a region")
            n = Node("Literal", (), literal_attrs(a.value), n.outputs, n.name)
        nodes.append(n)
    return Program(nodes, prog.args[:n_in], prog.outputs, prog.var_writes)   # var_writes: its prints


def _out_shapes(prog):
    return [prog.shape(v) for v in prog.outputs]


def region_node(op, in_shapes, in_dtypes, is_read=lambda t: True):
    """(attrs, output specs) of an If / While node for concrete input shapes;
    ``is_read(tensor)``: whether the run reads that output."""
    a = op.attrs
    try:
        if op.type == "If":
            caps = in_shapes[1:]
            ragged = range(len(caps))   # (a capture: a stack its branches' loops slice, see sub_program)
            # a loop variable the branches pop rows of: each branch sees the rows it pops
            pops = [at for at in (if_pops(op, t, len(s)) for t, s in zip(op.inputs[1:], caps)
                                  if id(t) in _if_popped and s and s[0] is None) if at is not None]
            then_caps, else_caps = list(caps), list(caps)
            for p, _, r_then, r_else in pops:
                then_caps[p], else_caps[p] = (r_then,) + tuple(caps[p][1:]), (r_else,) + tuple(caps[p][1:])
            then, els = sub_program(a["then_branch"], then_caps, ragged), sub_program(a["else_branch"], else_caps, ragged)
            st, se = _out_shapes(then), _out_shapes(els)
            if any(x is None or y is None or len(x) != len(y) for x, y in zip(st, se)):
                raise _Dynamic("the branches' outputs differ in rank")
            # branches of different shapes: the output's differing dims are known when it has
            # run (lower_control.lower_if hands the taken branch's shape to the host)
            attrs = dict(a, then_branch=then, else_branch=els, **({"pop_caps": tuple(pops)} if pops else {}),
                         out_specs=[(_merge_dims(x, y), t.dtype) for x, y, t in zip(st, se, op.outputs)])
        else:
            n, c, nx = a["n_vars"], a["n_caps"], a["n_xs"]
            need = needed_loop_vars(op, is_read)
            if len(need) < n:   # carried unchanged: what only they read is not read (the regions pass drops them)
                a = dict(a, body=a["body"].with_outputs(
                    [a["body"].inputs[k] if k < n and k not in need else t for k, t in enumerate(a["body"].outputs)]))
            vs, cs = in_shapes[:n], in_shapes[n:n + c]
            xs = [None if s is None or not s else s[1:] for s in in_shapes[n + c:n + c + nx]]
            unread = [j for j in range(a["n_ys"]) if not is_read(op.outputs[n + 1 + j])]
            pop = popped_vars(a, vs, unread)   # shrinking by rows: specialised with the rows an iteration pops
            # (or, when an If pops them, with the variable whole: its branches see their rows)
            if_popped = [k for k, rows in pop.items() if not isinstance(rows, int)]
            vs = [(pop[k],) + tuple(s[1:]) if k in pop and k not in if_popped else s for k, s in enumerate(vs)]
            # growing variables entering with run-time rows (the gradient of a popped one, in a
            # second derivative): specialised empty from the start
            run_rows = [k for k, s in enumerate(vs) if k not in pop and s and s[0] is None and None not in s[1:]]
            # and variables of run-time rows that keep them, written in place (a TensorArray's buffer)
            stored = [k for k in row_stored_vars(a, vs, unread) if k in run_rows]
            run_rows = [k for k in run_rows if k not in stored]
            entering = (appended_vars(a, run_rows, vs, unread) or []) if run_rows else []
            vs = [(0,) + tuple(s[1:]) if k in entering else s for k, s in enumerate(vs)]
            ragged = range(n + c, n + c + nx)   # (a sliced input: a nested loop's saved stacks)
            body = sub_program(a["body"], vs + cs + xs, ragged, if_popped, stored)
            outs = _out_shapes(body)
            if any(tuple(outs[k]) != (0,) + tuple(vs[k][1:]) for k in pop):
                raise _Dynamic("a loop variable changes shape")
            changed = [k for k in range(n) if k not in pop and tuple(outs[k]) != tuple(vs[k])]
            grow = appended_vars(a, changed, vs, unread) if changed else []
            if grow is None:
                raise _Dynamic("a loop variable changes shape")
            grow = sorted(set(grow) | set(entering))
            if grow:   # specialised with the growing variables empty: their outputs are the rows appended
                vs = [(0,) + tuple(s[1:]) if k in grow else s for k, s in enumerate(vs)]
                body = sub_program(a["body"], vs + cs + xs, ragged, if_popped, stored)
                outs = _out_shapes(body)
                if any(tuple(outs[k][1:]) != tuple(vs[k][1:]) if k in grow else tuple(outs[k]) != tuple(vs[k])
                       for k in range(n) if k not in pop):
                    raise _Dynamic("a loop variable changes shape")
            cond = sub_program(a["cond"], vs + cs, (), if_popped, stored) if a["cond"] is not None else None
            count = a.get("static_count")
            if a["limit"] == "count" and count is None:
                # a counted loop runs once per row of its sliced inputs (checked at run time)
                count = next((s[0] for s in in_shapes[n + c:n + c + nx] if s and s[0] is not None), None)
            attrs = dict(a, body=body, cond=cond, static_count=count, grow_vars=tuple(grow),
                         **({"pop_vars": tuple(sorted(pop))} if pop else {}),
                         **({"rows_vars": tuple(stored)} if stored else {}),
                         var_specs=[((None,) + tuple(s[1:]) if k in grow or k in pop else tuple(s), dt)
                                    for k, (s, dt) in enumerate(zip(vs, in_dtypes[:n]))],
                         y_specs=[(tuple(s), body.dtype(v)) for s, v in zip(outs[n:], body.outputs[n:])])
    except _Dynamic as e:
        attrs = dict(op.attrs, dynamic=str(e))   # (why: explain reports it, codegen/lower_control._origin)
    try:
        specs = REGISTRY[op.type].infer(in_shapes, in_dtypes, attrs)
    except (ValueError, TypeError) as e:
        raise InvalidArgumentError(None, op, f"{e} [[node {op.name}]]") from None
    return attrs, tuple((None if s is None else tuple(s), d) for s, d in specs)


# ---------------------------------------------------------------- the pass
def _inline(b, sub, inputs):
    """Emits sub-Program ``sub`` into Builder ``b`` on ``inputs``; its outputs."""
    m = {}
    for j, sn in enumerate(sub.nodes):
        if sn.op == "Arg":
            m[(j, 0)] = inputs[sn.attrs["arg"]]
            continue
        k = b.emit(sn.op, [m[(v.node, v.index)] for v in sn.inputs], dict(sn.attrs), sn.outputs, sn.name)
        for o in range(len(sn.outputs)):
            m[(j, o)] = Value(k, o)
    return [m[(v.node, v.index)] for v in sub.outputs]


def _optimised(sub, optimise):
    if sub is None or not isinstance(sub, Program):
        return sub
    if getattr(sub, "_optimised", False):
        return sub
    out = optimise(Program(sub.nodes, sub.args, sub.outputs, sub.var_writes))
    out.stats = []
    out._optimised = True
    return out


def _used(program):
    used = set()
    for n in program.nodes:
        used.update(n.inputs)
    used.update(v for v in program.outputs if v is not None)
    used.update(v for _, v in program.var_writes)
    return used


def _args_read(sub):
    read = set()
    for nd in sub.nodes:
        for v in nd.inputs:
            if sub.nodes[v.node].op == "Arg":
                read.add(sub.nodes[v.node].attrs["arg"])
    for v in sub.outputs:
        if sub.nodes[v.node].op == "Arg":
            read.add(sub.nodes[v.node].attrs["arg"])
    return read


def _keep_outputs(sub, keep):
    """sub returning only its outputs in ``keep`` (indices, in order)."""
    return Program(sub.nodes, sub.args, [sub.outputs[k] for k in keep], sub.var_writes)


def _keep_args(sub, keep):
    """sub with only the args in ``keep`` (old indices, in order), renumbered."""
    if sub is None:
        return None
    new_index = {old: i for i, old in enumerate(keep)}
    order = [i for i, nd in enumerate(sub.nodes) if nd.op != "Arg" or nd.attrs["arg"] in new_index]
    p = clean(sub, order)
    nodes = [Node("Arg", (), {"arg": new_index[nd.attrs["arg"]]}, nd.outputs, nd.name) if nd.op == "Arg" else nd
             for nd in p.nodes]
    out = Program(nodes, [sub.args[k] for k in keep], p.outputs, p.var_writes)
    out._optimised = getattr(sub, "_optimised", False)
    return out


def _drop_unread_inputs(n, attrs, stats):
    """(attrs, kept input positions) of a region node without the inputs
    none of its sub-Programs reads."""
    if n.op == "If":
        pops = attrs.get("pop_caps", ())
        # (a variable the If pops: kept even if no branch reads its rows, they still leave it)
        read = _args_read(attrs["then_branch"]) | _args_read(attrs["else_branch"]) | {p for p, *_ in pops}
        keep = [k for k in range(len(n.inputs) - 1) if k in read]
        if len(keep) == len(n.inputs) - 1:
            return attrs, list(range(len(n.inputs)))
        stats["dropped_inputs"] += len(n.inputs) - 1 - len(keep)
        if pops:
            attrs = dict(attrs, pop_caps=tuple((keep.index(p),) + tuple(r) for p, *r in pops))
        return (dict(attrs, then_branch=_keep_args(attrs["then_branch"], keep),
                     else_branch=_keep_args(attrs["else_branch"], keep)), [0] + [k + 1 for k in keep])
    nv, c, nx = attrs["n_vars"], attrs["n_caps"], attrs["n_xs"]
    read = _args_read(attrs["body"]) | (_args_read(attrs["cond"]) if attrs["cond"] is not None else set())
    caps = [k for k in range(nv, nv + c) if k in read]
    xs = [k for k in range(nv + c, nv + c + nx) if k in read]
    if len(caps) == c and len(xs) == nx:
        return attrs, list(range(len(n.inputs)))
    stats["dropped_inputs"] += c + nx - len(caps) - len(xs)
    keep = list(range(nv)) + caps + xs
    attrs = dict(attrs, body=_keep_args(attrs["body"], keep), cond=_keep_args(attrs["cond"], list(range(nv)) + caps),
                 n_caps=len(caps), n_xs=len(xs))
    return attrs, keep + list(range(nv + c + nx, len(n.inputs)))


def _arg_deps(sub):
    """Per output of sub, then per var_write (a print): the set of arg indices it depends on."""
    deps = []
    for nd in sub.nodes:
        if nd.op == "Arg":
            deps.append({nd.attrs["arg"]})
        else:
            d = set()
            for v in nd.inputs:
                d |= deps[v.node]
            deps.append(d)
    return [deps[v.node] for v in list(sub.outputs) + [w for _, w in sub.var_writes]]


def _needed_vars(body, cond, nv, keep_y, used_vars):
    """Loop variables that a used output, a kept stack or the condition depends on."""
    deps = _arg_deps(body)
    need = set(used_vars)
    for j in list(keep_y) + list(range(len(body.outputs) - nv, len(deps) - nv)):   # (and what it prints)
        need |= {k for k in deps[nv + j] if k < nv}
    if cond is not None:
        need |= {k for k in _arg_deps(cond)[0] if k < nv}
    todo = list(need)
    while todo:
        k = todo.pop()
        for d in deps[k]:
            if d < nv and d not in need:
                need.add(d)
                todo.append(d)
    return sorted(need)


def _grown_shape(b, entry, per_iteration, count, out_type):
    """The shape (of dtype ``out_type``) of a grown loop variable: entry + [per_iteration, 0, ...] * count."""
    step = np.zeros(len(entry), out_type.np)
    step[0] = per_iteration
    spec = (((len(entry),), out_type),)
    if out_type != dtypes.int32:   # (the trip count is the While's int32 output)
        count = Value(b.emit("Cast", (count,), {"DstT": out_type}, (((), out_type),)))
    grows = b.emit("Mul", (b.literal(step), count), {}, spec)
    return Value(b.emit("AddV2", (b.literal(np.array(entry, out_type.np)), Value(grows)), {}, spec))


def regions(program, optimise):
    """``optimise``: the pipeline that runs this pass, run on each branch and loop body."""
    if not any(n.op in ("If", "While") for n in program.nodes):
        return program
    b = Builder(program)
    used = _used(program)
    stats = {"inlined": 0, "dropped_outputs": 0, "dropped_stacks": 0, "dropped_vars": 0, "dropped_inputs": 0, "static_counts": 0,
             "grown_shapes": 0}
    grown = {}   # Value of a growing loop variable -> (its shape at entry, rows per iteration, the trip count)
    for i, n in enumerate(program.nodes):
        a = n.attrs
        if n.op == "Shape" and n.inputs[0] in grown:
            b.map[Value(i, 0)] = _grown_shape(b, *grown[n.inputs[0]], n.attrs["out_type"])
            stats["grown_shapes"] += 1
            continue
        if n.op == "If" and isinstance(a["then_branch"], Program):
            pred = known_scalar(b.nodes, program.args, b.get(n.inputs[0]))
            if (pred is not None and not a["then_branch"].var_writes and not a["else_branch"].var_writes
                    and not a.get("pop_caps")):   # (what pops a loop variable stays the If that pops it)
                outs = _inline(b, a["then_branch"] if bool(pred) else a["else_branch"],
                               [b.get(v) for v in n.inputs[1:]])
                for k, v in enumerate(outs):
                    b.map[Value(i, k)] = v
                stats["inlined"] += 1
                if any(None in s for s, _ in n.outputs):   # (what reads it gets the taken branch's shapes)
                    stats["inlined_unknown_shapes"] = stats.get("inlined_unknown_shapes", 0) + 1
                continue
            keep = [k for k in range(len(n.outputs)) if Value(i, k) in used]
            if not keep:
                continue   # (its prints and asserts, if any, are kept by var_writes, i.e. an output in used)
            then, els = a["then_branch"], a["else_branch"]
            if len(keep) < len(n.outputs):
                # outputs nothing reads (what a gradient saves, when only the forward is fetched):
                # gone from the branches too, so what computed them goes (a stack of unknown length)
                then, els = _keep_outputs(then, keep), _keep_outputs(els, keep)
                stats["dropped_outputs"] += len(n.outputs) - len(keep)
            attrs = dict(a, then_branch=_optimised(then, optimise), else_branch=_optimised(els, optimise),
                         out_specs=[a["out_specs"][k] for k in keep])
            if a.get("pop_caps"):   # (the loop reads what is left of the variable: that output is kept)
                attrs["pop_caps"] = tuple((p, keep.index(j), r1, r2) for p, j, r1, r2 in a["pop_caps"])
            outputs = tuple(n.outputs[k] for k in keep)
        elif n.op == "While" and isinstance(a["body"], Program):
            nv, ny = a["n_vars"], a["n_ys"]
            if a["limit"] == "count" and a.get("static_count") is None:
                count = known_scalar(b.nodes, program.args, b.get(n.inputs[-1]))
                if count is not None and int(count) >= 0:
                    # the trip count is known now: the stacks get static shapes
                    a = dict(a, static_count=int(count))
                    stats["static_counts"] += 1
            keep_y = [j for j in range(ny) if Value(i, nv + 1 + j) in used]
            body, cond = a["body"], a["cond"]
            keep_v = _needed_vars(body, cond, nv, keep_y, [k for k in range(nv) if Value(i, k) in used])
            if len(keep_y) < ny or len(keep_v) < nv:
                body = Program(body.nodes, body.args,
                               [body.outputs[k] for k in keep_v] + [body.outputs[nv + j] for j in keep_y],
                               body.var_writes)
                stats["dropped_stacks"] += ny - len(keep_y)
            n_in = len(n.inputs)
            inputs = list(range(n_in))
            if len(keep_v) < nv:
                # loop variables nothing needs (an accumulated gradient not fetched)
                stats["dropped_vars"] += nv - len(keep_v)
                rest = list(range(nv, len(body.args)))
                dropped = set(range(nv)) - set(keep_v)
                body = _keep_args(dce(body, dropped), keep_v + rest)
                if cond is not None:
                    cond = _keep_args(dce(cond, dropped), keep_v + list(range(nv, len(cond.args))))
                inputs = keep_v + list(range(nv, n_in))
            attrs = dict(a, body=_optimised(body, optimise), cond=_optimised(cond, optimise),
                         n_ys=len(keep_y), n_vars=len(keep_v),
                         grow_vars=tuple(keep_v.index(k) for k in a.get("grow_vars", ()) if k in keep_v),
                         **({"pop_vars": tuple(keep_v.index(k) for k in a["pop_vars"] if k in keep_v)}
                            if a.get("pop_vars") else {}),
                         **({"rows_vars": tuple(keep_v.index(k) for k in a["rows_vars"] if k in keep_v)}
                            if a.get("rows_vars") else {}),
                         y_specs=[a["y_specs"][j] for j in keep_y], var_specs=[a["var_specs"][k] for k in keep_v])
            keep = keep_v + [nv] + [nv + 1 + j for j in keep_y]
            outputs = tuple(n.outputs[k] for k in keep)
            n = Node(n.op, tuple(n.inputs[k] for k in inputs), n.attrs, n.outputs, n.name)
        else:
            b.copy(i)
            continue
        attrs, inputs = _drop_unread_inputs(n, attrs, stats)
        j = b.emit(n.op, [b.get(n.inputs[k]) for k in inputs], attrs, outputs, n.name)
        for new, old in enumerate(keep):
            b.map[Value(i, old)] = Value(j, new)
        if n.op == "While":
            for k in attrs.get("grow_vars", ()):
                body = attrs["body"]
                per_iteration = body.shape(body.outputs[k])[0]   # (None: as many as a cond's branch appends)
                if per_iteration is not None:
                    grown[Value(i, keep[k])] = (b.shape(b.get(n.inputs[k])), per_iteration, Value(j, attrs["n_vars"]))
    out = b.finish("regions", stats)
    return reinfer(out) if stats["static_counts"] or stats.get("inlined_unknown_shapes") else out
