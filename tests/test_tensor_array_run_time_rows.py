"""A dynamic TensorArray a tf.while_loop writes out of order, carried as a buffer of rows
known only at run time (ops/zero_rows.py, tensor_array_preallocated.py, ops/row_store.py):
one kernel for every trip count, permuted writes (``perm[i]``, perm fed) compiled too,
bounds checked with TF's errors, the length computed in int64.

Expected values are numpy's replay of the writes in order (a later write wins, rows never
written are zeros, an index past the end grows the array: TF's TensorListSetItem with
resize), and the gradients are derived by hand from that replay (each written row is
x * (i + 1)), checked against central finite differences of the interpreter's loss once.
Every compiled run is also compared with the interpreter's on the same graph. TF 2.21 (graph
mode, same program) gives the same stacks and gradients for perm [5, 1, 5] and [2, 2, 0, 2]
and an InvalidArgumentError for a perm shorter than T; on a negative index it crashes, where
jitgrad raises its TensorList error."""
import re

import numpy as np
import pytest

import jitgrad as tf
from jitgrad.ops.zero_rows import LENGTH_MESSAGE

tf1 = tf.compat.v1
IAE = tf.errors.InvalidArgumentError
X = np.array([1.0, -2.0, 0.5], np.float32)

pytestmark = pytest.mark.usefixtures("graph_mode")
compiled = pytest.mark.usefixtures("no_fallback")


def _replay(indices, rows0=0):
    """The stacked array after writing x * (i + 1) at indices[i], in order (numpy)."""
    n = max([rows0] + [k + 1 for k in indices])
    out = np.zeros((n, X.size), np.float32)
    for i, k in enumerate(indices):
        out[k] = X * (i + 1)
    return out


def _cube_grad(indices):
    """d/dx of sum(stack ** 3) for the writes of _replay (by hand: only the last write of
    each row survives, row = x * c, d sum((x c)^3) / dx = 3 c^3 x^2)."""
    last = {}
    for i, k in enumerate(indices):
        last[k] = i + 1
    return 3 * sum(c ** 3 for c in last.values()) * X * X


def _graph(index, with_perm=False):
    """for i < T: ta.write(index(i, T, P), x * (i + 1)); fetches [stack, sum(stack^3), its gradient]."""
    g = tf.Graph()
    with g.as_default():
        T = tf1.placeholder(tf.int32, [])
        P = tf1.placeholder(tf.int32, [None])
        x = tf1.placeholder(tf.float32, [X.size])
        ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True)

        def body(i, ta):
            return i + 1, ta.write(index(i, T, P), x * tf.cast(i + 1, tf.float32))
        _, ta = tf.while_loop(lambda i, ta: i < T, body, [0, ta])
        st = ta.stack()
        loss = tf.reduce_sum(st * st * st)
        fetch = [st, loss, tf.gradients(loss, x)[0]]
    return g, (T, P, x), fetch


def _run_all(g, phs, fetch, feeds, mode=None):
    """Runs every feed (T, perm); an InvalidArgumentError is returned, not raised."""
    T, P, x = phs
    config = tf1.ConfigProto(jitgrad_mode=mode) if mode else None
    out = []
    with tf1.Session(graph=g, config=config) as s:
        for t, p in feeds:
            try:
                out.append(s.run(fetch, {T: t, P: np.asarray(p, np.int32), x: X}))
            except IAE as e:
                out.append(e)
    return out


def _kernels():
    info = tf.cache_info()
    return info["compiles"] + info["memory_hits"] + info["disk_hits"]


def _same_as_interpreter(got, g, phs, fetch, feeds):
    ref = _run_all(g, phs, fetch, feeds, mode="interpret")
    for a, b in zip(got, ref):
        if isinstance(b, Exception):
            assert type(a) is type(b) and a.message.split(" [[")[0] == b.message.split(" [[")[0]
            continue
        for u, v in zip(a, b):
            np.testing.assert_allclose(u, v, rtol=1e-6)


