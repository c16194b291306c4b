"""``tf.GradientTape``: records eager ops and replays them backwards.

The backward pass is TensorFlow's eager algorithm (tensorflow/c/eager/tape.h,
``GradientTape::ComputeGradient``) step for step, because the order in which
gradient contributions are produced is the order AddN sums them in, and
float32 results only match TF bit for bit if that order matches:

* every recorded op gets the next op id of its tape; a tensor id maps to the
  op that produced it (or -1 when it is watched);
* PrepareBackprop walks back from the targets, counting for every tensor how
  many recorded ops use it, and for every op how many of its outputs are used;
* the initial stack holds the ops none of whose outputs are used, sorted by
  id; ops are popped from the back, and an op whose output gradients become
  complete is inserted at the *front* of the stack;
* contributions to one tensor are appended in that processing order and summed
  with AddN (left to right) when the consuming op is processed, or at the end
  for sources; gradients of a variable flow to its handle through one
  "ReadVariableOp" record per read.

Gradient functions are the registry's (the same ones graph mode uses) and are
built from public ops, so they execute eagerly and are recorded by any outer
tape: nested tapes give higher-order derivatives.

``jacobian``/``batch_jacobian`` run the backward pass once with a batch of
one-hot output gradients: every gradient tensor carries an extra leading
dimension that the gradient functions do not see (eager.BatchedTensor), and
ops applied to batched tensors run through batching rules (below) — a
vectorised rule for elementwise ops, reductions, the broadcasting helpers,
reshapes and matmul, and a per-row loop over the numpy kernel for anything
else.

Inside ``jitgrad.function`` tracing, ``gradient`` builds graph gradients with
``jitgrad.gradients`` instead, and ``jacobian``/``batch_jacobian`` build ONE
batched graph backward pass (batched_gradients.py: the gradient graph with
batching rules applied to every op that carries the cotangent).
"""
import collections
import contextlib
import logging

import numpy as np

from . import context, dispatch, dtypes, eager, nest, sparse_gradients
from .convert import convert_to_tensor, eager_capture
from .eager import BatchedTensor, EagerTensor
from .errors import InvalidArgumentError
from .func_graph import in_region
from .gradients import fitted_output_shape, gradients, UnconnectedGradients
from .graph import Tensor
from .indexed_slices import IndexedSlices
from .loop_jacobians import loop_batch_jacobian, loop_jacobian, zeros_jacobian
from .ops import array_ops, math_ops
from .ops.array_ops import reshape, stack, transpose
from .ops.math_ops import add_n, zeros_like
from .ops.registry import NOT_DIFFERENTIABLE, GradOp, run_kernel
from .ops.sums import reference_sum
from .shapes import TensorShape, normalize_axes

_FLOAT_NP = dtypes.FLOAT_NP   # floating numpy dtypes (bfloat16 has kind "V")


class _TrainableNumpyDtypes:
    """``dt in _TRAINABLE_NP``: what carries gradients (TF's IsTrainable), floating and complex.
    A view, not a copy: dtypes.FLOAT_NP gains bfloat16 after this module is imported."""

    def __contains__(self, dt):
        return dt in _FLOAT_NP or getattr(dt, "kind", None) == "c"


_TRAINABLE_NP = _TrainableNumpyDtypes()

_log = logging.getLogger(__name__)

# Tapes currently recording, innermost last.
_stack = []

_NON_PERSISTENT_MSG = ("A non-persistent GradientTape can only be used to compute one set of gradients "
                       "(or jacobians)")


# ============================================================ recording
def is_eager_variable(x):
    """An EagerVariable (tf.Variable made eagerly or in a trace); module.py's _is_variable is
    any tf.Variable, graph-mode ones included: a tape watches only eager variables."""
    return isinstance(x, dispatch.eager_variable)


class _OpRecord:
    __slots__ = ("op_type", "grad_fn", "inputs", "input_ids", "outputs", "output_ids", "attrs")

    def __init__(self, op_type, grad_fn, inputs, input_ids, outputs, attrs):
        self.op_type = op_type
        self.grad_fn = grad_fn
        self.inputs = inputs
        self.input_ids = input_ids
        self.outputs = outputs
        self.output_ids = [o._id for o in outputs]
        self.attrs = attrs


class _Tape:
    """The low-level tape (TF's C++ GradientTape): tensor -> op maps and records."""

    def __init__(self, persistent):
        self.persistent = persistent
        self.tensor_tape = {}  # tensor (or variable handle) id -> op id, or -1 if watched
        self.op_tape = {}
        self.next_op_id = 0
        self.watched_variables = {}  # handle id -> variable

    def watch(self, tid):
        self.tensor_tape.setdefault(tid, -1)

    def watch_variable(self, var):
        self.watch(var._handle_id)
        self.watched_variables.setdefault(var._handle_id, var)

    def should_record(self, inputs):
        tt = self.tensor_tape
        for t in inputs:
            if t._id in tt and t._value.dtype in _TRAINABLE_NP:
                return True
        return False

    def record(self, op_type, grad_fn, inputs, input_ids, outputs, attrs):
        op_id = self.next_op_id
        self.next_op_id += 1
        for o in outputs:
            self.tensor_tape[o._id] = op_id
        self.op_tape[op_id] = _OpRecord(op_type, grad_fn, inputs, input_ids, outputs, attrs)


def _record_eager_op(opdef, inputs, outputs, attrs):
    if not isinstance(outputs, (list, tuple)):
        outputs = [outputs]
    for gt in _stack:
        tape = gt._tape
        if tape is not None and tape.should_record(inputs):
            tape.record(opdef.name, opdef, list(inputs), [t._id for t in inputs], list(outputs), attrs)


def _variable_read(var, t):
    """A read of ``var`` producing ``t``: watch it where asked, record it where watched."""
    for w in _variable_watchers:
        w._add(var)
    for gt in _stack:
        tape = gt._tape
        if tape is None:
            continue
        if gt._watch_accessed_variables and var.trainable:
            tape.watch_variable(var)
        if var._handle_id in tape.tensor_tape:
            tape.record("ReadVariableOp", None, [var], [var._handle_id], [t], {})


