"""Differences from TF 2.21 found by the differential fuzzers (bench/tf_fuzz.py, --wide,
tf_fuzz_batching.py, tf_second_order_sweep.py) in the round with seeds from 180000, run with
JITGRAD_FLUSH_DENORMALS=1. Each expected value is derived by hand (said per test); where TF's
behaviour is the spec, what TF 2.21 does (run with /work/benchenv) is said too."""
import numpy as np
import pytest

import jitgrad as tf
from _graph_testing import run_default_graph as _run

graph_modes = pytest.mark.usefixtures("graph_mode", "no_fallback")


# ---------------------------------------------------------------- bfloat16 is a float
# numpy's kind of ml_dtypes' bfloat16 is "V", not "f": reference kernels that asked
# `dtype.kind == "f"` took their integer path for it. top_k then ran `~x` (the integer order
# reversal) and failed with numpy's TypeError (tf_fuzz features seed 180020, bfloat16_program:
# top_k of a bfloat16 tensor, compiled and interpreted), and floormod took numpy's mod, whose
# zero takes y's sign where TF's (fmod's) keeps x's.

BF_ROW = [1.0, 2.0, 2.0, -1.0, -np.inf, 0.5]


def _bf(values):
    return tf.cast(tf.constant(np.array(values, np.float32)), tf.bfloat16)


def _f32(t):
    return np.asarray(t).astype(np.float32)


def test_eager_bfloat16_top_k_values_indices_and_gradient():
    """Largest first, ties in index order (by hand: 2 at 1, 2 at 2, 1 at 0); the gradient of
    sum(w * values) puts each w at its index, 0 elsewhere. TF 2.21 gives the same."""
    x = _bf([BF_ROW])
    w = _bf([[1.0, 2.0, 4.0]])
    with tf.GradientTape() as t:
        t.watch(x)
        v, i = tf.math.top_k(x, 3)
        loss = tf.reduce_sum(v * w)
    assert v.dtype == tf.bfloat16
    np.testing.assert_array_equal(_f32(v.numpy()), [[2.0, 2.0, 1.0]])
    np.testing.assert_array_equal(i.numpy(), [[1, 2, 0]])
    np.testing.assert_array_equal(_f32(t.gradient(loss, x).numpy()), [[4.0, 1.0, 2.0, 0.0, 0.0, 0.0]])


def test_eager_bfloat16_sort_ascending_and_descending():
    """tf.sort is top_k of the whole row (ascending: of -x): by hand from BF_ROW."""
    x = _bf([BF_ROW])
    np.testing.assert_array_equal(_f32(tf.sort(x).numpy()), [[-np.inf, -1.0, 0.5, 1.0, 2.0, 2.0]])
    np.testing.assert_array_equal(_f32(tf.sort(x, direction="DESCENDING").numpy()),
                                  [[2.0, 2.0, 1.0, 0.5, -1.0, -np.inf]])
    np.testing.assert_array_equal(tf.argsort(x, direction="DESCENDING").numpy(), [[1, 2, 0, 5, 3, 4]])


@pytest.mark.usefixtures("graph_mode")
def test_graph_bfloat16_top_k_and_its_gradient():
    """As the eager test, fed through a placeholder, tf.gradients with grad_ys w. (A compiled
    run of bfloat16 falls back to the interpreter by design: no_fallback does not apply.)"""
    with tf.Graph().as_default():
        p = tf.compat.v1.placeholder(tf.bfloat16, [2, 6])
        v, i = tf.math.top_k(p, 2)
        (g,) = tf.gradients(v, p, grad_ys=tf.cast(tf.constant([[1.0, 2.0], [3.0, 4.0]]), tf.bfloat16))
        feed = np.array([BF_ROW, [0.0, -3.0, 5.0, 5.0, 7.0, -8.0]], np.float32)
        vv, ii, gg = _run([v, i, g], {p: feed.astype(tf.bfloat16.as_numpy_dtype)})
    np.testing.assert_array_equal(_f32(vv), [[2.0, 2.0], [7.0, 5.0]])
    np.testing.assert_array_equal(ii, [[1, 2], [4, 2]])
    np.testing.assert_array_equal(_f32(gg), [[0, 1, 2, 0, 0, 0], [0, 0, 4, 0, 3, 0]])


