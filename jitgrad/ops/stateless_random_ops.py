"""tf.random.stateless_uniform / stateless_normal / stateless_truncated_normal,
tf.random.split / fold_in (experimental.stateless_split / stateless_fold_in): TF 2.21's
values bit for bit (ops/philox.py holds the sampling).

Each op is a pure function of its key input: a seed pair (int32 / int64 [2], scrambled as
TF's StatelessRandomGetKeyCounter does) or, with ``key_from="state"``, a Philox
tf.random.Generator's int64 [3] state used as counter and key (ops/random_generator.py).
The ops have no LLVM lowering: a compiled program holding one runs in the reference
interpreter (a constant seed is folded to a constant first). As in TF they are not
differentiable (gradients stop there); mean / stddev / minval / maxval are applied
with ordinary ops, as TF's Python wrappers do, so gradients reach them.
"""
import numpy as np

from .. import context, dtypes
from ..convert import convert_to_tensor
from ..errors import InvalidArgumentError
from . import philox
from .array_ops import stack
from .math_ops import add, multiply, subtract
from .random_ops import shape_of_draws
from .registry import NOT_DIFFERENTIABLE, apply_op, register

_SEED_DTYPES = (dtypes.int32, dtypes.int64)
_UNIFORM_DTYPES = (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64,
                   dtypes.int32, dtypes.int64, dtypes.uint32, dtypes.uint64)
_FLOAT_DTYPES = (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64)


def _shape_text(shape):
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]" if shape is not None else "<unknown>"


def check_key(shape, dtype, key_from):
    """TF's checks of a seed ([2]) or Generator state ([3]): TypeError for the dtype,
    ValueError for the shape (eager mode turns both into InvalidArgumentError, as TF)."""
    want = 2 if key_from == "seed" else 3
    allowed = _SEED_DTYPES if key_from == "seed" else (dtypes.int64,)
    if dtype not in allowed:
        raise TypeError(f"Value for attr 'Tseed' of {dtype.name} is not in the list of allowed values: int32, int64")
    if shape is not None and (len(shape) != 1 or shape[0] not in (None, want)):
        raise ValueError(f"seed must have shape [{want}], not {_shape_text(shape)}")


def _infer(shapes, dts, attrs):
    check_key(shapes[0], dts[0], attrs["key_from"])
    for s in shapes[1:]:          # minval / maxval of the integer op
        if s is not None and len(s) != 0:
            raise ValueError(f"minval and maxval must be scalars, got shape {_shape_text(s)}")
    return [(attrs["shape"], attrs["dtype"])]


def stream(attrs, key):
    """The Philox stream of an op's key input (a seed pair or a Generator state)."""
    key = np.asarray(key)
    if attrs["key_from"] == "state":
        return philox.stream_from_state(key)
    return philox.stream_from_seed(key[0], key[1])


def _sampler(draw):
    def kernel(attrs, key, *bounds):
        shape = attrs["shape"]
        n = int(np.prod(shape, dtype=np.int64))
        flat = draw(stream(attrs, key), n, attrs["dtype"].np, *bounds)
        return np.ascontiguousarray(flat).reshape(shape)   # (ascontiguousarray makes a 0-d array 1-d)
    return kernel


def _uniform_int(st, n, np_dtype, lo, hi):
    lo, hi = int(lo), int(hi)
    if lo >= hi:
        raise ValueError(f"Need minval < maxval, got {lo} >= {hi}")
    return philox.uniform_int(st, n, np_dtype, lo, hi)


for _name, _draw in (("StatelessRandomUniform", philox.uniform), ("StatelessRandomNormal", philox.normal),
                     ("StatelessTruncatedNormal", philox.truncated_normal),
                     ("StatelessRandomUniformFullInt", philox.full_int),
                     ("StatelessRandomUniformInt", _uniform_int)):
    register(_name, infer=_infer, kernel=_sampler(_draw), grad=NOT_DIFFERENTIABLE, kind="other",
             denormals="keep", lowering="interpreter")


# ---------------------------------------------------------------- the public API
def check_alg(alg):
    """TF's algorithm argument: Philox (what "auto_select" is on CPU) is the one jitgrad has."""
    name = getattr(alg, "name", alg)
    if isinstance(name, str) and name.lower() in ("auto_select", "philox"):
        return
    if isinstance(alg, int) and not isinstance(alg, bool) and alg in (1, 3):
        return
    if name in ("threefry", "THREEFRY", 2):
        raise NotImplementedError("jitgrad's random ops implement the Philox algorithm only, not ThreeFry.")
    raise ValueError(f"Argument `alg` got unsupported value {alg}. Supported values are "
                     f"[1, 2, 3] (or 'philox', 'threefry', 'auto_select').")


