"""tf.random: uniform, normal, truncated_normal, set_seed.

Each random op owns a ``Sampler``: TF's stateful Philox generator (GuardedPhiloxRandom)
with key = the global seed and counter = the op seed in its high half, each run drawing
from where the last one stopped (it reserves 256 Philox calls per element), and the
distributions of ops/philox.py, so seeded draws are TF 2.21's bit for bit. The compiler
does not generate random numbers natively: a random op becomes a runtime argument of the
fused kernel (kind ``"rand"``, see passes/ir.py) that the runner fills with a fresh draw
before each call, so graphs differing only in their random ops share one kernel.

Seeds are TF's get_seed: eagerly, the global seed of ``tf.random.set_seed`` and, for an
op without ``seed=``, an op seed drawn from ``random.Random(global seed)``; eager ops with
the same (op, dtype, seeds) continue one stream, as TF's cached eager kernels do (set_seed
restarts them). In a graph, the graph's own seed (set_seed while it is the default graph;
a tf.function's graph takes the eager global seed when traced, a branch or loop body its
outer graph's) and, for an op without ``seed=``, the graph's count of such ops. A graph's
op draws from the running Session's copy of its stream (``ACTIVE``), as TF makes kernels per
Session: a new Session starts every sequence afresh. Random ops have no gradient.

Inside a compiled branch / loop body the number of draws is known only as the
kernel runs, so nothing can be drawn beforehand: such an op is a
``RegionRandom`` node (passes/ir.from_graph) whose lowering
(codegen/lower_random.py) calls ``jitgrad_region_random(run, site, out)``
each time it executes.  ``run`` is a per-call handle the executor opens
around the native call (``region_draws``): it names the samplers of *this*
run's graph, by site, and is closed when the call returns, so a kernel shared
by two graphs (sites are numbered by structure, not by sampler) draws from
each graph's own ops, and a stale handle finds nothing (the run fails with
ERR_RANDOM instead of drawing from another run's samplers).  The draws are
the op's sampler's next arrays, in execution order: the numbers the
interpreter draws running the same region.
"""
import contextlib
import ctypes
import itertools
import os
import threading

import numpy as np

from .. import context, dtypes
from ..convert import convert_to_tensor
from ..errors import InvalidArgumentError
from . import philox
from .registry import NOT_DIFFERENTIABLE, apply_op, register

DEFAULT_GRAPH_SEED = 87654321   # TF's op-seed-only default (random_seed.py)
MAXINT32 = 2 ** 31 - 1
# Eager ops with the same (op, dtype, seeds) continue one stream, as TF's cached eager
# kernels do (tf.random.uniform([1], seed=1) twice gives two different values).
_eager_samplers = {}


def set_seed(seed):
    """tf.random.set_seed: eagerly the global seed (restarting the eager op-seed sequence and
    the eager ops' streams, so re-running a program repeats its draws); while a graph is
    being built, that graph's seed."""
    if context.executing_eagerly():
        context.set_global_seed(seed)
        _eager_samplers.clear()
    else:
        context.get_default_graph().seed = seed


def _seeds(op_seed):
    """TF's get_seed: (global, op) seeds truncated to [0, 2^31 - 1), or None for fresh entropy."""
    graph = None if context.executing_eagerly() else context.get_default_graph()
    global_seed = context.global_seed() if graph is None else graph.seed
    if global_seed is not None:
        if op_seed is None:
            if graph is None:
                op_seed = context.internal_operation_seed()
            else:
                op_seed, graph.next_op_seed = graph.next_op_seed, graph.next_op_seed + 1
        seeds = int(global_seed) % MAXINT32, int(op_seed) % MAXINT32
    elif op_seed is not None:
        seeds = DEFAULT_GRAPH_SEED, int(op_seed) % MAXINT32
    else:
        return None
    return (0, MAXINT32) if seeds == (0, 0) else seeds


# The running Session's streams ({op's stream: this Session's copy}): TF makes a graph's
# kernels per Session, so each Session starts every random op's stream afresh. Set by
# Session.run (session.py) for its thread, and by the region hook around a kernel's draws.
ACTIVE = threading.local()


