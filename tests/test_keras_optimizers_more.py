"""Keras 3's RMSprop, Adagrad, Adamax, Nadam, AdamW and weight_decay
(jitgrad/keras_optimizers.py) checked step by step against numpy implementations of
Keras 3's update_step formulas with its defaults (float64 references, float32
variables), eagerly, inside jitgrad.function and through minimize."""
import numpy as np
import pytest

import jitgrad as tf

from test_optimizers import STEPS, W0, check_keras_optimizer, loss_and_grad

pytestmark = pytest.mark.usefixtures("graph_mode")


def _run_ref(update, state):
    w, out = W0.astype(np.float64), []
    for t in range(1, STEPS + 1):
        _, g = loss_and_grad(w)
        w = update(w, g, t, state)
        out.append(w)
    return out


def ref_rmsprop(lr=0.001, rho=0.9, momentum=0.0, eps=1e-7, centered=False):
    def update(w, g, t, s):
        s["v"] = rho * s.get("v", 0) + (1 - rho) * g * g
        if centered:
            s["a"] = rho * s.get("a", 0) + (1 - rho) * g
            denom = s["v"] - s["a"] ** 2 + eps
        else:
            denom = s["v"] + eps
        inc = lr * g / np.sqrt(denom)
        if momentum > 0:
            s["m"] = momentum * s.get("m", 0) + inc
            return w - s["m"]
        return w - inc
    return _run_ref(update, {})


def ref_adagrad(lr=0.001, init=0.1, eps=1e-7):
    def update(w, g, t, s):
        s["acc"] = s.get("acc", init) + g * g
        return w - lr * g / np.sqrt(s["acc"] + eps)
    return _run_ref(update, {})


def ref_adamax(lr=0.001, b1=0.9, b2=0.999, eps=1e-7):
    def update(w, g, t, s):
        s["m"] = s.get("m", 0) + (g - s.get("m", 0)) * (1 - b1)
        s["u"] = np.maximum(b2 * s.get("u", 0), np.abs(g))
        return w - lr * s["m"] / ((1 - b1 ** t) * (s["u"] + eps))
    return _run_ref(update, {})


def ref_nadam(lr=0.001, b1=0.9, b2=0.999, eps=1e-7):
    def update(w, g, t, s):
        u_t = b1 * (1 - 0.5 * 0.96 ** t)
        u_t1 = b1 * (1 - 0.5 * 0.96 ** (t + 1))
        s["prod"] = s.get("prod", 1.0) * u_t          # updated before the variables, once per step
        s["m"] = s.get("m", 0) + (g - s.get("m", 0)) * (1 - b1)
        s["v"] = s.get("v", 0) + (g * g - s.get("v", 0)) * (1 - b2)
        m_hat = u_t1 * s["m"] / (1 - s["prod"] * u_t1) + (1 - u_t) * g / (1 - s["prod"])
        v_hat = s["v"] / (1 - b2 ** t)
        return w - m_hat * lr / (np.sqrt(v_hat) + eps)
    return _run_ref(update, {})


def ref_adamw(lr=0.001, wd=0.004, b1=0.9, b2=0.999, eps=1e-7):
    def update(w, g, t, s):
        w = w - w * wd * lr                          # decoupled decay first, gradient taken before it
        s["m"] = s.get("m", 0) + (g - s.get("m", 0)) * (1 - b1)
        s["v"] = s.get("v", 0) + (g * g - s.get("v", 0)) * (1 - b2)
        alpha = lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t)
        return w - s["m"] * alpha / (np.sqrt(s["v"]) + eps)
    return _run_ref(update, {})


def ref_adam_amsgrad(lr, b1=0.9, b2=0.999, eps=1e-7):
    def update(w, g, t, s):
        s["m"] = s.get("m", 0) + (g - s.get("m", 0)) * (1 - b1)
        s["v"] = s.get("v", 0) + (g * g - s.get("v", 0)) * (1 - b2)
        s["vhat"] = np.maximum(s.get("vhat", 0), s["v"])
        alpha = lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t)
        return w - s["m"] * alpha / (np.sqrt(s["vhat"]) + eps)
    return _run_ref(update, {})


def ref_sgd_clipped(lr, clipnorm=None, global_clipnorm=None, clipvalue=None):
    """Keras 3's clipping before the step: by each gradient's norm, by the global norm
    (one variable here, so the same as its own norm), or by value."""
    def update(w, g, t, s):
        if clipnorm is not None:
            g = g * clipnorm / max(np.sqrt(np.sum(g * g)), clipnorm)
        if global_clipnorm is not None:
            g = g * global_clipnorm * min(1 / np.sqrt(np.sum(g * g)), 1 / global_clipnorm)
        if clipvalue is not None:
            g = np.clip(g, -clipvalue, clipvalue)
        return w - lr * g
    return _run_ref(update, {})


def ref_sgd_weight_decay(lr, wd):
    return _run_ref(lambda w, g, t, s: (w - w * wd * lr) - g * lr, {})


