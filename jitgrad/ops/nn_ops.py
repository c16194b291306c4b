"""Softmax family, written as compositions of primitive ops so the compiler fuses
them; softmax / log_softmax (softmax.py) and softmax_cross_entropy_with_logits
(SoftmaxXentLoss) carry TF's gradients, the rest the primitives' rules."""
import numbers
import numpy as np

from ..convert import is_tensorlike, convert_all, convert_to_tensor, graph_of
from .. import dtypes
from ..errors import InvalidArgumentError, shape_error
from ..shapes import as_shape
from .array_ops import broadcast_to, expand_dims, gather, _static_value, reshape, squeeze
from .math_ops import (add, cast, exp, greater_equal, identity, is_finite, log, log1p, maximum, multiply, negative,
                       realdiv, reciprocal, rsqrt, sigmoid, softplus, square, stop_gradient, subtract, where, zeros_like)
from .reduction_ops import static_int, reduce_max, reduce_sum, reduce_mean
from .registry import apply_op, register
from . import random_ops
from .softmax import log_softmax, shifted, softmax
from .clip_ops import clip_by_norm
from .math_ops import squared_difference
from .math_ops import not_equal, softsign
from .math_ops import selu as selu_op
from .math_ops import erfc, pow as pow_, tanh


def _xent_grad(op, g):
    """TF's gradient of its fused SoftmaxCrossEntropyWithLogits (nn_grad.py):
    d/dlogits = g[..., None] * (softmax(logits) - labels) -- the kernel's backprop
    output, which is not the exact sum(labels) * softmax - labels when the labels
    do not sum to 1 -- and d/dlabels = g[..., None] * -log_softmax(logits).
    Differentiating d/dlogits again, TF reaches logits only (through softmax;
    the labels are a constant there): hence stop_gradient(labels)."""
    _, logits, labels = op.inputs
    axis = op.get_attr("axis")
    rank = logits.shape.rank
    if rank is not None:
        axis %= rank
    ge = expand_dims(g, axis)
    return [None, multiply(ge, subtract(softmax(logits, axis), stop_gradient(labels))),
            multiply(ge, negative(log_softmax(logits, axis)))]


def _xent_check(shapes, attrs):
    """What TF rejects when the class dimension is empty (tf_fuzz seed 130138), for the run's
    logits shape. TF's Python wrappers reshape logits of rank != 2 to [-1, classes], and TF's
    Reshape leaves zero-sized dims out when it infers the -1: a [P, 0] matrix, P the product
    of the non-zero outer dims. The dense kernel then makes P losses, which fail the reshape
    back to the outer shape when that is empty (an empty class dim alone is fine: zero losses).
    The sparse kernel rejects P rows against the labels' real count L, or else no classes."""
    s = shapes[1]
    if s is None or len(s) == 0:
        return
    axis = attrs["axis"] % len(s)
    if s[axis] != 0:
        return
    outer = [d for i, d in enumerate(s) if i != axis]
    count = int(np.prod(outer))
    rows = count if len(s) == 2 and attrs.get("sparse") else int(np.prod([d for d in outer if d != 0]))
    if attrs.get("sparse"):
        if rows != count:
            raise ValueError(f"logits and labels must have the same first dimension, got logits shape "
                             f"[{rows},0] and labels shape [{count}]")
        raise ValueError(f"Must have at least one class, but got logits shape [{rows},0]")
    if rows != count:
        raise ValueError(f"Input to reshape is a tensor with {rows} values, but the requested shape has {count}")


def _xent_kernel(attrs, loss, logits, labels):
    try:
        _xent_check((None, logits.shape), attrs)
    except ValueError as e:
        raise InvalidArgumentError(str(e)) from None   # (TF's message, no op-name prefix)
    return loss


# Value: its first input (the loss, computed from logits and labels by the
# primitives), so at run time it is an identity (passes/stop_gradient.py removes
# it); the gradient is TF's (_xent_grad), never the primitives'. TF's run-time
# checks of the logits shape (_xent_check) are made by its kernel (eager, the
# interpreter) and by the compiler on each run's concrete shapes (run_check), so
# they cost nothing in the generated code.
register("SoftmaxXentLoss", infer=lambda shapes, dts, attrs: [(shapes[0], dts[0])], run_check=_xent_check,
         kernel=_xent_kernel, grad=_xent_grad, kind="other", identity=True, lowering="none")


def softmax_cross_entropy_with_logits(labels=None, logits=None, axis=-1, name=None):
    return _softmax_xent(labels, logits, axis, name, sparse=False)


