"""Array composites (ops/array_composites.py): repeat, meshgrid, sequence_mask, searchsorted,
unravel_index, reverse_sequence, identity_n, shape_n. Expected values from numpy (np.repeat,
np.meshgrid, np.searchsorted, np.unravel_index, loops); error types as TF 2.21 raised them.
Graph runs in both Session modes, compiled ones without interpreter fallback (except
run-time vector repeats, whose output length depends on the data)."""
import numpy as np
import pytest

import jitgrad as tf
from jitgrad.errors import InvalidArgumentError

from _graph_testing import run_graph

pytestmark = pytest.mark.usefixtures("graph_mode")


def _weights(shape):
    return np.linspace(0.5, 2.0, int(np.prod(shape))).reshape(shape)


def _value_and_grad(fn, x, out_shape):
    w = _weights(out_shape)

    def build(p):
        y = fn(p)
        return [y, tf.gradients(tf.reduce_sum(y * w), p)[0]]
    return build


def test_repeat_values_and_gradients(graph_mode):
    x = np.arange(6.0).reshape(2, 3)
    for repeats, axis in ((2, None), ([1, 3, 0], 1), ([2, 1], 0), (3, -1), ([2], 0)):
        want = np.repeat(x, repeats, axis=axis)
        got, grad = run_graph(_value_and_grad(lambda p: tf.repeat(p, repeats, axis=axis), x, want.shape),
                              [x], graph_mode)
        np.testing.assert_array_equal(got, want)
        # each input element gets the weights of its copies
        idx = np.repeat(np.arange(6).reshape(2, 3), repeats, axis=axis)
        np.testing.assert_allclose(grad, np.bincount(idx.reshape(-1), _weights(want.shape).reshape(-1),
                                                     6).reshape(2, 3))


def test_repeat_run_time_repeats(graph_mode):
    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    got = run_graph(lambda p, r: tf.repeat(p, r, axis=1), [x, np.array(2, np.int32)], graph_mode)
    np.testing.assert_array_equal(got, np.repeat(x, 2, axis=1))
    got = run_graph(lambda p, r: tf.repeat(p, r, axis=1), [x, np.array([2, 0, 1], np.int32)], graph_mode,
                    fallback_ok=True)
    np.testing.assert_array_equal(got, np.repeat(x, [2, 0, 1], axis=1))


def test_repeat_eager_edges_and_errors():
    assert tf.repeat(3, 4).numpy().tolist() == [3, 3, 3, 3]
    assert tf.repeat(tf.zeros([0, 3]), 2, axis=0).shape == (0, 3)
    with pytest.raises(ValueError):
        tf.repeat([[1, 2]], [1, 2, 3], axis=1)
    with pytest.raises(TypeError):
        tf.repeat([1, 2], 2.0)
    with pytest.raises(ValueError):
        tf.repeat([1, 2], 2, axis=1)
    with pytest.raises(TypeError):
        tf.repeat([1, 2], 2, axis=0.0)


def test_meshgrid(graph_mode):
    a, b, c = np.array([1.0, 2.0, 3.0]), np.array([4.0, 5.0]), np.array([6.0, 7.0, 8.0, 9.0])
    for indexing in ("xy", "ij"):
        got = run_graph(lambda *ps: tf.meshgrid(*ps, indexing=indexing), [a, b, c], graph_mode)
        for g, w in zip(got, np.meshgrid(a, b, c, indexing=indexing)):
            np.testing.assert_array_equal(g, w)
    grads = run_graph(lambda p, q: tf.gradients(tf.reduce_sum(tf.meshgrid(p, q)[0] * tf.meshgrid(p, q)[1]), [p, q]),
                      [a, b], graph_mode)
    np.testing.assert_allclose(grads[0], np.full(3, b.sum()))
    np.testing.assert_allclose(grads[1], np.full(2, a.sum()))
    assert tf.meshgrid() == []
    with pytest.raises(ValueError):
        tf.meshgrid([1.0], indexing="xz")
    with pytest.raises(TypeError):
        tf.meshgrid([1.0], foo=1)


def test_sequence_mask(graph_mode):
    lens = np.array([[1, 4], [0, 2]], np.int32)
    want = np.arange(4) < lens[..., None]
    np.testing.assert_array_equal(run_graph(lambda p: tf.sequence_mask(p), [lens], graph_mode), want)
    got = run_graph(lambda p: tf.sequence_mask(p, 6, dtype=tf.float32), [lens], graph_mode)
    np.testing.assert_array_equal(got, (np.arange(6) < lens[..., None]).astype(np.float32))
    assert tf.sequence_mask(tf.constant([], tf.int32)).shape == (0, 0)
    with pytest.raises(ValueError):
        tf.sequence_mask([1, 2], [3, 4])


