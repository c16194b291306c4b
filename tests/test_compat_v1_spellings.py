"""tf.compat.v1's TF 1 versions of TF 2 functions (jitgrad/compat_v1.py): where's row selection,
div's Python 2 division, and the old argument spellings (keep_dims, reduction_indices, dimension,
dim, squeeze_dims) and orders. Expected values from numpy; the error types are TF 2.21's (a bad
shape: InvalidArgumentError eagerly, ValueError while building a graph)."""
import numpy as np
import pytest

import jitgrad as tf

v1 = tf.compat.v1
X = np.arange(6.).reshape(2, 3).astype(np.float32)


def _run(t, graph):
    if not graph:
        return t.numpy()
    with v1.Session() as s:
        return s.run(t)


@pytest.fixture(params=["eager", "graph"])
def graph(request):
    if request.param == "graph":
        v1.disable_eager_execution()
    return request.param == "graph"


def test_where_vector_condition_selects_rows(graph):
    x, y = np.arange(8.).reshape(2, 2, 2), -np.arange(8.).reshape(2, 2, 2)
    out = _run(v1.where(tf.constant([True, False]), x, y), graph)
    np.testing.assert_array_equal(out, np.where(np.array([True, False])[:, None, None], x, y))
    two = _run(v1.where(tf.constant([True, False]), [[1., 2.], [3., 4.]], [[5., 6.], [7., 8.]]), graph)
    np.testing.assert_array_equal(two, [[1., 2.], [7., 8.]])
    column = v1.where(tf.constant([False, True]), np.ones((2, 1, 1)), np.zeros((2, 1, 1)))
    assert column.shape.as_list() == [2, 1, 1]
    np.testing.assert_array_equal(_run(column, graph), [[[0.]], [[1.]]])


def test_where_same_shape_and_scalar_condition(graph):
    c = np.array([[True, False], [False, True]])
    a, b = np.array([[1., 2.], [3., 4.]], np.float32), np.array([[5., 6.], [7., 8.]], np.float32)
    np.testing.assert_array_equal(_run(v1.where(tf.constant(c), a, b), graph), np.where(c, a, b))
    np.testing.assert_array_equal(_run(v1.where(tf.constant(True), a, b), graph), a)
    np.testing.assert_array_equal(_run(v1.where(c), graph), np.argwhere(c))
    # where_v2 is TF 2's broadcasting where
    np.testing.assert_array_equal(_run(v1.where_v2(tf.constant([True, False]), a, b), graph),
                                  np.where([True, False], a, b))


@pytest.mark.parametrize("condition, x, y", [
    ([True, False, True], np.ones((2, 3)), np.zeros((2, 3))),      # vector of the wrong length
    ([[True], [False]], np.ones((2, 2)), np.zeros((2, 2))),        # no broadcasting
    ([True, False], np.ones(2), np.zeros((2, 2))),                 # x and y of different shapes
    ([True, False], 1., 2.),                                       # a vector condition needs rows
])
def test_where_rejects_what_tf1_rejects(graph, condition, x, y):
    error = ValueError if graph else tf.errors.InvalidArgumentError
    with pytest.raises(error):
        _run(v1.where(tf.constant(condition), x, y), graph)


def test_where_rows_in_a_graph_of_unknown_batch():
    v1.disable_eager_execution()
    c = v1.placeholder(tf.bool, [None])
    x, y = v1.placeholder(tf.float32, [None, 2]), v1.placeholder(tf.float32, [None, 2])
    w = v1.where(c, x, y)
    gx, gy = v1.gradients(v1.reduce_sum(w * [[1., 2.]]), [x, y])
    mask = np.array([True, False, True])
    with v1.Session() as s:
        out, dx, dy = s.run([w, gx, gy], {c: mask, x: np.ones((3, 2)), y: np.zeros((3, 2))})
    np.testing.assert_array_equal(out, np.where(mask[:, None], np.ones((3, 2)), 0.))
    np.testing.assert_array_equal(dx, np.where(mask[:, None], [[1., 2.]], 0.))
    np.testing.assert_array_equal(dy, np.where(mask[:, None], 0., [[1., 2.]]))


def test_where_condition_must_be_bool(graph):
    with pytest.raises(TypeError if graph else ValueError):
        v1.where(tf.constant([1, 0]), [1., 2.], [3., 4.])


