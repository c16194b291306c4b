"""The ``tf.data.Dataset`` transformations real input pipelines add to the basics in
jitgrad/data.py: padded_batch, rebatch, bucket_by_sequence_length, flat_map, interleave,
window, reduce, scan, shard, take_while, unique, get_single_element, counter,
choose_from_datasets, options / with_options (``tf.data.Options``, recorded only:
jitgrad runs no pipeline optimizer).

They are a base class of ``Dataset`` (this module cannot import data.py, which imports
it), so each builds its result with ``type(self)`` / ``cls``.  Element values, order,
specs, cardinalities and errors follow TF 2.21; where TF traces a user function to
learn a spec, jitgrad reads it off the first element built (see data.py).
"""
import bisect
import itertools
import os

import numpy as np

from . import dtypes, nest
from .convert import convert_to_tensor
from .data_structure import (INFINITE_CARDINALITY, UNKNOWN_CARDINALITY, DatasetSpec, batched_cardinality, batches_of,
                             call_with_element, eager, leaves, map_element, map_up_to,
                             most_specific_compatible, to_tensors, unknown_dims)
from .errors import DataLossError, InternalError, InvalidArgumentError
from .function import TensorSpec
from .shapes import TensorShape


# ---------------------------------------------------------------- tf.data.Options
class _OptionGroup:
    """A group of settable options; like TF, a name it does not know is an AttributeError."""
    _FIELDS = ()

    def __init__(self):
        for f in self._FIELDS:
            object.__setattr__(self, f, None)

    def __setattr__(self, key, value):
        if key not in self._FIELDS:
            raise AttributeError(f"Cannot set the property {key} on {type(self).__name__}.")
        object.__setattr__(self, key, value)

    def __eq__(self, other):
        return type(other) is type(self) and all(getattr(self, f) == getattr(other, f) for f in self._FIELDS)

    __hash__ = None

    def _merged(self, other):
        """``other``'s set (not None) fields over this group's: TF's Options.merge."""
        out = type(self)()
        for f in self._FIELDS:
            mine, theirs = getattr(self, f), getattr(other, f)
            if isinstance(mine, _OptionGroup):
                object.__setattr__(out, f, mine._merged(theirs))
            else:
                object.__setattr__(out, f, mine if theirs is None else theirs)
        return out


def _group(name, fields):
    return type(name, (_OptionGroup,), {"_FIELDS": tuple(fields)})


AutotuneOptions = _group("AutotuneOptions", ["autotune_algorithm", "cpu_budget", "enabled", "initial_parallelism",
                                             "min_parallelism", "ram_budget"])
DistributeOptions = _group("DistributeOptions", ["auto_shard_policy", "num_devices"])
OptimizationOptions = _group("OptimizationOptions", [
    "apply_default_optimizations", "filter_fusion", "filter_parallelization", "inject_prefetch",
    "map_and_batch_fusion", "map_and_filter_fusion", "map_fusion", "map_parallelization", "noop_elimination",
    "parallel_batch", "seq_interleave_prefetch", "shuffle_and_repeat_fusion"])
ServiceOptions = _group("ServiceOptions", ["pinned"])
ThreadingOptions = _group("ThreadingOptions", ["max_intra_op_parallelism", "private_threadpool_size"])
_SUBGROUPS = {"autotune": AutotuneOptions, "experimental_distribute": DistributeOptions,
              "experimental_optimization": OptimizationOptions, "experimental_service": ServiceOptions,
              "threading": ThreadingOptions}
# TF's older names for two options: the same value under both
_ALIASES = {"experimental_deterministic": "deterministic", "experimental_threading": "threading"}


