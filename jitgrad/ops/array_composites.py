"""TF array functions composed of existing ops, as TF's own Python composes most of them:
repeat, meshgrid, sequence_mask, searchsorted, unravel_index, reverse_sequence,
identity_n, shape_n, strided_slice. They compile and differentiate as their parts do.

repeat with repeats known when the graph is built (Python values, constants, eager
tensors) is one gather of np.repeat's indices, so its output shape is static; a run-time
scalar is a tile and a reshape; run-time vector repeats give a data-dependent length (see
_repeat_at_run_time), which runs in the interpreter. searchsorted counts comparisons (n * m per
row: TF's binary search is not an existing op). The run-time checks TF's kernels make
(unravel_index's index range, reverse_sequence's lengths) are tf.debugging assertions the
result depends on: InvalidArgumentError eagerly and when a graph runs.
"""
import numpy as np

from .. import context, debugging, dtypes
from ..convert import convert_all, convert_to_tensor, graph_of
from ..eager import EagerTensor
from ..errors import InvalidArgumentError
from .array_ops import (broadcast_to, concat, expand_dims, gather, get_static_value, ones, range_, reshape,
                        shape as shape_of, size as size_of, stack, strided_slice_getitem, tile, transpose)
from .gather_batched import gather as batched_gather
from .math_ops import (abs as abs_, cast, floordiv, floormod, identity, less, logical_not, maximum, multiply, ones_like,
                       sign, subtract, where)
from .counting_ops import after_checks
from .reduction_ops import cumprod, cumsum, reduce_max, reduce_prod, reduce_sum

_INDEX_TYPES = (dtypes.int32, dtypes.int64)


def _graph(t):
    return None if isinstance(t, EagerTensor) else t.graph


def _static(t):
    """The value of a tensor known when the graph is built (eager values, constants), else None."""
    return t.numpy() if isinstance(t, EagerTensor) else get_static_value(t)


def _positive_axis(axis, rank, what="rank(data)"):
    if not -max(rank, 1) <= axis < max(rank, 1):
        raise ValueError(f"axis={axis} out of bounds: expected {-max(rank, 1)}<=axis<{max(rank, 1)}")
    return axis + rank if axis < 0 else axis


def _int_tensor(value, graph, what):
    """TF's convert_to_int_tensor: an integer tensor cast to int32 (TypeError for others)."""
    (t,) = convert_all([value], graph=graph)
    if not t.dtype.is_integer:
        raise TypeError(f"{what} must be an integer tensor; dtype={t.dtype.name}")
    return cast(t, dtypes.int32) if t.dtype != dtypes.int32 else t


# ---------------------------------------------------------------- repeat
def repeat(input, repeats, axis=None, name=None):  # noqa: A002
    """``tf.repeat``: each element (slice along ``axis``) repeated ``repeats`` times;
    axis None repeats the flattened input."""
    (x,) = convert_all([input])
    if axis is None:
        x, axis = reshape(x, [-1]), 0
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool):
        raise TypeError(f"Argument `axis` must be an int. Received `axis` = {axis} of type "
                        f"{type(axis).__name__}")
    reps = _int_tensor(repeats, _graph(x), "repeats")
    if reps.shape.rank is not None and reps.shape.rank > 1:
        raise ValueError(f"Shape must be at most rank 1 but is rank {reps.shape.rank}")
    if x.shape.rank is None:
        raise NotImplementedError("tf.repeat needs the input's rank known when the graph is built.")
    if x.shape.rank == 0:
        x = stack([x])
    axis = _positive_axis(int(axis), x.shape.rank)
    n = x.shape.dims[axis]
    if reps.shape.rank == 1 and n is not None and reps.shape.dims[0] not in (None, 1, n):
        raise ValueError(f"Dimensions {n} and {reps.shape.dims[0]} are not compatible")
    known = _static(reps)
    if known is not None and n is not None:
        counts = np.broadcast_to(np.asarray(known).reshape(-1), [n])
        # (TF's sequence mask takes a negative count as none)
        picked = np.repeat(np.arange(n, dtype=np.int32), np.maximum(counts, 0))
        out = gather(x, convert_to_tensor(picked, graph=_graph(x)), axis=axis)
        return identity(out, name=name) if name else out
    if reps.shape.num_elements() == 1:
        r = reshape(reps, [])
        multiples = [1] * (x.shape.rank + 1)
        multiples[axis + 1] = r
        tiled = tile(expand_dims(x, axis + 1), stack(multiples))
        dims = shape_of(x)
        return reshape(tiled, concat([dims[:axis], stack([r * dims[axis]]), dims[axis + 1:]], 0), name=name)
    return _repeat_at_run_time(x, reps, axis, name)


