"""Optimizers: ``tf.compat.v1.train`` (GradientDescent, Momentum, Adam) and
``tf.keras.optimizers`` (SGD, Adam; also ``tf.optimizers``).

Every update is written with public ops and the variables' assign methods, so one
definition serves graph mode (the update ops go into the graph and run in the
Session, compiled), eager mode, and ``jitgrad.function`` traces (where slot
variables are created on the first trace, as TF allows).  The formulas and their
operation order are TF's: TF 1's training kernels (``ApplyAdam`` etc.) for
``compat.v1.train`` and Keras 3's ``update_step`` for ``keras.optimizers``.
"""
import contextlib

from . import context, dtypes
from . import keras_sparse_ops as K
from .func_graph import in_region, outermost
from .gradients import gradients
from .learning_rate_schedules import LearningRateSchedule
from .indexed_slices import IndexedSlices
from .sparse_gradients import deduplicated, densify
from .graph import Tensor
from .init_arguments import RecordsInitArguments
from .ops import clip_ops, math_ops
from .ops.array_ops import expand_dims, fill, gather, zeros
from .tape import GradientTape
from .variables import group, trainable_variables, Variable

__all__ = ["GradientDescentOptimizer", "MomentumOptimizer", "AdamOptimizer", "SGD", "Adam"]


def _new_variable(initial_value, name, dtype=None):
    """A non-trainable state variable (slot, step counter) next to the user's ones:
    a graph variable in graph mode, else an eager one (inside a trace: created on
    the first trace and captured, see function.create_variable_in_trace).
    ``initial_value`` is a callable, so inside a trace it runs eagerly (init_scope).
    Made in a tf.cond branch / tf.while_loop body (an optimizer step in a loop), it is
    made in the graph around them, as TF's optimizers create slots under init_scope."""
    fg = in_region()
    if fg is None:
        if context.executing_eagerly():
            return Variable(initial_value, trainable=False, name=name, dtype=dtype)
        # made lazily inside apply_gradients' control_dependencies: its initializer must not wait
        # for this step's updates (TF's init_scope clears them), or initialising it runs them
        with context.get_default_graph().control_dependencies(None):
            return Variable(initial_value, trainable=False, name=name, dtype=dtype)
    with outermost(fg).as_default():
        return Variable(initial_value, trainable=False, name=name, dtype=dtype)


def _key(var):
    return id(var)


def _var_name(var):
    return var.name.split(":")[0]


def _slot(slots, var, slot_name, name, initial=0.0):
    """The state variable ``slot_name`` of ``var`` (filled with ``initial``), created on first use."""
    key = (slot_name, _key(var))
    slot = slots.get(key)
    if slot is None:
        shape = _check_shape(var)
        if initial == 0.0:
            init = lambda: zeros(shape, var.dtype)   # noqa: E731
        else:
            init = lambda: fill(shape, math_ops.cast(initial, var.dtype))   # noqa: E731
        slot = slots[key] = _new_variable(init, name)
    return slot


def _check_shape(var):
    if not var.shape.is_fully_defined():
        raise ValueError(f"Optimizer slots need a fully defined variable shape; {var.name} has {var.shape}.")
    return var.shape.as_list()


def _no_gradients(pairs):
    names = [getattr(v, "name", repr(v)) for _, v in pairs]
    return ValueError(f"No gradients provided for any variable: {names}.")


