"""SetRow (ops/row_store.py): TF's TensorListSetItem on a dense array, a staged
TensorArray's write. Values, the replaced row, the bounds error and the gradient in both
modes against numpy / hand derivation; a while_loop that only writes an array's rows keeps
it in one buffer (codegen/lower_row_store.in_place_vars) with the interpreter's values."""
import numpy as np
import pytest

import jitgrad as tf
import jitgrad.codegen.lower_control as lower_control
from jitgrad import cache, compiler
from jitgrad.ops.registry import apply_op

tf1 = tf.compat.v1
IAE = tf.errors.InvalidArgumentError
pytestmark = pytest.mark.usefixtures("graph_mode")
compiled = pytest.mark.usefixtures("no_fallback")
RNG = np.random.default_rng(7)
BUF = RNG.standard_normal((4, 3)).astype(np.float32)
VAL = RNG.standard_normal(3).astype(np.float32)


def _graph():
    buf = tf1.placeholder(tf.float32, [4, 3])
    k = tf1.placeholder(tf.int32, [])
    val = tf1.placeholder(tf.float32, [3])
    new, old = apply_op("SetRow", [buf, k, val], {})
    return buf, k, val, new, old


@compiled
@pytest.mark.parametrize("k", [0, 2, 3])
def test_row_replaced_and_old_row_returned(k):
    with tf.Graph().as_default():
        buf, kk, val, new, old = _graph()
        got_new, got_old = tf1.Session().run([new, old], {buf: BUF, kk: k, val: VAL})
    want = BUF.copy()
    want[k] = VAL
    np.testing.assert_array_equal(got_new, want)
    np.testing.assert_array_equal(got_old, BUF[k])


@compiled
@pytest.mark.parametrize("k", [4, -1, 1000])
def test_index_out_of_range_is_tfs_modify_error(k):
    with tf.Graph().as_default():
        buf, kk, val, new, old = _graph()
        with pytest.raises(IAE, match=f"Trying to modify element {k} in a list with 4 elements."):
            tf1.Session().run([new, old], {buf: BUF, kk: k, val: VAL})


@compiled
def test_gradient_by_hand():
    # loss = <W0, new> + <W1, old>: d buf = W0 with row k := W1 (row k reaches new only
    # through old), d val = W0[k]; a second SetRow's gradient (of the gradient) likewise
    W0 = RNG.standard_normal((4, 3)).astype(np.float32)
    W1 = RNG.standard_normal(3).astype(np.float32)
    with tf.Graph().as_default():
        buf, kk, val, new, old = _graph()
        loss = tf.reduce_sum(new * W0) + tf.reduce_sum(old * W1)
        d_buf, d_val = tf.gradients(loss, [buf, val])
        got = tf1.Session().run([d_buf, d_val], {buf: BUF, kk: 1, val: VAL})
    want = W0.copy()
    want[1] = W1
    np.testing.assert_array_equal(got[0], want)
    np.testing.assert_array_equal(got[1], W0[1])


def _reverse_loop(n, rows=None):
    """ta (size n, static) written at n-1-i with x * (i + 1) for i < T fed; the loss
    weights row r by r + 1. Returns (T, x, [stack, loss, d loss / d x])."""
    T = tf1.placeholder(tf.int32, [])
    x = tf1.placeholder(tf.float32, [3])
    ta = tf.TensorArray(tf.float32, size=n)

    def body(i, ta):
        return i + 1, ta.write(n - 1 - i, x * tf.cast(i + 1, tf.float32))
    _, ta = tf.while_loop(lambda i, ta: i < T, body, [0, ta])
    st = ta.stack()
    loss = tf.reduce_sum(st * st * np.arange(1, n + 1, dtype=np.float32)[:, None])
    return T, x, [st, loss, tf.gradients(loss, x)[0]]


@pytest.fixture
def in_place_seen(monkeypatch):
    """The loop variables lower_while kept in one buffer, per loop compiled (no cache hits)."""
    seen = []
    real = lower_control.in_place_vars

    def spy(body, n):
        out = real(body, n)
        seen.append(out)
        return out
    monkeypatch.setattr(lower_control, "in_place_vars", spy)
    cache.set_enabled(False)
    compiler.clear_cache()
    yield seen
    cache.set_enabled(None)


@compiled
@pytest.mark.parametrize("t", [0, 1, 4, 7])
def test_loop_writing_rows_in_place_matches_numpy(t, graph_mode, in_place_seen):
    n, X = 7, np.array([1.0, -2.0, 0.5], np.float32)
    with tf.Graph().as_default():
        T, x, out = _reverse_loop(n)
        st, loss, g = tf1.Session().run(out, {T: t, x: X})
    want = np.zeros((n, 3), np.float32)
    for i in range(t):
        want[n - 1 - i] = X * (i + 1)
    np.testing.assert_array_equal(st, want)
    # row n-1-i = x (i + 1), weight n - i: loss = sum_i (n - i)(i + 1)^2 |x|^2
    c = sum((n - i) * (i + 1) ** 2 for i in range(t))
    np.testing.assert_allclose(loss, c * np.sum(X * X), rtol=1e-6)
    np.testing.assert_allclose(g, 2 * c * X, rtol=1e-6)
    if graph_mode == "compiled":   # the forward loop's array and the gradient loop's (one var each)
        assert [len(s) for s in in_place_seen if s] and sum(len(s) for s in in_place_seen) >= 2


@compiled
def test_loop_write_past_the_end_fails_without_writing():
    with tf.Graph().as_default():
        T, x, out = _reverse_loop(3)
        with pytest.raises(IAE, match="Trying to modify element -1 in a list with 3 elements."):
            tf1.Session().run(out, {T: 4, x: np.ones(3, np.float32)})


@compiled
def test_runs_are_bit_identical():
    X = RNG.standard_normal(3).astype(np.float32)
    with tf.Graph().as_default():
        T, x, out = _reverse_loop(50)
        s = tf1.Session()
        first = s.run(out, {T: 37, x: X})
        for _ in range(3):
            again = s.run(out, {T: 37, x: X})
            for a, b in zip(first, again):
                assert np.asarray(a).tobytes() == np.asarray(b).tobytes()


@compiled
def test_second_order_gradient_by_hand():
    # loss = sum(W0 * new^2): d val = 2 W0[k] val; d/d val of sum(C * d val) = 2 W0[k] C
    W0 = RNG.standard_normal((4, 3)).astype(np.float32)
    C = RNG.standard_normal(3).astype(np.float32)
    with tf.Graph().as_default():
        buf, kk, val, new, old = _graph()
        (d_val,) = tf.gradients(tf.reduce_sum(W0 * new * new), [val])
        (dd_val,) = tf.gradients(tf.reduce_sum(C * d_val), [val])
        got = tf1.Session().run([d_val, dd_val], {buf: BUF, kk: 2, val: VAL})
    np.testing.assert_allclose(got[0], 2 * W0[2] * VAL, rtol=1e-6)
    np.testing.assert_allclose(got[1], 2 * W0[2] * C, rtol=1e-6)
