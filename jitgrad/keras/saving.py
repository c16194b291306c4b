"""Whole-model saving: ``model.save("m.keras")`` / ``keras.models.load_model``, ``to_json`` /
``model_from_json``, ``clone_model``.

jitgrad's ``.keras`` file is a zip as Keras 3's: ``config.json`` (Keras 3's layout: the model's
serialized config with its ``compile_config``) and ``metadata.json``, but the weights are
numpy's ``model.weights.npz`` (not HDF5, which would need h5py): the model's weights in
``model.weights`` order, then the optimizer's variables -- so the files are not interchangeable
with TF's. Loading rebuilds the model from its config, sets the weights, compiles it from the
compile config and restores the optimizer's state, so training resumes where it stopped."""
import datetime
import io
import json
import os
import warnings
import zipfile

import numpy as np

from .functional import Input
from .serialization import custom_object_scope, deserialize_keras_object, serialize_keras_object

_WEIGHTS = "model.weights.npz"
FORMAT_VERSION = "jitgrad-1"


def save_model(model, filepath, overwrite=True, zipped=None, **kwargs):
    filepath = os.fspath(filepath)
    if not filepath.endswith(".keras"):
        raise ValueError("Invalid filepath extension for saving. Please add either a `.keras` extension for the "
                         "native Keras format (recommended) or a `.h5` extension. Use `model.export(filepath)` if "
                         "you want to export a SavedModel for use with TFLite/TFServing/etc. Received: "
                         f"filepath={filepath}.")
    if os.path.exists(filepath) and not overwrite:
        raise FileExistsError(f"{filepath} exists and overwrite=False.")
    config = serialize_keras_object(model)
    if getattr(model, "compiled", False):
        config["compile_config"] = model.get_compile_config()
    metadata = {"keras_version": "3 (jitgrad)", "date_saved": datetime.datetime.now().strftime("%Y-%m-%d@%H:%M:%S"),
                "weights_format": FORMAT_VERSION}
    arrays = {f"weight_{i:05d}": w.numpy() for i, w in enumerate(model.weights)}
    arrays.update(optimizer_arrays(model))
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    with zipfile.ZipFile(filepath, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("metadata.json", json.dumps(metadata))
        z.writestr("config.json", json.dumps(config))
        z.writestr(_WEIGHTS, buffer.getvalue())


def optimizer_arrays(model):
    """The optimizer's state as saved: its variables (``optimizer_00000``, ...) and, for a fixed
    rate, the rate's variable (``learning_rate``: a rate ReduceLROnPlateau lowered is restored,
    as Keras 3 restores its learning-rate variable)."""
    arrays = {f"optimizer_{i:05d}": v for i, v in enumerate(_optimizer_state(model))}
    lr = getattr(getattr(model, "optimizer", None), "_learning_rate_variable", None)
    if arrays and lr is not None:
        arrays["learning_rate"] = lr.numpy()
    return arrays


def restore_optimizer(model, arrays):
    """Sets the optimizer's state from ``optimizer_arrays``' arrays (building the optimizer)."""
    state = [arrays[k] for k in sorted(arrays) if k.startswith("optimizer_")]
    if not state:
        return
    optimizer = model.optimizer
    optimizer.build(model.trainable_variables)
    _set_state(_ordered_optimizer_variables(model), state)
    if "learning_rate" in arrays and not callable(optimizer._learning_rate):     # (not a schedule)
        optimizer.learning_rate = float(arrays["learning_rate"])


def _optimizer_state(model):
    """The optimizer's variables (step counter, then each slot, in the order of the trainable
    weights they belong to and of the slot names): the order a fresh optimizer makes them in."""
    optimizer = getattr(model, "optimizer", None)
    if optimizer is None or optimizer._iterations is None:
        return []
    return [v.numpy() for v in _ordered_optimizer_variables(model)]


def _ordered_optimizer_variables(model):
    optimizer = model.optimizer
    slots = {(name, id(owner)): slot for name, owner, slot in optimizer.slots()}
    out = [optimizer.iterations]
    for var in model.trainable_variables:
        out += [slots[(name, id(var))] for name in optimizer._slot_names if (name, id(var)) in slots]
    return out


def load_model(filepath, custom_objects=None, compile=True, safe_mode=True):  # noqa: A002 (Keras's name)
    filepath = os.fspath(filepath)
    if not os.path.exists(filepath):
        raise ValueError(f"File not found: filepath={filepath}. Please ensure the file is an accessible `.keras` "
                         "zip file.")
    if not filepath.endswith(".keras") or not zipfile.is_zipfile(filepath):
        raise ValueError(f"File format not supported: filepath={filepath}. jitgrad's Keras loads the `.keras` "
                         "files its Model.save writes.")
    with zipfile.ZipFile(filepath) as z:
        config = json.loads(z.read("config.json"))
        if _WEIGHTS not in z.namelist():
            raise ValueError(f"{filepath} has no {_WEIGHTS}: it is not a file jitgrad's Model.save wrote (TF's "
                             ".keras files keep their weights in HDF5, which jitgrad does not read).")
        with np.load(io.BytesIO(z.read(_WEIGHTS)), allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    compile_config = config.pop("compile_config", None)
    with custom_object_scope(custom_objects):
        model = deserialize_keras_object(config)
        _set_weights(model, [arrays[k] for k in sorted(arrays) if k.startswith("weight_")])
        if compile and compile_config:
            model.compile_from_config(compile_config)
            restore_optimizer(model, arrays)
    return model


def save_weights(model, filepath):
    """``Model.save_weights``: numpy's .npz of ``get_weights()`` (``arr_0``, ... in that order,
    as np.savez names them) and, for a compiled model whose optimizer has made its variables,
    the optimizer's state (Keras 3's weights file holds it too)."""
    arrays = {f"arr_{i}": w for i, w in enumerate(model.get_weights())}
    if getattr(model, "compiled", False):
        arrays.update(optimizer_arrays(model))
    with open(filepath, "wb") as f:
        np.savez(f, **arrays)


def load_weights(model, filepath):
    """``Model.load_weights``: the weights, and the optimizer's state where the file has it and
    the model's optimizer has as many variables (an unbuilt one: its step and rate; Keras 3 warns
    and skips otherwise)."""
    with np.load(filepath, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    model.set_weights([arrays[f"arr_{i}"] for i in range(sum(k.startswith("arr_") for k in arrays))])
    saved = sum(k.startswith("optimizer_") or k == "learning_rate" for k in arrays)
    optimizer = getattr(model, "optimizer", None)
    if not saved or optimizer is None or not getattr(model, "compiled", False):
        return
    built = optimizer._built_variables is not None
    has = (len(_ordered_optimizer_variables(model)) if built else 1) + (not callable(optimizer._learning_rate))
    if has != saved:
        warnings.warn(f"Skipping variable loading for optimizer '{optimizer.name}', because it has {has} variables "
                      f"whereas the saved optimizer has {saved} variables. ", stacklevel=3)
        return
    restore_optimizer(model, arrays)


def _set_weights(model, values):
    weights = model.weights
    if len(values) != len(weights):
        raise ValueError(f"The saved model has {len(values)} weights, the model rebuilt from its config "
                         f"{len(weights)}.")
    _set_state(weights, values)


def _set_state(variables, values):
    for var, value in zip(variables, values):
        if tuple(var.shape.as_list()) != tuple(value.shape):
            raise ValueError(f"The saved value for {var.name} has shape {tuple(value.shape)}, the variable "
                             f"{tuple(var.shape.as_list())}.")
        var.assign(value.astype(var.dtype.np))


def model_to_json(model, **kwargs):
    return json.dumps(serialize_keras_object(model), **kwargs)


def model_from_json(json_string, custom_objects=None):
    """``keras.models.model_from_json``: the model (new weights) a ``to_json`` string describes."""
    return deserialize_keras_object(json.loads(json_string), custom_objects=custom_objects)


def clone_model(model, input_tensors=None, clone_function=None, call_function=None, recursive=False, **kwargs):
    """``keras.models.clone_model`` for Sequential and functional models: the same layers made
    anew from their configs (new weights, freshly initialised), ``clone_function`` in place of
    that for each layer when given."""
    if input_tensors is not None or call_function is not None:
        raise NotImplementedError("jitgrad's clone_model takes no input_tensors or call_function.")
    config = serialize_keras_object(model)
    if clone_function is None:
        return deserialize_keras_object(config)
    if hasattr(model, "_stack"):      # a Sequential
        clone = type(model)(name=model.name, trainable=model.trainable)
        if model._input_spec is not None:
            clone.add(Input(shape=model._input_spec[1:], dtype=model._input_dtype, name=model._input_name))
        for layer in model.layers:
            clone.add(clone_function(layer))
        return clone
    raise NotImplementedError("jitgrad's clone_model takes a clone_function for Sequential models only.")
