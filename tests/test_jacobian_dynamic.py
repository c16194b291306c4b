"""GradientTape.jacobian / batch_jacobian over sizes known only at run time (a
placeholder [None] in graph mode, a None dim in a jitgrad.function
input_signature): values against hand-derived jacobians and finite
differences for several sizes, in both Session modes; compiled runs are
native (no interpreter fallback) and re-running a size reuses its kernel."""
import numpy as np
import pytest

import jitgrad as tf
from jitgrad.errors import InvalidArgumentError

pytestmark = pytest.mark.usefixtures("graph_mode")

ph = tf.compat.v1.placeholder
SIZES = (1, 2, 5)


@pytest.fixture
def graph():
    """A default graph; in compiled mode every run must be native."""
    before = tf.cache_info()["fallbacks"]
    g = tf.Graph()
    with g.as_default():
        yield g
    if tf.get_default_mode() == "compiled":
        assert tf.cache_info()["fallbacks"] == before, "a run fell back to the interpreter"


def fd_jacobian(f, x, eps=1e-6):
    """Central finite differences: f(x).shape + x.shape (float64)."""
    x = np.array(x, np.float64)
    cols = []
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        cols.append((f(x + e) - f(x - e)) / (2 * eps))
    y_shape = np.shape(f(x))
    return np.moveaxis(np.array(cols).reshape(x.shape + y_shape), list(range(x.ndim)),
                       list(range(len(y_shape), len(y_shape) + x.ndim)))


# ---------------------------------------------------------------- jacobian, graph mode
def test_jacobian_of_a_run_time_sized_target_and_source(graph):
    x = ph(tf.float64, [None])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = tf.sin(x)[:, None] * x[None, :]          # y[a, b] = sin(x_a) x_b
    j = tape.jacobian(y, x)
    assert j.shape.rank == 3
    sess = tf.compat.v1.Session(graph=graph)
    for n in SIZES:
        xv = np.linspace(-1.0, 2.0, n)
        ref = np.zeros((n, n, n))
        for a in range(n):
            for b in range(n):
                ref[a, b, a] += np.cos(xv[a]) * xv[b]
                ref[a, b, b] += np.sin(xv[a])
        np.testing.assert_allclose(sess.run(j, {x: xv}), ref, rtol=1e-12, atol=1e-15)


def test_jacobian_against_finite_differences_with_a_static_target_and_dynamic_source(graph):
    x = ph(tf.float64, [None, 2])
    w = tf.constant([[0.5, -1.0, 2.0], [1.5, 0.25, -0.5]], tf.float64)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = tf.reduce_sum(tf.tanh(tf.matmul(x, w)), axis=0)   # shape [3], known statically
    j = tape.jacobian(y, x)
    assert j.shape.as_list() == [3, None, 2]

    def f(xv):
        return np.tanh(xv @ np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.5]])).sum(0)
    sess = tf.compat.v1.Session(graph=graph)
    rng = np.random.default_rng(0)
    for n in SIZES:
        xv = rng.standard_normal((n, 2))
        np.testing.assert_allclose(sess.run(j, {x: xv}), fd_jacobian(f, xv), rtol=1e-6, atol=1e-9)


def test_jacobian_with_an_empty_source_and_target(graph):
    x = ph(tf.float32, [None])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = x * 3.0
    j = tape.jacobian(y, x)
    sess = tf.compat.v1.Session(graph=graph)
    assert sess.run(j, {x: np.zeros(0, np.float32)}).shape == (0, 0)
    np.testing.assert_array_equal(sess.run(j, {x: np.ones(2, np.float32)}), 3.0 * np.eye(2, dtype=np.float32))


def test_unconnected_sources_give_none_or_zeros_of_the_run_time_shape(graph):
    x = ph(tf.float32, [None])
    z = ph(tf.float32, [None, 3])
    k = ph(tf.int32, [None])
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([x, z, k])
        y = x * x
    assert tape.jacobian(y, [z, k]) == [None, None]
    jz, jk, jx = tape.jacobian(y, [z, k, x], unconnected_gradients=tf.UnconnectedGradients.ZERO)
    assert jz.dtype == tf.float32 and jk.dtype == tf.int32
    sess = tf.compat.v1.Session(graph=graph)
    xv = np.array([1.0, -2.0], np.float32)
    out = sess.run([jz, jk, jx], {x: xv, z: np.ones((4, 3), np.float32), k: np.arange(5, dtype=np.int32)})
    np.testing.assert_array_equal(out[0], np.zeros((2, 4, 3), np.float32))
    np.testing.assert_array_equal(out[1], np.zeros((2, 5), np.int32))
    np.testing.assert_array_equal(out[2], np.diag(2 * xv))


