"""``tf.TensorArray`` as the state of a staged (tf.while_loop) AutoGraph loop.

jitgrad's TensorArray is a Python list of tensors indexed by Python ints; a loop
staged into a tf.while_loop writes it at an index known only at run time (the
tf.function guide's ``for i in tf.range(n): ta = ta.write(i, x)``). For such a loop
the array is carried as one dense loop tensor of shape ``[size, *element_shape]``:
``write`` replaces row ``i`` (SetRow, ops/row_store.py: a store in place where the
compiler can, O(1); an index out of range fails at run time, as TF's does; a dynamic
array's write past its end is a select over its grown rows), ``read``/``gather`` are gathers, ``stack`` is
the tensor itself. An element shape not given is learned from a dry run of one
iteration, as TF's AutoGraph does for variables first defined in the loop.

With ``dynamic_size=True`` the loop tensor has an unknown first dimension (shape
invariant ``[None, *element_shape]``): a write past the end grows it to ``index + 1``
rows (new rows are zeros, as TF's unwritten elements), and ``size()`` is its row
count at run time. When a tf.while_loop body only writes such an array, once per
iteration, at a loop counter that starts at the array's size and steps by one (an RNN
stacking its states: ``ta.write(i, h)`` with ``i + 1``), every write is an append and
is traced as one (``concat([buffer, [value]], 0)``, control_flow.py checks the pattern
with ``watch_appends`` / ``check_appends`` and traces the general form otherwise): the
compiler keeps such a variable in a growing buffer (passes/growing_vars.py). Any other
dynamic array runs in the reference interpreter (its loop variable changes shape
between iterations: ``explain`` gives the reason); a fixed-size one compiles.

The same carrying serves a TensorArray passed directly as a ``tf.while_loop`` loop
variable (control_flow.while_loop), as TF 2 flattens it to its TensorList, and a
graph-mode TensorArray whose size is known only at run time (``size=n`` fed, or
``tf.shape(x)[0]``; ``unstack`` of a value of unknown length): ``fed_size_array``
makes it dense from the start, ``[n, *element_shape]``. Its row numbers
(``range(n)``, for the writes' selects and the indices' bounds checks) are made
where the array is, so that a loop body reading them captures them: the compiler
specialises a top-level Range on its fed length (shape_specialise.py; one kernel
per size, none per trip count), not one inside a loop body.
"""
import numpy as np

from .. import dtypes
from ..convert import is_tensorlike, convert_to_tensor
from ..errors import InvalidArgumentError
from ..ops import array_ops, math_ops, reduction_ops
from ..ops.list_ops import list_check
from ..ops.row_store import set_row
from ..ops.array_ops import get_static_value
from ..shapes import TensorShape
from ..tensor_array import TensorArray, note_change
from ..tensor_array_split import graph_blocks
from ..tensor_array_ragged import NeedsRagged


