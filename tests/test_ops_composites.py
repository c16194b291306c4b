"""tf.norm, tf.math.reduce_variance / reduce_std, tf.math.l2_normalize, tf.pad,
tf.reverse, tf.eye and tf.linspace: composites of existing ops (and constants).
Values against numpy in graph mode (both Session modes) and eagerly, gradients
against central finite differences (float64) or numpy formulas, and TF's
exception types for bad arguments (graph: ValueError, eager: InvalidArgumentError)."""
import numpy as np
import pytest

import jitgrad as tf
from _graph_testing import check_op, session

R = np.random.default_rng(7)
graph_modes = pytest.mark.usefixtures("graph_mode")


def away_from_zero(*shape):
    """Values in +-[0.5, 2]: no kinks of abs / max ties near the test points."""
    return R.uniform(0.5, 2.0, shape) * R.choice([-1.0, 1.0], shape)


def _run(fn, *inputs, shapes=None):
    g = tf.Graph()
    with g.as_default():
        xs = [tf.compat.v1.placeholder(tf.as_dtype(a.dtype), a.shape if shapes is None else s)
              for a, s in zip(inputs, shapes or [None] * len(inputs))]
        y = fn(*xs)
    return y, session(g).run(y, dict(zip(xs, inputs)))


# ---------------------------------------------------------------- norm
def _np_vector_norm(x, ord, axis, keepdims):  # noqa: A002
    a = np.abs(x)
    if ord in ("euclidean", 2):
        return np.sqrt(np.sum(a * a, axis=axis, keepdims=keepdims))
    if ord == 1:
        return np.sum(a, axis=axis, keepdims=keepdims)
    if ord == np.inf:
        return np.max(a, axis=axis, keepdims=keepdims)
    return np.sum(a ** ord, axis=axis, keepdims=keepdims) ** (1.0 / ord)


NORM_CASES = [("euclidean", None, False), ("euclidean", 1, True), (2, 0, False), (1, -1, False),
              (np.inf, 1, False), (3, 1, False), (1, None, False), (np.inf, None, True)]


@graph_modes
@pytest.mark.parametrize("ord,axis,keepdims", NORM_CASES)
def test_norm_vector(ord, axis, keepdims):  # noqa: A002
    x = away_from_zero(3, 4)
    check_op(lambda p: tf.norm(p, ord=ord, axis=axis, keepdims=keepdims), x,
             expected=_np_vector_norm(x, ord, axis, keepdims), value_rtol=1e-12)
    if ord in ("euclidean", 2, 1, np.inf) and axis is not None:   # numpy's vector norms agree
        np.testing.assert_allclose(_np_vector_norm(x, ord, axis, keepdims),
                                   np.linalg.norm(x, ord=None if ord == "euclidean" else ord, axis=axis,
                                                  keepdims=keepdims), rtol=1e-12)


@graph_modes
@pytest.mark.parametrize("ord,axis", [("fro", (0, 1)), ("euclidean", (-1, -2)), (1, (0, 1)), (1, (1, 0)),
                                      (np.inf, (0, 1)), (np.inf, [2, 0])])
def test_norm_matrix(ord, axis):  # noqa: A002
    x = away_from_zero(3, 4, 2) if 2 in axis else away_from_zero(3, 4)
    np_ord = "fro" if ord == "euclidean" else ord
    want = np.linalg.norm(x, ord=np_ord, axis=tuple(axis))
    check_op(lambda p: tf.linalg.norm(p, ord=ord, axis=axis), x, expected=want)
    check_op(lambda p: tf.norm(p, ord=ord, axis=axis, keepdims=True), x,
             expected=np.linalg.norm(x, ord=np_ord, axis=tuple(axis), keepdims=True), grad=False)


