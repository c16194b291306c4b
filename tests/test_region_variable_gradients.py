"""Gradients with respect to a variable assigned inside tf.cond / tf.while_loop.

As TF: the gradient with respect to a variable is the sum of the gradients reaching
each of its reads (in branches and loop bodies too), and an assignment is not
differentiable -- a read after ``v.assign(v * 3.)`` is a fresh read, its gradient 1,
not 3. In a tf.function the gradient used to be None once a region had written the
variable. Each case runs eagerly, in a tf.function in both Session modes, and the
gradient-carrying ones in a graph (tf.gradients). Expected values are worked out by
hand from v = 2 in the comments; they match TF 2.21."""
import numpy as np
import pytest

import jitgrad as tf

pytestmark = pytest.mark.usefixtures("graph_mode")


def _cond_add(v):
    # v -> 3; y = 3 * 2; one read (after the assignment): dy/dv = 2
    return tf.cond(v > 0, lambda: v.assign_add(1.0) * 2.0, lambda: v * 1.0)


def _cond_assign_scaled(v):
    # v -> 6; y = 6 * 2 = 12; the read after the assign is a fresh read: 2 (not 6)
    return tf.cond(v > 0, lambda: v.assign(v * 3.0) * 2.0, lambda: v * 1.0)


def _loop_add(v):
    # two iterations: v 3 then 4, a = 6 + 8 = 14; two reads, 2 each: 4
    return tf.while_loop(lambda i, a: i < 2, lambda i, a: (i + 1, a + v.assign_add(1.0) * 2.0), (0, 0.0))[1]


def _read_before_and_after(v):
    # a = 2 * 2 (dv 2); v -> 6; y = 4 + 6 * 5 = 34; dy/dv = 2 + 5 = 7
    def branch():
        a = v * 2.0
        v.assign(v * 3.0)
        return a + v * 5.0
    return tf.cond(v > 0, branch, lambda: v * 1.0)


def _assign_in_the_branch_not_taken(v):
    # the false branch runs: y = 2 * 7 = 14, dy/dv = 7; v stays 2
    return tf.cond(v > 100, lambda: v.assign(v * 3.0) * 2.0, lambda: v * 7.0)


def _read_after_the_cond(v):
    # cond: 12 (dv 2), v -> 6; y = 12 + 6 * 6 = 48; dy/dv = 2 + 2 * 6 = 14
    y = tf.cond(v > 0, lambda: v.assign(v * 3.0) * 2.0, lambda: v * 1.0)
    return y + v * v


def _cond_in_loop(v):
    # i=0: b = 2 * 10 = 20 (dv 10), a = 20 + 2 (dv 1); i=1: v -> 6, b = 12 (2), a = 22 + 12 + 6 (1);
    # i=2: v -> 18, b = 36 (2), a = 40 + 36 + 18 = 94 (1); dy/dv = 10 + 1 + 2 + 1 + 2 + 1 = 17
    def body(i, a):
        b = tf.cond(i > 0, lambda: v.assign(v * 3.0) * 2.0, lambda: v * 10.0)
        return i + 1, a + b + v
    return tf.while_loop(lambda i, a: i < 3, body, (0, 0.0))[1]


def _assign_sub(v):
    # v -> 1.5; y = 1.5 * 1.5 = 2.25; two reads after the assign: 2 * 1.5 = 3
    return tf.cond(v > 0, lambda: v.assign_sub(0.5) * v, lambda: v)


def _several_assigns(v):
    # v -> 6; a = 12 (dv 2); v -> 12; y = 12 + 144 = 156; dy/dv = 2 + 2 * 12 = 26
    def branch():
        v.assign(v * 3.0)
        a = v * 2.0
        v.assign_add(v)
        return a + v * v
    return tf.cond(v > 0, branch, lambda: v)


def _loop_assign_scaled(v):
    # per iteration a += v + 3 * (2 v): v 2, 4, 8 -> 2 + 12 + 4 + 24 + 8 + 48 = 98, v -> 16;
    # each iteration's two reads: 1 + 3, three times: 12
    return tf.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, a + v * 1.0 + v.assign(v * 2.0) * 3.0),
                         (0, 0.0))[1]


def _loop_read_only(v):
    # 3 * v^2 = 12; 3 * 2 v = 12
    return tf.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, a + v * v), (0, 0.0))[1]


def _cond_read_only(v):
    # 3 v^2 = 12; 6 v = 12
    return tf.cond(v > 0, lambda: v * v * 3.0, lambda: v)


def _written_before_the_cond(v):
    # v -> 3 at the top; y = 3 * 3 = 9; dy/dv = 2 * 3 = 6
    v.assign(v + 1.0)
    return tf.cond(v > 0, lambda: v * v, lambda: v)


# (body, y, dy/dv, v afterwards)
CASES = [
    (_cond_add, 6.0, 2.0, 3.0),
    (_cond_assign_scaled, 12.0, 2.0, 6.0),
    (_loop_add, 14.0, 4.0, 4.0),
    (_read_before_and_after, 34.0, 7.0, 6.0),
    (_assign_in_the_branch_not_taken, 14.0, 7.0, 2.0),
    (_read_after_the_cond, 48.0, 14.0, 6.0),
    (_cond_in_loop, 94.0, 17.0, 18.0),
    (_assign_sub, 2.25, 3.0, 1.5),
    (_several_assigns, 156.0, 26.0, 12.0),
    (_loop_assign_scaled, 98.0, 12.0, 16.0),
    (_loop_read_only, 12.0, 12.0, 2.0),
    (_cond_read_only, 12.0, 12.0, 2.0),
    (_written_before_the_cond, 9.0, 6.0, 3.0),
]


