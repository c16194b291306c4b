"""Tiny JIT harness: compile `vecmath.emit` into an elementwise loop.

Shared by tests/test_vecmath.py and bench/bench_vecmath.py.  Imports the
vecmath module by path so it works before the jitgrad packages exist.
"""

import ctypes
import importlib.util
import os
import re

import numpy as np
import llvmlite.binding as llvm
from llvmlite import ir

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_vecmath():
    path = os.path.join(_ROOT, "jitgrad", "codegen", "vecmath.py")
    spec = importlib.util.spec_from_file_location("_vecmath_under_test", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


vecmath = load_vecmath()

_TMS = {}


def _target(target):
    from jitgrad.codegen import target as tg
    return tg.get() if target is None else (tg.get(target) if isinstance(target, str) else target)


def target_machine(target=None):
    """A shared TargetMachine for IR, optimisation and assembly (host by default;
    `target`: an LLVM CPU name or a jitgrad Target).  Never given to MCJIT."""
    t = _target(target)
    if t.key() not in _TMS:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        _TMS[t.key()] = t.target_machine(opt=3)
    return _TMS[t.key()]


def host_vector_register():
    """'z' (zmm), 'y' (ymm) or 'x' (xmm): the vector width jitgrad's target for
    this host chose (codegen/target.py; 512 bits on AVX-512, 256 on AVX2)."""
    return vector_register(None)


def vector_register(target):
    return {512: "z", 256: "y", 128: "x"}[_target(target).vector_bits]


def current_vector_register():
    """vector_register of the target a Session compiles for now (the host, or
    JITGRAD_TARGET_CPU when set: the suite can run for another level)."""
    from jitgrad.codegen import target as tg
    return vector_register(tg.current())


def packed_float_registers(asm):
    """Register classes ("x", "y", "z") of the packed float multiplies, adds and FMAs
    in ``asm``: vectorised code on any level (the SSE2 baseline has no FMA)."""
    return set(re.findall(r"^\s+v?(?:fn?m(?:add|sub)\d*|mul|add)p[sd]\s+[^\n]*?%([xyz])mm", asm, re.M))


def assert_vectorised(asm):
    """Packed float arithmetic in ``asm``, none wider than the current target's vectors,
    and at least 256 bits wide where the target has them (AVX2, AVX-512)."""
    regs, widest = packed_float_registers(asm), current_vector_register()
    assert regs and max(regs) <= widest, ("not vectorised at the target's width", regs, widest)
    if widest != "x":
        assert regs & {"y", "z"}, regs


def _irtype(dtype):
    return ir.FloatType() if np.dtype(dtype) == np.float32 else ir.DoubleType()


def build_loop_ir(name, dtype, arity=None, vector=None, target=None):
    """IR module with `void f(T* in0[, T* in1], T* out, i64 n)`.

    vector=None: scalar loop (left to the loop vectoriser).  vector=W: the
    loop body works on <W x T> directly (n must be a multiple of W)."""
    if arity is None:
        arity = 2 if name in BINARY else 1
    ety = _irtype(dtype)
    vty = ir.VectorType(ety, vector) if vector else ety
    mod = ir.Module(name="vm_" + name)
    tm = target_machine(target)
    mod.triple = tm.triple
    mod.data_layout = str(tm.target_data)
    ptr = ir.PointerType(ety)
    i64 = ir.IntType(64)
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [ptr] * (arity + 1) + [i64]),
                     name="f")
    for a in fn.args[:-1]:
        a.add_attribute("noalias")
    *ins, out, n = fn.args
    entry = fn.append_basic_block("entry")
    loop = fn.append_basic_block("loop")
    done = fn.append_basic_block("done")
    b = ir.IRBuilder(entry)
    b.cbranch(b.icmp_signed(">", n, ir.Constant(i64, 0)), loop, done)
    b.position_at_end(loop)
    i = b.phi(i64)
    step = vector or 1
    vals = []
    for p in ins:
        addr = b.gep(p, [i])
        if vector:
            addr = b.bitcast(addr, ir.PointerType(vty))
        vals.append(b.load(addr, align=np.dtype(dtype).itemsize))
    t = _target(target)
    res = vecmath.emit(b, name, vals, fma=t.has_fma, vector_bits=t.vector_bits)
    oaddr = b.gep(out, [i])
    if vector:
        oaddr = b.bitcast(oaddr, ir.PointerType(vty))
    b.store(res, oaddr, align=np.dtype(dtype).itemsize)
    nxt = b.add(i, ir.Constant(i64, step))
    i.add_incoming(ir.Constant(i64, 0), entry)
    i.add_incoming(nxt, b.block)  # vecmath may have split the body into blocks
    b.cbranch(b.icmp_signed("<", nxt, n), loop, done)
    b.position_at_end(done)
    b.ret_void()
    return mod


