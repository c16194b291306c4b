"""``tf.keras.Model`` (subclassing and functional), ``tf.keras.Sequential``:
compile / fit / evaluate / predict on numpy arrays.

``fit`` runs one train step per batch: forward pass, loss, ``GradientTape``
gradients, ``optimizer.apply_gradients``, metric updates -- traced once per
input signature by ``jitgrad.function`` and run compiled (``run_eagerly=True``
runs it eagerly). Logs are Keras 3's: ``loss`` is the batch-size-weighted mean
of the epoch's batch losses, metrics accumulate over the epoch, keys sorted."""
import os

import numpy as np

from .. import context, dtypes, nest
from ..convert import convert_to_tensor
from ..function import function
from ..tape import GradientTape
from . import callbacks as callbacks_module, losses as losses_module, metrics as metrics_module
from .data_adapter import (ArrayBatches, as_array as _as_array, batches as _batches, class_weight_to_sample_weights,
                           take as _take)
from .functional import KerasTensor, as_input_dtype, layers_of, run as run_functional
from .core_layers import InputLayer
from .layers import Layer
from . import model_config, saving
from .names import unique_name
from .serialization import deserialize_keras_object, serialize_keras_object
from .summary import summary_text
from ..ops import array_ops, math_ops, reduction_ops
from ..keras_optimizers import Adadelta, Adagrad, Adamax, AdamW, Ftrl, Lion, Nadam, RMSprop
from ..optimizers import Adam, KerasOptimizer, SGD


def _optimizer(identifier):
    if isinstance(identifier, KerasOptimizer):
        return identifier
    table = {"sgd": SGD, "adam": Adam, "rmsprop": RMSprop, "adagrad": Adagrad, "adamax": Adamax, "nadam": Nadam,
             "adamw": AdamW, "adadelta": Adadelta, "ftrl": Ftrl, "lion": Lion}
    if isinstance(identifier, str) and identifier.lower() in table:
        return table[identifier.lower()]()
    raise ValueError(f"jitgrad's Keras has no optimizer {identifier!r} (it has {', '.join(map(repr, table))}).")


def _batch_size(x):
    """The batch size of a (traced) batch: static when known, else a tensor."""
    t = nest.flatten(x)[0]
    dims = list(t.shape)            # numpy shape or TensorShape
    n = dims[0] if dims else 1
    return n if n is not None else array_ops.shape(t)[0]


