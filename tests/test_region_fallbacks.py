"""Control flow that used to run in the reference interpreter and now compiles
(issue 12's smaller fallbacks): an int64 tf.shape of a grown loop variable,
... Each case: compiled == interpreted, values against numpy / hand
derivation, ``explain`` without FALLBACK, one kernel for every trip count."""
import numpy as np
import pytest

import jitgrad as tf
from jitgrad.cache import set_enabled
from _graph_testing import numeric_grad
from test_differential import run_both

tf1 = tf.compat.v1


@pytest.fixture
def one_kernel():
    """Asserts the test compiled exactly one kernel (no disk cache: a compile is counted)."""
    set_enabled(False)
    tf.clear_cache()
    before = tf.cache_info()
    yield
    after = tf.cache_info()
    set_enabled(None)
    assert after["compiles"] - before["compiles"] == 1
    assert after["fallbacks"] == before["fallbacks"]


def _explain(g, fetches, feed):
    sess = tf1.Session(graph=g, config=tf1.ConfigProto(jitgrad_mode="compiled"))
    return str(sess.explain(fetches, feed))


# ---------------------------------------------------------------- 1. int64 shapes of grown values
def _growing(out_type):
    """A loop appending two rows per iteration to a [1, 3] accumulator; tf.shape of it as out_type."""
    g = tf.Graph()
    with g.as_default():
        n = tf1.placeholder(tf.int32, [])
        w = tf1.placeholder(tf.float64, [3])

        def body(i, h, x):
            h = tf.tanh(h * w)
            return i + 1, h, tf.concat([x, [h], [h * 2.0]], 0)
        _, _, x = tf.while_loop(lambda i, h, x: i < n, body, [0, tf.ones([3], tf.float64), tf.zeros([1, 3], tf.float64)],
                                shape_invariants=[tf.TensorShape([]), tf.TensorShape([3]), tf.TensorShape([None, 3])])
        shape = tf.shape(x, out_type=out_type)
        rows = tf.shape(x, out_type=out_type)[0] * 10
    return g, n, w, x, shape, rows


@pytest.mark.parametrize("out_type", [tf.int64, tf.int32])
def test_the_shape_of_a_grown_variable_in_either_int_type_compiles_to_one_kernel(out_type, one_kernel):
    g, n, w, x, shape, rows = _growing(out_type)
    for trips in (0, 3, 1000):
        feed = {n: trips, w: [0.5, -1.0, 2.0]}
        compiled, interpreted = run_both(g, [shape, rows], feed)   # (asserts no fallback)
        want = np.array([1 + 2 * trips, 3], out_type.np)
        for got in (compiled, interpreted):
            assert got[0].dtype == out_type.np and got[1].dtype == out_type.np
            np.testing.assert_array_equal(got[0], want)
            assert int(got[1]) == 10 * (1 + 2 * trips)
    assert "FALLBACK" not in _explain(g, [shape, rows], {n: 2, w: [1.0, 1.0, 1.0]})


# ---------------------------------------------------------------- 2. draws of a loop nested in a loop
def _dropout_in_nested_loops(width=4, seed=5):
    """A dropout mask drawn in a while_loop of m + i iterations nested in one of n
    iterations (n, m fed): y = sum over all draws of sum(2 x^2 mask), and the masks
    summed alongside. By hand: dy/dx = 4 x * masks, d(sum dy/dx)/dx = 4 masks."""
    g = tf.Graph()
    with g.as_default():
        tf.random.set_seed(seed)     # the graph's seed (TF 2: an eager set_seed does not reach it)
        x = tf1.placeholder(tf.float32, [width])
        n, m = tf1.placeholder(tf.int32, []), tf1.placeholder(tf.int32, [])

        def outer(i, s, masks):
            def inner(j, a, mm):
                mask = tf.cast(tf.random.uniform([width], seed=1) > 0.5, tf.float32)
                return j + 1, a + 2.0 * x * x * mask, mm + mask
            _, a, mm = tf.while_loop(lambda j, a, mm: j < m + i, inner, [0, tf.zeros([width]), tf.zeros([width])])
            return i + 1, s + tf.reduce_sum(a), masks + mm
        _, y, masks = tf.while_loop(lambda i, s, ms: i < n, outer, [0, 0.0, tf.zeros([width])])
        (gx,) = tf.gradients(y, x)
        (hx,) = tf.gradients(tf.reduce_sum(gx), x)
    return g, x, n, m, [y, masks, gx, hx]


