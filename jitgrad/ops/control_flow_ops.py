"""Structured control flow: the ``If`` and ``While`` ops and ``tf.cond`` /
``tf.while_loop`` (TF 2's functional cond_v2 / while_v2, not TF 1's
Switch/Merge/Enter/Exit).

If(pred, *captures)
    attrs then_branch / else_branch: Funcs (func_graph.py) taking the
    captures; out_specs: the outputs' (dims, dtype).
While(*vars, *captures, *xs[, limit])
    attrs cond (a Func of vars + captures -> bool scalar, or None for a
    counted loop), body (a Func of vars + captures + one slice of each x ->
    new vars + ys), limit: None | "max" (stop after ``limit`` iterations, as
    TF's maximum_iterations) | "count" (exactly ``limit`` iterations; the
    loop reads xs[k] and writes ys[k] at k = i, or T-1-i when ``reverse``).
    Outputs: final vars, the trip count (int32), and each y stacked over the
    iterations ([T] + y's shape).

Gradients are written with these same ops, so they nest and differentiate
again: If's gradient is an If over the branches' gradient functions; While's
is a counted While running backwards over per-iteration values that the
forward loop saves (its loop variables at the start of each iteration: the
forward op is given them as extra stacked outputs, as TF's while_v2 adds
accumulators; the backward body recomputes the body's forward part from them).
A gradient never draws again: what the branches' / body's random ops drew
(a dropout mask) is saved by the forward op as extra outputs (stacked per
iteration for a While) and the recomputation reads those, as TF's cond_v2 /
while_v2 gradients read the forward pass's intermediates; a random op in a
region nested in the branch or body too (ops/saved_draws.py).
"""
import numpy as np

from .. import context, dtypes, legacy_region_writes
from ..convert import convert_to_tensor
from ..func_graph import Func, FuncGraph, add_side_effect, as_output, in_region, replay, run as run_func, trace
from ..graph import Tensor
from .registry import NOT_DIFFERENTIABLE, apply_op, register
from . import array_ops
from ..passes.prune import prune
from ..passes.growing_vars import pop_count, popped_rows, popping_if, set_row_chain
from ..gradients import gradients, sparse_gathers_now
from ..indexed_slices import IndexedSlices
from . import math_ops
from .array_ops import concat, zeros
from .math_ops import zeros_like
from .saved_draws import ensure_if_draws_saved, ensure_while_draws_saved, if_branch_draws, replay_drawn, \
    while_body_draws
from .state_ops import check_assigned_value

# ---------------------------------------------------------------- running a region


def run_region(region, arrays):
    """Runs a branch / cond / body: a graph Func, or (in the compiler) a sub-Program."""
    if isinstance(region, Func):
        return run_func(region, arrays)
    from ..passes import ir
    outs, _ = ir.evaluate(region, list(arrays))
    return outs


def _merge_dims(a, b):
    if a is None or b is None or len(a) != len(b):
        return None
    return tuple(x if x == y else None for x, y in zip(a, b))


# ---------------------------------------------------------------- a predicate / index / trip limit as a scalar
def _scalar_check(shapes, attrs):
    """TF's Switch kernel (what a graph's cond, switch_case and while_loop limit become):
    a cond predicate may be any one-element tensor (``one_element``), a switch_case index
    or maximum_iterations only a scalar."""
    s = shapes[0]
    if s is None:
        return
    if (int(np.prod(s)) != 1) if attrs["one_element"] else len(s) != 0:
        raise ValueError(f"The second input must be a scalar, but it has shape [{','.join(map(str, s))}]")


def _scalar_kernel(attrs, x):
    _scalar_check((np.shape(x),), attrs)
    return np.asarray(x).reshape(())


# Its input's element as a scalar: a free view in codegen (reshape=True); the check is made on
# each run's shapes (run_check), so nothing of it is in the generated code.
register("ScalarOf", infer=lambda shapes, dts, attrs: [((), dts[0])], run_check=_scalar_check,
         kernel=_scalar_kernel, grad=NOT_DIFFERENTIABLE, kind="layout", reshape=True)


def scalar_of(x, one_element):
    """``x`` (a tensor whose static shape is not known to be a scalar) as a scalar, checked
    when it runs as TF's graph checks it; a shape known to hold one element is a plain reshape."""
    if one_element and x.shape.is_fully_defined() and x.shape.num_elements() == 1:
        return array_ops.reshape(x, [])
    return apply_op("ScalarOf", [x], {"one_element": one_element}, name="ScalarOf")


# ---------------------------------------------------------------- stacking no rows of an unknown shape
def _stack_check(shapes, attrs):
    s = shapes[0]
    if s is not None and len(s) >= 1 and s[0] == 0:
        raise ValueError(f"Tried to stack elements of an empty list with non-fully-defined element_shape: "
                         f"{attrs['element_shape']}")


def _stack_check_kernel(attrs, x):
    _stack_check((np.shape(x),), attrs)
    return x


# Value: its input. TF's map_fn / scan stack their rows in a TensorList, whose stack of no
# rows fails when the rows' static shape is not fully defined; the compiled and interpreted
# loops would each make up a shape (tf_fuzz round 140000). Checked on the run's shapes.
register("EmptyStackCheck", infer=lambda shapes, dts, attrs: [(shapes[0], dts[0])], run_check=_stack_check,
         kernel=_stack_check_kernel, grad=lambda op, g: [g], kind="other", identity=True, lowering="none")


