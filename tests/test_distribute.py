"""jitgrad.distribute: data-parallel steps on a Dask LocalCluster of 2 worker processes.

The references are computed in this process: the same step run shard by shard and summed
in the documented tree order (bit-identical expected), the whole batch at once (float32
tolerance), and bench/workloads.py's hand-written numpy gradients of the W3 MLP.
One cluster serves the whole module (workers have no disk cache, JITGRAD_CACHE=0, so a
kernel a worker runs was either shipped to it or compiled there).
"""
import contextlib
import importlib.util
import os
import socket
import sys
import time

import numpy as np
import pytest

import jitgrad as tf
from jitgrad import kernel_export
from jitgrad.distribute import DaskStrategy, PerReplica, ReduceOp, tree_sum
from jitgrad.distribute import values as dvalues, worker as dworker
from jitgrad.errors import UnavailableError

from distributed.diagnostics.plugin import WorkerPlugin

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location("_bench_workloads", os.path.join(_ROOT, "bench", "workloads.py"))
workloads = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(workloads)

# ------------------------------------------------------------------ fixtures and helpers
@pytest.fixture(scope="module")
def cluster():
    """A DaskStrategy owning a LocalCluster of 2 worker processes; tests make their own
    strategies on its client (each with its own mirrors) and close them."""
    s = DaskStrategy(n_workers=2, env={"JITGRAD_CACHE": "0"}, timeout=180)
    try:
        yield s
    finally:
        s.close()


@contextlib.contextmanager
def strategy_on(cluster, num_replicas=2):
    s = DaskStrategy(cluster.client, num_replicas=num_replicas, timeout=180)
    try:
        yield s
    finally:
        s.close()


class MLP:
    """The W3 MLP's gradient and SGD steps (bench/workloads.py), learning rate 0.1, with
    its variables created under ``scope``.  One per module and role: the kernel cache key
    includes the variables' identity, so new variables would mean new compiles."""

    def __init__(self, scope):
        self.params, self.grad_step, self.apply_step = workloads.w3_training(scope, lr=0.1)
        self.initial = [p.numpy().copy() for p in self.params]

    def reset(self):
        for p, v in zip(self.params, self.initial):
            p.assign(v)

    def values(self):
        return [p.numpy().copy() for p in self.params]


@pytest.fixture(scope="module")
def trainer(cluster):
    """A 2-replica strategy on the cluster and an MLP mirrored by it."""
    with strategy_on(cluster) as s:
        yield s, MLP(s.scope())


@pytest.fixture(scope="module")
def reference():
    """The same MLP in this process only."""
    return MLP(contextlib.nullcontext())


def batches(n_steps, rows=64):
    inp = workloads.w3_inputs()
    X, Y = inp["X"], inp["Y"]
    k = len(X) // rows
    return [(X[(s % k) * rows:(s % k + 1) * rows], Y[(s % k) * rows:(s % k + 1) * rows]) for s in range(n_steps)]


def reference_training(mlp, data, n_shards):
    """Single process, same split: each shard's gradient, summed as the documented tree
    (written out here by hand for 1, 2 and 4 shards), then the SGD step."""
    mlp.reset()
    for X, Y in data:
        gb = np.float32(len(X))
        shards = [mlp.grad_step(x, y, gb) for x, y in zip(np.array_split(X, n_shards), np.array_split(Y, n_shards))]
        g = [[s[1][j].numpy() for s in shards] for j in range(4)]
        if n_shards == 1:
            total = [gj[0] for gj in g]
        elif n_shards == 2:
            total = [gj[0] + gj[1] for gj in g]
        elif n_shards == 4:
            total = [(gj[0] + gj[1]) + (gj[2] + gj[3]) for gj in g]
        else:
            raise AssertionError(n_shards)
        mlp.apply_step([tf.constant(t) for t in total])
    return mlp.values()


