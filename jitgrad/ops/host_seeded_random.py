"""Random ops whose seed pair the host gives at each draw (Keras 3's ``SeedGenerator``).

Each run asks the op's ``next_pair`` for a seed pair and draws TF's stateless stream for it:
the values of StatelessRandomUniformV2 / StatelessRandomNormalV2 /
StatelessTruncatedNormalV2 under that seed. Keras 3 steps its generator's state variable
inside the traced step; here the state lives on the host and each draw steps it, so the
ops are random-kind sources: a compiled program takes their draws as runtime arguments
drawn before each call (inside branches and loops, as they execute), and needs no native
Philox. Not differentiable, as the stateless ops are not. The op is registered with the other
random sources (ops/random_ops.py's RANDOM_OPS); this module gives it its sampler.
"""
import numpy as np

from . import philox
from .random_ops import shape_of_draws
from .registry import apply_op

_DISTRIBUTIONS = {"uniform": philox.uniform, "normal": philox.normal, "truncated_normal": philox.truncated_normal}


class PairSampler:
    """The op's sampler (ops/random_ops.py's protocol): the next seed pair, then TF's draw."""
    __slots__ = ("next_pair", "distribution")

    def __init__(self, next_pair, distribution):
        self.next_pair, self.distribution = next_pair, distribution

    def draw(self, kind, shape, dtype, attrs):
        seed0, seed1 = self.next_pair()
        n = int(np.prod(shape, dtype=np.int64))
        return _DISTRIBUTIONS[self.distribution](philox.stream_from_seed(seed0, seed1), n, dtype).reshape(shape)

    def __repr__(self):       # (what a compile signature sees: never the state)
        return f"PairSampler({self.distribution})"


def host_seeded(distribution, shape, dtype, next_pair, name=None):
    """A ``distribution`` draw of ``shape`` whose seed pair ``next_pair()`` gives at each run."""
    attrs = {"shape": shape_of_draws(shape), "dtype": dtype, "sampler": PairSampler(next_pair, distribution)}
    return apply_op("HostSeededRandom", [], attrs, name=name or "HostSeededRandom")
