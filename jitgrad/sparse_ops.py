"""``tf.sparse``: ops on SparseTensors (sparse_tensor.py), as composites of dense ops.

TF's sparse ops keep their index rows in row-major (lexicographic) order, so:

* ordering entries (reorder, transpose, concat) is a stable argsort per index column, the
  last first; merging equal index rows (add, maximum / minimum, softmax's rows, reductions
  to a SparseTensor) numbers the runs of equal rows in that order and reduces over them;
* making a tensor dense (to_dense, the dense reductions, reshape) uses the row-major linear
  index i_0 * (d_1 ... d_{r-1}) + ... + i_{r-1}: an element of the dense tensor, so it fits
  int64 (the orderings do not use it, as a dense shape may have 2**63 elements or more).

Everything is gathers, segment ops, boolean masks and arithmetic, so it runs eagerly, in a
Session and in jitgrad.function, and differentiates through those ops' gradients (ops whose
output count depends on the data run in the reference interpreter, as boolean_mask does).
Static dense shapes are used where known; the rank must be known when the graph is built.
"""
import math

import numpy as np

from . import dtypes
from .assert_ops import Assert
from .convert import convert_to_tensor
from .eager import EagerTensor
from .errors import InvalidArgumentError
from .ops import array_ops, math_ops
from .ops.array_ops import concat, gather, get_static_value, reshape, stack
from .ops.complex_ops import complex as complex_, conj, imag, real
from .ops.counting_ops import after_checks
from .ops.gather_nd import flat_rows, gather_nd, size_product
from .ops.mask_ops import boolean_mask
from .ops.reduction_ops import cumprod, cumsum, reduce_all, reduce_any, reduce_prod, reduce_sum as dense_reduce_sum
from .ops.segment_ops import unsorted_segment_max, unsorted_segment_sum
from .ops.sort_ops import argsort
from .sparse_tensor import SparseTensor, SparseTensorValue, is_sparse, known_dims, shaped_like, with_static_shape

_I64 = dtypes.int64


# ---------------------------------------------------------------- helpers
def _eager(*ts):
    return all(isinstance(t, EagerTensor) for t in ts)


def _error(eager, msg):
    """TF's error for bad input: the kernel's InvalidArgumentError eagerly, shape inference's
    ValueError while building a graph."""
    return InvalidArgumentError(msg) if eager else ValueError(msg)


def _check_sparse(sp, what="sp_input"):
    """A SparseTensor (a SparseTensorValue is made one, as TF's _convert_to_sparse_tensor)."""
    if isinstance(sp, SparseTensorValue):
        return SparseTensor.from_value(sp)
    if not is_sparse(sp):
        raise TypeError(f"Input must be a SparseTensor, got {type(sp).__name__} for {what}.")
    return sp


def _rank(sp):
    r = sp.indices.shape.dims[1] if sp.indices.shape.rank == 2 else None
    if r is None:
        r = sp.dense_shape.shape.dims[0] if sp.dense_shape.shape.rank == 1 else None
    if r is None:
        raise NotImplementedError("jitgrad's tf.sparse ops need the rank of a SparseTensor known when the graph is "
                                  "built.")
    return r


def _dims(sp):
    """The dense dims: ints where known when the graph is built, else int64 scalar tensors."""
    static = known_dims(sp) or [None] * _rank(sp)
    return [int(d) if d is not None else sp.dense_shape[j] for j, d in enumerate(static)]


def _dims_tensor(dims):
    """dims (ints and int64 scalars) as one int64 vector, or a list of ints when all are known."""
    if all(isinstance(d, int) for d in dims):
        return list(dims)
    return stack([convert_to_tensor(np.int64(d)) if isinstance(d, int) else d for d in dims])


def _product(dims):
    return size_product(dims, _I64)


def _linear(indices, dims):
    """The row-major linear index of each index row (no bounds check), int64."""
    if not dims:            # (rank 0: every entry is the one element)
        return array_ops.zeros(array_ops.shape(indices, out_type=_I64)[:1], _I64)
    row = indices[:, 0]
    for j in range(1, len(dims)):
        row = math_ops.add(math_ops.multiply(row, dims[j]), indices[:, j])
    return row


def _unravel(lin, dims):
    """Index rows [n, len(dims)] of row-major linear indices."""
    cols = []
    for d in reversed(dims[1:]):
        cols.append(math_ops.floormod(lin, d))
        lin = math_ops.floordiv(lin, d)
    cols.append(lin)
    return stack(cols[::-1], axis=1)


