"""Fusion planning: which values of a Program live in a buffer, and how the
materialised values are grouped into loop nests.  A pure function of the
Program (``plan_fusion``) returning a FusionPlan; the kernel builder emits
what it says (jitgrad/codegen/kernel.py describes the code generation model).

* a value is materialised when it is fetched / written to a variable, read by
  more than one consumer (unless its op is cheap to recompute), produced by a
  MATERIALISE lowering (reduction, matmul, ...), or read through a buffer
  (NEEDS_BUFFER inputs, aliases);
* consecutive materialised values over one iteration shape share a nest
  (stores and full reductions), unless a unit reads a value produced in the
  nest through a layout map, or an element of a value reduced in it;
* a multi-use intermediate read only inside its own nest at its own element
  stops being materialised ("soft");
* each nest's dims are merged into contiguous runs, its work estimated, and
  big enough nests (and GEMMs) are marked parallel.
"""
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ..ops.registry import REGISTRY, has_fact
from ..passes.ir import Value
from ..shapes import normalize_axes
from .irutil import Unsupported
from .lower_rows import plan as plan_rows
from .lowering_tables import tables

# Loop nests whose estimated work (elements x weighted fused ops) reaches
# PAR_MIN_WORK are split across threads (see jitgrad/codegen/parallel.py);
# below it the call overhead of waking a second thread (~20-50 us) wins.
PAR_MIN_WORK = 1 << 21   # W2 at 1e5 (work ~5M) now splits: 143 -> 87 us on 2 cores; 3e4 still gains
MAX_THREADS = 8
PAR_MIN_FLOPS = 1 << 25   # matmul flops above which C's rows are split across threads
# Once some nest makes the kernel parallel, its threads are awake inside the call: a
# smaller nest split across them costs a barrier (~1 us, spinning), not a wake-up.
# Nests and GEMMs from these (lower) sizes on are split too then: W3 at 2 threads ran
# its [256, 512] bias+relu and relu-grad passes and three 2.6 MFLOP GEMMs (N or K = 10)
# on thread 0 while the other thread waited, ~0.65 ms of a ~3 ms call.
PAR_MIN_WORK_JOINED = 1 << 18
PAR_MIN_FLOPS_JOINED = 1 << 21
# A kernel whose largest GEMM has fewer flops than PAR_MIN_FLOPS but at least these,
# AWAKE_MIN_ROWS rows of C and a K of AWAKE_MIN_K is parallel without waking threads ("wake" False in
# its meta): it runs on the threads only while the pool's workers are still spinning
# from a call that ended moments before (codegen/parallel.kernel_threads), else on
# one thread, as before.  W3's H @ W2 (2.6 MFLOP) alone in a loop, 2 threads (znver4,
# bench_matmul.py): 62 -> 75 GFLOP/s (OpenBLAS 83) on a busy host, 62 -> 98-108
# (OpenBLAS 87-89) on a quieter one; dW2 87 -> 137.  Called once after 2 ms idle it
# stays serial, 69 us as before (waking the other thread made it 92-98 us).  On one
# thread such a kernel costs 2-4% more than the serial one (H @ W2, dW2).
# Fewer rows or a shorter K lost even with both threads awake, where a thread's own
# work is small next to the data it takes from the other core's cache (B the two
# packed, C's lines): 64 x 512 x 64 took 45 -> 70 us, 256 x 32 x 128 21 -> 24 us,
# W3's dH (256 x 512 x 10, writing C is most of it) 31 -> 84 us; 256 x 64 x 256
# gained 77 -> 69 us, 512 x 10 x 512 81 -> 56 us.
PAR_MIN_FLOPS_AWAKE = 1 << 21
AWAKE_MIN_ROWS = 256
AWAKE_MIN_K = 256
# Reductions fused into a loop nest accumulate per fixed block of BLOCK_ELEMS
# elements (independent of the thread count); block partials are combined in
# block order, so results are bit-identical for any number of threads.
BLOCK_ELEMS = 1 << 14
FUSE_NESTS = True   # False: one loop nest per materialised value (debugging)


@dataclass(eq=False)
class Unit:
    """One thing a nest computes at each element: ``store`` (an elementwise
    value into its buffer), ``reduce`` (a full reduction of kind ``rkind``) or
    ``node`` (a MATERIALISE node emitted by its own lowering)."""
    kind: str
    pos: int                 # node index
    val: Value               # the value it produces
    rkind: Optional[str]     # reduction kind ("sum", "max", ...) of a reduce unit
    ri: set                  # buffers read at the unit's own element index
    ro: set                  # buffers read through a broadcast / layout map


