"""``tf.map_fn``, ``tf.scan``, ``tf.foldl``, ``tf.foldr``: counted loops over
the rows of (nested) ``elems``, built on the While op of
ops/control_flow_ops.py (a counted While slices its inputs row by row and
stacks per-iteration results). Eagerly they run Python loops.
"""
import numpy as np

from . import context, dtypes, nest
from .assert_ops import Assert
from .control_flow import _to_tensor, check_loop_var
from .convert import convert_to_tensor
from .errors import InvalidArgumentError, OutOfRangeError
from .ops import array_ops, math_ops
from .ops.control_flow_ops import _make_while, check_stackable
from .ops.list_ops import list_check


def _leading_count(flat_elems):
    """(count tensor, static count or None) of the sliced inputs."""
    dims = [e.shape.dims[0] for e in flat_elems if e.shape.rank]
    static = next((d for d in dims if d is not None), None)
    for e in flat_elems:
        if e.shape.rank == 0:
            raise ValueError("Elements in elems must be 1+ dimensional Tensors, not scalars")
    if static is not None:
        if any(d is not None and d != static for d in dims):
            raise ValueError("Tensors in elems must have the same size in the first dimension, got "
                             f"{[e.shape for e in flat_elems]}")
        return convert_to_tensor(np.int32(static)), static
    return array_ops.shape(flat_elems[0], out_type=dtypes.int32)[0], None


def _slice_specs(flat_elems):
    return [(None if e.shape.dims is None else e.shape.dims[1:], e.dtype) for e in flat_elems]


def _scan_loop(fn_step, init, elems, reverse, name):
    """Counted loop over the rows of ``elems``: fn_step(vars, x row) -> (new vars, ys)."""
    flat_e = [_to_tensor(e) for e in nest.flatten(elems)]
    count, static = _leading_count(flat_e)
    flat_init = [_to_tensor(v) for v in nest.flatten(init)]
    specs = [(t.shape.dims, t.dtype) for t in flat_init]
    n = len(flat_init)

    def body_fn(phs, rows):
        new, ys = fn_step(phs, rows)
        # TF's scan / folds carry their value in a tf.while_loop, whose build-time checks
        # these are: a carried value changing dtype or shape is TF's TypeError / ValueError
        # (the While op would otherwise carry it under the initializer's dtype)
        for t, v, (dims, dt) in zip(new, flat_init, specs):
            check_loop_var(t, v, dims, dt)
        return new, ys
    outs = _make_while(flat_init, specs, None, body_fn, flat_e, _slice_specs(flat_e), "count", count,
                       reverse=reverse, static_count=static, name=name)
    return outs[:n], [check_stackable(y) for y in outs[n + 1:]]


def vectorized_map(fn, elems, fallback_to_while_loop=True, warn=True):
    """``tf.vectorized_map``: ``fn`` applied to the rows of ``elems``, as map_fn with the output
    structure and dtypes of ``fn`` on the first row (TF vectorises by pfor; the values are the
    same)."""
    first = nest.map_structure(lambda e: convert_to_tensor(e)[0], elems)
    signature = nest.map_structure(lambda t: convert_to_tensor(t).dtype, fn(first))
    return map_fn(fn, elems, fn_output_signature=signature)


def map_fn(fn, elems, dtype=None, parallel_iterations=None, back_prop=True, swap_memory=False, infer_shape=True,
           name=None, fn_output_signature=None):
    """``tf.map_fn``: ``fn`` applied to the rows of ``elems`` (nested), results stacked."""
    if not callable(fn):
        raise TypeError(f"fn must be callable. Received: {fn!r}")
    sig = fn_output_signature if fn_output_signature is not None else dtype
    if context.executing_eagerly():
        flat = [_to_tensor(e) for e in nest.flatten(elems)]
        n = _eager_rows(flat)
        if n == 0:
            return _empty_map_result(sig, elems)
        want = _signature_dtypes(sig, flat)
        flat_r = []
        for i in range(n):
            r = fn(nest.pack_sequence_as(elems, [e[i] for e in flat]))
            nest.assert_same_structure(sig or elems, r)
            flat_r.append([_to_tensor(x) for x in nest.flatten(r)])
            for t, dt in zip(flat_r[-1], want):
                if t.dtype != dt:     # TF's eager TensorArray write of the result row
                    raise InvalidArgumentError(_write_dtype_message(dt, t.dtype))
        stacked = [array_ops.stack([r[k] for r in flat_r]) for k in range(len(want))]
        return nest.pack_sequence_as(sig or elems, stacked)
    g = context.get_default_graph()
    with g.name_scope(name or "map"):

        def step(_, rows):
            r = fn(nest.pack_sequence_as(elems, rows))
            nest.assert_same_structure(sig or elems, r)    # (TF's check inside its loop body)
            return [], [_to_tensor(x) for x in nest.flatten(r)]
        flat_e = [_to_tensor(e) for e in nest.flatten(elems)]
        _, ys = _scan_loop(step, [], elems, False, "map")
        count = _leading_count(flat_e)[0]
        ys = [y if y.dtype == dt else _written_as(y, dt, count) for y, dt in zip(ys, _signature_dtypes(sig, flat_e))]
        out = nest.pack_sequence_as(sig or elems, ys)
        if not back_prop:
            out = nest.map_structure(math_ops.stop_gradient, out)
        return out


