"""Differential fuzzing against real TensorFlow (run where TensorFlow is installed):

    PYTHONPATH=. /work/benchenv/bin/python bench/tf_fuzz.py [--programs 300] [--seed 0] [--modes graph,eager,function]

Each random program is a list of steps over the ops jitgrad offers (elementwise math,
broadcasting, reductions, layout ops, matmul, softmax / cross-entropies, cumulative ops,
casts, cond / while_loop / map_fn / scan). The same Python code builds it against
`import tensorflow` and against `import jitgrad` (both in this process) and runs it:

  graph     tf.compat.v1 Graph + Session: values, tf.gradients of a weighted loss (random
            aggregation method, grad_ys, stop_gradients, unconnected_gradients) and, for
            small programs, tf.hessians; jitgrad in its compiled AND interpreter modes.
  eager     GradientTape (sometimes nested: second derivatives).
  function  tf.function vs jitgrad.function, values and a tape gradient through it.
  features  the API around a program (bench/tf_fuzz_features.py): tape options, jacobians,
            nested tapes, control flow with captures, Variables in tf.function, complex /
            bfloat16, empty dims, bad inputs (the exception class must be TF's).

Results are compared in dtype, shape and value. Float32 tolerance: |a-b| <= 1e-4*max(|a|,|b|)
+ 1e-5 (transcendentals are not correctly rounded in either library and gradients chain a few
of them); float16/bfloat16 use 1e-2. NaN equals NaN, infinities must match in sign, and
float32 denormals count as zero (TF's CPU kernels flush them; README "Known differences").
An exception must be the same exception class in both (compared by name). An op that
jitgrad does not offer (AttributeError / NotImplementedError at build time) is counted,
not reported. Each mismatch is printed with a reproducer (seed, mode) so it can be
re-run with --only SEED.

Long runs: run a copy of bench/ (cp -r bench /tmp/...) if the files may change while it runs.
tf.function's AutoGraph reads a lambda's source from the file when it first converts it; after
an edit it reads the new text at the old line numbers and runs another lambda, so TF's
function-mode results turn wrong for the rest of the run (seen in round 160000).

TensorFlow is not a dependency of jitgrad: this is a tool, never needed by the tests.
"""
import argparse
import collections
import os
import sys
import traceback

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# TF's oneDNN kernels (on by default on x86) differ from its own Eigen kernels at the edges
# (softmax([inf, -1, 0]) is [nan, 0, 0] with oneDNN, all NaN with Eigen and numpy); compare
# with the reference kernels. Pass TF_ENABLE_ONEDNN_OPTS=1 to see the oneDNN ones.
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tf_fuzz_new  # noqa: E402
import tf_fuzz_wide  # noqa: E402

SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e30, -1e30, 1e-30, 3e38, 1.0, -1.0, 0.5],
                    dtype=np.float32)
BASE_SHAPES = [(), (3,), (1, 3), (2, 1), (2, 3), (2, 2, 3)]

# ---------------------------------------------------------------- op catalogue
# Each entry: name -> (arity, builder(tf, args, p)) with p a random int for parameters.

def _rank(x):
    return len(x.shape)


def _axis(x, p):
    r = _rank(x)
    return None if r == 0 else (p % (2 * r)) - r      # negative and positive axes


def _bcast(a, b, tf):
    try:
        np.broadcast_shapes(tuple(a.shape), tuple(b.shape))
        return b
    except ValueError:
        return tf.reduce_sum(b)


UNARY = {
    "abs": lambda tf, x, p: tf.abs(x), "neg": lambda tf, x, p: -x,
    "exp": lambda tf, x, p: tf.exp(x), "log": lambda tf, x, p: tf.math.log(x),
    "log1p": lambda tf, x, p: tf.math.log1p(x), "expm1": lambda tf, x, p: tf.math.expm1(x),
    "sqrt": lambda tf, x, p: tf.sqrt(x), "rsqrt": lambda tf, x, p: tf.math.rsqrt(x),
    "square": lambda tf, x, p: tf.square(x), "reciprocal": lambda tf, x, p: tf.math.reciprocal(x),
    "sin": lambda tf, x, p: tf.sin(x), "cos": lambda tf, x, p: tf.cos(x), "tan": lambda tf, x, p: tf.math.tan(x),
    "tanh": lambda tf, x, p: tf.tanh(x), "sigmoid": lambda tf, x, p: tf.sigmoid(x),
    "softplus": lambda tf, x, p: tf.nn.softplus(x), "softsign": lambda tf, x, p: tf.math.softsign(x),
    "relu": lambda tf, x, p: tf.nn.relu(x), "relu6": lambda tf, x, p: tf.nn.relu6(x),
    "elu": lambda tf, x, p: tf.nn.elu(x), "selu": lambda tf, x, p: tf.nn.selu(x),
    "leaky_relu": lambda tf, x, p: tf.nn.leaky_relu(x, alpha=0.1 + 0.1 * (p % 3)),
    "gelu": lambda tf, x, p: tf.nn.gelu(x, approximate=bool(p % 2)),
    "silu": lambda tf, x, p: tf.nn.silu(x), "log_sigmoid": lambda tf, x, p: tf.math.log_sigmoid(x),
    "erf": lambda tf, x, p: tf.math.erf(x), "erfc": lambda tf, x, p: tf.math.erfc(x),
    "floor": lambda tf, x, p: tf.floor(x), "ceil": lambda tf, x, p: tf.math.ceil(x),
    "round": lambda tf, x, p: tf.round(x), "sign": lambda tf, x, p: tf.sign(x),
    "stop_gradient": lambda tf, x, p: tf.stop_gradient(x),
    "clip": lambda tf, x, p: tf.clip_by_value(x, -1.0, 0.5 + p % 2),
    "pow_c": lambda tf, x, p: tf.pow(x, [2.0, 3.0, 0.5, -1.0, 0.0][p % 5]),
    "cast_rt": lambda tf, x, p: tf.cast(tf.cast(tf.clip_by_value(x, -100.0, 100.0),
                                                 [tf.float16, tf.bfloat16, tf.int32, tf.int8, tf.float64][p % 5]),
                                         tf.float32),
    "is_nan_where": lambda tf, x, p: tf.where(tf.math.is_nan(x), tf.zeros_like(x), x),
    "is_finite_where": lambda tf, x, p: tf.where(tf.math.is_finite(x), x, tf.ones_like(x)),
    "l2_normalize": lambda tf, x, p: tf.nn.l2_normalize(x, axis=_axis(x, p) if _rank(x) else None),
}

