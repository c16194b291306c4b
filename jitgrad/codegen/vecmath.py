"""Vectorisable transcendental functions emitted as LLVM IR.

LLVM's loop vectoriser widens a loop that calls ``llvm.exp.*`` or libm, but
the backend then scalarises the vector call back into libm calls.  The
functions here are emitted as plain straight-line IR (range reduction +
polynomial, in the style of Cephes / fdlibm / SLEEF) using only intrinsics
that lower to single instructions (fma, fabs, floor, rint, copysign, sqrt), so
a fused loop vectorises to AVX2 / AVX-512 code.  For a target without FMA (the
SSE2 baseline, `emit(..., fma=False)`) fma is emulated with an exact product
and floor / rint with the 2**mant rounding trick (the baseline has no round
instruction either): no libm call in the loop, and the same ulp bounds
(tested), though not always the FMA code's bits.  Scalars get straight-line
code (but sin/cos/tan: see below); on vector types exp and expm1 branch once
per vector (`_Em.if_all`) to a shorter path when every lane is in the normal
range, which gives the same bits as the full path (tested), so no result
depends on its neighbours;
sin/cos/tan likewise take their large-argument reduction only when a lane
needs it, on scalars too, as a cold call of an out-of-line function whose
masked vector variant LLVM's loop vectoriser knows (`emit(...,
vector_bits=...)`: a scalar loop of them is vectorised, the variant called
once per vector; the code generator's explicit vectors, used wherever a run
is long enough, branch instead and are 2.5-3x faster).  The only memory they
read is float64's 2/pi table for that reduction (a private constant global,
indices clamped to it).

Caller's contract: emit() may end the builder in a new basic block, so a
loop that emits into its body takes the latch's predecessor from
``builder.block`` after the call, not from the block it started in.

API::

    emit(builder, name, args) -> ir.Value
    emit_rounding(builder, 'floor' | 'ceil' | 'rint', x, native) -> ir.Value   (Floor, Ceil, Round)

``args`` are values of type float, double, or a vector of either (all the
same type); the result has that type.  Special values are handled with
``select`` and follow numpy (NaN propagates, exp(-inf) = 0, log(0) = -inf,
pow as C99/np.power, ...).  No fast-math flags are used.

Functions (``FUNCTIONS``): exp expm1 log log1p tanh sigmoid softplus sin
cos tan pow (2 args) sqrt rsqrt erf erfc sinh cosh asinh acosh atanh atan
asin acos atan2 (2 args: y, x).

Measured worst-case error, in ulp of the exact result (long-double
reference; 0.5 = correctly rounded), from ``bench/bench_vecmath.py --ulp``
with n = 2**22: per function and type 2**22 inputs evenly spaced in bit
pattern over all finite values (log-spaced magnitudes incl. denormals, both
signs), 2**22 random bit patterns, 2**22 uniform over the main range, and
2**20 log-uniform magnitudes in [4e-18, 1] of both signs.  pow: 3 x 2**22
pairs: |x| log-uniform in 1e+-30 (f32) / 1e+-300 (f64) with |y| log-uniform
in [1e-3, 1e3] of both signs; x in [0.5, 1.5] with |y| <= 250 / 2040
(results up to the overflow threshold); x in -[e^-5, e^5] with integer
|y| <= 60.  The test suite asserts the "bound" column on smaller sweeps.

    ========  ===========================  =====  =====  =========
    function  main range f32 / f64          f32    f64   bound
    ========  ===========================  =====  =====  =========
    exp       [-104, 89] / [-746, 710]     1.02   0.81   1.5 / 1.25
    expm1     [-30, 89] / [-60, 710]       1.68   1.83   2.0 / 2.25
    log       (0, 4]                       0.82   0.79   1.0
    log1p     [-1, 4]                      0.80   0.81   1.0
    tanh      [-10, 10] / [-20, 20]        2.46   2.50   3.0
    sigmoid   [-110, 40] / [-750, 60]      2.25   2.27   2.75
    softplus  [-110, 40] / [-750, 60]      1.61   1.55   2.0
    sin       |x| <= 2**19 / 2**45 (*)     1.05   0.77   1.5 / 1.0
    cos       |x| <= 2**19 / 2**45 (*)     0.78   0.77   1.0
    tan       |x| <= 2**19 / 2**45 (*)     2.19   2.15   2.75
    pow       see above                    0.50   1.15   0.75 / 1.5
    sqrt      [0, 10]                      0.50   0.50   0.5
    rsqrt     [0, 10]                      1.49   1.49   1.5
    erf       [-6, 6] / [-7, 7]            0.96   0.97   1.25
    erfc      [-4, 10.1] / [-6, 27.3]      0.50   1.22   0.75 / 1.5
    sinh      [-90, 90] / [-711, 711]      1.45   1.35   1.75 / 1.5
    cosh      [-90, 90] / [-711, 711]      1.40   1.22   1.75 / 1.5
    asinh     [-8, 8]                      1.12   1.13   1.25
    acosh     [1, 8]                       1.03   0.98   1.25
    atanh     [-1, 1]                      0.80   0.82   1.0
    atan      [-8, 8]                      0.50   0.65   0.75 / 1.0
    asin      [-1, 1]                      0.50   0.63   0.75 / 1.0
    acos      [-1, 1]                      0.50   0.63   0.75 / 1.0
    atan2     see below                    0.50   0.75   0.75 / 1.0
    ========  ===========================  =====  =====  =========

(*) the uniform part of the sweep; the bit-pattern sweeps cover all finite
x, and the bounds hold there too (see the notes on sin/cos/tan).

expm1, log1p, tanh, sin, tan and erf are accurate relative to the result
near 0 (no cancellation): the small-magnitude sweep is part of the table.
erfc is accurate relative to the result in its tail, down to where it
underflows (~10.05 / ~27.2; the main range reaches into the denormals).

Notes:
* sin/cos/tan use Cody-Waite reduction by pi/2 split into three parts of the
  type's precision, the first step exact through FMA and the second carried
  as a double-word tail, for |x| <= 2**19 (f32) / 2**45 (f64).  Beyond, up
  to FLT_MAX / DBL_MAX, an exact Payne-Hanek reduction in float64
  (`_trig_reduce_exact`: 26-bit chunks of 2/pi chosen by x's exponent,
  exact products, the sum as a double-double, triple-word for f64) gives the
  reduced argument to full precision even for the arguments closest to a
  multiple of pi/2, so the table's bounds hold for every finite x (tested
  across every binade, on the AVX-512, AVX2 and SSE2 targets).  It is a
  cold branch taken only when some lane (or the scalar) is large (one compare and
  movemask in the common range); the other lanes keep their Cody-Waite bits.
  It is one internal <8 x T> function per module and type (compile time),
  which vectors call directly and scalars through `_trig_large_scalar_function`.
  sin/cos/tan of +-inf is NaN.
* float32 pow is evaluated in float64 (exp(y log|x|) needs ~8 more bits than
  the result); float64 pow carries log|x| and y log|x| as double-doubles.
* erf: |x| < 1 odd polynomial; otherwise 1 - exp(-x^2) B(x), B piecewise
  polynomial (f64: 2 pieces, coefficients chosen per lane with select).
* erfc is computed in float64 for both types (float32: one final rounding,
  so it is within 0.5 ulp plus double rounding).  |x| < 0.5: 1 - x - x A(x^2)
  with erf's A and 1 - x as a double-word; |x| >= 0.5: exp(-x^2) R(|x|) with
  x^2 = z + zlo exact (FMA), exp(-z - zlo) and R kept as double-words, so
  only the final product rounds at full weight; R piecewise polynomial (6
  pieces, by select) below 8, G(1/x^2) / x above; x <= -0.5: 2 - erfc(-x).
* tanh = expm1(2|x|) / (expm1(2|x|) + 2) with the sign copied back;
  sigmoid uses t = exp(-|x|) / (1 + exp(-|x|)) so it never overflows, and
  1 - t for x >= 0 (rounded once: the nearest value for almost every x); softplus(x) =
  max(x, 0) + log1p(exp(-|x|)).
* rsqrt is 1 / sqrt(x) (exact sqrt instruction and a division, no
  approximate rsqrt), so rsqrt(+-0) = +-inf like numpy's 1/np.sqrt.
* sinh / cosh / asinh / acosh / atanh (measured with the same sweeps at
  n = 2**20, long-double reference, i.e. glibc's sinhl etc.; on the SSE2
  baseline, n = 2**18: 1.40 1.31 / 1.34 1.17 / 1.12 1.09 / 1.02 0.98 /
  0.81 0.81): sinh: |x| < 1 an
  odd Taylor polynomial, then (E + E / (E + 1)) / 2 with E = expm1|x|;
  cosh: e^|x| / 2 + e^-|x| / 2 from one exp; both e^|x| / 2 scaled in one
  rounding beyond _EXP_NORMAL (finite up to ln(2 max)).  asinh:
  log1p(a + a^2 / (1 + sqrt(1 + a^2))), the sum's rounding error carried
  into log1p's tail; acosh: log1p(t + sqrt(2t + t^2)), t = x - 1, with the
  square root as a double-word (by FMA); both log(a) + ln2 beyond 2^12 /
  2^28 (one log evaluation per lane either way).  atanh: log1p(2a / (1 - a))
  / 2 with the quotient a double-word, below 2^-4 / 2^-8 an odd series.
  sinh, asinh, atanh (and cosh: 1) are exact for tiny x; sinh and asinh
  also return a denormal x itself when DAZ reads it as 0 (as TF's kernels),
  atanh then gives 0 (as TF's).
* atan / asin / acos / atan2 (n = 2**20, long-double reference, i.e. glibc's
  atanl etc.; the asin / acos sweeps add 2**20 points evenly over [-1, 1];
  atan2: `tests/_jit_harness.atan2_sweep`, pairs of bit-pattern sweeps,
  log-uniform magnitudes of both signs, near-diagonal and near-negative-axis
  pairs; on the SSE2 baseline, n = 2**18: 0.50 0.63 / 0.50 0.61 / 0.50
  0.61 / 0.50 0.78) are evaluated in
  float64 for both types, so float32 is correctly rounded bar double
  rounding (float32 skips the double-word tails below: 29 spare bits).  atan: atan(a) = m pi/4 + atan(q), q = a, (a - 1) / (a + 1) or
  -1 / a by a against tan(pi/8) and tan(3pi/8) (Cephes), the quotient a
  double-word (remainder by FMA) whose tail enters as ql (1 - q^2); m pi/4 as
  hi + lo, the leading sum exact.  asin / acos: |x| <= 1/2 t + t^3 R(t^2),
  beyond t = sqrt((1 - |x|) / 2) with its FMA tail and asin = pi/2 - 2 asin(t),
  acos = 2 asin(t) (x > 0) or pi - 2 asin(t).  atan2(y, x): atan of
  min(|x|, |y|) / max(...) (both scaled by 2^600 below 2^300, so a
  denormal operand's remainder stays exact) plus the octant's multiple of pi/4, C99's special
  values (atan2(+-0, -0) = +-pi, +-pi/4 and +-3pi/4 for two infinities,
  NaN from either operand).  atan (float32) and asin return a denormal x
  itself when DAZ reads it as 0 (as TF's kernels); float64 atan then gives 0
  (as TF's); atan2 reads denormals as zeros.
"""

from fractions import Fraction

import numpy as np
from llvmlite import ir


class SplatConst(ir.Constant):
    """irutil.SplatConst (this module is also loaded on its own, outside the package,
    by tests/_jit_harness.py): a vector constant of equal lanes printed as
    ``splat (T v)`` / zeroinitializer, not lane by lane."""

    def __init__(self, vty, lane):
        ir.Constant.__init__(self, vty, [lane] * vty.count)
        v = lane.constant
        zero = v == 0 and not (isinstance(v, float) and np.signbit(v))
        if zero:
            self._short = "zeroinitializer"
        else:
            self._short = f"splat ({vty.element} {lane.get_reference()})"

    def _get_reference(self):
        return self._short


__all__ = ["emit", "FUNCTIONS"]

# Enough digits for a 3 x 53-bit split of pi/2 (Cody-Waite) and of ln 2.
_PI = Fraction(
    "3.14159265358979323846264338327950288419716939937510"
    "58209749445923078164062862089986280348253421170679")
_LN2 = Fraction(
    "0.69314718055994530941723212145817656807550013436025"
    "52541206800094933936219696947156058633269964186875")
_LOG2E = 1 / _LN2


def _split(value, dt, parts):
    """value (a Fraction) as a sum of `parts` numbers of numpy type dt."""
    out = []
    for _ in range(parts):
        h = dt(float(value))
        out.append(float(h))
        value -= Fraction(float(h))
    return out


