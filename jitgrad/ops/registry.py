"""The op registry and the single entry point that runs or records an op.

Every op is an ``OpDef``: its shape/dtype rule, its numpy reference kernel,
its gradient rule (written with public ops, so it works in graph and eager
mode and can itself be differentiated) and hints for the compiler. Adding an
op means adding one ``register(...)`` call in one file of ``jitgrad/ops/``.
"""
import numpy as np

from .. import context, denormals, dispatch
from ..errors import InvalidArgumentError, ResourceExhaustedError
from ..graph import Tensor, out_of_scope_error
from ..shapes import InputShapeError

REGISTRY = {}


NOT_DIFFERENTIABLE = "not differentiable"   # grad=: TF's ops.NotDifferentiable, a constant to gradients
NO_GRADIENT_RULE = "no gradient rule"       # grad=: differentiating through it raises LookupError (as TF)
LOWERINGS = ("codegen", "argument", "state", "none", "interpreter")
# What an op's reference kernel does to float denormals in the flush-denormals mode
# (jitgrad/denormals.py): "flush" computes new values (inputs and outputs flushed, as
# TF's FTZ + DAZ kernels), "keep" moves, copies or stores values (denormals pass, as in
# TF and compiled code), "pass_input" computes, but f(x) is x itself for a denormal x
# (TF's expm1 / tan / elu kernels and jitgrad's compiled code return x there),
# "pass_input_float32" is "pass_input" for float32 and "flush" for other types (TF's atan:
# Eigen's float32 kernel returns x, its float64 one a flushed x / 1).
DENORMALS = ("flush", "keep", "pass_input", "pass_input_float32")
_COMPUTING_KINDS = ("elementwise", "reduction", "matmul")   # default "flush"
_MOVING_KINDS = ("layout", "source", "state", "random")     # default "keep"