BINARY = {
    "add": lambda tf, a, b, p: a + b, "sub": lambda tf, a, b, p: a - b, "mul": lambda tf, a, b, p: a * b,
    "div": lambda tf, a, b, p: a / b, "floordiv": lambda tf, a, b, p: tf.math.floordiv(a, b),
    "floormod": lambda tf, a, b, p: tf.math.floormod(a, b),
    "maximum": lambda tf, a, b, p: tf.maximum(a, b), "minimum": lambda tf, a, b, p: tf.minimum(a, b),
    "pow": lambda tf, a, b, p: tf.pow(a, b), "sqdiff": lambda tf, a, b, p: tf.math.squared_difference(a, b),
    "divide_no_nan": lambda tf, a, b, p: tf.math.divide_no_nan(a, b),
    "multiply_no_nan": lambda tf, a, b, p: tf.math.multiply_no_nan(a, b),
    "xlogy": lambda tf, a, b, p: tf.math.xlogy(a, b), "xdivy": lambda tf, a, b, p: tf.math.xdivy(a, b),
    "xlog1py": lambda tf, a, b, p: tf.math.xlog1py(a, b),
    "where_gt": lambda tf, a, b, p: tf.where(a > b, a, b),
    "where_eq": lambda tf, a, b, p: tf.where(tf.equal(a, b), a * 2.0, b),
    "add_n": lambda tf, a, b, p: tf.add_n([a, b, a]) if tuple(a.shape) == tuple(b.shape) else a + b,
}

def _reduce(fn):
    return lambda tf, x, p: getattr(tf, fn)(x, axis=_axis(x, p) if p % 3 else None, keepdims=bool(p % 2))


def _math_reduce(fn):
    return lambda tf, x, p: getattr(tf.math, fn)(x, axis=_axis(x, p) if p % 3 else None, keepdims=bool(p % 2))


def _perm(x, p):
    r = _rank(x)
    rng = np.random.default_rng(p)
    return [int(i) for i in rng.permutation(r)]


def _slice(tf, x, p):
    if _rank(x) == 0:
        return x
    rng = np.random.default_rng(p)
    idx = []
    for d in x.shape:
        k = int(rng.integers(0, 4))
        if k == 0:
            idx.append(slice(None))
        elif k == 1:
            idx.append(slice(None, None, -1))
        elif k == 2:
            idx.append(slice(int(rng.integers(-d, d)), None))
        else:
            idx.append(slice(None, None, 2))
    return x[tuple(idx)]


def _gather(tf, x, p):
    if _rank(x) == 0:
        return x
    ax = p % _rank(x)
    d = x.shape[ax]
    idx = np.random.default_rng(p).integers(0, d, size=int(p % 4) + 1).astype(np.int32)
    return tf.gather(x, idx, axis=ax)


def _segment_ids(x, p):
    """Sorted ids, one per row of x (axis 0), with repeats and gaps: rows 0, 0, 2, 3, 3, ..."""
    return np.cumsum(np.random.default_rng(p).integers(0, 3, size=x.shape[0])).astype(np.int32)


def _segment(tf, x, p):
    if _rank(x) == 0 or x.shape[0] == 0:
        return x
    ids = _segment_ids(x, p)
    kind = ["sum", "max", "min", "prod", "mean"][p % 5]
    if p % 2:
        return getattr(tf.math, "segment_" + kind)(x, ids)
    # unsorted: ids reversed (not sorted), and a dropped negative one when p % 4 == 2; max / min
    # without gaps (an empty segment is -+FLT_MAX, too large for the sums of the loss)
    ids = ids[::-1].copy()
    if kind in ("max", "min"):
        ids = np.unique(ids, return_inverse=True)[1].astype(np.int32)
    elif p % 4 == 2:
        ids[0] = -1
    n = int(ids.max()) + 1
    fn = {"mean": "unsorted_segment_mean"}.get(kind, "unsorted_segment_" + kind)
    return getattr(tf.math, fn)(x, ids, n)


def _top_k(tf, x, p):
    if _rank(x) == 0:
        return x
    if p % 3 == 0:
        return tf.sort(x, axis=p % _rank(x), direction=["ASCENDING", "DESCENDING"][p % 2])
    return tf.math.top_k(x, k=int(p % (x.shape[-1] + 1))).values


