"""Values whose leading dimension is known only when the kernel runs ("row-dynamic"):
shape (None, d1, ..., dk) with the rest static, e.g. a While variable grown by rows
(a dynamic TensorArray's stack) or an If output whose branches differ in dim 0.

Contiguous row-major makes such a value R rows of a static row, R an i64 the kernel
holds: ``Rows`` is the one place that knows it (a Buffer whose ``rows`` is that i64;
its strides never use dim 0). Every generator and reduction of the kernel then works
on it unchanged once its loops over dim 0 run R times:

* ``plan`` finds, before fusion, the nodes that read a row-dynamic value (a RowsNode
  each). A value's rows are those of its *source* (the While / If output it derives
  from): two row-dynamic operands of one op from different sources are checked equal
  when it runs (ERR_ROWS_MISMATCH, TF's "Incompatible shapes"), except that an
  elementwise op broadcasts one row against R as TF does, its result rows of its own
  (and SumToShape, its gradient, sums the R rows back): lower_rows_broadcast.py. Anything
  else raises Unsupported (the interpreter runs it; explain says why). Matmuls:
  lower_rows_matmul.py; layout ops within a row: lower_rows_layout.py; rows picked by
  index / slice (x[k], x[a:b], tf.gather): lower_rows_gather.py; concat / split along
  the rows: lower_rows_concat.py. Reshapes are views (``alias``); one splitting or
  merging rows (the merge's divisibility checked when it runs), a row slice and a concat
  along rows give a value whose rows are its own (a source).
* Elementwise ops (and the Unreduce of a reduction's gradient) are fused like any
  elementwise value (fusion_plan.py: materialised only when fetched, read twice or
  read through a buffer): a chain of them is computed inside the one row loop of
  what reads it, intermediates in registers (each op its own loop and heap buffer
  took 57 loops for the 60-node chains of test_control_flow_differential).
* ``lower`` emits the materialised ones: a run-time row loop around the static row
  body (a flat vector loop when every value the chain reads is the whole value or
  one element); Sum/Mean/Max/Min/Prod/Any/All and SumToShape, reading their chain
  inline, through lower_reduction.emit_reduce with dim 0 a run-time extent (fixed
  order: bit-identical run to run); Shape / SizeRatio at run time. Every loop runs
  over the source's rows while no op has failed, 0 rows after (a failed allocation
  leaves a short buffer: nothing reads or writes past it).
* A row-dynamic result lives in heap memory (codegen/stacks.py: {data, rows,
  capacity}, ERR_STACK_ALLOC when it cannot be had, freed when the kernel returns),
  or, fetched by a top-level kernel, in a persistent word pair handed to the host
  as a descriptor (dynamic_outputs.py). After an op failed, every row count reads
  as 0, so nothing computes from an unwritten descriptor.
"""
from dataclasses import dataclass

from llvmlite import ir

from ..ops.registry import REGISTRY
from ..passes.ir import Value
from ..shapes import normalize_axes
from .irutil import ERR_RESHAPE_ROWS, ERR_ROWS_MISMATCH, I64, VW, Buffer, Unsupported, c64, mem_type, row_elems, store_buf
from . import lower_rows_broadcast as rows_broadcast, lower_rows_concat as rows_concat, lower_rows_gather as rows_gather, \
    lower_rows_matmul as rows_matmul
from .lower_rows_layout import emit_tile_grad, is_tile_grad, keeps_rows
from .lower_reduction import emit_reduce, reduction_axes
from .lowering_tables import tables
from .stacks import field, stack_init, stack_keep, stack_reserve

REDUCE = {"Sum": "sum", "Mean": "mean", "Max": "max", "Min": "min", "Prod": "prod", "Any": "any", "All": "all"}
SIZES = ("Shape", "SizeRatio")   # read only the shape of a row-dynamic value


def row_dynamic(shape):
    return shape is not None and len(shape) >= 1 and shape[0] is None and None not in shape[1:]


class Rows(Buffer):
    """A row-dynamic value in memory: ``ptr`` its data, ``rows`` its run-time dim 0 (i64)."""
    __slots__ = ("rows",)

    def __init__(self, ptr, shape, dtype, rows, name=""):
        super().__init__(ptr, shape, dtype, name)
        self.rows = rows

    @property
    def row_elems(self):
        return row_elems(self.shape)


