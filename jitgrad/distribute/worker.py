"""What runs inside a Dask worker process (DaskStrategy submits these functions).

A worker keeps, per strategy, a *mirror* of the strategy's variables (one copy per
worker process) tagged with the number of updates applied to it (its version), and,
per shipped program (``install``), a Session over the program's graph.  Kernels arrive
compiled with the program (``Bundle.kernels``) and are installed into the process's
memory cache before the first run, so the worker never compiles (``cache_info()
['compiles'] == 0``) unless its host differs from the client's (``kernel_export.
install`` says "foreign").  Tasks name a program by its token; a worker that does not
have it answers Need("program") and the client sends it (this process's state is all lost
with it: nothing here depends on data Dask keeps).

Every task names the version it expects, which makes the tasks safe to run again
(Dask re-runs the tasks of a worker that died):
  * a read task (``update=False``) runs only on a mirror at exactly that version;
  * an update task (version v -> v + 1) runs on a mirror at v, and is a no-op on a mirror
    already past v (the same update, applied by an earlier run of the task or included
    in a copy the client sent since).
Anything else (a worker that has just been started, or one that missed an update)
answers Need("variables"); the client then sends that worker its current copy (``seed``).
Nothing here imports Dask except ``_address``.
"""
import pickle
import threading
import uuid
from dataclasses import dataclass

import numpy as np

from .. import denormals, kernel_export
import jitgrad
from ..errors import FailedPreconditionError
from ..session import Session

_mirrors = {}      # strategy id -> Mirror
_programs = {}     # bundle token -> _Program
_lock = threading.Lock()


@dataclass
class Need:
    """What a task could not run without: "program" (this worker was not sent it: it is
    new, or restarted) or "variables" (its mirror is missing or at another version).
    Returned, not raised: Dask logs a raised exception as a failed computation."""
    what: str
    worker: str
    detail: str
    token: str = None


@dataclass
class Bundle:
    """A traced graph as shipped to workers, with the kernel(s) compiled for it."""
    token: str
    graph_bytes: bytes       # pickle of the Graph
    inputs: tuple            # names of the fed placeholders, in argument order
    targets: tuple           # names of the fetched tensors, then of the ops that must run
    n_fetches: int
    kernels: tuple           # ShippedKernel
    # the client's flush-denormals mode (jitgrad/denormals.py) when it made the bundle: a
    # worker process starts in its own (the default, or its JITGRAD_FLUSH_DENORMALS), and
    # running in that one computed other numbers than the client asked for (and missed the
    # shipped kernels, filed under the client's mode's keys: the worker compiled its own)
    flush_denormals: bool = True

    @classmethod
    def make(cls, graph, inputs, targets, n_fetches, kernels):
        return cls(uuid.uuid4().hex, pickle.dumps(graph), tuple(t.name for t in inputs),
                   tuple(t.name for t in targets), n_fetches, tuple(kernels), denormals.enabled())


class Mirror:
    """A worker's copy of a strategy's variables; also the Session variable store
    (``read``/``write``) for the programs that run on it."""

    def __init__(self, version, values):
        self.version = version
        self.values = {k: np.array(v, copy=True) for k, v in values.items()}

    def read(self, key, name):
        try:
            return self.values[key]
        except KeyError:
            raise FailedPreconditionError(f"Variable {name} is not mirrored on this worker") from None

    def write(self, key, value):
        old = self.values[key]
        self.values[key] = np.array(value, dtype=old.dtype, copy=True)


class _NoVariables:
    def read(self, key, name):
        raise FailedPreconditionError(f"Variable {name} is not available on a worker: feed its value instead")

    def write(self, key, value):   # pragma: no cover - graphs with variables are refused by the client
        raise AssertionError("no variables here")


class _Program:
    def __init__(self, bundle):
        self.graph = pickle.loads(bundle.graph_bytes)
        self.inputs = [self.graph.as_graph_element(n) for n in bundle.inputs]
        self.targets = [self.graph.as_graph_element(n) for n in bundle.targets]
        self.n_fetches = bundle.n_fetches
        self.flush_denormals = bundle.flush_denormals
        self.session = Session(graph=self.graph)
        self.kernel_status = [kernel_export.install(k) for k in bundle.kernels]

    def run(self, store, arrays):
        denormals.set_enabled(self.flush_denormals)     # (the process's mode: callers hold _lock)
        self.session._store = store
        out = self.session.run(self.targets, {t.ref(): a for t, a in zip(self.inputs, arrays)}) if self.targets else []
        return [np.asarray(v) for v in out[:self.n_fetches]]


def _address():
    try:
        from distributed import get_worker
        return get_worker().address
    except Exception:   # called outside a worker (tests call these functions directly)
        return "local"


def install(bundle):
    """Keeps a shipped program (and installs its kernels) in this worker process.
    -> ("installed", notes)."""
    with _lock:
        p = _programs.get(bundle.token)
        if p is None:
            p = _programs[bundle.token] = _Program(bundle)
    return "installed", _notes(p)


def _stale(have, want):
    return Need("variables", _address(), f"variables at version {have}, the task needs {want}")


def run_replica(strategy_id, token, version, arrays, after=None):
    """One replica's shard: the program's fetches on this worker's mirror at ``version``
    (None: a program without variables).  ``after``: the result of the update task this
    one was made to wait for.  -> (list of arrays, kernel notes), or a Need."""
    if isinstance(after, Need):     # the update it waited for could not run here: that first
        return after
    prog = _programs.get(token)
    if prog is None:
        return Need("program", _address(), "the program was not sent here", token)
    with _lock:     # one program's Session (and the mirror) is used by one task at a time
        if version is None:
            store = _NoVariables()
        else:
            store = _mirrors.get(strategy_id)
            have = None if store is None else store.version
            if have != version:
                return _stale(have, version)
        out = prog.run(store, arrays)
    return out, _notes(prog) + (list(after[1]) if isinstance(after, tuple) else [])


def run_update(strategy_id, token, version, arrays, after=None):
    """The update ``version -> version + 1`` on this worker's mirror (idempotent, see the
    module docstring; ``after``: the previous update's result, waited for).
    -> ("applied" | "already applied", kernel notes), or a Need."""
    prog = _programs.get(token)
    if prog is None:
        return Need("program", _address(), "the program was not sent here", token)
    with _lock:
        mirror = _mirrors.get(strategy_id)
        have = None if mirror is None else mirror.version
        if have is not None and have > version:    # done before: by this task, or in a copy sent since
            return "already applied", _notes(prog)
        if have != version:
            return _stale(have, version)
        prog.run(mirror, arrays)
        mirror.version = version + 1
    return "applied", _notes(prog)


def _notes(prog):
    if "foreign" in prog.kernel_status:
        return [f"worker {_address()} has another CPU or toolchain than the client: it compiled its own kernel"]
    return []


def seed(strategy_id, version, values):
    """Replaces this worker's mirror of a strategy's variables by the client's copy at
    ``version``, unless the mirror is already past it (a copy that arrives late).
    -> ("seeded" | "newer kept", no notes)."""
    with _lock:
        m = _mirrors.get(strategy_id)
        if m is not None and m.version > version:
            return "newer kept", []
        _mirrors[strategy_id] = Mirror(version, values)
    return "seeded", []


def forget(strategy_id):
    with _lock:
        _mirrors.pop(strategy_id, None)


def mirror_state(strategy_id):
    """(version, {key: array}) of this worker's mirror, or None."""
    m = _mirrors.get(strategy_id)
    return None if m is None else (m.version, {k: v.copy() for k, v in m.values.items()})


def cache_info():
    return dict(jitgrad.cache_info())
