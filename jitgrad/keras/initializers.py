"""``tf.keras.initializers``: Keras 3's initializers. Random ones draw with
``tf.random`` ops, so ``tf.random.set_seed`` (and ``seed=``) make them repeat."""
import math

import numpy as np

from .. import dtypes
from ..ops import array_ops, random_ops
from ..module import camel_to_snake


class Initializer:
    def __call__(self, shape, dtype=None):
        raise NotImplementedError

    def get_config(self):
        return {}


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


class RandomUniform(Initializer):
    def __init__(self, minval=-0.05, maxval=0.05, seed=None):
        self.minval, self.maxval, self.seed = minval, maxval, seed

    def __call__(self, shape, dtype=None):
        return random_ops.uniform(shape, self.minval, self.maxval, dtype or dtypes.float32, seed=self.seed)


class RandomNormal(Initializer):
    def __init__(self, mean=0.0, stddev=0.05, seed=None):
        self.mean, self.stddev, self.seed = mean, stddev, seed

    def __call__(self, shape, dtype=None):
        return random_ops.normal(shape, self.mean, self.stddev, dtype or dtypes.float32, seed=self.seed)


class TruncatedNormal(RandomNormal):
    def __call__(self, shape, dtype=None):
        return random_ops.truncated_normal(shape, self.mean, self.stddev, dtype or dtypes.float32, seed=self.seed)


def _fans(shape, input_axes=None, output_axes=None):
    """Keras's compute_fans: (fan_in, fan_out); with the axes given (EinsumDense gives its
    kernel's), the products of those axes' sizes."""
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


class VarianceScaling(Initializer):
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
        self.scale, self.mode, self.distribution, self.seed = scale, mode, distribution, seed
        self.input_axes, self.output_axes = input_axes, output_axes

    def __call__(self, shape, dtype=None):
        dtype = dtype or dtypes.float32
        fan_in, fan_out = _fans(shape, self.input_axes, self.output_axes)
        n = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2.0}[self.mode]
        scale = self.scale / max(1.0, n)
        if self.distribution == "truncated_normal":
            return random_ops.truncated_normal(shape, 0.0, math.sqrt(scale) / 0.87962566103423978, dtype,
                                               seed=self.seed)
        if self.distribution == "untruncated_normal":
            return random_ops.normal(shape, 0.0, math.sqrt(scale), dtype, seed=self.seed)
        limit = math.sqrt(3.0 * scale)
        return random_ops.uniform(shape, -limit, limit, dtype, seed=self.seed)


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


class Orthogonal(Initializer):
    """Keras's Orthogonal: the Q of a QR factorisation of a standard normal draw (signs fixed by
    R's diagonal), times ``gain``. The draw is a tf.random op (seeded like the others); the
    QR runs in numpy, so this initializer runs eagerly (as weights are made)."""

    def __init__(self, gain=1.0, seed=None):
        self.gain, self.seed = gain, seed

    def __call__(self, shape, dtype=None):
        dt = dtypes.as_dtype(dtype or dtypes.float32)
        if len(shape) < 2:
            raise ValueError(f"The tensor to initialize must be at least two-dimensional. Received: "
                             f"shape={shape} of rank {len(shape)}.")
        rows, cols = int(np.prod(shape[:-1])), shape[-1]
        flat = (max(rows, cols), min(rows, cols))
        a = np.asarray(random_ops.normal(flat, 0.0, 1.0, dt, seed=self.seed), np.float64)
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


def _snake(name):
    return camel_to_snake(name)
