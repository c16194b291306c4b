"""The While batching rule for trip counts that differ per row (jitgrad/while_batching_pred.py):
a loop in the gradient graph whose condition reads the batched cotangent (here: a custom
gradient that grows its cotangent until it is large enough, or runs Newton's method on it
until converged), or whose maximum_iterations is batched, runs ONCE while any row runs.

Expected values by hand: the identity ``grow`` whose gradient is
``r = dy; while sum|r| < 1: r *= c`` with ``c = 1.5 + x^2`` has, for y = grow(x) * w and the
cotangent row b (one-hot w_b e_b), k_b = the least k with |w_b| c_b^k >= 1 trips, so
dy/dx = diag(w c^k), and d sum(dy/dx) / dx_b = w_b k_b c_b^(k_b - 1) 2 x_b. The other
cases are checked against numpy simulations of the per-row loops and against the
fallback (the rule removed: one loop per row), in compiled and interpreted runs.
"""
import numpy as np
import pytest

import jitgrad as tf
from jitgrad import batched_gradients as bg

tf1 = tf.compat.v1
FEW, MANY = 5, bg.LOOP_ROWS_AT + 8   # MANY: without the rule bg.* raises LoopPerRow
MODES = ("compiled", "interpret")


def _w(n):
    return np.linspace(0.05, 1.2, n)   # 6 trips for 0.05 ... none for 1.2


def _x(n):
    return np.linspace(-0.5, 0.5, n)


def _grow(dy, x, maximum_iterations=None, factor=None):
    """r = dy; while sum|r| < 1: r *= factor (1.5 + x^2 by default)."""
    c = 1.5 + x * x if factor is None else factor
    _, r = tf.while_loop(lambda i, r: tf.reduce_sum(tf.abs(r)) < 1.0, lambda i, r: (i + 1, r * c), [0, dy],
                         maximum_iterations=maximum_iterations)
    return r


def _identity_with_grad(x, grad):
    @tf.custom_gradient
    def f(x):
        return tf.identity(x), lambda dy: grad(dy, x)
    return f(x)


def _trips(w, c, limit=None):
    k = np.zeros(len(w), int)
    for b in range(len(w)):
        r = abs(w[b])
        while r < 1.0 and (limit is None or k[b] < limit[b]):
            r *= c[b]
            k[b] += 1
    return k


def _whiles(g):
    return [op for op in g.get_operations() if op.type == "While"]


def _batched(g):
    return [op for op in _whiles(g) if "_batched" in op.name.rsplit("/", 1)[-1]]


def _jacobian_graph(n, grad, removed=()):
    """(graph, x, dy/dx, d sum(dy/dx) / dx, stats) for y = f(x) * w, f the identity whose
    gradient is ``grad(dy, x)``; built by the batched pass itself (``removed``: without those rules)."""
    g = tf.Graph()
    stats = {}
    with g.as_default(), bg.rules_removed(*removed):
        x = tf1.placeholder(tf.float64, [n])
        (j,) = bg.batched_jacobian(_identity_with_grad(x, grad) * _w(n), [x], _stats=stats)
        (dj,) = tf.gradients(tf.reduce_sum(j), x)
    return g, x, j, dj, stats


def _run(g, fetch, feed, mode):
    with tf1.Session(graph=g, config=tf1.ConfigProto(jitgrad_mode=mode)) as s:
        return s.run(fetch, feed)


def _check_rule_used(g, stats):
    assert _batched(g) and "per_row" not in stats, (stats, [op.name for op in _whiles(g)])


