"""``tf.cond``, ``tf.while_loop``, ``tf.case``, ``tf.switch_case`` (map_fn, scan,
foldl, foldr: functional_ops.py).

Eagerly they run the Python functions (a GradientTape records the ops inside
as usual); while a graph is built they trace the functions into the ``If`` /
``While`` ops of ops/control_flow_ops.py. Nested structures follow tf.nest.
"""
import numpy as np

from . import cond_tensor_arrays, context, dtypes, legacy_region_writes, nest, tensor_array_preallocated
from .assert_ops import Assert
from .convert import convert_to_tensor
from .graph import Tensor
from .ops import array_ops, math_ops, reduction_ops
from .errors import InvalidArgumentError
from .ops.control_flow_ops import _make_if, _make_while, as_output, scalar_of, trace
from .shapes import TensorShape, as_shape
from .tensor_array import TensorArray
from .tensor_array_ragged import NeedsRagged, while_loop_ragged
from .eager import BatchedTensor, EagerTensor
from .eager_batched_cond import batched_case, batched_cond, batched_switch, merge_rows, row_scalars, rows_active

_COND_MISMATCH = cond_tensor_arrays.COND_MISMATCH



def check_loop_var(t, v, dims, dt):
    """TF's build-time check of a while_loop body's output ``t`` for loop variable ``v``
    (carried as ``dt`` with shape invariant ``dims``): TypeError / ValueError, TF's messages."""
    if t.dtype != dt:
        raise TypeError(f"Loop var {v.name} enters the loop with type {dt!r} but has type "
                        f"{t.dtype!r} after 1 iteration. {v.name} type should remain constant.")
    if not _shape_at_least_as_specific(t.shape, as_shape(dims)):
        raise ValueError(f"Input tensor '{v.name}' enters the loop with shape {as_shape(dims)}, but has "
                         f"shape {t.shape} after one iteration. To allow the shape to vary across "
                         f"iterations, use the `shape_invariants` argument of tf.while_loop to "
                         f"specify a less-specific shape.")

def _shape_at_least_as_specific(shape, invariant):
    """TF's _ShapeLessThanOrEqual: a body output must know every dim the invariant knows (an
    unknown shape does not fit a known invariant; tf_fuzz round 140000: scan over elems of
    unknown shape with an initializer of a known one)."""
    if invariant.rank is None:
        return True
    if shape.rank != invariant.rank:
        return False
    return all(b is None or a == b for a, b in zip(shape.dims, invariant.dims))


def _to_tensor(x, dtype=None):
    conv = getattr(x, "_graph_tensor", None)
    if conv is not None and not context.executing_eagerly():
        x = conv()
    return convert_to_tensor(x, dtype=dtype)


def _unpack_singleton(x):
    if isinstance(x, (list, tuple)) and len(x) == 1:
        return x[0]
    return x


def _eager_bool(p, what, bool_only=False):
    """TF's eager cond / while_loop test the predicate with Python's ``if``: a tensor of one
    element, any rank and dtype (0 is False), is its truth value; any other is numpy's
    ValueError. ``bool_only``: a non-bool predicate is a TypeError (tf.case: TF fails on it)."""
    v = np.asarray(p.numpy() if hasattr(p, "numpy") else p)
    if bool_only and v.dtype != np.bool_:
        raise TypeError(f"{what} must be a bool tensor, got {v.dtype}")
    return bool(v)      # (numpy: "The truth value of an array with more than one element is ambiguous...")


# ---------------------------------------------------------------- cond
def cond(pred, true_fn=None, false_fn=None, name=None):
    """``tf.cond`` (TF 2: a singleton list result stays a list)."""
    return _cond(pred, true_fn, false_fn, True, name)


def cond_v1(pred, true_fn=None, false_fn=None, strict=False, name=None, fn1=None, fn2=None):
    """``tf.compat.v1.cond``: without ``strict`` a singleton list result is unpacked (eagerly only, as TF 2)."""
    true_fn = true_fn if true_fn is not None else fn1
    false_fn = false_fn if false_fn is not None else fn2
    return _cond(pred, true_fn, false_fn, strict, name)


