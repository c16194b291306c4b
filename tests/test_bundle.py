"""Bundles (jitgrad/cache/native.py): one payload holding the objects of a program's
units.  Loading links them (a call from one object into another resolves to the
definition), under jitgrad's ELF loader and MCJIT alike; a malformed bundle is
refused with ElfError (a ValueError) before anything is read outside it, and a bad
bundle in the disk cache is recompiled, never run."""
import ctypes
import math
import os
import random

import numpy as np
import pytest

import jitgrad as tf
from jitgrad import cache, compiler
from jitgrad.cache import deferred, elf, native

pytestmark = pytest.mark.skipif(not elf.supported(), reason="the ELF loader is for Linux x86-64")

TABLE = [1.5, -2.25, 4.0, 0.125]


def _objects(**tm_options):
    """Two units: `outer(x, i) = 2 * inner(x, i) + exp(x)` (calls into the other unit and
    libm) and `inner(x, i) = x * 3 + TABLE[i]` (a constant table in its own .rodata)."""
    from llvmlite import ir
    import llvmlite.binding as llvm
    tm = native.host_target_machine(**tm_options)
    d, i64 = ir.DoubleType(), ir.IntType(64)
    fty = ir.FunctionType(d, [d, i64])

    def module(name):
        m = ir.Module(name)
        m.triple, m.data_layout = tm.triple, str(tm.target_data)
        return m

    a = module("a")
    inner = ir.Function(a, fty, "inner")                       # declared: defined by unit b
    exp = a.declare_intrinsic("llvm.exp", [d])
    fn = ir.Function(a, fty, "outer")
    b = ir.IRBuilder(fn.append_basic_block())
    twice = b.fmul(ir.Constant(d, 2.0), b.call(inner, list(fn.args)))
    b.ret(b.fadd(twice, b.call(exp, [fn.args[0]])))

    m = module("b")
    arr = ir.ArrayType(d, len(TABLE))
    g = ir.GlobalVariable(m, arr, "tbl")
    g.global_constant, g.linkage, g.initializer = True, "internal", ir.Constant(arr, TABLE)
    fn = ir.Function(m, fty, "inner")
    b = ir.IRBuilder(fn.append_basic_block())
    t = b.load(b.gep(g, [ir.Constant(i64, 0), fn.args[1]]))
    b.ret(b.fadd(b.fmul(fn.args[0], ir.Constant(d, 3.0)), t))

    out = []
    for mod in (a, m):
        parsed = llvm.parse_assembly(str(mod))
        parsed.verify()
        out.append(tm.emit_object(parsed))
    return out


def _want(x, i):
    return 2 * (x * 3 + TABLE[i]) + math.exp(x)


def _call(code):
    outer = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double, ctypes.c_int64)(code.address("outer"))
    inner = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double, ctypes.c_int64)(code.address("inner"))
    return [(outer(x, i), inner(x, i)) for x, i in ((0.5, 0), (-1.25, 3), (2.0, 2))]


def test_pack_unpack_round_trip_and_one_object_stays_plain():
    objs = _objects()
    payload = native.pack(objs)
    assert payload.startswith(native.BUNDLE_MAGIC)
    assert native.unpack(payload) == objs
    assert native.pack(objs[:1]) == objs[0]            # a plain ELF object, as before bundles
    assert native.unpack(objs[0]) == [objs[0]]
    with pytest.raises(ValueError):
        native.pack([])


# jitgrad emits the large code model (64-bit absolute calls between units).  The small
# one is for the ELF loader only: it maps a bundle in one piece, while MCJIT places each
# object apart, beyond a 32-bit call's reach (RuntimeDyld aborts the process).
@pytest.mark.parametrize("loader,tm_options", [
    ("elf", {}), ("elf", {"codemodel": "small"}), ("elf", {"codemodel": "small", "reloc": "pic"}),
    ("mcjit", {})], ids=lambda o: o if isinstance(o, str) else
                    ",".join(f"{k}={v}" for k, v in o.items()) or "default")
def test_units_call_each_other_under_both_loaders(monkeypatch, loader, tm_options):
    monkeypatch.setenv("JITGRAD_LOADER", loader)
    objs = _objects(**tm_options)
    for order in (objs, objs[::-1]):                   # the definition may come before or after its use
        code = native.load(native.pack(order))
        assert code.loader == loader
        for (x, i), (got_outer, got_inner) in zip(((0.5, 0), (-1.25, 3), (2.0, 2)), _call(code)):
            assert got_inner == x * 3 + TABLE[i]
            assert got_outer == pytest.approx(_want(x, i), rel=1e-15)


