"""tf.math.top_k / tf.nn.top_k, tf.sort, tf.argsort (ops/sort_ops.py, codegen/lower_top_k.py): order,
ties (index order), -0 / +0, integer extremes, TF's errors and gradients (scatter to the indices),
compiled natively (no fallback) and interpreted; GradientTape in eager."""
import numpy as np
import pytest

import jitgrad as tf
from _graph_testing import check_hessian, numeric_grad, session
from jitgrad.codegen import lower_top_k

pytestmark = pytest.mark.usefixtures("graph_mode")


@pytest.fixture(autouse=True)
def _native(request, graph_mode):
    """Compiled runs must not fall back (no_fallback), except a test parametrized native=False."""
    if getattr(request.node, "callspec", None) and request.node.callspec.params.get("native") is False:
        yield
        return
    request.getfixturevalue("no_fallback")
    yield


def _run(build, feeds):
    g = tf.Graph()
    with g.as_default():
        ps = [tf.compat.v1.placeholder(tf.as_dtype(a.dtype), a.shape) for a in feeds]
        out = build(*ps)
    return session(g).run(out, dict(zip(ps, feeds)))


def _by_hand_desc(row):
    """Indices of ``row`` largest first, ties by index: a plain insertion, one element at a time."""
    out = []
    for i, v in enumerate(row):
        p = len(out)
        while p > 0 and v > row[out[p - 1]]:
            p -= 1
        out.insert(p, i)
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
def test_top_k_values_indices_and_ties(dtype):
    rng = np.random.default_rng(5)
    x = rng.integers(0, 6, (3, 9)).astype(dtype)            # many ties
    for k in (0, 1, 4, 9):
        vals, inds = _run(lambda p: tuple(tf.math.top_k(p, k)), [x])
        want = np.array([_by_hand_desc(list(r))[:k] for r in x], np.int64).reshape(3, k)
        np.testing.assert_array_equal(inds, want)
        assert inds.dtype == np.int32 and vals.dtype == dtype
        np.testing.assert_array_equal(vals, np.take_along_axis(x, want, -1))


def test_sort_and_argsort_as_tf():
    x = np.array([3.0, 1.0, -np.inf, 3.0, np.inf, 0.0, -0.0, 2.0], np.float32)
    got = _run(lambda p: [tf.sort(p), tf.argsort(p), tf.sort(p, direction="DESCENDING"),
                          tf.argsort(p, direction="DESCENDING", stable=True)], [x])
    # hand-derived: ascending keeps equal elements (3, 3 and 0, -0) in index order, as TF
    np.testing.assert_array_equal(got[1], [2, 5, 6, 1, 7, 0, 3, 4])
    np.testing.assert_array_equal(got[0], x[[2, 5, 6, 1, 7, 0, 3, 4]])
    assert not np.signbit(got[0][1]) and np.signbit(got[0][2])          # 0 then -0, as in x
    np.testing.assert_array_equal(got[3], [4, 0, 3, 7, 1, 5, 6, 2])
    np.testing.assert_array_equal(got[2], x[[4, 0, 3, 7, 1, 5, 6, 2]])


def test_integer_extremes_sort_without_overflow():
    lo, hi = np.iinfo(np.int32).min, np.iinfo(np.int32).max
    x = np.array([3, lo, 5, hi, lo], np.int32)
    got = _run(lambda p: [tf.sort(p), tf.argsort(p), tf.sort(p, direction="DESCENDING")], [x])
    np.testing.assert_array_equal(got[0], [lo, lo, 3, 5, hi])
    np.testing.assert_array_equal(got[1], [1, 4, 0, 2, 3])
    np.testing.assert_array_equal(got[2], [hi, 5, 3, lo, lo])


@pytest.mark.parametrize("native", [False])    # uint8 programs run in the interpreter in every mode
def test_unsigned_sort_flips_through_the_maximum(native):
    u = np.array([0, 255, 7, 0], np.uint8)
    got = _run(lambda p: [tf.sort(p), tf.argsort(p), tf.math.top_k(p, 2).indices], [u])
    np.testing.assert_array_equal(got[0], [0, 0, 7, 255])
    np.testing.assert_array_equal(got[1], [0, 3, 2, 1])
    np.testing.assert_array_equal(got[2], [1, 2])


def test_nan_sorts_above_inf():
    # jitgrad's rule (TF's order of NaNs depends on its algorithm: README "Known differences")
    x = np.array([1.0, np.nan, np.inf, -1.0], np.float32)
    vals, inds = _run(lambda p: tuple(tf.math.top_k(p, 4)), [x])
    np.testing.assert_array_equal(inds, [1, 2, 0, 3])


