"""tf.debugging (jitgrad/debugging.py) and AutoGraph's `assert` (autograph/asserts.py).

Expected messages are TensorFlow 2.21's texts, written out by hand from what TF
prints for the same calls (check_ops.py's formats: eager failures list the
differing elements, graph failures are the Assert op's "assertion failed: [...]").
Graph checks run in both Session modes (conftest's graph_mode); compiled runs
must not fall back to the interpreter (``no_fallback``)."""
import re

import numpy as np
import pytest

import jitgrad as tf
from jitgrad.errors import InvalidArgumentError

ph = tf.compat.v1.placeholder


def _raises(exc, text):
    return pytest.raises(exc, match="^" + re.escape(text) + "$")


def _run_raises(text):
    """A failed run: TF's text first (a Session may add the node after it, as TF's ' [[{{node ...}}]]')."""
    return pytest.raises(InvalidArgumentError, match="^" + re.escape(text) + r"($|\s*\[\[)")


# ---------------------------------------------------------------- eager: None when it holds, TF's message when not
def test_eager_comparisons_return_none_when_they_hold():
    x = tf.constant([1, 2, 3])
    assert tf.debugging.assert_equal(x, [1, 2, 3]) is None
    assert tf.debugging.assert_none_equal(x, [0, 0, 0]) is None
    assert tf.debugging.assert_less(x, 4) is None
    assert tf.debugging.assert_less_equal(x, 3) is None
    assert tf.debugging.assert_greater(x, 0) is None
    assert tf.debugging.assert_greater_equal(x, [1, 2, 3]) is None
    assert tf.debugging.assert_positive(x) is None
    assert tf.debugging.assert_non_negative(x - 1) is None
    assert tf.debugging.assert_negative(-x) is None
    assert tf.debugging.assert_non_positive(1 - x) is None
    assert tf.debugging.assert_near(tf.constant([1.0, 2.0]), [1.0, 2.0 + 1e-7]) is None


def test_eager_assert_equal_lists_the_differing_elements():
    with _raises(InvalidArgumentError, "msg\nCondition x == y did not hold.\nIndices of first 2 different values:\n"
                 "[[1]\n [3]]\nCorresponding x values:\n[2 4]\nCorresponding y values:\n[0 0]\n"
                 "First 3 elements of x:\n[1 2 3]\nFirst 3 elements of y:\n[1 0 3]"):
        tf.debugging.assert_equal(tf.constant([1, 2, 3, 4]), tf.constant([1, 0, 3, 0]), message="msg")


def test_eager_summarize_and_shapes_that_differ():
    # different shapes: no indices, the first elements of each
    with _raises(InvalidArgumentError, "Condition x < y did not hold.\nFirst 2 elements of x:\n[1. 2.]\n"
                 "First 1 elements of y:\n[1.5]"):
        tf.debugging.assert_less(tf.constant([1.0, 2.0]), 1.5)
    with _raises(InvalidArgumentError, "Condition x >= y did not hold.\nIndices of first 1 different values:\n"
                 "[[0 1]]\nCorresponding x values:\n[2]\nCorresponding y values:\n[3]\nFirst 1 elements of x:\n"
                 "[1]\nFirst 1 elements of y:\n[1]"):
        tf.debugging.assert_greater_equal(tf.constant([[1, 2], [3, 4]]), tf.constant([[1, 3], [3, 5]]), summarize=1)
    with _raises(InvalidArgumentError, "Condition x == y did not hold."):
        tf.debugging.assert_equal([[1, 2]], [[1, 3]], summarize=0)
    with _raises(InvalidArgumentError, "Condition x == y did not hold.\nFirst 1 elements of x:\n[1]\n"
                 "First 1 elements of y:\n[2]"):
        tf.debugging.assert_equal(tf.constant(1), tf.constant(2))


