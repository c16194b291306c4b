"""TF's MirrorPad / MirrorPadGrad kernel checks for tf.pad's REFLECT and SYMMETRIC modes.

jitgrad's tf.pad is a composite (array_ops.pad: concat of reversed slices), so neither
kernel exists here; their checks do:

- MirrorPad (forward): REFLECT paddings must be < the dimension size, SYMMETRIC ones <= it,
  on every axis, padded or not (REFLECT of an unpadded empty axis fails: 0, 0 not less
  than 0). Checked when the graph is built where the size is known (README "Known
  differences"), else on the run's shape.
- MirrorPadGrad: the total paddings of each axis must be less than the size of the
  gradient's axis (before + size + after), i.e. the input may have no empty axis, in
  either mode. A SYMMETRIC pad of an empty input runs, but its gradient fails in TF;
  the composite's gradient (concat / slice gradients) would give an empty gradient.

``MirrorPadCheck`` is an identity op carrying these checks: its kernel (eager, the
interpreter) and its run_check (a compiled run's concrete shapes) raise TF's
InvalidArgumentError, and it vanishes before code generation (passes/stop_gradient.py),
so the machine code is unchanged. It is inserted only where a check can fail (a dim
unknown or 0). Only the trailing len(paddings) dims are checked, so that a batched
gradient ([B] + shape, batched_gradients.py) checks its rows.
"""
from ..errors import InvalidArgumentError
from .registry import apply_op, register


def check_mirror_pads(mode, dims, pads):
    """TF's MirrorPad check of ``dims`` (None: unknown, skipped) against ``pads``; it checks
    every axis in order, padded or not."""
    shift = 1 if mode == "REFLECT" else 0
    for dim, (before, after) in zip(dims, pads):
        if dim is not None and (before > dim - shift or after > dim - shift):
            raise InvalidArgumentError(
                f"paddings must be less than the dimension size: {before}, {after} not less than {dim}"
                if mode == "REFLECT" else
                f"paddings must be no greater than the dimension size: {before}, {after} greater than {dim}")


def check_mirror_pad_grad(dims, pads):
    """TF's MirrorPadGrad check, stated for the forward input's ``dims``: the gradient's
    axis is before + dim + after long and must exceed before + after."""
    for dim, (before, after) in zip(dims, pads):
        if dim is not None and dim <= 0:
            total = before + after
            raise InvalidArgumentError(f"Total paddings must be less than the input dimension size: "
                                       f"{total} was not less than {total + dim}")


def _check(shape, attrs):
    pads = attrs["paddings"]
    dims = list(shape)[len(shape) - len(pads):]
    if attrs["grad"]:
        check_mirror_pad_grad(dims, pads)
    else:
        check_mirror_pads(attrs["mode"], dims, pads)


def _run_check(shapes, attrs):
    if shapes[0] is not None:
        _check(shapes[0], attrs)


def _kernel(attrs, x):
    _check(x.shape, attrs)
    return x


def _grad(op, g):
    return [mirror_pad_check(g, op.get_attr("mode"), op.get_attr("paddings"), grad=not op.get_attr("grad"))]


register("MirrorPadCheck", infer=lambda shapes, dts, attrs: [(shapes[0], dts[0])], run_check=_run_check,
         kernel=_kernel, grad=_grad, kind="other", identity=True, lowering="none")


def mirror_pad_check(x, mode, pads, grad=False):
    """``x`` through MirrorPadCheck (whose gradient checks MirrorPadGrad's rule on the
    gradient), or ``x`` itself when its static shape passes both checks."""
    dims = x.shape.dims
    if dims is not None and all(d is not None and d > 0 for d in dims[len(dims) - len(pads):]):
        return x
    attrs = {"mode": mode, "paddings": tuple((int(b), int(a)) for b, a in pads), "grad": grad}
    return apply_op("MirrorPadCheck", [x], attrs, name="MirrorPadGrad" if grad else "MirrorPad")
