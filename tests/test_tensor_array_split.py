"""tf.TensorArray.split(value, lengths): the row blocks of ``value`` become the elements.
Eager, graph (interpreted and compiled, no fallback) and inside jitgrad.function. Expected
values are numpy slices of the value; gradients are derived by hand (d/dx of sum(w * x**2)
is 2 w x) and checked against central differences; messages and error types are TF
2.21's for the same programs (written down when this was built)."""
import numpy as np
import pytest

import jitgrad as tf
from _graph_testing import numeric_grad

tf1 = tf.compat.v1
IAE = tf.errors.InvalidArgumentError
V = np.arange(12.0, dtype=np.float32).reshape(6, 2)
BLOCKS = [V[0:1], V[1:3], V[3:6]]        # lengths [1, 2, 3]
C = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)


# ------------------------------------------------------------------ eager
def test_eager_split_reads_concat_size():
    ta = tf.TensorArray(tf.float32, size=3, clear_after_read=False).split(tf.constant(V), [1, 2, 3])
    for k in range(3):
        np.testing.assert_array_equal(ta.read(k).numpy(), BLOCKS[k])
    np.testing.assert_array_equal(ta.concat().numpy(), V)
    assert int(ta.size()) == 3
    grown = tf.TensorArray(tf.float32, size=0, dynamic_size=True).split(V, tf.constant([2, 4]))
    assert int(grown.size()) == 2
    np.testing.assert_array_equal(grown.read(1).numpy(), V[2:6])


def test_eager_split_of_equal_lengths_stacks():
    ta = tf.TensorArray(tf.float32, size=3, element_shape=[2, 2]).split(V, [2, 2, 2])
    np.testing.assert_array_equal(ta.stack().numpy(), V.reshape(3, 2, 2))


@pytest.mark.parametrize("make, lengths, value, message", [
    (lambda: tf.TensorArray(tf.float32, size=3), [1, 2, 2], V,
     "Expected sum of lengths to be equal to values.shape[0], but sum of lengths is 5 and value's shape is: [6, 2]"),
    (lambda: tf.TensorArray(tf.float32, size=2), [1, 2, 3], V,
     "TensorArray's size is not equal to the size of lengths (2 vs. 3), and the TensorArray is not marked as "
     "dynamically resizeable."),
    (lambda: tf.TensorArray(tf.float32, size=3), [[1, 2, 3]], V, "Expected lengths to be a vector, received shape: "
                                                                 "[1, 3]"),
    (lambda: tf.TensorArray(tf.float32, size=3), [1, 2, 3], np.float32(1.0),
     "Expected value to be at least a vector, but received shape: []"),
])
def test_eager_split_errors(make, lengths, value, message):
    with pytest.raises(IAE) as e:
        make().split(value, lengths)
    assert message in e.value.message


def test_eager_read_clears_a_block():
    """TF's eager array clears what it reads (clear_after_read, the default): a concat after
    it needs zeros of an element shape a split does not set, a ValueError in TF 2.21."""
    ta = tf.TensorArray(tf.float32, size=3).split(tf.constant(V), [1, 2, 3])
    np.testing.assert_array_equal(ta.read(1).numpy(), BLOCKS[1])
    with pytest.raises(ValueError, match="partially known TensorShape"):
        ta.concat()


def test_eager_gradient_through_blocks():
    x = tf.Variable(V)
    with tf.GradientTape() as tape:
        ta = tf.TensorArray(tf.float32, size=3, clear_after_read=False).split(x * x, [1, 2, 3])
        y = tf.reduce_sum(ta.read(1) * C) + tf.reduce_sum(ta.concat())
    w = np.ones_like(V)
    w[1:3] += C
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), 2 * w * V)


# ------------------------------------------------------------------ graph
def _graph_run(build, feeds, lengths_shape=(3,)):
    """build(value, lengths) -> fetches in a fresh graph (value: [None, 2] fed, lengths fed);
    one session runs each (value, lengths) of feeds: results, or the InvalidArgumentError."""
    with tf.Graph().as_default():
        p = tf1.placeholder(tf.float32, [None, 2])
        lens = tf1.placeholder(tf.int32, list(lengths_shape))
        out = build(p, lens)
        got = []
        with tf1.Session() as s:
            for v, n in feeds:
                try:
                    got.append(s.run(out, {p: v, lens: n}))
                except IAE as e:
                    got.append(e)
        return got


def _blocks(v, lengths):
    ends = np.cumsum(lengths)
    return [v[e - n:e] for e, n in zip(ends, lengths)]


@pytest.mark.usefixtures("no_fallback")
def test_graph_split_of_fed_lengths_reads_and_concat(graph_mode):
    def build(p, lens):
        ta = tf.TensorArray(tf.float32, size=3).split(p, lens)
        return [ta.read(0), ta.read(1), ta.read(2), ta.concat(), ta.size()]

    for lengths, got in zip(([1, 2, 3], [3, 0, 3]), _graph_run(build, [(V, [1, 2, 3]), (V, [3, 0, 3])])):
        for k, block in enumerate(_blocks(V, lengths)):
            np.testing.assert_array_equal(got[k], block)
        np.testing.assert_array_equal(got[3], V)
        assert got[4] == 3


