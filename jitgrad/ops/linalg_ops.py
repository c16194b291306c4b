"""Matrix multiplication (2-D and batched with broadcasting batch dims); tf.norm
and tf.eye as composites / constants."""
import numpy as np

from .. import dtypes
from ..convert import convert_all
from ..errors import shape_error, InvalidArgumentError
from ..shapes import broadcast_dims, normalize_axes
from ._infer import COMPLEX, FLOATS, NUMBERS, check_dtype, check_same
from .complex_ops import complex as complex_, conj, real
from .math_ops import reduce_to
from .registry import apply_op, register
from .array_ops import _static_value, constant, expand_dims, gather, reshape, squeeze, transpose
from .math_ops import abs as abs_, cast, identity, multiply, ones_like, pow as pow_, sqrt, where, zeros_like
from .reduction_ops import reduce_max, reduce_sum


def _matmul_dims(a, b, ta, tb, what):
    m, k1 = (a[-1], a[-2]) if ta else (a[-2], a[-1])
    k2, n = (b[-1], b[-2]) if tb else (b[-2], b[-1])
    if k1 is not None and k2 is not None and k1 != k2:
        raise ValueError(f"Dimensions must be equal, but are {k1} and {k2} for '{what}' with input shapes: "
                         f"{list(a)}, {list(b)}.")
    return m, n


def _matmul_infer(shapes, dts, attrs):
    check_same("MatMul", dts)
    check_dtype("MatMul", dts[0], NUMBERS + COMPLEX)
    a, b = shapes
    if a is None or b is None:
        return [((None, None), dts[0])]
    if len(a) != 2 or len(b) != 2:
        raise ValueError(f"Shape must be rank 2 but is rank {len(a) if len(a) != 2 else len(b)} for 'MatMul' "
                         f"with input shapes: {list(a)}, {list(b)}.")
    return [(_matmul_dims(a, b, attrs["transpose_a"], attrs["transpose_b"], "MatMul"), dts[0])]


def _batch_infer(shapes, dts, attrs):
    check_same("BatchMatMulV2", dts)
    check_dtype("BatchMatMulV2", dts[0], NUMBERS + COMPLEX)
    a, b = shapes
    if a is None or b is None:
        return [(None, dts[0])]
    if len(a) < 2 or len(b) < 2:
        raise ValueError(f"In[0] and In[1] must have rank >= 2 for BatchMatMulV2, got {list(a)}, {list(b)}")
    batch = broadcast_dims(a[:-2], b[:-2], "'BatchMatMulV2' batch dimensions")
    return [(tuple(batch) + _matmul_dims(a, b, attrs["adj_x"], attrs["adj_y"], "BatchMatMulV2"), dts[0])]


def _mm(a, b, ta, tb):
    if ta:
        a = np.swapaxes(a, -1, -2)
    if tb:
        b = np.swapaxes(b, -1, -2)
    if a.dtype.kind == "V" and a.dtype.itemsize == 2:
        return _bfloat16_of_float32_truncated(np.matmul(a.astype(np.float32), b.astype(np.float32)), a.dtype)
    return np.matmul(a, b)


def _bfloat16_of_float32_truncated(f, bf16):
    """TF 2.21's CPU bfloat16 MatMul / BatchMatMul: a float32 product, then the high 16 bits of
    each float (truncation toward zero, tensorflow::FloatToBFloat16), not round to nearest:
    [[-0.63671875, 1.453125, 0.4140625]] @ [[-1.6328125], [-0.578125], [-0.1171875]] is 0.151031...
    in float32 and 0.150390625 in TF (nearest: 0.1513671875). Matched TF bit for bit on shapes
    up to 33x129x17 (tf_fuzz features seed 130209). A NaN stays NaN."""
    f = np.ascontiguousarray(f, np.float32)
    hi = (f.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)
    return np.where(np.isnan(f), f, hi).astype(bf16)


def _batch_mm(a, b, adj_x, adj_y):
    """BatchMatMulV2's adj_x / adj_y are adjoints: transposed and conjugated (for complex)."""
    return _mm(np.conj(a) if adj_x and a.dtype.kind == "c" else a,
               np.conj(b) if adj_y and b.dtype.kind == "c" else b, adj_x, adj_y)