def check_stackable(stacked):
    """``stacked`` (rows stacked by a loop), failing as TF's TensorListStack when it has no rows
    and its rows' static shape is not fully defined, or rows of different shapes."""
    rows = stacked.shape[1:] if stacked.shape.rank is not None else stacked.shape
    if rows.is_fully_defined():
        return stacked
    shown = "<unknown>" if rows.rank is None else "[" + ",".join("?" if d is None else str(d) for d in rows.dims) + "]"
    # (with rows of different shapes, a ragged stack only While ops may read, its run-time
    # shape check fails: map_fn of tf.range(r) returned numpy's object array in a tf.function)
    return apply_op("EmptyStackCheck", [stacked], {"element_shape": shown}, name="TensorListStack")


# ---------------------------------------------------------------- If
def _if_infer(shapes, dts, attrs):
    if dts[0] is not dtypes.bool_:
        raise TypeError(f"The predicate of tf.cond must be a bool tensor, got {dts[0].name}")
    if shapes[0] is not None and len(shapes[0]) != 0:
        raise ValueError(f"The predicate of tf.cond must be a scalar, got shape {list(shapes[0])}")
    return list(attrs["out_specs"])


def _if_kernel(attrs, pred, *ins):
    pred = np.asarray(pred)
    if pred.shape != ():
        raise ValueError(f"The predicate of tf.cond must be a scalar, got shape {list(pred.shape)}")
    # loop variables it pops (passes/growing_vars.if_pops): the taken branch sees the rows
    # it pops, and the output is what they leave
    ins, left = list(ins), {}
    for p, j, r_then, r_else in attrs.get("pop_caps", ()):
        v, rows = np.asarray(ins[p]), r_then if bool(pred) else r_else
        if len(v) < rows:
            raise ValueError(_pop_error(len(v), rows))
        ins[p], left[j] = v[len(v) - rows:], v[:len(v) - rows]
    outs = list(run_region(attrs["then_branch"] if bool(pred) else attrs["else_branch"], ins))
    for j, v in left.items():
        outs[j] = v
    return tuple(outs)


def _pop_error(have, rows):
    return f"a loop variable of {have} rows cannot give the {rows} an iteration pops"


def _is_zeros_of(g, t):
    """gradients() fills missing output gradients with ZerosLike(output)."""
    return isinstance(g, Tensor) and g.op.type == "ZerosLike" and g.op.inputs[0] is t


def _if_grad(op, *grads):
    caps = op.inputs[1:]
    wanted = [k for k, g in enumerate(grads)
              if g is not None and op.outputs[k].dtype.is_floating and not _is_zeros_of(g, op.outputs[k])]
    # an outer tensor the If takes twice (a variable's read as its value on entry and as the
    # capture its reads' gradients go to, read_for_gradient) is one capture in the
    # gradient branch: its gradient goes to the first input only, or it would count twice
    first = {}
    fcaps = [j for j, t in enumerate(caps) if t.dtype.is_floating and first.setdefault(id(t), j) == j]
    if not wanted or not fcaps:
        return [None] * len(op.inputs)

    real = op.outputs[0].op   # (op: the gradient's view of the If)
    ensure_if_draws_saved(real)

    def branch_grad(name):
        func, saved = op.attrs[name], if_branch_draws(real, name)

        def fn():
            fg = context.get_default_graph()
            ins = [fg.capture(t) for t in caps]
            # the branch's random ops (at any depth) are not drawn again: the forward If's draws stand in
            outs = replay_drawn(func, ins, {i: fg.capture(t) for i, t in saved.items()})
            return gradients([outs[k] for k in wanted], [ins[j] for j in fcaps],
                             grad_ys=[fg.capture(grads[k]) for k in wanted], sparse_gathers=sparse)
        return fn

    sparse = sparse_gathers_now()

    traced = [_trace_branch("then_grad", branch_grad("then_branch")),
              _trace_branch("else_grad", branch_grad("else_branch"))]
    # an input only one branch uses: zeros from the other (as cond_v2); neither: None
    keep = [i for i in range(len(fcaps)) if any(outs[i] is not None for _, outs in traced)]
    for fg, outs in traced:
        with fg.as_default():
            for i in keep:
                if outs[i] is None:
                    outs[i] = zeros_like(fg.capture(caps[fcaps[i]]))
    res = [None] * len(op.inputs)
    if not keep:
        return res
    # a gradient one branch gives as IndexedSlices (a gather's) is slices from both, as
    # cond_v2's: the If outputs their values, indices and dense_shape
    sliced = {i for i in keep if any(isinstance(outs[i], IndexedSlices) for _, outs in traced)}
    # (indices of two dtypes: int64 both, as cond_v2's _make_indexed_slices_indices_types_match)
    wide = {i for i in sliced if len({outs[i].indices.dtype if isinstance(outs[i], IndexedSlices) else dtypes.int32
                                      for _, outs in traced}) > 1}
    flat = []
    for fg, outs in traced:
        with fg.as_default():
            parts = []
            for i in keep:
                g = outs[i]
                if i in sliced:
                    g = g if isinstance(g, IndexedSlices) else _as_indexed_slices(g)
                    parts += [g.values, math_ops.cast(g.indices, dtypes.int64) if i in wide else g.indices,
                              g.dense_shape]
                else:
                    parts.append(g)
            flat.append((fg, [as_output(fg, t) for t in parts]))
    for fg, parts in flat:
        _drop_unread_captures(fg, parts)
    out = _make_if(op.inputs[0], flat, name="If_grad")
    out = [out] if isinstance(out, Tensor) else list(out)
    for i in keep:
        if i in sliced:
            res[1 + fcaps[i]] = IndexedSlices(out[0], out[1], out[2])
            out = out[3:]
        else:
            res[1 + fcaps[i]], out = out[0], out[1:]
    return res


