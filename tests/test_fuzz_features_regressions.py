"""Differences from TF 2.21 found by bench/tf_fuzz.py's features mode (bench/tf_fuzz_features.py).
Expected values and exception classes are TF 2.21's, run with /work/benchenv (said per test) and
checked by hand where a hand derivation is short."""
import numpy as np
import pytest

import jitgrad as tf
from jitgrad import errors

graph_modes = pytest.mark.usefixtures("graph_mode")

SLICES = [  # (begin, size, TF's message, or None for TF's value) on a 3-element input
    ([1], [4], "Expected size[0] in [0, 2], but got 4"),
    ([4], [-1], "Expected begin[0] in [0, 3], but got 4"),
    ([-1], [1], "Expected begin[0] in [0, 3], but got -1"),
    ([2], [2], "Expected size[0] in [0, 1], but got 2"),
    ([4], [0], "Expected begin[0] in [0, 3], but got 4"),
    ([3], [0], None),
    ([1], [-1], None),
]


@graph_modes
@pytest.mark.parametrize("begin,size,message", SLICES)
def test_slice_out_of_bounds_on_a_dim_unknown_when_built(begin, size, message):
    """tf.slice past the end of a dim the graph did not know returned the clamped part
    (x[1:5] of 3 values gave 2 values); TF's kernel raises InvalidArgumentError."""
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None])
        y = tf.slice(x, begin, size)
    value = np.arange(3, dtype=np.float32)
    with tf.compat.v1.Session(graph=g) as s:
        for _ in range(2):      # the second run is not let through by a cached kernel
            if message is None:
                np.testing.assert_array_equal(s.run(y, {x: value}), value[begin[0]:][:size[0] % 4])
            else:
                with pytest.raises(errors.InvalidArgumentError, match=message.replace("[", r"\[").replace("]", r"\]")):
                    s.run(y, {x: value})


@pytest.mark.parametrize("begin,size,message", SLICES)
def test_slice_out_of_bounds_eager_names_what_tf_names(begin, size, message):
    x = tf.constant(np.arange(3, dtype=np.float32))
    if message is None:
        np.testing.assert_array_equal(tf.slice(x, begin, size).numpy(), x.numpy()[begin[0]:][:size[0] % 4])
    else:
        with pytest.raises(errors.InvalidArgumentError, match=message.replace("[", r"\[").replace("]", r"\]")):
            tf.slice(x, begin, size)


@pytest.mark.parametrize("use_pfor", [True, False])
def test_jacobian_through_a_default_transpose(use_pfor):
    """tf.transpose(x) (perm None) under a vectorised jacobian: the batched rule kept the row's
    dims in order instead of reversing them (a broadcast ValueError for non-square rows, a
    wrong jacobian for square ones). y[j, i] = x[i, j] * w[i, j], so dy[j, i]/dx[a, b] is
    w[i, j] where (a, b) == (i, j), by hand."""
    w = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    x = tf.constant(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3))
    with tf.GradientTape(persistent=True) as t:
        t.watch(x)
        y = tf.transpose(x * w)
        sq = tf.transpose(x[:, :2] * w[:, :2])        # a square row: no broadcast error to notice
    want = np.zeros((3, 2, 2, 3), np.float32)
    for i in range(2):
        for j in range(3):
            want[j, i, i, j] = w[i, j]
    np.testing.assert_array_equal(t.jacobian(y, x, experimental_use_pfor=use_pfor).numpy(), want)
    want_sq = np.zeros((2, 2, 2, 3), np.float32)
    for i in range(2):
        for j in range(2):
            want_sq[j, i, i, j] = w[i, j]
    np.testing.assert_array_equal(t.jacobian(sq, x, experimental_use_pfor=use_pfor).numpy(), want_sq)


