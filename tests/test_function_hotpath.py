"""A jitgrad.function's steady-state call (issue 13, W5): a call whose arguments are all
EagerTensors finds its trace by shape and dtype alone and calls the Session's runner
directly.  These check that the short cut returns what the full path returns: fresh
values every call, a captured variable's current value, a retrace or the general path
for anything the trace or runner was not made for."""
import numpy as np
import pytest

import jitgrad as tf

MODES = ["compiled", "interpret"]


def _uses_runner(fn, *args):
    """True when the call's trace has a Session runner filed under the key it looks up."""
    c = fn.get_concrete_function(*args)
    return c._run_key in c._session._fast


@pytest.mark.parametrize("mode", MODES)
def test_jacobian_of_tanh_matvec_every_call(mode):
    tf.set_default_mode(mode)
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((8, 8)) / 4).astype(np.float32)
    W = tf.constant(w)

    @tf.function
    def jac(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.tanh(tf.linalg.matmul(W, tf.reshape(x, [8, 1]))[:, 0])
        return tape.jacobian(y, x)

    for i in range(5):   # past the second call, when the runner is installed
        xv = rng.standard_normal(8).astype(np.float32)
        t = np.tanh(w.astype(np.float64) @ xv)
        expected = (1 - t * t)[:, None] * w          # d tanh(Wx)_i / dx_j by hand
        got = jac(tf.constant(xv))
        assert isinstance(got, type(tf.constant(0.)))
        assert got.dtype == tf.float32 and got.shape == (8, 8)
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5, atol=1e-6)
    assert jac.experimental_get_tracing_count() == 1
    assert _uses_runner(jac, tf.constant(xv)) == (mode == "compiled")


@pytest.mark.parametrize("mode", MODES)
def test_captured_variable_change_is_seen(mode):
    tf.set_default_mode(mode)
    v = tf.Variable(np.array([1., 2., 3.], np.float32))

    @tf.function
    def f(x):
        return x * v

    x = tf.constant(np.array([2., -1., 0.5], np.float32))
    for _ in range(3):
        np.testing.assert_array_equal(f(x).numpy(), [2., -2., 1.5])
    v.assign([4., 5., 6.])
    np.testing.assert_array_equal(f(x).numpy(), [8., -5., 3.])
    v.assign_add([1., 1., 1.])
    np.testing.assert_array_equal(f(x).numpy(), [10., -6., 3.5])
    assert f.experimental_get_tracing_count() == 1


@pytest.mark.parametrize("mode", MODES)
def test_new_shape_or_dtype_retraces_after_the_short_cut(mode):
    tf.set_default_mode(mode)

    @tf.function
    def f(x):
        return x * 2 + 1

    a = tf.constant(np.array([1., 2.], np.float32))
    for _ in range(3):
        np.testing.assert_array_equal(f(a).numpy(), [3., 5.])
    b = f(tf.constant(np.array([1., 2., 3.], np.float32)))
    np.testing.assert_array_equal(b.numpy(), [3., 5., 7.])
    c = f(tf.constant(np.array([1, 2], np.int32)))
    assert c.dtype == tf.int32
    np.testing.assert_array_equal(c.numpy(), [3, 5])
    d = f(tf.constant(np.array([1., 2.], np.float64)))
    assert d.dtype == tf.float64
    assert f.experimental_get_tracing_count() == 4
    np.testing.assert_array_equal(f(a).numpy(), [3., 5.])   # the first trace, still
    assert f.experimental_get_tracing_count() == 4


@pytest.mark.parametrize("mode", MODES)
def test_non_contiguous_value_takes_the_general_path(mode):
    tf.set_default_mode(mode)

    @tf.function
    def f(x):
        return tf.reduce_sum(x * x)

    for _ in range(3):
        assert f(tf.constant(np.array([1., 2., 3.], np.float32))).numpy() == 14.
    # an eager tensor viewing every other element: the runner refuses it (its data pointer
    # would not address the elements), Session.run copies it and the sum is right
    base = np.array([1., 9., 2., 9., 4., 9.], np.float32)
    view = type(tf.constant(0.))(base[::2])
    assert not view._value.flags.c_contiguous
    assert f(view).numpy() == 21.
    assert f.experimental_get_tracing_count() == 1


