"""``tf.Variable`` in eager mode: the state lives in the object.

As in TF 2 (ResourceVariable), every use of a variable as a tensor is a
separate read. Active gradient tapes see each read as a "ReadVariableOp" whose
input is the variable's handle (an id), so ``x * x`` reads ``x`` twice and the
tape sums two contributions for it, exactly as TensorFlow does. A trainable
variable read inside a tape with ``watch_accessed_variables=True`` is watched
automatically.

Inside ``jitgrad.function`` tracing the variable is a graph "VariableV2" node
whose key names this object; the traced graph runs in a Session whose
variable store reads and writes the eager variables (see function.py).
"""
import numpy as np

from . import context, denormals, dispatch, dtypes, tape
from .convert import convert_to_tensor
from .eager import EagerTensor, _ids, tf_numpy_text
from .errors import InvalidArgumentError
from .function import commit_region_write_in_trace, gradient_source_in_trace, read_in_trace, update_in_trace
from .graph import _Reference
from .ops import overloads
from .ops.control_flow_ops import value_op
from .shapes import TensorShape
from .variables import Variable, variable_getitem


class EagerVariable(Variable):
    def __init__(self, initial_value=None, trainable=None, name=None, dtype=None, shape=None, constraint=None,
                 **_ignored):
        if getattr(self, "_handle_id", None) is not None:
            return  # tf.Variable(...) dispatched here and Python calls __init__ again
        self.constraint = constraint   # applied by the Keras optimizers after each update, as TF's
        if initial_value is None:
            raise ValueError("The initial value must be specified.")
        if callable(initial_value):
            initial_value = initial_value()
        if isinstance(initial_value, EagerVariable):
            initial_value = initial_value.read_value()
        init = convert_to_tensor(initial_value, dtype=dtype) if dtype is not None or not isinstance(
            initial_value, EagerTensor) else initial_value
        if not isinstance(init, EagerTensor):
            raise ValueError("An eager variable needs an eager initial value.")
        self._value = np.array(init._value, copy=True)
        self._dtype = dtypes.as_dtype(self._value.dtype)
        self._shape = TensorShape(self._value.shape) if shape is None else TensorShape(shape)
        if not self._shape.is_compatible_with(self._value.shape):
            raise ValueError(f"The initial value's shape ({TensorShape(self._value.shape)}) is not compatible "
                             f"with the explicitly supplied `shape` argument ({self._shape}).")
        self.trainable = True if trainable is None else bool(trainable)
        # TF 2 eager does not uniquify variable names; they carry the eager name scope.
        self._name = context.eager_scope_name() + (name or "Variable") + ":0"
        self._handle_id = next(_ids)
        self._key = f"__eager_var_{self._handle_id}"

    # ---------------------------------------------------------------- properties
    @property
    def name(self):
        return self._name

    @property
    def dtype(self):
        return self._dtype

    @property
    def shape(self):
        return self._shape

    def get_shape(self):
        return self._shape

    @property
    def device(self):
        return "/job:localhost/replica:0/task:0/device:CPU:0"

    @property
    def handle(self):
        return self._handle_id

    @property
    def initial_value(self):
        return EagerTensor(self._value)

    def ref(self):
        return _Reference(self)

    experimental_ref = ref

    # ---------------------------------------------------------------- reads
    def _jitgrad_to_tensor(self, graph=None):
        if graph is not None or not context.executing_eagerly():
            return read_in_trace(self, graph)
        return self._eager_read()

    def _graph_tensor(self):
        return read_in_trace(self, None)

    def _gradient_source(self):
        """As an x of tf.gradients in a trace: the read every read of it sends its gradient to."""
        return gradient_source_in_trace(self)

    def _as_graph_op(self):
        """As a control input in a trace (what assign returns there, TF's lazily read
        variable): the op giving its value so far -- its latest write."""
        return value_op(read_in_trace(self, None))

    # ---------------------------------------------------------------- inside control flow (ops/control_flow_ops.py)
    _region_key = property(lambda self: self._key)

    def _top_read(self):
        return read_in_trace(self, None)

    def _commit_region_write(self, op, value):
        commit_region_write_in_trace(self, op, value)

    def _eager_read(self):
        t = EagerTensor(self._value)
        if tape._stack or tape._variable_watchers:
            tape._variable_read(self, t)
        return t

    def value(self):
        return self._jitgrad_to_tensor()

    def read_value(self):
        return self._jitgrad_to_tensor()

    def numpy(self):
        v = self._value
        return v[()] if v.ndim == 0 else v.copy()

    def __array__(self, dtype=None, copy=None):
        return np.array(self._value, dtype=dtype, copy=True)

    # ---------------------------------------------------------------- writes
    def _convert_value(self, value):
        t = convert_to_tensor(value, dtype=self._dtype) if not isinstance(value, EagerTensor) else value
        if t.dtype != self._dtype:
            # TF converts the value to the variable's dtype first: a tensor of another dtype fails there
            raise ValueError(f"Tensor conversion requested dtype {self._dtype.name} for Tensor with dtype "
                             f"{t.dtype.name}: cannot assign it to variable '{self._name}'")
        return t

    def _check_shape(self, shape, what):
        if not self._shape.is_compatible_with(shape):
            raise ValueError(f"Cannot {what} value to variable '{self._name}': Shape mismatch.The variable shape "
                             f"{self._shape}, and the assigned value shape {TensorShape(shape)} are incompatible.")

    def _update(self, op_type, value, name, read_value):
        if not context.executing_eagerly():
            return update_in_trace(self, op_type, value, name, read_value)
        t = self._convert_value(value)
        if op_type == "Assign":
            self._check_shape(t._value.shape, "assign")
            self._value = np.array(t._value, copy=True)
        else:
            if t._value.shape != self._value.shape:     # TF's kernel: no broadcasting (a scalar too)
                raise InvalidArgumentError(f"Cannot update variable with shape {list(self._value.shape)} "
                                           f"using a Tensor with shape {list(t._value.shape)}, shapes "
                                           f"must be equal.")
            op = np.add if op_type == "AssignAdd" else np.subtract
            self._value = denormals.compute(lambda a, b: np.asarray(op(a, b), dtype=a.dtype), self._value, t._value)
        return self if read_value else None

    def assign(self, value, use_locking=None, name=None, read_value=True):
        return self._update("Assign", value, name, read_value)

    def assign_add(self, delta, use_locking=None, name=None, read_value=True):
        return self._update("AssignAdd", delta, name, read_value)

    def assign_sub(self, delta, use_locking=None, name=None, read_value=True):
        return self._update("AssignSub", delta, name, read_value)

    # ---------------------------------------------------------------- python protocol
    def __repr__(self):
        return (f"<tf.Variable '{self._name}' shape={self._shape} dtype={self._dtype.name}, "
                f"numpy={tf_numpy_text(self._value, is_repr=True)}>")

    __str__ = __repr__

    def __format__(self, spec):
        return format(self._eager_read(), spec) if spec else repr(self)

    def __hash__(self):
        if not context.elementwise_equality(None):
            return id(self)  # after compat.v1.disable_tensor_equality()
        raise TypeError("Variable is unhashable. Instead, use variable.ref() as the key. "
                        f"(Variable: {self!r})")

    def __float__(self):
        return float(EagerTensor(self._value))

    def __int__(self):
        return int(EagerTensor(self._value))

    def __bool__(self):
        return bool(EagerTensor(self._value))

    def __index__(self):
        return EagerTensor(self._value).__index__()

    def __len__(self):
        if self._value.ndim == 0:
            raise TypeError("len is not well defined for a scalar variable.")
        return self._value.shape[0]

    def __iter__(self):
        return iter(self.read_value())

    def __reduce__(self):
        return EagerVariable, (self._value, self.trainable, self._name[:-2])


def _install_operators():
    overloads.install(EagerVariable)
    EagerVariable.__getitem__ = variable_getitem
    # TF Variables: == is elementwise on tensors but identity-based ops stay usable.


_install_operators()
dispatch.eager_variable = EagerVariable
