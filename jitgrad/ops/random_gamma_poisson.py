"""tf.random.gamma / poisson and tf.random.stateless_gamma / stateless_poisson /
stateless_binomial (and Generator.binomial's kernel): TF 2.21's samplers on Philox
(ops/philox_rejection.py), so the values are TF's for the same seeds.

Stateless ops take the seed pair as the other stateless ops do. The stateful ops hold a
``PhiloxStream`` as TF's kernels hold a GuardedPhiloxRandom: key = the graph-level seed,
counter = the op seed in its high half (both as tf.random.set_seed / ``seed=`` give them,
truncated as TF's get_seed does), and each run reserves 256 calls per output, so a second
run continues the stream. Eager calls with the same seeds share one stream, as TF's cached
eager kernels do. Seeds are random_ops' (TF's get_seed), so the streams are TF's whenever
the op seeds are (always eagerly; in a graph, when its unseeded random ops come in TF's
order); without any seed the key is random.

Gradients: none reach ``lam`` or a seed; gamma's reach alpha as TF's do, by implicit
reparameterisation (RandomGammaGrad: ops/gamma_sample_grad.py), and beta through the division.
"""

import numpy as np

from .. import context, dtypes
from ..convert import convert_to_tensor
from ..errors import InvalidArgumentError
from . import philox, philox_rejection, random_ops
from ._infer import FLOATS, broadcasting
from .array_ops import broadcast_to, reshape
from .gamma_sample_grad import sample_der_alpha
from .math_ops import maximum, multiply, truediv
from .reduction_ops import reduce_sum
from .registry import NO_GRADIENT_RULE, NOT_DIFFERENTIABLE, apply_op, register
from .stateless_random_ops import check_key, seed_tensor, static_shape, stream

_GAMMA_DTYPES = (dtypes.float16, dtypes.float32, dtypes.float64)
_POISSON_DTYPES = (dtypes.float16, dtypes.float32, dtypes.float64, dtypes.int32, dtypes.int64)


def _cast_double(values, dtype):
    """A kernel's double results as ``dtype`` (half / bfloat16 through float, as Eigen's
    conversions from double go)."""
    if dtype in (dtypes.float16, dtypes.bfloat16):
        return values.astype(np.float32).astype(dtype.np)
    return values.astype(dtype.np)


def _highest(dtype):
    return float(np.finfo(dtype.np).max if dtype.is_floating else np.iinfo(dtype.np).max)


def _layout(params, shape):
    """(number of parameters, draws per parameter) for a full output ``shape`` ending with
    the parameters' shape (TF's check)."""
    params = np.asarray(params)
    if tuple(shape[len(shape) - params.ndim:]) != params.shape or params.ndim > len(shape):
        raise ValueError("Shape passed in must end with broadcasted shape.")
    if params.size == 0:
        raise ValueError(f"Input alpha should have non-zero element count, got: {params.size}")
    return params.size, int(np.prod(shape, dtype=np.int64)) // params.size


def _sample(kind, st, params, shape, dtype):
    n_params, per = _layout(params, shape)
    flat = np.asarray(params, dtype=np.float64).reshape(-1)
    if kind == "gamma":
        out = philox_rejection.gamma(st, flat, per)
    else:
        out = philox_rejection.poisson(st, flat, per, _highest(dtype))
    return np.ascontiguousarray(_cast_double(out, dtype)).reshape(shape)


# ---------------------------------------------------------------- gamma's gradient
register("RandomGammaGrad", infer=broadcasting(FLOATS), kernel=lambda attrs, alpha, sample: sample_der_alpha(
    alpha, sample), grad=NO_GRADIENT_RULE, kind="other", denormals="flush", lowering="interpreter")


def _alpha_grad(alpha, sample, grad, sample_dims):
    """TF's _StatelessGammaGradAlpha / _RandomGammaGrad: sum over the sample dimensions of
    grad * d sample / d alpha."""
    dims = alpha.shape.as_list()
    alpha_b = reshape(alpha, [1] * sample_dims + dims)
    partial = apply_op("RandomGammaGrad", [alpha_b, sample])
    return reduce_sum(multiply(grad, partial), axis=list(range(sample_dims)))


def _stateless_gamma_grad(op, grad):
    alpha = op.inputs[1]
    return [None, _alpha_grad(alpha, op.outputs[0], grad, len(op.attrs["shape"]) - alpha.shape.rank)]


def _random_gamma_grad(op, grad):
    return [_alpha_grad(op.inputs[0], op.outputs[0], grad, len(op.attrs["shape"]))]


# ---------------------------------------------------------------- stateless ops
# (denormals "flush": they compute from alpha / lam, as TF's kernels do with FTZ + DAZ set; a
# denormal alpha or rate gives what 0 gives, both ways)
def _stateless_infer(shapes, dts, attrs):
    check_key(shapes[0], dts[0], attrs["key_from"])
    return [(attrs["shape"], attrs["dtype"])]


