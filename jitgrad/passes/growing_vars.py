"""Loop variables that grow by appending rows: ``x = tf.concat([x, rows], 0)``
under a ``None`` shape invariant (an accumulator, a dynamically sized
TensorArray written in order).

Such a variable changes shape every iteration, so its loop cannot be
specialised to static shapes as it stands. But when the body reads the
variable *only* as the first operand of that concat (the cond does not read
it, nothing else in the body does, and it is not itself saved), each
iteration's new rows do not depend on the old ones: the body is specialised
with the variable as an empty ``[0, *rest]`` tensor, its output is then just
the rows appended, and the compiled loop keeps the variable in a growing
buffer (codegen/lower_growing.py). The attribute ``grow_vars`` lists them; the
interpreter's While kernel (ops/control_flow_ops.py) honours it the same way.
Anything else that changes shape keeps the graph regions: it runs in the
interpreter, and ``explain`` says why.
"""


def _reads(func, t, ignored=()):
    """What in ``func`` reads tensor ``t``: (the ops consuming it, how many outputs
    it is, not counting the output positions in ``ignored``)."""
    return t.consumers(), sum(1 for j, o in enumerate(func.outputs) if o is t and j not in ignored)


def appended_vars(attrs, changed, in_shapes, unread_ys=()):
    """``changed`` (var indices) when every one follows the append pattern, else None.
    in_shapes: the vars' entry shapes; unread_ys: the stacked outputs nothing in the
    run reads (a gradient's saved values, built but not fetched: they are dropped)."""
    body, cond = attrs["body"], attrs["cond"]
    ignored = {attrs["n_vars"] + j for j in unread_ys}
    for k in changed:
        shape = in_shapes[k]
        if shape is None or not shape:
            return None
        ph, out = body.inputs[k], body.outputs[k]
        op = out.op
        if op.type != "ConcatV2" or op.attrs["axis"] % len(shape) != 0:
            return None
        if op.inputs[0] is not ph or any(t is ph for t in op.inputs[1:]):
            return None
        ph_readers, ph_outputs = _reads(body, ph, ignored)
        if ph_readers != [op] or ph_outputs:
            return None
        out_readers, out_outputs = _reads(body, out, ignored)
        if out_readers or out_outputs != 1:   # (saved for a gradient, or read again: not an append)
            return None
        if cond is not None:
            c_readers, c_outputs = _reads(cond, cond.inputs[k])
            if c_readers or c_outputs:
                return None
    return list(changed)
