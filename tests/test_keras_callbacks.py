"""tf.keras.callbacks as Keras 3's (TF 2.21): EarlyStopping, ReduceLROnPlateau,
LearningRateScheduler, TerminateOnNaN, CSVLogger, ModelCheckpoint, BackupAndRestore, and the
CallbackList / fit protocol they rely on (event order, logs, stop_training).

The model is a Dense(1) with set weights on fixed data, trained by SGD: the expected losses and
weights come from the same SGD written in numpy here. Where a test needs a monitored quantity to
follow a set sequence, a callback placed before the one under test writes it into the epoch's
logs (Keras 3 hands one logs dict to every callback of an event, so later ones see it)."""
import json
import os

import numpy as np
import pytest

import jitgrad as tf

X = np.linspace(-1, 1, 8).astype(np.float32).reshape(8, 1)
Y = (3 * X + 1).astype(np.float32)
XV = np.array([[0.3], [-0.7]], np.float32)
YV = 3 * XV + 1
callbacks = tf.keras.callbacks


def model(lr=0.05, metrics=(), run_eagerly=False, optimizer=None):
    m = tf.keras.Sequential([tf.keras.Input((1,)), tf.keras.layers.Dense(1)])
    m.set_weights([np.array([[0.5]], np.float32), np.array([0.], np.float32)])
    m.compile(optimizer or tf.keras.optimizers.SGD(lr), "mse", metrics=list(metrics), run_eagerly=run_eagerly)
    return m


def numpy_sgd(lrs, w=0.5, b=0.0):
    """Full-batch SGD on mse, one step per epoch at lrs[epoch]: (loss before each step, w, b)."""
    x, y = X[:, 0].astype(np.float64), Y[:, 0].astype(np.float64)
    losses = []
    for lr in lrs:
        err = w * x + b - y
        losses.append(np.mean(err ** 2))
        w, b = w - lr * np.mean(2 * err * x), b - lr * np.mean(2 * err)
    return losses, w, b


def fit(m, epochs, cbs, **kwargs):
    kwargs.setdefault("batch_size", 8)      # one step per epoch
    return m.fit(X, Y, epochs=epochs, shuffle=False, verbose=0, callbacks=cbs, **kwargs)


class Script(callbacks.Callback):
    """Writes values[epoch] into the epoch's logs under ``key``."""

    def __init__(self, key, values):
        super().__init__()
        self.key, self.values = key, values

    def on_epoch_end(self, epoch, logs=None):
        logs[self.key] = self.values[epoch]


def read(path):
    with open(path, newline="") as f:
        return f.read()


def weights(m):
    w, b = m.get_weights()
    return float(w[0, 0]), float(b[0])


# ------------------------------------------------------------------ learning rate reaching the step
@pytest.mark.parametrize("run_eagerly", [False, True])
def test_a_learning_rate_set_between_epochs_reaches_the_compiled_step(run_eagerly):
    # (the compiled step used to keep the rate it was traced with)
    lrs = [0.1, 0.05, 0.2, 0.01]
    m = model(run_eagerly=run_eagerly)
    h = fit(m, 4, [callbacks.LambdaCallback(on_epoch_begin=lambda e, logs: setattr(m.optimizer, "learning_rate",
                                                                                   lrs[e]))])
    losses, w, b = numpy_sgd(np.float32(lrs))
    np.testing.assert_allclose(h.history["loss"], losses, rtol=1e-5)
    np.testing.assert_allclose(weights(m), (w, b), rtol=1e-5)
    assert float(m.optimizer.learning_rate) == float(np.float32(0.01))


def test_learning_rate_is_a_float32_variable_and_a_schedule_is_not_settable():
    opt = tf.keras.optimizers.SGD(0.1)
    assert float(opt.learning_rate) == float(np.float32(0.1))
    opt.learning_rate = 0.25
    assert float(opt.learning_rate) == 0.25
    rate = tf.Variable(0.5)        # (TF 2.21 refuses a Variable; jitgrad reads the one given)
    opt, w = tf.keras.optimizers.SGD(rate), tf.Variable(1.0)
    step = tf.function(lambda: opt.apply_gradients([(tf.constant(1.0), w)]))
    step()
    rate.assign(0.25)
    step()
    assert float(w.numpy()) == 1.0 - 0.5 - 0.25
    sched = tf.keras.optimizers.SGD(tf.keras.optimizers.schedules.ExponentialDecay(0.1, 1, 0.5))
    with pytest.raises(TypeError, match="not settable"):
        sched.learning_rate = 0.1


