"""IR vocabulary shared by the kernel builder and the lowerings: LLVM types of
jitgrad dtypes, buffers, runtime error codes, and small IR-building helpers as
free functions of an ``ir.IRBuilder`` (they need no kernel state, so lowerings
and helpers such as vecmath / matmul can use them without the builder)."""
import math
from contextlib import contextmanager

import numpy as np
from llvmlite import ir

from .. import dtypes
from ..ops.math_ops import TRUNCATE_DIV_ZERO_MESSAGE
from ..ops.zero_rows import LENGTH_MESSAGE

I1, I8, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
VW = 8            # lanes of the explicitly vectorised inner loops
ALIGN = 64        # scratch buffer alignment (bytes)

# Runtime error codes a kernel writes to its status word; the executor raises
# InvalidArgumentError with the message (jitgrad/compiler.py).
ERR_INT_DIV_ZERO = 1
ERR_GATHER_RANGE = 2
ERR_NEG_POW = 3
ERR_STACK_ALLOC = 4
ERR_STACK_ROWS = 5
ERR_ASSERT = 6        # a tf.Assert in a branch / loop body failed (message: ops/logging_ops.py)
ERR_RANDOM = 7        # a random op in a branch / loop body found no draws for this run (ops/random_ops.py)
ERR_ROWS_MISMATCH = 8  # two operands' run-time row counts differ (codegen/lower_rows.py)
ERR_ROW_INDEX = 9      # x[k] past the run-time rows of x (codegen/lower_rows_gather.py)
ERR_SLICE_STEP = 12    # x[a:b:s] of run-time rows with a fed s == 0 (codegen/lower_rows_gather.py)
ERR_RESHAPE_ROWS = 13  # a reshape merging run-time rows whose elements make no whole rows (lower_rows.py)
# ListCheck's kinds (ops/list_ops.py): TF's TensorList errors. Their messages format the
# failing values the kernel leaves in status words 4 and 5 ({a}, {b}; {a1} is a + 1).
ERR_LIST_ACCESS = 20
ERR_LIST_MODIFY = 21
ERR_LIST_GATHER = 22
ERR_LIST_SCATTER = 23
ERR_LIST_LENGTH = 24
ERR_LIST_UNSTACK = 25
ERR_LIST_APPEND = 26
# ZeroRows' length (ops/zero_rows.py) below the entry's rows or past int32
ERR_ZERO_ROWS_LENGTH = 27
ERR_SEGMENT_RANGE = 28  # a segment id past num_segments, or a negative sorted one (codegen/lower_segment.py)
ERR_SEGMENT_ORDER = 29  # sorted segment ids that decrease (codegen/lower_segment.py)
# TruncateDiv / TruncateMod by an integer 0: TF 2.21 raises InternalError here (compiler.py)
ERR_TRUNCATE_DIV_ZERO = 30
LIST_CHECK_CODES = {"access": ERR_LIST_ACCESS, "modify": ERR_LIST_MODIFY, "gather": ERR_LIST_GATHER,
                    "scatter": ERR_LIST_SCATTER, "length": ERR_LIST_LENGTH, "unstack": ERR_LIST_UNSTACK,
                    "append": ERR_LIST_APPEND}
