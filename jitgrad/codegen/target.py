"""The CPU that code is generated for: the host, or a named LLVM CPU.

    JITGRAD_TARGET_CPU=haswell            # any LLVM x86 CPU name; "host" (default)
    JITGRAD_TARGET_FEATURES=+avx2,-fma    # LLVM feature string, added to the CPU's own
    tf.compat.v1.Session(config=tf.compat.v1.ConfigProto(
        jitgrad_target_cpu="skylake-avx512", jitgrad_target_features=""))

A Target knows its ISA *level* -- "avx512", "avx2" (AVX2 + FMA) or "x86-64" (the
SSE2 baseline) -- and from it the code generator picks the vector width and the
matmul micro-kernel (`matmul_config`).  The level of a named CPU is LLVM's answer,
not a table of ours: a tiny probe module is compiled for it and its assembly read.
The target is part of every kernel's cache key (`key`) and shown by `explain`.

Code compiled for a target the host cannot execute (its level or an explicitly
requested feature is missing here) is never run: `check_runnable` raises
FailedPreconditionError instead of letting the process die of SIGILL.
Limitation: only the level's features and the explicit ones are checked, so a
named CPU with extensions beyond its level that this host lacks (e.g. AMX) is
not caught -- jitgrad never emits code that uses those.
"""
import contextlib
import contextvars
import hashlib
import json
import os
import re
import subprocess
import sys
import threading

from ..cache import disk
from ..cache.native import llvm_binding, llvm_host_facts
from ..errors import FailedPreconditionError

ENV_CPU = "JITGRAD_TARGET_CPU"
ENV_FEATURES = "JITGRAD_TARGET_FEATURES"

# Host features each level's code may use (x86-64-v3 / -v4 less what we never emit).
LEVEL_FEATURES = {
    "x86-64": (),
    "avx2": ("avx", "avx2", "fma", "f16c", "bmi", "bmi2", "lzcnt", "movbe"),
    "avx512": ("avx", "avx2", "fma", "f16c", "bmi", "bmi2", "lzcnt", "movbe",
               "avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"),
}
VECTOR_BITS = {"x86-64": 128, "avx2": 256, "avx512": 512}

# Register blocking per level (see jitgrad/codegen/matmul.py): MR x NR accumulator tile
# held in vector registers of VW lanes, + NR/VW B vectors + 1 broadcast of A.
#   avx2 / x86-64: 16 registers: 6 x (2 vectors) = 12 accumulators + 2 + 1.
#   avx512: 32 registers: 8 x (2 vectors) = 16 accumulators + 2 + 1.  Chosen with
#     bench/bench_matmul.py --sweep on the W3 shapes (znver4, loaded machine, noisy):
#     8x32 f32 had the best geometric mean (63.6 GFLOP/s) over 6x32 (43.7), 12x32,
#     14x32, 6x48, 8x48, 4x64 (19-36), KC 256 over 384; float64 uses the same shape.
#   regs: vector registers, the bound for matmul._plan's taller tiles when C is narrow
#     and A^T is read in place (one cache line of A^T per k: W3's dW2 on a Xeon).
#   masked: edge tiles of C stored with masked vector moves (AVX2/AVX-512 have them;
#     on SSE2 LLVM would scalarise them into a branch per lane).
_MATMUL = {
    ("x86-64", "float32"): dict(vw=4, mr=6, nr=8, kc=256, mc=144, nc=4080, regs=16),
    ("x86-64", "float64"): dict(vw=2, mr=6, nr=4, kc=256, mc=72, nc=4080, regs=16),
    ("avx2", "float32"): dict(vw=8, mr=6, nr=16, kc=256, mc=144, nc=4080, regs=16, masked=True),
    ("avx2", "float64"): dict(vw=4, mr=6, nr=8, kc=256, mc=72, nc=4080, regs=16, masked=True),
    ("avx512", "float32"): dict(vw=16, mr=8, nr=32, kc=256, mc=144, nc=4080, regs=32, masked=True),
    ("avx512", "float64"): dict(vw=8, mr=8, nr=16, kc=256, mc=72, nc=4080, regs=32, masked=True),
}