def test_eager_sign_checks_name_the_tensor_by_shape_and_dtype():
    with _raises(InvalidArgumentError, "m.  \nCondition x > 0 did not hold element-wise:\n"
                 "x (shape=(2,) dtype=float32) = \n['1.0', '-2.0']"):
        tf.debugging.assert_positive(tf.constant([1.0, -2.0]), message="m")
    with _raises(InvalidArgumentError, "\nCondition x >= 0 did not hold element-wise:\n"
                 "x (shape=(2, 2) dtype=int32) = \n['1', '-2', '3', '-4']"):
        tf.debugging.assert_non_negative([[1, -2], [3, -4]], summarize=10)
    with _raises(InvalidArgumentError, "\nCondition x < 0 did not hold element-wise:\n"
                 "x (shape=(4,) dtype=int32) = \n['-1', '2', '-3', '...']"):
        tf.debugging.assert_negative([-1, 2, -3, -4])


def test_eager_assert_near_and_assert_use_tfs_eager_assert_text():
    with _raises(InvalidArgumentError, "Expected 'tf.Tensor(False, shape=(), dtype=bool)' to be true. Summarized "
                 "data: b''\nb'x and y not equal to tolerance rtol = tf.Tensor(1.1920929e-06, shape=(), dtype=float32),"
                 " atol = tf.Tensor(1.1920929e-06, shape=(), dtype=float32)'\nb'x (shape=(2,) dtype=float32) = '\n"
                 "1.0, 2.0\nb'y (shape=(2,) dtype=float32) = '\n1.0, 2.1"):
        tf.debugging.assert_near(tf.constant([1.0, 2.0]), tf.constant([1.0, 2.1]))
    # |1 - 1.05| = 0.05 < 0.01 + 0.1 * 1.05 passes; 1.5 does not
    assert tf.debugging.assert_near(tf.constant(1.0), 1.05, rtol=0.1, atol=0.01) is None
    with pytest.raises(InvalidArgumentError):
        tf.debugging.assert_near(tf.constant(1.0), 1.5, rtol=0.1, atol=0.1)
    assert tf.debugging.Assert is tf.Assert
    with _raises(InvalidArgumentError, "Expected 'False' to be true. Summarized data: b'x'\n1, 2"):
        tf.debugging.Assert(False, ["x", tf.constant([1, 2])])
    assert tf.debugging.Assert(tf.constant(True), ["never"]) is None


def test_rank_type_and_scalar_checks_are_static():
    v = tf.constant([1.0, 2.0])
    assert tf.debugging.assert_rank(v, 1) is None
    assert tf.debugging.assert_rank_at_least(v, 1) is None
    assert tf.debugging.assert_rank_in(v, (0, 1)) is None
    with _raises(ValueError, "m.  Tensor  must have rank 2.  Received rank 1, shape (2,)"):
        tf.debugging.assert_rank(v, 2, message="m")
    with _raises(ValueError, "Tensor  must have rank at least 2.  Received rank 1, shape (2,)"):
        tf.debugging.assert_rank_at_least(v, 2)
    with _raises(ValueError, "Tensor  must have rank in (0, 2).  Received rank 1, shape (2,)"):
        tf.debugging.assert_rank_in(v, (0, 2))
    with _raises(TypeError, "m.  tensor must be of type tf.int32; got tf.float32"):
        tf.debugging.assert_type(v, tf.int32, message="m")
    assert tf.debugging.assert_type(v, tf.float32) is None
    with _raises(TypeError, "Expected \"x\" to be integer type.  Found: tensor of dtype <dtype: 'float32'>"):
        tf.debugging.assert_integer(v)
    assert tf.debugging.assert_integer(tf.constant([1])) is None
    with _raises(ValueError, "m.  Expected scalar shape, saw shape: (2,)."):
        tf.debugging.assert_scalar(v, message="m")