def optimise(llmod, target=None):
    tm = target_machine(target)
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(llmod, pb)
    return llmod


class Compiled:
    """A JIT-compiled elementwise kernel callable on numpy arrays."""

    def __init__(self, name, dtype, vector=None, target=None):
        self.name, self.dtype = name, np.dtype(dtype)
        self.arity = 2 if name in BINARY else 1
        self.vector = vector
        self.target = _target(target)
        self.ir = str(build_loop_ir(name, dtype, self.arity, vector, self.target))
        self.mod = optimise(llvm.parse_assembly(self.ir), self.target)
        self.mod.verify()
        self.asm = target_machine(self.target).emit_assembly(self.mod)
        self.runnable = not self.target.missing_on_host()
        if not self.runnable:
            return      # inspect the assembly only: this host cannot execute it
        # MCJIT takes ownership of the TargetMachine it gets: a fresh one
        self.engine = llvm.create_mcjit_compiler(self.mod, self.target.target_machine(opt=3))
        self.engine.finalize_object()
        addr = self.engine.get_function_address("f")
        cptr = ctypes.c_void_p
        self.cfunc = ctypes.CFUNCTYPE(None, *([cptr] * (self.arity + 1)),
                                      ctypes.c_int64)(addr)

    def __call__(self, *xs, out=None):
        xs = [np.ascontiguousarray(x, dtype=self.dtype) for x in xs]
        if out is None:
            out = np.empty_like(xs[0])
        if self.vector:
            assert xs[0].size % self.vector == 0
        self.cfunc(*[x.ctypes.data for x in xs], out.ctypes.data, xs[0].size)
        return out


_CACHE = {}


def compiled(name, dtype, vector=None, target=None):
    key = (name, np.dtype(dtype).name, vector, _target(target).key())
    if key not in _CACHE:
        _CACHE[key] = Compiled(name, dtype, vector, target)
    return _CACHE[key]


# ---------------------------------------------------------------------------
# Accuracy measurement against long-double references.

LD = np.longdouble


def _sigmoid_ref(x):
    e = np.exp(-np.abs(x))
    return np.where(x < 0, e, LD(1)) / (1 + e)


def _erf_ref(x):
    """erf in long double: 2a/sqrt(pi) e^(-a^2) sum (2a^2)^n / (2n+1)!!, a
    series of positive terms (no cancellation); 1 beyond |x| = 6.5."""
    a = np.minimum(np.abs(x), LD(6.5))
    a = np.where(np.isnan(a), LD(0), a)
    t2 = 2 * a * a
    term = np.ones_like(a)
    acc = np.ones_like(a)
    for n in range(1, 260):
        term = term * t2 / (2 * n + 1)
        acc = acc + term
    two_over_sqrtpi = LD("1.12837916709551257389615890312154517")
    r = two_over_sqrtpi * a * np.exp(-a * a) * acc
    r = np.where(np.abs(x) > LD(6.5), LD(1), r)
    return np.where(np.isnan(x), x, np.copysign(r, x))

def _erfc_ref(x):
    """erfc in long double, accurate relative to the result in the tail:
    1 - erf below x = 2 (erf's series; at most ~8 bits lost to the
    subtraction, of long double's 64); for x >= 2 the continued fraction
    erfc(x) = e^(-x^2) / sqrt(pi) / (x + (1/2) / (x + 1 / (x + (3/2) / ...))),
    160 terms (converged to < 0.01 ulp of float64 at x = 2), with x^2 split
    into an exact hi^2 and a small remainder so e^(-x^2) keeps its accuracy
    up to x ~ 27."""
    x = np.asarray(x, LD)
    out = 1 - _erf_ref(x)
    tail = np.isfinite(x) & (x >= 2)
    if tail.any():
        a = x[tail]
        t = np.zeros_like(a)
        for n in range(160, 0, -1):
            t = (LD(n) / 2) / (a + t)
        hi = np.ldexp(np.floor(np.ldexp(a, 26)), -26)   # <= 31 bits: hi^2 exact
        lo = a - hi
        e = np.exp(-hi * hi) * np.exp(-lo * (a + hi))
        inv_sqrtpi = LD("0.564189583547756286948079451560772586")
        out[tail] = e * inv_sqrtpi / (a + t)
    return out


