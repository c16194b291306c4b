"""Bad runtime shapes and sizes: an error of TF's type, never a crash, a hang or a wrong number.

Runs that crashed or corrupted memory before are made in a child process, so a
crash fails the test instead of ending the test run; runs that hung have a timeout.
Expected behaviour is TF 2.x's (checked against tensorflow-cpu 2.x when written).
"""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import jitgrad as tf
from jitgrad.errors import InvalidArgumentError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODES = ("interpret", "compiled")


def child(code, timeout=120):
    """Runs ``code`` in a fresh interpreter; returns the JSON object its last line prints."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), JITGRAD_CACHE="0")
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=timeout)
    assert p.returncode == 0, f"child died with {p.returncode}: {p.stderr[-3000:]}"
    return json.loads(p.stdout.strip().splitlines()[-1])


PRELUDE = """
import json, numpy as np, jitgrad as tf
def attempt(sess, fetch, feed):
    try:
        return ["ok", np.asarray(sess.run(fetch, feed)).tolist()]
    except Exception as e:
        return [type(e).__name__, str(e)]
"""


# ---------------------------------------------------------------- grad_ys shaped unlike y
def test_gather_gradient_with_larger_grad_ys_raises_in_both_engines():
    out = child(PRELUDE + """
g = tf.Graph()
with g.as_default():
    x = tf.compat.v1.placeholder(tf.float32, [None], name="x")
    y = tf.gather(x, tf.constant([0, 2]))
    gy = tf.compat.v1.placeholder(tf.float32, [None], name="gy")
    (dx,) = tf.gradients(y, x, grad_ys=gy)
    assert isinstance(dx, tf.IndexedSlices)   # (as TF's; made dense by the gather's own gradient)
    values = dx.values
    dx = tf.convert_to_tensor(dx)
res = {}
for mode in ("interpret", "compiled"):
    s = tf.compat.v1.Session(graph=g, config={"jitgrad_mode": mode})
    # (2, 2, 2: the session's fast runner is installed for the right shape; 1000 then misses it)
    res[mode] = [attempt(s, dx, {x: np.arange(4.), gy: np.ones(n)}) for n in (1000, 1, 2, 2, 2, 1000)]
    res[mode + " values"] = [attempt(s, values, {x: np.arange(4.), gy: np.ones(n)}) for n in (1000, 2)]
print(json.dumps(res))
""")
    for mode in MODES:
        big, small, right, right2, right3, again = out[mode]
        assert right == right2 == right3
        for r in (big, small, again):
            assert r[0] == "InvalidArgumentError", (mode, r)
        assert "gy:0" in big[1] and "[1000]" in big[1] and "[2]" in big[1], big   # the tensor and both shapes
        assert right == ["ok", [1.0, 0.0, 1.0, 0.0]]
        # the slices' values alone: the grad reshaped to the 2 indices' rows, as TF's
        big, right = out[mode + " values"]
        assert big[0] == "InvalidArgumentError" and right == ["ok", [1.0, 1.0]], (big, right)


def test_keepdims_reduction_gradient_never_reads_a_neighbour():
    """The Sum(keepdims) gradient read past a (1, 2) grad_ys and returned other memory."""
    out = child(PRELUDE + """
g = tf.Graph()
with g.as_default():
    x = tf.compat.v1.placeholder(tf.float32, [None], name="x")
    z = tf.reduce_sum(x[None, :] * tf.ones([3, 1]), axis=0, keepdims=True)   # (1, n)
    gz = tf.compat.v1.placeholder(tf.float32, [None, None], name="gz")
    (dz,) = tf.gradients(z, x, grad_ys=gz)
res = {}
for mode in ("interpret", "compiled"):
    s = tf.compat.v1.Session(graph=g, config={"jitgrad_mode": mode})
    res[mode] = [attempt(s, dz, {x: np.arange(4.), gz: v}) for v in
                 (np.ones((1, 2)), np.ones((1, 1)), np.ones((2, 4)), np.arange(4.).reshape(1, 4))]
