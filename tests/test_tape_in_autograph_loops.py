"""tf.GradientTape opened inside an AutoGraph tensor loop body in jitgrad.function
(``for i in tf.range(n): with tf.GradientTape() as t: ...; g = t.gradient(...)``):
the tape and what it records are not loop variables (TF's liveness: a with block's
body runs straight through), the tape differentiates through the body's capture of
a function input, and the loop compiles (no interpreter fallback). Expected values
are closed forms; each was also checked against TensorFlow 2.x (noted per test)."""
import numpy as np
import pytest

import jitgrad as tf

pytestmark = pytest.mark.usefixtures("graph_mode")


def test_gradient_of_a_watched_input_in_each_iteration(no_fallback):
    @tf.function
    def f(x, n):
        acc = tf.zeros_like(x)
        for i in tf.range(n):
            with tf.GradientTape() as t:
                t.watch(x)
                y = tf.reduce_sum(x * x * tf.cast(i + 1, tf.float32))
            acc += t.gradient(y, x)
        return acc
    # sum_i 2x (i + 1) = 2x * n(n+1)/2 (TF: [12. 24.])
    np.testing.assert_allclose(f(tf.constant([1.0, 2.0]), tf.constant(3)).numpy(), [12.0, 24.0], rtol=1e-6)
    np.testing.assert_allclose(f(tf.constant([1.0, 2.0]), tf.constant(0)).numpy(), [0.0, 0.0])


def test_newton_steps_with_the_derivative_from_a_tape_in_the_body(no_fallback):
    @tf.function
    def cube_root_of_two(x, n):
        for _ in tf.range(n):
            with tf.GradientTape() as t:
                t.watch(x)
                f = x * x * x - 2.0
            x = x - f / t.gradient(f, x)
        return x
    x = 1.0
    for _ in range(5):
        x = x - (x ** 3 - 2.0) / (3 * x * x)
    assert float(cube_root_of_two(tf.constant(1.0), tf.constant(5))) == pytest.approx(x, rel=1e-6)   # TF: 1.2599211


def test_nested_tapes_in_a_while_statement_give_second_derivatives(no_fallback):
    @tf.function
    def f(x, n):
        s = tf.constant(0.0)
        i = tf.constant(0)
        while i < n:
            with tf.GradientTape() as t1:
                t1.watch(x)
                with tf.GradientTape() as t2:
                    t2.watch(x)
                    y = tf.sin(x) * tf.cast(i + 1, tf.float32)
                dy = t2.gradient(y, x)
            s += t1.gradient(dy, x)
            i += 1
        return s
    # sum_i -(i + 1) sin(x) (TF: -2.8765533)
    assert float(f(tf.constant(0.5), tf.constant(3))) == pytest.approx(-6 * np.sin(0.5), rel=1e-6)


def test_a_tape_around_the_loop_differentiates_the_inner_tapes_gradients(no_fallback):
    @tf.function
    def f(x, n):
        with tf.GradientTape() as t:
            t.watch(x)
            s = tf.constant(0.0)
            for _ in tf.range(n):
                with tf.GradientTape() as ti:
                    ti.watch(x)
                    y = x * x
                s += ti.gradient(y, x) * x
        return s, t.gradient(s, x)
    s, g = f(tf.constant(3.0), tf.constant(2))
    assert float(s) == pytest.approx(4 * 9.0)      # n * 2x * x (TF: 36.0)
    assert float(g) == pytest.approx(8 * 3.0)      # d(4x^2)/dx (TF: 24.0)


def test_persistent_tape_in_a_loop_body(no_fallback):
    @tf.function
    def f(x, n):
        acc = tf.constant(0.0)
        for _ in tf.range(n):
            with tf.GradientTape(persistent=True) as t:
                t.watch(x)
                y = x * x
                z = y * x
            acc += t.gradient(y, x) + t.gradient(z, x)
        return acc
    assert float(f(tf.constant(2.0), tf.constant(3))) == pytest.approx(3 * (2 * 2.0 + 3 * 4.0))   # TF: 48.0


def test_training_steps_on_a_variable_with_a_tape_in_the_loop(no_fallback):
    v = tf.Variable([1.0, -2.0])

    @tf.function
    def train(n):
        for _ in tf.range(n):
            with tf.GradientTape() as t:
                loss = tf.reduce_sum(v * v)
            v.assign_sub(0.1 * t.gradient(loss, v))
        return v.read_value()
    # v <- v - 0.1 * 2v = 0.8 v per step (TF: [0.512 -1.024])
    np.testing.assert_allclose(train(tf.constant(3)).numpy(), np.array([1.0, -2.0]) * 0.8 ** 3, rtol=1e-6)


def test_a_gradient_read_before_the_tape_in_the_next_iteration_stays_a_loop_variable(no_fallback):
    @tf.function
    def f(x, n):
        g = tf.constant(0.0)
        acc = tf.constant(0.0)
        for i in tf.range(n):
            acc += g                       # the previous iteration's gradient
            with tf.GradientTape() as t:
                t.watch(x)
                y = x * x * tf.cast(i, tf.float32)
            g = t.gradient(y, x)
        return acc, g
    acc, g = f(tf.constant(2.0), tf.constant(4))
    # g_i = 2x i: acc = g_0 + g_1 + g_2 = 2x * 3, the last g = 2x * 3
    assert float(acc) == pytest.approx(12.0)
    assert float(g) == pytest.approx(12.0)


def test_a_name_bound_only_in_the_with_body_is_not_carried():
    from jitgrad.autograph.transformer import upward_exposed
    import ast
    body = ast.parse("with tf.GradientTape() as t:\n    t.watch(x)\n    y = x * x\ng = t.gradient(y, x)\n"
                     "acc = acc + g\n").body
    names = {n for n in upward_exposed(body) if "." not in n}   # (not attribute symbols: t.watch, ...)
    assert names == {"tf", "x", "acc"}
    body = ast.parse("with tape() as t:\n    if c:\n        y = 1\nz = y + t\n").body
    assert {n for n in upward_exposed(body) if "." not in n} == {"tape", "c", "y"}     # y is bound on one path only
