"""More ops on values of run-time rows (the stacked states of test_dynamic_rows_ops's
RNN, [T, ...] with T fed): each compiles (no fallback, one kernel for every T) and
agrees with numpy and the interpreter; bad input is TF's InvalidArgumentError in both
modes, checked inside the kernel."""
import numpy as np
import pytest

import jitgrad as tf
from test_differential import check_close, run_both
from test_dynamic_rows_ops import TRIPS, _compiles, _np_states, _rnn, _rnn_batch1, _run_all_trips

tf1 = tf.compat.v1


def _both_modes_raise(g, fetches, feed):
    for mode in ("compiled", "interpret"):
        s = tf1.Session(graph=g, config=tf1.ConfigProto(jitgrad_mode=mode))
        for fetch in fetches:
            with pytest.raises(tf.errors.InvalidArgumentError):
                s.run(fetch, feed)


@pytest.mark.parametrize("dt", [tf.float32, tf.float64])
def test_gradient_of_gather_on_an_inner_axis(dt):
    """d/dst sum(c * gather(st, idx, axis=2)), idx fed with repeats: per row, c's columns
    added at their indices (numpy's add.at); an index past the axis is an error."""
    g, T, x0, W, st = _rnn_batch1(4, dt)
    c = np.arange(1.0, 6.0)
    with g.as_default():
        idx = tf1.placeholder(tf.int32, [5])
        y = tf.gather(st, idx, axis=2)
        (gst,) = tf.gradients(tf.reduce_sum(y * c.astype(dt.np)), [st])
        (gx,) = tf.gradients(tf.reduce_sum(tf.sin(y)), [x0])
    iv = np.array([3, 0, 0, 2, 3], np.int32)
    x0v = np.linspace(-1, 1, 4)[None].astype(dt.np)
    out = _run_all_trips(g, [y, gst, gx], {t: {T: t, x0: x0v, idx: iv} for t in TRIPS}, dt)
    for t, (yv, gv, _) in out.items():
        want = np.zeros((t, 1, 4))
        np.add.at(want, (slice(None), slice(None), iv), np.broadcast_to(c, (t, 1, 5)))
        np.testing.assert_array_equal(gv, want.astype(dt.np))
        np.testing.assert_allclose(yv, _np_states(W, x0v[0], t)[:, None, iv], rtol=2e-5, atol=2e-5)
    _both_modes_raise(g, [gst], {T: 3, x0: x0v, idx: np.array([0, 1, 4, 0, 0], np.int32)})
    _both_modes_raise(g, [gst], {T: 3, x0: x0v, idx: np.array([0, -1, 2, 0, 0], np.int32)})
