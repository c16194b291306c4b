"""``tf.IndexedSlices``: the rows ``values`` at ``indices`` of a tensor of ``dense_shape``.
The gradient from row gathers is one, as in TF (sparse_gradients.py). Used as a tensor it
is made dense, repeated indices adding up, as TF does. A Session fetches one as
``tf.compat.v1.IndexedSlicesValue`` (numpy values, indices and dense_shape)."""
import collections

from . import context, dispatch
from .convert import convert_to_tensor
from .ops import math_ops
from .ops.array_ops import get_static_value
from .ops.segment_ops import unsorted_segment_sum
from .shapes import TensorShape


class IndexedSlices:
    def __init__(self, values, indices, dense_shape=None):
        self._values, self._indices = convert_to_tensor(values), convert_to_tensor(indices)
        self._dense_shape = None if dense_shape is None else convert_to_tensor(dense_shape)

    @property
    def values(self):
        return self._values

    @property
    def indices(self):
        return self._indices

    @property
    def dense_shape(self):
        return self._dense_shape

    @property
    def dtype(self):
        return self._values.dtype

    @property
    def shape(self):
        static = None if self._dense_shape is None else get_static_value(self._dense_shape)
        return TensorShape(None if static is None else [int(d) for d in static])

    def __neg__(self):
        return IndexedSlices(math_ops.negative(self._values), self._indices, self._dense_shape)

    def __repr__(self):
        return (f"IndexedSlices(indices={str(self._indices)}, values={str(self._values)}"
                + ("" if self._dense_shape is None else f", dense_shape={str(self._dense_shape)}") + ")")

    def _jitgrad_to_tensor(self, graph):
        dense = self.__dict__.get("_dense")
        if dense is not None and _same_graph(self._values, graph):
            # (a gather's gradient: the dense one its op's gradient function gives, as before
            # slices -- one GatherGrad, which compiles wherever the gather does)
            if dense[1] is None:
                dense[1] = dense[0]()
            return dense[1]
        if self._dense_shape is None:
            raise ValueError(f"Tensor conversion requested for IndexedSlices for argument without dense_shape: "
                             f"{self!r}")
        return unsorted_segment_sum(self._values, self._indices, self._dense_shape[0])


def _same_graph(t, graph):
    """Whether tensor ``t`` can feed an op made in ``graph`` (default: the graph being built;
    eager tensors: any)."""
    g = getattr(t, "graph", None)
    if g is None:
        return True
    if graph is None:
        graph = None if context.executing_eagerly() else context.get_default_graph()
    return g is graph


class IndexedSlicesValue(collections.namedtuple("IndexedSlicesValue", ["values", "indices", "dense_shape"])):
    """What Session.run gives for an IndexedSlices fetch (TF's tf.compat.v1.IndexedSlicesValue)."""


dispatch.indexed_slices = IndexedSlices
