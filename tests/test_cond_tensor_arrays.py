"""TensorArrays through a graph tf.cond (cond_tensor_arrays.py): written in a branch,
returned, read after; in a Session graph, inside a tf.while_loop body and through
AutoGraph. Expected values are the programs written again in numpy; first and second
gradients are derived by hand (comments give the formulas) and checked in the
interpreter and compiled (run_both: no fallback, both modes compared). TF 2.21 in graph
mode gives the same values for the branch write not seen outside the cond, the arrays of
different lengths (values, size, gradient) and the switch_case (run once in a side venv)."""
import numpy as np
import pytest

import jitgrad as tf
from test_differential import run_both

tf1 = tf.compat.v1
X0 = np.array([0.3, -0.7, 1.1])
W = np.array([[1.0, -2.0, 0.5], [3.0, 0.25, -1.0]])


def _both(g, fetches, feed):
    interp, compiled = run_both(g, fetches, feed)
    for a, b in zip(interp, compiled):
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-12)
    return interp


def _written_in_one_branch():
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float64, [3])
        p = tf1.placeholder(tf.bool, [])
        ta = tf.TensorArray(tf.float64, size=2)
        ta = tf.cond(p, lambda: ta.write(0, tf.sin(x) * x), lambda: ta)
        ta = ta.write(1, x * x)
        st = ta.stack()
        loss = tf.reduce_sum(st * W)
        (dx,) = tf.gradients(loss, x)
        (ddx,) = tf.gradients(tf.reduce_sum(dx), x)
    return g, x, p, [st, dx, ddx]


@pytest.mark.parametrize("taken", [True, False])
def test_written_in_one_branch_read_after(taken):
    g, x, p, fetches = _written_in_one_branch()
    st, dx, ddx = _both(g, fetches, {x: X0, p: taken})
    w0, w1 = W
    if taken:   # rows sin(x) x, x^2: d/dx = w0 (cos x x + sin x) + 2 w1 x; d2 = w0 (2 cos x - x sin x) + 2 w1
        np.testing.assert_allclose(st, [np.sin(X0) * X0, X0 * X0], rtol=1e-14)
        np.testing.assert_allclose(dx, w0 * (np.cos(X0) * X0 + np.sin(X0)) + 2 * w1 * X0, rtol=1e-13)
        np.testing.assert_allclose(ddx, w0 * (2 * np.cos(X0) - X0 * np.sin(X0)) + 2 * w1, rtol=1e-13)
    else:       # row 0 never written: zeros (TF's unwritten element)
        np.testing.assert_allclose(st, [np.zeros(3), X0 * X0], rtol=1e-14)
        np.testing.assert_allclose(dx, 2 * w1 * X0, rtol=1e-14)
        np.testing.assert_allclose(ddx, 2 * w1, rtol=1e-14)


def test_a_branch_write_is_not_seen_outside_the_cond():
    # TF: a write makes a new array; the array the branches closed over stays unwritten
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float64, [3])
        p = tf1.placeholder(tf.bool, [])
        ta = tf.TensorArray(tf.float64, size=2, element_shape=[3])
        out = tf.cond(p, lambda: ta.write(0, x), lambda: ta.write(1, 2 * x))
        before = ta.stack()
        after = out.stack()
    for taken, want in ((True, [X0, 0 * X0]), (False, [0 * X0, 2 * X0])):
        b, a = _both(g, [before, after], {x: X0, p: taken})
        np.testing.assert_array_equal(b, np.zeros((2, 3)))
        np.testing.assert_array_equal(a, want)