class PhiloxStream:
    """A stateful op's generator (TF's GuardedPhiloxRandom): each run reserves its calls.
    A graph op's stream: inside a Session's run the Session's own copy advances, not this one
    (an eager op's is one for the process, as TF's cached eager kernel, even if it draws
    while a Session runs, e.g. in a py_function)."""
    __slots__ = ("seeds", "key", "counter", "per_session")

    def __init__(self, seeds):
        self.seeds = seeds
        self.per_session = not context.executing_eagerly()
        if self.per_session:        # (Session.run keeps the streams of such graphs only)
            g = context.get_default_graph()
            while getattr(g, "outer_graph", None) is not None:
                g = g.outer_graph
            g.draws_per_session = True
        if seeds is None:       # TF: fresh random seeds
            seeds = tuple(int.from_bytes(os.urandom(8), "little") for _ in range(2))
        self.key, self.counter = int(seeds[0]) & philox.MASK64, (int(seeds[1]) & philox.MASK64) << 64

    def reserve(self, calls):
        streams = getattr(ACTIVE, "streams", None) if self.per_session else None
        st = self
        if streams is not None:
            st = streams.get(self)
            if st is None:
                st = streams[self] = PhiloxStream(self.seeds)
        start = (st.key, st.counter)
        st.counter = (st.counter + int(calls)) & philox.MASK128
        return start


