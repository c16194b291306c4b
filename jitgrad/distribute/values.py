"""Per-replica values, how a batch is split into replica shards, and how replica values
are reduced.  Pure numpy: no Dask here, so this is also the single-process reference.

Summation order (fixed, documented): replica values are added as a binary tree over the
replica index -- ((r0 + r1) + (r2 + r3)) + r4 ... -- pairs (0,1), (2,3), ... first, an odd
last value carried up unchanged, level by level.  It depends on the number of replicas
only, never on the number or speed of the workers, so any cluster gives bit-identical
sums for the same shard split.
"""
import numpy as np

from .. import nest

REDUCE_OPS = ("SUM", "MEAN")


class PerReplica:
    """One value per replica (``tf.distribute``'s PerReplica); ``.values`` in replica order."""
    __slots__ = ("values",)

    def __init__(self, values):
        self.values = tuple(values)

    def __repr__(self):
        inner = ",\n  ".join(f"{i}: {v!r}" for i, v in enumerate(self.values))
        return f"PerReplica:{{\n  {inner}\n}}"


def split_batch(value, num_replicas):
    """A batch (array, or a nested structure of arrays with one leading batch dimension)
    -> a structure of PerReplica shards, split along axis 0 as np.array_split does: the
    first ``len % num_replicas`` shards get one more row (TF's rebatching gives the same)."""
    def split(a):
        a = np.asarray(a)
        if a.ndim == 0:
            raise ValueError("Cannot split a scalar across replicas: dataset elements need a batch dimension.")
        return PerReplica(np.array_split(a, num_replicas, axis=0))
    return nest.map_structure(split, value)


def local_results(value):
    """The per-replica values of a PerReplica (a tuple); anything else: ``(value,)``."""
    return value.values if isinstance(value, PerReplica) else (value,)


def tree_sum(values):
    """Sum of ``values`` (in replica order) as the fixed binary tree described above."""
    level = list(values)
    if not level:
        raise ValueError("Nothing to reduce: no replica values.")
    while len(level) > 1:
        nxt = [np.add(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return level[0]


def _as_reduce_op(reduce_op):
    name = getattr(reduce_op, "value", reduce_op)   # a ReduceOp enum member, or its name
    if not isinstance(name, str) or name.upper() not in REDUCE_OPS:
        raise ValueError(f"reduce_op must be one of {REDUCE_OPS} (or jitgrad.distribute.ReduceOp), got {reduce_op!r}")
    return name.upper()


def reduce_value(reduce_op, value, axis, num_replicas):
    """``strategy.reduce`` for one leaf.  axis=None: the replicas' values are combined
    elementwise (SUM: tree sum; MEAN: tree sum / number of replicas).  With an axis each
    replica's value is first summed over it (numpy's sum), then combined by the tree; MEAN
    divides by the total length of that axis over all replicas, as TF does."""
    op = _as_reduce_op(reduce_op)
    vals = [np.asarray(v) for v in local_results(value)]
    if isinstance(value, PerReplica) and len(vals) != num_replicas:
        raise ValueError(f"Expected {num_replicas} per-replica values, got {len(vals)}.")
    if not isinstance(value, PerReplica) and op == "SUM" and num_replicas != 1:
        # As TF: a value that is not per-replica is the same on every replica; its MEAN is
        # itself, and its SUM is not defined.
        raise ValueError(f"A non-PerReplica value {value!r} cannot be reduced with the given reduce op SUM.")
    if axis is None:
        total = tree_sum(vals)
        count = len(vals)
    else:
        total = tree_sum([np.sum(v, axis=axis) for v in vals])
        count = sum(v.shape[axis] for v in vals)
    if op == "SUM":
        return total
    dt = total.dtype if total.dtype.kind == "f" else np.float64
    return np.asarray(np.asarray(total, dt) / dt.type(count), dt)
