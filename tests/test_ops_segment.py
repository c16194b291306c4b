"""Segment reductions (ops/segment_ops.py, codegen/lower_segment.py): TF's values (empty segments,
NaN order, dropped negative ids), TF's errors, TF's gradients (ties split evenly, prod with zeros),
compiled natively (no fallback) and interpreted; GradientTape in eager."""
import numpy as np
import pytest

import jitgrad as tf
from _graph_testing import numeric_grad, session

pytestmark = pytest.mark.usefixtures("graph_mode", "no_fallback")

LOWEST, HIGHEST = float(np.finfo(np.float32).min), float(np.finfo(np.float32).max)
M = tf.math


def _run(build, feeds=None):
    """build(placeholders...) in a fresh graph, run with ``feeds`` (a list of arrays)."""
    feeds = feeds or []
    g = tf.Graph()
    with g.as_default():
        ps = [tf.compat.v1.placeholder(tf.as_dtype(a.dtype), a.shape) for a in feeds]
        out = build(*ps)
    return session(g).run(out, dict(zip(ps, feeds)))


DATA = np.array([1.0, 5.0, 5.0, np.nan, 2.0, -3.0], np.float32)
IDS = np.array([0, 0, 0, 2, 2, 4], np.int32)


def test_unsorted_values_as_tf():
    # hand values (TF 2.21 gives the same): empty segments 0 / -FLT_MAX / FLT_MAX / 1; max and min keep
    # NaN only when no later element follows it ((acc > x) ? acc : x)
    got = _run(lambda d, i: [M.unsorted_segment_sum(d, i, 5), M.unsorted_segment_max(d, i, 5),
                             M.unsorted_segment_min(d, i, 5), M.unsorted_segment_prod(d, i, 5),
                             M.unsorted_segment_mean(d, i, 5), M.unsorted_segment_sqrt_n(d, i, 5)], [DATA, IDS])
    nan = np.nan
    want = [[11, 0, nan, 0, -3], [5, LOWEST, 2, LOWEST, -3], [1, HIGHEST, 2, HIGHEST, -3], [25, 1, nan, 1, -3],
            [11 / 3, 0, nan, 0, -3], [11 / np.sqrt(3), 0, nan, 0, -3]]
    for g, w in zip(got, want):
        assert g.dtype == np.float32
        np.testing.assert_allclose(g, np.array(w, np.float32), rtol=1e-6)


def test_sorted_values_as_tf():
    got = _run(lambda d, i: [M.segment_sum(d, i), M.segment_max(d, i), M.segment_min(d, i), M.segment_prod(d, i),
                             M.segment_mean(d, i)], [DATA, IDS])
    nan = np.nan
    want = [[11, 0, nan, 0, -3], [5, 0, 2, 0, -3], [1, 0, 2, 0, -3], [25, 1, nan, 1, -3], [11 / 3, 0, nan, 0, -3]]
    for g, w in zip(got, want):
        assert g.shape == (5,)
        np.testing.assert_allclose(g, np.array(w, np.float32), rtol=1e-6)


def test_nan_and_inf_order_as_tf():
    nan, inf = np.nan, np.inf
    cases = [([nan, 1.0], [1.0]), ([1.0, nan], [nan]), ([1.0, nan, 2.0], [2.0])]
    for vals, want in cases:
        v = np.array(vals, np.float32)
        z = np.zeros(len(vals), np.int32)
        got = _run(lambda d, i: [M.segment_max(d, i), M.unsorted_segment_max(d, i, 1)], [v, z])
        for g in got:
            np.testing.assert_array_equal(g, want)
    # a sorted segment starts from its first element, an unsorted one from -FLT_MAX (TF)
    v = np.array([-inf, -inf], np.float32)
    got = _run(lambda d, i: [M.segment_max(d, i), M.unsorted_segment_max(d, i, 1)], [v, np.zeros(2, np.int32)])
    np.testing.assert_array_equal(got[0], [-inf])
    np.testing.assert_array_equal(got[1], [LOWEST])


def test_negative_unsorted_ids_are_dropped_and_out_of_range_ids_raise():
    ids = np.array([0, 0, 0, 2, 2, -1], np.int32)
    got = _run(lambda d, i: M.unsorted_segment_sum(d, i, 5), [DATA, ids])
    np.testing.assert_array_equal(got, np.array([11, 0, np.nan, 0, 0], np.float32))
    for bad in ([0, 0, 0, 2, 2, 5], [7, 0, 0, 0, 0, 0]):
        with pytest.raises(tf.errors.InvalidArgumentError, match="out of range"):
            _run(lambda d, i: M.unsorted_segment_max(d, i, 5), [DATA, np.array(bad, np.int32)])


