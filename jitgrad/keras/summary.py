"""``Model.summary()``: Keras 3's table (as its rich console prints it at the
default width): one row per layer with "name (Type)", the output shape (batch
None, "?" before the layer is built) and its parameter count, then the totals
with their float32 sizes."""
import numpy as np

_WIDTHS = (31, 22, 13)


def _row(cells, left, mid, right, aligns=("<", "<", ">")):
    return left + mid.join(f" {c:{a}{w}} " for c, a, w in zip(cells, aligns, _WIDTHS)) + right


def _rule(left, mid, right, fill):
    return left + mid.join(fill * (w + 2) for w in _WIDTHS) + right


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


def summary_text(model):
    lines = [f'Model: "{model.name}"', _rule("┏", "┳", "┓", "━"),
             _row(("Layer (type)", "Output Shape", "Param #"), "┃", "┃", "┃"), _rule("┡", "╇", "┩", "━")]
    rows = []
    for layer in model.layers:
        rows.append((f"{layer.name} ({type(layer).__name__})", _shape_text(layer), _params_text(layer)))
    for i, cells in enumerate(rows):
        if i:
            lines.append(_rule("├", "┼", "┤", "─"))
        lines.append(_row(cells, "│", "│", "│"))
    lines.append(_rule("└", "┴", "┘", "─"))
    trainable, frozen = _count(model.trainable_weights), _count(model.non_trainable_weights)
    for label, n in (("Total", trainable + frozen), ("Trainable", trainable), ("Non-trainable", frozen)):
        lines.append(f" {label} params: {n:,} ({readable_size(n * 4)})")
    return "\n".join(lines)