REFERENCE = {
    "exp": np.exp, "expm1": np.expm1, "log": np.log, "log1p": np.log1p,
    "tanh": np.tanh, "sigmoid": _sigmoid_ref,
    "softplus": lambda x: np.logaddexp(x, LD(0)),
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "pow": np.power,
    "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x), "erf": _erf_ref,
    "erfc": _erfc_ref, "sinh": np.sinh, "cosh": np.cosh, "asinh": np.arcsinh,
    "acosh": np.arccosh, "atanh": np.arctanh, "atan": np.arctan, "asin": np.arcsin,
    "acos": np.arccos, "atan2": np.arctan2,
}


def reference(name, *xs):
    with np.errstate(all="ignore"):
        return REFERENCE[name](*[np.asarray(x).astype(LD) for x in xs])


def ulp_error(got, ref, dtype):
    """|got - ref| in units of the last place of ref in `dtype`.

    Where the correctly rounded reference or the result is not finite the
    error is 0 for a matching class (same infinity, both NaN) and inf
    otherwise."""
    dtype = np.dtype(dtype)
    fi = np.finfo(dtype)
    p = fi.nmant + 1
    with np.errstate(all="ignore"):
        ref_t = ref.astype(dtype)
        _, ex = np.frexp(ref)
        ue = np.maximum(ex.astype(np.int64) - p, fi.minexp - p + 1)
        err = np.abs(got.astype(LD) - ref) / np.ldexp(LD(1), ue)
        fin = np.isfinite(ref_t) & np.isfinite(got)
        same = (got == ref_t) | (np.isnan(got) & np.isnan(ref_t))
        err = np.where(fin, err, np.where(same, 0, np.inf))
    return err.astype(np.float64)


# ---------------------------------------------------------------------------
# Input sweeps.

# Uniform "main range" per function, (f32, f64).  sin/cos/tan: the range of
# their Cody-Waite reduction (beyond, an exact one: the bit-pattern sweeps
# reach it).
MAIN_RANGE = {
    "exp": ((-104, 89), (-746, 710)),
    "expm1": ((-30, 89), (-60, 710)),
    "log": ((0, 4), (0, 4)),
    "log1p": ((-1, 4), (-1, 4)),
    "tanh": ((-10, 10), (-20, 20)),
    "sigmoid": ((-110, 40), (-750, 60)),
    "softplus": ((-110, 40), (-750, 60)),
    "sin": ((-2.0**19, 2.0**19), (-2.0**45, 2.0**45)),
    "cos": ((-2.0**19, 2.0**19), (-2.0**45, 2.0**45)),
    "tan": ((-2.0**19, 2.0**19), (-2.0**45, 2.0**45)),
    "sqrt": ((0, 10), (0, 10)),
    "rsqrt": ((0, 10), (0, 10)),
    "erf": ((-6, 6), (-7, 7)),
    "erfc": ((-4, 10.1), (-6, 27.3)),
    "sinh": ((-90, 90), (-711, 711)),
    "cosh": ((-90, 90), (-711, 711)),
    "asinh": ((-8, 8), (-8, 8)),
    "acosh": ((1, 8), (1, 8)),
    "atanh": ((-1, 1), (-1, 1)),
    "atan": ((-8, 8), (-8, 8)),
    "asin": ((-1, 1), (-1, 1)),
    "acos": ((-1, 1), (-1, 1)),
}
BINARY = ("pow", "atan2")
def _bits_dtype(dtype):
    return np.uint32 if np.dtype(dtype) == np.float32 else np.uint64


