"""``tf.ensure_shape``: a tensor's shape checked against a (partly) known one -- when the graph
is built as far as it is known there (ValueError), and at run time for the rest
(InvalidArgumentError) -- and the tensor returned with the merged static shape."""
from . import context
from .assert_ops import Assert
from .convert import convert_to_tensor
from .errors import InvalidArgumentError
from .ops import array_ops, math_ops, reduction_ops
from .shapes import TensorShape


def _mismatch(x, want, name):
    return f"Shape of tensor {name or 'x'} {list(x)} is not compatible with expected shape {want}."


def ensure_shape(x, shape, name=None):
    x = convert_to_tensor(x)
    want = TensorShape(shape)
    if context.executing_eagerly():
        if not TensorShape(x.shape).is_compatible_with(want):
            raise InvalidArgumentError(_mismatch(x.shape.as_list(), want, name))
        return x
    if not x.shape.is_compatible_with(want):
        raise ValueError(_mismatch(x.shape.as_list() if x.shape.rank is not None else [], want, name))
    merged = x.shape.merge_with(want)
    checks = []
    if want.rank is not None and x.shape.dims != merged.dims:
        actual = array_ops.shape(x)
        if x.shape.rank is None:      # (a wrong rank fails here, or reading a dimension it lacks)
            checks.append(math_ops.equal(array_ops.size(actual), want.rank))
        checks += [math_ops.equal(actual[i], d) for i, d in enumerate(want.dims)
                   if d is not None and (x.shape.rank is None or x.shape.dims[i] is None)]
    if checks:
        ok = reduction_ops.reduce_all(array_ops.stack(checks))
        check = Assert(ok, [f"Shape of tensor {name or x.name} is not compatible with expected shape {want}.",
                            array_ops.shape(x)])
        with context.control_dependencies([check]):
            x = math_ops.identity(x)
    else:
        x = math_ops.identity(x)
    x.set_shape(merged)
    return x
