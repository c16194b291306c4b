"""tf.cond / tf.while_loop and friends: values, errors and gradients (first
and second order) against hand-derived values and finite differences, in
both Session modes (interpret and compiled)."""
import collections

import numpy as np
import pytest

import jitgrad as tf
from jitgrad.errors import InvalidArgumentError

pytestmark = pytest.mark.usefixtures("graph_mode")

ph = tf.compat.v1.placeholder


def run(fetches, feed=None, graph=None):
    sess = tf.compat.v1.Session(graph=graph or tf.compat.v1.get_default_graph())
    return sess.run(fetches, feed)


def fd(f, x, eps=1e-6):
    """Central finite differences of scalar f at array x (float64)."""
    x = np.array(x, np.float64)
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        g[i] = (f(x + e) - f(x - e)) / (2 * eps)
    return g


@pytest.fixture
def graph(request):
    """A default graph; in compiled mode every run must be native (no
    interpreter fallback) unless the test is marked ``may_fall_back``."""
    before = tf.cache_info()["fallbacks"]
    g = tf.Graph()
    with g.as_default():
        yield g
    if tf.get_default_mode() == "compiled" and not request.node.get_closest_marker("may_fall_back"):
        assert tf.cache_info()["fallbacks"] == before, "a run fell back to the interpreter"


# ---------------------------------------------------------------- cond
def test_cond_values_and_gradients_follow_the_taken_branch(graph):
    x = ph(tf.float32, [])
    p = ph(tf.bool, [])
    y = tf.cond(p, lambda: x * x * x, lambda: tf.sin(x))
    (g,) = tf.gradients(y, x)
    (gg,) = tf.gradients(g, x)
    sess = tf.compat.v1.Session(graph=graph)
    for xv in (0.5, 2.0):
        out = sess.run([y, g, gg], {x: xv, p: True})
        np.testing.assert_allclose(out, [xv ** 3, 3 * xv ** 2, 6 * xv], rtol=1e-6)
        out = sess.run([y, g, gg], {x: xv, p: False})
        np.testing.assert_allclose(out, [np.sin(xv), np.cos(xv), -np.sin(xv)], rtol=1e-6)


def test_cond_input_used_by_the_other_branch_only_gets_zeros(graph):
    x = ph(tf.float32, [2])
    w = ph(tf.float32, [2])
    p = ph(tf.bool, [])
    y = tf.reduce_sum(tf.cond(p, lambda: x * 2.0, lambda: w * x))
    gx, gw = tf.gradients(y, [x, w])
    feed = {x: [1.0, 2.0], w: [3.0, 4.0]}
    out = run([gx, gw], {**feed, p: True})
    np.testing.assert_array_equal(out[0], [2.0, 2.0])
    np.testing.assert_array_equal(out[1], [0.0, 0.0])   # TF (cond_v2): zeros, not None
    out = run([gx, gw], {**feed, p: False})
    np.testing.assert_array_equal(out[0], [3.0, 4.0])
    np.testing.assert_array_equal(out[1], [1.0, 2.0])
    # an input neither branch differentiates: None (and zeros when asked)
    z = ph(tf.float32, [])
    assert tf.gradients(y, z) == [None]


def test_nested_cond_and_structured_outputs(graph):
    x = ph(tf.float32, [])
    a = ph(tf.int32, [])
    Pair = collections.namedtuple("Pair", "u v")

    def inner():
        return tf.cond(a > 1, lambda: Pair(x * 10.0, {"k": x + 1.0}), lambda: Pair(x * 20.0, {"k": x - 1.0}))

    out = tf.cond(a > 0, inner, lambda: Pair(-x, {"k": x * x}))
    assert isinstance(out, Pair) and set(out.v) == {"k"}
    (g,) = tf.gradients(out.u + out.v["k"], x)
    for av, expect in ((2, (30.0, 4.0, 11.0)), (1, (60.0, 2.0, 21.0)), (0, (-3.0, 9.0, 5.0))):
        u, k, gv = run([out.u, out.v["k"], g], {x: 3.0, a: av})
        np.testing.assert_allclose([u, k, gv], expect, rtol=1e-6)


