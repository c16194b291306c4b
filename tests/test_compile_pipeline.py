"""jitgrad/codegen/backend.py Units: a kernel's matmul functions are handed to the compile
threads as soon as they are lowered (KernelBuilder.unit_sink), while Python lowers the
rest.  That must change nothing but the time: the payload is byte for byte the one the
whole module's text compiled at once gives, and the numbers are numpy's."""
import hashlib
import re
import sys

import numpy as np
import pytest

import jitgrad as tf
from jitgrad import cache, compiler, gil_turns
from jitgrad.cache import native
from jitgrad.codegen import backend


@pytest.fixture
def no_disk_cache(monkeypatch):
    # in this process (a long test session's later compiles go to the compile child,
    # which gets the whole module's text: no units taken while lowering there)
    monkeypatch.setenv("JITGRAD_COMPILE_PROCESS", "0")
    cache.set_enabled(False)
    compiler.clear_cache()
    yield
    cache.set_enabled(None)


def _defined(ir_text):
    return re.findall(r'^define [^@]*@"?([^"(]+_mm\d+(?:_pack)?)"?\(', ir_text, re.M)


def _only_kernel():
    (k,) = {id(k): k for k in compiler._kernels.values()}.values()
    return k


def _mlp_grad(rows):
    """loss and gradients of a two-layer relu MLP, with the float64 numpy reference."""
    rng = np.random.default_rng(7)
    vals = [rng.standard_normal(s).astype(np.float32) * 0.1 for s in ((rows, 70), (70, 40), (40, 10))]
    g = tf.Graph()
    with g.as_default():
        x, w1, w2 = (tf.compat.v1.placeholder(tf.float32, v.shape) for v in vals)
        h = tf.nn.relu(tf.matmul(x, w1))
        loss = tf.reduce_mean(tf.square(tf.matmul(h, w2)))
        grads = tf.gradients(loss, [w1, w2])
    X, W1, W2 = (v.astype(np.float64) for v in vals)
    H = np.maximum(X @ W1, 0)
    Z = H @ W2
    dZ = 2 * Z / Z.size
    want = [np.mean(Z ** 2), X.T @ ((dZ @ W2.T) * (H > 0)), H.T @ dZ]
    return g, [loss] + grads, dict(zip((x, w1, w2), vals)), want


def test_units_taken_while_lowering_give_the_bytes_of_the_whole_module(no_disk_cache):
    g, fetches, feed, want = _mlp_grad(96)
    with tf.compat.v1.Session(graph=g) as s:
        got = s.run(fetches, feed)
        report = s.explain(fetches, feed)
    for w, v in zip(want, got):
        np.testing.assert_allclose(v, w, rtol=2e-4, atol=1e-6)
    k = _only_kernel()
    names = _defined(report.unoptimised_ir)
    assert len(names) >= 3 and len(set(names)) == len(names)   # every matmul function defined once
    assert k.timings["units"] == 1 + len(names) == len(native.unpack(k.obj))
    # the one-shot path (split_units over the whole text, as explain and the compile child do)
    whole, _, _ = backend.optimise_to_object(report.unoptimised_ir)
    assert hashlib.sha256(whole).digest() == hashlib.sha256(k.obj).digest()