O = lambda: tf.keras.optimizers   # noqa: E731
CASES = [
    ("rmsprop_defaults", lambda: O().RMSprop(), lambda: ref_rmsprop()),
    ("rmsprop_momentum_centered", lambda: O().RMSprop(0.01, rho=0.8, momentum=0.5, centered=True),
     lambda: ref_rmsprop(0.01, 0.8, 0.5, centered=True)),
    ("adagrad_defaults", lambda: O().Adagrad(), lambda: ref_adagrad()),
    ("adagrad", lambda: O().Adagrad(0.2, initial_accumulator_value=0.5), lambda: ref_adagrad(0.2, 0.5)),
    ("adamax", lambda: O().Adamax(0.05), lambda: ref_adamax(0.05)),
    ("nadam", lambda: O().Nadam(0.05), lambda: ref_nadam(0.05)),
    ("adamw_defaults", lambda: O().AdamW(), lambda: ref_adamw()),
    ("adamw", lambda: O().AdamW(0.1, weight_decay=0.5), lambda: ref_adamw(0.1, 0.5)),
    ("sgd_weight_decay", lambda: O().SGD(0.05, weight_decay=0.1), lambda: ref_sgd_weight_decay(0.05, 0.1)),
    ("adam_amsgrad", lambda: O().Adam(0.1, amsgrad=True), lambda: ref_adam_amsgrad(0.1)),
    ("sgd_clipnorm", lambda: O().SGD(0.05, clipnorm=2.0), lambda: ref_sgd_clipped(0.05, clipnorm=2.0)),
    ("sgd_global_clipnorm", lambda: O().SGD(0.05, global_clipnorm=3.0),
     lambda: ref_sgd_clipped(0.05, global_clipnorm=3.0)),
    ("sgd_clipvalue", lambda: O().SGD(0.05, clipvalue=1.5), lambda: ref_sgd_clipped(0.05, clipvalue=1.5)),
]


@pytest.mark.parametrize("name,make,ref", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("how", ["eager", "function", "minimize"])
def test_keras_optimizer_matches_keras3_formulas(name, make, ref, how):
    check_keras_optimizer(make, ref, how)


def test_defaults_are_keras3s():
    o = tf.keras.optimizers
    r = o.RMSprop()
    assert (r.learning_rate, r.rho, r.momentum, r.epsilon, r.centered, r.name) == (0.001, 0.9, 0.0, 1e-7, False,
                                                                                    "rmsprop")
    a = o.Adagrad()
    assert (a.learning_rate, a.initial_accumulator_value, a.epsilon, a.name) == (0.001, 0.1, 1e-7, "adagrad")
    assert (o.Adamax().beta_2, o.Adamax().name) == (0.999, "adamax")
    assert (o.Nadam().beta_1, o.Nadam().name) == (0.9, "nadam")
    w = o.AdamW()
    assert (w.weight_decay, w.learning_rate, w.epsilon, w.name) == (0.004, 0.001, 1e-7, "adamw")
    with pytest.raises(ValueError, match="weight_decay"):
        o.AdamW(weight_decay=None)


def test_adagrad_slot_starts_at_initial_accumulator_value():
    w = tf.Variable([1.0, 2.0])
    opt = tf.keras.optimizers.Adagrad(initial_accumulator_value=0.25)
    opt.apply_gradients([(tf.constant([1.0, -2.0]), w)])
    acc = [v for v in opt.variables if v.name.startswith("Variable_accumulator") or "accumulator" in v.name]
    np.testing.assert_allclose(acc[0].numpy(), [0.25 + 1.0, 0.25 + 4.0])


@pytest.mark.parametrize("name", ["rmsprop", "adagrad", "adamax", "nadam", "adamw"])
def test_compile_by_name_trains_with_fit(name):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 3)).astype(np.float32)
    y = (x @ np.array([[1.], [-2.], [0.5]], np.float32)).astype(np.float32)
    model = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(1)])
    model.compile(optimizer=name, loss="mse")
    assert type(model.optimizer).__name__.lower() == name
    hist = model.fit(x, y, batch_size=8, epochs=3, shuffle=False, verbose=0)
    losses = hist.history["loss"]
    assert np.all(np.isfinite(losses)) and losses[-1] < losses[0]


def test_global_clipnorm_scales_all_gradients_by_their_joint_norm():
    a, b = tf.Variable([0.0, 0.0]), tf.Variable([0.0])
    opt = tf.keras.optimizers.SGD(1.0, global_clipnorm=1.0)
    opt.apply_gradients([(tf.constant([3.0, 0.0]), a), (tf.constant([4.0]), b)])   # joint norm 5
    np.testing.assert_allclose(a.numpy(), [-0.6, 0.0], rtol=1e-6)
    np.testing.assert_allclose(b.numpy(), [-0.8], rtol=1e-6)


