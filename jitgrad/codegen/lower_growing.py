"""Values whose shape is known only when the kernel runs: a While loop variable
that grows by appending rows (passes/growing_vars.py) and an If output whose
branches give different shapes.

Both live in memory the kernel allocates (doubling realloc, lower_control.py's
dynamic stack {data, rows, capacity}; on failure the run stops with
ERR_STACK_ALLOC and nothing is written). A top-level kernel keeps that memory
from call to call in a persistent word pair (codegen/persistent.py, freed with
the kernel) and hands the host a descriptor: word 0 the data pointer, then the
unknown dims in order (a growing variable's: its rows, then its capacity); the
host copies the value out after the call (dynamic_outputs.py). Inside a region
the memory is freed when the region returns. Native code never writes past the
capacity it reserved, so nothing is written out of bounds and nothing leaks.

* A growing variable: the entry value's rows are copied in; before every
  iteration the capacity is made at least ``rows + added``; the body,
  specialised with the variable empty, writes the rows it appends straight
  after the last row, and ``rows`` grows when the iteration succeeds. When a
  cond appends them, ``added`` is its larger branch's count and the body's
  output is that If's (nested) descriptor: word 0 where to write, word 1 the
  rows the branch taken wrote.
* A branch-shaped If output: room for the larger branch's value is reserved,
  the taken branch writes there, and its shape's differing dims are selected
  by the predicate.
"""
from llvmlite import ir

from .irutil import ERR_STACK_ROWS, I64, I8, Unsupported, c64
from .lower_rows import Rows, rows_of
from .stacks import (copy as _copy, desc as _desc, row_ptr as _row_ptr, stack_init as _stack_init,
                     stack_keep as _stack_keep, stack_reserve as _stack_reserve)

I8P = I8.as_pointer()
DESC_WORDS = 3   # the host's descriptor (dynamic_outputs.py)


def keep_pair(kb):
    """A persistent word pair (top-level kernels) or None (a region)."""
    if kb.regions.nested:
        return None
    kb.regions.persistent_words += 2
    return kb.regions.persistent_words - 2


def _nbytes(shape, dt):
    n = dt.size
    for d in shape:
        n *= d
    return n


# ---------------------------------------------------------------- growing loop variables
def keep_words(kb, node):
    """Per growing variable (and variable of run-time rows stored in place) of a While:
    its persistent word pair, or None."""
    return {k: keep_pair(kb) for k in node.attrs.get("grow_vars", ()) + node.attrs.get("rows_vars", ())}


class GrowingVar:
    """One growing variable of a While being lowered; ``desc``: its dynamic stack
    (the While's output buffer for it)."""

    def __init__(self, kb, desc, keep, row_shape, dt):
        self.kb, self.d, self.keep = kb, desc, keep
        self.row = _nbytes(row_shape, dt)
        self.dt = dt
        _stack_init(kb, desc, keep)

    def _field(self, k):
        return self.kb.b.gep(self.d, [c64(k)])

    def start(self, entry, entry_shape, failed):
        """Copies the entry value (buffer ``entry``: static shape, or run-time rows, the
        gradient of a popped variable, say) in; sets ``failed`` when memory runs out."""
        kb, b = self.kb, self.kb.b
        if entry_shape[0] is None:
            src = rows_of(kb, entry)
            rows0, src_ptr = src.rows, src.ptr
        else:
            rows0, src_ptr = c64(entry_shape[0]), entry.ptr
        with b.if_then(b.not_(b.load(failed))):
            bad = _stack_reserve(kb, self.d, rows0, self.row)
            b.store(b.or_(b.load(failed), bad), failed)
            with b.if_then(b.not_(bad)):
                if entry_shape[0] is None:   # (bytes: rows0 x row)
                    _copy_rows(kb, self.data(), src_ptr, rows0, self.row)
                else:
                    _copy(kb, self.data(), src_ptr, entry_shape, self.dt)
                b.store(rows0, self._field(1))

    def data(self):
        b = self.kb.b
        return b.inttoptr(b.load(self._field(0)), I8P)

    def reserve(self, added):
        """Room for ``added`` (an int) more rows; (i1 failed, the variable's data, where the new rows go)."""
        b = self.kb.b
        rows = b.load(self._field(1))
        bad = _stack_reserve(self.kb, self.d, b.add(rows, c64(added)), self.row)
        return bad, self.data(), _row_ptr(self.kb, self.data(), rows, self.row)

    def advance(self, added):
        """``added`` (an i64) rows were written."""
        b = self.kb.b
        b.store(b.add(b.load(self._field(1)), added), self._field(1))

    def finish(self):
        _stack_keep(self.kb, self.d, self.keep)


