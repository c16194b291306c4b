"""Argument and shape rules shared by Keras's windowed layers (Conv1D/2D, the
pooling layers): one copy of the n-tuple check and of the SAME / VALID size rule."""


def normalize_tuple(v, n, what):
    """``v`` (an int or n ints) as an n-tuple of positive ints, else Keras's ValueError."""
    vals = (v,) * n if isinstance(v, int) else tuple(v)
    if len(vals) != n or not all(isinstance(a, int) and a > 0 for a in vals):
        raise ValueError(f"The `{what}` argument must be a tuple of {n} positive integers. Received: {v}")
    return vals


def normalize_padding(padding):
    if str(padding).lower() not in ("valid", "same"):
        raise ValueError(f"The `padding` argument must be a list/tuple or one of {{'same', 'valid'}}. Received: "
                         f"{padding}")
    return padding.upper()


def windowed_shape(input_shape, window, strides, dilation, padding, channels):
    """The channels-last output shape of a window op (conv or pool) over len(window) spatial
    dims: per dim ceil(n / s) for SAME, (n - span) // s + 1 for VALID."""
    out = []
    for n, k, s, d in zip(input_shape[1:1 + len(window)], window, strides, dilation):
        out.append(None if n is None else -(-n // s) if padding == "SAME" else (n - ((k - 1) * d + 1)) // s + 1)
    return (input_shape[0],) + tuple(out) + (channels,)