class Model(Layer):
    def __init__(self, *args, **kwargs):
        inputs = kwargs.pop("inputs", args[0] if len(args) > 0 else None)
        outputs = kwargs.pop("outputs", args[1] if len(args) > 1 else None)
        functional = inputs is not None and outputs is not None
        if functional and "name" not in kwargs:
            kwargs["name"] = unique_name("functional")
        super().__init__(**kwargs)
        self._functional = functional
        if self._functional:
            self._inputs = list(nest.flatten(inputs))
            if not all(isinstance(t, KerasTensor) for t in self._inputs):
                raise ValueError("A functional Model's inputs must come from tf.keras.Input.")
            self._input_struct, self._outputs = inputs, outputs
            self._layers = [InputLayer.wrapping(t) for t in self._inputs] + [
                layer for layer in layers_of(outputs) if not getattr(layer, "is_operation", False)]
            self._operations = layers_of(outputs)      # (keeps the op layers of KerasTensor arithmetic)
            self.built = True
        self.optimizer = self.loss = None
        self.compiled = False
        self.run_eagerly = False
        self._train_fn = self._test_fn = self._predict_fn = None
        self._initial_epoch = None      # (BackupAndRestore's epoch to resume at)

    # ---------------------------------------------------------------- calling
    def call(self, inputs, training=None):
        if not self._functional:
            raise NotImplementedError("A subclassed Model must implement call().")
        values = [as_input_dtype(v, kt.dtype) for v, kt in zip(nest.flatten(inputs), self._inputs)]
        return run_functional(self._inputs, self._outputs, values, training)

    @property
    def layers(self):
        return list(self._sublayers)

    def save_weights(self, filepath, overwrite=True, max_shard_size=None):
        """Keras 3's file name rule (``*.weights.h5``); the content is jitgrad's (numpy's .npz of
        ``get_weights()``, in that order, and the optimizer's state), which ``load_weights`` reads
        -- not HDF5."""
        filepath = os.fspath(filepath)
        if not filepath.endswith(".weights.h5"):
            raise ValueError(f"The filename must end in `.weights.h5`. Received: filepath={filepath}")
        saving.save_weights(self, filepath)

    def load_weights(self, filepath, skip_mismatch=False, **kwargs):
        filepath = os.fspath(filepath)
        if not filepath.endswith(".weights.h5"):
            raise ValueError(f"File format not supported: filepath={filepath}. jitgrad's Keras loads weights from "
                             "`.weights.h5` files written by its save_weights.")
        saving.load_weights(self, filepath)

    # ---------------------------------------------------------------- config, saving
    def get_config(self):
        """A functional model's layers and calls (Keras 3's layout); a subclassed model's
        constructor arguments, as a layer's."""
        if self._functional:
            return model_config.functional_config(self)
        return super().get_config()

    @classmethod
    def from_config(cls, config, custom_objects=None):
        if "input_layers" in config and "layers" in config:
            return model_config.functional_from_config(cls, config)
        return super().from_config(config)

    def get_build_config(self):
        if self._functional:
            return {"input_shape": None}      # (as Keras 3 writes it: the inputs say it)
        return super().get_build_config()

    def get_compile_config(self):
        if not self.compiled:
            return {}
        return {"optimizer": serialize_keras_object(self.optimizer), "loss": serialize_keras_object(self.loss),
                "loss_weights": None, "metrics": serialize_keras_object(self._metric_ids) or None,
                "weighted_metrics": None, "run_eagerly": self.run_eagerly, "steps_per_execution": 1,
                "jit_compile": False}

    def compile_from_config(self, config):
        config = {k: deserialize_keras_object(v) for k, v in config.items()}
        self.compile(optimizer=config.get("optimizer") or "rmsprop", loss=config.get("loss"),
                     metrics=config.get("metrics"), run_eagerly=config.get("run_eagerly", False))

    def save(self, filepath, overwrite=True, zipped=None, **kwargs):
        """Keras 3's ``.keras`` zip (config.json, metadata.json), the weights and the optimizer's
        state in ``model.weights.npz`` (jitgrad's; TF's is HDF5): see keras/saving.py."""
        saving.save_model(self, filepath, overwrite=overwrite, zipped=zipped, **kwargs)

    def to_json(self, **kwargs):
        return saving.model_to_json(self, **kwargs)

    def get_layer(self, name=None, index=None):
        """Keras 3's: a layer by name or by index in ``layers``, exactly one of them."""
        if index is not None and name is not None:
            raise ValueError(f"Provide only a layer name or a layer index. Received: index={index}, name={name}.")
        if index is not None:
            if len(self.layers) <= index:
                raise ValueError(f"Was asked to retrieve layer at index {index} but model only has "
                                 f"{len(self.layers)} layers.")
            return self.layers[index]
        if name is not None:
            for layer in self.layers:
                if layer.name == name:
                    return layer
            raise ValueError(f"No such layer: {name}. Existing layers are: {[layer.name for layer in self.layers]}.")
        raise ValueError("Provide either a layer name or layer index at `get_layer`.")

    @property
    def inputs(self):
        return list(self._inputs) if self._functional else None

    @property
    def outputs(self):
        return list(nest.flatten(self._outputs)) if self._functional else None

    @property
    def input_shape(self):
        """Keras 3's: the (batch-free) shape the model takes, for one input a tuple."""
        if self._functional:
            shapes = [tuple(t.shape.as_list()) for t in self._inputs]
            return shapes[0] if len(shapes) == 1 else shapes
        spec = getattr(self, "_input_spec", None)
        if spec is None:
            raise AttributeError(f"The layer {self.name} has never been called and thus has no defined input.")
        return tuple(spec)

    @property
    def output_shape(self):
        if self._functional:
            shapes = [tuple(t.shape.as_list()) for t in nest.flatten(self._outputs)]
            return shapes[0] if len(shapes) == 1 else shapes
        last = self.layers[-1] if self.layers else None
        shape = getattr(last, "_output_shape", None) if self.built else None
        if shape is None:
            raise AttributeError(f"The layer {self.name} has never been called and thus has no defined output.")
        return tuple(shape)

    @property
    def input(self):
        return self._input_struct if self._functional else None

    @property
    def output(self):
        return self._outputs if self._functional else None

    def build(self, input_shape=None):
        """Builds the weights by running the model once on a batch of zeros of ``input_shape``."""
        if input_shape is not None and not (self._functional and self.built):
            object.__setattr__(self, "_build_input_shape", tuple(input_shape))    # (its build config)
            dims = [1 if d is None else d for d in input_shape]
            with context.name_scope(self.name):
                self._call(_as_array(np.zeros(dims, np.float32)), (), {"training": False})
        self.built = True

    def _maybe_build(self, inputs):
        # the sublayers build themselves during this first call; the shape is the build config
        object.__setattr__(self, "_build_input_shape", nest.map_structure(lambda t: tuple(t.shape.as_list()), inputs))
        self.built = True

    def _ensure_built(self, first_x, first_y=None):
        """Builds the model (one eager call on the first sample) and, for a compiled model, its
        metrics and the optimizer's slots, so the traced steps create no variables (traced once)."""
        y = first_y
        if not self.built or not all(layer.built for layer in self._sublayers) or \
                (y is not None and self.compiled and self._metrics is None):
            out = self(first_x, training=False)
            if y is not None and self.compiled:
                self._compile_metrics(y, out)
        if y is not None and self.compiled:
            self.optimizer.build(self.trainable_variables)

    # ---------------------------------------------------------------- compile
    def compile(self, optimizer="rmsprop", loss=None, loss_weights=None, metrics=None, weighted_metrics=None,
                run_eagerly=False, steps_per_execution=1, jit_compile="auto", auto_scale_loss=True):
        if loss_weights is not None or weighted_metrics is not None:
            raise NotImplementedError("jitgrad's Keras has no loss_weights or weighted_metrics.")
        if isinstance(loss, (list, tuple, dict)):
            raise NotImplementedError("jitgrad's Keras compiles one loss for one output: no per-output losses.")
        self.optimizer = _optimizer(optimizer)
        self.loss = loss
        self._loss_fn = losses_module.for_compile(loss)
        self._metric_ids = list(metrics or [])
        self._metrics = None   # made on the first batch, when the shapes that pick "accuracy" are known
        self._loss_tracker = metrics_module.Mean(name="loss")
        self.run_eagerly = run_eagerly
        self.compiled = True
        self._train_fn = self._test_fn = None

    def _compile_metrics(self, y, y_pred):
        if self._metrics is None and not self._metric_ids:
            self._metrics = []
        if self._metrics is None:
            _one_output(y_pred)
            ys = tuple(np.shape(nest.flatten(y)[0]))
            ps = tuple(y_pred.shape.as_list())
            self._metrics = [metrics_module.get(m, ys, ps) for m in self._metric_ids]
        return self._metrics

    @property
    def metrics(self):
        return ([self._loss_tracker] if self.compiled else []) + list(self._metrics or [])

    @property
    def metrics_names(self):
        return [m.name for m in self.metrics]

    def reset_metrics(self):
        for m in self.metrics:
            m.reset_state()

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None):
        """Keras 3's total: the compiled loss plus the sum of each of ``self.losses`` (the
        layers' add_loss losses of this call and the weight regularizers' penalties)."""
        if self._loss_fn is not None:
            _one_output(y_pred)
        losses = [] if self._loss_fn is None else [self._loss_fn(y, y_pred, sample_weight)]
        losses += [reduction_ops.reduce_sum(loss if loss.dtype.is_floating else math_ops.cast(loss, dtypes.float32))
                   for loss in map(convert_to_tensor, self.losses)]
        if not losses:
            raise ValueError("No loss to compute. Provide a `loss` argument in `compile()`.")
        return losses[0] if len(losses) == 1 else math_ops.add_n(losses)

    def _logs(self):
        return {m.name: m.result() for m in self.metrics}

    # ---------------------------------------------------------------- steps
    def train_step(self, data):
        x, y, sample_weight = _unpack_step(data)
        with GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = self.compute_loss(x, y, y_pred, sample_weight)
        variables = self.trainable_variables
        if variables:          # a frozen model still runs its step (and its metrics), as Keras's
            self.optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return self._update_metrics(x, y, y_pred, loss)

    def test_step(self, data):
        x, y, sample_weight = _unpack_step(data)
        y_pred = self(x, training=False)
        return self._update_metrics(x, y, y_pred, self.compute_loss(x, y, y_pred, sample_weight))

    def predict_step(self, data):
        return self(data, training=False)

    def _update_metrics(self, x, y, y_pred, loss):
        self._loss_tracker.update_state(loss, sample_weight=_batch_size(x))
        for m in self._compile_metrics(y, y_pred):
            m.update_state(y, y_pred)
        return self._logs()

    def _step_function(self, step):
        return step if self.run_eagerly else function(step)

    def make_train_function(self):
        if self._train_fn is None:
            self._train_fn = self._step_function(lambda x, y, w: self.train_step((x, y, w)))
        return self._train_fn

    def make_test_function(self):
        if self._test_fn is None:
            self._test_fn = self._step_function(lambda x, y, w: self.test_step((x, y, w)))
        return self._test_fn

    def make_predict_function(self):
        if self._predict_fn is None:
            self._predict_fn = self._step_function(lambda x: self.predict_step(x))
        return self._predict_fn

    # ---------------------------------------------------------------- loops
    def _check_compiled(self):
        if not self.compiled:
            raise ValueError("You must call `compile()` before using the model.")

    def fit(self, x=None, y=None, batch_size=None, epochs=1, verbose="auto", callbacks=None, validation_split=0.0,
            validation_data=None, shuffle=True, class_weight=None, sample_weight=None, initial_epoch=0,
            steps_per_epoch=None, validation_steps=None, validation_batch_size=None, validation_freq=1):
        """Trains for ``epochs`` epochs over numpy arrays (``ceil(n / batch_size)`` steps) or a
        batched ``tf.data.Dataset`` of ``(x, y)``; returns a History."""
        self._check_compiled()
        if steps_per_epoch is not None:
            raise NotImplementedError("jitgrad's fit has no steps_per_epoch.")
        data = _batches(x, y, batch_size, shuffle, sample_weight, class_weight)
        if validation_split and validation_data is None:
            if not isinstance(data, ArrayBatches):
                raise ValueError("`validation_split` is only supported for Tensors or NumPy arrays, not for a "
                                 "tf.data.Dataset.")
            data, validation_data = data.split(validation_split)
        self._ensure_built(*data.first())
        cb = _callback_list(callbacks, self, add_history=True, add_progbar=verbose != 0, verbose=verbose,
                            epochs=epochs, steps=data.steps)
        train = self.make_train_function()
        self.stop_training = False
        cb.on_train_begin()
        logs, training_logs = {}, None
        # BackupAndRestore sets _initial_epoch in on_train_begin: training resumes where it stopped
        initial_epoch = self._initial_epoch or initial_epoch
        for epoch in range(initial_epoch, epochs):
            self.reset_metrics()
            cb.on_epoch_begin(epoch)
            for step, (bx, by, bw) in enumerate(data.epoch()):
                cb.on_train_batch_begin(step)
                logs = _python_logs(train(bx, by, bw))
                cb.on_train_batch_end(step, logs)
                if self.stop_training:       # (TerminateOnNaN stops within the epoch)
                    break
            epoch_logs = dict(logs)
            if validation_data is not None and (epoch + 1) % validation_freq == 0:
                vx, vy, vw = _validation_args(validation_data)
                val = self.evaluate(vx, vy, sample_weight=vw, batch_size=validation_batch_size or
                                    (batch_size if isinstance(data, ArrayBatches) else None), verbose=0,
                                    callbacks=cb, return_dict=True)
                epoch_logs.update({"val_" + k: v for k, v in val.items()})
            cb.on_epoch_end(epoch, epoch_logs)
            training_logs = epoch_logs
            if self.stop_training:
                break
        cb.on_train_end(training_logs)
        self._initial_epoch = None
        return self.history

    def evaluate(self, x=None, y=None, batch_size=None, verbose="auto", sample_weight=None, steps=None,
                 callbacks=None, return_dict=False):
        self._check_compiled()
        data = _batches(x, y, batch_size, sample_weight=sample_weight)
        self._ensure_built(*data.first())
        cb = _callback_list(callbacks, self, add_progbar=verbose != 0, verbose=verbose, epochs=1, steps=data.steps)
        test = self.make_test_function()
        self.reset_metrics()
        cb.on_test_begin()
        logs = {}
        for step, (bx, by, bw) in enumerate(data.epoch()):
            cb.on_test_batch_begin(step)
            logs = _python_logs(test(bx, by, bw))
            cb.on_test_batch_end(step, logs)
        cb.on_test_end(logs)
        if return_dict:
            return logs
        values = [logs[m.name] for m in self.metrics]
        return values[0] if len(values) == 1 else values

    def predict(self, x, batch_size=None, verbose="auto", steps=None, callbacks=None):
        data = _batches(x, None, batch_size)
        self._ensure_built(data.first()[0])
        cb = _callback_list(callbacks, self, add_progbar=verbose != 0, verbose=verbose, epochs=1, steps=data.steps)
        pred = self.make_predict_function()
        outs = []
        cb.on_predict_begin()
        for step, (bx, _, _) in enumerate(data.epoch()):
            cb.on_predict_batch_begin(step)
            outs.append(nest.map_structure(lambda t: np.asarray(t), pred(bx)))
            cb.on_predict_batch_end(step, {"outputs": outs[-1]})
        cb.on_predict_end()
        return nest.map_structure(lambda *parts: np.concatenate(parts), *outs)

    def summary(self, print_fn=None):
        """Keras 3's table of layers, output shapes and parameter counts."""
        text = summary_text(self)
        (print_fn or print)(text)

    def train_on_batch(self, x, y=None, sample_weight=None, class_weight=None, return_dict=False):
        return self._on_batch(self.make_train_function(), x, y, sample_weight, class_weight, return_dict)

    def test_on_batch(self, x, y=None, sample_weight=None, return_dict=False):
        return self._on_batch(self.make_test_function(), x, y, sample_weight, None, return_dict)

    def _on_batch(self, step, x, y, sample_weight, class_weight, return_dict):
        """One step on one batch, metrics reset first; Keras 3's result: the logs, or the loss
        alone (a float) without metrics, else the list of metric values."""
        self._check_compiled()
        if class_weight is not None:
            if sample_weight is not None:
                raise ValueError("You cannot `class_weight` and `sample_weight` at the same time.")
            sample_weight = class_weight_to_sample_weights(y, class_weight)
        x, y, sample_weight = _as_array(x), _as_array(y), _as_array(sample_weight)
        self._ensure_built(_take(x, slice(0, 1)), _take(y, slice(0, 1)))
        self.reset_metrics()
        logs = _python_logs(step(x, y, sample_weight))
        if return_dict:
            return logs
        values = [logs[m.name] for m in self.metrics]
        return values[0] if len(values) == 1 else values

    def predict_on_batch(self, x):
        x = _as_array(x)
        self._ensure_built(_take(x, slice(0, 1)))
        return nest.map_structure(np.asarray, self.make_predict_function()(x))