def distributed_training(strategy, mlp, data, before_step=lambda step: None, before_check=lambda: None):
    """From the initial weights -> (each step's loss, the first step's gradients); checks
    that the strategy counted one update per step and that every worker's copy is the
    client's (bit for bit, at that version)."""
    mlp.reset()
    losses, first_grads, first_version = [], None, None
    for step, batch in enumerate(strategy.experimental_distribute_dataset(data)):
        before_step(step)
        per_replica = strategy.run(mlp.grad_step, args=(batch[0], batch[1], np.float32(len(data[step][0]))))
        first_version = strategy._version if first_version is None else first_version
        loss, grads = strategy.reduce("SUM", per_replica, axis=None)
        strategy.run(mlp.apply_step, args=(grads,))
        losses.append(float(loss.numpy()))
        first_grads = first_grads or [g.numpy() for g in grads]
    assert strategy._version == first_version + len(data)     # no update lost or counted twice
    before_check()
    assert_mirrors_equal(strategy, mlp.params, strategy._version)
    return losses, first_grads


def assert_mirrors_equal(strategy, params, version):
    states = strategy.mirror_states()
    assert states, "no worker answered"
    for addr, state in states.items():
        if state is None:      # a worker started after the last step has no mirror yet
            continue
        v, mirror = state
        assert v == version, (addr, v, version)
        for p in params:
            np.testing.assert_array_equal(mirror[p._key], p.numpy())


def worker_compiles(strategy):
    return {a: (i["compiles"], i.get("installed", 0)) for a, i in strategy.worker_cache_info().items()}


# ------------------------------------------------------------------ pure parts (no cluster)
def test_tree_sum_order_is_pairs_by_replica_index():
    f = np.float32
    # float32: 1e8 + 1 rounds to 1e8 and -1e8 + 1 to -1e8; so the tree ((a+b) + (c+d)) gives 0,
    # left-to-right ((a+b)+c)+d gives 1.
    vals = [f(1e8), f(1), f(-1e8), f(1)]
    assert tree_sum(vals) == f(0)
    assert ((vals[0] + vals[1]) + vals[2]) + vals[3] == f(1)
    # an odd last value is carried up: ((a+b) + (c+d)) + e
    five = [f(1), f(1e8), f(-1e8), f(1), f(1)]
    assert tree_sum(five) == ((f(1) + f(1e8)) + (f(-1e8) + f(1))) + f(1) == f(1)
    assert tree_sum([np.array([1, 2], np.float32)]).tolist() == [1, 2]
    with pytest.raises(ValueError):
        tree_sum([])


def test_split_batch_and_reduce():
    x = np.arange(14, dtype=np.float32).reshape(7, 2)
    parts = dvalues.split_batch({"x": x, "y": x[:, 0]}, 2)
    assert [p.shape for p in parts["x"].values] == [(4, 2), (3, 2)]      # TF's rebatching: 4 + 3
    np.testing.assert_array_equal(np.concatenate(parts["x"].values), x)
    assert dvalues.reduce_value("SUM", parts["y"], 0, 2) == 42.0                 # 0+2+...+12
    assert dvalues.reduce_value(ReduceOp.MEAN, parts["y"], 0, 2) == np.float32(6.0)
    pr = PerReplica([np.float32(1.5), np.float32(2.5)])
    assert dvalues.reduce_value("MEAN", pr, None, 2) == np.float32(2.0)
    assert dvalues.reduce_value("MEAN", np.float32(3), None, 2) == np.float32(3)  # same on every replica
    with pytest.raises(ValueError, match="non-PerReplica"):                       # TF: SUM undefined
        dvalues.reduce_value("SUM", np.float32(3), None, 2)
    with pytest.raises(ValueError, match="reduce_op"):
        dvalues.reduce_value("PROD", pr, None, 2)
    with pytest.raises(ValueError, match="per-replica values"):
        dvalues.reduce_value("SUM", pr, None, 3)
    with pytest.raises(ValueError, match="scalar"):
        dvalues.split_batch(np.float32(1), 2)


