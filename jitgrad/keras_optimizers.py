"""``tf.keras.optimizers`` beyond SGD and Adam: RMSprop, Adagrad, Adamax, Nadam, AdamW, Adadelta, Ftrl,
Lion.

Each ``_update_step`` is Keras 3's (TF 2.16+) ``update_step`` with its defaults and
its operation order, written with public ops over the base class of optimizers.py
(slots, iterations, learning-rate schedules, decoupled ``weight_decay``), so it runs
eagerly, in graph mode and inside a traced train step alike. Where the gradient can be
tf.IndexedSlices (a gather of the variable) the ops are keras_sparse_ops' (``K``), which take
them as Keras 3's TF backend does."""
from . import dtypes
from . import keras_sparse_ops as K
from .ops import math_ops
from .optimizers import Adam, KerasOptimizer, _new_variable

__all__ = ["RMSprop", "Adagrad", "Adamax", "Nadam", "AdamW", "Adadelta", "Ftrl", "Lion"]


class RMSprop(KerasOptimizer):
    """v = rho * v + (1 - rho) * g^2;  (centered: a = rho * a + (1 - rho) * g, v - a^2)
    inc = lr * g / sqrt(v + eps);  momentum: m = momentum * m + inc, var -= m; else var -= inc."""

    def __init__(self, learning_rate=0.001, rho=0.9, momentum=0.0, epsilon=1e-7, centered=False, name="rmsprop",
                 **kwargs):
        super().__init__(learning_rate, name, **kwargs)
        self.rho, self.momentum, self.epsilon, self.centered = rho, momentum, epsilon, centered
        self._slot_names = ("velocity",) + (("momentum",) if momentum > 0 else ()) + \
            (("average_gradient",) if centered else ())

    def _update_step(self, grad, var):
        dt = var.dtype
        lr = self._lr(dt)
        rho = math_ops.cast(self.rho, dt)
        one_minus_rho = math_ops.cast(1 - self.rho, dt)     # 1 - rho in Python, as Keras
        eps = math_ops.cast(self.epsilon, dt)
        velocity = self._slot(var, "velocity")
        v_t = velocity.assign(K.add(rho * velocity, K.multiply(one_minus_rho, K.square(grad))))
        if self.centered:
            avg = self._slot(var, "average_gradient")
            a_t = avg.assign(K.add(rho * avg, K.multiply(one_minus_rho, grad)))
            denominator = v_t - math_ops.square(a_t) + eps
        else:
            denominator = v_t + eps
        increment = K.divide(K.multiply(lr, grad), math_ops.sqrt(denominator))
        if self.momentum > 0:
            m = self._slot(var, "momentum")
            m_t = m.assign(K.add(math_ops.cast(self.momentum, dt) * m, increment))
            return var.assign_sub(m_t)
        return K.assign_sub(var, increment)


class Adagrad(KerasOptimizer):
    """acc += g^2 (acc starts at initial_accumulator_value); var -= lr * g / sqrt(acc + eps)."""

    def __init__(self, learning_rate=0.001, initial_accumulator_value=0.1, epsilon=1e-7, name="adagrad", **kwargs):
        super().__init__(learning_rate, name, **kwargs)
        self.initial_accumulator_value, self.epsilon = initial_accumulator_value, epsilon
        self._slot_names = ("accumulator",)
        self._slot_initial = initial_accumulator_value

    def _update_step(self, grad, var):
        dt = var.dtype
        acc = self._slot(var, "accumulator")
        acc_t = K.assign_add(acc, K.square(grad))
        return K.assign_sub(var, K.divide(K.multiply(self._lr(dt), grad),
                                          math_ops.sqrt(acc_t + math_ops.cast(self.epsilon, dt))))


class Adamax(KerasOptimizer):
    """m += (g - m) * (1 - beta_1); u = max(beta_2 * u, |g|);
    var -= lr * m / ((1 - beta_1^t) * (u + eps)), t = iterations + 1."""

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7, name="adamax", **kwargs):
        super().__init__(learning_rate, name, **kwargs)
        self.beta_1, self.beta_2, self.epsilon = beta_1, beta_2, epsilon
        self._slot_names = ("momentum", "norm")

    def _update_step(self, grad, var):
        dt = var.dtype
        step = math_ops.cast(self.iterations + 1, dt)
        b1p = math_ops.pow(math_ops.cast(self.beta_1, dt), step)
        m, u = self._slot(var, "momentum"), self._slot(var, "norm")
        m_t = m.assign_add(K.multiply(K.subtract(grad, m), math_ops.cast(1 - self.beta_1, dt)))
        u_t = u.assign(K.maximum(math_ops.cast(self.beta_2, dt) * u, K.abs(grad)))
        return var.assign_sub(self._lr(dt) * m_t / ((1 - b1p) * (u_t + math_ops.cast(self.epsilon, dt))))


