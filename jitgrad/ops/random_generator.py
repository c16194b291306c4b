"""tf.random.Generator (Philox), create_rng_state, get_global_generator /
set_global_generator: TF 2.21's values bit for bit.

As in TF 2.21 (stateful_random_ops.py), a Generator is an int64 [3] state variable
[counter lo, counter hi, key]; a draw of n elements reads the state, advances its counter
by 256 * n (RngReadAndSkip) and runs the stateless kernel of the draw with the state it
read as counter and key (ops/stateless_random_ops.py, ``key_from="state"``). Here the
read-and-skip is an assignment of ``RngSkip(state, n)`` and the state read is recovered
from its result as ``RngSkip(new, -n)``, so every draw hangs off the assignment by data
flow: in a tf.function two draws are ordered as their assignments are.
"""
import os

import numpy as np

from .. import context, dtypes
from ..convert import convert_to_tensor
from ..eager import EagerTensor
from ..module import Module
from . import philox
from .array_ops import concat, reshape, stack, unstack
from .math_ops import cast, zeros_like
from .registry import NOT_DIFFERENTIABLE, apply_op, register
from .stateless_random_ops import check_alg, gaussian_from, static_shape, uniform_from
from .random_gamma_poisson import binomial_from, binomial_layout

PHILOX, THREEFRY, AUTO_SELECT = 1, 2, 3
STATE_SIZE = 3             # Philox: two counter words and the key (int64)


class Algorithm:
    """``tf.random.Algorithm``: the numbers of TF's RNG algorithms (jitgrad has Philox;
    AUTO_SELECT is Philox on CPU, as in TF)."""

    class _Alg:
        def __init__(self, name, value):
            self.name, self.value = name, value

        def __repr__(self):
            return f"<Algorithm.{self.name}: {self.value}>"

    PHILOX = _Alg("PHILOX", PHILOX)
    THREEFRY = _Alg("THREEFRY", THREEFRY)
    AUTO_SELECT = _Alg("AUTO_SELECT", AUTO_SELECT)


def _alg_int(alg):
    check_alg(alg)
    value = getattr(alg, "value", alg)
    return {"philox": PHILOX, "auto_select": AUTO_SELECT}.get(value.lower(), None) if isinstance(value, str) \
        else int(value)


def _skip_infer(shapes, dts, attrs):
    if dts[0] != dtypes.int64:
        raise TypeError(f"A Generator's state must be int64, got {dts[0].name}")
    return [((STATE_SIZE,), dtypes.int64)]


register("RngSkip", infer=_skip_infer, kernel=lambda attrs, state: philox.skipped_state(state, attrs["delta"]),
         grad=NOT_DIFFERENTIABLE, kind="other", denormals="keep", lowering="interpreter")


def _to_int64(v):
    """A Python int of [2^63, 2^64) as the int64 of the same bits (TF's _uint_to_int)."""
    return v - (1 << 64) if isinstance(v, int) and v >= 1 << 63 else v


def create_rng_state(seed, alg):
    """``tf.random.create_rng_state``: a Python int split into 64-bit words (low first), or
    an integer vector, as an int64 [3] state; a shorter seed is padded with zeros on the left."""
    _alg_int(alg)
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
        seed = int(seed)
        words = []
        for _ in range(STATE_SIZE):
            words.append(_to_int64(seed & philox.MASK64))
            seed >>= 64
        return convert_to_tensor(np.array(words, dtype=np.int64))
    if isinstance(seed, (list, tuple)):
        seed = np.array([_to_int64(int(v)) for v in np.asarray(seed, dtype=object).reshape(-1)], dtype=np.int64)
    state = reshape(cast(convert_to_tensor(seed), dtypes.int64), [-1])
    n = state.shape.dims[0]
    if n is None:
        raise NotImplementedError("jitgrad needs a Generator seed's length known when the graph is built.")
    if n >= STATE_SIZE:
        return state[:STATE_SIZE]
    return concat([convert_to_tensor(np.zeros(STATE_SIZE - n, np.int64)), state], 0)


def _state_tensor(state):
    if isinstance(state, (list, tuple)):
        state = np.array([_to_int64(int(v)) for v in state], dtype=np.int64)
    t = cast(convert_to_tensor(state), dtypes.int64)
    if not t.shape.is_compatible_with([STATE_SIZE]):
        raise ValueError(f"Shapes {t.shape} and (3,) are incompatible")
    return t


