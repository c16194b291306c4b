"""``tf.keras`` core: layers, Sequential / Model (compile, fit, evaluate, predict),
losses, metrics, activations, initializers, callbacks; ``tf.keras.optimizers`` is the
``jitgrad.optimizers`` module object jitgrad/__init__.py makes (this package is imported after
it, also when an import of one of its modules comes first)."""
import types as _types

from .. import optimizers  # noqa: F401

from . import activations, callbacks, constraints, initializers, layers, losses, metrics, regularizers, utils  # noqa: F401
from .functional import Input, KerasTensor  # noqa: F401
from .layers import Layer  # noqa: F401
from .names import clear_session
from .models import Model, Sequential

models = _types.ModuleType("jitgrad.keras.models")
models.Model, models.Sequential = Model, Sequential
backend = _types.ModuleType("jitgrad.keras.backend")
backend.clear_session = clear_session
__all__ = ["Layer", "Model", "Sequential", "Input", "layers", "models", "losses", "metrics", "activations",
           "initializers", "callbacks", "backend", "regularizers", "constraints"]
