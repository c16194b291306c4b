"""Static shapes: TensorShape (possibly partial) and shape arithmetic.

A dim is an int or None (unknown); a shape whose rank is unknown has
``dims is None``. Op shape functions work on these partial shapes at graph
construction and on fully known ones when a graph is specialised for a call.
"""
from .errors import InvalidArgumentError, ResourceExhaustedError, shape_error


class TensorShape:
    __slots__ = ("dims",)

    def __init__(self, dims):
        if isinstance(dims, TensorShape):
            dims = dims.dims
        if dims is None:
            self.dims = None
        elif isinstance(dims, int):
            self.dims = (int(dims),)
        else:
            self.dims = tuple(None if d is None else int(d) for d in dims)
            if any(d is not None and d < 0 for d in self.dims):
                raise ValueError(f"Dimension must be >= 0, got {list(dims)}")

    @property
    def rank(self):
        return None if self.dims is None else len(self.dims)

    ndims = rank

    def as_list(self):
        if self.dims is None:
            raise ValueError("as_list() is not defined on an unknown TensorShape.")
        return list(self.dims)

    def is_fully_defined(self):
        return self.dims is not None and all(d is not None for d in self.dims)

    def num_elements(self):
        if not self.is_fully_defined():
            return None
        n = 1
        for d in self.dims:
            n *= d
        return n

    def is_compatible_with(self, other):
        other = as_shape(other)
        if self.dims is None or other.dims is None:
            return True
        if len(self.dims) != len(other.dims):
            return False
        return all(a is None or b is None or a == b for a, b in zip(self.dims, other.dims))

    def merge_with(self, other):
        other = as_shape(other)
        if not self.is_compatible_with(other):
            raise ValueError(f"Shapes {self} and {other} are not compatible")
        if self.dims is None:
            return other
        if other.dims is None:
            return self
        return TensorShape([a if a is not None else b for a, b in zip(self.dims, other.dims)])

    def __len__(self):
        if self.dims is None:
            raise ValueError("Cannot take the length of shape with unknown rank.")
        return len(self.dims)

    def __iter__(self):
        if self.dims is None:
            raise ValueError("Cannot iterate over a shape with unknown rank.")
        return iter(self.dims)

    def __getitem__(self, key):
        if self.dims is None:
            return None if isinstance(key, int) else TensorShape(None)
        if isinstance(key, slice):
            return TensorShape(self.dims[key])
        return self.dims[key]

    def __eq__(self, other):
        try:
            other = as_shape(other)
        except (TypeError, ValueError):
            return NotImplemented
        return self.dims == other.dims

    def __hash__(self):
        return hash(self.dims)

    def __repr__(self):
        if self.dims is None:
            return "TensorShape(None)"
        return f"TensorShape({list(self.dims)})"

    def __str__(self):
        if self.dims is None:
            return "<unknown>"
        if len(self.dims) == 1:
            return f"({self.dims[0]},)"
        return "(" + ", ".join(str(d) for d in self.dims) + ")"


def as_shape(shape):
    return shape if isinstance(shape, TensorShape) else TensorShape(shape)


def static_dims(shape):
    """A TensorShape's dims as a list of ints, or None where its rank or a dim is unknown."""
    if shape.rank is None or not shape.is_fully_defined():
        return None
    return [int(d) for d in shape.as_list()]


def broadcast_dims(a, b, what="operands"):
    """numpy/TF broadcasting of two partial shapes (tuples or None)."""
    if a is None or b is None:
        return None
    n = max(len(a), len(b))
    a = (1,) * (n - len(a)) + tuple(a)
    b = (1,) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(a, b):
        if x == 1:
            out.append(y)
        elif y == 1:
            out.append(x)
        elif x is None or y is None:
            out.append(x if y is None else y)
        elif x == y:
            out.append(x)
        else:
            raise ValueError(f"Incompatible shapes for {what}: {list(a)} vs. {list(b)}")
    return tuple(out)


INT64_MAX = 2 ** 63 - 1


def check_num_elements(dims):
    """Raises TF's error for a shape whose known dims multiply past int64 (no
    buffer or loop bound could hold its element count); returns the product
    of the known dims."""
    n = 1
    for d in dims:
        if d is not None:
            n *= d
    if n > INT64_MAX:
        raise shape_error(f"Shape {list(dims)} would have more than 2**63 - 1 elements")
    return n


ADDRESS_SPACE_BYTES = 1 << 47   # x86-64 and AArch64 user space: 128 TiB


def oom_error(dims, dtype, op_name, op=None):
    """TF's error for a tensor no engine can hold (more bytes than an address space): OOM."""
    return ResourceExhaustedError(None, op, f"OOM when allocating tensor with shape{list(dims)} and type "
                                              f"{dtype.name} [[node {op_name}]]")


class InputShapeError(ValueError):
    """Input ``index`` of an op has a shape the op cannot take (an op's shape
    rule raises it when one input's shape is fixed by the others: a gradient
    against the forward output, the reference of a *Like op ...). The graph
    builder and the compiler name the tensor from the index."""

    def __init__(self, index, actual, expected):
        self.index, self.actual, self.expected = index, actual, expected
        super().__init__(f"input {index} has shape {_fmt(actual)}, but the op needs {_fmt(expected)}")

    def naming(self, op_type, op_name, tensor_name):
        """The same error, its message naming the op and the tensor."""
        e = InputShapeError(self.index, self.actual, self.expected)
        e.args = (f"{op_type} '{op_name}': input {tensor_name} has shape {_fmt(self.actual)}, but the op needs "
                  f"{_fmt(self.expected)} there",)
        return e


def _fmt(dims):
    return "<unknown>" if dims is None else str(list(dims))


def require_shape(index, actual, expected):
    """Raises InputShapeError unless input ``index``'s (partial) shape can be
    ``expected`` (a partial shape); unknown dims or ranks pass."""
    if actual is None or expected is None:
        return
    if len(actual) != len(expected) or any(a is not None and e is not None and a != e
                                           for a, e in zip(actual, expected)):
        raise InputShapeError(index, actual, expected)


def num_elements(dims):
    n = 1
    for d in dims:
        n *= d
    return n


def normalize_axes(axis, rank, allow_none=True, allow_duplicates=False):
    """Axis attr (None, int or sequence; negative allowed) -> sorted tuple.
    A reduction's axes may not name a dimension twice (TF's kernels raise
    InvalidArgumentError, in graph mode as when executing eagerly)."""
    if axis is None:
        if not allow_none:
            raise ValueError("axis must be given")
        return None if rank is None else tuple(range(rank))
    axes = [axis] if isinstance(axis, int) else list(axis)
    if rank is None:
        return tuple(axes)
    out = set()
    for a in axes:
        a = int(a)
        if not -rank <= a < max(rank, 1):
            raise shape_error(f"Invalid reduction dimension {a} for input with {rank} dimensions.")
        a = a % rank if rank else 0
        if a in out and not allow_duplicates:
            raise InvalidArgumentError(f"Invalid reduction arguments: Axes contains duplicate dimension: {a}")
        out.add(a)
    return tuple(sorted(out))
