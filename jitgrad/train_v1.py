"""``tf.compat.v1.train`` beyond optimizers.py's three: the RMSProp, Adagrad and Adadelta
optimizers (TF's ApplyRMSProp / ApplyCenteredRMSProp / ApplyAdagrad / ApplyAdadelta kernels,
their operations in the kernels' order and their slots' names and initial values), the global
step, and the TF 1 decay functions (a rate tensor of the global step in graphs, a callable of
no arguments eagerly, as TF 2's compat.v1 gives)."""
import numpy as np

from . import context, dtypes, learning_rate_schedules as schedules
from .ops import math_ops
from .ops.array_ops import expand_dims, gather
from .optimizers import Optimizer
from .variables import Variable

GLOBAL_STEP = "global_step"


def _value(rate):
    """A v1 hyperparameter: a callable (TF 2's eager rates) is called."""
    return rate() if callable(rate) else rate


class RMSPropOptimizer(Optimizer):
    """ms += (g^2 - ms) * (1 - decay); (centered: mg += (g - mg) * (1 - decay), ms - mg^2)
    mom = mom * momentum + g * lr / sqrt(ms + epsilon); var -= mom. The "rms" slot starts at 1."""

    def __init__(self, learning_rate, decay=0.9, momentum=0.0, epsilon=1e-10, use_locking=False, centered=False,
                 name="RMSProp"):
        super().__init__(use_locking, name)
        self._learning_rate, self._decay, self._momentum = learning_rate, decay, momentum
        self._epsilon, self._centered = epsilon, centered

    def _slots_of(self, var):
        rms = self._slot(var, "rms", initial=1.0)
        mom = self._slot(var, "momentum", "_1")
        mg = self._slot(var, "mg", "_2") if self._centered else None
        return rms, mom, mg

    def _create_state(self, var_list):
        for v in var_list:
            self._slots_of(v)

    def _apply_dense(self, grad, var):
        c = lambda x: math_ops.cast(_value(x), var.dtype)  # noqa: E731
        rms, mom, mg = self._slots_of(var)
        one_minus_decay = 1 - c(self._decay)
        ms_t = rms.assign_add((grad * grad - rms) * one_minus_decay)
        denom = ms_t + c(self._epsilon)
        if mg is not None:
            mg_t = mg.assign_add((grad - mg) * one_minus_decay)
            denom = (ms_t - mg_t * mg_t) + c(self._epsilon)
        mom_t = mom.assign(mom * c(self._momentum) + grad * c(self._learning_rate) / math_ops.sqrt(denom))
        return var.assign_sub(mom_t)

    def _apply_sparse_rows(self, grad, indices, var):
        """TF's SparseApplyRMSProp: the dense update on the rows at (unique) ``indices`` only
        (the other rows' slots do not decay)."""
        c = lambda x: math_ops.cast(_value(x), var.dtype)  # noqa: E731
        rms, mom, mg = self._slots_of(var)
        one_minus_decay = 1 - c(self._decay)
        ms_t = gather(rms, indices)
        ms_t = ms_t + (grad * grad - ms_t) * one_minus_decay
        kept = [_set_rows(rms, indices, ms_t)]
        denom = ms_t + c(self._epsilon)
        if mg is not None:
            mg_t = gather(mg, indices)
            mg_t = mg_t + (grad - mg_t) * one_minus_decay
            kept.append(_set_rows(mg, indices, mg_t))
            denom = (ms_t - mg_t * mg_t) + c(self._epsilon)
        mom_t = gather(mom, indices) * c(self._momentum) + grad * c(self._learning_rate) / math_ops.sqrt(denom)
        kept.append(_set_rows(mom, indices, mom_t))
        return _after(kept, lambda: var.scatter_nd_sub(expand_dims(indices, 1), mom_t))


class AdagradOptimizer(Optimizer):
    """accum += g^2; var -= g * lr * rsqrt(accum); accum starts at initial_accumulator_value."""

    def __init__(self, learning_rate, initial_accumulator_value=0.1, use_locking=False, name="Adagrad"):
        if initial_accumulator_value <= 0.0:
            raise ValueError(f"initial_accumulator_value must be positive: {initial_accumulator_value}")
        super().__init__(use_locking, name)
        self._learning_rate, self._initial = learning_rate, initial_accumulator_value

    def _accumulator(self, var):
        # TF fills it by constant_initializer(value, dtype): the Python float, not a float32 first
        return self._slot(var, "accumulator", initial=np.float64(self._initial))

    def _create_state(self, var_list):
        for v in var_list:
            self._accumulator(v)

    def _apply_dense(self, grad, var):
        accum = self._accumulator(var)
        accum_t = accum.assign_add(grad * grad)
        return var.assign_sub(grad * math_ops.cast(_value(self._learning_rate), var.dtype) * math_ops.rsqrt(accum_t))


