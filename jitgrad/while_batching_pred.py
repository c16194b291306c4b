"""The While batching rule where the trip count differs per row: a condition that reads a
batched value (a custom gradient iterating on its cotangent until it converges), or a
batched ``maximum_iterations``. As JAX's ``_while_loop_batching_rule`` for a batched
predicate, ONE loop runs while ANY row's predicate holds:

- every loop variable is batched (a row that stopped keeps its values while others run);
- two loop variables are added: per row, its trip count (the op's trip-count output,
  ``[B]``) and whether it still runs (its predicate, AND ``count < limit`` for a batched
  limit, which the loop then drops); the new condition is ``any(running)``;
- an iteration computes the batched body for every row and takes, per row, the new values
  where the row runs, the old ones where it stopped (``_masked_step``). So the body runs
  on states the per-row loop never runs it on: only bodies that cannot fail, hang or act
  there are taken (cond_batching.total), and the step's gradient selects per row between
  the body's vector-Jacobian product and the identity (cond_batching.selected), never
  multiplying the body's inf / NaN derivative at a stopped row's state by zero.

Differentiating the batched loop (a third derivative) is then the ordinary While gradient
of a loop of ``max(count)`` iterations whose steps are identities for stopped rows.
Stacked per-iteration outputs (``ys``, sliced inputs, a ``count`` limit: a reverse loop
whose trip count is per row) would be ragged across rows: the rule returns None there,
as for anything while_batching.batch_while does not take.
"""
import numpy as np

from . import context, dtypes
from .cond_batching import inexact, select, selected, total
from .convert import convert_to_tensor
from .func_graph import Func, trace
from .gradients import gradients
from .ops.control_flow_ops import union_captures
from .ops.registry import apply_op
from .while_batching import rebuilt


def batch_while_pred(ctx, op, ins, flags, vectorize):
    """The batched outputs of While ``op`` whose trip count is per row, or None.
    ``ins[j]`` is ``[B] + shape`` where ``flags[j]``."""
    a = op.attrs
    n, c, nx = a["n_vars"], a["n_caps"], a["n_xs"]
    body, cond = a["body"], a["cond"]
    if nx or a["n_ys"] or a["limit"] == "count" or not total(body):
        return None
    if a["limit"] is not None and cond is not None and not total(cond):
        # (the loop evaluates the condition after a row's last step, also where the row
        # stopped by its limit, so where the per-row loop does not: it must not fail there)
        return None
    B = ctx.B
    lim_batched = a["limit"] is not None and flags[n + c + nx]
    caps, cflags = list(ins[n:n + c]), list(flags[n:n + c])
    lim = ins[n + c + nx] if a["limit"] is not None else None
    if lim_batched:
        lim = apply_op("Reshape", [lim], {"shape": (B,)})
    vars0 = [t if f else ctx.batched_unbatched(t) for t, f in zip(ins[:n], flags[:n])]
    i32 = dtypes.int32

    def running(vs, cs, count):
        """[B] bool: each row's predicate at state ``vs`` (and its limit, when batched)."""
        if cond is not None:
            (p,) = rebuilt(ctx, cond, [True] * n + cflags, list(vs) + list(cs), vectorize)
        else:
            p = apply_op("Fill", [convert_to_tensor(True, graph=context.get_default_graph())], {"dims": (B,)})
        if lim_batched:
            below = apply_op("Less", [apply_op("Cast", [count], {"DstT": lim.dtype}), lim])
            p = apply_op("LogicalAnd", [p, below])
        return p

    def step(zs, zflags):
        """The body's new variables, batched, on ``zs`` (variables + captures)."""
        return rebuilt(ctx, body, [True] * n + zflags, zs, vectorize)[:n]

    var_specs = [((B,) + tuple(d), dt) for d, dt in a["var_specs"][:n]] + [((B,), i32), ((B,), dtypes.bool_)]
    cap_specs = [(((B,) if f else ()) + tuple(ph.shape.dims), ph.dtype) for ph, f in zip(body.inputs[n:n + c], cflags)]

    def body_fn(*phs):
        vs, count, run, cs = phs[:n], phs[n], phs[n + 1], phs[n + 2:]
        new = _masked_step(ctx, run, list(vs), list(cs), cflags, step)
        count = apply_op("AddV2", [count, apply_op("Cast", [run], {"DstT": i32})])
        run = apply_op("LogicalAnd", [run, running(new, cs, count)])
        return list(new) + [count, run]

    def cond_fn(*phs):
        return apply_op("Any", [phs[n + 1]], {"axis": None, "keepdims": False})

    fgb, phb, new_out = trace("body", body_fn, var_specs + cap_specs)
    fgc, phc, pred = trace("cond", cond_fn, var_specs + cap_specs)
    extra = union_captures([fgb, fgc])
    new_body = Func(fgb, list(phb) + [fgb.capture(t) for t in extra], new_out)
    new_cond = Func(fgc, list(phc) + [fgc.capture(t) for t in extra], [pred])
    # (in the default graph: the batched pass's, or a branch of its one-hot / dense cond)
    zero = convert_to_tensor(np.zeros((B,), np.int32), graph=context.get_default_graph())
    run0 = running(vars0, caps, zero)
    new_ins = vars0 + [zero, run0] + caps + extra + ([lim] if a["limit"] is not None and not lim_batched else [])
    attrs = dict(a, body=new_body, cond=new_cond, n_vars=n + 2, n_caps=c + len(extra), var_specs=var_specs,
                 limit=None if lim_batched else a["limit"], static_count=None)
    res = apply_op("While", new_ins, attrs, name=op.name.rsplit("/", 1)[-1] + "_batched")
    return list(res[:n]) + [res[n]]   # (the variables, then each row's trip count)