def softmax_cross_entropy_with_logits_v1(labels=None, logits=None, dim=-1, name=None, axis=None):
    """``tf.compat.v1.nn.softmax_cross_entropy_with_logits``: TF 1's, with no gradient into the
    labels (TF: stop_gradient(labels)) and ``dim``, of which ``axis`` is an alias."""
    if labels is None or logits is None:
        raise ValueError("Both labels and logits must be provided.")
    dim = axis if axis is not None else dim
    (logits,) = convert_all([logits])
    (labels,) = convert_all([labels], graph=graph_of([logits]))
    return softmax_cross_entropy_with_logits(labels=stop_gradient(labels), logits=logits, axis=dim, name=name)


def softmax_cross_entropy_with_logits_v2_v1(labels, logits, axis=None, name=None, dim=None):
    """``tf.compat.v1.nn.softmax_cross_entropy_with_logits_v2``: tf.nn's, with ``dim`` an alias of ``axis``."""
    axis = dim if axis is None else axis
    return softmax_cross_entropy_with_logits(labels=labels, logits=logits, axis=axis, name=name)


def _labels_broadcast_to_logits(labels, logits):
    """TF 2.21's SoftmaxCrossEntropyWithLogits broadcasts labels of another known shape to the
    logits' ([1, n] or [n] labels for [b, n] logits); anything else is its shape function's
    ValueError in a graph, the kernel's InvalidArgumentError eagerly."""
    a, b = labels.shape.as_list(), logits.shape.as_list()
    try:
        if None in a or None in b or list(np.broadcast_shapes(tuple(a), tuple(b))) != b:
            raise ValueError
    except ValueError:
        raise shape_error(f"logits and labels must be broadcastable: logits_size={b} labels_size={a}") from None
    return broadcast_to(labels, b)


def _softmax_xent(labels, logits, axis, name, sparse):
    if labels is None or logits is None:
        raise ValueError("Both labels and logits must be provided.")
    (logits,) = convert_all([logits])
    (labels,) = convert_all([labels], graph=graph_of([logits]))
    if labels.shape.dims is not None and logits.shape.dims is not None and \
            not labels.shape.is_compatible_with(logits.shape):
        labels = _labels_broadcast_to_logits(labels, logits)
    # As TF's nn_ops: float16 / bfloat16 logits are computed in float32 and the loss rounded
    # once; the labels are cast to the dtype computed in (any float or integer labels)
    half = logits.dtype in (dtypes.float16, dtypes.bfloat16)
    precise = cast(logits, dtypes.float32) if half else logits
    if labels.dtype != precise.dtype:
        labels = cast(labels, precise.dtype)
    # TF's kernel: sum(labels * (log(sum(exp(shifted))) - shifted)); -sum(labels * log_softmax)
    # is -0 where that is +0 (one class: a following rsqrt gave -inf, TF inf; tf_fuzz seed 122033)
    axis = -1 if axis is None else axis
    s = shifted(precise, axis)
    per_class = subtract(log(reduce_sum(exp(s), axis, keepdims=True)), s)
    # sparse: TF's kernel reads the label's class only; 0 * (lse - s) would be NaN for a
    # -inf logit of another class (a masked logit), where TF's loss is finite
    loss = reduce_sum(where(not_equal(labels, zeros_like(labels)), per_class, zeros_like(per_class)) if sparse
                      else multiply(labels, per_class), axis)
    loss = apply_op("SoftmaxXentLoss", [loss, precise, labels], {"axis": static_int(axis, "the axis"), "sparse": sparse},
                    name=name or "softmax_cross_entropy_with_logits")
    return cast(loss, logits.dtype) if half else loss


def sparse_softmax_cross_entropy_with_logits(labels=None, logits=None, name=None):
    (logits,) = convert_all([logits])
    n = logits.shape[-1] if logits.shape.rank else None
    if n is None:
        raise ValueError("sparse_softmax_cross_entropy_with_logits needs a known number of classes")
    # One-hot rows gathered from an identity table (not tf.one_hot, whose
    # out-of-range rows are all zeros): a label outside [0, n) raises, as TF's
    # CPU kernel does ("Received a label value of 5 which is outside the valid range").
    g = graph_of([labels, logits])
    onehot = gather(convert_to_tensor(np.eye(n, dtype=logits.dtype.np), graph=g), labels, axis=0)
    return _softmax_xent(onehot, logits, -1, name, sparse=True)


