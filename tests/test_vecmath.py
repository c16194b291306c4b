"""Tests for jitgrad/codegen/vecmath.py: accuracy (ulp vs long double),
special values vs numpy, determinism, vector types, and that the f32 loops
really vectorise (at the target's vector width, no libm calls)."""

import os
import re
import zlib
import sys

import numpy as np
import pytest
from llvmlite import ir

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _jit_harness as H  # noqa: E402

vecmath = H.vecmath
F32, F64 = np.float32, np.float64
DTYPES = [F32, F64]
UNARY = [f for f in vecmath.FUNCTIONS if f not in H.BINARY]

# Documented worst-case ulp bounds (f32, f64); measured values are in the
# vecmath module docstring and are below these.
ULP_BOUND = {
    "exp": (1.5, 1.25), "expm1": (2.0, 2.25), "log": (1.0, 1.0),
    "log1p": (1.0, 1.0), "tanh": (3.0, 3.0), "sigmoid": (2.75, 2.75),
    "softplus": (2.0, 2.0), "sin": (1.5, 1.0), "cos": (1.0, 1.0),
    "tan": (2.75, 2.75), "sqrt": (0.5, 0.5), "rsqrt": (1.5, 1.5),
    "erf": (1.25, 1.25), "erfc": (0.75, 1.5), "pow": (0.75, 1.5),
    "sinh": (1.75, 1.5), "cosh": (1.75, 1.5), "asinh": (1.25, 1.25),
    "acosh": (1.25, 1.25), "atanh": (1.0, 1.0), "atan": (0.75, 1.0), "asin": (0.75, 1.0),
    "acos": (0.75, 1.0), "atan2": (0.75, 1.0),
}
SWEEP_N = 1 << 17


def ids(v):
    return np.dtype(v).name if isinstance(v, type) else str(v)


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
@pytest.mark.parametrize("name", UNARY)
def test_accuracy_sweep(name, dtype):
    k = H.compiled(name, dtype)
    x = H.sweep(name, dtype, SWEEP_N, seed=zlib.crc32(name.encode()))
    got = k(x)
    err = H.ulp_error(got, H.reference(name, x), dtype)
    worst = int(np.argmax(err))
    bound = ULP_BOUND[name][dtype == F64]
    assert err[worst] <= bound, (
        f"{name} {np.dtype(dtype).name}: {err[worst]:.3f} ulp at x={x[worst]!r} "
        f"(got {got[worst]!r})")


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
@pytest.mark.parametrize("name", H.BINARY)
def test_binary_accuracy(name, dtype):
    x, y = H.binary_sweep(name, dtype, SWEEP_N)
    got = H.compiled(name, dtype)(x, y)
    err = H.ulp_error(got, H.reference(name, x, y), dtype)
    w = int(np.argmax(err))
    assert err[w] <= ULP_BOUND[name][dtype == F64], (x[w], y[w], got[w])


def _sigmoid_np(x):
    with np.errstate(over="ignore"):
        return (1 / (1 + np.exp(-x.astype(np.longdouble)))).astype(x.dtype)


def _erf_np(x):
    import math
    return np.array([math.erf(v) for v in x.astype(float)]).astype(x.dtype)


def _erfc_np(x):
    import math
    return np.array([math.erfc(v) for v in x.astype(float)]).astype(x.dtype)


NUMPY = {
    "exp": np.exp, "expm1": np.expm1, "log": np.log, "log1p": np.log1p,
    "tanh": np.tanh, "sigmoid": _sigmoid_np,
    "softplus": lambda x: np.logaddexp(x, x.dtype.type(0)),
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "sqrt": np.sqrt,
    "rsqrt": lambda x: 1 / np.sqrt(x), "erf": _erf_np, "erfc": _erfc_np,
    "sinh": np.sinh, "cosh": np.cosh, "asinh": np.arcsinh, "acosh": np.arccosh,
    "atanh": np.arctanh, "atan": np.arctan, "asin": np.arcsin, "acos": np.arccos,
}


def assert_like_numpy(got, want, args, rel):
    """Same class as numpy (NaN, inf with sign, zero with sign) and close."""
    with np.errstate(all="ignore"):
        close = np.abs(got.astype(np.float64) - want) <= rel * np.abs(want)
    bad = ((np.isnan(want) != np.isnan(got))
           | (np.isinf(want) != np.isinf(got))
           | (np.isinf(want) & (want != got))
           | ((want == 0) != (got == 0))
           | ((want == 0) & (np.signbit(want) != np.signbit(got)))
           | (np.isfinite(want) & (want != 0) & ~close))
    assert not bad.any(), list(zip(*[a[bad] for a in args], got[bad], want[bad]))[:10]


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
@pytest.mark.parametrize("name", UNARY)
def test_special_values(name, dtype):
    x = H.special_values(dtype)
    with np.errstate(all="ignore"):
        want = NUMPY[name](x)
    got = H.compiled(name, dtype)(x)
    assert_like_numpy(got, want, (x,), 1e-6 if dtype == F32 else 1e-14)


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
@pytest.mark.parametrize("name", ["expm1", "log1p", "tanh", "sin", "tan", "sinh", "asinh", "atanh", "atan",
                                  "asin"])
