"""AutoGraph's ``assert`` statement (TF's converters/asserts.py and
operators/exceptions.py): ``assert test, "msg"`` becomes
``ag__.assert_stmt(test, lambda: "msg")``. With TF's optional feature
``Feature.ASSERT_STATEMENTS`` (or ``Feature.ALL``) in ``jitgrad.function(...,
experimental_autograph_options=...)``, a graph-tensor test stages
``tf.Assert(test, [msg])`` (message "Assertion error" when there is none);
without it, as in TF's default, the assert stays Python's, so a tensor test is
TF's "symbolic tf.Tensor as a Python bool" error. A Python-bool test is always
Python's assert.
"""
import enum

from .. import context
from ..assert_ops import Assert
from ..graph import Tensor


class Feature(enum.Enum):
    """``tf.autograph.experimental.Feature``: AutoGraph's optional conversions
    (jitgrad acts on ASSERT_STATEMENTS; the others are always on or not needed)."""
    ALL = "ALL"
    AUTO_CONTROL_DEPS = "AUTO_CONTROL_DEPS"
    ASSERT_STATEMENTS = "ASSERT_STATEMENTS"
    BUILTIN_FUNCTIONS = "BUILTIN_FUNCTIONS"
    EQUALITY_OPERATORS = "EQUALITY_OPERATORS"
    LISTS = "LISTS"
    NAME_SCOPES = "NAME_SCOPES"


def converts_asserts(options):
    """Whether ``experimental_autograph_options`` (a Feature or a tuple of them) turns
    tensor asserts into tf.Assert."""
    if options is None:
        return False
    opts = options if isinstance(options, (tuple, list, set, frozenset)) else (options,)
    return any(o in (Feature.ALL, Feature.ASSERT_STATEMENTS) for o in opts)


def assert_stmt(test, message):
    """The converted ``assert test, message()``."""
    if isinstance(test, Tensor):
        ctx = context.current_trace(test.graph)
        if ctx is not None and getattr(ctx, "assert_statements", False):
            text = message()
            return Assert(test, [text if text is not None else "Assertion error"])
    if not test:
        text = message()
        raise AssertionError(text) if text is not None else AssertionError()
    return None
