"""keras.layers.Conv2D over tf.nn.conv2d: weights, output, a short fit. The fit's losses were
printed by TF 2.21 (tf.keras) for the same model, weights and data."""
import numpy as np
import pytest

import jitgrad as tf

keras = tf.keras


def _model_and_data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 6, 6, 2)).astype(np.float32)
    y = rng.integers(0, 3, 8)
    m = keras.Sequential([keras.Input((6, 6, 2)), keras.layers.Conv2D(4, 3, padding="same", activation="relu"),
                          keras.layers.Conv2D(3, (2, 2), strides=2), keras.layers.Flatten(), keras.layers.Dense(3)])
    m.set_weights([rng.standard_normal(tuple(w.shape)).astype(np.float32) * 0.3 for w in m.weights])
    return m, x, y


def test_conv2d_layer_is_conv2d_plus_bias_and_trains_as_tf():
    m, x, y = _model_and_data()
    assert [tuple(w.shape) for w in m.weights] == [(3, 3, 2, 4), (4,), (2, 2, 4, 3), (3,), (27, 3), (3,)]
    k1, b1 = m.weights[0], m.weights[1]
    first = m.layers[0](tf.constant(x)).numpy()
    want = tf.nn.relu(tf.nn.conv2d(tf.constant(x), k1, 1, "SAME") + b1).numpy()
    np.testing.assert_allclose(first, want, rtol=1e-6, atol=1e-6)
    m.compile(optimizer=keras.optimizers.SGD(0.1), loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    losses = m.fit(x, y, epochs=3, batch_size=4, verbose=0, shuffle=False).history["loss"]
    np.testing.assert_allclose(losses, [1.5927, 0.5632, 0.2088], atol=1e-4)     # TF 2.21's


def test_conv2d_layer_arguments():
    with pytest.raises(ValueError):
        keras.layers.Conv2D(0, 3)
    with pytest.raises(ValueError):
        keras.layers.Conv2D(2, 3, padding="full")
    with pytest.raises(NotImplementedError):
        keras.layers.Conv2D(2, 3, data_format="channels_first")
    layer = keras.layers.Conv2D(2, (3, 1), strides=(2, 1), padding="same")
    assert layer.compute_output_shape((None, 7, 5, 3)) == (None, 4, 5, 2)


def test_pooling_layers_train_as_tf():
    """MaxPooling2D / AveragePooling2D in a small CNN: weights shapes and fit losses as
    TF 2.21's tf.keras printed them for the same model, weights and data."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((8, 8, 8, 2)).astype(np.float32)
    y = rng.integers(0, 3, 8)
    m = keras.Sequential([keras.Input((8, 8, 2)), keras.layers.Conv2D(4, 3, padding="same", activation="relu"),
                          keras.layers.MaxPooling2D(), keras.layers.Conv2D(3, 3),
                          keras.layers.AveragePooling2D(pool_size=2, strides=1, padding="same"),
                          keras.layers.Flatten(), keras.layers.Dense(3)])
    m.set_weights([rng.standard_normal(tuple(w.shape)).astype(np.float32) * 0.3 for w in m.weights])
    assert [tuple(w.shape) for w in m.weights] == [(3, 3, 2, 4), (4,), (3, 3, 4, 3), (3,), (12, 3), (3,)]
    m.compile(optimizer=keras.optimizers.SGD(0.1), loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    losses = m.fit(x, y, epochs=3, batch_size=4, verbose=0, shuffle=False).history["loss"]
    np.testing.assert_allclose(losses, [2.6515, 2.8283, 1.6492], atol=1e-4)
    assert keras.layers.MaxPooling2D(3, 2, "same").compute_output_shape((None, 7, 7, 5)) == (None, 4, 4, 5)
    assert keras.layers.MaxPool2D is keras.layers.MaxPooling2D


@pytest.mark.parametrize("make, shape, match", [
    # TF 2.21 raises ValueError for each (the conv op's InvalidArgumentError used to come first)
    (lambda: keras.layers.Conv2D(2, 7), (2, 6, 6, 3), "zero or negative"),
    (lambda: keras.layers.Conv1D(2, 2, dilation_rate=4), (2, 4, 3), "zero or negative"),
    (lambda: keras.layers.DepthwiseConv2D(5), (2, 4, 4, 3), "zero or negative"),
    (lambda: keras.layers.SeparableConv2D(2, 5), (2, 4, 4, 3), "zero or negative"),
    (lambda: keras.layers.Conv2D(2, 3), (6, 6, 3), "expected min_ndim=4, found ndim=3"),
    (lambda: keras.layers.Conv1D(2, 2), (4, 3), "expected min_ndim=3, found ndim=2"),
    (lambda: keras.layers.Conv2DTranspose(2, 2), (4, 4, 3), "expected min_ndim=4"),
    (lambda: keras.layers.DepthwiseConv2D(2), (4, 4, 3), "expected min_ndim=4"),
    (lambda: keras.layers.Conv2D(2, 2), (2, 2, 4, 4, 3), "same length as input"),
])
def test_conv_input_too_small_or_of_another_rank_is_a_value_error(make, shape, match):
    with pytest.raises(ValueError, match=match):
        make()(np.zeros(shape, np.float32))


def test_conv_same_padding_and_causal_take_a_kernel_larger_than_the_input():
    # SAME (and causal) pad: a 9-wide kernel over 4 steps is fine, ceil(n / s) outputs
    x = np.ones((1, 4, 4, 1), np.float32)
    layer = keras.layers.Conv2D(1, 9, padding="same", kernel_initializer="ones", use_bias=False)
    # each output sums the inputs its window covers: all 16 ones
    np.testing.assert_allclose(layer(x).numpy(), np.full((1, 4, 4, 1), 16.0))
    causal = keras.layers.Conv1D(1, 9, padding="causal", kernel_initializer="ones", use_bias=False)
    np.testing.assert_allclose(causal(x[:, 0]).numpy()[0, :, 0], [1.0, 2.0, 3.0, 4.0])