def test_searchsorted(graph_mode):
    rng = np.random.default_rng(3)
    seq = np.sort(rng.integers(0, 6, (3, 7)).astype(np.float32), -1)
    vals = rng.integers(-1, 8, (3, 5)).astype(np.float32)
    vals[0, 0] = np.nan
    for side in ("left", "right"):
        got = run_graph(lambda s, v: tf.searchsorted(s, v, side=side, out_type=tf.int64), [seq, vals], graph_mode)
        want = np.stack([np.searchsorted(s, v, side=side) for s, v in zip(seq, vals)])
        want[0, 0] = 0 if side == "left" else 7      # (std::lower_bound / upper_bound on a NaN)
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError):
        tf.searchsorted([1, 2], [1], side="middle")
    with pytest.raises(InvalidArgumentError):
        tf.searchsorted([[0, 3, 9], [1, 2, 3]], [[2, 9]])


def test_unravel_index(graph_mode):
    idx, dims = np.array([22, 41, 37, 0], np.int64), np.array([7, 6], np.int64)
    got = run_graph(lambda i, d: tf.unravel_index(i, d), [idx, dims], graph_mode)
    np.testing.assert_array_equal(got, np.stack(np.unravel_index(idx, dims)))
    assert tf.unravel_index(1621, [6, 7, 8, 9]).numpy().tolist() == [3, 1, 4, 1]
    # TF's kernel lets a negative index through, in C++'s truncating arithmetic
    assert tf.unravel_index([-1], [7, 6]).numpy().tolist() == [[0], [-1]]
    with pytest.raises(InvalidArgumentError):
        tf.unravel_index([42], [7, 6])
    with pytest.raises(InvalidArgumentError):        # (fed: TF's kernel check is an assertion here)
        run_graph(lambda i: tf.unravel_index(i, [7, 6]), [np.array([3, 42], np.int32)], graph_mode)
    with pytest.raises(InvalidArgumentError):
        tf.unravel_index([3], [2, -2])
    with pytest.raises(InvalidArgumentError):
        tf.unravel_index([[1]], [7, 6])
    with pytest.raises(InvalidArgumentError):       # (eager: TF's kernel lookup fails)
        tf.unravel_index(tf.constant([1]), tf.constant([2, 2], tf.int64))
    with tf.Graph().as_default(), pytest.raises(TypeError):
        tf.unravel_index(tf.constant([1]), tf.constant([2, 2], tf.int64))


def test_reverse_sequence(graph_mode):
    x = np.arange(24.0).reshape(2, 3, 4)
    lens = np.array([1, 3, 0], np.int32)

    def np_reverse(x, lens):   # seq_axis 2, batch_axis 1
        out = x.copy()
        for b, n in enumerate(lens):
            out[:, b, :n] = x[:, b, :n][..., ::-1]
        return out
    want = np_reverse(x, lens)
    build = _value_and_grad(lambda p: tf.reverse_sequence(p, lens, seq_axis=2, batch_axis=1), x, want.shape)
    got, grad = run_graph(build, [x], graph_mode)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(grad, np_reverse(_weights(x.shape), lens))   # a permutation: its own inverse
    got = run_graph(lambda p, n: tf.reverse_sequence(p, n, seq_axis=2, batch_axis=1), [x, lens.astype(np.int64)],
                    graph_mode)
    np.testing.assert_array_equal(got, want)
    for bad in ([1, 5, 0], [1, -1, 0]):
        with pytest.raises(InvalidArgumentError):
            run_graph(lambda p, n: tf.reverse_sequence(p, n, seq_axis=2, batch_axis=1),
                      [x, np.array(bad, np.int32)], graph_mode)
    y = tf.constant(x)
    for bad in (dict(seq_lengths=[2, 5], seq_axis=2), dict(seq_lengths=[-1, 2], seq_axis=2), dict(seq_lengths=[2, 3, 4], seq_axis=2),
                dict(seq_lengths=[2, 3], seq_axis=0)):
        with pytest.raises(InvalidArgumentError):
            tf.reverse_sequence(y, **bad)


def test_identity_n_and_shape_n(graph_mode):
    x = np.ones((2, 3))
    got = run_graph(lambda p: [tf.identity_n([p, 2 * p]), tf.gradients(tf.identity_n([p, 2 * p])[1], p)[0]],
                    [x], graph_mode)
    np.testing.assert_array_equal(got[0][1], 2 * x)
    np.testing.assert_array_equal(got[1], np.full((2, 3), 2.0))
    got = tf.shape_n([tf.zeros([2, 3]), tf.zeros([4])], out_type=tf.int64)
    assert [s.numpy().tolist() for s in got] == [[2, 3], [4]] and got[0].dtype == tf.int64
    with pytest.raises(InvalidArgumentError):
        tf.shape_n([tf.zeros([2]), tf.constant([1])])
    with tf.Graph().as_default(), pytest.raises(TypeError):
        tf.shape_n([tf.zeros([2]), tf.constant([1])])