ERROR_MESSAGES = {
    ERR_INT_DIV_ZERO: "Integer division by zero",
    ERR_GATHER_RANGE: "indices out of range for GatherV2 (index not in [0, params.shape[axis]))",
    ERR_NEG_POW: "Integers to negative integer powers are not allowed",
    ERR_STACK_ALLOC: "out of memory for a while_loop's per-iteration stack",
    ERR_STACK_ROWS: "a loop's sliced input does not have one row per iteration",
    ERR_RANDOM: "a random op inside a compiled branch / loop body could not draw (the run's samplers are gone)",
    ERR_ROWS_MISMATCH: ("Incompatible shapes: operands whose leading dimensions, known only at run "
                        "time, differ (and, where the op broadcasts, neither is 1)"),
    ERR_ROW_INDEX: "slice index of dimension 0 out of bounds (x[k] with k not in [-rows, rows))",
    ERR_SLICE_STEP: "slice step cannot be zero",
    ERR_RESHAPE_ROWS: ("Input to reshape is a tensor whose values, known only at run time, do not make a "
                       "whole number of the requested shape's rows"),
    ERR_LIST_ACCESS: "Trying to access element {a} in a list with {b} elements.",
    ERR_LIST_MODIFY: "Trying to modify element {a} in a list with {b} elements.",
    ERR_LIST_GATHER: "Trying to gather element {a} in a list with {b} elements.",
    # a scatter past the end of a list of b elements (TF: a list of a + 1 elements was made)
    ERR_LIST_SCATTER: "Operation expected a list with {b} elements but got a list with {a1} elements.",
    ERR_LIST_LENGTH: "Expected len(indices) == tensor.shape[0], but saw: {a} vs. {b}",
    ERR_LIST_UNSTACK: "Operation expected a list with {b} elements but got a list with {a} elements.",
    # jitgrad's own: a dynamic TensorArray a while_loop writes in order is carried as appends
    # (autograph/staged_tensor_array.check_appends), which needs its first write at its end
    ERR_LIST_APPEND: ("jitgrad compiles this while_loop's TensorArray writes as appends: the first writes at "
                      "index {a}, but the array has {b} elements when the loop starts"),
}
ERROR_MESSAGES[ERR_SEGMENT_RANGE] = "segment_ids out of range [0, num_segments) (sorted ids: must be >= 0)"
ERROR_MESSAGES[ERR_SEGMENT_ORDER] = "segment ids are not increasing"
ERROR_MESSAGES[ERR_ZERO_ROWS_LENGTH] = LENGTH_MESSAGE   # (the interpreter's too)
ERROR_MESSAGES[ERR_TRUNCATE_DIV_ZERO] = TRUNCATE_DIV_ZERO_MESSAGE   # (likewise)
INTERNAL_CODES = frozenset({ERR_TRUNCATE_DIV_ZERO})   # raised as InternalError, not InvalidArgumentError
VALUE_CODES = frozenset(LIST_CHECK_CODES.values())   # codes whose message formats status words 4, 5


def error_message(code, a=0, b=0):
    """The message of error ``code``; ``a``, ``b``: the values a VALUE_CODES failure left."""
    a, b = int(a), int(b)
    if code == ERR_LIST_SCATTER and a < 0:     # TF reports a negative scatter index as a modify
        code = ERR_LIST_MODIFY
    msg = ERROR_MESSAGES.get(code, f"kernel error {code}")
    return msg.format(a=a, b=b, a1=a + 1) if code in VALUE_CODES else msg


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


def value_bytes(shape, dt):
    """Bytes of a value's buffer; None for a dynamic stack (a None dim)."""
    if any(d is None for d in shape):
        return None
    return int(np.prod(shape, dtype=np.int64)) * dt.size


class Buffer:
    __slots__ = ("ptr", "shape", "dtype", "strides", "name")

    def __init__(self, ptr, shape, dtype, name=""):
        self.ptr, self.shape, self.dtype, self.name = ptr, tuple(shape), dtype, name
        self.strides = strides_of(self.shape)


@contextmanager
def nullctx():
    yield


def drop_body(fn):
    """Leaves `fn` a declaration (llvmlite prints a function without blocks as
    `declare`), its blocks emptied: llvmlite's blocks and instructions point at each
    other, so a body merely unlinked is cyclic garbage, which the collector is paused
    for while compiling (jitgrad/gc_pause.py); emptied, reference counting frees it."""
    for blk in fn.blocks:
        blk.instructions = []
        blk.terminator = None
    fn.blocks = []


