"""tf.TensorArray written inside a loop that AutoGraph stages as a tf.while_loop (the
tf.function guide's "Accumulating values in a loop"), and indexing a tensor with a
run-time scalar (a staged loop's counter). Expected values are numpy's."""
import numpy as np
import pytest

import jitgrad as tf


def _run_compiled(fn, *args):
    before = tf.cache_info()["fallbacks"]
    out = fn(*args)
    assert tf.cache_info()["fallbacks"] == before, "a run fell back to the interpreter"
    return out


def test_guide_dynamic_rnn_accumulates_states():
    def rnn_step(inp, state):
        return inp + state

    @tf.function
    def dynamic_rnn(rnn_step, input_data, initial_state):
        input_data = tf.transpose(input_data, [1, 0, 2])     # [batch, time, features] -> [time, batch, features]
        max_seq_len = input_data.shape[0]
        states = tf.TensorArray(tf.float32, size=max_seq_len)
        state = initial_state
        for i in tf.range(max_seq_len):
            state = rnn_step(input_data[i], state)
            states = states.write(i, state)
        return tf.transpose(states.stack(), [1, 0, 2])

    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    out = _run_compiled(dynamic_rnn, rnn_step, tf.constant(x), tf.zeros([2, 4]))
    np.testing.assert_allclose(out.numpy(), np.cumsum(x, axis=1), rtol=1e-6)


def test_write_read_size_in_a_loop_over_a_runtime_length():
    @tf.function
    def f(x):
        ta = tf.TensorArray(tf.float32, size=4)
        for i in tf.range(tf.shape(x)[0]):        # trip count known only at run time
            ta = ta.write(i, x[i] * 2.)
        return ta.stack(), ta.read(1), ta.size()

    stacked, second, size = _run_compiled(f, tf.constant([1., 2., 3., 4.]))
    np.testing.assert_array_equal(stacked.numpy(), [2., 4., 6., 8.])
    assert second.numpy() == 4.0 and size.numpy() == 4


def test_unwritten_rows_are_zeros_and_element_shape_is_learned():
    @tf.function
    def f(n):
        ta = tf.TensorArray(tf.int32, size=5)
        for i in tf.range(n):
            ta = ta.write(i, tf.fill([2], i * i))
        return ta.stack()

    np.testing.assert_array_equal(f(tf.constant(3)).numpy(), [[0, 0], [1, 1], [4, 4], [0, 0], [0, 0]])


def test_write_out_of_range_fails_at_run_time():
    @tf.function
    def f(n):
        ta = tf.TensorArray(tf.float32, size=2)
        for i in tf.range(n):
            ta = ta.write(i, tf.cast(i, tf.float32))
        return ta.stack()

    np.testing.assert_array_equal(f(tf.constant(2)).numpy(), [0., 1.])
    with pytest.raises(tf.errors.InvalidArgumentError):
        f(tf.constant(3))


def test_gradient_flows_through_the_staged_array():
    @tf.function
    def f(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            ta = tf.TensorArray(tf.float32, size=3)
            for i in tf.range(3):
                ta = ta.write(i, x[i] * x[i])
            loss = tf.reduce_sum(ta.stack() * tf.constant([1., 2., 3.]))
        return tape.gradient(loss, x)

    x = np.array([0.5, -1.0, 2.0], np.float32)
    np.testing.assert_allclose(f(tf.constant(x)).numpy(), 2 * x * np.array([1., 2., 3.]), rtol=1e-6)


def test_python_loop_keeps_the_list_tensor_array():
    @tf.function
    def f(x):
        ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
        for i in range(3):                       # unrolled: indices are Python ints
            ta = ta.write(i, x + i)
        return ta.stack()

    np.testing.assert_array_equal(f(tf.constant(1.)).numpy(), [1., 2., 3.])


# ---------------------------------------------------------------- x[i] with a run-time i
def test_index_with_runtime_scalars_including_negative():
    @tf.function
    def f(x, i, j):
        return x[i], x[:, j], x[i, j], x[-1]

    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    a, b, c, d = _run_compiled(f, tf.constant(x), tf.constant(1), tf.constant(-1))
    np.testing.assert_array_equal(a.numpy(), x[1])
    np.testing.assert_array_equal(b.numpy(), x[:, -1])
    assert c.numpy() == x[1, -1]
    np.testing.assert_array_equal(d.numpy(), x[-1])


def test_runtime_index_out_of_range_fails_and_gradient_is_a_scatter():
    @tf.function
    def f(x, i):
        return x[i]

    with pytest.raises(tf.errors.InvalidArgumentError):
        f(tf.constant([1., 2.]), tf.constant(5))

    @tf.function
    def g(x, i):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = x[i] * 3.
        return tape.gradient(y, x)

    np.testing.assert_array_equal(g(tf.constant([1., 2., 3.]), tf.constant(-2)).numpy(), [0., 3., 0.])


@tf.function
def _append_scalars(n):
    ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
    for i in tf.range(n):
        ta = ta.write(ta.size(), tf.cast(i, tf.float32))
    return ta.stack()


@tf.function
def _append_rows(n):
    ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
    for _ in tf.range(n):
        ta = ta.write(ta.size(), [1.0, 2.0])
    return ta.stack()


def test_append_at_size_before_the_first_write():
    """ta.write(ta.size(), x) -- TF's append idiom -- asks the size of a dynamic array
    not written yet whose element shape is still unknown: its initial size (it raised
    "has not been written and its element shape is not fully defined")."""
    np.testing.assert_array_equal(_append_scalars(tf.constant(3)).numpy(), [0.0, 1.0, 2.0])
    np.testing.assert_array_equal(_append_rows(tf.constant(2)).numpy(), [[1.0, 2.0], [1.0, 2.0]])
    empty = _append_rows(tf.constant(0))
    assert empty.shape == (0, 2)
    g = tf.Graph()
    with g.as_default():
        n = tf.compat.v1.placeholder(tf.int32, [])
        ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
        _, ta = tf.while_loop(lambda i, t: i < n,
                              lambda i, t: (i + 1, t.write(t.size(), tf.cast(i, tf.float32) * 2.0)), (0, ta))
        out = ta.stack()
    np.testing.assert_array_equal(tf.compat.v1.Session(graph=g).run(out, {n: 3}), [0.0, 2.0, 4.0])


def test_map_fn_rows_of_different_shapes_fail_as_tf():
    """map_fn whose fn returns rows of different lengths: TF's TensorListStack fails
    (InvalidArgumentError); in a tf.function the ragged stack numpy keeps as objects reached
    the caller as "ValueError: setting an array element with a sequence"."""
    ragged = tf.function(lambda e: tf.reduce_sum(tf.map_fn(lambda r: tf.range(r), e)))
    for lengths in ([1, 2, 3], [1, 1, 2]):
        with pytest.raises(tf.errors.InvalidArgumentError):
            ragged(tf.constant(lengths))
    assert int(ragged(tf.constant([2, 2]))) == 2


def test_empty_eager_tensor_array_of_unknown_element_shape_stacks_empty():
    """TF 2's eager TensorArray of size 0 stacks to an empty tensor of its dtype (it raised)."""
    empty = tf.TensorArray(tf.float32, size=0).stack()
    assert empty.dtype == tf.float32 and empty.shape == (0,)
