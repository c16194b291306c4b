"""Graph-mode tf.TensorArray reached at indices known only when the graph runs: TF (2.x,
TensorList-backed) checks them when it runs, with InvalidArgumentError and its TensorList
messages; so does jitgrad, interpreted and compiled (no fallback), never at build, never a
crash or a wrong number. Expected messages and values are TF 2.21's for the same programs
(written down when this was built); values are derived by hand (rows written, zeros for
the rest, the later of two writes to one index)."""
import numpy as np
import pytest

import jitgrad as tf

tf1 = tf.compat.v1
pytestmark = pytest.mark.usefixtures("graph_mode", "no_fallback")
IAE = tf.errors.InvalidArgumentError


def _row(k):
    return tf.fill([2], float(k))


def _run(build, feeds):
    """build(i, n) -> fetch, in a fresh graph; runs it for each (i, n) of feeds: the
    results, or the InvalidArgumentError raised."""
    g = tf.Graph()
    with g.as_default():
        i = tf1.placeholder(tf.int32, [])
        n = tf1.placeholder(tf.int32, [])
        out = build(i, n)
        got = []
        with tf1.Session() as s:
            for fi, fn in feeds:
                try:
                    got.append(s.run(out, {i: fi, n: fn}))
                except IAE as e:
                    got.append(e)
        return got


def _full3(i, n):
    return tf.TensorArray(tf.float32, 3).write(0, _row(1)).write(1, _row(2)).write(2, _row(3))


def _assert_error(got, message):
    assert isinstance(got, IAE), got
    assert message in got.message


def test_read_out_of_range_and_negative():
    bad5, neg, ok = _run(lambda i, n: _full3(i, n).read(i), [(5, 0), (-1, 0), (2, 0)])
    _assert_error(bad5, "Trying to access element 5 in a list with 3 elements.")
    _assert_error(neg, "Trying to access element -1 in a list with 3 elements.")
    np.testing.assert_array_equal(ok, [3.0, 3.0])


def test_write_out_of_range_and_negative():
    bad, neg, ok = _run(lambda i, n: tf.TensorArray(tf.float32, 3).write(i, _row(1)).stack(), [(3, 0), (-1, 0), (1, 0)])
    _assert_error(bad, "Trying to modify element 3 in a list with 3 elements.")
    _assert_error(neg, "Trying to modify element -1 in a list with 3 elements.")
    np.testing.assert_array_equal(ok, [[0, 0], [1, 1], [0, 0]])


def test_writing_an_index_twice_keeps_the_later_value_and_unwritten_rows_read_as_zeros():
    (twice,) = _run(lambda i, n: tf.TensorArray(tf.float32, 3).write(i, _row(1)).write(1, _row(2)).stack(), [(1, 0)])
    np.testing.assert_array_equal(twice, [[0, 0], [2, 2], [0, 0]])
    (unwritten,) = _run(lambda i, n: tf.TensorArray(tf.float32, 3).write(0, _row(1)).read(i), [(2, 0)])
    np.testing.assert_array_equal(unwritten, [0, 0])
    (no_infer,) = _run(lambda i, n: tf.TensorArray(tf.float32, 3, infer_shape=False).write(0, _row(1)).read(i),
                       [(2, 0)])
    np.testing.assert_array_equal(no_infer, [0, 0])


def test_gather_out_of_range_and_negative():
    bad, neg, ok = _run(lambda i, n: _full3(i, n).gather(tf.stack([0, i])), [(3, 0), (-1, 0), (2, 0)])
    _assert_error(bad, "Trying to gather element 3 in a list with 3 elements.")
    _assert_error(neg, "Trying to gather element -1 in a list with 3 elements.")
    np.testing.assert_array_equal(ok, [[1, 1], [3, 3]])


def test_scatter_out_of_range_duplicate_and_length_mismatch():
    bad, dup, ok = _run(lambda i, n: tf.TensorArray(tf.float32, 3).scatter(tf.stack([0, i]),
                                                                           tf.constant([[1., 2.], [3., 4.]])).stack(),
                        [(3, 0), (0, 0), (2, 0)])
    _assert_error(bad, "Operation expected a list with 3 elements but got a list with 4 elements.")
    np.testing.assert_array_equal(dup, [[3, 4], [0, 0], [0, 0]])     # the later write to row 0
    np.testing.assert_array_equal(ok, [[1, 2], [0, 0], [3, 4]])
    mism, fits = _run(lambda i, n: tf.TensorArray(tf.float32, 3).scatter(tf.range(n), tf.ones([2, 2])).stack(),
                      [(0, 3), (0, 2)])
    _assert_error(mism, "Expected len(indices) == tensor.shape[0], but saw: 3 vs. 2")
    np.testing.assert_array_equal(fits, [[1, 1], [1, 1], [0, 0]])


def test_fed_size_array_read_and_write_out_of_range():
    r, w, ok = _run(lambda i, n: tf.TensorArray(tf.float32, n).write(0, _row(1)).read(i), [(4, 3), (3, 3), (0, 3)])
    _assert_error(r, "Trying to access element 4 in a list with 3 elements.")
    _assert_error(w, "Trying to access element 3 in a list with 3 elements.")
    np.testing.assert_array_equal(ok, [1, 1])
    (w,) = _run(lambda i, n: tf.TensorArray(tf.float32, n).write(i, _row(1)).stack(), [(4, 3)])
    _assert_error(w, "Trying to modify element 4 in a list with 3 elements.")


