"""Keras 3's object serialization: ``serialize_keras_object`` gives the JSON-able dict
``{"module", "class_name", "config", "registered_name"}`` a ``.keras`` file's config.json
holds, ``deserialize_keras_object`` makes the object again, looking classes up in
``custom_objects``, in what ``register_keras_serializable`` registered, then in jitgrad's
keras modules (an unknown class is Keras's TypeError).

Layers record their constructor's arguments (``Layer.get_config``); other objects (optimizers,
initializers, losses, metrics) without a get_config of their own give the attributes named
like their constructor's parameters."""
import contextlib
import inspect
import threading

import numpy as np

from .. import dtypes, keras_optimizers, learning_rate_schedules, optimizers
from . import activations, constraints, initializers, losses, metrics, regularizers

_REGISTERED = {}         # "package>Name" -> class or function
_REGISTERED_NAMES = {}   # class or function -> "package>Name"
_scope = threading.local()
# Keras 3's module names -> where jitgrad has those classes (keras.layers and keras (models)
# are filled in by jitgrad/keras/__init__.py: they import this module)
NAMESPACES = {"keras.initializers": [initializers], "keras.regularizers": [regularizers],
              "keras.constraints": [constraints], "keras.losses": [losses], "keras.metrics": [metrics],
              "keras.optimizers": [optimizers, keras_optimizers],
              "keras.optimizers.schedules": [learning_rate_schedules], "keras.activations": [activations]}


def register_keras_serializable(package="Custom", name=None):
    """``keras.saving.register_keras_serializable``: a decorator making a class (or function)
    known to deserialization as ``package>name``."""
    def decorate(obj):
        registered = f"{package}>{name or obj.__name__}"
        if inspect.isclass(obj) and not hasattr(obj, "get_config"):
            raise ValueError("Cannot register a class that does not have a get_config() method.")
        _REGISTERED[registered] = obj
        _REGISTERED_NAMES[obj] = registered
        return obj
    return decorate


def get_registered_name(obj):
    return _REGISTERED_NAMES.get(obj, obj.__name__)


@contextlib.contextmanager
def custom_object_scope(custom_objects):
    """Names the deserialization looks up first (``keras.saving.custom_object_scope``)."""
    stack = _scope.__dict__.setdefault("stack", [])
    stack.append(dict(custom_objects or {}))
    try:
        yield
    finally:
        stack.pop()


def _custom_objects():
    out = {}
    for objects in getattr(_scope, "stack", ()):
        out.update(objects)
    return out


def config_from_attributes(obj):
    """The constructor's parameters read back from the attributes of the same names (how this
    package's optimizers, initializers, losses and metrics keep them)."""
    params = inspect.signature(type(obj).__init__).parameters
    config = {}
    for name, p in params.items():
        if name == "self" or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if name in obj.__dict__:
            config[name] = obj.__dict__[name]
        elif hasattr(type(obj), name) and not callable(getattr(type(obj), name)):
            config[name] = getattr(obj, name)
        elif p.default is inspect.Parameter.empty:
            raise NotImplementedError(f"jitgrad cannot find the `{name}` argument of {type(obj).__name__} to "
                                      "serialize it: give the class a get_config().")
    return config


def _builtin_module(obj):
    """Keras 3's module name for jitgrad's own classes (None for a user's)."""
    module = type(obj).__module__ if not inspect.isfunction(obj) else obj.__module__
    if not module.startswith("jitgrad."):
        return None
    for part, name in (("keras.initializers", "keras.initializers"), ("keras.regularizers", "keras.regularizers"),
                       ("keras.constraints", "keras.constraints"), ("keras.losses", "keras.losses"),
                       ("keras.metrics", "keras.metrics"), ("keras.activations", "keras.activations"),
                       ("learning_rate_schedules", "keras.optimizers.schedules"),
                       ("optimizers", "keras.optimizers"), ("keras_optimizers", "keras.optimizers"),
                       ("keras.models", "keras"), ("keras.", "keras.layers")):
        if module.startswith("jitgrad." + part):
            return name
    return None


def _serialize_function(fn):
    for table in (activations._BY_NAME, losses._BY_NAME):
        for name, value in table.items():
            if value is fn and _builtin_module(fn):
                return name
    if fn.__name__ == "<lambda>":
        raise NotImplementedError("jitgrad cannot serialize a Python lambda (Keras 3 saves its bytecode): use a "
                                  "named function, and pass it in `custom_objects` (or register it) to load.")
    return {"module": fn.__module__, "class_name": "function", "config": fn.__name__,
            "registered_name": get_registered_name(fn)}