def _small_graph():
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [5, 3], name="x")
        w = tf.compat.v1.placeholder(tf.float32, [3, 2], name="w")
        loss = tf.reduce_sum(tf.tanh(tf.matmul(x, w)))
        grads = tf.gradients(loss, [w])
    return g, x, w, [loss] + grads


def test_exported_kernel_runs_in_a_process_that_never_compiled_it():
    g, x, w, fetches = _small_graph()
    rng = np.random.default_rng(1)
    feed = {x: rng.standard_normal((5, 3)).astype(np.float32), w: rng.standard_normal((3, 2)).astype(np.float32)}
    shipped = kernel_export.export_kernel(tf.compat.v1.Session(graph=g), fetches, feed)
    assert shipped.obj and shipped.keys
    tf.clear_cache()                                   # as a fresh process: no kernel in memory
    from jitgrad.cache import set_enabled
    set_enabled(False)                                 # ... and no disk cache to find it in
    try:
        assert kernel_export.install(shipped) == "installed"
        got = tf.compat.v1.Session(graph=g).run(fetches, feed)
        info = tf.cache_info()
        assert info["compiles"] == 0 and info["installed"] == 1 and info["memory_hits"] >= 1
    finally:
        set_enabled(None)
    want = tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto(jitgrad_mode="interpret")).run(fetches, feed)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_kernel_for_another_cpu_is_declined_and_compiled_here(caplog):
    g, x, w, fetches = _small_graph()
    feed = {x: np.ones((5, 3), np.float32), w: np.ones((3, 2), np.float32)}
    shipped = kernel_export.export_kernel(tf.compat.v1.Session(graph=g), fetches, feed)
    other = dict(shipped.fingerprint, cpu="some-other-cpu", features="+sse2")
    foreign = kernel_export.ShippedKernel(shipped.keys, shipped.obj, shipped.meta, other)
    tf.clear_cache()
    from jitgrad.cache import set_enabled
    set_enabled(False)
    try:
        with caplog.at_level("WARNING", logger="jitgrad.cache"):
            assert kernel_export.install(foreign) == "foreign"
        assert "some-other-cpu" in caplog.text and "compiles its own" in caplog.text
        got = tf.compat.v1.Session(graph=g).run(fetches, feed)
        assert tf.cache_info()["compiles"] == 1 and tf.cache_info()["foreign"] == 1
    finally:
        set_enabled(None)
    # tanh(x @ w) with x, w all ones: every element tanh(3); d/dw = 5 * (1 - tanh(3)^2) per entry
    np.testing.assert_allclose(got[0], 10 * np.tanh(3.0), rtol=1e-6)
    np.testing.assert_allclose(got[1], np.full((3, 2), 5 * (1 - np.tanh(3.0) ** 2)), rtol=1e-5)


def test_worker_tasks_are_safe_to_run_again():
    """What a worker does when Dask runs one of its tasks again: an update finds it done."""
    v = tf.Variable(np.float32([1.0, 2.0]), name="v")

    @tf.function
    def add(d):
        v.assign_add(d)

    @tf.function
    def read(x):
        return v * x

    d, one = np.float32([0.5, 0.25]), np.float32([1.0, 1.0])
    bundles = []
    for fn, arg in ((add, d), (read, one)):
        c = fn.get_concrete_function(arg)
        shipped = kernel_export.export_kernel(c._session, c._targets, {c.inputs[0].ref(): arg})
        bundles.append(dworker.Bundle.make(c.graph, c.inputs, c._targets, len(c._fetches), [shipped]))
    upd, rd = bundles
    sid = "unit-test-strategy"
    try:
        need = dworker.run_update(sid, upd.token, 0, [d])      # a worker that was not sent the program
        assert isinstance(need, dworker.Need) and need.what == "program" and need.token == upd.token
        assert dworker.install(upd) == ("installed", []) and dworker.install(rd) == ("installed", [])
        upd, rd = upd.token, rd.token
        need = dworker.run_update(sid, upd, 0, [d])            # a worker without the variables
        assert isinstance(need, dworker.Need) and need.what == "variables"
        dworker.seed(sid, 0, {v._key: v.numpy()})
        assert dworker.run_update(sid, upd, 0, [d])[0] == "applied"
        assert dworker.run_update(sid, upd, 0, [d])[0] == "already applied"     # not applied twice
        version, values = dworker.mirror_state(sid)
        assert version == 1 and values[v._key].tolist() == [1.5, 2.25]
        need = dworker.run_replica(sid, rd, 0, [one])          # a task for the version before
        assert need.what == "variables" and "version 1, the task needs 0" in need.detail
        assert dworker.run_update(sid, upd, 2, [d]).what == "variables"   # it missed the update before
        assert dworker.seed(sid, 0, {v._key: v.numpy()}) == ("newer kept", [])  # a late copy: ignored
        out, notes = dworker.run_replica(sid, rd, 1, [np.float32([2.0, 4.0])])
        assert out[0].tolist() == [3.0, 9.0] and notes == []
        assert v.numpy().tolist() == [1.0, 2.0]           # the worker's copy is its own
    finally:
        dworker.forget(sid)


