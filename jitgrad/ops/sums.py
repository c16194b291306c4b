"""How the reference kernels add floating-point values: Sum, Mean, SumToShape (the gradient of a
broadcast or bias_add), TileGrad, segment sums and GatherGrad all sum through here.

Half types (float16, bfloat16) are added in float32 and rounded to their type once, at the end,
as TF's Eigen reductions do: added in their own type a sum stalls once its ulp reaches twice the
addend (5,000 halves of 0.5 summed to 1024, TF 2500). numpy's pairwise sum along the innermost
axis already added halves in float, but along any other axis it added row after row in the
half type.

numpy sums the innermost axis pairwise (error ~log n), but any other axis row after row (error
~n: 1e6 rows of float32 0.1 gave 100958.34, exact 100000.0015, TF 99759.85). Here an outer axis
longer than BLOCK rows is summed in blocks of BLOCK rows, whose partial sums are summed the same
way (a tree of fan-out BLOCK: error ~BLOCK log_BLOCK n), still one vectorised numpy add per row
over the contiguous inner dimensions. An axis of at most BLOCK rows, and the innermost one, add
in numpy's order as before. The order follows the shape alone, not the memory
layout, so a sum is the same run to run. The compiled code adds float32 in float64 lanes
(codegen/lower_reduction.py); halves are never compiled (dtypes.NATIVE): the compiler hands
their graphs to these kernels.
"""
import math

import numpy as np

from .. import dtypes

BLOCK = 128


def accumulator(np_dtype):
    """The numpy dtype a sum of np_dtype values is added in: float32 for float16 / bfloat16
    (dtypes.sum_accumulator), np_dtype otherwise."""
    return dtypes.sum_accumulator(np_dtype)


def _sum_axis(y, i, acc):
    """y summed over axis i in dtype acc: pairwise when i is innermost (numpy), else in blocks."""
    n = y.shape[i]
    if i == y.ndim - 1 or n <= BLOCK:
        return np.add.reduce(y, axis=i, dtype=acc)
    k = n // BLOCK
    pre = (slice(None),) * i
    head = y[pre + (slice(0, k * BLOCK),)].reshape(y.shape[:i] + (k, BLOCK) + y.shape[i + 1:])
    s = _sum_axis(np.add.reduce(head, axis=i + 1, dtype=acc), i, acc)
    if k * BLOCK < n:
        s = np.add(s, np.add.reduce(y[pre + (slice(k * BLOCK, None),)], axis=i, dtype=acc))
    return s


def add_reduce(x, axes, keepdims=False):
    """x summed over ``axes`` (non-negative ints), in ``accumulator(x.dtype)`` (the caller rounds
    to x's dtype). Integer sums wrap the same in any order: numpy's own."""
    acc = accumulator(x.dtype)
    axes = tuple(sorted(set(axes)))
    if not axes:     # TF copies x (-0.0 stays -0.0), where numpy's sum adds it to its identity +0
        return np.array(x, dtype=acc)
    if x.dtype.kind not in "fcV" or not axes or \
            math.prod(x.shape[d] for d in axes if d != x.ndim - 1) <= BLOCK:
        # no more than BLOCK rows outside the innermost axis: numpy's order (its pairwise inner sums)
        return np.sum(x, axis=axes, keepdims=keepdims, dtype=acc)
    x = np.ascontiguousarray(x)    # the order of the adds follows the shape alone, not the strides
    out_shape = tuple(1 if d in axes else n for d, n in enumerate(x.shape) if keepdims or d not in axes)
    # adjacent dims both reduced or both kept are one dim (a view of a contiguous x); dims of 1 go
    groups = []
    for d, n in enumerate(x.shape):
        if n == 1:
            continue
        r = d in axes
        if groups and groups[-1][1] == r:
            groups[-1][0] *= n
        else:
            groups.append([n, r])
    y = x.reshape([n for n, _ in groups])
    for i in reversed([i for i, (_, r) in enumerate(groups) if r]):
        y = _sum_axis(y, i, acc)
    return np.asarray(y, dtype=acc).reshape(out_shape)


def reference_sum(x, axes, keepdims=False):
    """x summed over ``axes`` and rounded once to x's dtype."""
    return add_reduce(x, axes, keepdims).astype(x.dtype, copy=False)
