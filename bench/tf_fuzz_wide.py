"""A wider op catalogue for bench/tf_fuzz.py (`--wide`): the ops jitgrad offers that the base
catalogue never draws (split / unstack, tf.slice, tensordot, matvec, bias_add,
batch_normalization, clip_by_norm / clip_by_global_norm, l2_loss, swish, linalg diag /
diag_part / adjoint, norms along an axis, linspace, foldr, switch_case / case, boolean_mask,
embedding_lookup, logical ops, reduce_any / reduce_all, math.mod, getitem with newaxis /
ellipsis, squeeze of all size-1 axes).

Kept apart from the base catalogue so that `--wide` off draws exactly the programs it always
drew: the seeds of earlier rounds (and the regression tests naming them) still reproduce.
Each builder is (tf, x, p) -> tensor (WIDE_UNARY) or (tf, a, b, p) -> tensor (WIDE_BINARY),
p a random int for parameters; rank-0 inputs fall back to something defined.
"""
import numpy as np


def _rank(x):
    return len(x.shape)


def _ax(x, p):
    return p % _rank(x)


def _split_recombine(tf, x, p):
    """Two pieces of sizes k, d - k (k may be 0 or d: empty pieces) concatenated in the other order."""
    if not _rank(x):
        return x
    ax = _ax(x, p)
    d = x.shape[ax]
    k = (p >> 3) % (d + 1)
    a, b = tf.split(x, [k, d - k], axis=ax)
    return tf.concat([b * 2.0, a], axis=ax)


def _unstack_stack(tf, x, p):
    if not _rank(x):
        return x
    ax = _ax(x, p)
    rows = tf.unstack(x, axis=ax)
    return tf.stack([r * (i + 1.0) for i, r in enumerate(rows[::-1])], axis=ax)


def _tf_slice(tf, x, p):
    if not _rank(x):
        return x
    rng = np.random.default_rng(p)
    begin = [int(rng.integers(0, d)) for d in x.shape]
    size = [-1 if rng.random() < 0.3 else int(rng.integers(1, d - b + 1)) for b, d in zip(begin, x.shape)]
    return tf.slice(x, begin, size)


def _tensordot(tf, x, p):
    if not _rank(x):
        return x * x
    ax = _ax(x, p)
    return tf.tensordot(x, tf.sin(x), axes=[[ax], [ax]])


def _matvec(tf, x, p):
    """x @ v (v of x's last dim) or x^T @ w (w of x's second-to-last dim), v and w from x."""
    if _rank(x) < 2:
        return x
    if p % 2:
        return tf.linalg.matvec(x, tf.cos(tf.reduce_sum(x, axis=list(range(_rank(x) - 1)))))
    w = tf.reduce_mean(x, axis=[i for i in range(_rank(x)) if i != _rank(x) - 2])
    return tf.linalg.matvec(x, w, transpose_a=True)


def _bias_add(tf, x, p):
    if _rank(x) < 2:
        return x
    return tf.nn.bias_add(x, tf.reduce_mean(tf.tanh(x), axis=list(range(_rank(x) - 1))))


def _batch_norm(tf, x, p):
    if not _rank(x):
        return x
    axes = [_ax(x, p)]
    mean, var = tf.nn.moments(x, axes=axes, keepdims=True)
    scale = None if p % 2 else 1.5
    offset = None if (p >> 1) % 2 else 0.25
    return tf.nn.batch_normalization(x, mean, var, offset, scale, 1e-3)


def _clip_by_norm(tf, x, p):
    axes = None if not _rank(x) or p % 2 else [_ax(x, p >> 1)]
    return tf.clip_by_norm(x, 0.5 + p % 3, axes=axes)


def _clip_by_global_norm(tf, x, p):
    clipped, _ = tf.clip_by_global_norm([x, x * 0.5], 1.0 + p % 2)
    return clipped[(p >> 1) % 2]


def _norm_axis(tf, x, p):
    if not _rank(x):
        return tf.abs(x)
    return tf.norm(x, ord=[1, 2, np.inf, "euclidean"][p % 4], axis=_ax(x, p >> 2), keepdims=bool((p >> 4) % 2))


def _linalg_diag(tf, x, p):
    if _rank(x) >= 2 and p % 2:
        return tf.linalg.diag_part(x)
    if _rank(x) >= 2 and (p >> 1) % 2:
        return tf.linalg.adjoint(x)
    return tf.linalg.diag(x) if _rank(x) else x