# ------------------------------------------------------------ constants and types
class SplatConst(ir.Constant):
    """A <W x T> constant whose lanes are all ``value`` (a Python number, an
    ir.Constant, or ir.Undefined), printed in LLVM's short forms -- zeroinitializer,
    ``splat (T v)``, undef -- instead of lane by lane as llvmlite prints a vector
    constant: 16 lanes of ``float              0x0`` were a third of the text of
    W3's matmul units, which Python prints and LLVM parses.  ``.constant`` still
    holds the lanes (llvmlite's shufflevector checks its mask's)."""

    def __init__(self, vty, value):
        if value is ir.Undefined:
            ir.Constant.__init__(self, vty, ir.Undefined)
            self._short = "undef"
            return
        lane = value if isinstance(value, ir.Constant) else ir.Constant(vty.element, value)
        ir.Constant.__init__(self, vty, [lane] * vty.count)
        v = lane.constant
        zero = not isinstance(v, str) and v == 0 and not (isinstance(v, float) and math.copysign(1.0, v) < 0)
        if zero:
            self._short = "zeroinitializer"
        else:
            self._short = f"splat ({vty.element} {lane.get_reference()})"

    def _get_reference(self):
        return self._short


def const(dt, value, W=1):
    """A constant of dtype dt (a <W x T> splat when W > 1)."""
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
    return SplatConst(ir.VectorType(ty, W), c)


def vec_type(ty, W):
    return ty if W == 1 else ir.VectorType(ty, W)


def ty_suffix(ty):
    """The overload suffix of an LLVM intrinsic for ty (v8f32, f64, i32 ...)."""
    if isinstance(ty, ir.VectorType):
        return f"v{ty.count}{ty_suffix(ty.element)}"
    if isinstance(ty, ir.FloatType):
        return "f32"
    if isinstance(ty, ir.DoubleType):
        return "f64"
    return f"i{ty.width}"


# ------------------------------------------------------------ i64 index arithmetic (folds constants)
def iadd(b, x, y):
    if isinstance(y, int):
        y = c64(y)
    if isinstance(x, int):
        x = c64(x)
    if isinstance(y, ir.Constant) and y.constant == 0:
        return x
    if isinstance(x, ir.Constant) and x.constant == 0:
        return y
    if isinstance(x, ir.Constant) and isinstance(y, ir.Constant):
        return c64(x.constant + y.constant)
    return b.add(x, y)


def imul(b, x, k):
    if k == 0:
        return c64(0)
    if k == 1:
        return x
    if isinstance(x, ir.Constant):
        return c64(x.constant * k)
    return b.mul(x, c64(k))


# ------------------------------------------------------------ vectors and calls
def row_elems(shape):
    """Elements per row (dim 0) of ``shape``."""
    n = 1
    for d in shape[1:]:
        n *= d
    return n


# (element type, W) -> (undef <W x T>, zero <W x i32> shuffle mask, i32 0).  One Constant
# object each: llvmlite caches a Constant's text on the object, and a fresh pair per
# splat was formatted element by element every time -- a third of the time printing
# the W3 MLP's matmul functions (240 splats of 16 lanes).
_SPLAT = {}


def splat(b, v, W):
    if W == 1:
        return v
    if isinstance(v, ir.Constant):
        return SplatConst(ir.VectorType(v.type, W), v)
    key = (str(v.type), W)
    c = _SPLAT.get(key)
    if c is None:
        c = _SPLAT[key] = (SplatConst(ir.VectorType(v.type, W), ir.Undefined),
                           SplatConst(ir.VectorType(I32, W), 0), ir.Constant(I32, 0))
    u, mask, zero = c
    return b.shuffle_vector(b.insert_element(u, v, zero), u, mask)


def intrinsic(b, name, ret, args):
    """Calls the function ``name`` (declared in b's module on first use)."""
    fnty = ir.FunctionType(ret, [a.type for a in args])
    fn = b.module.globals.get(name)
    if fn is None:
        fn = ir.Function(b.module, fnty, name=name)
    return b.call(fn, args)


