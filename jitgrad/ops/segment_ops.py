"""Segment reductions: tf.math.unsorted_segment_{sum,max,min,prod,mean,sqrt_n} and
tf.math.segment_{sum,mean,max,min,prod} (segment ids sorted).

One static op, ``SegmentReduction`` (data, ids) with attrs kind (sum / max / min / prod),
num_segments and sorted, lowered natively (codegen/lower_segment.py: ids bounds-checked in the
kernel). Where the number of segments is a run-time value (a num_segments tensor, or the last of
sorted ids) the graph holds ``DynamicSegmentReduction`` (data, ids, count): the interpreter runs
it as it is, a compiled run evaluates ``count`` on the host and compiles the static op for its
value (OpDef.specialise, as array_ops_dynamic.py's ops); sorted ids' count is max(0, ids + 1), so
new ids with as many segments reuse the kernel (which checks their order itself). Means and sqrt_n are TF's composites
(sum / count); the gradients are TF's (_UnsortedSegmentSumGrad, _SegmentMinOrMaxGrad, ...).

TF's values: unsorted ops drop negative ids; an unsorted max / min of an empty segment is the
dtype's lowest / highest (-FLT_MAX, not -inf), a sorted one 0; prod of an empty segment is 1.
Max / min combine as TF's kernels do, acc = (acc > x) ? acc : x, so a NaN is kept only when no
later element follows it; a sorted segment starts from its first element, an unsorted one from
lowest / highest (so an unsorted max of -inf alone is -FLT_MAX, as in TF).
"""
import numpy as np

from .. import dtypes
from ..convert import convert_to_tensor
from ..errors import InvalidArgumentError
from ._infer import FLOATS, NUMBERS, check_dtype
from .array_ops import concat, expand_dims, gather, get_static_value, reshape, zeros
from .math_ops import (abs, add, cast, equal, floordiv, greater, greater_equal, logical_and, maximum, multiply,  # noqa: A004
                       ones_like, realdiv, sign, sqrt, where, zeros_like)
from .reduction_ops import reduce_max
from . import registry as _registry
from .registry import apply_op, register
from .sums import accumulator

KINDS = ("sum", "max", "min", "prod")
_INDEX_TYPES = (dtypes.int32, dtypes.int64)


def identity_value(kind, dt, sorted_):
    """What a segment starts from: 0, 1, lowest / highest (unsorted max / min); a sorted max /
    min starts from NaN (ints: lowest / highest), which its first element replaces (see above)."""
    if kind == "sum":
        return 0
    if kind == "prod":
        return 1
    if dt.is_floating and sorted_:
        return float("nan")
    info = np.finfo(dt.np) if dt.is_floating else np.iinfo(dt.np)
    return info.min if kind == "max" else info.max


def _check_ids(data_shape, ids_shape, sorted_):
    """TF's shape functions: ids' shape a prefix of data's (sorted: ids a vector, whose length
    only the kernel checks: _check_sorted_prefix, TF 2.21's InvalidArgumentError when it runs)."""
    if ids_shape is None or data_shape is None:
        return
    if sorted_ and len(ids_shape) != 1:
        raise ValueError(f"Shape must be rank 1 but is rank {len(ids_shape)} for 'SegmentReduction' (segment_ids)")
    if not sorted_:
        _check_prefix(data_shape, ids_shape)


def _check_sorted_prefix(shapes, attrs):
    if attrs["sorted"] and shapes[0] is not None and shapes[1] is not None:
        _check_prefix(shapes[0], shapes[1])


def _check_prefix(data_shape, ids_shape):
    if len(ids_shape) > len(data_shape):
        raise ValueError(f"Shape must be at least rank {len(ids_shape)} but is rank {len(data_shape)} (data)")
    for a, b in zip(ids_shape, data_shape):
        if a is not None and b is not None and a != b:
            raise ValueError(f"Dimensions must be equal, but are {b} and {a}: data.shape {list(data_shape)} "
                             f"does not start with segment_ids.shape {list(ids_shape)}")


