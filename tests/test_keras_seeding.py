"""Keras 3's seeding: initializers draw TF's stateless streams under an int seed, or under
one taken from Python's ``random`` when they are made, so ``set_random_seed`` gives the
weights TF 2.21 gives. Expected values are rebuilt here from ``random.Random`` and
``tf.random.stateless_*`` (whose bits tests/test_stateless_random*.py check against TF),
or are TF 2.21's, marked so."""
import math
import random

import numpy as np
import pytest

import jitgrad as tf

keras = tf.keras


def _uniform(shape, seed, limit):
    return tf.random.stateless_uniform(shape, [seed % (2 ** 31 - 2), 0], -np.float32(limit),
                                       np.float32(limit)).numpy()


def _python_seeds(seed, n):
    r = random.Random(seed)
    return [r.randint(1, int(1e9)) for _ in range(n)]


def test_seeded_glorot_uniform_is_tfs():
    # TF 2.21: keras.initializers.GlorotUniform(seed=3)((2, 3))
    tf_values = np.array([-0.6662216186523438, 0.962557315826416, 0.07071137428283691, 0.747184157371521,
                          -0.6949249505996704, -0.8349170684814453], np.float32)
    got = keras.initializers.GlorotUniform(seed=3)((2, 3)).numpy()
    np.testing.assert_array_equal(got.ravel(), tf_values)
    np.testing.assert_array_equal(got, _uniform((2, 3), 3, math.sqrt(6 / 5)))


def test_an_initializer_repeats_itself_and_two_differ():
    a, b = keras.initializers.RandomNormal(), keras.initializers.RandomNormal()
    np.testing.assert_array_equal(a((4,)).numpy(), a((4,)).numpy())   # Keras 3: stateless per instance
    assert not np.array_equal(a((4,)).numpy(), b((4,)).numpy())
    assert a.get_config()["seed"] is None and isinstance(a.seed, int)


def test_set_random_seed_gives_the_seeds_python_random_gives():
    keras.utils.set_random_seed(7)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3), keras.layers.Dropout(0.3),
                              keras.layers.Dense(2, kernel_initializer="he_uniform")])
    dense_seed, _dropout_seed, he_seed = _python_seeds(7, 3)
    np.testing.assert_array_equal(model.layers[0].kernel.numpy(), _uniform((4, 3), dense_seed, math.sqrt(6 / 7)))
    np.testing.assert_array_equal(model.layers[2].kernel.numpy(), _uniform((3, 2), he_seed, math.sqrt(6 / 3)))
    # TF 2.21, same script: the first Dense kernel starts with these
    np.testing.assert_array_equal(model.layers[0].kernel.numpy().ravel()[:3],
                                  np.array([-0.3380742073059082, 0.4256371259689331, 0.8404884338378906], np.float32))


@pytest.mark.parametrize("layer, seed_first", [(lambda: keras.layers.SimpleRNN(3), True),
                                               (lambda: keras.layers.GRU(3), False)])
def test_recurrent_cells_take_their_dropout_seed_where_keras_does(layer, seed_first):
    keras.utils.set_random_seed(11)
    rnn = layer()
    rnn(np.zeros((1, 2, 4), np.float32))
    seeds = _python_seeds(11, 3)      # dropout generator, kernel, recurrent kernel: in Keras's order
    kernel_seed = seeds[1] if seed_first else seeds[0]
    fan = 4 + rnn.cell.kernel.shape[1]
    np.testing.assert_array_equal(rnn.cell.kernel.numpy(), _uniform(rnn.cell.kernel.shape, kernel_seed,
                                                                     math.sqrt(6 / fan)))


def test_einsum_dense_scales_by_its_equations_units():
    layer = keras.layers.EinsumDense("abc,cde->abde", (None, 2, 3), kernel_initializer=keras.initializers.GlorotUniform(5))
    layer(np.zeros((1, 6, 4), np.float32))
    # fan_in = c = 4, fan_out = d * e = 6 (not a conv kernel's 8 and 12)
    np.testing.assert_array_equal(layer.kernel.numpy(), _uniform((4, 2, 3), 5, math.sqrt(6 / 10)))
    assert layer.kernel_initializer.input_axes is None     # the layer's own config is unchanged


def test_multi_head_attention_sublayers_get_their_own_draws():
    keras.utils.set_random_seed(2)
    mha = keras.layers.MultiHeadAttention(2, 3, kernel_initializer=keras.initializers.GlorotUniform())
    q = np.zeros((1, 5, 4), np.float32)
    mha(q, q)
    kernels = [mha.query_dense.kernel.numpy(), mha.key_dense.kernel.numpy(), mha.value_dense.kernel.numpy()]
    assert not np.array_equal(kernels[0], kernels[1]) and not np.array_equal(kernels[1], kernels[2])
    # the instance's seed is drawn first; each sublayer clones it from its config (seed None)
    _, q_seed, k_seed = _python_seeds(2, 3)
    np.testing.assert_array_equal(kernels[0], _uniform((4, 2, 3), q_seed, math.sqrt(6 / 10)))
    np.testing.assert_array_equal(kernels[1], _uniform((4, 2, 3), k_seed, math.sqrt(6 / 10)))


