"""Systematic sweep of values, gradients and second derivatives against real TensorFlow:

    PYTHONPATH=. /work/benchenv/bin/python bench/tf_second_order_sweep.py [--ops relu,abs] [--points ties,zeros]
        [--dtypes float32,float64] [--modes compiled,interpret,eager] [--quiet]

The fuzzer (bench/tf_fuzz.py) draws random programs, which rarely land on the points where a
derivative rule is delicate: ties of max/min, relu/abs at 0, clip at its bounds, sqrt / norm at 0,
x equal to its mean inside a variance (reduce_variance was mean(square(abs(x - mean))): the abs's
sign factor broke the Hessian exactly there), overflow of logsumexp / softmax, inf and NaN inputs.
This sweep runs EVERY differentiable op and composite in the catalogue below on EVERY point kind:

  random   normal draws            ties    values in {-1, 0, 0.5} (equal elements; relu/abs at 0;
  const    all elements equal              clip_by_value(-1, 0.5) at its bounds; a binary op's
  zeros    all zero                        operands equal)
  zmix     random with zeros       mean    rows a + b*linspace(-1, 1, n): the middle element is
  large    +-{50, 100, 1e4, 1e30}          the row's mean (and the whole tensor's)
  small    normal * 1e-20          inf     random with +-inf        nan   random with a NaN

For a binary op the second operand at `zeros` is a mix of {0, 2, 0.5, 1, -1, 3} (0 ** 0,
divide_no_nan(x, 0), 0 / 0) and at `ties` / `const` equals the first (maximum(x, x)).

Each (op, point, dtype) is run as
  graph    tf.compat.v1 Graph + Session: the outputs, tf.gradients(outs, xs, grad_ys=random) and
           tf.hessians(sum(w * outs), xs); jitgrad compiled AND jitgrad_mode="interpret";
  eager    a nested GradientTape: the outputs, the tape gradient with random output_gradients and
           the second tape's Hessian-vector product d(sum(v * grad))/dx with a random v.
and compared with TF by bench/tf_fuzz.py's rules (`compare`: dtype, shape, tolerance 1e-4 rel +
1e-5 abs, NaN/inf patterns, denormals flushed, exception class by name). A float32 mismatch is
rerun in float64 by TF: if TF's float64 results rounded to float32 agree with jitgrad's, it is
counted as a TF float32 artifact. An op jitgrad lacks (AttributeError / NotImplementedError) is
counted as unsupported; a TF LookupError (no gradient rule for a second derivative) as
"TF lacks a gradient". Mismatches listed in KNOWN (README "Known differences from TensorFlow")
are counted as known; everything else is printed as MISMATCH with its reproducer
(--ops NAME --points POINT --dtypes DTYPE).

TensorFlow is not a dependency of jitgrad: this is a tool, never needed by the tests.
"""
import argparse
import collections
import os
import sys
import traceback
import zlib

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")      # TF's reference kernels (see tf_fuzz.py)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tf_fuzz import (UNSUPPORTED, _float32_of_float64_matches, attempt, compare,  # noqa: E402
                     tf_lacks_gradient)

# ------------------------------------------------------------------- points

POINTS = ["random", "ties", "const", "zeros", "zmix", "mean", "large", "small", "inf", "nan"]


def _rng(*key):
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def point_value(kind, shape, k, positive=False):
    """Input k (0, 1, ...) of an op at point `kind`, float64 (cast to the dtype at run time)."""
    if kind == "ties" and k > 0:            # maximum(x, x), squared_difference(x, x), ...
        return point_value(kind, shape, 0, positive)
    rng = _rng(kind, shape, k)
    n = int(np.prod(shape)) if shape else 1
    r = rng.normal(size=shape)
    if kind == "random":
        v = r
    elif kind == "ties":
        v = rng.choice([-1.0, 0.0, 0.5], size=shape)
        if n >= 3:                      # a tie of the largest value, and a 0
            v.reshape(-1)[:3] = [0.5, 0.5, 0.0]
    elif kind == "const":
        v = np.full(shape, 0.75)
    elif kind == "zeros":
        v = np.zeros(shape) if k == 0 else rng.choice([0.0, 2.0, 0.5, 1.0, -1.0, 3.0], size=shape)
    elif kind == "zmix":
        v = np.where(rng.uniform(size=shape) < 0.5, 0.0, r)
    elif kind == "mean":
        last = shape[-1] if shape else 1
        base = np.linspace(-1.0, 1.0, last) if last > 1 else np.zeros(1)
        v = (0.3 + 1.5 * np.broadcast_to(base, shape)).copy() if shape else np.asarray(0.3)
    elif kind == "large":
        v = rng.choice([-1.0, 1.0], size=shape) * rng.choice([50.0, 100.0, 1e4, 1e30], size=shape)
    elif kind == "small":
        v = r * 1e-20
    elif kind == "inf":
        v = r.copy()
        v.reshape(-1)[: min(2, n)] = [np.inf, -np.inf][: min(2, n)]
    elif kind == "nan":
        v = r.copy()
        v.reshape(-1)[0] = np.nan
    else:
        raise ValueError(kind)
    v = np.asarray(v, np.float64)
    if positive and kind in ("random", "mean"):      # log-domain ops also see negatives at other points
        v = np.abs(v) + 0.1
    return v