def _stateless_kernel(kind):
    def kernel(attrs, key, params):
        shape = attrs["shape"]
        if int(np.prod(shape, dtype=np.int64)) == 0:
            return np.zeros(shape, dtype=attrs["dtype"].np)
        return _sample(kind, stream(attrs, key), params, shape, attrs["dtype"])
    return kernel


register("StatelessRandomGamma", infer=_stateless_infer, kernel=_stateless_kernel("gamma"),
         grad=_stateless_gamma_grad, kind="other", denormals="flush", lowering="interpreter")
register("StatelessRandomPoisson", infer=_stateless_infer, kernel=_stateless_kernel("poisson"),
         grad=NOT_DIFFERENTIABLE, kind="other", denormals="flush", lowering="interpreter")


def binomial_layout(shape, counts_shape, probs_shape):
    """(batches, draws per batch) for a full ``shape`` ending with counts' and probs'
    broadcast shape (TF's checks, as ValueError: InvalidArgumentError when the kernel runs)."""
    try:
        both = np.broadcast_shapes(tuple(counts_shape), tuple(probs_shape))
    except ValueError:
        raise ValueError(f"counts and probs must have compatible batch dimensions: {list(counts_shape)} vs. "
                         f"{list(probs_shape)}") from None
    if len(both) > len(shape) or tuple(shape[len(shape) - len(both):]) != both:
        raise ValueError("Shape passed in must end with broadcasted shape.")
    n_batch = int(np.prod(both, dtype=np.int64))
    return both, n_batch, int(np.prod(shape[:len(shape) - len(both)], dtype=np.int64))


def _binomial_kernel(attrs, key, counts, probs):
    shape, dtype = attrs["shape"], attrs["dtype"]
    both, n_batch, per = binomial_layout(shape, counts.shape, probs.shape)
    if int(np.prod(shape, dtype=np.int64)) == 0:
        return np.zeros(shape, dtype=dtype.np)
    counts, probs = (np.broadcast_to(v, both).reshape(-1) for v in (counts, probs))
    out = philox_rejection.binomial(stream(attrs, key), counts, probs, per)
    return np.ascontiguousarray(_cast_double(out, dtype)).reshape(shape)


def _binomial_infer(shapes, dts, attrs):
    check_key(shapes[0], dts[0], attrs["key_from"])
    if dts[1] != dts[2] or dts[1] not in (dtypes.float16, dtypes.float32, dtypes.float64):
        raise TypeError(f"counts and probs must both be half, float or double, got {dts[1].name} and {dts[2].name}")
    return [(attrs["shape"], attrs["dtype"])]


register("StatelessRandomBinomial", infer=_binomial_infer, kernel=_binomial_kernel, grad=NOT_DIFFERENTIABLE,
         kind="other", denormals="flush", lowering="interpreter")


# ---------------------------------------------------------------- stateful ops
def _stream_for(op_type, dtype, op_seed):
    seeds = random_ops._seeds(op_seed)
    if seeds is not None and context.executing_eagerly():
        # (random_ops.set_seed clears these, as it restarts TF's eager kernels' streams)
        return random_ops._eager_samplers.setdefault((op_type, dtype.name, seeds), random_ops.PhiloxStream(seeds))
    return random_ops.PhiloxStream(seeds)


def _stateful_infer(shapes, dts, attrs):
    params = shapes[0]
    return [(tuple(attrs["shape"]) + (tuple(params) if params is not None else ()), attrs["dtype"])]


def _stateful_kernel(kind):
    def kernel(attrs, *args):
        params = args[-1]     # (the interpreter passes a stateful kernel its variable store first)
        shape = tuple(attrs["shape"]) + np.shape(params)
        n = int(np.prod(shape, dtype=np.int64))
        if int(np.prod(attrs["shape"], dtype=np.int64)) == 0:
            return np.zeros(shape, dtype=attrs["dtype"].np)
        st = attrs["stream"].reserve(n * philox_rejection.RESERVED_CALLS)
        return _sample(kind, st, params, shape, attrs["dtype"])
    return kernel


register("RandomGamma", infer=_stateful_infer, kernel=_stateful_kernel("gamma"), grad=_random_gamma_grad,
         kind="other", stateful=True, denormals="flush", lowering="interpreter")
register("RandomPoisson", infer=_stateful_infer, kernel=_stateful_kernel("poisson"), grad=NOT_DIFFERENTIABLE,
         kind="other", stateful=True, denormals="flush", lowering="interpreter")


# ---------------------------------------------------------------- the public API
def _attr_error(attr, dtype, allowed):
    """TF's error for a dtype an op does not take: InvalidArgumentError when eager, TypeError
    while building a graph."""
    msg = f"Value for attr '{attr}' of {dtype.name} is not in the list of allowed values: {allowed}"
    return InvalidArgumentError(msg) if context.executing_eagerly() else TypeError(msg)


