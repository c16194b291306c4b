"""tf.keras layers, models and initializers: outputs against numpy, weight
tracking and naming as Keras 3, eager and inside jitgrad.function."""
import numpy as np
import pytest

import jitgrad as tf

keras = tf.keras


@pytest.fixture(autouse=True)
def _fresh_names():
    keras.backend.clear_session()


def _relu(x):
    return np.maximum(x, 0)


def test_dense_forward_names_and_weights():
    layer = keras.layers.Dense(3, activation="relu")
    x = np.array([[1.0, -2.0], [0.5, 4.0]], np.float32)
    w = np.array([[1.0, -1.0, 0.5], [0.25, 2.0, -3.0]], np.float32)
    b = np.array([0.1, -0.2, 0.3], np.float32)
    layer(x)                                  # builds
    assert layer.built and layer.kernel.shape == (2, 3) and layer.bias.shape == (3,)
    layer.set_weights([w, b])
    np.testing.assert_allclose(layer(x).numpy(), _relu(x @ w + b), rtol=1e-6)
    assert [v.name for v in layer.trainable_weights] == ["kernel", "bias"]
    assert [v.path for v in layer.weights] == ["dense/kernel", "dense/bias"]
    assert layer.count_params() == 9 and layer.name == "dense"
    assert keras.layers.Dense(2).name == "dense_1"
    with pytest.raises(ValueError, match="positive integer"):
        keras.layers.Dense(0)


def test_glorot_uniform_default_bounds_and_seeding():
    keras.utils.set_random_seed(3)      # Keras 3 seeds initializers from Python's random
    a = keras.layers.Dense(300)
    a(np.zeros((1, 200), np.float32))
    k = a.kernel.numpy()
    limit = np.sqrt(6.0 / (200 + 300))
    assert np.all(np.abs(k) <= limit) and np.all(a.bias.numpy() == 0)
    # uniform on [-limit, limit]: variance limit^2 / 3 (60000 draws: within 3%)
    assert abs(k.var() / (limit ** 2 / 3) - 1) < 0.03 and abs(k.mean()) < 0.01 * limit
    keras.utils.set_random_seed(3)
    b = keras.layers.Dense(300)
    b(np.zeros((1, 200), np.float32))
    np.testing.assert_array_equal(b.kernel.numpy(), k)          # same seed, same weights
    init = keras.initializers.get("he_normal")
    v = init((400, 100)).numpy()
    # truncated normal with stddev sqrt(2 / fan_in) / .8796 before truncation -> std sqrt(2/400)
    assert abs(v.std() / np.sqrt(2 / 400) - 1) < 0.05 and np.abs(v).max() <= 2 * np.sqrt(2 / 400) / .87962566 + 1e-6
    np.testing.assert_array_equal(keras.initializers.Constant(2.5)((2, 2)).numpy(), np.full((2, 2), 2.5))


def test_flatten_activation_dropout_embedding():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 10
    np.testing.assert_array_equal(keras.layers.Flatten()(x).numpy(), x.reshape(2, 12))
    np.testing.assert_allclose(keras.layers.Activation("sigmoid")(x).numpy(), 1 / (1 + np.exp(-x)), rtol=1e-6)
    np.testing.assert_allclose(keras.activations.get("softmax")(tf.constant(x)).numpy(),
                               np.exp(x) / np.exp(x).sum(-1, keepdims=True), rtol=1e-5)
    assert keras.activations.get(None)(3.0) == 3.0
    drop = keras.layers.Dropout(0.25, seed=1)
    big = np.ones((200, 100), np.float32)
    np.testing.assert_array_equal(drop(big).numpy(), big)              # inference: identity
    out = drop(big, training=True).numpy()
    kept = out != 0
    assert abs(kept.mean() - 0.75) < 0.02
    np.testing.assert_allclose(out[kept], 1 / 0.75, rtol=1e-6)
    emb = keras.layers.Embedding(5, 3)
    ids = np.array([[0, 4], [2, 2]])
    out = emb(ids).numpy()
    table = emb.embeddings.numpy()
    np.testing.assert_array_equal(out, table[ids])
    assert np.all(np.abs(table) <= 0.05) and out.shape == (2, 2, 3)   # RandomUniform(-0.05, 0.05)


