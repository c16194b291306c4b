"""Philox-4x32-10 blocks as a native loop: the numpy rounds of ops/philox.py cost about
0.5 us per call (a million float32 uniforms: ~150 ms), this loop a few ns.

    blocks(key, counter, offsets) -> (len(offsets), 4) uint32, or None where the loop
    cannot be built (philox.py then computes them with numpy: the same bits, tests check).

A few lines of LLVM IR (the ten rounds unrolled), compiled for the SSE2 baseline and kept
in the disk cache as the libm loops are (ops/libm_loops.py). Uniform floats (what dropout
draws) have a fused loop of their own, written for 8 blocks at a time and compiled for this
host: ~1 ns an element where the blocks and numpy's bit tricks took ~20."""
import ctypes

import numpy as np

from ..native_once import Once

_M0, _M1 = 0xD2511F53, 0xCD9E8D57
_W0, _W1 = 0x9E3779B9, 0xBB67AE85


def _rounds():
    """The ten rounds from %c0_0..%c3_0 and %k0_0, %k1_0; -> (IR, names of the four words)."""
    rounds = []
    c = ["%c0_0", "%c1_0", "%c2_0", "%c3_0"]
    k = ["%k0_0", "%k1_0"]
    for r in range(10):
        s = f"_{r + 1}"
        rounds.append(f"""
  %a{s} = zext i32 {c[0]} to i64
  %b{s} = zext i32 {c[2]} to i64
  %p0{s} = mul i64 %a{s}, {_M0}
  %p1{s} = mul i64 %b{s}, {_M1}
  %h0w{s} = lshr i64 %p0{s}, 32
  %h1w{s} = lshr i64 %p1{s}, 32
  %h0{s} = trunc i64 %h0w{s} to i32
  %h1{s} = trunc i64 %h1w{s} to i32
  %l0{s} = trunc i64 %p0{s} to i32
  %l1{s} = trunc i64 %p1{s} to i32
  %x0{s} = xor i32 %h1{s}, {c[1]}
  %c0{s} = xor i32 %x0{s}, {k[0]}
  %x2{s} = xor i32 %h0{s}, {c[3]}
  %c2{s} = xor i32 %x2{s}, {k[1]}
  %k0{s} = add i32 {k[0]}, {_W0 - (1 << 32)}
  %k1{s} = add i32 {k[1]}, {_W1 - (1 << 32)}""")
        c = [f"%c0{s}", f"%l1{s}", f"%c2{s}", f"%l0{s}"]
        k = [f"%k0{s}", f"%k1{s}"]
    return "".join(rounds), c


def _loop(name, args, offset, body):
    """A loop over i in [0, %n): block i is Philox(key, counter + ``offset``), then ``body``
    (IR using %w0..%w3, the block's words, and %i)."""
    rounds, c = _rounds()
    words = "".join(f"\n  %w{j} = or i32 {c[j]}, 0" for j in range(4))
    return f"""
define void @{name}(i64 %key, i64 %ctr_lo, i64 %ctr_hi, {args}, i64 %n) {{
entry:
  %empty = icmp sle i64 %n, 0
  br i1 %empty, label %done, label %loop
loop:
  %i = phi i64 [0, %entry], [%next, %loop]{offset}
  %lo = add i64 %ctr_lo, %off
  %carry = icmp ult i64 %lo, %off
  %carry64 = zext i1 %carry to i64
  %hi = add i64 %ctr_hi, %carry64
  %c0_0 = trunc i64 %lo to i32
  %lo_hi = lshr i64 %lo, 32
  %c1_0 = trunc i64 %lo_hi to i32
  %c2_0 = trunc i64 %hi to i32
  %hi_hi = lshr i64 %hi, 32
  %c3_0 = trunc i64 %hi_hi to i32
  %k0_0 = trunc i64 %key to i32
  %key_hi = lshr i64 %key, 32
  %k1_0 = trunc i64 %key_hi to i32
{rounds}{words}
{body}
  %next = add i64 %i, 1
  %more = icmp slt i64 %next, %n
  br i1 %more, label %loop, label %done
done:
  ret void
}}
"""


def _blocks_ir():
    stores = "".join(f"""
  %o{j} = add i64 %base, {j}
  %po{j} = getelementptr i32, i32* %out, i64 %o{j}
  store i32 %w{j}, i32* %po{j}""" for j in range(4))
    return _loop("jitgrad_philox_blocks", "i64* %offsets, i32* %out", """
  %poff = getelementptr i64, i64* %offsets, i64 %i
  %off = load i64, i64* %poff""", "  %base = mul i64 %i, 4" + stores)


_LANES = 8      # blocks per vector iteration (AVX-512: one zmm of i64 products; AVX2: two ymm)


def _vec(ty):
    return f"<{_LANES} x {ty}>"


def _splat(ty, value):
    return "<" + ", ".join([f"{ty} {value}"] * _LANES) + ">"


