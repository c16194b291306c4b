"""The gradient of tf.gather on an inner axis of a value of run-time rows
(codegen/lower_rows_gather._gather_grad_inner, vectorised): axes before and after the
gathered one (blocks of 20 elements added per index), indices of rank 2 with repeats,
many indices on the last axis. Each compiles once for every T and agrees with the
interpreter and with numpy (np.add.at: repeats sum in index order; the RNN's own
gradient by test_dynamic_rows_ops._np_bptt); a bad fed index is TF's error in both modes."""
import numpy as np
import pytest

import jitgrad as tf
from test_dynamic_rows_ops import TRIPS, _np_bptt, _np_states, _rnn_batch1, _run_all_trips

tf1 = tf.compat.v1
C = np.linspace(-1.0, 1.0, 20)


def _blocks_graph():
    """z [T, 2, 3, 20] (st [T, 1, 4] tiled and reshaped), gathered along axis 2 by idx [2, 2]."""
    g, T, x0, W, st = _rnn_batch1(4, tf.float64)
    with g.as_default():
        idx = tf1.placeholder(tf.int32, [2, 2])
        z = tf.reshape(tf.tile(st, [1, 6, 5]), [-1, 2, 3, 20])
        y = tf.gather(z, idx, axis=2)                       # [T, 2, 2, 2, 20]
        loss = tf.reduce_sum(tf.sin(y) * C)
        gz, gx = tf.gradients(loss, [z, x0])
    return g, T, x0, W, idx, [y, gz, gx]


def test_blocks_after_the_axis_and_indices_of_rank_two():
    g, T, x0, W, idx, fetches = _blocks_graph()
    iv = np.array([[2, 0], [0, 2]], np.int32)
    x0v = np.linspace(-1, 1, 4)[None]
    out = _run_all_trips(g, fetches, {t: {T: t, x0: x0v, idx: iv} for t in TRIPS}, tf.float64)
    for t, (yv, gzv, gxv) in out.items():
        S = _np_states(W, x0v[0], t)                          # [t, 4]
        Z = np.tile(S[:, None, :], [1, 6, 5]).reshape(t, 2, 3, 20)
        Y = Z[:, :, iv, :]
        np.testing.assert_allclose(yv, Y, rtol=1e-12, atol=1e-12)
        dY = np.cos(Y) * C                                    # d loss / d y
        want = np.zeros_like(Z)
        for i in range(2):
            for j in range(2):                                # (in index order, as np.add.at)
                want[:, :, iv[i, j], :] += dY[:, :, i, j, :]
        np.testing.assert_allclose(gzv, want, rtol=1e-12, atol=1e-12)
        # d loss / d st: the tiled copies summed (z[t, a, b, 4 m + e] = st[t, 0, e])
        gS = want.reshape(t, 6, 5, 4).sum(axis=(1, 2))
        np.testing.assert_allclose(gxv, _np_bptt(W, S, gS, x0v[0])[None], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("bad", [[[0, 3], [1, 1]], [[0, 1], [-1, 2]]])
def test_a_bad_index_is_tfs_error_in_both_modes(bad):
    g, T, x0, W, idx, fetches = _blocks_graph()
    for mode in ("compiled", "interpret"):
        s = tf1.Session(graph=g, config=tf1.ConfigProto(jitgrad_mode=mode))
        with pytest.raises(tf.errors.InvalidArgumentError):
            s.run(fetches[1], {T: 3, x0: np.zeros((1, 4)), idx: np.array(bad, np.int32)})


@pytest.mark.parametrize("dt", [tf.float32, tf.float64])
def test_many_indices_on_the_last_axis(dt):
    g, T, x0, W, st = _rnn_batch1(4, dt)
    rng = np.random.default_rng(3)
    iv = rng.integers(0, 4, 300).astype(np.int32)
    c = rng.standard_normal(300).astype(dt.np)
    with g.as_default():
        idx = tf1.placeholder(tf.int32, [300])
        y = tf.gather(st, idx, axis=2)
        (gst,) = tf.gradients(tf.reduce_sum(y * c), [st])
    x0v = np.linspace(-1, 1, 4)[None].astype(dt.np)
    out = _run_all_trips(g, [gst], {t: {T: t, x0: x0v, idx: iv} for t in TRIPS}, dt)
    for t, (gv,) in out.items():
        want = np.zeros((t, 1, 4), dt.np)
        np.add.at(want, (slice(None), slice(None), iv), np.broadcast_to(c, (t, 1, 300)))
        np.testing.assert_array_equal(gv, want)
