"""Matrix multiplication (2-D and batched with broadcasting batch dims)."""
import numpy as np

from ..convert import convert_all
from ..errors import shape_error
from ..shapes import broadcast_dims
from ._infer import NUMBERS, check_dtype, check_same
from .math_ops import reduce_to
from .registry import apply_op, register


def _matmul_dims(a, b, ta, tb, what):
    m, k1 = (a[-1], a[-2]) if ta else (a[-2], a[-1])
    k2, n = (b[-1], b[-2]) if tb else (b[-2], b[-1])
    if k1 is not None and k2 is not None and k1 != k2:
        raise ValueError(f"Dimensions must be equal, but are {k1} and {k2} for '{what}' with input shapes: "
                         f"{list(a)}, {list(b)}.")
    return m, n


def _matmul_infer(shapes, dts, attrs):
    check_same("MatMul", dts)
    check_dtype("MatMul", dts[0], NUMBERS)
    a, b = shapes
    if a is None or b is None:
        return [((None, None), dts[0])]
    if len(a) != 2 or len(b) != 2:
        raise ValueError(f"Shape must be rank 2 but is rank {len(a) if len(a) != 2 else len(b)} for 'MatMul' "
                         f"with input shapes: {list(a)}, {list(b)}.")
    return [(_matmul_dims(a, b, attrs["transpose_a"], attrs["transpose_b"], "MatMul"), dts[0])]


def _batch_infer(shapes, dts, attrs):
    check_same("BatchMatMulV2", dts)
    check_dtype("BatchMatMulV2", dts[0], NUMBERS)
    a, b = shapes
    if a is None or b is None:
        return [(None, dts[0])]
    if len(a) < 2 or len(b) < 2:
        raise ValueError(f"In[0] and In[1] must have rank >= 2 for BatchMatMulV2, got {list(a)}, {list(b)}")
    batch = broadcast_dims(a[:-2], b[:-2], "'BatchMatMulV2' batch dimensions")
    return [(tuple(batch) + _matmul_dims(a, b, attrs["adj_x"], attrs["adj_y"], "BatchMatMulV2"), dts[0])]


def _mm(a, b, ta, tb):
    if ta:
        a = np.swapaxes(a, -1, -2)
    if tb:
        b = np.swapaxes(b, -1, -2)
    return np.matmul(a, b)


def _matmul_grad_pairs(a, b, g, ta, tb, mm):
    if not ta and not tb:
        return mm(g, b, False, True), mm(a, g, True, False)
    if not ta and tb:
        return mm(g, b, False, False), mm(g, a, True, False)
    if ta and not tb:
        return mm(b, g, False, True), mm(a, g, False, False)
    return mm(b, g, True, True), mm(g, a, True, True)


def _matmul_grad(op, g):
    a, b = op.inputs
    return list(_matmul_grad_pairs(a, b, g, op.get_attr("transpose_a"), op.get_attr("transpose_b"),
                                   lambda x, y, ta, tb: matmul(x, y, transpose_a=ta, transpose_b=tb)))


def _batch_grad(op, g):
    a, b = op.inputs
    ga, gb = _matmul_grad_pairs(a, b, g, op.get_attr("adj_x"), op.get_attr("adj_y"),
                                lambda x, y, ta, tb: _batch_matmul(x, y, ta, tb))
    return [reduce_to(ga, a), reduce_to(gb, b)]


register("MatMul", infer=_matmul_infer,
         kernel=lambda attrs, a, b: _mm(a, b, attrs["transpose_a"], attrs["transpose_b"]),
         grad=_matmul_grad, kind="matmul")
register("BatchMatMulV2", infer=_batch_infer,
         kernel=lambda attrs, a, b: _mm(a, b, attrs["adj_x"], attrs["adj_y"]),
         grad=_batch_grad, kind="matmul")


def _batch_matmul(a, b, adj_x, adj_y, name=None):
    return apply_op("BatchMatMulV2", [a, b], {"adj_x": bool(adj_x), "adj_y": bool(adj_y)},
                    name=name or "BatchMatMulV2")


def matmul(a, b, transpose_a=False, transpose_b=False, adjoint_a=False, adjoint_b=False,
           a_is_sparse=False, b_is_sparse=False, output_type=None, name=None):
    a, b = convert_all([a, b])
    ta, tb = bool(transpose_a or adjoint_a), bool(transpose_b or adjoint_b)
    ra, rb = a.shape.rank, b.shape.rank
    if ra is not None and rb is not None and (ra < 2 or rb < 2):
        raise shape_error(f"Shape must be rank >= 2 for MatMul, got shapes {a.shape} and {b.shape}.")
    if ra == 2 and rb == 2:
        return apply_op("MatMul", [a, b], {"transpose_a": ta, "transpose_b": tb}, name=name or "MatMul")
    return _batch_matmul(a, b, ta, tb, name)
