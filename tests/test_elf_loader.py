"""jitgrad's own ELF object loader (jitgrad/cache/elf.py) and the loader choice in
jitgrad/cache/native.py: the same object must behave identically under it and MCJIT,
malformed objects must be refused cleanly, and a warm process must not load LLVM."""
import ctypes
import json
import os
import random
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import jitgrad as tf
from jitgrad import compiler
from jitgrad.cache import elf, native

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from test_disk_cache import _check  # noqa: E402

pytestmark = pytest.mark.skipif(not elf.supported(), reason="the ELF loader is for Linux x86-64")


def build_object(**tm_options):
    """The test object of test_disk_cache (add2, myexp -> expf, cp -> memcpy, table ->
    .rodata), emitted with the given TargetMachine options (code model, relocation model)."""
    import test_disk_cache
    real = native.host_target_machine
    try:
        native.host_target_machine = lambda opt=3, **kw: real(opt=opt, **dict(kw, **tm_options))
        return test_disk_cache._build_object()
    finally:
        native.host_target_machine = real


def call_all(code):
    add2 = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double, ctypes.c_double)(code.address("add2"))
    myexp = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_float)(code.address("myexp"))
    cp = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(code.address("cp"))
    table = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_int64)(code.address("table"))
    src = ctypes.create_string_buffer(bytes(range(256)) * 40)
    dst = ctypes.create_string_buffer(len(src))
    cp(ctypes.addressof(dst), ctypes.addressof(src), len(src))
    return {"add2": add2(1.25, 2.5), "myexp": myexp(1.0), "cp": dst.raw == src.raw,
            "table": [table(i) for i in range(5)]}


# Large code model (what the compiler emits: R_X86_64_64 only), small (PC32 / PLT32 calls
# to libc/libm through stubs, 32S absolute addresses in the low 2 GiB), position-independent
# (GOTPCREL loads).
TM_VARIANTS = [{}, {"codemodel": "small"}, {"codemodel": "small", "reloc": "pic"},
               {"codemodel": "small", "reloc": "static"}]


def _ids(o):
    return ",".join(f"{k}={v}" for k, v in o.items()) or "default"


def test_large_pic_object_goes_to_mcjit():
    """GOT-relative 64-bit relocations (large code model, PIC) are not handled: refused
    as unsupported, and native.load hands the object to MCJIT."""
    obj = build_object(codemodel="large", reloc="pic")
    with pytest.raises(elf.ElfUnsupported):
        elf.ElfImage(obj)
    code = native.load(obj)
    assert code.loader == "mcjit"
    _check(call_all(code))


@pytest.mark.parametrize("tm_options", TM_VARIANTS, ids=_ids)
def test_object_runs_under_both_loaders(tm_options):
    obj = build_object(**tm_options)
    image = elf.ElfImage(obj)
    res = call_all(image)
    _check(res)
    if tm_options.get("codemodel", "large") == "large":
        # (MCJIT aborts the process on small-code-model objects: relocation overflow)
        assert call_all(native._McjitCode(obj)) == res
    with pytest.raises(KeyError):
        image.address("no_such_symbol")


def test_code_is_not_writable_and_unmaps():
    image = elf.ElfImage(build_object())
    addr = image.address("add2")
    with open("/proc/self/maps") as f:
        maps = [line.split() for line in f]
    mapping = [m for m in maps if int(m[0].split("-")[0], 16) <= addr < int(m[0].split("-")[1], 16)]
    assert len(mapping) == 1 and mapping[0][1].startswith("r-x"), mapping
    image.close()
    with open("/proc/self/maps") as f:
        assert not any(int(line.split()[0].split("-")[0], 16) <= addr < int(line.split()[0].split("-")[1], 16)
                       for line in f)