def _row_major_order(indices):
    """The stable permutation that puts the index rows in row-major (lexicographic) order: a
    stable argsort per column, the last column first. (A linear index would overflow int64
    for dense shapes of 2**63 elements or more, which TF's sparse tensors may have.)"""
    r = indices.shape.dims[1]
    if r == 0:
        return array_ops.range_(array_ops.shape(indices)[0])
    perm = argsort(indices[:, r - 1], stable=True)
    for j in reversed(range(r - 1)):
        perm = gather(perm, argsort(gather(indices[:, j], perm), stable=True))
    return perm


def _runs(rows):
    """For index rows in row-major order: (each row's run id, the number of runs, the first
    row of each run), a run being equal rows."""
    n = array_ops.shape(rows, out_type=_I64)[0]
    prev = concat([math_ops.add(rows[:1], np.int64(1)), rows[:-1]], 0)
    starts = math_ops.logical_or(reduce_any(math_ops.not_equal(rows, prev), axis=1),
                                 math_ops.equal(array_ops.range_(n, dtype=_I64), 0))
    ids = math_ops.subtract(cumsum(math_ops.cast(starts, _I64)), np.int64(1))
    return ids, dense_reduce_sum(math_ops.cast(starts, _I64)), boolean_mask(rows, starts)


def _reordered(indices, values):
    """The entries in row-major order (stable: equal indices keep their order)."""
    perm = _row_major_order(indices)
    return gather(indices, perm), gather(values, perm)


def _segment_sum(values, ids, n):
    """unsorted_segment_sum, complex values as their real and imaginary parts (TF's sums take
    complex values; jitgrad's segment op does not)."""
    if values.dtype.is_complex:
        return complex_(unsorted_segment_sum(real(values), ids, n), unsorted_segment_sum(imag(values), ids, n))
    return unsorted_segment_sum(values, ids, n)


def _ones_int(values):
    return array_ops.ones(array_ops.shape(values), dtypes.int32)


# ---------------------------------------------------------------- index validation
def _eager_index_errors(indices, dims, check_order):
    """TF's SparseTensor::ValidateIndices: the first index row out of bounds or (check_order)
    repeated or out of order raises InvalidArgumentError with the kernel's message."""
    idx = indices._value
    shape = np.array([int(d._value) if isinstance(d, EagerTensor) else int(d) for d in dims], np.int64)
    n = idx.shape[0]
    outside = np.nonzero(((idx < 0) | (idx >= shape)).any(axis=1))[0]
    first = int(outside[0]) if outside.size else n
    if check_order and n > 1:
        before, after = idx[:-1], idx[1:]
        differs = before != after
        col = differs.argmax(axis=1)          # the first column where a row differs from the one before
        rows = np.arange(n - 1)
        increases = differs.any(axis=1) & (after[rows, col] > before[rows, col])
        unordered = np.nonzero(~increases)[0]
        if unordered.size and unordered[0] + 1 < first:
            k = int(unordered[0]) + 1
            here = f"indices[{k}] = [{','.join(map(str, idx[k].tolist()))}]"
            if not differs[k - 1].any():
                raise InvalidArgumentError(f"{here} is repeated")
            raise InvalidArgumentError(f"{here} is out of order. Many sparse ops require sorted indices.\n"
                                       "    Use `tf.sparse.reorder` to create a correctly ordered copy.\n\n")
    if first < n:
        raise InvalidArgumentError(f"indices[{first}] = [{','.join(map(str, idx[first].tolist()))}] is out of "
                                   f"bounds: need 0 <= index < [{','.join(map(str, shape.tolist()))}]")


def _in_order_check(lin):
    """An Assert (graph) that the linear indices strictly increase, as validate_indices does."""
    ok = reduce_all(math_ops.greater(lin[1:], lin[:-1]))
    return Assert(ok, ["indices are repeated or out of order. Many sparse ops require sorted indices. "
                       "Use `tf.sparse.reorder` to create a correctly ordered copy."])