def _callback_list(callbacks, model, **kwargs):
    """fit's CallbackList also serves its validation evaluate (Keras 3: the callbacks see
    on_test_* there too); a list is wrapped."""
    if isinstance(callbacks, callbacks_module.CallbackList):
        return callbacks
    return callbacks_module.CallbackList(callbacks, model=model, **kwargs)


def _validation_args(validation_data):
    """``validation_data`` as evaluate's (x, y, sample_weight): a Dataset, or an (x, y) or
    (x, y, sample_weight) tuple."""
    if isinstance(validation_data, tuple):
        if len(validation_data) not in (2, 3):
            raise ValueError("`validation_data` should be a tuple `(val_x, val_y, val_sample_weight)` or "
                             f"`(val_x, val_y)`. Found a tuple of {len(validation_data)} elements.")
        return tuple(validation_data) + (None,) * (3 - len(validation_data))
    return validation_data, None, None


def _unpack_step(data):
    """A step's data: (x, y, sample_weight), from x, (x,), (x, y) or (x, y, sample_weight)."""
    if isinstance(data, tuple):
        return tuple(data) + (None,) * (3 - len(data))
    return data, None, None


def _one_output(y_pred):
    """Keras 3 applies a compiled loss (and metrics) to each output of a model of several;
    jitgrad's compile takes models of one output."""
    if len(nest.flatten(y_pred)) > 1:
        raise NotImplementedError(f"jitgrad's Keras compiles models of one output: this model has "
                                  f"{len(nest.flatten(y_pred))}.")


