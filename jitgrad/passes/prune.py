"""Prune: the ops a set of fetches needs, in execution order.

Fed tensors cut the graph: their producers run only if some other output of
theirs is needed. Control inputs count as dependencies.
"""


def prune(targets, fed_ids):
    """targets: Tensors and Operations; fed_ids: set of id(tensor) that are fed.

    Returns the needed ops sorted by creation order (which is topological).
    """
    needed = {}
    stack = []
    for t in targets:
        if hasattr(t, "value_index"):
            if id(t) not in fed_ids:
                stack.append(t.op)
        else:
            stack.append(t)
    while stack:
        op = stack.pop()
        if op._id in needed:
            continue
        needed[op._id] = op
        for t in op.inputs:
            if id(t) not in fed_ids and t.op._id not in needed:
                stack.append(t.op)
        for c in op.control_inputs:
            if c._id not in needed:
                stack.append(c)
    return [needed[k] for k in sorted(needed)]
