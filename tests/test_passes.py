"""Each optimisation pass on small hand-made graphs: what it removes or
rewrites, its stats, and that ir.evaluate gives bit-identical results
(NaN where NaN, equal bits elsewhere, so the sign of zero counts)."""
import numpy as np
import pytest

import jitgrad as tf
from jitgrad import interpreter
from jitgrad.cache.key import program_digest
from jitgrad.ops.registry import apply_op
from jitgrad.ops.state_ops import VariableStore
from jitgrad.passes import ir, pipeline
from jitgrad.passes.aggregation import aggregation
from jitgrad.passes.constant_fold import constant_fold
from jitgrad.passes.cse import cse
from jitgrad.passes.dce import dce
from jitgrad.passes.prune import prune
from jitgrad.passes.simplify import simplify
from jitgrad.passes.stop_gradient import stop_gradient
from jitgrad.passes.util import clean, peak_live

ALL_PASSES = (stop_gradient, constant_fold, simplify, cse, dce, aggregation, pipeline.run)
SPECIALS = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.5, 2.0, 1e-40]


# ---------------------------------------------------------------- helpers
def build(fetches, feeds=None, var_values=None):
    """(Program, arg values) for ``fetches`` with ``feeds`` {tensor: array}."""
    fed = [(t, np.asarray(v, dtype=t.dtype.np)) for t, v in (feeds or {}).items()]
    var_values = var_values or {}
    ops = prune(fetches, {id(t) for t, _ in fed})
    p = ir.from_graph(ops, fetches, fed, lambda attrs: var_values[attrs["var"]])
    args = []
    for a in p.args:
        if a.kind == "feed":
            args.append(fed[a.key][1])
        elif a.kind == "const":
            args.append(a.value)
        else:
            args.append(var_values[a.key])
    return p, args


def assert_same_bits(a, b, what=""):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype, (what, a.shape, b.shape, a.dtype, b.dtype)
    if a.dtype.kind == "f":
        na, nb = np.isnan(a), np.isnan(b)
        assert np.array_equal(na, nb), (what, a, b)
        ua = np.where(na, 0, a).view(f"u{a.itemsize}")
        ub = np.where(nb, 0, b).view(f"u{b.itemsize}")
        assert np.array_equal(ua, ub), (what, a, b)
    else:
        assert np.array_equal(a, b), (what, a, b)


def assert_same_results(p, q, args, what=""):
    (o1, w1), (o2, w2) = ir.evaluate(p, args), ir.evaluate(q, args)
    assert len(o1) == len(o2) and len(w1) == len(w2)
    for x, y in zip(o1, o2):
        if x is None or y is None:
            assert x is None and y is None
        else:
            assert_same_bits(x, y, what)
    for (k1, x), (k2, y) in zip(w1, w2):
        assert k1 == k2
        assert_same_bits(x, y, what)


def ops_of(p):
    return [n.op for n in p.nodes]


def stats_of(p, name):
    return [s for n, s in p.stats if n == name][-1]


def check_all(p, args):
    for f in ALL_PASSES:
        assert_same_results(p, f(p), args, f.__name__)


def ph(shape, dtype=tf.float32, name=None):
    return tf.compat.v1.placeholder(dtype, shape, name=name)


def feed_specials(shape, dtype=np.float32):
    vals = np.array(SPECIALS, dtype) if np.dtype(dtype).kind == "f" else np.array([0, -1, 7, 2**31 - 1], dtype)
    return np.resize(vals, shape)


# ---------------------------------------------------------------- clean
def test_clean_renumbers_and_remaps_outputs():
    g = tf.Graph()
    with g.as_default():
        x = ph([3])
        a = tf.sin(x)
        b = tf.cos(x)
        c = a + b
    p, args = build([c, a], {x: [1, 2, 3]})
    # Drop Cos, rewire its use to Sin: c becomes Sin + Sin.
    cos = ops_of(p).index("Cos")
    q = clean(p, [i for i in range(len(p.nodes)) if i != cos], {ir.Value(cos): ir.Value(ops_of(p).index("Sin"))})
    assert ops_of(q) == ["Arg", "Sin", "AddV2"]
    assert q.outputs == [ir.Value(2), ir.Value(1)]
    (out, sin_out), _ = ir.evaluate(q, args)
    assert_same_bits(out, 2 * np.sin(np.float32([1, 2, 3])))
    with pytest.raises(ValueError):
        clean(p, [i for i in range(len(p.nodes)) if i != cos])  # dangling use


