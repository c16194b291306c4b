"""Shared helpers for the optimisation passes.

* ``Builder``  rebuilds a Program node by node (new nodes can be emitted at
  any point, so topological order is kept by construction).
* ``clean``    keeps/reorders a subset of nodes and rewires uses, renumbering
  Values, outputs and var_writes consistently.
* ``known_scalar`` what a pass may assume about a value without running it.
* ``literal_attrs``: attrs of a "Literal" node (ops/array_ops.py), a constant
  baked into the code (its value IS in the signature, unlike a const Arg).
"""
import numpy as np

from .. import dtypes
from ..cache.key import program_digest
from ..ops.registry import REGISTRY
from .ir import Node, Program, Value


# ---------------------------------------------------------------- Literal op (ops/array_ops.py)
def literal_attrs(value):
    """attrs for a Literal node: a private, read-only, C-ordered copy."""
    arr = np.array(value, order="C", copy=True)
    arr.flags.writeable = False
    return {"value": arr}


# ---------------------------------------------------------------- building programs
class Builder:
    """Re-emits a Program's nodes; ``map`` takes old Values to new ones."""

    def __init__(self, program):
        self.src = program
        self.nodes = []
        self.map = {}

    def get(self, v):
        return self.map[v]

    def shape(self, v):
        return self.nodes[v.node].outputs[v.index][0]

    def dtype(self, v):
        return self.nodes[v.node].outputs[v.index][1]

    def emit(self, op, inputs, attrs, outputs, name=""):
        self.nodes.append(Node(op, tuple(inputs), attrs, tuple(outputs), name))
        return len(self.nodes) - 1

    def copy(self, i, inputs=None):
        """Re-emits old node i (inputs mapped unless given) and maps its outputs."""
        n = self.src.nodes[i]
        ins = tuple(self.map[v] for v in n.inputs) if inputs is None else tuple(inputs)
        j = self.emit(n.op, ins, dict(n.attrs), n.outputs, n.name)
        for k in range(len(n.outputs)):
            self.map[Value(i, k)] = Value(j, k)
        return j

    def literal(self, value, name=""):
        attrs = literal_attrs(value)
        v = attrs["value"]
        return Value(self.emit("Literal", (), attrs, ((tuple(v.shape), dtypes.as_dtype(v.dtype)),), name))

    def uniform(self, scalar, shape, name=""):
        """A uniform tensor: a scalar Literal, broadcast by Fill when not a scalar."""
        lit = self.literal(np.asarray(scalar), name)
        if tuple(shape) == ():
            return lit
        dt = self.dtype(lit)
        return Value(self.emit("Fill", (lit,), {"dims": tuple(shape)}, ((tuple(shape), dt),), name))

    def finish(self, pass_name, stats):
        p = self.src
        return Program(self.nodes, list(p.args), [None if v is None else self.map[v] for v in p.outputs],
                       [(k, self.map[v]) for k, v in p.var_writes],
                       list(p.stats) + [(pass_name, stats)])


def clean(program, order=None, replace=None, pass_name=None, stats=None):
    """Renumbers ``program`` keeping the nodes in ``order`` (old indices, must
    be topological; default: all, in place) and rewiring every use of a Value
    in ``replace`` (old Value -> old Value, followed transitively).

    Outputs and var_writes are remapped. A use of a node that is not kept
    raises, so a pass cannot silently leave a dangling reference.
    """
    replace = replace or {}
    order = range(len(program.nodes)) if order is None else order

    def resolve(v):
        seen = 0
        while v in replace:
            v = replace[v]
            seen += 1
            if seen > len(program.nodes):
                raise ValueError("cycle in replacement map")
        return v

    newpos = {}
    nodes = []
    for old in order:
        n = program.nodes[old]
        ins = []
        for v in n.inputs:
            r = resolve(v)
            if r.node not in newpos:
                raise ValueError(f"node {old} ({n.op}) uses node {r.node}, which is not kept before it")
            ins.append(Value(newpos[r.node], r.index))
        newpos[old] = len(nodes)
        nodes.append(Node(n.op, tuple(ins), dict(n.attrs), n.outputs, n.name))

    def remap(v):
        r = resolve(v)
        return Value(newpos[r.node], r.index)

    st = list(program.stats)
    if pass_name is not None:
        st.append((pass_name, stats or {}))
    return Program(nodes, list(program.args), [None if v is None else remap(v) for v in program.outputs],
                   [(k, remap(v)) for k, v in program.var_writes], st)


