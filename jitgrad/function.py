"""``jitgrad.function`` (``tf.function``): trace a Python function into a graph
once per input signature, then run that graph through a Session, i.e. down the
compiled path.

* Tensor (and numpy array) arguments become placeholders; the signature key is
  their shapes and dtypes. Python values are part of the key by value. An
  ``input_signature`` of ``tf.TensorSpec`` fixes the key (None dims allowed).
* Eager variables used inside are captured: each becomes a graph "VariableV2"
  node keyed by the variable; ``assign``/``assign_add``/``assign_sub`` become
  graph Assign ops (always run, ordered after earlier reads and writes of the
  same variable; later reads see the new value through control dependencies).
  The Session's variable store is an adapter onto the eager variables.
* ``tf.GradientTape`` inside a trace builds graph gradients (tape.py).
* Results come back as eager tensors in the structure the function returned.
"""
import contextlib
import functools
import types
from collections.abc import Mapping

import numpy as np

from . import context, dispatch, dtypes, function_signature as fs, nest, tape
from .convert import _in_graph, convert_to_tensor, to_numpy
from .eager import EagerTensor
from .func_graph import FuncGraph, in_region
from .indexed_slices import IndexedSlices
from .sparse_tensor import SparseTensor, with_static_shape
from .passes.prune import prune
from .ops.control_flow_ops import assign_in_region, read_for_gradient
from .gradients import VARIABLE_VALUE_OPS
from .graph import Graph, Operation, Tensor, out_of_scope_error
from .ops import array_ops, math_ops
from .ops.registry import apply_op
from .session import FAST_MISS, ConfigProto, Session, runner_key
from .shapes import TensorShape
from .tape import is_eager_variable
from .errors import InvalidArgumentError


# ============================================================ TensorSpec
class TensorSpec:
    """Describes a tensor argument: ``tf.TensorSpec(shape, dtype=tf.float32, name=None)``."""
    __slots__ = ("shape", "dtype", "name")

    def __init__(self, shape, dtype=dtypes.float32, name=None):
        self.shape = TensorShape(shape)
        self.dtype = dtypes.as_dtype(dtype)
        self.name = name

    @classmethod
    def from_tensor(cls, tensor, name=None):
        return cls(tensor.shape, tensor.dtype, name)

    def is_compatible_with(self, other):
        if isinstance(other, TensorSpec):
            return self.dtype == other.dtype and self.shape.is_compatible_with(other.shape)
        t = other if isinstance(other, (EagerTensor, Tensor)) else convert_to_tensor(other)
        return self.dtype == t.dtype and self.shape.is_compatible_with(t.shape)

    def __eq__(self, other):
        return (isinstance(other, TensorSpec) and self.dtype == other.dtype and self.name == other.name
                and self.shape.dims == other.shape.dims)

    def __hash__(self):
        return hash((self.shape.dims, self.dtype.name, self.name))

    def __repr__(self):
        return f"TensorSpec(shape={self.shape}, dtype={self.dtype!r}, name={self.name!r})"


# ============================================================ trace state (the stack of traces is context.traces)


class _TraceContext:
    def __init__(self, graph):
        self.graph = graph
        self.variables = {}   # key -> EagerVariable
        self.reads = {}       # handle id -> current graph read tensor
        self.var_ops = {}     # handle id -> ops the next write of the variable must follow
        self.var_writes = {}  # handle id -> last write op (an Assign, or an If / While assigning it inside)
        self.var_values = {}  # handle id -> the value that last write gave it
        self.roots = {}       # handle id -> the VariableV2 read every region read sends its gradient to
        self.stateful = []    # Assign ops, always run
        self.may_create_variables = False   # only the function's first trace may (as in TF)
        self.created_variables = []
        self.autograph = True     # whether code called in this trace (Keras `call`) is converted
        self.assert_statements = False   # AutoGraph's Feature.ASSERT_STATEMENTS (autograph/asserts.py)


def _graph_being_built(graph):
    """``graph``, or the branch / loop body being built inside it: a variable used with a
    tensor of an enclosing graph (``e * v`` in a branch, ``e`` made in the loop body) is read
    where the op is made, through the region's own read of it -- read in the enclosing graph
    it became an ordinary capture as well, and a cond's gradient counted it twice."""
    if graph is None:
        return None
    g = context.get_default_graph()
    while isinstance(g, FuncGraph):
        if g.outer_graph is graph:
            return context.get_default_graph()
        g = g.outer_graph
    return graph


