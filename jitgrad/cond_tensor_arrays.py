"""TensorArrays through a graph ``tf.cond``: written in a branch, returned, read after.

TF 2's cond_v2 flattens a TensorArray to its TensorList (one variant tensor) and
packs the If's output back into a TensorArray. jitgrad does the same with the
array's dense form ``[size, *element_shape]``: each branch's returned array is
stacked in that branch (elements it did not write are zeros, as TF's unwritten
elements read), the If returns the dense tensor, and the cond's result is an array
over it -- a list of its rows for a list array (so later writes and reads at Python
indices stay what they were), a dense array (autograph/staged_tensor_array.py) for
one carried dense (inside a tf.while_loop body, or of a run-time size). The If is
an ordinary one, so it compiles and differentiates like any other.

Because jitgrad's arrays change in place, each branch is traced under
tensor_array.BranchChanges: what the branch writes to an array made outside it is
undone once it has been traced (TF's writes make new arrays), and what it returns
is a snapshot of the array at the branch's end.
"""
import numpy as np

from . import nest
from .errors import InvalidArgumentError
from .func_graph import as_output
from .ops import array_ops
from .shapes import TensorShape
from .tensor_array import BranchChanges, TensorArray

COND_MISMATCH = ("true_fn and false_fn arguments to tf.cond must have the same number, type, and overall "
             "structure of return values.")


def traced_branch(fn):
    """``fn()``, traced with its changes to outer TensorArrays undone; returned arrays are snapshots."""
    with BranchChanges() as changes:
        result = fn()
        if result is None:
            return None
        flat = [_snapshot(x, changes) if isinstance(x, TensorArray) else x for x in nest.flatten(result)]
        return nest.pack_sequence_as(result, flat)


def _snapshot(ta, changes):
    out = ta.snapshot()
    writes = changes.appended(ta)
    if writes:
        out._branch_writes = writes
    return out


def _dense_form(ta):
    return hasattr(ta, "_buffer")     # (a LoopTensorArray: autograph/staged_tensor_array.py)


def _written_shape(ta):
    """The element shape the array's written elements (or its declared shape) give."""
    shape = ta.element_shape
    if _dense_form(ta):
        buf = ta._buffer
        return shape if buf is None else shape.merge_with(TensorShape(buf.shape.as_list()[1:]))
    for t in ta._items:
        if t is not None and shape.is_compatible_with(t.shape):
            shape = shape.merge_with(t.shape)
    return shape


def _stacked(fg, ta, shape):
    """The array's dense tensor in the branch graph ``fg``."""
    with fg.as_default():
        if _dense_form(ta):
            if ta._buffer is None:
                ta._element_shape = shape
            return as_output(fg, ta._stacked())    # (not stack(): no read of a watched array)
        dims = shape.as_list()
        items = [array_ops.zeros(dims, ta.dtype) if t is None else as_output(fg, t) for t in ta._items]
        if not items:
            return array_ops.zeros([0] + dims, ta.dtype)
        for t in items:
            if not TensorShape(dims).is_compatible_with(t.shape):
                raise InvalidArgumentError(f"Shapes of all inputs must match: values[0].shape = {dims} != "
                                           f"{t.shape.as_list()}")
        return array_ops.stack(items)


