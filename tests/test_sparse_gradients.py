"""A variable's gradient from gathers of it is tf.IndexedSlices, as TF 2.21's: one row per
occurrence of an id (not summed), eagerly and in a tf.function; other gradients stay dense.
Expected values written out by hand / with numpy, checked against TF 2.21."""
import numpy as np
import pytest

import jitgrad as tf

W = np.array([[1.0, 2.0, 3.0]], np.float32)
IDS = [1, 3, 1]


def _var():
    return tf.Variable(np.arange(12, dtype=np.float32).reshape(4, 3))


def _rows(n):
    return np.repeat(W, n, axis=0)


def _summed(indices, values, rows=4):
    out = np.zeros((rows, values.shape[1]), np.float32)
    np.add.at(out, indices, values)
    return out


def _check_slices(g, indices, values, dense_shape=(4, 3)):
    assert isinstance(g, tf.IndexedSlices)
    assert g.indices.numpy().tolist() == indices
    np.testing.assert_array_equal(g.values.numpy(), values)
    assert g.dense_shape.numpy().tolist() == list(dense_shape)
    np.testing.assert_array_equal(tf.convert_to_tensor(g).numpy(), _summed(indices, values))


@pytest.mark.parametrize("lookup", [lambda v, i: tf.gather(v, i), lambda v, i: tf.nn.embedding_lookup(v, i)])
def test_gather_of_a_variable_gives_one_row_per_occurrence(lookup):
    v = _var()
    with tf.GradientTape() as tape:
        y = tf.reduce_sum(lookup(v, tf.constant(IDS)) * W)
    _check_slices(tape.gradient(y, v), IDS, _rows(3))


def test_two_gathers_concatenate_and_nd_ids_flatten():
    v = _var()
    with tf.GradientTape(persistent=True) as tape:
        two = tf.reduce_sum(tf.concat([tf.gather(v, IDS), tf.gather(v, [0, 1])], 0) * W)
        nd = tf.reduce_sum(tf.gather(v, [[1, 3], [1, 0]]) * W)
    _check_slices(tape.gradient(two, v), [1, 3, 1, 0, 1], _rows(5))
    _check_slices(tape.gradient(nd, v), [1, 3, 1, 0], _rows(4))


def test_a_dense_use_or_another_axis_gives_a_dense_sum():
    v, c = _var(), tf.constant(np.ones((4, 3), np.float32))
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(c)
        mixed = tf.reduce_sum(tf.gather(v, IDS) * W) + tf.reduce_sum(v)
        axis1 = tf.reduce_sum(tf.gather(v, [0, 2, 0], axis=1))
        of_tensor = tf.reduce_sum(tf.gather(c, IDS) * W)
    g = tape.gradient(mixed, v)
    assert not isinstance(g, tf.IndexedSlices)
    np.testing.assert_array_equal(g.numpy(), _summed(IDS, _rows(3)) + 1)
    g = tape.gradient(axis1, v)
    assert not isinstance(g, tf.IndexedSlices)
    np.testing.assert_array_equal(g.numpy(), np.tile([2.0, 0.0, 1.0], (4, 1)))
    # (TF gives slices here too; jitgrad keeps a plain tensor's gather gradient dense)
    np.testing.assert_array_equal(tf.convert_to_tensor(tape.gradient(of_tensor, c)).numpy(), _summed(IDS, _rows(3)))


def test_slices_in_a_tf_function():
    v = _var()

    @tf.function
    def step(ids):
        with tf.GradientTape() as tape:
            y = tf.reduce_sum(tf.concat([tf.gather(v, ids), tf.gather(v, [0])], 0) * W)
        g = tape.gradient(y, v)
        assert isinstance(g, tf.IndexedSlices)
        return g.indices, g.values, tf.convert_to_tensor(g)

    indices, values, dense = step(tf.constant(IDS))
    assert indices.numpy().tolist() == IDS + [0]
    np.testing.assert_array_equal(values.numpy(), _rows(4))
    np.testing.assert_array_equal(dense.numpy(), _summed(IDS + [0], _rows(4)))


def test_jacobian_of_a_gather_stays_dense():
    v = tf.Variable([1.0, 2.0, 3.0])
    with tf.GradientTape() as tape:
        y = tf.gather(v, [2, 2])
    np.testing.assert_array_equal(tape.jacobian(y, v).numpy(), [[0, 0, 1], [0, 0, 1]])