# ============================================================ tf.compat.v1.train
class Optimizer:
    """Base of the TF 1 optimizers: compute_gradients / apply_gradients / minimize."""

    def __init__(self, use_locking, name):
        if not name:
            raise ValueError("Must specify the optimizer name")
        self._name = name
        self._slots = {}          # (slot name, var key) -> variable
        self._non_slots = {}      # name -> variable (Adam's beta powers)

    def get_name(self):
        return self._name

    def compute_gradients(self, loss, var_list=None, gate_gradients=1, aggregation_method=None,
                          colocate_gradients_with_ops=False, grad_loss=None):
        if callable(loss):
            with GradientTape() as tape:
                value = loss()
            if var_list is None:
                var_list = list(tape.watched_variables())
            var_list = list(var_list)
            return list(zip(tape.gradient(value, var_list, output_gradients=grad_loss), var_list))
        if context.executing_eagerly():
            raise RuntimeError("`loss` passed to Optimizer.compute_gradients should be a function when eager "
                               "execution is enabled.")
        var_list = list(trainable_variables() if var_list is None else var_list)
        if not var_list:
            raise ValueError("No variables to optimize.")
        # a gather's gradient is IndexedSlices, as TF's (a sparse Momentum update moves only its rows)
        grads = gradients(loss, var_list, grad_ys=None if grad_loss is None else [grad_loss],
                          aggregation_method=aggregation_method, sparse_gathers=True)
        return list(zip(grads, var_list))

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        pairs = list(grads_and_vars)
        if not pairs:
            raise ValueError("No variables provided.")
        present = [(g, v) for g, v in pairs if g is not None]
        if not present:
            raise _no_gradients(pairs)
        self._create_state([v for _, v in present])
        updates = [self._apply(g, v) for g, v in present]
        updates += self._finish(updates)
        if global_step is not None:
            graph = None if context.executing_eagerly() else context.get_default_graph()
            if graph is None:
                global_step.assign_add(1)
            else:
                with graph.control_dependencies([u for u in updates if u is not None]):
                    updates = [global_step.assign_add(1)]
        return group(*[u for u in updates if isinstance(u, Tensor) or hasattr(u, "type")], name=name or self._name)

    def _apply(self, g, v):
        """IndexedSlices (a gather's gradient) have their repeated indices summed, as TF 1's
        _apply_sparse_duplicate_indices; an optimizer whose sparse update differs from its dense
        one (Momentum: only the rows present move) applies them with _apply_sparse_rows, the others
        dense (TF 1's sparse GradientDescent and Adam equal their dense updates)."""
        if isinstance(g, IndexedSlices) and hasattr(self, "_apply_sparse_rows"):
            values, indices = deduplicated(g)
            return self._apply_sparse_rows(math_ops.cast(values, v.dtype) if values.dtype != v.dtype else values,
                                           indices, v)
        g = densify(g)
        return self._apply_dense(math_ops.cast(g, v.dtype) if g.dtype != v.dtype else g, v)

    def minimize(self, loss, global_step=None, var_list=None, gate_gradients=1, aggregation_method=None,
                 colocate_gradients_with_ops=False, name=None, grad_loss=None):
        pairs = self.compute_gradients(loss, var_list=var_list, aggregation_method=aggregation_method,
                                       grad_loss=grad_loss)
        if all(g is None for g, _ in pairs):
            raise ValueError(f"No gradients provided for any variable, check your graph for ops that do not "
                             f"support gradients, between variables {[v.name for _, v in pairs]} and loss {loss}.")
        return self.apply_gradients(pairs, global_step=global_step, name=name)

    # -- state
    def _slot(self, var, slot_name, suffix="", initial=0.0):
        return _slot(self._slots, var, slot_name, f"{_var_name(var)}/{self._name}{suffix}", initial)

    def get_slot(self, var, name):
        return self._slots.get((name, _key(var)))

    def get_slot_names(self):
        return sorted({n for n, _ in self._slots})

    def variables(self):
        return list(self._non_slots.values()) + list(self._slots.values())

    def _create_state(self, var_list):
        pass

    def _finish(self, updates):
        return []


class GradientDescentOptimizer(Optimizer):
    """var -= learning_rate * grad."""

    def __init__(self, learning_rate, use_locking=False, name="GradientDescent"):
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate

    def _apply_dense(self, grad, var):
        return var.assign_sub(math_ops.cast(self._learning_rate, var.dtype) * grad)


