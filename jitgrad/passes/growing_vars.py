"""Loop variables that grow by appending rows: ``x = tf.concat([x, rows], 0)``
under a ``None`` shape invariant (an accumulator, a dynamically sized
TensorArray written in order).

Such a variable changes shape every iteration, so its loop cannot be
specialised to static shapes as it stands. But when the body reads the
variable *only* as the first operand of that concat (the cond does not read
it, nothing else in the body does, and it is not itself saved), each
iteration's new rows do not depend on the old ones: the body is specialised
with the variable as an empty ``[0, *rest]`` tensor, its output is then just
the rows appended, and the compiled loop keeps the variable in a growing
buffer (codegen/lower_growing.py). The append may also be a ``tf.cond`` whose
branches each append to the variable (its capture there) rows of their own
static count: the output is then shaped by the branch taken, and the loop grows
by that many rows. The attribute ``grow_vars`` lists them; the interpreter's
While kernel (ops/control_flow_ops.py) honours it the same way.
Anything else that changes shape keeps the graph regions: it runs in the
interpreter, and ``explain`` says why.
"""
from .prune import prune


def _reads(func, t, ignored=()):
    """What in ``func`` reads tensor ``t``: (the ops consuming it, how many outputs
    it is, not counting the output positions in ``ignored``)."""
    return ([op for op in t.consumers() if _used(func, op)],
            sum(1 for j, o in enumerate(func.outputs) if o is t and j not in ignored))


def _used(func, op):
    """Whether ``func`` computes ``op``: an output or a side effect depends on it. A
    traced-then-replaced op (a TensorArray's first append of an iteration, folded into
    one concat by its second, autograph/staged_tensor_array.py) does not read its input,
    nor does what computed a loop variable no one needs (passes/regions.needed_loop_vars:
    the Func returns that variable unchanged)."""
    return id(op) in _live_ops(func)


_live_cache = []   # [(func, {id(op)})], the last few Funcs asked about (a body is asked once per variable)


def _live_ops(func):
    for f, live in _live_cache:
        if f is func:
            return live
    live = {id(op) for op in prune(list(func.outputs) + list(func.side_effects), set())}
    _live_cache.insert(0, (func, live))
    del _live_cache[8:]
    return live


def appended_vars(attrs, changed, in_shapes, unread_ys=()):
    """``changed`` (var indices) when every one follows the append pattern, else None.
    in_shapes: the vars' entry shapes; unread_ys: the stacked outputs nothing in the
    run reads (a gradient's saved values, built but not fetched: they are dropped)."""
    body, cond = attrs["body"], attrs["cond"]
    ignored = {attrs["n_vars"] + j for j in unread_ys}
    for k in changed:
        shape = in_shapes[k]
        if shape is None or not shape or not _appends(body, body.inputs[k], body.outputs[k], len(shape), ignored):
            return None
        if cond is not None:
            c_readers, c_outputs = _reads(cond, cond.inputs[k])
            if c_readers or c_outputs:
                return None
    return list(changed)


def _appends(func, ph, out, rank, ignored=()):
    """Whether ``out``, an output of ``func``, is its input ``ph`` with rows appended
    and nothing else in ``func`` reads either: ``concat([ph, rows], 0)``, or an If
    whose branches each return that of their capture of ``ph`` (recursively)."""
    op = out.op
    ph_readers, ph_outputs = _reads(func, ph, ignored)
    if out is ph:   # a branch appending nothing (``lambda: acc``)
        return not ph_readers and ph_outputs == 1
    out_readers, out_outputs = _reads(func, out, ignored)
    if ph_readers != [op] or ph_outputs or out_readers or out_outputs != 1:   # (e.g. saved for a gradient)
        return False
    if op.type == "Identity":   # (``concat([acc], 0)``: nothing appended)
        return True
    if op.type == "ConcatV2":
        return op.attrs["axis"] % rank == 0 and op.inputs[0] is ph and not any(t is ph for t in op.inputs[1:])
    p, branches = _captured_once(op, ph)
    if p is None:
        return False
    j = out.value_index
    return all(_appends(br, br.inputs[p], br.outputs[j], rank) for br in branches)