# Per-CPU changes to the level's blocking, where measured.  icelake-server (Xeon,
# float32): 12 x 32 (24 accumulators + 2 + 1 = 27 of 32 registers: 16 FMAs per k on
# 10 loads became 24 on 14) and MC 72, which makes a parallel GEMM's row chunks 60 /
# 48 rows (then matmul.chunk_rows, now row_chunks; 32 / 40 with 8 x 32).  W3 at 1 thread, in-process A/B
# against 8 x 32 (alternating bursts, thread CPU time, load ~2): median -4 to -9%, p10
# -5%, repeated; same bits (no element's summation order depends on MR or MC).  znver4
# keeps 8 x 32: its sweep (above) had 12 x 32 well behind.
_MATMUL_CPU = {
    ("icelake-server", "float32"): dict(mr=12, mc=72),
}


def _split_features(text):
    """'+a,-b, +c' -> {'a': True, 'b': False, 'c': True} (later entries win, as in LLVM)."""
    out = {}
    for part in (text or "").split(","):
        part = part.strip()
        if not part:
            continue
        if part[0] not in "+-":
            raise ValueError(f"target feature {part!r} must start with '+' or '-' (LLVM feature string)")
        out[part[1:]] = part[0] == "+"
    return out


class Target:
    """A CPU to generate code for.  `cpu` is an LLVM CPU name, `features` an LLVM
    feature string added to that CPU's own features; `is_host` for the host."""

    def __init__(self, cpu, features, level, is_host, uses=()):
        self.cpu, self.features, self.level, self.is_host = cpu, features, level, is_host
        self.uses = tuple(uses)   # extensions the probe saw used besides the level's (e.g. AVX, FMA)
        self.vector_bits = VECTOR_BITS[level]
        if level == "avx512" and _split_features(features).get("prefer-256-bit"):
            self.vector_bits = 256

    def key(self):
        """What the cache key needs beyond the host facts (which already describe the host)."""
        return "host" if self.is_host else f"{self.cpu}|{self.features}"

    def describe(self):
        who = "host " if self.is_host else ""
        feats = f" features {self.features}" if self.features and not self.is_host else ""
        return f"{who}cpu {self.cpu}{feats}: level {self.level}, {self.vector_bits}-bit vectors"

    @property
    def has_fma(self):
        """Whether the code may use FMA instructions (vecmath emulates them otherwise)."""
        if self.is_host:
            return bool(_split_features(self.features).get("fma"))
        return self.level != "x86-64" or "fma" in self.uses

    @property
    def has_round(self):
        """Whether the code may use SSE4.1's round instruction (vecmath rounds inline
        otherwise).  A named CPU below AVX2 counts as the baseline unless its
        features say +sse4.1: conservative, the inline code is only slower."""
        feats = _split_features(self.features)
        if self.is_host:
            return bool(feats.get("sse4.1"))
        return self.level != "x86-64" or bool(feats.get("sse4.1") or feats.get("sse4.2"))

    def lanes(self, itemsize):
        return self.vector_bits // (8 * itemsize)

    def matmul_config(self, dtype):
        """Tile sizes of the packed GEMM for this target (matmul._plan's defaults)."""
        cfg = dict(_MATMUL[(self.level, dtype)])
        cfg["vw"] = self.lanes(4 if dtype == "float32" else 8)
        if cfg["vw"] != _MATMUL[(self.level, dtype)]["vw"]:   # AVX-512 told to prefer 256 bits
            return dict(_MATMUL[("avx2", dtype)])
        cfg.update(_MATMUL_CPU.get((self.cpu, dtype), {}))
        return cfg

    def missing_on_host(self):
        """Features this target's code may use that the host lacks (empty: runnable)."""
        if self.is_host:
            return []
        host = _split_features(_host_facts()["features"])
        wanted = list(LEVEL_FEATURES[self.level]) + [f for f in self.uses if f not in LEVEL_FEATURES[self.level]]
        wanted += [f for f, on in _split_features(self.features).items()
                   if on and f in host and f not in wanted]   # tuning flags are not in the host's list
        return [f for f in wanted if not host.get(f)]

    def target_machine(self, opt=3):
        """A fresh TargetMachine for this target (MCJIT takes ownership of the one it
        gets, so one is never shared with an engine)."""
        llvm = llvm_binding()
        facts = llvm_host_facts()      # LLVM's own answer: this builds code
        cpu, features = (facts["cpu"], facts["features"]) if self.is_host else (self.cpu, self.features)
        return llvm.Target.from_triple(facts["triple"]).create_target_machine(
            cpu=cpu, features=_llvm_features(self.level, features), opt=opt)

    def __eq__(self, other):
        return isinstance(other, Target) and self.key() == other.key()

    def __hash__(self):
        return hash(self.key())

    def __repr__(self):
        return f"Target({self.describe()})"