def _dense_from(indices, values, dims, default_value=None, check_order=False, dense_shape=None, summed=False):
    """The dense tensor: the values at their elements (the last of a repeated index, or with
    ``summed`` their sum), default_value (or 0) elsewhere. An index out of bounds is TF's
    InvalidArgumentError (a segment id past the end)."""
    if dims is None:          # (rank unknown when the graph is built: dense_shape, a tensor)
        n = reduce_prod(dense_shape)
        strides = cumprod(dense_shape, exclusive=True, reverse=True)
        valid = reduce_all(math_ops.logical_and(math_ops.greater_equal(indices, 0),
                                                math_ops.less(indices, dense_shape)), axis=1)
        lin = math_ops.where(valid, dense_reduce_sum(math_ops.multiply(indices, strides), axis=1), n)
    else:
        n = _product(dims)
        if isinstance(n, int) and n >= 2 ** 63:
            raise _error(_eager(indices), f"Dense shape {dims} has more than 2**63 - 1 elements")
        if _eager(indices):
            _eager_index_errors(indices, dims, check_order)
        lin = flat_rows(indices, dims, n) if dims else _linear(indices, dims)
    if check_order and not _eager(indices):
        lin = after_checks([_in_order_check(lin)], lin)
    if summed:
        is_bool = values.dtype == dtypes.bool_
        out = _segment_sum(math_ops.cast(values, dtypes.int32) if is_bool else values, lin, n)
        out = math_ops.not_equal(out, 0) if is_bool else out
    else:
        # TF's SparseToDense assigns in order: the last value at a repeated index wins
        count = array_ops.shape(values, out_type=_I64)[0]
        last = unsorted_segment_max(array_ops.range_(count, dtype=_I64), lin, n)   # int64 min where none
        hit = math_ops.greater_equal(last, 0)
        padded = concat([values, array_ops.zeros([1], values.dtype)], 0)
        out = gather(padded, math_ops.where(hit, last, count))
        if default_value is not None:
            default = convert_to_tensor(default_value, dtype=values.dtype)
            out = math_ops.where(hit, out, array_ops.fill(array_ops.shape(out), default))
    return reshape(out, dense_shape if dims is None else _dims_tensor(dims))


# ---------------------------------------------------------------- conversions
def from_dense(tensor, name=None):
    """``tf.sparse.from_dense``: the non-zero elements (non-False, non-empty) in row-major order."""
    x = convert_to_tensor(tensor)
    zero = b"" if x.dtype.is_string else np.zeros((), x.dtype.np)
    indices = math_ops.where(math_ops.not_equal(x, zero))
    if x.shape.rank == 0:
        indices = reshape(indices, [-1, 0])
    out = SparseTensor(indices, gather_nd(x, indices), array_ops.shape(x, out_type=_I64))
    return with_static_shape(out, x.shape if x.shape.rank is not None else None)


def to_dense(sp_input, default_value=None, validate_indices=True, name=None):
    """``tf.sparse.to_dense``: with validate_indices (the default) indices out of order or
    repeated are TF's InvalidArgumentError; indices out of bounds always are."""
    sp = _check_sparse(sp_input)
    if sp.dtype.is_string:
        raise NotImplementedError("jitgrad's tf.sparse.to_dense does not take string values.")
    dims = None if sp.shape.rank is None and sp.indices.shape.dims[1] is None else _dims(sp)
    return _dense_from(sp.indices, sp.values, dims, default_value, check_order=validate_indices,
                       dense_shape=sp.dense_shape)


def to_indicator(sp_input, vocab_size, name=None):
    """``tf.sparse.to_indicator``: bool [..., vocab_size], True at [i_0 ... i_{r-2}, value]."""
    sp = _check_sparse(sp_input)
    if not sp.dtype.is_integer:
        raise TypeError(f"sp_input.values must be an integer tensor, got {sp.dtype.name}")
    dims = _dims(sp)[:-1] + [int(vocab_size) if get_static_value(vocab_size) is not None
                             else math_ops.cast(vocab_size, _I64)]
    ids = reshape(math_ops.cast(sp.values, _I64), [-1, 1])
    indices = concat([sp.indices[:, :-1], ids], 1)
    trues = math_ops.cast(math_ops.ones_like(sp.values), dtypes.bool_)
    return _dense_from(indices, trues, dims)


# ---------------------------------------------------------------- structure
def reorder(sp_input, name=None):
    """``tf.sparse.reorder``: the same entries in canonical row-major order."""
    sp = _check_sparse(sp_input)
    indices, values = _reordered(sp.indices, sp.values)
    return shaped_like(SparseTensor(indices, values, sp.dense_shape), sp)


def _resolved_shape(old_dims, new_shape, eager):
    """The new dims of a reshape (one -1 inferred), TF's error when the sizes disagree."""
    value = get_static_value(new_shape)
    if value is None or not all(isinstance(d, int) for d in old_dims):
        raise NotImplementedError("jitgrad's tf.sparse.reshape needs both shapes known when the graph is built.")
    new = [int(d) for d in np.asarray(value).reshape(-1)]
    total = math.prod(old_dims)          # (Python ints: no int64 wrap-around)
    if total >= 2 ** 63:
        raise _error(eager, f"Input to reshape is a SparseTensor of dense shape {old_dims}: more than 2**63 - 1 "
                            "elements")
    if sum(d == -1 for d in new) > 1:
        raise _error(eager, f"only one output dimension may be -1, not both {new.index(-1)} and "
                            f"{len(new) - 1 - new[::-1].index(-1)}")
    known = math.prod(d for d in new if d != -1)
    if -1 in new:
        if known == 0 or total % known:
            raise _error(eager, f"Input to reshape is a SparseTensor with {total} dense values, but the requested "
                                f"shape requires a multiple of {known}. inputShape={old_dims} outputShape={new}")
        new[new.index(-1)] = total // known
    elif known != total:
        raise _error(eager, f"Input to reshape is a tensor with {total} dense values, but the requested shape "
                            f"has {known}. inputShape={old_dims} outputShape={new}")
    return new


