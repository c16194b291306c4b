"""Whether a float32/float64 ndarray holds a denormal, in one native pass: the
flush-denormals mode's test before ``denormals.flush`` (an op's inputs and outputs,
where numpy needs three calls, ~5x a small eager op, to find usually nothing).

    has = get()        # None where it cannot work: flush() then tests with numpy
    has[np.dtype(np.float32)](a)   # True: may hold one (numpy decides); False: holds none

The builtin (native_builtins.py) reads the ndarray's C struct (numpy's public
PyArrayObject_fields, ``OFFSETS``, checked against a live array when built) and is
given ``numpy.ndarray`` as ``self``: it refuses any other type (SystemError) before
reading a field, and scans only C-contiguous aligned arrays of its own dtype in native
byte order, of the size their shape gives. Anything else answers True ("maybe"), so the caller falls back to numpy.
A denormal is a word w with (w & ~sign) - 1 < (mantissa mask) unsigned: exponent 0,
not a zero.
"""
import ctypes

import numpy as np

from . import native_builtins, native_once

# byte offsets in PyArrayObject_fields (numpy 1.x and 2.x): data, nd, dimensions, descr, flags
OFFSETS = {"data": 16, "nd": 24, "dimensions": 32, "descr": 56, "flags": 64}
# ... and in PyArray_Descr (both): the byte order char, the type number. A builtin scans
# only arrays of its own dtype (NPY_FLOAT 11 / NPY_DOUBLE 12) in native byte order: the
# f64 scan of a float32[3] read 24 bytes of a 12-byte buffer.
DESCR_OFFSETS = {"byteorder": 26, "type_num": 28}
_TYPE_NUM = {"f32": 11, "f64": 12}
_NEED = 0x1 | 0x100     # NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED

_TEMPLATE = r"""
define i8* @jitgrad_has_denormal_{name}(i8* %self, i8* %arr) nounwind {{
entry:
  %typep = getelementptr i8, i8* %arr, i64 8
  %typepp = bitcast i8* %typep to i8**
  %type = load i8*, i8** %typepp
  %isarr = icmp eq i8* %type, %self
  br i1 %isarr, label %dtype, label %refuse
refuse:
  ret i8* null
dtype:
  %dsp = getelementptr i8, i8* %arr, i64 {descr}
  %dspp = bitcast i8* %dsp to i8**
  %descr = load i8*, i8** %dspp
  %tnp = getelementptr i8, i8* %descr, i64 {type_num}
  %tnpp = bitcast i8* %tnp to i32*
  %tn = load i32, i32* %tnpp
  %bop = getelementptr i8, i8* %descr, i64 {byteorder}
  %bo = load i8, i8* %bop
  %ownt = icmp eq i32 %tn, {tnum}
  %swapped = icmp eq i8 %bo, 62
  %notswapped = xor i1 %swapped, true
  %own = and i1 %ownt, %notswapped
  br i1 %own, label %flags, label %maybe
flags:
  %fp = getelementptr i8, i8* %arr, i64 {flags}
  %fpp = bitcast i8* %fp to i32*
  %f = load i32, i32* %fpp
  %need = and i32 %f, {need}
  %simple = icmp eq i32 %need, {need}
  br i1 %simple, label %shape, label %maybe
maybe:
  %m = call i8* @PyBool_FromLong(i64 1)
  ret i8* %m
shape:
  %ndp = getelementptr i8, i8* %arr, i64 {nd}
  %ndpp = bitcast i8* %ndp to i32*
  %nd32 = load i32, i32* %ndpp
  %nd = sext i32 %nd32 to i64
  %dp = getelementptr i8, i8* %arr, i64 {dimensions}
  %dpp = bitcast i8* %dp to i64**
  %dims = load i64*, i64** %dpp
  br label %dimloop
dimloop:
  %k = phi i64 [0, %shape], [%k1, %dimbody]
  %n = phi i64 [1, %shape], [%n1, %dimbody]
  %more = icmp slt i64 %k, %nd
  br i1 %more, label %dimbody, label %scan
dimbody:
  %dk = getelementptr i64, i64* %dims, i64 %k
  %d = load i64, i64* %dk
  %n1 = mul i64 %n, %d
  %k1 = add i64 %k, 1
  br label %dimloop
scan:
  %datap = getelementptr i8, i8* %arr, i64 {data}
  %datapp = bitcast i8* %datap to {ity}**
  %data = load {ity}*, {ity}** %datapp
  br label %loop
loop:
  %i = phi i64 [0, %scan], [%i1, %body]
  %acc = phi i1 [false, %scan], [%acc1, %body]
  %go = icmp slt i64 %i, %n
  br i1 %go, label %body, label %done
body:
  %wp = getelementptr {ity}, {ity}* %data, i64 %i
  %w = load {ity}, {ity}* %wp
  %mag = and {ity} %w, {abs_mask}
  %t = sub {ity} %mag, 1
  %den = icmp ult {ity} %t, {mant_mask}
  %acc1 = or i1 %acc, %den
  %i1 = add i64 %i, 1
  br label %loop
done:
  %r64 = zext i1 %acc to i64
  %r = call i8* @PyBool_FromLong(i64 %r64)
  ret i8* %r
}}
"""
IR = "declare i8* @PyBool_FromLong(i64)\n" + "".join(
    _TEMPLATE.format(name=name, ity=ity, abs_mask=abs_mask, mant_mask=mant_mask, need=_NEED, tnum=_TYPE_NUM[name],
                     **OFFSETS, **DESCR_OFFSETS)
    for name, ity, abs_mask, mant_mask in (("f32", "i32", 0x7FFFFFFF, 0x7FFFFF),
                                           ("f64", "i64", 0x7FFFFFFFFFFFFFFF, 0xFFFFFFFFFFFFF)))

