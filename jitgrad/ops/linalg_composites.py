"""tf.linalg functions that TF itself composes from other ops: trace, logdet, band_part,
normalize, cholesky_solve, tensor_diag / tensor_diag_part, and cross (an op in TF; here its
three component formulas, whose gradient is TF's cross(v, g), cross(g, u)) and set_diag
(an op in TF; here a select, main diagonal only)."""
import numpy as np

from ..convert import convert_all, convert_to_tensor
from ..eager import EagerTensor
from ..errors import InvalidArgumentError
from .array_ops import expand_dims, gather, reshape, stack, unstack
from .complex_ops import real
from .linalg_ops import cholesky, diag, diag_part, matrix_triangular_solve, norm
from .math_ops import (cast, less, less_equal, log, logical_and, logical_or, multiply, subtract, truediv, where,
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


def normalize(tensor, ord="euclidean", axis=None, name=None):  # noqa: A002
    """``tf.linalg.normalize``: (tensor / norm, norm), the norm kept with size-1 axes."""
    (x,) = convert_all([tensor])
    n = cast(norm(x, ord, axis, keepdims=True), x.dtype)
    return truediv(x, n, name=name), n


def cholesky_solve(chol, rhs, name=None):
    """``tf.linalg.cholesky_solve``: x with A x = rhs given A's lower Cholesky factor, as TF:
    two triangular solves (L y = rhs, L^H x = y)."""
    y = matrix_triangular_solve(chol, rhs, lower=True, adjoint=False)
    return matrix_triangular_solve(chol, y, lower=True, adjoint=True, name=name)


def set_diag(input, diagonal, name="set_diag", k=0, align="RIGHT_LEFT"):  # noqa: A002
    """``tf.linalg.set_diag`` (main diagonal only): input with entries (i, i) taken from
    ``diagonal`` [..., min(m, n)], by a select (so inf / NaN elsewhere stay put)."""
    if k != 0:
        raise NotImplementedError("jitgrad's tf.linalg.set_diag supports the main diagonal only (k=0).")
    x, d = convert_all([input, diagonal])
    dims = x.shape.as_list() if x.shape.is_fully_defined() else None
    if dims is None or not d.shape.is_fully_defined():
        raise NotImplementedError("jitgrad's tf.linalg.set_diag needs the shapes known when the graph is built.")
    if len(dims) < 2:
        raise _shape_error(x, f"input must be at least a matrix, got shape {dims}")
    m, n = dims[-2:]
    if d.shape.as_list() != dims[:-2] + [min(m, n)]:
        raise _shape_error(x, f"diagonal must have shape {dims[:-2] + [min(m, n)]}, got {d.shape.as_list()}")
    # column j of the row broadcast holds diagonal[j] (past min(m, n) any value: the mask drops it)
    columns = np.minimum(np.arange(n), max(min(m, n) - 1, 0)).astype(np.int32)
    row = expand_dims(gather(d, columns, axis=len(dims) - 2), -2) if min(m, n) else zeros_like(x)
    mask = convert_to_tensor(np.eye(m, n, dtype=bool), graph=None if isinstance(x, EagerTensor) else x.graph)
    return where(mask, row, x, name=name)


def tensor_diag(diagonal, name=None):
    """``tf.linalg.tensor_diag``: rank k -> rank 2k, out[i..., i...] = diagonal[i...]."""
    (d,) = convert_all([diagonal])
    if not d.shape.is_fully_defined():
        raise NotImplementedError("jitgrad's tf.linalg.tensor_diag needs the shape known when the graph is built.")
    dims = d.shape.as_list()
    size = int(np.prod(dims, dtype=np.int64))
    return reshape(diag(reshape(d, [size])), dims + dims, name=name)


def tensor_diag_part(input, name=None):  # noqa: A002
    """``tf.linalg.tensor_diag_part``: rank 2k -> rank k, the entries [i..., i...]."""
    (x,) = convert_all([input])
    if not x.shape.is_fully_defined():
        raise NotImplementedError("jitgrad's tf.linalg.tensor_diag_part needs the shape known when the graph "
                                  "is built.")
    dims = x.shape.as_list()
    half = len(dims) // 2
    if len(dims) % 2 or dims[:half] != dims[half:]:
        raise _shape_error(x, f"The input shape must be [D1, ..., Dk, D1, ..., Dk], got {dims}")
    size = int(np.prod(dims[:half], dtype=np.int64))
    return reshape(diag_part(reshape(x, [size, size])), dims[:half], name=name)


def _shape_error(x, message):
    return (InvalidArgumentError if isinstance(x, EagerTensor) else ValueError)(message)
