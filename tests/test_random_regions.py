"""Random ops inside tf.cond branches and tf.while_loop bodies (ops/random_ops.py's
RegionRandom, codegen/lower_random.py): compiled natively (no interpreter fallback),
one draw per executed iteration / taken branch from the op's own generator, so the
numbers are the interpreter's bit for bit and TF's Philox stream for the op's seeds;
gradients through such regions reuse the forward draws (TF's cond_v2 /
while_v2 read the forward pass's intermediates: a dropout mask is not drawn again).

Expected values come from the Philox stream TF's seeding rules give the op (graph seed
g, set by tf.random.set_seed inside the graph, + op seed s: key g, counter s << 64, each
draw of n elements reserving 256 n calls; see _uniform_rows), from hand-derived
gradients, or from the other execution mode (interpreter vs compiled)."""
import ctypes

import numpy as np
import pytest

import jitgrad as tf
from jitgrad.errors import InvalidArgumentError
from jitgrad.ops import philox, random_ops

ph = tf.compat.v1.placeholder


def _session(g, mode):
    return tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto(jitgrad_mode=mode))


@pytest.fixture
def no_fallback():
    before = tf.cache_info()["fallbacks"]
    yield
    assert tf.cache_info()["fallbacks"] == before, "a run fell back to the interpreter"


def _uniform_rows(seeds, n, shape, dtype=np.float32):
    """The first n draws of a uniform op with (graph, op) seeds, as TF's stateful Philox op
    makes them: key = graph seed, counter = op seed << 64; draw k of m elements starts at
    call 256 * m * k (each run reserves 256 calls per element)."""
    g, s = seeds
    m = int(np.prod(shape))
    return np.stack([philox.uniform((g, (s << 64) + 256 * m * k), m, dtype).reshape(shape)
                     for k in range(n)]) if n else np.zeros((0,) + shape, dtype)


def _seeded_graph(seed):
    """A graph whose seed is ``seed`` (TF 2: tf.random.set_seed while it is the default
    graph; an eager set_seed does not reach a tf.Graph() built afterwards)."""
    g = tf.Graph()
    with g.as_default():
        tf.random.set_seed(seed)
    return g


def _scan_of_draws(make, seed=None):
    """A graph (seeded with ``seed``): a scan over a fed [None] input whose body returns
    make() each row."""
    g = _seeded_graph(seed)
    with g.as_default():
        xs = ph(tf.float32, [None])
        ys = tf.scan(lambda a, _: make(), xs, initializer=make_init(make))
    return g, xs, ys


def make_init(make):
    t = make()
    return tf.zeros(t.shape, t.dtype)


# ---------------------------------------------------------------- the draws themselves
def test_a_loop_draws_once_per_iteration_the_ops_philox_stream(no_fallback):
    g, xs, ys = _scan_of_draws(lambda: tf.random.uniform([3], seed=7), seed=11)
    sess = _session(g, "compiled")
    first = sess.run(ys, {xs: np.zeros(4, np.float32)})
    second = sess.run(ys, {xs: np.zeros(2, np.float32)})    # the same kernel, another trip count
    expected = _uniform_rows((11, 7), 6, (3,))
    np.testing.assert_array_equal(first, expected[:4])
    np.testing.assert_array_equal(second, expected[4:])


def test_zero_iterations_draw_nothing(no_fallback):
    g, xs, ys = _scan_of_draws(lambda: tf.random.uniform([2], seed=1), seed=3)
    sess = _session(g, "compiled")
    assert sess.run(ys, {xs: np.zeros(0, np.float32)}).shape == (0, 2)
    np.testing.assert_array_equal(sess.run(ys, {xs: np.zeros(1, np.float32)}), _uniform_rows((3, 1), 1, (2,)))


@pytest.mark.parametrize("kind", ["uniform", "normal", "truncated_normal", "uniform_int", "uniform_f64"])
def test_every_random_op_in_a_loop_matches_the_interpreter_bit_for_bit(kind, no_fallback):
    make = {
        "uniform": lambda: tf.random.uniform([2, 3], minval=-1.0, maxval=2.0, seed=4),
        "normal": lambda: tf.random.normal([5], mean=1.0, stddev=3.0, seed=4),
        "truncated_normal": lambda: tf.random.truncated_normal([7], seed=4),
        "uniform_int": lambda: tf.random.uniform([4], minval=-3, maxval=9, dtype=tf.int32, seed=4),
        "uniform_f64": lambda: tf.random.uniform([3], dtype=tf.float64, seed=4),
    }[kind]
    runs = {}
    for mode in ("interpret", "compiled"):
        g, xs, ys = _scan_of_draws(make, seed=5)      # the same program twice: the same seeds
        sess = _session(g, mode)
        runs[mode] = [sess.run(ys, {xs: np.zeros(n, np.float32)}) for n in (3, 1, 4)]
    for a, b in zip(runs["interpret"], runs["compiled"]):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    if kind == "truncated_normal":
        assert np.abs(np.concatenate(runs["compiled"])).max() <= 2.0


