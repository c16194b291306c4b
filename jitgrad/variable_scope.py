"""``tf.compat.v1.variable_scope`` / ``get_variable`` and the v1 initializers: TF 1's sharing of
variables by name. Each graph keeps the variables ``get_variable`` made by their full names; a
scope prefixes its name to the variables (and, as a name scope, the ops) created in it and says
whether ``get_variable`` makes a new variable or returns the existing one. Eagerly there is no
sharing: each call makes a variable, as TF 2 does outside an EagerVariableStore.

Loaded on first use (it builds on Keras's initializers, which ``import jitgrad`` does not load)."""
import contextlib
import threading

from . import context, dtypes
from .convert import is_tensorlike
from .keras import initializers as keras_initializers
from .ops import random_ops
from .variables import Variable

AUTO_REUSE = "AUTO_REUSE"
REGULARIZATION_LOSSES = "regularization_losses"
_scopes = threading.local()


class VariableScope:
    def __init__(self, name, reuse=False, initializer=None, regularizer=None, dtype=None):
        self.name, self.reuse, self.initializer, self.regularizer = name, reuse, initializer, regularizer
        self.dtype = dtypes.float32 if dtype is None else dtypes.as_dtype(dtype)

    @property
    def original_name_scope(self):
        return self.name + "/" if self.name else ""

    def reuse_variables(self):
        self.reuse = True

    def set_initializer(self, initializer):
        self.initializer = initializer


def _stack():
    if not hasattr(_scopes, "stack"):
        _scopes.stack = [VariableScope("")]
    return _scopes.stack


def get_variable_scope():
    return _stack()[-1]


def _graph_store(graph):
    """The graph's get_variable variables by full name (kept on the graph: one per graph)."""
    if not hasattr(graph, "_v1_variables"):
        graph._v1_variables = {}
    return graph._v1_variables


class variable_scope:  # noqa: N801 - TF's name
    """TF 1's: a reuse of True or AUTO_REUSE is inherited by inner scopes (an inner False does not
    undo it); re-entering a VariableScope object takes its name, and its settings by default. A
    class, not a generator, so that a scope entered by hand stays entered."""

    def __init__(self, name_or_scope, default_name=None, values=None, initializer=None, regularizer=None,
                 caching_device=None, partitioner=None, custom_getter=None, reuse=None, dtype=None,
                 use_resource=None, constraint=None, auxiliary_name_scope=True):
        if name_or_scope is None and default_name is None:
            raise TypeError("If default_name is None then name_or_scope is required")
        if not isinstance(name_or_scope, (VariableScope, str, type(None))):
            raise TypeError(f"VariableScope: name_or_scope must be a string or VariableScope, got "
                            f"{type(name_or_scope).__name__}.")
        self._name_or_scope, self._default_name, self._reuse = name_or_scope, default_name, reuse
        self._initializer, self._regularizer, self._dtype = initializer, regularizer, dtype
        self._auxiliary_name_scope = auxiliary_name_scope

    def __enter__(self):
        parent = get_variable_scope()
        if isinstance(self._name_or_scope, VariableScope):
            base, name = self._name_or_scope, self._name_or_scope.name
        else:
            base = parent
            local = self._name_or_scope
            if local is None:
                local = _unique_default(parent, self._default_name)
            name = f"{parent.name}/{local}" if parent.name else local
        inherited = parent.reuse if parent.reuse in (True, AUTO_REUSE) else base.reuse
        scope = VariableScope(name, reuse=inherited if self._reuse in (None, False) else self._reuse,
                              initializer=base.initializer if self._initializer is None else self._initializer,
                              regularizer=base.regularizer if self._regularizer is None else self._regularizer,
                              dtype=base.dtype if self._dtype is None else self._dtype)
        self._names = (contextlib.nullcontext() if context.executing_eagerly() or not self._auxiliary_name_scope
                       else context.get_default_graph().name_scope(name.rsplit("/", 1)[-1]))
        self._names.__enter__()
        _stack().append(scope)
        return scope

    def __exit__(self, *exc):
        _stack().pop()
        return self._names.__exit__(*exc)


def _unique_default(parent, default_name):
    counts = getattr(_scopes, "defaults", {})
    _scopes.defaults = counts
    key = (id(context.get_default_graph()), parent.name, default_name)
    n = counts.get(key, 0)
    counts[key] = n + 1
    return default_name if n == 0 else f"{default_name}_{n}"