_variable_watchers = []


class VariableWatcher:
    """TF's record.VariableWatcher: collects the trainable variables read eagerly
    while it is active (tf.custom_gradient's ``variables``), in first-read order."""

    def __init__(self):
        self._vars = {}

    def _add(self, var):
        if var.trainable:
            self._vars.setdefault(var._handle_id, var)

    def __enter__(self):
        _variable_watchers.append(self)
        return self

    def __exit__(self, *exc):
        _variable_watchers.remove(self)
        return False

    def watched_variables(self):
        return list(self._vars.values())


def record_custom_op(op_type, backward, inputs, outputs):
    """Records on every tape watching one of ``inputs`` an op whose gradient is
    ``backward.grad(op, *output_grads)`` (tf.custom_gradient in eager mode)."""
    for gt in _stack:
        tape = gt._tape
        if tape is not None and tape.should_record(inputs):
            tape.record(op_type, backward, list(inputs), [t._id for t in inputs], list(outputs), {})


def _push(gt):
    _stack.append(gt)
    if _record_eager_op not in eager.op_recorders:
        eager.op_recorders.append(_record_eager_op)


def _pop(gt):
    for i in range(len(_stack) - 1, -1, -1):
        if _stack[i] is gt:
            del _stack[i]
            break
    if not _stack and _record_eager_op in eager.op_recorders:
        eager.op_recorders.remove(_record_eager_op)


# ============================================================ the backward pass
_MIN_AGGREGATE_COUNT = 4
_MIN_AGGREGATE_BYTES = 128 * 1024 * 1024


def _aggregate(grads):
    return sparse_gradients.aggregate(grads, add_n)


def _gather_slices(rec, out_grads):
    """TF's gradient of a row gather (of a variable or of a watched tensor): IndexedSlices
    (sparse_gradients.py) in place of the dense GatherGrad, or None for any other op."""
    if not sparse_gradients.is_row_gather(rec.op_type, rec.attrs) or not isinstance(out_grads[0], EagerTensor) \
            or isinstance(out_grads[0], BatchedTensor):
        return None
    return [sparse_gradients.gather_gradient_slices(out_grads[0], rec.inputs[1], rec.inputs[0],
                                                    lambda: _call_backward(rec, out_grads)[0]), None]


def _call_backward(rec, out_grads):
    if rec.op_type in ("ReadVariableOp", "Identity") and isinstance(out_grads[0], IndexedSlices):
        return [out_grads[0]]     # (TF's _IdGrad: slices pass on as they are)
    if rec.op_type == "ReadVariableOp":
        return [out_grads[0]]
    # any other op's gradient function takes slices dense (TF's ops convert them)
    out_grads = [sparse_gradients.densify(g) for g in out_grads]
    opdef = rec.grad_fn
    fn = opdef.grad
    if fn is None:
        if opdef.no_gradient != NOT_DIFFERENTIABLE and any(
                isinstance(t, EagerTensor) and t._value.dtype in _TRAINABLE_NP for t in rec.inputs):
            raise LookupError(f"No gradient defined for operation '{rec.op_type}' (op type: {rec.op_type}).")
        return [None] * len(rec.inputs)
    in_grads = list(fn(GradOp(rec.inputs, rec.outputs, rec.attrs, rec.op_type, rec.op_type), *out_grads))
    if len(in_grads) != len(rec.inputs):
        raise ValueError(f"Recorded operation '{rec.op_type}' returned too few gradients. Expected "
                         f"{len(rec.inputs)} but received {len(in_grads)}")
    return [g if g is None or isinstance(g, EagerTensor) else convert_to_tensor(g) for g in in_grads]


def _zeros(shape, dtype):
    return EagerTensor(np.zeros(shape, dtype))


def _ones(shape, dtype):
    return EagerTensor(np.ones(shape, dtype))