def _infer(shapes, dts, attrs):
    check_dtype("SegmentReduction", dts[0], NUMBERS, "data")
    check_dtype("SegmentReduction", dts[1], _INDEX_TYPES, "segment_ids")
    _check_ids(shapes[0], shapes[1], attrs["sorted"])
    n = attrs.get("num_segments")
    if shapes[0] is None or shapes[1] is None:
        return [(None, dts[0])]
    return [((n,) + tuple(shapes[0][len(shapes[1]):]), dts[0])]


def check_sorted_ids(ids):
    """TF's run-time checks of sorted segment ids (SegmentReductionOp)."""
    if ids.size and ids.reshape(-1)[0] < 0:
        raise InvalidArgumentError("segment ids must be >= 0")
    if ids.size > 1 and np.any(np.diff(ids.reshape(-1)) < 0):
        raise InvalidArgumentError("segment ids are not increasing")


def _check_range(ids, n):
    flat = ids.reshape(-1)
    bad = np.nonzero(flat >= n)[0]
    if bad.size:
        k = int(bad[0])
        raise InvalidArgumentError(f"segment_ids[{k}] = {int(flat[k])} is out of range [0, {n})")


def _kernel(attrs, data, ids):
    kind, n, sorted_ = attrs["kind"], attrs["num_segments"], attrs["sorted"]
    if data.shape[:ids.ndim] != ids.shape:
        raise InvalidArgumentError(f"data.shape = {list(data.shape)} does not start with segment_ids.shape = "
                                   f"{list(ids.shape)}")
    if sorted_:
        check_sorted_ids(ids)
    _check_range(ids, n)
    dt = dtypes.as_dtype(data.dtype)
    rows = data.reshape((ids.size,) + data.shape[ids.ndim:])
    # a half-type sum is added in float32 and rounded once (sums.py), as TF's sorted kernel does
    # (its unsorted one adds in the half type and stalls: 5,000 x 0.5 gave 1024)
    acc = accumulator(data.dtype) if kind == "sum" else data.dtype
    out = np.full((n,) + rows.shape[1:], identity_value(kind, dt, False), acc)
    flat = ids.reshape(-1)
    if sorted_ and kind in ("max", "min"):
        out[...] = 0
        out[flat] = identity_value(kind, dt, True)
    with np.errstate(all="ignore"):
        for k, s in enumerate(flat):
            if s < 0:
                continue            # TF's unsorted ops drop negative ids (sorted ones raised above)
            cur, v = out[s], rows[k]
            if kind == "sum":
                out[s] = cur + v
            elif kind == "prod":
                out[s] = cur * v
            elif kind == "max":
                out[s] = np.where(cur > v, cur, v)
            else:
                out[s] = np.where(cur < v, cur, v)
    return out.astype(data.dtype, copy=False)


def _gather_drop_negatives(params, ids, data_rank):
    """TF's _GatherDropNegatives: params gathered at max(ids, 0), 0 where an id is negative."""
    clipped = maximum(ids, zeros_like(ids))
    gathered = gather(params, clipped)
    keep = greater_equal(ids, zeros_like(ids))
    for _ in range(data_rank - ids.shape.rank):
        keep = expand_dims(keep, -1)
    return where(keep, gathered, zeros_like(gathered)), keep


def _ranks(op):
    data, ids = op.inputs[0], op.inputs[1]
    if data.shape.rank is None or ids.shape.rank is None:
        raise NotImplementedError("the gradient of a segment reduction needs the ranks of data and segment_ids")
    return data.shape.rank


def _same_segments(op, kind):
    """``kind`` reduction of a tensor shaped as op's data into op's segments, as TF's rules call
    it: sorted ids again, or the same num_segments (attr or tensor)."""
    ids, sorted_ = op.inputs[1], op.get_attr("sorted")
    n = op.attrs.get("num_segments") if len(op.inputs) == 2 else op.inputs[2]
    return lambda x: _reduce(kind, x, ids, n, sorted_, None)


