"""The ``keras.ops`` a Keras optimizer's ``update_step`` uses, taking ``tf.IndexedSlices`` as
Keras 3's TensorFlow backend does (keras/src/backend/tensorflow/sparse.py), so a gradient of a
gather updates the slots with the same numbers as TF 2.21:

* zero-preserving unary ops (square, sqrt, abs, sign, negative) act on the values: a
  repeated index's rows are each squared, say, and summed only when made dense;
* add / subtract / maximum of slices and a dense tensor make the slices dense (repeated
  indices summed) and give a dense result;
* multiply / divide of slices by a scalar or a dense tensor stay slices: the values times
  (over) the dense tensor's rows at the indices;
* ``assign_add`` / ``assign_sub`` / ``assign`` of slices scatter them into the variable
  (repeated indices accumulating), as the backend's TFOptimizer does.

Dense operands go straight to the usual ops, so a dense gradient's numbers are unchanged.
Not mirrored (no optimizer reaches them): slices combined with slices of other indices (Keras
builds their union; here they are made dense), and the division branch Keras takes when the
dense divisor has a zero or NaN row."""
from .indexed_slices import IndexedSlices
from .convert import convert_to_tensor
from .ops import array_ops, math_ops


def _slices(x):
    return isinstance(x, IndexedSlices)


def _scalar(x):
    """Keras' test: no shape (a Python number) or rank 0."""
    shape = getattr(x, "shape", None)
    return shape is None or shape.rank == 0


def _dense(x):
    return convert_to_tensor(x) if _slices(x) else x       # (IndexedSlices: an unsorted_segment_sum)


def _with_values(x, values):
    return IndexedSlices(values, x.indices, x.dense_shape)


def _unary(fn):
    def op(x):
        return _with_values(x, fn(x.values)) if _slices(x) else fn(x)
    op.__name__ = fn.__name__
    return op


square, sqrt, abs, sign, negative = (_unary(f) for f in (  # noqa: A001
    math_ops.square, math_ops.sqrt, math_ops.abs, math_ops.sign, math_ops.negative))


def _densifying(fn):
    """Keras' elementwise_binary_union: slices with slices of the same indices stay slices,
    any other mix is made dense."""
    def op(x1, x2):
        if _slices(x1) and _slices(x2) and x1.indices is x2.indices:
            return _with_values(x1, fn(x1.values, x2.values))
        return fn(_dense(x1), _dense(x2))
    op.__name__ = fn.__name__
    return op


add, subtract, maximum = (_densifying(f) for f in (math_ops.add, math_ops.subtract, math_ops.maximum))


def _row_wise(fn, dense_slices_first):
    """Keras' elementwise_binary_intersection (multiply) and elementwise_division (divide):
    slices by a scalar or a dense tensor keep the slices' indices."""
    def op(x1, x2):
        if _slices(x1) and _slices(x2):
            if x1.indices is x2.indices:
                return _with_values(x1, fn(x1.values, x2.values))
            return fn(_dense(x1), _dense(x2))
        if _slices(x1):
            return _with_values(x1, fn(x1.values, x2 if _scalar(x2) else array_ops.gather(x2, x1.indices)))
        if _slices(x2):
            if not dense_slices_first:      # dense / slices: Keras makes the slices dense
                return fn(x1, _dense(x2))
            return _with_values(x2, fn(x1 if _scalar(x1) else array_ops.gather(x1, x2.indices), x2.values))
        return fn(x1, x2)
    op.__name__ = fn.__name__
    return op


multiply = _row_wise(math_ops.multiply, dense_slices_first=True)
divide = _row_wise(math_ops.truediv, dense_slices_first=False)


def cast(x, dtype):
    if _slices(x):
        return _with_values(x, math_ops.cast(x.values, dtype)) if x.dtype != dtype else x
    return math_ops.cast(x, dtype) if x.dtype != dtype else x


def _scatter_rows(x):
    return array_ops.expand_dims(x.indices, 1), x.values


def assign(variable, value):
    return variable.scatter_nd_update(*_scatter_rows(value)) if _slices(value) else variable.assign(value)


def assign_add(variable, value):
    return variable.scatter_nd_add(*_scatter_rows(value)) if _slices(value) else variable.assign_add(value)


def assign_sub(variable, value):
    return variable.scatter_nd_sub(*_scatter_rows(value)) if _slices(value) else variable.assign_sub(value)
