"""tf.compat.v1.variable_scope / get_variable / the v1 initializers, in graphs run by a Session."""
import numpy as np
import pytest

import jitgrad as tf

v1 = tf.compat.v1


def _run(graph, fetches):
    with graph.as_default(), v1.Session() as s:
        s.run(v1.global_variables_initializer())
        return s.run(fetches)


def test_scopes_name_share_and_reuse_variables():
    g = tf.Graph()
    with g.as_default():
        with v1.variable_scope("layer"):
            w = v1.get_variable("w", [2, 3], initializer=v1.constant_initializer(0.5))
            b = v1.get_variable("b", [3], initializer=v1.zeros_initializer())
            y = tf.matmul(tf.ones([1, 2]), w) + b
        with v1.variable_scope("layer", reuse=True):
            assert v1.get_variable("w", [2, 3]) is w
        with v1.variable_scope("layer") as scope:
            scope.reuse_variables()
            assert v1.get_variable("w") is w
        with v1.variable_scope("auto", reuse=v1.AUTO_REUSE):
            a = v1.get_variable("a", [1], initializer=v1.ones_initializer())
            assert v1.get_variable("a", [1]) is a
        with v1.variable_scope("outer", reuse=True), v1.variable_scope("inner", reuse=False):
            assert v1.get_variable_scope().reuse is True          # reuse is inherited, False does not undo it
        blocks = []
        for value in (2.0, 3.0):
            with v1.variable_scope(None, default_name="blk"):
                blocks.append(v1.get_variable("c", [], initializer=v1.constant_initializer(value)))
        d = v1.get_variable("d", initializer=tf.constant([1.0, 2.0]))
        i = v1.get_variable("i", [2], dtype=tf.int32)                 # integers default to zeros
    assert [w.name, b.name, y.name, a.name] == ["layer/w:0", "layer/b:0", "layer/add:0", "auto/a:0"]
    assert [c.name for c in blocks] == ["blk/c:0", "blk_1/c:0"]
    got = _run(g, [y, a, blocks[0], blocks[1], d, i])
    np.testing.assert_array_equal(got[0], [[1.0, 1.0, 1.0]])       # ones(1, 2) @ 0.5 + 0
    assert [float(got[1][0]), float(got[2]), float(got[3])] == [1.0, 2.0, 3.0]
    np.testing.assert_array_equal(got[4], [1.0, 2.0])
    assert got[5].dtype == np.int32 and not got[5].any()


def test_get_variable_errors_as_tf1():
    with tf.Graph().as_default():
        with v1.variable_scope("s"):
            v1.get_variable("w", [2])
            with pytest.raises(ValueError, match="already exists, disallowed"):
                v1.get_variable("w", [2])
        with v1.variable_scope("s", reuse=True):
            with pytest.raises(ValueError, match="does not exist"):
                v1.get_variable("missing", [1])
            with pytest.raises(ValueError, match="Trying to share variable s/w"):
                v1.get_variable("w", [3])
        with pytest.raises(ValueError, match="do not specify shape"):
            v1.get_variable("c", [2], initializer=tf.constant([1.0, 2.0]))
        with pytest.raises(ValueError, match="must be fully defined"):
            v1.get_variable("e")
        with pytest.raises(TypeError, match="default_name"):
            v1.variable_scope(None)


def test_initializers_draw_their_distributions_and_regularizers_collect():
    g = tf.Graph()
    with g.as_default():
        tf.random.set_seed(3)
        glorot = v1.get_variable("glorot", [200, 300])                # TF 1's default initializer
        uniform = v1.get_variable("u", [10000], initializer=v1.random_uniform_initializer(-2.0, 3.0))
        normal = v1.get_variable("n", [10000], initializer=v1.random_normal_initializer(1.0, 2.0))
        with v1.variable_scope("reg", regularizer=lambda v: tf.reduce_sum(v * v)):
            v1.get_variable("r", [3], initializer=v1.ones_initializer())
        (penalty,) = g.get_collection("regularization_losses")
    glorot_v, uniform_v, normal_v, penalty_v = _run(g, [glorot, uniform, normal, penalty])
    limit = np.sqrt(6.0 / (200 + 300))
    assert np.abs(glorot_v).max() <= limit and np.abs(glorot_v).max() > 0.95 * limit
    assert uniform_v.min() >= -2.0 and uniform_v.max() < 3.0 and abs(uniform_v.mean() - 0.5) < 0.05
    assert abs(normal_v.mean() - 1.0) < 0.06 and abs(normal_v.std() - 2.0) < 0.06
    assert penalty_v == 3.0