def test_tiny_arguments_exact(name, dtype):
    """f(x) = x exactly for tiny x, denormals and both signs included."""
    fi = np.finfo(dtype)
    t = np.array([fi.smallest_subnormal, fi.smallest_normal - fi.smallest_subnormal,
                  fi.smallest_normal, 1e-30, 3e-20 if dtype == F32 else 1e-160], dtype)
    x = np.concatenate([t, -t, [0.0, -0.0]]).astype(dtype)
    got = H.compiled(name, dtype)(x)
    assert got.tobytes() == x.tobytes(), list(zip(x, got))


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
def test_pow_special_values(dtype):
    s = np.array([0, 0.25, 0.5, 1, 1.5, 2, 3, 1e10, np.inf], dtype)
    s = np.concatenate([s, -s, [np.nan], H.special_values(dtype)[::5]]).astype(dtype)
    x, y = (a.ravel().astype(dtype) for a in np.meshgrid(s, s))
    with np.errstate(all="ignore"):
        want = np.power(x, y)
    got = H.compiled("pow", dtype)(x, y)
    assert_like_numpy(got, want, (x, y), 1e-6 if dtype == F32 else 1e-14)


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
def test_pow_matches_numpy_on_integer_powers(dtype):
    rng = np.random.default_rng(5)
    x = rng.uniform(-4, 4, 4096).astype(dtype)
    y = rng.integers(-20, 21, 4096).astype(dtype)
    got = H.compiled("pow", dtype)(x, y)
    with np.errstate(all="ignore"):
        want = np.power(x, y)
    assert_like_numpy(got, want, (x, y), 1e-6 if dtype == F32 else 1e-14)


def _atan2_grid(dtype):
    """Every pair of atan2's special operands (C99 Annex F: zeros of both signs, infinities,
    NaN) with finite ones of both signs, extremes and denormals."""
    fi = np.finfo(dtype)
    s = np.array([0.0, 1.0, 0.5, 2.5, 1e-3, 1e10, fi.max, fi.smallest_normal, fi.smallest_subnormal, np.inf],
                 dtype)
    s = np.concatenate([s, -s, [np.nan]]).astype(dtype)
    y, x = (a.ravel().astype(dtype) for a in np.meshgrid(s, s))
    return y, x


