"""``tf.TensorArray``: a list of same-dtype tensors, written and read by index.

A Python list of tensors, in eager mode and in graphs alike (TF's eager
TensorArray works the same way): ``write`` stores the tensor and returns the
array (use ``ta = ta.write(i, x)`` as in TF), ``stack``/``concat``/``gather``
build ops from the stored tensors, so gradients flow through them. Indices
must be known when the graph is built (Python ints, eager tensors or
constants); inside a tf.while_loop or a staged loop, where they are known only
at run time, the array is carried as one dense tensor instead
(autograph/staged_tensor_array.py). So is, from the start, a graph's array
whose size is known only at run time (``size=n`` fed, ``tf.shape(x)[0]``) or
that ``unstack``s a value of unknown length.
"""
import numpy as np

from . import context, dtypes, no_op
from .convert import is_tensorlike, convert_all, convert_to_tensor
from .errors import InvalidArgumentError, OutOfRangeError
from .shapes import TensorShape
from .tensor_array_split import dims_text, split
from .ops.array_ops import concat, constant, get_static_value, shape, stack, unstack, zeros


def _index(i, what):
    v = get_static_value(i) if is_tensorlike(i) else i
    if v is None:
        raise NotImplementedError(f"jitgrad's TensorArray needs the {what} index known when the graph is built.")
    v = np.asarray(v)
    if v.ndim != 0 or v.dtype.kind not in "iu":
        raise TypeError(f"TensorArray {what} index must be an integer scalar, got {i!r}")
    return int(v)


def _run_time_index(i):
    """Whether a graph's index (or indices) is known only when the graph runs."""
    return is_tensorlike(i) and not hasattr(i, "numpy") and get_static_value(i) is None


def _known_only_at_run_time(size):
    return size is not None and is_tensorlike(size) and not hasattr(size, "numpy") and get_static_value(size) is None


def _staged():
    from .autograph import staged_tensor_array   # (cycle: its LoopTensorArray subclasses TensorArray)
    return staged_tensor_array


def _dense_array(dtype, size, dynamic_size, element_shape, infer_shape):
    """A graph's TensorArray of ``size`` rows known only at run time: one dense tensor."""
    return _staged().fed_size_array(dtype, size, dynamic_size, element_shape, infer_shape)


def _check_same_shapes(values, written, element_shape, inner=False):
    """TF's error when the elements a stack / gather (or, ``inner``, a concat: all but
    their first dimension) reads differ in shape, raised when the graph is built (TF:
    when it runs) with TF's InvalidArgumentError and message. Eager: Pack's, over
    ``values`` (what is stacked, unwritten elements as their zeros); a graph: the
    TensorList kernel's merge of the ``written`` elements' shapes into the element shape."""
    if context.executing_eagerly():
        first = values[0].shape if values else None
        for j, t in enumerate(values):
            if t.shape.rank != first.rank or any(a is not None and b is not None and a != b
                                                  for a, b in zip(first.as_list(), t.shape.as_list())):
                raise InvalidArgumentError(f"Shapes of all inputs must match: values[0].shape = {dims_text(first)} "
                                           f"!= values[{j}].shape = {dims_text(t.shape)}")
        return
    merged = element_shape
    if inner and merged.rank is not None:
        merged = TensorShape(merged.as_list()[1:]) if merged.rank else TensorShape(None)
    for t in written:
        shape = t.shape
        if inner and shape.rank:
            shape = TensorShape(shape.as_list()[1:])
        if merged.rank is not None and shape.rank is not None and merged.rank != shape.rank:
            raise InvalidArgumentError(f"PartialTensorShape: Incompatible ranks during merge: {merged.rank} vs. "
                                       f"{shape.rank}")
        if not merged.is_compatible_with(shape):
            raise InvalidArgumentError(f"PartialTensorShape: Incompatible shapes during merge: {dims_text(merged)} "
                                       f"vs. {dims_text(shape)}")
        merged = merged.merge_with(shape)


