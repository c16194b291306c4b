"""Elementwise math ops in graph mode: values against numpy, static shapes,
broadcasting, and gradients against central finite differences (float64)."""
import numpy as np
import pytest

import jitgrad as tf
from _graph_testing import check_hessian, check_op, session

pytestmark = pytest.mark.usefixtures("graph_mode")

R = np.random.default_rng(7)


def _u(lo, hi, shape=(2, 3)):
    return R.uniform(lo, hi, shape)


def _away(x, points, margin=0.1):
    """x nudged away from the kinks in ``points`` (finite differences there are meaningless)."""
    x = np.array(x)
    for p in points:
        close = np.abs(x - p) < margin
        x[close] = p + np.where(x[close] >= p, margin, -margin)
    return x


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


# (name, function, numpy reference, input)
UNARY = [
    ("negative", tf.math.negative, np.negative, _u(-2, 2)),
    ("abs", tf.math.abs, np.abs, _away(_u(-2, 2), [0])),
    ("sign", tf.math.sign, np.sign, _away(_u(-2, 2), [0])),
    ("square", tf.math.square, np.square, _u(-2, 2)),
    ("sqrt", tf.math.sqrt, np.sqrt, _u(0.5, 3)),
    ("rsqrt", tf.math.rsqrt, lambda x: 1 / np.sqrt(x), _u(0.5, 3)),
    ("reciprocal", tf.math.reciprocal, lambda x: 1 / x, _u(0.5, 3)),
    ("exp", tf.math.exp, np.exp, _u(-2, 2)),
    ("expm1", tf.math.expm1, np.expm1, _u(-2, 2)),
    ("log", tf.math.log, np.log, _u(0.2, 3)),
    ("log1p", tf.math.log1p, np.log1p, _u(-0.5, 3)),
    ("sin", tf.math.sin, np.sin, _u(-3, 3)),
    ("cos", tf.math.cos, np.cos, _u(-3, 3)),
    ("tan", tf.math.tan, np.tan, _u(-1.2, 1.2)),
    ("tanh", tf.math.tanh, np.tanh, _u(-3, 3)),
    ("sigmoid", tf.math.sigmoid, _sigmoid, _u(-4, 4)),
    ("relu", tf.nn.relu, lambda x: np.maximum(x, 0), _away(_u(-2, 2), [0])),
    ("relu6", tf.nn.relu6, lambda x: np.clip(x, 0, 6), _away(_u(-3, 9), [0, 6])),
    # (alpha is a float32 attr, as TF's)
    ("leaky_relu", tf.nn.leaky_relu, lambda x: np.where(x > 0, x, float(np.float32(0.2)) * x), _away(_u(-2, 2), [0])),
    ("leaky_relu_alpha", lambda x: tf.nn.leaky_relu(x, alpha=0.05),
     lambda x: np.where(x > 0, x, float(np.float32(0.05)) * x),
     _away(_u(-2, 2), [0])),
    ("elu", tf.nn.elu, lambda x: np.where(x < 0, np.expm1(x), x), _away(_u(-2, 2), [0])),
    ("softplus", tf.nn.softplus, lambda x: np.log1p(np.exp(x)), _u(-4, 4)),
    ("identity", tf.identity, lambda x: x, _u(-2, 2)),
    ("neg_operator", lambda x: -x, np.negative, _u(-2, 2)),
    ("abs_operator", lambda x: abs(x), np.abs, _away(_u(-2, 2), [0])),
]


@pytest.mark.parametrize("name, fn, ref, x", UNARY, ids=[u[0] for u in UNARY])
def test_unary_value_and_gradient(name, fn, ref, x):
    check_op(fn, x, expected=ref(x), value_rtol=1e-14)


@pytest.mark.parametrize("name, fn, ref, x", UNARY, ids=[u[0] for u in UNARY])
def test_unary_float32_keeps_dtype_and_unknown_dims(name, fn, ref, x):
    x32 = x.astype(np.float32)
    g = tf.Graph()
    with g.as_default():
        p = tf.compat.v1.placeholder(tf.float32, [None, 3])
        y = fn(p)
        assert y.dtype == tf.float32
        assert y.shape.as_list() == [None, 3]
    out = session(g).run(y, {p: x32})
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, ref(x32.astype(np.float64)), rtol=2e-6, atol=1e-6)


