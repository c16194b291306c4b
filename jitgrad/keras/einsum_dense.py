"""Keras 3's EinsumDense for equations "X,Y->Z" (no ellipsis): the kernel's shape comes from
the input's dims for the letters the input shares, else from ``output_shape``; the bias spans
the output from its first ``bias_axes`` letter on (size 1 at the letters not in bias_axes)."""
import copy
import re

from ..ops import einsum, math_ops
from . import activations, initializers
from .base_layer import Layer


class EinsumDense(Layer):
    def __init__(self, equation, output_shape, activation=None, bias_axes=None, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", kernel_regularizer=None, bias_regularizer=None, kernel_constraint=None,
                 bias_constraint=None, **kwargs):
        super().__init__(**kwargs)
        if any(a is not None for a in (kernel_regularizer, bias_regularizer, kernel_constraint, bias_constraint)):
            raise NotImplementedError("jitgrad's EinsumDense has no regularizers or constraints.")
        if "..." in equation:
            raise NotImplementedError("jitgrad's EinsumDense takes equations without an ellipsis.")
        match = re.fullmatch("([a-zA-Z]+),([a-zA-Z]+)->([a-zA-Z]+)", equation)
        if match is None:
            raise ValueError(f"Invalid einsum equation '{equation}'. Equations must be in the form [X],[Y]->[Z], "
                             "...[X],[Y]->...[Z], or [X]...,[Y]->[Z]....")
        self.equation, self._specs = equation, match.groups()
        self.partial_output_shape = (output_shape,) if isinstance(output_shape, int) else tuple(output_shape)
        self.bias_axes = bias_axes
        self.activation = activations.get(activation)
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.bias_initializer = initializers.get(bias_initializer)

    def compute_output_shape(self, input_shape):
        # as Keras 3: the batch dim, then output_shape as given (its None dims stay None)
        return (input_shape[0],) + self.partial_output_shape

    def build(self, input_shape):
        in_spec, w_spec, out_spec = self._specs
        size = {c: d for c, d in zip(out_spec, self.compute_output_shape(input_shape))}
        size.update({c: input_shape[i] for i, c in enumerate(in_spec)})
        self.kernel = self.add_weight(shape=tuple(size[c] for c in w_spec), initializer=self._kernel_init(),
                                      name="kernel")
        self.bias = None
        if self.bias_axes is not None:
            for c in self.bias_axes:
                if c not in out_spec:
                    raise ValueError(f"Bias dimension {c} was requested, but is not part of the output spec "
                                     f"{out_spec}")
            first = min(out_spec.find(c) for c in self.bias_axes)
            shape = tuple(size[c] if c in self.bias_axes else 1 for c in out_spec[first:])
            self.bias = self.add_weight(shape=shape, initializer=self.bias_initializer, name="bias")
        self.built = True

    def _kernel_init(self):
        """Keras 3 (3.15, TF 2.21's): a variance-scaling initializer without axes of its own
        takes the kernel's -- its letters in the output are fan-out, the others fan-in -- not
        compute_fans' conv-kernel rule (which, for MultiHeadAttention's (dim, heads, key_dim)
        kernels, took the first axis as a receptive field: Glorot limits half TF's or less)."""
        init = self.kernel_initializer
        if not isinstance(init, initializers.VarianceScaling) or (
                init.input_axes is not None and init.output_axes is not None):
            return init
        _, w_spec, out_spec = self._specs
        clone = copy.copy(init)
        clone.output_axes = [i for i, c in enumerate(w_spec) if c in out_spec]
        clone.input_axes = [i for i, c in enumerate(w_spec) if c not in out_spec]
        return clone

    def call(self, inputs):
        x = einsum.einsum(self.equation, inputs, self.kernel)
        if self.bias is not None:
            x = math_ops.add(x, self.bias)
        return self.activation(x)
