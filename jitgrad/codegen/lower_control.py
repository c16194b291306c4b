"""If and While: native branches and loops in the kernel's entry function.

Each branch / loop condition / loop body (a sub-Program, see
passes/regions.py) is compiled by its own KernelBuilder into an internal,
always-inlined function of the same module, with the kernel's calling
convention (one pointer block: args, outputs, scratch arena, status word).
The If becomes a conditional branch around the two calls; the While a loop:

    cur <- initial loop variables            (scratch buffers)
    i = 0
    loop: if limit and i >= limit: exit;  if cond(cur, caps) is false: exit
          k = reverse ? T-1-i : i
          body(cur, caps, xs[k]) -> next, ys[k];  cur <- next;  i += 1
    outputs <- cur, i, ys

Loop-carried values live in two scratch buffers per variable. The stacks of
per-iteration values (``ys``) are either ordinary outputs (the trip count is
known when the graph is built: map_fn, scan over a static length) or, when it
is only known at run time, *dynamic stacks*: a 3-word descriptor {data, rows,
capacity} in the arena whose rows grow by doubling (realloc) and are freed
when the kernel returns. Only While ops read dynamic stacks (the gradient
loop reads the forward loop's), so their size never reaches a shape.

A loop nested in a loop body whose trip count is known only at run time
stacks one dynamic stack per outer iteration (a *ragged* stack: the saved
draws or values of the inner loop, for the outer loop's gradient). The inner
loop's stack is then an output of the body: it is not freed when the body
returns but written, as its descriptor, into row k of the outer loop's stack,
whose rows are descriptors; the function that runs the outer loop frees every
row's memory when it returns. A loop slicing that stack hands its body row
k's descriptor, which the body's own loops read as any dynamic stack. Loops
nested deeper give stacks of such stacks (draws three loops deep): a row is then
the descriptor of a ragged stack, and freeing goes down level by level
(``_free_ragged``; passes/regions.ragged_depth counts the levels).
Likewise a loop in a cond's branch: its stack becomes the If's output (the
other branch's value must be empty), freed when the If's function returns;
the gradient's If hands it to its branch's loop.

The trip count is a runtime value: it is not part of any cache key.
"""
from contextlib import contextmanager

from llvmlite import ir

from .. import dtypes
from ..ops.logging_ops import HOOK_SYMBOL
from ..passes.ir import Node, Program
from ..passes.growing_vars import popped_rows
from ..passes.regions import ragged_depth
from .lower_growing import (FixedRowsVar, GrowingVar, PoppedVar, branch_shaped_outputs, keep_words, pop_capture,
                            rows_appended)
from .lower_row_store import in_place_rows, in_place_vars, row_chains
from .lower_rows import plan as plan_rows
from .stacks import (copy as _copy, desc as _desc, field as _field, row_ptr as _row_ptr, stack_free as _stack_free,
                     stack_init as _stack_init, stack_keep as _stack_keep, stack_reserve as _stack_reserve)
from .irutil import I1, I8, I32, I64, ERR_ASSERT, ERR_STACK_ROWS, Unsupported, c64, intrinsic, mem_type
from .mxcsr import around_host_call

I8P = I8.as_pointer()
DESC_WORDS = 3   # data pointer, rows, capacity (rows)
DESC_BYTES = 8 * DESC_WORDS
ESCAPES = "escapes"   # _keep_words: a stack the enclosing loop's stack takes over (a ragged row)


def is_dynamic(shape):
    return shape is None or any(d is None for d in shape)


def is_ragged_row(shape):
    """A row of a ragged stack: a dynamic stack of static rows, ``(None, *static)``, or
    of such stacks, ``(None, None, *static)``, ... (passes/regions.ragged_depth)."""
    return ragged_depth(shape) > 0


def _nbytes(shape, dt):
    n = 1
    for d in shape:
        n *= d
    return n * dt.size


