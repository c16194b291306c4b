"""A small loader for the relocatable x86-64 ELF objects that LLVM emits for our kernels.

Why not MCJIT: loading an object through MCJIT means importing llvmlite.binding
(dlopen of a 100 MB LLVM, ~40 ms) in a process that otherwise never needs LLVM —
a warm start whose kernels all come from the disk cache.  Our objects are simple:
the alloc sections (.ltext, .rodata.cst*, maybe .data/.bss) and their RELA
relocations (large code model: R_X86_64_64; small: PC32/PLT32/GOTPCREL*), and a
handful of external symbols (sched_yield, memcpy, libm).  So: lay the alloc
sections out in one anonymous mapping, apply the relocations, resolve external
symbols with dlsym, then mprotect code/constants read+execute (never writable and
executable at once).

Every offset, size and index in the object is checked before it is used, so a
malformed object raises `ElfError`, never reads or writes outside the buffers.
Anything this loader does not understand (another machine, relocation type,
symbol kind) raises `ElfUnsupported`; the caller falls back to MCJIT.
"""
import ctypes
import os
import struct
import sys

# ELF constants (System V gABI, x86-64 psABI)
_SHT_SYMTAB, _SHT_RELA, _SHT_NOBITS, _SHT_REL = 2, 4, 8, 9
_SHF_WRITE, _SHF_ALLOC = 0x1, 0x2
_SHN_UNDEF, _SHN_LORESERVE, _SHN_ABS = 0, 0xFF00, 0xFFF1
_STB_GLOBAL, _STB_WEAK = 1, 2
_R_64, _R_PC32, _R_GOTPCREL, _R_32, _R_32S, _R_PLT32 = 1, 2, 9, 10, 11, 4
_R_GOTPCRELX, _R_REX_GOTPCRELX, _R_PC64 = 41, 42, 24
_R_NONE = 0

_PAGE = 4096
_MAX_NOBITS = 1 << 30     # a kernel's zero-initialised data is a few KiB; this bounds the mapping
_PROT_READ, _PROT_WRITE, _PROT_EXEC = 1, 2, 4
_MAP_PRIVATE, _MAP_ANONYMOUS, _MAP_32BIT = 0x02, 0x20, 0x40
_STUB = b"\xff\x25\x00\x00\x00\x00"   # jmp *0(%rip); the 8-byte target follows


class ElfError(ValueError):
    """The object is malformed."""


class ElfUnsupported(Exception):
    """The object is well formed but uses something this loader does not handle."""


def supported():
    """True where this loader can run at all (Linux on x86-64)."""
    return sys.platform.startswith("linux") and os.uname().machine in ("x86_64", "amd64")


_libc = None
_libm = None


def _c():
    global _libc
    if _libc is None:
        lib = ctypes.CDLL(None, use_errno=True)
        lib.mmap.restype = ctypes.c_void_p
        lib.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                             ctypes.c_long)
        lib.mprotect.restype = ctypes.c_int
        lib.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
        lib.munmap.restype = ctypes.c_int
        lib.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
        _libc = lib
    return _libc


EXTRA_SYMBOLS = {}   # name -> address: functions jitgrad itself gives kernels (ops/logging_ops.py's region print hook)


def _dlsym(name):
    """Address of an external symbol in this process (jitgrad's, libc, libm), or 0."""
    global _libm
    if name in EXTRA_SYMBOLS:
        return EXTRA_SYMBOLS[name]
    for lib in (_c(), _libm):
        if lib is None:
            continue
        try:
            return ctypes.cast(getattr(lib, name), ctypes.c_void_p).value or 0
        except AttributeError:
            pass
    if _libm is None:
        try:
            _libm = ctypes.CDLL("libm.so.6")
        except OSError:
            _libm = False
        if _libm:
            return _dlsym(name)
    return 0


def _unpack(fmt, buf, off):
    try:
        return struct.unpack_from(fmt, buf, off)
    except struct.error:
        raise ElfError(f"object truncated at offset {off}") from None


def _align(x, a):
    return (x + a - 1) // a * a