# ------------------------------------------------------------------ protocol
def test_event_order_and_logs_keys_as_tf():
    events = []

    class Recorder(callbacks.Callback):
        def __getattribute__(self, name):
            if name.startswith("on_"):
                def record(*args, **kwargs):
                    logs = kwargs.get("logs", args[-1] if args else None)
                    events.append((name, tuple(sorted(logs))))
                return record
            return object.__getattribute__(self, name)

    m = model(metrics=["mae"])
    h = m.fit(X, Y, batch_size=4, epochs=2, shuffle=False, verbose=0, validation_data=(XV, YV),
              callbacks=[Recorder()])
    train, val = ("loss", "mae"), ("loss", "mae", "val_loss", "val_mae")
    epoch = [("on_epoch_begin", ()), ("on_train_batch_begin", ()), ("on_train_batch_end", train),
             ("on_train_batch_begin", ()), ("on_train_batch_end", train), ("on_test_begin", ()),
             ("on_test_batch_begin", ()), ("on_test_batch_end", train), ("on_test_end", train),
             ("on_epoch_end", val)]
    assert events == [("on_train_begin", ())] + epoch * 2 + [("on_train_end", val)]    # TF 2.21's sequence
    assert m.history is h and h.epoch == [0, 1] and h.params == {"verbose": 0, "epochs": 2, "steps": 2}
    assert list(h.history) == ["loss", "mae", "val_loss", "val_mae"]


def test_two_argument_lambda_callbacks_get_logs_and_predict_batches_get_outputs():
    seen = []
    cb = callbacks.LambdaCallback(on_epoch_begin=lambda epoch, logs: seen.append(("begin", epoch, logs)),
                                  on_predict_batch_end=lambda batch, logs: seen.append(("predict", batch, logs)))
    m = model()
    fit(m, 1, [cb])
    m.predict(XV, verbose=0, callbacks=[cb])
    assert seen[0] == ("begin", 0, {})
    assert seen[1][:2] == ("predict", 0)
    w, b = m.get_weights()
    np.testing.assert_allclose(seen[1][2]["outputs"], XV @ w + b, rtol=1e-6)


def test_on_batch_end_is_the_train_batch_hook():
    batches = []

    class Old(callbacks.Callback):
        def on_batch_end(self, batch, logs=None):
            batches.append(batch)

    fit(model(), 2, [Old()], batch_size=4)
    assert batches == [0, 1, 0, 1]


# ------------------------------------------------------------------ EarlyStopping
@pytest.mark.parametrize("values, kwargs, stopped, best", [
    ([5, 4, 4.5, 4.2, 4.1, 3], dict(patience=2), 3, 4),        # best 4 at epoch 1; 2 epochs without
    ([5, 4.6, 4.2, 3.9], dict(patience=1, min_delta=0.5), 1, 5),   # 4.6 is not 0.5 below 5
    ([5, 4, 4, 4, 4], dict(patience=2), 3, 4),
    ([5, 4, 4, 4, 4], dict(patience=2, baseline=1.0), 2, 4),   # improvements short of the baseline keep counting
    ([1, 2, 3, 4, 5], dict(patience=0), 1, 1),
    ([1, 2, 3, 4, 5], dict(patience=0, start_from_epoch=2), 3, 3),
    ([5, 4, 3, 2, 1], dict(patience=0), 0, 1),                  # never stops: stopped_epoch stays 0
])
def test_early_stopping_epoch(values, kwargs, stopped, best):
    es = callbacks.EarlyStopping(monitor="score", mode="min", **kwargs)
    h = fit(model(), len(values), [Script("score", values), es])
    assert es.stopped_epoch == stopped and es.best == best
    assert len(h.history["loss"]) == (stopped + 1 if stopped else len(values))


def test_early_stopping_auto_mode_maximises_accuracy_and_minimises_loss():
    m = model(metrics=["acc"])
    es = callbacks.EarlyStopping(monitor="acc", patience=1)
    h = fit(m, 5, [Script("acc", [0.5, 0.75, 0.75, 0.8, 0.9]), es])
    assert es.stopped_epoch == 2 and es.best == 0.75 and len(h.history["acc"]) == 3
    es = callbacks.EarlyStopping(monitor="val_loss", patience=0)
    h = m.fit(X, Y, batch_size=8, epochs=3, shuffle=False, verbose=0, validation_data=(XV, YV),
              callbacks=[Script("val_loss", [3, 2, 2.5]), es])
    assert es.stopped_epoch == 2
    with pytest.raises(ValueError, match="automatically determine"):
        fit(model(), 1, [Script("score", [1.0]), callbacks.EarlyStopping(monitor="score")])