def test_norm_eager_and_gradient_at_zero():
    x = np.array([[1., -2., 3.], [4., 5., -6.]], np.float32)
    assert tf.norm(x).dtype == tf.float32
    np.testing.assert_allclose(tf.norm(tf.constant(x)).numpy(), np.sqrt(91.0), rtol=1e-6)
    np.testing.assert_allclose(tf.norm(x, ord=1, axis=(0, 1)).numpy(), 9.0)
    np.testing.assert_allclose(tf.norm(x, ord=np.inf, axis=(0, 1)).numpy(), 15.0)
    assert tf.norm(tf.constant([3, -4]), ord=1).numpy() == 7   # integer 1-norm stays int32
    v = tf.Variable(np.array([3.0, -4.0]))
    with tf.GradientTape() as tape:
        y = tf.norm(v)
    np.testing.assert_allclose(tape.gradient(y, v).numpy(), [0.6, -0.8], rtol=1e-12)
    z = tf.Variable([0.0, 0.0])
    with tf.GradientTape() as tape:   # sqrt(sum(x * x)) at 0: NaN, as TF's
        y = tf.norm(z)
    with np.errstate(invalid="ignore"):
        gz = tape.gradient(y, z).numpy()
    assert y.numpy() == 0.0 and np.all(np.isnan(gz))


def test_norm_bad_arguments():
    x = tf.constant(np.ones((2, 3), np.float32))
    for kw in ({"ord": "fro"}, {"ord": "nuc", "axis": (0, 1)}, {"ord": 0}, {"ord": -1}, {"ord": "inf"},
               {"axis": [1]}, {"axis": (1, 1)}, {"axis": (0, 1.5)}):
        with pytest.raises(ValueError):
            tf.norm(x, **kw)
    with pytest.raises(NotImplementedError):   # TF: an SVD; jitgrad has none
        tf.norm(x, ord=2, axis=(0, 1))
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.norm(x, axis=2)
    with tf.Graph().as_default():
        with pytest.raises(ValueError):
            tf.norm(tf.compat.v1.placeholder(tf.float32, [2, 3]), axis=2)


# ---------------------------------------------------------------- variance / std
@graph_modes
@pytest.mark.parametrize("axis,keepdims", [(None, False), (0, False), ((0, 2), True), (-1, True)])
def test_reduce_variance_std(axis, keepdims):
    x = R.normal(size=(3, 4, 2))
    npaxis = axis if not isinstance(axis, list) else tuple(axis)
    check_op(lambda p: tf.math.reduce_variance(p, axis=axis, keepdims=keepdims), x,
             expected=np.var(x, axis=npaxis, keepdims=keepdims), value_rtol=1e-12, value_atol=1e-15)
    check_op(lambda p: tf.math.reduce_std(p, axis=axis, keepdims=keepdims), x,
             expected=np.std(x, axis=npaxis, keepdims=keepdims), value_rtol=1e-12, value_atol=1e-15)


def test_reduce_variance_std_eager():
    x = R.normal(size=(4, 3))
    np.testing.assert_allclose(tf.math.reduce_variance(tf.constant(x), axis=0).numpy(), np.var(x, 0), rtol=1e-12)
    np.testing.assert_allclose(tf.math.reduce_std(x, axis=1, keepdims=True).numpy(),
                               np.std(x, 1, keepdims=True), rtol=1e-12)
    assert tf.math.reduce_variance([1.0, 2.0, 4.0]).dtype == tf.float32
    v = tf.Variable(x)
    with tf.GradientTape(persistent=True) as tape:
        var = tf.math.reduce_variance(v)
        std = tf.math.reduce_std(v, axis=0)
        s = tf.reduce_sum(std)
    d = x - x.mean()
    np.testing.assert_allclose(tape.gradient(var, v).numpy(), 2 * d / x.size, rtol=1e-10)
    dc = x - x.mean(0)
    np.testing.assert_allclose(tape.gradient(s, v).numpy(), dc / (x.shape[0] * np.std(x, 0)), rtol=1e-10)


def test_reduce_variance_integer_input_raises_type_error():
    for fn in (tf.math.reduce_variance, tf.math.reduce_std):
        with pytest.raises(TypeError):
            fn(tf.constant([1, 2]))
        with tf.Graph().as_default():
            with pytest.raises(TypeError):
                fn(tf.compat.v1.placeholder(tf.int32, [2]))


