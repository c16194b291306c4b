"""tf.map_fn / tf.scan / tf.foldl / tf.foldr over 0 rows, as TF 2.x (checked against
TF 2.21 when written):

* eager map_fn never calls fn and returns [0]-shaped results with fn_output_signature's
  structure and dtypes (elems' when not given), [0] + the spec's shape for a TensorSpec;
* eager scan with an initializer stacks nothing: [0] + the initializer's shape;
* without an initializer scan / foldl / foldr read the first (foldr: last) row: eagerly
  TF's TensorArray OutOfRangeError, in a graph InvalidArgumentError when it runs
  ("Trying to access element 0 in a list with 0 elements.", foldr: element -1), never
  when it is built, interpreted and compiled alike (no fallback), also inside a loop body;
* foldl / foldr with an initializer return it.
"""
import numpy as np
import pytest

import jitgrad as tf

tf1 = tf.compat.v1
EMPTY = np.zeros((0, 3), np.float32)
FIRST = "Trying to access element 0 in a list with 0 elements."
LAST = "Trying to access element -1 in a list with 0 elements."


def _shape_dtype(t):
    return tuple(t.shape.as_list()), t.dtype


# ---------------------------------------------------------------- eager
def test_eager_map_fn_over_zero_rows_does_not_call_fn_and_uses_elems_structure():
    calls = []

    def fn(r):
        calls.append(r)
        return r * 2.0
    out = tf.map_fn(fn, tf.zeros([0, 3]))
    assert calls == []
    assert _shape_dtype(out) == ((0,), tf.float32)        # TF: [0], not [0, 3] (fn never traced)
    a, b = tf.map_fn(lambda r: r[0] + r[1], (tf.zeros([0, 3]), tf.zeros([0, 2], tf.int32)))
    assert (_shape_dtype(a), _shape_dtype(b)) == (((0,), tf.float32), ((0,), tf.int32))


def test_eager_map_fn_over_zero_rows_follows_fn_output_signature():
    e = tf.zeros([0, 3])
    assert _shape_dtype(tf.map_fn(tf.reduce_sum, e, fn_output_signature=tf.float32)) == ((0,), tf.float32)
    out = tf.map_fn(lambda r: tf.cast(r, tf.int32), e, fn_output_signature=tf.int32)
    assert _shape_dtype(out) == ((0,), tf.int32)
    out = tf.map_fn(lambda r: r[:2], e, fn_output_signature=tf.TensorSpec([2], tf.float32))
    assert _shape_dtype(out) == ((0, 2), tf.float32)
    out = tf.map_fn(lambda r: (r, tf.cast(r, tf.int64)), e, dtype=(tf.float32, tf.int64))
    assert [_shape_dtype(t) for t in out] == [((0,), tf.float32), ((0,), tf.int64)]


def test_eager_scan_with_an_initializer_over_zero_rows_is_empty_shaped_as_it():
    for reverse in (False, True):
        out = tf.scan(lambda a, x: a + x, tf.zeros([0, 3]), initializer=tf.zeros([3]), reverse=reverse)
        assert _shape_dtype(out) == ((0, 3), tf.float32)
        assert out.numpy().shape == (0, 3)


def test_eager_scan_and_folds_without_an_initializer_raise_tfs_out_of_range():
    e = tf.zeros([0, 3])
    with pytest.raises(tf.errors.OutOfRangeError, match="Tried to read from index 0 but array size is: 0"):
        tf.scan(lambda a, x: a + x, e)
    with pytest.raises(tf.errors.OutOfRangeError, match="Tried to read from index 0 but array size is: 0"):
        tf.foldl(lambda a, x: a + x, e)
    with pytest.raises(tf.errors.OutOfRangeError, match=r"Reading from negative indices \(index -1\)"):
        tf.foldr(lambda a, x: a + x, e)


def test_eager_folds_with_an_initializer_over_zero_rows_return_it():
    init = np.array([1.0, -2.0, 3.5], np.float32)
    for fold in (tf.foldl, tf.foldr):
        np.testing.assert_array_equal(fold(lambda a, x: a * x, tf.zeros([0, 3]), initializer=init).numpy(), init)