def reduce_logsumexp(input_tensor, axis=None, keepdims=False, name=None):
    """log(sum(exp(x))) computed stably: the max shift is a constant for differentiation.

    As TF's math_ops.reduce_logsumexp, a non-finite max (a row of -inf, or one
    holding +inf) shifts by 0 instead: such rows give -inf / +inf, not NaN."""
    (x,) = convert_all([input_tensor])
    raw_max = reduce_max(x, axis, keepdims=True)
    m = stop_gradient(where(is_finite(raw_max), raw_max, zeros_like(raw_max)))
    out = add(log(reduce_sum(exp(subtract(x, m)), axis, keepdims=True)), m)
    if not keepdims:
        out = reduce_sum(out, axis, keepdims=False)  # drops the kept size-1 axes; values unchanged
    return identity(out, name=name or "ReduceLogSumExp")


def sigmoid_cross_entropy_with_logits(labels=None, logits=None, name=None):
    """TF's stable form: max(x, 0) - x * z + log(1 + exp(-|x|))."""
    if labels is None or logits is None:
        raise ValueError("Both labels and logits must be provided.")
    logits, labels = convert_all([logits, labels])
    if not labels.shape.is_compatible_with(logits.shape):
        raise ValueError(f"logits and labels must have the same shape ({logits.shape} vs {labels.shape})")
    # Built with selects exactly as TF's nn_impl does (not relu/abs): at logits == 0
    # (+0 or -0) the cond branch is taken, so d/dlogits is 1 - z - 0.5, TF's value.
    cond = greater_equal(logits, zeros_like(logits))
    relu_logits = where(cond, logits, zeros_like(logits))
    neg_abs_logits = where(cond, negative(logits), logits)
    return add(subtract(relu_logits, multiply(logits, labels)), log1p(exp(neg_abs_logits)),
               name=name or "logistic_loss")


def bias_add(value, bias, data_format=None, name=None):
    (v, b) = convert_all([value, bias])
    if b.shape.rank not in (None, 1):
        raise ValueError(f"bias must be 1-D, got shape {b.shape}")
    if v.shape.rank is not None and v.shape.rank < 2:
        raise ValueError(f"value must have rank >= 2, got shape {v.shape}")
    if data_format is not None and data_format.startswith("NC"):
        # channels first (NCW, NCHW, NCDHW, NC...): the bias runs along axis 1
        if v.shape.rank is None:
            raise NotImplementedError("jitgrad's channels-first bias_add needs the rank of value.")
        b = reshape(b, [-1] + [1] * (v.shape.rank - 2))
    elif data_format not in (None, "NHWC", "N...C", "NWC", "NDHWC"):
        raise ValueError(f"`data_format` must be of the form `N...C` or `NC...`. Received: data_format={data_format}")
    return add(v, b, name=name or "BiasAdd")


def log_sigmoid(x, name=None):
    """-softplus(-x)"""
    return negative(softplus(negative(x)), name=name or "LogSigmoid")


def silu(features, beta=1.0, name=None):
    """``tf.nn.silu``: x * sigmoid(beta * x) with TF's custom gradient (nn_impl.swish),
    dy * s * (1 + beta * x * (1 - s)): differentiating the product instead rounded
    differently and gave +0 where TF gives -0 (x = -100: 0 * (1 - 100))."""
    (x,) = convert_all([features])
    b = cast(convert_to_tensor(beta), x.dtype)     # TF: a float32 beta, cast to x's dtype
    from ..custom_gradient import custom_gradient   # custom_gradient imports the op modules

    @custom_gradient
    def swish(x, b):
        def grad(dy):
            s = sigmoid(multiply(b, x))
            act = multiply(s, add(1.0, multiply(multiply(b, x), subtract(1.0, s))))
            beta_grad = reduce_sum(multiply(multiply(multiply(dy, square(x)), s), subtract(1.0, s)))
            return multiply(dy, act), beta_grad
        return multiply(x, sigmoid(multiply(b, x))), grad
    return identity(swish(x, b), name=name or "silu")


def l2_normalize(x, axis=None, epsilon=1e-12, name=None, dim=None):
    """``tf.math.l2_normalize`` / ``tf.nn.l2_normalize``, as TF's nn_impl:
    x * rsqrt(maximum(reduce_sum(square(x), axis, keepdims=True), epsilon)).
    ``dim`` is TF's deprecated alias of ``axis``."""
    if dim is not None:
        if axis is not None:
            raise ValueError("Cannot specify both 'axis' and 'dim'")
        axis = dim
    (x,) = convert_all([x])
    square_sum = reduce_sum(square(x), axis, keepdims=True)
    x_inv_norm = rsqrt(maximum(square_sum, epsilon))
    return multiply(x, x_inv_norm, name=name or "l2_normalize")