def test_gradients_through_draws_of_a_loop_nested_in_a_loop_compile_to_one_kernel(one_kernel):
    xv = np.arange(1, 5, dtype=np.float32)
    feeds = ((3, 2), (0, 4), (4, 0), (1, 1), (6, 5))
    runs = {}
    for mode in ("interpret", "compiled"):   # (each its own graph: the ops' draws go on from run to run)
        g, x, n, m, fetches = _dropout_in_nested_loops()
        sess = tf1.Session(graph=g, config=tf1.ConfigProto(jitgrad_mode=mode))
        before = tf.cache_info()["fallbacks"]
        runs[mode] = [sess.run(fetches, {x: xv, n: trips, m: inner}) for trips, inner in feeds]
        assert tf.cache_info()["fallbacks"] == before
    for ra, rb in zip(runs["interpret"], runs["compiled"]):   # the same draws, the same arithmetic: bit for bit
        for a, b in zip(ra, rb):
            np.testing.assert_array_equal(a, b)
    for (y, masks, gx, hx), (trips, inner) in zip(runs["compiled"], feeds):
        assert masks.max() <= sum(inner + i for i in range(trips))
        np.testing.assert_array_equal(y, np.float32((2 * xv * xv * masks).sum()))
        np.testing.assert_array_equal(gx, 4 * xv * masks)
        np.testing.assert_array_equal(hx, 4 * masks)
    assert 0 < masks.max() < sum(5 + i for i in range(6))   # (the masks are neither all 0 nor all 1)
    assert "FALLBACK" not in _explain(g, fetches, {x: xv, n: 3, m: 2})


def _assert_compiled_runs_keep_no_memory(sess, fetch, feed):
    """Twenty more runs after three warm-ups grow the resident set by < 100 MiB (each test's
    stacks are ~25 MiB a run: 500 MiB if a run kept them), all compiled."""
    before = tf.cache_info()["fallbacks"]

    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096
    for _ in range(3):
        sess.run(fetch, feed)
    start = rss()
    for _ in range(20):
        sess.run(fetch, feed)
    assert rss() - start < 100 * 2 ** 20
    assert tf.cache_info()["fallbacks"] == before


def test_the_ragged_stacks_of_nested_draws_are_freed_every_run():
    """Each run saves sum(m + i) rows of 64 KiB (about 25 MiB at n=10, m=20): memory
    that is not freed shows within a few runs."""
    g, x, n, m, fetches = _dropout_in_nested_loops(width=16384)
    sess = tf1.Session(graph=g, config=tf1.ConfigProto(jitgrad_mode="compiled"))
    feed = {x: np.ones(16384, np.float32), n: 10, m: 20}
    _assert_compiled_runs_keep_no_memory(sess, fetches[2], feed)


def _dropout_three_loops_deep(m_inner, width=4):
    """Three nested while_loops of n, m (or m + i: "grows") and m + j iterations, a mask
    drawn in the innermost: y = sum(x^2 * masks). The middle loop's saved stacks are
    ragged, so the outer loop's are ragged stacks of ragged stacks; "fixed": n of them
    of one length, "grows": of different lengths."""
    g = tf.Graph()
    with g.as_default():
        tf.random.set_seed(4)     # the graph's seed (TF 2: an eager set_seed does not reach it)
        x = tf1.placeholder(tf.float32, [width])
        n, m = tf1.placeholder(tf.int32, []), tf1.placeholder(tf.int32, [])

        def loop(depth, k):
            def body(i, s, ms):
                if depth == 1:
                    mask = tf.cast(tf.random.uniform([width], seed=1) > 0.5, tf.float32)
                    return i + 1, s + tf.reduce_sum(x * x * mask), ms + mask
                a, mm = loop(depth - 1, m + i if depth == 2 or m_inner == "grows" else m)
                return i + 1, s + a, ms + mm
            return tf.while_loop(lambda i, s, ms: i < k, body, [0, 0.0, tf.zeros([width])])[1:]
        y, masks = loop(3, n)
        (gx,) = tf.gradients(y, x)
        (hx,) = tf.gradients(tf.reduce_sum(gx), x)
    return g, x, n, m, [y, masks, gx, hx]


