"""DaskStrategy: data-parallel steps on a Dask cluster (``tf.distribute``'s shape).

    strategy = DaskStrategy()                    # a LocalCluster of worker processes here
    with strategy.scope():
        w = tf.Variable(...)                     # mirrored: one copy per worker

    for batch in strategy.experimental_distribute_dataset(batches):
        per_replica = strategy.run(grad_step, args=(batch,))         # each replica's shard
        grads = strategy.reduce("SUM", per_replica, axis=None)       # fixed tree order
        strategy.run(apply_step, args=(grads,))                      # same update everywhere

How a step travels.  The client traces the jitgrad.function for each replica's argument
signature, compiles the kernel (or finds it in its caches) and ships the traced graph
and the kernel's object code to each worker once (``worker.Bundle``, sent when a worker
first needs it); workers install the kernel (``jitgrad.kernel_export``) and never compile.  Per step only the
shards, the per-replica results and the update's inputs travel.

Variables.  The client's variables are the master copy; each worker process keeps a
mirror tagged with a version (see ``worker.py``).  A run with per-replica arguments
only reads the mirrors (assigning a mirrored variable there raises, as in TF without an
aggregation: reduce first).  A run whose arguments are the same for every replica runs
on the client's copy and, when the function assigns variables, on every worker's mirror
too: the same kernel on the same inputs, so all copies stay bit-identical.

Faults.  Dask re-runs the task of a worker that dies; every task names the version of
the variables it needs, so a re-run computes the same bits and an update is never
applied twice; a worker that lost its mirror (or is new) is sent the client's copy.
"""
import collections
import contextlib
import itertools
import logging
import os
import time
import uuid

import numpy as np

from .. import nest, variables as _variables
from ..eager import EagerTensor
from ..errors import UnavailableError
from ..kernel_export import export_kernel
from ..function import Function, _flat_tensors
from . import worker
from .values import PerReplica, local_results, reduce_value, split_batch
from ..passes.prune import prune
from ..session import Session

log = logging.getLogger("jitgrad.distribute")

_MAX_ATTEMPTS = 5     # a task that keeps finding stale mirrors (workers dying over and over)
_WORKER_LIST_AGE = 5.0   # seconds


def _distributed():
    try:
        import distributed
    except ImportError as e:
        raise ImportError("jitgrad.distribute needs Dask's distributed package: "
                          "pip install 'jitgrad[distributed]'") from e
    return distributed


