"""Differences from TF 2.21 found by bench/tf_fuzz.py (seeds from 120000 left over, and the round
with seeds from 130000). Each expected value is TF 2.21's, run with /work/benchenv (said per test),
and derived by hand or with numpy as well."""
import numpy as np
import pytest

import jitgrad as tf
from _graph_testing import run_default_graph as _run

graph_modes = pytest.mark.usefixtures("graph_mode", "no_fallback")


# ---------------------------------------------------------------- divide_no_nan is TF's DivNoNan op
# x, y and the upstream gradient g of z = divide_no_nan(x, y). By hand, with TF 2.21's _DivNoNanGrad
# (dx = div_no_nan(g, y), dy = g * div_no_nan(div_no_nan(-x, y), y)) and inf * 0 = NaN:
#   z  = [0, 0, 0, 4 / 2, 0 / 3]                    (+0 where y is +-0, even for x = inf)
#   dx = [0, 0, 0, 2 / 2, -inf / 3]
#   dy = [inf * 0, 1 * 0, nan * 0, 2 * (-4 / 2 / 2), -inf * (-0 / 3 / 3)] = [nan, 0, nan, -2, nan]
# TF 2.21 printed exactly these for float16, bfloat16, float32 and float64 (graph, tf.gradients).
DNN_X = [1.0, np.inf, 3.0, 4.0, 0.0]
DNN_Y = [0.0, 0.0, -0.0, 2.0, 3.0]
DNN_G = [np.inf, 1.0, np.nan, 2.0, -np.inf]
DNN_WANT = ([0.0, 0.0, 0.0, 2.0, 0.0], [0.0, 0.0, 0.0, 1.0, -np.inf], [np.nan, 0.0, np.nan, -2.0, np.nan])


def _f64(a):
    return np.asarray(a).astype(np.float64)


@graph_modes
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_divide_no_nan_gradient_with_inf_upstream_at_zero_divisor_is_nan(dtype):
    """tf_fuzz seed 122025: an inf upstream gradient meeting y == 0 gave dy = 0 (jitgrad's
    divide_no_nan was where(y == 0, 0, x / y), whose gradient masks g); TF's DivNoNan gradient
    multiplies g by div_no_nan(...) = 0: NaN. Compiled (no fallback) and interpreted alike."""
    dt = tf.as_dtype(dtype)
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(dt, [5])
        y = tf.compat.v1.placeholder(dt, [5])
        z = tf.math.divide_no_nan(x, y)
        assert z.op.type == "DivNoNan"
        gx, gy = tf.gradients(z, [x, y], grad_ys=tf.constant(DNN_G, dt))
        got = _run([z, gx, gy], {x: DNN_X, y: DNN_Y})
    for g, w in zip(got, DNN_WANT):
        assert g.dtype == dt.as_numpy_dtype
        np.testing.assert_array_equal(_f64(g), w)
    assert not np.signbit(got[0][:3]).any()     # +0, also for y = -0


@pytest.mark.usefixtures("graph_mode")      # half types are run by the interpreter in either mode
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_divide_no_nan_half_types_value_and_gradient(dtype):
    dt = tf.as_dtype(dtype)
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(dt, [5])
        y = tf.compat.v1.placeholder(dt, [5])
        z = tf.math.divide_no_nan(x, y)
        gx, gy = tf.gradients(z, [x, y], grad_ys=tf.constant(DNN_G, dt))
        npd = dt.as_numpy_dtype
        got = _run([z, gx, gy], {x: np.array(DNN_X, npd), y: np.array(DNN_Y, npd)})
    for g, w in zip(got, DNN_WANT):
        assert g.dtype == dt.as_numpy_dtype
        np.testing.assert_array_equal(_f64(g), w)


def test_divide_no_nan_eager_tape_matches_graph_rule():
    x = tf.constant(DNN_X, tf.float32)
    y = tf.constant(DNN_Y, tf.float32)
    with tf.GradientTape() as t:
        t.watch([x, y])
        z = tf.math.divide_no_nan(x, y)
    gx, gy = t.gradient(z, [x, y], output_gradients=tf.constant(DNN_G, tf.float32))
    for g, w in zip([z, gx, gy], DNN_WANT):
        np.testing.assert_array_equal(_f64(g.numpy()), w)