# ---------------------------------------------------------------- graph: raise when it runs
pytestmark_graph = pytest.mark.usefixtures("graph_mode", "no_fallback")


@pytestmark_graph
def test_graph_map_fn_and_scan_with_initializer_over_fed_zero_rows():
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [None, 3])
        m = tf.map_fn(lambda r: r * 2.0, x)
        s = tf.scan(lambda a, r: a + r, x, initializer=tf.zeros([3]))
        f = tf.foldl(lambda a, r: a + r, x, initializer=tf.ones([3]))
        with tf1.Session() as sess:
            got = sess.run([m, s, f], {x: EMPTY})
            assert [v.shape for v in got] == [(0, 3), (0, 3), (3,)]
            np.testing.assert_array_equal(got[2], np.ones(3))
            v = np.arange(6, dtype=np.float32).reshape(2, 3)
            got = sess.run([m, s, f], {x: v})
            np.testing.assert_array_equal(got[0], 2 * v)
            np.testing.assert_array_equal(got[1], np.cumsum(v, 0))
            np.testing.assert_array_equal(got[2], 1 + v.sum(0))


@pytestmark_graph
@pytest.mark.parametrize("which", ["scan", "foldl", "foldr", "scan_reverse"])
def test_graph_no_initializer_over_fed_zero_rows_raises_when_it_runs(which):
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [None, 3])
        fn = lambda a, r: a * r + 1.0      # noqa: E731
        out = {"scan": lambda: tf.scan(fn, x), "foldl": lambda: tf.foldl(fn, x),
               "foldr": lambda: tf.foldr(fn, x), "scan_reverse": lambda: tf.scan(fn, x, reverse=True)}[which]()
        with tf1.Session() as sess:
            msg = LAST if which in ("foldr", "scan_reverse") else FIRST
            with pytest.raises(tf.errors.InvalidArgumentError, match=msg):
                sess.run(out, {x: EMPTY})
            v = np.array([[1, 2, 3], [0.5, -1, 2], [2, 2, -0.5]], np.float32)
            rows = v[::-1] if which in ("foldr", "scan_reverse") else v
            acc, trail = rows[0], [rows[0]]
            for r in rows[1:]:
                acc = acc * r + 1.0
                trail.append(acc)
            want = acc if which in ("foldl", "foldr") else np.array(trail[::-1] if which == "scan_reverse" else trail)
            np.testing.assert_allclose(sess.run(out, {x: v}), want, rtol=1e-6)


@pytestmark_graph
def test_graph_static_zero_rows_build_and_fail_when_run():
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [0, 3])
        fl = tf.foldl(lambda a, r: a + r, x)      # TF builds it; its run fails
        assert fl.shape.as_list() == [3]
        m = tf.map_fn(lambda r: r * 2.0, x)
        with tf1.Session() as sess:
            assert sess.run(m, {x: EMPTY}).shape == (0, 3)
            with pytest.raises(tf.errors.InvalidArgumentError, match=FIRST):
                sess.run(fl, {x: EMPTY})


@pytestmark_graph
def test_graph_fold_over_zero_rows_inside_a_loop_body_raises_tfs_message():
    """A foldl in a while_loop body whose rows are fed: the compiled check runs in the loop's
    region and hands its values up to the kernel's status words."""
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [None, 3])

        def body(i, acc):
            return i + 1, acc + tf.foldl(lambda a, r: a + r, x)
        _, acc = tf.while_loop(lambda i, acc: i < 2, body, [0, tf.zeros([3])])
        with tf1.Session() as sess:
            v = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
            np.testing.assert_array_equal(sess.run(acc, {x: v}), 2 * v.sum(0))
            with pytest.raises(tf.errors.InvalidArgumentError, match=FIRST):
                sess.run(acc, {x: EMPTY})
            np.testing.assert_array_equal(sess.run(acc, {x: v}), 2 * v.sum(0))   # and runs again after