def test_square_of_a_complex_tensor_differentiates_with_the_conjugate():
    """TF's _SquareGrad is g * 2 conj(x); jitgrad used g * 2x (the complex gradient's sign of
    the imaginary part came out wrong). L = sum |x^2|^2 = sum |x|^4, whose gradient in TF's
    convention is 4 |x|^2 x by hand; TF 2.21 printed [1.48+2.072j, -7.344+1.836j]."""
    x0 = np.array([0.5 + 0.7j, -1.2 + 0.3j], np.complex128)
    x = tf.constant(x0)
    with tf.GradientTape() as t:
        t.watch(x)
        z = tf.square(x)
        loss = tf.reduce_sum(tf.math.real(z * tf.math.conj(z)))
    got = t.gradient(loss, x).numpy()
    np.testing.assert_allclose(got, 4 * np.abs(x0) ** 2 * x0, rtol=1e-12)
    np.testing.assert_allclose(got, [1.48 + 2.072j, -7.344 + 1.836j], rtol=1e-12)


@pytest.mark.parametrize("dtype,value", [(tf.complex64, [1 + 2j]), (tf.bool, [True]), (tf.string, ["a"])])
def test_ordering_comparisons_reject_what_tf_does_not_order(dtype, value):
    """TF 2.21: tf.less / greater_equal of complex, bool or string tensors is an
    InvalidArgumentError eagerly and a TypeError in a graph (equality takes them all);
    jitgrad compared complex numbers lexicographically as numpy does."""
    a = tf.constant(value, dtype)
    for f in (tf.less, tf.less_equal, tf.greater, tf.greater_equal):
        with pytest.raises(errors.InvalidArgumentError):
            f(a, a)
    np.testing.assert_array_equal(tf.equal(a, a).numpy(), [True])
    g = tf.Graph()
    with g.as_default():
        b = tf.constant(value, dtype)
        with pytest.raises(TypeError):
            tf.less(b, b)


@graph_modes
def test_gradient_with_respect_to_a_variable_sums_over_all_its_reads():
    """TF differentiates with respect to a variable's handle: every read counts, including one
    made under tf.control_dependencies and the value an assign_add returns, and no gradient
    passes into an assigned value. jitgrad counted only the variable's first read node (7 came
    out 4, a silent wrong number) and raised LookupError at an assign. TF 2.21 printed
    [7.0] [6.0, 3.0] [4.0]; by hand: y = v^2 + 3v at v = 2 gives 2v + 3 = 7; y2 = a x + 5v
    with a = v + x the value after the assign (3) gives dv = x + 5 = 6 and dx = a = 3."""
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [])
        v = tf.Variable(2.0)
        with tf.control_dependencies([tf.identity(x)]):
            r = v * 3.0
        y = v * v + r
        y2 = v.assign_add(x) * x + v * 5.0
        y3 = v.read_value() * 4.0
        grads = tf.gradients(y, v) + tf.gradients(y2, [v, x]) + tf.gradients(y3, v)
        init = tf.compat.v1.global_variables_initializer()
    with tf.compat.v1.Session(graph=g) as s:
        s.run(init)
        assert s.run(grads[:1], {x: 1.0}) == [7.0]
        s.run(init)
        assert s.run(grads[1:3], {x: 1.0}) == [6.0, 3.0]
        assert s.run(grads[3:], {x: 1.0}) == [4.0]


def test_tape_gradient_after_assignments_inside_tf_function():
    """A tape inside tf.function over Variables assigned in it (tf_fuzz features
    variable_assign_function): jitgrad raised LookupError ('No gradient defined for operation
    AssignAdd'). y = sum(v' w a) with v' = v + a w read after the assignment: dy/da = v' w and
    dy/dw = v' a, by hand; TF 2.21 printed 3.75, [0.75, 1.0], [1.5, -3.0] eagerly and traced."""
    w = tf.Variable([0.5, -1.0])
    a = tf.constant([1.0, 3.0])

    def step(v):
        with tf.GradientTape() as t:
            t.watch(a)
            v.assign_add(a * w)
            y = tf.reduce_sum(v * w * a)
        return [y] + t.gradient(y, [a, w], unconnected_gradients="zero")
    for run in (step, tf.function(step)):
        v = tf.Variable([1.0, 2.0])
        y, da, dw = run(v)
        np.testing.assert_array_equal(v.numpy(), [1.5, -1.0])
        assert float(y) == 3.75
        np.testing.assert_array_equal(da.numpy(), [0.75, 1.0])
        np.testing.assert_array_equal(dw.numpy(), [1.5, -3.0])