def compute_gradient(tape, target_ids, source_ids, sources_that_are_targets, output_gradients, keep_tape=False,
                     sparse_gathers=False):
    """TF's GradientTape::ComputeGradient. output_gradients: list (one per target, entries may be None)
    or empty. Returns one gradient (or None) per source id; with sparse_gathers, the gradient
    from row gathers of a source is IndexedSlices (GradientTape.gradient; the jacobians want
    dense rows)."""
    persistent = tape.persistent or keep_tape
    sources_set = set(source_ids)
    tensor_tape = tape.tensor_tape
    op_tape_all = tape.op_tape

    # ---- PrepareBackprop
    op_tape = {}
    usage = {}
    tensor_stack = list(target_ids)
    while tensor_stack:
        tid = tensor_stack.pop()
        op_id = tensor_tape.get(tid)
        if op_id is None or op_id == -1 or op_id not in op_tape_all or op_id in op_tape:
            continue
        rec = op_tape_all[op_id]
        op_tape[op_id] = rec
        for it in rec.input_ids:
            if it in usage:
                usage[it] += 1
            else:
                usage[it] = 1
                if it in tensor_tape:
                    tensor_stack.append(it)
        if not persistent:
            del op_tape_all[op_id]
    missing = collections.defaultdict(int)
    for tid in usage:
        op_id = tensor_tape.get(tid)
        if op_id is not None and op_id != -1:
            missing[op_id] += 1
    if not persistent:
        op_tape_all.clear()

    # ---- InitialStack (sorted ids; popped from the back)
    op_stack = sorted(op_id for op_id in op_tape if op_id not in missing)

    # ---- InitialGradients
    gradients = {}
    for i, tid in enumerate(target_ids):
        og = output_gradients[i] if output_gradients else None
        if og is None:
            op_id = tensor_tape.get(tid)
            if op_id is not None and op_id != -1:
                rec = op_tape.get(op_id)
                if rec is None:
                    raise RuntimeError("Internal state of the gradient tape is invalid: failed to find "
                                       "operation producing a tensor")
                out = rec.outputs[rec.output_ids.index(tid)]
                gradients.setdefault(tid, []).append(_ones(out._value.shape, out._value.dtype))
            elif tid in sources_that_are_targets:
                shape, dt = sources_that_are_targets[tid]
                gradients.setdefault(tid, []).append(_ones(shape, dt))
        else:
            gradients.setdefault(tid, []).append(og)

    gradients_size = {}
    while op_stack:
        op_id = op_stack.pop()
        rec = op_tape.pop(op_id, None)
        if rec is None:
            continue
        out_grads = []
        any_nonzero = False
        zero_idx = []
        for i, oid in enumerate(rec.output_ids):
            gl = gradients.get(oid)
            if gl is None:
                out_grads.append(None)
                zero_idx.append(i)
            else:
                any_nonzero = True
                g = gl[0] if len(gl) == 1 else _aggregate(gl)
                if oid not in sources_set:
                    del gradients[oid]
                else:
                    gradients[oid] = [g]
                out_grads.append(g)
        if any_nonzero:
            for i in zero_idx:
                o = rec.outputs[i]
                out_grads[i] = _zeros(o._value.shape, o._value.dtype)
            in_grads = sparse_gathers and _gather_slices(rec, out_grads) or _call_backward(rec, out_grads)
        else:
            in_grads = [None] * len(rec.input_ids)
        for i, g in enumerate(in_grads):
            tid = rec.input_ids[i]
            if g is not None:
                lst = gradients.setdefault(tid, [])
                lst.append(g)
                if len(lst) > _MIN_AGGREGATE_COUNT and not isinstance(lst[0], IndexedSlices):
                    size = gradients_size.get(tid)
                    if size is None:
                        size = gradients_size[tid] = int(lst[0]._value.size)
                    if len(lst) * size * 4 > _MIN_AGGREGATE_BYTES:
                        gradients[tid] = [_aggregate(lst)]
            if tid not in usage:
                continue
            usage[tid] -= 1
            if usage[tid] > 0:
                continue
            producer = tensor_tape.get(tid)
            if producer is None:
                gradients.pop(tid, None)
                continue
            if producer == -1:
                continue
            if producer in missing:
                missing[producer] -= 1
                if missing[producer] == 0:
                    op_stack.insert(0, producer)
    if op_tape:
        raise RuntimeError("Invalid tape state.")
    result = []
    for sid in source_ids:
        gl = gradients.get(sid)
        if gl is None:
            result.append(None)
        else:
            if len(gl) > 1:
                gradients[sid] = gl = [_aggregate(gl)]
            result.append(gl[0])
    return result


# ============================================================ the public class
def _source_id(x):
    """(id, shape, numpy dtype, is_variable) of a gradient source."""
    if is_eager_variable(x):
        return x._handle_id, x._value.shape, x._value.dtype
    if isinstance(x, EagerTensor):
        return x._id, x._value.shape, x._value.dtype
    raise TypeError(f"Sources of GradientTape.gradient must be tensors or variables, got {x!r} "
                    f"({type(x).__name__}).")


def _target_id(t):
    if is_eager_variable(t):
        return t._handle_id, t._value.shape, t._value.dtype
    if not isinstance(t, EagerTensor):
        t = convert_to_tensor(t)
    return t._id, t._value.shape, t._value.dtype


def _capture_watched(t):
    """An eager tensor watched by a tape inside a trace (a function's closure constant): the
    one tensor every use there converts to (convert.eager_capture), so the tape can
    differentiate with respect to it."""
    return eager_capture(t, context.get_default_graph())


def _as_seen_here(t):
    """A tensor of an enclosing graph as the branch / loop body being built sees it
    (its capture: a tape opened inside an AutoGraph loop body watching a function
    input); any other tensor as it is."""
    fg = in_region()
    if fg is None or t.graph is fg:
        return t
    g = fg
    while g is not None and g is not t.graph:
        g = getattr(g, "outer_graph", None)
    return fg.capture(t) if g is not None else t


def _shaped_like_target(og, shape, i):
    """An eager output gradient seeded as its target's shape (gradients.fitted_output_shape):
    one that neither broadcasts to it nor differs from it only by unit dimensions is refused,
    as TF's gradient functions refuse it (it would otherwise be summed down: a wrong number)."""
    fit = fitted_output_shape(og.shape, shape)
    if fit == "same":
        return og
    if fit is None:
        raise InvalidArgumentError(f"output_gradients[{i}] has shape {list(og.shape)}, incompatible "
                                   f"with its target's shape {list(shape)}")
    value = og.numpy()
    return EagerTensor(np.ascontiguousarray(value.reshape(shape) if fit == "reshape"
                                            else np.broadcast_to(value, shape)))


