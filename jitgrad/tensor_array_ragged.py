"""A graph TensorArray whose elements differ in their first dimension, carried through a
tf.while_loop (``element_shape=[None]`` or ``infer_shape=False``, then ``concat()``: TF's
TensorList holds any shapes).

jitgrad carries a loop's TensorArray as one dense ``[size, *element]`` tensor
(autograph/staged_tensor_array.py), its element shape learned from a dry run of the first
iteration. When the body writes an element whose shape is known only as it runs while the
element shape was only guessed (the dry run's), the elements may differ between
iterations: control_flow traces the loop again with every array carried as
``(values, lengths)`` instead -- the elements concatenated along their first dimension
and each one's row count, as TF's TensorListConcat / TensorListSplit see them:

- ``write(i, v)``: ``values[:start] ++ v ++ values[end:]`` with ``start, end`` the bounds of
  element i (any order, rewrites included), ``lengths[i] = rows(v)``;
- ``read(i)``: ``values[start:end]``; ``concat()``: ``values``; ``stack()`` / ``gather``:
  ``values`` as ``[size, rows, ...]``, checked when it runs that every element has those rows.

Every step is a concat, slice or reshape, so gradients flow through them. The values
change shape between iterations, so such a loop runs in the reference interpreter (the
compiler reports it and falls back): correct numbers first.
"""
from . import context, dtypes, nest
from .assert_ops import Assert
from .convert import convert_to_tensor, is_tensorlike
from .errors import InvalidArgumentError
from .ops import array_ops, math_ops, reduction_ops
from .ops.list_ops import list_check
from .shapes import TensorShape
from .tensor_array import TensorArray


class NeedsRagged(Exception):
    """A loop body wrote a TensorArray element whose shape is known only at run time while the
    array's element shape was only guessed: the loop is traced again (tensor_array_ragged)."""


class RaggedTensorArray(TensorArray):
    """A TensorArray of ``size`` elements held as ``values`` (them concatenated along their
    first dimension) and ``lengths`` (int32 ``[size]``, each one's rows)."""

    def __init__(self, dtype, size, element_shape, values, lengths, dynamic=False):
        self._dtype, self._size, self._dynamic = dtype, size, dynamic
        self._element_shape = element_shape
        self._infer_shape = False
        self._values, self._lengths = values, lengths

    @classmethod
    def of(cls, ta, inner):
        """The ragged form of the list-backed array ``ta`` (elements of ``inner`` trailing dims):
        an element not written has no rows."""
        n = len(ta._items)
        parts = [t for t in ta._items if t is not None]
        lengths = [array_ops.shape(t)[0] if t is not None else 0 for t in ta._items]
        values = array_ops.concat(parts, 0) if parts else array_ops.zeros([0] + inner, ta.dtype)
        lengths = array_ops.stack([math_ops.cast(x, dtypes.int32) for x in lengths]) if n else \
            array_ops.zeros([0], dtypes.int32)
        shape = TensorShape([None] + inner)
        return cls(ta.dtype, n, shape, values, lengths, ta.dynamic_size)

    def carried(self):
        return (self._values, self._lengths)

    def like(self, carried):
        values, lengths = carried
        return RaggedTensorArray(self._dtype, self._size, self._element_shape, values, lengths, self._dynamic)

    def invariants(self):
        return (TensorShape([None] + self._element_shape.as_list()[1:]), TensorShape([None]))

    def size(self, name=None):
        return array_ops.shape(self._lengths, name=name)[0]

    def _bounds(self, index, kind):
        """(i, start, end) of element ``index`` (checked against the size as TF's TensorList does)."""
        i = list_check(math_ops.cast(index, dtypes.int32), self.size(), kind)
        rows = array_ops.range_(self.size())
        start = reduction_ops.reduce_sum(math_ops.where(math_ops.less(rows, i), self._lengths,
                                                        array_ops.zeros_like(self._lengths)))
        return i, start, start + array_ops.gather(self._lengths, i)

    def _cast(self, value):
        t = convert_to_tensor(value) if is_tensorlike(value) else convert_to_tensor(value, dtype=self._dtype)
        if t.dtype != self._dtype:
            raise InvalidArgumentError(f"TensorArray dtype is {self._dtype.name} but Op is trying to write "
                                       f"dtype {t.dtype.name}")
        if t.shape.rank == 0:
            raise NotImplementedError("jitgrad's TensorArray of elements of different shapes in a tf.while_loop "
                                      "holds elements of at least one dimension.")
        return t

    def write(self, index, value, name=None):
        t = self._cast(value)
        lengths = self._lengths
        if self._dynamic:   # a write past the end grows the array by elements of no rows
            n = self.size()
            index = list_check(math_ops.cast(index, dtypes.int32), math_ops.maximum(n, index + 1), "modify")
            pad = array_ops.zeros(array_ops.reshape(math_ops.maximum(index + 1 - n, 0), [1]), dtypes.int32)
            lengths = array_ops.concat([lengths, pad], 0)
        grown = RaggedTensorArray(self._dtype, self._size, self._element_shape, self._values, lengths,
                                  self._dynamic)
        i, start, end = grown._bounds(index, "modify")
        before = self._rows(array_ops.zeros([], dtypes.int32), start)
        after = self._rows(end, array_ops.shape(self._values)[0])
        values = array_ops.concat([before, t, after], 0, name=name or "concat")
        at = math_ops.equal(array_ops.range_(grown.size()), i)
        lengths = math_ops.where(at, array_ops.shape(t)[0] + array_ops.zeros_like(lengths), lengths)
        return RaggedTensorArray(self._dtype, self._size, self._element_shape, values, lengths, self._dynamic)

    def _rows(self, begin, end):
        """values[begin:end] (int32 scalars known as the graph runs)."""
        return array_ops.strided_slice_getitem(self._values, (slice(begin, end),))

    def read(self, index, name=None):
        _, start, end = self._bounds(index, "access")
        return self._rows(start, end)

    def concat(self, name=None):
        return array_ops.identity(self._values, name=name or "concat")

    def stack(self, name=None):
        """The elements as ``[size, rows, ...]``: every element must have the first one's rows
        (TF's TensorListStack fails the run otherwise)."""
        n = self.size()
        rows = array_ops.gather(array_ops.concat([self._lengths, array_ops.zeros([1], dtypes.int32)], 0), 0)
        same = Assert(reduction_ops.reduce_all(math_ops.equal(self._lengths, rows)),
                      ["PartialTensorShape: Incompatible shapes during merge: the elements' rows", self._lengths])
        with context.get_default_graph().control_dependencies([same]):
            values = array_ops.identity(self._values)
        inner = array_ops.shape(self._values)[1:]
        return array_ops.reshape(values, array_ops.concat([array_ops.stack([n, rows]), inner], 0),
                                 name=name or "stack")

    def gather(self, indices, name=None):
        return array_ops.gather(self.stack(), list_check(math_ops.cast(indices, dtypes.int32), self.size(), "gather"),
                                name=name)

    def unstack(self, value, name=None):
        raise NotImplementedError("jitgrad's TensorArray of elements of different shapes in a tf.while_loop "
                                  "is written by write().")

    def scatter(self, indices, value, name=None):
        raise NotImplementedError("jitgrad's TensorArray of elements of different shapes in a tf.while_loop "
                                  "is written by write().")

    def split(self, value, lengths, name=None):
        raise NotImplementedError("jitgrad's TensorArray of elements of different shapes in a tf.while_loop "
                                  "is written by write().")

    def identity(self):
        return self.like(self.carried())

    def snapshot(self):
        return self.identity()

    def state(self):
        return dict(self.__dict__)

    def __repr__(self):
        return f"<TensorArray dtype={self._dtype.name} size={self._size} (ragged)>"