print(json.dumps(res))
""")
    for mode in MODES:
        *bad, right = out[mode]
        assert [r[0] for r in bad] == ["InvalidArgumentError"] * 3, (mode, bad)
        assert right == ["ok", [0.0, 3.0, 6.0, 9.0]]   # d/dx_j sum_i 3 x_j gz_j = 3 gz_j


def test_constant_grad_ys_against_an_unknown_dim():
    """A constant grad_ys passes the graph-time check against [None]; the run finds it wrong."""
    out = child(PRELUDE + """
g = tf.Graph()
with g.as_default():
    x = tf.compat.v1.placeholder(tf.float32, [None], name="x")
    y = tf.tile(x * 2.0, [2])
    (dx,) = tf.gradients(y, x, grad_ys=tf.constant(np.ones(5, np.float32)))
res = {}
for mode in ("interpret", "compiled"):
    s = tf.compat.v1.Session(graph=g, config={"jitgrad_mode": mode})
    res[mode] = [attempt(s, dx, {x: np.arange(n, dtype=np.float32)}) for n in (4, 2)]
print(json.dumps(res))
""")
    for mode in MODES:
        assert out[mode][0][0] == "InvalidArgumentError", out[mode]
        assert out[mode][1][0] == "InvalidArgumentError", out[mode]


def test_static_grad_ys_mismatch_is_a_graph_time_value_error():
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [4])
        y = tf.gather(x, [0, 1])
        with pytest.raises(ValueError):
            tf.gradients(y, x, grad_ys=tf.ones([3]))


def test_every_output_must_fit_its_static_shape(monkeypatch):
    """A shape rule that computes a concrete shape unlike the graph's promise is caught
    before any kernel runs (a backstop for shape-rule bugs)."""
    from jitgrad.ops.registry import REGISTRY
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [3])
        y = tf.tanh(x)
    opdef = REGISTRY["Tanh"]
    monkeypatch.setattr(opdef, "infer", lambda shapes, dts, attrs: [((4,), dts[0])])
    for mode in MODES:
        with pytest.raises(InvalidArgumentError, match="static shape"):
            tf.compat.v1.Session(graph=g, config={"jitgrad_mode": mode}).run(y, {x: np.ones(3)})


# ---------------------------------------------------------------- internal errors, hangs, overflow
@pytest.mark.parametrize("mode", MODES)
def test_sum_of_concat_of_empty_tensors(mode):
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None])
        y = tf.reduce_sum(tf.concat([x, x], 0))
        (dx,) = tf.gradients(y, x)
    before = tf.cache_info()["fallbacks"]
    sess = tf.compat.v1.Session(graph=g, config={"jitgrad_mode": mode})
    v, d = sess.run([y, dx], {x: np.zeros(0, np.float32)})
    assert v == 0.0 and d.shape == (0,)
    assert tf.cache_info()["fallbacks"] == before          # it compiles


def test_code_generator_failure_falls_back_to_the_interpreter(monkeypatch):
    from jitgrad import compiler
    from jitgrad.codegen import kernel
    monkeypatch.setattr(compiler, "STRICT_PASSES", False)   # the suite's setting; users get the fallback
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float64, [3])
        y = tf.reduce_sum(tf.sin(x)) * 3.0

    def broken(self):
        raise AttributeError("'NoneType' object has no attribute 'type'")
    monkeypatch.setattr(kernel.KernelBuilder, "build", broken)
    tf.clear_cache()
    xv = np.array([0.1, 0.2, 0.3])
    out = tf.compat.v1.Session(graph=g).run(y, {x: xv})
    assert out == pytest.approx(3 * np.sin(xv).sum(), rel=1e-12)
    assert tf.cache_info()["fallbacks"] == 1


def test_huge_broadcast_raises_instead_of_hanging():
    out = child(PRELUDE + """
