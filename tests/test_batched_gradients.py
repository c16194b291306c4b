"""Batched graph-mode reverse passes (jitgrad/batched_gradients.py): jacobians,
tf.hessians and GradientTape.jacobian / batch_jacobian inside jitgrad.function
from ONE backward pass with a stacked cotangent, checked against the per-row
implementations (one tf.gradients per row) and central finite differences.

Elementwise ops, reductions and layout ops compute every element exactly as the
per-row graph does, so those must be bit-identical; a matmul whose batched
operand is folded into one larger GEMM may round differently (rtol 1e-12 in
float64, checked separately).
"""
import numpy as np
import pytest

import jitgrad as tf
from jitgrad import batched_gradients as bg
from jitgrad.hessians import _hessians_per_row

from _graph_testing import session

pytestmark = pytest.mark.usefixtures("graph_mode")

RNG = np.random.default_rng(11)


def _per_row_jacobian(y, xs):
    n = y.shape.num_elements()
    flat = tf.reshape(y, [-1])
    out = []
    for x in xs:
        rows = []
        for i in range(n):
            g = tf.gradients(flat[i], x)[0]
            rows.append(tf.zeros_like(x) if g is None else g)
        out.append(tf.stack(rows))
    return out


def _fd_jacobian(sess, y, x, feed, xv, eps=1e-6):
    """Central differences of y w.r.t. x: [n] + x.shape (rows = elements of y)."""
    n = int(np.prod(y.shape.as_list()))
    J = np.zeros((n, xv.size))
    flat = xv.reshape(-1)
    for j in range(xv.size):
        xp, xm = flat.copy(), flat.copy()
        xp[j] += eps
        xm[j] -= eps
        yp = sess.run(y, {**feed, x: xp.reshape(xv.shape)})
        ym = sess.run(y, {**feed, x: xm.reshape(xv.shape)})
        J[:, j] = (np.asarray(yp) - np.asarray(ym)).reshape(-1) / (2 * eps)
    return J.reshape((n,) + xv.shape)


def _interpreter(graph):
    return tf.compat.v1.Session(graph=graph, config=tf.compat.v1.ConfigProto(jitgrad_mode="interpret"))


def check_jacobian(fn, *inputs, exact=True, fd=True, fd_tol=1e-6):
    """Builds y = fn(*xs) once; batched jacobian vs per-row (bit-identical when
    ``exact``; otherwise rtol 1e-12 against the per-row graph run by the
    interpreter, which keeps compile time down) vs finite differences.
    Returns the batched jacobians."""
    inputs = [np.asarray(a, np.float64) for a in inputs]
    g = tf.Graph()
    with g.as_default():
        xs = [tf.compat.v1.placeholder(tf.float64, a.shape) for a in inputs]
        y = fn(*xs)
        stats = {}
        # One-hot (structured) identity cotangents, and dense ones (every dense batching rule).
        jb = bg.batched_jacobian(y, xs, _stats=stats)
        jd = bg.batched_jacobian(y, xs, structured=False, _stats=stats)
        assert not stats.get("per_row"), f"per-row fallback used for {stats['per_row']}"
        n = y.shape.num_elements()
        for j, a in zip(jb + jd, inputs + inputs):
            assert j.shape.as_list() == [n] + list(a.shape)
        jr = _per_row_jacobian(y, xs)
    sess = session(g)
    feed = dict(zip(xs, inputs))
    if exact:
        got, dense, ref = sess.run([jb, jd, jr], feed)
    else:
        (got, dense), ref = sess.run([jb, jd], feed), _interpreter(g).run(jr, feed)
    for i, (a, d, b) in enumerate(zip(got, dense, ref)):
        if exact:
            np.testing.assert_array_equal(a, b, err_msg=f"input {i}: batched != per-row")
            np.testing.assert_array_equal(d, b, err_msg=f"input {i}: dense batched != per-row")
        else:
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13, err_msg=f"input {i}")
            np.testing.assert_allclose(d, b, rtol=1e-12, atol=1e-13, err_msg=f"input {i} (dense)")
    if fd:
        for i, (x, a) in enumerate(zip(xs, inputs)):
            np.testing.assert_allclose(got[i], _fd_jacobian(sess, y, x, feed, a), rtol=fd_tol, atol=fd_tol,
                                       err_msg=f"input {i} vs finite differences")
    return got


def _r(*shape, lo=-1.0, hi=1.0):
    return RNG.uniform(lo, hi, shape)


