"""The element structures of ``tf.data`` (jitgrad/data.py and data_transforms.py share them).

An element is a structure (tuples, dicts, namedtuples: TF's rules, where a
Python *list* is one tensor) of numpy-backed eager tensors; its spec is the same
structure of TensorSpecs, or of DatasetSpecs for the windows of ``window``.
"""
import itertools

import numpy as np

from . import nest
from .convert import convert_to_tensor
from .eager import EagerTensor
from .function import TensorSpec
from .shapes import TensorShape

INFINITE_CARDINALITY = -1
UNKNOWN_CARDINALITY = -2


def batches_of(make_iter, size, drop_remainder):
    """The elements of ``make_iter()`` in lists of ``size`` (the last shorter, or dropped)."""
    it = iter(make_iter())
    while True:
        chunk = list(itertools.islice(it, size))
        if not chunk or (drop_remainder and len(chunk) < size):
            return
        yield chunk


def batched_cardinality(cardinality, size, drop_remainder):
    """The number of batches of ``size`` (infinite / unknown stay so)."""
    if cardinality < 0:
        return cardinality
    return cardinality // size if drop_remainder else -(-cardinality // size)


def to_tensors(x):
    if isinstance(x, dict):
        return type(x)((k, to_tensors(v)) for k, v in x.items())
    if isinstance(x, tuple):
        items = [to_tensors(v) for v in x]
        return type(x)(*items) if hasattr(x, "_fields") else tuple(items)
    return convert_to_tensor(x)


def map_element(fn, x):
    if isinstance(x, dict):
        return type(x)((k, map_element(fn, v)) for k, v in x.items())
    if isinstance(x, tuple):
        items = [map_element(fn, v) for v in x]
        return type(x)(*items) if hasattr(x, "_fields") else tuple(items)
    return fn(x)


def map_up_to(fn, spec, value, what):
    """fn(spec leaf, value part) over a spec structure and a value with that structure at
    least (TF's map_structure_up_to: below a spec leaf the value is passed whole)."""
    if isinstance(spec, dict):
        return type(spec)((k, map_up_to(fn, v, value[k], what)) for k, v in spec.items())
    if isinstance(spec, tuple):
        if not isinstance(value, (tuple, list)) or len(value) != len(spec):
            raise TypeError(f"{what} {value!r}, which does not match the structure {spec!r}")
        items = [map_up_to(fn, s, v, what) for s, v in zip(spec, value)]
        return type(spec)(*items) if hasattr(spec, "_fields") else tuple(items)
    return fn(spec, value)


def leaves(x):
    return nest.flatten(x)


def spec_of(element, batched=None):
    return map_element(lambda t: TensorSpec(t.shape if batched is None else [batched] + t.shape.as_list()[1:],
                                            t.dtype), element)


def eager(t):
    return EagerTensor(np.array(t, order="C"))   # (ascontiguousarray would make a 0-d array 1-d)


def call_with_element(fn, element, *before):
    """TF passes a tuple element (not a namedtuple) to a user function as separate arguments."""
    if isinstance(element, tuple) and not hasattr(element, "_fields"):
        return fn(*before, *element)
    return fn(*before, element)


def unknown_dims(spec):
    """The spec with every dimension unknown (its rank kept): what TF's traced function
    would give for an element whose static shape jitgrad only guessed from a first element."""
    return TensorSpec(None if spec.shape.rank is None else [None] * spec.shape.rank, spec.dtype)


def most_specific_compatible(a, b):
    """TF's rule for datasets mixed into one (choose / sample_from_datasets): same dtypes;
    a dimension the specs disagree on becomes unknown."""
    if a.dtype != b.dtype or not a.shape.is_compatible_with(b.shape):
        return None
    if a.shape.rank is None or b.shape.rank is None:
        return TensorSpec(None, a.dtype)
    return TensorSpec([x if x == y else None for x, y in zip(a.shape.as_list(), b.shape.as_list())], a.dtype)


class DatasetSpec:
    """The spec of an element that is itself a Dataset (``window``'s elements)."""

    def __init__(self, element_spec, dataset_shape=()):
        self.element_spec = element_spec
        self.shape = TensorShape(dataset_shape)

    def __eq__(self, other):
        return (isinstance(other, DatasetSpec) and self.element_spec == other.element_spec
                and self.shape.dims == other.shape.dims)

    def __hash__(self):
        return hash((DatasetSpec, self.shape.dims))

    def __repr__(self):
        return f"DatasetSpec({self.element_spec!r}, {self.shape!r})"