def test_other_axis_of_a_matrix():
    x = np.array([[3.0, 1.0, 7.0], [2.0, 4.0, 7.0], [5.0, 0.0, 1.0]], np.float32)
    got = _run(lambda p: [tf.sort(p, axis=0), tf.argsort(p, axis=0, direction="DESCENDING")], [x])
    np.testing.assert_array_equal(got[0], np.sort(x, axis=0))
    np.testing.assert_array_equal(got[1], [[2, 1, 0], [0, 0, 1], [1, 2, 2]])


def test_errors_as_tf():
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2, 5])
        with pytest.raises(ValueError):
            tf.math.top_k(x, 6)
        with pytest.raises(ValueError):
            tf.math.top_k(x, -1)
        with pytest.raises(ValueError):
            tf.math.top_k(tf.constant(1.0), 1)
        with pytest.raises(TypeError):
            tf.math.top_k(tf.constant([True, False]), 1)
        with pytest.raises(ValueError):
            tf.sort(x, direction="UP")
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.math.top_k(tf.constant([1.0, 2.0]), 3)


def test_empty_rows():
    x = np.zeros((2, 0), np.float32)
    vals, inds = _run(lambda p: tuple(tf.math.top_k(p, 0)), [x])
    assert vals.shape == (2, 0) and inds.shape == (2, 0)
    assert _run(lambda p: tf.sort(p), [np.zeros((0,), np.float32)]).shape == (0,)


# ------------------------------------------------------------------ gradients
V = np.array([[3.0, 1.0, 3.0, 2.0], [0.0, 5.0, -1.0, 5.0]], np.float32)


def test_gradients_scatter_to_the_indices():
    up = np.array([[1.0, 10.0], [100.0, 1000.0]], np.float32)
    up4 = np.array([[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]], np.float32)

    def build(v):
        return (tf.gradients(tf.math.top_k(v, 2).values, v, grad_ys=tf.constant(up))
                + tf.gradients(tf.sort(v), v, grad_ys=tf.constant(up4))
                + tf.gradients(tf.sort(v, axis=0, direction="DESCENDING"), v, grad_ys=tf.constant(up4)))
    g_top, g_sort, g_sort0 = _run(build, [V])
    # hand-derived: top 2 of [3, 1, 3, 2] are indices 0, 2 (tie in index order); of [0, 5, -1, 5]: 1, 3
    np.testing.assert_array_equal(g_top, [[1, 0, 10, 0], [0, 100, 0, 1000]])
    # ascending [1, 2, 3, 3] from indices 1, 3, 0, 2 and [-1, 0, 5, 5] from 2, 0, 1, 3
    np.testing.assert_array_equal(g_sort, [[3, 1, 4, 2], [6, 7, 5, 8]])
    np.testing.assert_array_equal(g_sort0, [[1, 6, 3, 8], [5, 2, 7, 4]])


def test_gradient_matches_finite_differences_and_second_order():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(3, 6))
    w = rng.uniform(0.5, 1.5, (3, 3))
    g = tf.Graph()
    with g.as_default():
        p = tf.compat.v1.placeholder(tf.float64, x.shape)
        loss = tf.reduce_sum(tf.math.top_k(p * p, 3).values * tf.constant(w))
        (grad,) = tf.gradients(loss, p)
    s = session(g)
    num = numeric_grad(lambda v: s.run(loss, {p: v}), x)
    np.testing.assert_allclose(s.run(grad, {p: x}), num, rtol=1e-6, atol=1e-8)
    check_hessian(lambda v: tf.sort(v * v * v, direction="DESCENDING")[:2], np.array([0.5, -1.5, 2.0, 1.0]))


def test_eager_and_tape():
    x = tf.constant(V)
    with tf.GradientTape() as t:
        t.watch(x)
        r = tf.nn.top_k(x, k=2)
        y = r.values
    np.testing.assert_array_equal(r.indices.numpy(), [[0, 2], [1, 3]])
    np.testing.assert_array_equal(t.gradient(y, x).numpy(), [[1, 0, 1, 0], [0, 1, 0, 1]])
    np.testing.assert_array_equal(tf.argsort(tf.constant([2.0, 1.0, 2.0, 1.0])).numpy(), [1, 3, 0, 2])


def test_k_and_row_length_known_only_at_run_time():
    # DynamicTopK: the interpreter runs it, a compiled run specialises TopKV2 on k's value
    x = np.array([[3.0, 1.0, 2.0], [0.0, 5.0, 4.0]], np.float32)
    g = tf.Graph()
    with g.as_default():
        p, k = tf.compat.v1.placeholder(tf.float32, [None, None]), tf.compat.v1.placeholder(tf.int32, [])
        r = tf.math.top_k(p, k)
        assert r.values.shape.as_list() == [None, None]
        s = tf.sort(p)
        (g_top,) = tf.gradients(tf.reduce_sum(r.values * r.values), p)
    sess = session(g)
    vals, inds, srt, gt = sess.run([r.values, r.indices, s, g_top], {p: x, k: 2})
    np.testing.assert_array_equal(vals, [[3, 2], [5, 4]])
    np.testing.assert_array_equal(inds, [[0, 2], [1, 2]])
    np.testing.assert_array_equal(srt, [[1, 2, 3], [0, 4, 5]])
    np.testing.assert_array_equal(gt, [[6, 0, 4], [0, 10, 8]])          # 2 x at the two kept
    assert sess.run(r.values, {p: x, k: 0}).shape == (2, 0)
    for bad in (4, -1):
        with pytest.raises(tf.errors.InvalidArgumentError):
            sess.run(r.values, {p: x, k: bad})