# ---------------------------------------------------------------- facts about values
def _uniform_scalar(arr):
    """arr's single value as a 0-d array if every element has the same bits."""
    if arr.size == 0:
        return None
    flat = np.ascontiguousarray(arr).reshape(-1)
    bits = flat.view(np.uint8).reshape(flat.size, -1)
    if flat.size > 1 and not np.all(bits == bits[0]):
        return None
    return flat[0:1].reshape(())


def uniform_scalar(arr):
    return _uniform_scalar(np.asarray(arr))


def known_scalar(nodes, args, v):
    """The value every element of ``v`` is known to have (a 0-d ndarray of
    v's dtype), or None. Knows Literals, Fill of a scalar Literal and const
    Args whose value_class (part of the signature) says they are uniform.
    The sign of a zero is exact: value_class keeps the float it saw."""
    n = nodes[v.node]
    dt = n.outputs[v.index][1]
    if n.op == "Literal":
        return _uniform_scalar(n.attrs["value"])
    if n.op == "Fill":
        return known_scalar(nodes, args, n.inputs[0])
    if n.op == "Arg":
        a = args[n.attrs["arg"]]
        vc = a.value_class
        if a.kind == "const" and isinstance(vc, tuple) and vc[0] == "uniform" and int(np.prod(a.shape)) > 0:
            return np.asarray(vc[1], dt.np).reshape(())
    return None


def size(shape):
    return int(np.prod(shape, dtype=np.int64)) if shape else 1


# ---------------------------------------------------------------- attribute keys
def attr_key(x):
    """A hashable form of an attr value for exact comparisons: unlike
    cache/key.freeze it keeps '_'-prefixed attrs (AddN's _aggregation matters to
    scheduling) and tells -0.0 from 0.0 (a LeakyRelu alpha of -0.0 is not 0.0)."""
    if isinstance(x, Program):   # a control-flow region
        return ("program", program_digest(x))
    if isinstance(x, dict):
        return tuple(sorted((k, attr_key(v)) for k, v in x.items()))
    if isinstance(x, (list, tuple)):
        return (type(x).__name__,) + tuple(attr_key(v) for v in x)
    if isinstance(x, np.ndarray):
        return ("ndarray", x.dtype.str, x.shape, x.tobytes())
    if isinstance(x, (float, np.floating)):
        return ("float", repr(float(x)))
    if isinstance(x, np.generic):
        return ("np", x.dtype.str, x.tobytes())
    if hasattr(x, "name") and hasattr(x, "np"):  # DType
        return ("dtype", x.name)
    return x


# ---------------------------------------------------------------- liveness
def peak_live(program):
    """Peak number of simultaneously live intermediate values over the node
    order (Args and Literals excluded: they are not buffers the kernel
    allocates). A value lives from its node to its last use; outputs and
    var_writes live to the end."""
    nodes = program.nodes
    end = len(nodes)
    last = {}
    for i, n in enumerate(nodes):
        for v in n.inputs:
            last[v] = i
    for v in program.outputs:
        if v is not None:
            last[v] = end
    for _, v in program.var_writes:
        last[v] = end
    delta = [0] * (end + 2)
    for i, n in enumerate(nodes):
        if n.op in ("Arg", "Literal"):
            continue
        for k in range(len(n.outputs)):
            v = Value(i, k)
            d = last.get(v, i)
            delta[i] += 1
            delta[d + 1] -= 1
    peak = cur = 0
    for x in delta:
        cur += x
        peak = max(peak, cur)
    return peak


def reinfer(program):
    """Recomputes every node's output specs from its (concrete) input specs,
    e.g. after a rewrite removed a node whose declared shape was partial."""
    nodes = []
    for n in program.nodes:
        if n.op in ("Arg", "Literal"):
            nodes.append(n)
            continue
        shapes = [nodes[v.node].outputs[v.index][0] for v in n.inputs]
        dts = [nodes[v.node].outputs[v.index][1] for v in n.inputs]
        specs = REGISTRY[n.op].infer(shapes, dts, n.attrs)
        nodes.append(Node(n.op, n.inputs, n.attrs, tuple((tuple(s), d) for s, d in specs), n.name))
    return Program(nodes, program.args, program.outputs, program.var_writes,
                   program.stats)