def reshape_sparse(sp_input, shape, name=None):
    """``tf.sparse.reshape``: the same entries (in the same order) under new dense dims."""
    sp = _check_sparse(sp_input)
    new = _resolved_shape(_dims(sp), convert_to_tensor(shape, dtype=_I64), _eager(sp.indices))
    indices = _unravel(_linear(sp.indices, _dims(sp)), new) if new else reshape(sp.indices[:, :0], [-1, 0])
    return SparseTensor(indices, sp.values, np.array(new, np.int64))


def transpose(sp_input, perm=None, name=None):
    """``tf.sparse.transpose``: dims permuted (reversed by default), then reordered, as TF."""
    sp = _check_sparse(sp_input)
    r = _rank(sp)
    perm = list(range(r))[::-1] if perm is None else [int(p) for p in np.asarray(get_static_value(perm)).reshape(-1)]
    if sorted(p % r if r else p for p in perm) != list(range(r)) or len(perm) != r:
        raise _error(_eager(sp.indices), f"{perm} is not a permutation of [0, {r})")
    perm = [p % r for p in perm]
    indices = gather(sp.indices, perm, axis=1)
    indices, values = _reordered(indices, sp.values)
    out = SparseTensor(indices, values, gather(sp.dense_shape, perm))
    static = sp.shape.dims
    return shaped_like(out, sp, None if static is None else [static[p] for p in perm])


def expand_dims(sp_input, axis=None, name=None):
    """``tf.sparse.expand_dims``: a dim of 1 inserted at ``axis`` (its index column all 0)."""
    sp = _check_sparse(sp_input)
    r = _rank(sp)
    axis = -1 if axis is None else int(get_static_value(axis))
    if not -r - 1 <= axis <= r:
        raise _error(_eager(sp.indices), f"Axis {axis} out of range [{-r - 1}, {r}]")
    axis %= r + 1
    zeros = math_ops.zeros_like(sp.indices[:, :1])
    indices = concat([sp.indices[:, :axis], zeros, sp.indices[:, axis:]], 1)
    shape = concat([sp.dense_shape[:axis], np.ones([1], np.int64), sp.dense_shape[axis:]], 0)
    static = sp.shape.dims
    return shaped_like(SparseTensor(indices, sp.values, shape), sp,
                       None if static is None else list(static[:axis]) + [1] + list(static[axis:]))


def retain(sp_input, to_retain):
    """``tf.sparse.retain``: the entries where the bool vector ``to_retain`` is True."""
    sp = _check_sparse(sp_input)
    keep = convert_to_tensor(to_retain, dtype=dtypes.bool_)
    if keep.shape.rank is not None and keep.shape.rank != 1:
        raise ValueError(f"Shape {keep.shape} must have rank 1")
    n, k = sp.values.shape.dims[0], keep.shape.dims[0] if keep.shape.rank == 1 else None
    if n is not None and k is not None and n != k:
        raise ValueError(f"Dimensions {n} and {k} are not compatible")
    out = SparseTensor(boolean_mask(sp.indices, keep), boolean_mask(sp.values, keep), sp.dense_shape)
    return shaped_like(out, sp)


def slice_sparse(sp_input, start, size, name=None):
    """``tf.sparse.slice``: the entries in [start, start + size), shifted by -start; the dense
    dims are min(start + size, dims) - start, at least 0, as TF's kernel."""
    sp = _check_sparse(sp_input)
    start = math_ops.cast(convert_to_tensor(start), _I64)
    size = math_ops.cast(convert_to_tensor(size), _I64)
    end = math_ops.add(start, size)
    inside = reduce_all(math_ops.logical_and(math_ops.greater_equal(sp.indices, start),
                                             math_ops.less(sp.indices, end)), axis=1)
    indices = math_ops.subtract(boolean_mask(sp.indices, inside), start)
    shape = math_ops.maximum(math_ops.subtract(math_ops.minimum(end, sp.dense_shape), start), np.int64(0))
    return SparseTensor(indices, boolean_mask(sp.values, inside), shape)


