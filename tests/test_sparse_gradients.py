"""The gradient from row gathers (of a variable or of any tensor) is tf.IndexedSlices, as TF
2.21's: one row per occurrence of an id (not summed), eagerly, in a tf.function (through a
tf.cond too) and from tf.gradients in a graph (a Session fetches an IndexedSlicesValue);
other gradients stay dense.
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
    # a watched plain tensor's too, as TF's
    _check_slices(tape.gradient(of_tensor, c), IDS, _rows(3))


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


def _v1_session(g, mode):
    return tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto(jitgrad_mode=mode))


@pytest.mark.parametrize("mode", ["interpret", "compiled"])
def test_graph_gradients_of_gathers_are_slices_and_sessions_fetch_their_values(mode):
    """tf.gradients in a graph: slices for a variable's and a plain tensor's gathers (two
    gathers concatenated), dense for a gather plus a dense use or a gather of x * 2 (the Mul's
    gradient takes them dense), slices through tf.identity; Session.run gives
    IndexedSlicesValue, and convert_to_tensor / add_n / clip_by_global_norm take them."""
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable(np.arange(12, dtype=np.float32).reshape(4, 3))
        p = tf.compat.v1.placeholder(tf.float32, [4, 3])
        ids = tf.compat.v1.placeholder(tf.int32, [None])
        (gv,) = tf.gradients(tf.reduce_sum(tf.gather(v, ids) * W), v)
        (gp,) = tf.gradients(tf.reduce_sum(tf.gather(p, ids) * W) + tf.reduce_sum(tf.gather(p, [0]) * W), p)
        (mixed,) = tf.gradients(tf.reduce_sum(tf.gather(p, ids) * W) + tf.reduce_sum(p), p)
        (through_mul,) = tf.gradients(tf.reduce_sum(tf.gather(p * 2.0, ids) * W), p)
        (through_id,) = tf.gradients(tf.reduce_sum(tf.gather(tf.identity(p), ids) * W), p)
        assert isinstance(gv, tf.IndexedSlices) and isinstance(gp, tf.IndexedSlices)
        assert isinstance(through_id, tf.IndexedSlices)
        assert not isinstance(mixed, tf.IndexedSlices) and not isinstance(through_mul, tf.IndexedSlices)
        assert gp.values.shape.as_list() == [None, 3]
        dense = tf.convert_to_tensor(gp)
        added = tf.add_n([gp, mixed])
        (clipped,), norm = tf.clip_by_global_norm([gp], 1.0)
        init = tf.compat.v1.global_variables_initializer()
    feed = {p: np.ones((4, 3), np.float32), ids: IDS}
    with _v1_session(g, mode) as s:
        s.run(init)
        got_v, got_p, got_id, rest = s.run([gv, gp, through_id, [mixed, through_mul, dense, added, clipped, norm]], feed)
    for got, indices in [(got_v, IDS), (got_p, IDS + [0]), (got_id, IDS)]:
        assert type(got).__name__ == "IndexedSlicesValue"
        assert got.indices.tolist() == indices and got.dense_shape.tolist() == [4, 3]
        np.testing.assert_array_equal(got.values, _rows(len(indices)))
    got_mixed, got_mul, got_dense, got_added, got_clipped, got_norm = rest
    np.testing.assert_array_equal(got_mixed, _summed(IDS, _rows(3)) + 1)
    np.testing.assert_array_equal(got_mul, 2 * _summed(IDS, _rows(3)))
    np.testing.assert_array_equal(got_dense, _summed(IDS + [0], _rows(4)))
    np.testing.assert_array_equal(got_added, _summed(IDS + [0], _rows(4)) + _summed(IDS, _rows(3)) + 1)
    # the global norm counts each occurrence's row (4 rows of [1, 2, 3]: sqrt(56)), as TF's
    np.testing.assert_allclose(got_norm, np.sqrt(56.0), rtol=1e-6)
    assert type(got_clipped).__name__ == "IndexedSlicesValue"
    np.testing.assert_allclose(got_clipped.values, _rows(4) / np.sqrt(56.0), rtol=1e-6)


def test_eager_tape_of_a_watched_tensor_and_through_ops():
    x = tf.constant(np.ones((4, 3), np.float32))
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        plain = tf.reduce_sum(tf.gather(x, IDS) * W)
        through_id = tf.reduce_sum(tf.gather(tf.identity(x), IDS) * W)
        through_mul = tf.reduce_sum(tf.gather(x * 2.0, IDS) * W)
    _check_slices(tape.gradient(plain, x), IDS, _rows(3))
    _check_slices(tape.gradient(through_id, x), IDS, _rows(3))
    g = tape.gradient(through_mul, x)
    assert not isinstance(g, tf.IndexedSlices)
    np.testing.assert_array_equal(g.numpy(), 2 * _summed(IDS, _rows(3)))


@pytest.mark.parametrize("taken", [True, False])
def test_gather_inside_a_cond_in_a_tf_function_gives_slices(taken):
    """cond_v2's gradient: a branch's slices make the If's gradient slices; the other branch's
    dense gradient becomes slices of all its rows (indices 0..n-1), as TF's."""
    v = _var()
    x = tf.constant(np.ones((4, 3), np.float32))

    @tf.function
    def grads(c):
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(x)
            yv = tf.cond(c, lambda: tf.reduce_sum(tf.gather(v, IDS) * W), lambda: tf.reduce_sum(v * W))
            yx = tf.cond(c, lambda: tf.reduce_sum(tf.gather(x, IDS) * W), lambda: tf.reduce_sum(x * W))
        return tape.gradient(yv, v), tape.gradient(yx, x)

    for g in grads(tf.constant(taken)):
        assert isinstance(g, tf.IndexedSlices)
        if taken:
            _check_slices(g, IDS, _rows(3))
        else:
            _check_slices(g, [0, 1, 2, 3], _rows(4))


