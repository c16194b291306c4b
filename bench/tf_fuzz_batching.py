"""Differential fuzzing of the While / If batching rules (jitgrad/while_batching.py,
cond_batching.py, used by batched_gradients.py) against real TensorFlow:

    PYTHONPATH=. /work/benchenv/bin/python bench/tf_fuzz_batching.py [--programs 200] [--seed 0] [--only SEED]
        [--loops]

Each random program maps x ([E, n], float32 or float64) to y of the same shape through 1-3
control-flow steps: while_loops with a fixed, fed or data-dependent trip count (also with
maximum_iterations), nested loops, conds (data-dependent or fed predicates) inside loop bodies,
tf.cond / tf.case / tf.switch_case, map_fn / scan / foldl, a custom gradient whose gradient
is a tf.cond on its upstream gradient (a per-row predicate in a jacobian), casts to the other
float dtype, captured tensors, and inputs with 0, ties, large values, inf and NaN. For each,
jitgrad's and TF's results are compared:

  graph-compiled / graph-interpret   tf.hessians and tape jacobian / batch_jacobian built in a
                                     v1 Graph, run by a Session (jitgrad: both modes)
  function                           tape jacobian, batch_jacobian and a nested-tape Hessian in tf.function
  eager                              the same eagerly (both compared with TF's graph run)
  fallback-graph / fallback-function jitgrad with the While and If rules removed (the per-row
                                     paths) against jitgrad with them: must agree too

Comparison, tolerances, the float64 rerun that tells TF's float32 flushing from a jitgrad error,
and "TF lacks a gradient" are tf_fuzz.py's (reused, not copied). Mismatches on programs whose
inputs hold inf / NaN / 1e30 are counted apart ("nonfinite"), and so are mismatches only in where
NaN / inf land ("nan_pattern", e.g. log1p of x < -1): README "Known differences" documents both
(`0 * inf` = NaN where TF has inf through loops that overflow; TF's NaN columns through conds).
"""
import argparse
import collections
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tf_fuzz as core  # noqa: E402 - sets TF's env (log level, oneDNN off) and sys.path

# unary pieces of loop bodies / branches: smooth ones and a few with kinks or ties
BODY_UNARY = ["tanh", "sin", "square", "sigmoid", "softplus", "relu", "abs", "cos", "elu", "log1p"]
FLOWS = ["while_fixed", "while_fed", "while_data", "while_nested", "while_cond", "while_two", "cond",
         "cond_fed", "switch_case", "case", "map_fn", "scan", "foldl", "custom_cond", "while_cast"]

# --loops: loop-heavy programs, also a custom gradient iterating on its upstream gradient until
# a per-row condition holds (a per-row trip count in a jacobian: while_batching_pred.py). (The
# default list stays as it was: a seed names the same program as before.)
LOOP_FLOWS = ["while_fixed", "while_fed", "while_data", "while_nested", "while_cond", "while_two", "while_cast",
              "scan", "foldl", "custom_while", "custom_while"]

Program = collections.namedtuple("Program", "dtype shape values T k steps weights special")


def make_program(seed, flows=FLOWS):
    rng = np.random.default_rng(seed)
    dtype = ["float32", "float64"][seed % 2]
    shape = [(2, 2), (2, 3), (3, 2), (1, 3), (3, 1), (4, 5)][int(rng.integers(0, 6))]
    v = rng.uniform(-1.5, 1.5, shape).astype(np.float32).astype(np.float64)   # the float64 rerun sees float32's
    special = False
    r = rng.random()
    if r < 0.2:        # inf / NaN / huge / zero
        mask = rng.random(shape) < 0.25
        v = np.where(mask, rng.choice(core.SPECIALS, shape).astype(np.float64), v)
        fin = np.isfinite(v)
        special = bool((~fin).any() or (np.abs(np.where(fin, v, 0)) > 1e6).any())
    elif r < 0.45:     # ties and zeros (relu / abs / max kinks, equal predicates)
        v = np.round(v * 2) / 2
    steps = []
    for _ in range(int(rng.integers(1, 4))):
        kind = str(rng.choice(flows))
        sub = tuple(str(s) for s in rng.choice(BODY_UNARY, 2))
        steps.append((kind, sub, int(rng.integers(0, 1 << 20))))
    weights = rng.uniform(0.2, 1.0, shape)
    return Program(dtype, shape, v, int(rng.integers(0, 4)), int(rng.integers(-1, 4)), steps, weights, special)


