"""The functional API, lite: ``Input`` gives a symbolic ``KerasTensor``; calling
a layer on one records the call (the layer is built, its output shape found
by running it once on a batch of zeros); ``Model(inputs, outputs)`` replays
the recorded calls on real tensors."""
import numpy as np

from .. import dtypes, nest
from ..convert import convert_to_tensor, is_tensorlike
from ..ops import math_ops
from ..shapes import TensorShape
from ..eager import EagerTensor
from .masking import get_keras_mask
from .names import unique_name


class KerasTensor:
    """A symbolic layer output: shape (batch dimension None), dtype, and the call that made it."""

    def __init__(self, shape, dtype, node=None, name=None, index=0):
        self.shape = TensorShape(shape)
        self.dtype = dtypes.as_dtype(dtype)
        self._node = node    # (layer, inputs structure, extra args, kwargs) or None for an Input
        self.name = name
        self.index = index   # which of the call's flattened outputs this is (LSTM(return_state=True))

    @property
    def ndim(self):
        return self.shape.rank

    def __repr__(self):
        return f"<KerasTensor shape={tuple(self.shape.as_list())}, dtype={self.dtype.name}, name={self.name}>"


def Input(shape=None, batch_size=None, dtype=None, name=None, **kwargs):  # noqa: N802 (Keras's name)
    """``tf.keras.Input``: a symbolic input of per-sample ``shape``."""
    if shape is None:
        raise ValueError("You must pass a `shape` argument.")
    return KerasTensor((batch_size,) + tuple(shape), dtype or dtypes.float32, None, name or unique_name("input_layer"))


def as_input_dtype(value, dtype):
    """Keras 3's (Functional._convert_inputs_to_tensors): a model's input is converted to its
    Input's dtype, so integer data meets a float32 model as floats (a cast, as tf.cast:
    floats into an int32 Input are truncated)."""
    if isinstance(value, np.ndarray) and value.dtype != dtype.np:
        value = convert_to_tensor(value)
    if not is_tensorlike(value) or value.dtype == dtype or isinstance(value, KerasTensor):
        return value          # (ragged / sparse values and the same dtype pass as they are)
    return math_ops.cast(value, dtype)


def _zeros_like_spec(kt):
    dims = [1 if d is None else d for d in kt.shape.as_list()]
    return np.zeros(dims, kt.dtype.np)


def _map_keras_tensors(fn, structure):
    return nest.map_structure(lambda t: fn(t) if isinstance(t, KerasTensor) else t, structure)


def call_arguments(node):
    """A recorded call's (inputs, extra args, kwargs) as one structure: KerasTensors may be in
    any of them (``MultiHeadAttention()(query, value)``)."""
    _, ins, rest, kwargs = node
    return [ins, list(rest), dict(kwargs)]


def symbolic_call(layer, inputs, rest, kwargs):
    """A layer called on KerasTensors: build it, find its output spec, record the call."""
    sample, sample_rest, sample_kwargs = _map_keras_tensors(lambda t: EagerTensor(_zeros_like_spec(t)),
                                                            [inputs, list(rest), dict(kwargs)])
    if layer._call_has_training:
        sample_kwargs["training"] = False
    out = layer(sample, *sample_rest, **sample_kwargs)
    node = (layer, inputs, rest, kwargs)

    def spec(index, t):
        dims = t.shape.as_list()
        batch_free = [None] + dims[1:] if dims else dims
        return KerasTensor(batch_free, t.dtype, node, layer.name, index)
    flat = nest.flatten(out)
    return nest.pack_sequence_as(out, [spec(i, t) for i, t in enumerate(flat)])


def run(inputs, outputs, values, training):
    """Evaluates ``outputs`` (KerasTensors) with ``values`` fed to ``inputs``.

    Masks, as Keras 3's functional models have them: each KerasTensor has a mask fixed when
    the model was built (its layer's ``compute_mask`` of its inputs' such masks), and a layer
    whose ``call`` takes ``mask`` / ``<arg>_mask`` gets those, recorded with the call -- even
    where the tensors' own ``_keras_mask`` differ when the model runs (MultiHeadAttention
    removes its inputs' masks, so an Add of its query and output has none; a pooling after that
    Add still gets the OR of both masks). The outputs carry the masks the run gave them."""
    memo = {id(kt): v for kt, v in zip(inputs, values)}
    built_masks = {id(kt): get_keras_mask(v) for kt, v in zip(inputs, values)}
    results = {}

    def evaluate(kt):
        if id(kt) in memo:
            return memo[id(kt)]
        if kt._node is None:
            raise ValueError(f"Graph disconnected: cannot obtain value for {kt!r}: it is not one of the "
                             "model's inputs.")
        layer = kt._node[0]
        key = id(kt._node)
        if key not in results:
            arguments = call_arguments(kt._node)
            args, rest_values, kw = _map_keras_tensors(evaluate, arguments)
            by_value = {}
            for t in nest.flatten(arguments):
                if isinstance(t, KerasTensor):
                    by_value[id(memo[id(t)])] = built_masks[id(t)]
            previous = layer._populate_masks(args, rest_values, kw, lambda v: by_value.get(id(v)))
            if layer._call_has_training and "training" not in kw:
                kw["training"] = training
            flat = nest.flatten(layer(args, *rest_values, **kw))
            out_masks = nest.flatten(layer.compute_mask(args, previous)) if layer.supports_masking else []
            results[key] = (flat, (list(out_masks) + [None] * len(flat))[:len(flat)])
        outs, out_masks = results[key]
        memo[id(kt)], built_masks[id(kt)] = outs[kt.index], out_masks[kt.index]
        return memo[id(kt)]
    return nest.map_structure(evaluate, outputs)


def layers_of(outputs):
    """The layers that make ``outputs``, inputs first (each once)."""
    order, seen = [], set()

    def visit(kt):
        if kt._node is None:
            return
        layer = kt._node[0]
        for t in nest.flatten(call_arguments(kt._node)):
            if isinstance(t, KerasTensor):
                visit(t)
        if id(layer) not in seen:
            seen.add(id(layer))
            order.append(layer)
    for o in nest.flatten(outputs):
        visit(o)
    return order


def nodes_in_order(outputs):
    """The model's calls (KerasTensor nodes), each after those it reads from."""
    order, seen = [], set()

    def visit(kt):
        node = kt._node
        if node is None or id(node) in seen:
            return
        seen.add(id(node))
        for t in nest.flatten(call_arguments(node)):
            if isinstance(t, KerasTensor):
                visit(t)
        order.append(node)
    for o in nest.flatten(outputs):
        visit(o)
    return order
