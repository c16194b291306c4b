"""A tf.while_loop's TensorArray whose elements differ in their first dimension
(``element_shape=[None]`` or ``infer_shape=False``; TF's TensorList holds any shapes):
carried as (values, lengths) (jitgrad/tensor_array_ragged.py). Expected values are
written in numpy here; gradients by hand: for loss = sum(c * c) each element of c that
is k * x[j] adds 2 k^2 x[j] to d/dx[j]."""
import numpy as np
import pytest

import jitgrad as tf

X = np.array([1.0, 2.0, 3.0], np.float32)


def _prefixes(x, order=lambda i: i):
    """Element order(i) = x[:i + 1] * (i + 1), i = 0, 1, 2, as the TensorArray holds them."""
    elems = [None] * 3
    for i in range(3):
        elems[order(i)] = x[:i + 1] * (i + 1)
    return elems


def _grad_of_sum_squares(x, order=lambda i: i):
    g = np.zeros_like(x)
    for i in range(3):
        g[:i + 1] += 2 * (i + 1) ** 2 * x[:i + 1]
    return g


def _ragged_loop(x, kind, order=lambda i: i):
    kw = dict(element_shape=tf.TensorShape([None])) if kind == "element_shape" else dict(infer_shape=False)
    ta = tf.TensorArray(tf.float32, size=3, **kw)

    def body(i, ta):
        return i + 1, ta.write(order(i), x[:i + 1] * tf.cast(i + 1, tf.float32))
    return tf.while_loop(lambda i, ta: i < 3, body, [0, ta])[1]


@pytest.mark.parametrize("mode", ["interpret", "compiled"])
@pytest.mark.parametrize("kind", ["element_shape", "infer_shape_false"])
def test_graph_concat_read_size_and_gradient(kind, mode):
    reverse = lambda i: 2 - i    # noqa: E731 (written last to first: the rows move)
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None])
        ta = _ragged_loop(x, kind)
        back = _ragged_loop(x, kind, reverse)
        c, cb, r = ta.concat(), back.concat(), back.read(1)
        assert c.shape.as_list() == [None] or c.shape.rank is None   # not the first element's rows
        grads = tf.gradients(tf.reduce_sum(c * c), x) + tf.gradients(tf.reduce_sum(cb * cb) + tf.reduce_sum(r), x)
    with tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto(jitgrad_mode=mode)) as s:
        got = s.run([c, cb, r, ta.size(), grads], {x: X})
    np.testing.assert_array_equal(got[0], np.concatenate(_prefixes(X)))
    np.testing.assert_array_equal(got[1], np.concatenate(_prefixes(X, reverse)))
    np.testing.assert_array_equal(got[2], X[:2] * 2)
    assert got[3] == 3
    want = _grad_of_sum_squares(X)
    np.testing.assert_allclose(got[4][0], want, rtol=1e-6)     # [28, 52, 54] (TF 2.21 too)
    np.testing.assert_allclose(got[4][1], want + np.array([1.0, 1.0, 0.0]) * 2, rtol=1e-6)


def test_function_tape_gradient_and_dynamic_size():
    @tf.function
    def f(x):
        with tf.GradientTape() as t:
            t.watch(x)
            c = _ragged_loop(x, "element_shape").concat()
            loss = tf.reduce_sum(c * c)
        return c, t.gradient(loss, x)

    c, g = f(tf.constant(X))
    np.testing.assert_array_equal(c.numpy(), np.concatenate(_prefixes(X)))
    np.testing.assert_allclose(g.numpy(), _grad_of_sum_squares(X), rtol=1e-6)

    @tf.function
    def grown(x):
        ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True, infer_shape=False)
        _, ta = tf.while_loop(lambda i, ta: i < 3,
                              lambda i, ta: (i + 1, ta.write(i, tf.fill([i + 1], tf.cast(i, tf.float32)) + x)),
                              [0, ta])
        return ta.concat(), ta.size()
    c, n = grown(tf.constant(0.5))
    np.testing.assert_array_equal(c.numpy(), [0.5, 1.5, 1.5, 2.5, 2.5, 2.5])
    assert n.numpy() == 3


def test_stack_of_equal_run_time_shapes_and_of_different_ones():
    """stack works when the elements, of shapes known only as the graph runs, agree; when
    they differ TF's TensorListStack fails the run (InvalidArgumentError)."""
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None])
        n = tf.compat.v1.placeholder(tf.int32, [])
        ta = tf.TensorArray(tf.float32, size=3, element_shape=tf.TensorShape([None]))
        _, ta = tf.while_loop(lambda i, ta: i < 3,
                              lambda i, ta: (i + 1, ta.write(i, x[:n] + tf.cast(i, tf.float32))), [0, ta])
        st = ta.stack()
        gs = tf.gradients(tf.reduce_sum(st * st), x)[0]
        ragged = _ragged_loop(x, "infer_shape_false").stack()
    with tf.compat.v1.Session(graph=g) as s:
        got_st, got_g = s.run([st, gs], {x: X, n: 2})
        want = np.stack([X[:2] + i for i in range(3)])
        np.testing.assert_array_equal(got_st, want)
        np.testing.assert_allclose(got_g, np.append(2 * want.sum(axis=0), 0.0), rtol=1e-6)   # [12, 18, 0]
        with pytest.raises(tf.errors.InvalidArgumentError):
            s.run(ragged, {x: X})


def test_uniform_elements_of_a_known_shape_still_compile():
    """Elements whose shape is known when the graph is built keep the dense form (one
    compiled kernel, no fallback)."""
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2])
        ta = tf.TensorArray(tf.float32, size=3, element_shape=tf.TensorShape([None]))
        _, ta = tf.while_loop(lambda i, ta: i < 3, lambda i, ta: (i + 1, ta.write(i, x * tf.cast(i, tf.float32))),
                              [0, ta])
        st = ta.stack()
    before = tf.cache_info()["fallbacks"]
    with tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto(jitgrad_mode="compiled")) as s:
        got = s.run(st, {x: [1.0, 2.0]})
    assert tf.cache_info()["fallbacks"] == before
    np.testing.assert_array_equal(got, [[0.0, 0.0], [1.0, 2.0], [2.0, 4.0]])
