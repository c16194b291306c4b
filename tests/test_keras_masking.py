"""Keras 3 masks: Embedding(mask_zero) / Masking make them, layers pass them on (or drop them
with a warning), RNNs skip masked steps, pooling / attention / losses / metrics leave masked
steps out. Expected values come from numpy written here; the fit histories and the values of
Keras 3's quirks (a fully masked attention row, a functional model's build-time masks) were
printed by TF 2.21 (Keras 3) for the same weights and data."""
import warnings

import numpy as np
import pytest

import jitgrad as tf

keras = tf.keras
L = keras.layers

IDS = np.array([[3, 1, 0, 0, 0], [2, 4, 4, 1, 0], [0, 0, 5, 2, 1]], np.int32)   # padding also in front
KEEP = IDS != 0


@pytest.fixture(autouse=True)
def _fresh_names():
    keras.backend.clear_session()


def _set_uniform(layer_or_model, seed=7, scale=0.5):
    """Deterministic weights, the i-th from RandomState(seed + i) (as the TF parity runs set them)."""
    layer_or_model.set_weights([np.random.RandomState(seed + i).uniform(-scale, scale, w.shape).astype(np.float32)
                                for i, w in enumerate(layer_or_model.get_weights())])


def _embedded():
    emb = L.Embedding(6, 3, mask_zero=True)
    emb(IDS)
    _set_uniform(emb)
    return emb, emb(IDS)


def _sigmoid(v):
    return 1 / (1 + np.exp(-v))


def _lstm_step(x, h, c, k, rk, b):
    z0, z1, z2, z3 = np.split(x @ k + h @ rk + b, 4, axis=1)
    c = _sigmoid(z1) * c + _sigmoid(z0) * np.tanh(z2)
    return _sigmoid(z3) * np.tanh(c), c


def _masked_lstm(x, keep, k, rk, b, go_backwards=False, zero_output=False):
    """Keras 3's masked loop: a masked step keeps the states and repeats the previous output
    (zeros before any kept step), or outputs zeros with zero_output_for_mask."""
    n, t, _ = x.shape
    u = rk.shape[0]
    h, c, out = np.zeros((n, u)), np.zeros((n, u)), np.zeros((n, u))
    outs = []
    order = range(t - 1, -1, -1) if go_backwards else range(t)
    for i in order:
        m = keep[:, i:i + 1]
        h_new, c_new = _lstm_step(x[:, i], h, c, k, rk, b)
        out = np.where(m, h_new, 0.0 if zero_output else out)
        h, c = np.where(m, h_new, h), np.where(m, c_new, c)
        outs.append(out)
    return np.stack(outs, 1), h, c


# ---------------------------------------------------------------- making masks
def test_embedding_mask_zero_gives_the_nonzero_ids_as_mask():
    emb, e = _embedded()
    np.testing.assert_array_equal(np.asarray(e._keras_mask), KEEP)
    np.testing.assert_allclose(np.asarray(e), emb.get_weights()[0][IDS], rtol=0, atol=0)
    assert emb.supports_masking and L.Embedding(6, 3).compute_mask(IDS) is None
    assert getattr(L.Embedding(6, 3)(IDS), "_keras_mask", None) is None


def test_masking_layer_zeroes_and_masks_steps_equal_to_mask_value():
    x = np.random.RandomState(0).randn(2, 4, 3).astype(np.float32)
    x[0, 1] = -1.0
    x[1, 3] = -1.0
    x[1, 0, 1] = -1.0          # one feature equal to mask_value: the step is kept
    out = L.Masking(mask_value=-1.0)(x)
    keep = ~np.all(x == -1.0, axis=-1)
    np.testing.assert_array_equal(np.asarray(out._keras_mask), keep)
    np.testing.assert_array_equal(np.asarray(out), np.where(keep[..., None], x, 0))


def test_mask_passes_through_supporting_layers_and_is_dropped_with_a_warning():
    _, e = _embedded()
    for layer in (L.Dense(2), L.Dropout(0.5), L.Activation("relu"), L.LayerNormalization(), L.ReLU(),
                  L.TimeDistributed(L.Dense(2))):
        np.testing.assert_array_equal(np.asarray(layer(e)._keras_mask), KEEP)
    with pytest.warns(UserWarning, match="does not support masking"):
        out = L.Flatten()(e)
    assert getattr(out, "_keras_mask", None) is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        L.Flatten()(tf.constant(np.ones((2, 3, 1), np.float32)))     # no mask, no warning


