"""Model.fit / evaluate / predict: the loss curve of fit is bit for bit the one of the
same model trained by hand (GradientTape + optimizer, the same seeds), the train step
compiles once and runs from the cache every step; Keras 3's progress text and History."""
import re

import numpy as np
import pytest

import jitgrad as tf

keras = tf.keras


@pytest.fixture(autouse=True)
def _fresh_names():
    keras.backend.clear_session()


def _data(n=64, d=5, classes=3, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d)).astype(np.float32)
    y = (x[:, 0] * 2 + x[:, 1] > 0).astype(np.int32) + (x[:, 2] > 1).astype(np.int32)
    return x, np.minimum(y, classes - 1)


def _model():
    keras.utils.set_random_seed(7)
    return keras.Sequential([keras.Input((5,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(3)])


def _epoch_mean(batch_losses, batch_size):
    """Keras's loss log: Mean(total += loss * batch, count += batch) in float32."""
    total = count = np.float32(0)
    for loss in batch_losses:
        total = np.float32(total + np.float32(loss) * np.float32(batch_size))
        count = np.float32(count + np.float32(batch_size))
    return float(total / count)


@pytest.mark.parametrize("run_eagerly", [False, True])
def test_fit_matches_hand_written_training_bit_for_bit(run_eagerly):
    x, y = _data()
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    fitted = _model()
    fitted.compile(optimizer=keras.optimizers.Adam(0.01), loss=loss_fn, run_eagerly=run_eagerly)
    before = tf.cache_info()
    history = fitted.fit(x, y, batch_size=16, epochs=3, shuffle=False, verbose=0)
    after = tf.cache_info()

    by_hand = _model()
    opt = keras.optimizers.Adam(0.01)

    def step(xb, yb):
        with tf.GradientTape() as tape:
            loss = loss_fn(yb, by_hand(xb, training=True))
        grads = tape.gradient(loss, by_hand.trainable_variables)
        opt.apply_gradients(zip(grads, by_hand.trainable_variables))
        return loss
    step = step if run_eagerly else tf.function(step)
    curve = []
    for _ in range(3):
        curve.append(_epoch_mean([step(x[i:i + 16], y[i:i + 16]).numpy() for i in range(0, 64, 16)], 16))
    assert history.history["loss"] == curve
    for a, b in zip(fitted.get_weights(), by_hand.get_weights()):
        np.testing.assert_array_equal(a, b)
    assert curve[-1] < curve[0]
    if not run_eagerly:
        assert after["compiles"] - before["compiles"] == 1           # one train-step kernel
        assert fitted._train_fn.experimental_get_tracing_count() == 1  # variables were made before tracing
        assert after["plan_hits"] - before["plan_hits"] >= 11         # 12 steps: every later step a cache hit
        assert after["fallbacks"] == before["fallbacks"]


def test_history_logs_and_progress_text(capsys):
    x, y = _data()
    model = _model()
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    out = model(x[:1])  # noqa: F841  (built before fit: fit does not rebuild)
    capsys.readouterr()
    history = model.fit(x, y, batch_size=32, epochs=2, validation_data=(x, y))
    text = capsys.readouterr().out
    assert sorted(history.history) == ["accuracy", "loss", "val_accuracy", "val_loss"]
    assert history.epoch == [0, 1] and history.params == {"verbose": "auto", "epochs": 2, "steps": 2}
    assert text.startswith("Epoch 1/2\n") and "\nEpoch 2/2\n" in text
    final = text.split("\r")[-1]
    bar = "\x1b[1m2/2\x1b[0m \x1b[32m" + "━" * 20 + "\x1b[0m\x1b[37m\x1b[0m"
    pattern = (re.escape(bar) + r" \x1b\[1m\d+s\x1b\[0m \d+(us|ms|s)/step - accuracy: (\d\.\d{4}) - loss: (\d\.\d{4})"
               r" - val_accuracy: (\d\.\d{4}) - val_loss: (\d\.\d{4})\n$")
    m = re.search(pattern, final)
    assert m, repr(final)
    assert float(m.group(3)) == round(history.history["loss"][-1], 4)
    model.fit(x, y, batch_size=32, epochs=1, verbose=2)
    line = capsys.readouterr().out
    assert re.fullmatch(r"2/2 - \d+s - \d+(us|ms|s)/step - accuracy: \d\.\d{4} - loss: \d\.\d{4}\n", line), line
    model.fit(x, y, batch_size=32, epochs=1, verbose=0)
    assert capsys.readouterr().out == ""


def test_evaluate_and_predict_agree_with_numpy():
    x, y = _data(n=40)
    model = _model()
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    model.fit(x, y, batch_size=8, epochs=1, verbose=0)
    w1, b1, w2, b2 = model.get_weights()
    logits = np.maximum(x @ w1 + b1, 0) @ w2 + b2
    np.testing.assert_allclose(model.predict(x, batch_size=16, verbose=0), logits, rtol=1e-5, atol=1e-6)
    z = logits - logits.max(-1, keepdims=True)
    per_sample = -(z[np.arange(40), y] - np.log(np.exp(z).sum(-1)))
    loss, acc = model.evaluate(x, y, batch_size=40, verbose=0)
    np.testing.assert_allclose(loss, per_sample.mean(), rtol=1e-5)
    assert acc == pytest.approx(np.mean(np.argmax(logits, -1) == y))
    logs = model.evaluate(x, y, batch_size=40, verbose=0, return_dict=True)
    assert list(logs) == ["accuracy", "loss"] and logs["loss"] == loss


def test_validation_split_and_errors():
    x, y = _data(n=50)
    model = _model()
    with pytest.raises(ValueError, match="compile"):         # TF 2.21: ValueError
        model.fit(x, y, verbose=0)
    with pytest.raises(ValueError, match="no optimizer 'adafactor'"):
        model.compile(optimizer="adafactor", loss="mse")
    model.compile(loss="mse")                      # Keras's default optimizer
    assert type(model.optimizer).__name__ == "RMSprop"
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    h = model.fit(x, y, epochs=1, validation_split=0.2, batch_size=10, verbose=0)
    assert h.params["steps"] == 4 and sorted(h.history) == ["loss", "val_loss"]


def test_mse_regression_with_functional_model_learns_a_line():
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, (128, 1)).astype(np.float32)
    y = 3.0 * x - 0.5
    inputs = keras.Input((1,))
    model = keras.Model(inputs, keras.layers.Dense(1)(inputs))
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    h = model.fit(x, y, batch_size=32, epochs=40, verbose=0)
    w, b = model.get_weights()
    assert abs(w[0, 0] - 3.0) < 0.05 and abs(b[0] + 0.5) < 0.05 and h.history["loss"][-1] < 1e-3


def test_optimizer_build_makes_the_slots_up_front():
    v = [tf.Variable([1.0, 2.0]), tf.Variable(3.0)]
    adam = keras.optimizers.Adam()
    adam.build(v)
    assert len(adam.variables) == 1 + 2 * len(v)            # iterations + momentum/velocity per variable
    sgd = keras.optimizers.SGD(momentum=0.9)
    sgd.build(v)
    assert len(sgd.variables) == 1 + len(v)
    assert len(keras.optimizers.SGD().variables) == 1        # plain SGD has no slots


def _line_model(lr=0.01):
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1, kernel_initializer=keras.initializers.Constant(0.5),
                                                                    bias_initializer="zeros")])
    model.compile(loss="mse", optimizer=keras.optimizers.SGD(lr), metrics=["mae"])
    return model


