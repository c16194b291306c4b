"""int8 / int16 / uint8 / uint16 arithmetic wraps around as TF's kernels and numpy do: no
promotion to a wider type, results modulo 2^bits. Expected values are numpy's (which wrap)
and hand-computed; eager, jitgrad.function and Session (interpreted and compiled) agree.
int32 / int64 run natively when compiled: their wraparound is checked against numpy too."""
import warnings

import numpy as np
import pytest

import jitgrad as tf

SMALL = [(tf.int8, np.int8), (tf.int16, np.int16), (tf.uint8, np.uint8), (tf.uint16, np.uint16)]


def _operands(np_dt):
    info = np.iinfo(np_dt)
    hi, lo = info.max, info.min
    x = np.array([hi, hi - 1, lo, lo + 1, hi // 2 + 1, 3], np_dt)
    y = np.array([hi, 2, lo if lo else 5, 7, hi // 2 + 1, 3], np_dt)
    return x, y


def _expected(x, y):
    with np.errstate(over="ignore"):
        return {"add": x + y, "sub": x - y, "mul": x * y, "square": x * x,
                "sum": np.sum(x, dtype=x.dtype), "cumsum": np.cumsum(x, dtype=x.dtype)}


def _compute(x, y):
    return {"add": x + y, "sub": x - y, "mul": x * y, "square": tf.square(x),
            "sum": tf.reduce_sum(x), "cumsum": tf.math.cumsum(x)}


def _check(got, want):
    for k in want:
        g = np.asarray(got[k])
        assert g.dtype == want[k].dtype, k            # no silent promotion
        np.testing.assert_array_equal(g, want[k], err_msg=k)


@pytest.mark.parametrize("tf_dt,np_dt", SMALL, ids=[d.name for d, _ in SMALL])
def test_wraps_eagerly(tf_dt, np_dt):
    x, y = _operands(np_dt)
    got = _compute(tf.constant(x), tf.constant(y))
    _check({k: v.numpy() for k, v in got.items()}, _expected(x, y))


@pytest.mark.parametrize("tf_dt,np_dt", SMALL, ids=[d.name for d, _ in SMALL])
def test_wraps_in_a_function(tf_dt, np_dt):
    x, y = _operands(np_dt)
    got = tf.function(_compute)(tf.constant(x), tf.constant(y))
    _check({k: v.numpy() for k, v in got.items()}, _expected(x, y))


@pytest.mark.usefixtures("graph_mode")
@pytest.mark.parametrize("tf_dt,np_dt", SMALL + [(tf.int32, np.int32), (tf.int64, np.int64)],
                         ids=[d.name for d, _ in SMALL] + ["int32", "int64"])
def test_wraps_in_a_session(tf_dt, np_dt):
    x, y = _operands(np_dt)
    g = tf.Graph()
    with g.as_default():
        px, py = tf.compat.v1.placeholder(tf_dt, [6]), tf.compat.v1.placeholder(tf_dt, [6])
        fetches = _compute(px, py)
        with tf.compat.v1.Session() as s:
            got = s.run(fetches, {px: x, py: y})
    _check(got, _expected(x, y))


def test_hand_computed_examples():
    assert (tf.constant([100], tf.int8) + tf.constant([100], tf.int8)).numpy().tolist() == [200 - 256]
    assert (tf.constant([3], tf.uint8) - tf.constant([5], tf.uint8)).numpy().tolist() == [254]
    assert (tf.constant([30000], tf.int16) * 2).numpy().tolist() == [60000 - 65536]
    assert tf.negative(tf.constant([-128], tf.int8)).numpy().tolist() == [-128]
    assert tf.abs(tf.constant([-128], tf.int8)).numpy().tolist() == [-128]
    assert tf.reduce_prod(tf.constant([100, 3], tf.int8)).numpy() == 300 - 256
    # Mean sums in int64 (TF's CASTING_SPECIALIZATION) and truncates toward zero
    assert tf.reduce_mean(tf.constant([100, 100], tf.int8)).numpy() == 100
    assert tf.reduce_mean(tf.constant([-7, 0, 0], tf.int8)).numpy() == -2


def test_min_floordiv_minus_one_wraps_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        q = tf.constant([-128, -7], tf.int8) // tf.constant([-1, 2], tf.int8)
        r = tf.constant([-128, -7], tf.int8) % tf.constant([-1, 2], tf.int8)
    assert q.numpy().tolist() == [-128, -4] and r.numpy().tolist() == [0, 1]


@pytest.mark.usefixtures("graph_mode")
def test_int32_min_floordiv_minus_one_in_a_session():
    # native code must not hit the x86 INT_MIN / -1 trap: numpy's -2^31 // -1 is -2^31
    g = tf.Graph()
    with g.as_default():
        px, py = tf.compat.v1.placeholder(tf.int32, [3]), tf.compat.v1.placeholder(tf.int32, [3])
        q, r = px // py, px % py
        with tf.compat.v1.Session() as s:
            got_q, got_r = s.run([q, r], {px: np.array([-2 ** 31, 7, -7], np.int32),
                                          py: np.array([-1, -2, 2], np.int32)})
    assert got_q.tolist() == [-2 ** 31, -4, -4] and got_r.tolist() == [0, -1, 1]