class GradientTape:
    """Record operations for automatic differentiation (``tf.GradientTape``)."""

    def __init__(self, persistent=False, watch_accessed_variables=True):
        self._persistent = bool(persistent)
        self._watch_accessed_variables = bool(watch_accessed_variables)
        self._tape = None
        self._recording = False
        self._stopped = False          # inside its own stop_recording: watch() is ignored (TF)
        self._watched_variables = ()
        self._graph_state = None  # set while used inside a jitgrad.function trace
        self._created = False

    # ---------------------------------------------------------------- context
    def __enter__(self):
        self._push_tape()
        return self

    def __exit__(self, typ, value, traceback):
        if self._recording:
            self._pop_tape()
        return False

    def _push_tape(self):
        if self._recording:
            raise ValueError("Tape is still recording, This can happen if you try to re-enter an "
                             "already-active tape.")
        if self._tape is None:
            self._tape = _Tape(self._persistent)
        if not context.executing_eagerly():
            if self._graph_state is None:
                self._graph_state = _GraphTapeState(context.get_default_graph())
            self._graph_state.begin_recording()
        _push(self)
        self._recording = True

    def _pop_tape(self):
        if not self._recording:
            raise ValueError("Tape is not recording.")
        _pop(self)
        self._recording = False
        if self._graph_state is not None:
            self._graph_state.end_recording()

    @contextlib.contextmanager
    def stop_recording(self):
        """Temporarily stops recording operations on this tape.  As TF: RuntimeError without
        a tape (never entered, or used up), ValueError when left (_pop_tape)."""
        if self._tape is None:
            raise RuntimeError("Trying to stop recording a tape which is not recording.")
        self._pop_tape()       # (a graph's ops made meanwhile fall outside its recording spans)
        self._stopped = True
        try:
            yield
        finally:
            self._stopped = False
            self._push_tape()

    def reset(self):
        """Clears all information stored in this tape: as exiting and re-entering it, so
        (as TF) only inside its context; outside, _pop_tape raises ValueError."""
        self._pop_tape()
        self._tape = None
        if self._graph_state is not None:
            self._graph_state = _GraphTapeState(self._graph_state.graph)
        self._push_tape()

    # ---------------------------------------------------------------- watching
    def watch(self, tensor):
        """Ensures that ``tensor`` (a tensor, variable or nest of them) is traced by this tape.
        As TF, a no-op under this tape's stop_recording."""
        if self._stopped:
            return
        if self._tape is None:
            self._tape = _Tape(self._persistent)
        for t in nest.flatten(tensor):
            if is_eager_variable(t):
                self._tape.watch_variable(t)
                if self._graph_state is not None:
                    self._graph_state.watched.add(t._handle_id)
            elif isinstance(t, EagerTensor) and not context.executing_eagerly():
                self._watch_in_trace(_capture_watched(t))
            elif isinstance(t, EagerTensor):
                if t._value.dtype not in _TRAINABLE_NP:
                    _log.warning("The dtype of the watched tensor must be floating (e.g. tf.float32), got %r",
                                 t.dtype)
                self._tape.watch(t._id)
            elif isinstance(t, Tensor):
                self._watch_in_trace(t)
            else:
                raise ValueError(f"Passed in object {t!r} of type {type(t).__name__!r}, not tf.Tensor or "
                                 "tf.Variable or ExtensionType.")

    def _watch_in_trace(self, t):
        if self._graph_state is None:
            self._graph_state = _GraphTapeState(t.graph)
        self._graph_state.watched.add(id(t))

    def watched_variables(self):
        """Variables watched by this tape, in creation order (TF keeps them in a set ordered by id)."""
        if self._tape is not None:
            self._watched_variables = tuple(v for _, v in sorted(self._tape.watched_variables.items()))
        return self._watched_variables

    # ---------------------------------------------------------------- gradients
    def _begin_compute(self):
        if self._tape is None:
            raise RuntimeError(_NON_PERSISTENT_MSG)
        if self._recording and not self._persistent:
            self._pop_tape()

    def _finish_compute(self):
        if not self._persistent:
            self.watched_variables()
            self._tape = None

    def gradient(self, target, sources, output_gradients=None, unconnected_gradients=UnconnectedGradients.NONE):
        """Computes the gradient of (the sum of) ``target`` with respect to ``sources``.

        The result has the structure of ``sources``; unconnected sources give None (or zeros
        with ``unconnected_gradients=tf.UnconnectedGradients.ZERO``).
        """
        self._begin_compute()
        unconnected_gradients = _unconnected(unconnected_gradients)
        if target is None:
            raise TypeError("Argument `target` should be a list or nested structure of Tensors, Variables or "
                            "CompositeTensors to be differentiated, but received None.")
        flat_targets = nest.flatten(target)
        if any(t is None for t in flat_targets):
            raise TypeError("Cannot convert the argument `type_value`: None to a TensorFlow DType.")
        flat_sources = nest.flatten(sources)
        if output_gradients is not None:
            output_gradients = nest.flatten(output_gradients)
            if len(output_gradients) != len(flat_targets):
                raise ValueError(f"Mismatch: {len(output_gradients)} output_gradients for "
                                 f"{len(flat_targets)} targets")
            if any(og is None for og in output_gradients):
                # TF hands a None output gradient to the backward functions as "no gradient":
                # that target contributes nothing (it is not seeded with ones). (TF's own
                # backward functions then cope or not by op: x + 1 does, x * x raises.)
                kept = [(t, og) for t, og in zip(flat_targets, output_gradients) if og is not None]
                flat_targets = [t for t, _ in kept]
                output_gradients = [og for _, og in kept]
        if self._graph_state is not None and any(isinstance(t, Tensor) for t in flat_targets) \
                or not context.executing_eagerly():
            result = self._graph_gradient(flat_targets, flat_sources, output_gradients, unconnected_gradients)
            self._finish_compute()
            return nest.pack_sequence_as(sources, result)
        tids, tshapes = [], []
        for t in flat_targets:
            tid, shape, dt = _target_id(t)
            tids.append(tid)
            tshapes.append((shape, dt))
        srcs = [_source_id(s) for s in flat_sources]
        sids = [s[0] for s in srcs]
        stt = {}
        for tid, sh in zip(tids, tshapes):
            if tid in set(sids):
                stt[tid] = sh
        ogs = []
        if output_gradients is not None:
            for og, (shape, dt) in zip(output_gradients, tshapes):
                if og is None:
                    ogs.append(None)
                elif is_eager_variable(og):
                    ogs.append(EagerTensor(og._value))
                elif isinstance(og, EagerTensor):
                    ogs.append(og)
                else:
                    ogs.append(convert_to_tensor(og, dtype=dt if not isinstance(og, np.ndarray) else None))
            ogs = [_shaped_like_target(og, shape, i) for i, (og, (shape, _)) in enumerate(zip(ogs, tshapes))]
        flat_grad = compute_gradient(self._tape, tids, sids, stt, ogs, sparse_gathers=True)
        for i, s in enumerate(srcs):
            if s[2] not in _TRAINABLE_NP and flat_grad[i] is not None:
                flat_grad[i] = None  # integer sources are not differentiable
            if flat_grad[i] is None and unconnected_gradients == UnconnectedGradients.ZERO:
                flat_grad[i] = _zeros(s[1], s[2])
        self._finish_compute()
        return nest.pack_sequence_as(sources, flat_grad)

    # ---------------------------------------------------------------- jacobians
    def jacobian(self, target, sources, unconnected_gradients=UnconnectedGradients.NONE,
                 parallel_iterations=None, experimental_use_pfor=True):
        """The jacobian of ``target`` w.r.t. each source: shape target.shape + source.shape."""
        self._begin_compute()
        unconnected_gradients = _unconnected(unconnected_gradients)
        flat_sources = nest.flatten(sources)
        if isinstance(target, Tensor) or not context.executing_eagerly():
            out = self._graph_jacobian(target, flat_sources, unconnected_gradients)
            self._finish_compute()
            return nest.pack_sequence_as(sources, out)
        if not experimental_use_pfor and not self._persistent:
            raise RuntimeError("GradientTape must be created with persistent=True to compute the jacobian "
                               "with eager execution enabled and with experimental_use_pfor set to False.")
        tid, yshape, ydt = _target_id(target)
        srcs = [_source_id(s) for s in flat_sources]
        n = int(np.prod(yshape, dtype=np.int64))
        rows = np.eye(n, dtype=ydt).reshape((n,) + tuple(yshape))
        grads = self._batched_backward(tid, (yshape, ydt), srcs, rows,
                                       experimental_use_pfor and not _any_complex(ydt, srcs))
        out = []
        for g, (sid, xshape, xdt) in zip(grads, srcs):
            if g is None or xdt not in _TRAINABLE_NP:
                out.append(_zeros(tuple(yshape) + tuple(xshape), xdt)
                           if unconnected_gradients == UnconnectedGradients.ZERO else None)
            else:
                out.append(_reshape(g, tuple(yshape) + tuple(xshape)))
        self._finish_compute()
        return nest.pack_sequence_as(sources, out)

    def batch_jacobian(self, target, source, unconnected_gradients=UnconnectedGradients.NONE,
                       parallel_iterations=None, experimental_use_pfor=True):
        """Per-example jacobians: target [b, y...], source [b, x...] -> [b, y..., x...]."""
        self._begin_compute()
        unconnected_gradients = _unconnected(unconnected_gradients)
        if isinstance(target, Tensor) or not context.executing_eagerly():
            out = self._graph_batch_jacobian(target, source, unconnected_gradients)
            self._finish_compute()
            return out
        tid, yshape, ydt = _target_id(target)
        src = _source_id(source)
        xshape = src[1]
        if len(yshape) < 2 or len(xshape) < 2 or yshape[0] != xshape[0]:
            if len(yshape) < 2 or len(xshape) < 2:
                raise ValueError(f"Shape must be at least rank 2 (target shape {TensorShape(yshape)}, source "
                                 f"shape {TensorShape(xshape)}).")
            raise ValueError(f"Need first dimension of target shape ({TensorShape(yshape)}) and source shape "
                             f"({TensorShape(xshape)}) to match.")
        if not experimental_use_pfor and not self._persistent:
            raise RuntimeError("GradientTape must be created with persistent=True to compute the batch_jacobian "
                               "with eager execution enabled and with experimental_use_pfor set to False.")
        b = yshape[0]
        m = int(np.prod(yshape[1:], dtype=np.int64))
        eye = np.eye(m, dtype=ydt).reshape((m, 1) + tuple(yshape[1:]))
        rows = np.ascontiguousarray(np.broadcast_to(eye, (m,) + tuple(yshape)))
        (g,) = self._batched_backward(tid, (yshape, ydt), [src], rows,
                                      experimental_use_pfor and not _any_complex(ydt, [src]))
        full = tuple(yshape) + tuple(xshape[1:])
        if g is None or src[2] not in _TRAINABLE_NP:
            # zeros even for UnconnectedGradients.NONE, in the target's dtype: TF's batch_jacobian
            # (unlike jacobian) fills an unconnected result with zeros
            out = _zeros(full, src[2] if unconnected_gradients == UnconnectedGradients.ZERO else ydt)
        else:
            g = _reshape(g, (m, b) + tuple(xshape[1:]))
            perm = [1, 0] + list(range(2, g.shape.rank))
            out = _reshape(transpose(g, perm), full)
        self._finish_compute()
        return out

    def _batched_backward(self, tid, tspec, srcs, rows, use_pfor):
        """Backward pass for a batch of output gradients ``rows`` ([n] + target shape).
        Returns per source an ndarray [n] + source shape, or None."""
        sids = [s[0] for s in srcs]
        stt = {tid: tspec} if tid in sids else {}
        n = rows.shape[0]
        if n == 0:   # no rows: zeros, None where the source is unconnected (TF's pfor traces its body)
            grads = compute_gradient(self._tape, [tid], sids, stt, [_zeros(*tspec)], keep_tape=True)
            return [None if g is None else _zeros((0,) + tuple(s[1]), s[2]) for g, s in zip(grads, srcs)]
        if use_pfor and not _stack:
            eager._batching[0] = True
            try:
                grads = compute_gradient(self._tape, [tid], sids, stt, [BatchedTensor(rows)], keep_tape=True)
            finally:
                eager._batching[0] = False
            out = []
            for g, s in zip(grads, srcs):
                if g is None:
                    out.append(None)
                elif type(g) is BatchedTensor:
                    out.append(EagerTensor(g._value))
                else:  # did not depend on the output gradient (e.g. zeros)
                    out.append(EagerTensor(np.ascontiguousarray(np.broadcast_to(g._value, (n,) + g._value.shape))))
            return out
        # Per-row fallback, with public ops so that outer tapes record it (higher order), also
        # used for experimental_use_pfor=False.
        per_row = []
        for i in range(n):
            per_row.append(compute_gradient(self._tape, [tid], sids, stt, [EagerTensor(rows[i])], keep_tape=True))
        out = []
        for j, s in enumerate(srcs):
            if all(r[j] is None for r in per_row):
                out.append(None)
            else:
                out.append(stack([r[j] if r[j] is not None else _zeros(s[1], s[2]) for r in per_row]))
        return out

    # ---------------------------------------------------------------- graph mode (inside jitgrad.function)
    def _graph_sources(self, flat_sources):
        gs = self._graph_state
        xs, watched = [], []
        for s in flat_sources:
            if is_eager_variable(s):
                xs.append(dispatch.gradient_source_in_trace(s))
                watched.append(gs is None or s._handle_id in gs.watched or
                               (self._watch_accessed_variables and s.trainable))
            elif isinstance(s, Tensor):
                xs.append(_as_seen_here(s))
                watched.append(gs is not None and (id(s) in gs.watched or self._recorded_from_watched(s)))
            else:
                xs.append(convert_to_tensor(s))      # an eager tensor: its capture if a tape watched it
                watched.append(gs is not None and id(xs[-1]) in gs.watched)
        return xs, watched

    def _recorded_from_watched(self, t):
        """Whether ``t`` is on this tape as TF has it: made by ops recorded while the tape
        was recording, from a watched tensor or variable (an intermediate such as ``x * x``
        of a watched ``x``; TF's gradient with respect to it is not None)."""
        gs = self._graph_state
        if t.graph is not gs.graph or not gs.recorded(t.op):
            return False
        seen, todo = set(), [t]
        while todo:
            x = todo.pop()
            if id(x) in gs.watched or self._reads_watched_variable(x):
                return True
            op = x.op
            if op._id in seen or not gs.recorded(op):
                continue
            seen.add(op._id)
            todo.extend(op.inputs)
        return False

    def _reads_watched_variable(self, t):
        """``t`` is a read of (or a value assigned to) an eager variable this tape watches."""
        key = t.op.attrs.get("var") if isinstance(t.op.attrs, dict) else None
        ctx = context.current_trace(t.graph) if key is not None else None
        var = ctx.variables.get(key) if ctx is not None else None
        if var is None:
            return False
        watched_vars = self._tape.watched_variables if self._tape is not None else {}
        return var._handle_id in watched_vars or var._handle_id in self._graph_state.watched

    def _graph_gradient(self, flat_targets, flat_sources, output_gradients, unconnected):
        xs, watched = self._graph_sources(flat_sources)
        ys = [convert_to_tensor(t) for t in flat_targets]
        # as TF's tape, differentiate only through the ops it recorded: not through those made
        # before it, under stop_recording, or after it (a target computed after the with block)
        stop = self._graph_state.unrecorded_outputs() if self._graph_state is not None else []
        use = [i for i, w in enumerate(watched) if w and (xs[i].dtype.is_floating or xs[i].dtype.is_complex)]
        result = [None] * len(xs)
        if use:
            if output_gradients is None and any(y.dtype.is_complex for y in ys):
                # a tape seeds complex targets with ones (tf.gradients wants them spelled out)
                output_gradients = [math_ops.ones_like(y) if y.dtype.is_complex else None for y in ys]
            gs = gradients(ys, [xs[i] for i in use], grad_ys=output_gradients, stop_gradients=stop or None,
                           unconnected_gradients=unconnected, sparse_gathers=True)
            for i, g in zip(use, gs):
                result[i] = g
        if unconnected == UnconnectedGradients.ZERO:
            result = [zeros_like(x) if g is None else g for g, x in zip(result, xs)]
        return result

    def _graph_jacobian(self, target, flat_sources, unconnected):
        """Jacobian in a trace: one batched backward pass (batched_gradients.py) with the
        identity rows as cotangents; the per-row loop is the fallback."""
        from . import batched_gradients as bg
        xs, watched = self._graph_sources(flat_sources)
        y = convert_to_tensor(target)
        gs = self._graph_state
        if gs is not None and gs.recording_spans and y.graph is gs.graph and not gs.recorded(y.op) \
                and id(y) not in gs.watched:
            # a target the tape did not record (computed after the with block): as TF, nothing
            # flows to it but itself
            watched = [w and x is y for x, w in zip(xs, watched)]
        use = [i for i, (x, w) in enumerate(zip(xs, watched)) if w and (x.dtype.is_floating or x.dtype.is_complex)]
        static = y.shape.is_fully_defined() and all(xs[i].shape.is_fully_defined() for i in use)
        if y.dtype.is_complex or any(xs[i].dtype.is_complex for i in use):
            # the batched rules and the jacobian loop are real-only: one gradient per element
            _require_static_for_complex(static, "jacobian")
            return self._graph_jacobian_per_row(y, xs, watched, unconnected)
        if not static:
            return self._graph_jacobian_loop(y, xs, use, unconnected)
        if use:
            try:
                js = bg.batched_jacobian(y, [xs[i] for i in use])
            except bg.LoopPerRow:
                return self._graph_jacobian_loop(y, xs, use, unconnected)
            except bg.Unsupported:
                js = None
            if js is not None:
                out = [None] * len(xs)
                for i, j in zip(use, js):
                    if j is not None:
                        out[i] = array_ops.reshape(j, y.shape.as_list() + xs[i].shape.as_list())
                for i, x in enumerate(xs):
                    if out[i] is None and unconnected == UnconnectedGradients.ZERO:
                        out[i] = array_ops.zeros(y.shape.as_list() + x.shape.as_list(), x.dtype)
                return out
        return self._graph_jacobian_per_row(y, xs, watched, unconnected)

    @staticmethod
    def _graph_jacobian_loop(y, xs, use, unconnected):
        """Jacobian of sizes known only at run time: a While over y's elements (loop_jacobians.py)."""
        out = []
        for i, x in enumerate(xs):
            j = loop_jacobian(y, x) if i in use else None
            if j is None and unconnected == UnconnectedGradients.ZERO:
                j = zeros_jacobian(y, x, x.dtype)
            out.append(j)
        return out

    def _graph_jacobian_per_row(self, y, xs, watched, unconnected):
        n = y.shape.num_elements()
        flat = array_ops.reshape(y, [-1])
        out = []
        for x, w in zip(xs, watched):
            if not w or not (x.dtype.is_floating or x.dtype.is_complex):
                out.append(array_ops.zeros(y.shape.as_list() + x.shape.as_list(), x.dtype)
                           if unconnected == UnconnectedGradients.ZERO else None)
                continue
            j = _gradient_rows([flat[i] for i in range(n)], x)
            out.append(array_ops.reshape(j, y.shape.as_list() + x.shape.as_list()))
        return out

    def _graph_batch_jacobian(self, target, source, unconnected):
        """batch_jacobian in a trace: cotangent row j is the one-hot at position j of every
        example ([m, b] + y.shape[1:]), so one batched backward pass gives all examples' rows."""
        from . import batched_gradients as bg
        (x,), (watched,) = self._graph_sources([source])
        y = convert_to_tensor(target)
        yshape, xshape = y.shape, x.shape
        if yshape.rank is not None and xshape.rank is not None and (yshape.rank < 2 or xshape.rank < 2):
            raise ValueError(f"Shape must be at least rank 2 (target shape {yshape}, source shape {xshape}).")
        if yshape.rank is None or xshape.rank is None:
            raise ValueError("batch_jacobian needs the ranks of its target and source known when the graph is "
                             "built.")
        if yshape[0] is not None and xshape[0] is not None and yshape[0] != xshape[0]:
            raise ValueError(f"Need first dimension of target shape ({yshape}) and source shape ({xshape}) "
                             "to match.")
        if watched and (y.dtype.is_complex or x.dtype.is_complex):
            _require_static_for_complex(yshape.is_fully_defined() and xshape.is_fully_defined(),
                                        "batch_jacobian")
            return self._graph_batch_jacobian_per_row(y, x)
        if not yshape.is_fully_defined() or not xshape.is_fully_defined():
            # sizes known only at run time: a While over y's inner elements (loop_jacobians.py)
            g = loop_batch_jacobian(y, x) if watched and x.dtype.is_floating else None
            if g is None:   # zeros whatever `unconnected` says, as below
                g = zeros_jacobian(y, x, x.dtype if unconnected == UnconnectedGradients.ZERO else y.dtype, skip=1)
            return g
        ys, xs_ = yshape.as_list(), xshape.as_list()
        if ys[0] != xs_[0]:
            raise ValueError(f"Need first dimension of target shape ({yshape}) and source shape ({xshape}) "
                             "to match.")
        b = ys[0]
        m = int(np.prod(ys[1:], dtype=np.int64))
        full = ys + xs_[1:]
        g = None
        if watched and x.dtype.is_floating and m > 0 and b > 0:
            g_ = y.graph
            with g_.as_default():
                eye = bg.identity_rows(m, [m], y.dtype, g_)                       # [m, m]
                eye = array_ops.reshape(eye, [m, 1, m])
                rows = array_ops.reshape(array_ops.broadcast_to(eye, [m, b, m]), [m] + ys)
            try:
                (g,) = bg.batched_gradients([y], [x], [rows], name="batch_jacobian")
            except bg.LoopPerRow:   # a while_loop in the gradient: rows by a loop, not m copies of it
                g = loop_batch_jacobian(y, x)
                if g is not None:
                    return g
        if g is None:   # zeros whatever `unconnected` says, as TF's batch_jacobian (see batch_jacobian)
            return array_ops.zeros(full, x.dtype if unconnected == UnconnectedGradients.ZERO else y.dtype)
        g = array_ops.reshape(g, [m, b] + xs_[1:])
        perm = [1, 0] + list(range(2, len(xs_) + 1))
        return array_ops.reshape(array_ops.transpose(g, perm), full)

    @staticmethod
    def _graph_batch_jacobian_per_row(y, x):
        """batch_jacobian as one gradient per inner element of y (examples are independent:
        the gradient of y[:, j] summed over the batch is every example's row j)."""
        ys, xs_ = y.shape.as_list(), x.shape.as_list()
        m = int(np.prod(ys[1:], dtype=np.int64))
        if m == 0:
            return array_ops.zeros(ys + xs_[1:], x.dtype)
        flat = array_ops.reshape(y, [ys[0], m])
        g = array_ops.reshape(_gradient_rows([flat[:, j] for j in range(m)], x), [m, ys[0]] + xs_[1:])
        perm = [1, 0] + list(range(2, len(xs_) + 1))
        return array_ops.reshape(array_ops.transpose(g, perm), ys + xs_[1:])