def test_assert_shapes_static():
    x, y = tf.ones([2, 3]), tf.ones([3])
    assert tf.debugging.assert_shapes([(x, ("N", "D")), (y, ("D",))]) is None
    assert tf.debugging.assert_shapes([(tf.ones([2, 3, 4]), ("...", "D")), (tf.ones([4]), ("D",))]) is None
    assert tf.debugging.assert_shapes([(tf.ones([2, 3, 4]), (".", "D", 4)), (tf.ones([]), ())]) is None
    with _raises(ValueError, "Specified by tensor shape=(2, 3) dtype=float32 dimension 1.  Tensor shape=(2,) "
                 "dtype=float32 dimension 0 must have size 3.  Received size 2, shape (2,)"):
        tf.debugging.assert_shapes([(x, ("N", "D")), (tf.ones([2]), ("D",))])
    with _raises(ValueError, "m.  Specified explicitly.  Tensor shape=(2, 3) dtype=float32 dimension 1 must have "
                 "size 4.  Received size 3, shape (2, 3)"):
        tf.debugging.assert_shapes([(x, (2, 4))], message="m")
    with _raises(ValueError, "Tensor  must have rank 2.  Received rank 3, shape (2, 3, 4)"):
        tf.debugging.assert_shapes([(x, ("N", "D")), (tf.ones([2, 3, 4]), ("N", "D"))])


def test_check_numerics_eager_and_its_gradient():
    ok = tf.constant([1.0, 2.0])
    np.testing.assert_array_equal(tf.debugging.check_numerics(ok, "m").numpy(), [1.0, 2.0])
    with _raises(InvalidArgumentError, "bad : Tensor had NaN values"):
        tf.debugging.check_numerics(tf.constant([1.0, np.nan]), "bad")
    with _raises(InvalidArgumentError, "bad : Tensor had Inf values"):
        tf.debugging.assert_all_finite(tf.constant([1.0, -np.inf]), "bad")
    with _raises(InvalidArgumentError, "m : Tensor had Inf and NaN values"):
        tf.debugging.check_numerics(tf.constant([np.nan, np.inf]), "m")
    with pytest.raises(TypeError):
        tf.debugging.check_numerics(tf.constant([1, 2]), "ints")
    x = tf.Variable([1.0, 3.0])
    with tf.GradientTape() as tape:
        y = tf.reduce_sum(tf.debugging.check_numerics(x * x, "sq"))
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), [2.0, 6.0])   # d/dx sum(x^2) = 2x


def test_is_numeric_tensor_and_log_device_placement():
    assert tf.debugging.is_numeric_tensor(tf.constant([1.0]))
    assert tf.debugging.is_numeric_tensor(tf.constant([1], tf.int64))
    assert not tf.debugging.is_numeric_tensor(tf.constant([True]))
    assert not tf.debugging.is_numeric_tensor(np.ones(2))
    assert tf.debugging.set_log_device_placement(True) is None
    assert tf.debugging.get_log_device_placement() is True
    tf.debugging.set_log_device_placement(False)


def test_exported_names_and_v1_argument_order():
    for name in ("assert_equal", "assert_greater", "assert_less", "assert_rank"):
        assert getattr(tf, name) is getattr(tf.debugging, name)
    v1 = tf.compat.v1
    for name in ("assert_equal", "assert_none_equal", "assert_less", "assert_less_equal", "assert_greater",
                 "assert_greater_equal", "assert_positive", "assert_negative", "assert_non_negative",
                 "assert_non_positive", "assert_near", "assert_rank", "assert_rank_at_least", "assert_rank_in",
                 "assert_scalar", "assert_type", "assert_integer", "check_numerics", "is_numeric_tensor",
                 "verify_tensor_all_finite"):
        assert callable(getattr(v1, name)) and callable(getattr(v1.debugging, name, getattr(v1, name)))
    # TF 1: (x, y, data, summarize, message); TF 2: (x, y, message, summarize)
    with _raises(InvalidArgumentError, "custom\n[1 2]"):
        v1.assert_equal(tf.constant([1, 2]), [1, 3], ["custom", np.array([1, 2])])
    with _raises(InvalidArgumentError, "second\nCondition x == y did not hold."):
        tf.debugging.assert_equal(tf.constant(1), 2, "second", 0)
    with _raises(InvalidArgumentError, "nan : Tensor had NaN values"):
        v1.verify_tensor_all_finite(tf.constant([np.nan]), "nan")