def test_malformed_objects_are_refused():
    obj = build_object()
    with pytest.raises(elf.ElfError):
        elf.ElfImage(b"")
    with pytest.raises(elf.ElfError):
        elf.ElfImage(b"not an object at all" * 10)
    other_machine = bytearray(obj)
    other_machine[18:20] = (183).to_bytes(2, "little")      # EM_AARCH64
    with pytest.raises(elf.ElfUnsupported):
        elf.ElfImage(bytes(other_machine))
    for cut in (16, 63, 64, len(obj) // 3, len(obj) // 2, len(obj) - 1):
        with pytest.raises((elf.ElfError, elf.ElfUnsupported)):
            elf.ElfImage(obj[:cut])


def test_corrupted_objects_never_crash_the_loader():
    """Loading (not running) a corrupted object either fails cleanly or relocates within
    its own mapping: every offset, size and index is checked before use."""
    obj = build_object()
    rng = random.Random(1234)
    outcomes = {"refused": 0, "loaded": 0}
    for _ in range(400):
        b = bytearray(obj)
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(len(b))
            b[i] = rng.randrange(256)
        try:
            elf.ElfImage(bytes(b)).close()
            outcomes["loaded"] += 1
        except (elf.ElfError, elf.ElfUnsupported):
            outcomes["refused"] += 1
    # header-table corruption (section offsets/sizes) must have been hit at least sometimes
    header = bytearray(obj)
    shoff = int.from_bytes(obj[40:48], "little")
    for field in range(shoff, min(len(obj), shoff + 64 * 11), 8):
        b = bytearray(header)
        b[field:field + 8] = (2 ** 62).to_bytes(8, "little")
        try:
            elf.ElfImage(bytes(b)).close()
        except (elf.ElfError, elf.ElfUnsupported):
            outcomes["refused"] += 1
    assert outcomes["refused"] > 0


def test_unresolved_symbol_falls_back_to_mcjit(monkeypatch):
    obj = build_object()
    real = elf._dlsym
    monkeypatch.setattr(elf, "_dlsym", lambda name: 0 if name == "expf" else real(name))
    with pytest.raises(elf.ElfUnsupported, match="expf"):
        elf.ElfImage(obj)
    code = native.load(obj)
    assert code.loader == "mcjit"
    _check(call_all(code))
    monkeypatch.setenv("JITGRAD_LOADER", "elf")
    with pytest.raises(elf.ElfUnsupported):
        native.load(obj)


def test_loader_choice(monkeypatch):
    obj = build_object()
    assert native.load(obj).loader == "elf"
    monkeypatch.setenv("JITGRAD_LOADER", "mcjit")
    assert native.load(obj).loader == "mcjit"
    monkeypatch.setattr(elf, "supported", lambda: False)
    monkeypatch.setenv("JITGRAD_LOADER", "auto")
    assert native.load(obj).loader == "mcjit"


def _graphs(rng):
    """A few kernels that cover what the code generator emits: vector math, reductions,
    packed matmul with parallel nests (sched_yield in the barrier), layout ops."""
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [300000])
        a = tf.compat.v1.placeholder(tf.float32, [128, 256])
        w = tf.constant(rng.standard_normal((256, 96)).astype("float32"))
        y = tf.reduce_sum(tf.tanh(x) * tf.exp(-x * x) + tf.sqrt(x * x + 1.0))
        h = tf.nn.relu(tf.matmul(a, w))
        z = tf.reduce_mean(tf.nn.softmax(h) * tf.transpose(tf.transpose(tf.concat([h, h], 1))[50:146, :]))
        fetches = [y, tf.gradients(y, x)[0], z] + tf.gradients(z, [a, w])
    feed = {x: rng.standard_normal(300000).astype("float32") * 3,
            a: rng.standard_normal((128, 256)).astype("float32")}
    return g, fetches, feed


def _run_with_loader(loader, monkeypatch, threads):
    from jitgrad.codegen import parallel
    monkeypatch.setenv("JITGRAD_LOADER", loader)
    monkeypatch.setenv("JITGRAD_CACHE", "0")
    compiler.clear_cache()
    parallel.set_num_threads(threads)
    try:
        g, fetches, feed = _graphs(np.random.default_rng(7))
        with tf.compat.v1.Session(graph=g) as s:
            out = s.run(fetches, feed)
        kernels = list(compiler._kernels.values())
        assert threads == 1 or any(k.mt_addr for k in kernels), "no parallel kernel exercised"
        return out, {k.loaded.loader for k in kernels}
    finally:
        parallel.set_num_threads(None)
        compiler.clear_cache()


@pytest.mark.parametrize("threads", [1, 2])
def test_compiled_kernels_bit_identical_under_both_loaders(monkeypatch, threads):
    out_elf, l1 = _run_with_loader("elf", monkeypatch, threads)
    out_mcjit, l2 = _run_with_loader("mcjit", monkeypatch, threads)
    assert l1 == {"elf"} and l2 == {"mcjit"}
    for a, b in zip(out_elf, out_mcjit):
        np.testing.assert_array_equal(a, b)
        assert np.asarray(a).tobytes() == np.asarray(b).tobytes()


WARM = textwrap.dedent("""
    import json, subprocess, sys
    children = []
    _run = subprocess.run
    subprocess.run = lambda *a, **k: children.append(a[0]) or _run(*a, **k)   # e.g. a target probe
    import numpy as np
    import jitgrad as tf
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [1000])
        y = tf.reduce_sum(tf.tanh(x) * tf.exp(-x * x))
        dx = tf.gradients(y, x)[0]
    with tf.compat.v1.Session(graph=g) as s:
        out = s.run([y, dx], {x: np.linspace(-3, 3, 1000, dtype=np.float32)})
    print(json.dumps({"y": float(out[0]), "dx": out[1].tolist(), "info": dict(tf.cache_info()),
                      "llvm_loaded": "llvmlite.binding" in sys.modules, "children": len(children)}))
""")


