"""Differences from TF 2.21 found by bench/tf_fuzz.py (seed 130138 and the round with seeds from
140000) and by hand (stop 28). Each expected value or error is TF 2.21's, run with /work/benchenv
(said per test), and derived by hand or with numpy as well."""
import re

import numpy as np
import pytest

import jitgrad as tf
from _graph_testing import run_default_graph as _run

graph_modes = pytest.mark.usefixtures("graph_mode", "no_fallback")


# ---------------------------------------------------------------- softmax cross-entropy, empty class dim
# TF 2.21 (benchenv, eager, tf.compat.v1 graph with static and with fed shapes alike):
#   dense (tf.nn / tf.compat.v1.nn softmax_cross_entropy_with_logits): its wrapper reshapes the
#   logits to [-1, classes]; TF's Reshape infers the -1 from the non-zero dims only, so with an
#   empty class dim AND an empty outer dim the kernel makes P losses (P = product of the non-zero
#   outer dims, 1 if none) and the reshape back to the (empty) outer shape raises
#   InvalidArgumentError "Input to reshape is a tensor with P values, but the requested shape has 0".
#   An empty class dim alone gives zero losses; an empty outer dim alone gives an empty result.
#   sparse: any empty class dim raises: rank-2 logits [R, 0] "Must have at least one class, but got
#   logits shape [R,0]"; other ranks are reshaped as the dense ones, to [P, 0] against L labels (L the
#   product of the outer dims): "logits and labels must have the same first dimension, got logits
#   shape [P,0] and labels shape [L]" if P != L, else the message above with [P,0].
XENT_RAISES = [((0, 0), -1, 1), ((0, 5, 0), -1, 5), ((0, 0, 0), -1, 1), ((0, 0), 0, 1), ((0, 4, 0), 0, 4)]
XENT_OK = [((3, 0), -1, [0.0, 0.0, 0.0]), ((2, 0, 3), -1, np.zeros((2, 0))), ((0,), -1, 0.0),
           ((0, 3), -1, np.zeros((0,))), ((3, 0), 0, np.zeros((0,)))]
SPARSE_RAISES = [((3, 0), "at least one class, but got logits shape [3,0]"),
                 ((0, 0), "at least one class, but got logits shape [0,0]"),
                 ((2, 3, 0), "at least one class, but got logits shape [6,0]"),
                 ((0,), "at least one class, but got logits shape [1,0]"),
                 ((0, 5, 0), "same first dimension, got logits shape [5,0] and labels shape [0]"),
                 ((0, 0, 0), "same first dimension, got logits shape [1,0] and labels shape [0]")]


def _xent(a, axis):
    return tf.nn.softmax_cross_entropy_with_logits(labels=a, logits=a, axis=axis)


@pytest.mark.parametrize("shape,axis,values", XENT_RAISES)
def test_eager_xent_with_empty_class_and_outer_dims_raises_tfs_reshape_error(shape, axis, values):
    """tf_fuzz seed 130138: jitgrad returned an empty loss."""
    a = np.ones(shape, np.float32)
    want = f"Input to reshape is a tensor with {values} values, but the requested shape has 0"
    with pytest.raises(tf.errors.InvalidArgumentError, match=want):
        _xent(a, axis)
    with pytest.raises(tf.errors.InvalidArgumentError, match=want):
        tf.compat.v1.nn.softmax_cross_entropy_with_logits_v2(labels=a, logits=a, axis=axis)


@pytest.mark.parametrize("shape,axis,want", XENT_OK)
def test_eager_xent_with_only_one_kind_of_empty_dim_is_fine(shape, axis, want):
    a = np.ones(shape, np.float32)
    got = _xent(a, axis).numpy()
    assert got.shape == np.shape(want)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("shape,flat", SPARSE_RAISES)
def test_eager_sparse_xent_with_empty_class_dim_raises(shape, flat):
    a = np.ones(shape, np.float32)
    with pytest.raises(tf.errors.InvalidArgumentError, match=re.escape(flat)):
        tf.nn.sparse_softmax_cross_entropy_with_logits(labels=np.zeros(shape[:-1], np.int32), logits=a)


