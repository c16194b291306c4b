"""argmax/argmin, floor/ceil/round, is_nan/is_inf/is_finite, reduce_any/all,
range, split and cumsum: values against numpy (TF's semantics), static shapes
and dtypes, gradients against finite differences, in both Session modes."""
import numpy as np
import pytest

import jitgrad as tf
from _graph_testing import check_op, session

pytestmark = pytest.mark.usefixtures("graph_mode")

R = np.random.default_rng(11)
SPECIAL = np.array([[0.5, 1.5, 2.5, -0.5], [-1.5, 2.7, np.nan, np.inf], [-np.inf, -2.5, 3.49, -0.0]])


def _run(fn, *inputs):
    g = tf.Graph()
    with g.as_default():
        xs = [tf.compat.v1.placeholder(tf.as_dtype(a.dtype), a.shape) for a in inputs]
        y = fn(*xs)
    return y, session(g).run(y, dict(zip(xs, inputs)))


# ---------------------------------------------------------------- argmax / argmin
@pytest.mark.parametrize("fn,ref", [(tf.math.argmax, np.argmax), (tf.math.argmin, np.argmin)])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_argmax_argmin(fn, ref, axis):
    x = R.integers(0, 4, (3, 5)).astype(np.float32)  # ties: the first index wins, as in TF
    check_op(lambda p: fn(p, axis=axis), x, expected=ref(x, axis=0 if axis is None else axis).astype(np.int64),
             grad=False)


def tf_arg_ref(x, axis, kind):
    """TF's CPU ArgMax/ArgMin (Eigen's ArgMaxTupleReducer), as a plain loop: the
    best starts at (index 0, lowest()) -- -FLT_MAX for float32, not -inf -- and
    an element replaces it only if strictly greater (argmin: smaller, from
    highest()). So NaN never wins and ties keep the first index."""
    x = np.moveaxis(np.asarray(x), axis, -1)
    if x.dtype.kind == "f":
        start = np.finfo(x.dtype).min if kind == "max" else np.finfo(x.dtype).max
    elif x.dtype.kind == "b":
        start = kind != "max"
    else:
        start = np.iinfo(x.dtype).min if kind == "max" else np.iinfo(x.dtype).max
    out = np.zeros(x.shape[:-1], np.int64)
    for idx in np.ndindex(*x.shape[:-1]):
        best, best_i = start, 0
        for k, v in enumerate(x[idx]):
            if (v > best) if kind == "max" else (v < best):
                best, best_i = v, k
        out[idx] = best_i
    return out


