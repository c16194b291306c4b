"""tf.math.top_k / tf.nn.top_k, tf.sort, tf.argsort.

``TopKV2`` (x) -> (values, indices) along the last axis: the k largest, largest first, ties in
index order (TF's kernel is stable: its comparator breaks ties by index). tf.sort / tf.argsort are
TF's sort_ops composites of it: DESCENDING is top_k(x, n) (with a transpose for another axis);
ASCENDING is -top_k(-x) for floats, top_k(-x - 1) for signed and top_k(max - x) for unsigned
integers, so their order, ties and -0 / +0 follow TF's (``stable`` changes nothing: top_k is).

NaN: TF compares with ``>``, which no NaN satisfies, so where NaNs land depends on its sorting
algorithm (std::stable_sort for a full sort, a heap or partial sort for small k), not on a rule;
jitgrad orders NaN above +inf (its own rule, the same in compiled and interpreted code; README
"Known differences").

Gradients are TF's _TopKGrad: the values' gradient scattered to the indices (``TopKGrad``), whose
own gradient gathers there (``TakeAlongLastAxis``), and that one's scatters again, so higher
derivatives come for free.
"""
import collections

import numpy as np

from .. import dtypes
from ..convert import convert_to_tensor
from ..errors import InvalidArgumentError
from ._infer import NUMBERS, check_dtype
from .array_ops import get_static_value, shape, transpose
from .math_ops import negative, subtract
from .registry import apply_op, register

_INDEX_TYPES = (dtypes.int32, dtypes.int64)


def _check_k(k, n):
    if k < 0:
        raise ValueError(f"Need k >= 0, got {k}")
    if n is not None and n < k:
        raise ValueError(f"input must have at least k columns. Had {n}, needed {k}")


def _top_k_infer(shapes, dts, attrs):
    check_dtype("TopKV2", dts[0], NUMBERS, "input")
    s, k = shapes[0], attrs["k"]
    if s is not None and len(s) < 1:
        raise ValueError(f"Shape must be at least rank 1 but is rank 0 for 'TopKV2' (input), got shape {list(s)}")
    _check_k(k, None if s is None else s[-1])
    return [(None if s is None else tuple(s[:-1]) + (k,), dts[0]), (None if s is None else tuple(s[:-1]) + (k,),
                                                                    attrs["index_type"])]


def order_key_desc(x):
    """Indices sorting each last-axis row of x largest first, ties in index order, NaN above +inf."""
    if x.dtype in dtypes.FLOAT_NP:          # bfloat16 too: its numpy kind is "V" (tf_fuzz 180020)
        nan = np.isnan(x)
        neg = np.where(nan, 0, -x)
        first = np.argsort(neg, axis=-1, kind="stable")             # by value, largest first
        again = np.argsort(~np.take_along_axis(nan, first, -1), axis=-1, kind="stable")    # NaNs to the front
        return np.take_along_axis(first, again, -1)
    return np.argsort(~x, axis=-1, kind="stable")                    # ~x reverses any integer order


def _top_k_kernel(attrs, x):
    k = attrs["k"]
    if x.ndim < 1:
        raise InvalidArgumentError(f"input must be >= 1-D, got shape {list(x.shape)}")
    if x.shape[-1] < k:
        raise InvalidArgumentError(f"input must have at least k columns. Had {x.shape[-1]}, needed {k}")
    order = order_key_desc(x)[..., :k]
    return np.take_along_axis(x, order, -1), order.astype(attrs["index_type"].np)


def _top_k_grad(op, g_values, g_indices=None):
    """TF's _TopKGrad: the values' gradient scattered to the indices (none for a run-time k)."""
    return [apply_op("TopKGrad", [g_values, op.outputs[1], op.inputs[0]])] + [None] * (len(op.inputs) - 1)


register("TopKV2", denormals="keep", infer=_top_k_infer, kernel=_top_k_kernel, grad=_top_k_grad, kind="other", cost=4)