def _gradient_rows(parts, x):
    """d part / dx for each part (seeded with ones: complex parts need them spelled out),
    stacked; zeros where a part does not reach x."""
    rows = []
    for part in parts:
        g = gradients(part, x, grad_ys=math_ops.ones_like(part))[0]
        rows.append(math_ops.zeros_like(x) if g is None else g)
    return array_ops.stack(rows) if rows else array_ops.zeros([0] + x.shape.as_list(), x.dtype)


def _any_complex(ydt, srcs):
    return ydt.kind == "c" or any(np.dtype(s[2]).kind == "c" for s in srcs if s[2] in _TRAINABLE_NP)


def _require_static_for_complex(static, what):
    if not static:
        raise NotImplementedError(f"{what} of complex tensors in a tf.function needs the shapes of its "
                                  "target and sources known when it is traced")


class _GraphTapeState:
    def __init__(self, graph):
        self.graph = graph
        self.watched = set()
        self.recording_spans = []   # [first op id, end op id or None while recording]

    def begin_recording(self):
        self.recording_spans.append([len(self.graph._ops), None])

    def end_recording(self):
        if self.recording_spans and self.recording_spans[-1][1] is None:
            self.recording_spans[-1][1] = len(self.graph._ops)

    def unrecorded_outputs(self):
        """One output of every op of the graph made while the tape was not recording (none
        if it never recorded here): where a gradient must stop."""
        if not self.recording_spans:
            return []
        return [op.outputs[0] for op in self.graph._ops if op.outputs and not self.recorded(op)]

    def recorded(self, op):
        """Whether ``op`` of this graph was made while the tape was recording."""
        return op.graph is self.graph and any(
            a <= op._id and (b is None or op._id < b) for a, b in self.recording_spans)