class Nadam(KerasOptimizer):
    """Keras 3's Nadam: u_t = beta_1 * (1 - 0.5 * 0.96^t), u_{t+1} likewise with t + 1;
    the running product of the u's is updated once per step before the variables;
    m_hat = u_{t+1} m / (1 - prod * u_{t+1}) + (1 - u_t) g / (1 - prod); v_hat = v / (1 - beta_2^t);
    var -= m_hat * lr / (sqrt(v_hat) + eps)."""

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7, name="nadam", **kwargs):
        super().__init__(learning_rate, name, **kwargs)
        self.beta_1, self.beta_2, self.epsilon = beta_1, beta_2, epsilon
        self._slot_names = ("momentum", "velocity")
        self._u_product = None

    def build(self, var_list):
        super().build(var_list)
        self._product_variable(var_list[0].dtype if var_list else dtypes.float32)

    def _product_variable(self, dtype):
        if self._u_product is None:
            self._u_product = _new_variable(lambda: math_ops.cast(1.0, dtype), "u_product")
        return self._u_product

    @property
    def variables(self):
        return super().variables + ([self._u_product] if self._u_product is not None else [])

    def _before_updates(self, dtype):
        prod = self._product_variable(dtype)
        step = math_ops.cast(self.iterations + 1, prod.dtype)
        factor = math_ops.cast(self.beta_1, prod.dtype) * (1.0 - 0.5 * math_ops.pow(math_ops.cast(0.96, prod.dtype),
                                                                                     step))
        return [prod.assign(prod * factor)]

    def _update_step(self, grad, var):
        dt = var.dtype
        lr = self._lr(dt)
        local_step = math_ops.cast(self.iterations + 1, dt)
        next_step = math_ops.cast(self.iterations + 2, dt)
        decay = math_ops.cast(0.96, dt)
        beta_1, beta_2 = math_ops.cast(self.beta_1, dt), math_ops.cast(self.beta_2, dt)
        u_t = beta_1 * (1.0 - 0.5 * math_ops.pow(decay, local_step))
        u_t_1 = beta_1 * (1.0 - 0.5 * math_ops.pow(decay, next_step))
        u_product_t = math_ops.cast(self._u_product, dt)
        u_product_t_1 = u_product_t * u_t_1
        beta_2_power = math_ops.pow(beta_2, local_step)
        m, v = self._slot(var, "momentum"), self._slot(var, "velocity")
        m_t = m.assign_add(K.multiply(K.subtract(grad, m), 1 - beta_1))
        v_t = v.assign_add(K.multiply(K.subtract(K.square(grad), v), 1 - beta_2))
        m_hat = K.add(u_t_1 * m_t / (1 - u_product_t_1), K.divide(K.multiply(1 - u_t, grad), 1 - u_product_t))
        v_hat = v_t / (1 - beta_2_power)
        return var.assign_sub(m_hat * lr / (math_ops.sqrt(v_hat) + math_ops.cast(self.epsilon, dt)))


class AdamW(Adam):
    """Adam with decoupled weight decay (default 0.004): var -= var * wd * lr, then Adam's step."""

    def __init__(self, learning_rate=0.001, weight_decay=0.004, beta_1=0.9, beta_2=0.999, epsilon=1e-7,
                 amsgrad=False, name="adamw", **kwargs):
        if weight_decay is None:
            raise ValueError("Argument `weight_decay` must be a float. Received: weight_decay=None")
        super().__init__(learning_rate=learning_rate, beta_1=beta_1, beta_2=beta_2, epsilon=epsilon,
                         amsgrad=amsgrad, name=name, weight_decay=weight_decay, **kwargs)


