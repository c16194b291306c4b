"""``tf.data.Dataset`` basics, in eager mode: from_tensor_slices, from_tensors,
from_generator, range, batch, shuffle, map, filter, take, skip, repeat, enumerate, zip,
concatenate, prefetch / cache (no-ops), iteration and as_numpy_iterator.

A Dataset is a recipe for a Python iterator; each element is a structure
(tuples, dicts, namedtuples: TF's rules, where a Python *list* is one tensor)
of numpy-backed eager tensors, so a Keras ``fit`` or a training loop can
consume it directly. Differences from TF: ``map`` calls its function eagerly
on each element (TF traces it once into a graph); ``shuffle`` uses TF's
buffer algorithm and seeding rules but numpy's generator, so the orders
differ from TF's; iterating needs eager execution (no graph iterators).
"""
import itertools

import numpy as np

from . import context, dtypes, nest
from .convert import convert_to_tensor
from .eager import EagerTensor
from .errors import InvalidArgumentError
from .function import TensorSpec
from .ops.array_ops import constant
from .ops.random_ops import _seeds

AUTOTUNE = -1
INFINITE_CARDINALITY = -1
UNKNOWN_CARDINALITY = -2


def _is_structure(x):
    """tf.data's structure rule: tuples (namedtuples) and dicts nest; a list is one tensor."""
    return isinstance(x, (tuple, dict))


def _to_tensors(x):
    if isinstance(x, dict):
        return type(x)((k, _to_tensors(v)) for k, v in x.items())
    if isinstance(x, tuple):
        items = [_to_tensors(v) for v in x]
        return type(x)(*items) if hasattr(x, "_fields") else tuple(items)
    return convert_to_tensor(x)


def _map(fn, x):
    if isinstance(x, dict):
        return type(x)((k, _map(fn, v)) for k, v in x.items())
    if isinstance(x, tuple):
        items = [_map(fn, v) for v in x]
        return type(x)(*items) if hasattr(x, "_fields") else tuple(items)
    return fn(x)


def _map_pair(fn, spec, value):
    """fn(spec leaf, value leaf) over a spec structure and a value of the same structure."""
    if isinstance(spec, dict):
        return type(spec)((k, _map_pair(fn, v, value[k])) for k, v in spec.items())
    if isinstance(spec, tuple):
        if not isinstance(value, (tuple, list)) or len(value) != len(spec):
            raise TypeError(f"`generator` yielded {value!r}, which does not match the structure {spec!r}")
        items = [_map_pair(fn, s, v) for s, v in zip(spec, value)]
        return type(spec)(*items) if hasattr(spec, "_fields") else tuple(items)
    return fn(spec, value)


def _leaves(x):
    return nest.flatten(x)


def _spec_of(element, batched=None):
    return _map(lambda t: TensorSpec(t.shape if batched is None else [batched] + t.shape.as_list()[1:], t.dtype),
                element)


def _eager(t):
    return EagerTensor(np.array(t, order="C"))   # (ascontiguousarray would make a 0-d array 1-d)


