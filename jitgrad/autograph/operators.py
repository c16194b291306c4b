"""AutoGraph's run-time operators: what converted code calls (as ``ag__.if_stmt``,
``ag__.while_stmt``, ...). Each dispatches on its value when it runs: a graph
tensor stages ``tf.cond`` / ``tf.while_loop`` (TF's rules and messages, from
tensorflow/python/autograph/operators/control_flow.py); anything else runs as
plain Python. State moves through ``get_state`` / ``set_state`` closures over
the converted function's variables (``nonlocal``), as in TF.
"""
import numpy as np

from .. import context, nest
from ..control_flow import cond as tf_cond, while_loop as tf_while_loop
from ..convert import convert_to_tensor
from ..func_graph import trace
from ..graph import Tensor
from ..ops import array_ops, math_ops
from ..tensor_array import TensorArray
from .staged_tensor_array import with_tensor_arrays

_LEGAL_LOOP_TYPES = "Tensor, int, float, bool or a list, tuple or dict thereof"


# ---------------------------------------------------------------- undefined symbols
class Undefined:
    """The value of a symbol not yet assigned (``x`` defined in one branch only)."""
    __slots__ = ("symbol_name",)

    def __init__(self, symbol_name):
        self.symbol_name = symbol_name

    def read(self):
        raise UnboundLocalError(f"'{self.symbol_name}' is used before assignment")

    def __repr__(self):
        return self.symbol_name


class UndefinedReturnValue:
    """``retval_`` before a ``return`` ran."""


def ld(v):
    """A load of a symbol that may be undefined."""
    if isinstance(v, Undefined):
        return v.read()
    return v


def ldu(load_v, name):
    """``load_v()``, or Undefined(name) when the symbol has no value yet (as TF's: a missing
    attribute or key of a composite symbol such as ``c.v`` / ``d['k']`` too)."""
    try:
        return load_v()
    except (NameError, UnboundLocalError, AttributeError, KeyError):
        return Undefined(name)


def retval(v):
    return None if isinstance(v, UndefinedReturnValue) else v


def _is_none_or_undef(v):
    return v is None or isinstance(v, (Undefined, UndefinedReturnValue))


def is_tensor(x):
    """A symbolic (graph) tensor: the values AutoGraph stages control flow for.
    Eager tensors have a Python truth value and keep Python control flow."""
    return isinstance(x, Tensor)


def _verify_tf_condition(cond, tag):
    cond = convert_to_tensor(cond)
    if cond.dtype.name != "bool":
        raise ValueError(f"condition of {tag} expected to be `tf.bool` scalar, got {cond}; to use as boolean "
                         f"Tensor, use `tf.cast`; to check for None, use `is not None`")
    if cond.shape.rank is None:
        return array_ops.reshape(cond, [])
    if cond.shape.rank > 0:
        if np.prod([d for d in cond.shape.dims if d is not None]) > 1:
            raise ValueError(f"condition of {tag} expected to be `tf.bool` scalar, got {cond}; to check for "
                             f"None, use `is not None`")
        cond = array_ops.reshape(cond, [])
    return cond


# ---------------------------------------------------------------- if
def if_stmt(cond, body, orelse, get_state, set_state, symbol_names, nouts):
    """Functional form of an if statement; the first ``nouts`` symbols are its outputs."""
    if is_tensor(cond):
        _tf_if_stmt(cond, body, orelse, get_state, set_state, symbol_names, nouts)
    elif cond:
        body()
    else:
        orelse()


def _verify_cond_branch_vars(vals, names, branch):
    for name, v in zip(names, vals):
        if isinstance(v, Undefined):
            raise ValueError(f"'{name}' must also be initialized in the {branch} branch")
        if isinstance(v, UndefinedReturnValue):
            raise ValueError(f"the {branch} branch must also have a return statement.")


def _verify_cond_vars(body_vals, orelse_vals, names):
    for name, b, o in zip(names, body_vals, orelse_vals):
        try:
            nest.assert_same_structure(b, o, check_types=False)
        except (ValueError, TypeError) as e:
            raise TypeError(f"'{name}' must have the same nested structure in the main and else branches:\n\n"
                            f"{e}") from e
        for bl, ol in zip(nest.flatten(b), nest.flatten(o)):
            if bl is None:
                raise ValueError(f"'{name}' is None at the end of the main branch.")
            if ol is None:
                raise ValueError(f"'{name}' is None at the end of the else branch.")
            bt, ot = _as_tensor_or_none(bl), _as_tensor_or_none(ol)
            if bt is not None and ot is not None and bt.dtype != ot.dtype:
                raise TypeError(f"'{name}' has dtype {bt.dtype.name} in the main branch, but dtype "
                                f"{ot.dtype.name} in the else branch")