def test_variable_constraint_applied_after_each_update():
    """tf.Variable(constraint=...) was accepted and ignored: TF's (Keras 3) optimizers project
    each constrained variable after the update. Values as TF 2.21 gives them: SGD(0.5) from
    [1, -2] with gradient [4, 1] -> [-1, -2.5] -> clipped at 0; then gradient [-4, 1] -> [2, 0]."""
    nonneg = lambda t: tf.maximum(t, 0.0)                              # noqa: E731
    v = tf.Variable([1.0, -2.0], constraint=nonneg)
    assert v.constraint is nonneg
    opt = tf.keras.optimizers.SGD(0.5)
    opt.apply_gradients([(tf.constant([4.0, 1.0]), v)])
    np.testing.assert_array_equal(v.numpy(), [0.0, 0.0])
    tf.function(lambda: opt.apply_gradients([(tf.constant([-4.0, 1.0]), v)]))()
    np.testing.assert_array_equal(v.numpy(), [2.0, 0.0])
    v.assign([-5.0, 3.0])                                              # (assign itself does not project)
    np.testing.assert_array_equal(v.numpy(), [-5.0, 3.0])
    with pytest.raises(ValueError, match="constraint"):
        tf.Variable(1.0, constraint=3)
    g = tf.Graph()
    with g.as_default():
        w = tf.Variable([1.0, -2.0], constraint=nonneg)
        grad = tf.compat.v1.placeholder(tf.float32, [2])
        step = tf.keras.optimizers.SGD(0.5).apply_gradients([(grad, w)])
        with tf.compat.v1.Session() as s:
            s.run(tf.compat.v1.global_variables_initializer())
            s.run(step, {grad: [4.0, 1.0]})
            np.testing.assert_array_equal(s.run(w), [0.0, 0.0])
            s.run(step, {grad: [-4.0, 1.0]})
            np.testing.assert_array_equal(s.run(w), [2.0, 0.0])


def _steps(make, steps=5):
    w = tf.Variable(np.array([1.0, -2.0, 0.5]))
    opt = make()
    for k in range(steps):
        with tf.GradientTape() as t:
            loss = tf.reduce_sum(tf.square(w * (np.array([1.0, 2.0, 3.0]) * (k + 1)) - 1.0))
        opt.apply_gradients([(t.gradient(loss, w), w)])
    return w.numpy()


def _grad(w, k):
    x = np.array([1.0, 2.0, 3.0]) * (k + 1)
    return 2 * (w * x - 1.0) * x


def _np_adadelta(lr, rho, eps):
    w, acc_g, acc_d = np.array([1.0, -2.0, 0.5]), np.zeros(3), np.zeros(3)
    for k in range(5):
        g = _grad(w, k)
        acc_g = rho * acc_g + (1 - rho) * g * g
        delta = -(np.sqrt(acc_d + eps) * g / np.sqrt(acc_g + eps))
        acc_d = rho * acc_d + (1 - rho) * delta * delta
        w = w + lr * delta
    return w


def _f32(value):
    """Keras 3 holds the learning rate in a float32 variable and casts Python hyperparameters
    through float32 (tf.cast of a Python float): a float64 variable sees float32's 0.1."""
    return float(np.float32(value))


def _np_ftrl(lr, power, initial, l1, l2, shrink, beta):
    lr, initial = _f32(lr), _f32(initial)            # (Keras's Constant initializer casts through float32 too)
    w, acc, lin = np.array([1.0, -2.0, 0.5]), np.full(3, initial), np.zeros(3)
    for k in range(5):
        g = _grad(w, k)
        new_acc = acc + g * g
        lin = lin + (g + 2 * shrink * w) - (new_acc ** -power - acc ** -power) / lr * w
        quadratic = new_acc ** -power / lr + 2 * (l2 + beta / (2 * lr))
        w = (np.clip(lin, -l1, l1) - lin) / quadratic
        acc = new_acc
    return w


def _np_lion(lr, b1, b2):
    lr, b1, b2 = _f32(lr), _f32(b1), _f32(b2)
    w, m = np.array([1.0, -2.0, 0.5]), np.zeros(3)
    for k in range(5):
        g = _grad(w, k)
        w = w - lr * np.sign(m * b1 + g * (1 - b1))
        m = m * b2 + g * (1 - b2)
    return w


def test_adadelta_ftrl_lion_follow_keras3_formulas():
    np.testing.assert_allclose(_steps(lambda: tf.keras.optimizers.Adadelta(0.5, rho=0.9, epsilon=1e-6)),
                               _np_adadelta(0.5, 0.9, 1e-6), rtol=1e-12)
    np.testing.assert_allclose(_steps(lambda: tf.keras.optimizers.Ftrl(
        0.1, learning_rate_power=-0.7, initial_accumulator_value=0.3, l1_regularization_strength=0.01,
        l2_regularization_strength=0.02, l2_shrinkage_regularization_strength=0.03, beta=0.1)),
        _np_ftrl(0.1, -0.7, 0.3, 0.01, 0.02, 0.03, 0.1), rtol=1e-12)
    np.testing.assert_allclose(_steps(lambda: tf.keras.optimizers.Lion(0.02, beta_1=0.8, beta_2=0.95)),
                               _np_lion(0.02, 0.8, 0.95), rtol=1e-12)
    with pytest.raises(ValueError, match="initial_accumulator_value"):
        tf.keras.optimizers.Ftrl(initial_accumulator_value=-1.0)
