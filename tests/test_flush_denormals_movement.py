"""The flush-denormals mode keeps denormals where values are only moved (README, Denormals).

Each op says what the mode does to it (OpDef.denormals, ops/registry.py). TF's kernels and
jitgrad's compiled code copy a denormal through gather, broadcast_to, a loop of no
iterations, a cond branch returning its input, ...; the reference kernels (interpreter,
eager) must too. Every case feeds x = [1e-39, -2e-39] (float32 denormals) and expects the
numpy result of the same data movement, bit for bit (signs of zeros included), compiled
and interpreted. The registry walk at the end fails for a "keep" op no case runs, so a new
movement op cannot go untested.
"""
import ml_dtypes
import numpy as np
import pytest

import jitgrad as tf
from jitgrad import cache
from jitgrad.func_graph import Func
from jitgrad.ops.registry import REGISTRY, apply_op
from jitgrad.ops.row_store import set_row

tf1 = tf.compat.v1
D = np.float32([1e-39, -2e-39])


@pytest.fixture(autouse=True)
def _mode_on():
    cache.set_enabled(False)       # kernels compiled here, never one a previous run left on disk
    saved = tf.config.get_flush_denormals()
    tf.config.set_flush_denormals(True)    # (the default; pinned: the suite may start opted out)
    yield
    tf.config.set_flush_denormals(saved)
    cache.set_enabled(None)


