"""The batching rule of ``While`` for the batched backward pass (batched_gradients.py).

A Hessian or jacobian through a ``tf.while_loop`` has loops in its gradient graph
(the reverse loop of the first gradient, and its own reverse loop) whose inputs
carry one cotangent row each. Without a rule the batched pass copies such a loop
per row (compile time grows faster than the row count) or loops over the rows
(each row re-runs the loop). This rule builds ONE While instead, as JAX's
``_while_loop_batching_rule`` does:

- batched loop variables carry ``[B] + shape``; an unbatched one stays unbatched
  unless the body makes its next value depend on a batched input: the batched set
  is grown to a fixed point over the body's data dependencies;
- the body is the batched body: replayed into a new body graph and rebuilt by the
  batched pass's own rules (``vectorize``), nested loops included;
- a condition that reads a batched value, or a batched ``maximum_iterations``, makes the
  trip count differ per row: while_batching_pred.py's rule then runs the loop while any
  row's predicate holds, each stopped row keeping its values. Where neither takes the
  loop (loop variables or inputs without static shapes, bodies with random or stateful
  ops or side effects), the rule returns None and the caller's fallbacks run.

Sliced inputs (``xs``, ``[T] + row``) and stacked outputs (``ys``) are time-major
inside the loop: a batched x enters as ``[T, B] + row`` and a batched y leaves as
``[T, B] + row``. In the batched pass every value has the batch first, so a stack
is handed on as its transpose, and the time-major stack is remembered
(``ctx.time_major``) for the next loop that slices it: with a trip count known
only at run time ``[B, T, ...]`` has its run-time dim second, which the compiler
cannot lay out (run-time rows are dim 0 only); the transpose is then never read
and DCE drops it. A per-row fallback reading such a stack gets its rows
(``ctx.rows``: ``stack[:, b]``, built only when one reads them) for the same reason.
"""
import functools

import numpy as np

from . import context
from .convert import convert_to_tensor
from .func_graph import Func, replay, trace
from .ops.control_flow_ops import union_captures
from .ops.registry import REGISTRY, apply_op, shape_only_input
from .shapes import static_dims


def plain(func):
    """Whether ``func`` (and every region nested in it) has no random, stateful or
    side-effecting op: one batched copy then computes what B copies would."""
    if func.side_effects:
        return False
    for op in func.graph.get_operations():
        opdef = REGISTRY.get(op.type)
        if opdef is None or opdef.stateful or opdef.kind in ("random", "state"):
            return False
        for v in op.attrs.values():
            if isinstance(v, Func) and not plain(v):
                return False
    return True


def reached(func, batched):
    """ids of ``func``'s tensors that depend (through values, not shapes only) on the
    inputs flagged in ``batched``; as the batched pass's own dependency: an op with
    one such input has all its outputs batched."""
    dep = {id(ph) for ph, f in zip(func.inputs, batched) if f}
    for op in func.graph.get_operations():   # (creation order: producers first)
        if any(id(t) in dep and not shape_only_input(op, j) for j, t in enumerate(op.inputs)):
            dep.update(id(o) for o in op.outputs)
    return dep


def _fixed_point(body, n, flags):
    """The body inputs' batched flags (vars + caps + xs) once every loop variable whose
    next value depends on a batched input is batched itself, and the reached set."""
    flags = list(flags)
    while True:
        dep = reached(body, flags)
        grown = [k for k in range(n) if not flags[k] and id(body.outputs[k]) in dep]
        if not grown:
            return flags, dep
        for k in grown:
            flags[k] = True


def row_seeds(phs, rows, flags, graph):
    """Per input, the tensor the replayed graph reads: the placeholder where unbatched,
    else a zero Fill of the row shape (a stand-in, rebuilt batched by ``vectorize``;
    a shape-only reader sees the row's shape, as per row)."""
    out = []
    for ph, row, f in zip(phs, rows, flags):
        if f:
            zero = convert_to_tensor(np.zeros((), ph.dtype.np), graph=graph)
            ph = apply_op("Fill", [zero], {"dims": tuple(static_dims(row.shape))}, name="row_seed")
        out.append(ph)
    return out


def rebuilt(ctx, func, flags, ins, vectorize):
    """``func`` replayed in the default graph on ``ins`` (``[B] + shape`` where ``flags``,
    the input itself elsewhere) and rebuilt batched by ``vectorize``: all its outputs, each
    ``[B] + shape`` (one that does not depend on a batched input comes back broadcast)."""
    graph = context.get_default_graph()
    stand = row_seeds(func.inputs, func.inputs, flags, graph)
    seeds = [s if f else z for s, z, f in zip(stand, ins, flags)]
    start = len(graph._ops)
    outs = replay(func, seeds)
    return vectorize(ctx.nested(graph), graph._ops[start:], [s for s, f in zip(seeds, flags) if f],
                     [z for z, f in zip(ins, flags) if f], outs)


def batched_func(ctx, func, flags, batched_out, vectorize, name):
    """``func`` rebuilt on inputs batched where ``flags`` (``[B] + shape``): a traced
    graph, its input placeholders and its outputs (batched where ``batched_out``)."""
    B = ctx.B
    specs = [(((B,) + tuple(ph.shape.dims)) if f else ph.shape.dims, ph.dtype) for ph, f in zip(func.inputs, flags)]

    def build(*phs):
        graph = context.get_default_graph()
        seeds = row_seeds(phs, func.inputs, flags, graph)
        start = len(graph._ops)
        outs = replay(func, seeds)
        want = [o for o, f in zip(outs, batched_out) if f]
        sub = ctx.nested(graph)
        got = iter(vectorize(sub, graph._ops[start:], [s for s, f in zip(seeds, flags) if f],
                             [p for p, f in zip(phs, flags) if f], want))
        return [next(got) if f else o for o, f in zip(outs, batched_out)]
    return trace(name, build, specs)