def test_merge_masks():
    _, e = _embedded()
    other = tf.constant(np.ones((3, 5, 3), np.float32))
    other._keras_mask = tf.constant(np.eye(3, 5, dtype=bool))
    np.testing.assert_array_equal(np.asarray(L.Add()([e, other])._keras_mask), KEEP | np.eye(3, 5, dtype=bool))
    assert getattr(L.Add()([e, tf.constant(np.ones((3, 5, 3), np.float32))]), "_keras_mask", None) is None
    # Concatenate: an input without a mask counts as all kept
    np.testing.assert_array_equal(
        np.asarray(L.Concatenate()([e, tf.constant(np.ones((3, 5, 2), np.float32))])._keras_mask),
        np.ones((3, 5), bool))
    np.testing.assert_array_equal(np.asarray(L.Concatenate()([e, e])._keras_mask), KEEP)


# ---------------------------------------------------------------- recurrent layers
@pytest.mark.parametrize("kw", [{}, {"return_sequences": True}, {"go_backwards": True},
                                {"return_sequences": True, "go_backwards": True},
                                {"return_sequences": True, "zero_output_for_mask": True}])
def test_lstm_skips_masked_steps(kw):
    _, e = _embedded()
    lstm = L.LSTM(2, return_state=True, **kw)
    lstm(e)
    _set_uniform(lstm, seed=11)
    out, h, c = lstm(e)
    k, rk, b = lstm.get_weights()
    seqs, h_ref, c_ref = _masked_lstm(np.asarray(e, np.float64), KEEP, k, rk, b, kw.get("go_backwards", False),
                                      kw.get("zero_output_for_mask", False))
    want = seqs if kw.get("return_sequences") else seqs[:, -1]
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(h), h_ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(c), c_ref, rtol=1e-5, atol=1e-6)
    if kw.get("return_sequences"):
        np.testing.assert_array_equal(np.asarray(out._keras_mask), KEEP)
    else:
        assert getattr(out, "_keras_mask", None) is None
    assert getattr(h, "_keras_mask", None) is None


@pytest.mark.parametrize("cls", [L.SimpleRNN, L.GRU])
def test_rnn_last_output_of_a_right_padded_sequence_is_its_last_real_step(cls):
    x = np.random.RandomState(3).randn(3, 6, 4).astype(np.float32)
    lengths = [6, 2, 4]
    rnn = cls(3)
    rnn(x)
    _set_uniform(rnn, seed=5)
    masked = np.asarray(rnn(x, mask=np.arange(6)[None] < np.array(lengths)[:, None]))
    for i, n in enumerate(lengths):
        np.testing.assert_allclose(masked[i], np.asarray(rnn(x[i:i + 1, :n]))[0], rtol=1e-5, atol=1e-6)


def test_bidirectional_masked_sequences_are_zero_at_masked_steps_and_each_direction_skips_them():
    x = np.random.RandomState(4).randn(2, 5, 3).astype(np.float32)
    lengths = [5, 3]
    mask = np.arange(5)[None] < np.array(lengths)[:, None]
    bi = L.Bidirectional(L.LSTM(2, return_sequences=True))
    bi(x)
    _set_uniform(bi, seed=9)
    out = np.asarray(bi(x, mask=mask))
    np.testing.assert_array_equal(out[1, 3:], 0)     # Keras 3 forces zero_output_for_mask here
    short = np.asarray(bi(x[1:, :3]))[0]             # the padded row equals its unpadded run
    np.testing.assert_allclose(out[1, :3], short, rtol=1e-5, atol=1e-6)
    last = L.Bidirectional(L.GRU(2))
    last(x)
    _set_uniform(last, seed=2)
    np.testing.assert_allclose(np.asarray(last(x, mask=mask))[1], np.asarray(last(x[1:, :3]))[0], rtol=1e-5,
                               atol=1e-6)


