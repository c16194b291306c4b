"""Keras 3's masks: a boolean (batch, steps) tensor a layer attaches to its output as
``_keras_mask`` (True = a step to use); the next layer's ``call(..., mask=)`` receives it,
losses and metrics leave the masked steps out (``losses.apply_mask``)."""
from ..convert import is_tensorlike


def get_keras_mask(x):
    return getattr(x, "_keras_mask", None) if is_tensorlike(x) else None


def set_keras_mask(x, mask):
    """Attaches ``mask`` (or removes it, for None); a no-op on what cannot carry one."""
    if not is_tensorlike(x):
        return
    try:
        if mask is None:
            if getattr(x, "_keras_mask", None) is not None:
                del x._keras_mask
        else:
            x._keras_mask = mask
    except AttributeError:      # a variable: Keras's masks live on tensors only
        pass