# ---------------------------------------------------------------- stop_gradient
def test_stop_gradient_identity_placeholder_with_default_vanish():
    g = tf.Graph()
    with g.as_default():
        x = ph([None, 3])
        d = tf.compat.v1.placeholder_with_default(tf.sin(x), shape=[None, 3])
        y = tf.identity(tf.stop_gradient(d) * 2.0)
        z = tf.reduce_sum(y, axis=0)
    p, args = build([z, y], {x: feed_specials((2, 3))})
    q = stop_gradient(p)
    assert not {"Identity", "StopGradient", "PlaceholderWithDefault"} & set(ops_of(q))
    st = stats_of(q, "stop_gradient")
    assert st["removed"] == 3 and st["nodes_before"] - st["nodes_after"] == 3
    assert st["removed_PlaceholderWithDefault"] == 1
    # The partial [None, 3] declared by placeholder_with_default is re-inferred.
    assert all(None not in n.outputs[0][0] for n in q.nodes)
    assert_same_results(p, q, args)


def test_fed_placeholder_with_default_is_an_arg():
    g = tf.Graph()
    with g.as_default():
        d = tf.compat.v1.placeholder_with_default(tf.constant([1.0, 2.0]), shape=[2])
        y = d * 3.0
    p, args = build([y], {d: [5.0, 6.0]})
    q = stop_gradient(p)
    assert stats_of(q, "stop_gradient")["removed"] == 0
    assert_same_results(p, q, args)


# ---------------------------------------------------------------- constant_fold
def test_shape_ops_fold_to_literals_and_fills():
    g = tf.Graph()
    with g.as_default():
        x = ph([50, 40])
        z = tf.zeros_like(x)
        o = tf.ones_like(x)
        s = apply_op("Shape", [x], {"out_type": tf.int32})
        y = x * o + z
    p, args = build([y, s, o], {x: np.ones((50, 40))})
    q = constant_fold(p)
    assert "ZerosLike" not in ops_of(q) and "OnesLike" not in ops_of(q) and "Shape" not in ops_of(q)
    lits = [n for n in q.nodes if n.op == "Literal"]
    assert all(n.attrs["value"].size <= ir.BAKE_LIMIT for n in lits)
    assert "Fill" in ops_of(q)  # the 2000-element ones are a scalar broadcast, not baked
    assert stats_of(q, "constant_fold")["folded"] == 3
    assert_same_results(p, q, args)
    # A folded shape is in the signature: another shape is another kernel anyway.
    assert any(np.array_equal(n.attrs["value"], [50, 40]) for n in lits)


def test_const_args_are_not_baked_but_uniform_classes_are():
    g = tf.Graph()
    with g.as_default():
        x = ph([3])
        a = tf.constant([1.0, 2.0, 3.0])   # value_class "other": stays a runtime arg
        two = tf.constant(2.0)             # value_class ("uniform", 2.0): foldable
        y = x * a + x * (two - 1.0)
    p, args = build([y], {x: [1, 2, 3]})
    q = pipeline.run(p)
    assert len(q.args) == len(p.args)
    baked = [n.attrs["value"] for n in q.nodes if n.op == "Literal"]
    assert not any(v.size == 3 for v in baked)
    # (two - 1.0) folds to 1.0, then x * 1 -> x: one Mul left (x * a).
    assert ops_of(q).count("Mul") == 1
    assert_same_results(p, q, args)


def test_large_nonuniform_fold_stays_runtime():
    g = tf.Graph()
    with g.as_default():
        x = ph([7, 3])
        shp = tf.cast(apply_op("Shape", [x], {"out_type": tf.int32}), tf.float32)  # [7., 3.]
        big = tf.tile(shp, [100])   # 200 non-uniform elements: too big to bake
        y = tf.reduce_sum(big) + tf.reduce_sum(x)
    p, args = build([y], {x: np.ones((7, 3))})
    q = constant_fold(p)
    assert "Tile" in ops_of(q)
    assert all(n.attrs["value"].size <= ir.BAKE_LIMIT for n in q.nodes if n.op == "Literal")
    assert_same_results(p, q, args)


def test_failing_kernel_is_not_folded():
    g = tf.Graph()
    with g.as_default():
        y = tf.floordiv(tf.constant(1), tf.constant(0))  # integer division by zero: a run-time error
    p, args = build([y])
    q = constant_fold(p)
    assert "FloorDiv" in ops_of(q)