@compiled
def test_reversed_writes_one_kernel_for_every_trip_count(graph_mode):
    g, phs, fetch = _graph(lambda i, T, P: T - 1 - i)
    feeds = [(t, [0]) for t in (0, 1, 50, 300, 7)]
    before = _kernels()
    got = _run_all(g, phs, fetch, feeds)
    if graph_mode == "compiled":
        assert _kernels() - before == 1     # (one kernel fetched once, five trip counts)
    for (t, _), (st, loss, grad) in zip(feeds, got):
        idx = [t - 1 - i for i in range(t)]
        np.testing.assert_array_equal(st, _replay(idx))
        np.testing.assert_allclose(loss, np.sum(_replay(idx).astype(np.float64) ** 3), rtol=1e-5)
        np.testing.assert_allclose(grad, _cube_grad(idx), rtol=1e-5)
    _same_as_interpreter(got, g, phs, fetch, feeds)


@compiled
def test_permuted_writes_fed_compile_and_match_numpy(graph_mode):
    rng = np.random.default_rng(5)
    n = 40
    perms = [rng.permutation(n), rng.permutation(n), np.arange(n)[::-1].copy()]
    g, phs, fetch = _graph(lambda i, T, P: P[i])
    # T = len(perm), and T below it (the array is as long as the largest index written + 1)
    feeds = [(n, p) for p in perms] + [(5, perms[0]), (0, perms[1]), (1, perms[2])]
    before = _kernels()
    got = _run_all(g, phs, fetch, feeds)
    if graph_mode == "compiled":
        assert _kernels() - before == 1     # (perm of one length, any values, any T)
    for (t, p), (st, _, grad) in zip(feeds, got):
        idx = [int(k) for k in p[:t]]
        np.testing.assert_array_equal(st, _replay(idx))
        np.testing.assert_allclose(grad, _cube_grad(idx), rtol=1e-5)
    _same_as_interpreter(got, g, phs, fetch, feeds)


@compiled
def test_writes_past_the_end_grow_and_double_writes_keep_the_last():
    g, phs, fetch = _graph(lambda i, T, P: P[i])
    feeds = [(3, [5, 1, 5]), (4, [2, 2, 0, 2]), (2, [7, 7])]
    got = _run_all(g, phs, fetch, feeds)
    for (t, p), (st, _, grad) in zip(feeds, got):
        np.testing.assert_array_equal(st, _replay(p[:t]))      # rows never written: zeros
        np.testing.assert_allclose(grad, _cube_grad(p[:t]), rtol=1e-5)
    _same_as_interpreter(got, g, phs, fetch, feeds)


@compiled
def test_negative_index_is_tfs_modify_error_and_the_next_run_is_fine():
    g, phs, fetch = _graph(lambda i, T, P: P[i])
    feeds = [(3, [0, -1, 2]), (2, [-3, 0]), (2, [1, 0]), (1, [0])]
    got = _run_all(g, phs, fetch, feeds)
    assert isinstance(got[0], IAE) and "Trying to modify element -1 in a list with 1 elements." in got[0].message
    assert isinstance(got[1], IAE) and "Trying to modify element -3 in a list with 0 elements." in got[1].message
    np.testing.assert_array_equal(got[2][0], _replay([1, 0]))
    np.testing.assert_array_equal(got[3][0], _replay([0]))
    _same_as_interpreter(got, g, phs, fetch, feeds)


def test_perm_shorter_than_the_trip_count_is_an_error():
    g, phs, fetch = _graph(lambda i, T, P: P[i])
    (got,) = _run_all(g, phs, fetch, [(4, [0, 1])])
    assert isinstance(got, IAE)     # (the slice of perm, as TF's strided_slice)


@compiled
def test_reversed_writes_out_of_range_is_tfs_modify_error():
    # T - 2 - i: the last write is at -1, in an array of T - 1 rows
    g, phs, fetch = _graph(lambda i, T, P: T - 2 - i)
    (got,) = _run_all(g, phs, fetch, [(3, [0])])
    assert isinstance(got, IAE) and "Trying to modify element -1 in a list with 2 elements." in got.message


@compiled
def test_length_past_int32_fails_before_anything_is_allocated():
    # i + P[0] with P[0] = 2**31 - 2: the length after the loop, computed in int64, is 2**31 + 1
    # (the body's int32 index would wrap to a negative one): TF's InvalidArgumentError, no OOB
    g, phs, fetch = _graph(lambda i, T, P: i + P[0])
    got = _run_all(g, phs, fetch, [(3, [2 ** 31 - 2]), (2, [1])])
    assert isinstance(got[0], IAE) and LENGTH_MESSAGE in got[0].message
    np.testing.assert_array_equal(got[1][0], _replay([1, 2]))


