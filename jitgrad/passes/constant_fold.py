"""Constant folding.

A value is *known* at compile time when its op is pure and every input it
reads the value of is known; inputs used only for their shape (OpDef
.shape_only) are always known, since shapes are concrete in a Program. So
ZerosLike / OnesLike / Shape / SizeRatio fold whatever they are applied to.

Sources of known values: Literal nodes, and const Args whose value_class
says they are uniform (value_class is in the signature; the value itself is
not, so a const Arg of class "other" is never baked, and a uniform one is
baked only through its class).

Known values are computed with the numpy kernels, exactly as ir.evaluate
does (same shapes, same dtype cast), so results stay bit-identical. Each
known value consumed by a runtime node (or fetched) is materialised as:
  * a scalar Literal, broadcast by Fill when not a scalar, if uniform (bitwise);
  * a Literal array if it has at most ir.BAKE_LIMIT elements;
  * otherwise it is not folded at all: the node stays computed at run time.
Large values are only folded when they are uniform by construction (fills,
layout ops of a uniform value, elementwise ops of uniform inputs), which is
evaluated on a small sample instead of the full tensor.

A kernel that raises (integer division by zero, bad gather index) is left to
raise at run time, as the interpreter would.
"""
import numpy as np

from ..ops.registry import REGISTRY, run_kernel
from .ir import BAKE_LIMIT, Value
from .util import Builder, size, uniform_scalar

FOLD_EVAL_LIMIT = 1 << 14  # elements: above this a fold is only tried on a sample
_SAMPLE = 64
_NO_FOLD = {"Arg", "Literal"}


class _Known:
    """A compile-time value: ``scalar`` (0-d, when uniform) or ``array``."""
    __slots__ = ("shape", "dtype", "scalar", "array")

    def __init__(self, shape, dtype, scalar=None, array=None):
        self.shape, self.dtype, self.scalar, self.array = tuple(shape), dtype, scalar, array

    def full(self):
        if self.array is not None:
            return self.array
        return np.full(self.shape, self.scalar, self.dtype.np)


def _from_array(arr, dtype):
    s = uniform_scalar(arr)
    if s is not None:
        return _Known(arr.shape, dtype, scalar=s)
    if arr.size <= BAKE_LIMIT:
        return _Known(arr.shape, dtype, array=np.array(arr, order="C"))
    return None


def _shape_stub(shape, dtype):
    # Kernels read only the shape (and dtype) of a shape_only input.
    return np.broadcast_to(np.zeros((), dtype.np), shape)


def _eval(node, opdef, ins):
    outs = run_kernel(opdef, ins, node.attrs)
    return [np.asarray(o).astype(dt.np, copy=False) for o, (_, dt) in zip(outs, node.outputs)]


def _fold(node, known_ins, program):
    """Known outputs of ``node`` or None. known_ins: per input a _Known, or
    "shape" for a shape-only input, or None when unknown."""
    opdef = REGISTRY.get(node.op)
    if opdef is None or opdef.stateful or opdef.kind in ("state", "control") or node.op in _NO_FOLD:
        return None
    if any(k is None for k in known_ins):
        return None
    if any(s is None or None in s for s, _ in node.outputs):   # (a None shape invariant, a rank set by a cond's branch)
        return None
    out_size = max(size(s) for s, _ in node.outputs) if node.outputs else 0
    vals = [k for k in known_ins if k != "shape"]
    if out_size > FOLD_EVAL_LIMIT:
        return _fold_large(node, opdef, known_ins, vals)
    ins = []
    for v, k in zip(node.inputs, known_ins):
        if k == "shape":
            s = program.shape(v)
            if s is None or None in s:   # a loop variable that grows: its shape is known as it runs
                return None
            ins.append(_shape_stub(s, program.dtype(v)))
        else:
            ins.append(k.full())
    try:
        outs = _eval(node, opdef, ins)
    except Exception:  # noqa: BLE001 - any kernel failure is a run-time error, not ours
        return None
    res = [_from_array(o, dt) for o, (_, dt) in zip(outs, node.outputs)]
    return None if any(r is None for r in res) else res


