
from . import context
"""TensorFlow's runtime error classes (``tf.errors``).

As in TensorFlow, these are raised when a *running* computation finds bad data
(a missing feed, an uninitialised variable, shapes that only clash at run
time). Errors found while *building* a graph are plain ``ValueError`` /
``TypeError``, again as in TensorFlow.
"""


class OpError(Exception):
    def __init__(self, node_def=None, op=None, message=""):
        if message == "" and isinstance(node_def, str) and op is None:
            node_def, message = None, node_def
        super().__init__(message)
        self.node_def = node_def
        self.op = op
        self.message = message


class InvalidArgumentError(OpError):
    pass


def shape_error(message):
    """A bad shape or argument found before the op runs: TF raises ValueError while
    building a graph, InvalidArgumentError when executing eagerly (the kernel finds it)."""
    return InvalidArgumentError(message) if context.executing_eagerly() else ValueError(message)


class FailedPreconditionError(OpError):
    pass


class NotFoundError(OpError):
    pass


class UnimplementedError(OpError):
    pass


class NoKernelError(InvalidArgumentError):
    """TF has no CPU kernel of an op for this dtype (erfinv of float16, lgamma of bfloat16, ...).
    A graph (Session.run, tf.function) fails with InvalidArgumentError ("No OpKernel was
    registered"); an eager run fails before it places the op: NotFoundError, which
    eager.execute raises instead (``eager_error``)."""

    def __init__(self, op_name, dtype_name):
        t = "DT_" + {"float16": "HALF"}.get(dtype_name, dtype_name.upper())
        super().__init__(f"No OpKernel was registered to support Op '{op_name}' used by {{{{node {op_name}}}}} "
                         f"with these attrs: [T={t}]")
        self.eager_message = f"Could not find device for node: {{{{node {op_name}}}}} = {op_name}[T={t}]"

    def eager_error(self):
        return NotFoundError(None, None, self.eager_message)


class InternalError(OpError):
    pass


class ResourceExhaustedError(OpError):
    pass


class UnavailableError(OpError):
    """TF's error for a cluster, worker or service that cannot be reached."""


class OutOfRangeError(OpError):
    pass


class DataLossError(OpError):
    """TF's error for data that cannot be made whole (padded_batch asked to pad into less room)."""


class InaccessibleTensorError(ValueError):
    """TF's errors_impl.InaccessibleTensorError: a tensor made inside a nested graph (a loop
    body or branch) used outside it, e.g. appended to a Python list in a staged loop."""