# ---------------------------------------------------------------- the gradient pair
def _flat_rows(indices, n):
    """TF's checks of gather / scatter indices along a last axis of n."""
    bad = (indices < 0) | (indices >= n)
    if np.any(bad):
        v = int(indices.reshape(-1)[np.argmax(bad.reshape(-1))])
        raise InvalidArgumentError(f"indices = {v} is not in [0, {n})")


def _take_infer(shapes, dts, attrs):
    check_dtype("TakeAlongLastAxis", dts[1], _INDEX_TYPES, "indices")
    p, i = shapes
    if p is not None and i is not None:
        if len(p) != len(i) or len(p) < 1 or any(a is not None and b is not None and a != b
                                                  for a, b in zip(p[:-1], i[:-1])):
            raise ValueError(f"TakeAlongLastAxis: indices of shape {list(i)} do not index the last axis of "
                             f"params of shape {list(p)}")
    return [(i, dts[0])]


def _take_kernel(attrs, params, indices):
    _flat_rows(indices, params.shape[-1])
    return np.take_along_axis(params, indices.astype(np.int64), -1)


def _scatter_infer(shapes, dts, attrs):
    check_dtype("TopKGrad", dts[1], _INDEX_TYPES, "indices")
    g, i, x = shapes
    if g is not None and i is not None and x is not None:
        if not (len(g) == len(i) == len(x) >= 1) or any(a is not None and b is not None and a != b
                                                         for a, b in list(zip(g, i)) + list(zip(g[:-1], x[:-1]))):
            raise ValueError(f"TopKGrad: gradient {list(g)} and indices {list(i)} do not fit input {list(x)}")
    return [(x, dts[0])]


def _scatter_kernel(attrs, g, indices, x):
    n = x.shape[-1]
    _flat_rows(indices, n)
    out = np.zeros(x.shape, g.dtype)
    rows = np.arange(int(np.prod(x.shape[:-1], dtype=np.int64))).reshape(x.shape[:-1] + (1,)) * n
    np.add.at(out.reshape(-1), (rows + indices.astype(np.int64)).reshape(-1), g.reshape(-1))
    return out


register("TakeAlongLastAxis", infer=_take_infer, kernel=_take_kernel, kind="layout",
         grad=lambda op, g: [apply_op("TopKGrad", [g, op.inputs[1], op.inputs[0]]), None])
# (denormals: a scatter-add into zeros, as TF's scatter_nd and the compiled code: it flushes)
register("TopKGrad", infer=_scatter_infer, kernel=_scatter_kernel, kind="other", shape_only=(2,), denormals="flush",
         grad=lambda op, g: [apply_op("TakeAlongLastAxis", [g, op.inputs[1]]), None, None])


# ---------------------------------------------------------------- public functions
def _static_k(k):
    """k's value when the graph is built (a Python int or a constant), else None."""
    v = k if isinstance(k, (int, np.integer)) else get_static_value(k)
    if v is not None and np.ndim(v) != 0:
        raise ValueError(f"Shape must be rank 0 but is rank {np.ndim(v)} for 'TopKV2' (k)")
    return None if v is None else int(v)


# ---------------------------------------------------------------- k a run-time value
def _dynamic_infer(shapes, dts, attrs):
    check_dtype("TopKV2", dts[1], (dtypes.int32,), "k")
    if shapes[1] not in (None, ()):
        raise ValueError(f"Shape must be rank 0 but is rank {len(shapes[1])} for 'TopKV2' (k)")
    check_dtype("TopKV2", dts[0], NUMBERS, "input")
    s = shapes[0]
    if s is not None and len(s) < 1:
        raise ValueError(f"Shape must be at least rank 1 but is rank 0 for 'TopKV2' (input), got shape {list(s)}")
    out = None if s is None else tuple(s[:-1]) + (None,)
    return [(out, dts[0]), (out, attrs["index_type"])]


def _k_of(attrs, k):
    k = int(k)
    if k < 0:
        raise InvalidArgumentError(f"Need k >= 0, got {k}")
    return {**attrs, "k": k}