class LoopTensorArray(TensorArray):
    """A fixed-size TensorArray backed by one ``[size, *element_shape]`` tensor (None
    until the element shape is known). Writes update it in place and return it."""

    def __init__(self, dtype, size, element_shape, buffer, infer_shape=True, dynamic=False, row_ids=None):
        self._dtype, self._size, self._dynamic = dtype, size, dynamic   # size: an int, or an int32 tensor
        self._element_shape = element_shape
        self._infer_shape = infer_shape
        self._buffer = buffer
        # (range(size), the buffer it numbers) made where the array was, when its size is known only at run time
        self._row_ids = row_ids
        self._appends = None   # an _Appends while a loop body that may only append is traced
        # a dynamic array a loop body writes out of order at indices known only as it runs: each
        # write a growing row store (tensor_array_preallocated.py, ops/row_store.py)
        self._grows_in_place = False
        # (with_tensor_arrays' ragged_ok: the loop may carry it ragged; its element shape is a dry run's guess)
        self._ragged_ok = self._shape_guessed = False

    def _like(self, buffer):
        out = LoopTensorArray(self._dtype, self._size, self._element_shape, buffer, self._infer_shape,
                              self._dynamic, self._row_ids)
        out._grows_in_place = self._grows_in_place
        out._shape_guessed = self.__dict__.get("_shape_guessed", False)
        out._ragged_ok = self.__dict__.get("_ragged_ok", False)
        return out

    def size(self, name=None):
        self._reads()
        if self._dynamic and (self._buffer is not None or self._element_shape.is_fully_defined()):
            return array_ops.shape(self._stacked(), name=name)[0]
        # (a dynamic array not written yet, of an element shape still unknown: its initial
        # size -- the append pattern ta.write(ta.size(), x) asks before its first write)
        if is_tensorlike(self._size):
            return array_ops.identity(self._size, name=name)
        return array_ops.constant(self._size, dtype=dtypes.int32)

    def _rows(self):
        ids = self._row_ids
        if ids is not None and (not self._dynamic or ids[1] is self._buffer):   # (a dynamic one: not grown since)
            return ids[0]
        return array_ops.range_(self.size()) if self._dynamic else array_ops.range_(self._size)

    def _length(self):
        """The array's element count (an int32 tensor for a dynamic one: its rows now)."""
        if self._dynamic:
            return array_ops.shape(self._stacked())[0]
        return self._size

    def _checked_index(self, index, kind):
        """``index`` as int32, checked against the array's length when the graph runs, as
        TF's TensorList ops check it (``kind``: 'access', 'modify', 'gather' or 'scatter';
        ops/list_ops.py): the run fails with TF's InvalidArgumentError and message."""
        return list_check(math_ops.cast(index, dtypes.int32), self._length(), kind)

    def _empty(self, shape):
        """Zeros of shape ``[size, *shape]``; for a dynamic array with the unknown first
        dimension its loop tensor keeps (it grows)."""
        z = array_ops.zeros(array_ops.stack([self._size] + list(shape)) if is_tensorlike(self._size) else
                            [self._size] + list(shape), self._dtype)
        return array_ops.placeholder_with_default(z, [None] + list(shape)) if self._dynamic else z

    def _grown(self, index):
        """The dense tensor with at least ``index + 1`` rows (TF: a dynamic array grows on
        a write past its end; the rows in between read as zeros)."""
        buf = self._buffer
        rows = array_ops.shape(buf)[0]
        want = math_ops.maximum(rows, math_ops.cast(index, dtypes.int32) + 1)
        zero_row = array_ops.zeros([1] + self._element_shape.as_list(), self._dtype)
        padded = array_ops.concat([buf, zero_row], 0)
        return array_ops.gather(padded, math_ops.minimum(array_ops.range_(want), rows))

    def _reads(self):
        if self._appends is not None:
            self._appends.read = True

    def write(self, index, value, name=None):
        return self._write(index, value, name, "modify")

    def _write(self, index, value, name, kind):
        if self.__dict__.get("_ragged_ok") and is_tensorlike(value) and not value.shape.is_fully_defined() and (
                self.__dict__.get("_shape_guessed") or (self._buffer is None and not self._element_shape.is_fully_defined())):
            # the element shape is only the dry run's (or not even that), and the elements' shapes
            # are known only as the loop runs: they may differ (control_flow carries the array
            # ragged instead)
            raise NeedsRagged(value.shape)
        t = self._convert(value)
        if self._appends is not None and self._buffer is not None:
            # index == rows (check_appends verifies it once the body is traced): an append
            return self._append(index, array_ops.expand_dims(t, 0), False, name)
        if self._buffer is None:
            if not t.shape.is_fully_defined():
                raise ValueError(f"A TensorArray written in a staged loop needs elements of a known shape, got "
                                 f"{t.shape}.")
            self._element_shape = TensorShape(t.shape.as_list())
            self._buffer = self._empty(t.shape.as_list())
        rank = len(self._element_shape.as_list())
        if self._dynamic and self._grows_in_place:   # (SetRow fails a negative index with TF's message)
            self._buffer = set_row(self._buffer, math_ops.cast(index, dtypes.int32), t, name=name, grow=True)
            return self
        if self._dynamic:
            # a write past the end grows the array; a negative index fails with TF's message
            # (of the length before the write)
            index = math_ops.cast(index, dtypes.int32)
            length = array_ops.shape(self._buffer)[0]
            index = list_check(index, math_ops.maximum(length, index + 1), "modify")
            self._buffer = self._grown(index)
            checked = index
        else:   # a row stored in place (ops/row_store.py), O(1) where the compiler can
            self._buffer = set_row(self._buffer, self._checked_index(index, kind), t, name=name)
            return self
        rows = self._rows()
        hit = math_ops.equal(rows, checked)
        mask = array_ops.reshape(hit, [-1] + [1] * rank)
        self._buffer = math_ops.where(mask, array_ops.expand_dims(t, 0), self._buffer, name=name)
        return self

    def _stacked(self):
        if self._buffer is None:
            if not self._element_shape.is_fully_defined():
                raise InvalidArgumentError("TensorArray has not been written and its element shape is not fully "
                                           f"defined ({self._element_shape}).")
            self._buffer = self._empty(self._element_shape.as_list())
        return self._buffer

    def read(self, index, name=None):
        self._reads()
        return array_ops.gather(self._stacked(), self._checked_index(index, "access"), name=name)

    def stack(self, name=None):
        self._reads()
        return self._stacked()

    def gather(self, indices, name=None):
        self._reads()
        return array_ops.gather(self._stacked(), self._checked_index(indices, "gather"), name=name)

    def concat(self, name=None):
        self._reads()
        buf = self._stacked()
        dims = buf.shape.as_list()
        if len(dims) > 1 and dims[0] is not None and dims[1] is not None:
            return array_ops.reshape(buf, [dims[0] * dims[1]] + dims[2:], name=name)
        return array_ops.reshape(buf, [-1] + dims[2:], name=name)

    def unstack(self, value, name=None):
        self._reads()
        t = convert_to_tensor(value)
        if is_tensorlike(self._size) and t.shape.rank:
            # TF 2 (graph mode): the array becomes the value, its length the value's
            size = array_ops.shape(t)[0]
            buf = math_ops.cast(t, self._dtype) if t.dtype != self._dtype else t
            if not self._dynamic and self._size.op.type == "Const" and int(get_static_value(self._size)):
                # TF's list of the array's (build-time) size takes no other length: checked as it
                # runs (the slice's bound is evaluated on the host before a compiled run)
                size = list_check(size, self._size, "unstack")
                buf = array_ops.strided_slice_getitem(buf, (slice(None, size),))
            out = LoopTensorArray(self._dtype, size, self._element_shape, buf, self._infer_shape,
                                  self._dynamic, (array_ops.range_(size), buf))
            out._element_shape = out._element_shape.merge_with(TensorShape(t.shape.as_list()[1:]))
            return out
        if t.shape.rank is None or (not self._dynamic and t.shape.dims[0] != self._size):
            raise InvalidArgumentError(f"Tried to unstack a tensor of shape {t.shape} into a TensorArray of size "
                                       f"{self._size}")
        self._element_shape = self._element_shape.merge_with(TensorShape(t.shape.as_list()[1:]))
        self._buffer = math_ops.cast(t, self._dtype) if t.dtype != self._dtype else t
        return self

    def split(self, value, lengths, name=None):
        """TF's split (tensor_array_split.py) into this dense array: the blocks must have one
        shape known when the graph is built (equal lengths) to be its rows."""
        self._reads()
        blocks, shape = graph_blocks(self, value, lengths)
        if not blocks or not shape.is_fully_defined() or any(b.shape != shape for b in blocks):
            raise NotImplementedError("jitgrad's TensorArray carried as one tensor (in a staged loop, or of a size "
                                      "known only at run time) splits only into equal lengths known when the graph "
                                      "is built.")
        self._size, self._element_shape, self._row_ids = len(blocks), shape, None
        self._buffer = array_ops.stack(blocks, name=name)
        return self

    def _append(self, index, rows, scatter, name):
        """An append of ``rows`` (a static count) at ``index`` (a write's index, or a
        scatter's indices), while a loop body that may only append is traced: one
        concat per iteration, the growing-variable form (passes/growing_vars.py)."""
        note_change(self)    # (a tf.cond branch undoes its appends: cond_tensor_arrays.py)
        self._appends.writes.append((index, rows.shape.dims[0], scatter))
        buf = self._buffer
        if self._appends.concat is not None and buf is self._appends.concat:
            # a second append: the iteration's rows together, then one concat([x, rows]) (the form
            # growing_vars recognises)
            base, before = buf.op.inputs     # (ConcatV2: the axis is an attr)
            rows = array_ops.concat([before, rows], 0)
            buf = base
        self._buffer = self._appends.concat = array_ops.concat([buf, rows], 0, name=name)
        return self

    def scatter(self, indices, value, name=None):
        t = convert_to_tensor(value)
        idx = convert_to_tensor(indices)
        if (self._appends is not None and self._buffer is not None and t.shape.rank and
                t.shape.dims[0] is not None):
            return self._append(idx, self._convert_rows(t), True, name)
        self._reads()
        n_idx, n_val = idx.shape.dims[0] if idx.shape.rank == 1 else None, t.shape.dims[0] if t.shape.rank else None
        if n_idx is not None and n_val is not None and n_idx != n_val:
            raise ValueError(f"Expected len(indices) == tensor.shape[0], but saw: {n_idx} vs. {n_val}")
        if self._buffer is None and t.shape.rank and TensorShape(t.shape.as_list()[1:]).is_fully_defined():
            self._element_shape = TensorShape(t.shape.as_list()[1:])
            self._buffer = self._empty(self._element_shape.as_list())
        if self._dynamic or self._buffer is None or (n_idx is not None and n_idx == n_val):
            # one write each (a dynamic array grows; a first write learns the element shape)
            for i, p in zip(array_ops.unstack(idx), array_ops.unstack(t)):
                self._write(i, p, None, "scatter")
            return self
        return self._scatter_rows(idx, t, name)

    def _scatter_rows(self, idx, t, name):
        """A scatter whose index count is known only when the graph runs: TF checks it against
        the value's rows, and every index against the array's length, when it runs; a row
        written twice keeps the later value."""
        t = self._convert_rows(t)
        idx = math_ops.cast(idx, dtypes.int32)
        count = list_check(array_ops.shape(idx)[0], array_ops.shape(t)[0], "length")
        idx = list_check(idx, self._length(), "scatter")
        rows = self._rows()
        hits = math_ops.equal(array_ops.expand_dims(rows, 1), array_ops.expand_dims(idx, 0))
        # (positions 0, 1, ... as a cumsum: a range of the indices' run-time length would need
        # its value before a compiled run, which it cannot have when the indices are computed)
        order = array_ops.expand_dims(reduction_ops.cumsum(math_ops.ones_like(idx)) - 1, 0)
        # the last position writing each row (-1: none); its data dependence on ``count``
        # orders the length check before the gather that relies on it
        last = reduction_ops.reduce_max(math_ops.where(hits, order + math_ops.zeros_like(hits, dtypes.int32),
                                                       -math_ops.ones_like(hits, dtypes.int32)), axis=1)
        last = math_ops.minimum(last, count - 1)
        picked = array_ops.gather(t, math_ops.maximum(last, 0))
        rank = len(self._element_shape.as_list())
        mask = array_ops.reshape(math_ops.greater_equal(last, 0), [-1] + [1] * rank)
        self._buffer = math_ops.where(mask, picked, self._buffer, name=name)
        return self

    def _convert_rows(self, t):
        if t.dtype != self._dtype:
            raise InvalidArgumentError(f"TensorArray dtype is {self._dtype.name} but Op is trying to write "
                                       f"dtype {t.dtype.name}")
        if self._infer_shape:
            rows = TensorShape(t.shape.as_list()[1:]) if t.shape.rank else TensorShape(None)
            if not self._element_shape.is_compatible_with(rows):
                raise ValueError(f"Inconsistent shapes: saw {rows} but expected {self._element_shape}")
            self._element_shape = self._element_shape.merge_with(rows)
        return t

    def __repr__(self):
        return f"<TensorArray dtype={self._dtype.name} size={self._size} (staged)>"