class Dataset:
    """An iterable recipe; transformations return new Datasets."""

    def __init__(self, make_iter, cardinality, spec=None):
        self._make_iter = make_iter
        self._cardinality = cardinality
        self._spec = spec

    # ---------------------------------------------------------------- sources
    @staticmethod
    def from_tensor_slices(tensors, name=None):
        """Slices every component along its first dimension (all must agree)."""
        structure = _to_tensors(tensors)
        arrays = [np.asarray(t) for t in _leaves(structure)]
        if any(a.ndim == 0 for a in arrays):
            raise ValueError("Unbatching a tensor is only supported for rank >= 1")
        n = arrays[0].shape[0]
        if any(a.shape[0] != n for a in arrays):
            raise ValueError(f"Dimensions {arrays[0].shape[0]} and "
                             f"{next(a.shape[0] for a in arrays if a.shape[0] != n)} are not compatible "
                             f"(from_tensor_slices: every component needs the same first dimension)")

        def make():
            for i in range(n):
                yield nest.pack_sequence_as(structure, [_eager(a[i, ...]) for a in arrays])
        spec = _map(lambda t: TensorSpec(t.shape.as_list()[1:], t.dtype), structure)
        return Dataset(make, n, spec)

    @staticmethod
    def from_tensors(tensors, name=None):
        structure = _to_tensors(tensors)
        return Dataset(lambda: iter([structure]), 1, _spec_of(structure))

    @staticmethod
    def range(*args, output_type=dtypes.int64, name=None):
        r = range(*[int(a) for a in args])
        dt = dtypes.as_dtype(output_type)
        return Dataset(lambda: (_eager(np.array(i, dt.np)) for i in r), len(r), TensorSpec([], dt))

    @staticmethod
    def from_generator(generator, output_types=None, output_shapes=None, args=None, output_signature=None,
                       name=None):
        """Elements from calling ``generator(*args)`` afresh for each iteration, converted
        to ``output_signature``'s (or ``output_types``') dtypes and checked against its shapes."""
        if output_signature is None:
            if output_types is None:
                raise TypeError("from_generator needs `output_signature` (or `output_types`).")
            shapes = output_shapes if output_shapes is not None else _map(lambda _: None, output_types)
            output_signature = _map_pair(lambda dt, sh: TensorSpec(sh, dt), output_types, shapes)

        def convert(spec, value):
            t = convert_to_tensor(value, dtype=spec.dtype)
            if not spec.shape.is_compatible_with(t.shape):
                raise InvalidArgumentError(f"`generator` yielded an element of shape {t.shape} where an element "
                                           f"of shape {spec.shape} was expected.")
            return t

        def make():
            for value in generator(*(args or ())):
                yield _map_pair(convert, output_signature, value)
        return Dataset(make, UNKNOWN_CARDINALITY, output_signature)

    @staticmethod
    def zip(*datasets, name=None):
        if len(datasets) == 1 and isinstance(datasets[0], (tuple, dict)):
            datasets = datasets[0]
        parts = list(datasets.values()) if isinstance(datasets, dict) else list(datasets)
        cards = [d._cardinality for d in parts]
        finite = [c for c in cards if c >= 0]
        card = min(finite) if finite else (UNKNOWN_CARDINALITY if UNKNOWN_CARDINALITY in cards else
                                           INFINITE_CARDINALITY)

        def make():
            for items in zip(*parts):
                yield type(datasets)(zip(datasets.keys(), items)) if isinstance(datasets, dict) else tuple(items)
        return Dataset(make, card)

    # ---------------------------------------------------------------- iteration
    def __iter__(self):
        if not context.executing_eagerly():
            raise RuntimeError("`tf.data.Dataset` only supports Python-style iteration in eager mode or within "
                               "tf.function.")
        return iter(self._make_iter())

    def as_numpy_iterator(self):
        for element in self:
            yield _map(lambda t: t.numpy(), element)

    def cardinality(self):
        return constant(self._cardinality, dtype=dtypes.int64)

    def __len__(self):
        if self._cardinality == INFINITE_CARDINALITY:
            raise TypeError("The dataset is infinite.")
        if self._cardinality == UNKNOWN_CARDINALITY:
            raise TypeError("The dataset length is unknown.")
        return self._cardinality

    @property
    def element_spec(self):
        if self._spec is None:
            self._spec = _spec_of(next(iter(self)))
        return self._spec

    def __repr__(self):
        return f"<Dataset element_spec={self.element_spec}>"

    # ---------------------------------------------------------------- transformations
    def batch(self, batch_size, drop_remainder=False, num_parallel_calls=None, deterministic=None, name=None):
        size = int(batch_size)
        if size <= 0:
            raise ValueError(f"batch_size must be positive, got {size}")
        parent = self

        def make():
            it = iter(parent._make_iter())
            while True:
                chunk = list(itertools.islice(it, size))
                if not chunk or (drop_remainder and len(chunk) < size):
                    return
                leaves = [_leaves(e) for e in chunk]
                stacked = [_eager(np.stack([np.asarray(lv[i]) for lv in leaves])) for i in range(len(leaves[0]))]
                yield nest.pack_sequence_as(chunk[0], stacked)
        c = self._cardinality
        card = c if c < 0 else (c // size if drop_remainder else -(-c // size))
        spec = None
        if self._spec is not None:
            spec = _map(lambda s: TensorSpec(None if s.shape.rank is None else
                                             [size if drop_remainder else None] + s.shape.as_list(), s.dtype),
                        self._spec)
        return Dataset(make, card, spec)

    def unbatch(self, name=None):
        parent = self

        def make():
            for e in parent._make_iter():
                leaves = [np.asarray(t) for t in _leaves(e)]
                for i in range(leaves[0].shape[0]):
                    yield nest.pack_sequence_as(e, [_eager(a[i, ...]) for a in leaves])
        return Dataset(make, UNKNOWN_CARDINALITY)

    def map(self, map_func, num_parallel_calls=None, deterministic=None, name=None):
        """Calls ``map_func`` on each element (a tuple element is passed as
        separate arguments, as TF does); the results become eager tensors."""
        parent = self

        def make():
            for e in parent._make_iter():
                out = map_func(*e) if isinstance(e, tuple) and not hasattr(e, "_fields") else map_func(e)
                yield _to_tensors(tuple(out) if isinstance(out, list) else out)   # TF: a returned list is a tuple
        return Dataset(make, self._cardinality)

    def filter(self, predicate, name=None):
        parent = self

        def make():
            for e in parent._make_iter():
                keep = predicate(*e) if isinstance(e, tuple) and not hasattr(e, "_fields") else predicate(e)
                if bool(np.asarray(keep)):
                    yield e
        return Dataset(make, UNKNOWN_CARDINALITY, self._spec)

    def take(self, count, name=None):
        count = int(count)
        parent = self
        c = self._cardinality
        card = c if count < 0 else (count if c == INFINITE_CARDINALITY else (min(c, count) if c >= 0 else c))
        return Dataset(lambda: itertools.islice(parent._make_iter(), None if count < 0 else count), card,
                       self._spec)

    def skip(self, count, name=None):
        count = int(count)
        parent = self
        c = self._cardinality
        card = c if c < 0 else (0 if count < 0 else max(c - count, 0))
        return Dataset(lambda: iter(()) if count < 0 else itertools.islice(parent._make_iter(), count, None),
                       card, self._spec)

    def repeat(self, count=None, name=None):
        count = -1 if count is None else int(count)
        parent = self

        def make():
            n = 0
            while count < 0 or n < count:
                empty = True
                for e in parent._make_iter():
                    empty = False
                    yield e
                if empty:
                    return
                n += 1
        c = self._cardinality
        card = (INFINITE_CARDINALITY if c != 0 else 0) if count < 0 else (c * count if c >= 0 else c)
        return Dataset(make, card, self._spec)

    def shuffle(self, buffer_size, seed=None, reshuffle_each_iteration=True, name=None):
        """TF's buffered shuffle: keep ``buffer_size`` elements, yield a random
        one and refill its place from the input. Seeds follow tf.random's rules."""
        size = int(buffer_size)
        if size <= 0:
            raise ValueError(f"buffer_size must be greater than zero, got {size}")
        seeds = _seeds(seed)
        entropy = np.random.SeedSequence().entropy if seeds is None else list(seeds)
        epochs = itertools.count()
        parent = self

        def make():
            epoch = next(epochs) if reshuffle_each_iteration else 0
            rng = np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=(epoch,)))
            buf = []
            for e in parent._make_iter():
                buf.append(e)
                if len(buf) == size:
                    i = int(rng.integers(len(buf)))
                    buf[i], buf[-1] = buf[-1], buf[i]
                    yield buf.pop()
            while buf:
                i = int(rng.integers(len(buf)))
                buf[i], buf[-1] = buf[-1], buf[i]
                yield buf.pop()
        return Dataset(make, self._cardinality, self._spec)

    def enumerate(self, start=0, name=None):
        parent = self

        def make():
            for i, e in enumerate(parent._make_iter(), start):
                yield (_eager(np.array(i, np.int64)), e)
        return Dataset(make, self._cardinality)

    def concatenate(self, dataset, name=None):
        parent = self
        a, b = self._cardinality, dataset._cardinality
        card = a + b if a >= 0 and b >= 0 else (INFINITE_CARDINALITY if INFINITE_CARDINALITY in (a, b)
                                                else UNKNOWN_CARDINALITY)
        return Dataset(lambda: itertools.chain(parent._make_iter(), dataset._make_iter()), card, self._spec)

    def prefetch(self, buffer_size, name=None):
        return self

    def cache(self, filename="", name=None):
        return self

    def apply(self, transformation_func):
        return transformation_func(self)


def _module(make):
    experimental = make("data.experimental", AUTOTUNE=AUTOTUNE, INFINITE_CARDINALITY=INFINITE_CARDINALITY,
                        UNKNOWN_CARDINALITY=UNKNOWN_CARDINALITY, cardinality=lambda ds: ds.cardinality())
    return make("data", Dataset=Dataset, AUTOTUNE=AUTOTUNE, INFINITE_CARDINALITY=INFINITE_CARDINALITY,
                UNKNOWN_CARDINALITY=UNKNOWN_CARDINALITY, experimental=experimental)
