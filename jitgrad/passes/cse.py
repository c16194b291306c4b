"""Common-subexpression elimination.

Two nodes compute the same value when they have the same op, the same
(already deduplicated) inputs, the same attrs and the same output specs; the
later one is dropped and its uses rewired to the earlier one. The forward
and backward graphs share a lot (several Cos(x), repeated Mul(g, y), the
OnesLike/Unreduce chains of each gradient call).

Never merged:
  * Arg nodes: two const Args with equal values are still two runtime
    arguments; merging them by value would put values into the signature.
  * stateful ops and ops of kind "state".
Literals are merged when their values are bitwise equal (dtype, shape and
bytes), which is exactly when they are interchangeable.
Attrs are compared with util.attr_key, which keeps '_' attrs (AddN's
_aggregation) and tells -0.0 from 0.0.
"""
from ..ops.registry import REGISTRY
from .ir import Value
from .util import attr_key, clean


def _mergeable(n):
    if n.op == "Arg":
        return False
    opdef = REGISTRY.get(n.op)
    return opdef is not None and not opdef.stateful and opdef.kind != "state"


def cse(program):
    seen = {}
    replace = {}
    order = []
    for i, n in enumerate(program.nodes):
        if not _mergeable(n):
            order.append(i)
            continue
        ins = tuple(replace.get(v, v) for v in n.inputs)
        key = (n.op, tuple((v.node, v.index) for v in ins), attr_key(n.attrs),
               tuple((s, d.name) for s, d in n.outputs))
        j = seen.get(key)
        if j is None:
            seen[key] = i
            order.append(i)
        else:
            for k in range(len(n.outputs)):
                replace[Value(i, k)] = Value(j, k)
    stats = {"nodes_before": len(program.nodes), "nodes_after": len(order),
             "merged": len(program.nodes) - len(order)}
    return clean(program, order, replace, "cse", stats)