def test_optimised_ir_is_made_on_demand_and_is_what_was_compiled(no_disk_cache, monkeypatch):
    """A compile prints no optimised IR (UnitIR optimises the units again when explain asks);
    what UnitIR gives for each unit is the module the compile emitted, text for text."""
    printed, emitted = [], {}
    orig_text, orig_emit = backend._optimised_text, backend._emit_unlocked
    monkeypatch.setattr(backend, "_optimised_text", lambda *a: (printed.append(1), orig_text(*a))[1])

    def emit(tm, mod):       # what the compile emitted, keyed by the object it became
        text = str(mod)      # before code generation, which changes the module
        obj = orig_emit(tm, mod)
        emitted[obj] = text
        return obj
    monkeypatch.setattr(backend, "_emit_unlocked", emit)
    g, fetches, feed, want = _mlp_grad(40)
    with tf.compat.v1.Session(graph=g) as s:
        got = s.run(fetches, feed)
    for w, v in zip(want, got):
        np.testing.assert_allclose(v, w, rtol=2e-4, atol=1e-6)
    k = _only_kernel()
    assert printed == [] and isinstance(k._opt_ir, backend.UnitIR)
    objs = native.unpack(k.obj)
    assert len(k._opt_ir) == len(objs) >= 2
    assert list(k._opt_ir) == [emitted[o] for o in objs]
    assert len(printed) == len(objs)
    assert "define" in k.opt_ir and isinstance(k._opt_ir, str)    # linked once, then kept as text


def test_take_leaves_a_declaration_and_the_function_becomes_a_unit():
    from llvmlite import ir
    module = ir.Module(name="m")
    module.triple, module.data_layout = "x86_64-unknown-linux-gnu", ""
    f32p = ir.FloatType().as_pointer()
    fma = module.declare_intrinsic("llvm.fma", [ir.FloatType()] * 3)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [f32p]), name="k_mm1")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    v = b.load(fn.args[0])
    b.store(b.call(fma, [v, v, v]), fn.args[0])
    b.ret_void()
    units = backend.Units()
    units.take(module, fn)
    assert str(fn).startswith("declare") and fn.is_declaration
    text = str(module)
    assert not re.search(r"^define", text, re.M)
    assert re.search(r'^define void @"k_mm1"', units.full_text(text), re.M)
    obj, opt_ir, timings = units.finish(text)
    assert timings["units"] == 2 and len(native.unpack(obj)) == 2
    assert re.search(r'^define [^@]*@"?k_mm1"?\(', opt_ir[1], re.M)   # the unit after the main one


def test_kernel_rebuilt_single_threaded_bundles_only_its_second_build(no_disk_cache, monkeypatch):
    """A parallel kernel with run-time checks is lowered again on one thread
    (KernelBuilder.build): the units its first build handed over are dropped."""
    resets = []
    orig = backend.Units.reset
    monkeypatch.setattr(backend.Units, "reset", lambda self: (resets.append(1), orig(self))[1])
    rng = np.random.default_rng(11)
    a = rng.standard_normal((512, 256)).astype(np.float32)      # 2*512*256*256 flops: parallel
    w = rng.standard_normal((256, 256)).astype(np.float32)
    idx = rng.integers(0, 512, 40).astype(np.int32)
    g = tf.Graph()
    with g.as_default():
        pa, pw = tf.compat.v1.placeholder(tf.float32, a.shape), tf.compat.v1.placeholder(tf.float32, w.shape)
        pi = tf.compat.v1.placeholder(tf.int32, idx.shape)
        y = tf.gather(tf.matmul(pa, pw), pi)
    with tf.compat.v1.Session(graph=g) as s:
        got = s.run(y, {pa: a, pw: w, pi: idx})
        with pytest.raises(tf.errors.InvalidArgumentError):
            s.run(y, {pa: a, pw: w, pi: np.full(40, 512, np.int32)})
        report = s.explain(y, {pa: a, pw: w, pi: idx})
    np.testing.assert_allclose(got, (a.astype(np.float64) @ w)[idx], rtol=1e-4, atol=1e-4)
    names = _defined(report.unoptimised_ir)
    assert len(resets) >= 2             # the constructor's and the rebuild's
    assert _only_kernel().timings["units"] == 1 + len(names) == len(native.unpack(_only_kernel().obj))