# ---------------------------------------------------------------- l2_normalize
def _np_l2n(x, axis, eps=1e-12):
    return x / np.sqrt(np.maximum(np.sum(x * x, axis=axis, keepdims=True), eps))


@graph_modes
@pytest.mark.parametrize("axis", [None, 1, -1, (0, 1)])
def test_l2_normalize(axis):
    x = R.normal(size=(3, 4))
    check_op(lambda p: tf.math.l2_normalize(p, axis=axis), x, expected=_np_l2n(x, axis), value_rtol=1e-12,
             value_atol=1e-15)
    # below epsilon the norm is clamped: x / sqrt(eps), gradient 1 / sqrt(eps)
    small = np.full((2, 2), 1e-4)
    check_op(lambda p: tf.nn.l2_normalize(p, axis=1, epsilon=1e-3), small, expected=small / np.sqrt(1e-3),
             rtol=1e-5)


def test_l2_normalize_eager():
    x = np.array([[1., -2., 3.], [4., 5., -6.]], np.float32)
    np.testing.assert_allclose(tf.math.l2_normalize(x, axis=1).numpy(), _np_l2n(x, 1), rtol=1e-6)
    np.testing.assert_allclose(tf.nn.l2_normalize(x, dim=1).numpy(), _np_l2n(x, 1), rtol=1e-6)
    np.testing.assert_array_equal(tf.math.l2_normalize(tf.zeros([3])).numpy(), [0.0, 0.0, 0.0])
    v = tf.Variable(np.array([3.0, 4.0]))
    with tf.GradientTape() as tape:
        y = tf.reduce_sum(tf.math.l2_normalize(v) * np.array([1.0, 2.0]))
    u, n = np.array([3.0, 4.0]) / 5.0, 5.0
    w = np.array([1.0, 2.0])
    np.testing.assert_allclose(tape.gradient(y, v).numpy(), (w - u * (u @ w)) / n, rtol=1e-12)
    with pytest.raises(TypeError):   # epsilon 1e-12 is no int32
        tf.math.l2_normalize(tf.constant([3, 4]))


# ---------------------------------------------------------------- pad
PAD_CASES = [("CONSTANT", [[1, 2], [0, 3]]), ("constant", [[0, 0], [2, 0]]), ("REFLECT", [[2, 1], [3, 3]]),
             ("reflect", [[0, 2], [1, 0]]), ("SYMMETRIC", [[3, 3], [4, 1]]), ("Symmetric", [[1, 0], [0, 2]])]


@graph_modes
@pytest.mark.parametrize("mode,paddings", PAD_CASES)
def test_pad(mode, paddings):
    x = R.normal(size=(3, 4))
    kw = {"constant_values": 2.5} if mode.upper() == "CONSTANT" else {}
    want = np.pad(x, paddings, mode=mode.lower(), **kw)
    check_op(lambda p: tf.pad(p, paddings, mode=mode, **kw), x, expected=want)


@graph_modes
def test_pad_3d_and_unknown_dims():
    x = R.normal(size=(2, 3, 2))
    p = np.array([[1, 0], [2, 2], [0, 1]], np.int32)
    check_op(lambda t: tf.pad(t, p), x, expected=np.pad(x, p))
    check_op(lambda t: tf.pad(t, tf.constant(p), mode="SYMMETRIC"), x, expected=np.pad(x, p, mode="symmetric"))
    # constant padding of a tensor whose other dimensions are unknown when the graph is built
    y, out = _run(lambda t: tf.pad(t, [[1, 1], [0, 2]], constant_values=-1.0), x[:, :, 0], shapes=[[None, 3]])
    assert y.shape.as_list() == [None, 5]
    np.testing.assert_array_equal(out, np.pad(x[:, :, 0], [[1, 1], [0, 2]], constant_values=-1.0))
    _, out = _run(lambda t: tf.pad(t, [[1, 1], [0, 2]]), np.zeros((0, 3)), shapes=[[None, 3]])
    np.testing.assert_array_equal(out, np.zeros((2, 5)))


