"""Whole-model saving: Model.save / keras.models.load_model (.keras zip with Keras 3's
config.json and metadata.json, weights and optimizer state in model.weights.npz), get_config /
from_config, to_json / model_from_json, clone_model, custom objects. A loaded model must
predict exactly as the saved one and, compiled, keep training exactly as it would have."""
import json
import zipfile

import numpy as np
import pytest

import jitgrad as tf

keras = tf.keras
L = keras.layers


@pytest.fixture(autouse=True)
def _fresh_names():
    keras.backend.clear_session()


def _data(n=16, d=4, seed=0):
    rng = np.random.RandomState(seed)
    return rng.randn(n, d).astype(np.float32), rng.randn(n, 1).astype(np.float32)


def _mlp():
    return keras.Sequential([keras.Input((4,)), L.Dense(5, activation="relu",
                                                        kernel_regularizer=keras.regularizers.L2(0.01)),
                             L.Dropout(0.0), L.Dense(1)])


def test_keras_file_is_a_zip_with_keras_3_config_layout(tmp_path):
    model = _mlp()
    model.compile(optimizer="adam", loss="mse", metrics=["mae"])
    path = tmp_path / "m.keras"
    model.save(path)
    with zipfile.ZipFile(path) as z:
        assert sorted(z.namelist()) == ["config.json", "metadata.json", "model.weights.npz"]
        config = json.loads(z.read("config.json"))
        json.loads(z.read("metadata.json"))
    assert config["class_name"] == "Sequential" and config["module"] == "keras"
    layers = config["config"]["layers"]
    assert [entry["class_name"] for entry in layers] == ["InputLayer", "Dense", "Dropout", "Dense"]
    assert layers[0]["config"]["batch_shape"] == [None, 4]
    dense = layers[1]["config"]
    assert (dense["units"], dense["activation"], dense["name"]) == (5, "relu", "dense")
    assert dense["kernel_regularizer"] == {"module": "keras.regularizers", "class_name": "L2",
                                           "config": {"l2": 0.01}, "registered_name": None}
    assert config["compile_config"]["loss"] == "mse" and config["compile_config"]["metrics"] == ["mae"]
    assert config["compile_config"]["optimizer"]["class_name"] == "Adam"


def test_loaded_model_predicts_exactly_as_the_saved_one(tmp_path):
    x, _ = _data()
    model = _mlp()
    model.save(tmp_path / "m.keras")
    loaded = keras.models.load_model(tmp_path / "m.keras")
    assert [layer.name for layer in loaded.layers] == [layer.name for layer in model.layers]
    for a, b in zip(model.get_weights(), loaded.get_weights()):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(loaded.predict(x, verbose=0), model.predict(x, verbose=0))
    assert not loaded.compiled


@pytest.mark.parametrize("optimizer", [
    lambda: keras.optimizers.Adam(0.01),
    lambda: keras.optimizers.SGD(0.05, momentum=0.9, nesterov=True),
    lambda: keras.optimizers.RMSprop(0.01, momentum=0.5, centered=True),
    lambda: keras.optimizers.Adam(keras.optimizers.schedules.ExponentialDecay(0.02, 3, 0.5)),
])
def test_training_resumes_bit_for_bit_after_load(tmp_path, optimizer):
    x, y = _data()
    model = _mlp()
    model.compile(optimizer=optimizer(), loss="mse", metrics=["mae"])
    model.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0)
    model.save(tmp_path / "m.keras")
    loaded = keras.models.load_model(tmp_path / "m.keras")
    assert int(loaded.optimizer.iterations.numpy()) == 8
    for a, b in zip(model.optimizer.variables, loaded.optimizer.variables):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    h_saved = model.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0).history
    h_loaded = loaded.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0).history
    assert h_saved == h_loaded
    for a, b in zip(model.get_weights(), loaded.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_fresh_optimizer_state_would_differ(tmp_path):
    # the test above would notice a lost optimizer state: Adam restarted gives other weights
    x, y = _data()
    model = _mlp()
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
    model.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0)
    model.save(tmp_path / "m.keras")
    restarted = keras.models.load_model(tmp_path / "m.keras", compile=False)
    restarted.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
    model.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0)
    restarted.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0)
    assert not np.array_equal(model.get_weights()[0], restarted.get_weights()[0])