def test_early_stopping_restores_the_best_weights_and_says_so(capsys):
    es = callbacks.EarlyStopping(monitor="score", mode="min", patience=1, restore_best_weights=True, verbose=1)
    m = model(lr=0.1)
    fit(m, 6, [Script("score", [3, 1, 2, 2, 2, 2]), es])
    assert es.stopped_epoch == 2 and es.best_epoch == 1
    _, w, b = numpy_sgd([np.float32(0.1)] * 2)       # the weights at the end of epoch 1
    np.testing.assert_allclose(weights(m), (w, b), rtol=1e-5)
    assert capsys.readouterr().out == ("Epoch 3: early stopping\n"
                                       "Restoring model weights from the end of the best epoch: 2.\n")


def test_early_stopping_warns_when_the_quantity_is_missing():
    es = callbacks.EarlyStopping(monitor="val_loss")
    with pytest.warns(UserWarning, match="Early stopping conditioned on metric `val_loss` which is not available"):
        h = fit(model(), 3, [es])
    assert len(h.history["loss"]) == 3 and es.stopped_epoch == 0


# ------------------------------------------------------------------ ReduceLROnPlateau
def test_reduce_lr_on_plateau_factor_cooldown_and_min_lr(capsys):
    f32 = lambda v: float(np.float32(v))      # noqa: E731 (the rate is a float32 variable)
    cb = callbacks.ReduceLROnPlateau(monitor="score", mode="min", factor=0.5, patience=1, cooldown=2, verbose=1)
    m = model(lr=0.1)
    h = fit(m, 6, [Script("score", [5] * 6), cb])
    # epoch 1 reduces, 2 cools down, 3 reduces, 4 cools down, 5 reduces; logs hold the rate each epoch ran with
    expected = [0.1, 0.1, f32(0.1) * 0.5, f32(0.1) * 0.5, f32(f32(0.1) * 0.5) * 0.5, f32(f32(0.1) * 0.5) * 0.5]
    np.testing.assert_allclose(h.history["learning_rate"], expected, rtol=1e-7)
    losses, w, b = numpy_sgd(np.float32(h.history["learning_rate"]))
    np.testing.assert_allclose(h.history["loss"], losses, rtol=1e-5)
    np.testing.assert_allclose(weights(m), (w, b), rtol=1e-5)
    assert capsys.readouterr().out.count("ReduceLROnPlateau reducing learning rate to") == 3

    cb = callbacks.ReduceLROnPlateau(monitor="score", mode="min", factor=0.5, patience=1, min_lr=0.03)
    m = model(lr=0.1)
    h = fit(m, 7, [Script("score", [5] * 7), cb])
    # 0.1 -> 0.05 -> 0.03 (the bound); then not reduced: float32(0.03) is not above np.float32(0.03)
    assert float(m.optimizer.learning_rate) == f32(0.03)
    assert h.history["learning_rate"][-1] == f32(0.03)


def test_reduce_lr_on_plateau_improvement_resets_and_bad_arguments():
    cb = callbacks.ReduceLROnPlateau(monitor="score", mode="max", factor=0.1, patience=2, min_delta=0.5)
    m = model(lr=0.1)
    fit(m, 5, [Script("score", [1, 1.4, 2, 2.2, 2.4]), cb])    # +0.4 is no improvement; +0.6 is
    assert cb.best == 2 and cb.wait == 0 and float(m.optimizer.learning_rate) == pytest.approx(0.01)
    with pytest.raises(ValueError, match="factor >= 1.0"):
        callbacks.ReduceLROnPlateau(factor=1.0)
    m = model(optimizer=tf.keras.optimizers.SGD(tf.keras.optimizers.schedules.ExponentialDecay(0.1, 1, 0.5)))
    with pytest.raises(TypeError, match="not settable"):
        fit(m, 2, [callbacks.ReduceLROnPlateau("loss", patience=0, min_delta=100)])


# ------------------------------------------------------------------ LearningRateScheduler
@pytest.mark.parametrize("schedule", [lambda epoch: 0.1 / (epoch + 1), lambda epoch, lr: 0.1 / (epoch + 1)])
def test_learning_rate_scheduler(schedule, capsys):
    m = model()
    h = fit(m, 4, [callbacks.LearningRateScheduler(schedule, verbose=1)])
    lrs = np.float32([0.1, 0.05, 0.1 / 3, 0.025])
    np.testing.assert_array_equal(np.float32(h.history["learning_rate"]), lrs)
    losses, w, b = numpy_sgd(lrs)
    np.testing.assert_allclose(h.history["loss"], losses, rtol=1e-5)
    np.testing.assert_allclose(weights(m), (w, b), rtol=1e-5)
    assert "\nEpoch 2: LearningRateScheduler setting learning rate to 0.05.\n" in capsys.readouterr().out


