"""``tf.data.Dataset`` basics, in eager mode: from_tensor_slices, from_tensors,
from_generator, range, random, batch, shuffle, sample_from_datasets, map, filter, take,
skip, repeat, enumerate, zip, concatenate, prefetch / cache (no-ops), iteration and
as_numpy_iterator. The other transformations are in data_transforms.py.

A Dataset is a recipe for a Python iterator; each element is a structure
(tuples, dicts, namedtuples: TF's rules, where a Python *list* is one tensor)
of numpy-backed eager tensors, so a Keras ``fit`` or a training loop can
consume it directly. Differences from TF: ``map`` calls its function eagerly
on each element (TF traces it once into a graph), so its element_spec is read
off the first element (a dimension TF's trace leaves unknown is known here);
``shuffle``, ``random`` and ``sample_from_datasets`` use TF's algorithms and
seeding rules but numpy's generator, so their streams differ from TF's;
iterating needs eager execution (no graph iterators).
"""
import itertools

import numpy as np

from . import context, dtypes, nest
from .convert import convert_to_tensor
from .data_structure import (INFINITE_CARDINALITY, UNKNOWN_CARDINALITY, DatasetSpec, batched_cardinality, batches_of,
                             call_with_element, eager, leaves, map_element, map_up_to, spec_of,
                             to_tensors)
from .data_transforms import Options, Transformations, mixed_cardinality, mixed_spec
from .errors import InvalidArgumentError
from .function import TensorSpec
from .ops.array_ops import constant
from .ops.random_ops import _seeds

AUTOTUNE = -1


def _epoch_rngs(seed, new_each_iteration):
    """-> a function giving each iteration's numpy generator, seeded by tf.random's rules
    (op seed, global seed): the same stream every iteration, or a new (still repeatable) one."""
    seeds = _seeds(seed)
    entropy = np.random.SeedSequence().entropy if seeds is None else list(seeds)
    epochs = itertools.count()

    def next_rng():
        epoch = next(epochs) if new_each_iteration else 0
        return np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=(epoch,)))
    return next_rng


def _weights(weights, n):
    """sample_from_datasets' weights: a list / tensor of ``n``, or a dataset of such (one per draw)."""
    if weights is None:
        return itertools.repeat(np.full(n, 1.0 / n))
    if isinstance(weights, Dataset):
        return (np.asarray(w, np.float64) for w in weights._make_iter())
    w = np.asarray(weights, np.float64)
    if w.shape != (n,):
        raise ValueError(f"Invalid `weights`. The shape of `weights` should be compatible with `[len(datasets)]` "
                         f"but is {list(w.shape)}.")
    return itertools.repeat(w)


