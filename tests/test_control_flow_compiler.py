"""How control flow compiles: one kernel for every trip count, regions in
``explain``, the passes inside and around regions, native code only."""
import re

import numpy as np
import pytest

import jitgrad as tf
from jitgrad import compiler
from jitgrad.cache import set_enabled


@pytest.fixture(autouse=True)
def _compiled_no_disk():
    set_enabled(False)
    tf.clear_cache()
    yield
    set_enabled(None)


def _session(g):
    return tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto(jitgrad_mode="compiled"))


def _rnn_graph():
    g = tf.Graph()
    with g.as_default():
        W = tf.compat.v1.placeholder(tf.float32, [8, 8])
        x0 = tf.compat.v1.placeholder(tf.float32, [8, 1])
        n = tf.compat.v1.placeholder(tf.int32, [])
        _, xT = tf.while_loop(lambda t, h: t < n, lambda t, h: (t + 1, tf.tanh(tf.matmul(W, h))), [0, x0])
        loss = tf.reduce_sum(xT)
        (gW,) = tf.gradients(loss, W)
    return g, W, x0, n, xT, loss, gW


def _final_program(sess, fetches, feed):
    fed = sess._fed_list(feed)
    els = list(fetches)
    return compiler.make_plan(sess, els, fed, run_passes=True).program


def test_trip_count_is_not_part_of_the_cache_key_and_results_are_reproducible():
    g, W, x0, n, xT, loss, gW = _rnn_graph()
    sess = _session(g)
    rng = np.random.default_rng(0)
    Wv = (rng.standard_normal((8, 8)) * 0.4).astype(np.float32)
    xv = rng.standard_normal((8, 1)).astype(np.float32)
    before = tf.cache_info()
    results = {}
    for steps in (0, 1, 5, 300, 1000):
        results[steps] = sess.run([loss, gW], {W: Wv, x0: xv, n: steps})
    after = tf.cache_info()
    assert after["compiles"] - before["compiles"] == 1
    assert after["fallbacks"] == before["fallbacks"]
    again = sess.run([loss, gW], {W: Wv, x0: xv, n: 1000})
    assert again[0].tobytes() == results[1000][0].tobytes() and again[1].tobytes() == results[1000][1].tobytes()
    # zero iterations: the loss of x0 and no gradient wrt W
    np.testing.assert_allclose(results[0][0], xv.sum(), rtol=1e-6)
    np.testing.assert_array_equal(results[0][1], np.zeros((8, 8), np.float32))
    ref = tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto(jitgrad_mode="interpret"))
    for steps in (5, 300):
        exp = ref.run([loss, gW], {W: Wv, x0: xv, n: steps})
        np.testing.assert_allclose(results[steps][0], exp[0], rtol=1e-5)
        np.testing.assert_allclose(results[steps][1], exp[1], rtol=1e-4, atol=1e-6)


def test_explain_shows_the_regions_and_the_loop_is_in_one_function():
    g, W, x0, n, xT, loss, gW = _rnn_graph()
    sess = _session(g)
    feed = {W: np.eye(8, dtype=np.float32), x0: np.ones((8, 1), np.float32), n: 3}
    rep = sess.explain([loss, gW], feed)
    heads = [h for h, _ in rep.groups]
    assert any("_body:" in h for h in heads) and any("_cond:" in h for h in heads)
    assert any(h.startswith("node") and "While" in h for h in heads)
    # the cond / body functions are inlined into the entry function (matmul kernels stay
    # functions of their own, as they are in any kernel)
    defines = [line for line in rep.ir.splitlines() if line.startswith("define")]
    assert not [d for d in defines if re.search(r"_r\d+_(body|cond)\(", d)], defines
    assert any(re.search(r"@jg_[0-9a-f]+\(", d) for d in defines)
    assert "realloc" in rep.ir   # the forward loop's stack for the gradient grows at run time


def test_constant_predicate_inlines_the_branch():
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [3])
        y = tf.cond(tf.constant(2) > tf.constant(1), lambda: x * 2.0, lambda: tf.exp(x))
    sess = _session(g)
    p = _final_program(sess, [y], {x: np.ones(3, np.float32)})
    assert not any(nd.op == "If" for nd in p.nodes)
    assert dict(p.stats).get("regions", {}).get("inlined") == 1
    np.testing.assert_array_equal(sess.run(y, {x: [1.0, 2.0, 3.0]}), [2.0, 4.0, 6.0])