def split_sparse(sp_input=None, num_split=None, axis=None, name=None):
    """``tf.sparse.split``: ``num_split`` slices along ``axis``; the first (dim % num_split) of
    them one longer, as TF's SparseSplit."""
    sp = _check_sparse(sp_input)
    if num_split is None or axis is None:
        raise ValueError("num_split and axis are required")
    r = _rank(sp)
    num_split, axis = int(num_split), int(get_static_value(axis))
    if not -r <= axis < r:
        raise _error(_eager(sp.indices), f"Split dimension must be in range [{-r}, {r}), got {axis}")
    axis %= r
    dim = math_ops.cast(convert_to_tensor(_dims(sp)[axis], dtype=_I64), _I64)
    if _eager(sp.indices) and int(dim.numpy()) < num_split:
        raise InvalidArgumentError(f"Split requires num_split <= dimension size: {num_split} vs {int(dim.numpy())}")
    base, extra = math_ops.floordiv(dim, np.int64(num_split)), math_ops.floormod(dim, np.int64(num_split))
    onehot = np.eye(r, dtype=np.int64)[axis]
    pieces, start = [], convert_to_tensor(np.int64(0))
    for i in range(num_split):
        length = math_ops.add(base, math_ops.cast(math_ops.less(np.int64(i), extra), _I64))
        begin = math_ops.multiply(onehot, start)
        size = math_ops.add(math_ops.multiply(onehot, length), math_ops.multiply(1 - onehot, sp.dense_shape))
        pieces.append(slice_sparse(sp, begin, size))
        start = math_ops.add(start, length)
    return pieces


def concat_sparse(axis, sp_inputs, expand_nonconcat_dims=False, name=None):
    """``tf.sparse.concat``: entries of each input shifted along ``axis`` by the dims before
    it, in row-major order. The other dims must agree (their maximum with
    expand_nonconcat_dims)."""
    sps = [_check_sparse(s, "sp_inputs") for s in sp_inputs]
    if not sps:
        raise ValueError("sp_inputs must be a non-empty list of SparseTensors")
    r = _rank(sps[0])
    axis = int(get_static_value(axis))
    if not -r <= axis < r:
        raise _error(_eager(sps[0].indices), f"Concat dimension must be in range [{-r}, {r}), got {axis}")
    axis %= r
    eager = _eager(*[s.indices for s in sps])
    all_dims = [_dims(s) for s in sps]
    if eager and not expand_nonconcat_dims:
        for d in all_dims[1:]:
            if len(d) != r or any(int(a) != int(b) for j, (a, b) in enumerate(zip(d, all_dims[0])) if j != axis):
                raise InvalidArgumentError(f"Input shapes must match: got {all_dims[0]} and {d} for "
                                           f"non-concat dimensions")
    offset, shifted = None, []
    onehot = np.eye(r, dtype=np.int64)[axis]
    for s, d in zip(sps, all_dims):
        shifted.append(s.indices if offset is None else
                       math_ops.add(s.indices, math_ops.multiply(onehot, offset)))
        offset = d[axis] if offset is None else _product_sum(offset, d[axis])
    dims = [offset if j == axis else _max_dim([d[j] for d in all_dims]) if expand_nonconcat_dims else all_dims[0][j]
            for j in range(r)]
    indices, values = _reordered(concat(shifted, 0), concat([s.values for s in sps], 0))
    shape = _dims_tensor(dims)
    return SparseTensor(indices, values, np.array(shape, np.int64) if isinstance(shape, list) else shape)


def _product_sum(a, b):
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    return math_ops.add(math_ops.cast(a, _I64), math_ops.cast(b, _I64))


def _max_dim(ds):
    if all(isinstance(d, int) for d in ds):
        return max(ds)
    out = math_ops.cast(ds[0], _I64)
    for d in ds[1:]:
        out = math_ops.maximum(out, math_ops.cast(d, _I64))
    return out


def fill_empty_rows(sp_input, default_value, name=None):
    """``tf.sparse.fill_empty_rows``: (the input with [r, 0, ..., 0] = default_value added for
    each row r that has no entry, in row order; the bool vector of those rows)."""
    sp = _check_sparse(sp_input)
    r = _rank(sp)
    n_rows = _dims(sp)[0]
    rows = sp.indices[:, 0]
    count = unsorted_segment_sum(_ones_int(sp.values), flat_rows(sp.indices[:, :1], [n_rows], n_rows), n_rows)
    empty = math_ops.equal(count, 0)
    new_rows = math_ops.where(empty)
    rest = array_ops.zeros(array_ops.stack([array_ops.shape(new_rows, out_type=_I64)[0], np.int64(r - 1)]), _I64)
    new_indices = concat([new_rows, rest], 1)          # [row, 0, ..., 0]
    default = convert_to_tensor(default_value, dtype=sp.dtype)
    new_values = array_ops.fill(array_ops.shape(new_rows)[:1], default)
    all_indices = concat([sp.indices, new_indices], 0)
    perm = argsort(concat([rows, new_rows[:, 0]], 0), stable=True)
    out = SparseTensor(gather(all_indices, perm), gather(concat([sp.values, new_values], 0), perm), sp.dense_shape)
    return shaped_like(out, sp), empty


