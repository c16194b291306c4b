"""Keras 3's recurrent layers: the cells SimpleRNNCell, LSTMCell, GRUCell (one time step,
in Keras 3's order of operations), ``RNN(cell)`` that runs a cell over the time axis, and
SimpleRNN / LSTM / GRU. The time loop is a tf.scan over the time-major sequence: one loop
in the graph, not one copy of the cell per step (an unrolled 50-step LSTM's fit took ~45x
longer to compile)."""
from .. import context, functional_ops, nest
from ..ops import array_ops, linalg_ops, math_ops, nn_ops
from . import activations, initializers
from .base_layer import Layer
from .seed_generator import consume_default_seed


class _Cell(Layer):
    """A cell's weights: kernel (input_dim, gates * units), recurrent_kernel (units, gates * units),
    bias; dropout masks made once per sequence and reused at every step, as in Keras 3."""
    gates, state_count = 1, 1
    _seed_before_initializers = False    # Keras 3's cells make their SeedGenerator first or last

    def __init__(self, units, activation="tanh", use_bias=True, kernel_initializer="glorot_uniform",
                 recurrent_initializer="orthogonal", bias_initializer="zeros", kernel_regularizer=None,
                 recurrent_regularizer=None, bias_regularizer=None, kernel_constraint=None, recurrent_constraint=None,
                 bias_constraint=None, dropout=0.0, recurrent_dropout=0.0, seed=None, **kwargs):
        super().__init__(**kwargs)
        self.kernel_regularizer, self.recurrent_regularizer, self.bias_regularizer = (
            kernel_regularizer, recurrent_regularizer, bias_regularizer)
        self.kernel_constraint, self.recurrent_constraint, self.bias_constraint = (
            kernel_constraint, recurrent_constraint, bias_constraint)
        if not isinstance(units, int) or units <= 0:
            raise ValueError(f"Received an invalid value for argument `units`, expected a positive integer, got "
                             f"{units}.")
        self.units, self.use_bias, self.seed = units, use_bias, seed
        self.activation = activations.get(activation)
        if self._seed_before_initializers:
            consume_default_seed(seed)
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.recurrent_initializer = initializers.get(recurrent_initializer)
        self.bias_initializer = initializers.get(bias_initializer)
        if not self._seed_before_initializers:
            consume_default_seed(seed)
        self.dropout = min(1.0, max(0.0, dropout))
        self.recurrent_dropout = min(1.0, max(0.0, recurrent_dropout))

    def build(self, input_shape):
        n = self.gates * self.units
        self.kernel = self.add_weight(shape=(input_shape[-1], n), initializer=self.kernel_initializer, name="kernel",
                                      regularizer=self.kernel_regularizer, constraint=self.kernel_constraint)
        self.recurrent_kernel = self.add_weight(shape=(self.units, n), initializer=self.recurrent_initializer,
                                                name="recurrent_kernel", regularizer=self.recurrent_regularizer,
                                                constraint=self.recurrent_constraint)
        self.bias = self.add_weight(shape=self._bias_shape(), initializer=self._bias_init(), name="bias",
                                    regularizer=self.bias_regularizer, constraint=self.bias_constraint) \
            if self.use_bias else None
        self.built = True

    def _bias_shape(self):
        return (self.gates * self.units,)

    def _bias_init(self):
        return self.bias_initializer

    def dropout_masks(self, x, h, training):
        """(input mask or None, recurrent mask or None) for one sequence."""
        def mask(like, rate):
            if not training or not 0.0 < rate < 1.0:
                return None
            return nn_ops.dropout(math_ops.ones_like(like), rate, seed=self.seed)
        return mask(x, self.dropout), mask(h, self.recurrent_dropout)

    def call(self, inputs, states, training=False):
        states = list(states) if isinstance(states, (list, tuple)) else [states]
        return self.step(inputs, states, self.dropout_masks(inputs, states[0], training))


class SimpleRNNCell(_Cell):
    _seed_before_initializers = True
    def step(self, x, states, masks):
        h_prev = states[0]
        if masks[0] is not None:
            x = x * masks[0]
        h = linalg_ops.matmul(x, self.kernel)
        if self.bias is not None:
            h = math_ops.add(h, self.bias)
        if masks[1] is not None:
            h_prev = h_prev * masks[1]
        out = self.activation(h + linalg_ops.matmul(h_prev, self.recurrent_kernel))
        return out, [out]


