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

Only float32 / float64 (the GEMM's types); others are not planned (the interpreter
runs them)."""
from .irutil import Buffer, c64, const, load_buf, store_buf
from . import matmul as mm

# the M given to the GEMM generator for run-time rows: only an upper bound on the rows
# a call may pass (it sizes the A block as min(MC, M) rows and offsets batches by M * N,
# batch 0 here); the workspace does not depend on it past MC rows
ROWS_BOUND = 1 << 40


def how(program, n, dyn):
    """"rows", "kt" or None (not lowered here) for MatMul node n; dyn: its operands
    of run-time rows."""
    if n.op != "MatMul" or n.outputs[0][1].name not in ("float32", "float64"):
        return None
    a, bv = n.inputs
    ta, tb = n.attrs["transpose_a"], n.attrs["transpose_b"]
    if not ta and a in dyn and bv not in dyn:
        return "rows"
    if ta and not tb and a in dyn and bv in dyn:
        return "kt"
    return None


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
                store_buf(b, C, [(i, 0), jj], b.fadd(acc, b.fmul(a, y)), lanes)
