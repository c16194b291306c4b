"""On-disk cache of compiled kernels (native object code), shared across processes.

How the compiler uses it (jitgrad/compiler.py)
==============================================

    key = make_key(signature)          # signature + environment_fingerprint()
    hit = default_cache().load(key)    # -> (object code, meta) or None
    if hit: code = jitgrad.cache.native.load(hit[0])     # no optimiser, no codegen
    else:   compile, then default_cache().store(key, object_code, meta)

`meta` holds everything needed to call the kernel without the IR (symbol name,
argument slots, output shapes/dtypes, arena size, thread layout; JSON types only).

The fingerprint (`environment_fingerprint`) covers jitgrad's version and a stamp of
its sources, llvmlite's and LLVM's versions, the process triple and LLVM's host CPU
name and feature string.  LLVM's host facts are themselves cached here (entries with
their own fingerprint, keyed by a cheap host identity read from /proc/cpuinfo and the
llvmlite build), so a warm process needs neither LLVM's optimiser nor llvmlite.binding.

Settings (environment, re-read by `default_cache()` whenever they change)
=======================================================================

- `JITGRAD_CACHE_DIR`: directory (default `$XDG_CACHE_HOME/jitgrad`, else `~/.cache/jitgrad`).
- `JITGRAD_CACHE=0` (or false/off/no): disable the disk cache.  API: `set_enabled(False)`;
  `set_enabled(None)` returns to the environment's setting.
- `JITGRAD_CACHE_MAX_BYTES`: size limit, bytes or with a K/M/G suffix (default 1 GiB).
  After a store pushes the cache over the limit, least-recently-used entries (by mtime,
  which `load` refreshes) are evicted down to 90 % of the limit; `prune(n)` goes to n.

Entry format (one file per key: `<dir>/<key[:2]>/<key>.jgk`, mode 0600)
=====================================================================

    offset 0   8 bytes   magic b"JGKCACHE"
           8   u32 LE    format version (FORMAT_VERSION)
          12   u32 LE    header length H
          16   u64 LE    payload length P
          24   H bytes   header: UTF-8 JSON {"key", "fingerprint", "meta", "created"}
       24+H    P bytes   payload (object code)
     24+H+P   32 bytes   SHA-256 of all preceding bytes

On load, everything is verified (length, magic, version, checksum, key == file name,
fingerprint == this process's `environment_fingerprint()`); anything else is a
*reject*: logged (logger "jitgrad.cache"), counted, treated as a miss, and replaced
by the next store.  Writes go to a temporary file in the same directory, are fsynced
and renamed over the entry with `os.replace` (then the directory is fsynced), so
readers see either the old complete entry or the new complete one.

Security: entries are native code that will be executed.  The cache directory must
be owned by the current user and not writable by group/others (it is created 0700);
otherwise it is refused and the cache works in memory only (one warning).  The
two-letter subdirectories get the same checks (a real directory, not a symlink, ours,
private) before an entry in them is read or written.  Entries are opened without
following symlinks, never opened at all unless lstat says they are regular files (a
FIFO would block open()), and refused unless owned by the current user and not
writable by group/others; a file larger than any entry this cache writes
(`MAX_ENTRY_BYTES`, or the size limit if lower) is refused unread.  A directory removed
meanwhile (`jitgrad cache clear`, `rm -r` in another process) is made again on the next
store.  A directory that cannot
be created or written (read-only, permission denied) degrades to memory-only stores
with one warning; valid entries already there are still loaded.  No error from the
file system ever reaches the caller.
"""
import errno
import hashlib
import json
import logging
import os
import stat
import struct
import sys
import threading
import time
from collections import OrderedDict
from .. import __version__ as jv
from . import deferred
from .native import llvm_host_facts

log = logging.getLogger("jitgrad.cache")

MAGIC = b"JGKCACHE"
FORMAT_VERSION = 1
SUFFIX = ".jgk"
DEFAULT_MAX_BYTES = 1 << 30          # 1 GiB
EVICT_TO_FRACTION = 0.9              # automatic eviction target (fraction of the limit)
STALE_TMP_SECONDS = 3600             # prune() removes abandoned temp files older than this
MAX_ENTRY_BYTES = 256 << 20          # a kernel's object code is KiBs to a few MiB: larger files are not read