def test_sample_weights_in_evaluate_fit_and_on_batch():
    """Weights scale each sample's loss (sum(w * l) / n per batch, the loss tracker weighting
    batches by size); compiled metrics stay unweighted, as in Keras 3. evaluate ignored them."""
    x = np.array([[1.0], [2.0], [3.0], [4.0], [5.0]], np.float32)
    y = np.array([[2.0], [1.0], [0.0], [3.0], [1.0]], np.float32)
    w = np.array([1.0, 0.0, 2.0, 0.5, 3.0], np.float32)
    err = 0.5 * x[:, 0] - y[:, 0]                       # the model is y = 0.5 x before training
    batch_losses = [np.sum(w[i:i + 2] * err[i:i + 2] ** 2) / len(err[i:i + 2]) for i in (0, 2, 4)]
    want_loss = np.average(batch_losses, weights=[2, 2, 1])
    loss, mae = _line_model().evaluate(x, y, sample_weight=w, batch_size=2, verbose=0)
    np.testing.assert_allclose([loss, mae], [want_loss, np.abs(err).mean()], rtol=1e-6)
    assert _line_model().test_on_batch(x, y, sample_weight=w)[0] == pytest.approx(np.mean(w * err ** 2), rel=1e-6)
    # one SGD step on the weighted loss: d/dk mean(w (k x - y)^2) = mean(2 w (k x - y) x)
    model = _line_model(lr=0.1)
    model.train_on_batch(x, y, sample_weight=w)
    kernel, bias = model.get_weights()
    np.testing.assert_allclose(kernel[0, 0], 0.5 - 0.1 * np.mean(2 * w * err * x[:, 0]), rtol=1e-6)
    np.testing.assert_allclose(bias[0], -0.1 * np.mean(2 * w * err), rtol=1e-5)
    # fit with weights through arrays and through an (x, y, w) dataset gives the same history
    by_arrays = _line_model().fit(x, y, sample_weight=w, epochs=2, batch_size=2, shuffle=False, verbose=0).history
    dataset = tf.data.Dataset.from_tensor_slices((x, y, w)).batch(2)
    by_dataset = _line_model().fit(dataset, epochs=2, verbose=0).history
    np.testing.assert_allclose(by_arrays["loss"], by_dataset["loss"], rtol=1e-6)