class DaskStrategy:
    """Data-parallel replicas on a Dask cluster.

    client: None (start a ``distributed.LocalCluster`` of worker *processes* on this
    machine, closed by ``close()``), a scheduler address ("tcp://host:8786") or a
    ``distributed.Client``.  num_replicas: how many shards a batch is split into
    (default: the number of workers); results depend on it, never on the number of
    workers.  n_workers / cluster_kwargs: for the LocalCluster (default one worker per
    core, one thread each, JITGRAD_NUM_THREADS=1 in the workers).  timeout: seconds to
    wait for the scheduler and its first worker before raising UnavailableError."""

    def __init__(self, client=None, num_replicas=None, n_workers=None, timeout=60, **cluster_kwargs):
        distributed = _distributed()
        self._id = uuid.uuid4().hex
        self._cluster = None
        self._owns_client = False
        if client is None:
            env = dict({"JITGRAD_NUM_THREADS": "1"}, **cluster_kwargs.pop("env", {}))
            kw = dict(n_workers=n_workers or os.cpu_count() or 1, threads_per_worker=1, processes=True,
                      dashboard_address=":0", env=env)
            kw.update(cluster_kwargs)
            import dask
            # Tasks are placed by the strategy (a replica's worker holds its mirror):
            # work stealing would only move them away from it.
            with dask.config.set({"distributed.scheduler.work-stealing": False}):
                self._cluster = distributed.LocalCluster(**kw)
            client = distributed.Client(self._cluster, direct_to_workers=True)
            self._owns_client = True
        elif isinstance(client, str):
            try:
                client = distributed.Client(client, timeout=timeout)
            except (OSError, TimeoutError) as e:
                raise UnavailableError(f"Cannot reach the Dask scheduler at {client!r} within {timeout} s "
                                       f"({e}). Is `dask scheduler` running there, and is the address right?") from e
            self._owns_client = True
        elif not isinstance(client, distributed.Client):
            raise TypeError(f"client must be None, a scheduler address or a distributed.Client, got {client!r}")
        self.client = client
        self._worker_list, self._worker_time = None, 0.0
        self._pending = {}           # worker address -> the last update sent to it (a future)
        try:
            client.wait_for_workers(1, timeout=timeout)
        except (OSError, TimeoutError) as e:
            self.close()
            raise UnavailableError(f"The Dask cluster at {client.scheduler.address} has no worker "
                                   f"(waited {timeout} s).") from e
        n = len(self._workers())
        self.num_replicas_in_sync = int(num_replicas or n)
        if self.num_replicas_in_sync < 1:
            raise ValueError(f"num_replicas must be at least 1, got {num_replicas}")
        self._mirrored = {}          # variable key -> EagerVariable (the client's master copy)
        self._version = 0            # updates applied to the mirrored variables
        self._synced = None          # variable key -> the master array the workers were last given
        self._bundles = {}           # (id(concrete) | graph key) -> (concrete/graph, program token)
        self._programs = {}          # program token -> worker.Bundle
        self._sessions = {}          # id(graph) -> (graph, Session) for graph-mode exports
        self._steps = itertools.count()
        self.kernel_notes = []       # what workers said about kernels (e.g. compiled their own)
        # reseeds: workers sent the client's copy (new, restarted, or having missed an update);
        # already_applied: update tasks that found their update done (Dask re-ran them)
        self.stats = collections.Counter()

    # ---------------------------------------------------------------- lifecycle
    def close(self):
        """Drops the workers' mirrors; closes the client and cluster if this strategy made them."""
        c = self.client if hasattr(self, "client") else None
        if c is not None and c.status == "running":
            with contextlib.suppress(Exception):
                self._flush()
                c.run(worker.forget, self._id, workers=self._workers(refresh=True), on_error="ignore")
        if self._owns_client and c is not None:
            c.close()
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    # ---------------------------------------------------------------- variables
    @contextlib.contextmanager
    def scope(self):
        """Variables created inside (``tf.Variable``, eagerly) are mirrored on every worker."""
        def mirror(var):
            self._mirrored[var._key] = var
        _variables.creation_observers.append(mirror)
        try:
            yield self
        finally:
            _variables.creation_observers.remove(mirror)

    def _master(self):
        return {k: v._value for k, v in self._mirrored.items()}

    def _sync(self):
        """A master array replaced outside the strategy's runs (``w.assign(...)`` eagerly)
        is a new version, which every worker must be sent."""
        if self._synced is None or any(self._synced.get(k) is not v._value for k, v in self._mirrored.items()):
            if self._synced is not None:
                self._version += 1
            master = self._synced = self._master()
            # As tasks, not client.run: a worker that has just died must not stall the client.
            # Each worker's next task waits for its copy (_pending); one that never gets it
            # answers Need and is sent it then.
            for i, where in enumerate(self._workers()):
                self._pending[where] = self._submit(worker.seed, "seed", i, 0, where, self._version, master)

    def _seed_now(self, address):
        """Sends the client's copy to a worker that has just answered (so is alive)."""
        master = self._synced = self._master()
        self.client.run(worker.seed, self._id, self._version, master, workers=[address])

    def mirror_states(self):
        """{worker address: (version, {variable key: array})}: the workers' mirrors (tests)."""
        self._flush()
        return self.client.run(worker.mirror_state, self._id)

    def worker_cache_info(self):
        """{worker address: jitgrad.cache_info() of that worker process}."""
        return self.client.run(worker.cache_info)

    # ---------------------------------------------------------------- datasets and values
    def experimental_distribute_dataset(self, dataset, options=None):
        """An iterable over ``dataset`` (any iterable of batches: arrays or nested
        structures of arrays) whose elements are split along the batch dimension into
        ``num_replicas_in_sync`` PerReplica shards."""
        return _DistributedDataset(dataset, self.num_replicas_in_sync)

    def experimental_local_results(self, value):
        return local_results(value)

    def reduce(self, reduce_op, value, axis=None):
        """``tf.distribute.Strategy.reduce``: "SUM" or "MEAN" of per-replica values (a
        nested structure of them too), in the fixed tree order of ``values.tree_sum``."""
        def one(v):
            vals = local_results(v)
            arrays = [x._value if isinstance(x, EagerTensor) else np.asarray(x) for x in vals]
            pr = PerReplica(arrays) if isinstance(v, PerReplica) else arrays[0]
            return EagerTensor(np.asarray(reduce_value(reduce_op, pr, axis, self.num_replicas_in_sync)))
        return nest.map_structure(one, value)

    # ---------------------------------------------------------------- eager steps
    def run(self, fn, args=(), kwargs=None):
        """Runs the jitgrad.function ``fn`` once per replica.  PerReplica arguments give
        each replica its own value; -> a structure of PerReplica values."""
        if not isinstance(fn, Function):
            raise TypeError("DaskStrategy.run takes a jitgrad.function (tf.function); wrap the step with "
                            f"@jitgrad.function. Got {fn!r}.")
        kwargs = kwargs or {}
        n = self.num_replicas_in_sync
        leaves = nest.flatten((args, kwargs))
        per_replica = [x for x in leaves if isinstance(x, PerReplica)]
        for x in per_replica:
            if len(x.values) != n:
                raise ValueError(f"A PerReplica argument has {len(x.values)} values; the strategy has {n} replicas.")
        self._sync()
        if not per_replica:
            return self._run_everywhere(fn, args, kwargs)
        calls = []
        for i in range(n):
            a, kw = nest.map_structure(lambda x: x.values[i] if isinstance(x, PerReplica) else x, (args, kwargs))
            concrete = fn.get_concrete_function(*a, **kw)
            self._check_variables(concrete)
            if len(concrete._targets) > len(concrete._fetches):
                raise ValueError(f"{fn._name} assigns variables in a per-replica run, where each replica would "
                                 "assign its own value. Reduce the per-replica values with strategy.reduce, then "
                                 "assign them in a run whose arguments are the same for every replica.")
            calls.append((concrete, _flat_tensors((a, kw))))
        outs = self._submit_replicas([(self._bundle_for(c, arrays), arrays) for c, arrays in calls], self._version)
        structures = [c._build([EagerTensor(o) for o in out]) for (c, _), out in zip(calls, outs)]
        return nest.map_structure(lambda *xs: PerReplica(xs), *structures)

    def _run_everywhere(self, fn, args, kwargs):
        """The same arguments on every replica: run on the client's copy, and apply the
        same update to every worker's mirror when fn assigns variables."""
        concrete = fn.get_concrete_function(*args, **kwargs)
        self._check_variables(concrete)
        arrays = _flat_tensors((args, kwargs))
        updates = len(concrete._targets) > len(concrete._fetches)
        bundle = self._bundle_for(concrete, arrays) if updates else None
        result = concrete._call_flat(arrays)
        if updates:
            version = self._version
            self._version += 1
            self._synced = self._master()
            self._submit_updates(bundle, version, arrays)
        n = self.num_replicas_in_sync
        return nest.map_structure(lambda x: None if x is None else PerReplica([x] * n), result)

    def _check_variables(self, concrete):
        for var in concrete.captured_variables:
            if self._mirrored.get(var._key) is not var:
                raise ValueError(f"{concrete.name} uses the variable {var.name}, which was not created under "
                                 "this strategy's scope(): create the variables a replicated step uses (model "
                                 "weights, optimizer state) inside `with strategy.scope():`.")

    def _bundle_for(self, concrete, arrays):
        entry = self._bundles.get(id(concrete))
        if entry is None or entry[0] is not concrete:
            feed = {t.ref(): a for t, a in zip(concrete.inputs, arrays)}   # traced tensors hash only by ref()
            shipped = _export(concrete._session, concrete._targets, feed)
            bundle = worker.Bundle.make(concrete.graph, concrete.inputs, concrete._targets, len(concrete._fetches),
                                        [shipped])
            entry = self._bundles[id(concrete)] = (concrete, bundle.token)
            self._programs[bundle.token] = bundle
        return entry[1]

    # ---------------------------------------------------------------- graph mode
    def run_session(self, graph, fetches, feed_dict, split, reduce):
        """Graph mode: ``Session.run(fetches, feed_dict)`` with the values fed to the
        placeholders in ``split`` divided along their first dimension into one shard per
        replica (the other feeds go to every replica), run on the workers, and each fetch
        reduced over the replicas with ``reduce`` ("SUM" or "MEAN": the caller says which
        the graph's loss implies -- MEAN for a mean over the batch with equal shards, SUM
        for a sum).  The fetches' subgraph must not read variables (feed them)."""
        n = self.num_replicas_in_sync
        flat = nest.flatten(fetches)
        for f in flat:
            if getattr(f, "graph", None) is not graph or not hasattr(f, "dtype"):
                raise ValueError(f"run_session fetches must be tensors of the given graph, got {f!r}")
        split = list(split)
        feeds = list(feed_dict)
        for p in split:
            if not any(p is k for k in feeds):
                raise ValueError(f"split placeholder {p.name} is not fed in feed_dict")
        ops = prune(flat, {id(k) for k in feeds})
        stateful = sorted({op.name for op in ops if op.type in ("VariableV2", "Assign", "AssignAdd", "AssignSub")})
        if stateful:
            raise ValueError("run_session runs graphs without variables; feed these values instead: "
                             + ", ".join(stateful))
        graph_session = self._graph_session(graph)
        values = [graph_session._fed_list({k: feed_dict[k]})[0][1] for k in feeds]
        shards = [[None] * len(feeds) for _ in range(n)]
        for j, (k, v) in enumerate(zip(feeds, values)):
            parts = np.array_split(v, n, axis=0) if any(k is p for p in split) else [v] * n
            for i in range(n):
                shards[i][j] = np.ascontiguousarray(parts[i])
        calls = [(self._graph_bundle(graph, graph_session, flat, feeds, s), s) for s in shards]
        outs = self._submit_replicas(calls, None)
        reduced = [reduce_value(reduce, PerReplica([o[j] for o in outs]), None, n) for j in range(len(flat))]
        return nest.pack_sequence_as(fetches, [r[()] if r.ndim == 0 else r for r in reduced])

    def _graph_session(self, graph):
        entry = self._sessions.get(id(graph))
        if entry is None or entry[0] is not graph:
            entry = self._sessions[id(graph)] = (graph, Session(graph=graph))
        return entry[1]

    def _graph_bundle(self, graph, session, fetches, feeds, arrays):
        key = (id(graph), len(graph._ops), tuple(id(f) for f in fetches), tuple(id(k) for k in feeds),
               tuple((a.shape, a.dtype.str) for a in arrays))
        entry = self._bundles.get(key)
        if entry is None or entry[0] is not graph:
            shipped = _export(session, fetches, {t.ref(): a for t, a in zip(feeds, arrays)})
            bundle = worker.Bundle.make(graph, feeds, fetches, len(fetches), [shipped])
            entry = self._bundles[key] = (graph, bundle.token)
            self._programs[bundle.token] = bundle
        return entry[1]

    # ---------------------------------------------------------------- tasks
    def _workers(self, refresh=False):
        """The workers' addresses, asked of the scheduler at most every few seconds (a
        stale list costs nothing but a rerouted task: tasks name a worker loosely)."""
        now = time.monotonic()
        if refresh or self._worker_list is None or now - self._worker_time > _WORKER_LIST_AGE:
            self._worker_list = sorted(self.client.scheduler_info(n_workers=-1)["workers"])
            self._worker_time = now
        return self._worker_list

    def _submit(self, fn, kind, i, attempt, where, *args):
        key = f"jitgrad-{kind}-{self._id[:8]}-{next(self._steps)}-{i}-{attempt}"
        return self.client.submit(fn, self._id, *args, key=key, workers=[where], allow_other_workers=True, pure=False)

    def _submit_replicas(self, calls, version):
        """calls: [(program token, arrays)] per replica -> [outputs] per replica.  A
        replica's task runs after the updates sent to its worker (it depends on them), so
        a step costs one round trip."""
        workers = self._workers()

        def submit(i, attempt, where, after=None):
            bundle, arrays = calls[i]
            return self._submit(worker.run_replica, "replica", i, attempt, where, bundle, version, arrays, after)
        futures = {}
        for i in range(len(calls)):
            where = workers[i % len(workers)]
            futures[i] = (submit(i, 0, where, self._pending.get(where) if version is not None else None), where)
        results = self._collect(futures, submit)
        return [results[i][0] for i in range(len(calls))]

    def _submit_updates(self, token, version, arrays):
        """Sends the update version -> version + 1 to every worker's mirror, without
        waiting: each worker's next task depends on it (``_pending``)."""
        for i, where in enumerate(self._workers()):
            after = self._pending.get(where)
            self._pending[where] = self._submit(worker.run_update, "update", i, 0, where, token, version, arrays,
                                                after)

    def _flush(self):
        """Waits for the updates (and copies) sent and not yet followed by a task; a worker
        that missed one is sent the client's copy."""
        pending, self._pending = self._pending, {}
        if pending:
            self._collect({w: (f, w) for w, f in pending.items()}, None)

    def _collect(self, futures, resubmit):
        """Waits for the futures {i: (future, worker it was sent to)}.  A task that answers
        worker.Need (its worker lacks the program, or the variables at the task's version),
        or that lost what it waited for with a dead worker (Dask cancels it), is repaired:
        the worker is sent what it lacks, then a replica task runs again there; an update
        needs nothing more (the copy sent holds it).  Errors are raised.  -> {i: result}."""
        distributed = _distributed()
        results, attempts = {}, 0
        while futures:
            try:
                got = dict(zip(futures, self.client.gather([f for f, _ in futures.values()])))
            except Exception:
                got = {}
                for i, (fut, where) in futures.items():
                    with contextlib.suppress(Exception):   # wait raises for a cancelled future
                        distributed.wait([fut])
                    if fut.status in ("cancelled", "lost"):
                        # What it waited for was lost with a worker and cannot be recomputed
                        # (its own dependencies are released).
                        got[i] = worker.Need("variables", where, f"task {fut.key} lost what it waited for")
                    else:
                        got[i] = fut.result()      # raises the task's error, with its traceback
            retry = {}
            for i, r in got.items():
                if not isinstance(r, worker.Need):
                    results[i] = r
                    continue
                attempts += 1
                if attempts > _MAX_ATTEMPTS * len(futures):
                    raise RuntimeError(f"jitgrad.distribute: giving up after {attempts} repairs ({r})")
                alive = self._workers(refresh=True)
                where = r.worker if r.worker in alive else futures[i][1] if futures[i][1] in alive else alive[0]
                if r.what == "program" and resubmit is not None:
                    log.info("jitgrad.distribute: sending worker %s program %s", where, r.token[:12])
                    self.stats["programs_sent"] += 1
                    answer = self.client.run(worker.install, self._programs[r.token], workers=[where])
                    self._take_notes(answer[where][1])
                else:    # variables missing or at another version (or an update it cannot run)
                    log.info("jitgrad.distribute: worker %s: %s; sending it the current variables", where, r.detail)
                    self.stats["reseeds"] += 1
                    self._pending.pop(where, None)
                    self._seed_now(where)
                if resubmit is not None:
                    retry[i] = (resubmit(i, attempts, where), where)
            futures = retry
        for out, notes in results.values():
            if out == "already applied":
                self.stats["already_applied"] += 1
            self._take_notes(notes)
        return results

    def _take_notes(self, notes):
        for note in notes:
            if note not in self.kernel_notes:
                log.warning("jitgrad.distribute: %s", note)
                self.kernel_notes.append(note)


def _export(session, targets, feed):
    return export_kernel(session, list(targets), feed)


class _DistributedDataset:
    def __init__(self, dataset, num_replicas):
        self._dataset = dataset
        self._n = num_replicas

    def __iter__(self):
        for batch in self._dataset:
            yield split_batch(batch, self._n)

