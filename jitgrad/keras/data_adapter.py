"""What ``fit`` / ``evaluate`` / ``predict`` iterate: batches of numpy arrays
(sliced here, shuffled per epoch with numpy's global generator) or the elements
of a ``tf.data.Dataset`` (already batched by the user, as Keras expects)."""
import math

import numpy as np

from .. import nest
from ..data import Dataset


def as_array(x):
    if x is None:
        return None
    if isinstance(x, (list, tuple, dict)):
        return nest.map_structure(as_array, x)
    a = np.asarray(x)
    return a.astype(np.float32) if a.dtype == np.float64 else a


def take(x, idx):
    return None if x is None else nest.map_structure(lambda a: a[idx], x)


def num_samples(x):
    return len(nest.flatten(x)[0])


class ArrayBatches:
    def __init__(self, x, y, batch_size, shuffle=False):
        self.x, self.y = as_array(x), as_array(y)
        self.n = num_samples(self.x)
        self.batch_size = batch_size or 32
        self.shuffle = shuffle
        self.steps = math.ceil(self.n / self.batch_size)

    def first(self):
        """The first sample (a batch of one): what the model is built on."""
        return take(self.x, slice(0, 1)), take(self.y, slice(0, 1))

    def split(self, validation_split):
        """Keras holds out the last samples, before shuffling: -> (train batches, validation (x, y))."""
        split = int(self.n * (1.0 - validation_split))
        held = (take(self.x, slice(split, None)), take(self.y, slice(split, None)))
        return ArrayBatches(take(self.x, slice(0, split)), take(self.y, slice(0, split)), self.batch_size,
                            self.shuffle), held

    def epoch(self):
        order = np.random.permutation(self.n) if self.shuffle else None
        for step in range(self.steps):
            sl = slice(step * self.batch_size, min(self.n, (step + 1) * self.batch_size))
            idx = order[sl] if order is not None else sl
            yield take(self.x, idx), take(self.y, idx)


class DatasetBatches:
    """A Dataset of ``x`` or ``(x,)`` or ``(x, y)`` batches; steps known when its cardinality is."""

    def __init__(self, dataset):
        self.dataset = dataset
        n = dataset._cardinality
        self.steps = n if n >= 0 else None

    def first(self):
        x, y = _unpack(next(iter(self.dataset)))
        return take(_numpy(x), slice(0, 1)), take(_numpy(y), slice(0, 1))

    def epoch(self):
        for element in self.dataset:
            yield _unpack(element)


def _numpy(x):
    return None if x is None else nest.map_structure(np.asarray, x)


def _unpack(element):
    if isinstance(element, tuple):
        if len(element) == 1:
            return element[0], None
        if len(element) == 2:
            return element
        if len(element) == 3:
            raise NotImplementedError("jitgrad's Keras has no sample weights ((x, y, sample_weight) elements).")
        raise ValueError(f"Data is expected to be in format `x`, `(x,)`, `(x, y)`, or `(x, y, sample_weight)`, "
                         f"found a tuple of {len(element)} elements.")
    return element, None


def batches(x, y, batch_size, shuffle=False):
    if isinstance(x, Dataset):
        if y is not None:     # Keras 3's message; a batch_size is ignored, as in Keras
            raise ValueError("When providing `x` as a tf.data.Dataset, `y` should not be passed. Instead, the "
                             "targets should be included as part of the tf.data.Dataset.")
        return DatasetBatches(x)
    return ArrayBatches(x, y, batch_size, shuffle)
