"""tf.keras.activations: Keras 3's TF-backend formulas, re-written in numpy (float64) here,
including NaN / +-inf inputs, and their gradients against central differences."""
import numpy as np
import pytest

import jitgrad as tf

A = tf.keras.activations
# away from every kink of the functions below (0, +-0.3, +-0.5, +-0.6, +-1, 2.5, +-3, 6)
X = np.array([-7, -3.3, -1.6, -1.2, -0.8, -0.45, -0.2, 0.2, 0.4, 0.75, 1.3, 2.2, 2.8, 4, 5.7, 6.4, 7], np.float64)
SPECIAL = np.array([np.nan, np.inf, -np.inf])


def _softplus(x):
    return np.logaddexp(0.0, x)


def _np_relu(x, negative_slope=0.0, max_value=None, threshold=0.0):
    out = np.where(x > threshold, x, 0.0) if threshold else np.maximum(x, 0.0)    # relu keeps NaN
    if max_value is not None:
        out = np.minimum(out, max_value)
    return out - negative_slope * np.maximum(threshold - x, 0.0) if negative_slope else out


REFERENCE = [
    ("relu", {"negative_slope": 0.1}, _np_relu),
    ("relu", {"max_value": 2.5}, _np_relu),
    ("relu", {"max_value": 6}, _np_relu),
    ("relu", {"threshold": 0.5}, _np_relu),
    ("relu", {"negative_slope": 0.1, "max_value": 3.0, "threshold": 0.5}, _np_relu),
    ("celu", {"alpha": 2.0}, lambda x, alpha: np.maximum(x, 0) + alpha * np.expm1(np.minimum(x, 0) / alpha)),
    ("hard_sigmoid", {}, lambda x: np.clip(x + 3, 0, 6) / 6),
    ("hard_silu", {}, lambda x: x * np.clip(x + 3, 0, 6) / 6),
    ("hard_tanh", {}, lambda x: np.clip(x, -1, 1)),
    ("hard_shrink", {"threshold": 0.6}, lambda x, threshold: np.where(np.abs(x) > threshold, x, 0.0)),
    ("soft_shrink", {"threshold": 1.0},
     lambda x, threshold: np.where(x > threshold, x - threshold, np.where(x < -threshold, x + threshold, 0.0))),
    ("tanh_shrink", {}, lambda x: x - np.tanh(x)),
    ("threshold", {"threshold": 0.3, "default_value": -2.0},
     lambda x, threshold, default_value: np.where(x > threshold, x, default_value)),
    ("sparse_plus", {}, lambda x: np.where(x <= -1, 0.0, np.where(x < 1, (x + 1) ** 2 / 4, x))),
    ("sparse_sigmoid", {}, lambda x: np.clip((x + 1) / 2, 0, 1)),
    ("squareplus", {"b": 1}, lambda x, b: (x + np.sqrt(x * x + b)) / 2),
    ("log_sigmoid", {}, lambda x: -_softplus(-x)),
    ("mish", {}, lambda x: x * np.tanh(_softplus(x))),
]


@pytest.mark.parametrize("name, options, expect", REFERENCE, ids=[f"{r[0]}-{i}" for i, r in enumerate(REFERENCE)])
def test_activation_values_gradients_and_specials(name, options, expect):
    fn = getattr(A, name)
    assert A.get(name) is fn
    np.testing.assert_allclose(fn(X.astype(np.float32), **options).numpy(), expect(X, **options),
                               rtol=2e-6, atol=2e-7)
    with np.errstate(invalid="ignore"):
        want_special = expect(SPECIAL, **options)
    np.testing.assert_array_equal(fn(SPECIAL, **options).numpy(), want_special)   # NaN / inf as numpy's
    x = tf.Variable(X)
    with tf.GradientTape() as t:
        y = tf.reduce_sum(fn(x, **options))
    h = 1e-6
    central = (expect(X + h, **options) - expect(X - h, **options)) / (2 * h)
    np.testing.assert_allclose(t.gradient(y, x).numpy(), central, rtol=1e-6, atol=1e-6)


def test_glu_halves_and_odd_axis():
    x = np.arange(12, dtype=np.float64).reshape(3, 4) / 5
    np.testing.assert_allclose(A.glu(x).numpy(), x[:, :2] / (1 + np.exp(-x[:, 2:])), rtol=1e-12)
    with pytest.raises(ValueError, match="divisible by 2"):
        A.glu(np.ones((2, 3), np.float32))


def test_hard_swish_alias_and_relu_defaults():
    assert A.get("hard_swish") is A.hard_silu
    x = np.array([-2.0, 0.0, 3.0], np.float32)
    np.testing.assert_array_equal(A.relu(x).numpy(), [0.0, 0.0, 3.0])
    np.testing.assert_allclose(A.relu(x, negative_slope=0.5).numpy(), [-1.0, 0.0, 3.0])
