"""What ``jitgrad.function`` shows about its traces, and how
``reduce_retracing=True`` relaxes shapes (TF's rules):

* placeholders are named after the Python parameters (``x``; ``args_0`` for
  ``*args``; a TensorSpec's own name wins), so graph dumps read as TF's;
* ``pretty_printed_concrete_signatures()`` prints TF 2.21's "Input Parameters /
  Output Type / Captures" text;
* with ``reduce_retracing=True`` a call whose argument shapes no trace accepts
  is traced with every dimension that differs from an earlier trace of the
  same structure and dtypes relaxed to None (different ranks: unknown rank),
  TF's ``try_generalizing_function_type``.
"""
import inspect

import numpy as np

from .shapes import TensorShape
from .convert import is_tensorlike
from .tape import is_eager_variable
from .nest import flatten

_KINDS = {
    inspect.Parameter.POSITIONAL_ONLY: "POSITIONAL_ONLY",
    inspect.Parameter.POSITIONAL_OR_KEYWORD: "POSITIONAL_OR_KEYWORD",
    inspect.Parameter.KEYWORD_ONLY: "KEYWORD_ONLY",
}


def _parameters(fn):
    try:
        return list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None


def bound_parameters(fn, args, kwargs):
    """[(name, kind, value)] in TF's order: each parameter of ``fn`` with the
    value it got (defaults included); ``*args`` become ``args_0``, ``args_1``, ...
    (POSITIONAL_ONLY) and ``**kwargs`` one KEYWORD_ONLY entry per key."""
    params = _parameters(fn)
    if params is None:
        return ([(f"args_{i}", "POSITIONAL_ONLY", a) for i, a in enumerate(args)]
                + [(k, "KEYWORD_ONLY", v) for k, v in kwargs.items()])
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
    except TypeError:
        return ([(f"args_{i}", "POSITIONAL_ONLY", a) for i, a in enumerate(args)]
                + [(k, "KEYWORD_ONLY", v) for k, v in kwargs.items()])
    bound.apply_defaults()
    out = []
    for p in params:
        value = bound.arguments.get(p.name)
        if p.kind is inspect.Parameter.VAR_POSITIONAL:
            out += [(f"{p.name}_{i}", "POSITIONAL_ONLY", v) for i, v in enumerate(value or ())]
        elif p.kind is inspect.Parameter.VAR_KEYWORD:
            out += [(k, "KEYWORD_ONLY", v) for k, v in (value or {}).items()]
        else:
            out.append((p.name, _KINDS[p.kind], value))
    return out


def placeholder_names(fn, args, kwargs):
    """The base name of each top-level argument's placeholders: a list for
    ``args`` and a dict for ``kwargs``."""
    params = _parameters(fn) or []
    positional = [p for p in params if p.kind in (inspect.Parameter.POSITIONAL_ONLY,
                                                   inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    star = next((p.name for p in params if p.kind is inspect.Parameter.VAR_POSITIONAL), "args")
    names = [positional[i].name if i < len(positional) else f"{star}_{i - len(positional)}"
             for i in range(len(args))]
    return names, {k: k for k in kwargs}


# ---------------------------------------------------------------- text
def spec_text(shape, dtype, name=None):
    shape = TensorShape(shape) if not isinstance(shape, TensorShape) else shape
    shape_text = "<unknown>" if shape.rank is None else str(shape)
    return f"TensorSpec(shape={shape_text}, dtype=tf.{dtype.name}, name={name!r})"


def value_text(value, tensor_text):
    """TF's text for one argument or output: tensors by ``tensor_text``,
    containers as List/Tuple/Dict, other Python values as Literal."""
    if isinstance(value, np.ndarray) or is_tensorlike(value):
        return tensor_text(value)
    if isinstance(value, list):
        return "List[" + ", ".join(value_text(v, tensor_text) for v in value) + "]"
    if isinstance(value, tuple):
        return "Tuple[" + ", ".join(value_text(v, tensor_text) for v in value) + "]"
    if isinstance(value, dict):
        return "Dict[" + ", ".join(f"[{k!r}, {value_text(v, tensor_text)}]" for k, v in value.items()) + "]"
    return f"Literal[{value!r}]"


def pretty_signature(concrete, verbose=True):
    """TF 2.21's text for one ConcreteFunction."""
    placeholders = iter(concrete.inputs)

    def input_text(value):
        if is_eager_variable(value):
            return (f"VariableSpec(shape={value.shape}, dtype=tf.{value.dtype.name}, "
                    f"trainable={value.trainable}, alias_id=0)")
        ph = next(placeholders)
        return spec_text(ph.shape, ph.dtype, concrete._spec_names.get(ph.name))

    fn, args, kwargs = concrete._traced_call
    lines = ["Input Parameters:"]
    for name, kind, value in bound_parameters(fn, args, kwargs):
        lines.append(f"  {name} ({kind}): {value_text(value, input_text)}")
    lines.append("Output Type:")
    lines.append("  " + value_text(concrete.structured_outputs, lambda t: spec_text(t.shape, t.dtype)))
    lines.append("Captures:")
    passed = {id(v) for v in flatten((args, kwargs)) if is_eager_variable(v)}
    caps = [v for v in concrete.captured_variables if id(v) not in passed]   # arguments are not captures
    if not caps:
        lines.append("  None")
    for v in caps:
        lines.append(f"  {id(v)}: TensorSpec(shape=(), dtype=tf.resource, name=None)")
    return "\n".join(lines)


def short_signature(concrete):
    """``<ConcreteFunction (x: TensorSpec(...)) -> TensorSpec(...) at 0x...>``."""
    text = pretty_signature(concrete)
    ins = [line.strip() for line in text.split("Output Type:")[0].splitlines()[1:]]
    ins = [i.split(" (", 1)[0] + ": " + i.split("): ", 1)[1] for i in ins]
    out = text.split("Output Type:\n")[1].split("\nCaptures:")[0].strip()
    return f"<ConcreteFunction ({', '.join(ins)}) -> {out} at 0x{id(concrete):X}>"


# ---------------------------------------------------------------- reduce_retracing
def shape_free_key(key):
    """A trace key (function._key_of) with the tensors' shapes dropped."""
    if not isinstance(key, tuple):
        return key
    if len(key) == 3 and key[0] == "T":
        return ("T", key[2])
    if len(key) == 2 and key[0] == "dict":
        return ("dict", tuple((k, shape_free_key(v)) for k, v in key[1]))
    if len(key) == 2 and key[0] not in ("P", "O", "V") and isinstance(key[1], tuple):   # a list / tuple
        return (key[0], tuple(shape_free_key(k) for k in key[1]))
    return key


def accepts(shapes, relaxed):
    """Whether a trace made for ``relaxed`` shapes (tuples with None, or None) takes ``shapes``."""
    for s, r in zip(shapes, relaxed):
        if r is None:
            continue
        if len(s) != len(r) or any(d is not None and d != x for x, d in zip(s, r)):
            return False
    return True


def generalise(shapes, earlier):
    """TF's relaxation: the new shapes, each dimension that differs from an
    earlier trace's made None (a different rank: unknown rank)."""
    relaxed = list(shapes)
    for other in earlier:
        for i, (a, b) in enumerate(zip(relaxed, other)):
            if a is None or b is None or len(a) != len(b):
                relaxed[i] = None
            else:
                relaxed[i] = tuple(x if x == y else None for x, y in zip(a, b))
    return [None if r is None else tuple(r) for r in relaxed]


def specificity(relaxed):
    """Sort key: the trace with the fewest unknown dims first."""
    return sum(1000 if r is None else sum(d is None for d in r) for r in relaxed)
