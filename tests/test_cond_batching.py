"""The If batching rule (jitgrad/cond_batching.py): Hessians and jacobians through tf.cond /
tf.switch_case / tf.case build ONE If of batched branches (predicate the same for every row)
or a per-row select of both branches (predicate per row), instead of one If per row.

Expected values by hand: for loss = sum(sin(b)^2) the Hessian is diag(2 cos(2b)), for
sum(b^3) diag(6b), for sum(b^4) diag(12 b^2); a loop of T steps whose body adds sin(b) on
m = min(k, T) steps and b^2 on the others gives v = m sin(b) + (T - m) b^2, so the Hessian of
sum(v^2) is diag(2 (v'^2 + v v'')), v' = m cos(b) + 2 (T - m) b, v'' = -m sin(b) + 2 (T - m).
Every case also runs with the rule removed (``_no_if_rule``: the per-row fallback) and in the
reference interpreter; NaN / inf inputs must give the fallback's NaN pattern."""
import contextlib

import numpy as np
import pytest

import jitgrad as tf
from jitgrad import batched_gradients as bg

tf1 = tf.compat.v1
FEW, MANY = 4, bg.LOOP_ROWS_AT + 8
MODES = ("compiled", "interpret")


def _no_if_rule(removed=True):
    """Within: the batched pass has no If rule (every If goes per row), when ``removed``."""
    return bg.rules_removed("If") if removed else contextlib.nullcontext()


def _bvals(n):
    return np.linspace(-1.5, 1.5, n)


def _run(g, fetch, feed, mode):
    with tf1.Session(graph=g, config=tf1.ConfigProto(jitgrad_mode=mode)) as s:
        return s.run(fetch, feed)


def _ifs(g):
    return [op for op in g.get_operations() if op.type == "If"]


def _hessian_graph(n, make_loss, dtype=tf.float64):
    """make_loss(b, k) -> scalar; k: a fed int32 scalar. The batched pass is called itself
    (tf.hessians would hide a failure to batch behind its per-row fallback)."""
    g = tf.Graph()
    with g.as_default():
        k = tf1.placeholder(tf.int32, [])
        b = tf1.placeholder(dtype, [n])
        (h,) = bg.batched_hessians([make_loss(b, k)], [b])
    return g, k, b, h


def _both(n, make_loss, feeds, expect=None, rtol=1e-12):
    """Runs the Hessian with the rule and without, compiled and interpreted, on each feed
    ({'k': .., 'b': ..}); checks they agree (NaN where the fallback has NaN) and match
    ``expect(feed)`` when given. Returns (graph with the rule, graph without)."""
    g, k, b, h = _hessian_graph(n, make_loss)
    with _no_if_rule():
        g0, k0, b0, h0 = _hessian_graph(n, make_loss)
    for f in feeds:
        ref = _run(g0, h0, {k0: f.get("k", 0), b0: f["b"]}, "compiled")
        if expect is not None:
            np.testing.assert_allclose(ref, expect(f), rtol=rtol, atol=rtol)
        for mode in MODES:
            got = _run(g, h, {k: f.get("k", 0), b: f["b"]}, mode)
            np.testing.assert_allclose(got, ref, rtol=rtol, atol=rtol, equal_nan=True)
            np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    return g, g0


def _sin2_or_cube(b, k):
    return tf.cond(k > 0, lambda: tf.reduce_sum(tf.sin(b) ** 2), lambda: tf.reduce_sum(b ** 3))


# ---------------------------------------------------------------- predicate the same for every row
@pytest.mark.parametrize("n", [FEW, MANY])
def test_hessian_through_a_cond_with_a_fed_predicate(n):
    x = _bvals(n)
    g, g0 = _both(n, _sin2_or_cube, [{"k": 1, "b": x}, {"k": 0, "b": x}],
                  lambda f: np.diag(2 * np.cos(2 * f["b"])) if f["k"] > 0 else np.diag(6 * f["b"]))
    # one batched If (the gradient's If_grad rebuilt on [B] rows), not one per row
    assert len(_ifs(g)) == 4 and [op for op in _ifs(g) if op.name.endswith("_batched")]
    assert len(_ifs(g0)) == 3 + n