def test_a_symbol_defined_by_two_units_is_refused():
    a, b = _objects()
    with pytest.raises(elf.ElfError, match="defined by two objects"):
        elf.ElfImage([b, b])
    elf.ElfImage([a, b]).close()


def test_malformed_bundles_are_refused_cleanly():
    payload = native.pack(_objects())
    head = len(native.BUNDLE_MAGIC)
    cuts = sorted({head, head + 2, head + 4, head + 11, len(payload) // 2, len(payload) - 1})
    for cut in cuts:
        with pytest.raises(elf.ElfError):
            native.unpack(payload[:cut])
        with pytest.raises(ValueError):               # what a caller of load sees
            native.load(payload[:cut])
    with pytest.raises(elf.ElfError):                  # one byte too many
        native.load(payload + b"\0")
    for count in (0, 1, native.MAX_OBJECTS + 1, 2 ** 32 - 1):
        bad = bytearray(payload)
        bad[head:head + 4] = count.to_bytes(4, "little")
        with pytest.raises(elf.ElfError):
            native.load(bytes(bad))
    rng = random.Random(5)
    for _ in range(200):                               # any damaged size field: sizes no longer add up
        bad = bytearray(payload)
        k = rng.randrange(2)
        at = head + 4 + 8 * k + rng.randrange(8)
        bad[at] = (bad[at] + rng.randrange(1, 256)) % 256
        with pytest.raises(elf.ElfError):
            native.unpack(bytes(bad))


def _mlp():
    rng = np.random.default_rng(11)
    vals = [rng.standard_normal(s).astype(np.float32) * 0.1 for s in ((64, 48), (48, 32))]
    g = tf.Graph()
    with g.as_default():
        x, w = (tf.compat.v1.placeholder(tf.float32, v.shape) for v in vals)
        loss = tf.reduce_sum(tf.nn.relu(tf.matmul(x, w)))
        grad = tf.gradients(loss, w)[0]
    X, W = (v.astype(np.float64) for v in vals)
    want = [np.maximum(X @ W, 0).sum(), X.T @ (X @ W > 0)]
    return g, [loss, grad], dict(zip((x, w), vals)), want


def _entries(directory):
    deferred.wait()     # the compile's store is written after its result (cache/deferred.py)
    return [os.path.join(r, f) for r, _, fs in os.walk(directory) for f in fs if f.endswith(".jgk")]


@pytest.mark.parametrize("damage", ["truncated bundle", "bundle of garbage", "file cut short"])
def test_a_bad_bundle_on_disk_is_recompiled_never_run(tmp_path, monkeypatch, damage):
    monkeypatch.setenv("JITGRAD_CACHE_DIR", str(tmp_path))
    cache.set_enabled(True)
    try:
        g, fetches, feed, want = _mlp()
        compiler.clear_cache()
        with tf.compat.v1.Session(graph=g) as s:
            first = s.run(fetches, feed)
        assert native.unpack(next(iter(compiler._kernels.values())).obj)[1:]   # it is a bundle
        d = cache.default_cache()
        damaged = 0
        for path in _entries(str(tmp_path)):
            key = os.path.basename(path)[:-len(".jgk")]
            got = d.load(key)
            if got is None or not got[0].startswith(native.BUNDLE_MAGIC):   # not a kernel (host facts)
                continue
            payload, meta = got
            damaged += 1
            if damage == "file cut short":             # the disk cache's checksum catches it
                with open(path, "r+b") as f:
                    f.truncate(os.path.getsize(path) // 2)
                continue
            bad = payload[:len(payload) // 2] if damage == "truncated bundle" else \
                native.BUNDLE_MAGIC + (2).to_bytes(4, "little") + (8).to_bytes(8, "little") * 2 + b"\xcc" * 16
            assert d.store(key, bad, meta)            # a well-formed entry holding a bad bundle
        assert damaged
        compiler.clear_cache()
        with tf.compat.v1.Session(graph=g) as s:
            again = s.run(fetches, feed)
        assert tf.cache_info().compiles == 1 and tf.cache_info().disk_hits == 0
        for a, b, w in zip(first, again, want):
            assert np.asarray(a).tobytes() == np.asarray(b).tobytes()
            np.testing.assert_allclose(b, w, rtol=1e-4, atol=1e-5)
        compiler.clear_cache()                         # the recompiled kernel replaced the bad entry
        with tf.compat.v1.Session(graph=g) as s:
            s.run(fetches, feed)
        assert tf.cache_info().disk_hits == 1 and tf.cache_info().compiles == 0
    finally:
        cache.set_enabled(None)
        compiler.clear_cache()