def _layout_matches():
    """numpy's struct as OFFSETS says, read from a live 2-d array (else no native test)."""
    a = np.zeros((2, 3), np.float32)
    base = id(a)
    read = lambda off, ct: ct.from_address(base + off).value     # noqa: E731
    dims = read(OFFSETS["dimensions"], ctypes.c_void_p)
    return (read(OFFSETS["data"], ctypes.c_void_p) == a.ctypes.data and read(OFFSETS["nd"], ctypes.c_int32) == 2
            and (ctypes.c_int64 * 2).from_address(dims)[:] == [2, 3]
            and read(OFFSETS["flags"], ctypes.c_int32) & _NEED == _NEED
            and read(OFFSETS["descr"], ctypes.c_void_p) == id(a.dtype) and _descr_matches(a.dtype)
            and _descr_matches(np.dtype(np.float64)) and _descr_matches(np.dtype(np.float32).newbyteorder()))


def _descr_matches(dt):
    """PyArray_Descr as DESCR_OFFSETS says, read from the live ``dt`` ('>' where swapped)."""
    read = lambda off, ct: ct.from_address(id(dt) + off).value     # noqa: E731
    return (read(DESCR_OFFSETS["type_num"], ctypes.c_int32) == dt.num
            and read(DESCR_OFFSETS["byteorder"], ctypes.c_char) == dt.byteorder.encode())


def _build():
    if not _layout_matches():
        raise RuntimeError("numpy's PyArrayObject layout differs from OFFSETS")
    f32, f64 = native_builtins.build("denormal-scan-code", IR, [
        (f"jitgrad_has_denormal_{n}", native_builtins.METH_O,
         "True when the ndarray may hold a denormal (False: it holds none).", np.ndarray) for n in ("f32", "f64")])
    return {np.dtype(np.float32): f32, np.dtype(np.float64): f64}


_once = native_once.Once(_build, "flush-denormals: no native denormal scan; numpy tests")


def get():
    """``{dtype: has_denormal}`` for float32 / float64, or None where it cannot work."""
    return _once.get()
