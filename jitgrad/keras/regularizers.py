"""``tf.keras.regularizers``: Keras 3's weight penalties, each a callable from a weight to a
scalar loss that ``Layer.losses`` collects and ``fit`` adds to the compiled loss."""
from ..ops import math_ops, reduction_ops


def _penalty_factor(name, value):
    value = float(value)
    if value < 0:
        raise ValueError(f"Invalid value for argument {name}: expected a non-negative float.Received: {name}={value}")
    return value


class Regularizer:
    def __call__(self, x):
        return 0.0

    def get_config(self):
        raise NotImplementedError(f"{type(self).__name__} does not implement get_config()")

    @classmethod
    def from_config(cls, config):
        return cls(**config)


class L1L2(Regularizer):
    """l1 * sum(|x|) + l2 * sum(x^2), each term only when its factor is set."""

    def __init__(self, l1=0.0, l2=0.0):
        self.l1, self.l2 = _penalty_factor("l1", l1), _penalty_factor("l2", l2)

    def __call__(self, x):
        penalty = math_ops.cast(0.0, x.dtype)
        if self.l1:
            penalty = penalty + self.l1 * reduction_ops.reduce_sum(math_ops.abs(x))
        if self.l2:
            penalty = penalty + self.l2 * reduction_ops.reduce_sum(math_ops.square(x))
        return penalty

    def get_config(self):
        return {"l1": self.l1, "l2": self.l2}


class L1(Regularizer):
    def __init__(self, l1=0.01):
        self.l1 = _penalty_factor("l1", l1)

    def __call__(self, x):
        return self.l1 * reduction_ops.reduce_sum(math_ops.abs(x))

    def get_config(self):
        return {"l1": self.l1}


class L2(Regularizer):
    def __init__(self, l2=0.01):
        self.l2 = _penalty_factor("l2", l2)

    def __call__(self, x):
        return self.l2 * reduction_ops.reduce_sum(math_ops.square(x))

    def get_config(self):
        return {"l2": self.l2}


l1, l2, l1_l2 = L1, L2, L1L2
_BY_NAME = {"l1": L1, "l2": L2, "l1l2": L1L2, "L1": L1, "L2": L2, "L1L2": L1L2}   # Keras 3: names and snake_case


def get(identifier):
    """None, a Regularizer, a name ("l1", "l2", "l1l2": default factors) or a callable."""
    if identifier is None or isinstance(identifier, Regularizer):
        return identifier
    if isinstance(identifier, str) and identifier in _BY_NAME:
        return _BY_NAME[identifier]()
    if callable(identifier):
        return identifier
    raise ValueError(f"Could not interpret regularizer identifier: {identifier}")
