"""Shape/dtype rules shared by many ops."""
from .. import dtypes
from ..shapes import broadcast_dims

FLOATS = tuple(d for d in dtypes.ALL if d.is_floating)           # float16/bfloat16 too (computed in float32)
NUMBERS = FLOATS + tuple(d for d in dtypes.ALL if d.is_integer)
COMPLEX = (dtypes.complex64, dtypes.complex128)
ARITH = NUMBERS + COMPLEX    # + - * / and negation also take complex numbers
ALL = dtypes.ALL


def check_dtype(op_name, dt, allowed, which="x"):
    if dt not in allowed:
        raise TypeError(f"Value for attr 'T' of {dt.name} is not in the list of allowed values "
                        f"for {op_name} ({', '.join(d.name for d in allowed)}); input '{which}'.")


def check_same(op_name, dts):
    for i, d in enumerate(dts[1:], 1):
        if d != dts[0]:
            raise TypeError(f"Input {i} of '{op_name}' Op has type {d.name} that does not match "
                            f"type {dts[0].name} of argument 'x'.")


def unary(allowed=ALL, out_dtype=None):
    def infer(shapes, dts, attrs):
        check_dtype(infer.op_name, dts[0], allowed)
        return [(shapes[0], out_dtype or dts[0])]
    infer.op_name = "?"
    return infer


def broadcasting(allowed=ALL, out_dtype=None):
    """n-ary broadcasting op whose inputs share one dtype."""
    def infer(shapes, dts, attrs):
        check_same(infer.op_name, dts)
        check_dtype(infer.op_name, dts[0], allowed)
        shape = shapes[0]
        for s in shapes[1:]:
            shape = broadcast_dims(shape, s, f"'{infer.op_name}'")
        return [(shape, out_dtype or dts[0])]
    infer.op_name = "?"
    return infer


def like_input(index):
    def infer(shapes, dts, attrs):
        return [(shapes[index], dts[0])]
    return infer