def test_tape_in_tf_function_watches_a_captured_eager_tensor():
    """t.watch(a) on a closure's eager constant inside tf.function gave a None gradient (each
    use of `a` became its own Const, none of them the watched one). y = sum(w a^2): dy/da =
    2 w a = [1, -6] and dy/dw = a^2 = [1, 9] by hand, as TF 2.21 prints eagerly and traced."""
    a = tf.constant([1.0, 3.0])
    w = tf.Variable([0.5, -1.0])

    def f():
        with tf.GradientTape(persistent=True) as t:
            t.watch(a)
            y = tf.reduce_sum(w * a * a)
        return t.gradient(y, [a, w]) + [t.gradient(y, a)]
    for run in (f, tf.function(f)):
        da, dw, da_alone = run()
        np.testing.assert_array_equal(da.numpy(), [1.0, -6.0])
        np.testing.assert_array_equal(dw.numpy(), [1.0, 9.0])
        np.testing.assert_array_equal(da_alone.numpy(), [1.0, -6.0])


def test_softmax_cross_entropy_casts_labels_and_computes_half_logits_in_float32():
    """TF's softmax_cross_entropy_with_logits casts the labels to the dtype it computes in and
    computes float16 / bfloat16 logits in float32, rounding the loss once; jitgrad raised
    TypeError for labels of another dtype (tf_fuzz features seed 92041: float32 labels, bfloat16
    logits) and rounded every intermediate. Expected values printed by TF 2.21."""
    logits = [[1.0, 2.0]]
    got = tf.nn.softmax_cross_entropy_with_logits(labels=tf.constant([[0, 1]]), logits=tf.constant(logits))
    np.testing.assert_allclose(got.numpy(), [0.31326166], rtol=1e-6)    # log(1 + e^-1), int labels
    got = tf.nn.softmax_cross_entropy_with_logits(labels=tf.constant([[0.2, 0.8]], tf.float64),
                                                  logits=tf.constant(logits))
    assert got.dtype == tf.float32
    np.testing.assert_allclose(got.numpy(), [0.5132617], rtol=1e-6)
    got = tf.nn.softmax_cross_entropy_with_logits(labels=tf.constant([[0.2, 0.8]]),
                                                  logits=tf.constant(logits, tf.bfloat16))
    assert got.dtype == tf.bfloat16 and float(got.numpy()[0]) == 0.51171875    # TF: 0.511719
    x = tf.constant([[1., 2., -0.5], [0.3, 0.1, 0.7]], tf.float16)
    with tf.GradientTape() as t:
        t.watch(x)
        loss = tf.nn.softmax_cross_entropy_with_logits(labels=tf.constant([[0.2, 0.8, 0.], [0.1, 0.1, 0.8]]),
                                                       logits=x)
        s = tf.reduce_sum(loss * tf.constant([1.0, 2.0], tf.float16))
    np.testing.assert_array_equal(loss.numpy(), np.array([0.57177734375, 0.89697265625], np.float16))
    np.testing.assert_array_equal(t.gradient(s, x).numpy(), np.array(      # TF 2.21's float16 numbers
        [[0.0537109375, -0.1103515625, 0.056610107421875], [0.404052734375, 0.294677734375, -0.69873046875]],
        np.float16))


RESHAPES_OF_NOTHING = [  # (input shape, target, TF 2.21's result shape)
    ((0,), [0, -1], (0, 1)), ((0, 3), [0, -1], (0, 3)), ((0,), [-1, 0], (1, 0)), ((0, 3), [0, -1, 2], (0, 1, 2)),
    ((2, 0), [2, -1], (2, 0)), ((0,), [3, -1], (3, 0)),
]


@pytest.mark.parametrize("src,target,want", RESHAPES_OF_NOTHING)
def test_reshape_of_an_empty_tensor_with_a_zero_and_a_minus_one(src, target, want):
    """tf.reshape(empty, [0, -1]) raised 'Cannot reshape a tensor with 0 elements' (tf_fuzz
    features seed 92046); TF's kernel takes the -1 as the input's non-zero dims over the
    target's non-zero sizes. Shapes printed by TF 2.21 eagerly."""
    assert tuple(tf.reshape(tf.zeros(src), target).shape) == want


