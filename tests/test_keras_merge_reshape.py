"""keras.layers merge (Add ... Concatenate, Dot), reshaping (Reshape, Permute, RepeatVector,
ZeroPadding2D, Cropping2D, UpSampling2D) and core (Identity, Lambda) layers against numpy;
the error messages are Keras 3's."""
import numpy as np
import pytest

import jitgrad as tf

keras = tf.keras
L = keras.layers


@pytest.fixture(autouse=True)
def _fresh_names():
    keras.backend.clear_session()


def _data(*shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


@pytest.mark.parametrize("cls, fn", [(L.Add, lambda a, b: a + b), (L.Subtract, lambda a, b: a - b),
                                     (L.Multiply, lambda a, b: a * b), (L.Average, lambda a, b: (a + b) / 2),
                                     (L.Maximum, np.maximum), (L.Minimum, np.minimum)])
def test_elementwise_merges_and_their_gradients(cls, fn):
    a, b, up = _data((2, 3, 4), (2, 3, 4), (2, 3, 4))
    av, bv = tf.constant(a), tf.constant(b)
    with tf.GradientTape() as tape:
        tape.watch([av, bv])
        y = cls()([av, bv])
        loss = tf.reduce_sum(y * up)
    ga, gb = [g.numpy() for g in tape.gradient(loss, [av, bv])]
    np.testing.assert_allclose(y.numpy(), fn(a, b), rtol=1e-6)
    eps = 1e-3     # central differences of the (piecewise linear or bilinear) merge, elementwise
    np.testing.assert_allclose(ga, up * (fn(a + eps, b) - fn(a - eps, b)) / (2 * eps), rtol=1e-2, atol=1e-3)
    np.testing.assert_allclose(gb, up * (fn(a, b + eps) - fn(a, b - eps)) / (2 * eps), rtol=1e-2, atol=1e-3)
    assert cls().compute_output_shape([(None, 3, 4), (None, 1, 4)]) == (None, 3, 4)


def test_merge_functional_forms_broadcasting_and_errors():
    a, b = _data((2, 3, 4), (2, 3, 4))
    np.testing.assert_allclose(L.add([a, b, a]).numpy(), a + b + a, rtol=1e-6)
    np.testing.assert_allclose(L.average([a, b, b]).numpy(), (a + b + b) / 3, rtol=1e-6)
    np.testing.assert_array_equal(L.maximum([a]).numpy(), a)              # Keras 3 takes one input
    np.testing.assert_allclose(L.multiply([a, a[:, :, :1]]).numpy(), a * a[:, :, :1], rtol=1e-6)
    # a lower-rank input gets its new axes after the batch axis, as Keras reshapes it
    np.testing.assert_allclose(L.add([a, b[:, 0]]).numpy(), a + b[:, None, 0], rtol=1e-6)
    with pytest.raises(ValueError, match="should be called on a list of inputs"):
        L.Add()(a)
    with pytest.raises(ValueError, match="exactly 2 inputs"):
        L.Subtract()([a, b, a])
    with pytest.raises(ValueError, match="incompatible shapes"):
        L.Add()([a, np.zeros((2, 3, 5), np.float32)])


def test_concatenate_and_dot():
    a, b, x, y = _data((2, 3, 4), (2, 3, 4), (3, 5), (3, 5))
    for axis in (-1, 1, 0):
        np.testing.assert_array_equal(L.Concatenate(axis=axis)([a, b]).numpy(), np.concatenate([a, b], axis))
    np.testing.assert_array_equal(L.concatenate([a, b], axis=1).numpy(), np.concatenate([a, b], 1))
    assert L.Concatenate(axis=1).compute_output_shape([(None, 3, 4), (None, 2, 4)]) == (None, 5, 4)
    with pytest.raises(ValueError, match="matching shapes except for the concatenation axis"):
        L.Concatenate()([a, np.zeros((2, 2, 4), np.float32)])
    np.testing.assert_allclose(L.Dot(axes=1)([x, y]).numpy(), (x * y).sum(1, keepdims=True), rtol=1e-5)
    unit = lambda v: v / np.linalg.norm(v, axis=1, keepdims=True)  # noqa: E731
    np.testing.assert_allclose(L.dot([x, y], axes=-1, normalize=True).numpy(),
                               (unit(x) * unit(y)).sum(1, keepdims=True), rtol=1e-5)
    p, q = _data((2, 3, 4), (2, 5, 4), seed=1)
    np.testing.assert_allclose(L.Dot(axes=(2, 2))([p, q]).numpy(), np.einsum("bik,bjk->bij", p, q), rtol=1e-5)
    np.testing.assert_allclose(L.Dot(axes=(1, 2))([p.transpose(0, 2, 1), q]).numpy(),
                               np.einsum("bki,bjk->bij", p.transpose(0, 2, 1), q), rtol=1e-5)
    assert L.Dot(axes=(2, 2)).compute_output_shape([(None, 3, 4), (None, 5, 4)]) == (None, 3, 5)


def test_reshape_permute_repeat_vector():
    (x,) = _data((2, 3, 4))
    np.testing.assert_array_equal(L.Reshape((4, 3))(x).numpy(), x.reshape(2, 4, 3))
    np.testing.assert_array_equal(L.Reshape((-1, 2))(x).numpy(), x.reshape(2, 6, 2))
    assert L.Reshape((-1, 2)).compute_output_shape((None, 3, 4)) == (None, 6, 2)
    assert L.Reshape((2, -1)).compute_output_shape((None, 3, None)) == (None, 2, None)
    with pytest.raises(ValueError, match="total size of the tensor must be unchanged"):
        L.Reshape((5, 5))(x)
    with pytest.raises(ValueError, match="at most one unknown dimension"):
        L.Reshape((-1, -1))
    np.testing.assert_array_equal(L.Permute((2, 1))(x).numpy(), x.transpose(0, 2, 1))
    assert L.Permute((2, 1)).compute_output_shape((None, 3, 4)) == (None, 4, 3)
    with pytest.raises(ValueError, match="consecutive and start from 1"):
        L.Permute((1, 3))
    v = x[:, 0]
    np.testing.assert_array_equal(L.RepeatVector(3)(v).numpy(), np.repeat(v[:, None], 3, axis=1))
    with pytest.raises(TypeError, match="integer value for `n`"):
        L.RepeatVector(2.0)
    with pytest.raises(ValueError, match="expected ndim=2, found ndim=3"):
        L.RepeatVector(2)(x)


def test_padding_cropping_upsampling_2d():
    img, up = _data((2, 4, 5, 3), (2, 8, 15, 3))
    pad = L.ZeroPadding2D(((0, 1), (2, 0)))
    np.testing.assert_array_equal(pad(img).numpy(), np.pad(img, [(0, 0), (0, 1), (2, 0), (0, 0)]))
    assert L.ZeroPadding2D(1).compute_output_shape((None, 4, 5, 3)) == (None, 6, 7, 3)
    np.testing.assert_array_equal(L.Cropping2D(((0, 1), (2, 0)))(img).numpy(), img[:, 0:3, 2:, :])
    np.testing.assert_array_equal(L.Cropping2D(1)(img).numpy(), img[:, 1:3, 1:4, :])
    assert L.Cropping2D((1, 2)).compute_output_shape((None, 4, 5, 3)) == (None, 2, 1, 3)
    with pytest.raises(ValueError, match="cannot be negative"):
        L.Cropping2D(-1)
    with pytest.raises(ValueError, match="should be smaller than the corresponding spatial dimension"):
        L.Cropping2D((2, 3))(img)
    with pytest.raises(ValueError, match="should have two elements"):
        L.ZeroPadding2D((1, 2, 3))
    iv = tf.constant(img)
    with tf.GradientTape() as tape:
        tape.watch(iv)
        y = L.UpSampling2D((2, 3))(iv)
        loss = tf.reduce_sum(y * up)
    np.testing.assert_array_equal(y.numpy(), img.repeat(2, axis=1).repeat(3, axis=2))
    # each input pixel feeds a 2x3 block: its gradient is the block's sum
    np.testing.assert_allclose(tape.gradient(loss, iv).numpy(), up.reshape(2, 4, 2, 5, 3, 3).sum((2, 4)), rtol=1e-5)
    assert L.UpSampling2D(2).compute_output_shape((None, 4, 5, 3)) == (None, 8, 10, 3)


def test_identity_lambda_and_a_functional_model_that_trains():
    (x,) = _data((2, 3, 4))
    np.testing.assert_array_equal(L.Identity()(x).numpy(), x)
    np.testing.assert_allclose(L.Lambda(lambda t, k: t * k, arguments={"k": 3.0})(x).numpy(), x * 3, rtol=1e-6)
    i1, i2 = keras.Input((4,)), keras.Input((4,))
    h = L.Reshape((2, 3))(L.concatenate([L.Dense(3)(i1), L.Dense(3)(i2)]))
    p = L.Permute((2, 1))(h)
    out = L.Flatten()(L.Add()([p, L.Lambda(lambda t: t * 2.0)(p)]))
    model = keras.Model([i1, i2], L.Dense(1)(out))
    assert tuple(p.shape.as_list()) == (None, 3, 2) and len(model.weights) == 6
    w = [np.full((4, 3), 0.1), np.zeros(3), np.full((4, 3), -0.2), np.ones(3), np.linspace(-1, 1, 6)[:, None],
         np.zeros(1)]
    model.set_weights(w)
    a, b, y = _data((8, 4), (8, 4), (8, 1), seed=3)
    hid = np.concatenate([a @ w[0] + w[1], b @ w[2] + w[3]], 1).reshape(8, 2, 3).transpose(0, 2, 1) * 3
    np.testing.assert_allclose(model([a, b]).numpy(), hid.reshape(8, 6) @ w[4], rtol=1e-5, atol=1e-6)
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")
    losses = model.fit([a, b], y, batch_size=4, epochs=3, verbose=0, shuffle=False).history["loss"]
    assert losses[-1] < losses[0]


def test_input_layer_starts_a_sequential_model():
    model = keras.Sequential([L.InputLayer(shape=(4,)), L.Dense(2)])
    assert len(model.layers) == 1 and model.built          # Keras 3 leaves the InputLayer out of `layers`
    assert [w.path for w in model.weights] == ["sequential/dense/kernel", "sequential/dense/bias"]
    inp = L.InputLayer(batch_shape=(2, 3), name="inp")
    assert tuple(inp.output.shape.as_list()) == (2, 3) and inp.output.name == "inp"
    with pytest.raises(ValueError, match="must pass a `shape`"):
        L.InputLayer()


def test_upsampling_unknown_interpolation_is_a_value_error():
    # Keras 3: ValueError for a method it does not know (NotImplementedError is for jitgrad's gaps)
    with pytest.raises(ValueError, match="interpolation"):
        L.UpSampling2D(interpolation="cubic")
    with pytest.raises(NotImplementedError):
        L.UpSampling2D(interpolation="bilinear")


def test_one_dimensional_padding_cropping_upsampling():
    x = np.arange(12, dtype=np.float32).reshape(2, 3, 2)
    np.testing.assert_array_equal(L.ZeroPadding1D((1, 2))(x).numpy(), np.pad(x, [(0, 0), (1, 2), (0, 0)]))
    np.testing.assert_array_equal(L.ZeroPadding1D(2)(x).numpy(), np.pad(x, [(0, 0), (2, 2), (0, 0)]))
    np.testing.assert_array_equal(L.Cropping1D((1, 0))(x).numpy(), x[:, 1:])
    np.testing.assert_array_equal(L.Cropping1D(1)(x).numpy(), x[:, 1:2])
    np.testing.assert_array_equal(L.UpSampling1D(3)(x).numpy(), np.repeat(x, 3, axis=1))
    # in a compiled function, with the gradient: each input step collects its copies' weights
    layer = L.UpSampling1D(2)
    w = np.random.default_rng(0).standard_normal((2, 6, 2)).astype(np.float32)
    xt = tf.constant(x)

    @tf.function
    def grad():
        with tf.GradientTape() as tape:
            tape.watch(xt)
            loss = tf.reduce_sum(layer(xt) * w)
        return tape.gradient(loss, xt)
    np.testing.assert_allclose(grad().numpy(), w[:, 0::2] + w[:, 1::2], rtol=1e-6)
    assert L.Cropping1D((1, 1)).compute_output_shape((None, 5, 3)) == (None, 3, 3)
    assert L.ZeroPadding1D(1).compute_output_shape((None, None, 3)) == (None, None, 3)


@pytest.mark.parametrize("make", [lambda: L.ZeroPadding1D(-1), lambda: L.ZeroPadding1D((1, 2, 3)),
                                  lambda: L.Cropping1D(-1), lambda: L.UpSampling1D(0),
                                  lambda: L.Cropping1D((2, 1))(np.zeros((2, 3, 2), np.float32))])
def test_one_dimensional_layer_bad_arguments_are_value_errors(make):
    with pytest.raises(ValueError):       # as TF 2.21's
        make()