# ---------------------------------------------------------------- planning
def _sources(program):
    """The row-dynamic values the kernel produces itself: growing While variables
    (lower_growing.py) and branch-shaped If outputs differing only in dim 0."""
    src = {}
    for i, n in enumerate(program.nodes):
        if n.op == "While":
            ks = tuple(n.attrs.get("grow_vars", ())) + tuple(n.attrs.get("pop_vars", ())) + \
                tuple(n.attrs.get("rows_vars", ()))   # (lower_growing.FixedRowsVar)
        elif n.op == "If" and not isinstance(n.attrs.get("then_branch"), type(None)) and \
                hasattr(n.attrs["then_branch"], "nodes"):
            ks = range(len(n.outputs))
        elif n.op == "ZeroRows":   # (ops/zero_rows.py, lowered by lower_row_store.py)
            ks = (0,)
        else:
            continue
        for k in ks:
            if row_dynamic(n.outputs[k][0]):
                src[Value(i, k)] = Value(i, k)
    return src


@dataclass(frozen=True)
class RowsNode:
    """How lower() emits a node reading a row-dynamic value."""
    how: str       # "nest" (elementwise / Unreduce), "reduce", "size", "mm_<form>" (lower_rows_matmul.py), ...
    src: Value     # the source whose rows it runs over (a While / If output)
    inline: bool   # elementwise (or Unreduce): its readers may compute it inside their own row loop
    flat: bool     # every value its computation reads (through inline ops) is its operand's whole
                   # shape or one element: one flat loop over rows x row elements computes it
    check: tuple = ()   # other sources its operands' rows come from: checked equal to src's;
                        # bcast / bmm_bcast: each input's source (None: static); rowsum: g's source;
                        # bcast_to: x's source (ref's is src);
                        # rowcat / rowsplit: each part's source (None: static rows);
                        # rowslice_grad: g's source (checked against the slice's count)