def _linspace(tf, x, p):
    if not _rank(x):
        return x
    return x * tf.linspace(-1.0, 2.0, x.shape[-1])


def _foldr(tf, x, p):
    if not _rank(x):
        return x
    return tf.foldr(lambda acc, v: acc * 0.5 + tf.tanh(v), x)


def _switch_case(tf, x, p):
    idx = tf.cast(tf.reduce_sum(x) > 0.0, tf.int32) + (p % 2)
    return tf.switch_case(idx, [lambda: x * 2.0, lambda: tf.sin(x), lambda: tf.square(x)])


def _case(tf, x, p):
    s = tf.reduce_sum(x)
    return tf.case([(s > 1.0, lambda: tf.square(x)), (s < -1.0, lambda: -x)], default=lambda: tf.tanh(x),
                   exclusive=bool(p % 2))


def _boolean_mask_sum(tf, x, p):
    return tf.reduce_sum(tf.boolean_mask(x, x > 0.0)) + tf.reduce_sum(x) * 0.5


def _embedding(tf, x, p):
    if not _rank(x):
        return x
    ids = np.random.default_rng(p).integers(0, x.shape[0], size=(2, 1 + p % 2)).astype(np.int32)
    return tf.nn.embedding_lookup(x, ids)


def _logical(tf, x, p):
    c = [tf.logical_and(x > 0.0, tf.logical_not(x > 1.0)), tf.logical_or(x < -1.0, x > 1.0),
         tf.math.logical_xor(x > 0.0, x > 0.5)][p % 3]
    return tf.where(c, x, -x * 0.5)


def _any_all(tf, x, p):
    axis = _ax(x, p) if _rank(x) else None
    red = [tf.reduce_any, tf.reduce_all][(p >> 2) % 2]
    return tf.where(red(x > 0.0, axis=axis, keepdims=True), x, x * 0.25) if _rank(x) else x


def _mod(tf, x, p):
    return tf.math.mod(x, [0.7, -1.3, 2.0][p % 3])


def _getitem(tf, x, p):
    if not _rank(x):
        return x[None]
    return [x[..., None, ::-1], x[None, ..., :1], x[::-1, ..., None]][p % 3]


WIDE_UNARY = {
    "split_recombine": _split_recombine, "unstack_stack": _unstack_stack, "tf_slice": _tf_slice,
    "tensordot": _tensordot, "matvec": _matvec, "bias_add": _bias_add, "batch_norm": _batch_norm,
    "clip_by_norm": _clip_by_norm, "clip_by_global_norm": _clip_by_global_norm,
    "l2_loss": lambda tf, x, p: tf.nn.l2_loss(x), "swish": lambda tf, x, p: tf.nn.swish(x),
    "norm_axis": _norm_axis, "linalg_diag": _linalg_diag, "linspace": _linspace, "foldr": _foldr,
    "switch_case": _switch_case, "case": _case, "boolean_mask_sum": _boolean_mask_sum,
    "embedding": _embedding, "logical": _logical, "any_all": _any_all, "mod": _mod, "getitem": _getitem,
    "squeeze_all": lambda tf, x, p: tf.squeeze(x),
    "softmax_axis": lambda tf, x, p: tf.nn.softmax(x, axis=_ax(x, p)) if _rank(x) else x,
    "moments_var": lambda tf, x, p: tf.nn.moments(x, axes=[_ax(x, p)])[1] if _rank(x) else x,
}


def _flat(tf, t):
    return tf.reshape(t, [-1])


WIDE_BINARY = {
    "truediv": lambda tf, a, b, p: tf.math.truediv(a, b),
    "mod": lambda tf, a, b, p: tf.math.mod(a, b),
    "xor_where": lambda tf, a, b, p: tf.where(tf.math.logical_xor(a > 0.0, b > 0.0), a, b),
    "outer": lambda tf, a, b, p: tf.tensordot(_flat(tf, a), _flat(tf, b), axes=0),
    "concat_flat": lambda tf, a, b, p: tf.concat([_flat(tf, a), _flat(tf, b) * 0.5], 0),
    "squared_difference": lambda tf, a, b, p: tf.math.squared_difference(a, b),
}
