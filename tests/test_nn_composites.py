"""tf.nn composites (ops/nn_composites.py): weighted_cross_entropy_with_logits,
sufficient_statistics, weighted_moments, compute_average_loss, scale_regularization_loss,
log_poisson_loss, crelu, space_to_depth / depth_to_space, local_response_normalization.
Expected values from numpy formulas written here; gradients against finite differences
(check_op); error types as TF 2.21 raised them. Graph runs in both Session modes, compiled
ones without interpreter fallback."""
import math

import numpy as np
import pytest

import jitgrad as tf
from jitgrad.errors import InvalidArgumentError

from _graph_testing import check_op, run_graph

pytestmark = pytest.mark.usefixtures("graph_mode")

RNG = np.random.default_rng(21)


def test_weighted_cross_entropy_and_log_poisson(no_fallback):
    x, z = RNG.normal(size=(3, 4)) * 3, RNG.uniform(size=(3, 4))
    q = np.array([1.0, 2.0, 0.5, 3.0])
    want = -(q * z * np.log(1 / (1 + np.exp(-x))) + (1 - z) * np.log(1 - 1 / (1 + np.exp(-x))))
    check_op(lambda lg, lb: tf.nn.weighted_cross_entropy_with_logits(lb, lg, q), x, z, expected=want,
             value_rtol=1e-9)
    with pytest.raises(ValueError):
        tf.nn.weighted_cross_entropy_with_logits(tf.constant(z[:2]), tf.constant(x), 2.0)
    t = np.array([0.0, 0.5, 1.0, 2.0, 7.0])
    c = RNG.normal(size=5)
    stirling = np.where((t >= 0) & (t <= 1), 0, t * np.log(np.where(t > 0, t, 1)) - t
                        + 0.5 * np.log(2 * math.pi * np.where(t > 0, t, 1)))
    check_op(lambda ci: tf.nn.log_poisson_loss(t, ci), c, expected=np.exp(c) - c * t, value_rtol=1e-12)
    check_op(lambda ci: tf.nn.log_poisson_loss(t, ci, compute_full_loss=True), c,
             expected=np.exp(c) - c * t + stirling, value_rtol=1e-12)


def test_statistics(graph_mode, no_fallback):
    x = RNG.normal(size=(2, 3, 4))
    count, m_ss, v_ss, shift = run_graph(lambda p: tf.nn.sufficient_statistics(p, [0, 2], shift=np.float64(0.5))[:3] + (
        tf.constant(0.0),), [x], graph_mode)
    assert count == 8.0
    np.testing.assert_allclose(m_ss, (x - 0.5).sum((0, 2)))
    np.testing.assert_allclose(v_ss, ((x - 0.5) ** 2).sum((0, 2)))
    got = tf.nn.sufficient_statistics(tf.constant(x), [-1], keepdims=True)
    assert got[0].dtype == tf.float64 and got[1].shape == (2, 3, 1) and got[3] is None
    w = np.array([[1.0], [0.0], [2.0]])
    mean = (w * x).sum(1) / w.sum() * 1
    var = (w * (x - mean[:, None, :]) ** 2).sum(1) / w.sum()
    check_op(lambda p: tf.nn.weighted_moments(p, [1], w)[0], x, expected=mean, value_rtol=1e-12)
    check_op(lambda p: tf.nn.weighted_moments(p, [1], w)[1], x, expected=var, value_rtol=1e-12, rtol=1e-5)
    zero = tf.nn.weighted_moments(tf.constant(x), [1], tf.zeros([3, 1], tf.float64))
    assert np.all(zero[0].numpy() == 0) and np.all(zero[1].numpy() == 0)     # (div_no_nan)


