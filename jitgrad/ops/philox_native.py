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


_LANES = 8      # blocks per vector iteration of the uniform loops (AVX-512: one zmm of i64 products)


def _signed32(v):
    v %= 1 << 32
    return v - (1 << 32) if v >= 1 << 31 else v


def _types(lanes):
    """(i32, i64, a constant of a type) for scalars (lanes None) or vectors of ``lanes``."""
    if lanes is None:
        return "i32", "i64", lambda ty, v: str(v)
    return (f"<{lanes} x i32>", f"<{lanes} x i64>",
            lambda ty, v: "<" + ", ".join([f"{ty} {v}"] * lanes) + ">")


def _splat(lanes, ty, name, scalar):
    """IR making %name a vector of ``lanes`` copies of the scalar ``scalar`` of type ``ty``."""
    return (f"\n  %{name}_1 = insertelement <{lanes} x {ty}> undef, {ty} {scalar}, i32 0"
            f"\n  %{name} = shufflevector <{lanes} x {ty}> %{name}_1, <{lanes} x {ty}> undef, "
            f"<{lanes} x i32> zeroinitializer")


def _block(lanes=None):
    """Philox-4x32-10 of the counters (%lo, %hi) under the key words %k0, %k1, for one block or
    a vector of ``lanes``; -> (IR, the names of the four output words)."""
    i32, i64, const = _types(lanes)
    ir = [f"""
  %c0_0 = trunc {i64} %lo to {i32}
  %lo_hi = lshr {i64} %lo, {const("i64", 32)}
  %c1_0 = trunc {i64} %lo_hi to {i32}
  %c2_0 = trunc {i64} %hi to {i32}
  %hi_hi = lshr {i64} %hi, {const("i64", 32)}
  %c3_0 = trunc {i64} %hi_hi to {i32}"""]
    c = ["%c0_0", "%c1_0", "%c2_0", "%c3_0"]
    for r in range(10):
        s = f"_{r + 1}"
        ir.append(f"""
  %kr0{s} = add i32 %k0, {_signed32(r * _W0)}
  %kr1{s} = add i32 %k1, {_signed32(r * _W1)}""")
        k = [f"%kr0{s}", f"%kr1{s}"]
        if lanes is not None:
            ir.append(_splat(lanes, "i32", f"kv0{s}", k[0]) + _splat(lanes, "i32", f"kv1{s}", k[1]))
            k = [f"%kv0{s}", f"%kv1{s}"]
        ir.append(f"""
  %a{s} = zext {i32} {c[0]} to {i64}
  %b{s} = zext {i32} {c[2]} to {i64}
  %p0{s} = mul {i64} %a{s}, {const("i64", _M0)}
  %p1{s} = mul {i64} %b{s}, {const("i64", _M1)}
  %h0w{s} = lshr {i64} %p0{s}, {const("i64", 32)}
  %h1w{s} = lshr {i64} %p1{s}, {const("i64", 32)}
  %h0{s} = trunc {i64} %h0w{s} to {i32}
  %h1{s} = trunc {i64} %h1w{s} to {i32}
  %l0{s} = trunc {i64} %p0{s} to {i32}
  %l1{s} = trunc {i64} %p1{s} to {i32}
  %x0{s} = xor {i32} %h1{s}, {c[1]}
  %c0{s} = xor {i32} %x0{s}, {k[0]}
  %x2{s} = xor {i32} %h0{s}, {c[3]}
  %c2{s} = xor {i32} %x2{s}, {k[1]}""")
        c = [f"%c0{s}", f"%l1{s}", f"%c2{s}", f"%l0{s}"]
    return "".join(ir), c


def _loop_ir(name, args, entry, loop):
    """``void name(key, ctr_lo, ctr_hi, args, n)``: a loop over %i in [0, %n) of ``loop``,
    after ``entry``; %k0, %k1 are the key's words."""
    return f"""
define void @{name}(i64 %key, i64 %ctr_lo, i64 %ctr_hi, {args}, i64 %n) {{
entry:
  %k0 = trunc i64 %key to i32
  %key_hi = lshr i64 %key, 32
  %k1 = trunc i64 %key_hi to i32{entry}
  %empty = icmp sle i64 %n, 0
  br i1 %empty, label %done, label %loop
loop:
  %i = phi i64 [0, %entry], [%next, %loop]{loop}
  %next = add i64 %i, 1
  %more = icmp slt i64 %next, %n
  br i1 %more, label %loop, label %done
done:
  ret void
}}
"""