def assert_atan2_like_numpy(got, y, x, dtype):
    """Special cases exactly as np.arctan2 (C99: +-0, +-pi, +-pi/2, +-pi/4, +-3pi/4, NaN, zero
    signs); elsewhere within the ulp bound of the long-double reference (numpy's float32
    arctan2 is not always correctly rounded, ours is closer: atan2(1, 1))."""
    with np.errstate(all="ignore"):
        want = np.arctan2(y, x)
    special = ~np.isfinite(x) | ~np.isfinite(y) | (x == 0) | (y == 0)
    eq = (got == want) & (np.signbit(got) == np.signbit(want)) | (np.isnan(got) & np.isnan(want))
    bad = special & ~eq
    assert not bad.any(), list(zip(y[bad], x[bad], got[bad], want[bad]))
    err = H.ulp_error(got, H.reference("atan2", y, x), dtype)
    assert err.max() <= ULP_BOUND["atan2"][dtype == F64], err.max()


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
def test_atan2_special_values(dtype):
    y, x = _atan2_grid(dtype)
    assert_atan2_like_numpy(H.compiled("atan2", dtype)(y, x), y, x, dtype)
    # the octant boundaries: |y| = |x| and their neighbours, both signs of each
    v = np.array([1.0, 3.0, 1e-30, 1e30], dtype)
    n = np.nextafter(v, dtype(np.inf))
    y = np.concatenate([v, n, v, -v, -n, v]).astype(dtype)
    x = np.concatenate([v, v, n, v, v, -n]).astype(dtype)
    assert_atan2_like_numpy(H.compiled("atan2", dtype)(y, x), y, x, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
def test_deterministic_and_vector_types(dtype):
    """Bit-identical across runs, and emitting on <W x T> directly gives the
    same bits as the (auto-vectorised + scalar epilogue) scalar loop."""
    rng = np.random.default_rng(7)
    n = 1003  # not a multiple of the vector width: exercises the epilogue
    width = 8 if dtype == F32 else 4
    for name in vecmath.FUNCTIONS:
        if name in H.BINARY:
            args = (rng.uniform(-3, 3, n).astype(dtype), rng.uniform(-9, 9, n).astype(dtype))
        else:
            args = (np.concatenate([rng.uniform(-30, 30, n - 16),
                                    H.special_values(dtype)[:16]]).astype(dtype),)
        k = H.compiled(name, dtype)
        a, b = k(*args), k(*args)
        assert a.tobytes() == b.tobytes(), name
        m = n - n % width
        v = H.compiled(name, dtype, vector=width)(*[t[:m] for t in args])
        assert v.tobytes() == a[:m].tobytes(), name


@pytest.mark.parametrize("width", [8, 16])
@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
@pytest.mark.parametrize("name", ["exp", "expm1", "tanh", "sinh", "cosh"])
def test_in_range_fast_path_gives_the_same_bits(name, dtype, width):
    """exp and expm1 branch to a shorter path when every lane of a vector is
    in range (vecmath._EXP_NORMAL); tanh never needs expm1's overflow cap.
    A value must get the same bits whichever path its vector takes: compare
    vectors that are all in range, vectors with one out-of-range lane, and
    the straight-line scalar loop, around each boundary."""
    normal = vecmath._EXP_NORMAL[dtype == F64]
    lo = vecmath._EXPM1_LO[dtype == F64]
    edges = [normal, -normal, lo, 0.0, 1e-30, 20.0, 10.0, 88.0, -87.0, 709.0, -708.0]
    vals = []
    for edge in edges:
        v = dtype(edge)
        vals += [v, -v]
        for direction in (np.inf, -np.inf):
            w = v
            for _ in range(3):
                w = np.nextafter(w, dtype(direction))
                vals.append(w)
    rng = np.random.default_rng(3)
    inside = np.concatenate([np.array([v for v in vals if abs(v) <= normal and v >= lo], dtype),
                             rng.uniform(lo, normal, 200).astype(dtype)])
    inside = np.resize(inside, (len(inside) + width - 1) // width * width)
    mixed = inside.reshape(-1, width).copy()
    mixed[np.arange(len(mixed)), rng.integers(0, width, len(mixed))] = dtype(np.inf)  # full path
    outside = np.resize(np.array(vals, dtype), (len(vals) + width - 1) // width * width)
    scalar = H.compiled(name, dtype)
    vector = H.compiled(name, dtype, vector=width)
    for x in (inside, mixed.ravel(), outside):
        assert vector(x).tobytes() == scalar(x).tobytes()
    keep = mixed.ravel() != np.inf
    assert vector(mixed.ravel())[keep].tobytes() == vector(inside)[keep].tobytes()
    assert "vm.fast" in vector.ir or name == "tanh"


def _loop_body(asm):
    """Assembly of function f (up to its end)."""
    start = re.search(r"^f:", asm, re.M).start()
    end = asm.find(".Lfunc_end", start)
    return asm[start:end]


def _function_body(asm, name):
    start = re.search("^" + re.escape(name) + ":", asm, re.M).start()
    return asm[start:asm.find(".Lfunc_end", start)]


def _called(body):
    """Functions a body calls or takes the address of (in the JIT's large code
    model a call goes through a register the address is moved into)."""
    return set(re.findall(r"\bcall\w*\s+([\w.]+)", body)) | set(re.findall(r"\$([A-Za-z_][\w.]*)", body))


def _assert_calls_nothing_but_the_exact_reduction(asm):
    """Function f calls nothing, bar sin/cos/tan's out-of-line functions
    (vecmath: the exact reduction, taken by a rare branch only, and the
    scalar form's large-argument function and its masked vector variant,
    which reach it), and those call nothing else: no libm, no
    scalarisation; the exact reduction itself calls nothing."""
    seen, todo = set(), _called(_loop_body(asm))
    while todo:
        s = todo.pop()
        assert s.startswith("jitgrad.vm."), s
        if s not in seen:
            seen.add(s)
            todo |= _called(_function_body(asm, s))
    for s in seen:
        if s.startswith("jitgrad.vm.trig_reduce_exact."):
            assert not re.search(r"\bcall", _function_body(asm, s)), s
    return seen


def _kernel_asm(report):
    """Assembly of a compiled kernel's own functions, not vecmath's out-of-line ones."""
    return "".join(_function_body(report.asm, f) for f in re.findall(r"^(jg_\w+):", report.asm, re.M))


def _packed_fma_registers(body):
    """Register classes ("x", "y", "z") of the packed FMAs (pow works in float64) in ``body``."""
    return set(re.findall(r"vfmadd\d+p[sd]\s+[^\n]*?%([xyz])mm", body))


# (sin/cos/tan branch per element to their exact reduction, so their scalar
# loop is not auto-vectorised; test_trig_loops_for_named_targets checks the
# explicit vector loops the code generator emits for them.)
@pytest.mark.parametrize("name", ["exp", "tanh", "log", "sigmoid", "pow", "sinh", "cosh", "asinh", "acosh",
                                  "atanh", "atan", "asin", "acos", "atan2"])
def test_f32_loop_vectorises(name):
    """The loop's FMAs are packed at the host's widest vector width (ymm on
    AVX2, zmm on AVX-512: whatever the target chose, not a fixed name) and
    the loop calls nothing (no scalarised libm calls)."""
    k = H.compiled(name, F32)
    body = _loop_body(k.asm)
    assert not re.search(r"\bcall", body), "calls in loop: libm scalarisation?"
    regs = _packed_fma_registers(body)
    assert regs, "no packed FMA: the loop was not vectorised"
    assert H.host_vector_register() in regs, (regs, H.host_vector_register())


# Named targets, compiled whatever the host: the AVX-512, AVX2 and SSE2-baseline
# code generation (codegen/target.py).  The assembly is inspected for every one;
# the code runs where the host can execute it.
TARGET_CPUS = {"avx512": "skylake-avx512", "avx2": "haswell", "x86-64": "x86-64"}


@pytest.mark.parametrize("level", sorted(TARGET_CPUS))
@pytest.mark.parametrize("name", ["exp", "tanh", "log", "sigmoid", "pow", "sinh", "cosh", "asinh", "acosh",
                                  "atanh", "atan", "asin", "acos", "atan2"])
def test_f32_loop_for_named_targets(name, level):
    """Vectorised at the target's width and calling nothing -- on the SSE2
    baseline too, which has no FMA instruction: there fused multiply-adds are
    emulated (exact products), not libm's fma called per lane.  Targets with
    FMA compute the host's bits; the baseline stays within the ulp bounds."""
    k = H.compiled(name, F32, target=TARGET_CPUS[level])
    assert k.target.level == level
    assert k.target.has_fma == (level != "x86-64")
    body = _loop_body(k.asm)
    assert not re.search(r"\bcall", body), "calls in loop: libm fma or scalarisation?"
    if level == "x86-64":
        assert not re.search(r"%[yz]mm|vfmadd", body)
        assert re.search(r"\b(mul|add)p[sd]\s+%xmm", body), "not vectorised"
    else:
        regs = _packed_fma_registers(body)
        assert H.vector_register(k.target) in regs, regs
        assert not (level == "avx2" and "z" in regs)
    if not k.runnable:
        return      # inspected above; this host cannot execute it
    if name in H.BINARY:
        args = H.binary_sweep(name, F32, 4099)
    else:
        args = (H.sweep(name, F32, 4099, seed=zlib.crc32(name.encode()) + 1),)
    if k.target.has_fma:
        assert k(*args).tobytes() == H.compiled(name, F32)(*args).tobytes()
    else:
        err = H.ulp_error(k(*args), H.reference(name, *args), F32)
        assert err.max() <= ULP_BOUND[name][0], err.max()


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
@pytest.mark.parametrize("name", sorted(vecmath.FUNCTIONS))
def test_baseline_target_without_fma(name, dtype):
    """The SSE2 baseline (x86-64, no FMA): every function and type within the
    documented ulp bounds, special values as numpy, tiny arguments exact, and
    no call of any kind in the loop (the emulated fma keeps its products exact:
    with a plain multiply and add, Cody-Waite and double-word steps would not be)."""
    k = H.compiled(name, dtype, target="x86-64")
    called = _assert_calls_nothing_but_the_exact_reduction(k.asm)
    assert not called or name in ("sin", "cos", "tan"), called
    f64 = dtype == F64
    if name in H.BINARY:
        x, y = H.binary_sweep(name, dtype, 1 << 15)
        err = H.ulp_error(k(x, y), H.reference(name, x, y), dtype)
        assert err.max() <= ULP_BOUND[name][f64], err.max()
        if name == "atan2":
            y, x = _atan2_grid(dtype)
            assert_atan2_like_numpy(k(y, x), y, x, dtype)
        return
    x = H.sweep(name, dtype, 1 << 15, seed=zlib.crc32(name.encode()) + 7)
    err = H.ulp_error(k(x), H.reference(name, x), dtype)
    assert err.max() <= ULP_BOUND[name][f64], (err.max(), x[int(np.argmax(err))])
    sv = H.special_values(dtype)
    with np.errstate(all="ignore"):
        want = NUMPY[name](sv)
    assert_like_numpy(k(sv), want, (sv,), 1e-6 if dtype == F32 else 1e-14)
    if name in ("expm1", "log1p", "tanh", "sin", "tan", "sinh", "asinh", "atanh", "atan", "asin"):
        fi = np.finfo(dtype)
        t = np.array([fi.smallest_subnormal, fi.smallest_normal, 1e-30], dtype)
        t = np.concatenate([t, -t, [0.0, -0.0]]).astype(dtype)
        assert k(t).tobytes() == t.tobytes()


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
def test_emitted_ir_is_straight_line(dtype):
    """One basic block (sin/cos/tan: a branch, taken for large |x| only, to the
    exact reduction: inline for scalars, for vectors a call of the module's
    exact-reduction function), only llvm.* intrinsic calls otherwise, no
    fast-math flags."""
    sty = ir.FloatType() if dtype == F32 else ir.DoubleType()
    trig = ("sin", "cos", "tan")
    for name, ety in [(n, sty) for n in vecmath.FUNCTIONS] + [(n, ir.VectorType(sty, 16)) for n in trig]:
        mod = ir.Module()
        args = [ety] * (2 if name in H.BINARY else 1)
        fn = ir.Function(mod, ir.FunctionType(ety, args), name="g")
        b = ir.IRBuilder(fn.append_basic_block())
        b.ret(vecmath.emit(b, name, list(fn.args)))
        text = str(fn)
        exact = [f for f in mod.functions if f.name.startswith("jitgrad.vm.trig_reduce_exact.")]
        if name in trig:
            assert [blk.name for blk in fn.blocks][1:] == ["vm.fast", "vm.slow", "vm.join"], name
        else:
            assert len(fn.blocks) == 1, name
        if name in trig:
            # one copy of the reduction, one block of arithmetic, called from rare branches only
            assert len(exact) == 1 and len(exact[0].blocks) == 1, name
            assert {"noinline", "cold"} <= set(exact[0].attributes), exact[0].attributes
        else:
            assert not exact, name
        if name in trig and isinstance(ety, ir.VectorType):
            for blk in fn.blocks:
                assert (exact[0].name in str(blk)) == (blk.name == "vm.slow"), (name, blk.name)
            text = re.sub('@"?%s"?' % re.escape(exact[0].name), "@exact_reduction", text) + str(exact[0])
        elif name in trig:
            # the scalar form's rare branch is one cold call: sin(x) for a large x, as
            # lane 0 of a masked vector variant (named for LLVM's loop vectoriser and
            # kept alive for it) that reaches the exact reduction
            large = "jitgrad.vm.%s_large.%s" % (name, "f64" if dtype == F64 else "f32")
            slow = str(fn.blocks[2]).strip().splitlines()
            assert len(slow) == 3 and '@"%s"' % large in slow[1] and "br label" in slow[2], slow
            scalar, variant = mod.get_global(large), mod.get_global(large + ".v8m")
            assert {"noinline", "cold"} <= set(scalar.attributes)
            assert '"vector-function-abi-variant"="_ZGV_LLVM_M8v_%s(%s.v8m)"' % (large, large) in scalar.attributes
            assert variant.name in str(mod.get_global("llvm.compiler.used").initializer)
            assert exact[0].name in str(variant) and exact[0].name not in str(scalar)
            text += str(variant)
        for callee in re.findall(r"call .*? @\"?([\w.]+)\"?\(", text):
            assert callee.startswith(("llvm.", "jitgrad.vm.")) or callee == "exact_reduction", (name, callee)
        # a flag stands before the operand type ("vm.fast" is a block label)
        assert not re.search(r"\b(fast|nnan|ninf|nsz|arcp|contract|afn|reassoc)\s+(float|double|<)", text)
        # (llvm.masked.gather: float64's exact reduction reads its 2/pi chunks per lane)
        assert set(re.findall(r"@\"?(llvm\.[a-z]+)", text)) <= {
            "llvm.fma", "llvm.fabs", "llvm.floor", "llvm.rint", "llvm.copysign",
            "llvm.sqrt"} | ({"llvm.masked"} if name in trig and dtype == F64 else set()), name


def test_emit_api_errors():
    mod = ir.Module()
    fn = ir.Function(mod, ir.FunctionType(ir.FloatType(), [ir.FloatType(), ir.DoubleType()]), "g")
    b = ir.IRBuilder(fn.append_basic_block())
    with pytest.raises(KeyError):
        vecmath.emit(b, "nope", [fn.args[0]])
    with pytest.raises(TypeError):
        vecmath.emit(b, "exp", [fn.args[0], fn.args[0]])
    with pytest.raises(TypeError):
        vecmath.emit(b, "pow", [fn.args[0], fn.args[1]])
    ity = ir.IntType(32)
    fn2 = ir.Function(mod, ir.FunctionType(ity, [ity]), "h")
    b2 = ir.IRBuilder(fn2.append_basic_block())
    with pytest.raises(TypeError):
        vecmath.emit(b2, "exp", [fn2.args[0]])


def test_intrinsics_declared_once():
    mod = ir.Module()
    fn = ir.Function(mod, ir.FunctionType(ir.FloatType(), [ir.FloatType()]), "g")
    b = ir.IRBuilder(fn.append_basic_block())
    v = vecmath.emit(b, "exp", [fn.args[0]])
    v = vecmath.emit(b, "tanh", [v])
    b.ret(v)
    names = [g.name for g in mod.globals.values()]
    assert len(names) == len(set(names))
    assert "llvm.fma.f32" in names


# ---------------------------------------------------------------------------
# sin / cos / tan of large arguments: beyond Cody-Waite's range (2**19 f32,
# 2**45 f64) the reduction by pi/2 is exact (vecmath._trig_reduce_exact), so
# the documented bounds hold for every finite input, up to FLT_MAX / DBL_MAX.

def _large_trig_arguments(dtype, per_binade=48, seed=11):
    """Random magnitudes in every binade from 2**0 to the largest finite
    value (both signs), the largest values themselves, the values the
    difference with TensorFlow was found on, and the 4 floats either side of
    the nearest float to k*pi/2 for k spread over the whole range (tiny
    reduced arguments: where an inexact reduction loses the most)."""
    rng = np.random.default_rng(seed)
    fi = np.finfo(dtype)
    top = fi.maxexp
    e = np.repeat(np.arange(0, top), per_binade)
    x = np.ldexp(rng.uniform(1, 2, e.size), e).astype(np.longdouble)
    k = np.unique(np.round(np.exp(np.linspace(0, np.log(float(fi.max) / 2), 400))))
    multiples = (k.astype(np.longdouble) * (np.pi / np.longdouble(2)))
    multiples = multiples[multiples < fi.max]
    base = np.concatenate([x, multiples]).astype(dtype)
    neighbours = [base]
    for direction in (np.inf, -np.inf):
        w = base[-len(multiples):]
        for _ in range(4):
            w = np.nextafter(w, dtype(direction))
            neighbours.append(w)
    # arguments very close to a multiple of pi/2: reduced arguments of
    # ~4.7e-19 (f64) and ~1.6e-9 (f32) radians
    hardest = [np.ldexp(6381956970095103.0, 797) if dtype == F64 else np.ldexp(16367173.0, 72)]
    fixed = np.array(hardest + [1e10, 1e20, 3e38, fi.max, np.nextafter(fi.max, dtype(0)),
                      2.0 ** 19, np.nextafter(dtype(2.0 ** 19), dtype(np.inf)),
                      2.0 ** 45 if dtype == F64 else 2.0 ** 21, 1e300 if dtype == F64 else 1e30],
                     dtype)
    x = np.concatenate(neighbours + [fixed]).astype(dtype)
    x = x[np.isfinite(x)]
    return np.concatenate([x, -x])


@pytest.mark.parametrize("level", sorted(TARGET_CPUS))
@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
@pytest.mark.parametrize("name", ["sin", "cos", "tan"])
def test_trig_large_arguments_within_bounds(name, dtype, level):
    """Within the documented ulp bound of the long-double reference for
    arguments across every binade up to the largest finite value, on the
    AVX-512, AVX2 and SSE2 targets (the host runs all three), for the scalar
    loop and the explicit <8 x T> one -- which give the same bits."""
    x = _large_trig_arguments(dtype)
    x = np.resize(x, (len(x) + 15) // 16 * 16)
    scalar = H.compiled(name, dtype, target=TARGET_CPUS[level])
    vector = H.compiled(name, dtype, vector=8, target=TARGET_CPUS[level])
    if not scalar.runnable:
        pytest.fail("the host should run %s code" % level)
    got = scalar(x)
    assert vector(x).tobytes() == got.tobytes()
    err = H.ulp_error(got, H.reference(name, x), dtype)
    w = int(np.argmax(err))
    assert err[w] <= ULP_BOUND[name][dtype == F64], (x[w], got[w], err[w])


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
def test_trig_large_arguments_match_numpy(dtype):
    """The reported difference: float32 sin(1e10) is -0.48750603 (float32(1e10)
    is exactly 1e10; sin(1e10) = -0.4875060250875107 in float64), not 0.841
    (what the Cody-Waite-only reduction gave); and numpy agrees with the compiled
    result everywhere within both functions' error (ours, documented, plus
    numpy's own, measured against the long-double reference), including at
    the largest finite values; +-inf and NaN give NaN."""
    if dtype == F32:
        got = H.compiled("sin", F32)(np.array([1e10] * 8, F32))
        assert np.all(np.abs(got - np.float32(-0.4875060250875107)) <= 6e-8), got
    x = _large_trig_arguments(dtype, per_binade=8, seed=5)
    special = np.array([np.inf, -np.inf, np.nan], dtype)
    x = np.concatenate([x, special])
    for name in ("sin", "cos", "tan"):
        got = H.compiled(name, dtype)(x)
        with np.errstate(all="ignore"):
            want = NUMPY[name](x)
        assert np.all(np.isnan(got[-3:])), name
        _assert_agrees_with_numpy(name, x[:-3], got[:-3], want[:-3])


def _assert_agrees_with_numpy(name, x, got, want):
    """|got - numpy| <= |got - ref| + |numpy - ref|: our bound plus numpy's own
    error at each x (numpy's float64 cos is 8 ulp off at the hardest case)."""
    dtype = x.dtype.type
    ref = H.reference(name, x)
    numpy_err = H.ulp_error(want, ref, dtype)
    ulp = np.spacing(np.abs(ref.astype(dtype))).astype(np.longdouble)
    diff = np.abs(got.astype(np.longdouble) - want) / ulp
    limit = ULP_BOUND[name][dtype == F64] + numpy_err + 0.5   # + 0.5: ulp of ref vs of the rounded ref
    w = int(np.argmax(diff - limit))
    assert np.all(diff <= limit), (name, x[w], got[w], want[w], diff[w], limit[w])


@pytest.mark.parametrize("shape", [(1003,), (301, 3)])
@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
def test_trig_large_arguments_compiled_vs_interpreter(dtype, shape):
    """Through the front end: tf.sin/cos/tan compiled (vector runs, scalar
    epilogues, and the scalar loops of a 3-wide inner dimension) agree with
    the reference interpreter on large arguments, as test_..._match_numpy."""
    import jitgrad as tf
    rng = np.random.default_rng(8)
    n = int(np.prod(shape))
    top = np.finfo(dtype).maxexp
    x = np.ldexp(rng.uniform(1, 2, n), rng.integers(-4, top, n)) * rng.choice([-1, 1], n)
    x = x.astype(dtype).reshape(shape)
    g = tf.Graph()
    with g.as_default():
        p = tf.compat.v1.placeholder(dtype, shape)
        fetches = [tf.sin(p), tf.cos(p), tf.tan(p)]
    outs = {}
    for mode in ("interpret", "compiled"):
        config = tf.compat.v1.ConfigProto(jitgrad_mode=mode)
        with tf.compat.v1.Session(graph=g, config=config) as sess:
            outs[mode] = sess.run(fetches, {p: x})
    for name, got, want in zip(("sin", "cos", "tan"), outs["compiled"], outs["interpret"]):
        _assert_agrees_with_numpy(name, x.ravel(), got.ravel(), want.ravel())


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
@pytest.mark.parametrize("name", ["sin", "cos", "tan"])
def test_trig_large_lane_leaves_neighbours_bits(name, dtype):
    """A vector with one large lane takes the exact reduction (vecmath's cold
    branch, 'vm.slow'); the other lanes keep the Cody-Waite bits they get in
    an all-small vector, and the large lane the bits it gets alone."""
    rng = np.random.default_rng(2)
    small = rng.uniform(-1000, 1000, 8 * 64).astype(dtype)
    mixed = small.reshape(-1, 8).copy()
    lane = rng.integers(0, 8, len(mixed))
    big = np.ldexp(rng.uniform(1, 2, len(mixed)), rng.integers(20, 120, len(mixed))).astype(dtype)
    mixed[np.arange(len(mixed)), lane] = big
    mixed = mixed.ravel()
    vector = H.compiled(name, dtype, vector=8)
    assert "vm.slow" in vector.ir
    keep = np.ones(mixed.size, bool)
    keep[np.arange(len(lane)) * 8 + lane] = False
    assert vector(mixed)[keep].tobytes() == vector(small)[keep].tobytes()
    assert vector(mixed)[~keep].tobytes() == vector(np.repeat(big, 8))[::8].tobytes()
    assert vector(mixed).tobytes() == H.compiled(name, dtype)(mixed).tobytes()


@pytest.mark.parametrize("level", sorted(TARGET_CPUS))
@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
@pytest.mark.parametrize("name", ["sin", "cos", "tan"])
def test_trig_loops_for_named_targets(name, dtype, level):
    """The <lanes x T> loop the code generator emits: packed arithmetic at the
    target's vector width, no call of any kind in the loop but the exact
    reduction's (no libm; float64's 2/pi table a private constant), the
    common range's bits equal to the host's FMA code on FMA targets, and
    within the ulp bound on the SSE2 baseline."""
    target = H._target(TARGET_CPUS[level])
    lanes = target.lanes(np.dtype(dtype).itemsize)
    k = H.compiled(name, dtype, vector=lanes, target=target)
    body = _loop_body(k.asm)
    assert _assert_calls_nothing_but_the_exact_reduction(k.asm)
    reg = H.vector_register(target)
    assert re.search(r"p[sd]\s+[^\n]*%" + reg + "mm", body), "not packed at the target's width"
    if level != "x86-64":
        assert not re.search(r"%zmm", body) or reg == "z"
    rng = np.random.default_rng(4)
    x = np.concatenate([rng.uniform(-1e4, 1e4, 64 * lanes),
                        np.ldexp(rng.uniform(1, 2, 16 * lanes), rng.integers(0, 127, 16 * lanes))]
                       ).astype(dtype)
    if target.has_fma:
        assert k(x).tobytes() == H.compiled(name, dtype, vector=lanes)(x).tobytes()
    err = H.ulp_error(k(x), H.reference(name, x), dtype)
    assert err.max() <= ULP_BOUND[name][dtype == F64], err.max()


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
@pytest.mark.parametrize("layout", ["broadcast", "transpose"])
def test_trig_short_inner_dimension_is_vectorised(dtype, layout):
    """sin/cos/tan over [n, 3] from a broadcast sum or a transpose: the inner
    run (3) is shorter than a vector, and LLVM's widening of trig's scalar
    form calls a function per vector, so the code generator puts the lanes
    along n (kernel.py, SCALAR_FORM_BRANCHES).  Large arguments, NaN, inf and
    -0 agree with the interpreter as test_..._match_numpy does (n = 1003:
    a vector remainder too), and the kernel's float arithmetic is packed."""
    import jitgrad as tf
    rng = np.random.default_rng(9)
    n, top = 1003, np.finfo(dtype).maxexp
    big = np.ldexp(rng.uniform(1, 2, n), rng.integers(-4, top, n)) * rng.choice([-1, 1], n)
    big[:4] = [np.nan, np.inf, -np.inf, -0.0]
    g = tf.Graph()
    with g.as_default():
        if layout == "broadcast":
            feeds = (big.astype(dtype).reshape(n, 1), np.array([[0.0, -0.0, 1.5]], dtype))
            p, q = (tf.compat.v1.placeholder(dtype, f.shape) for f in feeds)
            y, x = p + q, feeds[0] + feeds[1]
        else:
            feeds = (np.resize(big, 3 * n).astype(dtype).reshape(3, n),)
            p = tf.compat.v1.placeholder(dtype, feeds[0].shape)
            q = None
            y, x = tf.transpose(p), feeds[0].T
        fetches = [tf.sin(y), tf.cos(y), tf.tan(y)]
    fd = dict(zip([t for t in (p, q) if t is not None], feeds))
    outs = {}
    for mode in ("interpret", "compiled"):
        config = tf.compat.v1.ConfigProto(jitgrad_mode=mode)
        with tf.compat.v1.Session(graph=g, config=config) as sess:
            outs[mode] = sess.run(fetches, fd)
            if mode == "compiled":
                report = sess.explain(fetches, fd)
    x = np.ascontiguousarray(x).ravel()
    for name, got, want in zip(("sin", "cos", "tan"), outs["compiled"], outs["interpret"]):
        assert got.shape == (n, 3)
        got, want, fin = got.ravel(), want.ravel(), np.isfinite(x)
        assert np.isnan(got[~fin]).all() and np.isnan(want[~fin]).all()
        # sin and tan keep zero's sign, cos(+-0) = +1
        assert np.signbit(got[x == 0]).tolist() == (np.signbit(x[x == 0]) & (name != "cos")).tolist()
        _assert_agrees_with_numpy(name, x[fin], got[fin], want[fin])
    H.assert_vectorised(_kernel_asm(report))


@pytest.mark.parametrize("level", sorted(TARGET_CPUS))
@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
@pytest.mark.parametrize("name", ["sin", "cos", "tan"])
def test_trig_scalar_loop_vectorises(name, dtype, level):
    """The scalar form's rare branch is a call of an out-of-line function whose
    masked vector variant LLVM's loop vectoriser knows: a plain scalar loop of
    sin / cos / tan is vectorised at the target's width (the variant called
    once per vector, returning at once when no lane is large), calls nothing
    but vecmath's own functions, and gives the explicit vector loop's bits
    for small, large, special and tiny arguments alike."""
    target = H._target(TARGET_CPUS[level])
    lanes = target.lanes(np.dtype(dtype).itemsize)
    k = H.compiled(name, dtype, target=target)
    variant = "jitgrad.vm.%s_large.%s%s.v%dm" % (name, "f64" if dtype == F64 else "f32",
                                                  "" if target.has_fma else ".nofma.noround", lanes)
    assert variant in _assert_calls_nothing_but_the_exact_reduction(k.asm)
    body = _loop_body(k.asm)
    assert variant in body, "the loop does not call the vector variant: not vectorised"
    reg = H.vector_register(target)
    assert re.search(r"p[sd]\s+[^\n]*%" + reg + "mm", body), "not packed at the target's width"
    if not k.runnable:
        pytest.fail("the host should run %s code" % level)
    fi = np.finfo(dtype)
    x = np.concatenate([_large_trig_arguments(dtype, per_binade=4, seed=3), H.special_values(dtype),
                        [fi.smallest_subnormal, -fi.smallest_subnormal, 1e-30, -0.0, 0.0],
                        np.random.default_rng(6).uniform(-1e3, 1e3, 4000)]).astype(dtype)
    x = np.resize(x, (len(x) + 7) // 8 * 8)
    got = k(x)
    assert got.tobytes() == H.compiled(name, dtype, vector=8, target=target)(x).tobytes()
    # one large lane among small ones: the variant's work path for that lane only
    mixed = np.random.default_rng(7).uniform(-10, 10, 64 * lanes).astype(dtype)
    mixed[::lanes + 1] = dtype(1e30)
    assert k(mixed).tobytes() == H.compiled(name, dtype, vector=8, target=target)(mixed).tobytes()


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
def test_trig_fused_reduction_short_inner_dimension_is_vectorised(dtype):
    """Full reductions of trig over [n, 3] (a transpose: the inner run, 3, is
    shorter than a vector) put the vector lanes along n, as the elementwise
    case does (kernel.py): packed arithmetic in the kernel, results
    bit-identical run to run and for 1, 2 and 3 threads, equal to float64
    sums of the elementwise values the kernel computes up to rounding, and
    close to the interpreter's (numpy's elementwise values)."""
    import jitgrad as tf
    from jitgrad.codegen import parallel
    rng = np.random.default_rng(12)
    n = 200_003
    x = rng.uniform(-50, 50, (3, n)).astype(dtype)
    x[0, :5] = [1e30, -3e38 if dtype == F32 else 1e300, 2.0 ** 20, -0.0, 7.0]
    g = tf.Graph()
    with g.as_default():
        p = tf.compat.v1.placeholder(dtype, x.shape)
        t = tf.transpose(p)
        fetches = [tf.reduce_sum(tf.sin(t)), tf.reduce_mean(tf.cos(t) * t), tf.reduce_max(tf.tan(t)),
                   tf.reduce_sum(tf.sin(t) * tf.cos(t))]
    with tf.compat.v1.Session(graph=g) as sess:
        report = sess.explain(fetches, {p: x})
        runs = []
        try:
            for threads in (1, 2, 3, 2):
                parallel.set_num_threads(threads)
                runs.append([np.asarray(v).tobytes() for v in sess.run(fetches, {p: x})])
        finally:
            parallel.set_num_threads(None)
        got = sess.run(fetches, {p: x})
    assert all(r == runs[0] for r in runs[1:])
    H.assert_vectorised(_kernel_asm(report))
    assert len(report.groups) == 1, report.groups
    # the elementwise values as the kernel computes them (vecmath's bits, products in
    # the type), summed in float64 (numpy's pairwise sum): the kernel's float64 lane
    # sums may differ from that by rounding only, ~n/lanes * eps * sum|v| at worst
    xt = np.ascontiguousarray(x.T)
    s, c, tn = (H.compiled(f, dtype)(xt.ravel()).reshape(xt.shape) for f in ("sin", "cos", "tan"))
    terms = [s, c * xt, tn, s * c]
    want = [terms[0].astype(np.float64).sum(), terms[1].astype(np.float64).mean(), tn.max(),
            terms[3].astype(np.float64).sum()]
    for k in (0, 1, 3):
        size = np.abs(terms[k].astype(np.float64)).sum() / (xt.size if k == 1 else 1)
        tol = 1e-13 * size + (abs(np.spacing(np.float32(want[k]))) if dtype == F32 else 0.0)
        assert abs(float(got[k]) - want[k]) <= tol, (k, float(got[k]), want[k], tol)
    assert got[2] == want[2]
    config = tf.compat.v1.ConfigProto(jitgrad_mode="interpret")
    with tf.compat.v1.Session(graph=g, config=config) as sess:
        interpreted = sess.run(fetches, {p: x})
    for k in (0, 1, 3):   # elementwise values within a few ulp of each other
        size = np.abs(terms[k].astype(np.float64)).sum() / (xt.size if k == 1 else 1)
        assert abs(float(got[k]) - float(interpreted[k])) <= size * 4 * np.finfo(dtype).eps, k
