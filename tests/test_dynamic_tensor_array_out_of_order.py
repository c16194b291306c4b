"""A dynamic TensorArray a tf.while_loop body writes out of order (reversed, at an offset
fed at run time, at a stride, twice at one index): compiled with the array preallocated
to its final length (jitgrad/tensor_array_preallocated.py), no fallback, and the same
results as the interpreter. Expected values are numpy's (the writes replayed in order:
a later write wins, unwritten rows are zeros) and agree with TF 2.21's for the same
programs (TF crashes on the negative index that jitgrad rejects with its TensorList error)."""
import numpy as np
import pytest

import jitgrad as tf

tf1 = tf.compat.v1
IAE = tf.errors.InvalidArgumentError
X = np.array([1.0, 2.0], np.float32)


def _replay(indices, rows0=0):
    """The stacked array after writing x * (i + 1) at indices[i], in order (numpy)."""
    n = max([rows0] + [k + 1 for k in indices])
    out = np.zeros((n, 2), np.float32)
    for i, k in enumerate(indices):
        out[k] = X * (i + 1)
    return out


def _loop(index, size0=0, maximum_iterations=None, fetch=lambda ta, x, T: ta.stack()):
    """A graph: for i < T, ta.write(index(i, T, off), x * (i + 1)); returns (T, off, x, fetch)."""
    T = tf1.placeholder(tf.int32, [])
    off = tf1.placeholder(tf.int32, [])
    x = tf1.placeholder(tf.float32, [2])
    ta = tf.TensorArray(tf.float32, size=size0, dynamic_size=True)
    if size0:
        ta = ta.unstack(tf.zeros([size0, 2]) - 1.0)

    def body(i, ta):
        return i + 1, ta.write(index(i, T, off), x * tf.cast(i + 1, tf.float32))
    _, ta = tf.while_loop(lambda i, ta: i < T, body, [0, ta], maximum_iterations=maximum_iterations)
    return T, off, x, fetch(ta, x, T)


def _runs(index, feeds, **kw):
    with tf.Graph().as_default():
        T, off, x, out = _loop(index, **kw)
        with tf1.Session() as s:
            got = []
            for t, o in feeds:
                try:
                    got.append(s.run(out, {T: t, off: o, x: X}))
                except IAE as e:
                    got.append(e)
            return got


pytestmark = pytest.mark.usefixtures("graph_mode")
compiled = pytest.mark.usefixtures("no_fallback")


@compiled
def test_reversed_writes():
    feeds = [(3, 0), (5, 0), (3, 0), (1, 0)]
    for (t, _), got in zip(feeds, _runs(lambda i, T, off: T - 1 - i, feeds)):
        np.testing.assert_array_equal(got, _replay([t - 1 - i for i in range(t)]))


@compiled
def test_no_iterations_leave_the_entry_rows():
    (got,) = _runs(lambda i, T, off: T - 1 - i, [(0, 0)])
    assert got.shape == (0, 2)
    (got,) = _runs(lambda i, T, off: T - 1 - i, [(0, 0)], size0=2)
    np.testing.assert_array_equal(got, -np.ones((2, 2)))


@compiled
def test_offset_fed_at_run_time_and_entry_rows_overwritten():
    feeds = [(3, 2), (2, 0), (4, 1)]
    for (t, o), got in zip(feeds, _runs(lambda i, T, off: i + off, feeds, size0=3)):
        want = _replay([i + o for i in range(t)], rows0=3)
        want[[k for k in range(3) if k not in range(o, o + t)]] = -1.0   # entry rows not written
        np.testing.assert_array_equal(got, want)


@compiled
def test_strided_writes_leave_zeros_between():
    (got, read) = _runs(lambda i, T, off: 2 * i + off, [(3, 1)], fetch=lambda ta, x, T: [ta.stack(), ta.read(2)])[0]
    np.testing.assert_array_equal(got, _replay([1, 3, 5]))
    np.testing.assert_array_equal(read, [0.0, 0.0])


@compiled
def test_writes_to_one_index_keep_the_last():
    (got,) = _runs(lambda i, T, off: 0 * i + off, [(4, 1)])
    np.testing.assert_array_equal(got, _replay([1, 1, 1, 1]))


@compiled
def test_maximum_iterations_bounds_the_length():
    (got,) = _runs(lambda i, T, off: T - 1 - i, [(5, 0)], maximum_iterations=2)
    np.testing.assert_array_equal(got, _replay([4, 3]))


@compiled
def test_negative_index_is_tfs_modify_error():
    (got,) = _runs(lambda i, T, off: T - 2 - i, [(3, 0)])
    assert isinstance(got, IAE) and "Trying to modify element -1 in a list with 2 elements." in got.message


