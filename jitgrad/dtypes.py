"""The five dtypes jitgrad supports, with TensorFlow's names and rules."""
import numpy as np


class DType:
    __slots__ = ("name", "np", "_enum")

    def __init__(self, name, np_dtype, enum):
        self.name = name
        self.np = np.dtype(np_dtype)
        self._enum = enum

    @property
    def as_numpy_dtype(self):
        return self.np.type

    @property
    def base_dtype(self):
        return self

    @property
    def is_floating(self):
        return self.np.kind == "f"

    @property
    def is_integer(self):
        return self.np.kind in "iu"

    @property
    def is_bool(self):
        return self.np.kind == "b"

    @property
    def is_complex(self):
        return False

    @property
    def size(self):
        return self.np.itemsize

    @property
    def min(self):
        return np.finfo(self.np).min if self.is_floating else np.iinfo(self.np).min

    @property
    def max(self):
        return np.finfo(self.np).max if self.is_floating else np.iinfo(self.np).max

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
int64 = DType("int64", np.int64, 9)
bool_ = DType("bool", np.bool_, 10)
float16 = None  # not supported; kept as a name so `tf.float16` gives a clear error below

ALL = (float32, float64, int32, int64, bool_)
_BY_NAME = {d.name: d for d in ALL}
_BY_NAME.update({"float": float32, "double": float64, "bool_": bool_})
_BY_NP = {d.np: d for d in ALL}


def as_dtype(value):
    """Converts a DType, numpy dtype/type or name to one of jitgrad's DTypes."""
    if isinstance(value, DType):
        return value
    if isinstance(value, str):
        if value in _BY_NAME:
            return _BY_NAME[value]
        raise TypeError(f"Cannot convert value {value!r} to a jitgrad DType.")
    if value is float:
        return float32
    if value is int:
        return int32
    if value is bool:
        return bool_
    try:
        key = np.dtype(value)
    except TypeError:
        raise TypeError(f"Cannot convert value {value!r} to a jitgrad DType.") from None
    if key in _BY_NP:
        return _BY_NP[key]
    raise TypeError(f"dtype {key} is not supported by jitgrad "
                    f"(supported: {', '.join(d.name for d in ALL)}).")