g = tf.Graph()
with g.as_default():
    x = tf.compat.v1.placeholder(tf.float32, [])
    y = tf.reduce_sum(tf.broadcast_to(x, [2**33, 2**33]))   # 2**66 elements
    z = tf.reduce_sum(tf.broadcast_to(x, [2**31, 2**31]))   # 2**62 float32: 2**64 bytes
    w = tf.reduce_sum(tf.broadcast_to(x, [2**30, 2**30]))   # 2**62 bytes: fits int64, no address space
res = {m: [attempt(tf.compat.v1.Session(graph=g, config={"jitgrad_mode": m}), f, {x: 1.0}) for f in (y, z, w)]
       for m in ("interpret", "compiled")}
print(json.dumps(res))
""", timeout=60)
    for mode in MODES:
        (t1, m1), (t2, m2), (t3, m3) = out[mode]
        assert t1 == "InvalidArgumentError", out[mode]
        assert "2**63 - 1 elements" in m1        # TF's message
        # 2**62 elements is a valid shape whose bytes overflow: TF 2.x's Session gives OOM for it
        assert t2 == "ResourceExhaustedError" and "OOM when allocating" in m2, out[mode]
        assert t3 == "ResourceExhaustedError" and "OOM when allocating" in m3, out[mode]   # TF's OOM


@pytest.mark.parametrize("mode", MODES)
def test_element_counts_overflowing_int64(mode):
    g = tf.Graph()
    with g.as_default():
        z = tf.zeros([2**31] * 3)                # TF builds it and its kernel raises
        x = tf.compat.v1.placeholder(tf.float32, [None])
        t = tf.tile(x, [2**62])
        with pytest.raises(ValueError, match="2\\*\\*63 - 1"):
            tf.compat.v1.placeholder(tf.float32, [2**40] * 3)     # TF: ValueError when made
    sess = tf.compat.v1.Session(graph=g, config={"jitgrad_mode": mode})
    with pytest.raises(InvalidArgumentError, match="2\\*\\*63 - 1 elements"):
        sess.run(z)
    with pytest.raises(InvalidArgumentError, match="2\\*\\*63 - 1 elements"):
        sess.run(t, {x: np.ones(4, np.float32)})


def test_element_count_overflow_eagerly():
    with pytest.raises(InvalidArgumentError):
        tf.zeros([2**40] * 3)


# ---------------------------------------------------------------- gather indices, reduction axes
@pytest.mark.parametrize("mode", MODES)
def test_gather_gradient_never_wraps_negative_indices(mode):
    """With the gather's output fed, its index check does not run; the gradient's must."""
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None])
        idx = tf.compat.v1.placeholder(tf.int32, [None])
        y = tf.gather(x, idx)
        (dx,) = tf.gradients(y, x)
        dx = tf.convert_to_tensor(dx)   # (IndexedSlices, as TF's: dense, it is the gather's gradient)
    sess = tf.compat.v1.Session(graph=g, config={"jitgrad_mode": mode})
    for bad in ([-1, 1], [4, 1]):
        with pytest.raises(InvalidArgumentError):
            sess.run(dx, {x: np.arange(4.), idx: bad, y: [5.0, 7.0]})
    np.testing.assert_array_equal(sess.run(dx, {x: np.arange(4.), idx: [3, 1], y: [5.0, 7.0]}), [0, 1, 0, 1])


@pytest.mark.parametrize("mode", MODES)
def test_gather_with_empty_output_takes_any_indices(mode):
    """TF's gather checks indices only when it copies: params (3, 0)[5] is an empty (1, 0)."""
    g = tf.Graph()
    with g.as_default():
        p = tf.compat.v1.placeholder(tf.float32, [3, None])
        idx = tf.compat.v1.placeholder(tf.int32, [None])
        y = tf.gather(p, idx)
    sess = tf.compat.v1.Session(graph=g, config={"jitgrad_mode": mode})
    assert sess.run(y, {p: np.zeros((3, 0)), idx: [5]}).shape == (1, 0)
    with pytest.raises(InvalidArgumentError):
        sess.run(y, {p: np.zeros((3, 2)), idx: [5]})