@graph_modes
def test_pad_constant_values_gets_no_gradient():
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float64, [2, 2])
        c = tf.compat.v1.placeholder(tf.float64, [])
        y = tf.pad(x, [[1, 0], [0, 1]], constant_values=c)
        gx, gc = tf.gradients(tf.reduce_sum(y), [x, c])
    assert gc is None   # TF's PadV2 gradient: None for constant_values
    out = session(g).run([y, gx], {x: np.ones((2, 2)), c: 3.0})
    np.testing.assert_array_equal(out[0], np.pad(np.ones((2, 2)), [[1, 0], [0, 1]], constant_values=3.0))
    np.testing.assert_array_equal(out[1], np.ones((2, 2)))


def test_pad_eager():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(tf.pad(x, [[1, 0], [0, 2]], constant_values=7).numpy(),
                                  np.pad(x, [[1, 0], [0, 2]], constant_values=7))
    np.testing.assert_array_equal(tf.pad(tf.constant(x), [[1, 1], [2, 2]], "REFLECT").numpy(),
                                  np.pad(x, [[1, 1], [2, 2]], mode="reflect"))
    assert tf.pad(tf.constant([1, 2]), [[1, 0]]).dtype == tf.int32
    v = tf.Variable(np.array([1.0, 2.0, 3.0]))
    with tf.GradientTape() as tape:
        y = tf.reduce_sum(tf.pad(v, [[2, 2]], mode="REFLECT") * np.arange(1.0, 8.0))
    # padded = [x2, x1, x0, x1, x2, x1, x0] weighted 1..7
    np.testing.assert_allclose(tape.gradient(y, v).numpy(), [3 + 7, 2 + 4 + 6, 1 + 5], rtol=1e-12)


def test_pad_errors():
    x = tf.constant(np.ones((2, 3), np.float32))
    with pytest.raises(ValueError, match="mode"):
        tf.pad(x, [[1, 0], [0, 0]], mode="WRAP")
    for bad in ([[-1, 0], [0, 0]], [[1, 0]], [1, 0, 0, 0], [[1, 0, 1], [0, 0, 0]]):
        with pytest.raises(tf.errors.InvalidArgumentError):
            tf.pad(x, bad)
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.pad(x, [[2, 0], [0, 0]], mode="REFLECT")    # needs pad < dim
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.pad(x, [[3, 0], [0, 0]], mode="SYMMETRIC")  # needs pad <= dim
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.pad(x, [[1, 0], [0, 0]], constant_values=tf.constant([1.0]))
    # TF's MirrorPad checks every axis, an unpadded one too: REFLECT needs 0 < 0 on an empty one
    empty = tf.zeros((2, 0))
    with pytest.raises(tf.errors.InvalidArgumentError, match="0, 0 not less than 0"):
        tf.pad(empty, [[1, 1], [0, 0]], mode="REFLECT")
    assert tf.pad(empty, [[1, 1], [0, 0]], mode="SYMMETRIC").shape == (4, 0)   # 0 <= 0 holds
    with pytest.raises(tf.errors.InvalidArgumentError, match="1, 0 greater than 0"):
        tf.pad(empty, [[0, 0], [1, 0]], mode="SYMMETRIC")
    with pytest.raises(TypeError):
        tf.pad(tf.constant([1, 2]), [[1, 0]], constant_values=1.5)
    with tf.Graph().as_default():
        p = tf.compat.v1.placeholder(tf.float32, [2, 3])
        for bad in ([[-1, 0], [0, 0]], [[1, 0]], [1, 0, 0, 0]):
            with pytest.raises(ValueError):
                tf.pad(p, bad)
        with pytest.raises(ValueError, match="mode"):
            tf.pad(p, [[1, 0], [0, 0]], mode="wrap")


# ---------------------------------------------------------------- reverse
@graph_modes
@pytest.mark.parametrize("axis", [[0], [-1], [0, 2], [2, -3, 1], []])
def test_reverse(axis):
    x = R.normal(size=(2, 3, 4))
    check_op(lambda p: tf.reverse(p, axis), x, expected=np.flip(x, tuple(axis)) if axis else x)