def test_eager_sparse_xent_with_empty_outer_dim_is_empty():
    got = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=np.zeros((2, 0), np.int32),
                                                         logits=np.ones((2, 0, 3), np.float32))
    assert got.shape == (2, 0)


@graph_modes
@pytest.mark.parametrize("static", [True, False])
@pytest.mark.parametrize("shape,axis,values", XENT_RAISES)
def test_graph_xent_with_empty_class_and_outer_dims_raises_when_run(shape, axis, values, static):
    """Built without complaint (as TF), raised by the run: the interpreter's kernel, the compiler's
    check of the run's shapes (nothing of it in the generated code)."""
    a = np.ones(shape, np.float32)
    with tf.Graph().as_default():
        p = tf.compat.v1.placeholder(tf.float32, shape if static else [None] * len(shape))
        y = _xent(p, axis)
        with pytest.raises(tf.errors.InvalidArgumentError, match=f"tensor with {values} values, but the requested"):
            _run(y, {p: a})
        # the same graph runs a good shape afterwards (no half-built kernel left behind)
        if not static:
            good = np.ones([2] * len(shape), np.float32)
            want = np.full([2] * (len(shape) - 1), np.log(2.0), np.float32)   # 2 equal logits: sum(1 * log 2)
            np.testing.assert_allclose(_run(y, {p: good}), 2 * want, rtol=1e-6)


@graph_modes
@pytest.mark.parametrize("shape,flat", SPARSE_RAISES)
def test_graph_sparse_xent_with_empty_class_dim_raises_when_run(shape, flat):
    with tf.Graph().as_default():
        p = tf.compat.v1.placeholder(tf.float32, [None] * (len(shape) - 1) + [shape[-1]])
        lab = tf.compat.v1.placeholder(tf.int32, [None] * (len(shape) - 1))
        y = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=lab, logits=p)
        with pytest.raises(tf.errors.InvalidArgumentError, match=re.escape(flat)):
            _run(y, {p: np.ones(shape, np.float32), lab: np.zeros(shape[:-1], np.int32)})


@graph_modes
def test_graph_xent_with_only_an_empty_class_dim_gives_zero_losses():
    with tf.Graph().as_default():
        p = tf.compat.v1.placeholder(tf.float32, [None, None])
        y = _xent(p, -1)
        np.testing.assert_array_equal(_run(y, {p: np.ones((3, 0), np.float32)}), [0.0, 0.0, 0.0])


# ---------------------------------------------------------------- expand_dims by a one-element tensor
# TF 2.21 (benchenv): ExpandDims takes any one-element int32/int64 tensor as the axis, of any rank
# (eager tf.constant([1]), [[1]], np.array([1]); a fed [1] placeholder), x of shape [2, 3]:
# [1] -> (2, 1, 3), [-1] -> (2, 3, 1), [[1]] -> (2, 1, 3); [0, 1] or [] -> InvalidArgumentError
# "'dim' must be a tensor with a single value" (eager, and a fed one when run; a constant one
# in a graph: ValueError when built); [7] fed -> InvalidArgumentError "Tried to expand dim index 7
# for tensor with 2 dimensions."
X23 = np.arange(6, dtype=np.float32).reshape(2, 3)


@pytest.mark.parametrize("axis,shape", [(lambda: tf.constant([1]), (2, 1, 3)), (lambda: np.array([1]), (2, 1, 3)),
                                        (lambda: tf.constant([-1]), (2, 3, 1)), (lambda: [[1]], (2, 1, 3)),
                                        (lambda: tf.constant([0], tf.int64), (1, 2, 3))])
def test_eager_expand_dims_by_a_one_element_tensor(axis, shape):
    got = tf.expand_dims(X23, axis()).numpy()
    np.testing.assert_array_equal(got, X23.reshape(shape))


