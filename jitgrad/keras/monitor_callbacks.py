"""Keras 3's callbacks that watch one logged quantity at the end of each epoch: EarlyStopping and
ReduceLROnPlateau (ModelCheckpoint's save_best_only is in checkpoint_callbacks.py), on their
common MonitorCallback: which way is better, and by how much a value must beat the best."""
import operator
import warnings

import numpy as np

from .base_callbacks import Callback


class MonitorCallback(Callback):
    def __init__(self, monitor="val_loss", mode="auto", baseline=None, min_delta=0):
        super().__init__()
        if mode not in ("auto", "min", "max"):
            warnings.warn(f"{type(self).__name__} mode '{mode}' is unknown, fallback to auto mode.", stacklevel=2)
            mode = "auto"
        self.monitor, self.mode, self.best = monitor, mode, baseline
        self.min_delta = abs(min_delta)
        self.monitor_op = None

    def _set_monitor_op(self):
        """Keras 3's rule: min / max as asked; "auto" minimises (val_)loss and otherwise asks the
        compiled metric of that name which way it goes (accuracies up, errors down)."""
        if self.mode == "min":
            self.monitor_op = operator.lt
        elif self.mode == "max":
            self.monitor_op = operator.gt
        else:
            name = self.monitor.removeprefix("val_")
            if name == "loss":
                self.monitor_op = operator.lt
            for metric in getattr(self.model, "_metrics", None) or []:
                if metric.name == name and metric._direction is not None:
                    self.monitor_op = operator.gt if metric._direction == "up" else operator.lt
            if self.monitor_op is None:
                raise ValueError(f"{type(self).__name__} callback received monitor={self.monitor}, but Keras isn't "
                                 "able to automatically determine whether that metric should be maximized or "
                                 "minimized. Pass `mode='max'` in order to monitor based on the highest metric "
                                 "value, or pass `mode='min'` in order to use the lowest value.")
        if self.monitor_op is operator.lt:
            self.min_delta *= -1

    def _is_improvement(self, value, reference):
        if reference is None:
            return True
        return bool(self.monitor_op(value - self.min_delta, reference))


class EarlyStopping(MonitorCallback):
    """Stops training (``model.stop_training``) once the monitored quantity has not improved by
    more than ``min_delta`` for ``patience`` epochs (counted from ``start_from_epoch``, never at
    epoch 0); with a ``baseline``, improvements that do not beat it do not reset the count."""

    def __init__(self, monitor="val_loss", min_delta=0, patience=0, verbose=0, mode="auto", baseline=None,
                 restore_best_weights=False, start_from_epoch=0):
        super().__init__(monitor, mode, min_delta=min_delta)
        self.patience, self.verbose, self.baseline = patience, verbose, baseline
        self.wait = self.stopped_epoch = 0
        self.restore_best_weights, self.best_weights = restore_best_weights, None
        self.start_from_epoch = start_from_epoch

    def on_train_begin(self, logs=None):
        self.wait = self.stopped_epoch = 0
        self.best = self.best_weights = None
        self.best_epoch = 0

    def on_epoch_end(self, epoch, logs=None):
        if self.monitor_op is None:
            self._set_monitor_op()
        current = self.get_monitor_value(logs)
        if current is None or epoch < self.start_from_epoch:
            return
        if self.restore_best_weights and self.best_weights is None:
            self.best_weights, self.best_epoch = self.model.get_weights(), epoch
        self.wait += 1
        if self._is_improvement(current, self.best):
            self.best, self.best_epoch = current, epoch
            if self.restore_best_weights:
                self.best_weights = self.model.get_weights()
            if self.baseline is None or self._is_improvement(current, self.baseline):
                self.wait = 0
            return
        if self.wait >= self.patience and epoch > 0:
            self.stopped_epoch = epoch
            self.model.stop_training = True

    def on_train_end(self, logs=None):
        if self.stopped_epoch > 0 and self.verbose > 0:
            print(f"Epoch {self.stopped_epoch + 1}: early stopping")
        if self.restore_best_weights and self.best_weights is not None:
            if self.verbose > 0:
                print(f"Restoring model weights from the end of the best epoch: {self.best_epoch + 1}.")
            self.model.set_weights(self.best_weights)

    def get_monitor_value(self, logs):
        logs = logs or {}
        value = logs.get(self.monitor)
        if value is None:
            warnings.warn(f"Early stopping conditioned on metric `{self.monitor}` which is not available. "
                          f"Available metrics are: {','.join(logs)}", stacklevel=2)
        return value


def current_learning_rate(optimizer):
    """The optimizer's rate as a Python float (a schedule's at the current step)."""
    return float(np.asarray(optimizer.learning_rate))


class ReduceLROnPlateau(MonitorCallback):
    """Multiplies the optimizer's learning rate by ``factor`` (not below ``min_lr``) once the
    monitored quantity has not improved by ``min_delta`` for ``patience`` epochs, then waits
    ``cooldown`` epochs; adds ``learning_rate`` (the rate the epoch ran with) to the epoch's logs."""

    def __init__(self, monitor="val_loss", factor=0.1, patience=10, verbose=0, mode="auto", min_delta=1e-4,
                 cooldown=0, min_lr=0.0, **kwargs):
        super().__init__(monitor, mode, min_delta=min_delta)
        if factor >= 1.0:
            raise ValueError(f"ReduceLROnPlateau does not support a factor >= 1.0. Received factor={factor}")
        self.factor, self.min_lr, self.patience = factor, min_lr, patience
        self.verbose, self.cooldown = verbose, cooldown
        self.cooldown_counter = self.wait = 0

    def _reset(self):
        self.best = None
        self.cooldown_counter = self.wait = 0

    def on_train_begin(self, logs=None):
        self._reset()

    def _reduce_lr(self, epoch):
        optimizer = self.model.optimizer
        old_lr = current_learning_rate(optimizer)
        if old_lr <= np.float32(self.min_lr):      # (Keras 3 compares with the float32 bound)
            return False
        new_lr = max(old_lr * self.factor, self.min_lr)
        optimizer.learning_rate = new_lr
        if self.verbose > 0:
            print(f"\nEpoch {epoch + 1}: ReduceLROnPlateau reducing learning rate to {new_lr}.")
        return True

    def on_epoch_end(self, epoch, logs=None):
        if self.monitor_op is None:
            self._set_monitor_op()
        logs = logs if logs is not None else {}
        logs["learning_rate"] = current_learning_rate(self.model.optimizer)
        current = logs.get(self.monitor)
        if current is None:
            warnings.warn(f"Learning rate reduction is conditioned on metric `{self.monitor}` which is not "
                          f"available. Available metrics are: {','.join(logs)}.", stacklevel=2)
            return
        if self.in_cooldown():
            self.cooldown_counter -= 1
            self.wait = 0
        if self._is_improvement(current, self.best):
            self.best, self.wait = current, 0
        elif not self.in_cooldown():
            self.wait += 1
            if self.wait >= self.patience and self._reduce_lr(epoch):
                self.cooldown_counter, self.wait = self.cooldown, 0

    def in_cooldown(self):
        return self.cooldown_counter > 0
