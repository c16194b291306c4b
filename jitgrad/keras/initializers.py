"""``tf.keras.initializers``: Keras 3's initializers. Random ones draw as Keras 3 does
(keras/seed_generator.py): TF's stateless streams under an int seed, or under one drawn from
Python's ``random`` when the initializer is made, so ``seed=`` and
``tf.keras.utils.set_random_seed`` give TF's weights."""
import inspect
import math

import numpy as np

from .. import dtypes
from ..ops import array_ops
from . import seed_generator as keras_random
from ..module import camel_to_snake


class Initializer:
    def __call__(self, shape, dtype=None):
        raise NotImplementedError

    def get_config(self):
        return {}

    @classmethod
    def from_config(cls, config):
        return cls(**config)


class Zeros(Initializer):
    def __call__(self, shape, dtype=None):
        return array_ops.zeros(shape, dtype or dtypes.float32)


class Ones(Initializer):
    def __call__(self, shape, dtype=None):
        return array_ops.ones(shape, dtype or dtypes.float32)


class Constant(Initializer):
    def __init__(self, value=0.0):
        self.value = value

    def __call__(self, shape, dtype=None):
        dt = dtypes.as_dtype(dtype or dtypes.float32)
        return array_ops.constant(np.broadcast_to(np.asarray(self.value, dt.np), tuple(shape)).copy())


class RandomInitializer(Initializer):
    """Keras 3's: an unseeded initializer takes its seed from Python's ``random`` now, so
    each call draws the same values and two initializers differ."""

    def __init__(self, seed=None):
        self._init_seed = seed
        if seed is None:
            seed = keras_random.make_default_seed()
        elif not isinstance(seed, (int, keras_random.SeedGenerator)):
            raise ValueError("`seed` argument should be an instance of `keras.random.SeedGenerator()` or an "
                             f"integer. Received: seed={seed}")
        self.seed = seed

    def get_config(self):
        """The constructor's arguments, read back from the attributes of their names; the seed
        as given (None stays None, as Keras's)."""
        params = [p for p in inspect.signature(type(self).__init__).parameters if p != "self"]
        return {p: self._init_seed if p == "seed" else getattr(self, p) for p in params}


class RandomUniform(RandomInitializer):
    def __init__(self, minval=-0.05, maxval=0.05, seed=None):
        self.minval, self.maxval = minval, maxval
        super().__init__(seed)

    def __call__(self, shape, dtype=None):
        return keras_random.uniform(shape, self.minval, self.maxval, dtype, seed=self.seed)


class RandomNormal(RandomInitializer):
    def __init__(self, mean=0.0, stddev=0.05, seed=None):
        self.mean, self.stddev = mean, stddev
        super().__init__(seed)

    def __call__(self, shape, dtype=None):
        return keras_random.normal(shape, self.mean, self.stddev, dtype, seed=self.seed)


class TruncatedNormal(RandomNormal):
    def __call__(self, shape, dtype=None):
        return keras_random.truncated_normal(shape, self.mean, self.stddev, dtype, seed=self.seed)


def compute_fans(shape, input_axes=None, output_axes=None):
    """Keras's compute_fans: (fan_in, fan_out); the named axes' sizes when given (EinsumDense's
    kernels), else a conv kernel's receptive field times its last two dims."""
    shape = tuple(shape)
    if input_axes is not None and output_axes is not None:
        return int(np.prod([shape[a] for a in input_axes])), int(np.prod([shape[a] for a in output_axes]))
    if len(shape) == 0:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    if len(shape) == 2:
        return shape[0], shape[1]
    receptive = int(np.prod(shape[:-2]))
    return shape[-2] * receptive, shape[-1] * receptive


class VarianceScaling(RandomInitializer):
    def __init__(self, scale=1.0, mode="fan_in", distribution="truncated_normal", seed=None, input_axes=None,
                 output_axes=None):
        if scale <= 0.0:
            raise ValueError(f"Argument `scale` must be positive float. Received: scale={scale}")
        if mode not in ("fan_in", "fan_out", "fan_avg"):
            raise ValueError(f"Invalid `mode` argument: {mode}")
        distribution = distribution.lower()
        if distribution == "normal":
            distribution = "truncated_normal"
        if distribution not in ("uniform", "truncated_normal", "untruncated_normal"):
            raise ValueError(f"Invalid `distribution` argument: {distribution}")
        self.scale, self.mode, self.distribution = scale, mode, distribution
        self.input_axes, self.output_axes = input_axes, output_axes
        super().__init__(seed)

    def __call__(self, shape, dtype=None):
        return self.draw(shape, dtype, keras_random, self.seed)

    def draw(self, shape, dtype, random, seed):
        """The scaled draw from ``random``'s uniform / normal / truncated_normal: Keras 3's
        stateless ones, or TF 1's stateful ops (variable_scope's v1 initializer)."""
        fan_in, fan_out = compute_fans(shape, self.input_axes, self.output_axes)
        n = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2.0}[self.mode]
        scale = self.scale / max(1.0, n)
        if self.distribution == "truncated_normal":
            return random.truncated_normal(shape, 0.0, math.sqrt(scale) / 0.87962566103423978, dtype, seed=seed)
        if self.distribution == "untruncated_normal":
            return random.normal(shape, 0.0, math.sqrt(scale), dtype, seed=seed)
        limit = math.sqrt(3.0 * scale)
        return random.uniform(shape, -limit, limit, dtype, seed=seed)


