"""``tf.keras.utils``: to_categorical, normalize, set_random_seed (and Progbar, from callbacks)."""
import random

import numpy as np

from ..ops import random_ops
from .seed_generator import reset_global_seed_generator
from .callbacks import Progbar  # noqa: F401  (keras.utils.Progbar)


def to_categorical(x, num_classes=None):
    """Keras 3's, for numpy / Python input: float64 one-hot rows, a trailing axis of 1 dropped."""
    x = np.array(x, dtype="int64")
    shape = x.shape
    if shape and shape[-1] == 1 and len(shape) > 1:
        shape = shape[:-1]
    x = x.reshape(-1)
    if not num_classes:
        num_classes = np.max(x) + 1
    out = np.zeros((x.shape[0], num_classes))
    out[np.arange(x.shape[0]), x] = 1
    return out.reshape(shape + (num_classes,))


def normalize(x, axis=-1, order=2):
    """Keras 3's for numpy input: x / its ``order``-norm along ``axis`` (a zero norm taken as 1)."""
    x = np.asarray(x)
    norm = np.atleast_1d(np.linalg.norm(x, order, axis))
    norm[norm == 0] = 1
    return x / np.expand_dims(norm, axis or -1)


def set_random_seed(seed):
    """Seeds Python's ``random``, numpy's global generator and jitgrad's ``tf.random``."""
    if not isinstance(seed, int):
        raise ValueError(f"Expected `seed` argument to be an integer. Received: seed={seed} (of type {type(seed)})")
    reset_global_seed_generator()
    random.seed(seed)
    np.random.seed(seed)
    random_ops.set_seed(seed)