@graph_modes
def test_divide_no_nan_broadcast_second_derivative_by_hand():
    """z = sum(divide_no_nan(x, y)) with y broadcast [2, 1] against x [2, 3]: dz/dy_i = -sum_j x_ij / y_i^2
    (0 for y_i = 0), d2z/dy_i2 = 2 sum_j x_ij / y_i^3 (0 for y_i = 0); float64, by hand."""
    x0 = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    y0 = np.array([[2.0], [0.0]])
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(tf.float64, [2, 3])
        y = tf.compat.v1.placeholder(tf.float64, [2, 1])
        z = tf.reduce_sum(tf.math.divide_no_nan(x, y))
        (gy,) = tf.gradients(z, [y])
        (hy,) = tf.gradients(tf.reduce_sum(gy), [y])
        got_gy, got_hy = _run([gy, hy], {x: x0, y: y0})
    np.testing.assert_allclose(got_gy, [[-6.0 / 4.0], [0.0]], rtol=1e-15)
    np.testing.assert_allclose(got_hy, [[2 * 6.0 / 8.0], [0.0]], rtol=1e-15)


def test_divide_no_nan_complex_and_integer_inputs():
    """complex: 0 where y == 0+0j else x / y (numpy); int32 is divided in float64, int8 in float32
    (TF's _TRUEDIV_TABLE); bool is a TypeError as in TF."""
    xc = np.array([1 + 2j, 3 - 1j], np.complex64)
    yc = np.array([0j, 1 + 1j], np.complex64)
    got = tf.math.divide_no_nan(tf.constant(xc), tf.constant(yc)).numpy()
    np.testing.assert_allclose(got, [0j, (3 - 1j) / (1 + 1j)], rtol=1e-6)
    gi = tf.math.divide_no_nan(tf.constant([3, 1], tf.int32), tf.constant([0, 4], tf.int32))
    assert gi.dtype == tf.float64
    np.testing.assert_array_equal(gi.numpy(), [0.0, 0.25])
    assert tf.math.divide_no_nan(tf.constant([3], tf.int8), tf.constant([2], tf.int8)).dtype == tf.float32
    with pytest.raises(TypeError):
        tf.math.divide_no_nan(tf.constant([True]), tf.constant([True]))


# ---------------------------------------------------------------- map_fn / scan / folds: TF's structure and dtype checks
# Each case was run with TF 2.21 (graph: tf.compat.v1.Session over constant elems of 2 and of 0 rows;
# eager: the same call on an EagerTensor). map_fn's result takes fn_output_signature's structure and
# dtypes, elems' when it is not given (TF's default signature), and fn's output is checked against it:
# nest.assert_same_structure (ValueError; TypeError for list vs tuple), and writing a row of another
# dtype into the result's TensorArray fails (InvalidArgumentError: at once eagerly, when the graph
# runs in graph mode -- and not at all when there are no rows). scan / foldl / foldr carry their
# value in a tf.while_loop: a body changing its dtype is the loop's build-time TypeError.
def _elems(n):
    return np.ones((n, 3), np.float32)


FLOW_CASES = {
    "tuple_to_single": lambda x: tf.map_fn(lambda v: v[0] * v[1], (x, x)),
    "single_to_tuple": lambda x: tf.map_fn(lambda v: (v, v), x),
    "list_vs_tuple": lambda x: tf.map_fn(lambda v: [v[0], v[1]], (x, x)),
    "sig_wrong_struct": lambda x: tf.map_fn(lambda v: v, x, fn_output_signature=(tf.float32, tf.float32)),
    "f_to_int": lambda x: tf.map_fn(lambda v: tf.cast(v, tf.int32), x),
    "sig_wrong_dtype": lambda x: tf.map_fn(lambda v: v, x, fn_output_signature=tf.int32),
    "scan_dtype": lambda x: tf.scan(lambda a, v: tf.cast(a, tf.int32), x, initializer=tf.zeros([3])),
    "foldl_dtype": lambda x: tf.foldl(lambda a, v: tf.cast(a, tf.float64), x, initializer=tf.zeros([3])),
}
# case -> (graph with 2 rows, graph with 0 rows, eager with 2 rows): an exception class, or the
# result's (shape, dtype) when it runs
FLOW_WANT = {
    "tuple_to_single": (ValueError, ValueError, ValueError),
    "single_to_tuple": (ValueError, ValueError, ValueError),
    "list_vs_tuple": (TypeError, TypeError, TypeError),
    "sig_wrong_struct": (ValueError, ValueError, ValueError),
    "f_to_int": (tf.errors.InvalidArgumentError, ((0, 3), "float32"), tf.errors.InvalidArgumentError),
    "sig_wrong_dtype": (tf.errors.InvalidArgumentError, ((0, 3), "int32"), tf.errors.InvalidArgumentError),
    "scan_dtype": (TypeError, TypeError, tf.errors.InvalidArgumentError),
    "foldl_dtype": (TypeError, TypeError, ((3,), "float64")),
}