class GlorotUniform(VarianceScaling):
    def __init__(self, seed=None, input_axes=None, output_axes=None):
        super().__init__(1.0, "fan_avg", "uniform", seed, input_axes, output_axes)


class GlorotNormal(VarianceScaling):
    def __init__(self, seed=None, input_axes=None, output_axes=None):
        super().__init__(1.0, "fan_avg", "truncated_normal", seed, input_axes, output_axes)


class HeUniform(VarianceScaling):
    def __init__(self, seed=None, input_axes=None, output_axes=None):
        super().__init__(2.0, "fan_in", "uniform", seed, input_axes, output_axes)


class HeNormal(VarianceScaling):
    def __init__(self, seed=None, input_axes=None, output_axes=None):
        super().__init__(2.0, "fan_in", "truncated_normal", seed, input_axes, output_axes)


class LecunUniform(VarianceScaling):
    def __init__(self, seed=None, input_axes=None, output_axes=None):
        super().__init__(1.0, "fan_in", "uniform", seed, input_axes, output_axes)


class LecunNormal(VarianceScaling):
    def __init__(self, seed=None, input_axes=None, output_axes=None):
        super().__init__(1.0, "fan_in", "truncated_normal", seed, input_axes, output_axes)


class Orthogonal(RandomInitializer):
    """Keras's Orthogonal: the Q of a QR factorisation of a standard normal draw (signs fixed by
    R's diagonal), times ``gain``. The draw is seeded like the others; the QR runs in numpy
    (float64, so Q is within float32 rounding of TF's), so this initializer runs eagerly."""

    def __init__(self, gain=1.0, seed=None):
        self.gain = gain
        super().__init__(seed)

    def __call__(self, shape, dtype=None):
        dt = dtypes.as_dtype(dtype or dtypes.float32)
        if len(shape) < 2:
            raise ValueError(f"The tensor to initialize must be at least two-dimensional. Received: "
                             f"shape={shape} of rank {len(shape)}.")
        rows, cols = int(np.prod(shape[:-1])), shape[-1]
        flat = (max(rows, cols), min(rows, cols))
        a = np.asarray(keras_random.normal(flat, 0.0, 1.0, dt, seed=self.seed), np.float64)
        q, r = np.linalg.qr(a)
        q *= np.sign(np.diag(r))
        if rows < cols:
            q = q.T
        return array_ops.constant((self.gain * q.reshape(shape)).astype(dt.np))


_BY_NAME = {"zeros": Zeros, "ones": Ones, "constant": Constant, "orthogonal": Orthogonal,
            "random_uniform": RandomUniform, "uniform": RandomUniform, "random_normal": RandomNormal,
            "normal": RandomNormal,
            "truncated_normal": TruncatedNormal, "variance_scaling": VarianceScaling,
            "glorot_uniform": GlorotUniform, "glorot_normal": GlorotNormal, "he_uniform": HeUniform,
            "he_normal": HeNormal, "lecun_uniform": LecunUniform, "lecun_normal": LecunNormal}


def get(identifier):
    if identifier is None:
        return None
    if isinstance(identifier, Initializer) or callable(identifier) and not isinstance(identifier, type):
        return identifier
    if isinstance(identifier, type) and issubclass(identifier, Initializer):
        return identifier()
    key = identifier if isinstance(identifier, str) else None
    if key is not None:
        cls = _BY_NAME.get(key) or _BY_NAME.get(_snake(key))
        if cls is not None:
            return cls()
    raise ValueError(f"Could not interpret initializer identifier: {identifier}")


def clone(initializer):
    """A new initializer of the same config (Keras 3's sublayers get one each, so an unseeded
    one draws a new seed and their weights differ)."""
    if isinstance(initializer, Initializer):
        return type(initializer).from_config(initializer.get_config())
    return initializer


def _snake(name):
    return camel_to_snake(name)