@pytest.mark.parametrize("p1,p2", [(True, True), (True, False), (False, True), (False, False)])
def test_nested_conds_and_a_structure_of_outputs(p1, p2):
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float64, [3])
        a = tf1.placeholder(tf.bool, [])
        b = tf1.placeholder(tf.bool, [])
        ta = tf.TensorArray(tf.float64, size=3)

        def outer_true():
            inner = tf.cond(b, lambda: ta.write(1, tf.exp(x)), lambda: ta.write(2, x * x * x))
            return {"ta": inner.write(0, x), "s": tf.reduce_sum(x)}
        res = tf.cond(a, outer_true, lambda: {"ta": ta.write(0, -x), "s": tf.constant(0.0, tf.float64)})
        st = res["ta"].stack()
        loss = tf.reduce_sum(st * np.array([[1.0], [2.0], [3.0]])) + res["s"]
        (dx,) = tf.gradients(loss, x)
        (ddx,) = tf.gradients(tf.reduce_sum(dx), x)
    st, dx, ddx = _both(g, [st, dx, ddx], {x: X0, a: p1, b: p2})
    z = np.zeros(3)
    if not p1:      # row 0 = -x: d = -1
        want, d1, d2 = [-X0, z, z], -np.ones(3), z
    elif p2:        # rows x, exp x; loss + sum x: d = 1 + 2 exp x + 1
        want, d1, d2 = [X0, np.exp(X0), z], 2 + 2 * np.exp(X0), 2 * np.exp(X0)
    else:           # rows x, 0, x^3: d = 1 + 9 x^2 + 1, d2 = 18 x
        want, d1, d2 = [X0, z, X0 ** 3], 2 + 9 * X0 ** 2, 18 * X0
    np.testing.assert_allclose(st, want, rtol=1e-14)
    np.testing.assert_allclose(dx, d1, rtol=1e-13)
    np.testing.assert_allclose(ddx, d2, rtol=1e-13, atol=1e-14)


def _np_rows(x, n):
    """Row i: sin(x) * i for an even i, x^2 + i for an odd one."""
    return np.array([np.sin(x) * i if i % 2 == 0 else x * x + i for i in range(n)]).reshape(n, 3)


@pytest.mark.parametrize("fed_size", [False, True])
def test_cond_writing_an_array_inside_a_while_body(fed_size):
    n = 5
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float64, [3])
        size = tf1.placeholder(tf.int32, []) if fed_size else n
        ta = tf.TensorArray(tf.float64, size=size)

        def body(i, ta):
            fi = tf.cast(i, tf.float64)
            ta = tf.cond(tf.equal(i % 2, 0), lambda: ta.write(i, tf.sin(x) * fi), lambda: ta.write(i, x * x + fi))
            return i + 1, ta
        _, ta = tf.while_loop(lambda i, ta: i < n, body, [0, ta])
        st = ta.stack()
        loss = tf.reduce_sum(st * np.arange(1.0, n + 1)[:, None])
        (dx,) = tf.gradients(loss, x)
        (ddx,) = tf.gradients(tf.reduce_sum(dx), x)
    feed = {x: X0}
    if fed_size:
        feed[size] = n
    st, dx, ddx = _both(g, [st, dx, ddx], feed)
    np.testing.assert_allclose(st, _np_rows(X0, n), rtol=1e-14)
    c = np.arange(1.0, n + 1)
    even, odd = [i for i in range(n) if i % 2 == 0], [i for i in range(n) if i % 2]
    # loss = sum_i c_i row_i: d/dx = sum_even c_i i cos x + sum_odd c_i 2x; d2 = -sum_even c_i i sin x + 2 sum_odd c_i
    se, so = sum(c[i] * i for i in even), sum(c[i] for i in odd)
    np.testing.assert_allclose(dx, se * np.cos(X0) + 2 * so * X0, rtol=1e-13)
    np.testing.assert_allclose(ddx, -se * np.sin(X0) + 2 * so, rtol=1e-13)


def test_autograph_if_writing_an_array(graph_mode):
    @tf.function(autograph=True)
    def autograph_if_writes(x):
        ta = tf.TensorArray(tf.float64, size=2)
        if tf.reduce_sum(x) > 0:
            ta = ta.write(0, x * 2.0)
        else:
            ta = ta.write(0, -x)
        ta = ta.write(1, x)
        return ta.stack()
    np.testing.assert_array_equal(autograph_if_writes(tf.constant(X0)).numpy(), [2 * X0, X0])
    np.testing.assert_array_equal(autograph_if_writes(tf.constant(-X0 - 1)).numpy(), [X0 + 1, -X0 - 1])