def test_clip_ops_act_on_the_values_and_keep_slices():
    values = _rows(3)       # three occurrences of [1, 2, 3]: norm sqrt(42), as TF's (not of the summed rows)
    g = tf.IndexedSlices(tf.constant(values), tf.constant(IDS), tf.constant([4, 3]))
    clipped = tf.clip_by_norm(g, 1.0)
    assert isinstance(clipped, tf.IndexedSlices) and clipped.indices.numpy().tolist() == IDS
    np.testing.assert_allclose(clipped.values.numpy(), values / np.sqrt(42.0), rtol=1e-6)
    (clipped, other), norm = tf.clip_by_global_norm([g, tf.constant([3.0])], 1.0)
    np.testing.assert_allclose(norm.numpy(), np.sqrt(42.0 + 9.0), rtol=1e-6)
    assert isinstance(clipped, tf.IndexedSlices)
    np.testing.assert_allclose(clipped.values.numpy(), values / np.sqrt(51.0), rtol=1e-6)
    clipped = tf.clip_by_value(g, -1.5, 1.5)
    assert isinstance(clipped, tf.IndexedSlices)
    np.testing.assert_array_equal(clipped.values.numpy(), np.minimum(values, 1.5))


def test_compat_v1_optimizer_applies_slices_summed():
    v = _var()
    with tf.GradientTape() as tape:
        y = tf.reduce_sum(tf.gather(v, IDS) * W)
    g = tape.gradient(y, v)
    tf.compat.v1.train.GradientDescentOptimizer(0.5).apply_gradients([(g, v)])
    np.testing.assert_array_equal(v.numpy(), np.arange(12, dtype=np.float32).reshape(4, 3)
                                  - 0.5 * _summed(IDS, _rows(3)))


def test_a_tf_function_returns_the_slices():
    v = _var()

    @tf.function
    def grads(ids):
        with tf.GradientTape(persistent=True) as tape:
            y = tf.reduce_sum(tf.gather(v, ids) * W) + tf.reduce_sum(v[:1])
        return tape.gradient(y, [v, v])[0], {"dense": tape.gradient(tf.reduce_sum(v), v)}

    @tf.function
    def outer(ids):
        g, _ = grads(ids)
        return tf.convert_to_tensor(g)

    g, d = grads(tf.constant([2, 2]))
    assert not isinstance(g, tf.IndexedSlices)      # the dense read of v[:1] made it dense
    np.testing.assert_array_equal(g.numpy(), _summed([2, 2], _rows(2)) + [[1, 1, 1], [0, 0, 0], [0, 0, 0], [0, 0, 0]])

    @tf.function
    def sparse(ids):
        with tf.GradientTape() as tape:
            y = tf.reduce_sum(tf.gather(v, ids) * W)
        return tape.gradient(y, v)

    _check_slices(sparse(tf.constant(IDS)), IDS, _rows(3))
    np.testing.assert_array_equal(outer(tf.constant([2, 2])).numpy(), g.numpy())


@pytest.mark.parametrize("nesterov", [False, True])
def test_compat_v1_momentum_moves_only_the_rows_present(nesterov):
    """TF 1's sparse momentum: repeated ids summed, then the dense rule on those rows only."""
    init = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
    v = tf.Variable(init)
    opt = tf.compat.v1.train.MomentumOptimizer(0.1, 0.9, use_nesterov=nesterov)
    want, accum = init.astype(np.float64), np.zeros((4, 3))
    for ids in ([1, 3, 1], [0, 0, 2], [1, 1, 1]):
        with tf.GradientTape() as tape:
            y = tf.reduce_sum(tf.gather(v, ids) ** 2)
        opt.apply_gradients([(tape.gradient(y, v), v)])
        rows = sorted(set(ids))
        g = _summed(ids, 2 * want[ids])[rows]
        accum[rows] = accum[rows] * 0.9 + g
        want[rows] -= g * 0.1 + accum[rows] * 0.9 * 0.1 if nesterov else accum[rows] * 0.1
    np.testing.assert_allclose(v.numpy(), want, rtol=1e-6, atol=1e-7)
