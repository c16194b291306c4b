"""``tf.autograph``: Python control flow on tensors inside ``jitgrad.function``
becomes ``tf.cond`` / ``tf.while_loop`` (transformer.py rewrites the source,
operators.py decides at run time, conversion.py compiles and caches)."""
import types as _types

from .asserts import Feature
from .conversion import convert, converted_call, do_not_convert, to_code_of


def to_code(entity, recursive=True, experimental_optional_features=None):
    """``tf.autograph.to_code``: the source text of ``entity`` as converted."""
    return to_code_of(entity)


def to_graph(entity, recursive=True, experimental_optional_features=None):
    """``tf.autograph.to_graph``: the converted function."""
    entity = getattr(entity, "python_function", entity)
    if isinstance(entity, _types.MethodType):
        return _types.MethodType(convert(entity.__func__), entity.__self__)
    return convert(entity)


def set_loop_options(parallel_iterations=None, swap_memory=None, maximum_iterations=None,
                     shape_invariants=None):
    """``tf.autograph.experimental.set_loop_options``: read by the converter
    where it is the loop body's statement; a no-op when it runs."""


experimental = _types.SimpleNamespace(do_not_convert=do_not_convert, set_loop_options=set_loop_options,
                                      Feature=Feature)

__all__ = ["convert", "converted_call", "do_not_convert", "experimental", "set_loop_options", "to_code", "to_graph"]