def loop_base(b, ptr):
    """``ptr``, hidden from LLVM's scalar evolution: the base a loop body's constant-offset
    accesses start from.  llvm.launder.invariant.group is the identity here (no
    invariant.group metadata anywhere), touches only memory the program cannot see (loads
    and stores move freely around it) and leaves alias analysis its underlying object;
    CodeGenPrepare replaces it by its operand before instruction selection.  (``.p0``:
    opaque-pointer mangling, as matmul's masked load/store.)

    Why: LLVM's loop strength reduction (in the code generator, for every module: llvmlite
    has no per-module switch, and -disable-lsr would be process-wide) works on every
    address that is an affine function of a loop counter.  A hand-unrolled matmul body
    has dozens (one per load and store); past a laundered base, the body's accesses are
    base + constant and LSR sees only the base.  W3's matmul units: LSR and its IVUsers
    analysis were ~40% of their code generation time."""
    i8p = I8.as_pointer()
    p = intrinsic(b, "llvm.launder.invariant.group.p0", i8p, [b.bitcast(ptr, i8p)])
    return b.bitcast(p, ptr.type)


def any_true(b, cond):
    """i1 (scalar) true when any lane of cond is set."""
    if isinstance(cond.type, ir.VectorType):
        return intrinsic(b, f"llvm.vector.reduce.or.{ty_suffix(cond.type)}", I1, [cond])
    return cond


# ------------------------------------------------------------ buffer access at an element index
# An index has one entry per dimension: (base: i64 value, lane_coeff: int); lane l of a
# W-wide access reads the element at base + l * lane_coeff.
def bcast_idx(idx, out_shape, in_shape):
    """The index into an input of shape in_shape broadcast to out_shape."""
    off = len(out_shape) - len(in_shape)
    return [(c64(0), 0) if d == 1 else idx[k + off] for k, d in enumerate(in_shape)]


def _lin(b, buf, idx):
    lin, lane = c64(0), 0
    for (base, coeff), st, d in zip(idx, buf.strides, buf.shape):
        if d == 1:
            continue
        lin = iadd(b, lin, imul(b, base, st))
        lane += coeff * st
    return lin, lane


def load_buf(b, buf, idx, W):
    assert len(idx) == len(buf.shape), (idx, buf.shape)
    lin, lane = _lin(b, buf, idx)
    mt = mem_type(buf.dtype)
    if W == 1 or lane == 0:
        v = b.load(b.gep(buf.ptr, [lin]))
        if buf.dtype is dtypes.bool_:
            v = b.icmp_unsigned("!=", v, ir.Constant(I8, 0))
        return splat(b, v, W)
    if lane == 1:
        p = b.bitcast(b.gep(buf.ptr, [lin]), ir.VectorType(mt, W).as_pointer())
        v = b.load(p, align=buf.dtype.size)
    else:
        v = SplatConst(ir.VectorType(mt, W), ir.Undefined)
        for l_ in range(W):
            x = b.load(b.gep(buf.ptr, [iadd(b, lin, lane * l_)]))
            v = b.insert_element(v, x, ir.Constant(I32, l_))
    if buf.dtype is dtypes.bool_:
        v = b.icmp_unsigned("!=", v, SplatConst(ir.VectorType(I8, W), 0))
    return v


def store_buf(b, buf, idx, val, W):
    lin, lane = _lin(b, buf, idx)
    mt = mem_type(buf.dtype)
    if buf.dtype is dtypes.bool_:
        val = b.zext(val, vec_type(I8, W))
    if W == 1:
        b.store(val, b.gep(buf.ptr, [lin]))
    elif lane == 1:
        p = b.bitcast(b.gep(buf.ptr, [lin]), ir.VectorType(mt, W).as_pointer())
        b.store(val, p, align=buf.dtype.size)
    else:
        for l_ in range(W):
            x = b.extract_element(val, ir.Constant(I32, l_))
            b.store(x, b.gep(buf.ptr, [iadd(b, lin, lane * l_)]))