def _matmul_grad_pairs(a, b, g, ta, tb, mm):
    if not ta and not tb:
        return mm(g, b, False, True), mm(a, g, True, False)
    if not ta and tb:
        return mm(g, b, False, False), mm(g, a, True, False)
    if ta and not tb:
        return mm(b, g, False, True), mm(a, g, False, False)
    return mm(b, g, True, True), mm(g, a, True, True)


def _matmul_grad(op, g):
    # TF's _MatMulGrad: MatMul only transposes, so complex operands are conjugated first
    a, b = conj(op.inputs[0]), conj(op.inputs[1])
    return list(_matmul_grad_pairs(a, b, g, op.get_attr("transpose_a"), op.get_attr("transpose_b"),
                                   lambda x, y, ta, tb: matmul(x, y, transpose_a=ta, transpose_b=tb)))


def _batch_grad(op, g):
    # TF's _BatchMatMulV2: the same pairs, with adjoints (so complex operands come conjugated)
    a, b = op.inputs
    ga, gb = _matmul_grad_pairs(a, b, g, op.get_attr("adj_x"), op.get_attr("adj_y"),
                                lambda x, y, ta, tb: _batch_matmul(x, y, ta, tb))
    return [reduce_to(ga, a), reduce_to(gb, b)]


register("MatMul", infer=_matmul_infer,
         kernel=lambda attrs, a, b: _mm(a, b, attrs["transpose_a"], attrs["transpose_b"]),
         grad=_matmul_grad, kind="matmul")
register("BatchMatMulV2", infer=_batch_infer,
         kernel=lambda attrs, a, b: _batch_mm(a, b, attrs["adj_x"], attrs["adj_y"]),
         grad=_batch_grad, kind="matmul")


def _batch_matmul(a, b, adj_x, adj_y, name=None):
    return apply_op("BatchMatMulV2", [a, b], {"adj_x": bool(adj_x), "adj_y": bool(adj_y)},
                    name=name or "BatchMatMulV2")


def _mixed_bfloat16_to_float32(a, b):
    """TF multiplies a rank-2 bfloat16 operand with a float32 one by SparseMatMul, whose result
    is float32 (each bfloat16 widened exactly; its gradient comes back as bfloat16): the same
    as casting the bfloat16 operand to float32 first (tf_fuzz features 210008 raised a dtype
    TypeError here)."""
    pair = {a.dtype, b.dtype}
    if dtypes.bfloat16 in pair and dtypes.float32 in pair:
        return [cast(t, dtypes.float32) if t.dtype == dtypes.bfloat16 else t for t in (a, b)]
    return a, b


def matmul(a, b, transpose_a=False, transpose_b=False, adjoint_a=False, adjoint_b=False,
           a_is_sparse=False, b_is_sparse=False, output_type=None, name=None):
    """``tf.linalg.matmul``, as TF composes it: MatMul (rank 2) only transposes, so an adjoint
    operand is conjugated first; BatchMatMulV2 only takes adjoints, so a transposed one is
    conjugated first (conj of a real tensor is the tensor itself)."""
    for t, adj, which in ((transpose_a, adjoint_a, "a"), (transpose_b, adjoint_b, "b")):
        if t and adj:
            raise ValueError(f"Only one of `transpose_{which}` and `adjoint_{which}` can be True. "
                             f"Received `transpose_{which}`={t}, `adjoint_{which}`={adj}.")
    a, b = convert_all([a, b])
    ra, rb = a.shape.rank, b.shape.rank
    if ra is not None and rb is not None and (ra < 2 or rb < 2):
        raise shape_error(f"Shape must be rank >= 2 for MatMul, got shapes {a.shape} and {b.shape}.")
    if ra == 2 and rb == 2:
        a, b = _mixed_bfloat16_to_float32(a, b)
        a, b = (conj(a) if adjoint_a else a), (conj(b) if adjoint_b else b)
        return apply_op("MatMul", [a, b], {"transpose_a": bool(transpose_a or adjoint_a),
                                           "transpose_b": bool(transpose_b or adjoint_b)}, name=name or "MatMul")
    a, b = (conj(a) if transpose_a else a), (conj(b) if transpose_b else b)
    return _batch_matmul(a, b, transpose_a or adjoint_a, transpose_b or adjoint_b, name)