def read_in_trace(var, graph):
    graph = _graph_being_built(graph)
    ctx = context.current_trace(graph)
    if ctx is None:
        raise TypeError(f"The eager variable {var.name} can only be used in a graph built by jitgrad.function "
                        "(tf.function); create a graph-mode tf.Variable inside the graph instead.")
    for gt in tape._stack:
        if gt._tape is not None and gt._watch_accessed_variables and var.trainable:
            gt._tape.watch_variable(var)
    fg = in_region(graph)
    if fg is not None:   # inside a tf.cond branch / tf.while_loop body of the trace
        return read_for_gradient(fg.read_variable(var), fg.capture(gradient_root(ctx, var)))
    h = var._handle_id
    t = ctx.reads.get(h)
    if t is None and h in ctx.var_writes:
        # A read after a write in the same trace is the write's output (the new value): plain
        # dataflow, so it holds whether the executor orders state ops (interpreter) or reads all
        # variables on entry and writes them on exit (compiled path).
        t = ctx.var_values[h]
        if t.op.type not in VARIABLE_VALUE_OPS:   # written by an If / While: see read_for_gradient
            t = read_for_gradient(t, gradient_root(ctx, var))
        ctx.reads[h] = t
    if t is None:
        t = ctx.reads[h] = _new_read(ctx, var)
        ctx.roots.setdefault(h, t)
    return t


dispatch.read_in_trace = read_in_trace

def _new_read(ctx, var):
    """A VariableV2 read of ``var`` at the top of the trace, after its last write."""
    h = var._handle_id
    g = ctx.graph
    ctx.variables[var._key] = var
    attrs = {"var": var._key, "shape": var.shape.dims, "dtype": var.dtype, "name": var._name[:-2]}
    w = ctx.var_writes.get(h)
    with _in_graph(g), (g.control_dependencies([w]) if w is not None else contextlib.nullcontext()):
        t = apply_op("VariableV2", [], attrs, name=var._name[:-2])
    ctx.var_ops.setdefault(h, []).append(t.op)
    return t


def gradient_root(ctx, var):
    """The read of ``var`` at the top of the trace that GradientTape differentiates with
    respect to (tf.gradients also sums over the trace's other reads and assign results of
    the variable, gradients._other_reads). Reads inside regions and after a region's write
    send their gradient here: as TF, the gradient with respect to a variable is the sum
    over its reads, and no gradient passes through an assignment."""
    h = var._handle_id
    t = ctx.roots.get(h)
    if t is None:
        t = ctx.roots[h] = _new_read(ctx, var)
    return t


def gradient_source_in_trace(var):
    """What GradientTape.gradient differentiates with respect to for ``var`` in a trace."""
    ctx = context.current_trace(None)
    if ctx is None:
        return read_in_trace(var, None)
    for gt in tape._stack:
        if gt._tape is not None and gt._watch_accessed_variables and var.trainable:
            gt._tape.watch_variable(var)
    fg = in_region()
    root = gradient_root(ctx, var)
    # in a branch / loop body (a tape used inside it), its reads' gradients go to the root's capture
    return fg.capture(root) if fg is not None else root


dispatch.gradient_source_in_trace = gradient_source_in_trace


def update_in_trace(var, op_type, value, name, read_value):
    ctx = context.current_trace(None)
    if ctx is None:
        raise TypeError(f"The eager variable {var.name} can only be assigned in a graph built by jitgrad.function.")
    fg = in_region()
    if fg is not None:   # inside a tf.cond branch / tf.while_loop body of the trace
        out = assign_in_region(fg, var, op_type, value, read_value)
        # as at the top (TF's lazily read variable): the result is a read, not the value assigned
        return read_in_trace(var, None) if read_value else out
    g = ctx.graph
    h = var._handle_id
    ctx.variables[var._key] = var
    with _in_graph(g):
        v = convert_to_tensor(value, dtype=var.dtype, graph=g) if not isinstance(value, Tensor) else value
        if v.dtype != var.dtype:
            raise TypeError(f"Cannot assign a {v.dtype.name} value to variable {var.name} of dtype "
                            f"{var.dtype.name}")
        attrs = {"var": var._key, "shape": var.shape.dims, "dtype": var.dtype, "name": var._name[:-2],
                 "validate_shape": True}
        prev = ctx.var_writes.get(h)
        if prev is not None and op_type != "Assign":
            # Chain updates through dataflow (see read_in_trace): v' = previous value +/- delta.
            v = (math_ops.add if op_type == "AssignAdd" else math_ops.subtract)(ctx.var_values[h], v)
            op_type = "Assign"
        deps = list(ctx.var_ops.get(h, []))
        with (g.control_dependencies(deps) if deps else contextlib.nullcontext()):
            out = apply_op(op_type, [v], attrs, name=name or op_type)
    ctx.var_writes[h] = out.op
    ctx.var_values[h] = out
    ctx.var_ops[h] = [out.op]
    ctx.reads.pop(h, None)
    ctx.stateful.append(out.op)
    # TF returns the variable, read lazily (_UnreadVariable): a later use sees later writes
    return var if read_value else out.op


