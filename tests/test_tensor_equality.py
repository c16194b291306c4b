"""TF 2's `==` / hash rules (TF's tensor.py / math_ops.tensor_equals):
elementwise and unhashable for eager tensors and tensors of traced functions,
identity in TF1-style graphs and after disable_tensor_equality /
disable_v2_behavior; ref() everywhere; leaked function tensors are a TypeError."""
import numpy as np
import pytest

import jitgrad as tf


def _collatz_np(x):
    return np.where(x % 2 == 0, x // 2, 3 * x + 1)


def test_collatz_step_inside_function_is_elementwise(graph_mode):
    # Regression: `==` on a traced tensor compared identity, so tf.where took the else branch.
    @tf.function
    def step(x):
        return tf.where(x % 2 == 0, x // 2, 3 * x + 1)

    x = np.array([1, 2, 7, 10, 0, -4], np.int32)
    out = step(tf.constant(x))
    np.testing.assert_array_equal(out.numpy(), _collatz_np(x))
    assert step(tf.constant([1, 2])).numpy().tolist() == [4, 1]   # the example, as TF


def test_not_equal_and_eq_against_literal_inside_function(graph_mode):
    @tf.function
    def f(x, y):
        return x == y, x != y, x == 2.0, 3.0 != x

    x = np.array([1.0, 2.0, 3.0], np.float32)
    y = np.array([1.0, 0.0, 3.0], np.float32)
    eq, ne, eq2, ne3 = f(tf.constant(x), tf.constant(y))
    np.testing.assert_array_equal(eq.numpy(), x == y)
    np.testing.assert_array_equal(ne.numpy(), x != y)
    np.testing.assert_array_equal(eq2.numpy(), x == 2.0)
    np.testing.assert_array_equal(ne3.numpy(), x != 3.0)
    assert eq.dtype == tf.bool


def test_eager_equality_is_elementwise_with_tf_rules():
    a = tf.constant([1, 2, 3])
    np.testing.assert_array_equal((a == 2).numpy(), [False, True, False])
    np.testing.assert_array_equal((a != 2).numpy(), [True, False, True])
    np.testing.assert_array_equal((a == tf.constant([[1], [3]])).numpy(),
                                  np.array([1, 2, 3]) == np.array([[1], [3]]))
    # incompatible shapes: a scalar bool, not an error (incompatible_shape_error=False)
    r = a == tf.constant([1, 2])
    assert r.dtype == tf.bool and r.shape == () and bool(r) is False
    assert bool(a != tf.constant([1, 2])) is True
    assert (a == None) is False and (a != None) is True  # noqa: E711
    with pytest.raises(TypeError):
        a == 1.5            # TF: Cannot convert 1.5 to EagerTensor of dtype int32
    with pytest.raises(TypeError):
        a == "a"


def test_eager_tensors_and_variables_are_unhashable_but_refs_work():
    a, b = tf.constant([1.0]), tf.constant([1.0])
    with pytest.raises(TypeError, match=r"Tensor is unhashable. Instead, use tensor.ref\(\) as the key."):
        hash(a)
    with pytest.raises(TypeError):
        {a: 1}
    d = {a.ref(): "a", b.ref(): "b"}
    assert d[a.ref()] == "a" and d[b.experimental_ref()] == "b"
    assert a.ref().deref() is a and a.ref() != b.ref()
    v = tf.Variable(2.0)
    with pytest.raises(TypeError, match="Variable is unhashable"):
        hash(v)
    assert bool(v == 2.0) and not bool(v != 2.0)
    assert {v.ref()} == {v.ref()} and v.ref().deref() is v
    # `in` on a list compares identity first, as Python does; then elementwise like TF
    assert a in [a]
    with pytest.raises(ValueError):
        tf.constant([1, 2]) in [tf.constant([5, 6])]


def test_traced_tensors_are_unhashable_and_keyed_by_ref(graph_mode):
    seen = {}

    @tf.function
    def f(x):
        with pytest.raises(TypeError, match="Tensor is unhashable"):
            hash(x)
        y = x * 2.0
        d = {x.ref(): 1.0, y.ref(): 10.0}
        seen["eq_type"] = type(x == y)
        return x * d[x.ref()] + y * d[y.experimental_ref()]

    out = f(tf.constant([1.0, 2.0]))
    np.testing.assert_allclose(out.numpy(), [21.0, 42.0])
    assert seen["eq_type"] is tf.Tensor


def test_plain_graph_compares_and_hashes_by_identity(graph_mode):
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2])
        y = x * 3.0
        assert (x == x) is True and (x == y) is False and (x != y) is True
        assert (x == 1.0) is False          # identity, not an op
        assert hash(x) == id(x)
        assert x in [y, x] and {x: 1}[x] == 1
        v = tf.Variable(1.0)
        assert (v == v) is True and (v == 1.0) is False and hash(v) == id(v)
        assert not tf.compat.v1.executing_eagerly_outside_functions()

        @tf.function
        def h(t):                 # runs inline in the outer graph: identity semantics
            return t == 1.0
        assert h(x) is False
    with tf.compat.v1.Session(graph=g) as sess:
        np.testing.assert_allclose(sess.run(y, feed_dict={x: [1.0, 2.0]}), [3.0, 6.0])
    assert tf.compat.v1.executing_eagerly_outside_functions()


def test_disable_tensor_equality_restores_identity():
    a = tf.constant([1, 2])
    tf.compat.v1.disable_tensor_equality()
    try:
        assert (a == a) is True and (a == tf.constant([1, 2])) is False and (a != a) is False
        assert hash(a) == id(a)
        v = tf.Variable(1.0)
        assert (v == 1.0) is False and hash(v) == id(v)
    finally:
        tf.compat.v1.enable_tensor_equality()
    assert bool(tf.reduce_all(a == tf.constant([1, 2])))
    with pytest.raises(TypeError):
        hash(a)


def test_disable_v2_behavior_gives_tf1_graph_semantics():
    tf.compat.v1.disable_v2_behavior()
    try:
        assert not tf.executing_eagerly()
        x = tf.compat.v1.placeholder(tf.float32, [])
        y = x + 1.0
        assert (x == x) is True and (x == y) is False and {x: 1}[x] == 1
        with tf.compat.v1.Session() as sess:
            assert sess.run(y, {x: 2.0}) == 3.0
    finally:
        tf.compat.v1.enable_v2_behavior()
    assert tf.executing_eagerly()
    assert bool(tf.constant(1) == 1)


def test_tensor_leaked_from_a_function_is_out_of_scope():
    leaked = []

    @tf.function
    def f(x):
        leaked.append(x * 2.0)
        return x

    f(tf.constant(1.0))

    @tf.function
    def g(y):
        return y + leaked[0]

    with pytest.raises(TypeError, match="is out of scope and cannot be used here"):
        g(tf.constant(1.0))
    with pytest.raises(TypeError, match="is out of scope"):
        leaked[0] + 1.0
    with pytest.raises(TypeError, match="is out of scope"):
        tf.constant(1.0) * leaked[0]


def test_seed_style_graph_program_keeps_tensors_in_lists(graph_mode):
    # The seeds' TF1 programs: tensors in lists, tf.gradients returning lists, feed dicts.
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [])
        ys = [x ** 2, x ** 3]
        grads = tf.gradients(ys, [x, x])
        assert len(grads) == 2 and grads[0] is not None
    with tf.compat.v1.Session(graph=g) as sess:
        out = sess.run(grads, {x: 2.0})
    assert out == [2 * 2.0 + 3 * 4.0] * 2