# ---------------------------------------------------------------- pooling, attention
def test_global_average_pooling1d_averages_the_kept_steps():
    _, e = _embedded()
    out = L.GlobalAveragePooling1D()(e)
    ev = np.asarray(e)
    want = (ev * KEEP[..., None]).sum(1) / KEEP.sum(1, keepdims=True)
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-6)
    assert getattr(out, "_keras_mask", None) is None


def _softmax(z):
    z = z - z.max(-1, keepdims=True)
    return np.exp(z) / np.exp(z).sum(-1, keepdims=True)


def _mha_numpy(layer, q, v, keep_q, keep_v):
    """Keras 3's dot-product attention path (dropout 0): masked logits -> -0.7 * float32 max."""
    wq, bq, wk, bk, wv, bv, wo, bo = layer.get_weights()
    qp = np.einsum("btf,fnh->btnh", q, wq) + bq
    kp = np.einsum("bsf,fnh->bsnh", v, wk) + bk
    vp = np.einsum("bsf,fnh->bsnh", v, wv) + bv
    logits = np.einsum("btnh,bsnh->bnts", qp, kp) / np.sqrt(wq.shape[-1])
    allowed = (keep_q[:, None, :, None] & keep_v[:, None, None, :])
    logits = np.where(allowed, logits, -0.7 * 3.38953e38)
    return np.einsum("bnts,bsnh,nhe->bte", _softmax(logits), vp, wo) + bo


def test_multi_head_attention_uses_query_and_value_masks():
    _, e = _embedded()
    q_emb = L.Embedding(6, 3, mask_zero=True)
    q_emb(IDS[:, :3])
    _set_uniform(q_emb, seed=20)
    q = q_emb(IDS[:, :3])
    mha = L.MultiHeadAttention(2, 2)
    mha(q, e)                      # (this removes q's and e's masks, as Keras 3's: they are made again)
    _set_uniform(mha, seed=30)
    _, e = _embedded()
    q = q_emb(IDS[:, :3])
    out = mha(q, e)
    want = _mha_numpy(mha, np.asarray(q, np.float64), np.asarray(e, np.float64), KEEP[:, :3], KEEP)
    # a masked query's row has every key masked: uniform attention over all keys, as TF 2.21's
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(np.asarray(out._keras_mask), KEEP[:, :3])
    # Keras 3 removes the inputs' masks
    assert getattr(q, "_keras_mask", None) is None and getattr(e, "_keras_mask", None) is None


def test_functional_model_keeps_the_masks_fixed_when_it_was_built():
    # MultiHeadAttention removes its query's mask when it runs; the pooling after Add([query,
    # attention]) still gets the OR of both masks (Keras 3 records the masks at build time)
    inp = keras.Input((5,), dtype="int32")
    e = L.Embedding(6, 3, mask_zero=True)(inp)
    a = L.MultiHeadAttention(2, 2)(e, e)
    s = L.Add()([e, a])
    model = keras.Model(inp, [s, L.GlobalAveragePooling1D()(s)])
    _set_uniform(model)
    s_val, pooled = model(IDS)
    sv = np.asarray(s_val)
    np.testing.assert_allclose(np.asarray(pooled), (sv * KEEP[..., None]).sum(1) / KEEP.sum(1, keepdims=True),
                               rtol=1e-6)
    assert getattr(s_val, "_keras_mask", None) is None     # the run's own mask: gone, as in TF 2.21


# ---------------------------------------------------------------- losses, metrics, fit
def _masked_pred():
    rng = np.random.RandomState(5)
    y_pred = tf.constant(rng.rand(2, 3, 2).astype(np.float32))
    y_pred._keras_mask = tf.constant([[True, False, True], [False, False, True]])
    return rng.rand(2, 3, 2).astype(np.float32), y_pred


