"""tf.GradientTape: API, structures, errors, jacobians, nesting."""
import numpy as np
import pytest

import jitgrad as tf

RNG = np.random.default_rng(0)


def _c(shape):
    return tf.constant(RNG.standard_normal(shape).astype(np.float32))


def test_unwatched_constant_gives_none():
    x = tf.constant(3.0)
    with tf.GradientTape() as t:
        y = x * x
    assert t.gradient(y, x) is None


def test_non_persistent_second_call_raises():
    x = tf.constant(3.0)
    with tf.GradientTape() as t:
        t.watch(x)
        y = x * x
    t.gradient(y, x)
    with pytest.raises(RuntimeError, match="non-persistent GradientTape can only be used to compute one set"):
        t.gradient(y, x)


def test_persistent_repeats_and_jacobian_after_gradient():
    x = tf.constant([1.0, 2.0])
    with tf.GradientTape(persistent=True) as t:
        t.watch(x)
        y = x * x
    for _ in range(3):
        np.testing.assert_array_equal(t.gradient(y, x).numpy(), [2.0, 4.0])
    np.testing.assert_array_equal(t.jacobian(y, x).numpy(), np.diag([2.0, 4.0]))


@pytest.mark.parametrize("kind", ["list", "tuple", "dict", "single", "nested"])
def test_source_structures(kind):
    a, b = tf.constant(2.0), tf.constant(3.0)
    with tf.GradientTape() as t:
        t.watch([a, b])
        y = a * b
    src = {"list": [a, b], "tuple": (a, b), "dict": {"x": a, "y": b}, "single": a,
           "nested": {"p": [a, (b,)]}}[kind]
    g = t.gradient(y, src)
    if kind == "list":
        assert isinstance(g, list) and [float(v) for v in g] == [3.0, 2.0]
    elif kind == "tuple":
        assert isinstance(g, tuple) and [float(v) for v in g] == [3.0, 2.0]
    elif kind == "dict":
        assert float(g["x"]) == 3.0 and float(g["y"]) == 2.0
    elif kind == "single":
        assert float(g) == 3.0
    else:
        assert float(g["p"][0]) == 3.0 and float(g["p"][1][0]) == 2.0


def test_unconnected_zero_and_none():
    x, z = tf.constant([1.0, 2.0]), tf.constant([[1.0]])
    with tf.GradientTape(persistent=True) as t:
        t.watch([x, z])
        y = tf.reduce_sum(x)
    assert t.gradient(y, [x, z])[1] is None
    gz = t.gradient(y, z, unconnected_gradients=tf.UnconnectedGradients.ZERO)
    assert gz.shape == (1, 1) and float(gz[0, 0]) == 0.0
    gz = t.gradient(y, z, unconnected_gradients="zero")
    assert gz.numpy().tolist() == [[0.0]]


def test_output_gradients_weight_targets():
    x = tf.constant(2.0)
    with tf.GradientTape() as t:
        t.watch(x)
        y1, y2 = x * x, x * x * x
    g = t.gradient([y1, y2], x, output_gradients=[tf.constant(0.5), 2.0])
    assert float(g) == pytest.approx(0.5 * 4 + 2 * 12)


def test_stop_gradient_and_integer_sources():
    x = tf.constant(2.0)
    i = tf.constant(3)
    with tf.GradientTape() as t:
        t.watch([x, i])
        y = tf.stop_gradient(x * x) * x + tf.cast(i, tf.float32)
    gx, gi = t.gradient(y, [x, i])
    assert float(gx) == 4.0 and gi is None


def test_stop_recording_and_reset():
    x = tf.constant(5.0)
    with tf.GradientTape() as t:
        t.watch(x)
        with t.stop_recording():
            y = x * x
        z = 3 * x
    assert float(t.gradient([y, z], x)) == 3.0
    with tf.GradientTape() as t:
        t.watch(x)
        y = x * x
        t.reset()
        z = x * 2  # x no longer watched
    assert t.gradient(z, x) is None