def _grad(op, g):
    kind, sorted_ = op.get_attr("kind"), op.get_attr("sorted")
    data, ids = op.inputs[0], op.inputs[1]
    rank = _ranks(op)
    rest = [None] * (len(op.inputs) - 1)
    if kind == "sum":
        return [_gather_drop_negatives(g, ids, rank)[0]] + rest
    if kind in ("max", "min"):
        # TF's _(Unsorted)SegmentMinOrMaxGrad: split evenly among the elements equal to the result
        out_at, keep = _gather_drop_negatives(op.outputs[0], ids, rank)
        selected = logical_and(equal(data, out_at), keep)
        count = _same_segments(op, "sum")(cast(selected, g.dtype))
        share = _gather_drop_negatives(realdiv(g, count), ids, rank)[0]
        return [where(selected, share, zeros_like(share))] + rest
    # prod: TF's _(Unsorted)SegmentProdGrad (no zero: prod / x; one zero: the product of the others
    # at the zero, 0 elsewhere; two or more: 0)
    is_zero = equal(data, zeros_like(data))
    zeros = _same_segments(op, "sum")(cast(is_zero, dtypes.int32))
    g = where(greater(zeros, 1), zeros_like(g), g)
    nonzero_data = where(is_zero, ones_like(data), data)
    nonzero_prod = _same_segments(op, "prod")(nonzero_data)
    clipped = maximum(ids, zeros_like(ids))
    # TF divides by the data itself in the unsorted rule and by the data with zeros made 1 in the
    # sorted one: the same first derivative, but the sorted one's own derivative stays finite
    divisor = nonzero_data if sorted_ else data
    partial = where(is_zero, gather(nonzero_prod, clipped), realdiv(gather(op.outputs[0], clipped), divisor))
    return [multiply(_gather_drop_negatives(g, ids, rank)[0], partial)] + rest


register("SegmentReduction", denormals="flush", infer=_infer, kernel=_kernel, grad=_grad, kind="other", cost=1,
         run_check=_check_sorted_prefix)


# ---------------------------------------------------------------- the number of segments a run-time value
def _dynamic_infer(shapes, dts, attrs):
    check_dtype("SegmentReduction", dts[2], _INDEX_TYPES, "num_segments")
    if shapes[2] not in (None, ()):
        raise ValueError(f"Shape must be rank 0 but is rank {len(shapes[2])} for 'UnsortedSegmentReduction' "
                         "(num_segments)")
    (out,) = _infer(shapes[:2], dts[:2], {**attrs, "num_segments": None})
    return [out]


def _count(attrs, source):
    """The static op's num_segments: the num_segments value, or (sorted) the largest id + 1."""
    n = int(source)
    if n < 0:
        raise InvalidArgumentError(f"Input num_segments == {n} must not be negative.")
    return n


def _dynamic_specialise(attrs, source):
    return "SegmentReduction", {**attrs, "num_segments": _count(attrs, source)}


register("DynamicSegmentReduction", denormals="flush", infer=_dynamic_infer,
         kernel=lambda attrs, data, ids, source: _kernel({**attrs, "num_segments": _count(attrs, source)}, data, ids),
         grad=_grad, data_dependent_shape=True, shape_from=2, specialise=_dynamic_specialise,
         lowering="interpreter", kind="other", run_check=_check_sorted_prefix)


# ---------------------------------------------------------------- public functions
def _reduce(kind, data, ids, num_segments, sorted_, name):
    data, ids = convert_to_tensor(data), convert_to_tensor(ids)
    attrs = {"kind": kind, "sorted": sorted_}
    op_name = name or ("Segment" if sorted_ else "UnsortedSegment") + kind.capitalize()
    if sorted_:
        # the number of segments, max(0, ids + 1) (the last id + 1 when they are sorted, which the
        # kernels check): a compiled run is specialised on this count, not on the ids' values
        flat = add(reshape(ids, [-1]), 1)
        count = reduce_max(concat([zeros([1], flat.dtype), flat], 0))
        return apply_op("DynamicSegmentReduction", [data, ids, count], attrs, name=op_name)
    n = get_static_value(num_segments) if not isinstance(num_segments, (int, np.integer)) else num_segments
    if n is None:
        return apply_op("DynamicSegmentReduction", [data, ids, convert_to_tensor(num_segments)], attrs, name=op_name)
    if np.ndim(n) != 0:
        raise ValueError(f"Shape must be rank 0 but is rank {np.ndim(n)} for '{op_name}' (num_segments)")
    if int(n) < 0:      # TF's shape function checks a constant num_segments: ValueError in a graph
        msg = f"Input num_segments == {int(n)} must not be negative."
        raise InvalidArgumentError(msg) if _registry.eager_now() else ValueError(msg)
    return apply_op("SegmentReduction", [data, ids], {**attrs, "num_segments": int(n)}, name=op_name)