def _as_indexed_slices(g):
    """Dense ``g`` as IndexedSlices of all its rows (TF's _as_indexed_slices)."""
    shape = array_ops.shape(g)
    return IndexedSlices(g, array_ops.range_(shape[0]), shape)


register("If", denormals="keep", infer=_if_infer, kernel=_if_kernel, grad=_if_grad, kind="control")


def _drop_unread_captures(fg, outs):
    """Forgets the captures of traced branch ``fg`` that neither ``outs`` nor its side
    effects read. A gradient branch replays the whole forward branch on every capture;
    the If built from it would otherwise take them all, so a reverse loop would save
    per iteration what no gradient reads (a growing accumulator entering a cond that
    appends to it: quadratic memory, and the loop could not compile,
    passes/growing_vars.py)."""
    read = {id(t) for t in outs}
    for o in prune(list(outs) + list(fg.side_effects), {id(ph) for _, ph in fg.captures}):
        read.update(id(t) for t in o.inputs)
    dropped = {id(ph) for _, ph in fg.captures if id(ph) not in read}
    fg.captures[:] = [(outer, ph) for outer, ph in fg.captures if id(ph) not in dropped]
    for key in [k for k, ph in fg._capture_of.items() if id(ph) in dropped]:
        del fg._capture_of[key]


def _trace_branch(name, fn):
    fg, _, result = trace(name, lambda: fn(), [])
    return fg, list(result) if isinstance(result, list) else result


def union_captures(graphs):
    """The outer tensors the traced graphs use, in first-use order."""
    caps, seen = [], set()
    for fg in graphs:
        for outer, _ in fg.captures:
            if id(outer) not in seen:
                seen.add(id(outer))
                caps.append(outer)
    return caps


# ---------------------------------------------------------------- variables and side effects in regions
_MADE_OUTSIDE = ("VariableV2", "Assign", "AssignAdd", "AssignSub", "VariableOrInitial")   # (a variable's own ops)


def _region_variables(graphs):
    """({key: variable} the graphs read or write, {key: variable} they write), first use first."""
    used, written = {}, {}
    for fg in graphs:
        for op in fg.get_operations():
            if op.type in _MADE_OUTSIDE:
                raise NotImplementedError(f"{op.type} ({op.name}): creating a variable inside tf.cond / "
                                          f"tf.while_loop is not supported; create it before")
        for k, (var, _) in fg.var_entry.items():
            used.setdefault(k, var)
        for k, var in fg.var_written.items():
            used.setdefault(k, var)
            written.setdefault(k, var)
    return used, written


def current_value(var, graph=None):
    """``var``'s value at this point of ``graph`` (default: the graph being built)."""
    fg = in_region(graph)
    if fg is not None:
        return fg.read_variable(var)
    return var._top_read()


def assign_in_region(fg, var, op_type, value, read_value=True):
    """``var.assign`` / ``assign_add`` / ``assign_sub`` while branch or body ``fg``
    is traced: the new value becomes the variable's value in ``fg`` (dataflow;
    the region op writes it when it runs)."""
    with fg.as_default():
        v = convert_to_tensor(value, dtype=var.dtype)
        check_assigned_value(v, var, op_type)
        if op_type != "Assign":
            v = (math_ops.add if op_type == "AssignAdd" else math_ops.subtract)(fg.read_variable(var), v)
        if not legacy_region_writes.is_legacy(fg):
            fg.write_variable(var, v)
            return v if read_value else apply_op("NoOp", [], {}, name=op_type)
        # a plain graph's: it happens only if the region's outputs use what it returns
        # (legacy_region_writes.py)
        marker = array_ops.identity(v, name=op_type) if read_value else apply_op("NoOp", [], {}, name=op_type)
        if legacy_region_writes.record(fg, [marker] if read_value else [], marker.op if read_value else marker):
            fg.write_variable(var, v)
        return marker


def _to_root(op, g_value, g_root):
    return [None, g_value]


_to_root.passes_slices = True   # (a gather's IndexedSlices reach the variable as they are)


def read_for_gradient(value, root):
    """``value`` (a variable's value inside a region, or written by a region op) as a read
    of the variable: its gradient goes to ``root`` (the variable's read at the top, or its
    capture), none to ``value`` -- what an assignment computed, or a loop variable carrying
    the previous iteration's writes. As TF: the gradient with respect to a variable is the
    sum over its reads, and no gradient passes through an assignment. An IdentityN:
    compiled code uses ``value`` as it is."""
    outs = apply_op("IdentityN", [value, root], {"_grad_of_op": _to_root}, name="read")
    return outs[0]


