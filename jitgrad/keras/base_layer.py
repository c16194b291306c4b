"""The Keras Layer base: build/call, add_weight, weights in creation order (a
frozen layer's trainable weights count as non-trainable, as do its sublayers'),
``trainable`` set on a layer sets it on its sublayers (Keras 3), ``training``
passed down to sublayers through a call-context stack."""
import contextlib
import inspect
import re
import threading
import warnings

import numpy as np

from .. import context, dtypes, nest
from ..convert import is_tensorlike, convert_to_tensor
from ..eager_variable import EagerVariable
from ..init_arguments import RecordsInitArguments
from ..module import Module
from ..ops import array_ops, math_ops
from ..variables import Variable
from . import constraints, initializers, regularizers
from .functional import KerasTensor, symbolic_call
from .masking import get_keras_mask, set_keras_mask
from .serialization import deserialize_config_values
from .names import unique_name

_call_context = threading.local()



def _snake_case(name):
    """Keras 3's default layer name (keras.src.utils.naming.to_snake_case): Conv2D -> conv2d,
    MaxPooling2D -> max_pooling2d (tf.Module's rule, module.camel_to_snake, gives conv2_d)."""
    name = re.sub(r"\W+", "", name)
    name = re.sub("(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub("([a-z])([A-Z])", r"\1_\2", name).lower()

class KerasVariable(EagerVariable):
    """A layer weight: ``name`` is the short name ('kernel'), ``path`` the full one
    ('sequential/dense/kernel'), as in Keras 3."""

    @property
    def path(self):
        return self._name[:-2]

    @property
    def name(self):
        return self.path.rsplit("/", 1)[-1]

    def __repr__(self):
        return f"<KerasVariable shape={self.shape.as_list()}, dtype={self.dtype.name}, path={self.path}>"


def _training_from_context():
    stack = getattr(_call_context, "training", None)
    return stack[-1] if stack else None


# a layer's own arguments that Keras 3 keeps out of its config (shape ones go to build_config)
_NOT_CONFIG = ("name", "trainable", "dtype", "input_shape", "input_dim", "batch_input_shape", "autocast")


class Layer(Module, RecordsInitArguments):
    def __init__(self, trainable=True, name=None, dtype=None, input_shape=None, input_dim=None,
                 activity_regularizer=None, **kwargs):
        if kwargs.pop("batch_input_shape", None) is not None:
            raise ValueError("jitgrad's Keras layers take `input_shape`, not `batch_input_shape`.")
        kwargs.pop("autocast", None)
        if kwargs:
            raise TypeError(f"Unrecognized keyword arguments passed to {type(self).__name__}: {kwargs}")
        name = name or unique_name(_snake_case(type(self).__name__))
        super().__init__(name=name)
        self.built = False
        self.trainable = trainable
        self.dtype = dtypes.as_dtype(dtype or dtypes.float32)
        self._trainable_own, self._non_trainable_own, self._sublayers = [], [], []
        self._added_losses, self._weight_regularizers = [], []
        self.activity_regularizer = regularizers.get(activity_regularizer)
        if input_dim is not None and input_shape is None:
            input_shape = (input_dim,)
        self._input_shape_arg = None if input_shape is None else tuple(input_shape)
        self._call_signature = inspect.signature(self.call)
        self._call_has_training = "training" in self._call_signature.parameters

    # ---------------------------------------------------------------- tracking
    def __setattr__(self, name, value):
        if not name.startswith("_") or name == "_layers":
            try:
                leaves = nest.flatten(value) if isinstance(value, (list, tuple, dict)) else [value]
            except TypeError:      # a dict with keys that do not sort: not searched for layers
                leaves = []
            for leaf in leaves:
                if isinstance(leaf, Layer) and leaf is not self and "_sublayers" in self.__dict__ \
                        and all(leaf is not s for s in self._sublayers):
                    self._sublayers.append(leaf)
        object.__setattr__(self, name, value)

    def add_weight(self, shape=None, initializer=None, dtype=None, trainable=True, name=None, regularizer=None,
                   constraint=None, **kwargs):
        """A weight of this layer, named inside its name scope, initialised by ``initializer``
        (default: glorot_uniform for floats, zeros otherwise)."""
        dt = dtypes.as_dtype(dtype or self.dtype)
        init = initializers.get(initializer if initializer is not None else
                                ("glorot_uniform" if dt.is_floating else "zeros"))
        shape = tuple(shape or ())
        with self._build_scope():
            var = Variable(lambda: init(shape, dt), trainable=trainable, name=name or "variable", dtype=dt,
                           constraint=constraints.get(constraint))
        if isinstance(var, EagerVariable):
            var.__class__ = KerasVariable
        (self._trainable_own if trainable else self._non_trainable_own).append(var)
        if regularizer is not None:
            self._weight_regularizers.append((var, regularizers.get(regularizer)))
        return var

    # ---------------------------------------------------------------- losses
    def add_loss(self, loss):
        """A loss of the current call (Keras 3: cleared when the outermost layer is called again)."""
        self._added_losses.append(loss)

    @property
    def losses(self):
        """Keras 3's: the losses added during the last call by this layer and its sublayers, then
        the weight regularizers' penalties on the trainable weights, computed now."""
        layers = self._layer_tree()
        added = [loss for layer in layers for loss in layer._added_losses]
        trainable = {id(w) for w in self.trainable_weights}
        return added + [regularizer(w) for layer in layers for w, regularizer in layer._weight_regularizers
                        if id(w) in trainable]

    def _layer_tree(self):
        out, seen = [], set()
        stack = [self]
        while stack:
            layer = stack.pop(0)
            if id(layer) not in seen:
                seen.add(id(layer))
                out.append(layer)
                stack.extend(layer.__dict__.get("_sublayers", ()))
        return out

    def _clear_losses(self):
        for layer in self._layer_tree():
            layer._added_losses.clear()

    def _build_scope(self):
        """The layer's name scope when ``build`` was called directly (outside any scope), so its
        weights are still named 'layer/weight' as Keras names them; else the scope in force."""
        return context.name_scope(self.name) if context.executing_eagerly() and not context.eager_scope_name() \
            else contextlib.nullcontext()

    @property
    def trainable(self):
        return self._trainable

    @trainable.setter
    def trainable(self, value):
        # Keras 3 sets it on every sublayer too: freezing a model freezes (and, for
        # BatchNormalization, switches to inference) the layers inside it
        object.__setattr__(self, "_trainable", bool(value))
        for layer in self.__dict__.get("_sublayers", ()):
            layer.trainable = value

    def _weights_and_flags(self):
        """(weight, trainable now) in Keras 3's order: the layer's own (trainable ones first,
        each group in creation order), then each sublayer's, each weight once. A weight is
        trainable now if made trainable and its layer is: freezing a layer reaches its own."""
        out, seen = [], set()
        own = [(w, self.trainable) for w in self._trainable_own] + [(w, False) for w in self._non_trainable_own]
        for w, flag in own + [pair for layer in self._sublayers for pair in layer._weights_and_flags()]:
            if id(w) not in seen:
                seen.add(id(w))
                out.append((w, flag))
        return out

    @property
    def weights(self):
        return [w for w, _ in self._weights_and_flags()]

    @property
    def trainable_weights(self):
        return [w for w, flag in self._weights_and_flags() if flag] if self.trainable else []

    @property
    def non_trainable_weights(self):
        return [w for w, flag in self._weights_and_flags() if not flag] if self.trainable else self.weights

    trainable_variables = trainable_weights
    non_trainable_variables = non_trainable_weights
    variables = weights

    @property
    def layers(self):
        return list(self._sublayers)

    def get_weights(self):
        return [w.numpy() for w in self.weights]

    def set_weights(self, weights):
        if len(weights) != len(self.weights):
            raise ValueError(f"You called `set_weights(weights)` on layer '{self.name}' with a weight list of "
                             f"length {len(weights)}, but the layer was expecting {len(self.weights)} weights.")
        for w, v in zip(self.weights, weights):
            w.assign(np.asarray(v, w.dtype.np))

    # ---------------------------------------------------------------- config
    def get_config(self):
        """Keras 3's: name, trainable, dtype (as a DTypePolicy), and the constructor's arguments
        (initializers, layers and other objects in them are serialized when saved)."""
        config = {"name": self.name, "trainable": self.trainable,
                  "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": self.dtype.name},
                            "registered_name": None}}
        own = inspect.signature(type(self).__init__).parameters
        for key, value in self._constructor_arguments().items():
            if key not in _NOT_CONFIG or (key in own and key not in ("name", "trainable", "dtype")):
                config[key] = value     # (Embedding's input_dim is its own argument, not a shape)
        return config

    @classmethod
    def from_config(cls, config):
        return cls(**deserialize_config_values(config))

    def get_build_config(self):
        shape = self.__dict__.get("_build_input_shape")
        return {"input_shape": list(shape)} if self.built and shape is not None else None

    def count_params(self):
        return int(sum(np.prod(w.shape.as_list(), dtype=np.int64) for w in self.weights))

    # ---------------------------------------------------------------- build / call
    def build(self, input_shape=None):
        self.built = True

    def call(self, inputs, *args, **kwargs):
        raise NotImplementedError(f"Layer {type(self).__name__} does not have a `call()` method implemented.")

    def compute_output_shape(self, input_shape):
        raise NotImplementedError

    # ---------------------------------------------------------------- masks
    @property
    def supports_masking(self):
        """Keras 3's default: a layer that overrides ``compute_mask`` supports masks; others say so
        (``_supports_masking = True`` on the class, or the setter)."""
        value = getattr(self, "_supports_masking", None)
        return type(self).compute_mask is not Layer.compute_mask if value is None else value

    @supports_masking.setter
    def supports_masking(self, value):
        object.__setattr__(self, "_supports_masking", bool(value))

    def compute_mask(self, inputs, previous_mask):
        return previous_mask

    def _populate_masks(self, inputs, rest, kwargs, mask_of=get_keras_mask):
        """Keras 3's rule: with one tensor argument, a ``mask`` parameter of ``call`` left None
        gets that argument's mask; with several, each ``<name>_mask`` parameter gets the mask of
        argument ``<name>``. Returns the mask the output's mask derives from. (``mask_of``: a
        tensor's mask; a functional model passes the masks fixed when it was built.)"""
        params = self._call_signature.parameters
        try:
            bound = self._call_signature.bind_partial(inputs, *rest, **kwargs).arguments
        except TypeError:
            bound = {}
        tensor_args = {name: value for name, value in bound.items() if name not in ("mask", "training")
                       and _is_tensor_argument(value)}
        if len(tensor_args) == 1:
            if "mask" in params and kwargs.get("mask") is None:
                kwargs["mask"] = nest.map_structure(mask_of, next(iter(tensor_args.values())))
        else:
            for name, value in tensor_args.items():
                if f"{name}_mask" in params and kwargs.get(f"{name}_mask") is None and \
                        bound.get(f"{name}_mask") is None:
                    kwargs[f"{name}_mask"] = nest.map_structure(mask_of, value)
        if kwargs.get("mask") is not None:
            return kwargs["mask"]
        return nest.map_structure(mask_of, inputs)

    def _set_mask_metadata(self, inputs, outputs, previous_mask):
        flat_outputs = nest.flatten(outputs)
        if all(get_keras_mask(x) is not None for x in flat_outputs):
            return
        output_masks = self.compute_mask(inputs, previous_mask)
        if output_masks is None:
            return
        for tensor, mask in zip(flat_outputs, nest.flatten(output_masks)):
            if get_keras_mask(tensor) is None and mask is not None:
                set_keras_mask(tensor, mask)

    def _maybe_build(self, inputs):
        shape = nest.map_structure(lambda t: tuple(t.shape.as_list()), inputs)
        object.__setattr__(self, "_build_input_shape", shape)
        self.build(shape)
        self.built = True

    def __call__(self, *args, **kwargs):
        if not args:
            raise TypeError(f"{type(self).__name__}.__call__() needs the layer's inputs.")
        inputs, rest = args[0], args[1:]
        if any(isinstance(t, KerasTensor) for t in nest.flatten([inputs, list(rest), kwargs])):
            return symbolic_call(self, inputs, rest, kwargs)
        inputs = nest.map_structure(self._convert_input, inputs)
        if self.built:
            return self._call(inputs, rest, kwargs)
        with context.name_scope(self.name):   # weights made now (also by sublayers) are named under it
            self._maybe_build(inputs)
            return self._call(inputs, rest, kwargs)

    def _call(self, inputs, rest, kwargs):
        training = kwargs.pop("training", None)
        if training is None:
            training = _training_from_context()
        if self._call_has_training:
            kwargs["training"] = training
        stack = getattr(_call_context, "training", None)
        if stack is None:
            stack = _call_context.training = []
        if not stack:
            self._clear_losses()       # the outermost call: the last call's losses go
        previous_mask = self._populate_masks(inputs, rest, kwargs)
        stack.append(training)
        try:
            out = _call_fn(self)(inputs, *rest, **kwargs)
        finally:
            stack.pop()
        if self.supports_masking:
            self._set_mask_metadata(inputs, out, previous_mask)
        elif any(m is not None for m in nest.flatten(previous_mask)):
            warnings.warn(f"Layer '{self.name}' (of type {type(self).__name__}) was passed an input with a mask "
                          "attached to it. However, this layer does not support masking and will therefore "
                          "destroy the mask information. Downstream layers will not see the mask.")
        if self.activity_regularizer is not None:
            for output in nest.flatten(out):
                if is_tensorlike(output):
                    loss = self.activity_regularizer(output)
                    if output.shape.rank:       # Keras 3: per sample of the batch
                        loss = math_ops.divide_no_nan(loss, math_ops.cast(array_ops.shape(output)[0], loss.dtype))
                    self.add_loss(loss)
        shape = getattr(out, "shape", None)
        if shape is not None and shape.rank:     # what summary() shows: (None, ...)
            self._output_shape = (None,) + tuple(shape.as_list()[1:])
        return out

    def _convert_input(self, x):
        if x is None or isinstance(x, (str, bool)):
            return x
        mask = get_keras_mask(x)
        y = self._converted(x)
        if mask is not None and y is not x:     # a cast keeps the input's mask, as Keras's
            set_keras_mask(y, mask)
        return y

    def _converted(self, x):
        if isinstance(x, Variable):
            x = convert_to_tensor(x)        # a read of the variable: tapes see it (np.asarray did not)
        elif not is_tensorlike(x):
            x = convert_to_tensor(np.asarray(x) if not isinstance(x, (int, float)) else x)
        if x.dtype.is_floating and x.dtype != self.dtype:   # Keras casts float inputs to the layer dtype
            x = math_ops.cast(x, self.dtype)
        return x

    def __repr__(self):
        return f"<{type(self).__name__} name={self.name}, built={self.built}>"


def _is_tensor_argument(value):
    """Keras's CallSpec: a tensor, or a structure of tensors (None allowed) holding at least one."""
    if isinstance(value, (list, tuple, dict)):
        flat = nest.flatten(value)
        return any(is_tensorlike(v) for v in flat) and all(v is None or is_tensorlike(v) for v in flat)
    return is_tensorlike(value)


def _call_fn(layer):
    """``layer.call``, converted by AutoGraph when it runs inside a traced function
    with autograph on (as Keras does), so Python control flow on tensors in a user's
    ``call`` works inside ``fit``'s compiled train step."""
    trace = context.current_trace()
    if trace is None or not trace.autograph:
        return layer.call
    from ..autograph import converted_call    # AutoGraph loads on first use (see jitgrad/__init__)
    return converted_call(layer.call)