def _un(tf, name, v):
    return core.UNARY[name](tf, v, 0)


def _flow(tf, kind, sub, p, v, c, T, k):
    """One control-flow step: v -> same shape and dtype; c: a captured tensor (v's shape)."""
    f = lambda u: _un(tf, sub[0], u)            # noqa: E731
    g = lambda u: _un(tf, sub[1], u)            # noqa: E731
    a = 0.25 + 0.25 * (p % 3)
    n = 1 + p % 3
    if kind == "while_fixed":
        return tf.while_loop(lambda i, u: i < n, lambda i, u: (i + 1, u * a + f(u) * c), [0, v])[1]
    if kind == "while_fed":
        return tf.while_loop(lambda i, u: i < T, lambda i, u: (i + 1, u + g(u) * a - c * 0.1), [0, v])[1]
    if kind == "while_data":
        # trip count from the values (and maximum_iterations from the fed T or a constant)
        mi = T if p % 2 else 3
        return tf.while_loop(lambda i, u: tf.reduce_sum(u) < 4.0, lambda i, u: (i + 1, u + f(u) * a + 0.5),
                             [0, v], maximum_iterations=mi)[1]
    if kind == "while_nested":
        def outer(i, u):
            _, w = tf.while_loop(lambda j, w: j < n, lambda j, w: (j + 1, w * a + g(w) * c), [0, u])
            return i + 1, w + f(u) * 0.5
        return tf.while_loop(lambda i, u: i < T, outer, [0, v])[1]
    if kind == "while_cond":
        def body(i, u):
            pred = tf.reduce_sum(u) > float(p % 3) - 1.0 if p % 2 else tf.equal(i % 2, 0)
            return i + 1, tf.cond(pred, lambda: f(u) * c + u, lambda: g(u) * a)
        return tf.while_loop(lambda i, u: i < (T if p % 4 < 2 else n), body, [0, v])[1]
    if kind == "while_two":
        _, u, w = tf.while_loop(lambda i, u, w: i < n,
                                lambda i, u, w: (i + 1, u * a + f(w), w - g(u) * c * 0.5), [0, v, c])
        return u + w
    if kind == "while_cast":
        other = tf.float64 if v.dtype == tf.float32 else tf.float32
        _, u = tf.while_loop(lambda i, u: i < n, lambda i, u: (i + 1, f(u) * a + tf.cast(c, other)),
                             [0, tf.cast(v, other)])
        return tf.cast(u, v.dtype) + v * 0.5
    if kind == "cond":
        return tf.cond(tf.reduce_max(v) > tf.reduce_mean(c), lambda: f(v) * c, lambda: g(v) - c)
    if kind == "cond_fed":
        return tf.cond(T > 1, lambda: f(v) * a + v, lambda: g(v) * c)
    if kind == "switch_case":
        return tf.switch_case(k, [lambda: f(v), lambda: g(v) * c, lambda: v * c * a])
    if kind == "case":
        s = tf.reduce_sum(v)
        return tf.case([(s > 1.0, lambda: f(v) * c), (s < -1.0, lambda: g(v))], default=lambda: v * a)
    if kind == "map_fn":
        return tf.map_fn(lambda r: f(r[0]) * r[1], (v, c), fn_output_signature=v.dtype)
    if kind == "scan":
        return tf.scan(lambda acc, r: acc * a + f(r), v)
    if kind == "foldl":
        return v * 0.5 + tf.foldl(lambda acc, r: acc * a + g(r), v, initializer=tf.zeros_like(v[0]))
    if kind == "custom_cond":
        @tf.custom_gradient
        def h(u):
            def grad(dy):
                # per row of a jacobian: the sign of the row's dy . u picks the formula
                return tf.cond(tf.reduce_sum(dy * u) > 0.0, lambda: dy * 2.0 * u, lambda: dy * (u - 1.0))
            return u * u, grad
        return h(f(v))
    if kind == "custom_while":
        @tf.custom_gradient
        def h(u):
            def grad(dy):
                # per row of a jacobian: dy grows until the row's sum |r| reaches 1, at most 4
                # steps (or as many as the row's 2 sum |dy|: a per-row maximum_iterations)
                mi = 4 if p % 2 else tf.cast(2.0 * tf.reduce_sum(tf.abs(dy)), tf.int32)
                return tf.while_loop(lambda i, r: tf.reduce_sum(tf.abs(r)) < 1.0,
                                     lambda i, r: (i + 1, r * (1.5 + u * u) + dy * 0.1), [0, dy],
                                     maximum_iterations=mi)[1]
            return u * u, grad
        return h(f(v))
    raise KeyError(kind)