def test_eager_cond_writes_run_as_python():
    ta = tf.TensorArray(tf.float64, size=2)
    x = tf.constant(X0)
    with tf.GradientTape() as tape:
        tape.watch(x)
        out = tf.cond(tf.constant(True), lambda: ta.write(0, x * x), lambda: ta)
        loss = tf.reduce_sum(out.stack()[0])
    np.testing.assert_allclose(tape.gradient(loss, x).numpy(), 2 * X0)


def test_mismatched_branches_raise_tf_errors():
    with tf.Graph().as_default():
        p = tf1.placeholder(tf.bool, [])
        x = tf.constant(X0)
        ta = tf.TensorArray(tf.float64, size=1)
        with pytest.raises(TypeError, match="same number, type, and overall structure"):
            tf.cond(p, lambda: ta.write(0, x), lambda: x)
        other = tf.TensorArray(tf.float32, size=1)
        with pytest.raises(TypeError, match="same number, type, and overall structure"):
            tf.cond(p, lambda: ta.write(0, x), lambda: other.write(0, tf.constant([1.0, 2.0, 3.0])))
        with pytest.raises(ValueError, match="same number, type, and overall structure"):
            tf.cond(p, lambda: ta.write(0, x), lambda: ta.write(0, tf.constant([1.0, 2.0], tf.float64)))
        # what the failed conds' branches wrote is undone: the array is still unwritten
        assert ta._items == [None]


def test_switch_case_with_an_untouched_default():
    # the default returns the array unwritten (element shape unknown): the last cond's
    # branches both return it as it was, which needs no If output
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float64, [3])
        k = tf1.placeholder(tf.int32, [])
        ta = tf.TensorArray(tf.float64, size=1)
        out = tf.switch_case(k, [lambda: ta.write(0, x), lambda: ta.write(0, tf.exp(x)), lambda: ta])
        st = out.stack()
        (dx,) = tf.gradients(tf.reduce_sum(st), x)
    for kv, want, d in ((0, X0, np.ones(3)), (1, np.exp(X0), np.exp(X0)), (2, 0 * X0, 0 * X0), (7, 0 * X0, 0 * X0)):
        got_st, got_d = _both(g, [st, dx], {x: X0, k: kv})
        np.testing.assert_allclose(got_st, [want], rtol=1e-14)
        np.testing.assert_allclose(got_d, d, rtol=1e-14)


def test_dynamic_arrays_of_different_lengths_in_the_two_branches():
    # the If's output has run-time rows: its value and size compile; its gradient (an If
    # taking a gradient of run-time rows) runs in the interpreter, as for any such cond
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float64, [3])
        p = tf1.placeholder(tf.bool, [])
        ta = tf.TensorArray(tf.float64, size=0, dynamic_size=True)
        out = tf.cond(p, lambda: ta.write(0, x).write(1, x * x), lambda: ta.write(0, -x))
        st, n = out.stack(), out.size()
        (dx,) = tf.gradients(tf.reduce_sum(st), x)
    s = tf1.Session(graph=g, config=tf1.ConfigProto(jitgrad_mode="interpret"))
    for taken, rows, d in ((True, [X0, X0 * X0], 1 + 2 * X0), (False, [-X0], -np.ones(3))):
        got_st, got_n = _both(g, [st, n], {x: X0, p: taken})
        np.testing.assert_allclose(got_st, rows, rtol=1e-14)
        assert got_n == len(rows)
        np.testing.assert_allclose(s.run(dx, {x: X0, p: taken}), d, rtol=1e-14)


