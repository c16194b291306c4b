"""tf.cond, eagerly, on a predicate that differs per row of an eager jacobian.

An eager ``GradientTape.jacobian`` / ``batch_jacobian`` (experimental_use_pfor, the default)
runs the backward pass once on BatchedTensors (tape.py: one row per cotangent). A gradient
function that branches on its upstream gradient -- a custom gradient's
``tf.cond(tf.reduce_sum(dy * x) > 0, ...)`` -- then gets a predicate with one value per row,
which Python's ``if`` cannot take (numpy's ValueError: tf_fuzz_batching seed 156). TF's pfor
converts such a cond to both branches over the rows and a select; so does this (as the graph
rule does, cond_batching.py): each branch runs on every row and each row takes its own
branch's values. Values only: an untaken branch's inf / NaN never reaches a row."""
import numpy as np

from . import nest
from .eager import BatchedTensor


def batched_cond(pred, true_fn, false_fn):
    """Both branches, then per row the taken one's values (``pred``: a BatchedTensor of one
    bool per row)."""
    p = np.asarray(pred._value)
    if p.dtype != np.bool_:
        raise TypeError(f"The predicate of tf.cond must be a bool tensor, got {p.dtype}")
    B = p.shape[0]
    if p.size != B:
        raise ValueError("The truth value of an array with more than one element is ambiguous. "
                         "Use a.any() or a.all()")
    p = p.reshape(B)
    r_t, r_f = true_fn(), false_fn()
    nest.assert_same_structure(r_t, r_f, check_types=False)
    out = []
    for t, f in zip(nest.flatten(r_t), nest.flatten(r_f)):
        tv, fv = _rows(t, B), _rows(f, B)
        if tv.shape != fv.shape or tv.dtype != fv.dtype:
            raise TypeError(f"tf.cond branches give {tv.dtype} {tv.shape[1:]} and {fv.dtype} {fv.shape[1:]}: "
                            "they must have the same dtype and shape")
        out.append(BatchedTensor(np.where(p.reshape((B,) + (1,) * (tv.ndim - 1)), tv, fv)))
    return nest.pack_sequence_as(r_t, out)


def _rows(t, B):
    """The [B] + shape values of a branch output, batched or not (a branch that does not read
    the rows gives one value for all)."""
    v = np.asarray(t._value if hasattr(t, "_value") else t)
    if type(t) is BatchedTensor:
        return v
    return np.broadcast_to(v, (B,) + v.shape)
