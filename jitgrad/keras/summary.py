"""``Model.summary()``: Keras 3's table (as its rich console prints it at the
default width): one row per layer with "name (Type)", the output shape (batch
None, "?" before the layer is built) and its parameter count, then the totals
with their float32 sizes. A functional model that is not a chain of single-input
calls gets Keras 3's fourth column, "Connected to" (its narrower widths). Text
too wide for its column wraps at spaces, and a word still too wide ends in "…",
as rich's cells do."""
import numpy as np

from .. import nest
from .functional import KerasTensor, call_arguments, nodes_in_order

_WIDTHS = (31, 22, 13)
_CONNECTED_WIDTHS = (19, 17, 10, 17)


def _wrap(text, width):
    lines, current = [], ""
    for word in text.split(" "):
        candidate = word if not current else f"{current} {word}"
        if len(candidate) <= width or not current:
            current = candidate
        else:
            lines.append(current)
            current = word
    lines.append(current)
    return [line if len(line) <= width else line[:width - 1] + "…" for line in lines]


def _row(cells, widths, left, mid, right, aligns):
    wrapped = [_wrap(c, w) for c, w in zip(cells, widths)]
    height = max(len(w) for w in wrapped)
    out = []
    for i in range(height):
        parts = [lines[i] if i < len(lines) else "" for lines in wrapped]
        out.append(left + mid.join(f" {c:{a}{w}} " for c, a, w in zip(parts, aligns, widths)) + right)
    return out


def _rule(widths, left, mid, right, fill):
    return left + mid.join(fill * (w + 2) for w in widths) + right


def readable_size(nbytes):
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if nbytes / 1024 < 1:
            return f"{nbytes:.2f} {unit}"
        nbytes /= 1024
    return f"{nbytes:.2f} PB"


def _shape_text(layer):
    shape = getattr(layer, "_output_shape", None)
    return "?" if shape is None or not layer.built else "(" + ", ".join(str(d) for d in shape) + \
        ("," if len(shape) == 1 else "") + ")"


def _params_text(layer):
    return f"{layer.count_params():,}" if layer.built else "0 (unbuilt)"


def _count(weights):
    return int(sum(np.prod(w.shape.as_list(), dtype=np.int64) for w in weights))


def _connections(model):
    """{id(layer): "Connected to" text} for a functional model that is not a chain (Keras 3's
    sequential_like test: one input, each call reading one tensor, each layer called once), else None."""
    if not getattr(model, "_functional", False):
        return None
    nodes = nodes_in_order(model._outputs)
    reads = [[t for t in nest.flatten(call_arguments(node)) if isinstance(t, KerasTensor)] for node in nodes]
    layers = [node[0] for node in nodes]
    read_ids = [id(t) for r in reads for t in r]
    if len(model._inputs) == 1 and all(len(r) == 1 for r in reads) and len(set(map(id, layers))) == len(layers) \
            and len(set(read_ids)) == len(read_ids):
        return None
    index, count = {}, {}
    for node in nodes:
        index[id(node)] = count.get(id(node[0]), 0)
        count[id(node[0])] = index[id(node)] + 1
    out = {}
    for node, r in zip(nodes, reads):
        names = [f"{t.name}[0][0]" if t._node is None else f"{t._node[0].name}[{index[id(t._node)]}][{t.index}]"
                 for t in r]
        text = ", ".join(names)
        out[id(node[0])] = f"{out[id(node[0])]}, {text}" if id(node[0]) in out else text
    return out


def summary_text(model):
    connections = _connections(model)
    widths = _WIDTHS if connections is None else _CONNECTED_WIDTHS
    header = ("Layer (type)", "Output Shape", "Param #") + (() if connections is None else ("Connected to",))
    aligns = ("<", "<", ">", "<")[:len(widths)]
    lines = [f'Model: "{model.name}"', _rule(widths, "┏", "┳", "┓", "━")]
    lines += _row(header, widths, "┃", "┃", "┃", aligns)
    lines.append(_rule(widths, "┡", "╇", "┩", "━"))
    for i, layer in enumerate(model.layers):
        cells = (f"{layer.name} ({type(layer).__name__})", _shape_text(layer), _params_text(layer))
        if connections is not None:
            cells += (connections.get(id(layer), "-"),)
        if i:
            lines.append(_rule(widths, "├", "┼", "┤", "─"))
        lines += _row(cells, widths, "│", "│", "│", aligns)
    lines.append(_rule(widths, "└", "┴", "┘", "─"))
    trainable, frozen = _count(model.trainable_weights), _count(model.non_trainable_weights)
    for label, n in (("Total", trainable + frozen), ("Trainable", trainable), ("Non-trainable", frozen)):
        lines.append(f" {label} params: {n:,} ({readable_size(n * 4)})")
    return "\n".join(lines)
