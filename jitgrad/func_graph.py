"""Function graphs: the sub-graphs that control-flow ops hold as attrs.

As TF 2's FuncGraph: a branch, a loop condition or a loop body is traced into
its own small ``FuncGraph`` whose inputs are placeholders; an outer tensor it
uses is *captured*: replaced by a placeholder of the function graph, and the
outer tensor becomes an explicit input of the control-flow op.

Variables read or assigned in a function graph are made dataflow (as TF's
cond_v2 / while_v2 turn resource reads and writes into captured handles, but
explicit): a read is a placeholder standing for the variable's value on entry
(``read_variable``), an assignment only records the variable's new value in
this graph (``write_variable``). The control-flow op that holds the graph takes
the entry values as inputs and gives the values it wrote as outputs (a While
carries them as loop variables); ops/control_flow_ops.py then writes them in
the enclosing graph, or, at the top, the If / While op writes the variables
itself when it runs (its ``var_writes`` attr). Side-effecting ops that no
output needs (``tf.print``) are the graph's ``side_effects``: a Func runs them
too, in program order, each time it runs.

A ``Func`` is a view of a function graph: which placeholders are its inputs
and which tensors its outputs. Several Funcs may share one graph (a loop body
and the same body also returning its inputs, for the gradient's stacks);
Funcs are never mutated.
"""
from . import context
from .graph import Graph, Tensor
from .passes.prune import prune
from .ops.registry import apply_op
from .convert import convert_to_tensor


class FuncGraph(Graph):
    def __init__(self, name, outer_graph):
        super().__init__()
        self.name = name
        self.outer_graph = outer_graph
        self.building_function = outer_graph.building_function
        self.seed = outer_graph.seed
        self.captures = []       # (outer tensor, inner placeholder), in capture order
        self._capture_of = {}    # id(outer tensor) -> inner placeholder
        self._keep = []
        self.var_entry = {}      # var key -> (variable, placeholder: its value on entry)
        self.var_values = {}     # var key -> its value so far in this graph
        self.var_written = {}    # var key -> variable, in first-write order
        self.side_effects = []   # ops run for their effect (PrintV2, regions holding one), in program order
        # a plain graph's region: its writes, and those a retrace skips (legacy_region_writes.py)
        self.legacy_writes = []
        self.skip_writes = frozenset()

    def capture(self, t):
        """The tensor of this graph standing for ``t`` (a tensor of an enclosing graph)."""
        if t.graph is self:
            return t
        ph = self._capture_of.get(id(t))
        if ph is not None:
            return ph
        outer = t
        if t.graph is not self.outer_graph:
            if not self._enclosed_by(t.graph):
                # a custom gradient's closure run for a replayed copy of its op: the copy's tensor
                copy = _copy_in_replay(t)
                if copy is None:
                    raise ValueError(f"Tensor {t.name} is not from this graph or an enclosing one.")
                return self.capture(copy)
            outer = self.outer_graph.capture(t)
        with self.as_default():
            ph = apply_op("Placeholder", [], {"dtype": t.dtype, "shape": t.shape.dims}, name="capture")
        self.captures.append((outer, ph))
        self._capture_of[id(t)] = ph
        self._capture_of[id(outer)] = ph
        self._keep.append(t)   # ids stay unique while this graph lives
        return ph

    def _enclosed_by(self, graph):
        g = self.outer_graph
        while g is not graph and isinstance(g, FuncGraph):
            g = g.outer_graph
        return g is graph

    # -- variables (see the module docstring)
    def entry_value(self, var):
        """The placeholder standing for ``var``'s value when this graph is entered."""
        key = var._region_key
        if key not in self.var_entry:
            with self.as_default():
                ph = apply_op("Placeholder", [], {"dtype": var.dtype, "shape": var.shape.dims}, name="read")
            self.var_entry[key] = (var, ph)
        return self.var_entry[key][1]

    def read_variable(self, var):
        t = self.var_values.get(var._region_key)
        if t is None:
            t = self.var_values[var._region_key] = self.entry_value(var)
        return t

    def write_variable(self, var, value):
        self.var_values[var._region_key] = value
        self.var_written.setdefault(var._region_key, var)

    def placeholder_for(self, outer):
        """Adds (after tracing) a capture of ``outer`` even if nothing uses it."""
        return self.capture(outer)