# TF's TopKV2 with k a tensor: the interpreter runs it as it is, a compiled run evaluates k on
# the host and compiles TopKV2 for its value (OpDef.specialise, as array_ops_dynamic.py's ops)
register("DynamicTopK", denormals="keep",
         infer=_dynamic_infer, kernel=lambda attrs, x, k: _top_k_kernel(_k_of(attrs, k), x),
         grad=_top_k_grad, data_dependent_shape=True, shape_from=1, kind="other", lowering="interpreter",
         specialise=lambda attrs, k: ("TopKV2", _k_of(attrs, k)))


def top_k(input, k=1, sorted=True, index_type=dtypes.int32, name=None):  # noqa: A002 - TF's names
    """``tf.math.top_k``: (values, indices) of the k largest along the last axis. ``sorted=False``
    still returns them largest first (TF leaves that order unspecified)."""
    x = convert_to_tensor(input)
    index_type = dtypes.as_dtype(index_type)
    check_dtype("TopKV2", index_type, _INDEX_TYPES, "index_type")
    attrs = {"sorted": bool(sorted), "index_type": index_type}
    kv = _static_k(k)
    if kv is None:
        values, indices = apply_op("DynamicTopK", [x, convert_to_tensor(k)], attrs, name=name or "TopKV2")
    else:
        values, indices = apply_op("TopKV2", [x], {**attrs, "k": kv}, name=name or "TopKV2")
    return TopKV2(values, indices)


TopKV2 = collections.namedtuple("TopKV2", ["values", "indices"])     # what TF's top_k returns


def _descending(x, axis, return_argsort):
    rank = x.shape.rank
    if rank is None:
        raise NotImplementedError("tf.sort / tf.argsort need the rank of their input when the graph is built")
    if not -rank <= axis < rank:
        raise InvalidArgumentError(f"slice index {axis} of dimension 0 out of bounds.")
    axis %= rank
    n = x.shape[axis]
    if n is None:
        n = shape(x)[axis]        # (a run-time k: DynamicTopK)
    perm = None
    if axis != rank - 1:
        perm = list(range(rank))
        perm[axis], perm[-1] = rank - 1, axis
        x = transpose(x, perm)
    values, indices = top_k(x, n)
    out = indices if return_argsort else values
    return transpose(out, perm) if perm is not None else out


def _sort_or_argsort(values, axis, direction, return_argsort):
    if direction not in ("ASCENDING", "DESCENDING"):
        raise ValueError("Argument `direction` should be one of ASCENDING, DESCENDING. "
                         f"Received: direction={direction}")
    a = axis if isinstance(axis, (int, np.integer)) else get_static_value(axis)
    if a is None or np.ndim(a) != 0:
        raise ValueError(f"Argument `axis` must be a constant scalar. Received: axis={axis}.")
    x = convert_to_tensor(values)      # (TopKV2's shape rule rejects bool / complex / string with TF's types)
    if direction == "DESCENDING":
        return _descending(x, int(a), return_argsort)
    # TF's _ascending_sort: flip the order with a map that cannot overflow, sort descending, flip back
    if x.dtype.is_unsigned:
        top = x.dtype.np.type(np.iinfo(x.dtype.np).max)
        out = _descending(subtract(top, x), int(a), return_argsort)
        return out if return_argsort else subtract(top, out)
    if x.dtype.is_integer:
        out = _descending(subtract(negative(x), 1), int(a), return_argsort)
        return out if return_argsort else subtract(negative(out), 1)
    out = _descending(negative(x), int(a), return_argsort)
    return out if return_argsort else negative(out)


def sort(values, axis=-1, direction="ASCENDING", name=None):
    """``tf.sort``."""
    return _sort_or_argsort(values, axis, direction, False)


def argsort(values, axis=-1, direction="ASCENDING", stable=False, name=None):
    """``tf.argsort`` (int32 indices; always stable, as TF's top_k-based one is)."""
    return _sort_or_argsort(values, axis, direction, True)


__all__ = ["top_k", "sort", "argsort"]
