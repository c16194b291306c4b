"""The batching rule of ``If`` (tf.cond / tf.case / tf.switch_case) for the batched
backward pass (batched_gradients.py), as JAX's ``_cond_batching_rule``.

A Hessian or jacobian through a cond has If ops in its gradient graph (the first
gradient's ``If_grad``, and its own gradient of that) whose inputs carry one cotangent
row each. Without a rule the batched pass builds one If per row (B copies of both
branches in the kernel, also inside a batched While body). This rule builds one:

- predicate unbatched (the usual case: it is a forward value, the same for every row):
  ONE If whose branches are the batched branches (replayed and rebuilt by the batched
  pass's own rules, ``vectorize``, as while_batching.py does for a loop body). An output
  batched in one branch is batched in both (the other broadcasts its value to [B, ...]).
- predicate batched (``[B]``: it depends on a cotangent, e.g. a custom gradient that
  clips its upstream gradient with a cond): both branches run batched and each row takes
  its branch's value with a select. Only for branches that cannot fail or act when their
  row does not take them (``total``: static shapes, no region / gather / integer op
  that could raise, loop forever or write), and the result's own gradient selects per
  row between the two branches' gradients (``selected``), never multiplying an untaken
  branch's inf / NaN derivative by zero: the values (NaN patterns included) of the
  per-row Ifs, for the result and its gradient.

Anything else (variable writes, side effects, random ops, values without static shapes:
TensorArrays, growing rows) returns None, and the per-row fallback runs.
"""
import functools

from .func_graph import Func
from .gradients import gradients
from .ops.control_flow_ops import union_captures
from .ops.registry import REGISTRY, apply_op
from .shapes import static_dims
from .while_batching import batched_func, plain, reached, rebuilt


def batch_if(ctx, op, ins, flags, vectorize):
    """The batched outputs of If ``op`` (see the module docstring), or None where the rule
    does not apply. ``ins[j]`` is ``[B] + shape`` where ``flags[j]``."""
    a = op.attrs
    branches = (a["then_branch"], a["else_branch"])
    if "var_writes" in a or a.get("pop_caps") or not all(plain(f) for f in branches):
        return None
    if any(static_dims(ph.shape) is None for f in branches for ph in f.inputs) or \
            any(d is None or None in d for d, _ in a["out_specs"]):
        return None   # (TensorArray rows, growing / popped rows, branch-shaped outputs)
    if flags[0]:
        return _batch_by_select(ctx, op, ins, flags, vectorize)
    bflags = list(flags[1:])
    deps = [reached(f, bflags) for f in branches]
    out_flags = [any(id(f.outputs[k]) in dep for f, dep in zip(branches, deps)) for k in range(len(op.outputs))]
    built = [batched_func(ctx, f, bflags, out_flags, vectorize, name)
             for f, name in zip(branches, ("then_batched", "else_batched"))]
    extra = union_captures([fg for fg, _, _ in built])
    # both branches take the same inputs: the batched ones, then what either rebuilt branch captured
    funcs = [Func(fg, list(phs) + [fg.capture(t) for t in extra], outs) for fg, phs, outs in built]
    specs = [(((ctx.B,) + tuple(d)) if f else d, dt) for (d, dt), f in zip(a["out_specs"], out_flags)]
    res = apply_op("If", [ins[0]] + list(ins[1:]) + extra,
                   dict(a, then_branch=funcs[0], else_branch=funcs[1], out_specs=specs),
                   name=op.name.rsplit("/", 1)[-1] + "_batched")
    res = list(res) if isinstance(res, tuple) else [res]
    return [r if f else ctx.batched_unbatched(r) for r, f in zip(res, out_flags)]


# ---------------------------------------------------------------- per-row predicate
# Ops that, on inputs of static shapes, compute a value and nothing else: running them for
# a row whose predicate does not take their branch cannot fail, hang or act (a gather could
# index out of range, an integer division by zero raise, a loop not end).
_TOTAL = frozenset((
    "Const", "Placeholder", "Identity", "IdentityN", "StopGradient", "ZerosLike", "OnesLike", "Fill",
    "BroadcastTo", "Sum", "Mean", "Max", "Min", "Prod", "SumToShape", "Unreduce", "BroadcastToShapeOf",
    "Reshape", "ReshapeLike", "ExpandDims", "Squeeze", "Transpose", "MatMul", "BatchMatMulV2", "AddN",
    "ConcatV2", "Pack", "Unpack", "Tile", "TileGrad", "StridedSlice", "StridedSliceGrad", "SplitToShapesOf",
))