def scalarise(b, fn, idx, W):
    """Vector of W lanes from a scalar generator fn(idx, 1)."""
    if W == 1:
        return fn(idx, 1)
    lanes = []
    for lane in range(W):
        li = [(iadd(b, base, coeff * lane), 0) for base, coeff in idx]
        lanes.append(fn(li, 1))
    vt = ir.VectorType(lanes[0].type, W)
    v = ir.Constant(vt, ir.Undefined)
    for lane, x in enumerate(lanes):
        v = b.insert_element(v, x, ir.Constant(I32, lane))
    return v


# ---- loops and helpers of the generated matmul / matvec functions (plain IR, no kernel state)
@contextmanager
def for_range(b, start, stop, step=1, name="i"):
    """Counted loop ``for iv in range(start, stop, step)`` (step > 0).

    ``start``/``stop`` may be Python ints or i64 values.  Loop-carried values
    go through allocas; mem2reg/SROA turn them back into phis.
    """
    start = c64(start) if isinstance(start, int) else start
    stop = c64(stop) if isinstance(stop, int) else stop
    step = c64(step) if isinstance(step, int) else step
    pre = b.block
    hdr = b.append_basic_block(name + ".hdr")
    body = b.append_basic_block(name + ".body")
    done = b.append_basic_block(name + ".end")
    b.branch(hdr)
    b.position_at_end(hdr)
    iv = b.phi(I64, name=name)
    iv.add_incoming(start, pre)
    b.cbranch(b.icmp_signed("<", iv, stop), body, done)
    b.position_at_end(body)
    yield iv
    nxt = b.add(iv, step, name=name + ".next")
    iv.add_incoming(nxt, b.block)
    b.branch(hdr)
    b.position_at_end(done)


def not_vectorised(b, latch_branch):
    """Marks the loop whose latch is ``latch_branch`` with
    ``llvm.loop.vectorize.enable = false``: LLVM's loop vectoriser skips it.

    For the scalar remainder loops after an explicit vector loop (fewer than the
    vector width of iterations, nothing to gain) and loops of fewer iterations than
    that width.  Not only compile time: LLVM's vectoriser (VPlan's
    isUniformAcrossVFsAndUFs) walks the operand DAG of a loop-invariant value
    without memoising, so a vector-math expression of a broadcast operand (a load
    LLVM cannot hoist: the output store may alias it) took time exponential in its
    depth -- the baseline's FMA-less vector math never finished compiling
    (tests/test_target_levels.py).  A loop ID is a self-referencing node, one per
    loop (passes rewrite one loop's ID without touching another's)."""
    mod = b.module
    hint = mod.add_metadata([ir.MetaDataString(mod, "llvm.loop.vectorize.enable"), ir.Constant(I1, 0)])
    loop_id = ir.values.MDValue(mod, [hint], name=str(len(mod.metadata)))
    loop_id.operands = (loop_id, hint)     # the self-reference LLVM requires of a loop ID
    latch_branch.set_metadata("llvm.loop", loop_id)


def smin(b, x, y):
    """Signed min of two i64s (ints allowed)."""
    x = c64(x) if isinstance(x, int) else x
    y = c64(y) if isinstance(y, int) else y
    return b.select(b.icmp_signed("<", x, y), x, y)


def gep_inbounds(b, ptr, idx):
    """&ptr[idx], inbounds (idx: int or i64)."""
    idx = c64(idx) if isinstance(idx, int) else idx
    return b.gep(ptr, [idx], inbounds=True)


def declare_vector_fma(module, vty, vw, dtype):
    # llvm.fmuladd, not llvm.fma: one FMA instruction where the target has FMA
    # (AVX2, AVX-512), a multiply and an add on the SSE2 baseline, where llvm.fma
    # would become a libm call per lane.  llvmlite's declare_intrinsic cannot
    # mangle vector types; do it here.  Reuse an existing declaration when
    # several kernels share a module.
    name = "llvm.fmuladd.v%d%s" % (vw, "f32" if dtype == "float32" else "f64")
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(vty, [vty, vty, vty]), name)
    return fn