def _fold_large(node, opdef, known_ins, vals):
    """Folds a large single-output node only when its result is uniform by
    construction; the scalar is computed on a small contiguous sample, with
    size-1 inputs kept size-1 so numpy takes the same broadcast loop."""
    if len(node.outputs) != 1 or any(k.scalar is None for k in vals):
        return None
    shape, dt = node.outputs[0]
    if node.op in ("ZerosLike", "OnesLike"):
        return [_Known(shape, dt, scalar=np.asarray(0 if node.op == "ZerosLike" else 1, dt.np))]
    if node.op == "Fill" or opdef.keeps_uniform:
        return [_Known(shape, dt, scalar=vals[0].scalar.astype(dt.np))] if vals else None
    if opdef.kind != "elementwise":
        return None  # (elementwise attrs are never shape-dependent: DstT, alpha, _aggregation)
    n = min(_SAMPLE, size(shape))
    ins = []
    for k in known_ins:
        if k == "shape":
            return None
        if size(k.shape) == 1:
            ins.append(k.scalar.reshape((1,)))
        elif k.shape == tuple(shape):
            ins.append(np.full((n,), k.scalar, k.dtype.np))
        else:
            return None  # partial broadcast: numpy's loop choice would differ from the sample's
    try:
        (out,) = _eval(node, opdef, ins)
    except Exception:  # noqa: BLE001
        return None
    s = uniform_scalar(out)
    return None if s is None else [_Known(shape, dt, scalar=s)]


def _known_arg(program, node):
    a = program.args[node.attrs["arg"]]
    vc = a.value_class
    if a.kind != "const":
        return None
    if vc == "empty":
        return _Known(a.shape, a.dtype, array=np.zeros(a.shape, a.dtype.np))
    if isinstance(vc, tuple) and vc[0] == "uniform":
        return _Known(a.shape, a.dtype, scalar=np.asarray(vc[1], a.dtype.np).reshape(()))
    return None


def constant_fold(program):
    b = Builder(program)
    known = {}      # old Value -> _Known
    emitted = {}    # old Value -> new Value of its materialisation
    stats = {"nodes_before": len(program.nodes), "folded": 0, "literals": 0, "fills": 0}

    def materialise(v):
        if v in b.map:
            return b.map[v]
        if v not in emitted:
            k = known[v]
            if k.scalar is not None:
                emitted[v] = b.uniform(k.scalar, k.shape)
                stats["literals"] += 1
                stats["fills"] += k.shape != ()
            else:
                emitted[v] = b.literal(k.array)
                stats["literals"] += 1
        return emitted[v]

    for i, n in enumerate(program.nodes):
        if n.op in ("Arg", "Literal"):
            b.copy(i)
            k = _known_arg(program, n) if n.op == "Arg" else _from_array(n.attrs["value"], n.outputs[0][1])
            if k is not None:
                known[Value(i)] = k
            continue
        if n.op == "Fill" and program.nodes[n.inputs[0].node].op == "Literal" and n.inputs[0] in known:
            # Already the canonical form of a uniform constant: keep it (and
            # do not count it as folded again in the pipeline's next round).
            b.copy(i)
            known[Value(i)] = _Known(n.outputs[0][0], n.outputs[0][1], scalar=known[n.inputs[0]].scalar)
            continue
        opdef = REGISTRY.get(n.op)
        kin = []
        for j, v in enumerate(n.inputs):
            kin.append("shape" if opdef is not None and opdef.is_shape_only(j) else known.get(v))
        res = _fold(n, kin, program)
        if res is not None:
            for k, r in enumerate(res):
                known[Value(i, k)] = r
            stats["folded"] += 1
            continue
        b.copy(i, [materialise(v) for v in n.inputs])
    for v in list(program.outputs) + [w for _, w in program.var_writes]:
        if v is not None and v not in b.map:
            b.map[v] = materialise(v)
    stats["nodes_after"] = len(b.nodes)
    return b.finish("constant_fold", stats)
