"""Keras 3's ModelCheckpoint and BackupAndRestore. They write through ``model.save`` (a ``.keras``
zip) and ``model.save_weights`` (Keras 3's ``.weights.h5`` name, jitgrad's .npz content: see
saving.py), so what they write loads back with ``load_model`` / ``load_weights``."""
import json
import os
import shutil
import zipfile
import warnings

import numpy as np

from .base_callbacks import Callback
from .monitor_callbacks import MonitorCallback


def _check_save_freq(save_freq, message):
    if save_freq != "epoch" and not isinstance(save_freq, int):
        raise ValueError(message)


class _BatchCounter:
    """Keras 3's count of batches since the last save (a new epoch restarts the batch index)."""

    def __init__(self, save_freq, last_batch_seen):
        self.save_freq, self.last_batch_seen, self.since_save = save_freq, last_batch_seen, 0

    def due(self, batch):
        if self.save_freq == "epoch":
            return False
        if self.last_batch_seen is None or batch <= self.last_batch_seen:
            self.since_save += batch + 1
        else:
            self.since_save += batch - self.last_batch_seen
        self.last_batch_seen = batch
        if self.since_save >= self.save_freq:
            self.since_save = 0
            return True
        return False


class ModelCheckpoint(MonitorCallback):
    """Saves the model (``.keras``) or its weights (``save_weights_only``, ``.weights.h5``) after
    every epoch or every ``save_freq`` batches, to ``filepath`` formatted with ``epoch`` (1-based),
    ``batch`` and the logs (``"{epoch:02d}-{val_loss:.2f}.keras"``); with ``save_best_only``
    only when the monitored value beats the best so far (``initial_value_threshold`` to start)."""

    def __init__(self, filepath, monitor="val_loss", verbose=0, save_best_only=False, save_weights_only=False,
                 mode="auto", save_freq="epoch", initial_value_threshold=None):
        super().__init__(monitor, mode, initial_value_threshold)
        self.verbose, self.filepath = verbose, os.fspath(filepath)
        self.save_best_only, self.save_weights_only, self.save_freq = save_best_only, save_weights_only, save_freq
        _check_save_freq(save_freq, f"Unrecognized save_freq: {save_freq}. Expected save_freq are 'epoch' or "
                                    "integer values")
        self._counter = _BatchCounter(save_freq, None)
        self._current_epoch = 0
        if save_weights_only:
            if not self.filepath.endswith(".weights.h5"):
                raise ValueError("When using `save_weights_only=True` in `ModelCheckpoint`, the filepath provided "
                                 f"must end in `.weights.h5` (Keras weights format). Received: "
                                 f"filepath={self.filepath}")
        elif not self.filepath.endswith(".keras"):
            # Keras 3 also takes ".h5" (its legacy HDF5 model file), which jitgrad cannot write
            raise ValueError("The filepath provided must end in `.keras` (Keras model format; jitgrad writes no "
                             f"legacy `.h5` model files). Received: filepath={self.filepath}")

    def on_train_batch_end(self, batch, logs=None):
        if self._counter.due(batch):
            self._save_model(self._current_epoch, batch, logs)

    def on_epoch_begin(self, epoch, logs=None):
        self._current_epoch = epoch

    def on_epoch_end(self, epoch, logs=None):
        if self.monitor_op is None:
            self._set_monitor_op()
        if self.save_freq == "epoch":
            self._save_model(epoch, None, logs)

    def _should_save(self, epoch, logs, filepath):
        logs = logs or {}
        if not self.save_best_only:
            if self.verbose > 0:
                print(f"\nEpoch {epoch + 1}: saving model to {filepath}")
            return True
        current = logs.get(self.monitor)
        if current is None:
            warnings.warn(f"Can save best model only with {self.monitor} available.", stacklevel=2)
            return True
        if isinstance(current, np.ndarray) and current.ndim > 0:
            warnings.warn(f"Can save best model only when `monitor` is a scalar value. Received: {current}. "
                          "Falling back to `save_best_only=False`.")
            return True
        best = "None" if self.best is None else f"{self.best:.5f}"
        if self._is_improvement(current, self.best):
            if self.verbose > 0:
                print(f"\nEpoch {epoch + 1}: {self.monitor} improved from {best} to {current:.5f}, saving model to "
                      f"{filepath}")
            self.best = current
            return True
        if self.verbose > 0:
            print(f"\nEpoch {epoch + 1}: {self.monitor} did not improve from {best}")
        return False

    def _save_model(self, epoch, batch, logs):
        filepath = self._get_file_path(epoch, batch, logs or {})
        if not self._should_save(epoch, logs, filepath):
            return
        if os.path.isdir(filepath):
            raise IOError("Please specify a non-directory filepath for ModelCheckpoint. Filepath used is an "
                          f"existing directory: {filepath}")
        dirname = os.path.dirname(filepath)
        if dirname:
            os.makedirs(dirname, exist_ok=True)
        if self.save_weights_only:
            self.model.save_weights(filepath, overwrite=True)
        else:
            self.model.save(filepath, overwrite=True)
        if self.verbose > 0:
            print(f"\nEpoch {epoch + 1}: finished saving model to {filepath}")

    def _get_file_path(self, epoch, batch, logs):
        try:
            if batch is None or "batch" in logs:
                return self.filepath.format(epoch=epoch + 1, **logs)
            return self.filepath.format(epoch=epoch + 1, batch=batch + 1, **logs)
        except KeyError as e:
            raise KeyError(f'Failed to format this callback filepath: "{self.filepath}". Reason: {e}') from None


