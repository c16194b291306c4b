"""tf.math.sinh / cosh / asinh / acosh / atanh (also tf.sinh ... as TF 2.x exposes them):
compiled Sessions (vecmath's lowering) against the long-double reference over generated
inputs with no interpreter fallback, special values and denormals as TF 2.21, gradients as
TF's math_grad.py rules checked against closed forms and finite differences, and values
taken from real TensorFlow."""
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
NAMES = ["sinh", "cosh", "asinh", "acosh", "atanh"]
F32, F64 = np.float32, np.float64
# vecmath's documented bounds (tests/test_vecmath.py ULP_BOUND), float32 / float64
ULP = {"sinh": (1.75, 1.5), "cosh": (1.75, 1.5), "asinh": (1.25, 1.25), "acosh": (1.25, 1.25),
       "atanh": (1.0, 1.0)}
NUMPY = {"sinh": np.sinh, "cosh": np.cosh, "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh}
# d/dx in closed form (float64), independent of the rules' formulas (which go through y)
DERIV = {"sinh": np.cosh, "cosh": np.sinh, "asinh": lambda x: 1 / np.sqrt(1 + x * x),
         "acosh": lambda x: 1 / np.sqrt((x - 1) * (x + 1)), "atanh": lambda x: 1 / ((1 - x) * (1 + x))}


def _inputs(name, dt, n, seed):
    """Every binade (dense bit-pattern sweep), random bit patterns, the main range and small
    magnitudes (tests/_jit_harness.sweep), special values; an odd count (vector epilogue)."""
    x = np.concatenate([H.sweep(name, dt, n, seed=seed), H.special_values(dt)]).astype(dt)
    return x[: len(x) - (len(x) % 2 == 0)]


def test_names_as_tf():
    """TF 2.21 has all five both at top level and in tf.math (checked with real TF)."""
    for name in NAMES:
        assert getattr(tf, name) is getattr(tf.math, name)


@pytest.mark.parametrize("dtype", [F32, F64], ids=dtype_id)
@pytest.mark.parametrize("name", NAMES)
def test_compiled_within_bound_of_long_double_over_generated_inputs(name, dtype):
    """Both flush-denormals modes (their TF behaviour: test_denormals_as_tf); the interpreter
    agrees in class."""
    x = _inputs(name, dtype, 1 << 14, seed=len(name) * 31 + (dtype == F64))
    op = getattr(tf.math, name)
    assert_compiled_within_ulp(op, name, [x], dtype, ULP[name][dtype == F64])
    assert_interpreter_agrees_in_class(op, [x])


@pytest.mark.parametrize("mode", ["compiled", "interpret"])
@pytest.mark.parametrize("dtype", [F32, F64], ids=dtype_id)
def test_special_values(dtype, mode):
    inf, nan = np.inf, np.nan
    big = 89.5 if dtype == F32 else 710.6       # sinh / cosh overflow just below (89.42 / 710.48)
    fin = 89.4 if dtype == F32 else 710.4
    cases = {
        "sinh": ([0.0, -0.0, inf, -inf, nan, big, -big, fin, -fin], [0.0, -0.0, inf, -inf, nan, inf, -inf]),
        "cosh": ([0.0, -0.0, inf, -inf, nan, big, -big, fin, -fin], [1.0, 1.0, inf, inf, nan, inf, inf]),
        "asinh": ([0.0, -0.0, inf, -inf, nan, 1e30, -1e30], [0.0, -0.0, inf, -inf, nan]),
        "acosh": ([1.0, 0.0, -0.0, 0.5, -1.0, inf, -inf, nan, 1e30], [0.0, nan, nan, nan, nan, inf, nan, nan]),
        "atanh": ([0.0, -0.0, 1.0, -1.0, 1.5, -2.0, inf, -inf, nan], [0.0, -0.0, inf, -inf, nan, nan, nan, nan, nan]),
    }
    xs = [np.array(cases[n][0], dtype) for n in NAMES]
    outs = run_graph(lambda *ps: [getattr(tf.math, n)(p) for n, p in zip(NAMES, ps)], xs, mode)
    for name, x, got in zip(NAMES, xs, outs):
        want = np.array(cases[name][1], dtype)
        k = len(want)
        assert np.array_equal(got[:k], want, equal_nan=True), (name, got)
        assert np.array_equal(np.signbit(got[:k]), np.signbit(want)) or name in ("acosh", "atanh"), name
        with np.errstate(all="ignore"):
            ref = NUMPY[name](x.astype(np.longdouble))
        rest = got[k:]
        assert np.all(np.isfinite(rest)), (name, rest)
        np.testing.assert_allclose(rest, ref[k:].astype(np.float64), rtol=4 * np.finfo(dtype).eps)


# Computed by running TensorFlow 2.21 (tensorflow-cpu, /work/benchenv) in graph mode
# (tf.function): y = tf.math.<name>(x) and GradientTape's dy/dx for these x.
TF_X = {"sinh": [-3.5, -0.75, 0.001, 0.5, 2.0, 10.0, 89.0],
        "cosh": [-3.5, -0.75, 0.001, 0.5, 2.0, 10.0, 89.0],
        "asinh": [-1e5, -3.5, -0.75, 0.001, 0.5, 2.0, 1e20],
        "acosh": [1.0, 1.001, 1.5, 2.0, 10.0, 1e5, 1e20],
        "atanh": [-0.999, -0.75, -0.1, 0.001, 0.5, 0.9, 0.9999]}
TF_VALUES = {
    F32: {
        "sinh": ([-16.542627334594727, -0.8223167061805725, 0.0010000001639127731, 0.5210952758789062,
                  3.6268603801727295, 11013.232421875, 2.2448063889081578e+38],
                 [16.572824478149414, 1.2946833372116089, 1.0000004768371582, 1.1276259422302246,
                  3.7621958255767822, 11013.232421875, 2.2448063889081578e+38]),
        "cosh": ([16.572824478149414, 1.2946833372116089, 1.0000004768371582, 1.1276259422302246,
                  3.7621958255767822, 11013.232421875, 2.2448063889081578e+38],
                 [-16.542627334594727, -0.8223167061805725, 0.0010000001639127731, 0.5210952758789062,
                  3.6268603801727295, 11013.232421875, 2.2448063889081578e+38]),
        "asinh": ([-12.206071853637695, -1.965720534324646, -0.6931471824645996, 0.0009999999310821295,
                   0.4812118411064148, 1.4436354637145996, 46.74484634399414],
                  [1.0000007932831068e-05, 0.2747211158275604, 0.800000011920929, 0.9999995231628418,
                   0.8944271802902222, 0.44721364974975586, 1.0000027147636502e-20]),
        "acosh": ([0.0, 0.044718679040670395, 0.9624236822128296, 1.316957950592041, 2.993222951889038,
                   12.206072807312012, 46.74484634399414],
                  [np.inf, 22.354568481445312, 0.8944270610809326, 0.5773502588272095, 0.10050376504659653,
                   9.99999883788405e-06, 1.0000027147636502e-20]),
        "atanh": ([-3.8002076148986816, -0.9729551076889038, -0.10033534467220306, 0.0010000003967434168,
                   0.5493061542510986, 1.4722193479537964, 4.951635837554932],
                  [500.2598876953125, 2.2857143878936768, 1.0101009607315063, 1.000001072883606,
                   1.3333333730697632, 5.263156414031982, 4999.17041015625]),
    },
    F64: {
        "sinh": ([-16.542627287634996, -0.82231673193583, 0.001000000166666675, 0.5210953054937474,
                  3.626860407847019, 11013.232874703393, 2.2448064095871728e+38],
                 [16.572824671057315, 1.2946832846768448, 1.0000005000000416, 1.1276259652063807,
                  3.7621956910836314, 11013.232920103324, 2.2448064095871728e+38]),
        "cosh": ([16.572824671057315, 1.2946832846768448, 1.0000005000000416, 1.1276259652063807,
                  3.7621956910836314, 11013.232920103324, 2.2448064095871728e+38],
                 [-16.542627287634996, -0.82231673193583, 0.001000000166666675, 0.5210953054937474,
                  3.626860407847019, 11013.232874703393, 2.2448064095871728e+38]),
        "asinh": ([-12.206072645555174, -1.9657204716496515, -0.6931471805599453, 0.0009999998333334083,
                   0.48121182505960347, 1.4436354751788103, 46.74484904044086],
                  [9.999999999499992e-06, 0.27472112789737807, 0.8, 0.999999500000375, 0.8944271909999159,
                   0.4472135954999579, 9.999999999999974e-21]),
        "acosh": ([0.0, 0.04471763360830684, 0.9624236501192069, 1.3169578969248166, 2.993222846126381,
                   12.206072645505174, 46.74484904044086],
                  [np.inf, 22.35509170049603, 0.8944271909999159, 0.5773502691896258, 0.10050378152592121,
                   1.0000000000500003e-05, 9.999999999999974e-21]),
        "atanh": ([-3.8002011672502, -0.9729550745276566, -0.10033534773107558, 0.0010000003333335333,
                   0.5493061443340548, 1.4722194895832204, 4.951718775643098],
                  [500.250125062538, 2.2857142857142856, 1.0101010101010102, 1.000001000001, 1.3333333333333333,
                   5.263157894736843, 5000.250012502432]),
    },
}


@pytest.mark.parametrize("mode", ["compiled", "interpret"])
@pytest.mark.parametrize("dtype", [F32, F64], ids=dtype_id)
def test_values_and_gradients_match_real_tf(dtype, mode):
    """Within a few ulp of TF's (its Eigen kernels round differently, not more); the
    gradients of ill-conditioned points (atanh near +-1: 1 - x^2 cancels) to their
    conditioning as TF computes them too."""
    eps = np.finfo(dtype).eps
    xs = [np.array(TF_X[n], dtype) for n in NAMES]

    def build(*ps):
        ys = [getattr(tf.math, n)(p) for n, p in zip(NAMES, ps)]
        return ys + [tf.gradients(tf.reduce_sum(y), p)[0] for y, p in zip(ys, ps)]
    out = run_graph(build, xs, mode)
    for k, name in enumerate(NAMES):
        y_tf, g_tf = (np.array(v, dtype) for v in TF_VALUES[dtype][name])
        np.testing.assert_allclose(out[k], y_tf, rtol=3 * eps, atol=0, err_msg=name)
        # the rules' conditioning: cosh(x) / sinh(x) of a rounded x (sinh, cosh), 1 / cosh(y)
        # of a rounded y (asinh, acosh: |y| ulp), 1 / (1 - x^2) (atanh: 2x^2 / |1 - x^2|)
        x, y = xs[k].astype(np.float64), y_tf.astype(np.float64)
        got, want = out[5 + k].astype(np.float64), g_tf.astype(np.float64)
        same = got == want                      # (acosh(1): inf)
        with np.errstate(all="ignore"):
            cond = {"sinh": np.abs(x), "cosh": np.abs(x), "asinh": np.abs(y), "acosh": np.abs(y),
                    "atanh": 2 * x * x / np.abs(1 - x * x)}[name]
            rel = np.abs(got - want) / np.abs(want)
        assert np.all(same | (rel <= 4 * eps * (1 + cond))), (name, got, want)


def test_eager_matches_graph():
    x = np.array([-2.0, -0.3, 0.0, 0.4, 3.0], np.float32)
    for name in NAMES:
        v = np.abs(x) + 1 if name == "acosh" else (x / 4 if name == "atanh" else x)
        eager = getattr(tf, name)(tf.constant(v)).numpy()
        (graph,) = run_graph(lambda p: [getattr(tf, name)(p)], [v], "compiled")
        np.testing.assert_allclose(eager, graph, rtol=3e-7, atol=0)


def _grad_inputs(name, dtype, n, rng):
    lo, hi = {"sinh": (-20, 20), "cosh": (-20, 20), "asinh": (-50, 50), "acosh": (1.1, 50),
              "atanh": (-0.9, 0.9)}[name]
    return rng.uniform(lo, hi, n).astype(dtype)


@pytest.mark.parametrize("mode", ["compiled", "interpret"])
@pytest.mark.parametrize("dtype", [F32, F64], ids=dtype_id)
@pytest.mark.parametrize("name", NAMES)
def test_gradient_matches_closed_form(name, dtype, mode):
    """tf.gradients of sum(w * f(x)) against w * f'(x) in float64, f' in closed form (not the
    rules' y-based formulas); second derivatives (the rules are built of ops that have
    gradients) against f'' by central differences of the closed-form f'."""
    rng = np.random.default_rng(len(name))
    x = _grad_inputs(name, dtype, 515, rng)
    w = rng.uniform(0.5, 2, x.size).astype(dtype)

    def build(p, q):
        y = getattr(tf.math, name)(p)
        (g,) = tf.gradients(tf.reduce_sum(y * q), p)
        (h,) = tf.gradients(tf.reduce_sum(g), p)
        return [g, h]
    g, h = run_graph(build, [x, w], mode)
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    eps = np.finfo(dtype).eps
    np.testing.assert_allclose(g, w64 * DERIV[name](x64), rtol=16 * eps, atol=0)
    d = 1e-6 * np.maximum(np.abs(x64), 1)
    h_ref = w64 * (DERIV[name](x64 + d) - DERIV[name](x64 - d)) / (2 * d)
    np.testing.assert_allclose(h, h_ref, rtol=1e-5 if dtype == F64 else 2e-4,
                               atol=1e-6 * np.abs(h_ref).max())


@pytest.mark.parametrize("name", NAMES)
def test_gradient_matches_finite_differences_float64(name):
    """Central differences of the compiled forward pass itself (float64)."""
    rng = np.random.default_rng(7 + len(name))
    x = _grad_inputs(name, F64, 257, rng)
    h = 1e-5 * np.maximum(np.abs(x), 1)
    f = lambda p: [getattr(tf.math, name)(p)]   # noqa: E731
    (up,), (down,) = run_graph(f, [x + h], "compiled"), run_graph(f, [x - h], "compiled")
    (g,) = run_graph(lambda p: tf.gradients(tf.reduce_sum(getattr(tf.math, name)(p)), p), [x], "compiled")
    np.testing.assert_allclose(g, (up - down) / (2 * h), rtol=1e-6)


@pytest.mark.parametrize("mode", ["compiled", "interpret"])
@pytest.mark.parametrize("dtype", [F32, F64], ids=dtype_id)
def test_denormals_as_tf(dtype, mode):
    """TF 2.21's graph kernels (FTZ + DAZ), checked with real TF: sinh and asinh return a
    denormal x itself, atanh flushes it to a zero of its sign, cosh gives 1. With the mode off
    (numpy's numerics) all three odd functions return x."""
    tiny = np.finfo(dtype).smallest_normal
    d = np.array([tiny / 3, -tiny / 7, 0.5, -0.5], dtype)
    build = lambda p: [tf.sinh(p), tf.asinh(p), tf.atanh(p), tf.cosh(p)]   # noqa: E731
    for flush in (True, False):
        denormals.set_enabled(flush)
        s, a, t, c = run_graph(build, [d], mode)
        assert s[:2].tobytes() == d[:2].tobytes()
        assert a[:2].tobytes() == d[:2].tobytes()
        want_t = np.array([0.0, -0.0], dtype) if flush else d[:2]
        assert t[:2].tobytes() == want_t.tobytes(), (flush, t)
        assert c[:2].tolist() == [1.0, 1.0]
        for got, f in zip((s, a, t, c), (np.sinh, np.arcsinh, np.arctanh, np.cosh)):
            np.testing.assert_allclose(got[2:], f(d[2:].astype(np.float64)), rtol=2 * np.finfo(dtype).eps)


@pytest.mark.parametrize("dtype", [np.float16, tf.bfloat16, np.complex64, np.complex128], ids=dtype_id)
def test_half_and_complex_types(dtype):
    """float16 / bfloat16 (computed in float32 and rounded once) and complex (numpy's kernel)
    run, as TF allows them; the reference interpreter computes these types."""
    np_dt = tf.as_dtype(dtype).as_numpy_dtype if dtype is tf.bfloat16 else dtype
    x = np.array([0.25, 0.5, 0.75], np.float64)
    if np.dtype(np_dt).kind == "c":
        x = x + 0.5j * x[::-1]
    for name in NAMES:
        v = x + 1 if name == "acosh" else x
        got = getattr(tf.math, name)(tf.constant(v.astype(np_dt))).numpy()
        assert got.dtype == np.dtype(np_dt)
        want = NUMPY[name](v.astype(np.complex128 if np.dtype(np_dt).kind == "c" else np.float64))
        rtol = 1e-2 if np.dtype(np_dt).itemsize == 2 else 1e-6
        np.testing.assert_allclose(got.astype(want.dtype), want, rtol=rtol)


def test_integer_input_is_a_type_error():
    g = tf.Graph()
    with g.as_default():
        p = tf1.placeholder(tf.int32, [2])
        for name in NAMES:
            with pytest.raises(TypeError):
                getattr(tf.math, name)(p)