# ---------------------------------------------------------------- graphs: ops that fail the run
def test_graph_checks_fail_the_run_with_the_assert_text(no_fallback):
    g = tf.Graph()
    with g.as_default():
        x = ph(tf.float32, [None])
        a = tf.debugging.assert_positive(x, message="m")
        assert isinstance(a, tf.Operation)
        with tf.control_dependencies([a]):
            y = tf.identity(x) * 2.0
        e = tf.debugging.assert_equal(x, 2.0 * x, summarize=2)
        less = tf.compat.v1.assert_less(x, 3.0, ["x too big:", x], summarize=1)
    with tf.compat.v1.Session(graph=g) as s:
        np.testing.assert_array_equal(s.run(y, {x: [1.0, 2.0]}), [2.0, 4.0])
        with _run_raises("assertion failed: [m.  ] [Condition x > 0 did not hold element-wise:] "
                     "[x (Placeholder:0) = ] [1 -2 3...]"):
            s.run(y, {x: [1.0, -2.0, 3.0, -4.0, 5.0]})
        s.run(e, {x: [0.0, 0.0, 0.0]})
        with _run_raises("assertion failed: [Condition x == y did not hold element-wise:] "
                     f"[x (Placeholder:0) = ] [0 2...] [y ({e.inputs[0].op.inputs[0].op.inputs[1].name}) = ] [0 4...]"):
            s.run(e, {x: [0.0, 2.0, 3.0]})
        s.run(less, {x: [1.0]})
        with _run_raises("assertion failed: [x too big:] [5...]"):
            s.run(less, {x: [5.0, 1.0]})


def test_graph_static_failures_raise_while_building():
    with tf.Graph().as_default():
        x = ph(tf.float32, [None])
        with _raises(ValueError, "Tensor Placeholder:0 must have rank 2.  Received rank 1, shape (None,)"):
            tf.debugging.assert_rank(x, 2)
        with _raises(InvalidArgumentError, "Condition x == y did not hold element-wise:\nx (Const:0) = \n[1 2]\n"
                     "y (Const_1:0) = \n[1 3]"):
            tf.debugging.assert_equal(tf.constant([1, 2]), tf.constant([1, 3]))
        with _raises(TypeError, "Placeholder:0 must be of type tf.int32; got tf.float32"):
            tf.debugging.assert_type(x, tf.int32)
        with _raises(TypeError, "Expected \"x\" to be integer type.  Found: Placeholder:0 of dtype <dtype: 'float32'>"):
            tf.debugging.assert_integer(x)
        assert tf.debugging.assert_rank(x, 1).type == "NoOp"


def test_graph_rank_unknown_until_run(no_fallback):
    g = tf.Graph()
    with g.as_default():
        x = ph(tf.float32, None)
        r = tf.debugging.assert_rank_at_least(x, 2)
        with tf.control_dependencies([r]):
            y = tf.reduce_sum(x)
    with tf.compat.v1.Session(graph=g) as s:
        assert s.run(y, {x: np.ones([2, 3])}) == 6.0
        with pytest.raises(InvalidArgumentError, match=r"must have rank at least\] \[2\] \[Received shape: \] \[3\]"):
            s.run(y, {x: np.ones([3])})
    g = tf.Graph()
    with g.as_default():
        x = ph(tf.float32, None)
        r = tf.debugging.assert_rank_in(x, (1, 3))
    with tf.compat.v1.Session(graph=g) as s:
        s.run(r, {x: [1.0]})
        s.run(r, {x: np.ones([1, 2, 3])})
        with pytest.raises(InvalidArgumentError, match=r"must have rank in\] \[1 3\] \[Received shape: \] \[1 1\]"):
            s.run(r, {x: [[1.0]]})


def test_graph_assert_shapes_at_run_time(no_fallback):
    g = tf.Graph()
    with g.as_default():
        z = ph(tf.float32, [None, None])
        x = ph(tf.float32, [None])
        sh = tf.debugging.assert_shapes([(z, ("N", "D")), (x, ("D",))])
        with tf.control_dependencies([sh]):
            out = tf.reduce_sum(z) + tf.reduce_sum(x)
    with tf.compat.v1.Session(graph=g) as s:
        assert s.run(out, {z: np.ones([3, 2]), x: [1.0, 2.0]}) == 9.0
        with pytest.raises(InvalidArgumentError, match=r"dimension 0 must have size\] \[3\] \[Received size\] \[2\]"):
            s.run(out, {z: np.ones([3, 3]), x: [1.0, 2.0]})