class MomentumOptimizer(Optimizer):
    """accum = accum * momentum + grad; var -= lr * accum
    (Nesterov: var -= lr * grad + lr * momentum * accum)."""

    def __init__(self, learning_rate, momentum, use_locking=False, name="Momentum", use_nesterov=False):
        super().__init__(use_locking, name)
        self._learning_rate, self._momentum, self._nesterov = learning_rate, momentum, use_nesterov

    def _create_state(self, var_list):
        for v in var_list:
            self._slot(v, "momentum")

    def _apply_dense(self, grad, var):
        lr = math_ops.cast(self._learning_rate, var.dtype)
        mu = math_ops.cast(self._momentum, var.dtype)
        accum = self._slot(var, "momentum")
        accum_t = accum.assign(accum * mu + grad)
        if self._nesterov:
            return var.assign_sub(grad * lr + accum_t * mu * lr)
        return var.assign_sub(accum_t * lr)

    def _apply_sparse_rows(self, grad, indices, var):
        """TF 1's SparseApplyMomentum: the dense update on the rows at (unique) ``indices`` only;
        the other rows' accumulators do not decay and their variables do not move."""
        lr = math_ops.cast(self._learning_rate, var.dtype)
        mu = math_ops.cast(self._momentum, var.dtype)
        accum = self._slot(var, "momentum")
        rows = expand_dims(indices, 1)
        accum_rows = gather(accum, indices) * mu + grad
        kept = accum.scatter_nd_update(rows, accum_rows)
        # (a Session graph runs only what the returned update depends on: the accumulator's too)
        with context.get_default_graph().control_dependencies([kept]) if not context.executing_eagerly() \
                else contextlib.nullcontext():
            if self._nesterov:
                return var.scatter_nd_sub(rows, grad * lr + accum_rows * mu * lr)
            return var.scatter_nd_sub(rows, accum_rows * lr)


class AdamOptimizer(Optimizer):
    """TF 1's ApplyAdam with bias correction folded into the step size:
    lr_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t); m = m + (g - m) * (1 - beta1);
    v = v + (g^2 - v) * (1 - beta2); var -= lr_t * m / (sqrt(v) + epsilon).
    beta1^t and beta2^t are variables multiplied by beta after every step."""

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8, use_locking=False, name="Adam"):
        super().__init__(use_locking, name)
        self._lr, self._beta1, self._beta2, self._epsilon = learning_rate, beta1, beta2, epsilon

    def _create_state(self, var_list):
        if not self._non_slots:
            dt = var_list[0].dtype
            self._non_slots["beta1_power"] = _new_variable(float(self._beta1), "beta1_power", dtype=dt)
            self._non_slots["beta2_power"] = _new_variable(float(self._beta2), "beta2_power", dtype=dt)
        for v in var_list:
            self._slot(v, "m")
            self._slot(v, "v", "_1")

    def _apply_dense(self, grad, var):
        dt = var.dtype
        c = lambda x: math_ops.cast(x, dt)  # noqa: E731
        b1p, b2p = (math_ops.cast(self._non_slots[k], dt) for k in ("beta1_power", "beta2_power"))
        lr = c(self._lr) * math_ops.sqrt(1 - b2p) / (1 - b1p)
        m, v = self._slot(var, "m"), self._slot(var, "v", "_1")
        m_t = m.assign_add((grad - m) * (1 - c(self._beta1)))
        v_t = v.assign_add((grad * grad - v) * (1 - c(self._beta2)))
        return var.assign_sub(m_t * lr / (math_ops.sqrt(v_t) + c(self._epsilon)))

    def _finish(self, updates):
        b1p, b2p = self._non_slots["beta1_power"], self._non_slots["beta2_power"]
        if context.executing_eagerly():
            return [b1p.assign(b1p * self._beta1), b2p.assign(b2p * self._beta2)]
        graph = context.get_default_graph()
        with graph.control_dependencies([u for u in updates if u is not None]):
            return [b1p.assign(b1p * math_ops.cast(self._beta1, b1p.dtype)),
                    b2p.assign(b2p * math_ops.cast(self._beta2, b2p.dtype))]