_HEAD = struct.Struct("<8sIIQ")
_DIGEST = 32
_POSIX = os.name == "posix"
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_BINARY = getattr(os, "O_BINARY", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_FALSY = ("0", "false", "off", "no", "disable", "disabled")


def _current_uid():
    """Effective uid (files we create get it).  Tests monkeypatch this."""
    return os.geteuid() if hasattr(os, "geteuid") else None


# --------------------------------------------------------------------------- environment

_FP = None
_FP_LOCK = threading.Lock()


def _source_stamp():
    """Digest of (path, size, mtime) of jitgrad's own .py files: a developer editing the
    code generator without bumping the version never loads code from the old one."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    h = hashlib.sha256()
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x != "__pycache__" and not x.startswith("."))
        for f in sorted(files):
            if f.endswith(".py"):
                p = os.path.join(d, f)
                try:
                    st = os.stat(p)
                except OSError:
                    continue
                h.update(f"{os.path.relpath(p, root)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:32]


def environment_fingerprint():
    """Everything outside the graph that changes the generated code (cached per process).

    LLVM's view of the host (version, triple, CPU name and features) comes from
    `_llvm_host_facts`, which avoids importing llvmlite.binding when it can."""
    global _FP
    if _FP is None:
        with _FP_LOCK:
            if _FP is None:
                import llvmlite
                _FP = dict(_llvm_host_facts(), **{
                    "format": FORMAT_VERSION,
                    "jitgrad": jv,
                    "jitgrad_source": _source_stamp(),
                    "llvmlite": llvmlite.__version__,
                    "python": "%d.%d.%d" % sys.version_info[:3],
                    "platform": f"{sys.platform}-{os.uname().machine if hasattr(os, 'uname') else ''}",
                })
    return dict(_FP)


def confirm_host_facts(facts):
    """Called by the compiler with LLVM's own answers before it generates code.  Should
    the fingerprint have been built from a stale host-facts entry (two hosts with one
    identity), the entry is replaced and later keys use the real facts."""
    global _FP
    with _FP_LOCK:
        if _FP is None or all(_FP.get(k) == facts[k] for k in HOST_FACT_KEYS):
            return
        log.warning("jitgrad cache: cached host facts %s differ from LLVM's %s; replacing them",
                    {k: _FP.get(k) for k in HOST_FACT_KEYS}, facts)
        _FP = dict(_FP, **facts)
    identity = _host_identity()
    if identity:
        store_facts("host-facts", identity, facts)


def _facts_entry(kind, identity):
    """(side cache, key) of a facts record; (None, None) when the disk cache is disabled."""
    cache = _host_facts_cache()
    return (cache, _facts_key(kind, identity)) if cache is not None else (None, None)


def load_facts(kind, identity):
    """A small JSON record (a dict) another process stored with `store_facts` under
    (kind, identity) -- e.g. what LLVM answered about a named CPU -- or None.  Kept
    beside the host facts: the kernel cache's directory, its own fingerprint."""
    got = _load_side(kind, identity)
    if got is None:
        return None
    try:
        facts = json.loads(got.decode("utf-8"))
    except ValueError:
        return None
    return facts if isinstance(facts, dict) else None


def store_facts(kind, identity, facts):
    _store_side(kind, identity, json.dumps(facts, sort_keys=True).encode("utf-8"))


def load_compiled(kind, source_digest):
    """Object code another process compiled with this llvmlite build on this host from
    the source whose digest is `source_digest`, stored with `store_compiled`; or None
    (also when the host's identity cannot be read).  Beside the host facts, like them
    checksummed and permission-checked.  For code every process needs and that depends
    on nothing else (codegen/thread_pool.py: the worker pool's loops)."""
    identity = _host_identity()
    return _load_side(kind, json.dumps([identity, source_digest])) if identity else None


def store_compiled(kind, source_digest, payload):
    identity = _host_identity()
    if identity:
        _store_side(kind, json.dumps([identity, source_digest]), bytes(payload))


def _load_side(kind, identity):
    cache, key = _facts_entry(kind, identity)
    got = cache.load(key) if cache is not None else None
    return None if got is None else got[0]


def _store_side(kind, identity, payload):
    cache, key = _facts_entry(kind, identity)
    if cache is not None:
        cache.store(key, payload, {"kind": kind}, later=True)   # not waited for (deferred.py)


def _host_facts_cache():
    """The host facts live in the kernel cache's directory, in entries with their own
    fingerprint, read through a separate quiet DiskCache so they never count as kernel
    hits or repeat the kernel cache's warnings.  None when the disk cache is disabled."""
    d = default_cache()
    if not d.enabled:
        return None
    return DiskCache(d.directory, max_bytes=d.max_bytes, fingerprint=_HOST_FACTS_FINGERPRINT, quiet=True)


def _host_facts_key(identity):
    return _facts_key("host-facts", identity)


def _facts_key(kind, identity):
    return hashlib.sha256(f"jitgrad-{kind}\0{identity}".encode()).hexdigest()


HOST_FACT_KEYS = ("llvm", "triple", "cpu", "features")
_HOST_FACTS_FINGERPRINT = {"host-facts": 1}


def _host_identity():
    """A cheap description (no LLVM) of what LLVM's host facts depend on: the llvmlite
    build (version, size and mtime of its shared library) and the CPU as the kernel
    reports it (/proc/cpuinfo: vendor, family, model, stepping, flags).  None where
    it cannot be read (non-Linux): then the facts are always asked of LLVM."""
    import llvmlite
    try:
        bdir = os.path.join(os.path.dirname(llvmlite.__file__), "binding")
        libs = []
        for f in sorted(os.listdir(bdir)):
            if f.startswith("libllvmlite") or f.endswith((".so", ".dylib", ".dll")):
                st = os.stat(os.path.join(bdir, f))
                libs.append((f, st.st_size, st.st_mtime_ns))
        with open("/proc/cpuinfo", "rb") as fh:
            first = fh.read(1 << 16).split(b"\n\n", 1)[0].decode("latin-1")
    except OSError:
        return None
    wanted = ("vendor_id", "cpu family", "model", "model name", "stepping", "flags")
    cpu = sorted(tuple(part.strip() for part in line.split(":", 1)) for line in first.splitlines()
                 if ":" in line and line.split(":", 1)[0].strip() in wanted)
    if not libs or len(cpu) < 3:
        return None
    return json.dumps([llvmlite.__version__, libs, cpu, sys.platform, os.uname().machine])


def ask_llvm():
    """LLVM's own host facts (imports llvmlite.binding; jitgrad.cache.native)."""
    return llvm_host_facts()


def _llvm_host_facts():
    """LLVM version, process triple, host CPU name and features.  Asking LLVM means
    importing llvmlite.binding (~40 ms), which a process whose kernels all come from the
    disk cache does not otherwise need; so the answer is kept in the disk cache as an
    entry keyed by `_host_identity()` (checksummed and permission-checked like any
    entry).  Another CPU or llvmlite build has another identity, so it asks LLVM."""
    identity = _host_identity()
    facts = load_facts("host-facts", identity) if identity else None
    if facts and set(facts) == set(HOST_FACT_KEYS) and all(isinstance(v, str) for v in facts.values()):
        return facts
    facts = ask_llvm()
    if identity:
        store_facts("host-facts", identity, facts)
    return facts


def make_key(signature, fingerprint=None):
    """sha256 hex digest over the signature and the environment fingerprint (the code
    generation target is a component of the signature: cache/key.py)."""
    if isinstance(signature, str):
        signature = signature.encode("utf-8")
    fp = environment_fingerprint() if fingerprint is None else fingerprint
    h = hashlib.sha256(b"jitgrad-kernel\0")
    h.update(json.dumps(fp, sort_keys=True, separators=(",", ":")).encode("utf-8"))
    h.update(b"\0")
    h.update(signature)
    return h.hexdigest()


# --------------------------------------------------------------------------- settings

_ENABLED_OVERRIDE = None


def set_enabled(flag):
    """API switch: False disables the disk cache, True enables it whatever JITGRAD_CACHE
    says, None returns to the environment's setting."""
    global _ENABLED_OVERRIDE
    _ENABLED_OVERRIDE = None if flag is None else bool(flag)


def _env_enabled():
    if _ENABLED_OVERRIDE is not None:
        return _ENABLED_OVERRIDE
    return os.environ.get("JITGRAD_CACHE", "1").strip().lower() not in _FALSY


def default_directory():
    d = os.environ.get("JITGRAD_CACHE_DIR")
    if d:
        return os.path.abspath(os.path.expanduser(d))
    base = os.environ.get("XDG_CACHE_HOME")
    if not base or not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "jitgrad")