def test_sorted_ids_errors_as_tf():
    with pytest.raises(tf.errors.InvalidArgumentError, match="not increasing"):
        _run(lambda d, i: M.segment_sum(d, i), [DATA, np.array([0, 0, 1, 0, 2, 2], np.int32)])
    with pytest.raises(tf.errors.InvalidArgumentError, match=">= 0"):
        _run(lambda d, i: M.segment_max(d, i), [DATA, np.array([-1, 0, 1, 1, 2, 3], np.int32)])


def test_bad_shapes_and_dtypes_raise_tf_types():
    g = tf.Graph()
    with g.as_default():
        with pytest.raises(ValueError):
            M.unsorted_segment_sum(tf.ones([2, 3]), [0, 1, 1], 3)
        with pytest.raises(ValueError):
            M.segment_sum(tf.ones([2, 3]), [[0, 1]])
        with pytest.raises(TypeError):
            M.unsorted_segment_sum(tf.ones([2]), tf.constant([0.0, 1.0]), 2)
        with pytest.raises(TypeError):
            M.unsorted_segment_sum(tf.constant([True]), [0], 1)
        with pytest.raises(ValueError):      # TF 2.21's shape function checks a constant count
            M.unsorted_segment_sum(tf.ones([2]), [0, 1], -1)
    with pytest.raises(tf.errors.InvalidArgumentError):      # eagerly, the kernel
        M.unsorted_segment_sum(tf.ones([2]), [0, 1], -1)


def test_rank_2_ids_int64_and_integer_data():
    data = np.arange(12, dtype=np.float64).reshape(2, 3, 2)
    ids = np.array([[0, 1, 1], [3, 3, 0]], np.int64)
    want = np.zeros((4, 2))
    for a in range(2):
        for b in range(3):
            want[ids[a, b]] += data[a, b]
    np.testing.assert_array_equal(_run(lambda d, i: M.unsorted_segment_sum(d, i, 4), [data, ids]), want)
    ints = np.array([3, -7, 2, 9], np.int32)
    got = _run(lambda d, i: [M.unsorted_segment_max(d, i, 3), M.segment_min(d, i), M.segment_mean(d, i)],
               [ints, np.array([0, 0, 2, 2], np.int32)])
    np.testing.assert_array_equal(got[0], [3, np.iinfo(np.int32).min, 9])
    np.testing.assert_array_equal(got[1], [-7, 0, 2])
    np.testing.assert_array_equal(got[2], [-2, 0, 5])        # C++ division: -4 / 2, 11 / 2 truncated


def test_num_segments_as_a_fed_tensor():
    got = _run(lambda d, i, n: M.unsorted_segment_sum(d, i, n), [DATA, IDS, np.array(6, np.int32)])
    np.testing.assert_array_equal(got, np.array([11, 0, np.nan, 0, -3, 0], np.float32))


def test_empty_inputs():
    e = np.zeros((0, 2), np.float32)
    ei = np.zeros((0,), np.int32)
    got = _run(lambda d, i: [M.unsorted_segment_sum(d, i, 3), M.segment_sum(d, i), M.unsorted_segment_max(d, i, 2)],
               [e, ei])
    np.testing.assert_array_equal(got[0], np.zeros((3, 2)))
    assert got[1].shape == (0, 2)
    np.testing.assert_array_equal(got[2], np.full((2, 2), LOWEST, np.float32))


# ------------------------------------------------------------------ gradients
X = np.array([1.0, 5.0, 5.0, 0.0, 2.0, 0.0, 3.0, 0.0], np.float32)
SID = np.array([0, 0, 0, 1, 1, 3, 3, 3], np.int32)
UP = np.array([1.0, 2.0, 3.0, 4.0, 5.0], np.float32)
# hand-derived: max splits a segment's gradient among its ties; prod's one zero gets the product of the
# others, two zeros give 0 everywhere in the segment
GRADS = {
    "unsorted_segment_max": [0, 0.5, 0.5, 0, 2, 0, 4, 0],
    "unsorted_segment_min": [1, 0, 0, 2, 0, 2, 0, 2],          # segment 3 ties three ways: 6 / 3
    "unsorted_segment_prod": [25, 5, 5, 4, 0, 0, 0, 0],
    "unsorted_segment_sum": [1, 1, 1, 2, 2, 4, 4, 4],
    "unsorted_segment_mean": [1 / 3, 1 / 3, 1 / 3, 1, 1, 4 / 3, 4 / 3, 4 / 3],
    "unsorted_segment_sqrt_n": [1 / np.sqrt(3)] * 3 + [2 / np.sqrt(2)] * 2 + [4 / np.sqrt(3)] * 3,
    "segment_max": [0, 0.5, 0.5, 0, 2, 0, 4, 0],
    "segment_min": [1, 0, 0, 2, 0, 2, 0, 2],
    "segment_prod": [25, 5, 5, 4, 0, 0, 0, 0],
    "segment_sum": [1, 1, 1, 2, 2, 4, 4, 4],
    "segment_mean": [1 / 3, 1 / 3, 1 / 3, 1, 1, 4 / 3, 4 / 3, 4 / 3],
}


