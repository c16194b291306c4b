"""EagerTensor and eager tf.Variable behaviour (TF 2 reprs, conversions, assigns)."""
import numpy as np
import pytest

import jitgrad as tf


def test_reprs_like_tf():
    x = tf.constant(10.0)
    assert str(x) == "tf.Tensor(10.0, shape=(), dtype=float32)"
    assert repr(x) == "<tf.Tensor: shape=(), dtype=float32, numpy=10.0>"
    assert str([x]) == "[<tf.Tensor: shape=(), dtype=float32, numpy=10.0>]"
    m = tf.constant([[10.0, 0.0], [0.0, 4.0]])
    assert str(m) == "tf.Tensor(\n[[10.  0.]\n [ 0.  4.]], shape=(2, 2), dtype=float32)"
    assert repr(tf.constant([1, 2])) == "<tf.Tensor: shape=(2,), dtype=int32, numpy=array([1, 2], dtype=int32)>"
    assert f"{tf.constant(48.0)}" == "48.0"
    assert f"{tf.constant(1.5):.3f}" == "1.500"


def test_numpy_scalars_and_conversions():
    x = tf.constant([1.0, 2.0, 3.0])
    assert isinstance(x.numpy(), np.ndarray) and x.numpy().dtype == np.float32
    assert isinstance(tf.constant(2.0).numpy(), np.float32)
    assert float(tf.constant(2.5)) == 2.5 and int(tf.constant(7)) == 7 and bool(tf.constant(True))
    assert np.asarray(x).tolist() == [1.0, 2.0, 3.0]
    assert x.shape == (3,) and x.dtype == tf.float32 and len(x) == 3
    assert float(x[1]) == 2.0 and x[1:].numpy().tolist() == [2.0, 3.0]
    assert [float(v) for v in x] == [1.0, 2.0, 3.0]
    with pytest.raises(TypeError):
        hash(x)
    assert tf.executing_eagerly()


def test_operators_eager():
    x = tf.constant([1.0, 2.0])
    assert ((x + 1) * 2 - x / 2).numpy().tolist() == [3.5, 5.0]
    assert (2 ** x).numpy().tolist() == [2.0, 4.0]
    assert (x == 2.0).numpy().tolist() == [False, True]
    assert (-x).numpy().tolist() == [-1.0, -2.0]


def test_variable_basics():
    v = tf.Variable(5.0)
    assert v.name == "Variable:0" and tf.Variable(1.0).name == "Variable:0"
    assert repr(v) == "<tf.Variable 'Variable:0' shape=() dtype=float32, numpy=5.0>"
    assert isinstance(v, tf.Variable) and v.trainable and v.dtype == tf.float32 and v.shape == ()
    assert v.assign(2.0) is v and float(v) == 2.0
    v.assign_add(1.0)
    v.assign_sub(0.5)
    assert v.numpy() == np.float32(2.5)
    assert (v * 2).numpy() == 5.0 and (2 * v).numpy() == 5.0
    assert float(v.read_value()) == 2.5 and float(v.value()) == 2.5
    assert np.asarray(v).dtype == np.float32
    assert v.assign(1.0, read_value=False) is None
    w = tf.Variable([1, 2], dtype=tf.float64, name="w")
    assert w.dtype == tf.float64 and w.name == "w:0"
    with pytest.raises(ValueError):
        w.assign([1.0, 2.0, 3.0])
    with pytest.raises(TypeError):
        hash(w)


def test_variable_reads_are_snapshots():
    v = tf.Variable([1.0, 2.0])
    r = v.read_value()
    v.assign_sub([1.0, 1.0])
    assert r.numpy().tolist() == [1.0, 2.0] and v.numpy().tolist() == [0.0, 1.0]
    a = np.array([3.0, 4.0], np.float32)
    v.assign(a)
    a[0] = 100.0
    assert v.numpy().tolist() == [3.0, 4.0]


def test_variable_initial_value_callable_and_from_variable():
    v = tf.Variable(lambda: tf.ones([2]))
    w = tf.Variable(v)
    v.assign([5.0, 5.0])
    assert w.numpy().tolist() == [1.0, 1.0]
