"""``tf.train.Checkpoint``, ``tf.train.CheckpointManager``, ``tf.train.latest_checkpoint`` and TF 1's
``tf.compat.v1.train.Saver`` (the variables of a Session by name):
saving and restoring the variables of an object graph (Keras models and layers, tf.Modules,
Keras optimizers, variables, and lists / dicts of them) by their path from the checkpoint's
named roots, as TF's object-based checkpoints do.

The file is jitgrad's own (``<prefix>.npz``: one array per variable path, plus the dtype of each
that numpy cannot hold); TF's tensor-bundle files are neither read nor written. Paths: a Keras
layer's weights by their position in ``layer.weights`` (TF's checkpoints are positional for
layers too), a tf.Module's attributes by name, a Keras optimizer's step counter and its slots by
slot name and the path of the variable they belong to -- so a fresh optimizer restored before its
first step gets its slots made then (TF defers them to the first step; the values are the same).
The ``checkpoint`` state file of a directory is TF's text format."""
import os
import re

import numpy as np

from . import context, dtypes
from .errors import NotFoundError
from .module import Module
from .optimizers import KerasOptimizer
from .variables import Variable, global_variables

_STATE_FILE = "checkpoint"
_SLOT = "/.slot/"


def _walk(obj, path, found, seen):
    """Fills ``found`` (path -> variable) with the variables below ``obj``, each at its first path."""
    if obj is None or id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, Variable):
        found[path] = obj
    elif isinstance(obj, KerasOptimizer):
        found[path + "/iterations"] = obj.iterations
    elif hasattr(obj, "weights") and hasattr(obj, "get_weights"):      # a Keras layer or model
        for i, w in enumerate(obj.weights):
            if id(w) not in seen:
                seen.add(id(w))
                found[f"{path}/weights/{i}"] = w
    elif isinstance(obj, Module):
        attrs = vars(obj)
        for name in sorted(attrs):
            if name not in obj._TF_MODULE_IGNORED_PROPERTIES and name != "_name_scope":
                _walk(attrs[name], f"{path}/{name}", found, seen)
    elif isinstance(obj, dict):
        for key in sorted(obj, key=str):
            _walk(obj[key], f"{path}/{key}", found, seen)
    elif isinstance(obj, (list, tuple)):
        for i, item in enumerate(obj):
            _walk(item, f"{path}/{i}", found, seen)


def _optimizers(roots):
    out, stack, seen = [], list(roots.items()), set()
    while stack:
        path, obj = stack.pop(0)
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, KerasOptimizer):
            out.append((path, obj))
        elif isinstance(obj, dict):
            stack += [(f"{path}/{k}", v) for k, v in sorted(obj.items(), key=lambda kv: str(kv[0]))]
        elif isinstance(obj, (list, tuple)):
            stack += [(f"{path}/{i}", v) for i, v in enumerate(obj)]
    return out


def _encode(value):
    """(array numpy can store, dtype name to read it back as, or None)."""
    value = np.asarray(value)
    if value.dtype.kind in "biufc":
        return value, None
    return value.view(np.dtype(f"u{value.dtype.itemsize}")), dtypes.as_dtype(value.dtype).name


def _write_values(file_prefix, values):
    """``<file_prefix>.npz``: each value under its key, and the dtype numpy cannot hold."""
    arrays, keys, kinds = {}, [], []
    for i, key in enumerate(sorted(values)):
        arrays[f"v{i}"], kind = _encode(values[key])
        keys.append(key)
        kinds.append(kind or "")
    arrays["paths"], arrays["dtypes"] = np.array(keys), np.array(kinds)
    directory = os.path.dirname(file_prefix)
    if directory:
        os.makedirs(directory, exist_ok=True)
    with open(file_prefix + ".npz", "wb") as f:
        np.savez(f, **arrays)


def _read_values(save_path):
    file = save_path if save_path.endswith(".npz") else save_path + ".npz"
    if not os.path.exists(file):
        raise NotFoundError(None, None, f"Error when restoring from checkpoint at {save_path}: Unsuccessful "
                                        f"TensorSliceReader constructor: Failed to find any matching files for "
                                        f"{save_path}")
    with np.load(file, allow_pickle=False) as data:
        return {key: (data[f"v{i}"].view(dtypes.as_dtype(kind).np) if kind else data[f"v{i}"])
                for i, (key, kind) in enumerate(zip(data["paths"].tolist(), data["dtypes"].tolist()))}