def _as_tensor_or_none(x):
    if isinstance(x, (bool, int, float, np.ndarray, np.generic)):
        return convert_to_tensor(x)
    return x if hasattr(x, "dtype") and hasattr(x, "shape") else None


def _tf_if_stmt(cond, body, orelse, get_state, set_state, symbol_names, nouts):
    cond = _verify_tf_condition(cond, "if statement")
    if not nouts:   # tf.cond needs an output: a dummy one
        prev_get, prev_set = get_state, set_state
        get_state = lambda: (0,) + prev_get()            # noqa: E731
        set_state = lambda v: prev_set(v[1:])            # noqa: E731
        symbol_names = ("<unused dummy>",) + tuple(symbol_names)
        nouts = 1
    init_vars = get_state()
    seen = {}

    def branch(fn, name, other):
        def run():
            set_state(init_vars)
            fn()
            new = get_state()[:nouts]
            seen[name] = new
            _verify_cond_branch_vars(new, symbol_names, name)
            if other in seen:
                _verify_cond_vars(*((new, seen[other]) if name == "main" else (seen[other], new)), symbol_names)
            return new
        return run
    final = tf_cond(cond, branch(body, "main", "else"), branch(orelse, "else", "main"))
    set_state(tuple(final) + tuple(init_vars[nouts:]))


def if_exp(cond, if_true, if_false, expr_repr):
    """``a if cond else b``."""
    if is_tensor(cond):
        cond = _verify_tf_condition(cond, f"if expression '{expr_repr}'")
        return tf_cond(cond, if_true, if_false)
    return if_true() if cond else if_false()


# ---------------------------------------------------------------- and / or / not
def and_(a, b):
    """``a and b``, ``b`` a thunk: evaluated only when needed (tf.cond for tensors)."""
    a_val = a()
    if is_tensor(a_val):
        return tf_cond(a_val, lambda: convert_to_tensor(b()), lambda: a_val)
    return a_val and b()


def or_(a, b):
    a_val = a()
    if is_tensor(a_val):
        return tf_cond(a_val, lambda: a_val, lambda: convert_to_tensor(b()))
    return a_val or b()


def not_(a):
    if is_tensor(a):
        return math_ops.logical_not(a)
    return not a


# ---------------------------------------------------------------- loops
def _verify_loop_init_vars(init_vars, symbol_names, first_iter_vars=None, extra_message=None):
    first_iter_vars = first_iter_vars or (None,) * len(symbol_names)
    for name, val, fi_val in zip(symbol_names, init_vars, first_iter_vars):
        if isinstance(val, UndefinedReturnValue):
            if fi_val:
                raise ValueError(f"the return value from a TensorFlow loop may only be a {_LEGAL_LOOP_TYPES}; "
                                 f"got {type(fi_val)}")
            raise NotImplementedError("a return statement cannot be placed inside this TensorFlow loop; this may "
                                      "happen if a return statement depends on a static Python condition such as "
                                      "a hyperparameter")
        msg = None
        if val is None:
            msg = f"'{name}' is not allowed to be None before the loop"
        elif isinstance(val, Undefined):
            msg = f"'{name}' must be defined before the loop"
            if extra_message:
                msg += "\n" + extra_message
        if msg is not None:
            raise ValueError(msg)


def _verify_loop_vars(entry_vars, exit_vars, symbol_names):
    for name, entry, exit_ in zip(symbol_names, entry_vars, exit_vars):
        try:
            nest.assert_same_structure(entry, exit_, check_types=False)
        except (ValueError, TypeError) as e:
            raise TypeError(f"'{name}' does not have the same nested structure after one iteration.\n\n{e}") from e
        for en, ex in zip(nest.flatten(entry), nest.flatten(exit_)):
            if ex is None:
                raise ValueError(f"'{name}' is None at the end of the iteration.")
            en_t, ex_t = _as_tensor_or_none(en), _as_tensor_or_none(ex)
            if en_t is None or ex_t is None:
                continue
            if en_t.dtype != ex_t.dtype:
                raise TypeError(f"'{name}' has dtype {en_t.dtype.name} before the loop, but dtype "
                                f"{ex_t.dtype.name} after one iteration")
            if not _is_subshape(ex_t.shape, en_t.shape):
                raise ValueError(f"'{name}' has shape {en_t.shape} before the loop, but shape {ex_t.shape} after "
                                 f"one iteration. Use tf.autograph.experimental.set_loop_options to set shape "
                                 f"invariants.")