def _cond(pred, true_fn, false_fn, strict, name):
    if not callable(true_fn):
        raise TypeError("'true_fn' must be callable.")
    if not callable(false_fn):
        raise TypeError("'false_fn' must be callable.")
    if context.executing_eagerly():
        pred = _to_tensor(pred)
        if type(pred) is BatchedTensor:       # one predicate per row of an eager jacobian
            result = batched_cond(pred, true_fn, false_fn)
            return result if strict else _unpack_singleton(result)
        taken = _eager_bool(pred, "The predicate of tf.cond")
        result = true_fn() if taken else false_fn()
        return result if strict else _unpack_singleton(result)
    pred = _to_tensor(pred)
    if pred.dtype is not dtypes.bool_:
        raise TypeError(f"The predicate of tf.cond must be a bool tensor, got {pred.dtype.name}")
    if pred.shape.rank != 0:
        # TF's graph takes any one-element predicate (shape [1], [1, 1]); another count is
        # built, and fails when it runs (TF 2.21 aborts in grappler for a constant one)
        pred = scalar_of(pred, one_element=True)
    g = context.get_default_graph()
    with g.name_scope(name or "cond"):
        # (a TensorArray a branch writes is changed back after it: cond_tensor_arrays.py)
        fg_t, r_t = _traced_branch("true_fn", true_fn)
        fg_f, r_f = _traced_branch("false_fn", false_fn)
        if r_t is None and r_f is None:   # branches run for their effects (tf.print, assignments)
            return _make_if(pred, [(fg_t, []), (fg_f, [])], name="If")
        try:
            nest.assert_same_structure(r_t, r_f, check_types=False)
        except (ValueError, TypeError) as e:
            raise TypeError(f"{_COND_MISMATCH}\n{e}") from None
        flat_t, flat_f, rebuild = cond_tensor_arrays.branch_outputs(fg_t, nest.flatten(r_t), fg_f,
                                                                    nest.flatten(r_f))
        flat_t = [as_output(fg_t, x) for x in flat_t]
        flat_f = [as_output(fg_f, x) for x in flat_f]
        for a, b in zip(flat_t, flat_f):
            if a.dtype != b.dtype:
                raise TypeError(f"{_COND_MISMATCH} true_fn returns {a.dtype.name} where false_fn returns "
                                f"{b.dtype.name}.")
        if not flat_t:
            op = _make_if(pred, [(fg_t, []), (fg_f, [])], name="If")
            if r_t is None or not nest.flatten(r_t):
                return op
            out = []    # (only arrays neither branch wrote)
        else:
            out = _make_if(pred, [(fg_t, flat_t), (fg_f, flat_f)], name="If")
    out = rebuild([out] if isinstance(out, Tensor) else list(out))
    # (a graph's cond is TF 2's cond_v2, which keeps a singleton list whatever ``strict`` says;
    # only the eager cond unpacks it)
    return nest.pack_sequence_as(r_t, out)


def _traced_branch(name, fn):
    """(graph, result) of branch ``fn`` traced; in a plain graph, traced again without the
    assignments its outputs do not need (legacy_region_writes.py: TF runs only those)."""
    skip = frozenset()
    while True:
        def run():
            context.get_default_graph().skip_writes = skip
            return cond_tensor_arrays.traced_branch(fn)
        fg, _, result = trace(name, run, [])
        leaves = [] if result is None else nest.flatten(result)
        if any(isinstance(x, TensorArray) for x in leaves):
            return fg, result     # (an array's writes are its own dataflow: kept as they are)
        try:
            legacy_region_writes.check(fg, leaves)
        except legacy_region_writes.Retrace as e:
            skip = e.skip
            continue
        return fg, result