def test_losses_leave_masked_steps_out():
    y_true, y_pred = _masked_pred()
    keep = np.asarray(y_pred._keras_mask)
    per_step = ((y_true - np.asarray(y_pred)) ** 2).mean(-1)
    mse = keras.losses.MeanSquaredError
    np.testing.assert_allclose(float(mse()(y_true, y_pred)), per_step[keep].mean(), rtol=1e-6)
    np.testing.assert_allclose(float(mse(reduction="sum")(y_true, y_pred)), per_step[keep].sum(), rtol=1e-6)
    # without a mean the mask is 0 / 1 (Keras 3's apply_mask)
    np.testing.assert_allclose(np.asarray(mse(reduction="none")(y_true, y_pred)), per_step * keep,
                               rtol=1e-6)
    sw = np.array([[1.0], [3.0]], np.float32)
    np.testing.assert_allclose(float(mse()(y_true, y_pred, sample_weight=sw)),
                               (per_step * keep * 2 * sw).sum() / 6, rtol=1e-6)
    # ignore_class and the mask together: the mean is over the steps kept by both
    labels = np.array([[1, 0, 1], [1, 1, 0]])
    logp = np.log(np.clip(np.asarray(y_pred), 1e-7, 1 - 1e-7))
    ce = -np.take_along_axis(logp - np.log(np.exp(logp).sum(-1, keepdims=True)), labels[..., None], -1)[..., 0]
    both = keep & (labels != 0)
    np.testing.assert_allclose(float(keras.losses.SparseCategoricalCrossentropy(ignore_class=0)(labels, y_pred)),
                               ce[both].mean(), rtol=1e-5)


def test_metrics_count_only_kept_steps():
    y_true, y_pred = _masked_pred()
    keep = np.asarray(y_pred._keras_mask)
    m = keras.metrics.MeanSquaredError()
    m.update_state(y_true, y_pred)
    np.testing.assert_allclose(float(m.result()), ((y_true - np.asarray(y_pred)) ** 2).mean(-1)[keep].mean(),
                               rtol=1e-6)


def _sequence_data():
    rng = np.random.RandomState(1)
    n, t = 12, 6
    lens = rng.randint(1, t + 1, n)
    ids = np.zeros((n, t), np.int32)
    for i, length in enumerate(lens):
        ids[i, :length] = rng.randint(1, 8, length)
    return ids, rng.randint(0, 3, (n, t)).astype(np.int32)