def test_argmax_argmin_nan_inf_follow_tf():
    # Each row checked against TF 2.21 (tf.argmax / tf.argmin, CPU):
    # [nan,1,2] -> max 2 / min 1; [nan,nan] -> 0 / 0; [-inf,nan] -> 0 / 0; [nan,-inf,5] -> 2 / 1;
    # [-inf,-inf] -> 0 / 0; [inf,inf] -> 0 / 0; [nan,inf] -> 1 / 0; [1,nan,3] -> 2 / 0;
    # [3,nan,1] -> 0 / 2; [-FLT_MAX,-inf] -> 0 / 1; [-inf,-FLT_MAX] -> 0 / 0 in float32 but
    # argmax 1 in float64 (the start is -DBL_MAX there); [nan,-FLT_MAX] -> 0 / 1 (float64: 1 / 1);
    # [inf,FLT_MAX,nan] -> 0 / 0 (float64: 0 / 1). Rows are padded to 3 with nan / -inf.
    nan, inf, fmax = np.nan, np.inf, float(np.finfo(np.float32).max)
    rows = [[nan, 1, 2], [nan, nan, nan], [-inf, nan, nan], [nan, -inf, 5], [-inf, -inf, -inf],
            [inf, inf, inf], [nan, inf, nan], [1, nan, 3], [3, nan, 1], [-fmax, -inf, -inf],
            [-inf, -fmax, -inf], [nan, -fmax, nan], [-0.0, 0.0, -0.0], [inf, fmax, nan], [fmax, inf, nan]]
    want = {np.float32: ([2, 0, 0, 2, 0, 0, 1, 2, 0, 0, 0, 0, 0, 0, 1], [1, 0, 0, 1, 0, 0, 0, 0, 2, 1, 0, 1, 0, 0, 0]),
            np.float64: ([2, 0, 0, 2, 0, 0, 1, 2, 0, 0, 1, 1, 0, 0, 1], [1, 0, 0, 1, 0, 0, 0, 0, 2, 1, 0, 1, 0, 1, 0])}
    for dt, (amax, amin) in want.items():
        x = np.array(rows, dt)
        np.testing.assert_array_equal(tf_arg_ref(x, 1, "max"), amax)
        np.testing.assert_array_equal(tf_arg_ref(x, 1, "min"), amin)
        _, out = _run(lambda p: [tf.argmax(p, 1), tf.argmin(p, 1), tf.argmax(p, 0), tf.argmin(p, -2)], x)
        np.testing.assert_array_equal(out[0], amax)
        np.testing.assert_array_equal(out[1], amin)
        np.testing.assert_array_equal(out[2], [5, 5, 5])   # TF, both dtypes
        np.testing.assert_array_equal(out[3], [2, 3, 4])
        np.testing.assert_array_equal(tf_arg_ref(x, 0, "max"), [5, 5, 5])
        np.testing.assert_array_equal(tf_arg_ref(x, 0, "min"), [2, 3, 4])
        np.testing.assert_array_equal(tf.argmax(tf.constant(x), 1).numpy(), amax)   # eager
    # ints and bools: extremes and ties keep index 0 (TF: argmax([INT_MIN, INT_MIN]) = 0)
    i32 = np.array([[-2**31, -2**31], [2**31 - 1, 2**31 - 1], [3, 7]], np.int32)
    _, out = _run(lambda p: [tf.argmax(p, 1), tf.argmin(p, 1)], i32)
    np.testing.assert_array_equal(out[0], [0, 0, 1])
    np.testing.assert_array_equal(out[1], [0, 0, 0])
    b = np.array([[False, False, False], [False, True, True], [True, True, True]])
    _, out = _run(lambda p: [tf.argmax(p, 1), tf.argmin(p, 1)], b)
    np.testing.assert_array_equal(out[0], [0, 1, 0])
    np.testing.assert_array_equal(out[1], [0, 0, 0])


def test_argmax_output_type_and_dtypes():
    x = np.array([[1, 7, 7], [9, 2, 3]], np.int32)
    check_op(lambda p: tf.argmax(p, 1, output_type=tf.int32), x, expected=np.array([1, 0], np.int32))
    check_op(lambda p: tf.argmin(p, 0), np.array([True, False, True]), expected=np.int64(1))
    with pytest.raises(tf.errors.InvalidArgumentError):  # eager, as TF
        tf.argmax(tf.constant([1.0, 2.0]), axis=1)
    with tf.Graph().as_default(), pytest.raises(ValueError):  # graph construction, as TF
        tf.argmax(tf.constant([1.0, 2.0]), axis=1)
    with pytest.raises(TypeError):
        tf.argmax([1.0], output_type=tf.float32)


def test_argmax_has_no_gradient():
    x = tf.constant([[1.0, 3.0], [2.0, 0.0]])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = tf.cast(tf.argmax(x, axis=1), tf.float32)
    assert tape.gradient(y, x) is None
    g = tf.Graph()
    with g.as_default():
        p = tf.compat.v1.placeholder(tf.float32, (2, 2))
        assert tf.gradients(tf.cast(tf.argmin(p), tf.float32), p) == [None]


# ---------------------------------------------------------------- rounding / classification
@pytest.mark.parametrize("fn,ref", [
    (tf.math.floor, np.floor), (tf.math.ceil, np.ceil),
    (tf.math.round, np.rint),  # half to even: 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, -2.5 -> -2
])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rounding(fn, ref, dtype):
    x = SPECIAL.astype(dtype)
    y, _ = check_op(fn, x, expected=ref(x), grad=False)
    assert np.array_equal(np.signbit(y), np.signbit(ref(x)))
    big = R.uniform(-50, 50, (4, 33)).astype(dtype)  # > one vector width in the compiled kernel
    check_op(fn, big, expected=ref(big), grad=False)


