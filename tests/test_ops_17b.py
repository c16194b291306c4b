"""More ops (issue 17, item 4): boolean_mask, where(condition), linalg.diag /
diag_part, slice, cumprod, py_function / numpy_function, TensorArray,
tf.types.experimental. Values from numpy, gradients from finite differences
or by hand, in eager, graph (both Session modes) and function modes."""
import numpy as np
import pytest

import jitgrad as tf

X = np.arange(12, dtype=np.float32).reshape(3, 4) - 5.0


def _graph_run(build, feeds=None):
    g = tf.Graph()
    with g.as_default():
        phs = {k: tf.compat.v1.placeholder(tf.as_dtype(v.dtype), v.shape, name=k) for k, v in (feeds or {}).items()}
        outs = build(**phs)
    with tf.compat.v1.Session(graph=g) as sess:
        return sess.run(outs, {phs[k]: v for k, v in (feeds or {}).items()})


# ---------------------------------------------------------------- boolean_mask / where
MASK_ROWS = np.array([True, False, True])
MASK_2D = X > 0


def test_boolean_mask_eager():
    np.testing.assert_array_equal(tf.boolean_mask(X, MASK_ROWS).numpy(), X[MASK_ROWS])
    np.testing.assert_array_equal(tf.boolean_mask(X, MASK_2D).numpy(), X[MASK_2D])
    cols = np.array([True, False, False, True])
    np.testing.assert_array_equal(tf.boolean_mask(X, cols, axis=1).numpy(), X[:, cols])
    np.testing.assert_array_equal(tf.boolean_mask(X, list(MASK_ROWS)).numpy(), X[MASK_ROWS])


def test_boolean_mask_gradient_eager():
    x = tf.Variable(X)
    w = np.arange(1, 1 + int(MASK_2D.sum()), dtype=np.float32)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.boolean_mask(x, MASK_2D) * w)
    expected = np.zeros_like(X)
    expected[MASK_2D] = w      # d/dx of sum(x[mask] * w): w at the kept places, 0 elsewhere
    np.testing.assert_array_equal(tape.gradient(loss, x).numpy(), expected)


def test_boolean_mask_graph(graph_mode):
    def build(x, m):
        y = tf.boolean_mask(x, m)
        assert y.shape.as_list() == [None, 4]
        return [y, tf.gradients(tf.reduce_sum(y * y), [x])[0]]
    y, gx = _graph_run(build, {"x": X, "m": MASK_ROWS})
    np.testing.assert_array_equal(y, X[MASK_ROWS])
    np.testing.assert_array_equal(gx, np.where(MASK_ROWS[:, None], 2 * X, 0))


def test_boolean_mask_errors():
    with pytest.raises(ValueError):
        tf.boolean_mask(X, [True, False])
    with pytest.raises(ValueError):
        tf.boolean_mask(X, True)


def test_where_one_argument(graph_mode):
    c = np.array([[True, False], [False, True], [True, True]])
    np.testing.assert_array_equal(tf.where(c).numpy(), np.argwhere(c))
    assert tf.where(c).dtype == tf.int64
    np.testing.assert_array_equal(tf.where(np.array([0.0, 2.0, -1.0])).numpy(), [[1], [2]])
    (got,) = _graph_run(lambda c: [tf.where(c)], {"c": c})
    np.testing.assert_array_equal(got, np.argwhere(c))
    with pytest.raises(ValueError):
        tf.where(c, x=1.0)


# ---------------------------------------------------------------- diag / diag_part / slice
def test_diag_and_diag_part(graph_mode):
    v = np.array([[1.0, -2.0, np.inf], [np.nan, 0.5, 3.0]], np.float32)
    d = tf.linalg.diag(v).numpy()
    expected = np.zeros((2, 3, 3), np.float32)
    for b in range(2):
        expected[b][np.diag_indices(3)] = v[b]
    np.testing.assert_array_equal(d, expected)   # inf / nan stay on the diagonal, zeros elsewhere
    m = np.arange(24, dtype=np.float64).reshape(2, 3, 4)
    np.testing.assert_array_equal(tf.linalg.diag_part(m).numpy(), np.diagonal(m, axis1=-2, axis2=-1))
    np.testing.assert_array_equal(tf.linalg.diag_part(m[0].T).numpy(), np.diagonal(m[0].T))
    d2, p2 = _graph_run(lambda v, m: [tf.linalg.diag(v), tf.linalg.diag_part(m)], {"v": v, "m": m})
    np.testing.assert_array_equal(d2, expected)
    np.testing.assert_array_equal(p2, np.diagonal(m, axis1=-2, axis2=-1))


