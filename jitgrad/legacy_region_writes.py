"""Assignments in a tf.cond branch / tf.while_loop body of a plain tf.Graph run only when
the branch's outputs need them, as TF 2.21's.

In a tf.function TF adds automatic control dependencies: every assignment in a branch
runs. In a plain graph (a Session's) it adds none, and the branch function runs only the
ops its outputs depend on (by data or by tf.control_dependencies): ``v.assign(5.0)`` whose
result nothing uses does not happen, and a later ``v.read_value()`` is not ordered after it
either (it reads the value the branch was entered with).

jitgrad's regions carry a variable's value as dataflow (ops/control_flow_ops.
assign_in_region): an assignment is the variable's value from there on. In a plain graph's
region each assignment (and each nested region op's write) is also recorded as a *write*
with its markers -- the tensor the user got back from ``assign`` (an Identity of the new
value, not the value itself, so a read after it does not count as using it), or the NoOp
of ``read_value=False``; for a nested cond / loop, its outputs other than the variables it
wrote. Once the branch is traced, ``unneeded`` finds the writes whose markers its outputs
do not reach; the caller traces the branch again with those writes skipped (the
assignment still returns its marker, but the variable keeps its value), so the numbers
after it are TF's.
"""
from .graph import Tensor


class Retrace(Exception):
    """A region's writes its outputs do not need: trace it again without them (``skip``)."""

    def __init__(self, skip):
        super().__init__("retrace without unneeded writes")
        self.skip = frozenset(skip)


def is_legacy(fg):
    """Whether region graph ``fg`` is a plain tf.Graph's (no automatic control dependencies)."""
    return not fg.building_function


def record(fg, markers, op):
    """Notes a write in region ``fg`` (markers: the tensors standing for it, op: the op a
    control dependency on it names); returns whether it takes effect (not skipped)."""
    k = len(fg.legacy_writes)
    fg.legacy_writes.append((k, [id(t) for t in markers], op))
    return k not in fg.skip_writes


def unneeded(fg, outputs):
    """The numbers of ``fg``'s writes that ``outputs`` (its output tensors) reach neither by
    data nor by control dependencies."""
    if not fg.legacy_writes:
        return frozenset()
    tensors, ops = set(), set()
    stack = [t for t in outputs if isinstance(t, Tensor) and t.graph is fg]
    while stack:
        t = stack.pop()
        if isinstance(t, Tensor):
            if id(t) in tensors:
                continue
            tensors.add(id(t))
            op = t.op
        else:     # an op named by a control dependency: it runs
            op = t
            if op in ops:
                continue
            ops.add(op)
        stack.extend(op.inputs)
        stack.extend(op.control_inputs)
    return frozenset(k for k, markers, op in fg.legacy_writes
                     if not any(m in tensors for m in markers) and op not in ops)


def check(fg, outputs):
    """Raises Retrace when plain-graph region ``fg`` (traced, ``outputs`` its outputs) has
    writes its outputs do not need and that were not skipped already."""
    if not is_legacy(fg) or not fg.legacy_writes:
        return
    drop = unneeded(fg, outputs)
    if drop and not drop <= fg.skip_writes:
        raise Retrace(drop | fg.skip_writes)
