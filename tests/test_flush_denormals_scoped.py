"""The flush-denormals mode's scoped path (jitgrad/denormals.py SCOPED_OPS,
jitgrad/mxcsr_host.py): arithmetic and comparison ops' reference kernels run with FTZ +
DAZ set in this thread's MXCSR instead of flushing inputs and outputs with numpy.

The expected values come from the explicit path (``denormals.flush`` on inputs and
outputs, the semantics before the scope), which is itself pinned to IEEE facts by
test_flush_denormals.py; here every scoped op must give the same bits (sign of zero,
NaN positions) on denormal, tiny, normal, huge, inf and NaN operands, in all pairs.
"""
import numpy as np
import pytest

import jitgrad as tf
from jitgrad import denormals, mxcsr_host
from jitgrad.ops.registry import REGISTRY, run_kernel
from test_flush_denormals import FTZ_DAZ, read_mxcsr

UNARY = {"Square", "Sqrt", "Rsqrt", "Reciprocal", "Sign"}
SCOPE = mxcsr_host.get()
needs_scope = pytest.mark.skipif(SCOPE is None, reason="no native MXCSR scope on this host")


@pytest.fixture(autouse=True)
def _mode_on():
    saved = tf.config.get_flush_denormals()
    tf.config.set_flush_denormals(True)    # (the default; pinned: the suite may start opted out)
    yield
    tf.config.set_flush_denormals(saved)


def _values(dt):
    """Denormals of both signs, zeros of both signs, the smallest normals, numbers whose
    products and quotients are denormal (1e-20 * 1e-20 in float32), ordinary, huge and
    non-finite numbers."""
    tiny = np.finfo(dt).tiny
    small = 1e-20 if dt == np.float32 else 1e-160
    return np.array([0.0, -0.0, tiny / 3, -tiny / 3, tiny / 1e3, tiny, -tiny, 2 * tiny, small, -small,
                     np.sqrt(tiny), 0.5, 1.0, -1.0, 2.0, 3.5, -7.25, 80.0, 1e30, -1e30, np.inf, -np.inf,
                     np.nan], dt)


def _explicit(opdef, arrays, monkeypatch):
    """The op's result on the explicit path (no scope: flush inputs and outputs)."""
    with monkeypatch.context() as m:
        m.setattr(denormals, "scope", lambda name, arrays: None)
        return run_kernel(opdef, arrays, {})


def _same_bits(a, b):
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    if a.dtype.kind != "f":
        return np.array_equal(a, b)
    nan = np.isnan(a)
    return np.array_equal(nan, np.isnan(b)) and np.array_equal(a[~nan].view(np.uint8), b[~nan].view(np.uint8))


def _operands(name, dt):
    v = _values(dt)
    if name in UNARY:
        return [[v], [v[3:4].reshape(())]]
    return [[v[:, None], v[None, :]],                     # every pair
            [v, v[::-1].copy()],                          # same shape
            [v, np.asarray(v[2], dt).reshape(())]]        # a denormal scalar operand


def test_scoped_ops_are_registered_arithmetic():
    for name in denormals.SCOPED_OPS:
        assert REGISTRY[name].denormals == "flush" and REGISTRY[name].kind == "elementwise", name


@needs_scope
@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(denormals.SCOPED_OPS))
def test_scoped_path_gives_the_explicit_paths_bits(name, dt, monkeypatch):
    opdef = REGISTRY[name]
    for arrays in _operands(name, dt):
        assert denormals.scope(name, arrays) is SCOPE
        got = run_kernel(opdef, arrays, {})
        want = _explicit(opdef, arrays, monkeypatch)
        assert len(got) == len(want) == 1
        assert _same_bits(got[0], want[0]), (name, [a.shape for a in arrays])


def test_other_ops_and_other_dtypes_take_the_explicit_path():
    f32 = np.ones(2, np.float32)
    for name, opdef in REGISTRY.items():
        if name not in denormals.SCOPED_OPS:
            assert denormals.scope(name, [f32, f32]) is None, name
    for other in (np.float16, np.complex64, np.int32, np.bool_):
        assert denormals.scope("Mul", [f32, np.ones(2, other)]) is None
    assert denormals.scope("Mul", [f32, 2.0]) is None              # (a Python float: no dtype)


@needs_scope
def test_the_kernel_runs_with_ftz_daz_and_mxcsr_is_restored_after_return_and_error():
    before = read_mxcsr()
    assert before & FTZ_DAZ == 0
    seen = []

    class Probe:        # a stand-in OpDef named as a scoped op, whose kernel reads MXCSR
        name, denormals = "Mul", "flush"

        @staticmethod
        def kernel(attrs, x, y):
            seen.append(read_mxcsr())
            if x.shape != y.shape:
                raise ValueError("shapes differ")
            return x * y

    x = np.full(3, 1e-39, np.float32)
    np.testing.assert_array_equal(run_kernel(Probe, [x, np.ones(3, np.float32)], {})[0], np.zeros(3))
    assert seen[-1] & FTZ_DAZ == FTZ_DAZ and read_mxcsr() == before
    with pytest.raises(tf.errors.InvalidArgumentError):
        run_kernel(Probe, [x, np.ones(2, np.float32)], {})
    assert seen[-1] & FTZ_DAZ == FTZ_DAZ and read_mxcsr() == before
    assert float(np.float32(1e-39) * np.float32(1.0)) != 0.0      # numpy's numerics again