def test_custom_layer_build_call_and_freezing():
    class Scale(keras.layers.Layer):
        def build(self, input_shape):
            self.w = self.add_weight(shape=(input_shape[-1],), initializer="ones", name="w")
            self.c = self.add_weight(shape=(), initializer="zeros", trainable=False, name="c")

        def call(self, x):
            return x * self.w + self.c

    s = Scale()
    x = np.array([[1.0, 2.0]], np.float32)
    np.testing.assert_array_equal(s(x).numpy(), x)
    assert [v.name for v in s.trainable_weights] == ["w"] and [v.name for v in s.non_trainable_weights] == ["c"]
    s.set_weights([np.array([2.0, 3.0]), np.array(1.0)])
    np.testing.assert_array_equal(s(x).numpy(), [[3.0, 7.0]])
    s.trainable = False
    assert s.trainable_weights == [] and len(s.non_trainable_weights) == 2
    with pytest.raises(ValueError, match="weight list of length 1"):
        s.set_weights([np.zeros(2)])


def _mlp_weights():
    w1 = np.array([[0.5, -1.0, 0.25], [1.5, 0.5, -0.5]], np.float32)
    b1 = np.array([0.0, 0.1, -0.1], np.float32)
    w2 = np.array([[1.0], [-2.0], [0.5]], np.float32)
    b2 = np.array([0.3], np.float32)
    return [w1, b1, w2, b2]


def _mlp_np(x, w1, b1, w2, b2):
    return _relu(x @ w1 + b1) @ w2 + b2


def test_functional_sequential_and_subclassed_models_agree_with_numpy():
    x = np.array([[1.0, 2.0], [-1.0, 0.5], [3.0, -2.0]], np.float32)
    weights = _mlp_weights()
    inputs = keras.Input(shape=(2,))
    h = keras.layers.Dense(3, activation="relu")(inputs)
    functional = keras.Model(inputs, keras.layers.Dense(1)(h))
    sequential = keras.Sequential([keras.layers.Dense(3, activation="relu", input_shape=(2,)), keras.layers.Dense(1)])

    class MLP(keras.Model):
        def __init__(self):
            super().__init__()
            self.hidden = keras.layers.Dense(3, activation="relu")
            self.drop = keras.layers.Dropout(0.5)
            self.out = keras.layers.Dense(1)

        def call(self, x, training=False):
            return self.out(self.drop(self.hidden(x), training=training))

    sub = MLP()
    sub(x)
    for model in (functional, sequential, sub):
        model.set_weights(weights)
        np.testing.assert_allclose(model(x).numpy(), _mlp_np(x, *weights), rtol=1e-6)
        np.testing.assert_allclose(model.predict(x, verbose=0), _mlp_np(x, *weights), rtol=1e-6)
        assert [tuple(v.shape.as_list()) for v in model.trainable_weights] == [(2, 3), (3,), (3, 1), (1,)]
    assert [v.path for v in sequential.weights][0] == "sequential/dense_2/kernel"
    assert [v.path for v in sub.weights][:2] == ["mlp/dense_4/kernel", "mlp/dense_4/bias"]
    # Keras 3: a functional model lists its InputLayer first, a Sequential one does not
    assert [type(layer).__name__ for layer in functional.layers] == ["InputLayer", "Dense", "Dense"]
    assert len(sequential.layers) == 2 and len(sub.layers) == 3


def test_layers_inside_function_match_eager(graph_mode):
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(3, activation="relu"), keras.layers.Dense(1)])
    weights = _mlp_weights()
    model.set_weights(weights)
    x = np.array([[1.0, 2.0], [-1.0, 0.5]], np.float32)

    @tf.function
    def f(x):
        return model(x)
    np.testing.assert_allclose(f(x).numpy(), _mlp_np(x, *weights), rtol=1e-6)


SEQUENTIAL_SUMMARY = """Model: "sequential"
┏━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━┓
┃ Layer (type)                    ┃ Output Shape           ┃       Param # ┃
┡━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━┩
│ dense (Dense)                   │ (None, 300)            │       235,500 │
├─────────────────────────────────┼────────────────────────┼───────────────┤
│ dropout (Dropout)               │ (None, 300)            │             0 │
├─────────────────────────────────┼────────────────────────┼───────────────┤
│ dense_1 (Dense)                 │ (None, 2)              │           602 │
└─────────────────────────────────┴────────────────────────┴───────────────┘
 Total params: 236,102 (922.27 KB)
 Trainable params: 236,102 (922.27 KB)
 Non-trainable params: 0 (0.00 B)"""


