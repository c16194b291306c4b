"""Keras 3's Identity, Masking, Lambda and InputLayer."""
import inspect
import operator
import warnings

from ..ops import math_ops, reduction_ops
from .base_layer import Layer
from .functional import Input, KerasTensor
from .masking import set_keras_mask


class Identity(Layer):
    _supports_masking = True     # Keras 3: the input's mask passes to the output

    def call(self, inputs):
        return inputs

    def compute_output_shape(self, input_shape):
        return input_shape


class Masking(Layer):
    """Keras 3's: a step whose features all equal ``mask_value`` is masked (its mask False) and
    its features set to 0."""
    _supports_masking = True

    def __init__(self, mask_value=0.0, **kwargs):
        super().__init__(**kwargs)
        self.mask_value = mask_value

    def _keep(self, inputs, keepdims=False):
        return reduction_ops.reduce_any(math_ops.not_equal(inputs, math_ops.cast(self.mask_value, inputs.dtype)),
                                        axis=-1, keepdims=keepdims)

    def compute_mask(self, inputs, mask=None):
        return self._keep(inputs)

    def call(self, inputs):
        keep = self._keep(inputs, keepdims=True)
        outputs = math_ops.where(keep, inputs, math_ops.zeros_like(inputs))
        set_keras_mask(outputs, self._keep(inputs))
        return outputs

    def compute_output_shape(self, input_shape):
        return input_shape


class Lambda(Layer):
    """Wraps ``function(inputs, **arguments)`` as a layer (no weights of its own); ``mask`` /
    ``training`` reach the function when it takes them, as in Keras 3."""

    def __init__(self, function, output_shape=None, mask=None, arguments=None, **kwargs):
        super().__init__(**kwargs)
        if mask is not None:
            raise NotImplementedError("jitgrad's Lambda has no masks.")
        self.function, self.arguments = function, dict(arguments or {})
        self._output_shape_arg = output_shape
        try:
            params = inspect.signature(function).parameters
        except (TypeError, ValueError):
            params = {}
        self._fn_takes_training = "training" in params

    def call(self, inputs, training=None):
        kwargs = dict(self.arguments)
        if self._fn_takes_training:
            kwargs["training"] = training
        return self.function(inputs, **kwargs)

    def compute_output_shape(self, input_shape):
        if self._output_shape_arg is None:
            raise NotImplementedError("jitgrad's Lambda infers its output shape by calling the function: "
                                      "call it on a tensor or a keras.Input, or pass output_shape.")
        if callable(self._output_shape_arg):
            return self._output_shape_arg(input_shape)
        return (input_shape[0],) + tuple(self._output_shape_arg)


class InputLayer(Layer):
    """A model's input as a layer: ``output`` is the ``keras.Input`` it stands for, which is how
    Sequential takes it as its first layer (and, as in Keras 3, leaves it out of ``layers``)."""

    def __init__(self, shape=None, batch_size=None, dtype=None, sparse=None, batch_shape=None, input_tensor=None,
                 optional=False, name=None, **kwargs):
        if "input_shape" in kwargs:
            warnings.warn("Argument `input_shape` is deprecated. Use `shape` instead.")
            shape = kwargs.pop("input_shape")
        if sparse or input_tensor is not None or optional:
            raise NotImplementedError("jitgrad's InputLayer has no sparse, input_tensor or optional inputs.")
        if batch_shape is not None:
            batch_size, shape = batch_shape[0], tuple(batch_shape[1:])
        super().__init__(name=name, dtype=dtype, **kwargs)
        self.output = Input(shape=shape, batch_size=batch_size, dtype=dtype, name=self.name)
        self.built = True

    @classmethod
    def wrapping(cls, keras_input):
        """The InputLayer a functional model lists for one of its ``keras.Input`` tensors."""
        layer = cls(batch_shape=tuple(keras_input.shape.as_list()), dtype=keras_input.dtype, name=keras_input.name)
        layer.output = keras_input
        layer._output_shape = tuple(keras_input.shape.as_list())
        return layer

    def call(self, inputs):
        return inputs


def _keras_tensor_operator(fn):
    """``a + b`` on KerasTensors (Keras 3 records ops on them): a Lambda layer over the KerasTensor
    operands, the other operand a constant of the function."""
    def apply(self, *other):
        tensors = [self] + [o for o in other if isinstance(o, KerasTensor)]
        if len(tensors) == 2:
            layer, args = Lambda(lambda xs: fn(xs[0], xs[1])), tensors
        else:
            layer, args = Lambda(lambda x: fn(x, *other)), self
        layer.is_operation = True      # an op, not a layer: Model.layers leaves it out, as Keras's
        return layer(args)
    return apply


for _name, _fn in (("__add__", operator.add), ("__radd__", lambda a, b: b + a), ("__sub__", operator.sub),
                   ("__rsub__", lambda a, b: b - a), ("__mul__", operator.mul), ("__rmul__", lambda a, b: b * a),
                   ("__truediv__", operator.truediv), ("__rtruediv__", lambda a, b: b / a),
                   ("__pow__", operator.pow), ("__matmul__", operator.matmul), ("__neg__", operator.neg),
                   ("__abs__", operator.abs), ("__getitem__", operator.getitem)):
    setattr(KerasTensor, _name, _keras_tensor_operator(_fn))
