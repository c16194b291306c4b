"""tf.math.atan / asin / acos / atan2 (also tf.atan ... as TF 2.x exposes them): compiled
Sessions (vecmath's lowering) against the long-double reference over generated inputs with no
interpreter fallback, special values (atan2's full C99 grid against np.arctan2) and denormals
as TF 2.21, gradients as TF's math_grad.py rules checked against closed forms and finite
differences (atan2's summed down broadcast operands too), and values taken from real
TensorFlow."""
import os
import sys

import numpy as np
import pytest

import jitgrad as tf
from jitgrad import denormals

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _jit_harness as H  # noqa: E402
from _graph_testing import dtype_id, run_graph  # noqa: E402
from _op_accuracy import assert_compiled_within_ulp, assert_interpreter_agrees_in_class  # noqa: E402

tf1 = tf.compat.v1
UNARY = ["atan", "asin", "acos"]
NAMES = UNARY + ["atan2"]
F32, F64 = np.float32, np.float64
# vecmath's documented bounds (tests/test_vecmath.py ULP_BOUND), float32 / float64
ULP = {"atan": (0.75, 1.0), "asin": (0.75, 1.0), "acos": (0.75, 1.0), "atan2": (0.75, 1.0)}
NUMPY = {"atan": np.arctan, "asin": np.arcsin, "acos": np.arccos, "atan2": np.arctan2}
# d/dx in closed form (float64)
DERIV = {"atan": lambda x: 1 / (1 + x * x), "asin": lambda x: 1 / np.sqrt((1 - x) * (1 + x)),
         "acos": lambda x: -1 / np.sqrt((1 - x) * (1 + x))}