class NotAppends(Exception):
    """A loop body's writes to a dynamic array are not appends (check_appends)."""


class _Appends:
    """What one traced iteration did to a dynamic array: the indices it wrote at and
    whether it read the array."""

    def __init__(self, array):
        self.array, self.read = array, False
        self.writes = []      # (index or indices, rows, whether a scatter), in order
        self.concat = None    # the concat the appends so far made


def watch_appends(state):
    """{slot: _Appends} for the dynamic arrays in ``state`` (a body's inputs): their
    writes are traced as appends from now on."""
    watches = {}
    for k, v in enumerate(state):
        if isinstance(v, LoopTensorArray) and v._dynamic and v._buffer is not None:
            v._appends = watches[k] = _Appends(v)
    return watches


def _static(x):
    v = array_ops.get_static_value(x) if is_tensorlike(x) else x
    return None if v is None else np.asarray(v)


def _entry_rows(buffer):
    """The rows a dynamic array's dense tensor enters the loop with, when known."""
    if buffer.op.type == "PlaceholderWithDefault":
        buffer = buffer.op.inputs[0]
    return None if buffer.shape.rank is None else buffer.shape.dims[0]


class NeedsEntryCheck(Exception):
    """check_appends proved a loop's writes in order given one fact about its entry values
    known only when it runs: ``index(counter) == rows`` at entry. The caller checks it
    there (entry_checked) and traces the loop again."""

    def __init__(self, checks):
        super().__init__("entry checks")
        self.checks = checks      # [(counter slot, array slot, a, b)]: a * counter + b == rows at entry