def test_diag_gradients():
    v = tf.Variable([1.0, 2.0, 3.0])
    m = tf.Variable(X[:, :3])
    with tf.GradientTape(persistent=True) as tape:
        a = tf.reduce_sum(tf.linalg.diag(v) * np.arange(9, dtype=np.float32).reshape(3, 3))
        b = tf.reduce_sum(tf.linalg.diag_part(m) * [1.0, 10.0, 100.0])
    np.testing.assert_array_equal(tape.gradient(a, v).numpy(), [0.0, 4.0, 8.0])
    np.testing.assert_array_equal(tape.gradient(b, m).numpy(), np.diag([1.0, 10.0, 100.0]))


def test_slice(graph_mode):
    np.testing.assert_array_equal(tf.slice(X, [1, 0], [2, 3]).numpy(), X[1:3, 0:3])
    np.testing.assert_array_equal(tf.slice(X, [0, 2], [-1, -1]).numpy(), X[0:, 2:])
    (got,) = _graph_run(lambda x: [tf.slice(x, tf.constant([1, 1]), [1, 2])], {"x": X})
    np.testing.assert_array_equal(got, X[1:2, 1:3])
    with pytest.raises((ValueError, tf.errors.InvalidArgumentError)):
        tf.slice(X, [0, 0], [4, 1])
    with pytest.raises((ValueError, tf.errors.InvalidArgumentError)):
        tf.slice(X, [0], [1])


# ---------------------------------------------------------------- cumprod
@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_cumprod_values(axis, exclusive, reverse, graph_mode):
    x = (np.arange(12, dtype=np.float32).reshape(3, 4) - 4.0) / 3.0

    def ref(a):
        a = np.flip(a, axis) if reverse else a
        out = np.cumprod(a, axis=axis, dtype=a.dtype)
        if exclusive:
            out = np.concatenate([np.ones_like(np.take(out, [0], axis=axis)),
                                  np.take(out, range(a.shape[axis] - 1), axis=axis)], axis=axis)
        return np.flip(out, axis) if reverse else out
    (got,) = _graph_run(lambda x: [tf.math.cumprod(x, axis=axis, exclusive=exclusive, reverse=reverse)], {"x": x})
    np.testing.assert_array_equal(got, ref(x))    # the compiled scan multiplies in numpy's order: bit-identical
    np.testing.assert_array_equal(tf.math.cumprod(x, axis, exclusive, reverse).numpy(), ref(x))


def test_cumprod_compiles_natively():
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float64, [5])
        y = tf.math.cumprod(x)
    before = tf.cache_info()["fallbacks"]
    sess = tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto(jitgrad_mode="compiled"))
    np.testing.assert_array_equal(sess.run(y, {x: [1.0, 2.0, np.nan, 4.0, 5.0]}),
                                  np.cumprod([1.0, 2.0, np.nan, 4.0, 5.0]))
    assert tf.cache_info()["fallbacks"] == before


def test_cumprod_gradient():
    x0 = np.array([1.5, -2.0, 0.5, 3.0])
    w = np.array([1.0, -1.0, 2.0, 0.5])
    x = tf.Variable(x0)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.math.cumprod(x) * w)
    eps, fd = 1e-6, np.zeros(4)
    for i in range(4):
        e = np.eye(4)[i] * eps
        fd[i] = (np.sum(np.cumprod(x0 + e) * w) - np.sum(np.cumprod(x0 - e) * w)) / (2 * eps)
    np.testing.assert_allclose(tape.gradient(loss, x).numpy(), fd, rtol=1e-6)


# ---------------------------------------------------------------- py_function / numpy_function
def test_py_function_eager_is_differentiable():
    x = tf.Variable(3.0)
    with tf.GradientTape() as tape:
        y = tf.py_function(lambda a: a * a, [x], tf.float32)
    assert y.numpy() == 9.0 and tape.gradient(y, x).numpy() == 6.0


def test_py_function_graph_and_function(graph_mode):
    calls = []

    def f(a, b):
        calls.append(type(a).__name__)
        return a.numpy() * 2 + b.numpy(), np.int32(len(calls))
    y, n = _graph_run(lambda x: tf.py_function(f, [x, 1.0], [tf.float32, tf.int32]), {"x": X})
    np.testing.assert_array_equal(y, X * 2 + 1)
    assert n == 1 and calls == ["EagerTensor"]

    @tf.function
    def h(x):
        return tf.py_function(lambda a: a + 1, [x], tf.float32) * 3
    np.testing.assert_array_equal(h(tf.constant([1.0, 2.0])).numpy(), [6.0, 9.0])
    np.testing.assert_array_equal(h(tf.constant([0.0, 1.0])).numpy(), [3.0, 6.0])   # runs on every call