class BranchChanges:
    """The TensorArrays a tf.cond branch changes, put back as they were when it has been
    traced (cond_tensor_arrays.py). jitgrad's arrays change in place (``write`` returns
    the array itself), but in TF a write makes a new array: what a branch writes must not
    be seen by the other branch, nor after the cond except through its outputs. Used as a
    context manager around the tracing; nested conds nest them."""

    def __init__(self):
        self.created = []     # arrays made while the branch was traced (nothing to put back)
        self.saved = {}       # id -> (array, its class and attributes before the branch changed it)
        # id -> (a loop body's watch of a dynamic array's appends (autograph/staged_tensor_array.py),
        # its writes and concat before the branch): the branch's appends are the cond's to merge
        self.watches = {}

    def __enter__(self):
        _BRANCHES.append(self)
        return self

    def __exit__(self, *exc):
        _BRANCHES.remove(self)
        for ta, (cls, attrs) in self.saved.values():
            object.__setattr__(ta, "__class__", cls)
            ta.__dict__.clear()
            ta.__dict__.update(attrs)
        for w, n, concat in self.watches.values():
            del w.writes[n:]
            w.concat = concat

    def note(self, ta):
        if id(ta) not in self.saved and not any(t is ta for t in self.created):
            self.saved[id(ta)] = (ta, (type(ta), ta.state()))
            w = ta.__dict__.get("_appends")
            if w is not None and id(w) not in self.watches:
                self.watches[id(w)] = (w, len(w.writes), w.concat)

    def appended(self, ta):
        """The appends this branch traced to ``ta``'s watch (none when not watched)."""
        w = ta.__dict__.get("_appends")
        at = self.watches.get(id(w))
        return [] if w is None or at is None else list(w.writes[at[1]:])


def note_change(ta):
    """``ta`` is about to change in place: the branches being traced note how it was."""
    for b in _BRANCHES:
        b.note(ta)


_BRANCHES = []   # the BranchChanges of the branches being traced, innermost last


