"""keras.layers.BatchNormalization / LayerNormalization against numpy re-implementations
of Keras 3's formulas; the fit constants were printed by TF 2.21 (Keras 3) for the same
model, weights and data."""
import numpy as np
import pytest

import jitgrad as tf

keras = tf.keras


@pytest.fixture(autouse=True)
def _fresh_names():
    keras.backend.clear_session()


def _normalize(x, mean, var, gamma, beta, eps):
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def _bn_weights(rng, c):
    return [rng.uniform(0.5, 1.5, c), rng.standard_normal(c), rng.standard_normal(c), rng.uniform(0.5, 2, c)]


@pytest.mark.parametrize("axis", [-1, 1])
def test_batch_norm_training_uses_batch_stats_and_moves_the_moving_ones(axis):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((4, 3, 5)) * 2 + 1).astype(np.float32)
    up = rng.standard_normal(x.shape).astype(np.float32)
    bn = keras.layers.BatchNormalization(axis=axis, momentum=0.9, epsilon=1e-2)
    bn.build(x.shape)
    assert [w.name for w in bn.weights] == ["gamma", "beta", "moving_mean", "moving_variance"]
    assert [w.name for w in bn.trainable_weights] == ["gamma", "beta"]
    gamma, beta, mm, mv = [w.astype(np.float32) for w in _bn_weights(rng, x.shape[axis])]
    bn.set_weights([gamma, beta, mm, mv])
    red = tuple(a for a in range(3) if a != axis % 3)
    shape = [x.shape[axis] if a == axis % 3 else 1 for a in range(3)]
    g, b = gamma.reshape(shape), beta.reshape(shape)

    xv = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(xv)
        y = bn(xv, training=True)
        loss = tf.reduce_sum(y * up)
    dx, dgamma, dbeta = [t.numpy() for t in tape.gradient(loss, [xv, bn.gamma, bn.beta])]
    mean, var = x.mean(red, keepdims=True), x.var(red, keepdims=True)
    xhat = (x - mean) / np.sqrt(var + 1e-2)
    np.testing.assert_allclose(y.numpy(), xhat * g + b, atol=2e-6)
    # d/dx of sum(up * y) through the batch statistics: the textbook batch-norm backward
    n = x.size // x.shape[axis]
    want_dx = g / np.sqrt(var + 1e-2) / n * (n * up - up.sum(red, keepdims=True)
                                            - xhat * (up * xhat).sum(red, keepdims=True))
    np.testing.assert_allclose(dx, want_dx, atol=2e-6)
    np.testing.assert_allclose(dgamma, (up * xhat).sum(red), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dbeta, up.sum(red), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(bn.moving_mean.numpy(), mm * 0.9 + mean.ravel() * 0.1, atol=1e-6)
    np.testing.assert_allclose(bn.moving_variance.numpy(), mv * 0.9 + var.ravel() * 0.1, atol=1e-6)

    moved = [bn.moving_mean.numpy(), bn.moving_variance.numpy()]
    for training in (False, None):       # inference: the moving statistics, which stay put
        np.testing.assert_allclose(bn(x, training=training).numpy(),
                                   _normalize(x, moved[0].reshape(shape), moved[1].reshape(shape), g, b, 1e-2),
                                   atol=2e-6)
    np.testing.assert_array_equal(bn.moving_mean.numpy(), moved[0])
    bn.trainable = False                 # Keras 3: a frozen BatchNormalization runs in inference mode
    np.testing.assert_allclose(bn(x, training=True).numpy(),
                               _normalize(x, moved[0].reshape(shape), moved[1].reshape(shape), g, b, 1e-2), atol=2e-6)
    np.testing.assert_array_equal(bn.moving_mean.numpy(), moved[0])
    assert bn.trainable_weights == [] and [w.name for w in bn.non_trainable_weights] == \
        ["gamma", "beta", "moving_mean", "moving_variance"]


def test_batch_norm_options_and_errors():
    bn = keras.layers.BatchNormalization(center=False, scale=False)
    bn.build((2, 3))
    assert [w.name for w in bn.weights] == ["moving_mean", "moving_variance"]
    x = np.array([[1.0, 2.0, 3.0], [3.0, 6.0, 9.0]], np.float32)
    np.testing.assert_allclose(bn(x, training=True).numpy(), (x - x.mean(0)) / np.sqrt(x.var(0) + 1e-3), rtol=1e-6)
    assert bn.compute_output_shape((None, 3)) == (None, 3)
    with pytest.raises(IndexError):       # as Keras 3: the axis indexes the input shape
        keras.layers.BatchNormalization(axis=5).build((2, 3))
    with pytest.raises(ValueError, match="out of bounds"):
        keras.layers.BatchNormalization(axis=5).compute_output_shape((2, 3))


def test_batch_norm_fit_moves_statistics_as_tf_and_a_frozen_one_stays():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 4)).astype(np.float32)
    y = rng.standard_normal((16, 1)).astype(np.float32)
    m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3), keras.layers.BatchNormalization(momentum=0.9),
                          keras.layers.Dense(1)])
    # Keras 3's order: layer by layer, each layer's trainable weights then its non-trainable ones
    assert [w.path for w in m.weights][2:6] == [f"sequential/batch_normalization/{n}" for n in
                                                ("gamma", "beta", "moving_mean", "moving_variance")]
    assert [w.name for w in m.non_trainable_weights] == ["moving_mean", "moving_variance"]
    m.set_weights([np.arange(12, dtype=np.float32).reshape(4, 3) / 10 - 0.5, np.zeros(3), np.ones(3), np.zeros(3),
                   np.zeros(3), np.ones(3), np.ones((3, 1)), np.zeros(1)])
    m.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    losses = m.fit(x, y, batch_size=8, epochs=2, verbose=0, shuffle=False).history["loss"]
    bn = m.layers[1]
    # TF 2.21's values for this model, weights and data
    np.testing.assert_allclose(losses, [4.954512, 1.041365], atol=2e-6)
    np.testing.assert_allclose(bn.moving_mean.numpy(), [-0.002091, 0.041105, 0.07067], atol=2e-6)
    np.testing.assert_allclose(bn.moving_variance.numpy(), [0.83949, 0.860529, 0.906822], atol=2e-6)
    np.testing.assert_allclose(m.predict(x[:3], verbose=0).ravel(), [0.242402, 0.429797, 0.870621], atol=2e-6)
    bn.trainable = False
    m.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    assert len(m.trainable_weights) == 4
    losses = m.fit(x, y, batch_size=8, epochs=1, verbose=0, shuffle=False).history["loss"]
    np.testing.assert_allclose(losses, [1.009558], atol=2e-6)
    np.testing.assert_allclose(bn.moving_mean.numpy(), [-0.002091, 0.041105, 0.07067], atol=2e-6)
    m.trainable = False                   # freezing the model freezes the layers in it
    assert not bn.trainable and m.trainable_weights == [] and len(m.non_trainable_weights) == 8