# name -> (build(x, gy, i) -> fetch, expected from D). ``gy``: a fed [2] cotangent (D as
# well), for gradient ops; ``i``: a fed int32 scalar 1 (for ops of run-time shapes).
CASES = {
    "while_no_iterations": (lambda x, gy, i: tf.while_loop(lambda k, v: k < 0, lambda k, v: (k + 1, v * 2.0),
                                                           [0, x])[1], D),
    "cond_returns_input": (lambda x, gy, i: tf.cond(i > 0, lambda: x, lambda: x * 2.0), D),
    "map_fn_identity": (lambda x, gy, i: tf.map_fn(lambda e: e, x), D),
    "concat": (lambda x, gy, i: tf.concat([x, x], 0), np.concatenate([D, D])),
    "stack": (lambda x, gy, i: tf.stack([x, x]), np.stack([D, D])),
    "unstack": (lambda x, gy, i: tf.unstack(x)[1], D[1]),
    "expand_squeeze": (lambda x, gy, i: tf.squeeze(tf.expand_dims(x, 0)), D),
    "reshape_transpose": (lambda x, gy, i: tf.transpose(tf.reshape(x, [1, 2])), D.reshape(2, 1)),
    "tile": (lambda x, gy, i: tf.tile(x, [2]), np.tile(D, 2)),
    "slice": (lambda x, gy, i: x[1:], D[1:]),
    "gather": (lambda x, gy, i: tf.gather(x, [1, 0]), D[::-1]),
    "broadcast_to": (lambda x, gy, i: tf.broadcast_to(x, [2, 2]), np.broadcast_to(D, (2, 2))),
    "fill": (lambda x, gy, i: tf.fill([3], x[1]), np.full(3, D[1])),
    "identity": (lambda x, gy, i: tf.identity(tf.stop_gradient(x)), D),
    "placeholder_with_default": (lambda x, gy, i: tf1.placeholder_with_default(x, [2]), D),
    "neg_abs": (lambda x, gy, i: tf.abs(-x), np.abs(D)),
    "where": (lambda x, gy, i: tf.where(i > 0, x, tf.zeros_like(x)), D),
    "top_k": (lambda x, gy, i: tf.math.top_k(x, 2).values, np.sort(D)[::-1]),
    "top_k_of_tensor_k": (lambda x, gy, i: tf.math.top_k(x, i + 1).values, np.sort(D)[::-1]),
    "boolean_mask": (lambda x, gy, i: tf.boolean_mask(x, [False, True]), D[1:]),
    "dynamic_slice": (lambda x, gy, i: x[i:], D[1:]),
    "dynamic_reshape": (lambda x, gy, i: tf.reshape(x, tf.stack([i + 1])), D),
    # (a REFLECT pad of a run-time size carries TF's size check: MirrorPadCheck)
    "mirror_pad_check": (lambda x, gy, i: tf.pad(tf.reshape(x, tf.stack([i + 1])), [[0, 0]], mode="REFLECT"), D),
    "dynamic_expand_dims": (lambda x, gy, i: tf.expand_dims(x, i - 1), D[None]),
    "dynamic_transpose": (lambda x, gy, i: tf.transpose(tf.reshape(x, [1, 2]), tf.stack([i, i - 1])),
                          D.reshape(2, 1)),
    "dynamic_fill": (lambda x, gy, i: tf.fill(tf.stack([i + 1]), x[0]), np.full(2, D[0])),
    "dynamic_tile": (lambda x, gy, i: tf.tile(x, [i + 1]), np.tile(D, 2)),
    "unique": (lambda x, gy, i: tf.unique(x)[0], D),
    "unique_with_counts": (lambda x, gy, i: tf.unique_with_counts(x)[0], D),
    "dynamic_broadcast_to": (lambda x, gy, i: tf.broadcast_to(x, [i + 1, 2]), np.broadcast_to(D, (2, 2))),
    "real_imag_conj": (lambda x, gy, i: tf.stack([tf.math.real(tf.complex(x, x)),
                                                  tf.math.imag(tf.math.conj(tf.complex(x, x)))]), np.stack([D, -D])),
    "set_row": (lambda x, gy, i: set_row(tf.zeros([2, 2]), i, x), np.stack([np.zeros(2, np.float32), D])),
    "py_function_sees_its_input": (lambda x, gy, i: tf.py_function(lambda a: a, [x], tf.float32), D),
    # conv2d's windows: a 1 x 2 window over a 1 x 2 image, the one window holding both pixels
    "conv_patches": (lambda x, gy, i: tf.reshape(apply_op("ConvPatches", [tf.reshape(x, [1, 1, 2, 1])], {
        "window": (1, 2), "strides": (1, 1), "dilations": (1, 1), "pads": (0, 0), "out": (1, 1)}), [2]), D),
    # TF converts float32 <-> bfloat16 with bit operations (ops/cast_kernel.py); other casts flush
    "cast_bfloat16_round_trip": (lambda x, gy, i: tf.cast(tf.cast(x, tf.bfloat16), tf.float32),
                                 D.astype(ml_dtypes.bfloat16).astype(np.float32)),
    # gradients that copy the cotangent gy = D back (scatter-adds into zeros flush, as in TF)
    "grad_slice": (lambda x, gy, i: tf.gradients(x[1:], x, grad_ys=gy[1:])[0], np.float32([0, D[1]])),
    "grad_dynamic_slice": (lambda x, gy, i: tf.gradients(x[i:], x, grad_ys=gy[1:])[0], np.float32([0, D[1]])),
    "grad_reduce_sum": (lambda x, gy, i: tf.gradients(tf.reduce_sum(x), x, grad_ys=gy[1])[0], np.full(2, D[1])),
}


def _build(name):
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [2], name="x")
        gy = tf1.placeholder(tf.float32, [2], name="gy")
        i = tf1.placeholder(tf.int32, [], name="i")
        y = CASES[name][0](x, gy, i)
    return g, y, {x: D, gy: D, i: 1}


def _op_types(ops):
    """The op types of ``ops`` and of every function (loop / branch body) they hold."""
    out = set()
    for op in ops:
        out.add(op.type)
        for v in op.attrs.values():
            if isinstance(v, Func):
                out |= _op_types(v.graph.get_operations())
    return out


def _same_bits(got, want):
    got, want = np.asarray(got), np.asarray(want, np.float32)
    return got.shape == want.shape and got.tobytes() == want.astype(got.dtype).tobytes()


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("mode", ["compiled", "interpret"])
def test_data_movement_keeps_denormals(name, mode):
    g, y, feed = _build(name)
    with tf1.Session(graph=g, config=tf1.ConfigProto(jitgrad_mode=mode)) as s:
        got = s.run(y, feed)
    assert _same_bits(got, CASES[name][1]), (name, mode, got)