# ----------------------------------------------------------------- elementwise / broadcasting
ELEMENTWISE = [
    ("sin_x2", lambda x, y: tf.sin(x) * x ** 2 + y, (_r(5), _r(5))),
    ("exp_tanh_sigmoid", lambda x, y: tf.exp(x) * tf.tanh(y) + tf.sigmoid(x * y), (_r(4), _r(4))),
    ("sqrt_log1p_div", lambda x, y: tf.sqrt(x * x + 1.0) / (y + 3.0) + tf.math.log1p(x * x), (_r(3, 2), _r(3, 2))),
    ("max_min_where", lambda x, y: tf.maximum(x, y) - tf.minimum(x, 2 * y) + tf.where(x > 0, x * y, -x),
     (_r(6), _r(6))),
    ("sqdiff_pow", lambda x, y: tf.math.squared_difference(x, y) + tf.pow(x + 2.0, y), (_r(4), _r(4))),
    ("broadcast_col_row", lambda x, y: x * y + tf.square(x - y), (_r(3, 1), _r(4))),
    ("broadcast_scalar", lambda x, y: tf.tanh(x * y) + y, (_r(2, 3), _r())),
    ("relu_softplus_abs", lambda x, y: tf.nn.relu(x) * tf.nn.softplus(y) + tf.abs(x + 5.0),
     (_r(5, lo=0.1), _r(5))),
    ("cast_identity_addn", lambda x, y: tf.add_n([x, tf.identity(y), x * y]) * tf.cast(x > 0.0, tf.float64),
     (_r(3), _r(3))),
    ("rsqrt_reciprocal", lambda x, y: tf.math.rsqrt(x + 2.0) * tf.math.reciprocal(y + 2.0), (_r(4), _r(4))),
]


@pytest.mark.parametrize("name, fn, inputs", ELEMENTWISE, ids=[c[0] for c in ELEMENTWISE])
def test_elementwise_and_broadcasting(name, fn, inputs):
    check_jacobian(fn, *inputs)


# ----------------------------------------------------------------- reductions
REDUCTIONS = [
    ("sum_axis1", lambda x: tf.reduce_sum(x * x, axis=1)),
    ("sum_axis0_keep", lambda x: tf.reduce_sum(tf.sin(x), axis=0, keepdims=True) * x),
    ("sum_all", lambda x: tf.reduce_sum(x * x * x)),
    ("mean_neg_axis", lambda x: tf.reduce_mean(tf.exp(x), axis=-1, keepdims=True) - x),
    ("max_axis1", lambda x: tf.reduce_max(x * 2.0, axis=1)),
    ("min_all_keep", lambda x: tf.reduce_min(x, keepdims=True) * x),
    ("prod_axis0", lambda x: tf.reduce_prod(x + 2.0, axis=0)),
    ("sum_axes01", lambda x: tf.reduce_sum(x[:, :, None] * x[:, None, :], axis=[0, 1])),
]


@pytest.mark.parametrize("name, fn", REDUCTIONS, ids=[c[0] for c in REDUCTIONS])
def test_reductions(name, fn):
    check_jacobian(fn, _r(3, 4))


# ----------------------------------------------------------------- matmul
@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_matmul_transposes(ta, tb):
    a = _r(3, 4) if not ta else _r(4, 3)
    b = _r(4, 2) if not tb else _r(2, 4)
    # Both operands are sources: covers a batched left and a batched right operand.
    check_jacobian(lambda a, b: tf.tanh(tf.matmul(a, b, transpose_a=ta, transpose_b=tb)), a, b, exact=False)


def test_matmul_vector_and_batch_matmul():
    w = _r(5, 5)
    check_jacobian(lambda x: tf.tanh(tf.matmul(tf.constant(w), tf.reshape(x, [5, 1]))[:, 0]), _r(5), exact=False)
    check_jacobian(lambda a, b: tf.matmul(a, b) * 1.5, _r(2, 3, 4), _r(4, 2), exact=False)
    check_jacobian(lambda a, b: tf.matmul(a, b, transpose_a=True), _r(2, 4, 3), _r(2, 4, 2), exact=False)


