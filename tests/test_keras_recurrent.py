"""keras.layers SimpleRNN / LSTM / GRU (and their cells) against numpy re-implementations of
Keras 3's step equations; weight paths, shapes and defaults are Keras 3's. The fit's losses
were printed by TF 2.21 (Keras 3) for the same model, weights and data."""
import numpy as np
import pytest

import jitgrad as tf

keras = tf.keras
L = keras.layers


@pytest.fixture(autouse=True)
def _fresh_names():
    keras.backend.clear_session()


def _sigmoid(v):
    return 1 / (1 + np.exp(-v))


def _simple_step(x, states, k, rk, b, act):
    h = act(x @ k + b + states[0] @ rk)
    return h, [h]


def _lstm_step(x, states, k, rk, b, act):
    h, c = states
    z0, z1, z2, z3 = np.split(x @ k + h @ rk + b, 4, axis=1)
    c = _sigmoid(z1) * c + _sigmoid(z0) * act(z2)
    h = _sigmoid(z3) * act(c)
    return h, [h, c]


def _gru_step(x, states, k, rk, b, act, reset_after=True):
    h = states[0]
    u = h.shape[1]
    bx, bh = (b[0], b[1]) if reset_after else (b, np.zeros_like(b))
    xz, xr, xh = np.split(x @ k + bx, 3, axis=1)
    inner = h @ rk + bh if reset_after else h @ rk[:, :2 * u]
    z, r = _sigmoid(xz + inner[:, :u]), _sigmoid(xr + inner[:, u:2 * u])
    hh = act(xh + (r * inner[:, 2 * u:] if reset_after else (r * h) @ rk[:, 2 * u:]))
    h = z * h + (1 - z) * hh
    return h, [h]


def _run(step, x, weights, units, n_states, act=np.tanh, backwards=False, init=None, **kw):
    states = init or [np.zeros((x.shape[0], units), np.float32)] * n_states
    outs = []
    for t in (range(x.shape[1] - 1, -1, -1) if backwards else range(x.shape[1])):
        out, states = step(x[:, t], states, *weights, act, **kw)
        outs.append(out)
    return np.stack(outs, 1), states


def _weights(layer):
    return [(np.sin(np.arange(np.prod(w.shape)) * 0.37 + i) * 0.6).reshape(tuple(w.shape)).astype(np.float32)
            for i, w in enumerate(layer.weights)]


CASES = [(L.SimpleRNN, _simple_step, 1, "simple_rnn", "simple_rnn_cell", 1),
         (L.LSTM, _lstm_step, 2, "lstm", "lstm_cell", 4), (L.GRU, _gru_step, 1, "gru", "gru_cell", 3)]


@pytest.mark.parametrize("cls, step, n_states, name, cell, gates", CASES)
def test_recurrent_layers_match_numpy(cls, step, n_states, name, cell, gates):
    x = np.random.default_rng(5).standard_normal((3, 5, 4)).astype(np.float32)
    layer = cls(3, return_sequences=True)
    layer.build((None, 5, 4))
    assert [w.path for w in layer.weights] == [f"{name}/{cell}/{n}" for n in ("kernel", "recurrent_kernel", "bias")]
    bias_shape = (2, 9) if cls is L.GRU else (3 * gates,)              # GRU: reset_after=True by default
    assert [tuple(w.shape) for w in layer.weights] == [(4, 3 * gates), (3, 3 * gates), bias_shape]
    w = _weights(layer)
    layer.set_weights(w)
    seq, _ = _run(step, x, w, 3, n_states)
    np.testing.assert_allclose(layer(x).numpy(), seq, rtol=1e-5, atol=1e-6)

    back = cls(3, return_sequences=True, go_backwards=True)
    back.build((None, 5, 4))
    back.set_weights(w)
    # Keras 3 returns the outputs in reading order (last time step first)
    np.testing.assert_allclose(back(x).numpy(), _run(step, x, w, 3, n_states, backwards=True)[0], rtol=1e-5,
                               atol=1e-6)

    stated = cls(3, return_state=True, activation="relu")
    stated.build((None, 5, 4))
    stated.set_weights(w)
    init = [np.full((3, 3), 0.3, np.float32)] * n_states
    out = stated(x, initial_state=init)
    seq, states = _run(step, x, w, 3, n_states, act=lambda v: np.maximum(v, 0), init=init)
    assert len(out) == 1 + n_states
    np.testing.assert_allclose(out[0].numpy(), seq[:, -1], rtol=1e-5, atol=1e-6)
    for got, want in zip(out[1:], states):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)
    assert stated.compute_output_shape((None, 5, 4)) == ((None, 3),) * (1 + n_states)
    assert layer.compute_output_shape((None, 5, 4)) == (None, 5, 3)