def plan(program):
    """{node index: RowsNode} for the nodes reading a row-dynamic value; raises
    Unsupported for one this module cannot lower."""
    key = _sources(program)   # row-dynamic value -> its source
    elementwise = tables()[0]
    out = {}
    for i, n in enumerate(program.nodes):
        if n.op in ("While", "If"):
            continue
        dyn = [v for v in n.inputs if v in key]
        if not dyn:
            continue
        # rows from different sources (two loops, a loop and a cond): the first operand's,
        # the others checked equal to it when the node runs (as TF's "Incompatible shapes")
        src = key[dyn[0]]
        check = tuple(sorted({key[v] for v in dyn} - {src}, key=lambda u: (u.node, u.index)))
        how = _how(program, n, dyn, elementwise)
        if how == "alias" and row_elems(n.outputs[0][0]) != row_elems(program.shape(n.inputs[0])):
            # a reshape that splits or merges rows ([R, 4] -> [-1]: 4R rows): a source of its
            # own rows, counted from x's (a ReshapeLike's shape-only ref is not read)
            if any(key.get(v, src) != src for v in _data_inputs(n)):
                raise Unsupported(f"{n.op} of values of different run-time rows")
            out[i] = RowsNode(how, src, False, False)
            key[Value(i, 0)] = Value(i, 0)
            continue
        if how is None and rows_broadcast.static_rows(program, n, dyn, elementwise):   # x * w, w of [T, 1]
            out[i] = RowsNode("bcast_static", src, False, False, tuple(key.get(v) for v in n.inputs))
            continue
        if how is None and n.op == "SumToShape" and n.inputs[0] not in dyn and \
                tuple(program.shape(n.inputs[0])[1:]) == tuple(n.outputs[0][0][1:]):   # its gradient
            out[i] = RowsNode("rowsum", key[n.inputs[1]], False, False, (program.shape(n.inputs[0])[0],))
            _row_outputs(n, i, key, key[n.inputs[1]])
            continue
        if how is None:
            region = _unspecialised(program, n, key)
            if region:   # (the root cause: not this node, a region the compiler declines)
                raise Unsupported(f"{n.op} reads {region}")
            shapes = [list(program.nodes[v.node].outputs[v.index][0] or ()) for v in n.inputs]
            raise Unsupported(f"{n.op} reads a value whose leading dimension is known only at run time "
                              f"({_describe(program, src)}): not lowered over run-time rows for inputs of "
                              f"shapes {shapes}")
        if how in ("rowcat", "rowsplit"):   # lower_rows_concat.py: parts of different rows
            parts = rows_concat.part_sources(n, i, key, Value)
            out[i] = RowsNode(how, key[dyn[0]], False, False, parts)
            if how == "rowcat":
                key[Value(i, 0)] = Value(i, 0)
            else:
                for k, p in enumerate(parts):
                    if p is not None:
                        key[Value(i, k)] = p
            continue
        if how == "rowslice":   # x[a:b]: rows of its own, a source of its own
            out[i] = RowsNode(how, src, False, False)
            key[Value(i, 0)] = Value(i, 0)
            continue
        if how == "rowslice_grad":   # rows of the sliced value; g's (the slice's) checked when it runs
            out[i] = RowsNode(how, key[n.inputs[1]], False, False, (key[n.inputs[0]],))
            _row_outputs(n, i, key, key[n.inputs[1]])
            continue
        if check and how == "nest" and n.op in elementwise and n.op != "AddN" and len(n.outputs) == 1 and \
                not any(REGISTRY[n.op].is_shape_only(k) for k in range(len(n.inputs))):
            # operands of different run-time rows: broadcast as TF does (one row against
            # R), the result rows of its own (lower_rows_broadcast.py); TF's AddN (the sum
            # of gradients) takes equal shapes only: checked equal
            out[i] = RowsNode("bcast", src, False, False, tuple(key.get(v) for v in n.inputs))
            key[Value(i, 0)] = Value(i, 0)
            continue
        if check and n.op == "BroadcastToShapeOf" and n.inputs[0] in key and n.inputs[1] in key and \
                key[n.inputs[0]] != key[n.inputs[1]] and len(program.shape(n.inputs[0])) == len(n.outputs[0][0]):
            # x broadcast to ref's shape, rows of two sources (a second derivative through a
            # broadcast between two loops' values): ref's rows, x's one row read for each
            # (lower_rows_broadcast.py); x of other rows is TF's "Incompatible shapes"
            out[i] = RowsNode("bcast_to", key[n.inputs[1]], False, False, (key[n.inputs[0]],))
            _row_outputs(n, i, key, key[n.inputs[1]])
            continue
        if check and how == "mm_bmm":   # TF broadcasts its batch dim too (lower_rows_broadcast.py)
            out[i] = RowsNode("bmm_bcast", src, False, False, tuple(key.get(v) for v in n.inputs))
            key[Value(i, 0)] = Value(i, 0)
            continue
        if check and how == "reduce" and n.op == "SumToShape" and n.outputs[0][0] == program.shape(n.inputs[0]):
            # the gradient of such a broadcast: g's rows summed into x's one, or x's rows as they are
            out[i] = RowsNode("rowsum", key[n.inputs[1]], False, False, (key[n.inputs[0]],))
            _row_outputs(n, i, key, key[n.inputs[1]])
            continue
        if how == "layout":   # an index map within each row: computed inline, never flat
            out[i] = RowsNode("nest", src, not check, False, check)
            _row_outputs(n, i, key, src)
            continue
        inline = how == "nest" and not check   # (a checked node runs its check itself: in memory)
        if how == "reduce":
            flat = _flat(program, out, n.inputs[0], program.shape(n.inputs[0]))
        else:
            flat = all(_flat(program, out, u, n.outputs[0][0]) for u in _data_inputs(n))
        out[i] = RowsNode(how, src, inline, flat, check)
        _row_outputs(n, i, key, src)
    return out


def _row_outputs(n, i, key, src):
    """Node i's outputs of run-time rows have its source's rows."""
    for k, (s, _) in enumerate(n.outputs):
        if s is None or any(d is None for d in s):
            if not row_dynamic(s):
                raise Unsupported(f"{n.op} on run-time rows gives a shape {list(s or [])} other than "
                                  "(rows, static...)")
            key[Value(i, k)] = src


