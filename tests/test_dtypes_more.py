"""float16 / bfloat16 (storage types computed in float32, as TF's CPU kernels),
int8 / int16 / uint8 (and the other unsigned ints), complex64 / complex128
(issue 17, item 5). Expected values: numpy computing in float32 and rounding
once per op; compiled runs fall back to the interpreter, counted."""
import ml_dtypes
import numpy as np
import pytest

import jitgrad as tf

BF16 = ml_dtypes.bfloat16
X = np.array([0.1, 1.5, -2.25, 3.0e3, 60000.0], np.float32)


def _via_f32(fn, x, storage):
    """One op computed in float32 and rounded to the storage type."""
    with np.errstate(over="ignore"):
        return fn(np.asarray(x, storage).astype(np.float32)).astype(storage)


@pytest.mark.parametrize("dt, storage", [(tf.float16, np.float16), (tf.bfloat16, BF16)])
def test_half_types_compute_in_float32(dt, storage):
    x = tf.constant(X, dt)
    assert x.dtype == dt and x.numpy().dtype == np.dtype(storage)
    xs = np.asarray(X, storage)
    for tf_fn, np_fn in [(tf.exp, np.exp), (lambda t: tf.sqrt(tf.abs(t)), lambda v: np.sqrt(np.abs(v))),
                         (tf.tanh, np.tanh)]:
        got = tf_fn(x).numpy()
        assert got.dtype == np.dtype(storage)
        want = _via_f32(np_fn, xs, storage)
        # a few ops of one rounding each (abs then sqrt): at most one storage ulp apart
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32),
                                   rtol=2 ** -7 if dt == tf.bfloat16 else 2 ** -10)
    np.testing.assert_array_equal((x * x).numpy(), _via_f32(lambda v: v * v, xs, storage))
    np.testing.assert_array_equal((x + 1).numpy(), _via_f32(lambda v: v + 1, xs, storage))
    if dt == tf.float16:
        assert np.isinf((x * x).numpy()[-1])          # 60000^2 overflows float16 (bfloat16 has float32's range)
    np.testing.assert_array_equal(tf.cast(x, tf.float32).numpy(), xs.astype(np.float32))


def test_float16_reduction_and_gradient():
    v = tf.Variable(np.array([1.0, 2.0, 3.0], np.float16))
    with tf.GradientTape() as tape:
        y = tf.reduce_sum(v * v)
    assert y.dtype == tf.float16 and float(y) == 14.0
    g = tape.gradient(y, v)
    assert g.dtype == tf.float16
    np.testing.assert_array_equal(g.numpy(), np.array([2.0, 4.0, 6.0], np.float16))


def test_float16_graph_runs_in_interpreter_counted(graph_mode):
    g = tf.Graph()
    with g.as_default():
        p = tf.compat.v1.placeholder(tf.float16, [3])
        q = tf.exp(p) * 3
    before = tf.cache_info()["fallbacks"]
    xs = np.array([0.5, 1.0, -1.0], np.float16)
    got = tf.compat.v1.Session(graph=g).run(q, {p: xs})
    assert got.dtype == np.float16
    want = (_via_f32(np.exp, xs, np.float16).astype(np.float32) * 3).astype(np.float16)
    np.testing.assert_array_equal(got, want)
    if graph_mode == "compiled":
        assert tf.cache_info()["fallbacks"] == before + 1


def test_float16_in_function():
    @tf.function
    def f(x):
        return x * 2 + 1
    got = f(tf.constant([1.5, 2.0], tf.float16))
    assert got.dtype == tf.float16
    np.testing.assert_array_equal(got.numpy(), np.array([4.0, 5.0], np.float16))


@pytest.mark.parametrize("dt, np_dt", [(tf.int8, np.int8), (tf.int16, np.int16), (tf.uint8, np.uint8),
                                       (tf.uint16, np.uint16), (tf.uint32, np.uint32), (tf.uint64, np.uint64)])
