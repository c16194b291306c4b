"""Program -> one LLVM module with one entry function.

The entry function is ``void <name>(i8** slots)``; ``slots`` holds, in order,
a pointer per Program arg, a pointer per output slot (Program.outputs that are
not None, then Program.var_writes), the scratch arena and an i32 status word.

Code generation model (XLA-style "element generators"):

* every Value is either *materialised* (lives in a buffer: an argument, an
  output slot or a scratch slice) or *fused*: it is recomputed inline, element
  by element, inside the loop nest of the materialised value that consumes it;
* a generator is asked for the element(s) at an index ``idx`` (one entry per
  dimension: ``(base: i64 ir.Value, lane_coeff: int)``) for ``W`` lanes: with
  W > 1 it returns a ``<W x T>`` vector whose lane ``l`` is the element at
  ``base + l * lane_coeff`` in each dimension.  Loads whose lane stride is 1
  become vector loads, 0 a splat, anything else a gather of scalar loads;
  index maps that are not affine (tile, gather, concat, ...) are scalarised;
* a Value is materialised when it is fetched / written to a variable, when it
  is read by more than one consumer, when it is produced by a reduction,
  matmul or scatter, or when its consumer needs a buffer (reshape aliases,
  matmul operands, non-affine layout ops);
* reshape-like ops on a materialised value are free aliases;
* scratch buffers are assigned by liveness (first fit in one arena).

What is materialised and how nests are grouped is decided by fusion_plan.py,
where buffers live by buffer_plan.py; this module emits what they planned.

Runtime errors (integer division by zero, gather index out of range,
integer ** negative) are detected in the kernel *before* the faulting
access: the index / divisor is replaced by a safe one and a code is written
to the status word; the executor raises InvalidArgumentError and publishes
nothing.  Native code never reads or writes out of bounds.
"""
from contextlib import contextmanager

import numpy as np
from llvmlite import ir

from ..ops.registry import REGISTRY
from ..passes.ir import Value
from . import irutil, mxcsr
from .buffer_plan import plan_buffers
from .fusion_plan import BLOCK_ELEMS, fused_ops, node_ops, plan_fusion
from .irutil import (I32, I64, I8, VW, Buffer, bcast_idx, c64, const, load_buf, mem_type, nullctx,
                     not_vectorised, reg_type, store_buf, value_bytes)
from .lower_control import check
from .lower_elementwise import SCALAR_FORM_BRANCHES
from .lower_random import uses_random
from .lower_reduction import acc_dtype, acc_init, combine, finalize, hreduce, widen
from .lower_rows import Rows, alias as rows_alias, copy_out as rows_copy_out, dry as rows_dry, \
    lower as lower_rows, row_dynamic, view as rows_view
from .lowering_context import LoweringContext
from .lowering_tables import tables
from .sync import emit_barrier, emit_exit, emit_join
from .target import current

# A float32 sum fused into a vector loop adds NARROW_RUN vectors in float32
# lanes, then widens that partial into its float64 accumulator: converting
# every vector cost ~10% of W2 (value + gradient); NARROW_RUN = 8 keeps the
# float32 part shorter than numpy's pairwise sum's 16-element runs.
NARROW_RUN = 8