def switch_case(branch_index, branch_fns, default=None, name="switch_case"):
    """``tf.switch_case``: ``branch_fns[branch_index]()``, or ``default()`` (the
    last branch when None) for an index out of range. Built as nested conds."""
    if isinstance(branch_fns, dict):
        pairs = sorted(branch_fns.items())
    else:
        branch_fns = list(branch_fns)
        pairs = [p if isinstance(p, tuple) else (i, p) for i, p in enumerate(branch_fns)]
    if not pairs:
        raise ValueError("Must provide at least one item in branch_fns")
    for k, fn in pairs:
        if not isinstance(k, int):
            raise TypeError(f"branch_fns keys must be integers, got {k!r}")
        if not callable(fn):
            raise TypeError(f"fn for branch {k} must be callable.")
    keys = sorted(k for k, _ in pairs)
    if keys != list(range(len(keys))):     # TF: {0: f, 2: g} would silently pick the wrong branch
        raise ValueError(f"branch indices (keys) must form contiguous range of [0 to {len(keys)}) but found "
                         f"{{{','.join(map(str, keys))}}}")
    pairs = sorted(pairs, key=lambda p: p[0])
    if default is None:
        default = pairs[-1][1]
    idx = _to_tensor(branch_index)
    if not idx.dtype.is_integer:
        raise TypeError(f"'branch_index' must be an integer Tensor, got <dtype: '{idx.dtype.name}'>")
    if context.executing_eagerly():
        if type(idx) is BatchedTensor and idx._value.ndim == 1:   # one index per row of an eager jacobian
            return batched_switch(idx, lambda k: dict(pairs).get(k, default))
        i = np.asarray(idx.numpy())
        if i.ndim:
            # TF's eager switch_case clamps the index with v1 tf.where (Select) of two scalars
            raise InvalidArgumentError("'then' must be at least a vector, but saw shape: []" if i.ndim == 1 else
                                       f"Inputs to operation Select of type Select must have the same size and "
                                       f"shape.  Input 0: [{','.join(map(str, i.shape))}] != input 1: []")
        return dict(pairs).get(int(i), default)()
    if idx.shape.rank != 0:     # TF builds it, and its Switch kernel fails when it runs
        idx = scalar_of(idx, one_element=False)
    return _chain([(math_ops.equal(idx, np.asarray(k, idx.dtype.np)), fn) for k, fn in pairs], default, name)


def case(pred_fn_pairs, default=None, exclusive=False, strict=False, name="case"):
    """``tf.case``: the fn of the first true predicate, else ``default``. As TF's:
    without a default the last pair's fn is it, and no predicate being true is an
    InvalidArgumentError; ``exclusive`` checks at run time that at most one of
    the (other) predicates is true."""
    if isinstance(pred_fn_pairs, dict):
        pred_fn_pairs = list(pred_fn_pairs.items())
    pairs = list(pred_fn_pairs)
    if not pairs:
        raise ValueError("Must provide at least one item in pred_fn_pairs")
    for p in pairs:
        if not isinstance(p, tuple) or len(p) != 2:
            raise TypeError("Each entry in pred_fn_pairs must be a 2-tuple")
        if not callable(p[1]):
            raise TypeError("fn for pred %s must be callable." % (p[0],))
    preds = [_to_tensor(p) for p, _ in pairs]
    fns = [fn for _, fn in pairs]
    checks = []
    if default is None:
        checks.append((reduction_ops.reduce_any(array_ops.stack(preds)), ["Input error: None of conditions evaluated as "
                                                                     "True:", array_ops.stack(preds)]))
        preds, default, fns = preds[:-1], fns[-1], fns[:-1]
    if exclusive and preds:
        stacked = array_ops.stack(preds)
        names = ", ".join(getattr(p, "name", "?") for p in preds)
        checks.insert(0, (math_ops.less_equal(reduction_ops.reduce_sum(math_ops.cast(stacked, dtypes.int32)), 1),
                          [f"Input error: exclusive=True: more than 1 conditions ({names}) evaluated as True:",
                           stacked]))
    if context.executing_eagerly():
        for ok, data in checks:
            Assert(ok, data, summarize=len(pairs))
        if any(type(p) is BatchedTensor for p in preds):     # one predicate per row of an eager jacobian
            return _unpack(batched_case(preds, fns, default), strict)
        for p, fn in zip(preds, fns):
            if _eager_bool(p, "A tf.case predicate", bool_only=True):
                return _unpack(fn(), strict)
        return _unpack(default(), strict)
    g = context.get_default_graph()
    with g.name_scope(name):
        asserts = [Assert(ok, data, summarize=len(pairs)) for ok, data in checks]
    with g.control_dependencies(asserts):
        return _chain(list(zip(preds, fns)), default, name)    # (kept a singleton list: see _cond)


def _unpack(x, strict):
    return x if strict else _unpack_singleton(x)


def _chain(pairs, default, name):
    g = context.get_default_graph()
    with g.name_scope(name):
        def build(k):
            if k == len(pairs):
                return default()
            return cond(pairs[k][0], pairs[k][1], lambda: build(k + 1))
        return build(0)


