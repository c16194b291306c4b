"""How the reference kernels add floating-point values: Sum, Mean, SumToShape (the gradient of a
broadcast or bias_add), TileGrad, segment sums and GatherGrad all sum through here.

Half types (float16, bfloat16) are added in float32 and rounded to their type once, at the end,
as TF's Eigen reductions do: added in their own type a sum stalls once its ulp reaches twice the
addend (5,000 halves of 0.5 summed to 1024, TF 2500). numpy's pairwise sum along the innermost
axis already added halves in float, but along any other axis it added row after row in the
half type.

Halves are never compiled (dtypes.NATIVE): the compiler hands their graphs to these kernels.
"""
import numpy as np

from .. import dtypes


def accumulator(np_dtype):
    """The numpy dtype a sum of np_dtype values is added in: float32 for float16 / bfloat16
    (dtypes.sum_accumulator), np_dtype otherwise."""
    return dtypes.sum_accumulator(np_dtype)


def add_reduce(x, axes, keepdims=False):
    """x summed over ``axes`` (non-negative ints), in ``accumulator(x.dtype)`` (the caller rounds
    to x's dtype)."""
    return np.sum(x, axis=tuple(axes), keepdims=keepdims, dtype=accumulator(x.dtype))


def reference_sum(x, axes, keepdims=False):
    """x summed over ``axes`` and rounded once to x's dtype."""
    return add_reduce(x, axes, keepdims).astype(x.dtype, copy=False)
