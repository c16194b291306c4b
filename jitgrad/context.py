"""Execution context: eager vs graph building, and the default-graph stack.

As in TF 2, ops run eagerly unless a graph is being built: inside
``Graph.as_default()`` (or while ``jitgrad.function`` traces) they add nodes to
that graph instead. ``compat.v1.disable_eager_execution()`` makes the global
default graph the target everywhere, which is how TF1-style scripts run.
"""
import contextlib
import random
import threading
from .graph import Graph

_state = threading.local()
_eager_enabled = [True]
_global_graph = [None]
# TF's Tensor._USE_EQUALITY: `==` on tensors is elementwise (TF 2) unless
# compat.v1.disable_tensor_equality() / disable_v2_behavior() turned it off.
_tensor_equality = [True]
functions_run_eagerly = [False]   # tf.config.run_functions_eagerly (config.py)
traces = []   # jitgrad.function's traces being built, innermost last (function.py's _TraceContext)


# TF's eager global seed (tf.random.set_seed outside a graph) and the Python generator
# unseeded eager random ops take their op seeds from (context._internal_operation_seed).
_global_seed = {"seed": None, "rng": None}


def global_seed():
    return _global_seed["seed"]


def set_global_seed(seed):
    _global_seed["seed"] = seed
    _global_seed["rng"] = None if seed is None else random.Random(int(seed))


def internal_operation_seed():
    return _global_seed["rng"].randint(0, 2 ** 31 - 1)


def _stack():
    s = getattr(_state, "graphs", None)
    if s is None:
        s = _state.graphs = []
    return s


def global_default_graph():
    if _global_graph[0] is None:
        _global_graph[0] = Graph()
    return _global_graph[0]


def reset_global_default_graph():
    if _stack():
        raise AssertionError("Do not use tf.reset_default_graph() to clear nested graphs.")
    _global_graph[0] = None


def current_trace(graph=None):
    """The jitgrad.function trace building ``graph`` (default: the default graph) or a
    graph it encloses, or None."""
    g = graph if graph is not None else get_default_graph()
    while g is not None:
        for ctx in reversed(traces):
            if ctx.graph is g:
                return ctx
        g = getattr(g, "outer_graph", None)   # a cond branch / loop body traced inside the function
    return None


def control_dependencies(control_inputs):
    """``tf.control_dependencies`` (the default graph's)."""
    return get_default_graph().control_dependencies(control_inputs)


def get_default_graph():
    s = _stack()
    return s[-1] if s else global_default_graph()


def push_graph(g):
    _stack().append(g)


def pop_graph(g):
    s = _stack()
    if not s or s[-1] is not g:
        raise AssertionError("Nesting violated for default graph stack.")
    s.pop()


@contextlib.contextmanager
def init_scope():
    """``tf.init_scope``: leaves every graph being built (a function's trace
    included), so ops run eagerly -- how variable initializers are lifted out
    of a traced function."""
    s = _stack()
    saved = s[:]
    del s[:]
    try:
        yield
    finally:
        s[:] = saved


def executing_eagerly():
    return _eager_enabled[0] and not _stack()


def executing_eagerly_outside_functions():
    """TF's: would ops run eagerly once every function being traced is left
    (what ``init_scope`` reaches)? False inside a plain ``Graph.as_default()``
    and after ``disable_eager_execution()``."""
    return _eager_enabled[0] and all(g.building_function for g in _stack())


def elementwise_equality(graph):
    """TF 2's rule for a tensor of ``graph`` (None: eager tensor or variable):
    ``==``/``!=`` are elementwise and the tensor is unhashable when tensor
    equality is on, ops outside functions run eagerly and the tensor is eager or
    belongs to a function being traced; otherwise (TF1-style graphs) they compare
    and hash by identity."""
    return (_tensor_equality[0] and (graph is None or graph.building_function)
            and executing_eagerly_outside_functions())


def enable_tensor_equality():
    _tensor_equality[0] = True


def disable_tensor_equality():
    _tensor_equality[0] = False


def enable_v2_behavior():
    enable_tensor_equality()
    enable_eager_execution()


def disable_v2_behavior():
    """``tf.compat.v1.disable_v2_behavior``: graph mode and identity equality (the parts jitgrad has)."""
    disable_tensor_equality()
    disable_eager_execution()


def enable_eager_execution(*args, **kwargs):
    _eager_enabled[0] = True


def disable_eager_execution():
    _eager_enabled[0] = False


def eager_scope_name():
    """The eager name scope ("outer/inner/" or ""): prefixes eager variables' names."""
    return getattr(_state, "scope", "")


class name_scope:  # noqa: N801 (TF's name)
    """``tf.name_scope`` (TF 2): a reusable context manager whose ``__enter__``
    returns the scope name. Eager scopes nest without being made unique, as in
    TF; in a graph the graph's own (uniquifying) scopes are used. A name
    ending in "/" re-enters that absolute scope."""

    def __init__(self, name):
        if not isinstance(name, str):
            raise ValueError("name for name_scope must be a string.")
        self._name = name
        self._exits = []

    @property
    def name(self):
        return self._name

    def __enter__(self):
        if executing_eagerly():
            old = eager_scope_name()
            name = self._name
            _state.scope = "" if not name else name if name.endswith("/") else old + name + "/"
            self._exits.append(lambda: setattr(_state, "scope", old))
            return _state.scope
        scope = get_default_graph().name_scope(self._name)
        entered = scope.__enter__()
        self._exits.append(lambda: scope.__exit__(None, None, None))
        return entered

    def __exit__(self, *exc):
        self._exits.pop()()
        return False