def _repeat_at_run_time(x, reps, axis, name):
    """Run-time repeats: TF's other implementation (its non-XLA one when enabled), a gather of
    searchsorted(cumsum(repeats), range(sum), 'right'): the same values as TF's default sequence
    mask and boolean_mask, with a gather's gradient. The range's length depends on the data, so
    a graph holding it runs in the interpreter."""
    dims = shape_of(x)
    counts = maximum(broadcast_to(reps, stack([dims[axis]])), 0)
    ends = cumsum(counts)
    total = reduce_sum(counts)
    picked = searchsorted(ends, range_(total, dtype=ends.dtype), side="right")
    return gather(x, picked, axis=axis, name=name)


# ---------------------------------------------------------------- meshgrid
def meshgrid(*args, **kwargs):
    """``tf.meshgrid``: N-D coordinate grids; 'xy' indexing swaps the first two axes."""
    indexing = kwargs.pop("indexing", "xy")
    name = kwargs.pop("name", None)
    if kwargs:
        raise TypeError(f"'{list(kwargs)[0]}' is an invalid keyword argument for this function")
    if indexing not in ("xy", "ij"):
        raise ValueError(f"Argument `indexing` parameter must be either 'xy' or 'ij', got '{indexing}'")
    if not args:
        return []
    g = graph_of(args)
    xs = [convert_all([a], graph=g)[0] for a in args]
    ndim = len(xs)
    out = [reshape(x, [1] * i + [-1] + [1] * (ndim - i - 1)) for i, x in enumerate(xs)]
    sizes = [reshape(x, [-1]).shape.dims[0] for x in xs]
    sizes = [s if s is not None else shape_of(reshape(x, [-1]))[0] for s, x in zip(sizes, xs)]
    if indexing == "xy" and ndim > 1:
        out[0] = reshape(out[0], [1, -1] + [1] * (ndim - 2))
        out[1] = reshape(out[1], [-1, 1] + [1] * (ndim - 2))
        sizes[0], sizes[1] = sizes[1], sizes[0]
    # (TF multiplies by ones rather than broadcasting: the gradient is the same sum)
    grid = ones(sizes, xs[0].dtype)
    return [multiply(x, grid, name=name and f"{name}_{i}") for i, x in enumerate(out)]


# ---------------------------------------------------------------- sequence_mask
def sequence_mask(lengths, maxlen=None, dtype=dtypes.bool_, name=None):
    """``tf.sequence_mask``: mask[..., j] = j < lengths[...]; maxlen defaults to max(lengths)."""
    (lens,) = convert_all([lengths])
    g = _graph(lens)
    if maxlen is None:
        limit = maximum(reduce_max(lens), convert_to_tensor(np.zeros((), lens.dtype.np), graph=g))
    else:
        (limit,) = convert_all([maxlen], graph=g)
    if limit.shape.rank not in (None, 0):
        raise ValueError(f"Argument `maxlen` must be scalar for sequence_mask, received `maxlen` = {maxlen} "
                         f"with shape '{limit.shape}' instead")
    row = range_(convert_to_tensor(np.zeros((), limit.dtype.np), graph=g), limit,
                 convert_to_tensor(np.ones((), limit.dtype.np), graph=g))
    mask = less(row, cast(expand_dims(lens, -1), limit.dtype))
    dtype = dtypes.as_dtype(dtype) if dtype is not None else dtypes.bool_
    if dtype == dtypes.bool_:
        return identity(mask, name=name) if name else mask
    return cast(mask, dtype, name=name)


# ---------------------------------------------------------------- searchsorted
def searchsorted(sorted_sequence, values, side="left", out_type=dtypes.int32, name=None):
    """``tf.searchsorted``: per row of the innermost axis, where each value would go in the
    sorted row. A comparison count (std::lower_bound's and upper_bound's answers on a sorted
    row: the elements e < v, or those with not v < e, which also places a NaN as TF does)."""
    if side not in ("left", "right"):
        raise ValueError(f"Argument `side` must be either 'right' or 'left'. Received: `side` = '{side}'.")
    out_type = dtypes.as_dtype(out_type)
    if out_type not in _INDEX_TYPES:
        raise _type_error(f"Value for attr 'out_type' of {out_type.name} is not in the list of allowed values: "
                          "int32, int64")
    seq, vals = convert_all([sorted_sequence, values])
    for t in (seq, vals):
        if t.shape.rank is None or t.shape.rank == 0:
            raise ValueError(f"searchsorted needs inputs of rank >= 1 known when the graph is built, "
                             f"got shape {t.shape}")
    lead_s, lead_v = seq.shape.dims[:-1], vals.shape.dims[:-1]
    if None not in lead_s and None not in lead_v:
        rows_s, rows_v = int(np.prod(lead_s, dtype=np.int64)), int(np.prod(lead_v, dtype=np.int64))
        if rows_s != rows_v:
            raise InvalidArgumentError(f"Leading dim_size of both tensors must match. Got {rows_s} and "
                                       f"{rows_v}")
    s2 = reshape(seq, stack([-1, _last(seq)]))
    v2 = reshape(vals, stack([-1, _last(vals)]))
    s3, v3 = expand_dims(s2, 1), expand_dims(v2, 2)          # [rows, 1, n], [rows, m, 1]
    before = less(s3, v3) if side == "left" else logical_not(less(v3, s3))
    out = reduce_sum(cast(before, out_type), -1)
    return reshape(out, shape_of(vals), name=name)