@pytest.mark.parametrize("mode", MODES)
def test_python_values_keyword_and_numpy_arguments_keep_the_full_key(mode):
    tf.set_default_mode(mode)

    @tf.function
    def f(x, k=1.):
        return x * k

    x = tf.constant(np.array([1., 2.], np.float32))
    for _ in range(3):
        np.testing.assert_array_equal(f(x, 2.).numpy(), [2., 4.])
    np.testing.assert_array_equal(f(x, 3.).numpy(), [3., 6.])          # Python value: by value
    np.testing.assert_array_equal(f(x=x, k=5.).numpy(), [5., 10.])
    np.testing.assert_array_equal(f(np.array([1., 2.], np.float32)).numpy(), [1., 2.])
    np.testing.assert_array_equal(f(x).numpy(), [1., 2.])
    np.testing.assert_array_equal(f(x, 2.).numpy(), [2., 4.])
    assert f.experimental_get_tracing_count() == 4   # as TF 2.x: (x, 2.), (x, 3.), (x=, k=), (x)


@pytest.mark.parametrize("mode", MODES)
def test_relaxed_trace_serves_exact_shapes_through_the_short_cut(mode):
    tf.set_default_mode(mode)

    @tf.function
    def f(x):
        return tf.reduce_sum(x) * 2.

    f.get_concrete_function(tf.TensorSpec([None], tf.float32))
    for n in (3, 5, 3, 5, 3):
        x = tf.constant(np.arange(n, dtype=np.float32))
        assert f(x).numpy() == n * (n - 1)
    assert f.experimental_get_tracing_count() == 1


@pytest.mark.parametrize("mode", MODES)
def test_wrong_argument_count_still_raises(mode):
    tf.set_default_mode(mode)

    @tf.function
    def f(x):
        return x + 1.

    x = tf.constant(np.array([1.], np.float32))
    for _ in range(3):
        f(x)
    with pytest.raises(TypeError):
        f(x, x)


def test_open_tape_and_run_functions_eagerly_still_bypass_the_trace():
    calls = []

    @tf.function
    def f(x):
        calls.append(1)          # runs at trace time, and on every eager call
        return x * x

    x = tf.constant(np.array([1., 3.], np.float32))
    for _ in range(3):
        f(x)
    assert len(calls) == 1
    with tf.GradientTape() as tape:   # an outer tape must see the ops: run eagerly
        tape.watch(x)
        y = f(x)
    np.testing.assert_array_equal(tape.gradient(y, x).numpy(), [2., 6.])
    assert len(calls) == 2
    tf.config.run_functions_eagerly(True)
    try:
        np.testing.assert_array_equal(f(x).numpy(), [1., 9.])
        assert len(calls) == 3
    finally:
        tf.config.run_functions_eagerly(False)
    f(x)
    assert len(calls) == 3


@pytest.mark.parametrize("mode", MODES)
def test_two_tensor_arguments_keyed_by_both(mode):
    tf.set_default_mode(mode)

    @tf.function
    def f(a, b):
        return tf.reduce_sum(a) - 2. * tf.reduce_sum(b)

    two = tf.constant(np.array([1., 2.], np.float32))
    three = tf.constant(np.array([10., 20., 30.], np.float32))
    for _ in range(3):
        assert f(two, three).numpy() == 3. - 120.
        assert f(three, two).numpy() == 60. - 6.
    assert f.experimental_get_tracing_count() == 2
    assert f(two, two).numpy() == -3.
    assert f.experimental_get_tracing_count() == 3


def test_equal_dtypes_share_a_trace_and_unsupported_ones_still_raise():
    E = type(tf.constant(0.))

    @tf.function
    def g(x):
        return x + 1

    # 'l' and 'q' are distinct numpy dtype objects for one int64 (equal, same .str)
    for _ in range(3):
        np.testing.assert_array_equal(g(E(np.array([1, 2], "l"))).numpy(), [2, 3])
        np.testing.assert_array_equal(g(E(np.array([1, 2], "q"))).numpy(), [2, 3])
    assert g.experimental_get_tracing_count() == 1
    with pytest.raises(TypeError):    # a byte-swapped float32 has no jitgrad dtype
        g(E(np.array([1., 2.], ">f4")))
    assert g.experimental_get_tracing_count() == 1


@pytest.mark.parametrize("mode", MODES)
def test_captured_variable_of_unknown_shape_given_a_new_shape(mode):
    """A variable made with shape=None may be assigned a value of another shape: the
    runner the short cut calls checks each captured variable's shape and the call
    takes the general path (TF: no retrace, the new value is read)."""
    tf.set_default_mode(mode)
    v = tf.Variable(np.ones(3, np.float32), shape=tf.TensorShape(None))

    @tf.function
    def f(x):
        return x * tf.reduce_sum(v)

    x = tf.constant(np.float32(2.0))
    for _ in range(3):
        assert f(x).numpy() == 6.0
    v.assign(np.arange(5, dtype=np.float32))       # 0 + 1 + 2 + 3 + 4 = 10
    for _ in range(3):
        assert f(x).numpy() == 20.0
    assert f.experimental_get_tracing_count() == 1