class Sampler:
    """One random op's generator: TF's PhiloxRandomOp, which reserves 256 calls per element."""

    __slots__ = ("stream",)

    def __init__(self, seeds):
        self.stream = PhiloxStream(seeds)

    def draw(self, kind, shape, dtype, attrs):
        n = int(np.prod(shape, dtype=np.int64))
        if kind == "RandomShuffle":
            return self._permutation(n).astype(dtype)
        st = self.stream.reserve(philox.CALLS_PER_ELEMENT * n)
        if kind == "RandomUniform":
            out = philox.uniform(st, n, dtype)
        elif kind == "RandomUniformInt":
            out = philox.uniform_int(st, n, dtype, attrs["minval"], attrs["maxval"])
        elif kind == "TruncatedNormal":
            out = philox.truncated_normal(st, n, dtype)
        else:
            out = philox.normal(st, n, dtype)
        return out.reshape(shape)

    def _permutation(self, n):
        """TF's RandomShuffle: Fisher-Yates, swapping row i with row i + (word i mod (n - i)),
        on n - 1 words (reserved four to a call); nothing drawn for n <= 1."""
        order = np.arange(n, dtype=np.int64)
        if n <= 1:
            return order
        st = self.stream.reserve((n - 1 + 3) // 4)
        words = philox.words(st, n - 1).astype(np.int64)
        for i, w in enumerate(words):
            j = i + int(w) % (n - i)
            order[i], order[j] = order[j], order[i]
        return order


def _infer(shapes, dts, attrs):
    return [(attrs["shape"], attrs["dtype"])]


def _draw(kind, attrs):
    """The op's next array (its sampler's next draw)."""
    return np.asarray(attrs["sampler"].draw(kind, attrs["shape"], attrs["dtype"].np, attrs),
                      dtype=attrs["dtype"].np, order="C")


def _kernel(kind):
    return lambda attrs: _draw(kind, attrs)


# (RandomShuffle draws the permutation tf.random.shuffle gathers with: ops/random_composites.py;
# HostSeededRandom, Keras 3's draws: ops/host_seeded_random.py gives it its sampler)
RANDOM_OPS = ("RandomUniform", "RandomUniformInt", "RandomStandardNormal", "TruncatedNormal", "RandomShuffle",
              "HostSeededRandom")
for _kind in RANDOM_OPS:
    register(_kind, infer=_infer, kernel=_kernel(_kind), kind="random", grad=NOT_DIFFERENTIABLE,
             lowering="argument")


# ---------------------------------------------------------------- random ops inside compiled regions
HOOK_SYMBOL = "jitgrad_region_random"


class RandomSite:
    """A random op of the graph as a RegionRandom node knows it: draws its next
    array. Its repr (what a compile signature sees) is the op type only, so the
    samplers never reach a cache key."""
    __slots__ = ("op_type", "attrs")

    def __init__(self, op_type, attrs):
        self.op_type, self.attrs = op_type, attrs

    def draw(self):
        return _draw(self.op_type, self.attrs)

    def __repr__(self):
        return f"RandomSite({self.op_type})"


def region_random_node_attrs(op, site):
    """The attrs of the RegionRandom node of random op ``op`` at site number ``site``."""
    _register_hook()
    extra = {k: op.attrs[k] for k in ("minval", "maxval") if k in op.attrs}
    return {"site": site, "op_type": op.type, "shape": op.attrs["shape"], "dtype": op.attrs["dtype"],
            "draws": RandomSite(op.type, op.attrs), **extra}


register("RegionRandom", infer=_infer, kernel=lambda attrs: attrs["draws"].draw(), kind="state",
         lowering="codegen", grad=NOT_DIFFERENTIABLE)   # kind "state": never folded or merged


def region_sites(program):
    """{site: RandomSite} of the RegionRandom nodes in a Program's regions, at any depth."""
    sites = {}
    todo = [program]
    while todo:
        p = todo.pop()
        for n in p.nodes:
            if n.op == "RegionRandom":
                sites[n.attrs["site"]] = n.attrs["draws"]
            for k in ("then_branch", "else_branch", "body", "cond"):
                sub = n.attrs.get(k) if n.op in ("If", "While") else None
                if sub is not None and hasattr(sub, "nodes"):
                    todo.append(sub)
    return sites


_RUNS = {}                      # open handle -> ({site: RandomSite}, the run's Session streams); only while its kernel runs
_run_ids = itertools.count(1)   # never reused: a stale handle finds nothing
_HOOK = []                      # the ctypes callback (kept alive for the process)


def open_draws(sites):
    """A new handle naming ``sites`` ({site: RandomSite}) to the hook; close it with close_draws."""
    handle = next(_run_ids)
    _RUNS[handle] = (sites, getattr(ACTIVE, "streams", None))   # (the hook may run on another thread)
    return handle


def close_draws(handle):
    del _RUNS[handle]


@contextlib.contextmanager
def region_draws(ptrs, slot, sites):
    """Opens this call's handle in ``ptrs[slot]`` (the kernel's random slot) for
    the duration of the native call; nothing to do without a slot. (The fast
    runner, fast_runner.py, opens and closes it inline.)"""
    if slot is None:
        yield
        return
    handle = open_draws(sites)
    ptrs[slot] = handle
    try:
        yield
    finally:
        close_draws(handle)
        ptrs[slot] = 0


def _on_region_random(handle, site, out):
    try:
        sites, streams = _RUNS.get(handle or 0, (None, None))
        if sites is None or site not in sites:
            return 1
        before, ACTIVE.streams = getattr(ACTIVE, "streams", None), streams
        try:
            arr = np.ascontiguousarray(sites[site].draw())
        finally:
            ACTIVE.streams = before
        if arr.nbytes:
            ctypes.memmove(out, arr.ctypes.data, arr.nbytes)
        return 0
    except Exception:   # (a callback cannot raise into native code: the run fails with ERR_RANDOM)
        return 1


def _register_hook():
    if _HOOK:
        return
    hook = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p)(_on_region_random)
    from ..cache import elf
    elf.EXTRA_SYMBOLS[HOOK_SYMBOL] = ctypes.cast(hook, ctypes.c_void_p).value   # both loaders resolve it
    _HOOK.append(hook)


