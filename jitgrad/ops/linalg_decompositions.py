"""Matrix decompositions as reference-interpreter ops (numpy / LAPACK kernels, no native
lowering, like MatrixInverse / Cholesky): ``tf.linalg.qr`` (Qr), ``tf.linalg.eigh`` /
``eigvalsh`` (SelfAdjointEigV2), ``tf.linalg.svd`` (Svd), with TF's gradients
(linalg_grad.py's _QrGrad, _SelfAdjointEigV2Grad, _SvdGrad, real dtypes); and what TF
composes from them in Python: ``pinv`` and ``matrix_rank`` (via svd) and ``lstsq``
(fast=True: Cholesky of the regularised Gramian, TF's _RegularizedGramianCholesky).

Sign conventions: numpy's Householder QR (LAPACK geqrf) gives the same signs as TF's
Eigen HouseholderQR (R's diagonal signs agreed on random inputs). Eigenvectors and singular
vectors are unique only up to sign (and TF's Eigen solvers choose differently from LAPACK):
compare sign-invariant quantities."""
import numpy as np

from .. import dtypes
from ..convert import convert_all, convert_to_tensor
from ..errors import InvalidArgumentError
from ._infer import check_dtype
from .array_ops import concat, constant, expand_dims, matrix_transpose
from .linalg_composites import band_part, cholesky_solve, set_diag
from .linalg_ops import cholesky, diag, diag_part, matmul, matrix_triangular_solve
from .complex_ops import real
from .math_ops import cast, greater, reciprocal, square, where, zeros_like
from .reduction_ops import reduce_max, reduce_sum
from .registry import apply_op, register

_DTYPES = (dtypes.float32, dtypes.float64, dtypes.complex64, dtypes.complex128)


def _matrix_shape(op_name, s, square=False):
    if s is None:
        return None
    if len(s) < 2:
        raise ValueError(f"Shape must be at least rank 2 but is rank {len(s)} for '{op_name}'")
    if square and s[-1] is not None and s[-2] is not None and s[-1] != s[-2]:
        raise ValueError(f"Dimensions must be equal, but are {s[-2]} and {s[-1]} for '{op_name}' "
                         f"with input shapes: {list(s)}.")
    return tuple(s)


def _kmin(m, n):
    return None if m is None or n is None else min(m, n)


def _each_matrix(a, fn, outs):
    """fn on every matrix of the batch; a matrix LAPACK cannot factor (inf / NaN entries:
    'did not converge') gets NaN outputs instead of an error."""
    try:
        return fn(a)
    except np.linalg.LinAlgError:
        results = [np.full(a.shape[:-2] + s, np.nan, d) for s, d in outs]
        flat = a.reshape((-1,) + a.shape[-2:])
        for i, m in enumerate(flat):
            try:
                vals = fn(m)
            except np.linalg.LinAlgError:
                continue
            for r, v in zip(results, vals):
                r.reshape((-1,) + r.shape[len(a.shape) - 2:])[i] = v
        return tuple(results)


# ------------------------------------------------------------------------------------- Qr
def _qr_infer(shapes, dts, attrs):
    check_dtype("Qr", dts[0], _DTYPES + (dtypes.float16,), "input")
    s = _matrix_shape("Qr", shapes[0])
    if s is None:
        return [(None, dts[0])] * 2
    m, n = s[-2:]
    k = m if attrs["full_matrices"] else _kmin(m, n)
    return [(s[:-2] + (m, k), dts[0]), (s[:-2] + (k, n), dts[0])]


def _qr(attrs, a):
    mode = "complete" if attrs["full_matrices"] else "reduced"
    q, r = np.linalg.qr(a.astype(np.float32) if a.dtype == np.float16 else a, mode=mode)   # (half: in float32)
    return q.astype(a.dtype, copy=False), r.astype(a.dtype, copy=False)


