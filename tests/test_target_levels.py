"""Whole programs compiled for each ISA level whatever the host (issue 13): the SSE2
baseline (x86-64), AVX2 (haswell) and AVX-512 (skylake-avx512).  For each level:
elementwise vector math (exp, log, tanh, sin in float32 and float64), reductions along
either axis (float32 and float64), a matmul with
its gradients, and a while_loop holding a cond, with the gradient through the loop.
The assembly is always inspected: packed arithmetic at the width the target chose
(codegen/target.py: Target.vector_bits) and nothing wider, no libm call anywhere in
the kernel (only vecmath's own out-of-line functions).  Where this host can execute
the level, the results are compared with numpy (float64 references, derivatives by
hand).  Compiles are shared across the asserts (one per program and level).

Also the regression for the compile that never finished on the baseline (LLVM's loop
vectoriser on vector math of a broadcast operand in a run-time-rows loop,
irutil.not_vectorised): compiled for every level in a child process under a timeout.
"""
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import jitgrad as tf
from jitgrad.codegen import target as tg

LEVELS = {"x86-64": "x86-64", "haswell": "avx2", "skylake-avx512": "avx512"}
_REG = {128: "x", 256: "y", 512: "z"}
_LIBC_MEMORY = {"memcpy", "memset", "memmove", "malloc", "realloc", "free"}
# packed float arithmetic and the register class of its operands
_PACKED = re.compile(r"^\s+v?(?:fn?m(?:add|sub)\d*|mul|add|sub|div|max|min)p[sd]\s+[^\n]*?%([xyz])mm", re.M)


def _session(g, cpu):
    return tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto(jitgrad_target_cpu=cpu))


def _referenced_symbols(asm):
    """Functions the code calls or takes the address of (the JIT's large code model
    calls through a register the address was moved into)."""
    return set(re.findall(r"\bcall\w*\s+([A-Za-z_][\w.]*)", asm)) | set(re.findall(r"\$([A-Za-z_][\w.]*)", asm))


def _check_asm(asm, target, widths=None):
    """Packed arithmetic at the target's width (and none wider); every symbol referenced
    is the kernel's own, vecmath's or libc's memory routines (no libm: exp, sin, fma,
    ... would appear here)."""
    regs = set(_PACKED.findall(asm))
    want = _REG[target.vector_bits] if widths is None else widths
    assert want in regs, (target.describe(), regs)
    assert not any("xyz".index(r) > "xyz".index(want) for r in regs), (target.describe(), regs)
    if target.level == "x86-64":
        assert not re.search(r"^\s+v[a-z]", asm, re.M), "AVX instruction in baseline code"
    assert not _foreign(_referenced_symbols(asm)), _foreign(_referenced_symbols(asm))


def _foreign(symbols):
    """Symbols other than the kernel's, vecmath's and libc's memory routines (block
    copies, a growing loop stack's realloc)."""
    return [s for s in symbols if not s.startswith(("jg_", "jitgrad.vm.")) and s not in _LIBC_MEMORY]


def _compiled(cpu, g, fetches, feed):
    """(explain report, results or None when this host cannot run the level's code)."""
    with _session(g, cpu) as s:
        rep = s.explain(fetches, feed)
        assert rep.target.startswith(f"cpu {cpu}: level {LEVELS[cpu]}"), rep.target
        if tg.get(cpu).missing_on_host():
            return rep, None
        return rep, s.run(fetches, feed)


@pytest.fixture(params=sorted(LEVELS))
def cpu(request):
    t = tg.get(request.param)
    assert t.level == LEVELS[request.param]
    return request.param


def test_vector_math(cpu):
    rng = np.random.default_rng(0)
    n = 1003                      # not a multiple of any width: the remainder loops too
    X32 = rng.uniform(0.05, 6, n).astype(np.float32)
    X64 = rng.uniform(0.05, 6, n)
    g = tf.Graph()
    with g.as_default():
        x32 = tf.compat.v1.placeholder(tf.float32, [n])
        x64 = tf.compat.v1.placeholder(tf.float64, [n])
        fetches = [f(x) for x in (x32, x64) for f in (tf.exp, tf.math.log, tf.tanh, tf.sin)]
    rep, got = _compiled(cpu, g, fetches, {x32: X32, x64: X64})
    target = tg.get(cpu)
    _check_asm(rep.asm, target)
    if got is None:
        return
    for k, X in enumerate((X32, X64)):
        tol = 4e-7 if X.dtype == np.float32 else 1e-15      # a few ulp: vecmath's bounds
        for j, f in enumerate((np.exp, np.log, np.tanh, np.sin)):
            out = got[4 * k + j]
            assert out.dtype == X.dtype
            want = f(X.astype(np.float64))
            np.testing.assert_allclose(out, want, rtol=tol, atol=tol, err_msg=f"{f.__name__} {X.dtype}")


