"""Keras 3's merge layers (Add, Subtract, Multiply, Average, Maximum, Minimum,
Concatenate, Dot) and their functional forms (``keras.layers.add(inputs)`` ...)."""
from ..ops import array_ops, linalg_ops, math_ops, nn_ops, reduction_ops
from .base_layer import Layer


def _is_shape_list(input_shape):
    return isinstance(input_shape, (list, tuple)) and len(input_shape) >= 1 and \
        all(isinstance(s, (list, tuple)) for s in input_shape)


def _broadcast_shape(shape1, shape2):
    """Keras 3's _compute_elemwise_op_output_shape: numpy broadcasting, None for unknown dims."""
    if len(shape1) < len(shape2):
        shape1, shape2 = shape2, shape1
    if not shape2:
        return tuple(shape1)
    out = list(shape1[:len(shape1) - len(shape2)])
    for i, j in zip(shape1[len(shape1) - len(shape2):], shape2):
        if i is None or j is None:
            out.append(None)
        elif i == 1 or j == 1:
            out.append(j if i == 1 else i)
        elif i != j:
            raise ValueError(f"Inputs have incompatible shapes. Received shapes {tuple(shape1)} and {tuple(shape2)}")
        else:
            out.append(i)
    return tuple(out)


class _Merge(Layer):
    """An elementwise merge of a list of tensors, folded left to right as Keras 3 does. Inputs of
    lower rank get size-1 axes inserted after the batch axis (Keras's reshape) before broadcasting."""

    def build(self, input_shape):
        if not _is_shape_list(input_shape):
            raise ValueError(f"A merge layer should be called on a list of inputs. Received: "
                             f"input_shape={input_shape} (not a list of shapes)")
        batch = {s[0] for s in input_shape if s and s[0] is not None}
        if len(batch) > 1:
            raise ValueError(f"Cannot merge tensors with different batch sizes. Received tensors with shapes "
                             f"{input_shape}")
        self.compute_output_shape(input_shape)
        self.built = True

    def compute_output_shape(self, input_shape):
        out = tuple(input_shape[0][1:])
        for s in input_shape[1:]:
            out = _broadcast_shape(out, tuple(s[1:]))
        batch = [s[0] for s in input_shape if s[0] is not None]
        return (batch[0] if batch else None,) + out

    def call(self, inputs):
        if not isinstance(inputs, (list, tuple)):
            raise ValueError(f"A merge layer should be called on a list of inputs. Received: inputs={inputs} "
                             f"(not a list of tensors)")
        rank = max(x.shape.rank for x in inputs)
        inputs = [_expand_after_batch(x, rank) for x in inputs]
        out = inputs[0]
        for x in inputs[1:]:
            out = self._combine(out, x)
        return self._finish(out, len(inputs))

    def _finish(self, out, n):
        return out

    def compute_mask(self, inputs, mask=None):
        """Keras 3's: the OR of the inputs' masks when every input has one, else no mask."""
        masks = _mask_list(inputs, mask)
        if masks is None or any(m is None for m in masks):
            return None
        out = masks[0]
        for m in masks[1:]:
            out = math_ops.logical_or(out, m)
        return out


def _mask_list(inputs, mask):
    """A merge's masks, one per input (None: none at all), with Keras 3's checks."""
    if mask is None:
        return None
    if not isinstance(mask, (tuple, list)):
        raise ValueError(f"`mask` should be a list. Received: mask={mask}")
    if not isinstance(inputs, (tuple, list)):
        raise ValueError(f"`inputs` should be a list. Received: inputs={inputs}")
    if len(mask) != len(inputs):
        raise ValueError(f"The lists `inputs` and `mask` should have the same length. Received: inputs={inputs} "
                         f"of length {len(inputs)}, and mask={mask} of length {len(mask)}")
    return list(mask)


def _expand_after_batch(x, rank):
    while x.shape.rank < rank:
        x = array_ops.expand_dims(x, 1)
    return x


class Add(_Merge):
    _combine = staticmethod(math_ops.add)


class Multiply(_Merge):
    _combine = staticmethod(math_ops.multiply)


class Maximum(_Merge):
    _combine = staticmethod(math_ops.maximum)


class Minimum(_Merge):
    _combine = staticmethod(math_ops.minimum)


class Average(_Merge):
    _combine = staticmethod(math_ops.add)

    def _finish(self, out, n):
        return math_ops.divide(out, n)


class Subtract(_Merge):
    _combine = staticmethod(math_ops.subtract)

    def build(self, input_shape):
        if _is_shape_list(input_shape) and len(input_shape) != 2:
            raise ValueError(f"A `Subtract` layer should be called on exactly 2 inputs. Received: "
                             f"input_shape={input_shape}")
        super().build(input_shape)

    def call(self, inputs):
        if len(inputs) != 2:
            raise ValueError(f"A `Subtract` layer should be called on exactly 2 inputs. Received: inputs={inputs}")
        return super().call(inputs)