def batch_while(ctx, op, ins, flags, vectorize, per_row_trips):
    """The batching rule (see the module docstring): the batched outputs of ``op``, or
    None where the rule does not apply. ``ins[j]`` is ``[B] + shape`` where ``flags[j]``.
    ``per_row_trips(ctx, op, ins, flags, vectorize)``: the rule for a trip count that
    differs per row (while_batching_pred.py)."""
    a = op.attrs
    n, c, nx = a["n_vars"], a["n_caps"], a["n_xs"]
    B = ctx.B
    body, cond = a["body"], a["cond"]
    if "var_writes" in a or not plain(body) or (cond is not None and not plain(cond)):
        return None
    if any(static_dims(ph.shape) is None for ph in body.inputs) or any(d is None for d, _ in a["y_specs"]):
        return None   # (a growing / popped variable, rows of a run-time count; a y of unknown rank)
    if a["limit"] is not None and flags[n + c + nx]:
        return per_row_trips(ctx, op, ins, flags, vectorize)   # a batched limit
    bflags, dep = _fixed_point(body, n, flags[:n + c + nx])
    if cond is not None and id(cond.outputs[0]) in reached(cond, bflags[:n + c]):
        return per_row_trips(ctx, op, ins, flags, vectorize)   # the predicate differs per row
    # a batched variable stays batched even where its next value does not depend on a batched
    # input (the body then broadcasts it): its spec is [B] + shape in every iteration
    out_flags = list(bflags[:n]) + [id(t) in dep for t in body.outputs[n:]]
    # (built in the default graph: the batched pass's, or a branch of its one-hot / dense cond)
    fgb, phb, new_out = batched_func(ctx, body, bflags, out_flags, vectorize, "body")
    if cond is not None:
        fgc, phc, (pred,) = batched_func(ctx, cond, bflags[:n + c], [False], vectorize, "cond")
    graphs = [fgb] + ([fgc] if cond is not None else [])
    extra = union_captures(graphs)
    new_body = Func(fgb, list(phb[:n + c]) + [fgb.capture(t) for t in extra] + list(phb[n + c:]), new_out)
    new_cond = None if cond is None else \
        Func(fgc, list(phc) + [fgc.capture(t) for t in extra], [pred])
    new_ins = []
    for j, (t, f) in enumerate(zip(ins[:n + c], flags[:n + c])):
        new_ins.append(ctx.batched_unbatched(t) if bflags[j] and not f else t)
    new_ins += extra
    for t, f in zip(ins[n + c:n + c + nx], flags[n + c:n + c + nx]):
        if not f:
            new_ins.append(t)
            continue
        tm = ctx.time_major.get(id(t))
        if tm is None and static_dims(t.shape) is None:
            rows = ctx.rows_of(t)   # (a per-row op's rows, each [T] + row: stacked in dim 1)
            if rows is None:
                return None
            tm = apply_op("Pack", list(rows), {"axis": 1})
        if tm is None:
            r = t.shape.rank
            tm = apply_op("Transpose", [t], {"perm": (1, 0) + tuple(range(2, r))})
        new_ins.append(tm)
    new_ins += list(ins[n + c + nx:])
    var_specs = [(((B,) + tuple(d)) if bflags[k] else d, dt) for k, (d, dt) in enumerate(a["var_specs"])]
    y_specs = [(((B,) + tuple(d)) if out_flags[n + j] and d is not None else d, dt)
               for j, (d, dt) in enumerate(a["y_specs"])]
    attrs = dict(a, body=new_body, cond=new_cond, n_caps=c + len(extra), var_specs=var_specs, y_specs=y_specs)
    res = apply_op("While", new_ins, attrs, name=op.name.rsplit("/", 1)[-1] + "_batched")
    res = list(res) if isinstance(res, tuple) else [res]
    return _batch_first(ctx, op, res, out_flags[:n], out_flags[n:])


def _rows_of_time_major(stack, B):
    """Row b of a batched stack ``[T, B] + row`` is ``stack[:, b]``."""
    return [apply_op("StridedSlice", [stack], {"spec": (("slice", None, None, None), ("int", b))}) for b in range(B)]


def _batch_first(ctx, op, res, var_flags, y_flags):
    """The new While's outputs as the batched pass's values (batch dim first)."""
    n = len(var_flags)
    out = [r if f else ctx.batched_unbatched(r) for r, f in zip(res[:n], var_flags)]
    out.append(ctx.batched_unbatched(res[n]))   # (the trip count: the same for every row)
    for y, stack, f in zip(op.outputs[n + 1:], res[n + 1:], y_flags):
        r = stack.shape.rank
        if f:
            tm = stack
            first = apply_op("Transpose", [stack], {"perm": (1, 0) + tuple(range(2, r))})
            rows = functools.partial(_rows_of_time_major, stack, ctx.B)   # (built if a per-row op reads them)
        else:
            tm = apply_op("Tile", [apply_op("ExpandDims", [stack], {"axis": 1})],
                          {"multiples": (1, ctx.B) + (1,) * (r - 1)})
            first = apply_op("Tile", [apply_op("ExpandDims", [stack], {"axis": 0})],
                             {"multiples": (ctx.B,) + (1,) * r})
            rows = [stack] * ctx.B
        ctx.time_major[id(first)] = tm
        ctx.rows[id(first)] = rows
        out.append(first)
    return out