def test_cond_strict_and_singleton_lists(graph):
    x = tf.constant(1.0)
    r2 = tf.cond(tf.constant(True), lambda: [x + 1.0], lambda: [x - 1.0])
    assert isinstance(r2, list) and len(r2) == 1
    # TF 2.21 builds a graph's cond as cond_v2: a singleton list is kept even without strict
    # (and in tf.case); only the eager cond unpacks it
    r1 = tf.compat.v1.cond(tf.constant(True), lambda: [x + 1.0], lambda: [x - 1.0])
    assert isinstance(r1, list) and len(r1) == 1
    r3 = tf.compat.v1.cond(tf.constant(False), lambda: [x + 1.0], lambda: [x - 1.0], strict=True)
    assert isinstance(r3, list)
    r4 = tf.case([(tf.constant(True), lambda: [x * 3.0])], default=lambda: [x])
    assert isinstance(r4, list) and len(r4) == 1
    assert run([r2[0], r1[0], r3[0], r4[0]]) == [2.0, 2.0, 0.0, 3.0]


def test_cond_errors(graph):
    x = tf.constant(1.0)
    with pytest.raises(TypeError):
        tf.cond(tf.constant(1), lambda: x, lambda: x)          # not a bool
    two = tf.cond(tf.constant([True, False]), lambda: x, lambda: x)   # built (TF 2.21: built, then its
    with pytest.raises(InvalidArgumentError):                        # grappler aborts), fails when run
        run(two)
    with pytest.raises(TypeError):
        tf.cond(tf.constant(True), lambda: x, lambda: (x, x))  # structure
    with pytest.raises(TypeError):
        tf.cond(tf.constant(True), lambda: x, lambda: tf.constant(1))  # dtype
    with pytest.raises(TypeError):
        tf.cond(tf.constant(True), x, lambda: x)
    p = ph(tf.bool, None)
    y = tf.cond(p, lambda: x, lambda: x * 2.0)
    with pytest.raises(InvalidArgumentError):
        run(y, {p: [True, False]})                              # non-scalar at run time


# ---------------------------------------------------------------- while_loop
def test_while_loop_fed_trip_count_value_and_gradients(graph):
    x = ph(tf.float32, [])
    n = ph(tf.int32, [])
    i, y = tf.while_loop(lambda i, y: i < n, lambda i, y: (i + 1, y * x), [tf.constant(0), tf.constant(1.0)])
    (g,) = tf.gradients(y, x)
    (gg,) = tf.gradients(g, x)
    sess = tf.compat.v1.Session(graph=graph)
    for nv in (0, 1, 3, 6):
        iv, yv, gv, ggv = sess.run([i, y, g, gg], {x: 1.5, n: nv})
        assert iv == nv
        np.testing.assert_allclose(yv, 1.5 ** nv, rtol=1e-6)
        np.testing.assert_allclose(gv, nv * 1.5 ** (nv - 1) if nv else 0.0, rtol=1e-5)
        np.testing.assert_allclose(ggv, nv * (nv - 1) * 1.5 ** (nv - 2) if nv > 1 else 0.0, rtol=1e-5)


def test_while_loop_rnn_gradient_matches_finite_differences(graph):
    rng = np.random.default_rng(0)
    Wv = rng.normal(size=(4, 4)) * 0.5
    x0v = rng.normal(size=(4,))
    bv = rng.normal(size=(4,)) * 0.1
    W = ph(tf.float64, [4, 4])
    x0 = ph(tf.float64, [4])
    b = ph(tf.float64, [4])
    steps = ph(tf.int32, [])

    def body(t, x):
        return t + 1, tf.tanh(tf.linalg.matvec(W, x) + b)
    _, xT = tf.while_loop(lambda t, x: t < steps, body, (tf.constant(0), x0))
    loss = tf.reduce_sum(xT * xT)
    gW, gx0, gb = tf.gradients(loss, [W, x0, b])
    feed = {W: Wv, x0: x0v, b: bv, steps: 7}
    out = run([loss, gW, gx0, gb], feed)

    def f(Wa, xa, ba):
        for _ in range(7):
            xa = np.tanh(Wa @ xa + ba)
        return np.sum(xa * xa)
    np.testing.assert_allclose(out[0], f(Wv, x0v, bv), rtol=1e-12)
    np.testing.assert_allclose(out[1], fd(lambda w: f(w, x0v, bv), Wv), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(out[2], fd(lambda xa: f(Wv, xa, bv), x0v), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(out[3], fd(lambda ba: f(Wv, x0v, ba), bv), rtol=1e-6, atol=1e-9)


def test_second_derivative_through_while_matches_finite_differences(graph):
    x = ph(tf.float64, [2])
    _, y = tf.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, tf.sin(y) * x), [0, x])
    loss = tf.reduce_sum(y * y)
    (g,) = tf.gradients(loss, x)
    (h,) = tf.gradients(g[0], x)

    def f(xa):
        ya = xa
        for _ in range(3):
            ya = np.sin(ya) * xa
        return np.sum(ya * ya)
    xv = np.array([0.7, -1.2])
    gv, hv = run([g, h], {x: xv})
    np.testing.assert_allclose(gv, fd(f, xv), rtol=1e-6)
    np.testing.assert_allclose(hv, fd(lambda xa: fd(f, xa, 1e-4)[0], xv, 1e-4), rtol=1e-4)