def _empty_map_result(sig, elems):
    """TF's eager map_fn over 0 rows: fn is never called; the result has the structure and
    dtypes of fn_output_signature (elems' when not given), each [0] + the signature's
    shape when it is a TensorSpec of a fully defined shape, else [0]."""
    def empty(s):
        dt = s.dtype if hasattr(s, "dtype") else dtypes.as_dtype(s)
        shape = getattr(s, "shape", None) if not hasattr(s, "numpy") else None
        rest = shape.as_list() if shape is not None and shape.is_fully_defined() else []
        return array_ops.zeros([0] + rest, dt)
    if sig is None:
        return nest.map_structure(lambda e: array_ops.zeros([0], _to_tensor(e).dtype), elems)
    return nest.map_structure(empty, sig)


def _first_row(flat_e, reverse):
    """The rows tf.scan / foldl / foldr start from when given no initializer (the last
    when reverse). TF reads it from a TensorList: 0 rows fail when the graph runs, not
    when it is built (eagerly: OutOfRangeError, as TF's eager TensorArray read)."""
    count, static = _leading_count(flat_e)
    if static is not None and static > 0:
        return [e[-1 if reverse else 0] for e in flat_e]
    if context.executing_eagerly():
        raise OutOfRangeError("Reading from negative indices (index -1) is not allowed." if reverse else
                              "Tried to read from index 0 but array size is: 0 ")
    k = list_check(count - 1 if reverse else array_ops.zeros([], dtypes.int32), count, "access")
    return [array_ops.gather(e, k) for e in flat_e]


def _signature_dtypes(sig, flat_elems):
    """The dtypes of map_fn's result: fn_output_signature's, else those of elems (TF's default)."""
    if sig is None:
        return [e.dtype for e in flat_elems]
    return [dtypes.as_dtype(getattr(w, "dtype", w)) for w in nest.flatten(sig)]


def _write_dtype_message(want, got):
    return f"TensorArray dtype is {want.name} but Op is trying to write dtype {got.name}"


def _written_as(y, dt, count):
    """map_fn's stacked y (fn's dtype) as the TensorArray of dtype dt TF writes it to: TF's
    write fails when the graph runs, so the run fails if there is a row; with no rows the
    result is an empty dt tensor."""
    check = Assert(math_ops.equal(count, 0), [_write_dtype_message(dt, y.dtype)])
    with context.get_default_graph().control_dependencies([check]):
        return array_ops.identity(math_ops.cast(y, dt))


def _eager_rows(flat):
    if any(e.shape.rank == 0 for e in flat):
        raise ValueError("Elements in elems must be 1+ dimensional Tensors, not scalars")
    n = flat[0].shape.dims[0]
    if any(e.shape.dims[0] != n for e in flat):
        raise ValueError("Tensors in elems must have the same size in the first dimension")
    return n


