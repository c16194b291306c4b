"""tf.data.Dataset basics (issue 17, item 7), in eager mode: elements are
structures of numpy-backed eager tensors; values checked against numpy."""
import collections

import numpy as np
import pytest

import jitgrad as tf

X = np.arange(10, dtype=np.float32).reshape(5, 2)
Y = np.array([0, 1, 0, 1, 1], np.int32)


def _np(ds):
    return list(ds.as_numpy_iterator())


def test_from_tensor_slices_structures():
    ds = tf.data.Dataset.from_tensor_slices((X, Y))
    got = list(ds)
    assert len(got) == 5 and len(ds) == 5
    x0, y0 = got[0]
    assert isinstance(x0, tf.EagerTensor) and x0.dtype == tf.float32 and x0.shape == (2,)
    assert y0.dtype == tf.int32 and y0.shape == ()
    for (x, y), xr, yr in zip(got, X, Y):
        np.testing.assert_array_equal(x.numpy(), xr)
        assert int(y) == yr
    d = _np(tf.data.Dataset.from_tensor_slices({"b": Y, "a": X}))
    assert list(d[0].keys()) == ["b", "a"] and d[1]["b"] == 1
    lst = _np(tf.data.Dataset.from_tensor_slices([[1, 2], [3, 4]]))   # a list is one tensor, sliced
    assert [v.tolist() for v in lst] == [[1, 2], [3, 4]]
    P = collections.namedtuple("P", "x y")
    p = list(tf.data.Dataset.from_tensor_slices(P(X, Y)))[2]
    assert isinstance(p, P) and int(p.y) == 0
    s = _np(tf.data.Dataset.from_tensor_slices(["a", "b"]))
    assert s == [b"a", b"b"]
    with pytest.raises(ValueError):
        tf.data.Dataset.from_tensor_slices((X, Y[:3]))


def test_element_spec_and_from_tensors():
    ds = tf.data.Dataset.from_tensor_slices((X, Y))
    assert ds.element_spec == (tf.TensorSpec([2], tf.float32), tf.TensorSpec([], tf.int32))
    assert ds.batch(2).element_spec == (tf.TensorSpec([None, 2], tf.float32), tf.TensorSpec([None], tf.int32))
    assert ds.batch(2, drop_remainder=True).element_spec[0] == tf.TensorSpec([2, 2], tf.float32)
    one = _np(tf.data.Dataset.from_tensors((X, Y)))
    assert len(one) == 1 and one[0][0].shape == (5, 2)


def test_batch_take_skip_repeat_range():
    b = _np(tf.data.Dataset.from_tensor_slices((X, Y)).batch(2))
    assert [x.shape for x, _ in b] == [(2, 2), (2, 2), (1, 2)]
    np.testing.assert_array_equal(b[1][0], X[2:4])
    np.testing.assert_array_equal(b[2][1], Y[4:])
    assert len(tf.data.Dataset.from_tensor_slices(X).batch(2)) == 3
    assert len(tf.data.Dataset.from_tensor_slices(X).batch(2, drop_remainder=True)) == 2
    r = tf.data.Dataset.range(10)
    assert _np(r.take(3)) == [0, 1, 2] and _np(r.skip(7)) == [7, 8, 9]
    assert _np(r.take(2).repeat(3)) == [0, 1] * 3
    assert _np(tf.data.Dataset.range(2, 8, 3)) == [2, 5]
    assert list(r)[0].dtype == tf.int64
    inf = r.repeat()
    assert int(inf.cardinality()) == tf.data.INFINITE_CARDINALITY
    with pytest.raises(TypeError):
        len(inf)
    assert _np(inf.take(12))[-2:] == [0, 1]


