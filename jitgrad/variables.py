"""``tf.Variable`` in graph mode (state lives in each Session, set by running
an initializer) and in eager mode (state lives in the object)."""
import itertools
import weakref

from . import context, dispatch
from .convert import convert_to_tensor, to_numpy
from .eager import EagerTensor
from . import legacy_region_writes
from .func_graph import in_region
from .graph import Tensor
from .function import create_variable_in_trace
from .ops.control_flow_ops import assign_in_region, read_for_gradient
from .ops import overloads, scatter_nd
from .ops.array_ops import strided_slice_getitem, strided_slice_update
from .ops.gather_batched import gather
from .ops.gather_nd import gather_nd
from .ops.registry import apply_op
from .passes.prune import prune
from .session import default_session_for
from .shapes import TensorShape

_var_ids = itertools.count()
# Called with each eager tf.Variable created (jitgrad.distribute's strategy.scope() mirrors them).
creation_observers = []


class _VariableMeta(type):
    """``tf.Variable(...)`` builds a GraphVariable or an EagerVariable. Done in
    the metaclass (not ``__new__``) so the subclass's ``__init__`` runs once:
    with ``__new__`` Python would call it a second time with the caller's
    arguments, creating every graph variable twice ('Variable_1')."""

    def __call__(cls, *args, **kwargs):
        if cls is Variable:
            return cls._dispatch(*args, **kwargs)
        return super().__call__(*args, **kwargs)


class Variable(metaclass=_VariableMeta):
    """Dispatches to a graph or eager variable, like TF 2's tf.Variable."""

    @staticmethod
    def _dispatch(initial_value=None, trainable=None, validate_shape=True, caching_device=None,
                  name=None, variable_def=None, dtype=None, import_scope=None, constraint=None,
                  synchronization=None, aggregation=None, shape=None, experimental_enable_variable_lifting=True):
        if initial_value is None:
            raise ValueError("The initial value must be specified.")
        if constraint is not None and not callable(constraint):
            raise ValueError(f"Argument `constraint` must be None or a callable. Got a {type(constraint)}: "
                             f"{constraint!r}")
        if context.executing_eagerly():
            var = dispatch.eager_variable(initial_value, trainable=trainable, name=name, dtype=dtype, shape=shape,
                                          constraint=constraint)
            for observe in creation_observers:
                observe(var)
            return var
        trace = context.current_trace()
        if trace is not None:
            return create_variable_in_trace(trace, initial_value, trainable=trainable, name=name, dtype=dtype,
                                            shape=shape, constraint=constraint)
        return GraphVariable(initial_value, trainable=trainable, name=name, dtype=dtype,
                             validate_shape=validate_shape, shape=shape, constraint=constraint)


def _variable_scatter(fn):
    """TF's Variable.scatter_nd_* methods: the value with the rows scattered in, assigned."""
    def method(self, indices, updates, name=None):
        return self.assign(fn(self, indices, updates), name=name)
    method.__name__ = fn.__name__.replace("tensor_", "")
    return method


# v[key] tensors, which TF lets assign back into v: id(tensor) -> (v, key), dropped with the tensor.
_SLICED_FROM = {}


def _assign_into_source(self, value, name=None):
    var, key = _SLICED_FROM[id(self)]
    return var.assign(strided_slice_update(var.value(), key, value), name=name)


class VariableSlice(Tensor):
    """A graph tensor ``v[key]`` that can be assigned back into ``v`` (``v[1:].assign(x)``)."""
    __slots__ = ()
    assign = _assign_into_source


class EagerVariableSlice(EagerTensor):
    """An eager tensor ``v[key]`` that can be assigned back into ``v``."""
    __slots__ = ()
    assign = _assign_into_source


_SLICE_CLASSES = {Tensor: VariableSlice, EagerTensor: EagerVariableSlice}


def variable_getitem(self, key):
    """``v[key]`` as TF's: a tensor with an ``assign`` method writing into v's slice. The class is
    swapped (same layout) rather than wrapped, so the slice is the op's own output tensor."""
    t = strided_slice_getitem(self, key)
    sliced = _SLICE_CLASSES.get(type(t))
    if sliced is not None:
        t.__class__ = sliced
        _SLICED_FROM[id(t)] = (self, key)
        weakref.finalize(t, _SLICED_FROM.pop, id(t), None)
    return t


