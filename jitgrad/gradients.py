"""``tf.gradients``: reverse-mode differentiation that
adds backward ops to the graph.

This follows TensorFlow's gradients_util closely, because the order in which
gradient contributions are collected is the order they are summed in, and
float32 results only match TensorFlow bit for bit if that order matches.
"""
import collections
import enum

from . import context, sparse_gradients
from .convert import convert_to_tensor
from .func_graph import FuncGraph
from .graph import Tensor
from .indexed_slices import IndexedSlices
from .shapes import broadcast_dims, static_dims
from .ops import array_ops, math_ops
from .ops.registry import NOT_DIFFERENTIABLE, REGISTRY, GradOp, apply_op


class AggregationMethod:
    """How gradient contributions to one tensor are summed.

    ADD_N / DEFAULT: one n-ary AddN once every contribution is ready.
    EXPERIMENTAL_TREE / EXPERIMENTAL_ACCUMULATE_N: a left-to-right chain of
    two-input adds (TF 2.x builds the same chain for both), which lets each
    contribution be freed as soon as it is added.
    """
    ADD_N = 0
    DEFAULT = ADD_N
    EXPERIMENTAL_TREE = 1
    EXPERIMENTAL_ACCUMULATE_N = 2


_METHOD_NAMES = {0: "ADD_N", 1: "EXPERIMENTAL_TREE", 2: "EXPERIMENTAL_ACCUMULATE_N"}


class UnconnectedGradients(enum.Enum):
    NONE = "none"
    ZERO = "zero"


def is_trainable(t):
    """TF's backprop_util.IsTrainable: floating and complex tensors carry gradients."""
    return t.dtype.is_floating or t.dtype.is_complex