# ---------------------------------------------------------------- op catalogue
# name -> Op(builder(tf, *xs) -> tensor or tuple, input shapes, positive)

class Op:
    def __init__(self, fn, shapes=((2, 3),), positive=False, second_like_first=True):
        self.fn, self.shapes, self.positive = fn, shapes, positive
        self.second_like_first = second_like_first


def _u(fn, **kw):
    return Op(lambda tf, x: fn(tf, x), **kw)


def _b(fn, **kw):
    return Op(lambda tf, a, b: fn(tf, a, b), shapes=((2, 3), (2, 3)), **kw)


def _labels_soft(tf, shape, dtype):
    v = _rng("labels", shape).uniform(size=shape)
    return tf.constant((v / v.sum(-1, keepdims=True)).astype(dtype))


def _spd(tf, x):
    """A symmetric positive definite matrix from x (3, 3): x x^T + 3 I."""
    return tf.matmul(x, x, transpose_b=True) + 3.0 * tf.eye(3, dtype=x.dtype)


OPS = {
    # elementwise unary
    "abs": _u(lambda tf, x: tf.abs(x)), "neg": _u(lambda tf, x: tf.negative(x)),
    "exp": _u(lambda tf, x: tf.exp(x)), "log": _u(lambda tf, x: tf.math.log(x), positive=True),
    "log1p": _u(lambda tf, x: tf.math.log1p(x), positive=True), "expm1": _u(lambda tf, x: tf.math.expm1(x)),
    "sqrt": _u(lambda tf, x: tf.sqrt(x), positive=True), "rsqrt": _u(lambda tf, x: tf.math.rsqrt(x), positive=True),
    "square": _u(lambda tf, x: tf.square(x)), "reciprocal": _u(lambda tf, x: tf.math.reciprocal(x)),
    "sin": _u(lambda tf, x: tf.sin(x)), "cos": _u(lambda tf, x: tf.cos(x)), "tan": _u(lambda tf, x: tf.math.tan(x)),
    "tanh": _u(lambda tf, x: tf.tanh(x)), "sigmoid": _u(lambda tf, x: tf.sigmoid(x)),
    "softplus": _u(lambda tf, x: tf.nn.softplus(x)), "softsign": _u(lambda tf, x: tf.math.softsign(x)),
    "relu": _u(lambda tf, x: tf.nn.relu(x)), "relu6": _u(lambda tf, x: tf.nn.relu6(x)),
    "elu": _u(lambda tf, x: tf.nn.elu(x)), "selu": _u(lambda tf, x: tf.nn.selu(x)),
    "leaky_relu": _u(lambda tf, x: tf.nn.leaky_relu(x, alpha=0.2)),
    "gelu": _u(lambda tf, x: tf.nn.gelu(x)), "gelu_tanh": _u(lambda tf, x: tf.nn.gelu(x, approximate=True)),
    "silu": _u(lambda tf, x: tf.nn.silu(x)), "log_sigmoid": _u(lambda tf, x: tf.math.log_sigmoid(x)),
    "erf": _u(lambda tf, x: tf.math.erf(x)), "erfc": _u(lambda tf, x: tf.math.erfc(x)),
    "floor": _u(lambda tf, x: tf.floor(x)), "ceil": _u(lambda tf, x: tf.math.ceil(x)),
    "round": _u(lambda tf, x: tf.round(x)), "sign": _u(lambda tf, x: tf.sign(x)),
    "clip_by_value": _u(lambda tf, x: tf.clip_by_value(x, -1.0, 0.5)),
    "pow_2": _u(lambda tf, x: tf.pow(x, 2.0)), "pow_3": _u(lambda tf, x: tf.pow(x, 3.0)),
    "pow_half": _u(lambda tf, x: tf.pow(x, 0.5)), "pow_m1": _u(lambda tf, x: tf.pow(x, -1.0)),
    "pow_0": _u(lambda tf, x: tf.pow(x, 0.0)),
    "l2_normalize": _u(lambda tf, x: tf.math.l2_normalize(x, axis=-1)),
    "l2_normalize_all": _u(lambda tf, x: tf.nn.l2_normalize(x)),
    "where_nan": _u(lambda tf, x: tf.where(tf.math.is_nan(x), tf.zeros_like(x), x * x)),
    "where_sqrt": _u(lambda tf, x: tf.where(x > 0, tf.sqrt(tf.abs(x)), tf.zeros_like(x))),
    # elementwise binary
    "add": _b(lambda tf, a, b: a + b), "sub": _b(lambda tf, a, b: a - b), "mul": _b(lambda tf, a, b: a * b),
    "div": _b(lambda tf, a, b: a / b), "floordiv": _b(lambda tf, a, b: tf.math.floordiv(a, b)),
    "floormod": _b(lambda tf, a, b: tf.math.floormod(a, b)),
    "maximum": _b(lambda tf, a, b: tf.maximum(a, b)), "minimum": _b(lambda tf, a, b: tf.minimum(a, b)),
    "pow": _b(lambda tf, a, b: tf.pow(a, b)), "squared_difference": _b(lambda tf, a, b: tf.math.squared_difference(a, b)),
    "divide_no_nan": _b(lambda tf, a, b: tf.math.divide_no_nan(a, b)),
    "multiply_no_nan": _b(lambda tf, a, b: tf.math.multiply_no_nan(a, b)),
    "xlogy": _b(lambda tf, a, b: tf.math.xlogy(a, b)), "xdivy": _b(lambda tf, a, b: tf.math.xdivy(a, b)),
    "xlog1py": _b(lambda tf, a, b: tf.math.xlog1py(a, b)),
    "xlogy_bc": Op(lambda tf, a, b: tf.math.xlogy(a, b), shapes=((2, 3), (3,))),
    "add_n": _b(lambda tf, a, b: tf.add_n([a, b, a])),
    # broadcasting (the gradient of the (3,) operand sums over rows)
    "maximum_bc": Op(lambda tf, a, b: tf.maximum(a, b), shapes=((2, 3), (3,))),
    "minimum_bc": Op(lambda tf, a, b: tf.minimum(a, b), shapes=((2, 3), (3,))),
    "pow_bc": Op(lambda tf, a, b: tf.pow(a, b), shapes=((2, 3), (3,))),
    "div_bc": Op(lambda tf, a, b: a / b, shapes=((2, 3), (1, 3))),
    "divide_no_nan_bc": Op(lambda tf, a, b: tf.math.divide_no_nan(a, b), shapes=((2, 3), (3,))),
    "squared_difference_bc": Op(lambda tf, a, b: tf.math.squared_difference(a, b), shapes=((2, 3), (2, 1))),
    "where": _b(lambda tf, a, b: tf.where(a >= b, a, b)),
    "clip_by_value_t": _b(lambda tf, a, b: tf.clip_by_value(a, -tf.abs(b), tf.abs(b))),
    # reductions
    "reduce_sum": _u(lambda tf, x: tf.reduce_sum(x, axis=-1)), "reduce_mean": _u(lambda tf, x: tf.reduce_mean(x)),
    "reduce_max": _u(lambda tf, x: tf.reduce_max(x, axis=-1)), "reduce_max_all": _u(lambda tf, x: tf.reduce_max(x)),
    "reduce_min": _u(lambda tf, x: tf.reduce_min(x, axis=0)), "reduce_min_all": _u(lambda tf, x: tf.reduce_min(x)),
    "reduce_prod": _u(lambda tf, x: tf.reduce_prod(x, axis=-1)),
    "reduce_logsumexp": _u(lambda tf, x: tf.reduce_logsumexp(x, axis=-1)),
    "reduce_logsumexp_all": _u(lambda tf, x: tf.math.reduce_logsumexp(x)),
    "reduce_variance": _u(lambda tf, x: tf.math.reduce_variance(x, axis=-1)),
    "reduce_variance_all": _u(lambda tf, x: tf.math.reduce_variance(x)),
    "reduce_std": _u(lambda tf, x: tf.math.reduce_std(x, axis=-1)),
    "reduce_std_all": _u(lambda tf, x: tf.math.reduce_std(x, keepdims=True)),
    "reduce_euclidean_norm": _u(lambda tf, x: tf.math.reduce_euclidean_norm(x, axis=-1)),
    "l2_loss": _u(lambda tf, x: tf.nn.l2_loss(x)),
    "norm": _u(lambda tf, x: tf.norm(x)), "norm_1": _u(lambda tf, x: tf.norm(x, ord=1, axis=-1)),
    "norm_inf": _u(lambda tf, x: tf.norm(x, ord=np.inf, axis=-1)),
    "norm_fro": _u(lambda tf, x: tf.norm(x, ord="fro", axis=[0, 1])),
    "global_norm": _b(lambda tf, a, b: tf.linalg.global_norm([a, b])),
    "cumsum": _u(lambda tf, x: tf.math.cumsum(x, axis=-1)),
    "cumprod": _u(lambda tf, x: tf.math.cumprod(x, axis=-1)),
    "cumprod_ex_rev": _u(lambda tf, x: tf.math.cumprod(x, axis=-1, exclusive=True, reverse=True)),
    "argmax_gather": _u(lambda tf, x: tf.gather(tf.reshape(x, [-1]), tf.argmax(tf.reshape(x, [-1])))),
    "argmin_gather": _u(lambda tf, x: tf.gather(x, tf.math.argmin(x, axis=0), axis=1)),
    "top_k": _u(lambda tf, x: tf.math.top_k(x, k=2).values),
    "sort": _u(lambda tf, x: tf.sort(x, axis=-1)),
    "sort_desc_0": _u(lambda tf, x: tf.sort(x * x, axis=0, direction="DESCENDING")),
    "top_k_1": _u(lambda tf, x: tf.nn.top_k(x * x, k=1).values),
    "segment_max": _u(lambda tf, x: tf.math.segment_max(tf.reshape(x, [-1]), [0, 0, 1, 1, 1, 2])),
    "segment_prod": _u(lambda tf, x: tf.math.segment_prod(x, [0, 0])),
    "segment_mean": _u(lambda tf, x: tf.math.segment_mean(tf.reshape(x, [-1]), [0, 0, 1, 1, 1, 3])),
    "unsorted_segment_max": _u(lambda tf, x: tf.math.unsorted_segment_max(x, [[1, 0, 1], [1, -1, 2]], 3)),
    "unsorted_segment_min": _u(lambda tf, x: tf.math.unsorted_segment_min(x, [1, 0], 3)),
    "unsorted_segment_prod": _u(lambda tf, x: tf.math.unsorted_segment_prod(tf.reshape(x, [-1]), [0, 1, 0, 1, 0, 2], 3)),
    "unsorted_segment_sqrt_n": _u(lambda tf, x: tf.math.unsorted_segment_sqrt_n(x, [0, 0], 2)),
    # nn
    "softmax": _u(lambda tf, x: tf.nn.softmax(x)), "softmax_0": _u(lambda tf, x: tf.nn.softmax(x, axis=0)),
    "log_softmax": _u(lambda tf, x: tf.nn.log_softmax(x)),
    "softmax_xent": _u(lambda tf, x: tf.nn.softmax_cross_entropy_with_logits(
        labels=_labels_soft(tf, (2, 3), x.dtype.name), logits=x)),
    "sparse_softmax_xent": _u(lambda tf, x: tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=tf.constant([2, 0]), logits=x)),
    "sigmoid_xent": _u(lambda tf, x: tf.nn.sigmoid_cross_entropy_with_logits(
        labels=tf.constant(_rng("sig", 0).uniform(size=(2, 3)).astype(x.dtype.name)), logits=x)),
    "moments": _u(lambda tf, x: tf.nn.moments(x, axes=[-1])),
    "moments_all": _u(lambda tf, x: tf.nn.moments(x, axes=[0, 1], keepdims=True)),
    "normalize_moments": _u(lambda tf, x: tf.nn.normalize_moments(
        tf.constant(3.0, x.dtype), tf.reduce_sum(x, 0), tf.reduce_sum(x * x, 0), None)),
    "batch_norm": _u(lambda tf, x: (lambda m, v: tf.nn.batch_normalization(x, m, v, 0.1, 2.0, 1e-3))(
        *tf.nn.moments(x, axes=[0]))),
    "batch_norm_ms": Op(lambda tf, x, m, v: tf.nn.batch_normalization(x, m, v, None, None, 1e-3),
                        shapes=((2, 3), (3,), (3,))),
    "bias_add": Op(lambda tf, x, b: tf.nn.bias_add(x, b), shapes=((2, 3), (3,))),
    "clip_by_norm": _u(lambda tf, x: tf.clip_by_norm(x, 1.0)),
    "clip_by_norm_axis": _u(lambda tf, x: tf.clip_by_norm(x, 1.0, axes=[1])),
    "clip_by_global_norm": _b(lambda tf, a, b: tuple(tf.clip_by_global_norm([a, b], 1.0)[0])),
    # linalg
    "matmul": Op(lambda tf, a, b: tf.matmul(a, b), shapes=((2, 3), (3, 2))),
    "matvec": Op(lambda tf, a, b: tf.linalg.matvec(a, b), shapes=((2, 3), (3,))),
    "tensordot": Op(lambda tf, a, b: tf.tensordot(a, b, axes=1), shapes=((2, 3), (3, 2))),
    "det": Op(lambda tf, x: tf.linalg.det(x), shapes=((3, 3),)),
    "slogdet": Op(lambda tf, x: tf.linalg.slogdet(x)[1], shapes=((3, 3),)),
    "inv": Op(lambda tf, x: tf.linalg.inv(x), shapes=((3, 3),)),
    "solve": Op(lambda tf, a, b: tf.linalg.solve(a, b), shapes=((3, 3), (3, 2))),
    "cholesky": Op(lambda tf, x: tf.linalg.cholesky(_spd(tf, x)), shapes=((3, 3),)),
    "inv_spd": Op(lambda tf, x: tf.linalg.inv(_spd(tf, x)), shapes=((3, 3),)),
    "diag_part": Op(lambda tf, x: tf.linalg.diag_part(x) ** 2, shapes=((3, 3),)),
    # layout (linear: their second derivatives are zero, the first pass them through)
    "gather": _u(lambda tf, x: tf.gather(x, [2, 0, 2], axis=1) ** 2),
    "concat": _b(lambda tf, a, b: tf.concat([a * b, a], axis=0)),
    "pad_reflect": _u(lambda tf, x: tf.pad(x * x, [[1, 1], [2, 2]], mode="REFLECT")),
    "tile_transpose": _u(lambda tf, x: tf.transpose(tf.tile(x * x, [2, 1]))),
    "reverse_slice": _u(lambda tf, x: tf.reverse(x, [1])[:, 1:] ** 3),
}


