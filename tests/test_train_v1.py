"""tf.compat.v1.train's RMSProp / Adagrad / Adadelta optimizers, global step and decay functions:
TF's kernels' update rules written in numpy (float64) here, five steps in a Session and eagerly."""
import numpy as np
import pytest

import jitgrad as tf

v1 = tf.compat.v1
W0 = np.array([1.0, -2.0, 0.5])


def f32(value):
    """TF 1's optimizers take their hyperparameters as float32 tensors, then cast them to the
    variable's dtype: a float64 variable sees float32's 0.01."""
    return float(np.float32(value))
X = np.array([1.0, 2.0, 3.0])


def _grad(w, step):
    x = X * (step + 1)
    return 2 * (w * x - 1.0) * x                      # d/dw sum((w x - 1)^2)


def _rmsprop(lr, decay=0.9, momentum=0.0, eps=1e-10, centered=False, steps=5):
    lr, decay, momentum, eps = f32(lr), f32(decay), f32(momentum), f32(eps)
    w, ms, mom, mg = W0.copy(), np.ones(3), np.zeros(3), np.zeros(3)
    for k in range(steps):
        g = _grad(w, k)
        ms += (g * g - ms) * (1 - decay)
        denom = ms + eps
        if centered:
            mg += (g - mg) * (1 - decay)
            denom = ms - mg * mg + eps
        mom = mom * momentum + g * lr / np.sqrt(denom)
        w -= mom
    return w


def _adagrad(lr, initial=0.1, steps=5):
    lr = f32(lr)                                      # (the accumulator starts at the exact initial value)
    w, acc = W0.copy(), np.full(3, initial)
    for k in range(steps):
        g = _grad(w, k)
        acc += g * g
        w -= g * lr / np.sqrt(acc)
    return w


def _adadelta(lr, rho=0.95, eps=1e-8, steps=5):
    lr, rho, eps = f32(lr), f32(rho), f32(eps)
    w, acc, upd = W0.copy(), np.zeros(3), np.zeros(3)
    for k in range(steps):
        g = _grad(w, k)
        acc = acc * rho + g * g * (1 - rho)
        update = np.sqrt(upd + eps) / np.sqrt(acc + eps) * g
        w -= update * lr
        upd = upd * rho + update * update * (1 - rho)
    return w


CASES = [
    (lambda: v1.train.RMSPropOptimizer(0.01), _rmsprop(0.01), 2),
    (lambda: v1.train.RMSPropOptimizer(0.01, momentum=0.9, centered=True),
     _rmsprop(0.01, momentum=0.9, centered=True), 3),
    (lambda: v1.train.AdagradOptimizer(0.1), _adagrad(0.1), 1),
    (lambda: v1.train.AdadeltaOptimizer(1.0), _adadelta(1.0), 2),
]


@pytest.mark.parametrize("make, want, n_slots", CASES, ids=["rmsprop", "centered", "adagrad", "adadelta"])
def test_v1_optimizer_steps_in_a_session(make, want, n_slots):
    g = tf.Graph()
    with g.as_default():
        w = tf.Variable(W0, dtype=tf.float64)
        x = v1.placeholder(tf.float64, [3])
        step = v1.train.get_or_create_global_step()
        opt = make()
        train = opt.minimize(tf.reduce_sum(tf.square(w * x - 1.0)), global_step=step)
        assert len(opt.variables()) == n_slots
        with v1.Session() as s:
            s.run(v1.global_variables_initializer())
            for k in range(5):
                s.run(train, {x: X * (k + 1)})
            np.testing.assert_allclose(s.run(w), want, rtol=1e-12)
            assert s.run(step) == 5


@pytest.mark.parametrize("make, want, n_slots", CASES, ids=["rmsprop", "centered", "adagrad", "adadelta"])
def test_v1_optimizer_steps_eagerly(make, want, n_slots):
    w = tf.Variable(W0, dtype=tf.float64)
    opt = make()
    for k in range(5):
        opt.minimize(lambda: tf.reduce_sum(tf.square(w * (X * (k + 1)) - 1.0)), var_list=[w])
    np.testing.assert_allclose(w.numpy(), want, rtol=1e-12)


def test_global_step_and_decay_functions():
    g = tf.Graph()
    with g.as_default():
        step = v1.train.get_or_create_global_step()
        assert v1.train.get_or_create_global_step() is step and step.dtype == tf.int64
        with pytest.raises(ValueError, match="already exists"):
            v1.train.create_global_step()
        rates = [v1.train.exponential_decay(0.1, step, 2, 0.5, staircase=True),
                 v1.train.inverse_time_decay(0.1, step, 1, 1.0),
                 v1.train.piecewise_constant(step, [2, 4], [1.0, 0.5, 0.1]),
                 v1.train.polynomial_decay(0.1, step, 10, 0.0)]
        bump = step.assign_add(3)
        with v1.Session() as s:
            s.run(v1.global_variables_initializer())
            s.run(bump)
            np.testing.assert_allclose(s.run(rates), [0.1 * 0.5 ** 1, 0.1 / 4, 0.5, 0.1 * 0.7], rtol=1e-6)
    eager_step = tf.Variable(0, dtype=tf.int64)
    rate = v1.train.exponential_decay(1.0, eager_step, 1, 0.5)     # eagerly: a callable
    eager_step.assign(2)
    assert float(rate()) == 0.25