@pytest.mark.parametrize("axis", [[0, 1], np.zeros([0], np.int32)])
def test_eager_expand_dims_by_not_one_element_raises(axis):
    with pytest.raises(tf.errors.InvalidArgumentError, match="'dim' must be a tensor with a single value"):
        tf.expand_dims(X23, tf.constant(axis, tf.int32))


def test_expand_dims_by_a_float_tensor_is_tfs_type_error():
    with pytest.raises(TypeError, match="parameter 'dim' has DataType float32 not in list of allowed values"):
        tf.expand_dims(X23, tf.constant([1.0]))


def test_eager_expand_dims_out_of_range_is_tfs_message():
    with pytest.raises(tf.errors.InvalidArgumentError, match="Tried to expand dim index 7 for tensor with 2 dim"):
        tf.expand_dims(X23, tf.constant([7], tf.int64))


@graph_modes
def test_graph_expand_dims_by_constant_and_fed_one_element_axis():
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2, 3])
        y1 = tf.expand_dims(x, tf.constant([1]))
        assert y1.shape.as_list() == [2, 1, 3]
        ax = tf.compat.v1.placeholder(tf.int32, [1])
        y2 = tf.expand_dims(x, ax)
        g2 = tf.gradients(tf.reduce_sum(y2 * y2), x)[0]       # d/dx sum(x^2) = 2x, whatever the axis
        with pytest.raises(ValueError, match="'dim' must be a tensor with a single value"):
            tf.expand_dims(x, tf.constant([0, 1]))
        with tf.compat.v1.Session() as s:
            np.testing.assert_array_equal(s.run(y1, {x: X23}), X23.reshape(2, 1, 3))
            for a, shape in [([1], (2, 1, 3)), ([-1], (2, 3, 1)), ([0], (1, 2, 3))]:
                got, grad = s.run([y2, g2], {x: X23, ax: a})
                np.testing.assert_array_equal(got, X23.reshape(shape))
                np.testing.assert_array_equal(grad, 2 * X23)
            with pytest.raises(tf.errors.InvalidArgumentError, match="Tried to expand dim index 7 for tensor with 2"):
                s.run(y2, {x: X23, ax: [7]})


@graph_modes
def test_graph_expand_dims_by_a_fed_axis_of_unknown_shape():
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2, 3])
        ax = tf.compat.v1.placeholder(tf.int32, None)
        y = tf.expand_dims(x, ax)
        with tf.compat.v1.Session() as s:
            np.testing.assert_array_equal(s.run(y, {x: X23, ax: 2}), X23.reshape(2, 3, 1))
            np.testing.assert_array_equal(s.run(y, {x: X23, ax: [[1]]}), X23.reshape(2, 1, 3))
            with pytest.raises(tf.errors.InvalidArgumentError, match="'dim' must be a tensor with a single value"):
                s.run(y, {x: X23, ax: [0, 1]})


# ---------------------------------------------------------------- transpose by a fed perm
# TF 2.21 (benchenv, graph): the fed perm of x [2, 3] ([[0, 1, 2], [3, 4, 5]]): [1, 0] -> x.T,
# [0, 1] -> x, [-1, 0] -> x.T and [-2, -1] -> x (a negative entry counts from the end);
# InvalidArgumentError when run: [0, 0] "1 is missing from {0,0}.", [0, 5] "5 is out of range
# [0 .. 2)", [0, -3] "-1 is out of range [0 .. 2)", [1, 0, 2] "transpose expects a vector of
# size 2. But input(1) is a vector of size 3", [[1, 0]] "perm must be rank 1, got shape [1,2]".
# Gradient of sum(transpose(x, perm) * w): w transposed back.
@graph_modes
def test_graph_transpose_by_a_fed_perm():
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2, 3])
        perm = tf.compat.v1.placeholder(tf.int32, [2])
        y = tf.transpose(x, perm)
        assert y.shape.as_list() == [None, None]
        w = tf.compat.v1.placeholder(tf.float32, None)
        gx = tf.gradients(tf.reduce_sum(y * w), x)[0]
        wt = np.float32([[1, 2], [3, 4], [5, 6]])
        with tf.compat.v1.Session() as s:
            for p, want in [([1, 0], X23.T), ([0, 1], X23), ([-1, 0], X23.T), ([-2, -1], X23)]:
                np.testing.assert_array_equal(s.run(y, {x: X23, perm: p}), want)
            np.testing.assert_array_equal(s.run(gx, {x: X23, perm: [1, 0], w: wt}), wt.T)
            np.testing.assert_array_equal(s.run(gx, {x: X23, perm: [0, 1], w: wt.T}), wt.T)
            for p, msg in [([0, 0], "1 is missing from {0,0}."), ([0, 5], "5 is out of range [0 .. 2)"),
                           ([0, -3], "-1 is out of range [0 .. 2)")]:
                with pytest.raises(tf.errors.InvalidArgumentError, match=re.escape(msg)):
                    s.run(y, {x: X23, perm: p})