def test_map_filter_enumerate_zip_concatenate():
    ds = tf.data.Dataset.from_tensor_slices((X, Y)).map(lambda x, y: (x * 2.0, y + 1))
    got = _np(ds)
    np.testing.assert_array_equal(np.stack([g[0] for g in got]), X * 2)
    np.testing.assert_array_equal([g[1] for g in got], Y + 1)
    ev = _np(tf.data.Dataset.range(10).filter(lambda v: v % 2 == 0))
    assert ev == [0, 2, 4, 6, 8]
    with pytest.raises(TypeError):
        len(tf.data.Dataset.range(10).filter(lambda v: v > 3))
    en = _np(tf.data.Dataset.from_tensor_slices(Y).enumerate(start=1))
    assert [(int(i), int(v)) for i, v in en] == list(zip(range(1, 6), Y.tolist()))
    z = _np(tf.data.Dataset.zip((tf.data.Dataset.range(3), tf.data.Dataset.range(10, 20))))
    assert [(int(a), int(b)) for a, b in z] == [(0, 10), (1, 11), (2, 12)]
    c = _np(tf.data.Dataset.range(2).concatenate(tf.data.Dataset.range(5, 7)))
    assert c == [0, 1, 5, 6]
    assert _np(tf.data.Dataset.range(3).prefetch(tf.data.AUTOTUNE).cache()) == [0, 1, 2]


def test_shuffle_is_a_seeded_permutation():
    ds = tf.data.Dataset.range(20).shuffle(5, seed=3)
    a, b = _np(ds), _np(ds)
    assert sorted(a) == list(range(20)) and sorted(b) == list(range(20))
    assert a != list(range(20))
    assert a != b                        # reshuffled each iteration (TF's default)
    same = tf.data.Dataset.range(20).shuffle(5, seed=3)
    assert _np(same) == a                # the same seed gives the same orders
    fixed = tf.data.Dataset.range(20).shuffle(5, seed=3, reshuffle_each_iteration=False)
    assert _np(fixed) == _np(fixed)
    # with a buffer of k, element i can come out no earlier than position i - k + 1
    assert all(pos >= v - 4 for pos, v in enumerate(a))
    tf.random.set_seed(1)
    g1 = _np(tf.data.Dataset.range(20).shuffle(20))
    tf.random.set_seed(1)
    assert _np(tf.data.Dataset.range(20).shuffle(20)) == g1   # the global seed repeats a program's shuffles


def test_training_loop_over_batches():
    # a linear model trained on the dataset's batches, checked against the same steps in numpy
    w = tf.Variable(np.zeros(2, np.float32))
    w_np = np.zeros(2, np.float32)
    ds = tf.data.Dataset.from_tensor_slices((X, Y.astype(np.float32))).batch(2)
    for xb, yb in ds:
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((tf.linalg.matvec(xb, w) - yb) ** 2)
        w.assign_sub(0.01 * tape.gradient(loss, w))
        xn, yn = xb.numpy(), yb.numpy()
        w_np = w_np - np.float32(0.01) * (2 * xn.T @ (xn @ w_np - yn) / len(yn)).astype(np.float32)
    np.testing.assert_allclose(w.numpy(), w_np, rtol=1e-6)


def test_iteration_needs_eager():
    ds = tf.data.Dataset.range(3)
    with tf.Graph().as_default():
        with pytest.raises(RuntimeError):
            iter(ds)


def test_from_generator():
    def gen(n):
        for i in range(n):
            yield i, [float(i)] * 2

    sig = (tf.TensorSpec([], tf.int64), tf.TensorSpec([2], tf.float32))
    ds = tf.data.Dataset.from_generator(gen, args=(3,), output_signature=sig)
    got = list(ds)
    assert [int(a) for a, _ in got] == [0, 1, 2] and got[0][0].dtype == tf.int64
    np.testing.assert_array_equal(got[2][1].numpy(), [2.0, 2.0])
    assert len(list(ds)) == 3                                    # the generator is called again
    assert ds.element_spec == sig
    b = list(tf.data.Dataset.from_generator(lambda: iter([[1, 2], [3, 4]]), output_types=tf.int32).batch(2))
    np.testing.assert_array_equal(b[0].numpy(), [[1, 2], [3, 4]])
    bad = tf.data.Dataset.from_generator(lambda: iter([[1.0, 2.0, 3.0]]),
                                         output_signature=tf.TensorSpec([2], tf.float32))
    with pytest.raises(tf.errors.InvalidArgumentError):
        list(bad)
    with pytest.raises(TypeError):
        len(ds)    # unknown cardinality, as TF