def parse_size(text):
    """'1073741824', '512M', '2G', '100k' -> int bytes (ValueError if malformed)."""
    s = str(text).strip().lower().rstrip("b").rstrip("i")
    mult = 1
    if s and s[-1] in "kmgt":
        mult = 1024 ** ("kmgt".index(s[-1]) + 1)
        s = s[:-1]
    v = int(float(s) * mult)
    if v < 0:
        raise ValueError(text)
    return v


def _env_max_bytes():
    raw = os.environ.get("JITGRAD_CACHE_MAX_BYTES")
    if not raw:
        return DEFAULT_MAX_BYTES
    try:
        return parse_size(raw)
    except ValueError:
        log.warning("jitgrad cache: ignoring malformed JITGRAD_CACHE_MAX_BYTES=%r", raw)
        return DEFAULT_MAX_BYTES


# --------------------------------------------------------------------------- entry codec

class _Reject(Exception):
    pass


def encode_entry(key, payload, meta, fingerprint):
    header = json.dumps({"key": key, "fingerprint": fingerprint, "meta": meta,
                         "created": time.time()},
                        sort_keys=True, separators=(",", ":"), allow_nan=False).encode("utf-8")
    body = _HEAD.pack(MAGIC, FORMAT_VERSION, len(header), len(payload)) + header + bytes(payload)
    return body + hashlib.sha256(body).digest()