def test_the_batched_if_does_not_grow_with_the_rows():
    counts = {n: len(_ifs(_hessian_graph(n, _sin2_or_cube)[0])) for n in (1, FEW, MANY)}
    assert counts[1] == counts[FEW] == counts[MANY], counts
    g = _hessian_graph(MANY, _sin2_or_cube)[0]
    (op,) = [op for op in _ifs(g) if op.name.endswith("_batched")]
    assert (MANY, MANY) in [tuple(d) for d, _ in op.get_attr("out_specs")]   # ([B] + b's shape)


@pytest.mark.parametrize("pred", [True, False])
def test_constant_predicate(pred):
    x = _bvals(FEW)
    _both(FEW, lambda b, k: tf.cond(tf.constant(pred), lambda: tf.reduce_sum(tf.sin(b) ** 2),
                                    lambda: tf.reduce_sum(b ** 4)),
          [{"b": x}], lambda f: np.diag(2 * np.cos(2 * x)) if pred else np.diag(12 * x * x))


@pytest.mark.parametrize("n", [FEW, MANY])
def test_data_dependent_predicate_inside_the_function(n):
    # tf.cond(b[0] > 0, ...): a forward value, so the same for every cotangent row
    def loss(b, k):
        return tf.cond(b[0] > 0, lambda: tf.reduce_sum(tf.sin(b) ** 2), lambda: tf.reduce_sum(b ** 3))
    x = _bvals(n)
    _both(n, loss, [{"b": x}, {"b": -x}],
          lambda f: np.diag(2 * np.cos(2 * f["b"])) if f["b"][0] > 0 else np.diag(6 * f["b"]))


def test_one_branch_constant_in_b():
    # the else branch's gradient does not depend on the cotangent: its output is broadcast
    x = _bvals(FEW)
    _both(FEW, lambda b, k: tf.cond(k > 0, lambda: tf.reduce_sum(b ** 4), lambda: tf.reduce_sum(3.0 * b)),
          [{"k": 1, "b": x}, {"k": 0, "b": x}],
          lambda f: np.diag(12 * f["b"] ** 2) if f["k"] > 0 else np.zeros((FEW, FEW)))


@pytest.mark.parametrize("n", [FEW, MANY])
def test_switch_case_and_case(n):
    fns = [lambda b: tf.reduce_sum(tf.sin(b) ** 2), lambda b: tf.reduce_sum(b ** 3), lambda b: tf.reduce_sum(b ** 4)]
    hand = [lambda x: np.diag(2 * np.cos(2 * x)), lambda x: np.diag(6 * x), lambda x: np.diag(12 * x * x)]
    x = _bvals(n)

    def switch(b, k):
        return tf.switch_case(k, [lambda f=f: f(b) for f in fns])

    def case(b, k):
        return tf.case([(tf.equal(k, 0), lambda: fns[0](b)), (tf.equal(k, 1), lambda: fns[1](b))],
                       default=lambda: fns[2](b))
    for loss in (switch, case):
        g, g0 = _both(n, loss, [{"k": i, "b": x} for i in range(3)], lambda f: hand[f["k"]](f["b"]))
        assert len(_ifs(g)) < len(_ifs(g0))


def test_jacobian_through_a_cond():
    # y = cond(k > 0, sin(b) * b, b^2): dy/db = diag(cos(b) b + sin(b)) or diag(2b)
    x = _bvals(MANY)
    for structured in (True, False):
        graphs = []
        for rule in (True, False):
            with _no_if_rule(removed=not rule):
                g = tf.Graph()
                with g.as_default():
                    k = tf1.placeholder(tf.int32, [])
                    b = tf1.placeholder(tf.float64, [MANY])
                    y = tf.cond(k > 0, lambda: tf.sin(b) * b, lambda: b * b)
                    (j,) = bg.batched_jacobian(y, [b], structured=structured)
            graphs.append((g, k, b, j))
        for kv, want in ((1, np.diag(np.cos(x) * x + np.sin(x))), (0, np.diag(2 * x))):
            for mode in MODES:
                for g, k, b, j in graphs:
                    np.testing.assert_allclose(_run(g, j, {k: kv, b: x}, mode), want, rtol=1e-12, atol=1e-12)
        assert len(_ifs(graphs[0][0])) < len(_ifs(graphs[1][0]))