def _sparse_rows_reference(opt, init, steps):
    """numpy TF 1 sparse updates (repeated ids summed, only the rows present updated) of
    loss = sum(gather(v, ids) ** 2) for each ids in steps."""
    v = init.astype(np.float64)
    slots = {}
    for ids in steps:
        rows = sorted(set(ids))
        g = _summed(ids, 2 * v[ids], rows=v.shape[0])[rows].astype(np.float64)
        if opt == "momentum":
            acc = slots.setdefault("acc", np.zeros_like(v))
            acc[rows] = acc[rows] * 0.9 + g
            v[rows] -= 0.1 * acc[rows]
        elif opt == "rmsprop":
            ms = slots.setdefault("ms", np.ones_like(v))
            mom = slots.setdefault("mom", np.zeros_like(v))
            ms[rows] += (g * g - ms[rows]) * (1 - 0.9)
            mom[rows] = mom[rows] * 0.5 + g * 0.1 / np.sqrt(ms[rows] + 1e-10)
            v[rows] -= mom[rows]
        else:   # adadelta
            acc = slots.setdefault("acc", np.zeros_like(v))
            upd = slots.setdefault("upd", np.zeros_like(v))
            acc[rows] = acc[rows] * 0.95 + g * g * 0.05
            u = np.sqrt(upd[rows] + 1e-8) / np.sqrt(acc[rows] + 1e-8) * g
            v[rows] -= u
            upd[rows] = upd[rows] * 0.95 + u * u * 0.05
    return v


@pytest.mark.parametrize("opt", ["momentum", "rmsprop", "adadelta"])
def test_compat_v1_optimizers_in_a_session_update_only_the_rows_present(opt):
    """minimize() in a graph: compute_gradients gives the gather's IndexedSlices, and the
    sparse rule (TF's SparseApplyMomentum / RMSProp / Adadelta) updates only the rows present,
    its slots included (their updates run: the variable's update waits for them)."""
    init = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
    steps = [[0, 2, 2], [1], [0], [1, 1, 3]]
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable(init)
        ids = tf.compat.v1.placeholder(tf.int32, [None])
        make = {"momentum": lambda: tf.compat.v1.train.MomentumOptimizer(0.1, 0.9),
                "rmsprop": lambda: tf.compat.v1.train.RMSPropOptimizer(0.1, momentum=0.5),
                "adadelta": lambda: tf.compat.v1.train.AdadeltaOptimizer(1.0)}[opt]()
        loss = tf.reduce_sum(tf.gather(v, ids) ** 2)
        assert isinstance(make.compute_gradients(loss)[0][0], tf.IndexedSlices)
        train = make.minimize(loss)
        init_op = tf.compat.v1.global_variables_initializer()
    with tf.compat.v1.Session(graph=g) as s:
        s.run(init_op)
        for step in steps:
            s.run(train, {ids: step})
        got = s.run(v)
    np.testing.assert_allclose(got, _sparse_rows_reference(opt, init, steps), rtol=1e-5, atol=1e-6)