# ============================================================ tf.keras.optimizers
class KerasOptimizer(RecordsInitArguments):
    """Base of the Keras optimizers: apply_gradients(zip(grads, vars)), minimize(loss, var_list,
    tape=None); ``iterations`` counts the applied steps."""

    _unsupported = ("use_ema", "loss_scale_factor", "gradient_accumulation_steps")

    def __init__(self, learning_rate, name, weight_decay=None, clipnorm=None, clipvalue=None, global_clipnorm=None,
                 **kwargs):
        if sum(c is not None for c in (clipnorm, clipvalue, global_clipnorm)) > 1:
            raise ValueError(f"Only one of `clipnorm`, `clipvalue` and `global_clipnorm` can be set. Received: "
                             f"clipnorm={clipnorm}, clipvalue={clipvalue}, global_clipnorm={global_clipnorm}")
        self.clipnorm, self.clipvalue, self.global_clipnorm = clipnorm, clipvalue, global_clipnorm
        for k in self._unsupported:
            if kwargs.get(k) not in (None, False, 0):
                raise ValueError(f"jitgrad's {type(self).__name__} does not support `{k}`.")
        unknown = set(kwargs) - set(self._unsupported) - {"ema_momentum", "ema_overwrite_frequency", "jit_compile"}
        if unknown:
            raise TypeError(f"{type(self).__name__}.__init__() got unexpected keyword arguments {sorted(unknown)}")
        self._learning_rate, self._learning_rate_variable = learning_rate, None
        self.name = name
        self.weight_decay = weight_decay
        self._iterations = None
        self._slots = {}
        self._slot_owners = {}     # id(slot) -> the variable it belongs to

    @property
    def iterations(self):
        if self._iterations is None:
            self._iterations = _new_variable(0, "iteration", dtype=dtypes.int64)
        return self._iterations

    @property
    def variables(self):
        return [self.iterations] + list(self._slots.values())

    @property
    def learning_rate(self):
        """Keras 3's: a schedule's rate at the step count, a callable's value, else a float32
        variable (made on first use), which a traced train step reads on every step -- so a
        rate a callback sets (ReduceLROnPlateau) reaches the compiled step."""
        lr = self._learning_rate
        if isinstance(lr, LearningRateSchedule):
            return lr(self.iterations)
        if callable(lr):
            return lr()
        return self._rate_variable()

    def _rate_variable(self):
        if self._learning_rate_variable is None:
            lr = self._learning_rate
            # a tf.Variable given is read as it is (Keras 3 refuses one; jitgrad kept reading it)
            self._learning_rate_variable = lr if isinstance(lr, Variable) else _new_variable(
                lambda: float(lr), "learning_rate", dtype=dtypes.float32)
        return self._learning_rate_variable

    @learning_rate.setter
    def learning_rate(self, value):
        if isinstance(value, LearningRateSchedule) or callable(value):
            self._learning_rate, self._learning_rate_variable = value, None
            return
        if isinstance(self._learning_rate, LearningRateSchedule):
            raise TypeError("This optimizer was created with a `LearningRateSchedule` object as its `learning_rate` "
                            "constructor argument, hence its learning rate is not settable. If you need the learning "
                            "rate to be settable, you should instantiate the optimizer with a float `learning_rate` "
                            "argument.")
        self._learning_rate = value
        if self._learning_rate_variable is not None:
            self._learning_rate_variable.assign(value)

    def _slot(self, var, slot_name):
        initial = self._slot_initial.get(slot_name, 0.0) if isinstance(self._slot_initial, dict) else \
            self._slot_initial
        slot = _slot(self._slots, var, slot_name, f"{_var_name(var)}_{slot_name}", initial)
        self._slot_owners[id(slot)] = var
        return slot

    def slots(self):
        """(slot name, the variable it belongs to, slot variable) for each slot made so far."""
        return [(name, self._slot_owners[id(slot)], slot) for (name, _), slot in self._slots.items()]

    _slot_names = ()
    _slot_initial = 0.0      # or {slot name: initial value}

    def build(self, var_list):
        """Keras 3's ``optimizer.build``: creates the step counter, the learning-rate variable
        and the slots of each variable now, so that a traced train step does not create variables."""
        self.iterations  # noqa: B018 (created on first access)
        if not callable(self._learning_rate):       # (a schedule or callable has no variable)
            self._rate_variable()
        self._built_variables = list(var_list)
        for var in var_list:
            for name in self._slot_names:
                self._slot(var, name)

    _built_variables = None

    def apply(self, grads, trainable_variables=None):
        """Keras 3's ``apply``: ``grads`` in the order of ``trainable_variables``, or of the
        variables the optimizer was built with (building it on the first call otherwise)."""
        grads = list(grads)
        if not grads:
            return None
        if trainable_variables is None:
            if self._built_variables is None:
                raise ValueError("When passing `grads` without `variables`, the optimizer must already be built "
                                 "on a list of variables. Call `optimizer.build(trainable_variables)` first. ")
            trainable_variables = self._built_variables
            if len(grads) != len(trainable_variables):
                raise ValueError(f"When passing `grads` as a list of gradient tensors, the gradients must match "
                                 f"`optimizer.variables` one-to-on. Received a list of {len(grads)} gradients, "
                                 f"but the optimizer is tracking {len(trainable_variables)} trainable variables.")
        else:
            trainable_variables = list(trainable_variables)
            if self._built_variables is None:
                self.build(trainable_variables)
        return self.apply_gradients(zip(grads, trainable_variables))

    def _lr(self, dtype):
        """Keras 3's current rate: a schedule is called with the step count, any other callable
        with no arguments (a closure over whatever it reads)."""
        return math_ops.cast(self.learning_rate, dtype)

    def apply_gradients(self, grads_and_vars, name=None):
        pairs = list(grads_and_vars)
        present = [(g, v) for g, v in pairs if g is not None]
        if not present:
            raise _no_gradients(pairs)
        for g, v in present:
            if g.shape.is_fully_defined() and v.shape.is_fully_defined() and g.shape.as_list() != v.shape.as_list():
                raise ValueError(f"Gradient of shape {g.shape} does not match variable {v.name} of shape {v.shape}.")
        present = list(zip(self._clip_gradients([g for g, _ in present]), [v for _, v in present]))
        graph = None if context.executing_eagerly() else context.get_default_graph()
        session_graph = graph is not None and not _in_trace()   # else Python order is run order
        before = self._apply_weight_decay([v for _, v in present]) + self._before_updates(present[0][1].dtype)
        with graph.control_dependencies(before) if session_graph and before else contextlib.nullcontext():
            updates = [self._update_step(K.cast(g, v.dtype), v) for g, v in present]
        constrained = [v for _, v in present if getattr(v, "constraint", None) is not None]
        if constrained:     # as Keras 3: each constrained variable projected after the updates
            with graph.control_dependencies([u for u in updates if u is not None]) if session_graph \
                    else contextlib.nullcontext():
                updates = [v.assign(v.constraint(v.read_value() if session_graph else v)) for v in constrained] \
                    + updates
        if session_graph:
            with graph.control_dependencies([u for u in updates if u is not None]):
                return self.iterations.assign_add(1)
        self.iterations.assign_add(1)
        return self.iterations

    def _clip_gradients(self, grads):
        """Keras 3's: each gradient by its own norm (clipnorm), all by their global norm
        (global_clipnorm), or each value into [-clipvalue, clipvalue]."""
        if self.clipnorm and self.clipnorm > 0:
            return [clip_ops.clip_by_norm(g, self.clipnorm) for g in grads]
        if self.global_clipnorm and self.global_clipnorm > 0:
            # Keras' own clip_by_global_norm: the norm counts each row of IndexedSlices (their
            # values squared), but ``g * scale`` makes them dense (repeated indices summed).
            return clip_ops.clip_by_global_norm([densify(g) for g in grads], self.global_clipnorm,
                                                use_norm=clip_ops.global_norm(grads))[0]
        if self.clipvalue and self.clipvalue > 0:
            return [math_ops.clip_by_value(g, -self.clipvalue, self.clipvalue) for g in grads]
        return grads

    def _apply_weight_decay(self, variables):
        """Keras 3's decoupled weight decay, before the update step: var -= var * wd * lr."""
        if not self.weight_decay:
            return []
        return [v.assign(v - v * math_ops.cast(self.weight_decay, v.dtype) * self._lr(v.dtype)) for v in variables]

    def _before_updates(self, dtype):
        """State updated once per step before the variables' updates (Nadam's momentum product)."""
        return []

    def minimize(self, loss, var_list, tape=None):
        """Keras 2's ``minimize`` (Keras 3, TF 2.21's, has none). A graph-tensor loss
        in a TF 1 graph is differentiated with tf.gradients, so the step is an op
        Session.run runs (TF 2.21 cannot run a Keras optimizer in a Session at all)."""
        if tape is None and isinstance(loss, Tensor) and not context.executing_eagerly() and not _in_trace():
            var_list = list(var_list() if callable(var_list) else var_list)
            return self.apply_gradients(zip(gradients(loss, var_list), var_list))
        if tape is None:
            if not callable(loss):
                raise ValueError("`tape` is required when a `Tensor` loss is passed.")
            with GradientTape() as tape:
                loss = loss()
        if callable(var_list):
            var_list = var_list()
        var_list = list(var_list)
        return self.apply_gradients(zip(tape.gradient(loss, var_list), var_list))


