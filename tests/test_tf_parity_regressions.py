"""Differences from TF 2.21 found by running the same code through both (stop 9 review);
expected values are TF's, derived by hand below."""
import numpy as np
import pytest

import jitgrad as tf

graph_modes = pytest.mark.usefixtures("graph_mode")


@graph_modes
def test_read_under_control_dependencies_sees_the_assignment():
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable([1.0, 2.0])
        with tf.control_dependencies([v.assign([5.0, 5.0])]):
            reads = [v.read_value(), v * 1.0, tf.identity(v), v.value()]
        plain = v * 1.0
        init = tf.compat.v1.global_variables_initializer()
    with tf.compat.v1.Session(graph=g) as s:
        s.run(init)
        for r in s.run(reads):
            np.testing.assert_array_equal(r, [5.0, 5.0])
        s.run(init)
        np.testing.assert_array_equal(s.run(plain), [1.0, 2.0])    # no dependency: no assignment


@graph_modes
def test_read_after_a_grouped_training_step():
    """TF 1 idiom: evaluate the loss after the update in the same run."""
    g = tf.Graph()
    with g.as_default():
        w = tf.Variable(3.0)
        loss = w * w
        train = tf.compat.v1.train.GradientDescentOptimizer(0.25).minimize(loss)
        with tf.control_dependencies([train]):
            loss_after = w * w
        init = tf.compat.v1.global_variables_initializer()
    with tf.compat.v1.Session(graph=g) as s:
        s.run(init)
        before, after = s.run([loss, loss_after])
        assert before == 9.0 and after == 2.25          # w: 3 - 0.25 * 6 = 1.5
        assert s.run(w) == 1.5


@graph_modes
def test_constant_with_both_signed_zeros():
    """-0.0 == 0.0, but a constant holding both is not 'uniformly zero'."""
    g = tf.Graph()
    with g.as_default():
        x = tf.constant(np.float32([-0.0, 0.0]))
        y = tf.constant(np.float32([0.0, -0.0]))
        outs = [1.0 / x, x * 1.0, -x] + tf.gradients(tf.math.log(x), x) + tf.gradients(tf.sqrt(y), y)
    with tf.compat.v1.Session(graph=g) as s:
        inv, same, neg, dlog, dsqrt = s.run(outs)
    np.testing.assert_array_equal(inv, [-np.inf, np.inf])
    assert np.signbit(same).tolist() == [True, False]
    assert np.signbit(neg).tolist() == [False, True]
    np.testing.assert_array_equal(dlog, [-np.inf, np.inf])
    np.testing.assert_array_equal(dsqrt, [np.inf, -np.inf])      # 0.5 / sqrt(+-0) = +-inf


def test_none_output_gradient_means_no_contribution():
    x = tf.Variable([1.0, 2.0])
    with tf.GradientTape() as t:
        y = x * x
        z = x + 1.0
    g = t.gradient([y, z], x, output_gradients=[tf.constant([3.0, 4.0]), None])
    np.testing.assert_array_equal(g.numpy(), [6.0, 16.0])       # 2x * [3, 4]; z is not seeded


def test_input_signature_converts_a_list_argument():
    f = tf.function(lambda x: tf.reduce_sum(x), input_signature=[tf.TensorSpec([None], tf.float32)])
    assert f([1.0, 2.0, 3.0]).numpy() == 6.0
    assert f(tf.constant([1.0, 2.0])).numpy() == 3.0
    assert f.experimental_get_tracing_count() == 1


@graph_modes
def test_initial_value_reading_another_variable():
    """TF 2 guards such reads: initialized value if there is one, else the initial value."""
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable([1.0, 2.0])
        u = tf.Variable(v * 2.0)
        z = tf.Variable(tf.zeros_like(v))
        w = tf.Variable(u.initialized_value() + 1.0)
        init = tf.compat.v1.global_variables_initializer()
    with tf.compat.v1.Session(graph=g) as s:
        s.run(init)
        for got, want in zip(s.run([v, u, z, w]), ([1, 2], [2, 4], [0, 0], [3, 5])):
            np.testing.assert_array_equal(got, want)
        s.run(v.assign([10.0, 20.0]))
        s.run(u.initializer)                      # v is initialized now: its value is used
        np.testing.assert_array_equal(s.run(u), [20.0, 40.0])
    with tf.compat.v1.Session(graph=g) as s:     # fresh session: only u's initializer
        s.run(u.initializer)
        np.testing.assert_array_equal(s.run(u), [2.0, 4.0])
        with pytest.raises(tf.errors.FailedPreconditionError):
            s.run(v)                              # v itself was not initialized


