"""keras.layers Conv1D, MaxPooling1D / AveragePooling1D and the global poolings against
numpy; the fit's losses were printed by TF 2.21 (Keras 3) for the same model, weights and data."""
import numpy as np
import pytest

import jitgrad as tf

keras = tf.keras
L = keras.layers


def _x(shape, seed=4):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _windows(x, k, s, d=1):
    """(batch, out, k, channels) windows of a VALID 1-D window op."""
    n = (x.shape[1] - (k - 1) * d - 1) // s + 1
    return np.stack([x[:, i * s:i * s + (k - 1) * d + 1:d] for i in range(n)], 1)


@pytest.mark.parametrize("cls, reduce", [(L.GlobalAveragePooling1D, np.mean), (L.GlobalMaxPooling1D, np.max),
                                         (L.GlobalAveragePooling2D, np.mean), (L.GlobalMaxPooling2D, np.max)])
def test_global_pooling(cls, reduce):
    x = _x((2, 5, 6, 3))[:, :, 0] if "1D" in cls.__name__ else _x((2, 5, 6, 3))
    axes = tuple(range(1, x.ndim - 1))
    np.testing.assert_allclose(cls()(x).numpy(), reduce(x, axis=axes), rtol=1e-6)
    np.testing.assert_allclose(cls(keepdims=True)(x).numpy(), reduce(x, axis=axes, keepdims=True), rtol=1e-6)
    shape = (None,) + x.shape[1:]
    assert cls().compute_output_shape(shape) == (None, 3)
    assert cls(keepdims=True).compute_output_shape(shape) == (None,) + (1,) * len(axes) + (3,)


def test_pooling_1d_and_aliases():
    x = _x((2, 9, 3))
    np.testing.assert_array_equal(L.MaxPooling1D()(x).numpy(), _windows(x, 2, 2).max(2))
    np.testing.assert_allclose(L.AveragePooling1D(3, strides=2)(x).numpy(), _windows(x, 3, 2).mean(2), rtol=1e-6)
    # SAME: 9 steps, windows of 4 at stride 1 -> pad 1 before, 2 after; the average counts real entries only
    same = L.AveragePooling1D(4, strides=1, padding="same")(x).numpy()
    np.testing.assert_allclose(same[:, 0], x[:, :3].mean(1), rtol=1e-6)
    np.testing.assert_allclose(same[:, -1], x[:, -2:].mean(1), rtol=1e-6)
    assert L.MaxPooling1D(3, 2, "same").compute_output_shape((None, 9, 3)) == (None, 5, 3)
    assert L.MaxPool1D is L.MaxPooling1D and L.AvgPool1D is L.AveragePooling1D
    assert L.GlobalAvgPool2D is L.GlobalAveragePooling2D and L.GlobalMaxPool1D is L.GlobalMaxPooling1D
    with pytest.raises(TypeError):         # Keras 3: the average poolings have no default pool_size
        L.AveragePooling2D()
    assert L.MaxPooling2D().pool_size == (2, 2) and L.MaxPooling1D().pool_size == (2,)


@pytest.mark.parametrize("kwargs", [dict(kernel_size=3), dict(kernel_size=2, strides=2),
                                    dict(kernel_size=3, dilation_rate=2), dict(kernel_size=3, padding="causal",
                                                                               dilation_rate=2)])
def test_conv1d_matches_numpy(kwargs):
    x = _x((2, 9, 3))
    conv = L.Conv1D(4, **kwargs)
    conv.build(x.shape)
    assert [w.name for w in conv.weights] == ["kernel", "bias"]
    k, d, s = kwargs["kernel_size"], kwargs.get("dilation_rate", 1), kwargs.get("strides", 1)
    assert tuple(conv.kernel.shape) == (k, 3, 4)
    w, b = _x((k, 3, 4), 5), _x((4,), 6)
    conv.set_weights([w, b])
    padded = np.pad(x, [(0, 0), ((k - 1) * d, 0), (0, 0)]) if kwargs.get("padding") == "causal" else x
    want = np.einsum("bokc,kcf->bof", _windows(padded, k, s, d), w) + b
    np.testing.assert_allclose(conv(x).numpy(), want, rtol=1e-5, atol=1e-5)
    assert conv.compute_output_shape((None, 9, 3)) == (None,) + want.shape[1:]


def test_conv1d_errors_and_a_fit_as_tf():
    with pytest.raises(ValueError, match="padding"):
        L.Conv2D(2, 3, padding="causal")              # causal is Conv1D's only
    with pytest.raises(ValueError, match="dilation_rate > 1"):
        L.Conv1D(2, 3, strides=2, dilation_rate=2)
    x, y = _x((2, 9, 3)), _x((2, 1), 7)
    m = keras.Sequential([keras.Input((9, 3)), L.Conv1D(4, 3, activation="relu"), L.MaxPooling1D(),
                          L.Conv1D(2, 2, padding="causal"), L.GlobalAveragePooling1D(), L.Dense(1)])
    m.set_weights([np.sin(np.arange(np.prod(w.shape)) * 0.3 + i).reshape(tuple(w.shape)).astype(np.float32) * 0.5
                   for i, w in enumerate(m.weights)])
    m.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
    losses = m.fit(x, y, epochs=3, batch_size=2, verbose=0, shuffle=False).history["loss"]
    np.testing.assert_allclose(losses, [0.0382064, 0.0159884, 0.0112882], atol=2e-7)    # TF 2.21's
