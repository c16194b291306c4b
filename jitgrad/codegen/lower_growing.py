"""A While loop variable that grows by appending rows (passes/growing_vars.py),
kept in a growing buffer.

It lives in a dynamic stack (lower_control.py's 3-word descriptor {data, rows,
capacity}, the While's output buffer for it): the entry value's rows are copied
in, and before every iteration the capacity is made at least ``rows + added``
(doubling realloc; on failure the run stops with ERR_STACK_ALLOC, no write
happens). The body, specialised with the variable empty, writes the rows it
appends straight after the last row; ``rows`` grows when the iteration
succeeds. A top-level kernel keeps the memory from call to call in a
persistent word pair (codegen/persistent.py, freed with the kernel) and the
host copies the rows out after the call (dynamic_outputs.py); inside a region
it is freed when the region returns. Native code never writes past
``capacity`` rows, so nothing is written out of bounds and nothing leaks.
"""
from .irutil import I8, c64

I8P = I8.as_pointer()


def keep_words(kb, node):
    """Per growing variable: the persistent word pair its memory is kept in
    (top-level kernels), or None (a region: freed when it returns)."""
    out = {}
    for k in node.attrs.get("grow_vars", ()):
        if kb.is_region:
            out[k] = None
        else:
            out[k] = kb.persistent_words
            kb.persistent_words += 2
    return out


def row_bytes(shape, dt):
    n = dt.size
    for d in shape[1:]:
        n *= d
    return n


class GrowingVar:
    """One growing variable of a While being lowered."""

    def __init__(self, kb, desc, keep, row_shape_out, dt):
        from .lower_control import _stack_init
        self.kb, self.d, self.keep = kb, desc, keep
        self.row = row_bytes((None,) + tuple(row_shape_out), dt)
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
        """Room for ``added`` more rows; returns (i1 failed, the variable's data, where the new rows go)."""
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