# ------------------------------------------------------------------ on the cluster
def test_mlp_training_matches_single_process(trainer, reference):
    s, mlp = trainer
    data = batches(20)
    before = worker_compiles(s)
    client_before = tf.cache_info()
    assert s.num_replicas_in_sync == 2
    losses, first_grads = distributed_training(s, mlp, data)
    got = mlp.values()
    after = worker_compiles(s)
    client = {k: tf.cache_info()[k] - client_before[k] for k in ("compiles", "disk_hits")}
    # same split in one process: bit-identical
    for a, b in zip(got, reference_training(reference, data, 2)):
        np.testing.assert_array_equal(a, b)
    # the whole batch at once in one process: same up to float32 summation order
    for a, b in zip(got, reference_training(reference, data, 1)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
    # the first step's loss and gradients are the hand-written numpy reference's; the loss went down
    inp = workloads.w3_inputs()
    X, Y = data[0]
    want = workloads.w3_numpy(X, Y, inp["W1"], inp["b1"], inp["W2"], inp["b2"])
    np.testing.assert_allclose(losses[0], want[0], rtol=1e-5)
    for g, w in zip(first_grads, want[1:]):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-6)
    assert losses[-1] < losses[0]
    # compiled once for the whole cluster: on the client (grad step, SGD step; or found in its
    # disk cache), never on a worker
    assert client["compiles"] + client["disk_hits"] == 2, client
    for addr, (compiles, installed) in after.items():
        assert compiles == before.get(addr, (0, 0))[0] == 0, (addr, after)
        assert installed > before.get(addr, (0, 0))[1], (addr, after)


def test_four_replicas_on_two_workers_equal_four_shards_in_one_process(cluster, reference):
    data = batches(2)
    with strategy_on(cluster, num_replicas=4) as s:
        assert s.num_replicas_in_sync == 4
        mlp = MLP(s.scope())
        distributed_training(s, mlp, data)
        got = mlp.values()
    for a, b in zip(got, reference_training(reference, data, 4)):
        np.testing.assert_array_equal(a, b)


def test_variable_assigned_outside_a_run_reaches_the_workers(cluster):
    with strategy_on(cluster) as s:
        with s.scope():
            w = tf.Variable(np.float32([1.0, 2.0]), name="w")

        @tf.function
        def value_times(x):
            return tf.reduce_sum(w * x)

        x = np.float32([[1, 1], [10, 10]])
        (xs,) = s.experimental_distribute_dataset([x])
        assert [v.numpy() for v in s.run(value_times, args=(xs,)).values] == [3.0, 30.0]
        w.assign(np.float32([5.0, 7.0]))          # eagerly, on the client's copy
        assert [v.numpy() for v in s.run(value_times, args=(xs,)).values] == [12.0, 120.0]


