"""tf.keras.optimizers.schedules: Keras 3's formulas, written in numpy (float64) here, checked
step by step, used by an optimizer eagerly and in tf.function."""
import math

import numpy as np
import pytest

import jitgrad as tf

S = tf.keras.optimizers.schedules
STEPS = np.arange(13, dtype=np.float64)


def _cosine(fraction):
    return 0.5 * (1 + np.cos(np.pi * fraction))


def _restarts(rate, first, t_mul, m_mul, alpha, step):
    fraction = step / first
    if t_mul == 1.0:
        i = np.floor(fraction)
        fraction = fraction - i
    else:
        i = np.floor(np.log(1 - fraction * (1 - t_mul)) / np.log(t_mul))
        fraction = (fraction - (1 - t_mul ** i) / (1 - t_mul)) / t_mul ** i
    return rate * ((1 - alpha) * m_mul ** i * _cosine(fraction) + alpha)


def _warmup_cosine(rate, decay_steps, target, warmup, step):
    step = np.minimum(step, decay_steps + warmup)
    return np.where(step < warmup, (target - rate) * step / warmup + rate,
                    target * _cosine((step - warmup) / decay_steps))


CASES = [
    (S.ExponentialDecay(0.1, 3, 0.5), lambda s: 0.1 * 0.5 ** (s / 3)),
    (S.ExponentialDecay(0.1, 3, 0.5, staircase=True), lambda s: 0.1 * 0.5 ** np.floor(s / 3)),
    (S.InverseTimeDecay(0.2, 2, 0.7), lambda s: 0.2 / (1 + 0.7 * s / 2)),
    (S.InverseTimeDecay(0.2, 2, 0.7, staircase=True), lambda s: 0.2 / (1 + 0.7 * np.floor(s / 2))),
    (S.PiecewiseConstantDecay([2, 5], [1.0, 0.5, 0.1]), lambda s: np.select([s <= 2, s <= 5], [1.0, 0.5], 0.1)),
    (S.PolynomialDecay(0.1, 4), lambda s: (0.1 - 1e-4) * (1 - np.minimum(s, 4) / 4) + 1e-4),
    (S.PolynomialDecay(0.1, 4, 0.01, 2.0, cycle=True),
     lambda s: (0.1 - 0.01) * (1 - s / (4 * np.where(s == 0, 1, np.ceil(s / 4)))) ** 2 + 0.01),
    (S.CosineDecay(0.1, 5, alpha=0.1), lambda s: 0.1 * (0.9 * _cosine(np.minimum(s, 5) / 5) + 0.1)),
    (S.CosineDecay(0.0, 5, warmup_target=0.2, warmup_steps=3), lambda s: _warmup_cosine(0.0, 5, 0.2, 3, s)),
    (S.CosineDecayRestarts(0.1, 3), lambda s: _restarts(0.1, 3, 2.0, 1.0, 0.0, s)),
    (S.CosineDecayRestarts(0.1, 2, t_mul=1.0, m_mul=0.5, alpha=0.1), lambda s: _restarts(0.1, 2, 1.0, 0.5, 0.1, s)),
]


@pytest.mark.parametrize("schedule, expect", CASES, ids=[f"{type(c[0]).__name__}-{i}" for i, c in enumerate(CASES)])
def test_schedule_matches_keras3_formula(schedule, expect):
    got = np.array([float(schedule(np.int64(step))) for step in STEPS.astype(np.int64)])
    assert schedule(np.int64(1)).dtype == tf.float32            # a Python rate is float32, as in Keras
    np.testing.assert_allclose(got, expect(STEPS), rtol=2e-6, atol=1e-8)


def test_schedules_check_their_arguments():
    with pytest.raises(ValueError, match="decay_steps"):
        S.ExponentialDecay(0.1, 0, 0.5)
    with pytest.raises(ValueError, match="1 less than"):
        S.PiecewiseConstantDecay([1, 2], [1.0])
    config = S.CosineDecay(0.1, 5, alpha=0.2).get_config()
    assert S.CosineDecay.from_config(config).get_config() == config


def test_optimizer_reads_the_schedule_at_each_step_eagerly_and_traced():
    schedule = S.ExponentialDecay(0.5, 1, 0.5)                 # 0.5, 0.25, 0.125, ...
    eager_w, traced_w = tf.Variable([1.0]), tf.Variable([1.0])
    eager_opt, traced_opt = tf.keras.optimizers.SGD(schedule), tf.keras.optimizers.SGD(schedule)

    @tf.function
    def traced_step():
        traced_opt.apply_gradients([(tf.constant([1.0]), traced_w)])

    for _ in range(4):
        eager_opt.apply_gradients([(tf.constant([1.0]), eager_w)])
        traced_step()
    want = 1.0 - sum(0.5 * 0.5 ** k for k in range(4))
    np.testing.assert_allclose(eager_w.numpy(), [want], rtol=1e-6)
    np.testing.assert_allclose(traced_w.numpy(), [want], rtol=1e-6)
    assert math.isclose(float(eager_opt.iterations.numpy()), 4)