def seed_tensor(seed):
    """A seed as a tensor (a Python list of ints: int32, or int64 when a value needs it;
    a numpy array of another integer type: int64, as TF converts it)."""
    if isinstance(seed, np.ndarray) and seed.dtype.kind in "iu" and seed.dtype not in (np.int32, np.int64):
        seed = seed.astype(np.int64)
    return convert_to_tensor(seed)


def static_shape(shape):
    """random_ops' static shape, a bad one being TF's InvalidArgumentError when eager (its
    kernel's check) and ValueError while building a graph."""
    try:
        return shape_of_draws(shape)
    except ValueError as e:
        if context.executing_eagerly():
            raise InvalidArgumentError(str(e)) from None
        raise


def draw(op, shape, key, dtype, key_from="seed", bounds=(), name=None):
    """A raw draw of op ``op`` (one of the ops above) of static ``shape`` from ``key`` (a
    tensor, or a function making it: a Generator advances its state only once the
    arguments have passed TF's checks)."""
    attrs = {"shape": static_shape(shape), "dtype": dtype, "key_from": key_from}
    if callable(key):
        key = key()
    return apply_op(op, [key, *bounds], attrs, name=name or op)


def uniform_from(key, key_from, shape, minval, maxval, dtype, name, api):
    """stateless_uniform / Generator.uniform once the key is known (TF's argument rules)."""
    dtype = dtypes.as_dtype(dtype)
    if dtype not in _UNIFORM_DTYPES:
        raise ValueError(f"Argument `dtype` got invalid value {dtype}. Accepted dtypes are "
                         f"{tuple(d.name for d in _UNIFORM_DTYPES)}.")
    if dtype.is_integer:
        if (minval is None) != (maxval is None):
            raise ValueError(f"For integer `dtype` argument {dtype}, argument `minval` and `maxval` must be both "
                             f"None or not None. Got `minval`={minval} and `maxval`={maxval}.")
        if minval is None:
            return draw("StatelessRandomUniformFullInt", shape, key, dtype, key_from, name=name)
        if dtype in (dtypes.uint32, dtypes.uint64):
            raise ValueError(f"Argument `dtype` got invalid value {dtype} when argument `minval` is not None. "
                             "Please don't use unsigned integers in this case.")
        bounds = (convert_to_tensor(minval, dtype=dtype), convert_to_tensor(maxval, dtype=dtype))
        return draw("StatelessRandomUniformInt", shape, key, dtype, key_from, bounds, name=name)
    if maxval is None:
        maxval = 1
    lo, hi = convert_to_tensor(minval, dtype=dtype), convert_to_tensor(maxval, dtype=dtype)
    rnd = draw("StatelessRandomUniform", shape, key, dtype, key_from)
    return add(multiply(rnd, subtract(hi, lo)), lo, name=name)     # TF's own arithmetic, in dtype


def _float_dtype(dtype, api):
    dtype = dtypes.as_dtype(dtype)
    if dtype not in _FLOAT_DTYPES:
        raise TypeError(f"Value for attr 'dtype' of {dtype.name} is not in the list of allowed values: "
                        "half, bfloat16, float, double ({api})")
    return dtype


def gaussian_from(op, key, key_from, shape, mean, stddev, dtype, name, api):
    """normal / truncated normal once the key is known: rnd * stddev + mean, as TF."""
    dtype = _float_dtype(dtype, api)
    mean, stddev = convert_to_tensor(mean, dtype=dtype), convert_to_tensor(stddev, dtype=dtype)
    rnd = draw(op, shape, key, dtype, key_from)
    return add(multiply(rnd, stddev), mean, name=name)


def stateless_uniform(shape, seed, minval=0, maxval=None, dtype=dtypes.float32, name=None, alg="auto_select"):
    """``tf.random.stateless_uniform``: floats in [minval, maxval) (maxval defaults to 1),
    integers in [minval, maxval), or (integer dtype, minval = maxval = None) integers over
    the dtype's whole range; the same values for the same seed, as TF's."""
    check_alg(alg)
    return uniform_from(seed_tensor(seed), "seed", shape, minval, maxval, dtype, name, "tf.random.stateless_uniform")


def stateless_normal(shape, seed, mean=0.0, stddev=1.0, dtype=dtypes.float32, name=None, alg="auto_select"):
    """``tf.random.stateless_normal``."""
    check_alg(alg)
    return gaussian_from("StatelessRandomNormal", seed_tensor(seed), "seed", shape, mean, stddev, dtype, name,
                         "tf.random.stateless_normal")


