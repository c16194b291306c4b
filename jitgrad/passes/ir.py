"""The compiler's form of one Session.run: a pruned graph specialised to
concrete shapes, with its runtime arguments made explicit.

A ``Program`` is plain data. Passes are pure functions ``Program -> Program``
(see passes/pipeline.py); codegen consumes the final Program.

Runtime arguments (``Program.args``) are what changes from call to call
without changing the machine code:
  * ``feed``   a fed tensor (value from feed_dict),
  * ``var``    a variable's current value (read from the Session's store),
  * ``rand``   a random op's output (ops/random_ops.py): the runner draws a
               fresh array before every call; its op's attrs are the key.
               (Inside a branch / loop body it is a ``RegionRandom`` node
               instead, drawn as the kernel runs.)
  * ``const``  a Const node's value. Constants are arguments, not baked in,
               so that graphs differing only in constant *values* share a
               kernel (the seeds rebuild a graph with a new constant 40 times).
               Their ``value_class`` (see below) is part of the signature, so a
               pass may rely on it (x*1 -> x is valid for every graph with the
               same signature).
Each arg is referenced by an ``Arg`` node in ``nodes``.
"""
import threading
from dataclasses import dataclass, field

import numpy as np

from ..dtypes import int32
from ..errors import InvalidArgumentError
from ..ops.registry import REGISTRY, infer_named, run_kernel
from ..shapes import ADDRESS_SPACE_BYTES, check_num_elements, oom_error
from ..ops.logging_ops import RegionEffects, host_targets, region_site
from ..shape_specialise import static_form
from ..ops.array_ops_dynamic import slices_run_time_rows
from ..ops.random_ops import region_random_node_attrs

# .next: the site number of the next random op inside a region of the Program being
# built; numbered from 0 per top-level from_graph, so it is structure (cache/key.py)
_random_sites = threading.local()


class DataDependentShape(Exception):
    """A program with an op registered with data_dependent_shape=True (tf.boolean_mask,
    a run-time tf.range, tf.py_function): its output shape is known only when it
    runs and kernels are specialised to static shapes, so the compiler runs such a
    program in the interpreter (counted in cache_info()['fallbacks'])."""


@dataclass(frozen=True)
class Value:
    """Output ``index`` of node ``node`` (an index into Program.nodes)."""
    node: int
    index: int = 0


@dataclass
class Node:
    op: str                 # a REGISTRY op type, or "Arg"
    inputs: tuple           # of Value
    attrs: dict             # op attrs; for "Arg": {"arg": index into Program.args}
    outputs: tuple          # of (shape tuple of ints, DType)
    name: str = ""          # graph op name, for reports only (not in the signature)


@dataclass
class Arg:
    kind: str               # "feed" | "var" | "rand" | "const"
    shape: tuple
    dtype: object           # DType
    key: object = None      # feed: position in the feed list; var: variable key; rand: (op type, attrs)
    value: object = None    # const: the ndarray
    value_class: object = None  # const: see value_class()


@dataclass
class Program:
    nodes: list
    args: list
    outputs: list           # Value per fetched tensor, None per fetched Operation
    var_writes: list = field(default_factory=list)   # (var key, Value), in execution order
    stats: list = field(default_factory=list)        # (pass name, {stat: number}) appended by passes

    def shape(self, v):
        return self.nodes[v.node].outputs[v.index][0]

    def dtype(self, v):
        return self.nodes[v.node].outputs[v.index][1]


_SPECIAL = (0.0, 1.0, -1.0, 2.0, 0.5, 3.0, -0.5)


