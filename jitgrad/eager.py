"""Eager tensors and immediate op execution.

An eager op runs the op's reference kernel at once. Active gradient tapes
(see tape.py) are told about every op so they can replay it backwards with
the same gradient rules graph mode uses.
"""
import itertools

import numpy as np

from . import context, dispatch, dtypes
from .errors import InvalidArgumentError, NoKernelError
from .graph import _Reference
from .ops.registry import apply_op, run_kernel
from .shapes import TensorShape

_ids = itertools.count(1)

# numpy dtype -> jitgrad DType, so reading ``.dtype`` is one dict lookup (dtypes' own table:
# bfloat16 joins it when it is first used).
_NP_TO_DT = dtypes._BY_NP


def _dtype_of(np_dtype):
    try:
        return _NP_TO_DT[np_dtype]
    except KeyError:
        return dtypes.as_dtype(np_dtype)

# Callables (opdef, inputs, outputs, attrs) -> None; installed by tape.py.
op_recorders = []

# Vectorised backward passes (GradientTape.jacobian): while _batching[0] is set,
# ops with a BatchedTensor input go to dispatch.batch_execute (installed by tape.py).
_batching = [False]


class EagerTensor:
    # _keras_mask: the Keras mask a layer attached to its output (TF's tensors carry it the same way)
    __slots__ = ("_value", "_id", "_keras_mask", "__weakref__")
    __array_priority__ = 100

    def __init__(self, value):
        self._value = value
        self._id = next(_ids)

    @property
    def dtype(self):
        try:
            return _NP_TO_DT[self._value.dtype]
        except KeyError:
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
        # tf.unstack along axis 0 (ops/array_ops.py builds on this module, so its op by name)
        out = apply_op("Unpack", [self], {"num": self._value.shape[0], "axis": 0}, name="unstack")
        return iter(out if isinstance(out, (tuple, list)) else (out,))

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
        if context.elementwise_equality(None):
            raise TypeError("Tensor is unhashable. Instead, use tensor.ref() as the key.")
        return id(self)  # after compat.v1.disable_tensor_equality()

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


# (opdef, input shapes/dtypes[, attrs]) -> output numpy dtypes, for ops whose
# shape/dtype rule already accepted these inputs once (the rule is pure, so
# it would accept them again; failures are never cached).
_infer_cache = {}
_INFER_CACHE_MAX = 8192
_CACHEABLE_ATTR_TYPES = frozenset((int, float, bool, str, type(None), tuple, dtypes.DType))


def _infer_key(opdef, vals, attrs):
    if len(vals) == 1:
        v = vals[0]
        key = (opdef, v.shape, v.dtype)
    elif len(vals) == 2:
        v, w = vals
        key = (opdef, v.shape, v.dtype, w.shape, w.dtype)
    else:
        key = (opdef,) + tuple([(v.shape, v.dtype) for v in vals])
    if attrs:
        items = []
        for k, v in attrs.items():
            if v.__class__ not in _CACHEABLE_ATTR_TYPES:
                return None
            items.append((k, v.__class__, v))
        key = key + tuple(items)
    return key


def execute(opdef, inputs, attrs):
    """Runs one op eagerly. Shape/dtype errors become InvalidArgumentError, as in TF."""
    if _batching[0]:
        for t in inputs:
            if type(t) is BatchedTensor:
                return dispatch.batch_execute(opdef, inputs, attrs)
    vals = [t._value for t in inputs]
    key = out_np = None
    if not opdef.stateful:
        key = _infer_key(opdef, vals, attrs)
        if key is not None:
            try:
                out_np = _infer_cache.get(key)
            except TypeError:  # an unhashable attr (a tuple holding a list): no caching
                key = None
    if out_np is None:
        try:
            specs = opdef.infer([v.shape for v in vals], [_dtype_of(v.dtype) for v in vals], attrs)
        except (ValueError, TypeError) as e:
            raise InvalidArgumentError(f"{opdef.name}: {e}") from None
        out_np = tuple([dt.np for _, dt in specs])
        if key is not None:
            if len(_infer_cache) >= _INFER_CACHE_MAX:
                _infer_cache.clear()
            _infer_cache[key] = out_np
    try:
        out = run_kernel(opdef, vals, attrs)
    except NoKernelError as e:      # TF's eager placement fails first: NotFoundError
        raise e.eager_error() from None
    results = []
    for arr, want in zip(out, out_np):
        if type(arr) is not np.ndarray:
            arr = np.asarray(arr)
        if arr.dtype != want:
            arr = arr.astype(want)
        results.append(EagerTensor(arr))
    if op_recorders:
        for rec in list(op_recorders):
            rec(opdef, inputs, results, attrs)
    return results[0] if len(results) == 1 else tuple(results)


dispatch.eager_execute = execute
dispatch.eager_types = frozenset((EagerTensor, BatchedTensor))
dispatch.eager_tensor = EagerTensor