class BackupAndRestore(Callback):
    """Keras 3's: after each epoch (or ``save_freq`` batches) the weights and optimizer state go
    to ``backup_dir/latest.weights.h5`` and the epoch to ``training_metadata.json``; a later fit
    with the same ``backup_dir`` restores them and resumes at that epoch. A fit that ends
    normally deletes the directory (``delete_checkpoint``)."""

    def __init__(self, backup_dir, save_freq="epoch", double_checkpoint=False, delete_checkpoint=True):
        super().__init__()
        self.save_freq, self.double_checkpoint, self.delete_checkpoint = save_freq, double_checkpoint, delete_checkpoint
        self._current_epoch = 0
        if not backup_dir:
            raise ValueError("Empty `backup_dir` argument passed")
        self.backup_dir = os.fspath(backup_dir)
        self._weights_path = os.path.join(self.backup_dir, "latest.weights.h5")
        self._training_metadata_path = os.path.join(self.backup_dir, "training_metadata.json")
        self._prev_weights_path = self._weights_path + ".bkp"
        self._prev_training_metadata_path = self._training_metadata_path + ".bkp"
        _check_save_freq(save_freq, f"Invalid value for argument `save_freq`. Received: save_freq={save_freq}. "
                                    "Expected either 'epoch' or an integer value.")
        self._counter = _BatchCounter(save_freq, 0)

    def on_train_begin(self, logs=None):
        try:
            self._load_model()
        except (OSError, ValueError, zipfile.BadZipFile):
            if not os.path.exists(self._prev_weights_path):     # (a backup cut short: the one before)
                raise
            shutil.copy(self._prev_weights_path, self._weights_path)
            if os.path.exists(self._prev_training_metadata_path):
                shutil.copy(self._prev_training_metadata_path, self._training_metadata_path)
            elif os.path.exists(self._training_metadata_path):
                os.remove(self._training_metadata_path)
            self._load_model()

    def _load_model(self):
        if not self.model.built:
            raise ValueError("To use the BackupAndRestore callback, you model must be built before you call `fit()`. "
                             f"Model {self.model} is unbuilt. You can build it beforehand by calling it on a batch "
                             "of data.")
        if os.path.exists(self._weights_path):
            if self.model.optimizer is not None:
                self.model.optimizer.build(self.model.trainable_variables)
            self.model.load_weights(self._weights_path)
        if os.path.exists(self._training_metadata_path):
            with open(self._training_metadata_path) as f:
                self.model._initial_epoch = json.loads(f.read())["epoch"]

    def on_epoch_end(self, epoch, logs=None):
        self._current_epoch = epoch + 1
        self._counter.last_batch_seen = 0
        if self.save_freq == "epoch":
            self._save_model()

    def on_train_batch_end(self, batch, logs=None):
        if self._counter.due(batch):
            self._save_model()

    def _save_model(self):
        os.makedirs(self.backup_dir, exist_ok=True)
        if self.double_checkpoint and os.path.exists(self._weights_path):
            shutil.copy(self._weights_path, self._prev_weights_path)
        if self.double_checkpoint and os.path.exists(self._training_metadata_path):
            shutil.copy(self._training_metadata_path, self._prev_training_metadata_path)
        self.model.save_weights(self._weights_path, overwrite=True)
        with open(self._training_metadata_path, "w") as f:
            f.write(json.dumps({"epoch": self._current_epoch, "batch": self._counter.last_batch_seen}))

    def on_train_end(self, logs=None):
        if self.delete_checkpoint and os.path.exists(self.backup_dir):
            shutil.rmtree(self.backup_dir)