def _flat(program, planned, v, full):
    """Whether v (of shape ``full`` or one element) is computed from values of shape
    ``full`` or of one element only, through the ops read inline (each planned node's
    own answer, found once in node order: a walk of the chain would be exponential in
    its shared values)."""
    s = program.shape(v)
    if all(d == 1 for d in s):
        return True
    if tuple(s) != tuple(full):
        return False
    rn = planned.get(v.node)
    return rn is None or not rn.inline or rn.flat   # (not inline: a value in memory)


def _data_inputs(n):
    return [u for k, u in enumerate(n.inputs) if not REGISTRY[n.op].is_shape_only(k)]


def _unspecialised(program, n, key):
    """What explain says of an input of ``n`` of unknown shape that a While / If gives
    which could not be specialised (passes/regions.region_node's reason): the interpreter
    runs that region, so its outputs are no row sources; None if there is none."""
    for v in n.inputs:
        src = program.nodes[v.node]
        s = src.outputs[v.index][0]
        if v not in key and "dynamic" in src.attrs and (s is None or None in s):
            return (f"output {v.index} of {src.op} {src.name}, which the compiler does not specialise "
                    f"(its shapes change at run time: {src.attrs['dynamic']})")
    return None


def _describe(program, v):
    n = program.nodes[v.node]
    if n.op == "While":
        return f"loop variable {v.index} of {n.name}, grown by rows at run time"
    if n.op == "If":
        return f"output {v.index} of {n.name}, shaped by the branch taken"
    return f"{n.op} {n.name} of a value of run-time rows"


def _how(program, n, dyn, elementwise):
    shape = lambda v: program.nodes[v.node].outputs[v.index][0]   # noqa: E731
    out_shape = n.outputs[0][0]
    if n.op in REDUCE or n.op == "SumToShape":
        if n.inputs[0] not in dyn or any(v in dyn for v in n.inputs[1:]) and n.op != "SumToShape":
            return None
        red = _reduced(n, shape(n.inputs[0]))
        if row_dynamic(out_shape) == (0 in red):   # dim 0 kept <=> the result has run-time rows
            return None
        return "reduce"
    if n.op in SIZES:
        return "size"
    if n.op in tables()[3]:   # reshape-like (ALIAS): a view of the same memory
        # rows kept, each row split into whole rows of the result, or rows merged (R x in_row
        # elements must make whole rows of the result: checked when it runs, alias())
        if n.inputs[0] not in dyn or not row_dynamic(out_shape) or row_elems(out_shape) == 0:
            return None
        return "alias"
    if n.op in ("MatMul", "BatchMatMulV2"):
        form = rows_matmul.how(program, n, dyn)   # its own file: lower_rows_matmul.py
        return form and "mm_" + form
    form = rows_concat.how(program, n, dyn)   # concat / split along the rows
    if form:
        return form
    form = rows_gather.how(program, n, dyn)   # rows picked by indices: lower_rows_gather.py
    if form:
        return form
    if not row_dynamic(out_shape):
        return None
    if n.op == "Unreduce":
        g_static = n.inputs[0] not in dyn
        axes = _reduced(n, out_shape)
        return "nest" if n.inputs[1] in dyn and g_static == (0 in axes) else None
    if is_tile_grad(program, n, dyn):   # lower_rows_layout.py
        return "tile_grad"
    if n.op in tables()[1] and keeps_rows(program, n, dyn):   # lower_rows_layout.py
        return "layout"
    if n.op not in elementwise:
        return None
    R = len(out_shape)
    for v in n.inputs:
        s = shape(v)
        if v in dyn:
            if len(s) != R:   # its dim 0 must be the result's
                return None
        elif len(s) == R and s[0] != 1:   # a static operand repeats per row, never spans rows
            return None
    return "nest"


def _reduced(n, in_shape):
    """The input dims a reduction-like node reduces."""
    if n.op == "SumToShape":
        target = n.outputs[0][0]
        extra = len(in_shape) - len(target)
        return {d for d in range(len(in_shape))
                if d < extra or (target[d - extra] == 1 and in_shape[d] != 1)}
    if n.op == "Unreduce" and n.attrs["axis"] is None:
        return set(range(len(in_shape)))
    if n.op == "Unreduce":
        return set(normalize_axes(n.attrs["axis"], len(in_shape)))
    return reduction_axes(n.attrs["axis"], len(in_shape))


