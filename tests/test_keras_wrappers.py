"""keras.layers.TimeDistributed and Bidirectional against the layers they wrap, composed by hand:
TimeDistributed(Dense) is the Dense of each time step (numpy), Bidirectional(LSTM) the forward
layer's output merged with the go_backwards layer's, flipped back in time."""
import re

import numpy as np
import pytest

import jitgrad as tf

L = tf.keras.layers
X = np.random.default_rng(0).standard_normal((2, 4, 3)).astype(np.float32)


def test_time_distributed_dense_is_the_dense_of_each_step():
    td = L.TimeDistributed(L.Dense(2))
    td(X)
    kernel, bias = td.get_weights()
    np.testing.assert_allclose(td(X).numpy(), X @ kernel + bias, rtol=1e-6, atol=1e-6)
    assert [re.sub(r"_\d+", "", w.path) for w in td.weights] == ["time_distributed/dense/kernel",
                                                                  "time_distributed/dense/bias"]
    with pytest.raises(ValueError, match="at least 3"):
        L.TimeDistributed(L.Dense(2))(np.ones((2, 3), np.float32))


@pytest.mark.parametrize("merge_mode", ["concat", "sum", "ave", "mul", None])
@pytest.mark.parametrize("return_sequences", [False, True])
def test_bidirectional_merges_forward_and_backward_runs(merge_mode, return_sequences):
    bi = L.Bidirectional(L.LSTM(3, return_sequences=return_sequences), merge_mode=merge_mode)
    got = bi(X)
    forward = L.LSTM(3, return_sequences=return_sequences)
    backward = L.LSTM(3, return_sequences=return_sequences, go_backwards=True)
    forward(X), backward(X)
    weights = bi.get_weights()
    forward.set_weights(weights[:3])
    backward.set_weights(weights[3:])
    y, y_rev = forward(X).numpy(), backward(X).numpy()
    if return_sequences:
        y_rev = y_rev[:, ::-1]
    want = {"concat": lambda: np.concatenate([y, y_rev], -1), "sum": lambda: y + y_rev,
            "ave": lambda: (y + y_rev) / 2, "mul": lambda: y * y_rev, None: lambda: (y, y_rev)}[merge_mode]()
    if merge_mode is None:
        for a, b in zip(got, want):
            np.testing.assert_allclose(a.numpy(), b, rtol=1e-6, atol=1e-6)
    else:
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=1e-6)
    assert re.fullmatch(r"bidirectional(_\d+)?/forward_lstm(_\d+)?/lstm_cell/kernel", bi.weights[0].path)


def test_layers_called_on_a_variable_pass_gradients():
    v = tf.Variable(X)
    layer = L.Bidirectional(L.GRU(2))
    with tf.GradientTape() as t:
        y = tf.reduce_sum(layer(v) ** 2)
    g = t.gradient(y, v)
    assert g is not None and g.shape.as_list() == [2, 4, 3] and np.abs(g.numpy()).sum() > 0
