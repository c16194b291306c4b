"""Behaviour of the eager fast paths (convert_all / apply_op / execute / the
infer cache / the errstate shortcut): results and errors must be exactly what
the general path gives."""
import warnings

import numpy as np
import pytest

import jitgrad as tf
from jitgrad import convert, eager
from jitgrad.errors import InvalidArgumentError


def _slow_convert(values):
    """The general conversion path (what convert_all did before the fast path)."""
    dtype = None
    for v in values:
        if isinstance(v, eager.EagerTensor):
            dtype = v.dtype
            break
    return [v if isinstance(v, eager.EagerTensor) else
            (convert.convert_to_tensor(v, dtype=dtype) if dtype is not None else convert.convert_to_tensor(v))
            for v in values]


def _same(a, b):
    assert type(a) is type(b)
    assert a.dtype == b.dtype and a._value.dtype == b._value.dtype
    assert a.shape == b.shape
    np.testing.assert_array_equal(a._value, b._value)


@pytest.mark.parametrize("tdtype", [np.float32, np.float64, np.int32, np.int64, np.bool_])
@pytest.mark.parametrize("scalar", [2.0, -1.5, 0.0, 3, -7, 0, 2**31 - 1, -2**31, 2**31, 2**40, True, False,
                                    1e39, -1e39, float("inf"), float("nan"), 1e300])
def test_scalar_conversion_matches_general_path(tdtype, scalar):
    t = tf.constant(np.ones((3,), tdtype))
    for values in ([t, scalar], [scalar, t]):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                want = _slow_convert(values)
        except Exception as e:  # noqa: BLE001 - the fast path must raise the same
            with pytest.raises(type(e)):
                with warnings.catch_warnings():
                    warnings.simplefilter("error")
                    convert.convert_all(values)
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = convert.convert_all(values)
        assert len(got) == 2
        for g, w in zip(got, want):
            _same(g, w)


def test_python_scalar_rules_in_binary_ops():
    f = tf.constant([1.0, 2.0])
    i = tf.constant([1, 2])
    assert (f * 2).dtype == tf.float32 and (2 * f).dtype == tf.float32
    assert (i * 2).dtype == tf.int32
    assert (tf.constant(np.array([1, 2], np.int64)) * 3).dtype == tf.int64
    assert (tf.constant(np.array([1.0], np.float64)) + 0.1)._value[0] == np.float64(1.0) + 0.1
    with pytest.raises(TypeError):
        i * 2.5
    assert (f + True).numpy().tolist() == [2.0, 3.0]       # TF 2.21: a Python bool adds as 1.0
    np.testing.assert_array_equal((f * 1e39).numpy(), np.array([np.inf, np.inf], np.float32))


def test_dtype_and_shape_mismatch_still_raise_every_time():
    a = tf.constant(np.ones((4,), np.float32))
    b = tf.constant(np.ones((4,), np.int32))
    c = tf.constant(np.ones((3,), np.float32))
    for _ in range(3):  # also once the accepted signatures are cached
        _same(a + a, tf.constant(np.full((4,), 2, np.float32)))
        with pytest.raises(InvalidArgumentError):
            a + b
        with pytest.raises(InvalidArgumentError):
            a * c
        with pytest.raises(InvalidArgumentError):
            tf.exp(b)


def test_results_identical_to_numpy():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 3)).astype(np.float32)
    y = rng.standard_normal((3,)).astype(np.float32)
    tx, ty = tf.constant(x), tf.constant(y)
    for _ in range(2):
        np.testing.assert_array_equal((tx + ty).numpy(), x + y)
        np.testing.assert_array_equal((tx * ty).numpy(), x * y)
        np.testing.assert_array_equal((tx - 1.5).numpy(), x - np.float32(1.5))
        np.testing.assert_array_equal(tf.exp(tx).numpy(), np.exp(x))
        # (float32 tanh is the correctly rounded one, which numpy's float32 loop is not always)
        np.testing.assert_array_equal(tf.tanh(tx).numpy(), np.tanh(x.astype(np.float64)).astype(np.float32))
        np.testing.assert_array_equal(tf.reduce_sum(tx, axis=0).numpy(), x.sum(axis=0))
        np.testing.assert_array_equal(tf.reduce_sum(tx, axis=1, keepdims=True).numpy(),
                                      x.sum(axis=1, keepdims=True))
        assert tf.reduce_sum(tx, axis=1, keepdims=True).shape == (5, 1)


def test_errstate_kernels_ignore_and_restore_numpy_state():
    big = tf.constant(np.array([100.0, -1.0, 0.0], np.float32))
    old = np.seterr(all="raise")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            e = tf.exp(big).numpy()
            lg = tf.math.log(big).numpy() if hasattr(tf, "math") else tf.log(big).numpy()
        assert np.isinf(e[0]) and np.isnan(lg[1]) and np.isneginf(lg[2])
        assert np.geterr()["over"] == "raise"  # the caller's state is back
        with pytest.raises(FloatingPointError):
            np.exp(np.float32(100.0))
    finally:
        np.seterr(**old)
    with np.errstate(over="warn"):
        tf.exp(big)
        assert np.geterr()["over"] == "warn"


def test_eager_tensors_inside_graph_building_take_graph_path():
    a = tf.constant(np.ones((2,), np.float32))
    g = tf.Graph()
    with g.as_default():
        out = a + a
        assert not isinstance(out, eager.EagerTensor)
        assert out.graph is g
        out2 = tf.exp(a)
        assert not isinstance(out2, eager.EagerTensor)
    assert isinstance(a + a, eager.EagerTensor)


def test_tape_still_records_fast_path_ops():
    x = tf.constant(3.0)
    with tf.GradientTape() as t:
        t.watch(x)
        y = x * x + tf.exp(x) * 2.0
    g = t.gradient(y, x)
    np.testing.assert_allclose(g.numpy(), 6.0 + 2.0 * np.exp(np.float32(3.0)), rtol=1e-6)
    # no tape: nothing recorded, ops still work
    assert not eager.op_recorders
    assert float(x * x) == 9.0


def test_variables_mix_with_fast_path():
    v = tf.Variable(np.array([1.0, 2.0], np.float32))
    a = tf.constant(np.array([3.0, 4.0], np.float32))
    np.testing.assert_array_equal((v * a).numpy(), [3.0, 8.0])
    np.testing.assert_array_equal((a * v).numpy(), [3.0, 8.0])
    np.testing.assert_array_equal((v * 2).numpy(), [2.0, 4.0])


def test_infer_cache_keyed_by_attrs():
    x = tf.constant(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert tf.cast(x, tf.int32).dtype == tf.int32
    assert tf.cast(x, tf.float64).dtype == tf.float64
    assert tf.cast(x, tf.int32).dtype == tf.int32
    assert tf.reduce_sum(x, axis=0).shape == (3,)
    assert tf.reduce_sum(x, axis=1).shape == (2,)