def test_a_branch_draws_only_when_taken(no_fallback):
    g = _seeded_graph(21)
    with g.as_default():
        p = ph(tf.bool, [])
        y = tf.cond(p, lambda: tf.random.uniform([3], seed=2), lambda: tf.zeros([3]))
    sess = _session(g, "compiled")
    outs = [sess.run(y, {p: v}) for v in (True, False, True, False)]
    rows = _uniform_rows((21, 2), 2, (3,))
    np.testing.assert_array_equal(outs[0], rows[0])
    np.testing.assert_array_equal(outs[1], np.zeros(3))
    np.testing.assert_array_equal(outs[2], rows[1])     # the untaken branch did not advance the sequence
    np.testing.assert_array_equal(outs[3], np.zeros(3))


def test_loops_conds_and_nested_regions_with_several_ops_match_the_interpreter(no_fallback):
    def build():
        g = _seeded_graph(8)
        with g.as_default():
            n = ph(tf.int32, [])
            x = ph(tf.float32, [4])

            def body(i, s, last, inner):
                u = tf.random.uniform([4], seed=1)
                z = tf.random.normal([4])                  # op seed from the graph's op counter
                w = tf.cond(tf.equal(i % 2, 0), lambda: tf.random.uniform([4], seed=9) * x,
                            lambda: z)
                inner = tf.while_loop(lambda k, a: k < i, lambda k, a: (k + 1, a + tf.random.normal([4], seed=3)),
                                      [0, tf.zeros([4])])[1]
                return i + 1, s + tf.reduce_sum(u * w) + tf.reduce_sum(inner), w, inner
            _, s, last, inner = tf.while_loop(lambda i, s, last, inner: i < n, body,
                                              [0, 0.0, tf.zeros([4]), tf.zeros([4])])
            top = tf.random.uniform([2], seed=6)           # a top-level op: a kernel argument
        return g, [last, inner, top, s], n, x
    outs = {}
    for mode in ("interpret", "compiled"):
        g, fetches, n, x = build()
        sess = _session(g, mode)
        outs[mode] = [sess.run(fetches, {n: k, x: np.arange(4, dtype=np.float32)}) for k in (3, 0, 5)]
    for ra, rb in zip(outs["interpret"], outs["compiled"]):
        for a, b in zip(ra[:3], rb[:3]):    # elementwise products / sums of draws: bit for bit
            np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(ra[3], rb[3], rtol=1e-6)   # (reductions: each engine's summation order)


def test_a_seeded_program_repeats_its_draws_in_new_graphs_and_sessions(no_fallback):
    def program():
        g, xs, ys = _scan_of_draws(lambda: tf.random.normal([2]), seed=99)
        sess = _session(g, "compiled")
        return [sess.run(ys, {xs: np.zeros(3, np.float32)}) for _ in range(2)]
    a, b = program(), program()
    for p, q in zip(a, b):
        np.testing.assert_array_equal(p, q)
    assert not np.array_equal(a[0], a[1])     # successive runs continue the sequence


def test_one_kernel_for_two_graphs_each_drawing_from_its_own_ops(no_fallback):
    results, seeds = [], (1, 2)
    for s in seeds:
        g, xs, ys = _scan_of_draws(lambda: tf.random.uniform([3], seed=5), seed=s)
        results.append((g, xs, ys))
    sessions = [_session(g, "compiled") for g, _, _ in results]
    sessions[0].run(results[0][2], {results[0][1]: np.zeros(2, np.float32)})
    compiled = tf.cache_info()["compiles"] + tf.cache_info()["disk_hits"]
    # interleaved: a kernel never draws from the other graph's generator
    a1 = sessions[1].run(results[1][2], {results[1][1]: np.zeros(2, np.float32)})
    a0 = sessions[0].run(results[0][2], {results[0][1]: np.zeros(2, np.float32)})
    assert tf.cache_info()["compiles"] + tf.cache_info()["disk_hits"] == compiled   # the second graph: a memory hit
    np.testing.assert_array_equal(a1, _uniform_rows((2, 5), 2, (3,)))
    np.testing.assert_array_equal(a0, _uniform_rows((1, 5), 4, (3,))[2:])


