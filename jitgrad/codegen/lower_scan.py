"""Scans along axes: Cumsum, Cumprod, CumulativeLogsumexp and ProdExcept (reduce_prod's
gradient helper).

MATERIALISE {op type: fn(kb, node, outs, dry)}.  Both are scalar loops (W=1)
that walk the scanned elements in a fixed order on one thread, reproducing
the reference kernels' sequential numpy accumulation (np.cumsum,
np.cumprod) operation for operation, so results are bit-identical to the
interpreter's and independent of the thread count (CumulativeLogsumexp: the same
steps, with vecmath's exp / log1p for numpy's, within an ulp or so of them).
"""
from ..shapes import normalize_axes
from . import vecmath
from .irutil import c64, const, load_buf, reg_type, store_buf


def _walk(kb, shape, dims, idx, body, reverse=False):
    """Nested loops over ``dims`` (outermost first) in row-major order, or
    its exact reverse; calls body(idx) with idx: dim -> (i64 index, 0)."""
    if not dims:
        body(idx)
        return
    d, n = dims[0], shape[dims[0]]
    if n == 1:
        _walk(kb, shape, dims[1:], {**idx, d: (c64(0), 0)}, body, reverse)
        return
    with kb.loop(n) as i:
        k = kb.b.sub(c64(n - 1), i) if reverse else i
        _walk(kb, shape, dims[1:], {**idx, d: (k, 0)}, body, reverse)


def _scanned(kb, node, dry):
    """(input value, its shape), or (None, None) when there is nothing to emit: a dry
    run (no buffers needed beyond the output) or an empty input."""
    if dry:
        return None, None
    x = node.inputs[0]
    shape = kb.shape(x)
    if any(d == 0 for d in shape):
        return None, None
    return x, shape


def _logsumexp_step(kb, dt):
    """TF's LogSumExp scan step (ops/reduction_ops.py's reference, operation for operation):
    mi / ma with std::min / std::max's NaN rule, ma + log1p(exp(mi - ma)), ma where it is -inf."""
    b = kb.b

    def vm(name, v):
        return vecmath.emit(b, name, [v], fma=kb.target.has_fma, vector_bits=kb.target.vector_bits)

    def step(acc, t):
        mi = b.select(b.fcmp_ordered("<", t, acc), t, acc)
        ma = b.select(b.fcmp_ordered("<", acc, t), t, acc)
        lse = b.fadd(vm("log1p", vm("exp", b.fsub(mi, ma))), ma)
        return b.select(b.fcmp_ordered("==", ma, const(dt, float("-inf"))), ma, lse)
    return step


def _scan(kind):
    def emit(kb, node, outs, dry):
        """out[k] = x[0] + ... + x[k] along the axis (Cumprod: x[0] * ... * x[k];
        CumulativeLogsumexp: log-add-exp steps from -inf; exclusive: up to k-1; reverse:
        from the end), accumulated sequentially in the input dtype like the reference
        kernels (np.cumsum / np.cumprod(..., dtype=x.dtype))."""
        x, shape = _scanned(kb, node, dry)
        if x is None:
            return
        R = len(shape)
        axis = node.attrs["axis"] % R
        n = shape[axis]
        rev, excl = node.attrs["reverse"], node.attrs["exclusive"]
        out = outs[0]
        dt = out.dtype
        b = kb.b
        f = dt.is_floating
        is_product = kind == "prod"
        # TF's scans start at +0.0 (fadd) and 1 (fmul): a sum of -0.0s is +0.0 there
        # (cumsum([-0.]) is [0.]), the reference kernel's too; 1.0 * x == x for every x.
        start = const(dt, 1 if is_product else 0)
        # the first exclusive element is a literal identity (+0.0 or 1), as the reference's
        first = const(dt, 1 if is_product else 0)
        if kind == "logsumexp":     # (TF's reducer starts at -inf, an exclusive scan's first value)
            start = first = const(dt, float("-inf"))
            combine = _logsumexp_step(kb, dt)
        elif is_product:
            combine = b.fmul if f else b.mul
        else:
            combine = b.fadd if f else b.add

        def row(idx):
            acc = kb.alloca(reg_type(dt))
            b.store(start, acc)
            with kb.loop(n) as i:
                k = b.sub(c64(n - 1), i) if rev else i
                full = [idx[d] if d != axis else (k, 0) for d in range(R)]
                s = b.load(acc)
                new = combine(s, kb.gen(x, full, 1))
                val = b.select(b.icmp_signed("==", i, c64(0)), first, s) if excl else new
                store_buf(kb.b, out, full, val, 1)
                b.store(new, acc)
        _walk(kb, shape, [d for d in range(R) if d != axis], {}, row)
    return emit


def _prod_except(kb, node, outs, dry):
    """out[i] = product of the other elements of x[i]'s reduced slice,
    without dividing (zeros exact): the reference kernel's left * right
    exclusive cumulative products over the reduced dims flattened in
    row-major order.  Pass 1 writes the left products, pass 2 walks the
    slice backwards multiplying in the right products."""
    x, shape = _scanned(kb, node, dry)
    if x is None:
        return
    R = len(shape)
    axes = normalize_axes(node.attrs["axis"], R)
    red = list(axes)
    kept = [d for d in range(R) if d not in axes]
    out = outs[0]
    dt = out.dtype
    b = kb.b
    f = dt.is_floating

    def mul(a, c):
        return b.fmul(a, c) if f else b.mul(a, c)

    def row(idx):
        acc = kb.alloca(reg_type(dt))

        def left(i2):
            full = [i2[d] for d in range(R)]
            s = b.load(acc)
            store_buf(kb.b, out, full, s, 1)
            b.store(mul(s, kb.gen(x, full, 1)), acc)

        def right(i2):
            full = [i2[d] for d in range(R)]
            s = b.load(acc)
            store_buf(kb.b, out, full, mul(load_buf(kb.b, out, full, 1), s), 1)
            b.store(mul(s, kb.gen(x, full, 1)), acc)

        b.store(const(dt, 1), acc)
        _walk(kb, shape, red, idx, left)
        b.store(const(dt, 1), acc)
        _walk(kb, shape, red, idx, right, reverse=True)
    _walk(kb, shape, kept, {}, row)


MATERIALISE = {
    "Cumsum": _scan("sum"),
    "Cumprod": _scan("prod"),
    "CumulativeLogsumexp": _scan("logsumexp"),
    "ProdExcept": _prod_except,
}