def _reshape(t, shape):
    return t if tuple(t._value.shape) == tuple(shape) else reshape(t, list(shape))


def _unconnected(u):
    try:
        return UnconnectedGradients(u)
    except ValueError:
        raise ValueError(f"Unknown value for unconnected_gradients: {u!r}") from None


# ============================================================ batching rules (vectorised jacobians)
def _row_shape(t):
    return t._value.shape[1:] if type(t) is BatchedTensor else t._value.shape


def _align(arr, row_rank, rank):
    """[B] + row shape -> [B] + ones + row shape, so numpy broadcasting lines rows up."""
    if row_rank == rank:
        return arr
    return arr.reshape((arr.shape[0],) + (1,) * (rank - row_rank) + arr.shape[1:])


def _rule_elementwise(opdef, inputs, flags, attrs, specs, B):
    rank = len(specs[0][0])
    arrays = [(_align(t._value, t._value.ndim - 1, rank) if f else t._value) for t, f in zip(inputs, flags)]
    if opdef.name == "AddN":
        full = (B,) + tuple(specs[0][0])
        out = np.array(np.broadcast_to(arrays[0], full), dtype=arrays[0].dtype)
        for a in arrays[1:]:
            out += a
        return (out,)
    return run_kernel(opdef, arrays, attrs)


