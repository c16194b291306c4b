"""Keras 3's Dropout and the noise layers beside it: SpatialDropout1D / 2D (whole channels dropped),
GaussianNoise (additive N(0, stddev)) and GaussianDropout (multiplicative N(1, rate / (1 - rate))).
Each is the identity unless called with ``training=True``; each draws as Keras 3's, from a
SeedGenerator of its own (keras/seed_generator.py), so seeded draws are TF's."""
import math

from ..ops import array_ops
from . import seed_generator
from .base_layer import Layer


def _rate(rate):
    if not 0 <= rate <= 1:
        raise ValueError(f"Invalid value received for argument `rate`. Expected a float value between 0 and 1. "
                         f"Received: rate={rate}")
    return rate


class Dropout(Layer):
    _supports_masking = True     # Keras 3: the input's mask passes to the output

    def __init__(self, rate, noise_shape=None, seed=None, **kwargs):
        super().__init__(**kwargs)
        self.rate, self.noise_shape, self.seed = _rate(rate), noise_shape, seed
        if rate > 0:
            self.seed_generator = seed_generator.SeedGenerator(seed)

    def call(self, inputs, training=False):
        if training and self.rate > 0:     # (Keras 3 takes rate 1: everything dropped)
            return seed_generator.dropout(inputs, self.rate, self.noise_shape, self.seed_generator)
        return inputs

    def compute_output_shape(self, input_shape):
        return input_shape


class _SpatialDropout(Dropout):
    """Keras 3's: a Dropout whose mask is one draw per (sample, channel), the steps / pixels
    of a channel going together."""
    rank = None

    def __init__(self, rate, seed=None, **kwargs):
        super().__init__(rate, [None] + [1] * self.rank + [None], seed, **kwargs)


class SpatialDropout1D(_SpatialDropout):
    rank = 1


class SpatialDropout2D(_SpatialDropout):
    rank = 2


class GaussianNoise(Layer):
    _supports_masking = True

    def __init__(self, stddev, seed=None, **kwargs):
        super().__init__(**kwargs)
        if not 0 <= stddev <= 1:
            raise ValueError(f"Invalid value received for argument `stddev`. Expected a float value between 0 "
                             f"and 1. Received: stddev={stddev}")
        self.stddev, self.seed = stddev, seed
        if stddev > 0:
            self.seed_generator = seed_generator.SeedGenerator(seed)

    def call(self, inputs, training=False):
        if not training or self.stddev == 0:
            return inputs
        return inputs + seed_generator.normal(array_ops.shape(inputs), 0.0, self.stddev, inputs.dtype,
                                              seed=self.seed_generator)

    def compute_output_shape(self, input_shape):
        return input_shape


class GaussianDropout(Layer):
    _supports_masking = True

    def __init__(self, rate, seed=None, **kwargs):
        super().__init__(**kwargs)
        self.rate, self.seed = _rate(rate), seed
        if rate > 0:
            self.seed_generator = seed_generator.SeedGenerator(seed)

    def call(self, inputs, training=False):
        if not training or not 0 < self.rate < 1:
            return inputs
        stddev = math.sqrt(self.rate / (1.0 - self.rate))
        return inputs * seed_generator.normal(array_ops.shape(inputs), 1.0, stddev, inputs.dtype,
                                              seed=self.seed_generator)

    def compute_output_shape(self, input_shape):
        return input_shape
