"""The functional API, lite: ``Input`` gives a symbolic ``KerasTensor``; calling
a layer on one records the call (the layer is built, its output shape found
by running it once on a batch of zeros); ``Model(inputs, outputs)`` replays
the recorded calls on real tensors."""
import numpy as np

from .. import dtypes, nest
from ..shapes import TensorShape
from ..eager import EagerTensor
from .names import unique_name


class KerasTensor:
    """A symbolic layer output: shape (batch dimension None), dtype, and the call that made it."""

    def __init__(self, shape, dtype, node=None, name=None):
        self.shape = TensorShape(shape)
        self.dtype = dtypes.as_dtype(dtype)
        self._node = node    # (layer, inputs structure, extra args, kwargs) or None for an Input
        self.name = name

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


def _zeros_like_spec(kt):
    dims = [1 if d is None else d for d in kt.shape.as_list()]
    return np.zeros(dims, kt.dtype.np)


def symbolic_call(layer, inputs, rest, kwargs):
    """A layer called on KerasTensors: build it, find its output spec, record the call."""
    sample = nest.map_structure(lambda t: EagerTensor(_zeros_like_spec(t)) if isinstance(t, KerasTensor) else t,
                                inputs)
    out = layer(sample, *rest, **dict(kwargs, training=False) if layer._call_has_training else kwargs)
    node = (layer, inputs, rest, kwargs)

    def spec(t):
        dims = t.shape.as_list()
        batch_free = [None] + dims[1:] if dims else dims
        return KerasTensor(batch_free, t.dtype, node, layer.name)
    return nest.map_structure(spec, out)


def run(inputs, outputs, values, training):
    """Evaluates ``outputs`` (KerasTensors) with ``values`` fed to ``inputs``."""
    memo = {id(kt): v for kt, v in zip(inputs, values)}
    results = {}

    def evaluate(kt):
        if id(kt) in memo:
            return memo[id(kt)]
        if kt._node is None:
            raise ValueError(f"Graph disconnected: cannot obtain value for {kt!r}: it is not one of the "
                             "model's inputs.")
        layer, ins, rest, kwargs = kt._node
        key = id(kt._node)
        if key not in results:
            args = nest.map_structure(lambda t: evaluate(t) if isinstance(t, KerasTensor) else t, ins)
            kw = dict(kwargs)
            if layer._call_has_training and "training" not in kw:
                kw["training"] = training
            results[key] = layer(args, *rest, **kw)
        out = results[key]
        memo[id(kt)] = out
        return out
    return nest.map_structure(evaluate, outputs)


def layers_of(outputs):
    """The layers that make ``outputs``, inputs first (each once)."""
    order, seen = [], set()

    def visit(kt):
        if kt._node is None:
            return
        layer, ins, _, _ = kt._node
        for t in nest.flatten(ins):
            if isinstance(t, KerasTensor):
                visit(t)
        if id(layer) not in seen:
            seen.add(id(layer))
            order.append(layer)
    for o in nest.flatten(outputs):
        visit(o)
    return order