def _gamma_params(alpha, beta, dtype):
    dtype = dtypes.as_dtype(dtype)
    if not dtype.is_floating:
        raise TypeError(f"Cannot convert alpha to EagerTensor of dtype {dtype.name}")
    if dtype not in _GAMMA_DTYPES:
        raise _attr_error("dtype", dtype, "half, float, double")
    alpha = convert_to_tensor(alpha, dtype=dtype)
    beta = convert_to_tensor(1 if beta is None else beta, dtype=dtype)
    if not (alpha.shape.is_fully_defined() and beta.shape.is_fully_defined()):
        raise NotImplementedError("jitgrad's gamma sampler needs alpha's and beta's shapes known when the graph "
                                  "is built.")
    both = np.broadcast_shapes(tuple(alpha.shape.as_list()), tuple(beta.shape.as_list()))
    return dtype, broadcast_to(alpha, list(both)), beta


def _scaled_gamma(raw, beta, dtype):
    """TF's wrapper: max(tiny, sample / beta)."""
    return maximum(convert_to_tensor(np.finfo(dtype.np).tiny, dtype=dtype), truediv(raw, beta))


def stateless_gamma(shape, seed, alpha, beta=None, dtype=dtypes.float32, name=None):
    """``tf.random.stateless_gamma``: Gamma(alpha, beta) draws of the full ``shape`` (which
    ends with alpha's and beta's broadcast shape)."""
    dtype, alpha, beta = _gamma_params(alpha, beta, dtype)
    attrs = {"shape": static_shape(shape), "dtype": dtype, "key_from": "seed"}
    raw = apply_op("StatelessRandomGamma", [seed_tensor(seed), alpha], attrs, name="StatelessRandomGamma")
    return _scaled_gamma(raw, beta, dtype)


def stateless_poisson(shape, seed, lam, dtype=dtypes.int32, name=None):
    """``tf.random.stateless_poisson``: Poisson(lam) draws of the full ``shape`` (ending
    with lam's shape)."""
    dtype = dtypes.as_dtype(dtype)
    if dtype not in _POISSON_DTYPES:
        raise _attr_error("dtype", dtype, "half, float, double, int32, int64")
    attrs = {"shape": static_shape(shape), "dtype": dtype, "key_from": "seed"}
    return apply_op("StatelessRandomPoisson", [seed_tensor(seed), convert_to_tensor(lam)], attrs,
                    name=name or "StatelessRandomPoisson")


def binomial_from(key, key_from, shape, counts, probs, dtype, name):
    """A StatelessRandomBinomial draw from ``key`` (a seed pair or a Generator's state)."""
    dtype = dtypes.as_dtype(dtype)
    if dtype not in _POISSON_DTYPES:
        raise _attr_error("dtype", dtype, "half, float, double, int32, int64")
    attrs = {"shape": static_shape(shape), "dtype": dtype, "key_from": key_from}
    if callable(key):
        key = key(counts, probs)
    return apply_op("StatelessRandomBinomial", [key, counts, probs], attrs, name=name or "StatelessRandomBinomial")


def stateless_binomial(shape, seed, counts, probs, output_dtype=dtypes.int32, name=None):
    """``tf.random.stateless_binomial``: Binomial(counts, probs) draws of the full ``shape``
    (ending with counts' and probs' broadcast shape)."""
    probs = convert_to_tensor(probs, preferred_dtype=dtypes.float32)
    counts = convert_to_tensor(counts, preferred_dtype=probs.dtype)
    return binomial_from(seed_tensor(seed), "seed", shape, counts, probs, output_dtype, name)


def gamma(shape, alpha, beta=None, dtype=dtypes.float32, seed=None, name=None):
    """``tf.random.gamma``: ``shape`` draws from each Gamma(alpha, beta) (output shape
    shape + broadcast(alpha, beta).shape)."""
    dtype, alpha, beta = _gamma_params(alpha, beta, dtype)
    attrs = {"shape": static_shape(shape), "dtype": dtype, "seed": seed,
             "stream": _stream_for("RandomGamma", dtype, seed)}
    return _scaled_gamma(apply_op("RandomGamma", [alpha], attrs, name="RandomGamma"), beta, dtype)


def poisson(shape, lam, dtype=dtypes.float32, seed=None, name=None):
    """``tf.random.poisson``: ``shape`` draws from each Poisson(lam) (output shape
    shape + lam.shape)."""
    dtype = dtypes.as_dtype(dtype)
    if dtype not in _POISSON_DTYPES:
        raise _attr_error("dtype", dtype, "half, float, double, int32, int64")
    attrs = {"shape": static_shape(shape), "dtype": dtype, "seed": seed,
             "stream": _stream_for("RandomPoisson", dtype, seed)}
    return apply_op("RandomPoisson", [convert_to_tensor(lam)], attrs, name=name or "RandomPoisson")


def poisson_v1(lam, shape, dtype=dtypes.float32, seed=None, name=None):
    """``tf.compat.v1.random.poisson``: lam first."""
    return poisson(shape, lam, dtype=dtype, seed=seed, name=name)
