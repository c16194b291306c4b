"""Algebraic simplification, only where the result is bit-identical.

"Bit-identical" means: equal bits for every non-NaN result (so the sign of
zero counts) and NaN where the original gives NaN. NaN sign/payload bits
are not promised: hardware and LLVM (which may commute fadd/fmul operands)
do not keep them either.

Rewrites (x's shape must equal the node's output shape whenever x replaces
the node, so no broadcast is lost; "known c" = util.known_scalar: Literal,
Fill of a Literal, or a const Arg whose value_class says it is uniform):
  x*1, 1*x, x/1                          -> x        (exact in IEEE)
  x + (-0.0), (-0.0) + x                 -> x        (exact for every x)
  x + (+0.0)                             NOT done: turns x = -0.0 into +0.0
  x - (+0.0)                             -> x        (-0.0 - +0.0 = -0.0: exact)
  x - (-0.0)                             NOT done: same as x + (+0.0)
  (-0.0) - x                             -> -x       (= -0.0 + (-x), exact)
  integer x + 0, 0 + x, x - 0            -> x
  -(-x)                                  -> x
  a + (-b) -> a - b;  (-a) + b -> b - a;  a - (-b) -> a + b   (a - b is a + (-b) by definition)
  pow(x, c), c a known size-1 exponent:
      c = 1 -> x;  c = 2 -> x*x;  c = -1 -> 1/x (floats);  c = 0 -> 1 (pow(NaN, 0) is 1 too)
    Checked against np.power (the reference kernel) on 2e6 random bit patterns
    per float dtype plus 0, -0, +-inf, NaN: identical. numpy itself takes
    these fast paths only for a broadcast (stride-0) exponent; with a full
    exponent array it calls libm pow, which is not correctly rounded (glibc
    powf(x, 2) != x*x in ~0.03% of inputs), hence the size-1 condition.
    c = 0.5 -> sqrt is NOT done: pow(-0, .5) = +0 and pow(-inf, .5) = +inf in
    C/TF, sqrt gives -0 and NaN. c = 3 -> x*x*x is NOT done (two roundings).
  MulNoNan(x, c): c known 0 -> zeros (+0.0, whatever x is); c known finite
    nonzero -> x*c (the y == 0 branch can never be taken)
  Reshape/ReshapeLike/BroadcastTo/BroadcastToShapeOf/SumToShape/Unreduce/
    Squeeze/Tile whose input shape equals its output shape -> input (with run-time rows,
    a second operand's rows must be known to be the same: _Ctx.rows_source)
  a chain of reshapes (Reshape/ReshapeLike/ExpandDims/Squeeze) -> one Reshape
  Transpose with the identity permutation -> input
  AddN of one input, Cast to the same dtype -> input
  MatMul with an inner dimension of 1 (an outer product) -> col * row + 0.0
    (one product per element, as in numpy, whose BLAS sum turns -0.0 into +0.0)
  SelectV2 with a known condition, or with both branches the same value -> that branch
Never done: x*0 -> 0 (NaN*0 and inf*0 are NaN), x-x -> 0 (inf-inf is NaN),
x/x -> 1.
"""
from collections import Counter

import numpy as np

from ..ops.registry import REGISTRY, has_fact
from .ir import Value
from .util import Builder, known_scalar, size

_MAX_DEPTH = 8  # a rewrite's result is simplified again, at most this deep


def _eq(c, x):
    return c is not None and bool(c == x)


def _neg_zero(c, dt):
    """c is a zero that is an exact additive identity: -0.0, or an integer 0."""
    return _eq(c, 0) and (not dt.is_floating or bool(np.signbit(c)))


def _pos_zero(c, dt):
    """c is a zero that is an exact subtractive identity: +0.0, or an integer 0."""
    return _eq(c, 0) and (not dt.is_floating or not bool(np.signbit(c)))


class _Ctx:
    def __init__(self, b, args):
        self.b, self.args = b, args
        self._rows = {}

    def rows_source(self, v):
        """The value whose run-time row count v's (shape (None, static...)) is known to
        equal: v's own operands' where v is elementwise over operands all of one source,
        else v itself (a While / If output, a slice, a broadcast of two sources ...; the
        compiled code broadcasts one row against many, codegen/lower_rows.py)."""
        stack = [v]   # (iterative: a chain of gradient ops may be deeper than Python's recursion)
        while stack:
            u = stack[-1]
            n = self.b.nodes[u.node]
            ins = [w for w in n.inputs if _rows_dynamic(self.b.shape(w))]
            todo = [w for w in ins if w not in self._rows]
            if u in self._rows or todo:
                if u in self._rows:
                    stack.pop()
                else:
                    stack.extend(todo)
                continue
            srcs = {self._rows[w] for w in ins}
            self._rows[u] = srcs.pop() if len(srcs) == 1 and REGISTRY[n.op].kind == "elementwise" else u
            stack.pop()
        return self._rows[v]

    def known(self, v):
        return known_scalar(self.b.nodes, self.args, v)

    def op(self, v):
        return self.b.nodes[v.node].op

    def input0(self, v):
        return self.b.nodes[v.node].inputs[0]


def _rows_dynamic(shape):
    return shape is not None and len(shape) >= 1 and shape[0] is None and None not in shape[1:]