@graph_modes
def test_graph_transpose_by_a_fed_perm_of_unknown_shape():
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(tf.float32, None)
        perm = tf.compat.v1.placeholder(tf.int32, None)
        y = tf.transpose(x, perm)
        x3 = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
        with tf.compat.v1.Session() as s:
            np.testing.assert_array_equal(s.run(y, {x: x3, perm: [2, 0, 1]}), np.transpose(x3, [2, 0, 1]))
            np.testing.assert_array_equal(s.run(y, {x: X23, perm: [1, 0]}), X23.T)
            for p, msg in [([1, 0, 2], "transpose expects a vector of size 2. But input(1) is a vector of size 3"),
                           ([[1, 0]], "perm must be rank 1, got shape [1,2]")]:
                with pytest.raises(tf.errors.InvalidArgumentError, match=re.escape(msg)):
                    s.run(y, {x: X23, perm: p})


def test_graph_transpose_perm_length_against_a_known_rank_is_a_build_error():
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2, 3])
        with pytest.raises(ValueError, match=re.escape("expects a vector of size 2. But input(1) is a vector of size 3")):
            tf.transpose(x, tf.compat.v1.placeholder(tf.int32, [3]))
        with pytest.raises(TypeError, match="parameter 'perm' has DataType float32"):
            tf.transpose(x, tf.compat.v1.placeholder(tf.float32, [2]))


@pytest.mark.parametrize("perm,msg", [([0, 5], "5 is out of range [0 .. 2)"), ([0, 0], "1 is missing from {0,0}."),
                                      ([1, 0, 2], "transpose expects a vector of size 2. But input(1) is a vector "
                                                  "of size 3")])
def test_eager_transpose_bad_perm_is_tfs_error(perm, msg):
    with pytest.raises(tf.errors.InvalidArgumentError, match=re.escape(msg)):
        tf.transpose(X23, tf.constant(perm))


# ---------------------------------------------------------------- switch_case / while_loop: non-scalar
# TF 2.21 (benchenv). Eager switch_case clamps the index with v1 tf.where (Select) of two scalars:
# a rank-1 index (shape [1] too) raises InvalidArgumentError "'then' must be at least a vector, but
# saw shape: []", a rank-2 one "Inputs to operation Select of type Select must have the same size and
# shape.  Input 0: [1,1] != input 1: []". Eager while_loop: ValueError "'maximum_iterations' must be a
# scalar. Received shape: (1,)". In a graph (static or fed) both build, and the run raises
# InvalidArgumentError "The second input must be a scalar, but it has shape [1]".
BRANCHES = [lambda: tf.constant(1.0), lambda: tf.constant(2.0)]


@pytest.mark.parametrize("index,msg", [([1], "'then' must be at least a vector, but saw shape: []"),
                                       ([0, 1], "'then' must be at least a vector, but saw shape: []"),
                                       ([[1]], "Inputs to operation Select of type Select must have the same size "
                                               "and shape.  Input 0: [1,1] != input 1: []")])
def test_eager_switch_case_with_a_non_scalar_index_raises(index, msg):
    with pytest.raises(tf.errors.InvalidArgumentError, match=re.escape(msg)):
        tf.switch_case(tf.constant(index), BRANCHES)