def inexact(dtype):
    return dtype.is_floating or dtype.is_complex or dtype.is_bool


# Pointwise ops that cannot raise on integers either (unlike FloorDiv / FloorMod, an integer
# Pow's negative exponent, a ListCheck): a loop counter's ``i + 1``, its ``i < n``.
_INT_TOTAL = frozenset((
    "AddV2", "AddN", "Sub", "Mul", "Neg", "Abs", "Sign", "Square", "Maximum", "Minimum", "Cast", "Identity",
    "StopGradient", "ZerosLike", "OnesLike", "SelectV2", "Equal", "NotEqual", "Less", "LessEqual", "Greater",
    "GreaterEqual", "LogicalAnd", "LogicalOr", "LogicalNot",
))


def total(func):
    """Whether every op of ``func`` is total (``_TOTAL``, pointwise on floats / bools, or
    pointwise and in ``_INT_TOTAL``: no integer division) with static shapes, and ``func``
    has no side effects."""
    if func.side_effects:
        return False
    for op in func.graph.get_operations():
        opdef = REGISTRY.get(op.type)
        if opdef is None or opdef.stateful:
            return False
        if op.type not in _TOTAL and op.type not in _INT_TOTAL and \
                not (opdef.pointwise and all(inexact(t.dtype) for t in list(op.inputs) + list(op.outputs))):
            return False
        if any(static_dims(t.shape) is None for t in op.outputs):
            return False
    return True


def _batch_by_select(ctx, op, ins, flags, vectorize):
    a = op.attrs
    branches = (a["then_branch"], a["else_branch"])
    if not all(total(f) for f in branches):
        return None
    # every inexact input batched (an unbatched one broadcast): the select's gradient is then
    # per row, and only summed over rows (by the broadcast's gradient) after the select
    bflags = [f or inexact(t.dtype) for t, f in zip(ins[1:], flags[1:])]
    xs = [t if f or not b else ctx.batched_unbatched(t) for t, f, b in zip(ins[1:], flags[1:], bflags)]
    pred = _reshape(ins[0], [ctx.B])

    return selected(pred, [functools.partial(rebuilt, ctx, f, bflags, vectorize=vectorize) for f in branches], xs)


def selected(pred, branches, xs):
    """Per row b, ``branches[0](xs)[k][b]`` where ``pred[b]`` else ``branches[1](xs)[k][b]``
    (each branch builds batched outputs from the batched ``xs``). Its gradient is the same
    construction over the two branches' vector-Jacobian products (so only the taken
    branch's derivatives reach a row, as with one If per row)."""
    outs = [select(pred, t, e) for t, e in zip(branches[0](xs), branches[1](xs))]
    n = len(outs)

    def grad_of_op(op, *grads):
        # (the tensors from ``op``, not this call: a replayed copy differentiates its own)
        pred, xs = op.inputs[n], list(op.inputs[n + 1:])
        fl = [k for k, x in enumerate(xs) if x.dtype.is_floating or x.dtype.is_complex]

        def vjp(branch):
            def build(zs):
                ws, dys = zs[:len(xs)], zs[len(xs):]
                got = branch(ws)
                pairs = [(o, d) for o, d in zip(got, dys) if o.dtype.is_floating or o.dtype.is_complex]
                gs = gradients([o for o, _ in pairs], [ws[k] for k in fl], grad_ys=[d for _, d in pairs]) \
                    if pairs else [None] * len(fl)
                return [g if g is not None else _zeros(ws[k]) for g, k in zip(gs, fl)]
            return build
        dys = [g if g is not None else _zeros(o) for g, o in zip(grads[:n], op.inputs[:n])]
        gs = iter(selected(pred, [vjp(branches[0]), vjp(branches[1])], xs + dys)) if fl else iter(())
        return [None] * (n + 1) + [next(gs) if k in fl else None for k in range(len(xs))]

    res = apply_op("IdentityN", outs + [pred] + list(xs), {"_grad_of_op": grad_of_op}, name="If_selected")
    return list(res[:n]) if isinstance(res, tuple) else [res]


def select(pred, t, e):
    r = t.shape.rank
    p = pred if r == 1 else _reshape(pred, [int(pred.shape.dims[0])] + [1] * (r - 1))
    return apply_op("SelectV2", [p, t, e])


def _zeros(t):
    return apply_op("ZerosLike", [t])


def _reshape(t, shape):
    return apply_op("Reshape", [t], {"shape": tuple(shape)})
