"""Per-function profile of jitgrad's compiled kernels with Linux `perf`.

Kernels are mapped by jitgrad's own ELF loader (jitgrad/cache/elf.py) into anonymous
memory, which `perf report` shows as ``[JIT] tid N`` addresses.  Importing this module
wraps the loader so that every mapped kernel's functions (the entry ``<key>_mt`` with
its fused loop nests inline, each GEMM ``<key>_mmK`` and its ``_pack``, the barrier)
are written to /tmp/perf-<pid>.map, the file `perf` reads to name JIT code.

  perf record -F 4000 -D 4000 -- python bench/perf_map.py W3 3000
  perf report --no-children --sort sym
  perf script -F tid,sym | sort | uniq -c     (per thread: who waits in the barrier)

``python bench/perf_map.py CASE CALLS`` builds a bench/workloads.py case (compiled,
JITGRAD_NUM_THREADS threads) and calls it CALLS times (-D skips the compile).
Sizes are to the next symbol, so a local function without a symbol counts toward
the one before it.
"""
import os
import sys

from jitgrad.cache import elf

_SHF_EXECINSTR = 0x4
_load = elf.ElfImage.__init__


def _symbols(image, data):
    """(address, size, name) of the named symbols in the image's executable sections,
    laid out as ElfImage lays them out (read-only sections first, in object order)."""
    objs = [elf._Object(d) for d in (data if isinstance(data, (list, tuple)) else [data])]
    at, out = 0, []
    for obj in objs:
        for s in obj.alloc:
            if s.flags & elf._SHF_WRITE:
                continue
            at = elf._align(at, max(s.align, 1))
            if s.flags & _SHF_EXECINSTR:
                syms = sorted((v, n) for n, _bind, sh, v in obj.syms if n and sh == s.index)
                for k, (v, n) in enumerate(syms):
                    end = syms[k + 1][0] if k + 1 < len(syms) else s.size
                    if end > v:
                        out.append((image._base + at + v, end - v, n))
            at += s.size
    return out


def _load_and_map(self, data):
    _load(self, data)
    with open(f"/tmp/perf-{os.getpid()}.map", "a") as f:
        for a, size, name in _symbols(self, data):
            f.write(f"{a:x} {size:x} {name}\n")


elf.ElfImage.__init__ = _load_and_map


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    import workloads as W
    case = sys.argv[1] if len(sys.argv) > 1 else "W3"
    calls = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    fn = getattr(W, f"{case.lower()}_jitgrad")("compiled")
    for _ in range(calls):
        fn()


if __name__ == "__main__":
    main()