def test_average_and_regularization_losses(graph_mode, no_fallback):
    loss = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    got = run_graph(lambda p: [tf.nn.compute_average_loss(p),
                               tf.nn.compute_average_loss(p, sample_weight=[1.0, 0.0, 2.0, 1.0], global_batch_size=8),
                               tf.nn.scale_regularization_loss(p)], [loss], graph_mode)
    np.testing.assert_allclose(got, [2.5, (1 + 0 + 6 + 4) / 8, 10.0])
    assert tf.nn.compute_average_loss(tf.zeros([0])).numpy() == 0.0
    two_d = tf.nn.compute_average_loss(tf.ones([2, 3], tf.float64), sample_weight=[2.0, 3.0])
    assert two_d.dtype == tf.float64 and two_d.numpy() == 7.5
    with pytest.raises(ValueError):
        tf.nn.compute_average_loss(tf.constant(3.0))
    with pytest.raises(TypeError):
        tf.nn.compute_average_loss(loss, global_batch_size=2.0)
    with pytest.raises(InvalidArgumentError):
        tf.nn.compute_average_loss(loss, global_batch_size=-1)


def test_crelu(no_fallback):
    x = RNG.normal(size=(3, 4))
    check_op(lambda p: tf.nn.crelu(p), x, expected=np.maximum(np.concatenate([x, -x], -1), 0))
    check_op(lambda p: tf.nn.crelu(p, axis=0), x, expected=np.maximum(np.concatenate([x, -x], 0), 0))


def _np_space_to_depth(x, bs):
    b, h, w, c = x.shape
    out = np.zeros((b, h // bs, w // bs, bs * bs * c))
    for i in range(h):
        for j in range(w):
            out[:, i // bs, j // bs, ((i % bs) * bs + j % bs) * c:((i % bs) * bs + j % bs + 1) * c] = x[:, i, j]
    return out


def test_space_to_depth_and_back(no_fallback):
    x = RNG.normal(size=(2, 4, 6, 3))
    want = _np_space_to_depth(x, 2)
    check_op(lambda p: tf.nn.space_to_depth(p, 2), x, expected=want)
    check_op(lambda p: tf.nn.depth_to_space(p, 2), want, expected=x)
    with pytest.raises(InvalidArgumentError):
        tf.nn.space_to_depth(tf.constant(x), 4)
    with pytest.raises(InvalidArgumentError):
        tf.nn.space_to_depth(tf.constant(x), 1)
    with pytest.raises(InvalidArgumentError):
        tf.nn.depth_to_space(tf.constant(x), 2)


def test_local_response_normalization(graph_mode, no_fallback):
    x = RNG.normal(size=(2, 3, 3, 7)).astype(np.float32)
    for r, bias, alpha, beta in ((5, 1.0, 1.0, 0.5), (2, 2.0, 0.3, 0.75), (1, 1.0, 1.0, 1.0)):
        sq = np.stack([(x[..., max(0, d - r):d + r + 1] ** 2).sum(-1) for d in range(7)], -1)
        want = x / (bias + alpha * sq) ** beta
        got = run_graph(lambda p: tf.nn.lrn(p, r, bias, alpha, beta), [x], graph_mode)
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-7)
    x64 = x[:1, :1].astype(np.float64)
    with pytest.raises(InvalidArgumentError):
        tf.nn.lrn(tf.constant(x64))


def test_bias_add_channels_first():
    x = np.random.default_rng(2).standard_normal((2, 3, 2, 2)).astype(np.float32)
    b = np.array([1.0, 2.0, 3.0], np.float32)
    np.testing.assert_array_equal(tf.nn.bias_add(x, b, data_format="NCHW").numpy(), x + b[:, None, None])
    np.testing.assert_array_equal(tf.nn.bias_add(x[..., 0], b, data_format="NCW").numpy(), x[..., 0] + b[:, None])
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.nn.bias_add(np.zeros((2, 4, 4), np.float32), b, data_format="NCW")
    with pytest.raises(ValueError, match="data_format"):
        tf.nn.bias_add(x, b, data_format="XYZ")