def _is_subshape(left, right):
    if right.rank is None:
        return True
    if left.rank != right.rank:
        return False
    return all(r is None or l == r for l, r in zip(left.dims, right.dims))


def while_stmt(test, body, get_state, set_state, symbol_names, opts):
    """Functional form of a while statement: a tf.while_loop when the condition is
    a tensor on entry, else a Python loop."""
    init_test = _dry(test)
    if is_tensor(init_test):
        _tf_while_stmt(test, body, get_state, set_state, symbol_names, opts)
        return
    if not init_test:
        return
    body()
    while _python_test(test(), "The condition of while loop started as non-Tensor, then changed to Tensor. This "
                               "may happen either because variables changed type, or when a break or return "
                               "statement inside the loop depends on a Tensor condition. In both cases, changing "
                               "to a TF loop should remove the error."):
        body()


def _python_test(value, message):
    if is_tensor(value):
        raise NotImplementedError(message)
    return bool(value)


def _dry(fn):
    """``fn()`` traced into a throw-away function graph (TF's FuncGraph('tmp')):
    what it returns is inspected, the ops it made never run."""
    if context.executing_eagerly():
        return fn()
    ctx = context.current_trace()
    n_stateful = len(ctx.stateful) if ctx is not None else 0
    try:
        _, _, result = trace("tmp", fn, [])
    finally:
        if ctx is not None:
            del ctx.stateful[n_stateful:]
    return result


def _placeholder_value(like, original):
    """A zero value shaped as ``like`` (the first iteration's value) for a
    variable undefined before the loop, as TF's _placeholder_value."""
    if like is None or isinstance(like, (Undefined, UndefinedReturnValue)):
        return original
    if isinstance(like, (bool, int, float)):
        return type(like)(0)
    if isinstance(like, Tensor):
        if like.shape.rank is None or any(d is None for d in like.shape.dims):
            raise ValueError(f"cannot infer a static shape for {like.name}")
        return array_ops.zeros(like.shape.dims, dtype=like.dtype)
    if isinstance(like, (list, tuple, dict)):
        return nest.map_structure(lambda v: _placeholder_value(v, original), like)
    raise TypeError(f"Found an unsupported type '{type(like).__name__}' while creating placeholder for {like}. "
                    f"Supported types include Tensor, int, float, bool, list, tuple or dict.")


def _try_handling_undefineds(body, get_state, set_state, init_vars, nulls, symbol_names):
    first_iter_vars, failure = None, None
    try:
        def one_iteration():
            set_state(init_vars)   # as TF: undefined symbols (c.v included) hold an Undefined in the dry run
            body()
            return get_state()
        first_iter_vars = _dry(one_iteration)
        init_vars = tuple(_placeholder_value(fi, v) if n else v
                          for v, n, fi in zip(init_vars, nulls, first_iter_vars))
    except (UnboundLocalError, TypeError, ValueError, KeyError) as e:
        failure = f"Note: AutoGraph tried to define it automatically, but ran into a {type(e).__name__}: {e}"
    finally:
        set_state(init_vars)
    _verify_loop_init_vars(init_vars, symbol_names, first_iter_vars, extra_message=failure)
    return init_vars


def _tf_while_stmt(test, body, get_state, set_state, symbol_names, opts):
    # a dynamic TensorArray goes to tf.while_loop as a TensorArray, which compiles its appends
    # and out-of-order writes (control_flow._while_with_tensor_arrays); others travel as dense
    # loop tensors
    dynamic = any(isinstance(v, TensorArray) and v.dynamic_size for v in get_state())
    carried = None if dynamic else with_tensor_arrays(body, get_state, set_state, _dry)
    if carried is not None:
        get_state, set_state = carried
    init_vars = get_state()
    nulls = tuple(_is_none_or_undef(v) for v in init_vars)
    require_one_iteration = any(nulls)
    if require_one_iteration:
        init_vars = _try_handling_undefineds(body, get_state, set_state, init_vars, nulls, symbol_names)
    names = ("<internal dummy>",) + tuple(symbol_names)

    def aug_test(*loop_vars):
        set_state(loop_vars[1:])
        return _verify_tf_condition(test(), "while loop")

    def aug_body(*loop_vars):
        set_state(loop_vars[1:])
        body()
        new = get_state()
        _verify_loop_vars(loop_vars[1:], new, names[1:])
        return (True,) + tuple(new)

    # the first loop variable: whether the body ran (TF needs it for variables
    # defined in the loop; a loop with no variables needs one)
    maximum_iterations = opts.get("maximum_iterations")
    final = tf_while_loop(aug_test, aug_body, (False,) + tuple(init_vars), maximum_iterations=maximum_iterations,
                          parallel_iterations=opts.get("parallel_iterations", 10),
                          shape_invariants=_shape_invariants(opts, init_vars))
    # TF also asserts at run time that such a loop ran at least once; jitgrad has
    # no Assert op: a loop that never runs leaves those variables at zero.
    final = tuple(final)
    set_state(final[1:])