def dense_sweep(dtype, n):
    """~n values evenly spaced in bit pattern over all finite values of
    dtype, both signs: log-spaced magnitudes incl. denormals."""
    ut = _bits_dtype(dtype)
    top = int(np.array(np.finfo(dtype).max, dtype).view(ut))
    step = max(1, top // (n // 2))
    pos = np.arange(0, top + 1, step, dtype=np.uint64).astype(ut).view(dtype)
    return np.concatenate([pos, -pos])


def random_bits(dtype, n, rng):
    ut = _bits_dtype(dtype)
    x = rng.integers(0, np.iinfo(ut).max, n, dtype=ut, endpoint=True).view(dtype)
    return x[np.isfinite(x)]


def sweep(name, dtype, n, seed=0):
    """Inputs for an accuracy sweep of unary function `name`: dense
    bit-pattern sweep, random bit patterns, uniform over the main range, and
    log-uniform small magnitudes (near-zero relative accuracy)."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    lo, hi = MAIN_RANGE[name][dtype == np.float64]
    small = np.exp(rng.uniform(-40, 0, n // 4)) * rng.choice([-1.0, 1.0], n // 4)
    x = np.concatenate([dense_sweep(dtype, n), random_bits(dtype, n, rng),
                        rng.uniform(lo, hi, n).astype(dtype), small.astype(dtype)])
    return x.astype(dtype)


def pow_sweep(dtype, n, seed=0):
    """(x, y) pairs for pow: log-uniform |x| with y in +-[1e-3, 1e3]; x near
    1 with large |y| (results near the overflow threshold); negative x with
    integer y."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    big = 30 if dtype == np.float32 else 300
    ylim = 250 if dtype == np.float32 else 2040
    sgn = lambda k: rng.choice([-1.0, 1.0], k)
    xs = [np.exp(rng.uniform(-big, big, n) * np.log(10)),
          1 + rng.uniform(-0.5, 0.5, n),
          -np.exp(rng.uniform(-5, 5, n))]
    ys = [np.exp(rng.uniform(np.log(1e-3), np.log(1e3), n)) * sgn(n),
          rng.uniform(-ylim, ylim, n),
          rng.integers(-60, 61, n).astype(np.float64)]
    return (np.concatenate(xs).astype(dtype), np.concatenate(ys).astype(dtype))


def atan2_sweep(dtype, n, seed=0):
    """(y, x) pairs for atan2: bit-pattern sweeps of both (all finite values,
    shuffled against each other), log-uniform magnitudes of both signs over
    most of the exponent range, near the diagonals |y| ~ |x| (where the
    reduction switches) and near the negative x axis (results near +-pi)."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    big = 35 if dtype == np.float32 else 300
    sgn = lambda k: rng.choice([-1.0, 1.0], k)
    d = dense_sweep(dtype, n)
    m = np.exp(rng.uniform(-5, 5, n)) * sgn(n)
    ys = [d, rng.permutation(d), np.exp(rng.uniform(-big, big, n) * np.log(10)) * sgn(n), m, m * 1e-3]
    xs = [rng.permutation(d), d, np.exp(rng.uniform(-big, big, n) * np.log(10)) * sgn(n),
          m * (1 + rng.uniform(-1e-3, 1e-3, n)) * sgn(n), -np.abs(m)]
    with np.errstate(over="ignore"):
        return (np.concatenate(ys).astype(dtype), np.concatenate(xs).astype(dtype))


def binary_sweep(name, dtype, n, seed=0):
    return (pow_sweep if name == "pow" else atan2_sweep)(dtype, n, seed)


def special_values(dtype):
    """Edge inputs: zeros, denormal extremes, normal extremes, exp/log
    overflow and underflow thresholds and their neighbours, +-inf, NaN."""
    dtype = np.dtype(dtype)
    fi = np.finfo(dtype)
    tiny = fi.smallest_subnormal
    with np.errstate(all="ignore"):
        v = [0.0, tiny, fi.smallest_normal - tiny, fi.smallest_normal,
             fi.max, 1.0, 0.5, 2.0, 3.0, 10.0, 20.0, 1e-5, 1e5,
             np.pi / 2, np.pi, np.log(fi.max), np.log(tiny),
             np.log(tiny / 2), np.log(fi.smallest_normal),
             88.72, 89, 104, 709.78, 710, 745.1, 746, 750]
        v = np.array(v, dtype=dtype)
        v = np.concatenate([v, np.nextafter(v, dtype.type(np.inf)),
                            np.nextafter(v, dtype.type(0))])
    v = v[np.isfinite(v)]
    return np.concatenate([v, -v, [np.inf, -np.inf, np.nan]]).astype(dtype)