def test_summary_is_keras_table(capsys):
    # the text TF 2.21 (Keras 3) prints for this model; 784*300+300 = 235,500 and 300*2+2 = 602
    # parameters, 236,102 * 4 bytes = 922.27 KiB
    model = keras.Sequential([keras.layers.Dense(300, activation="relu"), keras.layers.Dropout(0.1),
                              keras.layers.Dense(2)])
    model.summary()
    assert "│ dense (Dense)                   │ ?                      │   0 (unbuilt) │" in capsys.readouterr().out
    model.build((None, 784))
    model.summary()
    assert capsys.readouterr().out == SEQUENTIAL_SUMMARY + "\n"
    inputs = keras.Input((3,))
    functional = keras.Model(inputs, keras.layers.Dense(5)(inputs))
    lines = []
    functional.summary(print_fn=lines.append)
    text = lines[0].splitlines()
    assert text[0] == 'Model: "functional"'
    assert text[4] == "│ input_layer (InputLayer)        │ (None, 3)              │             0 │"
    assert text[-3] == " Total params: 20 (80.00 B)"


CONNECTED_SUMMARY = """Model: "fm"
┏━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━┓
┃ Layer (type)        ┃ Output Shape      ┃    Param # ┃ Connected to      ┃
┡━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━┩
│ q (InputLayer)      │ (None, 5, 4)      │          0 │ -                 │
├─────────────────────┼───────────────────┼────────────┼───────────────────┤
│ v (InputLayer)      │ (None, 6, 4)      │          0 │ -                 │
├─────────────────────┼───────────────────┼────────────┼───────────────────┤
│ mha                 │ (None, 5, 4)      │        118 │ q[0][0], v[0][0]  │
│ (MultiHeadAttentio… │                   │            │                   │
├─────────────────────┼───────────────────┼────────────┼───────────────────┤
│ add (Add)           │ (None, 5, 4)      │          0 │ mha[0][0],        │
│                     │                   │            │ q[0][0]           │
├─────────────────────┼───────────────────┼────────────┼───────────────────┤
│ out (Dense)         │ (None, 5, 2)      │         10 │ add[0][0]         │
└─────────────────────┴───────────────────┴────────────┴───────────────────┘
 Total params: 128 (512.00 B)
 Trainable params: 128 (512.00 B)
 Non-trainable params: 0 (0.00 B)"""


def test_summary_wraps_cells_and_shows_connections_for_a_branching_model(capsys):
    # the text TF 2.21 (Keras 3) prints: a model with two inputs is not sequential-like, so
    # Keras 3 adds "Connected to" in narrower columns; a long word in a cell ends in "…"
    q = keras.Input((5, 4), name="q")
    v = keras.Input((6, 4), name="v")
    attended = keras.layers.MultiHeadAttention(2, 3, name="mha")(q, v)
    out = keras.layers.Dense(2, name="out")(keras.layers.Add(name="add")([attended, q]))
    keras.Model([q, v], out, name="fm").summary()
    assert capsys.readouterr().out == CONNECTED_SUMMARY + "\n"
    keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Conv2D(4, 3), keras.layers.BatchNormalization()]).summary()
    assert """├─────────────────────────────────┼────────────────────────┼───────────────┤
│ batch_normalization             │ (None, 6, 6, 4)        │            16 │""" in capsys.readouterr().out     # wrapped at the space


def test_functional_multi_output_layers_and_keras_tensor_arithmetic():
    inputs = keras.Input((3, 2))
    seq, h, c = keras.layers.LSTM(4, return_state=True, return_sequences=True)(inputs)
    model = keras.Model(inputs, [c, h, seq])
    x = np.random.default_rng(0).standard_normal((2, 3, 2)).astype(np.float32)
    got_c, got_h, got_seq = [np.asarray(v) for v in model(x)]
    want_seq, want_h, want_c = [np.asarray(v) for v in model.layers[1](x)]   # the layer itself, eagerly
    np.testing.assert_allclose(got_c, want_c, rtol=1e-6)
    np.testing.assert_allclose(got_h, want_h, rtol=1e-6)
    np.testing.assert_allclose(got_seq, want_seq, rtol=1e-6)
    assert got_c.shape == (2, 4) and got_seq.shape == (2, 3, 4)
    i = keras.Input((2,))
    dense = keras.layers.Dense(2, kernel_initializer="ones", bias_initializer="zeros")
    out = 2.0 * (dense(i) + i) - 1.0
    model = keras.Model(i, [out, out[:, 0]])
    assert [type(layer).__name__ for layer in model.layers] == ["InputLayer", "Dense"]   # ops are not layers
    full, first = model(np.array([[1.0, 2.0]], np.float32))
    np.testing.assert_array_equal(np.asarray(full), [[7.0, 9.0]])        # 2 * ([3, 3] + [1, 2]) - 1
    np.testing.assert_array_equal(np.asarray(first), [7.0])


