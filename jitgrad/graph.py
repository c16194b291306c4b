"""Graph, Operation and the symbolic Tensor."""
import contextlib
import itertools
import re

from . import context, dispatch
from .errors import InaccessibleTensorError
from .graph_def import graph_def
from .shapes import as_shape

_VALID_NAME = re.compile(r"^[A-Za-z0-9.][A-Za-z0-9_.\\/>-]*$")
_graph_ids = itertools.count()


class Graph:
    """A dataflow graph. Ops are kept in creation order, which is topological."""

    def __init__(self):
        self._ops = []
        self._by_name = {}
        self._name_counts = {}
        self._scope = ""
        self._control_deps = []
        self._variables = []
        self._collections = {}
        self._id = next(_graph_ids)
        self.finalized = False
        self.building_function = False  # True for graphs traced by jitgrad.function
        self.seed = None                # the graph-level random seed (tf.random.set_seed in the graph)
        self.next_op_seed = 0           # TF's op seed for the graph's next unseeded random op
        self.draws_per_session = False  # a random op of it (or of its regions) keeps per-Session streams

    # -- default graph -------------------------------------------------
    @contextlib.contextmanager
    def as_default(self):
        context.push_graph(self)
        try:
            yield self
        finally:
            context.pop_graph(self)

    # -- names -----------------------------------------------------------
    def unique_name(self, name, mark_as_used=True):
        if self._scope:
            name = self._scope + "/" + name
        key = name.lower()
        count = self._name_counts.get(key, 0)
        if mark_as_used:
            self._name_counts[key] = count + 1
        if count > 0:
            base = name
            while True:
                name = f"{base}_{count}"
                if name.lower() not in self._name_counts:
                    break
                count += 1
            if mark_as_used:
                self._name_counts[name.lower()] = 1
        return name

    @contextlib.contextmanager
    def name_scope(self, name):
        old = self._scope
        if name is None or name == "":
            self._scope = ""
        elif name.endswith("/"):
            self._scope = name[:-1]  # re-entering an existing scope
        else:
            if not _VALID_NAME.match(name):
                raise ValueError(f"'{name}' is not a valid scope name")
            self._scope = self.unique_name(name)
        try:
            yield (self._scope + "/") if self._scope else ""
        finally:
            self._scope = old

    def get_name_scope(self):
        return self._scope

    @contextlib.contextmanager
    def control_dependencies(self, control_inputs):
        if control_inputs is None:
            saved, self._control_deps = self._control_deps, []
            try:
                yield
            finally:
                self._control_deps = saved
            return
        ops = []
        for c in control_inputs:
            c = getattr(c, "_as_graph_op", lambda: c)()
            ops.append(c.op if isinstance(c, Tensor) else c)
        self._control_deps.append(ops)
        try:
            yield
        finally:
            self._control_deps.pop()

    # -- ops ---------------------------------------------------------------
    def create_op(self, op_type, inputs, attrs, name, output_specs, exact_name=False):
        if self.finalized:
            raise RuntimeError("Graph is finalized and cannot be modified.")
        for t in inputs:
            if t.graph is not self:
                if t.graph.building_function:
                    raise out_of_scope_error(t, self)
                raise ValueError(f"Tensor {t.name} must be from the same graph as the op being created "
                                 f"(its graph is not the one this op is built in).")
        if not exact_name:
            name = self.unique_name(name or op_type)
        elif name in self._by_name:
            raise ValueError(f"Duplicate node name in graph: '{name}'")
        control = [op for group in self._control_deps for op in group]
        op = Operation(self, op_type, name, tuple(inputs), dict(attrs or {}), output_specs, control)
        self._ops.append(op)
        self._by_name[name] = op
        return op

    def get_operations(self):
        return list(self._ops)

    def get_operation_by_name(self, name):
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"The name '{name}' refers to an Operation not in the graph.") from None

    def get_tensor_by_name(self, name):
        if ":" not in name:
            raise ValueError(f"The name '{name}' looks like an (invalid) Operation name, not a Tensor. "
                             "Tensor names must be of the form \"<op_name>:<output_index>\".")
        op_name, idx = name.rsplit(":", 1)
        op = self.get_operation_by_name(op_name)
        idx = int(idx)
        if idx >= len(op.outputs):
            raise KeyError(f"The name '{name}' refers to a Tensor which does not exist. "
                           f"The operation, '{op_name}', exists but only has {len(op.outputs)} outputs.")
        return op.outputs[idx]

    def as_graph_element(self, obj):
        if isinstance(obj, str):
            return self.get_tensor_by_name(obj) if ":" in obj else self.get_operation_by_name(obj)
        if isinstance(obj, (Tensor, Operation)):
            if obj.graph is not self:
                raise ValueError(f"{obj} is not an element of this graph.")
            return obj
        conv = getattr(obj, "_as_graph_element", None)
        if conv is not None:
            return self.as_graph_element(conv())
        raise TypeError(f"Can not convert a {type(obj).__name__} into a Tensor or Operation.")

    def get_collection(self, key, scope=None):
        """A copy of the collection; with ``scope``, the items whose names match it (``re.match``,
        as TF: items without a name are left out)."""
        items = list(self._collections.get(key, []))
        if scope is None:
            return items
        pattern = re.compile(scope)
        return [item for item in items if isinstance(getattr(item, "name", None), str) and pattern.match(item.name)]

    def get_collection_ref(self, key):
        """The collection's list itself: appending to it adds to the collection."""
        return self._collections.setdefault(key, [])

    def add_to_collection(self, key, value):
        self._collections.setdefault(key, []).append(value)

    def finalize(self):
        self.finalized = True

    def as_graph_def(self, from_version=None, add_shapes=False):
        """A GraphDef-like view: ``.node`` entries with name, op, input (graph_def.py)."""
        return graph_def(self)

    def __repr__(self):
        return f"<jitgrad.Graph {self._id} with {len(self._ops)} ops>"