def test_unstack_of_a_run_time_length_into_a_fixed_size_array():
    g = tf.Graph()
    with g.as_default():
        v = tf1.placeholder(tf.float32, [None, 2])
        out = tf.TensorArray(tf.float32, 3).unstack(v * 2.0).stack()
        with tf1.Session() as s:
            with pytest.raises(IAE, match="Operation expected a list with 3 elements but got a list with 4 elements."):
                s.run(out, {v: np.ones((4, 2))})
            with pytest.raises(IAE, match="Operation expected a list with 3 elements but got a list with 2 elements."):
                s.run(out, {v: np.ones((2, 2))})
            x = np.arange(6, dtype=np.float32).reshape(3, 2)
            np.testing.assert_array_equal(s.run(out, {v: x}), 2 * x)


@pytest.mark.parametrize("no_fallback", [None])   # a dynamic array at a fed index: the interpreter, by design
def test_dynamic_array_grows_on_write_and_checks_reads(no_fallback):
    (grown,) = _run(lambda i, n: tf.TensorArray(tf.float32, 0, dynamic_size=True).write(i, _row(1)).stack(),
                    [(2, 0)])
    np.testing.assert_array_equal(grown, [[0, 0], [0, 0], [1, 1]])
    bad, neg = _run(lambda i, n: tf.TensorArray(tf.float32, 0, dynamic_size=True).write(0, _row(1)).read(i),
                    [(2, 0), (-1, 0)])
    _assert_error(bad, "Trying to access element 2 in a list with 1 elements.")
    _assert_error(neg, "Trying to access element -1 in a list with 1 elements.")
    (neg_write,) = _run(lambda i, n: tf.TensorArray(tf.float32, 0, dynamic_size=True).write(0, _row(1))
                        .write(i, _row(2)).stack(), [(-1, 0)])
    _assert_error(neg_write, "Trying to modify element -1 in a list with 1 elements.")   # (TF 2.21 crashes here)


def test_read_out_of_range_inside_a_while_loop_body():
    """The check runs in the compiled loop's region; its values reach the kernel's message."""
    def build(i, n):
        ta = _full3(i, n)

        def body(k, acc):
            return k + 1, acc + ta.read(i + k)
        return tf.while_loop(lambda k, acc: k < n, body, [0, tf.zeros([2])])[1]
    ok, bad = _run(build, [(0, 3), (1, 3)])
    np.testing.assert_array_equal(ok, [6, 6])
    _assert_error(bad, "Trying to access element 3 in a list with 3 elements.")


def test_writes_into_an_empty_array_inside_a_while_loop():
    """A write at a fed index into an array of 0 elements (fixed size 0, or a dynamic one
    written out of order whose preallocated length comes out 0: n - 2k, all negative) is
    TF's error. The write's result has no elements, so compiled code that computed the
    check only inside that result's loop never ran it and returned an empty array."""
    def build(dynamic):
        def loop(i, n):
            def body(k, ta):
                return k + 1, ta.write(n - 2 * k, _row(1))
            ta = tf.TensorArray(tf.float32, 0, dynamic_size=dynamic)
            return tf.while_loop(lambda k, ta: k < i, body, [0, ta])[1].stack()
        return loop
    fixed = _run(build(False), [(3, -1), (1, 5), (2, 1), (0, 5)])
    for got, k in zip(fixed, (-1, 5, 1)):
        _assert_error(got, f"Trying to modify element {k} in a list with 0 elements.")
    assert fixed[3].shape == (0, 2)
    neg, ok = _run(build(True), [(3, -1), (2, 5)])
    _assert_error(neg, "Trying to modify element -1 in a list with 0 elements.")
    np.testing.assert_array_equal(ok, [[0, 0], [0, 0], [0, 0], [1, 1], [0, 0], [1, 1]])


def test_gradient_through_run_time_writes_and_reads():
    g = tf.Graph()
    with g.as_default():
        i = tf1.placeholder(tf.int32, [])
        x = tf.constant([1.5, -2.0])
        ta = tf.TensorArray(tf.float32, 3).write(i, x * x).write(2, 3.0 * x)
        loss = tf.reduce_sum(ta.read(i)) + tf.reduce_sum(ta.stack())
        (gx,) = tf.gradients(loss, x)
        with tf1.Session() as s:
            # i = 0: loss = 2 sum(x^2) + 3 sum(x) -> 4x + 3
            np.testing.assert_allclose(s.run(gx, {i: 0}), 4 * np.array([1.5, -2.0]) + 3, rtol=1e-6)
            # i = 2: x * x is overwritten by 3x: loss = 6 sum(x) -> 6
            np.testing.assert_allclose(s.run(gx, {i: 2}), [6.0, 6.0], rtol=1e-6)
            with pytest.raises(IAE, match="Trying to modify element 7 in a list with 3 elements"):
                s.run(gx, {i: 7})


def test_gather_of_many_fed_indices_names_the_first_bad_one():
    """Enough indices to fill vector lanes: the message names the first failing index in
    order (a later lane or a later vector must not replace it), as TF's loop over them."""
    g = tf.Graph()
    with g.as_default():
        idx = tf1.placeholder(tf.int32, [None])
        out = _full3(None, None).gather(idx)
        with tf1.Session() as s:
            good = np.arange(40, dtype=np.int32) % 3
            np.testing.assert_array_equal(s.run(out, {idx: good})[:, 0], good + 1.0)
            for first, second in ((13, 17), (1, 2), (38, 39), (0, 31)):
                bad = good.copy()
                bad[first], bad[second] = 5 + first, -1
                with pytest.raises(IAE, match=f"Trying to gather element {5 + first} in a list with 3 elements"):
                    s.run(out, {idx: bad})
