"""Keras optimizers in a TF 1 Session (optimizers.py): ``apply_gradients`` and
``minimize(loss_tensor, var_list)`` build an op that Session.run runs, compiled
(no interpreter fallback). TF 2.21 itself cannot do this (Keras 3 has no
``minimize``; its ``apply_gradients`` in a v1 graph returns a Keras Variable that
Session.run rejects), so the expected values are the same optimizer's steps run
eagerly (bit for bit: one definition serves both) and, independently, the
optimizer's update formula in float64 numpy."""
import numpy as np
import pytest

import jitgrad as tf

pytestmark = pytest.mark.usefixtures("graph_mode")

W0 = np.array([1.0, -2.0, 0.5], np.float32)
STEPS = 4


def _numpy_sgd_momentum(lr=0.1, momentum=0.9):
    w, m, out = W0.astype(np.float64), np.zeros(3), []
    for _ in range(STEPS):
        g = 2 * w + 1.0                          # d/dw sum(w^2 + w)
        m = momentum * m - lr * g                # Keras 3's SGD with momentum
        w = w + m
        out.append(w.copy())
    return out


def _numpy_sgd_weight_decay(lr=0.1, wd=0.5):
    w, out = W0.astype(np.float64), []
    for _ in range(STEPS):
        g = 2 * w + 1.0
        w = w - w * wd * lr                      # Keras 3's decoupled decay, before the step
        w = w - lr * g
        out.append(w.copy())
    return out


def _numpy_adam(lr=0.1, b1=0.9, b2=0.999, eps=1e-7):
    w, m, v, out = W0.astype(np.float64), np.zeros(3), np.zeros(3), []
    for t in range(1, STEPS + 1):
        g = 2 * w + 1.0
        alpha = lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t)
        m += (g - m) * (1 - b1)
        v += (g * g - v) * (1 - b2)
        w = w - alpha * m / (np.sqrt(v) + eps)
        out.append(w.copy())
    return out


def _eager_steps(make_opt):
    v = tf.Variable(W0)
    opt, out = make_opt(), []
    for _ in range(STEPS):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(v * v + v)
        opt.apply_gradients(zip(tape.gradient(loss, [v]), [v]))
        out.append(v.numpy().copy())
    return out


@pytest.mark.parametrize("how", ["apply_gradients", "minimize"])
@pytest.mark.parametrize("name, make_opt, reference", [
    ("sgd_momentum", lambda: tf.keras.optimizers.SGD(0.1, momentum=0.9), _numpy_sgd_momentum),
    ("adam", lambda: tf.keras.optimizers.Adam(0.1), _numpy_adam),
    ("sgd_weight_decay", lambda: tf.keras.optimizers.SGD(0.1, weight_decay=0.5), _numpy_sgd_weight_decay),
])
def test_keras_optimizer_steps_in_a_session(no_fallback, graph_mode, how, name, make_opt, reference):
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable(W0)
        loss = tf.reduce_sum(v * v + v)
        opt = make_opt()
        if how == "minimize":
            step = opt.minimize(loss, [v])
        else:
            step = opt.apply_gradients(zip(tf.gradients(loss, [v]), [v]))
        init = tf.compat.v1.global_variables_initializer()
    assert isinstance(step, (tf.Tensor, tf.Operation))
    with tf.compat.v1.Session(graph=g) as s:
        s.run(init)
        got = []
        for k in range(STEPS):
            assert s.run(step) == k + 1          # the op's value: opt.iterations after the step
            got.append(s.run(v))
    eager = _eager_steps(make_opt)
    for a, b, ref in zip(got, eager, reference()):
        if graph_mode == "interpret":    # the same numpy kernels as eagerly: bit for bit
            np.testing.assert_array_equal(a, b)
        else:                            # compiled code may round Adam's step differently (1 ulp seen)
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(a, ref, rtol=2e-5, atol=1e-6)   # float32 steps vs float64


def test_minimize_of_a_tensor_loss_eagerly_still_needs_a_tape():
    v = tf.Variable(1.0)
    with pytest.raises(ValueError, match="`tape` is required when a `Tensor` loss is passed."):
        tf.keras.optimizers.SGD(0.1).minimize(v * v, [v])