# ---------------------------------------------------------------- norm / eye (composites)
def norm(tensor, ord="euclidean", axis=None, keepdims=None, name=None):  # noqa: A002
    """``tf.norm`` / ``tf.linalg.norm``, composed as TF's linalg_ops.norm:
    'euclidean' (and 2, 'fro') is sqrt(reduce_sum(x * x)) -- so its gradient at
    0 is NaN, as TF's -- 1 / inf / p > 0 via abs, sums, maxima and pow. Matrix
    norms (axis a pair of ints) are 'euclidean' / 'fro', 1 and inf; the matrix
    2-norm needs an SVD, which jitgrad does not have (NotImplementedError)."""
    keepdims = bool(keepdims)
    is_matrix = isinstance(axis, (tuple, list)) and len(axis) == 2
    if is_matrix:
        axis = tuple(axis)
        if not all(isinstance(a, (int, np.integer)) for a in axis) or axis[0] == axis[1]:
            raise ValueError(f"'axis' must be None, an integer, or a tuple of 2 unique integers, got {axis}")
        axis = tuple(int(a) for a in axis)
        supported = ["euclidean", "fro", 1, 2, np.inf]
        if not any(_same_ord(ord, s) for s in supported):
            raise ValueError(f"'ord' must be a supported matrix norm in ['euclidean', 'fro', 1, 2, inf], "
                             f"got {ord}")
    else:
        if not (axis is None or isinstance(axis, (int, np.integer))):
            raise ValueError(f"'axis' must be None, an integer, or a tuple of 2 unique integers, got {axis}")
        if not any(_same_ord(ord, s) for s in ("euclidean", 1, 2, np.inf)) and \
                (isinstance(ord, (str, bool)) or not np.isreal(ord) or not ord > 0):
            raise ValueError(f"'ord' must be a supported vector norm, got {ord}")
        if axis is not None:
            axis = (int(axis),)
    (x,) = convert_all([tensor])
    if axis is not None and x.shape.rank is not None:
        normalize_axes(axis, x.shape.rank)   # TF: "Invalid reduction dimension"
    if any(_same_ord(ord, s) for s in ("fro", "euclidean", 2)):
        if is_matrix and _same_ord(ord, 2):
            raise NotImplementedError("jitgrad's tf.norm has no matrix 2-norm (it needs an SVD).")
        # x conj(x), as TF's norm: x * x of a complex tensor is not |x|^2 (conj is a no-op on reals);
        # its imaginary part is 0 (TF's complex product gives exactly 0, numpy's may round to 1e-17)
        squares = multiply(x, conj(x))
        if x.dtype.is_complex:
            squares = complex_(real(squares), zeros_like(real(squares)))
        result = sqrt(reduce_sum(squares, axis, keepdims=True))
    else:
        result = abs_(x)
        if _same_ord(ord, 1):
            if is_matrix:
                result = reduce_max(reduce_sum(result, axis[0], keepdims=True), axis[1], keepdims=True)
            else:
                result = reduce_sum(result, axis, keepdims=True)
        elif _same_ord(ord, np.inf):
            if is_matrix:
                result = reduce_max(reduce_sum(result, axis[1], keepdims=True), axis[0], keepdims=True)
            else:
                result = reduce_max(result, axis, keepdims=True)
        else:   # a general vector p-norm, p > 0
            result = pow_(reduce_sum(pow_(result, ord), axis, keepdims=True), 1.0 / ord)
    if not keepdims:
        result = squeeze(result, axis)
    return identity(result, name=name or "norm")


def _same_ord(ord, ref):  # noqa: A002
    """``ord == ref`` without comparing strings with numbers (or arrays)."""
    if isinstance(ref, str) or isinstance(ord, str):
        return isinstance(ord, str) and isinstance(ref, str) and ord == ref
    if isinstance(ord, bool):
        return False
    try:
        return bool(ord == ref)
    except (TypeError, ValueError):
        return False


def eye(num_rows, num_columns=None, batch_shape=None, dtype=dtypes.float32, name=None):
    """``tf.eye``: a constant (the sizes must be known when the graph is built)."""

    def static(v, what):
        return _static_value(v, f"{what} of tf.eye")

    rows = static(num_rows, "num_rows")
    cols = rows if num_columns is None else static(num_columns, "num_columns")
    for v in (rows, cols):
        if isinstance(v, (bool, np.bool_)) or np.asarray(v).dtype.kind not in "iu" or np.ndim(v) != 0:
            raise TypeError(f"Arguments `num_rows` and `num_columns` must be positive integer values. "
                            f"Received: num_rows={num_rows}, num_columns={num_columns}")
    rows, cols = int(rows), int(cols)
    batch = [] if batch_shape is None else static(batch_shape, "batch_shape")
    batch = [int(d) for d in np.asarray(batch).reshape(-1)]
    for d in batch + [rows, cols]:
        if d < 0:
            raise shape_error(f"Dimension {d} must be >= 0")
    dtype = dtypes.as_dtype(dtype)
    value = np.broadcast_to(np.eye(rows, cols, dtype=dtype.np), tuple(batch) + (rows, cols))
    return constant(np.ascontiguousarray(value), dtype=dtype, name=name or "eye")


