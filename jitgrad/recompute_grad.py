"""``tf.recompute_grad``: ``f``'s gradient computed by running ``f`` again in the backward
pass (TF: custom_gradient.recompute_grad), so its activations need not be kept.

The gradient is ``f``'s own: a custom gradient whose ``grad_fn`` re-runs ``f`` under a
fresh tape on copies of the arguments (and the variables ``f`` reads) and differentiates
that with the incoming result gradients; arguments the result does not depend on get
zeros, as in TF (``unconnected_gradients=ZERO``).
"""
import functools

from . import nest
from .custom_gradient import custom_gradient
from .gradients import UnconnectedGradients
from .ops.math_ops import identity, zeros_like
from .tape import GradientTape


def recompute_grad(f):
    """``tf.recompute_grad(f)``: ``f`` with a gradient that recomputes its forward pass."""

    @custom_gradient
    def inner(*args, **kwargs):
        result = f(*args, **kwargs)

        def grad(*result_grads, variables=None):
            with GradientTape() as t:
                id_args = nest.map_structure(identity, args)
                t.watch(id_args)
                if variables:
                    t.watch(variables)
                recomputed = f(*id_args, **kwargs)
            flat_recomputed = nest.flatten(recomputed)
            seeds = [zeros_like(r) if g is None else g for g, r in zip(result_grads, flat_recomputed)]
            flat_args = nest.flatten(id_args)
            grads = t.gradient(flat_recomputed, flat_args + list(variables or []), output_gradients=seeds,
                               unconnected_gradients=UnconnectedGradients.ZERO)
            if variables:
                return grads[:len(flat_args)], grads[len(flat_args):]
            return grads
        return result, grad

    return functools.wraps(f)(inner)
