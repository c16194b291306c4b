"""``tf.keras.optimizers.schedules``: Keras 3's learning-rate schedules, each ``__call__(step)``
written with its operations in Keras's order and dtypes (the rate's dtype, float32 for a Python
float), so an optimizer computes the same rate eagerly and inside a traced train step. Keras's
``ops.cond`` on the step becomes a ``where`` (both sides are cheap and free of effects)."""
import math

from .convert import convert_to_tensor
from .ops import math_ops


class LearningRateSchedule:
    """A learning rate as a function of the optimizer's step (its ``iterations``)."""

    def __call__(self, step):
        raise NotImplementedError(f"Learning rate schedule '{type(self).__name__}' must override "
                                  f"`__call__(self, step)`.")

    def get_config(self):
        raise NotImplementedError(f"Learning rate schedule '{type(self).__name__}' must override `get_config()`.")

    @classmethod
    def from_config(cls, config):
        return cls(**config)


def _positive_steps(name, steps):
    if steps <= 0:
        raise ValueError(f"Argument `{name}` must be > 0. Received: {name}={steps}")


def _rate_and_step(initial_learning_rate, step):
    rate = convert_to_tensor(initial_learning_rate)
    return rate, math_ops.cast(step, rate.dtype)


class _StepDecay(LearningRateSchedule):
    """ExponentialDecay's and InverseTimeDecay's arguments, and their progress step / decay_steps
    (floored when ``staircase``) in the rate's dtype."""

    def __init__(self, initial_learning_rate, decay_steps, decay_rate, staircase, name):
        _positive_steps("decay_steps", decay_steps)
        self.initial_learning_rate, self.decay_steps, self.decay_rate = initial_learning_rate, decay_steps, decay_rate
        self.staircase, self.name = staircase, name

    def _rate_and_progress(self, step):
        rate, step = _rate_and_step(self.initial_learning_rate, step)
        p = step / math_ops.cast(self.decay_steps, rate.dtype)
        return rate, math_ops.floor(p) if self.staircase else p

    def get_config(self):
        return {"initial_learning_rate": self.initial_learning_rate, "decay_steps": self.decay_steps,
                "decay_rate": self.decay_rate, "staircase": self.staircase, "name": self.name}


class ExponentialDecay(_StepDecay):
    """rate * decay_rate ^ (step / decay_steps), the exponent floored when ``staircase``."""

    def __init__(self, initial_learning_rate, decay_steps, decay_rate, staircase=False, name="ExponentialDecay"):
        super().__init__(initial_learning_rate, decay_steps, decay_rate, staircase, name)

    def __call__(self, step):
        rate, p = self._rate_and_progress(step)
        return rate * math_ops.pow(math_ops.cast(self.decay_rate, rate.dtype), p)


class InverseTimeDecay(_StepDecay):
    """rate / (1 + decay_rate * step / decay_steps), the quotient floored when ``staircase``."""

    def __init__(self, initial_learning_rate, decay_steps, decay_rate, staircase=False, name="InverseTimeDecay"):
        super().__init__(initial_learning_rate, decay_steps, decay_rate, staircase, name)

    def __call__(self, step):
        rate, p = self._rate_and_progress(step)
        return rate / (math_ops.cast(1, rate.dtype) + math_ops.cast(self.decay_rate, rate.dtype) * p)


class PiecewiseConstantDecay(LearningRateSchedule):
    """values[i] for boundaries[i-1] < step <= boundaries[i] (values[0] up to the first boundary,
    values[-1] past the last), summed from 0/1 indicators as Keras does."""

    def __init__(self, boundaries, values, name="PiecewiseConstant"):
        if len(boundaries) != len(values) - 1:
            raise ValueError(f"The length of boundaries should be 1 less than the length of values. Received: "
                             f"boundaries={boundaries} of length {len(boundaries)}, and values={values} of length "
                             f"{len(values)}.")
        self.boundaries, self.values, self.name = boundaries, values, name

    def __call__(self, step):
        step = convert_to_tensor(step)
        bounds = [math_ops.cast(convert_to_tensor(b), step.dtype) for b in self.boundaries]
        values = [convert_to_tensor(v) for v in self.values]
        dtype = values[0].dtype
        result = math_ops.cast(math_ops.less_equal(step, bounds[0]), dtype) * values[0]
        result = result + math_ops.cast(math_ops.greater(step, bounds[-1]), dtype) * values[-1]
        for low, high, value in zip(bounds[:-1], bounds[1:], values[1:-1]):
            inside = math_ops.logical_and(math_ops.greater(step, low), math_ops.less_equal(step, high))
            result = result + math_ops.cast(inside, dtype) * value
        return result

    def get_config(self):
        return {"boundaries": self.boundaries, "values": self.values, "name": self.name}