def _rule_reduce(opdef, inputs, flags, attrs, specs, B):
    x = inputs[0]._value
    r = x.ndim - 1
    axes = normalize_axes(attrs["axis"], r)
    return run_kernel(opdef, [x], dict(attrs, axis=tuple(a + 1 for a in axes)))


def _rule_sum_to_shape(opdef, inputs, flags, attrs, specs, B):
    if flags[1]:
        return None
    g = inputs[0]._value
    target = tuple(inputs[1]._value.shape)
    gr = g.shape[1:]
    extra = len(gr) - len(target)
    if extra < 0:
        g = _align(g, len(gr), len(target))
        gr, extra = g.shape[1:], 0
    axes = tuple(range(1, 1 + extra)) + tuple(
        1 + extra + i for i, d in enumerate(target) if d == 1 and gr[extra + i] != 1)
    out = reference_sum(g, axes, keepdims=True) if axes else g     # as SumToShape's kernel
    return (out.reshape((B,) + target),)


def _rule_broadcast_to_shape_of(opdef, inputs, flags, attrs, specs, B):
    if flags[1]:
        return None
    x = inputs[0]._value
    target = tuple(inputs[1]._value.shape)
    x = _align(x, x.ndim - 1, len(target))
    return (np.ascontiguousarray(np.broadcast_to(x, (B,) + target)),)