Variable.scatter_nd_update = _variable_scatter(scatter_nd.tensor_scatter_nd_update)
Variable.scatter_nd_add = _variable_scatter(scatter_nd.tensor_scatter_nd_add)
Variable.scatter_nd_sub = _variable_scatter(scatter_nd.tensor_scatter_nd_sub)
Variable.sparse_read = lambda self, indices, name=None: gather(self, indices, name=name)
Variable.gather_nd = lambda self, indices, name=None: gather_nd(self, indices, name=name)


class GraphVariable(Variable):
    def __init__(self, initial_value, trainable=None, name=None, dtype=None, validate_shape=True, shape=None,
                 constraint=None):
        graph = context.get_default_graph()
        self.trainable = True if trainable is None else bool(trainable)
        self.constraint = constraint   # applied by the Keras optimizers after each update, as TF's
        if callable(initial_value):
            initial_value = initial_value()
        var_name = graph.unique_name(name or "Variable")
        with graph.name_scope(var_name + "/"):
            init = convert_to_tensor(initial_value, dtype=dtype, name="initial_value", graph=graph)
            init = _guard_variable_reads(init, graph)
            dims = init.shape.dims if shape is None else TensorShape(shape).dims
            self._attrs = {"var": var_name, "shape": dims, "dtype": init.dtype, "name": var_name,
                           "validate_shape": validate_shape}
            self._value = apply_op("VariableV2", [], self._attrs, name=var_name, exact_name=True)
            self.initializer = apply_op("Assign", [init], self._attrs, name="Assign").op
        self.graph = graph
        self._initial_value = init
        graph._variables.append(self)
        graph.add_to_collection("variables", self)
        if self.trainable:
            graph.add_to_collection("trainable_variables", self)

    # -- tensor protocol
    def _read(self):
        """The variable's value where it is used.  Under ``tf.control_dependencies`` a
        fresh read op that runs after them (TF's ReadVariableOp), so it sees their
        assignments; inside a tf.cond branch / tf.while_loop body its value there
        (func_graph.FuncGraph.read_variable); elsewhere the variable's one read node."""
        fg = in_region()
        if fg is not None:
            return self._region_read(fg)
        if not self.graph._control_deps or context.get_default_graph() is not self.graph:
            return self._value
        return apply_op("VariableV2", [], self._attrs, name=self._attrs["name"] + "/read")

    def _jitgrad_to_tensor(self, graph=None):
        return self._read()

    def _graph_tensor(self):
        fg = in_region()
        return self._value if fg is None else self._region_read(fg)

    def _gradient_source(self):
        """As an x of tf.gradients: its one read node (in a region, its capture), which
        all its reads send their gradients to (_region_read)."""
        fg = in_region()
        return self._value if fg is None else fg.capture(self._value)

    def _region_read(self, fg):
        """A read in branch / loop body ``fg``: its value there, differentiated as the
        variable's one read node (tf.gradients with respect to the variable)."""
        return read_for_gradient(fg.read_variable(self), fg.capture(self._value))

    # -- inside control flow (ops/control_flow_ops.py)
    _region_key = property(lambda self: self._attrs["var"])

    def _top_read(self):
        return self._read()

    def _commit_region_write(self, op, value):
        pass   # the If / While op writes the variable itself when it runs (its var_writes attr)

    _graph_for_conversion = property(lambda self: self.graph)
    # Like graph tensors: identity ==/hash in a plain Graph (ops/overloads.py),
    # and numpy defers to our reflected operators (np.float32(2) * v).
    _graph_if_symbolic = property(lambda self: self.graph)
    __array_priority__ = 100

    def value(self):
        return self._read()

    def read_value(self):
        return apply_op("Identity", [self._read()], name="read")

    @property
    def name(self):
        return self._value.name

    @property
    def op(self):
        return self._value.op

    @property
    def dtype(self):
        return self._value.dtype

    @property
    def shape(self):
        return self._value.shape

    def get_shape(self):
        return self.shape

    @property
    def initial_value(self):
        return self._initial_value

    def _update(self, op_type, value, name, read_value=True):
        fg = in_region()
        if fg is not None:
            out = assign_in_region(fg, self, op_type, value, read_value)
            if read_value and legacy_region_writes.is_legacy(fg):
                # (a plain graph's: what it returns is the assignment's marker, read as the variable)
                return read_for_gradient(out, fg.capture(self._value))
            return self._region_read(fg) if read_value else out   # a read, not the value assigned
        v = convert_to_tensor(value, dtype=self.dtype, graph=self.graph)
        return apply_op(op_type, [v], self._attrs, name=name or op_type)

    def assign(self, value, use_locking=None, name=None, read_value=True):
        return self._update("Assign", value, name, read_value)

    def assign_add(self, delta, use_locking=None, name=None, read_value=True):
        return self._update("AssignAdd", delta, name, read_value)

    def assign_sub(self, delta, use_locking=None, name=None, read_value=True):
        return self._update("AssignSub", delta, name, read_value)

    def initialized_value(self):
        """TF 1: the value if initialized, else the initial value (no initializer runs)."""
        return apply_op("VariableOrInitial", [self._initial_value], self._attrs, name="initialized_value")

    def eval(self, session=None):
        return self._value.eval(session=session)

    def load(self, value, session=None):
        default_session_for(self.graph, session)._store.write(self._attrs["var"], to_numpy(value, self.dtype))

    def __repr__(self):
        return f"<tf.Variable '{self.name}' shape={self.shape} dtype={self.dtype.name}>"

    def __hash__(self):
        return id(self)

    def __array__(self, dtype=None, copy=None):
        raise NotImplementedError("Cannot convert a graph-mode tf.Variable to a numpy array; run it in a Session.")