def test_stop_recording_and_reset_outside_recording_raise_as_tf():
    """TF's GradientTape: stop_recording() on a tape that has no tape yet (never entered, or
    a non-persistent one used up) is a RuntimeError; on a tape left (not recording) it and
    reset() fail in _pop_tape with ValueError('Tape is not recording.')."""
    x = tf.constant(5.0)
    fresh = tf.GradientTape()
    with pytest.raises(RuntimeError):
        with fresh.stop_recording():
            pass
    with tf.GradientTape(persistent=True) as t:
        t.watch(x)
        y = x * x
    with pytest.raises(ValueError, match="not recording"):
        with t.stop_recording():
            pass
    with pytest.raises(ValueError, match="not recording"):
        t.reset()
    assert float(t.gradient(y, x)) == 10.0           # the failed reset cleared nothing
    with tf.GradientTape() as t2:
        t2.watch(x)
        y = x * x
    t2.gradient(y, x)
    with pytest.raises(RuntimeError):
        with t2.stop_recording():
            pass


def test_variables_watch_and_trainable():
    v = tf.Variable(3.0)
    w = tf.Variable(2.0, trainable=False)
    with tf.GradientTape() as t:
        y = v * w
    gv, gw = t.gradient(y, [v, w])
    assert float(gv) == 2.0 and gw is None
    with tf.GradientTape(watch_accessed_variables=False) as t:
        y = v * v
    assert t.gradient(y, v) is None
    with tf.GradientTape(watch_accessed_variables=False) as t:
        t.watch(w)
        y = v * w
    assert t.gradient(y, w).numpy() == 3.0
    assert t.watched_variables()[0] is w and len(t.watched_variables()) == 1


def test_watched_variables_order_and_repr():
    a, b = tf.Variable(1.0), tf.Variable([1.0, 2.0], name="b")
    with tf.GradientTape() as t:
        y = tf.reduce_sum(b) * a
    wv = t.watched_variables()
    assert wv[0] is a and wv[1] is b
    assert repr(b) == "<tf.Variable 'b:0' shape=(2,) dtype=float32, numpy=array([1., 2.], dtype=float32)>"


def test_nested_tapes_third_order():
    x = tf.constant(2.0)
    with tf.GradientTape() as t3:
        t3.watch(x)
        with tf.GradientTape() as t2:
            t2.watch(x)
            with tf.GradientTape() as t1:
                t1.watch(x)
                y = x ** 4
            d1 = t1.gradient(y, x)
        d2 = t2.gradient(d1, x)
    d3 = t3.gradient(d2, x)
    assert [float(d1), float(d2), float(d3)] == [32.0, 48.0, 48.0]


def test_reentering_recording_tape_raises():
    t = tf.GradientTape()
    with t:
        with pytest.raises(ValueError):
            t.__enter__()


def _fd_jacobian(f, x, eps=1e-3):
    x = x.astype(np.float64)
    y0 = f(x)
    J = np.zeros(y0.shape + x.shape)
    for idx in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[idx] = eps
        J[(...,) + idx] = (f(x + d) - f(x - d)) / (2 * eps)
    return J


def test_jacobian_broadcast_reduce_matmul_vs_finite_differences():
    W = RNG.standard_normal((4, 3)).astype(np.float32)
    b = RNG.standard_normal((3,)).astype(np.float32)
    xv = RNG.standard_normal((5, 4)).astype(np.float32)
    x = tf.constant(xv)

    def np_f(x):
        h = np.tanh(x @ W + b)
        return (h * h).sum(axis=1) / 2 + h.mean(axis=1)

    with tf.GradientTape(persistent=True) as t:
        t.watch(x)
        h = tf.tanh(tf.matmul(x, W) + b)
        y = tf.reduce_sum(h * h, axis=1) / 2.0 + tf.reduce_mean(h, axis=1)
    J = t.jacobian(y, x)
    assert J.shape == (5, 5, 4)
    np.testing.assert_allclose(J.numpy(), _fd_jacobian(np_f, xv), rtol=2e-2, atol=2e-3)
    # vectorised rows agree with one backward pass per row
    np.testing.assert_allclose(J.numpy(), t.jacobian(y, x, experimental_use_pfor=False).numpy(), rtol=1e-6,
                               atol=1e-7)


