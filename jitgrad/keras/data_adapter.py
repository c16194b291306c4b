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
    def __init__(self, x, y, batch_size, shuffle=False, sample_weight=None):
        self.x, self.y, self.sample_weight = as_array(x), as_array(y), as_array(sample_weight)
        self.n = num_samples(self.x)
        for name, part in (("y", self.y), ("sample_weight", self.sample_weight)):
            if part is not None and num_samples(part) != self.n:
                raise ValueError(f"Data cardinality is ambiguous: x sizes: {self.n}, {name} sizes: "
                                 f"{num_samples(part)}. Make sure all arrays contain the same number of samples.")
        self.batch_size = batch_size or 32
        self.shuffle = shuffle
        self.steps = math.ceil(self.n / self.batch_size)

    def first(self):
        """The first sample (a batch of one): what the model is built on."""
        return take(self.x, slice(0, 1)), take(self.y, slice(0, 1))

    def split(self, validation_split):
        """Keras holds out the last samples, before shuffling: -> (train batches, validation
        (x, y, sample_weight))."""
        split = int(self.n * (1.0 - validation_split))
        kept, held = slice(0, split), slice(split, None)
        return (ArrayBatches(take(self.x, kept), take(self.y, kept), self.batch_size, self.shuffle,
                             take(self.sample_weight, kept)),
                (take(self.x, held), take(self.y, held), take(self.sample_weight, held)))

    def epoch(self):
        order = np.random.permutation(self.n) if self.shuffle else None
        for step in range(self.steps):
            sl = slice(step * self.batch_size, min(self.n, (step + 1) * self.batch_size))
            idx = order[sl] if order is not None else sl
            yield take(self.x, idx), take(self.y, idx), take(self.sample_weight, idx)


class DatasetBatches:
    """A Dataset of ``x``, ``(x,)``, ``(x, y)`` or ``(x, y, sample_weight)`` batches; steps known
    when its cardinality is."""

    def __init__(self, dataset):
        self.dataset = dataset
        n = dataset._cardinality
        self.steps = n if n >= 0 else None

    def first(self):
        x, y, _ = _unpack(next(iter(self.dataset)))
        return take(_numpy(x), slice(0, 1)), take(_numpy(y), slice(0, 1))

    def epoch(self):
        for element in self.dataset:
            yield _unpack(element)


def _numpy(x):
    return None if x is None else nest.map_structure(np.asarray, x)


def _unpack(element):
    if isinstance(element, tuple):
        if 1 <= len(element) <= 3:
            return tuple(element) + (None,) * (3 - len(element))
        raise ValueError(f"Data is expected to be in format `x`, `(x,)`, `(x, y)`, or `(x, y, sample_weight)`, "
                         f"found a tuple of {len(element)} elements.")
    return element, None, None


def class_weight_to_sample_weights(y, class_weight):
    """Keras 3's: each sample weighted by its class's weight (1 for a class not named); the class
    of a one-hot row is its argmax, of a (n, 1) label its value, rounded."""
    labels = np.asarray(y)
    if labels.ndim > 1:
        labels = np.argmax(labels, axis=-1) if labels.shape[-1] != 1 else np.squeeze(labels, axis=-1)
    labels = np.round(labels).astype("int32")
    return np.array([class_weight.get(int(c), 1.0) for c in labels], dtype=np.float32)


def batches(x, y, batch_size, shuffle=False, sample_weight=None, class_weight=None):
    if isinstance(x, Dataset):
        if y is not None:     # Keras 3's message; a batch_size is ignored, as in Keras
            raise ValueError("When providing `x` as a tf.data.Dataset, `y` should not be passed. Instead, the "
                             "targets should be included as part of the tf.data.Dataset.")
        if sample_weight is not None:
            raise ValueError("`sample_weight` argument is not supported when using a dataset as input.")
        if class_weight is not None:
            raise NotImplementedError("jitgrad's fit takes class_weight with array data only.")
        return DatasetBatches(x)
    if class_weight is not None:
        if sample_weight is not None:
            raise ValueError("You cannot `class_weight` and `sample_weight` at the same time.")
        if isinstance(y, (list, tuple, dict)):
            raise ValueError("`class_weight` is only supported for Models with a single output.")
        sample_weight = class_weight_to_sample_weights(y, class_weight)
    return ArrayBatches(x, y, batch_size, shuffle, sample_weight)