def test_reductions(cpu):
    """Sums along the inner axis (lane accumulators + a fixed tree) and maxima along the
    outer one (the output row vectorised), float64 and float32 (summed in float64 lanes)."""
    rng = np.random.default_rng(3)
    X64 = rng.standard_normal((37, 1003))
    X32 = rng.standard_normal((37, 1003)).astype(np.float32)
    g = tf.Graph()
    with g.as_default():
        x64 = tf.compat.v1.placeholder(tf.float64, X64.shape)
        x32 = tf.compat.v1.placeholder(tf.float32, X32.shape)
        fetches = [tf.reduce_sum(x64, axis=1), tf.reduce_max(x64, axis=0),
                   tf.reduce_sum(x32, axis=1), tf.reduce_mean(x32), tf.reduce_min(x32, axis=0)]
    rep, got = _compiled(cpu, g, fetches, {x64: X64, x32: X32})
    _check_asm(rep.asm, tg.get(cpu))
    if got is None:
        return
    W32 = X32.astype(np.float64)
    np.testing.assert_allclose(got[0], X64.sum(axis=1), rtol=1e-13, atol=1e-13)
    assert np.array_equal(got[1], X64.max(axis=0))
    # float32 sums: float64 accumulation, one rounding to float32 at the end
    np.testing.assert_allclose(got[2], W32.sum(axis=1).astype(np.float32), rtol=2e-7, atol=1e-6)
    np.testing.assert_allclose(got[3], np.float32(W32.mean()), rtol=2e-7, atol=1e-8)
    assert got[2].dtype == got[3].dtype == got[4].dtype == np.float32
    assert np.array_equal(got[4], X32.min(axis=0))


def test_matmul_and_gradient(cpu):
    rng = np.random.default_rng(1)
    A = rng.standard_normal((37, 50)).astype(np.float32)
    B = rng.standard_normal((50, 23)).astype(np.float32)
    C = rng.standard_normal((37, 23)).astype(np.float32)
    g = tf.Graph()
    with g.as_default():
        a = tf.compat.v1.placeholder(tf.float32, A.shape)
        b = tf.compat.v1.placeholder(tf.float32, B.shape)
        y = tf.matmul(a, b)
        loss = tf.reduce_sum(y * tf.constant(C))
        ga, gb = tf.gradients(loss, [a, b])
    rep, got = _compiled(cpu, g, [y, ga, gb], {a: A, b: B})
    target = tg.get(cpu)
    _check_asm(rep.asm, target)
    # the packed GEMM's micro-kernels use the level's blocking (target.matmul_config)
    vw = target.matmul_config("float32")["vw"]
    mms = re.findall(r"^jg_\w+_mm\d+:.*?\.Lfunc_end", rep.asm, re.M | re.S)
    assert len(mms) == 3, "A B, C B^T and A^T C: a packed GEMM function each"
    _check_asm("".join(mms), target, widths=_REG[vw * 32])
    if got is None:
        return
    A64, B64, C64 = (m.astype(np.float64) for m in (A, B, C))
    # d/dA sum(A B * C) = C B^T, d/dB = A^T C
    for out, want in zip(got, (A64 @ B64, C64 @ B64.T, A64.T @ C64)):
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def _loop_reference(X, n):
    """h <- tanh(h) * 0.9 + sin(h) * 0.1 on even steps, exp(-h^2) on odd ones, n steps;
    the sum of h and its derivative in x (elementwise: the product of the steps')."""
    h, d = X.copy(), np.ones_like(X)
    for i in range(n):
        if i % 2 == 0:
            h, d = np.tanh(h) * 0.9 + np.sin(h) * 0.1, d * ((1 - np.tanh(h) ** 2) * 0.9 + np.cos(h) * 0.1)
        else:
            h, d = np.exp(-h * h), d * (-2 * h * np.exp(-h * h))
    return h.sum(), d