def _tri_solve_right(x, r):
    """x @ inv(r)^H for upper-triangular r (TF's _TriangularSolve in _QrGrad)."""
    return matrix_transpose(matrix_triangular_solve(r, matrix_transpose(x, conjugate=True), lower=False,
                                                    adjoint=False), conjugate=True)


def _qr_grad_deep(q, r, dq, dr):
    qdq = matmul(q, dq, adjoint_a=True)
    qdq_ = qdq - matrix_transpose(qdq, conjugate=True)
    rdr = matmul(r, dr, adjoint_b=True)
    rdr_ = rdr - matrix_transpose(rdr, conjugate=True)
    tril = band_part(qdq_ + rdr_, -1, 0)
    grad_a = matmul(q, dr + _tri_solve_right(tril, r))
    grad_b = _tri_solve_right(dq - matmul(q, qdq), r)
    ret = grad_a + grad_b
    if q.dtype.is_complex:      # TF's correction for complex matrices
        m = rdr - matrix_transpose(qdq, conjugate=True)
        eyem = set_diag(zeros_like(m), diag_part(m))
        correction = eyem - cast(real(eyem), q.dtype)
        ret = ret + _tri_solve_right(matmul(q, matrix_transpose(correction, conjugate=True)), r)
    return ret


def _qr_grad(op, dq, dr):
    """TF's _QrGrad: square and tall matrices with full_matrices=False, and wide
    ones (a = [x, y], r = [u, v]: reduced to the square case)."""
    q, r = op.outputs
    rs, qs = r.shape.as_list() if r.shape.rank is not None else None, q.shape.as_list() if q.shape.rank else None
    if rs is None or rs[-2] is None or rs[-1] is None or qs is None or qs[-2] is None:
        raise NotImplementedError("QrGrad not implemented with dynamic shapes.")
    if rs[-2] > rs[-1] and qs[-2] == qs[-1]:
        raise NotImplementedError("QrGrad not implemented when nrows > ncols and full_matrices is true. "
                                  "Received r.shape=%s and q.shape=%s." % (rs, qs))
    num_rows, num_cols = qs[-2], rs[-1]
    if num_rows >= num_cols:
        return [_qr_grad_deep(q, r, dq, dr)]
    a = op.inputs[0]
    y = a[..., :, num_rows:]
    u = r[..., :, :num_rows]
    dv = dr[..., :, num_rows:]
    du = dr[..., :, :num_rows]
    dy = matmul(q, dv)
    dx = _qr_grad_deep(q, u, dq + matmul(y, dv, adjoint_b=True), du)
    return [concat([dx, dy], axis=-1)]


register("Qr", denormals="flush", infer=_qr_infer, kernel=_qr, grad=_qr_grad, lowering="interpreter")


def qr(input, full_matrices=False, name=None):  # noqa: A002
    """``tf.linalg.qr``: (q, r) with input = q @ r, q orthonormal columns, r upper triangular."""
    (x,) = convert_all([input])
    return tuple(apply_op("Qr", [x], {"full_matrices": bool(full_matrices)}, name=name or "Qr"))


# ------------------------------------------------------------------------ SelfAdjointEigV2
def _real_dtype(dt):
    return {dtypes.complex64: dtypes.float32, dtypes.complex128: dtypes.float64}.get(dt, dt)


def _eig_infer(shapes, dts, attrs):
    check_dtype("SelfAdjointEigV2", dts[0], _DTYPES, "input")
    s = _matrix_shape("SelfAdjointEigV2", shapes[0], square=True)
    n = None if s is None else (s[-1] if s[-1] is not None else s[-2])
    e = None if s is None else s[:-2] + (n,)
    v = (None if s is None else s[:-2] + (n, n)) if attrs["compute_v"] else ()
    return [(e, dts[0]), (v, dts[0])]