def build(tf, prog, x, T, k):
    v = x
    for kind, sub, p in prog.steps:
        c = tf.tanh(v) * 0.5 if p % 2 else x * 0.25
        v = _flow(tf, kind, sub, p, v, c, T, k)
    return v


def _loss(tf, prog, y):
    return tf.reduce_sum(y * prog.weights.astype(prog.dtype))


def _feeds(prog):
    return prog.values.astype(prog.dtype), np.int32(prog.T), np.int32(prog.k)


def run_graph(tf, prog, mode=None):
    """y, tf.hessians, tape jacobian and batch_jacobian in a v1 Graph, one Session.run."""
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(prog.dtype, prog.shape)
        T = tf.compat.v1.placeholder(tf.int32, [])
        k = tf.compat.v1.placeholder(tf.int32, [])
        with tf.GradientTape(persistent=True) as t:
            t.watch(x)
            y = build(tf, prog, x, T, k)
        (h,) = tf.hessians(_loss(tf, prog, y), x)
        j = t.jacobian(y, x, experimental_use_pfor=False)
        bj = t.batch_jacobian(y, x, experimental_use_pfor=False)
    kw = {"config": tf.compat.v1.ConfigProto(jitgrad_mode=mode)} if mode else {}
    xv, tv, kv = _feeds(prog)
    with tf.compat.v1.Session(graph=g, **kw) as s:
        return [np.asarray(r) for r in s.run([y, h, j, bj], {x: xv, T: tv, k: kv})]


def _tape_results(tf, prog, x, T, k, pfor):
    with tf.GradientTape(persistent=True) as outer:
        outer.watch(x)
        with tf.GradientTape(persistent=True) as t:
            t.watch(x)
            y = build(tf, prog, x, T, k)
            loss = _loss(tf, prog, y)
        gr = t.gradient(loss, x)
    j = t.jacobian(y, x, experimental_use_pfor=pfor)
    bj = t.batch_jacobian(y, x, experimental_use_pfor=pfor)
    # zeros where the gradient does not depend on x: eagerly only the taken branch is on the tape
    # (a linear one leaves it unconnected: None), where a graph's If connects it (zeros, in TF too)
    h = outer.jacobian(gr, x, experimental_use_pfor=pfor, unconnected_gradients="zero")
    return [y, h, j, bj]          # run_graph's order: TF's graph run is the reference for all


def run_function(tf, prog, pfor=True):
    f = tf.function(lambda x, T, k: _tape_results(tf, prog, x, T, k, pfor))
    return [np.asarray(r) for r in f(*[tf.constant(v) for v in _feeds(prog)])]


def run_eager(tf, prog, pfor=True):
    return [np.asarray(r) for r in _tape_results(tf, prog, *[tf.constant(v) for v in _feeds(prog)], pfor)]


def without_rules(fn, *args):
    """fn(*args) with the While and If batching rules removed: the per-row fallbacks."""
    from jitgrad import batched_gradients as bg
    with bg.rules_removed("While", "If"):
        return core.attempt(fn, *args)


def reference(real, prog):
    """TF's results: its v1 graph run (tf.hessians, and the jacobians as its while_loop over rows,
    experimental_use_pfor=False), the reference for every jitgrad runner (the same quantities in
    the same order). TF's tf.function / eager runs of the same tape code take 3-6 s a program
    (pfor converting the loops), its graph run 2 s."""
    return core.attempt(run_graph, real, prog)


def tf64_agrees(real, prog, got):
    """TF's float64 run, rounded to float32, matches jitgrad's float32 results (TF flushing)."""
    if prog.dtype != "float32" or isinstance(got, BaseException):
        return False
    return core._float32_of_float64_matches(reference(real, prog._replace(dtype="float64")), got)