_PASS_THROUGH = ("Identity", "Cast", "StopGradient")


def _affine(t, p, depth=0):
    """(a, b) with ``t == a * p + b`` for the scalar int tensor ``t``, the placeholder ``p`` and
    static ints a, b; None when that cannot be shown from t's ops."""
    if t is p:
        return 1, 0
    v = _static(t)
    if v is not None:
        return (0, int(v)) if v.shape == () and v.dtype.kind in "iu" else None
    op = getattr(t, "op", None)
    if op is None or depth > 16:
        return None
    if op.type in _PASS_THROUGH or (op.type in ("Reshape", "ExpandDims", "Squeeze") and t.shape.num_elements() == 1):
        return _affine(op.inputs[0], p, depth + 1)
    if op.type in ("AddV2", "Add", "Sub", "Mul"):
        x, y = (_affine(u, p, depth + 1) for u in op.inputs[:2])
        if x is None or y is None:
            return None
        if op.type == "Mul":
            return (x[0] * y[1], x[1] * y[1]) if y[0] == 0 else (y[0] * x[1], y[1] * x[1]) if x[0] == 0 else None
        sign = -1 if op.type == "Sub" else 1
        return x[0] + sign * y[0], x[1] + sign * y[1]
    return None


def _affine_rows(index, rows, scatter, p):
    """(a, b) when ``index`` (a write's) or the indices (a scatter's) are ``a * p + b``,
    ``a * p + b + 1``, ... for ``rows`` rows; else None."""
    if not scatter:
        return _affine(index, p)
    op = getattr(index, "op", None)
    if op is not None and op.type == "Range":     # tf.range(start, start + rows)
        start, limit, delta = (_affine(u, p) for u in op.inputs)
        if start and limit and delta == (0, 1) and limit == (start[0], start[1] + rows):
            return start
        return None
    if op is not None and op.type == "Pack" and len(op.inputs) == rows:   # tf.stack([i, i + 1, ...])
        parts = [_affine(u, p) for u in op.inputs]
        if parts[0] and all(q == (parts[0][0], parts[0][1] + m) for m, q in enumerate(parts)):
            return parts[0]
        return None
    if rows == 1 and index.shape.num_elements() == 1:   # tf.reshape(i, [1]), tf.expand_dims(i, 0)
        return _affine(index, p)
    return None