def test_negative_zero_constant_keeps_its_sign():
    g = tf.Graph()
    with g.as_default():
        x = ph([4])
        y = x / (tf.constant(-0.0) * 1.0)  # -0.0 * 1 folds to -0.0: x / -0 = -inf for x > 0
    p, args = build([y], {x: [1, -1, 0, np.nan]})
    q = pipeline.run(p)
    out = ir.evaluate(q, args)[0][0]
    assert np.isneginf(out[0]) and np.isposinf(out[1])
    assert_same_results(p, q, args)


# ---------------------------------------------------------------- simplify
def _simplified(fn, feed_shape=(9,), dtype=tf.float32):
    g = tf.Graph()
    with g.as_default():
        x = ph(list(feed_shape), dtype)
        y = fn(x)
    p, args = build([y], {x: feed_specials(feed_shape, dtype.np)})
    q = pipeline.run(p)
    check_all(p, args)
    return p, q


@pytest.mark.parametrize("fn", [lambda x: x * 1.0, lambda x: 1.0 * x, lambda x: x / 1.0,
                                lambda x: -(-x), lambda x: x - 0.0, lambda x: x + (-0.0),
                                lambda x: (-0.0) + x, lambda x: tf.pow(x, 1.0),
                                lambda x: tf.reshape(x, [9]), lambda x: tf.transpose(x, [0]),
                                lambda x: apply_op("AddN", [x]), lambda x: apply_op("Cast", [x], {"DstT": tf.float32}),
                                lambda x: tf.math.multiply_no_nan(x, 1.0),
                                lambda x: tf.where(tf.constant(True), x, x * 2.0),
                                lambda x: tf.where(x > 0, x, x)])
def test_simplify_to_identity(fn, keep_denormals):
    """Each rewrite is the identity bit for bit in IEEE arithmetic (SPECIALS hold a
    denormal), so in numpy's numerics. In the default flush-denormals mode x * 1 flushes a
    denormal x in the reference kernels but not once simplified to x, as XLA does (README,
    Denormals; tests/test_flush_denormals.py compares such graphs after flushing)."""
    p, q = _simplified(fn)
    assert ops_of(q) == ["Arg"] * len(q.args), ops_of(q)


@pytest.mark.parametrize("fn, kept", [
    (lambda x: x + 0.0, "AddV2"),        # -0.0 + 0.0 = +0.0: not the identity
    (lambda x: 0.0 + x, "AddV2"),
    (lambda x: x - (-0.0), "Sub"),
    (lambda x: x * 0.0, "Mul"),          # NaN * 0 and inf * 0 are NaN
    (lambda x: x - x, "Sub"),            # inf - inf is NaN
    (lambda x: x / x, "RealDiv"),
    (lambda x: tf.pow(x, 3.0), "Pow"),   # x*x*x rounds twice
    (lambda x: tf.pow(x, 0.5), "Pow"),   # pow(-0, .5) = +0 but sqrt(-0) = -0
    (lambda x: tf.pow(x, tf.constant(np.full((9,), 2.0, np.float32))), "Pow"),  # full exponent: libm pow
    (lambda x: x * -1.0, "Mul"),
])
def test_simplify_leaves_inexact_rewrites_alone(fn, kept):
    p, q = _simplified(fn)
    assert kept in ops_of(q)


def test_x_minus_x_keeps_nan():
    p, q = _simplified(lambda x: x - x)
    out = ir.evaluate(q, [feed_specials((9,), np.float32)])[0][0]
    assert np.isnan(out[2]) and np.isnan(out[4]) and out[0] == 0


@pytest.mark.parametrize("exp, op", [(2.0, "Mul"), (-1.0, "Reciprocal")])
def test_pow_small_integer_exponent(exp, op):
    for dtype in (tf.float32, tf.float64):
        p, q = _simplified(lambda x: tf.pow(x, exp), dtype=dtype)
        assert "Pow" not in ops_of(q) and op in ops_of(q)
        assert sum(s["rewritten"] for n, s in q.stats if n == "simplify") >= 1


def test_pow_matches_fast_path_on_many_bit_patterns():
    # The documented justification of the pow rewrites, kept as a test.
    rng = np.random.default_rng(0)
    for dt, ut in ((np.float32, np.uint32), (np.float64, np.uint64)):
        x = rng.integers(0, np.iinfo(ut).max, 100_000, dtype=ut).view(dt)
        x = np.concatenate([x, np.array(SPECIALS, dt)])
        with np.errstate(all="ignore"):
            assert_same_bits(np.power(x, np.array(2, dt)), x * x)
            assert_same_bits(np.power(x, np.array(-1, dt)), 1 / x)
            assert_same_bits(np.power(x, np.array(1, dt)), x)
            assert_same_bits(np.power(x, np.array(0, dt)), np.ones_like(x))