def test_on_batch_results_and_data_errors_as_keras3():
    x, y = np.ones((4, 1), np.float32), np.zeros((4, 1), np.float32)
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1, kernel_initializer="ones",
                                                                    bias_initializer="zeros")])
    model.compile(loss="mse", optimizer="sgd")
    assert model.train_on_batch(x, y) == pytest.approx(1.0)          # the loss alone, a float
    with pytest.raises(ValueError, match="cardinality"):
        model.fit(x, y[:3], verbose=0)
    with pytest.raises(ValueError, match="cardinality"):
        model.fit(x, y, sample_weight=np.ones(2), verbose=0)
    model.trainable = False                  # nothing to train: fit still runs and reports the loss
    model.compile(loss="mse", optimizer="sgd")      # (Keras: a change of trainable needs a compile)
    before = model.get_weights()
    want = model.evaluate(x, y, verbose=0)
    assert model.fit(x, y, epochs=1, verbose=0).history["loss"] == [pytest.approx(want)]
    for a, b in zip(before, model.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_class_weight_weights_each_sample_by_its_class():
    x = np.array([[1.0], [2.0], [3.0], [4.0]], np.float32)
    y = np.array([0, 1, 1, 2])
    weights = {0: 2.0, 2: 0.5}                      # class 1 unnamed: weight 1
    per_sample = np.array([2.0, 1.0, 1.0, 0.5], np.float32)

    def trained(**fit_args):
        model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(
            3, kernel_initializer=keras.initializers.Constant(0.3), bias_initializer="zeros")])
        model.compile(loss=fit_args.pop("loss", "sparse_categorical_crossentropy"),
                      optimizer=keras.optimizers.SGD(0.1))
        history = model.fit(x, fit_args.pop("labels", y), epochs=2, batch_size=2, shuffle=False, verbose=0,
                            **fit_args)
        return history.history["loss"], model.get_weights()

    by_class, by_sample = trained(class_weight=weights), trained(sample_weight=per_sample)
    np.testing.assert_allclose(by_class[0], by_sample[0], rtol=1e-6)
    for a, b in zip(by_class[1], by_sample[1]):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    one_hot = np.eye(3, dtype=np.float32)[y]                           # the class of a one-hot row: argmax
    np.testing.assert_allclose(trained(class_weight=weights, labels=one_hot, loss="categorical_crossentropy")[0],
                               trained(sample_weight=per_sample, labels=one_hot, loss="categorical_crossentropy")[0],
                               rtol=1e-6)
    with pytest.raises(ValueError, match="at the same time"):
        trained(class_weight=weights, sample_weight=per_sample)


@pytest.mark.parametrize("functional", [False, True])
def test_integer_data_is_cast_to_a_float_input(functional):
    # Keras 3 converts a model's input to its Input's dtype: int64 data into a float32 model
    # (a SimpleRNN's matmul used to meet the int64 steps and raise TypeError)
    inp = keras.Input((3,))
    layers = [keras.layers.Reshape((3, 1)),
              keras.layers.SimpleRNN(2, kernel_initializer="ones", recurrent_initializer="zeros")]
    if functional:
        h = inp
        for layer in layers:
            h = layer(h)
        model = keras.Model(inp, h)
    else:
        model = keras.Sequential([inp] + layers)
    data = np.array([[1, 0, 2], [0, 3, 1]], np.int64)
    # recurrent kernel zero: the last state is tanh(kernel * last step + bias) = tanh(last step)
    expected = np.repeat(np.tanh(data[:, -1:].astype(np.float64)), 2, axis=1)
    np.testing.assert_allclose(model.predict(data, verbose=0), expected, rtol=1e-6)
    out = model(data)
    assert out.dtype == tf.float32
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-6)


def test_float_data_into_an_int_input_is_truncated():
    # Keras 3 casts (tf.cast truncates toward zero) float data to an int32 Input
    inp = keras.Input((3,), dtype="int32")
    table = np.arange(8.0).reshape(4, 2)
    model = keras.Model(inp, keras.layers.Lambda(lambda t: tf.gather(tf.constant(table, tf.float32), t))(inp))
    data = np.array([[1.7, 0.2, 2.9], [0.0, 3.5, 1.1]], np.float32)
    np.testing.assert_allclose(model.predict(data, verbose=0), table[data.astype(np.int64)])


def test_a_model_of_two_outputs_is_not_compiled_silently_wrong():
    # Keras 3 applies the loss to each output and sums; jitgrad's compile takes one output, and
    # says so (it used to fail with AttributeError: 'list' object has no attribute 'shape')
    inp = keras.Input((3,))
    model = keras.Model(inp, [keras.layers.Dense(2)(inp), keras.layers.Dense(1)(inp)])
    data = np.zeros((4, 3), np.float32), [np.zeros((4, 2), np.float32), np.zeros((4, 1), np.float32)]
    model.compile("sgd", "mse", metrics=["mae"])
    with pytest.raises(NotImplementedError, match="one output"):
        model.fit(*data, verbose=0)
    model.compile("sgd", "mse")
    with pytest.raises(NotImplementedError, match="one output"):
        model.fit(*data, verbose=0)
    with pytest.raises(NotImplementedError, match="per-output"):
        model.compile("sgd", ["mse", "mae"])