class OpDef:
    """One op type: everything any part of jitgrad knows about it, in one place.

    infer(shapes, dtypes, attrs) -> [(shape, dtype), ...]
        shapes are tuples of int/None, or None for unknown rank. Raises
        ValueError for incompatible shapes and TypeError for bad dtypes.
    kernel(attrs, *arrays) -> array or tuple of arrays (numpy reference).
    grad(op, *output_grads) -> list of input grads (None where there is none);
        ``op`` has ``inputs``, ``outputs``, ``attrs``/``get_attr``. Registered as
        ``grad=NOT_DIFFERENTIABLE`` (gradients stop here, as for a constant) or
        ``grad=NO_GRADIENT_RULE`` (a LookupError if a gradient must pass), kept in
        ``no_gradient``; tests/test_op_registry.py requires one of the three.
    kind: 'elementwise' (same-shape or broadcast pointwise), 'reduction', 'matmul',
        'layout' (data movement), 'source', 'state', 'random', 'other'.
    stateful: has effects or reads state (never folded, merged or reordered).
    shape_only: indices of inputs whose *shape* alone is used (never their value);
        "rest" = every input after the first (ops with a variable input count).
    lowering: how the compiler handles it: 'codegen' (codegen/lower_*.py emits it),
        'argument' (passes/ir.from_graph turns it into a runtime argument: constants,
        placeholders, variables, random draws), 'state' (from_graph turns it into a
        variable write), 'none' (dropped before codegen: NoOp by from_graph, identity
        ops by the stop_gradient pass), 'interpreter' (no lowering yet: a program holding
        it runs in the reference interpreter; cache_info() counts it as a fallback).
    cost: weight of one element of it in the code generator's work estimate (which
        decides when a loop nest is split across threads): transcendentals ~12,
        divisions and roots ~4, the rest 1.
    pointwise: output element i depends only on element i of the inputs broadcast
        together, and the output shape is their broadcast shape (vectorised batching
        rules in tape.py and batched_gradients.py rely on it). Defaults to
        kind == 'elementwise'.
    identity: at run time output k is a copy of input k (the stop_gradient pass removes it).
    reshape: its first input's elements in the same order under a new shape (a free
        view in codegen; the simplify pass merges chains of them).
    identity_if_same_shape: a copy of its first input when the output has that input's
        shape (the simplify pass removes it then).
    keeps_uniform: a uniform (all-equal) first input gives a uniform output of that
        value (constant folding).
    full_reduce: 'sum' / 'mean' / 'max' / 'min' / 'prod' for ops that reduce with that
        combiner (codegen fuses a reduction to one element into its producer's loop).
    cheap: recomputing it at each use costs less than a buffer (codegen never
        materialises it for sharing).
    data_dependent_shape: its output shape is known only when it runs (boolean_mask,
        a run-time range, py_function); kernels are specialised to static shapes, so a
        compiled run holding it goes to the interpreter (counted as a fallback).
    specialise(attrs, *values): for a data_dependent_shape op whose shape comes from the
        values of its inputs from index ``shape_from`` on (tf.range(n), tf.zeros([n]),
        x[i:j]): given those values (ndarrays, evaluated on the host before a compiled
        run; shape_specialise.py), ``(op type, attrs)`` of the static op that takes the
        inputs before them, or ``("Const", value)``; the compiled run is then
        specialised on them.
    denormals: one of DENORMALS (above). Kinds 'elementwise', 'reduction' and 'matmul'
        default to "flush" (an elementwise op that only moves values, such as
        broadcast_to, says "keep"); 'layout', 'source', 'state', 'random' and identity /
        reshape ops to "keep"; every other op ('other', 'control') must say which, so
        that a new op cannot be flushed or kept by accident.
    run_check(shapes, attrs): optional; what TF's kernel rejects but its shape
        function lets through (a repeated axis): run on a run's concrete shapes
        only (passes/ir.py: concrete_specs), raising ValueError.
    """

    __slots__ = ("name", "infer", "kernel", "grad", "no_gradient", "kind", "stateful", "shape_only", "lowering",
                 "cost", "pointwise", "identity", "reshape", "identity_if_same_shape", "keeps_uniform",
                 "full_reduce", "cheap", "data_dependent_shape", "run_check", "specialise", "shape_from",
                 "denormals")

    def __init__(self, name, infer, kernel, grad=None, kind="other", stateful=False, shape_only=(),
                 lowering="codegen", cost=1, pointwise=None, identity=False, reshape=False,
                 identity_if_same_shape=False, keeps_uniform=False, full_reduce=None, cheap=False,
                 data_dependent_shape=False, run_check=None, specialise=None, shape_from=0, denormals=None):
        if lowering not in LOWERINGS:
            raise ValueError(f"op {name}: lowering must be one of {LOWERINGS}, got {lowering!r}")
        if denormals is None:
            if identity or reshape or kind in _MOVING_KINDS:
                denormals = "keep"
            elif kind in _COMPUTING_KINDS:
                denormals = "flush"
        if denormals not in DENORMALS + (None,):   # (None: register() refuses it)
            raise ValueError(f"op {name} (kind {kind!r}): denormals must be one of {DENORMALS}, got {denormals!r}")
        self.name = name
        self.infer = infer
        self.kernel = kernel
        self.no_gradient = grad if grad in (NOT_DIFFERENTIABLE, NO_GRADIENT_RULE) else None
        self.grad = None if self.no_gradient else grad
        self.kind = kind
        self.stateful = stateful
        self.shape_only = shape_only if shape_only == "rest" else tuple(shape_only)
        self.lowering = lowering
        self.cost = cost
        self.pointwise = kind == "elementwise" if pointwise is None else pointwise
        self.identity = identity
        self.reshape = reshape
        self.identity_if_same_shape = identity_if_same_shape or reshape
        self.keeps_uniform = keeps_uniform or identity or reshape
        self.full_reduce = full_reduce
        self.cheap = cheap
        self.data_dependent_shape = data_dependent_shape
        self.run_check = run_check
        self.specialise = specialise
        self.shape_from = shape_from
        self.denormals = denormals

    def is_shape_only(self, index):
        return index > 0 if self.shape_only == "rest" else index in self.shape_only

    def __repr__(self):
        return f"<OpDef {self.name}>"