def _loop_failing_after_two_draws():
    """A loop of n iterations drawing in each whose third iteration fails an Assert."""
    g = _seeded_graph(4)
    with g.as_default():
        n = ph(tf.int32, [])

        def body(i, s):
            u = tf.random.uniform([2], seed=1)
            check = tf.Assert(i < 2, [i])
            with tf.control_dependencies([check]):
                return i + 1, s + tf.reduce_sum(u)
        s = tf.while_loop(lambda i, s: i < n, body, [0, 0.0])[1]
    return g, n, s


def test_no_handle_outlives_its_run(no_fallback):
    g, n, s = _loop_failing_after_two_draws()
    sess = _session(g, "compiled")
    sess.run(s, {n: 2})
    assert random_ops._RUNS == {}
    with pytest.raises(InvalidArgumentError):
        sess.run(s, {n: 5})       # fails in the third iteration
    assert random_ops._RUNS == {}


def _runner_of(sess):
    """The session's one generated fast runner (jitgrad/fast_runner.py)."""
    assert len(sess._fast) == 1, "no fast runner was installed"
    return next(iter(sess._fast.values()))


def _call_runner(sess, runner, *args):
    """The runner called alone, drawing from the Session's random streams as under
    Session.run (which makes them the thread's: a Session's streams are its own, as TF's)."""
    before = getattr(random_ops.ACTIVE, "streams", None)
    random_ops.ACTIVE.streams = sess._random_streams
    try:
        return runner(*args)
    finally:
        random_ops.ACTIVE.streams = before


def test_region_random_plans_run_through_the_fast_runner_with_the_same_draws(no_fallback):
    g, xs, ys = _scan_of_draws(lambda: tf.random.uniform([3], seed=7), seed=11)
    sess = _session(g, "compiled")
    trips = (3, 3, 3)     # (one feed shape: one plan, hit again)
    outs = [sess.run(ys, {xs: np.zeros(k, np.float32)}) for k in trips]
    runner = _runner_of(sess)
    assert "_OPEN(SITES)" in runner.source     # it opens the call's handle itself
    hits = tf.cache_info()["plan_hits"]
    outs += [_call_runner(sess, runner, np.zeros(k, np.float32)) for k in trips]   # (the runner alone: nothing else draws)
    assert tf.cache_info()["plan_hits"] == hits + len(trips)
    expected = _uniform_rows((11, 7), 2 * sum(trips), (3,))
    np.testing.assert_array_equal(np.concatenate(outs), expected)
    assert random_ops._RUNS == {}


def test_a_failing_run_through_the_fast_runner_closes_its_handle(no_fallback):
    g, n, s = _loop_failing_after_two_draws()
    sess = _session(g, "compiled")
    for _ in range(3):
        sess.run(s, {n: 2})
    runner = _runner_of(sess)
    with pytest.raises(InvalidArgumentError):
        _call_runner(sess, runner, 5)
    assert random_ops._RUNS == {}
    # 3 runs of 2 draws, the failed one drew 3 (its third iteration failed after the draw,
    # as in the interpreter): the next run continues after them, through the runner again
    rows = _uniform_rows((4, 1), 11, (2,))
    np.testing.assert_allclose(_call_runner(sess, runner, 1), rows[9].astype(np.float64).sum(), rtol=1e-6)


def test_a_nested_random_gradient_through_the_fast_runner_matches_the_interpreter(no_fallback):
    xv = np.arange(1, 5, dtype=np.float32)
    runs = {}
    for mode in ("interpret", "compiled"):
        g, (x, n, p), fetches = _nested_program(_cond_in_while)
        sess = _session(g, mode)
        runs[mode] = [sess.run(fetches, {x: xv, n: k, p: True}) for k in (3, 4, 5, 4)]
        if mode == "compiled":
            _runner_of(sess)
    for ra, rb in zip(runs["interpret"], runs["compiled"]):
        for a, b in zip(ra, rb):
            np.testing.assert_array_equal(a, b)