def test_pow_zero_and_mul_no_nan_zero_become_constants():
    for fn in (lambda x: tf.pow(x, 0.0), lambda x: tf.math.multiply_no_nan(x, 0.0)):
        p, q = _simplified(fn)
        assert set(ops_of(q)) <= {"Arg", "Literal", "Fill"}


def test_neg_into_sub_and_add():
    g = tf.Graph()
    with g.as_default():
        a, b = ph([9]), ph([9])
        y1 = a - (-b)
        y2 = a + (-b)
        y3 = (-a) + b
    p, args = build([y1, y2, y3], {a: feed_specials((9,)), b: feed_specials((9,))[::-1]})
    q = pipeline.run(p)
    assert "Neg" not in ops_of(q)
    assert ops_of(q).count("Sub") == 2 and ops_of(q).count("AddV2") == 1
    check_all(p, args)


def test_reshape_chain_and_same_shape_gradient_helpers():
    g = tf.Graph()
    with g.as_default():
        x = ph([2, 3])
        r = tf.reshape(tf.expand_dims(tf.reshape(x, [6]), 0), [3, 2])
        y = tf.reduce_sum(tf.sin(x) * x)
        gx = tf.gradients(y, x)[0]
    p, args = build([r, gx], {x: feed_specials((2, 3))})
    q = pipeline.run(p)
    assert ops_of(q).count("Reshape") == 1 and "ExpandDims" not in ops_of(q)
    # sum's gradient (OnesLike -> Unreduce) folds to ones, and g * ones -> g
    assert "Unreduce" not in ops_of(q) and "OnesLike" not in ops_of(q)
    check_all(p, args)


def test_integer_add_zero():
    p, q = _simplified(lambda x: (x + 0) - 0, dtype=tf.int32)
    assert ops_of(q) == ["Arg"] * len(q.args)


# ---------------------------------------------------------------- cse
def test_cse_merges_duplicates_but_not_args():
    g = tf.Graph()
    with g.as_default():
        x = ph([4])
        y = tf.cos(x) * tf.constant(3.0) + tf.cos(x) * tf.constant(3.0)
    p, args = build([y], {x: feed_specials((4,))})
    q = cse(p)
    assert ops_of(q).count("Cos") == 1
    assert ops_of(q).count("Arg") == ops_of(p).count("Arg") == 3  # the two 3.0 consts stay apart
    assert ops_of(q).count("Mul") == 2
    assert stats_of(q, "cse")["merged"] == 1
    assert_same_results(p, q, args)


def test_cse_keeps_aggregation_attr_apart():
    g = tf.Graph()
    with g.as_default():
        x = ph([4])
        a = apply_op("AddN", [x, x], {"_aggregation": "ADD_N"})
        b = apply_op("AddN", [x, x], {"_aggregation": "EXPERIMENTAL_TREE"})
        c = apply_op("AddN", [x, x], {"_aggregation": "ADD_N"})
    p, args = build([a, b, c], {x: feed_specials((4,))})
    q = cse(p)
    assert ops_of(q).count("AddN") == 2


# ---------------------------------------------------------------- dce
def test_dce_removes_dead_nodes_keeps_args():
    g = tf.Graph()
    with g.as_default():
        x = ph([4])
        unused = tf.constant(5.0)
        dead = tf.exp(x) * unused
        y = tf.sin(x)
    p, args = build([y, dead], {x: feed_specials((4,))})
    p.outputs = p.outputs[:1]  # drop the fetch of `dead`
    q = dce(p)
    assert ops_of(q) == ["Arg", "Sin", "Arg"] or ops_of(q).count("Arg") == 2
    assert "Exp" not in ops_of(q) and len(q.args) == len(p.args)
    assert stats_of(q, "dce")["removed"] == 2
    assert_same_results(p, q, args)