class _Em:
    """Builder helpers for one floating type (scalar or vector)."""

    def __init__(self, builder, ty, has_fma=True, has_round=None):
        self.b = builder
        self.ty = ty
        # the target's vector lanes for this type (scalar trig's vector variant; emit
        # sets it; None: _EXACT_LANES)
        self.lanes = None
        self.has_fma = has_fma
        # SSE4.1's round instruction; every FMA target has it
        self.has_round = has_fma if has_round is None else has_round
        el = ty.element if isinstance(ty, ir.VectorType) else ty
        self.count = ty.count if isinstance(ty, ir.VectorType) else None
        if isinstance(el, ir.DoubleType):
            self.f64, self.np, self.bits, self.mant = True, np.float64, 64, 52
        elif isinstance(el, ir.FloatType):
            self.f64, self.np, self.bits, self.mant = False, np.float32, 32, 23
        else:
            raise TypeError("vecmath: unsupported type %s" % ty)
        self.bias = (1 << (self.bits - self.mant - 2)) - 1
        ie = ir.IntType(self.bits)
        self.ity = ir.VectorType(ie, self.count) if self.count else ie
        self.sfx = ("v%d" % self.count if self.count else "") + (
            "f64" if self.f64 else "f32")

    def as_f64(self):
        """The float64 emitter of the same width (float32 functions that are
        evaluated in float64 and rounded once at the end)."""
        dty = ir.DoubleType()
        return _Em(self.b, ir.VectorType(dty, self.count) if self.count else dty, self.has_fma, self.has_round)

    # constants -----------------------------------------------------------
    def c(self, v):
        v = float(self.np(v))
        el = self.ty.element if self.count else self.ty
        if self.count:
            return SplatConst(self.ty, ir.Constant(el, v))
        return ir.Constant(self.ty, v)

    def ci(self, v):
        el = self.ity.element if self.count else self.ity
        v = int(v) & ((1 << self.bits) - 1)
        if self.count:
            return SplatConst(self.ity, ir.Constant(el, v))
        return ir.Constant(self.ity, v)

    def bits_of(self, v):
        """Bit pattern of the constant v in this type, as a Python int."""
        ut = np.uint64 if self.f64 else np.uint32
        return int(np.array(v, dtype=self.np).view(ut))

    # intrinsics ----------------------------------------------------------
    def intr(self, name, *args):
        full = "llvm.%s.%s" % (name, self.sfx)
        mod = self.b.module
        fn = mod.globals.get(full)
        if fn is None:
            fn = ir.Function(mod, ir.FunctionType(self.ty, [self.ty] * len(args)),
                             name=full)
        return self.b.call(fn, list(args))

    def fma(self, a, b, c):
        if self.has_fma:
            return self.intr("fma", a, b, c)
        return self._fma_without_fma(a, b, c)

    def _fma_without_fma(self, a, b, c):
        """a*b + c on a target without an FMA instruction (the SSE2 baseline),
        where llvm.fma would become a libm call per lane.  The product is exact
        -- float32: in float64, which holds a product of two floats; float64:
        Dekker's two-product -- so the error-free steps (two_prod, Cody-Waite
        reductions, double-word residuals) stay exact; only the sum rounds (at
        most twice: within an ulp of the fused result, not always its bits)."""
        if not self.f64:
            d = self.as_f64()
            wide = [self.b.fpext(v, d.ty) for v in (a, b, c)]
            return self.b.fptrunc(d.add(d.mul(wide[0], wide[1]), wide[2]), self.ty)
        p = self.mul(a, b)
        ah, al = self._veltkamp(a)
        bh, bl = self._veltkamp(b)
        e = self.add(self.add(self.add(self.sub(self.mul(ah, bh), p), self.mul(ah, bl)),
                              self.mul(al, bh)), self.mul(al, bl))       # a*b - p, exactly
        s, t = self.two_sum(p, c)
        low = self.add(t, e)
        r = self.add(s, low)
        # low == 0: s is exact and carries IEEE's sign of zero; NaN: the split overflowed
        # (|a| or |b| above ~1e299) or an input was inf/NaN -- the unfused p + c is what is left
        r = self.sel(self.cmp("==", low, self.c(0.0)), s, r)
        return self.sel(self.isnan(r), s, r)

    def _veltkamp(self, a):
        """a = hi + lo exactly, each with at most 26 significant bits (float64)."""
        t = self.mul(self.c(134217729.0), a)    # 2**27 + 1
        hi = self.sub(t, self.sub(t, a))
        return hi, self.sub(a, hi)

    def abs(self, x):
        return self.intr("fabs", x)

    def floor(self, x):
        if self.has_round:
            return self.intr("floor", x)
        r = self.rint(x)
        return self.sel(self.cmp(">", r, x), self.sub(r, self.c(1.0)), r)

    def ceil(self, x):
        if self.has_round:
            return self.intr("ceil", x)
        r = self.rint(x)
        # copysign: ceil(-0.7) is -0.0 (r + 1 would give +0.0)
        return self.copysign(self.sel(self.cmp("<", r, x), self.add(r, self.c(1.0)), r), x)

    def rint(self, x):
        if self.has_round:
            return self.intr("rint", x)
        # Without SSE4.1's round instruction (the baseline lacks it: llvm.rint / floor
        # become libm calls), round to nearest even by adding and subtracting
        # 2**mant; from that magnitude on (and for inf / NaN) x is its own rint.
        big = self.c(2.0 ** self.mant)
        a = self.abs(x)
        r = self.copysign(self.sub(self.add(a, big), big), x)
        return self.sel(self.cmp("<", a, big), r, x)

    def trunc(self, x):
        if self.has_round:
            return self.intr("trunc", x)
        return self.copysign(self.floor(self.abs(x)), x)   # (-0.5 -> -0.0; inf, NaN pass)

    def copysign(self, a, b):
        return self.intr("copysign", a, b)

    def sqrt(self, x):
        return self.intr("sqrt", x)

    # arithmetic / logic ----------------------------------------------------
    def add(self, a, b):
        return self.b.fadd(a, b)

    def sub(self, a, b):
        return self.b.fsub(a, b)

    def mul(self, a, b):
        return self.b.fmul(a, b)

    def div(self, a, b):
        return self.b.fdiv(a, b)

    def neg(self, a):
        return self.b.fneg(a)

    def cmp(self, op, a, b):
        """Ordered compare: false if either side is NaN."""
        return self.b.fcmp_ordered(op, a, b)

    def ucmp(self, op, a, b):
        """Unordered compare: true if either side is NaN."""
        return self.b.fcmp_unordered(op, a, b)

    def isnan(self, x):
        return self.b.fcmp_unordered("uno", x, x)

    def sel(self, c, a, b):
        return self.b.select(c, a, b)

    def or_(self, a, b):
        return self.b.or_(a, b)

    def and_(self, a, b):
        return self.b.and_(a, b)

    def not_(self, a):
        return self.b.not_(a)

    def min_c(self, x, hi):
        """min(x, hi) for a constant hi; NaN passes through."""
        return self.sel(self.cmp(">", x, self.c(hi)), self.c(hi), x)

    def max_c(self, x, lo):
        """max(x, lo) for a constant lo; NaN passes through."""
        return self.sel(self.cmp("<", x, self.c(lo)), self.c(lo), x)

    def to_int(self, x):
        return self.b.bitcast(x, self.ity)

    def to_float(self, i):
        return self.b.bitcast(i, self.ty)

    def signbit(self, x):
        return self.b.icmp_signed("<", self.to_int(x), self.ci(0))

    def poly(self, x, coeffs):
        """Horner evaluation with FMA, coeffs in ascending order."""
        cv = [k if isinstance(k, ir.Value) else self.c(k) for k in coeffs]
        acc = cv[-1]
        for k in reversed(cv[:-1]):
            acc = self.fma(acc, x, k)
        return acc

    def poly_estrin(self, x, coeffs):
        """Estrin's scheme: the same polynomial as `poly` in about log2(n)
        dependent FMAs instead of n.  Used where the polynomial sits on a
        hot loop's critical path (the exp family: W2 value+gradient -3.5%);
        the rounding differs slightly from Horner's, so the accuracy table
        is measured with it."""
        cv = [k if isinstance(k, ir.Value) else self.c(k) for k in coeffs]
        pw = x
        while len(cv) > 1:
            nxt = [self.fma(cv[i + 1], pw, cv[i]) for i in range(0, len(cv) - 1, 2)]
            if len(cv) % 2:
                nxt.append(cv[-1])
            cv = nxt
            if len(cv) > 1:
                pw = self.mul(pw, pw)
        return cv[0]

    MAGIC = {False: 1.5 * 2.0 ** 23, True: 1.5 * 2.0 ** 52}

    def pow2(self, n):
        """2**n for integer-valued float n with exponent of 2**n normal."""
        return self.pow2_biased(self.add(n, self.c(self.MAGIC[self.f64])))

    def pow2_biased(self, nm):
        """2**n from nm = n + 1.5 * 2**mant, which holds n in its low
        mantissa bits: no float->int64 conversion, which AVX2 lacks."""
        i = self.b.add(self.to_int(nm), self.ci(self.bias))
        return self.to_float(self.b.shl(i, self.ci(self.mant)))

    def scale(self, p, n):
        """p * 2**n for |n| up to ~2 * bias, rounding once (denormals ok)."""
        n1 = self.floor(self.mul(n, self.c(0.5)))
        n2 = self.sub(n, n1)
        return self.mul(self.mul(p, self.pow2(n1)), self.pow2(n2))

    def if_all(self, ok, fast, slow, scalar_branch=False):
        """fast() if every lane of the i1 (vector) `ok` is true, else slow()
        (a value, or a tuple of values).

        For vector types this is a branch: the common in-range vector skips
        the clamps and special-case arithmetic its out-of-range neighbours
        need.  Both paths must give the same bits wherever `ok` holds, so
        results never depend on which lanes share a vector.  Scalars stay
        straight-line (slow() only) unless scalar_branch: for trig, whose
        slow() is a call (of a function LLVM's loop vectoriser can widen to its
        masked vector variant: `_trig_large_scalar_function`)."""
        b = self.b
        if not self.count:
            if not scalar_branch:
                return slow()
            all_ok = ok
        else:
            mask_ty = ir.IntType(self.count)
            all_ok = b.icmp_unsigned("==", b.bitcast(ok, mask_ty),
                                     ir.Constant(mask_ty, (1 << self.count) - 1))
        fast_bb = b.append_basic_block("vm.fast")
        slow_bb = b.append_basic_block("vm.slow")
        join_bb = b.append_basic_block("vm.join")
        b.cbranch(all_ok, fast_bb, slow_bb).set_weights([255, 1])
        results = []
        for bb, path in ((fast_bb, fast), (slow_bb, slow)):
            b.position_at_end(bb)
            value = path()
            several = isinstance(value, tuple)
            results.append((value if several else (value,), b.block))
            b.branch(join_bb)
        b.position_at_end(join_bb)
        phis = tuple(b.phi(v.type) for v in results[0][0])
        for values, bb in results:
            for phi, value in zip(phis, values):
                phi.add_incoming(value, bb)
        return phis if several else phis[0]

    def exponent_of(self, ibits):
        """Biased exponent field of a non-negative float's bits, as float."""
        e = self.b.lshr(ibits, self.ci(self.mant))
        # OR into the mantissa of 2**mant then subtract: int->float without
        # cvtqq2pd, which AVX2 lacks.
        two_m = self.bits_of(2.0 ** self.mant)
        f = self.to_float(self.b.or_(e, self.ci(two_m)))
        return self.sub(f, self.c(2.0 ** self.mant))

    # error-free transformations (double-word arithmetic) ------------------
    def two_sum(self, a, b):
        s = self.add(a, b)
        bb = self.sub(s, a)
        err = self.add(self.sub(a, self.sub(s, bb)), self.sub(b, bb))
        return s, err

    def fast_two_sum(self, a, b):  # requires |a| >= |b|
        s = self.add(a, b)
        return s, self.sub(b, self.sub(s, a))

    def two_prod(self, a, b):
        p = self.mul(a, b)
        return p, self.fma(a, b, self.neg(p))


# ---------------------------------------------------------------------------
# exp family

_LN2_SPLIT = {False: _split(_LN2, np.float32, 2), True: _split(_LN2, np.float64, 2)}