def shape_of_draws(shape):
    """A fully known shape as a tuple of ints (jitgrad specialises kernels to shapes)."""
    if hasattr(shape, "as_list"):     # TensorShape
        shape = shape.as_list()
    if hasattr(shape, "numpy"):       # an eager tensor
        shape = shape.numpy()
    elif hasattr(shape, "op"):        # a graph tensor: only a constant is static
        if shape.op.type != "Const":
            raise ValueError("jitgrad's random ops need a static shape; got the tensor "
                             f"{shape.name} computed at run time.")
        shape = shape.op.attrs["value"]
    dims = np.asarray(shape)
    if dims.ndim > 1 or (dims.size and dims.dtype.kind not in "iu"):
        raise ValueError(f"Shape must be a 1-D list of integers, got {shape!r}")
    dims = tuple(int(d) for d in dims.reshape(-1))
    if any(d < 0 for d in dims):
        # TF 2.21: its kernel's InvalidArgumentError eagerly; in a graph its shape function takes
        # -1 for an unknown dim (the kernel raises when it runs) and rejects other negatives
        msg = f"Dimensions must be non-negative, got {list(dims)}"
        if context.executing_eagerly() or -1 in dims:
            raise InvalidArgumentError(msg)
        raise ValueError(msg)
    return dims


def _random(kind, shape, dtype, seed, name, kernel_dtype=None, **extra):
    """A random op; eagerly its sampler is the one TF's cached kernel of the same op, attrs
    (``kernel_dtype``: its dtype attr, when not the output's) and seeds would hold."""
    seeds = _seeds(seed)
    if seeds is not None and context.executing_eagerly():
        key = (kind, (kernel_dtype or dtype).name, seeds)
        sampler = _eager_samplers.setdefault(key, Sampler(seeds))
    else:
        sampler = Sampler(seeds)
    attrs = {"shape": shape_of_draws(shape), "dtype": dtype, "seed": seed, "sampler": sampler, **extra}
    return apply_op(kind, [], attrs, name=name or kind)


def _float_dtype(dtype, api):
    dtype = dtypes.as_dtype(dtype)
    if not dtype.is_floating:
        raise ValueError(f"Invalid dtype {dtype.name} for {api}: a floating dtype is required.")
    return dtype


def _scaled(raw, scale, shift, dtype):
    scale = convert_to_tensor(scale, dtype=dtype)
    shift = convert_to_tensor(shift, dtype=dtype)
    return raw * scale + shift


def uniform(shape, minval=0, maxval=None, dtype=dtypes.float32, seed=None, name=None):
    """tf.random.uniform: floats in [minval, maxval) (maxval defaults to 1), or
    integers in [minval, maxval) for an integer dtype (maxval required)."""
    dtype = dtypes.as_dtype(dtype)
    if dtype.is_integer:
        if maxval is None:
            raise ValueError(f"Must specify maxval for integer dtype {dtype.name}")
        lo, hi = (int(np.asarray(getattr(v, "numpy", lambda: v)())) for v in (minval, maxval))
        if lo >= hi:
            raise ValueError(f"Need minval < maxval, got {lo} >= {hi}")
        return _random("RandomUniformInt", shape, dtype, seed, name, minval=lo, maxval=hi)
    dtype = _float_dtype(dtype, "tf.random.uniform")
    raw = _random("RandomUniform", shape, dtype, seed, name)
    if maxval is None:
        maxval = 1
    if _is_number(minval, 0) and _is_number(maxval, 1):
        return raw
    lo = convert_to_tensor(minval, dtype=dtype)
    return _scaled(raw, convert_to_tensor(maxval, dtype=dtype) - lo, lo, dtype)


def _gaussian(kind, api, shape, mean, stddev, dtype, seed, name):
    dtype = _float_dtype(dtype, api)
    raw = _random(kind, shape, dtype, seed, name)
    if _is_number(mean, 0) and _is_number(stddev, 1):
        return raw
    return _scaled(raw, stddev, mean, dtype)


def normal(shape, mean=0.0, stddev=1.0, dtype=dtypes.float32, seed=None, name=None):
    """tf.random.normal."""
    return _gaussian("RandomStandardNormal", "tf.random.normal", shape, mean, stddev, dtype, seed, name)


def truncated_normal(shape, mean=0.0, stddev=1.0, dtype=dtypes.float32, seed=None, name=None):
    """tf.random.truncated_normal: normal draws beyond two standard deviations are redrawn."""
    return _gaussian("TruncatedNormal", "tf.random.truncated_normal", shape, mean, stddev, dtype, seed, name)


def _is_number(v, want):
    return isinstance(v, (int, float, np.integer, np.floating)) and v == want

