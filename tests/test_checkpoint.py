"""tf.train.Checkpoint / CheckpointManager / latest_checkpoint: a save restored into fresh
objects gives back every value, and training resumed from it continues bit for bit."""
import os

import numpy as np
import pytest

import jitgrad as tf


def _model_and_optimizer():
    model = tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.Dense(3), tf.keras.layers.BatchNormalization(),
                                 tf.keras.layers.Dense(1)])
    optimizer = tf.keras.optimizers.Adam(0.01)
    model.compile(loss="mse", optimizer=optimizer)
    return model, optimizer


def test_resumed_training_continues_bit_for_bit(tmp_path):
    rng = np.random.default_rng(0)
    x, y = rng.random((8, 2), np.float32), rng.random((8, 1), np.float32)
    model, optimizer = _model_and_optimizer()
    model.fit(x, y, epochs=2, verbose=0, shuffle=False)
    step = tf.Variable(7)
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=model, optimizer=optimizer, step=step),
                                         tmp_path, max_to_keep=2)
    paths = [manager.save() for _ in range(3)]
    assert paths == [os.path.join(tmp_path, f"ckpt-{n}") for n in (1, 2, 3)]
    assert manager.checkpoints == paths[1:] and tf.train.latest_checkpoint(tmp_path) == paths[-1]
    assert sorted(os.listdir(tmp_path)) == ["checkpoint", "ckpt-2.npz", "ckpt-3.npz"]   # max_to_keep

    fresh, fresh_optimizer = _model_and_optimizer()
    fresh_step = tf.Variable(0)
    status = tf.train.Checkpoint(model=fresh, optimizer=fresh_optimizer, step=fresh_step).restore(
        tf.train.latest_checkpoint(tmp_path))
    status.assert_consumed()                   # every value used, every variable (Adam's slots too) restored
    for a, b in zip(model.get_weights(), fresh.get_weights()):
        np.testing.assert_array_equal(a, b)
    assert int(fresh_step.numpy()) == 7 and int(fresh_optimizer.iterations.numpy()) == 2
    model.fit(x, y, epochs=1, verbose=0, shuffle=False)
    fresh.fit(x, y, epochs=1, verbose=0, shuffle=False)
    for a, b in zip(model.get_weights(), fresh.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_modules_partial_restores_and_errors(tmp_path):
    class Net(tf.Module):
        def __init__(self):
            super().__init__()
            self.w = tf.Variable([1.0, 2.0])
            self.parts = [tf.Variable(3.0), {"b": tf.Variable(np.float64(4.0))}]

    net = Net()
    path = tf.train.Checkpoint(net=net).save(os.path.join(tmp_path, "m"))
    assert path.endswith("m-1")
    other = Net()
    for v in other.variables:
        v.assign(v * 0)
    tf.train.Checkpoint(net=other).restore(path).assert_consumed()
    assert [other.w.numpy().tolist(), float(other.parts[0].numpy()), float(other.parts[1]["b"].numpy())] == [
        [1.0, 2.0], 3.0, 4.0]
    partial = tf.train.Checkpoint(net=other, extra=tf.Variable(9.0)).restore(path)
    with pytest.raises(AssertionError):
        partial.assert_consumed()              # 'extra' has no saved value
    with pytest.raises(ValueError, match="incompatible tensor with shape"):
        tf.train.Checkpoint(net=tf.Variable([1.0])).restore(tf.train.Checkpoint(net=tf.Variable(2.0)).write(
            os.path.join(tmp_path, "scalar")))
    with pytest.raises(tf.errors.NotFoundError):
        tf.train.Checkpoint(v=tf.Variable(1.0)).restore(os.path.join(tmp_path, "missing-1"))
    assert tf.train.latest_checkpoint(os.path.join(tmp_path, "nowhere")) is None


def test_keras_save_and_load_weights(tmp_path):
    model, _ = _model_and_optimizer()
    model(np.ones((2, 2), np.float32))
    path = os.path.join(tmp_path, "m.weights.h5")
    model.save_weights(path)
    other, _ = _model_and_optimizer()
    other(np.ones((2, 2), np.float32))
    other.load_weights(path)
    for a, b in zip(model.get_weights(), other.get_weights()):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="must end in `.weights.h5`"):
        model.save_weights(os.path.join(tmp_path, "m.h5"))


def test_v1_saver_saves_and_restores_a_sessions_variables(tmp_path):
    v1 = tf.compat.v1
    g = tf.Graph()
    with g.as_default():
        w, b = tf.Variable([1.0, 2.0], name="w"), tf.Variable(3, name="b")
        step = v1.train.get_or_create_global_step()
        update = [w.assign(w * 2), step.assign_add(1)]
        saver = v1.train.Saver(max_to_keep=2)
        with v1.Session() as s:
            s.run(v1.global_variables_initializer())
            for _ in range(3):
                s.run(update)
                path = saver.save(s, os.path.join(tmp_path, "model"), global_step=step)
        assert path == os.path.join(tmp_path, "model-3") and v1.train.latest_checkpoint(tmp_path) == path
        assert sorted(os.listdir(tmp_path)) == ["checkpoint", "model-2.npz", "model-3.npz"]
        with v1.Session() as fresh:                       # nothing initialised: restore sets every value
            saver.restore(fresh, path)
            got_w, got_b, got_step = fresh.run([w, b, step])
    np.testing.assert_array_equal(got_w, [8.0, 16.0])
    assert (int(got_b), int(got_step)) == (3, 3)
    with tf.Graph().as_default(), pytest.raises(ValueError, match="No variables to save"):
        v1.train.Saver()