def _last(t):
    d = t.shape.dims[-1]
    return d if d is not None else shape_of(t)[-1]


# ---------------------------------------------------------------- unravel_index
def unravel_index(indices, dims, name=None):
    """``tf.unravel_index``: flat indices into coordinates of a row-major array of shape
    ``dims``; the result is [len(dims)] + indices.shape."""
    idx, d = convert_all([indices, dims])
    for what, t in (("indices", idx), ("dims", d)):
        if t.dtype not in _INDEX_TYPES:
            raise _type_error(f"Value for attr 'Tidx' of {t.dtype.name} is not in the list of allowed values: "
                            "int32, int64")
    if idx.dtype != d.dtype:
        raise _type_error(f"Input 'dims' of 'UnravelIndex' Op has type {d.dtype.name} that does not match type "
                        f"{idx.dtype.name} of argument 'indices'.")
    if idx.shape.rank is not None and idx.shape.rank > 1:
        raise _shape_error(idx, f"The indices can only be scalar or vector, got \"{idx.shape}\"")
    if d.shape.rank is not None and d.shape.rank != 1:
        raise _shape_error(idx, f"The indices can only be 1-D, got \"{d.shape}\"")
    # TF's kernel checks: some indices, dims >= 0 and each index < prod(dims) (a negative index passes)
    checks = [debugging.assert_positive(size_of(idx), message="received empty tensor indices"),
              debugging.assert_non_negative(d, message="Input dims cannot be negative"),
              debugging.assert_less(idx, reduce_prod(d), message="index is out of bound as with dims")]
    idx = after_checks(checks, idx)
    # TF's kernel: (i % prod(dims[k:])) / prod(dims[k + 1:]) in C++'s truncating arithmetic, so a
    # negative index (which it lets through) gives negative coordinates: sign(i) * that of |i|
    inner = cumprod(d, exclusive=True, reverse=True)
    outer = multiply(inner, d)
    shaped = reshape(idx, [1, -1]) if idx.shape.rank == 1 else reshape(idx, [1])
    col = [-1, 1] if idx.shape.rank == 1 else [-1]
    size = abs_(shaped)
    coords = multiply(sign(shaped), floordiv(floormod(size, reshape(outer, col)), reshape(inner, col)))
    return identity(coords, name=name) if name else coords


def _type_error(message):
    """A dtype or attr an op does not take: TF's kernel lookup fails (InvalidArgumentError) when
    executing eagerly; graph construction raises TypeError."""
    return (InvalidArgumentError if context.executing_eagerly() else TypeError)(message)


def _shape_error(t, message):
    return (InvalidArgumentError if isinstance(t, EagerTensor) else ValueError)(message)