def value_op(t):
    """The op giving ``t``'s value: for a read_for_gradient read, the op that computed it
    (a region op's write), as a control input that outlives the IdentityN's removal."""
    if t.op.type == "IdentityN" and t.op.attrs.get("_grad_of_op") is _to_root:
        return t.op.inputs[0].op
    return t.op


def _commit_writes(op, outs, written):
    """The region op ``op`` wrote ``written`` (values ``outs``): the enclosing
    region records them, or at the top the variables learn it (op writes them itself)."""
    fg = in_region(op.graph)
    if fg is not None and written and legacy_region_writes.is_legacy(fg):
        # in a plain graph's region: its writes happen only if the region's outputs use the op
        # (legacy_region_writes.py)
        if not legacy_region_writes.record(fg, [t for t in op.outputs if not any(t is o for o in outs)], op):
            return
    for var, t in zip(written.values(), outs):
        if fg is not None:
            fg.write_variable(var, t)
        else:
            var._commit_region_write(op, t)


def register_stateful(op):
    """``op`` has effects beyond its outputs: it runs whenever the region being
    built runs (a FuncGraph's side effects), or, at the top of a jitgrad.function,
    on every call (TF's automatic control dependencies)."""
    if add_side_effect(op):
        return
    trace = context.current_trace(op.graph)
    if trace is not None and op not in trace.stateful:
        trace.stateful.append(op)


def _region_op(op_type, inputs, attrs, var_at, written, graphs, name):
    """Creates a region op whose outputs ``var_at:var_at + len(written)`` are the
    variables it wrote; returns the op."""
    top = in_region() is None
    if written and top:
        attrs = dict(attrs, var_writes=[(var_at + j, k) for j, k in enumerate(written)])
    res = apply_op(op_type, inputs, attrs, name=name)
    op = res if not isinstance(res, (Tensor, tuple)) else (res.op if isinstance(res, Tensor) else res[0].op)
    _commit_writes(op, op.outputs[var_at:var_at + len(written)], written)
    if (written and top) or any(fg.side_effects for fg in graphs):
        register_stateful(op)
    return op


def _make_if(pred, traced, name):
    """traced: [(then graph, flat output tensors), (else graph, ...)]."""
    graphs = [fg for fg, _ in traced]
    used, written = _region_variables(graphs)
    for fg in graphs:
        for var in used.values():
            fg.entry_value(var)
    caps = union_captures(graphs)
    var_in = [current_value(var) for var in used.values()]
    n_out = len(traced[0][1])
    if not n_out and not written and any(fg.side_effects for fg in graphs):
        # an output for the compiled program to keep the op by (passes/ir.from_graph)
        traced = [(fg, [as_output(fg, False)]) for fg, _ in traced]
    funcs = [Func(fg, [fg.capture(t) for t in caps] + [fg.entry_value(v) for v in used.values()],
                  list(outs) + [fg.read_variable(v) for v in written.values()]) for fg, outs in traced]
    specs = [(_merge_dims(a.shape.dims, b.shape.dims), a.dtype) for a, b in zip(*(f.outputs for f in funcs))]
    op = _region_op("If", [pred] + caps + var_in, {"then_branch": funcs[0], "else_branch": funcs[1],
                                                   "out_specs": specs}, n_out, written, graphs, name)
    outs = op.outputs[:n_out]
    if not outs:
        return op
    return outs[0] if len(outs) == 1 else tuple(outs)


# ---------------------------------------------------------------- While
def _while_infer(shapes, dts, attrs):
    n = attrs["n_vars"]
    if attrs["limit"] is not None and not dts[-1].is_integer:
        raise TypeError(f"maximum_iterations must be an integer, got {dts[-1].name}")
    count = attrs.get("static_count")
    ys = [(None if d is None else (count,) + tuple(d), dt) for d, dt in attrs["y_specs"]]
    return list(attrs["var_specs"][:n]) + [((), dtypes.int32)] + ys