@pytest.mark.parametrize("m_inner", ["grows", "fixed"])
def test_draws_three_loops_deep_compile_to_one_kernel_with_the_hand_gradients(m_inner, one_kernel):
    # (the outer loop's saved draws are a ragged stack of ragged stacks: rows of descriptors of
    # stacks of descriptors, lower_control.py)
    xv = np.arange(1, 5, dtype=np.float32)
    feeds = ((3, 2), (0, 2), (2, 0), (1, 1), (4, 3))
    runs = {}
    for mode in ("interpret", "compiled"):
        g, x, n, m, fetches = _dropout_three_loops_deep(m_inner)
        sess = tf1.Session(graph=g, config=tf1.ConfigProto(jitgrad_mode=mode))
        before = tf.cache_info()["fallbacks"]
        runs[mode] = [sess.run(fetches, {x: xv, n: trips, m: inner}) for trips, inner in feeds]
        assert tf.cache_info()["fallbacks"] == before
    for ra, rb in zip(runs["interpret"], runs["compiled"]):   # the same draws, the same arithmetic: bit for bit
        for a, b in zip(ra, rb):
            np.testing.assert_array_equal(a, b)
    for y, masks, gx, hx in runs["compiled"]:
        np.testing.assert_array_equal(y, np.float32((xv * xv * masks).sum()))
        np.testing.assert_array_equal(gx, 2 * xv * masks)
        np.testing.assert_array_equal(hx, 2 * masks)
    assert runs["compiled"][0][1].max() > 0 and not runs["compiled"][1][1].any()   # (n = 0: no draw)
    assert "FALLBACK" not in _explain(g, fetches, {x: xv, n: 3, m: 2})


def test_the_stacks_of_stacks_of_draws_three_loops_deep_are_freed_every_run():
    """Each run saves 506 rows of 64 KiB (n = m = 6, "grows": sum over i < 6, j < 6 + i of
    6 + j draws; about 32 MiB) in 6 stacks of stacks: memory not freed shows within a few runs."""
    g, x, n, m, fetches = _dropout_three_loops_deep("grows", width=16384)
    sess = tf1.Session(graph=g, config=tf1.ConfigProto(jitgrad_mode="compiled"))
    _assert_compiled_runs_keep_no_memory(sess, fetches[2], {x: np.ones(16384, np.float32), n: 6, m: 6})


# ---------------------------------------------------------------- 3. a cond whose branches differ in rank
def _rank_changing_cond():
    g = tf.Graph()
    with g.as_default():
        p = tf1.placeholder(tf.bool, [])
        x = tf1.placeholder(tf.float32, [3])
        y = tf.cond(p, lambda: tf.reduce_sum(x * x), lambda: tf.reshape(x, [3, 1]) * x)   # [] or [3, 3]
        s = tf.reduce_sum(tf.sin(y))
        (gx,) = tf.gradients(s, x)
        (hx,) = tf.gradients(tf.reduce_sum(gx), x)
        extra = {"rank": tf.rank(y), "shape": tf.shape(y, out_type=tf.int64), "broadcast": y + tf.ones([2]),
                 "matmul": tf.matmul(y, tf.ones([3, 2]))}
    return g, p, x, [y, s, gx, hx], extra