def _inputs(name, dt, n, seed):
    """Unary: every binade, random bit patterns, the main range, small magnitudes, specials
    and (asin / acos) points evenly over [-1, 1]; atan2: tests/_jit_harness.atan2_sweep. An
    odd count (vector epilogue)."""
    if name == "atan2":
        y, x = H.atan2_sweep(dt, n, seed=seed)
        k = len(y) - (len(y) % 2 == 0)
        return [y[:k], x[:k]]
    x = np.concatenate([H.sweep(name, dt, n, seed=seed), H.special_values(dt),
                        np.linspace(-1, 1, n // 4 + 1)]).astype(dt)
    return [x[: len(x) - (len(x) % 2 == 0)]]


def _op(name):
    return getattr(tf.math, name)


def test_names_as_tf():
    """TF 2.21 has all four both at top level and in tf.math (checked with real TF)."""
    for name in NAMES:
        assert getattr(tf, name) is getattr(tf.math, name)


@pytest.mark.parametrize("dtype", [F32, F64], ids=dtype_id)
@pytest.mark.parametrize("name", NAMES)
def test_compiled_within_bound_of_long_double_over_generated_inputs(name, dtype):
    """Both flush-denormals modes (their TF behaviour: test_denormals_as_tf); the interpreter
    agrees in class."""
    xs = _inputs(name, dtype, 1 << 13, seed=len(name) * 31 + (dtype == F64))
    assert_compiled_within_ulp(_op(name), name, xs, dtype, ULP[name][dtype == F64], denormal_results_flush=True)
    assert_interpreter_agrees_in_class(_op(name), xs)


@pytest.mark.parametrize("mode", ["compiled", "interpret"])
@pytest.mark.parametrize("dtype", [F32, F64], ids=dtype_id)
def test_special_values(dtype, mode):
    inf, nan, pi = np.inf, np.nan, np.pi
    fmax = np.finfo(dtype).max
    cases = {
        "atan": ([0.0, -0.0, inf, -inf, nan, fmax, -fmax, 1.0, -1.0],
                 [0.0, -0.0, pi / 2, -pi / 2, nan, pi / 2, -pi / 2, pi / 4, -pi / 4]),
        "asin": ([0.0, -0.0, 1.0, -1.0, 1.5, -2.0, inf, -inf, nan, 0.5, -0.5],
                 [0.0, -0.0, pi / 2, -pi / 2, nan, nan, nan, nan, nan, pi / 6, -pi / 6]),
        "acos": ([1.0, -1.0, 0.0, -0.0, 1.5, -2.0, inf, -inf, nan, 0.5, -0.5],
                 [0.0, pi, pi / 2, pi / 2, nan, nan, nan, nan, nan, pi / 3, 2 * pi / 3]),
    }
    xs = [np.array(cases[n][0], dtype) for n in UNARY]
    outs = run_graph(lambda *ps: [_op(n)(p) for n, p in zip(UNARY, ps)], xs, mode)
    for name, x, got in zip(UNARY, xs, outs):
        want = np.array(cases[name][1], dtype)
        assert np.array_equal(np.isnan(got), np.isnan(want)), (name, got)
        num = ~np.isnan(want)
        assert np.array_equal(np.signbit(got[num]), np.signbit(want[num])), (name, got)
        assert np.array_equal(got[want == 0], want[want == 0]), (name, got)
        # (pi / 2, pi / 6 ... to the bound of the long-double reference: the rounded pi, pi / 2
        # and pi / 4 of the type exactly, float64 acos(0.5) correctly rounded, not numpy's)
        err = H.ulp_error(got, H.reference(name, x), dtype)
        assert err.max() <= ULP[name][dtype == F64], (name, got, err)
        exact = np.isin(np.abs(want), [dtype(np.pi), dtype(np.pi / 2), dtype(np.pi / 4)])
        assert np.array_equal(got[exact], want[exact]), (name, got)


def _atan2_grid(dtype):
    fi = np.finfo(dtype)
    s = np.array([0.0, 1.0, 0.5, 2.5, 1e-3, 1e10, fi.max, fi.smallest_normal, np.inf], dtype)
    s = np.concatenate([s, -s, [np.nan]]).astype(dtype)
    y, x = (a.ravel().astype(dtype) for a in np.meshgrid(s, s))
    return y, x


@pytest.mark.parametrize("mode", ["compiled", "interpret"])
@pytest.mark.parametrize("dtype", [F32, F64], ids=dtype_id)
def test_atan2_special_value_grid(dtype, mode):
    """Every pair of zeros of both signs, infinities, NaN and finite values of both signs:
    where an operand is 0, inf or NaN, exactly np.arctan2 (C99 Annex F: atan2(+-0, +0) = +-0,
    atan2(+-0, -0) = +-pi, atan2(+-inf, +-inf) = +-pi/4 / +-3pi/4, ...), sign of zero
    included; elsewhere within the bound of the long-double reference."""
    y, x = _atan2_grid(dtype)
    (got,) = run_graph(lambda p, q: [tf.atan2(p, q)], [y, x], mode)
    want = np.arctan2(y, x)
    special = ~np.isfinite(x) | ~np.isfinite(y) | (x == 0) | (y == 0)
    eq = (got == want) & (np.signbit(got) == np.signbit(want)) | (np.isnan(got) & np.isnan(want))
    bad = special & ~eq
    assert not bad.any(), list(zip(y[bad], x[bad], got[bad], want[bad]))
    if mode == "compiled":
        ref = H.reference("atan2", y, x)
        if denormals.enabled():     # (atan2(tiny, 1e10): a denormal, flushed by its unrounded value)
            ref = np.where(np.abs(ref) < np.finfo(dtype).smallest_normal, np.copysign(H.LD(0), ref), ref)
        err = H.ulp_error(got, ref, dtype)
        assert err.max() <= ULP["atan2"][dtype == F64]


def test_atan2_broadcasts():
    y = np.array([[1.0], [-2.0], [0.0]], np.float32)
    x = np.array([3.0, -4.0, 0.0, -0.0], np.float32)
    for mode in ("compiled", "interpret"):
        (got,) = run_graph(lambda p, q: [tf.math.atan2(p, q)], [y, x], mode)
        assert got.shape == (3, 4)
        want = np.arctan2(y.astype(np.float64), x.astype(np.float64))   # (numpy's float32 rounds worse)
        np.testing.assert_allclose(got, want, rtol=np.finfo(np.float32).eps, atol=0)
        assert np.array_equal(np.signbit(got), np.signbit(want))


# Computed by running TensorFlow 2.21 (tensorflow-cpu, /work/benchenv) in graph mode
# (tf.function): y = tf.math.<name>(x) and GradientTape's dy/dx for these x; atan2(Y2, X2)
# with its two gradients.
TF_X = {"atan": [-1e5, -3.5, -0.75, 0.001, 0.5, 2.0, 1e20],
        "asin": [-0.999, -0.75, -0.1, 0.001, 0.5, 0.9, 0.9999],
        "acos": [-0.999, -0.75, -0.1, 0.001, 0.5, 0.9, 0.9999]}
Y2 = [1.0, -2.0, 0.5, -3.0, 1e-3, 7.0, -0.25]
X2 = [2.0, 1.0, -4.0, -0.5, 1e3, 0.0, -1e-2]
TF_VALUES = {
    F32: {
        "atan": ([-1.5707863569259644, -1.292496681213379, -0.6435011029243469, 0.0009999996982514858,
                  0.46364760398864746, 1.1071487665176392, 1.5707963705062866],
                 [1.000000013351432e-10, 0.07547169923782349, 0.6399999856948853, 0.9999990463256836,
                  0.800000011920929, 0.20000000298023224, 0.0]),
        "asin": ([-1.526071548461914, -0.8480620980262756, -0.1001674234867096, 0.0010000001639127731,
                  0.5235987901687622, 1.1197694540023804, 1.5566529035568237],
                 [22.36648941040039, 1.5118579864501953, 1.005037784576416, 1.0000005960464478,
                  1.154700517654419, 2.294157028198242, 70.7048110961914]),
        "acos": ([3.096867799758911, 2.418858528137207, 1.6709637641906738, 1.5697963237762451,
                  1.0471975803375244, 0.4510268568992615, 0.014143426902592182],
                 [-22.36648941040039, -1.5118579864501953, -1.005037784576416, -1.0000005960464478,
                  -1.154700517654419, -2.294157028198242, -70.7048110961914]),
        "atan2": ([0.46364760398864746, -1.1071487665176392, 3.017237663269043, -1.7359449863433838,
                   9.999999974752427e-07, 1.5707963705062866, -1.6107749938964844],
                  [0.4000000059604645, 0.20000000298023224, -0.2461538463830948, -0.054054055362939835,
                   0.0010000000474974513, 0.0, -0.15974439680576324],
                  [-0.20000000298023224, 0.4000000059604645, -0.03076923079788685, 0.3243243396282196,
                   -1.000000082740371e-09, -0.1428571343421936, 3.993610143661499]),
    },
    F64: {
        "atan": ([-1.570786326794897, -1.2924966677897851, -0.6435011087932845, 0.0009999996666668668,
                  0.4636476090008061, 1.1071487177940904, 1.5707963267948966],
                 [9.999999999e-11, 0.07547169811320754, 0.64, 0.9999990000010001, 0.8, 0.2, 1e-40]),
        "asin": ([-1.526071239626163, -0.848062078981481, -0.1001674211615598, 0.0010000001666667416,
                  0.5235987755982989, 1.1197695149986342, 1.5566540733173846],
                 [22.36627204212937, 1.5118578920369088, 1.005037815259212, 1.0000005000003749,
                  1.1547005383792517, 2.294157338705618, 70.71244595191452]),
        "acos": ([3.09686756642106, 2.4188584057763776, 1.6709637479564565, 1.56979632662823,
                  1.0471975511965979, 0.45102681179626236, 0.014142253477512098],
                 [-22.36627204212937, -1.5118578920369088, -1.005037815259212, -1.0000005000003749,
                  -1.1547005383792517, -2.294157338705618, -70.71244595191452]),
        "atan2": ([0.4636476090008061, -1.1071487177940904, 3.017237659043032, -1.7359450042095235,
                   9.999999999996666e-07, 1.5707963267948966, -1.6107750139181867],
                  [0.4, 0.2, -0.24615384615384617, -0.05405405405405406, 0.000999999999999, 0.0,
                   -0.1597444089456869],
                  [-0.2, 0.4, -0.03076923076923077, 0.32432432432432434, -9.99999999999e-10,
                   -0.14285714285714285, 3.993610223642172]),
    },
}


@pytest.mark.parametrize("mode", ["compiled", "interpret"])
@pytest.mark.parametrize("dtype", [F32, F64], ids=dtype_id)
def test_values_and_gradients_match_real_tf(dtype, mode):
    """Within a few ulp of TF's (its kernels round differently, not more: float64 acos(0.5)
    and ours are the correctly rounded one, numpy's is not); the gradients to the rules'
    conditioning near +-1 (1 - x^2 cancels: 2x^2 / |1 - x^2|), as TF computes them too."""
    eps = np.finfo(dtype).eps
    xs = [np.array(TF_X[n], dtype) for n in UNARY] + [np.array(Y2, dtype), np.array(X2, dtype)]

    def build(*ps):
        ys = [_op(n)(p) for n, p in zip(UNARY, ps)]
        z = tf.atan2(ps[3], ps[4])
        return ys + [z] + [tf.gradients(tf.reduce_sum(y), p)[0] for y, p in zip(ys, ps)] + \
            tf.gradients(tf.reduce_sum(z), [ps[3], ps[4]])
    out = run_graph(build, xs, mode)
    for k, name in enumerate(NAMES):
        want = [np.array(v, dtype) for v in TF_VALUES[dtype][name]]
        np.testing.assert_allclose(out[k], want[0], rtol=3 * eps, atol=0, err_msg=name)
        grads = [out[4 + k]] if name != "atan2" else out[7:9]
        for got, w in zip(grads, want[1:]):
            x = xs[k].astype(np.float64)
            cond = 2 * x * x / np.abs(1 - x * x) if name in ("asin", "acos") else np.ones_like(w)
            with np.errstate(all="ignore"):
                rel = np.abs(got.astype(np.float64) - w) / np.abs(w)
            assert np.all((got == w) | (rel <= 4 * eps * (1 + cond))), (name, got, w)


def test_eager_matches_graph():
    x = np.array([-2.0, -0.3, 0.0, 0.4, 3.0], np.float32)
    for name in UNARY:
        v = x / 4 if name != "atan" else x
        eager = _op(name)(tf.constant(v)).numpy()
        (graph,) = run_graph(lambda p: [_op(name)(p)], [v], "compiled")
        np.testing.assert_allclose(eager, graph, rtol=3e-7, atol=0)
    eager = tf.atan2(tf.constant(x), tf.constant(x[::-1])).numpy()
    (graph,) = run_graph(lambda p, q: [tf.atan2(p, q)], [x, x[::-1].copy()], "compiled")
    np.testing.assert_allclose(eager, graph, rtol=3e-7, atol=0)


def _grad_inputs(name, dtype, n, rng):
    lo, hi = {"atan": (-20, 20), "asin": (-0.95, 0.95), "acos": (-0.95, 0.95)}[name]
    return rng.uniform(lo, hi, n).astype(dtype)


@pytest.mark.parametrize("mode", ["compiled", "interpret"])
@pytest.mark.parametrize("dtype", [F32, F64], ids=dtype_id)
@pytest.mark.parametrize("name", UNARY)
def test_gradient_matches_closed_form(name, dtype, mode):
    """tf.gradients of sum(w * f(x)) against w * f'(x) in float64, f' in closed form; second
    derivatives (the rules are built of ops that have gradients) against f'' by central
    differences of the closed-form f'."""
    rng = np.random.default_rng(len(name))
    x = _grad_inputs(name, dtype, 515, rng)
    w = rng.uniform(0.5, 2, x.size).astype(dtype)

    def build(p, q):
        y = _op(name)(p)
        (g,) = tf.gradients(tf.reduce_sum(y * q), p)
        (h,) = tf.gradients(tf.reduce_sum(g), p)
        return [g, h]
    g, h = run_graph(build, [x, w], mode)
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    eps = np.finfo(dtype).eps
    np.testing.assert_allclose(g, w64 * DERIV[name](x64), rtol=16 * eps, atol=0)
    d = 1e-6 * np.maximum(np.abs(x64), 1)
    h_ref = w64 * (DERIV[name](x64 + d) - DERIV[name](x64 - d)) / (2 * d)
    np.testing.assert_allclose(h, h_ref, rtol=1e-5 if dtype == F64 else 2e-4, atol=1e-6 * np.abs(h_ref).max())


@pytest.mark.parametrize("mode", ["compiled", "interpret"])
@pytest.mark.parametrize("dtype", [F32, F64], ids=dtype_id)
def test_atan2_gradient_matches_closed_form_with_broadcasting(dtype, mode):
    """TF's _Atan2Grad: d/dy = x / (x^2 + y^2), d/dx = -y / (x^2 + y^2), each summed down to
    its operand's shape (y (5, 1) against x (7,)); second derivatives by central differences."""
    rng = np.random.default_rng(3)
    y = rng.uniform(-3, 3, (5, 1)).astype(dtype)
    x = rng.uniform(-3, 3, 7).astype(dtype)
    w = rng.uniform(0.5, 2, (5, 7)).astype(dtype)

    def build(p, q, r):
        z = tf.atan2(p, q)
        gy, gx = tf.gradients(tf.reduce_sum(z * r), [p, q])
        (hy,) = tf.gradients(tf.reduce_sum(gy), p)
        return [gy, gx, hy]
    gy, gx, hy = run_graph(build, [y, x, w], mode)
    assert gy.shape == (5, 1) and gx.shape == (7,)
    Y, X, W = y.astype(np.float64), x.astype(np.float64), w.astype(np.float64)
    r2 = X * X + Y * Y
    eps = np.finfo(dtype).eps
    np.testing.assert_allclose(gy, (W * X / r2).sum(axis=1, keepdims=True), rtol=64 * eps, atol=64 * eps)
    np.testing.assert_allclose(gx, (-W * Y / r2).sum(axis=0), rtol=64 * eps, atol=64 * eps)
    d = 1e-6
    dgy = lambda v: (W * X / (X * X + v * v)).sum(axis=1, keepdims=True)   # noqa: E731
    np.testing.assert_allclose(hy, (dgy(Y + d) - dgy(Y - d)) / (2 * d), rtol=1e-5 if dtype == F64 else 2e-3,
                               atol=1e-6 if dtype == F64 else 1e-3)


@pytest.mark.parametrize("name", NAMES)
def test_gradient_matches_finite_differences_float64(name):
    """Central differences of the compiled forward pass itself (float64)."""
    rng = np.random.default_rng(7 + len(name))
    if name == "atan2":
        y, x = rng.uniform(-3, 3, 257), rng.uniform(-3, 3, 257)
        h = 1e-6
        f = lambda p, q: [tf.atan2(p, q)]   # noqa: E731
        gy, gx = run_graph(lambda p, q: tf.gradients(tf.reduce_sum(tf.atan2(p, q)), [p, q]), [y, x], "compiled")
        for g, (up, down) in ((gy, ([y + h, x], [y - h, x])), (gx, ([y, x + h], [y, x - h]))):
            (a,), (b,) = run_graph(f, up, "compiled"), run_graph(f, down, "compiled")
            np.testing.assert_allclose(g, (a - b) / (2 * h), rtol=1e-5, atol=1e-8)
        return
    x = _grad_inputs(name, F64, 257, rng)
    h = 1e-5 * np.maximum(np.abs(x), 1) if name == "atan" else np.full(x.size, 1e-6)
    f = lambda p: [_op(name)(p)]   # noqa: E731
    (up,), (down,) = run_graph(f, [x + h], "compiled"), run_graph(f, [x - h], "compiled")
    (g,) = run_graph(lambda p: tf.gradients(tf.reduce_sum(_op(name)(p)), p), [x], "compiled")
    np.testing.assert_allclose(g, (up - down) / (2 * h), rtol=1e-6)


@pytest.mark.parametrize("mode", ["compiled", "interpret"])
@pytest.mark.parametrize("dtype", [F32, F64], ids=dtype_id)
def test_denormals_as_tf(dtype, mode):
    """TF 2.21's graph kernels (FTZ + DAZ), checked with real TF: asin returns a denormal x
    itself; atan does in float32 and gives a zero of its sign in float64; acos gives pi/2;
    atan2 reads a denormal as a zero of its sign: atan2(d, -1) = +-pi, atan2(1, d) = pi/2,
    atan2(d, 1) = +-0 (TF's float64 kernel too; its float32 one returns d there, and NaN for
    atan2(d, d): not followed, README). With the mode off (numpy's numerics) all compute."""
    tiny = np.finfo(dtype).smallest_normal
    d = np.array([tiny / 3, -tiny / 7], dtype)
    one = np.ones_like(d)
    build = lambda p, q: [tf.atan(p), tf.asin(p), tf.acos(p), tf.atan2(p, q), tf.atan2(p, -q),   # noqa: E731
                          tf.atan2(q, p)]
    pi, pi2 = dtype(np.pi), dtype(np.pi / 2)
    for flush in (True, False):
        denormals.set_enabled(flush)
        at, asn, ac, a2p, a2n, a2q = run_graph(build, [d, one], mode)
        assert asn.tobytes() == d.tobytes()
        want_at = d if (dtype == F32 or not flush) else np.array([0.0, -0.0], dtype)
        assert at.tobytes() == want_at.tobytes(), (flush, at)
        assert ac.tolist() == [pi2, pi2]
        want_a2p = np.array([0.0, -0.0], dtype) if flush else d
        assert a2p.tobytes() == want_a2p.tobytes(), (flush, a2p)
        assert a2n.tolist() == [pi, -pi]
        assert a2q.tolist() == [pi2, pi2]


@pytest.mark.parametrize("dtype", [np.float16, tf.bfloat16, np.complex64, np.complex128], ids=dtype_id)
def test_half_and_complex_types(dtype):
    """float16 / bfloat16 (computed in float32 and rounded once) and complex (numpy's kernel;
    atan2 takes no complex, as TF) run, as TF allows them."""
    np_dt = tf.as_dtype(dtype).as_numpy_dtype if dtype is tf.bfloat16 else dtype
    x = np.array([0.25, 0.5, 0.75], np.float64)
    cplx = np.dtype(np_dt).kind == "c"
    if cplx:
        x = x + 0.5j * x[::-1]
    rtol = 1e-2 if np.dtype(np_dt).itemsize == 2 else 1e-6
    for name in UNARY:
        got = _op(name)(tf.constant(x.astype(np_dt))).numpy()
        assert got.dtype == np.dtype(np_dt)
        want = NUMPY[name](x.astype(np.complex128 if cplx else np.float64))
        np.testing.assert_allclose(got.astype(want.dtype), want, rtol=rtol)
    if cplx:
        with pytest.raises((TypeError, tf.errors.InvalidArgumentError)):
            tf.atan2(tf.constant(x.astype(np_dt)), tf.constant(x.astype(np_dt)))
    else:
        for mode in ("compiled", "interpret"):
            (got,) = run_graph(lambda p, q: [tf.atan2(p, q)], [x.astype(np_dt), -x[::-1].astype(np_dt)], mode,
                          fallback_ok=True)
            assert got.dtype == np.dtype(np_dt)
            np.testing.assert_allclose(got.astype(np.float64), np.arctan2(x, -x[::-1]), rtol=rtol)


def test_integer_input_is_a_type_error():
    g = tf.Graph()
    with g.as_default():
        p = tf1.placeholder(tf.int32, [2])
        for name in UNARY:
            with pytest.raises(TypeError):
                _op(name)(p)
        with pytest.raises(TypeError):
            tf.atan2(p, p)