# exp(r) = 1 + r + r^2 * P(r) on |r| <= ln2/2.
#
# float32 P (here and expm1's): weighted least-squares fits iterated towards
# minimax (Lawson) at Chebyshev nodes on |r| <= 1.002 ln2/2, weight r^2/exp(r)
# (exp: absolute error of p) or r^2/|expm1 r| (expm1: relative error),
# coefficients rounded to float32 one at a time from the highest degree with
# a refit of the rest.  Approximation error 0.07 / 0.29 ulp: one and two
# terms shorter than the Cephes / Taylor series used before (W2 -4%).
_EXP_P = {
    False: [0.4999999403953552, 0.1666651964187622, 0.041668400168418884,
            0.008368857204914093, 0.0013814306585118175],
    # Taylor to r^13; truncation r^14/14! <= 5e-18 relative
    True: [1.0 / float(np.prod(np.arange(1, k + 1), dtype=np.float64))
           for k in range(2, 14)],
}
# expm1(r) = r + r^2 * P(r): the error is relative to r near 0.
_EXPM1_P = {
    False: [0.4999999701976776, 0.16666541993618011, 0.04166720435023308,
            0.008366651833057404, 0.0013882493367418647],
    True: _EXP_P[True],
}
# exp(x) is inf above hi and rounds to 0 below lo; clamping to [lo, hi]
# keeps 2**n within what `scale` handles and needs no special-case selects.
_EXP_LIM = {False: (-104.0, 89.0), True: (-746.0, 710.0)}


def _reduce_ln2(e, x):
    """x = n*ln2 + r, |r| <= ln2/2 (+rounding); returns n, r, n*ln2_lo and
    nm = n + 1.5 * 2**mant (for `pow2_biased`).

    One FMA adding the magic constant rounds x*log2(e) to the integer n
    (the product is exact inside the FMA) and leaves n in nm's low bits,
    which 2**n is built from.  With FMA, x - n*ln2_hi is exact even with
    ln2_hi at the type's full precision (the result fits in the format), so
    a 2-part split suffices; the lo product is returned separately for
    callers that keep a tail.  Needs |x| < 2**(mant-2)."""
    hi, lo = _LN2_SPLIT[e.f64]
    magic = e.c(e.MAGIC[e.f64])
    nm = e.fma(x, e.c(float(_LOG2E)), magic)
    n = e.sub(nm, magic)
    r = e.fma(e.neg(n), e.c(hi), x)
    return n, r, e.mul(n, e.c(lo)), nm


def _exp_core(e, x, xlo=None, normal=False, halve=False):
    """exp(x + xlo) for x already clamped to _EXP_LIM (or NaN).

    normal: |x| <= _EXP_NORMAL, so 2**n and the result are normal numbers
    and one exact scaling replaces `scale`'s two (same bits).
    halve: exp(x) / 2 (not with normal), scaled by 2**(n-1) in one rounding:
    sinh / cosh of large x, finite up to ln(2 * max)."""
    n, r1, nlo, nm = _reduce_ln2(e, x)
    if halve:
        assert not normal
        nm = None
        n_scale = e.sub(n, e.c(1.0))
    scale = (lambda p, n: e.mul(p, e.pow2_biased(nm))) if normal else e.scale
    if halve:
        scale = lambda p, n: e.scale(p, n_scale)   # noqa: E731
    if not e.f64:
        r = e.sub(r1, nlo)
        p = e.add(e.fma(e.mul(r, r), e.poly_estrin(r, _EXP_P[False]), r), e.c(1.0))
        return scale(p, n)
    # f64: keep r as a double-double so only the final 1 + (...) rounds at
    # full weight.
    t = e.neg(nlo) if xlo is None else e.sub(xlo, nlo)
    rh, rl = e.fast_two_sum(r1, t)
    # exp(rh + rl) ~= 1 + rh + rh^2 P(rh) + rl (1 + rh); rl <= 2^-55, so
    # the neglected rl rh^2 / 2 is < 2^-58.
    q = e.fma(e.mul(rh, rh), e.poly(rh, _EXP_P[True]), e.fma(rl, rh, rl))
    p = e.add(e.c(1.0), e.add(rh, q))
    return scale(p, n)


# Below this |x|, exp's 2**n (|n| <= 124 / 1020) and result (p in
# [0.7, 1.42]) are normal: no clamp, one scaling.
_EXP_NORMAL = {False: 86.0, True: 707.0}


def _exp(e, x):
    lo, hi = _EXP_LIM[e.f64]
    return e.if_all(e.cmp("<=", e.abs(x), e.c(_EXP_NORMAL[e.f64])),
                    lambda: _exp_core(e, x, normal=True),
                    lambda: _exp_core(e, e.max_c(e.min_c(x, hi), lo)))


def _expm1_core(e, x, capped=True):
    """expm1(x) for x in [lo, hi] (or NaN), accurate relative to the result.

    capped=False: the caller guarantees n <= bias (x below ~88 / ~709), so
    2**n cannot overflow and the cap below is an exact no-op."""
    n, r1, nlo, nm = _reduce_ln2(e, x)
    r = e.sub(r1, nlo)
    em = e.fma(e.mul(r, r), e.poly_estrin(r, _EXPM1_P[e.f64]), r)
    # expm1(x) = 2^n * em + (2^n - 1); 2^n - 1 is exact while it matters.
    # 2^n itself overflows for the largest n, so cap it and apply the excess
    # (0..2) as a final exact scaling.
    if not capped:
        t = e.pow2_biased(nm)
        return e.fma(t, em, e.sub(t, e.c(1.0)))
    nc = e.min_c(n, float(e.bias))
    t = e.pow2(nc)
    res = e.fma(t, em, e.sub(t, e.c(1.0)))
    return e.mul(res, e.pow2(e.sub(n, nc)))


_EXPM1_LO = {False: -30.0, True: -60.0}  # expm1 rounds to -1 below


def _expm1(e, x):
    lo = _EXPM1_LO[e.f64]
    in_range = e.and_(e.cmp(">=", x, e.c(lo)), e.cmp("<=", x, e.c(_EXP_NORMAL[e.f64])))
    res = e.if_all(in_range, lambda: _expm1_core(e, x, capped=False),
                   lambda: _expm1_core(e, e.max_c(e.min_c(x, _EXP_LIM[e.f64][1]), lo)))
    return e.sel(e.cmp("==", x, e.c(0.0)), x, res)  # keep the sign of -0


_TANH_SAT = {False: 10.0, True: 20.0}  # tanh rounds to +-1 beyond


def _tanh(e, x):
    # tanh|x| = em / (em + 2), em = expm1(2|x|): no cancellation near 0.
    a = e.min_c(e.abs(x), _TANH_SAT[e.f64])
    em = _expm1_core(e, e.add(a, a), capped=False)  # 2a <= 40: n <= 58
    t = e.div(em, e.add(em, e.c(2.0)))
    return e.copysign(t, x)


def _exp_neg_abs(e, x):
    """exp(-|x|), NaN preserved."""
    return _exp_core(e, e.max_c(e.neg(e.abs(x)), _EXP_LIM[e.f64][0]))


def _sigmoid(e, x):
    # t = sigmoid(-|x|) = exp(-|x|) / (1 + exp(-|x|)): exp never overflows and tiny (denormal)
    # results keep their precision. For x >= 0 the result is 1 - t, whose one rounding lands on
    # the nearest value (t's own error is far below an ulp of 1 - t); 1 / (1 + exp(-x)) rounded
    # 1 + exp(-x) first and missed it for half of all x > 0, which y * (1 - y) (the gradient)
    # magnified (x = 20: 5e-8 relative in float64, TF's is the nearest).
    ex = _exp_neg_abs(e, x)
    t = e.div(ex, e.add(e.c(1.0), ex))
    return e.sel(e.cmp("<", x, e.c(0.0)), t, e.sub(e.c(1.0), t))


def _softplus(e, x):
    # log(1 + e^x) = max(x, 0) + log1p(e^-|x|)
    ex = _exp_neg_abs(e, x)
    u = e.add(e.c(1.0), ex)
    c = e.sub(ex, e.sub(u, e.c(1.0)))  # rounding error of u, exact (ex <= 1)
    lp = _log_core(e, u, c, denormals=False)
    mx = e.sel(e.cmp(">", x, e.c(0.0)), x, e.c(0.0))
    return e.add(mx, lp)


# ---------------------------------------------------------------------------
# log family (fdlibm e_log.c / e_logf.c)

_LOG_LG = {
    False: [6.6666662693e-01, 4.0000972152e-01, 2.8498786688e-01, 2.4279078841e-01],
    True: [6.666666666666735130e-01, 3.999999999940941908e-01,
           2.857142874366239149e-01, 2.222219843214978396e-01,
           1.818357216161805012e-01, 1.531383769920937332e-01,
           1.479819860511658591e-01],
}
# ln2_hi has trailing zero bits so k * ln2_hi is exact for every exponent k.
_LOG_LN2 = {False: (6.9313812256e-01, 9.0580006145e-06),
            True: (6.93147180369123816490e-01, 1.90821492927058770002e-10)}


def _log_reduce(e, x, denormals):
    """x = m * 2^k, m in [sqrt(1/2), sqrt(2)); returns (m, k) as floats."""
    kadj = None
    if denormals:
        # Denormals: scale into the normal range first.
        sh = e.mant + 2
        tiny = e.cmp("<", x, e.c(2.0 ** (1 - e.bias)))
        x = e.sel(tiny, e.mul(x, e.c(2.0 ** sh)), x)
        kadj = e.sel(tiny, e.c(-sh), e.c(0.0))
    sqrt_half = e.bits_of(np.sqrt(e.np(0.5)))
    one = e.bits_of(1.0)
    # Offsetting the bits by (1 - sqrt(1/2)) makes the exponent field carry
    # over exactly when the mantissa is >= sqrt(2) (fdlibm logf trick).
    ix = e.b.add(e.to_int(x), e.ci(one - sqrt_half))
    k = e.sub(e.exponent_of(ix), e.c(e.bias))
    if kadj is not None:
        k = e.add(k, kadj)
    mbits = e.b.add(e.b.and_(ix, e.ci((1 << e.mant) - 1)), e.ci(sqrt_half))
    return e.to_float(mbits), k


def _log_core(e, x, c=None, denormals=True, lg=None):
    """log(x) + c/x for finite x > 0 (garbage otherwise, NaN-propagating in c)."""
    m, k = _log_reduce(e, x, denormals)
    f = e.sub(m, e.c(1.0))
    s = e.div(f, e.add(e.c(2.0), f))
    z = e.mul(s, s)
    R = e.mul(z, e.poly(z, lg or _LOG_LG[e.f64]))
    hfsq = e.mul(e.mul(e.c(0.5), f), f)
    hi, lo = _LOG_LN2[e.f64]
    tail = e.mul(k, e.c(lo))
    if c is not None:
        tail = e.add(tail, e.div(c, x))
    # k*ln2_hi + (f - (hfsq - (s*(hfsq+R) + (k*ln2_lo + c/x))))
    inner = e.fma(s, e.add(hfsq, R), tail)
    return e.fma(k, e.c(hi), e.sub(f, e.sub(hfsq, inner)))


def _log_specials(e, x, res, lo=0.0):
    """Fix up log-like results at inf, at the pole `lo`, and below it."""
    inf = float("inf")
    res = e.sel(e.cmp("==", x, e.c(inf)), e.c(inf), res)
    res = e.sel(e.cmp("==", x, e.c(lo)), e.c(-inf), res)
    return e.sel(e.ucmp("<", x, e.c(lo)), e.c(float("nan")), res)


def _log(e, x):
    return _log_specials(e, x, _log_core(e, x))


def _log1p(e, x):
    u = e.add(e.c(1.0), x)
    # Exact rounding error of u = 1 + x (fast two-sum, larger operand first)
    c_small = e.sub(x, e.sub(u, e.c(1.0)))
    c_big = e.sub(e.c(1.0), e.sub(u, x))
    c = e.sel(e.cmp(">", x, e.c(1.0)), c_big, c_small)
    res = _log_core(e, u, c, denormals=False)
    res = e.sel(e.cmp("==", x, e.c(0.0)), x, res)  # keep the sign of -0
    return _log_specials(e, x, res, lo=-1.0)


# ---------------------------------------------------------------------------
# hyperbolic functions and their inverses, from the exp and log cores above

# sinh(a) = a + a^3 P(a^2) on [0, 1): Taylor to a^11 / a^19 (truncation
# a^13/13! = 1.6e-10 / a^21/21! = 2e-20 relative at a = 1).
_SINH_P = {f64: [1.0 / float(np.prod(np.arange(1, k + 1), dtype=np.float64)) for k in range(3, top, 2)]
           for f64, top in ((False, 12), (True, 20))}