def commit_region_write_in_trace(var, op, value):
    """An If / While op of the trace assigned ``var`` (inside a branch / body) and
    writes it when it runs: a write like an Assign (it reads the variable's value
    so far as an input, later reads see ``value``), run on every call."""
    ctx = context.current_trace(op.graph)
    h = var._handle_id
    ctx.variables[var._key] = var
    ctx.var_writes[h] = op
    ctx.var_values[h] = value
    ctx.var_ops[h] = [op]
    ctx.reads.pop(h, None)
    if op not in ctx.stateful:
        ctx.stateful.append(op)


def create_variable_in_trace(ctx, initial_value, **kwargs):
    """``tf.Variable(...)`` while a function is traced.  As in TF: allowed during the
    function's first trace only; the variable is an eager variable whose initial value
    is computed outside the function (lifted), then captured like any other."""
    if not ctx.may_create_variables:
        raise ValueError("tf.function only supports singleton tf.Variables created on the first call. Make "
                         "sure the tf.Variable is only created once or created outside tf.function.")
    if callable(initial_value):
        with context.init_scope():
            initial_value = initial_value()
    if isinstance(initial_value, Tensor):
        initial_value = _lift(ctx, initial_value)
    scope = ctx.graph.get_name_scope()   # `with self.name_scope:` in a traced method names it
    with context.init_scope(), (context.name_scope(scope + "/") if scope else contextlib.nullcontext()):
        var = dispatch.eager_variable(initial_value, **kwargs)
    ctx.created_variables.append(var)
    return var


def _lift(ctx, tensor):
    """The value of a traced tensor that must not depend on the function's arguments
    (a variable's initial value), computed now by the reference interpreter."""
    if any(op.type == "Placeholder" for op in prune([tensor], ())):
        raise ValueError(f"The initial value of a tf.Variable created inside jitgrad.function ({tensor.name}) "
                         "depends on the function's arguments; it must be computable when the function is "
                         "first traced (use constants, other variables, or create the variable outside).")
    sess = Session(graph=ctx.graph, config=ConfigProto(jitgrad_mode="interpret"))
    sess._store = _EagerVariableStore(dict(ctx.variables))
    return EagerTensor(np.asarray(sess.run(tensor)))


class _EagerVariableStore:
    """Session variable store backed by eager variables (session._store protocol)."""

    def __init__(self, variables):
        self.variables = variables

    def read(self, key, name):
        return self.variables[key]._value

    def write(self, key, value):
        if type(key) is not str:   # a compiled tf.print's / tf.Assert's input (ops/logging_ops.HostTarget)
            key.write(value)
            return
        var = self.variables[key]
        if type(value) is np.ndarray and value.dtype == var._value.dtype and value.flags.c_contiguous:
            # A compiled run's output is a fresh array (buffers.py hands a pooled block out again only
            # once nothing refers to it), and a variable's value is replaced, never changed in place:
            # the variable takes it over instead of copying every variable on every step (Keras fit).
            # Read-only, so a caller holding the same array (a fetched assign) cannot change the variable.
            value.flags.writeable = False
            var._value = value
        else:
            var._value = np.array(value, dtype=var._value.dtype, copy=True)


