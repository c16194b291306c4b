"""Differential tests for control flow: seeded random graphs whose conds and
while_loops hold random elementwise / matmul / reduction bodies, run compiled
(native branches and loops, no interpreter fallback: run_both checks) vs the
reference interpreter, values and gradients, with the tolerances of
tests/test_differential.py."""
import numpy as np
import pytest

import jitgrad as tf
from test_differential import BINARY, UNARY, check_close, run_both, _no_disk  # noqa: F401


def _expr(rng, pool, steps):
    pool = list(pool)
    for _ in range(steps):
        if rng.random() < 0.4:
            pool.append(UNARY[rng.integers(0, len(UNARY))](pool[rng.integers(0, len(pool))]))
        else:
            a, b = pool[rng.integers(0, len(pool))], pool[rng.integers(0, len(pool))]
            pool.append(BINARY[rng.integers(0, len(BINARY))](a, b))
    return pool[-1]


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_random_conds_and_loops(seed, dt):
    rng = np.random.default_rng(1000 + seed)
    shape = tuple(int(d) for d in rng.choice([1, 3, 8, 9], size=int(rng.integers(0, 3))))
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(dt, shape)
        w = tf.compat.v1.placeholder(dt, shape)
        sel = tf.compat.v1.placeholder(tf.int32, [])
        n = tf.compat.v1.placeholder(tf.int32, [])
        k1, k2, k3 = (int(v) for v in rng.integers(2, 5, size=3))
        # a cond on a runtime predicate, branches of random expressions
        c = tf.cond(sel > 0, lambda: _expr(rng, [x, w], k1), lambda: _expr(rng, [w, x * 0.5], k2))

        # a loop with a fed trip count whose body holds a random expression and a cond
        def body(i, h, acc):
            u = tf.tanh(_expr(rng, [h, w], k3)) * 0.9
            u = tf.cond(tf.equal(i % 2, 0), lambda: u, lambda: u * 0.5 + h * 0.25)
            return i + 1, u, acc + tf.reduce_sum(u * u)
        _, hT, acc = tf.while_loop(lambda i, h, acc: i < n, body, [0, x, tf.constant(0.0, dt)])
        loss = tf.reduce_sum(c * tf.cos(hT)) + acc
        grads = tf.gradients(loss, [x, w])
        fetches = [c, hT, acc, loss] + [gr for gr in grads if gr is not None]
    sess_feed = {x: (rng.standard_normal(shape)).astype(dt), w: (rng.standard_normal(shape) * 0.5).astype(dt)}
    for sv, nv in ((1, 0), (0, 3), (1, 5)):
        a, b = run_both(g, fetches, {**sess_feed, sel: sv, n: nv})
        for i, (p, q) in enumerate(zip(a, b)):
            check_close(p, q, dt, f"fetch {i} sel={sv} n={nv}")