# What TF 2.21 computes for this graph in graph mode (tf.compat.v1.Session, run with
# /work/benchenv): y has unknown static rank; per branch
TF_RANK_COND = {
    True: (14.0, 0.99061, [0.27347, 0.54695, 0.82042], [-23.50110, -47.27568, -71.05026], 0, []),
    False: ([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [3.0, 6.0, 9.0]], 2.03879, [-6.52394, 2.31415, -3.60609],
            [-19.39601, 14.81628, -12.25882], 2, [3, 3]),
}


@pytest.mark.parametrize("mode", ["interpret", "compiled"])
def test_a_cond_whose_branches_differ_in_rank_gives_tf_values_and_errors(mode):
    g, p, x, fetches, extra = _rank_changing_cond()
    assert fetches[0].shape.rank is None   # (TF: <unknown>)
    sess = tf1.Session(graph=g, config=tf1.ConfigProto(jitgrad_mode=mode))
    for pred, want in TF_RANK_COND.items():
        feed = {p: pred, x: [1.0, 2.0, 3.0]}
        got = sess.run(fetches + [extra["rank"], extra["shape"]], feed)
        for a, b in zip(got[:4], want[:4]):
            np.testing.assert_allclose(a, b, rtol=2e-5)
        assert int(got[4]) == want[4] and got[4].dtype == np.int32
        assert got[5].tolist() == want[5] and got[5].dtype == np.int64
        # TF: a scalar broadcasts against [2]; a [3, 3] fails when it runs; a scalar is no matrix
        if pred:
            np.testing.assert_array_equal(sess.run(extra["broadcast"], feed), [15.0, 15.0])
            with pytest.raises(tf.errors.InvalidArgumentError):
                sess.run(extra["matmul"], feed)
        else:
            with pytest.raises(tf.errors.InvalidArgumentError):
                sess.run(extra["broadcast"], feed)
            np.testing.assert_array_equal(sess.run(extra["matmul"], feed), np.full((3, 2), [[6.0], [12.0], [18.0]]))
    if mode == "compiled":
        # (the kernel would need the rank of what the branch returns: the reference interpreter runs it)
        report = sess.explain(fetches, {p: True, x: [1.0, 2.0, 3.0]})
        assert report.fallback and "the branches' outputs differ in rank" in report.reason


def test_a_function_whose_cond_branches_differ_in_rank():
    @tf.function
    def f(p, x):
        return tf.cond(p, lambda: x * 2.0, lambda: tf.reshape(x, [1, 3]) + 1.0)
    x = tf.constant([1.0, 2.0, 3.0])
    # TF 2.21: [2, 4, 6] of shape (3,) and [[2, 3, 4]] of shape (1, 3)
    np.testing.assert_array_equal(f(tf.constant(True), x).numpy(), [2.0, 4.0, 6.0])
    np.testing.assert_array_equal(f(tf.constant(False), x).numpy(), [[2.0, 3.0, 4.0]])


# ---------------------------------------------------------------- 4. TensorArrays of a size known only at run time
def _np_states(x, n, reverse=True):
    """h_{k+1} = 1.5 sin(h_k), h_0 = x; row n-1-k (row k if not reverse) holds h_{k+1}."""
    h, rows = np.asarray(x, np.float64), []
    for _ in range(n):
        h = np.sin(h) * 1.5
        rows.append(h)
    return np.array(rows[::-1] if reverse else rows).reshape(n, 2)


def _fed_size_graph(size_of):
    """States written in reverse order (ta.write(n - 1 - i)) into an array of ``size_of(n, xs)``
    rows; and an RNN reading its inputs from an array unstacked from a fed [None, 2] value."""
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float64, [2])
        n, trips = tf1.placeholder(tf.int32, []), tf1.placeholder(tf.int32, [])
        xs = tf1.placeholder(tf.float64, [None, 2])
        ta = tf.TensorArray(tf.float64, size=size_of(n, xs))

        def body(i, h, ta):
            h = tf.sin(h) * 1.5
            return i + 1, h, ta.write(n - 1 - i, h)
        out = tf.while_loop(lambda i, h, ta: i < trips, body, [0, x, ta])[2]
        st = out.stack()
        (gx,) = tf.gradients(tf.reduce_sum(st * st), x)
        inp = tf.TensorArray(tf.float64, size=0, dynamic_size=True).unstack(xs)
        last = tf.while_loop(lambda i, h: i < inp.size(), lambda i, h: (i + 1, tf.tanh(h + inp.read(i) * x)), [0, x])[1]
        (gl,) = tf.gradients(tf.reduce_sum(last), x)
    return g, (x, n, trips, xs), [st, gx, last, gl, out.size()]