@compiled
def test_entry_rows_and_their_gradient(graph_mode):
    # the array enters with two rows computed from x (unstacked); the loop overwrites row 0 and
    # appends past them out of order: d/dx of sum(stack^3) by hand
    g = tf.Graph()
    with g.as_default():
        T = tf1.placeholder(tf.int32, [])
        x = tf1.placeholder(tf.float32, [X.size])
        ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True).unstack(tf.stack([x * 2.0, x * 3.0]))

        def body(i, ta):   # writes rows T, T-1, ..., 1... then 0 last: i = T - 1 -> row 0
            return i + 1, ta.write(T - 1 - i, x * tf.cast(i + 1, tf.float32))
        _, ta = tf.while_loop(lambda i, ta: i < T, body, [0, ta])
        st = ta.stack()
        loss = tf.reduce_sum(st * st * st)
        fetch = [st, tf.gradients(loss, x)[0]]
        with tf1.Session() as s:
            for t in (0, 1, 4):
                got, grad = s.run(fetch, {T: t, x: X})
                idx = [t - 1 - i for i in range(t)]
                want = _replay(idx, rows0=2)
                c = {0: 2.0, 1: 3.0}       # entry rows not overwritten keep x * c
                for k in (0, 1):
                    if k not in idx:
                        want[k] = X * c[k]
                for i, k in enumerate(idx):
                    c[k] = i + 1
                np.testing.assert_allclose(got, want, rtol=1e-6)
                np.testing.assert_allclose(grad, 3 * sum(v ** 3 for v in c.values()) * X * X, rtol=1e-5)


def test_gradient_matches_finite_differences():
    # (the hand-derived gradients above, checked once against the loss itself)
    g, (T, P, x), fetch = _graph(lambda i, T, P: P[i])
    p = np.array([3, 0, 3, 1], np.int32)
    with tf1.Session(graph=g, config=tf1.ConfigProto(jitgrad_mode="interpret")) as s:
        x64 = X.astype(np.float64)
        grad = s.run(fetch[2], {T: 4, P: p, x: X})
        eps = 1e-2
        for j in range(X.size):
            d = np.zeros_like(x64)
            d[j] = eps
            hi = s.run(fetch[1], {T: 4, P: p, x: (x64 + d).astype(np.float32)})
            lo = s.run(fetch[1], {T: 4, P: p, x: (x64 - d).astype(np.float32)})
            np.testing.assert_allclose(grad[j], (hi - lo) / (2 * eps), rtol=2e-3)
    np.testing.assert_allclose(grad, _cube_grad(p), rtol=1e-6)


def test_gradient_loop_does_not_save_the_buffer_per_iteration():
    # what the reverse loop reads of the forward loop per iteration: the index (and what x's
    # gradient needs), never the [rows, 3] buffer (a [T, rows, 3] stack: memory quadratic in T)
    g, _, fetch = _graph(lambda i, T, P: T - 1 - i)
    grad_loops = [op for op in g.get_operations() if op.type == "While" and "grad" in op.name]
    assert grad_loops
    for op in grad_loops:
        for t in op.inputs:
            assert t.shape.rank is None or t.shape.rank < 3, t


@pytest.mark.parametrize("permuted", [False, True])
def test_staged_for_loop_one_kernel(permuted, graph_mode):
    @tf.function
    def f(x, T, perm):
        ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
        for i in tf.range(T):
            ta = ta.write(perm[i] if permuted else T - 1 - i, x * tf.cast(i + 1, tf.float32))
        return ta.stack()

    perm = np.array([4, 2, 0, 1, 3, 5], np.int32)
    before, kernels = tf.cache_info()["fallbacks"], _kernels()
    for t in (3, 1, 6, 0):
        got = f(tf.constant(X), tf.constant(t), tf.constant(perm)).numpy()
        idx = [int(perm[i]) if permuted else t - 1 - i for i in range(t)]
        np.testing.assert_array_equal(got, _replay(idx))
    assert tf.cache_info()["fallbacks"] == before
    if graph_mode == "compiled":
        assert _kernels() - kernels == 1


