"""Source ops whose value the host produces before every run, like the random
ops (kind "random": passes/ir.py makes their output a runtime argument the
compiled runner draws by calling the kernel, so they compile natively)."""
import time

import numpy as np

from .. import dtypes
from .registry import NOT_DIFFERENTIABLE, apply_op, register


def _timestamp_infer(shapes, dts, attrs):
    return [((), dtypes.float64)]


# TF's Timestamp: seconds since the epoch as float64, read when the op runs
# (not differentiable: no gradient rule).
register("Timestamp", infer=_timestamp_infer,
         kernel=lambda attrs: np.array(time.time(), np.float64), kind="random", lowering="argument",
         grad=NOT_DIFFERENTIABLE)


def timestamp(name=None):
    """``tf.timestamp()``: a float64 scalar, the time in seconds when it runs."""
    return apply_op("Timestamp", [], {"shape": (), "dtype": dtypes.float64}, name=name or "Timestamp")