def _check_against_fallback(n, grad, got, mode, xv=None):
    """(only below LOOP_ROWS_AT rows: beyond, the batched pass without the rule raises)"""
    if n > bg.LOOP_ROWS_AT:
        return
    g, x, j, dj, stats = _jacobian_graph(n, grad, removed=("While",))
    assert stats["per_row"] == ["While"] and not _batched(g)
    for a, b in zip(got, _run(g, [j, dj], {x: _x(n) if xv is None else xv}, mode)):
        np.testing.assert_allclose(a, b, rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("n", [FEW, MANY])
def test_trip_count_per_row_jacobian_and_its_gradient(n, mode):
    grad = _grow
    g, x, j, dj, stats = _jacobian_graph(n, grad)
    _check_rule_used(g, stats)
    w, xv = _w(n), _x(n)
    c = 1.5 + xv ** 2
    k = _trips(w, c)
    assert len(set(k)) > 3   # (the rows really stop at different iterations)
    got = _run(g, [j, dj], {x: xv}, mode)
    np.testing.assert_allclose(got[0], np.diag(w * c ** k), rtol=1e-13, atol=0)
    # the batched loop's own gradient (the While gradient of the rule's loop): per row
    np.testing.assert_allclose(got[1], w * k * c ** (k - 1.0) * 2 * xv, rtol=1e-12, atol=1e-15)
    _check_against_fallback(n, grad, got, mode)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("n", [FEW, MANY])
def test_maximum_iterations_reached_by_some_rows_only(n, mode):
    # an unbatched limit (3: the rows needing more stop there), and a batched one read from
    # the cotangent (floor(4 sum|dy|): 0 for the smallest w, more for larger)
    w, xv = _w(n), _x(n)
    c = 1.5 + xv ** 2
    for grad, limit in ((lambda dy, x: _grow(dy, x, maximum_iterations=3), np.full(n, 3)),
                        (lambda dy, x: _grow(dy, x, maximum_iterations=tf.cast(
                            4.0 * tf.reduce_sum(tf.abs(dy)), tf.int32)), np.floor(4 * w))):
        k, k_free = _trips(w, c, limit), _trips(w, c)
        assert (k < k_free).any() and (k[k_free > 0] > 0).any()
        g, x, j, dj, stats = _jacobian_graph(n, grad)
        _check_rule_used(g, stats)
        got = _run(g, [j, dj], {x: xv}, mode)
        np.testing.assert_allclose(got[0], np.diag(w * c ** k), rtol=1e-13, atol=0)
        np.testing.assert_allclose(got[1], w * k * c ** (k - 1.0) * 2 * xv, rtol=1e-12, atol=1e-15)
        _check_against_fallback(n, grad, got, mode)


def _newton(dy, x):
    """z with z^3 + a z = dy (a = 1 + x^2, per element), by Newton's method from z = dy until
    the row's residual is below 1e-12 (at most 50 steps): more steps for larger |dy|."""
    a = 1.0 + x * x

    def resid(z):
        return z * z * z + a * z - dy
    _, z = tf.while_loop(lambda i, z: tf.reduce_max(tf.abs(resid(z))) > 1e-12,
                         lambda i, z: (i + 1, z - resid(z) / (3.0 * z * z + a)), [0, dy], maximum_iterations=50)
    return z


def _newton_np(d, a):
    z, steps = d, 0
    while abs(z ** 3 + a * z - d) > 1e-12 and steps < 50:
        z = z - (z ** 3 + a * z - d) / (3 * z * z + a)
        steps += 1
    return z, steps


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("n", [FEW, MANY])
def test_newton_iterations_until_converged(n, mode):
    g, x, j, dj, stats = _jacobian_graph(n, _newton)
    _check_rule_used(g, stats)
    w, xv = _w(n), _x(n)
    sol = [_newton_np(wb, 1 + xb * xb) for wb, xb in zip(w, xv)]
    assert len({s for _, s in sol}) > 1   # (rows converge after different step counts)
    z = np.array([s for s, _ in sol])
    got = _run(g, [j, dj], {x: xv}, mode)
    np.testing.assert_allclose(got[0], np.diag(z), rtol=1e-14, atol=0)
    # implicit derivative: 3 z^2 z' + a z' + 2 x z = 0 for a = 1 + x^2
    np.testing.assert_allclose(got[1], -2 * xv * z / (3 * z * z + 1 + xv * xv), rtol=1e-8, atol=1e-12)
    _check_against_fallback(n, _newton, got, mode)


def test_a_body_undefined_at_a_stopped_rows_state():
    # r = 2 r + x sqrt(1 - sum r): where a row stopped (sum r >= 1) the body's value and its
    # derivative are NaN; the per-row loop never runs it there, and neither the batched
    # values nor their gradient may see it (the step selects per row, also in its gradient)
    def grad(dy, x):
        _, r = tf.while_loop(lambda i, r: tf.reduce_sum(r) < 1.0,
                             lambda i, r: (i + 1, 2.0 * r + x * tf.sqrt(1.0 - tf.reduce_sum(r))), [0, dy])
        return r
    n = FEW
    g, x, j, dj, stats = _jacobian_graph(n, grad)
    _check_rule_used(g, stats)
    w, xv = _w(n), _x(n) * 0.1

    def sim(xv):   # the per-row loops in numpy: column b of row b's result, d / dx_b of it
        out = np.zeros((n, n))
        for b in range(n):
            r = np.zeros(n)
            r[b] = w[b]
            while r.sum() < 1.0:
                r = 2 * r + xv * np.sqrt(1 - r.sum())
            out[b] = r
        return out
    want = sim(xv)
    eps = 1e-7
    fd = np.array([(sim(xv + eps * e).sum() - sim(xv - eps * e).sum()) / (2 * eps) for e in np.eye(n)])
    for mode in MODES:
        got = _run(g, [j, dj], {x: xv}, mode)
        assert np.isfinite(got[0]).all() and np.isfinite(got[1]).all()
        np.testing.assert_allclose(got[0], want, rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(got[1], fd, rtol=1e-6, atol=1e-8)
        _check_against_fallback(n, grad, got, mode, xv)


@pytest.mark.parametrize("n", [FEW, MANY])
def test_hessian_through_a_second_order_custom_gradient(n):
    # loss = sum(f(x)), f's gradient w * s(x), s the identity whose gradient grows its cotangent:
    # the Hessian's batched pass meets the loop on its cotangent rows w_b e_b: diag(w c^k)
    w, xv = _w(n), _x(n)
    c = 1.5 + xv ** 2
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float64, [n])

        @tf.custom_gradient
        def f(x):
            return tf.reduce_sum(x), lambda dy: dy * w * _identity_with_grad(x, _grow)
        (h,) = bg.batched_hessians([f(x)], [x])
        (h2,) = tf.hessians(f(x), x)
    assert _batched(g)
    for mode in MODES:
        for got in _run(g, [h, h2], {x: xv}, mode):
            np.testing.assert_allclose(got, np.diag(w * c ** _trips(w, c)), rtol=1e-13, atol=0)


def test_tape_jacobian_and_batch_jacobian_in_a_function():
    n, E = MANY, 3
    w, xv = _w(n), _x(n)
    xe = np.stack([xv, xv[::-1], 0.5 * xv])

    @tf.function
    def jac(x, xe):
        with tf.GradientTape(persistent=True) as tape:
            tape.watch([x, xe])
            y = _identity_with_grad(x, _grow) * w
            ye = _identity_with_grad(xe, lambda dy, x: _grow(dy, x, factor=1.5)) * w
        return tape.jacobian(y, x), tape.batch_jacobian(ye, xe)
    before = tf.cache_info()["fallbacks"]
    j, bj = jac(tf.constant(xv), tf.constant(xe))
    assert tf.cache_info()["fallbacks"] == before
    c = 1.5 + xv ** 2
    np.testing.assert_allclose(j.numpy(), np.diag(w * c ** _trips(w, c)), rtol=1e-13, atol=0)
    # batch_jacobian: cotangent column b is w_b in each of the E examples' row b: sum|r| = E |w_b| 1.5^k
    k = _trips(E * w, np.full(n, 1.5))
    np.testing.assert_allclose(bj.numpy(), np.stack([np.diag(w * 1.5 ** k)] * E), rtol=1e-13, atol=0)


# ---------------------------------------------------------------- what still falls back
@pytest.mark.parametrize("n", [FEW, MANY])
def test_a_body_that_could_fail_on_a_stopped_row_falls_back(n):
    # the body gathers at the row's counter: where a row stopped (i = 3) the gather would be
    # out of range, so the rule must not run the body there: per-row fallback
    table = np.array([1.5, 2.0, 3.0])

    def grad(dy, x):
        _, _, r = tf.while_loop(lambda i, r0, r: tf.logical_and(i < 3, tf.reduce_sum(tf.abs(r)) < 1.0),
                                lambda i, r0, r: (i + 1, r0, r * tf.gather(tf.constant(table), i)), [0, dy, dy])
        return r
    if n > bg.LOOP_ROWS_AT:
        with pytest.raises(bg.LoopPerRow):
            _jacobian_graph(n, grad)
        return
    g, x, j, dj, stats = _jacobian_graph(n, grad)
    assert stats["per_row"] == ["While"] and not _batched(g)
    w = _w(n)
    k = np.zeros(n, int)
    for b in range(n):   # the trips: the first 0..3 factors until |w_b| prod >= 1
        r = w[b]
        while k[b] < 3 and r < 1.0:
            r *= table[k[b]]
            k[b] += 1
    want = np.diag([w[b] * np.prod(table[:k[b]]) for b in range(n)])
    for mode in MODES:
        np.testing.assert_allclose(_run(g, j, {x: _x(n)}, mode), want, rtol=1e-14, atol=0)


@pytest.mark.parametrize("n", [FEW, MANY])
def test_inside_the_body_of_a_batched_loop(n):
    # v <- 0.9 grow(v) T times: the reverse loop's body holds the loop on its cotangent, so the
    # per-row rule runs inside the body the (unbatched-predicate) rule rebuilds; numpy's
    # per-row reverse pass: r = e_b, then per step back r = 0.9 r grown by 1.5 + v_t^2
    g = tf.Graph()
    stats = {}
    with g.as_default():
        x = tf1.placeholder(tf.float64, [n])
        T = tf1.placeholder(tf.int32, [])
        _, v = tf.while_loop(lambda t, v: t < T, lambda t, v: (t + 1, _identity_with_grad(v, _grow) * 0.9), [0, x])
        (j,) = bg.batched_jacobian(v, [x], _stats=stats)
    _check_rule_used(g, stats)
    xv = _x(n)
    for steps in (0, 3):
        vs = [xv * 0.9 ** t for t in range(steps)]
        want = np.eye(n)
        for b in range(n):
            for t in reversed(range(steps)):
                want[b] *= 0.9
                while np.abs(want[b]).sum() < 1.0:
                    want[b] *= 1.5 + vs[t] ** 2
        for mode in MODES:
            np.testing.assert_allclose(_run(g, j, {x: xv, T: steps}, mode), want, rtol=1e-14, atol=0)


@pytest.mark.parametrize("per_row_limit", [False, True])
def test_eager_jacobian_with_a_per_row_maximum_iterations(per_row_limit):
    # the eager jacobian's rows (pfor-like BatchedTensors, control_flow.while_loop) stop each at
    # its own limit too (it raised numpy's TypeError on a per-row maximum_iterations)
    n = FEW
    w, xv = _w(n), _x(n)
    c = 1.5 + xv ** 2
    limit = np.floor(4 * w) if per_row_limit else np.full(n, 3)

    def grad(dy, x):
        mi = tf.cast(4.0 * tf.reduce_sum(tf.abs(dy)), tf.int32) if per_row_limit else 3
        return _grow(dy, x, maximum_iterations=mi)
    x = tf.constant(xv)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = _identity_with_grad(x, grad) * w
    np.testing.assert_allclose(tape.jacobian(y, x).numpy(), np.diag(w * c ** _trips(w, c, limit)), rtol=1e-13, atol=0)


@pytest.mark.parametrize("mode", MODES)
def test_inside_the_one_hot_or_dense_cond(mode):
    # y = f(x) * 2 sin(x): the one-hot cotangent rows are scaled by a factor known at run time,
    # so the batched pass checks it for NaN in a cond whose branches each hold the loop; the
    # jacobian is diag(w c^k + 2 x cos x) with w = 2 sin x (by hand); with a NaN in x, NaN lands
    # where the per-row loops put it
    n = FEW

    def build(removed=()):
        g = tf.Graph()
        with g.as_default(), bg.rules_removed(*removed):
            x = tf1.placeholder(tf.float64, [n])
            (j,) = bg.batched_jacobian(_identity_with_grad(x, _grow) * tf.sin(x) * 2.0, [x])
        return g, x, j
    g, x, j = build()
    ifs = [op for op in g.get_operations() if op.type == "If"]
    assert ifs and all(_batched(ifs[0].get_attr(br).graph) for br in ("then_branch", "else_branch"))
    xv = _x(n) + 1.0
    w, c = 2 * np.sin(xv), 1.5 + xv ** 2
    np.testing.assert_allclose(_run(g, j, {x: xv}, mode), np.diag(w * c ** _trips(w, c) + 2 * xv * np.cos(xv)),
                               rtol=1e-13, atol=0)
    xv[1] = np.nan
    got = _run(g, j, {x: xv}, mode)
    g_old, x_old, j_old = build(("While",))
    np.testing.assert_array_equal(got, _run(g_old, j_old, {x_old: xv}, mode))
    assert np.isnan(got[:, 1]).all() and not np.isnan(np.delete(got, 1, axis=1)).any()