def _shape_invariants(opts, init_vars):
    pairs = opts.get("shape_invariants")
    if not pairs:
        return None
    by_id = {id(v): s for v, s in pairs}
    own = lambda v: convert_to_tensor(v).shape   # noqa: E731  (no invariant: the entry shape, as TF)
    return [own(False)] + [by_id[id(v)] if id(v) in by_id else nest.map_structure(own, v) for v in init_vars]


def for_stmt(iter_, extra_test, body, get_state, set_state, symbol_names, opts):
    """Functional form of a for statement: over a tensor, a tf.while_loop over its
    first dimension (a ``tf.range`` computed at run time: over its bounds);
    over anything else, a Python loop."""
    if is_tensor(iter_):
        if iter_.op.type == "Range":
            _tf_range_for_stmt(iter_, extra_test, body, get_state, set_state, symbol_names, opts)
        else:
            _known_len_tf_for_stmt(iter_, extra_test, body, get_state, set_state, symbol_names, opts)
        return
    if extra_test is None:
        for target in iter_:
            body(target)
        return

    def guarded():
        return _python_test(extra_test(), "break and return statements which depend on a TF condition are not "
                                          "supported in Python for loops. Did you intend to make it a TF loop?")
    if guarded():
        for target in iter_:
            body(target)
            if not guarded():
                break


def _counted_while(test_of_index, index0, step, read, extra_test, body, get_state, set_state, symbol_names, opts):
    index = index0

    def aug_get_state():
        return (index,) + tuple(get_state())

    def aug_set_state(vals):
        nonlocal index
        index = vals[0]
        set_state(vals[1:])

    def aug_body():
        nonlocal index
        body(read(index))
        index = index + step

    def aug_test():
        main = test_of_index(index)
        if extra_test is not None:
            return tf_cond(main, lambda: convert_to_tensor(extra_test()), lambda: convert_to_tensor(False))
        return main
    _tf_while_stmt(aug_test, aug_body, aug_get_state, aug_set_state, ("<internal iterate>",) + tuple(symbol_names),
                   opts)


def _tf_range_for_stmt(iter_, extra_test, body, get_state, set_state, symbol_names, opts):
    start, limit, delta = iter_.op.inputs
    d = array_ops.get_static_value(delta)
    if d is not None:
        test = (lambda i: i < limit) if d >= 0 else (lambda i: i > limit)
    else:
        def test(i):
            return math_ops.logical_or(math_ops.logical_and(delta >= 0, i < limit),
                                       math_ops.logical_and(delta < 0, i > limit))
    _counted_while(test, start, delta, lambda i: i, extra_test, body, get_state, set_state, symbol_names, opts)


def _known_len_tf_for_stmt(iter_, extra_test, body, get_state, set_state, symbol_names, opts):
    if iter_.shape.rank == 0:
        raise TypeError("Cannot iterate over a scalar tensor.")
    n = array_ops.shape(iter_)[0]
    _counted_while(lambda i: i < n, convert_to_tensor(np.int32(0)), 1, lambda i: array_ops.gather(iter_, i),
                   extra_test, body, get_state, set_state, symbol_names, opts)


# ---------------------------------------------------------------- builtins
def range_(*args):
    """``range`` of a tensor is ``tf.range`` (TF's py_builtins.range_)."""
    if any(is_tensor(a) for a in args):
        return array_ops.range_(*args)
    return range(*args)


def len_(s):
    if is_tensor(s):
        if s.shape.rank == 0:
            raise ValueError(f"len requires a non-scalar tensor, got one of shape {s.shape}")
        d = s.shape.dims[0]
        return d if d is not None else array_ops.shape(s)[0]
    return len(s)
