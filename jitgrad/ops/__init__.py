"""Op definitions. Importing this package registers every op."""
from . import math_ops, reduction_ops, array_ops, linalg_ops, nn_ops, state_ops  # noqa: F401