def test_jacobian_variables_structure_and_unconnected():
    v = tf.Variable([[1.0, 2.0], [3.0, 4.0]])
    u = tf.Variable([1.0])
    with tf.GradientTape() as t:
        y = tf.reduce_sum(v * v, axis=0)
    j = t.jacobian(y, {"v": v, "u": u})
    assert j["u"] is None
    assert j["v"].shape == (2, 2, 2)
    expected = np.zeros((2, 2, 2), np.float32)
    for k in range(2):
        for i in range(2):
            expected[k, i, k] = 2 * v.numpy()[i, k]
    np.testing.assert_array_equal(j["v"].numpy(), expected)
    with tf.GradientTape() as t:
        y = tf.reduce_sum(v, axis=1)
    jz = t.jacobian(y, [u], unconnected_gradients=tf.UnconnectedGradients.ZERO)
    assert jz[0].shape == (2, 1) and not jz[0].numpy().any()


def test_jacobian_of_scalar_and_sum_to_shape_broadcasts():
    x = tf.constant([[1.0, 2.0, 3.0]])
    s = tf.constant([[2.0], [3.0]])
    with tf.GradientTape(persistent=True) as t:
        t.watch([x, s])
        y = x * s  # (2, 3) by broadcasting
    jx, js = t.jacobian(y, [x, s])
    assert jx.shape == (2, 3, 1, 3) and js.shape == (2, 3, 2, 1)
    np.testing.assert_array_equal(jx.numpy()[1, :, 0, :], 3.0 * np.eye(3))
    np.testing.assert_array_equal(js.numpy()[0, :, 0, 0], [1.0, 2.0, 3.0])
    with tf.GradientTape() as t:
        t.watch(x)
        z = tf.reduce_sum(x * x)
    assert t.jacobian(z, x).shape == (1, 3)


def test_jacobian_non_persistent_without_pfor_raises():
    x = tf.constant([1.0])
    with tf.GradientTape() as t:
        t.watch(x)
        y = x * 2
    with pytest.raises(RuntimeError, match="persistent=True"):
        t.jacobian(y, x, experimental_use_pfor=False)


def test_batch_jacobian_shapes_and_values():
    W = RNG.standard_normal((4, 3)).astype(np.float32)
    xv = RNG.standard_normal((6, 4)).astype(np.float32)
    x = tf.constant(xv)
    with tf.GradientTape(persistent=True) as t:
        t.watch(x)
        y = tf.tanh(tf.matmul(x, W))
    bj = t.batch_jacobian(y, x)
    assert bj.shape == (6, 3, 4)
    full = t.jacobian(y, x).numpy()
    for i in range(6):
        np.testing.assert_allclose(bj.numpy()[i], full[i, :, i, :], rtol=1e-6, atol=1e-7)
    with pytest.raises(ValueError):
        t.batch_jacobian(tf.reduce_sum(y, axis=1), x)


def test_jacobian_higher_order_inside_outer_tape():
    x = tf.constant([1.0, 2.0])
    with tf.GradientTape() as outer:
        outer.watch(x)
        with tf.GradientTape() as inner:
            inner.watch(x)
            y = x * x * x
        j = inner.jacobian(y, x)  # diag(3x^2), recorded by the outer tape
    h = outer.gradient(j, x)  # d/dx sum(diag(3x^2)) = 6x
    np.testing.assert_array_equal(h.numpy(), [6.0, 12.0])


