"""tf.unique / tf.unique_with_counts: a 1-D tensor's distinct values in order of first
occurrence, each element's index among them, and (with counts) how often each occurs.

Their output length is the data's, so they are reference-interpreter ops (a graph holding
one runs in the interpreter, counted in cache_info()['fallbacks']). Values compare as TF's
kernel compares them: -0.0 equals 0.0 (the first one is kept), each NaN is a value of its
own. TF registers no gradient for them (LookupError when one must pass)."""
import numpy as np

from .. import dtypes
from ..convert import convert_all
from ..errors import shape_error
from .registry import NO_GRADIENT_RULE, apply_op, register


def _unique(x, out_idx):
    """(values in first-occurrence order, index of each element, counts)."""
    if x.dtype == object or (x.dtype.kind == "f" and np.isnan(x).any()):
        seen, idx, first = {}, np.empty(x.shape[0], out_idx), []
        for i, v in enumerate(x.tolist()):        # (a NaN never equals a key: each its own)
            k = seen.setdefault(v, len(first))
            if k == len(first):
                first.append(i)
            idx[i] = k
        first = np.asarray(first, np.int64)
    else:
        _, first_sorted, inverse = np.unique(x, return_index=True, return_inverse=True)
        order = np.argsort(first_sorted, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        first = first_sorted[order]
        idx = rank[inverse.reshape(-1)].astype(out_idx)
    counts = np.bincount(idx.astype(np.int64), minlength=first.size).astype(out_idx)
    return x[first], idx, counts


def _infer(n_outputs):
    def infer(shapes, dts, attrs):
        s = shapes[0]
        if s is not None and len(s) != 1:
            raise shape_error(f"unique expects a 1D vector, got shape {list(s)}")
        outs = [((None,), dts[0]), ((None if s is None else s[0],), attrs["out_idx"])]
        return outs + [((None,), attrs["out_idx"])] if n_outputs == 3 else outs
    return infer


register("Unique", denormals="keep", infer=_infer(2),
         kernel=lambda attrs, x: _unique(x, attrs["out_idx"].np)[:2],
         data_dependent_shape=True, lowering="interpreter", grad=NO_GRADIENT_RULE, kind="other")
register("UniqueWithCounts", denormals="keep", infer=_infer(3),
         kernel=lambda attrs, x: _unique(x, attrs["out_idx"].np),
         data_dependent_shape=True, lowering="interpreter", grad=NO_GRADIENT_RULE, kind="other")


def _check_out_idx(out_idx):
    out_idx = dtypes.as_dtype(out_idx)
    if out_idx not in (dtypes.int32, dtypes.int64):
        raise TypeError(f"Value for attr 'out_idx' of {out_idx.name} is not in the list of allowed values: "
                        "int32, int64")
    return out_idx


def unique(x, out_idx=dtypes.int32, name=None):
    """``tf.unique`` -> (y, idx)."""
    (x,) = convert_all([x])
    return tuple(apply_op("Unique", [x], {"out_idx": _check_out_idx(out_idx)}, name=name or "Unique"))


def unique_with_counts(x, out_idx=dtypes.int32, name=None):
    """``tf.unique_with_counts`` -> (y, idx, count)."""
    (x,) = convert_all([x])
    return tuple(apply_op("UniqueWithCounts", [x], {"out_idx": _check_out_idx(out_idx)},
                          name=name or "UniqueWithCounts"))
