"""tf.linalg functions that TF itself composes from other ops: trace, logdet, band_part,
and cross (an op in TF; here its three component formulas, whose gradient is TF's
cross(v, g), cross(g, u))."""
import numpy as np

from ..convert import convert_all, convert_to_tensor
from ..eager import EagerTensor
from .array_ops import stack, unstack
from .complex_ops import real
from .linalg_ops import cholesky, diag_part
from .math_ops import (less, less_equal, log, logical_and, logical_or, multiply, subtract, where,
                       zeros_like)
from .reduction_ops import reduce_sum


def trace(x, name=None):
    """``tf.linalg.trace``: the sum of each matrix's main diagonal."""
    return reduce_sum(diag_part(x), [-1], name=name)


def logdet(matrix, name=None):
    """``tf.linalg.logdet`` of Hermitian positive definite matrices, as TF: twice the sum of
    the logs of the Cholesky factor's diagonal."""
    return multiply(2.0, reduce_sum(log(real(diag_part(cholesky(matrix)))), [-1]), name=name)


def band_part(input, num_lower, num_upper, name=None):  # noqa: A002
    """``tf.linalg.band_part``: entries (m, n) kept where (num_lower < 0 or m - n <= num_lower)
    and (num_upper < 0 or n - m <= num_upper), zeros elsewhere."""
    (x,) = convert_all([input])
    dims = x.shape.dims
    if dims is None or len(dims) < 2 or dims[-1] is None or dims[-2] is None:
        raise NotImplementedError("tf.linalg.band_part needs the matrices' sizes known when the graph is built.")
    g = None if isinstance(x, EagerTensor) else x.graph
    lower, upper = (convert_to_tensor(v, graph=g) for v in (num_lower, num_upper))
    rows = np.arange(dims[-2], dtype=np.int64)[:, None]
    cols = np.arange(dims[-1], dtype=np.int64)[None, :]
    below, above = convert_to_tensor((rows - cols).astype(lower.dtype.np), graph=g), \
        convert_to_tensor((cols - rows).astype(upper.dtype.np), graph=g)
    keep = logical_and(logical_or(less(lower, 0), less_equal(below, lower)),
                       logical_or(less(upper, 0), less_equal(above, upper)))
    return where(keep, x, zeros_like(x), name=name)


def cross(a, b, name=None):
    """``tf.linalg.cross``: pairwise cross products over the last axis (size 3)."""
    a, b = convert_all([a, b])
    for t in (a, b):
        if t.shape.rank is not None and t.shape.dims[-1] not in (None, 3):
            raise ValueError(f"Cross product needs a last dimension of 3, got shape {t.shape}")
    a1, a2, a3 = unstack(a, 3, axis=-1)
    b1, b2, b3 = unstack(b, 3, axis=-1)
    return stack([subtract(multiply(a2, b3), multiply(a3, b2)),
                  subtract(multiply(a3, b1), multiply(a1, b3)),
                  subtract(multiply(a1, b2), multiply(a2, b1))], axis=-1, name=name)