def _while_kernel(attrs, *ins):
    n, c, nx = attrs["n_vars"], attrs["n_caps"], attrs["n_xs"]
    vals, caps, xs = list(ins[:n]), list(ins[n:n + c]), ins[n + c:n + c + nx]
    limit = attrs["limit"]
    lim = None
    if limit is not None:
        lim = np.asarray(ins[-1])
        if lim.shape != ():
            raise ValueError(f"maximum_iterations must be a scalar, got shape {list(lim.shape)}")
        lim = int(lim)
    if limit == "count":
        for x in xs:
            if x.ndim == 0 or x.shape[0] != lim:
                raise ValueError(f"a sliced input has shape {list(x.shape)}, expected {lim} rows")
    cond, body, rev = attrs["cond"], attrs["body"], attrs["reverse"]
    ys = [[] for _ in attrs["y_specs"]]
    # variables that only grow by rows (passes/growing_vars.py): a specialised body
    # sees them empty and returns the rows to append
    grow = attrs.get("grow_vars", ()) if not isinstance(body, Func) else ()
    # variables that shrink by rows (passes/growing_vars.popped_vars): the body sees the
    # rows an iteration pops, which leave the variable
    # (an If in the body that pops them sees them whole: the If's kernel pops)
    pop = {} if isinstance(body, Func) else {k: rows for k in attrs.get("pop_vars", ())
                                             if (rows := popped_rows(body, k)) is not None}
    i = 0
    while lim is None or i < lim:
        for k, rows in pop.items():
            if len(vals[k]) < rows:
                raise ValueError(_pop_error(len(vals[k]), rows))
        seen = [v[:0] if k in grow else v[len(v) - pop[k]:] if k in pop else v for k, v in enumerate(vals)]
        if cond is not None and not bool(np.asarray(run_region(cond, seen + caps)[0])):
            break
        k = lim - 1 - i if rev else i
        outs = run_region(body, seen + caps + [_row(x, k) for x in xs])
        vals = [np.concatenate([v, np.asarray(o)]) if j in grow else v[:len(v) - pop[j]] if j in pop else np.asarray(o)
                for j, (v, o) in enumerate(zip(vals, outs[:n]))]
        for acc, y in zip(ys, outs[n:]):
            acc.append(np.asarray(y))
        i += 1
    stacks = []
    for acc, (dims, dt) in zip(ys, attrs["y_specs"]):
        if rev:
            acc.reverse()
        # (rows that are ragged stacks themselves; a string row is an object array too)
        nested = any(a.dtype == object and (not dt.is_string or _holds_arrays(a)) for a in acc)
        if acc and not nested and all(a.shape == acc[0].shape for a in acc):
            stacks.append(np.stack(acc).astype(dt.np, copy=False))
        elif acc:
            # rows of different shapes (a shape invariant with None dims, a nested
            # loop's stacks): a ragged stack, as TF's TensorList; only While ops read it
            ragged = np.empty(len(acc), object)
            for k, a in enumerate(acc):   # (one by one: numpy would stack rows of one length)
                ragged[k] = a if a.dtype == object else a.astype(dt.np, copy=False)
            stacks.append(ragged)
        else:
            stacks.append(np.zeros((0,) + tuple(d or 0 for d in (dims or ())), dt.np))
    return tuple(vals) + (np.int32(i),) + tuple(stacks)


def _row(x, k):
    """Row ``k`` of a sliced input: an array (a ragged stack's row is one already; a
    string vector's row is its bytes, made a 0-d string array)."""
    r = x[k]
    return r if isinstance(r, np.ndarray) else np.array(r, dtype=x.dtype)


def _holds_arrays(a):
    """An object array whose elements are arrays (a ragged stack), not strings."""
    return any(isinstance(e, np.ndarray) for e in a.flat)


def _ensure_saved(op):
    """Gives a forward While op, once, extra stacked outputs: its loop
    variables at the start and at the end of every iteration, as while_v2
    adds accumulators. The backward body recomputes the forward body from the
    first; the second replace what the body outputs (a tanh's result, say),
    so that what only computes them is not recomputed. A variable the body only writes
    rows of (SetRow) is read by the step only through the rows its SetRows replace: those
    are saved too, one row per iteration (``_replaced_rows``)."""
    if "saved_at" in op.attrs:
        return
    # and what the body's random ops drew in every iteration (the backward body reads them)
    ensure_while_draws_saved(op)
    a = op.attrs
    n = a["n_vars"]
    body = a["body"]
    at = a["n_ys"]
    specs = list(a["var_specs"][:n])
    # a variable the body pops rows of (a first-order reverse loop's, growing_vars.pop_count):
    # only the rows each iteration pops are saved, not the whole variable (quadratic in T)
    tails = _popped_tails(body, n, specs)
    saved_in = [tails[k][1] if k in tails else t for k, t in enumerate(body.inputs[:n])]
    in_specs = [((tails[k][0],) + tuple(d[1:]), dt) if k in tails else (d, dt) for k, (d, dt) in enumerate(specs)]
    rows = _replaced_rows(body, n, tails)
    row_specs = [(t.shape.dims, t.dtype) for t in rows]
    op.attrs = dict(a, body=body.with_outputs(body.outputs + tuple(saved_in) + body.outputs[:n] + tuple(rows)),
                    n_ys=at + 2 * n + len(rows), y_specs=list(a["y_specs"]) + in_specs + specs + row_specs,
                    saved_at=at, saved_tails=tuple(sorted(tails)), saved_rows=len(rows))
    count = a.get("static_count")
    extra = []
    for k, (dims, dt) in enumerate(in_specs + specs + row_specs):
        extra.append(Tensor(op, len(op.outputs) + k, dt, None if dims is None else (count,) + tuple(dims)))
    op.outputs = op.outputs + tuple(extra)


def _replaced_rows(body, n, skip):
    """The rows the SetRows of ``body`` replace (their output 1) that the body reads, for
    the loop variables (not in ``skip``) it reads only as SetRow buffers
    (growing_vars.set_row_chain): a first gradient's buffer gradient, whose replaced rows
    are the written values' gradients. The step of the loop's gradient reads such a
    variable only through those rows (SetRow's gradient reads no buffer), so saving them
    ([T, *row]) and substituting them in the step leaves the variable's whole buffer per
    iteration ([T, rows, *row]: no static shape, memory quadratic in T) unread."""
    out = []
    for k in range(n):
        if k in skip:
            continue
        for op in set_row_chain(body, k) or ():
            row = op.outputs[1]
            if row.consumers() and row.shape.is_fully_defined():
                out.append(row)
    return out