def test_dce_inside_bodies_and_unread_stacks_are_dropped():
    g, W, x0, n, xT, loss, gW = _rnn_graph()
    with g.as_default():
        _, z = tf.while_loop(lambda t, h: t < n, lambda t, h: (t + 1, h * 2.0), [0, x0])
    sess = _session(g)
    feed = {W: np.eye(8, dtype=np.float32), x0: np.ones((8, 1), np.float32), n: 4}
    # forward only: the loop whose gradient was built saves no per-iteration stacks here
    p = _final_program(sess, [loss], feed)
    loops = [nd for nd in p.nodes if nd.op == "While"]
    assert len(loops) == 1 and loops[0].attrs["n_ys"] == 0
    # with the gradient fetched, the forward loop saves its variables
    p = _final_program(sess, [loss, gW], feed)
    fwd = [nd for nd in p.nodes if nd.op == "While" and nd.attrs["cond"] is not None]
    assert fwd and fwd[0].attrs["n_ys"] == 2   # h at the start and at the end of each iteration (not t)
    np.testing.assert_allclose(sess.run(z, feed), np.full((8, 1), 16.0))


def test_loop_variables_nothing_needs_are_dropped():
    g = tf.Graph()
    with g.as_default():
        W = tf.compat.v1.placeholder(tf.float32, [4, 4])
        b = tf.compat.v1.placeholder(tf.float32, [4, 1])
        x0 = tf.compat.v1.placeholder(tf.float32, [4, 1])
        _, xT = tf.while_loop(lambda t, h: t < 3, lambda t, h: (t + 1, tf.tanh(tf.matmul(W, h) + b)), [0, x0])
        gW, gb = tf.gradients(tf.reduce_sum(xT), [W, b])
    sess = _session(g)
    feed = {W: np.eye(4, dtype=np.float32) * 0.5, b: np.ones((4, 1), np.float32), x0: np.ones((4, 1), np.float32)}
    # the backward loop carries d/dh, d/dW and d/db; fetching only d/dW drops d/db's accumulator
    p = _final_program(sess, [gW], feed)
    bwd = [nd for nd in p.nodes if nd.op == "While" and nd.attrs["cond"] is None]
    assert len(bwd) == 1 and bwd[0].attrs["n_vars"] == 2
    assert any(st.get("dropped_vars") for name, st in p.stats if name == "regions")
    ref = tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto(jitgrad_mode="interpret"))
    np.testing.assert_allclose(sess.run(gW, feed), ref.run(gW, feed), rtol=1e-6)
    got = sess.run([gW, gb], feed)
    exp = ref.run([gW, gb], feed)
    np.testing.assert_allclose(got[0], exp[0], rtol=1e-6)
    np.testing.assert_allclose(got[1], exp[1], rtol=1e-6)


def test_dead_code_in_a_body_is_removed():
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [4])

        def body(i, h):
            unused = tf.exp(h) * 3.0   # noqa: F841 - dead in the body
            return i + 1, h + 1.0
        _, y = tf.while_loop(lambda i, h: i < 3, body, [0, x])
    sess = _session(g)
    p = _final_program(sess, [y], {x: np.zeros(4, np.float32)})
    (loop,) = [nd for nd in p.nodes if nd.op == "While"]
    assert "Exp" not in [nd.op for nd in loop.attrs["body"].nodes]
    np.testing.assert_array_equal(sess.run(y, {x: np.zeros(4, np.float32)}), np.full(4, 3.0, np.float32))


def test_identical_bodies_in_different_graphs_share_a_kernel():
    def build():
        g = tf.Graph()
        with g.as_default():
            x = tf.compat.v1.placeholder(tf.float32, [2])
            n = tf.compat.v1.placeholder(tf.int32, [])
            _, y = tf.while_loop(lambda i, h: i < n, lambda i, h: (i + 1, tf.sin(h)), [0, x])
        return g, x, n, y
    before = tf.cache_info()["compiles"]
    outs = []
    for _ in range(2):
        g, x, n, y = build()
        outs.append(_session(g).run(y, {x: [0.5, 1.0], n: 3}))
    assert tf.cache_info()["compiles"] - before == 1
    np.testing.assert_allclose(outs[0], np.sin(np.sin(np.sin(np.array([0.5, 1.0], np.float32)))), rtol=1e-6)