def test_graph_check_numerics_and_gradient(no_fallback):
    g = tf.Graph()
    with g.as_default():
        x = ph(tf.float32, [3])
        c = tf.debugging.check_numerics(tf.math.log(x), "log")
        (dx,) = tf.gradients(tf.reduce_sum(c * [1.0, 2.0, 3.0]), [x])
    with tf.compat.v1.Session(graph=g) as s:
        got, grad = s.run([c, dx], {x: [1.0, 2.0, 4.0]})
        np.testing.assert_allclose(got, np.log([1.0, 2.0, 4.0]), rtol=1e-6)
        np.testing.assert_allclose(grad, [1.0, 1.0, 0.75], rtol=1e-6)     # w / x
        with _run_raises("log : Tensor had NaN values"):
            s.run(c, {x: [1.0, -1.0, 2.0]})
        with _run_raises("log : Tensor had Inf values"):
            s.run(c, {x: [1.0, 0.0, 2.0]})


# ---------------------------------------------------------------- jitgrad.function: compiled checks
def test_checks_inside_a_function_compile(no_fallback):
    @tf.function
    def f(x):
        tf.debugging.assert_non_negative(x, message="neg")
        y = tf.debugging.check_numerics(tf.sqrt(x), "sqrt")
        tf.debugging.assert_rank(x, 1)
        return y * 2.0

    np.testing.assert_allclose(f(tf.constant([1.0, 4.0])).numpy(), [2.0, 4.0])
    with _run_raises("assertion failed: [neg.  ] [Condition x >= 0 did not hold element-wise:] "
                 "[x (x:0) = ] [1 -4]"):
        f(tf.constant([1.0, -4.0]))
    with _run_raises("sqrt : Tensor had Inf values"):
        f(tf.constant([np.inf, 4.0]))
    with pytest.raises(ValueError, match="must have rank 1"):
        f(tf.constant([[1.0]]))


# ---------------------------------------------------------------- AutoGraph `assert`
_ASSERTS = tf.autograph.experimental.Feature.ASSERT_STATEMENTS


def test_autograph_assert_on_a_tensor_becomes_tf_assert(no_fallback):
    @tf.function(experimental_autograph_options=_ASSERTS)
    def f(x):
        assert tf.reduce_sum(x) > 0, "sum must be positive"
        assert x.shape.rank == 1, "rank"     # a Python bool: Python's assert
        return x * 2

    np.testing.assert_array_equal(f(tf.constant([1.0, 2.0])).numpy(), [2.0, 4.0])
    with _run_raises("assertion failed: [sum must be positive]"):
        f(tf.constant([1.0, -2.0]))
    with _raises(AssertionError, "rank"):
        f(tf.constant([[1.0, -2.0]]))

    @tf.function(experimental_autograph_options=(tf.autograph.experimental.Feature.ALL,))
    def g(x):
        assert tf.reduce_sum(x) > 0
        return x
    with _run_raises("assertion failed: [Assertion error]"):
        g(tf.constant([-1.0]))


def test_autograph_assert_without_the_feature_is_pythons():
    # TF's default options leave `assert` alone: a tensor test is a Python bool of a graph tensor
    @tf.function
    def f(x):
        assert tf.reduce_sum(x) > 0, "no"
        return x
    with pytest.raises(TypeError, match="as a Python `bool`"):
        f(tf.constant([1.0]))

    @tf.function(experimental_autograph_options=_ASSERTS)
    def h(x, n):
        assert n > 0, "n must be positive"   # Python ints: Python's assert, at trace time
        return x * n
    assert float(h(tf.constant(2.0), 3)) == 6.0
    with _raises(AssertionError, "n must be positive"):
        h(tf.constant(2.0), -1)
