"""``tf.keras.random``: Keras 3's seeding, on TF's stateless random ops.

Keras 3 draws every random tensor statelessly. An int seed ``s`` is the pair ``[s, 0]``;
``None`` is a seed drawn once from Python's ``random`` (``make_default_seed``, called when an
initializer or a dropout-like layer is made), so ``tf.keras.utils.set_random_seed`` repeats
it; a ``SeedGenerator`` is a ``[seed, counter]`` variable stepped by each draw. With the
same calls in the same order, seeded weights are TF's bit for bit.
"""
import random as python_random

import numpy as np

from .. import dtypes
from ..ops import math_ops
from ..ops.stateless_random_ops import stateless_normal, stateless_truncated_normal, stateless_uniform
from ..variables import Variable

_INT32_MAX = 2 ** 31 - 1


def make_default_seed():
    return python_random.randint(1, int(1e9))


def consume_default_seed(seed):
    """What Keras 3's ``SeedGenerator(seed)`` takes from Python's ``random`` when a layer that
    drops or adds noise is made: jitgrad's layers draw their masks otherwise (README), but
    take the same number, so the initializers made after them get TF's seeds."""
    if seed is None:
        make_default_seed()


class SeedGenerator:
    """Keras 3's SeedGenerator: ``next()`` returns the state and steps it, so each draw
    seeded with it differs and a re-seeded program repeats them."""

    def __init__(self, seed=None, name=None):
        self._initial_seed = seed
        if seed is None:
            seed = make_default_seed()
        if not isinstance(seed, int):
            raise ValueError(f"Argument `seed` must be an integer. Received: seed={seed}")
        self.name = name or "seed_generator"
        self.state = Variable(np.array([seed, 0], np.int64), trainable=False, name="seed_generator_state")

    def next(self, ordered=True):
        value = math_ops.multiply(self.state.read_value(), np.int64(1))     # the state before the step
        if ordered:
            self.state.assign_add(np.array([0, 1], np.int64))
        else:
            self.state.assign(math_ops.floormod((self.state + 1) * 5387, np.int64(933199)))
        return value

    def get_config(self):
        return {"seed": self._initial_seed, "name": self.name}

    @classmethod
    def from_config(cls, config):
        return cls(**config)


_GLOBAL = []


def global_seed_generator():
    if not _GLOBAL:
        _GLOBAL.append(SeedGenerator())
    return _GLOBAL[0]


def reset_global_seed_generator():
    """``set_random_seed`` drops the global generator; the next unseeded draw makes a new
    one from the re-seeded Python ``random``."""
    _GLOBAL.clear()


def draw_seed(seed):
    """The int32 seed pair TF's stateless ops get from a Keras ``seed`` argument (Keras's
    draw_seed, then its TF backend's floormod by int32 max - 1)."""
    if isinstance(seed, SeedGenerator):
        pair = seed.next()
    elif seed is None:
        pair = global_seed_generator().next(ordered=False)
    elif isinstance(seed, int):
        return np.array([seed % (_INT32_MAX - 1), 0], np.int32)
    else:
        raise ValueError("Argument `seed` must be either an integer or an instance of `SeedGenerator`. "
                         f"Received: seed={seed} (of type {type(seed)})")
    return math_ops.cast(math_ops.floormod(pair, np.int64(_INT32_MAX - 1)), dtypes.int32)


def _dtype(dtype):
    return dtypes.as_dtype(dtype or dtypes.float32)


def uniform(shape, minval=0.0, maxval=1.0, dtype=None, seed=None):
    dt = _dtype(dtype)
    return stateless_uniform(shape, draw_seed(seed), math_ops.cast(minval, dt), math_ops.cast(maxval, dt), dt)


def normal(shape, mean=0.0, stddev=1.0, dtype=None, seed=None):
    return stateless_normal(shape, draw_seed(seed), mean, stddev, _dtype(dtype))


def truncated_normal(shape, mean=0.0, stddev=1.0, dtype=None, seed=None):
    return stateless_truncated_normal(shape, draw_seed(seed), mean, stddev, _dtype(dtype))
