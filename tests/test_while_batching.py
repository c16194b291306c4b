"""The While batching rule (jitgrad/while_batching.py): a Hessian or jacobian through a
tf.while_loop runs its gradient loops ONCE over batched loop variables, for any row count,
instead of one copy per row (<= LOOP_ROWS_AT rows) or a while_loop over the rows (beyond).

Expected values: v_{t+1} = v_t + sin(b) from v_0 = 0 gives v_T = T sin(b), so for
loss = sum(v_T^2) the Hessian is diag(2 T^2 cos(2b)) and d v_T / d b = diag(T cos(b)) (by hand);
the tanh recurrence x_{t+1} = tanh(W x_t + b) is checked against central differences of its
gradient (backpropagated in numpy) and against the old paths (the rule removed)."""
import numpy as np
import pytest

import jitgrad as tf
from jitgrad import batched_gradients as bg
from _loop_jacobians import check_batch_jacobian, check_tape_jacobians, sin_loop

tf1 = tf.compat.v1
FEW, MANY = 4, bg.LOOP_ROWS_AT + 8     # rows below and beyond the old per-row copies


def _bvals(n):
    return np.linspace(-1.5, 1.5, n)




def _hessian_graph(n, make_loss):
    g = tf.Graph()
    with g.as_default():
        T = tf1.placeholder(tf.int32, [])
        b = tf1.placeholder(tf.float64, [n])
        # the batched pass itself (not tf.hessians, which would catch LoopPerRow): a row loop
        # or a refusal to batch the While raises here
        (h,) = bg.batched_hessians([make_loss(b, T)], [b])
    return g, T, b, h


def _whiles(g):
    return [op for op in g.get_operations() if op.type == "While"]


def _batched(ops):
    """The Whiles the rule built (named ``<loop>_batched``, maybe with a ``_k`` suffix)."""
    return [op for op in ops if op.type == "While" and "_batched" in op.name.rsplit("/", 1)[-1]]


def _run(g, fetch, feed, mode):
    with tf1.Session(graph=g, config=tf1.ConfigProto(jitgrad_mode=mode)) as s:
        return s.run(fetch, feed)


@pytest.mark.parametrize("mode", ["compiled", "interpret"])
@pytest.mark.parametrize("n", [FEW, MANY])
def test_hessian_through_a_loop_with_a_fed_trip_count(n, mode):
    g, T, b, h = _hessian_graph(n, lambda b, T: tf.reduce_sum(sin_loop(b, T) ** 2))
    x = _bvals(n)
    before = tf.cache_info()["fallbacks"]
    for t in (0, 1, 3, 7):   # one kernel for every trip count
        np.testing.assert_allclose(_run(g, h, {T: t, b: x}, mode), np.diag(2 * t * t * np.cos(2 * x)),
                                   rtol=1e-12, atol=1e-12)
    assert tf.cache_info()["fallbacks"] == before


def test_the_gradient_loops_are_batched_not_copied():
    # the same While ops for 1, FEW and MANY rows; the ones the rule built carry [B] + shape
    counts = {}
    for n in (1, FEW, MANY):
        g = _hessian_graph(n, lambda b, T: tf.reduce_sum(sin_loop(b, T) ** 2))[0]
        whiles = _whiles(g)
        counts[n] = len(whiles)
        batched = _batched(whiles)
        assert batched, [op.name for op in whiles]
        for op in batched:
            specs = op.get_attr("var_specs")
            assert any(d is not None and len(d) == 2 and d[0] == n for d, _ in specs), specs
    assert counts[1] == counts[FEW] == counts[MANY], counts