# TF 2.21 graph mode (tf.compat.v1.Session, /work/benchenv) for x = [0.3, -0.7], n = trips = 3,
# xs = [[0, .1], [.2, .3], [.4, .5]]: the stacked states, d sum(st^2)/dx, the RNN's last state, d sum(last)/dx
TF_FED = ([[0.89982772, -1.41582906], [0.64335755, -1.23420531], [0.44328031, -0.96632653]], [7.96277508, -6.00344146],
          [0.42807641, -0.7797264], [1.13372042, 0.38661419])


@pytest.mark.parametrize("size_of", ["fed", "computed"])
def test_a_tensor_array_of_a_fed_size_written_in_reverse_compiles(size_of, one_kernel):
    sizes = {"fed": lambda n, xs: n, "computed": lambda n, xs: tf.shape(xs)[0]}
    g, (x, n, trips, xs), fetches = _fed_size_graph(sizes[size_of])
    x0, rows = np.array([0.3, -0.7]), np.arange(6.0).reshape(3, 2) * 0.1
    compiled, interpreted = run_both(g, fetches, {x: x0, n: 3, trips: 3, xs: rows})   # (asserts no fallback)
    for a, b, want in zip(compiled, interpreted, TF_FED):
        np.testing.assert_allclose(a, b, rtol=1e-13)
        np.testing.assert_allclose(a, want, rtol=1e-7)
    assert int(compiled[4]) == int(interpreted[4]) == 3
    # one kernel for any trip count (the array's size, a shape, is what it is specialised on)
    for k in (0, 1, 2):
        compiled, interpreted = run_both(g, fetches, {x: x0, n: 3, trips: k, xs: rows})
        want = np.zeros((3, 2))
        want[3 - k:] = _np_states(x0, k)
        np.testing.assert_allclose(compiled[0], want, rtol=1e-13)
        np.testing.assert_allclose(interpreted[0], want, rtol=1e-13)
        np.testing.assert_allclose(compiled[1], interpreted[1], rtol=1e-12)
    assert "FALLBACK" not in _explain(g, fetches, {x: x0, n: 3, trips: 3, xs: rows})


@pytest.mark.parametrize("mode", ["interpret", "compiled"])
def test_a_write_outside_a_fed_size_array_is_tf_invalid_argument_error(mode):
    g, (x, n, trips, xs), fetches = _fed_size_graph(lambda n, xs: n)
    sess = tf1.Session(graph=g, config=tf1.ConfigProto(jitgrad_mode=mode))
    for k in (4, 7):   # (TF: the loop's 4th write is at index -1)
        with pytest.raises(tf.errors.InvalidArgumentError):
            sess.run(fetches[0], {x: [0.3, -0.7], n: 3, trips: k, xs: np.zeros((1, 2))})


def _scattered(n, x):
    """The rows the scatter loop below writes, in numpy: iteration i puts x * (i + 1) at
    2n - 1 - 2i (odd) and x * x at 2i (even)."""
    rows = np.zeros((2 * n, 2))
    for i in range(n):
        rows[2 * n - 1 - 2 * i], rows[2 * i] = x * (i + 1), x * x
    return rows