def _uniform_ir():
    """Blocks 0, 1, ... as float32 (four a block) and float64 (two) uniforms in [0, 1):
    philox.py's Uint32ToFloat / Uint64ToDouble, fused so a draw is one pass, written for
    ``_LANES`` blocks at once (the 32 x 32 -> 64 multiplies become vpmuludq); ``%n``
    counts groups of ``_LANES`` blocks."""
    v32, v64 = _vec("i32"), _vec("i64")
    lanes = "<" + ", ".join(f"i64 {j}" for j in range(_LANES)) + ">"
    rounds = []
    c = ["%c0_0", "%c1_0", "%c2_0", "%c3_0"]
    for r in range(10):
        s_ = f"_{r + 1}"
        rounds.append(f"""
  %kr0{s_} = add i32 %k0, {(r * _W0) % (1 << 32) - (1 << 32) if (r * _W0) % (1 << 32) >= 1 << 31 else (r * _W0) % (1 << 32)}
  %kr1{s_} = add i32 %k1, {(r * _W1) % (1 << 32) - (1 << 32) if (r * _W1) % (1 << 32) >= 1 << 31 else (r * _W1) % (1 << 32)}
  %ki0{s_} = insertelement {v32} undef, i32 %kr0{s_}, i32 0
  %kv0{s_} = shufflevector {v32} %ki0{s_}, {v32} undef, {_vec("i32")} zeroinitializer
  %ki1{s_} = insertelement {v32} undef, i32 %kr1{s_}, i32 0
  %kv1{s_} = shufflevector {v32} %ki1{s_}, {v32} undef, {_vec("i32")} zeroinitializer
  %a{s_} = zext {v32} {c[0]} to {v64}
  %b{s_} = zext {v32} {c[2]} to {v64}
  %p0{s_} = mul {v64} %a{s_}, {_splat("i64", _M0)}
  %p1{s_} = mul {v64} %b{s_}, {_splat("i64", _M1)}
  %h0w{s_} = lshr {v64} %p0{s_}, {_splat("i64", 32)}
  %h1w{s_} = lshr {v64} %p1{s_}, {_splat("i64", 32)}
  %h0{s_} = trunc {v64} %h0w{s_} to {v32}
  %h1{s_} = trunc {v64} %h1w{s_} to {v32}
  %l0{s_} = trunc {v64} %p0{s_} to {v32}
  %l1{s_} = trunc {v64} %p1{s_} to {v32}
  %x0{s_} = xor {v32} %h1{s_}, {c[1]}
  %c0{s_} = xor {v32} %x0{s_}, %kv0{s_}
  %x2{s_} = xor {v32} %h0{s_}, {c[3]}
  %c2{s_} = xor {v32} %x2{s_}, %kv1{s_}""")
        c = [f"%c0{s_}", f"%l1{s_}", f"%c2{s_}", f"%l0{s_}"]

    def interleave(ty, parts, name):
        """out[k * P + j] = parts[j][k]: the words of each block together, blocks in order."""
        width = len(parts)
        cat = []
        level = list(parts)
        size = _LANES
        while len(level) > 1:
            nxt = []
            for a in range(0, len(level), 2):
                nm = f"%{name}cat{size}_{a}"
                mask = "<" + ", ".join(f"i32 {q}" for q in range(2 * size)) + ">"
                cat.append(f"\n  {nm} = shufflevector <{size} x {ty}> {level[a]}, <{size} x {ty}> {level[a + 1]}, "
                           f"<{2 * size} x i32> {mask}")
                nxt.append(nm)
            level, size = nxt, 2 * size
        order = "<" + ", ".join(f"i32 {j * _LANES + k}" for k in range(_LANES) for j in range(width)) + ">"
        total = width * _LANES
        cat.append(f"\n  %{name} = shufflevector <{total} x {ty}> {level[0]}, <{total} x {ty}> undef, "
                   f"<{total} x i32> {order}")
        return "".join(cat), f"<{total} x {ty}>"

    f32_parts = "".join(f"""
  %m{j} = and {v32} {c[j]}, {_splat("i32", 8388607)}
  %e{j} = or {v32} %m{j}, {_splat("i32", 1065353216)}
  %f{j} = bitcast {v32} %e{j} to {_vec("float")}
  %u{j} = fsub {_vec("float")} %f{j}, {_splat("float", "1.0")}""" for j in range(4))
    f32_ileave, f32_ty = interleave("float", [f"%u{j}" for j in range(4)], "out32")
    f64_parts = "".join(f"""
  %hm{j} = and {v32} {c[2 * j]}, {_splat("i32", 1048575)}
  %hz{j} = zext {v32} %hm{j} to {v64}
  %hs{j} = shl {v64} %hz{j}, {_splat("i64", 32)}
  %lz{j} = zext {v32} {c[2 * j + 1]} to {v64}
  %mn{j} = or {v64} %hs{j}, %lz{j}
  %e{j} = or {v64} %mn{j}, {_splat("i64", 4607182418800017408)}
  %f{j} = bitcast {v64} %e{j} to {_vec("double")}
  %u{j} = fsub {_vec("double")} %f{j}, {_splat("double", "1.0")}""" for j in range(2))
    f64_ileave, f64_ty = interleave("double", ["%u0", "%u1"], "out64")

    def function(name, ty, parts, ileave, out_ty, per_block):
        return f"""
define void @{name}(i64 %key, i64 %ctr_lo, i64 %ctr_hi, {ty}* %out, i64 %n) {{
entry:
  %k0 = trunc i64 %key to i32
  %key_hi = lshr i64 %key, 32
  %k1 = trunc i64 %key_hi to i32
  %li = insertelement {v64} undef, i64 %ctr_lo, i32 0
  %lov = shufflevector {v64} %li, {v64} undef, {_vec("i32")} zeroinitializer
  %hiv0 = insertelement {v64} undef, i64 %ctr_hi, i32 0
  %hiv = shufflevector {v64} %hiv0, {v64} undef, {_vec("i32")} zeroinitializer
  %empty = icmp sle i64 %n, 0
  br i1 %empty, label %done, label %loop
loop:
  %i = phi i64 [0, %entry], [%next, %loop]
  %first = mul i64 %i, {_LANES}
  %fi = insertelement {v64} undef, i64 %first, i32 0
  %fv = shufflevector {v64} %fi, {v64} undef, {_vec("i32")} zeroinitializer
  %off = add {v64} %fv, {lanes}
  %lo = add {v64} %lov, %off
  %carry = icmp ult {v64} %lo, %off
  %carry64 = zext {_vec("i1")} %carry to {v64}
  %hi = add {v64} %hiv, %carry64
  %c0_0 = trunc {v64} %lo to {v32}
  %lo_hi = lshr {v64} %lo, {_splat("i64", 32)}
  %c1_0 = trunc {v64} %lo_hi to {v32}
  %c2_0 = trunc {v64} %hi to {v32}
  %hi_hi = lshr {v64} %hi, {_splat("i64", 32)}
  %c3_0 = trunc {v64} %hi_hi to {v32}
{"".join(rounds)}
{parts}{ileave}
  %base = mul i64 %first, {per_block}
  %pout = getelementptr {ty}, {ty}* %out, i64 %base
  %vout = bitcast {ty}* %pout to {out_ty}*
  store {out_ty} %{"out32" if ty == "float" else "out64"}, {out_ty}* %vout, align 4
  %next = add i64 %i, 1
  %more = icmp slt i64 %next, %n
  br i1 %more, label %loop, label %done
done:
  ret void
}}
"""
    return (function("jitgrad_philox_uniform_f32", "float", f32_parts, f32_ileave, f32_ty, 4)
            + function("jitgrad_philox_uniform_f64", "double", f64_parts, f64_ileave, f64_ty, 2))


