"""Keras 3's Metric base: state in non-trainable variables (so a metric updates inside a
compiled train step), ``update_state`` / ``result`` / ``reset_state``. Its own module so the
metric families (metrics.py, confusion_metrics.py) each import it, one way."""
import numpy as np

from .. import dtypes
from ..init_arguments import RecordsInitArguments
from ..variables import Variable


class Metric(RecordsInitArguments):
    # Keras 3's "up" / "down": which way is better, read by the callbacks' mode="auto"
    _direction = None

    def __init__(self, name=None, dtype=None):
        self.name = name or type(self).__name__.lower()
        self.dtype = dtypes.as_dtype(dtype or dtypes.float32)
        self._variables = []

    def add_variable(self, shape=(), initializer="zeros", dtype=None, name=None):
        dt = dtypes.as_dtype(dtype or self.dtype)
        v = Variable(lambda: np.zeros(shape, dt.np), trainable=False, name=name, dtype=dt)
        self._variables.append(v)
        return v

    @property
    def variables(self):
        return list(self._variables)

    def reset_state(self):
        for v in self._variables:
            v.assign(np.zeros(v.shape.as_list(), v.dtype.np))

    def update_state(self, *args, **kwargs):
        raise NotImplementedError

    def result(self):
        raise NotImplementedError

    def __call__(self, *args, **kwargs):
        self.update_state(*args, **kwargs)
        return self.result()

    def __repr__(self):
        return f"<{type(self).__name__} name={self.name}>"