def test_nested_loops_and_loops_inside_conds_and_conds_inside_loops(graph):
    x = ph(tf.float32, [])
    n = ph(tf.int32, [])

    def outer_body(i, acc):
        # inner loop: multiply by x, i+1 times
        _, p = tf.while_loop(lambda j, p: j <= i, lambda j, p: (j + 1, p * x), [0, 1.0])
        step = tf.cond(tf.equal(i % 2, 0), lambda: p, lambda: -p)
        return i + 1, acc + step
    _, s = tf.while_loop(lambda i, acc: i < n, outer_body, [0, 0.0])
    y = tf.cond(n > 2, lambda: tf.while_loop(lambda k, v: k < 2, lambda k, v: (k + 1, v * s), [0, 1.0])[1],
                lambda: s)
    (g,) = tf.gradients(y, x)
    for nv in (2, 4):
        xv = 1.3
        coeffs = [(-1) ** i for i in range(nv)]
        sv = sum(c * xv ** (i + 1) for i, c in enumerate(coeffs))
        dsv = sum(c * (i + 1) * xv ** i for i, c in enumerate(coeffs))
        yv, gv = run([y, g], {x: xv, n: nv})
        if nv > 2:
            np.testing.assert_allclose([yv, gv], [sv * sv, 2 * sv * dsv], rtol=1e-5)
        else:
            np.testing.assert_allclose([yv, gv], [sv, dsv], rtol=1e-5)


@pytest.mark.may_fall_back   # a loop variable that grows has no static shape: interpreted
def test_maximum_iterations_shape_invariants_and_nested_loop_vars(graph):
    x = ph(tf.float32, [])
    State = collections.namedtuple("State", "count vals")
    init = State(tf.constant(0), {"a": tf.zeros([0]), "b": x})

    def body(s):
        return (State(s.count + 1, {"a": tf.concat([s.vals["a"], [s.vals["b"]]], 0), "b": s.vals["b"] * 2.0}),)
    (out,) = tf.while_loop(lambda s: s.count < 100, body, (init,), maximum_iterations=4,
                           shape_invariants=(State(tf.TensorShape([]),
                                                   {"a": tf.TensorShape([None]), "b": tf.TensorShape([])}),))
    assert isinstance(out, State) and out.vals["a"].shape.as_list() == [None]
    c, a, b = run([out.count, out.vals["a"], out.vals["b"]], {x: 1.5})
    assert c == 4
    np.testing.assert_allclose(a, [1.5, 3.0, 6.0, 12.0])
    np.testing.assert_allclose(b, 24.0)
    (g,) = tf.gradients(tf.reduce_sum(out.vals["a"]), x)
    np.testing.assert_allclose(run(g, {x: 1.5}), 1 + 2 + 4 + 8)