def _llvm_features(level, features):
    # LLVM's auto-vectoriser prefers 256-bit vectors on some AVX-512 CPUs (and then
    # splits explicit 512-bit vectors too); jitgrad's AVX-512 level means 512-bit code.
    # An explicit +prefer-256-bit in `features` (later in the string) still wins.
    return ",".join(x for x in ("-prefer-256-bit" if level == "avx512" else "", features) if x)


def _host_facts():
    """The host's LLVM facts as the cache fingerprint holds them: kept on disk, so a
    warm process resolving its target does not import llvmlite.binding."""
    fp = disk.environment_fingerprint()
    return {k: fp[k] for k in disk.HOST_FACT_KEYS}


def _level_from_features(feats):
    if feats.get("avx512f") and feats.get("avx512bw") and feats.get("avx512dq") and feats.get("avx512vl"):
        return "avx512"
    if feats.get("avx2") and feats.get("fma"):
        return "avx2"
    return "x86-64"


_PROBE_IR = """
define void @probe(<16 x float>* %p, <8 x i32>* %q) {
  %a = load <16 x float>, <16 x float>* %p, align 64
  %f = call <16 x float> @llvm.fma.v16f32(<16 x float> %a, <16 x float> %a, <16 x float> %a)
  store <16 x float> %f, <16 x float>* %p, align 64
  %i = load <8 x i32>, <8 x i32>* %q, align 32
  %j = add <8 x i32> %i, %i
  store <8 x i32> %j, <8 x i32>* %q, align 32
  ret void
}
declare <16 x float> @llvm.fma.v16f32(<16 x float>, <16 x float>, <16 x float>)
"""


_PROBE_SCRIPT = """
import sys
import llvmlite.binding as llvm
llvm.initialize_native_target()
llvm.initialize_native_asmprinter()
triple, cpu, features, ir = sys.argv[1:5]
tm = llvm.Target.from_triple(triple).create_target_machine(cpu=cpu, features=features, opt=2)
sys.stdout.write(tm.emit_assembly(llvm.parse_assembly(ir)))
"""


def _probe_level(cpu, features):
    """(ISA level, extensions seen used) for a named CPU + features, read off the
    assembly of a probe.
    The probe runs in a child process: LLVM aborts the whole process on some unknown
    CPU names ("64-bit code requested on a subtarget that doesn't support it")."""
    proc = subprocess.run([sys.executable, "-c", _PROBE_SCRIPT, _host_facts()["triple"], cpu,
                           _llvm_features("avx512", features), _PROBE_IR],
                          capture_output=True, text=True, timeout=120)
    err = proc.stderr
    if "not a recognized processor" in err or (proc.returncode and "subtarget" in err):
        raise ValueError(f"jitgrad target: LLVM does not know the CPU {cpu!r} "
                         f"(examples: x86-64, x86-64-v3, haswell, znver3, skylake-avx512, znver4)")
    if "not a recognized feature" in err:
        raise ValueError(f"jitgrad target: LLVM does not know a feature in {features!r}: {err.strip()}")
    if proc.returncode:
        raise RuntimeError(f"jitgrad target: probing CPU {cpu!r} failed: {err.strip()[-500:]}")
    asm = proc.stdout
    uses = [f for f, pattern in (("avx", r"%ymm|^\s+v[a-z]"), ("fma", r"\bvfmadd"),
                                 ("avx2", r"vpaddd\s+%ymm"), ("avx512f", r"%zmm"))
            if re.search(pattern, asm, re.M)]
    if "avx512f" in uses and "fma" in uses:
        level = "avx512"
    elif "avx2" in uses and "fma" in uses:
        level = "avx2"
    else:
        level = "x86-64"
    return level, uses


def _resolved_level(cpu, features):
    """`_probe_level`'s answer, kept in the disk cache under the CPU name, the features
    and LLVM's version and triple: a warm process with JITGRAD_TARGET_CPU set then
    neither starts the probe's child process nor imports llvmlite.binding."""
    facts = _host_facts()
    identity = json.dumps([cpu, features, facts["llvm"], facts["triple"]])
    got = disk.load_facts("target-facts", identity)
    if (got and got.get("level") in VECTOR_BITS and isinstance(got.get("uses"), list)
            and all(isinstance(u, str) for u in got["uses"])):
        return got["level"], tuple(got["uses"])
    level, uses = _probe_level(cpu, features)
    disk.store_facts("target-facts", identity, {"level": level, "uses": list(uses)})
    return level, uses


def baseline():
    """The SSE2 baseline every x86-64 CPU runs (LLVM's "x86-64"), without the probe:
    its level is the definition of "x86-64".  For code shared by kernels of every
    target (codegen/thread_pool.py)."""
    return Target("x86-64", "", "x86-64", False)