# ============================================================ signature keys
def _leaf_key(x):
    if isinstance(x, EagerTensor):
        return ("T", x._value.shape, x._value.dtype.str)
    if isinstance(x, SparseTensor):
        # TF's SparseTensorSpec: the dense shape and dtype, not the entry count
        if not isinstance(x.indices, EagerTensor):
            raise TypeError("A symbolic graph SparseTensor cannot be passed to a jitgrad.function called eagerly.")
        return ("S", tuple(x.dense_shape._value.tolist()), x.values._value.dtype.str)
    if isinstance(x, np.ndarray):
        return ("T", x.shape, dtypes.as_dtype(x.dtype).np.str)
    if is_eager_variable(x):
        return ("V", x._handle_id)
    if isinstance(x, Tensor):
        raise TypeError("A symbolic graph Tensor cannot be passed to a jitgrad.function called eagerly.")
    try:
        hash(x)
        return ("P", x)         # by value, as TF: f(x, 1), f(x, 1.0) and f(x, True) share a trace
    except TypeError:
        return ("O", id(x))


def _structure_key(x):
    """The nesting of ``x`` (container types, dict keys) as a hashable value; leaves are None."""
    if not nest.is_nested(x):
        return None
    if isinstance(x, Mapping):
        keys = tuple(sorted(x))
        return (type(x), keys, tuple(_structure_key(x[k]) for k in keys))
    return (type(x), tuple(_structure_key(v) for v in x))


def _key_of(x):
    """The trace key of a call's (args, kwargs): its nesting and, leaf by leaf in nest's
    order (the order the trace's placeholders and every call's feeds use), each leaf's key."""
    return (_structure_key(x), tuple(_leaf_key(v) for v in nest.flatten(x)))


def _tensor_args_key(args):
    """A cheap stand-in for ``_key_of((args, {}))`` when every argument is an EagerTensor
    (the usual call), else None: each one's shape and numpy dtype.  For such calls it
    determines _key_of's key (structure: a flat tuple of len(args) leaves; leaf keys:
    ("T", shape, dtype.str), and equal dtypes have equal .str), so a trace found for it
    is the one the full key finds.  The dtype itself, not .str: .str is built with
    sprintf on every access, a third of this function's cost."""
    if len(args) == 1:           # the usual call, without the loop
        a = args[0]
        if type(a) is not EagerTensor:
            return None
        v = a._value
        return (v.shape, v.dtype)
    key = []
    for a in args:
        if type(a) is not EagerTensor:
            return None
        v = a._value
        key.append(v.shape)
        key.append(v.dtype)
    return tuple(key)


def _flat_tensors(x):
    """The arrays a call feeds: its tensor leaves in nest's order (variables are captured)."""
    out = []
    for v in nest.flatten(x):
        if isinstance(v, EagerTensor):
            out.append(v._value)
        elif isinstance(v, SparseTensor):      # (fed to its three placeholders, see _trace_once)
            out.extend((v.indices._value, v.values._value, v.dense_shape._value))
        elif isinstance(v, np.ndarray):
            out.append(np.asarray(v, dtype=dtypes.as_dtype(v.dtype).np))
    return out