def _outcome(build_and_run):
    try:
        r = np.asarray(build_and_run())
    except (ValueError, TypeError, tf.errors.InvalidArgumentError) as e:
        return type(e)
    return r.shape, str(r.dtype)


@pytest.mark.usefixtures("graph_mode")
@pytest.mark.parametrize("case", sorted(FLOW_CASES))
def test_functional_ops_check_fn_output_structure_and_dtype_in_graphs(case):
    """The 0-row graph traces fn as TF's does (its checks apply) but writes nothing."""
    def run(n):
        with tf.Graph().as_default():
            y = FLOW_CASES[case](tf.constant(_elems(n)))
            return _run(y, {})
    want_2, want_0, _ = FLOW_WANT[case]
    assert _outcome(lambda: run(2)) == want_2
    assert _outcome(lambda: run(0)) == want_0


@pytest.mark.parametrize("case", sorted(FLOW_CASES))
def test_functional_ops_check_fn_output_structure_and_dtype_eagerly(case):
    assert _outcome(lambda: FLOW_CASES[case](tf.constant(_elems(2)))) == FLOW_WANT[case][2]


def test_map_fn_graph_dtype_error_is_raised_when_run_not_when_built():
    """TF builds map_fn(cast to int32) over float32 elems fine and fails in Session.run."""
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 3])
        y = tf.map_fn(lambda v: tf.cast(v, tf.int32), x)
        assert y.dtype == tf.float32
        with tf.compat.v1.Session() as s:
            np.testing.assert_array_equal(s.run(y, {x: _elems(0)}), np.zeros((0, 3), np.float32))
            with pytest.raises(tf.errors.InvalidArgumentError, match="TensorArray dtype is float32"):
                s.run(y, {x: _elems(2)})


def test_map_fn_result_takes_the_signature_structure():
    """A dict in, a dict out; a namedtuple-free tuple signature packs fn's tuple (values by numpy)."""
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    got = tf.map_fn(lambda d: {"a": d["a"] * 2.0}, {"a": tf.constant(x)})
    np.testing.assert_array_equal(got["a"].numpy(), x * 2)
    got = tf.map_fn(lambda v: (v, tf.reduce_sum(v)), tf.constant(x), fn_output_signature=(tf.float32, tf.float32))
    assert isinstance(got, tuple)
    np.testing.assert_array_equal(got[1].numpy(), x.sum(axis=1))


# ---------------------------------------------------------------- no rows: connectivity still decides None
@pytest.mark.usefixtures("graph_mode")
@pytest.mark.parametrize("shape", [(0,), (2, 0), (3,)])
def test_hessians_of_a_loss_linear_in_an_empty_x_fail_as_tf(shape):
    """tf_fuzz features seed 130009 (empty_dims_graph): TF 2.21's tf.hessians traces its loop body
    even when x has no elements, so a gradient that does not depend on x (loss linear in x) fails
    on the None row gradient: ValueError 'None values not supported.', for (0,) and (2, 0) as for
    (3,). jitgrad returned an empty hessian for the empty x. A quadratic loss still gives the
    [0, 0] / [2, 0, 2, 0] empty hessian (TF: the same shapes)."""
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(tf.float32, shape)
        with pytest.raises(ValueError, match="None values not supported"):
            tf.hessians(tf.reduce_sum(x * 2.0), x)
        (h,) = tf.hessians(tf.reduce_sum(x * x), x)
        got = _run(h, {x: np.ones(shape, np.float32)})
    assert got.shape == shape + shape
    n = int(np.prod(shape))
    np.testing.assert_array_equal(got.reshape(n, n), 2 * np.eye(n))     # d2/dx2 sum(x^2) = 2 I, by hand