def test_the_hook_refuses_a_stale_or_unknown_handle():
    random_ops._register_hook()
    out = (ctypes.c_float * 2)(7.0, 7.0)
    addr = ctypes.addressof(out)
    assert random_ops._on_region_random(None, 0, addr) == 1
    assert random_ops._on_region_random(123456789, 0, addr) == 1
    site = random_ops.RandomSite("RandomUniform", {"shape": (2,), "dtype": tf.float32,
                                                   "sampler": random_ops.Sampler((1, 2))})
    ptrs = np.zeros(1, np.uint64)
    with random_ops.region_draws(ptrs, 0, {0: site}):
        handle = int(ptrs[0])
        assert random_ops._on_region_random(handle, 1, addr) == 1     # no such site
        assert random_ops._on_region_random(handle, 0, addr) == 0
    np.testing.assert_array_equal(np.frombuffer(out, np.float32), _uniform_rows((1, 2), 1, (2,))[0])
    assert random_ops._on_region_random(handle, 0, addr) == 1         # closed with its run
    assert ptrs[0] == 0


def test_explicit_placement_of_random_ops_is_kernel_structure_not_seeds():
    """Two graphs differing only in their seeds have one pre-pass key (the samplers
    never reach it)."""
    from jitgrad import compiler
    from jitgrad.cache import key as cache_key
    keys = []
    for s in (1, 2):
        g, xs, ys = _scan_of_draws(lambda: tf.random.uniform([3], seed=s), seed=s)
        sess = _session(g, "compiled")
        pre = compiler.build_pre_program(sess, [ys], [(xs, np.zeros(2, np.float32))])
        keys.append(cache_key.pre_pass_key(pre).hex)
    assert keys[0] == keys[1]


# ---------------------------------------------------------------- gradients reuse the forward draws
def test_gradient_through_a_loop_reads_the_forward_draws(no_fallback):
    g = tf.Graph()
    with g.as_default():
        tf.random.set_seed(12)
        x = ph(tf.float32, [4])
        xs = ph(tf.float32, [None])
        # each row: x * u_k with a fresh u_k; the rows and d(sum)/dx = sum_k u_k
        rows = tf.scan(lambda a, _: x * tf.random.uniform([4], seed=3), xs, initializer=tf.zeros([4]))
        (gx,) = tf.gradients(tf.reduce_sum(rows), x)
    for mode in ("interpret", "compiled"):
        sess = _session(g, mode)
        r, gv = sess.run([rows, gx], {x: np.ones(4, np.float32), xs: np.zeros(5, np.float32)})
        np.testing.assert_allclose(gv, r.sum(axis=0), rtol=1e-6)   # the very numbers of the forward rows


def test_dropout_mask_in_a_loop_is_the_same_forward_and_backward_in_both_modes(no_fallback):
    outs = {}
    for mode in ("interpret", "compiled"):
        g = _seeded_graph(0)
        with g.as_default():
            x = ph(tf.float32, [50])
            n = ph(tf.int32, [])
            s = tf.while_loop(lambda i, s: i < n,
                              lambda i, s: (i + 1, s + tf.reduce_sum(tf.nn.dropout(x, 0.5))), [0, 0.0])[1]
            (gx,) = tf.gradients(s, x)
        outs[mode] = _session(g, mode).run([s, gx], {x: np.ones(50, np.float32), n: 4})
        sv, gv = outs[mode]
        # x = ones: s = 2 * (number of kept elements over the loop) = sum of the gradient (TF's values)
        assert float(sv) == float(gv.sum())
        assert set(np.unique(gv)) <= {0.0, 2.0, 4.0, 6.0, 8.0}
    for a, b in zip(outs["interpret"], outs["compiled"]):
        np.testing.assert_array_equal(a, b)


def test_gradient_through_a_cond_reads_the_forward_draws(no_fallback):
    g = _seeded_graph(2)
    with g.as_default():
        x = ph(tf.float32, [20])
        p = ph(tf.bool, [])
        y = tf.cond(p, lambda: tf.nn.dropout(x, 0.5), lambda: x * 2.0)
        (gx,) = tf.gradients(tf.reduce_sum(y), x)
    for mode in ("interpret", "compiled"):
        sess = _session(g, mode)
        yv, gv = sess.run([y, gx], {x: np.ones(20, np.float32), p: True})
        np.testing.assert_array_equal(gv, yv)            # d(mask * 2 * x)/dx = mask * 2 = y at x = 1
        yv, gv = sess.run([y, gx], {x: np.ones(20, np.float32), p: False})
        np.testing.assert_array_equal(gv, np.full(20, 2.0, np.float32))