class Adadelta(KerasOptimizer):
    """acc_g = rho * acc_g + (1 - rho) * g^2; delta = -(rms(acc_d) * g / rms(acc_g)), rms(x) = sqrt(x + eps);
    acc_d = rho * acc_d + (1 - rho) * delta^2; var += lr * delta."""

    def __init__(self, learning_rate=0.001, rho=0.95, epsilon=1e-7, name="adadelta", **kwargs):
        super().__init__(learning_rate, name, **kwargs)
        self.rho, self.epsilon = rho, epsilon
        self._slot_names = ("accumulated_grad", "accumulated_delta_var")

    def _update_step(self, grad, var):
        lr, rho = self._lr(var.dtype), self.rho
        acc_grad, acc_delta = self._slot(var, "accumulated_grad"), self._slot(var, "accumulated_delta_var")
        rms = lambda x: math_ops.sqrt(x + self.epsilon)  # noqa: E731
        acc_grad_t = acc_grad.assign(K.add(rho * acc_grad, K.multiply(1 - rho, K.square(grad))))
        delta = K.negative(K.divide(K.multiply(rms(acc_delta), grad), rms(acc_grad_t)))
        acc_delta.assign(K.add(rho * acc_delta, K.multiply(1 - rho, K.square(delta))))
        return K.assign_add(var, K.multiply(lr, delta))


class Ftrl(KerasOptimizer):
    """Keras 3's FTRL-proximal: the accumulator starts at initial_accumulator_value, ``linear`` at 0;
    var = (clip(linear, -l1, l1) - linear) / (new_accum^-p / lr + 2 * l2') each step."""

    def __init__(self, learning_rate=0.001, learning_rate_power=-0.5, initial_accumulator_value=0.1,
                 l1_regularization_strength=0.0, l2_regularization_strength=0.0,
                 l2_shrinkage_regularization_strength=0.0, beta=0.0, name="ftrl", **kwargs):
        super().__init__(learning_rate, name, **kwargs)
        for arg, value, bad in (("initial_accumulator_value", initial_accumulator_value, initial_accumulator_value < 0),
                                ("learning_rate_power", learning_rate_power, learning_rate_power > 0),
                                ("l1_regularization_strength", l1_regularization_strength,
                                 l1_regularization_strength < 0),
                                ("l2_regularization_strength", l2_regularization_strength,
                                 l2_regularization_strength < 0),
                                ("l2_shrinkage_regularization_strength", l2_shrinkage_regularization_strength,
                                 l2_shrinkage_regularization_strength < 0)):
            if bad:
                sign = "negative" if arg == "learning_rate_power" else "positive"
                raise ValueError(f"`{arg}` needs to be {sign} or zero. Received: {arg}={value}.")
        self.learning_rate_power, self.initial_accumulator_value = learning_rate_power, initial_accumulator_value
        self.l1_regularization_strength = l1_regularization_strength
        self.l2_regularization_strength = l2_regularization_strength
        self.l2_shrinkage_regularization_strength = l2_shrinkage_regularization_strength
        self.beta = beta
        self._slot_names = ("accumulator", "linear")
        self._slot_initial = {"accumulator": initial_accumulator_value}

    def _update_step(self, grad, var):
        lr = self._lr(var.dtype)
        accum, linear = self._slot(var, "accumulator"), self._slot(var, "linear")
        power = -self.learning_rate_power
        l2 = self.l2_regularization_strength + self.beta / (2.0 * lr)
        grad_to_use = K.add(grad, 2 * self.l2_shrinkage_regularization_strength * var)
        new_accum = K.add(accum, K.square(grad))
        linear_t = linear.assign_add(grad_to_use - (math_ops.pow(new_accum, power) - math_ops.pow(accum, power))
                                     / lr * var)
        quadratic = math_ops.pow(new_accum, power) / lr + 2 * l2
        clipped = math_ops.clip_by_value(linear_t, -self.l1_regularization_strength, self.l1_regularization_strength)
        var_t = var.assign((clipped - linear_t) / quadratic)
        accum.assign(new_accum)
        return var_t


class Lion(KerasOptimizer):
    """var -= lr * sign(beta_1 * m + (1 - beta_1) * g); m = beta_2 * m + (1 - beta_2) * g."""

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.99, name="lion", **kwargs):
        if beta_1 <= 0 or beta_1 > 1:
            raise ValueError(f"Argument `beta_1` must be in the [0, 1] range. Otherwise, the optimizer degenerates "
                             f"to SignSGD. Received: beta_1={beta_1}.")
        super().__init__(learning_rate, name, **kwargs)
        self.beta_1, self.beta_2 = beta_1, beta_2
        self._slot_names = ("momentum",)

    def _update_step(self, grad, var):
        dt = var.dtype
        lr = self._lr(dt)
        beta_1, beta_2 = math_ops.cast(self.beta_1, dt), math_ops.cast(self.beta_2, dt)
        m = self._slot(var, "momentum")
        var_t = var.assign_sub(lr * math_ops.sign(K.add(m * beta_1, K.multiply(grad, 1.0 - beta_1))))
        m.assign(K.add(m * beta_2, K.multiply(grad, 1.0 - beta_2)))
        return var_t