def _blocks_ir():
    """Block i: Philox of counter + offsets[i] (a 128-bit add), its words at out[4i:4i + 4]."""
    ir, w = _block()
    stores = "".join(f"""
  %o{j} = add i64 %base, {j}
  %po{j} = getelementptr i32, i32* %out, i64 %o{j}
  store i32 {w[j]}, i32* %po{j}""" for j in range(4))
    return _loop_ir("jitgrad_philox_blocks", "i64* %offsets, i32* %out", "", f"""
  %poff = getelementptr i64, i64* %offsets, i64 %i
  %off = load i64, i64* %poff
  %lo = add i64 %ctr_lo, %off
  %carry = icmp ult i64 %lo, %off
  %carry64 = zext i1 %carry to i64
  %hi = add i64 %ctr_hi, %carry64{ir}
  %base = mul i64 %i, 4{stores}""")


def _interleave(ty, parts, name):
    """IR making %name the ``_LANES``-vectors ``parts`` interleaved (element k * P + j is
    parts[j][k]: each block's values together, blocks in order); -> (IR, its type)."""
    ir, level, size = [], list(parts), _LANES
    while len(level) > 1:
        nxt = []
        for a in range(0, len(level), 2):
            nm = f"%{name}cat{size}_{a}"
            mask = "<" + ", ".join(f"i32 {q}" for q in range(2 * size)) + ">"
            ir.append(f"\n  {nm} = shufflevector <{size} x {ty}> {level[a]}, <{size} x {ty}> {level[a + 1]}, "
                      f"<{2 * size} x i32> {mask}")
            nxt.append(nm)
        level, size = nxt, 2 * size
    total = len(parts) * _LANES
    order = "<" + ", ".join(f"i32 {j * _LANES + k}" for k in range(_LANES) for j in range(len(parts))) + ">"
    ir.append(f"\n  %{name} = shufflevector <{total} x {ty}> {level[0]}, <{total} x {ty}> undef, "
              f"<{total} x i32> {order}")
    return "".join(ir), f"<{total} x {ty}>"


def _uniform_ir():
    """Blocks 0, 1, ... as float32 (four a block) and float64 (two) uniforms in [0, 1):
    philox.py's Uint32ToFloat / Uint64ToDouble, fused so a draw is one pass, written for
    ``_LANES`` blocks at once (the 32 x 32 -> 64 multiplies become vpmuludq); ``%n``
    counts groups of ``_LANES`` blocks."""
    v32, v64, const = _types(_LANES)
    vf, vd = f"<{_LANES} x float>", f"<{_LANES} x double>"
    ir, w = _block(_LANES)
    lanes = "<" + ", ".join(f"i64 {j}" for j in range(_LANES)) + ">"
    counters = _splat(_LANES, "i64", "lov", "%ctr_lo") + _splat(_LANES, "i64", "hiv", "%ctr_hi")
    first = f"""
  %first = mul i64 %i, {_LANES}{_splat(_LANES, "i64", "fv", "%first")}
  %off = add {v64} %fv, {lanes}
  %lo = add {v64} %lov, %off
  %carry = icmp ult {v64} %lo, %off
  %carry64 = zext <{_LANES} x i1> %carry to {v64}
  %hi = add {v64} %hiv, %carry64{ir}"""
    f32 = "".join(f"""
  %m{j} = and {v32} {w[j]}, {const("i32", 8388607)}
  %e{j} = or {v32} %m{j}, {const("i32", 1065353216)}
  %f{j} = bitcast {v32} %e{j} to {vf}
  %u{j} = fsub {vf} %f{j}, {const("float", "1.0")}""" for j in range(4))
    f64 = "".join(f"""
  %hm{j} = and {v32} {w[2 * j]}, {const("i32", 1048575)}
  %hz{j} = zext {v32} %hm{j} to {v64}
  %hs{j} = shl {v64} %hz{j}, {const("i64", 32)}
  %lz{j} = zext {v32} {w[2 * j + 1]} to {v64}
  %mn{j} = or {v64} %hs{j}, %lz{j}
  %e{j} = or {v64} %mn{j}, {const("i64", 4607182418800017408)}
  %f{j} = bitcast {v64} %e{j} to {vd}
  %u{j} = fsub {vd} %f{j}, {const("double", "1.0")}""" for j in range(2))

    def function(name, ty, convert, parts):
        ileave, out_ty = _interleave(ty, parts, "vals")
        return _loop_ir(name, f"{ty}* %out", counters, f"""{first}{convert}{ileave}
  %base = mul i64 %first, {len(parts)}
  %pout = getelementptr {ty}, {ty}* %out, i64 %base
  %vout = bitcast {ty}* %pout to {out_ty}*
  store {out_ty} %vals, {out_ty}* %vout, align 4""")
    return (function("jitgrad_philox_uniform_f32", "float", f32, [f"%u{j}" for j in range(4)])
            + function("jitgrad_philox_uniform_f64", "double", f64, ["%u0", "%u1"]))


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