def _rule(op, ins, attrs, out, ctx):
    """(rule name, result) or None. result: a Value to use instead, a new
    (op, inputs, attrs) computing the same, or ("uniform", scalar)."""
    shape, dt = out
    sh = ctx.b.shape
    K = ctx.known

    def same(v):
        return sh(v) == shape

    if op == "Mul":
        x, y = ins
        if _eq(K(y), 1) and same(x):
            return "mul_one", x
        if _eq(K(x), 1) and same(y):
            return "mul_one", y
    elif op == "RealDiv":
        x, y = ins
        if _eq(K(y), 1) and same(x):
            return "div_one", x
    elif op == "AddV2":
        x, y = ins
        if _neg_zero(K(y), dt) and same(x):
            return "add_zero", x
        if _neg_zero(K(x), dt) and same(y):
            return "add_zero", y
        if ctx.op(y) == "Neg":
            return "add_neg", ("Sub", (x, ctx.input0(y)), {})
        if ctx.op(x) == "Neg":
            return "add_neg", ("Sub", (y, ctx.input0(x)), {})
    elif op == "Sub":
        x, y = ins
        if _pos_zero(K(y), dt) and same(x):
            return "sub_zero", x
        if ctx.op(y) == "Neg":
            return "sub_neg", ("AddV2", (x, ctx.input0(y)), {})
        if _neg_zero(K(x), dt) and same(y):
            return "zero_sub", ("Neg", (y,), {})
    elif op == "Neg":
        if ctx.op(ins[0]) == "Neg":
            return "neg_neg", ctx.input0(ins[0])
    elif op == "Pow":
        x, y = ins
        c = K(y)
        if c is not None and size(sh(y)) == 1 and same(x):
            if _eq(c, 1):
                return "pow_1", x
            if _eq(c, 2):
                return "pow_2", ("Mul", (x, x), {})
            if _eq(c, -1) and dt.is_floating:
                return "pow_m1", ("Reciprocal", (x,), {})
            if _eq(c, 0):
                return "pow_0", ("uniform", np.ones((), dt.np))
    elif op == "MulNoNan":
        x, y = ins
        c = K(y)
        if c is not None:
            if _eq(c, 0):
                return "mulnonan_zero", ("uniform", np.zeros((), dt.np))
            if np.isfinite(c):
                return "mulnonan_mul", ("Mul", (x, y), {})
    elif op == "MatMul" and dt.is_floating and len(shape) == 2 and None not in shape:
        # (rows known only at run time: codegen/lower_rows_matmul.py takes the product as it is)
        a, c = ins
        k = sh(a)[0] if attrs["transpose_a"] else sh(a)[1]
        if k == 1 and size(shape) > 1:
            # an outer product (gradients of matvecs): elementwise, so it fuses with what
            # consumes it; + 0.0 turns a -0.0 product into +0.0, as numpy's (BLAS's) sum does
            M, N = shape
            col = Value(ctx.b.emit("Reshape", (a,), {"shape": (M, 1)}, (((M, 1), dt),)))
            row = Value(ctx.b.emit("Reshape", (c,), {"shape": (1, N)}, (((1, N), dt),)))
            prod = Value(ctx.b.emit("Mul", (col, row), {}, ((tuple(shape), dt),)))
            return "matmul_k1", ("AddV2", (prod, ctx.b.literal(np.zeros((), dt.np))), {})
    elif op == "Transpose":
        perm, rank = attrs["perm"], len(sh(ins[0]))
        if (perm is None and rank <= 1) or (perm is not None and tuple(perm) == tuple(range(rank))):
            return "transpose_identity", ins[0]
    elif op == "AddN":
        if len(ins) == 1:
            return "addn_one", ins[0]
    elif op == "Cast":
        if ctx.b.dtype(ins[0]) == attrs["DstT"]:
            return "cast_same", ins[0]
    elif op == "SelectV2":
        c, x, y = ins
        k = K(c)
        if k is not None and bool(k) and same(x):
            return "select_known", x
        if k is not None and not bool(k) and same(y):
            return "select_known", y
        if x == y and same(x) and size(sh(c)) <= size(shape):
            return "select_same", x
    if has_fact(op, "identity_if_same_shape") and same(ins[0]) and \
            (len(ins) == 1 or not _rows_dynamic(shape) or ctx.rows_source(ins[0]) == ctx.rows_source(ins[1])):
        # (rows known only at run time: SumToShape(g, x) is no identity where g may be many
        # rows broadcast from x's one)
        return "layout_identity", ins[0]
    if has_fact(op, "reshape") and has_fact(ctx.op(ins[0]), "reshape"):
        return "reshape_chain", ("Reshape", (ctx.input0(ins[0]),), {"shape": tuple(shape)})
    return None


def simplify(program):
    b = Builder(program)
    ctx = _Ctx(b, program.args)
    counts = Counter()

    def build(op, ins, attrs, out, name, depth):
        r = _rule(op, ins, attrs, out, ctx) if depth < _MAX_DEPTH else None
        if r is None:
            return Value(b.emit(op, ins, attrs, (out,), name))
        rule, res = r
        counts[rule] += 1
        if isinstance(res, Value):
            return res
        if res[0] == "uniform":
            return b.uniform(res[1], out[0], name)
        return build(res[0], tuple(res[1]), res[2], out, name, depth + 1)

    for i, n in enumerate(program.nodes):
        if len(n.outputs) != 1 or n.op in ("Arg", "Literal"):
            b.copy(i)
            continue
        b.map[Value(i)] = build(n.op, tuple(b.get(v) for v in n.inputs), dict(n.attrs), n.outputs[0], n.name, 0)
    stats = {"nodes_before": len(program.nodes), "nodes_after": len(b.nodes), "rewritten": sum(counts.values())}
    stats.update(sorted(counts.items()))
    return b.finish("simplify", stats)