def serialize_keras_object(obj):
    """A JSON-able form of ``obj`` (Keras 3's layout for objects with a config)."""
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, dtypes.DType):
        return obj.name
    if isinstance(obj, (list, tuple)):
        return [serialize_keras_object(x) for x in obj]
    if isinstance(obj, dict):
        return {str(k): serialize_keras_object(v) for k, v in obj.items()}
    if inspect.isfunction(obj) or inspect.isbuiltin(obj):
        return _serialize_function(obj)
    if not inspect.isclass(obj):
        config = _config_of(obj)
        builtin = _builtin_module(obj)
        out = {"module": builtin or type(obj).__module__, "class_name": _class_name(obj),
               "config": serialize_keras_object(config),
               "registered_name": None if builtin else get_registered_name(type(obj))}
        build_config = getattr(obj, "get_build_config", lambda: None)()
        if build_config is not None:
            out["build_config"] = serialize_keras_object(build_config)
        return out
    raise TypeError(f"Cannot serialize object {obj!r} of type {type(obj)}.")


def _config_of(obj):
    if isinstance(obj, initializers.Initializer) and type(obj).get_config is initializers.Initializer.get_config:
        return config_from_attributes(obj)      # (the base's get_config gives {})
    if hasattr(obj, "get_config"):
        return obj.get_config()
    if hasattr(obj, "_constructor_arguments"):
        return obj._constructor_arguments()
    return config_from_attributes(obj)


def _class_name(obj):
    # a model made from inputs and outputs is Keras 3's Functional
    if getattr(obj, "_functional", False) and type(obj).__name__ == "Model" and _builtin_module(obj):
        return "Functional"
    return type(obj).__name__


def _locate(config, module_objects=None):
    class_name, registered = config.get("class_name"), config.get("registered_name")
    if class_name == "function":
        registered, class_name = registered or config.get("config"), config.get("config")
    custom = _custom_objects()
    for key in (registered, class_name):
        if key in custom:
            return custom[key]
    for key in (registered, class_name):
        if key in _REGISTERED:
            return _REGISTERED[key]
    found = _builtin(class_name, config.get("module"))
    if found is not None:
        return found
    raise TypeError(f"Could not locate class '{class_name}'. Make sure custom classes and functions are decorated "
                    "with `@keras.saving.register_keras_serializable()`. If they are already decorated, make sure "
                    "they are all imported so that the decorator is run before trying to load them. Full object "
                    f"config: {config}")


def _builtin(class_name, module):
    if class_name == "Functional":
        class_name = "Model"
    everywhere = [namespace for namespaces in NAMESPACES.values() for namespace in namespaces]
    for namespace in NAMESPACES.get(module) or everywhere:
        found = getattr(namespace, class_name, None)
        if found is not None and (inspect.isclass(found) or callable(found)):
            return found
    return None


def deserialize_keras_object(config, custom_objects=None):
    """The object ``serialize_keras_object`` described (plain values as they are)."""
    with custom_object_scope(custom_objects):
        return deserialize_value(config)


def deserialize_value(config):
    """``deserialize_keras_object`` in the custom-object scope in force (lists and plain dicts
    element by element, other values as they are)."""
    if isinstance(config, list):
        return [deserialize_value(x) for x in config]
    if not isinstance(config, dict):
        return config
    if "class_name" not in config or "config" not in config:
        return {k: deserialize_value(v) for k, v in config.items()}
    if config["class_name"] == "DTypePolicy":
        return config["config"]["name"]
    cls = _locate(config)
    if config["class_name"] == "function" or not inspect.isclass(cls):
        return cls
    inner = config["config"]
    obj = cls.from_config(inner) if hasattr(cls, "from_config") else \
        cls(**{k: deserialize_value(v) for k, v in inner.items()})
    shape = (config.get("build_config") or {}).get("input_shape")
    if shape is not None and getattr(obj, "built", True) is False and hasattr(obj, "compile"):
        obj.build(tuple(shape))       # a model (subclassed, ...) built as it was, so its weights exist
    return obj


def deserialize_config_values(config):
    """A config's values made objects again (nested layers, initializers, ...)."""
    return {k: deserialize_value(v) for k, v in config.items()}