@compiled
def test_gradient_of_reversed_writes():
    def fetch(ta, x, T):
        st = ta.stack()
        w = tf.cast(tf.range(T) + 1, tf.float32)[:, None]     # row r weighted by r + 1 (T rows)
        loss = tf.reduce_sum(st * st * w)
        return [loss, tf.gradients(loss, x)[0]]
    for t in (3, 4):
        (loss, g), = _runs(lambda i, T, off: T - 1 - i, [(t, 0)], fetch=fetch)
        # row T-1-i = x (i + 1), weight T - i: loss = sum_i (T - i) (i + 1)^2 |x|^2
        c = sum((t - i) * (i + 1) ** 2 for i in range(t))
        np.testing.assert_allclose(loss, c * np.sum(X * X), rtol=1e-6)
        np.testing.assert_allclose(g, 2 * c * X, rtol=1e-6)


def test_body_that_reads_the_array_still_runs_correctly(graph_mode):
    # (not preallocated: a read's length would differ; the interpreter runs it, as before)
    with tf.Graph().as_default():
        T = tf1.placeholder(tf.int32, [])
        ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True, element_shape=[2])

        def body(i, ta):
            return i + 1, ta.write(T - 1 - i, tf.fill([2], tf.cast(ta.size(), tf.float32)))
        _, ta = tf.while_loop(lambda i, ta: i < T, body, [0, ta])
        got = tf1.Session().run(ta.stack(), {T: 3})
    np.testing.assert_array_equal(got, [[3, 3], [3, 3], [0, 0]])


@compiled
@pytest.mark.parametrize("slope", [-2, -1, 0, 1, 3])
def test_random_affine_writes_match_numpys_replay(slope):
    rng = np.random.default_rng(100 + slope)
    feeds, entry = [], []
    for _ in range(4):
        t = int(rng.integers(0, 6))
        lowest = min(slope * i for i in range(t)) if t else 0
        feeds.append((t, -lowest + int(rng.integers(0, 3))))     # every index >= 0
    for size0 in (0, 2):
        got = _runs(lambda i, T, off: slope * i + off, feeds, size0=size0)
        for (t, o), g in zip(feeds, got):
            idx = [slope * i + o for i in range(t)]
            want = _replay(idx, rows0=size0)
            want[[k for k in range(size0) if k not in idx]] = -1.0     # entry rows not written
            np.testing.assert_array_equal(g, want)


@pytest.mark.parametrize("reverse", [False, True])
def test_staged_for_loop_writes_compile(reverse):
    # (AutoGraph hands a dynamic array to tf.while_loop as a TensorArray: in order, appends;
    # reversed, preallocated)
    @tf.function
    def f(x, T):
        ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
        for i in tf.range(T):
            ta = ta.write(T - 1 - i if reverse else i, x * tf.cast(i + 1, tf.float32))
        return ta.stack()

    before = tf.cache_info()["fallbacks"]
    for t in (3, 1, 4):
        got = f(tf.constant(X), tf.constant(t)).numpy()
        np.testing.assert_array_equal(got, _replay([t - 1 - i if reverse else i for i in range(t)]))
    assert tf.cache_info()["fallbacks"] == before


@compiled
def test_long_reversed_writes_store_rows_in_place_bit_identically(graph_mode, monkeypatch):
    # each write is one row stored in the loop's one buffer (ops/row_store.py), forward and
    # gradient loops alike; repeated runs give the same bytes
    import jitgrad.codegen.lower_control as lower_control
    from jitgrad import cache, compiler
    seen, real = [], lower_control.in_place_vars
    monkeypatch.setattr(lower_control, "in_place_vars", lambda body, n: seen.append(real(body, n)) or seen[-1])
    cache.set_enabled(False)
    compiler.clear_cache()
    try:
        def fetch(ta, x, T):
            st = ta.stack()
            loss = tf.reduce_sum(st * st)
            return [st, tf.gradients(loss, x)[0]]
        runs = _runs(lambda i, T, off: T - 1 - i, [(300, 0)] * 3, fetch=fetch)
    finally:
        cache.set_enabled(None)
    np.testing.assert_array_equal(runs[0][0], _replay([299 - i for i in range(300)]))
    c = sum((i + 1) ** 2 for i in range(300))     # loss = sum_i (i + 1)^2 |x|^2
    np.testing.assert_allclose(runs[0][1], 2 * c * X, rtol=1e-5)
    for st, g in runs[1:]:
        assert st.tobytes() == runs[0][0].tobytes() and g.tobytes() == runs[0][1].tobytes()
    if graph_mode == "compiled":
        assert sum(len(s) for s in seen) >= 2