@compiled
def test_two_writes_an_iteration_one_kernel(graph_mode):
    # ta.write(T - 1 - i, x c).write(P[i], -x c): a chain of two row stores in place
    g = tf.Graph()
    with g.as_default():
        T = tf1.placeholder(tf.int32, [])
        P = tf1.placeholder(tf.int32, [None])
        x = tf1.placeholder(tf.float32, [X.size])
        ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True)

        def body(i, ta):
            c = x * tf.cast(i + 1, tf.float32)
            return i + 1, ta.write(T - 1 - i, c).write(P[i], -c)
        _, ta = tf.while_loop(lambda i, ta: i < T, body, [0, ta])
        st = ta.stack()
        fetch = [st, tf.gradients(tf.reduce_sum(st * st * st), x)[0]]
    p = np.array([6, 0, 2, 2, 1, 9, 3, 0], np.int32)
    before = _kernels()
    with tf1.Session(graph=g) as s:
        for t in (0, 3, 8):
            got, grad = s.run(fetch, {T: t, P: p, x: X})
            rows = max([t] + [int(k) + 1 for k in p[:t]])
            want, last = np.zeros((rows, X.size), np.float32), {}
            for i in range(t):
                want[t - 1 - i], last[t - 1 - i] = X * (i + 1), i + 1.0
                want[p[i]], last[int(p[i])] = -X * (i + 1), -(i + 1.0)
            np.testing.assert_array_equal(got, want)
            np.testing.assert_allclose(grad, 3 * sum(c ** 3 for c in last.values()) * X * X, rtol=1e-5)
    if graph_mode == "compiled":
        assert _kernels() - before == 1


@compiled
def test_stack_times_a_static_weight_of_t_rows(graph_mode):
    # stack (run-time rows) * w ([T, 1], T fed: TF's shapes make the product static): its rows
    # must be T or 1, else TF's "Incompatible shapes"; the gradient sums back into the stack
    g = tf.Graph()
    with g.as_default():
        T = tf1.placeholder(tf.int32, [])
        n = tf1.placeholder(tf.int32, [])
        x = tf1.placeholder(tf.float32, [X.size])
        ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
        _, ta = tf.while_loop(lambda i, ta: i < n,
                              lambda i, ta: (i + 1, ta.write(n - 1 - i, x * tf.cast(i + 1, tf.float32))), [0, ta])
        st = ta.stack()
        w = tf.cast(tf.range(T) + 1, tf.float32)[:, None]
        loss = tf.reduce_sum(st * st * w)
        fetch = [loss, tf.gradients(loss, x)[0]]
        with tf1.Session() as s:
            for t, rows in ((3, 3), (4, 1), (2, 0)):
                got = s.run(fetch, {T: t, n: rows, x: X}) if rows in (t, 1) else None
                if got is None:
                    with pytest.raises(IAE):
                        s.run(fetch, {T: t, n: rows, x: X})
                    continue
                c = [rows - i for i in range(rows)]              # row r holds x * (rows - r)
                wsum = [sum(range(1, t + 1))] if rows == 1 else list(range(1, t + 1))
                k = sum(cc * cc * ww for cc, ww in zip(c, wsum))
                np.testing.assert_allclose(got[0], k * np.sum(X * X), rtol=1e-6)
                np.testing.assert_allclose(got[1], 2 * k * X, rtol=1e-6)


def _nested_graph():
    """An outer loop over j < 3 whose body runs the reversed-writes loop scaled by j (its
    buffer a region's own), the same loop at the top level, and gradients."""
    g = tf.Graph()
    with g.as_default():
        T = tf1.placeholder(tf.int32, [])
        x = tf1.placeholder(tf.float32, [X.size])

        def inner(scale):
            ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
            _, ta = tf.while_loop(lambda i, ta: i < T,
                                  lambda i, ta: (i + 1, ta.write(T - 1 - i, x * scale * tf.cast(i + 1, tf.float32))),
                                  [0, ta])
            return ta.stack()
        _, acc = tf.while_loop(lambda j, a: j < 3,
                               lambda j, a: (j + 1, a + tf.reduce_sum(inner(tf.cast(j, tf.float32)) ** 3)),
                               [0, tf.constant(0.0)])
        st = inner(1.0)
        gx = tf.gradients(tf.reduce_sum(st * st * st), x)[0]
        gg = tf.gradients(tf.reduce_sum(gx * gx), x)[0]
        ga = tf.gradients(acc, x)[0]
    return g, T, x, {"first": [acc, ga, gx], "second": [gg]}