def _load(kind, text, target=None):
    """The loaded object code of IR ``text`` (from the disk cache when built before)."""
    from ..cache.native import load as load_native
    from ..codegen.target import baseline_object_code, get as host_target
    return load_native(baseline_object_code(kind, text, host_target() if target == "host" else None))


def _build_blocks():
    """(code, ctypes function) of the compiled Philox loop."""
    code = _load("philox-blocks", _blocks_ir())
    u64, vp = ctypes.c_uint64, ctypes.c_void_p
    return code, ctypes.CFUNCTYPE(None, u64, u64, u64, vp, vp, ctypes.c_int64)(code.address("jitgrad_philox_blocks"))


def _build_uniform():
    """(code, {dtype: ctypes function}) of the fused uniform loops, vectorised for this host
    (they run only here: Philox's 32 x 32 -> 64 multiplies vectorise as vpmuludq)."""
    code = _load("philox-uniform", _uniform_ir(), "host")
    u64, vp = ctypes.c_uint64, ctypes.c_void_p
    sig = ctypes.CFUNCTYPE(None, u64, u64, u64, vp, ctypes.c_int64)
    return code, {np.dtype(np.float32): sig(code.address("jitgrad_philox_uniform_f32")),
                  np.dtype(np.float64): sig(code.address("jitgrad_philox_uniform_f64"))}


# None where they cannot be built: numpy's rounds
_function = Once(_build_blocks, "philox blocks").get
_uniform_functions = Once(_build_uniform, "philox uniform").get


def uniform_blocks(key, counter, out):
    """Fill ``out`` (1-D float32 / float64) with the uniforms of blocks 0, 1, ... of
    (key, counter), as far as whole groups of ``_LANES`` blocks go (4 / 2 elements a
    block); -> how many elements it filled, None where the loop cannot be built."""
    fns = _uniform_functions()
    if fns is None:
        return None
    mask = (1 << 64) - 1
    per = 4 if out.dtype == np.float32 else 2
    groups = out.size // (per * _LANES)
    fns[1][out.dtype](key & mask, counter & mask, (counter >> 64) & mask, out.ctypes.data, groups)
    return groups * per * _LANES


def blocks(key, counter, offsets):
    fn = _function()
    if fn is None:
        return None
    offsets = np.ascontiguousarray(offsets, dtype=np.uint64)
    out = np.empty((offsets.size, 4), dtype=np.uint32)
    mask = (1 << 64) - 1
    fn[1](key & mask, counter & mask, (counter >> 64) & mask, offsets.ctypes.data, out.ctypes.data, offsets.size)
    return out