class KernelBuilder(LoweringContext):
    """Builds the module for one Program.  After ``build()``: ``module``,
    ``meta`` (JSON-able) and ``report`` (``groups``: fusion groups,
    ``buffer_report``: buffers).

    Planning is done by passes with typed results (fusion_plan.plan_fusion,
    buffer_plan.plan_buffers); IR helpers that need no kernel state are free
    functions in irutil.py.  What remains here is emission, and the builder is
    the context a lowering (lower_*.py) receives as ``kb``: it implements
    lowering_context.py's interface, which is all a lowering uses.
    """

    def __init__(self, program, name, target_data=None, triple=None, flush_denormals=False):
        self.p = program
        self.name = name
        self.module = ir.Module(name=name)
        if triple:
            self.module.triple = triple
        if target_data:
            self.module.data_layout = target_data
        self.groups = []          # report: (value description, fused ops)
        self.buffer_report = []   # report: (name, bytes, offset or slot)
        self.has_checks = False
        self._fn_counter = 0
        self.literals = {}
        self._dl, self._triple = target_data, triple
        self.memo = None          # per loop-body cache of generated values
        self.parallel = False
        self.par_node = False     # the MATERIALISE node being emitted runs on all threads
        self.par_slots = 1
        self.par_wake = True
        self.par_counter = None   # arena offset of the MATERIALISE node's block counters
        self.tid, self.nthreads = c64(0), c64(1)
        self.barriers = 0         # barrier sites emitted (codegen/sync.py numbers them)
        self.x86 = (triple or "x86_64").startswith(("x86_64", "i686", "i386"))
        # flush-denormals mode (jitgrad/denormals.py, codegen/mxcsr.py): MXCSR is x86's. The
        # caller passes the mode its cache key was made with (never read here again: a switch
        # in between would file this kernel under the other mode's key)
        self.flush_mode = bool(flush_denormals)
        self.flush_denormals = self.x86 and self.flush_mode
        self.futex = self.x86 and "linux" in (triple or "x86_64-unknown-linux-gnu")   # barrier waiters sleep (sync.py)
        self.target = current()   # vector width / matmul tiles come from it (codegen/target.py)
        self.finish_hooks = []    # emitted before the entry function returns (frees of loop stacks)
        self.persistent_words = 0  # arena words kept from call to call (lower_control.py)
        self.is_region = False     # a branch / loop body compiled into its parent kernel
        self.region_cache = {}     # lower_control.py: compiled regions of this kernel by body
        self.rng = None            # the call's random handle, where a region draws (build_body)
        self.unit_sink = None      # backend.Units compiling finished matmul functions meanwhile (compiler.py)

    # ------------------------------------------------------------ the context's small services
    def shape(self, v):
        return self.p.nodes[v.node].outputs[v.index][0]

    def dtype(self, v):
        return self.p.nodes[v.node].outputs[v.index][1]

    def unique_name(self, tag):
        """A fresh module-level name for a helper function (``<kernel>_<tag><k>``)."""
        self._fn_counter += 1
        return f"{self.name}_{tag}{self._fn_counter}"

    def define_later(self, fns, define):
        """`fns` are declared in this module and called from it; `define()` emits their
        bodies: now, or with a unit sink (backend.Units.defer) once the module's own text
        is made, so that its compile starts first (matmul functions: lower_matmul.py)."""
        if self.unit_sink is None:
            define()
        else:
            self.unit_sink.defer(self.module, fns, define)

    def literal_buffer(self, key, shape, dt, make_global):
        """The Buffer of a module-level constant array, created once per key by
        make_global(name) -> ir.GlobalVariable."""
        buf = self.literals.get(key)
        if buf is None:
            g = make_global(f"{self.name}_lit{len(self.literals)}")
            ptr = self.entry_b.gep(g, [c64(0), c64(0)])
            buf = self.literals[key] = Buffer(ptr, shape, dt, "literal")
        return buf

    def sub_builder(self, program, tag):
        """A builder for a control-flow region emitted into this kernel's module."""
        sub = KernelBuilder(program, f"{self.name}_{tag}", self._dl, self._triple, self.flush_mode)
        sub.module = self.module
        sub.is_region = True
        sub.unit_sink = self.unit_sink
        return sub

    def set_error(self, cond, code, values=()):
        """The status word becomes ``code`` (an ERR_* int or an i32 value) where
        any lane of ``cond`` is set and nothing failed before (first-wins: TF reports
        the op that failed first; code after it computes from garbage); the executor
        raises its message. ``values`` (i32 scalars) go to status words 4, 5, ... with
        it: the failure's own values, for its message (ops/list_ops.py)."""
        self.has_checks = True
        b = self.b
        bad = irutil.any_true(b, cond)
        old = b.load(self.status)
        bad = b.and_(bad, b.icmp_signed("==", old, ir.Constant(I32, 0)))
        for k, v in enumerate(values):
            p = b.gep(self.status, [ir.Constant(I32, 4 + k)])
            b.store(b.select(bad, v, b.load(p)), p)
        b.store(b.select(bad, ir.Constant(I32, code) if isinstance(code, int) else code, old), self.status)

    def no_error_yet(self):
        """i1: nothing emitted before this point has set the status word (code
        after a failed op computes from garbage; effects there must not run)."""
        return self.b.icmp_signed("==", self.b.load(self.status), ir.Constant(I32, 0))

    def alloca(self, ty):
        return self.entry_b.alloca(ty)

    def loop(self, stop, start=0, step=1, vectorise=True):
        """for i in range(start, stop, step); yields i (i64). A bound is a constant,
        or an i64 known at run time (a row count, lower_rows.py).  ``vectorise=False``
        for a loop of fewer iterations than the vector width (a remainder):
        irutil.not_vectorised."""
        return self.loop_dyn(start if isinstance(start, ir.Value) else c64(start),
                             stop if isinstance(stop, ir.Value) else c64(stop), step, vectorise)

    # ------------------------------------------------------------ generators
    def _memo_key(self, v, idx, W):
        return (v, W, tuple((("c", b.constant) if isinstance(b, ir.Constant) else id(b), c) for b, c in idx))

    def gen(self, v, idx, W):
        memo = self.memo
        if memo is not None:
            key = self._memo_key(v, idx, W)
            hit = memo.get(key)
            if hit is not None:
                return hit[0]
            r = self._gen(v, idx, W)
            memo[key] = (r, idx)   # idx kept alive so its ids stay unique
            return r
        return self._gen(v, idx, W)

    def _gen(self, v, idx, W, top=False):
        if not top:
            buf = self.buffers.get(v)
            if buf is not None:
                return load_buf(self.b, buf, idx, W)
        node = self.p.nodes[v.node]
        op = node.op
        elementwise, layout = tables()[:2]
        if op in elementwise:
            out_shape = node.outputs[0][0]
            opdef = REGISTRY[op]
            xs = []
            for k, inp in enumerate(node.inputs):
                if opdef.is_shape_only(k):
                    xs.append(None)
                    continue
                xs.append(self.gen(inp, bcast_idx(idx, out_shape, self.shape(inp)), W))
            return elementwise[op](self, node, xs, W)
        if op in layout:
            return layout[op](self, node, v.index, idx, W)
        raise irutil.Unsupported(f"no generator for {op}")

    def input_gen(self, v):
        return lambda idx, W: self.gen(v, idx, W)

    def emit_nest(self, out_buf, gen):
        """out_buf[idx] = gen(idx, W) over out_buf.shape, inner dim vectorised."""
        shape = out_buf.shape
        b = self.b
        if any(d == 0 for d in shape):
            return
        R = len(shape)
        if R == 0:
            store_buf(b, out_buf, [], gen([], 1), 1)
            return

        def rec(k, idx):
            d = shape[k]
            if k < R - 1:
                if d == 1:
                    rec(k + 1, idx + [(c64(0), 0)])
                    return
                with self.loop(d) as i:
                    rec(k + 1, idx + [(i, 0)])
                return
            W = VW if d >= VW else 1
            nv = d - d % W if W > 1 else 0
            if W > 1:
                with self.loop(nv, 0, W) as i:
                    ix = idx + [(i, 1)]
                    store_buf(b, out_buf, ix, gen(ix, W), W)
            if nv < d:
                if d - nv == 1:
                    ix = idx + [(c64(nv), 0)]
                    store_buf(b, out_buf, ix, gen(ix, 1), 1)
                else:
                    with self.loop(d, nv, vectorise=False) as i:     # < VW iterations
                        ix = idx + [(i, 0)]
                        store_buf(b, out_buf, ix, gen(ix, 1), 1)
        rec(0, [])

    def scratch_buffer(self, nbytes_or_shape, dtype, tag="tmp"):
        """A temporary buffer live only during the current node (matmul workspace, ...)."""
        shape = tuple(nbytes_or_shape)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.size
        off = self._temp_offsets[self.cur_pos].pop(0) if self._emitting else None
        if not self._emitting:
            self._temps_needed.setdefault(self.cur_pos, []).append(nbytes)
            return Buffer(ir.Constant(mem_type(dtype).as_pointer(), None), shape, dtype, tag)
        ptr = self.b.bitcast(self.b.gep(self.arena, [c64(off)]), mem_type(dtype).as_pointer())
        self.buffer_report.append((f"{tag} (node {self.cur_pos})", nbytes, f"scratch+{off}"))
        return Buffer(ptr, shape, dtype, tag)

    # ------------------------------------------------------------ threads
    def on_thread0(self):
        """Context: the enclosed code runs on thread 0 only (parallel kernels)."""
        return self._guard(self.b.icmp_signed("==", self.tid, c64(0))) if self.parallel else nullctx()

    @contextmanager
    def _guard(self, cond):
        then = self.fn.append_basic_block("t0")
        cont = self.fn.append_basic_block("t0.end")
        self.b.cbranch(cond, then, cont)
        self.b.position_at_end(then)
        yield
        self.b.branch(cont)
        self.b.position_at_end(cont)

    @contextmanager
    def grab_rows(self, M, align=8, chunks=16):
        """Yields [r0, r1): row chunks of M taken dynamically (``loop_grab`` on the
        node's counter): ``chunks`` chunks of a multiple of ``align`` rows, however
        many threads run, so no rows wait for a thread that joins late
        (codegen/sync.py) and no chunk boundary depends on the thread count."""
        b = self.b
        chunk = -(-max(1, -(-M // chunks)) // align) * align
        with self.loop_grab(self.par_counter, -(-M // chunk)) as blk:
            r0 = b.mul(blk, c64(chunk))
            r1 = b.add(r0, c64(chunk))
            if M % chunk:
                r1 = b.select(b.icmp_signed("<", r1, c64(M)), r1, c64(M))
            yield r0, r1

    def barrier(self):
        """The threads that have joined the call wait here for each other (a thread
        joining later skips it: jitgrad/codegen/sync.py)."""
        if self.parallel:
            emit_barrier(self)

    def sync_before(self, parallel):
        """Barrier before the next segment (a loop nest or materialised node) only
        where threads hand data over: into a parallel segment (its inputs, and the
        block counters zeroed at entry, come from thread 0) or out of one (its
        results from every thread).  Serial segments all run on thread 0 in program
        order: a barrier between two of them only made every thread wait (W3's
        kernel: 22 barriers, now 6)."""
        if parallel or self._last_parallel:
            self.barrier()
        self._last_parallel = parallel

    @contextmanager
    def loop_dyn(self, start, stop, step=1, vectorise=True):
        """for i in range(start, stop, step) with runtime (i64) bounds (``vectorise``: see loop)."""
        b = self.b
        ctr = self.alloca(I64)
        b.store(start if not isinstance(start, int) else c64(start), ctr)
        cond = self.fn.append_basic_block("for.cond")
        body = self.fn.append_basic_block("for.body")
        end = self.fn.append_basic_block("for.end")
        b.branch(cond)
        b.position_at_end(cond)
        i = b.load(ctr)
        b.cbranch(b.icmp_signed("<", i, stop if not isinstance(stop, int) else c64(stop)), body, end)
        b.position_at_end(body)
        yield i
        b.store(b.add(i, c64(step)), ctr)
        latch = b.branch(cond)
        if not vectorise:
            not_vectorised(b, latch)
        b.position_at_end(end)

    @contextmanager
    def loop_grab(self, counter_off, nb):
        """Dynamic schedule: each thread takes the next block index from an
        atomic counter (zeroed at kernel entry) until all ``nb`` are taken.
        Which thread computes a block does not change its result."""
        b = self.b
        ctr = b.bitcast(b.gep(self.arena, [c64(counter_off)]), I64.as_pointer())
        cond = self.fn.append_basic_block("grab.cond")
        body = self.fn.append_basic_block("grab.body")
        end = self.fn.append_basic_block("grab.end")
        b.branch(cond)
        b.position_at_end(cond)
        blk = b.atomic_rmw("add", ctr, c64(1), "monotonic")
        b.cbranch(b.icmp_signed("<", blk, c64(nb)), body, end)
        b.position_at_end(body)
        yield blk
        b.branch(cond)
        b.position_at_end(end)

    # ------------------------------------------------------------ nest emission
    def emit_group(self, g, outs, partial_off, counter):
        """One loop nest computing every unit of g: stores (elementwise values
        into their buffers) and full reductions (accumulated per fixed block;
        block partials combined in block order, so the result does not depend
        on the thread count)."""
        b = self.b
        shape = g.shape
        R = len(shape)
        runs = g.runs
        reds = [u for u in g.units if u.kind == "reduce"]
        stores = [u for u in g.units if u.kind == "store"]
        par = g.parallel
        # Two vectors per step for types of at most 4 bytes: the transcendental chains
        # are latency-bound, and LLVM interleaves the two halves of a <16 x float>
        # (W2 value+gradient at 1e7: -12%).  8-byte types already span two ymm registers.
        NW = 2 * VW if all(self.dtype(v).size <= 4 for v in [u.val for u in stores] +
                            [self.p.nodes[u.pos].inputs[0] for u in reds]) else VW
        # An innermost run shorter than a vector leaves its elements to scalar
        # loops, which LLVM vectorises unless an op's scalar form branches
        # (SCALAR_FORM_BRANCHES): then lanes go along the run before it (a
        # gather / scatter when the last run is strided in memory).  With fused
        # reductions too: lane j of the vector accumulator takes the rows = j
        # mod NW of each fixed block, an order as fixed as the inner-run
        # vector sums' (bit-identical run to run and for any thread count);
        # their scalar loop was not vectorised at all (an ordered sum).
        ops = []
        for u in g.units:
            node_ops(self.p, self.mat, self.p.nodes[u.pos], ops, set())
        lanes_across = (len(runs) >= 2 and runs[-1][0] < NW and runs[-2][0] >= NW
                        and not SCALAR_FORM_BRANCHES.isdisjoint(ops))
        # blocks over the outermost merged dim
        if not runs:
            nb, rows = 1, 1
        else:
            inner_elems = int(np.prod([e for e, _ in runs[1:]], dtype=np.int64)) if len(runs) > 1 else 1
            if len(runs) == 1:
                rows = BLOCK_ELEMS if (reds or par) else runs[0][0]
            else:
                rows = max(1, BLOCK_ELEMS // inner_elems) if (reds or par) else runs[0][0]
            nb = -(-runs[0][0] // rows)
        red_info = []
        for u in reds:
            n = self.p.nodes[u.pos]
            dt = self.dtype(n.inputs[0])
            acc_dt = acc_dtype(u.rkind, dt)
            red_info.append((u, n, dt, acc_dt))
        parts = []
        for (u, n, dt, acc_dt), off in zip(red_info, partial_off):
            ty = reg_type(acc_dt)
            parts.append(b.bitcast(b.gep(self.arena, [c64(off)]), ty.as_pointer()))
        ctx = self._guard(b.icmp_signed("==", self.tid, c64(0))) if (self.parallel and not par) else nullctx()
        with ctx:
            lo, hi = c64(0), c64(nb)

            narrow = [u.rkind in ("sum", "mean") and dt.is_floating and acc_dt is not dt
                      for u, n, dt, acc_dt in red_info]

            def body(idx, W, accs, partials=None):
                """partials: float32 vectors that the narrow sums add into instead."""
                self.memo = {}
                for u, ob in zip(stores, outs):
                    v = u.val
                    val = self._gen(v, idx, W, top=True)
                    self.memo[self._memo_key(v, idx, W)] = (val, idx)
                    store_buf(b, ob, idx, val, W)
                for k, ((u, n, dt, acc_dt), (av, as_)) in enumerate(zip(red_info, accs)):
                    x = self.gen(n.inputs[0], idx, W)
                    if partials is not None and narrow[k]:
                        p, t = partials[k], dt
                    else:
                        p, t = (av if W > 1 else as_), acc_dt
                        x = widen(self, x, dt, acc_dt, W)
                    b.store(combine(self, u.rkind, t, b.load(p), x), p)
                self.memo = None

            def narrow_runs(outer_vals, lo_i, span, accs):
                """Vector loop over whole runs of NARROW_RUN vectors from lo_i,
                narrow sums in float32 partials; returns where it stopped."""
                step = NW * NARROW_RUN
                end = b.add(lo_i, b.and_(span, c64(-step)))
                partials = [self.alloca(ir.VectorType(reg_type(dt), NW)) if nar else None
                            for nar, (u, n, dt, acc_dt) in zip(narrow, red_info)]
                with self.loop_dyn(lo_i, end, step) as c:
                    for pv, (u, n, dt, acc_dt) in zip(partials, red_info):
                        if pv is not None:
                            b.store(const(dt, 0, NW), pv)
                    with self.loop(step, 0, NW) as k:
                        body(idx_for(outer_vals + [(b.add(c, k), 1)]), NW, accs, partials)
                    for pv, (u, n, dt, acc_dt), (av, as_) in zip(partials, red_info, accs):
                        if pv is not None:
                            wide = widen(self, b.load(pv), dt, acc_dt, NW)
                            b.store(combine(self, u.rkind, acc_dt, b.load(av), wide), av)
                return end

            def idx_for(vals):
                idx = [(c64(0), 0)] * R
                for (ext, j), v in zip(runs, vals):
                    idx[j] = v
                return idx

            with (self.loop_dyn(lo, hi) if not par else self.loop_grab(counter, nb)) as blk:
                accs = []
                for u, n, dt, acc_dt in red_info:
                    av = self.alloca(ir.VectorType(reg_type(acc_dt), NW))
                    as_ = self.alloca(reg_type(acc_dt))
                    b.store(const(acc_dt, acc_init(u.rkind, dt), NW), av)
                    b.store(const(acc_dt, acc_init(u.rkind, dt)), as_)
                    accs.append((av, as_))
                if not runs:
                    body(idx_for([]), 1, accs)
                else:
                    r0 = b.mul(blk, c64(rows))
                    r1 = b.add(r0, c64(rows))
                    if runs[0][0] % rows:
                        r1 = b.select(b.icmp_signed("<", r1, c64(runs[0][0])), r1, c64(runs[0][0]))

                    def inner(outer_vals, lo_i, hi_i, n_inner):
                        # vectorised innermost run over [lo_i, hi_i)
                        if n_inner >= NW:
                            span = b.sub(hi_i, lo_i) if not isinstance(hi_i, int) else None
                            if span is None:
                                vend = c64(lo_i + (hi_i - lo_i) // NW * NW)
                            else:
                                vend = b.add(lo_i, b.and_(span, c64(-NW)))
                            if any(narrow) and n_inner >= NW * NARROW_RUN:
                                lo_i = narrow_runs(outer_vals, c64(lo_i) if isinstance(lo_i, int) else lo_i,
                                                   span if span is not None else c64(hi_i - lo_i), accs)
                            with self.loop_dyn(lo_i, vend, NW) as i:
                                body(idx_for(outer_vals + [(i, 1)]), NW, accs)
                            with self.loop_dyn(vend, hi_i, vectorise=False) as i:   # < NW iterations
                                body(idx_for(outer_vals + [(i, 0)]), 1, accs)
                        else:
                            with self.loop_dyn(lo_i, hi_i, vectorise=False) as i:   # n_inner < NW
                                body(idx_for(outer_vals + [(i, 0)]), 1, accs)

                    def across(outer_vals, lo_i, hi_i):
                        # lanes along the last-but-one run over [lo_i, hi_i), the
                        # short last run a loop inside each step
                        vend = b.add(lo_i, b.and_(b.sub(hi_i, lo_i), c64(-NW)))
                        for start, stop, W, coeff in ((lo_i, vend, NW, 1), (vend, hi_i, 1, 0)):
                            with self.loop_dyn(start, stop, W) as i, self.loop(runs[-1][0]) as k:
                                body(idx_for(outer_vals + [(i, coeff), (k, 0)]), W, accs)

                    if len(runs) == 1:
                        inner([], r0, r1, runs[0][0])
                    elif lanes_across:
                        if len(runs) == 2:
                            across([], r0, r1)
                        else:
                            with self.loop_dyn(r0, r1) as i0:
                                def rec(k, vals):
                                    if k == len(runs) - 2:
                                        across(vals, c64(0), c64(runs[k][0]))
                                        return
                                    with self.loop(runs[k][0]) as ik:
                                        rec(k + 1, vals + [(ik, 0)])
                                rec(1, [(i0, 0)])
                    else:
                        # A short innermost run (W3's N = 10 bias and softmax rows) is a
                        # scalar loop; LLVM unrolled it and vectorised the loop around it
                        # across rows, with a gather per element (61 in W3's kernel): ~30%
                        # of the main unit's optimise + codegen time for a few microseconds
                        # of work.  That loop stays scalar.
                        short = runs[-1][0] < NW
                        with self.loop_dyn(r0, r1, vectorise=not (short and len(runs) == 2)) as i0:
                            def rec(k, vals):
                                if k == len(runs) - 1:
                                    inner(vals, 0, runs[k][0], runs[k][0])
                                    return
                                with self.loop(runs[k][0], vectorise=not (short and k == len(runs) - 2)) as ik:
                                    rec(k + 1, vals + [(ik, 0)])
                            rec(1, [(i0, 0)])
                for (u, n, dt, acc_dt), (av, as_), pp in zip(red_info, accs, parts):
                    r = combine(self, u.rkind, acc_dt, hreduce(self, u.rkind, acc_dt, b.load(av), NW),
                                 b.load(as_))
                    b.store(r, b.gep(pp, [blk]))
        if reds:
            if par:
                self.barrier()
            with (self._guard(b.icmp_signed("==", self.tid, c64(0))) if self.parallel else nullctx()):
                for (u, n, dt, acc_dt), pp, ob in zip(red_info, parts, outs[len(stores):]):
                    count = int(np.prod(self.shape(n.inputs[0]), dtype=np.int64))
                    acc = self.alloca(reg_type(acc_dt))
                    b.store(b.load(b.gep(pp, [c64(0)])), acc)
                    if nb > 1:
                        with self.loop(nb, 1) as k:
                            b.store(combine(self, u.rkind, acc_dt, b.load(acc), b.load(b.gep(pp, [k]))), acc)
                    r = finalize(self, u.rkind, dt, acc_dt, b.load(acc), count, 1)
                    store_buf(b, ob, [(c64(0), 0)] * len(ob.shape), r, 1)
        return nb

    # ------------------------------------------------------------ build

    # ------------------------------------------------------------ build
    def build(self):
        check(self.p, top_level=True)
        # control-flow regions run on one thread (their bodies are called in a loop)
        self.build_body(allow_parallel=not any(n.op in ("If", "While") for n in self.p.nodes))
        if self.parallel and self.has_checks:
            # runtime checks write the status word: keep such kernels single-threaded
            sink = self.unit_sink
            self.__init__(self.p, self.name, self._dl, self._triple)
            if sink is not None:          # the units it took belong to the module dropped here
                sink.reset()
                self.unit_sink = sink
            self.build_body(allow_parallel=False)
        return self.module

    def release(self):
        """Frees the IR once its text is made; the builder is unusable after.  The module
        and the builder's own state (closures, memo, buffers) are reference cycles: with
        the collector paused while compiling (jitgrad/gc_pause.py), the first collection
        after it took 15-20 ms over W3's; cut here, reference counting frees them now."""
        for fn in self.module.functions:
            irutil.drop_body(fn)
        self.module.globals.clear()
        self.__dict__.clear()

    def build_text(self):
        """``build()``'s module as LLVM IR text: in the flush-denormals mode with its
        functions marked (codegen/mxcsr.py), so that LLVM folds constants as they run."""
        text = str(self.build())
        return mxcsr.mark_text(text) if self.flush_denormals else text

    def _dry_run(self, nests, rows):
        """Asks each MATERIALISE lowering (and lower_rows.py for the nodes ``rows``
        plans) for the temporaries it will need (matmul workspaces): node index ->
        byte sizes."""
        materialise = tables()[2]
        nodes = self.p.nodes
        self._emitting = False
        self._temps_needed = {}
        for g in nests:
            u = g.units[0]
            if u.kind == "node" and u.pos in rows:
                self.cur_pos = u.pos
                rows_dry(self, nodes[u.pos], rows[u.pos])
            elif u.kind == "node" and nodes[u.pos].op in materialise:
                self.cur_pos = u.pos
                self.par_node = g.parallel
                materialise[nodes[u.pos].op](self, nodes[u.pos], None, dry=True)
        return self._temps_needed

    def build_body(self, allow_parallel):
        """Plans and emits the entry function (also a region's, lower_control.py)."""
        p = self.p
        _, _, MATERIALISE, ALIAS, _ = tables()
        nodes = p.nodes
        n_args = len(p.args)
        plan = plan_fusion(p, allow_parallel)
        self.mat = plan.mat
        out_slot_vals = plan.out_vals
        nests = plan.nests
        slot_of_val = {}
        copies = []
        for s, v in enumerate(out_slot_vals):
            if v in plan.mat and v not in slot_of_val:
                slot_of_val[v] = s
            else:
                copies.append((s, v))
        self.parallel = plan.parallel
        self.par_slots = plan.par_slots
        self.par_wake = plan.wake
        temps_needed = self._dry_run(nests, plan.rows)
        # a fetched result of run-time rows keeps its memory from call to call (lower_rows.py)
        rows_keep = {}
        for v in slot_of_val:
            if v.node in plan.rows and row_dynamic(self.shape(v)):
                rows_keep[v] = self.persistent_words
                self.persistent_words += 2
        rows_copies = {}
        for s, v in copies:   # a view (reshape) of such a value, fetched: copied out (lower_rows.copy_out)
            if v.node in plan.rows and row_dynamic(self.shape(v)):
                rows_copies[s] = self.persistent_words
                self.persistent_words += 2
        bp = plan_buffers(p, plan, slot_of_val, copies, temps_needed, self.persistent_words)
        offsets = bp.offsets
        self.persistent_base = bp.persistent_base
        self.arena_bytes = bp.arena_bytes
        self._temp_offsets = bp.temp_offsets

        # ---- the function(s)
        slots_ty = I8.as_pointer().as_pointer()
        # in the flush-denormals mode the exported entries are wrappers (codegen/mxcsr.py)
        body_suffix = "_body" if self.flush_denormals and not self.is_region else ""
        if self.parallel:
            fnty = ir.FunctionType(ir.VoidType(), [slots_ty, I64, I64])
            self.fn = fn = ir.Function(self.module, fnty, name=self.name + "_mt" + body_suffix)
            self.tid, self.nthreads = fn.args[1], fn.args[2]
        else:
            fnty = ir.FunctionType(ir.VoidType(), [slots_ty])
            self.fn = fn = ir.Function(self.module, fnty, name=self.name + body_suffix)
            self.tid, self.nthreads = c64(0), c64(1)
        fn.attributes.add("nounwind")
        slots = fn.args[0]
        eb = fn.append_basic_block("allocas")
        body = fn.append_basic_block("body")
        self.entry_b = ir.IRBuilder(eb)
        self.b = b = ir.IRBuilder(body)

        def slot_ptr(k, ty):
            return b.bitcast(b.load(b.gep(slots, [c64(k)])), ty.as_pointer())

        n_out = len(out_slot_vals)
        self.arena = slot_ptr(n_args + n_out, I8)
        self.status = slot_ptr(n_args + n_out + 1, I32)
        # a slot more where a region draws random numbers: the call's handle (lower_random.py)
        self.rng = slot_ptr(n_args + n_out + 2, I8) if uses_random(p) else None
        if self.parallel:
            with self._guard(b.icmp_signed("==", self.tid, c64(0))):
                b.store(ir.Constant(I32, 0), self.status)
                for k in range(bp.n_counters):
                    b.store(c64(0), b.bitcast(b.gep(self.arena, [c64(bp.counter_base + 64 * k)]),
                                              I64.as_pointer()))
            # (the barrier before the first parallel segment publishes the zeroed counters)
            with self._guard(b.icmp_signed("!=", self.tid, c64(0))):
                emit_join(self)
        else:
            b.store(ir.Constant(I32, 0), self.status)
        self.buffers = {}
        for i, n in enumerate(nodes):
            if n.op == "Arg":
                a = n.attrs["arg"]
                shape, dt = n.outputs[0]
                self.buffers[Value(i, 0)] = Buffer(slot_ptr(a, mem_type(dt)), shape, dt, f"arg{a}")
        out_bufs = []
        for s, v in enumerate(out_slot_vals):
            shape, dt = nodes[v.node].outputs[v.index]
            out_bufs.append(Buffer(slot_ptr(n_args + s, mem_type(dt)), shape, dt, f"out{s}"))
            self.buffer_report.append((f"out{s} <- node {v.node} ({nodes[v.node].op})",
                                       value_bytes(shape, dt) or 24, f"slot {n_args + s}"))

        def buffer_for(v):
            if v in slot_of_val:
                return out_bufs[slot_of_val[v]]
            shape, dt = nodes[v.node].outputs[v.index]
            off = offsets[("val", v)]
            ptr = b.bitcast(b.gep(self.arena, [c64(off)]), mem_type(dt).as_pointer())
            self.buffer_report.append((f"node {v.node} ({nodes[v.node].op}) {list(shape)} {dt.name}",
                                       value_bytes(shape, dt) or 24,
                                       f"scratch+{off} live [{bp.born[v]},{bp.last_use[v]}]"))
            return Buffer(ptr, shape, dt, f"n{v.node}")

        rows_src = {s for rn in plan.rows.values() for s in (rn.src,) + rn.check}
        self._emitting = True
        # A multi-output op (e.g. SplitToShapesOf, the concat gradient) starts one
        # nest per output shape at the same node: every one of them must be emitted.
        starts = {}
        for gi, g in enumerate(nests):
            starts.setdefault(g.start, []).append(gi)
        pending = {}
        self._last_parallel = False
        for i, n in enumerate(nodes):
            if n.op == "Arg":
                continue
            self.cur_pos = i
            if n.op in ALIAS:
                src = n.inputs[0]
                sb = self.buffers.get(src)
                if sb is None:
                    continue   # only needed if someone reads it; fusion_plan makes sure the root has a buffer
                shape, dt = n.outputs[0]
                # a view of a value of run-time rows keeps knowing its rows (lower_rows.py)
                self.buffers[Value(i, 0)] = rows_alias(self, n, sb) if isinstance(sb, Rows) else \
                    Buffer(sb.ptr, shape, dt, sb.name)
                continue
            for gi in starts.get(i, ()):
                g = nests[gi]
                u0 = g.units[0]
                if u0.kind == "node":
                    self.sync_before(g.parallel and n.op in MATERIALISE)
                    vals = sorted((v for v in self.mat if v.node == i), key=lambda x: x.index)
                    if i in plan.rows:   # it reads a value of run-time rows
                        # (a multi-output node, e.g. the split of a concat's gradient, may have
                        # outputs nothing reads from memory: None, not emitted)
                        outs = [buffer_for(Value(i, k)) if Value(i, k) in self.mat else None
                                for k in range(len(n.outputs))]
                        self.groups.append((f"node {i} {n.op} {[d for d in n.outputs[0][0]]} over run-time rows",
                                            node_ops(p, self.mat, n, [])))
                        keep = {v.index: w for v, w in rows_keep.items() if v.node == i}
                        for k, ob in enumerate(lower_rows(self, n, outs, plan.rows[i], keep)):
                            self.buffers[Value(i, k)] = ob
                        continue
                    if n.op in MATERIALISE:
                        outs = [buffer_for(v) for v in vals]
                        self.groups.append((f"node {i} {n.op} {list(n.outputs[0][0])}"
                                            f"{' parallel' if g.parallel else ''}", node_ops(p, self.mat, n, [])))
                        self.par_node = g.parallel
                        self.par_counter = bp.counters.get(gi)
                        with (nullctx() if g.parallel else self.on_thread0()):
                            MATERIALISE[n.op](self, n, outs, dry=False)
                        self.par_node = False
                        if self.unit_sink is not None:    # its matmul functions compile from now on
                            self.unit_sink.collect(self.module)
                        for v, ob in zip(vals, outs):
                            # a While / If output of run-time rows: read through its descriptor
                            self.buffers[v] = rows_view(self, ob, *n.outputs[v.index]) if v in rows_src else ob
                    else:
                        v = u0.val
                        ob = buffer_for(v)
                        ops = []
                        fused_ops(p, self.mat, v, ops, set())
                        self.groups.append((f"node {i} {n.op} {list(ob.shape)} {ob.dtype.name}", ops))
                        with self.on_thread0():
                            self.emit_nest(ob, self.input_gen(v))
                        self.buffers[v] = ob
                    continue
                # the nest's buffers exist from its first unit on (aliases inside
                # it see them); the loop is emitted at its last unit
                stores = [u for u in g.units if u.kind == "store"]
                reds = [u for u in g.units if u.kind == "reduce"]
                outs = [buffer_for(u.val) for u in stores] + [buffer_for(u.val) for u in reds]
                for u, ob in zip(stores + reds, outs):
                    self.buffers[u.val] = ob
                poffs = [offsets[("part", gi, k)] for k in range(len(reds))]
                ops = []
                seen = set()
                for u in g.units:
                    node_ops(p, self.mat, nodes[u.pos], ops, seen)
                merged = [e for e, _ in g.runs]
                st_s = ", ".join(f"node {u.val.node}" for u in stores)
                rd_s = ", ".join(f"node {u.pos} {nodes[u.pos].op}" for u in reds)
                head = (f"nest {list(g.shape)} loops {merged}{' parallel' if g.parallel else ''}: "
                        f"stores [{st_s}] accumulates [{rd_s}]")
                self.groups.append((head, ops))
                pending.setdefault(g.end, []).append((g, outs, poffs, bp.counters.get(gi)))
            for g, outs, poffs, counter in pending.pop(i, ()):
                self.sync_before(g.parallel)
                self.emit_group(g, outs, poffs, counter)
        if copies:
            self.sync_before(False)
            with self.on_thread0():
                for s, v in copies:
                    ops = []
                    self.groups.append((f"copy -> out{s} from node {v.node} ({nodes[v.node].op})", ops))
                    if s in rows_copies:
                        rows_copy_out(self, out_bufs[s], self.buffers[v], rows_copies[s])
                    else:
                        self.emit_nest(out_bufs[s], self.input_gen(v))
        for hook in self.finish_hooks:
            hook()
        if self.parallel:
            emit_exit(self)
        b.ret_void()
        self.entry_b.branch(body)
        if body_suffix:    # every thread that runs the kernel enters through a wrapper
            fn = mxcsr.wrap_entry(self.module, fn, fn.name[:-len(body_suffix)])
        if self.parallel:
            # single-threaded entry: name(slots) == name_mt(slots, 0, 1)
            w = ir.Function(self.module, ir.FunctionType(ir.VoidType(), [slots_ty]), name=self.name)
            w.attributes.add("nounwind")
            wb = ir.IRBuilder(w.append_basic_block("entry"))
            wb.call(fn, [w.args[0], c64(0), c64(1)])
            wb.ret_void()
            fn.attributes.add("noinline")
        n_par = sum(1 for g in nests if g.parallel)
        self.meta = {
            "name": self.name,
            "n_args": n_args,
            "n_slots": n_args + n_out + 2 + (self.rng is not None),
            "rng_slot": n_args + n_out + 2 if self.rng is not None else None,
            "outputs": [(list(nodes[v.node].outputs[v.index][0]), nodes[v.node].outputs[v.index][1].name)
                        for v in out_slot_vals],
            "arena_bytes": int(self.arena_bytes),
            "has_checks": bool(self.has_checks),
            # threads (jitgrad.codegen.parallel): entry <name>_mt(slots, tid, n_threads)
            "parallel": bool(self.parallel),
            "threads": self.par_slots,
            "wake": bool(self.par_wake),   # False: runs on threads only already awake (parallel.kernel_threads)
            "parallel_nests": n_par,
            "target": self.target.key(),   # jitgrad.codegen.target: refused where the host cannot run it
            "persistent": [self.persistent_base, self.persistent_words],
            "flush_denormals": self.flush_mode,   # the mode it was built in (explain rebuilds in it)
        }
        return self.module