# ============================================================ concrete functions
class ConcreteFunction:
    """One traced graph and the Session that runs it."""

    def __init__(self, graph, inputs, fetches, build, ctx, name):
        self.graph = graph
        self.inputs = inputs
        self._feed_keys = [t.ref() for t in inputs]   # function tensors are unhashable (TF 2)
        self._fetches = fetches
        self._build = build
        self.name = name
        self._session = Session(graph=graph)
        self._session._store = _EagerVariableStore(dict(ctx.variables))
        self._targets = list(fetches) + list(ctx.stateful)
        self._run_key = runner_key(self._targets, self._feed_keys)
        self._out_dtypes = [t.dtype.np for t in fetches]
        self.captured_variables = tuple(ctx.variables.values())
        self.created_variables = tuple(ctx.created_variables)

    def _call_flat(self, arrays):
        s = self._session
        # Session.run's hot-path runner, called as run() would call it, without building the
        # feed dict and run()'s key each call; the runner checks every feed itself, and
        # reads captured variables at each call.  A miss takes run()'s general path.
        runner = s._fast.get(self._run_key)
        vals = runner(*arrays) if runner is not None and not s._closed else FAST_MISS
        if vals is FAST_MISS:
            vals = s.run(self._targets, dict(zip(self._feed_keys, arrays))) if self._targets else []
        return self._build([EagerTensor(np.asarray(v, dtype=d)) for v, d in zip(vals, self._out_dtypes)])

    def __call__(self, *args, **kwargs):
        flat = _flat_tensors((args, kwargs))
        if len(flat) != len(self.inputs):
            raise TypeError(f"{self.name}: expected {len(self.inputs)} tensor arguments, got {len(flat)}.")
        for arr, ph in zip(flat, self.inputs):
            if dtypes.as_dtype(arr.dtype) != ph.dtype or not ph.shape.is_compatible_with(arr.shape):
                raise InvalidArgumentError(f"{self.name}: a tensor of dtype {dtypes.as_dtype(arr.dtype).name} and "
                                           f"shape {arr.shape} does not match the traced input {ph!r}.")
        return self._call_flat(flat)

    @property
    def structured_outputs(self):
        return self._build(self._fetches)

    @property
    def outputs(self):
        return list(self._fetches)

    @property
    def structured_input_signature(self):
        phs = iter(self.inputs)

        def spec(x):
            if isinstance(x, (EagerTensor, np.ndarray)):
                ph = next(phs)   # TF names these specs after the placeholders (the parameters)
                return TensorSpec(ph.shape, ph.dtype, self._spec_names.get(ph.name) or ph.op.name)
            return x
        _, args, kwargs = self._traced_call
        return nest.map_structure(spec, tuple(args)), nest.map_structure(spec, dict(kwargs))

    def pretty_printed_signature(self, verbose=True):
        return fs.pretty_signature(self, verbose)

    def __str__(self):
        return "ConcreteFunction " + self.pretty_printed_signature()

    def __repr__(self):
        return fs.short_signature(self)


