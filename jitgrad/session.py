"""``tf.compat.v1.Session``: runs fetches of a graph, through the compiler
(default) or the reference interpreter."""
import collections
import os
import threading
import warnings

import numpy as np

from . import context, dispatch, dtypes, nest
from .eager import EagerTensor
from .graph import Graph, Operation, Tensor, _Reference
from .ops.random_ops import ACTIVE as _ACTIVE_RANDOM
from .ops.state_ops import VariableStore
from .convert import string_array
from .indexed_slices import IndexedSlices, IndexedSlicesValue
from .sparse_tensor import SparseTensor, SparseTensorValue, sparse_components

MODES = ("compiled", "interpret")
_default_mode = [os.environ.get("JITGRAD_MODE", "compiled")]
_session_stack = threading.local()


def set_default_mode(mode):
    """Execution mode for Sessions created afterwards: 'compiled' or 'interpret'."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    _default_mode[0] = mode


def get_default_mode():
    return _default_mode[0]


class ConfigProto:
    """Accepts TF's ConfigProto fields (ignored: there are no devices to place
    ops on) plus ``jitgrad_mode`` = 'compiled' | 'interpret' and
    ``jitgrad_target_cpu`` / ``jitgrad_target_features``: the LLVM CPU name and
    feature string to generate code for (default: the host; see
    jitgrad/codegen/target.py)."""

    def __init__(self, jitgrad_mode=None, jitgrad_target_cpu=None, jitgrad_target_features=None, **kwargs):
        self.jitgrad_mode = jitgrad_mode
        self.jitgrad_target_cpu = jitgrad_target_cpu
        self.jitgrad_target_features = jitgrad_target_features
        self.__dict__.update(kwargs)


def _target_from_config(config):
    """(cpu, features) a Session generates code for, or None (the environment's choice).
    An unknown CPU or malformed feature string raises ValueError here."""
    if isinstance(config, dict):
        cpu, feats = config.get("jitgrad_target_cpu"), config.get("jitgrad_target_features")
    else:
        cpu = getattr(config, "jitgrad_target_cpu", None)
        feats = getattr(config, "jitgrad_target_features", None)
    if cpu is None and feats is None:
        return None
    from .codegen import target
    target.get(cpu, feats)          # validates now rather than at the first run
    return (cpu or "", feats or "")


def _mode_from_config(config):
    mode = None
    if isinstance(config, dict):
        mode = config.get("jitgrad_mode", config.get("mode"))
    elif config is not None:
        mode = getattr(config, "jitgrad_mode", None)
    mode = mode or _default_mode[0]
    if mode not in MODES:
        raise ValueError(f"jitgrad_mode must be one of {MODES}, got {mode!r}")
    return mode


# ---------------------------------------------------------------- fetch structure
class _FetchPlan:
    """The graph elements of a fetch structure (nest's order) and how to rebuild it from
    their values: TF's fetch structures are nest's (lists, tuples, namedtuples, dicts)."""

    def __init__(self, graph, fetches):
        flat = nest.flatten(fetches)
        if any(isinstance(f, (SparseTensor, IndexedSlices)) for f in flat):
            self._with_composites(graph, fetches, flat)
            return
        self.elements = [_as_element(graph, f, "Fetch") for f in flat]
        if not nest.is_nested(fetches):
            self.build = _first
        elif (type(fetches) is list or type(fetches) is tuple) and not any(map(nest.is_nested, fetches)):
            self.build = type(fetches)     # a flat list or tuple (the common case) needs no walk
        else:
            self.build = lambda vals: nest.pack_sequence_as(fetches, vals)

    def _with_composites(self, graph, fetches, flat):
        """SparseTensor fetches (their indices, values and dense_shape) and IndexedSlices ones
        (a gather's gradient: values, indices and dense_shape if it has one) are their
        components fetched, given back as a SparseTensorValue / IndexedSlicesValue, as TF's
        Session does."""
        self.elements, spans = [], []
        for f in flat:
            if isinstance(f, SparseTensor):
                parts, make = [f.indices, f.values, f.dense_shape], SparseTensorValue
            elif isinstance(f, IndexedSlices):
                parts = [f.values, f.indices] + ([f.dense_shape] if f.dense_shape is not None else [])
                make = IndexedSlicesValue if f.dense_shape is not None else \
                    (lambda values, indices: IndexedSlicesValue(values, indices, None))
            else:
                parts, make = [f], None
            spans.append((len(self.elements), len(parts), make))
            self.elements += [_as_element(graph, p, "Fetch") for p in parts]

        def build(vals):
            leaves = [make(*vals[at:at + n]) if make is not None else vals[at] for at, n, make in spans]
            return nest.pack_sequence_as(fetches, leaves) if nest.is_nested(fetches) else leaves[0]
        self.build = build


def _first(vals):
    return vals[0]


def _as_element(graph, f, what):
    if f is None:
        raise TypeError(f"{what} argument None has invalid type <class 'NoneType'>")
    conv = getattr(f, "_graph_tensor", None)
    if conv is not None:
        f = conv()
    if isinstance(f, str):
        try:
            return graph.as_graph_element(f)
        except KeyError as e:
            if what == "Feed":      # TF: a feed_dict key naming nothing is a TypeError
                raise TypeError(f"Cannot interpret feed_dict key as Tensor: {e.args[0]}") from None
            raise ValueError(f"{what} argument {f!r} cannot be interpreted as a Tensor. ({e.args[0]})") from None
    if isinstance(f, (Tensor, Operation)):
        if f.graph is not graph:
            raise ValueError(f"{what} argument {f!r} cannot be interpreted as a Tensor. "
                             f"(Tensor {f!r} is not an element of this graph.)")
        return f
    raise TypeError(f"{what} argument {f!r} has invalid type {type(f)}, must be a string or Tensor. "
                    "(Can not convert a {0} into a Tensor or Operation.)".format(type(f).__name__))


def _cast(src, np_dtype):
    """numpy's cast of a feed to the placeholder's dtype, as TF's Session does (np.asarray(v).astype):
    floats truncate toward zero (NaN and out-of-range values give what numpy gives), a complex
    value drops its imaginary part, a numeric string is parsed (another is numpy's ValueError)."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
        return src.astype(np_dtype, order="C")


def feed_array(t, value):
    """A feed value as an ndarray of t's dtype, checked against t's static shape."""
    if value is None:
        raise TypeError(f"The value of a feed cannot be a tf.Tensor object or None (feed for {t.name}).")
    if isinstance(value, Tensor):
        raise TypeError("The value of a feed cannot be a tf.Tensor object. Acceptable feed values include "
                        "Python scalars, strings, lists, numpy ndarrays, or TensorHandles.")
    if isinstance(value, EagerTensor):
        value = value._value
    want = t.dtype
    if want.is_string:
        arr = string_array(value)
        if not t.shape.is_compatible_with(arr.shape):
            raise ValueError(f"Cannot feed value of shape {arr.shape} for Tensor {t.name}, which has shape {t.shape}")
        return arr
    if isinstance(value, int) and _cast(np.array(value), want.np) != value:
        raise TypeError(f"Type of feed value {value} with type {type(value)} is not compatible with Tensor type "
                        f"{want.np.type}. Try explicitly setting the type of the feed tensor to a larger type "
                        f"(e.g. int64).")
    src = np.asarray(value)
    if src.dtype == object:   # TF: numpy's float()/int() of the element raises TypeError
        raise TypeError(f"Cannot feed value of type {type(value).__name__} (an array of Python objects) for "
                        f"Tensor {t.name}, which has dtype {want.name}")
    arr = np.asarray(src, order="C") if src.dtype == want.np else _cast(src, want.np)
    if not t.shape.is_compatible_with(arr.shape):
        raise ValueError(f"Cannot feed value of shape {arr.shape} for Tensor {t.name}, which has shape {t.shape}")
    return arr


# ---------------------------------------------------------------- Session
class BaseSession:
    def __init__(self, target="", graph=None, config=None):
        self.graph = graph if graph is not None else context.get_default_graph()
        if not isinstance(self.graph, Graph):
            raise TypeError(f"graph must be a tf.Graph, but got {type(self.graph)}")
        self.mode = _mode_from_config(config)
        self._target = _target_from_config(config)
        self._closed = False
        self._store = VariableStore()
        self._ctx = []
        self._fetch_cache = {}
        self._plans = collections.OrderedDict()   # compiler plans (see compiler.execute)
        self._feed_checked = {}                   # (id(tensor), shape) -> tensor, feeds validated
        self._fast = {}                           # hot-path runners, see run()
        self._random_streams = {}                 # this Session's random op streams (ops/random_ops.py)

    # -- lifecycle
    def close(self):
        self._closed = True

    @property
    def closed(self):
        return self._closed

    def __enter__(self):
        g_ctx = self.graph.as_default()
        g_ctx.__enter__()
        self._ctx.append(g_ctx)
        _stack().append(self)
        return self

    def __exit__(self, exc_type, exc, tb):
        _stack().pop()
        self._ctx.pop().__exit__(exc_type, exc, tb)
        self.close()
        return False

    def as_default(self):
        return _DefaultSession(self)

    # -- running
    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        # random ops draw from this Session's own streams: TF makes a graph's kernels per
        # Session, so a new Session on the graph restarts every random op's sequence (a
        # graph without random ops skips this: ~0.25 us of W1's 2.2)
        if not self.graph.draws_per_session:
            return self._run(fetches, feed_dict)
        before = getattr(_ACTIVE_RANDOM, "streams", None)
        _ACTIVE_RANDOM.streams = self._random_streams
        try:
            return self._run(fetches, feed_dict)
        finally:
            _ACTIVE_RANDOM.streams = before

    def _run(self, fetches, feed_dict):
        if self._closed:
            raise RuntimeError("Attempted to use a closed Session.")
        # Hot path: a runner generated for this (fetch structure, fetch ids,
        # feed ids) once its plan has been used twice (jitgrad.fast_runner.make_runner).
        # fk is runner_key(fetches, feed_dict), inline: this is every run's cost.
        # The runner holds the fetched and fed tensors, so their ids cannot be reused.
        # One flat tuple, fetch ids then None then feed ids: a nested key cost W1 a third more.
        t = type(fetches)
        fk = None
        if t is list or t is tuple:
            if not feed_dict:
                fk = (t, *map(id, fetches))
            elif type(feed_dict) is dict:
                fk = (t, *map(id, fetches), None, *map(id, feed_dict))
        elif t is Tensor or t is Operation:
            if not feed_dict:
                fk = id(fetches)
            elif type(feed_dict) is dict:
                fk = (id(fetches), None, *map(id, feed_dict))
        if fk is not None:
            runner = self._fast.get(fk)
            if runner is not None:
                r = runner(*feed_dict.values()) if feed_dict else runner()
                if r is not FAST_MISS:
                    return r
        plan = self._fetch_plan(fetches)
        fed = self._fed_list(feed_dict)
        if self.mode == "interpret" or dispatch.compiled_execute is None:
            from . import interpreter
            values = interpreter.run(plan.elements, {id(t): v for t, v in fed}, self._store)
        else:
            if self._target is None:
                values = dispatch.compiled_execute(self, plan.elements, fed)
            else:
                from .codegen.target import using
                with using(self._target):
                    values = dispatch.compiled_execute(self, plan.elements, fed)
            if fk is not None and dispatch.make_runner is not None:
                self._install_runner(fk, t, fetches, plan.elements, fed, feed_dict)
        return plan.build([None if v is None else (v[()] if v.ndim == 0 else v) for v in values])

    def _install_runner(self, fk, t, fetches, elements, fed, feed_dict):
        if not elements or (feed_dict and any(type(k) is not Tensor and not (
                type(k) is _Reference and type(k._obj) is Tensor and k._obj._ref is k) for k in feed_dict)):
            return      # a key must live as long as its tensor (a ref: the tensor's own), its id is the key
        if t is list or t is tuple:
            if any(type(e) is not Tensor and type(e) is not Operation for e in fetches):
                return
            struct = t
        else:
            struct = None
        runner = dispatch.make_runner(self, elements, fed, struct)
        if runner is not None:
            if len(self._fast) >= 1024:
                self._fast.clear()
            self._fast[fk] = runner

    def explain(self, fetches, feed_dict=None):
        """A report of how ``run(fetches, feed_dict)`` is compiled: pass stats,
        fused loop nests, buffers, LLVM IR, assembly, compile time, and
        whether the kernel came from memory, disk or a fresh compile."""
        from . import kernel_explain
        from .codegen.target import using
        plan = self._fetch_plan(fetches)
        with using(self._target):
            return kernel_explain.explain(self, plan.elements, self._fed_list(feed_dict))

    def _fetch_plan(self, fetches):
        t = type(fetches)
        key = None
        if t is Tensor or t is Operation:
            key = id(fetches)
        elif t is list or t is tuple:
            ids = []
            for x in fetches:
                tx = type(x)
                if tx is not Tensor and tx is not Operation:
                    ids = None
                    break
                ids.append(id(x))
            if ids is not None:
                key = (t, tuple(ids))
        if key is not None:
            hit = self._fetch_cache.get(key)
            if hit is not None:
                return hit[0]
        plan = _FetchPlan(self.graph, fetches)
        if key is not None:
            if len(self._fetch_cache) > 1024:
                self._fetch_cache.clear()
            self._fetch_cache[key] = (plan, fetches)   # holding fetches keeps the ids valid
        return plan

    def _fed_list(self, feed_dict):
        """[(tensor, ndarray)] in feed_dict order, validated as TF does."""
        if not feed_dict:
            return []
        if type(feed_dict) is not dict and not isinstance(feed_dict, collections.abc.Mapping):
            raise TypeError(f"feed_dict must be a dictionary mapping tensors to values, got "
                            f"{type(feed_dict).__name__}")
        if any(isinstance(k, SparseTensor) for k in feed_dict):
            return self._fed_list(_sparse_feeds_split(feed_dict))
        fed = []
        checked = self._feed_checked
        for key, value in feed_dict.items():
            if type(key) is _Reference:   # tensors of traced functions are unhashable: fed by ref()
                key = key._obj
            tv = type(value)
            if type(key) is Tensor:
                if tv is float or tv is int:
                    want = key.dtype.np
                    if want.kind == "f" or (tv is int and want.kind in "iu"):
                        try:
                            arr = np.array(value, want)
                        except OverflowError:       # an int the dtype cannot hold: feed_array's TypeError
                            arr = None
                        if arr is not None and (tv is float or arr == value) and (id(key), ()) in checked:
                            fed.append((key, arr))
                            continue
                elif tv is np.ndarray and value.dtype == key.dtype.np and value.flags.c_contiguous:
                    if (id(key), value.shape) in checked:
                        fed.append((key, value))
                        continue
            if nest.is_nested(key):
                # TF: a nested tuple of tensors as key feeds the value of the same structure
                return self._fed_list(nest.flatten_dict_items(feed_dict))
            t = _as_element(self.graph, key, "Feed")
            if isinstance(t, Operation):
                raise TypeError(f"Cannot feed an Operation ({t.name}); feed one of its output tensors.")
            arr = feed_array(t, value)
            if len(checked) > 4096:
                checked.clear()
            checked[(id(t), arr.shape)] = t
            fed.append((t, arr))
        return fed

    def make_callable(self, fetches, feed_list=None, accept_options=False):
        feed_list = list(feed_list or [])
        n = len(feed_list)
        if type(fetches) is list or type(fetches) is tuple:
            fetches = type(fetches)(fetches)   # the structure as it is now, as TF does
        t = type(fetches)
        key = None
        if (t is list or t is tuple or t is Tensor or t is Operation) and \
                all(type(f) is Tensor for f in feed_list) and len({id(f) for f in feed_list}) == n:
            key = runner_key(fetches, feed_list)
        runner = [None]
        run, fast, streams, graph = self.run, self._fast, self._random_streams, self.graph

        def call(*args, **kwargs):
            if len(args) != n:
                raise ValueError(f"Expected {n} feed values, got {len(args)}")
            r = runner[0]
            if r is not None and not self._closed:
                if graph.draws_per_session:
                    before = getattr(_ACTIVE_RANDOM, "streams", None)
                    _ACTIVE_RANDOM.streams = streams      # (as run does)
                    try:
                        out = r(*args)
                    finally:
                        _ACTIVE_RANDOM.streams = before
                else:
                    out = r(*args)
                if out is not FAST_MISS:
                    return out
            out = run(fetches, dict(zip(feed_list, args)))
            if key is not None:
                runner[0] = fast.get(key)
            return out
        return call


def _sparse_feeds_split(feed_dict):
    """A feed of a SparseTensor (a sparse_placeholder) is a feed of each of its components
    from a SparseTensorValue or an (indices, values, dense_shape) tuple, as TF."""
    out = {}
    for key, value in feed_dict.items():
        if isinstance(key, SparseTensor):
            parts = sparse_components(value)
            out.update(zip((key.indices, key.values, key.dense_shape), parts))
        else:
            out[key] = value
    return out


def runner_key(fetches, feed_keys):
    """The key Session.run files a hot-path runner under (run() computes it inline): the
    fetch structure and fetch ids, then the feed keys' ids in feed order.  fetches: a
    list or tuple of Tensors/Operations, or one of them; callers hold fetches and feed
    keys for as long as they use the key, so the ids cannot be reused."""
    t = type(fetches)
    if t is list or t is tuple:
        return (t, *map(id, fetches), None, *map(id, feed_keys)) if feed_keys else (t, *map(id, fetches))
    return (id(fetches), None, *map(id, feed_keys)) if feed_keys else id(fetches)


class _Miss:
    __slots__ = ()

    def __repr__(self):
        return "FAST_MISS"


FAST_MISS = _Miss()   # a runner's "not mine: take the general path"


class Session(BaseSession):
    pass


class InteractiveSession(BaseSession):
    def __init__(self, target="", graph=None, config=None):
        super().__init__(target, graph, config)
        self.__enter__()

    def close(self):
        if not self._closed and _stack() and _stack()[-1] is self:
            _stack().pop()
            self._ctx.pop().__exit__(None, None, None)
        super().close()


def _stack():
    s = getattr(_session_stack, "stack", None)
    if s is None:
        s = _session_stack.stack = []
    return s


class _DefaultSession:
    def __init__(self, sess):
        self.sess = sess

    def __enter__(self):
        _stack().append(self.sess)
        return self.sess

    def __exit__(self, *exc):
        _stack().pop()
        return False


def get_default_session():
    s = _stack()
    return s[-1] if s else None


def default_session_for(graph, session=None):
    sess = session or get_default_session()
    if sess is None:
        raise ValueError("Cannot evaluate tensor using `eval()`: No default session is registered. Use "
                         "`with sess.as_default()` or pass an explicit session to `eval(session=sess)`")
    if sess.graph is not graph:
        raise ValueError("Cannot use the given session to evaluate tensor: the tensor's graph is different "
                         "from the session's graph.")
    return sess


dispatch.default_session_for = default_session_for
