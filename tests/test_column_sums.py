"""Sums over leading dims with the last dim kept (lower_reduction.emit_reduce walks G
vectors of columns per pass over the rows): each column sums its rows in order in
float64, so the compiled float32 result is the float64 sum rounded once, whatever G
(8, 4, 2, 1 vectors) and with a scalar tail of columns; the interpreter agrees to
float32 rounding.  Also SumToShape, a broadcast bias's gradient (W3's db1)."""
import numpy as np
import pytest

import jitgrad as tf

MODES = ("compiled", "interpret")


def _run(mode, build, *arrays):
    g = tf.Graph()
    with g.as_default():
        ps = [tf.compat.v1.placeholder(tf.float32, a.shape) for a in arrays]
        out = build(*ps)
    cfg = tf.compat.v1.ConfigProto(jitgrad_mode=mode)
    with tf.compat.v1.Session(graph=g, config=cfg) as s:
        return s.run(out, dict(zip(ps, arrays)))


def _check(mode, got, want64):
    want = want64.astype(np.float32)
    if mode == "compiled":
        assert got.tobytes() == want.tobytes()
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


# last dim 512 (64 vectors: G = 8), 96 (G = 4), 48 (G = 2), 72 (9 vectors: G = 1),
# 67 (8 vectors and 3 scalar columns), 10 (one vector and 2)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape,axis", [((256, 512), 0), ((6, 96), 0), ((6, 48), 0), ((3, 40, 72), (0, 1)),
                                        ((5, 67), 0), ((7, 10), 0), ((2, 3, 64, 48), (0, 2))])
def test_column_sum_is_the_float64_sum_rounded_once(mode, shape, axis):
    x = np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)
    got = _run(mode, lambda p: tf.reduce_sum(p, axis=axis), x)
    _check(mode, got, x.astype(np.float64).sum(axis=axis))


@pytest.mark.parametrize("mode", MODES)
def test_bias_gradient_sums_the_columns(mode):
    # d/db sum(w * (x + b)) = the column sums of w, through SumToShape
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((2, 256, 512)).astype(np.float32)
    b = rng.standard_normal(512).astype(np.float32)
    got = _run(mode, lambda px, pw, pb: tf.gradients(tf.reduce_sum(pw * (px + pb)), pb)[0], x, w, b)
    _check(mode, got, w.astype(np.float64).sum(axis=0))
