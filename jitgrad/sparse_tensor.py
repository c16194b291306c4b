"""``tf.SparseTensor``: the ``values`` at ``indices`` (int64, one row per value) of a tensor of
``dense_shape`` (int64), every other element zero. As in TF its three components are plain
tensors: eagerly EagerTensors (numpy-backed), in a graph graph tensors, so a graph's sparse
tensor is fed through its components (``tf.compat.v1.sparse_placeholder`` takes a
``SparseTensorValue``) and Session.run fetches one as a ``SparseTensorValue``
(session.py), and jitgrad.function takes and returns them (function.py). The ops on them
are composites of dense ops (sparse_ops.py), so they run, compile and differentiate as
those do. A SparseTensor is not a tensor: converting one raises, as TF."""
import collections

import numpy as np

from . import context, dispatch, dtypes
from .convert import convert_to_tensor
from .eager import EagerTensor
from .graph import Tensor
from .ops import array_ops, math_ops
from .ops.gather_nd import gather_nd
from .ops.array_ops import get_static_value
from .shapes import TensorShape

# TF 2.21's tf.compat.v1.SparseTensorValue: what Session.run returns for a SparseTensor fetch.
SparseTensorValue = collections.namedtuple("SparseTensorValue", ["indices", "values", "dense_shape"])


def _static_dense_shape(dense_shape, rank):
    """The TensorShape a dense_shape tensor names when the graph is built (-1: unknown dim)."""
    value = get_static_value(dense_shape)
    if value is not None:
        return TensorShape([None if d < 0 else int(d) for d in np.asarray(value).reshape(-1)])
    return TensorShape(None if rank is None else [None] * rank)


class SparseTensor:
    def __init__(self, indices, values, dense_shape):
        self._indices = convert_to_tensor(indices, dtype=dtypes.int64)
        self._values = convert_to_tensor(values)
        self._dense_shape = convert_to_tensor(dense_shape, dtype=dtypes.int64)
        ishape, vshape, sshape = self._indices.shape, self._values.shape, self._dense_shape.shape
        for what, s, rank in (("indices", ishape, 2), ("values", vshape, 1), ("dense_shape", sshape, 1)):
            if s.rank is not None and s.rank != rank:
                raise ValueError(f"Shape {s} must have rank {rank}")
        if ishape.rank == 2 and vshape.rank == 1 and not TensorShape([ishape.dims[0]]).is_compatible_with(
                [vshape.dims[0]]):
            raise ValueError(f"Dimensions {ishape.dims[0]} and {vshape.dims[0]} are not compatible")
        rank = sshape.dims[0] if sshape.rank == 1 else None
        if ishape.rank == 2 and rank is not None and ishape.dims[1] is not None and ishape.dims[1] != rank:
            raise ValueError(f"Dimensions {ishape.dims[1]} and {rank} are not compatible")
        self._shape = _static_dense_shape(self._dense_shape, rank if rank is not None else (
            ishape.dims[1] if ishape.rank == 2 else None))
        self._exact_shape = True        # (the dims known are dense_shape's constant value)

    @classmethod
    def from_value(cls, value):
        if isinstance(value, SparseTensor):
            return value
        return cls(value.indices, value.values, value.dense_shape)

    @property
    def indices(self):
        return self._indices

    @property
    def values(self):
        return self._values

    @property
    def dense_shape(self):
        return self._dense_shape

    @property
    def dtype(self):
        return self._values.dtype

    @property
    def shape(self):
        return self._shape

    def get_shape(self):
        return self._shape

    @property
    def op(self):
        return self._values.op

    @property
    def graph(self):
        return self._values.graph

    def with_values(self, new_values):
        """This sparse tensor's indices and dense_shape with ``new_values`` (same count)."""
        # (the static shape a traced input has is kept, as TF)
        return shaped_like(SparseTensor(self._indices, new_values, self._dense_shape), self)

    def consumers(self):
        return []

    def eval(self, feed_dict=None, session=None):
        sess = dispatch.default_session_for(self._values.graph, session)
        return sess.run(self, feed_dict)

    def __repr__(self):
        return f"SparseTensor(indices={self._indices!s}, values={self._values!s}, dense_shape={self._dense_shape!s})"

    # TF's operators: only a product or quotient with a dense tensor (SparseDenseCwiseMul/Div),
    # which broadcasts the dense operand to the sparse shape and keeps the sparse structure.
    def __mul__(self, other):
        return self._cwise(other, math_ops.multiply)

    def __truediv__(self, other):
        return self._cwise(other, math_ops.truediv)

    def _cwise(self, dense, fn):
        d = convert_to_tensor(dense, dtype=self.dtype)
        if isinstance(dense, SparseTensor) or d.shape.rank is not None and self._shape.rank is not None and \
                d.shape.rank > self._shape.rank:
            raise ValueError(f"A dense operand of rank {d.shape.rank} does not broadcast to the sparse shape "
                             f"{self._shape}")
        picked = gather_nd(array_ops.broadcast_to(d, self._dense_shape), self._indices)
        return self.with_values(fn(self._values, picked))

    __div__ = __truediv__