def _captured_once(op, t):
    """(the capture position of ``t`` in If ``op``, its branches (graph Funcs)) when it
    takes ``t`` once as a capture, else (None, None)."""
    if op.type != "If":
        return None, None
    at = [p for p, x in enumerate(op.inputs) if x is t]
    branches = (op.attrs["then_branch"], op.attrs["else_branch"])
    if len(at) != 1 or at[0] == 0 or not all(hasattr(br, "graph") for br in branches):   # (graph Funcs)
        return None, None
    return at[0] - 1, branches


def popped_vars(attrs, in_shapes, unread_ys=()):
    """{var index: rows} for the loop variables that shrink by rows at the end, the
    mirror of an append: the body reads the variable ``v`` (entering with a run-time
    leading dim) only as ``SplitToShapesOf(v, refs..., rest=0)`` along axis 0 (the
    gradient of ``concat([v, rows])``, ops/array_ops.py), and returns that split's
    first part (what the static ``refs`` leave) as the variable's next value. The
    body is specialised with the variable as its last ``rows`` rows (the split's first
    part is then empty); the compiled loop reads them in place and pops them
    (codegen/lower_growing.py), the interpreter's While kernel likewise. This is how the
    reverse loop of a dynamic TensorArray's gradient reads row t of its upstream gradient.

    rows is a pair (the then branch's, the else branch's) when the body hands ``v``
    to an If whose branches each pop their own count that way and returns that If's
    output (the reverse loop of a cond appending rows, ``if_pops``): the body then
    sees ``v`` whole, of run-time rows, and the If pops what its taken branch does.
    unread_ys: as appended_vars'."""
    body = attrs["body"]
    ignored = {attrs["n_vars"] + j for j in unread_ys}   # (as appended_vars: saved for a gradient not run)
    out = {}
    for k, shape in _run_time_rows_vars(attrs, in_shapes):
        ph, new = body.inputs[k], body.outputs[k]
        rows = pop_count(body, ph, new, len(shape), ignored)
        if rows is None:
            at = popping_if(body, ph, new, len(shape), ignored)
            if at is None:
                continue
            rows = at[2:]
        out[k] = rows
    return out


def pop_count(func, ph, out, rank, ignored=()):
    """The rows ``SplitToShapesOf(ph, refs..., rest=0)`` pops when that is all that
    reads ``ph`` in ``func`` and its first part ``out`` is an output nothing else
    reads; 0 when ``out`` is ``ph`` itself and nothing else reads it (the gradient of
    a branch appending nothing); else None."""
    readers, outputs = _reads(func, ph, ignored)
    if out is ph:
        return 0 if not readers and outputs == 1 else None
    if outputs or len(readers) != 1:
        return None
    op = readers[0]
    if op.type == "Identity" and out is op.outputs[0]:
        return 0 if _reads(func, out, ignored) == ([], 1) else None
    if (op.type != "SplitToShapesOf" or op.attrs.get("rest") != 0 or op.attrs["axis"] % rank != 0
            or op.inputs[0] is not ph or any(t is ph for t in op.inputs[1:]) or out is not op.outputs[0]):
        return None
    if _reads(func, out, ignored) != ([], 1):
        return None
    refs = op.inputs[1:]
    if not refs or not all(t.shape.is_fully_defined() and t.shape.rank == rank for t in refs):
        return None
    return sum(t.shape.dims[0] for t in refs)


def popping_if(func, ph, out, rank, ignored=()):
    """``if_pops`` of the one op reading ``ph`` in ``func`` when that is an If popping
    rows of it whose output ``out`` (what is left) nothing else reads; else None."""
    readers, outputs = _reads(func, ph, ignored)
    at = if_pops(readers[0], ph, rank) if len(readers) == 1 and not outputs else None
    if at is None or out.op is not readers[0] or out.value_index != at[1] or _reads(func, out, ignored) != ([], 1):
        return None
    return at


