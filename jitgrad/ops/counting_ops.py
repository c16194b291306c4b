"""TF functions that count or check elements, composed of existing ops as TF's Python
composes them: count_nonzero, zero_fraction, is_non_decreasing, is_strictly_increasing,
invert_permutation, confusion_matrix. They compile as their parts do; the checks TF's
kernels and Python make on values (invert_permutation's, confusion_matrix's) are tf.debugging
assertions: eagerly they raise at once, in a graph they are Assert ops the results depend on."""
import numpy as np

from .. import context, debugging, dtypes
from ..convert import convert_all, convert_to_tensor
from ..eager import EagerTensor
from ..errors import InvalidArgumentError
from .array_ops import range_, reshape, size, squeeze, stack
from .math_ops import (add, cast, equal, greater, greater_equal, identity, less, logical_and, maximum, multiply,
                       not_equal, ones_like, realdiv, subtract)
from .reduction_ops import reduce_all, reduce_max, reduce_sum
from .segment_ops import unsorted_segment_sum

_INDEX_TYPES = (dtypes.int32, dtypes.int64)


def _graph(t):
    return None if isinstance(t, EagerTensor) else t.graph


def after_checks(checks, t):
    """``t`` once the graph's assertions ``checks`` have run (eagerly they already have)."""
    ops = [c for c in checks if c is not None]
    if not ops:
        return t
    with ops[0].graph.control_dependencies(ops):
        return identity(t)


def count_nonzero(input, axis=None, keepdims=None, dtype=dtypes.int64, name=None):  # noqa: A002
    """``tf.math.count_nonzero``: the elements != 0 (False for bools), counted in int64 and
    cast to ``dtype``, as TF does."""
    (x,) = convert_all([input])
    zero = convert_to_tensor(np.zeros((), x.dtype.np), graph=_graph(x))
    counted = reduce_sum(cast(not_equal(x, zero), dtypes.int64), axis=axis, keepdims=bool(keepdims))
    return cast(counted, dtype, name=name)


def count_nonzero_v1(input_tensor=None, axis=None, keepdims=None, dtype=dtypes.int64, name=None,  # noqa: A002
                     reduction_indices=None, keep_dims=None, input=None):  # noqa: A002
    """TF 1's ``tf.compat.v1.count_nonzero``: its argument aliases."""
    x = input_tensor if input_tensor is not None else input
    axis = axis if axis is not None else reduction_indices
    keepdims = keepdims if keepdims is not None else keep_dims
    return count_nonzero(x, axis, keepdims, dtype, name)


def zero_fraction(value, name=None):
    """``tf.math.zero_fraction``: zeros / size in float32 (NaN for an empty tensor)."""
    (x,) = convert_all([value])
    total = size(x, out_type=dtypes.int64)
    zeros = subtract(total, count_nonzero(x, dtype=dtypes.int64))
    return realdiv(cast(zeros, dtypes.float32), cast(total, dtypes.float32), name=name or "fraction")


def _successive_pairs(x, compare):
    """compare(x[i + 1], x[i]) over the flattened tensor (TF's _get_results_for_monotonic_comparison)."""
    (x,) = convert_all([x])
    if not (x.dtype.is_floating or x.dtype.is_integer or x.dtype.is_complex):
        raise TypeError(f"Expected x to be numeric, instead found: {x}")
    flat = reshape(x, [-1])
    return compare(flat[1:], flat[:-1])


def is_non_decreasing(x, name=None):
    """``tf.math.is_non_decreasing``: each element >= the one before (in row-major order)."""
    return reduce_all(_successive_pairs(x, greater_equal), name=name)


def is_strictly_increasing(x, name=None):
    """``tf.math.is_strictly_increasing``: each element > the one before."""
    return reduce_all(_successive_pairs(x, greater), name=name)


