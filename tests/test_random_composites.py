"""tf.random.categorical and tf.random.shuffle (ops/random_composites.py): statistical checks
(class frequencies within 6 standard errors of softmax(logits), shuffled rows a permutation
with every position equally likely), seeding as tf.random.uniform's, fresh draws per run,
and compiled graphs without interpreter fallback."""
import numpy as np
import pytest

import jitgrad as tf
from jitgrad.errors import InvalidArgumentError

from _graph_testing import run_graph

pytestmark = pytest.mark.usefixtures("graph_mode")


def _check_frequencies(samples, probs):
    n = samples.shape[1]
    for row, p in zip(samples, probs):
        freq = np.bincount(row, minlength=len(p)) / n
        np.testing.assert_array_less(np.abs(freq - p), 6 * np.sqrt(p * (1 - p) / n) + 1e-12)


def test_categorical_frequencies(graph_mode, no_fallback):
    with np.errstate(divide="ignore"):
        logits = np.log(np.array([[0.1, 0.2, 0.7], [0.5, 0.5, 0.0], [0.25, 0.25, 0.5]], np.float32))
    probs = np.exp(logits.astype(np.float64))
    samples = run_graph(lambda p: tf.random.categorical(p, 20000, seed=4), [logits], graph_mode)
    assert samples.shape == (3, 20000) and samples.dtype == np.int64
    _check_frequencies(samples, probs)
    assert not np.any(samples[1] == 2)              # a class of logit -inf is never drawn


def test_categorical_eager_seeds_dtypes_and_errors():
    logits = tf.math.log([[0.3, 0.7]])
    tf.random.set_seed(7)
    a = tf.random.categorical(logits, 50, seed=1)
    tf.random.set_seed(7)
    b = tf.random.categorical(logits, 50, seed=1)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    got = tf.random.categorical(logits, 4, dtype=tf.int32)
    assert got.dtype == tf.int32 and got.shape == (1, 4)
    assert tf.random.categorical(logits, 0).shape == (1, 0)
    with pytest.raises(ValueError):
        tf.random.categorical(logits, 3, dtype=tf.float32)
    with pytest.raises(InvalidArgumentError):
        tf.random.categorical(logits[0], 3)


def test_shuffle(graph_mode, no_fallback):
    x = np.arange(12, dtype=np.float32).reshape(6, 2)
    g = tf.Graph()
    with g.as_default():
        p = tf.compat.v1.placeholder(tf.float32, [6, 2])
        shuffled = tf.random.shuffle(p)
    firsts = []
    with tf.compat.v1.Session(graph=g) as s:
        for _ in range(600):
            out = s.run(shuffled, {p: x})
            np.testing.assert_array_equal(np.sort(out[:, 0]), x[:, 0])     # whole rows, each once
            np.testing.assert_array_equal(out[:, 1] - out[:, 0], 1)
            firsts.append(out[0, 0])
    counts = np.bincount(np.asarray(firsts, np.int64) // 2, minlength=6)
    assert np.all(np.abs(counts - 100) < 6 * np.sqrt(600 * (1 / 6) * (5 / 6)))
    assert tf.random.shuffle(tf.constant(3)).numpy() == 3
    assert tf.random.shuffle(tf.zeros([0, 3])).shape == (0, 3)