class Func:
    """inputs: placeholders of ``graph``; outputs: tensors of ``graph``;
    side_effects: ops of ``graph`` that run whenever the Func runs."""
    __slots__ = ("graph", "inputs", "outputs", "side_effects")

    def __init__(self, graph, inputs, outputs, side_effects=None):
        self.graph, self.inputs, self.outputs = graph, tuple(inputs), tuple(outputs)
        self.side_effects = tuple(getattr(graph, "side_effects", ()) if side_effects is None else side_effects)

    def with_outputs(self, outputs):
        return Func(self.graph, self.inputs, outputs, self.side_effects)

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


def replay(func, inputs, substitute=None, rebuild=None):
    """Re-creates ``func``'s computation in the default graph on ``inputs``;
    returns its outputs there. Outer tensors it captured are captured again
    by the graph being built (or used directly when it is their graph).
    substitute: {id(tensor of func's graph): tensor to use instead} -- what
    only computes a substituted tensor is not re-created. rebuild: {id(op of
    func's graph): fn(its inputs here) -> one tensor per output}, for ops
    re-created some other way than as themselves."""
    mapping = dict(substitute or {})
    mapping.update({id(ph): t for ph, t in zip(func.inputs, inputs)})
    for op in prune(func.outputs, set(mapping)):
        if op.outputs and all(id(t) in mapping for t in op.outputs):
            continue
        if op.type == "Placeholder":
            raise ValueError(f"function {func.graph.name}: placeholder {op.name} is not an input")
        ins = [mapping[id(t)] for t in op.inputs]
        if rebuild and id(op) in rebuild:
            outs = tuple(rebuild[id(op)](ins))
        else:
            attrs = dict(op.attrs)
            if "_grad_fn" in attrs:
                attrs["_grad_fn"] = _reading_copies(attrs["_grad_fn"], mapping)
            out = apply_op(op.type, ins, attrs, name=op.name.rsplit("/", 1)[-1])
            outs = () if not op.outputs else ((out,) if len(op.outputs) == 1 else tuple(out))
        for t, o in zip(op.outputs, outs):
            mapping[id(t)] = o
    return [mapping[id(t)] for t in func.outputs]


# While a copied op's gradient closure runs (``_reading_copies``): {id(tensor of the graph
# replayed): its copy}, innermost last. Graphs are built by one thread at a time.
_replay_maps = []


def _reading_copies(grad_fn, mapping):
    """``grad_fn`` (a ``tf.custom_gradient``'s, an IdentityN's ``_grad_fn`` attr) for the copy
    ``replay`` makes of its op: the user's closure refers to tensors of the graph replayed (a
    loop body the While gradient re-creates in its step), which no graph being built encloses;
    while it runs, ``FuncGraph.capture`` reads their copies from ``mapping`` instead."""
    def copied_grad_fn(*grads):
        _replay_maps.append(mapping)
        try:
            return grad_fn(*grads)
        finally:
            _replay_maps.pop()
    return copied_grad_fn


def _copy_in_replay(t):
    """The copy of ``t`` made by the replay whose gradient closure is running, or None."""
    for mapping in reversed(_replay_maps):
        copy = mapping.get(id(t))
        if copy is not None:
            return copy
    return None


def run(func, arrays):
    """Runs a Func with the reference interpreter: one ndarray per output
    (its side effects run too, in program order)."""
    from . import interpreter
    outs = interpreter.run(list(func.outputs) + list(func.side_effects),
                           {id(ph): a for ph, a in zip(func.inputs, arrays)}, None)
    return outs[:len(func.outputs)]


def in_region(graph=None):
    """The innermost FuncGraph being built (``graph`` or the default graph), or None."""
    g = graph if graph is not None else context.get_default_graph()
    return g if isinstance(g, FuncGraph) else None


def outermost(graph=None):
    """The graph around every FuncGraph being built (``graph`` or the default graph)."""
    g = graph if graph is not None else context.get_default_graph()
    while isinstance(g, FuncGraph):
        g = g.outer_graph
    return g


def add_side_effect(op):
    """Registers ``op`` (tf.print, a region that prints) to run whenever the
    region being built runs; False when no region is being built."""
    fg = in_region(op.graph)
    if fg is None:
        return False
    fg.side_effects.append(op)
    return True
