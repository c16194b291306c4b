"""tf.math.xlogy / xdivy / xlog1py (ops/xlogy_ops.py): values at TF's special points (0 where x == 0
even for y = 0, inf or NaN), TF's gradients (_XLogyGrad, _XDivyGrad, _XLog1pyGrad), broadcasting,
dtypes and TF's errors, compiled (natively: no fallback) and interpreted; GradientTape in eager."""
import math

import numpy as np
import pytest

import jitgrad as tf
from _graph_testing import check_hessian, check_op, session

# float16 / bfloat16 / complex programs run in the interpreter in every mode (compiler.py: "dtypes
# without a lowering"); the float32 / float64 tests require the native code (no_fallback)
pytestmark = pytest.mark.usefixtures("graph_mode")
native = pytest.mark.usefixtures("no_fallback")

INF, NAN = math.inf, math.nan
# the special points: x == 0 against y = 0, inf, NaN, < 0; NaN x; y = +-inf; y = -1 for log1p
X = [0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, NAN, NAN, 2.0, 0.0, 2.0, -1.0, 1.0, 3.0, 0.5]
Y = [0.0, INF, NAN, -1.0, 0.0, NAN, -1.0, 0.0, 1.0, INF, -INF, -INF, 2.0, -0.0, 0.25, 7.0]


def _log(y):
    """math.log with IEEE's special values (math.log raises at 0 and below)."""
    if math.isnan(y) or y < 0:
        return NAN
    return -INF if y == 0 else math.log(y)


def _div(x, y):
    if y == 0:
        return NAN if x == 0 or math.isnan(x) else math.copysign(INF, x) * math.copysign(1.0, y)
    return x / y


def _mul(a, b):
    if (a == 0 and math.isinf(b)) or (b == 0 and math.isinf(a)):
        return NAN
    return a * b


# Hand rules, element by element (scalar Python, independent of the numpy kernels)
def _xlogy(x, y):
    return 0.0 if x == 0 else _mul(x, _log(y))


def _xdivy(x, y):
    return 0.0 if x == 0 else _div(x, y)


def _log1p(y):
    if math.isnan(y) or y < -1:
        return NAN
    return -INF if y == -1 else INF if y == INF else math.log1p(y)      # log1p(-0) = -0


def _xlog1py(x, y):
    return 0.0 if x == 0 else _mul(x, _log1p(y))


# TF's gradient rules: d/dx = f(1[x != 0], y), d/dy = x / y, -x / y^2, x / (y + 1), each xdivy
GRADS = {
    "xlogy": (_xlogy, lambda x, y: _xlogy(float(x != 0), y), lambda x, y: _xdivy(x, y)),
    "xdivy": (_xdivy, lambda x, y: _xdivy(float(x != 0), y), lambda x, y: _xdivy(-x, _mul(y, y))),
    "xlog1py": (_xlog1py, lambda x, y: _xlog1py(float(x != 0), y), lambda x, y: _xdivy(x, y + 1.0)),
}


def _fn(name):
    return getattr(tf.math, name)