@pytest.mark.usefixtures("no_fallback")
def test_graph_gradient_matches_hand_derivation_and_differences(graph_mode):
    with tf.Graph().as_default():
        p = tf1.placeholder(tf.float64, [None, 2])
        lens = tf1.placeholder(tf.int32, [3])
        ta = tf.TensorArray(tf.float64, size=3).split(p * p, lens)
        y = tf.reduce_sum(ta.read(1) * C.astype(np.float64)) + tf.reduce_sum(ta.concat())
        g = tf.gradients(y, p)[0]
        with tf1.Session() as s:
            v = V.astype(np.float64)
            got = s.run(g, {p: v, lens: [1, 2, 3]})
            numeric = numeric_grad(lambda x: s.run(y, {p: x, lens: [1, 2, 3]}), v)
    w = np.ones_like(v)
    w[1:3] += C
    np.testing.assert_allclose(got, 2 * w * v, rtol=1e-12)
    np.testing.assert_allclose(got, numeric, rtol=1e-6, atol=1e-6)


@pytest.mark.usefixtures("no_fallback")
def test_graph_split_of_static_lengths_keeps_block_shapes(graph_mode):
    def build(p, lens):
        ta = tf.TensorArray(tf.float32, size=3).split(p, [2, 2, 2])
        assert ta.read(1).shape.as_list() == [2, 2]
        assert ta.element_shape.as_list() == [2, 2]     # TF: equal lengths give the element shape
        return ta.stack()

    ok, short = _graph_run(build, [(V, [0, 0, 0]), (V[:5], [0, 0, 0])])
    np.testing.assert_array_equal(ok, V.reshape(3, 2, 2))
    assert isinstance(short, IAE) and "Attempting to slice [4, 6] from tensor with length 5" in short.message


@pytest.mark.usefixtures("no_fallback")
def test_graph_lengths_are_checked_when_the_graph_runs(graph_mode):
    def build(p, lens):
        return tf.TensorArray(tf.float32, size=3).split(p, lens).concat()

    short, long_, negative, ok = _graph_run(build, [(V, [1, 2, 2]), (V, [1, 2, 4]), (V, [-1, 4, 3]),
                                                    (V, [6, 0, 0])])
    assert isinstance(short, IAE) and "Unused values in tensor. Length of tensor: 6 Values used: 5" in short.message
    assert isinstance(long_, IAE) and "Attempting to slice [3, 7] from tensor with length 6" in long_.message
    assert isinstance(negative, IAE) and "Invalid value in lengths: -1" in negative.message
    np.testing.assert_array_equal(ok, V)


def test_graph_build_time_errors():
    with tf.Graph().as_default():
        p = tf1.placeholder(tf.float32, [None, 2])
        with pytest.raises(ValueError, match="Inconsistent shapes: saw \\(2, 2\\) but expected \\(2, 3\\)"):
            tf.TensorArray(tf.float32, size=3, element_shape=[2, 3]).split(p, [2, 2, 2])
        with pytest.raises(ValueError, match="Dimension 1 in both shapes must be equal, but are 2 and 3"):
            tf.TensorArray(tf.float32, size=3, element_shape=[None, 3]).split(p, tf1.placeholder(tf.int32, [3]))
        with pytest.raises(ValueError, match="Shape must be at least rank 1 but is rank 0"):
            tf.TensorArray(tf.float32, size=3).split(tf.reduce_sum(p), [1, 2, 3])
        with pytest.raises(ValueError, match="Shape must be rank 1 but is rank 2"):
            tf.TensorArray(tf.float32, size=3).split(p, tf1.placeholder(tf.int32, [1, 3]))


def test_graph_split_into_a_fed_size_array(graph_mode):
    def build(p, n):
        ta = tf.TensorArray(tf.float32, size=n[0]).split(p, [2, 2, 2])
        return [ta.stack(), ta.read(1), ta.size(), tf.gradients(tf.reduce_sum(ta.read(2) ** 2), p)[0]]

    (got,) = _graph_run(build, [(V, [3])], lengths_shape=(1,))
    np.testing.assert_array_equal(got[0], V.reshape(3, 2, 2))
    np.testing.assert_array_equal(got[1], V[2:4])
    assert got[2] == 3
    np.testing.assert_array_equal(got[3], np.where(np.arange(6)[:, None] >= 4, 2 * V, 0))


# ------------------------------------------------------------------ jitgrad.function
def test_function_split_then_staged_loop_reads():
    @tf.function
    def f(x, lens):
        ta = tf.TensorArray(tf.float32, size=3).split(x, lens)
        acc = tf.zeros([2, 2])
        staged = tf.TensorArray(tf.float32, size=3).split(x, [2, 2, 2])
        for i in tf.range(3):
            acc += staged.read(i) * tf.cast(i + 1, tf.float32)
        return ta.read(2), acc

    before = tf.cache_info()["fallbacks"]
    last, acc = f(tf.constant(V), tf.constant([1, 2, 3]))
    assert tf.cache_info()["fallbacks"] == before
    np.testing.assert_array_equal(last.numpy(), V[3:6])
    blocks = V.reshape(3, 2, 2)
    np.testing.assert_array_equal(acc.numpy(), blocks[0] + 2 * blocks[1] + 3 * blocks[2])
    with pytest.raises(IAE, match="Unused values in tensor. Length of tensor: 6 Values used: 5"):
        f(tf.constant(V), tf.constant([1, 2, 2]))
