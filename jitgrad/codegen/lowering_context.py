"""What a lowering (lower_*.py) may use of the kernel being built.

Every lowering receives the kernel's builder as ``kb`` and uses only the names
below (tests/test_codegen_structure.py checks each lower_*.py against them), so
writing a new lowering means learning these, not the builder.  KernelBuilder
(kernel.py) implements the interface; the two groups that only some lowerings
need are small views onto it, reached as ``kb.threads`` and ``kb.regions``.

IR emission  ``b``: the llvmlite IRBuilder at the current position (its
             ``function`` / ``module`` are the entry function and the module);
             ``alloca(ty)``: a slot in the entry block; ``loop(stop, start=0,
             step=1)``: ``with kb.loop(n) as i`` over constant bounds (i: i64);
             ``emit_nest(buf, gen)``: buf[idx] = gen(idx, W) over buf's shape;
             ``unique_name(tag)``: a fresh module-level name for a helper function;
             ``define_later(fns, define)``: helper functions declared now, their
             bodies emitted by ``define()`` once the kernel's own text is made
values       ``shape(v)``, ``dtype(v)``; ``gen(v, idx, W)``: v's element(s) at
             idx for W lanes (see kernel.py's docstring); ``buffers[v]``: the
             Buffer of a materialised value; ``scratch_buffer(shape, dt, tag)``:
             a temporary live during the current node (also asked for in the dry
             run); ``literal_buffer(key, shape, dt, make_global)``: a
             module-level constant array
errors       ``set_error(cond, code, values=())``: the status word becomes code where
             cond, first failure only (values: i32s to status words 4, 5, ... with it,
             for the message: list_ops.py);
             ``no_error_yet()``: i1, nothing before this point failed
target       ``target``: the CPU the code is for (codegen/target.py)
threads      ``threads`` (Threads below): splitting one node across threads
regions      ``regions`` (Regions below): control-flow regions (lower_control.py)
"""
from functools import cached_property

INTERFACE = frozenset({
    "b", "alloca", "loop", "emit_nest", "unique_name", "define_later",
    "shape", "dtype", "gen", "buffers", "scratch_buffer", "literal_buffer",
    "set_error", "no_error_yet",
    "target",
    "threads", "regions",
})


def _public(cls):
    return frozenset(name for name in vars(cls) if not name.startswith("_"))


def _builder(name, writable=False):
    """A view's field: the builder's attribute ``name`` (read, or read and written)."""
    def get(view):
        return getattr(view._kb, name)

    def put(view, value):
        setattr(view._kb, name, value)
    return property(get, put if writable else None)


def _builder_call(name):
    """A view's method: the builder's method ``name``."""
    def call(view, *args, **kwargs):
        return getattr(view._kb, name)(*args, **kwargs)
    return call


class _View:
    def __init__(self, kb):
        self._kb = kb


class Threads(_View):
    """A node split across the kernel's threads (lower_matmul.py):

    ``active``        this node's work is split across the threads (else it runs on thread 0)
    ``count``         how many threads the kernel plans for (per-thread workspaces)
    ``counter``       arena offset of this node's block counters (for ``grab``)
    ``tid``           i64: this thread's index
    ``grab(counter, n)``  ``with ... as blk``: blocks 0..n-1 shared out by an atomic counter
    ``grab_rows(m, align=8, chunks=16)``  ``with ... as (r0, r1)``: row chunks of m shared out
                      dynamically (a thread that joins late takes what is left)
    ``barrier()``     all threads wait here for each other
    ``on_thread0()``  context: the enclosed code runs on thread 0 only
    """
    active = _builder("par_node")
    count = _builder("par_slots")
    counter = _builder("par_counter")
    tid = _builder("tid")
    grab = _builder_call("loop_grab")
    grab_rows = _builder_call("grab_rows")
    barrier = _builder_call("barrier")
    on_thread0 = _builder_call("on_thread0")


class Regions(_View):
    """Branches and loop bodies compiled into this kernel (lower_control.py):

    ``node_pos``          index of the node being lowered (names its regions)
    ``sub_builder(program, tag)``  a builder for a region emitted into this module
    ``cache``             this kernel's compiled regions, by the key the lowering picks
    ``groups``            the kernel's fusion report (a region adds its own lines)
    ``arena``             i8*: the kernel's scratch arena
    ``persistent_base``   arena offset of the words kept from call to call
    ``persistent_words``  how many such words are taken (a lowering takes more by adding)
    ``finish_hooks``      callables emitting code just before the entry function returns
    ``nested``            this kernel is itself a region
    ``rng``               i8*: the call's random handle where a region draws (lower_random.py), else None
    """
    node_pos = _builder("cur_pos")
    sub_builder = _builder_call("sub_builder")
    cache = _builder("region_cache")
    groups = _builder("groups")
    arena = _builder("arena")
    persistent_base = _builder("persistent_base")
    persistent_words = _builder("persistent_words", writable=True)
    finish_hooks = _builder("finish_hooks")
    nested = _builder("is_region")
    rng = _builder("rng")


THREADS, REGIONS = _public(Threads), _public(Regions)


class LoweringContext:
    """The interface above; KernelBuilder implements everything but the two views."""

    @cached_property
    def threads(self):
        return Threads(self)

    @cached_property
    def regions(self):
        return Regions(self)