def test_learning_rate_scheduler_gets_the_current_rate_and_wants_a_float():
    seen = []
    fit(model(lr=0.2), 3, [callbacks.LearningRateScheduler(lambda e, lr: seen.append(lr) or lr / 2)])
    np.testing.assert_allclose(seen, [0.2, 0.1, 0.05], rtol=1e-6)
    with pytest.raises(ValueError, match="should be a float. Got: 1"):
        fit(model(), 1, [callbacks.LearningRateScheduler(lambda e: 1)])


# ------------------------------------------------------------------ TerminateOnNaN
def test_terminate_on_nan_stops_after_the_batch(capsys):
    y = Y.copy()
    y[4] = np.nan                   # batch 2 of 4 (batch size 2)
    m = model()
    ended = []
    h = m.fit(X, y, batch_size=2, epochs=3, shuffle=False, verbose=0,
              callbacks=[callbacks.TerminateOnNaN(), callbacks.LambdaCallback(on_train_end=ended.append)])
    assert int(m.optimizer.iterations) == 3 and len(h.history["loss"]) == 1 and np.isnan(h.history["loss"][0])
    assert ended and "Batch 2: Invalid loss, terminating training\n" in capsys.readouterr().out
    m, ended = model(), []
    with pytest.raises(RuntimeError, match="NaN or Inf loss encountered at batch 2"):
        m.fit(X, y, batch_size=2, epochs=3, shuffle=False, verbose=0,
              callbacks=[callbacks.TerminateOnNaN(raise_error=True), callbacks.LambdaCallback(on_train_end=ended.append)])
    assert not ended and int(m.optimizer.iterations) == 3


# ------------------------------------------------------------------ CSVLogger
def test_csv_logger_rows_as_keras(tmp_path):
    path = str(tmp_path / "log.csv")
    m = model(metrics=["mae"])
    h = m.fit(X, Y, batch_size=4, epochs=2, shuffle=False, verbose=0, callbacks=[callbacks.CSVLogger(path)])
    # (the first rows of TF 2.21's file for this fit, byte for byte)
    assert read(path) == ("epoch,loss,mae,val_loss,val_mae\r\n0,3.7007393836975098,"
                                             "1.5964285135269165,NA,NA\r\n1,2.908207416534424,1.4343907833099365,"
                                             "NA,NA\r\n")
    h = m.fit(X, Y, batch_size=4, epochs=1, shuffle=False, verbose=0, validation_data=(XV, YV),
              callbacks=[callbacks.CSVLogger(path, separator=";", append=True)])
    row = ";".join(["0"] + [repr(h.history[k][0]) for k in ("loss", "mae", "val_loss", "val_mae")])
    assert read(path).endswith("NA,NA\r\n" + row + "\r\n")      # no second header
    fit(m, 1, [callbacks.ReduceLROnPlateau("loss"), callbacks.CSVLogger(path)])
    header, row = read(path).splitlines()
    assert header == "epoch,learning_rate,loss,mae,val_learning_rate,val_loss,val_mae"
    assert row.startswith("0,0.05000000074505806,") and row.endswith(",NA,NA,NA")


# ------------------------------------------------------------------ ModelCheckpoint
def test_model_checkpoint_names_and_contents(tmp_path, capsys):
    m = model()
    h = m.fit(X, Y, batch_size=4, epochs=3, shuffle=False, verbose=0, validation_data=(XV, YV),
              callbacks=[callbacks.ModelCheckpoint(str(tmp_path / "ck" / "{epoch:02d}-{val_loss:.2f}.keras"),
                                                   verbose=1)])
    names = sorted(os.listdir(tmp_path / "ck"))
    assert names == [f"{e + 1:02d}-{v:.2f}.keras" for e, v in enumerate(h.history["val_loss"])]
    assert names == ["01-1.42.keras", "02-1.14.keras", "03-0.93.keras"]      # as TF 2.21
    out = capsys.readouterr().out
    assert f"\nEpoch 1: saving model to {tmp_path / 'ck' / '01-1.42.keras'}\n" in out
    np.testing.assert_array_equal(tf.keras.models.load_model(str(tmp_path / "ck" / names[-1])).get_weights()[0],
                                  m.get_weights()[0])