# ---------------------------------------------------------------- training composites
def _noise_shape(x, noise_shape):
    """TF's _get_noise_shape, but static (jitgrad's random ops need static
    shapes): x's shape, or noise_shape with its unknown dimensions taken from x."""
    dims = x.shape.as_list() if noise_shape is None else None
    if noise_shape is not None:
        if is_tensorlike(noise_shape):
            noise_shape = _static_value(noise_shape, "the noise_shape of dropout")
        ns = as_shape(noise_shape).as_list()
        if x.shape.rank is not None and x.shape.rank == len(ns):
            ns = [d if d is not None else xd for d, xd in zip(ns, x.shape.as_list())]
        dims = ns
    if dims is None or any(d is None for d in dims):
        raise NotImplementedError("jitgrad's dropout needs the shape of x (or noise_shape) known when the graph "
                                  "is built (its random ops have static shapes).")
    return dims


def dropout(x, rate, noise_shape=None, seed=None, name=None, uniform_sampler=None):
    """``tf.nn.dropout`` (TF 2's dropout_v2): where(uniform >= rate, x / (1 - rate), 0).
    A Python rate scales by 1 / (1 - rate) computed in Python, as TF; a tensor rate
    divides by (1 - rate). rate 0 returns x (still consuming an op seed, as TF, so
    the draws of later random ops do not change). ``uniform_sampler(shape, dtype)``
    replaces the seeded tf.random.uniform (TF's _dropout: stateless_dropout, Keras's)."""
    is_rate_number = isinstance(rate, numbers.Real) and not isinstance(rate, bool)
    if is_rate_number and (rate < 0 or rate >= 1):
        raise ValueError(f"`rate` must be a scalar tensor or a float in the range [0, 1). Received: rate={rate}")
    (x,) = convert_all([x])
    if not x.dtype.is_floating:
        raise ValueError("`x.dtype` must be a floating point tensor as `x` will be scaled. "
                         f"Received: x_dtype={x.dtype.name}")
    if is_rate_number and rate == 0:
        if uniform_sampler is None:
            random_ops._seeds(seed)   # TF's dummy_rng_step: the op-seed sequence advances anyway
        return x
    g = graph_of([x, rate])
    if is_rate_number:
        scale = convert_to_tensor(np.array(1 / (1 - rate), x.dtype.np), graph=g)
        ret = multiply(x, scale)
    elif is_tensorlike(rate):
        (rate,) = convert_all([rate], graph=g)
        if rate.shape.rank is not None and rate.shape.rank != 0:
            raise ValueError(f"Shape {rate.shape} must have rank 0")
        if rate.dtype != x.dtype:
            if not rate.dtype.is_floating:
                raise ValueError(f"`x.dtype` ({x.dtype.name}) and `rate.dtype` ({rate.dtype.name}) must be "
                                 "compatible.")
            rate = cast(rate, x.dtype)
        ret = realdiv(x, subtract(convert_to_tensor(np.array(1, x.dtype.np), graph=g), rate))
    else:
        raise ValueError(f"`rate` must be a scalar or scalar tensor. Received: rate={rate}")
    shape = _noise_shape(x, noise_shape)
    random_tensor = (uniform_sampler(shape, x.dtype) if uniform_sampler is not None
                     else random_ops.uniform(shape, dtype=x.dtype, seed=seed))
    keep_mask = greater_equal(random_tensor, rate)
    return where(keep_mask, ret, convert_to_tensor(np.array(0, x.dtype.np), graph=g), name=name or "dropout")


def dropout_v1(x, keep_prob=None, noise_shape=None, seed=None, name=None, rate=None):
    """``tf.compat.v1.nn.dropout``: keep_prob (deprecated) or rate."""
    if keep_prob is not None:
        if rate is not None:
            raise ValueError("Cannot specify both 'keep_prob' and 'rate'.")
        rate = 1 - keep_prob   # as TF: dropout then validates the rate (keep_prob 0 -> rate 1: ValueError)
    elif rate is None:
        raise ValueError(f"`rate` must be provided. Received: rate={rate}")
    return dropout(x, rate, noise_shape=noise_shape, seed=seed, name=name)