def test_jacobian_of_a_gradient_is_the_hessian(graph):
    x = ph(tf.float64, [None])
    with tf.GradientTape() as outer:
        outer.watch(x)
        with tf.GradientTape() as inner:
            inner.watch(x)
            y = tf.reduce_sum(x * x * x) + tf.reduce_sum(x) ** 2
        g = inner.gradient(y, x)
    h = outer.jacobian(g, x)
    sess = tf.compat.v1.Session(graph=graph)
    for n in SIZES:
        xv = np.arange(1.0, n + 1.0)
        np.testing.assert_allclose(sess.run(h, {x: xv}), np.diag(6 * xv) + 2.0, rtol=1e-12)


def test_jacobian_of_a_jacobian_differentiates_through_the_row_loop(graph):
    x = ph(tf.float64, [None])
    with tf.GradientTape() as outer:
        outer.watch(x)
        with tf.GradientTape() as inner:
            inner.watch(x)
            y = x ** 3 + tf.reduce_sum(x) * x
        j = inner.jacobian(y, x)          # j[a, b] = 3 x_a^2 d_ab + x_a + sum(x) d_ab
    jj = outer.jacobian(j, x)             # jj[a, b, c] = 6 x_a d_ab d_ac + d_ac + d_ab
    sess = tf.compat.v1.Session(graph=graph)
    for n in SIZES:
        xv = np.linspace(-0.5, 1.5, n)
        d = np.eye(n)
        ref = (6 * xv[:, None, None] * d[:, :, None] * d[:, None, :] + d[:, None, :] + d[:, :, None])
        np.testing.assert_allclose(sess.run(jj, {x: xv}), ref, rtol=1e-12, atol=1e-14)


def test_pfor_flags_are_accepted_and_do_not_change_values(graph):
    x = ph(tf.float32, [None])
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = tf.exp(x)
    j1 = tape.jacobian(y, x, experimental_use_pfor=False, parallel_iterations=4)
    j2 = tape.jacobian(y, x, parallel_iterations=1)
    sess = tf.compat.v1.Session(graph=graph)
    xv = np.array([0.0, 1.0, -1.0], np.float32)
    a, b = sess.run([j1, j2], {x: xv})
    np.testing.assert_allclose(a, np.diag(np.exp(xv)), rtol=1e-6)
    np.testing.assert_array_equal(a, b)


def test_compiled_runs_reuse_one_kernel_per_shape_and_are_bit_identical(graph):
    x = ph(tf.float32, [None])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = tf.sin(x) * tf.reduce_sum(x)
    j = tape.jacobian(y, x)
    sess = tf.compat.v1.Session(graph=graph, config=tf.compat.v1.ConfigProto(jitgrad_mode="compiled"))
    xv = np.linspace(0.1, 1.0, 7).astype(np.float32)
    first = sess.run(j, {x: xv})
    before = tf.cache_info()["compiles"]
    again = sess.run(j, {x: xv})
    assert tf.cache_info()["compiles"] == before
    assert first.tobytes() == again.tobytes()
    interp = tf.compat.v1.Session(graph=graph, config=tf.compat.v1.ConfigProto(jitgrad_mode="interpret"))
    np.testing.assert_allclose(first, interp.run(j, {x: xv}), rtol=1e-6)


# ---------------------------------------------------------------- batch_jacobian, graph mode
def _tanh_scaled_reference(xv):
    """y[b, i] = tanh(x[b, i]) * sum_k x[b, k]  ->  dy[b, i]/dx[b, j] = (1 - tanh^2) s_b d_ij + tanh(x[b, i])."""
    s = xv.sum(1)
    return np.array([np.diag((1 - np.tanh(r) ** 2) * sb) + np.tanh(r)[:, None] for r, sb in zip(xv, s)])


def test_batch_jacobian_with_run_time_batch_and_inner_sizes(graph):
    x = ph(tf.float64, [None, None])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = tf.tanh(x) * tf.reduce_sum(x, axis=1, keepdims=True)
    bj = tape.batch_jacobian(y, x)
    assert bj.shape.rank == 3
    sess = tf.compat.v1.Session(graph=graph)
    rng = np.random.default_rng(1)
    for b, k in ((1, 1), (2, 3), (4, 2), (3, 0)):
        xv = rng.standard_normal((b, k))
        out = sess.run(bj, {x: xv})
        assert out.shape == (b, k, k)
        np.testing.assert_allclose(out, _tanh_scaled_reference(xv), rtol=1e-12, atol=1e-15)


def test_batch_jacobian_with_higher_rank_inner_shapes_against_finite_differences(graph):
    x = ph(tf.float64, [None, 2, 2])
    w = tf.constant([[1.0, -0.5], [0.25, 2.0], [0.5, 0.5]], tf.float64)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = tf.sin(tf.matmul(tf.reshape(x, [-1, 4])[:, :2], w, transpose_b=True))   # [b, 3]
    bj = tape.batch_jacobian(y, x)
    assert bj.shape.as_list() == [None, 3, 2, 2]
    wv = np.array([[1.0, -0.5], [0.25, 2.0], [0.5, 0.5]])
    sess = tf.compat.v1.Session(graph=graph)
    rng = np.random.default_rng(2)
    for b in (1, 3):
        xv = rng.standard_normal((b, 2, 2))
        ref = np.array([fd_jacobian(lambda r: np.sin(r.reshape(4)[:2] @ wv.T), row) for row in xv])
        np.testing.assert_allclose(sess.run(bj, {x: xv}), ref, rtol=1e-6, atol=1e-9)


