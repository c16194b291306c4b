"""``jitgrad.distribute``: data-parallel steps on a Dask cluster (``tf.distribute``'s shape).

Dask is an optional extra (``pip install 'jitgrad[distributed]'``), imported when a
DaskStrategy is created, never by ``import jitgrad`` or ``import jitgrad.distribute``.
See strategy.py for how a step, its kernels and its variables travel, and values.py for
the fixed summation order.
"""
import enum

from .strategy import DaskStrategy
from .values import PerReplica, tree_sum


class ReduceOp(enum.Enum):
    """``tf.distribute.ReduceOp``."""
    SUM = "SUM"
    MEAN = "MEAN"


__all__ = ["DaskStrategy", "PerReplica", "ReduceOp", "tree_sum"]