@pytest.mark.parametrize("mode", MODES)
def test_duplicate_reduction_axes(mode):
    """TF builds the graph (its shape function takes a repeated axis) and its kernel raises."""
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, None)    # rank known only at run time
        d = tf.reduce_sum(x, axis=[0, 0])
        m = tf.reduce_max(tf.ones([2, 3]), axis=[1, -1])
        assert m.shape == (2,)
    sess = tf.compat.v1.Session(graph=g, config={"jitgrad_mode": mode})
    for fetch, feed in ((d, {x: np.ones((2, 3))}), (m, None)):
        with pytest.raises(InvalidArgumentError, match="duplicate"):
            sess.run(fetch, feed)


def test_duplicate_reduction_axes_eagerly_and_squeeze_allows_them():
    with pytest.raises(InvalidArgumentError):
        tf.reduce_sum(tf.ones([2, 3]), [0, 0])
    assert tf.squeeze(tf.ones([1, 3]), [0, 0]).shape == (3,)   # TF's Squeeze takes a dim twice


def test_unaligned_feeds():
    """Feeds that are C-contiguous but not aligned to their element size (views into a
    byte buffer) give the same results as aligned copies (no aligned-load fault)."""
    out = child(PRELUDE + """
g = tf.Graph()
with g.as_default():
    x = tf.compat.v1.placeholder(tf.float32, [1000])
    y = tf.compat.v1.placeholder(tf.float64, [1000, 8])
    z = tf.reduce_sum(tf.tanh(x) * 2.0) + tf.cast(tf.reduce_sum(tf.matmul(y, y, transpose_b=True)), tf.float32)
    grads = tf.gradients(z, [x, y])
buf = bytearray(8 * 9000 + 16)
xa = np.frombuffer(buf, np.float32, count=1000, offset=1)
ya = np.frombuffer(buf, np.float64, count=8000, offset=4003).reshape(1000, 8)
rng = np.random.default_rng(0)
xa[:] = rng.standard_normal(1000)
ya[:] = rng.standard_normal((1000, 8))
s = tf.compat.v1.Session(graph=g)
same = []
for _ in range(3):
    a = s.run([z] + grads, {x: xa, y: ya})
    b = s.run([z] + grads, {x: np.ascontiguousarray(xa), y: np.ascontiguousarray(ya)})
    same.append(all(np.array_equal(p, q) for p, q in zip(a, b)))
print(json.dumps({"unaligned": [bool(xa.flags.aligned), bool(ya.flags.aligned)], "same": same}))
""")
    assert out == {"unaligned": [False, False], "same": [True] * 3}


@pytest.mark.parametrize("mode", MODES)
def test_assign_add_of_another_shape_to_a_partly_shaped_variable(mode):
    """A variable declared [None] takes any value's shape by assign; assign_add must then
    match its current shape (TF's error), not compile a program with an unknown dim."""
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable(np.zeros(3, np.float32), shape=tf.TensorShape([None]), validate_shape=False)
        p = tf.compat.v1.placeholder(tf.float32, [None])
        grow = v.assign(p)
        add = v.assign_add(p)
        init = tf.compat.v1.global_variables_initializer()
    before = tf.cache_info()["fallbacks"]
    sess = tf.compat.v1.Session(graph=g, config={"jitgrad_mode": mode})
    sess.run(init)
    sess.run(grow, {p: np.arange(5, dtype=np.float32)})
    with pytest.raises(InvalidArgumentError, match="shapes must be equal"):
        sess.run(add, {p: np.ones(2, np.float32)})
    np.testing.assert_array_equal(sess.run(add, {p: np.ones(5, np.float32)}), [1, 2, 3, 4, 5])
    assert tf.cache_info()["fallbacks"] == before