# ---------------------------------------------------------------- while_loop
def while_loop(cond, body, loop_vars, shape_invariants=None, parallel_iterations=10, back_prop=True,
               swap_memory=False, maximum_iterations=None, name=None):
    """``tf.while_loop`` (TF 2: the result has the structure of ``loop_vars``)."""
    if not callable(cond):
        raise TypeError("'cond' must be callable.")
    if not callable(body):
        raise TypeError("'body' must be callable.")
    if parallel_iterations < 1:
        raise TypeError("'parallel_iterations' must be a positive integer.")
    single = not isinstance(loop_vars, (list, tuple))
    packed = [loop_vars] if single else loop_vars
    if not nest.flatten(packed):
        raise ValueError("loop_vars must be a non-empty structure of tensors")

    def call(fn, vals):
        return fn(*vals)

    def body_result(vals):
        out = call(body, vals)
        if single or not nest.is_nested(out):
            out = [out] if single or len(packed) == 1 else out
        try:
            nest.assert_same_structure(packed, out, check_types=False)
        except (ValueError, TypeError) as e:
            raise ValueError(f"The body of tf.while_loop must return the structure of loop_vars.\n{e}") from None
        return out

    if context.executing_eagerly():
        vals = nest.map_structure(_to_loop_value, packed)
        limit, row_limit = None, None
        if maximum_iterations is not None:
            limit = _to_tensor(maximum_iterations)
            if limit.shape.rank != 0:
                raise ValueError(f"'maximum_iterations' must be a scalar. Received shape: {limit.shape}")
            if type(limit) is BatchedTensor:   # one per row of an eager jacobian: each row stops at its own
                row_limit, limit = row_scalars(limit, "maximum_iterations", np.integer), None
            else:
                limit = int(np.asarray(limit.numpy()))
        i, active = 0, (None if row_limit is None else np.ones(len(row_limit), bool))
        while limit is None or i < limit:
            c = _to_tensor(call(cond, vals))
            if type(c) is BatchedTensor or active is not None:   # per row of an eager jacobian
                active = rows_active(c, active)
                if row_limit is not None:
                    active = active & (i < row_limit)
                if not active.any():
                    break
            elif not _eager_bool(c, "The loop condition"):
                break
            out = body_result(vals)
            flat_old = nest.flatten(vals)
            flat = [x if isinstance(o, TensorArray) else
                    _to_tensor(x, dtype=o.dtype) if not _is_tensorish(x) else _to_tensor(x)
                    for x, o in zip(nest.flatten(out), flat_old)]
            for o, x in zip(flat_old, flat):
                if isinstance(o, TensorArray) is not isinstance(x, TensorArray):
                    raise TypeError(f"Loop var enters the loop as {type(o).__name__} but is {type(x).__name__} "
                                    f"after 1 iteration.")
                if x.dtype != o.dtype:
                    raise TypeError(f"Loop var enters the loop with type {o.dtype!r} but has type {x.dtype!r} "
                                    f"after 1 iteration.")
            if active is not None:      # the rows that stopped keep their values
                flat = merge_rows(active, flat_old, flat)
            vals = nest.pack_sequence_as(packed, flat)
            i += 1
        return vals[0] if single else nest.pack_sequence_as(loop_vars, nest.flatten(vals))

    if any(isinstance(v, TensorArray) for v in nest.flatten(packed)):
        return _while_with_tensor_arrays(cond, body, loop_vars, shape_invariants, parallel_iterations, back_prop,
                                         maximum_iterations, name)
    g = context.get_default_graph()
    with g.name_scope(name or "while"):
        flat = [_to_tensor(v) for v in nest.flatten(packed)]
        specs = _loop_specs(packed, flat, shape_invariants, single)
        n = len(flat)

        def cond_fn(phs):
            return call(cond, nest.pack_sequence_as(packed, phs))

        skip = [frozenset()]   # (a plain graph's body: the writes its outputs do not need)

        def body_fn(phs, _):
            fg = context.get_default_graph()
            fg.skip_writes = skip[0]
            out = body_result(nest.pack_sequence_as(packed, phs))
            res = []
            for x, ph, v, (dims, dt) in zip(nest.flatten(out), phs, flat, specs):
                t = _to_tensor(x) if _is_tensorish(x) else _to_tensor(x, dtype=dt)
                if isinstance(t, Tensor) and t.graph is not ph.graph:
                    t = as_output(ph.graph, t)
                check_loop_var(t, v, dims, dt)
                res.append(t)
            legacy_region_writes.check(fg, res)   # (raises Retrace: traced again below)
            return res, []

        limit = None
        if maximum_iterations is not None:
            limit = _to_tensor(maximum_iterations)
            if not limit.dtype.is_integer:
                raise TypeError(f"maximum_iterations must be an integer, got {limit.dtype.name}")
            if limit.shape.rank != 0:   # TF builds it, and its Switch kernel fails when it runs
                limit = scalar_of(limit, one_element=False)
        while True:
            try:
                outs = _make_while(flat, specs, cond_fn, body_fn, [], [], "max" if limit is not None else None,
                                   limit, name="While")[:n]
                break
            except legacy_region_writes.Retrace as e:   # (raised while the body was traced: no op was made)
                skip[0] = e.skip
        if not back_prop:
            outs = [math_ops.stop_gradient(t) if t.dtype.is_floating else t for t in outs]
    if single:
        return outs[0]
    return nest.pack_sequence_as(loop_vars, outs)


