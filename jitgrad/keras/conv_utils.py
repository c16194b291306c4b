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


def check_windowed_input(layer, inputs, rank, kernel_shape):
    """Keras 3's checks before a convolution runs, as ValueErrors (the op's own errors would be
    InvalidArgumentError): the InputSpec's min_ndim (rank + 2), then
    compute_conv_output_shape's "zero or negative" output size."""
    dims = inputs.shape.as_list() if inputs.shape.rank is not None else None
    if dims is None:
        return
    if len(dims) < rank + 2:
        raise ValueError(f"Input 0 of layer '{layer.name}' is incompatible with the layer: expected min_ndim="
                         f"{rank + 2}, found ndim={len(dims)}. Full shape received: {tuple(dims)}")
    if len(dims) != rank + 2:      # (Keras's conv op: no extra batch axes)
        raise ValueError(f"Kernel shape must have the same length as input, but received kernel of shape "
                         f"{tuple(kernel_shape)} and input of shape {tuple(dims)}.")
    out = layer.compute_output_shape(tuple(dims))
    if any(d is not None and d <= 0 for d in list(out)[1:1 + rank]):
        raise ValueError(f"Computed output size would be zero or negative. Received `inputs shape={tuple(dims)}`, "
                         f"`kernel shape={tuple(kernel_shape)}`, `dilation_rate={list(layer.dilation_rate)}`, "
                         f"`strides={tuple(layer.strides)}`, `padding={layer.padding.lower()}`.")