def _check_nested(which, want):
    g, T, x, fetches = _nested_graph()
    for t in (0, 2, 5):
        c3 = sum((i + 1) ** 3 for i in range(t))
        with tf1.Session(graph=g) as s:
            got = s.run(fetches[which], {T: t, x: X})
        with tf1.Session(graph=g, config=tf1.ConfigProto(jitgrad_mode="interpret")) as s:
            ref = s.run(fetches[which], {T: t, x: X})
        for a, b, w in zip(got, ref, want(c3)):
            np.testing.assert_allclose(b, w, rtol=1e-5)
            np.testing.assert_allclose(a, b, rtol=1e-5)


@compiled
def test_loop_in_a_loop_and_its_gradient():
    s3 = sum(j ** 3 for j in range(3))
    _check_nested("first", lambda c3: [s3 * c3 * np.sum(X ** 3), 3 * s3 * c3 * X * X,
                                                         3 * c3 * X * X])


@compiled
def test_second_derivative_matches_the_interpreter():
    # d/dx of |d/dx sum(stack^3)|^2: the gradient's SetRow differentiated again, by hand
    # d/dx sum((3 c3 x^2)^2) = 36 c3^2 x^3. (The first gradient's loop is differentiated with
    # respect to the constant scale it captures too; no one reads that, so the stack of its
    # buffer per iteration it would need is not built: passes/regions.needed_loop_vars)
    _check_nested("second", lambda c3: [36 * c3 ** 2 * X ** 3])


def _second_order_graph(index, fed_scale=False):
    """for i < T: ta.write(index(i, T, P), x * s * (i + 1)), s a scale the loop captures (a
    constant, or fed: nothing differentiates with respect to it); loss = sum(stack^3);
    fetches [d loss/dx, d/dx sum((d loss/dx)^2), the Hessian of loss]."""
    g = tf.Graph()
    with g.as_default():
        T = tf1.placeholder(tf.int32, [])
        P = tf1.placeholder(tf.int32, [None])
        x = tf1.placeholder(tf.float32, [X.size])
        S = tf1.placeholder_with_default(np.float32(SCALE), []) if fed_scale else tf.constant(SCALE)
        ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
        _, ta = tf.while_loop(lambda i, ta: i < T,
                              lambda i, ta: (i + 1, ta.write(index(i, T, P), x * S * tf.cast(i + 1, tf.float32))),
                              [0, ta])
        loss = tf.reduce_sum(ta.stack() ** 3)
        gx = tf.gradients(loss, x)[0]
        gg = tf.gradients(tf.reduce_sum(gx * gx), x)[0]
        (h,) = tf.hessians(loss, x)
    return g, (T, P, x), [gx, gg, h]


PERM = np.array([4, 1, 4, 0, 2, 1], np.int32)   # (rows 4 and 1 written twice: the later write wins)
SCALE = 1.5


@compiled
@pytest.mark.parametrize("fed_scale", [False, True])
@pytest.mark.parametrize("permuted", [False, True])
def test_second_derivatives_one_kernel_for_every_trip_count(permuted, fed_scale, graph_mode):
    # by hand (see _cube_grad, each row x * s * c): d loss/dx = 3 s^3 C x^2, C the sum of c^3
    # over the rows' last writes; d/dx sum((3 s^3 C x^2)^2) = 36 s^6 C^2 x^3; the Hessian
    # diag(6 s^3 C x)
    g, (T, P, x), fetch = _second_order_graph((lambda i, T, P: P[i]) if permuted else (lambda i, T, P: T - 1 - i),
                                              fed_scale)
    ts = (0, 1, 2, 5)
    before = _kernels()
    with tf1.Session(graph=g) as s:
        got = [s.run(fetch, {T: t, P: PERM, x: X}) for t in ts]
    if graph_mode == "compiled":
        assert _kernels() - before == 1     # (one kernel, four trip counts)
    with tf1.Session(graph=g, config=tf1.ConfigProto(jitgrad_mode="interpret")) as s:
        ref = [s.run(fetch, {T: t, P: PERM, x: X}) for t in ts]
    s3 = SCALE ** 3
    for t, (gx, gg, h), r in zip(ts, got, ref):
        idx = [int(PERM[i]) if permuted else t - 1 - i for i in range(t)]
        last = {}
        for i, k in enumerate(idx):
            last[k] = i + 1
        C = sum(c ** 3 for c in last.values())
        np.testing.assert_allclose(gx, 3 * s3 * C * X * X, rtol=1e-5)
        np.testing.assert_allclose(gg, 36 * s3 ** 2 * C ** 2 * X ** 3, rtol=1e-5)
        np.testing.assert_allclose(h, np.diag(6 * s3 * C * X), rtol=1e-5)
        for a, b in zip((gx, gg, h), r):
            np.testing.assert_allclose(a, b, rtol=1e-6)


