"""Keras fit / evaluate / predict on a batched tf.data.Dataset (jitgrad/keras/data_adapter.py),
and validation_data given as a Dataset. The expected losses and weights come from the same
model trained by hand in numpy (Dense(1), mean squared error, plain SGD)."""
import numpy as np
import pytest

import jitgrad as tf

X = np.array([[1., 2.], [0.5, -1.], [2., 1.], [-1., 0.], [0., 1.], [3., -2.]], np.float32)
Y = np.array([[1.], [0.], [2.], [-1.], [0.5], [1.5]], np.float32)
LR = 0.05


def _model():
    model = tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.Dense(
        1, kernel_initializer=tf.keras.initializers.Constant(0.5), bias_initializer="zeros")])
    model.compile(tf.keras.optimizers.SGD(LR), "mse")
    return model


def _numpy_sgd(batch, epochs):
    """-> (per-epoch loss as Keras logs it: the sample-weighted mean of batch losses, w, b)."""
    w, b = np.full((2, 1), 0.5), np.zeros(1)
    x, y = X.astype(np.float64), Y.astype(np.float64)
    losses = []
    for _ in range(epochs):
        total = 0.0
        for s in range(0, len(x), batch):
            xb, yb = x[s:s + batch], y[s:s + batch]
            err = xb @ w + b - yb
            total += np.mean(err ** 2) * len(xb)
            d = 2 * err / err.size
            w, b = w - LR * xb.T @ d, b - LR * d.sum(axis=0)
        losses.append(total / len(x))
    return losses, w, b


def test_fit_on_a_dataset_trains_as_by_hand():
    ds = tf.data.Dataset.from_tensor_slices((X, Y)).batch(4)     # batches of 4 and 2
    model = _model()
    hist = model.fit(ds, epochs=3, verbose=0)
    losses, w, b = _numpy_sgd(4, 3)
    np.testing.assert_allclose(hist.history["loss"], losses, rtol=1e-5)
    np.testing.assert_allclose(model.layers[0].kernel.numpy(), w, rtol=1e-5)
    np.testing.assert_allclose(model.layers[0].bias.numpy(), b, rtol=1e-5, atol=1e-7)
    assert hist.params["steps"] == 2


def test_fit_on_a_dataset_equals_fit_on_arrays_without_shuffling():
    a, b = _model(), _model()
    ha = a.fit(X, Y, batch_size=4, epochs=2, shuffle=False, verbose=0)
    hb = b.fit(tf.data.Dataset.from_tensor_slices((X, Y)).batch(4), epochs=2, verbose=0)
    assert ha.history["loss"] == hb.history["loss"]            # same batches, same compiled step
    np.testing.assert_array_equal(a.layers[0].kernel.numpy(), b.layers[0].kernel.numpy())


def test_evaluate_and_predict_on_a_dataset():
    model = _model()
    pred = model.predict(tf.data.Dataset.from_tensor_slices(X).batch(4), verbose=0)
    np.testing.assert_allclose(pred, X @ np.full((2, 1), 0.5), rtol=1e-6)
    loss = model.evaluate(tf.data.Dataset.from_tensor_slices((X, Y)).batch(4), verbose=0)
    expected = np.mean((X.astype(np.float64) @ np.full((2, 1), 0.5) - Y) ** 2)
    np.testing.assert_allclose(loss, expected, rtol=1e-6)


def test_validation_data_as_a_dataset():
    model = _model()
    val = tf.data.Dataset.from_tensor_slices((X[:2], Y[:2])).batch(2)
    hist = model.fit(X, Y, batch_size=6, epochs=1, shuffle=False, validation_data=val, verbose=0)
    _, w, b = _numpy_sgd(6, 1)       # validated after the epoch's update
    expected = np.mean((X[:2].astype(np.float64) @ w + b - Y[:2]) ** 2)
    np.testing.assert_allclose(hist.history["val_loss"], [expected], rtol=1e-5)


def test_dataset_input_errors_are_keras():
    model = _model()
    ds = tf.data.Dataset.from_tensor_slices((X, Y)).batch(4)
    with pytest.raises(ValueError, match="`y` should not be passed"):
        model.fit(ds, Y, verbose=0)
    with pytest.raises(ValueError, match="validation_split"):
        model.fit(ds, validation_split=0.5, verbose=0)