@graph_modes
def test_hessians_of_unconnected_or_linear_inputs_raise_like_tf():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant([1.0, 2.0])
        y = tf.constant(3.0)
        with pytest.raises(ValueError, match="None values not supported"):
            tf.hessians(tf.reduce_sum(x * x), [x, y])          # y unconnected
        with pytest.raises(ValueError, match="None values not supported"):
            tf.hessians(tf.reduce_sum(x * x * y), [x, y])      # linear in y
        (h,) = tf.hessians(tf.reduce_sum(x * x * y), [x])
    with tf.compat.v1.Session(graph=g) as s:
        np.testing.assert_array_equal(s.run(h), [[6.0, 0.0], [0.0, 6.0]])


def test_hessians_in_eager_mode_is_a_runtime_error():
    x = tf.constant([1.0, 2.0])
    with pytest.raises(RuntimeError, match="eager execution"):
        tf.hessians(x * x, x)


def test_feed_key_naming_nothing_is_a_type_error():
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [])
        y = x * 2.0
    with tf.compat.v1.Session(graph=g) as s:
        with pytest.raises(TypeError, match="Cannot interpret feed_dict key"):
            s.run(y, {"nope:0": 1.0})
        with pytest.raises(ValueError, match="cannot be interpreted as a Tensor"):
            s.run("nope:0", {x: 1.0})


def test_equal_python_scalars_share_a_trace():
    @tf.function
    def f(x, s):
        return x * s

    x = tf.constant(2.0)
    assert [f(x, 1).numpy(), f(x, 1.0).numpy(), f(x, True).numpy()] == [2.0, 2.0, 2.0]
    assert f.experimental_get_tracing_count() == 1
    f(x, 1.5)
    assert f.experimental_get_tracing_count() == 2


@pytest.mark.parametrize("bad", [
    lambda: tf.matmul(tf.ones([2]), tf.ones([2])),
    lambda: tf.reduce_sum(tf.ones([2, 2]), axis=2),
    lambda: tf.ones([3])[::0],
], ids=["matmul-rank", "reduce-axis", "slice-step-0"])
def test_eager_argument_errors_are_invalid_argument_but_graph_ones_value_errors(bad):
    with pytest.raises(tf.errors.InvalidArgumentError):
        bad()                                   # eager: the kernel finds it, as in TF
    with tf.Graph().as_default():
        with pytest.raises(ValueError):
            bad()                               # graph construction: ValueError, as in TF


@graph_modes
def test_group_runs_all_its_inputs():
    g = tf.Graph()
    with g.as_default():
        a, b = tf.Variable(1.0), tf.Variable(2.0)
        both = tf.group(a.assign(10.0), b.assign_add(5.0).op, name="both")
        assert isinstance(both, tf.Operation) and both.name == "both"
        init = tf.compat.v1.global_variables_initializer()
    with tf.compat.v1.Session(graph=g) as s:
        s.run(init)
        assert s.run(both) is None
        assert s.run([a, b]) == [10.0, 7.0]
    assert tf.group(tf.constant(1.0)) is None          # eager: already ran, as in TF


def _prod_hessian(x, groups):
    """Hessian of sum over groups of prod(group): d2/dxi dxj = product of the group's
    other elements (i != j in one group), 0 otherwise. groups: lists of flat indices."""
    flat = x.ravel().astype(np.float64)
    h = np.zeros((flat.size, flat.size))
    for grp in groups:
        for i in grp:
            for j in grp:
                if i != j:
                    h[i, j] = np.prod([flat[k] for k in grp if k not in (i, j)])
    return h


@graph_modes
@pytest.mark.parametrize("axis, groups", [(None, [[0, 1, 2, 3, 4, 5]]), (0, [[0, 3], [1, 4], [2, 5]]),
                                          (1, [[0, 1, 2], [3, 4, 5]]), ([1, 0], [[0, 1, 2, 3, 4, 5]])])
def test_reduce_prod_has_second_derivatives(axis, groups):
    """tf.hessians(reduce_prod) raised LookupError (its gradient helper had no gradient)."""
    x0 = np.array([[1.5, -2.0, 3.0], [0.5, 4.0, -1.25]], np.float32)
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2, 3])
        h = tf.hessians(tf.reduce_sum(tf.reduce_prod(x, axis=axis)), x)[0]
    for mode in ("compiled", "interpret"):
        with tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto(jitgrad_mode=mode)) as s:
            got = s.run(h, {x: x0})
        np.testing.assert_allclose(got.reshape(6, 6), _prod_hessian(x0, groups), rtol=1e-5, atol=1e-6)


def test_reduce_prod_second_derivative_with_nested_tapes():
    x = tf.Variable([2.0, 3.0, 5.0])
    with tf.GradientTape() as outer:
        with tf.GradientTape() as inner:
            y = tf.reduce_prod(x)
        g = inner.gradient(y, x)                  # [15, 10, 6]
        s = tf.reduce_sum(g)
    # d/dx_k of sum_i prod_{j != i} x_j = sum over the two others: [3+5, 2+5, 2+3]
    np.testing.assert_allclose(outer.gradient(s, x).numpy(), [8.0, 7.0, 5.0])