def test_eager_data_movement_keeps_denormals():
    x = tf.constant(D)
    assert _same_bits(tf.gather(x, [1, 0]), D[::-1])
    assert _same_bits(tf.broadcast_to(x, [2, 2]), np.broadcast_to(D, (2, 2)))
    assert _same_bits(tf.cond(tf.constant(True), lambda: x, lambda: x * 2.0), D)
    assert _same_bits(x * 1.0, [0.0, -0.0])          # arithmetic still flushes (TF: 0 of the sign)


# Ops registered "keep" that no case above need run, and why.
_NO_FLOAT_PASSES = {   # no float value goes in and out
    "All", "Any", "Assert", "AsString", "ListCheck", "PrintV2", "ReduceJoin", "RegexFullMatch", "RegexReplace",
    "SplitOffsets", "StringFormat", "StringJoin", "StringLength", "StringLower", "StringSplitScalar",
    "StringStrip", "StringToNumber", "StringUpper", "Substr", "TensorListSplitOffsets", "Where", "ZerosLike",
    "OnesLike", "ZeroRows"}
_MADE_BY_PASSES = {    # made by jitgrad's rewrites, not reachable through the API by themselves: copies
    "EmptyStackCheck", "IdentityN", "SoftmaxXentLoss", "ReshapeLike", "ScalarOf", "SplitToShapesOf",
    "TakeAlongLastAxis", "BroadcastToShapeOf",
    "Softmax", "LogSoftmax"}   # (reachable, but copies of their primitives' value, which the cases run)
_DRAWS = {             # seeded random draws: an integer seed / Generator state in, new values out (none passes)
    "StatelessRandomUniform", "StatelessRandomNormal", "StatelessTruncatedNormal", "StatelessRandomUniformInt",
    "StatelessRandomUniformFullInt", "RngSkip",
    "StatelessMultinomial"}   # (float logits in, class indices out)


def test_every_op_that_keeps_denormals_is_run_or_exempt():
    covered = set()
    for name in CASES:
        g, _, _ = _build(name)
        covered |= _op_types(g.get_operations())
    keep = {n for n, o in REGISTRY.items() if o.denormals == "keep" and o.kind not in ("source", "random", "state")}
    missing = keep - covered - _NO_FLOAT_PASSES - _MADE_BY_PASSES - _DRAWS
    assert not missing, f"ops registered denormals='keep' that no case runs: {sorted(missing)}"
    assert not (_NO_FLOAT_PASSES | _MADE_BY_PASSES | _DRAWS) - set(REGISTRY)   # (no stale names)


@pytest.mark.parametrize("mode", ["compiled", "interpret"])
def test_tiny_input_passes_through_expm1_tan_elu(mode):
    """TF (2.21, FTZ + DAZ) and the compiled code return a denormal x itself from expm1, tan
    and elu; the reference kernels agree (denormals="pass_input"). Normal inputs compute."""
    xs = np.float32([1e-39, -2e-39, 0.5, -0.5])
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [4])
        ys = [tf.math.expm1(x), tf.tan(x), tf.nn.elu(x)]
    with tf1.Session(graph=g, config=tf1.ConfigProto(jitgrad_mode=mode)) as s:
        got = s.run(ys, {x: xs})
    for y, f in zip(got, (np.expm1, np.tan, lambda v: np.where(v > 0, v, np.expm1(v)))):
        assert _same_bits(y[:2], xs[:2])
        np.testing.assert_allclose(y[2:], f(xs[2:].astype(np.float64)), rtol=1e-6)


def test_interpreter_flushes_log1p_and_sin_as_tf():
    """TF flushes log1p(1e-39) and sin(1e-39) to zero; the interpreter does (compiled code
    passes x through: a documented difference, README "Known differences")."""
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [2])
        ys = [tf.math.log1p(x), tf.sin(x)]
    with tf1.Session(graph=g, config=tf1.ConfigProto(jitgrad_mode="interpret")) as s:
        for y in s.run(ys, {x: D}):
            assert _same_bits(y, [0.0, -0.0])
