"""tf.compat.v1.Session: construction, lifecycle, fetch structures, feeds and
their errors, in both execution modes."""
import collections

import numpy as np
import pytest

import jitgrad as tf

pytestmark = pytest.mark.usefixtures("graph_mode")

Pair = collections.namedtuple("Pair", "first second")


@pytest.fixture
def graph():
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 2], name="x")
        c = tf.constant(3.0, name="c")
        y = tf.reduce_sum(x * c, name="y")
        z = tf.identity(x * 2.0, name="z")
        n = tf.constant([1, 2], name="n")
    return g, x, c, y, z, n


def test_constructors_and_modes(graph, graph_mode):
    g, x, c, y, z, n = graph
    for sess in (tf.compat.v1.Session(graph=g), tf.Session(graph=g), tf.compat.v1.Session(None, graph=g),
                 tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto())):
        assert sess.graph is g
        assert sess.mode == graph_mode
        assert sess.run(c) == 3.0
    for mode in ("interpret", "compiled"):
        sess = tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto(jitgrad_mode=mode))
        assert sess.mode == mode and sess.run(c) == 3.0
    with pytest.raises(ValueError):
        tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto(jitgrad_mode="fast"))
    with pytest.raises(TypeError):
        tf.compat.v1.Session(graph="not a graph")
    with g.as_default():
        assert tf.compat.v1.Session().graph is g  # graph=None: the default graph


def test_context_manager_close_and_default_session(graph):
    g, x, c, y, z, n = graph
    with tf.compat.v1.Session(graph=g) as sess:
        assert tf.compat.v1.get_default_session() is sess
        assert tf.compat.v1.get_default_graph() is g
        assert c.eval() == 3.0
        assert sess.run(c) == 3.0
    assert sess.closed
    assert tf.compat.v1.get_default_session() is None
    with pytest.raises(RuntimeError):
        sess.run(c)
    s2 = tf.compat.v1.Session(graph=g)
    s2.close()
    s2.close()  # closing twice is fine
    with pytest.raises(RuntimeError):
        s2.run(c)
    with pytest.raises(ValueError):
        c.eval()  # no default session


def test_fetch_structures(graph):
    g, x, c, y, z, n = graph
    sess = tf.compat.v1.Session(graph=g)
    feed = {x: [[1.0, 2.0]]}
    assert sess.run(y, feed) == 9.0
    assert isinstance(sess.run(y, feed), np.float32)  # 0-d results are numpy scalars
    assert isinstance(sess.run(n), np.ndarray)
    r = sess.run([y, (c, [z]), {"a": n, "b": (y,)}, Pair(c, {"k": [y, c]})], feed)
    assert isinstance(r, list) and isinstance(r[1], tuple) and isinstance(r[1][1], list)
    assert r[0] == 9.0 and r[1][0] == 3.0
    np.testing.assert_array_equal(r[1][1][0], [[2.0, 4.0]])
    assert set(r[2]) == {"a", "b"} and isinstance(r[2]["b"], tuple)
    np.testing.assert_array_equal(r[2]["a"], [1, 2])
    assert isinstance(r[3], Pair) and r[3].first == 3.0 and r[3].second == {"k": [9.0, 3.0]}
    od = sess.run(collections.OrderedDict([("z", y), ("a", c)]), feed)
    assert isinstance(od, collections.OrderedDict) and list(od) == ["z", "a"]
    assert sess.run([], feed) == [] and sess.run((), feed) == () and sess.run({}) == {}
    # names and operations
    assert sess.run("y:0", feed) == 9.0
    assert sess.run(["c:0", "n:0"])[0] == 3.0
    assert sess.run(y.op, feed) is None
    assert sess.run("y", feed) is None  # an operation name fetches the operation
    assert sess.run([y.op, y], feed) == [None, 9.0]
    # the same tensor twice
    assert sess.run([y, y], feed) == [9.0, 9.0]


def test_fetch_errors(graph):
    g, x, c, y, z, n = graph
    sess = tf.compat.v1.Session(graph=g)
    with pytest.raises(TypeError):
        sess.run(None)
    with pytest.raises(TypeError):
        sess.run([c, None])
    with pytest.raises(TypeError):
        sess.run(3.0)
    with pytest.raises((ValueError, KeyError)):
        sess.run("missing:0")
    with tf.Graph().as_default():
        other = tf.constant(1.0)
    with pytest.raises(ValueError):
        sess.run(other)


def test_feeds(graph):
    g, x, c, y, z, n = graph
    sess = tf.compat.v1.Session(graph=g)
    xv = np.array([[1.0, 2.0], [3.0, 4.0]])
    # any tensor can be fed, not only placeholders
    assert sess.run(y, {x: xv, c: 1.0}) == 10.0
    np.testing.assert_array_equal(sess.run(z, {z: [[7.0, 8.0]]}), [[7.0, 8.0]])  # x not needed then
    assert sess.run(y, {"x:0": xv}) == 30.0  # feed keys may be names
    assert sess.run(y, {x: xv.tolist()}) == 30.0
    assert sess.run(y, {x: xv.astype(np.float32)}) == 30.0
    np.testing.assert_array_equal(sess.run(n * 2, {n: np.array([5, 6], np.int64)}), [10, 12])