def with_static_shape(sp, shape, exact=True):
    """``sp`` with the static dense shape ``shape`` (what the graph builder knows of it: a
    traced SparseTensor argument's, a placeholder's, an op's output's), returned. ``exact``:
    its dense_shape tensor holds these dims whenever it runs, so ops may build on them; a
    sparse_placeholder's is not, as a feed may give it another dense_shape (TF's ops then
    take the fed one)."""
    if shape is not None:
        sp._shape = TensorShape(shape)
        sp._exact_shape = exact
    return sp


def shaped_like(sp, src, shape=None):
    """``sp`` with the static shape of ``src`` (or ``shape``, derived from it), exact as src's is."""
    return with_static_shape(sp, src.shape if shape is None else shape, src._exact_shape)


def known_dims(sp):
    """The dense dims ops may build on when the graph is built (None where not known), or
    None for an unknown rank."""
    if sp.shape.rank is None:
        return None
    return list(sp.shape.dims) if sp._exact_shape else [None] * sp.shape.rank


def is_sparse(x):
    return isinstance(x, SparseTensor)


def sparse_placeholder(dtype, shape=None, name=None):
    """``tf.compat.v1.sparse_placeholder``: a SparseTensor of three placeholders, fed with a
    SparseTensorValue (or a tuple of its three parts). A fully known ``shape`` is the default
    of the dense_shape placeholder, as TF."""
    if context.executing_eagerly():
        raise RuntimeError("tf.placeholder() is not compatible with eager execution.")
    name = name or "Placeholder"
    if shape is not None and not isinstance(shape, (Tensor, EagerTensor)):
        shape = TensorShape(shape)
    rank = None if shape is None or shape.rank is None else shape.rank
    indices = array_ops.placeholder(dtypes.int64, [None, rank], name=name + "/indices")
    values = array_ops.placeholder(dtype, [None], name=name + "/values")
    if shape is not None and shape.is_fully_defined():
        dense_shape = array_ops.placeholder_with_default(np.array(shape.as_list(), np.int64), [rank],
                                                         name=name + "/shape")
    else:
        dense_shape = array_ops.placeholder(dtypes.int64, [rank], name=name + "/shape")
    return with_static_shape(SparseTensor(indices, values, dense_shape), shape, exact=False)


def sparse_components(x):
    """(indices, values, dense_shape) of a SparseTensor or a SparseTensorValue / 3-tuple fed for one."""
    if isinstance(x, SparseTensor):
        return x.indices, x.values, x.dense_shape
    if isinstance(x, tuple) and len(x) == 3:
        return tuple(x)
    raise TypeError(f"The value fed for a SparseTensor must be a SparseTensorValue or a tuple "
                    f"(indices, values, dense_shape), got {type(x).__name__}")