def scan(fn, elems, initializer=None, parallel_iterations=10, back_prop=True, swap_memory=False, infer_shape=True,
         reverse=False, name=None):
    """``tf.scan``: the running ``a = fn(a, x)`` over the rows of ``elems``, every ``a`` stacked."""
    if not callable(fn):
        raise TypeError(f"fn must be callable. Received: {fn!r}")
    flat_e = [_to_tensor(e) for e in nest.flatten(elems)]
    rest = elems
    first = None
    if initializer is None:
        # the first row (the last one when reverse) is the initial value and the first result
        first = nest.pack_sequence_as(elems, _first_row(flat_e, reverse))
        rest = nest.pack_sequence_as(elems, [e[:-1] if reverse else e[1:] for e in flat_e])
        initializer = first
    if context.executing_eagerly():
        flat_r = [_to_tensor(e) for e in nest.flatten(rest)]
        n = _eager_rows(flat_r)
        a = initializer
        outs = []
        order = range(n - 1, -1, -1) if reverse else range(n)
        want = [_to_tensor(x).dtype for x in nest.flatten(initializer)]
        for i in order:
            a = fn(a, nest.pack_sequence_as(elems, [e[i] for e in flat_r]))
            outs.append([_to_tensor(x) for x in nest.flatten(a)])
            for t, dt in zip(outs[-1], want):
                if t.dtype != dt:     # TF's eager TensorArray write of the running value
                    raise InvalidArgumentError(_write_dtype_message(dt, t.dtype))
        if first is not None:
            outs.insert(0, [_to_tensor(x) for x in nest.flatten(first)])
        if reverse:
            outs.reverse()
        if not outs:     # (0 rows and an initializer: TF stacks nothing, shaped as it)
            return nest.map_structure(lambda a: array_ops.zeros([0] + _to_tensor(a).shape.as_list(),
                                                                _to_tensor(a).dtype), initializer)
        stacked = [array_ops.stack([o[k] for o in outs]) for k in range(len(outs[0]))]
        return nest.pack_sequence_as(initializer, stacked)
    g = context.get_default_graph()
    with g.name_scope(name or "scan"):
        def step(phs, rows):
            a = fn(nest.pack_sequence_as(initializer, phs), nest.pack_sequence_as(elems, rows))
            flat = [_to_tensor(x) for x in nest.flatten(a)]
            return flat, flat
        _, ys = _scan_loop(step, initializer, rest, reverse, "scan")
        if first is not None:
            heads = [array_ops.expand_dims(_to_tensor(x), 0) for x in nest.flatten(first)]
            ys = [array_ops.concat([y, h] if reverse else [h, y], 0) for h, y in zip(heads, ys)]
        out = nest.pack_sequence_as(initializer, ys)
        if not back_prop:
            out = nest.map_structure(math_ops.stop_gradient, out)
        return out


def foldl(fn, elems, initializer=None, parallel_iterations=10, back_prop=True, swap_memory=False, name=None):
    """``tf.foldl``: ``a = fn(a, x)`` over the rows of ``elems`` from the first; returns the last ``a``."""
    return _fold(fn, elems, initializer, back_prop, False, name or "foldl")


def foldr(fn, elems, initializer=None, parallel_iterations=10, back_prop=True, swap_memory=False, name=None):
    """``tf.foldr``: as foldl, from the last row."""
    return _fold(fn, elems, initializer, back_prop, True, name or "foldr")


def _fold(fn, elems, initializer, back_prop, reverse, name):
    if not callable(fn):
        raise TypeError(f"{fn!r} is not callable. Please provide a callable function.")
    flat_e = [_to_tensor(e) for e in nest.flatten(elems)]
    rest = elems
    if initializer is None:
        initializer = nest.pack_sequence_as(elems, _first_row(flat_e, reverse))
        rest = nest.pack_sequence_as(elems, [e[:-1] if reverse else e[1:] for e in flat_e])
    if context.executing_eagerly():
        flat_r = [_to_tensor(e) for e in nest.flatten(rest)]
        n = _eager_rows(flat_r)
        a = initializer
        for i in (range(n - 1, -1, -1) if reverse else range(n)):
            a = fn(a, nest.pack_sequence_as(elems, [e[i] for e in flat_r]))
        return nest.map_structure(_to_tensor, a)     # (tensors, as TF's, also when fn never ran)
    g = context.get_default_graph()
    with g.name_scope(name):
        def step(phs, rows):
            a = fn(nest.pack_sequence_as(initializer, phs), nest.pack_sequence_as(elems, rows))
            return [_to_tensor(x) for x in nest.flatten(a)], []
        final, _ = _scan_loop(step, initializer, rest, reverse, name)
        out = nest.pack_sequence_as(initializer, final)
        if not back_prop:
            out = nest.map_structure(math_ops.stop_gradient, out)
        return out