class LSTMCell(_Cell):
    """Gates in Keras's order i, f, c, o; ``unit_forget_bias`` starts the forget gate's bias at 1."""
    gates, state_count = 4, 2

    def __init__(self, units, activation="tanh", recurrent_activation="sigmoid", unit_forget_bias=True, **kwargs):
        super().__init__(units, activation=activation, **kwargs)
        self.recurrent_activation = activations.get(recurrent_activation)
        self.unit_forget_bias = unit_forget_bias

    def _bias_init(self):
        if not self.unit_forget_bias:
            return self.bias_initializer
        u, init = self.units, self.bias_initializer
        return lambda shape, dtype=None: array_ops.concat(
            [init((u,), dtype), initializers.Ones()((u,), dtype), init((2 * u,), dtype)], axis=0)

    def step(self, x, states, masks):
        h_prev, c_prev = states
        if masks[0] is not None:
            x = x * masks[0]
        if masks[1] is not None:
            h_prev = h_prev * masks[1]
        z = math_ops.add(linalg_ops.matmul(x, self.kernel), linalg_ops.matmul(h_prev, self.recurrent_kernel))
        if self.bias is not None:
            z = math_ops.add(z, self.bias)
        z0, z1, z2, z3 = array_ops.split(z, 4, axis=1)
        i, f = self.recurrent_activation(z0), self.recurrent_activation(z1)
        c = f * c_prev + i * self.activation(z2)
        h = self.recurrent_activation(z3) * self.activation(c)
        return h, [h, c]


class GRUCell(_Cell):
    """Gates z, r, h. ``reset_after=True`` (Keras 3's default) applies the reset gate after the
    recurrent matmul and has two bias rows, input and recurrent: bias shape (2, 3 * units)."""
    gates = 3

    def __init__(self, units, activation="tanh", recurrent_activation="sigmoid", reset_after=True, **kwargs):
        super().__init__(units, activation=activation, **kwargs)
        self.recurrent_activation = activations.get(recurrent_activation)
        self.reset_after = reset_after

    def _bias_shape(self):
        return (2, 3 * self.units) if self.reset_after else (3 * self.units,)

    def step(self, x, states, masks):
        h_prev = states[0]
        u = self.units
        input_bias = recurrent_bias = None
        if self.bias is not None:
            input_bias, recurrent_bias = (self.bias[0], self.bias[1]) if self.reset_after else (self.bias, None)
        if masks[0] is not None:
            x = x * masks[0]
        h_in = h_prev * masks[1] if masks[1] is not None else h_prev
        matrix_x = linalg_ops.matmul(x, self.kernel)
        if input_bias is not None:
            matrix_x = math_ops.add(matrix_x, input_bias)
        x_z, x_r, x_h = array_ops.split(matrix_x, 3, axis=-1)
        if self.reset_after:
            inner = linalg_ops.matmul(h_in, self.recurrent_kernel)
            if recurrent_bias is not None:
                inner = inner + recurrent_bias
        else:
            inner = linalg_ops.matmul(h_in, self.recurrent_kernel[:, :2 * u])
        z = self.recurrent_activation(x_z + inner[:, :u])
        r = self.recurrent_activation(x_r + inner[:, u:2 * u])
        if self.reset_after:
            recurrent_h = r * inner[:, 2 * u:]
        else:
            recurrent_h = linalg_ops.matmul(r * h_in, self.recurrent_kernel[:, 2 * u:])
        hh = self.activation(x_h + recurrent_h)
        h = z * h_prev + (1 - z) * hh
        return h, [h]