def test_worker_that_lost_its_mirror_is_sent_the_variables(trainer, reference):
    s, mlp = trainer
    data = batches(2)
    reseeds = s.stats["reseeds"]

    def forget_one(step):
        if step == 1:     # as a restarted worker: no mirror
            s.client.run(dworker.forget, s._id, workers=s._workers()[:1])
    distributed_training(s, mlp, data, forget_one)
    assert s.stats["reseeds"] == reseeds + 1
    got = mlp.values()
    for a, b in zip(got, reference_training(reference, data, 2)):
        np.testing.assert_array_equal(a, b)


def test_graph_mode_split_run(cluster):
    inp = workloads.w3_inputs()
    g = tf.Graph()
    with g.as_default():
        ph = {k: tf.compat.v1.placeholder(tf.float32, [None] + list(v.shape[1:]) if k in "XY" else v.shape, name=k)
              for k, v in inp.items()}
        h = tf.nn.relu(tf.matmul(ph["X"], ph["W1"]) + ph["b1"])
        logits = tf.matmul(h, ph["W2"]) + ph["b2"]
        loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=ph["Y"], logits=logits))
        grads = tf.gradients(loss, [ph["W1"], ph["b1"], ph["W2"], ph["b2"]])
    feed = {ph[k]: v for k, v in inp.items()}
    with strategy_on(cluster) as s:
        got = s.run_session(g, [loss, grads], feed, split=[ph["X"], ph["Y"]], reduce="MEAN")
        with pytest.raises(ValueError, match="not fed"):
            s.run_session(g, [loss], {ph["Y"]: inp["Y"]}, split=[ph["X"]], reduce="MEAN")
        with pytest.raises(ValueError, match="reduce_op"):
            s.run_session(g, [loss], feed, split=[ph["X"], ph["Y"]], reduce="MAX")
    # the same split in one process, averaged as the tree documents: (r0 + r1) / 2
    sess = tf.compat.v1.Session(graph=g)
    halves = [sess.run([loss, grads], {**feed, ph["X"]: xs, ph["Y"]: ys})
              for xs, ys in zip(np.array_split(inp["X"], 2), np.array_split(inp["Y"], 2))]
    np.testing.assert_array_equal(got[0], (halves[0][0] + halves[1][0]) / np.float32(2))
    for j in range(4):
        np.testing.assert_array_equal(got[1][j], (halves[0][1][j] + halves[1][1][j]) / np.float32(2))
    # equal shards: the mean of the halves is the whole batch's mean-loss gradient (numpy reference)
    want = workloads.w3_numpy(**inp)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5)
    for a, b in zip(got[1], want[1:]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_graph_with_variables_is_refused(cluster):
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 2])
        v = tf.Variable(np.ones(2, np.float32))
        y = tf.reduce_sum(x * v)
    with strategy_on(cluster) as s, pytest.raises(ValueError, match="without variables"):
        s.run_session(g, y, {x: np.ones((4, 2), np.float32)}, split=[x], reduce="SUM")


def test_errors(cluster):
    with strategy_on(cluster) as s:
        outside = tf.Variable(np.float32(1.0))
        with s.scope():
            inside = tf.Variable(np.float32(2.0))
        (xs,) = s.experimental_distribute_dataset([np.ones(4, np.float32)])
        with pytest.raises(TypeError, match="jitgrad.function"):
            s.run(lambda x: x, args=(xs,))

        @tf.function
        def uses_outside(x):
            return tf.reduce_sum(x) * outside
        with pytest.raises(ValueError, match="scope"):
            s.run(uses_outside, args=(xs,))

        @tf.function
        def assigns_per_replica(x):
            inside.assign_add(tf.reduce_sum(x))
            return inside
        with pytest.raises(ValueError, match="reduce"):
            s.run(assigns_per_replica, args=(xs,))
        with pytest.raises(ValueError, match="3 values"):
            s.run(uses_outside, args=(PerReplica([1, 2, 3]),))
        with pytest.raises(ValueError, match="reduce_op"):
            s.reduce("PROD", xs)
    with pytest.raises(TypeError, match="client"):
        DaskStrategy(client=42)


