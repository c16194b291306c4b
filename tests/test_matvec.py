"""Matrix-vector products (codegen/matvec.py): MatMul / BatchMatMulV2 with one
side a vector, lowered without packing.

Kernel level: many emit_matvec functions compiled into one module and run on
numpy arrays, against a float64 numpy reference with the dot-product error bound
|err| <= (K + 1) eps (|Mat| @ |v|); any split of the outputs at multiples of the
vector width is bit-identical to one call and writes only its own range; NaN and
inf propagate as in numpy; reruns are bit-identical.
Graph level: Session runs compiled vs the reference interpreter (tests/
test_differential.py's harness), for every transpose combination, batches with
broadcasting, inside a while_loop, and the kernel really takes this path.
"""
import ctypes
import re

import numpy as np
import pytest

import jitgrad as tf
from jitgrad.codegen import matvec as mv
from jitgrad.codegen.target import get as get_target
from test_differential import check_close, run_both, _no_disk  # noqa: F401
from test_matmul_kernel import MICROKERNEL_ASM, TARGETS, Case as MatMulCase, compile_cases


def _vw(dtype):
    return get_target().matmul_config(dtype)["vw"]


class Case(MatMulCase):
    """C = op(A) @ op(B) with M == 1 or N == 1 (operands and float64 reference as
    test_matmul_kernel's), run by emit_matvec's function on outputs [lo, hi)."""

    def __init__(self, dtype, batch, M, N, K, ta, tb, rng, bcast_a=False, bcast_b=False, vw=None):
        super().__init__(dtype, batch, M, N, K, ta, tb, bcast_a, bcast_b, rng)
        self.vw = vw or _vw(dtype)
        self.plan = mv.matvec_plan(M, N, K, ta, tb, batch, self.sa, self.sb)
        assert self.plan is not None

    @property
    def L(self):
        return self.plan.L

    def emit(self, module, name):
        self.name = name
        mv.emit_matvec(module, name, self.dtype, self.plan, self.vw)

    def bind(self, engine):
        P = ctypes.c_void_p
        self.fn = ctypes.CFUNCTYPE(None, P, P, P, ctypes.c_int64, ctypes.c_int64)(
            engine.get_function_address(self.name))

    def run(self, out=None, lo=0, hi=None, A=None, B=None):
        A = self.A if A is None else A
        B = self.B if B is None else B
        out = self.new_out() if out is None else out
        mat, vec = (A, B) if self.N == 1 else (B, A)
        self.fn(mat.ctypes.data, vec.ctypes.data, out.ctypes.data, lo, self.L if hi is None else hi)
        return out

    def reference(self, A=None, B=None):
        saved = self.A, self.B
        self.A, self.B = (self.A if A is None else A), (self.B if B is None else B)
        try:
            with np.errstate(invalid="ignore"):     # 0 * inf in the NaN/inf test: NaN, as expected
                return super().reference()
        finally:
            self.A, self.B = saved


def _cases():
    rng = np.random.default_rng(12)
    cases = []
    # sizes around the vector widths (4, 8, 16 lanes), the axpy block (8 vectors) and 1
    sizes = [1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 33, 64, 65, 100, 129, 300]
    for i in range(56):
        dtype = ("float32", "float64")[i % 2]
        L, K = int(rng.choice(sizes)), int(rng.choice(sizes))
        ta, tb = bool(rng.integers(2)), bool(rng.integers(2))
        batch = int(rng.choice([1, 1, 2, 3]))
        ba, bb = (bool(batch > 1 and rng.integers(3) == 0) for _ in range(2))
        M, N = (L, 1) if i % 4 < 2 else (1, L)
        cases.append(Case(dtype, batch, M, N, K, ta, tb, rng, ba, bb))
    # the W7 shapes and every form at a size with full blocks, vector and scalar tails
    for dtype in ("float32", "float64"):
        for ta in (False, True):
            for tb in (False, True):
                cases.append(Case(dtype, 1, 64, 1, 64, ta, tb, rng))
                cases.append(Case(dtype, 2, 1, 203, 37, ta, tb, rng))
                cases.append(Case(dtype, 1, 203, 1, 37, ta, tb, rng))
    cases.append(Case("float32", 1, 1, 1, 1, False, False, rng))      # a scalar product
    cases.append(Case("float64", 1, 1, 1, 70, True, True, rng))      # a dot product
    return cases


@pytest.fixture(scope="module")
def cases():
    cs = _cases()
    engine = compile_cases(cs)
    yield cs
    del engine


