"""A dynamic-size TensorArray that a tf.while_loop body writes in order - ``write(i, v)``
or ``scatter`` of a static row count at indices affine in the loop counter - is carried
as appends to a growing buffer (staged_tensor_array.check_appends proves the order,
passes/growing_vars.py keeps the buffer) and compiles with its gradient: no fallback,
one kernel for any trip count. Where the proof needs an entry value known only at run
time (a fed counter start, fed initial rows) the loop's entry checks it, and a run that
breaks it fails with InvalidArgumentError rather than a wrong number. Expected values
are the same recurrence in numpy (float64); gradients are central finite differences
of that numpy loss."""
import numpy as np
import pytest

import jitgrad as tf

tf1 = tf.compat.v1
pytestmark = pytest.mark.usefixtures("graph_mode", "no_fallback")
D = 3
W = np.array([[0.5, -0.2, 0.1], [0.3, 0.4, -0.6], [-0.1, 0.2, 0.7]])
X0 = np.array([0.3, -0.8, 0.5])


def _np_rows(x0, steps, per_step):
    x, rows = np.array(x0, np.float64), []
    for _ in range(steps):
        x = np.tanh(W @ x + 0.1)
        rows += [x, x * x][:per_step]
    return np.array(rows).reshape(-1, D)


def _np_grad(steps, per_step, eps=1e-6):
    def loss(x0):
        r = _np_rows(x0, steps, per_step)
        return float(np.sum(r * r))
    return np.array([(loss(X0 + eps * e) - loss(X0 - eps * e)) / (2 * eps) for e in np.eye(D)])


def _program(store, start=0):
    n = tf1.placeholder(tf.int32, [])
    x0 = tf1.placeholder(tf.float64, [D])
    Wc = tf.constant(W)
    ta = tf.TensorArray(tf.float64, size=0, dynamic_size=True)

    def body(i, x, ta):
        x = tf.tanh(tf.linalg.matvec(Wc, x) + 0.1)
        return i + 1, x, store(ta, i, x)
    _, _, ta = tf.while_loop(lambda i, x, ta: i < n + start, body, [start, x0, ta])
    st = ta.stack()
    loss = tf.reduce_sum(st * st)
    return n, x0, st, loss, tf.gradients(loss, x0)[0]


STORES = {
    "scatter_range_2": (lambda ta, i, x: ta.scatter(tf.range(2 * i, 2 * i + 2), tf.stack([x, x * x])), 2),
    "scatter_stack_2": (lambda ta, i, x: ta.scatter(tf.stack([2 * i, 2 * i + 1]), tf.stack([x, x * x])), 2),
    "scatter_one": (lambda ta, i, x: ta.scatter(tf.reshape(i, [1]), tf.reshape(x, [1, D])), 1),
    "two_writes": (lambda ta, i, x: ta.write(2 * i, x).write(2 * i + 1, x * x), 2),
}


@pytest.mark.parametrize("store", sorted(STORES))
def test_in_order_scatters_and_writes_compile_with_their_gradient(store):
    fn, per_step = STORES[store]
    g = tf.Graph()
    with g.as_default():
        n, x0, st, loss, gx = _program(fn)
        with tf1.Session() as s:
            for steps in (0, 1, 7):
                got_st, got_loss, got_gx = s.run([st, loss, gx], {n: steps, x0: X0})
                want = _np_rows(X0, steps, per_step)
                np.testing.assert_allclose(got_st, want, rtol=1e-12, atol=1e-14)
                np.testing.assert_allclose(got_loss, np.sum(want * want), rtol=1e-12)
                np.testing.assert_allclose(got_gx, _np_grad(steps, per_step), rtol=1e-6, atol=1e-9)


def test_one_kernel_for_any_trip_count():
    fn, _ = STORES["scatter_range_2"]
    g = tf.Graph()
    with g.as_default():
        n, x0, st, loss, gx = _program(fn)
        with tf1.Session() as s:
            s.run([loss, gx], {n: 2, x0: X0})
            before = tf.cache_info()["compiles"]
            for steps in (3, 11, 40):
                s.run([loss, gx], {n: steps, x0: X0})
            assert tf.cache_info()["compiles"] == before


def test_fed_counter_start_is_checked_when_the_loop_is_entered():
    """write(i, x) from a fed start lands at row 0 first only when start is 0: proved at
    entry, when it runs; a run from another start fails cleanly (not a wrong number)."""
    g = tf.Graph()
    with g.as_default():
        start = tf1.placeholder(tf.int32, [])
        n, x0, st, loss, gx = _program(lambda ta, i, x: ta.write(i, x), start=start)
        with tf1.Session() as s:
            got_st, got_gx = s.run([st, gx], {n: 5, start: 0, x0: X0})
            np.testing.assert_allclose(got_st, _np_rows(X0, 5, 1), rtol=1e-12)
            np.testing.assert_allclose(got_gx, _np_grad(5, 1), rtol=1e-6, atol=1e-9)
            with pytest.raises(tf.errors.InvalidArgumentError, match="first writes at index 2, but the array has "
                                                                     "0 elements"):
                s.run(st, {n: 3, start: 2, x0: X0})


def test_fed_initial_rows_then_appends_from_their_count():
    """An array unstacked from a fed value of unknown length, then written at a counter
    starting at that length: in order given the entry rows, checked when it runs."""
    g = tf.Graph()
    with g.as_default():
        first = tf1.placeholder(tf.float64, [None, D])
        x0 = tf1.placeholder(tf.float64, [D])
        n = tf1.placeholder(tf.int32, [])
        ta = tf.TensorArray(tf.float64, size=0, dynamic_size=True).unstack(first)
        rows0 = tf.shape(first)[0]

        def body(i, x, ta):
            x = tf.tanh(tf.linalg.matvec(tf.constant(W), x) + 0.1)
            return i + 1, x, ta.write(i, x)
        _, _, ta = tf.while_loop(lambda i, x, ta: i < rows0 + n, body, [rows0, x0, ta])
        st = ta.stack()
        with tf1.Session() as s:
            head = np.arange(2 * D, dtype=np.float64).reshape(2, D)
            got = s.run(st, {first: head, x0: X0, n: 4})
            np.testing.assert_allclose(got, np.concatenate([head, _np_rows(X0, 4, 1)]), rtol=1e-12)


@pytest.mark.parametrize("no_fallback", [None])    # not appends: the general form, which the interpreter runs
def test_writes_out_of_order_keep_the_general_form(no_fallback):
    g = tf.Graph()
    with g.as_default():
        n, x0, st, loss, gx = _program(lambda ta, i, x: ta.write(2 * i, x))   # every other row
        with tf1.Session() as s:
            got = s.run(st, {n: 3, x0: X0})
            want = np.zeros((5, D))
            want[::2] = _np_rows(X0, 3, 1)
            np.testing.assert_allclose(got, want, rtol=1e-12)
