"""``tf.keras`` core: layers, Sequential / Model (compile, fit, evaluate, predict),
losses, metrics, activations, initializers, callbacks; ``tf.keras.optimizers`` is the
``jitgrad.optimizers`` module object jitgrad/__init__.py makes (this package is imported after
it, also when an import of one of its modules comes first)."""
import types as _types

from .. import optimizers  # noqa: F401

from . import activations, callbacks, constraints, initializers, layers, losses, metrics, regularizers, utils  # noqa: F401
from . import seed_generator
from .functional import Input, KerasTensor  # noqa: F401
from .layers import Layer  # noqa: F401
from .names import clear_session
from .models import Model, Sequential

from . import serialization as _serialization
from .saving import clone_model, load_model, model_from_json, save_model

_serialization.NAMESPACES.update({"keras.layers": [layers], "keras": [_types.SimpleNamespace(
    Model=Model, Sequential=Sequential), layers], "keras.models": [_types.SimpleNamespace(
        Model=Model, Sequential=Sequential)]})

models = _types.ModuleType("jitgrad.keras.models")
models.Model, models.Sequential = Model, Sequential
models.load_model, models.save_model, models.clone_model, models.model_from_json = (
    load_model, save_model, clone_model, model_from_json)
utils.register_keras_serializable = _serialization.register_keras_serializable
utils.custom_object_scope = _serialization.custom_object_scope
utils.serialize_keras_object = _serialization.serialize_keras_object
utils.deserialize_keras_object = _serialization.deserialize_keras_object
random = _types.ModuleType("jitgrad.keras.random")
random.SeedGenerator, random.uniform, random.normal, random.truncated_normal, random.dropout = (
    seed_generator.SeedGenerator, seed_generator.uniform, seed_generator.normal, seed_generator.truncated_normal,
    seed_generator.dropout)
backend = _types.ModuleType("jitgrad.keras.backend")
backend.clear_session = clear_session
__all__ = ["Layer", "Model", "Sequential", "Input", "layers", "models", "losses", "metrics", "activations",
           "initializers", "callbacks", "backend", "regularizers", "constraints", "random"]