def _eig(attrs, a):
    """LAPACK's syevd on the lower triangle (TF's Eigen solver reads the lower triangle too).
    The eigenvalues have the input's dtype (complex input: complex eigenvalues with zero
    imaginary parts, as TF's op). inf / NaN in the lower triangle: TF's eigh fails with an
    error, its eigvalsh gives NaN eigenvalues."""
    real = np.dtype(_real_dtype(dtypes.as_dtype(a.dtype)).as_numpy_dtype)
    n = a.shape[-1]
    lower = np.tril(np.ones((n, n), bool))
    finite = np.isfinite(a[..., lower]).all(axis=-1)
    if not finite.all():
        if attrs["compute_v"]:
            raise InvalidArgumentError("Self-adjoint eigen decomposition was not successful. "
                                       "The input might not be valid.")
        a = np.where(finite[..., None, None], a, np.zeros((), a.dtype))
    if not attrs["compute_v"]:
        (e,) = _each_matrix(a, lambda m: (np.linalg.eigvalsh(m, "L"),), [((n,), real)])
        e = np.where(finite[..., None], e, np.nan)
        return e.astype(a.dtype, copy=False), np.zeros((), a.dtype)
    e, v = _each_matrix(a, lambda m: tuple(np.linalg.eigh(m, "L")), [((n,), real), ((n, n), a.dtype)])
    return e.astype(a.dtype, copy=False), v.astype(a.dtype, copy=False)


def _safe_reciprocal(x, epsilon=1e-20):
    return x * reciprocal(x * x + constant(np.array(epsilon, x.dtype.as_numpy_dtype)))


def _off_diagonal_reciprocal_differences(e):
    """f[i, j] = 1 / (e_j - e_i) off the diagonal, 0 on it (TF's f in the eig / svd gradients)."""
    return set_diag(_safe_reciprocal(expand_dims(e, -2) - expand_dims(e, -1)), zeros_like(e))


def _eig_grad(op, grad_e, grad_v):
    """TF's _SelfAdjointEigV2Grad: a gradient in the lower triangle (the only
    part the op reads), symmetrised, the diagonal halved."""
    a, e = op.inputs[0], op.outputs[0]
    if grad_e is None:
        grad_e = zeros_like(e)
    if op.get_attr("compute_v"):
        v = op.outputs[1]
        if grad_v is None:
            grad_v = zeros_like(v)
        f = _off_diagonal_reciprocal_differences(e)
        grad_a = matmul(v, matmul(diag(grad_e) + f * matmul(v, grad_v, adjoint_a=True), v, adjoint_b=True))
    else:
        _, v = self_adjoint_eig(a)
        grad_a = matmul(v, matmul(diag(grad_e), v, adjoint_b=True))
    grad_a = band_part(grad_a + matrix_transpose(grad_a, conjugate=True), -1, 0)
    return [set_diag(grad_a, constant(np.array(0.5, a.dtype.as_numpy_dtype)) * diag_part(grad_a))]


register("SelfAdjointEigV2", denormals="flush", infer=_eig_infer, kernel=_eig, grad=_eig_grad,
         lowering="interpreter")


def self_adjoint_eig(tensor, name=None):
    """``tf.linalg.eigh``: (eigenvalues ascending, eigenvectors as columns) of the
    self-adjoint matrices whose lower triangles ``tensor`` holds."""
    (x,) = convert_all([tensor])
    return tuple(apply_op("SelfAdjointEigV2", [x], {"compute_v": True}, name=name or "SelfAdjointEigV2"))


def self_adjoint_eigvals(tensor, name=None):
    """``tf.linalg.eigvalsh``: the eigenvalues only (ascending)."""
    (x,) = convert_all([tensor])
    return apply_op("SelfAdjointEigV2", [x], {"compute_v": False}, name=name or "SelfAdjointEigV2")[0]


# ------------------------------------------------------------------------------------- Svd
def _svd_infer(shapes, dts, attrs):
    check_dtype("Svd", dts[0], _DTYPES, "input")
    s = _matrix_shape("Svd", shapes[0])
    real = _real_dtype(dts[0])
    if s is None:
        return [(None, real), (None, dts[0]), (None, dts[0])]
    m, n = s[-2:]
    k = _kmin(m, n)
    if not attrs["compute_uv"]:
        return [(s[:-2] + (k,), real), ((), dts[0]), ((), dts[0])]   # (TF: scalars, unset)
    full = attrs["full_matrices"]
    return [(s[:-2] + (k,), real), (s[:-2] + (m, m if full else k), dts[0]),
            (s[:-2] + (n, n if full else k), dts[0])]