@native
@pytest.mark.parametrize("name", sorted(GRADS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_special_values_and_gradients(name, dtype):
    f, fx, fy = GRADS[name]
    x, y = np.array(X, dtype), np.array(Y, dtype)
    want = [np.array([h(a, b) for a, b in zip(X, Y)], dtype) for h in (f, fx, fy)]
    g = tf.Graph()
    with g.as_default():
        px, py = tf.compat.v1.placeholder(dtype, [len(X)]), tf.compat.v1.placeholder(dtype, [len(X)])
        z = _fn(name)(px, py)
        fetches = [z] + tf.gradients(z, [px, py])
    got = session(g).run(fetches, {px: x, py: y})
    for w, r, what in zip(want, got, ("value", "d/dx", "d/dy")):
        assert r.dtype == dtype
        np.testing.assert_allclose(r, w, rtol=2e-7 if dtype == np.float32 else 1e-15, err_msg=f"{name} {what}")


@native
@pytest.mark.parametrize("name", sorted(GRADS))
def test_broadcast_gradients_match_finite_differences(name):
    rng = np.random.default_rng(7)
    x = rng.uniform(0.2, 2.0, (3, 4))
    # (no zero x here: TF masks d/dx to 0 there, where finite differences see log(y) or 1 / y;
    # test_special_values_and_gradients checks that mask)
    y = rng.uniform(0.5, 3.0, (4,))
    expected = np.array([[GRADS[name][0](a, b) for a, b in zip(row, y)] for row in x])
    check_op(_fn(name), x, y, expected=expected, rtol=1e-6, atol=1e-8, value_rtol=1e-14)


@native
@pytest.mark.parametrize("name", sorted(GRADS))
def test_second_derivative_matches_finite_differences(name):
    check_hessian(lambda v: _fn(name)(v, v + 1.5), np.array([0.5, 1.25, 2.0]))


@pytest.mark.parametrize("dtype", [np.float16, "bfloat16"])
def test_narrow_floats_round_the_float32_value_once(dtype):
    dt = tf.as_dtype(dtype)
    npdt = dt.as_numpy_dtype
    x, y = np.array([0.0, 2.0, 1.5], npdt), np.array([0.0, 3.0, 0.5], npdt)
    g = tf.Graph()
    with g.as_default():
        z = [tf.math.xlogy(tf.constant(x), tf.constant(y)), tf.math.xlog1py(tf.constant(x), tf.constant(y)),
             tf.math.xdivy(tf.constant(x), tf.constant(y))]
    got = session(g).run(z)
    for r, w in zip(got, [[0.0, 2 * math.log(3.0), 1.5 * math.log(0.5)],
                          [0.0, 2 * math.log(4.0), 1.5 * math.log(1.5)], [0.0, 2 / 3, 3.0]]):
        assert r.dtype == npdt
        np.testing.assert_array_equal(r, np.array(w, np.float32).astype(npdt))


def test_complex_values_as_tf():
    # TF: xlogy(1+1j, 2) = (1+1j) log 2; xlogy(0, 0) = 0
    got = session_run(lambda: tf.math.xlogy(tf.constant([1 + 1j, 0j]), tf.constant([2 + 0j, 0j])))
    np.testing.assert_allclose(got, [(1 + 1j) * math.log(2.0), 0j], rtol=1e-15)


def session_run(build):
    g = tf.Graph()
    with g.as_default():
        out = build()
    return session(g).run(out)


def test_integer_and_mixed_dtypes_are_type_errors_as_tf():
    g = tf.Graph()
    with g.as_default():
        with pytest.raises(TypeError):
            tf.math.xlogy(tf.constant([1, 2]), tf.constant([1, 2]))
        with pytest.raises(TypeError):
            tf.math.xdivy(tf.constant([1.0], tf.float32), tf.constant([1.0], tf.float64))
        with pytest.raises(ValueError):
            tf.math.xlog1py(tf.constant([1.0, 2.0]), tf.constant([1.0, 2.0, 3.0]))


@native
def test_empty_inputs():
    got = session_run(lambda: tf.math.xlogy(tf.zeros([0, 3]), tf.ones([3])))
    assert got.shape == (0, 3) and got.dtype == np.float32


def test_eager_values_and_tape_gradients():
    with tf.GradientTape(persistent=True) as t:
        x, y = tf.constant([0.0, 2.0, 1.0]), tf.constant([0.0, 4.0, -0.5])
        t.watch([x, y])
        zs = [tf.math.xlogy(x, y), tf.math.xdivy(x, y), tf.math.xlog1py(x, y)]
    for name, z in zip(("xlogy", "xdivy", "xlog1py"), zs):
        f, fx, fy = GRADS[name]
        pts = list(zip([0.0, 2.0, 1.0], [0.0, 4.0, -0.5]))
        np.testing.assert_allclose(z.numpy(), [f(a, b) for a, b in pts], rtol=1e-6)
        gx, gy = t.gradient(z, [x, y])
        np.testing.assert_allclose(gx.numpy(), [fx(a, b) for a, b in pts], rtol=1e-6)
        np.testing.assert_allclose(gy.numpy(), [fy(a, b) for a, b in pts], rtol=1e-6)
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.math.xlogy(tf.constant([1, 2]), tf.constant([1, 2]))