def test_while_loop_errors(graph):
    x = tf.constant(1.0)
    with pytest.raises(ValueError):   # structure changes
        tf.while_loop(lambda a, b: a < 2.0, lambda a, b: (a + 1.0,), [x, x])
    with pytest.raises(TypeError):    # dtype changes
        tf.while_loop(lambda a: a < 2.0, lambda a: tf.cast(a, tf.int32), [x])
    with pytest.raises(ValueError, match="shape_invariants"):   # shape changes without an invariant
        tf.while_loop(lambda a: tf.reduce_sum(a) < 2.0, lambda a: tf.concat([a, a], 0), [tf.ones([1])])
    with pytest.raises(ValueError):   # invariant incompatible with the initial value
        tf.while_loop(lambda a: True, lambda a: a, [tf.ones([2])], shape_invariants=[tf.TensorShape([3])])
    with pytest.raises(TypeError):
        tf.while_loop(lambda a: a, lambda a: a, [x])             # condition is not a bool
    with pytest.raises(TypeError):
        tf.while_loop(None, lambda a: a, [x])
    with pytest.raises(TypeError):
        tf.while_loop(lambda a: True, lambda a: a, [x], maximum_iterations=2.5)


def test_back_prop_false_and_unconnected_and_stop_gradients(graph):
    x = ph(tf.float32, [])
    body = lambda i, y: (i + 1, y * x)  # noqa: E731
    _, y_nobp = tf.while_loop(lambda i, y: i < 3, body, [0, x], back_prop=False)
    assert tf.gradients(y_nobp, x) == [None]
    np.testing.assert_allclose(run(tf.gradients(y_nobp, x, unconnected_gradients="zero")[0], {x: 2.0}), 0.0)
    _, y = tf.while_loop(lambda i, y: i < 3, body, [0, x])
    z = y * x
    (g_stop,) = tf.gradients(z, x, stop_gradients=[y])
    np.testing.assert_allclose(run(g_stop, {x: 2.0}), 16.0)      # d(y*x)/dx with y held
    for method in (tf.AggregationMethod.ADD_N, tf.AggregationMethod.EXPERIMENTAL_TREE,
                   tf.AggregationMethod.EXPERIMENTAL_ACCUMULATE_N):
        (g,) = tf.gradients(z + y, x, aggregation_method=method)
        np.testing.assert_allclose(run(g, {x: 2.0}), 5 * 16.0 + 4 * 8.0)


def test_map_fn_scan_foldl_foldr(graph):
    xs = ph(tf.float32, [None])
    m = tf.map_fn(lambda v: v * v, xs)
    m2 = tf.map_fn(lambda p: (p[0] * p[1], p[0] + p[1]), (xs, xs * 2.0), fn_output_signature=(tf.float32, tf.float32))
    sc = tf.scan(lambda a, v: a * v, xs)
    sci = tf.scan(lambda a, v: a + v, xs, initializer=10.0, reverse=True)
    fl = tf.foldl(lambda a, v: a - v, xs, initializer=0.0)
    fr = tf.foldr(lambda a, v: a * 2.0 + v, xs)
    g_m, g_sc, g_fr = [tf.gradients(tf.reduce_sum(t), xs)[0] for t in (m, sc, fr)]
    xv = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    out = run([m, m2[0], m2[1], sc, sci, fl, fr, g_m, g_sc, g_fr], {xs: xv})
    np.testing.assert_allclose(out[0], xv * xv)
    np.testing.assert_allclose(out[1], 2 * xv * xv)
    np.testing.assert_allclose(out[2], 3 * xv)
    np.testing.assert_allclose(out[3], np.cumprod(xv))
    np.testing.assert_allclose(out[4], 10.0 + np.cumsum(xv[::-1])[::-1])
    np.testing.assert_allclose(out[5], -xv.sum())
    # foldr from the last row: a=4; a=2a+3; a=2a+2; a=2a+1
    np.testing.assert_allclose(out[6], ((4 * 2 + 3) * 2 + 2) * 2 + 1)
    np.testing.assert_allclose(out[7], 2 * xv)
    cp = np.cumprod(xv)
    np.testing.assert_allclose(out[8], [sum(cp[k] / xv[i] for k in range(i, 4)) for i in range(4)], rtol=1e-6)
    np.testing.assert_allclose(out[9], [1.0, 2.0, 4.0, 8.0])   # 8*x3 + 4*x2 + 2*x1 + x0


