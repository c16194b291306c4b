"""The op registry and the single entry point that runs or records an op.

Every op is an ``OpDef``: its shape/dtype rule, its numpy reference kernel,
its gradient rule (written with public ops, so it works in graph and eager
mode and can itself be differentiated) and hints for the compiler. Adding an
op means adding one ``register(...)`` call in one file of ``jitgrad/ops/``.
"""
from .. import context
from ..errors import InvalidArgumentError
from ..shapes import InputShapeError

REGISTRY = {}


class OpDef:
    """One op type.

    infer(shapes, dtypes, attrs) -> [(shape, dtype), ...]
        shapes are tuples of int/None, or None for unknown rank. Raises
        ValueError for incompatible shapes and TypeError for bad dtypes.
    kernel(attrs, *arrays) -> array or tuple of arrays (numpy reference).
    grad(op, *output_grads) -> list of input grads (None where there is none);
        ``op`` has ``inputs``, ``outputs``, ``attrs``/``get_attr``.
    kind: compiler hint: 'elementwise' (same-shape or broadcast pointwise),
        'reduction', 'matmul', 'layout' (data movement), 'source', 'state', 'other'.
    shape_only: indices of inputs whose *shape* alone is used (never their value).
    run_check(shapes, attrs): optional; what TF's kernel rejects but its shape
        function lets through (a repeated axis): run on a run's concrete shapes
        only (passes/ir.py: concrete_specs), raising ValueError.
    """

    __slots__ = ("name", "infer", "kernel", "grad", "kind", "stateful", "shape_only",
                 "lower", "doc", "extra")

    def __init__(self, name, infer, kernel, grad=None, kind="other", stateful=False,
                 shape_only=(), lower=None, **extra):
        self.name = name
        self.infer = infer
        self.kernel = kernel
        self.grad = grad
        self.kind = kind
        self.stateful = stateful
        # "rest" = every input after the first (ops with a variable input count).
        self.shape_only = shape_only if shape_only == "rest" else tuple(shape_only)
        self.lower = lower
        self.extra = extra

    def is_shape_only(self, index):
        return index > 0 if self.shape_only == "rest" else index in self.shape_only

    def __repr__(self):
        return f"<OpDef {self.name}>"


class GradOp:
    """The view of an op that gradient functions get, in graph and eager mode alike."""
    __slots__ = ("inputs", "outputs", "attrs", "type", "name")

    def __init__(self, inputs, outputs, attrs, op_type, name):
        self.inputs = tuple(inputs)
        self.outputs = tuple(outputs)
        self.attrs = attrs
        self.type = op_type
        self.name = name

    def get_attr(self, name):
        return self.attrs[name]


def register(name, **kwargs):
    if name in REGISTRY:
        raise KeyError(f"op {name} registered twice")
    if getattr(kwargs.get("infer"), "op_name", None) == "?":
        kwargs["infer"].op_name = name
    opdef = OpDef(name, **kwargs)
    REGISTRY[name] = opdef
    return opdef


def get(name):
    try:
        return REGISTRY[name]
    except KeyError:
        raise LookupError(f"No op named {name!r} is registered.") from None


# Eager execution is installed by jitgrad/eager.py to keep this module free of it.
_eager_execute = [None]
# Exact eager tensor classes (EagerTensor, BatchedTensor) and EagerTensor, set by eager.py.
_eager_types = frozenset()
_eager_tensor = None
_Tensor = []  # graph.Tensor, imported on first use (graph imports this module)


def eager_now():
    """``context.executing_eagerly()`` without the function calls."""
    return context._eager_enabled[0] and not getattr(context._state, "graphs", None)


def apply_op(op_type, inputs, attrs=None, name=None, exact_name=False):
    """Runs ``op_type`` now (eager) or adds it to the graph being built.

    ``inputs`` must already be tensors of this mode (see convert.py).
    Returns one tensor, or a tuple when the op has several outputs.
    """
    opdef = REGISTRY[op_type]
    attrs = attrs or {}
    if context._eager_enabled[0] and not getattr(context._state, "graphs", None):
        # Fast path: executing eagerly and every input is already an eager tensor.
        et = _eager_types
        for t in inputs:
            if t.__class__ not in et:
                break
        else:
            return _eager_execute[0](opdef, inputs, attrs)
    if not _Tensor:
        from ..graph import Tensor as _T
        _Tensor.append(_T)
    Tensor = _Tensor[0]
    graph = None
    for t in inputs:
        if isinstance(t, Tensor):
            graph = t.graph
            break
    if graph is None and context.executing_eagerly():
        return _eager_execute[0](opdef, inputs, attrs)
    if graph is None:
        graph = context.get_default_graph()
    else:
        default = context.get_default_graph()
        if default is not graph and not context.executing_eagerly() and context._stack():
            raise ValueError(f"Tensor {inputs[0].name} must be from the same graph as the op "
                             f"{op_type} being created.")
    specs = infer_named(opdef, name or op_type, inputs, [t.shape.dims for t in inputs], [t.dtype for t in inputs],
                        attrs)
    op = graph.create_op(op_type, inputs, attrs, name, specs, exact_name)
    outs = op.outputs
    if not outs:
        return op  # as in TF, an op without outputs (NoOp, an initializer group) is returned itself
    return outs[0] if len(outs) == 1 else outs


def infer_named(opdef, op_name, inputs, shapes, dts, attrs):
    """``opdef.infer``; an input (of ``inputs``, tensors) whose shape the others rule
    out is named in the error (shapes.InputShapeError, a ValueError)."""
    try:
        return opdef.infer(shapes, dts, attrs)
    except InputShapeError as e:
        raise e.naming(opdef.name, op_name, inputs[e.index].name) from None


def run_kernel(opdef, arrays, attrs):
    """Runs the reference kernel, turning numpy failures into TF's runtime error."""
    try:
        out = opdef.kernel(attrs, *arrays)
    except (ValueError, IndexError, ZeroDivisionError, FloatingPointError) as e:
        raise InvalidArgumentError(f"{opdef.name}: {e}") from None
    return out if isinstance(out, tuple) else (out,)
