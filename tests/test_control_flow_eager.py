"""Control flow in eager mode (Python branches and loops, recorded by the
tape) and inside jitgrad.function (traced into If / While ops)."""
import numpy as np
import pytest

import jitgrad as tf


def test_eager_cond_and_while_under_a_tape():
    x = tf.Variable(1.5)
    with tf.GradientTape() as t:
        y = tf.cond(x > 1.0, lambda: x * x, lambda: x)
        _, z = tf.while_loop(lambda i, z: i < 3, lambda i, z: (i + 1, z * x), [0, 1.0])
    assert float(y) == 2.25 and float(z) == 3.375
    np.testing.assert_allclose(t.gradient([y, z], x), 2 * 1.5 + 3 * 1.5 ** 2)
    with tf.GradientTape() as t:
        y = tf.cond(x > 5.0, lambda: x * x, lambda: x * 4.0)
    assert float(t.gradient(y, x)) == 4.0


def test_eager_errors():
    x = tf.constant(1.0)
    # (an int predicate is no error eagerly: TF 2.21 takes its truth value, tested below)
    with pytest.raises(ValueError):
        tf.cond(tf.constant([True, True]), lambda: x, lambda: x)
    with pytest.raises(ValueError):
        tf.while_loop(lambda a, b: a < 2.0, lambda a, b: (a + 1.0,), [x, x])
    with pytest.raises(TypeError):
        tf.while_loop(lambda a: a < 2.0, lambda a: tf.cast(a, tf.int32), [x])


def test_eager_max_iterations_and_structures():
    out = tf.while_loop(lambda d: d["i"] < 10, lambda d: [{"i": d["i"] + 1, "v": d["v"] * 2.0}],
                        [{"i": tf.constant(0), "v": tf.constant(1.0)}], maximum_iterations=3)
    assert isinstance(out, list) and int(out[0]["i"]) == 3 and float(out[0]["v"]) == 8.0


def test_eager_map_fn_scan_fold_case():
    xs = tf.constant([1.0, 2.0, 3.0])
    np.testing.assert_allclose(tf.map_fn(lambda v: v * v, xs), [1.0, 4.0, 9.0])
    np.testing.assert_allclose(tf.scan(lambda a, v: a + v, xs), [1.0, 3.0, 6.0])
    np.testing.assert_allclose(tf.scan(lambda a, v: a + v, xs, reverse=True), [6.0, 5.0, 3.0])
    assert float(tf.foldl(lambda a, v: a - v, xs)) == -4.0
    assert float(tf.foldr(lambda a, v: a - v, xs)) == 0.0
    assert float(tf.switch_case(tf.constant(1), [lambda: xs[0], lambda: xs[1]])) == 2.0
    assert float(tf.case([(tf.constant(False), lambda: xs[0])], default=lambda: xs[2])) == 3.0
    v = tf.Variable([1.0, 2.0])
    with tf.GradientTape() as t:
        s = tf.reduce_sum(tf.map_fn(lambda r: r * r * r, v))
    np.testing.assert_allclose(t.gradient(s, v), [3.0, 12.0])


def test_function_traces_loops_into_the_graph_and_differentiates():
    @tf.function
    def f(a, n):
        _, r = tf.while_loop(lambda k, r: k < n, lambda k, r: (k + 1, r * a), [0, 1.0])
        return tf.cond(r > 100.0, lambda: r / 100.0, lambda: r)

    assert float(f(tf.constant(2.0), tf.constant(5))) == 32.0
    assert float(f(tf.constant(2.0), tf.constant(8))) == np.float32(256.0) / np.float32(100.0)
    a = tf.Variable(2.0)
    with tf.GradientTape() as t:
        r = f(a, tf.constant(4))
    assert float(t.gradient(r, a)) == 32.0     # d a^4 / da at 2
    with tf.GradientTape() as t:
        r = f(a, tf.constant(8))
    np.testing.assert_allclose(float(t.gradient(r, a)), 8 * 2.0 ** 7 / 100.0, rtol=1e-6)


def test_function_reads_an_eager_variable_inside_a_loop_body():
    v = tf.Variable(2.0)

    @tf.function
    def f(n):
        _, r = tf.while_loop(lambda k, r: k < n, lambda k, r: (k + 1, r * v), [0, 1.0])
        return r
    assert float(f(tf.constant(3))) == 8.0
    with tf.GradientTape() as t:
        r = f(tf.constant(3))
    assert float(t.gradient(r, v)) == 12.0     # 3 v^2
    v.assign(3.0)
    assert float(f(tf.constant(2))) == 9.0     # the variable is read at run time, not baked in


def test_eager_cond_and_while_take_any_dtype_predicate_by_truth_value():
    """TF's eager tf.cond / tf.while_loop test the predicate with Python's ``if``: an int or
    float tensor is its truth value (TF 2.21; they raised TypeError here)."""
    one, two = lambda: tf.constant(1.0), lambda: tf.constant(2.0)
    assert float(tf.cond(tf.constant(0), one, two)) == 2.0
    assert float(tf.cond(tf.constant(3), one, two)) == 1.0
    assert float(tf.cond(tf.constant(0.5), one, two)) == 1.0
    assert float(tf.cond(tf.constant([1]), one, two)) == 1.0
    i, x = tf.while_loop(lambda i, x: 3 - i, lambda i, x: (i + 1, x * 2.0), (tf.constant(0), tf.constant(1.0)))
    assert int(i) == 3 and float(x) == 8.0          # runs while 3 - i != 0
    i, x = tf.while_loop(lambda i, x: 3.0 - x, lambda i, x: (i + 1, x + 1.0), (tf.constant(0), tf.constant(1.0)))
    assert int(i) == 2 and float(x) == 3.0
    with pytest.raises(ValueError):                  # more than one element: no truth value
        tf.cond(tf.constant([1, 0]), one, two)


def test_eager_v1_cond_and_case_unpack_a_singleton_list():
    """Eagerly (TF 2.21) compat.v1.cond and tf.case without strict return a singleton
    list's element; a graph keeps the list (test_control_flow.py)."""
    x = tf.constant(1.0)
    r = tf.compat.v1.cond(tf.constant(True), lambda: [x + 1.0], lambda: [x - 1.0])
    assert not isinstance(r, list) and float(r) == 2.0
    r = tf.case([(tf.constant(True), lambda: [x * 3.0])], default=lambda: [x])
    assert not isinstance(r, list) and float(r) == 3.0
