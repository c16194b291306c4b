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
from ..ops.registry import REGISTRY

I1, I8, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
VW = 8            # lanes of the explicitly vectorised inner loops
ALIGN = 64        # scratch buffer alignment (bytes)

ERR_INT_DIV_ZERO = 1
ERR_GATHER_RANGE = 2
ERR_NEG_POW = 3
ERROR_MESSAGES = {
    ERR_INT_DIV_ZERO: "Integer division by zero",
    ERR_GATHER_RANGE: "indices out of range for GatherV2 (index not in [0, params.shape[axis]))",
    ERR_NEG_POW: "Integers to negative integer powers are not allowed",
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
        acc *= max(d, 1)
    return tuple(reversed(st))


class Buffer:
    __slots__ = ("ptr", "shape", "dtype", "strides", "name")

    def __init__(self, ptr, shape, dtype, name=""):
        self.ptr, self.shape, self.dtype, self.name = ptr, tuple(shape), dtype, name
        self.strides = strides_of(self.shape)


def _lowering_tables():
    from . import lower_elementwise, lower_layout, lower_reduction, lower_matmul
    elem = dict(lower_elementwise.ELEMENTWISE)
    layout = dict(lower_layout.LAYOUT)
    mat = {}
    mat.update(lower_reduction.MATERIALISE)
    mat.update(lower_matmul.MATERIALISE)
    needs = {}
    for mod in (lower_layout, lower_reduction, lower_matmul):
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

    def gen(self, v, idx, W):
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

    def _root(self, v):
        """The value whose buffer v lives in (through aliases)."""
        while self.p.nodes[v.node].op in ALIAS:
            v = self.p.nodes[v.node].inputs[0]
        return v

    def _reads(self, v, acc, seen):
        """Buffers (root values) read when generating v."""
        if v in seen:
            return
        seen.add(v)
        n = self.p.nodes[v.node]
        if n.op == "Arg" or v in self.mat or n.op in ALIAS:
            acc.add(self._root(v))
            return
        opdef = REGISTRY[n.op]
        for k, u in enumerate(n.inputs):
            if not opdef.is_shape_only(k):
                self._reads(u, acc, seen)

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

    # ------------------------------------------------------------ build
    def build(self):
        tables()
        p = self.p
        self._analyse()
        nodes = p.nodes
        N = len(nodes)
        n_args = len(p.args)
        # output slots
        out_slot_vals = self.out_vals
        slot_of_val = {}      # value -> output slot index, when the value is written in place
        copies = []           # (slot, value) emitted at the end
        for s, v in enumerate(out_slot_vals):
            n = nodes[v.node]
            if v in self.mat and v not in slot_of_val:
                slot_of_val[v] = s
            else:
                copies.append((s, v))
        # liveness of scratch buffers
        scratch_vals = [v for v in sorted(self.mat, key=lambda x: (x.node, x.index)) if v not in slot_of_val]
        last_use = {v: v.node for v in scratch_vals}
        node_vals = {}
        for v in self.mat:
            node_vals.setdefault(v.node, []).append(v)
        for i, n in enumerate(nodes):
            if n.op == "Arg" or n.op in ALIAS:
                continue
            reads = set()
            opdef = REGISTRY[n.op]
            if n.op in MATERIALISE:
                for k, u in enumerate(n.inputs):
                    if not opdef.is_shape_only(k):
                        self._reads(u, reads, set())
            else:
                for v in node_vals.get(i, ()):
                    seen = {v}
                    for k, u in enumerate(n.inputs):
                        if not opdef.is_shape_only(k):
                            self._reads(u, reads, seen)
            for r in reads:
                if r in last_use:
                    last_use[r] = max(last_use[r], i)
        for s, v in copies:
            r = self._root(v)
            if r in last_use:
                last_use[r] = N
        # dry run to find per-node temporaries (matmul workspaces)
        self._emitting = False
        self._temps_needed = {}
        for i, n in enumerate(nodes):
            if n.op in MATERIALISE:
                self._cur_pos = i
                MATERIALISE[n.op](self, n, None, dry=True)
        # first-fit interval allocation
        intervals = []
        for v in scratch_vals:
            shape, dt = nodes[v.node].outputs[v.index]
            nbytes = int(np.prod(shape, dtype=np.int64)) * dt.size
            intervals.append((v.node, last_use[v], nbytes, ("val", v)))
        for pos, sizes in self._temps_needed.items():
            for k, nb in enumerate(sizes):
                intervals.append((pos, pos, nb, ("tmp", pos, k)))
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
        self.arena_bytes = arena
        self._temp_offsets = {}
        for key, off in offsets.items():
            if key[0] == "tmp":
                self._temp_offsets.setdefault(key[1], []).append((key[2], off))
        for pos in self._temp_offsets:
            self._temp_offsets[pos] = [o for _, o in sorted(self._temp_offsets[pos])]

        # ---- the function
        fnty = ir.FunctionType(ir.VoidType(), [I8.as_pointer().as_pointer()])
        self.fn = fn = ir.Function(self.module, fnty, name=self.name)
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
                                       int(np.prod(shape, dtype=np.int64)) * dt.size,
                                       f"scratch+{off} live [{v.node},{last_use[v]}]"))
            return Buffer(ptr, shape, dt, f"n{v.node}")

        self._emitting = True
        for i, n in enumerate(nodes):
            if n.op == "Arg":
                continue
            self._cur_pos = i
            if n.op in ALIAS:
                src = n.inputs[0]
                sb = self.buffers.get(src)
                if sb is None:
                    continue   # only needed if someone reads it; _reads ensures root is materialised
                shape, dt = n.outputs[0]
                self.buffers[_val(i, 0)] = Buffer(sb.ptr, shape, dt, sb.name)
                continue
            vals = sorted(node_vals.get(i, ()), key=lambda x: x.index)
            if not vals:
                continue
            if n.op in MATERIALISE:
                outs = [buffer_for(v) for v in vals]
                self.groups.append((f"node {i} {n.op} {list(n.outputs[0][0])}", self._group_ops(n)))
                MATERIALISE[n.op](self, n, outs, dry=False)
                for v, ob in zip(vals, outs):
                    self.buffers[v] = ob
                continue
            for v in vals:
                ob = buffer_for(v)
                ops = []
                self._fused_ops(v, ops, set())
                self.groups.append((f"node {i} {n.op} {list(ob.shape)} {ob.dtype.name}", ops))
                self.emit_nest(ob, self.input_gen(v))
                self.buffers[v] = ob
        for s, v in copies:
            ops = []
            self.groups.append((f"copy -> out{s} from node {v.node} ({nodes[v.node].op})", ops))
            self.emit_nest(out_bufs[s], self.input_gen(v))
        b.ret_void()
        self.entry_b.branch(body)
        self.meta = {
            "name": self.name,
            "n_args": n_args,
            "n_slots": n_args + n_out + 2,
            "outputs": [(list(nodes[v.node].outputs[v.index][0]), nodes[v.node].outputs[v.index][1].name)
                        for v in out_slot_vals],
            "arena_bytes": int(self.arena_bytes),
            "has_checks": bool(self.has_checks),
        }
        return self.module

    def _group_ops(self, n):
        ops = [n.op]
        opdef = REGISTRY[n.op]
        for k, u in enumerate(n.inputs):
            if not opdef.is_shape_only(k):
                self._fused_ops(u, ops, set())
        return ops


def _val(i, j):
    from ..passes.ir import Value
    return Value(i, j)


_CHEAP = {"ZerosLike", "OnesLike", "Shape", "SizeRatio", "Literal"}


def _cheap(n):
    return n.op in _CHEAP