def as_list(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


def to_graph_tensor(x, what):
    # a variable as an x: the read its reads' gradients go to (in a branch / loop body, a read
    # of it after an assignment there is a different tensor)
    conv = getattr(x, "_gradient_source" if what == "xs" else "_graph_tensor", None)
    if conv is not None:
        x = conv()
    if not isinstance(x, Tensor):
        x = convert_to_tensor(x)
    if not isinstance(x, Tensor):
        raise TypeError(f"{what} must be symbolic graph tensors, got {x!r}")
    return x


def _pending_count(to_ops, from_ops):
    reached = set()
    queue = collections.deque(from_ops)
    consumers = None
    while queue:
        op = queue.popleft()
        if op in reached:
            continue
        reached.add(op)
        if consumers is None:
            consumers = _consumer_map(op.graph)
        for out in op.outputs:
            if is_trainable(out):
                queue.extend(consumers.get(id(out), ()))
    reachable_to_ops = {op for op in to_ops if op in reached}
    between, between_list = set(), []
    queue = collections.deque(to_ops)
    while queue:
        op = queue.popleft()
        if op in reached:
            between.add(op)
            between_list.append(op)
            reached.discard(op)
            queue.extend(t.op for t in op.inputs)
    pending = collections.defaultdict(int)
    for op in between_list:
        for t in op.inputs:
            if t.op in between:
                pending[t.op] += 1
    return reachable_to_ops, pending


def _consumer_map(graph):
    m = {}
    for op in graph._ops:
        for t in op.inputs:
            lst = m.setdefault(id(t), [])
            if not lst or lst[-1] is not op:
                lst.append(op)
    return m


def _aggregate(grads, op, method):
    out_grads = grads.get(op)
    if out_grads is None:
        out_grads = grads[op] = [[] for _ in op.outputs]
    for i, contribs in enumerate(out_grads):
        if not isinstance(contribs, list):
            continue  # already aggregated (op reached twice is impossible, kept defensive)
        if not contribs:
            out_grads[i] = None
        elif len(contribs) == 1:
            out_grads[i] = contribs[0]
        elif any(isinstance(c, IndexedSlices) for c in contribs):     # a variable's, from gathers of it
            out_grads[i] = sparse_gradients.aggregate(contribs, _add_n)
        elif method in (AggregationMethod.EXPERIMENTAL_TREE, AggregationMethod.EXPERIMENTAL_ACCUMULATE_N):
            g = op.graph
            with g.name_scope(op.name + "_gradient_sum"):
                running = contribs[0]
                for c in contribs[1:]:
                    running = apply_op("AddN", [running, c], {"_aggregation": _METHOD_NAMES[method]}, name="AddN")
            out_grads[i] = running
        else:
            out_grads[i] = apply_op("AddN", contribs, {"_aggregation": "ADD_N"}, name="AddN")
    return out_grads


def _add_n(parts):
    return apply_op("AddN", parts, name="AddN")


def _gather_slices(op, out_grads, grad_fn):
    """TF's gradient of a row gather: IndexedSlices (sparse_gradients.py) in place of the
    dense GatherGrad (which makes them dense); None for any other op."""
    if not sparse_gradients.is_row_gather(op.type, op.attrs) or out_grads[0] is None:
        return None
    def dense():
        return list(grad_fn(GradOp(op.inputs, op.outputs, op.attrs, op.type, op.name), *out_grads))[0]
    return [sparse_gradients.gather_gradient_slices(out_grads[0], op.inputs[1], op.inputs[0], dense), None]


def _passes_slices(op):
    """Whether op's gradient function passes IndexedSlices on as they are (TF's _IdGrad, _IdNGrad;
    a read of a variable in a region, ops/control_flow_ops.read_for_gradient); any other op's
    gradient function gets them dense (TF's ops convert them when they take them)."""
    if op.type == "Identity":
        return True
    of_op = op.attrs.get("_grad_of_op", None)
    return op.type == "IdentityN" and (of_op is None or getattr(of_op, "passes_slices", False))


def _zeros_like(t):
    return math_ops.zeros_like(t)


_SPARSE_GATHERS = [False]   # the sparse_gathers of the gradients() calls running, innermost last


def sparse_gathers_now():
    """Whether the gradients() call building the current gradient functions gives gathers'
    gradients as IndexedSlices (a cond's gradient keeps a branch's slices then: _if_grad)."""
    return _SPARSE_GATHERS[-1]


# ops whose output is a variable's value: a read, or an assignment (the value after it)
VARIABLE_VALUE_OPS = ("VariableV2", "Assign", "AssignAdd", "AssignSub")


def _other_reads(xs, graph):
    """For each x that is a variable's value, the graph's other tensors holding that variable's
    value (reads under tf.control_dependencies, the result of an assign, a read after an
    assignment in a tf.function); [] for any other x. TF differentiates with respect to the
    variable's handle, so the gradient sums over all of them."""
    keys = {x.op.attrs.get("var") for x in xs if x.op.type in VARIABLE_VALUE_OPS}
    if not keys:
        return [[] for _ in xs]
    by_key = collections.defaultdict(list)
    for op in graph.get_operations():
        if op.type in VARIABLE_VALUE_OPS and op.attrs.get("var") in keys:
            by_key[op.attrs["var"]].append(op.outputs[0])
    return [[t for t in by_key[x.op.attrs.get("var")] if t is not x] if x.op.type in VARIABLE_VALUE_OPS else []
            for x in xs]


def gradients(ys, xs, grad_ys=None, name="gradients", gate_gradients=False, aggregation_method=None,
              stop_gradients=None, unconnected_gradients=UnconnectedGradients.NONE, sparse_gathers=False):
    """Symbolic derivatives of sum(ys) with respect to each x in xs (a list, len(xs)). With
    sparse_gathers (tf.gradients, GradientTape.gradient in a trace) the gradient from row
    gathers of an x is IndexedSlices, as TF's; without (jitgrad's own uses: loop and
    branch gradients, jacobians) every gradient is dense."""
    if context.executing_eagerly():
        raise RuntimeError("tf.gradients is not supported when eager execution is enabled. "
                           "Use tf.GradientTape instead.")
    if aggregation_method is None:
        aggregation_method = AggregationMethod.DEFAULT
    if aggregation_method not in _METHOD_NAMES:
        raise ValueError(f"Invalid `aggregation_method` specified {aggregation_method}. Accepted values are "
                         f"{sorted(_METHOD_NAMES)}.")
    try:
        unconnected_gradients = UnconnectedGradients(unconnected_gradients)
    except ValueError:
        raise ValueError(f"Unknown value for unconnected_gradients: {unconnected_gradients!r}") from None
    ys = [to_graph_tensor(y, "ys") for y in as_list(ys)]
    xs = as_list(xs)
    if any(isinstance(x, (list, tuple, dict)) for x in xs):
        raise TypeError("xs must be a tensor or a flat list of tensors, got a nested structure: "
                        f"{xs!r}")
    xs = [to_graph_tensor(x, "xs") for x in xs]
    stop = [to_graph_tensor(s, "stop_gradients") for s in as_list(stop_gradients)] if stop_gradients is not None else []
    if grad_ys is None:
        grad_ys = [None] * len(ys)
    else:
        grad_ys = as_list(grad_ys)
    if len(grad_ys) != len(ys):
        raise ValueError(f"Length mismatch. Passed {len(grad_ys)} grad_ys for {len(ys)} ys")
    if not ys:      # TF: nothing to differentiate, every x unconnected
        if unconnected_gradients != UnconnectedGradients.ZERO:
            return [None] * len(xs)
        with xs[0].graph.as_default() if xs else _nullcontext():
            return [_zeros_like(x) for x in xs]
    _SPARSE_GATHERS.append(bool(sparse_gathers))
    try:
        result = _gradients(ys, xs, grad_ys, name, aggregation_method, stop, unconnected_gradients,
                            sparse_gathers)
    finally:
        _SPARSE_GATHERS.pop()
    # (jitgrad's own dense uses: a cond's gradient may have kept slices)
    return result if sparse_gathers else [sparse_gradients.densify(g) for g in result]


def _gradients(ys, xs, grad_ys, name, aggregation_method, stop, unconnected_gradients, sparse_gathers):
    graph = ys[0].graph
    if any(t.graph is not graph for t in xs + stop) and isinstance(graph, FuncGraph):
        return _gradients_in_function_graph(graph, ys, xs, grad_ys, name, aggregation_method, stop,
                                            unconnected_gradients, sparse_gathers)
    for t in ys + xs + stop:
        if t.graph is not graph:
            raise ValueError(f"{t.name} is not from the same graph as {ys[0].name}")

    with graph.as_default() if context._stack()[-1:] != [graph] else _nullcontext(), \
            graph.name_scope(name or "gradients"):
        converted = []
        for i, (y, gy) in enumerate(zip(ys, grad_ys)):
            if gy is None:
                if y.dtype.is_complex:
                    raise TypeError(f"Gradients of complex tensors ({y.name}) must set grad_ys "
                                    f"(y.dtype = {y.dtype!r})")
                # As TF's _DefaultGradYs: ones of y's dtype, integer ys included
                # (their gradients then stop at the first int-producing op).
                gy = math_ops.ones_like(y, name=f"grad_ys_{i}")
            else:
                gy = convert_to_tensor(gy, dtype=y.dtype if not isinstance(gy, Tensor) else None, graph=graph)
                if gy.dtype != y.dtype:
                    raise TypeError(f"Gradient type {gy.dtype.name} generated for y {y.name} does not match "
                                    f"its type {y.dtype.name}")
                gy = _shaped_like_y(gy, y, f"grad_ys[{i}]")
            converted.append(gy)

        reads = _other_reads(xs, graph)
        to_ops = [y.op for y in ys]
        from_ops = [x.op for x in xs] + [t.op for r in reads for t in r]
        stop_ops_explicit = [t.op for t in stop]
        reachable_to_ops, pending = _pending_count(to_ops, from_ops)
        grads = {}
        for y, gy in zip(ys, converted):
            grads.setdefault(y.op, [[] for _ in y.op.outputs])[y.value_index].append(gy)

        queue = collections.deque()
        seen = set()
        for op in to_ops:
            if pending[op] == 0 and op not in seen and op in reachable_to_ops:
                seen.add(op)
                queue.append(op)
        stop_ops = {op for op in from_ops if all(pending[t.op] <= 0 for t in op.inputs)}
        stop_ops.update(stop_ops_explicit)

        while queue:
            op = queue.popleft()
            out_grads = _aggregate(grads, op, aggregation_method)
            has_out = any(g is not None for g in out_grads)
            grad_fn = None
            if has_out and op not in stop_ops:
                opdef = REGISTRY[op.type]
                grad_fn = opdef.grad
                if grad_fn is None and opdef.no_gradient != NOT_DIFFERENTIABLE and any(
                        is_trainable(t) for t in op.inputs):
                    raise LookupError(f"No gradient defined for operation '{op.name}' (op type: {op.type}).")
            if grad_fn is not None and has_out:
                # in place, as TF's: an x that is another output of this op then reads
                # these zeros (tf.gradients(a, b) for a, b = tf.split(f(x)) with x an x too)
                out_grads[:] = [(_zeros_like(o) if g is None and is_trainable(o) else g)
                                for g, o in zip(out_grads, op.outputs)]
                with graph.name_scope(op.name + "_grad"):
                    passed = out_grads if _passes_slices(op) else \
                        [sparse_gradients.densify(g) for g in out_grads]
                    in_grads = sparse_gathers and _gather_slices(op, passed, grad_fn) or \
                        list(grad_fn(GradOp(op.inputs, op.outputs, op.attrs, op.type, op.name), *passed))
                if len(in_grads) != len(op.inputs):
                    raise ValueError(f"Num gradients {len(in_grads)} generated for op {op.type} do not match "
                                     f"num inputs {len(op.inputs)}")
            else:
                in_grads = [None] * len(op.inputs)
            for t_in, g in zip(op.inputs, in_grads):
                if isinstance(g, IndexedSlices):
                    grads.setdefault(t_in.op, [[] for _ in t_in.op.outputs])[t_in.value_index].append(g)
                elif g is not None and is_trainable(t_in):
                    g = convert_to_tensor(g, graph=graph)
                    try:
                        g.set_shape(t_in.shape)
                    except ValueError:
                        raise ValueError(f"Incompatible shapes between op input and calculated input gradient. "
                                         f"Forward operation: {op.name}. Input index: {[i for i, t in enumerate(op.inputs) if t is t_in][0]}."
                                         f" Original input shape: {t_in.shape}. Calculated input gradient "
                                         f"shape: {g.shape}") from None
                    grads.setdefault(t_in.op, [[] for _ in t_in.op.outputs])[t_in.value_index].append(g)
            for t in op.inputs:
                pending[t.op] -= 1
                if pending[t.op] == 0:
                    queue.append(t.op)

        result = []
        for x, others in zip(xs, reads):
            parts = [g for g in (_collected(grads, t) for t in [x] + others) if g is not None]
            g = None if not parts else sparse_gradients.aggregate(parts, _add_n)
            if g is None and unconnected_gradients == UnconnectedGradients.ZERO:
                g = _zeros_like(x)
            result.append(g)
    return result


def _gradients_in_function_graph(graph, ys, xs, grad_ys, name, aggregation_method, stop, unconnected,
                                 sparse_gathers=False):
    """tf.gradients called while a cond branch / loop body is traced, with xs (or stops) of an
    enclosing graph: inside, such a tensor is its capture (TF's gradients look through
    captures the same way); one the function never captured does not reach ys."""
    def inner(t):
        if t.graph is graph or not graph._enclosed_by(t.graph):
            return t       # (not enclosing: the graph check below reports it)
        return graph._capture_of.get(id(t))
    seen = [inner(x) for x in xs]
    live = [i for i, x in enumerate(seen) if x is not None]
    inner_stop = [t for t in (inner(s) for s in stop) if t is not None]
    grads = gradients(ys, [seen[i] for i in live], grad_ys, name, aggregation_method=aggregation_method,
                      stop_gradients=inner_stop or None, unconnected_gradients=unconnected,
                      sparse_gathers=sparse_gathers) if live else []
    out = [None] * len(xs)
    for i, g in zip(live, grads):
        out[i] = g
    if unconnected == UnconnectedGradients.ZERO:
        with graph.as_default():
            out = [_zeros_like(x) if g is None else g for g, x in zip(out, xs)]
    return out


def fitted_output_shape(g_shape, y_shape):
    """How a grad_y / output gradient of shape ``g_shape`` (a tuple) seeds a target of shape
    ``y_shape``: "same", "reshape" (they differ only by unit dimensions), "broadcast" (it
    broadcasts to y), or None.  TF hands the seed to y's op's gradient function as it is, so
    which seeds work there depends on the op; these three give TF's numbers wherever TF
    accepts them.  Any other seed would be summed down to an input's shape somewhere, a wrong
    number: callers raise."""
    g_shape, y_shape = tuple(g_shape), tuple(y_shape)
    if g_shape == y_shape:
        return "same"
    if [d for d in g_shape if d != 1] == [d for d in y_shape if d != 1]:
        return "reshape"
    try:
        return "broadcast" if broadcast_dims(g_shape, y_shape) == y_shape else None
    except ValueError:
        return None


def _shaped_like_y(gy, y, what):
    """grad_ys entry ``gy`` shaped as y (fitted_output_shape).  With shapes known only as the
    graph runs: one of y's rank that is compatible with it is used as it is (the gradient
    functions broadcast or reject it, as TF's), any other is broadcast to y's shape as it
    runs, which fails for a seed with more dimensions than y (it must not be summed down)."""
    gs, ys = static_dims(gy.shape), static_dims(y.shape)
    if gs is not None and ys is not None:
        fit = fitted_output_shape(gs, ys)
    elif gy.shape.rank is not None and gy.shape.rank == y.shape.rank:
        fit = "same" if gy.shape.is_compatible_with(y.shape) else None
    else:
        fit = "broadcast"
    if fit == "same":
        return gy
    if fit == "reshape":
        return array_ops.reshape(gy, ys)
    if fit == "broadcast":
        try:
            return apply_op("BroadcastToShapeOf", [gy, y])
        except ValueError:
            pass
    raise ValueError(f"{what} has shape {gy.shape}, incompatible with y's shape {y.shape}")


def _collected(grads, x):
    """The gradient gathered for tensor x (None if nothing reached it)."""
    op_grads = grads.get(x.op)
    if not op_grads:
        return None
    g = op_grads[x.value_index]
    if isinstance(g, list):
        # x's op was never processed (e.g. it is not between xs and ys); its
        # contributions still count, as in TF where this cannot happen.
        g = None if not g else sparse_gradients.aggregate(g, _add_n)
    return g


class _nullcontext:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def gradients_v2(ys, xs, grad_ys=None, name="gradients", gate_gradients=False, aggregation_method=None,
                 stop_gradients=None, unconnected_gradients=UnconnectedGradients.NONE):
    """``tf.gradients`` (TF 2's argument order): a row gather's gradient is IndexedSlices
    (Session.run fetches it as an IndexedSlicesValue), as TF's."""
    return gradients(ys, xs, grad_ys, name, gate_gradients, aggregation_method, stop_gradients,
                     unconnected_gradients, sparse_gathers=True)


def gradients_v1(ys, xs, grad_ys=None, name="gradients", colocate_gradients_with_ops=False,
                 gate_gradients=False, aggregation_method=None, stop_gradients=None,
                 unconnected_gradients=UnconnectedGradients.NONE):
    """``tf.compat.v1.gradients``: TF 1's order, with the (ignored: one device) colocate flag 5th."""
    return gradients(ys, xs, grad_ys, name, gate_gradients, aggregation_method, stop_gradients,
                     unconnected_gradients, sparse_gathers=True)