class Options(_OptionGroup):
    """``tf.data.Options``: every option unset (None) until assigned; sub-groups as TF's."""
    _FIELDS = ("dataset_name", "deterministic", "experimental_external_state_policy", "experimental_slack",
               "experimental_symbolic_checkpoint", "experimental_warm_start", "framework_type") + tuple(_SUBGROUPS)

    def __init__(self):
        super().__init__()
        for f, group in _SUBGROUPS.items():
            object.__setattr__(self, f, group())

    def __getattr__(self, key):   # (only for names not found normally: the aliases)
        if key in _ALIASES:
            return getattr(self, _ALIASES[key])
        raise AttributeError(f"'Options' object has no attribute '{key}'")

    def __setattr__(self, key, value):
        super().__setattr__(_ALIASES.get(key, key), value)

    def merge(self, options):
        return self._merged(options)


# ---------------------------------------------------------------- helpers
def _check_state(initial, new, fn_name):
    """TF's scan / reduce: the new state has the initial state's structure and dtypes."""
    try:
        nest.assert_same_structure(initial, new)
    except (TypeError, ValueError) as e:
        raise TypeError(f"Invalid `{fn_name}`. The element structure for the new state must match the initial "
                        f"state. {e}") from None
    for a, b in zip(leaves(initial), leaves(new)):
        if a.dtype != b.dtype:
            raise TypeError(f"Invalid `{fn_name}`. The element types for the new state must match the initial "
                            f"state. Expected {a.dtype}, got {b.dtype}.")


def _padded_shape(spec, padded):
    """A component's padded shape (-1 / None: the batch's largest), checked against its static shape."""
    if isinstance(padded, TensorShape):
        padded = padded.as_list()
    dims = padded if isinstance(padded, (list, tuple)) else np.asarray(padded).tolist()   # (a tensor)
    shape = TensorShape([None if d is None or int(d) == -1 else int(d) for d in dims])
    # TF's rule: the same rank, and no known dimension padded to less than it is
    if spec.shape.rank is not None and (shape.rank != spec.shape.rank or any(
            p is not None and d is not None and p < d for p, d in zip(shape.as_list(), spec.shape.as_list()))):
        raise ValueError(f"The padded shape {shape} is not compatible with the shape {spec.shape} of the "
                         f"corresponding input component.")
    return shape


def _padding_value(spec, value):
    """A component's padding scalar: 0 (b'' for strings) by default; else the dtype must match."""
    if value is None:
        return b"" if spec.dtype == dtypes.string else np.zeros((), spec.dtype.np)
    t = convert_to_tensor(value)
    if t.dtype != spec.dtype:
        raise TypeError(f"Invalid `padding_values`. `padding_values` values type {t.dtype} does not match type "
                        f"{spec.dtype} of the corresponding input component.")
    if t.shape.rank != 0:
        raise ValueError(f"Invalid `padding_values`. `padding_values` values should be scalars, but got {t.shape}.")
    return np.asarray(t)[()]


def _pad_stack(arrays, shape, value):
    """The components of one batch padded with ``value`` to ``shape`` (None: the largest) and stacked."""
    target = [d if d is not None else max(a.shape[k] for a in arrays) for k, d in enumerate(shape.as_list())]
    out = np.full([len(arrays)] + target, value, dtype=object if arrays[0].dtype == object else arrays[0].dtype)
    for j, a in enumerate(arrays):
        if any(n > t for n, t in zip(a.shape, target)):
            raise DataLossError("Attempted to pad to a smaller size than the input element.")
        out[(j,) + tuple(slice(0, n) for n in a.shape)] = a
    return eager(out)


def _as_dataset(result, cls):
    if not isinstance(result, cls):
        raise TypeError(f"The `map_func` argument must return a `Dataset` object. Got {type(result)}.")
    return result


def mixed_spec(datasets):
    """The element spec of datasets mixed into one; TF's TypeError when they are not compatible."""
    specs = [d.element_spec for d in datasets]
    merged = specs[0]
    try:
        for s in specs[1:]:
            nest.assert_same_structure(merged, s)
            merged = nest.map_structure(most_specific_compatible, merged, s)
            if any(m is None for m in leaves(merged)):
                raise TypeError
    except (TypeError, ValueError):
        listing = "\n".join(f"Dataset {i} element_spec={s}." for i, s in enumerate(specs))
        raise TypeError(f"Invalid `datasets`. `datasets` must have compatible element specs.\n {listing}") from None
    return merged