def test_target_list_sums_and_target_is_source():
    x = tf.constant(3.0)
    with tf.GradientTape(persistent=True) as t:
        t.watch(x)
        y = x * x
    assert float(t.gradient([y, y], x)) == 12.0
    assert float(t.gradient(x, x)) == 1.0


def test_dict_sources_and_targets_in_any_key_order():
    """Sources come back as a dict with their own key order, each gradient under its key;
    output_gradients pair with targets in nest's (sorted-key) order, as in TF."""
    a, b = tf.constant(2.0), tf.constant(3.0)
    with tf.GradientTape(persistent=True) as t:
        t.watch([a, b])
        ya, yb = a * a, a * b
        y = ya + yb
    g = t.gradient(y, {"z": a, "m": b})
    assert list(g) == ["z", "m"] and float(g["z"]) == 2 * 2.0 + 3.0 and float(g["m"]) == 2.0
    # targets {"q": ya, "p": yb} flatten as [yb, ya]: weights 10 on yb, 1 on ya
    g = t.gradient({"q": ya, "p": yb}, a, output_gradients={"p": 10.0, "q": 1.0})
    assert float(g) == 10 * 3.0 + 1 * 4.0


def test_batch_jacobian_of_an_unconnected_target_is_zeros_as_tf():
    """TF's batch_jacobian returns zeros of shape [batch, target dims..., source dims...] when the
    target does not depend on the source, even with the default unconnected_gradients (NONE);
    jacobian returns None then.  Eagerly and inside jitgrad.function alike."""
    x = tf.constant(np.ones((3, 2), np.float32))
    w = tf.constant(np.ones((3, 4, 5), np.float32))
    with tf.GradientTape(persistent=True) as t:
        t.watch([x, w])
        y = w * 2.0
    bj = t.batch_jacobian(y, x)
    assert bj.dtype == tf.float32 and bj.shape == (3, 4, 5, 2)
    assert not np.any(bj.numpy())
    assert t.jacobian(y, x) is None

    @tf.function
    def traced(x, w):
        with tf.GradientTape() as t:
            t.watch([x, w])
            y = w * 2.0
        return t.batch_jacobian(y, x)
    out = traced(x, w)
    assert out.shape == (3, 4, 5, 2) and not np.any(out.numpy())


def test_output_gradients_shaped_like_their_target_or_refused():
    """An output gradient seeds its target: one that broadcasts to it, or differs from it only
    by unit dimensions, gives TF's numbers; one with more elements was summed down to the
    source's shape (x * x with a [2, 3] seed for a [3] target gave 2x * column sums: a wrong
    number where TF raises)."""
    x = tf.constant([1.0, 2.0, 3.0])
    m = tf.ones([2, 3])
    with tf.GradientTape(persistent=True) as t:
        t.watch([x, m])
        sq = x * x
        mm = m * m
        rows = tf.reduce_sum(m, 1)
    with pytest.raises(tf.errors.InvalidArgumentError):
        t.gradient(sq, x, output_gradients=tf.ones([2, 3]))
    with pytest.raises(tf.errors.InvalidArgumentError):
        t.gradient(rows, m, output_gradients=tf.ones([3]))
    np.testing.assert_array_equal(t.gradient(sq, x, output_gradients=tf.constant(2.0)).numpy(), [4, 8, 12])
    np.testing.assert_array_equal(t.gradient(sq, x, output_gradients=tf.constant([[1.0, 2.0, 3.0]])).numpy(),
                                  [2, 8, 18])
    np.testing.assert_array_equal(t.gradient(mm, m, output_gradients=tf.constant([1.0, 2.0, 3.0])).numpy(),
                                  [[2, 4, 6], [2, 4, 6]])
    np.testing.assert_array_equal(t.gradient(rows, m, output_gradients=tf.constant([[1.0], [2.0]])).numpy(),
                                  [[1, 1, 1], [2, 2, 2]])