@pytest.mark.parametrize("cpu", ["", "x86-64"])
def test_warm_process_never_loads_llvm(tmp_path, cpu):
    """Issue 5's warm start: a process whose kernels all come from the disk cache needs
    neither LLVM's optimiser nor llvmlite.binding at all (host facts come from the cache)
    -- also with a named CPU (JITGRAD_TARGET_CPU; the SSE2 baseline runs on any x86-64),
    whose level LLVM was asked once, by a probe child of the cold process, and which
    the warm process reads from the cache too."""
    env = dict(os.environ, PYTHONPATH=ROOT, JITGRAD_CACHE_DIR=str(tmp_path / "c"), JITGRAD_TARGET_CPU=cpu)
    env.pop("JITGRAD_LOADER", None)
    env.pop("JITGRAD_TARGET_FEATURES", None)
    runs = []
    for _ in range(2):
        r = subprocess.run([sys.executable, "-c", WARM], env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        runs.append(json.loads(r.stdout.strip().splitlines()[-1]))
    cold, warm = runs
    assert cold["info"]["compiles"] == 1 and cold["llvm_loaded"]
    assert warm["info"]["compiles"] == 0 and warm["info"]["disk_hits"] == 1
    assert not warm["llvm_loaded"]
    assert warm["children"] == 0 and cold["children"] >= (1 if cpu else 0)
    assert warm["y"] == cold["y"] and warm["dx"] == cold["dx"]


def _headers(obj):
    """(offset of each section header, [(type, flags, offset, size)])."""
    shoff = int.from_bytes(obj[40:48], "little")
    shnum = int.from_bytes(obj[60:62], "little")
    offs = [shoff + 64 * i for i in range(shnum)]
    return offs, [(int.from_bytes(obj[o + 4:o + 8], "little"), int.from_bytes(obj[o + 8:o + 16], "little"),
                   int.from_bytes(obj[o + 24:o + 32], "little"), int.from_bytes(obj[o + 32:o + 40], "little"))
                  for o in offs]


def test_null_typed_allocated_section_outside_the_object_is_refused():
    """The bounds check skipped SHT_NULL, but an ALLOC section of that type is copied into
    the mapping: a large size read past the object."""
    obj = build_object()
    offs, secs = _headers(obj)
    k = next(i for i, (t, flags, _o, size) in enumerate(secs) if flags & 2 and size and t != 8)
    b = bytearray(obj)
    b[offs[k] + 4:offs[k] + 8] = (0).to_bytes(4, "little")                   # sh_type = SHT_NULL
    b[offs[k] + 32:offs[k] + 40] = (len(obj) * 64).to_bytes(8, "little")     # sh_size past the end
    with pytest.raises(elf.ElfError):
        elf.ElfImage(bytes(b))


_FUZZ_CHILD = """
import json, random, sys
sys.path.insert(0, {tests!r})
from jitgrad.cache import elf
from test_elf_loader import _headers
obj = open({path!r}, "rb").read()
offs, _ = _headers(obj)
rng = random.Random({seed})
# type (twice: a section changing kind is the classic confusion), flags, offset, size, link, info, align, entsize
FIELDS = [(4, 4), (4, 4), (8, 8), (24, 8), (32, 8), (32, 8), (40, 4), (44, 4), (48, 8), (56, 8)]
VALUES = [0, 1, 2, 3, 4, 8, 9, 0x7FFFFFFF, 2 ** 32 - 1, 2 ** 63, 2 ** 64 - 1, len(obj), len(obj) - 1, len(obj) * 8]
out = {{"refused": 0, "loaded": 0, "violations": []}}
for n in range({n}):
    b = bytearray(obj)
    sec = rng.choice(offs)              # fields of one section header, so that they combine
    for _ in range(rng.randint(1, 3)):
        if rng.random() < 0.8:
            at, width = rng.choice(FIELDS)
            v = rng.choice(VALUES) if rng.random() < 0.7 else rng.getrandbits(8 * width)
            b[sec + at:sec + at + width] = (v % (1 << (8 * width))).to_bytes(width, "little")
        else:                           # any byte (symbols, relocations, code)
            b[rng.randrange(len(b))] = rng.randrange(256)
    try:
        img = elf.ElfImage(bytes(b))
    except (elf.ElfError, elf.ElfUnsupported):
        out["refused"] += 1
        continue
    img.close()
    out["loaded"] += 1
    # what was loaded must have come from inside the object
    _, secs = _headers(bytes(b))
    for i, (t, flags, off, size) in enumerate(secs):
        if flags & 2 and size and t != 8 and off + size > len(b):
            out["violations"].append((n, i))
print(json.dumps(out))
"""


@pytest.mark.parametrize("seed", range(3))
def test_loader_fuzzed_with_mutated_section_headers(tmp_path, seed):
    """Mutated objects (section header fields set to boundary values, random bytes) are
    refused or load from inside the object; run in a child process so that an over-read
    that crashes fails the test."""
    path = tmp_path / "obj.o"
    path.write_bytes(build_object())
    code = _FUZZ_CHILD.format(tests=os.path.join(ROOT, "tests"), path=str(path), seed=seed, n=600)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["violations"] == [], out
    assert out["refused"] > 100 and out["loaded"] > 0, out