@pytest.mark.parametrize("axis", [-1, 1, [1, 2], [-1, -2], (0, 2)])
def test_layer_norm_matches_numpy(axis):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((3, 4, 5)) * 3 + 2).astype(np.float32)
    ln = keras.layers.LayerNormalization(axis=axis, epsilon=0.1)
    ln.build(x.shape)
    axes = sorted(axis) if isinstance(axis, (list, tuple)) else [axis]
    assert [w.name for w in ln.weights] == ["gamma", "beta"]
    assert tuple(ln.gamma.shape) == tuple(x.shape[a] for a in axes)      # in sorted-axis order
    gamma = rng.uniform(0.5, 1.5, tuple(ln.gamma.shape)).astype(np.float32)
    beta = rng.standard_normal(tuple(ln.beta.shape)).astype(np.float32)
    ln.set_weights([gamma, beta])
    shape = [1] * 3
    for a in axes:
        shape[a] = x.shape[a]
    red = tuple(a % 3 for a in axes)
    xv = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(xv)
        y = ln(xv)
        loss = tf.reduce_sum(y * y)
    dgamma = tape.gradient(loss, ln.gamma).numpy()
    want = _normalize(x, x.mean(red, keepdims=True), x.var(red, keepdims=True), gamma.reshape(shape),
                      beta.reshape(shape), 0.1)
    np.testing.assert_allclose(y.numpy(), want, atol=3e-6)
    xhat = (x - x.mean(red, keepdims=True)) / np.sqrt(x.var(red, keepdims=True) + 0.1)
    other = tuple(a for a in range(3) if a not in red)
    np.testing.assert_allclose(dgamma.reshape(shape), (2 * want * xhat).sum(other, keepdims=True), rtol=1e-5,
                               atol=1e-5)


def test_layer_norm_half_precision_is_computed_in_float32_and_errors():
    x = np.linspace(-300, 500, 40, dtype=np.float32).reshape(2, 20)
    ln = keras.layers.LayerNormalization(dtype="float16", center=False)
    y = ln(x.astype(np.float16))
    assert y.dtype == tf.float16 and [w.name for w in ln.weights] == ["gamma"]
    # statistics of float16 values near 500 overflow float16 (squares reach 2.5e5): Keras 3 computes in float32
    x16 = x.astype(np.float16).astype(np.float32)
    want = (x16 - x16.mean(-1, keepdims=True)) / np.sqrt(x16.var(-1, keepdims=True) + 1e-3)
    np.testing.assert_allclose(y.numpy().astype(np.float32), want, atol=2e-3)
    with pytest.raises(TypeError, match="list/tuple of ints"):
        keras.layers.LayerNormalization(axis="a")
    with pytest.raises(ValueError, match="out of bounds"):
        keras.layers.LayerNormalization(axis=4).compute_output_shape((None, 4, 5))


@pytest.mark.parametrize("axis", [-1, 1, [1, 2]])
def test_unit_normalization(axis):
    x = np.random.default_rng(4).standard_normal((3, 4, 5)).astype(np.float32)
    x[0, 0] = 0.0                                   # a zero vector stays zero (1 / eps caps the scale)
    layer = keras.layers.UnitNormalization(axis=axis)
    ax = tuple(axis) if isinstance(axis, list) else axis
    norm = np.sqrt((x.astype(np.float64) ** 2).sum(axis=ax, keepdims=True))
    expected = np.where(norm > 0, x / np.where(norm > 0, norm, 1.0), 0.0)
    np.testing.assert_allclose(layer(x).numpy(), expected, rtol=2e-6, atol=1e-7)
    w = np.random.default_rng(5).standard_normal(x.shape)
    xt = tf.constant(x[1:])

    @tf.function
    def grad():
        with tf.GradientTape() as tape:
            tape.watch(xt)
            loss = tf.reduce_sum(layer(xt) * w[1:])
        return tape.gradient(loss, xt)
    # d(x / |x|) . w = (w - u (u . w)) / |x|, u = x / |x|
    u, n = expected[1:], norm[1:]
    expected_grad = (w[1:] - u * (u * w[1:]).sum(axis=ax, keepdims=True)) / n
    np.testing.assert_allclose(grad().numpy(), expected_grad, rtol=1e-4, atol=1e-6)
