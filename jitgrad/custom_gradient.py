"""``tf.custom_gradient``: a function that returns ``(result, grad_fn)``
gets ``grad_fn`` as its gradient, in eager, graph and traced-function code.

As TF does (custom_gradient.py):

* eager: ``f`` runs with the tapes recording as usual (so a higher-order
  gradient can differentiate what ``grad_fn`` computes from ``f``'s tensors);
  its results are passed through Identity and one tape record maps them back
  to the inputs (arguments, then the variables ``f`` read) with ``grad_fn``.
* graph (and ``jitgrad.function``): the results, arguments and variables go
  through one ``IdentityN`` op whose gradient is ``grad_fn``: none to the
  results (so nothing flows through ``f``'s own ops), ``grad_fn``'s to the
  arguments and variables (the op: ops/array_ops.py). The compiler removes
  ``IdentityN`` like Identity.

``grad_fn(*result_grads)`` returns one gradient per argument; when ``f`` uses
variables, ``grad_fn(*result_grads, variables=[...])`` returns
``(argument_grads, variable_grads)``.
"""
import functools
import inspect

from . import context, nest, tape
from .convert import convert_to_tensor
from .ops.registry import apply_op
from .ops.math_ops import identity


def custom_gradient(f=None):
    """``@tf.custom_gradient`` (also ``tf.custom_gradient(f)``)."""
    if f is None:
        return custom_gradient

    @functools.wraps(f)
    def decorated(*args, **kwargs):
        if context.executing_eagerly():
            return _eager_mode(f, args, kwargs)
        return _graph_mode(f, args, kwargs)
    return decorated


def _accepts_variables(grad_fn):
    spec = inspect.getfullargspec(grad_fn)
    return "variables" in spec.args or "variables" in spec.kwonlyargs or spec.varkw is not None


def _check_variables_argument(grad_fn, variables):
    if variables and not _accepts_variables(grad_fn):
        raise TypeError("@tf.custom_gradient grad_fn must accept keyword argument 'variables', since function "
                        f"uses variables: {variables}")


def _wrap_grad_fn(grad_fn, result, n_args, variables):
    """result grads -> flat [argument grads..., variable grads...] (grad_fn's, checked as TF does)."""
    def flat_grads(*result_grads):
        result_grads = nest.flatten(nest.pack_sequence_as(result, list(result_grads)))
        if variables:
            input_grads, variable_grads = grad_fn(*result_grads, variables=variables)
            if len(variable_grads) != len(variables):
                raise ValueError("Must return gradient for each variable from @custom_gradient grad_fn.")
        else:
            input_grads, variable_grads = grad_fn(*result_grads), []
        flat = nest.flatten(input_grads)
        if len(flat) != n_args:
            raise ValueError(f"custom_gradient function expected to return {n_args} gradients, but returned "
                             f"{len(flat)} instead.")
        return flat + list(variable_grads)
    return flat_grads


# ---------------------------------------------------------------- eager
class _RecordedBackward:
    """What the tape calls for a custom-gradient record (the OpDef protocol: ``.grad``)."""
    __slots__ = ("grad",)

    def __init__(self, flat_grads):
        self.grad = lambda op, *grads: flat_grads(*grads)


def _eager_mode(f, args, kwargs):
    with tape.VariableWatcher() as watcher:
        result, grad_fn = f(*args, **kwargs)
    flat_args = nest.flatten((args, kwargs))
    variables = [v for v in watcher.watched_variables() if all(v is not a for a in flat_args)]
    _check_variables_argument(grad_fn, variables)
    flat_result = [identity(r) for r in nest.flatten(result)]
    inputs = [convert_to_tensor(x) for x in flat_args + variables]
    backward = _RecordedBackward(_wrap_grad_fn(grad_fn, result, len(flat_args), variables))
    tape.record_custom_op(getattr(f, "__name__", "custom_gradient"), backward, inputs, flat_result)
    return nest.pack_sequence_as(result, flat_result)


# ---------------------------------------------------------------- graph / traced function
def _graph_mode(f, args, kwargs):
    if kwargs:
        raise ValueError("The custom_gradient decorator currently supports keywords arguments only when eager "
                         "execution is enabled.")
    args = nest.map_structure(convert_to_tensor, args)
    result, grad_fn = f(*args)
    flat_args = nest.flatten(args)
    flat_result = [convert_to_tensor(r) for r in nest.flatten(result)]
    variables = sorted(_variables_between(flat_args, flat_result), key=lambda v: v.name)
    _check_variables_argument(grad_fn, variables)
    input_grads = _wrap_grad_fn(grad_fn, result, len(flat_args), variables)
    n_results = len(flat_result)

    def identity_n_grad(*grads):
        return [None] * n_results + input_grads(*grads[:n_results])

    tensors = flat_result + flat_args + [convert_to_tensor(v) for v in variables]
    outs = apply_op("IdentityN", tensors, {"_grad_fn": identity_n_grad}, name="IdentityN")
    outs = outs if isinstance(outs, tuple) else (outs,)
    return nest.pack_sequence_as(result, list(outs[:n_results]))


def _variables_between(flat_args, flat_result):
    """The variables whose reads the results depend on without passing through an argument."""
    if not flat_result:
        return []
    graph = flat_result[0].graph
    trace = context.current_trace(graph)
    by_key = dict(trace.variables) if trace is not None else {v._attrs["var"]: v for v in graph._variables}
    stop = {id(a) for a in flat_args}
    seen, found = set(), {}
    stack = [t for t in flat_result if id(t) not in stop]
    while stack:
        op = stack.pop().op
        if id(op) in seen:
            continue
        seen.add(id(op))
        if op.type == "VariableV2" and op.attrs.get("var") in by_key:
            var = by_key[op.attrs["var"]]
            found[id(var)] = var
        stack.extend(t for t in op.inputs if id(t) not in stop)
    return list(found.values())