def eye(num_rows, num_columns=None, dtype=dtypes.float32, name=None):
    """``tf.sparse.eye``: ones on the diagonal of a [num_rows, num_columns] SparseTensor."""
    rows = math_ops.cast(convert_to_tensor(num_rows), _I64)
    cols = rows if num_columns is None else math_ops.cast(convert_to_tensor(num_columns), _I64)
    diag = array_ops.range_(math_ops.minimum(rows, cols), dtype=_I64)
    indices = stack([diag, diag], axis=1)
    out = SparseTensor(indices, math_ops.cast(math_ops.ones_like(diag), dtypes.as_dtype(dtype)), stack([rows, cols]))
    static = [get_static_value(rows), get_static_value(cols)]
    return with_static_shape(out, [None if s is None else int(s) for s in static])


# ---------------------------------------------------------------- arithmetic
def _same_dims_check(a, b, eager):
    da, db = _dims(a), _dims(b)
    if len(da) != len(db):
        raise _error(eager, f"Operands do not have the same ranks; got shapes: {da} and {db}")
    if eager and [int(x) for x in da] != [int(x) for x in db]:
        raise InvalidArgumentError(f"Operands' shapes do not match: got {[int(x) for x in da]} and "
                                   f"{[int(x) for x in db]}")
    if all(isinstance(x, int) for x in da + db) and da != db:
        raise ValueError(f"Operands' shapes do not match: got {da} and {db}")
    return da


def _union(a, b):
    """The union of two sparse tensors' index sets in row-major order: (indices, for each
    union entry a's and b's value summed there (0 where absent), the count of entries there)."""
    dims = _same_dims_check(a, b, _eager(a.indices, b.indices))
    if a.dtype != b.dtype:      # (the op's type check: InvalidArgumentError eagerly, TypeError in a graph)
        msg = f"SparseTensors must have the same dtype, got {a.dtype.name} and {b.dtype.name}"
        raise InvalidArgumentError(msg) if _eager(a.values, b.values) else TypeError(msg)
    indices = concat([a.indices, b.indices], 0)
    perm = _row_major_order(indices)
    ids, n, first = _runs(gather(indices, perm))

    def summed(values):
        return _segment_sum(gather(values, perm), ids, n)
    a_part = summed(concat([a.values, math_ops.zeros_like(b.values)], 0))
    b_part = summed(concat([math_ops.zeros_like(a.values), b.values], 0))
    counts = unsorted_segment_sum(array_ops.ones(array_ops.shape(perm), dtypes.int32), ids, n)
    return first, a_part, b_part, counts, dims


def add(a, b, threshold=0):
    """``tf.sparse.add``: sparse + sparse is a SparseTensor of the union of their indices
    (values at a shared index summed and kept when |sum| >= threshold, as TF's SparseAdd);
    sparse + dense (either order) is dense, as TF."""
    if not is_sparse(a) and not is_sparse(b):
        raise TypeError("At least one input should be SparseTensor; do you mean to use tf.add?")
    if is_sparse(a) and is_sparse(b):
        indices, va, vb, counts, dims = _union(a, b)
        s = math_ops.add(va, vb)
        thresh = convert_to_tensor(threshold, dtype=s.dtype.real_dtype if s.dtype.is_complex else s.dtype)
        keep = math_ops.logical_or(math_ops.equal(counts, 1), math_ops.less_equal(thresh, math_ops.abs(s)))
        out = SparseTensor(boolean_mask(indices, keep), boolean_mask(s, keep), a.dense_shape)
        return shaped_like(out, a)
    sp, dense = (a, b) if is_sparse(a) else (b, a)
    dense = convert_to_tensor(dense, dtype=sp.dtype)
    dims = _dims(sp)
    if dense.shape.rank is not None and dense.shape.rank != len(dims) or any(
            isinstance(x, int) and y is not None and x != y for x, y in zip(dims, dense.shape.dims or [])):
        raise _error(_eager(sp.indices), f"Dimensions of the dense tensor {dense.shape} and the sparse "
                                         f"tensor {dims} do not match")
    return math_ops.add(dense, _dense_from(sp.indices, sp.values, dims, summed=True))


def _extreme(a, b, pick):
    a, b = _check_sparse(a, "sp_a"), _check_sparse(b, "sp_b")
    indices, va, vb, _, _ = _union(a, b)
    return shaped_like(SparseTensor(indices, pick(va, vb), a.dense_shape), a)


def maximum(sp_a, sp_b, name=None):
    """``tf.sparse.maximum``: elementwise max over the union of the indices (absent: 0)."""
    return _extreme(sp_a, sp_b, math_ops.maximum)