class TensorArray:
    def __new__(cls, *args, **kwargs):
        ta = super().__new__(cls)
        for b in _BRANCHES:
            b.created.append(ta)
        return ta

    def __setattr__(self, name, value):
        note_change(self)
        object.__setattr__(self, name, value)

    def state(self):
        """This array's attributes (its list of elements copied: ``write`` changes it in place)."""
        attrs = dict(self.__dict__)
        if isinstance(attrs.get("_items"), list):
            attrs["_items"] = list(attrs["_items"])
        return attrs

    def snapshot(self):
        """A new array holding what this one holds now (later writes to either do not show in the other)."""
        out = TensorArray.__new__(type(self))    # (noted as made in the branches being traced)
        out.__dict__.update(self.state())
        return out

    def __init__(self, dtype, size=None, dynamic_size=None, clear_after_read=None, tensor_array_name=None,
                 handle=None, flow=None, infer_shape=True, element_shape=None, colocate_with_first_write_call=True,
                 name=None):
        if type(self) is TensorArray and _known_only_at_run_time(size):
            # a graph's array of a fed / computed size: one dense tensor (autograph/staged_tensor_array.py)
            dense = _dense_array(dtype, size, dynamic_size, element_shape, infer_shape)
            self.__class__ = type(dense)
            self.__dict__.update(dense.__dict__)
            return
        self._dtype = dtypes.as_dtype(dtype)
        self._size = 0 if size is None else _index(size, "size")
        self._dynamic = bool(dynamic_size)
        self._items = [None] * self._size
        self._element_shape = TensorShape(None) if element_shape is None else TensorShape(element_shape)
        self._infer_shape = infer_shape
        self._clear_after_read = True if clear_after_read is None else bool(clear_after_read)
        self._cleared = frozenset()   # eager: indices a read cleared

    @property
    def dtype(self):
        return self._dtype

    @property
    def element_shape(self):
        return self._element_shape

    @property
    def dynamic_size(self):
        return self._dynamic

    def size(self, name=None):
        return constant(len(self._items), dtype=dtypes.int32)

    def _convert(self, value):
        t = convert_to_tensor(value, dtype=self._dtype) if not is_tensorlike(value) else convert_all([value])[0]
        if t.dtype != self._dtype:
            raise InvalidArgumentError(f"TensorArray dtype is {self._dtype.name} but Op is trying to write "
                                       f"dtype {t.dtype.name}")
        if self._infer_shape:
            if not self._element_shape.is_compatible_with(t.shape):
                if context.executing_eagerly():    # (TF's eager array words it its own way)
                    raise ValueError(f"Incompatible shape for value ({t.shape}), expected ({self._element_shape})")
                raise ValueError(f"Inconsistent shapes: saw {t.shape} but expected {self._element_shape}")
            self._element_shape = self._element_shape.merge_with(t.shape)
        return t

    def _dense(self):
        """This array as one dense tensor from now on (autograph/staged_tensor_array.py), as
        a graph reaching it at an index known only at run time needs: TF checks such an
        index when it runs (InvalidArgumentError, TF's TensorList messages)."""
        dense = _staged().as_loop_tensor_array(self)
        self.__class__ = type(dense)
        self.__dict__.update(dense.__dict__)
        return self

    def write(self, index, value, name=None):
        note_change(self)    # (before the elements change in place)
        if _run_time_index(index):
            return self._dense().write(index, value, name=name)
        i = _index(index, "write")
        if i < 0:
            raise InvalidArgumentError(f"Tried to write to index {i} but array index must be non-negative")
        if i >= len(self._items):
            if not self._dynamic:
                raise OutOfRangeError(f"Tried to write to index {i} but array is not resizeable and size "
                                      f"is: {len(self._items)}")
            self._items += [None] * (i + 1 - len(self._items))
        self._items[i] = self._convert(value)
        return self

    def _item(self, i):
        t = self._items[i]
        if t is not None:
            return t
        shape = self._element_shape
        if context.executing_eagerly() and not shape.is_fully_defined():
            # TF's eager array makes an unwritten (or read and cleared) element zeros of its
            # element shape, which only writes set
            raise ValueError(f"Cannot convert a partially known TensorShape {shape} to a Tensor.")
        if not shape.is_fully_defined():   # (infer_shape=False: TF reads zeros shaped as the written ones)
            for w in self._items:
                if w is not None:
                    shape = shape.merge_with(w.shape) if shape.is_compatible_with(w.shape) else shape
            if shape.is_fully_defined():
                return zeros(shape.as_list(), self._dtype)
        if not self._element_shape.is_fully_defined():
            raise InvalidArgumentError(f"Could not read from TensorArray index {i}: it has not been written and "
                                       f"its element shape is not fully defined ({self._element_shape}).")
        return zeros(self._element_shape.as_list(), self._dtype)

    def read(self, index, name=None):
        if _run_time_index(index):
            return self._dense().read(index, name=name)
        i = self._read_index(index)
        if context.executing_eagerly() and self.__dict__.get("_clear_after_read", False):
            return self._read_and_clear(i)
        return self._item(i)

    def _read_index(self, index):
        i = _index(index, "read")
        if not 0 <= i < len(self._items):
            if context.executing_eagerly():     # TF's eager TensorArray: OutOfRangeError; a graph's: InvalidArgument
                raise OutOfRangeError(f"Reading from negative indices (index {i}) is not allowed." if i < 0 else
                                      f"Tried to read from index {i} but array size is: {len(self._items)}")
            raise InvalidArgumentError(f"Tried to read from index {i} but array size is: {len(self._items)}")
        return i

    def _read_and_clear(self, i):
        """TF's eager array with clear_after_read (the default): a read empties the element, so
        a later stack sees zeros there and a second read is an error; a graph's array (TF's
        TensorList) ignores clear_after_read."""
        if self._items[i] is None and i in self._cleared:
            raise InvalidArgumentError(f"Could not read index {i} twice because it was cleared after a previous "
                                       "read (perhaps try setting clear_after_read = false?)")
        t = self._item(i)
        note_change(self)    # (before the elements change in place)
        self._items[i] = None
        self._cleared = self._cleared | {i}
        return t

    def stack(self, name=None):
        if not self._items:
            if not self._element_shape.is_fully_defined() and context.executing_eagerly():
                return zeros([0], self._dtype)      # TF 2's eager array: a plain empty tensor
            if not self._element_shape.is_fully_defined():
                raise InvalidArgumentError("TensorArray has size zero, but element shape is not fully defined. "
                                           "Cannot stack an empty TensorArray with an unknown element shape.")
            return zeros([0] + self._element_shape.as_list(), self._dtype)
        values = [self._item(i) for i in range(len(self._items))]
        _check_same_shapes(values, [t for t in self._items if t is not None], self._element_shape)
        return stack(values, name=name or "stack")

    def gather(self, indices, name=None):
        if _run_time_index(indices):
            return self._dense().gather(indices, name=name)
        idx = [_index(i, "gather") for i in (indices.numpy() if hasattr(indices, "numpy") else indices)]
        values = [self._item(self._read_index(i)) for i in idx]   # (TF's eager gather does not clear)
        _check_same_shapes(values, [self._items[i] for i in idx if self._items[i] is not None], self._element_shape)
        return stack(values, name=name or "gather")

    def concat(self, name=None):
        values = [self._item(i) for i in range(len(self._items))]
        if not context.executing_eagerly():   # (eager: ConcatV2's own error, as TF's eager array)
            _check_same_shapes(values, [t for t in self._items if t is not None], self._element_shape, inner=True)
        return concat(values, 0, name=name or "concat")

    def unstack(self, value, name=None):
        (t,) = convert_all([value])
        if t.shape.rank and t.shape.dims[0] is None:   # a graph value of unknown length: a dense array
            out = _dense_array(self._dtype, constant(self._size, dtype=dtypes.int32), self._dynamic,
                               self._element_shape, self._infer_shape)
            return out.unstack(t, name=name)
        parts = unstack(t)
        if not self._dynamic and self._size and len(parts) > self._size:
            if context.executing_eagerly():   # TF's eager TensorArray checks in Python
                raise ValueError(f"Cannot unstack {len(parts)} tensors into a TensorArray of static size "
                                 f"{self._size} ")
            raise InvalidArgumentError(f"Tried to unstack {len(parts)} elements into a TensorArray of size "
                                       f"{self._size}")
        # TF's eager array becomes the rows unstacked (fewer rows: a smaller array)
        keep = 0 if self._dynamic or context.executing_eagerly() else self._size
        self._items = [None] * max(len(parts), keep)
        shape = self._element_shape
        for i, p in enumerate(parts):
            self._items[i] = self._convert(p)
        if context.executing_eagerly():
            self._element_shape = shape     # (TF's eager unstack leaves the element shape as it was)
        return self

    def scatter(self, indices, value, name=None):
        (t,) = convert_all([value])
        if _run_time_index(indices) or (t.shape.rank and t.shape.dims[0] is None):
            return self._dense().scatter(indices, t, name=name)
        idx = [_index(i, "scatter") for i in (indices.numpy() if hasattr(indices, "numpy") else indices)]
        for i, p in zip(idx, unstack(t)):
            self.write(i, p)
        return self

    def split(self, value, lengths, name=None):
        return split(self, value, lengths)

    def close(self, name=None):
        return no_op(name=name)

    def identity(self):
        """``TensorArray.identity``: an array with the same contents and properties (eager:
        this array itself, as TF's eager array returns its parent)."""
        return self if context.executing_eagerly() else self.snapshot()

    def __repr__(self):
        return f"<TensorArray dtype={self._dtype.name} size={len(self._items)}>"