def test_small_and_unsigned_ints(dt, np_dt):
    a = tf.constant([100, 7, 3], dt)
    b = tf.constant([100, 2, 3], dt)
    assert a.dtype == dt and a.numpy().dtype == np.dtype(np_dt)
    av, bv = np.array([100, 7, 3], np_dt), np.array([100, 2, 3], np_dt)
    np.testing.assert_array_equal((a + b).numpy(), av + bv)    # wraps around as TF / numpy
    np.testing.assert_array_equal((a * b).numpy(), av * bv)
    np.testing.assert_array_equal((a // b).numpy(), av // bv)
    np.testing.assert_array_equal(tf.maximum(a, 5).numpy(), np.maximum(av, np_dt(5)))
    q = a / b   # TF: 8/16-bit ints divide in float32, wider ones in float64
    assert q.dtype == (tf.float32 if np.dtype(np_dt).itemsize <= 2 else tf.float64)
    np.testing.assert_array_equal(q.numpy(), av.astype(q.dtype.as_numpy_dtype) / bv.astype(q.dtype.as_numpy_dtype))
    assert dt.min == np.iinfo(np_dt).min and dt.max == np.iinfo(np_dt).max


def test_int_literal_out_of_range():
    """TF 2.21 wraps a Python int that int64 holds into a narrower dtype (300 as int8 is 44);
    beyond int64 (uint64: beyond [0, 2**64)) it is a ValueError."""
    assert tf.constant(300, tf.int8).numpy() == 44
    with pytest.raises(ValueError):
        tf.constant(2 ** 63, tf.int8)
    with pytest.raises(TypeError):
        tf.constant(1.5, tf.uint8)


def test_complex_basics():
    c = tf.constant([1 + 2j, 3 - 1j])
    assert c.dtype == tf.complex128
    cv = np.array([1 + 2j, 3 - 1j])
    np.testing.assert_array_equal((c * c).numpy(), cv * cv)
    np.testing.assert_array_equal((c + 1).numpy(), cv + 1)
    np.testing.assert_array_equal((c / c).numpy(), cv / cv)
    np.testing.assert_array_equal((-c).numpy(), -cv)
    np.testing.assert_array_equal(tf.abs(c).numpy(), np.abs(cv))
    assert tf.abs(c).dtype == tf.float64
    np.testing.assert_array_equal(tf.math.real(c).numpy(), [1.0, 3.0])
    np.testing.assert_array_equal(tf.math.imag(c).numpy(), [2.0, -1.0])
    np.testing.assert_array_equal(tf.math.conj(c).numpy(), np.conj(cv))
    z = tf.complex(tf.constant([1.0, np.inf]), tf.constant([np.inf, -2.0]))
    assert z.dtype == tf.complex64
    np.testing.assert_array_equal(z.numpy(), np.array([complex(1, np.inf), complex(np.inf, -2)], np.complex64))
    np.testing.assert_array_equal(tf.math.real(tf.constant([1.0, 2.0])).numpy(), [1.0, 2.0])
    np.testing.assert_array_equal(tf.math.imag(tf.constant([1.0, 2.0])).numpy(), [0.0, 0.0])
    assert tf.constant(1 + 1j, tf.complex64).dtype == tf.complex64
    with pytest.raises(TypeError):
        tf.constant(1 + 1j, tf.float32)
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.math.erf(c)     # real floats only in TF 2.21 too: an error, never a number


def test_complex_graph_and_gradient(graph_mode):
    g = tf.Graph()
    with g.as_default():
        re = tf.compat.v1.placeholder(tf.float64, [2])
        z = tf.complex(re, re * 2)
        out = tf.abs(z * z)
        grads = tf.gradients(out, [re])
    got, (dre,) = tf.compat.v1.Session(graph=g).run((out, grads), {re: [1.0, 2.0]})
    zv = np.array([1 + 2j, 2 + 4j])
    np.testing.assert_allclose(got, np.abs(zv * zv), rtol=1e-15)
    # |z^2| = |z|^2 = re^2 + (2 re)^2 = 5 re^2: d/dre = 10 re (tests/test_complex_gradients.py has the rest)
    np.testing.assert_allclose(dre, [10.0, 20.0], rtol=1e-14)


def test_dtype_objects():
    assert tf.as_dtype("half") == tf.float16 and tf.half == tf.float16 and tf.double == tf.float64
    assert tf.complex64.is_complex and tf.complex64.real_dtype == tf.float32
    assert tf.bfloat16.is_floating and tf.uint8.is_unsigned and not tf.int8.is_unsigned
    assert tf.float16.max == 65504.0
    assert tf.as_dtype(np.uint8) == tf.uint8 and tf.as_dtype(complex) == tf.complex128


def test_non_native_constants_in_graphs(graph_mode):
    g = tf.Graph()
    with g.as_default():
        c = tf.constant([1 + 2j]) * 2
        h = tf.constant([1.5], tf.bfloat16) * 2
        i = tf.constant([100], tf.int8) + 100      # wraps as int8 arithmetic does
    got = tf.compat.v1.Session(graph=g).run([c, h, i])
    np.testing.assert_array_equal(got[0], [2 + 4j])
    assert got[1].dtype == np.dtype(BF16) and float(got[1][0]) == 3.0
    np.testing.assert_array_equal(got[2], np.array([100], np.int8) + np.int8(100))


def test_bfloat16_is_floating_everywhere():
    # bfloat16's numpy kind is "V": the tape, Round, argmax and float->int checks must still see a float
    x = tf.Variable(np.array([1.0, 2.0], BF16))
    with tf.GradientTape() as tape:
        y = tf.reduce_sum(x * x)
    g = tape.gradient(y, x)
    assert g.dtype == tf.bfloat16 and g.numpy().astype(np.float32).tolist() == [2.0, 4.0]
    assert tf.round(tf.constant([1.4, 2.6], tf.bfloat16)).numpy().astype(np.float32).tolist() == [1.0, 3.0]
    assert int(tf.argmax(tf.constant([1.0, 3.0, 2.0], tf.bfloat16))) == 1
    with pytest.raises(TypeError):
        tf.constant(np.array([1.5], BF16), tf.int32)     # a fraction cannot become an int