class PolynomialDecay(LearningRateSchedule):
    """(rate - end) * (1 - step / decay_steps) ^ power + end; ``cycle`` stretches decay_steps to
    the next multiple past the step instead of holding ``end``."""

    def __init__(self, initial_learning_rate, decay_steps, end_learning_rate=0.0001, power=1.0, cycle=False,
                 name="PolynomialDecay"):
        _positive_steps("decay_steps", decay_steps)
        self.initial_learning_rate, self.decay_steps, self.end_learning_rate = (initial_learning_rate, decay_steps,
                                                                                end_learning_rate)
        self.power, self.cycle, self.name = power, cycle, name

    def __call__(self, step):
        rate, step = _rate_and_step(self.initial_learning_rate, step)
        dtype = rate.dtype
        end = math_ops.cast(self.end_learning_rate, dtype)
        decay_steps = math_ops.cast(self.decay_steps, dtype)
        if self.cycle:
            multiplier = math_ops.where(math_ops.equal(step, 0.0), math_ops.cast(1.0, dtype),
                                        math_ops.ceil(step / math_ops.cast(self.decay_steps, dtype)))
            decay_steps = decay_steps * multiplier
        else:
            step = math_ops.minimum(step, decay_steps)
        p = step / decay_steps
        return (rate - end) * math_ops.pow(1 - p, math_ops.cast(self.power, dtype)) + end

    def get_config(self):
        return {"initial_learning_rate": self.initial_learning_rate, "decay_steps": self.decay_steps,
                "end_learning_rate": self.end_learning_rate, "power": self.power, "cycle": self.cycle,
                "name": self.name}


def _cosine(fraction, dtype):
    return 0.5 * (1.0 + math_ops.cos(math_ops.cast(math.pi, dtype) * fraction))


class CosineDecay(LearningRateSchedule):
    """An optional linear warmup from the rate to ``warmup_target`` over ``warmup_steps``, then a
    cosine from there to ``alpha`` times it over ``decay_steps``, held after."""

    def __init__(self, initial_learning_rate, decay_steps, alpha=0.0, name="CosineDecay", warmup_target=None,
                 warmup_steps=0):
        _positive_steps("decay_steps", decay_steps)
        self.initial_learning_rate, self.decay_steps, self.alpha, self.name = (initial_learning_rate, decay_steps,
                                                                               alpha, name)
        self.warmup_target, self.warmup_steps = warmup_target, warmup_steps

    def _decayed(self, step, decay_steps, decay_from, dtype):
        return decay_from * ((1 - self.alpha) * _cosine(step / decay_steps, dtype) + self.alpha)

    def __call__(self, step):
        rate, step = _rate_and_step(self.initial_learning_rate, step)
        dtype = rate.dtype
        decay_steps = math_ops.cast(self.decay_steps, dtype)
        if self.warmup_target is None:
            return self._decayed(math_ops.minimum(step, decay_steps), decay_steps, rate, dtype)
        target = math_ops.cast(self.warmup_target, dtype)
        warmup_steps = math_ops.cast(self.warmup_steps, dtype)
        step = math_ops.minimum(step, decay_steps + warmup_steps)
        warming = (target - rate) * (step / warmup_steps) + rate
        return math_ops.where(math_ops.less(step, warmup_steps), warming,
                              self._decayed(step - warmup_steps, decay_steps, target, dtype))

    def get_config(self):
        return {"initial_learning_rate": self.initial_learning_rate, "decay_steps": self.decay_steps,
                "alpha": self.alpha, "name": self.name, "warmup_target": self.warmup_target,
                "warmup_steps": self.warmup_steps}


class CosineDecayRestarts(LearningRateSchedule):
    """SGDR: cosine periods starting at ``first_decay_steps``, each ``t_mul`` times longer and
    ``m_mul`` times lower than the last, decaying to ``alpha`` times the rate."""

    def __init__(self, initial_learning_rate, first_decay_steps, t_mul=2.0, m_mul=1.0, alpha=0.0, name="SGDRDecay"):
        _positive_steps("first_decay_steps", first_decay_steps)
        self.initial_learning_rate, self.first_decay_steps = initial_learning_rate, first_decay_steps
        self._t_mul, self._m_mul, self.alpha, self.name = t_mul, m_mul, alpha, name

    def __call__(self, step):
        rate, step = _rate_and_step(self.initial_learning_rate, step)
        dtype = rate.dtype
        alpha, t_mul, m_mul = (math_ops.cast(v, dtype) for v in (self.alpha, self._t_mul, self._m_mul))
        fraction = step / math_ops.cast(self.first_decay_steps, dtype)
        if self._t_mul == 1.0:
            i_restart = math_ops.floor(fraction)
            fraction = fraction - i_restart
        else:
            i_restart = math_ops.floor(math_ops.log(1.0 - fraction * (1.0 - t_mul)) / math_ops.log(t_mul))
            sum_r = (1.0 - math_ops.pow(t_mul, i_restart)) / (1.0 - t_mul)
            fraction = (fraction - sum_r) / math_ops.pow(t_mul, i_restart)
        cosine = 0.5 * math_ops.pow(m_mul, i_restart) * (1.0 + math_ops.cos(math_ops.cast(math.pi, dtype) * fraction))
        return rate * ((1 - alpha) * cosine + alpha)

    def get_config(self):
        return {"initial_learning_rate": self.initial_learning_rate, "first_decay_steps": self.first_decay_steps,
                "t_mul": self._t_mul, "m_mul": self._m_mul, "alpha": self.alpha, "name": self.name}