# ---------------------------------------------------------------- tensordot (composite)
def _tensordot_axes(a_rank, axes):
    """TF's _tensordot_axes for static axes: an int n (the last n axes of a with
    the first n of b) or a pair of ints / int lists."""
    if not isinstance(axes, (int, np.integer, list, tuple)):
        axes = _static_value(axes, "the axes of tensordot")
        axes = int(axes) if axes.ndim == 0 else axes.tolist()
    if isinstance(axes, (int, np.integer)):
        if isinstance(axes, bool):
            raise ValueError(f"`axes` must be an integer or have length 2. Received {axes}.")
        if axes < 0:
            raise ValueError(f"`axes` must be at least 0. Received: axes={axes}.")
        if axes > a_rank:
            raise ValueError(f"`axes` must not be larger than the number of dimensions of tensor a. "
                             f"Received {axes}, vs tensor dimensions {a_rank}.")
        return list(range(a_rank - axes, a_rank)), list(range(axes))
    if len(axes) != 2:
        raise ValueError(f"`axes` must be an integer or have length 2. Received {axes}.")
    a_axes, b_axes = axes
    if isinstance(a_axes, (int, np.integer)) and isinstance(b_axes, (int, np.integer)):
        a_axes, b_axes = [a_axes], [b_axes]
    a_axes, b_axes = list(np.asarray(a_axes).reshape(-1)), list(np.asarray(b_axes).reshape(-1))
    if len(a_axes) != len(b_axes):
        raise ValueError(f"Different number of contraction axes `a` and `b`, {len(a_axes)} != {len(b_axes)}.")
    return [int(i) for i in a_axes], [int(i) for i in b_axes]


def _tensordot_reshape(t, axes, flipped):
    """TF's _tensordot_reshape: t transposed to (free, contracted) -- (contracted,
    free) when flipped -- and reshaped to a matrix; also returns the free dims."""
    dims = t.shape.as_list()
    rank = len(dims)
    for i in axes:
        if not -rank <= i < rank:
            raise ValueError(f"axis {i} is out of range for a tensor of rank {rank} in tensordot")
    axes = [i % rank for i in axes]
    free = [i for i in range(rank) if i not in axes]
    free_dims = [dims[i] for i in free]
    prod_free = int(np.prod(free_dims, dtype=np.int64))
    prod_axes = int(np.prod([dims[i] for i in axes], dtype=np.int64))
    perm = axes + free if flipped else free + axes
    new_shape = [prod_axes, prod_free] if flipped else [prod_free, prod_axes]
    if perm != list(range(rank)):
        t = transpose(t, perm)
    if t.shape.as_list() != new_shape:
        t = reshape(t, new_shape)
    return t, free_dims


def tensordot(a, b, axes, name=None):
    """``tf.tensordot`` / ``tf.linalg.tensordot``, as TF composes it: transposes and
    reshapes a and b into matrices, one matmul, and a reshape to a's free dims
    followed by b's. Needs static axes and inputs of fully known shapes."""
    a, b = convert_all([a, b])
    for t in (a, b):
        if t.shape.rank is None or not t.shape.is_fully_defined():
            raise NotImplementedError("jitgrad's tensordot needs inputs whose shapes are known when the graph "
                                      "is built.")
    a_axes, b_axes = _tensordot_axes(a.shape.rank, axes)
    a_mat, a_free = _tensordot_reshape(a, a_axes, False)
    b_mat, b_free = _tensordot_reshape(b, b_axes, True)
    ab = matmul(a_mat, b_mat)
    return reshape(ab, a_free + b_free, name=name or "Tensordot")