def _to_loop_value(x):
    return x if isinstance(x, TensorArray) else _to_tensor(x)


def _while_with_tensor_arrays(cond, body, loop_vars, shape_invariants, parallel_iterations, back_prop,
                              maximum_iterations, name):
    """A graph while_loop with TensorArrays among its loop variables: as TF 2 flattens
    a TensorArray to its TensorList, each is carried as its dense ``[size, *element]``
    tensor (autograph/staged_tensor_array.py) and handed to ``cond`` / ``body`` as a
    TensorArray over it; the loop returns TensorArrays over the final tensors. Elements
    whose shapes may differ between iterations: tensor_array_ragged.py."""
    try:
        return _while_with_dense_arrays(cond, body, loop_vars, shape_invariants, parallel_iterations, back_prop,
                                        maximum_iterations, name)
    except NeedsRagged as e:   # elements that may differ in shape: carried as (values, lengths)
        return while_loop_ragged(while_loop, cond, body, loop_vars, shape_invariants, parallel_iterations,
                                 back_prop, maximum_iterations, name, e.args[0])


def _while_with_dense_arrays(cond, body, loop_vars, shape_invariants, parallel_iterations, back_prop,
                             maximum_iterations, name):
    from .autograph.operators import _dry
    from .autograph.staged_tensor_array import (NeedsEntryCheck, NotAppends, check_appends, entry_checked,
                                                watch_appends, with_tensor_arrays)
    single = not isinstance(loop_vars, (list, tuple))
    packed = [loop_vars] if single else loop_vars
    state = list(nest.flatten(packed))

    def get():
        return tuple(state)

    def put(vals):
        state[:] = list(vals)

    def call(fn):
        return fn(*nest.pack_sequence_as(packed, state))

    def one_iteration():
        out = call(body)
        out = [out] if single or (len(packed) == 1 and not nest.is_nested(out)) else out
        try:
            nest.assert_same_structure(packed, out, check_types=False)
        except (ValueError, TypeError) as e:
            raise ValueError(f"The body of tf.while_loop must return the structure of loop_vars.\n{e}") from None
        put(nest.flatten(out))
    get_dense, set_dense = with_tensor_arrays(one_iteration, get, put, _dry, ragged_ok=True)
    dense = list(get_dense())
    is_ta = [isinstance(v, TensorArray) for v in state]
    if shape_invariants is None:
        inv = None
    else:
        user = nest.flatten_up_to(packed, [shape_invariants] if single else shape_invariants, check_types=False)
        # (a TensorArray's invariant is its dense tensor's shape: TF ignores what is given for it)
        inv = [d.shape if ta else u for d, u, ta in zip(dense, user, is_ta)]
    # a dynamic array's dense tensor is its entry value under a [None, ...] shape (a
    # PlaceholderWithDefault): the loop gets that shape as the invariant and the entry
    # value itself, whose static shape lets the compiler specialise the loop
    grows = {k: d.op.inputs[0] for k, (d, ta) in enumerate(zip(dense, is_ta))
             if ta and isinstance(d, Tensor) and d.op.type == "PlaceholderWithDefault"}
    if grows:
        if inv is None:
            inv = [d.shape if ta else _to_tensor(d).shape for d, ta in zip(dense, is_ta)]
        dense = [grows.get(k, d) for k, d in enumerate(dense)]

    traced = {}   # the condition and body as last traced (for tensor_array_preallocated.plan)

    def dense_cond(*vals):
        set_dense(vals)
        watches = watch_appends(state)    # (only to see whether it reads a dynamic array)
        out = call(cond)
        traced["cond"] = (vals, out) if isinstance(out, Tensor) and not any(w.read for w in watches.values()) else None
        for w in watches.values():
            w.array._appends = None
        return out

    appends = [True]   # dynamic arrays' writes traced as appends (staged_tensor_array.check_appends)
    checked = set()    # (counter slot, array slot) whose entry values the loop's entry checks
    fixed = {}         # dynamic array slot -> how the body writes it (tensor_array_preallocated.configure)

    def dense_body(*vals):
        set_dense(vals)
        for k, f in fixed.items():    # written in place (tensor_array_preallocated.py)
            tensor_array_preallocated.configure(state[k], f)
        watches = watch_appends(state) if appends[0] else {}
        one_iteration()
        out = list(get_dense())
        if watches:
            traced["body"] = (watches, vals, out)
            check_appends(watches, state, dense, vals, out, checked)
        return out

    def build():
        return while_loop(dense_cond, dense_body, dense, inv, parallel_iterations, back_prop,
                          maximum_iterations=maximum_iterations, name=name)
    entry = list(dense)
    try:
        try:
            out = build()
        except NeedsEntryCheck as e:   # in order given entry values known at run time: checked there
            for j, k, a, b in e.checks:
                dense[j] = entry_checked(dense[j], array_ops.shape(dense[k])[0], a, b)
                checked.add((j, k))
            out = build()
    except NotAppends:   # (raised while the body was traced: no op was made)
        appends[0] = False
        dense[:] = entry
        lengths = tensor_array_preallocated.plan(*traced["body"], traced.get("cond"), entry, maximum_iterations,
                                           context.get_default_graph())
        for k, length in (lengths or {}).items():   # out of order: preallocated, or grown in place
            dense[k], fixed[k] = tensor_array_preallocated.preallocated(entry[k], length)
        out = build()
    set_dense(out)
    result = nest.pack_sequence_as(packed, state)
    return result[0] if single else nest.pack_sequence_as(loop_vars, nest.flatten(result))


