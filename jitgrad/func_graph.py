"""Function graphs: the sub-graphs that control-flow ops hold as attrs.

As TF 2's FuncGraph: a branch, a loop condition or a loop body is traced into
its own small ``FuncGraph`` whose inputs are placeholders; an outer tensor it
uses is *captured*: replaced by a placeholder of the function graph, and the
outer tensor becomes an explicit input of the control-flow op.

A ``Func`` is a view of a function graph: which placeholders are its inputs
and which tensors its outputs. Several Funcs may share one graph (a loop body
and the same body also returning its inputs, for the gradient's stacks);
Funcs are never mutated.
"""
from . import context
from .graph import Graph, Tensor
from .ops.registry import apply_op
from .convert import convert_to_tensor


class FuncGraph(Graph):
    def __init__(self, name, outer_graph):
        super().__init__()
        self.name = name
        self.outer_graph = outer_graph
        self.building_function = outer_graph.building_function
        self.captures = []       # (outer tensor, inner placeholder), in capture order
        self._capture_of = {}    # id(outer tensor) -> inner placeholder
        self._keep = []

    def capture(self, t):
        """The tensor of this graph standing for ``t`` (a tensor of an enclosing graph)."""
        if t.graph is self:
            return t
        ph = self._capture_of.get(id(t))
        if ph is not None:
            return ph
        outer = t
        if t.graph is not self.outer_graph:
            if not isinstance(self.outer_graph, FuncGraph):
                raise ValueError(f"Tensor {t.name} is not from this graph or an enclosing one.")
            outer = self.outer_graph.capture(t)
        with self.as_default():
            ph = apply_op("Placeholder", [], {"dtype": t.dtype, "shape": t.shape.dims}, name="capture")
        self.captures.append((outer, ph))
        self._capture_of[id(t)] = ph
        self._capture_of[id(outer)] = ph
        self._keep.append(t)   # ids stay unique while this graph lives
        return ph

    def placeholder_for(self, outer):
        """Adds (after tracing) a capture of ``outer`` even if nothing uses it."""
        return self.capture(outer)


class Func:
    """inputs: placeholders of ``graph``; outputs: tensors of ``graph``."""
    __slots__ = ("graph", "inputs", "outputs")

    def __init__(self, graph, inputs, outputs):
        self.graph, self.inputs, self.outputs = graph, tuple(inputs), tuple(outputs)

    def with_outputs(self, outputs):
        return Func(self.graph, self.inputs, outputs)

    def __repr__(self):
        return f"<Func {self.graph.name}: {len(self.inputs)} inputs, {len(self.outputs)} outputs>"


def trace(name, fn, input_specs):
    """Traces ``fn(*placeholders)`` into a new FuncGraph of the default graph.

    input_specs: [(shape dims, dtype)]. Returns (graph, input placeholders, fn's result).
    ``fn``'s result is returned as it is (a structure whose leaves may be any
    tensors, Python values or None); ``as_outputs`` turns leaves into tensors of
    the graph.
    """
    fg = FuncGraph(name, context.get_default_graph())
    with fg.as_default():
        phs = [apply_op("Placeholder", [], {"dtype": dt, "shape": dims}, name="input") for dims, dt in input_specs]
        result = fn(*phs)
    return fg, phs, result


def as_output(fg, x, dtype=None):
    """A leaf of a traced function's result as a tensor of ``fg``."""
    with fg.as_default():
        conv = getattr(x, "_graph_tensor", None)
        if conv is not None:
            x = conv()
        if isinstance(x, Tensor):
            return fg.capture(x) if x.graph is not fg else x
        return convert_to_tensor(x, dtype=dtype)


def replay(func, inputs, substitute=None):
    """Re-creates ``func``'s computation in the default graph on ``inputs``;
    returns its outputs there. Outer tensors it captured are captured again
    by the graph being built (or used directly when it is their graph).
    substitute: {id(tensor of func's graph): tensor to use instead} -- what
    only computes a substituted tensor is not re-created."""
    from .passes.prune import prune
    mapping = dict(substitute or {})
    mapping.update({id(ph): t for ph, t in zip(func.inputs, inputs)})
    for op in prune(func.outputs, set(mapping)):
        if op.outputs and all(id(t) in mapping for t in op.outputs):
            continue
        if op.type == "Placeholder":
            raise ValueError(f"function {func.graph.name}: placeholder {op.name} is not an input")
        ins = [mapping[id(t)] for t in op.inputs]
        out = apply_op(op.type, ins, dict(op.attrs), name=op.name.rsplit("/", 1)[-1])
        outs = () if not op.outputs else ((out,) if len(op.outputs) == 1 else tuple(out))
        for t, o in zip(op.outputs, outs):
            mapping[id(t)] = o
    return [mapping[id(t)] for t in func.outputs]


def run(func, arrays):
    """Runs a Func with the reference interpreter: one ndarray per output."""
    from . import interpreter
    return interpreter.run(list(func.outputs), {id(ph): a for ph, a in zip(func.inputs, arrays)}, None)