def test_eager_switch_case_float_index_is_tfs_type_error():
    with pytest.raises(TypeError, match=re.escape("'branch_index' must be an integer Tensor, got <dtype: 'float32'>")):
        tf.switch_case(tf.constant(1.0), BRANCHES)


@pytest.mark.parametrize("limit", [[3], [[3]], [3, 4], np.array([3])])
def test_eager_while_loop_non_scalar_maximum_iterations_raises(limit):
    with pytest.raises(ValueError, match=re.escape(f"'maximum_iterations' must be a scalar. Received shape: "
                                                   f"{tuple(np.shape(limit))}")):
        tf.while_loop(lambda i: i < 10, lambda i: i + 1, [tf.constant(0)], maximum_iterations=tf.constant(limit))


@graph_modes
@pytest.mark.parametrize("value,fed", [([3], False), ([[3]], True), ([3, 4], True), ([3], None)])
def test_graph_non_scalar_switch_index_and_trip_limit_raise_when_run(value, fed):
    """fed None: a placeholder of unknown shape (a scalar feed of it runs)."""
    with tf.Graph().as_default():
        if fed is False:
            v = tf.constant(value)
        else:
            v = tf.compat.v1.placeholder(tf.int32, None if fed is None else np.shape(value))
        r1 = tf.switch_case(v, BRANCHES)
        r2 = tf.while_loop(lambda i: i < 10, lambda i: i + 1, tf.constant(0), maximum_iterations=v)
        feed = {} if fed is False else {v: value}
        shape = ",".join(map(str, np.shape(value)))
        for r in (r1, r2):
            with pytest.raises(tf.errors.InvalidArgumentError,
                               match=re.escape(f"The second input must be a scalar, but it has shape [{shape}]")):
                _run(r, feed)
        if fed is None:
            assert _run([r1, r2], {v: 1}) == [2.0, 1]
            assert _run([r1, r2], {v: 7}) == [2.0, 7]     # out of range: the last branch


# ---------------------------------------------------------------- cond: a one-element predicate
# TF 2.21 (benchenv): eager, tf.function and a v1 graph (constant, fed with that static shape, fed
# with an unknown shape) alike take a predicate of shape [1] or [1, 1]: [True] -> true_fn, [[False]]
# -> false_fn. Gradient of cond(p, x*x, 2x) at x = 3: 6 / 2. Another count: eager, numpy's
# ValueError for the truth value; a graph runs into InvalidArgumentError "The second input must be a
# scalar, but it has shape [2]" (for a constant one TF 2.21 aborts in grappler: we raise the same).
@pytest.mark.parametrize("pred,want", [([True], 9.0), ([[True]], 9.0), ([False], 6.0), ([[[False]]], 6.0)])
def test_eager_cond_and_case_take_a_one_element_predicate(pred, want):
    x = tf.constant(3.0)
    with tf.GradientTape() as tape:
        tape.watch(x)
        r = tf.cond(tf.constant(pred), lambda: x * x, lambda: x * 2.0)
    assert float(r) == want
    assert float(tape.gradient(r, x)) == (6.0 if want == 9.0 else 2.0)
    assert float(tf.case([(tf.constant(pred), lambda: x * x)], default=lambda: x * 2.0)) == want
    f = tf.function(lambda p: tf.cond(p, lambda: x * x, lambda: x * 2.0))
    assert float(f(tf.constant(pred))) == want


@pytest.mark.parametrize("pred,msg", [([True, False], "more than one element is ambiguous"),
                                      (np.zeros([0], bool), "empty array is ambiguous")])
def test_eager_cond_with_other_counts_is_numpys_truth_value_error(pred, msg):
    with pytest.raises(ValueError, match=msg):
        tf.cond(tf.constant(pred), lambda: 1.0, lambda: 2.0)