# ---------------------------------------------------------------- emission
def view(kb, desc_buf, shape, dt):
    """The Rows of a value a While / If (or this module) left in descriptor ``desc_buf``."""
    b = kb.b
    d = b.bitcast(desc_buf.ptr, I64.as_pointer())
    ok = kb.no_error_yet()   # after a failure the descriptor may never have been written
    rows = b.select(ok, b.load(field(kb, d, 1)), c64(0))
    data = b.inttoptr(b.select(ok, b.load(field(kb, d, 0)), c64(0)), mem_type(dt).as_pointer())
    return Rows(data, shape, dt, rows, desc_buf.name)


def rows_of(kb, buf):
    """The Rows of a materialised value of run-time rows: itself, or read through the
    descriptor a While / If left (a value no op of this module reads)."""
    return buf if isinstance(buf, Rows) else view(kb, buf, buf.shape, buf.dtype)


def _alloc(kb, desc_buf, shape, dt, rows, keep):
    """Heap memory for ``rows`` rows of a result (kept for the host when ``keep``)."""
    b = kb.b
    d = b.bitcast(desc_buf.ptr, I64.as_pointer())
    stack_init(kb, d, keep)
    out = Rows(None, shape, dt, None, desc_buf.name)
    bad = stack_reserve(kb, d, rows, out.row_elems * dt.size)
    out.rows = b.select(bad, c64(0), rows)
    b.store(out.rows, field(kb, d, 1))
    out.ptr = b.inttoptr(b.load(field(kb, d, 0)), mem_type(dt).as_pointer())
    stack_keep(kb, d, keep)
    return out


def lower(kb, node, outs, rn, keep):
    """Emits ``node`` (planned as RowsNode ``rn``); returns its output buffers (Rows
    where row-dynamic). keep: output index -> persistent word pair (fetched results).

    Every row-dynamic value of one source has the source's rows, unless an op failed
    (a heap allocation): its result then has 0 rows, and so that no loop reads or
    writes past a short buffer every loop here runs over ``_live`` rows, 0 once the
    status word is set."""
    b = kb.b
    if rn.how == "rowcat":
        shape, dt = node.outputs[0]
        live = lambda r: _live(kb, r)   # noqa: E731
        res = [_alloc(kb, outs[0], shape, dt, rows_concat.rows_of_concat(kb, node, rn.check, live), keep.get(0))]
        rows_concat.emit_concat(kb, node, res[0], rn.check, live)
        return res
    if rn.how == "rowsplit":
        live = lambda r: _live(kb, r)   # noqa: E731
        counts = rows_concat.split_counts(kb, node, rn.check, _live(kb, kb.buffers[rn.src].rows), live)
        res = [_alloc(kb, ob, shape, dt, _live(kb, n), keep.get(k)) if row_dynamic(shape) and ob is not None else ob
               for k, (ob, (shape, dt), n) in enumerate(zip(outs, node.outputs, counts))]
        rows_concat.emit_split(kb, node, res, counts)
        return res
    if rn.how == "rowslice":   # rows of its own: the slice's count of the source's
        rows = _live(kb, kb.buffers[rn.src].rows)
        _, n, _ = rows_gather.slice_rows(kb, node, rows)
        shape, dt = node.outputs[0]
        res = [_alloc(kb, outs[0], shape, dt, n, keep.get(0))]
        rows_gather.emit(kb, node, res, rows, rn.how, None)
        return res
    if rn.how == "rowslice_grad":   # g's rows are checked against the slice's count there
        rows = _live(kb, kb.buffers[rn.src].rows)
        shape, dt = node.outputs[0]
        res = [_alloc(kb, outs[0], shape, dt, rows, keep.get(0))]
        rows_gather.emit(kb, node, res, rows, rn.how, kb.buffers[rn.check[0]].rows)
        return res
    if rn.how == "bcast_static":   # lower_rows_broadcast.py
        return rows_broadcast.emit_static(kb, node, rn, outs, lambda r: _live(kb, r))
    if rn.how in ("bcast", "rowsum", "bcast_to"):   # lower_rows_broadcast.py
        return rows_broadcast.emit(kb, node, rn, lambda shape, dt, rows: _alloc(
            kb, outs[0], shape, dt, _live(kb, rows), keep.get(0)), lambda r: _live(kb, r))
    if rn.how == "bmm_bcast":
        return rows_broadcast.emit_bmm(kb, node, rn, lambda shape, dt, rows: _alloc(
            kb, outs[0], shape, dt, _live(kb, rows), keep.get(0)), *(_operand(kb, v) for v in node.inputs))
    for o in rn.check:   # (after the check fails every loop below runs 0 rows)
        kb.set_error(b.icmp_signed("!=", kb.buffers[rn.src].rows, kb.buffers[o].rows), ERR_ROWS_MISMATCH)
    rows = _live(kb, kb.buffers[rn.src].rows)
    res = []
    for k, (ob, (shape, dt)) in enumerate(zip(outs, node.outputs)):
        res.append(_alloc(kb, ob, shape, dt, rows, keep.get(k)) if row_dynamic(shape) and ob is not None else ob)
    if rn.how in ("gather", "gather_grad", "gather_grad_inner", "row", "row_grad"):
        x = _operand(kb, node.inputs[0]) if rn.how == "gather" else None
        rows_gather.emit(kb, node, res, _live(kb, rows), rn.how, x)
        return res
    if rn.how == "tile_grad":
        emit_tile_grad(kb, node, res[0], _live(kb, rows))
        return res
    if rn.how.startswith("mm_"):
        a, bv = (_operand(kb, v) for v in node.inputs)
        rows_matmul.emit(kb, node, res, _live(kb, rows), rn.how[3:], a, bv)
        return res
    {"nest": _nest, "reduce": _reduce, "size": _size}[rn.how](kb, node, res, _live(kb, rows), rn.flat)
    return res