def has_fact(op_type, fact):
    """``fact`` (an OpDef attribute) of ``op_type``; False for non-ops such as the IR's "Arg"."""
    opdef = REGISTRY.get(op_type)
    return opdef is not None and bool(getattr(opdef, fact))


def shape_only_input(op, j):
    """Whether ``op`` (a graph op) reads only the shape of its input ``j``, never its value."""
    opdef = REGISTRY.get(op.type)
    return opdef is not None and opdef.is_shape_only(j)


def ops_with(fact):
    """The names of the registered ops for which ``fact`` (an OpDef attribute) is true."""
    return frozenset(name for name, opdef in REGISTRY.items() if getattr(opdef, fact))


class GradOp:
    """The view of an op that gradient functions get, in graph and eager mode alike."""
    __slots__ = ("inputs", "outputs", "attrs", "type", "name")

    def __init__(self, inputs, outputs, attrs, op_type, name):
        self.inputs = tuple(inputs)
        self.outputs = tuple(outputs)
        self.attrs = attrs
        self.type = op_type
        self.name = name

    def get_attr(self, name):
        return self.attrs[name]


def register(name, **kwargs):
    if name in REGISTRY:
        raise KeyError(f"op {name} registered twice")
    if getattr(kwargs.get("infer"), "op_name", None) == "?":
        kwargs["infer"].op_name = name
    opdef = OpDef(name, **kwargs)
    if opdef.denormals is None:
        raise ValueError(f"op {name} (kind {opdef.kind!r}): say what it does to denormals "
                         f"(denormals='flush': it computes new values; 'keep': it moves them)")
    REGISTRY[name] = opdef
    return opdef


def get(name):
    try:
        return REGISTRY[name]
    except KeyError:
        raise LookupError(f"No op named {name!r} is registered.") from None




def eager_now():
    """``context.executing_eagerly()`` without the function calls."""
    return context._eager_enabled[0] and not getattr(context._state, "graphs", None)


def apply_op(op_type, inputs, attrs=None, name=None, exact_name=False):
    """Runs ``op_type`` now (eager) or adds it to the graph being built.

    ``inputs`` must already be tensors of this mode (see convert.py).
    Returns one tensor, or a tuple when the op has several outputs.
    """
    opdef = REGISTRY[op_type]
    attrs = attrs or {}
    if context._eager_enabled[0] and not getattr(context._state, "graphs", None):
        # Fast path: executing eagerly and every input is already an eager tensor.
        et = dispatch.eager_types
        for t in inputs:
            if t.__class__ not in et:
                break
        else:
            return dispatch.eager_execute(opdef, inputs, attrs)
    stack = getattr(context._state, "graphs", None)
    capture = getattr(stack[-1], "capture", None) if stack else None
    if capture is not None:
        # building a function graph (a cond branch, a loop body): outer tensors
        # become its inputs (func_graph.FuncGraph.capture)
        inputs = [capture(t) if isinstance(t, Tensor) and t.graph is not stack[-1] else t for t in inputs]
    graph = None
    for t in inputs:
        if isinstance(t, Tensor):
            graph = t.graph
            break
    if graph is None and context.executing_eagerly():
        return dispatch.eager_execute(opdef, inputs, attrs)
    if graph is None:
        graph = context.get_default_graph()
    else:
        default = context.get_default_graph()
        if default is not graph and graph.building_function:
            # a tensor leaked out of a traced function (a Python list, a global)
            raise out_of_scope_error(next(t for t in inputs if isinstance(t, Tensor)), default)
        if default is not graph and not context.executing_eagerly() and context._stack():
            raise ValueError(f"Tensor {inputs[0].name} must be from the same graph as the op "
                             f"{op_type} being created.")
    specs = infer_named(opdef, name or op_type, inputs, [t.shape.dims for t in inputs], [t.dtype for t in inputs],
                        attrs)
    op = graph.create_op(op_type, inputs, attrs, name, specs, exact_name)
    outs = op.outputs
    if not outs:
        return op  # as in TF, an op without outputs (NoOp, an initializer group) is returned itself
    return outs[0] if len(outs) == 1 else outs