@pytest.mark.parametrize("rnn, evaluated, history", [
    # TF 2.21's numbers for the same model, weights and data
    (lambda: L.LSTM(5, return_sequences=True), [1.096407, 0.325581],
     {"accuracy": [0.395349, 0.465116, 0.465116], "loss": [1.086608, 1.061594, 1.053162]}),
    (lambda: L.GRU(5, return_sequences=True), [1.096067, 0.325581],
     {"accuracy": [0.395349, 0.465116, 0.465116], "loss": [1.086191, 1.061522, 1.053525]}),
    (lambda: L.Bidirectional(L.LSTM(3, return_sequences=True)), [1.135859, 0.209302],
     {"accuracy": [0.255814, 0.465116, 0.465116], "loss": [1.118728, 1.071485, 1.055671]}),
])
def test_masked_sequence_model_evaluates_and_fits_as_tf(rnn, evaluated, history):
    ids, y = _sequence_data()
    model = keras.Sequential([keras.Input((6,), dtype="int32"), L.Embedding(8, 4, mask_zero=True), rnn(),
                              L.Dense(3, activation="softmax")])
    _set_uniform(model, seed=3, scale=0.4)
    np.testing.assert_array_equal(np.asarray(model(ids)._keras_mask), ids != 0)
    model.compile(optimizer=keras.optimizers.SGD(0.5), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    np.testing.assert_allclose(model.evaluate(ids, y, verbose=0), evaluated, atol=2e-6)
    # the accuracy counts only the 43 real steps: an independent check of the first value
    pred = np.asarray(model.predict(ids, verbose=0)).argmax(-1)
    np.testing.assert_allclose(evaluated[1], ((pred == y) & (ids != 0)).sum() / (ids != 0).sum(), atol=1e-6)
    got = model.fit(ids, y, batch_size=5, epochs=3, shuffle=False, verbose=0).history
    for key, values in history.items():
        np.testing.assert_allclose(got[key], values, atol=2e-6)


def test_masked_loss_in_fit_ignores_padded_targets():
    # changing the targets at padded steps must not change the loss or the trained weights
    ids, y = _sequence_data()
    y2 = np.where(ids != 0, y, (y + 1) % 3)
    results = []
    for targets in (y, y2):
        keras.backend.clear_session()
        model = keras.Sequential([keras.Input((6,), dtype="int32"), L.Embedding(8, 4, mask_zero=True),
                                  L.LSTM(3, return_sequences=True), L.Dense(3, activation="softmax")])
        _set_uniform(model, seed=3, scale=0.4)
        model.compile(optimizer=keras.optimizers.SGD(0.5), loss="sparse_categorical_crossentropy")
        h = model.fit(ids, targets, batch_size=4, epochs=2, shuffle=False, verbose=0).history["loss"]
        results.append((h, model.get_weights()))
    np.testing.assert_array_equal(results[0][0], results[1][0])
    for a, b in zip(results[0][1], results[1][1]):
        np.testing.assert_array_equal(a, b)


def test_gradients_of_a_masked_last_output_ignore_padding_ids():
    # the embedding rows of ids seen only at masked steps get no gradient (id 0 is only padding)
    ids, _ = _sequence_data()
    model = keras.Sequential([keras.Input((6,), dtype="int32"), L.Embedding(8, 4, mask_zero=True), L.LSTM(5),
                              L.Dense(1, activation="sigmoid")])
    _set_uniform(model, seed=3, scale=0.4)
    y = (np.arange(12) % 2).astype(np.float32)[:, None]
    with tf.GradientTape() as tape:
        loss = keras.losses.BinaryCrossentropy()(y, model(ids))
    grad = np.asarray(tf.convert_to_tensor(tape.gradient(loss, model.trainable_variables)[0]))
    np.testing.assert_array_equal(grad[0], 0)
    assert np.abs(grad[1:]).sum() > 0


class _MaskedSum(L.Layer):
    """Sums the features of the kept rows it is given a mask for (a layer taking `mask`)."""

    def call(self, inputs, mask=None):
        if mask is None:
            return tf.reduce_sum(inputs, axis=-1)
        return tf.reduce_sum(inputs * tf.cast(mask, inputs.dtype)[..., None], axis=-1)


def test_time_distributed_hands_each_step_its_mask():
    x = np.arange(2 * 3 * 4 * 2, dtype=np.float32).reshape(2, 3, 4, 2)
    mask = np.random.RandomState(0).rand(2, 3, 4) > 0.5
    out = L.TimeDistributed(_MaskedSum())(x, mask=mask)
    np.testing.assert_array_equal(np.asarray(out), (x * mask[..., None]).sum(-1))
    with pytest.raises(ValueError, match="incompatible with the input shape"):
        L.TimeDistributed(_MaskedSum())(x, mask=mask[:, :2])


def _attention_numpy(q, v, keep_q, keep_v, scale=1.0, causal=False):
    """Keras 3's Attention (dot scores): masked value steps get 1e9 subtracted, masked query
    steps output zeros."""
    scores = np.einsum("btd,bsd->bts", q, v) * scale
    keep = np.broadcast_to(keep_v[:, None, :], scores.shape)
    if causal:
        keep = keep & np.tril(np.ones(scores.shape[1:], bool))[None]
    scores = np.where(keep, scores, scores - 1e9)
    return np.where(keep_q[..., None], np.einsum("bts,bsd->btd", _softmax(scores), v), 0.0)


@pytest.mark.parametrize("causal", [False, True])
def test_attention_layer_uses_query_and_value_masks(causal):
    _, v = _embedded()
    q_emb = L.Embedding(6, 3, mask_zero=True)
    q_emb(IDS[:, :3])
    _set_uniform(q_emb, seed=20, scale=1.0)
    q = q_emb(IDS[:, :3])
    layer = L.Attention(use_scale=True)
    layer([q, v])
    layer.set_weights([np.array(1.5, np.float32)])
    out, weights = layer([q, v], use_causal_mask=causal, return_attention_scores=True)
    want = _attention_numpy(np.asarray(q, np.float64), np.asarray(v, np.float64), KEEP[:, :3], KEEP, 1.5, causal)
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(np.asarray(out._keras_mask), KEEP[:, :3])
    np.testing.assert_allclose(np.asarray(weights).sum(-1), 1.0, rtol=1e-6)
    with pytest.raises(ValueError, match="must be called on a list of inputs"):
        L.Attention()(q)