def test_feed_errors(graph):
    g, x, c, y, z, n = graph
    sess = tf.compat.v1.Session(graph=g)
    with pytest.raises(ValueError) as e:
        sess.run(y, {x: np.ones((2, 3))})
    msg = str(e.value)
    assert "x:0" in msg and "(2, 3)" in msg and "(None, 2)" in msg
    with pytest.raises(ValueError) as e:
        sess.run(y, {x: np.ones(2)})
    assert "x:0" in str(e.value)
    with pytest.raises(ValueError) as e:
        sess.run(y, {c: [1.0, 2.0]})
    assert "c:0" in str(e.value) and "(2,)" in str(e.value) and "()" in str(e.value)
    # float values for an int32 tensor are cast as numpy casts them (TF 2.21's Session gives [1 2])
    np.testing.assert_array_equal(sess.run(n, {n: [1.5, 2.5]}), np.array([1, 2], np.int32))
    with pytest.raises(ValueError):
        sess.run(y, {x: [["a", "b"]]})
    with pytest.raises(tf.errors.InvalidArgumentError) as e:
        sess.run(y)  # the placeholder is not fed
    assert "x" in str(e.value)
    with pytest.raises(TypeError):
        sess.run(y, {x: None})
    with pytest.raises(TypeError):
        sess.run(y, {x: c})  # a tensor is not a feed value
    with pytest.raises(TypeError):
        sess.run(y, {y.op: 1.0})


def test_feeding_an_intermediate_tensor_cuts_the_graph():
    g = tf.Graph()
    with g.as_default():
        p = tf.compat.v1.placeholder(tf.float32, [2])
        h = p * 2.0
        y = h + 1.0
    sess = tf.compat.v1.Session(graph=g)
    np.testing.assert_array_equal(sess.run(y, {h: [10.0, 20.0]}), [11.0, 21.0])  # p need not be fed


def test_results_are_fresh_arrays_and_runs_are_repeatable():
    g = tf.Graph()
    with g.as_default():
        p = tf.compat.v1.placeholder(tf.float64, [None])
        y = tf.exp(p) * 2.0
    sess = tf.compat.v1.Session(graph=g)
    a = sess.run(y, {p: [0.0, 1.0]})
    b = sess.run(y, {p: [0.0, 1.0, 2.0]})
    a_copy = a.copy()
    sess.run(y, {p: [5.0, 5.0]})
    np.testing.assert_array_equal(a, a_copy)
    np.testing.assert_allclose(b, 2 * np.exp([0.0, 1.0, 2.0]))


def test_tf1_style_default_graph_session():
    tf.compat.v1.disable_eager_execution()
    try:
        a = tf.constant(2.0)
        b = a * a
        assert b.graph is tf.compat.v1.get_default_graph()
        with tf.compat.v1.Session() as sess:
            assert sess.run(b) == 4.0
        tf.compat.v1.reset_default_graph()
        assert tf.compat.v1.get_default_graph() is not b.graph
    finally:
        tf.compat.v1.enable_eager_execution()


def test_fetching_a_fed_tensor_returns_a_copy():
    g = tf.Graph()
    with g.as_default():
        p = tf.compat.v1.placeholder(tf.float32, [2])
        y = p * 2.0
    sess = tf.compat.v1.Session(graph=g)
    a = np.ones(2, np.float32)
    for _ in range(2):  # the second run takes the session's validated-feed fast path
        r, ry = sess.run([p, y], {p: a})
        assert not np.shares_memory(r, a)
        np.testing.assert_array_equal(ry, [2.0, 2.0])


def test_dict_fetches_keep_their_key_order_and_nested_tuple_feed_keys(graph):
    """Fetch dicts come back with their own key order whatever nest visits first; a feed
    key may be a nested tuple of tensors fed with a value of the same structure (TF flattens
    feed_dict with nest.flatten_dict_items)."""
    g, x, c, y, z, n = graph
    sess = tf.compat.v1.Session(graph=g)
    xv = np.array([[1.0, 2.0]], np.float32)
    r = sess.run({"z": z, "b": [c, y.op], "a": n}, {x: xv})
    assert list(r) == ["z", "b", "a"] and r["b"][1] is None and r["b"][0] == 3.0
    np.testing.assert_array_equal(r["z"], xv * 2)
    np.testing.assert_array_equal(r["a"], [1, 2])
    # (x, (c,)) fed with (xv, (1.0,)): sum(x * c) = 3.0
    assert sess.run(y, {(x, (c,)): (xv, (1.0,))}) == 3.0
    with pytest.raises(ValueError):
        sess.run(y, {(x, c): (xv,)})
    with pytest.raises(ValueError):
        sess.run(y, {(x, c): (xv, 1.0), x: xv})     # x fed twice