@pytest.mark.parametrize("use_pfor", [True, False])
def test_eager_jacobian_of_an_empty_target_is_none_where_unconnected(use_pfor):
    """TF 2.21 (pfor): jacobian(x * 2, [x, z]) with x of shape [0] is [[0, 0] zeros, None];
    jacobian(sum(z) * ones([0]), [x, z]) is [None, [0, 2] zeros]; unconnected_gradients='zero'
    fills the None ones. (Without pfor TF 2.21 fails to pack its result -- a ValueError of its own;
    jitgrad answers as with pfor.)"""
    x = tf.constant(np.ones((0,), np.float32))
    z = tf.constant(np.ones((2,), np.float32))
    with tf.GradientTape(persistent=True) as t:
        t.watch([x, z])
        y1 = x * 2.0
        y2 = tf.reduce_sum(z) * tf.ones([0])
    j1 = t.jacobian(y1, [x, z], experimental_use_pfor=use_pfor)
    j2 = t.jacobian(y2, [x, z], experimental_use_pfor=use_pfor)
    assert j1[0].shape == (0, 0) and j1[1] is None
    assert j2[0] is None and j2[1].shape == (0, 2)
    j3 = t.jacobian(y1, [x, z], experimental_use_pfor=use_pfor, unconnected_gradients="zero")
    assert [j.shape for j in j3] == [(0, 0), (0, 2)]


# ---------------------------------------------------------------- float16 / bfloat16 sigmoid as TF's Eigen kernels round
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_sigmoid_is_e_over_one_plus_e_rounded_each_step(dtype):
    """TF 2.21's bfloat16 sigmoid(-5.96875) is 0.0025634765625 (Eigen's generic logistic:
    e = exp(x), e / (1 + e), each step rounded); 1 / (1 + exp(-x)) rounded once gives
    0.0025482177734375. Checked against the step formula in numpy over [-30, 30] and the
    specials (inf -> 1: TF's inf mask; -inf -> 0; NaN)."""
    dt = tf.as_dtype(dtype)
    npd = dt.as_numpy_dtype
    x = np.concatenate([np.linspace(-30, 30, 601), [-5.96875, np.inf, -np.inf, np.nan, 0.0]]).astype(npd)
    got = tf.sigmoid(tf.constant(x)).numpy()
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(x.astype(np.float32)).astype(npd)
        want = np.where(np.isinf(e), npd(1), (e.astype(np.float32) / (1 + e.astype(np.float32)).astype(npd)
                                              .astype(np.float32)).astype(npd))
    np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))
    if dtype == "bfloat16":
        assert float(got[601]) == 0.0025634765625
    assert [float(v) for v in got[602:604]] == [1.0, 0.0] and np.isnan(float(got[604])) and float(got[605]) == 0.5


def test_bfloat16_sigmoid_gradient_rounds_as_tfs_sigmoid_grad_kernel():
    """TF 2.21's SigmoidGrad runs Eigen's packet formula dy * (y * (1 - y)) over whole packets of 8
    and the scalar one (dy * y) * (1 - y) on the rest: for these 9 bfloat16 values it printed
    element 0 = 0.000164031982421875 (packet form; the scalar gives 0.00016307830810546875) and
    element 8 = -0.326171875 (scalar form; the packet gives -0.32421875)."""
    y = np.array([0.0167236328125, 0.2470703125, 0.859375, 0.1640625, 0.69140625, 0.2490234375, 0.0654296875,
                  0.1923828125, 0.6796875])
    g = np.array([0.00994873046875, 0.294921875, -0.28125, -1.3515625, -0.06982421875, 2.53125, -1.7890625,
                  1.3984375, -1.4921875])
    want = [0.000164031982421875, 0.054931640625, -0.0341796875, -0.1845703125, -0.014892578125, 0.47265625,
            -0.109375, 0.216796875, -0.326171875]
    # the gradient of sigmoid(x), with the sigmoid's output fed as y
    npd = tf.bfloat16.as_numpy_dtype
    with tf.Graph().as_default():
        gs = tf.compat.v1.placeholder(tf.bfloat16, [9])
        x = tf.compat.v1.placeholder(tf.bfloat16, [9])
        (gx,) = tf.gradients(tf.sigmoid(x), x, grad_ys=gs)
        grad_op = gx.op
        assert grad_op.type == "SigmoidGrad"
        got = _run(gx, {grad_op.inputs[0]: y.astype(npd), gs: g.astype(npd), x: np.zeros(9, npd)})
    assert [float(v) for v in got] == want