def test_a_fed_size_array_scattered_out_of_order_and_gathered_compiles_with_bounds_checks():
    # (one kernel per array size, as the fed-size arrays above; run_both asserts no fallback)
    g = tf.Graph()
    with g.as_default():
        n, at = tf1.placeholder(tf.int32, []), tf1.placeholder(tf.int32, [])
        x = tf1.placeholder(tf.float64, [2])
        ta = tf.TensorArray(tf.float64, size=2 * n, element_shape=[2])

        def body(i, ta):
            rows = tf.stack([x * tf.cast(i + 1, tf.float64), x * x])
            return i + 1, ta.scatter(tf.stack([2 * n - 1 - 2 * i, 2 * i]), rows)
        ta = tf.while_loop(lambda i, ta: i < n, body, [0, ta])[1]
        picked = ta.gather(tf.stack([0, 2 * n - 1, at]))
        y = tf.reduce_sum(tf.sin(picked))
        (gx,) = tf.gradients(y, x)
        (hx,) = tf.hessians(y, x)
    x0 = np.array([0.5, -1.0])

    def f(xv, trips, k):
        return np.sin(_scattered(trips, xv)[[0, 2 * trips - 1, k]]).sum()
    for trips, k in ((1, 1), (3, 4), (4, 7)):
        compiled, interpreted = run_both(g, [picked, gx, hx], {n: trips, x: x0, at: k})   # (asserts no fallback)
        for a, b in zip(compiled, interpreted):
            np.testing.assert_allclose(a, b, rtol=1e-13)
        np.testing.assert_array_equal(compiled[0], _scattered(trips, x0)[[0, 2 * trips - 1, k]])
        np.testing.assert_allclose(compiled[1], numeric_grad(lambda v: f(v, trips, k), x0), rtol=1e-7, atol=1e-8)
        fd_hessian = [numeric_grad(lambda v: numeric_grad(lambda u: f(u, trips, k), v, 1e-4)[r], x0, 1e-4)
                      for r in range(2)]
        np.testing.assert_allclose(compiled[2], fd_hessian, rtol=1e-5, atol=1e-7)
    for mode in ("interpret", "compiled"):   # a gather outside the 2n rows: TF's error, nothing read
        sess = tf1.Session(graph=g, config=tf1.ConfigProto(jitgrad_mode=mode))
        for k in (6, -1):
            with pytest.raises(tf.errors.InvalidArgumentError):
                sess.run(picked, {n: 3, x: x0, at: k})


def test_a_fed_size_array_in_a_function_compiles_once_per_size():
    @tf.function
    def f(xs):
        n = tf.shape(xs)[0]
        ta = tf.TensorArray(tf.float64, size=n)
        h = tf.zeros([2], tf.float64)
        for i in tf.range(n):
            h = tf.tanh(h + xs[n - 1 - i])
            ta = ta.write(n - 1 - i, h)
        return ta.stack(), ta.size()

    def by_hand(xs):
        h, rows = np.zeros(2), [None] * len(xs)
        for i in range(len(xs)):
            h = np.tanh(h + xs[len(xs) - 1 - i])
            rows[len(xs) - 1 - i] = h
        return np.array(rows)
    before = tf.cache_info()
    for k in (3, 3, 5):
        xs = np.arange(2.0 * k).reshape(k, 2) * 0.1
        st, size = f(tf.constant(xs))
        np.testing.assert_allclose(st.numpy(), by_hand(xs), rtol=1e-13)
        assert int(size) == k
    after = tf.cache_info()
    assert after["fallbacks"] == before["fallbacks"]
    assert after["compiles"] + after["disk_hits"] - before["compiles"] - before["disk_hits"] <= 2   # (sizes 3, 5)


def test_unstacking_a_value_of_unknown_length_into_a_fixed_size_array_takes_its_length():
    # TF 2.21 graph mode: unstacking 3 rows into TensorArray(size=n) reads them whatever n is fed
    g = tf.Graph()
    with g.as_default():
        n = tf1.placeholder(tf.int32, [])
        xs = tf1.placeholder(tf.float64, [None, 2])
        arr = tf.TensorArray(tf.float64, size=n).unstack(xs)
        got = [arr.read(1), arr.size(), arr.stack(),
               tf.TensorArray(tf.float64, size=n).scatter(tf.constant([2, 0]), tf.stack([xs[0], xs[1]]) * 2.0).stack()]
    rows = np.arange(6.0).reshape(3, 2) * 0.1
    for fed in (2, 3, 4):
        compiled, interpreted = run_both(g, got[:3], {n: fed, xs: rows})
        for out in (compiled, interpreted):
            np.testing.assert_array_equal(out[0], rows[1])
            assert int(out[1]) == 3
            np.testing.assert_array_equal(out[2], rows)
    compiled, interpreted = run_both(g, got[3], {n: 3, xs: rows})
    np.testing.assert_array_equal(compiled, [rows[1] * 2.0, [0.0, 0.0], rows[0] * 2.0])   # (TF: the same)
    np.testing.assert_array_equal(interpreted, compiled)


