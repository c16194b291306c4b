"""LLVM's optimiser in a child process (jitgrad/codegen/compile_server.py): the same object
code as compiling in this process, a parent whose memory stays flat however many kernels it
compiles, and a clear error when the child dies."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import jitgrad as tf
from jitgrad.codegen import backend, compile_server

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(script, **env):
    full_env = dict(os.environ, JITGRAD_CACHE="0", PYTHONPATH=ROOT, **env)
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True,
                       env=full_env, timeout=600)
    assert r.returncode == 0, r.stderr
    return r.stdout


GRAPHS = """
    import gc, numpy as np, jitgrad as tf
    from jitgrad import compiler

    def rss_mb():
        return int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20

    def one(i):
        g = tf.Graph()
        with g.as_default():
            x = tf.compat.v1.placeholder(tf.float32, (i % 50 + 1, i // 50 + 1))
            y = tf.reduce_sum(tf.exp(x) * 2.0 + tf.tanh(x))
        with tf.compat.v1.Session(graph=g) as s:
            return s.run(y, {x: np.full((i % 50 + 1, i // 50 + 1), 0.5, np.float32)})
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="RSS is read from /proc")
def test_memory_stays_flat_over_many_distinct_kernels():
    """150 distinct kernels: in-process compiles kept ~300 KB of LLVM's memory each (45 MB);
    through the child the parent grows by a few MB at most after clear_cache."""
    out = _run(GRAPHS + """
    for i in range(20):
        one(i)
    compiler.clear_cache()
    base = rss_mb()
    for i in range(20, 170):
        one(i)
    assert tf.cache_info()["compiles"] == 150
    compiler.clear_cache()
    print("GROWTH", rss_mb() - base)
    """, JITGRAD_COMPILE_PROCESS="1")
    growth = float(out.split("GROWTH")[1])
    assert growth < 12.0, f"parent RSS grew by {growth:.1f} MB over 150 kernels"


def test_child_and_in_process_compiles_give_the_same_bits():
    script = GRAPHS + """
    from jitgrad import compiler
    vals = [float(one(i)) for i in (3, 77, 140)]
    k = [k for k in compiler._kernels.values()]
    print("VALS", vals, "OBJ", sorted(len(x.obj) for x in k))
    """
    a = _run(script, JITGRAD_COMPILE_PROCESS="1")
    b = _run(script, JITGRAD_COMPILE_PROCESS="0")
    assert a.split("VALS")[1] == b.split("VALS")[1]
    for i, v in zip((3, 77, 140), eval(a.split("VALS")[1].split("OBJ")[0])):
        shape = (i % 50 + 1, i // 50 + 1)
        want = np.float32(np.exp(np.float32(0.5)) * 2 + np.tanh(np.float32(0.5))) * np.prod(shape)
        assert v == pytest.approx(float(want), rel=1e-5)


def test_a_child_that_dies_mid_compile_is_a_clear_error_and_is_replaced(monkeypatch):
    import subprocess as sp
    monkeypatch.setenv("JITGRAD_COMPILE_PROCESS", "1")
    ir = "define void @f() {\n  ret void\n}\n"
    compile_server.start()
    child = compile_server._server[os.getpid()]
    child.close()
    # a stand-in that reads the start of the request and exits without answering
    child.proc = sp.Popen([sys.executable, "-c", "import sys; sys.stdin.buffer.read(8)"], stdin=sp.PIPE,
                          stdout=sp.PIPE)
    with pytest.raises(compile_server.CompileServerError, match="compile process ended"):
        compile_server.optimise_to_object(ir, "host")
    obj, opt_ir, _ = compile_server.optimise_to_object(ir, "host")     # a new child
    assert obj[:4] == b"\x7fELF" and "define void @f()" in backend.linked_ir(opt_ir)
    with pytest.raises(compile_server.CompileServerError, match="expected"):   # LLVM's parse error
        compile_server.optimise_to_object("this is not IR", "host")


def test_the_first_compiles_of_a_process_stay_in_it(monkeypatch):
    """A program with a handful of kernels never pays for starting the child."""
    monkeypatch.delenv("JITGRAD_COMPILE_PROCESS", raising=False)
    monkeypatch.setattr(compile_server, "_compiles", {})
    assert not any(compile_server.use_child() for _ in range(compile_server.IN_PROCESS))
    assert compile_server.use_child()


def test_without_a_usable_child_compiles_stay_in_the_process(monkeypatch):
    monkeypatch.setenv("JITGRAD_COMPILE_PROCESS", "1")
    monkeypatch.setattr(compile_server, "_unavailable", [])
    monkeypatch.setattr(compile_server, "_server", {})
    monkeypatch.setattr(compile_server.sys, "executable", "/nonexistent/python")
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float64, [7])
        y = tf.reduce_sum(tf.sin(x) * 5.0)
    before = tf.cache_info()["fallbacks"]
    xv = np.linspace(0, 1, 7)
    assert tf.compat.v1.Session(graph=g).run(y, {x: xv}) == pytest.approx(5 * np.sin(xv).sum(), rel=1e-12)
    assert compile_server._unavailable and tf.cache_info()["fallbacks"] == before