def baseline_object_code(kind, text, target=None):
    """Object code of the IR ``text`` for ``baseline()`` (opt 2): small native helpers
    every kernel and the host share (kind "pool-code": codegen/thread_pool.py,
    "mxcsr-code": jitgrad/mxcsr_host.py). From the disk cache when a process with this
    llvmlite build compiled the same IR before (then a process whose kernels all come
    from the disk cache loads no LLVM at all: asking LLVM for the pool's code cost a warm
    W3 process ~40% of its CPU after import), else compiled here and stored. ``target``:
    another (a host-only helper worth vectorising for this CPU: ``get()``)."""
    target = target or baseline()
    digest = hashlib.sha256(f"{target.cpu}|{target.features}\0opt=2\0{text}".encode("utf-8")).hexdigest()
    try:
        obj = disk.load_compiled(kind, digest)
    except Exception:          # an unusable cache directory: compile, as without one
        obj = None
    if obj is None:
        mod = llvm_binding().parse_assembly(text)
        mod.verify()
        obj = target.target_machine(opt=2).emit_object(mod)
        try:
            disk.store_compiled(kind, digest, obj)
        except Exception:
            pass
    return obj


_lock = threading.Lock()
_targets = {}


def get(cpu=None, features=None):
    """The Target for an LLVM CPU name (None / "" / "host": this host) and features."""
    cpu = (cpu or "host").strip()
    features = (features or "").strip()
    _split_features(features)                          # validates the syntax
    k = (cpu, features)
    t = _targets.get(k)
    if t is None:
        with _lock:
            t = _targets.get(k)
            if t is None:
                if cpu == "host" and not features:
                    facts = _host_facts()
                    t = Target(facts["cpu"], facts["features"],
                               _level_from_features(_split_features(facts["features"])), True)
                else:
                    name = _host_facts()["cpu"] if cpu == "host" else cpu
                    level, uses = _resolved_level(name, features)
                    t = Target(name, features, level, False, uses)
                _targets[k] = t
    return t


def spec_key(cpu=None, features=None):
    """`Target.key()` without building the Target (no LLVM): for cache keys on the warm path."""
    cpu = (cpu or "host").strip()
    features = (features or "").strip()
    if cpu == "host" and not features:
        return "host"
    return f"{cpu}|{features}"


_override = contextvars.ContextVar("jitgrad_target", default=None)


def current_spec():
    """(cpu, features) in force: a Session's choice (`using`), else the environment."""
    spec = _override.get()
    if spec is not None:
        return spec
    return os.environ.get(ENV_CPU, ""), os.environ.get(ENV_FEATURES, "")


def current():
    return get(*current_spec())


def current_key():
    return spec_key(*current_spec())


@contextlib.contextmanager
def using(spec):
    """Generate code for `spec` = (cpu, features) inside the block (None: no change)."""
    if spec is None:
        yield
        return
    token = _override.set(spec)
    try:
        yield
    finally:
        _override.reset(token)


def check_runnable(target):
    """Raises FailedPreconditionError when this host cannot execute `target`'s code."""
    missing = target.missing_on_host()
    if missing:
        raise FailedPreconditionError(
            None, None,
            f"jitgrad: this kernel was compiled for {target.describe()}, which needs CPU features "
            f"this host lacks ({', '.join(missing)}); it can be compiled and inspected (explain) "
            f"but not run here.  Unset {ENV_CPU}/{ENV_FEATURES} (or the Session's "
            f"jitgrad_target_cpu) to compile for this host.")


def from_key(key):
    """The Target a kernel's meta["target"] names ("host" or "cpu|features")."""
    if key in (None, "host"):
        return get()
    cpu, _, features = key.partition("|")
    return get(cpu, features)


class ForeignCode:
    """Stands in for the loaded code (and its entry) of a kernel compiled for a CPU
    this host cannot run: the object code is never mapped, calling raises."""

    def __init__(self, target):
        self.target = target
        self.loader = f"not loaded (compiled for {target.describe()})"

    def address(self, name):
        check_runnable(self.target)
        raise AssertionError("unreachable")

    def __call__(self, *args):
        check_runnable(self.target)
        raise AssertionError("unreachable")


def foreign_code(meta):
    """A ForeignCode if the kernel described by `meta` cannot run on this host, else None."""
    key = meta.get("target", "host")
    if key == "host":
        return None
    t = from_key(key)
    return ForeignCode(t) if t.missing_on_host() else None