@graph_modes
@pytest.mark.parametrize("how", ["constant", "static", "unknown"])
def test_graph_cond_with_a_one_element_predicate(how):
    with tf.Graph().as_default():
        x = tf.constant(3.0)
        if how == "constant":
            preds = {v: tf.constant(v) for v in ((True,), ((False,),))}
            feeds = {v: {} for v in preds}
        else:
            preds = {v: tf.compat.v1.placeholder(tf.bool, np.shape(v) if how == "static" else None)
                     for v in ((True,), ((False,),))}
            feeds = {v: {p: v} for v, p in preds.items()}
        for v, p in preds.items():
            r = tf.cond(p, lambda: x * x, lambda: x * 2.0)
            v1 = tf.compat.v1.cond(p, lambda: [x * x], lambda: [x * 2.0])
            assert r.shape.as_list() == []
            gx = tf.gradients(r, x)[0]
            want = (9.0, 6.0) if v == (True,) else (6.0, 2.0)
            assert _run([r, gx, v1], feeds[v]) == [*want, [want[0]]]   # (v1.cond keeps the singleton list, as TF 2.21's in a graph)
        if how != "constant":
            p = preds[(True,)]
            r = tf.cond(p, lambda: x * x, lambda: x * 2.0)
            bad = [True, False] if how == "unknown" else None
            if bad is not None:
                with pytest.raises(tf.errors.InvalidArgumentError,
                                   match=re.escape("The second input must be a scalar, but it has shape [2]")):
                    _run(r, {p: bad})


@graph_modes
def test_graph_cond_with_a_two_element_predicate_raises_when_run():
    with tf.Graph().as_default():
        x = tf.constant(3.0)
        r = tf.cond(tf.constant([True, False]), lambda: x, lambda: x * 2.0)
        p = tf.compat.v1.placeholder(tf.bool, [2])
        r2 = tf.cond(p, lambda: x, lambda: x * 2.0)
        for r, feed in ((r, {}), (r2, {p: [True, True]})):
            with pytest.raises(tf.errors.InvalidArgumentError,
                               match=re.escape("The second input must be a scalar, but it has shape [2]")):
                _run(r, feed)


# ---------------------------------------------------------------- adversarial inputs by hand (stop 28)
# TF 2.21 (benchenv, v1 graph, fed scalars): tf.range(0, 2**63 - 1, 1) (int64) fails with
# ResourceExhaustedError (jitgrad returned an EMPTY range: numpy's arange(2**63 - 1) is empty);
# tf.range(0.0, inf, 1.0): InvalidArgumentError "Requires ((limit - start) / delta) <=
# 9223372036854775807"; tf.range(0.0, nan, 1.0): "Requires start <= limit when delta > 0: 0/nan"
# (jitgrad: OverflowError / "cannot convert float NaN"); tf.fill([2**31 - 1] * 2, 1.0):
# ResourceExhaustedError (2**63 elements fit, the bytes do not; jitgrad: InvalidArgumentError).
@graph_modes
@pytest.mark.parametrize("dtype,limit,error,msg", [
    ("int64", 2 ** 63 - 1, tf.errors.ResourceExhaustedError, "OOM when allocating tensor"),
    ("float32", np.inf, tf.errors.InvalidArgumentError, "Requires ((limit - start) / delta) <= 9223372036854775807"),
    ("float32", np.nan, tf.errors.InvalidArgumentError, "Requires start <= limit when delta > 0: 0.0/nan")])
def test_range_to_a_huge_or_non_finite_limit_is_tfs_error(dtype, limit, error, msg):
    with tf.Graph().as_default():
        lim = tf.compat.v1.placeholder(tf.as_dtype(dtype), [])
        r = tf.range(tf.constant(0, tf.as_dtype(dtype)), lim, tf.constant(1, tf.as_dtype(dtype)))
        with pytest.raises(error, match=re.escape(msg)):
            _run(r, {lim: limit})
        np.testing.assert_array_equal(_run(r, {lim: 3}), np.arange(3, dtype=dtype))