# ---------------------------------------------------------------- 2b. draws of a loop in a cond (in a loop)
def _masked(x, k, width):
    """k iterations (k known at run time) of a mask m: (sum of x^2 m, sum of m)."""
    def body(j, a, ms):
        m = tf.cast(tf.random.uniform([width], seed=1) > 0.5, tf.float32)
        return j + 1, a + x * x * m, ms + m
    return tf.while_loop(lambda j, a, ms: j < k, body, [0, tf.zeros([width]), tf.zeros([width])])[1:]


def _loop_in_cond(structure, width=4, seed=6):
    """"cond": tf.cond(p, the masked loop of n iterations, x^2 and ones); "loop": that
    cond in a while_loop of n iterations, its loop running i + 1; "loops": a while_loop of
    n iterations around the masked loop of i + 1, in the cond (its saved draws: a ragged
    stack the If returns). y = sum(x^2 * masks), so dy/dx = 2 x * masks and
    d(sum dy/dx)/dx = 2 masks (p false: masks = ones)."""
    g = tf.Graph()
    with g.as_default():
        tf.random.set_seed(seed)     # the graph's seed (TF 2: an eager set_seed does not reach it)
        x = tf1.placeholder(tf.float32, [width])
        n, p = tf1.placeholder(tf.int32, []), tf1.placeholder(tf.bool, [])
        if structure == "cond":
            a, masks = tf.cond(p, lambda: _masked(x, n, width), lambda: (x * x, tf.ones([width])))
            y = tf.reduce_sum(a)
        elif structure == "loops":
            def outer(i, s, ms):
                a, m = _masked(x, i + 1, width)
                return i + 1, s + a, ms + m

            def loops():
                return tf.while_loop(lambda i, s, ms: i < n, outer, [0, tf.zeros([width]), tf.zeros([width])])[1:]
            a, masks = tf.cond(p, loops, lambda: (x * x, tf.ones([width])))
            y = tf.reduce_sum(a)
        else:
            def body(i, s, ms):
                a, m = tf.cond(p, lambda: _masked(x, i + 1, width), lambda: (x * x, tf.ones([width])))
                return i + 1, s + tf.reduce_sum(a), ms + m
            _, y, masks = tf.while_loop(lambda i, s, ms: i < n, body, [0, 0.0, tf.zeros([width])])
        (gx,) = tf.gradients(y, x)
        (hx,) = tf.gradients(tf.reduce_sum(gx), x)
    return g, x, n, p, [y, masks, gx, hx]


@pytest.mark.parametrize("structure", ["cond", "loop", "loops"])
def test_gradients_through_draws_of_a_loop_in_a_cond_compile_to_one_kernel(structure, one_kernel):
    xv = np.arange(1, 5, dtype=np.float32)
    feeds = ((3, True), (4, False), (0, True), (6, True))
    runs = {}
    for mode in ("interpret", "compiled"):
        g, x, n, p, fetches = _loop_in_cond(structure)
        sess = tf1.Session(graph=g, config=tf1.ConfigProto(jitgrad_mode=mode))
        before = tf.cache_info()["fallbacks"]
        runs[mode] = [sess.run(fetches, {x: xv, n: k, p: b}) for k, b in feeds]
        assert tf.cache_info()["fallbacks"] == before
    for ra, rb in zip(runs["interpret"], runs["compiled"]):   # bit for bit
        for a, b in zip(ra, rb):
            np.testing.assert_array_equal(a, b)
    for (y, masks, gx, hx), (k, b) in zip(runs["compiled"], feeds):
        if not b:
            np.testing.assert_array_equal(masks, np.full(4, k if structure == "loop" else 1.0, np.float32))
        np.testing.assert_array_equal(y, np.float32((xv * xv * masks).sum()))
        np.testing.assert_array_equal(gx, 2 * xv * masks)
        np.testing.assert_array_equal(hx, 2 * masks)
    assert any(0 < r[1].max() < r[1].sum() for r in runs["compiled"])   # (masks neither all 0 nor all 1)
    assert "FALLBACK" not in _explain(g, fetches, {x: xv, n: 3, p: True})