def _only_nan_pattern(ref, got):
    """Both ran and every result agrees wherever both are finite: only where NaN / inf land
    differs. TF's If / While second derivatives multiply a zero cotangent by a saved NaN
    intermediate (log1p(x) at x < -1) and put NaN in whole Hessian columns where its plain
    graph, and jitgrad, give the finite value (README "Known differences"; seeds 194, 1011)."""
    if isinstance(ref, BaseException) or isinstance(got, BaseException) or len(ref) != len(got):
        return False
    for a, b in zip(ref, got):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        fin = np.isfinite(a) & np.isfinite(b)
        if core.compare([a[fin]], [b[fin]]) is not None:
            return False
    return True


def describe(prog):
    return "dtype=%s shape=%s T=%d k=%d steps=%s special=%s\n   x=%s" % (
        prog.dtype, prog.shape, prog.T, prog.k, prog.steps, prog.special, prog.values.tolist())


def check(real, jg, seed, stats, found, verbose, flows=FLOWS):
    prog = make_program(seed, flows)
    runners = {"graph": (run_graph, ("compiled", "interpret")), "function": (run_function, (None,)),
               "eager": (run_eager, (None,))}
    ref = reference(real, prog)
    for name, (fn, modes) in runners.items():
        for mode in modes:
            sub = name + ("-" + mode if mode else "")
            args = (jg, prog) + ((mode,) if mode else ())
            got = core.attempt(fn, *args)
            verdicts = [("tf", ref, got)]
            if mode in ("compiled", None) and name != "eager":
                verdicts.append(("fallback", without_rules(fn, *args), got))
            for against, r, gres in verdicts:
                stats["runs"] += 1
                if isinstance(gres, core.UNSUPPORTED) and not isinstance(r, core.UNSUPPORTED):
                    stats["unsupported"] += 1
                    if verbose:
                        print("seed %d %s: unsupported %r" % (seed, sub, gres))
                    continue
                if against == "tf" and isinstance(r, ValueError) and name != "graph" and \
                        "None values not supported" in str(r):
                    stats["tf_hessians_none"] += 1     # tf.hessians of a loss linear in x raises; a tape gives zeros
                    continue
                if against == "tf" and core.tf_lacks_gradient(r):
                    stats["tf_lacks_gradient"] += 1
                    continue
                why = core.compare(r, gres)
                if why is None:
                    stats["agree"] += 1
                    continue
                if against == "tf" and tf64_agrees(real, prog, gres):
                    stats["tf_float32_artifact"] += 1
                    continue
                cls = "nonfinite" if prog.special else "nan_pattern" if _only_nan_pattern(r, gres) else "mismatch"
                key = "%s-vs-%s" % (sub, against)
                stats[cls] += 1
                found[(cls, key)].append(seed)
                print("%s seed %d %s vs %s: %s\n   %s" % (cls.upper(), seed, sub, against,
                                                       why if verbose else why[:300], describe(prog)))
                if verbose:
                    for x in (r, gres):
                        if isinstance(x, BaseException):
                            import traceback
                            traceback.print_exception(x)


def _summary(stats, seed):
    print("programs %d (to seed %d), runs %d: agree %d, mismatch %d, NaN-pattern only %d, nonfinite-input mismatch %d, "
          "jitgrad-unsupported %d, TF lacks a gradient %d, TF float32 artifact %d, tf.hessians None %d" % (
              stats["programs"], seed, stats["runs"], stats["agree"], stats["mismatch"], stats["nan_pattern"],
              stats["nonfinite"],
              stats["unsupported"], stats["tf_lacks_gradient"], stats["tf_float32_artifact"], stats["tf_hessians_none"]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--programs", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", type=int, default=None)
    ap.add_argument("--loops", action="store_true", help="loop-heavy programs (LOOP_FLOWS)")
    args = ap.parse_args()
    import tensorflow as real
    import jitgrad as jg
    real.get_logger().setLevel("ERROR")
    seeds = [args.only] if args.only is not None else range(args.seed, args.seed + args.programs)
    stats, found = collections.Counter(), collections.defaultdict(list)
    for seed in seeds:
        check(real, jg, seed, stats, found, args.only is not None, LOOP_FLOWS if args.loops else FLOWS)
        stats["programs"] += 1
        if stats["programs"] % 10 == 0:
            _summary(stats, seed)
        sys.stdout.flush()
    _summary(stats, seed)
    for (cls, key), ss in sorted(found.items()):
        print("  %s %s: seeds %s" % (cls, key, ss[:40]))


if __name__ == "__main__":
    main()