def test_eager_bfloat16_floormod_keeps_the_sign_of_a_zero_as_fmod():
    """floormod(-0, 2) is -0 (fmod keeps x's sign; TF 2.21 gives -0 in bfloat16 too), -3 mod 2
    = 1, 3 mod -2 = -1, 5 mod inf = 5 (by hand: x - floor(x / y) * y, fmod for zeros)."""
    r = _f32(tf.math.floormod(_bf([-0.0, -3.0, 3.0, 5.0, 0.0]), _bf([2.0, 2.0, -2.0, np.inf, -2.0])).numpy())
    np.testing.assert_array_equal(r, [0.0, 1.0, -1.0, 5.0, 0.0])
    np.testing.assert_array_equal(np.signbit(r), [True, False, True, False, False])   # -0 and -1


# ---------------------------------------------------------------- bfloat16 @ float32
# TF's tf.linalg.matmul of a rank-2 bfloat16 operand and a float32 one runs SparseMatMul: a
# float32 result, the bfloat16 operand's gradient back in bfloat16. jitgrad raised MatMul's
# dtype TypeError (tf_fuzz features seeds 210008, 210065: bfloat16_program, compiled and
# interpreted). By hand: A @ B with A = [[1.5, -2], [.25, 3]], B = [[1, 2, .5], [-1, .125, 4]];
# d sum(A @ B) / dA = row sums of B, / dB = column sums of A (all exact in bfloat16).
MM_A = [[1.5, -2.0], [0.25, 3.0]]
MM_B = [[1.0, 2.0, 0.5], [-1.0, 0.125, 4.0]]
MM_Y = [[3.5, 2.75, -7.25], [-2.75, 0.875, 12.125]]
MM_GA = [[3.5, 3.125], [3.5, 3.125]]
MM_GB = [[1.75, 1.75, 1.75], [1.0, 1.0, 1.0]]


def test_eager_matmul_of_float32_and_bfloat16_is_float32():
    a, b = tf.constant(MM_A), _bf(MM_B)
    with tf.GradientTape() as t:
        t.watch([a, b])
        y = tf.linalg.matmul(a, b)
    ga, gb = t.gradient(y, [a, b])
    assert (y.dtype, ga.dtype, gb.dtype) == (tf.float32, tf.float32, tf.bfloat16)
    np.testing.assert_array_equal(y.numpy(), MM_Y)
    np.testing.assert_array_equal(ga.numpy(), MM_GA)
    np.testing.assert_array_equal(_f32(gb.numpy()), MM_GB)
    # the other order with a transposed operand: (B^T A^T)^T = A B
    np.testing.assert_array_equal(tf.linalg.matmul(b, a, transpose_a=True, transpose_b=True).numpy(),
                                  np.array(MM_Y).T)


@pytest.mark.usefixtures("graph_mode")
def test_graph_matmul_of_float32_and_bfloat16_is_float32():
    with tf.Graph().as_default():
        a = tf.compat.v1.placeholder(tf.float32, [2, 2])
        b = tf.compat.v1.placeholder(tf.bfloat16, [2, 3])
        y = tf.linalg.matmul(a, b)
        ga, gb = tf.gradients(y, [a, b])
        assert (y.dtype, ga.dtype, gb.dtype) == (tf.float32, tf.float32, tf.bfloat16)
        yy, gga, ggb = _run([y, ga, gb], {a: np.array(MM_A, np.float32),
                                           b: np.array(MM_B, np.float32).astype(tf.bfloat16.as_numpy_dtype)})
    np.testing.assert_array_equal(yy, MM_Y)
    np.testing.assert_array_equal(gga, MM_GA)
    np.testing.assert_array_equal(_f32(ggb), MM_GB)


def test_batched_matmul_of_float32_and_bfloat16_stays_an_error():
    """Rank 3: TF's BatchMatMulV2 takes one dtype (InvalidArgumentError eagerly in TF 2.21)."""
    with pytest.raises((TypeError, tf.errors.InvalidArgumentError)):
        tf.linalg.matmul(tf.zeros([2, 2, 2]), _bf(np.zeros([2, 2, 2])))


# ---------------------------------------------------------------- top_k of an empty axis
# tf_fuzz 180118 (empty_dims): TF's _TopKGrad builds tf.range(0, rows * n, n), which fails for
# n = 0 (InvalidArgumentError "Requires delta != 0"): a TF artifact, documented in README
# (top_k / sort). jitgrad's gradient is the empty tensor of the input's shape.
@graph_modes
@pytest.mark.parametrize("shape", [(0,), (2, 0)])
def test_graph_sort_gradient_along_an_empty_axis_is_empty(shape):
    with tf.Graph().as_default():
        p = tf.compat.v1.placeholder(tf.float32, shape)
        (g,) = tf.gradients(tf.reduce_sum(tf.sort(p) * 2.0), p)
        got = _run(g, {p: np.zeros(shape, np.float32)})
    assert got.shape == shape and got.dtype == np.float32