# ------------------------------------------------------------------ runners

def _as_list(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def run_graph(tf, name, kind, dtype, jitgrad_mode=None):
    op = OPS[name]
    vals = [point_value(kind, s, k, op.positive).astype(dtype) for k, s in enumerate(op.shapes)]
    rng = _rng("w", name, kind)
    g = tf.Graph()
    with g.as_default():
        xs = [tf.compat.v1.placeholder(dtype, s) for s in op.shapes]
        outs = _as_list(op.fn(tf, *xs))
        gys = [tf.constant(rng.uniform(0.5, 1.5, size=tuple(o.shape)).astype(dtype)) for o in outs]
        ws = [tf.constant(rng.uniform(0.5, 1.5, size=tuple(o.shape)).astype(dtype)) for o in outs]
        grads = tf.gradients(outs, xs, grad_ys=gys, unconnected_gradients=tf.UnconnectedGradients.ZERO)
        grads = [tf.convert_to_tensor(gr) for gr in grads]          # TF: IndexedSlices for gather
        loss = tf.add_n([tf.reduce_sum(o * w) for o, w in zip(outs, ws)])
        hess = tf.hessians(loss, xs)
        hess = [tf.zeros([1], dtype) if h is None else h for h in hess]
    kw = {"config": tf.compat.v1.ConfigProto(jitgrad_mode=jitgrad_mode)} if jitgrad_mode else {}
    with tf.compat.v1.Session(graph=g, **kw) as s:
        res = s.run(outs + grads + hess, dict(zip(xs, vals)))
    return [np.asarray(r) for r in res]


def run_eager(tf, name, kind, dtype):
    op = OPS[name]
    vals = [point_value(kind, s, k, op.positive).astype(dtype) for k, s in enumerate(op.shapes)]
    rng = _rng("w", name, kind)
    xs = [tf.Variable(v) for v in vals]
    with tf.GradientTape() as t2:
        with tf.GradientTape() as t1:
            outs = _as_list(op.fn(tf, *xs))
        gys = [tf.constant(rng.uniform(0.5, 1.5, size=tuple(o.shape)).astype(dtype)) for o in outs]
        grads = t1.gradient(outs, xs, output_gradients=gys, unconnected_gradients="zero")
        grads = [tf.convert_to_tensor(gr) for gr in grads]
        vs = [tf.constant(rng.uniform(0.5, 1.5, size=tuple(gr.shape)).astype(dtype)) for gr in grads]
        gsum = tf.add_n([tf.reduce_sum(gr * v) for gr, v in zip(grads, vs)])
    hvp = t2.gradient(gsum, xs, unconnected_gradients="zero")
    return [np.asarray(o) for o in outs] + [gr.numpy() for gr in grads] + \
        [tf.convert_to_tensor(h).numpy() for h in hvp]


RUNNERS = {"compiled": (run_graph, ("compiled",)), "interpret": (run_graph, ("interpret",)),
           "eager": (run_eager, ())}
TF_RUNNERS = {"compiled": (run_graph, (None,)), "interpret": (run_graph, (None,)), "eager": (run_eager, ())}

# Triaged mismatches: (op, point, mode or None, dtype or None) -> (class, evidence). Class
# "known": an instance of README "Known differences from TensorFlow"; "tf": a TF artifact
# (TF's own result is wrong or inconsistent; jitgrad's agrees with the mathematics / numpy).
_DENORMALS = ("known", "README Denormals: x ~ 1e-20, x*x ~ 1e-40 is a float32 denormal that TF flushes to 0 "
              "(TF: norm 0, gradient inf/nan); jitgrad keeps it, and TF's float64 rerun is finite but the "
              "float32 graph of TF's rules overflows in 1/x^2 intermediates, so the rerun cannot agree")
KNOWN = {
    **{(op, "small", None, "float32"): _DENORMALS
       for op in ("reduce_std", "reduce_std_all", "reduce_euclidean_norm", "norm", "norm_fro", "global_norm",
                  "cumprod", "cumprod_ex_rev")},
    ("det", "large", None, "float64"): ("known", "README linalg (LAPACK, not Eigen): det's gradient det * inv(A)^T of "
                                                 "a matrix with entries ~1e30 (cond ~1e26) has an exactly-zero "
                                                 "cofactor; TF gets -0, LAPACK 2.1e18 (1e-16 of the 1e60 entries)"),
    ("solve", "small", "eager", "float32"): ("known", "README Summation order: the Hessian-vector product of "
                                                      "solve(A, b) at entries ~1e-20 is ~1e40, beyond float32: both "
                                                      "overflow, to inf or nan depending on the order of the sums"),
    ("selu", "small", None, None): ("tf", "TF's Selu kernel computes exp(x) - 1 (not expm1): for -1e-16 < x < 0 "
                                          "it gives -0 and SeluGrad, which tests the OUTPUT < 0, takes the x > 0 "
                                          "branch (scale = 1.0507); jitgrad gives scale * alpha * exp(x) = 1.7581, "
                                          "the derivative for x < 0"),
    ("erf", "inf", None, "float64"): ("tf", "TF's float64 Erf kernel gives nan at +-inf; erf(+-inf) = +-1 "
                                            "(math.erf, TF's own float32 kernel, jitgrad)"),
    ("pow_half", "inf", "compiled", None): ("tf", "TF's grappler rewrites Pow(x, 0.5) to Sqrt in graphs: "
                                                  "pow(-inf, 0.5) is nan there but +inf in TF eager (C99 pow, "
                                                  "numpy, jitgrad)"),
    ("pow_half", "inf", "interpret", None): ("tf", "as pow_half inf compiled"),
    **{(op, "small", None, "float32"): _DENORMALS
       for op in ("xlogy", "xdivy", "xlogy_bc", "unsorted_segment_prod")},
    **{(op, "nan", None, None): ("known", "README top_k / sort: TF's order of NaNs depends on its sorting "
                                          "algorithm; jitgrad orders NaN above +inf")
       for op in ("top_k", "top_k_1", "sort", "sort_desc_0")},
}


def known(name, kind, mode, dtype):
    for key in ((name, kind, mode, dtype), (name, kind, None, dtype), (name, kind, mode, None),
                (name, kind, None, None), (name, None, None, None)):
        if key in KNOWN:
            return KNOWN[key]
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", default=None)
    ap.add_argument("--points", default=",".join(POINTS))
    ap.add_argument("--dtypes", default="float32,float64")
    ap.add_argument("--modes", default="compiled,interpret,eager")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--verbose", action="store_true", help="print tracebacks of exceptions")
    args = ap.parse_args()

    import tensorflow as real
    import jitgrad as jg
    real.get_logger().setLevel("ERROR")

    names = args.ops.split(",") if args.ops else list(OPS)
    stats = collections.Counter()
    per_op = collections.defaultdict(collections.Counter)
    for name in names:
        for kind in args.points.split(","):
            for dtype in args.dtypes.split(","):
                tf_cache = {}
                for mode in args.modes.split(","):
                    fn, extra = TF_RUNNERS[mode]
                    if fn not in tf_cache:
                        tf_cache[fn] = attempt(fn, real, name, kind, dtype, *extra)
                    ref = tf_cache[fn]
                    fn, extra = RUNNERS[mode]
                    got = attempt(fn, jg, name, kind, dtype, *extra)
                    stats["runs"] += 1
                    tag = "%s %s %s %s" % (name, kind, dtype, mode)
                    if isinstance(got, UNSUPPORTED) and not isinstance(ref, UNSUPPORTED):
                        outcome = "unsupported"
                    elif tf_lacks_gradient(ref):
                        outcome = "tf_lacks_gradient"
                    else:
                        why = compare(ref, got)
                        if why is None:
                            outcome = "agree"
                        elif dtype == "float32" and not isinstance(got, BaseException) and \
                                _float32_of_float64_matches(attempt(TF_RUNNERS[mode][0], real, name, kind, "float64",
                                                                    *TF_RUNNERS[mode][1]), got):
                            outcome = "tf_float32_artifact"
                            if not args.quiet:
                                print("%s: TF float32 differs, TF float64 agrees with jitgrad: %s" % (tag, why))
                        elif known(name, kind, mode, dtype):
                            cls, evidence = known(name, kind, mode, dtype)
                            outcome = "known" if cls == "known" else "tf_artifact"
                            if not args.quiet:
                                print("%s: %s: %s (%s)" % (tag, "known difference" if cls == "known" else
                                                           "TF artifact", why.splitlines()[0], evidence))
                        else:
                            outcome = "mismatch"
                            print("MISMATCH %s: %s" % (tag, why))
                            if args.verbose:
                                for r in (ref, got):
                                    if isinstance(r, BaseException):
                                        traceback.print_exception(r)
                    if outcome == "unsupported" and not args.quiet and kind == "random" and mode == "compiled":
                        print("%s: jitgrad unsupported: %s: %s" % (tag, type(got).__name__, str(got)[:120]))
                    stats[outcome] += 1
                    per_op[name][outcome] += 1
        sys.stdout.flush()
    print("\nops %d x points %d x dtypes %d x modes %d = runs %d: agree %d, mismatch %d, known difference %d, "
          "TF artifact %d, TF float32 artifact %d, jitgrad-unsupported %d, TF lacks a gradient %d" % (
              len(names), len(args.points.split(",")), len(args.dtypes.split(",")), len(args.modes.split(",")),
              stats["runs"], stats["agree"], stats["mismatch"], stats["known"], stats["tf_artifact"],
              stats["tf_float32_artifact"], stats["unsupported"], stats["tf_lacks_gradient"]))
    bad = {n: c for n, c in per_op.items() if c["mismatch"]}
    for n, c in bad.items():
        print("  %s: %s" % (n, dict(c)))
    for label, key in (("unsupported by jitgrad", "unsupported"), ("TF lacks a gradient", "tf_lacks_gradient"),
                       ("known differences", "known"), ("TF artifacts", "tf_artifact"),
                       ("TF float32 artifacts", "tf_float32_artifact")):
        hit = sorted(n for n, c in per_op.items() if c[key])
        if hit:
            print("  %s: %s" % (label, ", ".join(hit)))


if __name__ == "__main__":
    main()
