"""tf.cond / tf.case whose branches return different shapes (TF gives the output
an unknown dim): compiled, the taken branch's value and shape reach the host
(lower_growing.BranchShapedOutput, dynamic_outputs.py). Expected values are
numpy's; gradients are checked against central finite differences."""
import numpy as np
import pytest

import jitgrad as tf
from test_differential import run_both

tf1 = tf.compat.v1
X = np.array([0.5, -1.0, 2.0, 0.25])


def _branches(x):
    return (lambda: tf.sin(x[:2]) * 2.0), (lambda: tf.reshape(tf.tile(x, [2]) * 3.0, [2, 4])[0])


def _graph():
    g = tf.Graph()
    with g.as_default():
        p = tf1.placeholder(tf.bool, [])
        x = tf1.placeholder(tf.float64, [4])
        t, f = _branches(x)
        out = tf.cond(p, t, f)
        square = tf.cond(p, lambda: tf.reshape(x[:3] * 2.0, [1, 3]), lambda: tf.reshape(tf.concat([x, x[:2]], 0), [3, 2]))
    return g, p, x, out, square


def test_static_shape_has_the_unknown_dims():
    _, _, _, out, square = _graph()
    assert out.shape.as_list() == [None] and square.shape.as_list() == [None, None]


@pytest.mark.parametrize("taken", [True, False])
def test_compiled_output_has_the_taken_branch_shape(taken):
    g, p, x, out, square = _graph()
    compiled, interpreted = run_both(g, [out, square], {p: taken, x: X})   # (asserts no fallback)
    want = np.sin(X[:2]) * 2.0 if taken else X * 3.0
    want_sq = (X[:3] * 2.0).reshape(1, 3) if taken else np.concatenate([X, X[:2]]).reshape(3, 2)
    for got in (compiled, interpreted):
        np.testing.assert_allclose(got[0], want, rtol=1e-13)
        np.testing.assert_array_equal(got[1], want_sq)
        assert got[0].shape == want.shape and got[1].shape == want_sq.shape


def test_alternating_branches_in_one_session_are_bit_identical():
    g, p, x, out, _ = _graph()
    with tf1.Session(graph=g) as s:
        before = tf.cache_info()["fallbacks"]
        runs = [s.run(out, {p: k % 2 == 0, x: X}) for k in range(6)]
        assert tf.cache_info()["fallbacks"] == before
    for k, r in enumerate(runs):
        assert r.tobytes() == runs[k % 2].tobytes()
    assert runs[0].shape == (2,) and runs[1].shape == (4,)


def test_function_and_eager_modes():
    def f(p, x):
        t, e = _branches(x)
        return tf.cond(p, t, e)

    traced = tf.function(f)
    x = tf.constant(X)
    for taken, want in ((True, np.sin(X[:2]) * 2.0), (False, X * 3.0)):
        before = tf.cache_info()["fallbacks"]
        got = traced(tf.constant(taken), x).numpy()
        assert tf.cache_info()["fallbacks"] == before
        np.testing.assert_allclose(got, want, rtol=1e-13)
        np.testing.assert_allclose(f(tf.constant(taken), x).numpy(), want, rtol=1e-13)


def test_constant_predicate_is_inlined_and_what_reads_it_compiles():
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float64, [4])
        t, f = _branches(x)
        total = tf.reduce_sum(tf.cond(tf.constant(False), t, f) ** 2)
    compiled, _ = run_both(g, [total], {x: X})
    np.testing.assert_allclose(compiled[0], np.sum((X * 3.0) ** 2), rtol=1e-13)


def test_a_value_read_by_another_op_and_its_gradient_fall_back_correctly():
    g = tf.Graph()
    with g.as_default():
        p = tf1.placeholder(tf.bool, [])
        x = tf1.placeholder(tf.float64, [4])
        t, f = _branches(x)
        loss = tf.reduce_sum(tf.cond(p, t, f) ** 2)
        (gx,) = tf.gradients(loss, x)
    with tf1.Session(graph=g) as s:
        for taken in (True, False):
            def np_loss(v):
                return np.sum((np.sin(v[:2]) * 2.0) ** 2) if taken else np.sum((v * 3.0) ** 2)
            eps = 1e-6
            fd = np.array([(np_loss(X + eps * e) - np_loss(X - eps * e)) / (2 * eps) for e in np.eye(4)])
            got_loss, got_g = s.run([loss, gx], {p: taken, x: X})
            np.testing.assert_allclose(got_loss, np_loss(X), rtol=1e-13)
            np.testing.assert_allclose(got_g, fd, rtol=1e-6, atol=1e-9)


def test_branches_of_different_rank_still_run_correctly():
    g = tf.Graph()
    with g.as_default():
        p = tf1.placeholder(tf.bool, [])
        x = tf1.placeholder(tf.float64, [4])
        out = tf.cond(p, lambda: x * 2.0, lambda: tf.reshape(x, [2, 2]))
    with tf1.Session(graph=g) as s:
        np.testing.assert_array_equal(s.run(out, {p: True, x: X}), X * 2.0)
        np.testing.assert_array_equal(s.run(out, {p: False, x: X}), X.reshape(2, 2))


def test_case_and_switch_case_with_branches_of_different_shapes_compile():
    """Nested conds: an inner branch-shaped value is the outer branch's output."""
    g = tf.Graph()
    with g.as_default():
        k = tf1.placeholder(tf.int32, [])
        x = tf1.placeholder(tf.float64, [4])
        case = tf.case([(tf.equal(k, 0), lambda: x[:1]), (tf.equal(k, 1), lambda: x[:2] + 1.0)],
                       default=lambda: x * 2.0)
        switch = tf.switch_case(k, [lambda: tf.reshape(x, [2, 2]), lambda: tf.reshape(x[:3], [1, 3]),
                                    lambda: tf.reshape(tf.concat([x, x[:2]], 0), [3, 2])])
    for kv in (0, 1, 2, 7):
        want_case = {0: X[:1], 1: X[:2] + 1.0}.get(kv, X * 2.0)
        want_switch = {0: X.reshape(2, 2), 1: X[:3].reshape(1, 3)}.get(kv, np.concatenate([X, X[:2]]).reshape(3, 2))
        compiled, interpreted = run_both(g, [case, switch], {k: kv, x: X})   # (asserts no fallback)
        for got in (compiled, interpreted):
            np.testing.assert_array_equal(got[0], want_case)
            np.testing.assert_array_equal(got[1], want_switch)


def test_an_inner_branch_shaped_value_read_inside_the_branch_falls_back_correctly():
    g = tf.Graph()
    with g.as_default():
        p = tf1.placeholder(tf.bool, [])
        q = tf1.placeholder(tf.bool, [])
        x = tf1.placeholder(tf.float64, [4])
        out = tf.cond(p, lambda: tf.reduce_sum(tf.cond(q, lambda: x[:1], lambda: x)), lambda: tf.reduce_sum(x) * 0.5)
    with tf1.Session(graph=g) as s:
        for pv, qv, want in ((True, True, X[0]), (True, False, X.sum()), (False, True, X.sum() * 0.5)):
            np.testing.assert_allclose(s.run(out, {p: pv, q: qv, x: X}), want, rtol=1e-13)


def test_non_bool_predicate_is_still_a_type_error():
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float64, [4])
        t, f = _branches(x)
        with pytest.raises(TypeError):
            tf.cond(tf.constant(1.0), t, f)
