"""Philox-4x32-10 blocks as a native loop: the numpy rounds of ops/philox.py cost about
0.5 us per call (a million float32 uniforms: ~150 ms), this loop a few ns.

    blocks(key, counter, offsets) -> (len(offsets), 4) uint32, or None where the loop
    cannot be built (philox.py then computes them with numpy: the same bits, tests check).

A few lines of LLVM IR (the ten rounds unrolled), compiled for the SSE2 baseline and kept
in the disk cache as the libm loops are (ops/libm_loops.py)."""
import ctypes

import numpy as np

from ..native_once import Once

_M0, _M1 = 0xD2511F53, 0xCD9E8D57
_W0, _W1 = 0x9E3779B9, 0xBB67AE85


def _ir():
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
    stores = "".join(f"""
  %o{j} = add i64 %base, {j}
  %po{j} = getelementptr i32, i32* %out, i64 %o{j}
  store i32 {c[j]}, i32* %po{j}""" for j in range(4))
    return f"""
define void @jitgrad_philox_blocks(i64 %key, i64 %ctr_lo, i64 %ctr_hi, i64* %offsets, i32* %out, i64 %n) {{
entry:
  %empty = icmp sle i64 %n, 0
  br i1 %empty, label %done, label %loop
loop:
  %i = phi i64 [0, %entry], [%next, %loop]
  %poff = getelementptr i64, i64* %offsets, i64 %i
  %off = load i64, i64* %poff
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
{''.join(rounds)}
  %base = mul i64 %i, 4
{stores}
  %next = add i64 %i, 1
  %more = icmp slt i64 %next, %n
  br i1 %more, label %loop, label %done
done:
  ret void
}}
"""


def _build_blocks():
    """(code, ctypes function) of the compiled Philox loop."""
    from ..cache.native import load as load_native
    from ..codegen.target import baseline_object_code
    code = load_native(baseline_object_code("philox-blocks", _ir()))
    u64, vp = ctypes.c_uint64, ctypes.c_void_p
    return code, ctypes.CFUNCTYPE(None, u64, u64, u64, vp, vp, ctypes.c_int64)(code.address("jitgrad_philox_blocks"))


# None where it cannot be built: numpy's rounds
_function = Once(_build_blocks, "philox blocks").get


def blocks(key, counter, offsets):
    fn = _function()
    if fn is None:
        return None
    offsets = np.ascontiguousarray(offsets, dtype=np.uint64)
    out = np.empty((offsets.size, 4), dtype=np.uint32)
    mask = (1 << 64) - 1
    fn[1](key & mask, counter & mask, (counter >> 64) & mask, offsets.ctypes.data, out.ctypes.data, offsets.size)
    return out