def _popped_tails(body, n, specs):
    """{var index: (rows, the rows an iteration pops, as one tensor of ``body``)} for the
    loop variables ``body`` pops rows of (passes/growing_vars.pop_count; rows None where an
    If pops them, its branches each their own count: _if_popped_tail). The gradient
    step replays the body on those rows alone: the split leaves an empty rest, and the
    gradient of that rest (the loop's, carried) gets the rows' own appended."""
    out = {}
    for k in range(n):
        dims = specs[k][0]
        if dims is None or not dims or dims[0] is not None or None in dims[1:]:
            continue
        rows = pop_count(body, body.inputs[k], body.outputs[k], len(dims))
        if rows is None:
            at = popping_if(body, body.inputs[k], body.outputs[k], len(dims))
            if at is not None and max(at[2:]):
                out[k] = _if_popped_tail(body.outputs[k].op, at, dims, specs[k][1])
            elif at is not None:
                # both branches pop nothing: what is left is the whole variable, which the step
                # reads only as the If's capture, so an empty tail stands for it (saving the
                # variable itself every iteration would be quadratic in T)
                with body.graph.as_default():
                    out[k] = (0, zeros([0] + list(dims[1:]), specs[k][1]))
            continue
        if not rows:
            continue
        split = body.inputs[k].consumers()[0]
        with body.graph.as_default():
            out[k] = (rows, concat(list(split.outputs[1:]), split.get_attr("axis")))
    return out


def _if_popped_tail(op, at, dims, dt):
    """(None, the rows If ``op`` pops, ``at`` = growing_vars.if_pops) for _popped_tails, when
    each branch pops its own count: as many rows as the larger count, the taken branch's
    popped rows after zero rows (static, so the saved rows stack as [T, rows, ...], not a
    ragged stack of the whole variable: memory linear in T). ``op`` gets them as an extra
    output. The gradient step replays the If on them: it pops its branch's rows off the
    end, the zeros are what is left, and the gradient of what is left (the loop's, carried)
    gets the popped rows' own appended, as for a split's tail. Declared of unknown rows
    (the None) for the step, whose gradient of the If's capture has the carried rows plus
    the popped ones, not the padded count."""
    p, _, r_then, r_else = at
    rows = max(r_then, r_else)
    a = op.attrs
    funcs = []
    for name, r in (("then_branch", r_then), ("else_branch", r_else)):
        br = a[name]
        readers = [c for c in br.inputs[p].consumers() if c.type == "SplitToShapesOf"]
        parts = list(readers[0].outputs[1:]) if r else []
        with br.graph.as_default():
            pad = [zeros([rows - r] + list(dims[1:]), dt)] if rows > r else []
            tail = concat(pad + parts, 0) if len(pad + parts) > 1 else (pad + parts)[0]
        funcs.append(br.with_outputs(br.outputs + (tail,)))
    spec = ((rows,) + tuple(dims[1:]), dt)
    op.attrs = dict(a, then_branch=funcs[0], else_branch=funcs[1], out_specs=list(a["out_specs"]) + [spec])
    op.outputs = op.outputs + (Tensor(op, len(op.outputs), dt, spec[0]),)
    return None, op.outputs[-1]


