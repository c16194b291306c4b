"""Lowering of SetRow (ops/row_store.py): a checked store of one row, O(row) not O(rows).

Output 0 is the buffer with row ``index`` replaced, output 1 the row it replaced. When the output's memory is not
the buffer's, the buffer is copied first; when it is (a loop variable the body only
writes: lower_control.in_place_vars hands the body one pointer for both), nothing
else is touched. An index outside ``[0, rows)`` sets TF's TensorList modify error
(ERR_LIST_MODIFY with the index and the row count, as ListCheck reports it) and
stores nothing (output 1 is zeros): no access ever leaves the buffer.
"""
from llvmlite import ir

from ..passes.ir import Program, Value
from .irutil import I32, LIST_CHECK_CODES, Unsupported, c64, mem_type


def _elems(shape):
    n = 1
    for d in shape:
        n *= d
    return n


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
    if shape is None or any(d is None for d in shape):
        raise Unsupported("SetRow on a value of run-time rows")
    if dry:
        return
    b = kb.b
    ty = mem_type(dt).as_pointer()
    buf, index, value = (kb.buffers[v] for v in node.inputs)
    out = b.bitcast(outs[0].ptr, ty)
    src = b.bitcast(buf.ptr, ty)
    rows, row = shape[0], _elems(shape[1:])
    with b.if_then(b.icmp_unsigned("!=", b.ptrtoint(out, c64(0).type), b.ptrtoint(src, c64(0).type))):
        _copy(kb, out, src, rows * row)
    k = b.load(b.bitcast(index.ptr, I32.as_pointer()))
    n = ir.Constant(I32, rows)
    bad = b.or_(b.icmp_signed("<", k, ir.Constant(I32, 0)), b.icmp_signed(">=", k, n))
    kb.set_error(bad, LIST_CHECK_CODES["modify"], (k, n))
    old = b.bitcast(outs[1].ptr, ty)
    with b.if_else(b.and_(b.not_(bad), kb.no_error_yet())) as (ok, failed):
        with ok:   # the replaced row first (output 1: the gradient's read), then the store
            at = b.gep(out, [b.mul(b.sext(k, c64(0).type), c64(row))])
            _copy(kb, old, at, row)
            _copy(kb, at, b.bitcast(value.ptr, ty), row)
        with failed:
            _zero(kb, old, dt, row)


MATERIALISE = {"SetRow": set_row}
NEEDS_BUFFER = {"SetRow": "all"}


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