class FixedRowsVar(GrowingVar):
    """A While variable of run-time rows that keeps its rows (passes/growing_vars.
    row_stored_vars: a dynamic TensorArray's buffer written out of order, its gradient):
    the entry value is copied into the loop's own memory (kept as a growing variable's),
    and the body is handed its descriptor {data, rows, capacity} as both the variable and
    its next value; each SetRow stores one row there in place (lower_row_store.py)."""

    def desc_ptr(self):
        return self.kb.b.bitcast(self.d, I8P)


def _copy_rows(kb, dst, src, rows, row_bytes):
    b = kb.b
    d, s = b.bitcast(dst, I8P), b.bitcast(src, I8P)
    with kb.loop(b.mul(rows, c64(row_bytes))) as i:
        b.store(b.load(b.gep(s, [i])), b.gep(d, [i]))


def rows_appended(body, k):
    """(at most how many rows an iteration appends to growing variable k, whether the
    count depends on the branch a cond takes)."""
    v = body.outputs[k]
    rows = body.shape(v)[0]
    if rows is not None:
        return rows, False
    return max(s[0] for s in possible_shapes(body, v)), True


# ---------------------------------------------------------------- If outputs shaped by the branch taken
def _static(shape):
    return shape is not None and None not in shape


def possible_shapes(program, v):
    """The shapes value ``v`` of a branch can have: its own, or for a branch-shaped
    If's output (a nested cond, tf.case), its branches' (recursively)."""
    n = program.nodes[v.node]
    shape = n.outputs[v.index][0]
    if _static(shape):
        return {tuple(shape)}
    if n.op != "If" or shape is None:
        raise Unsupported(f"a branch output of unknown shape from {n.op}")
    a = n.attrs
    return (possible_shapes(a["then_branch"], a["then_branch"].outputs[v.index]) |
            possible_shapes(a["else_branch"], a["else_branch"].outputs[v.index]))


def branch_shaped_outputs(kb, node):
    """{output index: BranchShapedOutput} for an If's outputs of unknown shape."""
    a = node.attrs
    out = {}
    for k, (shape, dt) in enumerate(node.outputs):
        if _static(shape):
            continue
        if shape is None or 1 + sum(d is None for d in shape) > DESC_WORDS:
            raise Unsupported("an If output whose branches' shapes differ in rank or in more than two dims")
        then, els = a["then_branch"], a["else_branch"]
        v_then, v_else = then.outputs[k], els.outputs[k]
        nbytes = max(_nbytes(s, dt) for s in possible_shapes(then, v_then) | possible_shapes(els, v_else))
        out[k] = BranchShapedOutput(shape, then.shape(v_then), els.shape(v_else), nbytes, kb)
    return out


class BranchShapedOutput:
    """An If output whose shape depends on the branch taken. At the top level it
    reserves room for the largest value it can have (persistent memory); inside a
    branch (a nested cond) the enclosing If has put that room's address in word 0
    of the descriptor it passes. A branch whose own value is branch-shaped gets a
    descriptor too, pointing at the same room, and reports its dims there."""

    def __init__(self, shape, then_shape, else_shape, nbytes, kb):
        self.shape, self.then_shape, self.else_shape = tuple(shape), tuple(then_shape), tuple(else_shape)
        self.nbytes = nbytes
        self.in_region = kb.regions.nested
        self.keep = None if kb.regions.nested else keep_pair(kb)

    def start(self, kb, out):
        """Room for the value: (the then branch's output pointer, the else branch's, i1 ok)."""
        b = kb.b
        if self.in_region:
            data, ok = b.inttoptr(b.load(_desc(kb, out)), I8P), ir.Constant(ir.IntType(1), 1)
        else:
            self._d = d = b.bitcast(kb.alloca(ir.ArrayType(I64, 3)), I64.as_pointer())
            _stack_init(kb, d, self.keep)
            bad = _stack_reserve(kb, d, c64(1), self.nbytes)
            data, ok = b.inttoptr(b.load(d), I8P), b.not_(bad)
        self._data = data
        self._branch_desc = []
        ptrs = []
        for shape in (self.then_shape, self.else_shape):
            if _static(shape):
                self._branch_desc.append(None)
                ptrs.append(data)
                continue
            bd = b.bitcast(kb.alloca(ir.ArrayType(I64, DESC_WORDS)), I64.as_pointer())
            b.store(b.ptrtoint(data, I64), bd)
            self._branch_desc.append(bd)
            ptrs.append(b.bitcast(bd, I8P))
        return ptrs[0], ptrs[1], ok

    def _dims(self, kb, shape, bd):
        """The branch's value's dims at this output's unknown positions."""
        b = kb.b
        dims, word = {}, 1
        for p, d in enumerate(shape):
            if d is None:
                dims[p] = b.load(b.gep(bd, [c64(word)]))
                word += 1
            else:
                dims[p] = c64(d)
        return dims

    def finish(self, kb, out, pred):
        """The descriptor of ``out``: the data and the taken branch's dims where they differ."""
        b = kb.b
        desc = _desc(kb, out)
        b.store(b.ptrtoint(self._data, I64), desc)
        dims_t = self._dims(kb, self.then_shape, self._branch_desc[0])
        dims_e = self._dims(kb, self.else_shape, self._branch_desc[1])
        word = 1
        for p, d in enumerate(self.shape):
            if d is None:
                b.store(b.select(pred, dims_t[p], dims_e[p]), b.gep(desc, [c64(word)]))
                word += 1
        if not self.in_region:
            _stack_keep(kb, self._d, self.keep)


