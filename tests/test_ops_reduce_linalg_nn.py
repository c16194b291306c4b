"""Reductions, matmul (2-D and batched, transposes) and the softmax family in
graph mode: values, static shapes, gradients (finite differences), a few
second derivatives."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import jitgrad as tf
from _graph_testing import check_hessian, check_op, session

pytestmark = pytest.mark.usefixtures("graph_mode")

R = np.random.default_rng(5)
X = R.uniform(-1, 1, (2, 3, 4))
# distinct values: max/min gradients are then unambiguous
XD = (R.permutation(24).reshape(2, 3, 4) - 12) / 7.0
XP = R.uniform(0.5, 1.5, (2, 3, 4))

AXES = [None, 0, 1, -1, [0, 2], (1, -1), [0, 1, 2], []]
REDUCTIONS = [
    ("reduce_sum", tf.reduce_sum, np.sum, X),
    ("reduce_mean", tf.reduce_mean, np.mean, X),
    ("reduce_max", tf.reduce_max, np.max, XD),
    ("reduce_min", tf.reduce_min, np.min, XD),
    ("reduce_prod", tf.reduce_prod, np.prod, XP),
]


def _np_axis(axis):
    return tuple(axis) if isinstance(axis, (list, tuple)) else axis


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", AXES, ids=[str(a) for a in AXES])
@pytest.mark.parametrize("name, fn, ref, x", REDUCTIONS, ids=[r[0] for r in REDUCTIONS])
def test_reduction_value_shape_and_gradient(name, fn, ref, x, axis, keepdims):
    expected = np.asarray(ref(x, axis=_np_axis(axis), keepdims=keepdims))
    check_op(lambda t: fn(t, axis=axis, keepdims=keepdims), x, expected=expected, value_rtol=1e-13)


def test_reductions_are_under_tf_math_too():
    for n in ("reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod"):
        assert getattr(tf.math, n) is getattr(tf, n)


def test_reduce_max_gradient_splits_between_ties():
    x = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]])
    g = tf.Graph()
    with g.as_default():
        p = tf.constant(x)
        (gmax,) = tf.gradients(tf.reduce_max(p, axis=1), p)
        (gmin,) = tf.gradients(tf.reduce_min(p), p)
    vmax, vmin = session(g).run([gmax, gmin])
    np.testing.assert_allclose(vmax, [[0, 0.5, 0.5], [1 / 3, 1 / 3, 1 / 3]])
    np.testing.assert_allclose(vmin, [[1, 0, 0], [0, 0, 0]])


def test_reduce_prod_gradient_with_zeros_is_exact():
    x = np.array([[0.0, 2.0, 3.0], [0.0, 0.0, 5.0], [1.0, 2.0, 4.0]])
    g = tf.Graph()
    with g.as_default():
        p = tf.constant(x)
        (gp,) = tf.gradients(tf.reduce_prod(p, axis=1), p)
    np.testing.assert_array_equal(session(g).run(gp), [[6, 0, 0], [0, 0, 0], [8, 4, 2]])


def test_integer_reductions_and_errors():
    g = tf.Graph()
    with g.as_default():
        i = tf.constant([[1, 2, 4], [3, 5, 7]])
        outs = [tf.reduce_sum(i), tf.reduce_mean(i, 1), tf.reduce_max(i, 0), tf.reduce_prod(i, keepdims=True)]
        assert [o.dtype for o in outs] == [tf.int32] * 4
        with pytest.raises(ValueError):
            tf.reduce_sum(i, axis=2)
        with pytest.raises(ValueError):
            tf.reduce_sum(i, axis=-3)
    v = session(g).run(outs)
    assert v[0] == 22 and isinstance(v[0], np.int32)
    np.testing.assert_array_equal(v[1], [2, 5])  # integer mean truncates, as TF
    np.testing.assert_array_equal(v[2], [3, 5, 7])
    np.testing.assert_array_equal(v[3], [[1 * 2 * 4 * 3 * 5 * 7]])


def _run(fn, *inputs):
    g = tf.Graph()
    with g.as_default():
        xs = [tf.compat.v1.placeholder(tf.as_dtype(a.dtype), a.shape) for a in inputs]
        ys = fn(*xs)
    return session(g).run(ys, dict(zip(xs, inputs)))


def _c_mean(x, axis=None):
    """Integer mean as C / TF: exact (Python int) sum, quotient rounded toward zero."""
    s = np.sum(np.asarray(x, np.int64).astype(object), axis=axis)
    n = np.size(x) // max(np.size(s), 1)
    trunc = np.vectorize(lambda v: abs(v) // n * (1 if v >= 0 else -1), otypes=[object])
    return trunc(s).astype(np.asarray(x).dtype)


def test_integer_mean_rounds_toward_zero_and_sums_wide():
    # TF 2.21: reduce_mean([[1, 2], [4, -7]], axis=0) = [2, -2] (C division, not floor's -3);
    # reduce_mean([-1, -2, -2]) = -1; int32 sums do not wrap (TF's Mean accumulates int32 in
    # int64): mean([2**31-1, 2**31-1]) = 2**31-1, mean([-2**31, -1]) = -1073741824,
    # mean([2**31-1, 2**31-1, 3]) = 1431655765.
    imax, imin = 2**31 - 1, -2**31
    cases = [(np.array([[1, 2], [4, -7]], np.int32), 0, [2, -2]),
             (np.array([-1, -2, -2], np.int32), None, -1),
             (np.array([-7], np.int64), None, -7),
             (np.array([imax, imax], np.int32), None, imax),
             (np.array([imin, -1], np.int32), None, -1073741824),
             (np.array([imax, imax, 3], np.int32), 0, 1431655765)]
    for x, axis, want in cases:
        (got,) = _run(lambda p: [tf.reduce_mean(p, axis)], x)
        np.testing.assert_array_equal(got, want)
        assert got.dtype == x.dtype
        np.testing.assert_array_equal(_c_mean(x, axis), want)
        np.testing.assert_array_equal(tf.reduce_mean(tf.constant(x), axis).numpy(), want)   # eager
    # shapes that take the compiled kernel's vectorised paths (reduced and kept inner
    # dimension, fused full reduction) with sums that overflow int32 and negative remainders
    rng = np.random.default_rng(3)
    for dt, lim in ((np.int32, 2**31 - 1), (np.int64, 2**40)):
        x = rng.integers(-lim, lim, (7, 37), endpoint=True).astype(dt)
        x[0] = -lim
        fns = [lambda p: tf.reduce_mean(p, 1), lambda p: tf.reduce_mean(p, 0, keepdims=True),
               lambda p: tf.reduce_mean(p), lambda p: tf.reduce_mean(p - 1)]
        got = _run(lambda p: [f(p) for f in fns], x)
        for v, ref in zip(got, [_c_mean(x, 1), _c_mean(x, 0)[None], _c_mean(x), _c_mean(x - 1)]):
            np.testing.assert_array_equal(v, ref)
            assert v.dtype == dt


def test_reduction_static_shapes_with_unknown_dims():
    with tf.Graph().as_default():
        p = tf.compat.v1.placeholder(tf.float32, [None, 3, None])
        assert tf.reduce_sum(p).shape.as_list() == []
        assert tf.reduce_mean(p, 1).shape.as_list() == [None, None]
        assert tf.reduce_max(p, [0, 2], keepdims=True).shape.as_list() == [1, 3, 1]
        assert tf.reduce_min(p, -1).shape.as_list() == [None, 3]


def test_reduce_mean_gradient_with_unknown_batch():
    g = tf.Graph()
    with g.as_default():
        p = tf.compat.v1.placeholder(tf.float64, [None, 2])
        (gp,) = tf.gradients(tf.reduce_mean(p, axis=0), p)
    np.testing.assert_allclose(session(g).run(gp, {p: np.ones((4, 2))}), np.full((4, 2), 0.25))


# ---------------------------------------------------------------- matmul
MATMUL = [
    ((3, 4), (4, 5), False, False), ((4, 3), (4, 5), True, False), ((3, 4), (5, 4), False, True),
    ((4, 3), (5, 4), True, True), ((2, 3, 4), (2, 4, 5), False, False), ((2, 4, 3), (4, 5), True, False),
    ((3, 4), (2, 2, 5, 4), False, True), ((2, 1, 3, 4), (3, 4, 2), False, False),
    ((1, 4), (4, 1), False, False),
]


def _ref_matmul(a, b, ta, tb):
    if ta:
        a = np.swapaxes(a, -1, -2)
    if tb:
        b = np.swapaxes(b, -1, -2)
    return np.matmul(a, b)


@pytest.mark.parametrize("sa, sb, ta, tb", MATMUL, ids=[f"{a}{'T' if ta else ''}@{b}{'T' if tb else ''}"
                                                        for a, b, ta, tb in MATMUL])
def test_matmul_value_shape_and_gradient(sa, sb, ta, tb):
    a = R.uniform(-1, 1, sa)
    b = R.uniform(-1, 1, sb)
    check_op(lambda x, y: tf.linalg.matmul(x, y, transpose_a=ta, transpose_b=tb), a, b,
             expected=_ref_matmul(a, b, ta, tb), value_rtol=1e-13)


def test_matmul_names_operator_and_op_types():
    g = tf.Graph()
    with g.as_default():
        a, b = tf.constant(np.ones((2, 3))), tf.constant(np.ones((3, 2)))
        assert tf.matmul is tf.linalg.matmul
        assert tf.matmul(a, b).op.type == "MatMul"
        assert (a @ b).op.type == "MatMul"
        assert tf.matmul(tf.reshape(a, [1, 2, 3]), b).op.type == "BatchMatMulV2"
        c = tf.matmul(a, b, adjoint_b=False, transpose_a=True, transpose_b=True)
        assert c.shape.as_list() == [3, 3]
    np.testing.assert_array_equal(session(g).run(a @ b), np.full((2, 2), 3.0))


def test_matmul_shape_inference_and_errors():
    with tf.Graph().as_default():
        p = tf.compat.v1.placeholder(tf.float32, [None, 4])
        q = tf.compat.v1.placeholder(tf.float32, [None, None, 4, 6])
        assert tf.matmul(p, tf.zeros([4, 7])).shape.as_list() == [None, 7]
        assert tf.matmul(p, p, transpose_b=True).shape.as_list() == [None, None]
        assert tf.matmul(p, q).shape.as_list() == [None, None, None, 6]
        with pytest.raises(ValueError):
            tf.matmul(p, tf.zeros([5, 7]))
        with pytest.raises(ValueError):
            tf.matmul(tf.zeros([4]), tf.zeros([4, 2]))
        with pytest.raises(TypeError):
            tf.matmul(p, tf.zeros([4, 2], tf.float64))
        with pytest.raises(ValueError):
            tf.matmul(tf.zeros([2, 3, 4]), tf.zeros([3, 4, 5]))


def test_matmul_int32_and_float32():
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    g = tf.Graph()
    with g.as_default():
        i = tf.matmul(tf.constant(a), tf.constant(a.T.copy()))
        f = tf.matmul(tf.constant(a.astype(np.float32)), tf.constant(a.T.astype(np.float32)))
    vi, vf = session(g).run([i, f])
    np.testing.assert_array_equal(vi, a @ a.T)
    assert vi.dtype == np.int32 and vf.dtype == np.float32


@settings(max_examples=10)  # each example is a distinct graph (a compile in compiled mode)
@given(m=st.integers(1, 4), k=st.integers(1, 4), n=st.integers(1, 4), batch=st.sampled_from([(), (2,), (1, 2)]),
       ta=st.booleans(), tb=st.booleans(), seed=st.integers(0, 2 ** 16))
def test_matmul_random_shapes(m, k, n, batch, ta, tb, seed):
    r = np.random.default_rng(seed)
    a = r.standard_normal(batch + ((k, m) if ta else (m, k)))
    b = r.standard_normal(((n, k) if tb else (k, n)))
    with tf.Graph().as_default() as g:
        y = tf.matmul(tf.constant(a), tf.constant(b), transpose_a=ta, transpose_b=tb)
        assert y.shape.as_list() == list(batch) + [m, n]
    np.testing.assert_allclose(session(g).run(y), _ref_matmul(a, b, ta, tb), rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- softmax family
def _np_softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


LOGITS = R.uniform(-3, 3, (3, 5))
LABELS = _np_softmax(R.uniform(-1, 1, (3, 5)))


@pytest.mark.parametrize("name, fn, ref", [
    ("softmax", tf.nn.softmax, _np_softmax),
    ("softmax_axis0", lambda x: tf.nn.softmax(x, axis=0), lambda x: _np_softmax(x, 0)),
    ("tf.softmax", tf.softmax, _np_softmax),
    ("log_softmax", tf.nn.log_softmax, lambda x: np.log(_np_softmax(x))),
    ("log_softmax_axis0", lambda x: tf.nn.log_softmax(x, axis=0), lambda x: np.log(_np_softmax(x, 0))),
])
def test_softmax_family_value_and_gradient(name, fn, ref):
    check_op(fn, LOGITS, expected=ref(LOGITS), value_rtol=1e-13)


def test_softmax_is_stable_for_large_logits():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant([[1000.0, 1000.0, -1000.0]])
        s, ls = tf.nn.softmax(x), tf.nn.log_softmax(x)
    vs, vls = session(g).run([s, ls])
    np.testing.assert_allclose(vs, [[0.5, 0.5, 0.0]])
    np.testing.assert_allclose(vls, [[-np.log(2), -np.log(2), -2000 - np.log(2)]], rtol=1e-6)


def test_softmax_cross_entropy_with_logits_value_and_gradients():
    ref = -np.sum(LABELS * np.log(_np_softmax(LOGITS)), axis=-1)
    check_op(lambda lab, lo: tf.nn.softmax_cross_entropy_with_logits(labels=lab, logits=lo), LABELS, LOGITS,
             expected=ref, value_rtol=1e-13)
    # d loss / d logits = softmax - labels (for labels summing to one)
    g = tf.Graph()
    with g.as_default():
        lo = tf.constant(LOGITS)
        loss = tf.nn.softmax_cross_entropy_with_logits(labels=tf.constant(LABELS), logits=lo)
        assert loss.shape.as_list() == [3]
        (gl,) = tf.gradients(loss, lo)
        with pytest.raises(ValueError):
            tf.nn.softmax_cross_entropy_with_logits(labels=tf.constant(LABELS[:, :4]), logits=lo)
    np.testing.assert_allclose(session(g).run(gl), _np_softmax(LOGITS) - LABELS, rtol=1e-12, atol=1e-14)


def test_softmax_cross_entropy_gradients_are_tfs_when_labels_do_not_sum_to_one():
    # TF's fused kernel: d/dlogits = g * (softmax(logits) - labels) (its backprop output), not
    # the exact derivative sum(labels) * softmax - labels; d/dlabels = g * -log_softmax(logits).
    # TF 2.21, logits [[1, 2, 3]], labels [[1, 1, 0]], d(loss)/dlogits = [-0.9099694, -0.7552716, 0.6652409].
    lo = np.array([[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]])
    la = np.array([[1.0, 1.0, 0.0], [0.2, 0.3, 0.1]])
    w = np.array([1.5, -2.0])
    gx, gl = _run(lambda x, z: tf.gradients(tf.reduce_sum(
        tf.nn.softmax_cross_entropy_with_logits(labels=z, logits=x) * w), [x, z]), lo, la)
    np.testing.assert_allclose(gx, w[:, None] * (_np_softmax(lo) - la), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(gx[0], np.array([-0.9099694, -0.7552716, 0.6652409]) * w[0], rtol=1e-6)
    np.testing.assert_allclose(gl, -w[:, None] * np.log(_np_softmax(lo)), rtol=1e-12)
    # axis=0, and a rank-3 input reduced over its middle axis
    w0 = np.array([1.5, -2.0, 0.7])
    gx, gl = _run(lambda x, z: tf.gradients(tf.reduce_sum(
        tf.nn.softmax_cross_entropy_with_logits(labels=z, logits=x, axis=0) * w0), [x, z]), lo, la)
    np.testing.assert_allclose(gx, w0 * (_np_softmax(lo, 0) - la), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(gl, -w0 * np.log(_np_softmax(lo, 0)), rtol=1e-12)
    l3, z3 = np.arange(12.0).reshape(2, 3, 2) / 5, np.arange(12.0).reshape(2, 3, 2) / 7
    (gx,) = _run(lambda x, z: tf.gradients(tf.reduce_sum(
        tf.nn.softmax_cross_entropy_with_logits(labels=z, logits=x, axis=1)), [x]), l3, z3)
    np.testing.assert_allclose(gx, _np_softmax(l3, 1) - z3, rtol=1e-12, atol=1e-15)
    # eager tape, float32
    x32, z32 = tf.constant(lo, tf.float32), tf.constant(la, tf.float32)
    with tf.GradientTape() as tape:
        tape.watch(x32)
        loss = tf.nn.softmax_cross_entropy_with_logits(labels=z32, logits=x32)
    np.testing.assert_allclose(tape.gradient(loss, x32).numpy(), _np_softmax(lo) - la, rtol=1e-6, atol=1e-7)


def test_softmax_cross_entropy_second_derivatives_are_tfs():
    # Differentiating TF's d/dlogits = g * (softmax - labels) again: w.r.t. logits it is the
    # softmax Jacobian diag(s) - s s^T (TF 2.21 hessians for logits [1, 2, 3], labels
    # [1, 1, 0]: [[0.0819251, -0.0220330, -0.0598920], ...], not twice that); the labels are
    # a constant in it (TF: zeros, jitgrad: no gradient); d/dlabels = -log_softmax is
    # differentiated as usual.
    x = np.array([1.0, 2.0, 3.0])
    z = np.array([1.0, 1.0, 0.0])
    s = _np_softmax(x)
    c = np.array([1.0, 2.0, 3.0])
    g = tf.Graph()
    with g.as_default():
        px, pz = tf.compat.v1.placeholder(tf.float64, [3]), tf.compat.v1.placeholder(tf.float64, [3])
        loss = tf.nn.softmax_cross_entropy_with_logits(labels=pz, logits=px)
        (h,) = tf.hessians(loss, px)
        gx, gz = tf.gradients(loss, [px, pz])
        d_gx = tf.gradients(tf.reduce_sum(gx * c), [px, pz])
        d_gz = tf.gradients(tf.reduce_sum(gz * c), [px, pz])
    assert d_gx[1] is None and d_gz[1] is None
    hv, dxx, dzx = session(g).run([h, d_gx[0], d_gz[0]], {px: x, pz: z})
    jac = np.diag(s) - np.outer(s, s)
    np.testing.assert_allclose(hv, jac, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(hv[0], [0.0819251, -0.0220330, -0.0598920], rtol=1e-5)
    np.testing.assert_allclose(dxx, jac @ c, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(dzx, -(c - s * c.sum()), rtol=1e-12, atol=1e-15)


def test_softmax_cross_entropy_float32_unknown_batch():
    g = tf.Graph()
    with g.as_default():
        lo = tf.compat.v1.placeholder(tf.float32, [None, 5])
        lab = tf.compat.v1.placeholder(tf.float32, [None, 5])
        loss = tf.nn.softmax_cross_entropy_with_logits(labels=lab, logits=lo)
        assert loss.shape.as_list() == [None] and loss.dtype == tf.float32
    v = session(g).run(loss, {lo: LOGITS.astype(np.float32), lab: LABELS.astype(np.float32)})
    np.testing.assert_allclose(v, -np.sum(LABELS * np.log(_np_softmax(LOGITS)), axis=-1), rtol=1e-5)


# ---------------------------------------------------------------- second derivatives
@pytest.mark.parametrize("name, fn", [
    ("reduce_sum_square", lambda x: tf.reduce_sum(x * x) ** 2),
    ("reduce_mean", lambda x: tf.reduce_mean(tf.exp(x)) * tf.reduce_max(x)),
    ("matmul", lambda x: tf.matmul(tf.reshape(x, [2, 2]), tf.reshape(x, [2, 2]), transpose_b=True)),
    ("softmax", lambda x: tf.nn.softmax(x) * tf.constant([1.0, 2.0, 3.0, 4.0], tf.float64)),
    ("log_softmax", lambda x: tf.nn.log_softmax(x) * tf.constant([1.0, -2.0, 3.0, 0.5], tf.float64)),
    ("xent", lambda x: tf.nn.softmax_cross_entropy_with_logits(
        labels=tf.constant([0.1, 0.2, 0.3, 0.4], tf.float64), logits=x)),
    ("xent_axis0", lambda x: tf.nn.softmax_cross_entropy_with_logits(
        labels=tf.constant([[0.5, 1.0], [0.2, 0.3]], tf.float64), logits=tf.reshape(x, [2, 2]), axis=0)),
    ("slices", lambda x: x[1:] * x[:-1] * tf.concat([x[:1], x[:2]], 0)),
    ("reduce_prod", lambda x: tf.reduce_prod(x)),
    ("reduce_prod_axis", lambda x: tf.reduce_prod(tf.reshape(x, [2, 2]), axis=1) * tf.constant([1.0, -2.0], tf.float64)),
])
def test_hessians(name, fn):
    check_hessian(fn, np.array([0.3, -0.7, 0.5, 1.1]))


def test_reduction_axis_given_as_constant_tensor():
    for build in (lambda: tf.Graph().as_default(),):
        with build():
            x = tf.constant([[1.0, 2.0], [3.0, 9.0]])
            s = tf.reduce_sum(x, tf.constant(1))
            m = tf.reduce_max(x, axis=tf.constant([0]), keepdims=True)
            with tf.compat.v1.Session() as sess:
                got_s, got_m = sess.run([s, m])
    np.testing.assert_array_equal(got_s, [3.0, 12.0])
    np.testing.assert_array_equal(got_m, [[3.0, 9.0]])
    eager = tf.reduce_sum(tf.constant([[1.0, 2.0], [3.0, 9.0]]), tf.constant(1))
    np.testing.assert_array_equal(eager.numpy(), [3.0, 12.0])
