"""Variable state ops. Their kernels take a ``state`` (see session.py's
VariableStore) so that a Session's graph variables and eager variables
captured by jitgrad.function share one mechanism."""
import numpy as np

from .. import denormals
from ..errors import FailedPreconditionError, InvalidArgumentError
from ..shapes import TensorShape
from .registry import NOT_DIFFERENTIABLE, NO_GRADIENT_RULE, register


def _var_infer(shapes, dts, attrs):
    return [(attrs["shape"], attrs["dtype"])]


def _read(attrs, state):
    return state.read(attrs["var"], attrs.get("name", attrs["var"]))


def _check_shape(attrs, value):
    if attrs.get("validate_shape", True) and tuple(value.shape) != tuple(attrs["shape"]):
        raise InvalidArgumentError(f"Assign requires shapes of both tensors to match. lhs shape= "
                                   f"{list(attrs['shape'])} rhs shape= {list(value.shape)}")


def _assign(attrs, state, value):
    _check_shape(attrs, value)
    state.write(attrs["var"], np.array(value, copy=True))
    return value


def _assign_update(sign):
    def kernel(attrs, state, value):
        old = state.read(attrs["var"], attrs.get("name", attrs["var"]))
        _check_shape(attrs, value)
        if old.shape != np.shape(value):
            raise InvalidArgumentError(f"Cannot update variable with shape {list(old.shape)} using a Tensor with "
                                       f"shape {list(np.shape(value))}, shapes must be equal.")
        new = denormals.compute(lambda a, b: ((a + b) if sign > 0 else (a - b)).astype(a.dtype, copy=False),
                                old, value)
        state.write(attrs["var"], new)
        return new
    return kernel


def _value_infer(shapes, dts, attrs):
    if dts[0] != attrs["dtype"]:
        raise TypeError(f"Assigning a {dts[0].name} value to a {attrs['dtype'].name} variable")
    if shapes[0] is not None and attrs.get("validate_shape", True) and \
            not TensorShape(shapes[0]).is_compatible_with(attrs["shape"]):
        raise ValueError(f"Shapes {TensorShape(attrs['shape'])} and {TensorShape(shapes[0])} are incompatible")
    return [(attrs["shape"], attrs["dtype"])]


def check_assigned_value(value, var, op_type):
    """What the Assign op's shape rule checks, for an assignment traced as dataflow
    (a variable assigned inside a tf.cond branch / tf.while_loop body)."""
    attrs = {"shape": var.shape.dims, "dtype": var.dtype, "validate_shape": True}
    _value_infer([value.shape.dims], [value.dtype], attrs)
    if op_type != "Assign" and value.shape.dims is not None and var.shape.dims is not None and \
            len(value.shape.dims) != len(var.shape.dims):
        raise ValueError(f"Shapes {var.shape} and {value.shape} are incompatible")


def _read_or_initial(attrs, state, initial):
    try:
        return state.read(attrs["var"], attrs.get("name", attrs["var"]))
    except FailedPreconditionError:
        return initial


register("VariableV2", infer=_var_infer, kernel=_read, kind="state", stateful=True, grad=NOT_DIFFERENTIABLE, lowering="argument")
# A variable's value if it is initialized, else its initial value: what another
# variable's initial value reads (variables.py), so initializers work in any order.
register("VariableOrInitial", infer=_var_infer, kernel=_read_or_initial, kind="state", stateful=True, grad=NO_GRADIENT_RULE, lowering="interpreter")
# As TF (state_grad.py): no gradient reaches the assigned value; the output, the variable's
# value after the assignment, is one of its reads (gradients.py sums over a variable's reads).
register("Assign", infer=_value_infer, kernel=_assign, kind="state", stateful=True, grad=NOT_DIFFERENTIABLE, lowering="state")
register("AssignAdd", infer=_value_infer, kernel=_assign_update(+1), kind="state", stateful=True, grad=NOT_DIFFERENTIABLE, lowering="state")
register("AssignSub", infer=_value_infer, kernel=_assign_update(-1), kind="state", stateful=True, grad=NOT_DIFFERENTIABLE, lowering="state")
register("NoOp", infer=lambda shapes, dts, attrs: [], kernel=lambda attrs, *xs: (), kind="state", stateful=True, grad=NOT_DIFFERENTIABLE, lowering="none")


class VariableStore:
    """Values of graph-mode variables for one Session."""

    def __init__(self):
        self.values = {}

    def read(self, key, name):
        try:
            return self.values[key]
        except KeyError:
            raise FailedPreconditionError(
                f"Attempting to use uninitialized value {name}") from None

    def write(self, key, value):
        if type(key) is not str:   # a compiled tf.print's / tf.Assert's input (ops/logging_ops.HostTarget)
            key.write(value)
            return
        self.values[key] = value