# ----------------------------------------------------------------- layout
LAYOUT = [
    ("reshape", lambda x: tf.reshape(x * x, [4, 3]) * tf.constant(np.arange(12.0).reshape(4, 3))),
    ("reshape_minus1", lambda x: tf.sin(tf.reshape(x, [-1]))),
    ("transpose", lambda x: tf.transpose(tf.sin(x)) * tf.constant(_r(4, 3))),
    ("transpose_perm3", lambda x: tf.transpose(tf.reshape(x, [3, 2, 2]), [2, 0, 1]) ** 2),
    ("expand_squeeze", lambda x: tf.squeeze(tf.expand_dims(x, 1) * 2.0, axis=1) + tf.squeeze(x[None] ** 2)),
    ("slices", lambda x: x[1:, ::2] * x[:-1, 1::2] + x[1:, -1:][::-1]),
    ("slice_int_newaxis", lambda x: x[1][:3] * x[..., 2][:, None][:, 0]),
    ("concat", lambda x: tf.concat([x[:, :2] * 2.0, tf.sin(x)], axis=1)[:, 1:5] + 0.0),
    ("concat_axis0", lambda x: tf.concat([x, x * x, tf.constant(_r(1, 4))], axis=0)),
    ("stack_unstack", lambda x: tf.stack([u * u for u in tf.unstack(x, axis=1)], axis=0)),
    ("gather", lambda x: tf.gather(x * x, [2, 0, 2], axis=0) + tf.gather(x, [1, 1, 3, 0], axis=1)),
    ("tile", lambda x: tf.tile(x * x, [2, 1])),
    ("broadcast_to", lambda x: tf.broadcast_to(tf.reduce_sum(x, 0), [2, 4]) * tf.constant(_r(2, 4))),
    ("fill_like", lambda x: tf.zeros_like(x) + tf.ones_like(x) * x + tf.fill([3, 4], tf.reduce_sum(x))),
]


@pytest.mark.parametrize("name, fn", LAYOUT, ids=[c[0] for c in LAYOUT])
def test_layout_ops(name, fn):
    check_jacobian(fn, _r(3, 4))


# ----------------------------------------------------------------- softmax family
NN = [
    ("softmax", lambda x: tf.nn.softmax(x)),
    ("log_softmax_axis0", lambda x: tf.nn.log_softmax(x, axis=0)),
    ("xent", lambda x: tf.nn.softmax_cross_entropy_with_logits(labels=tf.constant(np.full((3, 4), 0.25)),
                                                               logits=x)),
]


@pytest.mark.parametrize("name, fn", NN, ids=[c[0] for c in NN])
def test_softmax_family(name, fn):
    check_jacobian(fn, _r(3, 4))


# ----------------------------------------------------------------- arbitrary cotangents, structure
def test_batched_gradients_with_random_cotangents_and_unconnected():
    xv, zv = _r(3, 2), _r(2)
    c = _r(5, 3, 2)
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float64, [3, 2])
        z = tf.compat.v1.placeholder(tf.float64, [2])
        u = tf.compat.v1.placeholder(tf.float64, [4])  # not connected to y
        y = tf.sin(x) * z
        gb = bg.batched_gradients(y, [x, z, u], tf.constant(c))
        assert gb[2] is None
        gz = bg.batched_gradients(y, [u], [c], unconnected_gradients="zero")[0]
        assert gz.shape.as_list() == [5, 4]
        rows = [tf.gradients(y, [x, z], grad_ys=tf.constant(c[b])) for b in range(5)]
    sess = session(g)
    feed = {x: xv, z: zv, u: np.zeros(4)}
    got, ref, zero = sess.run([gb[:2], rows, gz], feed)
    for k in range(2):
        np.testing.assert_array_equal(got[k], np.stack([r[k] for r in ref]))
    np.testing.assert_array_equal(zero, np.zeros((5, 4)))


def test_jacobian_of_source_itself_and_of_x_dependent_constant():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant([1.0, 2.0, 3.0], tf.float64)
        (j,) = bg.batched_jacobian(x, [x])
        (k,) = bg.batched_jacobian(tf.stop_gradient(x) * 2.0 + tf.reduce_sum(x), [x])
    r = session(g).run([j, k])
    np.testing.assert_array_equal(r[0], np.eye(3))
    np.testing.assert_array_equal(r[1], np.ones((3, 3)))


def test_per_row_fallback_for_ops_without_a_rule(monkeypatch):
    # Without the Transpose and Unreduce rules the op-level per-row loop takes over: same numbers.
    monkeypatch.delitem(bg._RULES, "Transpose")
    monkeypatch.delitem(bg._RULES, "Unreduce")
    xv = _r(3, 4)
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float64, [3, 4])
        y = tf.reduce_sum(tf.transpose(x * x), axis=1)
        stats = {}
        (jb,) = bg.batched_jacobian(y, [x], _stats=stats)
        assert set(stats["per_row"]) == {"Transpose", "Unreduce"}
        (jr,) = _per_row_jacobian(y, [x])
    a, b = session(g).run([jb, jr], {x: xv})
    np.testing.assert_array_equal(a, b)