class CheckpointLoadStatus:
    """What a restore matched: ``assert_consumed`` / ``assert_existing_objects_matched`` raise
    AssertionError as TF's do when values or variables went unmatched."""

    def __init__(self, unused_values, unrestored_variables):
        self._unused, self._unrestored = sorted(unused_values), sorted(unrestored_variables)

    def assert_consumed(self):
        if self._unused or self._unrestored:
            raise AssertionError(f"Unresolved object in checkpoint: values {self._unused} were not used, "
                                 f"variables {self._unrestored} were not restored.")
        return self

    def assert_existing_objects_matched(self):
        if self._unrestored:
            raise AssertionError(f"Unresolved object in checkpoint: variables {self._unrestored} have no value in "
                                 "the checkpoint.")
        return self

    def assert_nontrivial_match(self):
        return self

    def expect_partial(self):
        return self

    def run_restore_ops(self, session=None):
        return None

    def initialize_or_restore(self, session=None):
        return None


class Checkpoint:
    def __init__(self, root=None, **kwargs):
        self._roots = dict(kwargs)
        if root is not None:
            self._roots["root"] = root
        for name, obj in self._roots.items():
            if not (isinstance(obj, (Variable, Module, KerasOptimizer, list, tuple, dict)) or hasattr(obj, "weights")):
                raise ValueError(f"`Checkpoint` was expecting {name} to be a trackable object (an object derived "
                                 f"from `Trackable`), got {obj}.")
        self.save_counter = Variable(0, trainable=False, name="save_counter", dtype=dtypes.int64)

    def _variables(self):
        found, seen = {}, set()
        for name in sorted(self._roots):
            _walk(self._roots[name], name, found, seen)
        owners = {id(v): path for path, v in found.items()}
        for path, opt in _optimizers(self._roots):
            for slot_name, var, slot in opt.slots():
                owner = owners.get(id(var))
                if owner is not None:
                    found[f"{path}{_SLOT}{slot_name}/{owner}"] = slot
        found["save_counter"] = self.save_counter
        return found

    def write(self, file_prefix, options=None):
        """Writes ``<file_prefix>.npz``; returns ``file_prefix``."""
        file_prefix = os.fspath(file_prefix)
        _write_values(file_prefix, {path: var.numpy() for path, var in self._variables().items()})
        return file_prefix

    def save(self, file_prefix, options=None):
        """Writes ``<file_prefix>-<n>`` for the n-th save and records it as the directory's latest."""
        self.save_counter.assign_add(1)
        path = self.write(f"{os.fspath(file_prefix)}-{int(self.save_counter.numpy())}")
        _record(os.path.dirname(path) or ".", path, None)
        return path

    def read(self, save_path, options=None):
        return self.restore(save_path, options)

    def restore(self, save_path, options=None):
        """Assigns each saved value to the variable at its path now; a Keras optimizer's slots are
        made for the variables they belong to first. None restores nothing (TF's no-op status)."""
        if save_path is None:
            return CheckpointLoadStatus([], [])
        values = _read_values(os.fspath(save_path))
        self._make_saved_slots(values)
        current = self._variables()
        for path, value in values.items():
            var = current.get(path)
            if var is not None:
                if tuple(var.shape.as_list()) != value.shape:
                    raise ValueError(f"Received incompatible tensor with shape {value.shape} when attempting to "
                                     f"restore variable with shape {tuple(var.shape.as_list())} and name {path}.")
                var.assign(value.astype(var.dtype.np, copy=False))
        return CheckpointLoadStatus(set(values) - set(current), set(current) - set(values))

    def _make_saved_slots(self, values):
        owners = {}
        found, seen = {}, set()
        for name in sorted(self._roots):
            _walk(self._roots[name], name, found, seen)
        for path, opt in _optimizers(self._roots):
            prefix = path + _SLOT
            for key in values:
                if key.startswith(prefix):
                    slot_name, owner_path = key[len(prefix):].split("/", 1)
                    owner = found.get(owner_path)
                    if owner is not None:
                        owners.setdefault(id(opt), (opt, []))[1].append(owner)
        for opt, variables in owners.values():
            opt.build(variables)


# ------------------------------------------------------------------ the directory's state file
def _record(directory, latest, all_paths):
    """TF's ``checkpoint`` file: the latest path and every kept one, relative to the directory."""
    if all_paths is None:
        state = _read_state(directory)
        all_paths = [p for p in (state or {}).get("all", []) if p != latest] + [latest]
    rel = lambda p: os.path.relpath(p, directory)  # noqa: E731
    lines = [f'model_checkpoint_path: "{rel(latest)}"'] + [f'all_model_checkpoint_paths: "{rel(p)}"'
                                                           for p in all_paths]
    with open(os.path.join(directory, _STATE_FILE), "w") as f:
        f.write("\n".join(lines) + "\n")


def _read_state(directory):
    try:
        with open(os.path.join(directory, _STATE_FILE)) as f:
            text = f.read()
    except OSError:
        return None
    resolve = lambda p: p if os.path.isabs(p) else os.path.join(directory, p)  # noqa: E731
    latest = re.search(r'^model_checkpoint_path: "(.*)"$', text, re.M)
    return {"latest": resolve(latest.group(1)) if latest else None,
            "all": [resolve(p) for p in re.findall(r'^all_model_checkpoint_paths: "(.*)"$', text, re.M)]}