def unsorted_segment_sum(data, segment_ids, num_segments, name=None):
    return _reduce("sum", data, segment_ids, num_segments, False, name)


def unsorted_segment_max(data, segment_ids, num_segments, name=None):
    return _reduce("max", data, segment_ids, num_segments, False, name)


def unsorted_segment_min(data, segment_ids, num_segments, name=None):
    return _reduce("min", data, segment_ids, num_segments, False, name)


def unsorted_segment_prod(data, segment_ids, num_segments, name=None):
    return _reduce("prod", data, segment_ids, num_segments, False, name)


def segment_sum(data, segment_ids, name=None):
    return _reduce("sum", data, segment_ids, None, True, name)


def segment_max(data, segment_ids, name=None):
    return _reduce("max", data, segment_ids, None, True, name)


def segment_min(data, segment_ids, name=None):
    return _reduce("min", data, segment_ids, None, True, name)


def segment_prod(data, segment_ids, name=None):
    return _reduce("prod", data, segment_ids, None, True, name)


def _counts(data, ids, sum_fn):
    """TF's _unsorted_segment_N: per segment, how many ids name it, at least 1, shaped to
    broadcast against the sums (a trailing 1 per data dim past ids')."""
    ones = cast(ones_like(ids), data.dtype)
    n = sum_fn(ones, ids)
    for _ in range(data.shape.rank - ids.shape.rank):
        n = expand_dims(n, -1)
    return n


def _ranked(data, ids, what):
    data, ids = convert_to_tensor(data), convert_to_tensor(ids)
    if data.shape.rank is None or ids.shape.rank is None:
        raise NotImplementedError(f"{what} needs the ranks of data and segment_ids when the graph is built")
    return data, ids


def unsorted_segment_mean(data, segment_ids, num_segments, name=None):
    """TF's composite: unsorted_segment_sum(data) / max(count, 1), in data's dtype for floats; for
    integers TF's integer sum / integer count is a true division: float64."""
    data, ids = _ranked(data, segment_ids, "unsorted_segment_mean")
    check_dtype("UnsortedSegmentMean", data.dtype, NUMBERS, "data")
    n = _counts(data, ids, lambda x, i: unsorted_segment_sum(x, i, num_segments))
    summed = unsorted_segment_sum(data, ids, num_segments)
    if data.dtype.is_integer:
        summed, n = cast(summed, dtypes.float64), cast(n, dtypes.float64)
    return realdiv(summed, maximum(n, 1.0), name=name)


def unsorted_segment_sqrt_n(data, segment_ids, num_segments, name=None):
    """TF's composite: unsorted_segment_sum(data) / sqrt(max(count, 1))."""
    data, ids = _ranked(data, segment_ids, "unsorted_segment_sqrt_n")
    check_dtype("UnsortedSegmentSqrtN", data.dtype, FLOATS, "data")
    n = _counts(data, ids, lambda x, i: unsorted_segment_sum(x, i, num_segments))
    return realdiv(unsorted_segment_sum(data, ids, num_segments), sqrt(maximum(n, 1.0)), name=name)


def segment_mean(data, segment_ids, name=None):
    """TF's SegmentMean kernel: sum / count per segment (0 for an empty one), integers
    divided as C++ does (truncated toward zero)."""
    data, ids = _ranked(data, segment_ids, "segment_mean")
    n = _counts(data, ids, segment_sum)
    n = maximum(n, 1)
    s = segment_sum(data, ids)
    if data.dtype.is_floating:
        return realdiv(s, n, name=name)
    return multiply(sign(s), floordiv(abs(s), n), name=name)


__all__ = ["unsorted_segment_sum", "unsorted_segment_max", "unsorted_segment_min", "unsorted_segment_prod",
           "unsorted_segment_mean", "unsorted_segment_sqrt_n", "segment_sum", "segment_max", "segment_min",
           "segment_prod", "segment_mean"]