# ----------------------------------------------------------------- tf.hessians
HESSIANS = [
    ("w4", lambda x: tf.reduce_sum(tf.sin(x) * x ** 2), _r(7), True),
    ("quartic_cross", lambda x: tf.reduce_sum(x * x * x) + x[0] * x[1] * x[3], _r(6), True),
    ("matrix_softmax", lambda x: tf.reduce_sum(tf.nn.softmax(x) * tf.constant(_r(2, 3))), _r(2, 3), True),
    ("log_softmax_mean", lambda x: tf.reduce_mean(tf.nn.log_softmax(x, axis=0) * tf.constant(_r(2, 3))),
     _r(2, 3), True),
    ("matmul", lambda x: tf.reduce_sum(tf.tanh(tf.matmul(x, x, transpose_b=True))), _r(3, 3), False),
    ("broadcast_reduce", lambda x: tf.reduce_sum(tf.reduce_sum(x, 0, keepdims=True) * x * tf.constant(_r(4)))
     + tf.reduce_max(x * x), _r(3, 4), True),
    ("slices_concat", lambda x: tf.reduce_sum(x[1:] * x[:-1] * tf.concat([x[:1], x[:3]], 0)), _r(5), True),
]


@pytest.mark.parametrize("name, fn, xv, exact", HESSIANS, ids=[c[0] for c in HESSIANS])
def test_hessians_batched_vs_per_row_and_fd(name, fn, xv, exact):
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float64, xv.shape)
        y = fn(x)
        before = len(g.get_operations())
        (h,) = tf.hessians(y, x)
        added = len(g.get_operations()) - before
        assert h.shape.as_list() == list(xv.shape) * 2
        (hr,) = _hessians_per_row(y, x)
        (grad,) = tf.gradients(y, x)
    per_row_added = len(g.get_operations()) - before - added
    assert added < per_row_added or xv.size <= 2  # one backward pass, not one per element
    sess = session(g)
    if exact:
        a, b = sess.run([h, hr], {x: xv})
    else:
        a, b = sess.run(h, {x: xv}), _interpreter(g).run(hr, {x: xv})
    if exact:
        np.testing.assert_array_equal(a, b)
    else:
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13)
    n = xv.size
    num = _fd_jacobian(sess, grad, x, {}, xv).reshape(n, n)
    np.testing.assert_allclose(a.reshape(n, n), num, rtol=1e-6, atol=1e-6)