def test_reverse_eager_and_errors():
    x = np.arange(6).reshape(2, 3).astype(np.int32)
    np.testing.assert_array_equal(tf.reverse(x, [1]).numpy(), x[:, ::-1])
    np.testing.assert_array_equal(tf.reverse(tf.constant(x), np.array([-1, 0])).numpy(), x[::-1, ::-1])
    v = tf.Variable(np.array([1.0, 2.0, 3.0]))
    with tf.GradientTape() as tape:
        y = tf.reduce_sum(tf.reverse(v, [0]) * np.array([1.0, 10.0, 100.0]))
    np.testing.assert_array_equal(tape.gradient(y, v).numpy(), [100.0, 10.0, 1.0])
    for bad in ([1, 1], [1, -1], [2], 1):
        with pytest.raises(tf.errors.InvalidArgumentError):
            tf.reverse(x, bad)
    with tf.Graph().as_default():
        p = tf.compat.v1.placeholder(tf.float32, [2, 3])
        for bad in ([1, 1], [2]):
            with pytest.raises(ValueError):
                tf.reverse(p, bad)


# ---------------------------------------------------------------- eye / linspace
@graph_modes
def test_eye_and_linspace_graph():
    y, out = _run(lambda: [tf.eye(3), tf.eye(2, 4, batch_shape=[2], dtype=tf.int32), tf.linalg.eye(0),
                           tf.linspace(0.0, 1.0, 5), tf.linspace(2.0, 3.0, 1), tf.linspace(-1.0, 1.0, 0),
                           tf.linspace(0, 10, 4), tf.compat.v1.lin_space(1.0, 2.0, 3)])
    np.testing.assert_array_equal(out[0], np.eye(3, dtype=np.float32))
    np.testing.assert_array_equal(out[1], np.broadcast_to(np.eye(2, 4, dtype=np.int32), (2, 2, 4)))
    assert out[1].dtype == np.int32 and out[2].shape == (0, 0)
    np.testing.assert_array_equal(out[3], [0.0, 0.25, 0.5, 0.75, 1.0])
    np.testing.assert_array_equal(out[4], [2.0])
    assert out[5].shape == (0,) and out[5].dtype == np.float32
    assert out[6].dtype == np.float64   # TF: an integer start divides with truediv
    np.testing.assert_allclose(out[6], np.linspace(0, 10, 4), rtol=1e-15)
    np.testing.assert_allclose(out[7], [1.0, 1.5, 2.0])


@graph_modes
@pytest.mark.parametrize("num", [1, 2, 7])
def test_linspace_tensor_endpoints_and_gradient(num):
    a, b = np.array(-1.5), np.array(2.25)
    check_op(lambda s, e: tf.linspace(s, e, num), a, b, expected=np.linspace(a, b, num), value_rtol=1e-14,
             value_atol=1e-15)
    s, e = np.array([0.0, 1.0]), np.array([1.0, 3.0])
    check_op(lambda p, q: tf.linspace(p, q, num, axis=-1), s, e, expected=np.linspace(s, e, num, axis=-1),
             value_rtol=1e-14, value_atol=1e-15)


def test_linspace_eager_float32_and_errors():
    # TF: start + i * (stop - start) / (num - 1) in float32; the last value is stop
    got = tf.linspace(0.1, 0.7, 7).numpy()
    start, delta = np.float32(0.1), (np.float32(0.7) - np.float32(0.1)) / np.float32(6)
    want = np.append(start + np.arange(6, dtype=np.float32) * delta, np.float32(0.7))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-7)
    np.testing.assert_allclose(tf.linspace([0.0, 1.0], [1.0, 2.0], 3, axis=-2).numpy(),
                               [[0.0, 1.0], [0.5, 1.5], [1.0, 2.0]])
    with pytest.raises(TypeError):
        tf.linspace(0.0, 1.0, 3.0)
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.linspace(0.0, 1.0, -1)
    np.testing.assert_array_equal(tf.eye(2, 3).numpy(), np.eye(2, 3, dtype=np.float32))
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.eye(-1)
    with pytest.raises(TypeError):
        tf.eye(2.0)
    with tf.Graph().as_default():
        with pytest.raises(ValueError):
            tf.eye(-1)