def test_round_known_values_and_ints():
    check_op(tf.round, np.array([0.5, 1.5, 2.5, -0.5, -1.5, 2.7]),
             expected=np.array([0.0, 2.0, 2.0, -0.0, -2.0, 3.0]), grad=False)
    check_op(tf.round, np.array([1, -2, 3], np.int64), expected=np.array([1, -2, 3], np.int64))
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.floor(tf.constant([1, 2]))
    with tf.Graph().as_default(), pytest.raises(TypeError):
        tf.floor(tf.constant([1, 2]))


@pytest.mark.parametrize("fn,ref", [(tf.math.is_nan, np.isnan), (tf.math.is_inf, np.isinf),
                                    (tf.math.is_finite, np.isfinite)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float_classification(fn, ref, dtype):
    x = np.tile(SPECIAL, (1, 9)).astype(dtype)
    check_op(fn, x, expected=ref(x), grad=False)
    with tf.Graph().as_default(), pytest.raises(TypeError):
        fn(tf.constant([1, 2]))


def test_rounding_and_classification_have_no_gradient():
    x = tf.constant([0.3, 1.7])
    for fn in (tf.floor, tf.math.ceil, tf.round):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = fn(x) * x
        # only the direct path through `* x` contributes: d(f(x) * x) = f(x)
        np.testing.assert_allclose(tape.gradient(y, x).numpy(), fn(x).numpy())
    g = tf.Graph()
    with g.as_default():
        p = tf.compat.v1.placeholder(tf.float64, (3,))
        assert tf.gradients(tf.floor(p), p) == [None]
        assert tf.gradients(tf.cast(tf.math.is_nan(p), tf.float64), p) == [None]


def test_floor_used_in_a_differentiable_graph():
    x = R.uniform(0.1, 0.9, (2, 3)) + np.arange(3)  # away from the integers: floor is locally constant
    check_op(lambda p: p * tf.floor(p) + tf.math.ceil(p) * p * p, x,
             expected=x * np.floor(x) + np.ceil(x) * x * x, value_rtol=1e-12, rtol=1e-6)


# ---------------------------------------------------------------- reduce_any / reduce_all
@pytest.mark.parametrize("fn,ref", [(tf.reduce_any, np.any), (tf.reduce_all, np.all)])
@pytest.mark.parametrize("axis,keepdims", [(None, False), (0, False), (1, True), ((0, 2), False), (-1, True)])
def test_reduce_any_all(fn, ref, axis, keepdims):
    x = R.uniform(size=(3, 4, 2)) < 0.6
    x[0] = True
    x[1, :, 0] = False
    check_op(lambda p: fn(p, axis=axis, keepdims=keepdims), x, expected=ref(x, axis=axis, keepdims=keepdims))


def test_reduce_any_all_need_bool():
    with pytest.raises(TypeError):
        tf.reduce_any([1, 0])
    assert tf.math.reduce_all([True, False]).numpy() == np.False_
    assert tf.reduce_any(tf.constant(np.zeros((0,), bool))).numpy() == np.False_
    assert tf.reduce_all(tf.constant(np.zeros((0,), bool))).numpy() == np.True_


# ---------------------------------------------------------------- range
@pytest.mark.parametrize("args,kwargs,expected", [
    ((5,), {}, np.arange(5, dtype=np.int32)),
    ((1.0, 5), {}, np.arange(1, 5, dtype=np.float32)),
    ((0, 5, 2.0), {}, np.array([0, 2, 4], np.float32)),
    ((5,), {"dtype": tf.float32}, np.arange(5, dtype=np.float32)),
    ((5, 1, -1), {}, np.array([5, 4, 3, 2], np.int32)),
    ((np.int64(3),), {}, np.arange(3, dtype=np.int64)),
    ((0.5, 2, 0.3), {"dtype": tf.float64}, 0.5 + np.arange(5) * 0.3),
    ((0.0, 1.0, 0.1), {}, np.float32(0) + np.arange(10).astype(np.float32) * np.float32(0.1)),
    ((3, 3), {}, np.zeros((0,), np.int32)),
    ((0, 10, 3), {}, np.array([0, 3, 6, 9], np.int32)),
])
def test_range(args, kwargs, expected):
    v = tf.range(*args, **kwargs)
    assert v.dtype == tf.as_dtype(expected.dtype)
    np.testing.assert_array_equal(v.numpy(), expected)
    g = tf.Graph()
    with g.as_default():
        t = tf.range(*args, **kwargs)
        assert t.shape.as_list() == list(expected.shape)
        y = t * 2
    np.testing.assert_array_equal(session(g).run(y), expected * 2)


def test_range_errors_and_tensor_args():
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.range(0, 5, 0)
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.range(5, 1)
    np.testing.assert_array_equal(tf.range(tf.constant(4, tf.int64)).numpy(), np.arange(4, dtype=np.int64))
    # half types when asked for, as TF (they raised TypeError); never inferred, and no small ints
    for dt in (tf.float16, tf.bfloat16):
        r = tf.range(0.5, 2, 0.25, dtype=dt)
        assert r.dtype == dt
        np.testing.assert_array_equal(r.numpy().astype(np.float64), np.arange(0.5, 2, 0.25))
    with pytest.raises(TypeError):
        tf.range(3, dtype=tf.uint8)


# ---------------------------------------------------------------- split
@pytest.mark.parametrize("splits,axis", [(2, 0), (3, 1), ([1, 2, 3], 1), ([2, -1], -1), ([4, 0], 0), (1, 0)])
def test_split(splits, axis):
    x = R.normal(size=(4, 6))
    ax = axis % 2
    if isinstance(splits, int):
        ref = np.split(x, splits, axis=ax)
    else:
        sizes = list(splits)
        if -1 in sizes:
            sizes[sizes.index(-1)] = x.shape[ax] - sum(s for s in sizes if s != -1)
        ref = np.split(x, np.cumsum(sizes)[:-1], axis=ax)
    k = len(ref)
    # combine the pieces with different weights so every piece's gradient is checked
    y, _ = check_op(lambda p: tf.concat([piece * float(i + 1) for i, piece in enumerate(tf.split(p, splits, axis))],
                                        axis),
                    x, expected=np.concatenate([r * (i + 1) for i, r in enumerate(ref)], ax))
    g = tf.Graph()
    with g.as_default():
        pieces = tf.split(tf.constant(x), splits, axis=axis)
        assert len(pieces) == k
        assert [p.shape.as_list() for p in pieces] == [list(r.shape) for r in ref]
    for got, want in zip(session(g).run(pieces), ref):
        np.testing.assert_array_equal(got, want)


def test_split_errors():
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.split(tf.range(5), 2)
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.split(tf.range(5), [2, 2])
    g = tf.Graph()
    with g.as_default():
        with pytest.raises(ValueError):
            tf.split(tf.range(5), 2)
        with pytest.raises(ValueError):
            tf.split(tf.range(5), [-1, -1])


# ---------------------------------------------------------------- cumsum
def _np_cumsum(x, axis, exclusive, reverse):
    if reverse:
        x = np.flip(x, axis)
    out = np.cumsum(x, axis=axis)
    if exclusive:
        out = out - x
    return np.flip(out, axis) if reverse else out


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
def test_cumsum(axis, exclusive, reverse):
    x = R.normal(size=(3, 4))
    check_op(lambda p: tf.math.cumsum(p, axis=axis, exclusive=exclusive, reverse=reverse), x,
             expected=_np_cumsum(x, axis, exclusive, reverse), value_rtol=1e-12, value_atol=1e-12)


def test_cumsum_ints_and_known_values():
    check_op(lambda p: tf.cumsum(p, exclusive=True, reverse=True), np.array([1, 2, 3], np.int32),
             expected=np.array([5, 3, 0], np.int32))
    check_op(lambda p: tf.math.cumsum(p, axis=1, reverse=True), np.array([[1.0, 2], [3, 4]], np.float32),
             expected=np.array([[3.0, 2], [7, 4]], np.float32), grad=False)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cumsum_sums_from_positive_zero(dtype, graph_mode):
    # TF 2.21's scan starts at +0.0: cumsum([-0., -0., 1.]) is [0., 0., 1.], and so on reversed
    from _graph_testing import run_graph
    x = np.array([[-0.0, -0.0, 1.0], [-0.0, 2.0, -0.0]], dtype)
    got = run_graph(lambda p: [tf.cumsum(p, axis=1), tf.cumsum(p, axis=1, reverse=True),
                               tf.cumsum(p, axis=0, exclusive=True)], [x], graph_mode)
    for g, want in zip(got, ([[0, 0, 1], [0, 2, 2]], [[1, 1, 1], [2, 2, 0]], [[0, 0, 0], [0, 0, 1]])):
        np.testing.assert_array_equal(g, np.array(want, dtype))
        assert not np.signbit(g).any()


def test_cumsum_eager_gradient():
    x = tf.constant(np.arange(6.0).reshape(2, 3))
    w = np.array([[1.0, 2, 3], [4, 5, 6]])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = tf.reduce_sum(tf.math.cumsum(x, axis=1, exclusive=True) * tf.constant(w))
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), _np_cumsum(w, 1, True, True))


