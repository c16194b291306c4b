"""tf.keras.regularizers / constraints and Layer.losses / add_loss: Keras 3's formulas in numpy
here, and fit adding the penalties to the loss it minimises."""
import numpy as np
import pytest

import jitgrad as tf

K = tf.keras
W = np.array([[1.0, -2.0], [0.5, 3.0]], np.float32)


def test_regularizer_penalties_and_names():
    R = K.regularizers
    np.testing.assert_allclose(float(R.L1(0.1)(tf.constant(W))), 0.1 * np.abs(W).sum(), rtol=1e-6)
    np.testing.assert_allclose(float(R.L2(0.05)(tf.constant(W))), 0.05 * (W ** 2).sum(), rtol=1e-6)
    np.testing.assert_allclose(float(R.L1L2(0.1, 0.2)(tf.constant(W))), 0.1 * np.abs(W).sum() + 0.2 * (W ** 2).sum(),
                               rtol=1e-6)
    assert isinstance(R.get("l1l2"), R.L1L2) and R.get("l2").l2 == 0.01
    with pytest.raises(ValueError):
        R.get("l1_l2")                                   # not a Keras 3 name
    with pytest.raises(ValueError):
        R.L2(-1.0)


def test_constraints_project_as_keras3():
    C, eps = K.constraints, 1e-7
    norms = np.sqrt((W ** 2).sum(0, keepdims=True))
    np.testing.assert_allclose(C.MaxNorm(2.0)(tf.constant(W)).numpy(), W * np.minimum(norms, 2.0) / (eps + norms),
                               rtol=1e-6)
    np.testing.assert_allclose(C.UnitNorm()(tf.constant(W)).numpy(), W / (eps + norms), rtol=1e-6)
    np.testing.assert_array_equal(C.NonNeg()(tf.constant(W)).numpy(), np.maximum(W, 0))
    desired = 0.7 * np.clip(norms, 0.5, 1.0) + 0.3 * norms
    np.testing.assert_allclose(C.MinMaxNorm(0.5, 1.0, 0.7)(tf.constant(W)).numpy(), W * desired / (eps + norms),
                               rtol=1e-6)


def _model():
    return K.Sequential([
        K.Input((2,)),
        K.layers.Dense(3, kernel_initializer=K.initializers.Constant(0.5), bias_initializer=K.initializers.Constant(-1.0),
                       kernel_regularizer=K.regularizers.L2(0.01), bias_regularizer=K.regularizers.L1(0.1),
                       activity_regularizer=K.regularizers.L2(0.001)),
        K.layers.Dense(1, kernel_initializer="ones", kernel_constraint=K.constraints.MaxNorm(1.0))])


def test_layer_losses_and_fit_minimise_the_penalised_loss():
    x = np.array([[1.0, 2.0], [3.0, -1.0], [0.5, 0.5]], np.float32)
    y = np.array([[1.0], [0.0], [2.0]], np.float32)
    model = _model()
    hidden = x @ np.full((2, 3), 0.5) - 1.0
    out = hidden @ np.ones((3, 1))
    model(x)
    activity = 0.001 * (hidden ** 2).sum() / len(x)       # Keras 3: per sample of the batch
    kernel_penalty, bias_penalty = 0.01 * 6 * 0.25, 0.1 * 3 * 1.0
    np.testing.assert_allclose([float(v) for v in model.losses], [activity, kernel_penalty, bias_penalty], rtol=1e-6)
    model.compile(loss="mse", optimizer=K.optimizers.SGD(0.1))
    np.testing.assert_allclose(model.evaluate(x, y, verbose=0),
                               np.mean((out - y) ** 2) + activity + kernel_penalty + bias_penalty, rtol=1e-6)
    model.fit(x, y, epochs=2, batch_size=3, verbose=0)
    kernel = model.layers[1].kernel.numpy()
    assert np.sqrt((kernel ** 2).sum(0)).max() <= 1.0 + 1e-6   # the MaxNorm constraint after each step


def test_add_loss_is_per_call_and_reaches_compute_loss():
    class Penalised(K.layers.Layer):
        def call(self, inputs):
            self.add_loss(tf.reduce_sum(inputs) * 0.5)
            return inputs * 2.0

    layer = Penalised()
    layer(np.ones((2, 2), np.float32))
    layer(np.ones((1, 2), np.float32))
    assert [float(v) for v in layer.losses] == [1.0]      # only the last call's


def test_keras_utils():
    np.testing.assert_array_equal(K.utils.to_categorical([[1], [0], [2]]), np.eye(3)[[1, 0, 2]])
    assert K.utils.to_categorical([1, 3], num_classes=5).shape == (2, 5)
    np.testing.assert_allclose(K.utils.normalize(np.array([[3.0, 4.0], [0.0, 0.0]])), [[0.6, 0.8], [0.0, 0.0]])
    K.utils.set_random_seed(3)
    first = (tf.random.uniform([2]).numpy(), np.random.rand())
    K.utils.set_random_seed(3)
    np.testing.assert_array_equal(tf.random.uniform([2]).numpy(), first[0])
    assert np.random.rand() == first[1]
    with pytest.raises(ValueError):
        K.utils.set_random_seed(1.5)