class Generator(Module):
    """``tf.random.Generator``: a Philox stream in an int64 [3] variable (a tf.Module, so
    checkpoints and the modules holding it track its state, as TF's AutoTrackable one)."""

    @classmethod
    def from_state(cls, state, alg):
        return cls(state=state, alg=alg)

    @classmethod
    def from_seed(cls, seed, alg=None):
        alg = PHILOX if alg is None else _alg_int(alg)
        return cls(state=create_rng_state(seed, alg), alg=alg)

    @classmethod
    def from_non_deterministic_state(cls, alg=None):
        alg = PHILOX if alg is None else _alg_int(alg)
        state = np.frombuffer(os.urandom(8 * STATE_SIZE), dtype=np.int64).copy()
        return cls(state=state, alg=alg)

    @classmethod
    def from_key_counter(cls, key, counter, alg):
        return cls(state=cls._key_counter_state(key, counter), alg=alg)

    @staticmethod
    def _key_counter_state(key, counter):
        counter = _state_tensor(counter) if not isinstance(counter, (list, tuple)) else \
            convert_to_tensor(np.array([_to_int64(int(v)) for v in counter], dtype=np.int64))
        key = reshape(cast(convert_to_tensor(_to_int64(key) if isinstance(key, int) else key), dtypes.int64), [1])
        if not counter.shape.is_compatible_with([STATE_SIZE - 1]):
            raise ValueError(f"Shapes {counter.shape} and (2,) are incompatible")
        return concat([counter, key], 0)

    def __init__(self, copy_from=None, state=None, alg=None):
        from ..variables import Variable
        super().__init__(name="random_generator")
        if copy_from is not None:
            if alg is not None or state is not None:
                raise ValueError("Generator(copy_from=...) takes neither `state` nor `alg`.")
            state, alg = copy_from.state.read_value(), copy_from.algorithm
        elif alg is None or state is None:
            raise ValueError("Generator needs both `state` and `alg` (or `copy_from`); use "
                             "tf.random.Generator.from_seed to make one from a seed.")
        self._alg = _alg_int(alg)
        if isinstance(state, Variable):
            if state.dtype != dtypes.int64 or not state.shape.is_compatible_with([STATE_SIZE]):
                raise ValueError(f"A Generator's state variable must be int64 [3], got {state.dtype.name} "
                                 f"{state.shape}")
            self._state_var = state
        else:
            self._state_var = Variable(_state_tensor(state), dtype=dtypes.int64, trainable=False, name="StateVar")

    # ---------------------------------------------------------------- state
    @property
    def state(self):
        return self._state_var

    @property
    def algorithm(self):
        return self._alg

    @property
    def key(self):
        return self._state_var[-1]

    def reset(self, state):
        self._state_var.assign(_state_tensor(state))

    def reset_from_seed(self, seed):
        self._state_var.assign(create_rng_state(seed, self._alg))

    def reset_from_key_counter(self, key, counter):
        self._state_var.assign(self._key_counter_state(key, counter))

    def _read_and_skip(self, elements):
        """The state as it was, after advancing the variable past ``elements`` elements."""
        new = apply_op("RngSkip", [convert_to_tensor(self._state_var)], {"delta": int(elements)})
        self._state_var.assign(new)
        return apply_op("RngSkip", [convert_to_tensor(self._state_var)], {"delta": -int(elements)})

    def skip(self, delta):
        """Advances the state past ``delta`` elements; returns the state before (TF's
        RngReadAndSkip)."""
        delta = delta.numpy() if isinstance(delta, EagerTensor) else delta
        return self._read_and_skip(int(delta))

    def _key(self, shape):
        return lambda: self._read_and_skip(int(np.prod(static_shape(shape), dtype=np.int64)))

    # ---------------------------------------------------------------- draws
    def uniform(self, shape, minval=0, maxval=None, dtype=dtypes.float32, name=None):
        """Floats in [minval, maxval), integers in [minval, maxval), or (integer dtype,
        no bounds) integers over the whole range, as ``tf.random.stateless_uniform``."""
        return uniform_from(self._key(shape), "state", shape, minval, maxval, dtype, name, "Generator.uniform")

    def uniform_full_int(self, shape, dtype=dtypes.uint64, name=None):
        return uniform_from(self._key(shape), "state", shape, None, None, dtype, name, "Generator.uniform_full_int")

    def normal(self, shape, mean=0.0, stddev=1.0, dtype=dtypes.float32, name=None):
        return gaussian_from("StatelessRandomNormal", self._key(shape), "state", shape, mean, stddev, dtype, name,
                             "Generator.normal")

    def truncated_normal(self, shape, mean=0.0, stddev=1.0, dtype=dtypes.float32, name=None):
        return gaussian_from("StatelessTruncatedNormal", self._key(shape), "state", shape, mean, stddev, dtype,
                             name, "Generator.truncated_normal")

    def binomial(self, shape, counts, probs, dtype=dtypes.int32, name=None):
        """Binomial(counts, probs) draws of the full ``shape`` (TF's StatefulRandomBinomial:
        the state advances by 256 * (batches * 200 * (draws per batch + 3) / 4))."""
        counts, probs = convert_to_tensor(counts), convert_to_tensor(probs)

        def key(counts, probs):
            dims = static_shape(shape)
            _, batches, per = binomial_layout(dims, counts.shape.as_list(), probs.shape.as_list())
            return self._read_and_skip(batches * 2 * 100 * (per + 3) // 4)
        return binomial_from(key, "state", shape, counts, probs, dtype, name)

    def make_seeds(self, count=1):
        """[2, count] int64: seeds for the stateless ops (random keys over zeros)."""
        keys = self.uniform_full_int([count], dtype=dtypes.int64)
        return stack([keys, zeros_like(keys)])

    def split(self, count=1):
        """``count`` new Generators whose keys this one draws (counters zero)."""
        keys = self.uniform_full_int([count], dtype=dtypes.int64)
        zeros = convert_to_tensor(np.zeros(STATE_SIZE - 1, np.int64))
        return [Generator(state=concat([zeros, reshape(k, [1])], 0), alg=self._alg)
                for k in unstack(keys, num=count)]


_global = [None]


def get_global_generator():
    """``tf.random.get_global_generator``: made from a non-deterministic state on first use."""
    if _global[0] is None:
        with context.init_scope():      # (its variable outlives a function being traced, as in TF)
            _global[0] = Generator.from_non_deterministic_state()
    return _global[0]


def set_global_generator(generator):
    """``tf.random.set_global_generator``."""
    _global[0] = generator

