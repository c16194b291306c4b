"""Lowering of SetRow (ops/row_store.py): a checked store of one row, O(row) not O(rows);
and of ZeroRows (ops/zero_rows.py), the buffer of run-time rows such stores go to.

Output 0 is the buffer with row ``index`` replaced, output 1 the row it replaced. When the output's memory is not
the buffer's, the buffer is copied first; when it is (a loop variable the body only
writes: lower_control.in_place_vars hands the body one pointer for both), nothing
else is touched. An index outside ``[0, rows)`` sets TF's TensorList modify error
(ERR_LIST_MODIFY with the index and the row count, as ListCheck reports it) and
stores nothing (output 1 is zeros): no access ever leaves the buffer.
"""
from llvmlite import ir

from ..ops.zero_rows import INT32_MAX
from ..passes.ir import Program, Value
from .irutil import ERR_ZERO_ROWS_LENGTH, I8, I32, I64, LIST_CHECK_CODES, Unsupported, c64, mem_type, row_elems
from .lower_growing import keep_pair
from .stacks import desc, field, stack_init, stack_keep, stack_reserve


def _copy(kb, dst, src, n):
    """dst[0:n] = src[0:n] (element pointers of one type; n a Python int)."""
    if n:
        b = kb.b
        with kb.loop(n) as i:
            b.store(b.load(b.gep(src, [i])), b.gep(dst, [i]))


def _zero(kb, dst, dt, n):
    if n:
        with kb.loop(n) as i:
            kb.b.store(ir.Constant(mem_type(dt), 0), kb.b.gep(dst, [i]))


def set_row(kb, node, outs, dry):
    shape, dt = node.outputs[0]
    if shape is None or any(d is None for d in shape[1:]):
        raise Unsupported("SetRow on a value of unknown row shape")
    if dry:
        return
    b = kb.b
    ty = mem_type(dt).as_pointer()
    buf, index, value = (kb.buffers[v] for v in node.inputs)
    row = row_elems(shape)
    if shape[0] is None:
        # a loop variable of run-time rows (passes/growing_vars.row_stored_vars): the body is
        # handed its descriptor {data, rows, capacity} as both the variable and its next value
        # (lower_growing.FixedRowsVar); lower_control.check lets nothing else read it, so the
        # output is the same memory (its descriptor copied, should the pointers differ)
        d_in, d_out = (b.bitcast(x.ptr, I64.as_pointer()) for x in (buf, outs[0]))
        with b.if_then(b.icmp_unsigned("!=", b.ptrtoint(d_in, I64), b.ptrtoint(d_out, I64))):
            for w in range(3):
                b.store(b.load(b.gep(d_in, [c64(w)])), b.gep(d_out, [c64(w)]))
        if node.attrs.get("grow"):
            _grow(kb, d_out, b.sext(b.load(b.bitcast(index.ptr, I32.as_pointer())), I64), row * dt.size)
        out = b.inttoptr(b.load(d_out), ty)
        rows64 = b.load(b.gep(d_out, [c64(1)]))
    else:
        out = b.bitcast(outs[0].ptr, ty)
        src = b.bitcast(buf.ptr, ty)
        with b.if_then(b.icmp_unsigned("!=", b.ptrtoint(out, c64(0).type), b.ptrtoint(src, c64(0).type))):
            _copy(kb, out, src, shape[0] * row)
        rows64 = c64(shape[0])
    k = b.load(b.bitcast(index.ptr, I32.as_pointer()))
    k64 = b.sext(k, I64)
    bad = b.or_(b.icmp_signed("<", k64, c64(0)), b.icmp_signed(">=", k64, rows64))
    # (the row count as TF's message shows it: a list's length is an int32, ZeroRows checks it)
    kb.set_error(bad, LIST_CHECK_CODES["modify"], (k, b.trunc(rows64, I32)))
    old = b.bitcast(outs[1].ptr, ty)
    with b.if_else(b.and_(b.not_(bad), kb.no_error_yet())) as (ok, failed):
        with ok:   # the replaced row first (output 1: the gradient's read), then the store
            at = b.gep(out, [b.mul(k64, c64(row))])
            _copy(kb, old, at, row)
            _copy(kb, at, b.bitcast(value.ptr, ty), row)
        with failed:
            _zero(kb, old, dt, row)


def _grow(kb, d, k, row_bytes):
    """A growing SetRow's index ``k`` (i64) at or past the rows of stack ``d``: capacity for
    ``k + 1`` rows (doubling; ERR_STACK_ALLOC when there is none, nothing changed), the new
    rows zeroed, ``k + 1`` rows. (A negative ``k`` grows nothing: the caller's check fails it.)"""
    b = kb.b
    rows = b.load(field(kb, d, 1))
    with b.if_then(b.and_(b.icmp_signed(">=", k, rows), kb.no_error_yet())):
        want = b.add(k, c64(1))
        failed = stack_reserve(kb, d, want, row_bytes)
        with b.if_then(b.not_(failed)):
            data = b.inttoptr(b.load(field(kb, d, 0)), I8.as_pointer())
            with kb.loop(b.mul(want, c64(row_bytes)), b.mul(rows, c64(row_bytes))) as i:
                b.store(ir.Constant(I8, 0), b.gep(data, [i]))
            b.store(want, field(kb, d, 1))