class Concatenate(Layer):
    def __init__(self, axis=-1, **kwargs):
        super().__init__(**kwargs)
        self.axis = axis

    def build(self, input_shape):
        if not _is_shape_list(input_shape):
            raise ValueError(f"A `Concatenate` layer should be called on a list of at least 1 input. Received: "
                             f"input_shape={input_shape}")
        self.compute_output_shape(input_shape)
        self.built = True

    def compute_output_shape(self, input_shape):
        if not _is_shape_list(input_shape):
            raise ValueError(f"A `Concatenate` layer should be called on a list of inputs. Received: "
                             f"input_shape={input_shape}")
        error = ValueError(f"A `Concatenate` layer requires inputs with matching shapes except for the "
                           f"concatenation axis. Received: input_shape={input_shape}")
        rank = len(input_shape[0])
        if any(len(s) != rank for s in input_shape):
            raise error
        axis = self.axis % rank
        out = list(input_shape[0])
        for s in input_shape[1:]:
            for i, (a, b) in enumerate(zip(out, s)):
                if i == axis:
                    out[i] = None if a is None or b is None else a + b
                elif a is None:
                    out[i] = b
                elif b is not None and a != b:
                    raise error
        return tuple(out)

    def call(self, inputs):
        return array_ops.concat(list(inputs), axis=self.axis)

    def compute_mask(self, inputs, mask=None):
        """Keras 3's: each input's mask (all True for an unmasked one) widened to the input's
        shape, concatenated along ``axis``, then any() over the last axis."""
        masks = _mask_list(inputs, mask)
        if masks is None or all(m is None for m in masks):
            return None
        full = []
        for x, m in zip(inputs, masks):
            if m is None:
                m = math_ops.ones_like(x, dtype="bool")
            elif m.shape.rank < x.shape.rank:
                m = math_ops.logical_or(array_ops.expand_dims(m, -1), math_ops.zeros_like(x, dtype="bool"))
            full.append(m)
        return reduction_ops.reduce_any(array_ops.concat(full, axis=self.axis), axis=-1)


class Dot(Layer):
    """Keras 3's Dot for two inputs both of rank 2 or both of rank 3: a batched dot product over
    ``axes`` (an int or one per input), the vectors L2-normalised first when ``normalize``."""

    def __init__(self, axes, normalize=False, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(axes, int) and (not isinstance(axes, (list, tuple)) or len(axes) != 2
                                          or not all(isinstance(a, int) for a in axes)):
            raise ValueError(f"Invalid format for argument `axes`: expected an integer or a list/tuple of 2 "
                             f"integers. Received: axes={axes}")
        self.axes, self.normalize = axes, normalize

    def _axes(self, shapes):
        axes = (self.axes, self.axes) if isinstance(self.axes, int) else self.axes
        return [a % len(s) for a, s in zip(axes, shapes)]

    def build(self, input_shape):
        if not _is_shape_list(input_shape) or len(input_shape) != 2:
            raise ValueError(f"A `Dot` layer should be called on a list of 2 inputs. Received: "
                             f"input_shape={input_shape}")
        if {len(s) for s in input_shape} not in ({2}, {3}):
            raise NotImplementedError("jitgrad's Dot takes two inputs of rank 2 or two of rank 3.")
        a0, a1 = self._axes(input_shape)
        d0, d1 = input_shape[0][a0], input_shape[1][a1]
        if d0 is not None and d1 is not None and d0 != d1:
            raise ValueError(f"Incompatible input shapes: axis values {d0} (at axis {a0}) != {d1} (at axis {a1}). "
                             f"Full input shapes: {input_shape[0]}, {input_shape[1]}")
        self.built = True

    def compute_output_shape(self, input_shape):
        a0, a1 = self._axes(input_shape)
        s0 = [d for i, d in enumerate(input_shape[0]) if i not in (0, a0)]
        s1 = [d for i, d in enumerate(input_shape[1]) if i not in (0, a1)]
        out = (input_shape[0][0],) + tuple(s0 + s1)
        return out if len(out) > 1 else out + (1,)

    def compute_mask(self, inputs, mask=None):
        return None        # Keras 3's: a dot product keeps no mask

    def call(self, inputs):
        x, y = inputs
        a0, a1 = self._axes([x.shape.as_list(), y.shape.as_list()])
        if self.normalize:
            x, y = nn_ops.l2_normalize(x, axis=a0), nn_ops.l2_normalize(y, axis=a1)
        if x.shape.rank == 2:      # a per-sample dot product: (batch, 1)
            return reduction_ops.reduce_sum(math_ops.multiply(x, y), axis=1, keepdims=True)
        # (b, i, k) @ (b, k, j): the contracted axis last in x and first (after batch) in y
        x = x if a0 == 2 else array_ops.transpose(x, [0, 2, 1])
        y = y if a1 == 1 else array_ops.transpose(y, [0, 2, 1])
        return linalg_ops.matmul(x, y)


def add(inputs, **kwargs):
    return Add(**kwargs)(inputs)


def subtract(inputs, **kwargs):
    return Subtract(**kwargs)(inputs)


def multiply(inputs, **kwargs):
    return Multiply(**kwargs)(inputs)


def average(inputs, **kwargs):
    return Average(**kwargs)(inputs)


def maximum(inputs, **kwargs):
    return Maximum(**kwargs)(inputs)


def minimum(inputs, **kwargs):
    return Minimum(**kwargs)(inputs)


def concatenate(inputs, axis=-1, **kwargs):
    return Concatenate(axis=axis, **kwargs)(inputs)


def dot(inputs, axes=-1, normalize=False, **kwargs):
    return Dot(axes=axes, normalize=normalize, **kwargs)(inputs)