# ---------------------------------------------------------------- inv, det, slogdet, solve, cholesky
# numpy (LAPACK) reference kernels; no native lowering: a compiled Session.run of
# a graph that contains one runs in the interpreter and is counted in
# cache_info()['fallbacks']. Gradients are TF's (linalg_grad.py), written with
# these ops and matmul, so they are differentiable again.
def _square_infer(op_name, out=lambda s: s, n_out=1, allowed=FLOATS):
    def infer(shapes, dts, attrs):
        check_same(op_name, dts)
        check_dtype(op_name, dts[0], allowed, "input")
        s = shapes[0]
        if s is not None:
            if len(s) < 2:
                raise ValueError(f"Shape must be at least rank 2 but is rank {len(s)} for '{op_name}'")
            if s[-1] is not None and s[-2] is not None and s[-1] != s[-2]:
                raise ValueError(f"Dimensions must be equal, but are {s[-2]} and {s[-1]} for '{op_name}' "
                                 f"with input shapes: {list(s)}.")
        o = None if s is None else out(tuple(s))
        return [(o, dts[0])] * n_out
    return infer


def _adj(x):
    return np.swapaxes(x, -1, -2)


def _lu_ieee(m):
    """Eigen's unblocked PartialPivLU (TF's kernels) of one matrix in numpy: the pivot is the
    first entry of largest |.| in the column (a later NaN never wins, a first NaN stays),
    and the elimination is plain IEEE arithmetic. Returns (lu, row order, min |pivot|) with
    the minimum taken as Eigen's scalar minCoeff (std::min from the first pivot: a later
    NaN is skipped, a first NaN is the result)."""
    lu = m.copy()
    n = lu.shape[-1]
    order = np.arange(n)
    with np.errstate(all="ignore"):
        for k in range(n):
            col = np.abs(lu[k:, k])
            best = 0
            for i in range(1, n - k):
                if col[i] > col[best]:
                    best = i
            if best:
                lu[[k, k + best]] = lu[[k + best, k]]
                order[[k, k + best]] = order[[k + best, k]]
            if col[best] != 0 and k + 1 < n:
                lu[k + 1:, k] /= lu[k, k]
                lu[k + 1:, k + 1:] -= np.outer(lu[k + 1:, k], lu[k, k + 1:])
        piv = np.abs(np.diagonal(lu))
        low = piv[0]
        for p in piv[1:]:
            low = p if p < low else low
    return lu, order, low


def _lu_solve_ieee(lu, order, b):
    """x with P^-1 L U x = b: forward (unit lower) and back substitution, IEEE arithmetic."""
    n = lu.shape[-1]
    x = b[order].astype(np.result_type(lu, b))
    with np.errstate(all="ignore"):
        for i in range(n):
            x[i] -= lu[i, :i] @ x[:i]
        for i in range(n - 1, -1, -1):
            x[i] = (x[i] - lu[i, i + 1:] @ x[i + 1:]) / lu[i, i]
    return x


def _lu_kernel(message):
    """An LU-based kernel (inverse, solve) failing as TF's does: unless every LU pivot has
    |p| > 0 (Eigen's check: see ``_lu_ieee``). Finite matrices go to LAPACK (numpy), which
    fails on an exactly zero pivot; a matrix holding inf or NaN is factored and solved by
    ``_lu_ieee``: LAPACK neither sees a NaN pivot nor keeps IEEE's 0 * inf = NaN (OpenBLAS
    scales a column by 1 / inf = 0 and gets zeros), where TF fails or gives NaN."""
    def kernel(attrs, a, *b):
        if attrs["adjoint"]:
            a = np.conj(_adj(a))
        rhs = b[0] if b else np.broadcast_to(np.eye(a.shape[-1], dtype=a.dtype), a.shape)
        if np.isfinite(a).all() and np.isfinite(rhs).all():
            try:
                return np.linalg.solve(a, rhs) if b else np.linalg.inv(a)
            except np.linalg.LinAlgError:
                raise InvalidArgumentError(message) from None
        rhs = np.broadcast_to(rhs, a.shape[:-1] + rhs.shape[-1:])
        out = np.empty(rhs.shape, np.result_type(a, rhs))
        for m, r, o in zip(a.reshape((-1,) + a.shape[-2:]), rhs.reshape((-1,) + rhs.shape[-2:]),
                           out.reshape((-1,) + out.shape[-2:])):
            lu, order, low = _lu_ieee(m)
            if not low > 0:
                raise InvalidArgumentError(message)
            o[...] = _lu_solve_ieee(lu, order, r)
        return out
    return kernel