def _inner_dims(ta, written):
    """The trailing dims of ``ta``'s elements: its element shape's, else the written value's."""
    for shape in (ta.element_shape, written):
        if shape is not None and shape.rank:
            return shape.as_list()[1:]
    raise NotImplementedError("jitgrad's TensorArray of elements of different shapes in a tf.while_loop needs "
                              "the elements' rank (element_shape=[None, ...]).")


def _ragged(ta, written):
    if isinstance(ta, RaggedTensorArray):
        return ta
    if type(ta) is not TensorArray:   # (a dense one: its rows, each of the same shape)
        buf = ta._stacked()
        dims = buf.shape.as_list()
        values = array_ops.reshape(buf, [-1] + dims[2:])
        rows = array_ops.shape(buf)[1] if len(dims) > 1 else None
        if rows is None:
            raise NotImplementedError("jitgrad's TensorArray of elements of different shapes in a tf.while_loop "
                                      "holds elements of at least one dimension.")
        lengths = rows + array_ops.zeros(array_ops.shape(buf)[:1], dtypes.int32)
        return RaggedTensorArray(ta.dtype, ta._size, TensorShape([None] + dims[2:]), values, lengths)
    return RaggedTensorArray.of(ta, _inner_dims(ta, written))


def while_loop_ragged(while_loop, cond, body, loop_vars, shape_invariants, parallel_iterations, back_prop,
                      maximum_iterations, name, written):
    """tf.while_loop with its TensorArrays carried as (values, lengths); ``written``: the shape
    of the element whose write asked for it (NeedsRagged)."""
    single = not isinstance(loop_vars, (list, tuple))
    packed = [loop_vars] if single else loop_vars
    flat = list(nest.flatten(packed))
    arrays = {k: _ragged(v, written) for k, v in enumerate(flat) if isinstance(v, TensorArray)}
    if shape_invariants is None:
        user = [None] * len(flat)
    else:
        user = nest.flatten_up_to(packed, [shape_invariants] if single else shape_invariants, check_types=False)
    carried, inv = [], []
    for k, v in enumerate(flat):
        if k in arrays:
            carried.append(arrays[k].carried())
            inv.append(arrays[k].invariants())
        else:
            t = convert_to_tensor(v)
            carried.append(t)
            inv.append(t.shape if user[k] is None else TensorShape(user[k]))

    def wrapped(vals):
        vals = [arrays[k].like(v) if k in arrays else v for k, v in enumerate(vals)]
        return nest.pack_sequence_as(packed, vals)

    def ragged_cond(*vals):
        return cond(*wrapped(vals))

    def ragged_body(*vals):
        out = body(*wrapped(vals))
        out = [out] if single or (len(packed) == 1 and not nest.is_nested(out)) else out
        out = list(nest.flatten(out))
        res = []
        for k, v in enumerate(out):
            if k in arrays:
                if not isinstance(v, RaggedTensorArray):
                    raise TypeError(f"A TensorArray loop variable became {type(v).__name__} in the loop body.")
                v = v.carried()
            res.append(v)
        return res

    out = while_loop(ragged_cond, ragged_body, carried, inv, parallel_iterations, back_prop,
                     maximum_iterations=maximum_iterations, name=name)
    result = wrapped(out)
    return result[0] if single else nest.pack_sequence_as(loop_vars, nest.flatten(result))
