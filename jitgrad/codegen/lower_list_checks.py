"""Lowering of ListCheck (ops/list_ops.py): elementwise over its index lanes. A failing
lane sets the kind's error code; the first failure of the run (nothing failed before
it: the status word is first-wins) also leaves its two values in status words 4 and 5
for the executor's message. The output lane is 0 where the check failed."""
from llvmlite import ir

from ..ops.list_ops import RANGE_KINDS
from .irutil import I32, LIST_CHECK_CODES, const


def _lanes(b, v, W):
    return [v] if W == 1 else [b.extract_element(v, ir.Constant(I32, k)) for k in range(W)]


def list_check(kb, node, xs, W):
    b = kb.b
    a, n = xs
    kind = node.attrs["kind"]
    code = LIST_CHECK_CODES[kind]
    zero = const(node.outputs[0][1], 0, W)
    if kind in RANGE_KINDS:
        bad = b.or_(b.icmp_signed("<", a, zero), b.icmp_signed(">=", a, n))
    else:
        bad = b.icmp_signed("!=", a, n)
    # lane by lane: the first failing lane's values go with the code (first-wins)
    for la, ln, lb in zip(_lanes(b, a, W), _lanes(b, n, W), _lanes(b, bad, W)):
        kb.set_error(lb, code, (la, ln))
    return b.select(bad, zero, a)
