"""``tf.einsum`` as a composite of transpose, reshape, reduce_sum, multiply and matmul.

Operands are contracted two at a time, left to right. For a pair, each label is a
batch label (both operands and the result), a contracted one (both operands, not the
result), or free in one operand; each operand is transposed to batch + free +
contracted order and reshaped to one matrix per batch element, so the pair is one
(batch) matmul -- or, with nothing contracted, one broadcasting multiply -- followed by
a reshape and a transpose to the result's order. A label repeated inside one operand
takes that operand's diagonal; a label in one operand only and not wanted later is
summed out first. Everything is an existing op, so an einsum compiles (matmuls on the
packed GEMM) and differentiates like any graph of them.

Ellipses broadcast as in TF (aligned on the right); a dimension unknown when the graph
is built is read with tf.shape as it runs.
"""
import string

from .. import context, dtypes
from ..convert import convert_all
from ..errors import InvalidArgumentError
from .array_ops import reshape, shape as shape_of, transpose
from .gather_nd import size_product
from .linalg_ops import diag_part, matmul
from .math_ops import identity, maximum, multiply
from .reduction_ops import reduce_sum

_LETTERS = set(string.ascii_letters)


class _ShapeMismatch(ValueError):
    """An input's rank or a label's size does not fit the equation."""


def einsum(equation, *inputs, **kwargs):
    """``tf.einsum(equation, *inputs, name=None, optimize=...)``."""
    name = kwargs.pop("name", None)
    kwargs.pop("optimize", None)           # TF's contraction-order hint: left to right here
    if kwargs:
        raise TypeError(f"Invalid keyword arguments for this function: {', '.join(sorted(kwargs))}")
    if not isinstance(equation, str):
        raise TypeError(f"equation must be a string, got {type(equation).__name__}")
    if not inputs:
        raise ValueError("einsum needs at least one input")
    tensors = convert_all(list(inputs))
    eager = context.executing_eagerly()
    if any(t.dtype != tensors[0].dtype for t in tensors):
        raise (InvalidArgumentError if eager else TypeError)(
            f"einsum inputs must have the same dtype, got {[t.dtype.name for t in tensors]}")
    try:
        specs, out = _parse(equation, [t.shape.rank for t in tensors])
        operands = [_Operand(t, s) for t, s in zip(tensors, specs)]
        _check_sizes(operands, equation)
    except _ShapeMismatch as e:     # as TF: found by the op when it runs eagerly, by shape inference in a graph
        raise (InvalidArgumentError if eager else ValueError)(str(e)) from None
    for i, op in enumerate(operands):
        later = set(out).union(*(o.labels for o in operands[i + 1:]))
        operands[i] = op.diagonal().summed_except(later | set().union(*(o.labels for o in operands[:i])))
    acc = operands[0]
    for k, nxt in enumerate(operands[1:], 1):
        keep = set(out).union(*(o.labels for o in operands[k + 1:]))
        acc = _contract(acc, nxt, keep)
    acc = acc.summed_except(set(out))
    result = acc.tensor if list(acc.labels) == list(out) else transpose(acc.tensor, [acc.labels.index(c) for c in out])
    if name is not None:
        result = identity(result, name=name)
    return result


