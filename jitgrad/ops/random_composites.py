"""tf.random.categorical and tf.random.shuffle.

categorical is built on tf.random.uniform (so it follows its seeding rules, but its stream
is not TF's multinomial kernel's): the Gumbel-max trick, argmax(logits + G) with
G = -log(-log(U)) picks class i with probability softmax(logits)_i (U drawn from [tiny, 1),
as TF's own stateless sampler does for XLA; a class of logit -inf is never picked).
shuffle gathers the rows by a RandomShuffle op's permutation: TF's Fisher-Yates on TF's
stream, so seeded shuffles are TF's."""
import numpy as np

from .. import dtypes
from ..convert import convert_all
from ..eager import EagerTensor
from ..errors import InvalidArgumentError
from .array_ops import expand_dims, gather
from .math_ops import add, identity, log, negative
from . import random_ops
from .random_ops import uniform
from .reduction_ops import argmax


def categorical(logits, num_samples, dtype=None, seed=None, name=None):
    """``tf.random.categorical``: [batch, num_samples] class indices drawn from each row's
    unnormalised log-probabilities."""
    (x,) = convert_all([logits])
    out = dtypes.as_dtype(dtype) if dtype is not None else dtypes.int64
    if out not in (dtypes.int32, dtypes.int64):
        raise ValueError(
            f"Value for attr 'output_dtype' of {out.name} is not in the list of allowed values: int32, int64")
    if x.shape.rank not in (None, 2):
        raise (InvalidArgumentError if isinstance(x, EagerTensor) else ValueError)(
            f"logits should be a matrix, got shape {x.shape}")
    if not x.shape.is_fully_defined():
        raise NotImplementedError("tf.random.categorical needs the logits' shape known when the graph is built.")
    n = num_samples.numpy() if isinstance(num_samples, EagerTensor) else num_samples
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 0:
        raise (InvalidArgumentError if isinstance(x, EagerTensor) else ValueError)(
            f"num_samples should be a non-negative integer known when the graph is built, got {num_samples!r}")
    batch, classes = x.shape.as_list()
    u = uniform([batch, int(n), classes], minval=np.finfo(x.dtype.np).tiny, maxval=1.0, dtype=x.dtype, seed=seed)
    gumbel = negative(log(negative(log(u))))
    return argmax(add(expand_dims(x, 1), gumbel), axis=-1, output_type=out, name=name)


def shuffle(value, seed=None, name=None):
    """``tf.random.shuffle``: the rows (first dimension) in a uniformly random order."""
    (x,) = convert_all([value])
    if x.shape.rank == 0:      # (TF's kernel passes a scalar through; its op seed is taken all the same)
        random_ops._seeds(seed)
        return identity(x, name=name)
    n = x.shape.dims[0] if x.shape.rank is not None else None
    if n is None:
        raise NotImplementedError("tf.random.shuffle needs the first dimension known when the graph is built.")
    order = random_ops._random("RandomShuffle", [n], dtypes.int64, seed, None, kernel_dtype=x.dtype)
    return gather(x, order, name=name)