class _Section:
    __slots__ = ("index", "type", "flags", "offset", "size", "link", "info", "align", "entsize", "at")

    def __init__(self, index, fields):
        (_name, self.type, self.flags, _addr, self.offset, self.size, self.link, self.info, self.align,
         self.entsize) = fields
        self.index = index
        self.at = None                     # offset in the mapping, for alloc sections


def _parse(data):
    if len(data) < 64 or data[:4] != b"\x7fELF":
        raise ElfError("not an ELF object")
    if data[4] != 2 or data[5] != 1:
        raise ElfUnsupported("not a little-endian 64-bit ELF object")
    e_type, e_machine = _unpack("<HH", data, 16)
    if e_type != 1 or e_machine != 62:
        raise ElfUnsupported(f"not a relocatable x86-64 object (type {e_type}, machine {e_machine})")
    (e_shoff,) = _unpack("<Q", data, 40)
    e_shentsize, e_shnum = _unpack("<HH", data, 58)
    if e_shentsize != 64 or e_shnum == 0 or e_shoff + 64 * e_shnum > len(data):
        raise ElfError("bad section header table")
    secs = [_Section(i, _unpack("<IIQQQQIIQQ", data, e_shoff + 64 * i)) for i in range(e_shnum)]
    for s in secs:
        # every type but NOBITS has its bytes in the file -- SHT_NULL too: a null-typed
        # section flagged ALLOC is still copied into the mapping
        if s.type != _SHT_NOBITS and s.size and s.offset + s.size > len(data):
            raise ElfError(f"section {s.index} lies outside the object")
        if s.flags & _SHF_ALLOC and s.size > _MAX_NOBITS:   # (a .bss is not in the file: bound it)
            raise ElfError(f"section {s.index} of {s.size} bytes is too large")
        if s.align > _PAGE or (s.align & (s.align - 1)):
            raise ElfUnsupported(f"section {s.index} alignment {s.align}")
    return secs