@pytest.mark.parametrize("n", [FEW, MANY])
def test_maximum_iterations_bounds_the_batched_loop(n):
    g, T, b, h = _hessian_graph(n, lambda b, T: tf.reduce_sum(
        sin_loop(b, 1000, maximum_iterations=T) ** 2))
    x = _bvals(n)
    for mode in ("compiled", "interpret"):
        np.testing.assert_allclose(_run(g, h, {T: 5, b: x}, mode), np.diag(50 * np.cos(2 * x)), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("n", [FEW, MANY])
def test_static_trip_count_foldl(n):
    # a counted loop of static length (stacks of static shape): acc = S sin(b), S = sum(c)
    c = np.array([0.5, -1.0, 2.0, 0.25])
    S = c.sum()

    def loss(b, T):
        acc = tf.foldl(lambda a, e: a + e * tf.sin(b), tf.constant(c), initializer=tf.zeros_like(b))
        return tf.reduce_sum(acc ** 2)
    g, T, b, h = _hessian_graph(n, loss)
    x = _bvals(n)
    for mode in ("compiled", "interpret"):
        np.testing.assert_allclose(_run(g, h, {b: x}, mode), np.diag(2 * S * S * np.cos(2 * x)), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("n", [FEW, MANY])
def test_nested_loops(n):
    # T outer iterations of 3 inner ones: v_T = 3 T sin(b)
    def loss(b, T):
        def outer(i, v):
            _, w = tf.while_loop(lambda j, w: j < 3, lambda j, w: (j + 1, w + tf.sin(b)), [0, v])
            return i + 1, w
        _, v = tf.while_loop(lambda i, v: i < T, outer, [0, tf.zeros_like(b)])
        return tf.reduce_sum(v ** 2)
    g, T, b, h = _hessian_graph(n, loss)
    x = _bvals(n)
    for mode in ("compiled", "interpret"):
        for t in (0, 2):
            np.testing.assert_allclose(_run(g, h, {T: t, b: x}, mode), np.diag(2 * 9 * t * t * np.cos(2 * x)),
                                       rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- tanh recurrence
def _weights(n):
    rng = np.random.RandomState(n)
    return rng.randn(n, n) / np.sqrt(n), rng.randn(n, 1) * 0.3


def _tanh_grad(W, b, T):
    """d sum(x_T^2) / d b for x_{t+1} = tanh(W x_t + b), x_0 = 0, by backpropagation in numpy."""
    xs = [np.zeros_like(b)]
    for _ in range(T):
        xs.append(np.tanh(W @ xs[-1] + b))
    g, gb = 2 * xs[-1], np.zeros_like(b)
    for t in range(T, 0, -1):
        pre = g * (1 - xs[t] ** 2)
        gb += pre
        g = W.T @ pre
    return gb


def _tanh_loss(W, T):
    def loss(b, _):
        _, xT = tf.while_loop(lambda t, x: t < T, lambda t, x: (t + 1, tf.tanh(tf.matmul(tf.constant(W), x) + b)),
                              [0, tf.zeros_like(b)])
        return tf.reduce_sum(xT ** 2)
    return loss


def _tanh_hessian_graph(n, T):
    W, _ = _weights(n)
    g = tf.Graph()
    with g.as_default():
        b = tf1.placeholder(tf.float64, [n, 1])
        (h,) = tf.hessians(_tanh_loss(W, T)(b, None), b)
    return g, b, h


@pytest.mark.parametrize("n", [FEW, MANY])
def test_tanh_recurrence_hessian_against_finite_differences_and_the_old_paths(n, monkeypatch):
    T = 6
    W, bv = _weights(n)
    g, b, h = _tanh_hessian_graph(n, T)
    got = _run(g, h, {b: bv}, "compiled").reshape(n, n)
    np.testing.assert_allclose(_run(g, h, {b: bv}, "interpret").reshape(n, n), got, rtol=1e-12, atol=1e-13)
    eps = 1e-5
    fd = np.empty((n, n))
    for k in range(n):
        e = np.zeros_like(bv)
        e[k] = eps
        fd[:, k] = ((_tanh_grad(W, bv + e, T) - _tanh_grad(W, bv - e, T)) / (2 * eps)).ravel()
    np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-8)
    monkeypatch.delitem(bg._RULES, "While")   # the old paths: copies (FEW) or a loop over the rows (MANY)
    g_old, b_old, h_old = _tanh_hessian_graph(n, T)
    assert len(_whiles(g_old)) != len(_whiles(g)) or n > bg.LOOP_ROWS_AT
    np.testing.assert_allclose(_run(g_old, h_old, {b_old: bv}, "compiled").reshape(n, n), got, rtol=1e-12,
                               atol=1e-13)


def test_tape_jacobians_in_a_function():
    check_tape_jacobians(_bvals(MANY))


def test_batch_jacobian_in_a_function():
    check_batch_jacobian(np.stack([_bvals(MANY), _bvals(MANY)[::-1] * 0.5]))


# ---------------------------------------------------------------- a condition on batched values
def _loop_on_dy(x):
    """identity forward; its gradient is 3 dy, by a while_loop whose condition reads dy (its
    trip count could differ per row: while_batching_pred.py, tests/test_while_batching_pred.py)."""
    @tf.custom_gradient
    def f(x):
        def grad(dy):
            stop = tf.cast(tf.reduce_sum(dy * dy) >= 0.0, tf.int32) * 3
            _, r = tf.while_loop(lambda i, r: i < stop, lambda i, r: (i + 1, r + dy), [0, tf.zeros_like(dy)])
            return r
        return tf.identity(x), grad
    return f(x)


@pytest.mark.parametrize("n", [FEW, MANY])
def test_a_condition_reading_batched_values_is_batched(n):
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float64, [n])
        y = _loop_on_dy(x)
        (j,) = bg.batched_jacobian(y, [x])   # (MANY rows: LoopPerRow here without the rule)
        assert _batched(_whiles(g))
    for mode in ("compiled", "interpret"):
        np.testing.assert_allclose(_run(g, j, {x: _bvals(n)}, mode), 3 * np.eye(n), rtol=0, atol=0)


def _custom_grad_jacobian(n, grad_loop):
    """jacobian of an identity whose gradient is ``grad_loop(dy, T)`` (a while_loop in the
    gradient graph that reads the batched cotangent as a loop variable or a capture)."""
    g = tf.Graph()
    with g.as_default():
        T = tf1.placeholder(tf.int32, [])
        x = tf1.placeholder(tf.float64, [n])

        @tf.custom_gradient
        def f(x):
            return tf.identity(x), lambda dy: grad_loop(dy, T)
        (j,) = bg.batched_jacobian(f(x), [x])
        assert _batched(_whiles(g))
    return g, T, x, j


@pytest.mark.parametrize("n", [FEW, MANY])
def test_a_captured_batched_value_makes_an_unbatched_variable_batched(n):
    # r starts unbatched (zeros of dy's shape) and adds the captured dy each step: the fixed
    # point batches it; the gradient is T dy, the jacobian T I
    g, T, x, j = _custom_grad_jacobian(n, lambda dy, T: tf.while_loop(
        lambda i, r: i < T, lambda i, r: (i + 1, r + dy), [0, tf.zeros_like(dy)])[1])
    for mode in ("compiled", "interpret"):
        for t in (0, 3):
            np.testing.assert_allclose(_run(g, j, {T: t, x: _bvals(n)}, mode), t * np.eye(n), rtol=0, atol=0)


def test_a_batched_variable_whose_next_value_is_unbatched_stays_batched():
    # r = dy on entry, ones after the first step: [B] + shape in every iteration
    n = FEW
    g, T, x, j = _custom_grad_jacobian(n, lambda dy, T: tf.while_loop(
        lambda i, r: i < T, lambda i, r: (i + 1, tf.ones_like(r)), [0, dy])[1])
    for mode in ("compiled", "interpret"):
        np.testing.assert_allclose(_run(g, j, {T: 0, x: _bvals(n)}, mode), np.eye(n), rtol=0, atol=0)
        np.testing.assert_allclose(_run(g, j, {T: 2, x: _bvals(n)}, mode), np.ones((n, n)), rtol=0, atol=0)


def _sin_times_foldl_jacobian(n):
    # y = sin(b) * S sin(b) (a static-length loop): dy/db = diag(S sin(2b)); the cotangent rows
    # are one-hot, scaled by sin(b) before the loop, so the batched pass checks that factor for
    # non-finite values at run time: a cond whose branches each hold the batched loop
    c = np.array([0.5, -1.0, 2.0, 0.25])
    g = tf.Graph()
    with g.as_default():
        b = tf1.placeholder(tf.float64, [n])
        acc = tf.foldl(lambda a, e: a + e * tf.sin(b), tf.constant(c), initializer=tf.zeros_like(b))
        (j,) = bg.batched_jacobian(tf.sin(b) * acc, [b])
    return g, b, j, c.sum()


@pytest.mark.parametrize("mode", ["compiled", "interpret"])
def test_the_batched_loop_inside_the_one_hot_or_dense_cond(mode, monkeypatch):
    n = FEW
    g, b, j, S = _sin_times_foldl_jacobian(n)
    ifs = [op for op in g.get_operations() if op.type == "If"]
    assert ifs and all(_batched(ifs[0].get_attr(br).graph.get_operations())
                       for br in ("then_branch", "else_branch"))
    x = _bvals(n)
    np.testing.assert_allclose(_run(g, j, {b: x}, mode), np.diag(S * np.sin(2 * x)), rtol=1e-12, atol=1e-14)
    xn = x.copy()
    xn[1] = np.nan
    got = _run(g, j, {b: xn}, mode)
    monkeypatch.delitem(bg._RULES, "While")
    g_old, b_old, j_old, _ = _sin_times_foldl_jacobian(n)
    np.testing.assert_array_equal(got, _run(g_old, j_old, {b_old: xn}, mode))   # NaN where the per-row loops put it
    assert np.isnan(got[:, 1]).all() and not np.isnan(np.delete(got, 1, axis=1)).any()


@pytest.mark.parametrize("n", [FEW, MANY])
def test_sliced_input_of_run_time_rows_built_per_row(n):
    # foldl over elems [T, n] (T fed): the second-order loop slices a batched input that the
    # ops before it built per row ([T] + row each, run-time rows): stacked time-major for it.
    # acc = T sin(b), so the Hessian of sum(acc^2) is diag(2 T^2 cos(2b))
    def loss(b, T):
        elems = tf.ones(tf.stack([T, 1]), tf.float64) * b
        acc = tf.foldl(lambda a, e: a + tf.sin(e), elems, initializer=tf.zeros_like(b))
        return tf.reduce_sum(acc ** 2)
    g, T, b, h = _hessian_graph(n, loss)
    assert len(_batched(_whiles(g))) == 2
    x = _bvals(n)
    before = tf.cache_info()["fallbacks"]
    for mode in ("compiled", "interpret"):
        for t in (0, 1, 3):
            np.testing.assert_allclose(_run(g, h, {T: t, b: x}, mode), np.diag(2 * t * t * np.cos(2 * x)),
                                       rtol=1e-12, atol=1e-12)
    assert tf.cache_info()["fallbacks"] == before


def test_rows_of_a_stacked_output_are_built_only_when_read():
    """A batched loop's stacked output ([T, B] + row) gets its per-row slices only if a
    per-row op reads them: a Hessian through tf.scan builds none, whatever B (it once built
    B StridedSlices per stack, left to DCE)."""
    def slices(n):
        g = tf.Graph()
        with g.as_default():
            b = tf.compat.v1.placeholder(tf.float64, [n])
            ys = tf.scan(lambda a, e: tf.sin(a * e + b), tf.constant(np.ones((5, n))), initializer=b)
            tf.hessians(tf.reduce_sum(ys ** 2), b)
        return sum(op.type == "StridedSlice" for op in g.get_operations())
    assert slices(FEW) == slices(MANY) == 0
