"""Jacobians whose size is only known at run time: one gradient row per
element, by a ``While`` over the elements (TF's ``experimental_use_pfor=False``
path). Used by ``tf.hessians`` and ``GradientTape.jacobian`` / ``batch_jacobian``
when a shape is not fully defined when the graph is built; the batched pass
(batched_gradients.py) needs static shapes.

Row i is ``tf.gradients(y, x, grad_ys=e_i)`` with e_i the one-hot at flat
position i of y (for batch_jacobian: at inner position i of every example).
The body re-creates the ops from x to y (``_replay_between``) so that the
gradient graph lives in the body. The trip count is a run-time tensor, so one
compiled kernel serves every size.
"""
import numpy as np

from . import context, dtypes
from .assert_ops import Assert
from .convert import convert_to_tensor
from .passes.prune import prune
from .gradients import gradients
from .ops import array_ops, math_ops, reduction_ops
from .ops.control_flow_ops import _make_while
from .ops.registry import apply_op


def _path_ops(x, y):
    """The ops of y's graph on a path from x to y, in order (empty: y does not depend on x)."""
    on_path = {id(x)}
    ops = []
    for op in prune([y], set()):
        if any(id(t) in on_path for t in op.inputs):
            ops.append(op)
            on_path.update(id(t) for t in op.outputs)
    return ops if id(y) in on_path else []


def _replay_between(x, y, x_new):
    """y recomputed from ``x_new`` in the default graph: the ops on paths from
    x to y are re-created there, every other tensor they read is used as it is
    (captured when the default graph is a branch / body)."""
    mapping = {id(x): x_new}
    for op in _path_ops(x, y):
        out = apply_op(op.type, [mapping.get(id(t), t) for t in op.inputs], dict(op.attrs),
                       name=op.name.rsplit("/", 1)[-1])
        outs = (out,) if len(op.outputs) == 1 else tuple(out)
        for t, o in zip(op.outputs, outs):
            mapping[id(t)] = o
    return mapping.get(id(y), y)


def _flat_positions(t):
    """int32 tensor of t's shape holding each element's row-major flat index."""
    ones = math_ops.ones_like(array_ops.reshape(t, [-1]), dtype=dtypes.int32)
    return array_ops.reshape_like(reduction_ops.cumsum(ones, exclusive=True), t)


def _gradient_rows(y, x, n, seed, name, kwargs):
    """Stack of ``gradients(y, x, grad_ys=seed(i, y))`` for i in [0, n): shape [n] + x.shape
    (n static when known: the rows are then of static shape).
    None if y does not depend on x through differentiable ops."""
    if not _path_ops(x, y):
        return None
    connected = [True]

    def body(v, _):
        i = v[0]
        xc = context.get_default_graph().capture(x)
        yc = _replay_between(x, y, xc)
        (r,) = gradients(yc, xc, grad_ys=seed(i, yc), **kwargs)
        if r is None:   # only integer / stopped paths: known while tracing, the loop is dropped
            connected[0] = False
            r = math_ops.zeros_like(xc)
        return [i + 1], [r]
    with context.get_default_graph().name_scope(name):
        static = n if isinstance(n, int) else None
        count = convert_to_tensor(np.int32(n)) if static is not None else n
        out = _make_while([convert_to_tensor(np.int32(0))], [((), dtypes.int32)], None, body, [], [], "count", count,
                          static_count=static, name="While")
    return out[2] if connected[0] else None


def _outer_shaped(a, b, skip=0):
    """Zeros shaped a.shape + b.shape[skip:] (a's first ``skip`` dims shared with b's), in a's
    dtype: the reference of a ReshapeLike, whose shape only is read."""
    ra, rb = a.shape.rank, b.shape.rank
    if ra is None or rb is None:
        raise ValueError("a jacobian needs the ranks of its target and source known when the graph is built")
    lead, trail = math_ops.zeros_like(a), math_ops.zeros_like(b, dtype=a.dtype)
    for _ in range(rb - skip):
        lead = array_ops.expand_dims(lead, -1)
    for _ in range(ra - skip):
        trail = array_ops.expand_dims(trail, skip)
    return lead + trail


def loop_jacobian(y, x, name="jacobian", kwargs=None):
    """d y / d x shaped y.shape + x.shape, one row per element of y; None if unconnected."""
    n = y.shape.num_elements() if y.shape.is_fully_defined() else array_ops.size(y, out_type=dtypes.int32)
    rows = _gradient_rows(y, x, n, lambda i, yc: math_ops.cast(math_ops.equal(_flat_positions(yc), i), y.dtype),
                          name, kwargs or {})
    if rows is None:
        return None
    return array_ops.reshape_like(rows, _outer_shaped(y, x))


def loop_batch_jacobian(y, x, name="batch_jacobian", kwargs=None):
    """Per-example jacobians: y [b, y...], x [b, x...] -> [b, y..., x...], one row per inner
    element of y (the same position in every example). None if unconnected."""
    ys, xs = array_ops.shape(y), array_ops.shape(x)
    check = Assert(math_ops.equal(ys[0], xs[0]),
                   ["Need first dimension of target shape and source shape to match.", ys, xs])
    m = int(np.prod(y.shape.as_list()[1:], dtype=np.int64)) if y.shape.is_fully_defined() else \
        reduction_ops.reduce_prod(ys[1:])

    def seed(i, yc):
        mc = context.get_default_graph().capture(m) if not isinstance(m, int) else np.int32(m)
        inner = math_ops.floormod(_flat_positions(yc), mc)
        return math_ops.cast(math_ops.equal(inner, i), y.dtype)
    rows = _gradient_rows(y, x, m, seed, name, kwargs or {})
    if rows is None:
        return None
    perm = [1, 0] + list(range(2, x.shape.rank + 1))
    with y.graph.control_dependencies([check]):
        return array_ops.reshape_like(array_ops.transpose(rows, perm), _outer_shaped(y, x, skip=1))


def zeros_jacobian(y, x, dtype, skip=0):
    """Zeros shaped y.shape + x.shape[skip:] in ``dtype``, for shapes known only at run time."""
    return math_ops.zeros_like(_outer_shaped(y, x, skip), dtype=dtype)


def loop_hessian(g, x, name, kwargs):
    """``tf.hessians`` of an x whose shape is only known at run time: d g / d x, g = d sum(ys) / d x."""
    h = loop_jacobian(g, x, name, kwargs)
    if h is None:
        raise ValueError(f"None values not supported. (tf.hessians: the gradient with respect to {x.name} "
                         f"does not depend on {x.name})")
    return h