def test_gru_reset_before_lstm_bias_and_cells():
    x = np.random.default_rng(6).standard_normal((2, 4, 3)).astype(np.float32)
    gru = L.GRU(2, reset_after=False)
    gru.build((None, 4, 3))
    assert tuple(gru.cell.bias.shape) == (6,)
    w = _weights(gru)
    gru.set_weights(w)
    want = _run(_gru_step, x, w, 2, 1, reset_after=False)[0][:, -1]
    np.testing.assert_allclose(gru(x).numpy(), want, rtol=1e-5, atol=1e-6)
    lstm = L.LSTM(2)
    lstm.build((None, 4, 3))        # unit_forget_bias: the forget gate's bias starts at 1
    np.testing.assert_array_equal(lstm.cell.bias.numpy(), [0, 0, 1, 1, 0, 0, 0, 0])
    k = lstm.cell.recurrent_kernel.numpy()      # recurrent_initializer="orthogonal": orthonormal rows
    np.testing.assert_allclose(k @ k.T, np.eye(2), atol=1e-5)
    cell = L.LSTMCell(3)
    cell.build((None, 4))
    cw = [np.full(tuple(v.shape), 0.1, np.float32) for v in cell.weights]
    cell.set_weights(cw)
    h0, c0 = np.zeros((2, 3), np.float32), np.ones((2, 3), np.float32)
    xs = np.random.default_rng(7).standard_normal((2, 4)).astype(np.float32)
    out, (h, c) = cell(xs, [h0, c0])
    want_h, (_, want_c) = _lstm_step(xs, [h0, c0], *cw, np.tanh)
    np.testing.assert_allclose(out.numpy(), want_h, rtol=1e-5)
    np.testing.assert_allclose(c.numpy(), want_c, rtol=1e-5)


def test_recurrent_dropout_only_in_training_and_a_fit_as_tf():
    x = np.random.default_rng(5).standard_normal((3, 5, 4)).astype(np.float32)
    drop = L.LSTM(3, dropout=0.5, recurrent_dropout=0.5, seed=1)
    drop.build((None, 5, 4))
    w = _weights(drop)
    drop.set_weights(w)
    np.testing.assert_allclose(drop(x).numpy(), _run(_lstm_step, x, w, 3, 2)[0][:, -1], rtol=1e-5, atol=1e-6)
    assert not np.allclose(drop(x, training=True).numpy(), drop(x).numpy())
    y = np.random.default_rng(5).standard_normal((3, 1)).astype(np.float32)
    m = keras.Sequential([keras.Input((5, 4)), L.LSTM(3, return_sequences=True), L.GRU(2), L.Dense(1)])
    # (lstm_1: this test made an LSTM already)
    assert [w.path for w in m.weights][:4] == ["sequential/lstm_1/lstm_cell/kernel",
                                               "sequential/lstm_1/lstm_cell/recurrent_kernel",
                                               "sequential/lstm_1/lstm_cell/bias", "sequential/gru/gru_cell/kernel"]
    m.set_weights(_weights(m))
    m.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    losses = m.fit(x, y, epochs=3, batch_size=3, verbose=0, shuffle=False).history["loss"]
    np.testing.assert_allclose(losses, [1.5108366, 0.8723281, 0.5295568], atol=2e-6)     # TF 2.21's


def test_rnn_of_a_list_of_cells_says_it_is_not_supported():
    # Keras 3 stacks the cells; jitgrad says NotImplementedError (was AttributeError on list.name)
    with pytest.raises(NotImplementedError, match="one cell"):
        keras.layers.RNN([keras.layers.GRUCell(3), keras.layers.SimpleRNNCell(2)])