def _svd(attrs, a):
    real = np.dtype(_real_dtype(dtypes.as_dtype(a.dtype)).as_numpy_dtype)
    m, n = a.shape[-2:]
    k = min(m, n)
    if not attrs["compute_uv"]:
        (s,) = _each_matrix(a, lambda x: (np.linalg.svd(x, compute_uv=False),), [((k,), real)])
        return s.astype(real, copy=False), np.zeros((), a.dtype), np.zeros((), a.dtype)
    full = attrs["full_matrices"]
    ku, kv = (m, n) if full else (k, k)

    def one(x):
        u, s, vh = np.linalg.svd(x, full_matrices=full)
        return s, u, np.conj(np.swapaxes(vh, -1, -2))
    s, u, v = _each_matrix(a, one, [((k,), real), ((m, ku), a.dtype), ((n, kv), a.dtype)])
    return s.astype(real, copy=False), u.astype(a.dtype, copy=False), v.astype(a.dtype, copy=False)


def _svd_grad(op, grad_s, grad_u, grad_v):
    """TF's _SvdGrad: compute_uv=False through a second SVD with u and v; else
    Giles' / Townsend's formula on A (m <= n) or A^H, full_matrices only when |m - n| <= 1."""
    a = op.inputs[0]
    s = op.outputs[0]
    if grad_s is None:
        grad_s = zeros_like(s)
    grad_s_mat = diag(cast(grad_s, a.dtype))
    if not op.get_attr("compute_uv"):
        _, u, v = svd(a, compute_uv=True)
        return [matmul(u, matmul(grad_s_mat, v, adjoint_b=True))]
    full_matrices = op.get_attr("full_matrices")
    dims = a.shape.as_list() if a.shape.rank is not None else [None, None]
    m, n = dims[-2:]
    if m is None or n is None:
        raise NotImplementedError("SVD gradient has not been implemented for input with unknown inner matrix shape.")
    u, v = op.outputs[1], op.outputs[2]
    grad_u = zeros_like(u) if grad_u is None else grad_u
    grad_v = zeros_like(v) if grad_v is None else grad_v
    use_adjoint = m > n
    if use_adjoint:
        m, n, u, v, grad_u, grad_v = n, m, v, u, grad_v, grad_u
    if full_matrices and abs(m - n) > 1:
        raise NotImplementedError("svd gradient is not implemented for abs(m - n) > 1 when full_matrices is True")
    s = cast(s, a.dtype)
    s_mat = diag(s)
    f = _off_diagonal_reciprocal_differences(square(s))
    s_inv_mat = diag(_safe_reciprocal(s))
    v1 = v[..., :, :m]
    grad_v1 = grad_v[..., :, :m]
    u_gu = matmul(u, grad_u, adjoint_a=True)
    v_gv = matmul(v1, grad_v1, adjoint_a=True)
    f_u, f_v = f * u_gu, f * v_gv
    term1_nouv = (grad_s_mat + matmul(f_u + matrix_transpose(f_u, conjugate=True), s_mat)
                  + matmul(s_mat, f_v + matrix_transpose(f_v, conjugate=True)))
    grad_a = matmul(u, matmul(term1_nouv, v1, adjoint_b=True))
    if m != n:
        gv1t = matrix_transpose(grad_v1, conjugate=True)
        term2_nous = gv1t - matmul(matmul(gv1t, v1), v1, adjoint_b=True)
        if full_matrices:
            v2 = v[..., :, m:n]
            grad_v2 = grad_v[..., :, m:n]
            term2_nous = term2_nous - matmul(matmul(v1, grad_v2, adjoint_a=True), v2, adjoint_b=True)
        grad_a = grad_a + matmul(matmul(u, s_inv_mat), term2_nous)
    if a.dtype.is_complex:      # TF's third term for complex matrices
        l_ = v_gv * constant(np.eye(m, dtype=a.dtype.as_numpy_dtype))
        term3_nouv = matmul(s_inv_mat, matrix_transpose(l_, conjugate=True) - l_)
        grad_a = grad_a + constant(np.array(0.5, a.dtype.as_numpy_dtype)) * matmul(
            u, matmul(term3_nouv, v1, adjoint_b=True))
    return [matrix_transpose(grad_a, conjugate=True) if use_adjoint else grad_a]