def _symbols(data, secs):
    tabs = [s for s in secs if s.type == _SHT_SYMTAB]
    if len(tabs) != 1:
        raise ElfError("expected exactly one symbol table")
    tab = tabs[0]
    if tab.entsize != 24 or tab.link >= len(secs):
        raise ElfError("bad symbol table")
    strtab = secs[tab.link]
    names = data[strtab.offset:strtab.offset + strtab.size]
    syms = []
    for i in range(tab.size // 24):
        st_name, st_info, _other, st_shndx, st_value, _size = _unpack("<IBBHQQ", data, tab.offset + 24 * i)
        if st_name >= max(len(names), 1) and st_name != 0:
            raise ElfError(f"symbol {i}: name outside the string table")
        end = names.find(b"\0", st_name)
        name = names[st_name:end if end >= 0 else len(names)].decode("latin-1")
        syms.append((name, st_info >> 4, st_shndx, st_value))
    return syms


class _Object:
    """One relocatable object, parsed and checked: its sections, symbols and the
    relocations of its loaded sections."""

    def __init__(self, data):
        self.n = 0                             # its place in the bundle
        self.data = data = bytes(data)
        self.secs = secs = _parse(data)
        self.syms = _symbols(data, secs)
        self.alloc = [s for s in secs if s.flags & _SHF_ALLOC and s.size]
        relas = [s for s in secs if s.type in (_SHT_RELA, _SHT_REL)]
        for r in relas:
            if r.type == _SHT_REL:
                raise ElfUnsupported("REL relocations")
            if r.entsize != 24 or r.info >= len(secs):
                raise ElfError("bad relocation section")
        loaded = {s.index for s in self.alloc}
        self.relocs = []
        for r in relas:
            target = secs[r.info]
            if target.index not in loaded:     # relocations of a non-loaded section (debug info)
                continue
            for k in range(r.size // 24):
                off, info, addend = _unpack("<QQq", data, r.offset + 24 * k)
                sym, typ = info >> 32, info & 0xFFFFFFFF
                if sym >= len(self.syms):
                    raise ElfError("relocation names a symbol outside the table")
                self.relocs.append((target, off, typ, sym, addend))

    def definitions(self):
        """(name, symbol index) of the global symbols this object defines."""
        for i, (name, bind, shndx, _v) in enumerate(self.syms):
            if name and bind in (_STB_GLOBAL, _STB_WEAK) and shndx != _SHN_UNDEF and shndx < _SHN_LORESERVE:
                yield name, i


class ElfImage:
    """Object files relocated into this process: one object, or the objects of one
    program's bundle (jitgrad/cache/native.py), laid out in one mapping, where a
    symbol one object uses and another defines is resolved to that definition.
    `address(name)` gives a global symbol's address; the code stays mapped as long
    as this object lives."""

    loader = "elf"      # what jitgrad.cache.native.load reports (the other one is "mcjit")

    def __init__(self, data):
        if not supported():
            raise ElfUnsupported("ELF loading needs Linux on x86-64")
        objs = [_Object(d) for d in (data if isinstance(data, (list, tuple)) else [data])]
        for n, obj in enumerate(objs):
            obj.n = n
        if not objs:
            raise ElfError("no object to load")
        defs = {}            # name -> (object, symbol index): the bundle's own global symbols
        for obj in objs:
            for name, i in obj.definitions():
                if name in defs and obj.syms[i][1] == _STB_GLOBAL == defs[name][0].syms[defs[name][1]][1]:
                    raise ElfError(f"symbol {name!r} defined by two objects of the bundle")
                defs.setdefault(name, (obj, i))

        # External symbols are resolved now; calls to them (PLT32) go through a stub and
        # GOT-relative loads through a slot, both placed after the read-only sections.
        # A symbol another object of the bundle defines is reached directly (one mapping).
        externals, got, stubs = {}, {}, {}
        for obj in objs:
            for _t, _o, typ, sym, _a in obj.relocs:
                name, _bind, shndx, _v = obj.syms[sym]
                if shndx == _SHN_UNDEF and sym != 0 and name not in defs:
                    if name == "_GLOBAL_OFFSET_TABLE_":
                        raise ElfUnsupported("GOT-relative relocations (large code model, PIC)")
                    if name not in externals:
                        addr = _dlsym(name)
                        if not addr:
                            raise ElfUnsupported(f"unresolved external symbol {name!r}")
                        externals[name] = addr
                    if typ == _R_PLT32:
                        stubs.setdefault(name, None)
                if typ in (_R_GOTPCREL, _R_GOTPCRELX, _R_REX_GOTPCRELX):
                    got.setdefault((obj.n, sym), None)

        # Layout: read-only and executable sections, GOT, stubs | writable sections (own pages).
        at = 0
        for obj in objs:
            for s in obj.alloc:
                if not s.flags & _SHF_WRITE:
                    s.at = at = _align(at, max(s.align, 1))
                    at += s.size
        at = _align(at, 16)
        for slot in got:
            got[slot], at = at, at + 8
        for name in stubs:
            stubs[name], at = at, at + 16
        rx_end = at = _align(max(at, 1), _PAGE)
        for obj in objs:
            for s in obj.alloc:
                if s.flags & _SHF_WRITE:
                    s.at = at = _align(at, max(s.align, 1))
                    at += s.size
        size = _align(at, _PAGE)

        libc = _c()
        # Absolute 32-bit relocations (small code model, non-PIC) need the low 2 GiB.
        low = _MAP_32BIT if any(typ in (_R_32, _R_32S) for obj in objs for _t, _o, typ, _s, _a in obj.relocs) else 0
        base = libc.mmap(None, size, _PROT_READ | _PROT_WRITE, _MAP_PRIVATE | _MAP_ANONYMOUS | low, -1, 0)
        if base is None or base == ctypes.c_void_p(-1).value:
            raise MemoryError(f"mmap of {size} bytes failed (errno {ctypes.get_errno()})")
        self._base, self._size, self._munmap, self._finalizing = base, size, libc.munmap, sys.is_finalizing
        try:
            buf = (ctypes.c_char * size).from_address(base)
            for obj in objs:
                for s in obj.alloc:
                    if s.type != _SHT_NOBITS:
                        chunk = obj.data[s.offset:s.offset + s.size]
                        if len(chunk) != s.size:    # (_parse checked it; memmove must never read past data)
                            raise ElfError(f"section {s.index} lies outside the object")
                        ctypes.memmove(base + s.at, chunk, s.size)

            def sym_addr(obj, sym):
                name, _bind, shndx, value = obj.syms[sym]
                if shndx == _SHN_UNDEF:
                    if not sym:
                        return 0
                    if name in defs:
                        return sym_addr(*defs[name])     # (a definition is never UNDEF: no recursion loop)
                    return externals[name]
                if shndx == _SHN_ABS:
                    return value
                if shndx >= _SHN_LORESERVE or shndx >= len(obj.secs):
                    raise ElfUnsupported(f"symbol {name!r} in special section {shndx:#x}")
                sec = obj.secs[shndx]
                if sec.at is None:
                    raise ElfError(f"symbol {name!r} in a section that is not loaded")
                return base + sec.at + value

            for (n, sym), slot in got.items():
                struct.pack_into("<Q", buf, slot, sym_addr(objs[n], sym))
            for name, slot in stubs.items():
                buf[slot:slot + 6] = _STUB
                struct.pack_into("<Q", buf, slot + 6, externals[name])

            for obj in objs:
                for target, off, typ, sym, addend in obj.relocs:
                    self._relocate(buf, base, obj, target, off, typ, sym, addend, sym_addr, got, stubs)

            if libc.mprotect(base, rx_end, _PROT_READ | _PROT_EXEC) != 0:
                raise OSError(ctypes.get_errno(), "mprotect(PROT_EXEC) refused")
        except BaseException:
            self.close()
            raise

        self._symbols = {}
        for obj in objs:
            for name, i in obj.definitions():
                self._symbols.setdefault(name, sym_addr(obj, i))

    @staticmethod
    def _relocate(buf, base, obj, target, off, typ, sym, addend, sym_addr, got, stubs):
        width = 8 if typ in (_R_64, _R_PC64) else 4
        if typ == _R_NONE:
            return
        if off + width > target.size or target.type == _SHT_NOBITS:
            raise ElfError("relocation outside its section")
        p = base + target.at + off
        if typ == _R_64:
            value, fmt = sym_addr(obj, sym) + addend, "<Q"
        elif typ == _R_PC64:
            value, fmt = sym_addr(obj, sym) + addend - p, "<q"
        elif typ in (_R_PC32, _R_PLT32):
            name = obj.syms[sym][0]
            stub = typ == _R_PLT32 and obj.syms[sym][2] == _SHN_UNDEF and name in stubs
            s = base + stubs[name] if stub else sym_addr(obj, sym)
            value, fmt = s + addend - p, "<i"
        elif typ in (_R_GOTPCREL, _R_GOTPCRELX, _R_REX_GOTPCRELX):
            value, fmt = base + got[(obj.n, sym)] + addend - p, "<i"
        elif typ == _R_32:
            value, fmt = sym_addr(obj, sym) + addend, "<I"
        elif typ == _R_32S:
            value, fmt = sym_addr(obj, sym) + addend, "<i"
        else:
            raise ElfUnsupported(f"relocation type {typ}")
        if fmt == "<Q":
            value &= (1 << 64) - 1
        try:
            struct.pack_into(fmt, buf, target.at + off, value)
        except struct.error:
            raise ElfUnsupported(f"relocation type {typ} out of range") from None

    def address(self, name):
        """Address of a global symbol defined by the object; KeyError if there is none."""
        try:
            return self._symbols[name]
        except KeyError:
            raise KeyError(f"symbol {name!r} not found in the object") from None

    def close(self):
        """Unmaps the code.  Only when nothing can call it any more: never at interpreter
        exit, where daemon threads of the kernel thread pool may still be inside it."""
        base, self._base = getattr(self, "_base", None), None
        munmap, finalizing = getattr(self, "_munmap", None), getattr(self, "_finalizing", None)
        if base and munmap is not None and finalizing is not None and not finalizing():
            munmap(base, self._size)

    def __del__(self):
        self.close()