# Where exp(a) / 2 overflows (sinh, cosh: ln(2 * max) = 89.42 / 710.48): a
# clamp to just beyond keeps `scale`'s exponents small and still gives inf.
_HYP_LIM = {False: 90.0, True: 711.0}


def _exp_half_big(e, a):
    """exp(a) / 2 for a >= 0 (or NaN), a beyond _EXP_NORMAL: e^-a is far below an ulp."""
    return _exp_core(e, e.min_c(a, _HYP_LIM[e.f64]), halve=True)


def _sinh(e, x):
    # a = |x|; a < 1: odd polynomial (accurate relative to the result near 0);
    # a <= _EXP_NORMAL: (E + E / (E + 1)) / 2 with E = expm1(a) (e^a - e^-a, as
    # E + 1 = e^a, without cancellation); beyond: e^a / 2 scaled once.
    a = e.abs(x)
    normal = _EXP_NORMAL[e.f64]
    a2 = e.mul(a, a)
    small = e.fma(e.mul(a, a2), e.poly(a2, _SINH_P[e.f64]), a)

    def mid(v):
        em = _expm1_core(e, v, capped=False)
        r = e.mul(e.c(0.5), e.add(em, e.div(em, e.add(em, e.c(1.0)))))
        return e.sel(e.cmp("<", a, e.c(1.0)), small, r)

    r = e.if_all(e.cmp("<=", a, e.c(normal)), lambda: mid(a),
                 lambda: e.sel(e.cmp(">", a, e.c(normal)), _exp_half_big(e, a), mid(e.min_c(a, normal))))
    res = e.copysign(r, x)
    # keep -0, and a denormal x itself where DAZ reads it as 0 (TF's sinh passes it)
    return e.sel(e.cmp("==", x, e.c(0.0)), x, res)


def _cosh(e, x):
    # w = e^|x|: w / 2 + (1 / w) / 2 (no cancellation: both terms positive);
    # beyond _EXP_NORMAL e^|x| / 2 scaled once.
    a = e.abs(x)
    normal = _EXP_NORMAL[e.f64]

    def mid(v):
        w = _exp_core(e, v, normal=True)
        return e.fma(e.c(0.5), w, e.div(e.c(0.5), w))

    return e.if_all(e.cmp("<=", a, e.c(normal)), lambda: mid(a),
                    lambda: e.sel(e.cmp(">", a, e.c(normal)), _exp_half_big(e, a), mid(e.min_c(a, normal))))


def _log1p_parts(e, u, ulo=None):
    """(v, c) with log1p(u + ulo) = log(v) + c / v (`_log_core(e, v, c)`): v = 1 + u
    rounded, c its exact rounding error (plus ulo)."""
    v = e.add(e.c(1.0), u)
    c_small = e.sub(u, e.sub(v, e.c(1.0)))
    c_big = e.sub(e.c(1.0), e.sub(v, u))
    c = e.sel(e.cmp(">", u, e.c(1.0)), c_big, c_small)
    return v, (c if ulo is None else e.add(c, ulo))


# Beyond these, asinh(a) = acosh(a) = log(2a) to within far less than an ulp
# (the neglected 1 / (4 a^2) is below 2^-26 / 2^-58).
_ASINH_BIG = {False: 2.0 ** 12, True: 2.0 ** 28}


def _log_or_log1p(e, big, a, u, ulo=None):
    """log(a) + ln2 where `big`, else log1p(u + ulo): one log evaluation, its
    argument chosen per lane; inf and NaN of a (big lanes) or u (others) kept."""
    v, c = _log1p_parts(e, u, ulo)
    v = e.sel(big, a, v)
    c = e.sel(big, e.c(0.0), c)
    hi, lo = _LN2_SPLIT[e.f64]
    # + ln2 as two parts: ln2_lo first, inside log_core's tail (c / v)
    c = e.sel(big, e.mul(e.c(lo), a), c)
    r = _log_core(e, v, c, denormals=False)
    r = e.add(r, e.sel(big, e.c(hi), e.c(0.0)))
    return _log_specials(e, v, r)


def _asinh(e, x):
    # a = |x|: log1p(a + a^2 / (1 + sqrt(1 + a^2))) (relative to the result near
    # 0); beyond _ASINH_BIG log(a) + ln2.
    a = e.abs(x)
    big = e.cmp(">", a, e.c(_ASINH_BIG[e.f64]))
    a2 = e.mul(a, a)
    u, ul = e.two_sum(a, e.div(a2, e.add(e.c(1.0), e.sqrt(e.add(e.c(1.0), a2)))))
    res = e.copysign(_log_or_log1p(e, big, a, u, ul), x)
    # keep -0, and a denormal x itself where DAZ reads it as 0 (TF's asinh passes it)
    return e.sel(e.cmp("==", x, e.c(0.0)), x, res)


def _acosh(e, x):
    # t = x - 1 (exact for x >= 1): log1p(t + sqrt(2t + t^2)); beyond
    # _ASINH_BIG log(x) + ln2; NaN below 1.
    big = e.cmp(">", x, e.c(_ASINH_BIG[e.f64]))
    t = e.sub(x, e.c(1.0))
    # 2t + t^2 = y + yl and sqrt(y + yl) = s + sl, double-words by FMA; the
    # tails go into log1p's (near x = 1 acosh is ~sqrt(2t): every bit counts)
    t2 = e.add(t, t)
    y = e.fma(t, t, t2)
    yl = e.fma(t, t, e.sub(t2, y))
    s = e.sqrt(y)
    sl = e.div(e.add(e.fma(e.neg(s), s, y), yl), e.add(s, s))
    sl = e.sel(e.cmp("==", s, e.c(0.0)), e.c(0.0), sl)      # acosh(1) = 0, not 0/0
    u, ul = e.two_sum(t, s)
    res = _log_or_log1p(e, big, x, u, e.add(ul, sl))
    return e.sel(e.ucmp("<", x, e.c(1.0)), e.c(float("nan")), res)


_ATANH_SERIES = {False: 2.0 ** -4, True: 2.0 ** -8}


def _atanh(e, x):
    # a = |x|: log1p(2a / (1 - a)) / 2 with the quotient as a double-word
    # q + ql (1 - a = d + dl exactly; q's remainder by FMA), ql going into
    # log1p's tail, so only log's own error remains.  a = 1: inf; a > 1: NaN.
    # (No pass-through of a DAZ-read denormal: TF's atanh flushes it.)
    a = e.abs(x)
    t = e.add(a, a)
    d = e.sub(e.c(1.0), a)
    dl = e.sub(e.sub(e.c(1.0), d), a)
    q = e.div(t, d)
    rem = e.fma(e.neg(q), d, t)
    ql = e.div(e.sub(rem, e.mul(q, dl)), d)
    v, c = _log1p_parts(e, q, ql)
    r = e.mul(e.c(0.5), _log_core(e, v, c, denormals=False))
    # near 0 the odd series a + a^3 (1/3 + a^2/5 + a^4/7) (truncation a^8/9 below
    # 2^-32 / 2^-64 relative), within ~0.5 ulp where log1p's error would show
    a2 = e.mul(a, a)
    small = e.fma(e.mul(a, a2), e.poly(a2, [1.0 / 3, 1.0 / 5, 1.0 / 7]), a)
    r = e.sel(e.cmp("<", a, e.c(_ATANH_SERIES[e.f64])), small, r)
    r = e.sel(e.cmp("==", a, e.c(1.0)), e.c(float("inf")), r)
    r = e.sel(e.ucmp(">", a, e.c(1.0)), e.c(float("nan")), r)
    return e.copysign(r, x)


# ---------------------------------------------------------------------------
# inverse trigonometric functions: atan, asin, acos, atan2
#
# Evaluated in float64 for both types (float32: in float64 and rounded once,
# shorter polynomials).  atan: reduced to |q| <= tan(pi/8) by
# atan(a) = m pi/4 + atan(q), q = a (m = 0), (a - 1) / (a + 1) (m = 1) or
# -1 / a (m = 2), the quotient carried as a double-word q + ql; then
# m pi/4 (hi + lo) + q + (q^3 P(q^2) + ql (1 - q^2)) with the leading sum
# exact (two_sum).  asin / acos: |x| <= 1/2 a polynomial t + t^3 R(t^2);
# beyond, t = sqrt((1 - |x|) / 2) as a double-word and asin = pi/2 - 2 asin(t),
# acos = 2 asin(t) or pi - 2 asin(t).  atan2: atan of min / max of |y|, |x|
# (a double-word quotient, <= 1) and the octant's multiple of pi/4.

# atan(q) = q + q^3 P(q^2), |q| <= tan(pi/8): relative-error fits (weighted
# least squares at Chebyshev nodes, Lawson-iterated, in long double;
# coefficients rounded from the highest with a refit of the rest);
# approximation error 2^-35.4 (float32's, degree 5) / 2^-57.7 (degree 11).
_ATAN_P = {
    False: [-0.3333333249853392, 0.199999038546971, -0.14282006201994232, 0.11044671884198318,
            -0.08476156175056554, 0.0474380863453432],
    True: [-0.33333333333333326, 0.1999999999999789, -0.14285714285410067, 0.11111111089318605,
           -0.09090908179365141, 0.07692283437093665, -0.06666235535378721, 0.05877098342228379,
           -0.05218849648325836, 0.04505206853669371, -0.03351018109793554, 0.015229072575244432],
}
# asin(t) = t + t^3 R(t^2), |t| <= 1/2, fitted the same way: 2^-35.8 / 2^-58.7.
_ASIN_R = {
    False: [0.16666667180675582, 0.07499948862278102, 0.04465998217227052, 0.030112395402543585,
            0.02460556113122546, 0.007506758901576853, 0.034649705043290784],
    True: [0.16666666666666763, 0.07499999999970378, 0.04464285717494568, 0.030381942694036664,
           0.02237221532924855, 0.017351606484083373, 0.013980881359828265, 0.011398448694179445,
           0.010782705592847573, 0.0036975603153696847, 0.021728213837275488, -0.021027651966042126,
           0.032646142645184444],
}
_TAN_PI_8 = 0.41421356237309503     # tan(pi/8) = sqrt(2) - 1
_TAN_3PI_8 = 2.414213562373095      # tan(3 pi/8) = sqrt(2) + 1
# m pi/4 for m = 0..4 as float64 hi + lo
_QUARTER_PI = [_split(m * _PI / 4, np.float64, 2) for m in range(5)]


def _in_f64(e, x):
    """(float64 emitter, x in float64): float32's inverse trig runs in float64."""
    if e.f64:
        return e, x
    d = e.as_f64()
    return d, e.b.fpext(x, d.ty)


def _quarter_pi(d, m):
    """m pi/4 as (hi, lo) for a float m in 0..4."""
    hi, lo = d.c(0.0), d.c(0.0)
    for k in range(1, 5):
        is_k = d.cmp("==", m, d.c(float(k)))
        hi = d.sel(is_k, d.c(_QUARTER_PI[k][0]), hi)
        lo = d.sel(is_k, d.c(_QUARTER_PI[k][1]), lo)
    return hi, lo


def _atan_reduce(d, a, al=None, unbounded=True, tails=True):
    """a + al >= 0 (or NaN; al a tiny tail): (m, q, ql) with atan(a + al) =
    m pi/4 + atan(q + ql), |q| <= tan(pi/8), ql q's double-word tail.
    unbounded=False: a <= 1 (no -1 / a branch).  tails=False: ql = 0 (float32's
    evaluation in float64 has 29 bits to spare; the tail costs a division)."""
    one = d.c(1.0)
    al = d.c(0.0) if al is None else al
    mid = d.cmp(">", a, d.c(_TAN_PI_8))
    n, nl = d.two_sum(a, d.c(-1.0))
    s, sl = d.two_sum(a, one)
    num = d.sel(mid, n, a)
    num_l = d.sel(mid, d.add(nl, al), al)
    den = d.sel(mid, s, one)
    den_l = d.sel(mid, d.add(sl, al), d.c(0.0))
    m = d.sel(mid, one, d.c(0.0))
    if unbounded:
        big = d.cmp(">", a, d.c(_TAN_3PI_8))
        num = d.sel(big, d.c(-1.0), num)
        num_l = d.sel(big, d.c(0.0), num_l)
        den = d.sel(big, a, den)
        den_l = d.sel(big, al, den_l)
        m = d.sel(big, d.c(2.0), m)
    q = d.div(num, den)
    if not tails:
        return m, q, d.c(0.0)
    # (num + num_l) / (den + den_l) - q, to first order; the remainder is exact by FMA
    ql = d.div(d.sub(d.add(d.fma(d.neg(q), den, num), num_l), d.mul(q, den_l)), den)
    ql = d.sel(d.isnan(ql), d.c(0.0), ql)      # den = inf (q = 0) and NaN lanes
    return m, q, ql


