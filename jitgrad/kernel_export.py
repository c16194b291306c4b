"""Compiled kernels as data: export the kernel of one concrete run from this process,
install it into another process's memory cache.

    shipped = export_kernel(session, fetches, feed_dict)   # compiles or finds it here
    ...send `shipped` (a picklable ShippedKernel) to another process...
    install(shipped)   # -> "installed" | "foreign" | "none"

The other process then runs the same graph with ``Session.run`` and finds the kernel in
its memory cache under the key its own compiler computes: no passes, no code generator.
That only holds when both processes compute the same key, i.e. when their fingerprints
(toolchain, jitgrad sources, host CPU name and features: ``jitgrad.cache.
environment_fingerprint``) are equal; ``install`` checks that first and declines a
kernel built for another host ("foreign"): that process compiles its own kernel when it
first runs the graph.  ``cache_info()['installed']`` counts kernels installed this way.
"""
import logging
from dataclasses import dataclass

from . import compiler
from .cache import environment_fingerprint, key as cache_key

log = logging.getLogger("jitgrad.cache")


@dataclass(frozen=True)
class ShippedKernel:
    """One compiled kernel with the keys a compiler looks it up by.  ``obj`` is None
    when the run does not compile (it runs in the reference interpreter)."""
    keys: tuple
    obj: bytes
    meta: dict
    fingerprint: dict


def export_kernel(session, fetches, feed_dict):
    """The kernel that ``session.run(fetches, feed_dict)`` runs, compiled (or found in a
    cache) here, as a ShippedKernel.  Nothing is executed."""
    elements = session._fetch_plan(fetches).elements
    fed = session._fed_list(feed_dict)
    plan = compiler.make_plan(session, elements, fed)
    fingerprint = environment_fingerprint()
    if plan.fallback:
        return ShippedKernel((), None, {}, fingerprint)
    # The keys another process's make_plan will look the kernel up by: the pre-pass key,
    # unless the passes change the argument layout (then make_plan files the kernel under
    # the post-pass key only, and a pre-pass hit would call it with the wrong layout).
    pre = compiler.build_pre_program(session, elements, fed)
    post = compiler.optimise(compiler.build_pre_program(session, elements, fed))
    flush = plan.kernel.meta["flush_denormals"]   # the mode the kernel was built in (codegen/kernel.py always records it)
    keys = [cache_key.post_pass_key(post, flush=flush).hex]
    if compiler._layout(post) == compiler._layout(pre):
        keys.append(cache_key.pre_pass_key(pre, flush=flush).hex)
    k = plan.kernel
    return ShippedKernel(tuple(keys), bytes(k.obj), dict(k.meta), fingerprint)


def fingerprint_difference(fingerprint):
    """{field: (theirs, ours)} for the fingerprint fields that differ from this process's."""
    ours = environment_fingerprint()
    return {k: (fingerprint.get(k), ours.get(k)) for k in sorted(set(ours) | set(fingerprint))
            if fingerprint.get(k) != ours.get(k)}


def install(shipped):
    """Puts a shipped kernel into this process's memory cache, loaded through the usual
    loader (jitgrad's ELF loader, or MCJIT).  Returns "installed", "foreign" (built for
    another host or toolchain: declined, this process will compile its own) or "none"
    (the run has no kernel)."""
    if shipped.obj is None:
        return "none"
    diff = fingerprint_difference(shipped.fingerprint)
    if diff:
        log.warning("jitgrad: a shipped kernel was built for another host/toolchain (%s); this process "
                    "compiles its own", ", ".join(f"{k}: {a!r} here {b!r}" for k, (a, b) in diff.items()))
        compiler._stats["foreign"] += 1
        return "foreign"
    kernel = compiler.Kernel(shipped.keys[0], shipped.obj, dict(shipped.meta), source="installed")
    compiler._remember(shipped.keys, kernel)
    compiler._stats["installed"] += 1
    return "installed"
