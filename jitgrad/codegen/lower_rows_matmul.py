"""MatMul on values of run-time rows (lower_rows.py plans them, this file emits them).

Two forms cover a layer applied to every row and both of its gradients:

* ``rows`` -- C[R, N] = A[R, K] @ op(B), A of run-time rows R, B static (K x N or, with
  transpose_b, N x K): the packed GEMM of matmul.py with M a bound and the rows
  [0, R) passed at run time (it only ever reads rows [row_begin, row_end) of a
  row-major A, so M is no more than an upper bound there). This is the forward
  projection and the input gradient dY @ W^T.
* ``kt`` -- C[K, N] = A[R, K]^T @ B[R, N], both of the same run-time rows (the sum
  runs over them): the weight gradient. C is zeroed, then every row r adds
  A[r, i] * B[r, :] to C[i, :] in r order -- a fixed k-i-j order, so every element
  is summed the same way whatever R is, bit-identical run to run.

* ``bmm`` -- BatchMatMulV2 of rank-3 result [R, M, N] (adj_x / adj_y), each operand
  [R, ...] of run-time rows, [1, ...] or a static matrix (broadcast over the rows): per
  row, each element a dot product over K in k order (bit-identical run to run), vectors
  along N. Integer MatMul over rows (``rows`` / ``kt`` are float-only GEMMs) takes the
  same loops, the [R, K] operand seen as [R, 1, K].

The GEMM forms take float32 / float64 only; complex (conjugating adjoints) is not
planned (the interpreter runs it)."""
from .irutil import Buffer, c64, const, load_buf, reg_type, store_buf, vec_type
from . import matmul as mm

# the M given to the GEMM generator for run-time rows: only an upper bound on the rows
# a call may pass (it sizes the A block as min(MC, M) rows and offsets batches by M * N,
# batch 0 here); the workspace does not depend on it past MC rows
ROWS_BOUND = 1 << 40


def how(program, n, dyn):
    """"rows", "kt" or None (not lowered here) for MatMul node n; dyn: its operands
    of run-time rows."""
    dt = n.outputs[0][1]
    if n.op == "BatchMatMulV2":
        return _bmm_how(program, n, dyn)
    if n.op != "MatMul" or not (dt.is_floating or dt.is_integer) or dt.is_complex:
        return None
    a, bv = n.inputs
    ta, tb = n.attrs["transpose_a"], n.attrs["transpose_b"]
    gemm = dt.name in ("float32", "float64")
    if not ta and a in dyn and bv not in dyn:
        return "rows" if gemm else "introws"
    if ta and not tb and a in dyn and bv in dyn:
        return "kt"
    return None


def _bmm_how(program, n, dyn):
    dt = n.outputs[0][1]
    if len(n.outputs[0][0]) != 3 or dt.is_complex or not (dt.is_floating or dt.is_integer):
        return None
    for v in n.inputs:
        s = program.shape(v)
        if len(s) not in (2, 3) or (v not in dyn and len(s) == 3 and s[0] != 1):
            return None
    return "bmm"


def _gemm_args(kb, node):
    bsh = kb.shape(node.inputs[1])
    tb = node.attrs["transpose_b"]
    K = kb.shape(node.inputs[0])[1]
    N = bsh[0] if tb else bsh[1]
    dt = node.outputs[0][1]
    return dt, N, K, tb, kb.target.matmul_config(dt.name)


def dry(kb, node, how_):
    """Asks for the GEMM's workspace in the kernel's dry run (kernel._dry_run)."""
    if how_ == "rows":
        dt, N, K, tb, cfg = _gemm_args(kb, node)
        if N and K:
            kb.scratch_buffer((mm.workspace_elems(dt.name, 1, ROWS_BOUND, N, K, False, tb, cfg),), dt,
                              "matmul workspace (run-time rows)")


def emit(kb, node, outs, rows, how_, a, bv):
    """C = the product; a, bv: the operands' buffers (Rows where of run-time rows);
    rows: the live row count (0 after a failure: nothing read or written)."""
    if how_ == "introws":   # C [R, N] = A [R, K] @ op(B): rows of one-row products
        C, K = outs[0], a.shape[1]
        bmm(kb, Buffer(C.ptr, (None, 1, C.shape[1]), C.dtype), rows, Buffer(a.ptr, (None, 1, K), a.dtype), bv,
             False, node.attrs["transpose_b"], (True, False))
        return
    if how_ == "bmm":
        bmm(kb, outs[0], rows, a, bv, node.attrs["adj_x"], node.attrs["adj_y"],
             tuple(kb.shape(v)[0] is None for v in node.inputs))
        return
    (_kt if how_ == "kt" else _rows)(kb, node, outs[0], rows, a, bv)