def _call(name, d, i):
    return getattr(M, name)(d, i, 5) if name.startswith("unsorted") else getattr(M, name)(d, i)


@pytest.mark.parametrize("name", sorted(GRADS))
def test_gradients_at_ties_and_zeros(name):
    def build(d, i):
        y = _call(name, d, i)
        up = UP if name.startswith("unsorted") else UP[:4]
        return tf.gradients(y, d, grad_ys=tf.constant(up))[0]
    np.testing.assert_allclose(_run(build, [X, SID]), np.array(GRADS[name], np.float32), rtol=1e-6)


@pytest.mark.parametrize("name", sorted(GRADS))
def test_gradients_match_finite_differences(name):
    rng = np.random.default_rng(3)
    data = rng.uniform(0.5, 2.0, (6, 3))          # distinct values: no ties, no zeros
    ids = np.array([0, 0, 1, 1, 1, 4], np.int32)  # (sorted: 5 segments, 2 and 3 empty)
    w = rng.uniform(0.5, 1.5, (5, 3))
    g = tf.Graph()
    with g.as_default():
        d = tf.compat.v1.placeholder(tf.float64, data.shape)
        y = _call(name, d, tf.constant(ids))
        # (an empty unsorted max / min segment is -+FLT_MAX: constant, but too large for differences)
        y = tf.where(tf.abs(y) < 1e300, y, tf.zeros_like(y))
        loss = tf.reduce_sum(y * tf.constant(w))
        (grad,) = tf.gradients(loss, d)
    s = session(g)
    num = numeric_grad(lambda v: s.run(loss, {d: v}), data)
    np.testing.assert_allclose(s.run(grad, {d: data}), num, rtol=1e-6, atol=1e-8)


def test_unsorted_gradient_drops_negative_ids():
    def build(d, i):
        return tf.gradients(M.unsorted_segment_max(d, i, 2) * tf.constant([1.0, 2.0]), d)[0]
    got = _run(build, [np.array([1.0, 4.0, 3.0], np.float32), np.array([0, -1, 1], np.int32)])
    np.testing.assert_array_equal(got, [1.0, 0.0, 2.0])


def test_eager_values_and_tape_gradients():
    x = tf.constant(X)
    for name, want in GRADS.items():
        with tf.GradientTape() as t:
            t.watch(x)
            y = _call(name, x, tf.constant(SID))
        up = UP if name.startswith("unsorted") else UP[:4]
        np.testing.assert_allclose(t.gradient(y, x, output_gradients=tf.constant(up)).numpy(), want, rtol=1e-6)
    with pytest.raises(tf.errors.InvalidArgumentError):
        M.segment_sum(tf.constant([1.0, 2.0]), tf.constant([1, 0]))


def test_ids_are_checked_even_with_no_data_to_combine():
    # rows of zero elements (and num_segments 0): both engines still reject an id out of range
    for nseg, rows in ((3, np.ones((3, 0), np.float32)), (0, np.ones((3, 2), np.float32))):
        with pytest.raises(tf.errors.InvalidArgumentError, match="out of range"):
            _run(lambda d, i: M.unsorted_segment_sum(d, i, nseg), [rows, np.array([0, 1, 9], np.int32)])


def test_sorted_ids_fed_anew_run_the_kernel_of_their_segment_count(graph_mode):
    # the compiled run is specialised on max(ids) + 1, not on the ids' values: new ids with as
    # many segments run the same kernel, which checks their order itself
    g = tf.Graph()
    with g.as_default():
        d, i = tf.compat.v1.placeholder(tf.float32, [6]), tf.compat.v1.placeholder(tf.int32, [6])
        y = M.segment_sum(d, i)
    s = session(g)
    data = np.arange(6, dtype=np.float32)
    np.testing.assert_array_equal(s.run(y, {d: data, i: [0, 0, 1, 1, 2, 2]}), [1, 5, 9])
    before = tf.cache_info()
    for ids, want in (([0, 1, 1, 1, 1, 2], [0, 10, 5]), ([0, 0, 0, 0, 2, 2], [6, 0, 9])):
        np.testing.assert_array_equal(s.run(y, {d: data, i: ids}), want)
    after = tf.cache_info()
    assert (after["compiles"], after["plan_misses"]) == (before["compiles"], before["plan_misses"])
    with pytest.raises(tf.errors.InvalidArgumentError, match="not increasing"):
        s.run(y, {d: data, i: [0, 0, 2, 1, 2, 2]})       # (the same count: the kernel checks the order)


def test_integer_unsorted_segment_mean_and_all_none_global_norm_as_tf():
    got = tf.math.unsorted_segment_mean(tf.constant([1, 2, 4]), [0, 0, 1], 2)
    assert got.dtype == tf.float64 and got.numpy().tolist() == [1.5, 4.0]      # TF: int sum / int count
    clipped, norm = tf.clip_by_global_norm([None], 1.0)
    assert clipped == [None] and float(norm) == 0.0