def value_class(arr):
    """What a pass may assume about a constant without baking its value in:
    a scalar (or uniform array) equal to one of a few special values, or an
    integer-valued scalar exponent; otherwise just 'other'."""
    if arr.size == 0:
        return "empty"
    if arr.dtype.kind not in "fiub":   # strings, complex, bfloat16: nothing a pass relies on
        return "other"
    flat = arr.reshape(-1)
    first = flat[0]
    if arr.size > 1 and not np.all(flat == first):
        return "other"
    if arr.size > 1 and arr.dtype.kind in "fc" and not np.all(np.signbit(flat) == np.signbit(first)):
        return "other"      # -0.0 == 0.0, but 1/x, log, sqrt's gradient... tell them apart
    if arr.dtype.kind == "b":
        return ("uniform", bool(first))
    v = float(first)
    if v in _SPECIAL:
        return ("uniform", v)
    return "other"




def concrete_specs(op, opdef, in_shapes, in_dtypes):
    """The op's output (shape, dtype)s for concrete input shapes.  This is
    where a run's shapes are checked against everything the machine code
    will assume: the op's shape rule rejects inputs it cannot take (a
    gradient shaped unlike the forward output it belongs to, ...), every
    output must fit the shape the graph promised, and no tensor may hold
    more elements or bytes than int64 counts (loop bounds and buffer sizes
    are int64), nor more bytes than an address space holds (TF's OOM)."""
    try:
        specs = infer_named(opdef, op.name, op.inputs, in_shapes, in_dtypes, op.attrs)
        check = opdef.run_check
        if check is not None:
            check(in_shapes, op.attrs)
        for (s, d), t in zip(specs, op.outputs):
            if s is None:   # an If whose branches give different shapes: known when it has run
                continue
            nbytes = check_num_elements(s) * d.np.itemsize
            if nbytes > ADDRESS_SPACE_BYTES:
                # no engine can hold it (TF: OOM, also past 2**63 - 1 bytes of < 2**63 elements),
                # and a fused loop over it would run for ever
                raise oom_error(s, d, op.name, op)
            static = t.shape.dims
            if static is not None and (len(static) != len(s) or
                                       any(a is not None and b is not None and a != b for a, b in zip(static, s))):
                # (b is None: a loop variable whose shape changes, known only as it runs)
                raise ValueError(f"{t.name} has shape {list(s)} at run time, which is incompatible "
                                 f"with its static shape {t.shape}")
    except (ValueError, TypeError) as e:
        raise InvalidArgumentError(None, op, f"{e} [[node {op.name}]]") from None
    return tuple((None if s is None else tuple(s), d) for s, d in specs)


def _has_side_effects(attrs):
    return any(getattr(attrs.get(k), "side_effects", None) for k in ("then_branch", "else_branch", "cond", "body"))


BAKE_LIMIT = 64  # Const arrays with more elements than this are still args, never folded