def _rule_unreduce(opdef, inputs, flags, attrs, specs, B):
    if flags[1]:
        return None
    g = inputs[0]._value
    ref = tuple(inputs[1]._value.shape)
    axes = normalize_axes(attrs["axis"], len(ref))
    if not attrs["keepdims"]:
        g = g.reshape((B,) + tuple(1 if i in axes else d for i, d in enumerate(ref)))
    return (np.ascontiguousarray(np.broadcast_to(g, (B,) + ref)),)


def _rule_reshape(opdef, inputs, flags, attrs, specs, B):
    if any(flags[1:]):
        return None
    return (np.reshape(inputs[0]._value, (B,) + tuple(specs[0][0])),)


def _rule_matmul(opdef, inputs, flags, attrs, specs, B):
    a, b = inputs[0]._value, inputs[1]._value
    if attrs["transpose_a"]:
        a = np.swapaxes(a, -1, -2)
    if attrs["transpose_b"]:
        b = np.swapaxes(b, -1, -2)
    return (np.matmul(a, b),)


def _rule_transpose(opdef, inputs, flags, attrs, specs, B):
    perm = attrs["perm"]
    x = inputs[0]._value
    perm = tuple(reversed(range(x.ndim - 1))) if perm is None else tuple(perm)   # (None: TF reverses the row's dims)
    return (np.ascontiguousarray(np.transpose(x, (0,) + tuple(p + 1 for p in perm))),)


_RULES = {
    "Sum": _rule_reduce, "Mean": _rule_reduce, "Max": _rule_reduce, "Min": _rule_reduce, "Prod": _rule_reduce,
    "SumToShape": _rule_sum_to_shape, "BroadcastToShapeOf": _rule_broadcast_to_shape_of,
    "Unreduce": _rule_unreduce, "Reshape": _rule_reshape, "ReshapeLike": _rule_reshape,
    "MatMul": _rule_matmul, "Transpose": _rule_transpose,
}


def _rule_per_row(opdef, inputs, flags, attrs, B):
    rows = []
    for b in range(B):
        rows.append(run_kernel(opdef, [t._value[b] if f else t._value for t, f in zip(inputs, flags)], attrs))
    return tuple(np.stack([np.asarray(r[k]) for r in rows]) for k in range(len(rows[0])))


def _batch_execute(opdef, inputs, attrs):
    flags = [type(t) is BatchedTensor for t in inputs]
    B = next(t._value.shape[0] for t, f in zip(inputs, flags) if f)
    try:
        specs = opdef.infer([_row_shape(t) for t in inputs], [t.dtype for t in inputs], attrs)
    except (ValueError, TypeError) as e:
        raise InvalidArgumentError(f"{opdef.name}: {e}") from None
    outs = None
    rule = _RULES.get(opdef.name)
    with np.errstate(all="ignore"):
        if rule is not None:
            outs = rule(opdef, inputs, flags, attrs, specs, B)
        elif opdef.pointwise and len(specs) == 1:
            try:
                same = tuple(np.broadcast_shapes(*[_row_shape(t) for t in inputs])) == tuple(specs[0][0])
            except ValueError:
                same = False
            if same:
                outs = _rule_elementwise(opdef, inputs, flags, attrs, specs, B)
        if outs is None:
            outs = _rule_per_row(opdef, inputs, flags, attrs, B)
    results = []
    for arr, (shape, dt) in zip(outs, specs):
        arr = np.asarray(arr)
        if arr.dtype != dt.np:
            arr = arr.astype(dt.np)
        if arr.shape != (B,) + tuple(shape):
            arr = np.ascontiguousarray(np.broadcast_to(arr, (B,) + tuple(shape)))
        results.append(BatchedTensor(arr))
    return results[0] if len(results) == 1 else tuple(results)


dispatch.batch_execute = _batch_execute