def test_complex_target_in_a_function_is_seeded_with_ones():
    """Inside a tf.function the tape differentiates through tf.gradients, which wants complex
    seeds spelled out; the tape gives them (ones), as it does eagerly: conj(2z)."""
    z = tf.constant([1 + 2j, 3 - 1j], tf.complex64)

    @tf.function
    def grad(z):
        with tf.GradientTape() as t:
            t.watch(z)
            y = z * z
        return t.gradient(y, z)
    with tf.GradientTape() as t:
        t.watch(z)
        y = z * z
    eager = t.gradient(y, z).numpy()
    np.testing.assert_allclose(eager, np.conj(2 * z.numpy()))
    np.testing.assert_array_equal(grad(z).numpy(), eager)


def test_watch_under_stop_recording_is_ignored():
    """TF ignores watch() on a tape inside its own stop_recording: the tensor was watched
    anyway, giving a gradient where TF gives None.  Another tape's stop_recording does not
    stop it."""
    x = tf.constant([1.0, 2.0])
    v = tf.Variable(2.0)
    with tf.GradientTape(watch_accessed_variables=False) as t:
        with t.stop_recording():
            t.watch([x, v])
        y = x * x + v * v
    assert t.gradient(y, [x, v]) == [None, None]
    assert t.watched_variables() == ()
    with tf.GradientTape() as outer:
        with tf.GradientTape() as inner:
            with inner.stop_recording():
                outer.watch(x)              # not stopped by another tape's stop_recording
                y = x * x
    np.testing.assert_array_equal(outer.gradient(y, x).numpy(), [2.0, 4.0])
    with tf.GradientTape() as t:            # watching again once recording resumes works
        with t.stop_recording():
            t.watch(x)
        t.watch(x)
        y = x * x
    np.testing.assert_array_equal(t.gradient(y, x).numpy(), [2.0, 4.0])


def test_closure_tensor_in_a_function_is_one_capture_for_gradients():
    """An eager tensor closed over by a tf.function is captured once, as TF does: a tape or
    tf.gradients differentiates through every use, including uses inside cond branches and
    loop bodies. Each use became its own Const: the gradient was None, or only the uses
    outside the branch counted (x^2 + cond(x^2) gave 6, not 12). Values by hand at x = 3."""
    x = tf.constant(3.0)

    @tf.function
    def tape_grads(a):
        with tf.GradientTape() as t:
            t.watch([a, x])
            y = x ** 2 + tf.cond(x > 2, lambda: a ** 3 * x, lambda: x)
            loop = tf.while_loop(lambda i, p: i < 3, lambda i, p: (i + 1, p * x), (0, tf.constant(1.0)))[1]
            mapped = tf.reduce_sum(tf.map_fn(lambda r: r * x, tf.constant([1.0, 2.0])))
        return t.gradient([y, loop, mapped], [a, x])

    @tf.function
    def graph_grads(a):
        y = tf.cond(x > 2, lambda: a ** 2 * x, lambda: x)
        return tf.gradients(y, [a, x]) + tf.gradients(x * x, x)

    ga, gx = tape_grads(tf.constant(2.0))
    assert float(ga) == 3 * 4 * 3                              # d(a^3 x)/da
    assert float(gx) == 2 * 3 + 8 + 3 * 3 ** 2 + 3             # x^2, a^3 x, x^3 (loop), 3x (map_fn)
    assert [float(v) for v in graph_grads(tf.constant(2.0))] == [12.0, 4.0, 6.0]


@pytest.mark.parametrize("target", [None, "list_with_none"])
def test_none_target_raises_type_error_like_tf(target):
    """TF 2.21: t.gradient(None, x) and t.gradient([y, None], x) raise TypeError (the first names
    the target, the second fails converting None's dtype); jitgrad raised ValueError."""
    x = tf.constant(3.0)
    with tf.GradientTape() as t:
        t.watch(x)
        y = x * x
    with pytest.raises(TypeError):
        t.gradient(None if target is None else [y, None], x)