def test_case_and_switch_case(graph):
    i = ph(tf.int32, [])
    x = ph(tf.float32, [])
    s = tf.switch_case(i, [lambda: x, lambda: x * 2.0, lambda: x * 3.0])
    s_def = tf.switch_case(i, {1: lambda: x * 5.0, 0: lambda: x}, default=lambda: -x)
    c = tf.case([(i < 1, lambda: x + 100.0), (i < 3, lambda: x + 200.0)], default=lambda: x)
    (g,) = tf.gradients(s, x)
    sess = tf.compat.v1.Session(graph=graph)
    assert sess.run([s, s_def, c, g], {i: 1, x: 2.0}) == [4.0, 10.0, 202.0, 2.0]
    assert sess.run([s, s_def, c, g], {i: 7, x: 2.0}) == [6.0, -2.0, 2.0, 3.0]   # out of range: last branch
    assert sess.run([s, s_def, c, g], {i: 5, x: 2.0}) == [6.0, -2.0, 2.0, 3.0]
    assert sess.run([s, s_def, c, g], {i: 0, x: 2.0}) == [2.0, 2.0, 102.0, 1.0]


def test_loop_reads_a_variable(graph):
    v = tf.Variable(2.0)
    _, y = tf.while_loop(lambda k, y: k < 3, lambda k, y: (k + 1, y * v), [0, 1.0])
    (g,) = tf.gradients(y, v)
    sess = tf.compat.v1.Session(graph=graph)
    sess.run(tf.compat.v1.global_variables_initializer())
    np.testing.assert_allclose(sess.run([y, g]), [8.0, 12.0])


def test_assigning_a_variable_inside_a_body_happens_every_iteration(graph):
    # (more in tests/test_control_flow_effects.py)
    v = tf.Variable(1.0)

    def body(k):
        with tf.control_dependencies([v.assign_add(1.0)]):
            return k + 1
    k = tf.while_loop(lambda k: k < 3, body, [0])
    # a plain graph's body runs only what its outputs use, as TF 2.21's: this assignment never
    unused = tf.while_loop(lambda k: k < 3, lambda k: (v.assign_add(1.0), k + 1)[1], [0])
    sess = tf.compat.v1.Session(graph=graph)
    sess.run(tf.compat.v1.global_variables_initializer())
    assert sess.run(k) == [3] and sess.run(v) == 4.0
    assert sess.run(unused) == [3] and sess.run(v) == 4.0


def test_hessians_of_inputs_whose_size_is_known_only_at_run_time(graph):
    x = ph(tf.float64, [None])
    y = tf.reduce_sum(x * x * x) + tf.reduce_sum(x) ** 2
    (h,) = tf.hessians(y, x)
    assert h.shape.as_list() == [None, None]
    for xv in ([1.0, 2.0, 3.0], [0.5], [-1.0, 4.0]):
        xv = np.array(xv)
        np.testing.assert_allclose(run(h, {x: xv}), np.diag(6 * xv) + 2.0, rtol=1e-12)
    x2 = ph(tf.float64, [None, 2])
    (h2,) = tf.hessians(tf.reduce_sum(tf.sin(x2) * x2[:, :1]), x2)
    xv = np.array([[0.3, -0.7], [1.1, 0.4], [0.2, 0.9]])

    def f(flat):
        a = flat.reshape(3, 2)
        return np.sum(np.sin(a) * a[:, :1])
    fd_h = np.array([fd(lambda v, i=i: fd(f, v, 1e-4)[i], xv.reshape(-1), 1e-4) for i in range(6)])
    np.testing.assert_allclose(run(h2, {x2: xv}).reshape(6, 6), fd_h, rtol=1e-5, atol=1e-7)


def _fd_hessian(f, x, eps=1e-4):
    """Central second differences of scalar f at vector x (float64)."""
    n = x.size
    h = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            ei, ej = np.eye(n)[i] * eps, np.eye(n)[j] * eps
            h[i, j] = (f(x + ei + ej) - f(x + ei - ej) - f(x - ei + ej) + f(x - ei - ej)) / (4 * eps * eps)
    return h


