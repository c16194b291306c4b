"""tf.Module: names and name scopes, variable/submodule tracking in TF's order,
with_name_scope; in eager, graph and function modes."""
import numpy as np
import pytest

import jitgrad as tf


class Dense(tf.Module):
    def __init__(self, w, b, name=None, trainable_bias=True):
        super().__init__(name=name)
        with self.name_scope:
            self.w = tf.Variable(np.asarray(w, np.float32), name="w")
            self.b = tf.Variable(np.asarray(b, np.float32), name="b", trainable=trainable_bias)

    @tf.Module.with_name_scope
    def __call__(self, x):
        return tf.nn.relu(tf.matmul(x, self.w) + self.b)


class MLP(tf.Module):
    def __init__(self, name=None):
        super().__init__(name=name)
        self.layers = [Dense([[1.0, -1.0], [2.0, 0.5]], [0.0, 0.1]),
                       Dense([[1.0], [-2.0]], [0.5], name="out", trainable_bias=False)]

    def __call__(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def _mlp_np(x):
    h = np.maximum(x @ np.array([[1.0, -1.0], [2.0, 0.5]]) + [0.0, 0.1], 0)
    return np.maximum(h @ np.array([[1.0], [-2.0]]) + 0.5, 0)


def test_default_names_and_validation():
    class MyDenseLayer(tf.Module):
        pass

    class HTTPServer2(tf.Module):
        pass
    assert MyDenseLayer().name == "my_dense_layer"
    assert HTTPServer2().name == "http_server2"
    assert tf.Module().name == "module" and tf.Module(name="m_1").name == "m_1"
    with pytest.raises(ValueError, match="is not a valid module name"):
        tf.Module(name="a b")


def test_tracks_variables_and_submodules_in_tf_order():
    m = MLP()
    assert m.name == "mlp" and m.name_scope.name == "mlp/"
    # own attributes sorted by name, then submodules depth first; b before w
    assert [v.name for v in m.variables] == ["dense/b:0", "dense/w:0", "out/b:0", "out/w:0"]
    assert [v.name for v in m.trainable_variables] == ["dense/b:0", "dense/w:0", "out/w:0"]
    assert [v.name for v in m.non_trainable_variables] == ["out/b:0"]
    assert m.submodules == tuple(m.layers)
    assert all(a is b for a, b in zip(m.trainable_variables, m.layers[0].trainable_variables))


def test_nested_containers_duplicates_and_cycles():
    m = tf.Module()
    v1, v2, v3 = tf.Variable(1.0, name="v1"), tf.Variable(2.0, name="v2"), tf.Variable(3.0, name="v3")
    m.z = {"b": v2, "a": [v1, (v3, 4)]}
    m.a = v2                       # seen again through m.z: listed once
    child = tf.Module(name="child")
    child.parent = m               # a cycle
    child.v = tf.Variable(5.0, name="cv")
    m.c = child
    assert [v.name for v in m.variables] == ["v2:0", "v1:0", "v3:0", "cv:0"]
    assert m.submodules == (child,)
    assert [v.name for v in child.variables] == ["cv:0", "v2:0", "v1:0", "v3:0"]


def test_eager_call_and_name_scopes():
    x = np.array([[1.0, 2.0], [-3.0, 1.0]], np.float32)
    with tf.name_scope("outer"):
        m = MLP()
    assert m.name_scope.name == "outer/mlp/"
    np.testing.assert_allclose(m(tf.constant(x)).numpy(), _mlp_np(x), rtol=1e-6)

    class Scoped(tf.Module):
        @tf.Module.with_name_scope
        def scope(self):
            with tf.name_scope("inner") as s:
                return s
    assert Scoped().scope() == "scoped/inner/"


def test_training_loop_in_function_matches_numpy(graph_mode):
    m = Dense([[0.5], [-0.25]], [0.0], name="lin")
    x = np.array([[1.0, 2.0], [3.0, -1.0], [0.5, 0.5]], np.float32)
    y = np.array([[1.0], [2.0], [0.0]], np.float32)

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((tf.matmul(x, m.w) + m.b - y) ** 2)
        grads = tape.gradient(loss, m.trainable_variables)
        for v, g in zip(m.trainable_variables, grads):
            v.assign_sub(0.1 * g)
        return loss

    w, b = np.array([[0.5], [-0.25]]), np.array([0.0])
    for _ in range(3):
        loss = step(tf.constant(x), tf.constant(y))
        r = x @ w + b - y
        np.testing.assert_allclose(float(loss), np.mean(r ** 2), rtol=1e-5)
        gw, gb = 2 * x.T @ r / len(x), 2 * r.sum(0) / len(x)
        b, w = b - 0.1 * gb, w - 0.1 * gw          # trainable_variables: b then w
    np.testing.assert_allclose(m.w.numpy(), w, rtol=1e-5)
    np.testing.assert_allclose(m.b.numpy(), b, rtol=1e-5)
    assert step.experimental_get_tracing_count() == 1


def test_variable_created_in_traced_method_gets_the_module_scope():
    class Lazy(tf.Module):
        @tf.function
        def __call__(self, x):
            if not hasattr(self, "v"):
                with self.name_scope:
                    self.v = tf.Variable(2.0, name="v")
            return x * self.v

    m = Lazy()
    assert float(m(tf.constant(3.0))) == 6.0
    assert m.v.name == "lazy/v:0" and m.trainable_variables == (m.v,)


def test_module_in_a_graph(graph_mode):
    g = tf.Graph()
    x = np.array([[1.0, 2.0], [-3.0, 1.0]], np.float32)
    with g.as_default():
        m = MLP()
        out = m(tf.constant(x))
        m2 = MLP()   # graph scopes are made unique (TF 2.21 prints the same names)
        assert [v.name for v in m.variables] == ["dense/b:0", "dense/w:0", "out/b:0", "out/w:0"]
        assert [v.name for v in m2.variables] == ["dense_1/b:0", "dense_1/w:0", "out_1/b:0", "out_1/w:0"]
        assert m2.name_scope.name == "mlp_1/"
        assert all(isinstance(v, tf.Variable) for v in m.trainable_variables)
        init = tf.compat.v1.global_variables_initializer()
    with tf.compat.v1.Session(graph=g) as sess:
        sess.run(init)
        np.testing.assert_allclose(sess.run(out), _mlp_np(x), rtol=1e-6)