def alias(kb, node, sb):
    """The Rows a reshape-like node (planned "alias") gives of its input's Rows ``sb``:
    the same memory, each input row making in_row / out_row rows of the result; where
    out_row does not divide in_row (rows merged, [R, 2] -> [-1, 4]) the R x in_row
    elements must be whole rows of the result, else TF's InvalidArgumentError
    (ERR_RESHAPE_ROWS) and 0 rows."""
    shape, dt = node.outputs[0]
    b = kb.b
    e_in, e_out = sb.row_elems, row_elems(shape)
    if e_in % e_out == 0:
        per = e_in // e_out
        rows = sb.rows if per == 1 else b.mul(sb.rows, c64(per))
    else:
        total = b.mul(sb.rows, c64(e_in))
        bad = b.icmp_signed("!=", b.srem(total, c64(e_out)), c64(0))
        kb.set_error(bad, ERR_RESHAPE_ROWS)
        rows = b.select(bad, c64(0), b.sdiv(total, c64(e_out)))
    return Rows(sb.ptr, shape, dt, rows, sb.name)


def copy_out(kb, out_buf, src, keep):
    """A fetched value of run-time rows read through a view (a reshape of one): copied
    into memory of its own, kept for the host (``keep``: its persistent word pair)."""
    dst = _alloc(kb, out_buf, src.shape, src.dtype, _live(kb, src.rows), keep)
    b = kb.b
    with kb.loop(b.mul(dst.rows, c64(src.row_elems))) as i:
        b.store(b.load(b.gep(src.ptr, [i])), b.gep(dst.ptr, [i]))


def dry(kb, node, rn):
    """The temporaries ``node`` will ask for (the kernel's dry run)."""
    if rn.how.startswith("mm_"):
        rows_matmul.dry(kb, node, rn.how[3:])
    elif rn.how == "gather_grad_inner":
        rows_gather.dry(kb, node)


def _operand(kb, v):
    """The buffer of an operand read from memory: Rows where it has run-time rows."""
    buf = kb.buffers[v]
    return rows_of(kb, buf) if row_dynamic(kb.shape(v)) else buf


def _live(kb, rows):
    return kb.b.select(kb.no_error_yet(), rows, c64(0))