@pytest.mark.usefixtures("graph_mode")
def test_half_sigmoid_second_derivative_matches_float64_by_hand():
    """sigmoid'' = s (1 - s) (1 - 2 s); through SigmoidGrad's gradient (TF's _SigmoidGradGrad) in
    float16, to float16's precision, and the same graph in float64 exactly by hand."""
    x0 = np.array([-2.0, -0.5, 0.0, 0.75, 3.0])
    s = 1 / (1 + np.exp(-x0))
    want = s * (1 - s) * (1 - 2 * s)
    for dt, tol in [(tf.float16, 2e-3), (tf.float64, 1e-15)]:
        with tf.Graph().as_default():
            x = tf.compat.v1.placeholder(dt, [5])
            (g1,) = tf.gradients(tf.reduce_sum(tf.sigmoid(x)), x)
            (g2,) = tf.gradients(tf.reduce_sum(g1), x)
            got = _run(g2, {x: x0.astype(dt.as_numpy_dtype)})
        np.testing.assert_allclose(got.astype(np.float64), want, atol=tol, rtol=0)


@pytest.mark.usefixtures("graph_mode")      # bfloat16 is run by the interpreter in either mode
def test_bfloat16_matmul_truncates_its_float32_product_as_tf():
    """tf_fuzz features seed 130209: TF 2.21's CPU bfloat16 MatMul is a float32 product cut to its
    high 16 bits (toward zero). By hand: row [-0.63671875, 1.453125, 0.4140625] . column
    [-1.6328125, -0.578125, -0.1171875] = 1.0396423 - 0.8400879 - 0.0485229 = 0.151031494140625,
    whose bfloat16 neighbours are 0.150390625 (toward zero: TF's) and 0.1513671875 (nearest);
    the other three TF 2.21 printed as -1.640625, 3.171875, 3.703125 (exact 3.7176208: also cut)."""
    a = np.array([[-0.63671875, 1.453125, 0.4140625], [-1.9765625, -0.9375, 0.44140625]])
    b = np.array([[-0.7421875, -1.6328125], [-1.59375, -0.578125], [0.48046875, -0.1171875]])
    want = [[-1.640625, 0.150390625], [3.171875, 3.703125]]
    npd = tf.bfloat16.as_numpy_dtype
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(tf.bfloat16, [2, 3])
        y = tf.compat.v1.placeholder(tf.bfloat16, [3, 2])
        got, got_b = _run([tf.matmul(x, y), tf.matmul(x[None], y[None])[0]], {x: a.astype(npd), y: b.astype(npd)})
    assert got.astype(np.float64).tolist() == want
    assert got_b.astype(np.float64).tolist() == want
    assert np.isnan(tf.matmul(tf.constant([[np.nan]], tf.bfloat16), tf.constant([[1.0]], tf.bfloat16)).numpy()
                    .astype(np.float32)).all()


@pytest.mark.usefixtures("graph_mode")
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_sigmoid_hessian_batches_its_sigmoid_grad(dtype):
    """tf_fuzz features seed 130066: tf.hessians runs SigmoidGrad on a batch of one-hot rows
    against one y (broadcast); its kernel failed to reshape ('cannot reshape array of size 9
    into shape (3,)'). The hessian of sum(sigmoid(x)) is diag(s (1 - s) (1 - 2 s)), by hand."""
    dt = tf.as_dtype(dtype)
    x0 = np.array([-1.0, 0.5, 2.0])
    s = 1 / (1 + np.exp(-x0))
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(dt, [3])
        (h,) = tf.hessians(tf.reduce_sum(tf.sigmoid(x)), x)
        got = _run(h, {x: x0.astype(dt.as_numpy_dtype)})
    assert got.shape == (3, 3)
    np.testing.assert_allclose(got.astype(np.float64), np.diag(s * (1 - s) * (1 - 2 * s)), atol=4e-3, rtol=0)
