"""Which lowering handles each op type.  Every lower_*.py module exports
tables keyed by op type; they are gathered here on first use (the lowerings
import llvmlite, so nothing here runs at ``import jitgrad``):

* ELEMENTWISE  {op: fn(kb, node, xs, W) -> value}: computed inline per element
* LAYOUT       {op: fn(kb, node, out_index, idx, W) -> value}: an index map
* MATERIALISE  {op: fn(kb, node, out_bufs, dry) -> None}: writes whole buffers
* ALIAS        ops whose output is their input's buffer (reshape-like)
* NEEDS_BUFFER {op: "all" or input positions that must be read from a buffer}
"""
ELEMENTWISE, LAYOUT, MATERIALISE, ALIAS, NEEDS_BUFFER = None, None, None, None, None


def _lowering_tables():
    from . import (lower_elementwise, lower_layout, lower_reduction, lower_matmul, lower_scan, lower_control, lower_random,
                   lower_rows_gather, lower_row_store, lower_segment, lower_top_k, lower_gamma)
    elem = dict(lower_elementwise.ELEMENTWISE)
    elem.update(lower_gamma.ELEMENTWISE)
    layout = dict(lower_layout.LAYOUT)
    layout.update(lower_top_k.LAYOUT)
    mat = {}
    mat.update(lower_reduction.MATERIALISE)
    mat.update(lower_matmul.MATERIALISE)
    mat.update(lower_scan.MATERIALISE)
    mat.update(lower_control.MATERIALISE)
    mat.update(lower_random.MATERIALISE)
    mat.update(lower_rows_gather.MATERIALISE)
    mat.update(lower_row_store.MATERIALISE)
    mat.update(lower_segment.MATERIALISE)
    mat.update(lower_top_k.MATERIALISE)
    needs = {}
    for mod in (lower_layout, lower_reduction, lower_matmul, lower_scan, lower_control, lower_random, lower_row_store,
                lower_segment, lower_top_k):
        needs.update(getattr(mod, "NEEDS_BUFFER", {}))
    return elem, layout, mat, lower_layout.ALIAS, needs


def tables():
    global ELEMENTWISE, LAYOUT, MATERIALISE, ALIAS, NEEDS_BUFFER
    if ELEMENTWISE is None:
        ELEMENTWISE, LAYOUT, MATERIALISE, ALIAS, NEEDS_BUFFER = _lowering_tables()
    return ELEMENTWISE, LAYOUT, MATERIALISE, ALIAS, NEEDS_BUFFER


def lowerable_ops():
    e, l, m, a, _ = tables()
    return set(e) | set(l) | set(m) | set(a) | {"Arg"}


def unsupported_ops(program):
    ok = lowerable_ops()
    return sorted({n.op for n in program.nodes if n.op not in ok})