def test_arrays_made_inside_the_branches():
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float64, [3])
        p = tf1.placeholder(tf.bool, [])
        out = tf.cond(p, lambda: tf.TensorArray(tf.float64, size=2).write(0, x),
                      lambda: tf.TensorArray(tf.float64, size=2).write(1, 3 * x))
        fetches = [out.stack(), out.read(1)]
    st, r1 = _both(g, fetches, {x: X0, p: True})
    np.testing.assert_array_equal(st, [X0, 0 * X0])
    np.testing.assert_array_equal(r1, 0 * X0)
    st, r1 = _both(g, fetches, {x: X0, p: False})
    np.testing.assert_array_equal(st, [0 * X0, 3 * X0])
    np.testing.assert_array_equal(r1, 3 * X0)


def test_tf_function_cond_returning_an_array(graph_mode):
    @tf.function
    def f(x, p):
        ta = tf.TensorArray(tf.float64, size=2)
        ta = tf.cond(p, lambda: ta.write(0, x), lambda: ta.write(1, x))
        return ta.stack()
    np.testing.assert_array_equal(f(tf.constant(X0), tf.constant(True)).numpy(), [X0, 0 * X0])
    np.testing.assert_array_equal(f(tf.constant(X0), tf.constant(False)).numpy(), [0 * X0, X0])


def _np_appended(x, n):
    """Row i: x * i for an even i, sin(x) for an odd one."""
    return np.array([x * i if i % 2 == 0 else np.sin(x) for i in range(n)]).reshape(n, 3)


@pytest.mark.parametrize("trips", [0, 1, 6])
def test_a_dynamic_array_both_branches_append_to_grows_compiled(trips):
    """``ta = tf.cond(p, lambda: ta.write(i, a), lambda: ta.write(i, b))`` in a loop: one
    append per iteration whichever branch runs (the growing form: compiled, no fallback).
    loss = sum(rows^2): d/dx = sum_even 2 i^2 x + sum_odd 2 sin x cos x;
    d2 = sum_even 2 i^2 + sum_odd 2 cos 2x."""
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float64, [3])
        n = tf1.placeholder(tf.int32, [])
        ta = tf.TensorArray(tf.float64, size=0, dynamic_size=True)

        def body(i, ta):
            fi = tf.cast(i, tf.float64)
            return i + 1, tf.cond(tf.equal(i % 2, 0), lambda: ta.write(i, x * fi), lambda: ta.write(i, tf.sin(x)))
        _, ta = tf.while_loop(lambda i, ta: i < n, body, [0, ta])
        st = ta.stack()
        (dx,) = tf.gradients(tf.reduce_sum(st * st), x)
        (ddx,) = tf.gradients(tf.reduce_sum(dx), x)
    st_v, dx_v, ddx_v = _both(g, [st, dx, ddx], {x: X0, n: trips})
    np.testing.assert_allclose(st_v, _np_appended(X0, trips), rtol=1e-14)
    even = sum(2.0 * i * i for i in range(0, trips, 2))
    odd = len(range(1, trips, 2))
    np.testing.assert_allclose(dx_v, even * X0 + odd * np.sin(2 * X0), rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(ddx_v, even + odd * 2 * np.cos(2 * X0), rtol=1e-13, atol=1e-15)


def test_a_dynamic_array_one_branch_appends_to_is_right():
    # not one append per iteration: the loop is traced in the general form (interpreted)
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float64, [3])
        n = tf1.placeholder(tf.int32, [])
        ta = tf.TensorArray(tf.float64, size=0, dynamic_size=True)

        def body(i, j, ta):
            p = tf.equal(i % 2, 0)
            return i + 1, tf.where(p, j + 1, j), tf.cond(p, lambda: ta.write(j, x * tf.cast(i, tf.float64)), lambda: ta)
        _, _, ta = tf.while_loop(lambda i, j, ta: i < n, body, [0, 0, ta])
        st = ta.stack()
    for mode in ("interpret", "compiled"):
        with tf1.Session(graph=g, config=tf1.ConfigProto(jitgrad_mode=mode)) as s:
            np.testing.assert_allclose(s.run(st, {x: X0, n: 5}), [0 * X0, 2 * X0, 4 * X0], rtol=1e-14)