def get_variable(name, shape=None, dtype=None, initializer=None, regularizer=None, trainable=None, collections=None,
                 caching_device=None, partitioner=None, validate_shape=True, use_resource=None, custom_getter=None,
                 constraint=None, synchronization=None, aggregation=None):
    if _is_constant(initializer) and shape is not None:
        raise ValueError("If initializer is a constant, do not specify shape.")
    scope = get_variable_scope()
    full_name = f"{scope.name}/{name}" if scope.name else name
    eager = context.executing_eagerly()
    store = None if eager else _graph_store(context.get_default_graph())
    existing = None if store is None else store.get(full_name)
    if existing is not None:
        if scope.reuse is False:
            raise ValueError(f"Variable {full_name} already exists, disallowed. Did you mean to set reuse=True or "
                             f"reuse=tf.AUTO_REUSE in VarScope?")
        if shape is not None and not existing.shape.is_compatible_with(shape):
            raise ValueError(f"Trying to share variable {full_name}, but specified shape {list(shape)} and found "
                             f"shape {existing.shape}.")
        if dtype is not None and dtypes.as_dtype(dtype) != existing.dtype:
            raise ValueError(f"Trying to share variable {full_name}, but specified dtype {dtypes.as_dtype(dtype).name}"
                             f" and found dtype {existing.dtype.name}.")
        return existing
    if scope.reuse is True and not eager:
        raise ValueError(f"Variable {full_name} does not exist, or was not created with tf.get_variable(). Did you "
                         f"mean to set reuse=tf.AUTO_REUSE in VarScope?")
    dtype = dtypes.as_dtype(dtype) if dtype is not None else scope.dtype
    initial_value = _initial_value(full_name, shape, dtype, scope.initializer if initializer is None else initializer)
    if eager:
        var = Variable(initial_value, name=full_name, trainable=trainable, dtype=dtype, constraint=constraint)
    else:
        graph = context.get_default_graph()
        with graph.name_scope(None):        # the full name, whatever name scope is open
            var = Variable(initial_value, name=full_name, trainable=trainable, dtype=dtype, constraint=constraint)
        store[full_name] = var
        regularizer = scope.regularizer if regularizer is None else regularizer
        if regularizer is not None:
            loss = regularizer(var)
            if loss is not None:
                graph.add_to_collection(REGULARIZATION_LOSSES, loss)
    return var


def _is_constant(initializer):
    return initializer is not None and (is_tensorlike(initializer) or not callable(initializer))


def _initial_value(full_name, shape, dtype, initializer):
    if _is_constant(initializer):
        if shape is not None:
            raise ValueError("If initializer is a constant, do not specify shape.")
        return initializer
    if shape is None or any(d is None for d in shape):
        raise ValueError(f"Shape of a new variable ({full_name}) must be fully defined, but instead was {shape}.")
    if initializer is None:
        # TF 1's default: glorot_uniform for floats, zeros for integers and bools
        if dtype.is_floating:
            initializer = glorot_uniform_initializer()
        elif dtype.is_integer or dtype == dtypes.bool_:
            initializer = zeros_initializer()
        else:
            raise ValueError(f"An initializer for variable {full_name} of {dtype.name} is required")
    shape = [int(d) for d in shape]
    return lambda: initializer(shape, dtype=dtype)


class _V1Initializer:
    """A v1 initializer: called with (shape, dtype=None, partition_info=None), its dtype the
    constructor's unless the call gives one; draws come from the Keras initializer it wraps."""

    def __init__(self, keras_initializer, dtype=dtypes.float32):
        self._initializer, self.dtype = keras_initializer, dtypes.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        return self._initializer(shape, dtype=dtypes.as_dtype(dtype or self.dtype))


def zeros_initializer(dtype=dtypes.float32):
    return _V1Initializer(keras_initializers.Zeros(), dtype)


def ones_initializer(dtype=dtypes.float32):
    return _V1Initializer(keras_initializers.Ones(), dtype)


def constant_initializer(value=0, dtype=dtypes.float32, verify_shape=False):
    return _V1Initializer(keras_initializers.Constant(value), dtype)


class _V1RandomInitializer(_V1Initializer):
    """TF 1's init_ops: each call is a stateful tf.random op under ``seed`` (get_seed's rules:
    an unseeded one takes its graph's next op seed), so its draws are TF's."""

    def __init__(self, draw, dtype=dtypes.float32):
        self._draw, self.dtype = draw, dtypes.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        return self._draw([int(d) for d in shape], dtypes.as_dtype(dtype or self.dtype))


def random_normal_initializer(mean=0.0, stddev=1.0, seed=None, dtype=dtypes.float32):
    return _V1RandomInitializer(lambda shape, dt: random_ops.normal(shape, mean, stddev, dt, seed=seed), dtype)


def truncated_normal_initializer(mean=0.0, stddev=1.0, seed=None, dtype=dtypes.float32):
    return _V1RandomInitializer(lambda shape, dt: random_ops.truncated_normal(shape, mean, stddev, dt, seed=seed),
                                dtype)


def random_uniform_initializer(minval=0.0, maxval=None, seed=None, dtype=dtypes.float32):
    return _V1RandomInitializer(lambda shape, dt: random_ops.uniform(shape, minval, maxval, dt, seed=seed), dtype)


def variance_scaling_initializer(scale=1.0, mode="fan_in", distribution="truncated_normal", seed=None,
                                 dtype=dtypes.float32):
    # Keras's VarianceScaling checks the arguments and scales (TF 1's shares both); its draws
    # are TF 1's stateful ops under ``seed`` (seed=0 only keeps it from taking a Keras seed)
    scaling = keras_initializers.VarianceScaling(scale, mode, distribution, seed=0)
    return _V1RandomInitializer(lambda shape, dt: scaling.draw(shape, dt, random_ops, seed), dtype)


def glorot_uniform_initializer(seed=None, dtype=dtypes.float32):
    return variance_scaling_initializer(1.0, "fan_avg", "uniform", seed, dtype)


def glorot_normal_initializer(seed=None, dtype=dtypes.float32):
    return variance_scaling_initializer(1.0, "fan_avg", "truncated_normal", seed, dtype)