@dataclass(eq=False)
class Nest:
    units: list
    shape: Optional[tuple]   # iteration shape; None for a node unit
    start: int               # node index of the first / last unit
    end: int
    produced: set = field(default_factory=set)
    reduced: set = field(default_factory=set)
    runs: list = field(default_factory=list)   # [(extent, last dim of the run)] merged dims
    work: int = 0
    gemm_rows: int = 0       # a GEMM node unit's rows of C (split across threads)
    gemm_k: int = 0          # and its reduction length
    parallel: bool = False


@dataclass(eq=False)
class FusionPlan:
    mat: set          # values that live in a buffer (aliases excluded)
    hard: set         # values that must live in a buffer whatever the nests decide
    soft: set         # multi-use values computed inside their own nest instead
    out_vals: list    # output slot values: Program.outputs (not None), then var_writes
    nests: list       # [Nest] in node order
    rows: dict        # node index -> lower_rows.RowsNode (it reads a value of run-time rows)
    parallel: bool    # some nest runs on all threads
    par_slots: int    # threads a parallel kernel is built for (per-thread workspaces)
    wake: bool = True  # a parallel kernel may wake sleeping threads (else see PAR_MIN_FLOPS_AWAKE)


def root(program, v):
    """The value whose buffer v lives in (through aliases)."""
    alias = tables()[3]
    while program.nodes[v.node].op in alias:
        v = program.nodes[v.node].inputs[0]
    return v


def fused_ops(program, mat, v, acc, seen):
    """Appends to acc the op types computed inline (not read from a buffer) for v."""
    if v in seen:
        return
    seen.add(v)
    n = program.nodes[v.node]
    if n.op == "Arg" or v in mat or n.op in tables()[3]:
        return
    node_ops(program, mat, n, acc, seen)


def node_ops(program, mat, n, acc, seen=None):
    """Appends to acc node n's op and the ops computed inline for its inputs;
    seen=None walks each input on its own (a report lists an op per use)."""
    acc.append(n.op)
    for u in data_inputs(n):
        fused_ops(program, mat, u, acc, set() if seen is None else seen)
    return acc


def data_inputs(n):
    """The inputs of node n whose values (not only their shapes) it reads."""
    opdef = REGISTRY[n.op]
    return [u for k, u in enumerate(n.inputs) if not opdef.is_shape_only(k)]