def test_unreachable_scheduler_is_a_clear_error():
    with socket.socket() as sock:        # a port nothing listens on (bound, never listening)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        with pytest.raises(UnavailableError, match="Cannot reach the Dask scheduler"):
            DaskStrategy(f"tcp://127.0.0.1:{port}", timeout=3)


class _KillOnce(WorkerPlugin):
    """Worker plugin: the first task whose key starts with ``prefix`` to start executing
    on any worker kills that worker's process (SIGKILL: no cleanup, as a crash)."""
    name = "jitgrad-test-kill-once"

    def __init__(self, prefix, marker):
        self.prefix, self.marker = prefix, marker

    def setup(self, worker):
        self.worker = worker

    def teardown(self, worker):
        pass

    def transition(self, key, start, finish, **kwargs):
        import os
        import signal
        if finish == "executing" and str(key).startswith(self.prefix):
            try:
                fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                return
            os.write(fd, self.worker.address.encode())
            os.close(fd)
            os.kill(os.getpid(), signal.SIGKILL)


@pytest.mark.parametrize("phase", ["replica", "update"])
def test_worker_killed_mid_step(trainer, reference, tmp_path, phase):
    import cloudpickle
    cloudpickle.register_pickle_by_value(sys.modules[__name__])   # the plugin class, for the workers
    data = batches(3)
    marker = str(tmp_path / "killed")
    s, mlp = trainer
    client = s.client
    client.wait_for_workers(2, timeout=180)     # a worker killed by the previous case is back

    def kill_during(step):
        if step == 1:
            client.register_plugin(_KillOnce(f"jitgrad-{phase}-", marker), name=_KillOnce.name)

    def until_the_scheduler_saw_it():    # else asking every worker waits for the dead one
        assert os.path.exists(marker), "no worker was killed"
        with open(marker) as f:
            dead = f.read()
        for _ in range(1200):
            if dead not in client.scheduler_info(n_workers=-1)["workers"]:
                break
            time.sleep(0.1)
    try:
        distributed_training(s, mlp, data, kill_during, until_the_scheduler_saw_it)
    finally:
        with contextlib.suppress(ValueError):     # not registered: the run failed before step 1
            client.unregister_worker_plugin(_KillOnce.name)
    assert os.path.exists(marker), "no worker was killed"
    got = mlp.values()
    for a, b in zip(got, reference_training(reference, data, 2)):
        np.testing.assert_array_equal(a, b)


def test_worker_with_another_cpu_compiles_its_own_and_says_so(cluster, monkeypatch):
    from jitgrad.distribute import strategy as dstrategy
    real = dstrategy._export

    def export_for_other_cpu(*a):
        k = real(*a)
        return kernel_export.ShippedKernel(k.keys, k.obj, k.meta, dict(k.fingerprint, cpu="some-other-cpu"))
    monkeypatch.setattr(dstrategy, "_export", export_for_other_cpu)
    before = worker_compiles(cluster)
    with strategy_on(cluster) as s:
        with s.scope():
            w = tf.Variable(np.float32([3.0, -1.0, 0.5]), name="w_other_cpu")

        @tf.function
        def step(x):
            return tf.reduce_sum(tf.exp(x * w))
        (xs,) = s.experimental_distribute_dataset([np.float32([[1, 2, 3], [-1, 0, 2]])])
        out = s.run(step, args=(xs,))
        notes = list(s.kernel_notes)
    np.testing.assert_allclose(out.values[0].numpy(), np.exp(3.0) + np.exp(-2.0) + np.exp(1.5), rtol=1e-6)
    np.testing.assert_allclose(out.values[1].numpy(), np.exp(-3.0) + 1.0 + np.exp(1.0), rtol=1e-6)
    assert notes and "compiled its own kernel" in notes[0]
    after = worker_compiles(cluster)
    assert sum(c for c, _ in after.values()) > sum(before.get(a, (0, 0))[0] for a in after)
