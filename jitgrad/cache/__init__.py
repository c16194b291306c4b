"""Kernel caches.  `jitgrad.cache.disk`: compiled object code on disk, shared across
processes (see its docstring for the integration snippet, settings and file format).
`jitgrad.cache.native.load`: object code -> callable addresses (jitgrad's ELF loader,
`jitgrad.cache.elf`, or MCJIT where that declines).

Importing this package is cheap (standard library only)."""
from .disk import (DEFAULT_MAX_BYTES, FORMAT_VERSION, DiskCache, default_cache,  # noqa: F401
                   default_directory, environment_fingerprint, make_key, set_enabled)

__all__ = ["DiskCache", "default_cache", "default_directory", "environment_fingerprint", "make_key",
           "set_enabled", "DEFAULT_MAX_BYTES", "FORMAT_VERSION"]