def if_pops(op, t, rank):
    """(capture position, output index, then rows, else rows) when If ``op`` takes
    ``t`` (of ``rank``) once as a capture and each branch pops rows of it as
    ``pop_count`` says, returning what is left as the same output; else None."""
    p, branches = _captured_once(op, t)
    if p is None:
        return None
    js = []
    for br in branches:   # the output that is what is left: the split's first part, or the capture itself
        ph = br.inputs[p]
        readers = _reads(br, ph)[0]   # (as pop_count reads it: an op nothing reads does not count)
        one = len(readers) == 1 and readers[0].type in ("SplitToShapesOf", "Identity")
        left = readers[0].outputs[0] if one else ph
        js.append([j for j, o in enumerate(br.outputs) if o is left])
    if len(js[0]) != 1 or js[0] != js[1]:
        return None
    js = js[0]
    rows = [pop_count(br, br.inputs[p], br.outputs[js[0]], rank) for br in branches]
    return None if None in rows else (p, js[0], rows[0], rows[1])


def popped_rows(body, k):
    """Rows a specialised body (a Program) pops from loop variable k per iteration
    (None: as many as the branch an If in it takes, ``if_pops``)."""
    return next(n.outputs[0][0][0] for n in body.nodes if n.op == "Arg" and n.attrs["arg"] == k)


def row_stored_vars(attrs, in_shapes, unread_ys=()):
    """The loop variables of run-time rows, ``(None, *static)``, that keep their rows: the
    body reads variable k only as the buffer of a SetRow (ops/row_store.py: a dynamic
    TensorArray written out of order into a buffer made before the loop by ZeroRows,
    tensor_array_preallocated.py; or its gradient), or of a chain of them (two writes an
    iteration), whose output 0 is the body's output k, nothing else reading any of them;
    the condition does not read it. The body is
    specialised with the variable of run-time rows; the compiled loop hands it the
    variable's one buffer, written in place (codegen/lower_growing.FixedRowsVar), so the
    kernel does not depend on the row count. unread_ys: as appended_vars'."""
    body = attrs["body"]
    ignored = {attrs["n_vars"] + j for j in unread_ys}
    return [k for k, _ in _run_time_rows_vars(attrs, in_shapes)
            if _stored_chain(body, body.inputs[k], body.outputs[k], ignored)]


def _run_time_rows_vars(attrs, in_shapes):
    """(k, shape) for the loop variables entering as ``(None, *static)`` that the
    condition does not read: the candidates of popped_vars and row_stored_vars."""
    cond = attrs["cond"]
    for k in range(attrs["n_vars"]):
        shape = in_shapes[k]
        if shape is None or not shape or shape[0] is not None or None in shape[1:]:
            continue
        if cond is not None and any(_reads(cond, cond.inputs[k])):
            continue
        yield k, shape


def _stored_chain(body, t, new, ignored):
    """Whether ``new`` is ``t`` through SetRows (one or more: two writes an iteration), each
    value read by nothing but the next one's buffer input, ``new`` an output once."""
    while True:
        readers, outputs = _reads(body, t, ignored)
        if t is new:
            return not readers and outputs == 1
        if outputs or len(readers) != 1:
            return False
        op = readers[0]
        if op.type != "SetRow" or op.inputs[0] is not t or any(x is t for x in op.inputs[1:]):
            return False
        t = op.outputs[0]


def set_row_chain(body, k):
    """The SetRow ops through which ``body`` (a graph Func) writes loop variable k, in order,
    when that is all it reads of it (``_stored_chain``: each buffer read by nothing but the
    next SetRow, the last one's output 0 the body's output k); else None. What else the body
    reads of the variable is then only the rows those SetRows replace (their output 1)."""
    t, new, chain = body.inputs[k], body.outputs[k], []
    while True:
        readers, outputs = _reads(body, t)
        if t is new:
            return chain if chain and not readers and outputs == 1 else None
        if outputs or len(readers) != 1:
            return None
        op = readers[0]
        if op.type != "SetRow" or op.inputs[0] is not t or any(x is t for x in op.inputs[1:]):
            return None
        chain.append(op)
        t = op.outputs[0]
