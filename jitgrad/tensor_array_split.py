"""``TensorArray.split(value, lengths)``: the row blocks of ``value`` (``lengths[k]`` rows
each) become the array's elements, as TF 2.21 does it.

Eager (TF's _EagerTensorArray): the lengths are checked against the value at once (its
messages), the array keeps its element shape, and a fixed-size array must have one element
per length. A graph (TF's TensorListSplit; also inside jitgrad.function): the array becomes
a list of ``len(lengths)`` elements whatever its size, an element shape that cannot hold the
blocks is a ValueError when the graph is built, and the lengths are checked against the
value's rows when the graph runs (ops/list_ops.split_offsets). The blocks are slices of
``value``, so gradients flow through them; their bounds, when not known at build time, are
computed on the host before a compiled run (a shape source), so the run compiles."""
import numpy as np

from . import context, dtypes
from .convert import convert_to_tensor, is_tensorlike
from .errors import InvalidArgumentError
from .ops import array_ops, math_ops
from .ops.list_ops import split_offsets
from .ops.registry import apply_op
from .shapes import TensorShape


def _static(t):
    v = array_ops.get_static_value(t) if is_tensorlike(t) and not hasattr(t, "numpy") else t
    if hasattr(v, "numpy"):
        v = v.numpy()
    return None if v is None else np.asarray(v)


def _value(ta, value):
    if not is_tensorlike(value):
        value = convert_to_tensor(value, dtype=ta.dtype)
    if value.dtype != ta.dtype:
        raise InvalidArgumentError(f"TensorArray dtype is {ta.dtype.name} but Op is trying to write dtype "
                                   f"{value.dtype.name}")
    return value


def eager_blocks(ta, value, lengths, size):
    """The blocks of an eager split into an array of ``size`` elements (TF's checks)."""
    value = _value(ta, value)
    lens = _static(lengths)
    if lens.ndim != 1:
        raise InvalidArgumentError(f"Expected lengths to be a vector, received shape: {list(lens.shape)} ")
    if value.shape.rank == 0:
        raise InvalidArgumentError("Expected value to be at least a vector, but received shape: [] ")
    rows = value.shape.as_list()[0]
    if int(lens.sum()) != rows:
        raise InvalidArgumentError(f"Expected sum of lengths to be equal to values.shape[0], but sum of lengths "
                                   f"is {int(lens.sum())} and value's shape is: {value.shape.as_list()} ")
    if not ta.dynamic_size and len(lens) != size:
        raise InvalidArgumentError(f"TensorArray's size is not equal to the size of lengths ({size} vs. "
                                   f"{len(lens)}), and the TensorArray is not marked as dynamically resizeable.")
    return list(array_ops.split(value, [int(v) for v in lens]))   # (a negative length: SplitV's error)


def dims_text(shape):
    """A shape as TF's C++ messages print it: [3,?,2]."""
    return "[" + ",".join("?" if d is None else str(d) for d in shape.as_list()) + "]"


def _check_blocks_fit(value_shape, element_shape):
    """TensorListSplit's shape function: the value's rows against the element shape (all
    but its first dimension), TF's ValueError."""
    if value_shape.rank is None or element_shape.rank is None:
        return
    rows = TensorShape([None] + value_shape.as_list()[1:])
    if rows.rank != element_shape.rank:
        raise ValueError(f"Shapes must be equal rank, but are {rows.rank} and {element_shape.rank} for "
                         f"'TensorListSplit'")
    for i, (a, b) in enumerate(zip(rows.as_list(), element_shape.as_list())):
        if i and a is not None and b is not None and a != b:
            raise ValueError(f"Dimension {i} in both shapes must be equal, but are {a} and {b}. Shapes are "
                             f"{dims_text(rows)} and {dims_text(element_shape)}. for 'TensorListSplit'")


def graph_blocks(ta, value, lengths):
    """The blocks of a graph split, and the element shape the array has after it."""
    value = _value(ta, value)
    if value.shape.rank == 0:
        raise ValueError("Shape must be at least rank 1 but is rank 0 for 'TensorListSplit'")
    lens = _static(lengths)
    if lens is None:
        lengths = math_ops.cast(convert_to_tensor(lengths), dtypes.int32)
        if lengths.shape.rank is not None and lengths.shape.rank != 1:
            raise ValueError(f"Shape must be rank 1 but is rank {lengths.shape.rank} for 'TensorListSplit'")
        if lengths.shape.rank is None or lengths.shape.dims[0] is None:
            raise NotImplementedError("jitgrad's TensorArray.split needs the number of lengths known when the "
                                      "graph is built.")
        n = lengths.shape.dims[0]
    elif lens.ndim != 1:
        raise ValueError(f"Shape must be rank 1 but is rank {lens.ndim} for 'TensorListSplit'")
    else:
        n = len(lens)
    inner = TensorShape(value.shape.as_list()[1:]) if value.shape.rank is not None else TensorShape(None)
    shape = ta.element_shape
    if lens is not None and n and lens.min() == lens.max():
        # TF (Python, first): equal lengths known when the graph is built give the element shape
        seen = TensorShape(None if inner.rank is None else [int(lens[0])] + inner.as_list())
        if not seen.is_compatible_with(shape):
            raise ValueError(f"Inconsistent shapes: saw {seen} but expected {shape} ")
        if ta._infer_shape:
            shape = shape.merge_with(seen)
    _check_blocks_fit(value.shape, ta.element_shape)
    rows = value.shape.dims[0] if value.shape.rank is not None else None
    if lens is not None and rows is not None and (lens >= 0).all() and int(lens.sum()) == rows:
        bounds = np.cumsum([0] + [int(v) for v in lens])      # all known and valid: static slices
        return [value[int(bounds[k]):int(bounds[k + 1])] for k in range(n)], shape
    offsets = apply_op("TensorListSplitOffsets", [array_ops.shape(value)[0], math_ops.cast(
        convert_to_tensor(lengths), dtypes.int32)], {}, name="TensorArraySplit")
    blocks = []
    for k in range(n):
        block = value[offsets[k]:offsets[k + 1]]
        if lens is not None and lens[k] >= 0:
            block.set_shape([int(lens[k])] + block.shape.as_list()[1:])
        blocks.append(block)
    return blocks, shape


def split(ta, value, lengths):
    """``ta`` (a list-backed TensorArray) after TF's split."""
    if context.executing_eagerly():
        ta._items = eager_blocks(ta, value, lengths, len(ta._items))
    else:
        ta._items, ta._element_shape = graph_blocks(ta, value, lengths)
    return ta