def _inverse_grad(op, g):
    ainv, adjoint = op.outputs[0], op.get_attr("adjoint")
    return [-matmul(ainv, matmul(g, ainv, adjoint_a=adjoint, adjoint_b=not adjoint), adjoint_a=not adjoint)]


def _det_grad(op, g):
    a, c = op.inputs[0], op.outputs[0]
    a_adj_inv = matrix_inverse(a, adjoint=True)
    return [expand_dims(expand_dims(g * c, -1), -1) * a_adj_inv]


def _slogdet_grad(op, g_sign, g_logdet):
    if g_logdet is None:
        return [None]
    a_adj_inv = matrix_inverse(op.inputs[0], adjoint=True)
    return [expand_dims(expand_dims(g_logdet, -1), -1) * a_adj_inv]


def _solve_infer(shapes, dts, attrs, allowed=FLOATS):
    _square_infer("MatrixSolve", allowed=allowed)(shapes[:1], dts, attrs)
    a, b = shapes
    if a is None or b is None:
        return [(b, dts[0])]
    if len(b) != len(a) or (a[-1] is not None and b[-2] is not None and a[-1] != b[-2]):
        raise ValueError(f"Shapes {list(a)} and {list(b)} are incompatible for 'MatrixSolve' (matrix and rhs "
                         f"need the same batch dimensions and matching rows).")
    return [(b, dts[0])]


def _solve_grad(op, g):
    a, c = op.inputs[0], op.outputs[0]
    adjoint = op.get_attr("adjoint")
    grad_b = matrix_solve(a, g, adjoint=not adjoint)
    grad_a = -matmul(c, grad_b, adjoint_b=True) if adjoint else -matmul(grad_b, c, adjoint_b=True)
    return [grad_a, grad_b]


def _cholesky_grad(op, g):
    """TF's _CholeskyGrad: with L the factor and M = L^H g, phi(M) its lower triangle
    with the diagonal halved, grad = sym(L^-H phi(M) L^-1), sym(X) = (X + X^H) / 2."""
    l_ = op.outputs[0]
    n = l_.shape[-1]
    if n is None:
        raise NotImplementedError("jitgrad's Cholesky gradient needs the matrix size known when the graph is built.")
    # TF: L^-1 by a triangular solve (no pivot check, unlike MatrixInverse: a NaN factor gives
    # a NaN gradient, not an error), the upper triangle of M dropped by matrix_band_part
    # (a select here: a NaN there must not leak through a multiply by 0)
    l_inv = matrix_triangular_solve(l_, constant(np.eye(n, dtype=l_.dtype.np)) * ones_like(l_), lower=True)
    mask = np.tril(np.ones((n, n))) - 0.5 * np.eye(n)
    middle = matmul(l_, g, adjoint_a=True)
    middle = where(constant(np.tril(np.ones((n, n), bool))), middle * constant(mask.astype(l_.dtype.np)),
                   zeros_like(middle))
    grad_a = matmul(matmul(l_inv, middle, adjoint_a=True), l_inv)
    rank = l_.shape.rank
    perm = list(range(rank - 2)) + [rank - 1, rank - 2]
    return [(grad_a + transpose(grad_a, perm)) * constant(np.array(0.5, l_.dtype.np))]


def _slogdet(attrs, a):
    sign, logdet = np.linalg.slogdet(a)
    return np.asarray(sign, a.dtype), np.asarray(logdet, a.dtype)


def _cholesky_ieee(m):
    """Eigen's unblocked LLT (TF's kernel) in numpy, one column at a time: x = a_kk -
    |L_k,:k|^2 (not positive: the factor fails), L_kk = sqrt(x), L_k+1:,k = (a_k+1:,k -
    L_k+1:,:k L_k,:k^T) / L_kk. Every product and quotient is IEEE's, so inf / inf and
    nan * 0 are NaN. (LAPACK under OpenBLAS scales a column by 1 / L_kk, and a scale by
    1 / inf = 0 sets it to zeros: the Cholesky factor of [[inf, nan], [nan, 1]] came out
    [[inf, 0], [0, 1]], TF's is [[inf, 0], [nan, nan]].)"""
    n = m.shape[-1]
    out = np.tril(m).astype(m.dtype)
    with np.errstate(all="ignore"):
        for k in range(n):
            x = out[k, k] - np.dot(out[k, :k], out[k, :k])
            if x <= 0:
                return None
            out[k, k] = x = np.sqrt(x)
            if k + 1 < n:
                out[k + 1:, k] = (out[k + 1:, k] - out[k + 1:, :k] @ out[k, :k]) / x
    return out


