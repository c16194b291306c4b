"""Differences from TF 2.21 found by bench/tf_fuzz.py in the round with seeds from 160000, and
open bugs fixed in that round. Each expected value is derived by hand or with numpy (said per
test); where TF's behaviour is the spec, what TF 2.21 does (run with /work/benchenv) is said too."""
import numpy as np
import pytest

import jitgrad as tf
from _graph_testing import run_default_graph as _run

graph_modes = pytest.mark.usefixtures("graph_mode", "no_fallback")


# ---------------------------------------------------------------- mirror pads of empty inputs
# TF's MirrorPadGrad kernel needs each axis of the incoming gradient (before + size + after) to
# be longer than its total paddings, so the gradient of a REFLECT / SYMMETRIC pad of an input
# with an empty axis fails when it runs (InvalidArgumentError "Total paddings must be less than
# the input dimension size: 0 was not less than 0"), though the SYMMETRIC pad itself runs (a
# pad of 0 <= 0 on the empty axis). jitgrad's pad is a composite of slices and a concat, whose
# gradient was an empty array. REFLECT's forward kernel already fails on an empty axis
# (0, 0 not less than 0), also with all paddings zero -- which jitgrad let through as an identity
# when the axis' size was known only at run time.
EMPTY_SYMMETRIC = [((0, 3), [[0, 0], [1, 1]]), ((2, 0), [[1, 1], [0, 0]]), ((0,), [[0, 0]]),
                   ((0, 3), [[0, 0], [0, 0]])]


@pytest.mark.parametrize("shape,pads", EMPTY_SYMMETRIC)
def test_eager_symmetric_pad_of_empty_input_runs_but_its_gradient_fails(shape, pads):
    x = tf.constant(np.zeros(shape, np.float32))
    want_shape = tuple(d + b + a for d, (b, a) in zip(shape, pads))
    assert tf.pad(x, pads, mode="SYMMETRIC").shape == want_shape
    with tf.GradientTape() as t:
        t.watch(x)
        y = tf.reduce_sum(tf.pad(x, pads, mode="SYMMETRIC"))
    with pytest.raises(tf.errors.InvalidArgumentError, match="Total paddings must be less than the input "
                                                             "dimension size: [0-9]+ was not less than"):
        t.gradient(y, x)


@graph_modes
@pytest.mark.parametrize("shape,pads", EMPTY_SYMMETRIC)
@pytest.mark.parametrize("known", [True, False])
def test_graph_symmetric_pad_gradient_of_empty_input_fails_when_run(shape, pads, known):
    """Static and run-time shapes alike: the pad runs (an empty result of the padded shape),
    the gradient fails when it runs, as TF's MirrorPadGrad does (not when it is built: a
    gradient never fetched says nothing)."""
    if not known and any(b or a for b, a in pads):
        with tf.Graph().as_default(), pytest.raises(NotImplementedError):   # README: documented
            tf.pad(tf.compat.v1.placeholder(tf.float32, [None] * len(shape)), pads, mode="SYMMETRIC")
        return
    with tf.Graph().as_default():
        p = tf.compat.v1.placeholder(tf.float32, shape if known else [None] * len(shape))
        y = tf.pad(p, pads, mode="SYMMETRIC")
        (g,) = tf.gradients(tf.reduce_sum(y), p)
        feed = {p: np.zeros(shape, np.float32)}
        assert _run(y, feed).shape == tuple(d + b + a for d, (b, a) in zip(shape, pads))
        with pytest.raises(tf.errors.InvalidArgumentError, match="Total paddings must be less than"):
            _run(g, feed)


@graph_modes
def test_graph_symmetric_pad_gradient_of_run_time_rows():
    """[None, 3] padded [[0, 0], [1, 1]]: 2 rows give each element's multiplicity as its
    gradient (by hand: the edge columns are copied once more, [2, 1, 2]); 0 rows fail."""
    with tf.Graph().as_default():
        p = tf.compat.v1.placeholder(tf.float32, [None, 3])
        (g,) = tf.gradients(tf.reduce_sum(tf.pad(p, [[0, 0], [1, 1]], mode="SYMMETRIC")), p)
        np.testing.assert_array_equal(_run(g, {p: np.ones((2, 3), np.float32)}), [[2, 1, 2], [2, 1, 2]])
        with pytest.raises(tf.errors.InvalidArgumentError, match="0 was not less than 0"):
            _run(g, {p: np.zeros((0, 3), np.float32)})


@graph_modes
def test_graph_reflect_pad_of_run_time_empty_axis_fails():
    """REFLECT with zero paddings on a [None, 3] input: TF's MirrorPad checks 0 < size on every
    axis, so 0 rows fail ("0, 0 not less than 0"), 2 rows are the input itself."""
    with tf.Graph().as_default():
        p = tf.compat.v1.placeholder(tf.float32, [None, 3])
        y = tf.pad(p, [[0, 0], [0, 0]], mode="REFLECT")
        x = np.arange(6, dtype=np.float32).reshape(2, 3)
        np.testing.assert_array_equal(_run(y, {p: x}), x)
        with pytest.raises(tf.errors.InvalidArgumentError, match="paddings must be less than the dimension "
                                                                 "size: 0, 0 not less than 0"):
            _run(y, {p: np.zeros((0, 3), np.float32)})


def test_symmetric_pad_gradients_of_non_empty_inputs_are_unchanged():
    """x = [1, 2, 3] padded [[2, 1]] SYMMETRIC is [2, 1, 1, 2, 3, 3]: by hand, the weights
    [1, 2, 3, 4, 5, 6] give x[0] 2 + 3, x[1] 1 + 4, x[2] 5 + 6; the second derivative of the
    linear pad is 0."""
    x = tf.Variable([1.0, 2.0, 3.0])
    with tf.GradientTape() as outer:
        with tf.GradientTape() as inner:
            y = tf.pad(x, [[2, 1]], mode="SYMMETRIC")
            loss = tf.reduce_sum(y * [1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
        g = inner.gradient(loss, x)
        s = tf.reduce_sum(g * g)
    np.testing.assert_array_equal(y.numpy(), [2, 1, 1, 2, 3, 3])
    np.testing.assert_array_equal(g.numpy(), [5, 5, 11])
    assert outer.gradient(s, x) is None      # g does not depend on x (TF: None too)


@graph_modes
def test_graph_hessian_through_reflect_pad_of_run_time_size():
    """loss = sum(pad(x, 0, REFLECT)^2 * sin(x)) = sum(x^2 sin x) on a [None] input: the check
    op sits on the Hessian's row loop. By hand, d2/dx2 (x^2 sin x) = 2 sin x + 4 x cos x - x^2 sin x
    on the diagonal, 0 elsewhere."""
    x = np.array([1.0, 2.0], np.float32)
    want = np.diag(2 * np.sin(x) + 4 * x * np.cos(x) - x * x * np.sin(x))
    with tf.Graph().as_default():
        p = tf.compat.v1.placeholder(tf.float32, [None])
        loss = tf.reduce_sum(tf.square(tf.pad(p, [[0, 0]], mode="REFLECT")) * tf.sin(p))
        (h,) = tf.hessians(loss, p)
        np.testing.assert_allclose(_run(h, {p: x}), want, rtol=1e-5, atol=1e-6)