def test_batch_jacobian_of_an_unconnected_source_is_zeros(graph):
    x = ph(tf.float32, [None, 2])
    z = ph(tf.float64, [None, 3])
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([x, z])
        y = x * 2.0
    none_case = tape.batch_jacobian(y, z)
    zero_case = tape.batch_jacobian(y, z, unconnected_gradients=tf.UnconnectedGradients.ZERO)
    assert none_case.dtype == tf.float32 and zero_case.dtype == tf.float64
    sess = tf.compat.v1.Session(graph=graph)
    a, b = sess.run([none_case, zero_case], {x: np.ones((4, 2), np.float32), z: np.ones((4, 3))})
    np.testing.assert_array_equal(a, np.zeros((4, 2, 3), np.float32))
    np.testing.assert_array_equal(b, np.zeros((4, 2, 3)))


def test_batch_jacobian_errors_follow_tf(graph):
    x = ph(tf.float32, [None, 2])
    v = ph(tf.float32, [None])
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([x, v])
        y = tf.reduce_sum(x) * tf.ones_like(x[:1])    # batch 1 while x's batch is fed
        yv = tf.reduce_sum(v) * v
    with pytest.raises(ValueError, match="rank 2"):
        tape.batch_jacobian(yv, v)
    bj = tape.batch_jacobian(y, x)
    sess = tf.compat.v1.Session(graph=graph)
    with pytest.raises(InvalidArgumentError, match="first dimension"):
        sess.run(bj, {x: np.ones((3, 2), np.float32)})
    # same batch: fine (one example: every element depends on both inputs with slope 1)
    np.testing.assert_array_equal(sess.run(bj, {x: np.ones((1, 2), np.float32)}), np.ones((1, 2, 2), np.float32))


# ---------------------------------------------------------------- inside jitgrad.function
def test_jacobians_inside_a_function_with_a_none_input_signature(graph_mode):
    traces = [0]

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.float64)])
    def jacobians(x):
        traces[0] += 1
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(x)
            y = tf.tanh(x) * tf.reduce_sum(x, axis=1, keepdims=True)
        return tape.batch_jacobian(y, x), tape.jacobian(y, x)

    before = tf.cache_info()["fallbacks"]
    rng = np.random.default_rng(3)
    for b, k in ((1, 2), (3, 2), (2, 4)):
        xv = rng.standard_normal((b, k))
        bj, j = jacobians(xv)
        ref = _tanh_scaled_reference(xv)
        np.testing.assert_allclose(bj.numpy(), ref, rtol=1e-12, atol=1e-15)
        full = np.zeros((b, k, b, k))
        for e in range(b):
            full[e, :, e, :] = ref[e]
        np.testing.assert_allclose(j.numpy(), full, rtol=1e-12, atol=1e-15)
    assert traces == [1], "a None input_signature traces once for every size"
    if graph_mode == "compiled":
        assert tf.cache_info()["fallbacks"] == before


def test_jacobian_of_a_variable_inside_a_function_with_run_time_batch(graph_mode):
    w = tf.Variable([[1.0, 2.0], [-1.0, 0.5]], dtype=tf.float64)

    @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float64)])
    def jac(x):
        with tf.GradientTape() as tape:
            y = tf.matmul(x, w) ** 2
        return tape.jacobian(y, w)

    for n in (1, 3):
        xv = np.arange(2.0 * n).reshape(n, 2) - 1.0
        wv = w.numpy()
        np.testing.assert_allclose(jac(xv).numpy(), fd_jacobian(lambda m: (xv @ m) ** 2, wv), rtol=1e-6, atol=1e-8)


def test_nested_sources_and_a_scalar_target_inside_a_function(graph_mode):
    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32), tf.TensorSpec([2], tf.float32)])
    def jac(x, w):
        with tf.GradientTape(persistent=True) as tape:
            tape.watch([x, w])
            y = tf.reduce_sum(x * x) * w            # y_k = |x|^2 w_k
            s = tf.reduce_sum(x ** 3)               # scalar target
        return tape.jacobian(y, {"x": x, "w": w}), tape.jacobian(s, x)

    xv = np.array([1.0, 2.0, 3.0], np.float32)
    wv = np.array([2.0, -1.0], np.float32)
    j, js = jac(xv, wv)
    np.testing.assert_allclose(j["x"].numpy(), 2 * wv[:, None] * xv[None, :], rtol=1e-6)
    np.testing.assert_allclose(j["w"].numpy(), np.sum(xv * xv) * np.eye(2), rtol=1e-6)
    assert js.shape == (3,)
    np.testing.assert_allclose(js.numpy(), 3 * xv ** 2, rtol=1e-6)
