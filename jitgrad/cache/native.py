"""Load object code (from `TargetMachine.emit_object`) into the process, without LLVM's
optimiser or code generator.

    payload = host_target_machine().emit_object(llvm_module)      # compile side
    code = load(payload)                                          # load side (any process)
    fn = ctypes.CFUNCTYPE(...)(code.address("entry"))             # keep `code` alive!

`load` uses jitgrad's own ELF loader (jitgrad/cache/elf.py) where it can: it needs no
llvmlite.binding, so a process whose kernels all come from the disk cache never loads
LLVM.  Anything that loader does not handle goes to MCJIT (`load_object`), whose
RuntimeDyld relocates the object and resolves external symbols at `finalize_object()`.
`JITGRAD_LOADER=mcjit` forces MCJIT, `=elf` forbids the fallback (tests).

A program compiled as several units (jitgrad/codegen/backend.py: each matmul function
is its own LLVM module, optimised and emitted on its own thread) is one payload, a
*bundle* of their objects (`pack` / `unpack`); loading links them, resolving the
symbols one unit calls and another defines.
"""
import logging
import os
import struct
import threading

from . import elf

log = logging.getLogger("jitgrad.cache")

_INIT = False
_LOCK = threading.Lock()
_LOAD_LOCK = threading.Lock()


def llvm_binding():
    """llvmlite.binding with the native target initialised (once): imported here, on
    first use, so a process whose kernels all come from the disk cache never loads it."""
    global _INIT
    import llvmlite.binding as llvm
    if not _INIT:
        with _LOCK:
            if not _INIT:
                llvm.initialize_native_target()
                llvm.initialize_native_asmprinter()
                _INIT = True
    return llvm


_FACTS = None


def llvm_host_facts():
    """LLVM's view of this host, asked once per process: LLVM version, process triple,
    CPU name and feature string -- what the cache key's fingerprint holds and what
    every TargetMachine is built from."""
    global _FACTS
    if _FACTS is None:
        llvm = llvm_binding()
        try:
            features = llvm.get_host_cpu_features().flatten()
        except Exception:  # not available on some hosts
            features = ""
        _FACTS = {"llvm": ".".join(map(str, llvm.llvm_version_info)), "triple": llvm.get_process_triple(),
                  "cpu": llvm.get_host_cpu_name(), "features": features}
    return dict(_FACTS)


def host_target_machine(opt=3, **kwargs):
    """A TargetMachine for this host (the one `make_key`'s fingerprint describes).
    A fresh one per call: `create_mcjit_compiler` takes ownership of the one it gets
    (and frees it with the engine), so one given to MCJIT must never be shared."""
    facts = llvm_host_facts()
    target = llvm_binding().Target.from_triple(facts["triple"])
    return target.create_target_machine(cpu=facts["cpu"], features=facts["features"], opt=opt, **kwargs)


# ------------------------------------------------------------------ bundles
# BUNDLE_MAGIC, u32 object count, one u64 size per object, then the objects in order.
# One object is stored as itself (a plain ELF object, as before bundles existed).
BUNDLE_MAGIC = b"JGBUNDL1"
_COUNT = struct.Struct("<I")
_SIZE = struct.Struct("<Q")
MAX_OBJECTS = 4096


def pack(objects):
    """Object code bytes of one program's units -> one payload (their order is kept)."""
    objects = [bytes(o) for o in objects]
    if len(objects) == 1:
        return objects[0]
    if not 1 < len(objects) <= MAX_OBJECTS:
        raise ValueError(f"a bundle holds 1 to {MAX_OBJECTS} objects, not {len(objects)}")
    return b"".join([BUNDLE_MAGIC, _COUNT.pack(len(objects))] + [_SIZE.pack(len(o)) for o in objects] + objects)


def unpack(payload):
    """A payload -> its objects' bytes.  A malformed bundle (truncated, sizes that do not
    add up) raises elf.ElfError, never reads outside `payload`."""
    payload = bytes(payload)
    if not payload.startswith(BUNDLE_MAGIC):
        return [payload]
    at = len(BUNDLE_MAGIC)
    if len(payload) < at + _COUNT.size:
        raise elf.ElfError("bundle truncated in its header")
    (n,) = _COUNT.unpack_from(payload, at)
    at += _COUNT.size
    if not 1 < n <= MAX_OBJECTS or len(payload) < at + n * _SIZE.size:
        raise elf.ElfError(f"bundle header names {n} objects")
    sizes = [_SIZE.unpack_from(payload, at + i * _SIZE.size)[0] for i in range(n)]
    at += n * _SIZE.size
    if at + sum(sizes) != len(payload):
        raise elf.ElfError(f"bundle of {len(payload)} bytes, its header says {at + sum(sizes)}")
    out = []
    for size in sizes:
        out.append(payload[at:at + size])
        at += size
    return out


def load_object(payload, symbol="entry"):
    """MCJIT: -> (engine, address of `symbol`; None when `symbol` is None).  The machine code
    lives as long as `engine` does.  `payload`: an object or a bundle.  Raises KeyError if
    the objects do not define `symbol`, RuntimeError if LLVM refuses them."""
    llvm = llvm_binding()
    objects = unpack(payload)
    for name, addr in elf.EXTRA_SYMBOLS.items():   # jitgrad's own functions a kernel calls (ops/logging_ops.py)
        llvm.add_symbol(name, addr)
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), host_target_machine(opt=0))
    for obj in objects:      # RuntimeDyld resolves the symbols between them at finalize_object
        engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
    engine.finalize_object()
    if symbol is None:
        return engine, None
    address = engine.get_function_address(symbol)
    if not address:
        raise KeyError(f"symbol {symbol!r} not found in the cached object")
    return engine, address


class _McjitCode:
    loader = "mcjit"

    def __init__(self, payload):
        with _LOAD_LOCK:     # MCJIT engine creation is not thread-safe
            self.engine, _ = load_object(payload, None)

    def address(self, name):
        address = self.engine.get_function_address(name)
        if not address:
            raise KeyError(f"symbol {name!r} not found in the object")
        return address


def load(payload):
    """Object code (an object or a bundle) -> loaded code with `.address(symbol)` and
    `.loader` ('elf' | 'mcjit').  The code stays mapped as long as the returned object
    lives.  A malformed bundle raises elf.ElfError."""
    mode = os.environ.get("JITGRAD_LOADER", "auto").strip().lower()
    objects = unpack(payload)
    if mode != "mcjit" and elf.supported():
        try:
            return elf.ElfImage(objects)
        except elf.ElfUnsupported as e:
            if mode == "elf":
                raise
            log.debug("jitgrad: ELF loader declined (%s); loading with MCJIT", e)
    return _McjitCode(payload)