register("Svd", denormals="flush", infer=_svd_infer, kernel=_svd, grad=_svd_grad, lowering="interpreter")


def svd(tensor, full_matrices=False, compute_uv=True, name=None):
    """``tf.linalg.svd``: (s, u, v) with tensor = u @ diag(s) @ v^H, s descending (TF's order:
    s first, v not transposed); compute_uv=False: s only."""
    (x,) = convert_all([tensor])
    s, u, v = apply_op("Svd", [x], {"full_matrices": bool(full_matrices), "compute_uv": bool(compute_uv)},
                       name=name or "Svd")
    return (s, u, v) if compute_uv else s


# ------------------------------------------------------------- pinv, matrix_rank, lstsq (composites)
def _known_matrix_dims(x, what):
    dims = x.shape.as_list() if x.shape.rank is not None else None
    if dims is None or len(dims) < 2 or dims[-1] is None or dims[-2] is None:
        raise NotImplementedError(f"jitgrad's {what} needs the matrix sizes known when the graph is built.")
    return dims


def pinv(a, rcond=None, validate_args=False, name=None):
    """``tf.linalg.pinv`` as TF's Python: v @ diag(1 / s) @ u^H with singular values at most
    rcond * max(s) set to inf (1 / inf = 0, no NaN gradient); rcond defaults to
    10 * max(m, n) * eps."""
    (x,) = convert_all([a])
    if not x.dtype.is_floating:
        raise TypeError(f"Input `a` must have `float`-like `dtype` (saw {x.dtype.name}).")
    dims = _known_matrix_dims(x, "tf.linalg.pinv")
    np_dtype = x.dtype.as_numpy_dtype
    if rcond is None:
        rcond = 10.0 * max(dims[-2:]) * np.finfo(np_dtype).eps
    (rcond,) = convert_all([np.asarray(rcond, np_dtype) if not hasattr(rcond, "dtype") else rcond])
    s, u, v = svd(x, full_matrices=False, compute_uv=True)
    cutoff = rcond * reduce_max(s, axis=-1)
    s = where(greater(s, expand_dims(cutoff, -1)), s, constant(np.array(np.inf, np_dtype)))
    return matmul(v / expand_dims(s, -2), u, adjoint_b=True, name=name)


def matrix_rank(a, tol=None, validate_args=False, name=None):
    """``tf.linalg.matrix_rank`` as TF: the number of singular values above tol (default
    eps * max(m, n) * max(s)), int32 (as TF 2.21, whatever its docstring says). A Python
    or numpy value converts as float32 when it can (TF's dtype_hint: integer lists work)."""
    x = convert_to_tensor(a, preferred_dtype=dtypes.float32)
    dims = _known_matrix_dims(x, "tf.linalg.matrix_rank")
    s = svd(x, compute_uv=False)
    if tol is None:
        eps = np.finfo(x.dtype.as_numpy_dtype).eps
        tol = constant(np.array(eps * max(dims[-2:]), x.dtype.as_numpy_dtype)) * reduce_max(s, axis=-1, keepdims=True)
    return reduce_sum(cast(greater(s, tol), dtypes.int32), axis=-1, name=name)