def mixed_cardinality(datasets):
    """TF's DirectedInterleave: infinite if any input is, else unknown (which run out first is data)."""
    return INFINITE_CARDINALITY if any(d._cardinality == INFINITE_CARDINALITY for d in datasets) \
        else UNKNOWN_CARDINALITY


def default_cycle_length():
    """TF resolves interleave's AUTOTUNE cycle_length to the CPUs this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


class Transformations:
    """The transformations above, as methods of ``Dataset``."""
    _options = None

    def _derive(self, make_iter, cardinality, spec=None, guess=None, others=()):
        """A dataset built on this one (and ``others``): it keeps their options, as TF's do."""
        out = type(self)(make_iter, cardinality, spec, guess)
        for d in (self,) + tuple(others):
            if d._options is not None:
                out._options = d._options if out._options is None else out._options.merge(d._options)
        return out

    def _exact_or_guess(self, spec):
        """(spec, guess) for a spec built from this dataset's: exact if this one's is, else a guess."""
        return (spec, None) if self._spec is not None else (None, spec)

    def _passed_spec(self):
        """(spec, guess) for a dataset whose elements are this one's."""
        return (self._spec, None) if self._spec is not None else (None, lambda: self.element_spec)

    def options(self):
        return self._options if self._options is not None else Options()

    def with_options(self, options, name=None):
        if not isinstance(options, Options):
            raise AttributeError(f"'{type(options).__name__}' object has no attribute '_to_proto' "
                                 f"(with_options takes a tf.data.Options)")
        out = self._derive(self._make_iter, self._cardinality, *self._passed_spec())
        out._options = self.options().merge(options)
        return out

    # ------------------------------------------------------------ batching
    def padded_batch(self, batch_size, padded_shapes=None, padding_values=None, drop_remainder=False, name=None):
        """Batches components of different shapes: each is padded with its padding value
        to its padded shape, where an unknown dimension means the batch's largest."""
        size = int(batch_size)
        if size <= 0:
            raise InvalidArgumentError("Batch size must be greater than zero.")
        # a guessed spec's dimensions are left unknown: TF's traced map would not know them either
        spec = self.element_spec if self._spec is not None else map_element(unknown_dims, self.element_spec)
        if padded_shapes is None:
            for i, s in enumerate(leaves(spec)):
                if s.shape.rank is None:
                    raise ValueError(f"You must provide `padded_shapes` argument because component {i} has "
                                     f"unknown rank.")
            shapes = [s.shape for s in leaves(spec)]
        else:
            shapes = leaves(map_up_to(lambda s, p: (_padded_shape(s, p),), spec, padded_shapes,
                                      "`padded_shapes` is"))
        if isinstance(padding_values, (tuple, dict)):
            values = leaves(map_up_to(lambda s, v: (_padding_value(s, v),), spec, padding_values,
                                      "`padding_values` is"))
        else:   # one value (or None) pads every component
            values = [_padding_value(s, padding_values) for s in leaves(spec)]
        parent = self

        def make():
            for chunk in batches_of(parent._make_iter, size, drop_remainder):
                parts = [[np.asarray(t) for t in leaves(e)] for e in chunk]
                yield nest.pack_sequence_as(chunk[0], [_pad_stack([p[i] for p in parts], shape, value)
                                                       for i, (shape, value) in enumerate(zip(shapes, values))])
        card = batched_cardinality(self._cardinality, size, drop_remainder)
        out_spec = nest.pack_sequence_as(spec, [TensorSpec([size if drop_remainder else None] + shape.as_list(),
                                                           s.dtype) for s, shape in zip(leaves(spec), shapes)])
        return self._derive(make, card, out_spec)

    def rebatch(self, batch_size, drop_remainder=False, name=None):
        """Batches of ``batch_size`` made from the rows of this dataset's batches (TF's
        equivalent of ``unbatch().batch(batch_size)``; a list of per-replica sizes is not taken)."""
        if not np.isscalar(batch_size) and np.ndim(batch_size) != 0:
            raise NotImplementedError("rebatch with a list of batch sizes is not supported by jitgrad")
        return self.unbatch().batch(batch_size, drop_remainder=drop_remainder)

    def bucket_by_sequence_length(self, element_length_func, bucket_boundaries, bucket_batch_sizes,
                                  padded_shapes=None, padding_values=None, pad_to_bucket_boundary=False,
                                  no_padding=False, drop_remainder=False, name=None):
        """TF's group_by_window on the bucket of each element's length (bucket i holds lengths
        in [boundaries[i-1], boundaries[i])): a bucket's batch is padded_batch-ed as soon as it
        has its size; the part-filled ones follow at the end, in bucket order (TF's std::map)."""
        boundaries, sizes = [int(b) for b in bucket_boundaries], [int(b) for b in bucket_batch_sizes]
        if len(sizes) != len(boundaries) + 1:
            raise ValueError(f"`len(bucket_batch_sizes)` must equal `len(bucket_boundaries) + 1` but "
                             f"`len(bucket_batch_sizes)={len(sizes)}` and `len(bucket_boundaries)={len(boundaries)}`.")
        # (built now for padded_batch's checks and spec; the batch size in a spec is unknown, as in TF's)
        template = None if no_padding else self.padded_batch(1, padded_shapes, padding_values)
        parent, cls = self, type(self)

        def batch_of(bucket, elements):
            group = cls(lambda: iter(elements), len(elements), *parent._passed_spec())
            if no_padding:
                return group.batch(sizes[bucket], drop_remainder=drop_remainder)
            shapes = padded_shapes
            if pad_to_bucket_boundary:   # every unknown dimension to the bucket's boundary - 1
                if bucket == len(boundaries):
                    raise InternalError("assertion failed: [When pad_to_bucket_boundary=True, elements must have "
                                        "length < max(bucket_boundaries).]")
                shapes = map_element(lambda s: [boundaries[bucket] - 1 if d is None else d for d in s.shape[1:]],
                                     template.element_spec)
            return group.padded_batch(sizes[bucket], shapes, padding_values, drop_remainder=drop_remainder)

        def make():
            groups = {}
            for e in parent._make_iter():
                bucket = bisect.bisect_right(boundaries, int(call_with_element(element_length_func, e)))
                groups.setdefault(bucket, []).append(e)
                if len(groups[bucket]) == sizes[bucket]:
                    yield from batch_of(bucket, groups.pop(bucket))._make_iter()
            for bucket in sorted(groups):
                yield from batch_of(bucket, groups[bucket])._make_iter()

        def spec():
            if no_padding:
                return map_element(lambda s: TensorSpec(None if s.shape.rank is None else [None] + s.shape.as_list(),
                                                        s.dtype), parent.element_spec)
            return template.element_spec
        # (TF's group_by_window: infinite stays infinite)
        card = INFINITE_CARDINALITY if self._cardinality == INFINITE_CARDINALITY else UNKNOWN_CARDINALITY
        return self._derive(make, card, spec)

    # ------------------------------------------------------------ datasets of datasets
    def flat_map(self, map_func, name=None):
        """The elements of the dataset ``map_func`` makes of each element, one after another."""
        return self.interleave(map_func, cycle_length=1)

    def interleave(self, map_func, cycle_length=None, block_length=None, num_parallel_calls=None,
                   deterministic=None, name=None):
        """TF's deterministic order (its InterleaveDataset; the parallel version yields the same):
        ``cycle_length`` datasets open at once, ``block_length`` elements from each in turn; a
        dataset that runs out frees its place, which the next input element takes when the turn
        comes back to it. Without cycle_length, TF (AUTOTUNE) opens as many as there are CPUs."""
        cycle = default_cycle_length() if cycle_length is None or cycle_length == -1 else int(cycle_length)
        block = 1 if block_length is None else int(block_length)
        if cycle <= 0 or block <= 0:
            raise InvalidArgumentError(f"cycle_length and block_length must be positive, got {cycle}, {block}")
        parent, cls = self, type(self)

        def make():
            inputs = iter(parent._make_iter())
            slots, at, taken, open_, input_done = [None] * cycle, 0, 0, 0, False
            while not input_done or open_:
                if slots[at] is not None:
                    e = next(slots[at], None)
                    if e is not None:
                        yield e
                        taken += 1
                        if taken < block:
                            continue
                    else:
                        slots[at], open_ = None, open_ - 1
                elif not input_done:
                    x = next(inputs, None)
                    if x is None:
                        input_done = True
                    else:
                        slots[at], open_ = iter(_as_dataset(call_with_element(map_func, x), cls)._make_iter()), \
                            open_ + 1
                    continue
                at, taken = (at + 1) % cycle, 0

        def spec():   # the spec of the first dataset map_func makes (TF: of the traced function's)
            first = next(iter(parent._make_iter()))
            return _as_dataset(call_with_element(map_func, first), cls).element_spec
        return self._derive(make, UNKNOWN_CARDINALITY, spec)

    def window(self, size, shift=None, stride=1, drop_remainder=False, name=None):
        """A dataset of windows, each a structure of datasets (one per component, as TF):
        ``size`` elements ``stride`` apart, windows starting ``shift`` (default ``size``)
        elements apart; the last ones shorter unless ``drop_remainder``."""
        size = int(size)
        shift = size if shift is None else int(shift)
        stride = int(stride)
        for what, v in (("size", size), ("shift", shift), ("stride", stride)):
            if v <= 0:
                raise InvalidArgumentError(f"Window {what} must be greater than zero, but got {v}.")
        span = (size - 1) * stride + 1          # the input elements one window covers
        parent, cls = self, type(self)

        def element_spec():
            return parent.element_spec

        def window_of(elements):
            columns = list(zip(*[leaves(e) for e in elements]))
            specs = leaves(element_spec())
            return nest.pack_sequence_as(elements[0], [
                cls(lambda col=col: iter(col), len(col), s) for col, s in zip(columns, specs)])

        def make():
            it = iter(parent._make_iter())
            buf, skip = [], 0
            while True:
                if skip:   # a shift beyond the buffer skips input elements too
                    if next(itertools.islice(it, skip - 1, None), None) is None:
                        return
                buf.extend(itertools.islice(it, span - len(buf)))
                if not buf or (drop_remainder and len(buf) < span):
                    return
                yield window_of(buf[::stride])
                dropped = min(shift, len(buf))
                del buf[:dropped]
                skip = shift - dropped
        c = self._cardinality
        if c < 0:
            card = c
        elif drop_remainder:
            card = (c - span) // shift + 1 if c >= span else 0
        else:
            card = -(-c // shift)
        return self._derive(make, card, lambda: map_element(lambda s: DatasetSpec(s, []), element_spec()))

    # ------------------------------------------------------------ stateful passes
    def scan(self, initial_state, scan_func, name=None):
        """``scan_func(state, element) -> (new state, output)``; yields the outputs."""
        initial = to_tensors(initial_state)
        parent = self

        def make():
            state = initial
            for e in parent._make_iter():
                new, out = scan_func(state, e)
                new = to_tensors(tuple(new) if isinstance(new, list) else new)
                _check_state(initial, new, "scan_func")
                state = new
                yield to_tensors(tuple(out) if isinstance(out, list) else out)
        return self._derive(make, self._cardinality)

    def reduce(self, initial_state, reduce_func, name=None):
        """``reduce_func(state, element) -> new state`` over every element; the final state."""
        state = to_tensors(initial_state)
        for e in self:
            new = to_tensors(reduce_func(state, e))
            _check_state(state, new, "reduce_func")
            state = new
        return state

    def get_single_element(self, name=None):
        it = iter(self)
        first = next(it, None)
        if first is None:
            raise InvalidArgumentError("Dataset was empty.")
        if next(it, None) is not None:
            raise InvalidArgumentError("Dataset had more than one element.")
        return first

    # ------------------------------------------------------------ selections
    def shard(self, num_shards, index, name=None):
        """Every ``num_shards``-th element, starting at ``index``."""
        n, i = int(num_shards), int(index)
        if n <= 0:
            raise InvalidArgumentError(f"Number of shards must be greater than zero (currently num_shards = {n}).")
        if not 0 <= i < n:
            raise InvalidArgumentError(f"Index must be between 0 and {n - 1} (currently index = {i}).")
        parent = self
        c = self._cardinality
        card = c if c < 0 else c // n + (i < c % n)
        return self._derive(lambda: itertools.islice(parent._make_iter(), i, None, n), card,
                            *self._passed_spec())

    def take_while(self, predicate, name=None):
        parent = self
        return self._derive(lambda: itertools.takewhile(lambda e: bool(np.asarray(call_with_element(predicate, e))),
                                                        parent._make_iter()),
                            UNKNOWN_CARDINALITY, *self._passed_spec())

    def unique(self, name=None):
        """Each distinct value once, at its first occurrence (scalars of int32 / int64 / string)."""
        spec = self.element_spec
        if isinstance(spec, (tuple, dict)):
            raise InvalidArgumentError("UniqueDataset only supports inputs with a single component.")
        if spec.dtype not in (dtypes.int32, dtypes.int64, dtypes.string):
            raise TypeError(f"`tf.data.Dataset.unique` does not support type {spec.dtype} -- only `tf.int32`, "
                            f"`tf.int64`, and `tf.string` are supported.")
        parent = self

        def make():
            seen = set()
            for e in parent._make_iter():
                key = np.asarray(e).tobytes() if np.asarray(e).dtype != object else np.asarray(e).item()
                if key not in seen:
                    seen.add(key)
                    yield e
        return self._derive(make, UNKNOWN_CARDINALITY, *self._passed_spec())

    # ------------------------------------------------------------ sources
    @classmethod
    def counter(cls, start=0, step=1, dtype=dtypes.int64, name=None):
        dt = dtypes.as_dtype(dtype)
        return cls(lambda: (eager(np.array(v, dt.np)) for v in itertools.count(int(start), int(step))),
                   INFINITE_CARDINALITY, TensorSpec([], dt))

    @classmethod
    def choose_from_datasets(cls, datasets, choice_dataset, stop_on_empty_dataset=True):
        """The next element of ``datasets[c]`` for each ``c`` of ``choice_dataset``; a chosen
        dataset that has run out ends the result (``stop_on_empty_dataset``) or is passed over."""
        datasets = list(datasets)
        if not datasets:
            raise ValueError("Invalid `datasets`. `datasets` should not be empty.")
        choice_spec = choice_dataset.element_spec
        if choice_spec != TensorSpec([], dtypes.int64):
            raise TypeError(f"Invalid `choice_dataset`. Elements of `choice_dataset` must be scalar `tf.int64` "
                            f"tensors but are {choice_spec}.")
        spec = mixed_spec(datasets)

        def make():
            its = [iter(d._make_iter()) for d in datasets]
            done = [False] * len(its)
            for c in choice_dataset._make_iter():
                c = int(c)
                if not 0 <= c < len(its):
                    raise InvalidArgumentError(f"Selector index out of range: {c} >= {len(its)}")
                e = None if done[c] else next(its[c], None)
                if e is not None:
                    yield e
                    continue
                done[c] = True
                if stop_on_empty_dataset or all(done):
                    return
        return datasets[0]._derive(make, mixed_cardinality(datasets), spec, others=datasets[1:])
