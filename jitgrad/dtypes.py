"""jitgrad's dtypes, with TensorFlow's names and rules.

float32/float64/int32/int64/bool compile natively. The others are computed by
the numpy reference kernels (a compiled Session.run that touches one runs in
the interpreter, counted in cache_info()['fallbacks']):
  * float16 and bfloat16 are storage types: numpy (and ml_dtypes for bfloat16)
    compute each op in float32 and round the result, as TF's CPU kernels do.
    bfloat16 needs the optional ml_dtypes package (numpy has no bfloat16).
  * int8, int16, uint8, uint16, uint32, uint64: integer arithmetic.
  * complex64, complex128: constants, arithmetic, real/imag/abs/conj/complex;
    complex tensors are not differentiated (no gradient flows through them).
  * string: numpy object arrays of bytes, never compiled or differentiated.
"""
import importlib.util

import numpy as np

# Optional (numpy has no bfloat16 of its own), and imported on first use of bfloat16, not by
# `import jitgrad`: importing ml_dtypes takes about a second.
_HAVE_ML_DTYPES = importlib.util.find_spec("ml_dtypes") is not None


class DType:
    __slots__ = ("name", "np", "_enum", "_kind")

    def __init__(self, name, np_dtype, enum, kind=None):
        self.name = name
        self.np = np.dtype(np_dtype)
        self._enum = enum
        self._kind = kind or self.np.kind   # "f", "i", "u", "b", "c" (bfloat16's numpy kind is "V")

    @property
    def as_numpy_dtype(self):
        return self.np.type

    @property
    def base_dtype(self):
        return self

    @property
    def is_floating(self):
        return self._kind == "f"

    @property
    def is_integer(self):
        return self._kind in "iu"

    @property
    def is_unsigned(self):
        return self._kind == "u"

    @property
    def is_bool(self):
        return self._kind == "b"

    @property
    def is_complex(self):
        return self._kind == "c"

    @property
    def is_numpy_compatible(self):
        return True

    @property
    def is_string(self):
        return self._kind == "S"

    @property
    def real_dtype(self):
        return {"complex64": float32, "complex128": float64}.get(self.name, self)

    @property
    def size(self):
        return self.np.itemsize

    def _info(self):
        if self.is_bool or self.is_complex or self.is_string:
            raise TypeError(f"Cannot find minimum/maximum value of {self.name}.")
        if self.is_floating:
            if self._kind != self.np.kind:
                import ml_dtypes
                return ml_dtypes.finfo(self.np)
            return np.finfo(self.np)
        return np.iinfo(self.np)

    @property
    def min(self):
        return self._info().min

    @property
    def max(self):
        return self._info().max

    def __repr__(self):
        return f"tf.{self.name}"

    def __str__(self):
        return f"<dtype: '{self.name}'>"

    def __eq__(self, other):
        if other is None:
            return False
        try:
            return self is as_dtype(other)
        except TypeError:
            return False

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):
        return self._enum

    def __reduce__(self):
        return as_dtype, (self.name,)


float32 = DType("float32", np.float32, 1)
float64 = DType("float64", np.float64, 2)
int32 = DType("int32", np.int32, 3)
uint8 = DType("uint8", np.uint8, 4)
int16 = DType("int16", np.int16, 5)
int8 = DType("int8", np.int8, 6)
complex64 = DType("complex64", np.complex64, 8)
int64 = DType("int64", np.int64, 9)
bool_ = DType("bool", np.bool_, 10)
uint16 = DType("uint16", np.uint16, 17)
complex128 = DType("complex128", np.complex128, 18)
float16 = half = DType("float16", np.float16, 19)
uint32 = DType("uint32", np.uint32, 22)
uint64 = DType("uint64", np.uint64, 23)


class _MissingDType:
    """``tf.bfloat16`` without ml_dtypes: any use raises a TypeError saying why."""

    def __init__(self, name, why):
        self.name, self.why = name, why

    def __getattr__(self, attr):
        raise TypeError(self.why)

    def __repr__(self):
        return f"tf.{self.name}"


_NP_SLOT = DType.__dict__["np"]


class _BFloat16(DType):
    """bfloat16: its numpy dtype comes from ml_dtypes, imported when it is first needed
    (the first bfloat16 tensor); then the numpy-dtype tables learn it too."""
    __slots__ = ()

    def __init__(self):
        self.name, self._enum, self._kind = "bfloat16", 14, "f"

    @property
    def np(self):
        try:
            return _NP_SLOT.__get__(self)
        except AttributeError:
            import ml_dtypes
            d = np.dtype(ml_dtypes.bfloat16)
            _NP_SLOT.__set__(self, d)
            _BY_NP[d] = self
            FLOAT_NP.add(d)
            return d


bfloat16 = _BFloat16() if _HAVE_ML_DTYPES else \
    _MissingDType("bfloat16", "bfloat16 needs the ml_dtypes package (pip install ml_dtypes): numpy has no bfloat16.")

def sum_accumulator(np_dtype):
    """The numpy dtype a sum of np_dtype values is accumulated in: TF's Eigen reductions add
    float16 and bfloat16 in float32 and round once (numpy would round every partial sum: 20 x
    0.5986 gave 12.125, TF 11.9375; 5,000 float16 halves along axis 0 stalled at 1024, TF 2500).
    Without ml_dtypes there is no bfloat16 array to ask about."""
    if np_dtype == np.float16 or (_HAVE_ML_DTYPES and np_dtype == bfloat16.np):
        return np.dtype(np.float32)
    return np_dtype


# Byte strings, held as numpy object arrays of ``bytes`` (ops/string_ops.py).
string = DType("string", object, 7, kind="S")

NATIVE = (float32, float64, int32, int64, bool_)      # what the compiler lowers
ALL = NATIVE + (float16, int8, int16, uint8, uint16, uint32, uint64, complex64, complex128, string) + \
    ((bfloat16,) if _HAVE_ML_DTYPES else ())
_BY_NAME = {d.name: d for d in ALL}
_BY_NAME.update({"float": float32, "double": float64, "half": float16, "bool_": bool_})
_BY_NP = {d.np: d for d in ALL if d is not bfloat16}      # bfloat16's joins when it is loaded
# numpy dtypes of floating tensors: float16/32/64 and, once loaded, bfloat16 (numpy kind "V")
FLOAT_NP = {d.np for d in ALL if d.is_floating and d is not bfloat16}


def as_dtype(value):
    """Converts a DType, numpy dtype/type or name to one of jitgrad's DTypes."""
    if isinstance(value, DType):
        return value
    if isinstance(value, _MissingDType):
        raise TypeError(value.why)
    if isinstance(value, str):
        if value in _BY_NAME:
            return _BY_NAME[value]
        if value == "bfloat16":
            raise TypeError(bfloat16.why)
        raise TypeError(f"Cannot convert value {value!r} to a jitgrad DType.")
    if value is float:
        return float32
    if value is int:
        return int32
    if value is bool:
        return bool_
    if value is complex:
        return complex128
    if value is str or value is bytes:
        return string
    try:
        key = np.dtype(value)
    except TypeError:
        raise TypeError(f"Cannot convert value {value!r} to a jitgrad DType.") from None
    if key in _BY_NP:
        return _BY_NP[key]
    if _HAVE_ML_DTYPES and key.name == "bfloat16":   # an ml_dtypes array made before jitgrad's first bfloat16
        if bfloat16.np == key:
            return bfloat16
    raise TypeError(f"dtype {key} is not supported by jitgrad "
                    f"(supported: {', '.join(d.name for d in ALL)}).")