def minimum(sp_a, sp_b, name=None):
    """``tf.sparse.minimum``: elementwise min over the union of the indices (absent: 0)."""
    return _extreme(sp_a, sp_b, math_ops.minimum)


def sparse_dense_matmul(sp_a, b, adjoint_a=False, adjoint_b=False, name=None):
    """``tf.sparse.sparse_dense_matmul``: op(A) @ op(B) for a rank-2 SparseTensor A (or B,
    then computed as TF: the transpose of op(B)^T op(A)^T); duplicates add up."""
    if not is_sparse(sp_a):
        if not is_sparse(b):
            raise TypeError("sparse_dense_matmul needs a SparseTensor operand")
        return array_ops.transpose(sparse_dense_matmul(b, sp_a, adjoint_a=not adjoint_b, adjoint_b=not adjoint_a))
    sp = sp_a
    dense = convert_to_tensor(b)
    eager = _eager(sp.indices, dense)
    if dense.dtype != sp.dtype:     # (the op's type check: InvalidArgumentError eagerly, TypeError in a graph)
        msg = f"sparse_dense_matmul of {sp.dtype.name} values and a {dense.dtype.name} tensor"
        raise InvalidArgumentError(msg) if eager else TypeError(msg)
    if _rank(sp) != 2 or (dense.shape.rank is not None and dense.shape.rank != 2):
        raise _error(eager, f"Tensor 'a_shape' and 'b' must be matrices, got ranks {_rank(sp)} and "
                            f"{dense.shape.rank}")
    rows_dim, inner_dim = _dims(sp)[::-1] if adjoint_a else _dims(sp)
    rows, cols = (sp.indices[:, 1], sp.indices[:, 0]) if adjoint_a else (sp.indices[:, 0], sp.indices[:, 1])
    values = sp.values
    if adjoint_a and values.dtype.is_complex:
        values = conj(values)
    if adjoint_b:
        dense = array_ops.matrix_transpose(dense, conjugate=True)
    b_rows = dense.shape.dims[0] if dense.shape.rank == 2 else None
    if isinstance(inner_dim, int) and b_rows is not None and inner_dim != b_rows:
        raise _error(eager, f"Cannot multiply A and B because inner dimension does not match: {inner_dim} vs. "
                            f"{b_rows}.  Did you forget a transpose?  Dimensions of A: "
                            f"[{', '.join(map(str, _dims(sp)))}).  Dimensions of B: {dense.shape.as_list()}")
    if eager:
        _eager_index_errors(sp.indices, _dims(sp), False)
    safe_rows = flat_rows(reshape(rows, [-1, 1]), [rows_dim], rows_dim)
    products = math_ops.multiply(reshape(values, [-1, 1]), gather(dense, cols))
    return _segment_sum(products, safe_rows, rows_dim)


def map_values(op, *args, **kwargs):
    """``tf.sparse.map_values``: ``op`` of the values of the SparseTensor arguments (which
    must share their indices and dense shape), the other arguments passed as they are."""
    sparse = [x for x in list(args) + list(kwargs.values()) if is_sparse(x)]
    if not sparse:
        raise ValueError("No SparseTensor in argument list of map_values")
    first = sparse[0]
    for other in sparse[1:]:
        if _eager(first.indices, other.indices) and (
                first.indices.numpy().tolist() != other.indices.numpy().tolist()
                or first.dense_shape.numpy().tolist() != other.dense_shape.numpy().tolist()):
            raise InvalidArgumentError("Expected all SparseTensors to have the same indices and dense_shape")

    def values(x):
        return x.values if is_sparse(x) else x
    out = op(*[values(a) for a in args], **{k: values(v) for k, v in kwargs.items()})
    return first.with_values(out)


# ---------------------------------------------------------------- reductions, softmax
def _axes(axis, r, eager):
    if axis is None:
        return list(range(r))
    value = get_static_value(axis)
    if value is None:
        raise NotImplementedError("jitgrad's sparse reductions need the axis known when the graph is built.")
    axes = [int(a) for a in np.asarray(value).reshape(-1)]
    for a in axes:
        if not -r <= a < r:
            raise _error(eager, f"Invalid reduction dimension {a}, for input with {r} dimensions.")
    return sorted({a % r for a in axes})


