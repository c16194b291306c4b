"""Stop-gradient / identity elimination.

StopGradient, Identity, IdentityN and SoftmaxXentLoss only matter while building
gradients; at run time they copy their (first) input. PlaceholderWithDefault that reaches the Program is
never fed (a fed one became an Arg in ir.from_graph), so it too is a copy of
its input. All three vanish: their uses are rewired to their input.
"""
from collections import Counter

from ..ops.registry import has_fact
from .ir import Value
from .util import clean, reinfer

# The ops marked identity=True (ops/registry.py). SoftmaxXentLoss (ops/nn_ops.py) is
# its first input with TF's cross-entropy gradient attached; its other inputs (logits,
# labels) serve only that gradient.


def stop_gradient(program):
    replace = {}
    removed = Counter()
    order = []
    for i, n in enumerate(program.nodes):
        if has_fact(n.op, "identity"):    # output k is input k (IdentityN has several)
            for k in range(len(n.outputs)):
                replace[Value(i, k)] = n.inputs[k]
            removed[n.op] += 1
        else:
            order.append(i)
    stats = {"nodes_before": len(program.nodes), "nodes_after": len(order),
             "removed": sum(removed.values())}
    stats.update({f"removed_{k}": v for k, v in removed.items() if v})
    out = clean(program, order, replace, "stop_gradient", stats)
    if removed["PlaceholderWithDefault"]:
        # Its declared shape may be partial ([None, 3]); consumers' shapes were
        # inferred from that, so recompute them from the now-concrete inputs.
        out = reinfer(out)
    return out