def test_div_is_python2_division(graph):
    a, b = np.array([7, -7]), np.array([2, 2])
    assert _run(v1.div(tf.constant(a), b), graph).tolist() == (a // b).tolist()
    np.testing.assert_array_equal(_run(v1.div(tf.constant([7., -7.]), 2.), graph), [3.5, -3.5])
    assert _run(v1.div(7, 2), graph) == 3
    with pytest.raises(TypeError):
        v1.div(tf.constant([7]), 2.)
    np.testing.assert_array_equal(_run(v1.div_no_nan(tf.constant([7., 1.]), [0., 2.]), graph), [0., .5])


@pytest.mark.parametrize("name, ref", [("reduce_sum", np.sum), ("reduce_mean", np.mean), ("reduce_max", np.max),
                                       ("reduce_min", np.min), ("reduce_prod", np.prod)])
def test_reductions_take_tf1_spellings(graph, name, ref):
    for f in (getattr(v1, name), getattr(v1.math, name)):
        np.testing.assert_allclose(_run(f(X, reduction_indices=1), graph), ref(X, axis=1), rtol=1e-6)
        np.testing.assert_allclose(_run(f(X, 1, keep_dims=True), graph), ref(X, axis=1, keepdims=True), rtol=1e-6)
        np.testing.assert_allclose(_run(f(X, 0, True), graph), ref(X, axis=0, keepdims=True), rtol=1e-6)
        np.testing.assert_allclose(_run(f(input_tensor=X, reduction_indices=[0, 1]), graph), ref(X), rtol=1e-6)
        with pytest.raises(ValueError, match="Cannot specify both 'reduction_indices' and 'axis'"):
            f(X, axis=1, reduction_indices=1)
        with pytest.raises(ValueError, match="Cannot specify both 'keep_dims' and 'keepdims'"):
            f(X, 1, keepdims=True, keep_dims=True)


def test_boolean_reductions_logsumexp_norm_count(graph):
    b = X > 2
    np.testing.assert_array_equal(_run(v1.reduce_any(b, reduction_indices=1, keep_dims=True), graph),
                                  b.any(1, keepdims=True))
    np.testing.assert_array_equal(_run(v1.reduce_all(b, reduction_indices=1), graph), b.all(1))
    lse = np.log(np.exp(X).sum(1, keepdims=True))
    np.testing.assert_allclose(_run(v1.reduce_logsumexp(X, reduction_indices=1, keep_dims=True), graph), lse,
                               rtol=1e-6)
    for f in (v1.norm, v1.linalg.norm):
        np.testing.assert_allclose(_run(f(X, axis=1, keep_dims=True), graph),
                                   np.linalg.norm(X, axis=1, keepdims=True), rtol=1e-6)
    np.testing.assert_array_equal(_run(v1.math.count_nonzero(X, reduction_indices=1, keep_dims=True), graph),
                                  np.count_nonzero(X, 1)[:, None])


def test_argmax_argmin(graph):
    for f in (v1.argmax, v1.math.argmax):
        np.testing.assert_array_equal(_run(f(X, dimension=1), graph), X.argmax(1))
        with pytest.raises(ValueError, match="Cannot specify both 'dimension' and 'axis'"):
            f(X, axis=1, dimension=1)
    np.testing.assert_array_equal(_run(v1.argmax(X), graph), X.argmax(0))          # axis 0 by default
    np.testing.assert_array_equal(_run(v1.argmax(X, 1, "named"), graph), X.argmax(1))   # the name third
    out = v1.argmin(X, dimension=0, output_type=tf.int32)
    assert out.dtype == tf.int32
    np.testing.assert_array_equal(_run(out, graph), X.argmin(0))
    np.testing.assert_array_equal(_run(v1.arg_max(X, 1), graph), X.argmax(1))
    np.testing.assert_array_equal(_run(v1.arg_min(X, dimension=0), graph), X.argmin(0))


def _softmax(x, axis):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def test_softmax_family_take_dim(graph):
    for f in (v1.nn.softmax, v1.math.softmax):
        np.testing.assert_allclose(_run(f(X, dim=0), graph), _softmax(X, 0), rtol=1e-6)
        with pytest.raises(ValueError, match="Cannot specify both 'dim' and 'axis'"):
            f(X, axis=0, dim=0)
    for f in (v1.nn.log_softmax, v1.math.log_softmax):
        np.testing.assert_allclose(_run(f(X, dim=0), graph), np.log(_softmax(X, 0)), rtol=1e-5)
    for f in (v1.nn.l2_normalize, v1.math.l2_normalize, v1.linalg.l2_normalize):
        np.testing.assert_allclose(_run(f(X, dim=0), graph), X / np.linalg.norm(X, axis=0), rtol=1e-6)
    with pytest.raises(ValueError, match="Cannot specify both 'dim' and 'axis'"):
        v1.nn.l2_normalize(X, axis=0, dim=0)
    mean, var = v1.nn.moments(X, [1], keep_dims=True)
    np.testing.assert_allclose(_run(var, graph), X.var(1, keepdims=True), rtol=1e-5)
    with pytest.raises(ValueError, match="Cannot specify both 'keep_dims' and 'keepdims'"):
        v1.nn.moments(X, [1], keep_dims=True, keepdims=True)


def test_in_top_k_takes_predictions_first(graph):
    p = np.array([[0.1, 0.9], [0.8, 0.2]], np.float32)
    for f in (v1.nn.in_top_k, v1.math.in_top_k):
        assert _run(f(p, [1, 1], 1), graph).tolist() == [True, False]
        assert _run(f(predictions=p, targets=[1, 0], k=1), graph).tolist() == [True, True]


def test_shape_functions(graph):
    ones = np.ones((1, 2, 1))
    assert _run(v1.squeeze(ones, squeeze_dims=[0]), graph).shape == (2, 1)
    with pytest.raises(ValueError, match="Cannot specify both 'squeeze_dims' and 'axis'"):
        v1.squeeze(ones, axis=[0], squeeze_dims=[0])
    assert _run(v1.expand_dims(X, dim=1), graph).shape == (2, 1, 3)
    with pytest.raises(ValueError, match="Cannot specify both 'dim' and 'axis'"):
        v1.expand_dims(X, axis=1, dim=1)
    with pytest.raises(ValueError, match="Must specify an axis"):
        v1.expand_dims(X)
    shape = v1.shape(X, "named")                 # the name second; int32 by default
    assert shape.dtype == tf.int32 and _run(shape, graph).tolist() == [2, 3]
    assert v1.shape(X, out_type=tf.int64).dtype == tf.int64
    assert v1.size(X, out_type=tf.int64).dtype == tf.int64
    np.testing.assert_array_equal(_run(v1.gather(X, [1], True, "named"), graph), X[[1]])
    np.testing.assert_array_equal(_run(v1.boolean_mask(X, [True, False], "named"), graph), X[[0]])
    rev = _run(v1.reverse_sequence(X, [2, 3], seq_dim=1, batch_dim=0), graph)
    np.testing.assert_array_equal(rev, [X[0, [1, 0, 2]], X[1, ::-1]])


def test_tf1_argument_orders(graph):
    np.testing.assert_array_equal(_run(v1.pad(X, [[1, 0], [0, 0]], "CONSTANT", "named", 5.), graph),
                                  np.pad(X, [[1, 0], [0, 0]], constant_values=5.))
    assert _run(v1.zeros_like(tensor=X, dtype=tf.int32), graph).tolist() == np.zeros((2, 3), int).tolist()
    np.testing.assert_array_equal(_run(v1.ones_like(tensor=X), graph), np.ones((2, 3)))
    cm = v1.confusion_matrix([0, 1, 1], [0, 1, 0], 2, tf.int64, "named", [1, 2, 3])
    assert cm.dtype == tf.int64 and _run(cm, graph).tolist() == [[1, 0], [3, 2]]
    x = np.arange(8.).reshape(1, 2, 4, 1)
    moved = v1.space_to_depth(x, 2, "named")
    np.testing.assert_array_equal(_run(moved, graph), x.reshape(1, 1, 2, 2, 2).transpose(0, 1, 3, 2, 4)
                                  .reshape(1, 1, 2, 4))
    np.testing.assert_array_equal(_run(v1.depth_to_space(moved, 2, "named"), graph), x)
    mean, _ = v1.nn.weighted_moments(X, [1], np.ones((2, 3), np.float32), keep_dims=True)
    np.testing.assert_allclose(_run(mean, graph), X.mean(1, keepdims=True))
    assert _run(v1.strings.reduce_join([["a", "b"]], reduction_indices=1, keep_dims=True), graph).tolist() == [[b"ab"]]
    assert _run(v1.constant([1, 2], shape=[2], verify_shape=True), graph).tolist() == [1, 2]
    with pytest.raises(TypeError):
        v1.constant([1, 2], shape=[2, 1], verify_shape=True)


def test_sparse_to_dense(graph):
    out = _run(v1.sparse_to_dense([[0, 1], [1, 2]], [2, 3], [5., 6.], -1.), graph)
    np.testing.assert_array_equal(out, [[-1., 5., -1.], [-1., -1., 6.]])
    np.testing.assert_array_equal(_run(v1.sparse_to_dense([0, 2], [4], 1.), graph), [1., 0., 1., 0.])
    np.testing.assert_array_equal(_run(v1.sparse_to_dense(2, [4], 1.), graph), [0., 0., 1., 0.])
    np.testing.assert_array_equal(_run(v1.sparse_to_dense([2, 0], [4], [1., 2.], validate_indices=False), graph),
                                  [2., 0., 1., 0.])
    for indices in ([2, 0], [0, 0]):   # out of order, repeated
        with pytest.raises(tf.errors.InvalidArgumentError):
            _run(v1.sparse_to_dense(indices, [4], [1., 2.]), graph)


def test_collections_and_scoped_variables():
    v1.disable_eager_execution()
    with v1.variable_scope("gen"):
        a = v1.get_variable("w", [2])
    with v1.variable_scope("generator2"):
        b = v1.get_variable("w", [2])
    c = tf.Variable(1., name="disc/w", trainable=False)
    assert v1.trainable_variables(scope="gen") == [a, b]          # a regular expression matched at the start
    assert v1.trainable_variables("generator2") == [b]
    assert v1.global_variables(scope="disc") == [c] and v1.global_variables() == [a, b, c]
    assert v1.get_collection(v1.GraphKeys.TRAINABLE_VARIABLES, scope="gen/") == [a]
    v1.add_to_collection("mine", 3)
    v1.add_to_collections(["mine", "other"], 4)
    assert v1.get_collection("mine") == [3, 4] and v1.get_collection("other") == [4]
    assert v1.get_collection("mine", scope="x") == []            # items without a name are left out
    v1.get_collection_ref("new").append(5)
    assert v1.get_collection("new") == [5] and v1.get_collection(v1.GraphKeys.UPDATE_OPS) == []