def _check(case, C, A=None, B=None):
    ref, bound = case.reference(A, B)
    assert not np.isnan(C).any(), f"{case!r} left outputs unwritten"
    err = np.abs(C.astype(np.float64) - ref)
    assert (err <= bound).all(), f"{case!r}: max err {err.max():g} at {np.argwhere(err > bound)[:5].tolist()}"


def test_plan_forms():
    # N == 1: the matrix is op(A); rows contiguous in k unless A is transposed
    assert mv.matvec_plan(64, 1, 64, False, False, 1, 4096, 64).form == "dot"
    assert mv.matvec_plan(64, 1, 64, True, False, 1, 4096, 64).form == "axpy"
    # M == 1: the matrix is op(B); B^T (N x K) has rows contiguous in k
    assert mv.matvec_plan(1, 64, 32, False, False, 1, 32, 2048).form == "axpy"
    p = mv.matvec_plan(1, 64, 32, False, True, 3, 32, 2048)
    assert (p.form, p.L, p.K, p.mat_stride, p.vec_stride) == ("dot", 64, 32, 2048, 32)
    assert mv.matvec_plan(2, 2, 64, False, False, 1, 128, 128) is None


def test_values_against_numpy(cases):
    for c in cases:
        _check(c, c.run())


def test_bit_identical_reruns(cases):
    for c in cases:
        assert c.run().tobytes() == c.run().tobytes(), c


def test_split_outputs_bit_identical_and_only_own_range(cases):
    for c in cases:
        whole = c.run()
        vw = c.vw
        cuts = sorted({0, c.L} | {k * vw for k in (1, 2, 3, 5) if k * vw < c.L})
        parts = np.full_like(whole, np.nan)
        for lo, hi in zip(cuts, cuts[1:]):
            one = c.run(lo=lo, hi=hi)
            flat = one.reshape(c.batch, c.L)
            assert np.isnan(np.delete(flat, np.s_[lo:hi], axis=1)).all(), f"{c!r} wrote outside [{lo}, {hi})"
            c.run(out=parts, lo=lo, hi=hi)
        assert parts.tobytes() == whole.tobytes(), c
        # an empty or clipped range
        assert np.isnan(c.run(lo=c.L, hi=c.L)).all()
        assert c.run(lo=0, hi=c.L + 100).tobytes() == whole.tobytes()


def test_nan_and_inf_propagate_as_numpy(cases):
    rng = np.random.default_rng(5)
    for c in cases[:40]:
        A, B = c.A.copy(), c.B.copy()
        for X in (A, B):
            flat = X.reshape(-1)
            for v in (np.nan, np.inf, -np.inf):
                flat[rng.integers(flat.size)] = v
        got = c.run(A=A, B=B)
        ref, _ = c.reference(A, B)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(ref), err_msg=repr(c))
        inf = np.isinf(ref)
        np.testing.assert_array_equal(got[inf], ref[inf], err_msg=repr(c))
        fin = np.isfinite(ref)
        assert np.isfinite(got[fin]).all(), c


@pytest.mark.parametrize("level", sorted(TARGETS))
def test_each_target_width_compiles_runs_and_splits_bit_identically(level):
    """AVX-512 (16 / 8 lanes), AVX2 (8 / 4) and the SSE2 baseline (4 / 2): the row-sum
    tree, blocks and tails at every width, with the target's own vector registers."""
    from jitgrad.codegen import target as tg
    t = tg.get(TARGETS[level])
    rng = np.random.default_rng(4)
    cases = []
    for dt in ("float32", "float64"):
        vw = t.matmul_config(dt)["vw"]
        for L, K in ((64, 64), (5, 3), (9, 17), (70, 1), (1, 70), (33, 9)):
            for ta in (False, True):
                cases.append(Case(dt, 2, L, 1, K, ta, False, rng, vw=vw))
                cases.append(Case(dt, 1, 1, L, K, False, ta, rng, vw=vw))
    asm = []
    engine = compile_cases(cases, t, asm)
    assert re.search(MICROKERNEL_ASM[level], asm[0]), "not at the target's vector width"
    if level == "x86-64":
        assert not re.search(r"%[yz]mm", asm[0]) and not re.search(r"\bfmaf?\b", asm[0])
    if level == "avx2":
        assert not re.search(r"%zmm", asm[0])
    if t.missing_on_host():
        return      # inspected, not run: the host cannot execute this target's code
    for c in cases:
        whole = c.run()
        _check(c, whole)
        parts = c.new_out()
        for lo in range(0, c.L, c.vw):
            c.run(out=parts, lo=lo, hi=lo + c.vw)
        assert parts.tobytes() == whole.tobytes(), c
    del engine


# ---------------------------------------------------------------- graph level
def _feed(rng, shape, dt):
    return rng.standard_normal(shape).astype(dt)