# ------------------------------------------------------------------ each lowering, differentially
def _rank_desc(x):
    """Reference order: NaN first, then larger first (-0 equal to +0), ties by index; numpy's
    lexsort on independent keys (not the interpreter's order_key_desc)."""
    idx = np.broadcast_to(np.arange(x.shape[-1]), x.shape)
    if x.dtype.kind == "f":
        nan = np.isnan(x)
        return np.lexsort((idx, -np.where(nan, 0, x), ~nan), axis=-1)
    return np.lexsort((idx, ~x), axis=-1)          # ~x reverses an integer order without overflow


def _row_data(rng, shape, dtype):
    """Many ties, and for floats NaN, +-0 and +-inf; for integers the extremes."""
    if np.dtype(dtype).kind == "f":
        pool = np.array([np.nan, 0.0, -0.0, np.inf, -np.inf, 1.5, -1.5, 2.0], dtype)
        x = np.where(rng.random(shape) < 0.4, rng.choice(pool, shape), rng.normal(size=shape)).astype(dtype)
    else:
        info = np.iinfo(dtype)
        pool = np.array([info.min, info.max, 0, -1, 1, 7], dtype)
        x = np.where(rng.random(shape) < 0.4, rng.choice(pool, shape),
                     rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True))
    if shape[-1] > 1:
        x.reshape(-1, shape[-1])[0] = x.reshape(-1)[0]      # a row of one value: every digit shared
    return x


CASES = [((3, 7), 7, "rank"), ((2, 2, 64), 5, "rank"), ((4, 128), 128, "rank"), ((1,), 1, "rank"),
         ((3, 129), 129, "radix"), ((2, 300), 40, "radix"), ((2, 1000), 1000, "radix"),
         ((3, 300), 10, "heap"), ((2, 1000), 16, "heap"), ((2, 1000), 17, "radix")]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
@pytest.mark.parametrize("shape,k,method", CASES)
def test_each_lowering_against_numpy(dtype, shape, k, method):
    assert lower_top_k.top_k_method(shape[-1], k) == method
    rng = np.random.default_rng([*shape, k, np.dtype(dtype).num])
    x = _row_data(rng, shape, dtype)
    vals, inds = _run(lambda p: tuple(tf.math.top_k(p, k)), [x])
    want = _rank_desc(x)[..., :k]
    np.testing.assert_array_equal(inds, want)
    got_vals = np.take_along_axis(x, want, -1)
    np.testing.assert_array_equal(vals, got_vals)                   # (NaN equals NaN here)
    np.testing.assert_array_equal(np.signbit(vals), np.signbit(got_vals))     # -0 stays -0


def test_ascending_sort_of_a_long_row_keeps_index_order():
    rng = np.random.default_rng(9)
    x = rng.integers(-3, 3, (2, 500)).astype(np.float32)
    x[0, 7], x[1, 100] = np.nan, -0.0
    srt, arg = _run(lambda p: [tf.sort(p), tf.argsort(p, stable=True)], [x])
    # numpy's stable ascending argsort puts the one NaN last; jitgrad puts NaNs first
    want0 = np.argsort(x[0], kind="stable")
    np.testing.assert_array_equal(arg[0], np.concatenate([want0[-1:], want0[:-1]]))
    np.testing.assert_array_equal(arg[1], np.argsort(x[1], kind="stable"))
    np.testing.assert_array_equal(srt, np.take_along_axis(x, arg, -1))


def test_radix_skips_shared_digits_and_keeps_order():
    # int32 0..5 (only the low digit differs: three passes skipped) and int64 values that
    # differ only in digit 5 (the passes before and after it skipped)
    rng = np.random.default_rng(4)
    x = rng.integers(0, 6, (3, 400)).astype(np.int32)
    y = (rng.integers(0, 4, (2, 300)) << 40).astype(np.int64)
    got = _run(lambda p, q: [tf.math.top_k(p, 400).indices, tf.math.top_k(q, 300).indices], [x, y])
    np.testing.assert_array_equal(got[0], np.argsort(-x, axis=-1, kind="stable"))
    np.testing.assert_array_equal(got[1], np.argsort(-y, axis=-1, kind="stable"))