class Region:
    """A sub-Program compiled into an internal function of the parent's module.
    Its var_writes (the tf.prints in it and in regions nested in it) are extra
    outputs the caller gives scratch for; its prints carry ``effects_tag``: the
    top-level region they belong to (ops/logging_ops.RegionEffects)."""

    def __init__(self, kb, program, tag, effects_tag=-1, stacks_out=False):
        if not isinstance(program, Program):
            raise Unsupported("a control-flow region without static shapes")
        sub = kb.regions.sub_builder(program, tag)
        sub.effects_tag = getattr(kb, "effects_tag", -1) if kb.regions.nested else effects_tag
        self.effect_specs = [(program.shape(v), program.dtype(v)) for _, v in program.var_writes]
        check(program, stacks_out=stacks_out)
        # outputs that are its own loops' dynamic stacks: rows of the calling loop's ragged stack, or
        # the calling If's output
        sub.escaping_stacks = {(v.node, v.index) for v in program.outputs
                               if v is not None and _is_loop_stack(program, (v.node, v.index))} if stacks_out else set()
        sub.build_body(allow_parallel=False)
        fn = sub.fn
        fn.linkage = "internal"
        fn.attributes.add("alwaysinline")
        self.fn = fn
        self.draws = sub.rng is not None   # its random ops need the call's handle (lower_random.py)
        self.n_args = sub.meta["n_args"]
        self.n_out = len(sub.meta["outputs"])
        self.arena_bytes = int(sub.meta["arena_bytes"])
        kb.regions.groups.extend((f"  {tag}: {head}", ops) for head, ops in sub.groups)

    def effect_outputs(self, kb):
        """Scratch for the extra outputs (call it in the dry pass too, as scratch_buffer wants)."""
        return [kb.scratch_buffer(s if s else (1,), dt, "region effect") for s, dt in self.effect_specs]

    def call(self, kb, args, outs, arena, status, effects=()):
        outs = list(outs) + [e.ptr for e in effects]
        if len(args) != self.n_args or len(outs) != self.n_out:
            raise Unsupported("region signature mismatch")
        b = kb.b
        ptrs = list(args) + list(outs) + [arena, status] + ([kb.regions.rng] if self.draws else [])
        block = kb.alloca(ir.ArrayType(I8P, len(ptrs)))
        for k, p in enumerate(ptrs):
            b.store(b.bitcast(p, I8P), b.gep(block, [ir.Constant(I32, 0), ir.Constant(I32, k)]))
        b.call(self.fn, [b.bitcast(block, I8P.as_pointer())])