def _assert_matmul_close(got, ref, A, B, K, dt):
    """Both within the dot-product bound of the exact product: |got - ref| <= 2 (K+1) eps |A||B|."""
    bound = 2 * (K + 1) * np.finfo(dt).eps * (np.abs(A.astype(np.float64)) @ np.abs(B.astype(np.float64)))
    assert got.shape == ref.shape
    assert (np.abs(got.astype(np.float64) - ref) <= bound).all()


def _workspace_free(g, fetches, feed):
    """The compiled kernel's explain: no GEMM workspace (no packed matmul) was planned."""
    sess = tf.compat.v1.Session(graph=g)
    text = str(sess.explain(fetches, feed))
    assert "-- buffers" in text and "MatMul" in text
    return "matmul workspace" not in text


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("M,N,K", [(64, 1, 64), (1, 64, 64), (13, 1, 5), (1, 33, 70), (1, 1, 9), (100, 1, 3)])
@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_session_matmul_vector_compiled_vs_interpreter(dt, M, N, K, ta, tb):
    rng = np.random.default_rng(M * 1000 + N * 10 + K)
    a_shape, b_shape = ((K, M) if ta else (M, K)), ((N, K) if tb else (K, N))
    g = tf.Graph()
    with g.as_default():
        a = tf.compat.v1.placeholder(dt, a_shape)
        b = tf.compat.v1.placeholder(dt, b_shape)
        c = tf.matmul(a, b, transpose_a=ta, transpose_b=tb)
    feed = {a: _feed(rng, a_shape, dt), b: _feed(rng, b_shape, dt)}
    (x,), (y,) = run_both(g, [c], feed)
    assert y.dtype == x.dtype == dt
    A = feed[a].T if ta else feed[a]
    B = feed[b].T if tb else feed[b]
    _assert_matmul_close(y, x, A, B, K, dt)
    _assert_matmul_close(y, A.astype(np.float64) @ B, A, B, K, dt)
    assert _workspace_free(g, [c], feed)
    sess = tf.compat.v1.Session(graph=g)
    assert sess.run(c, feed).tobytes() == sess.run(c, feed).tobytes()


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_batch_matmul_vector_with_broadcast(dt):
    rng = np.random.default_rng(3)
    g = tf.Graph()
    with g.as_default():
        m = tf.compat.v1.placeholder(dt, [3, 1, 17, 9])
        v = tf.compat.v1.placeholder(dt, [2, 9, 1])
        r = tf.compat.v1.placeholder(dt, [1, 17])
        mv_ = tf.matmul(m, v)                  # (3, 2, 17, 1): v broadcast over the first dim
        vm = tf.matmul(r, m[:, 0])             # (3, 1, 9): r broadcast over the batch
        vmt = tf.linalg.matmul(v, m[0, 0], adjoint_a=True, adjoint_b=True)   # (2, 1, 17)
    feed = {m: _feed(rng, (3, 1, 17, 9), dt), v: _feed(rng, (2, 9, 1), dt), r: _feed(rng, (1, 17), dt)}
    x, y = run_both(g, [mv_, vm, vmt], feed)
    M, V, R = (feed[t].astype(np.float64) for t in (m, v, r))
    refs = [M @ V, R @ M[:, 0], np.swapaxes(V, -1, -2) @ M[0, 0].T]
    for p, q, ref, K in zip(x, y, refs, (9, 17, 9)):
        assert q.shape == ref.shape
        tol = 2 * (K + 1) * np.finfo(dt).eps * np.abs(ref).max() * K
        assert np.abs(q - ref).max() <= tol and np.abs(p - ref).max() <= tol
    assert _workspace_free(g, [mv_, vm, vmt], feed)