def _functional():
    q = keras.Input((5, 4), name="q")
    v = keras.Input((6, 4), name="v")
    attended = L.MultiHeadAttention(2, 3)(q, v)
    shared = L.Dense(4, name="shared")
    first = shared(attended)
    second = shared(L.EinsumDense("abc,cd->abd", (None, 4))(v))
    return keras.Model([q, v], [L.Add()([first, attended]), L.Dot(axes=(2, 2))([first, second])])


def test_functional_model_with_shared_layer_and_two_inputs_round_trips(tmp_path):
    rng = np.random.RandomState(1)
    x = [rng.randn(2, 5, 4).astype(np.float32), rng.randn(2, 6, 4).astype(np.float32)]
    model = _functional()
    model.save(tmp_path / "f.keras")
    loaded = keras.models.load_model(tmp_path / "f.keras")
    for a, b in zip(model.predict(x, verbose=0), loaded.predict(x, verbose=0)):
        np.testing.assert_array_equal(a, b)
    config = model.get_config()
    shared = [entry for entry in config["layers"] if entry["name"] == "shared"][0]
    assert len(shared["inbound_nodes"]) == 2
    assert config["input_layers"] == [["q", 0, 0], ["v", 0, 0]]
    assert json.loads(model.to_json())["class_name"] == "Functional"


def test_masked_sequence_model_round_trips_with_its_masks(tmp_path):
    ids = np.array([[3, 1, 0, 0], [2, 4, 4, 1]])
    model = keras.Sequential([keras.Input((4,), dtype="int32"), L.Embedding(6, 3, mask_zero=True),
                              L.Bidirectional(L.LSTM(2, return_sequences=True)), L.Dense(2)])
    model.save(tmp_path / "m.keras")
    loaded = keras.models.load_model(tmp_path / "m.keras")
    out = loaded(ids)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(model(ids)))
    np.testing.assert_array_equal(np.asarray(out._keras_mask), ids != 0)


class Scale(L.Layer):
    def __init__(self, factor=1.0, **kwargs):
        super().__init__(**kwargs)
        self.factor = factor

    def build(self, input_shape):
        self.w = self.add_weight(shape=(input_shape[-1],), initializer="ones", name="w")

    def call(self, inputs):
        return inputs * self.w * self.factor


def test_custom_layer_needs_custom_objects_to_load(tmp_path):
    x, _ = _data()
    model = keras.Sequential([keras.Input((4,)), Scale(3.0, name="scale"), L.Dense(1)])
    assert model.layers[0].get_config()["factor"] == 3.0
    model.save(tmp_path / "c.keras")
    with pytest.raises(TypeError, match="Could not locate class 'Scale'"):
        keras.models.load_model(tmp_path / "c.keras")
    loaded = keras.models.load_model(tmp_path / "c.keras", custom_objects={"Scale": Scale})
    assert isinstance(loaded.layers[0], Scale) and loaded.layers[0].factor == 3.0
    np.testing.assert_array_equal(loaded.predict(x, verbose=0), model.predict(x, verbose=0))


def test_registered_layer_and_function_load_without_custom_objects(tmp_path):
    @keras.utils.register_keras_serializable(package="Tests")
    class Shift(L.Layer):
        def __init__(self, by=0.5, **kwargs):
            super().__init__(**kwargs)
            self.by = by

        def call(self, inputs):
            return inputs + self.by

    @keras.utils.register_keras_serializable(package="Tests")
    def cube(t):
        return t * t * t

    x, _ = _data()
    model = keras.Sequential([keras.Input((4,)), Shift(2.0), L.Dense(2, activation=cube)])
    model.save(tmp_path / "r.keras")
    entry = json.loads(model.to_json())["config"]["layers"][1]
    assert entry["registered_name"] == "Tests>Shift"
    loaded = keras.models.load_model(tmp_path / "r.keras")
    np.testing.assert_array_equal(loaded.predict(x, verbose=0), model.predict(x, verbose=0))
    want = (x + 2.0) @ model.get_weights()[0] + model.get_weights()[1]
    np.testing.assert_allclose(loaded.predict(x, verbose=0), want ** 3, rtol=1e-5)