@pytest.mark.parametrize("stop", ["cond", "maximum_iterations"])
def test_hessians_through_a_loop_with_a_fed_trip_count(graph, stop):
    """tf.hessians batches the gradient graph's loops per row (batched_gradients.py); the
    rows' saved stacks (as long as the fed trip count) go from one row's loop straight to
    the next, so the kernel never packs values of unknown shape (before: the interpreter)."""
    W = np.array([[0.5, -0.3, 0.2], [0.1, 0.4, -0.6], [-0.2, 0.3, 0.7]])
    x, n = ph(tf.float64, [3]), ph(tf.int32, [])

    def body(j, a):
        return j + 1, tf.tanh(tf.linalg.matvec(tf.constant(W), a)) * x
    if stop == "cond":
        _, a = tf.while_loop(lambda j, a: j < n, body, [0, x])
    else:
        _, a = tf.while_loop(lambda j, a: True, body, [0, x], maximum_iterations=n)
    (h,) = tf.hessians(tf.reduce_sum(a), x)
    sess = tf.compat.v1.Session(graph=graph)
    xv = np.array([0.3, -0.5, 0.8])
    for steps in (0, 1, 4):
        def f(v):   # the loop in numpy: a_0 = x, a_{k+1} = tanh(W a_k) * x
            a = v
            for _ in range(steps):
                a = np.tanh(W @ a) * v
            return a.sum()
        hv = sess.run(h, {x: xv, n: steps})
        np.testing.assert_allclose(hv, _fd_hessian(f, xv), rtol=1e-6, atol=1e-7)
        assert np.abs(hv - hv.T).max() <= 1e-12


@pytest.mark.parametrize("fed", [True, False])
def test_gradients_of_gradients_through_a_squaring_loop_equal_the_closed_form(graph, fed):
    """x <- x * x * a, T times: x_T = a^(2^T - 1) x0^(2^T) (by induction), so with
    P = 2^T: dx_T/dx0 = P a^(P-1) x0^(P-1), and its derivatives are
    P (P-1) a^(P-1) x0^(P-2) (by x0) and P (P-1) a^(P-2) x0^(P-1) (by a).
    The gradients of the gradient run the reverse loop's own reverse loop; the graph
    fixture checks the compiled runs do not fall back to the interpreter."""
    x0, a = ph(tf.float64, []), ph(tf.float64, [])
    trips = [0, 1, 3] if fed else [2]
    n = ph(tf.int32, []) if fed else tf.constant(trips[0])
    _, xT = tf.while_loop(lambda i, x: i < n, lambda i, x: (i + 1, x * x * a), [0, x0])
    (g,) = tf.gradients(xT, x0)
    second = tf.gradients(g, [x0, a])
    xv, av = 1.1, 0.9
    for t in trips:
        p = 2 ** t
        got = run([xT, g] + second, {x0: xv, a: av, **({n: t} if fed else {})})
        want = [av ** (p - 1) * xv ** p, p * av ** (p - 1) * xv ** (p - 1),
                p * (p - 1) * av ** (p - 1) * xv ** (p - 2),
                p * (p - 1) * av ** (p - 2) * xv ** (p - 1) if p > 1 else 0.0]
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15)


def test_a_runtime_error_inside_a_loop_body_is_raised_not_crashed(graph):
    table = ph(tf.float32, [4])
    start = ph(tf.int32, [])
    _, acc = tf.while_loop(lambda i, a: i < start + 3, lambda i, a: (i + 1, a + tf.gather(table, i)),
                           [start, tf.constant(0.0)])
    tv = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    assert run(acc, {table: tv, start: 1}) == 9.0
    with pytest.raises(InvalidArgumentError):
        run(acc, {table: tv, start: 2})          # reads table[4] in the third iteration
    assert run(acc, {table: tv, start: 0}) == 6.0   # and the kernel still works afterwards


def test_switch_case_keys_must_be_contiguous_from_zero():
    """TF refuses branch keys that are not 0..n-1 ({0: f, 2: g} silently ran a branch for
    index 1); pairs in any order are sorted by key, the last one the default."""
    one, two = (lambda: tf.constant(1.0)), (lambda: tf.constant(2.0))
    for branches in ({0: one, 2: two}, {1: one, 2: two}, [(0, one), (2, two)]):
        with pytest.raises(ValueError, match="contiguous range"):
            tf.switch_case(tf.constant(1), branches)
    assert float(tf.switch_case(tf.constant(1), [(1, one), (0, two)])) == 1.0
    assert float(tf.switch_case(tf.constant(7), [(1, one), (0, two)])) == 1.0     # default: key 1