def _in_order(w, placeholders, outs):
    """(counter slot, a, b) when every write of the iteration lands at the array's row count
    given ``a * counter + b == rows`` at entry: the writes are contiguous, and the counter
    steps (by a static s) so that a * s is the rows one iteration appends. Else None."""
    total = sum(n for _, n, _ in w.writes)
    for j, p in enumerate(placeholders):
        if not is_tensorlike(p) or p.dtype not in (dtypes.int32, dtypes.int64) or p.shape.rank != 0:
            continue
        step = _affine(outs[j], p) if is_tensorlike(outs[j]) else None
        if step is None or step[0] != 1:
            continue
        first = _affine_rows(*w.writes[0], p)
        if first is None or first[0] == 0 or first[0] * step[1] != total:
            continue
        offset, ok = first[1], True
        for index, n, scatter in w.writes:
            ok = ok and _affine_rows(index, n, scatter, p) == (first[0], offset)
            offset += n
        if ok:
            return j, first[0], first[1]
    return None


def check_appends(watches, state, init, placeholders, outs, entry_checked=()):
    """Raises NotAppends unless every watched array was only written (write / scatter of a
    static row count), not read, at indices affine in a loop counter that make the writes
    land at the array's row count in every iteration: in order, appends. That holds when
    it holds at entry; where the counter's or the array's entry value is known only at
    run time raises NeedsEntryCheck (unless the caller checks that slot: entry_checked)."""
    needed = []
    for k, w in watches.items():
        w.array._appends = None
        if w.read or not w.writes or state[k] is not w.array:
            raise NotAppends()
        found = _in_order(w, placeholders, outs)
        if found is None:
            raise NotAppends()
        j, a, b = found
        c0, rows = _static(init[j]), _entry_rows(init[k])
        if c0 is not None and rows is not None:
            if a * int(c0) + b != rows:
                raise NotAppends()
        elif (j, k) not in entry_checked:
            needed.append((j, k, a, b))
    if needed:
        raise NeedsEntryCheck(needed)