def _mixed_graph(index):
    """for i < T: ta.write(index(i, T, P), x * s * (i + 1)), s a fed scalar the loop captures;
    loss = sum(stack^3); fetches [stack, d loss/dx, d/ds sum(d loss/dx), d/dx sum(d loss/dx)]."""
    g = tf.Graph()
    with g.as_default():
        T = tf1.placeholder(tf.int32, [])
        P = tf1.placeholder(tf.int32, [None])
        x = tf1.placeholder(tf.float32, [X.size])
        S = tf1.placeholder(tf.float32, [])
        ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
        _, ta = tf.while_loop(lambda i, ta: i < T,
                              lambda i, ta: (i + 1, ta.write(index(i, T, P), x * S * tf.cast(i + 1, tf.float32))),
                              [0, ta])
        st = ta.stack()
        gx = tf.gradients(tf.reduce_sum(st ** 3), x)[0]
        gs, gxx = tf.gradients(tf.reduce_sum(gx), [S, x])
    return g, (T, P, x, S), [st, gx, gs, gxx]


@compiled
@pytest.mark.parametrize("permuted", [False, True])
def test_mixed_derivative_in_the_scale_one_kernel_for_every_trip_count(permuted, graph_mode):
    # by hand (each row x * s * c, C the sum of c^3 over the rows' last writes): d loss/dx =
    # 3 s^3 C x^2; d/ds sum(3 s^3 C x^2) = 9 s^2 C sum(x^2); d/dx of it 6 s^3 C x. The d/ds needs
    # each iteration's replaced row of the first gradient's buffer gradient: the first gradient's
    # loop saves that row ([T, 3]), not its whole buffer ([T, rows, 3]), so it compiles
    g, (T, P, x, S), fetch = _mixed_graph((lambda i, T, P: P[i]) if permuted else (lambda i, T, P: T - 1 - i))
    ts = (0, 1, 2, 5)
    feed = lambda t: {T: t, P: PERM, x: X, S: SCALE}
    before = _kernels()
    with tf1.Session(graph=g) as s:
        got = [s.run(fetch, feed(t)) for t in ts]
        kernels = _kernels() - before
        r = tf.explain(fetch, feed(5), session=s)
    if graph_mode == "compiled":
        assert kernels == 1     # (one kernel, four trip counts)
        assert not r.fallback, r.reason
    with tf1.Session(graph=g, config=tf1.ConfigProto(jitgrad_mode="interpret")) as s:
        ref = [s.run(fetch, feed(t)) for t in ts]
    for t, (st, gx, gs, gxx), rf in zip(ts, got, ref):
        idx = [int(PERM[i]) if permuted else t - 1 - i for i in range(t)]
        last = {}
        for i, k in enumerate(idx):
            last[k] = i + 1
        C = sum(c ** 3 for c in last.values())
        np.testing.assert_allclose(st, _replay(idx) * np.float32(SCALE), rtol=1e-6)
        np.testing.assert_allclose(gx, 3 * SCALE ** 3 * C * X * X, rtol=1e-5)
        np.testing.assert_allclose(gs, 9 * SCALE ** 2 * C * np.sum(X * X), rtol=1e-5)
        np.testing.assert_allclose(gxx, 6 * SCALE ** 3 * C * X, rtol=1e-5)
        for a, b in zip((st, gx, gs, gxx), rf):
            np.testing.assert_allclose(a, b, rtol=1e-6)