@pytest.mark.parametrize("seed", range(4))
def test_rnn_with_matmul_and_second_order(seed):
    rng = np.random.default_rng(seed)
    g = tf.Graph()
    with g.as_default():
        W = tf.compat.v1.placeholder(tf.float64, [5, 5])
        x0 = tf.compat.v1.placeholder(tf.float64, [5, 1])
        n = tf.compat.v1.placeholder(tf.int32, [])
        _, xT = tf.while_loop(lambda t, h: t < n, lambda t, h: (t + 1, tf.tanh(tf.matmul(W, h))), [0, x0])
        loss = tf.reduce_sum(xT)
        (gW,) = tf.gradients(loss, W)
        (gx,) = tf.gradients(loss, x0)
        (hx,) = tf.gradients(tf.reduce_sum(gx * gx), x0)     # a second derivative through the loop
    feed = {W: rng.standard_normal((5, 5)) * 0.6, x0: rng.standard_normal((5, 1)), n: 6}
    a, b = run_both(g, [xT, loss, gW, gx, hx], feed)
    for i, (p, q) in enumerate(zip(a, b)):
        check_close(p, q, np.float64, f"fetch {i}")


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_random_growing_loops(seed, dt):
    """Loops whose values grow at run time: a dynamic_size TensorArray written at the
    counter (every write an append) and a ``concat`` accumulator under a None invariant
    (odd seeds: appended to by a cond, one row for an even counter, two for an odd one),
    random bodies, fed trip counts; the grown values are fetched (compiled growing buffers)
    with the gradients of a loss on the final state."""
    rng = np.random.default_rng(2000 + seed)
    shape = tuple(int(d) for d in rng.choice([1, 3, 8], size=int(rng.integers(0, 3))))
    k, width, rows0 = int(rng.integers(2, 5)), int(np.prod(shape)), int(rng.integers(0, 3))
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(dt, shape)
        w = tf.compat.v1.placeholder(dt, shape)
        n = tf.compat.v1.placeholder(tf.int32, [])

        def body(i, h, ta, acc):
            u = tf.tanh(_expr(rng, [h, w], k)) * 0.9
            row = tf.reshape(u, [1, width])
            if seed % 2:
                acc = tf.cond(tf.equal(i % 2, 0), lambda: tf.concat([acc, row], 0),
                              lambda: tf.concat([acc, row, row * row], 0))
            else:
                acc = tf.concat([acc, row], 0)
            return i + 1, u, ta.write(i, u * 2.0), acc
        _, hT, ta, acc = tf.while_loop(
            lambda i, h, ta, acc: i < n, body,
            [0, x, tf.TensorArray(dt, size=0, dynamic_size=True), tf.zeros([rows0, width], dt)],
            shape_invariants=[tf.TensorShape([]), tf.TensorShape(shape), None, tf.TensorShape([None, width])])
        # the loss reads the final state only: the grown values get no gradient (the reverse loop
        # does not carry them), so the gradients compile too
        grads = tf.gradients(tf.reduce_sum(tf.sin(hT) * w), [x, w])
        fetches = [hT, ta.stack(), acc] + [gr for gr in grads if gr is not None]
    feed = {x: rng.standard_normal(shape).astype(dt), w: (rng.standard_normal(shape) * 0.5).astype(dt)}
    for nv in (0, 1, 7):
        a, b = run_both(g, fetches, {**feed, n: nv})
        for i, (p, q) in enumerate(zip(a, b)):
            check_close(p, q, dt, f"fetch {i} n={nv}")
        assert a[1].shape == (nv,) + shape and a[2].shape == (rows0 + nv + (nv // 2 if seed % 2 else 0), width)


def _rows_reader(rng, v, w, dt, steps=(1, 4), layout_rng=None, more=None):
    """A random op chain on ``v`` (leading dim known at run time): elementwise ops with
    static operands broadcast per row, then (with ``layout_rng``, its own stream so the
    chains of the other seeds stay as they were) a matmul / layout op over the rows, then
    (with ``more``: (its own stream, which reader)) one of the later readers (_rows_more),
    then a reduction over random axes, or none."""
    for _ in range(int(rng.integers(*steps))):
        r = rng.random()
        if r < 0.35:
            v = UNARY[rng.integers(0, len(UNARY))](v)
        elif r < 0.7:
            v = BINARY[rng.integers(0, len(BINARY))](v, w)      # w: the row shape, repeated per row
        else:
            v = BINARY[rng.integers(0, len(BINARY))](v, v * tf.constant(0.5, dt))
    if layout_rng is not None:
        v = _rows_layout(layout_rng, v, dt)
    if more is not None:
        v = _rows_more(*more, v, dt)
    rank = len(v.shape)
    choice = rng.integers(0, 4)
    reduce = [tf.reduce_sum, tf.reduce_mean, tf.reduce_max, tf.reduce_min][rng.integers(0, 4)]
    if choice == 0:
        return v
    if choice == 1:
        return reduce(v)
    axes = [int(a) for a in rng.choice(rank, size=int(rng.integers(1, rank + 1)), replace=False)]
    return reduce(v, axis=axes, keepdims=bool(rng.integers(0, 2)))


def _rows_layout(rng, v, dt):
    """One or two ops over v's rows (codegen/lower_rows_matmul.py, lower_rows_layout.py):
    a matmul of its rows (reshaped to [-1, row]) by a static matrix, a transpose / slice /
    concat / split of the inner axes, a slice of the rows, a reshape keeping the rows."""
    shape = [int(d) for d in v.shape[1:]]
    row = int(np.prod(shape))
    for _ in range(int(rng.integers(1, 3))):
        r = max(int(rng.integers(-1, 6)), 0)   # a matmul twice as often as the others
        if r == 0:
            k = int(rng.integers(1, 10))
            m = tf.constant(rng.uniform(-1, 1, (k, row) if rng.integers(0, 2) else (row, k)).astype(dt))
            v = tf.matmul(tf.reshape(v, [-1, row]), m, transpose_b=m.shape[0] == k and k != row)
        elif r == 1 and len(shape) >= 2:
            v = tf.transpose(v, [0] + list(range(len(shape), 0, -1)))
        elif r == 2 and shape[-1] > 1:
            v = v[..., 1:] if rng.integers(0, 2) else v[..., ::2]
        elif r == 3:
            v = tf.concat([v, tf.sin(v)], axis=-1)
        elif r == 4 and shape[-1] % 2 == 0:
            a, b = tf.split(v, 2, axis=-1)
            v = a * b
        elif r == 5 and rng.integers(0, 2):
            v = v[1:] if rng.integers(0, 2) else v[::2]   # rows of their own (fewer than T)
        else:
            v = tf.reshape(v, [-1] + shape[::-1])
        shape = [int(d) for d in v.shape[1:]]
        row = int(np.prod(shape))
    return v


def _rows_more(rng, r, v, dt):
    """Reader r of: a negative-step row slice, a slice whose bound is computed from the row
    count, a flatten restacked (rows merged back), a per-row batch matmul by a static
    matrix, a gather on an inner axis (each with its gradient)."""
    shape = [int(d) for d in v.shape[1:]]
    if r == 0:
        return v[::-1] if rng.integers(0, 2) else v[-2::-2]
    if r == 1:
        return v[tf.shape(v)[0] // 2:]
    if r == 2:
        return tf.reshape(tf.reshape(v, [-1]) * tf.constant(1.5, dt), [-1] + shape)
    if r == 3:
        row = int(np.prod(shape))
        m = tf.constant(rng.uniform(-1, 1, (row, int(rng.integers(1, 6)))).astype(dt))
        return tf.matmul(tf.reshape(v, [-1, 1, row]), m)
    return tf.gather(v, [int(i) for i in rng.integers(0, shape[-1], int(rng.integers(1, 5)))], axis=len(shape))


# Seeds 0-11 short chains, 12-13 chains of 10-16 ops (with their gradients: hundreds of
# nodes over run-time rows). Seeds 2 and 3 once took ~140 s each to compile in float32:
# LLVM's O3 on ~57 row loops, each inlining the exact trig argument reduction; that is one
# cold call now (vecmath), and the chains fuse into few row loops (lower_rows.py).
# Seeds 14-19 add one of _rows_more's readers to each chain.
@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_random_readers_of_grown_values(seed, dt):
    """Random ops reading a dynamic TensorArray's stack and a concat accumulator (a
    leading dim known at run time, codegen/lower_rows.py), and the gradients of a loss
    on them with respect to the static operand they broadcast and to the loop's initial
    state (through the reverse loop): compiled, no fallback, one kernel for every trip
    count."""
    steps = (10, 17) if seed >= 12 else (1, 4)
    rng = np.random.default_rng(3000 + seed)
    shape = tuple(int(d) for d in rng.choice([1, 3, 8], size=int(rng.integers(1, 3))))
    width = int(np.prod(shape))
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(dt, shape)
        w = tf.compat.v1.placeholder(dt, shape)
        n = tf.compat.v1.placeholder(tf.int32, [])

        def body(i, h, ta, acc):
            u = tf.tanh(h * 0.9 + 0.1)
            return i + 1, u, ta.write(i, u), tf.concat([acc, tf.reshape(u, [1, width])], 0)
        _, _, ta, acc = tf.while_loop(
            lambda i, h, ta, acc: i < n, body,
            [0, x, tf.TensorArray(dt, size=0, dynamic_size=True), tf.zeros([1, width], dt)],
            shape_invariants=[tf.TensorShape([]), tf.TensorShape(shape), None, tf.TensorShape([None, width])])
        lrng = np.random.default_rng(5000 + seed)   # matmul / layout readers
        mrng = np.random.default_rng(6000 + seed)   # seeds 14-19: each reader of _rows_more, on both values
        more = [(mrng, seed % 5), (mrng, (seed + 2) % 5)] if seed >= 14 else [None, None]
        r1 = _rows_reader(rng, ta.stack(), w, dt, steps, layout_rng=lrng, more=more[0])
        r2 = _rows_reader(rng, acc, tf.reshape(w, [width]), dt, steps, layout_rng=lrng, more=more[1])
        loss = tf.reduce_sum(r1 * r1) + tf.reduce_sum(tf.sin(r2))
        # d/dx runs the reverse loop, which pops a row of each grown value's gradient per iteration
        fetches = [r1, r2] + [gr for gr in tf.gradients(loss, [w, x]) if gr is not None]
    feed = {x: rng.standard_normal(shape).astype(dt), w: (rng.uniform(0.5, 1.5, shape)).astype(dt)}
    _check_one_kernel_for_every_trip_count(g, fetches, feed, n, dt)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_random_gradients_through_accumulators_a_cond_appends_to(seed, dt):
    """An accumulator a cond appends to (each branch its own random row count, 0-3,
    a predicate on the counter or on the state), random rows and a random reader of
    it in the loss: its gradient runs the reverse loop, whose gradient If pops the
    rows its branch appended (passes/growing_vars.if_pops). Compiled, no fallback,
    one kernel for every trip count, vs the interpreter."""
    rng = np.random.default_rng(4000 + seed)
    shape = tuple(int(d) for d in rng.choice([1, 3, 8], size=int(rng.integers(1, 3))))
    width, k = int(np.prod(shape)), int(rng.integers(1, 4))
    counts = [int(c) for c in rng.integers(0, 4, size=2)]
    on_state = bool(seed % 2)
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(dt, shape)
        w = tf.compat.v1.placeholder(dt, shape)
        n = tf.compat.v1.placeholder(tf.int32, [])

        def rows(u, c):
            r = tf.reshape(u, [1, width])
            return [r * float(j + 1) + tf.reshape(w, [1, width]) * float(j) for j in range(c)]

        def body(i, h, acc):
            u = tf.tanh(_expr(rng, [h, w], k)) * 0.9
            p = tf.reduce_sum(u) > 0 if on_state else tf.equal(i % 2, 0)
            acc = tf.cond(p, lambda: tf.concat([acc] + rows(u, counts[0]), 0),
                          lambda: tf.concat([acc] + rows(u * u, counts[1]), 0))
            return i + 1, u, acc
        _, hT, acc = tf.while_loop(
            lambda i, h, acc: i < n, body, [0, x, tf.ones([1, width], dt)],
            shape_invariants=[tf.TensorShape([]), tf.TensorShape(shape), tf.TensorShape([None, width])])
        r = _rows_reader(rng, acc, tf.reshape(w, [width]), dt)
        loss = tf.reduce_sum(tf.sin(r)) + tf.reduce_sum(hT * w)
        fetches = [acc, r] + [gr for gr in tf.gradients(loss, [w, x]) if gr is not None]
    feed = {x: rng.standard_normal(shape).astype(dt), w: rng.uniform(0.5, 1.5, shape).astype(dt)}
    _check_one_kernel_for_every_trip_count(g, fetches, feed, n, dt)


@pytest.mark.parametrize("seed", range(9))
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_random_hessians_of_grown_loops(seed, dt):
    """tf.hessians of a random loss on a grown value (by seed: a concat accumulator, a
    dynamic TensorArray, an accumulator a cond appends 0-3 rows to per branch) with respect
    to the static operand of a random body and reader: the batched pass runs one
    second-order reverse loop per hessian row (batched_gradients._loop_shaped), with the
    cond each pops per branch. A vector of 1-3 weights (a hessian row is a loop copy).
    Compiled, no fallback, one kernel for every trip count, vs the interpreter."""
    rng = np.random.default_rng(6000 + seed)
    width, k = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    counts = [int(c) for c in rng.integers(0, 4, size=2)]
    kind = ("concat", "ta", "cond")[seed % 3]
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(dt, [width])
        w = tf.compat.v1.placeholder(dt, [width])
        n = tf.compat.v1.placeholder(tf.int32, [])

        def body(i, h, acc):
            u = tf.tanh(_expr(rng, [h, w], k)) * 0.9
            r = tf.reshape(u, [1, width])
            if kind == "ta":
                return i + 1, u, acc.write(i, u)
            if kind == "concat":
                return i + 1, u, tf.concat([acc, r], 0)
            return i + 1, u, tf.cond(tf.reduce_sum(u) > 0, lambda: tf.concat([acc] + [r * float(j + 1) for j in range(counts[0])], 0),
                                     lambda: tf.concat([acc] + [r * r + float(j) for j in range(counts[1])], 0))
        acc0 = tf.TensorArray(dt, size=0, dynamic_size=True) if kind == "ta" else tf.ones([1, width], dt)
        _, hT, acc = tf.while_loop(
            lambda i, h, acc: i < n, body, [0, x, acc0],
            shape_invariants=[tf.TensorShape([]), tf.TensorShape([width]),
                              None if kind == "ta" else tf.TensorShape([None, width])])
        st = acc.stack() if kind == "ta" else acc
        r = _rows_reader(rng, st, w, dt)
        loss = tf.reduce_sum(tf.sin(r)) + tf.reduce_sum(hT * w * w)   # (w * w: never linear in w)
        fetches = tf.hessians(loss, w) + tf.gradients(loss, [w])
    feed = {x: rng.standard_normal(width).astype(dt), w: rng.uniform(0.5, 1.5, width).astype(dt)}
    _check_one_kernel_for_every_trip_count(g, fetches, feed, n, dt)


def _check_one_kernel_for_every_trip_count(g, fetches, feed, n, dt):
    """Compiled (no fallback) vs interpreter for several trip counts fed to ``n``;
    at most one compile for all of them."""
    compiles = tf.cache_info()["compiles"]
    for nv in (0, 1, 2, 9):
        a, b = run_both(g, fetches, {**feed, n: nv})
        for i, (p, q) in enumerate(zip(a, b)):
            check_close(p, q, dt, f"fetch {i} n={nv}")
    assert tf.cache_info()["compiles"] - compiles <= 1


def test_map_fn_scan_compile_with_static_and_fed_lengths():
    g = tf.Graph()
    with g.as_default():
        xs = tf.compat.v1.placeholder(tf.float32, [None, 3])
        m = tf.map_fn(lambda r: tf.reduce_sum(r * r), xs)
        s = tf.scan(lambda a, r: a * 0.5 + r, xs)
        (gm,) = tf.gradients(tf.reduce_sum(m) + tf.reduce_sum(s * s), xs)
    for rows in (1, 4, 7):
        xv = np.random.default_rng(rows).standard_normal((rows, 3)).astype(np.float32)
        a, b = run_both(g, [m, s, gm], {xs: xv})
        for i, (p, q) in enumerate(zip(a, b)):
            check_close(p, q, np.float32, f"fetch {i} rows={rows}")


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_random_variable_assignments_in_conds_and_loops(seed, dt):
    """Variables assigned (assign / assign_add / assign_sub) in random branches and
    loop bodies, read before and after: compiled (native, no fallback) vs interpreter,
    the fetched values and the variables after each of several runs."""
    rng = np.random.default_rng(2000 + seed)
    shape = tuple(int(d) for d in rng.choice([1, 3, 8], size=int(rng.integers(0, 3))))
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable(rng.standard_normal(shape).astype(dt) * 0.5)
        u = tf.Variable(rng.standard_normal(shape).astype(dt) * 0.5)
        x = tf.compat.v1.placeholder(dt, shape)
        sel = tf.compat.v1.placeholder(tf.int32, [])
        n = tf.compat.v1.placeholder(tf.int32, [])
        k1, k2, k3 = (int(c) for c in rng.integers(2, 4, size=3))
        update = [lambda var, e: var.assign(e), lambda var, e: var.assign_add(e), lambda var, e: var.assign_sub(e)]
        a1, a2, a3 = (update[int(i)] for i in rng.integers(0, 3, size=3))

        def then():
            r = a1(v, tf.tanh(_expr(rng, [v * 1.0, x], k1)))
            return r + u
        c = tf.cond(sel > 0, then, lambda: (a2(u, tf.tanh(_expr(rng, [u * 1.0, x], k2)) * 0.5), v * 2.0)[1])

        def body(i, acc):
            before = v * 1.0
            a3(v, tf.tanh(_expr(rng, [v * 1.0, u * 1.0, x], k3)) * 0.9)
            tf.cond(tf.equal(i % 2, 0), lambda: u.assign_add(v * 0.25), lambda: u * 1.0)
            return i + 1, acc + tf.reduce_sum(v * before) + tf.reduce_sum(u)
        _, acc = tf.while_loop(lambda i, acc: i < n, body, [0, tf.constant(0.0, dt)])
        init = tf.compat.v1.global_variables_initializer()
    feed = {x: rng.standard_normal(shape).astype(dt)}
    results = []
    for mode in ("interpret", "compiled"):
        sess = tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto(jitgrad_mode=mode))
        sess.run(init)
        before = tf.cache_info()["fallbacks"]
        outs = []
        for sv, nv in ((1, 0), (0, 3), (1, 4), (0, 1)):
            outs.append(sess.run([c, acc], {**feed, sel: sv, n: nv}) + sess.run([v, u]))
        assert tf.cache_info()["fallbacks"] == before, "compiled run fell back to the interpreter"
        results.append(outs)
    for r, (p, q) in enumerate(zip(*results)):
        for i, (a, b) in enumerate(zip(p, q)):
            check_close(a, b, dt, f"run {r} fetch {i}")


def _run_per_mode(build, feeds):
    """[mode] -> the runs of ``feeds``, each mode on its own graph from ``build()`` (a
    graph's random ops go on drawing from run to run: both modes must start alike)."""
    runs = {}
    for mode in ("interpret", "compiled"):
        g, fetches, feed_of = build()
        sess = tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto(jitgrad_mode=mode))
        before = tf.cache_info()["fallbacks"]
        runs[mode] = [sess.run(fetches, feed_of(f)) for f in feeds]
        assert tf.cache_info()["fallbacks"] == before, f"{mode} run fell back to the interpreter"
    return runs


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_random_nested_loops_with_dropout(seed, dt):
    """A dropout mask drawn in a while_loop nested in a while_loop (odd seeds: in one more,
    three deep), fed trip counts, each inner one's changing with its outer counter, random
    bodies; values, first and second gradients: the inner loop's saved masks form a ragged
    stack, three deep a stack of ragged stacks (compiled)."""
    depth = 2 + seed % 2

    def build():
        rng = np.random.default_rng(3000 + seed)
        shape = tuple(int(d) for d in rng.choice([1, 3, 8], size=int(rng.integers(1, 3))))
        k1, k2 = (int(v) for v in rng.integers(2, 4, size=2))
        g = tf.Graph()
        with g.as_default():
            tf.random.set_seed(seed)     # the graph's seed (TF 2: an eager set_seed does not reach it)
            x = tf.compat.v1.placeholder(dt, shape)
            w = tf.compat.v1.placeholder(dt, shape)
            n, m = tf.compat.v1.placeholder(tf.int32, []), tf.compat.v1.placeholder(tf.int32, [])

            def nest(level, h, acc, trips):
                def body(i, u, a):
                    if level == 1:
                        keep = tf.cast(tf.random.uniform(shape, seed=1, dtype=dt) > 0.3, dt) / 0.7
                        u = tf.tanh(_expr(rng, [u, w], k2)) * keep * 0.9
                        return i + 1, u, a + tf.reduce_sum(u * u)
                    u, a = nest(level - 1, u, a, m + i % 2)
                    return i + 1, tf.tanh(_expr(rng, [u, x], k1)) * 0.9, a
                return tf.while_loop(lambda i, u, a: i < trips, body, [0, h, acc])[1:]
            hT, acc = nest(depth, x, tf.constant(0.0, dt), n)
            loss = tf.reduce_sum(tf.sin(hT) * w) + acc
            grads = [gr for gr in tf.gradients(loss, [x, w]) if gr is not None]
            second = [gr for gr in tf.gradients(tf.reduce_sum(grads[0] * grads[0]), [x]) if gr is not None]
            fetches = [hT, acc, loss] + grads + second
        vals = {x: rng.standard_normal(shape).astype(dt), w: (rng.standard_normal(shape) * 0.5).astype(dt)}
        return g, fetches, lambda f: {**vals, n: f[0], m: f[1]}
    feeds = [(0, 2), (3, 0), (4, 3), (2, 5)]
    runs = _run_per_mode(build, feeds)
    for ra, rb, f in zip(runs["interpret"], runs["compiled"], feeds):
        for i, (p, q) in enumerate(zip(ra, rb)):
            check_close(p, q, dt, f"fetch {i} n, m = {f}")


@pytest.mark.parametrize("seed", range(4))
def test_random_fed_size_tensor_array_writes(seed):
    """A TensorArray of a fed size written in a loop at a random index order (the counter,
    the reverse, a stride modulo the size), random bodies; stack and gradients."""
    rng = np.random.default_rng(4000 + seed)
    shape = tuple(int(d) for d in rng.choice([1, 3], size=int(rng.integers(0, 2))))
    order = ["forward", "reverse", "stride"][seed % 3]
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float64, shape)
        w = tf.compat.v1.placeholder(tf.float64, shape)
        n = tf.compat.v1.placeholder(tf.int32, [])
        k = int(rng.integers(2, 4))

        def body(i, h, ta):
            u = tf.tanh(_expr(rng, [h, w], k)) * 0.9
            at = {"forward": i, "reverse": n - 1 - i, "stride": (3 * i) % n}[order]   # (3: coprime to the sizes fed)
            return i + 1, u, ta.write(at, u)
        _, hT, ta = tf.while_loop(lambda i, h, ta: i < n, body, [0, x, tf.TensorArray(tf.float64, size=n)])
        st = ta.stack()
        grads = [gr for gr in tf.gradients(tf.reduce_sum(tf.sin(st)) + tf.reduce_sum(hT * w), [x, w])
                 if gr is not None]
        fetches = [hT, st] + grads
    feed = {x: rng.standard_normal(shape), w: rng.standard_normal(shape) * 0.5}
    for nv in (1, 4, 5):
        a, b = run_both(g, fetches, {**feed, n: nv})
        for i, (p, q) in enumerate(zip(a, b)):
            check_close(p, q, np.float64, f"fetch {i} n={nv}")
        assert a[1].shape == (nv,) + shape