class RNN(Layer):
    """Runs ``cell`` over axis 1 of (batch, time, features): the last output, or all of them
    (``return_sequences``), followed by the final states (``return_state``). ``go_backwards``
    reads the sequence from its end (and returns the outputs in that reading order, as Keras 3).

    A (batch, time) mask skips steps as Keras 3's backend.rnn does: at a masked step the states
    stay as they were and the output repeats the previous step's (zeros before the first kept
    step), or is zeros with ``zero_output_for_mask``; the last output is the last step's."""
    _supports_masking = True

    def __init__(self, cell, return_sequences=False, return_state=False, go_backwards=False, stateful=False,
                 unroll=False, zero_output_for_mask=False, **kwargs):
        super().__init__(**kwargs)
        if stateful:
            raise NotImplementedError("jitgrad's recurrent layers are not stateful.")
        if isinstance(cell, (list, tuple)):
            # Keras 3 stacks a list of cells (StackedRNNCells); this used to fail on the list's .name
            raise NotImplementedError("jitgrad's RNN runs one cell: stack RNN layers instead of a list of cells.")
        self.cell = cell
        self.return_sequences, self.return_state, self.go_backwards = return_sequences, return_state, go_backwards
        self.unroll = unroll      # accepted; the loop is a scan either way (same numbers)
        self.zero_output_for_mask = zero_output_for_mask

    def clone(self, **overrides):
        """A new layer of this class made from this one's arguments, ``overrides`` replacing some
        (Bidirectional's forward / backward copies; Keras clones by config)."""
        if "_config" not in self.__dict__:
            raise NotImplementedError("jitgrad clones SimpleRNN, LSTM and GRU layers, not RNN(cell).")
        return type(self)(**{**self._config, **overrides})

    def build(self, input_shape):
        if len(input_shape) != 3:
            raise ValueError(f"Input 0 of layer \"{self.name}\" is incompatible with the layer: expected ndim=3, "
                             f"found ndim={len(input_shape)}. Full shape received: {tuple(input_shape)}")
        with self._build_scope(), context.name_scope(self.cell.name):
            self.cell.build((input_shape[0], input_shape[2]))
        self.built = True

    def call(self, sequences, initial_state=None, mask=None, training=False):
        xs = array_ops.transpose(sequences, [1, 0, 2])        # time-major, as scan steps over axis 0
        if self.go_backwards:
            xs = array_ops.reverse(xs, [0])
        if mask is not None:
            mask = nest.flatten(mask)[0]
        zeros = array_ops.tile(math_ops.zeros_like(sequences[:, 0, :1]), [1, self.cell.units])   # (batch, units)
        if initial_state is None:
            states = [zeros] * self.cell.state_count
        else:
            states = [self._convert_input(s) for s in
                      (initial_state if isinstance(initial_state, (list, tuple)) else [initial_state])]
        masks = self.cell.dropout_masks(sequences[:, 0], states[0], training)

        def step(carry, x):
            out, new_states = self.cell.step(x, list(carry[1:]), masks)
            return (out, *new_states)

        def masked_step(carry, x_and_keep):
            x, keep = x_and_keep                     # keep: (batch, 1), True = a step to use
            out, new_states = self.cell.step(x, list(carry[1:]), masks)
            out = math_ops.where(keep, out, zeros if self.zero_output_for_mask else carry[0])
            return (out, *[math_ops.where(keep, new, old) for new, old in zip(new_states, carry[1:])])

        if mask is None:
            outputs, *final_states = functional_ops.scan(step, xs, initializer=(zeros, *states))
        else:
            keep = array_ops.expand_dims(array_ops.transpose(math_ops.cast(self._convert_input(mask), "bool"),
                                                             [1, 0]), -1)      # (time, batch, 1)
            if self.go_backwards:
                keep = array_ops.reverse(keep, [0])
            outputs, *final_states = functional_ops.scan(masked_step, (xs, keep), initializer=(zeros, *states))
        output = array_ops.transpose(outputs, [1, 0, 2]) if self.return_sequences else outputs[-1]
        return (output, *[s[-1] for s in final_states]) if self.return_state else output

    def compute_mask(self, inputs, mask):
        """Keras 3's: the input's mask for the sequence output (none for the last step alone),
        none for the states."""
        mask = nest.flatten(mask)[0] if mask is not None else None
        output_mask = mask if self.return_sequences else None
        return [output_mask] + [None] * self.cell.state_count if self.return_state else output_mask

    def compute_output_shape(self, input_shape):
        batch, units = input_shape[0], self.cell.units
        out = (batch, input_shape[1], units) if self.return_sequences else (batch, units)
        return (out,) + ((batch, units),) * self.cell.state_count if self.return_state else out


def _split_kwargs(kwargs):
    """The RNN layer's own arguments, separated from those of its cell (and its base Layer)."""
    own = {k: kwargs.pop(k) for k in ("return_sequences", "return_state", "go_backwards", "stateful", "unroll",
                                      "zero_output_for_mask", "name", "trainable", "dtype", "input_shape", "input_dim", "activity_regularizer")
           if k in kwargs}
    kwargs.pop("use_cudnn", None)    # no cuDNN kernel here: the generic loop always runs
    return own, kwargs


class SimpleRNN(RNN):
    def __init__(self, units, **kwargs):
        config = dict(kwargs, units=units)
        own, cell_kwargs = _split_kwargs(kwargs)
        super().__init__(SimpleRNNCell(units, name="simple_rnn_cell", dtype=own.get("dtype"), **cell_kwargs), **own)
        self._config = config


class LSTM(RNN):
    def __init__(self, units, **kwargs):
        config = dict(kwargs, units=units)
        own, cell_kwargs = _split_kwargs(kwargs)
        super().__init__(LSTMCell(units, name="lstm_cell", dtype=own.get("dtype"), **cell_kwargs), **own)
        self._config = config


class GRU(RNN):
    def __init__(self, units, **kwargs):
        config = dict(kwargs, units=units)
        own, cell_kwargs = _split_kwargs(kwargs)
        super().__init__(GRUCell(units, name="gru_cell", dtype=own.get("dtype"), **cell_kwargs), **own)
        self._config = config
