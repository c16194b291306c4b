"""fusion_plan.PAR_MIN_*_JOINED: once a big GEMM makes a kernel parallel, smaller nests
and GEMMs of the same kernel are split across its threads too (their threads are awake
inside the call); a kernel without a big one splits them only across threads already
awake (test_parallel_awake.py), if at all.
Results stay bit-identical for any thread count and equal to numpy's."""
import numpy as np

import jitgrad as tf
from jitgrad import compiler
from jitgrad.codegen import parallel
from jitgrad.codegen.fusion_plan import PAR_MIN_FLOPS, PAR_MIN_FLOPS_JOINED, plan_fusion
from jitgrad.passes import ir
from jitgrad.passes.prune import prune


def _mlp(big):
    """relu(X W1 + b1) W2 with W1 [784, 512] (a GEMM above PAR_MIN_FLOPS) when big,
    else with X already the hidden layer; W2 [512, 10] (a GEMM below it)."""
    rng = np.random.default_rng(7)
    X = rng.standard_normal((256, 784 if big else 512)).astype(np.float32)
    W1 = (rng.standard_normal((784, 512)) * 0.05).astype(np.float32)
    b1 = rng.standard_normal(512).astype(np.float32)
    W2 = (rng.standard_normal((512, 10)) * 0.05).astype(np.float32)
    g = tf.Graph()
    with g.as_default():
        px = tf.compat.v1.placeholder(tf.float32, X.shape)
        p1, pb, p2 = (tf.compat.v1.placeholder(tf.float32, v.shape) for v in (W1, b1, W2))
        pre = (tf.matmul(px, p1) if big else px) + pb
        y = tf.matmul(tf.nn.relu(pre), p2)
    feeds = {px: X, pb: b1, p2: W2}
    if big:
        feeds[p1] = W1
    H = np.maximum((X.astype(np.float64) @ W1 if big else X) + b1, 0)
    return g, y, feeds, H @ W2


def _plan(y, feeds):
    fed = [(t, v) for t, v in feeds.items()]
    ops = prune([y], {id(t) for t, _ in fed})
    p = compiler.optimise(ir.from_graph(ops, [y], fed, None))
    return p, plan_fusion(p, allow_parallel=True)


def _kinds(p, plan):
    """(what, parallel) per nest: the op of a node unit, else the nest's shape."""
    return [(p.nodes[g.units[0].pos].op if g.shape is None else tuple(g.shape), g.parallel)
            for g in plan.nests]


def test_small_nests_split_only_inside_a_parallel_kernel():
    assert 2 * 256 * 512 * 784 >= PAR_MIN_FLOPS > 2 * 256 * 10 * 512 >= PAR_MIN_FLOPS_JOINED
    g, y, feeds, _ = _mlp(big=True)
    with g.as_default():
        p, plan = _plan(y, feeds)
    # the big GEMM, the [256, 512] bias + relu nest and the 2.6 MFLOP GEMM all split
    assert plan.parallel
    assert _kinds(p, plan) == [("MatMul", True), ((256, 512), True), ("MatMul", True)]
    g, y, feeds, _ = _mlp(big=False)
    with g.as_default():
        p, plan = _plan(y, feeds)
    # the same nest and small GEMM alone: not worth waking a thread, so split only
    # across threads already awake (fusion_plan.PAR_MIN_FLOPS_AWAKE: test_parallel_awake.py)
    assert plan.parallel and not plan.wake
    assert _kinds(p, plan) == [((256, 512), True), ("MatMul", True)]


def test_joined_nests_give_the_same_bits_on_any_thread_count():
    g, y, feeds, want = _mlp(big=True)
    got = {}
    with tf.compat.v1.Session(graph=g) as s:
        try:
            for t in (1, 2, 3):
                parallel.set_num_threads(t)
                got[t] = np.asarray(s.run(y, feeds))
        finally:
            parallel.set_num_threads(None)
    assert got[1].tobytes() == got[2].tobytes() == got[3].tobytes()
    np.testing.assert_allclose(got[1], want, rtol=1e-4, atol=1e-4)
    cfg = tf.compat.v1.ConfigProto(jitgrad_mode="interpret")
    with tf.compat.v1.Session(graph=g, config=cfg) as s:
        np.testing.assert_allclose(s.run(y, feeds), got[1], rtol=1e-5, atol=1e-5)