def _parse(equation, ranks):
    """Per input its labels (ellipses expanded to one label per broadcast dim), and the
    result's labels (numpy's implicit output when there is no '->')."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    specs = lhs.split(",")
    if len(specs) != len(ranks):
        raise ValueError(f"Expected {len(specs)} inputs for equation {equation!r}, got {len(ranks)}")
    for part in specs + ([rhs] if arrow else []):
        rest = part.replace("...", "", 1)
        bad = [c for c in rest if c not in _LETTERS]
        if bad:
            raise ValueError(f"Invalid character {bad[0]!r} in einsum equation {equation!r}")
    n_ell = 0
    for spec, rank in zip(specs, ranks):
        if "..." in spec:
            if rank is None:
                raise ValueError("einsum with '...' needs its inputs' ranks known when the graph is built")
            n_ell = max(n_ell, rank - (len(spec) - 3))
    ell = [chr(0x100 + i) for i in range(n_ell)]     # labels no equation can spell
    expanded = []
    for spec, rank in zip(specs, ranks):
        if "..." in spec:
            k = rank - (len(spec) - 3)
            if k < 0:
                raise _ShapeMismatch(f"Input {spec!r} of einsum {equation!r} has rank {rank}, too few for its labels")
            spec = spec.replace("...", "".join(ell[n_ell - k:]))
        elif rank is not None and rank != len(spec):
            raise _ShapeMismatch(f"Expected input {spec!r} of einsum {equation!r} to have rank {len(spec)}, "
                             f"got rank {rank}")
        expanded.append(list(spec))
    if arrow:
        out = list(rhs.replace("...", "".join(ell)))     # (no '...' there: those dims are summed)
        if len(set(out)) != len(out):
            raise ValueError(f"Output subscripts of einsum {equation!r} repeat a label")
        everywhere = set().union(*map(set, expanded))
        missing = [c for c in out if c not in everywhere]
        if missing:
            raise ValueError(f"Output label {missing[0]!r} of einsum {equation!r} is in no input")
    else:
        counts = {}
        for s in expanded:
            for c in s:
                counts[c] = counts.get(c, 0) + 1
        out = ell + sorted(c for c, n in counts.items() if n == 1 and c not in ell)
    return expanded, out


class _Operand:
    """A tensor, one label per axis, and each axis' size: an int, or a scalar tensor read
    from an *input's* shape as the graph runs (never an intermediate's: a compiled run
    evaluates shape values from the feeds, not from computed data)."""

    def __init__(self, tensor, labels, sizes=None):
        self.tensor, self.labels = tensor, list(labels)
        if sizes is None:
            dims = tensor.shape.dims
            sizes = {}
            for i, c in enumerate(self.labels):
                d = dims[i] if dims is not None else None
                sizes.setdefault(c, d if d is not None else shape_of(tensor)[i])
        self.sizes = sizes

    def size(self, label):
        return self.sizes[label]

    def diagonal(self):
        """A label repeated in this operand: its diagonal (the two axes become one)."""
        op = self
        while len(set(op.labels)) != len(op.labels):
            c = next(c for c in op.labels if op.labels.count(c) > 1)
            first = op.labels.index(c)
            second = op.labels.index(c, first + 1)
            rest = [i for i in range(len(op.labels)) if i not in (first, second)]
            t = transpose(op.tensor, rest + [first, second])
            op = _Operand(diag_part(t), [op.labels[i] for i in rest] + [c], op.sizes)
        return op

    def summed_except(self, keep):
        drop = [i for i, c in enumerate(self.labels) if c not in keep]
        if not drop:
            return self
        kept = [c for c in self.labels if c in keep]
        return _Operand(reduce_sum(self.tensor, drop), kept, {c: self.sizes[c] for c in kept})

    def arranged(self, order, shape):
        """Transposed to ``order`` (labels) and reshaped to ``shape`` (sizes)."""
        t = self.tensor
        if order != self.labels:
            t = transpose(t, [self.labels.index(c) for c in order])
        return reshape(t, shape)


def _broadcast_size(a, b, label):
    """A label's size in a and b broadcast together (a 1 takes the other's)."""
    sa, sb = a.size(label), b.size(label)
    if isinstance(sa, int) and isinstance(sb, int):
        return max(sa, sb) if 1 in (sa, sb) else sa
    if isinstance(sa, int) or isinstance(sb, int):
        known, other = (sa, sb) if isinstance(sa, int) else (sb, sa)
        return other if known == 1 else known
    return maximum(sa, sb)


def _contract(a, b, keep):
    """a and b contracted over their common labels not in ``keep``; keeps the rest."""
    a, b = a.summed_except(keep | set(b.labels)), b.summed_except(keep | set(a.labels))
    common = [c for c in a.labels if c in b.labels]
    batch = [c for c in common if c in keep]
    summed = [c for c in common if c not in keep]
    a_free = [c for c in a.labels if c not in b.labels]
    b_free = [c for c in b.labels if c not in a.labels]
    a_batch = [a.size(c) for c in batch]
    b_batch = [b.size(c) for c in batch]
    out_batch = [_broadcast_size(a, b, c) for c in batch]
    a_sizes = [a.size(c) for c in a_free]
    b_sizes = [b.size(c) for c in b_free]
    if not summed:          # an outer / elementwise product: one broadcasting multiply
        left = a.arranged(batch + a_free, a_batch + a_sizes + [1] * len(b_free))
        right = b.arranged(batch + b_free, b_batch + [1] * len(a_free) + b_sizes)
        labels = batch + a_free + b_free
        return _Operand(multiply(left, right), labels, _sizes(labels, out_batch + a_sizes + b_sizes))
    k = size_product([a.size(c) for c in summed], dtypes.int32)
    left = a.arranged(batch + a_free + summed, a_batch + [size_product(a_sizes, dtypes.int32), k])
    right = b.arranged(batch + summed + b_free, b_batch + [k, size_product(b_sizes, dtypes.int32)])
    labels = batch + a_free + b_free
    return _Operand(reshape(matmul(left, right), out_batch + a_sizes + b_sizes), labels,
                    _sizes(labels, out_batch + a_sizes + b_sizes))


def _sizes(labels, sizes):
    return dict(zip(labels, sizes))


def _check_sizes(operands, equation):
    """A label's static sizes agree across operands (1 broadcasts for ellipsis dims)."""
    seen = {}
    for op in operands:
        dims = op.tensor.shape.dims
        if dims is None:
            continue
        for c, d in zip(op.labels, dims):
            if d is None:
                continue
            prev = seen.setdefault(c, d)
            if prev != d and not (ord(c) >= 0x100 and 1 in (prev, d)):
                raise _ShapeMismatch(f"Expected dimension {prev} for label {c!r} of einsum {equation!r}, got {d}")
            if prev == 1:
                seen[c] = d
    return seen