@graph_modes
@pytest.mark.parametrize("src,target,want", RESHAPES_OF_NOTHING)
def test_reshape_of_an_empty_feed_with_a_zero_and_a_minus_one(src, target, want):
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None] * len(src))
        y = tf.reshape(x, target)
        gx = tf.gradients(tf.reduce_sum(y * 2.0), x)[0]
    with tf.compat.v1.Session(graph=g) as s:
        out, grad = s.run([y, gx], {x: np.zeros(src, np.float32)})
    assert out.shape == want and grad.shape == src


def test_reshape_of_values_to_a_zero_size_still_fails():
    with pytest.raises(errors.InvalidArgumentError):
        tf.reshape(tf.zeros([3]), [0, -1])


@pytest.mark.parametrize("index,message", [(2, "Tried to read from index 2 but array size is: 2"),
                                           (-1, r"Reading from negative indices \(index -1\) is not allowed")])
def test_eager_tensor_array_read_out_of_range_is_tfs_out_of_range_error(index, message):
    """TF 2.21's eager TensorArray raises OutOfRangeError (a graph's, InvalidArgumentError);
    jitgrad raised InvalidArgumentError eagerly too (tf_fuzz features bad_input_eager)."""
    ta = tf.TensorArray(tf.float32, size=2).unstack([1.0, 2.0])
    with pytest.raises(errors.OutOfRangeError, match=message):
        ta.read(index)
    g = tf.Graph()
    with g.as_default():
        ta = tf.TensorArray(tf.float32, size=2).unstack([1.0, 2.0])
        with pytest.raises(errors.InvalidArgumentError):
            ta.read(index)


def test_moments_of_float16_are_computed_in_float32():
    """TF's nn.moments casts float16 to float32 for the statistics and back; jitgrad squared
    the float16 differences (525^2 overflowed: the variance was inf). Numbers printed by
    TF 2.21: mean [75, 0.09375], variance [39360, 2.03125]."""
    x = tf.constant(np.array([[0.] * 7 + [600.], [1.5, 2.25, -3.] + [0.] * 5], np.float16))
    with tf.GradientTape() as t:
        t.watch(x)
        m, v = tf.nn.moments(x, axes=[1])
        s = tf.reduce_sum(m) + tf.reduce_sum(v) * tf.constant(0.001, tf.float16)
    assert m.dtype == tf.float16 and v.dtype == tf.float16
    np.testing.assert_array_equal(m.numpy(), np.array([75.0, 0.09375], np.float16))
    np.testing.assert_array_equal(v.numpy(), np.array([39360.0, 2.03125], np.float16))
    np.testing.assert_array_equal(t.gradient(s, x).numpy()[0], np.array(
        [0.10626220703125] * 7 + [0.25634765625], np.float16))


@graph_modes
def test_bfloat16_sums_accumulate_in_float32():
    """TF adds bfloat16 in float32 and rounds once; jitgrad's numpy sum rounded each partial
    sum (tf_fuzz features seed 92003: a gradient 3 ulps off). 20 x 0.5986 in bfloat16 is
    20 x 0.59765625 = 11.953 exactly, 11.9375 in bfloat16 (TF 2.21 prints 11.9375; jitgrad
    gave 12.125); the mean and the broadcast gradient (a SumToShape) add the same way."""
    import ml_dtypes
    a = np.full(20, 0.5986, ml_dtypes.bfloat16)
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.bfloat16, [20])
        b = tf.compat.v1.placeholder(tf.bfloat16, [])
        outs = [tf.reduce_sum(x), tf.reduce_mean(x) * 20.0, tf.gradients(tf.reduce_sum(x * b), b)[0],
                tf.gradients(tf.reduce_sum(tf.tile(tf.reshape(b, [1]), [20]) * x), b)[0]]
    with tf.compat.v1.Session(graph=g) as s:
        got = s.run(outs, {x: a, b: np.array(1.0, ml_dtypes.bfloat16)})
    assert [float(v) for v in got] == [11.9375, 11.9375, 11.9375, 11.9375]
