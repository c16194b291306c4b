"""tf.math.bincount (and tf.compat.v1.bincount): how often each value 0, 1, ... occurs in an
integer tensor (or the sum of the weights at its positions), as TF 2.21's Python composes it:
output size max(arr) + 1 (0 for an empty arr), raised to minlength and cut to maxlength, then
TF's DenseBincount op.

The output length is the data's (also for minlength == maxlength: TF's static shape is
unknown there too), so DenseBincount is a reference-interpreter op, like tf.unique: a graph
holding one runs in the interpreter, counted in cache_info()['fallbacks']. TF registers no
gradient for it (LookupError when one must pass)."""
import numpy as np

from .. import dtypes
from ..convert import convert_all, convert_to_tensor, graph_of
from ..errors import InvalidArgumentError
from ._infer import check_dtype
from .array_ops import reshape, size as size_of
from .math_ops import cast, greater, maximum, minimum, multiply
from .reduction_ops import reduce_max
from .registry import NO_GRADIENT_RULE, apply_op, register

_INDEX_TYPES = (dtypes.int32, dtypes.int64)
_WEIGHT_TYPES = (dtypes.int32, dtypes.int64, dtypes.float32, dtypes.float64)


def _dense_bincount(attrs, arr, size, weights):
    """TF's DenseBincount kernel: per row of a 2-D arr (or for the whole 1-D one), the count
    (or summed weights, in order) of each value below ``size``; values >= size are dropped."""
    size = int(size)
    if size < 0:
        raise InvalidArgumentError(f"size ({size}) must be non-negative")
    if arr.size and arr.min() < 0:
        raise InvalidArgumentError("Input arr must be non-negative!")
    if weights.size and weights.shape != arr.shape:
        raise InvalidArgumentError(f"`weights` must be the same shape as `arr` or a length-0 `Tensor`, in which "
                                   f"case it acts as all weights equal to 1. Received arr.shape = {list(arr.shape)} "
                                   f"and weights.shape = {list(weights.shape)}")
    if arr.ndim not in (1, 2):
        raise InvalidArgumentError(f"DenseBincount: input must be 1 or 2-dimensional, got shape {list(arr.shape)}")
    rows = arr if arr.ndim == 2 else arr.reshape(1, arr.size)
    out = np.zeros((rows.shape[0], size), weights.dtype)
    r, c = np.nonzero(rows < size)
    if attrs["binary_output"] or not weights.size:
        np.add.at(out, (r, rows[r, c]), 1)
    else:
        np.add.at(out, (r, rows[r, c]), weights.reshape(rows.shape)[r, c])
    if attrs["binary_output"]:
        out = (out > 0).astype(weights.dtype)
    return out.reshape(arr.shape[:-1] + (size,))


def _infer(shapes, dts, attrs):
    check_dtype("DenseBincount", dts[0], _INDEX_TYPES, "input")
    check_dtype("DenseBincount", dts[2], _WEIGHT_TYPES, "weights")
    s = shapes[0]
    if s is not None and len(s) not in (1, 2):
        raise ValueError(f"Shape must be at most rank 2 but is rank {len(s)} for 'DenseBincount'")
    return [((None,) if s is None or len(s) == 1 else (s[0], None), dts[2])]


register("DenseBincount", denormals="flush",   # (sums of weights: TF adds with FTZ + DAZ)
         infer=_infer, kernel=_dense_bincount, data_dependent_shape=True,
         lowering="interpreter", grad=NO_GRADIENT_RULE, kind="other", shape_only=())


def bincount(arr, weights=None, minlength=None, maxlength=None, dtype=dtypes.int32, name=None, axis=None,
             binary_output=False):
    """``tf.math.bincount``: counts (or summed ``weights``, whose dtype the output takes;
    ``dtype`` without weights) of each value of ``arr`` (axis None / 0: all of it; -1: per
    row of a 2-D arr); negative values are an InvalidArgumentError when it runs."""
    g = graph_of([arr] if weights is None else [arr, weights])
    (arr,) = convert_all([arr], graph=g)
    if weights is not None:
        (weights,) = convert_all([weights], graph=g)
        if binary_output:
            raise ValueError("Arguments `binary_output` and `weights` are mutually exclusive. "
                             "Please specify only one.")
    if not arr.dtype.is_integer:
        arr = cast(arr, dtypes.int32)
    axis = 0 if axis is None else axis
    if axis not in (0, -1):
        raise ValueError(f"Unsupported value for argument axis={axis}. Only 0 and -1 are currently supported.")
    nonempty = cast(greater(size_of(arr), 0), arr.dtype)
    output_size = multiply(nonempty, reduce_max(arr) + 1)
    if minlength is not None:
        output_size = maximum(convert_to_tensor(minlength, dtype=arr.dtype), output_size)
    if maxlength is not None:
        output_size = minimum(convert_to_tensor(maxlength, dtype=arr.dtype), output_size)
    if axis == 0:
        arr = reshape(arr, [-1])
        if weights is not None:
            weights = reshape(weights, [-1])
    if weights is None:
        (weights,) = convert_all([np.zeros(0, dtypes.as_dtype(dtype).np)], graph=g)
    return apply_op("DenseBincount", [arr, output_size, weights], {"binary_output": bool(binary_output)},
                    name=name or "bincount")