def test_tape_jacobian_and_hessian_in_a_function():
    # GradientTape.jacobian inside a jitgrad.function takes the batched pass too
    x = _bvals(MANY)

    @tf.function
    def jac(b, k):
        with tf.GradientTape() as outer:
            outer.watch(b)
            with tf.GradientTape() as inner:
                inner.watch(b)
                y = tf.cond(k > 0, lambda: tf.sin(b) * b, lambda: b * b)
            j = inner.jacobian(y, b)
            s = tf.reduce_sum(j, axis=0)
        return j, outer.jacobian(s, b)
    before = tf.cache_info()["fallbacks"]
    j, h = jac(tf.constant(x), tf.constant(1))
    np.testing.assert_allclose(j.numpy(), np.diag(np.cos(x) * x + np.sin(x)), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(h.numpy(), np.diag(2 * np.cos(x) - x * np.sin(x)), rtol=1e-12, atol=1e-12)
    j, h = jac(tf.constant(x), tf.constant(0))
    np.testing.assert_allclose(j.numpy(), np.diag(2 * x), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(h.numpy(), 2 * np.eye(MANY), rtol=1e-12, atol=1e-12)
    assert tf.cache_info()["fallbacks"] == before


def test_nonfinite_inputs_give_the_fallbacks_pattern():
    def loss(b, k):
        return tf.cond(k > 0, lambda: tf.reduce_sum(tf.sqrt(b) * b), lambda: tf.reduce_sum(tf.tanh(b) ** 2))
    x = np.array([0.5, np.nan, np.inf, 0.0, -1.0, 2.0])
    _both(6, loss, [{"k": 1, "b": x}, {"k": 0, "b": x}, {"k": 1, "b": np.abs(_bvals(6))}])


# ---------------------------------------------------------------- conds in a loop body
def _loop_with_cond(b, k, T=5):
    def body(i, v):
        return i + 1, tf.cond(i < k, lambda: v + tf.sin(b), lambda: v + b * b)
    _, v = tf.while_loop(lambda i, v: i < T, body, [0, tf.zeros_like(b)])
    return tf.reduce_sum(v ** 2)


def _loop_hand(f, T=5):
    m = min(max(f["k"], 0), T)
    x = f["b"]
    v = m * np.sin(x) + (T - m) * x * x
    d1 = m * np.cos(x) + 2 * (T - m) * x
    d2 = -m * np.sin(x) + 2 * (T - m)
    return np.diag(2 * (d1 * d1 + v * d2))


@pytest.mark.parametrize("n", [FEW, MANY])
def test_cond_in_a_while_body(n):
    x = _bvals(n)
    g, g0 = _both(n, _loop_with_cond, [{"k": m, "b": x} for m in (0, 2, 7)], _loop_hand, rtol=1e-11)
    # the While rule and the If rule together: the gradient loops are batched with ONE If in
    # their bodies (the fallback unrolls the If per row inside the batched body)
    def body_ifs(graph):
        return [[o.name for o in op.get_attr("body").graph.get_operations() if o.type == "If"]
                for op in graph.get_operations() if op.type == "While" and "_batched" in op.name]
    # (the body also holds the replayed per-row If, which DCE drops)
    assert any(any(name.endswith("_batched") for name in ifs) for ifs in body_ifs(g)), body_ifs(g)
    assert max(len(ifs) for ifs in body_ifs(g)) <= 2, body_ifs(g)
    assert max(len(ifs) for ifs in body_ifs(g0)) > n, body_ifs(g0)


def test_cond_in_a_while_body_against_finite_differences():
    # the Hessian's columns are central differences of the gradient (by hand, _loop_hand's d1)
    n, T = FEW, 5
    x = _bvals(n)
    g, k, b, h = _hessian_graph(n, _loop_with_cond)
    got = _run(g, h, {k: 3, b: x}, "compiled")

    def grad(xv):
        m = 3
        v = m * np.sin(xv) + (T - m) * xv * xv
        return 2 * v * (m * np.cos(xv) + 2 * (T - m) * xv)
    eps = 1e-6
    fd = np.stack([(grad(x + eps * e) - grad(x - eps * e)) / (2 * eps) for e in np.eye(n)], axis=1)
    np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-6)


def _growing_loop_in_a_branch(b, k):
    # acc gains (i + 1) sin(b) as row i, i < 3: sum(acc^2) = 14 sum(sin(b)^2), Hessian diag(28 cos(2b));
    # a loop variable without a static shape, which the While rule does not take
    n = int(b.shape[0])

    def grow():
        _, acc = tf.while_loop(
            lambda i, a: i < 3,
            lambda i, a: (i + 1, tf.concat([a, tf.sin(b)[None] * tf.cast(i + 1, tf.float64)], 0)),
            [0, tf.zeros([0, n], tf.float64)], shape_invariants=[tf.TensorShape([]), tf.TensorShape([None, n])])
        return tf.reduce_sum(acc ** 2)
    return tf.cond(k > 0, grow, lambda: tf.reduce_sum(b ** 3))


@pytest.mark.parametrize("n", [FEW, MANY])
def test_a_loop_the_while_rule_refuses_inside_a_branch(n):
    # beyond LOOP_ROWS_AT rows the pass must not copy that loop per row inside the batched If
    # (nor the If per row): it gives up (LoopPerRow) and tf.hessians loops over the rows
    g = tf.Graph()
    with g.as_default():
        k = tf1.placeholder(tf.int32, [])
        b = tf1.placeholder(tf.float64, [n])
        if n > bg.LOOP_ROWS_AT:
            with pytest.raises(bg.LoopPerRow):
                bg.batched_hessians([_growing_loop_in_a_branch(b, k)], [b])
        (h,) = tf.hessians(_growing_loop_in_a_branch(b, k), b)
    x = _bvals(n)
    for mode in MODES:
        for kv, want in ((1, np.diag(28 * np.cos(2 * x))), (0, np.diag(6 * x))):
            np.testing.assert_allclose(_run(g, h, {k: kv, b: x}, mode), want, rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- predicate per row (select)
@tf.custom_gradient
def _clip_sqrt(v):
    """Value v; its gradient takes sqrt(v) dy where sum(dy) > 0, else -cos(v) dy: the
    predicate reads the cotangent, so in a batched pass it differs per row."""
    def grad(dy):
        return tf.cond(tf.reduce_sum(dy) > 0, lambda: dy * tf.sqrt(v), lambda: -dy * tf.cos(v))
    return tf.identity(v), grad


_CTS = np.array([[1., 0, 0, 0], [-1, 0, 0, 0], [0, 2, 0, 0], [0, 0, -3, 1], [0, 0, 0, 1]])


def _select_graph(branch=_clip_sqrt, rule=True):
    """(graph, b, batched vjp rows of branch(b) for _CTS, gradient of sum(rows^2) w.r.t. b, stats)."""
    with _no_if_rule(removed=not rule):
        g = tf.Graph()
        with g.as_default():
            b = tf1.placeholder(tf.float64, [4])
            st = {}
            (j,) = bg.batched_gradients([branch(b)], [b], [_CTS], _stats=st)
            gg = tf.gradients(tf.reduce_sum(j * j), b)[0]
    return g, b, j, gg, st


def _per_row_reference(x):
    """j and gg of _select_graph from one tf.gradients per row (no batched pass: the values
    TF computes, checked against TF 2.21 for x = [.5, 1, 2, 3])."""
    g = tf.Graph()
    with g.as_default():
        b = tf1.placeholder(tf.float64, [4])
        y = _clip_sqrt(b)
        j = tf.stack([tf.gradients(y, b, grad_ys=tf.constant(c))[0] for c in _CTS])
        gg = tf.gradients(tf.reduce_sum(j * j), b)[0]
    return _run(g, [j, gg], {b: x}, "interpret")


def _select_hand(x):
    """Row r of the vjp: sqrt(x) c_r where sum(c_r) > 0, else -cos(x) c_r."""
    with np.errstate(invalid="ignore"):
        return np.stack([c * np.sqrt(x) if c.sum() > 0 else -c * np.cos(x) for c in _CTS])


@pytest.mark.parametrize("x", [np.array([0.5, 1.0, 2.0, 3.0]), np.array([-0.5, 4.0, 0.0, -2.0]),
                               np.array([np.nan, -1.0, np.inf, 0.0])])
def test_per_row_predicate_selects_per_row(x):
    g, b, j, gg, st = _select_graph()
    assert "per_row" not in st, st
    g0, b0, j0, gg0, st0 = _select_graph(rule=False)
    assert st0["per_row"] == ["If"]
    # one select of both branches instead of an If per row
    assert len(_ifs(g)) == 1 and len(_ifs(g0)) >= 1 + len(_CTS)   # (1: the per-row template, which DCE drops)
    assert [op for op in g.get_operations() if op.name.endswith("If_selected")]
    ref, ref_gg = _per_row_reference(x)
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(ref, _select_hand(x) + 0.0 * ref)   # (+0 * ref: -0 vs 0)
    for have, want in zip(_run(g0, [j0, gg0], {b0: x}, "compiled"), (ref, ref_gg)):   # (the fallback)
        np.testing.assert_array_equal(np.isnan(have), np.isnan(want))
        np.testing.assert_allclose(have, want, rtol=1e-12, equal_nan=True)
    for mode in MODES:
        got, got_gg = _run(g, [j, gg], {b: x}, mode)
        np.testing.assert_array_equal(got, ref)
        # the gradient of the selected rows: only the taken branch's derivative reaches a row
        # (sqrt's derivative is inf at 0 and NaN below: an untaken sqrt must not leak through)
        np.testing.assert_array_equal(np.isnan(got_gg), np.isnan(ref_gg))
        np.testing.assert_allclose(got_gg, ref_gg, rtol=1e-12, equal_nan=True)


def test_per_row_predicate_with_a_gather_falls_back():
    # a gather in a branch could index out of range for a row that does not take it: per row
    @tf.custom_gradient
    def f(v):
        def grad(dy):
            return tf.cond(tf.reduce_sum(dy) > 0, lambda: tf.gather(dy, [1, 0, 3, 2]), lambda: dy * v)
        return tf.identity(v), grad
    g, b, j, gg, st = _select_graph(f)
    assert st["per_row"] == ["If"]
    x = np.array([1.0, 2.0, 3.0, 4.0])
    want = np.stack([c[[1, 0, 3, 2]] if c.sum() > 0 else c * x for c in _CTS])
    for mode in MODES:
        np.testing.assert_array_equal(_run(g, j, {b: x}, mode), want)


def test_branch_with_a_side_effect_falls_back():
    # a gradient If whose branch prints: B batched rows must print B times, so per row
    @tf.custom_gradient
    def f(v):
        def grad(dy):
            def loud():
                tf.print("row")
                return dy * tf.cos(v)
            return tf.cond(tf.reduce_sum(v) > 0, loud, lambda: dy * v)
        return tf.identity(v), grad
    g, b, j, gg, st = _select_graph(f)
    assert st["per_row"] == ["If"]
    for x in (np.array([1.0, 2.0, 3.0, 4.0]), -np.array([1.0, 2.0, 3.0, 4.0])):
        want = _CTS * (np.cos(x) if x.sum() > 0 else x)
        for mode in MODES:
            np.testing.assert_array_equal(_run(g, j, {b: x}, mode), want)