class Operation:
    __slots__ = ("graph", "type", "name", "inputs", "attrs", "outputs", "control_inputs", "_id", "__weakref__")

    def __init__(self, graph, op_type, name, inputs, attrs, output_specs, control_inputs=()):
        self.graph = graph
        self.type = op_type
        self.name = name
        self.inputs = inputs
        self.attrs = attrs
        self.control_inputs = list(control_inputs)
        self._id = len(graph._ops)
        self.outputs = tuple(Tensor(self, i, dt, sh) for i, (sh, dt) in enumerate(output_specs))

    def get_attr(self, name):
        try:
            return self.attrs[name]
        except KeyError:
            raise ValueError(f"Operation {self.name!r} has no attr named {name!r}.") from None

    def values(self):
        return self.outputs

    @property
    def node_def(self):
        return {"name": self.name, "op": self.type, "input": [t.name for t in self.inputs], "attr": self.attrs}

    def run(self, feed_dict=None, session=None):
        dispatch.default_session_for(self.graph, session).run(self, feed_dict)

    def __repr__(self):
        return f"<tf.Operation '{self.name}' type={self.type}>"


class Tensor:
    """A symbolic output of an Operation. Arithmetic operators come from ops/overloads.py."""
    # _keras_mask: the Keras mask a layer attached to its output (TF's tensors carry it the same way)
    __slots__ = ("op", "value_index", "dtype", "_shape", "_ref", "_keras_mask", "__weakref__")
    __array_priority__ = 100

    def __init__(self, op, value_index, dtype, shape):
        self.op = op
        self.value_index = value_index
        self.dtype = dtype
        self._shape = as_shape(shape)
        self._ref = None

    @property
    def graph(self):
        return self.op.graph

    @property
    def name(self):
        return f"{self.op.name}:{self.value_index}"

    @property
    def shape(self):
        return self._shape

    @property
    def _graph_if_symbolic(self):
        return self.op.graph

    def get_shape(self):
        return self._shape

    def set_shape(self, shape):
        self._shape = self._shape.merge_with(shape)

    @property
    def ndim(self):
        return self._shape.rank

    @property
    def device(self):
        return ""

    def consumers(self):
        return [op for op in self.graph._ops if any(t is self for t in op.inputs)]

    def eval(self, feed_dict=None, session=None):
        return dispatch.default_session_for(self.graph, session).run(self, feed_dict)

    def ref(self):
        # One Reference per tensor, held by it: Session.run keys its hot-path runners by
        # the feed keys' ids, and a fresh ref per call could reuse a dead ref's id -- of
        # another tensor -- and be fed through that ref's runner.
        r = self._ref
        if r is None:
            r = self._ref = _Reference(self)
        return r

    def experimental_ref(self):
        return self.ref()

    def __hash__(self):
        # TF 2: tensors of a plain Graph (TF1 style) hash by identity, so
        # feed_dict={x: ...} works; eager tensors and tensors of a traced function
        # compare elementwise and are therefore unhashable.
        if context.elementwise_equality(self.op.graph):
            raise TypeError("Tensor is unhashable. Instead, use tensor.ref() as the key.")
        return id(self)

    def __bool__(self):
        raise TypeError("Using a symbolic `tf.Tensor` as a Python `bool` is not allowed in graph "
                        "mode. Use `tf.cond` or run it in a Session.")

    def __len__(self):
        raise TypeError(f"len is not well defined for a symbolic Tensor ({self.name}). "
                        "Please call `x.shape` rather than `len(x)` for shape information.")

    def __iter__(self):
        raise TypeError("Iterating over a symbolic `tf.Tensor` is not allowed in graph mode.")

    def __array__(self, dtype=None, copy=None):
        raise NotImplementedError(f"Cannot convert a symbolic tf.Tensor ({self.name}) to a numpy array. "
                                  "Run it in a Session to get its value.")

    def __repr__(self):
        return f"<tf.Tensor '{self.name}' shape={self._shape} dtype={self.dtype.name}>"

    def __str__(self):   # TF's print(graph_tensor); no shape when even the rank is unknown
        shape = "" if self._shape.rank is None else f"shape={self._shape}, "
        return f'Tensor("{self.name}", {shape}dtype={self.dtype.name})'


class _Reference:
    """Hashable wrapper of a tensor or variable (``Tensor.ref()``)."""
    __slots__ = ("_obj",)

    def __init__(self, obj):
        self._obj = obj

    def deref(self):
        return self._obj

    def __hash__(self):
        return id(self._obj)

    def __eq__(self, other):
        return isinstance(other, _Reference) and other._obj is self._obj

    def __repr__(self):
        return f"<Reference wrapping {self._obj!r}>"


def out_of_scope_error(tensor, consumer=None):
    """TF's error for a tensor used outside the graph that made it: an InaccessibleTensorError
    (a ValueError) when that graph is nested in the ``consumer`` graph (a staged loop body or
    branch, TF's FuncGraph.capture), else a TypeError (a tensor of another traced function)."""
    text = (f"{tensor!r} is out of scope and cannot be used here. Use return values, explicit Python locals "
            "or TensorFlow collections to access it.")
    inner = getattr(tensor.graph, "outer_graph", None)
    while consumer is not None and inner is not None:
        if inner is consumer:
            return InaccessibleTensorError(text)
        inner = getattr(inner, "outer_graph", None)
    return TypeError(text)


def get_default_graph():
    return context.get_default_graph()