def decode_entry(blob, key, fingerprint):
    """-> (payload, meta); raises _Reject(reason)."""
    if len(blob) < _HEAD.size + _DIGEST:
        raise _Reject("truncated (%d bytes)" % len(blob))
    magic, version, hlen, plen = _HEAD.unpack_from(blob, 0)
    if magic != MAGIC:
        raise _Reject("bad magic")
    if version != FORMAT_VERSION:
        raise _Reject("format version %d (this jitgrad reads %d)" % (version, FORMAT_VERSION))
    end = _HEAD.size + hlen + plen
    if len(blob) != end + _DIGEST:
        raise _Reject("length %d, header says %d" % (len(blob), end + _DIGEST))
    if hashlib.sha256(memoryview(blob)[:end]).digest() != blob[end:]:
        raise _Reject("checksum mismatch")
    try:
        header = json.loads(bytes(blob[_HEAD.size:_HEAD.size + hlen]).decode("utf-8"))
    except ValueError as e:
        raise _Reject("unreadable header: %s" % e)
    if not isinstance(header, dict):
        raise _Reject("unreadable header")
    if header.get("key") != key:
        raise _Reject("entry is for key %r" % (header.get("key"),))
    if header.get("fingerprint") != fingerprint:
        raise _Reject("built for another environment")
    meta = header.get("meta")
    if not isinstance(meta, dict):
        raise _Reject("meta is not a dict")
    return bytes(blob[_HEAD.size + hlen:end]), meta


# --------------------------------------------------------------------------- the cache

def _is_key(key):
    return isinstance(key, str) and 8 <= len(key) <= 128 and all(c in "0123456789abcdef" for c in key)


