"""A dynamic TensorArray that a tf.while_loop body writes out of order
(``ta.write(T - 1 - i, x)``, ``ta.write(i + offset, x)`` with ``offset`` fed), preallocated.

A dynamic array written other than in order changes length between iterations, so its
loop would run in the interpreter. But when the body only writes it (no read, no size()),
each write at ``a * i + B`` for the loop's counter ``i`` (stepping by one), a static ``a``
and a loop-invariant ``B``, and the loop runs while ``i < n`` (or ``i <= n``) for a
loop-invariant ``n`` (``maximum_iterations`` bounding it), its final length is known
before the loop: ``max(rows at entry, the largest index written + 1)``, the index's
extremes being at the first and the last iteration. The array then enters the loop with
that many rows (its entry rows, then zeros: what TF's unwritten elements read) and is
written as a fixed-size array (autograph/staged_tensor_array.py: a checked row store per
write, in place: ops/row_store.py), so the loop keeps one shape and compiles; a row
written twice keeps the later value, as TF's TensorList does.

The length is computed in int64 (an index near 2**31 does not wrap) and is a value the
kernel reads when it runs, not a shape it is compiled for: the buffer is
``ZeroRows(entry, length)`` (ops/zero_rows.py), of ``[None, *element]`` rows, which
checks the length (negative or past int32: TF's InvalidArgumentError, nothing
allocated), and the loop carries it as a variable of run-time rows (passes/
growing_vars.row_stored_vars). One kernel serves every trip count.

Indices that are not affine in the counter (``ta.write(perm[i], x)``, ``perm`` fed) give no
length before the loop: that buffer enters with the entry's rows and each write grows it
as TF's TensorListSetItem does for a dynamic array (a growing SetRow: the loop's buffer
reallocated by doubling, in place), so that loop compiles too, to one kernel.
"""
from . import dtypes
from .convert import is_tensorlike
from .ops import array_ops, math_ops
from .ops.zero_rows import INT32_MAX, zero_rows
from .ops.registry import REGISTRY, apply_op


class Variant(Exception):
    """A value that changes from iteration to iteration (or one this module cannot move)."""


_PASS = ("Identity", "StopGradient")
_ARITH = ("AddV2", "Add", "Sub", "Mul")


class Hoist:
    """Loop-invariant values of a traced loop function, rebuilt in ``graph`` (where the
    loop is made) so that they can be computed before it."""

    def __init__(self, graph, variant):
        self.graph, self.variant, self.memo = graph, {id(v) for v in variant}, {}

    def __call__(self, t):
        if id(t) in self.memo:
            return self.memo[id(t)]
        out = self._outer(t)
        self.memo[id(t)] = out
        return out

    def _outer(self, t):
        if id(t) in self.variant:
            raise Variant(t)
        if t.graph is self.graph:
            return t
        fg = t.graph
        for outer, ph in getattr(fg, "captures", ()):
            if ph is t:
                return self(outer)
        op = t.op
        opdef = REGISTRY[op.type]
        if (op.type in ("Placeholder", "PlaceholderWithDefault") or op.control_inputs or opdef.stateful or
                opdef.kind in ("random", "state")):
            raise Variant(t)     # (fed, ordered, or drawing / reading state: not computed twice)
        static = array_ops.get_static_value(t)
        with self.graph.as_default():
            if static is not None and op.type == "Const":
                return array_ops.constant(static, dtype=t.dtype)
            inputs = [self(u) for u in op.inputs]
            out = apply_op(op.type, inputs, dict(op.attrs))
        return out[t.value_index] if isinstance(out, (tuple, list)) else out


def affine(t, p, hoist, depth=0):
    """(a, B) with ``t == a * p + B``: a a static int, B a tensor of the loop's graph (or
    0); raises Variant when ``t`` is not of that form."""
    if t is p:
        return 1, 0
    try:
        return 0, hoist(t)
    except Variant:
        pass
    op = t.op
    if depth > 16 or t.shape.rank not in (0, None) and t.shape.num_elements() != 1:
        raise Variant(t)
    if op.type in _PASS or op.type == "Cast" and t.dtype.is_integer:
        a, b = affine(op.inputs[0], p, hoist, depth + 1)
        return a, b if isinstance(b, int) else _in(hoist, lambda: math_ops.cast(b, t.dtype))
    if op.type not in _ARITH:
        raise Variant(t)
    (xa, xb), (ya, yb) = (affine(u, p, hoist, depth + 1) for u in op.inputs[:2])
    if op.type == "Mul":
        k = array_ops.get_static_value(op.inputs[1] if xa else op.inputs[0])
        if (xa and ya) or k is None:
            raise Variant(t)     # (a counter times a run-time value: not a static slope)
        return (xa or ya) * int(k), _in(hoist, lambda: xb * yb)
    if op.type == "Sub":
        return xa - ya, _in(hoist, lambda: _plus(xb, -yb))
    return xa + ya, _in(hoist, lambda: _plus(xb, yb))


