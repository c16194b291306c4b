"""``tf.py_function`` and ``tf.numpy_function``: Python code as an op.

Eagerly, ``py_function`` simply calls ``func`` on the eager inputs, so an
active GradientTape records the ops inside it and differentiates through it,
as TF does. In a graph (or a traced ``jitgrad.function``) it is a ``PyFunction``
op whose kernel calls ``func`` when the graph runs; its outputs have unknown
shapes and it has no native lowering, so a compiled run that needs it runs in
the interpreter (counted in ``cache_info()['fallbacks']``). jitgrad does not
differentiate through a graph-mode py_function (its gradient is None).
"""
import numpy as np

from .. import context, dtypes
from ..convert import convert_all, to_numpy
from .registry import NO_GRADIENT_RULE, apply_op, register
from ..eager import EagerTensor
from ..errors import InvalidArgumentError


def _as_list(tout):
    return (list(tout), True) if isinstance(tout, (list, tuple)) else ([tout], False)


def _outputs_to_arrays(result, touts, what):
    values = list(result) if isinstance(result, (list, tuple)) else [result]
    if len(values) != len(touts):
        raise InvalidArgumentError(f"{what} returned {len(values)} values, expected {len(touts)}")
    return tuple(np.asarray(to_numpy(np.asarray(v) if hasattr(v, "_value") else v, dt), order="C")   # 0-d stays 0-d
                 for v, dt in zip(values, touts))


def _kernel(attrs, state, *arrays):
    func, touts, numpy_args = attrs["func"], attrs["Tout"], attrs["numpy"]
    args = [a if numpy_args else EagerTensor(np.array(a)) for a in arrays]
    saved = context._eager_enabled[0]
    context._eager_enabled[0] = True   # func's own ops run eagerly, even in a TF1-style Session
    try:
        with context.init_scope():
            result = func(*args)
    finally:
        context._eager_enabled[0] = saved
    if not touts:
        return ()
    return _outputs_to_arrays(result, touts, "PyFunction")


register("PyFunction", denormals="keep", infer=lambda shapes, dts, attrs: [(None, dt) for dt in attrs["Tout"]],
         kernel=_kernel, stateful=True, data_dependent_shape=True, lowering="interpreter",
         grad=NO_GRADIENT_RULE)   # in a graph (eagerly the tape sees the ops inside)


def _call(func, inp, Tout, name, numpy_args):
    touts, as_list = _as_list(Tout)
    touts = [dtypes.as_dtype(t) for t in touts]
    inp = list(inp) if isinstance(inp, (list, tuple)) else [inp]
    xs = convert_all(inp) if inp else []
    if context.executing_eagerly() and not numpy_args:
        result = func(*xs)
        if Tout is None or not touts:
            return None
        arrays = _outputs_to_arrays(result, touts, "py_function")
        direct = list(result) if isinstance(result, (list, tuple)) else [result]
        # keep the function's own eager tensors (a tape followed them), else wrap the arrays
        outs = [r if isinstance(r, EagerTensor) and r.dtype == dt else EagerTensor(a)
                for r, a, dt in zip(direct, arrays, touts)]
        return outs if as_list else outs[0]
    if context.executing_eagerly():
        result = func(*[x.numpy() for x in xs])
        outs = [EagerTensor(a) for a in _outputs_to_arrays(result, touts, "numpy_function")] if touts else []
    else:
        outs = apply_op("PyFunction", xs, {"func": func, "Tout": tuple(touts), "numpy": numpy_args},
                        name=name or ("EagerPyFunc" if not numpy_args else "PyFunc"))
        op = outs if not touts else (outs[0] if isinstance(outs, tuple) else outs).op
        ctx = context.current_trace(op.graph)
        if ctx is not None:   # inside jitgrad.function it runs on every call, used or not (as in TF)
            ctx.stateful.append(op)
        outs = list(outs) if isinstance(outs, tuple) else [outs]
    if not touts:
        return None
    return outs if as_list else outs[0]


def py_function(func=None, inp=None, Tout=None, name=None):
    """``tf.py_function(func, inp, Tout)``: ``func`` gets eager tensors."""
    return _call(func, inp if inp is not None else [], Tout, name, numpy_args=False)


def numpy_function(func=None, inp=None, Tout=None, stateful=True, name=None):
    """``tf.numpy_function(func, inp, Tout)``: ``func`` gets numpy arrays."""
    return _call(func, inp if inp is not None else [], Tout, name, numpy_args=True)