def _nest(kb, node, outs, rows, flat):
    """out = the node's value (with the fused chain of elementwise ops it reads inline):
    one flat vector loop over rows x row elements where every value read is the whole
    value or one element, else a loop over rows around the static row's loop nest.
    Each output of a multi-output node (a split) its own loop."""
    for k, out in enumerate(outs):
        if out is not None:
            _nest1(kb, Value(kb.regions.node_pos, k), out, rows, flat)


def _nest1(kb, v, out, rows, flat):
    b = kb.b
    if flat:
        at = _flat_index(out.shape)
        flat_out = Buffer(out.ptr, (None,), out.dtype, out.name)
        n = b.mul(rows, c64(out.row_elems))
        vend = b.and_(n, c64(-VW))
        with kb.loop(vend, 0, VW) as i:
            store_buf(b, flat_out, [(i, 1)], kb.gen(v, at(i, 1), VW), VW)
        with kb.loop(n, vend, vectorise=False) as i:      # the < VW left over
            store_buf(b, flat_out, [(i, 0)], kb.gen(v, at(i, 0), 1), 1)
        return
    row_shape = out.shape[1:]
    with kb.loop(rows) as r:
        row = Buffer(b.gep(out.ptr, [b.mul(r, c64(out.row_elems))]), row_shape, out.dtype, out.name)
        kb.emit_nest(row, lambda idx, W: kb.gen(v, [(r, 0)] + idx, W))


def _flat_index(shape):
    """i -> the index of flat element i of a contiguous value of ``shape``: i at its
    last dim of extent > 1 (stride 1), 0 elsewhere (as fusion_plan.py's merged runs
    place a run's index at its last dim); at dim 0 when every static dim is 1."""
    last = max([d for d in range(1, len(shape)) if shape[d] != 1] or [0])
    return lambda i, lane: [(i, lane) if d == last else (c64(0), 0) for d in range(len(shape))]


def _reduce(kb, node, outs, rows, flat):
    """Reduces x, read from its buffer or computed inline (its fused chain), in
    lower_reduction's fixed order (bit-identical run to run)."""
    x = node.inputs[0]
    x_shape = kb.shape(x)
    in_shape = (rows,) + tuple(x_shape[1:])
    red = _reduced(node, x_shape)
    kind = "sum" if node.op == "SumToShape" else REDUCE[node.op]
    dt = kb.dtype(x)
    if len(red) == len(in_shape) and flat:   # everything: one flat run (vectorised, fixed order)
        at = _flat_index(x_shape)
        n = kb.b.mul(rows, c64(row_elems(x_shape)))
        emit_reduce(kb, outs[0], (n,), lambda idx, W: kb.gen(x, at(*idx[0]), W), {0}, {0: None}, kind, dt)
        return
    keepdims = node.op != "SumToShape" and node.attrs["keepdims"]
    extra = len(in_shape) - len(outs[0].shape)
    out_map, j = {}, 0
    for d in range(len(in_shape)):
        if node.op == "SumToShape":
            out_map[d] = None if d in red else d - extra
        elif keepdims:
            out_map[d] = d
        elif d in red:
            out_map[d] = None
        else:
            out_map[d] = j
            j += 1
    emit_reduce(kb, outs[0], in_shape, lambda idx, W: kb.gen(x, idx, W), red, out_map, kind, dt)


def _size(kb, node, outs, rows, flat):
    """Shape / SizeRatio of row-dynamic values: their dim 0 is the source's rows."""
    b = kb.b
    out = outs[0]
    dt = out.dtype
    dims = []
    for v in node.inputs:
        s = kb.shape(v)
        dims.append([rows if d is None else c64(d) for d in s])
    if node.op == "Shape":
        for k, d in enumerate(dims[0]):
            val = b.trunc(d, ir.IntType(dt.size * 8)) if dt.size < 8 else d
            store_buf(b, out, [(c64(k), 0)], val, 1)
        return
    sizes = []
    for ds in dims:
        n = c64(1)
        for d in ds:
            n = b.mul(n, d)
        sizes.append(b.select(b.icmp_signed("<", n, c64(1)), c64(1), n))
    r = b.sdiv(sizes[0], sizes[1])
    store_buf(b, out, [], b.trunc(r, ir.IntType(dt.size * 8)) if dt.size < 8 else r, 1)