def _cholesky(attrs, a):
    """numpy's factor (it reads the lower triangle only, as TF). A matrix that is not
    positive definite gets NaN in its lower triangle and no error, as TF's kernel does.
    One whose lower triangle holds inf or NaN is factored by ``_cholesky_ieee``."""
    lower = np.tril(np.ones(a.shape[-2:], bool))
    if not np.isfinite(a[..., lower]).all():
        out = np.zeros_like(a)
        for m, o in zip(a.reshape((-1,) + a.shape[-2:]), out.reshape((-1,) + a.shape[-2:])):
            f = _cholesky_ieee(m)
            if f is None:
                o[lower] = np.nan
            else:
                o[...] = f
        return out
    try:
        return np.linalg.cholesky(a)
    except np.linalg.LinAlgError:
        out = np.zeros_like(a)
        flat_in, flat_out = a.reshape((-1,) + a.shape[-2:]), out.reshape((-1,) + a.shape[-2:])
        lower = np.tril(np.ones(a.shape[-2:], bool))
        for m, o in zip(flat_in, flat_out):
            try:
                o[...] = np.linalg.cholesky(m)
            except np.linalg.LinAlgError:
                o[lower] = np.nan
        return out


register("MatrixInverse", denormals="flush", infer=_square_infer("MatrixInverse"),
         kernel=_lu_kernel("Input is not invertible."),
         grad=_inverse_grad, lowering="interpreter")
register("MatrixDeterminant", denormals="flush", infer=_square_infer("MatrixDeterminant", out=lambda s: s[:-2]),
         kernel=lambda attrs, a: np.asarray(np.linalg.det(a), a.dtype), grad=_det_grad,
         lowering="interpreter")
register("LogMatrixDeterminant", denormals="flush",
         infer=_square_infer("LogMatrixDeterminant", out=lambda s: s[:-2], n_out=2),
         kernel=_slogdet, grad=_slogdet_grad, lowering="interpreter")
register("MatrixSolve", denormals="flush", infer=_solve_infer,
         kernel=_lu_kernel("Input matrix is not invertible."),
         grad=_solve_grad, lowering="interpreter")
register("Cholesky", denormals="flush",
         infer=_square_infer("Cholesky"), kernel=_cholesky, grad=_cholesky_grad, lowering="interpreter")


def _triangular_solve(attrs, a, b):
    """X with A X = B for triangular A (``lower``; ``adjoint``: A^H X = B), by substitution
    row by row as Eigen's triangular solve: no pivoting and no check, IEEE arithmetic (a NaN
    or zero on the diagonal gives NaN / inf, as in TF)."""
    lower = attrs["lower"]
    if attrs["adjoint"]:
        a, lower = np.conj(_adj(a)), not lower
    a = np.tril(a) if lower else np.triu(a)
    b = np.broadcast_to(b, a.shape[:-2] + b.shape[-2:]) if b.ndim < a.ndim else b
    x = np.zeros(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + b.shape[-2:], np.result_type(a, b))
    n = a.shape[-1]
    with np.errstate(all="ignore"):
        for i in (range(n) if lower else range(n - 1, -1, -1)):
            done = slice(0, i) if lower else slice(i + 1, n)
            acc = b[..., i, :] - np.einsum("...k,...kj->...j", a[..., i, done], x[..., done, :])
            x[..., i, :] = acc / a[..., i, i][..., None]
    return x


def _triangular_solve_grad(op, g):
    """TF's _MatrixTriangularSolveGrad (same batch shapes)."""
    a, c = op.inputs[0], op.outputs[0]
    adjoint, lower = op.get_attr("adjoint"), op.get_attr("lower")
    grad_b = matrix_triangular_solve(a, g, lower=lower, adjoint=not adjoint)
    grad_a = -matmul(c, grad_b, adjoint_b=True) if adjoint else -matmul(grad_b, c, adjoint_b=True)
    n = a.shape[-1]
    if n is None:
        raise NotImplementedError("jitgrad's triangular_solve gradient needs the matrix size known when the "
                                  "graph is built.")
    band = np.tril(np.ones((n, n), bool)) if lower else np.triu(np.ones((n, n), bool))
    return [where(constant(band), grad_a, zeros_like(grad_a)), grad_b]