def test_model_checkpoint_save_best_only_weights(tmp_path, capsys):
    path = str(tmp_path / "best.weights.h5")
    m = model()
    saved = []
    cb = callbacks.ModelCheckpoint(path, monitor="score", mode="min", save_weights_only=True, save_best_only=True,
                                   verbose=1, initial_value_threshold=4.0)
    record = callbacks.LambdaCallback(on_epoch_end=lambda e, logs: saved.append(m.get_weights()))
    fit(m, 5, [Script("score", [5, 3, 3.5, 2, 2.5]), cb, record])
    assert cb.best == 2
    m2 = model()
    m2.load_weights(path)
    np.testing.assert_array_equal(m2.get_weights()[0], saved[3][0])     # epoch 3's, the best
    out = capsys.readouterr().out
    assert "\nEpoch 1: score did not improve from 4.00000\n" in out
    assert f"\nEpoch 2: score improved from 4.00000 to 3.00000, saving model to {path}\n" in out
    assert "\nEpoch 3: score did not improve from 3.00000\n" in out


def test_model_checkpoint_every_n_batches(tmp_path):
    pattern = str(tmp_path / "e{epoch}b{batch}.weights.h5")
    fit(model(), 2, [callbacks.ModelCheckpoint(pattern, save_weights_only=True, save_freq=3)], batch_size=2)
    # 4 batches an epoch: saved after the 3rd (epoch 1, batch 3) and the 6th (epoch 2, batch 2)
    assert sorted(os.listdir(tmp_path)) == ["e1b3.weights.h5", "e2b2.weights.h5"]


def test_model_checkpoint_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="must end in `.weights.h5`"):
        callbacks.ModelCheckpoint("a.h5", save_weights_only=True)
    with pytest.raises(ValueError, match="must end in `.keras`"):
        callbacks.ModelCheckpoint("a.weights")
    with pytest.raises(ValueError, match="Unrecognized save_freq: batch"):
        callbacks.ModelCheckpoint("a.keras", save_freq="batch")
    with pytest.raises(KeyError, match="Failed to format this callback filepath"):
        fit(model(), 1, [callbacks.ModelCheckpoint(str(tmp_path / "{foo}.keras"))])


# ------------------------------------------------------------------ BackupAndRestore, weights files
class Interrupt(callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        if epoch == 3:
            raise KeyboardInterrupt


def test_backup_and_restore_resumes_as_if_uninterrupted(tmp_path):
    adam = lambda: tf.keras.optimizers.Adam(0.1)      # noqa: E731 (its moments must be restored too)
    reference = model(optimizer=adam())
    href = fit(reference, 6, [], batch_size=4)
    backup = str(tmp_path / "backup")
    with pytest.raises(KeyboardInterrupt):
        fit(model(optimizer=adam()), 6, [callbacks.BackupAndRestore(backup), Interrupt()], batch_size=4)
    assert sorted(os.listdir(backup)) == ["latest.weights.h5", "training_metadata.json"]
    assert json.loads(read(os.path.join(backup, "training_metadata.json"))) == {"epoch": 3, "batch": 0}
    m = model(optimizer=adam())
    h = fit(m, 6, [callbacks.BackupAndRestore(backup)], batch_size=4)
    assert h.epoch == [3, 4, 5]
    np.testing.assert_array_equal(h.history["loss"], href.history["loss"][3:])
    np.testing.assert_array_equal(m.get_weights()[0], reference.get_weights()[0])
    assert not os.path.exists(backup)       # deleted after a finished fit
    with pytest.raises(ValueError, match="Empty `backup_dir`"):
        callbacks.BackupAndRestore("")


def test_save_weights_keeps_the_optimizer_state(tmp_path):
    path = str(tmp_path / "m.weights.h5")
    m = model(optimizer=tf.keras.optimizers.Adam(0.1))
    fit(m, 2, [], batch_size=4)
    m.optimizer.learning_rate = 0.05
    m.save_weights(path)
    fresh = model(optimizer=tf.keras.optimizers.Adam(0.1))
    with pytest.warns(UserWarning, match="Skipping variable loading for optimizer 'adam', because it has 2 "
                                         "variables whereas the saved optimizer has 6 variables"):
        fresh.load_weights(path)      # (an unbuilt optimizer: TF 2.21 skips it with this warning)
    assert int(fresh.optimizer.iterations) == 0
    np.testing.assert_array_equal(fresh.get_weights()[0], m.get_weights()[0])
    built = model(optimizer=tf.keras.optimizers.Adam(0.1))
    built.optimizer.build(built.trainable_variables)
    built.load_weights(path)
    assert int(built.optimizer.iterations) == 4 and float(built.optimizer.learning_rate) == float(np.float32(0.05))
    for a, b in zip(built.optimizer.variables, m.optimizer.variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_tensorboard_and_remote_monitor_are_absent():
    assert not hasattr(callbacks, "TensorBoard") and not hasattr(callbacks, "RemoteMonitor")