def test_parallel_kernel_has_a_compile_thread_start_the_native_pool(no_disk_cache, monkeypatch):
    """The pool's code (compiled once per process) is started beside a parallel kernel's
    compile, on a compile thread, not by the kernel's first call."""
    import threading
    from jitgrad.codegen import parallel
    monkeypatch.setenv("JITGRAD_COMPILE_THREADS", "2")
    monkeypatch.setattr(parallel, "NUM_THREADS", [2])
    callers = []
    orig = parallel._get_pool
    monkeypatch.setattr(parallel, "_get_pool", lambda: (callers.append(threading.current_thread().name), orig())[1])
    rng = np.random.default_rng(5)
    a, w = rng.standard_normal((512, 256)).astype(np.float32), rng.standard_normal((256, 256)).astype(np.float32)
    g = tf.Graph()
    with g.as_default():                           # 2*512*256*256 flops: parallel (PAR_MIN_FLOPS)
        pa, pw = tf.compat.v1.placeholder(tf.float32, a.shape), tf.compat.v1.placeholder(tf.float32, w.shape)
        y = tf.nn.relu(tf.matmul(pa, pw))
    with tf.compat.v1.Session(graph=g) as s:
        got = s.run(y, {pa: a, pw: w})
    np.testing.assert_allclose(got, np.maximum(a.astype(np.float64) @ w, 0), rtol=1e-4, atol=1e-4)
    assert _only_kernel().meta.get("parallel")
    if parallel._NATIVE:
        assert any(name.startswith("jitgrad-llvm") for name in callers), callers


def test_barrier_sites_call_one_function_the_optimiser_keeps(no_disk_cache, monkeypatch):
    """codegen/sync.py: every barrier site of a parallel kernel is a call, with the site's
    number, of one noinline function of the module -- not a copy of the barrier's code
    per site on the main unit's critical path.  The results stay those of one thread and
    of numpy, bit for bit whatever the thread count."""
    from jitgrad.codegen import parallel
    monkeypatch.setattr(parallel, "NUM_THREADS", [3])
    rng = np.random.default_rng(13)
    a = rng.standard_normal((512, 256)).astype(np.float32)
    w1 = (rng.standard_normal((256, 256)) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((256, 64)) * 0.1).astype(np.float32)
    g = tf.Graph()
    with g.as_default():                       # two parallel GEMMs with a serial sum between
        pa, p1, p2 = (tf.compat.v1.placeholder(tf.float32, v.shape) for v in (a, w1, w2))
        h = tf.nn.relu(tf.matmul(pa, p1))
        y = tf.matmul(h / (1.0 + tf.reduce_sum(h)), p2)
    feed = {pa: a, p1: w1, p2: w2}
    with tf.compat.v1.Session(graph=g) as s:
        report = s.explain(y, feed)
        got = {}
        for t in (1, 3):
            parallel.set_num_threads(t)
            got[t] = np.asarray(s.run(y, feed))
        parallel.set_num_threads(None)
    assert got[1].tobytes() == got[3].tobytes()
    H = np.maximum(a.astype(np.float64) @ w1, 0)
    np.testing.assert_allclose(got[1], (H / (1 + H.sum())) @ w2, rtol=1e-4, atol=1e-6)
    assert _only_kernel().meta.get("parallel")
    defs = re.findall(r'^define [^@]*@"?(jitgrad\.barrier[\w.]*)"?\(', report.unoptimised_ir, re.M)
    sites = [int(k) for k in re.findall(r'call void @"?jitgrad\.barrier[\w.]*"?\(i32\* %"?[\w.]+"?, i32 (\d+)\)',
                                        report.unoptimised_ir)]
    assert len(defs) == 1 and len(sites) >= 3, (defs, sites)
    assert sites == list(range(1, len(sites) + 1))     # numbered in program order
    assert len(re.findall(r"^bar\.try[\w.]*:", report.unoptimised_ir, re.M)) == 1   # its code once
    # after O3: still a function of its own, which LLVM may not assume touches only some
    # memory (a memory(...) attribute would let loads and stores of the buffers move across)
    m = re.search(r'^define internal [^@]*@"?jitgrad\.barrier[\w.]*"?\(.*\)[^#{]*#(\d+)', report.ir, re.M)
    assert m, report.ir
    attrs = re.search(rf"^attributes #{m.group(1)} = \{{(.*)\}}", report.ir, re.M).group(1)
    assert "noinline" in attrs and "memory(" not in attrs, attrs
    # still a call per site after O3 (noinline): the sites are not inlined back
    opt_sites = re.findall(r'call [^@]*@"?jitgrad\.barrier[\w.]*"?\(', report.ir)
    assert len(opt_sites) >= len(sites), (len(opt_sites), len(sites))


