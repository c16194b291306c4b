"""Keras 3's configs of Sequential and functional models, and the models made from them.

A functional model's config lists its layers (each once, the inputs' InputLayers first), each
with its ``inbound_nodes``: the calls that made the model, the KerasTensors in them written
as ``{"class_name": "__keras_tensor__", "config": {"keras_history": [layer name, node
index, output index]}}``; ``input_layers`` / ``output_layers`` name the model's ends the same
way. Rebuilding replays the calls on new ``keras.Input`` tensors."""
from .. import nest
from .functional import Input, KerasTensor, call_arguments, nodes_in_order
from .serialization import deserialize_value, serialize_keras_object


def _input_layer_config(shape, dtype, name):
    return {"module": "keras.layers", "class_name": "InputLayer",
            "config": {"batch_shape": list(shape), "dtype": dtype.name, "sparse": False, "ragged": False,
                       "name": name},
            "registered_name": None}


def built_shape(model):
    """The input shape a Sequential was built for: its Input's, or the first batch's (batch None)."""
    if model._input_spec is not None:
        return model._input_spec
    shape = model.__dict__.get("_build_input_shape")
    return (None,) + tuple(shape[1:]) if isinstance(shape, tuple) and model.built else None


def sequential_config(model):
    layers = []
    if model._input_spec is not None:
        layers.append(_input_layer_config(model._input_spec, model._input_dtype, model._input_name))
    layers += [serialize_keras_object(layer) for layer in model.layers]
    config = {"name": model.name, "trainable": model.trainable, "layers": layers}
    if built_shape(model) is not None:
        config["build_input_shape"] = list(built_shape(model))
    return config


def sequential_from_config(cls, config):
    model = cls(name=config.get("name"), trainable=config.get("trainable", True))
    for entry in config["layers"]:
        if entry.get("class_name") == "InputLayer":
            c = entry["config"]
            model.add(Input(shape=tuple(c["batch_shape"][1:]), batch_size=c["batch_shape"][0],
                            dtype=c.get("dtype"), name=c.get("name")))
        else:
            model.add(deserialize_value(entry))
    if not model.built and config.get("build_input_shape") is not None:
        model.build(tuple(config["build_input_shape"]))
    return model


def functional_config(model):
    nodes = nodes_in_order(model._outputs)
    node_index, per_layer, layer_order = {}, {}, []
    for node in nodes:
        layer = node[0]
        if getattr(layer, "is_operation", False):
            raise NotImplementedError("jitgrad cannot save a functional model with operations on KerasTensors "
                                      "(such as x + y): use the layers (keras.layers.Add, ...).")
        if id(layer) not in per_layer:
            per_layer[id(layer)] = []
            layer_order.append(layer)
        node_index[id(node)] = len(per_layer[id(layer)])
        per_layer[id(layer)].append(node)

    def history(kt):
        if kt._node is None:
            return [kt.name, 0, 0]
        return [kt._node[0].name, node_index[id(kt._node)], kt.index]

    def tensor_ref(value):
        if isinstance(value, KerasTensor):
            return {"class_name": "__keras_tensor__",
                    "config": {"shape": kt_shape(value), "dtype": value.dtype.name, "keras_history": history(value)}}
        return serialize_keras_object(value)

    def kt_shape(kt):
        return kt.shape.as_list()

    layers = []
    for kt in model._inputs:
        entry = _input_layer_config(kt_shape(kt), kt.dtype, kt.name)
        layers.append(dict(entry, name=kt.name, inbound_nodes=[]))
    for layer in layer_order:
        entry = serialize_keras_object(layer)
        inbound = []
        for node in per_layer[id(layer)]:
            ins, rest, kwargs = call_arguments(node)
            inbound.append({"args": nest.map_structure(tensor_ref, [ins] + rest),
                            "kwargs": {k: nest.map_structure(tensor_ref, v) for k, v in kwargs.items()}})
        layers.append(dict(entry, name=layer.name, inbound_nodes=inbound))
    ends = lambda tensors: [history(t) for t in nest.flatten(tensors)]   # noqa: E731
    inputs, outputs = ends(model._inputs), ends(model._outputs)
    if isinstance(model._outputs, dict):          # Keras 3 keeps a dict of outputs by name
        outputs = {k: history(v) for k, v in model._outputs.items()}
    elif len(outputs) == 1 and not isinstance(model._outputs, (list, tuple)):
        outputs = outputs[0]
    return {"name": model.name, "trainable": model.trainable, "layers": layers,
            "input_layers": inputs[0] if len(inputs) == 1 else inputs, "output_layers": outputs}


def _is_ref(value):
    return isinstance(value, dict) and value.get("class_name") == "__keras_tensor__"


def _map_refs(fn, value):
    if _is_ref(value):
        return fn(value)
    if isinstance(value, list):
        return [_map_refs(fn, v) for v in value]
    if isinstance(value, dict) and not ("class_name" in value and "config" in value):
        return {k: _map_refs(fn, v) for k, v in value.items()}
    return deserialize_value(value)


def functional_from_config(cls, config):
    tensors, layers, pending = {}, {}, []
    for entry in config["layers"]:
        if entry.get("class_name") == "InputLayer":
            c = entry["config"]
            shape = c["batch_shape"]
            tensors[(entry["name"], 0, 0)] = Input(shape=tuple(shape[1:]), batch_size=shape[0], dtype=c.get("dtype"),
                                                   name=c.get("name", entry["name"]))
            continue
        layer = deserialize_value({k: v for k, v in entry.items() if k not in ("name", "inbound_nodes")})
        layers[entry["name"]] = layer
        pending += [(layer, entry["name"], i, node) for i, node in enumerate(entry["inbound_nodes"])]
    done = set()        # (layer name, node index): a layer's calls are replayed in their order
    while pending:
        ready = [p for p in pending if (p[2] == 0 or (p[1], p[2] - 1) in done) and all(
            tuple(r["config"]["keras_history"]) in tensors for r in _flat_refs([p[3]["args"], p[3]["kwargs"]]))]
        if not ready:
            raise ValueError("The model config cannot be rebuilt: some layer calls read tensors no call makes.")
        for p in ready[:1]:
            layer, name, index, node = p
            lookup = lambda r: tensors[tuple(r["config"]["keras_history"])]   # noqa: E731
            args = _map_refs(lookup, node["args"])
            kwargs = {k: _map_refs(lookup, v) for k, v in node["kwargs"].items()}
            out = layer(*args, **kwargs)
            for i, t in enumerate(nest.flatten(out)):
                tensors[(name, index, i)] = t
            done.add((name, index))
            pending.remove(p)
    ends = lambda spec: [tensors[tuple(r)] for r in ([spec] if spec and not isinstance(spec[0], list) else spec)]  # noqa: E731,E501
    inputs, spec = ends(config["input_layers"]), config["output_layers"]
    if isinstance(spec, dict):
        outputs = {k: tensors[tuple(v)] for k, v in spec.items()}
    else:
        outputs = ends(spec)
        outputs = outputs[0] if spec and not isinstance(spec[0], list) else outputs
    return cls(inputs=inputs[0] if len(inputs) == 1 else inputs, outputs=outputs, name=config.get("name"),
               trainable=config.get("trainable", True))


def _flat_refs(value):
    if _is_ref(value):
        return [value]
    if isinstance(value, list):
        return [r for v in value for r in _flat_refs(v)]
    if isinstance(value, dict):
        return [r for v in value.values() for r in _flat_refs(v)]
    return []