def invert_permutation(x, name=None):
    """``tf.math.invert_permutation``: y[x[i]] = i. Checked as TF's kernel checks: each value
    in [0, n) and none twice (InvalidArgumentError)."""
    (p,) = convert_all([x])
    if p.dtype not in _INDEX_TYPES:
        raise (InvalidArgumentError if context.executing_eagerly() else TypeError)(
            f"Value for attr 'T' of {p.dtype.name} is not in the list of allowed values: int32, int64")
    if p.shape.rank is not None and p.shape.rank != 1:
        raise (InvalidArgumentError if isinstance(p, EagerTensor) else ValueError)(
            f"invert_permutation expects a 1D vector, got shape {p.shape}")
    n = p.shape.dims[0] if p.shape.rank == 1 and p.shape.dims[0] is not None else size(p, out_type=p.dtype)
    positions = range_(n, dtype=p.dtype)
    in_range = logical_and(greater_equal(p, 0), less(p, n))
    checks = [debugging.assert_equal(reduce_all(in_range), True, message="invert_permutation: a value is out "
                                     "of range [0, n)")]
    hits = unsorted_segment_sum(ones_like(p), p, n)
    checks.append(debugging.assert_equal(reduce_all(equal(hits, 1)), True,
                                         message="invert_permutation: a value appears more than once"))
    return after_checks(checks, unsorted_segment_sum(positions, p, n)) if name is None else \
        identity(after_checks(checks, unsorted_segment_sum(positions, p, n)), name=name)


def confusion_matrix(labels, predictions, num_classes=None, weights=None, dtype=dtypes.int32, name=None):
    """``tf.math.confusion_matrix``: m[label, prediction] summed over the pairs (weights, or
    ones), of [num_classes, num_classes] (default: the largest class + 1). Negative or
    out-of-range classes fail TF's assertions (InvalidArgumentError)."""
    labels, predictions = convert_all([labels]), convert_all([predictions])
    labels, predictions = _squeezable(labels[0], predictions[0])
    labels, predictions = cast(labels, dtypes.int64), cast(predictions, dtypes.int64)
    dtype = dtypes.as_dtype(dtype)
    checks = [debugging.assert_non_negative(labels, message="`labels` contains negative values"),
              debugging.assert_non_negative(predictions, message="`predictions` contains negative values")]
    if num_classes is None:
        n = add(maximum(reduce_max(predictions), reduce_max(labels)), 1)
    else:
        n = cast(num_classes, dtypes.int64)
        checks += [debugging.assert_less(labels, n, message="`labels` out of bound"),
                   debugging.assert_less(predictions, n, message="`predictions` out of bound")]
    if weights is not None:
        (w,) = convert_all([weights], graph=_graph(labels))
        if not predictions.shape.is_compatible_with(w.shape):
            raise ValueError(f"Shapes {predictions.shape} and {w.shape} are incompatible")
        values = cast(w, dtype)
    else:
        values = ones_like(predictions, dtype=dtype)
    static_n = num_classes if isinstance(num_classes, (int, np.integer)) else None
    flat = add(multiply(labels, n), predictions)
    if not isinstance(labels, EagerTensor):
        flat = after_checks(checks, flat)
    cells = multiply(n, n) if static_n is None else static_n * static_n
    counts = unsorted_segment_sum(values, flat, cells)
    dims = [static_n, static_n] if static_n is not None else stack([n, n])
    return reshape(counts, dims, name=name)


def _squeezable(labels, predictions):
    """TF's remove_squeezable_dimensions: a trailing dimension of 1 on the one of rank one more."""
    rl, rp = labels.shape.rank, predictions.shape.rank
    if rl is not None and rp is not None:
        if rp - rl == 1 and predictions.shape.dims[-1] in (1, None):
            predictions = squeeze(predictions, [-1])
        elif rl - rp == 1 and labels.shape.dims[-1] in (1, None):
            labels = squeeze(labels, [-1])
    return labels, predictions
