"""``tf.Module``: a named container that finds the variables and submodules
held in its attributes (directly or in lists, tuples and dicts), as TF's
module.py does: own attributes in sorted name order first, then each
submodule's, depth first, every object once."""
import functools
import re

from . import context, nest
from .variables import Variable

_CAMEL_TO_SNAKE = re.compile(r"((?<=[a-z0-9])[A-Z]|(?!^)[A-Z](?=[a-z]))")
_VALID_IDENTIFIER = re.compile(r"^[a-zA-Z_]([a-zA-Z0-9_])*$")


def camel_to_snake(value):
    return _CAMEL_TO_SNAKE.sub(r"_\1", value).lower()


def _is_variable(obj):
    return isinstance(obj, Variable)


def _is_trainable_variable(obj):
    return _is_variable(obj) and getattr(obj, "trainable", False)


def _is_non_trainable_variable(obj):
    return _is_variable(obj) and not getattr(obj, "trainable", False)


def _is_module(obj):
    return isinstance(obj, Module)


class Module:
    """Base class of tf.Module: ``name``, ``name_scope``, ``variables``,
    ``trainable_variables``, ``non_trainable_variables``, ``submodules``,
    ``with_name_scope``."""

    # attributes never searched for variables (Keras keeps caches here)
    _TF_MODULE_IGNORED_PROPERTIES = frozenset()

    def __init__(self, name=None):
        if name is None:
            name = camel_to_snake(type(self).__name__)
        elif not _VALID_IDENTIFIER.match(name):
            raise ValueError(f"{name!r} is not a valid module name. Module names must be valid Python "
                             "identifiers (e.g. a valid class name).")
        self._name = name
        with context.name_scope(name) as scope_name:
            self._name_scope = context.name_scope(scope_name)

    @property
    def name(self):
        return self._name

    @property
    def name_scope(self):
        return self._name_scope

    @property
    def variables(self):
        return tuple(self._flatten(predicate=_is_variable))

    @property
    def trainable_variables(self):
        return tuple(self._flatten(predicate=_is_trainable_variable))

    @property
    def non_trainable_variables(self):
        return tuple(self._flatten(predicate=_is_non_trainable_variable))

    @property
    def submodules(self):
        return tuple(self._flatten(predicate=_is_module))

    def _flatten(self, recursive=True, predicate=None, attribute_traversal_key=None, expand_composites=False):
        """Every object below this module (once each) for which ``predicate`` holds."""
        return _flatten_module(self, recursive, predicate or (lambda _: True), attribute_traversal_key,
                               {id(self)}, [])

    @classmethod
    def with_name_scope(cls, method):
        """Decorator: runs ``method`` inside ``self.name_scope``."""
        @functools.wraps(method)
        def method_with_name_scope(self, *args, **kwargs):
            with self.name_scope:
                return method(self, *args, **kwargs)
        return method_with_name_scope


def _flatten_module(module, recursive, predicate, key, seen, recursion_stack):
    if id(module) in recursion_stack:
        recursive = False     # a module that (indirectly) holds itself is walked once
    submodules = []
    attrs = vars(module)
    for name in sorted(attrs, key=key):
        if name in module._TF_MODULE_IGNORED_PROPERTIES:
            continue
        try:
            leaves = nest.flatten(attrs[name])
        except Exception as cause:
            raise ValueError(f"Error processing property {name!r} of {module!r}") from cause
        for leaf in leaves:
            if id(leaf) in seen:
                continue
            seen.add(id(leaf))
            if predicate(leaf):
                yield leaf
            if recursive and _is_module(leaf):
                submodules.append(leaf)
    recursion_stack.append(id(module))
    for sub in submodules:
        yield from _flatten_module(sub, recursive, predicate, key, seen, recursion_stack)
    recursion_stack.pop()
