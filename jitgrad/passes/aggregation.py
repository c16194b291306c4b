"""Aggregation scheduling, honouring each gradient call's AggregationMethod.

Gradient contributions to one tensor are summed by AddN nodes whose attr
"_aggregation" says how the user asked for them (gradients.py sets it on
each sum it builds; nothing else about the call reaches the compiler):
  ADD_N                       one n-ary AddN after every contribution: left
                              as is (one pass over all inputs, but every
                              contribution stays live until the end).
  EXPERIMENTAL_TREE /
  EXPERIMENTAL_ACCUMULATE_N   a left-to-right chain of 2-input AddNs (as TF
                              2.x builds for both). gradients() creates the
                              chain after all contributions exist; this pass
                              moves each partial sum to right after its last
                              operand, so each contribution dies as soon as
                              it is added.
Only the node ORDER changes: the summation order, hence every float bit, is
untouched. Stats report the peak number of live intermediate values
(util.peak_live) before and after, so the memory effect is visible.
"""
from .util import clean, peak_live

EAGER = ("EXPERIMENTAL_TREE", "EXPERIMENTAL_ACCUMULATE_N")


def _eager(n):
    return n.op == "AddN" and n.attrs.get("_aggregation") in EAGER


def aggregation(program):
    nodes = program.nodes
    consumers = {}
    for i, n in enumerate(nodes):
        if _eager(n):
            for v in set(n.inputs):
                consumers.setdefault(v.node, []).append(i)
    waiting = {i: len({v.node for v in n.inputs}) for i, n in enumerate(nodes) if _eager(n)}
    order, placed = [], set()

    def place(i):
        # List scheduling: placing a node may make eager sums ready; place
        # them immediately (and what they in turn make ready).
        stack = [i]
        while stack:
            k = stack.pop()
            order.append(k)
            placed.add(k)
            for c in reversed(consumers.get(k, ())):
                waiting[c] -= 1
                if waiting[c] == 0:
                    stack.append(c)

    for i in range(len(nodes)):
        if i in placed:
            continue
        if i in waiting:
            # All operands precede i, so i was placed when the last one was.
            raise AssertionError("eager AddN not placed before its original position")
        place(i)
    moved = sum(1 for new, old in enumerate(order) if new != old)
    out = clean(program, order)
    stats = {"nodes": len(nodes), "eager_sums": len(waiting), "moved": moved,
             "n_ary_sums": sum(1 for n in nodes if n.op == "AddN" and not _eager(n)),
             "peak_live_before": peak_live(program), "peak_live_after": peak_live(out)}
    out.stats.append(("aggregation", stats))
    return out
