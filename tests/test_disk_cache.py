"""On-disk kernel cache (jitgrad.cache.disk) and object loading (jitgrad.cache.native)."""
import json
import logging
import multiprocessing
import os
import stat
import struct
import subprocess
import sys
import textwrap
import time

import pytest

from jitgrad.cache import deferred, disk
from jitgrad.cache.cli import main as cli_main
from jitgrad.cache.disk import DiskCache, default_cache, make_key, set_enabled

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FP = {"format": 1, "test": "fixed fingerprint"}     # for pure-format tests: no llvmlite needed
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
posix_only = pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")


@pytest.fixture(autouse=True)
def isolated_env(tmp_path, monkeypatch):
    monkeypatch.setenv("JITGRAD_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("JITGRAD_CACHE", raising=False)
    monkeypatch.delenv("JITGRAD_CACHE_MAX_BYTES", raising=False)
    set_enabled(None)
    yield
    set_enabled(None)


def key(i=0):
    return make_key(f"sig-{i}", fingerprint=FP)


def cache(tmp_path, **kw):
    return DiskCache(str(tmp_path / "cache"), fingerprint=FP, **kw)


def warnings_of(caplog):
    return [r for r in caplog.records if r.name == "jitgrad.cache" and r.levelno >= logging.WARNING]


# ----------------------------------------------------------------------------- basics

def test_round_trip_and_counters(tmp_path):
    c = cache(tmp_path)
    k = key()
    assert c.load(k) is None
    assert c.store(k, b"\x00object\xff" * 100, {"symbol": "entry", "args": [[2, 3], "f32"]})
    payload, meta = c.load(k)
    assert payload == b"\x00object\xff" * 100
    assert meta == {"symbol": "entry", "args": [[2, 3], "f32"]}
    i = c.info()
    assert (i["hits"], i["misses"], i["stores"], i["rejects"]) == (1, 1, 1, 0)
    assert i["entries"] == 1 and i["bytes"] > 1000 and i["mode"] == "disk" and i["enabled"]
    path = c.path_for(k)
    assert path == os.path.join(str(tmp_path / "cache"), k[:2], k + ".jgk")
    if os.name == "posix":
        assert stat.S_IMODE(os.stat(tmp_path / "cache").st_mode) == 0o700
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    # a second instance (as in another process) sees it
    assert cache(tmp_path).load(k)[0] == payload
    assert not [n for n in os.listdir(os.path.dirname(path)) if n.endswith(".tmp")]


def test_key_covers_environment():
    fp = disk.environment_fingerprint()
    for field in ("jitgrad", "llvmlite", "llvm", "triple", "cpu", "features", "python"):
        assert fp[field], field
    k = make_key("graph")
    assert len(k) == 64 and k == make_key("graph")
    assert make_key("graph2") != k
    other_cpu = dict(fp, cpu="some-other-cpu")
    assert make_key("graph", fingerprint=other_cpu) != k
    assert make_key("graph", fingerprint=dict(fp, features=fp["features"] + ",+x")) != k
    assert make_key("graph", fingerprint=dict(fp, llvm="1.0.0")) != k


def test_bad_arguments(tmp_path):
    c = cache(tmp_path)
    with pytest.raises(ValueError):
        c.load("../../etc/passwd")
    with pytest.raises(TypeError):
        c.store(key(), "text", {})
    with pytest.raises(TypeError):
        c.store(key(), b"x", {"f": object()})
    with pytest.raises(TypeError):
        c.store(key(), b"x", {"f": float("nan")})


# ----------------------------------------------------------------------------- damaged entries

def _rewrite(path, fn):
    with open(path, "rb") as f:
        blob = f.read()
    with open(path, "wb") as f:
        f.write(fn(blob))


def _with_checksum(body):
    import hashlib
    return body + hashlib.sha256(body).digest()


DAMAGE = {
    "truncated": lambda b: b[: len(b) // 2],
    "empty": lambda b: b"",
    "flipped_payload_byte": lambda b: b[:-40] + bytes([b[-40] ^ 1]) + b[-39:],
    "flipped_header_byte": lambda b: b[:30] + bytes([b[30] ^ 0x20]) + b[31:],
    "flipped_checksum": lambda b: b[:-1] + bytes([b[-1] ^ 1]),
    "garbage": lambda b: os.urandom(len(b)),
    "appended": lambda b: b + b"extra",
    "foreign_version": lambda b: _with_checksum(b[:8] + struct.pack("<I", 99) + b[12:-32]),
    "bad_magic": lambda b: _with_checksum(b"NOTMAGIC" + b[8:-32]),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damaged_entry_rejected_then_replaced(tmp_path, caplog, damage):
    c = cache(tmp_path)
    k = key()
    assert c.store(k, b"A" * 500, {"v": 1})
    _rewrite(c.path_for(k), DAMAGE[damage])
    caplog.set_level(logging.WARNING, logger="jitgrad.cache")
    assert c.load(k) is None                     # never wrong data, never an exception
    assert c.info()["rejects"] == 1
    assert len(warnings_of(caplog)) == 1
    # the compiler recompiles and stores: the entry is replaced and valid again
    assert c.store(k, b"B" * 500, {"v": 2})
    assert c.load(k) == (b"B" * 500, {"v": 2})


def test_wrong_key_in_file(tmp_path, caplog):
    c = cache(tmp_path)
    k1, k2 = key(1), key(2)
    c.store(k1, b"one", {"n": 1})
    os.makedirs(os.path.dirname(c.path_for(k2)), exist_ok=True)
    with open(c.path_for(k1), "rb") as f, open(c.path_for(k2), "wb") as g:
        g.write(f.read())
    os.chmod(c.path_for(k2), 0o600)
    caplog.set_level(logging.WARNING, logger="jitgrad.cache")
    assert c.load(k2) is None
    assert "entry is for key" in warnings_of(caplog)[0].getMessage()
    assert c.load(k1) == (b"one", {"n": 1})


def test_foreign_fingerprint(tmp_path, caplog):
    k = key()
    DiskCache(str(tmp_path / "cache"), fingerprint=dict(FP, cpu="other")).store(k, b"code", {})
    c = cache(tmp_path)
    caplog.set_level(logging.WARNING, logger="jitgrad.cache")
    assert c.load(k) is None
    assert c.info()["rejects"] == 1
    assert "another environment" in warnings_of(caplog)[0].getMessage()


# ----------------------------------------------------------------------------- security

@posix_only
def test_entry_writable_by_group_or_others_refused(tmp_path, caplog):
    c = cache(tmp_path)
    k = key()
    c.store(k, b"code", {})
    caplog.set_level(logging.WARNING, logger="jitgrad.cache")
    for mode in (0o620, 0o602, 0o666):
        os.chmod(c.path_for(k), mode)
        assert c.load(k) is None
    assert c.info()["rejects"] == 3
    assert "writable by group/others" in warnings_of(caplog)[0].getMessage()
    assert c.store(k, b"code2", {})                  # replaced with a private file
    assert stat.S_IMODE(os.stat(c.path_for(k)).st_mode) == 0o600
    assert c.load(k) == (b"code2", {})


@posix_only
def test_entry_owned_by_someone_else_refused(tmp_path, monkeypatch, caplog):
    c = cache(tmp_path)
    k = key()
    c.store(k, b"code", {})
    caplog.set_level(logging.WARNING, logger="jitgrad.cache")
    if IS_ROOT:            # really owned by another user
        os.chown(c.path_for(k), 4321, 4321)
        assert c.load(k) is None
        os.chown(c.path_for(k), 0, 0)
        assert c.load(k) == (b"code", {})
    # simulated: we are someone else (the directory was vetted already)
    monkeypatch.setattr(disk, "_current_uid", lambda: os.geteuid() + 1000)
    assert c.load(k) is None
    assert any("not by us" in r.getMessage() for r in warnings_of(caplog))


@posix_only
def test_symlinked_entry_refused(tmp_path):
    c = cache(tmp_path)
    k1, k2 = key(1), key(2)
    c.store(k1, b"code", {})
    os.makedirs(os.path.dirname(c.path_for(k2)), exist_ok=True)
    os.symlink(c.path_for(k1), c.path_for(k2))
    assert c.load(k2) is None and c.info()["rejects"] == 1


@posix_only
@pytest.mark.parametrize("problem", ["group_writable", "other_writable", "foreign_owner"])
def test_insecure_directory_refused(tmp_path, monkeypatch, caplog, problem):
    d = tmp_path / "cache"
    good = cache(tmp_path)
    k = key()
    good.store(k, b"code", {})
    if problem == "group_writable":
        os.chmod(d, 0o770)
    elif problem == "other_writable":
        os.chmod(d, 0o707)
    else:
        monkeypatch.setattr(disk, "_current_uid", lambda: os.geteuid() + 1000)
    caplog.set_level(logging.WARNING, logger="jitgrad.cache")
    c = cache(tmp_path)
    assert c.load(k) is None                 # not even read
    assert c.store(key(2), b"mem", {}) is False
    assert c.load(key(2)) == (b"mem", {})    # memory-only caching still works
    for _ in range(5):
        c.load(key(3))
        c.store(key(4), b"x", {})
    assert len(warnings_of(caplog)) == 1
    assert c.info()["mode"] == "memory" and "refus" in c.info()["problem"]
    assert not os.path.exists(c.path_for(key(2)))


def test_unwritable_directory_memory_only_one_warning(tmp_path, monkeypatch, caplog):
    d = tmp_path / "cache"
    cache(tmp_path).store(key(1), b"old", {"n": 1})       # a valid entry written earlier
    real_open = os.open

    def deny_create(path, flags, *a, **kw):   # what a read-only mount / chmod 500 does
        if flags & os.O_CREAT and str(path).startswith(str(d)):
            raise PermissionError(13, "Permission denied", path)
        return real_open(path, flags, *a, **kw)

    if IS_ROOT or os.name != "posix":         # root ignores permission bits
        monkeypatch.setattr(os, "open", deny_create)
    else:
        os.chmod(d, 0o500)
        for sub in d.iterdir():
            os.chmod(sub, 0o500)
    caplog.set_level(logging.WARNING, logger="jitgrad.cache")
    c = cache(tmp_path)
    results = [c.store(key(i), b"new%d" % i, {"i": i}) for i in range(2, 8)]
    assert results == [False] * 6                          # not on disk ...
    assert c.load(key(5)) == (b"new5", {"i": 5})          # ... but cached in memory
    assert c.load(key(1)) == (b"old", {"n": 1})           # existing entries still readable
    assert len(warnings_of(caplog)) == 1
    assert c.info()["mode"] == "memory"
    if not IS_ROOT and os.name == "posix":
        os.chmod(d, 0o700)


def test_uncreatable_directory_memory_only(tmp_path, monkeypatch, caplog):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("JITGRAD_CACHE_DIR", str(blocker / "cache"))
    caplog.set_level(logging.WARNING, logger="jitgrad.cache")
    c = default_cache()
    c._fingerprint = FP
    for i in range(4):
        assert c.store(key(i), b"p", {}) is False
        assert c.load(key(i)) == (b"p", {})
    assert len(warnings_of(caplog)) == 1
    assert c.info()["entries"] == 0


# ----------------------------------------------------------------------------- size limit

def test_lru_eviction(tmp_path):
    c = cache(tmp_path, max_bytes=10**9)
    entry_size = None
    now = time.time()
    for i in range(6):
        c.store(key(i), bytes([i]) * 10_000, {"i": i})
        os.utime(c.path_for(key(i)), (now - 1000 + i * 10,) * 2)   # 0 oldest ... 5 newest
        entry_size = os.path.getsize(c.path_for(key(i)))
    assert c.load(key(0))[1] == {"i": 0}          # use the oldest: it becomes most recent
    assert os.path.getmtime(c.path_for(key(0))) > now - 5
    c.max_bytes = 5 * entry_size + 10              # next store is over the limit
    c.store(key(6), bytes([6]) * 10_000, {"i": 6})
    left = {i for i in range(7) if os.path.exists(c.path_for(key(i)))}
    # evicted down to 90% of the limit: the least recently used ones went first
    assert left == {0, 4, 5, 6}
    assert c.info()["evictions"] == 3
    assert c.info()["bytes"] <= c.max_bytes
    # explicit prune
    assert c.prune(2 * entry_size + 100) == 2   # sizes differ by a few bytes
    assert {i for i in range(7) if os.path.exists(c.path_for(key(i)))} == {0, 6}
    assert c.prune(0) == 2 and c.info()["entries"] == 0


def test_entry_bigger_than_limit_not_stored(tmp_path):
    c = cache(tmp_path, max_bytes=1000)
    assert c.store(key(), b"x" * 5000, {}) is False
    assert c.load(key()) is None


def test_max_bytes_from_env(monkeypatch):
    monkeypatch.setenv("JITGRAD_CACHE_MAX_BYTES", "64M")
    assert default_cache().max_bytes == 64 << 20
    monkeypatch.setenv("JITGRAD_CACHE_MAX_BYTES", "12345")
    assert default_cache().max_bytes == 12345
    monkeypatch.delenv("JITGRAD_CACHE_MAX_BYTES")
    assert default_cache().max_bytes == disk.DEFAULT_MAX_BYTES == 1 << 30


# ----------------------------------------------------------------------------- switches

def test_disabled_by_env_and_api(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("JITGRAD_CACHE", "0")
    c = default_cache()
    c._fingerprint = FP
    assert not c.enabled
    assert c.store(key(), b"p", {}) is False and c.load(key()) is None
    assert not d.exists()
    assert c.info()["mode"] == "disabled"
    monkeypatch.delenv("JITGRAD_CACHE")
    c2 = default_cache()
    assert c2 is not c and c2.enabled
    set_enabled(False)
    assert not default_cache().enabled
    set_enabled(None)
    assert default_cache().enabled


def test_default_cache_location(tmp_path, monkeypatch):
    assert default_cache().directory == str(tmp_path / "cache")
    assert default_cache() is default_cache()
    monkeypatch.delenv("JITGRAD_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache().directory == str(tmp_path / "xdg" / "jitgrad")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache().directory == str(tmp_path / "home" / ".cache" / "jitgrad")


# ----------------------------------------------------------------------------- concurrency

def _writer(directory, k, i, barrier, rounds):
    c = DiskCache(directory, fingerprint=FP)
    barrier.wait()
    for _ in range(rounds):
        if not c.store(k, _payload(i), {"writer": i}):
            sys.exit(3)


def _reader(directory, k, barrier, deadline, q):
    c = DiskCache(directory, fingerprint=FP)
    barrier.wait()
    seen, bad = 0, 0
    while time.time() < deadline:
        r = c.load(k)
        if r is not None:
            payload, meta = r
            seen += 1
            bad += payload != _payload(meta["writer"])
    q.put((seen, bad, c.rejects))


def _payload(i):
    return bytes([i]) * (200_000 + 37_000 * i)     # different sizes: a torn write would show


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_concurrent_writers_and_readers(tmp_path):
    ctx = multiprocessing.get_context("fork")
    d, k = str(tmp_path / "cache"), key()
    nw, nr = 6, 3
    barrier = ctx.Barrier(nw + nr)
    q = ctx.Queue()
    deadline = time.time() + 2.5
    procs = [ctx.Process(target=_writer, args=(d, k, i, barrier, 15)) for i in range(nw)]
    procs += [ctx.Process(target=_reader, args=(d, k, barrier, deadline, q)) for _ in range(nr)]
    for p in procs:
        p.start()
    results = [q.get(timeout=30) for _ in range(nr)]
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    assert sum(r[0] for r in results) > 0           # readers did see entries
    assert all(r[1] == 0 for r in results)          # never a wrong payload
    assert all(r[2] == 0 for r in results)          # never a torn/partial file
    payload, meta = cache(tmp_path).load(k)         # one valid entry at the end
    assert payload == _payload(meta["writer"])
    sub = os.path.dirname(cache(tmp_path).path_for(k))
    assert os.listdir(sub) == [k + ".jgk"]          # no temp files left behind


# ----------------------------------------------------------------------------- CLI

def test_cli_info_clear_prune(tmp_path, capsys):
    c = cache(tmp_path)
    for i in range(4):
        c.store(key(i), b"z" * 3000, {})
    assert cli_main(["info"]) == 0
    out = capsys.readouterr().out
    assert str(tmp_path / "cache") in out and "entries:    4" in out
    assert "limit:      1073741824" in out and "enabled:    yes" in out
    assert cli_main(["prune", "--max-bytes", "7000"]) == 0
    assert "removed 2 entries" in capsys.readouterr().out
    assert cli_main(["prune"]) == 0
    assert "removed 0 entries" in capsys.readouterr().out
    assert cli_main(["clear"]) == 0
    assert "removed 2 entries" in capsys.readouterr().out
    assert c.info()["entries"] == 0
    assert cli_main(["bogus"]) != 0


def test_cli_module_entry_point(tmp_path):
    env = dict(os.environ, JITGRAD_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, "-m", "jitgrad", "cache", "info"], env=env, cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "location:   " + str(tmp_path / "cache") in r.stdout
    assert not (tmp_path / "cache").exists()        # info has no side effects


# ----------------------------------------------------------------------------- native objects

def _build_object():
    """Object code for: add2(double,double); myexp(float) -> expf; cp(dst,src,n) -> llvm.memcpy;
    table(i) -> constant array in .rodata."""
    from llvmlite import ir
    from jitgrad.cache.native import host_target_machine
    tm = host_target_machine()
    m = ir.Module("t")
    m.triple = tm.triple
    m.data_layout = str(tm.target_data)
    d, f, i64 = ir.DoubleType(), ir.FloatType(), ir.IntType(64)
    i8p = ir.IntType(8).as_pointer()
    fn = ir.Function(m, ir.FunctionType(d, [d, d]), "add2")
    b = ir.IRBuilder(fn.append_basic_block())
    b.ret(b.fadd(*fn.args))
    expf = ir.Function(m, ir.FunctionType(f, [f]), "expf")
    fn = ir.Function(m, ir.FunctionType(f, [f]), "myexp")
    b = ir.IRBuilder(fn.append_basic_block())
    b.ret(b.call(expf, [fn.args[0]]))
    memcpy = m.declare_intrinsic("llvm.memcpy", [i8p, i8p, i64])
    fn = ir.Function(m, ir.FunctionType(ir.VoidType(), [i8p, i8p, i64]), "cp")
    b = ir.IRBuilder(fn.append_basic_block())
    b.call(memcpy, [*fn.args, ir.Constant(ir.IntType(1), 0)])
    b.ret_void()
    arr_t = ir.ArrayType(d, 5)
    g = ir.GlobalVariable(m, arr_t, "tbl")
    g.global_constant = True
    g.linkage = "internal"
    g.initializer = ir.Constant(arr_t, [1.5, 2.5, 4.25, 8.125, 16.0625])
    fn = ir.Function(m, ir.FunctionType(d, [i64]), "table")
    b = ir.IRBuilder(fn.append_basic_block())
    b.ret(b.load(b.gep(g, [ir.Constant(i64, 0), fn.args[0]])))
    import llvmlite.binding as llvm
    mod = llvm.parse_assembly(str(m))
    mod.verify()
    return tm.emit_object(mod)


CALL_ALL = """
import ctypes, json, math, sys
from jitgrad.cache.native import load_object
def call_all(payload):
    e1, a = load_object(payload, "add2")
    add2 = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double, ctypes.c_double)(a)
    e2, a = load_object(payload, "myexp")
    myexp = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_float)(a)
    e3, a = load_object(payload, "cp")
    cp = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(a)
    src = ctypes.create_string_buffer(bytes(range(256)) * 40)
    dst = ctypes.create_string_buffer(len(src))
    cp(ctypes.addressof(dst), ctypes.addressof(src), len(src))
    e4, a = load_object(payload, "table")
    table = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_int64)(a)
    return {"add2": add2(1.25, 2.5), "myexp": myexp(1.0), "cp": dst.raw == src.raw,
            "table": [table(i) for i in range(5)]}
"""

EXPECTED = {"add2": 3.75, "cp": True, "table": [1.5, 2.5, 4.25, 8.125, 16.0625]}


def _check(res):
    assert res["add2"] == EXPECTED["add2"]
    assert res["cp"] is True
    assert res["table"] == EXPECTED["table"]
    assert abs(res["myexp"] - 2.718281828) < 1e-6


def test_load_object_in_process():
    ns = {}
    exec(CALL_ALL, ns)
    _check(ns["call_all"](_build_object()))
    from jitgrad.cache.native import load_object
    with pytest.raises(KeyError):
        load_object(_build_object(), "no_such_symbol")


def test_object_cached_and_run_in_fresh_process(tmp_path, monkeypatch):
    payload = _build_object()
    script = CALL_ALL + textwrap.dedent("""
        from jitgrad.cache import default_cache, make_key, environment_fingerprint
        c = default_cache()
        hit = c.load(make_key("native-test-signature"))
        if hit is None:
            print(json.dumps({"miss": environment_fingerprint()}))
            sys.exit(0)
        res = call_all(hit[0])
        res["info"] = c.info()
        print(json.dumps(res))
    """)
    env = dict(os.environ, PYTHONPATH=ROOT)
    for attempt in range(3):
        # fingerprint includes a stamp of jitgrad's sources: recompute it now, in case
        # someone edited them since this process started (the child sees the files as they are)
        monkeypatch.setattr(disk, "_FP", None)
        assert default_cache().store(make_key("native-test-signature"), payload, {"symbols": ["add2"]})
        r = subprocess.run([sys.executable, "-c", script], env=env, cwd=str(tmp_path),
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        res = json.loads(r.stdout.strip().splitlines()[-1])
        if "miss" not in res:
            break
        # only acceptable reason for a miss: the sources changed in between
        assert res["miss"] != disk.environment_fingerprint(), res["miss"]
    _check(res)
    assert res["info"]["hits"] == 1 and res["info"]["misses"] == 0 and res["info"]["rejects"] == 0


def test_load_object_does_not_steal_a_shared_target_machine():
    """create_mcjit_compiler takes ownership of its TargetMachine: an engine built on a
    shared one frees it when collected and the next emit_object crashes the process.
    load_object gives every engine its own; run in a subprocess so a crash is a failure."""
    script = textwrap.dedent("""
        import gc, sys
        sys.path.insert(0, %r)
        from test_disk_cache import _build_object
        from jitgrad.cache.native import host_target_machine, load_object
        import llvmlite.binding as llvm
        tm = host_target_machine()
        src = "define double @f(double %%a) {\\n %%r = fadd double %%a, 1.0\\n ret double %%r\\n}"
        obj = tm.emit_object(llvm.parse_assembly(src))
        for i in range(20):
            engine, addr = load_object(obj, "f")
            del engine
            gc.collect()
            obj = tm.emit_object(llvm.parse_assembly(src))
        print("ok")
    """ % os.path.join(ROOT, "tests"))
    r = subprocess.run([sys.executable, "-c", script], env=dict(os.environ, PYTHONPATH=ROOT),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "ok", (r.returncode, r.stderr[-2000:])


# ----------------------------------------------------------------------------- host facts

def _facts_path():
    identity = disk._host_identity()
    assert identity, "host identity readable on this platform"
    deferred.wait()     # the facts are written after they are used (cache/deferred.py)
    return disk._host_facts_cache().path_for(disk._host_facts_key(identity))


@pytest.mark.skipif(not os.path.exists("/proc/cpuinfo"), reason="host identity comes from /proc/cpuinfo")
def test_host_facts_cached_so_a_warm_process_does_not_ask_llvm(monkeypatch):
    monkeypatch.setattr(disk, "_FP", None)
    fp = disk.environment_fingerprint()
    assert os.path.exists(_facts_path())
    assert default_cache().info()["hits"] == 0          # not counted as a kernel hit

    def no_llvm():
        raise AssertionError("asked LLVM although the facts are cached")
    monkeypatch.setattr(disk, "ask_llvm", no_llvm)
    monkeypatch.setattr(disk, "_FP", None)
    assert disk.environment_fingerprint() == fp


@pytest.mark.skipif(not os.path.exists("/proc/cpuinfo"), reason="host identity comes from /proc/cpuinfo")
def test_damaged_host_facts_are_recomputed(monkeypatch):
    monkeypatch.setattr(disk, "_FP", None)
    fp = disk.environment_fingerprint()
    path = _facts_path()
    blob = bytearray(open(path, "rb").read())
    blob[len(blob) // 2] ^= 0xFF
    with open(path, "wb") as f:
        f.write(blob)
    asked = []
    real = disk.ask_llvm
    monkeypatch.setattr(disk, "ask_llvm", lambda: asked.append(1) or real())
    monkeypatch.setattr(disk, "_FP", None)
    assert disk.environment_fingerprint() == fp and asked == [1]
    assert disk._host_facts_cache().load(disk._host_facts_key(disk._host_identity())) is not None


@pytest.mark.skipif(not os.path.exists("/proc/cpuinfo"), reason="host identity comes from /proc/cpuinfo")
def test_stale_host_facts_are_corrected_before_code_generation(monkeypatch, caplog):
    """Two hosts with one identity (never seen, but possible in principle): the compiler
    checks the cached facts against LLVM's before generating code and replaces them."""
    real = disk.ask_llvm()
    key = disk._host_facts_key(disk._host_identity())
    bogus = dict(real, cpu="some-other-cpu")
    assert disk._host_facts_cache().store(key, json.dumps(bogus).encode(), {"kind": "host-facts"})
    monkeypatch.setattr(disk, "_FP", None)
    assert disk.environment_fingerprint()["cpu"] == "some-other-cpu"
    with caplog.at_level(logging.WARNING, logger="jitgrad.cache"):
        disk.confirm_host_facts(real)
    assert disk.environment_fingerprint()["cpu"] == real["cpu"]
    assert any("differ" in r.getMessage() for r in warnings_of(caplog))
    monkeypatch.setattr(disk, "_FP", None)
    assert disk.environment_fingerprint()["cpu"] == real["cpu"]


def test_no_host_facts_written_when_disabled(tmp_path, monkeypatch):
    monkeypatch.setenv("JITGRAD_CACHE", "0")
    monkeypatch.setattr(disk, "_FP", None)
    assert disk.environment_fingerprint()["cpu"]
    assert not (tmp_path / "cache").exists()


# ----------------------------------------------------------------------------- hostile files (issue 16)

@posix_only
def test_fifo_in_place_of_an_entry_never_blocks(tmp_path):
    """open() of a FIFO for reading blocks until a writer comes: a FIFO planted where an
    entry belongs hung Session.run.  It is refused without being opened."""
    import threading
    c = cache(tmp_path)
    k = key()
    c.store(key(9), b"other", {})                    # creates the directory tree
    os.makedirs(os.path.dirname(c.path_for(k)), mode=0o700, exist_ok=True)
    os.mkfifo(c.path_for(k), 0o600)
    result = []
    t = threading.Thread(target=lambda: result.append(c.load(k)), daemon=True)
    t.start()
    t.join(10)
    if t.is_alive():                                 # release it before failing
        os.close(os.open(c.path_for(k), os.O_WRONLY | os.O_NONBLOCK))
        t.join(10)
        pytest.fail("load() blocked on a FIFO")
    assert result == [None] and c.info()["rejects"] == 1
    os.unlink(c.path_for(k))
    assert c.store(k, b"code", {}) and c.load(k) == (b"code", {})


def test_oversized_entry_is_refused_unread(tmp_path, monkeypatch):
    """An 8 GiB file (sparse here) was read whole before being rejected."""
    c = cache(tmp_path)
    k = key()
    assert c.store(k, b"code", {})
    with open(c.path_for(k), "r+b") as f:
        f.truncate(8 << 30)
    reads = []
    real_read = os.read
    monkeypatch.setattr(os, "read", lambda fd, n: reads.append(n) or real_read(fd, n))
    assert c.load(k) is None and c.info()["rejects"] == 1
    assert sum(reads) == 0


def test_entry_limit_bounds_what_is_stored_and_read(tmp_path, monkeypatch):
    monkeypatch.setattr(disk, "MAX_ENTRY_BYTES", 4096)
    c = cache(tmp_path)
    assert c.store(key(1), b"x" * 1000, {})
    assert not c.store(key(2), b"x" * 5000, {})      # (kept in memory instead)
    monkeypatch.setattr(disk, "MAX_ENTRY_BYTES", 512)
    assert cache(tmp_path).load(key(1)) is None


def test_directory_removed_by_another_process_is_made_again(tmp_path, caplog):
    """A concurrent `jitgrad cache clear` (or rm -r) must not turn this process's cache
    memory-only for the rest of its life."""
    import shutil
    c = cache(tmp_path)
    assert c.store(key(1), b"one", {})
    caplog.set_level(logging.WARNING, logger="jitgrad.cache")
    assert cli_main(["clear"]) == 0                  # (same directory): two-letter directories removed
    assert os.listdir(tmp_path / "cache") == []
    assert c.store(key(2), b"two", {}) and os.path.exists(c.path_for(key(2)))
    shutil.rmtree(tmp_path / "cache")                # the root too
    assert c.store(key(3), b"three", {}) and os.path.exists(c.path_for(key(3)))
    assert stat.S_IMODE(os.stat(tmp_path / "cache").st_mode) == 0o700
    assert c.info()["mode"] == "disk" and warnings_of(caplog) == []
    assert cache(tmp_path).load(key(3)) == (b"three", {})


@posix_only
@pytest.mark.parametrize("problem", ["symlink", "group_writable", "other_writable", "file"]
                         + (["foreign_owner"] if IS_ROOT else []))   # (only root can give a directory away)
def test_two_letter_directories_get_the_roots_checks(tmp_path, monkeypatch, problem):
    c = cache(tmp_path)
    k = key()
    assert c.store(key(7), b"x", {})                 # the root exists and is vetted
    sub = os.path.dirname(c.path_for(k))
    if problem == "symlink":                         # to a directory holding a valid entry
        elsewhere = DiskCache(str(tmp_path / "elsewhere"), fingerprint=FP)
        assert elsewhere.store(k, b"planted", {})
        os.symlink(os.path.dirname(elsewhere.path_for(k)), sub)
    elif problem == "file":
        open(sub, "w").close()
    else:
        assert c.store(k, b"planted", {})
        if problem == "group_writable":
            os.chmod(sub, 0o770)
        elif problem == "other_writable":
            os.chmod(sub, 0o707)
        else:
            os.chown(sub, 4321, 4321)                # the entry inside is still ours
    c2 = cache(tmp_path)
    assert c2.load(k) is None
    assert c2.info()["rejects"] == (0 if problem == "file" else 1)   # (a file there: no entry, a miss)
    assert c2.store(k, b"fresh", {}) is False        # never written there ...
    assert c2.load(k) == (b"fresh", {})              # ... kept in memory
    assert c2.info()["mode"] == "disk"               # and the rest of the cache is still used
    assert c2.store(key(8), b"y", {}) and c2.load(key(8)) == (b"y", {})