def test_layer_get_config_and_from_config():
    dense = L.Dense(3, activation="tanh", use_bias=False, name="d")
    config = dense.get_config()
    assert (config["units"], config["activation"], config["use_bias"], config["name"]) == (3, "tanh", False, "d")
    again = L.Dense.from_config(config)
    assert again.get_config() == config
    emb = L.Embedding(10, 4, mask_zero=True)
    assert (emb.get_config()["input_dim"], emb.get_config()["mask_zero"]) == (10, True)
    lstm = L.LSTM.from_config(L.LSTM(3, return_sequences=True, go_backwards=True).get_config())
    assert (lstm.cell.units, lstm.return_sequences, lstm.go_backwards) == (3, True, True)


def test_clone_model_has_the_architecture_and_new_weights():
    model = _mlp()
    clone = keras.models.clone_model(model)
    assert [type(layer) for layer in clone.layers] == [type(layer) for layer in model.layers]
    assert [w.shape for w in clone.get_weights()] == [w.shape for w in model.get_weights()]
    assert not np.array_equal(clone.get_weights()[0], model.get_weights()[0])      # freshly initialised
    renamed = keras.models.clone_model(model, clone_function=lambda layer: layer.__class__.from_config(
        dict(layer.get_config(), name="copy_" + layer.name)))
    assert [layer.name for layer in renamed.layers] == ["copy_dense", "copy_dropout", "copy_dense_1"]


def test_model_from_json_rebuilds_the_architecture():
    model = _functional()
    rebuilt = keras.models.model_from_json(model.to_json())
    assert [layer.name for layer in rebuilt.layers] == [layer.name for layer in model.layers]
    assert rebuilt.count_params() == model.count_params()


def test_bad_paths_and_files(tmp_path):
    model = _mlp()
    with pytest.raises(ValueError, match="Invalid filepath extension"):
        model.save(tmp_path / "m.h6")
    with pytest.raises(ValueError, match="File not found"):
        keras.models.load_model(tmp_path / "missing.keras")
    with zipfile.ZipFile(tmp_path / "tf.keras", "w") as z:      # a TF .keras file keeps HDF5 weights
        z.writestr("config.json", model.to_json())
        z.writestr("metadata.json", "{}")
        z.writestr("model.weights.h5", b"\x89HDF")
    with pytest.raises(ValueError, match="HDF5"):
        keras.models.load_model(tmp_path / "tf.keras")


def test_lambda_and_tensor_arithmetic_are_refused_when_saved(tmp_path):
    with pytest.raises(NotImplementedError, match="lambda"):
        keras.Sequential([keras.Input((3,)), L.Lambda(lambda t: t * 2)]).save(tmp_path / "l.keras")
    inp = keras.Input((3,))
    with pytest.raises(NotImplementedError, match="operations on KerasTensors"):
        keras.Model(inp, L.Dense(2)(inp) * 2).save(tmp_path / "o.keras")


class TwoDense(keras.Model):
    def __init__(self, units=3, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.hidden, self.out = L.Dense(units, activation="relu"), L.Dense(1)

    def call(self, inputs):
        return self.out(self.hidden(inputs))


def test_subclassed_and_unbuilt_input_sequential_models_round_trip(tmp_path):
    x, y = _data()
    model = TwoDense(4)
    model.compile(optimizer="adam", loss="mse")
    model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    model.save(tmp_path / "s.keras")
    loaded = keras.models.load_model(tmp_path / "s.keras", custom_objects={"TwoDense": TwoDense})
    assert loaded.units == 4 and int(loaded.optimizer.iterations.numpy()) == 2
    np.testing.assert_array_equal(loaded.predict(x, verbose=0), model.predict(x, verbose=0))
    # a Sequential without an Input, built by a call or by build(): rebuilt with that shape
    called = keras.Sequential([L.Dense(3), L.Dense(1)])
    called(x)
    called.save(tmp_path / "c.keras")
    np.testing.assert_array_equal(keras.models.load_model(tmp_path / "c.keras").predict(x, verbose=0),
                                  called.predict(x, verbose=0))
    built = keras.Sequential([L.Dense(3), L.Dense(1)])
    built.build((None, 4))
    assert keras.models.model_from_json(built.to_json()).count_params() == 4 * 3 + 3 + 3 + 1
