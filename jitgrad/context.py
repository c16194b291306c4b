"""Execution context: eager vs graph building, and the default-graph stack.

As in TF 2, ops run eagerly unless a graph is being built: inside
``Graph.as_default()`` (or while ``jitgrad.function`` traces) they add nodes to
that graph instead. ``compat.v1.disable_eager_execution()`` makes the global
default graph the target everywhere, which is how TF1-style scripts run.
"""
import contextlib
import threading

_state = threading.local()
_eager_enabled = [True]
_global_graph = [None]
functions_run_eagerly = [False]   # tf.config.run_functions_eagerly (config.py)


def _stack():
    s = getattr(_state, "graphs", None)
    if s is None:
        s = _state.graphs = []
    return s


def global_default_graph():
    if _global_graph[0] is None:
        from .graph import Graph
        _global_graph[0] = Graph()
    return _global_graph[0]


def reset_global_default_graph():
    if _stack():
        raise AssertionError("Do not use tf.reset_default_graph() to clear nested graphs.")
    _global_graph[0] = None


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


def enable_eager_execution(*args, **kwargs):
    _eager_enabled[0] = True


def disable_eager_execution():
    _eager_enabled[0] = False
