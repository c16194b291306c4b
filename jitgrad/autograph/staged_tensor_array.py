"""``tf.TensorArray`` as the state of a staged (tf.while_loop) AutoGraph loop.

jitgrad's TensorArray is a Python list of tensors indexed by Python ints; a loop
staged into a tf.while_loop writes it at an index known only at run time (the
tf.function guide's ``for i in tf.range(n): ta = ta.write(i, x)``). For such a loop
the array is carried as one dense loop tensor of shape ``[size, *element_shape]``:
``write`` replaces row ``i`` (a select against ``range(size) == i``; an index out of
range fails at run time, as TF's does), ``read``/``gather`` are gathers, ``stack`` is
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
from ..ops import array_ops, math_ops
from ..shapes import TensorShape
from ..tensor_array import TensorArray


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

    def _like(self, buffer):
        return LoopTensorArray(self._dtype, self._size, self._element_shape, buffer, self._infer_shape,
                               self._dynamic, self._row_ids)

    def size(self, name=None):
        self._reads()
        if self._dynamic:
            return array_ops.shape(self._stacked(), name=name)[0]
        if is_tensorlike(self._size):
            return array_ops.identity(self._size, name=name)
        return array_ops.constant(self._size, dtype=dtypes.int32)

    def _rows(self):
        ids = self._row_ids
        if ids is not None and (not self._dynamic or ids[1] is self._buffer):   # (a dynamic one: not grown since)
            return ids[0]
        return array_ops.range_(self.size()) if self._dynamic else array_ops.range_(self._size)

    def _checked_index(self, index, rows=None):
        """``index`` as an int32 tensor that makes the run fail when it is out of ``rows``
        (a range; the array's rows by default)."""
        return array_ops.gather(self._rows() if rows is None else rows, math_ops.cast(index, dtypes.int32))

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
        t = self._convert(value)
        if self._appends is not None and self._buffer is not None:
            # index == rows (check_appends verifies it once the body is traced): an append
            self._appends.indices.append(index)
            self._buffer = array_ops.concat([self._buffer, array_ops.expand_dims(t, 0)], 0, name=name)
            return self
        if self._buffer is None:
            if not t.shape.is_fully_defined():
                raise ValueError(f"A TensorArray written in a staged loop needs elements of a known shape, got "
                                 f"{t.shape}.")
            self._element_shape = TensorShape(t.shape.as_list())
            self._buffer = self._empty(t.shape.as_list())
        rank = len(self._element_shape.as_list())
        if self._dynamic:
            self._buffer = self._grown(index)
        rows = self._rows()
        hit = math_ops.equal(rows, self._checked_index(index, rows))
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
        return array_ops.gather(self._stacked(), self._checked_index(index), name=name)

    def stack(self, name=None):
        self._reads()
        return self._stacked()

    def gather(self, indices, name=None):
        self._reads()
        return array_ops.gather(self._stacked(), indices, name=name)

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

    def scatter(self, indices, value, name=None):
        self._reads()
        parts = array_ops.unstack(convert_to_tensor(value))
        if is_tensorlike(indices):   # (a tensor of indices: one write each, its length known when built)
            indices = array_ops.unstack(convert_to_tensor(indices))
        for i, p in zip(indices, parts):
            self.write(i, p)
        return self

    def __repr__(self):
        return f"<TensorArray dtype={self._dtype.name} size={self._size} (staged)>"


class NotAppends(Exception):
    """A loop body's writes to a dynamic array are not appends (check_appends)."""


class _Appends:
    """What one traced iteration did to a dynamic array: the indices it wrote at and
    whether it read the array."""

    def __init__(self, array):
        self.array, self.indices, self.read = array, [], False


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


def _counts_up_from(j, init, placeholders, outs, start):
    """Whether loop variable j enters as ``start`` and the body returns it plus one."""
    v0 = _static(init[j])
    if v0 is None or v0.shape != () or v0.dtype.kind not in "iu" or int(v0) != start:
        return False
    o = outs[j]
    if not is_tensorlike(o) or getattr(o, "op", None) is None or o.op.type not in ("AddV2", "Add"):
        return False
    a, b = o.op.inputs
    one = b if a is placeholders[j] else a if b is placeholders[j] else None
    step = None if one is None else _static(one)
    return step is not None and step.shape == () and int(step) == 1


def check_appends(watches, state, init, placeholders, outs):
    """Raises NotAppends unless every watched array was written exactly once, not read,
    at a loop counter that entered as the array's size and steps by one (so the index
    is the array's row count in every iteration: the write is an append)."""
    for k, w in watches.items():
        w.array._appends = None
        if w.read or len(w.indices) != 1 or state[k] is not w.array:
            raise NotAppends()
        j = next((j for j, p in enumerate(placeholders) if p is w.indices[0]), None)
        rows = _entry_rows(init[k])
        if j is None or rows is None or not _counts_up_from(j, init, placeholders, outs, rows):
            raise NotAppends()


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


def with_tensor_arrays(body, get_state, set_state, dry):
    """(get_state, set_state) for a staged loop whose state holds TensorArrays: each is
    carried as its dense tensor, and set back as a LoopTensorArray (so after the loop the
    user's variable is one). None when the state holds no TensorArray."""
    init = tuple(get_state())
    slots = [k for k, v in enumerate(init) if isinstance(v, TensorArray)]
    if not slots:
        return None
    arrays = {k: as_loop_tensor_array(init[k]) for k in slots}

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
                arrays[k] = arrays[k]._like(None)
                arrays[k]._element_shape = seen._element_shape
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