def test_function_tape_through_a_loop_with_dropout_matches_tf(graph_mode):
    before = tf.cache_info()["fallbacks"]
    tf.random.set_seed(0)

    @tf.function
    def f(x, n):
        with tf.GradientTape() as t:
            t.watch(x)
            s = tf.constant(0.)
            for _ in tf.range(n):
                s += tf.reduce_sum(tf.nn.dropout(x, 0.5))
        return s, t.gradient(s, x)
    for _ in range(3):
        s, gx = f(tf.ones([40]), tf.constant(3))
        assert float(s) == float(tf.reduce_sum(gx))      # TF: 188.0 188.0 on its own draws
    assert tf.cache_info()["fallbacks"] == before


# ---------------------------------------------------------------- random ops in nested regions, differentiated
# Each program draws 0/1 masks m inside a region nested in a loop body or a branch and
# carries, next to y = sum(x * x * m) (or x * m), the sum of the masks it used (M): by
# hand, dy/dx = 2 x M and d2y/dx2 = 2 M (x * m: dy/dx = M), from the forward's own
# draws. Masks, x and the sums are small integers: the float results are exact.
def _mask(seed=1):
    return tf.cast(tf.random.uniform([4], seed=seed) > 0.5, tf.float32)


def _masked_loop(x, k):
    """A tf.while_loop of k iterations (k a tensor: the count is known only at run
    time): (sum of x * x * m, sum of m)."""
    def body(j, a, ms):
        m = _mask()
        return j + 1, a + x * x * m, ms + m
    return tf.while_loop(lambda j, a, ms: j < k, body, [0, tf.zeros([4]), tf.zeros([4])])[1:]


def _cond_in_while(x, n, p):
    def body(i, s, ms):
        m = tf.cond(i % 2 > 0, _mask, lambda: tf.ones([4]))
        return i + 1, s + tf.reduce_sum(x * x * m), ms + m
    return tf.while_loop(lambda i, s, ms: i < n, body, [0, 0.0, tf.zeros([4])])[1:]


def _while_in_cond(x, n, p):
    a, ms = tf.cond(p, lambda: _masked_loop(x, n), lambda: (x * x, tf.ones([4])))
    return tf.reduce_sum(a), ms


def _while_in_while(x, n, p):
    def body(i, s, ms):
        a, m = _masked_loop(x, i)       # i inner iterations: a different count each time
        return i + 1, s + tf.reduce_sum(a), ms + m
    return tf.while_loop(lambda i, s, ms: i < n, body, [0, 0.0, tf.zeros([4])])[1:]


def _cond_in_cond(x, n, p):
    def masked(m):
        return x * x * m, m
    a, m = tf.cond(p, lambda: tf.cond(n > 2, lambda: masked(_mask()), lambda: masked(_mask(2) * 2.0)),
                   lambda: masked(tf.ones([4])))
    return tf.reduce_sum(a), m


NESTED = {"cond_in_while": _cond_in_while, "while_in_cond": _while_in_cond, "while_in_while": _while_in_while,
          "cond_in_cond": _cond_in_cond}


def _nested_program(build, seed=3):
    g = _seeded_graph(seed)
    with g.as_default():
        x, n, p = ph(tf.float32, [4]), ph(tf.int32, []), ph(tf.bool, [])
        y, ms = build(x, n, p)
        (gx,) = tf.gradients(y, x)
        (hx,) = tf.gradients(tf.reduce_sum(gx), x)
    return g, (x, n, p), [y, ms, gx, hx]


@pytest.mark.parametrize("structure", sorted(NESTED))
def test_gradient_through_a_random_op_in_a_nested_region_reuses_the_forward_draws(structure):
    runs = {}
    xv = np.arange(1, 5, dtype=np.float32)
    for mode in ("interpret", "compiled"):
        g, (x, n, p), fetches = _nested_program(NESTED[structure])
        sess = _session(g, mode)
        runs[mode] = [sess.run(fetches, {x: xv, n: k, p: b}) for k, b in ((3, True), (4, True), (4, False), (5, True))]
    for y, ms, gv, hv in runs["interpret"]:
        np.testing.assert_array_equal(gv, 2 * xv * ms)   # the masks the forward drew, and no others
        np.testing.assert_array_equal(hv, 2 * ms)
        np.testing.assert_array_equal(y, np.float32((xv * xv * ms).sum()))
    assert any(0 < r[1].max() < 5 for r in runs["interpret"])   # (the masks are not all 0 or all 1)
    for ra, rb in zip(runs["interpret"], runs["compiled"]):   # compiled == interpreted, bit for bit
        for a, b in zip(ra, rb):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("structure", sorted(NESTED))
