"""Optimizers (jitgrad/optimizers.py): tf.compat.v1.train in graph mode, tf.keras.optimizers
eagerly and inside jitgrad.function, checked step by step against numpy implementations of
TF's update formulas (float64 references, float32 variables)."""
import numpy as np
import pytest

import jitgrad as tf

pytestmark = pytest.mark.usefixtures("graph_mode")

W0 = np.array([[0.5, -1.5, 2.0], [1.0, 0.25, -0.75]], np.float32)
STEPS = 4


def loss_and_grad(w):
    """loss = sum(w^3 - 2 w) + sum(w)^2 (float64 reference)."""
    w = np.asarray(w, np.float64)
    return np.sum(w ** 3 - 2 * w) + np.sum(w) ** 2, 3 * w ** 2 - 2 + 2 * np.sum(w)


def tf_loss(w):
    return tf.reduce_sum(w * w * w - 2.0 * w) + tf.square(tf.reduce_sum(w))


# ---------------------------------------------------------------- numpy references
def ref_sgd(lr, momentum=0.0, nesterov=False, keras=True):
    w, m, out = W0.astype(np.float64), np.zeros(W0.shape), []
    for _ in range(STEPS):
        _, g = loss_and_grad(w)
        if keras:                       # Keras 3 SGD
            if momentum:
                m = m * momentum - g * lr
                w = w + (m * momentum - g * lr if nesterov else m)
            else:
                w = w - g * lr
        else:                           # TF 1 MomentumOptimizer / GradientDescent
            if momentum:
                m = m * momentum + g
                w = w - (g * lr + m * momentum * lr if nesterov else m * lr)
            else:
                w = w - lr * g
        out.append(w)
    return out


def ref_adam(lr, b1, b2, eps):
    """Both Keras 3's and TF 1's Adam: bias correction folded into the step size."""
    w, m, v, out = W0.astype(np.float64), np.zeros(W0.shape), np.zeros(W0.shape), []
    for t in range(1, STEPS + 1):
        _, g = loss_and_grad(w)
        alpha = lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t)
        m = m + (g - m) * (1 - b1)
        v = v + (g * g - v) * (1 - b2)
        w = w - m * alpha / (np.sqrt(v) + eps)
        out.append(w)
    return out


V1_CASES = [
    ("sgd", lambda: tf.compat.v1.train.GradientDescentOptimizer(0.05), lambda: ref_sgd(0.05, keras=False)),
    ("momentum", lambda: tf.compat.v1.train.MomentumOptimizer(0.05, 0.9), lambda: ref_sgd(0.05, 0.9, keras=False)),
    ("nesterov", lambda: tf.compat.v1.train.MomentumOptimizer(0.05, 0.9, use_nesterov=True),
     lambda: ref_sgd(0.05, 0.9, True, keras=False)),
    ("adam", lambda: tf.compat.v1.train.AdamOptimizer(0.1), lambda: ref_adam(0.1, 0.9, 0.999, 1e-8)),
]


@pytest.mark.parametrize("name,make,ref", V1_CASES, ids=[c[0] for c in V1_CASES])
def test_v1_optimizer_graph_mode(name, make, ref):
    g = tf.Graph()
    with g.as_default():
        w = tf.Variable(W0)
        step = tf.Variable(0, dtype=tf.int64, trainable=False)
        opt = make()
        train = opt.minimize(tf_loss(w), global_step=step)
        init = tf.compat.v1.global_variables_initializer()
    assert isinstance(train, tf.Operation)
    with tf.compat.v1.Session(graph=g) as s:
        s.run(init)
        for i, expected in enumerate(ref()):
            s.run(train)
            np.testing.assert_allclose(s.run(w), expected, rtol=2e-5, atol=1e-5, err_msg=f"step {i + 1}")
        assert s.run(step) == STEPS
    if name == "adam":
        assert sorted(opt.get_slot_names()) == ["m", "v"]
        assert opt.get_slot(w, "m").name == "Variable/Adam:0"


def test_v1_compute_and_apply_gradients_graph_mode():
    g = tf.Graph()
    with g.as_default():
        w = tf.Variable(W0)
        frozen = tf.Variable(1.0)             # not in the loss: its gradient is None
        opt = tf.compat.v1.train.GradientDescentOptimizer(0.05)
        pairs = opt.compute_gradients(tf_loss(w), var_list=[w, frozen])
        assert pairs[1][0] is None and pairs[1][1] is frozen
        train = opt.apply_gradients(pairs)
        init = tf.compat.v1.global_variables_initializer()
    with tf.compat.v1.Session(graph=g) as s:
        s.run(init)
        s.run(train)
        np.testing.assert_allclose(s.run(w), ref_sgd(0.05, keras=False)[0], rtol=2e-6)
        assert s.run(frozen) == 1.0