def test_unary_names_are_tf_names():
    assert tf.math.softplus is tf.nn.softplus
    assert tf.sigmoid is tf.math.sigmoid is tf.nn.sigmoid
    assert tf.tanh is tf.math.tanh is tf.nn.tanh
    for n in ["negative", "abs", "sign", "square", "sqrt", "rsqrt", "exp", "log", "sin", "cos", "tan",
              "tanh", "sigmoid", "add", "subtract", "multiply", "divide", "truediv", "floordiv", "pow",
              "maximum", "minimum", "equal", "less", "greater", "logical_and", "where", "add_n"]:
        assert getattr(tf, n) is getattr(tf.math, n), n
    assert tf.math.mod is tf.math.floormod
    assert tf.math.expm1 is tf.expm1 and tf.math.log1p is tf.log1p


# ---------------------------------------------------------------- binary ops with broadcasting
SHAPES = [((2, 3), (2, 3)), ((2, 3), (3,)), ((2, 1), (1, 3)), ((), (2, 3)), ((3, 1, 2), (4, 1))]

BINARY = [
    ("add", tf.math.add, np.add, (-2, 2), (-2, 2)),
    ("subtract", tf.math.subtract, np.subtract, (-2, 2), (-2, 2)),
    ("multiply", tf.math.multiply, np.multiply, (-2, 2), (-2, 2)),
    ("divide", tf.math.divide, np.divide, (-2, 2), (0.5, 2)),
    ("truediv", tf.math.truediv, np.true_divide, (-2, 2), (-2, -0.5)),
    ("pow", tf.math.pow, np.power, (0.5, 2), (-1.5, 2)),
    ("maximum", tf.math.maximum, np.maximum, (-2, 2), (-2, 2)),
    ("minimum", tf.math.minimum, np.minimum, (-2, 2), (-2, 2)),
    ("squared_difference", tf.math.squared_difference, lambda a, b: (a - b) ** 2, (-2, 2), (-2, 2)),
    ("mod", tf.math.mod, np.mod, (-5, 5), (0.7, 2)),
    ("add_op", lambda a, b: a + b, np.add, (-2, 2), (-2, 2)),
    ("sub_op", lambda a, b: a - b, np.subtract, (-2, 2), (-2, 2)),
    ("mul_op", lambda a, b: a * b, np.multiply, (-2, 2), (-2, 2)),
    ("div_op", lambda a, b: a / b, np.divide, (-2, 2), (0.5, 2)),
    ("pow_op", lambda a, b: a ** b, np.power, (0.5, 2), (-1, 2)),
    ("mod_op", lambda a, b: a % b, np.mod, (-5, 5), (-2, -0.7)),
]


def _binary_inputs(sa, sb, ra, rb, seed):
    r = np.random.default_rng(seed)
    a = r.uniform(*ra, sa)
    b = r.uniform(*rb, sb)
    return np.asarray(a), np.asarray(b)


@pytest.mark.parametrize("name, fn, ref, ra, rb", BINARY, ids=[b[0] for b in BINARY])
@pytest.mark.parametrize("sa, sb", SHAPES, ids=[f"{a}x{b}" for a, b in SHAPES])
def test_binary_broadcast_value_and_gradient(name, fn, ref, ra, rb, sa, sb):
    a, b = _binary_inputs(sa, sb, ra, rb, hash((name, sa, sb)) % 1000)
    if name in ("maximum", "minimum"):
        b = np.where(np.abs(np.broadcast_to(a, np.broadcast_shapes(a.shape, b.shape)).min() - b) < 0.05, b + 0.1, b)
    if name.startswith("mod"):
        # keep clear of the discontinuities of floormod (x near a multiple of y)
        frac = np.mod(np.broadcast_to(a, np.broadcast_shapes(a.shape, b.shape)) / b, 1.0)
        if np.any((frac < 0.05) | (frac > 0.95)):
            a = a + 0.1 * np.abs(b).min()
    # check_op also asserts each gradient has its input's (un-broadcast) shape
    check_op(fn, a, b, expected=ref(a, b), value_rtol=1e-14, rtol=1e-5, atol=1e-6)