def test_nested_random_gradients_compile(structure, no_fallback):
    # (a loop nested in a loop saves a ragged stack of draws, a loop in a cond an If output
    # of run-time length: both compile, see codegen/lower_control.py)
    g, (x, n, p), fetches = _nested_program(NESTED[structure])
    _session(g, "compiled").run(fetches, {x: np.ones(4, np.float32), n: 3, p: True})


def test_a_forward_fetch_beside_a_built_while_in_cond_gradient_compiles(no_fallback):
    """The gradient makes the If return its inner loop's draws (a stack as long as the
    run-time trip count); a run fetching only the forward does not read them, so the
    regions pass drops those outputs from the If and its branches and the run compiles."""
    xv = np.arange(1, 5, dtype=np.float32)
    feeds = [(3, True), (5, True), (4, False), (0, True)]
    runs = {}
    for mode in ("interpret", "compiled"):
        g, (x, n, p), (y, ms, gx, hx) = _nested_program(_while_in_cond, seed=8)
        sess = _session(g, mode)
        runs[mode] = [sess.run([y, ms], {x: xv, n: k, p: b}) for k, b in feeds]
        if mode == "compiled":
            report = sess.explain([y, ms], {x: xv, n: 3, p: True})
            assert not report.fallback, report.reason
            regions = [st for name, st in report.stats if name == "regions"]
            assert sum(st.get("dropped_outputs", 0) for st in regions) >= 1
    for (yv, mv), (k, b) in zip(runs["interpret"], feeds):
        np.testing.assert_array_equal(yv, np.float32((xv * xv * mv).sum()))   # by hand, from the masks
        if not b:
            np.testing.assert_array_equal(mv, np.ones(4, np.float32))
        else:
            assert mv.max() <= k
    assert any(0 < r[1].max() < 5 for r in runs["interpret"])
    for ra, rb in zip(runs["interpret"], runs["compiled"]):   # compiled == interpreted, bit for bit
        for a, b in zip(ra, rb):
            np.testing.assert_array_equal(a, b)


def test_scan_in_scan_gradient_is_the_sum_of_the_forward_masks(no_fallback):
    # rows x * x * m over 2 outer x 3 inner iterations (static counts: static shapes),
    # the masks m stacked alongside: dy/dx = 2 x (sum of the masks)
    def masked(a, _):
        m = _mask()
        return x * x * m, m

    def inner(c, _):
        return tf.scan(masked, tf.zeros([3]), initializer=(tf.zeros([4]), tf.zeros([4])))
    outs = {}
    xv = np.arange(1, 5, dtype=np.float32)
    for mode in ("interpret", "compiled"):
        g = _seeded_graph(6)
        with g.as_default():
            x = ph(tf.float32, [4])
            rows, masks = tf.scan(inner, tf.zeros([2]), initializer=(tf.zeros([3, 4]), tf.zeros([3, 4])))
            (gx,) = tf.gradients(tf.reduce_sum(rows), x)
        outs[mode] = _session(g, mode).run([masks, gx], {x: xv})
    for mv, gv in outs.values():
        assert mv.shape == (2, 3, 4)
        np.testing.assert_array_equal(gv, 2 * xv * mv.sum(axis=(0, 1)))
    for a, b in zip(outs["interpret"], outs["compiled"]):
        np.testing.assert_array_equal(a, b)