def _is_tensorish(x):
    return isinstance(x, (Tensor, EagerTensor)) or hasattr(x, "_jitgrad_to_tensor")


def _loop_specs(packed, flat, shape_invariants, single):
    if shape_invariants is None:
        return [(t.shape.dims, t.dtype) for t in flat]
    inv = [shape_invariants] if single else shape_invariants
    try:
        nest.assert_same_structure(packed, inv, check_types=False)
    except (ValueError, TypeError):
        # a TensorShape given as a list of dims is a leaf for this purpose
        inv = nest.flatten_up_to(packed, inv, check_types=False)
    flat_inv = [as_shape(s) if s is not None else TensorShape(None)
                for s in (inv if isinstance(inv, list) and len(inv) == len(flat) else
                          nest.flatten_up_to(packed, inv, check_types=False))]
    specs = []
    for t, s in zip(flat, flat_inv):
        if not t.shape.is_compatible_with(s):
            raise ValueError(f"The shape invariant specified for {t.name} is not compatible with the initial shape "
                             f"of the loop variable. It enters the loop with shape {t.shape}, but the specified "
                             f"shape invariant is {s}.")
        specs.append((s.dims, t.dtype))
    return specs


def while_loop_v1(cond, body, loop_vars, shape_invariants=None, parallel_iterations=10, back_prop=True,
                  swap_memory=False, name=None, maximum_iterations=None, return_same_structure=False):
    """``tf.compat.v1.while_loop``: without ``return_same_structure`` a single
    loop variable comes back unwrapped."""
    out = while_loop(cond, body, loop_vars, shape_invariants, parallel_iterations, back_prop, swap_memory,
                     maximum_iterations, name)
    return out if return_same_structure else _unpack_singleton(out)