def test_numpy_function():
    seen = []

    def f(a):
        seen.append(type(a))
        return np.sort(a)
    np.testing.assert_array_equal(tf.numpy_function(f, [tf.constant([3, 1, 2])], tf.int32).numpy(), [1, 2, 3])
    assert seen == [np.ndarray]


def test_scalar_result_keeps_rank_0(graph_mode):
    # TF 2.21: tf.py_function(lambda: np.float32(1), [], tf.float32).shape == () (eager and graph);
    # a returned scalar came back with shape [1]
    assert tf.py_function(lambda: np.float32(1), [], tf.float32).numpy().shape == ()
    g = tf.Graph()
    with g.as_default():
        y = tf.numpy_function(lambda: np.float64(2), [], tf.float64)
    assert np.shape(tf.compat.v1.Session(graph=g).run(y)) == ()


# ---------------------------------------------------------------- TensorArray
def test_tensor_array_eager():
    ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
    for i in range(4):
        ta = ta.write(i, tf.constant([1.0, 2.0]) * i)
    np.testing.assert_array_equal(ta.stack().numpy(), np.outer(np.arange(4), [1.0, 2.0]))
    assert int(ta.size()) == 4 and ta.read(2).numpy().tolist() == [2.0, 4.0]
    # the read cleared row 2 (clear_after_read): TF 2.21 concatenates zeros there
    np.testing.assert_array_equal(ta.concat().numpy(), [0.0, 0.0, 1.0, 2.0, 0.0, 0.0, 3.0, 6.0])
    np.testing.assert_array_equal(ta.gather([3, 0]).numpy(), [[3.0, 6.0], [0.0, 0.0]])
    fixed = tf.TensorArray(tf.int32, size=2)
    with pytest.raises(tf.errors.OutOfRangeError):
        fixed.write(2, 1)
    with pytest.raises(tf.errors.InvalidArgumentError):
        fixed.write(0, 1.5 * tf.ones([]))     # float into an int32 array
    un = tf.TensorArray(tf.float32, size=3).unstack(tf.constant([[1.0], [2.0], [3.0]]))
    assert un.read(1).numpy().tolist() == [2.0]


def test_tensor_array_element_shape_and_gradient():
    ta = tf.TensorArray(tf.float32, size=3, element_shape=[2])
    ta = ta.write(1, [5.0, 6.0])
    np.testing.assert_array_equal(ta.stack().numpy(), [[0, 0], [5, 6], [0, 0]])   # unwritten: zeros, as TF
    with pytest.raises(ValueError):
        ta.write(0, [1.0, 2.0, 3.0])
    x = tf.Variable(2.0)
    with tf.GradientTape() as tape:
        acc = tf.TensorArray(tf.float32, size=3)
        for i in range(3):
            acc = acc.write(i, x ** (i + 1))
        total = tf.reduce_sum(acc.stack())
    assert tape.gradient(total, x).numpy() == 1 + 2 * 2.0 + 3 * 4.0


def test_tensor_array_in_function_and_graph(graph_mode):
    @tf.function
    def squares(x):
        ta = tf.TensorArray(tf.float32, size=3)
        for i in range(3):
            ta = ta.write(i, x * float(i))
        return ta.stack()
    np.testing.assert_array_equal(squares(tf.constant([1.0, 2.0])).numpy(), [[0, 0], [1, 2], [2, 4]])
    (got,) = _graph_run(lambda x: [tf.TensorArray(tf.float32, size=2).write(0, x).write(1, x + 1).stack()],
                        {"x": X[0]})
    np.testing.assert_array_equal(got, np.stack([X[0], X[0] + 1]))


def test_types_experimental():
    import typing
    assert isinstance(tf.constant(1.0), typing.get_args(tf.types.experimental.TensorLike))

    @tf.function
    def f(x):
        return x
    assert isinstance(f, tf.types.experimental.GenericFunction)
    assert isinstance(f.get_concrete_function(tf.constant(1.0)), tf.types.experimental.ConcreteFunction)


def test_py_function_side_effect_runs_in_function():
    seen = []

    @tf.function
    def f(x):
        tf.py_function(lambda a: seen.append(float(a)), [x], [])      # no outputs, result unused
        unused = tf.py_function(lambda a: seen.append(-float(a)) or a, [x], tf.float32)  # noqa: F841
        return x + 1
    assert float(f(tf.constant(1.0))) == 2.0
    assert float(f(tf.constant(5.0))) == 6.0
    assert sorted(seen) == [-5.0, -1.0, 1.0, 5.0]     # both ran on each call, as TF's automatic control deps