def branch_outputs(fg_t, flat_t, fg_f, flat_f):
    """(leaves of the true branch, of the false branch, rebuild): TensorArray leaves as
    their dense tensors in their branch graphs; ``rebuild(outs)`` makes the If's outputs
    at those leaves TensorArrays again."""
    arrays, same = {}, {}
    flat_t, flat_f = list(flat_t), list(flat_f)
    for k, (a, b) in enumerate(zip(flat_t, flat_f)):
        if not isinstance(a, TensorArray) and not isinstance(b, TensorArray):
            continue
        if isinstance(a, TensorArray) and _unchanged(a, b):
            same[k] = a     # (neither branch wrote it: no If output, whatever its element shape)
            continue
        if not (isinstance(a, TensorArray) and isinstance(b, TensorArray)):
            raise TypeError(f"{COND_MISMATCH} One returns a TensorArray where the other returns "
                            f"{type(b if isinstance(a, TensorArray) else a).__name__}.")
        if a.dtype != b.dtype:
            raise TypeError(f"{COND_MISMATCH} true_fn returns a TensorArray of {a.dtype.name} where false_fn returns "
                            f"one of {b.dtype.name}.")
        sa, sb = _written_shape(a), _written_shape(b)
        if not sa.is_compatible_with(sb):
            raise ValueError(f"{COND_MISMATCH} true_fn returns a TensorArray of elements {sa} where false_fn returns "
                             f"one of {sb}.")
        shape = sa.merge_with(sb)
        if not shape.is_fully_defined():
            raise ValueError("A TensorArray returned by tf.cond needs an element shape known when the graph is built "
                             f"(written in a branch, or given as element_shape), got {shape}.")
        flat_t[k], flat_f[k] = _stacked(fg_t, a, shape), _stacked(fg_f, b, shape)
        arrays[k] = (a, b, shape)

    def rebuild(outs):
        outs = iter(outs)
        res = [same[k].snapshot() if k in same else next(outs) for k in range(len(flat_t))]
        for k, (a, b, shape) in arrays.items():
            res[k] = _result(a, b, shape, res[k])
        return res
    keep = [k for k in range(len(flat_t)) if k not in same]
    return [flat_t[k] for k in keep], [flat_f[k] for k in keep], rebuild


def _unchanged(a, b):
    """Whether ``b`` is the same array as ``a`` holding the same elements (both branches
    returned an array they did not write)."""
    if type(a) is not type(b) or a.__dict__.keys() != b.__dict__.keys():
        return False
    for key, x in a.__dict__.items():
        y = b.__dict__[key]
        if key == "_items":
            if len(x) != len(y) or any(u is not v for u, v in zip(x, y)):
                return False
        elif key == "_element_shape":
            if x.as_list() != y.as_list() if x.rank is not None and y.rank is not None else x.rank != y.rank:
                return False
        elif x is not y and not (isinstance(x, (bool, int)) and x == y):
            return False
    return True


def _same_size(a, b):
    return a._size is b._size or isinstance(a._size, int) and isinstance(b._size, int) and a._size == b._size


def _result(a, b, shape, out):
    """The cond's TensorArray over the If's output ``out``."""
    watch = a.__dict__.get("_appends")
    if watch is not None and watch is b.__dict__.get("_appends"):
        return _appended(watch, a.__dict__.get("_branch_writes", []), b.__dict__.get("_branch_writes", []),
                         shape, out)
    if not _dense_form(a) and not _dense_form(b) and len(a._items) == len(b._items):
        ta = TensorArray(a.dtype, size=len(a._items), dynamic_size=a.dynamic_size or b.dynamic_size,
                         element_shape=shape, infer_shape=a._infer_shape)
        ta._items = array_ops.unstack(out) if a._items else []
        return ta
    base = a if _dense_form(a) else b if _dense_form(b) else None
    if base is None or not (_dense_form(a) and _dense_form(b) and _same_size(a, b)):
        # (arrays of different lengths in the two branches: the length is the taken one's)
        ta = TensorArray(a.dtype, size=array_ops.shape(out)[0], dynamic_size=a.dynamic_size or b.dynamic_size,
                         element_shape=shape, infer_shape=a._infer_shape)
        return ta.unstack(out)
    ta = base._like(out)
    ta._element_shape = shape
    if a._row_ids is not b._row_ids:
        ta._row_ids = None
    return ta


def _appended(watch, writes_t, writes_f, shape, out):
    """A dynamic array a tf.while_loop body may only append to (its writes watched:
    autograph/staged_tensor_array.check_appends), written by the cond's branches. When
    both append alike (the same rows at the same indices: ``ta.write(i, a)`` and
    ``ta.write(i, b)``), that is one append of the iteration, and the If's output (each
    branch's ``concat([array, rows])``) is the array's buffer: the growing form the
    compiler keeps in a growing buffer. Else the loop is traced in the general form."""
    if len(writes_t) != len(writes_f) or any(
            (i is not j and not _same_static(i, j)) or r != q or s != t
            for (i, r, s), (j, q, t) in zip(writes_t, writes_f)):
        watch.read = True    # (check_appends then says NotAppends)
    watch.writes.extend(writes_t)
    watch.concat = None
    ta = watch.array
    ta._buffer, ta._element_shape = out, shape
    return ta


def _same_static(i, j):
    u, v = array_ops.get_static_value(i), array_ops.get_static_value(j)
    return u is not None and v is not None and np.array_equal(u, v)
