"""``keras.layers.TimeDistributed`` and ``keras.layers.Bidirectional``, as Keras 3 runs them:
a layer applied to each time step (a Python loop over a static time axis, stacked), and a
recurrent layer run forwards and backwards over copies of it, the outputs merged."""
import warnings

from .. import context
from ..ops import array_ops
from .base_layer import Layer

MERGE_MODES = ("sum", "mul", "ave", "concat", None)


class TimeDistributed(Layer):
    _supports_masking = True     # Keras 3: the input's mask passes to the output
    def __init__(self, layer, **kwargs):
        if not isinstance(layer, Layer):
            raise ValueError(f"Please initialize `TimeDistributed` layer with a `keras.layers.Layer` instance. "
                             f"Received: {layer}")
        super().__init__(**kwargs)
        self.layer = layer

    def build(self, input_shape):
        if len(input_shape) < 3:
            raise ValueError(f"`TimeDistributed` Layer should be passed an `input_shape` with at least 3 "
                             f"dimensions, received: {tuple(input_shape)}")
        with self._build_scope(), context.name_scope(self.layer.name):
            self.layer.build((input_shape[0],) + tuple(input_shape[2:]))
        self.layer.built = True
        self.built = True

    def call(self, inputs, training=None, mask=None):
        steps = inputs.shape.as_list()[1]
        if steps is None:
            raise NotImplementedError("jitgrad's TimeDistributed needs the time axis known when the layer is called.")
        if mask is not None:
            mask = self._convert_input(mask)
            mask_shape = mask.shape.as_list()
            if len(mask_shape) < 2:
                raise ValueError(f"The `mask` passed to the `TimeDistributed` layer must be at least 2D (e.g., "
                                 f"`(batch_size, timesteps)`), but it has {len(mask_shape)} dimension(s) with "
                                 f"shape {tuple(mask_shape)}.")
            input_shape = inputs.shape.as_list()
            if any(m is not None and i is not None and m != i for m, i in zip(mask_shape[:2], input_shape[:2])):
                raise ValueError(f"The `mask` passed to the `TimeDistributed` layer has a shape "
                                 f"{tuple(mask_shape)} that is incompatible with the input shape "
                                 f"{tuple(input_shape)}. The first two dimensions of the mask (batch size and "
                                 f"timesteps) must match the input's first two dimensions. Expected mask shape "
                                 f"prefix: {tuple(input_shape[:2])}.")
        kwargs = {"training": training} if self.layer._call_has_training else {}
        takes_mask = mask is not None and "mask" in self.layer._call_signature.parameters
        with warnings.catch_warnings():
            # Keras 3 runs the inner layer's call(): no warning that it keeps no mask
            warnings.filterwarnings("ignore", message=".*does not support masking")
            outputs = [self.layer(inputs[:, t], **kwargs, **({"mask": mask[:, t]} if takes_mask else {}))
                       for t in range(steps)]
        return array_ops.stack(outputs, axis=1)


class Bidirectional(Layer):
    _supports_masking = True
    def __init__(self, layer, merge_mode="concat", weights=None, backward_layer=None, **kwargs):
        if not isinstance(layer, Layer):
            raise ValueError(f"Please initialize `Bidirectional` layer with a `keras.layers.Layer` instance. "
                             f"Received: {layer}")
        if backward_layer is not None and not isinstance(backward_layer, Layer):
            raise ValueError(f"`backward_layer` need to be a `keras.layers.Layer` instance. Received: "
                             f"{backward_layer}")
        if merge_mode not in MERGE_MODES:
            raise ValueError(f"Invalid merge mode. Received: {merge_mode}. Merge mode should be one of "
                             '{"sum", "mul", "ave", "concat", None}')
        if weights is not None:
            raise NotImplementedError("jitgrad's Bidirectional takes no initial `weights`; use set_weights.")
        super().__init__(**kwargs)
        base = layer.name.removeprefix("forward_")
        self.forward_layer = layer.clone(name=f"forward_{base}")
        self.backward_layer = backward_layer if backward_layer is not None else layer.clone(
            name=f"backward_{layer.name.removeprefix('backward_')}", go_backwards=not layer.go_backwards)
        for attr in ("return_sequences", "return_state"):
            if getattr(self.forward_layer, attr) != getattr(self.backward_layer, attr):
                raise ValueError(f"Forward layer and backward layer should have the same `{attr}`. "
                                 f"Received: forward_layer.{attr}={getattr(self.forward_layer, attr)}, "
                                 f"backward_layer.{attr}={getattr(self.backward_layer, attr)}")
        for copy in (self.forward_layer, self.backward_layer):
            # Keras 3 forces it: a masked step's output is zeros in the sequences merged
            if getattr(copy, "zero_output_for_mask", None) is not None:
                copy.zero_output_for_mask = copy.return_sequences
        self.merge_mode = merge_mode
        self.return_sequences, self.return_state = layer.return_sequences, layer.return_state

    def build(self, input_shape):
        with self._build_scope():
            for layer in (self.forward_layer, self.backward_layer):
                if not layer.built:
                    layer(array_ops.zeros([1 if d is None else d for d in input_shape]))
        self.built = True

    def call(self, sequences, initial_state=None, mask=None, training=None):
        forward_state = backward_state = None
        if initial_state is not None:
            half = len(initial_state) // 2
            forward_state, backward_state = initial_state[:half], initial_state[half:]
        y = self.forward_layer(sequences, initial_state=forward_state, mask=mask, training=training)
        y_rev = self.backward_layer(sequences, initial_state=backward_state, mask=mask, training=training)
        states = ()
        if self.return_state:
            states = tuple(y[1:]) + tuple(y_rev[1:])
            y, y_rev = y[0], y_rev[0]
        if self.return_sequences:
            y_rev = array_ops.reverse(y_rev, [1])
        if self.merge_mode == "concat":
            output = array_ops.concat([y, y_rev], axis=-1)
        elif self.merge_mode == "sum":
            output = y + y_rev
        elif self.merge_mode == "ave":
            output = (y + y_rev) / 2
        elif self.merge_mode == "mul":
            output = y * y_rev
        else:
            output = (y, y_rev)
        if self.return_state:
            return (output if self.merge_mode is None else (output,)) + states
        return output

    def compute_mask(self, inputs, mask):
        """Keras 3's: the input's mask for sequence outputs (each of the pair without a merge)."""
        if isinstance(mask, list):
            mask = mask[0]
        if self.return_sequences:
            output_mask = mask if self.merge_mode else (mask, mask)
        else:
            output_mask = None if self.merge_mode else (None, None)
        if self.return_state:
            states = (None,) * (2 * self.forward_layer.cell.state_count)
            return (output_mask,) + states if self.merge_mode else output_mask + states
        return output_mask
