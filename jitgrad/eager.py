"""Eager tensors and immediate op execution.

An eager op runs the op's reference kernel at once. Active gradient tapes
(see tape.py) are told about every op so they can replay it backwards with
the same gradient rules graph mode uses.
"""
import itertools

import numpy as np

from . import dtypes
from .errors import InvalidArgumentError
from .ops import registry
from .shapes import TensorShape

_ids = itertools.count(1)

# Callables (opdef, inputs, outputs, attrs) -> None; installed by tape.py.
op_recorders = []

# Vectorised backward passes (GradientTape.jacobian): while _batching[0] is set,
# ops with a BatchedTensor input go to _batch_execute[0] (installed by tape.py).
_batching = [False]
_batch_execute = [None]


class EagerTensor:
    __slots__ = ("_value", "_id", "__weakref__")
    __array_priority__ = 100

    def __init__(self, value):
        self._value = value
        self._id = next(_ids)

    @property
    def dtype(self):
        return dtypes.as_dtype(self._value.dtype)

    @property
    def shape(self):
        return TensorShape(self._value.shape)

    def get_shape(self):
        return self.shape

    @property
    def ndim(self):
        return self._value.ndim

    @property
    def device(self):
        return "/job:localhost/replica:0/task:0/device:CPU:0"

    @property
    def name(self):
        raise AttributeError("Tensor.name is undefined when eager execution is enabled.")

    @property
    def graph(self):
        raise AttributeError("Tensor.graph is undefined when eager execution is enabled.")

    @property
    def op(self):
        raise AttributeError("Tensor.op is undefined when eager execution is enabled.")

    def numpy(self):
        v = self._value
        return v[()] if v.ndim == 0 else v.copy()

    def ref(self):
        from .graph import _Reference
        return _Reference(self)

    experimental_ref = ref

    def set_shape(self, shape):
        if not self.shape.is_compatible_with(shape):
            raise ValueError(f"Tensor's shape {self.shape} is not compatible with supplied shape {TensorShape(shape)}.")

    def __array__(self, dtype=None, copy=None):
        return self._value if dtype is None else self._value.astype(dtype)

    def __len__(self):
        if self._value.ndim == 0:
            raise TypeError("Scalar tensor has no `len()`")
        return self._value.shape[0]

    def __iter__(self):
        if self._value.ndim == 0:
            raise TypeError("Cannot iterate over a scalar tensor.")
        from .ops import array_ops
        return iter(array_ops.unstack(self))

    def _scalar(self, kind):
        if self._value.size != 1:
            raise TypeError(f"Only integer/float scalar tensors can be converted to {kind}; "
                            f"this one has shape {self.shape}")
        return self._value.reshape(())[()]

    def __float__(self):
        return float(self._scalar("float"))

    def __int__(self):
        return int(self._scalar("int"))

    def __index__(self):
        if not self.dtype.is_integer or self._value.ndim != 0:
            raise TypeError("Only integer scalar tensors can be used as an index.")
        return int(self._value)

    def __bool__(self):
        if self._value.size != 1:
            raise ValueError("The truth value of an array with more than one element is ambiguous. "
                             "Use a.any() or a.all()")
        return bool(self._scalar("bool"))

    def __hash__(self):
        raise TypeError("Tensor is unhashable. Instead, use tensor.ref() as the key.")

    def _text(self, is_repr):
        return tf_numpy_text(self._value, is_repr)

    def __str__(self):
        return f"tf.Tensor({self._text(False)}, shape={self.shape}, dtype={self.dtype.name})"

    def __repr__(self):
        return f"<tf.Tensor: shape={self.shape}, dtype={self.dtype.name}, numpy={self._text(True)}>"

    def __format__(self, spec):
        v = self._value
        return format(v[()] if v.ndim == 0 else v, spec) if spec or v.ndim == 0 else str(v)

    def __reduce__(self):
        return EagerTensor, (self._value,)


class BatchedTensor(EagerTensor):
    """An eager tensor with an extra leading batch dimension that ops do not
    see: ``shape`` is the shape of one row. Used for vectorised jacobians."""
    __slots__ = ()

    @property
    def shape(self):
        return TensorShape(self._value.shape[1:])

    @property
    def ndim(self):
        return self._value.ndim - 1


def tf_numpy_text(value, is_repr=False):
    """TF's numpy_text(), with numpy-2 scalar reprs shown as TF showed them (``10.0``)."""
    v = value
    text = str(v[()]) if v.ndim == 0 else (repr(v) if is_repr else str(v))
    return "\n" + text if "\n" in text else text


def execute(opdef, inputs, attrs):
    """Runs one op eagerly. Shape/dtype errors become InvalidArgumentError, as in TF."""
    if _batching[0]:
        for t in inputs:
            if type(t) is BatchedTensor:
                return _batch_execute[0](opdef, inputs, attrs)
    try:
        specs = opdef.infer([t._value.shape for t in inputs], [t.dtype for t in inputs], attrs)
    except (ValueError, TypeError) as e:
        raise InvalidArgumentError(f"{opdef.name}: {e}") from None
    outs = registry.run_kernel(opdef, [t._value for t in inputs], attrs)
    results = []
    for arr, (shape, dt) in zip(outs, specs):
        arr = np.asarray(arr)
        if arr.dtype != dt.np:
            arr = arr.astype(dt.np)
        results.append(EagerTensor(arr))
    if op_recorders:
        for rec in list(op_recorders):
            rec(opdef, inputs, results, attrs)
    return results[0] if len(results) == 1 else tuple(results)


registry._eager_execute[0] = execute