def zero_rows(kb, node, outs, dry):
    """ZeroRows(entry, length) (ops/zero_rows.py): ``length`` rows of heap memory (kept from
    call to call by a top-level kernel, in a persistent word pair; a region's freed when it
    returns), the entry's rows copied in, zeros after. A length below the entry's rows or
    past int32 sets ERR_ZERO_ROWS_LENGTH and the value has 0 rows: nothing is written."""
    entry_shape, (shape, dt) = kb.shape(node.inputs[0]), node.outputs[0]
    if entry_shape is None or any(d is None for d in entry_shape):
        raise Unsupported("ZeroRows of an entry value of unknown shape")
    pos = kb.regions.node_pos
    cache = kb.regions.cache
    if ("zero_rows", pos) not in cache:
        cache[("zero_rows", pos)] = keep_pair(kb)
    keep = cache[("zero_rows", pos)]
    if dry:
        return
    b = kb.b
    entry, length = (kb.buffers[v] for v in node.inputs)
    n = b.load(b.bitcast(length.ptr, I64.as_pointer()))
    rows0 = entry_shape[0]
    bad = b.or_(b.icmp_signed("<", n, c64(rows0)), b.icmp_signed(">", n, c64(INT32_MAX)))
    kb.set_error(bad, ERR_ZERO_ROWS_LENGTH)
    n = b.select(kb.no_error_yet(), n, c64(0))
    row_bytes = row_elems(shape) * dt.size
    d = desc(kb, outs[0])
    stack_init(kb, d, keep)
    failed = stack_reserve(kb, d, n, row_bytes)
    n = b.select(failed, c64(0), n)
    b.store(n, field(kb, d, 1))
    with b.if_then(b.icmp_signed(">", n, c64(0))):
        data = b.inttoptr(b.load(field(kb, d, 0)), I8.as_pointer())
        head = rows0 * row_bytes
        _copy(kb, data, b.bitcast(entry.ptr, I8.as_pointer()), head)
        with kb.loop(b.mul(n, c64(row_bytes)), head) as i:
            b.store(ir.Constant(I8, 0), b.gep(data, [i]))
    stack_keep(kb, d, keep)


MATERIALISE = {"SetRow": set_row, "ZeroRows": zero_rows}
NEEDS_BUFFER = {"SetRow": "all", "ZeroRows": "all"}


def in_place_vars(body, n):
    """The loop variables (of the first ``n`` body arguments) a While body only writes
    rows of: its output k is SetRow's output 0 on argument k, which nothing else in the
    body reads (nor returns). The loop then hands the body one buffer as both the
    variable and its next value (lower_control.lower_while), and each write is a store."""
    if not isinstance(body, Program):
        return set()
    arg_of = {k: Value(i, 0) for i, nd in enumerate(body.nodes) if nd.op == "Arg" and nd.attrs["arg"] < n
              for k in (nd.attrs["arg"],)}
    reads = {}
    for i, nd in enumerate(body.nodes):
        for j, v in enumerate(nd.inputs):
            reads.setdefault(v, []).append((i, j))
    returned = [v for v in body.outputs if v is not None] + [v for _, v in body.var_writes]
    out = set()
    for k, a in arg_of.items():
        v = body.outputs[k] if k < len(body.outputs) else None
        if (v is None or v.index != 0 or body.nodes[v.node].op != "SetRow" or reads.get(a) != [(v.node, 0)]
                or a in returned or returned.count(v) != 1):
            continue
        out.add(k)
    return out


def row_chains(body, n):
    """{k: the SetRow nodes from body argument k (of the first ``n``) to its output k}: each
    reading the previous one's output 0 (the argument, first) as its buffer, which nothing
    else reads, the last one's output 0 the body's output k, returned once (a loop variable
    of run-time rows, written in place: lower_growing.FixedRowsVar; two writes an
    iteration make a chain of two)."""
    if not isinstance(body, Program):
        return {}
    reads = {}
    for i, nd in enumerate(body.nodes):
        for j, v in enumerate(nd.inputs):
            reads.setdefault(v, []).append((i, j))
    returned = [v for v in body.outputs if v is not None] + [v for _, v in body.var_writes]
    out = {}
    for i, nd in enumerate(body.nodes):
        k = nd.attrs["arg"] if nd.op == "Arg" else None
        if k is None or k >= n or k >= len(body.outputs) or body.outputs[k] is None:
            continue
        v, chain = Value(i, 0), []
        while v != body.outputs[k]:
            r = reads.get(v, [])
            if len(r) != 1 or r[0][1] != 0 or body.nodes[r[0][0]].op != "SetRow" or v in returned:
                break
            chain.append(r[0][0])
            v = Value(r[0][0], 0)
        else:
            if chain and returned.count(v) == 1 and v not in reads:
                out[k] = chain
    return out


def in_place_rows(program):
    """The SetRow nodes of ``program`` (a loop body) storing into a loop variable of
    run-time rows in place (``row_chains``). lower_control.check lets them (alone) read
    and return such a value."""
    if not isinstance(program, Program):
        return set()
    n = sum(1 for nd in program.nodes if nd.op == "Arg")
    out = set()
    for k, chain in row_chains(program, n).items():
        shape = program.nodes[chain[-1]].outputs[0][0]
        if shape is not None and shape and shape[0] is None:
            out.update(chain)
    return out