def _guard_variable_reads(init, graph):
    """An initial value that reads other variables (``tf.Variable(v * 2)``,
    ``tf.zeros_like(v)``) reads each one's value if it is initialized and its initial
    value otherwise, so ``global_variables_initializer`` works in any order -- TF 2's
    _try_guard_against_uninitialized_dependencies.  The ops between those reads and
    ``init`` are copied onto the guarded reads."""
    owner = {id(v._value.op): v for v in graph._variables}
    ancestors = prune([init], ())          # creation order, which is topological
    reads = [op for op in ancestors if id(op) in owner]
    if not reads:
        return init
    mapping = {}
    for op in reads:
        v = owner[id(op)]
        mapping[id(op.outputs[0])] = apply_op("VariableOrInitial", [v._initial_value], v._attrs,
                                              name=op.name + "/initialized_value")
    for op in ancestors:
        if id(op) in owner or not any(id(t) in mapping for t in op.inputs):
            continue
        outs = apply_op(op.type, [mapping.get(id(t), t) for t in op.inputs], dict(op.attrs), name=op.name)
        for t, new in zip(op.outputs, outs if isinstance(outs, tuple) else (outs,)):
            mapping[id(t)] = new
    return mapping.get(id(init), init)


def global_variables_initializer():
    graph = context.get_default_graph()
    return variables_initializer(graph._variables)


def variables_initializer(var_list, name="init"):
    return group(*[v.initializer for v in var_list], name=name)


def group(*inputs, name=None):
    """``tf.group``: one op that runs all of ``inputs`` (ops or tensors); None when
    executing eagerly, where they have already run."""
    if context.executing_eagerly():
        return None
    with context.get_default_graph().control_dependencies([i for i in inputs if i is not None]):
        return apply_op("NoOp", [], {}, name=name or "group_deps")


def no_op(name=None):
    return apply_op("NoOp", [], {}, name=name or "NoOp")


def global_variables():
    return context.get_default_graph().get_collection("variables")


def trainable_variables():
    return context.get_default_graph().get_collection("trainable_variables")


def _install_operators():
    # tf.Variable supports the Tensor operators (v * 2, -v, v[0], v ** 2, ...).
    overloads.install(GraphVariable)
    GraphVariable.__getitem__ = variable_getitem
    GraphVariable.__hash__ = lambda self: id(self)


_install_operators()