def _regularized_gramian_cholesky(matrix, l2_regularizer, first_kind, dims):
    gramian = matmul(matrix, matrix, adjoint_a=first_kind, adjoint_b=not first_kind)
    if not (isinstance(l2_regularizer, (int, float)) and l2_regularizer == 0):
        small = dims[-1] if first_kind else dims[-2]
        eye = constant(np.eye(small, dtype=matrix.dtype.as_numpy_dtype))
        (reg,) = convert_all([l2_regularizer])
        gramian = gramian + cast(reg, matrix.dtype) * eye
    return cholesky(gramian)


def _solve_ls_infer(shapes, dts, attrs):
    check_dtype("MatrixSolveLs", dts[0], _DTYPES, "matrix")
    if dts[1] != dts[0]:
        raise TypeError(f"Input 'rhs' of 'MatrixSolveLs' Op has type {dts[1].name} that does not match type "
                        f"{dts[0].name} of argument 'matrix'.")
    a = _matrix_shape("MatrixSolveLs", shapes[0])
    b = _matrix_shape("MatrixSolveLs", shapes[1])
    if a is None or b is None:
        return [(None, dts[0])]
    if len(a) != len(b) or (a[-2] is not None and b[-2] is not None and a[-2] != b[-2]):
        raise ValueError(f"Shapes {list(a)} and {list(b)} are incompatible for 'MatrixSolveLs' (matrix and rhs "
                         f"need the same batch dimensions and rows).")
    return [(b[:-2] + (a[-1], b[-1]), dts[0])]


def _solve_ls(attrs, a, b, l2):
    """TF's fast=False kernel: Eigen's complete orthogonal decomposition, the minimum-norm
    least-squares solution (l2_regularizer ignored, as TF's kernel); numpy's SVD-based lstsq
    gives the same solution (matched TF to 1e-15, rank-deficient matrices too)."""
    if a.shape[:-2] != b.shape[:-2]:
        raise InvalidArgumentError("matrix and rhs must have the same batch dimensions.")
    out = np.zeros(a.shape[:-2] + (a.shape[-1], b.shape[-1]), a.dtype)
    for m, r, o in zip(a.reshape((-1,) + a.shape[-2:]), b.reshape((-1,) + b.shape[-2:]),
                       out.reshape((-1,) + out.shape[-2:])):
        o[...] = np.linalg.lstsq(m, r, rcond=None)[0]
    return out


def _solve_ls_grad(op, grad):
    raise ValueError("Gradient not defined for fast=False")


register("MatrixSolveLs", denormals="flush", infer=_solve_ls_infer, kernel=_solve_ls, grad=_solve_ls_grad,
         lowering="interpreter")


def lstsq(matrix, rhs, l2_regularizer=0.0, fast=True, name=None):
    """``tf.linalg.lstsq``. fast=True (TF's composite): rows >= columns: solve
    (A^H A + l2 I) x = A^H rhs; else x = A^H (A A^H + l2 I)^-1 rhs; both by Cholesky.
    fast=False: the MatrixSolveLs op (minimum-norm solution; no gradient, as TF)."""
    a, b = convert_all([matrix, rhs])
    if not fast:
        (l2,) = convert_all([np.asarray(l2_regularizer, np.float64) if isinstance(l2_regularizer, (int, float))
                             else l2_regularizer])
        return apply_op("MatrixSolveLs", [a, b, cast(l2, dtypes.float64)], {"fast": False},
                        name=name or "MatrixSolveLs")
    if a.dtype == dtypes.complex128 and not (isinstance(l2_regularizer, (int, float)) and l2_regularizer == 0):
        raise NotImplementedError("matrix_solve_ls is currently disabled for complex128 and l2_regularizer != 0 "
                                  "due to poor accuracy.")
    dims = _known_matrix_dims(a, "tf.linalg.lstsq")
    if dims[-2] >= dims[-1]:
        chol = _regularized_gramian_cholesky(a, l2_regularizer, True, dims)
        return cholesky_solve(chol, matmul(a, b, adjoint_a=True), name=name)
    chol = _regularized_gramian_cholesky(a, l2_regularizer, False, dims)
    return matmul(a, cholesky_solve(chol, b), adjoint_a=True, name=name)