def test_nan_inf_through_session_as_numpy():
    g = tf.Graph()
    with g.as_default():
        a = tf.compat.v1.placeholder(tf.float32, [20, 20])
        b = tf.compat.v1.placeholder(tf.float32, [20, 1])
        c, d = tf.matmul(a, b), tf.matmul(a, b, transpose_a=True)
    A = np.random.default_rng(0).standard_normal((20, 20)).astype(np.float32)
    A[3, 4], A[7, 7], A[11, 2] = np.nan, np.inf, -np.inf
    B = np.ones((20, 1), np.float32)
    B[2] = 0.0                       # A b: 0 * -inf -> nan in row 11; A^T b: column 2 sums -inf * 1
    x, y = run_both(g, [c, d], {a: A, b: B})
    with np.errstate(invalid="ignore"):
        refs = (A.astype(np.float64) @ B, A.T.astype(np.float64) @ B)
    for p, q, ref in zip(x, y, refs):
        np.testing.assert_array_equal(np.isnan(q), np.isnan(ref))
        np.testing.assert_array_equal(np.isnan(p), np.isnan(ref))
        inf = np.isinf(ref)
        np.testing.assert_array_equal(q[inf], ref[inf].astype(np.float32))
    assert np.isnan(y[0][[3, 11]]).all() and np.isposinf(y[0][7, 0])
    assert np.isnan(y[1][4, 0]) and np.isneginf(y[1][2, 0]) and np.isposinf(y[1][7, 0])


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_recurrence_in_while_loop_with_gradients(dt):
    """W7's shape of program at odd sizes: W x inside the loop, W^T g in its gradient."""
    rng = np.random.default_rng(11)
    n = 37
    g = tf.Graph()
    with g.as_default():
        W = tf.compat.v1.placeholder(dt, [n, n])
        b = tf.compat.v1.placeholder(dt, [n, 1])
        x0 = tf.compat.v1.placeholder(dt, [n, 1])
        T = tf.compat.v1.placeholder(tf.int32, [])
        _, xT = tf.while_loop(lambda t, x: t < T, lambda t, x: (t + 1, tf.tanh(tf.matmul(W, x) + b)), [0, x0])
        loss = tf.reduce_sum(xT)
        gW, gx = tf.gradients(loss, [W, x0])
    feed = {W: (rng.standard_normal((n, n)) * 0.8 / np.sqrt(n)).astype(dt), b: _feed(rng, (n, 1), dt) * 0.1,
            x0: _feed(rng, (n, 1), dt)}
    for steps in (0, 1, 9):
        x, y = run_both(g, [xT, loss, gW, gx], {**feed, T: steps})
        for i, (p, q) in enumerate(zip(x, y)):
            check_close(p, q, dt, f"fetch {i} T={steps}")
    # hand-derived reference (float64 forward, reverse loop)
    Wv, bv, xv = (feed[t].astype(np.float64) for t in (W, b, x0))
    xs = [xv]
    for _ in range(9):
        xs.append(np.tanh(Wv @ xs[-1] + bv))
    gh, gWr = np.ones_like(xv), np.zeros_like(Wv)
    for t in range(9, 0, -1):
        gz = gh * (1 - xs[t] ** 2)
        gWr += gz @ xs[t - 1].T
        gh = Wv.T @ gz
    rt = 1e-4 if dt == np.float32 else 1e-10
    np.testing.assert_allclose(y[2], gWr, rtol=rt, atol=rt)
    np.testing.assert_allclose(y[3], gh, rtol=rt, atol=rt)
    assert _workspace_free(g, [loss, gW, gx], {**feed, T: 3})


@pytest.fixture
def threads():
    from jitgrad.codegen import parallel
    yield parallel.set_num_threads
    parallel.set_num_threads(None)


@pytest.mark.parametrize("ta", [False, True])
def test_large_matvec_split_across_threads_bit_identical(threads, ta):
    """A matvec big enough for the kernel's threads (outputs split at multiples of the
    vector width): the same bits for any thread count, and numpy's values."""
    from jitgrad import compiler
    M, K = 2053, 8200          # 2 M K >= PAR_MIN_FLOPS; odd sizes: a short last block and a K tail
    rng = np.random.default_rng(8)
    g = tf.Graph()
    with g.as_default():
        a = tf.compat.v1.placeholder(tf.float32, (K, M) if ta else (M, K))
        x = tf.compat.v1.placeholder(tf.float32, (K, 1))
        y = tf.matmul(a, x, transpose_a=ta) * 2.0
    feed = {a: _feed(rng, (K, M) if ta else (M, K), np.float32), x: _feed(rng, (K, 1), np.float32)}
    s = tf.compat.v1.Session(graph=g)
    plan = compiler.make_plan(s, [y], list(feed.items()))
    assert plan.kernel.meta["parallel"]
    rep = s.explain([y], feed)
    assert any("MatMul" in h and "parallel" in h for h, _ in rep.groups), rep.groups
    res = {}
    for t in (1, 2, 3):
        threads(t)
        res[t] = [s.run(y, feed).tobytes() for _ in range(2)]
    assert len({r for rs in res.values() for r in rs}) == 1
    A = feed[a].astype(np.float64)
    A = A.T if ta else A
    got = np.frombuffer(res[1][0], np.float32).reshape(M, 1)
    bound = 2 * (K + 1) * np.finfo(np.float32).eps * (np.abs(A) @ np.abs(feed[x].astype(np.float64)))
    assert (np.abs(got - 2 * (A @ feed[x])) <= bound).all()
