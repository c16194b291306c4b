"""``tf.keras.random``: Keras 3's seeding, on TF's stateless random ops.

Keras 3 draws every random tensor statelessly. An int seed ``s`` is the pair ``[s, 0]``;
``None`` is a seed drawn once from Python's ``random`` (``make_default_seed``, called when an
initializer or a dropout-like layer is made), so ``tf.keras.utils.set_random_seed`` repeats
it; a ``SeedGenerator`` is a ``[seed, counter]`` state stepped by each draw. With the
same calls in the same order, seeded weights and dropout masks are TF's bit for bit.
"""
import random as python_random

import numpy as np

from .. import dtypes
from ..ops import array_ops, math_ops, nn_ops
from ..ops.array_ops import constant
from ..ops.host_seeded_random import host_seeded

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
    """Keras 3's SeedGenerator: each draw seeded with it takes the state ``[seed, counter]``
    and steps the counter, so each draw differs and a re-seeded program repeats them. The
    state lives on the host and the draw ops step it as they run (ops/host_seeded_random.py),
    so a compiled step draws anew each call; ``state`` is a snapshot."""

    def __init__(self, seed=None, name=None):
        self._initial_seed = seed
        if seed is None:
            seed = make_default_seed()
        if not isinstance(seed, int):
            raise ValueError(f"Argument `seed` must be an integer. Received: seed={seed}")
        self.name = name or "seed_generator"
        self._state = np.array([seed, 0], np.int64)

    @property
    def state(self):
        return constant(self._state.copy())

    def next_pair(self, ordered=True):
        """The state (the seed pair of the next draw), the state then stepped."""
        pair = self._state.copy()
        if ordered:
            self._state[1] += 1
        else:
            self._state = (self._state + 1) * 5387 % 933199
        return pair

    def next(self, ordered=True):
        return constant(self.next_pair(ordered))

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


def pair_source(seed):
    """-> a function giving the int32 seed pair of each draw TF's stateless ops get from a
    Keras ``seed`` argument: Keras's draw_seed, then its TF backend's floormod by int32 max - 1."""
    if isinstance(seed, SeedGenerator):
        draw = seed.next_pair
    elif seed is None:
        def draw():
            return global_seed_generator().next_pair(ordered=False)
    elif isinstance(seed, int):
        def draw():
            return np.array([seed, 0], np.int64)
    else:
        raise ValueError("Argument `seed` must be either an integer or an instance of `SeedGenerator`. "
                         f"Received: seed={seed} (of type {type(seed)})")
    return lambda: tuple(int(v) % (_INT32_MAX - 1) for v in draw())


def _dtype(dtype):
    return dtypes.as_dtype(dtype or dtypes.float32)


def uniform(shape, minval=0.0, maxval=1.0, dtype=None, seed=None):
    """``keras.random.uniform``: TF's stateless_uniform, rnd * (maxval - minval) + minval."""
    dt = _dtype(dtype)
    lo, hi = math_ops.cast(minval, dt), math_ops.cast(maxval, dt)
    return math_ops.add(math_ops.multiply(host_seeded("uniform", shape, dt, pair_source(seed)), hi - lo), lo)


def _gaussian(distribution, shape, mean, stddev, dtype, seed):
    dt = _dtype(dtype)
    rnd = host_seeded(distribution, shape, dt, pair_source(seed))
    return math_ops.add(math_ops.multiply(rnd, math_ops.cast(stddev, dt)), math_ops.cast(mean, dt))


def normal(shape, mean=0.0, stddev=1.0, dtype=None, seed=None):
    return _gaussian("normal", shape, mean, stddev, dtype, seed)


def truncated_normal(shape, mean=0.0, stddev=1.0, dtype=None, seed=None):
    return _gaussian("truncated_normal", shape, mean, stddev, dtype, seed)


def dropout(inputs, rate, noise_shape=None, seed=None):
    """``keras.random.dropout``: TF's stateless_dropout under the next seed of ``seed``."""
    if rate == 1.0:
        return array_ops.zeros_like(inputs)
    if rate == 0.0:
        return inputs
    pairs = pair_source(seed)
    return nn_ops.dropout(inputs, rate, noise_shape=noise_shape,
                          uniform_sampler=lambda shape, dtype: host_seeded("uniform", shape, dtype, pairs))
