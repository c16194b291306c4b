"""Python operators on graph and eager tensors, with TensorFlow's rules: the
other operand is converted to the tensor's dtype, ``/`` is true division
(integers become float64), ``==`` is elementwise in TF 2 code (eager tensors and
tensors of traced functions) and identity in TF1-style graphs."""
from .. import context
from ..convert import convert_all
from ..shapes import broadcast_dims
from . import array_ops, bitwise_ops, linalg_ops, math_ops


def _compare(fn, x, y, if_incompatible):
    """TF's ``equal(x, y, incompatible_shape_error=False)``: elementwise where the
    shapes broadcast, else the scalar ``if_incompatible`` (a bool tensor). Operands
    that do not convert to x's dtype raise, as in TF."""
    x, y = convert_all([x, y])
    try:
        broadcast_dims(x.shape.dims, y.shape.dims)
    except ValueError:
        return array_ops.constant(if_incompatible)
    return fn(x, y)


def _binary(fn, name):
    def op(self, other):
        return fn(self, other, name=name)

    def rop(self, other):
        return fn(other, self, name=name)
    return op, rop


def _by_dtype(logical, bitwise, name):
    """TF's ``and_`` / ``or_`` / ``xor_``: the logical op on a bool tensor, the bitwise one on
    any other (an integer's; a float's raises as BitwiseAnd does: InvalidArgumentError eagerly,
    TypeError in a graph). Decided by the tensor's dtype; the other operand converts to it."""
    def op(self, other):
        if self.dtype.is_bool:
            return logical(self, other, name=name)
        return bitwise(self, other, name=name)

    def rop(self, other):
        if self.dtype.is_bool:
            return logical(other, self, name=name)
        return bitwise(other, self, name=name)
    return op, rop


def _invert(self):
    """TF's ``invert_``: LogicalNot on bool, Invert (bitwise) on anything else."""
    if self.dtype.is_bool:
        return math_ops.logical_not(self)
    return bitwise_ops.invert(self)


def install(cls):
    table = {
        "add": (math_ops.add, "add"), "sub": (math_ops.subtract, "sub"), "mul": (math_ops.multiply, "mul"),
        "truediv": (math_ops.truediv, "truediv"), "floordiv": (math_ops.floordiv, "floordiv"),
        "mod": (math_ops.floormod, "mod"), "pow": (math_ops.pow, "pow"),
        "matmul": (linalg_ops.matmul, "matmul"),
    }
    for key, (fn, name) in table.items():
        op, rop = _binary(fn, name)
        setattr(cls, f"__{key}__", op)
        setattr(cls, f"__r{key}__", rop)
    # & | ^: logical on bool tensors, bitwise on integer ones (TF 2.21; << and >> are not
    # defined on TF's tensors: Python's TypeError, as there)
    for key, logical, bitwise in [("and", math_ops.logical_and, bitwise_ops.bitwise_and),
                                  ("or", math_ops.logical_or, bitwise_ops.bitwise_or),
                                  ("xor", math_ops.logical_xor, bitwise_ops.bitwise_xor)]:
        op, rop = _by_dtype(logical, bitwise, key)
        setattr(cls, f"__{key}__", op)
        setattr(cls, f"__r{key}__", rop)
    for key, fn in [("lt", math_ops.less), ("le", math_ops.less_equal), ("gt", math_ops.greater),
                    ("ge", math_ops.greater_equal)]:
        setattr(cls, f"__{key}__", _binary(fn, None)[0])

    def __eq__(self, other):
        if other is None:
            return False
        if not context.elementwise_equality(getattr(self, "_graph_if_symbolic", None)):
            return self is other  # TF1-style graph: identity, so tensors key dicts and sit in lists
        return _compare(math_ops.equal, self, other, False)

    def __ne__(self, other):
        if other is None:
            return True
        if not context.elementwise_equality(getattr(self, "_graph_if_symbolic", None)):
            return self is not other
        return _compare(math_ops.not_equal, self, other, True)

    cls.__eq__ = __eq__
    cls.__ne__ = __ne__
    cls.__neg__ = lambda self: math_ops.negative(self)
    cls.__abs__ = lambda self: math_ops.abs(self)
    cls.__invert__ = _invert
    cls.__getitem__ = lambda self, key: array_ops.strided_slice_getitem(self, key)