def test_dce_rewires_shape_only_edges():
    g = tf.Graph()
    with g.as_default():
        x = ph([2, 3])
        ref = tf.exp(tf.sin(x))  # used only for its shape
        y = apply_op("SumToShape", [x * 2.0, ref])
    p, args = build([y], {x: feed_specials((2, 3))})
    q = dce(p)
    assert "Exp" not in ops_of(q) and "Sin" not in ops_of(q)
    assert stats_of(q, "dce")["shape_edges_rewired"] == 1
    assert_same_results(p, q, args)


def test_var_writes_are_remapped():
    g = tf.Graph()
    with g.as_default():
        x = ph([3])
        v = tf.Variable(np.zeros(3, np.float32))
        upd = v.assign_add(tf.identity(x) * 1.0)
    key = v._attrs["var"]
    p, args = build([upd], {x: feed_specials((3,))}, {key: np.ones(3, np.float32)})
    assert p.var_writes
    q = pipeline.run(p)
    assert q.var_writes[0][0] == key and ops_of(q).count("AddV2") == 1
    check_all(p, args)


# ---------------------------------------------------------------- aggregation
def _multi_contribution_graph(method, n=6):
    # x feeds n linear branches: their backward needs no saved forward value,
    # so the n contributions to x's gradient dominate liveness.
    g = tf.Graph()
    with g.as_default():
        x = ph([64])
        loss = 0.0
        for k in range(n):
            loss = loss + tf.reduce_sum(tf.sin(x) * (k + 1.5) * (0.5 + k) + x * (0.25 - k))
        gx = tf.gradients(loss, x, aggregation_method=method)[0]
    xv = np.linspace(-2, 2, 64).astype(np.float32)
    xv[:4] = [0.0, -0.0, np.inf, np.nan]
    return g, x, gx, xv


def test_aggregation_schedules_differ_results_do_not():
    results, programs = {}, {}
    for name, method in (("ADD_N", tf.AggregationMethod.ADD_N),
                         ("TREE", tf.AggregationMethod.EXPERIMENTAL_TREE),
                         ("ACC", tf.AggregationMethod.EXPERIMENTAL_ACCUMULATE_N)):
        g, x, gx, xv = _multi_contribution_graph(method)
        p, args = build([gx], {x: xv})
        q = pipeline.run(p)
        programs[name] = q
        results[name] = ir.evaluate(q, args)[0][0]
        want = interpreter.run([gx], {id(x): xv}, VariableStore())[0]
        assert_same_bits(results[name], want, name)
        check_all(p, args)
    add_n, tree = stats_of(programs["ADD_N"], "aggregation"), stats_of(programs["TREE"], "aggregation")
    assert add_n["n_ary_sums"] == 1 and add_n["moved"] == 0 and add_n["eager_sums"] == 0
    assert tree["eager_sums"] == 11 and tree["moved"] > 0
    assert tree["peak_live_after"] < tree["peak_live_before"]
    assert tree["peak_live_after"] < add_n["peak_live_after"]
    assert [n.op for n in programs["ADD_N"].nodes] != [n.op for n in programs["TREE"].nodes]
    assert_same_bits(results["ADD_N"], results["TREE"])


def test_peak_live_counts_intermediates():
    g = tf.Graph()
    with g.as_default():
        x = ph([3])
        a, b, c = tf.sin(x), tf.cos(x), tf.exp(x)
        y = a + b + c
    p, _ = build([y], {x: [1, 2, 3]})
    assert peak_live(p) == 4  # a, b, c live and a+b being produced


# ---------------------------------------------------------------- signature
def _sig(value):
    g = tf.Graph()
    with g.as_default():
        x = ph([3])
        y = tf.reduce_sum(x * tf.constant(value) + tf.sin(x))
        gx = tf.gradients(y, x)[0]
    p, args = build([y, gx], {x: [1, 2, 3]})
    q = pipeline.run(p)
    assert_same_results(p, q, args)
    return program_digest(q)


def test_signature_ignores_constant_values_but_not_classes():
    assert _sig(3.7) == _sig(4.25) == _sig(-11.0)
    assert _sig(1.0) != _sig(3.7)  # x * 1 was simplified away


def test_pipeline_reports_every_pass():
    g, x, gx, xv = _multi_contribution_graph(tf.AggregationMethod.ADD_N)
    p, args = build([gx], {x: xv})
    q = pipeline.run(p)
    names = [n for n, _ in q.stats]
    assert names[0] == "stop_gradient" and names[-1] == "aggregation"
    assert {"constant_fold", "simplify", "cse", "dce"} <= set(names)
    assert not p.stats  # passes are pure: the input Program is untouched
    assert len(q.nodes) < len(p.nodes)
