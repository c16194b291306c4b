"""The reference interpreter: runs a pruned graph op by op with the numpy
kernels. It is the test oracle for the compiler and a debugging mode."""
import weakref

import numpy as np

from .errors import InvalidArgumentError
from .ops.registry import REGISTRY, run_kernel
from .passes.ir import concrete_specs
from .passes.prune import prune


# per graph, the (op id, input shapes) that passed concrete_specs (graphs are append-only;
# ids, not ops: the graph must stay collectable)
_checked = weakref.WeakKeyDictionary()


def run(targets, feeds, state):
    """targets: Tensors/Operations; feeds: {id(tensor): ndarray}; state: VariableStore.

    Returns one value per target (an ndarray, or None for an Operation).
    """
    values = dict(feeds)
    ops = prune(targets, feeds.keys())
    checked = _checked.setdefault(ops[0].graph, set()) if ops else set()
    for op in ops:
        if all(id(t) in feeds for t in op.outputs) and op.outputs:
            continue
        opdef = REGISTRY[op.type]
        args = [values[id(t)] for t in op.inputs]
        if opdef.stateful:
            with np.errstate(all="ignore"):   # (the other kernels: run_kernel turns warnings off)
                outs = opdef.kernel(op.attrs, state, *args)
            outs = outs if isinstance(outs, tuple) else (outs,)
        else:
            # the shape checks the compiler makes (passes/ir.py), so both engines reject the same runs
            shapes = tuple([a.shape for a in args])
            if (op._id, shapes) not in checked:
                concrete_specs(op, opdef, shapes, [t.dtype for t in op.inputs])
                if len(checked) > 100_000:
                    checked.clear()
                checked.add((op._id, shapes))
            try:
                outs = run_kernel(opdef, args, op.attrs)
            except InvalidArgumentError as e:
                raise InvalidArgumentError(None, op, f"{e} [[node {op.name}]]") from None
        for t, v in zip(op.outputs, outs):
            if id(t) in feeds:
                continue
            v = np.asarray(v)
            if v.dtype != t.dtype.np and v.dtype != object:   # object: a ragged While stack
                v = v.astype(t.dtype.np)
            values[id(t)] = v
        for k, key in op.attrs.get("var_writes", ()):   # an If / While that assigns variables inside
            state.write(key, values[id(op.outputs[k])])
    # A fetched tensor that was fed comes back as a fresh array (as in TF), not
    # the caller's own feed array.
    return [None if not hasattr(t, "value_index") else
            (np.array(values[id(t)]) if id(t) in feeds else values[id(t)]) for t in targets]