def _rows(kb, node, C, rows, A, B):
    dt, N, K, tb, cfg = _gemm_args(kb, node)
    if N == 0:
        return
    if K == 0:   # an empty sum: zeros
        with kb.loop(kb.b.mul(rows, c64(N))) as i:
            store_buf(kb.b, Buffer(C.ptr, (None,), dt), [(i, 0)], const(dt, 0), 1)
        return
    work = kb.scratch_buffer((mm.workspace_elems(dt.name, 1, ROWS_BOUND, N, K, False, tb, cfg),), dt,
                             "matmul workspace (run-time rows)")
    fn = mm.emit_matmul(kb.b.module, kb.unique_name("mmrows"), dt.name, 1, ROWS_BOUND, N, K, False, tb,
                        0, 0, cfg)
    kb.b.call(fn, [A.ptr, B.ptr, C.ptr, work.ptr, c64(0), rows])


def _kt(kb, node, C, rows, A, B):
    b = kb.b
    dt = node.outputs[0][1]
    K, N = C.shape
    if K * N == 0:
        return
    kb.emit_nest(C, lambda idx, W: const(dt, 0, W))
    W = kb.target.lanes(dt.size)
    W = W if N >= W else 1
    nv = N - N % W
    Ar = Buffer(A.ptr, (None, K), dt)
    Br = Buffer(B.ptr, (None, N), dt)
    with kb.loop(rows) as r, kb.loop(K) as i:
        for lanes, start, stop in ((W, 0, nv), (1, nv, N)):   # vectors, then the columns left
            if start == stop:
                continue
            a = load_buf(b, Ar, [(r, 0), (i, 0)], lanes)   # A[r, i] in every lane
            with kb.loop(stop, start, lanes) as j:
                jj = (j, 1 if lanes > 1 else 0)
                acc = load_buf(b, C, [(i, 0), jj], lanes)
                y = load_buf(b, Br, [(r, 0), jj], lanes)
                store_buf(b, C, [(i, 0), jj], _madd(b, dt, acc, a, y), lanes)


def _madd(b, dt, acc, x, y):
    return b.fadd(acc, b.fmul(x, y)) if dt.is_floating else b.add(acc, b.mul(x, y))


def bmm(kb, C, rows, A, B, adj_x, adj_y, dyn):
    """C [rows, M, N] = op(A) @ op(B) per row; dyn: per operand, True where it has C's
    run-time rows (its row r read for C's row r), False where it has one matrix, or an
    i1 saying its run-time rows are 1, broadcast against C's (lower_rows_broadcast.py)."""
    b = kb.b
    dt = C.dtype
    _, M, N = C.shape
    K = A.shape[-2] if adj_x else A.shape[-1]
    if M * N == 0:
        return

    def at(buf, is_dyn, r, p, q, adj):
        """The index of op(buf)[row r][p, q]."""
        if len(buf.shape) == 2:
            return [q, p] if adj else [p, q]
        lead = [(r if is_dyn is True else c64(0) if is_dyn is False else b.select(is_dyn, c64(0), r), 0)]
        return lead + ([q, p] if adj else [p, q])

    with kb.loop(rows) as r:
        row = Buffer(b.gep(C.ptr, [b.mul(r, c64(M * N))]), (M, N), dt)

        def dot(idx, W):
            acc = kb.alloca(vec_type(reg_type(dt), W))
            b.store(const(dt, 0, W), acc)
            with kb.loop(K) as k:
                x = load_buf(b, A, at(A, dyn[0], r, idx[0], (k, 0), adj_x), W)   # the same in every lane
                y = load_buf(b, B, at(B, dyn[1], r, (k, 0), idx[1], adj_y), W)
                b.store(_madd(b, dt, b.load(acc), x, y), acc)
            return b.load(acc)
        kb.emit_nest(row, dot)