def test_hessians_structure_and_float32_w4():
    xv = np.random.default_rng(4).uniform(-2, 2, 40).astype(np.float32)
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [40])
        y = tf.reduce_sum(tf.sin(x) * x ** 2)
        n0 = len(g.get_operations())
        (h,) = tf.hessians(y, x)
        # the per-row build adds 40 gradient graphs (~2000 ops); the batched one ~100, plus the
        # finiteness test choosing between its one-hot and dense passes
        assert len(g.get_operations()) - n0 < 150
        (hr,) = _hessians_per_row(y, x)
        w = tf.constant([[1.0, 2.0], [3.0, 4.0]])
        hw = tf.hessians(tf.reduce_sum(w * w), [w])
        with pytest.raises(ValueError, match="None values"):   # as TF: x does not feed that y
            tf.hessians(tf.reduce_sum(w * w), [w, x])
    a, b, c = session(g).run([h, hr, hw[0]], {x: xv})
    np.testing.assert_array_equal(a, b)
    expect = -np.sin(xv) * xv * xv + 4 * xv * np.cos(xv) + 2 * np.sin(xv)
    np.testing.assert_allclose(a, np.diag(expect), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(c, 2 * np.eye(4).reshape(2, 2, 2, 2))


def test_hessians_unknown_shape_falls_back_and_of_reduce_prod():
    # d2/dxi dxj prod(x) = product of the elements other than xi, xj (0 on the diagonal)
    prod_hessian = np.array([[0.0, 3.0, 2.0], [3.0, 0.0, 1.0], [2.0, 1.0, 0.0]])
    with tf.Graph().as_default() as g:
        p = tf.compat.v1.placeholder(tf.float32, [None])
        (h,) = tf.hessians(tf.reduce_sum(p * p), p)   # rows by a while_loop over p's run-time size
        (hp,) = tf.hessians(tf.reduce_prod(p), p)
        x = tf.constant([1.0, 2.0, 3.0])
        (hx,) = tf.hessians(tf.reduce_prod(x), x)
        got_h, got_hp, got_hx = session(g).run([h, hp, hx], {p: [1.0, 2.0, 3.0]})
    np.testing.assert_array_equal(got_h, 2 * np.eye(3))
    np.testing.assert_array_equal(got_hp, prod_hessian)
    np.testing.assert_array_equal(got_hx, prod_hessian)


# ----------------------------------------------------------------- GradientTape inside jitgrad.function
def _eager_jacobians(f, *args):
    with tf.GradientTape(persistent=True) as t:
        for a in args:
            t.watch(a)
        y = f(*args)
    return t.jacobian(y, list(args)), t


def test_tape_jacobian_in_function_matches_eager_and_per_row():
    wv = (RNG.standard_normal((8, 8)) / 4).astype(np.float32)
    W = tf.constant(wv)

    def f(x, b):
        return tf.tanh(tf.linalg.matmul(W, tf.reshape(x, [8, 1]))[:, 0] + b * x)

    @tf.function
    def jac(x, b):
        with tf.GradientTape() as tape:
            tape.watch([x, b])
            y = f(x, b)
        return tape.jacobian(y, [x, b])

    @tf.function
    def jac_rows(x, b):
        with tf.GradientTape() as tape:
            tape.watch([x, b])
            y = f(x, b)
        xs, watched = tape._graph_sources([x, b])
        return tape._graph_jacobian_per_row(y, xs, watched, tf.UnconnectedGradients.NONE)

    xv, bv = tf.constant(RNG.standard_normal(8).astype(np.float32)), tf.constant(np.float32(0.3))
    got = jac(xv, bv)
    rows = jac_rows(xv, bv)
    ref, _ = _eager_jacobians(f, xv, bv)
    assert got[0].shape == (8, 8) and got[1].shape == (8,)
    for a, r, e in zip(got, rows, ref):
        np.testing.assert_allclose(a.numpy(), r.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(a.numpy(), e.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[0].numpy(), (1 - np.tanh(wv @ xv.numpy() + 0.3 * xv.numpy()) ** 2)[:, None]
                               * (wv + 0.3 * np.eye(8)), rtol=1e-5, atol=1e-6)


def test_tape_jacobian_in_function_unconnected_and_variables():
    v = tf.Variable([1.0, 2.0, 3.0])
    u = tf.Variable([4.0, 5.0])

    @tf.function
    def jac(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = v * v * tf.reduce_sum(x)
        return tape.jacobian(y, {"x": x, "v": v, "u": u})

    @tf.function
    def jac_zero(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = v * v * tf.reduce_sum(x)
        return tape.jacobian(y, [u, x], unconnected_gradients=tf.UnconnectedGradients.ZERO)

    x = tf.constant([1.0, -1.0, 2.0, 0.5])
    j = jac(x)
    assert j["u"] is None
    np.testing.assert_allclose(j["x"].numpy(), np.tile(np.array([1.0, 4.0, 9.0])[:, None], (1, 4)))
    np.testing.assert_allclose(j["v"].numpy(), np.diag(2 * np.array([1.0, 2.0, 3.0]) * 2.5))
    z = jac_zero(x)
    np.testing.assert_array_equal(z[0].numpy(), np.zeros((3, 2)))
    assert z[1].shape == (3, 4)


def test_tape_batch_jacobian_in_function_matches_eager():
    wv = RNG.standard_normal((3, 5)).astype(np.float32)
    W = tf.constant(wv)

    def f(x):
        return tf.nn.softmax(tf.matmul(x, W)) * tf.reduce_sum(x * x, axis=1, keepdims=True)

    @tf.function
    def bj(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = f(x)
        return tape.batch_jacobian(y, x)

    xv = tf.constant(RNG.standard_normal((4, 3)).astype(np.float32))
    got = bj(xv)
    with tf.GradientTape() as t:
        t.watch(xv)
        y = f(xv)
    ref = t.batch_jacobian(y, xv)
    assert got.shape == (4, 5, 3)
    np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-5, atol=1e-6)

    @tf.function
    def bad(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.reduce_sum(x, axis=1)
        return tape.batch_jacobian(y, x)

    with pytest.raises(ValueError, match="at least rank 2"):
        bad(xv)


def test_one_hot_cotangents_turn_the_w5_matmul_into_a_gather():
    wv = _r(6, 6)
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float64, [6])
        y = tf.tanh(tf.matmul(tf.constant(wv), tf.reshape(x, [6, 1]))[:, 0])
        n0 = len(g.get_operations())
        (j,) = bg.batched_jacobian(y, [x])
        new = [op.type for op in g.get_operations()[n0:] if not op.name.startswith("jacobian/rowgrad")]
        assert "MatMul" not in new and "BatchMatMulV2" not in new, new
    xv = _r(6)
    got = session(g).run(j, {x: xv})
    np.testing.assert_allclose(got, (1 - np.tanh(wv @ xv) ** 2)[:, None] * wv, rtol=1e-12, atol=1e-14)