def _groups(sp, axis):
    """(kept dims, the linear index of each entry's kept coordinates, the group count)."""
    r = _rank(sp)
    axes = _axes(axis, r, _eager(sp.indices))
    dims = _dims(sp)
    kept = [j for j in range(r) if j not in axes]
    kept_dims = [dims[j] for j in kept]
    n = _product(kept_dims)
    if _eager(sp.indices):
        _eager_index_errors(sp.indices, dims, False)
    # (an index out of bounds names group n, which the segment op rejects)
    seg = flat_rows(gather(sp.indices, kept, axis=1), kept_dims, n) if kept else \
        array_ops.zeros(array_ops.shape(sp.values, out_type=_I64), _I64)
    if axes and not _eager(sp.indices):     # (and one out of bounds in a reduced dim too)
        shape = _dims_tensor(dims)
        shape = np.array(shape, np.int64) if isinstance(shape, list) else shape
        inside = reduce_all(math_ops.logical_and(math_ops.greater_equal(sp.indices, np.int64(0)),
                                                 math_ops.less(sp.indices, shape)), axis=1)
        seg = math_ops.where(inside, seg, math_ops.cast(n, _I64) if not isinstance(n, int) else np.int64(n))
    return axes, kept, kept_dims, seg, n


def _reduce(sp, axis, keepdims, output_is_sparse, kind):
    sp = _check_sparse(sp)
    axes, kept, kept_dims, seg, n = _groups(sp, axis)
    r = _rank(sp)
    out_dims = [1 if j in axes else _dims(sp)[j] for j in range(r)] if keepdims else kept_dims
    if output_is_sparse:
        # the groups that have entries, in row-major order of their kept coordinates
        kept_indices = gather(sp.indices, np.array(kept, np.int32), axis=1)
        perm = _row_major_order(kept_indices)
        ids, count, cols = _runs(gather(kept_indices, perm))
        red = (_segment_sum if kind == "sum" else unsorted_segment_max)(gather(sp.values, perm), ids, count)
        if keepdims:
            by_kept = {j: cols[:, i:i + 1] for i, j in enumerate(kept)}
            zero = array_ops.zeros(array_ops.stack([count, np.int64(1)]), _I64)
            cols = concat([by_kept.get(j, zero) for j in range(r)], 1) if r else cols
        shape = _dims_tensor(out_dims)
        return SparseTensor(cols, red, np.array(shape, np.int64) if isinstance(shape, list) else shape)
    if kind == "sum":
        red = _segment_sum(sp.values, seg, n)
    else:
        # TF's SparseReduceMax: the max of the entries present; an empty group gives 0
        red = unsorted_segment_max(sp.values, seg, n)
        present = math_ops.greater(unsorted_segment_sum(_ones_int(sp.values), seg, n), 0)
        red = math_ops.where(present, red, math_ops.zeros_like(red))
    return reshape(red, _dims_tensor(out_dims))


def reduce_sum(sp_input, axis=None, keepdims=None, output_is_sparse=False, name=None):
    """``tf.sparse.reduce_sum``: dense (or, output_is_sparse, a SparseTensor of the groups
    that have entries, as TF's SparseReduceSumSparse)."""
    return _reduce(sp_input, axis, bool(keepdims), output_is_sparse, "sum")


def reduce_max(sp_input, axis=None, keepdims=None, output_is_sparse=False, name=None):
    """``tf.sparse.reduce_max``: the max of the entries present (0 for a group with none)."""
    return _reduce(sp_input, axis, bool(keepdims), output_is_sparse, "max")


def reduce_sum_sparse(sp_input, axis=None, keepdims=False, name=None):
    """``tf.compat.v1.sparse_reduce_sum_sparse`` (TF 2 has no tf.sparse.reduce_sum_sparse)."""
    return reduce_sum(sp_input, axis, keepdims, output_is_sparse=True)


def reduce_max_sparse(sp_input, axis=None, keepdims=False, name=None):
    """``tf.compat.v1.sparse_reduce_max_sparse``."""
    return reduce_max(sp_input, axis, keepdims, output_is_sparse=True)


def softmax(sp_input, name=None):
    """``tf.sparse.softmax``: a softmax over the entries present in each innermost row."""
    sp = _check_sparse(sp_input)
    r = _rank(sp)
    if r < 2:
        raise _error(_eager(sp.indices), f"Input should have rank >= 2, got {r}")
    # each entry's row (its index without the last coordinate), numbered in row-major order
    rows = sp.indices[:, :-1]
    perm = _row_major_order(rows)
    sorted_ids, n, _ = _runs(gather(rows, perm))
    seg = unsorted_segment_sum(sorted_ids, perm, array_ops.shape(perm)[0])     # back to entry order
    top = unsorted_segment_max(sp.values, seg, n)
    e = math_ops.exp(math_ops.subtract(sp.values, gather(top, seg)))
    total = unsorted_segment_sum(e, seg, n)
    return sp.with_values(math_ops.truediv(e, gather(total, seg)))


__all__ = ["from_dense", "to_dense", "to_indicator", "reorder", "transpose", "expand_dims", "retain",
           "fill_empty_rows", "eye", "add", "maximum", "minimum", "sparse_dense_matmul", "reduce_sum",
           "reduce_max", "softmax", "map_values"]