def _python_logs(logs):
    return {k: float(logs[k]) for k in sorted(logs)}


class Sequential(Model):
    """A stack of layers. ``Sequential([Input(shape), ...])`` or a first layer with
    ``input_shape=`` builds it at once; otherwise on the first call."""

    def __init__(self, layers=None, name=None, trainable=True):
        super().__init__(name=name, trainable=trainable)
        self._stack = []
        self._input_spec = None
        self._input_dtype, self._input_name = dtypes.float32, "input_layer"
        for layer in layers or []:
            self.add(layer)

    def add(self, layer):
        if isinstance(layer, InputLayer):
            layer = layer.output
        if isinstance(layer, KerasTensor):
            if layer._node is not None or self._stack:
                raise ValueError("Only an Input may be added as the first element of a Sequential model.")
            self._input_spec = tuple(layer.shape.as_list())
            self._input_dtype, self._input_name = layer.dtype, layer.name
            return
        if not isinstance(layer, Layer):
            raise ValueError(f"Only instances of `keras.Layer` can be added to a Sequential model. Received: "
                             f"{layer!r}")
        self._stack.append(layer)
        self._sublayers.append(layer)
        if self._input_spec is None and len(self._stack) == 1 and layer._input_shape_arg is not None:
            self._input_spec = (None,) + layer._input_shape_arg
        if self._input_spec is not None:
            self.built = False
            self.build(self._input_spec)

    def get_config(self):
        return model_config.sequential_config(self)

    def get_build_config(self):
        shape = model_config.built_shape(self)
        return {"input_shape": list(shape)} if shape is not None else None

    @classmethod
    def from_config(cls, config, custom_objects=None):
        return model_config.sequential_from_config(cls, config)

    def pop(self):
        layer = self._stack.pop()
        self._sublayers.remove(layer)
        return layer

    @property
    def layers(self):
        return list(self._stack)

    def call(self, inputs, training=None):
        # with an Input, Keras 3's Sequential is a functional model: the data takes its dtype
        x = inputs if self._input_spec is None else as_input_dtype(inputs, self._input_dtype)
        for layer in self._stack:
            x = layer(x, training=training)
        return x