def _while_grad(op, *grads):
    real = op.outputs[0].op
    _ensure_saved(real)
    a = real.attrs
    n, c, nx, ny = a["n_vars"], a["n_caps"], a["n_xs"], a["n_ys"]
    ins, outs = real.inputs, real.outputs
    vars0, caps, xs = ins[:n], ins[n:n + c], ins[n + c:n + c + nx]
    grads = list(grads) + [None] * (len(outs) - len(grads))
    g_final = [None if _is_zeros_of(g, o) else g for g, o in zip(grads[:n], outs[:n])]
    ys_out = outs[n + 1:]
    g_ys = [None if _is_zeros_of(g, o) else g for g, o in zip(grads[n + 1:], ys_out)]
    # a variable with no gradient from outside that feeds only itself (an accumulator
    # the loss does not read, a growing TensorArray of states) has gradient zero all
    # along: the reverse loop does not carry it (a grown one would need its final shape)
    gy = [j for j in range(ny) if g_ys[j] is not None and ys_out[j].dtype.is_floating]
    inert = _self_contained_vars(a["body"], n, [n + j for j in gy])
    fv = [k for k in range(n) if vars0[k].dtype.is_floating and not (g_final[k] is None and k in inert)]
    first = {}   # (a tensor the While captures twice: its gradient goes to the first only, as in _if_grad)
    fc = [k for k in range(c) if caps[k].dtype.is_floating and first.setdefault(id(caps[k]), k) == k]
    fx = [k for k in range(nx - a.get("draw_xs", 0)) if xs[k].dtype.is_floating]   # (not what was drawn)
    res = [None] * len(ins)
    if all(g_final[k] is None for k in fv) and not gy:
        return _unfed_while_grad(real, fc, fx) if _while_output_is_target(real) else res
    nv, ncap, ngy = len(fv), len(fc), len(gy)
    init = [g_final[k] if g_final[k] is not None else zeros_like(outs[k]) for k in fv]
    init += [zeros_like(caps[k]) for k in fc]
    var_specs = [a["var_specs"][k] for k in fv] + [(caps[k].shape.dims, caps[k].dtype) for k in fc]
    at = a["saved_at"]
    saved_in, saved_out = list(ys_out[at:at + n]), list(ys_out[at + n:at + 2 * n])
    da, nd = a["draws_at"], a["n_draws"]
    saved_draws = list(ys_out[da:da + nd])
    draw_specs = list(a["y_specs"][da:da + nd])
    x_row_specs = [(None if x.shape.dims is None else x.shape.dims[1:], x.dtype) for x in xs]
    # the step sees a popped variable as the rows the iteration popped (_ensure_saved)
    in_specs = list(a["y_specs"][at:at + n])
    gy_specs = [a["y_specs"][j] for j in gy]
    body = a["body"]
    draws = while_body_draws(real)   # (what the body drew, in saved order)
    nr = a.get("saved_rows", 0)   # (the rows SetRows replaced: _replaced_rows)
    saved_rows = list(ys_out[at + 2 * n:at + 2 * n + nr])

    # The gradient of one iteration, traced once on placeholders: (v_i, gradients
    # of the body's outputs, x rows) -> (gradients of v_i, of the captures, of the rows).
    def one_step(*p):
        fg = context.get_default_graph()
        v_i, g_v, g_c, gy_i = p[:n], p[n:n + nv], p[n + nv:n + nv + ncap], p[n + nv + ncap:n + nv + ncap + ngy]
        x_i, d_i = p[n + nv + ncap + ngy:len(p) - nd], p[len(p) - nd:]
        cap_in = [fg.capture(t) for t in caps]
        # the random ops (at any depth) are not drawn again: this iteration's forward draws stand in
        r = replay_drawn(body, list(v_i) + cap_in + list(x_i), {id(t): d for t, d in zip(draws, d_i)})
        new_v, y = r[:n], r[n:]
        srcs = [v_i[k] for k in fv] + [cap_in[k] for k in fc] + [x_i[k] for k in fx]
        gs = gradients([new_v[k] for k in fv] + [y[j] for j in gy], srcs,
                       grad_ys=list(g_v) + list(gy_i), unconnected_gradients="zero")
        acc = [s + g for s, g in zip(g_c, gs[nv:nv + ncap])]
        return list(gs[:nv]) + acc + list(gs[nv + ncap:]), new_v, y[at + 2 * n:at + 2 * n + nr]

    step_specs = in_specs + var_specs + gy_specs + x_row_specs + draw_specs
    fg1, ph1, (step_outs, new_v, row_v) = trace("body_grad", one_step, step_specs)
    step = Func(fg1, list(ph1) + [ph for _, ph in fg1.captures], [as_output(fg1, t) for t in step_outs])
    step_caps = [outer for outer, _ in fg1.captures]
    # the saved values the step reads (the body's outputs come from the forward loop's
    # stacks, not recomputed): only those are stacked for it
    subs = {id(t) for t in new_v if t.op.type != "Placeholder"} | {id(t) for t in row_v}
    read = {id(t) for t in step.outputs}
    for o in prune(list(step.outputs), {id(ph) for ph in step.inputs} | subs):
        read.update(id(t) for t in o.inputs)
    keep_in = [k for k in range(n) if id(ph1[k]) in read]
    keep_out = [k for k in range(n) if id(new_v[k]) in read and id(new_v[k]) in subs and k not in a["saved_tails"]]
    keep_rows = [j for j in range(nr) if id(row_v[j]) in read]
    bwd_xs = ([saved_in[k] for k in keep_in] + [saved_out[k] for k in keep_out] + [saved_rows[j] for j in keep_rows] +
              [g_ys[j] for j in gy] + list(xs) + saved_draws)
    x_specs = ([in_specs[k] for k in keep_in] + [a["var_specs"][k] for k in keep_out] +
               [a["y_specs"][at + 2 * n + j] for j in keep_rows] + gy_specs + x_row_specs + draw_specs)

    def bwd_body(gvars, sl):
        v_i, v_next = [None] * n, [None] * n   # (None: a saved value the step does not read)
        for j, k in enumerate(keep_in):
            v_i[k] = sl[j]
        for j, k in enumerate(keep_out):
            v_next[k] = sl[len(keep_in) + j]
        sl = sl[len(keep_in) + len(keep_out):]
        row_i, sl = sl[:len(keep_rows)], sl[len(keep_rows):]
        gy_i, x_i, d_i = sl[:ngy], sl[ngy:len(sl) - nd], sl[len(sl) - nd:]
        sub = {id(new_v[k]): v_next[k] for k in keep_out}
        sub.update({id(row_v[j]): r for j, r in zip(keep_rows, row_i)})
        r = replay(step, list(v_i) + list(gvars) + list(gy_i) + list(x_i) + list(d_i) + step_caps, substitute=sub)
        return r[:nv + ncap], r[nv + ncap:]

    out = _make_while(init, var_specs, None, bwd_body, bwd_xs, x_specs, "count", outs[n],
                      reverse=not a["reverse"], static_count=a.get("static_count"), name="While_grad")
    final, stacks = out[:len(init)], out[len(init) + 1:]
    for i, k in enumerate(fv):
        res[k] = final[i]
    for k in range(n):
        if vars0[k].dtype.is_floating and k not in fv:
            res[k] = zeros_like(vars0[k])
    for i, k in enumerate(fc):
        res[n + k] = final[nv + i]
    for i, k in enumerate(fx):
        res[n + c + k] = stacks[i]
    return res


register("While", denormals="keep", infer=_while_infer, kernel=_while_kernel, grad=_while_grad, kind="control")


