"""``tf.gather(params, indices, axis, batch_dims)`` with batch_dims > 0, as one gather.

The leading batch_dims dimensions of params and indices are flattened into one batch
dimension B; params' gathered axis is moved next to it and the two are flattened, so
batch b's index i names row b * P + i. An index outside [0, P) becomes row -1, which
the gather rejects (InvalidArgumentError, as TF's CPU kernel) -- b * P + i alone could
land in another batch's rows. The result is then reshaped and transposed to TF's
order: batch dims, params' dims before the axis, indices' dims, params' dims after it.
"""
from ..eager import EagerTensor
from ..errors import InvalidArgumentError
from ..convert import convert_all
from . import array_ops
from .array_ops import range_, reshape, shape as shape_of, transpose
from .gather_nd import size_product
from .math_ops import add, cast, greater_equal, identity, less, logical_and, multiply, negative, ones_like, where


def gather(params, indices, validate_indices=None, axis=None, batch_dims=0, name=None):
    """``tf.gather``: array_ops.gather, or with batch_dims one gather as described above."""
    if batch_dims == 0:
        return array_ops.gather(params, indices, validate_indices, axis, name=name, user=True)
    (p,) = convert_all([params])
    (idx,) = convert_all([indices], graph=None if isinstance(p, EagerTensor) else p.graph)
    return _batched_gather(p, idx, None if axis is None else int(axis), int(batch_dims), name)


def _batched_gather(p, idx, axis, batch_dims, name):
    rp, ri = p.shape.rank, idx.shape.rank
    if rp is None or ri is None:
        raise NotImplementedError("gather with batch_dims needs the ranks of params and indices known when "
                                  "the graph is built.")
    err = InvalidArgumentError if isinstance(p, EagerTensor) else ValueError
    if batch_dims < 0:
        batch_dims += ri
    if axis is None:
        axis = batch_dims
    if axis < 0:
        axis += rp
    if not 0 <= batch_dims <= ri or batch_dims > rp:
        raise err(f"batch_dims ({batch_dims}) must be in [0, rank(indices)] and <= rank(params)")
    if not batch_dims <= axis < rp:
        raise err(f"batch_dims ({batch_dims}) must be less than or equal to axis ({axis}), and axis "
                  f"in range for params of rank {rp}")
    if batch_dims == 0:
        return array_ops.gather(p, idx, axis=axis, name=name)
    pd, id_ = p.shape.dims, idx.shape.dims
    for k in range(batch_dims):
        if pd[k] is not None and id_[k] is not None and pd[k] != id_[k]:
            raise err(f"params.shape[{k}]: {pd[k]} should be equal to indices.shape[{k}]: {id_[k]}")

    def size(t, dims, k):
        return dims[k] if dims[k] is not None else shape_of(t, out_type=idx.dtype)[k]

    batch = [size(p, pd, k) for k in range(batch_dims)]
    before = [size(p, pd, k) for k in range(batch_dims, axis)]
    after = [size(p, pd, k) for k in range(axis + 1, rp)]
    inner = [size(idx, id_, k) for k in range(batch_dims, ri)]
    n = size(p, pd, axis)
    # params -> [B * n, before..., after...]: the batch and the gathered axis first
    order = list(range(batch_dims)) + [axis] + list(range(batch_dims, axis)) + list(range(axis + 1, rp))
    flat = reshape(transpose(p, order) if order != list(range(rp)) else p, [-1] + before + after)
    # row of batch b's index i: b * n + i, -1 for an index outside [0, n)
    n_t = n if not isinstance(n, int) else cast(n, idx.dtype)
    b_count = size_product(batch, idx.dtype)
    offsets = reshape(multiply(range_(b_count, dtype=idx.dtype), n_t), [-1] + [1] * (ri - batch_dims))
    flat_idx = reshape(idx, [b_count] + inner)
    ok = logical_and(greater_equal(flat_idx, 0), less(flat_idx, n_t))
    rows = where(ok, add(flat_idx, offsets), negative(ones_like(flat_idx)))
    got = array_ops.gather(flat, rows, axis=0)            # [B, inner..., before..., after...]
    got = reshape(got, batch + inner + before + after)
    nb, ni, nbef = batch_dims, len(inner), len(before)
    perm = list(range(nb)) + [nb + ni + j for j in range(nbef)] + [nb + j for j in range(ni)] + \
        list(range(nb + ni + nbef, nb + ni + nbef + len(after)))
    if perm != list(range(len(perm))):
        got = transpose(got, perm)
    return got if name is None else identity(got, name=name)
