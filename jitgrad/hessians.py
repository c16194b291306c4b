"""``tf.hessians``: one batched backward pass over the gradient graph per x
(batched_gradients.py), else one gradient graph per element of x, else (x's size
known only at run time, or a while_loop in the gradient, which the batched pass
would copy per element) a while_loop over its elements (loop_jacobians.py)."""
from . import context
from .gradients import as_list, gradients, to_graph_tensor
from .loop_jacobians import loop_hessian
from .ops import array_ops


def hessians_v1(ys, xs, name="hessians", colocate_gradients_with_ops=False, gate_gradients=False,
                aggregation_method=None):
    """``tf.compat.v1.hessians``: TF 1's order."""
    return hessians(ys, xs, gate_gradients, aggregation_method, name)


def hessians(ys, xs, gate_gradients=False, aggregation_method=None, name="hessians"):
    """``tf.hessians`` (TF 2's argument order): for each x, the Hessian of sum(ys), shaped x.shape + x.shape.

    One batched backward pass over the gradient graph per x (batched_gradients.py);
    the per-row loop below (one gradient graph per element of x) is the fallback
    where that is not possible.
    """
    if context.executing_eagerly():
        raise RuntimeError("tf.gradients is not supported when eager execution is enabled. "
                           "Use tf.GradientTape instead.")
    from . import batched_gradients as _bg   # loads on the first hessian or jacobian (import time)
    try:
        return _bg.batched_hessians(ys, xs, name=name, aggregation_method=aggregation_method)
    except _bg.LoopPerRow:
        return _hessians_per_row(ys, xs, name, gate_gradients, aggregation_method, loop_rows=True)
    except _bg.Unsupported:
        pass
    return _hessians_per_row(ys, xs, name, gate_gradients, aggregation_method)


def _hessians_per_row(ys, xs, name="hessians", gate_gradients=False, aggregation_method=None, loop_rows=False):
    """One gradient graph per element of x; ``loop_rows`` (or x's size known only at run
    time): one in a while_loop over the elements, compiled once whatever x's size."""
    xs = [to_graph_tensor(x, "xs") for x in as_list(xs)]
    kwargs = dict(gate_gradients=gate_gradients, aggregation_method=aggregation_method)
    grads = gradients(ys, xs, **kwargs)
    hessians_out = []
    for g, x in zip(grads, xs):
        if g is None:
            raise ValueError(f"Tried to convert 'tensor' to a tensor and failed. Error: None values not "
                             f"supported. (tf.hessians: the gradient with respect to {x.name} is None)")
        if loop_rows or not x.shape.is_fully_defined():
            hessians_out.append(loop_hessian(g, x, name, kwargs))   # rows by a while_loop over x's elements
            continue
        n = x.shape.num_elements()
        flat = array_ops.reshape(g, [-1])
        rows = []
        for i in range(n):
            row = gradients(flat[i], x, **kwargs)[0]
            if row is None:
                raise ValueError(f"None values not supported. (tf.hessians: the gradient with respect to "
                                 f"{x.name} does not depend on {x.name})")
            rows.append(row)
        h = array_ops.stack(rows, name=name) if rows else array_ops.zeros([0] + x.shape.as_list(), x.dtype)
        hessians_out.append(array_ops.reshape(h, x.shape.as_list() + x.shape.as_list()))
    return hessians_out