def test_mixed_derivative_saves_one_row_per_iteration_not_the_buffer(graph_mode):
    # memory linear in T: the first gradient's loop saves per iteration the row its SetRow
    # replaces ([T, 3], static rank 2) for the reverse loop of the second derivative, which
    # reads no [T, rows, 3] stack (the loop's whole buffer gradient per iteration)
    g, (T, P, x, S), fetch = _mixed_graph(lambda i, T, P: T - 1 - i)
    first = [op for op in g.get_operations() if op.type == "While" and op.attrs.get("saved_rows")]
    assert len(first) == 1
    a = first[0].attrs
    n = a["n_vars"]
    rows = first[0].outputs[n + 1 + a["saved_at"] + 2 * n]
    assert rows.shape.as_list() == [None, 3]
    second = [op for op in g.get_operations() if op.type == "While" and any(t is rows for t in op.inputs)]
    assert len(second) == 1 and "While_grad_grad" in second[0].name
    for op in g.get_operations():
        if op.type == "While":
            for t in op.inputs:
                assert t.shape.rank is None or t.shape.rank < 3, (op.name, t)
    # the saved rows: forward iteration k wrote row T-1-k as x s (k + 1); the buffer gradient's
    # row there, d sum(stack^3)/d row, is 3 (x s (k + 1))^2 (interpreted: a fetched stack of a
    # run-time trip count is not compiled)
    with tf1.Session(graph=g, config=tf1.ConfigProto(jitgrad_mode="interpret")) as s:
        for t in (0, 1, 2, 5):
            got = s.run(rows, {T: t, x: X, S: SCALE})
            assert got.shape == (t, 3)
            want = np.array([3 * (X * SCALE * (k + 1)) ** 2 for k in range(t)], np.float32).reshape(t, 3)
            np.testing.assert_allclose(got, want, rtol=1e-6)
    if graph_mode == "compiled":
        # and the kernel holds no buffer of rank 3 (a stack of buffers)
        with tf1.Session(graph=g) as s:
            r = tf.explain(fetch[2:], {T: 5, x: X, S: SCALE, P: PERM}, session=s)
        assert not r.fallback, r.reason
        shapes = [re.search(r"\[([^\]]*)\] \w+$", name) for name, _, _ in r.buffers]
        shapes = [m.group(1).split(", ") for m in shapes if m]
        assert shapes and all(len(d) < 3 for d in shapes), shapes
        assert ["None", "3"] in shapes


@compiled
def test_two_writes_an_iteration_mixed_and_third_derivative_in_the_scale(graph_mode):
    # rows 2T-1-2i = x s c and 2T-2-2i = x s^2 c (c = i + 1, two SetRows chained, each saving
    # the row it replaces): loss = (s^3 + s^6) C sum(x^3), C the sum of c^3, so by hand
    # d/ds sum(d loss/dx) = (9 s^2 + 18 s^5) C sum(x^2), and d/ds of that (third order)
    # (18 s + 90 s^4) C sum(x^2)
    g = tf.Graph()
    with g.as_default():
        T = tf1.placeholder(tf.int32, [])
        x = tf1.placeholder(tf.float32, [X.size])
        S = tf1.placeholder(tf.float32, [])
        ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True)

        def body(i, ta):
            c = tf.cast(i + 1, tf.float32)
            ta = ta.write(2 * T - 1 - 2 * i, x * S * c)
            return i + 1, ta.write(2 * T - 2 - 2 * i, x * S * S * c)
        _, ta = tf.while_loop(lambda i, ta: i < T, body, [0, ta])
        gx = tf.gradients(tf.reduce_sum(ta.stack() ** 3), x)[0]
        gs = tf.gradients(tf.reduce_sum(gx), S)[0]
        gss = tf.gradients(gs, S)[0]
    ts = (0, 1, 2, 5)
    out = {}
    for mode in (None, "interpret"):
        with tf1.Session(graph=g, config=tf1.ConfigProto(jitgrad_mode=mode) if mode else None) as s:
            out[mode] = [s.run([gs, gss], {T: t, x: X, S: SCALE}) for t in ts]
    for t, (gs_, gss_), ref in zip(ts, out[None], out["interpret"]):
        C = sum((i + 1) ** 3 for i in range(t))
        np.testing.assert_allclose(gs_, (9 * SCALE ** 2 + 18 * SCALE ** 5) * C * np.sum(X * X), rtol=1e-5)
        np.testing.assert_allclose(gss_, (18 * SCALE + 90 * SCALE ** 4) * C * np.sum(X * X), rtol=1e-5)
        np.testing.assert_allclose([gs_, gss_], ref, rtol=1e-6)


