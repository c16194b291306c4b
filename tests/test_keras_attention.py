"""keras.layers.MultiHeadAttention and EinsumDense against a numpy re-implementation of Keras 3's
attention (projections, scaled scores, masked softmax, output projection); weight paths and
shapes are Keras 3's; the fit's losses were printed by TF 2.21 for the same model and data."""
import numpy as np
import pytest

import jitgrad as tf

keras = tf.keras
L = keras.layers


@pytest.fixture(autouse=True)
def _fresh_names():
    keras.backend.clear_session()


def _set(layer):
    weights = [(np.sin(np.arange(np.prod(w.shape)) * 0.41 + i) * 0.5).reshape(tuple(w.shape)).astype(np.float32)
               for i, w in enumerate(layer.weights)]
    layer.set_weights(weights)
    return weights


def _attention(q, v, k, w, key_dim, mask=None):
    qk, qb, kk, kb, vk, vb, ok, ob = w
    Q = np.einsum("btf,fnd->btnd", q, qk) + qb
    K = np.einsum("bsf,fnd->bsnd", k, kk) + kb
    V = np.einsum("bsf,fnd->bsnd", v, vk) + vb
    scores = np.einsum("bsnd,btnd->bnts", K, Q / np.sqrt(key_dim))
    if mask is not None:
        scores = np.where(mask[:, None], scores, -1e9)
    scores = np.exp(scores - scores.max(-1, keepdims=True))
    scores /= scores.sum(-1, keepdims=True)
    if mask is not None:
        scores = np.where(mask[:, None], scores, 0)
    return np.einsum("btnd,ndo->bto", np.einsum("bnts,bsnd->btnd", scores, V), ok) + ob, scores


def _data(seed=8):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) for s in ((2, 4, 5), (2, 6, 7), (2, 6, 3))]


def test_multi_head_attention_weights_and_outputs():
    q, v, k = _data()
    mha = L.MultiHeadAttention(2, 3, value_dim=4, output_shape=6)
    mha(q, v, k)
    assert [w.path for w in mha.weights] == [f"multi_head_attention/{p}/{n}" for p in
                                             ("query", "key", "value", "attention_output") for n in ("kernel", "bias")]
    assert [tuple(w.shape) for w in mha.weights] == [(5, 2, 3), (2, 3), (3, 2, 3), (2, 3), (7, 2, 4), (2, 4),
                                                     (2, 4, 6), (6,)]
    w = _set(mha)
    out, scores = mha(q, v, k, return_attention_scores=True)
    want, want_scores = _attention(q, v, k, w, 3)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(scores.numpy(), want_scores, rtol=1e-5, atol=1e-6)
    assert mha.compute_output_shape((None, 4, 5), (None, 6, 7)) == (None, 4, 6)
    with pytest.raises(ValueError, match="num_heads"):
        L.MultiHeadAttention(0, 3)


def test_multi_head_attention_masks():
    q, v, _ = _data()
    mha = L.MultiHeadAttention(2, 3)
    mha(q, v)
    w = _set(mha)
    am = np.random.default_rng(9).uniform(size=(2, 4, 6)) > 0.3
    vm = np.array([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 0]], bool)
    np.testing.assert_allclose(mha(q, v, attention_mask=am).numpy(), _attention(q, v, v, w, 3, am)[0], rtol=1e-5,
                               atol=1e-5)
    np.testing.assert_allclose(mha(q, v, value_mask=vm).numpy(),
                               _attention(q, v, v, w, 3, np.broadcast_to(vm[:, None], (2, 4, 6)))[0], rtol=1e-5,
                               atol=1e-5)
    self_attn = L.MultiHeadAttention(2, 3)
    self_attn(v, v)
    w = _set(self_attn)
    causal = np.broadcast_to(np.tril(np.ones((6, 6), bool)), (2, 6, 6))
    np.testing.assert_allclose(self_attn(v, v, use_causal_mask=True).numpy(), _attention(v, v, v, w, 3, causal)[0],
                               rtol=1e-5, atol=1e-5)