def entry_checked(counter, rows, a, b):
    """The counter's entry value, checked when the loop is entered: its first write lands at
    the array's ``rows`` (else the run fails: jitgrad carries the array as appends)."""
    counter = convert_to_tensor(counter)
    at = math_ops.cast(counter, dtypes.int32) * a + b
    ok = list_check(at, math_ops.cast(rows, dtypes.int32), "append")
    return counter + math_ops.cast(ok - at, counter.dtype)


def fed_size_array(dtype, size, dynamic_size=False, element_shape=None, infer_shape=True):
    """A graph-mode TensorArray of ``size`` rows, an int tensor known only at run time
    (tensor_array.TensorArray makes this one instead of its list of tensors)."""
    size = math_ops.cast(convert_to_tensor(size), dtypes.int32)
    if size.shape.rank != 0:
        raise ValueError(f"TensorArray size must be a scalar, got shape {size.shape}")
    shape = TensorShape(None) if element_shape is None else TensorShape(element_shape)
    out = LoopTensorArray(dtypes.as_dtype(dtype), size, shape, None, infer_shape, bool(dynamic_size))
    if shape.is_fully_defined():
        out._buffer = out._empty(shape.as_list())
    out._row_ids = (array_ops.range_(size), out._buffer)
    return out


def as_loop_tensor_array(ta):
    """A LoopTensorArray holding what ``ta`` holds (a fresh object each call)."""
    if isinstance(ta, LoopTensorArray):
        return ta._like(ta._buffer)
    n = len(ta._items)
    out = LoopTensorArray(ta.dtype, n, ta.element_shape, None, ta._infer_shape, ta.dynamic_size)
    if any(t is not None for t in ta._items) or (ta.element_shape.is_fully_defined() and n):
        out._buffer = array_ops.stack([ta._item(i) for i in range(n)]) if n else None
        if ta.dynamic_size and out._buffer is not None:
            out._buffer = array_ops.placeholder_with_default(out._buffer, [None] + out._buffer.shape.as_list()[1:])
    elif ta.dynamic_size and ta.element_shape.is_fully_defined():
        out._buffer = out._empty(ta.element_shape.as_list())
    return out


def with_tensor_arrays(body, get_state, set_state, dry, ragged_ok=False):
    """(get_state, set_state) for a staged loop whose state holds TensorArrays: each is
    carried as its dense tensor, and set back as a LoopTensorArray (so after the loop the
    user's variable is one). None when the state holds no TensorArray. With ``ragged_ok``
    an element shape only the dry run gave is a guess: a write in the loop of an element
    whose shape is known only as it runs raises NeedsRagged (tensor_array_ragged.py)."""
    init = tuple(get_state())
    slots = [k for k, v in enumerate(init) if isinstance(v, TensorArray)]
    if not slots:
        return None
    arrays = {k: as_loop_tensor_array(init[k]) for k in slots}
    for a in arrays.values():
        a._ragged_ok = ragged_ok

    def fresh():
        return tuple(arrays[k]._like(arrays[k]._buffer) if k in arrays else v for k, v in enumerate(init))

    if any(arrays[k]._buffer is None for k in slots):    # element shapes from one dry iteration
        set_state(fresh())

        def one_iteration():
            body()
            return tuple(get_state())
        try:
            first = dry(one_iteration)
        finally:
            set_state(init)
        for k in slots:
            if arrays[k]._buffer is None:
                seen = first[k]
                if not isinstance(seen, LoopTensorArray):
                    raise TypeError(f"A TensorArray carried by a staged loop became {type(seen).__name__}.")
                if seen._buffer is None:
                    raise ValueError("A TensorArray carried by a staged loop must be written in the loop (or "
                                     "have a fully defined element_shape).")
                guessed = ragged_ok and not arrays[k]._element_shape.is_fully_defined()
                arrays[k] = arrays[k]._like(None)
                arrays[k]._element_shape = seen._element_shape
                arrays[k]._shape_guessed = guessed
                arrays[k]._buffer = arrays[k]._empty(seen._element_shape.as_list())
    set_state(fresh())

    def get():
        vals = tuple(get_state())
        out = []
        for k, v in enumerate(vals):
            if k in arrays:
                if not isinstance(v, LoopTensorArray):
                    raise TypeError(f"A TensorArray carried by a staged loop became {type(v).__name__}.")
                v = v._stacked()
            out.append(v)
        return tuple(out)

    def wrap(vals):
        return tuple(arrays[k]._like(v) if k in arrays else v for k, v in enumerate(vals))

    return get, lambda vals: set_state(wrap(vals))