# ---------------------------------------------------------------- reverse_sequence
def reverse_sequence(input, seq_lengths, seq_axis=None, batch_axis=None, name=None):  # noqa: A002
    """``tf.reverse_sequence``: along ``seq_axis``, the first seq_lengths[b] elements of each
    batch entry b reversed, the rest kept. A batched gather of the source positions
    (where(i < len, len - 1 - i, i))."""
    if seq_axis is None:
        raise TypeError("reverse_sequence() missing required argument: 'seq_axis'")
    batch_axis = 0 if batch_axis is None else batch_axis
    (x,) = convert_all([input])
    (lens,) = convert_all([seq_lengths], graph=_graph(x))
    if lens.dtype not in _INDEX_TYPES:
        raise _type_error(f"Value for attr 'Tlen' of {lens.dtype.name} is not in the list of allowed values: "
                        "int32, int64")
    rank = x.shape.rank
    if rank is None or not x.shape.is_fully_defined():
        raise NotImplementedError("tf.reverse_sequence needs the input's shape known when the graph is built.")
    seq_axis, batch_axis = int(seq_axis), int(batch_axis)
    err = _shape_error(x, "")
    if seq_axis == batch_axis:
        raise type(err)(f"seq_dim == batch_dim == {seq_axis}")
    if not 0 <= seq_axis < rank:
        raise type(err)(f"seq_dim must be < input rank ( {seq_axis} vs. {rank})")
    if not 0 <= batch_axis < rank:
        raise type(err)(f"batch_dim must be < input rank ( {batch_axis} vs. {rank})")
    if lens.shape.rank != 1:
        raise type(err)(f"seq_lengths must be 1-dim, not {lens.shape.rank}")
    dims = x.shape.as_list()
    b, n = dims[batch_axis], dims[seq_axis]
    if lens.shape.dims[0] is not None and lens.shape.dims[0] != b:
        raise type(err)(f"Length of seq_lengths != input.dims({batch_axis}), ({lens.shape.dims[0]} vs. {b})")
    checks = [debugging.assert_non_negative(lens, message="seq_lens < 0"),
              debugging.assert_less_equal(lens, cast(n, lens.dtype), message=f"seq_lens > input.dims({seq_axis})")]
    lens = after_checks(checks, lens)
    rest = [a for a in range(rank) if a not in (batch_axis, seq_axis)]
    perm = [batch_axis, seq_axis] + rest
    moved = reshape(transpose(x, perm), [b, n, -1])
    pos = reshape(range_(n, dtype=lens.dtype), [1, n])
    length = reshape(lens, [b, 1])
    source = where(less(pos, length), subtract(subtract(length, 1), pos), multiply(pos, ones_like(length)))
    out = reshape(batched_gather(moved, source, axis=1, batch_dims=1), [dims[a] for a in perm])
    return transpose(out, list(np.argsort(perm)), name=name or "ReverseSequence")


# ---------------------------------------------------------------- identity_n, shape_n
def identity_n(input, name=None):  # noqa: A002
    """``tf.identity_n``: an identity of each tensor (each passes its gradient through)."""
    return [identity(t) for t in input]


def shape_n(input, out_type=dtypes.int32, name=None):  # noqa: A002
    """``tf.shape_n``: the shape of each tensor (one op in TF: the tensors share a dtype)."""
    out_type = dtypes.as_dtype(out_type)
    ts = [convert_all([t])[0] for t in input]
    if out_type not in _INDEX_TYPES:
        raise _type_error(f"Value for attr 'out_type' of {out_type.name} is not in the list of allowed values: "
                          "int32, int64")
    if not ts:
        raise ValueError("ShapeN needs at least one tensor (attr N has a minimum of 1)")
    if any(t.dtype != ts[0].dtype for t in ts):
        raise _type_error(f"Tensors in list passed to 'input' of 'ShapeN' Op have types "
                          f"[{', '.join(t.dtype.name for t in ts)}] that don't all match.")
    return [shape_of(t, out_type) for t in ts]


def strided_slice(input_, begin, end, strides=None, begin_mask=0, end_mask=0, ellipsis_mask=0, new_axis_mask=0,
                  shrink_axis_mask=0, var=None, name=None):
    """``tf.strided_slice``: the masks spelled out as the Python index they stand for
    (``x[1:, ..., tf.newaxis, 2]``), which ``__getitem__`` slices; bounds known only at run time
    take its run-time paths."""
    (x,) = convert_all([input_])
    begin, end = _slice_vector(begin, "begin"), _slice_vector(end, "end")
    strides = [1] * len(begin) if strides is None else _slice_vector(strides, "strides")
    if not len(begin) == len(end) == len(strides):
        raise ValueError(f"Expected begin, end, and strides to be 1D equal size tensors, but got shapes "
                         f"[{len(begin)}], [{len(end)}], and [{len(strides)}] instead.")
    key = []
    for i, (b, e, s) in enumerate(zip(begin, end, strides)):
        if ellipsis_mask >> i & 1:
            key.append(Ellipsis)
        elif new_axis_mask >> i & 1:
            key.append(None)
        elif shrink_axis_mask >> i & 1:
            key.append(b)
        else:
            key.append(slice(None if begin_mask >> i & 1 else b, None if end_mask >> i & 1 else e, s))
    return strided_slice_getitem(x, tuple(key))


def _slice_vector(value, what):
    """A bound vector as a list: Python ints where known, else scalar tensors."""
    static = get_static_value(value) if not isinstance(value, (list, tuple)) else None
    if static is not None:
        return [int(v) for v in np.asarray(static).reshape(-1)]
    if isinstance(value, (list, tuple)):
        return [int(v) if isinstance(v, (int, np.integer)) else v for v in value]
    t = convert_to_tensor(value)
    if t.shape.rank != 1 or t.shape.dims[0] is None:
        raise ValueError(f"strided_slice needs `{what}` of a known length.")
    return [t[i] for i in range(t.shape.dims[0])]