def test_self_attention_block_in_a_functional_model_fits_as_tf():
    x = np.random.default_rng(12).standard_normal((2, 4, 5)).astype(np.float32)
    y = np.random.default_rng(10).standard_normal((2, 1)).astype(np.float32)
    i = keras.Input((4, 5))
    h = L.LayerNormalization()(L.Add()([i, L.MultiHeadAttention(2, 3)(i, i)]))   # the key/value: a KerasTensor too
    m = keras.Model(i, L.Dense(1)(L.GlobalAveragePooling1D()(h)))
    assert len(m.weights) == 12
    _set(m)
    m.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    losses = m.fit(x, y, epochs=3, batch_size=2, verbose=0, shuffle=False).history["loss"]
    np.testing.assert_allclose(losses, [0.7197523, 0.1838315, 0.074733], atol=2e-6)     # TF 2.21's


def test_einsum_dense():
    x = np.random.default_rng(11).standard_normal((2, 3, 5)).astype(np.float32)
    e = L.EinsumDense("abc,cd->abd", output_shape=(None, 4), bias_axes="d", activation="relu")
    e.build((None, 3, 5))
    assert [(w.path, tuple(w.shape)) for w in e.weights] == [("einsum_dense/kernel", (5, 4)),
                                                              ("einsum_dense/bias", (4,))]
    k, b = _set(e)
    np.testing.assert_allclose(e(x).numpy(), np.maximum(x @ k + b, 0), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="Invalid einsum equation"):
        L.EinsumDense("ab->b", output_shape=2)



@pytest.mark.parametrize("make, fan_in, fan_out", [
    # Keras 3.15 (TF 2.21's): the kernel's letters in the output are fan-out, the rest fan-in
    (lambda: L.EinsumDense("abc,cde->abde", output_shape=(None, 8, 64)), 96, 8 * 64),
    (lambda: L.EinsumDense("abcd,cde->abe", output_shape=(None, 96)), 8 * 64, 96),
])
def test_einsum_dense_glorot_limit_takes_the_kernels_input_and_output_axes(make, fan_in, fan_out):
    layer = make()
    layer.build((None, 3, 96) if layer.equation.startswith("abc,") else (None, 3, 8, 64))
    k = layer.kernel.numpy()
    limit = np.sqrt(6.0 / (fan_in + fan_out))
    assert np.abs(k).max() <= limit
    # a uniform draw of 49152 values reaches past 99% of its limit (compute_fans' conv rule would
    # have given a limit of sqrt(6 / (96 * 8 + 64 * 96)) = 0.0295 for the first, 0.21 of this one)
    assert np.abs(k).max() > 0.99 * limit
    np.testing.assert_allclose(k.std(), limit / np.sqrt(3.0), rtol=0.03)


def test_multi_head_attention_kernels_draw_at_tf_scale():
    layer = L.MultiHeadAttention(4, 32)
    x = np.zeros((1, 2, 64), np.float32)
    layer(x, x)
    # query / key / value (64, 4, 32): fan-in 64, fan-out 128; output (4, 32, 64): 128 and 64 --
    # Glorot's limit sqrt(6 / 192) for all four (TF 2.21 draws max |w| 0.1767 of 0.1768)
    limit = np.sqrt(6.0 / 192)
    for w in layer.weights:
        if w.path.endswith("kernel"):
            assert 0.95 * limit < np.abs(w.numpy()).max() <= limit, w.path


def test_variance_scaling_axes_and_config():
    init = keras.initializers.VarianceScaling(2.0, "fan_in", "uniform", seed=3, input_axes=[0, 1], output_axes=[2])
    w = init((10, 20, 30)).numpy()
    limit = np.sqrt(3.0 * 2.0 / 200)
    assert limit * 0.99 < np.abs(w).max() <= limit
    config = keras.utils.serialize_keras_object(init)["config"]    # Keras 3.15's config has the axes
    assert config["input_axes"] == [0, 1] and config["output_axes"] == [2]
