"""TF's conversion of Python literals and lists mixed into ops whose inputs
share one dtype (issue 17, item 1): the first tensor's dtype wins; with no
tensor, the first value's own dtype is used for the rest."""
import numpy as np
import pytest

import jitgrad as tf


def test_literal_adopts_tensor_dtype_eager():
    x = tf.constant([1.5, -2.0])
    for got in (tf.maximum(x, 0), tf.maximum(0, x), tf.minimum(x, 0), tf.add(x, 1)):
        assert got.dtype == tf.float32
    np.testing.assert_array_equal(tf.maximum(x, 0).numpy(), np.maximum([1.5, -2.0], 0).astype(np.float32))
    x64 = tf.constant([1.5, -2.0], tf.float64)
    assert tf.maximum(0, x64).dtype == tf.float64


def test_no_tensor_first_value_decides():
    got = tf.maximum(0., [1, -1])
    assert got.dtype == tf.float32
    np.testing.assert_array_equal(got.numpy(), np.array([1., 0.], np.float32))
    assert tf.maximum(0, [1, -1]).dtype == tf.int32
    # the list's int32 comes first: the float literal cannot become int32 (TF: TypeError)
    with pytest.raises(TypeError):
        tf.maximum([1, -1], 0.)


def test_variable_counts_as_tensor():
    v = tf.Variable([1.0, -3.0])
    np.testing.assert_array_equal(tf.maximum(0, v).numpy(), [1.0, 0.0])


def test_numpy_values_keep_their_dtype():
    got = tf.maximum(np.array([1., 2.]), 0)
    assert got.dtype == tf.float64


def test_graph_and_function_modes(graph_mode):
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2])
        a = tf.maximum(x, 0)
        b = tf.maximum(0., [1, -1])
        assert a.dtype == tf.float32 and b.dtype == tf.float32
        with pytest.raises(TypeError):
            tf.maximum([1, -1], 0.)
    with tf.compat.v1.Session(graph=g) as sess:
        ra, rb = sess.run([a, b], {x: [3.0, -1.0]})
    np.testing.assert_array_equal(ra, [3.0, 0.0])
    np.testing.assert_array_equal(rb, [1.0, 0.0])

    @tf.function
    def f(x):
        return tf.maximum(x, 0) + tf.maximum(0., [1, -1])
    np.testing.assert_array_equal(f(tf.constant([3.0, -1.0])).numpy(), [4.0, 0.0])


@pytest.mark.parametrize("value, shape", [([], (0,)), ((), (0,)), ([[]], (1, 0)), ([[], []], (2, 0)), ([[[]]], (1, 1, 0))])
@pytest.mark.parametrize("dtype", ["int32", "int64", "uint8", "bool", "float32", "complex64"])
def test_an_empty_sequence_takes_any_dtype(value, shape, dtype):
    """TF 2.21: tf.constant([], tf.int32) is an empty int32 tensor (there is no element to
    disagree with the dtype); jitgrad inferred float32 for the empty list and refused."""
    want = getattr(tf, dtype)
    for make in (tf.constant, tf.convert_to_tensor):
        t = make(value, want)
        assert t.dtype == want and tuple(t.shape) == shape and t.numpy().dtype == want.as_numpy_dtype
    g = tf.Graph()
    with g.as_default():
        c = tf.constant(value, want)
    with tf.compat.v1.Session(graph=g) as s:
        got = s.run(c)
    assert got.shape == shape and got.dtype == want.as_numpy_dtype


def test_a_non_empty_sequence_still_refuses_a_dtype_it_cannot_take():
    # ([True], tf.int8): TF 2.21 eagerly takes a Python bool as int32 / int64 / uint64 / float16 / 32 / 64
    # / complex128 only ([True] as int32 is [1])
    for value, dtype in (([1.5], tf.int32), ([True], tf.int8), ([1], tf.bool), ([[1.0], []], tf.int32)):
        with pytest.raises((TypeError, ValueError)):
            tf.constant(value, dtype)


@pytest.mark.parametrize("value, dtype", [([["a"], ["b", "c"]], "string"), ([[1], []], "string"),
                                          ([[b"a"], [b"b", b"c"]], "string"), ([[[1]], [[2, 3]]], None),
                                          ([[[1.]], [[2., 3.]]], "float32"), ([[1, 2], 3], None),
                                          ([[["a"]], [["b", "c"]]], None)])
@pytest.mark.parametrize("mode", ["eager", "graph"])
def test_a_non_rectangular_sequence_is_a_value_error_at_any_depth(value, dtype, mode):
    """TF 2.21: ragged nesting -- in the first level or deeper, with dtype=tf.string too --
    is a ValueError ("Can't convert non-rectangular Python sequence to Tensor"); jitgrad
    raised TypeError for a ragged string list given tf.string, and for a ragged list
    below the first level in a graph."""
    want = None if dtype is None else getattr(tf, dtype)
    if mode == "graph":
        with tf.Graph().as_default():
            with pytest.raises(ValueError, match="non-rectangular"):
                tf.constant(value, want)
    else:
        for make in (tf.constant, tf.convert_to_tensor):
            with pytest.raises(ValueError, match="non-rectangular"):
                make(value, want)


def test_rectangular_nesting_still_converts():
    got = tf.constant([[["a"], ["b"]]], tf.string)
    assert tuple(got.shape) == (1, 2, 1) and got.numpy().tolist() == [[[b"a"], [b"b"]]]
    np.testing.assert_array_equal(tf.constant(((1, 2), [3, 4])).numpy(), np.array([[1, 2], [3, 4]], np.int32))


