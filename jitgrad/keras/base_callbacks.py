"""Keras 3's Callback, CallbackList (how fit / evaluate / predict call the callbacks), History,
ProgbarLogger, LambdaCallback and Progbar (its text: ``4/4 ━━━━━━━━━━━━━━━━━━━━ 0s 3ms/step -
loss: 0.6515``); ``tf.keras.callbacks`` is callbacks.py."""
import math
import sys
import time

import numpy as np

from .. import nest


class Progbar:
    """Keras 3's progress bar, verbose 1 (a redrawn line, finished with a newline) or
    2 (one line at the end)."""

    def __init__(self, target, width=20, verbose=1, interval=0.05, unit_name="step"):
        self.target, self.width, self.verbose = target, width, verbose
        self.interval, self.unit_name = interval, unit_name
        self._values, self._order = {}, []
        self._start = time.time()
        self._last_update = 0.0
        self._time_after_first_step = None
        self._prev_total_width = 0

    def _step_time(self, current, now):
        if not current:
            return 0.0
        if self._time_after_first_step is not None and current > 1:
            per = (now - self._time_after_first_step) / (current - 1)
        else:
            per = (now - self._start) / current
        if current == 1:
            self._time_after_first_step = now
        return per

    @staticmethod
    def _format_time(per, unit):
        if per >= 1 or per == 0:
            return f" {per:.0f}s/{unit}"
        if per >= 1e-3:
            return f" {per * 1e3:.0f}ms/{unit}"
        return f" {per * 1e6:.0f}us/{unit}"

    def _metrics_text(self, strict_positive):
        text = ""
        for k in self._order:
            v = float(np.mean(self._values[k]))
            big = v > 1e-3 if strict_positive else abs(v) > 1e-3
            text += f" - {k}: {v:.4f}" if big else f" - {k}: {v:.4e}"
        return text

    def update(self, current, values=None, finalize=None):
        if finalize is None:
            finalize = self.target is not None and current >= self.target
        for k, v in values or []:
            if k not in self._order:
                self._order.append(k)
            self._values[k] = v
        now = time.time()
        per = self._step_time(current, now)
        if self.verbose == 1:
            if now - self._last_update < self.interval and not finalize:
                return
            message = "\b" * self._prev_total_width + "\r"
            special = 0
            if self.target is not None and self.target > 0:
                digits = int(math.log10(self.target)) + 1
                bar = f"\x1b[1m{current:{digits}d}/{self.target}\x1b[0m "
                special += 8
                filled = int(self.width * float(current) / self.target)
                if filled > 0:
                    bar += f"\x1b[32m{'━' * filled}\x1b[0m"
                    special += 9
                bar += f"\x1b[37m{'━' * (self.width - filled)}\x1b[0m"
                special += 9
            else:
                bar = "%7d/Unknown" % current
            if self.target is not None and self.target > 0 and not finalize:
                eta = per * (self.target - current)
                if eta > 3600:
                    eta_text = "%d:%02d:%02d" % (eta // 3600, (eta % 3600) // 60, eta % 60)
                elif eta > 60:
                    eta_text = "%d:%02d" % (eta // 60, eta % 60)
                else:
                    eta_text = "%ds" % eta
                info = f" \x1b[1m{eta_text}\x1b[0m"
            else:
                info = f" \x1b[1m{now - self._start:.0f}s\x1b[0m"
            special += 8
            info += self._format_time(per, self.unit_name) + self._metrics_text(False)
            total_width = len(bar) + len(info) - special
            message += bar + info
            if self._prev_total_width > total_width:
                message += " " * (self._prev_total_width - total_width)
            if finalize:
                message += "\n"
            sys.stdout.write(message)
            sys.stdout.flush()
            self._prev_total_width = total_width
        elif self.verbose == 2 and finalize and self.target:
            digits = int(math.log10(self.target)) + 1
            info = f"{current:{digits}d}/{self.target} - {now - self._start:.0f}s -"
            info += self._format_time(per, self.unit_name) + self._metrics_text(True) + "\n"
            sys.stdout.write(info)
            sys.stdout.flush()
        self._last_update = now


class Callback:
    def __init__(self):
        self.model = None
        self.params = {}

    def set_model(self, model):
        self.model = model

    def set_params(self, params):
        self.params = params

    def on_train_begin(self, logs=None): pass          # noqa: E704
    def on_train_end(self, logs=None): pass            # noqa: E704
    def on_epoch_begin(self, epoch, logs=None): pass   # noqa: E704
    def on_epoch_end(self, epoch, logs=None): pass     # noqa: E704
    def on_batch_begin(self, batch, logs=None): pass   # noqa: E704
    def on_batch_end(self, batch, logs=None): pass     # noqa: E704

    # Keras 3: the train-batch hooks are the (older) batch hooks unless overridden
    def on_train_batch_begin(self, batch, logs=None):
        self.on_batch_begin(batch, logs=logs)

    def on_train_batch_end(self, batch, logs=None):
        self.on_batch_end(batch, logs=logs)

    def on_test_begin(self, logs=None): pass           # noqa: E704
    def on_test_end(self, logs=None): pass             # noqa: E704
    def on_test_batch_begin(self, batch, logs=None): pass    # noqa: E704
    def on_test_batch_end(self, batch, logs=None): pass      # noqa: E704
    def on_predict_begin(self, logs=None): pass        # noqa: E704
    def on_predict_end(self, logs=None): pass          # noqa: E704
    def on_predict_batch_begin(self, batch, logs=None): pass  # noqa: E704
    def on_predict_batch_end(self, batch, logs=None): pass    # noqa: E704


class History(Callback):
    """``model.fit``'s return value: ``history`` {metric: [value per epoch]}, ``epoch``, ``params``."""

    def __init__(self):
        super().__init__()
        self.history = {}
        self.epoch = []

    def on_train_begin(self, logs=None):
        self.epoch = []

    def on_epoch_end(self, epoch, logs=None):
        self.epoch.append(epoch)
        for k, v in (logs or {}).items():
            self.history.setdefault(k, []).append(v)


class LambdaCallback(Callback):
    def __init__(self, on_epoch_begin=None, on_epoch_end=None, on_train_begin=None, on_train_end=None,
                 on_train_batch_begin=None, on_train_batch_end=None, **kwargs):
        super().__init__()
        for name, fn in dict(kwargs, on_epoch_begin=on_epoch_begin, on_epoch_end=on_epoch_end,
                             on_train_begin=on_train_begin, on_train_end=on_train_end,
                             on_train_batch_begin=on_train_batch_begin, on_train_batch_end=on_train_batch_end).items():
            if fn is not None:
                setattr(self, name, fn)


class ProgbarLogger(Callback):
    """Keras 3's: "Epoch i/n" (when n > 1) and a progress bar per epoch, or per evaluate/predict."""

    def __init__(self):
        super().__init__()
        self.progbar, self.seen, self.in_fit = None, 0, False

    def _verbose(self):
        v = self.params.get("verbose", 1)
        return 1 if v == "auto" else v

    def _bar(self):
        if self.progbar is None:
            self.progbar = Progbar(self.params.get("steps"), verbose=self._verbose())
        return self.progbar

    def _update(self, batch, logs):
        self.seen = batch + 1
        if self._verbose() == 1:
            self._bar().update(self.seen, list((logs or {}).items()), finalize=False)

    def _finalize(self, logs):
        bar = self._bar()
        if bar.target is None:
            bar.target = self.seen
        bar.update(bar.target, list((logs or {}).items()), finalize=True)

    def on_train_begin(self, logs=None):
        self.in_fit = True

    def on_epoch_begin(self, epoch, logs=None):
        self.progbar, self.seen = None, 0
        if self._verbose() and self.params.get("epochs", 1) > 1:
            sys.stdout.write(f"Epoch {epoch + 1}/{self.params['epochs']}\n")

    def on_train_batch_end(self, batch, logs=None):
        self._update(batch, logs)

    def on_epoch_end(self, epoch, logs=None):
        self._finalize(logs)

    def on_test_begin(self, logs=None):
        if not self.in_fit:
            self.progbar, self.seen = None, 0

    def on_test_batch_end(self, batch, logs=None):
        if not self.in_fit:
            self._update(batch, logs)

    def on_test_end(self, logs=None):
        if not self.in_fit:
            self._finalize(logs)

    def on_predict_begin(self, logs=None):
        self.progbar, self.seen = None, 0

    def on_predict_batch_end(self, batch, logs=None):
        self._update(batch, None)

    def on_predict_end(self, logs=None):
        self._finalize(None)


def _python_logs(logs):
    """Keras 3's pythonify_logs: a new dict, keys sorted, nested dicts flattened, values float
    where they convert -- one dict per event, which every callback sees (so a key one adds,
    as ReduceLROnPlateau's ``learning_rate``, reaches those after it, History included)."""
    out = {}
    for key, value in sorted((logs or {}).items()):
        if isinstance(value, dict):
            out.update(_python_logs(value))
            continue
        try:
            value = float(np.asarray(value)) if hasattr(value, "numpy") else float(value)
        except (TypeError, ValueError):
            pass
        out[key] = value
    return out


class CallbackList(Callback):
    """Keras 3's: the callbacks in order, then a History (``add_history``) and a ProgbarLogger
    (``add_progbar``) unless one is in the list already; each event goes to each in order."""

    def __init__(self, callbacks=None, add_history=False, add_progbar=False, model=None, **params):
        super().__init__()
        self.callbacks = list(nest.flatten(callbacks)) if callbacks else []
        self._history = next((cb for cb in self.callbacks if isinstance(cb, History)), None)
        self._progbar = next((cb for cb in self.callbacks if isinstance(cb, ProgbarLogger)), None)
        if self._history is None and add_history:
            self._history = History()
            self.callbacks.append(self._history)
        if self._progbar is None and add_progbar:
            self._progbar = ProgbarLogger()
            self.callbacks.append(self._progbar)
        self.set_model(model)
        self.set_params(params)

    def set_model(self, model):
        if not model:
            return
        super().set_model(model)
        if self._history:
            model.history = self._history
        for cb in self.callbacks:
            cb.set_model(model)

    def set_params(self, params):
        self.params = params
        if params:
            for cb in self.callbacks:
                cb.set_params(params)



def _dispatch(event):
    """CallbackList's ``event``: the logs made Python's once, then each callback's hook, as Keras 3
    calls it (batch hooks take the logs by keyword, the others by position)."""
    if "batch" in event:
        def call(self, batch, logs=None):
            logs = _python_logs(logs)
            for cb in self.callbacks:
                getattr(cb, event)(batch, logs=logs)
    elif "epoch" in event:
        def call(self, epoch, logs=None):
            logs = _python_logs(logs)
            for cb in self.callbacks:
                getattr(cb, event)(epoch, logs)
    else:
        def call(self, logs=None):
            logs = _python_logs(logs)
            for cb in self.callbacks:
                getattr(cb, event)(logs)
    call.__name__ = event
    return call


for _event in ("on_train_begin", "on_train_end", "on_epoch_begin", "on_epoch_end", "on_batch_begin", "on_batch_end",
               "on_train_batch_begin", "on_train_batch_end", "on_test_begin", "on_test_end", "on_test_batch_begin",
               "on_test_batch_end", "on_predict_begin", "on_predict_end", "on_predict_batch_begin",
               "on_predict_batch_end"):
    setattr(CallbackList, _event, _dispatch(_event))

