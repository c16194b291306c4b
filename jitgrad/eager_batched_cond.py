"""tf.cond / tf.case / tf.switch_case, eagerly, on a predicate that differs per row of an
eager jacobian.

An eager ``GradientTape.jacobian`` / ``batch_jacobian`` (experimental_use_pfor, the default)
runs the backward pass once on BatchedTensors (tape.py: one row per cotangent). A gradient
function that branches on its upstream gradient -- a custom gradient's
``tf.cond(tf.reduce_sum(dy * x) > 0, ...)`` -- then gets a predicate with one value per row,
which Python's ``if`` cannot take (numpy's ValueError: tf_fuzz_batching seed 156). TF's pfor
converts such a branch to the branches over the rows and a select; so does this (as the
graph rule does, cond_batching.py): each branch some row takes runs on every row, and each
row takes its own branch's values. Values only: an untaken branch's inf / NaN never reaches
a row."""
import numpy as np

from . import nest
from .eager import BatchedTensor


def is_batched(t):
    return type(t) is BatchedTensor


def batched_cond(pred, true_fn, false_fn):
    """``pred``: a BatchedTensor of one bool per row."""
    p = row_scalars(pred, "The predicate of tf.cond")
    return select_rows(np.where(p, 0, 1), [true_fn, false_fn])


def batched_case(preds, fns, default):
    """The first true predicate's fn per row, else ``default`` (preds: batched or not)."""
    B = next(int(p._value.shape[0]) for p in preds if is_batched(p))
    choice = np.full(B, len(fns))
    for k in reversed(range(len(preds))):
        p = preds[k]
        v = row_scalars(p, "A tf.case predicate") if is_batched(p) else np.broadcast_to(_scalar(p), B)
        choice = np.where(v, k, choice)
    return select_rows(choice, list(fns) + [default])


def batched_switch(idx, branch_of):
    """``branch_of(i)``: the fn of index i (the default for an index out of range)."""
    i = row_scalars(idx, "The branch index of tf.switch_case", np.integer)
    fns, choice = [], np.empty(i.shape[0], np.int64)
    for v in np.unique(i):
        choice[i == v] = len(fns)
        fns.append(branch_of(int(v)))
    return select_rows(choice, fns)


def select_rows(choice, fns):
    """Row b: fns[choice[b]]()'s values; each fn some row chooses runs once on all rows."""
    B = choice.shape[0]
    used = sorted(set(int(c) for c in choice))
    results = {k: fns[k]() for k in used}
    first = results[used[0]]
    for k in used[1:]:
        nest.assert_same_structure(first, results[k], check_types=False)
    flats = {k: nest.flatten(r) for k, r in results.items()}
    out = []
    for n in range(len(flats[used[0]])):
        vals = {k: _rows(flats[k][n], B) for k in used}
        v0 = vals[used[0]]
        for k in used[1:]:
            if vals[k].shape != v0.shape or vals[k].dtype != v0.dtype:
                raise TypeError(f"The branches give {v0.dtype} {v0.shape[1:]} and {vals[k].dtype} "
                                f"{vals[k].shape[1:]}: they must have the same dtype and shape")
        sel = np.array(v0)
        for k in used[1:]:
            rows = choice == k
            sel[rows] = vals[k][rows]
        out.append(BatchedTensor(sel))
    return nest.pack_sequence_as(first, out)


def row_scalars(t, what, kind=np.bool_):
    """One value per row of BatchedTensor ``t`` (a row of one element, any rank, as TF's eager ``if``)."""
    v = np.asarray(t._value)
    if not (v.dtype == kind if kind is np.bool_ else np.issubdtype(v.dtype, kind)):
        raise TypeError(f"{what} must be a {'bool' if kind is np.bool_ else 'integer'} tensor, got {v.dtype}")
    B = v.shape[0]
    if v.size != B:
        raise ValueError("The truth value of an array with more than one element is ambiguous. "
                         "Use a.any() or a.all()")
    return v.reshape(B)


def _scalar(t):
    return bool(np.asarray(t._value if hasattr(t, "_value") else t))


def _rows(t, B):
    """The [B] + shape values of a branch output, batched or not (a branch that does not read
    the rows gives one value for all)."""
    v = np.asarray(t._value if hasattr(t, "_value") else t)
    if is_batched(t):
        return v
    return np.broadcast_to(v, (B,) + v.shape)


def rows_active(c, active):
    """tf.while_loop's condition per row: the rows still looping (a row that stopped stays
    stopped, as in TF's pfor). ``c``: this test's value, batched or not; ``active``: the
    rows of the last test, or None before the first batched one."""
    if is_batched(c):
        v = row_scalars(c, "The loop condition")
    else:
        v = np.broadcast_to(_scalar(c), active.shape)
    return v if active is None else active & v


def merge_rows(active, old, new):
    """After a body step: the new values on the rows still looping, the old on the others."""
    B = active.shape[0]
    out = []
    for o, n in zip(old, new):
        if not hasattr(n, "_value"):
            raise NotImplementedError("A tf.while_loop whose condition differs per row of an eager jacobian "
                                      f"cannot carry a {type(n).__name__}")
        ov, nv = _rows(o, B), _rows(n, B)
        if ov.shape != nv.shape:
            raise ValueError(f"A loop variable changes shape from {ov.shape[1:]} to {nv.shape[1:]} in a loop "
                             "whose condition differs per row of an eager jacobian")
        out.append(BatchedTensor(np.where(active.reshape((B,) + (1,) * (nv.ndim - 1)), nv, ov)))
    return out