def _region_temps(kb, regions):
    """Scratch for the regions' own arenas (one, shared: they never run at
    once) and their status word."""
    nbytes = max([r.arena_bytes for r in regions if r is not None] + [8])
    arena = kb.scratch_buffer((-(-nbytes // 8),), dtypes.int64, "region arena")
    status = kb.scratch_buffer((8,), dtypes.int32, "region status")   # (words 4-5: lower_list_checks.py)
    return arena, status


def _propagate_status(kb, status_buf):
    """The region's error code (if any) becomes the kernel's; returns i1 'failed'."""
    b = kb.b
    words = b.bitcast(status_buf.ptr, I32.as_pointer())
    code = b.load(words)
    bad = b.icmp_signed("!=", code, ir.Constant(I32, 0))
    # (with a failed ListCheck's values: ops/list_ops.py)
    kb.set_error(bad, code, [b.load(b.gep(words, [ir.Constant(I32, k)])) for k in (4, 5)])
    return bad


def _load_i64(kb, buf):
    b = kb.b
    v = b.load(b.bitcast(buf.ptr, mem_type(buf.dtype).as_pointer()))
    return b.sext(v, I64) if v.type.width < 64 else v


def _regions_of(kb, key, build):
    cache = kb.regions.cache
    if key not in cache:
        cache[key] = build()
    return cache[key]


# ---------------------------------------------------------------- If
def lower_if(kb, node, outs, dry):
    a = node.attrs
    pos = kb.regions.node_pos
    tag = a.get("effects_tag", -1)
    then, els, stacks, shaped = _regions_of(kb, pos, lambda: (
        Region(kb, a["then_branch"], f"r{pos}_then", tag, stacks_out=True),
        Region(kb, a["else_branch"], f"r{pos}_else", tag, stacks_out=True),
        _stack_outputs(node), branch_shaped_outputs(kb, _without(node, _stack_outputs(node)))))
    arena, status = _region_temps(kb, (then, els))
    then_fx, else_fx = then.effect_outputs(kb), els.effect_outputs(kb)
    if dry:
        return
    b = kb.b
    escaping = getattr(kb, "escaping_stacks", ())
    for k in stacks:   # empty until the branch whose loop stacks it runs; freed when this function returns
        d = _desc(kb, outs[k])   # (or, returned to a loop / If, by the function that runs that)
        for w in range(DESC_WORDS):
            b.store(c64(0), _field(kb, d, w))
        if (pos, k) not in escaping:
            depth = ragged_depth(node.outputs[k][0]) - 1
            kb.regions.finish_hooks.append(lambda d=d, depth=depth: _free_ragged(kb, d, depth))
    ins = [kb.buffers[v].ptr for v in node.inputs[1:]]
    pred = b.icmp_unsigned("!=", b.load(b.bitcast(kb.buffers[node.inputs[0]].ptr, I8P)), ir.Constant(I8, 0))
    # An op before this one already failed: its values are garbage and the run raises,
    # so neither branch runs (a tf.print in it would print what TF never computes).
    with b.if_then(kb.no_error_yet()):
        then_outs, else_outs, ok = [o.ptr for o in outs], [o.ptr for o in outs], ir.Constant(I1, 1)
        for k, out in shaped.items():   # branches of different shapes: lower_growing.py
            then_outs[k], else_outs[k], k_ok = out.start(kb, outs[k])
            ok = b.and_(ok, k_ok)
        for p, _, r_then, r_else in a.get("pop_caps", ()):   # rows it pops of a loop variable: lower_growing.py
            v = node.inputs[1 + p]
            p_ok, ins[p] = pop_capture(kb, kb.buffers[v], kb.shape(v), kb.dtype(v), pred, r_then, r_else)
            ok = b.and_(ok, p_ok)
        with b.if_then(ok):
            with b.if_else(pred) as (on_then, on_else):
                with on_then:
                    then.call(kb, ins, then_outs, arena.ptr, status.ptr, then_fx)
                with on_else:
                    els.call(kb, ins, else_outs, arena.ptr, status.ptr, else_fx)
            _propagate_status(kb, status)
        for k, out in shaped.items():
            out.finish(kb, outs[k], pred)


def _stack_outputs(node):
    """The If outputs that are a loop's dynamic stack in one branch (or both) and an
    empty value in the other (a loop in a cond: its saved draws, for the gradient)."""
    a = node.attrs
    out = []
    for k, (shape, _) in enumerate(node.outputs):
        vals = [(br, br.outputs[k]) for br in (a["then_branch"], a["else_branch"])]
        if not is_ragged_row(shape) or not any(_is_loop_stack(br, (v.node, v.index)) for br, v in vals):
            continue
        stacked = [_is_loop_stack(br, (v.node, v.index)) or _is_empty(br.shape(v)) for br, v in vals]
        if not all(stacked):
            raise Unsupported("an If output that is a loop's stack in one branch and a value in the other")
        out.append(k)   # (check() keeps it from the host: this function frees it, unless a caller takes it over)
    return out


def _without(node, stacks):
    """``node`` with the outputs ``stacks`` shown as static (lower_growing.branch_shaped_outputs
    handles the other outputs of unknown shape)."""
    if not stacks:
        return node
    outs = tuple((tuple(d or 0 for d in s), dt) if k in stacks else (s, dt) for k, (s, dt) in enumerate(node.outputs))
    return Node(node.op, node.inputs, node.attrs, outs, node.name)


# ---------------------------------------------------------------- While
def _keep_words(kb, node):
    """Per stacked output: the persistent word pair its memory is kept in
    (top-level kernels; a region's stacks are freed when it returns, but for
    those it returns: ESCAPES, the caller's ragged stack frees them)."""
    keep = []
    n = node.attrs["n_vars"]
    escaping = getattr(kb, "escaping_stacks", ())
    for j, (shape, _) in enumerate(node.outputs[n + 1:]):
        if is_dynamic(shape) and (kb.regions.node_pos, n + 1 + j) in escaping:
            keep.append(ESCAPES)
        elif is_dynamic(shape) and not kb.regions.nested:
            keep.append(kb.regions.persistent_words)
            kb.regions.persistent_words += 2
        else:
            keep.append(None)
    return keep


@contextmanager
def _count(kb, start, stop):
    """for i in range(start, stop) over i64 values known when the kernel runs; yields i."""
    b = kb.b
    ctr = kb.alloca(I64)
    b.store(start, ctr)
    head, body, end = (b.function.append_basic_block(f"count.{s}") for s in ("head", "body", "end"))
    b.branch(head)
    b.position_at_end(head)
    i = b.load(ctr)
    b.cbranch(b.icmp_signed("<", i, stop), body, end)
    b.position_at_end(body)
    yield i
    b.store(b.add(i, c64(1)), ctr)
    b.branch(head)
    b.position_at_end(end)


def _ragged_rows_freed(kb, d, depth, escapes):
    """An i64 counter of the rows of ragged stack ``d`` holding a descriptor (zero
    now). Unless the stack ``escapes`` (its caller frees it, rows and all: the loop
    writes the counter to its rows when done), the memory of each row (and, for a
    ``depth`` > 1 stack of stacks, of the rows' rows) is freed when the function
    returns, before ``d``'s own (finish hooks run in order: register this before
    stack_init)."""
    b = kb.b
    held = kb.alloca(I64)
    b.store(c64(0), held)
    if not escapes:
        kb.regions.finish_hooks.append(lambda: _free_rows(kb, d, b.load(held), depth))
    return held


def _free_rows(kb, d, rows, depth):
    """Frees the memory of the first ``rows`` rows of ragged stack ``d``: each a
    descriptor, of a stack of stacks itself when ``depth`` > 1."""
    b = kb.b
    data = b.inttoptr(b.load(_field(kb, d, 0)), I64.as_pointer())
    with _count(kb, c64(0), rows) as r:
        _free_ragged(kb, b.gep(data, [b.mul(r, c64(DESC_WORDS))]), depth - 1)


def _free_ragged(kb, d, depth):
    """Frees stack ``d``'s memory and, when its rows are stacks (``depth`` > 0 levels
    of them), theirs first, as many rows as its rows word says."""
    if depth > 0:
        _free_rows(kb, d, kb.b.load(_field(kb, d, 1)), depth)
    _stack_free(kb, d)


def _empty_rows(kb, base, start, stop):
    """Rows [start, stop) of a ragged stack at ``base``: empty descriptors (no memory to free)."""
    b = kb.b
    words = b.bitcast(base, I64.as_pointer())
    with _count(kb, b.mul(start, c64(DESC_WORDS)), b.mul(stop, c64(DESC_WORDS))) as w:
        b.store(c64(0), b.gep(words, [w]))


def _fail_if(kb, bad, failed):
    """A sliced input / stacked output without one row per iteration: error, no iterations."""
    kb.set_error(bad, ERR_STACK_ROWS)
    kb.b.store(kb.b.or_(kb.b.load(failed), bad), failed)


def lower_while(kb, node, outs, dry):
    a = node.attrs
    pos = kb.regions.node_pos
    n, c, nx, ny = a["n_vars"], a["n_caps"], a["n_xs"], a["n_ys"]
    var_specs = [node.outputs[k] for k in range(n)]
    grow = a.get("grow_vars", ())   # variables growing by rows: lower_growing.py
    pop = a.get("pop_vars", ())     # and shrinking by rows (read in place)
    stored = a.get("rows_vars", ())   # and of run-time rows, written in place (lower_growing.FixedRowsVar)
    if any(is_dynamic(s) for k, (s, _) in enumerate(var_specs) if k not in grow and k not in pop and k not in stored):
        raise Unsupported("a loop variable of unknown shape")
    if set(stored) - set(row_chains(a["body"], n)):
        raise Unsupported("a loop variable of run-time rows the body does not only store rows of")
    if any(is_dynamic(kb.shape(node.inputs[k])[1:]) or is_dynamic(var_specs[k][0][1:]) for k in grow):
        raise Unsupported("a growing loop variable entering with an unknown shape")
    tag = a.get("effects_tag", -1)
    body, cond, keep, grow_keep = _regions_of(kb, pos, lambda: (
        Region(kb, a["body"], f"r{pos}_body", tag, stacks_out=True),
        Region(kb, a["cond"], f"r{pos}_cond", tag) if a["cond"] is not None else None,
        _keep_words(kb, node), keep_words(kb, node)))
    # (unused then)
    fixed = [(1,) if k in grow or k in pop or k in stored else s for k, (s, _) in enumerate(var_specs)]
    # rows stored in one buffer (lower_row_store.py)
    in_place = in_place_vars(a["body"], n) - set(grow) - set(pop) - set(stored)
    cur = [kb.scratch_buffer(s, dt, "loop variable") for s, (_, dt) in zip(fixed, var_specs)]
    nxt = [kb.scratch_buffer((1,) if k in in_place else s, dt, "loop variable (next)")
           for k, (s, (_, dt)) in enumerate(zip(fixed, var_specs))]
    arena, status = _region_temps(kb, (body, cond))
    pred = kb.scratch_buffer((1,), dtypes.bool_, "loop predicate") if cond is not None else None
    body_fx = body.effect_outputs(kb)
    cond_fx = cond.effect_outputs(kb) if cond is not None else []
    if dry:
        return
    b = kb.b
    ins = node.inputs
    for k in range(n):
        if k not in grow and k not in pop and k not in stored:
            _copy(kb, cur[k].ptr, kb.buffers[ins[k]].ptr, *var_specs[k])
    # the two buffers of each loop variable swap roles every iteration (no copy)
    cur_p, nxt_p = [], []
    for k in range(n):
        for bufs, acc in ((cur, cur_p), (nxt, nxt_p)):
            slot = kb.alloca(I8P)
            b.store(b.bitcast((cur if k in in_place else bufs)[k].ptr, I8P), slot)
            acc.append(slot)
    caps = [kb.buffers[v].ptr for v in ins[n:n + c]]
    xs = ins[n + c:n + c + nx]
    limit = _load_i64(kb, kb.buffers[ins[-1]]) if a["limit"] is not None else None
    counted = a["limit"] == "count"
    rev = a["reverse"]
    i_ptr = kb.alloca(I64)
    b.store(c64(0), i_ptr)
    failed = kb.alloca(I1)
    b.store(ir.Constant(I1, 0), failed)
    added = {k: rows_appended(a["body"], k) for k in grow}
    # a variable a cond appends to: the body writes where this descriptor's word 0 says and
    # reports in word 1 how many rows it wrote (lower_growing.BranchShapedOutput, nested)
    added_desc = {k: b.bitcast(kb.alloca(ir.ArrayType(I64, DESC_WORDS)), I64.as_pointer())
                  for k in grow if added[k][1]}
    growing = {k: GrowingVar(kb, _desc(kb, outs[k]), grow_keep[k], var_specs[k][0][1:], var_specs[k][1])
               for k in grow}
    for k, gv in growing.items():
        gv.start(kb.buffers[ins[k]], kb.shape(ins[k]), failed)
    popping = {k: PoppedVar(kb, kb.buffers[ins[k]], popped_rows(a["body"], k)) for k in pop}
    rows_kept = {k: FixedRowsVar(kb, _desc(kb, outs[k]), grow_keep[k], var_specs[k][0][1:], var_specs[k][1])
                 for k in stored}
    for k, fv in rows_kept.items():   # (the body gets the descriptor: variable and next value alike)
        fv.start(kb.buffers[ins[k]], kb.shape(ins[k]), failed)
        b.store(fv.desc_ptr(), cur_p[k])
        b.store(fv.desc_ptr(), nxt_p[k])

    # sliced inputs: their row count must be the trip count
    x_base, x_row = [], []
    for v in xs:
        shape, dt = kb.shape(v), kb.dtype(v)
        row = _nbytes(shape[1:], dt) if shape is not None and not is_dynamic(shape[1:]) else None
        if shape is not None and len(shape) > 1 and is_ragged_row(shape[1:]):
            row = DESC_BYTES   # a ragged stack: the body gets row k's descriptor
        if row is None:
            raise Unsupported("a sliced loop input of unknown row shape")
        buf = kb.buffers[v]
        if is_dynamic(shape):
            d = _desc(kb, buf)
            rows = b.load(_field(kb, d, 1))
            base = b.inttoptr(b.load(_field(kb, d, 0)), I8P)
        else:
            rows, base = c64(shape[0]), b.bitcast(buf.ptr, I8P)
        if counted:
            _fail_if(kb, b.icmp_signed("!=", rows, limit), failed)
        x_base.append(base)
        x_row.append(row)

    # stacked outputs
    y_outs = outs[n + 1:n + 1 + ny]
    y_info = []
    for j, (ob, (shape, dt)) in enumerate(zip(y_outs, node.outputs[n + 1:])):
        row_shape = a["y_specs"][j][0]
        ragged = ragged_depth(row_shape)   # (each row: the body's nested loop's stack)
        if row_shape is None or (is_dynamic(row_shape) and not ragged):
            raise Unsupported("a stacked loop output of unknown row shape")
        row = DESC_BYTES if ragged else _nbytes(row_shape, dt)
        if is_dynamic(shape):
            d = _desc(kb, ob)
            held = _ragged_rows_freed(kb, d, ragged, keep[j] is ESCAPES) if ragged else None
            if keep[j] is ESCAPES:   # the caller's ragged stack takes it over (and frees it)
                for w in range(DESC_WORDS):
                    b.store(c64(0), _field(kb, d, w))
            else:
                _stack_init(kb, d, keep[j])
            if counted:   # every row is written: reserve them all now
                with b.if_then(b.not_(b.load(failed))):
                    b.store(b.or_(b.load(failed), _stack_reserve(kb, d, limit, row)), failed)
                    if ragged:
                        with b.if_then(b.not_(b.load(failed))):
                            _empty_rows(kb, b.inttoptr(b.load(_field(kb, d, 0)), I8P), c64(0), limit)
                            b.store(limit, held)
            y_info.append(("dyn", d, row, None if keep[j] is ESCAPES else keep[j], held))
        else:
            if counted and shape[0] is not None:
                _fail_if(kb, b.icmp_signed("!=", c64(shape[0]), limit), failed)
            y_info.append(("static", ob.ptr, row, None, None))

    head = kb.b.function.append_basic_block("while.head")
    step = kb.b.function.append_basic_block("while.body")
    done = kb.b.function.append_basic_block("while.end")
    b.branch(head)
    b.position_at_end(head)
    i = b.load(i_ptr)
    go = b.and_(b.not_(b.load(failed)), kb.no_error_yet())   # (as lower_if: after a failed op, no iteration runs)
    if limit is not None:
        go = b.and_(go, b.icmp_signed("<", i, limit))
    check = kb.b.function.append_basic_block("while.cond")
    b.cbranch(go, check, done)
    b.position_at_end(check)
    if cond is not None:
        cond.call(kb, [b.load(p) for p in cur_p] + caps, [pred.ptr], arena.ptr, status.ptr, cond_fx)
        bad = _propagate_status(kb, status)
        p = b.load(b.bitcast(pred.ptr, I8P))
        b.cbranch(b.and_(b.not_(bad), b.icmp_unsigned("!=", p, ir.Constant(I8, 0))), step, done)
    else:
        b.branch(step)
    b.position_at_end(step)
    k = b.sub(b.sub(limit, c64(1)), i) if rev else i
    slices = [_row_ptr(kb, base, k, row) for base, row in zip(x_base, x_row)]
    y_ptrs = []
    new_ragged_rows = []   # (a loop that is not counted reserves row k now: emptied once it exists)
    stop = ir.Constant(I1, 0)
    for kind, ref, row, _, held in y_info:
        if kind == "static":
            y_ptrs.append(_row_ptr(kb, ref, k, row))
            continue
        if not counted:
            stop = b.or_(stop, _stack_reserve(kb, ref, b.add(k, c64(1)), row))
            if held is not None:
                new_ragged_rows.append((ref, held))
        y_ptrs.append(_row_ptr(kb, b.inttoptr(b.load(_field(kb, ref, 0)), I8P), k, row))
    for k_, gv in growing.items():   # the body reads the variable as empty and writes its new rows in place
        bad, data, tail = gv.reserve(added[k_][0])
        stop = b.or_(stop, bad)
        b.store(data, cur_p[k_])
        if k_ in added_desc:
            b.store(b.ptrtoint(tail, I64), added_desc[k_])
            tail = b.bitcast(added_desc[k_], I8P)
        b.store(tail, nxt_p[k_])
    for k_, pv in popping.items():   # the body reads the rows it pops in place
        short, rows = pv.take()
        stop = b.or_(stop, short)
        b.store(rows, cur_p[k_])
        b.store(rows, nxt_p[k_])   # (its output then is empty: nothing is written)
    grow_ok = kb.b.function.append_basic_block("while.call")
    b.cbranch(stop, done, grow_ok)
    b.position_at_end(grow_ok)
    for ref, held in new_ragged_rows:
        _empty_rows(kb, b.inttoptr(b.load(_field(kb, ref, 0)), I8P), k, b.add(k, c64(1)))
        b.store(b.add(k, c64(1)), held)
    body.call(kb, [b.load(p) for p in cur_p] + caps + slices, [b.load(p) for p in nxt_p] + y_ptrs, arena.ptr,
              status.ptr, body_fx)
    bad = _propagate_status(kb, status)
    latch = kb.b.function.append_basic_block("while.latch")
    b.cbranch(bad, done, latch)
    b.position_at_end(latch)
    for cp, np_ in zip(cur_p, nxt_p):
        c_, n_ = b.load(cp), b.load(np_)
        b.store(n_, cp)
        b.store(c_, np_)
    for k_, gv in growing.items():
        gv.advance(b.load(_field(kb, added_desc[k_], 1)) if k_ in added_desc else c64(added[k_][0]))
    b.store(b.add(i, c64(1)), i_ptr)
    b.branch(head)
    b.position_at_end(done)

    trips = b.load(i_ptr)
    for k_ in range(n):
        if k_ not in grow and k_ not in pop and k_ not in stored:
            _copy(kb, outs[k_].ptr, b.load(cur_p[k_]), *var_specs[k_])
    for gv in list(growing.values()) + list(rows_kept.values()):
        gv.finish()
    for k_, pv in popping.items():
        pv.finish(outs[k_])
    b.store(b.trunc(trips, I32), b.bitcast(outs[n].ptr, I32.as_pointer()))
    for kind, ref, row, kw, held in y_info:
        if kind == "dyn":
            # a counted loop fills every row it reserved (none for a negative count); a ragged
            # stack says how many rows hold a descriptor (also after a failed iteration: what frees
            # it reads that word)
            rows = b.select(b.icmp_signed("<", limit, c64(0)), c64(0), limit) if counted else trips
            if held is not None:
                h = b.load(held)
                rows = b.select(b.icmp_signed("<", h, c64(0)), c64(0), h)
            b.store(rows, _field(kb, ref, 1))
            _stack_keep(kb, ref, kw)


# ---------------------------------------------------------------- tf.print inside a region
def _call_region_hook(kb, node):
    """ops/logging_ops.py's hook, called with (the top-level region's tag, the node's
    site id, pointers to its input tensors)."""
    b = kb.b
    ptrs = [kb.buffers[v].ptr for v in node.inputs]
    block = kb.alloca(ir.ArrayType(I8P, max(len(ptrs), 1)))
    for k, p in enumerate(ptrs):
        b.store(b.bitcast(p, I8P), b.gep(block, [ir.Constant(I32, 0), ir.Constant(I32, k)]))
    fn = kb.b.module.globals.get(HOOK_SYMBOL)
    if fn is None:
        fn = ir.Function(kb.b.module, ir.FunctionType(ir.VoidType(), [I64, I64, I8P.as_pointer()]), HOOK_SYMBOL)
    with around_host_call(kb):           # Python code: with MXCSR as numpy expects it
        b.call(fn, [c64(getattr(kb, "effects_tag", -1)), c64(node.attrs["site"]), b.bitcast(block, I8P.as_pointer())])


def lower_region_print(kb, node, outs, dry):
    """A tf.print: the hook logs the values; the node's output is a token (0)."""
    if dry:
        return
    b = kb.b
    with b.if_then(kb.no_error_yet()):   # a printed value from a failed op is garbage: TF never prints it
        _call_region_hook(kb, node)
    b.store(ir.Constant(I32, 0), b.bitcast(outs[0].ptr, I32.as_pointer()))


def lower_region_assert(kb, node, outs, dry):
    """A tf.Assert: where its condition is false (and nothing failed before it) the hook
    keeps TF's message and the run fails with ERR_ASSERT; the output is a token (0)."""
    if dry:
        return
    b = kb.b
    cond = b.load(b.bitcast(kb.buffers[node.inputs[0]].ptr, I8P))
    failed = b.and_(kb.no_error_yet(), b.icmp_unsigned("==", cond, ir.Constant(I8, 0)))
    with b.if_then(failed):
        _call_region_hook(kb, node)
    kb.set_error(failed, ERR_ASSERT)
    b.store(ir.Constant(I32, 0), b.bitcast(outs[0].ptr, I32.as_pointer()))


MATERIALISE = {"If": lower_if, "While": lower_while, "RegionPrint": lower_region_print,
               "RegionAssert": lower_region_assert}
NEEDS_BUFFER = {"If": "all", "While": "all", "RegionPrint": "all", "RegionAssert": "all"}


def check(program, top_level=False, stacks_out=False):
    """Dynamic stacks may only flow between While ops, never into another op
    (their size is not a shape the rest of the kernel knows). A kernel may return
    a branch-shaped If output (a branch's to the enclosing If, the top level's to
    the host); a top-level kernel also a growing loop variable (lower_growing.py;
    the host reads them after the call: dynamic_outputs.py)."""
    dyn = set()
    for i, n in enumerate(program.nodes):
        for k, (s, _) in enumerate(n.outputs):
            if is_dynamic(s):
                dyn.add((i, k))
    if not dyn:
        return
    rows = plan_rows(program)   # the ops lower_rows.py computes on values of run-time rows
    stores = in_place_rows(program)   # SetRows storing into a loop variable of run-time rows in place
    for i, n in enumerate(program.nodes):
        # (an If hands such a value to its branches, whose own check sees who reads it there)
        v = next((v for v in n.inputs if (v.node, v.index) in dyn), None) \
            if n.op not in ("While", "If") and i not in rows and i not in stores else None
        if v is not None:
            raise Unsupported(f"{n.op} reads a value of unknown shape ({_origin(program, v)}): the kernel "
                              "returns such a value but computes nothing on it")
    for _, v in program.var_writes:
        if (v.node, v.index) in dyn:
            raise Unsupported("a variable assigned a value of unknown shape")
    fetched = [(v.node, v.index) for v in program.outputs if v is not None]
    for v in fetched:
        # (a region may return a nested loop's stack: a row of its loop's ragged stack, or its If's output)
        stack = v in dyn and _is_loop_stack(program, v)
        shaped = ((_returns_shaped(program, v, top_level) and not stack) or (stacks_out and stack)
                  or (top_level and v[0] in rows) or v[0] in stores)
        if v in dyn and not (shaped and fetched.count(v) == 1):
            raise Unsupported(f"a fetched value of unknown shape ({_origin(program, v)})")
    if not top_level:
        # a branch-shaped If inside a region writes where its caller says: only its outputs have a caller
        for i, n in enumerate(program.nodes):
            if n.op == "If" and any((i, k) in dyn and (i, k) not in fetched for k in range(len(n.outputs))):
                raise Unsupported("a value of unknown shape inside a branch that is not the branch's output")


def _origin(program, v):
    """Where a value of unknown shape comes from, for explain."""
    node, index = (v.node, v.index) if hasattr(v, "node") else v   # (a Value or a (node, index) pair)
    n = program.nodes[node]
    why = f": {n.attrs['dynamic']}" if "dynamic" in n.attrs else ""   # (passes/regions.region_node)
    if n.op == "While" and index in n.attrs.get("grow_vars", ()):
        return f"loop variable {index} of {n.name}, grown by rows at run time"
    if n.op == "While" and index > n.attrs["n_vars"]:
        return f"the per-iteration values {n.name} stacks over a trip count known at run time{why}"
    if n.op == "While":
        return f"loop variable {index} of {n.name}, which changes shape between iterations{why}"
    if n.op == "If":
        return f"output {index} of {n.name}, shaped by the branch taken{why}"
    return f"output {index} of {n.op} {n.name}"


def _is_loop_stack(program, v):
    """A While's dynamic stack (of static rows, or ragged itself), or an If's output
    that is one in a branch and empty in the other (_stack_outputs)."""
    n = program.nodes[v[0]]
    if not is_ragged_row(n.outputs[v[1]][0]):
        return False
    if n.op == "If":
        vals = [(br, br.outputs[v[1]]) for br in (n.attrs["then_branch"], n.attrs["else_branch"])]
        if not all(isinstance(br, Program) for br, _ in vals):
            return False
        stacked = [_is_loop_stack(br, (u.node, u.index)) for br, u in vals]
        return any(stacked) and all(st or _is_empty(br.shape(u)) for (br, u), st in zip(vals, stacked))
    return n.op == "While" and v[1] > n.attrs["n_vars"]


def _is_empty(shape):
    return not is_dynamic(shape) and 0 in shape


def _returns_shaped(program, v, top_level):
    """A branch-shaped If output, or (top level) a growing loop variable (lower_growing.py)."""
    n = program.nodes[v[0]]
    if n.op == "If":
        return n.outputs[v[1]][0] is not None
    if top_level and n.op == "ZeroRows":   # (lower_row_store.zero_rows keeps its memory for the host)
        return True
    return (top_level and n.op == "While" and v[1] in n.attrs.get("grow_vars", ()) + n.attrs.get("rows_vars", ())
            and not is_dynamic(n.outputs[v[1]][0][1:]))