@needs_scope
def test_an_exception_right_after_flush_on_returns_still_restores_mxcsr(monkeypatch):
    """A KeyboardInterrupt's handler runs just after a builtin call returns, before its
    result is stored: raised there, run_kernel once left FTZ + DAZ set in the thread for
    good (numpy flushing everywhere after, the opt-out mode included). Simulated
    deterministically: a flush_on that sets MXCSR, then raises."""
    flush_on, restore, read = SCOPE
    assert read_mxcsr() & FTZ_DAZ == 0

    def interrupted():
        flush_on()
        raise KeyboardInterrupt

    monkeypatch.setattr(denormals, "scope", lambda name, arrays: (interrupted, restore, read))
    x = np.full(3, 1e-39, np.float32)
    with pytest.raises(KeyboardInterrupt):
        run_kernel(REGISTRY["Mul"], [x, np.ones(3, np.float32)], {})
    assert read_mxcsr() & FTZ_DAZ == 0
    assert float(np.float32(1e-39) * np.float32(1.0)) != 0.0      # numpy keeps denormals again


@needs_scope
def test_restore_refuses_bad_values_without_touching_mxcsr():
    flush_on, restore, read = SCOPE
    assert read() == read_mxcsr()
    before = read_mxcsr()
    for bad, err in ((-1, OverflowError), ("x", TypeError), (1 << 70, OverflowError), (None, TypeError)):
        with pytest.raises(err):
            restore(bad)
        assert read_mxcsr() == before
    old = flush_on()
    assert old == before and read_mxcsr() == before | FTZ_DAZ
    assert restore(old) == old and read_mxcsr() == before


@needs_scope
def test_restore_sets_only_ftz_and_daz():
    """Any other MXCSR bit a caller passes is ignored: restore(0) would otherwise unmask
    every FP exception (numpy's next 0/0 a SIGFPE killing the process) and round to
    nearest whatever the thread had; a reserved bit would make ldmxcsr fault."""
    flush_on, restore, read = SCOPE
    before = read_mxcsr()
    masks_and_rounding = 0x7F80          # exception masks (bits 7-12) and rounding (13-14)
    for value in (0, 1 << 16, (1 << 32) - 1, (1 << 64) - 1, before ^ masks_and_rounding):
        got = restore(value)
        assert read_mxcsr() & ~FTZ_DAZ == before & ~FTZ_DAZ
        assert read_mxcsr() & FTZ_DAZ == value & FTZ_DAZ and got == read_mxcsr()
        restore(before)
    with np.errstate(all="ignore"):
        restore(0)
        assert np.isnan(np.float32(0) / np.float32(0))       # still masked: no SIGFPE
    assert read_mxcsr() == before


@needs_scope
def test_boundary_rounding_up_to_tiny_is_flushed_as_tf_and_compiled_code_do(monkeypatch):
    """tiny * (1 - ulp): numpy rounds it up to tiny (a normal, which ``flush`` keeps); with
    FTZ the hardware flushes it by the unrounded value, so the scoped path gives 0 as TF 2.21
    does (measured: tf.constant([tiny]) * (1 - ulp) is [0.]) and as compiled code does."""
    for dt in (np.float32, np.float64):
        tiny = np.finfo(dt).tiny
        x, y = np.array([tiny, -tiny], dt), np.full(2, np.nextafter(dt(1), dt(0)), dt)
        np.testing.assert_array_equal(_explicit(REGISTRY["Mul"], [x, y], monkeypatch)[0], x)
        got = run_kernel(REGISTRY["Mul"], [x, y], {})[0]
        np.testing.assert_array_equal(got, [0.0, -0.0])
        assert np.signbit(got[1]) and not np.signbit(got[0])
        g = tf.Graph()
        with g.as_default():
            a, b = tf.compat.v1.placeholder(dt, [2]), tf.compat.v1.placeholder(dt, [2])
            c = a * b
        compiled = tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto(jitgrad_mode="compiled"))
        np.testing.assert_array_equal(compiled.run(c, {a: x, b: y}), got)


@needs_scope
def test_eager_and_interpreter_scope_arithmetic_and_flush_the_rest(monkeypatch):
    """Through the public paths: x * y is scoped (flush is never called), exp is flushed
    explicitly, and both give the IEEE facts (1e-39 * 1 is +0, -1e-39 * 1 is -0)."""
    calls = []
    real = denormals.flush
    monkeypatch.setattr(denormals, "flush", lambda a: calls.append(1) or real(a))
    x = np.array([1e-39, -1e-39, 2e-38], np.float32)
    r = (tf.constant(x) * tf.constant(np.ones(3, np.float32))).numpy()
    assert calls == [] and _same_bits(r, np.array([0.0, -0.0, 2e-38], np.float32))
    assert float(tf.exp(tf.constant(np.float32(-100.0)))) == 0.0 and calls
    g = tf.Graph()
    with g.as_default():
        a, b = tf.compat.v1.placeholder(tf.float32, [3]), tf.compat.v1.placeholder(tf.float32, [3])
        c = a * b + a / b                 # (b is fed: nothing folds away)
    sess = tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto(jitgrad_mode="interpret"))
    feed = {a: x, b: np.ones(3, np.float32)}
    del calls[:]
    got = sess.run(c, feed)
    assert calls == [] and _same_bits(got, np.array([0.0, -0.0, 4e-38], np.float32))
    tf.config.set_flush_denormals(False)
    np.testing.assert_array_equal(sess.run(c, feed), 2 * x)          # numpy's numerics: 2e-39 kept


def test_without_the_native_scope_the_explicit_path_flushes(monkeypatch):
    monkeypatch.setattr(denormals, "_native", [None, None])
    x = np.array([1e-39, -1e-39, 2e-38], np.float32)
    r = run_kernel(REGISTRY["Mul"], [x, np.ones(3, np.float32)], {})[0]
    assert _same_bits(r, np.array([0.0, -0.0, 2e-38], np.float32))