def moments(x, axes, shift=None, keepdims=False, name=None):
    """``tf.nn.moments``: (mean, population variance) over ``axes``, as TF's
    nn_impl.moments: the variance is mean(squared_difference(x, stop_gradient(mean)))
    (stop_gradient changes nothing: that gradient is zero). ``shift`` is unused, as in TF."""
    (x,) = convert_all([x])
    # As TF: float16 statistics are computed in float32 (float16's range is too small for them:
    # a variance of values near 300 overflowed to inf) and cast back
    y = cast(x, dtypes.float32) if x.dtype == dtypes.float16 else x
    mean = reduce_mean(y, axes, keepdims=True)
    variance = reduce_mean(squared_difference(y, stop_gradient(mean)), axes, keepdims=True)
    if not keepdims:
        mean, variance = squeeze(mean, axes), squeeze(variance, axes)
    if x.dtype == dtypes.float16:
        mean, variance = cast(mean, dtypes.float16), cast(variance, dtypes.float16)
    prefix = name or "moments"
    return identity(mean, name=prefix + "_mean"), identity(variance, name=prefix + "_variance")


def normalize_moments(counts, mean_ss, variance_ss, shift, name=None):
    """``tf.nn.normalize_moments``: (mean, variance) from sufficient statistics, composed as TF's
    nn_impl: divisor = 1 / counts, shifted = mean_ss * divisor, mean = shifted (+ shift),
    variance = variance_ss * divisor - shifted ** 2."""
    counts, mean_ss, variance_ss = convert_all([counts, mean_ss, variance_ss])
    divisor = reciprocal(counts)
    shifted_mean = multiply(mean_ss, divisor)
    mean = add(shifted_mean, shift) if shift is not None else shifted_mean
    variance = subtract(multiply(variance_ss, divisor), square(shifted_mean))
    prefix = name or "normalize"
    return identity(mean, name=prefix + "_mean"), identity(variance, name=prefix + "_variance")


def batch_normalization(x, mean, variance, offset, scale, variance_epsilon, name=None):
    """``tf.nn.batch_normalization``, composed as TF's nn_impl (same order of ops):
    inv = rsqrt(variance + eps) * scale; x * inv + (offset - mean * inv)."""
    (x,) = convert_all([x])
    inv = rsqrt(add(variance, variance_epsilon))
    if scale is not None:
        inv = multiply(inv, scale)
    shift = subtract(offset, multiply(mean, inv)) if offset is not None else negative(multiply(mean, inv))
    return add(multiply(x, cast(inv, x.dtype)), cast(shift, x.dtype), name=name or "batchnorm")


def embedding_lookup(params, ids, max_norm=None, name=None):
    """``tf.nn.embedding_lookup`` for one params tensor (or a list of one): a
    gather along axis 0; ``max_norm`` clips each looked-up embedding with
    clip_by_norm, as TF's _clip. Sharded params (a longer list) are not supported."""
    if isinstance(params, (list, tuple)):
        if not params:
            raise ValueError("Need at least one param")
        if len(params) > 1:
            raise NotImplementedError("jitgrad's embedding_lookup supports a single params tensor, "
                                      "not sharded params.")
        params = params[0]
    result = gather(params, ids, user=True)
    if max_norm is not None:
        ids_rank, rank = convert_all([ids])[0].shape.rank, result.shape.rank
        if ids_rank is None or rank is None:
            raise NotImplementedError("jitgrad's embedding_lookup with max_norm needs ids and params of known rank.")
        result = clip_by_norm(result, max_norm, axes=list(range(ids_rank, rank)))
    return identity(result, name=name or "embedding_lookup")


def selu(features, name=None):
    """``tf.nn.selu``: one op, as TF's (ops/math_ops.py: its gradient branches on the output)."""
    return selu_op(features, name=name or "Selu")


def gelu(features, approximate=False, name=None):
    """``tf.nn.gelu``, both forms composed as TF's: exact (the default)
    0.5 x erfc(-x / sqrt(2)), which keeps the negative tail accurate
    (gelu(-5) = -1.4e-6 relative to itself, where 1 + erf would round it to 0
    in float32); approximate=True 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    (x,) = convert_all([features])
    if not x.dtype.is_floating:
        raise ValueError(f"`features.dtype` must be a floating point tensor.Received:features.dtype={x.dtype.name}")
    if not approximate:
        # TF: 0.5 * features * erfc(-features * cast(0.7071067811865476, dtype)); the cast is of a
        # float32 constant, so float64 gets float32's 1/sqrt(2) too (as with coeff below).
        c = float(np.float32(0.7071067811865476))
        return multiply(multiply(0.5, x), erfc(multiply(negative(x), c)), name=name or "Gelu")
    # TF's coeff is cast(0.044715, dtype): a float32 constant first, so float64 gets float32's 0.044715 too.
    coeff = float(np.float32(0.044715))
    inner = multiply(add(x, multiply(pow_(x, 3.0), coeff)), 0.7978845608028654)
    return multiply(multiply(x, 0.5), add(tanh(inner), 1.0), name=name or "Gelu")
