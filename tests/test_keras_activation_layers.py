"""keras.layers ReLU / LeakyReLU / ELU / Softmax / PReLU against numpy versions of Keras 3's
definitions (defaults and error messages are Keras 3's)."""
import warnings

import numpy as np
import pytest

import jitgrad as tf

keras = tf.keras
L = keras.layers


def _x():
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((3, 4, 5)) * 4).astype(np.float32)
    x[0, 0, :3] = [0.5, 2.0, 6.5]
    return x, rng.standard_normal(x.shape).astype(np.float32)


def _value_and_grad(layer, x, up):
    xv = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(xv)
        y = layer(xv)
        loss = tf.reduce_sum(y * up)
    return y.numpy(), tape.gradient(loss, xv).numpy()


def _keras_relu(x, slope=0.0, max_value=None, threshold=0.0):
    y = np.where(x > threshold, x, 0)
    if max_value is not None:
        y = np.minimum(y, max_value)
    return y - slope * np.maximum(threshold - x, 0)


@pytest.mark.parametrize("kwargs", [{}, {"max_value": 6}, {"max_value": 3.5}, {"negative_slope": 0.1},
                                    {"threshold": 1.0}, {"max_value": 4.0, "negative_slope": 0.2, "threshold": 1.5}])
def test_relu_layer_options(kwargs):
    x, up = _x()
    y, g = _value_and_grad(L.ReLU(**kwargs), x, up)
    args = (kwargs.get("negative_slope", 0.0), kwargs.get("max_value"), kwargs.get("threshold", 0.0))
    np.testing.assert_allclose(y, _keras_relu(x, *args), rtol=1e-6, atol=1e-6)
    slope = (_keras_relu(x + 1e-3, *args) - _keras_relu(x - 1e-3, *args)) / 2e-3     # no x within 1e-3 of a kink
    np.testing.assert_allclose(g, up * slope, rtol=1e-3, atol=1e-4)


def test_leaky_relu_elu_and_errors():
    x, up = _x()
    y, g = _value_and_grad(L.LeakyReLU(), x, up)         # Keras 3's default slope: 0.3
    np.testing.assert_allclose(y, np.where(x > 0, x, 0.3 * x), rtol=1e-6)
    np.testing.assert_allclose(g, up * np.where(x > 0, 1, 0.3), rtol=1e-6)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = L.LeakyReLU(alpha=0.1)
    assert "`alpha` is deprecated" in str(caught[0].message) and old.negative_slope == 0.1
    y, g = _value_and_grad(L.ELU(alpha=0.5), x, up)
    np.testing.assert_allclose(y, np.where(x > 0, x, 0.5 * np.expm1(x)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g, up * np.where(x > 0, 1, 0.5 * np.exp(x)), rtol=1e-5, atol=1e-6)
    for bad, match in [(dict(max_value=-1), "max_value"), (dict(negative_slope=-1), "negative_slope"),
                       (dict(threshold=-1), "threshold")]:
        with pytest.raises(ValueError, match=match):
            L.ReLU(**bad)
    with pytest.raises(ValueError, match="cannot be None or negative"):
        L.LeakyReLU(negative_slope=-0.1)


def _softmax(x, axis):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def test_softmax_axes_and_mask():
    x, up = _x()
    for axis in (-1, 1, (1, 2), [2]):
        y, g = _value_and_grad(L.Softmax(axis=axis), x, up)
        ax = tuple(axis) if isinstance(axis, (tuple, list)) else axis
        want = _softmax(x, ax)
        np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(g, want * (up - (up * want).sum(ax, keepdims=True)), rtol=1e-4, atol=1e-6)
    mask = np.random.default_rng(4).uniform(size=x.shape) > 0.3
    masked = np.where(mask, _softmax(np.where(mask, x, -1e9), -1), 0)
    np.testing.assert_allclose(L.Softmax()(x, mask=mask).numpy(), masked, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(L.Softmax()(x, mask=mask.astype(np.float32)).numpy(), masked, rtol=1e-5, atol=1e-7)


def test_prelu_weight_and_shared_axes():
    x, up = _x()
    p = L.PReLU()
    p.build(x.shape)
    assert [w.name for w in p.weights] == ["alpha"] and tuple(p.alpha.shape) == (4, 5)
    np.testing.assert_array_equal(p.alpha.numpy(), 0)                # Keras 3: zeros
    alpha = np.random.default_rng(5).uniform(0, 0.5, (4, 5)).astype(np.float32)
    p.set_weights([alpha])
    xv = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(xv)
        loss = tf.reduce_sum(p(xv) * up)
    gx, galpha = [t.numpy() for t in tape.gradient(loss, [xv, p.alpha])]
    np.testing.assert_allclose(p(x).numpy(), np.where(x > 0, x, alpha * x), rtol=1e-6)
    np.testing.assert_allclose(gx, up * np.where(x > 0, 1, alpha), rtol=1e-6)
    np.testing.assert_allclose(galpha, (up * np.minimum(x, 0)).sum(0), rtol=1e-5, atol=1e-6)
    shared = L.PReLU(shared_axes=[1], alpha_initializer="ones")
    shared.build(x.shape)
    assert tuple(shared.alpha.shape) == (1, 5)
    np.testing.assert_allclose(shared(x).numpy(), x, rtol=1e-6)
    single = L.PReLU(shared_axes=2)
    single.build(x.shape)
    assert tuple(single.alpha.shape) == (4, 1)