def _while_output_is_target(op):
    """Whether gradients reach the While from its outputs directly, as TF's While op in a
    function (tf.function, a cond branch).  In a plain tf.Graph TF's while_loop returns an
    Identity of each output instead, and an int output's Identity stops the gradient there."""
    g = op.graph
    return g.building_function or isinstance(g, FuncGraph)


def _unfed_while_grad(op, fc, fx):
    """TF's while_v2 gradient when the targets reach the While only through outputs that carry
    no gradient (an int loop counter): it still differentiates the loop, with zero incoming
    gradients, so every float input's gradient is zeros (not None)."""
    a = op.attrs
    n, c = a["n_vars"], a["n_caps"]
    ins = op.inputs
    res = [None] * len(ins)
    for k in range(n):
        if ins[k].dtype.is_floating:
            res[k] = zeros_like(ins[k])
    for k in fc:
        res[n + k] = zeros_like(ins[n + k])
    for k in fx:
        res[n + c + k] = zeros_like(ins[n + c + k])
    return res


def _self_contained_vars(body, n, graded_ys):
    """The loop variables k whose body input reaches no body output but new var k
    and the ys not in ``graded_ys`` (output positions: the ys given a gradient,
    the saved per-iteration values among them for a second derivative)."""
    out_at = {}
    for j in list(range(n)) + list(graded_ys):
        out_at.setdefault(id(body.outputs[j]), []).append(j)
    res = []
    for k in range(n):
        reached = {id(body.inputs[k])}
        for op in body.graph._ops:   # (in creation order: producers first)
            if any(id(t) in reached for t in op.inputs):
                reached.update(id(t) for t in op.outputs)
        hit = {j for i in reached for j in out_at.get(i, ())}
        if hit <= {k}:
            res.append(k)
    return res


def _make_while(init, var_specs, cond_fn, body_fn, xs, x_specs, limit, limit_tensor, reverse=False,
                static_count=None, name="while"):
    """Builds a While op. init: flat tensors; var_specs: [(dims, dtype)] (the
    loop-invariant shapes); cond_fn(var placeholders) -> bool tensor or None;
    body_fn(var placeholders, x slices) -> (new vars, ys). Returns the op's
    outputs (final vars, trip count, stacks); variables the body assigns are
    extra loop variables of the op, not among them."""
    n = len(init)
    graphs = []
    cfunc_parts = None
    if cond_fn is not None:
        fgc, phc, pred = trace("cond", lambda *p: cond_fn(list(p)), var_specs)
        pred = as_output(fgc, pred)
        if pred.dtype is not dtypes.bool_:
            raise TypeError(f"The loop condition must return a bool tensor, got {pred.dtype.name}")
        if pred.shape.rank not in (None, 0):
            raise ValueError(f"The loop condition must return a scalar, got shape {pred.shape}")
        if fgc.var_written:
            raise NotImplementedError("assigning a variable in the condition of tf.while_loop is not supported; "
                                      "assign it in the body")
        graphs.append(fgc)
        cfunc_parts = (fgc, phc, pred)
    fgb, phb, (new_vars, ys) = trace("body", lambda *p: body_fn(list(p[:n]), list(p[n:])),
                                     list(var_specs) + list(x_specs))
    new_vars = [as_output(fgb, v, dtype=dt) if not isinstance(v, Tensor) else as_output(fgb, v)
                for v, (_, dt) in zip(new_vars, var_specs)]
    ys = [as_output(fgb, y) for y in ys]
    graphs.append(fgb)
    used, written = _region_variables(graphs)
    # a variable the body assigns is carried from iteration to iteration; one only read is a capture
    carried = list(written.values())
    read_only = [v for k, v in used.items() if k not in written]
    for fg in graphs:
        for var in used.values():
            fg.entry_value(var)
    caps = union_captures(graphs)
    var_init = [current_value(v) for v in carried]
    var_caps = [current_value(v) for v in read_only]
    carried_specs = [(v.shape.dims, v.dtype) for v in carried]
    cfunc = None
    if cfunc_parts is not None:
        fgc, phc, pred = cfunc_parts
        cfunc = Func(fgc, list(phc) + [fgc.entry_value(v) for v in carried] + [fgc.capture(t) for t in caps] +
                     [fgc.entry_value(v) for v in read_only], [pred])
    bfunc = Func(fgb, list(phb[:n]) + [fgb.entry_value(v) for v in carried] + [fgb.capture(t) for t in caps] +
                 [fgb.entry_value(v) for v in read_only] + list(phb[n:]),
                 new_vars + [fgb.read_variable(v) for v in carried] + ys)
    nv = n + len(carried)
    attrs = {"cond": cfunc, "body": bfunc, "n_vars": nv, "n_caps": len(caps) + len(read_only), "n_xs": len(xs),
             "n_ys": len(ys), "limit": limit, "reverse": bool(reverse),
             "var_specs": list(var_specs) + carried_specs,
             "y_specs": [(y.shape.dims, y.dtype) for y in ys], "static_count": static_count}
    inputs = list(init) + var_init + caps + var_caps + list(xs) + ([limit_tensor] if limit is not None else [])
    op = _region_op("While", inputs, attrs, n, written, graphs, name)
    return list(op.outputs[:n]) + list(op.outputs[nv:])