def _taped(body, v):
    def f():
        with tf.GradientTape() as t:
            y = body(v)
        return y, t.gradient(y, v)
    return f


@pytest.mark.parametrize("body, y, g, v_after", CASES, ids=[c[0].__name__.strip("_") for c in CASES])
@pytest.mark.parametrize("how", ["eager", "function"])
def test_gradient_sums_over_reads_in_regions(body, y, g, v_after, how, no_fallback):
    v = tf.Variable(2.0)
    f = _taped(body, v)
    if how == "function":
        f = tf.function(f)
    for _ in range(2):   # a second call runs the cached trace from the variable's restored value
        v.assign(2.0)
        got_y, got_g = f()
        assert got_g is not None
        assert float(got_y) == pytest.approx(y)
        assert float(got_g) == pytest.approx(g)
        assert float(v.numpy()) == pytest.approx(v_after)


def test_gradient_with_respect_to_a_variable_and_a_tensor_in_a_loop_that_assigns(no_fallback):
    """dy/dx alongside dy/dv: y = sum over 2 iterations of x * (v += x): v 2 -> 2 + x -> 2 + 2x,
    y = x (2 + x) + x (2 + 2x) = 4x + 3x^2. No gradient passes through the assignments, so
    dy/dx is the reads' values, (2 + x) + (2 + 2x) (8.5 at x = 1.5, as TF 2.21), and dy/dv is
    2x (the two reads)."""
    v = tf.Variable(2.0)

    @tf.function
    def f(x):
        with tf.GradientTape() as t:
            t.watch(x)
            y = tf.while_loop(lambda i, a: i < 2, lambda i, a: (i + 1, a + x * v.assign_add(x)), (0, 0.0))[1]
        return y, t.gradient(y, [x, v])

    x = 1.5
    y, (gx, gv) = f(tf.constant(x))
    assert float(y) == pytest.approx(4 * x + 3 * x * x)
    assert float(gv) == pytest.approx(2 * x)
    assert float(gx) == pytest.approx((2 + x) + (2 + 2 * x))


# (body, y, dy/dv): graph-mode variables, where TF's graph reads and writes are not ordered by
# automatic control dependencies -- only cases whose reads are unambiguous
GRAPH_CASES = [
    (_cond_add, 6.0, 2.0),
    (_cond_assign_scaled, 12.0, 2.0),
    (_loop_add, 14.0, 4.0),
    (_assign_in_the_branch_not_taken, 14.0, 7.0),
    (_assign_sub, 2.25, 3.0),
    (_loop_read_only, 12.0, 12.0),
    (_cond_read_only, 12.0, 12.0),
]


@pytest.mark.parametrize("body, y, g", GRAPH_CASES, ids=[c[0].__name__.strip("_") for c in GRAPH_CASES])
def test_tf_gradients_in_a_graph_sum_over_reads_in_regions(body, y, g, no_fallback):
    graph = tf.Graph()
    with graph.as_default():
        v = tf.Variable(2.0)
        out = body(v)
        (gv,) = tf.gradients(out, [v])
    with tf.compat.v1.Session(graph=graph) as sess:
        sess.run(v.initializer)
        got_y, got_g = sess.run([out, gv])
    assert got_y == pytest.approx(y)
    assert got_g == pytest.approx(g)


def test_read_after_a_region_write_is_still_the_written_value_compiled_and_interpreted(no_fallback):
    """The read a region's write leaves behind (its gradient goes to the variable) has the
    written value: v = [1, -2] -> cond writes v * v = [1, 4]; y = v + 1."""
    v = tf.Variable(np.array([1.0, -2.0], np.float32))

    @tf.function
    def f():
        tf.cond(tf.reduce_sum(v) < 0, lambda: v.assign(v * v), lambda: v.assign(v))
        return v + 1.0

    np.testing.assert_array_equal(f().numpy(), np.array([2.0, 5.0], np.float32))
    np.testing.assert_array_equal(v.numpy(), np.array([1.0, 4.0], np.float32))


def test_a_tensor_entering_a_region_twice_gets_its_gradient_once(no_fallback):
    """r = v.value() is the variable's read node: a branch / body using both r and v takes
    that tensor twice (a capture and the variable's value on entry). y = r * v = v^2 -> 2v = 4;
    the loop adds it twice -> 8 (the If / While gradients gave 8 and 16)."""
    graph = tf.Graph()
    with graph.as_default():
        v = tf.Variable(2.0)
        r = v.value()
        y = tf.cond(v > 0, lambda: r * v, lambda: r)
        y2 = tf.while_loop(lambda i, a: i < 2, lambda i, a: (i + 1, a + r * v), (0, 0.0))[1]
        grads = tf.gradients(y, [v]) + tf.gradients(y2, [v])
    with tf.compat.v1.Session(graph=graph) as sess:
        sess.run(v.initializer)
        assert sess.run([y, y2]) == [pytest.approx(4.0), pytest.approx(8.0)]
        assert sess.run(grads) == [pytest.approx(4.0), pytest.approx(8.0)]
