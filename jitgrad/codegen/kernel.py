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

Runtime errors (integer division by zero, gather index out of range,
integer ** negative) are detected in the kernel *before* the faulting
access: the index / divisor is replaced by a safe one and a code is written
to the status word; the executor raises InvalidArgumentError and publishes
nothing.  Native code never reads or writes out of bounds.
"""
from contextlib import contextmanager

import numpy as np
from llvmlite import ir

from .. import dtypes
from ..ops.registry import REGISTRY, has_fact

I1, I8, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
VW = 8            # lanes of the explicitly vectorised inner loops
ALIGN = 64        # scratch buffer alignment (bytes)
# Loop nests whose estimated work (elements x weighted fused ops) reaches
# PAR_MIN_WORK are split across threads (see jitgrad/codegen/parallel.py);
# below it the call overhead of waking a second thread (~20-50 us) wins.
PAR_MIN_WORK = 1 << 21   # W2 at 1e5 (work ~5M) now splits: 143 -> 87 us on 2 cores; 3e4 still gains
MAX_THREADS = 8
PAR_MIN_FLOPS = 1 << 25   # matmul flops above which C's rows are split across threads
# Reductions fused into a loop nest accumulate per fixed block of BLOCK_ELEMS
# elements (independent of the thread count); block partials are combined in
# block order, so results are bit-identical for any number of threads.
BLOCK_ELEMS = 1 << 14
# A float32 sum fused into a vector loop adds NARROW_RUN vectors in float32
# lanes, then widens that partial into its float64 accumulator: converting
# every vector cost ~10% of W2 (value + gradient); NARROW_RUN = 8 keeps the
# float32 part shorter than numpy's pairwise sum's 16-element runs.
NARROW_RUN = 8
FUSE_NESTS = True   # False: one loop nest per materialised value (debugging)

ERR_INT_DIV_ZERO = 1
ERR_GATHER_RANGE = 2
ERR_NEG_POW = 3
ERR_STACK_ALLOC = 4
ERR_STACK_ROWS = 5
ERROR_MESSAGES = {
    ERR_INT_DIV_ZERO: "Integer division by zero",
    ERR_GATHER_RANGE: "indices out of range for GatherV2 (index not in [0, params.shape[axis]))",
    ERR_NEG_POW: "Integers to negative integer powers are not allowed",
    ERR_STACK_ALLOC: "out of memory for a while_loop's per-iteration stack",
    ERR_STACK_ROWS: "a loop's sliced input does not have one row per iteration",
}


class Unsupported(Exception):
    """The program contains something this code generator cannot lower."""


def reg_type(dt):
    if dt is dtypes.float32:
        return ir.FloatType()
    if dt is dtypes.float64:
        return ir.DoubleType()
    if dt is dtypes.int32:
        return I32
    if dt is dtypes.int64:
        return I64
    if dt is dtypes.bool_:
        return I1
    raise Unsupported(f"dtype {dt}")


def mem_type(dt):
    return I8 if dt is dtypes.bool_ else reg_type(dt)


def c64(v):
    return ir.Constant(I64, int(v))


def strides_of(shape):
    st, acc = [], 1
    for d in reversed(shape):
        st.append(acc)
        acc *= max(d or 1, 1)   # None: a dynamic stack (lower_control.py), never indexed
    return tuple(reversed(st))


class Buffer:
    __slots__ = ("ptr", "shape", "dtype", "strides", "name")

    def __init__(self, ptr, shape, dtype, name=""):
        self.ptr, self.shape, self.dtype, self.name = ptr, tuple(shape), dtype, name
        self.strides = strides_of(self.shape)


def _lowering_tables():
    from . import lower_elementwise, lower_layout, lower_reduction, lower_matmul, lower_scan, lower_control
    elem = dict(lower_elementwise.ELEMENTWISE)
    layout = dict(lower_layout.LAYOUT)
    mat = {}
    mat.update(lower_reduction.MATERIALISE)
    mat.update(lower_matmul.MATERIALISE)
    mat.update(lower_scan.MATERIALISE)
    mat.update(lower_control.MATERIALISE)
    needs = {}
    for mod in (lower_layout, lower_reduction, lower_matmul, lower_scan, lower_control):
        needs.update(getattr(mod, "NEEDS_BUFFER", {}))
    return elem, layout, mat, lower_layout.ALIAS, needs


ELEMENTWISE, LAYOUT, MATERIALISE, ALIAS, NEEDS_BUFFER = None, None, None, None, None


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


class KernelBuilder:
    """Builds the module for one Program.  After ``build()``: ``module``,
    ``meta`` (JSON-able) and ``report`` (fusion groups, buffers)."""

    def __init__(self, program, name, target_data=None, triple=None):
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
        self.par_counter = None   # arena offset of the MATERIALISE node's block counters
        self.tid, self.nthreads = c64(0), c64(1)
        self.x86 = (triple or "x86_64").startswith(("x86_64", "i686", "i386"))
        from .target import current
        self.target = current()   # vector width / matmul tiles come from it (codegen/target.py)
        self.finish_hooks = []    # emitted before the entry function returns (frees of loop stacks)
        self.persistent_words = 0  # arena words kept from call to call (lower_control.py)
        self.is_region = False     # a branch / loop body compiled into its parent kernel

    # ------------------------------------------------------------ small IR helpers
    def shape(self, v):
        return self.p.nodes[v.node].outputs[v.index][0]

    def dtype(self, v):
        return self.p.nodes[v.node].outputs[v.index][1]

    def iadd(self, a, b):
        if isinstance(b, int):
            b = c64(b)
        if isinstance(a, int):
            a = c64(a)
        if isinstance(b, ir.Constant) and b.constant == 0:
            return a
        if isinstance(a, ir.Constant) and a.constant == 0:
            return b
        if isinstance(a, ir.Constant) and isinstance(b, ir.Constant):
            return c64(a.constant + b.constant)
        return self.b.add(a, b)

    def imul(self, a, k):
        if k == 0:
            return c64(0)
        if k == 1:
            return a
        if isinstance(a, ir.Constant):
            return c64(a.constant * k)
        return self.b.mul(a, c64(k))

    def const(self, dt, value, W=1):
        ty = reg_type(dt)
        if dt is dtypes.bool_:
            value = int(bool(value))
        elif dt.is_integer:
            value = int(value)
        else:
            value = float(value)
        c = ir.Constant(ty, value)
        if W == 1:
            return c
        return ir.Constant(ir.VectorType(ty, W), [value] * W)

    def vec_type(self, ty, W):
        return ty if W == 1 else ir.VectorType(ty, W)

    def splat(self, v, W):
        if W == 1:
            return v
        if isinstance(v, ir.Constant):
            return ir.Constant(ir.VectorType(v.type, W), [v.constant] * W)
        vt = ir.VectorType(v.type, W)
        u = ir.Constant(vt, ir.Undefined)
        x = self.b.insert_element(u, v, ir.Constant(I32, 0))
        return self.b.shuffle_vector(x, u, ir.Constant(ir.VectorType(I32, W), [0] * W))

    def intrinsic(self, name, ret, args):
        fnty = ir.FunctionType(ret, [a.type for a in args])
        fn = self.module.globals.get(name)
        if fn is None:
            fn = ir.Function(self.module, fnty, name=name)
        return self.b.call(fn, args)

    def ty_suffix(self, ty):
        if isinstance(ty, ir.VectorType):
            return f"v{ty.count}{self.ty_suffix(ty.element)}"
        if isinstance(ty, ir.FloatType):
            return "f32"
        if isinstance(ty, ir.DoubleType):
            return "f64"
        return f"i{ty.width}"

    def any_true(self, cond):
        """i1 (scalar) true when any lane of cond is set."""
        if isinstance(cond.type, ir.VectorType):
            return self.intrinsic(f"llvm.vector.reduce.or.{self.ty_suffix(cond.type)}", I1, [cond])
        return cond

    def set_error(self, cond, code):
        self.has_checks = True
        bad = self.any_true(cond)
        old = self.b.load(self.status)
        self.b.store(self.b.select(bad, ir.Constant(I32, code), old), self.status)

    def alloca(self, ty):
        return self.entry_b.alloca(ty)

    @contextmanager
    def loop(self, stop, start=0, step=1):
        """for i in range(start, stop, step) with constant bounds; yields i (i64)."""
        b = self.b
        ctr = self.alloca(I64)
        b.store(c64(start), ctr)
        cond = self.fn.append_basic_block("for.cond")
        body = self.fn.append_basic_block("for.body")
        end = self.fn.append_basic_block("for.end")
        b.branch(cond)
        b.position_at_end(cond)
        i = b.load(ctr)
        b.cbranch(b.icmp_signed("<", i, c64(stop)), body, end)
        b.position_at_end(body)
        yield i
        b.store(b.add(i, c64(step)), ctr)
        b.branch(cond)
        b.position_at_end(end)

    def scalarise(self, fn, idx, W, ty=None):
        """Vector of W lanes from a scalar generator fn(idx, 1)."""
        if W == 1:
            return fn(idx, 1)
        lanes = []
        for lane in range(W):
            li = [(self.iadd(base, coeff * lane), 0) for base, coeff in idx]
            lanes.append(fn(li, 1))
        vt = ir.VectorType(lanes[0].type, W)
        v = ir.Constant(vt, ir.Undefined)
        for lane, x in enumerate(lanes):
            v = self.b.insert_element(v, x, ir.Constant(I32, lane))
        return v

    # ------------------------------------------------------------ buffers
    def _lin(self, buf, idx):
        lin, lane = c64(0), 0
        for (base, coeff), st, d in zip(idx, buf.strides, buf.shape):
            if d == 1:
                continue
            lin = self.iadd(lin, self.imul(base, st))
            lane += coeff * st
        return lin, lane

    def load_buf(self, buf, idx, W):
        assert len(idx) == len(buf.shape), (idx, buf.shape)
        b = self.b
        lin, lane = self._lin(buf, idx)
        mt = mem_type(buf.dtype)
        if W == 1 or lane == 0:
            v = b.load(b.gep(buf.ptr, [lin]))
            if buf.dtype is dtypes.bool_:
                v = b.icmp_unsigned("!=", v, ir.Constant(I8, 0))
            return self.splat(v, W)
        if lane == 1:
            p = b.bitcast(b.gep(buf.ptr, [lin]), ir.VectorType(mt, W).as_pointer())
            v = b.load(p, align=buf.dtype.size)
        else:
            v = ir.Constant(ir.VectorType(mt, W), ir.Undefined)
            for l_ in range(W):
                x = b.load(b.gep(buf.ptr, [self.iadd(lin, lane * l_)]))
                v = b.insert_element(v, x, ir.Constant(I32, l_))
        if buf.dtype is dtypes.bool_:
            v = b.icmp_unsigned("!=", v, ir.Constant(ir.VectorType(I8, W), [0] * W))
        return v

    def store_buf(self, buf, idx, val, W):
        b = self.b
        lin, lane = self._lin(buf, idx)
        mt = mem_type(buf.dtype)
        if buf.dtype is dtypes.bool_:
            val = b.zext(val, self.vec_type(I8, W))
        if W == 1:
            b.store(val, b.gep(buf.ptr, [lin]))
        elif lane == 1:
            p = b.bitcast(b.gep(buf.ptr, [lin]), ir.VectorType(mt, W).as_pointer())
            b.store(val, p, align=buf.dtype.size)
        else:
            for l_ in range(W):
                x = b.extract_element(val, ir.Constant(I32, l_))
                b.store(x, b.gep(buf.ptr, [self.iadd(lin, lane * l_)]))

    # ------------------------------------------------------------ generators
    @staticmethod
    def bcast_idx(idx, out_shape, in_shape):
        off = len(out_shape) - len(in_shape)
        return [(c64(0), 0) if d == 1 else idx[k + off] for k, d in enumerate(in_shape)]

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
                return self.load_buf(buf, idx, W)
        node = self.p.nodes[v.node]
        op = node.op
        if op in ELEMENTWISE:
            out_shape = node.outputs[0][0]
            opdef = REGISTRY[op]
            xs = []
            for k, inp in enumerate(node.inputs):
                if opdef.is_shape_only(k):
                    xs.append(None)
                    continue
                xs.append(self.gen(inp, self.bcast_idx(idx, out_shape, self.shape(inp)), W))
            return ELEMENTWISE[op](self, node, xs, W)
        if op in LAYOUT:
            return LAYOUT[op](self, node, v.index, idx, W)
        raise Unsupported(f"no generator for {op}")

    def input_gen(self, v):
        return lambda idx, W: self.gen(v, idx, W)

    def emit_nest(self, out_buf, gen):
        """out_buf[idx] = gen(idx, W) over out_buf.shape, inner dim vectorised."""
        shape = out_buf.shape
        if any(d == 0 for d in shape):
            return
        R = len(shape)
        if R == 0:
            self.store_buf(out_buf, [], gen([], 1), 1)
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
                    self.store_buf(out_buf, ix, gen(ix, W), W)
            if nv < d:
                if d - nv == 1:
                    ix = idx + [(c64(nv), 0)]
                    self.store_buf(out_buf, ix, gen(ix, 1), 1)
                else:
                    with self.loop(d, nv) as i:
                        ix = idx + [(i, 0)]
                        self.store_buf(out_buf, ix, gen(ix, 1), 1)
        rec(0, [])

    def scratch_buffer(self, nbytes_or_shape, dtype, tag="tmp"):
        """A temporary buffer live only during the current node (matmul workspace, ...)."""
        shape = tuple(nbytes_or_shape)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.size
        off = self._temp_offsets[self._cur_pos].pop(0) if self._emitting else None
        if not self._emitting:
            self._temps_needed.setdefault(self._cur_pos, []).append(nbytes)
            return Buffer(ir.Constant(mem_type(dtype).as_pointer(), None), shape, dtype, tag)
        ptr = self.b.bitcast(self.b.gep(self.arena, [c64(off)]), mem_type(dtype).as_pointer())
        self.buffer_report.append((f"{tag} (node {self._cur_pos})", nbytes, f"scratch+{off}"))
        return Buffer(ptr, shape, dtype, tag)

    # ------------------------------------------------------------ analysis
    def _analyse(self):
        p = self.p
        nodes = p.nodes
        uses = {}
        need_buf = set()
        for n in nodes:
            if n.op == "Arg":
                continue
            if n.op not in ELEMENTWISE and n.op not in LAYOUT and n.op not in MATERIALISE and n.op not in ALIAS:
                raise Unsupported(f"op {n.op} has no lowering")
            opdef = REGISTRY[n.op]
            nb = NEEDS_BUFFER.get(n.op, ())
            for k, v in enumerate(n.inputs):
                if opdef.is_shape_only(k):
                    continue
                uses[v] = uses.get(v, 0) + 1
                if n.op in ALIAS or nb == "all" or k in nb:
                    need_buf.add(v)
        out_vals = [v for v in p.outputs if v is not None] + [v for _, v in p.var_writes]
        mat = set()
        for i, n in enumerate(nodes):
            if n.op == "Arg" or n.op in ALIAS:
                continue
            for j in range(len(n.outputs)):
                v = _val(i, j)
                if n.op in MATERIALISE or v in need_buf or (uses.get(v, 0) > 1 and not _cheap(n)):
                    mat.add(v)
        self.mat = mat
        roots = set(need_buf) | set(out_vals)
        for i, n in enumerate(nodes):
            if n.op in ALIAS:
                roots.add(n.inputs[0])
        for v in roots:
            r = self._root(v)
            if nodes[r.node].op != "Arg":
                mat.add(r)
        self.mat = mat
        self.out_vals = out_vals
        self.uses = uses
        # values that must live in a buffer whatever the fusion decides
        self.hard = {self._root(v) for v in roots} | set(need_buf)

    def _root(self, v):
        """The value whose buffer v lives in (through aliases)."""
        while self.p.nodes[v.node].op in ALIAS:
            v = self.p.nodes[v.node].inputs[0]
        return v

    def _fused_ops(self, v, acc, seen):
        if v in seen:
            return
        seen.add(v)
        n = self.p.nodes[v.node]
        if n.op == "Arg" or v in self.mat or n.op in ALIAS:
            return
        acc.append(n.op)
        opdef = REGISTRY[n.op]
        for k, u in enumerate(n.inputs):
            if not opdef.is_shape_only(k):
                self._fused_ops(u, acc, seen)

    # ------------------------------------------------------------ loop-nest groups
    def _reads2(self, v, ident, acc_i, acc_o, seen):
        """Buffers read when generating v, split by whether they are read at the
        consumer's own element index (ident: a chain of same-shape elementwise
        ops) or through a broadcast / layout map."""
        key = (v, ident)
        if key in seen:
            return
        seen.add(key)
        n = self.p.nodes[v.node]
        if n.op == "Arg" or v in self.mat or n.op in ALIAS:
            (acc_i if ident and n.op not in ALIAS else acc_o).add(self._root(v))
            return
        self._reads_inputs(n, v, ident, acc_i, acc_o, seen)

    def _reads_inputs(self, n, v, ident, acc_i, acc_o, seen):
        opdef = REGISTRY[n.op]
        out_shape = n.outputs[v.index][0]
        for k, u in enumerate(n.inputs):
            if not opdef.is_shape_only(k):
                self._reads2(u, ident and n.op in ELEMENTWISE and self.shape(u) == out_shape, acc_i, acc_o, seen)

    def _unit_reads(self, kind, i, payload):
        acc_i, acc_o = set(), set()
        n = self.p.nodes[i]
        if kind == "store":
            self._reads_inputs(n, payload, True, acc_i, acc_o, {(payload, True), (payload, False)})
        elif kind == "reduce":
            self._reads2(n.inputs[0], True, acc_i, acc_o, set())
        else:
            opdef = REGISTRY[n.op]
            for k, u in enumerate(n.inputs):
                if not opdef.is_shape_only(k):
                    self._reads2(u, False, acc_i, acc_o, set())
        return acc_i, acc_o

    def _full_reduce_kind(self, n):
        """kind when node n reduces its (non-empty) input to a single element."""
        kind = REGISTRY[n.op].full_reduce if n.op in REGISTRY else None
        if kind is None:
            return None
        in_shape = self.shape(n.inputs[0])
        if int(np.prod(in_shape, dtype=np.int64)) == 0 or int(np.prod(n.outputs[0][0], dtype=np.int64)) != 1:
            return None
        if n.op != "SumToShape" and n.attrs.get("axis") is not None:
            from ..shapes import normalize_axes
            axes = set(normalize_axes(n.attrs["axis"], len(in_shape)))
            if any(in_shape[d] != 1 for d in range(len(in_shape)) if d not in axes):
                return None
        return kind

    def _plan_nests(self):
        """Groups the loop nests (in node order) into multi-output nests over
        one iteration shape; values read only inside their own nest, at the
        element being computed, stop being materialised."""
        nodes = self.p.nodes
        node_vals = {}
        for v in self.mat:
            node_vals.setdefault(v.node, []).append(v)
        units = []
        for i, n in enumerate(nodes):
            if n.op == "Arg" or n.op in ALIAS:
                continue
            vals = sorted(node_vals.get(i, ()), key=lambda x: x.index)
            if not vals:
                continue
            if n.op in MATERIALISE:
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
            ri, ro = self._unit_reads(kind, i, payload if kind == "store" else None)
            # a "node" unit of an empty output (payload) carries that output, not output 0
            own = kind == "store" or (kind == "node" and payload is not None)
            unit = {"kind": kind, "pos": i, "val": payload if own else _val(i, 0),
                    "rkind": payload if kind == "reduce" else None, "ri": ri, "ro": ro}
            g = nests[-1] if nests else None
            if (kind != "node" and FUSE_NESTS and g is not None and g["shape"] == shape and not (ro & g["produced"])
                    and not (ri & g["reduced"])):
                g["units"].append(unit)
                g["end"] = i
            else:
                g = {"units": [unit], "shape": shape if kind != "node" else None, "start": i, "end": i,
                     "produced": set(), "reduced": set()}
                nests.append(g)
            if kind == "reduce":
                g["reduced"].add(unit["val"])
            if kind != "node" or payload is None:
                g["produced"].add(unit["val"])
            else:
                g["produced"].add(payload)
        # values that need no buffer: multi-use intermediates read only at their
        # own element index by units of their own nest
        nest_of = {}
        for gi, g in enumerate(nests):
            for u in g["units"]:
                nest_of[id(u)] = gi
        readers = {}
        for gi, g in enumerate(nests):
            for u in g["units"]:
                for r in u["ri"]:
                    readers.setdefault(r, []).append((gi, True))
                for r in u["ro"]:
                    readers.setdefault(r, []).append((gi, False))
        soft = set()
        for gi, g in enumerate(nests):
            if g["shape"] is None or not FUSE_NESTS:
                continue
            for u in g["units"]:
                v = u["val"]
                if u["kind"] != "store" or v in self.hard:
                    continue
                rs = readers.get(v, [])
                if all(rg == gi and ident for rg, ident in rs):
                    soft.add(v)
        if soft:
            self.mat -= soft
            for g in nests:
                g["units"] = [u for u in g["units"] if not (u["kind"] == "store" and u["val"] in soft)]
            nests = [g for g in nests if g["units"]]
        self.soft = soft
        return nests

    def _leaf_flags(self, v, flags, R, acc, seen):
        """Collects, for every buffer read by the expression of v, which of the
        R iteration dims it varies along; False when a layout map is involved."""
        key = (v, flags)
        if key in seen:
            return True
        seen.add(key)
        n = self.p.nodes[v.node]
        if n.op == "Arg" or v in self.buffers_planned or n.op in ("Literal", "SizeRatio"):
            if n.op in ALIAS:
                return False
            acc.add(flags)
            return True
        if n.op in ALIAS or n.op not in ELEMENTWISE:
            return False
        opdef = REGISTRY[n.op]
        for k, u in enumerate(n.inputs):
            if opdef.is_shape_only(k):
                continue
            ush = self.shape(u)
            off = R - len(ush)
            f = tuple(flags[j] and j >= off and ush[j - off] != 1 for j in range(R))
            if not self._leaf_flags(u, f, R, acc, seen):
                return False
        return True

    def _merge_dims(self, g):
        """Runs of iteration dims that every access walks contiguously (or not at
        all) are merged: [(extent, last dim of the run)], size-1 dims dropped."""
        shape = g["shape"]
        R = len(shape)
        keep = [j for j in range(R) if shape[j] != 1]
        full = tuple(shape[j] != 1 for j in range(R))
        acc, seen = {full}, set()
        ok = True
        for u in g["units"]:
            if u["kind"] == "store":
                n = self.p.nodes[u["val"].node]
                if n.op not in ELEMENTWISE:
                    ok = False
                    break
                opdef = REGISTRY[n.op]
                for k, x in enumerate(n.inputs):
                    if opdef.is_shape_only(k):
                        continue
                    xs = self.shape(x)
                    off = R - len(xs)
                    f = tuple(j >= off and xs[j - off] != 1 for j in range(R))
                    if not self._leaf_flags(x, f, R, acc, seen):
                        ok = False
                        break
            else:
                if not self._leaf_flags(self.p.nodes[u["pos"]].inputs[0], full, R, acc, seen):
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

    def _work(self, g):
        """Estimated cost of a nest in element-ops (transcendentals weigh more)."""
        ops = []
        seen = set()
        for u in g["units"]:
            v = u["val"] if u["kind"] == "store" else self.p.nodes[u["pos"]].inputs[0]
            if u["kind"] == "store":
                n = self.p.nodes[v.node]
                ops.append(n.op)
                opdef = REGISTRY[n.op]
                for k, x in enumerate(n.inputs):
                    if not opdef.is_shape_only(k):
                        self._fused_ops(x, ops, seen)
            else:
                ops.append("Sum")
                self._fused_ops(v, ops, seen)
        w = sum(REGISTRY[o].cost for o in ops) + len(g["units"])
        return int(np.prod(g["shape"], dtype=np.int64)) * w

    # ------------------------------------------------------------ threads
    def on_thread0(self):
        """Context: the enclosed code runs on thread 0 only (parallel kernels)."""
        return self._guard(self.b.icmp_signed("==", self.tid, c64(0))) if self.parallel else _nullctx()

    @contextmanager
    def _guard(self, cond):
        then = self.fn.append_basic_block("t0")
        cont = self.fn.append_basic_block("t0.end")
        self.b.cbranch(cond, then, cont)
        self.b.position_at_end(then)
        yield
        self.b.branch(cont)
        self.b.position_at_end(cont)

    def thread_rows(self, M, align=8):
        """[r0, r1): this thread's share of M rows (chunks aligned to ``align``)."""
        b = self.b
        per = b.sdiv(b.add(c64(M - 1), self.nthreads), self.nthreads)        # ceil(M / n)
        per = b.mul(b.sdiv(b.add(per, c64(align - 1)), c64(align)), c64(align))
        r0 = b.mul(self.tid, per)
        r0 = b.select(b.icmp_signed("<", r0, c64(M)), r0, c64(M))
        r1 = b.add(r0, per)
        r1 = b.select(b.icmp_signed("<", r1, c64(M)), r1, c64(M))
        return r0, r1

    def barrier(self):
        """All threads wait here for each other (jitgrad/codegen/sync.py)."""
        if self.parallel:
            from .sync import emit_barrier
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
    def loop_dyn(self, start, stop, step=1):
        """for i in range(start, stop, step) with runtime (i64) bounds."""
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
        b.branch(cond)
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
    def emit_group(self, g, outs, partial_off):
        """One loop nest computing every unit of g: stores (elementwise values
        into their buffers) and full reductions (accumulated per fixed block;
        block partials combined in block order, so the result does not depend
        on the thread count)."""
        from .lower_reduction import _acc_dtype, _init, _combine, _convert, _finalize, _hreduce
        b = self.b
        shape = g["shape"]
        R = len(shape)
        runs = g["runs"]
        reds = [u for u in g["units"] if u["kind"] == "reduce"]
        stores = [u for u in g["units"] if u["kind"] == "store"]
        par = g["parallel"]
        # Two vectors per step for types of at most 4 bytes: the transcendental chains
        # are latency-bound, and LLVM interleaves the two halves of a <16 x float>
        # (W2 value+gradient at 1e7: -12%).  8-byte types already span two ymm registers.
        NW = 2 * VW if all(self.dtype(v).size <= 4 for v in [u["val"] for u in stores] +
                            [self.p.nodes[u["pos"]].inputs[0] for u in reds]) else VW
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
            n = self.p.nodes[u["pos"]]
            dt = self.dtype(n.inputs[0])
            acc_dt = _acc_dtype(u["rkind"], dt)
            red_info.append((u, n, dt, acc_dt))
        parts = []
        for (u, n, dt, acc_dt), off in zip(red_info, partial_off):
            ty = reg_type(acc_dt)
            parts.append(b.bitcast(b.gep(self.arena, [c64(off)]), ty.as_pointer()))
        ctx = self._guard(b.icmp_signed("==", self.tid, c64(0))) if (self.parallel and not par) else _nullctx()
        with ctx:
            lo, hi = c64(0), c64(nb)

            narrow = [u["rkind"] in ("sum", "mean") and dt.is_floating and acc_dt is not dt
                      for u, n, dt, acc_dt in red_info]

            def body(idx, W, accs, partials=None):
                """partials: float32 vectors that the narrow sums add into instead."""
                self.memo = {}
                for u, ob in zip(stores, outs):
                    v = u["val"]
                    val = self._gen(v, idx, W, top=True)
                    self.memo[self._memo_key(v, idx, W)] = (val, idx)
                    self.store_buf(ob, idx, val, W)
                for k, ((u, n, dt, acc_dt), (av, as_)) in enumerate(zip(red_info, accs)):
                    x = self.gen(n.inputs[0], idx, W)
                    if partials is not None and narrow[k]:
                        p, t = partials[k], dt
                    else:
                        p, t = (av if W > 1 else as_), acc_dt
                        x = _convert(self, x, dt, acc_dt, W)
                    b.store(_combine(self, u["rkind"], t, b.load(p), x), p)
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
                            b.store(self.const(dt, 0, NW), pv)
                    with self.loop(step, 0, NW) as k:
                        body(idx_for(outer_vals + [(b.add(c, k), 1)]), NW, accs, partials)
                    for pv, (u, n, dt, acc_dt), (av, as_) in zip(partials, red_info, accs):
                        if pv is not None:
                            wide = _convert(self, b.load(pv), dt, acc_dt, NW)
                            b.store(_combine(self, u["rkind"], acc_dt, b.load(av), wide), av)
                return end

            def idx_for(vals):
                idx = [(c64(0), 0)] * R
                for (ext, j), v in zip(runs, vals):
                    idx[j] = v
                return idx

            with (self.loop_dyn(lo, hi) if not par else self.loop_grab(g["counter"], nb)) as blk:
                accs = []
                for u, n, dt, acc_dt in red_info:
                    av = self.alloca(ir.VectorType(reg_type(acc_dt), NW))
                    as_ = self.alloca(reg_type(acc_dt))
                    b.store(self.const(acc_dt, _init(u["rkind"], dt), NW), av)
                    b.store(self.const(acc_dt, _init(u["rkind"], dt)), as_)
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
                            with self.loop_dyn(vend, hi_i) as i:
                                body(idx_for(outer_vals + [(i, 0)]), 1, accs)
                        else:
                            with self.loop_dyn(lo_i, hi_i) as i:
                                body(idx_for(outer_vals + [(i, 0)]), 1, accs)

                    if len(runs) == 1:
                        inner([], r0, r1, runs[0][0])
                    else:
                        with self.loop_dyn(r0, r1) as i0:
                            def rec(k, vals):
                                if k == len(runs) - 1:
                                    inner(vals, 0, runs[k][0], runs[k][0])
                                    return
                                with self.loop(runs[k][0]) as ik:
                                    rec(k + 1, vals + [(ik, 0)])
                            rec(1, [(i0, 0)])
                for (u, n, dt, acc_dt), (av, as_), pp in zip(red_info, accs, parts):
                    r = _combine(self, u["rkind"], acc_dt, _hreduce(self, u["rkind"], acc_dt, b.load(av), NW),
                                 b.load(as_))
                    b.store(r, b.gep(pp, [blk]))
        if reds:
            if par:
                self.barrier()
            with (self._guard(b.icmp_signed("==", self.tid, c64(0))) if self.parallel else _nullctx()):
                for (u, n, dt, acc_dt), pp, ob in zip(red_info, parts, outs[len(stores):]):
                    count = int(np.prod(self.shape(n.inputs[0]), dtype=np.int64))
                    acc = self.alloca(reg_type(acc_dt))
                    b.store(b.load(b.gep(pp, [c64(0)])), acc)
                    if nb > 1:
                        with self.loop(nb, 1) as k:
                            b.store(_combine(self, u["rkind"], acc_dt, b.load(acc), b.load(b.gep(pp, [k]))), acc)
                    r = _finalize(self, u["rkind"], dt, acc_dt, b.load(acc), count, 1)
                    self.store_buf(ob, [(c64(0), 0)] * len(ob.shape), r, 1)
        return nb

    # ------------------------------------------------------------ build
    def build(self):
        tables()
        from .lower_control import check
        check(self.p)
        # control-flow regions run on one thread (their bodies are called in a loop)
        self._build(allow_parallel=not any(n.op in ("If", "While") for n in self.p.nodes))
        if self.parallel and self.has_checks:
            # runtime checks write the status word: keep such kernels single-threaded
            self.__init__(self.p, self.name, self._dl, self._triple)
            tables()
            self._build(allow_parallel=False)
        return self.module

    def _build(self, allow_parallel):
        p = self.p
        self._analyse()
        nodes = p.nodes
        N = len(nodes)
        n_args = len(p.args)
        out_slot_vals = self.out_vals
        nests = self._plan_nests()
        slot_of_val = {}
        copies = []
        for s, v in enumerate(out_slot_vals):
            if v in self.mat and v not in slot_of_val:
                slot_of_val[v] = s
            else:
                copies.append((s, v))
        self.buffers_planned = set(self.mat)
        # nest properties: merged dims, parallelism
        any_par = False
        for g in nests:
            if g["shape"] is None:
                n0 = nodes[g["units"][0]["pos"]]
                g["parallel"] = False
                if allow_parallel and n0.op == "MatMul" and n0.outputs[0][1].is_floating:
                    # GEMM rows split across threads (each with its own workspace)
                    mM, mN = n0.outputs[0][0]
                    a_sh = self.shape(n0.inputs[0])
                    mK = a_sh[0] if n0.attrs["transpose_a"] else a_sh[1]
                    g["work"] = 2 * mM * mN * mK
                    g["parallel"] = bool(g["work"] >= PAR_MIN_FLOPS and mM >= 16)
                any_par = any_par or g["parallel"]
                continue
            g["runs"] = self._merge_dims(g)
            g["work"] = self._work(g)
            g["parallel"] = bool(allow_parallel and g["runs"] and g["work"] >= PAR_MIN_WORK)
            if g["parallel"]:
                outer = g["runs"][0][0]
                inner = int(np.prod([e for e, _ in g["runs"][1:]], dtype=np.int64)) if len(g["runs"]) > 1 else 1
                nb = -(-outer // (BLOCK_ELEMS if len(g["runs"]) == 1 else max(1, BLOCK_ELEMS // inner)))
                g["parallel"] = nb >= 2
            any_par = any_par or g["parallel"]
        self.parallel = any_par
        work = max([g.get("work", 0) for g in nests if g.get("parallel")] or [0])
        # threads a parallel kernel is built for (per-thread workspaces); runtime n <= this
        self.par_slots = int(min(MAX_THREADS, max(2, work // PAR_MIN_WORK))) if any_par else 1
        # liveness of scratch buffers (a nest reads everything at its end, writes at its start)
        scratch_vals = [v for v in sorted(self.mat, key=lambda x: (x.node, x.index)) if v not in slot_of_val]
        born = {v: v.node for v in scratch_vals}
        last_use = {v: v.node for v in scratch_vals}
        for g in nests:
            reads = set()
            for u in g["units"]:
                ri, ro = self._unit_reads(u["kind"], u["pos"], u["val"] if u["kind"] == "store" else None)
                reads |= ri | ro
                if u["val"] in born:
                    born[u["val"]] = min(born[u["val"]], g["start"])
            if g["units"][0]["kind"] == "node":
                for v in self.mat:
                    if v.node == g["start"] and v in born:
                        born[v] = g["start"]
            for r in reads:
                if r in last_use:
                    last_use[r] = max(last_use[r], g["end"])
        for s, v in copies:
            r = self._root(v)
            if r in last_use:
                last_use[r] = N
        # dry run to find per-node temporaries (matmul workspaces)
        self._emitting = False
        self._temps_needed = {}
        for g in nests:
            u = g["units"][0]
            if u["kind"] == "node" and nodes[u["pos"]].op in MATERIALISE:
                self._cur_pos = u["pos"]
                self.par_node = g["parallel"]
                MATERIALISE[nodes[u["pos"]].op](self, nodes[u["pos"]], None, dry=True)
        # reduction partials of grouped nests (one accumulator per fixed block)
        for gi, g in enumerate(nests):
            if g["shape"] is None:
                continue
            reds = [u for u in g["units"] if u["kind"] == "reduce"]
            if not reds:
                continue
            runs = g["runs"]
            if not runs:
                nb = 1
            elif len(runs) == 1:
                nb = -(-runs[0][0] // BLOCK_ELEMS)
            else:
                inner = int(np.prod([e for e, _ in runs[1:]], dtype=np.int64))
                nb = -(-runs[0][0] // max(1, BLOCK_ELEMS // inner))
            g["partials"] = []
            for u in reds:
                dt = self.dtype(nodes[u["pos"]].inputs[0])
                from .lower_reduction import _acc_dtype
                g["partials"].append(nb * _acc_dtype(u["rkind"], dt).size)
        intervals = []
        for v in scratch_vals:
            shape, dt = nodes[v.node].outputs[v.index]
            nbytes = _value_bytes(shape, dt)
            if nbytes is None:   # a dynamic stack's descriptor: freed when the kernel returns
                nbytes, last_use[v] = 24, N
            intervals.append((born[v], last_use[v], nbytes, ("val", v)))
        for pos, sizes in self._temps_needed.items():
            for k, nb in enumerate(sizes):
                intervals.append((pos, pos, nb, ("tmp", pos, k)))
        for gi, g in enumerate(nests):
            for k, nb in enumerate(g.get("partials", ())):
                intervals.append((g["start"], g["end"], nb, ("part", gi, k)))
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
        n_ctr = 0
        for g in nests:
            if g.get("parallel"):
                g["counter"] = arena + 64 * n_ctr
                n_ctr += 1 if g["shape"] is not None else 2
        self._counters = (arena, n_ctr)
        arena += 64 * n_ctr
        # words that keep their value from call to call (loop stacks' memory, lower_control.py)
        self.persistent_base = arena
        arena += 8 * self.persistent_words
        self.arena_bytes = arena
        self._temp_offsets = {}
        for key, off in offsets.items():
            if key[0] == "tmp":
                self._temp_offsets.setdefault(key[1], []).append((key[2], off))
        for pos in self._temp_offsets:
            self._temp_offsets[pos] = [o for _, o in sorted(self._temp_offsets[pos])]

        # ---- the function(s)
        slots_ty = I8.as_pointer().as_pointer()
        if self.parallel:
            fnty = ir.FunctionType(ir.VoidType(), [slots_ty, I64, I64])
            self.fn = fn = ir.Function(self.module, fnty, name=self.name + "_mt")
            self.tid, self.nthreads = fn.args[1], fn.args[2]
        else:
            fnty = ir.FunctionType(ir.VoidType(), [slots_ty])
            self.fn = fn = ir.Function(self.module, fnty, name=self.name)
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
        if self.parallel:
            with self._guard(b.icmp_signed("==", self.tid, c64(0))):
                b.store(ir.Constant(I32, 0), self.status)
                c0, nc = self._counters
                for k in range(nc):
                    b.store(c64(0), b.bitcast(b.gep(self.arena, [c64(c0 + 64 * k)]), I64.as_pointer()))
            # (the barrier before the first parallel segment publishes the zeroed counters)
        else:
            b.store(ir.Constant(I32, 0), self.status)
        self.buffers = {}
        for i, n in enumerate(nodes):
            if n.op == "Arg":
                a = n.attrs["arg"]
                shape, dt = n.outputs[0]
                self.buffers[_val(i, 0)] = Buffer(slot_ptr(a, mem_type(dt)), shape, dt, f"arg{a}")
        out_bufs = []
        for s, v in enumerate(out_slot_vals):
            shape, dt = nodes[v.node].outputs[v.index]
            out_bufs.append(Buffer(slot_ptr(n_args + s, mem_type(dt)), shape, dt, f"out{s}"))
            self.buffer_report.append((f"out{s} <- node {v.node} ({nodes[v.node].op})",
                                       int(np.prod(shape, dtype=np.int64)) * dt.size, f"slot {n_args + s}"))

        def buffer_for(v):
            if v in slot_of_val:
                return out_bufs[slot_of_val[v]]
            shape, dt = nodes[v.node].outputs[v.index]
            off = offsets[("val", v)]
            ptr = b.bitcast(b.gep(self.arena, [c64(off)]), mem_type(dt).as_pointer())
            self.buffer_report.append((f"node {v.node} ({nodes[v.node].op}) {list(shape)} {dt.name}",
                                       _value_bytes(shape, dt) or 24,
                                       f"scratch+{off} live [{born[v]},{last_use[v]}]"))
            return Buffer(ptr, shape, dt, f"n{v.node}")

        self._emitting = True
        # A multi-output op (e.g. SplitToShapesOf, the concat gradient) starts one
        # nest per output shape at the same node: every one of them must be emitted.
        starts = {}
        for gi, g in enumerate(nests):
            starts.setdefault(g["start"], []).append(gi)
        pending = {}
        self._last_parallel = False
        for i, n in enumerate(nodes):
            if n.op == "Arg":
                continue
            self._cur_pos = i
            if n.op in ALIAS:
                src = n.inputs[0]
                sb = self.buffers.get(src)
                if sb is None:
                    continue   # only needed if someone reads it; _unit_reads ensures root is materialised
                shape, dt = n.outputs[0]
                self.buffers[_val(i, 0)] = Buffer(sb.ptr, shape, dt, sb.name)
                continue
            for gi in starts.get(i, ()):
                g = nests[gi]
                u0 = g["units"][0]
                if u0["kind"] == "node":
                    self.sync_before(g["parallel"] and n.op in MATERIALISE)
                    vals = sorted((v for v in self.mat if v.node == i), key=lambda x: x.index)
                    if n.op in MATERIALISE:
                        outs = [buffer_for(v) for v in vals]
                        self.groups.append((f"node {i} {n.op} {list(n.outputs[0][0])}"
                                            f"{' parallel' if g['parallel'] else ''}", self._group_ops(n)))
                        self.par_node = g["parallel"]
                        self.par_counter = g.get("counter")
                        with (_nullctx() if g["parallel"] else self.on_thread0()):
                            MATERIALISE[n.op](self, n, outs, dry=False)
                        self.par_node = False
                        for v, ob in zip(vals, outs):
                            self.buffers[v] = ob
                    else:
                        v = u0["val"]
                        ob = buffer_for(v)
                        ops = []
                        self._fused_ops(v, ops, set())
                        self.groups.append((f"node {i} {n.op} {list(ob.shape)} {ob.dtype.name}", ops))
                        with self.on_thread0():
                            self.emit_nest(ob, self.input_gen(v))
                        self.buffers[v] = ob
                    continue
                # the nest's buffers exist from its first unit on (aliases inside
                # it see them); the loop is emitted at its last unit
                stores = [u for u in g["units"] if u["kind"] == "store"]
                reds = [u for u in g["units"] if u["kind"] == "reduce"]
                outs = [buffer_for(u["val"]) for u in stores] + [buffer_for(u["val"]) for u in reds]
                for u, ob in zip(stores + reds, outs):
                    self.buffers[u["val"]] = ob
                poffs = [offsets[("part", gi, k)] for k in range(len(reds))]
                ops = []
                seen = set()
                for u in g["units"]:
                    nd = nodes[u["pos"]]
                    ops.append(nd.op)
                    opdef = REGISTRY[nd.op]
                    for k, x in enumerate(nd.inputs):
                        if not opdef.is_shape_only(k):
                            self._fused_ops(x, ops, seen)
                merged = [e for e, _ in g["runs"]]
                st_s = ", ".join(f"node {u['val'].node}" for u in stores)
                rd_s = ", ".join(f"node {u['pos']} {nodes[u['pos']].op}" for u in reds)
                head = (f"nest {list(g['shape'])} loops {merged}{' parallel' if g['parallel'] else ''}: "
                        f"stores [{st_s}] accumulates [{rd_s}]")
                self.groups.append((head, ops))
                pending.setdefault(g["end"], []).append((g, outs, poffs))
            for g, outs, poffs in pending.pop(i, ()):
                self.sync_before(g["parallel"])
                self.emit_group(g, outs, poffs)
        if copies:
            self.sync_before(False)
            with self.on_thread0():
                for s, v in copies:
                    ops = []
                    self.groups.append((f"copy -> out{s} from node {v.node} ({nodes[v.node].op})", ops))
                    self.emit_nest(out_bufs[s], self.input_gen(v))
        for hook in self.finish_hooks:
            hook()
        b.ret_void()
        self.entry_b.branch(body)
        if self.parallel:
            # single-threaded entry: name(slots) == name_mt(slots, 0, 1)
            w = ir.Function(self.module, ir.FunctionType(ir.VoidType(), [slots_ty]), name=self.name)
            w.attributes.add("nounwind")
            wb = ir.IRBuilder(w.append_basic_block("entry"))
            wb.call(fn, [w.args[0], c64(0), c64(1)])
            wb.ret_void()
            fn.attributes.add("noinline")
        n_par = sum(1 for g in nests if g.get("parallel"))
        self.meta = {
            "name": self.name,
            "n_args": n_args,
            "n_slots": n_args + n_out + 2,
            "outputs": [(list(nodes[v.node].outputs[v.index][0]), nodes[v.node].outputs[v.index][1].name)
                        for v in out_slot_vals],
            "arena_bytes": int(self.arena_bytes),
            "has_checks": bool(self.has_checks),
            # threads (jitgrad.codegen.parallel): entry <name>_mt(slots, tid, n_threads)
            "parallel": bool(self.parallel),
            "threads": self.par_slots,
            "parallel_nests": n_par,
            "target": self.target.key(),   # jitgrad.codegen.target: refused where the host cannot run it
            "persistent": [self.persistent_base, self.persistent_words],
        }
        return self.module


    def _group_ops(self, n):
        ops = [n.op]
        opdef = REGISTRY[n.op]
        for k, u in enumerate(n.inputs):
            if not opdef.is_shape_only(k):
                self._fused_ops(u, ops, set())
        return ops


@contextmanager
def _nullctx():
    yield


def _value_bytes(shape, dt):
    """Bytes of a value's buffer; None for a dynamic stack (a None dim)."""
    if any(d is None for d in shape):
        return None
    return int(np.prod(shape, dtype=np.int64)) * dt.size


def _val(i, j):
    from ..passes.ir import Value
    return Value(i, j)


def _cheap(n):
    return has_fact(n.op, "cheap")