def infer_named(opdef, op_name, inputs, shapes, dts, attrs):
    """``opdef.infer``; an input (of ``inputs``, tensors) whose shape the others rule
    out is named in the error (shapes.InputShapeError, a ValueError)."""
    try:
        return opdef.infer(shapes, dts, attrs)
    except InputShapeError as e:
        raise e.naming(opdef.name, op_name, inputs[e.index].name) from None


try:  # numpy >= 2: errstate is a context variable holding an "extobj"
    from numpy._core._ufunc_config import _extobj_contextvar as _np_err_cv
except ImportError:  # pragma: no cover - other numpy versions
    _np_err_cv = None
_np_ignore_for = {}  # current extobj -> the same with all="ignore"


def _ignoring_fp_errors():
    """numpy's error state with every floating-point warning off, derived once per distinct
    current state (building it is what makes np.errstate cost microseconds)."""
    cur = _np_err_cv.get()
    ign = _np_ignore_for.get(cur)
    if ign is None:
        with np.errstate(all="ignore"):
            ign = _np_err_cv.get()
        if len(_np_ignore_for) >= 64:
            _np_ignore_for.clear()
        _np_ignore_for[cur] = ign
    return ign


def run_kernel(opdef, arrays, attrs):
    """Runs the reference kernel, turning numpy failures into TF's runtime error. TF's kernels
    return inf / NaN without a word, so numpy's RuntimeWarnings (divide by zero, overflow,
    invalid value) are off while it runs."""
    # flush-denormals mode (jitgrad/denormals.py): what the op does to denormals
    policy = opdef.denormals if denormals.enabled() else "keep"
    if policy == "pass_input_float32":
        policy = "pass_input" if arrays and getattr(arrays[0], "dtype", None) == np.float32 else "flush"
    scope = None     # (flush_on, restore, read): the kernel runs with FTZ + DAZ set instead
    if policy != "keep":
        scope = denormals.scope(opdef.name, arrays)
        if scope is None:
            given, arrays = arrays, denormals.flush_all(arrays)
    saved = None
    token = _np_err_cv.set(_ignoring_fp_errors()) if _np_err_cv is not None else None
    try:
        if scope is not None:
            # MXCSR read before it changes: an exception raised between flush_on's return
            # and a store of its result (a KeyboardInterrupt's handler runs there) would
            # leave FTZ + DAZ set with nothing to restore (mxcsr_host.py)
            saved = scope[2]()
            scope[0]()              # (a failed flush_on sets nothing; restoring is harmless)
        if token is None:
            with np.errstate(all="ignore"):
                out = opdef.kernel(attrs, *arrays)
        else:
            out = opdef.kernel(attrs, *arrays)
    except (ValueError, IndexError, ZeroDivisionError, FloatingPointError) as e:
        raise InvalidArgumentError(f"{opdef.name}: {e}") from None
    except MemoryError as e:     # (TF's allocator: OOM, as the compiled path's checks say)
        raise ResourceExhaustedError(f"OOM when running {opdef.name}: {e}") from None
    finally:
        if saved is not None:
            scope[1](saved)
        if token is not None:
            _np_err_cv.reset(token)
    out = out if isinstance(out, tuple) else (out,)
    if policy == "keep" or scope is not None:
        return out
    out = denormals.flush_all(out)
    if policy == "pass_input":
        out[0] = denormals.pass_input(given[0], out[0])
    return tuple(out)
