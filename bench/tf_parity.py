"""Bit-level parity with real TensorFlow (run where TensorFlow is installed):

    python bench/tf_parity.py [--graphs 200] [--seed 0]

The same Python code builds each random graph twice, once against
`import tensorflow as tf` and once against `import jitgrad as tf` (which is
the point of an API-compatible library), computes tf.gradients of a random
scalar loss with a random aggregation method and grad_ys, and compares the
results. Reports how many results are bit-identical and the worst ulp
distance of the rest. TensorFlow is not a dependency; this is a tool.
"""
import argparse
import os
import sys

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

UNARY = ["tanh", "sigmoid", "exp_neg_sq", "sin", "cos", "square", "sqrt_abs1", "log1p_abs", "relu", "softplus",
         "neg", "abs"]
BINARY = ["add", "sub", "mul", "div_safe", "maximum", "minimum", "pow2", "pow3"]


def unary(tf, name, x):
    return {
        "tanh": lambda: tf.tanh(x), "sigmoid": lambda: tf.sigmoid(x), "exp_neg_sq": lambda: tf.exp(-x * x),
        "sin": lambda: tf.sin(x), "cos": lambda: tf.cos(x), "square": lambda: tf.square(x),
        "sqrt_abs1": lambda: tf.sqrt(tf.abs(x) + 1.0), "log1p_abs": lambda: tf.math.log1p(tf.abs(x)),
        "relu": lambda: tf.nn.relu(x), "softplus": lambda: tf.nn.softplus(x), "neg": lambda: -x,
        "abs": lambda: tf.abs(x),
    }[name]()


def binary(tf, name, a, b):
    return {
        "add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b,
        "div_safe": lambda: a / (tf.abs(b) + 1.0), "maximum": lambda: tf.maximum(a, b),
        "minimum": lambda: tf.minimum(a, b), "pow2": lambda: a ** 2 + b, "pow3": lambda: b * a ** 3,
    }[name]()


# Ops whose float32 results are correctly rounded in both libraries (IEEE basic
# operations and sqrt): any difference in these graphs is a difference in the
# gradient graph itself (formulas, operand order, summation order).
EXACT_UNARY = ["square", "sqrt_abs1", "relu", "neg", "abs"]


def spec(rng, exact_only=False, scalars=False):
    unary_ops = EXACT_UNARY if exact_only else UNARY
    n_in = int(rng.integers(1, 4))
    shapes = [tuple(int(d) for d in rng.integers(1, 4, size=int(rng.integers(0, 3)))) for _ in range(n_in)]
    if scalars:
        shapes = [() for _ in shapes]
    steps = []
    for _ in range(int(rng.integers(2, 9))):
        if rng.random() < 0.5:
            steps.append(("u", str(rng.choice(unary_ops)), int(rng.integers(0, 1 << 30))))
        else:
            steps.append(("b", str(rng.choice(BINARY)), int(rng.integers(0, 1 << 30)), int(rng.integers(0, 1 << 30))))
    values = [rng.uniform(-2, 2, s).astype(np.float32) for s in shapes]
    n_ys = int(rng.integers(1, 3))
    method = int(rng.integers(0, 3))
    weights = [float(np.float32(rng.uniform(0.1, 1.0))) for _ in range(n_ys)]
    use_grad_ys = bool(rng.random() < 0.5)
    return shapes, steps, values, n_ys, method, weights, use_grad_ys


def build_and_run(tf, sp):
    shapes, steps, values, n_ys, method, weights, use_grad_ys = sp
    methods = [tf.AggregationMethod.ADD_N, tf.AggregationMethod.EXPERIMENTAL_TREE,
               tf.AggregationMethod.EXPERIMENTAL_ACCUMULATE_N]
    g = tf.Graph()
    with g.as_default():
        xs = [tf.constant(v) for v in values]
        pool = list(xs)
        for st in steps:
            if st[0] == "u":
                pool.append(unary(tf, st[1], pool[st[2] % len(pool)]))
            else:
                pool.append(binary(tf, st[1], pool[st[2] % len(pool)], pool[st[3] % len(pool)]))
        ys = [tf.reduce_sum(pool[-1 - i % len(pool)]) for i in range(n_ys)]
        grads = tf.gradients(ys, xs, grad_ys=weights if use_grad_ys else None,
                             aggregation_method=methods[method],
                             unconnected_gradients=tf.UnconnectedGradients.ZERO)
        fetch = ys + grads
    with tf.compat.v1.Session(graph=g) as sess:
        return [np.asarray(v) for v in sess.run(fetch)]


def ulp_distance(a, b):
    a = np.asarray(a, np.float32).ravel().view(np.int32).astype(np.int64)
    b = np.asarray(b, np.float32).ravel().view(np.int32).astype(np.int64)
    a = np.where(a < 0, -(a & 0x7FFFFFFF), a)
    b = np.where(b < 0, -(b & 0x7FFFFFFF), b)
    return int(np.max(np.abs(a - b))) if a.size else 0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--graphs", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--mode", default="compiled", choices=["compiled", "interpret"])
    p.add_argument("--scalars", action="store_true",
                   help="scalar inputs only: no reductions, whose association order follows numpy, not Eigen")
    p.add_argument("--exact-only", action="store_true", help="only correctly rounded ops (tests graph structure)")
    args = p.parse_args()
    import tensorflow as real_tf
    import jitgrad
    jitgrad.set_default_mode(args.mode)
    rng = np.random.default_rng(args.seed)
    identical = total = rejected = mismatched_errors = 0
    worst = []
    for i in range(args.graphs):
        sp = spec(rng, args.exact_only, args.scalars)
        try:
            ref = build_and_run(real_tf, sp)
        except ValueError:
            # shapes that don't broadcast: jitgrad must refuse them as well
            try:
                build_and_run(jitgrad, sp)
                mismatched_errors += 1
            except ValueError:
                rejected += 1
            continue
        got = build_and_run(jitgrad, sp)
        for r, o in zip(ref, got):
            total += 1
            if r.shape == o.shape and np.array_equal(r.view(np.int32), o.astype(np.float32).view(np.int32)):
                identical += 1
            else:
                worst.append((ulp_distance(r, o) if r.shape == o.shape else 1 << 31, i))
    worst.sort(reverse=True)
    print(f"{args.graphs} random graphs, {total} fetched results ({args.mode}): {identical} bit-identical to "
          f"TensorFlow {real_tf.__version__} ({100 * identical / total:.1f}%)")
    print(f"{rejected} graphs with non-broadcastable shapes were rejected by both with ValueError; "
          f"{mismatched_errors} were rejected by TensorFlow only")
    if worst:
        print(f"others: worst {worst[0][0]} ulp (graph {worst[0][1]}); median "
              f"{worst[len(worst) // 2][0]} ulp over {len(worst)} results")


if __name__ == "__main__":
    main()