def _masked_step(ctx, run, vs, cs, cflags, step):
    """Per row b: ``step(vs + cs)[k][b]`` where ``run[b]``, else ``vs[k][b]``. Its gradient
    is cond_batching.selected's (per row: the step's vector-Jacobian product where the row
    ran, the identity where it stopped) over the captures broadcast to ``[B]`` where they
    are not (each row's gradient selected before the rows are summed), built only when
    differentiated: the loop itself reads the captures unbatched."""
    n = len(vs)
    outs = [select(run, t, v) for t, v in zip(step(vs + cs, cflags), vs)]

    def grad_of_op(op, *grads):
        # (the tensors from ``op``, not this call: a replayed copy differentiates its own)
        run, vs, cs = op.inputs[n], list(op.inputs[n + 1:2 * n + 1]), list(op.inputs[2 * n + 1:])
        wide = [not f and inexact(t.dtype) for t, f in zip(cs, cflags)]
        cs_b = [ctx.batched_unbatched(t) if w else t for t, w in zip(cs, wide)]
        zflags = [f or w for f, w in zip(cflags, wide)]
        xs = vs + cs_b
        got = selected(run, [lambda zs: step(zs, zflags), lambda zs: list(zs[:n])], xs)
        pairs = [(o, g if g is not None else apply_op("ZerosLike", [o])) for o, g in zip(got, grads[:n])
                 if o.dtype.is_floating or o.dtype.is_complex]
        fl = [k for k, x in enumerate(xs) if x.dtype.is_floating or x.dtype.is_complex]
        res = [None] * len(xs)
        if pairs and fl:
            gs = gradients([o for o, _ in pairs], [xs[k] for k in fl], grad_ys=[g for _, g in pairs])
            for k, g in zip(fl, gs):
                res[k] = g
        for j, w in enumerate(wide):
            if w and res[n + j] is not None:   # (the rows' gradients of an unbatched capture, summed)
                res[n + j] = apply_op("Sum", [res[n + j]], {"axis": (0,), "keepdims": False})
        return [None] * (n + 1) + res

    res = apply_op("IdentityN", outs + [run] + vs + cs, {"_grad_of_op": grad_of_op}, name="While_masked")
    return list(res[:n]) if isinstance(res, tuple) else [res]