def from_graph(ops, elements, fed, var_reader, in_region=False, shape_values=None):
    """Builds a Program from pruned ``ops`` (creation order); ``in_region``: of a
    branch / loop body (passes/regions.sub_program).

    fed: list of (tensor, ndarray) in a fixed order; var_reader(attrs) -> ndarray
    gives the current value of a variable (for its shape/dtype only).
    shape_values: {id(tensor): ndarray} of the tensors that set data-dependent
    shapes (shape_specialise.py): their ops are built in their static form.
    Shapes are made concrete by re-running each op's shape inference on the
    concrete input shapes.
    """
    nodes, args, outputs, var_writes = [], [], [], []
    n_effects = 0   # regions that print, so far
    if not in_region:
        _random_sites.next = 0
    ref = {}  # id(tensor) -> Value
    var_arg = {}  # var key -> Value of its Arg node

    def add_arg(kind, shape, dtype, key=None, value=None, name=""):
        vc = value_class(value) if value is not None else None
        args.append(Arg(kind, tuple(shape), dtype, key, value, vc))
        nodes.append(Node("Arg", (), {"arg": len(args) - 1}, ((tuple(shape), dtype),), name))
        return Value(len(nodes) - 1)

    for pos, (t, arr) in enumerate(fed):
        ref[id(t)] = add_arg("feed", arr.shape, t.dtype, key=pos, name=t.name)
    # (a While's stacked outputs nothing here reads may be specialised away: passes/growing_vars.py)
    # (and a While's inputs only its loop variables no one needs read: passes/regions.live_reads)
    from .regions import live_reads, region_node
    read_ids = live_reads(ops, elements)

    for op in ops:
        if all(id(t) in ref for t in op.outputs) and op.outputs:
            continue
        if op.type == "Const":
            v = op.attrs["value"]
            ref[id(op.outputs[0])] = add_arg("const", v.shape, op.attrs["dtype"], value=v, name=op.name)
            continue
        if op.type == "VariableV2":
            key = op.attrs["var"]
            if key not in var_arg:
                cur = var_reader(op.attrs)
                var_arg[key] = add_arg("var", cur.shape, op.attrs["dtype"], key=key, name=op.name)
            ref[id(op.outputs[0])] = var_arg[key]
            if op.control_inputs:
                # a read made under tf.control_dependencies runs after them: like the
                # interpreter (ops in this same order), it sees the last write so far
                for k, w in reversed(var_writes):
                    if k == key:
                        ref[id(op.outputs[0])] = w
                        break
            continue
        if REGISTRY[op.type].kind == "random" and in_region:
            # drawn as the native code runs, once per execution (ops/random_ops.py)
            site = getattr(_random_sites, "next", 0)
            _random_sites.next = site + 1
            nodes.append(Node("RegionRandom", (), region_random_node_attrs(op, site),
                              ((op.attrs["shape"], op.attrs["dtype"]),), op.name))
            ref[id(op.outputs[0])] = Value(len(nodes) - 1)
            continue
        if REGISTRY[op.type].kind == "random":
            ref[id(op.outputs[0])] = add_arg("rand", op.attrs["shape"], op.attrs["dtype"],
                                             key=(op.type, op.attrs), name=op.name)
            continue
        if op.type == "Placeholder":
            raise InvalidArgumentError(None, op, f"You must feed a value for placeholder tensor '{op.name}' "
                                                 f"with dtype {op.attrs['dtype'].name} and shape "
                                                 f"{op.outputs[0].shape}")
        opdef = REGISTRY[op.type]
        ins = tuple(ref[id(t)] for t in op.inputs)
        in_shapes = [nodes[v.node].outputs[v.index][0] for v in ins]
        in_dtypes = [nodes[v.node].outputs[v.index][1] for v in ins]
        if opdef.kind == "control":   # If / While: sub-graphs become sub-Programs (passes/regions.py)
            attrs, specs = region_node(op, in_shapes, in_dtypes, lambda t: id(t) in read_ids)
            a = op.attrs
            marker = None
            if _has_side_effects(a):
                # it prints inside: it runs whether or not anything reads its outputs, and
                # (at the top) its lines are printed in order with the others (ops/logging_ops.py);
                # its tag also keeps CSE from merging it with an identical one
                marker = RegionEffects(-1 if in_region else n_effects)
                attrs, n_effects = dict(attrs, effects_tag=n_effects), n_effects + 1
            nodes.append(Node(op.type, ins, attrs, specs, op.name))
            for i, t in enumerate(op.outputs):
                ref[id(t)] = Value(len(nodes) - 1, i)
            # variables assigned inside its branches / body (ops/control_flow_ops.py)
            var_writes.extend((key, Value(len(nodes) - 1, k)) for k, key in a.get("var_writes", ()))
            if marker is not None:
                # on one output: an If's last (one that prints has one), a While's trip count
                k = a["n_vars"] if op.type == "While" else len(op.outputs) - 1
                var_writes.append((marker, Value(len(nodes) - 1, k)))
            continue
        if opdef.data_dependent_shape and not (shape_values is None and slices_run_time_rows(op, in_shapes)):
            static = static_form(op, shape_values)
            if static is None:
                raise DataDependentShape(f"the output shape of {op.type} ({op.name}) depends on the data")
            if static[0] == "Const":   # a Range: its value is an argument, as any constant's
                value = static[1]
                ref[id(op.outputs[0])] = add_arg("const", value.shape, op.outputs[0].dtype, value=value, name=op.name)
                continue
            op, opdef = static[2], REGISTRY[static[0]]
            ins = ins[:len(op.inputs)]
            in_shapes, in_dtypes = in_shapes[:len(ins)], in_dtypes[:len(ins)]
        specs = concrete_specs(op, opdef, in_shapes, in_dtypes)
        if op.type in ("PrintV2", "Assert") and in_region:
            # inside a branch / loop body: printed / checked by the native code as it runs
            # (ops/logging_ops.py)
            site = region_site(op.type, op.attrs, in_shapes, in_dtypes)
            region_op = "RegionPrint" if op.type == "PrintV2" else "RegionAssert"
            nodes.append(Node(region_op, ins, dict(op.attrs, site=site), (((), int32),), op.name))
            var_writes.append((RegionEffects(-1), Value(len(nodes) - 1)))
            continue
        if op.type in ("PrintV2", "Assert"):
            # printed / checked after the kernel returns: each input leaves as an output the store hands on
            var_writes.extend(zip(host_targets(op), ins))
            continue
        if opdef.lowering == "state":       # Assign, AssignAdd, AssignSub
            # State updates: the new value is computed in the program; the
            # Session writes it back after the call. Later reads in the same
            # run see the old value, as the interpreter does.
            key = op.attrs["var"]
            if op.type == "Assign":
                new = ins[0]
            else:
                if key not in var_arg:
                    cur = var_reader(op.attrs)
                    var_arg[key] = add_arg("var", cur.shape, op.attrs["dtype"], key=key, name=op.name)
                base = var_arg[key]
                for k, w in reversed(var_writes):
                    if k == key:
                        base = w
                        break
                have = nodes[base.node].outputs[base.index][0]
                if tuple(in_shapes[0]) != tuple(have):   # (the variable's declared shape may be partial)
                    raise InvalidArgumentError(None, op, f"Cannot update variable with shape {list(have)} using a "
                                                         f"Tensor with shape {list(in_shapes[0])}, shapes must be "
                                                         f"equal. [[node {op.name}]]")
                specs = ((have, specs[0][1]),)
                nodes.append(Node("AddV2" if op.type == "AssignAdd" else "Sub", (base, ins[0]), {},
                                  specs, op.name))
                new = Value(len(nodes) - 1)
            var_writes.append((key, new))
            ref[id(op.outputs[0])] = new
            continue
        if op.type == "NoOp":
            continue
        nodes.append(Node(op.type, ins, dict(op.attrs), specs, op.name))
        for i, t in enumerate(op.outputs):
            ref[id(t)] = Value(len(nodes) - 1, i)

    for el in elements:
        outputs.append(ref[id(el)] if hasattr(el, "value_index") else None)
    return Program(nodes, args, outputs, var_writes)



def evaluate(program, arg_values):
    """Reference evaluation of a Program with the numpy kernels.

    arg_values: one ndarray per Program.args. Returns (outputs, var_writes)
    where outputs has an ndarray (or None) per Program.outputs and var_writes
    is [(key, ndarray)]. Used to test passes: a pass must not change this.
    """
    vals = {}
    for i, n in enumerate(program.nodes):
        if n.op == "Arg":
            vals[(i, 0)] = np.asarray(arg_values[n.attrs["arg"]])
            continue
        ins = [vals[(v.node, v.index)] for v in n.inputs]
        outs = run_kernel(REGISTRY[n.op], ins, n.attrs)
        for j, (o, (shape, dt)) in enumerate(zip(outs, n.outputs)):
            o = np.asarray(o)
            vals[(i, j)] = o if o.dtype == object else o.astype(dt.np, copy=False)   # object: a ragged stack
    outputs = [None if v is None else vals[(v.node, v.index)] for v in program.outputs]
    writes = [(k, vals[(v.node, v.index)]) for k, v in program.var_writes]
    return outputs, writes