class DiskCache:
    """Kernel object code on disk, keyed by `make_key(signature)`.  Thread-safe; safe
    for many processes sharing one directory.  Never raises on file-system problems."""

    def __init__(self, directory=None, max_bytes=None, enabled=None, fingerprint=None, quiet=False):
        self.directory = os.path.abspath(os.path.expanduser(directory)) if directory else default_directory()
        self.max_bytes = _env_max_bytes() if max_bytes is None else int(max_bytes)
        self.enabled = _env_enabled() if enabled is None else bool(enabled)
        self._fingerprint = fingerprint        # None: environment_fingerprint() on first use
        self._lock = threading.RLock()
        self._state = None                     # None: not checked; "ok"; "readonly"; "refused"
        self._problem = None
        self._warned = set()
        self._quiet = quiet                    # warnings at debug level (an internal side cache)
        self._mem = OrderedDict()              # key -> (payload, meta): memory-only stores
        self._mem_bytes = 0
        self._disk_bytes = None                # running estimate of the directory's size
        self.hits = self.misses = self.stores = self.rejects = self.evictions = 0

    # ---------------------------------------------------------------- helpers
    @property
    def fingerprint(self):
        if self._fingerprint is not None:
            return self._fingerprint
        if _FP is None:
            environment_fingerprint()
        return _FP

    def path_for(self, key):
        return os.path.join(self.directory, key[:2], key + SUFFIX)

    def _entry_limit(self):
        return min(self.max_bytes, MAX_ENTRY_BYTES)

    def _warn_once(self, tag, msg, *args):
        with self._lock:
            if tag in self._warned or self._quiet:
                log.debug(msg, *args)
                return
            self._warned.add(tag)
        log.warning(msg, *args)

    def _degrade(self, state, reason):
        with self._lock:
            if self._state in ("readonly", "refused"):
                return
            self._state, self._problem = state, reason
        self._warn_once("degraded", "jitgrad cache: %s; compiled kernels are cached in memory only "
                        "for this process", reason)

    def _check_directory(self):
        """Create (0700) and vet the cache directory once; sets self._state."""
        if self._state is not None:
            return self._state
        with self._lock:
            if self._state is not None:
                return self._state
            d = self.directory
            try:
                if not os.path.isdir(d):
                    os.makedirs(d, mode=0o700, exist_ok=True)
                    try:
                        os.chmod(d, 0o700)
                    except OSError:
                        pass
                st = os.stat(d)
            except OSError as e:
                self._degrade("readonly", f"cannot create cache directory {d} ({e.strerror or e})")
                return self._state
            uid = _current_uid()
            if not stat.S_ISDIR(st.st_mode):
                self._degrade("refused", f"{d} is not a directory")
            elif _POSIX and uid is not None and st.st_uid != uid:
                self._degrade("refused", f"cache directory {d} is owned by uid {st.st_uid}, not by us "
                              f"(uid {uid}); refusing to load native code from it")
            elif _POSIX and st.st_mode & 0o022:
                self._degrade("refused", f"cache directory {d} is writable by group/others "
                              f"(mode {stat.S_IMODE(st.st_mode):o}); refusing it (chmod 700 it to use it)")
            elif not os.access(d, os.W_OK | os.X_OK):
                self._degrade("readonly", f"cache directory {d} is not writable")
            else:
                self._state = "ok"
            return self._state

    def _subdir_problem(self, sub):
        """Why the two-letter directory ``sub`` may not hold entries (the root's
        checks: a real directory, not a symlink, ours, private), or None."""
        try:
            st = os.lstat(sub)
        except OSError as e:
            return f"cannot stat ({e.strerror or e})"
        uid = _current_uid()
        if not stat.S_ISDIR(st.st_mode):
            return "not a directory (a symbolic link?)"
        if _POSIX and uid is not None and st.st_uid != uid:
            return f"owned by uid {st.st_uid}, not by us (uid {uid}); not loading native code from it"
        if _POSIX and st.st_mode & 0o022:
            return f"writable by group/others (mode {stat.S_IMODE(st.st_mode):o}); not loading native code from it"
        return None

    # ---------------------------------------------------------------- load
    def load(self, key):
        """-> (payload bytes, meta dict) or None.  Never raises for a bad/missing entry."""
        if not self.enabled:
            return None
        if not _is_key(key):
            raise ValueError(f"not a cache key: {key!r} (use make_key)")
        deferred.wait()             # this process's queued writes first
        with self._lock:
            hit = self._mem.get(key)
            if hit is not None:
                self._mem.move_to_end(key)
                self.hits += 1
                return hit
        state = self._check_directory()
        result = None
        if state in ("ok", "readonly"):
            result = self._load_file(key, touch=(state == "ok"))
        with self._lock:
            if result is None:
                self.misses += 1
            else:
                self.hits += 1
        return result

    def _reject(self, path, reason):
        with self._lock:
            self.rejects += 1
        self._warn_once(("reject", path, reason), "jitgrad cache: ignoring entry %s: %s", path, reason)

    def _load_file(self, key, touch):
        path = self.path_for(key)
        try:
            st = os.lstat(path)
        except OSError:
            return None         # (missing, or its directory is: a miss)
        if not stat.S_ISREG(st.st_mode):    # never open a FIFO, socket or device: open() may block
            self._reject(path, "is a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a regular file")
            return None
        problem = self._subdir_problem(os.path.dirname(path))
        if problem:
            self._reject(os.path.dirname(path), problem)
            return None
        try:   # O_NONBLOCK: should a FIFO replace the file after lstat, open() returns at once
            fd = os.open(path, os.O_RDONLY | _O_NOFOLLOW | _O_BINARY | _O_CLOEXEC | _O_NONBLOCK)
        except FileNotFoundError:
            return None
        except OSError as e:
            if e.errno == errno.ELOOP:
                self._reject(path, "is a symbolic link")
            else:
                self._reject(path, f"cannot open ({e.strerror or e})")
            return None
        try:
            st = os.fstat(fd)
            uid = _current_uid()
            if not stat.S_ISREG(st.st_mode):
                self._reject(path, "not a regular file")
                return None
            if _POSIX and uid is not None and st.st_uid != uid:
                self._reject(path, f"owned by uid {st.st_uid}, not by us (uid {uid}); not loading native code")
                return None
            if _POSIX and st.st_mode & 0o022:
                self._reject(path, f"writable by group/others (mode {stat.S_IMODE(st.st_mode):o}); "
                             "not loading native code")
                return None
            if st.st_size > self._entry_limit():
                self._reject(path, f"{st.st_size} bytes, more than any entry this cache writes")
                return None
            chunks, remaining = [], st.st_size + 1
            while remaining > 0:
                b = os.read(fd, min(remaining, 1 << 24))
                if not b:
                    break
                chunks.append(b)
                remaining -= len(b)
            blob = b"".join(chunks)
            try:
                payload, meta = decode_entry(blob, key, self.fingerprint)
            except _Reject as r:
                self._reject(path, str(r))
                return None
            if touch:   # LRU: a load makes the entry recent
                try:
                    now = time.time()
                    if now - st.st_mtime > 1.0:
                        os.utime(fd if os.utime in os.supports_fd else path, (now, now))
                except OSError:
                    pass
            return payload, meta
        except OSError as e:
            self._reject(path, f"unreadable ({e.strerror or e})")
            return None
        finally:
            os.close(fd)

    # ---------------------------------------------------------------- store
    def store(self, key, payload, meta, later=False):
        """Write an entry; True if it is on disk, False otherwise (disabled, memory-only
        mode, too big, I/O error: logged, never raised).  TypeError for a non-JSON meta.
        `later`: the entry is checked and encoded now, written by deferred.py's writer
        thread (True: queued); for a write that should not delay a result."""
        if not self.enabled:
            return False
        if not _is_key(key):
            raise ValueError(f"not a cache key: {key!r} (use make_key)")
        if not isinstance(payload, (bytes, bytearray, memoryview)):
            raise TypeError("payload must be bytes")
        if not isinstance(meta, dict):
            raise TypeError("meta must be a dict")
        try:
            blob = encode_entry(key, bytes(payload), meta, self.fingerprint)
        except ValueError as e:     # NaN/inf or circular in meta
            raise TypeError(f"meta is not JSON-serialisable: {e}") from None
        if len(blob) > self._entry_limit():
            log.debug("jitgrad cache: entry %s (%d bytes) exceeds the limit %d; not stored",
                      key, len(blob), self.max_bytes)
            return False
        if later:
            deferred.submit(self._write_entry, key, blob, bytes(payload), dict(meta))
            return True
        return self._write_entry(key, blob, payload, meta)

    def _write_entry(self, key, blob, payload, meta):
        """store's write of the encoded entry `blob` (to memory when the directory is unusable)."""
        state = self._check_directory()
        if state == "ok":
            written = self._write_file(key, blob)
            if written:
                with self._lock:
                    self.stores += 1
                    self._mem.pop(key, None)
                self._after_store(len(blob))
                return True
        self._store_memory(key, bytes(payload), dict(meta))
        return False

    def _store_memory(self, key, payload, meta):
        with self._lock:
            old = self._mem.pop(key, None)
            if old is not None:
                self._mem_bytes -= len(old[0])
            self._mem[key] = (payload, meta)
            self._mem_bytes += len(payload)
            self.stores += 1
            while self._mem_bytes > self.max_bytes and len(self._mem) > 1:
                _, (p, _m) = self._mem.popitem(last=False)
                self._mem_bytes -= len(p)
                self.evictions += 1

    def _write_file(self, key, blob):
        """Writes an entry; a directory removed meanwhile (`jitgrad cache clear` or
        `rm -r` in another process) is made again, not a reason for memory-only."""
        for _ in range(3):
            try:
                return self._write_file_once(key, blob)
            except FileNotFoundError:
                with self._lock:
                    self._state = None
                if self._check_directory() != "ok":
                    return False
        return False

    def _write_file_once(self, key, blob):
        final = self.path_for(key)
        sub = os.path.dirname(final)
        tmp = None
        try:
            try:
                os.mkdir(sub, 0o700)
            except FileExistsError:
                pass
            problem = self._subdir_problem(sub)
            if problem:
                self._warn_once(("subdir", sub), "jitgrad cache: not writing to %s: %s", sub, problem)
                return False
            tmp = os.path.join(sub, ".%s.%d.%s.tmp" % (key[:16], os.getpid(), os.urandom(4).hex()))
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_BINARY | _O_CLOEXEC, 0o600)
            try:
                view = memoryview(blob)
                while view:
                    n = os.write(fd, view)
                    view = view[n:]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, final)
            tmp = None
            _fsync_dir(sub)
            return True
        except FileNotFoundError:
            raise                   # the directory went away: _write_file makes it again
        except OSError as e:
            if e.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", -1)):
                self._warn_once("nospace", "jitgrad cache: no space left in %s (%s); entry not stored",
                                self.directory, e.strerror or e)
            else:
                self._degrade("readonly", f"cannot write to cache directory {self.directory} "
                              f"({e.strerror or e})")
            return False
        finally:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass

    def _after_store(self, nbytes):
        with self._lock:
            if self._disk_bytes is None:
                self._disk_bytes = self._scan()[1]
            else:
                self._disk_bytes += nbytes
            over = self._disk_bytes > self.max_bytes
        if over:
            self._prune_to(int(self.max_bytes * EVICT_TO_FRACTION))

    # ---------------------------------------------------------------- maintenance
    def _entries(self):
        """[(path, size, mtime)] of entry files, plus [(path, mtime)] of temp files."""
        deferred.wait()             # this process's queued writes first
        entries, temps = [], []
        try:
            tops = list(os.scandir(self.directory))
        except OSError:
            return entries, temps
        for top in tops:
            try:
                if not (len(top.name) == 2 and top.is_dir(follow_symlinks=False)):
                    continue
                for e in os.scandir(top.path):
                    try:
                        if not e.is_file(follow_symlinks=False):
                            continue
                        st = e.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    if e.name.endswith(SUFFIX):
                        entries.append((e.path, st.st_size, st.st_mtime))
                    elif e.name.startswith(".") and e.name.endswith(".tmp"):
                        temps.append((e.path, st.st_mtime))
            except OSError:
                continue
        return entries, temps

    def _scan(self):
        entries, _ = self._entries()
        return len(entries), sum(s for _, s, _ in entries)

    def _prune_to(self, target):
        entries, temps = self._entries()
        removed = 0
        now = time.time()
        for p, mt in temps:
            if now - mt > STALE_TMP_SECONDS:
                _unlink(p)
        total = sum(s for _, s, _ in entries)
        for p, size, _mt in sorted(entries, key=lambda e: e[2]):
            if total <= target:
                break
            if _unlink(p):
                removed += 1
            total -= size      # gone either way (another process may have removed it)
        with self._lock:
            self.evictions += removed
            self._disk_bytes = total
        if removed:
            log.info("jitgrad cache: evicted %d least-recently-used entries from %s", removed, self.directory)
        return removed

    def prune(self, max_bytes=None):
        """Evict least-recently-used entries until the cache holds at most `max_bytes`
        (default: this cache's limit).  Returns the number of entries removed."""
        target = self.max_bytes if max_bytes is None else int(max_bytes)
        removed = 0
        with self._lock:
            while self._mem_bytes > target and self._mem:
                _, (p, _m) = self._mem.popitem(last=False)
                self._mem_bytes -= len(p)
                removed += 1
        if os.path.isdir(self.directory):
            removed += self._prune_to(target)
        return removed

    def clear(self):
        """Remove every entry (and stray temp file).  Returns the number of entries removed."""
        deferred.wait()             # a write queued before must not bring an entry back
        with self._lock:
            removed = len(self._mem)
            self._mem.clear()
            self._mem_bytes = 0
        if not os.path.isdir(self.directory):
            return removed
        entries, temps = self._entries()
        for p, _s, _m in entries:
            removed += _unlink(p)
        for p, _m in temps:
            _unlink(p)
        try:
            for top in os.scandir(self.directory):
                if len(top.name) == 2 and top.is_dir(follow_symlinks=False):
                    try:
                        os.rmdir(top.path)
                    except OSError:
                        pass
        except OSError:
            pass
        with self._lock:
            self._disk_bytes = 0
        return removed

    def info(self):
        """Location, size and this process's counters."""
        # vet (but never create) the directory: `jitgrad cache info` has no side effects
        state = self._check_directory() if self.enabled and os.path.isdir(self.directory) else self._state
        n, nbytes = self._scan() if os.path.isdir(self.directory) else (0, 0)
        with self._lock:
            return {
                "location": self.directory,
                "enabled": self.enabled,
                "mode": ("disabled" if not self.enabled else "disk" if state in ("ok", None)
                         else "memory"),
                "problem": self._problem,
                "entries": n,
                "bytes": nbytes,
                "max_bytes": self.max_bytes,
                "memory_entries": len(self._mem),
                "hits": self.hits,
                "misses": self.misses,
                "stores": self.stores,
                "rejects": self.rejects,
                "evictions": self.evictions,
                "format_version": FORMAT_VERSION,
            }

    def __repr__(self):
        return f"DiskCache({self.directory!r}, max_bytes={self.max_bytes}, enabled={self.enabled})"


def _unlink(p):
    try:
        os.unlink(p)
        return 1
    except OSError:
        return 0


def _fsync_dir(path):
    if not _POSIX:
        return
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# --------------------------------------------------------------------------- process-wide cache

_DEFAULT = None
_DEFAULT_CONFIG = None
_DEFAULT_LOCK = threading.Lock()


def _config():
    return (default_directory(), _env_max_bytes_raw(), _env_enabled())


def _env_max_bytes_raw():
    return os.environ.get("JITGRAD_CACHE_MAX_BYTES")


def default_cache():
    """The process-wide DiskCache; rebuilt when JITGRAD_CACHE_DIR / XDG_CACHE_HOME /
    JITGRAD_CACHE / JITGRAD_CACHE_MAX_BYTES or set_enabled() change."""
    global _DEFAULT, _DEFAULT_CONFIG
    cfg = _config()
    if _DEFAULT is None or cfg != _DEFAULT_CONFIG:
        with _DEFAULT_LOCK:
            if _DEFAULT is None or cfg != _DEFAULT_CONFIG:
                _DEFAULT = DiskCache(directory=cfg[0], enabled=cfg[2])
                _DEFAULT_CONFIG = cfg
    return _DEFAULT