class Function:
    """The callable that ``jitgrad.function`` returns."""

    def __init__(self, python_function, input_signature=None, autograph=True, jit_compile=None,
                 reduce_retracing=False, name=None, experimental_autograph_options=None, **_ignored):
        self._python_function = python_function
        self._input_signature = None if input_signature is None else tuple(input_signature)
        self._jit_compile = jit_compile
        self._reduce_retracing = bool(reduce_retracing)
        self._relaxed = {}   # reduce_retracing: shape-free key -> [(relaxed shapes, concrete)]
        self._cache = {}
        self._by_tensor_args = {}   # _tensor_args_key -> the trace _cache/_dispatch chose for it
        self._tracing_count = 0
        self._bound = {}
        functools.update_wrapper(self, python_function)
        self._name = name or getattr(python_function, "__name__", "function")
        self._autograph = autograph
        self._autograph_options = experimental_autograph_options
        self._converted = None

    def _traced_function(self):
        """What a trace runs: with autograph (TF's default), the function with its
        Python control flow on tensors converted (jitgrad/autograph/)."""
        if not self._autograph:
            return self._python_function
        if self._converted is None:
            from . import autograph
            self._converted = autograph.converted_call(self._python_function)
        return self._converted

    @property
    def python_function(self):
        return self._python_function

    @property
    def input_signature(self):
        return self._input_signature

    def experimental_get_tracing_count(self):
        return self._tracing_count

    def __get__(self, instance, owner):
        if instance is None:
            return self
        b = self._bound.get(id(instance))
        if b is None or b[0] is not instance:
            fn = Function(types.MethodType(self._python_function, instance), self._input_signature,
                          autograph=self._autograph, jit_compile=self._jit_compile,
                          reduce_retracing=self._reduce_retracing, name=self._name,
                          experimental_autograph_options=self._autograph_options)
            self._bound[id(instance)] = b = (instance, fn)
        return b[1]

    # ---------------------------------------------------------------- calls
    def _signature_args(self, args, kwargs):
        if kwargs:
            raise TypeError("A jitgrad.function with an input_signature takes positional arguments only.")
        if len(args) == len(self._input_signature) and all(isinstance(s, TensorSpec) for s in self._input_signature):
            flat = list(args)       # one spec per argument: a list argument is one tensor, as in TF
        else:
            flat = nest.flatten(args)
        if len(flat) != len(self._input_signature):
            raise TypeError(f"{self._name}: expected {len(self._input_signature)} arguments for the input "
                            f"signature, got {len(flat)}.")
        converted = []
        for v, spec in zip(flat, self._input_signature):
            if is_eager_variable(v):
                v = v.read_value()
            t = convert_to_tensor(v, dtype=spec.dtype) if not isinstance(v, EagerTensor) else v
            if t.dtype != spec.dtype or not spec.shape.is_compatible_with(t.shape):
                raise TypeError(f"{self._name}: argument {t!r} is not compatible with the input signature "
                                f"{spec!r}.")
            converted.append(t)
        return converted

    def __call__(self, *args, **kwargs):
        if not context.executing_eagerly():
            return self._traced_function()(*args, **kwargs)
        if _tape_is_recording() or context.functions_run_eagerly[0]:
            # A GradientTape outside the function must see its ops (and
            # tf.config.run_functions_eagerly asks for it). Running the
            # Python function eagerly records exactly the ops the trace would
            # contain, so the value and the gradient are those of the traced call.
            return nest.map_structure(_python_value_to_tensor, self._python_function(*args, **kwargs))
        if self._input_signature is not None:
            flat = self._signature_args(args, kwargs)
            key = ("sig",)
            concrete = self._cache.get(key)
            if concrete is None:
                concrete = self._trace(tuple(flat), {}, key, specs=self._input_signature)
            return concrete._call_flat([t._value for t in flat])
        fast = None if kwargs else _tensor_args_key(args)
        if fast is not None:
            concrete = self._by_tensor_args.get(fast)
            if concrete is not None:
                return concrete._call_flat([a._value for a in args])
        if any(isinstance(v, (np.number, np.bool_)) for v in nest.flatten((args, kwargs))):
            # TF traces numpy scalars as tensors, by dtype (by value, np.float32(3.0) == np.int64(3)
            # shared the int64 trace: an int64 result)
            args, kwargs = nest.map_structure(
                lambda v: np.asarray(v) if isinstance(v, (np.number, np.bool_)) else v, (args, kwargs))
        key = _key_of((args, kwargs))
        concrete = self._cache.get(key)
        flat = _flat_tensors((args, kwargs))
        if concrete is None:
            concrete = self._dispatch(args, kwargs, key, flat)
        if fast is not None:
            self._by_tensor_args[fast] = concrete
        return concrete._call_flat(flat)

    def _dispatch(self, args, kwargs, key, flat):
        """A call whose exact key has no trace yet. As TF's dispatch: an earlier trace
        that accepts these shapes serves it (one made by get_concrete_function with
        None dims, or by reduce_retracing), the most specific first; else a new trace,
        with TF's relaxed shapes when reduce_retracing=True (function_signature.generalise)."""
        shapes = [a.shape for a in flat]
        traces = self._relaxed.setdefault(fs.shape_free_key(key), [])
        fits = [(fs.specificity(r), i) for i, (r, _) in enumerate(traces) if fs.accepts(shapes, r)]
        if fits:
            concrete = traces[min(fits)[1]][1]
        elif self._reduce_retracing:
            relaxed = fs.generalise(shapes, [r for r, _ in traces])
            specs = [TensorSpec(r, dtypes.as_dtype(a.dtype)) for r, a in zip(relaxed, flat)]
            concrete = self._trace(args, kwargs, ("relaxed", key, tuple(map(tuple, [r or () for r in relaxed]))),
                                   specs=specs)
            traces.append((relaxed, concrete))
        else:
            concrete = self._trace(args, kwargs, key)
            traces.append((shapes, concrete))
        self._cache[key] = concrete
        return concrete

    def pretty_printed_concrete_signatures(self, verbose=True):
        """TF's text for every trace so far, in tracing order (a function with an
        input_signature shows its one trace even before the first call)."""
        if self._input_signature is not None and not self._cache:
            self.get_concrete_function()
        seen = []
        for c in self._cache.values():
            if all(c is not s for s in seen):
                seen.append(c)
        return "\n\n".join(c.pretty_printed_signature(verbose) for c in seen)

    def get_concrete_function(self, *args, **kwargs):
        """The trace for these arguments; TensorSpecs (anywhere among them) stand for
        tensors of that shape and dtype, None dims included, and the trace then also
        serves later calls whose shapes it accepts (TF's dispatch)."""
        if self._input_signature is not None and not args and not kwargs:
            args = tuple(EagerTensor(np.zeros([d or 0 for d in s.shape.dims or ()], s.dtype.np))
                         for s in self._input_signature)
            key = ("sig",)
            return self._cache.get(key) or self._trace(args, {}, key, specs=self._input_signature)
        key = _key_of((args, kwargs))
        concrete = self._cache.get(key)
        if concrete is not None:
            return concrete
        specs = []

        def stand_in(x):
            if isinstance(x, TensorSpec):
                specs.append(x)
                return EagerTensor(np.zeros([d or 0 for d in x.shape.dims or ()], x.dtype.np))
            if isinstance(x, (EagerTensor, np.ndarray)):
                specs.append(TensorSpec(x.shape, dtypes.as_dtype(x.dtype)))
            elif isinstance(x, SparseTensor):     # (one spec per component, as _flat_tensors)
                specs.extend(TensorSpec(t.shape, t.dtype) for t in (x.indices, x.values, x.dense_shape))
            return x
        targs, tkwargs = nest.map_structure(stand_in, args), nest.map_structure(stand_in, kwargs)
        if not any(isinstance(x, TensorSpec) for x in nest.flatten((args, kwargs))):
            return self._dispatch(args, kwargs, key, _flat_tensors((args, kwargs)))
        concrete = self._trace(targs, tkwargs, key, specs=specs)
        relaxed = [None if sp.shape.rank is None else tuple(sp.shape.dims) for sp in specs]
        self._relaxed.setdefault(fs.shape_free_key(_key_of((targs, tkwargs))), []).append((relaxed, concrete))
        return concrete

    # ---------------------------------------------------------------- tracing
    def _trace(self, args, kwargs, key, specs=None):
        first = self._tracing_count == 0
        concrete = self._trace_once(args, kwargs, key, specs, may_create_variables=first)
        if first and concrete.created_variables:
            # As TF: the first call traces once to create the variables (lifted out and
            # captured), then again for the function that only uses them.  A function
            # that creates variables on every call fails on this second trace -- and on
            # every later call: the first trace is not kept for them to reuse.
            try:
                concrete = self._trace_once(args, kwargs, key, specs, may_create_variables=False)
            except Exception:
                self._cache.pop(key, None)
                raise
        return concrete

    def _trace_once(self, args, kwargs, key, specs, may_create_variables):
        g = Graph()
        g.building_function = True   # TF 2 semantics inside: `==` elementwise, tensors unhashable
        g.seed = context.global_seed()   # as TF's FuncGraph: the eager global seed when traced
        ctx = _TraceContext(g)
        placeholders = []
        spec_iter = iter(specs) if specs is not None else None

        spec_names = {}

        def to_placeholder(x, base):
            if isinstance(x, SparseTensor):
                if spec_iter is not None:     # (its components' specs: the entry count stays free)
                    for _ in range(3):
                        next(spec_iter)
                return _sparse_placeholders(x, base, placeholders)
            if isinstance(x, (EagerTensor, np.ndarray)):
                arr = x._value if isinstance(x, EagerTensor) else x
                spec_name = None
                if spec_iter is not None:
                    spec = next(spec_iter)
                    dtype, shape, spec_name = spec.dtype, spec.shape.dims, spec.name
                else:
                    dtype, shape = dtypes.as_dtype(arr.dtype), arr.shape
                ph = array_ops.placeholder(dtype, shape, name=spec_name or base)
                spec_names[ph.name] = spec_name
                placeholders.append(ph)
                return ph
            return x

        arg_names, kwarg_names = fs.placeholder_names(self._python_function, args, kwargs)
        ctx.may_create_variables = may_create_variables
        ctx.autograph = bool(self._autograph)
        from .autograph.asserts import converts_asserts
        ctx.assert_statements = bool(self._autograph) and converts_asserts(self._autograph_options)
        context.traces.append(ctx)
        try:
            with g.as_default():
                targs = tuple(nest.map_structure(lambda x, n=n: to_placeholder(x, n), a)
                              for a, n in zip(args, arg_names))
                # placeholders are made in nest's order (keys sorted), the order calls flatten in
                tkwargs = {k: nest.map_structure(lambda x, n=kwarg_names[k]: to_placeholder(x, n), kwargs[k])
                           for k in sorted(kwargs)}
                result = self._traced_function()(*targs, **tkwargs)
                fetches = []
                build = _output_builder(result, fetches, ctx)
        finally:
            context.traces.remove(ctx)
        concrete = ConcreteFunction(g, placeholders, fetches, build, ctx, self._name)
        concrete._traced_call = (self._python_function, args, kwargs)   # for its printed signature
        concrete._spec_names = spec_names
        self._tracing_count += 1
        self._cache[key] = concrete
        return concrete

    def __repr__(self):
        return f"<jitgrad.function {self._name} traced {self._tracing_count} time(s)>"