def _in_trace():
    return context.current_trace() is not None


class SGD(KerasOptimizer):
    """Keras 3: m = m * momentum - g * lr; var += m (Nesterov: var += m * momentum - g * lr);
    without momentum var -= g * lr."""

    def __init__(self, learning_rate=0.01, momentum=0.0, nesterov=False, name="SGD", **kwargs):
        super().__init__(learning_rate, name, **kwargs)
        if not 0 <= momentum <= 1:
            raise ValueError("`momentum` must be a float between [0, 1].")
        self.momentum, self.nesterov = momentum, nesterov
        self._slot_names = ("momentum",) if momentum else ()

    def _update_step(self, grad, var):
        lr = self._lr(var.dtype)
        if not self.momentum:
            return K.assign_sub(var, K.multiply(grad, lr))
        mu = math_ops.cast(self.momentum, var.dtype)
        m = self._slot(var, "momentum")
        m_t = m.assign(K.subtract(m * mu, K.multiply(grad, lr)))
        if self.nesterov:
            return var.assign_add(K.subtract(m_t * mu, K.multiply(grad, lr)))
        return var.assign_add(m_t)


class Adam(KerasOptimizer):
    """Keras 3: alpha = lr * sqrt(1 - beta_2^t) / (1 - beta_1^t) with t = iterations + 1;
    m += (g - m) * (1 - beta_1); v += (g^2 - v) * (1 - beta_2); var -= m * alpha / (sqrt(v) + eps)
    (amsgrad: v_hat = max(v_hat, v) in place of v)."""

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7, amsgrad=False, name="adam",
                 **kwargs):
        super().__init__(learning_rate, name, **kwargs)
        self.beta_1, self.beta_2, self.epsilon, self.amsgrad = beta_1, beta_2, epsilon, amsgrad
        self._slot_names = ("momentum", "velocity") + (("velocity_hat",) if amsgrad else ())

    def _update_step(self, grad, var):
        dt = var.dtype
        lr = self._lr(dt)
        step = math_ops.cast(self.iterations + 1, dt)
        b1p = math_ops.pow(math_ops.cast(self.beta_1, dt), step)
        b2p = math_ops.pow(math_ops.cast(self.beta_2, dt), step)
        alpha = lr * math_ops.sqrt(1 - b2p) / (1 - b1p)
        m, v = self._slot(var, "momentum"), self._slot(var, "velocity")
        # 1 - beta in Python (float64), then to the variable's dtype, as Keras does
        m_t = m.assign_add(K.multiply(K.subtract(grad, m), math_ops.cast(1 - self.beta_1, dt)))
        v_t = v.assign_add(K.multiply(K.subtract(K.square(grad), v), math_ops.cast(1 - self.beta_2, dt)))
        if self.amsgrad:     # the running maximum of v is used in its place
            v_hat = self._slot(var, "velocity_hat")
            v_t = v_hat.assign(math_ops.maximum(v_hat, v_t))
        return var.assign_sub(m_t * alpha / (math_ops.sqrt(v_t) + math_ops.cast(self.epsilon, dt)))