def _atan_finish(d, f64, m, k_neg, q, ql):
    """m pi/4 + k atan(q + ql), k = -1 where k_neg (an i1) else 1, |q| <= tan(pi/8);
    f64: the result's type (float32's shorter polynomial otherwise)."""
    z = d.mul(q, q)
    p = d.mul(d.mul(q, z), d.poly(z, _ATAN_P[f64]))
    s = d.add(p, d.fma(d.neg(ql), z, ql))           # + ql / (1 + q^2), to first order
    qk = d.sel(k_neg, d.neg(q), q) if k_neg is not None else q
    sk = d.sel(k_neg, d.neg(s), s) if k_neg is not None else s
    hi, lo = _quarter_pi(d, m)
    h, l = d.two_sum(hi, qk)
    return d.add(h, d.add(l, d.add(sk, lo)))


def _finish_in(e, d, r):
    return r if d is e else e.b.fptrunc(r, e.ty)


def _atan(e, x):
    d, xd = _in_f64(e, x)
    m, q, ql = _atan_reduce(d, d.abs(xd), tails=e.f64)
    r = _finish_in(e, d, _atan_finish(d, e.f64, m, None, q, ql))
    res = e.copysign(r, x)
    # -0, and (float32) a denormal x itself where DAZ reads it as 0, as TF's float32
    # kernel; float64 then gives a zero (q = x / 1 is 0), as TF's float64 kernel
    return e.sel(e.cmp("==", x, e.c(0.0)), x, res) if not e.f64 else res


def _asin_parts(d, a, f64):
    """For a = |x| (or NaN): (big, t, u) with asin(a) = t + u for a <= 1/2 and
    asin(sqrt((1 - a) / 2)) = t + u beyond (big); u = t^3 R(t^2) + the tail of
    t's square root, scaled by asin's derivative to first order."""
    big = d.cmp(">", a, d.c(0.5))
    w = d.mul(d.sub(d.c(1.0), d.min_c(a, 1.0)), d.c(0.5))     # exact for a in [1/2, 1]
    s = d.sqrt(w)
    t = d.sel(big, s, a)
    z = d.mul(t, t)
    p = d.mul(d.mul(t, z), d.poly(z, _ASIN_R[f64]))
    if not f64:
        return big, t, p       # (float32 in float64: no tail needed, nor its division)
    sl = d.div(d.fma(d.neg(s), s, w), d.add(s, s))
    sl = d.sel(d.cmp("==", s, d.c(0.0)), d.c(0.0), sl)
    tl = d.sel(big, sl, d.c(0.0))
    u = d.add(p, d.fma(d.mul(tl, z), d.c(0.5), tl))
    return big, t, u


def _k_sum(d, base, k, t, u):
    """base (hi, lo) + k (t + u) for k in {+-1, +-2} (k t exact), the leading sum by two_sum."""
    h, l = d.two_sum(base[0], d.mul(k, t))
    return d.add(h, d.add(l, d.fma(k, u, base[1])))


def _sel_pair(d, c, p, q):
    return d.sel(c, p[0], q[0]), d.sel(c, p[1], q[1])


def _asin(e, x):
    d, xd = _in_f64(e, x)
    a = d.abs(xd)
    big, t, u = _asin_parts(d, a, e.f64)
    # a <= 1/2: 0 + (t + u); beyond: pi/2 - 2 (t + u)
    base = _sel_pair(d, big, (d.c(_QUARTER_PI[2][0]), d.c(_QUARTER_PI[2][1])), (d.c(0.0), d.c(0.0)))
    k = d.sel(big, d.c(-2.0), d.c(1.0))
    r = _k_sum(d, base, k, t, u)
    r = d.sel(d.ucmp(">", a, d.c(1.0)), d.c(float("nan")), r)
    res = e.copysign(_finish_in(e, d, r), x)
    # -0, and a denormal x itself where DAZ reads it as 0 (TF's asin passes it)
    return e.sel(e.cmp("==", x, e.c(0.0)), x, res)


def _acos(e, x):
    d, xd = _in_f64(e, x)
    a = d.abs(xd)
    neg = d.cmp("<", xd, d.c(0.0))
    big, t, u = _asin_parts(d, a, e.f64)
    zero, pi2, pi = (d.c(0.0), d.c(0.0)), [d.c(v) for v in _QUARTER_PI[2]], [d.c(v) for v in _QUARTER_PI[4]]
    # |x| <= 1/2: pi/2 -+ (t + u); x > 1/2: 2 (t + u); x < -1/2: pi - 2 (t + u)
    base = _sel_pair(d, big, _sel_pair(d, neg, pi, zero), pi2)
    k = d.sel(big, d.sel(neg, d.c(-2.0), d.c(2.0)), d.sel(neg, d.c(1.0), d.c(-1.0)))
    r = _k_sum(d, base, k, t, u)
    r = d.sel(d.ucmp(">", a, d.c(1.0)), d.c(float("nan")), r)
    return _finish_in(e, d, r)


def _atan2(e, y, x):
    d, yd = _in_f64(e, y)
    xd = _in_f64(e, x)[1]
    ax, ay = d.abs(xd), d.abs(yd)
    inf = d.c(float("inf"))
    swap = d.cmp(">", ay, ax)
    num = d.sel(swap, ax, ay)
    den = d.sel(swap, ay, ax)
    if e.f64:
        # scaled up exactly (num <= den), so that a denormal num becomes normal and the
        # quotient's remainder below is exact (it was not: 2.6 ulp at atan2(-9.4e-309,
        # 2.1e-14)); a larger den makes that remainder's error negligible after / den.
        # (Below 2^900 after scaling: the SSE2 baseline's emulated FMA splits its operands.)
        scale = d.sel(d.cmp("<", den, d.c(2.0 ** 300)), d.c(2.0 ** 600), d.c(1.0))
        num, den = d.mul(num, scale), d.mul(den, scale)
    q0 = d.div(num, den)
    q0 = d.sel(d.cmp("==", num, d.c(0.0)), d.c(0.0), q0)                  # 0 / 0 (and 0 / NaN: NaN below)
    both_inf = d.and_(d.cmp("==", ax, inf), d.cmp("==", ay, inf))
    q0 = d.sel(both_inf, d.c(1.0), q0)                                    # +-pi/4, +-3pi/4
    if e.f64:
        ql0 = d.div(d.fma(d.neg(q0), den, num), den)
        ql0 = d.sel(d.isnan(ql0), d.c(0.0), ql0)
    else:
        ql0 = d.c(0.0)
    m, q, ql = _atan_reduce(d, q0, ql0, unbounded=False, tails=e.f64)
    # the octant: |y| > |x| gives pi/2 - atan, x < 0 (-0 too) pi - that
    xneg = d.signbit(xd)
    two, four = d.c(2.0), d.c(4.0)
    m = d.sel(swap, d.sel(xneg, d.add(two, m), d.sub(two, m)), d.sel(xneg, d.sub(four, m), m))
    k_neg = d.b.xor(swap, xneg)
    r = d.copysign(_atan_finish(d, e.f64, m, k_neg, q, ql), yd)
    r = d.sel(d.or_(d.isnan(xd), d.isnan(yd)), d.c(float("nan")), r)
    return _finish_in(e, d, r)


# ---------------------------------------------------------------------------
# sin / cos / tan

_PIO2_SPLIT = {False: _split(_PI / 2, np.float32, 3), True: _split(_PI / 2, np.float64, 3)}

# |x| up to which Cody-Waite reduction meets the documented ulp bounds.
_TRIG_CW_MAX = {False: 2.0 ** 19, True: 2.0 ** 45}