class AdadeltaOptimizer(Optimizer):
    """accum = accum * rho + g^2 * (1 - rho); update = sqrt(accum_update + eps) * rsqrt(accum + eps) * g;
    var -= update * lr; accum_update = accum_update * rho + update^2 * (1 - rho)."""

    def __init__(self, learning_rate=0.001, rho=0.95, epsilon=1e-8, use_locking=False, name="Adadelta"):
        super().__init__(use_locking, name)
        self._learning_rate, self._rho, self._epsilon = learning_rate, rho, epsilon

    def _slots_of(self, var):
        return self._slot(var, "accum"), self._slot(var, "accum_update", "_1")

    def _create_state(self, var_list):
        for v in var_list:
            self._slots_of(v)

    def _apply_dense(self, grad, var):
        c = lambda x: math_ops.cast(_value(x), var.dtype)  # noqa: E731
        accum, accum_update = self._slots_of(var)
        rho, eps = c(self._rho), c(self._epsilon)
        accum_t = accum.assign(accum * rho + grad * grad * (1 - rho))
        update = math_ops.sqrt(accum_update + eps) * math_ops.rsqrt(accum_t + eps) * grad
        var_t = var.assign_sub(update * c(self._learning_rate))
        accum_update_t = accum_update.assign(accum_update * rho + update * update * (1 - rho))
        if context.executing_eagerly():
            return var_t
        with context.get_default_graph().control_dependencies([accum_update_t]):
            return math_ops.identity(var_t)

    def _apply_sparse_rows(self, grad, indices, var):
        """TF's SparseApplyAdadelta: the dense update on the rows at (unique) ``indices`` only
        (the other rows' accumulators do not decay)."""
        c = lambda x: math_ops.cast(_value(x), var.dtype)  # noqa: E731
        accum, accum_update = self._slots_of(var)
        rho, eps = c(self._rho), c(self._epsilon)
        accum_t = gather(accum, indices) * rho + grad * grad * (1 - rho)
        update_rows = gather(accum_update, indices)
        update = math_ops.sqrt(update_rows + eps) * math_ops.rsqrt(accum_t + eps) * grad
        kept = [_set_rows(accum, indices, accum_t),
                _set_rows(accum_update, indices, update_rows * rho + update * update * (1 - rho))]
        return _after(kept, lambda: var.scatter_nd_sub(expand_dims(indices, 1), update * c(self._learning_rate)))


def _set_rows(slot, indices, rows):
    return slot.scatter_nd_update(expand_dims(indices, 1), rows)


def _after(updates, make):
    """``make()`` run after ``updates`` (a Session graph runs only what the returned update
    depends on: the slots' updates too)."""
    if context.executing_eagerly():
        return make()
    with context.get_default_graph().control_dependencies(updates):
        return make()


# ------------------------------------------------------------------ global step
def get_global_step(graph=None):
    """The graph's global step variable, or None (eagerly: the one made by get_or_create_global_step)."""
    graph = graph or (None if context.executing_eagerly() else context.get_default_graph())
    steps = _eager_step if graph is None else graph.get_collection(GLOBAL_STEP)
    if len(steps) > 1:
        raise TypeError("There should be only one global step tensor, found " + str(len(steps)))
    return steps[0] if steps else None


def create_global_step(graph=None):
    """A new int64 non-trainable "global_step" variable starting at 0; an error if one exists."""
    if get_global_step(graph) is not None:
        raise ValueError('"global_step" already exists.')
    graph = graph or (None if context.executing_eagerly() else context.get_default_graph())
    if graph is None:
        step = Variable(0, trainable=False, name="global_step", dtype=dtypes.int64)
        _eager_step.append(step)
        return step
    with graph.as_default(), graph.name_scope(None), graph.control_dependencies(None):
        step = Variable(0, trainable=False, name="global_step", dtype=dtypes.int64)
    graph.add_to_collection(GLOBAL_STEP, step)
    return step


def get_or_create_global_step(graph=None):
    return get_global_step(graph) or create_global_step(graph)


_eager_step = []


# ------------------------------------------------------------------ TF 1's decay functions
def _decayed(schedule, global_step):
    if global_step is None:
        raise ValueError("global_step is required for the decay functions.")
    if context.executing_eagerly():
        return lambda: schedule(global_step)
    return schedule(global_step)


def exponential_decay(learning_rate, global_step, decay_steps, decay_rate, staircase=False, name=None):
    return _decayed(schedules.ExponentialDecay(learning_rate, decay_steps, decay_rate, staircase), global_step)


def inverse_time_decay(learning_rate, global_step, decay_steps, decay_rate, staircase=False, name=None):
    return _decayed(schedules.InverseTimeDecay(learning_rate, decay_steps, decay_rate, staircase), global_step)


def polynomial_decay(learning_rate, global_step, decay_steps, end_learning_rate=0.0001, power=1.0, cycle=False,
                     name=None):
    return _decayed(schedules.PolynomialDecay(learning_rate, decay_steps, end_learning_rate, power, cycle),
                    global_step)


def piecewise_constant(x, boundaries, values, name=None):
    return _decayed(schedules.PiecewiseConstantDecay(boundaries, values), x)


def cosine_decay(learning_rate, global_step, decay_steps, alpha=0.0, name=None):
    return _decayed(schedules.CosineDecay(learning_rate, decay_steps, alpha), global_step)