def _plus(x, y):
    """x + y, either a tensor or a Python int (0 adds nothing: a static step stays one)."""
    return y if isinstance(x, int) and x == 0 else x if isinstance(y, int) and y == 0 else x + y


def _in(hoist, make):
    with hoist.graph.as_default():
        return make()


def trip_count(cond_out, counter, hoist):
    """(bound, b, inclusive) of the loop's traced condition ``counter + b < bound`` (``<=``
    when inclusive; or flipped), ``bound`` loop-invariant; raises Variant otherwise."""
    kinds = {"Less": (False, 0), "LessEqual": (False, 1), "Greater": (True, 0), "GreaterEqual": (True, 1)}
    op = cond_out.op
    if op.type not in kinds:
        raise Variant(cond_out)
    flip, inclusive = kinds[op.type]
    lhs, rhs = op.inputs[:2]
    if flip:
        lhs, rhs = rhs, lhs
    a, b = affine(lhs, counter, hoist)
    if a != 1:
        raise Variant(cond_out)
    return hoist(rhs), b, inclusive


def final_length(rows, writes, start, count):
    """The array's length after the loop: ``rows`` at entry, ``writes`` [(a, B)] at
    ``a * i + B`` for i = start, ..., start + count - 1 (int64 tensors: no wrap-around)."""
    last = start + count - 1
    length = rows
    for a, b in writes:
        top = math_ops.maximum(start * a, last * a) + b + 1
        length = math_ops.maximum(length, math_ops.where(count > 0, top, rows))
    return length


def _i64(t):
    return math_ops.cast(t, dtypes.int64)


def plan(watches, body_vals, body_outs, cond_trace, entry, limit, graph):
    """{array slot: its length after the loop (an int64 tensor of ``graph``, where the loop
    is made), or None where the indices are not affine in the counter (``perm[i]``, say):
    that array grows in place as it is written} when the body only writes every watched
    array, once per iteration; None otherwise."""
    if cond_trace is None or not watches:
        return None
    for k, w in watches.items():
        out = body_outs[k]
        if (w.read or not w.writes or any(scatter for _, _, scatter in w.writes) or out.op.type != "ConcatV2"
                or out.op.inputs[0] is not body_vals[k]):
            return None    # (not written by the body itself, every iteration: under a tf.cond, say)
    lengths = dict.fromkeys(watches)
    cond_vals, cond_out = cond_trace
    try:
        body_hoist = Hoist(graph, body_vals)
        cond_hoist = Hoist(graph, cond_vals)
        counter = _counter(body_vals, body_outs, body_hoist)
        bound, b, inclusive = trip_count(cond_out, cond_vals[counter], cond_hoist)
        with graph.as_default():
            start = _i64(entry[counter])
            count = _i64(bound) - start - _i64(b) + inclusive
            count = math_ops.maximum(count, 0)
            if limit is not None:
                count = math_ops.minimum(count, _i64(limit))
    except Variant:
        return lengths
    for k, w in watches.items():
        try:
            writes = [affine(index, body_vals[counter], body_hoist) for index, _, _ in w.writes]
        except Variant:
            continue
        with graph.as_default():
            rows = _i64(array_ops.shape(entry[k])[0])
            lengths[k] = final_length(rows, [(a, _i64(b)) for a, b in writes], start, count)
    return lengths


def _counter(vals, outs, hoist):
    """The slot of the loop's counter: a scalar int the body steps by one."""
    for j, (p, o) in enumerate(zip(vals, outs)):
        if not (is_tensorlike(p) and p.dtype in (dtypes.int32, dtypes.int64) and p.shape.rank == 0 and
                is_tensorlike(o)):
            continue
        try:
            a, b = affine(o, p, hoist)
        except Variant:
            continue
        if a == 1 and (b == 1 if isinstance(b, int) else array_ops.get_static_value(b) == 1):
            return j
    raise Variant(None)


def preallocated(entry, length):
    """The array's buffer: its entry value with zero rows after it, ``length`` (int64) rows
    in all (None: the entry's rows, grown by the writes), of rows known at run time; and how
    the body's array writes it (``configure``)."""
    if length is None:
        return zero_rows(entry, _i64(array_ops.shape(entry)[0])), None
    buf = zero_rows(entry, length)
    n = math_ops.cast(math_ops.minimum(length, INT32_MAX), dtypes.int32)   # (past int32 ZeroRows fails the run)
    return buf, (n, array_ops.range_(n))


def configure(array, fixed):
    """The body's view of a preallocated array (``fixed``: preallocated's second value): a
    fixed-size array of that length and row ids, checked row stores; or (None) a dynamic one
    whose every write is a growing row store (ops/row_store.py)."""
    if fixed is None:
        array._grows_in_place = True
    else:
        array._dynamic, array._size, array._row_ids = False, fixed[0], (fixed[1], None)
