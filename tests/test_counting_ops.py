"""Counting / checking composites (ops/counting_ops.py: count_nonzero, zero_fraction,
is_non_decreasing, is_strictly_increasing, invert_permutation, confusion_matrix) and
math_composites' scalar_mul, polyval, accumulate_n. Expected values from numpy
(np.count_nonzero, np.argsort, np.add.at, np.polyval); error types as TF 2.21 raised them.
Graph runs in both Session modes, compiled ones without interpreter fallback."""
import numpy as np
import pytest

import jitgrad as tf
from jitgrad.errors import InvalidArgumentError

from _graph_testing import check_op, run_graph

pytestmark = pytest.mark.usefixtures("graph_mode")


def test_count_nonzero_and_zero_fraction(graph_mode):
    x = np.array([[0.0, 1.5, 0.0], [2.0, -0.0, np.nan]], np.float32)
    got = run_graph(lambda p: [tf.math.count_nonzero(p), tf.math.count_nonzero(p, 1, keepdims=True, dtype=tf.int32),
                               tf.math.zero_fraction(p)], [x], graph_mode)
    assert got[0] == 3 and got[0].dtype == np.int64
    np.testing.assert_array_equal(got[1], np.count_nonzero(x, 1, keepdims=True).astype(np.int32))
    assert got[2].dtype == np.float32 and got[2] == np.float32(0.5)
    b = np.array([True, False, True])
    got = run_graph(lambda p: tf.math.count_nonzero(p, dtype=tf.float32), [b], graph_mode)
    assert got == 2.0 and got.dtype == np.float32
    assert np.isnan(tf.math.zero_fraction(tf.zeros([0])).numpy())
    with pytest.raises(InvalidArgumentError):
        tf.math.count_nonzero(tf.constant(x), axis=2)


def test_monotonic_checks(graph_mode):
    cases = [np.array([1, 2, 2, 3], np.int32), np.array([[1, 2], [1, 3]], np.int32), np.array([], np.int32),
             np.array([3, 1], np.uint8), np.array([1.0, 2.0, 5.0])]
    for a in cases:
        flat = a.reshape(-1)
        got = run_graph(lambda p: [tf.math.is_non_decreasing(p), tf.math.is_strictly_increasing(p)], [a], graph_mode,
                        fallback_ok=a.dtype == np.uint8)     # (uint8 has no lowering yet)
        assert got[0] == bool(np.all(flat[1:] >= flat[:-1])) and got[1] == bool(np.all(flat[1:] > flat[:-1]))
    with pytest.raises(TypeError):
        tf.math.is_non_decreasing([True, False])


def test_invert_permutation(graph_mode):
    perm = np.random.default_rng(4).permutation(9).astype(np.int64)
    np.testing.assert_array_equal(run_graph(lambda p: tf.math.invert_permutation(p), [perm], graph_mode),
                                  np.argsort(perm))
    for bad in ([2, 2, 1], [3, 0, 1], [-1, 0]):
        with pytest.raises(InvalidArgumentError):
            run_graph(lambda p: tf.math.invert_permutation(p), [np.array(bad, np.int32)], graph_mode)
        with pytest.raises(InvalidArgumentError):
            tf.math.invert_permutation(bad)
    with pytest.raises(InvalidArgumentError):
        tf.math.invert_permutation([[0]])
    assert tf.math.invert_permutation(tf.constant([], tf.int32)).shape == (0,)


def _np_confusion(labels, preds, n, weights=None):
    out = np.zeros((n, n))
    np.add.at(out, (labels, preds), 1 if weights is None else weights)
    return out


def test_confusion_matrix(graph_mode):
    labels, preds = np.array([1, 2, 4, 2], np.int32), np.array([2, 2, 4, 0], np.int32)
    got = run_graph(lambda a, b: tf.math.confusion_matrix(a, b), [labels, preds], graph_mode)
    np.testing.assert_array_equal(got, _np_confusion(labels, preds, 5))
    assert got.dtype == np.int32
    w = np.array([0.5, 1.5, 2.0, 4.0], np.float32)
    got = run_graph(lambda a, b, c: tf.math.confusion_matrix(a, b, num_classes=6, weights=c, dtype=tf.float32),
                    [labels, preds, w], graph_mode)
    np.testing.assert_array_equal(got, _np_confusion(labels, preds, 6, w))
    for bad_labels, n in (([1, -2, 4, 0], None), ([1, 2, 5, 0], 5)):
        with pytest.raises(InvalidArgumentError):
            run_graph(lambda a, b: tf.math.confusion_matrix(a, b, num_classes=n), [np.array(bad_labels, np.int32),
                                                                                  preds], graph_mode)
    # labels of shape [n, 1] lose their last dimension (TF's remove_squeezable_dimensions)
    np.testing.assert_array_equal(tf.math.confusion_matrix([[1], [0]], [1, 1]).numpy(), [[0, 1], [0, 1]])
    with pytest.raises(ValueError):
        tf.math.confusion_matrix([1, 0], [1, 1], weights=[1, 2, 3])


def test_scalar_mul_polyval_accumulate_n():
    x = np.array([[0.5, -1.0, 2.0], [3.0, 0.25, -2.0]])
    check_op(lambda a, k: tf.scalar_mul(k, a), x, np.array(1.5), expected=1.5 * x)
    # (each coefficient converts on its own, as in TF: Python floats would be float32)
    check_op(lambda a, k: tf.math.polyval([k, np.float64(2.0), np.float64(-1.0)], a), x, np.array(1.5),
             expected=np.polyval([1.5, 2.0, -1.0], x))
    check_op(lambda a, b: tf.math.accumulate_n([a, b, a]), x, -x, expected=x)
    assert tf.scalar_mul(2, tf.constant([1, 2])).numpy().tolist() == [2, 4]
    with pytest.raises(TypeError):      # (the scalar converts to x's dtype, as in TF)
        tf.scalar_mul(2.5, tf.constant([1, 2]))
    with pytest.raises(ValueError):
        tf.scalar_mul([2.0, 3.0], tf.constant(x))
    assert tf.math.polyval([], tf.constant(x)).numpy().tolist() == np.zeros_like(x).tolist()
    with pytest.raises(ValueError):
        tf.math.polyval((1.0, 2.0), tf.constant(x))
    for bad in ([], [tf.constant(x), tf.constant([1.0, 2.0])], [tf.constant(x), tf.constant(x, tf.float32)]):
        with pytest.raises(ValueError):
            tf.math.accumulate_n(bad)
    with pytest.raises(TypeError):
        tf.math.accumulate_n([tf.constant(x)] * 2, tensor_dtype=tf.float32)
    assert tf.math.softmax is tf.nn.softmax