def test_binary_reflected_operators_with_python_scalars():
    x = np.array([1.0, 2.0, 4.0])
    cases = [
        (lambda p: 2 + p, 2 + x), (lambda p: 2 - p, 2 - x), (lambda p: 2 * p, 2 * x), (lambda p: 2 / p, 2 / x),
        (lambda p: 2 ** p, 2 ** x), (lambda p: 7 % p, 7 % x), (lambda p: 7 // p, 7 // x),
        (lambda p: p ** 2, x ** 2), (lambda p: p // 3, x // 3), (lambda p: -p, -x),
    ]
    g = tf.Graph()
    with g.as_default():
        p = tf.compat.v1.placeholder(tf.float64, [3])
        ys = [fn(p) for fn, _ in cases]
        for y in ys:
            assert y.dtype == tf.float64 and y.shape.as_list() == [3]
        grads = tf.gradients(ys[:6], p)
    vals, (gr,) = session(g).run([ys, grads], {p: x})
    for v, (_, ref) in zip(vals, cases):
        np.testing.assert_allclose(v, ref, rtol=1e-15)
    expected = 1 - 1 + 2 - 2 / x ** 2 + 2 ** x * np.log(2) - 7 // x
    np.testing.assert_allclose(gr, expected, rtol=1e-12)


def test_floordiv_values_ints_and_floats_and_no_gradient():
    a = np.array([[7, -7, 6], [-1, 0, 5]], np.int32)
    b = np.array([2, 2, -4], np.int32)
    fa = np.array([7.5, -7.5, 1.0])
    fb = np.array([2.0, 2.0, -0.3])
    g = tf.Graph()
    with g.as_default():
        pa, pb = tf.constant(a), tf.constant(b)
        qa, qb = tf.compat.v1.placeholder(tf.float64, [3]), tf.constant(fb)
        ops = [tf.math.floordiv(pa, pb), pa // pb, tf.math.floormod(pa, pb), pa % pb, qa // qb,
               tf.math.floordiv(qa, qb), qa % qb]
        assert [o.dtype for o in ops] == [tf.int32] * 4 + [tf.float64] * 3
        (gfd,) = tf.gradients(tf.math.floordiv(qa, qb), qa)
        assert gfd is None  # TF: FloorDiv has no gradient
        (gz,) = tf.gradients(tf.math.floordiv(qa, qb), qa, unconnected_gradients="zero")
    v = session(g).run(ops + [gz], {qa: fa})
    np.testing.assert_array_equal(v[0], a // b)
    np.testing.assert_array_equal(v[1], a // b)
    np.testing.assert_array_equal(v[2], np.mod(a, b))
    np.testing.assert_array_equal(v[3], np.mod(a, b))
    np.testing.assert_array_equal(v[4], np.floor(fa / fb))
    np.testing.assert_array_equal(v[6], np.mod(fa, fb))
    np.testing.assert_array_equal(v[7], np.zeros(3))


def test_integer_arithmetic_and_true_division_of_ints_is_float64():
    g = tf.Graph()
    with g.as_default():
        a = tf.constant([7, -3, 4])
        b = tf.constant([2, 2, 3])
        d = a / b
        assert d.dtype == tf.float64
        s, m, n = a + b, a * b, -a
        assert s.dtype == tf.int32
        e = tf.constant([2, 3], tf.int64) / tf.constant([4, 4], tf.int64)
        assert e.dtype == tf.float64
    vd, vs, vm, vn, ve = session(g).run([d, s, m, n, e])
    np.testing.assert_array_equal(vd, np.array([3.5, -1.5, 4 / 3]))
    np.testing.assert_array_equal(vs, [9, -1, 7])
    assert vs.dtype == np.int32
    np.testing.assert_array_equal(vm, [14, -6, 12])
    np.testing.assert_array_equal(vn, [-7, 3, -4])
    np.testing.assert_array_equal(ve, [0.5, 0.75])


def test_integer_division_by_zero_is_invalid_argument_at_run_time():
    g = tf.Graph()
    with g.as_default():
        a = tf.constant([1, 2])
        p = tf.compat.v1.placeholder(tf.int32, [2])
        y = a // p
    with pytest.raises(tf.errors.InvalidArgumentError):
        session(g).run(y, {p: [1, 0]})


# ---------------------------------------------------------------- comparisons / logical / where
def test_comparisons_and_logical_ops():
    x = np.array([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]])
    yv = np.array([2.0, 2.0, 2.0])
    g = tf.Graph()
    with g.as_default():
        p = tf.compat.v1.placeholder(tf.float64, [None, 3])
        q = tf.constant(yv)
        cmp = {
            "equal": tf.math.equal(p, q), "not_equal": tf.math.not_equal(p, q), "less": tf.math.less(p, q),
            "less_equal": tf.math.less_equal(p, q), "greater": tf.math.greater(p, q),
            "greater_equal": tf.math.greater_equal(p, q), "lt": p < q, "le": p <= q, "gt": p > q, "ge": p >= q,
            "scalar_gt": p > 1.5, "rscalar": 1.5 < p,
        }
        for t in cmp.values():
            assert t.dtype == tf.bool and t.shape.as_list() == [None, 3]
        a, b = cmp["less"], cmp["greater_equal"]
        logic = {"and": tf.math.logical_and(a, b), "or": tf.math.logical_or(a, cmp["equal"]),
                 "not": tf.math.logical_not(a), "xor": tf.math.logical_xor(a, cmp["scalar_gt"]),
                 "and_op": a & cmp["scalar_gt"], "or_op": a | cmp["scalar_gt"], "invert": ~a,
                 "xor_op": a ^ cmp["scalar_gt"]}
        with pytest.raises(TypeError):
            tf.math.logical_and(p, p)  # logical ops need bool
    out = session(g).run({"cmp": cmp, "logic": logic}, {p: x})
    ref = {"equal": x == yv, "not_equal": x != yv, "less": x < yv, "less_equal": x <= yv, "greater": x > yv,
           "greater_equal": x >= yv, "lt": x < yv, "le": x <= yv, "gt": x > yv, "ge": x >= yv,
           "scalar_gt": x > 1.5, "rscalar": 1.5 < x}
    for k, v in ref.items():
        np.testing.assert_array_equal(out["cmp"][k], v, err_msg=k)
        assert out["cmp"][k].dtype == np.bool_
    lt, gt15 = x < yv, x > 1.5
    np.testing.assert_array_equal(out["logic"]["and"], lt & (x >= yv))
    np.testing.assert_array_equal(out["logic"]["or"], lt | (x == yv))
    np.testing.assert_array_equal(out["logic"]["not"], ~lt)
    np.testing.assert_array_equal(out["logic"]["xor"], lt ^ gt15)
    np.testing.assert_array_equal(out["logic"]["and_op"], lt & gt15)
    np.testing.assert_array_equal(out["logic"]["or_op"], lt | gt15)
    np.testing.assert_array_equal(out["logic"]["invert"], ~lt)
    np.testing.assert_array_equal(out["logic"]["xor_op"], lt ^ gt15)


def test_comparison_gradients_are_none():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant([1.0, 2.0])
        assert tf.gradients(tf.cast(x > 1.0, tf.float32), x) == [None]


def test_where_broadcast_value_and_gradient():
    cond = np.array([[True, False, True], [False, False, True]])
    x = R.uniform(-1, 1, (2, 3))
    y = R.uniform(-1, 1, (3,))
    check_op(lambda c, a, b: tf.where(c, a, b), cond, x, y, expected=np.where(cond, x, y), wrt=[1, 2])
    check_op(lambda c, a, b: tf.where(c, a, b), cond[0], x, np.array(2.5), expected=np.where(cond[0], x, 2.5),
             wrt=[1, 2])


def test_where_requires_bool_condition_and_matching_dtypes():
    with tf.Graph().as_default():
        with pytest.raises(TypeError):
            tf.where(tf.constant([1.0]), tf.constant([1.0]), tf.constant([2.0]))
        with pytest.raises(TypeError):
            tf.where(tf.constant([True]), tf.constant([1.0]), tf.constant([2.0], tf.float64))


# ---------------------------------------------------------------- misc elementwise
def test_clip_by_value_value_and_gradient():
    x = _away(_u(-3, 3, (3, 4)), [-1, 1.5])
    check_op(lambda t: tf.clip_by_value(t, -1.0, 1.5), x, expected=np.clip(x, -1, 1.5))
    lo = np.array([-1.0, 0.0, -2.0, 0.5])
    check_op(lambda t, a: tf.clip_by_value(t, a, 2.0), x, _away(lo, list(x.ravel()), 0.02),
             expected=np.clip(x, _away(lo, list(x.ravel()), 0.02), 2.0))


def test_clip_by_value_rejects_broadcasting_the_clipped_tensor():
    with tf.Graph().as_default():
        with pytest.raises(ValueError):
            tf.clip_by_value(tf.constant([1.0, 2.0]), tf.zeros([3, 2]), 1.0)


def test_add_n_value_gradient_and_single_input():
    xs = [R.uniform(-1, 1, (2, 3)) for _ in range(3)]
    check_op(lambda a, b, c: tf.math.add_n([a, b, c]), *xs, expected=xs[0] + xs[1] + xs[2])
    g = tf.Graph()
    with g.as_default():
        a = tf.constant([1.0])
        assert tf.add_n([a]) is a
        assert tf.add_n([a, a]).op.type == "AddN"
        with pytest.raises(ValueError):
            tf.add_n([])
        with pytest.raises((ValueError, TypeError)):
            tf.add_n([a, tf.constant([1.0, 2.0])])


def test_stop_gradient_and_identity():
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float64, [3])
        s = tf.stop_gradient(x * x)
        i = tf.identity(x * x)
        assert s.op.type == "StopGradient" and i.op.type == "Identity"
        assert tf.gradients(s, x) == [None]
        (gi,) = tf.gradients(i, x)
        (gz,) = tf.gradients(s + x, x)
    v = session(g).run([s, i, gi, gz], {x: [1.0, 2.0, 3.0]})
    np.testing.assert_array_equal(v[0], [1, 4, 9])
    np.testing.assert_array_equal(v[1], [1, 4, 9])
    np.testing.assert_array_equal(v[2], [2, 4, 6])
    np.testing.assert_array_equal(v[3], [1, 1, 1])


def test_cast_values_and_gradient():
    x = np.array([1.7, -1.7, 2.5])
    check_op(lambda t: tf.cast(tf.cast(t, tf.float32), tf.float64) * 2.0, x,
             expected=x.astype(np.float32).astype(np.float64) * 2, eps=1e-2, rtol=1e-4)  # linear: big eps
    g = tf.Graph()
    with g.as_default():
        c = tf.constant(x)
        ints = tf.cast(c, tf.int32)
        back = tf.cast(ints, tf.float64)
        b = tf.cast(tf.constant([0.0, 2.0]), tf.bool)
        assert ints.dtype == tf.int32 and b.dtype == tf.bool
        assert tf.cast(c, tf.float64) is c
        assert tf.gradients(back, c) == [None]  # int casts cut the gradient
    vi, vb = session(g).run([ints, b])
    np.testing.assert_array_equal(vi, [1, -1, 2])  # truncation, as TF's Cast
    np.testing.assert_array_equal(vb, [False, True])


def test_mixed_dtypes_in_binary_ops_are_type_errors():
    with tf.Graph().as_default():
        f32 = tf.constant(1.0)
        f64 = tf.constant(1.0, tf.float64)
        i32 = tf.constant(1)
        for fn in (tf.add, tf.subtract, tf.multiply, tf.maximum, tf.pow, tf.equal, lambda a, b: a * b,
                   lambda a, b: a + b, lambda a, b: a / b, tf.math.squared_difference):
            with pytest.raises(TypeError):
                fn(f32, f64)
            with pytest.raises(TypeError):
                fn(f32, i32)
        with pytest.raises(TypeError):
            i32 * 2.5  # a float Python value cannot become an int32 tensor


@pytest.mark.parametrize("name, fn", [
    ("tanh", tf.tanh), ("sigmoid", tf.sigmoid), ("sin", tf.sin), ("exp", tf.exp),
    ("sqrt", lambda x: tf.sqrt(x + 2.0)), ("pow3", lambda x: x ** 3), ("div", lambda x: 1.0 / (x + 2.0)),
    ("softplus", tf.nn.softplus), ("log1p", lambda x: tf.math.log1p(x + 0.9)), ("rsqrt", lambda x: tf.math.rsqrt(x + 2.0)),
    ("tan", tf.tan), ("mixed", lambda x: x * x[::-1] * tf.reduce_sum(x)),
])
def test_second_derivatives_with_hessians(name, fn):
    check_hessian(fn, np.array([0.3, -0.7, 0.5]))


_SELU_SCALE = 1.0507009873554804934193349852946
_SELU_SCALE_ALPHA = 1.7580993408473768599402175208123


def _exp_nearest(x):
    """exp rounded once to x's type (TF's exp is correctly rounded for these tiny x)."""
    return np.exp(x.astype(np.longdouble)).astype(x.dtype)


def _selu_and_grads(x, w):
    """TF's Selu / SeluGrad and Elu / EluGrad written out in x's type: both gradients branch on the
    rounded OUTPUT (y < 0), not on x."""
    t = x.dtype.type
    em1 = _exp_nearest(x) - t(1)
    elu = np.where(x < 0, em1, x)
    selu = np.where(x < 0, t(_SELU_SCALE_ALPHA) * em1, x * t(_SELU_SCALE))
    d_elu = np.where(elu < 0, w * (elu + t(1)), w)
    d_selu = np.where(selu < 0, w * (selu + t(_SELU_SCALE_ALPHA)), w * t(_SELU_SCALE))
    return [selu, d_selu, elu, d_elu]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_selu_and_elu_branch_on_the_rounded_output_as_tf(dtype, graph_mode):
    # -1e-30 (and -1e-300 in float64): exp(x) - 1 rounds to 0, so the gradient is TF's scale
    # (selu 1.0507, elu 1), not scale * alpha; -1e-7: exp(-1e-7) rounds to 1 - 2^-23 in
    # float32, so elu is -2^-23 (TF's -1.1920929e-07), not -1e-7.
    x = np.array([-1e-30, -1e-300 if dtype == np.float64 else -1e-20, -1e-7, -1e-5, -1.0, -3.0, -0.0, 0.0, 2.0, -np.inf], dtype)
    w = np.linspace(1, 2, x.size).astype(dtype)

    def build(p, q):
        ys = [tf.nn.selu(p), tf.nn.elu(p)]
        return [ys[0], tf.gradients(ys[0], p, q)[0], ys[1], tf.gradients(ys[1], p, q)[0]]

    from _graph_testing import run_graph
    got = run_graph(build, [x, w], graph_mode)
    for g, want in zip(got, _selu_and_grads(x, w)):
        assert g.dtype == dtype
        np.testing.assert_array_equal(g, want)
    if dtype == np.float32:
        assert got[2][2] == -2.0 ** -23 and got[1][0] == np.float32(_SELU_SCALE) * w[0]


def test_selu_second_derivative_is_tf_selu_grad_grad(graph_mode):
    # TF's _SeluGradGrad: d/dx of w * (y + scale_alpha) is w * y'(x) = w * (y + scale_alpha) where y < 0
    x = np.array([-1e-30, -1.0, -3.0, 0.0, 2.0])
    w = np.array([1.0, 2.0, 3.0, 4.0, 5.0])

    def build(p):
        (g,) = tf.gradients(tf.nn.selu(p), p, w)
        return [g, tf.gradients(g, p)[0]]

    from _graph_testing import run_graph
    g, h = run_graph(build, [x], graph_mode)
    y = np.where(x < 0, _SELU_SCALE_ALPHA * (np.exp(x) - 1), _SELU_SCALE * x)   # exp(-1e-30) - 1 is 0
    np.testing.assert_allclose(g, np.where(y < 0, w * (y + _SELU_SCALE_ALPHA), w * _SELU_SCALE), rtol=1e-15)
    np.testing.assert_allclose(h, np.where(y < 0, w * (y + _SELU_SCALE_ALPHA), 0.0), rtol=1e-15)


def test_float32_tanh_is_one_from_tfs_clamp_on(graph_mode):
    # TF 2.21's float32 tanh (Eigen's ptanh_float) clamps |x| to 7.90738964f, where it is exactly
    # 1; the correctly rounded tanh is 1 - 2^-24 or less up to 9.0109, which rounds to 1 only
    # from there. Below the clamp the value is tanh's (correctly rounded here).
    c = np.float32(7.90738964080810547)
    below = np.nextafter(c, np.float32(0))
    x = np.array([c, 8.0, 8.5, 9.0, 9.01, 1e30, np.inf, below, 7.9, 3.0, 0.5, 1e-3], np.float32)
    x = np.concatenate([x, -x])
    from _graph_testing import run_graph
    (got,) = run_graph(lambda p: [tf.tanh(p)], [x], graph_mode)
    exact = np.tanh(x.astype(np.longdouble))
    want = np.where(np.abs(x) >= c, np.sign(x), exact).astype(np.float32)
    ulps = np.abs(got.astype(np.float64) - want) / np.spacing(np.abs(want))
    assert np.array_equal(got[np.abs(x) >= c], want[np.abs(x) >= c])
    assert np.all(ulps <= (0 if graph_mode == "interpret" else 3)), (x, got, want)
    assert got[7] < 1 and got[8] < 1        # 0.9999997 (TF 0.9999997, 0.9999998)


def test_tanh_saturation_in_float16_and_eager():
    # float16 is float32's value rounded (1 from far below the clamp); eager runs the interpreter's kernel
    x = np.array([7.9073896, 8.0, -9.0, 3.0], np.float32)
    got = tf.tanh(tf.constant(x)).numpy()
    assert np.array_equal(got[:3], [1.0, 1.0, -1.0]) and got[3] == np.float32(np.tanh(3.0))
    h = tf.tanh(tf.constant(x, tf.float16)).numpy()
    assert np.array_equal(h, np.tanh(x.astype(np.float16).astype(np.float64)).astype(np.float16))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_signed_zeros_of_sums_over_no_axes_and_relus(dtype, graph_mode):
    # TF 2.21: a sum / mean over no axes copies x (-0. stays -0.), a sum over some starts at +0.;
    # relu and relu6 give +0. at -0. (x > 0 ? x : 0) and keep NaN
    x = np.array([-0.0, 0.0, -2.5, 0.4, np.nan], dtype)
    from _graph_testing import run_graph
    got = run_graph(lambda p: [tf.reduce_sum(p, axis=[]), tf.reduce_mean(p, axis=[]), tf.reduce_sum(p[:1]),
                               tf.nn.relu(p), tf.nn.relu6(p)], [x], graph_mode)
    for g in got[:2]:
        np.testing.assert_array_equal(g, x)
        assert np.signbit(g).tolist() == np.signbit(x).tolist()
    assert got[2] == 0 and not np.signbit(got[2])
    for g in got[3:]:
        np.testing.assert_array_equal(g, np.array([0.0, 0.0, 0.0, 0.4, np.nan], dtype))
        assert not np.signbit(g[:2]).any()


def test_leaky_relu_alpha_is_a_float32_attr(graph_mode):
    # TF's LeakyRelu takes alpha as a float (32-bit) attr: in float64 the slope is float32(0.1)
    x = np.array([-2.5, -0.0, 1.0])
    from _graph_testing import run_graph
    y, g = run_graph(lambda p: [tf.nn.leaky_relu(p, 0.1), tf.gradients(tf.nn.leaky_relu(p, 0.1), p)[0]], [x],
                     graph_mode)
    a = float(np.float32(0.1))          # 0.10000000149011612
    np.testing.assert_array_equal(y, [-2.5 * a, -0.0, 1.0])
    np.testing.assert_array_equal(g, [a, a, 1.0])
    i = tf.nn.leaky_relu(tf.constant([-3, 2]), 0.1)     # integers: cast to float32 first, as TF
    assert i.dtype == tf.float32 and i.numpy().tolist() == [np.float32(-3) * np.float32(0.1), 2.0]


def test_sigmoid_above_zero_is_the_nearest_value_so_its_gradient_is_tfs(graph_mode):
    # sigmoid(x > 0) is 1 - sigmoid(-x) rounded once: the nearest double for these x (TF 2.21's
    # too); 1 / (1 + exp(-x)) was an ulp off at 20, which y * (1 - y) made 5e-8 relative
    from _graph_testing import run_graph
    x = np.array([20.0, 15.5, 30.0, 3.25, 0.0, -20.0])
    y, g = run_graph(lambda p: [tf.sigmoid(p), tf.gradients(tf.sigmoid(p), p)[0]], [x], graph_mode)
    want = (1 / (1 + np.exp(-x.astype(np.longdouble)))).astype(np.float64)
    np.testing.assert_array_equal(y[:5], want[:5])
    np.testing.assert_array_equal(g[:5], want[:5] * (1 - want[:5]))
    np.testing.assert_allclose(y[5], float(want[5]), rtol=3e-16)
    assert g[0] == 2.061153576897093e-09     # TF 2.21's value