def _output_builder(result, fetches, ctx):
    """Registers the graph tensors of ``result`` as fetches; returns vals -> structure."""
    leaves = []
    for x in nest.flatten(result):
        if is_eager_variable(x):
            x = read_in_trace(x, ctx.graph)
        if isinstance(x, IndexedSlices):    # (a gather's gradient) returned as IndexedSlices, as TF
            leaves.append(_SlicesLeaf(x, fetches, ctx.graph))
        elif isinstance(x, SparseTensor):
            leaves.append(_SlicesLeaf(x, fetches, ctx.graph, _sparse_from_parts))
        elif isinstance(x, Tensor):
            if x.graph is not ctx.graph:   # e.g. appended to a Python list inside a staged loop
                raise out_of_scope_error(x, ctx.graph)
            leaves.append(len(fetches))
            fetches.append(x)
        elif isinstance(x, Operation):
            ctx.stateful.append(x)
            leaves.append(_NONE)
        else:
            leaves.append((_python_value_to_tensor(x),))
    if not nest.is_nested(result):
        (leaf,) = leaves
        return lambda vals: _leaf_value(leaf, vals)
    return lambda vals: nest.pack_sequence_as(result, [_leaf_value(i, vals) for i in leaves])


def _leaf_value(leaf, vals):
    """An output from the run's values: a fetch index, (constant,) or IndexedSlices' parts."""
    if type(leaf) is int:
        return vals[leaf]
    if isinstance(leaf, _SlicesLeaf):
        return leaf.value(vals)
    return leaf[0]


