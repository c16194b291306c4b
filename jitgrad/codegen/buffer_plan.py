"""Buffer planning: where every scratch value, per-node temporary, reduction
partial, block counter and persistent word lives in the kernel's one scratch
arena.  A pure function of the Program and its FusionPlan (``plan_buffers``).

Scratch values are live from the nest that writes them to the last nest that
reads them (a nest reads everything at its end and writes at its start);
intervals get first-fit offsets, ALIGN-aligned, so buffers whose lifetimes do
not overlap share memory.  After the buffers: one cache line per parallel
nest's block counter (two for a parallel GEMM), then the persistent words
(kept from call to call: loop stacks' memory, lower_control.py).
"""
from dataclasses import dataclass

import numpy as np

from .fusion_plan import BLOCK_ELEMS, root, unit_reads
from .irutil import ALIGN, value_bytes
from .lower_reduction import acc_dtype


@dataclass(eq=False)
class BufferPlan:
    offsets: dict          # ("val", v) | ("part", nest index, k) -> arena offset
    born: dict             # scratch value -> node index where its buffer becomes live
    last_use: dict         # scratch value -> last node index that reads it
    temp_offsets: dict     # node index -> arena offsets of its temporaries, in request order
    counters: dict         # parallel nest index -> arena offset of its block counter(s)
    counter_base: int      # first counter's offset; counters are zeroed at kernel entry
    n_counters: int
    persistent_base: int
    arena_bytes: int


def reduction_blocks(runs):
    """Blocks a nest with merged dims ``runs`` is split into (one partial each)."""
    if not runs:
        return 1
    if len(runs) == 1:
        return -(-runs[0][0] // BLOCK_ELEMS)
    inner = int(np.prod([e for e, _ in runs[1:]], dtype=np.int64))
    return -(-runs[0][0] // max(1, BLOCK_ELEMS // inner))


def _dtype(program, v):
    return program.nodes[v.node].outputs[v.index][1]


def plan_buffers(program, fusion, slot_of_val, copies, temps_needed, persistent_words):
    """temps_needed: node index -> byte sizes of the temporaries its lowering
    asked for (the builder's dry run); persistent_words: 8-byte words."""
    nodes = program.nodes
    N = len(nodes)
    nests = fusion.nests
    mat = fusion.mat
    scratch_vals = [v for v in sorted(mat, key=lambda x: (x.node, x.index)) if v not in slot_of_val]
    born = {v: v.node for v in scratch_vals}
    last_use = {v: v.node for v in scratch_vals}
    for g in nests:
        reads = set()
        for u in g.units:
            ri, ro = unit_reads(program, mat, u)
            reads |= ri | ro
            if u.val in born:
                born[u.val] = min(born[u.val], g.start)
        if g.units[0].kind == "node":
            for v in mat:
                if v.node == g.start and v in born:
                    born[v] = g.start
        for r in reads:
            if r in last_use:
                last_use[r] = max(last_use[r], g.end)
    for s, v in copies:
        r = root(program, v)
        if r in last_use:
            last_use[r] = N
    # reduction partials of grouped nests (one accumulator per fixed block)
    partials = {}
    for gi, g in enumerate(nests):
        if g.shape is None:
            continue
        reds = [u for u in g.units if u.kind == "reduce"]
        if not reds:
            continue
        nb = reduction_blocks(g.runs)
        partials[gi] = [nb * acc_dtype(u.rkind, _dtype(program, nodes[u.pos].inputs[0])).size for u in reds]
    intervals = []
    for v in scratch_vals:
        shape, dt = nodes[v.node].outputs[v.index]
        nbytes = value_bytes(shape, dt)
        if nbytes is None:   # a dynamic stack's descriptor: freed when the kernel returns
            nbytes, last_use[v] = 24, N
        intervals.append((born[v], last_use[v], nbytes, ("val", v)))
    for pos, sizes in temps_needed.items():
        for k, nb in enumerate(sizes):
            intervals.append((pos, pos, nb, ("tmp", pos, k)))
    for gi, g in enumerate(nests):
        for k, nb in enumerate(partials.get(gi, ())):
            intervals.append((g.start, g.end, nb, ("part", gi, k)))
    intervals.sort(key=lambda t: (t[0], -t[2]))
    live = []   # (offset, size, end)
    offsets = {}
    arena = 0
    for start, end, nbytes, key in intervals:
        live = [x for x in live if x[2] >= start]
        size = max(-(-nbytes // ALIGN) * ALIGN, ALIGN)
        off = 0
        for lo, sz, _ in sorted(live):
            if off + size <= lo:
                break
            off = max(off, lo + sz)
        offsets[key] = off
        live.append((off, size, end))
        arena = max(arena, off + size)
    # one block counter (own cache line) per parallel nest, after the buffers
    # (parallel GEMMs get two: B pack tasks, then row chunks)
    counters = {}
    counter_base, n_ctr = arena, 0
    for gi, g in enumerate(nests):
        if g.parallel:
            counters[gi] = arena + 64 * n_ctr
            n_ctr += 1 if g.shape is not None else 2
    arena += 64 * n_ctr
    persistent_base = arena
    arena += 8 * persistent_words
    temp_offsets = {}
    for key, off in offsets.items():
        if key[0] == "tmp":
            temp_offsets.setdefault(key[1], []).append((key[2], off))
    for pos in temp_offsets:
        temp_offsets[pos] = [o for _, o in sorted(temp_offsets[pos])]
    return BufferPlan(offsets=offsets, born=born, last_use=last_use, temp_offsets=temp_offsets,
                      counters=counters, counter_base=counter_base, n_counters=n_ctr,
                      persistent_base=persistent_base, arena_bytes=arena)