def _two_over_pi_chunks(count):
    """The first 26 * count bits of 2/pi's binary fraction as `count` 26-bit
    integers, most significant first: pi by Machin's formula in integers,
    with 64 guard bits."""
    nbits = 26 * count
    g = nbits + 64

    def atan_inv(k):   # atan(1/k) * 2**g
        total, power, n = 0, (1 << g) // k, 0
        while power:
            total += (-1) ** n * (power // (2 * n + 1))
            power //= k * k
            n += 1
        return total
    pi_g = 16 * atan_inv(5) - 4 * atan_inv(239)
    t = (1 << (nbits + 1 + g)) // pi_g         # floor(2/pi * 2**nbits)
    return [(t >> (nbits - 26 * (i + 1))) & ((1 << 26) - 1) for i in range(count)]


# The exact reduction (_trig_reduce_exact) multiplies x by the 2/pi chunks
# j0 .. j0 + count - 1 only: chunk j (bits 26j+1 .. 26j+26) times a part of x
# whose last bit has weight 2**lsb is a multiple of 4 -- drops out mod 4 --
# when lsb - 26j - 26 >= 2, so j0 = (lsb - 2) // 26 for the lowest part (lsb
# = E - 23 for float32, E - 52 for float64, E = x's exponent); `count` chunks
# then leave out less than 2**(52 - 26 count) (f32) / 2**(81 - 26 count)
# (f64) quadrants: 2**-104 / 2**-153.  (count, E offset, largest j0)
_TRIG_EXACT = {False: (6, 25, (127 - 25) // 26), True: (9, 54, (1023 - 54) // 26)}
_TWO_OVER_PI_CHUNKS = _two_over_pi_chunks(max(j + n for n, _, j in _TRIG_EXACT.values()))

# sin(r) = r + r^3 * S(r^2); cos(r) = 1 - r^2/2 + r^4 * C(r^2), |r| <= pi/4
_SIN_S = {
    False: [-1.6666654611e-1, 8.3321608736e-3, -1.9515295891e-4],  # Cephes
    True: [-1.66666666666666324348e-01, 8.33333333332248946124e-03,
           -1.98412698298579493134e-04, 2.75573137070700676789e-06,
           -2.50507602534068634195e-08, 1.58969099521155010221e-10],  # fdlibm
}
_COS_C = {
    False: [4.166664568298827e-2, -1.388731625493765e-3, 2.443315711809948e-5],
    True: [4.16666666666666019037e-02, -1.38888888888741095749e-03,
           2.48015872894767294178e-05, -2.75573143513906633035e-07,
           2.08757232129817482790e-09, -1.13596475577881948265e-11],
}


def _trig_big(e, x):
    """Where x is past Cody-Waite's range and needs the exact reduction (not inf or NaN)."""
    ax = e.abs(x)
    return e.and_(e.cmp(">", ax, e.c(_TRIG_CW_MAX[e.f64])), e.cmp("!=", ax, e.c(np.inf)))


def _trig_reduce(e, x):
    """x = q*pi/2 + (r + rl) for a vector x; returns r, rl and q mod 4 (a
    float in 0..3).

    Cody-Waite up to _TRIG_CW_MAX, the exact reduction beyond, branched to
    only when some lane needs it; the Cody-Waite result is kept in every lane
    that does not, so a value's bits never depend on its neighbours (and the
    common range pays one compare and movemask)."""
    big = _trig_big(e, x)

    def both():
        cw = _trig_reduce_cw(e, x)
        exact = _call_trig_reduce_exact(e, x)
        return tuple(e.sel(big, v, w) for w, v in zip(cw, exact))
    return e.if_all(e.not_(big), lambda: _trig_reduce_cw(e, x), both)


# The exact reduction is one internal function of the module per type, on
# <_EXACT_LANES x T>, called from rare branches only (noinline, cold): its IR
# is large, and inline at a float32 kernel's <32 x float> run it was 4 zmm
# wide, 2-3x the cold compile time of a sin kernel; inline in every scalar
# loop (epilogues included) it was compiled once more per loop, the larger
# part of a float64 sin kernel's compile.  Scalars reach it through
# _trig_large_scalar_function.
_EXACT_LANES = 8


def _call_trig_reduce_exact(e, x, mask=None):
    """_trig_reduce_exact(e, x) for a vector x through the module's function: x split into
    (or padded with zeros to) pieces of _EXACT_LANES lanes.  Lanes are
    independent, so the bits are those of the inline reduction.  mask (<C x
    i1>): only pieces with a selected lane are reduced, the rest are zeros."""
    b, L = e.b, _EXACT_LANES
    fn = _trig_reduce_exact_function(e)
    i32 = ir.IntType(32)

    def shuffle(u, v, mask):
        return b.shuffle_vector(u, v, ir.Constant(ir.VectorType(i32, len(mask)), mask))
    C = e.count
    zeros = ir.Constant(e.ty, None)
    calls = []
    for s in range(0, max(C, L), L):
        lanes = [s + i if s + i < C else C for i in range(L)]
        piece = shuffle(x, zeros, lanes)
        if mask is None:
            calls.append(b.call(fn, [piece]))
            continue
        bits = ir.IntType(L)
        any_lane = b.icmp_unsigned("!=", b.bitcast(shuffle(mask, ir.Constant(mask.type, None), lanes), bits),
                                   ir.Constant(bits, 0))
        before = b.block
        with b.if_then(any_lane):
            called = b.call(fn, [piece])
        res = b.phi(called.type)
        res.add_incoming(called, called.parent)
        res.add_incoming(ir.Constant(called.type, None), before)
        calls.append(res)
    out = []
    for k in range(3):
        parts = [b.extract_value(c, k) for c in calls]
        while len(parts) > 1:   # C / L is a power of two: concatenate pairwise
            n = 2 * parts[0].type.count
            parts = [shuffle(u, v, list(range(n))) for u, v in zip(parts[::2], parts[1::2])]
        out.append(parts[0] if C == L else shuffle(parts[0], parts[0], list(range(C))))
    return tuple(out)


def _trig_reduce_exact_function(e):
    """The module's {r, rl, q} = reduce(<_EXACT_LANES x T> x) for e's type
    and target (fma / round instructions or their emulation)."""
    mod = e.b.module
    name = "jitgrad.vm.trig_reduce_exact.%s%s%s" % (
        "f64" if e.f64 else "f32", "" if e.has_fma else ".nofma", "" if e.has_round else ".noround")
    fn = mod.globals.get(name)
    if fn is not None:
        return fn
    vty = ir.VectorType(ir.DoubleType() if e.f64 else ir.FloatType(), _EXACT_LANES)
    sty = ir.LiteralStructType([vty] * 3)
    fn = ir.Function(mod, ir.FunctionType(sty, [vty]), name=name)
    fn.linkage = "internal"
    for attr in ("noinline", "cold", "nounwind"):
        fn.attributes.add(attr)
    fb = ir.IRBuilder(fn.append_basic_block("entry"))
    res = ir.Constant(sty, None)
    for k, v in enumerate(_trig_reduce_exact(_Em(fb, vty, e.has_fma, e.has_round), fn.args[0])):
        res = fb.insert_value(res, v, k)
    fb.ret(res)
    return fn


def _trig_reduce_cw(e, x):
    p1, p2, p3 = _PIO2_SPLIT[e.f64]
    q = e.rint(e.mul(x, e.c(float(2 / _PI))))
    # With FMA, x - q*p1 is exact (the result fits in the format), so each
    # part of pi/2 can carry the type's full precision.  The second step is
    # done exactly (two_prod + two_sum) and the rest kept as a tail rl: the
    # two roundings of a plain 3-step reduction cost ~1 ulp of r.
    # |r| may exceed pi/4 a little when x*2/pi rounds across a half-integer.
    r1 = e.fma(e.neg(q), e.c(p1), x)
    th, tl = e.two_prod(q, e.c(p2))
    rh, err = e.two_sum(r1, e.neg(th))
    rl = e.sub(err, e.fma(q, e.c(p3), tl))
    r, rl = e.fast_two_sum(rh, rl)
    return r, rl, _mod4(e, q)


def _mod4(e, v):
    """v - 4 floor(v / 4) for an integral v: in 0..3, exact."""
    return e.sub(v, e.mul(e.c(4.0), e.floor(e.mul(v, e.c(0.25)))))


def _rem4(e, v):
    """v - 4 rint(v / 4): in [-2, 2] and exact for any finite v (v's own low
    bits; floor's [0, 4) would round 4 + v for a tiny negative v)."""
    return e.sub(v, e.mul(e.c(4.0), e.rint(e.mul(v, e.c(0.25)))))


def _trig_reduce_exact(e, x):
    """_trig_reduce for any finite x (Payne-Hanek), in float64.

    x * 2/pi mod 4 = sum of (x_j * C_i rem 4) over 26-bit chunks C_i of 2/pi
    and parts x_j of x, each product exact (26 bits times a part of <= 27
    bits fits a double) and each "rem 4" exact; only the chunks that matter
    for x's exponent are used (_TRIG_EXACT), picked by select (float32) or
    loaded per lane from a table (float64),
    and x is scaled by 2**(-26 j0) (exact) so that nothing underflows.  The
    sum is kept reduced rem 4 as it goes, smallest terms first, exactly in
    `hi` (two_sum) with the low parts gathered in `lo`: for float32 that is
    good to ~2**-95 absolute, far below the smallest reduced argument any
    float32 has (~2**-30 quadrants).  float64 needs more: its closest
    approach to a multiple of pi/2 is ~2**-61 quadrants (x =
    6381956970095103 * 2**797) and the reduced argument needs 53 bits below
    that, so the low parts are gathered in a double-double (lo + lo2)."""
    d = e.as_f64()
    b = e.b
    xd = x if e.f64 else b.fpext(x, d.ty)
    count, offset, j0_max = _TRIG_EXACT[e.f64]
    # j0 = clamp((E - offset) // 26, 0, j0_max), E the unbiased exponent; the
    # clamp keeps every lane's loads inside the table (lanes this result is
    # not used for included: small, inf, NaN)
    biased = b.and_(b.lshr(d.to_int(xd), d.ci(52)), d.ci(0x7FF))
    lowest = 1023 + offset
    j0 = b.udiv(b.sub(b.select(b.icmp_unsigned("<", biased, d.ci(lowest)), d.ci(lowest), biased),
                      d.ci(lowest)), d.ci(26))
    j0 = b.select(b.icmp_unsigned(">", j0, d.ci(j0_max)), d.ci(j0_max), j0)
    # x * 2**(-26 j0): exact (|x| >= 2**(26 j0 + offset) wherever it is used)
    xs = d.mul(xd, d.to_float(b.shl(b.sub(d.ci(1023), b.mul(j0, d.ci(26))), d.ci(52))))
    if e.f64:   # a 27-bit head and a 26-bit tail, so the products stay exact
        head = d.to_float(b.and_(d.to_int(xs), d.ci(~((1 << 26) - 1))))
        parts = [head, d.sub(xs, head)]
    else:
        parts = [xs]
    chunks = _select_chunks(d, j0, j0_max, count) if j0_max < 8 else _load_chunks(d, j0, count)
    hi = lo = lo2 = d.c(0.0)
    for k in reversed(range(count)):
        piece = d.mul(chunks[k], d.c(2.0 ** (-26 * (k + 1))))    # C_(j0+k) * 2**(26 j0)
        for part in parts:
            hi, err = d.two_sum(hi, _rem4(d, d.mul(part, piece)))
            if e.f64:   # a third word: see the docstring
                lo, err = d.two_sum(lo, err)
                lo2 = d.add(lo2, err)
            else:
                lo = d.add(lo, err)
            hi = _rem4(d, hi)
    q = d.rint(hi)
    f, fl = d.two_sum(d.sub(hi, q), lo)
    if e.f64:
        fl = d.add(fl, lo2)
    p1, p2 = _PIO2_SPLIT[True][:2]
    r, rl = d.two_prod(f, d.c(p1))
    rl = d.add(rl, d.fma(f, d.c(p2), d.mul(fl, d.c(p1))))
    r, rl = d.fast_two_sum(r, rl)
    qm = _mod4(d, q)
    if e.f64:
        return r, rl, qm
    r32 = e.b.fptrunc(r, e.ty)
    rl32 = e.b.fptrunc(d.add(d.sub(r, e.b.fpext(r32, d.ty)), rl), e.ty)
    return r32, rl32, e.b.fptrunc(qm, e.ty)


def _select_chunks(d, j0, j0_max, count):
    """Chunks j0 + k (k < count) of 2/pi as float64 values of d's type, by
    select among the j0_max + 1 candidates: fewer instructions (and less
    compile time) than a load per lane when j0 takes few values (float32)."""
    chunks = []
    for k in range(count):
        v = d.c(float(_TWO_OVER_PI_CHUNKS[k]))
        for j in range(1, j0_max + 1):
            v = d.b.select(d.b.icmp_unsigned("==", j0, d.ci(j)), d.c(float(_TWO_OVER_PI_CHUNKS[j + k])), v)
        chunks.append(v)
    return chunks


def _load_chunks(d, j0, count):
    """Chunks j0 + k (k < count) of 2/pi from a constant table in the module,
    as float64 vectors of d's type (the exact reduction is emitted for vectors
    only): one masked gather per chunk (vgatherqpd; the SSE2 baseline's loads
    are scalarised by LLVM).  A load per lane was three instructions per lane
    to optimise and emit (extract, load, insert), 2/3 of the float64 function's
    compile time."""
    b = d.b
    i64 = ir.IntType(64)
    table = b.module.globals.get("jitgrad.vm.two_over_pi")
    if table is None:
        ty = ir.ArrayType(ir.DoubleType(), len(_TWO_OVER_PI_CHUNKS))
        table = ir.GlobalVariable(b.module, ty, name="jitgrad.vm.two_over_pi")
        table.global_constant = True
        table.linkage = "private"
        table.initializer = ir.Constant(ty, [float(c) for c in _TWO_OVER_PI_CHUNKS])
    n = d.count
    gather_name = "llvm.masked.gather.v%df64.v%dp0" % (n, n)
    ptrs_ty = ir.VectorType(ir.DoubleType().as_pointer(), n)
    mask_ty = ir.VectorType(ir.IntType(1), n)
    gather = b.module.globals.get(gather_name) or ir.Function(
        b.module, ir.FunctionType(d.ty, [ptrs_ty, ir.IntType(32), mask_ty, d.ty]), name=gather_name)
    # addresses as integers: llvmlite's gep takes no vector of indices
    base = b.ptrtoint(table, i64)
    base = b.shuffle_vector(b.insert_element(ir.Constant(d.ity, None), base, ir.Constant(ir.IntType(32), 0)),
                            ir.Constant(d.ity, None), ir.Constant(ir.VectorType(ir.IntType(32), n), [0] * n))
    addr = b.add(base, b.mul(j0, d.ci(8)))
    everywhere = ir.Constant(mask_ty, [1] * n)
    return [b.call(gather, [b.inttoptr(b.add(addr, d.ci(8 * k)), ptrs_ty), ir.Constant(ir.IntType(32), 8),
                            everywhere, ir.Constant(d.ty, None)])
            for k in range(count)]


def _sincos_poly(e, r, rl):
    """sin and cos of r + rl (|rl| <= ulp(r))."""
    z = e.mul(r, r)
    hz = e.mul(e.c(0.5), z)
    # sin(r + rl) ~= sin r + rl * (1 - r^2/2)
    s = e.add(r, e.fma(e.mul(z, r), e.poly(z, _SIN_S[e.f64]), e.fma(e.neg(hz), rl, rl)))
    # cos(r + rl) ~= cos r - rl * r; 1 - z/2 loses bits when z/2 is near
    # 1/4, recover them (fdlibm kernel_cos)
    w = e.sub(e.c(1.0), hz)
    corr = e.fma(e.neg(r), rl, e.sub(e.sub(e.c(1.0), w), hz))
    c = e.add(w, e.fma(e.mul(z, z), e.poly(z, _COS_C[e.f64]), corr))
    return s, c


def _sin_cos_finish(e, x, r, rl, qm, cos):
    """sin x (or cos x) from its reduction x = q*pi/2 + (r + rl), qm = q mod 4."""
    if cos:  # cos x = sin(x + pi/2)
        qm = e.add(qm, e.c(1.0))
        qm = e.sel(e.cmp("==", qm, e.c(4.0)), e.c(0.0), qm)
    s, c = _sincos_poly(e, r, rl)
    qh = e.floor(e.mul(qm, e.c(0.5)))
    odd = e.cmp("!=", qm, e.add(qh, qh))
    res = e.sel(odd, c, s)
    res = e.sel(e.cmp("==", qh, e.c(1.0)), e.neg(res), res)
    return res if cos else e.sel(e.cmp("==", x, e.c(0.0)), x, res)  # sin(-0)


def _tan_finish(e, x, r, rl, qm):
    s, c = _sincos_poly(e, r, rl)
    qh = e.floor(e.mul(qm, e.c(0.5)))
    odd = e.cmp("!=", qm, e.add(qh, qh))
    res = e.div(e.sel(odd, e.neg(c), s), e.sel(odd, s, c))
    return e.sel(e.cmp("==", x, e.c(0.0)), x, res)  # tan(-0) = -0


_TRIG_FINISH = {
    "sin": lambda e, x, r, rl, qm: _sin_cos_finish(e, x, r, rl, qm, False),
    "cos": lambda e, x, r, rl, qm: _sin_cos_finish(e, x, r, rl, qm, True),
    "tan": _tan_finish,
}


def _trig(e, x, name):
    """sin / cos / tan (name) of x.  Vectors: _trig_reduce, then the
    polynomial.  Scalars: Cody-Waite and the polynomial inline, and for |x|
    past its range (rare) a cold call of _trig_large_scalar_function, which
    LLVM's loop vectoriser can widen to its masked vector variant."""
    finish = _TRIG_FINISH[name]
    if e.count:
        return finish(e, x, *_trig_reduce(e, x))
    fn = _trig_large_scalar_function(e, name)
    return e.if_all(e.not_(_trig_big(e, x)), lambda: finish(e, x, *_trig_reduce_cw(e, x)),
                    lambda: e.b.call(fn, [x]), scalar_branch=True)


def _trig_large_name(e, name):
    return "jitgrad.vm.%s_large.%s%s%s" % (
        name, "f64" if e.f64 else "f32", "" if e.has_fma else ".nofma", "" if e.has_round else ".noround")


def _trig_large_scalar_function(e, name):
    """The module's T f(T x): sin / cos / tan of an x past Cody-Waite's range,
    as lane 0 of _trig_large_vector_function's call (one copy of the exact
    reduction per module and type, whoever calls it).  Its
    "vector-function-abi-variant" attribute names that masked vector function,
    so LLVM's loop vectoriser widens a scalar loop of sin / cos / tan: the
    scalar form's rare branch becomes one call per vector, which returns at
    once when no lane needs it (before, the branch held the reduction inline:
    float32 loops were if-converted into the reduction on every element,
    float64 ones -- its table loads -- left scalar)."""
    mod = e.b.module
    fname = _trig_large_name(e, name)
    fn = mod.globals.get(fname)
    if fn is not None:
        return fn
    vfn = _trig_large_vector_function(e, name)
    lanes = vfn.args[0].type.count
    fn = ir.Function(mod, ir.FunctionType(e.ty, [e.ty]), name=fname)
    fn.linkage = "internal"
    for attr in ("noinline", "cold", "nounwind"):
        fn.attributes.add(attr)
    # a string attribute, which llvmlite's attribute set does not know: added as its IR text
    set.add(fn.attributes, '"vector-function-abi-variant"="_ZGV_LLVM_M%dv_%s(%s)"' % (lanes, fname, vfn.name))
    fb = ir.IRBuilder(fn.append_basic_block("entry"))
    vty, mty = (a.type for a in vfn.args)
    i32 = ir.IntType(32)
    xv = fb.insert_element(ir.Constant(vty, None), fn.args[0], ir.Constant(i32, 0))
    lane0 = ir.Constant(mty, [ir.Constant(ir.IntType(1), int(i == 0)) for i in range(lanes)])
    fb.ret(fb.extract_element(fb.call(vfn, [xv, lane0]), ir.Constant(i32, 0)))
    return fn


def _trig_large_vector_function(e, name):
    """The module's <L x T> f(<L x T> x, <L x i1> mask): sin / cos / tan of
    the lanes of x that mask selects, each past Cody-Waite's range (L = e.lanes,
    the target's lanes for T: the width the loop vectoriser picks).  Returns at
    once if no lane is selected; otherwise reduces through
    _trig_reduce_exact_function (only the pieces of _EXACT_LANES lanes with a
    selected lane) and finishes as the inline forms do: a lane's bits are
    those of the vector form's exact branch."""
    mod = e.b.module
    lanes = e.lanes or _EXACT_LANES
    fname = "%s.v%dm" % (_trig_large_name(e, name), lanes)
    fn = mod.globals.get(fname)
    if fn is not None:
        return fn
    vty = ir.VectorType(e.ty, lanes)
    mty = ir.VectorType(ir.IntType(1), lanes)
    fn = ir.Function(mod, ir.FunctionType(vty, [vty, mty]), name=fname)
    fn.linkage = "internal"
    for attr in ("noinline", "nounwind"):
        fn.attributes.add(attr)
    x, mask = fn.args
    fb = ir.IRBuilder(fn.append_basic_block("entry"))
    work = fn.append_basic_block("work")
    none = fn.append_basic_block("none")
    bits = ir.IntType(lanes)
    fb.cbranch(fb.icmp_unsigned("!=", fb.bitcast(mask, bits), ir.Constant(bits, 0)), work, none)
    fb.position_at_end(none)
    fb.ret(ir.Constant(vty, None))
    fb.position_at_end(work)
    ev = _Em(fb, vty, e.has_fma, e.has_round)
    fb.ret(_TRIG_FINISH[name](ev, x, *_call_trig_reduce_exact(ev, x, mask)))
    _compiler_used(mod, fn)
    return fn


def _compiler_used(mod, fn):
    """Lists fn in the module's llvm.compiler.used.  A vector variant has no
    call until the loop vectoriser makes one: without this use GlobalDCE drops
    it first, and interprocedural passes specialise it to the scalar
    function's one call (a constant mask, then no mask parameter: LLVM
    asserts when it widens a call to a variant of the wrong signature)."""
    ptr = ir.IntType(8).as_pointer()
    gv = mod.globals.get("llvm.compiler.used")
    entries = list(gv.initializer.constant) if gv is not None else []
    entries.append(fn.bitcast(ptr))
    ty = ir.ArrayType(ptr, len(entries))
    if gv is None:
        gv = ir.GlobalVariable(mod, ty, "llvm.compiler.used")
        gv.linkage = "appending"
        gv.section = "llvm.metadata"
    gv.value_type, gv.type = ty, ty.as_pointer()   # grown in place: nothing else refers to it
    gv.initializer = ir.Constant(ty, entries)


# ---------------------------------------------------------------------------
# pow

def _log_dd(e, x):
    """log(x) as a double-double (hi, lo) for finite x > 0; f64 only."""
    m, k = _log_reduce(e, x, True)
    f = e.sub(m, e.c(1.0))  # exact
    dh, dl = e.two_sum(m, e.c(1.0))
    # s = f / (m + 1) as a double-double; log m = 2 atanh s
    sh = e.div(f, dh)
    rem = e.sub(e.fma(e.neg(sh), dh, f), e.mul(sh, dl))
    sl = e.div(rem, dh)
    # s^2 and s^3 as double-doubles
    zh, zl = e.two_prod(sh, sh)
    zl = e.fma(e.add(sh, sh), sl, zl)
    th, tl = e.two_prod(zh, sh)
    tl = e.fma(zh, sl, e.fma(zl, sh, tl))
    # 2 atanh s = 2s + s^3 (2/3 + z Q(z)); 2/3 as a double-double so the
    # dominant correction term carries no 2^-54 coefficient error.
    # Taylor through s^25: the next term is < 2^-69 relative at |s| = 0.1716.
    qp = e.poly(zh, [2.0 / k for k in range(5, 26, 2)])
    q = e.fma(zh, qp, e.mul(zl, qp))
    c23h, c23l = _split(Fraction(2, 3), np.float64, 2)
    ch, cl = e.two_prod(th, e.c(c23h))
    cl = e.fma(th, e.add(e.c(c23l), q), e.fma(tl, e.c(c23h), cl))
    # sum: k*ln2 + 2s + s^3 * (...)
    ln2h, ln2l = _LOG_LN2[True]  # k * ln2h is exact
    ah = e.mul(k, e.c(ln2h))
    s2h = e.add(sh, sh)
    hi, lo = e.two_sum(ah, s2h)
    hi, lo2 = e.two_sum(hi, ch)
    lo = e.add(e.add(lo, lo2), e.add(e.add(cl, e.add(sl, sl)), e.mul(k, e.c(ln2l))))
    return e.fast_two_sum(hi, lo)


def _pow(e, x, y):
    ax = e.abs(x)
    inf = float("inf")
    if e.f64:
        lh, ll = _log_dd(e, ax)
        ph, pl = e.two_prod(y, lh)
        pl = e.fma(y, ll, pl)
        lo, hi = _EXP_LIM[True]
        out = e.or_(e.cmp(">", ph, e.c(hi)), e.cmp("<", ph, e.c(lo)))
        ph = e.max_c(e.min_c(ph, hi), lo)
        pl = e.sel(out, e.c(0.0), pl)
        z = _exp_core(e, ph, pl)
    else:
        # float32: evaluate in float64.  |y log x| <= 104 here, so ~2^-35
        # relative accuracy suffices and the series are shorter than the
        # float64 functions': log via 2 atanh(s), |s| <= 0.1716, through
        # s^13; exp through r^9.  With t clamped to float32's exp range 2^n
        # is a normal double, and the final fptrunc rounds once (denormal
        # and overflowing results included).
        d = e.as_f64()
        dty = d.ty
        lg = [2.0 / k for k in range(3, 14, 2)]
        t = d.mul(e.b.fpext(y, dty),
                  _log_core(d, e.b.fpext(ax, dty), denormals=False, lg=lg))
        lo, hi = _EXP_LIM[False]
        n, r1, nlo, nm = _reduce_ln2(d, d.max_c(d.min_c(t, hi), lo))
        r = d.sub(r1, nlo)
        p = d.add(d.fma(d.mul(r, r), d.poly(r, _EXP_P[True][:8]), r), d.c(1.0))
        z = e.b.fptrunc(d.mul(p, d.pow2_biased(nm)), e.ty)

    y_int = e.cmp("==", e.floor(y), y)
    hy = e.mul(y, e.c(0.5))
    y_odd = e.and_(y_int, e.cmp("!=", e.floor(hy), hy))
    ay = e.abs(y)
    # Infinite/zero operands: the result is 0 or inf by magnitude.
    spec = e.or_(e.or_(e.cmp("==", ax, e.c(0.0)), e.cmp("==", ax, e.c(inf))),
                 e.cmp("==", ay, e.c(inf)))
    big = e.b.icmp_unsigned("==", e.cmp(">", ax, e.c(1.0)), e.cmp(">", y, e.c(0.0)))
    z = e.sel(spec, e.sel(big, e.c(inf), e.c(0.0)), z)
    z = e.sel(e.and_(e.signbit(x), y_odd), e.neg(z), z)
    neg_nonint = e.and_(e.and_(e.cmp("<", x, e.c(0.0)), e.not_(y_int)),
                        e.cmp("!=", ax, e.c(inf)))
    nan = e.or_(e.or_(neg_nonint, e.isnan(x)), e.isnan(y))
    z = e.sel(nan, e.c(float("nan")), z)
    one = e.or_(e.or_(e.cmp("==", y, e.c(0.0)), e.cmp("==", x, e.c(1.0))),
                e.and_(e.cmp("==", x, e.c(-1.0)), e.cmp("==", ay, e.c(inf))))
    return e.sel(one, e.c(1.0), z)


# ---------------------------------------------------------------------------
# erf.  Coefficients: weighted least-squares (Lawson-iterated towards
# minimax) fits at Chebyshev nodes in 50-digit arithmetic, rounded to the type.

# erf(x) = x + x * A(x^2) for |x| < 1 (relative-error fit; splitting off
# the leading 1 keeps the rounding of 2/sqrt(pi) and of A out of the result)
_ERF_A = {
    False: [
        0.12837916612625122, -0.3761262595653534, 0.1128358542919159,
        -0.026853810995817184, 0.0051883249543607235, -0.0008010168094187975,
        7.85377633292228e-05],
    True: [
        0.1283791670955126, -0.3761263890318375, 0.11283791670954857,
        -0.026866170645072886, 0.00522397762478078, -0.0008548326978737574,
        0.00012055331036737971, -1.4925593503128811e-05, 1.6460972758245717e-06,
        -1.6350024613791197e-07, 1.4657875834956052e-08, -1.1365650794605868e-09,
        5.945236616992329e-11],
}
# erfc(x) = exp(-x^2) * B(x - x0) for x0 <= x < sat, fitted for absolute
# error of erfc (what erf = 1 - erfc needs); (x0, coefficients) per piece.
_ERF_B = {
    False: [(1.0, [
        0.42758357524871826, -0.2732110619544983, 0.1543503701686859,
        -0.0790523886680603, 0.03687267750501633, -0.015107224695384502,
        0.004909273236989975, -0.0010563540272414684, 0.0001067461707862094])],
    True: [(1.0, [
        0.427583576155807, -0.27321201478389007, 0.15437156137122174,
        -0.07922696891971064, 0.0375722958613658, -0.01666186560989369,
        0.006970119990440541, -0.002768965319635753, 0.0010499526684689116,
        -0.0003812132522507192, 0.00013236672003008788, -4.343292860025466e-05,
        1.3039339486066845e-05, -3.3699064274335558e-06, 6.816135612862083e-07,
        -9.293403977799374e-08, 6.244572895551858e-09]),
           (2.5, [
        0.2108063640611436, -0.07434734678979446, 0.02493799708664043,
        -0.008001569381618237, 0.0024670368084882804, -0.0007335908738833171,
        0.00021101946907932986, -5.886761460599405e-05, 1.5958247077634616e-05,
        -4.207351313324794e-06, 1.0754107979169822e-06, -2.626680180068886e-07,
        5.9088755223629746e-08, -1.1441433532807722e-08, 1.721741240006328e-09,
        -1.7256092242913174e-10, 8.398277233858944e-12])],
}
_ERF_SAT = {False: 4.0, True: 6.0}  # erf rounds to +-1 beyond


def _erf(e, x):
    a = e.abs(x)
    z = e.mul(a, a)
    small = e.fma(a, e.poly(z, _ERF_A[e.f64]), a)
    pieces = _ERF_B[e.f64]
    x0, coeffs = pieces[0][0], [e.c(k) for k in pieces[0][1]]
    x0 = e.c(x0)
    for start, cs in pieces[1:]:
        # Piecewise polynomial without branches: pick each lane's coefficients
        hi = e.cmp(">=", a, e.c(start))
        x0 = e.sel(hi, e.c(start), x0)
        coeffs = [e.sel(hi, e.c(k), c) for k, c in zip(cs, coeffs)]
    R = e.poly(e.sub(a, x0), coeffs)
    # exp(-a^2) with a^2 rounded: the rounding moves erfc by < 0.2 ulp of erf.
    ex = _exp_core(e, e.max_c(e.neg(z), _EXP_LIM[e.f64][0]))
    big = e.fma(e.neg(ex), R, e.c(1.0))
    res = e.sel(e.cmp("<", a, e.c(1.0)), small, big)
    res = e.sel(e.cmp(">", a, e.c(_ERF_SAT[e.f64])), e.c(1.0), res)
    return e.copysign(res, x)


# erfc.  Evaluated in float64 for both types (float32: one final rounding).
# erfc(x) = exp(-x^2) * R(x - x0) for 0.5 <= x < 8, R piecewise polynomial
# (x0, coefficients) fitted for relative error by weighted least squares at
# Chebyshev nodes in 40-digit arithmetic, coefficients rounded to float64
# from the lowest degree with a refit of the rest; for x >= 8,
# erfc(x) = exp(-x^2) / x * G(1/x^2), G fitted the same way on [0, 1/64]
# (G(0) = 1/sqrt(pi): the asymptotic series, fitted rather than truncated).
_ERFC_R = [
    (0.5, [
        0.6156903441929259, -0.512688822902593, 0.35934593274213994, -0.22201057104028174,
        0.12417032402204947, -0.06397016910499091, 0.030728461966395698, -0.013887709213486287,
        0.005947424916641247, -0.0024291111589324448, 0.0009541339057341399,
        -0.00036418440187528797, 0.00013322409067863226, -4.14028170601856e-05,
        7.580098723863281e-06]),
    (1.0, [
        0.427583576155807, -0.2732120147838974, 0.15437156137183078, -0.07922696893890226,
        0.03757229617193639, -0.016661868596072167, 0.006970138537075892, -0.002769043611566441,
        0.0010501841833214412, -0.00038169968609419366, 0.00013309189956440428,
        -4.41833703429458e-05, 1.354673648260849e-05, -3.5573712194121077e-06,
        6.880684780065692e-07, -7.04563143126727e-08]),
    (1.75, [
        0.2849722347374364, -0.13097634551448376, 0.05576363008701297, -0.022259995239599626,
        0.008404319182626973, -0.003020974433668341, 0.0010392032141769692,
        -0.0003435277649957382, 0.00010948783900548098, -3.371483268745864e-05,
        1.0016038438759051e-05, -2.8352556494087693e-06, 7.359734234475774e-07,
        -1.6116727710999652e-07, 2.551985281893347e-08, -2.104543680868181e-09]),
    (2.75, [
        0.1936620962790687, -0.06323763756063629, 0.01975859298737434, -0.005934337897849157,
        0.0017195818931797998, -0.0004821951301794783, 0.0001311819685704962,
        -3.4699019136404546e-05, 8.9407764371878e-06, -2.2477948902564123e-06,
        5.515696162053297e-07, -1.31186712931675e-07, 2.9310660244461184e-08,
        -5.666186520131684e-09, 8.057207271173318e-10, -5.999811817126255e-11]),
    (4.0, [
        0.13699945762506138, -0.03238350609502071, 0.007465433244952686, -0.001681182076413762,
        0.0003703524662340615, -7.990886569500846e-05, 1.6905596685712827e-05,
        -3.5102323762670924e-06, 7.157952694881759e-07, -1.4324931183276825e-07,
        2.79705249354381e-08, -5.2195679738156666e-09, 8.852771603070629e-10,
        -1.2425335215957325e-10, 1.232631569587388e-11, -6.242072235580375e-13]),
    (5.75, [
        0.09669877816971392, -0.016343218143802574, 0.0027252738428506277,
        -0.0004485956982777687, 7.292428880735719e-05, -1.1712414374058118e-05,
        1.8592989922941153e-06, -2.91832982515284e-07, 4.529881120742029e-08,
        -6.948437491437427e-09, 1.0479747439650808e-09, -1.5251636223470297e-10,
        2.0401294079081316e-11, -2.281896555516002e-12, 1.8168793760276326e-13,
        -7.409444583279023e-15]),
]
# G(s), s = 1/x^2 in [0, 1/64]; fitted in v = 64 s: the coefficients
# below are G's in s divided by 64**k (so multiplied back, exactly).
_ERFC_G = [c * 64.0 ** k for k, c in enumerate([
    0.5641895835477563, -0.00440773112146605, 0.0001033061981348898,
    -4.0353980162674896e-06, 2.2068305748127524e-07, -1.5503192174177292e-08,
    1.2890263917682281e-09, -3.901343427783651e-11, -1.2573484858914377e-10,
    1.368352224760056e-10, -8.691563165090849e-11, 3.163336792938809e-11,
    -5.057805071391785e-12])]
_ERFC_ZERO = 27.25  # erfc rounds to 0 in float64 beyond (float32: ~10.05)


def _erfc_core(d, x):
    """erfc(x) in float64 (d is a float64 _Em)."""
    a = d.abs(x)
    # |x| < 0.5: 1 - x - x A(x^2), 1 - x carried as a double-word.
    hi, lo = d.two_sum(d.c(1.0), d.neg(x))
    small = d.add(hi, d.fma(d.neg(x), d.poly(d.mul(x, x), _ERF_A[True]), lo))
    # |x| >= 0.5: erfc(|x|) = exp(-a^2) R with a^2 = z + zlo exactly, and
    # exp(-a^2) = (ph + pl) 2^n and R = rh + rl kept as double-words so that
    # only the final product rounds at full weight.
    ac = d.min_c(a, _ERFC_ZERO)    # also keeps inf out of fma(a, a, -z)
    z = d.mul(ac, ac)
    zlo = d.fma(ac, ac, d.neg(z))
    n, r1, nlo, _ = _reduce_ln2(d, d.neg(z))
    rh, rl = d.fast_two_sum(r1, d.sub(d.neg(zlo), nlo))
    q = d.fma(d.mul(rh, rh), d.poly(rh, _EXP_P[True]), d.fma(rl, rh, rl))
    sh, sl = d.fast_two_sum(rh, q)
    ph, pl = d.fast_two_sum(d.c(1.0), sh)
    pl = d.add(pl, sl)
    # R: piecewise polynomial, c0 + u P1(u) with the sum kept exact
    x0, coeffs = d.c(_ERFC_R[0][0]), [d.c(k) for k in _ERFC_R[0][1]]
    for start, cs in _ERFC_R[1:]:
        up = d.cmp(">=", ac, d.c(start))
        x0 = d.sel(up, d.c(start), x0)
        cs = cs + [0.0] * (len(coeffs) - len(cs))
        coeffs = coeffs + [d.c(0.0)] * (len(cs) - len(coeffs))
        coeffs = [d.sel(up, d.c(k), c) for k, c in zip(cs, coeffs)]
    u = d.sub(ac, x0)
    t = d.mul(u, d.poly(u, coeffs[1:]))
    ph_, pl_ = d.fast_two_sum(coeffs[0], t)
    # x >= 8: G(1/x^2) / x with the division's remainder kept
    r = d.div(d.c(1.0), ac)
    s2 = d.mul(r, r)
    gh, gl = d.fast_two_sum(d.c(_ERFC_G[0]), d.mul(s2, d.poly(s2, _ERFC_G[1:])))
    gq = d.div(gh, ac)
    gql = d.div(d.add(d.fma(d.neg(gq), ac, gh), gl), ac)
    asym = d.cmp(">=", ac, d.c(8.0))
    Rh = d.sel(asym, gq, ph_)
    Rl = d.sel(asym, gql, pl_)
    tail = d.scale(d.fma(ph, Rh, d.fma(ph, Rl, d.mul(pl, Rh))), n)
    big = d.sel(d.signbit(x), d.sub(d.c(2.0), tail), tail)
    return d.sel(d.cmp("<", a, d.c(0.5)), small, big)


def _erfc(e, x):
    if e.f64:
        return _erfc_core(e, x)
    d = e.as_f64()
    return e.b.fptrunc(_erfc_core(d, e.b.fpext(x, d.ty)), e.ty)


# ---------------------------------------------------------------------------
# sqrt, rsqrt

def _sqrt(e, x):
    return e.sqrt(x)


def _rsqrt(e, x):
    return e.div(e.c(1.0), e.sqrt(x))


# ---------------------------------------------------------------------------

_UNARY = {
    "exp": _exp, "expm1": _expm1, "log": _log, "log1p": _log1p,
    "tanh": _tanh, "sigmoid": _sigmoid, "softplus": _softplus,
    "sinh": _sinh, "cosh": _cosh, "asinh": _asinh, "acosh": _acosh, "atanh": _atanh,
    "atan": _atan, "asin": _asin, "acos": _acos,
    "sin": lambda e, x: _trig(e, x, "sin"),
    "cos": lambda e, x: _trig(e, x, "cos"),
    "tan": lambda e, x: _trig(e, x, "tan"), "sqrt": _sqrt, "rsqrt": _rsqrt, "erf": _erf,
    "erfc": _erfc,
}
_BINARY = {"pow": _pow, "atan2": _atan2}
FUNCTIONS = tuple(sorted(_UNARY)) + tuple(sorted(_BINARY))


ROUNDING = ("floor", "ceil", "rint", "trunc")


def emit_rounding(builder, name, x, native):
    """floor / ceil / rint (half to even) / trunc of x (float, double or a vector of either).
    native: the target has SSE4.1's round instruction (codegen/target.py
    `Target.has_round`), which llvm.floor etc. become; without it they would be a
    libm call per lane, so the rounding is done inline with the 2**mant trick
    (same values as numpy: -0.0, halves, |x| >= 2**mant, inf and NaN)."""
    if name not in ROUNDING:
        raise KeyError("vecmath: unknown rounding %r" % name)
    return getattr(_Em(builder, x.type, has_round=native), name)(x)


def emit(builder, name, args, fma=True, vector_bits=None):
    """Emit `name`(*args) at the builder's position; returns the result value.

    args: list of ir.Values, all of one type: float, double, or a vector of
    either.  Intrinsics are declared in builder.module as needed.  fma: whether
    the target has an FMA instruction (codegen/target.py `Target.has_fma`);
    without one, fused multiply-adds are emulated with exact products instead of
    becoming libm calls.  vector_bits: the target's vector width
    (`Target.vector_bits`): scalar sin / cos / tan offer LLVM's loop
    vectoriser a masked vector variant of their rare call at that many lanes
    (default _EXACT_LANES)."""
    args = list(args)
    table = _BINARY if name in _BINARY else _UNARY
    if name not in table:
        raise KeyError("vecmath: unknown function %r" % name)
    arity = 2 if table is _BINARY else 1
    if len(args) != arity:
        raise TypeError("vecmath.%s takes %d argument(s)" % (name, arity))
    ty = args[0].type
    if any(a.type != ty for a in args):
        raise TypeError("vecmath.%s: arguments must share one type" % name)
    e = _Em(builder, ty, fma)
    if vector_bits:
        e.lanes = vector_bits // e.bits
    return table[name](e, *args)