def stateless_truncated_normal(shape, seed, mean=0.0, stddev=1.0, dtype=dtypes.float32, name=None,
                               alg="auto_select"):
    """``tf.random.stateless_truncated_normal``: standard normals redrawn beyond two
    standard deviations, scaled."""
    check_alg(alg)
    return gaussian_from("StatelessTruncatedNormal", seed_tensor(seed), "seed", shape, mean, stddev, dtype, name,
                         "tf.random.stateless_truncated_normal")


def split(seed, num=2, alg="auto_select"):
    """``tf.random.split`` / ``tf.random.experimental.stateless_split``: ``num`` new seeds
    ([num, 2], the seed's dtype) drawn from ``seed``."""
    seed = seed_tensor(seed)
    check_alg(alg)
    return uniform_from(seed, "seed", [num, 2], None, None, seed.dtype, None, "tf.random.split")


def fold_in(seed, data, alg="auto_select"):
    """``tf.random.fold_in`` / ``tf.random.experimental.stateless_fold_in``: a new seed
    [drawn from ``seed``, data]."""
    check_alg(alg)
    data = convert_to_tensor(data)
    first = uniform_from(seed_tensor(seed), "seed", [], None, None, data.dtype, None, "tf.random.fold_in")
    return stack([first, data])


# ---------------------------------------------------------------- stateless_categorical
def _multinomial_infer(shapes, dts, attrs):
    check_key(shapes[1], dts[1], "seed")
    if shapes[0] is not None and len(shapes[0]) != 2:
        raise ValueError(f"logits should be a matrix, got shape {_shape_text(shapes[0])}")
    batch = shapes[0][0] if shapes[0] is not None else None
    return [((batch, attrs["num_samples"]), attrs["output_dtype"])]


def _multinomial(attrs, logits, seed):
    """TF's CPU StatelessMultinomial: per row, the cumulative sums of exp(logit - max) over
    the finite logits, and for each sample the first class whose sum exceeds u * total,
    u a float64 uniform of two words, drawn row after row, sample after sample. That is
    TF's kernel run as one shard, which TF does while rows * 50 * (num_samples *
    log2(classes) + classes) stays under about 2 * 10^5 (its cost estimate); above, TF
    splits the rows among its threads, each shard's stream starting further on, so TF's
    own values then depend on its thread count, and jitgrad's are not TF's."""
    batch, classes = logits.shape
    ns = attrs["num_samples"]
    if classes == 0:
        raise ValueError(f"num_classes should be positive, got {classes}")
    out = np.zeros((batch, ns), dtype=attrs["output_dtype"].np)
    if out.size == 0:
        return out
    w = philox.words(stream({"key_from": "seed"}, seed), 2 * batch * ns)
    u = philox.unit_float64(w[0::2], w[1::2]).reshape(batch, ns)
    finite = np.isfinite(logits)
    lowest = np.finfo(logits.dtype).min if logits.dtype.kind == "f" else np.iinfo(logits.dtype).min
    top = np.where(finite, logits, lowest).max(axis=1).astype(np.float64)
    with np.errstate(all="ignore"):
        terms = np.exp(logits.astype(np.float64) - top[:, None])
    cdf = np.cumsum(np.where(finite, terms, 0.0), axis=1)
    find = u * cdf[:, -1:]
    for b in range(batch):      # (rows: a binary search each, as std::upper_bound)
        out[b] = np.searchsorted(cdf[b], find[b], side="right")
    return out


register("StatelessMultinomial", infer=_multinomial_infer, kernel=_multinomial, grad=NOT_DIFFERENTIABLE,
         kind="other", denormals="keep", lowering="interpreter")


def stateless_categorical(logits, num_samples, seed, dtype=dtypes.int64, name=None):
    """``tf.random.stateless_categorical``: [batch, num_samples] class indices drawn from
    each row's unnormalised log-probabilities, TF's for the same seed."""
    logits = convert_to_tensor(logits)
    dtype = dtypes.as_dtype(dtype) if dtype else dtypes.int64
    if dtype not in (dtypes.int32, dtypes.int64):
        raise ValueError(f"Argument `dtype` got invalid value {dtype}. Accepted dtypes are (tf.int32, tf.int64).")
    n = num_samples.numpy() if hasattr(num_samples, "numpy") else num_samples
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool):
        raise NotImplementedError("jitgrad's stateless_categorical needs num_samples known when the graph is built.")
    if n < 0:
        raise ValueError(f"num_samples should be non-negative, got {n}")
    return apply_op("StatelessMultinomial", [logits, seed_tensor(seed)],
                    {"num_samples": int(n), "output_dtype": dtype}, name=name or "StatelessMultinomial")