class _SlicesLeaf:
    """An IndexedSlices (or SparseTensor) output: its values, indices and dense_shape fetched,
    rebuilt after the run."""

    def __init__(self, slices, fetches, graph, rebuild=IndexedSlices):
        self._parts = []
        self._rebuild = rebuild
        for t in (slices.values, slices.indices, slices.dense_shape):
            if isinstance(t, Tensor):
                if t.graph is not graph:
                    raise out_of_scope_error(t, graph)
                self._parts.append(len(fetches))
                fetches.append(t)
            else:
                self._parts.append((t,))

    def value(self, vals):
        return self._rebuild(*(_leaf_value(p, vals) for p in self._parts))


def _sparse_from_parts(values, indices, dense_shape):
    return SparseTensor(indices, values, dense_shape)


def _sparse_placeholders(x, base, placeholders):
    """A SparseTensor argument in a trace: placeholders for its indices and values (any entry
    count) and dense_shape, with the argument's dense shape as its static shape (TF's
    SparseTensorSpec)."""
    rank = len(x.dense_shape._value)
    parts = [array_ops.placeholder(dtypes.int64, [None, rank], name=base + "_indices"),
             array_ops.placeholder(x.dtype, [None], name=base + "_values"),
             array_ops.placeholder(dtypes.int64, [rank], name=base + "_dense_shape")]
    placeholders.extend(parts)
    return with_static_shape(SparseTensor(*parts), x.dense_shape._value.tolist())


_NONE = (None,)   # an Operation's place in the outputs: None, as in TF


def _python_value_to_tensor(x):
    """TF returns tensors for Python numbers a function returns; None stays None."""
    if isinstance(x, (bool, int, float, np.number, np.ndarray)):
        return EagerTensor(to_numpy(x))
    return x


def _tape_is_recording():
    # checked on every call: no generator when no tape is open (the usual case)
    return bool(tape._stack) and any(gt._tape is not None for gt in tape._stack)


def function(func=None, input_signature=None, autograph=True, jit_compile=None, reduce_retracing=False,
             experimental_implements=None, experimental_autograph_options=None, experimental_relax_shapes=None,
             experimental_compile=None, experimental_follow_type_hints=None, name=None):
    """``tf.function``: use as ``@function``, ``@function(...)`` or ``function(f, ...)``."""
    def wrap(f):
        return Function(f, input_signature=input_signature, autograph=autograph,
                        jit_compile=jit_compile if jit_compile is not None else experimental_compile,
                        reduce_retracing=reduce_retracing or bool(experimental_relax_shapes), name=name,
                        experimental_autograph_options=experimental_autograph_options)
    if func is None:
        return wrap
    return wrap(func)