def test_outer_product_matmul_is_elementwise_and_bit_identical_to_numpy():
    # the gradient of a matvec wrt its matrix is an outer product (inner dimension 1):
    # simplify makes it an elementwise col * row + 0.0 that fuses with its consumer
    g = tf.Graph()
    with g.as_default():
        a = tf.compat.v1.placeholder(tf.float32, [5, 1])
        c = tf.compat.v1.placeholder(tf.float32, [4, 1])
        y = tf.matmul(a, c, transpose_b=True)
        y2 = tf.matmul(tf.transpose(a), tf.transpose(c), transpose_a=True) + 1.0
    av = np.array([[0.0], [-0.0], [np.inf], [np.nan], [1e-30]], np.float32)
    cv = np.array([[-1.0], [0.0], [2.5], [-1e-20]], np.float32)
    sess = _session(g)
    p = _final_program(sess, [y, y2], {a: av, c: cv})
    assert not any(nd.op == "MatMul" for nd in p.nodes)
    out, out2 = sess.run([y, y2], {a: av, c: cv})
    with np.errstate(all="ignore"):
        exp = av @ cv.T
    assert out.tobytes() == exp.tobytes()     # -0.0 products come out +0.0, as numpy's
    np.testing.assert_array_equal(out2, exp + np.float32(1.0))


def test_cse_does_not_merge_a_body_value_with_the_same_expression_outside():
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [3])
        outside = tf.sin(x) * 2.0                    # the body computes the same expression of h
        _, h = tf.while_loop(lambda i, h: i < 3, lambda i, h: (i + 1, tf.sin(h) * 2.0), [0, x])
        inside_once = tf.while_loop(lambda i, h: i < 1, lambda i, h: (i + 1, tf.sin(h) * 2.0), [0, x])[1]
    xv = np.array([0.1, 0.5, -1.0], np.float32)
    f = lambda v: np.sin(v) * np.float32(2.0)  # noqa: E731
    a, b, c = _session(g).run([outside, h, inside_once], {x: xv})
    np.testing.assert_allclose(a, f(xv), rtol=1e-6)
    np.testing.assert_allclose(b, f(f(f(xv))), rtol=1e-5)
    np.testing.assert_allclose(c, f(xv), rtol=1e-6)
    assert tf.cache_info()["fallbacks"] == 0


_DISK_SCRIPT = """
import sys
import numpy as np
import jitgrad as tf
g = tf.Graph()
with g.as_default():
    W = tf.compat.v1.placeholder(tf.float32, [8, 8])
    x0 = tf.compat.v1.placeholder(tf.float32, [8, 1])
    n = tf.compat.v1.placeholder(tf.int32, [])
    _, xT = tf.while_loop(lambda t, h: t < n, lambda t, h: (t + 1, tf.tanh(tf.matmul(W, h))), [0, x0])
    loss = tf.reduce_sum(xT)
    (gW,) = tf.gradients(loss, W)
    y = tf.cond(n > 3, lambda: loss * 2.0, lambda: loss)
rng = np.random.default_rng(0)
feed = {W: (rng.standard_normal((8, 8)) * 0.4).astype(np.float32), x0: np.ones((8, 1), np.float32), n: 50}
out = tf.compat.v1.Session(graph=g).run([y, gW], feed)
info = tf.cache_info()
print(out[0].tobytes().hex(), out[1].tobytes().hex(), info["disk_hits"], info["compiles"], info["fallbacks"],
      "llvmlite.binding" in sys.modules)
"""


def test_a_kernel_with_loops_comes_back_from_the_disk_cache(tmp_path):
    import os
    import subprocess
    import sys
    env = dict(os.environ, JITGRAD_CACHE_DIR=str(tmp_path), JITGRAD_CACHE="1")
    env.pop("JITGRAD_LOADER", None)
    env.pop("JITGRAD_MODE", None)
    for var in ("JITGRAD_TARGET_CPU", "JITGRAD_TARGET_FEATURES"):   # the host target: a named CPU
        env.pop(var, None)                                          # needs LLVM to resolve its features
    runs = [subprocess.run([sys.executable, "-c", _DISK_SCRIPT], env=env, capture_output=True, text=True,
                           check=True).stdout.split() for _ in range(2)]
    first, second = runs
    assert first[2:5] == ["0", "1", "0"] and second[2:5] == ["1", "0", "0"]
    assert first[:2] == second[:2]          # bit-identical results from the loaded kernel
    assert second[5] == "False"             # served by jitgrad's ELF loader, LLVM never loaded