register("MatrixTriangularSolve", denormals="flush",
         infer=lambda shapes, dts, attrs: _solve_infer(shapes, dts, attrs, FLOATS + COMPLEX),   # (complex: QR's gradient)
         kernel=_triangular_solve, grad=_triangular_solve_grad,
         lowering="interpreter")


def matrix_triangular_solve(matrix, rhs, lower=True, adjoint=False, name=None):
    """``tf.linalg.triangular_solve``: X with matrix @ X = rhs, matrix triangular (only its
    ``lower`` or upper triangle is read; ``adjoint``: matrix^H @ X = rhs)."""
    a, b = convert_all([matrix, rhs])
    return apply_op("MatrixTriangularSolve", [a, b], {"lower": bool(lower), "adjoint": bool(adjoint)},
                    name=name or "MatrixTriangularSolve")


def matrix_inverse(input, adjoint=False, name=None):  # noqa: A002
    """``tf.linalg.inv``."""
    (x,) = convert_all([input])
    return apply_op("MatrixInverse", [x], {"adjoint": bool(adjoint)}, name=name or "MatrixInverse")


def matrix_determinant(input, name=None):  # noqa: A002
    """``tf.linalg.det``."""
    (x,) = convert_all([input])
    return apply_op("MatrixDeterminant", [x], name=name or "MatrixDeterminant")


def log_matrix_determinant(input, name=None):  # noqa: A002
    """``tf.linalg.slogdet``: (sign, log|det|)."""
    (x,) = convert_all([input])
    return apply_op("LogMatrixDeterminant", [x], name=name or "LogMatrixDeterminant")


def matrix_solve(matrix, rhs, adjoint=False, name=None):
    """``tf.linalg.solve``: X with matrix @ X = rhs (adjoint: matrix^H @ X = rhs)."""
    a, b = convert_all([matrix, rhs])
    return apply_op("MatrixSolve", [a, b], {"adjoint": bool(adjoint)}, name=name or "MatrixSolve")


def cholesky(input, name=None):  # noqa: A002
    """``tf.linalg.cholesky``: the lower-triangular factor."""
    (x,) = convert_all([input])
    return apply_op("Cholesky", [x], name=name or "Cholesky")


# ---------------------------------------------------------------- diag / diag_part (composites)
def _static_dims(x, what):
    if x.shape.rank is None or not x.shape.is_fully_defined():
        raise NotImplementedError(f"jitgrad's {what} needs the input's shape known when the graph is built.")
    return x.shape.as_list()


def diag(diagonal, name="diag", k=0, num_rows=-1, num_cols=-1, padding_value=0, align="RIGHT_LEFT"):
    """``tf.linalg.diag`` (main diagonal only): [..., n] -> [..., n, n], the
    values placed by a select (never multiplied by 0, so inf/NaN stay put)."""
    if k != 0 or num_rows != -1 or num_cols != -1 or padding_value != 0:
        raise NotImplementedError("jitgrad's tf.linalg.diag supports the main diagonal only (k=0, no padding).")
    (v,) = convert_all([diagonal])
    dims = _static_dims(v, "tf.linalg.diag")
    if not dims:
        raise ValueError("diagonal must be at least 1-dimensional")
    n = dims[-1]
    column = expand_dims(v, -1)                      # [..., n, 1]: row i holds v[i]
    return where(constant(np.eye(n, dtype=bool)), column, zeros_like(column), name=name)


def diag_part(input, name="diag_part", k=0, padding_value=0, align="RIGHT_LEFT"):  # noqa: A002
    """``tf.linalg.diag_part`` (main diagonal only): [..., m, n] -> [..., min(m, n)],
    a gather of the flattened matrices (exact, differentiable)."""
    if k != 0:
        raise NotImplementedError("jitgrad's tf.linalg.diag_part supports the main diagonal only (k=0).")
    (x,) = convert_all([input])
    dims = _static_dims(x, "tf.linalg.diag_part")
    if len(dims) < 2:
        raise ValueError(f"input must be at least 2-dimensional, got shape {dims}")
    m, n = dims[-2:]
    flat = reshape(x, dims[:-2] + [m * n])
    return gather(flat, np.arange(min(m, n), dtype=np.int32) * (n + 1), axis=len(dims) - 2, name=name)
