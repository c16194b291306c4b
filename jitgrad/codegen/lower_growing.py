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
  after the last row, and ``rows`` grows when the iteration succeeds.
* A branch-shaped If output: room for the larger branch's value is reserved,
  the taken branch writes there, and its shape's differing dims are selected
  by the predicate.
"""
from llvmlite import ir

from .irutil import I64, I8, Unsupported, c64

I8P = I8.as_pointer()
DESC_WORDS = 3   # the host's descriptor (dynamic_outputs.py)


def _keep_pair(kb):
    """A persistent word pair (top-level kernels) or None (a region)."""
    if kb.is_region:
        return None
    kb.persistent_words += 2
    return kb.persistent_words - 2


def _nbytes(shape, dt):
    n = dt.size
    for d in shape:
        n *= d
    return n


# ---------------------------------------------------------------- growing loop variables
def keep_words(kb, node):
    """Per growing variable of a While: its persistent word pair, or None."""
    return {k: _keep_pair(kb) for k in node.attrs.get("grow_vars", ())}


class GrowingVar:
    """One growing variable of a While being lowered; ``desc``: its dynamic stack
    (the While's output buffer for it)."""

    def __init__(self, kb, desc, keep, row_shape, dt):
        from .lower_control import _stack_init
        self.kb, self.d, self.keep = kb, desc, keep
        self.row = _nbytes(row_shape, dt)
        self.dt = dt
        _stack_init(kb, desc, keep)

    def _field(self, k):
        return self.kb.b.gep(self.d, [c64(k)])

    def start(self, src_ptr, entry_shape, failed):
        """Copies the entry value (static shape) in; sets ``failed`` when memory runs out."""
        from .lower_control import _copy, _stack_reserve
        b = self.kb.b
        rows0 = entry_shape[0]
        with b.if_then(b.not_(b.load(failed))):
            bad = _stack_reserve(self.kb, self.d, c64(rows0), self.row)
            b.store(b.or_(b.load(failed), bad), failed)
            with b.if_then(b.not_(bad)):
                _copy(self.kb, self.data(), src_ptr, entry_shape, self.dt)
                b.store(c64(rows0), self._field(1))

    def data(self):
        b = self.kb.b
        return b.inttoptr(b.load(self._field(0)), I8P)

    def reserve(self, added):
        """Room for ``added`` more rows; (i1 failed, the variable's data, where the new rows go)."""
        from .lower_control import _row_ptr, _stack_reserve
        b = self.kb.b
        rows = b.load(self._field(1))
        bad = _stack_reserve(self.kb, self.d, b.add(rows, c64(added)), self.row)
        return bad, self.data(), _row_ptr(self.kb, self.data(), rows, self.row)

    def advance(self, added):
        b = self.kb.b
        b.store(b.add(b.load(self._field(1)), c64(added)), self._field(1))

    def finish(self):
        from .lower_control import _stack_keep
        _stack_keep(self.kb, self.d, self.keep)


# ---------------------------------------------------------------- If outputs shaped by the branch taken
def branch_shaped_outputs(kb, node):
    """{output index: BranchShapedOutput} for an If's outputs of unknown shape."""
    a = node.attrs
    out = {}
    for k, (shape, dt) in enumerate(node.outputs):
        if shape is not None and None not in shape:
            continue
        then, els = a["then_branch"], a["else_branch"]
        st, se = then.shape(then.outputs[k]), els.shape(els.outputs[k])
        if shape is None or 1 + sum(d is None for d in shape) > DESC_WORDS or None in st + se:
            raise Unsupported("an If output whose branches' shapes differ in rank or in more than two dims, "
                              "or are themselves unknown")
        out[k] = BranchShapedOutput(shape, st, se, dt, _keep_pair(kb))
    return out


class BranchShapedOutput:
    def __init__(self, shape, then_shape, else_shape, dt, keep):
        self.shape, self.then_shape, self.else_shape = tuple(shape), tuple(then_shape), tuple(else_shape)
        self.nbytes = max(_nbytes(then_shape, dt), _nbytes(else_shape, dt))
        self.keep = keep
        self._d = None

    def start(self, kb, out):
        """Reserves the memory the taken branch writes to: (its pointer, i1 ok)."""
        from .lower_control import _stack_init, _stack_reserve
        b = kb.b
        self._d = d = b.bitcast(kb.alloca(ir.ArrayType(I64, 3)), I64.as_pointer())
        _stack_init(kb, d, self.keep)
        bad = _stack_reserve(kb, d, c64(1), self.nbytes)
        return b.inttoptr(b.load(d), I8P), b.not_(bad)

    def finish(self, kb, out, pred):
        """The descriptor of ``out`` (the If's buffer for it): the data and the taken branch's differing dims."""
        from .lower_control import _desc, _stack_keep
        b = kb.b
        desc = _desc(kb, out)
        b.store(b.load(self._d), desc)
        word = 1
        for p, d in enumerate(self.shape):
            if d is None:
                dim = b.select(pred, c64(self.then_shape[p]), c64(self.else_shape[p]))
                b.store(dim, b.gep(desc, [c64(word)]))
                word += 1
        _stack_keep(kb, self._d, self.keep)