def test_split_units_looks_only_at_define_lines():
    """split_units returns None at once unless a `define` line names a matmul function
    (a declaration of one, or the name elsewhere in the text, is not a definition)."""
    decl = 'declare void @"k_mm1"(float* %".1")\n'
    body = 'define void @"k"(float* %".1")\n{\nentry:\n  call void @"k_mm1"(float* %".1")\n  ret void\n}\n'
    mm = 'define void @"k_mm1"(float* %".1")\n{\nentry:\n  ret void\n}'
    assert backend.split_units(decl + body) is None
    assert backend.split_units(body) is None
    assert backend.split_units("") is None
    for text in (body + mm, mm + "\n" + body, mm):       # at the end, at the very start, alone
        main, units = backend.split_units(text)
        assert len(units) == 1 and 'define void @"k_mm1"' in units[0]
        assert 'declare void @"k_mm1"' in main and 'define void @"k_mm1"' not in main


def test_matmul_functions_are_defined_once_the_main_text_is_made(no_disk_cache, monkeypatch):
    """Lowering only declares a kernel's matmul functions (KernelBuilder.define_later);
    Units.finish queues the main unit -- the largest, O3 -- for a compile thread first and
    then has them defined and taken, so it compiles while Python builds them.  Every one
    becomes a unit of its own, the numbers are numpy's (and the payload the one-shot
    path's bytes: the first test)."""
    from jitgrad.codegen import matmul as mm
    monkeypatch.setenv("JITGRAD_COMPILE_THREADS", "2")
    events = []
    orig_finish = backend.Units.finish
    monkeypatch.setattr(backend.Units, "finish",
                        lambda self, text: (events.append(("finish", _defined(text))), orig_finish(self, text))[1])
    from jitgrad.codegen import matmul_skinny as ms
    for mod, name in ((mm, "define_matmul"), (mm, "define_matmul_prepacked"),
                      (ms, "define_skinny")):   # (with short GIL turns: gil_turns.py)
        monkeypatch.setattr(mod, name, lambda *a, _orig=getattr(mod, name), **k: (
            events.append(("define", sys.getswitchinterval())), _orig(*a, **k))[1])
    orig_unit = backend._compile_unit
    monkeypatch.setattr(backend, "_compile_unit",
                        lambda text, target, side: (events.append(("unit", side)), orig_unit(text, target, side))[1])
    g, fetches, feed, want = _mlp_grad(96)
    with tf.compat.v1.Session(graph=g) as s:
        got = s.run(fetches, feed)
    for w, v in zip(want, got):
        np.testing.assert_allclose(v, w, rtol=2e-4, atol=1e-6)
    assert events[0] == ("finish", [])              # nothing defined while lowering, none in the main text
    defines = [e for e in events if e[0] == "define"]
    units = [e[1] for e in events if e[0] == "unit"]
    assert len(defines) >= 3 and sorted(units) == [False] + [True] * len(defines)
    assert all(e[1] == pytest.approx(gil_turns.GIL_TURN) for e in defines)
    assert sys.getswitchinterval() == pytest.approx(0.005)          # restored (CPython's default)
    assert _only_kernel().timings["units"] == 1 + len(defines) == len(native.unpack(_only_kernel().obj))