@pytest.mark.parametrize("structure", ["cond", "loop", "loops"])
def test_the_stacks_a_cond_returns_for_its_gradient_are_freed_every_run(structure):
    g, x, n, p, fetches = _loop_in_cond(structure, width=16384)
    sess = tf1.Session(graph=g, config=tf1.ConfigProto(jitgrad_mode="compiled"))
    feed = {x: np.ones(16384, np.float32), n: 400 if structure == "cond" else 27, p: True}   # (~25 MiB of masks)
    _assert_compiled_runs_keep_no_memory(sess, fetches[2], feed)


# ---------------------------------------------------------------- 5. a loop variable a cond appends to
def _cond_appends(nested):
    """acc grows under a [None, 2] invariant by a cond in the body: i even appends one row
    w * i, i odd two rows [w, 2 w] ("nested": an odd i with i % 3 == 1 appends no row,
    any other the three rows [w, w * i, -w], through a cond in the else branch)."""
    g = tf.Graph()
    with g.as_default():
        n = tf1.placeholder(tf.int32, [])
        w = tf1.placeholder(tf.float64, [2])

        def body(i, acc):
            fi = tf.cast(i, tf.float64)
            if nested:
                odd = lambda: tf.cond(tf.equal(i % 3, 1), lambda: tf.concat([acc, tf.zeros([0, 2], tf.float64)], 0),
                                      lambda: tf.concat([acc, [w, w * fi, -w]], 0))
            else:
                odd = lambda: tf.concat([acc, [w, w * 2.0]], 0)
            return i + 1, tf.cond(tf.equal(i % 2, 0), lambda: tf.concat([acc, [w * fi]], 0), odd)
        acc = tf.while_loop(lambda i, acc: i < n, body, [0, tf.ones([1, 2], tf.float64)],
                            shape_invariants=[tf.TensorShape([]), tf.TensorShape([None, 2])])[1]
        fetches = [acc, tf.reduce_sum(acc * acc, 0), tf.shape(acc)]
    return g, n, w, fetches


def _cond_appends_np(nested, trips, w):
    rows = [np.ones(2)]
    for i in range(trips):
        if i % 2 == 0:
            rows.append(w * i)
        elif not nested:
            rows += [w, w * 2.0]
        elif i % 3 != 1:
            rows += [w, w * i, -w]
    return np.array(rows)


@pytest.mark.parametrize("nested", [False, True])
def test_a_loop_variable_a_cond_appends_rows_to_compiles_to_one_kernel(nested, one_kernel):
    # (the loop grows its buffer by the rows the branch taken wrote: lower_growing.rows_appended)
    g, n, w, fetches = _cond_appends(nested)
    wv = np.array([0.5, -1.5])
    for trips in (0, 1, 2, 7, 1000):
        compiled, interpreted = run_both(g, fetches, {n: trips, w: wv})   # (asserts no fallback)
        want = _cond_appends_np(nested, trips, wv)
        for got in (compiled, interpreted):
            np.testing.assert_array_equal(got[0], want)
            np.testing.assert_allclose(got[1], (want * want).sum(0), rtol=1e-12)
            np.testing.assert_array_equal(got[2], want.shape)
    assert "FALLBACK" not in _explain(g, fetches, {n: 5, w: wv})