def test_v1_no_gradients_is_a_clear_error():
    g = tf.Graph()
    with g.as_default():
        w = tf.Variable(1.0)
        other = tf.Variable(2.0)
        with pytest.raises(ValueError, match="No gradients provided"):
            tf.compat.v1.train.AdamOptimizer().minimize(other * 2.0, var_list=[w])


KERAS_CASES = [
    ("sgd", lambda: tf.keras.optimizers.SGD(0.05), lambda: ref_sgd(0.05)),
    ("momentum", lambda: tf.keras.optimizers.SGD(0.05, momentum=0.9), lambda: ref_sgd(0.05, 0.9)),
    ("nesterov", lambda: tf.keras.optimizers.SGD(0.05, momentum=0.9, nesterov=True), lambda: ref_sgd(0.05, 0.9, True)),
    ("adam", lambda: tf.keras.optimizers.Adam(0.1), lambda: ref_adam(0.1, 0.9, 0.999, 1e-7)),
]


@pytest.mark.parametrize("name,make,ref", KERAS_CASES, ids=[c[0] for c in KERAS_CASES])
@pytest.mark.parametrize("how", ["eager", "function", "minimize"])
def test_keras_optimizer(name, make, ref, how):
    check_keras_optimizer(make, ref, how)


def check_keras_optimizer(make, ref, how):
    """Runs STEPS updates of tf_loss with the optimizer ``make()`` (eagerly, in a
    jitgrad.function, or by minimize) and checks each step against ``ref()``."""
    w = tf.Variable(W0)
    opt = make()

    def step():
        with tf.GradientTape() as tape:
            loss = tf_loss(w)
        opt.apply_gradients(zip(tape.gradient(loss, [w]), [w]))
        return loss

    if how == "function":
        step = tf.function(step)
    for i, expected in enumerate(ref()):
        if how == "minimize":
            opt.minimize(lambda: tf_loss(w), [w])
        else:
            step()
        np.testing.assert_allclose(w.numpy(), expected, rtol=2e-5, atol=1e-5, err_msg=f"step {i + 1}")
    assert opt.iterations.numpy() == STEPS
    if how == "function":    # TF traces twice on the first call, which creates the slots
        assert step.experimental_get_tracing_count() == 2


def test_tf_optimizers_alias_and_errors():
    assert tf.optimizers.Adam is tf.keras.optimizers.Adam
    w = tf.Variable([1.0, 2.0])
    opt = tf.keras.optimizers.SGD(0.1)
    with pytest.raises(ValueError, match="No gradients provided"):
        opt.apply_gradients([(None, w)])
    with pytest.raises(ValueError, match="does not match"):
        opt.apply_gradients([(tf.constant([1.0, 2.0, 3.0]), w)])
    with pytest.raises(ValueError, match="use_ema"):
        tf.keras.optimizers.Adam(use_ema=True)
    with pytest.raises(ValueError, match="Only one of `clipnorm`, `clipvalue` and `global_clipnorm`"):
        tf.keras.optimizers.SGD(clipnorm=1.0, clipvalue=0.5)
    with pytest.raises(TypeError, match="unexpected keyword"):
        tf.keras.optimizers.SGD(lr_typo=0.1)
    with pytest.raises(ValueError, match="momentum"):
        tf.keras.optimizers.SGD(momentum=1.5)


def test_learning_rate_schedule_and_callable():
    w = tf.Variable([1.0])
    opt = tf.keras.optimizers.SGD(learning_rate=tf.keras.optimizers.schedules.InverseTimeDecay(0.1, 1, 1.0))
    for k in range(3):
        opt.apply_gradients([(tf.constant([1.0]), w)])
    expected = 1.0 - 0.1 - 0.1 / 2 - 0.1 / 3                  # 0.1 / (1 + step)
    np.testing.assert_allclose(w.numpy(), [expected], rtol=1e-6)
    rate = tf.Variable(0.5)                                   # Keras 3: any other callable takes no arguments
    opt = tf.keras.optimizers.SGD(learning_rate=lambda: rate * 2.0)
    opt.apply_gradients([(tf.constant([1.0]), w)])
    np.testing.assert_allclose(w.numpy(), [expected - 1.0], rtol=1e-6)
    with pytest.raises(TypeError):                            # a step argument is a schedule's, as in TF 2.21
        tf.keras.optimizers.SGD(learning_rate=lambda step: 0.1).apply_gradients([(tf.constant([1.0]), w)])