def test_dense_embedding_dropout_inputs_as_keras3():
    dense = keras.layers.Dense(1, kernel_initializer="ones", bias_initializer="zeros")
    np.testing.assert_array_equal(dense(np.array([[1, 2]], np.int64)).numpy(), [[3.0]])   # ints promoted
    with pytest.raises(ValueError, match="expected axis -1 of input shape to have value 2"):
        dense(np.ones((1, 4), np.float32))
    emb = keras.layers.Embedding(3, 1, embeddings_initializer=keras.initializers.Constant([[0.0], [1.0], [2.0]]))
    np.testing.assert_array_equal(emb(np.array([[-1, 0, -3]])).numpy()[..., 0], [[2.0, 0.0, 0.0]])
    with pytest.raises(tf.errors.InvalidArgumentError):
        emb(np.array([[3]]))
    np.testing.assert_array_equal(keras.layers.Dropout(1.0)(np.ones((1, 2), np.float32), training=True).numpy(),
                                  [[0.0, 0.0]])
    np.testing.assert_array_equal(keras.metrics.binary_accuracy([[1.0, 0.0]], [[0.7, 0.8]]).numpy(), [[1.0, 0.0]])


def test_get_layer_and_functional_inputs_outputs():
    i = keras.Input((2,), name="x")
    d = keras.layers.Dense(3, name="d")
    out = d(i)
    model = keras.Model(i, out)
    assert model.get_layer("d") is d and model.get_layer(index=0).name == "x"
    assert model.input is i and model.output is out and model.inputs == [i] and model.outputs == [out]
    with pytest.raises(ValueError, match="No such layer: zz"):
        model.get_layer("zz")
    with pytest.raises(ValueError, match="only has 2 layers"):
        model.get_layer(index=5)
    seq = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1, name="q")])
    assert seq.get_layer("q") is seq.get_layer(index=0)


def test_model_input_and_output_shapes():
    seq = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    assert seq.output_shape == (None, 2) and seq.input_shape == (None, 3)
    i = keras.Input((3,))
    functional = keras.Model(i, keras.layers.Dense(4)(i))
    assert functional.output_shape == (None, 4) and functional.input_shape == (None, 3)
    with pytest.raises(AttributeError, match="never been called"):
        keras.Sequential([keras.layers.Dense(2)]).output_shape


@pytest.mark.parametrize("input_dim, output_dim", [(0, 3), (-1, 3), (2.5, 3), (3, 0)])
def test_embedding_sizes_must_be_positive_integers(input_dim, output_dim):
    # Keras 3's ValueError at construction (an empty table used to fail only at the gather)
    with pytest.raises(ValueError, match="must be a positive integer"):
        keras.layers.Embedding(input_dim, output_dim)


def test_noise_layers_are_the_identity_unless_training():
    x = np.random.default_rng(0).standard_normal((4, 5, 3)).astype(np.float32)
    for layer in (keras.layers.SpatialDropout1D(0.5), keras.layers.GaussianNoise(0.5),
                  keras.layers.GaussianDropout(0.5)):
        np.testing.assert_array_equal(layer(x).numpy(), x)
        np.testing.assert_array_equal(layer(x, training=False).numpy(), x)
    x4 = x[:, :, None, :]
    np.testing.assert_array_equal(keras.layers.SpatialDropout2D(0.5)(x4).numpy(), x4)


def test_spatial_dropout_drops_whole_channels():
    x = np.ones((40, 6, 5, 30), np.float32)
    y = keras.layers.SpatialDropout2D(0.25, seed=3)(x, training=True).numpy()
    assert set(np.unique(y).tolist()) == {0.0, np.float32(1 / 0.75)}
    assert np.all(y == y[:, :1, :1, :])           # a channel is kept or dropped at every pixel
    assert 0.15 < (y[:, 0, 0, :] == 0).mean() < 0.35   # 1200 draws of rate 0.25
    y = keras.layers.SpatialDropout1D(0.5)(x[:, :, 0], training=True).numpy()
    assert np.all(y == y[:, :1, :])


def test_gaussian_noise_and_dropout_draw_at_their_scale():
    x = np.ones((100, 200), np.float32)
    noise = keras.layers.GaussianNoise(0.3, seed=1)(x, training=True).numpy() - 1.0
    assert abs(noise.mean()) < 0.01 and abs(noise.std() - 0.3) < 0.01
    y = keras.layers.GaussianDropout(0.2, seed=1)(x, training=True).numpy()
    assert abs(y.mean() - 1.0) < 0.01 and abs(y.std() - np.sqrt(0.2 / 0.8)) < 0.01   # N(1, rate / (1 - rate))
    for make in (lambda: keras.layers.SpatialDropout1D(1.5), lambda: keras.layers.GaussianDropout(-0.1),
                 lambda: keras.layers.GaussianNoise(2.0)):
        with pytest.raises(ValueError):
            make()