def test_while_loop_with_cond_and_gradient(cpu):
    X = np.random.default_rng(2).uniform(-1.5, 1.5, 67)
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float64, X.shape)
        n = tf.compat.v1.placeholder(tf.int32, [])

        def body(i, h):
            h = tf.cond(tf.equal(i % 2, 0), lambda: tf.tanh(h) * 0.9 + tf.sin(h) * 0.1,
                        lambda: tf.exp(-h * h))
            return i + 1, h
        _, hT = tf.while_loop(lambda i, h: i < n, body, [0, x])
        loss = tf.reduce_sum(hT)
        (gx,) = tf.gradients(loss, x)
    rep, got = _compiled(cpu, g, [loss, gx], {x: X, n: 5})
    _check_asm(rep.asm, tg.get(cpu))
    if got is None:
        return
    with _session(g, cpu) as s:       # one kernel for every trip count
        for nv in (0, 5, 6):
            want_loss, want_g = _loop_reference(X, nv)
            got_loss, got_g = s.run([loss, gx], {x: X, n: nv})
            np.testing.assert_allclose(got_loss, want_loss, rtol=1e-13)
            np.testing.assert_allclose(got_g, want_g, rtol=1e-12, atol=1e-14)


# A while_loop's TensorArray stack (rows known at run time, codegen/lower_rows.py) times
# cos of a broadcast scalar: the flat rows loop's remainder held the whole float64 cos of
# a loop-invariant load.  For the baseline (FMA emulated: a deep shared expression DAG)
# LLVM's loop vectoriser never returned; with its hint off that loop compiles at once.
_ROWS_CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    import jitgrad as tf
    from jitgrad.codegen import target as tg
    out = {}
    for cpu in sys.argv[1:]:
        g = tf.Graph()
        with g.as_default():
            x = tf.compat.v1.placeholder(tf.float64, [3])
            w = tf.compat.v1.placeholder(tf.float64, [])
            n = tf.compat.v1.placeholder(tf.int32, [])
            def body(i, h, ta):
                u = tf.tanh(h * 0.9 + 0.1)
                return i + 1, u, ta.write(i, u)
            _, _, ta = tf.while_loop(lambda i, h, ta: i < n, body,
                                     [0, x, tf.TensorArray(tf.float64, size=0, dynamic_size=True)])
            r = ta.stack() * tf.cos(w)
        X = np.array([0.3, -1.2, 2.0])
        feed = {x: X, w: 0.7, n: 4}
        with tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto(jitgrad_target_cpu=cpu)) as s:
            asm = s.explain(r, feed).asm
            got = None if tg.get(cpu).missing_on_host() else s.run(r, feed).tolist()
        h, rows = X, []
        for i in range(4):
            h = np.tanh(h * 0.9 + 0.1)
            rows.append(h * np.cos(0.7))
        out[cpu] = {"got": got, "want": np.array(rows).tolist(),
                    "symbols": sorted(set(__import__("re").findall(r"\\$([A-Za-z_][\\w.]*)", asm)))}
    print(json.dumps(out))
""")


def test_rows_loop_of_broadcast_vector_math_compiles_for_every_level():
    env = dict(os.environ, JITGRAD_CACHE="0", JITGRAD_COMPILE_PROCESS="0")
    env.pop(tg.ENV_CPU, None)
    env.pop(tg.ENV_FEATURES, None)
    try:
        proc = subprocess.run([sys.executable, "-c", _ROWS_CHILD, *sorted(LEVELS)], env=env,
                              capture_output=True, text=True, timeout=180)
    except subprocess.TimeoutExpired:
        pytest.fail("compiling the rows loop did not finish in 180 s (LLVM's loop vectoriser?)")
    assert proc.returncode == 0, proc.stderr[-3000:]
    import json
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    for cpu, res in out.items():
        assert not _foreign(res["symbols"]), (cpu, res["symbols"])
        if res["got"] is not None:
            np.testing.assert_allclose(res["got"], res["want"], rtol=1e-14, err_msg=cpu)
    assert out["x86-64"]["got"] is not None      # every x86-64 host runs the baseline
