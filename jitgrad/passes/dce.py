"""Dead-code elimination.

Roots are the fetched Values, var_writes and the random draws of regions (a
RegionRandom node, or an If / While holding one: the interpreter runs a branch
or body whole, so each draw advances its op's generator even when nothing reads
it, e.g. an If output only the gradient reads; dropping it would shift every
later draw of that op, ops/random_ops.py). Everything not reachable from
them is removed, except Arg nodes: every Program.arg keeps its Arg node and
Program.args is never renumbered, because args are positional runtime
inputs the Session packs by index (an unused arg costs nothing; the codegen
may simply ignore an Arg node without uses).

Shape-only edges (OpDef.shape_only: the consumer reads only the input's
shape) would keep a whole computation alive just for a shape. When the
producer is otherwise dead, the edge is rewired to an earlier value that is
computed anyway (an Arg, or a live node) with the same static shape and
dtype (never across a dim known only at run time: two values of shape
[None, 3] may have different row counts); only when there is none does the
producer stay.
"""
from ..ops.random_ops import region_sites
from ..ops.registry import REGISTRY
from .ir import Node, Program, Value
from .util import clean


def _is_shape_only(node, j):
    opdef = REGISTRY.get(node.op)
    return opdef is not None and opdef.is_shape_only(j)


def _draws(node):
    """Whether ``node`` draws random numbers inside a region (at any depth)."""
    if node.op == "RegionRandom":
        return True
    if node.op not in ("If", "While"):
        return False
    return any(region_sites(sub) for sub in (node.attrs.get(k) for k in ("then_branch", "else_branch", "body", "cond"))
               if hasattr(sub, "nodes"))


def _mark(program, live, seeds):
    """Marks seeds and everything they read the value of (not shape-only edges)."""
    stack = [s for s in seeds if s not in live]
    while stack:
        i = stack.pop()
        if i in live:
            continue
        live.add(i)
        n = program.nodes[i]
        for j, v in enumerate(n.inputs):
            if v.node not in live and not _is_shape_only(n, j):
                stack.append(v.node)


def dce(program, dropped_args=()):
    """``dropped_args``: arg indices the caller is about to remove (regions.py drops
    loop variables nothing needs): their Arg nodes are not substitutes for shapes."""
    nodes = program.nodes
    roots = [v.node for v in program.outputs if v is not None] + [v.node for _, v in program.var_writes]
    roots += [i for i, n in enumerate(nodes) if _draws(n)]
    live = set()
    _mark(program, live, roots + [i for i, n in enumerate(nodes) if n.op == "Arg" and n.attrs["arg"] not in
                                  dropped_args])
    rewired = {}  # (consumer, input index) -> Value
    while True:
        todo = []
        first = {}  # (shape, dtype) -> earliest live Value with that spec
        for k in sorted(live):
            for x, o in enumerate(nodes[k].outputs):
                first.setdefault((o[0], o[1].name), Value(k, x))
        for i in sorted(live):
            n = nodes[i]
            for j, v in enumerate(n.inputs):
                if v.node in live or (i, j) in rewired or not _is_shape_only(n, j):
                    continue
                shape, dt = nodes[v.node].outputs[v.index]
                # a dim known only at run time (None) may differ between two values of one spec
                sub = first.get((shape, dt.name)) if shape is not None and None not in shape else None
                if sub is None or sub.node >= i:
                    todo.append(v.node)
                else:
                    rewired[(i, j)] = sub
        if not todo:
            break
        _mark(program, live, todo)
        # A node made live may now serve as a substitute, and vice versa: redo.
        rewired = {k: s for k, s in rewired.items() if nodes[k[0]].inputs[k[1]].node not in live}
    if rewired:
        new_nodes = list(nodes)
        for (i, j), sub in rewired.items():
            n = new_nodes[i]
            ins = list(n.inputs)
            ins[j] = sub
            new_nodes[i] = Node(n.op, tuple(ins), n.attrs, n.outputs, n.name)
        program = Program(new_nodes, program.args, program.outputs, program.var_writes,
                          program.stats)
    order = sorted(live)
    stats = {"nodes_before": len(nodes), "nodes_after": len(order), "removed": len(nodes) - len(order),
             "shape_edges_rewired": len(rewired)}
    return clean(program, order, stats=stats, pass_name="dce")