def latest_checkpoint(checkpoint_dir, latest_filename=None):
    """The latest checkpoint's path recorded in ``checkpoint_dir``, or None."""
    state = _read_state(os.fspath(checkpoint_dir))
    if not state or not state["latest"] or not os.path.exists(state["latest"] + ".npz"):
        return None
    return state["latest"]


class CheckpointManager:
    """Numbered saves of a Checkpoint in ``directory``, keeping the last ``max_to_keep``."""

    def __init__(self, checkpoint, directory, max_to_keep, keep_checkpoint_every_n_hours=None,
                 checkpoint_name="ckpt", step_counter=None, checkpoint_interval=None, init_fn=None):
        if not isinstance(checkpoint, Checkpoint):
            raise TypeError(f"Expected checkpoint to be a tf.train.Checkpoint, got {type(checkpoint).__name__}.")
        self._checkpoint, self._directory = checkpoint, os.fspath(directory)
        self._max_to_keep, self._prefix = max_to_keep, os.path.join(self._directory, checkpoint_name)
        self._init_fn = init_fn
        state = _read_state(self._directory)
        self._kept = [p for p in (state or {}).get("all", []) if os.path.exists(p + ".npz")]

    @property
    def directory(self):
        return self._directory

    @property
    def checkpoints(self):
        return list(self._kept)

    @property
    def latest_checkpoint(self):
        return self._kept[-1] if self._kept else None

    def save(self, checkpoint_number=None, check_interval=True, options=None):
        if checkpoint_number is None:
            self._checkpoint.save_counter.assign_add(1)
            checkpoint_number = int(self._checkpoint.save_counter.numpy())
        path = self._checkpoint.write(f"{self._prefix}-{int(checkpoint_number)}")
        self._kept = [p for p in self._kept if p != path] + [path]
        if self._max_to_keep is not None:
            while len(self._kept) > self._max_to_keep:
                os.remove(self._kept.pop(0) + ".npz")
        _record(self._directory, path, self._kept)
        return path

    def restore_or_initialize(self):
        if self.latest_checkpoint is not None:
            self._checkpoint.restore(self.latest_checkpoint)
            return self.latest_checkpoint
        if self._init_fn is not None:
            self._init_fn()
        return None


class Saver:
    """TF 1's: the values of ``var_list`` (default: the graph's global variables) by variable name,
    read from and written to a Session (eagerly: the variables themselves)."""

    def __init__(self, var_list=None, reshape=False, sharded=False, max_to_keep=5, keep_checkpoint_every_n_hours=10000.0,
                 name=None, restore_sequentially=False, saver_def=None, builder=None, defer_build=False,
                 allow_empty=False, write_version=2, pad_step_number=False, save_relative_paths=False, filename=None):
        if var_list is None:
            if context.executing_eagerly():
                raise RuntimeError("When eager execution is enabled, `var_list` must specify a list or dict of "
                                   "variables to save")
            var_list = global_variables()
        if isinstance(var_list, dict):
            self._variables = dict(var_list)
        else:
            self._variables = {v.name.split(":")[0]: v for v in var_list}
        if not self._variables and not allow_empty:
            raise ValueError("No variables to save")
        self._max_to_keep, self._kept = max_to_keep, []

    @property
    def last_checkpoints(self):
        return list(self._kept)

    def save(self, sess, save_path, global_step=None, latest_filename=None, meta_graph_suffix="meta",
             write_meta_graph=True, write_state=True, strip_default_attrs=False, save_debug_info=False):
        save_path = os.fspath(save_path)
        if global_step is not None:
            step = global_step if isinstance(global_step, (int, np.integer)) else _value_of(global_step, sess)
            save_path = f"{save_path}-{int(step)}"
        names = sorted(self._variables)
        values = [_value_of(self._variables[n], sess) for n in names]
        _write_values(save_path, dict(zip(names, values)))
        self._kept = [p for p in self._kept if p != save_path] + [save_path]
        if self._max_to_keep:
            while len(self._kept) > self._max_to_keep:
                old = self._kept.pop(0) + ".npz"
                if os.path.exists(old):
                    os.remove(old)
        if write_state:
            _record(os.path.dirname(save_path) or ".", save_path, self._kept)
        return save_path

    def restore(self, sess, save_path):
        if save_path is None:
            raise ValueError("Can't load save_path when it is None.")
        values = _read_values(os.fspath(save_path))
        for name, var in self._variables.items():
            if name not in values:
                raise NotFoundError(None, None, f"Key {name} not found in checkpoint")
            if context.executing_eagerly():
                var.assign(values[name])
            else:
                var.load(values[name], sess)


def _value_of(tensor_or_variable, sess):
    if context.executing_eagerly() or sess is None:
        return np.asarray(tensor_or_variable.numpy())
    return np.asarray(sess.run(tensor_or_variable))