def test_seed_generator_steps_its_state():
    gen = keras.random.SeedGenerator(5)
    np.testing.assert_array_equal(gen.next().numpy(), [5, 0])
    np.testing.assert_array_equal(gen.next().numpy(), [5, 1])
    first = keras.random.uniform((3,), seed=gen).numpy()
    np.testing.assert_array_equal(first, tf.random.stateless_uniform((3,), [5, 2]).numpy())
    assert not np.array_equal(first, keras.random.uniform((3,), seed=gen).numpy())
    # TF 2.21: keras.random.normal((3,), seed=4)
    np.testing.assert_array_equal(keras.random.normal((3,), seed=4).numpy(),
                                  np.array([-0.581848680973053, 0.8653590679168701, -1.5661876201629639], np.float32))


def test_bad_seeds_are_keras_value_errors():
    with pytest.raises(ValueError, match="seed"):
        keras.initializers.GlorotUniform(seed=1.5)
    with pytest.raises(ValueError, match="seed"):
        keras.random.SeedGenerator("a")


def test_serialized_initializer_keeps_no_drawn_seed():
    init = keras.initializers.HeNormal()
    config = keras.utils.serialize_keras_object(init)["config"]
    assert config["seed"] is None
    again = keras.utils.deserialize_keras_object(keras.utils.serialize_keras_object(
        keras.initializers.VarianceScaling(2.0, "fan_out", "uniform", seed=9)))
    np.testing.assert_array_equal(again((3, 4)).numpy(), _uniform((3, 4), 9, math.sqrt(3 * 2.0 / 4)))


def test_a_seeded_fit_follows_tfs_loss_curve():
    keras.utils.set_random_seed(3)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 5)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int32)
    model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(2)])
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(x, y, batch_size=16, epochs=3, shuffle=False, verbose=0)
    # TF 2.21 (Keras 3), the same script: the initial weights come from the same seeds
    np.testing.assert_allclose(history.history["loss"], [0.7941681, 0.784891, 0.7760825], rtol=1e-6)


def _dropout_by_hand(x, rate, pair):
    keep = tf.random.stateless_uniform(x.shape, [pair[0] % (2 ** 31 - 2), pair[1]]).numpy() >= np.float32(rate)
    return np.where(keep, x * np.float32(1 / (1 - rate)), np.float32(0))


def test_dropout_masks_are_keras_3s_stateless_draws():
    keras.utils.set_random_seed(4)
    layer = keras.layers.Dropout(0.5)
    (seed,) = _python_seeds(4, 1)
    x = np.ones((2, 6), np.float32)
    first, second = layer(x, training=True).numpy(), layer(x, training=True).numpy()
    np.testing.assert_array_equal(first, _dropout_by_hand(x, 0.5, (seed, 0)))      # the generator's state...
    np.testing.assert_array_equal(second, _dropout_by_hand(x, 0.5, (seed, 1)))     # ...stepped by each draw
    # TF 2.21, the same script
    np.testing.assert_array_equal(first, [[2, 2, 2, 0, 0, 0], [0, 2, 2, 2, 0, 0]])
    np.testing.assert_array_equal(layer(x, training=False).numpy(), x)


@pytest.mark.parametrize("run_eagerly", [False, True])
def test_a_fit_with_dropout_follows_tfs_loss_curve(run_eagerly):
    keras.utils.set_random_seed(4)
    keras.layers.Dropout(0.5)       # (made first in TF's script too: it takes a seed from Python's random)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 5)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int32)
    model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dropout(0.4),
                              keras.layers.Dense(2)])
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  run_eagerly=run_eagerly)
    history = model.fit(x, y, batch_size=16, epochs=3, shuffle=False, verbose=0)
    # TF 2.21 (Keras 3), the same program: the same weights and the same dropout masks each step
    np.testing.assert_allclose(history.history["loss"], [0.977617, 0.772073, 0.823485], rtol=2e-6)


def test_noise_layers_draw_from_generators_of_their_own():
    keras.utils.set_random_seed(9)
    spatial, noise = keras.layers.SpatialDropout1D(0.5), keras.layers.GaussianNoise(0.3)
    gdrop = keras.layers.GaussianDropout(0.2)
    pairs = [[s % (2 ** 31 - 2), 0] for s in _python_seeds(9, 3)]
    x = np.ones((2, 3, 4), np.float32)
    keep = tf.random.stateless_uniform((2, 1, 4), pairs[0]).numpy() >= np.float32(0.5)
    first = spatial(x, training=True).numpy()
    np.testing.assert_array_equal(first, np.broadcast_to(np.where(keep, 2, 0), x.shape))
    np.testing.assert_array_equal(first.ravel()[:8], [0, 2, 0, 0, 0, 2, 0, 0])     # TF 2.21, the same script
    normal = tf.random.stateless_normal(x.shape, pairs[1]).numpy()
    np.testing.assert_array_equal(noise(x, training=True).numpy(), x + (normal * np.float32(0.3) + np.float32(0)))
    normal = tf.random.stateless_normal(x.shape, pairs[2]).numpy()
    scale = normal * np.float32(math.sqrt(0.2 / 0.8)) + np.float32(1)
    np.testing.assert_array_equal(gdrop(x, training=True).numpy(), x * scale)
    np.testing.assert_array_equal(spatial(x, training=False).numpy(), x)
