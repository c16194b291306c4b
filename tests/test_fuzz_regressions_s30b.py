"""Regressions found by bench/tf_fuzz_batching.py (differential fuzzing of the While / If
batching rules and the jacobian paths around them against TensorFlow). Expected values are
derived by hand in each test's docstring; TF 2.21 gives the same numbers."""
import numpy as np
import pytest

import jitgrad as tf

tf1 = tf.compat.v1


def _h(zero_branch=False):
    """y = u * u with a custom gradient that branches on its upstream gradient dy:
    dy * 2u where sum(dy * u) > 0, else dy * (u - 1) (or zeros: a branch that does not read dy)."""
    @tf.custom_gradient
    def h(u):
        def grad(dy):
            other = (lambda: tf.zeros_like(u)) if zero_branch else (lambda: dy * (u - 1.0))
            return tf.cond(tf.reduce_sum(dy * u) > 0.0, lambda: dy * 2.0 * u, other)
        return u * u, grad
    return h


def _jacobians(x, xb, zero_branch, pfor):
    h = _h(zero_branch)
    with tf.GradientTape(persistent=True) as t:
        t.watch([x, xb])
        y, yb = h(x), h(xb)
    return t.jacobian(y, x, experimental_use_pfor=pfor), t.batch_jacobian(yb, xb, experimental_use_pfor=pfor)


@pytest.mark.parametrize("how", ["eager", "eager-per-row", "function"])
@pytest.mark.parametrize("zero_branch", [False, True])
def test_cond_on_the_upstream_gradient_per_jacobian_row(how, zero_branch):
    """Seed 156: an eager (pfor) jacobian gave the cond a predicate per row -> numpy's
    ValueError. Row i's dy is the one-hot e_i, so sum(dy * u) = u_i: for x = [1, -2, .5]
    J = diag(2u_i if u_i > 0 else u_i - 1) = diag(2, -3, 1) (zeros branch: diag(2, 0, 1)).
    batch_jacobian row j's dy is the one-hot j in EVERY example, so the predicate is
    u[0, j] + u[1, j]: for xb = [[1, -2], [.5, -.5]] column 0 (1.5 > 0) takes 2u, column 1
    (-2.5) u - 1: [[diag(2, -3)], [diag(1, -1.5)]] (zeros branch: diag(2, 0), diag(1, 0))."""
    x = tf.constant([1.0, -2.0, 0.5])
    xb = tf.constant([[1.0, -2.0], [0.5, -0.5]])
    if how == "function":
        j, bj = tf.function(lambda a, b: _jacobians(a, b, zero_branch, True))(x, xb)
    else:
        j, bj = _jacobians(x, xb, zero_branch, how == "eager")
    low = [0.0, 0.0] if zero_branch else [-3.0, -1.5]
    np.testing.assert_allclose(j.numpy(), np.diag([2.0, low[0] if zero_branch else -3.0, 1.0]), rtol=1e-6)
    np.testing.assert_allclose(bj.numpy(), np.stack([np.diag([2.0, low[0]]), np.diag([1.0, low[1]])]), rtol=1e-6)


def test_a_per_row_predicate_of_more_than_one_element_is_still_an_error():
    """A non-scalar predicate stays numpy's ValueError (TF's eager `if`), batched or not."""
    @tf.custom_gradient
    def h(u):
        def grad(dy):
            return tf.cond(dy * u > 0.0, lambda: dy * 2.0, lambda: dy)
        return u * 1.0, grad
    x = tf.constant([1.0, -2.0])
    with tf.GradientTape() as t:
        t.watch(x)
        y = h(x)
    with pytest.raises(ValueError):
        t.jacobian(y, x)


def _branching(kind):
    """y = u * u whose custom gradient branches on dy per kind (see the test's docstring)."""
    @tf.custom_gradient
    def h(u):
        def grad(dy):
            s = tf.reduce_sum(dy * u)
            if kind == "switch_case":
                return tf.switch_case(tf.cast(s > 0.0, tf.int32), [lambda: dy * (u - 1.0), lambda: dy * 2.0 * u])
            if kind == "case":
                return tf.case([(s > 0.0, lambda: dy * 2.0 * u)], default=lambda: dy * (u - 1.0))
            return tf.while_loop(lambda i, g: tf.logical_and(i < 3, tf.reduce_sum(g) > 0.0),
                                 lambda i, g: (i + 1, g * 2.0), [0, dy * u])[1]
        return u * u, grad
    return h


@pytest.mark.parametrize("how", ["eager", "eager-per-row", "function"])
@pytest.mark.parametrize("kind, diag", [("switch_case", [2.0, -3.0, 1.0]), ("case", [2.0, -3.0, 1.0]),
                                        ("while_loop", [8.0, -2.0, 4.0])])
def test_case_switch_and_loop_on_the_upstream_gradient_per_jacobian_row(how, kind, diag):
    """As above for x = [1, -2, .5] (row i: sum(dy * u) = u_i): switch_case / case pick 2u
    where u_i > 0, else u - 1: diag(2, -3, 1). The loop doubles g = dy * u while its sum is
    positive, at most 3 times: rows 0 and 2 double 3 times (8 * 1, 8 * .5), row 1 (-2) never:
    diag(8, -2, 4), each row stopping on its own (eager: a per-row loop condition used to be
    numpy's ValueError, a per-row switch_case index TF's Select error)."""
    x = tf.constant([1.0, -2.0, 0.5])

    def jac(a, pfor):
        with tf.GradientTape(persistent=True) as t:
            t.watch(a)
            y = _branching(kind)(a)
        return t.jacobian(y, a, experimental_use_pfor=pfor)
    j = tf.function(lambda a: jac(a, True))(x) if how == "function" else jac(x, how == "eager")
    np.testing.assert_allclose(j.numpy(), np.diag(diag), rtol=1e-6)