def test_gradient_runs_the_forward_trip_count_of_a_loop_whose_condition_draws(no_fallback):
    """The inner loop's condition draws: its gradient does not draw it again (nor the
    body's mask); d/dx of sum_i sum(x 1.5^t_i m_i) = sum_i 1.5^t_i m_i, carried alongside."""
    def build(mode):
        g = _seeded_graph(9)
        with g.as_default():
            x, n = ph(tf.float32, [4]), ph(tf.int32, [])

            def body(i, s, expect):
                k, f = tf.while_loop(lambda j, f: tf.random.uniform([], seed=2) < 0.6,
                                     lambda j, f: (j + 1, f * 1.5), [0, tf.ones([4])])
                m = _mask()
                return i + 1, s + tf.reduce_sum(x * f * m), expect + f * m
            _, s, expect = tf.while_loop(lambda i, s, e: i < n, body, [0, 0.0, tf.zeros([4])])
            (gx,) = tf.gradients(s, x)
        return _session(g, mode).run([gx, expect], {x: np.ones(4, np.float32), n: 6})
    runs = {mode: build(mode) for mode in ("interpret", "compiled")}
    for gv, ev in runs.values():
        np.testing.assert_array_equal(gv, ev)
    assert runs["interpret"][1].max() > 1.0       # (some inner loop ran)
    np.testing.assert_array_equal(runs["interpret"][0], runs["compiled"][0])


@pytest.mark.parametrize("mode", ["interpret", "compiled"])
def test_a_nested_gradient_draws_nothing_and_a_seeded_program_repeats(mode):
    """Running the gradient with the forward advances the op's sequence exactly as the
    forward alone does; a program rebuilt after set_seed repeats its numbers."""
    xv = np.arange(1, 5, dtype=np.float32)

    def forward_values(with_gradient):
        g, (x, n, p), (y, ms, gx, hx) = _nested_program(_while_in_while, seed=4)
        sess = _session(g, mode)
        fetches = [y, ms, gx] if with_gradient else [y, ms]
        return [sess.run(fetches, {x: xv, n: 4, p: True}) for _ in range(3)]
    alone, with_grad, again = forward_values(False), forward_values(True), forward_values(True)
    for a, b, c in zip(alone, with_grad, again):
        np.testing.assert_array_equal(a[1], b[1])
        np.testing.assert_array_equal(b[2], c[2])
        np.testing.assert_array_equal(b[2], 2 * xv * b[1])
    assert not np.array_equal(alone[0][1], alone[1][1])   # successive runs draw new masks


def test_function_tape_through_a_cond_in_a_loop_with_dropout(graph_mode):
    before = tf.cache_info()["fallbacks"]
    tf.random.set_seed(0)

    @tf.function
    def f(x, n):
        with tf.GradientTape() as t:
            t.watch(x)
            s = tf.constant(0.)
            for i in tf.range(n):
                if i % 2 == 0:
                    s += tf.reduce_sum(tf.nn.dropout(x, 0.5))
                else:
                    s += tf.reduce_sum(x)
        return s, t.gradient(s, x)
    for _ in range(3):
        s, gx = f(tf.ones([40]), tf.constant(3))
        # x = ones: s = 2 * kept + 40 = sum of the gradient; the gradient is 1 + {0, 2, 4}
        assert float(s) == float(tf.reduce_sum(gx))
        assert set(np.unique(gx.numpy())) <= {1.0, 3.0, 5.0}
    assert tf.cache_info()["fallbacks"] == before


def test_random_ops_in_map_fn_and_scan_bodies_under_a_tape():
    """Eager (the bodies run as Python) and in a tf.function (nested While ops)."""
    tf.random.set_seed(1)
    x = tf.constant(np.arange(1, 5, dtype=np.float32))
    with tf.GradientTape(persistent=True) as t:
        t.watch(x)
        r = tf.map_fn(lambda e: x * e * tf.nn.dropout(tf.ones([4]), 0.5), tf.constant([1., 2.]))
        c = tf.scan(lambda a, e: a + x * e * tf.nn.dropout(tf.ones([4]), 0.5), tf.constant([1., 2.]),
                    initializer=tf.zeros([4]))
        sr, sc = tf.reduce_sum(r), tf.reduce_sum(c)
    np.testing.assert_array_equal(t.gradient(sr, x), (r.numpy() / x.numpy()).sum(axis=0))
    # c_1 = x d_0, c_2 = c_1 + 2 x d_1: d(sum c)/dx = c_1 / x + c_2 / x
    np.testing.assert_allclose(t.gradient(sc, x), (c.numpy() / x.numpy()).sum(axis=0), rtol=1e-6)

    @tf.function
    def f(x):
        with tf.GradientTape() as t:
            t.watch(x)
            rows = tf.map_fn(lambda e: tf.reduce_sum(tf.scan(lambda a, _: x * e * tf.nn.dropout(tf.ones([4]), 0.5),
                                                             tf.zeros([2]), initializer=tf.zeros([4])), 0),
                             tf.constant([1., 2.]))
            s = tf.reduce_sum(rows)
        return rows, t.gradient(s, x)
    for _ in range(2):
        rows, gx = f(x)
        np.testing.assert_array_equal(gx, (rows.numpy() / x.numpy()).sum(axis=0))