# ---------------------------------------------------------------- compiled mode: lowered or not
def test_elementwise_ops_are_lowered():
    tf.set_default_mode("compiled")  # about the compiler whatever the module's mode (restored by conftest)
    tf.clear_cache()
    x = np.tile(SPECIAL, (1, 5))
    fns = [tf.floor, tf.math.ceil, tf.round, tf.math.is_nan, tf.math.is_inf, tf.math.is_finite]
    refs = [np.floor, np.ceil, np.rint, np.isnan, np.isinf, np.isfinite]
    ys, out = _run(lambda p: [f(p) for f in fns], x)
    for got, ref in zip(out, refs):
        np.testing.assert_array_equal(got, ref(x))
    assert tf.cache_info()["fallbacks"] == 0


def _rev_exclusive_cumsum(x):
    rc = np.flip(np.cumsum(np.flip(x, 1), 1, dtype=x.dtype), 1)   # no x - x: NaN stays where it is
    return np.concatenate([rc[:, 1:], np.zeros_like(rc[:, :1])], 1)


def test_argmax_any_all_cumsum_prod_grad_are_lowered():
    # These used to fall back to the interpreter; now they compile (values
    # bit-identical to the reference kernels, see tests/test_differential.py).
    tf.set_default_mode("compiled")
    tf.clear_cache()
    x = np.tile(SPECIAL, (1, 3)).astype(np.float32)
    x = np.where(np.isfinite(x), x, 0.0).astype(np.float32)
    x[0, 2] = np.nan
    x[1, :4] = 0.0
    fns = [lambda p: tf.argmax(p, 1), lambda p: tf.argmin(p, 0, output_type=tf.int32),
           lambda p: tf.reduce_any(p > 2.0, 1), lambda p: tf.reduce_all(p > -3.0, 0, keepdims=True),
           lambda p: tf.math.cumsum(p, 1, exclusive=True, reverse=True),
           lambda p: tf.gradients(tf.reduce_sum(tf.reduce_prod(p, 1)), p)[0]]
    refs = [tf_arg_ref(x, 1, "max"), tf_arg_ref(x, 0, "min").astype(np.int32), np.any(x > 2.0, 1),
            np.all(x > -3.0, 0, keepdims=True), _rev_exclusive_cumsum(x),
            np.stack([[np.prod(np.delete(r, j)) for j in range(len(r))] for r in x])]
    _, out = _run(lambda p: [f(p) for f in fns], x)
    for got, ref in zip(out, refs):
        np.testing.assert_allclose(got, ref, rtol=1e-6)
        assert got.dtype == ref.dtype
    assert tf.cache_info()["fallbacks"] == 0


def test_concat_axis_forms():
    """A constant tensor or numpy axis works; a float or vector axis is TF's TypeError /
    ValueError; an axis known only at run time is a clear NotImplementedError (it was a
    Python TypeError from int(Tensor))."""
    a = tf.constant([[1.0, 2.0]])
    np.testing.assert_array_equal(tf.concat([a, a], tf.constant(1)).numpy(), [[1, 2, 1, 2]])
    assert tf.concat([a, a], np.int64(0)).shape == (2, 2)
    with pytest.raises(TypeError):
        tf.concat([a, a], 1.0)
    with pytest.raises(ValueError):
        tf.concat([a, a], [1])
    with tf.Graph().as_default():
        with pytest.raises(NotImplementedError, match="axis known"):
            tf.concat([tf.constant([1.0]), tf.constant([2.0])], tf.compat.v1.placeholder(tf.int32, []))
