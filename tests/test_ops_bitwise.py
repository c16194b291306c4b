"""tf.bitwise (BitwiseAnd / Or / Xor, Invert, LeftShift, RightShift) and the & | ^ ~ operators
on integer tensors, against independent expectations: numpy's own bitwise ops for and / or /
xor / invert, Python's exact integers for the shifts with TF's clamp of the shift amount to
[0, bits - 1] (real TF 2.21 printed, e.g., int8 5 << 8 = -128, int8 -5 >> 100 = -1, uint8
255 >> 200 = 1). Compiled Sessions (int32 / int64: no interpreter fallback) and interpreted
ones, eager, tf.function; dtypes, errors and gradients as TF 2.21 has them (checked side by side)."""
import os
import sys

import numpy as np
import pytest

import jitgrad as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _graph_testing import dtype_id, run_graph  # noqa: E402

MODES = ["compiled", "interpret"]
NATIVE = [np.int32, np.int64]
OTHER_INTS = [np.int8, np.int16, np.uint8, np.uint16, np.uint32, np.uint64]
ALL_INTS = NATIVE + OTHER_INTS
B = tf.bitwise


def _operands(dtype, n=67, seed=0):
    """x over the whole range plus the extremes, y shift amounts inside and outside [0, bits)."""
    rng = np.random.default_rng(seed)
    info = np.iinfo(dtype)
    bits = info.bits
    x = np.concatenate([rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True),
                        np.array([info.min, info.max, 0, 1, 5, info.max // 2 + 1], dtype)])
    lo = 0 if info.min == 0 else -3 * bits
    y = np.concatenate([rng.integers(lo, 3 * bits, n), [bits - 1, bits, 0, bits + 1, 1, bits - 1]])
    y = np.clip(y, info.min, info.max).astype(dtype)
    if info.min < 0:
        y[:4] = [-1, info.min, info.max, -bits]
    return x, y


def _wrap(v, dtype):
    info = np.iinfo(dtype)
    v %= 1 << info.bits
    return v - (1 << info.bits) if v > info.max else v


def _expected_shifts(x, y):
    bits = np.iinfo(x.dtype).bits
    left, right = [], []
    for a, s in zip(x.tolist(), y.tolist()):
        s = min(max(s, 0), bits - 1)
        left.append(_wrap(a << s, x.dtype))
        right.append(a >> s)          # Python's >> floors: arithmetic for negative a
    return left, right


def _all_ops(a, b):
    return [B.bitwise_and(a, b), B.bitwise_or(a, b), B.bitwise_xor(a, b), B.invert(a),
            B.left_shift(a, b), B.right_shift(a, b)]


def _check(outs, x, y):
    left, right = _expected_shifts(x, y)
    want = [np.bitwise_and(x, y), np.bitwise_or(x, y), np.bitwise_xor(x, y), np.invert(x), left, right]
    for got, w, name in zip(outs, want, ["and", "or", "xor", "invert", "left_shift", "right_shift"]):
        got = np.asarray(got)
        assert got.dtype == x.dtype, name
        assert got.tolist() == np.asarray(w, x.dtype).tolist(), name


def test_names_as_tf():
    assert sorted(n for n in dir(tf.bitwise) if not n.startswith("_")) == \
        ["bitwise_and", "bitwise_or", "bitwise_xor", "invert", "left_shift", "right_shift"]
    assert tf.compat.v1.bitwise.left_shift is tf.bitwise.left_shift
    assert not hasattr(tf.math, "bitwise_and") and not hasattr(tf, "bitwise_and")   # (as TF 2.21)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", NATIVE, ids=dtype_id)
def test_native_integers_compiled_and_interpreted(dtype, mode):
    x, y = _operands(dtype)
    _check(run_graph(_all_ops, [x, y], mode), x, y)


@pytest.mark.parametrize("dtype", ALL_INTS, ids=dtype_id)
def test_every_integer_dtype_eager_and_graph(dtype):
    """int8 ... uint64 have no compiled lowering of any op yet (the whole program runs in the
    reference interpreter); their values match all the same."""
    x, y = _operands(dtype, seed=1)
    _check(_all_ops(tf.constant(x), tf.constant(y)), x, y)
    _check(run_graph(_all_ops, [x, y], "compiled", fallback_ok=dtype not in NATIVE), x, y)
    _check(run_graph(_all_ops, [x, y], "interpret"), x, y)


def test_tf_printed_shift_values():
    """Values real TF 2.21 printed for shift amounts outside [0, bits)."""
    sh8 = tf.constant([-100, -1, 0, 1, 7, 8, 9, 127], tf.int8)
    assert B.left_shift(tf.constant([5] * 8, tf.int8), sh8).numpy().tolist() == [5, 5, 5, 10, -128, -128, -128, -128]
    assert B.right_shift(tf.constant([-5] * 8, tf.int8), sh8).numpy().tolist() == [-5, -5, -5, -3, -1, -1, -1, -1]
    shu = tf.constant([0, 1, 7, 8, 9, 200, 255], tf.uint8)
    assert B.left_shift(tf.constant([255] * 7, tf.uint8), shu).numpy().tolist() == [255, 254, 128, 128, 128, 128, 128]
    assert B.right_shift(tf.constant([255] * 7, tf.uint8), shu).numpy().tolist() == [255, 127, 1, 1, 1, 1, 1]
    sh32 = np.array([-100, -1, 0, 1, 31, 32, 33, 200], np.int32)
    for mode in MODES:
        left, right = run_graph(lambda a, b: [B.left_shift(a, b), B.right_shift(a, b)],
                                [np.full(8, -2147483648, np.int32), sh32], mode)
        assert left.tolist() == [-2147483648] * 3 + [0] * 5
        assert right.tolist() == [-2147483648] * 3 + [-1073741824] + [-1] * 4


@pytest.mark.parametrize("mode", MODES)
def test_broadcasting(mode):
    x = np.array([[1], [2], [-8]], np.int64)
    y = np.array([1, 2, 4, 70], np.int64)
    outs = run_graph(lambda a, b: [B.bitwise_xor(a, b), B.left_shift(a, b), B.right_shift(y, a)], [x, y], mode)
    assert outs[0].tolist() == np.bitwise_xor(x, y).tolist()
    assert outs[1].tolist() == [[2, 4, 16, -2 ** 63], [4, 8, 32, 0], [-16, -32, -128, 0]]
    assert outs[2].tolist() == [[0, 1, 2, 35], [0, 0, 1, 17], [1, 2, 4, 70]]
    assert B.bitwise_and(tf.constant([[6], [7]]), tf.constant([3, 1])).numpy().tolist() == [[2, 0], [3, 1]]
    with pytest.raises(tf.errors.InvalidArgumentError):
        B.bitwise_xor(tf.constant([1, 2]), tf.constant([1, 2, 4]))
    with tf.Graph().as_default(), pytest.raises(ValueError):
        B.bitwise_xor(tf.compat.v1.placeholder(tf.int32, [2]), tf.compat.v1.placeholder(tf.int32, [3]))


def test_python_values_take_the_tensors_dtype():
    assert B.bitwise_and(tf.constant([6, 7], tf.int8), 3).numpy().tolist() == [2, 3]
    assert B.bitwise_and(tf.constant([6, 7], tf.int8), 3).dtype == tf.int8
    assert B.left_shift(tf.constant([1], tf.uint8), 9).numpy().tolist() == [128]
    r = B.bitwise_and([6, 7], 3)
    assert r.dtype == tf.int32 and r.numpy().tolist() == [2, 3]
    with pytest.raises(TypeError):
        B.left_shift(tf.constant([1]), 1.5)


@pytest.mark.parametrize("dt", [tf.float32, tf.float64, tf.bool], ids=str)
def test_non_integer_dtypes_as_tf(dt):
    """TF 2.21: InvalidArgumentError eagerly, TypeError while building a graph (or a function)."""
    v = tf.constant([True, False]) if dt == tf.bool else tf.constant([1.0, 2.0], dt)
    for fn in (B.bitwise_and, B.bitwise_or, B.bitwise_xor, B.left_shift, B.right_shift):
        with pytest.raises(tf.errors.InvalidArgumentError):
            fn(v, v)
    with pytest.raises(tf.errors.InvalidArgumentError):
        B.invert(v)
    with tf.Graph().as_default():
        p = tf.compat.v1.placeholder(dt, [2])
        for fn in (B.bitwise_and, B.right_shift):
            with pytest.raises(TypeError):
                fn(p, p)
        with pytest.raises(TypeError):
            B.invert(p)
    with pytest.raises(TypeError):
        tf.function(lambda a: B.bitwise_or(a, a))(v)


def test_mixed_integer_dtypes_as_tf():
    with pytest.raises(tf.errors.InvalidArgumentError):
        B.bitwise_and(tf.constant([6], tf.int32), tf.constant([3], tf.int64))
    with tf.Graph().as_default(), pytest.raises(TypeError):
        B.bitwise_and(tf.compat.v1.placeholder(tf.int32, [2]), tf.compat.v1.placeholder(tf.int64, [2]))


def test_operators_on_integer_tensors_are_bitwise():
    """TF 2.21: & | ^ ~ are bitwise on integer tensors, logical on bool ones."""
    t = tf.constant([6, -7])
    assert (t & 3).numpy().tolist() == [2, 1] and (3 & t).numpy().tolist() == [2, 1]
    assert (t | 3).numpy().tolist() == [7, -5] and (3 | t).numpy().tolist() == [7, -5]
    assert (t ^ 3).numpy().tolist() == [5, -6] and (3 ^ t).numpy().tolist() == [5, -6]
    assert (~t).numpy().tolist() == [-7, 6]
    u = tf.constant([6], tf.uint8)
    assert (u & tf.constant([3], tf.uint8)).numpy().tolist() == [2]
    assert (~u).numpy().tolist() == [249] and (~u).dtype == tf.uint8
    b = tf.constant([True, False])
    assert (b & True).numpy().tolist() == [True, False] and (~b).numpy().tolist() == [False, True]
    assert (b | False).numpy().tolist() == [True, False] and (True ^ b).numpy().tolist() == [False, True]
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.constant([1.5]) & 1.0
    with pytest.raises(tf.errors.InvalidArgumentError):
        ~tf.constant([1.5])
    with pytest.raises(tf.errors.InvalidArgumentError):
        t & tf.constant([True, False])
    with pytest.raises(TypeError):
        b & 1


def test_shift_operators_are_not_defined_as_in_tf():
    t = tf.constant([6])
    for f in (lambda: t << 1, lambda: t >> 1, lambda: 1 << t, lambda: tf.Variable([6]) >> 1):
        with pytest.raises(TypeError):
            f()


def test_operators_on_variables_and_in_graphs():
    v = tf.Variable([6, 5])
    assert (v & 3).numpy().tolist() == [2, 1] and (3 ^ v).numpy().tolist() == [5, 6]
    assert (v | 3).numpy().tolist() == [7, 7] and (~v).numpy().tolist() == [-7, -6]
    vb = tf.Variable([True, False])
    assert (vb & True).numpy().tolist() == [True, False] and (~vb).numpy().tolist() == [False, True]
    g = tf.Graph()
    with g.as_default():
        p = tf.compat.v1.placeholder(tf.int32, [2])
        q = tf.compat.v1.placeholder(tf.bool, [2])
        gv = tf.compat.v1.Variable([12, 10])
        outs = [p & 3, 3 | p, p ^ gv, ~p, ~q, q & True, gv & p]
        assert [o.op.type for o in outs] == ["BitwiseAnd", "BitwiseOr", "BitwiseXor", "Invert", "LogicalNot",
                                             "LogicalAnd", "BitwiseAnd"]
        with pytest.raises(TypeError):
            ~tf.compat.v1.placeholder(tf.float32, [2])
        init = tf.compat.v1.global_variables_initializer()
    for mode in MODES:
        with tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto(jitgrad_mode=mode)) as s:
            s.run(init)
            got = s.run(outs, {p: [6, -7], q: [True, False]})
        assert [np.asarray(o).tolist() for o in got] == [[6 & 3, -7 & 3], [3 | 6, 3 | -7], [6 ^ 12, -7 ^ 10],
                                                          [~6, ~-7], [False, True], [True, False], [12 & 6, 10 & -7]]


def test_tf_function():
    @tf.function
    def f(a, b):
        return B.bitwise_and(a, b), a | b, ~a, B.left_shift(a, b), B.right_shift(a, b)
    got = [r.numpy().tolist() for r in f(tf.constant([6, -7]), tf.constant([3, 40]))]
    assert got == [[2, 40], [7, -7], [-7, 6], [48, -2147483648], [0, -1]]


def test_not_differentiable_as_tf():
    """TF 2.21: GradientTape and tf.gradients give None through every bitwise op (no LookupError)."""
    x = tf.Variable([6.0, 5.0])
    xi = tf.Variable([6, 5])
    for fn in (B.bitwise_and, B.bitwise_or, B.bitwise_xor, B.left_shift, B.right_shift,
               lambda a, b: B.invert(a)):
        with tf.GradientTape(persistent=True) as t:
            t.watch(xi)
            zi = fn(xi, tf.constant([1, 2]))
            z = tf.cast(fn(tf.cast(x * 1.0, tf.int32), tf.constant([1, 2])), tf.float32)
        assert t.gradient(zi, [xi]) == [None]
        assert t.gradient(z, [x]) == [None]
    with tf.Graph().as_default():
        p = tf.compat.v1.placeholder(tf.float32, [2])
        z = tf.cast(B.left_shift(tf.cast(p, tf.int32), 1), tf.float32)
        assert tf.gradients(z, [p]) == [None]