def test_a_random_op_in_a_cond_in_a_loop_compiles_without_a_gradient(no_fallback):
    outs = {}
    for mode in ("interpret", "compiled"):
        g = _seeded_graph(31)
        with g.as_default():
            n = ph(tf.int32, [])

            def body(i, s):
                y = tf.cond(i % 3 > 0, lambda: tf.random.uniform([3], seed=1), lambda: tf.ones([3]))
                return i + 1, s + y
            s = tf.while_loop(lambda i, s: i < n, body, [0, tf.zeros([3])])[1]
        sess = _session(g, mode)
        outs[mode] = [sess.run(s, {n: k}) for k in (4, 7)]
    for a, b in zip(outs["interpret"], outs["compiled"]):
        np.testing.assert_array_equal(a, b)
    # 4 iterations: i = 1, 2 draw; i = 0, 3 add ones
    rows = _uniform_rows((31, 1), 2, (3,))
    np.testing.assert_allclose(outs["compiled"][0], rows.sum(axis=0) + 2.0, rtol=1e-6)


# ---------------------------------------------------------------- eager and jitgrad.function
def test_eager_loop_draws_fresh_values_each_iteration():
    tf.random.set_seed(5)
    rows = []
    for _ in range(3):
        rows.append(tf.random.uniform([2], seed=4).numpy())
    i = tf.constant(0)
    acc = []
    tf.random.set_seed(5)
    tf.while_loop(lambda i: i < 3, lambda i: (acc.append(tf.random.uniform([2], seed=4).numpy()), i + 1)[1], [i])
    np.testing.assert_array_equal(np.stack(acc), np.stack(rows))
    np.testing.assert_array_equal(np.stack(rows), _uniform_rows((5, 4), 3, (2,)))


def test_function_loop_from_the_issue_compiles_and_repeats_when_seeded(graph_mode):
    before = tf.cache_info()["fallbacks"]

    def make():
        @tf.function
        def f(n):
            s = tf.constant(0.)
            for _ in tf.range(n):
                s += tf.reduce_sum(tf.random.uniform([3], seed=2))
            return s
        return f
    tf.random.set_seed(17)
    a = [float(make()(tf.constant(k))) for k in (4, 2)]
    tf.random.set_seed(17)
    f = make()
    b = [float(f(tf.constant(k))) for k in (4, 2)]
    rows = _uniform_rows((17, 2), 6, (3,))

    def total(rs):
        s = np.float32(0.0)
        for r in rs:
            s = np.float32(s + np.float32(r.astype(np.float64).sum()))
        return float(s)
    # a new function is a fresh op with the same seeds; one function's op continues its sequence
    assert a == pytest.approx([total(rows[:4]), total(rows[:2])], rel=1e-6)
    assert b == pytest.approx([total(rows[:4]), total(rows[4:6])], rel=1e-6)
    if graph_mode == "compiled":
        assert tf.cache_info()["fallbacks"] == before


def test_second_derivative_through_a_loop_reads_the_forward_draws(no_fallback):
    g = tf.Graph()
    with g.as_default():
        tf.random.set_seed(14)
        x = ph(tf.float32, [3])
        xs = ph(tf.float32, [None])
        rows = tf.scan(lambda a, _: x * x * tf.random.uniform([3], seed=8), xs, initializer=tf.zeros([3]))
        (gx,) = tf.gradients(tf.reduce_sum(rows), x)
        (hx,) = tf.gradients(tf.reduce_sum(gx), x)
    for mode in ("interpret", "compiled"):
        r, gv, hv = _session(g, mode).run([rows, gx, hx], {x: np.ones(3, np.float32), xs: np.zeros(4, np.float32)})
        # rows_k = x^2 u_k: d/dx = 2x sum_k u_k, d2/dx2 = 2 sum_k u_k (x = 1: both 2 * rows.sum(0))
        np.testing.assert_allclose(gv, 2 * r.sum(axis=0), rtol=1e-6)
        np.testing.assert_allclose(hv, 2 * r.sum(axis=0), rtol=1e-6)