def plan_fusion(program, allow_parallel):
    planner = _Planner(program)
    planner.analyse()
    nests = planner.plan_nests()
    any_par = False
    for g in nests:
        if g.shape is not None:
            g.runs = planner.merge_dims(g)
            g.work = planner.work(g)
        else:
            g.work, g.gemm_rows, g.gemm_k = _gemm_size(planner, program.nodes[g.units[0].pos])
        g.parallel = _splits(g, allow_parallel, PAR_MIN_FLOPS, PAR_MIN_WORK)
        any_par = any_par or g.parallel
    wake = any_par
    if not any_par:   # only awake threads (PAR_MIN_FLOPS_AWAKE)
        for g in nests:
            g.parallel = g.shape is None and g.gemm_rows >= AWAKE_MIN_ROWS and g.gemm_k >= AWAKE_MIN_K \
                and _splits(g, allow_parallel, PAR_MIN_FLOPS_AWAKE, PAR_MIN_WORK)
            any_par = any_par or g.parallel
    work = max([g.work for g in nests if g.parallel] or [0])
    if any_par:
        for g in nests:
            g.parallel = g.parallel or _splits(g, allow_parallel, PAR_MIN_FLOPS_JOINED, PAR_MIN_WORK_JOINED)
    par_slots = int(min(MAX_THREADS, max(2, work // PAR_MIN_WORK))) if any_par else 1
    return FusionPlan(mat=planner.mat, hard=planner.hard, soft=planner.soft, out_vals=planner.out_vals,
                      nests=nests, rows=planner.rows, parallel=any_par, par_slots=par_slots, wake=wake)


def unit_reads(program, mat, unit):
    """(read at own index, read otherwise): the buffers a unit reads."""
    return _Planner(program, mat).unit_reads(unit.kind, unit.pos, unit.val if unit.kind == "store" else None)


def _gemm_size(planner, n0):
    """(flops, rows of C, K) of a float MatMul / BatchMatMulV2 node (the only node units
    split across threads, lower_matmul.py); (0, 0, 0) for any other node unit."""
    if n0.op not in ("MatMul", "BatchMatMulV2") or not n0.outputs[0][1].is_floating:
        return 0, 0, 0
    out_shape = n0.outputs[0][0]
    mM, mN = out_shape[-2:]
    a_sh = planner.shape(n0.inputs[0])
    ta = n0.attrs["transpose_a"] if n0.op == "MatMul" else n0.attrs["adj_x"]
    mK = a_sh[-2] if ta else a_sh[-1]
    if None in out_shape or mK is None:     # run-time rows (lower_rows.py): never split
        return 0, 0, 0
    return 2 * int(np.prod(out_shape[:-2], dtype=np.int64)) * mM * mN * mK, mM, mK


def _splits(g, allow_parallel, min_flops, min_work):
    """Whether nest g runs on all threads at these thresholds: a GEMM's rows (or a
    batch's matrices, each thread with its own workspace: lower_matmul.py) from
    min_flops on, with at least 16 rows; a loop nest from min_work on, if its outer
    run has at least two fixed blocks to hand out."""
    if not allow_parallel:
        return False
    if g.shape is None:
        return bool(g.work and g.work >= min_flops and g.gemm_rows >= 16)
    if not (g.runs and g.work >= min_work):
        return False
    outer = g.runs[0][0]
    inner = int(np.prod([e for e, _ in g.runs[1:]], dtype=np.int64)) if len(g.runs) > 1 else 1
    nb = -(-outer // (BLOCK_ELEMS if len(g.runs) == 1 else max(1, BLOCK_ELEMS // inner)))
    return nb >= 2


class _Planner:
    def __init__(self, program, mat=None):
        self.p = program
        self.mat = mat
        self.ELEMENTWISE, self.LAYOUT, self.MATERIALISE, self.ALIAS, self.NEEDS_BUFFER = tables()

    def shape(self, v):
        return self.p.nodes[v.node].outputs[v.index][0]

    def root(self, v):
        return root(self.p, v)

    def analyse(self):
        p = self.p
        nodes = p.nodes
        ELEMENTWISE, LAYOUT, MATERIALISE, ALIAS = self.ELEMENTWISE, self.LAYOUT, self.MATERIALISE, self.ALIAS
        uses = {}
        need_buf = set()
        # nodes reading a value of run-time rows (lower_rows.py): an elementwise one (or an
        # Unreduce) is fused into its reader's row loop like any elementwise value
        # (materialised only by the rules below: fetched, read twice, read through a
        # buffer); a reduction or a Shape is a node of its own, reading its operand inline
        self.rows = plan_rows(p)
        for i, n in enumerate(nodes):
            if n.op == "Arg":
                continue
            if n.op not in ELEMENTWISE and n.op not in LAYOUT and n.op not in MATERIALISE and n.op not in ALIAS:
                raise Unsupported(f"op {n.op} has no lowering")
            opdef = REGISTRY[n.op]
            nb = self.NEEDS_BUFFER.get(n.op, ())
            # (a row loop of run-time rows may run 0 times too: its static operands likewise)
            empty = all(s is not None and None not in s and 0 in s for s, _ in n.outputs) or i in self.rows
            for k, v in enumerate(n.inputs):
                if opdef.is_shape_only(k):
                    continue
                uses[v] = uses.get(v, 0) + 1
                if n.op in ALIAS or nb == "all" or k in nb:
                    need_buf.add(v)
                elif empty and self._elems(v) and nodes[v.node].op not in ("Literal", "Const"):
                    # a reader of no elements computes nothing inline: its operand's own
                    # checks (x // 0, a ListCheck) run only if it is computed in a nest of its own
                    need_buf.add(v)
        out_vals = [v for v in p.outputs if v is not None] + [v for _, v in p.var_writes]
        mat = set()
        for i, n in enumerate(nodes):
            if n.op == "Arg" or n.op in ALIAS:
                continue
            for j in range(len(n.outputs)):
                v = Value(i, j)
                # a ListCheck runs over its own elements: fused into a reader of no elements
                # (a write into an empty TensorArray) it would never run, and TF's error with it
                if (n.op in MATERIALISE or v in need_buf or (i in self.rows and not self.rows[i].inline)
                        or (uses.get(v, 0) > 1 and not has_fact(n.op, "cheap")) or n.op == "ListCheck"):
                    mat.add(v)
        roots = set(need_buf) | set(out_vals)
        for i, n in enumerate(nodes):
            if n.op in ALIAS:
                roots.add(n.inputs[0])
        for v in roots:
            r = self.root(v)
            if nodes[r.node].op != "Arg":
                mat.add(r)
        self.mat = mat
        self.out_vals = out_vals
        # values that must live in a buffer whatever the fusion decides
        self.hard = {self.root(v) for v in roots} | set(need_buf)

    def _elems(self, v):
        """Whether v has elements (shape known and no 0 in it)."""
        sh = self.shape(v)
        return sh is not None and None not in sh and 0 not in sh

    # ------------------------------------------------------------ reads
    def _reads2(self, v, ident, acc_i, acc_o, seen):
        """Buffers read when generating v, split by whether they are read at the
        consumer's own element index (ident: a chain of same-shape elementwise
        ops) or through a broadcast / layout map."""
        key = (v, ident)
        if key in seen:
            return
        seen.add(key)
        n = self.p.nodes[v.node]
        if n.op == "Arg" or v in self.mat or n.op in self.ALIAS:
            (acc_i if ident and n.op not in self.ALIAS else acc_o).add(self.root(v))
            return
        self._reads_inputs(n, v, ident, acc_i, acc_o, seen)

    def _reads_inputs(self, n, v, ident, acc_i, acc_o, seen):
        out_shape = n.outputs[v.index][0]
        for u in data_inputs(n):
            self._reads2(u, ident and n.op in self.ELEMENTWISE and self.shape(u) == out_shape, acc_i, acc_o, seen)

    def unit_reads(self, kind, i, payload):
        acc_i, acc_o = set(), set()
        n = self.p.nodes[i]
        if kind == "store":
            self._reads_inputs(n, payload, True, acc_i, acc_o, {(payload, True), (payload, False)})
        elif kind == "reduce":
            self._reads2(n.inputs[0], True, acc_i, acc_o, set())
        else:
            for u in data_inputs(n):
                self._reads2(u, False, acc_i, acc_o, set())
        return acc_i, acc_o

    # ------------------------------------------------------------ nests
    def _full_reduce_kind(self, n):
        """kind when node n reduces its (non-empty) input to a single element."""
        kind = REGISTRY[n.op].full_reduce if n.op in REGISTRY else None
        if kind is None:
            return None
        in_shape = self.shape(n.inputs[0])
        if int(np.prod(in_shape, dtype=np.int64)) == 0 or int(np.prod(n.outputs[0][0], dtype=np.int64)) != 1:
            return None
        if n.op != "SumToShape" and n.attrs.get("axis") is not None:
            axes = set(normalize_axes(n.attrs["axis"], len(in_shape)))
            if any(in_shape[d] != 1 for d in range(len(in_shape)) if d not in axes):
                return None
        return kind

    def plan_nests(self):
        """Groups the loop nests (in node order) into multi-output nests over
        one iteration shape; values read only inside their own nest, at the
        element being computed, stop being materialised."""
        nodes = self.p.nodes
        node_vals = {}
        for v in self.mat:
            node_vals.setdefault(v.node, []).append(v)
        units = []
        for i, n in enumerate(nodes):
            if n.op == "Arg" or n.op in self.ALIAS:
                continue
            vals = sorted(node_vals.get(i, ()), key=lambda x: x.index)
            if not vals:
                continue
            if i in self.rows:
                units.append(("node", i, None, None))
                continue
            if n.op in self.MATERIALISE:
                kind = self._full_reduce_kind(n)
                if kind is not None and len(vals) == 1:
                    units.append(("reduce", i, kind, tuple(self.shape(n.inputs[0]))))
                else:
                    units.append(("node", i, None, None))
                continue
            for v in vals:
                shape = tuple(self.shape(v))
                if int(np.prod(shape, dtype=np.int64)) == 0:
                    units.append(("node", i, v, None))
                else:
                    units.append(("store", i, v, shape))
        nests = []
        for u in units:
            kind, i, payload, shape = u
            if not FUSE_NESTS and kind != "node":
                kind = kind if kind == "store" else "reduce"
            ri, ro = self.unit_reads(kind, i, payload if kind == "store" else None)
            # a "node" unit of an empty output (payload) carries that output, not output 0
            own = kind == "store" or (kind == "node" and payload is not None)
            unit = Unit(kind=kind, pos=i, val=payload if own else Value(i, 0),
                        rkind=payload if kind == "reduce" else None, ri=ri, ro=ro)
            g = nests[-1] if nests else None
            if (kind != "node" and FUSE_NESTS and g is not None and g.shape == shape and not (ro & g.produced)
                    and not (ri & g.reduced)):
                g.units.append(unit)
                g.end = i
            else:
                g = Nest(units=[unit], shape=shape if kind != "node" else None, start=i, end=i)
                nests.append(g)
            if kind == "reduce":
                g.reduced.add(unit.val)
            if kind != "node" or payload is None:
                g.produced.add(unit.val)
            else:
                g.produced.add(payload)
        # values that need no buffer: multi-use intermediates read only at their
        # own element index by units of their own nest
        readers = {}
        for gi, g in enumerate(nests):
            for u in g.units:
                for r in u.ri:
                    readers.setdefault(r, []).append((gi, True))
                for r in u.ro:
                    readers.setdefault(r, []).append((gi, False))
        soft = set()
        for gi, g in enumerate(nests):
            if g.shape is None or not FUSE_NESTS:
                continue
            for u in g.units:
                v = u.val
                if u.kind != "store" or v in self.hard:
                    continue
                rs = readers.get(v, [])
                if all(rg == gi and ident for rg, ident in rs):
                    soft.add(v)
        if soft:
            self.mat -= soft
            for g in nests:
                g.units = [u for u in g.units if not (u.kind == "store" and u.val in soft)]
            nests = [g for g in nests if g.units]
        self.soft = soft
        return nests

    # ------------------------------------------------------------ nest properties
    def _leaf_flags(self, v, flags, R, acc, seen):
        """Collects, for every buffer read by the expression of v, which of the
        R iteration dims it varies along; False when a layout map is involved."""
        key = (v, flags)
        if key in seen:
            return True
        seen.add(key)
        n = self.p.nodes[v.node]
        if n.op == "Arg" or v in self.mat or n.op in ("Literal", "SizeRatio"):
            if n.op in self.ALIAS:
                return False
            acc.add(flags)
            return True
        if n.op in self.ALIAS or n.op not in self.ELEMENTWISE:
            return False
        for u in data_inputs(n):
            ush = self.shape(u)
            off = R - len(ush)
            f = tuple(flags[j] and j >= off and ush[j - off] != 1 for j in range(R))
            if not self._leaf_flags(u, f, R, acc, seen):
                return False
        return True

    def merge_dims(self, g):
        """Runs of iteration dims that every access walks contiguously (or not at
        all) are merged: [(extent, last dim of the run)], size-1 dims dropped."""
        shape = g.shape
        R = len(shape)
        keep = [j for j in range(R) if shape[j] != 1]
        full = tuple(shape[j] != 1 for j in range(R))
        acc, seen = {full}, set()
        ok = True
        for u in g.units:
            if u.kind == "store":
                n = self.p.nodes[u.val.node]
                if n.op not in self.ELEMENTWISE:
                    ok = False
                    break
                for x in data_inputs(n):
                    xs = self.shape(x)
                    off = R - len(xs)
                    f = tuple(j >= off and xs[j - off] != 1 for j in range(R))
                    if not self._leaf_flags(x, f, R, acc, seen):
                        ok = False
                        break
            else:
                if not self._leaf_flags(self.p.nodes[u.pos].inputs[0], full, R, acc, seen):
                    ok = False
            if not ok:
                break
        runs = []
        for j in keep:
            if ok and runs and all(f[runs[-1][1]] == f[j] for f in acc):
                runs[-1] = (runs[-1][0] * shape[j], j)
            else:
                runs.append((shape[j], j))
        return runs

    def work(self, g):
        """Estimated cost of a nest in element-ops (transcendentals weigh more)."""
        ops = []
        seen = set()
        for u in g.units:
            v = u.val if u.kind == "store" else self.p.nodes[u.pos].inputs[0]
            if u.kind == "store":
                node_ops(self.p, self.mat, self.p.nodes[v.node], ops, seen)
            else:
                ops.append("Sum")
                fused_ops(self.p, self.mat, v, ops, seen)
        w = sum(REGISTRY[o].cost for o in ops) + len(g.units)
        return int(np.prod(g.shape, dtype=np.int64)) * w