@graph_modes
def test_fill_of_more_bytes_than_memory_is_oom_not_invalid_argument():
    with tf.Graph().as_default():
        d = tf.compat.v1.placeholder(tf.int32, [2])
        f = tf.fill(d, 1.0)
        with pytest.raises(tf.errors.ResourceExhaustedError, match="OOM when allocating tensor"):
            _run(f, {d: [2 ** 31 - 1, 2 ** 31 - 1]})
        d64 = tf.compat.v1.placeholder(tf.int64, [2])
        f64 = tf.fill(d64, 1.0)
        with pytest.raises(tf.errors.InvalidArgumentError, match=re.escape("would have more than 2**63 - 1 elements")):
            _run(f64, {d64: [2 ** 63 - 1, 2]})     # TF 2.21: InvalidArgumentError, the element count


# TF 2.21 (benchenv, v1 graph): map_fn / scan over 0 rows stack them in a TensorList, which fails
# when the rows' static shape is not fully defined: InvalidArgumentError "Tried to stack elements of
# an empty list with non-fully-defined element_shape: <unknown>" (elems of unknown shape), "[?]"
# (elems [None, None]); elems [None, 2] give an empty (0, 2); a scalar per row gives (0,); a scan
# carrying a [2] sum over elems [None, None] gives (0, 2) (its rows' shape is known). jitgrad's
# compiled run gave (0, 2) and its interpreter (0,) for the unknown one.
@graph_modes
@pytest.mark.parametrize("static,shown", [(None, "<unknown>"), ([None, None], "[?]"), ([None, 2], None)])
def test_map_fn_and_scan_over_no_rows_of_unknown_row_shape(static, shown):
    with tf.Graph().as_default():
        a = tf.compat.v1.placeholder(tf.float32, static)
        m = tf.map_fn(lambda r: r * 2.0, a)
        # (elems of unknown rank: the carried sum's shape would be unknown, TF's ValueError below)
        s = [tf.scan(lambda c, r: c + r, a, initializer=tf.zeros([2]))] if static else []
        per_row = tf.map_fn(lambda r: tf.reduce_sum(r), a)
        empty = np.ones((0, 2), np.float32)
        assert _run(per_row, {a: empty}).shape == (0,)
        for out in [m] + s:
            if shown is None or out is not m:    # the scan's rows: the carried sum, of shape [2]
                assert _run(out, {a: empty}).shape == (0, 2)
            else:
                with pytest.raises(tf.errors.InvalidArgumentError, match=re.escape(
                        f"Tried to stack elements of an empty list with non-fully-defined element_shape: {shown}")):
                    _run(out, {a: empty})
            rows = np.float32([[1, 2], [3, 4]])
            want = rows * 2 if out is m else np.cumsum(rows, 0)
            np.testing.assert_array_equal(_run(out, {a: rows}), want)


def test_while_loop_body_output_less_specific_than_its_input_is_tfs_value_error():
    """TF's while_v2 _check_shapes_compat: a body output must know every dim its loop variable's
    shape invariant knows (a scan over elems of unknown shape with an initializer of shape [2]:
    TF 2.21 raises this ValueError when the graph is built; jitgrad let it through)."""
    with tf.Graph().as_default():
        a = tf.compat.v1.placeholder(tf.float32, None)
        with pytest.raises(ValueError, match="enters the loop with shape \\(2,\\), but has shape <unknown> after one"):
            tf.scan(lambda c, r: c + r, a, initializer=tf.zeros([2]))
        x = tf.compat.v1.placeholder(tf.float32, None)
        with pytest.raises(ValueError, match="enters the loop with shape"):
            tf.while_loop(lambda v: tf.reduce_sum(v) < 10.0, lambda v: v + x, [tf.zeros([2])])
        # a less specific invariant lets it through
        r = tf.while_loop(lambda v: tf.reduce_sum(v) < 10.0, lambda v: v + x, [tf.zeros([2])],
                          shape_invariants=[tf.TensorShape(None)])
        np.testing.assert_array_equal(_run(r, {x: np.float32([1, 2])})[0], [4.0, 8.0])   # TF 2.21: the same