def _pad(tf, x, p):
    if _rank(x) == 0:
        return x
    pads = [[p % 2, (p // 2) % 2] for _ in x.shape]
    mode = ["CONSTANT", "REFLECT", "SYMMETRIC"][p % 3]
    if mode == "REFLECT" and any(d < 2 for d in x.shape):
        mode = "CONSTANT"
    return tf.pad(x, pads, mode=mode)


def _matmul(tf, a, b, p):
    ra = _rank(a)
    if ra < 2:
        a = tf.reshape(a, [1, -1])
    n = a.shape[-1]
    ta, tb = bool(p % 2), bool((p // 2) % 2)
    if ta:
        a = tf.linalg.matrix_transpose(a) if _rank(a) > 2 else tf.transpose(a)
        n = a.shape[-2]
        # a is now (..., k, m): matmul(a, ., transpose_a=True) contracts k
    b2 = tf.reshape(tf.tile(tf.reshape(b, [-1]), [n * 2]), [n, -1])[:, :2] if _rank(b) else tf.fill([n, 2], b)
    if tb:
        b2 = tf.transpose(b2)
    return tf.linalg.matmul(a, b2, transpose_a=ta, transpose_b=tb)


ARRAY = {
    "reshape_flat": lambda tf, x, p: tf.reshape(x, [-1]),
    "transpose": lambda tf, x, p: tf.transpose(x, _perm(x, p)),
    "concat": lambda tf, x, p: tf.concat([x, x * 2.0], axis=(p % _rank(x)) if _rank(x) else 0) if _rank(x) else x,
    "stack": lambda tf, x, p: tf.stack([x, -x], axis=p % (_rank(x) + 1)),
    "slice": _slice, "gather": _gather, "pad": _pad, "segment": _segment, "top_k": _top_k,
    "tile": lambda tf, x, p: tf.tile(x, [1 + (p >> i) % 2 for i in range(_rank(x))]) if _rank(x) else x,
    "reverse": lambda tf, x, p: tf.reverse(x, [p % _rank(x)]) if _rank(x) else x,
    "expand_squeeze": lambda tf, x, p: tf.squeeze(tf.expand_dims(x, 0), [0]),
    "broadcast_to": lambda tf, x, p: tf.broadcast_to(x, (2,) + tuple(x.shape)),
    "softmax": lambda tf, x, p: tf.nn.softmax(x, axis=-1) if _rank(x) else x,
    "log_softmax": lambda tf, x, p: tf.nn.log_softmax(x, axis=-1) if _rank(x) else x,
    "cumsum": lambda tf, x, p: tf.math.cumsum(x, axis=p % _rank(x), exclusive=bool(p & 2), reverse=bool(p & 4)) if _rank(x) else x,
    "cumprod": lambda tf, x, p: tf.math.cumprod(x, axis=p % _rank(x), exclusive=bool(p & 2), reverse=bool(p & 4)) if _rank(x) else x,
    "sum": _reduce("reduce_sum"), "mean": _reduce("reduce_mean"), "max": _reduce("reduce_max"),
    "min": _reduce("reduce_min"), "prod": _reduce("reduce_prod"), "logsumexp": _reduce("reduce_logsumexp"),
    "std": _math_reduce("reduce_std"), "variance": _math_reduce("reduce_variance"),
    "euclid": _math_reduce("reduce_euclidean_norm"),
    "argmax_f": lambda tf, x, p: tf.cast(tf.argmax(x, axis=p % _rank(x)), tf.float32) if _rank(x) else x,
    "argmin_f": lambda tf, x, p: tf.cast(tf.math.argmin(x, axis=p % _rank(x)), tf.float32) if _rank(x) else x,
    "norm": lambda tf, x, p: tf.norm(x, ord=[1, 2, np.inf, "euclidean"][p % 4]) if _rank(x) else x,
    "moments_mean": lambda tf, x, p: tf.nn.moments(x, axes=[p % _rank(x)])[p % 2] if _rank(x) else x,
}

BINARY_ARRAY = {
    "matmul": _matmul,
    "sigmoid_xent": lambda tf, a, b, p: tf.nn.sigmoid_cross_entropy_with_logits(
        labels=tf.sigmoid(tf.broadcast_to(_bcast(a, b, tf), a.shape)), logits=a),
    "softmax_xent": lambda tf, a, b, p: tf.nn.softmax_cross_entropy_with_logits(
        labels=tf.nn.softmax(tf.broadcast_to(_bcast(a, b, tf), a.shape)), logits=a) if _rank(a) else a,
    "sparse_xent": lambda tf, a, b, p: tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=np.full(tuple(a.shape[:-1]), p % a.shape[-1], np.int32), logits=a) if _rank(a) else a,
}

INT_UNARY = {
    "abs": lambda tf, x, p: tf.abs(x), "neg": lambda tf, x, p: -x, "square": lambda tf, x, p: tf.square(x),
    "sign": lambda tf, x, p: tf.sign(x),
    "cast_small": lambda tf, x, p: tf.cast(tf.cast(x, [tf.int8, tf.uint8, tf.int16, tf.uint16, tf.int64][p % 5]), x.dtype),
    "cast_float": lambda tf, x, p: tf.cast(tf.cast(x, [tf.float32, tf.float16, tf.bfloat16, tf.float64][p % 4]) * 0.75,
                                           x.dtype),
    "cumsum": lambda tf, x, p: tf.math.cumsum(x, axis=p % _rank(x), exclusive=bool(p & 2), reverse=bool(p & 4)) if _rank(x) else x,
    "cumprod": lambda tf, x, p: tf.math.cumprod(x, axis=p % _rank(x), exclusive=bool(p & 2)) if _rank(x) else x,
    "sum": _reduce("reduce_sum"), "max": _reduce("reduce_max"), "min": _reduce("reduce_min"),
    "prod": _reduce("reduce_prod"), "mean": _reduce("reduce_mean"),
    "argmax": lambda tf, x, p: tf.cast(tf.argmax(x, axis=p % _rank(x)), x.dtype) if _rank(x) else x,
    "argmin": lambda tf, x, p: tf.cast(tf.math.argmin(x, axis=p % _rank(x), output_type=tf.int32), x.dtype) if _rank(x) else x,
    "transpose": lambda tf, x, p: tf.transpose(x, _perm(x, p)), "slice": _slice, "gather": _gather,
    "tile": ARRAY["tile"], "reverse": ARRAY["reverse"],
    "pad": lambda tf, x, p: tf.pad(x, [[p % 2, 1] for _ in x.shape], constant_values=p % 3) if _rank(x) else x,
    "one_hot_sum": lambda tf, x, p: tf.reduce_sum(tf.one_hot(x, 4, dtype=x.dtype), axis=-1),
}

INT_BINARY = {
    "add": lambda tf, a, b, p: a + b, "sub": lambda tf, a, b, p: a - b, "mul": lambda tf, a, b, p: a * b,
    "floordiv": lambda tf, a, b, p: a // b, "floormod": lambda tf, a, b, p: a % b,
    "floordiv_safe": lambda tf, a, b, p: a // tf.where(tf.equal(b, 0), tf.ones_like(b), b),
    "floormod_safe": lambda tf, a, b, p: tf.math.floormod(a, tf.where(tf.equal(b, 0), tf.ones_like(b) * 3, b)),
    "truediv": lambda tf, a, b, p: tf.cast(a / b, a.dtype) if p % 2 else tf.cast(tf.math.is_nan(a / b), a.dtype),
    "maximum": lambda tf, a, b, p: tf.maximum(a, b), "minimum": lambda tf, a, b, p: tf.minimum(a, b),
    "pow": lambda tf, a, b, p: tf.pow(a, tf.abs(b) % 4) if p % 4 else tf.pow(a, b),
    "where": lambda tf, a, b, p: tf.where(a >= b, a, b),
    "sqdiff": lambda tf, a, b, p: tf.math.squared_difference(a, b),
    "stack_sum": lambda tf, a, b, p: tf.reduce_sum(tf.stack([a, tf.broadcast_to(b, a.shape)]), axis=0),
}

CONTROL = ["cond", "while", "map_fn", "scan", "foldl"]


def _control(tf, kind, x, sub, p):
    """Control flow around a sub-chain `sub` (a list of unary names) applied to x."""
    def body(v):
        for name in sub:
            v = UNARY[name](tf, v, p)
        return v

    if kind == "cond":
        return tf.cond(tf.reduce_sum(x) > 0.0, lambda: body(x), lambda: x * 2.0)
    if kind == "while":
        n = 1 + p % 3
        _, out = tf.while_loop(lambda i, v: i < n, lambda i, v: (i + 1, body(v) * 0.5 + v), [tf.constant(0), x])
        return out
    if _rank(x) == 0:
        return body(x)
    if kind == "map_fn":
        return tf.map_fn(body, x)
    if kind == "scan":
        return tf.scan(lambda acc, v: acc * 0.5 + body(v), x)
    return tf.foldl(lambda acc, v: acc + body(v), x)


# ------------------------------------------------------------------- programs

Program = collections.namedtuple("Program", "shapes values steps n_out weights method grad_ys stop unconnected hess dtype")


def make_program(seed, edge, float_dtypes=True, wide=False, new=False):
    rng = np.random.default_rng(seed)
    n_in = int(rng.integers(1, 4))
    shapes = [BASE_SHAPES[int(rng.integers(0, len(BASE_SHAPES)))] for _ in range(n_in)]
    values = []
    for s in shapes:
        v = rng.uniform(-2.0, 2.0, s).astype(np.float32)
        if edge:
            mask = rng.random(s) < 0.3
            v = np.where(mask, rng.choice(SPECIALS, s), v).astype(np.float32)
        elif rng.random() < 0.3:
            v = np.round(v * 2).astype(np.float32) / 2     # ties for max/argmax/where
        values.append(v)
    steps = []
    kinds = ["u"] * 6 + ["b"] * 4 + ["a"] * 4 + ["ba"] * 1 + ["c"] * 1
    if wide:     # (only then: without it the draws, and so earlier rounds' seeds, are unchanged)
        kinds += ["w"] * 5 + ["wb"] * 2
    if new:      # (likewise: bench/tf_fuzz_new.py's ops, drawn only with --new)
        kinds += ["n"] * 8 + ["nb"] * 6
    for _ in range(int(rng.integers(1, 7))):
        k = kinds[int(rng.integers(0, len(kinds)))]
        p = int(rng.integers(0, 1 << 20))
        i, j = int(rng.integers(0, 1 << 20)), int(rng.integers(0, 1 << 20))
        if k == "u":
            steps.append(("u", str(rng.choice(sorted(UNARY))), i, p))
        elif k == "b":
            steps.append(("b", str(rng.choice(sorted(BINARY))), i, j, p))
        elif k == "a":
            steps.append(("a", str(rng.choice(sorted(ARRAY))), i, p))
        elif k == "ba":
            steps.append(("ba", str(rng.choice(sorted(BINARY_ARRAY))), i, j, p))
        elif k == "w":
            steps.append(("w", str(rng.choice(sorted(tf_fuzz_wide.WIDE_UNARY))), i, p))
        elif k == "wb":
            steps.append(("wb", str(rng.choice(sorted(tf_fuzz_wide.WIDE_BINARY))), i, j, p))
        elif k == "n":
            steps.append(("n", str(rng.choice(sorted(tf_fuzz_new.NEW_UNARY))), i, p))
        elif k == "nb":
            steps.append(("nb", str(rng.choice(sorted(tf_fuzz_new.NEW_BINARY))), i, j, p))
        else:
            sub = [str(x) for x in rng.choice(["tanh", "sin", "square", "sigmoid", "relu", "exp", "abs"],
                                              int(rng.integers(1, 3)))]
            steps.append(("c", str(rng.choice(CONTROL)), i, tuple(sub), p))
    n_out = int(rng.integers(1, 3))
    weights = [float(np.float32(rng.uniform(0.1, 1.0))) for _ in range(n_out)]
    return Program(shapes, values, steps, n_out, weights, int(rng.integers(0, 3)), bool(rng.random() < 0.3),
                   bool(rng.random() < 0.2), str(rng.choice(["none", "zero"])),
                   bool(rng.random() < 0.25) and sum(int(np.prod(s)) for s in shapes) <= 6,
                   (["float32"] * 7 + ["float64"] * 2 + ["float16"])[seed % 10] if float_dtypes else "float32")


IntProgram = collections.namedtuple("IntProgram", "dtype shapes values steps")


def make_int_program(seed, new=False):
    rng = np.random.default_rng(seed)
    dtype = ["int32", "int64", "int32", "int8", "uint8"][seed % 5]
    n_in = int(rng.integers(1, 4))
    shapes = [BASE_SHAPES[int(rng.integers(0, len(BASE_SHAPES)))] for _ in range(n_in)]
    lo, hi = (0, 9) if dtype == "uint8" else (-6, 7)
    values = [rng.integers(lo, hi, s).astype(dtype) for s in shapes]
    if rng.random() < 0.2:     # extreme values: wrap-around and INT_MIN // -1
        info = np.iinfo(dtype)
        values[0] = np.where(rng.random(shapes[0]) < 0.5, info.min, info.max).astype(dtype)
    steps = []
    for _ in range(int(rng.integers(1, 6))):
        p, i, j = (int(v) for v in rng.integers(0, 1 << 20, 3))
        if new and rng.random() < 0.6:      # bench/tf_fuzz_new.py's integer ops (only with --new)
            if rng.random() < 0.4:
                steps.append(("nu", str(rng.choice(sorted(tf_fuzz_new.NEW_INT_UNARY))), i, p))
            else:
                steps.append(("nb", str(rng.choice(sorted(tf_fuzz_new.NEW_INT_BINARY))), i, j, p))
        elif rng.random() < 0.5:
            steps.append(("u", str(rng.choice(sorted(INT_UNARY))), i, p))
        else:
            steps.append(("b", str(rng.choice(sorted(INT_BINARY))), i, j, p))
    return IntProgram(dtype, shapes, values, steps)


def build_int(tf, prog, xs):
    pool = list(xs)
    for st in prog.steps:
        if st[0] == "u":
            pool.append(INT_UNARY[st[1]](tf, pool[st[2] % len(pool)], st[3]))
        elif st[0] == "nu":
            pool.append(tf_fuzz_new.NEW_INT_UNARY[st[1]](tf, pool[st[2] % len(pool)], st[3]))
        elif st[0] == "nb":
            a, b = pool[st[2] % len(pool)], pool[st[3] % len(pool)]
            pool.append(tf_fuzz_new.NEW_INT_BINARY[st[1]](tf, a, _bcast(a, b, tf), st[4]))
        else:
            a, b = pool[st[2] % len(pool)], pool[st[3] % len(pool)]
            pool.append(INT_BINARY[st[1]](tf, a, _bcast(a, b, tf), st[4]))
    return pool[len(xs):]


def run_int_graph(tf, prog, jitgrad_mode=None):
    g = tf.Graph()
    with g.as_default():
        xs = [tf.compat.v1.placeholder(prog.dtype, s) for s in prog.shapes]
        outs = build_int(tf, prog, xs)
    kw = {}
    if jitgrad_mode:
        kw["config"] = tf.compat.v1.ConfigProto(jitgrad_mode=jitgrad_mode)
    with tf.compat.v1.Session(graph=g, **kw) as s:
        return [np.asarray(r) for r in s.run(outs, dict(zip(xs, prog.values)))]


def run_int_eager(tf, prog):
    return [np.asarray(o.numpy()) for o in build_int(tf, prog, [tf.constant(v) for v in prog.values])]


def build(tf, prog, xs):
    pool = build_pool(tf, prog, xs)
    return pool[len(xs):][-prog.n_out:] or pool[-1:]


def build_pool(tf, prog, xs):
    """Every tensor the program makes, inputs first."""
    pool = list(xs)
    for st in prog.steps:
        k = st[0]
        if k == "u":
            pool.append(UNARY[st[1]](tf, pool[st[2] % len(pool)], st[3]))
        elif k == "a":
            pool.append(ARRAY[st[1]](tf, pool[st[2] % len(pool)], st[3]))
        elif k == "w":
            pool.append(tf_fuzz_wide.WIDE_UNARY[st[1]](tf, pool[st[2] % len(pool)], st[3]))
        elif k == "wb":
            a = pool[st[2] % len(pool)]
            pool.append(tf_fuzz_wide.WIDE_BINARY[st[1]](tf, a, _bcast(a, pool[st[3] % len(pool)], tf), st[4]))
        elif k == "n":
            pool.append(tf_fuzz_new.NEW_UNARY[st[1]](tf, pool[st[2] % len(pool)], st[3]))
        elif k == "nb":
            pool.append(tf_fuzz_new.NEW_BINARY[st[1]](tf, pool[st[2] % len(pool)], pool[st[3] % len(pool)], st[4]))
        elif k in ("b", "ba"):
            a = pool[st[2] % len(pool)]
            b = pool[st[3] % len(pool)]
            if k == "b":
                pool.append(BINARY[st[1]](tf, a, _bcast(a, b, tf), st[4]))
            else:
                pool.append(BINARY_ARRAY[st[1]](tf, a, b, st[4]))
        else:
            pool.append(_control(tf, st[1], pool[st[2] % len(pool)], st[3], st[4]))
    return pool


def loss_of(tf, prog, outs):
    terms = [tf.reduce_sum(tf.cast(o, prog.dtype)) * w for o, w in zip(outs, prog.weights)]
    return terms[0] if len(terms) == 1 else tf.add_n(terms)


# ------------------------------------------------------------------ runners

def _values(prog):
    return [v.astype(prog.dtype) for v in prog.values]


def run_graph(tf, prog, jitgrad_mode=None):
    g = tf.Graph()
    with g.as_default():
        xs = [tf.compat.v1.placeholder(prog.dtype, s) for s in prog.shapes]
        outs = build(tf, prog, xs)
        loss = loss_of(tf, prog, outs)
        methods = [tf.AggregationMethod.ADD_N, tf.AggregationMethod.EXPERIMENTAL_TREE,
                   tf.AggregationMethod.EXPERIMENTAL_ACCUMULATE_N]
        ys, grad_ys = [loss], None
        if prog.grad_ys:
            ys = outs
            grad_ys = [tf.ones_like(o) * w for o, w in zip(outs, prog.weights)]
        stop = [outs[0]] if prog.stop and len(outs) > 1 else None
        fl = [o for o in outs if o.dtype.is_floating]
        if fl != outs:       # an integer output has no gradient
            ys, grad_ys = [loss], None
        unconnected = {"none": tf.UnconnectedGradients.NONE, "zero": tf.UnconnectedGradients.ZERO}[prog.unconnected]
        grads = tf.gradients(ys, xs, grad_ys=grad_ys, aggregation_method=methods[prog.method],
                             stop_gradients=stop, unconnected_gradients=unconnected)
        grads = [None if gr is None else tf.convert_to_tensor(gr) for gr in grads]   # TF: IndexedSlices
        fetch = list(outs) + [gr for gr in grads if gr is not None]
        hess = []
        if prog.hess and len(xs) == 1:
            hess = tf.hessians(loss, xs)
            hess = [h for h in hess if h is not None]
        fetch += hess
        none_mask = [gr is None for gr in grads]
    kw = {}
    if jitgrad_mode:
        kw["config"] = tf.compat.v1.ConfigProto(jitgrad_mode=jitgrad_mode)
    with tf.compat.v1.Session(graph=g, **kw) as s:
        res = s.run(fetch, dict(zip(xs, _values(prog))))
    return [np.asarray(r) for r in res] + [np.asarray(none_mask)]


def run_eager(tf, prog):
    xs = [tf.Variable(v) for v in _values(prog)]
    with tf.GradientTape(persistent=True) as t2:
        with tf.GradientTape(persistent=True) as t1:
            outs = build(tf, prog, xs)
            loss = loss_of(tf, prog, outs)
        grads = t1.gradient(loss, xs, unconnected_gradients=prog.unconnected)
        grads = [None if gr is None else tf.convert_to_tensor(gr) for gr in grads]
        gsum = None
        if prog.hess:
            fl = [gr for gr in grads if gr is not None]
            gsum = tf.add_n([tf.reduce_sum(gr) for gr in fl]) if fl else None
    res = [o.numpy() for o in outs] + [gr.numpy() for gr in grads if gr is not None]
    if gsum is not None:
        res += [tf.convert_to_tensor(h).numpy() for h in t2.gradient(gsum, xs) if h is not None]
    return [np.asarray(r) for r in res] + [np.asarray([gr is None for gr in grads])]


def run_function(tf, prog):
    @tf.function
    def f(*xs):
        with tf.GradientTape() as t:
            for x in xs:
                t.watch(x)
            outs = build(tf, prog, list(xs))
            loss = loss_of(tf, prog, outs)
        grads = t.gradient(loss, list(xs), unconnected_gradients="zero")
        grads = [tf.convert_to_tensor(gr) for gr in grads]
        return outs, grads
    outs, grads = f(*[tf.constant(v) for v in _values(prog)])
    return [np.asarray(o) for o in list(outs) + list(grads)]


KERAS_OPTIMIZERS = ["sgd", "adam", "rmsprop", "adagrad", "adamax", "nadam", "adamw"]
KERAS_ACTIVATIONS = ["relu", "tanh", "sigmoid", "linear", "softplus", "elu"]
KERAS_LOSSES = ["mse", "mae", "binary_crossentropy", "msle", "logcosh", "huber", "log_cosh"]  # logcosh: ValueError in both


def run_keras(tf, seed):
    """A small Dense model trained for 2 epochs from the same initial weights."""
    rng = np.random.default_rng(seed)
    n_in, hidden = int(rng.integers(1, 5)), int(rng.integers(1, 6))
    act = KERAS_ACTIVATIONS[seed % len(KERAS_ACTIVATIONS)]
    opt = KERAS_OPTIMIZERS[seed % len(KERAS_OPTIMIZERS)]
    loss = KERAS_LOSSES[seed % len(KERAS_LOSSES)]
    x = rng.uniform(-1, 1, (8, n_in)).astype(np.float32)
    y = (rng.uniform(0, 1, (8, 1)) if loss == "binary_crossentropy" else rng.normal(size=(8, 1))).astype(np.float32)
    model = tf.keras.Sequential([tf.keras.Input(shape=(n_in,)),
                                 tf.keras.layers.Dense(hidden, activation=act),
                                 tf.keras.layers.Dense(1, activation="sigmoid" if loss == "binary_crossentropy" else None)])
    weights = [rng.uniform(-0.5, 0.5, w.shape).astype(np.float32) for w in model.get_weights()]
    model.set_weights(weights)
    model.compile(optimizer=opt, loss=loss)
    hist = model.fit(x, y, epochs=2, batch_size=4, shuffle=False, verbose=0)
    return [np.asarray(hist.history["loss"], np.float32)] + [np.asarray(w) for w in model.get_weights()] + \
        [np.asarray(model.predict(x, verbose=0))]


# --------------------------------------------------------------- comparison

def _close(a, b, dtype):
    if a.shape != b.shape:
        return "shape %s vs %s" % (a.shape, b.shape)
    if a.dtype != b.dtype:
        return "dtype %s vs %s" % (a.dtype, b.dtype)
    if a.dtype.name == "bfloat16":          # ml_dtypes: numpy kind 'V'; compared as float32 at 1e-2
        a, b = a.astype(np.float32), b.astype(np.float32)
        tol16 = True
    else:
        tol16 = a.dtype == np.float16
    if a.dtype.kind == "c":                 # real and imaginary parts each as floats of the part's width
        return _close(a.real, b.real, dtype) or _close(a.imag, b.imag, dtype)
    if a.dtype.kind not in "fc":
        return None if np.array_equal(a, b) else "values differ"
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    tiny = np.finfo(np.float16).tiny if a.dtype == np.float16 else np.finfo(np.float32).tiny
    a64 = np.where(np.abs(a64) < tiny, 0.0, a64)
    b64 = np.where(np.abs(b64) < tiny, 0.0, b64)
    rtol, atol = (1e-2, 1e-2) if tol16 else (1e-4, 1e-5)
    nan_a, nan_b = np.isnan(a64), np.isnan(b64)
    if not np.array_equal(nan_a, nan_b):
        return "NaN pattern differs"
    inf_a, inf_b = np.isinf(a64), np.isinf(b64)
    if not np.array_equal(np.where(inf_a, a64, 0), np.where(inf_b, b64, 0)):
        return "inf pattern differs"
    fin = ~(nan_a | inf_a | inf_b)
    d = np.abs(a64 - b64)[fin]
    lim = atol + rtol * np.maximum(np.abs(a64), np.abs(b64))[fin]
    if np.any(d > lim):
        return "max abs diff %.3g" % d.max()
    return None


def compare(ref, got):
    if isinstance(ref, BaseException) or isinstance(got, BaseException):
        rn = type(ref).__name__ if isinstance(ref, BaseException) else "ok"
        gn = type(got).__name__ if isinstance(got, BaseException) else "ok"
        return None if rn == gn else "error %s (TF) vs %s (jitgrad): %s" % (rn, gn, str(got if gn != "ok" else ref)[:200])
    if len(ref) != len(got):
        return "%d results (TF) vs %d (jitgrad)" % (len(ref), len(got))
    for i, (a, b) in enumerate(zip(ref, got)):
        why = _close(np.asarray(a), np.asarray(b), None)
        if why:
            return "result %d: %s\n      TF      %s\n      jitgrad %s" % (i, why, np.array2string(np.asarray(a), threshold=20),
                                                                       np.array2string(np.asarray(b), threshold=20))
    return None


FLOAT_RUNNERS = {"compiled": (run_graph, ("compiled",)), "interpret": (run_graph, ("interpret",)),
                 "eager": (run_eager, ()), "function": (run_function, ())}


def agrees_with_tf_float64(real, prog, sub, got):
    """Whether jitgrad's float32 results match TF's run of the same program in float64.

    TF's CPU kernels flush float32 denormals to zero (README "Known differences"); a flushed
    intermediate -- e.g. x / y = -1.6e-39 inside floormod's gradient -floor(x / y) -- can change
    a result completely (floor gives -0 instead of -1). In float64 nothing that small is a
    denormal, so when TF's float64 results, rounded to float32, agree with jitgrad's, the
    difference is TF's float32 flushing or rounding, not a jitgrad error."""
    if isinstance(got, BaseException):
        return False
    fn, extra = FLOAT_RUNNERS[sub]
    ref64 = attempt(fn, real, prog._replace(dtype="float64"), *[None for _ in extra])
    return _float32_of_float64_matches(ref64, got)


def agrees_with_tf_unrewritten(real, prog, sub, seed, got):
    """Whether jitgrad's Session / tf.function results match TF's with grappler's arithmetic
    optimizer and constant folding off (_VALUE_CHANGING_REWRITES).

    TF optimises a graph before running it; its ConvertPow stage replaces pow by a constant
    exponent with Square (2), x * Square(x) (3), Identity (1), ones (0), Sqrt (0.5), Rsqrt (-0.5)
    or Reciprocal (-1) -- also the constant y - 1 of pow's own gradient. Those are not pow at the
    edges: sqrt(-inf) is NaN and rsqrt(-0) -inf where pow(-inf, .5) is +inf and pow(-0, -.5) +inf
    (seed 364385: pow(x, .5)'s gradient at -0). TF eager runs no grappler and gives pow's values,
    as jitgrad does in every mode (passes/simplify.py keeps pow's values); README "Known
    differences"."""
    import tf_fuzz_features
    if isinstance(got, BaseException):
        return False
    if sub in ("compiled", "interpret", "function"):
        fn, extra = FLOAT_RUNNERS[sub]
        return compare(_tf_unrewritten(real, fn, prog, *[None for _ in extra]), got) is None
    name = sub.rsplit("-", 1)[0] if sub not in tf_fuzz_features.SCENARIOS else sub
    return name in tf_fuzz_features.SCENARIOS and compare(
        _tf_unrewritten(real, tf_fuzz_features.SCENARIOS[name][0], seed, None), got) is None


def _tf_unrewritten(real, fn, *args):
    """fn(real, *args) (or its exception) with grappler's arithmetic optimizer and constant folding off."""
    opts = real.config.optimizer
    before = opts.get_experimental_options()
    opts.set_experimental_options({name: False for name in _VALUE_CHANGING_REWRITES})
    try:
        return attempt(fn, real, *args)
    finally:
        opts.set_experimental_options({name: before.get(name, True) for name in _VALUE_CHANGING_REWRITES})


# grappler stages seen to change values: arithmetic_optimization (ConvertPow, seed 364385) and
# constant_folding (seed 370130: a conv2d -> cumulative_logsumexp -> square -> prod gradient of
# 1e38-sized values is -inf / finite where TF eager, TF with constant folding off and jitgrad
# give NaN / inf; which of its rewrites does it was not pinned down)
_VALUE_CHANGING_REWRITES = ("arithmetic_optimization", "constant_folding")


def _float32_of_float64_matches(ref64, got):
    """TF's float64 results, rounded to jitgrad's float32 / bfloat16 where jitgrad's are, agree with jitgrad's."""
    if isinstance(ref64, BaseException) or len(ref64) != len(got):
        return False
    with np.errstate(over="ignore"):
        ref32 = [r.astype(g.dtype) if r.dtype == np.float64 and (g.dtype == np.float32 or g.dtype.name == "bfloat16")
                 else r for r, g in zip(ref64, got)]
    return compare(ref32, got) is None


def tf_lacks_gradient(ref):
    """TF failed for want of a gradient rule (e.g. SoftsignGrad has none: no second derivative of
    softsign), as a LookupError or, inside tf.function, a StagingError quoting it. There is nothing
    to compare jitgrad's result with: its second derivative, or (tf.hessians) the ValueError of a
    None gradient TF would reach after the missing rule."""
    return isinstance(ref, LookupError) or (
        type(ref).__name__ == "StagingError" and "gradient registry has no entry" in str(ref))


def attempt(fn, *args):
    try:
        return fn(*args)
    except Exception as e:      # noqa: BLE001 - the exception itself is what is compared
        return e


UNSUPPORTED = (AttributeError, NotImplementedError)


def features_agree_with_tf_float64(real, sub, seed, got):
    """agrees_with_tf_float64 for a features scenario: TF reruns it on float64 programs."""
    import tf_fuzz_features
    if isinstance(got, BaseException):
        return False
    name = sub.rsplit("-", 1)[0] if sub not in tf_fuzz_features.SCENARIOS else sub
    tf_fuzz_features.FLOAT = "float64"
    try:
        ref64 = attempt(tf_fuzz_features.SCENARIOS[name][0], real, seed, None)
    finally:
        tf_fuzz_features.FLOAT = "float32"
    return _float32_of_float64_matches(ref64, got)


def run_features(real, jg, seed, names=None):
    """Each feature scenario (bench/tf_fuzz_features.py) on TF and jitgrad: ({sub: jitgrad result}, {sub: TF's})."""
    import tf_fuzz_features
    got, refs = {}, {}
    for name, (fn, graph) in tf_fuzz_features.SCENARIOS.items():
        if names and name not in names:
            continue
        ref = attempt(fn, real, seed, None)
        for jmode in (("compiled", "interpret") if graph else (None,)):
            sub = name + ("-" + jmode if jmode else "")
            got[sub], refs[sub] = attempt(fn, jg, seed, jmode), ref
    return got, refs


def describe(prog):
    if isinstance(prog, IntProgram):
        return "dtype=%s shapes=%s steps=%s values=%s" % (prog.dtype, prog.shapes, prog.steps,
                                                          [v.tolist() for v in prog.values])
    return "dtype=%s shapes=%s steps=%s n_out=%d method=%d grad_ys=%s stop=%s unconnected=%s hess=%s" % (
        prog.dtype, prog.shapes, prog.steps, prog.n_out, prog.method, prog.grad_ys, prog.stop, prog.unconnected,
        prog.hess)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--programs", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", type=int, default=None, help="run one program (its seed) verbosely")
    ap.add_argument("--modes", default="graph,eager,function,int,keras,features")
    ap.add_argument("--scenarios", default=None,
                    help="comma-separated names from tf_fuzz_features.SCENARIOS (mode features); default all")
    ap.add_argument("--float32-only", action="store_true")
    ap.add_argument("--edge-fraction", type=float, default=0.3)
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--wide", action="store_true", help="also draw bench/tf_fuzz_wide.py's ops (graph, eager, "
                                                        "function modes)")
    ap.add_argument("--new", action="store_true", help="also draw bench/tf_fuzz_new.py's ops (round 36's: "
                                                       "convolutions, pooling, tf.image, bitwise, ...)")
    args = ap.parse_args()

    import tensorflow as real
    import jitgrad as jg
    real.get_logger().setLevel("ERROR")

    modes = args.modes.split(",")
    scenarios = args.scenarios.split(",") if args.scenarios else None
    seeds = [args.only] if args.only is not None else range(args.seed, args.seed + args.programs)
    stats = collections.Counter()
    found = collections.defaultdict(list)
    for seed in seeds:
        edge = (seed % 10) < args.edge_fraction * 10
        prog = make_program(seed, edge, not args.float32_only, args.wide, args.new)
        iprog = make_int_program(seed, args.new)
        for mode in modes:
            if mode == "keras":
                ref, got = attempt(run_keras, real, seed), {"keras": attempt(run_keras, jg, seed)}
            elif mode == "int":
                ref = attempt(run_int_graph, real, iprog)
                got = {"int-compiled": attempt(run_int_graph, jg, iprog, "compiled"),
                       "int-interpret": attempt(run_int_graph, jg, iprog, "interpret"),
                       "int-eager": attempt(run_int_eager, jg, iprog)}
                # eager is compared with TF eager: op-def dtype checks are TypeErrors in graphs
                # but InvalidArgumentErrors when TF runs the op eagerly
                ref_eager = attempt(run_int_eager, real, iprog)
            elif mode == "graph":
                ref = attempt(run_graph, real, prog)
                got = {"compiled": attempt(run_graph, jg, prog, "compiled"),
                       "interpret": attempt(run_graph, jg, prog, "interpret")}
            elif mode == "eager":
                ref, got = attempt(run_eager, real, prog), {"eager": attempt(run_eager, jg, prog)}
            elif mode == "function":
                ref, got = attempt(run_function, real, prog), {"function": attempt(run_function, jg, prog)}
            else:
                got, refs = run_features(real, jg, seed, scenarios)
            for sub, res in got.items():
                if sub == "int-eager":
                    ref = ref_eager
                if mode == "features":
                    ref = refs[sub]
                stats["runs"] += 1
                if isinstance(res, UNSUPPORTED) and not isinstance(ref, UNSUPPORTED):
                    stats["unsupported"] += 1
                    if args.only is not None or not args.quiet:
                        print("seed %d %s: unsupported: %s: %s" % (seed, sub, type(res).__name__, str(res)[:150]))
                    continue
                if tf_lacks_gradient(ref):
                    stats["tf_lacks_gradient"] += 1       # TF has no higher-order rule; jitgrad has: not a bug
                    continue
                why = compare(ref, res)
                if why is None:
                    stats["agree"] += 1
                    continue
                if (sub in FLOAT_RUNNERS and prog.dtype == "float32" and agrees_with_tf_float64(real, prog, sub, res)) \
                        or (mode == "features" and features_agree_with_tf_float64(real, sub, seed, res)):
                    stats["tf_float32_artifact"] += 1
                    if args.only is not None or not args.quiet:
                        print("seed %d %s: TF float32 differs, TF float64 agrees with jitgrad: %s" % (seed, sub, why))
                    continue
                if mode in ("graph", "function", "features") and agrees_with_tf_unrewritten(real, prog, sub, seed, res):
                    stats["tf_grappler_artifact"] += 1
                    if args.only is not None or not args.quiet:
                        print("seed %d %s: TF's graph rewrite differs, TF without those rewrites "
                              "agrees with jitgrad: %s" % (seed, sub, why))
                    continue
                stats["mismatch"] += 1
                found[sub].append(seed)
                print("MISMATCH seed %d %s (edge=%s): %s\n   %s" % (
                    seed, sub, edge, why, "scenario %s of bench/tf_fuzz_features.py" % sub if mode == "features"
                    else describe(iprog if sub.startswith("int-") else prog)))
                if args.only is not None:
                    for r in (ref, res):
                        if isinstance(r, BaseException):
                            traceback.print_exception(r)
        stats["programs"] += 1
    print("\nprograms %d, runs %d: agree %d, mismatch %d, jitgrad-unsupported %d, TF lacks a gradient %d, "
          "TF float32 artifact %d, TF grappler artifact %d" % (
              stats["programs"], stats["runs"], stats["agree"], stats["mismatch"], stats["unsupported"],
              stats["tf_lacks_gradient"], stats["tf_float32_artifact"], stats["tf_grappler_artifact"]))
    for sub, ss in found.items():
        print("  %s mismatches: seeds %s" % (sub, ss[:40]))


if __name__ == "__main__":
    main()