@pytest.mark.parametrize("src", ["float64", "int64", "bool", "complex128"])
@pytest.mark.parametrize("dtype", ["bool", "int32", "float32", "complex64", "uint8"])
def test_an_empty_numpy_array_takes_any_dtype(src, dtype):
    """TF 2.21: tf.constant(np.array([]), tf.bool) -- np.array([]) is float64 -- is an
    empty bool tensor, as tf.constant([], tf.bool) is; jitgrad refused float -> bool,
    bool -> int and complex -> real even with no element."""
    want = getattr(tf, dtype)
    for shape in ((0,), (2, 0)):
        arr = np.zeros(shape, src)
        for make in (tf.constant, tf.convert_to_tensor):
            t = make(arr, want)
            assert t.dtype == want and tuple(t.shape) == shape and t.numpy().dtype == want.as_numpy_dtype
        with tf.Graph().as_default() as g:
            c = tf.constant(arr, want)
        with tf.compat.v1.Session(graph=g) as s:
            got = s.run(c)
        assert got.shape == shape and got.dtype == want.as_numpy_dtype


def test_a_non_empty_numpy_array_keeps_its_conversion_rules():
    with pytest.raises(TypeError):
        tf.constant(np.array([1.5]), tf.int32)
    # TF 2.21 casts a bool array to any number type and a number array to bool (nonzero)
    assert tf.constant(np.array([True, False]), tf.int8).numpy().tolist() == [1, 0]
    assert tf.constant(np.array([True]), tf.float32).numpy().tolist() == [1.0]
    assert tf.constant(np.array([2.0, 0.0]), tf.bool).numpy().tolist() == [True, False]


# TF 2.21's sequence conversion (checked with tensorflow-cpu 2.21): the first element, when a
# numpy float scalar or array, decides a float result's dtype; else Python's rules (float32).
FIRST_FLOAT_CASES = [
    ([np.ones(2), np.ones(2)], "float64"),
    ([np.ones(2), np.ones(2, np.float32)], "float64"),
    ([np.ones(2, np.float32), np.ones(2)], "float32"),
    ([np.float64(1), 2.0], "float64"),
    ([2.0, np.float64(1)], "float32"),
    ([np.float16(1), 2.0], "float16"),
    ([[np.float64(1)], [np.float64(2)]], "float64"),
    ([np.float64(2), np.int64(1)], "float64"),
    ([np.int64(1), np.float64(2)], "float32"),
    ([np.ones(2, np.float16), np.ones(2)], "float16"),
    ([np.ones(2, np.int64), np.ones(2, np.int64)], "int32"),
    ([np.ones(2, np.uint8)], "int32"),
    ([np.array([2 ** 40, 1])], "int64"),
    ([np.ones(2, bool)], "bool"),
    ([np.complex64(1)], "complex128"),
]


@pytest.mark.parametrize("value, dtype", FIRST_FLOAT_CASES)
def test_a_sequence_of_numpy_values_gets_tfs_dtype(value, dtype):
    want = np.asarray(value).astype(getattr(tf, dtype).as_numpy_dtype)
    for make in (tf.constant, tf.convert_to_tensor):
        t = make(value)
        assert t.dtype.name == dtype
        np.testing.assert_array_equal(t.numpy(), want)


def test_a_list_of_arrays_converts_by_dtype_not_element_by_element():
    """Stacked as numpy would (the kinds come from each array's dtype and range): ragged
    arrays are a ValueError, a dtype asked for is honoured, and an int array outside int32
    makes the result int64."""
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((50, 40)).astype(np.float32) for _ in range(3)]
    got = tf.convert_to_tensor(arrays, tf.float32)
    assert got.dtype == tf.float32
    np.testing.assert_array_equal(got.numpy(), np.stack(arrays))
    np.testing.assert_array_equal(tf.constant(arrays, tf.float64).numpy(), np.stack(arrays).astype(np.float64))
    with pytest.raises(ValueError):
        tf.constant([np.ones(2, np.float32), np.ones(3, np.float32)])
    assert tf.constant([np.arange(3), np.array([0, 1, 2 ** 33])]).dtype == tf.int64
    assert tf.constant([np.arange(3), np.arange(3)]).dtype == tf.int32
    with pytest.raises(ValueError):
        tf.constant([np.ones(2, bool), np.ones(2)])          # bool and float mixed
    assert tuple(tf.constant([np.zeros((0, 3))], tf.int32).shape) == (1, 0, 3)


# TF 2.21 (tensorflow-cpu): bools mixed with numbers in a sequence
@pytest.mark.parametrize("value, expect", [
    ([True, 1], ValueError), ([True, 1.5], ValueError), ([True, 1j], ValueError), ([np.bool_(True), 1], ValueError),
    ([np.ones(2, bool), np.ones(2)], ValueError), ([np.ones(2), np.ones(2, bool)], ValueError),
    ([np.ones(2, np.int64), np.ones(2, bool)], ValueError),
    ([1, True], ("int32", [1, 1])), ([1.5, True], ("float32", [1.5, 1.0])), ([[2], [False]], ("int32", [[2], [0]])),
])
def test_bools_mixed_with_numbers_follow_the_first_element(value, expect):
    if isinstance(expect, type):
        with pytest.raises(expect):
            tf.constant(value)
        return
    t = tf.constant(value)
    assert t.dtype.name == expect[0]
    np.testing.assert_array_equal(t.numpy(), expect[1])