class Dataset(Transformations):
    """An iterable recipe; transformations return new Datasets.

    ``spec`` is the element spec when known; a function when it is known only once
    something is built (the first inner dataset of ``flat_map``); None when jitgrad
    guesses it from the first element (``map``: TF would trace the function instead),
    or with ``guess``, a function giving a better guess (``batch`` after ``map``: TF's
    batch dimension, the rest guessed)."""

    def __init__(self, make_iter, cardinality, spec=None, guess=None):
        self._make_iter = make_iter
        self._cardinality = cardinality
        self._spec = spec
        self._guess = guess
        self._guessed_spec = None

    # ---------------------------------------------------------------- sources
    @staticmethod
    def from_tensor_slices(tensors, name=None):
        """Slices every component along its first dimension (all must agree)."""
        structure = to_tensors(tensors)
        arrays = [np.asarray(t) for t in leaves(structure)]
        if any(a.ndim == 0 for a in arrays):
            raise ValueError("Unbatching a tensor is only supported for rank >= 1")
        n = arrays[0].shape[0]
        if any(a.shape[0] != n for a in arrays):
            raise ValueError(f"Dimensions {arrays[0].shape[0]} and "
                             f"{next(a.shape[0] for a in arrays if a.shape[0] != n)} are not compatible "
                             f"(from_tensor_slices: every component needs the same first dimension)")

        def make():
            for i in range(n):
                yield nest.pack_sequence_as(structure, [eager(a[i, ...]) for a in arrays])
        spec = map_element(lambda t: TensorSpec(t.shape.as_list()[1:], t.dtype), structure)
        return Dataset(make, n, spec)

    @staticmethod
    def from_tensors(tensors, name=None):
        structure = to_tensors(tensors)
        return Dataset(lambda: iter([structure]), 1, spec_of(structure))

    @staticmethod
    def range(*args, output_type=dtypes.int64, name=None):
        r = range(*[int(a) for a in args])
        dt = dtypes.as_dtype(output_type)
        return Dataset(lambda: (eager(np.array(i, dt.np)) for i in r), len(r), TensorSpec([], dt))

    @staticmethod
    def from_generator(generator, output_types=None, output_shapes=None, args=None, output_signature=None,
                       name=None):
        """Elements from calling ``generator(*args)`` afresh for each iteration, converted
        to ``output_signature``'s (or ``output_types``') dtypes and checked against its shapes."""
        if output_signature is None:
            if output_types is None:
                raise TypeError("from_generator needs `output_signature` (or `output_types`).")
            shapes = output_shapes if output_shapes is not None else map_element(lambda _: None, output_types)
            output_signature = map_up_to(lambda dt, sh: TensorSpec(sh, dt), output_types, shapes, "`output_shapes` is")

        def convert(spec, value):
            t = convert_to_tensor(value, dtype=spec.dtype)
            if not spec.shape.is_compatible_with(t.shape):
                raise InvalidArgumentError(f"`generator` yielded an element of shape {t.shape} where an element "
                                           f"of shape {spec.shape} was expected.")
            return t

        def make():
            for value in generator(*(args or ())):
                yield map_up_to(convert, output_signature, value, "`generator` yielded")
        return Dataset(make, UNKNOWN_CARDINALITY, output_signature)

    @staticmethod
    def random(seed=None, rerandomize_each_iteration=None, name=None):
        """An endless stream of int64s uniform in [0, 2**32), as TF's; numpy draws them, so the
        values differ from TF's for the same seed (the seeding rules are tf.random's)."""
        next_rng = _epoch_rngs(seed, bool(rerandomize_each_iteration))

        def make():
            rng = next_rng()
            while True:
                yield eager(rng.integers(0, 2 ** 32, dtype=np.int64))
        return Dataset(make, INFINITE_CARDINALITY, TensorSpec([], dtypes.int64))

    @staticmethod
    def sample_from_datasets(datasets, weights=None, seed=None, stop_on_empty_dataset=False,
                             rerandomize_each_iteration=None):
        """Each element from ``datasets[i]``, ``i`` drawn with probability ``weights[i]`` (TF's
        draws, by numpy); a drawn dataset that has run out ends the result
        (``stop_on_empty_dataset``) or is drawn again, until every one has run out."""
        datasets = list(datasets)
        if not datasets:
            raise ValueError("Invalid `datasets`. `datasets` should not be empty.")
        spec = mixed_spec(datasets)
        n = len(datasets)
        _weights(weights, n)   # (its errors now, as TF's)
        next_rng = _epoch_rngs(seed, bool(rerandomize_each_iteration))

        def make():
            rng, its, done = next_rng(), [iter(d._make_iter()) for d in datasets], [False] * n
            for w in _weights(weights, n):
                if all(done[i] or w[i] <= 0 for i in range(n)):
                    return
                i = int(rng.choice(n, p=w / w.sum()))
                e = None if done[i] else next(its[i], None)
                if e is not None:
                    yield e
                    continue
                done[i] = True
                if stop_on_empty_dataset:
                    return
        return datasets[0]._derive(make, mixed_cardinality(datasets), spec, others=datasets[1:])

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

        def spec():   # known when every part's is (else guessed from the first element)
            specs = [d.element_spec for d in parts]
            return type(datasets)(zip(datasets.keys(), specs)) if isinstance(datasets, dict) else tuple(specs)
        exact = all(d._spec is not None for d in parts)
        return Dataset(make, card, spec if exact else None, guess=None if exact else spec)

    # ---------------------------------------------------------------- iteration
    def __iter__(self):
        if not context.executing_eagerly():
            raise RuntimeError("`tf.data.Dataset` only supports Python-style iteration in eager mode or within "
                               "tf.function.")
        return iter(self._make_iter())

    def as_numpy_iterator(self):
        # (TF raises on the call, from the spec; here on the first element, so that a spec
        # jitgrad would guess is not built twice)
        for element in self:
            if any(isinstance(t, Dataset) for t in leaves(element)):
                raise TypeError("`tf.data.Dataset.as_numpy_iterator()` is not supported for datasets that "
                                "produce values of type <class 'Dataset'>")
            yield map_element(lambda t: t.numpy(), element)

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
        if callable(self._spec):
            self._spec = self._spec()
        if self._spec is not None:
            return self._spec
        if self._guessed_spec is None:
            self._guessed_spec = self._guess() if self._guess is not None else spec_of(next(iter(self)))
        return self._guessed_spec

    def __repr__(self):
        return f"<Dataset element_spec={self.element_spec}>"

    # ---------------------------------------------------------------- transformations
    def batch(self, batch_size, drop_remainder=False, num_parallel_calls=None, deterministic=None, name=None):
        size = int(batch_size)
        if size <= 0:
            raise ValueError(f"batch_size must be positive, got {size}")
        parent = self

        def make():
            for chunk in batches_of(parent._make_iter, size, drop_remainder):
                parts = [leaves(e) for e in chunk]
                stacked = [eager(np.stack([np.asarray(p[i]) for p in parts])) for i in range(len(parts[0]))]
                yield nest.pack_sequence_as(chunk[0], stacked)
        card = batched_cardinality(self._cardinality, size, drop_remainder)
        def spec():
            return map_element(lambda s: TensorSpec(None if s.shape.rank is None else
                                                    [size if drop_remainder else None] + s.shape.as_list(), s.dtype),
                               parent.element_spec)
        return self._derive(make, card, *self._exact_or_guess(spec))

    def unbatch(self, name=None):
        parent = self

        def make():
            for e in parent._make_iter():
                arrays = [np.asarray(t) for t in leaves(e)]
                for i in range(arrays[0].shape[0]):
                    yield nest.pack_sequence_as(e, [eager(a[i, ...]) for a in arrays])
        def spec():
            return map_element(lambda s: TensorSpec(None if s.shape.rank is None else s.shape.as_list()[1:], s.dtype),
                               parent.element_spec)
        return self._derive(make, UNKNOWN_CARDINALITY, *self._exact_or_guess(spec))

    def map(self, map_func, num_parallel_calls=None, deterministic=None, name=None):
        """Calls ``map_func`` on each element (a tuple element is passed as
        separate arguments, as TF does); the results become eager tensors."""
        parent = self

        def make():
            for e in parent._make_iter():
                out = call_with_element(map_func, e)
                yield to_tensors(tuple(out) if isinstance(out, list) else out)   # TF: a returned list is a tuple
        return self._derive(make, self._cardinality)

    def filter(self, predicate, name=None):
        parent = self

        def make():
            for e in parent._make_iter():
                keep = call_with_element(predicate, e)
                if bool(np.asarray(keep)):
                    yield e
        return self._derive(make, UNKNOWN_CARDINALITY, *self._passed_spec())

    def take(self, count, name=None):
        count = int(count)
        parent = self
        c = self._cardinality
        card = c if count < 0 else (count if c == INFINITE_CARDINALITY else (min(c, count) if c >= 0 else c))
        return self._derive(lambda: itertools.islice(parent._make_iter(), None if count < 0 else count), card,
                            *self._passed_spec())

    def skip(self, count, name=None):
        count = int(count)
        parent = self
        c = self._cardinality
        card = c if c < 0 else (0 if count < 0 else max(c - count, 0))
        return self._derive(lambda: iter(()) if count < 0 else itertools.islice(parent._make_iter(), count, None),
                            card, *self._passed_spec())

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
        return self._derive(make, card, *self._passed_spec())

    def shuffle(self, buffer_size, seed=None, reshuffle_each_iteration=True, name=None):
        """TF's buffered shuffle: keep ``buffer_size`` elements, yield a random
        one and refill its place from the input. Seeds follow tf.random's rules."""
        size = int(buffer_size)
        if size <= 0:
            raise ValueError(f"buffer_size must be greater than zero, got {size}")
        next_rng = _epoch_rngs(seed, reshuffle_each_iteration)
        parent = self

        def make():
            rng = next_rng()
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
        return self._derive(make, self._cardinality, *self._passed_spec())

    def enumerate(self, start=0, name=None):
        parent = self

        def make():
            for i, e in enumerate(parent._make_iter(), start):
                yield (eager(np.array(i, np.int64)), e)
        return self._derive(make, self._cardinality,
                            *self._exact_or_guess(lambda: (TensorSpec([], dtypes.int64), parent.element_spec)))

    def concatenate(self, dataset, name=None):
        parent = self
        a, b = self._cardinality, dataset._cardinality
        card = a + b if a >= 0 and b >= 0 else (INFINITE_CARDINALITY if INFINITE_CARDINALITY in (a, b)
                                                else UNKNOWN_CARDINALITY)
        return self._derive(lambda: itertools.chain(parent._make_iter(), dataset._make_iter()), card,
                            *self._passed_spec(), others=(dataset,))

    def prefetch(self, buffer_size, name=None):
        return self

    def cache(self, filename="", name=None):
        return self

    def apply(self, transformation_func):
        return transformation_func(self)


def _module(make):
    experimental = make("data.experimental", AUTOTUNE=AUTOTUNE, INFINITE_CARDINALITY=INFINITE_CARDINALITY,
                        UNKNOWN_CARDINALITY=UNKNOWN_CARDINALITY, cardinality=lambda ds: ds.cardinality(),
                        sample_from_datasets=Dataset.sample_from_datasets,
                        choose_from_datasets=Dataset.choose_from_datasets)
    return make("data", Dataset=Dataset, DatasetSpec=DatasetSpec, Options=Options, AUTOTUNE=AUTOTUNE,
                INFINITE_CARDINALITY=INFINITE_CARDINALITY, UNKNOWN_CARDINALITY=UNKNOWN_CARDINALITY,
                experimental=experimental)