# ---------------------------------------------------------------- loop variables shrinking by rows
class PoppedVar:
    """A While variable that loses ``pop`` rows at its end every iteration
    (passes/growing_vars.popped_vars): it enters with run-time rows (codegen/lower_rows.py),
    the body reads its last rows in place, and what is left is the loop's output (a view
    of the entry value's memory, whose descriptor ``finish`` writes).

    ``pop`` None: an If in the body pops as many as its taken branch does
    (``pop_capture``); the body gets the variable's descriptor {data, rows}, whose
    rows that If lowers."""

    def __init__(self, kb, entry, pop):
        self.kb, self.pop = kb, pop
        self.src = rows_of(kb, entry)
        self.row = self.src.row_elems * self.src.dtype.size
        b = kb.b
        if pop is None:
            self.desc = b.bitcast(kb.alloca(ir.ArrayType(I64, DESC_WORDS)), I64.as_pointer())
            b.store(b.ptrtoint(self.src.ptr, I64), self.desc)
            self.rows = b.gep(self.desc, [c64(1)])
            b.store(c64(0), b.gep(self.desc, [c64(2)]))   # (no capacity: the body never grows it)
        else:
            self.rows = kb.alloca(I64)
        b.store(self.src.rows, self.rows)

    def take(self):
        """(i1 'too few rows': error set, the popped rows' address); the rows leave the variable.
        (For an If's pops: nothing yet, and the descriptor's address.)"""
        kb, b = self.kb, self.kb.b
        if self.pop is None:
            return ir.Constant(ir.IntType(1), 0), b.bitcast(self.desc, I8P)
        left = b.sub(b.load(self.rows), c64(self.pop))
        short = b.icmp_signed("<", left, c64(0))
        kb.set_error(short, ERR_STACK_ROWS)
        left = b.select(short, c64(0), left)
        b.store(left, self.rows)
        return short, _row_ptr(kb, b.bitcast(self.src.ptr, I8P), left, self.row)

    def finish(self, out):
        b = self.kb.b
        d = _desc(self.kb, out)
        b.store(b.ptrtoint(self.src.ptr, I64), d)
        b.store(b.load(self.rows), b.gep(d, [c64(1)]))


def pop_capture(kb, buf, shape, dt, pred, r_then, r_else):
    """An If popping rows of a loop variable (passes/growing_vars.if_pops): ``buf`` is
    the variable's descriptor (PoppedVar). The taken branch's rows leave it; returns
    (i1 ok, where they are: the branch's capture). Too few rows: error, no branch runs."""
    if isinstance(buf, Rows):
        raise Unsupported("an If popping rows of a value that is not a loop variable")
    b = kb.b
    d = _desc(kb, buf)
    rows = b.load(b.gep(d, [c64(1)]))
    pop = b.select(pred, c64(r_then), c64(r_else))
    short = b.icmp_signed("<", rows, pop)
    kb.set_error(short, ERR_STACK_ROWS)
    left = b.select(short, rows, b.sub(rows, pop))
    b.store(left, b.gep(d, [c64(1)]))
    at = _row_ptr(kb, b.inttoptr(b.load(d), I8P), left, _nbytes(shape[1:], dt))
    return b.not_(short), at