def test_hessian_matches_finite_differences_of_the_gradient():
    # (the hand-derived Hessian above, checked once against the interpreter's gradient)
    g, (T, P, x), (gx, _, h) = _second_order_graph(lambda i, T, P: P[i])
    with tf1.Session(graph=g, config=tf1.ConfigProto(jitgrad_mode="interpret")) as s:
        feed = {T: 5, P: PERM}
        hess = s.run(h, {**feed, x: X})
        eps = 1e-2
        for j in range(X.size):
            d = np.zeros(X.size, np.float64)
            d[j] = eps
            hi = s.run(gx, {**feed, x: (X + d).astype(np.float32)})
            lo = s.run(gx, {**feed, x: (X - d).astype(np.float32)})
            np.testing.assert_allclose(hess[:, j], (hi - lo) / (2 * eps), rtol=2e-3, atol=1e-3)


@compiled
@pytest.mark.parametrize("dtype", ["float64", "int32"])
def test_two_arrays_scalar_and_row_elements_of_other_dtypes(dtype):
    # one loop writing a scalar array reversed (preallocated) and a row array at perm[i] (grown)
    dt = tf.as_dtype(dtype)
    g = tf.Graph()
    with g.as_default():
        T = tf1.placeholder(tf.int32, [])
        P = tf1.placeholder(tf.int32, [None])
        ta = tf.TensorArray(dt, size=0, dynamic_size=True)
        tb = tf.TensorArray(dt, size=0, dynamic_size=True)

        def body(i, ta, tb):
            v = tf.cast(i * 10 + 1, dt)
            return i + 1, ta.write(T - 1 - i, v), tb.write(P[i], tf.stack([v, v + 1]))
        _, ta, tb = tf.while_loop(lambda i, ta, tb: i < T, body, [0, ta, tb])
        fetch = [ta.stack(), tb.stack(), ta.size(), tb.size()]
    p = [4, 0, 2, 2, 7]
    for t in (0, 3, 5):
        with tf1.Session(graph=g) as s:
            a, b, na, nb = s.run(fetch, {T: t, P: p})
        want_a = np.array([10 * (t - 1 - r) + 1 for r in range(t)], dt.np)
        rows = max([0] + [k + 1 for k in p[:t]])
        want_b = np.zeros((rows, 2), dt.np)
        for i in range(t):
            want_b[p[i]] = [10 * i + 1, 10 * i + 2]
        assert a.dtype == dt.np and b.dtype == dt.np
        np.testing.assert_array_equal(a, want_a)
        np.testing.assert_array_equal(b, want_b)
        assert (na, nb) == (t, rows)


def test_gradient_tape_in_a_function_one_kernel(graph_mode):
    @tf.function
    def f(x, T, perm):
        with tf.GradientTape() as tape:
            tape.watch(x)
            ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
            for i in tf.range(T):
                ta = ta.write(perm[i], x * tf.cast(i + 1, tf.float32))
            loss = tf.reduce_sum(ta.stack() ** 3)
        return loss, tape.gradient(loss, x)

    perm = np.array([4, 2, 0, 1, 3, 5], np.int32)
    before, kernels = tf.cache_info()["fallbacks"], _kernels()
    for t in (3, 1, 6, 0):
        loss, grad = f(tf.constant(X), tf.constant(t), tf.constant(perm))
        idx = [int(k) for k in perm[:t]]
        np.testing.assert_allclose(loss.numpy(), np.sum(_replay(idx).astype(np.float64) ** 3), rtol=1e-5)
        np.testing.assert_allclose(grad.numpy(), _cube_grad(idx), rtol=1e-5)
    assert tf.cache_info()["fallbacks"] == before
    if graph_mode == "compiled":
        assert _kernels() - kernels == 1
